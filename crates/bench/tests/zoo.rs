//! The origin zoo against the lab's own check: each origin (Go's net/http, Node.js, Python
//! under uvicorn), started as the lab starts it, answers the scenarios' requests with the demo
//! origin's bytes (the date JSON, /hello, a /stream, the POST body /reqinfo hashed) and keeps
//! connections alive under load. Each is skipped loudly when its runtime is missing (a failure
//! under SLUICE_TEST_STRICT=1).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use sluice_bench::check::{self, Expect};
use sluice_bench::client::Endpoint;
use sluice_bench::driver::builtin;
use sluice_bench::scenario::{self, Scenario};
use sluice_bench::target::process::Address;
use sluice_bench::target::{Context, Origins};
use sluice_bench::zoo::{self, OriginKind};

fn scenario(name: &str) -> Scenario {
    scenario::all(true)
        .into_iter()
        .find(|s| s.name == name)
        .unwrap()
}

async fn answers_like_the_demo_origin(kind: OriginKind) {
    let dir = tempfile::tempdir().unwrap();
    let program = match zoo::prepare(kind, std::path::Path::new("sluice"), dir.path()) {
        Ok(p) => p,
        Err(why) => {
            common::skip(&format!("the {} origin", kind.name()), &why);
            return;
        }
    };
    let ctx = Context::for_tests(dir.path());
    let page = sluice_bench::fixtures::page();
    // A small stream (the suite's is 34 MB), the date JSON, /hello, and a gzipped POST
    // whose bytes the origin hashes.
    let mut stream = scenario("stream-raw");
    stream.load.path = "/stream?chunks=40&size=1000&cachebust=1".into();
    for s in [
        scenario("date-direct-c6"),
        scenario("post-get"),
        scenario("post-gz0"),
        stream,
    ] {
        let mut direct = s.clone();
        direct.setup = scenario::Setup::Direct;
        let origins = Origins::start(&direct, &ctx, &program).unwrap();
        let Some(Address::Tcp(addr)) = origins.addresses.first().cloned() else {
            panic!("no TCP origin")
        };
        let endpoint = Endpoint { addr, tls: false };
        let identity = sluice_bench::expected::identity_body(&s, &page)
            .await
            .unwrap();
        let expect = Expect {
            balancing: false,
            caching: false,
        };
        check::run(&s, &endpoint, &identity, expect)
            .await
            .unwrap_or_else(|e| panic!("{} origin, {}: {e}", kind.name(), s.name));
        // Keep-alive under load: every request answered, none failed.
        let mut load = s.load.clone();
        load.requests = 60;
        let m = builtin::load(&load, &endpoint).await.unwrap();
        assert_eq!(
            (m.requests, m.failures),
            (60, 0),
            "{} {}",
            kind.name(),
            s.name
        );
        origins.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_go_origin_answers_like_the_demo_origin() {
    answers_like_the_demo_origin(OriginKind::Go).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_origin_answers_like_the_demo_origin() {
    answers_like_the_demo_origin(OriginKind::Node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_origin_answers_like_the_demo_origin() {
    answers_like_the_demo_origin(OriginKind::Python).await;
}
