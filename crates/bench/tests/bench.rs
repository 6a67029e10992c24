//! The lab's own tests: the checks catch a misbehaving server, and the built-in driver counts
//! requests, statuses and bytes exactly, against real servers on loopback.

// Helper functions of this test crate are outside #[test] functions, where clippy.toml's
// allow-*-in-tests does not reach.
#![allow(clippy::unwrap_used)]

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use sluice_bench::check::{self, Expect};
use sluice_bench::client::Endpoint;
use sluice_bench::driver::builtin;
use sluice_bench::fixtures;
use sluice_bench::sampler::Sampler;
use sluice_bench::scenario::{self, Protocol, Scenario};
use sluice_bench::target::process::Address;
use sluice_bench::target::{self, Context, Origins, TargetKind, caddy, haproxy, varnish};
use tokio::net::TcpListener;

fn scenario(name: &str) -> Scenario {
    scenario::all(true)
        .into_iter()
        .find(|s| s.name == name)
        .unwrap()
}

/// A hand-rolled server answering every request with `answer(request headers)`.
async fn serve_fn<F>(answer: F) -> SocketAddr
where
    F: Fn(&http::HeaderMap) -> Response<Full<Bytes>> + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let resp = answer(req.headers());
                    async move { Ok::<_, Infallible>(resp) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    addr
}

fn endpoint(addr: SocketAddr) -> Endpoint {
    Endpoint { addr, tls: false }
}

const EXPECT_ALL: Expect = Expect {
    balancing: true,
    caching: true,
};

#[tokio::test]
async fn the_compression_check_catches_a_server_that_ignores_accept_encoding() {
    let page = fixtures::page();
    let s = scenario("static-gzip-6");
    let body = page.clone();
    let ignores = serve_fn(move |_| Response::new(Full::new(body.clone()))).await;
    let err = check::run(&s, &endpoint(ignores), &page, EXPECT_ALL)
        .await
        .unwrap_err();
    assert!(err.contains("did not compress"), "{err}");

    // The same server, compressing when asked, passes.
    let body = fixtures::gzip(&page, 6);
    let honest = serve_fn(move |headers| {
        assert_eq!(headers["accept-encoding"], "gzip");
        Response::builder()
            .header("content-encoding", "gzip")
            .body(Full::new(body.clone()))
            .unwrap()
    })
    .await;
    check::run(&s, &endpoint(honest), &page, EXPECT_ALL)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_body_check_catches_a_wrong_body_and_a_corrupt_encoding() {
    let page = fixtures::page();
    let s = scenario("static-gzip-1");
    let mut wrong = page.to_vec();
    wrong[1000] ^= 1;
    let wrong = fixtures::gzip(&wrong, 1);
    let server = serve_fn(move |_| {
        Response::builder()
            .header("content-encoding", "gzip")
            .body(Full::new(wrong.clone()))
            .unwrap()
    })
    .await;
    let err = check::run(&s, &endpoint(server), &page, EXPECT_ALL)
        .await
        .unwrap_err();
    assert!(err.contains("first difference at byte 1000"), "{err}");

    let truncated = fixtures::gzip(&page, 1).slice(..1000);
    let server = serve_fn(move |_| {
        Response::builder()
            .header("content-encoding", "gzip")
            .body(Full::new(truncated.clone()))
            .unwrap()
    })
    .await;
    let err = check::run(&s, &endpoint(server), &page, EXPECT_ALL)
        .await
        .unwrap_err();
    assert!(err.contains("does not decode"), "{err}");
}

#[tokio::test]
async fn the_balance_check_catches_a_split_that_ignores_weights() {
    let s = scenario("date-uneven");
    let identity = sluice_bench::expected::identity_body(&s, &fixtures::page())
        .await
        .unwrap();
    // Strict alternation: 50/50 where 3:1 was configured.
    let turn = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let body = identity.clone();
    let server = serve_fn(move |_| {
        let i = turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 2;
        Response::builder()
            .header("x-origin", check::origin_name(i))
            .body(Full::new(body.clone()))
            .unwrap()
    })
    .await;
    let err = check::run(&s, &endpoint(server), &identity, EXPECT_ALL)
        .await
        .unwrap_err();
    assert!(err.contains("does not follow the weights"), "{err}");
}

/// A demo origin in-process on 127.0.0.1 port 0.
async fn origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions::default());
    tokio::spawn(origin.serve_tcp(listener, std::future::pending::<()>()));
    addr
}

#[tokio::test]
async fn the_driver_counts_requests_statuses_and_bytes_over_http1() {
    let addr = origin().await;
    let mut load = scenario("post-get").load;
    load.clients = 3;
    load.requests = 50;
    let m = builtin::load(&load, &endpoint(addr)).await.unwrap();
    assert_eq!(m.requests, 50);
    assert_eq!(m.failures, 0);
    assert_eq!(m.statuses.get(&200), Some(&50));
    assert_eq!(m.body_bytes, 50 * 120, "/hello is 120 bytes");
    assert!(m.header_bytes > 50 * 40, "{}", m.header_bytes);
    assert!(m.latency_p50_us > 0.0 && m.latency_p99_us >= m.latency_p50_us);
    assert!(m.requests_per_sec > 0.0);
}

#[tokio::test]
async fn the_driver_opens_streams_over_http2_and_counts_post_bodies_and_failures() {
    let addr = origin().await;
    let mut load = scenario("post-raw").load;
    load.protocol = Protocol::H2;
    load.clients = 2;
    load.streams = 4;
    load.requests = 40;
    let m = builtin::load(&load, &endpoint(addr)).await.unwrap();
    assert_eq!((m.requests, m.failures), (40, 0));
    assert_eq!(m.statuses.get(&200), Some(&40));

    // An unknown path: every answer is a 404, counted as a failure with its status.
    load.path = "/no-such-path".into();
    load.requests = 10;
    let m = builtin::load(&load, &endpoint(addr)).await.unwrap();
    assert_eq!(m.requests, 10);
    assert_eq!(m.failures, 10);
    assert_eq!(m.statuses.get(&404), Some(&10));
    let why = builtin::describe_failures(&m).unwrap();
    assert!(why.contains("10x 404"), "{why}");
}

#[tokio::test]
async fn a_refused_connection_is_an_error_not_a_hang() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let load = scenario("post-get").load;
    let err = builtin::load(&load, &endpoint(addr)).await.err().unwrap();
    assert!(err.contains("connecting"), "{err}");
}

/// Varnish, started as the lab starts it, caches the gzipped JSON (the check: gzip, a HIT on
/// the second request), and the sampler counts the CPU of the cache process it forks: the PID
/// started is the manager, which does next to nothing while the child serves every request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn varnish_caches_and_the_cpu_of_its_cache_process_is_counted() {
    if !varnish::available() {
        common::skip(module_path!(), "varnish is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ctx = Context {
        work_dir: dir.path().into(),
        exe: "sluice".into(),
        server_cpus: "0".into(),
        load_cpus: "1".into(),
        workers: 1,
        page_dir: dir.path().join("site"),
        precompressed_dir: dir.path().join("site-precompressed"),
        cert: dir.path().join("cert.pem"),
        key: dir.path().join("key.pem"),
    };
    let mut origins = Origins::none();
    origins.addresses.push(Address::Tcp(origin().await));
    let s = scenario("date-cached-gzip-6");
    // Starting blocks on the readiness poll; the origin keeps serving on the other worker.
    let running = tokio::task::block_in_place(|| {
        target::start(TargetKind::Varnish, &s, &ctx, &origins)
            .unwrap_or_else(|e| panic!("starting varnish: {e:?}"))
    });
    let identity = sluice_bench::expected::identity_body(&s, &fixtures::page())
        .await
        .unwrap();
    check::run(&s, &running.endpoint, &identity, EXPECT_ALL)
        .await
        .unwrap();

    let sampler = Sampler::start(running.pid());
    let mut load = s.load.clone();
    load.requests = 3_000;
    let m = builtin::load(&load, &running.endpoint).await.unwrap();
    let usage = sampler.stop();
    tokio::task::block_in_place(|| running.process.stop());

    assert_eq!((m.requests, m.failures), (3_000, 0));
    // The stored gzip variant, not the 340 KB of identity.
    assert!(m.body_bytes / m.requests < 10_000, "{m:?}");
    // Two ticks of 10 ms at least: the child served 3,000 hits (tens of µs each); the manager
    // alone would show nothing.
    assert!(usage.cpu_secs >= 0.02, "{usage:?}");
}

fn lab_context(dir: &std::path::Path) -> Context {
    Context::for_tests(dir)
}

/// HAProxy, started as the lab starts it, caches the 340 KB JSON (the check: the body, a HIT on
/// the second request: its default max-object-size would refuse it), and the sampler counts
/// its CPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_caches_the_json_and_its_cpu_is_counted() {
    if !haproxy::available() {
        common::skip(module_path!(), "haproxy is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ctx = lab_context(dir.path());
    let mut origins = Origins::none();
    origins.addresses.push(Address::Tcp(origin().await));
    let s = scenario("date-cached-c6");
    let running = tokio::task::block_in_place(|| {
        target::start(TargetKind::Haproxy, &s, &ctx, &origins)
            .unwrap_or_else(|e| panic!("starting haproxy: {e:?}"))
    });
    let identity = sluice_bench::expected::identity_body(&s, &fixtures::page())
        .await
        .unwrap();
    check::run(&s, &running.endpoint, &identity, EXPECT_ALL)
        .await
        .unwrap();
    let sampler = Sampler::start(running.pid());
    let mut load = s.load.clone();
    load.requests = 300;
    let m = builtin::load(&load, &running.endpoint).await.unwrap();
    let usage = sampler.stop();
    tokio::task::block_in_place(|| running.process.stop());
    assert_eq!((m.requests, m.failures), (300, 0));
    assert_eq!(m.body_bytes, 300 * identity.len() as u64);
    // 300 responses of 340 KB: at least one 10 ms tick of CPU.
    assert!(usage.cpu_secs >= 0.01, "{usage:?}");
}

/// Caddy, started as the lab starts it (GOMAXPROCS=1, admin and autosave off), serves the page
/// gzipped at the scenario's level, writes nothing outside its directory, and the sampler
/// counts its CPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caddy_compresses_the_page_and_its_cpu_is_counted() {
    if !caddy::available() {
        common::skip(module_path!(), "caddy is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ctx = lab_context(dir.path());
    std::fs::create_dir_all(&ctx.page_dir).unwrap();
    std::fs::write(ctx.page_dir.join(fixtures::PAGE_NAME), fixtures::page()).unwrap();
    let s = scenario("static-gzip-1");
    let running = tokio::task::block_in_place(|| {
        target::start(TargetKind::Caddy, &s, &ctx, &Origins::none())
            .unwrap_or_else(|e| panic!("starting caddy: {e:?}"))
    });
    let identity = sluice_bench::expected::identity_body(&s, &fixtures::page())
        .await
        .unwrap();
    check::run(&s, &running.endpoint, &identity, EXPECT_ALL)
        .await
        .unwrap();
    let sampler = Sampler::start(running.pid());
    let mut load = s.load.clone();
    load.clients = 4;
    load.requests = 200;
    let m = builtin::load(&load, &running.endpoint).await.unwrap();
    let usage = sampler.stop();
    tokio::task::block_in_place(|| running.process.stop());
    assert_eq!((m.requests, m.failures), (200, 0));
    // Gzipped: well under the page's size.
    assert!(
        m.body_bytes / m.requests < identity.len() as u64 / 2,
        "{m:?}"
    );
    assert!(usage.cpu_secs >= 0.01, "{usage:?}");
    let target_dir = dir.path().join("static-gzip-1-caddy");
    assert!(!target_dir.join("xdg-config/caddy/autosave.json").exists());
    let json = std::fs::read_to_string(target_dir.join("caddy.json")).unwrap();
    assert!(json.contains("\"persist\": false"), "{json}");
}
