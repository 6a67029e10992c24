//! `sluice import` as a user runs it. The lab's acceptance: every nginx.conf the lab
//! generates (crates/bench/src/target/nginx.rs), for every scenario nginx can run, is
//! imported with nothing left out, passes `sluice check`, and sluice started on it passes the
//! same check the lab runs before measuring (crates/bench/src/check.rs: status, the decoded
//! body or the hash of what the origin received, `Content-Encoding`, a cache `HIT` on the
//! repeated request, the weighted split). Where nginx is installed it runs the same config
//! and the same check, and the answers to one request are compared header by header (the
//! headers the check looks at, and `Vary`).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use sluice_bench::check::{self, Expect};
use sluice_bench::client::{self, Endpoint, RequestTemplate, TlsConnector};
use sluice_bench::scenario::{self, Scenario, Setup};
use sluice_bench::target::process::{Address, free_port};
use sluice_bench::target::{self, Context, Origins, StartError};
use sluice_bench::{fixtures, zoo};

const EXPECT_ALL: Expect = Expect {
    balancing: true,
    caching: true,
};

/// The lab's fixtures (runner.rs `prepare`): the page, its precompressed copy with sidecars,
/// a certificate.
fn lab_context(dir: &Path) -> Context {
    let page = fixtures::page();
    let mut ctx = Context::for_tests(dir);
    ctx.exe = env!("CARGO_BIN_EXE_sluice").into();
    std::fs::create_dir_all(&ctx.page_dir).unwrap();
    std::fs::create_dir_all(&ctx.precompressed_dir).unwrap();
    std::fs::write(ctx.page_dir.join(fixtures::PAGE_NAME), &page).unwrap();
    std::fs::write(ctx.precompressed_dir.join(fixtures::PAGE_NAME), &page).unwrap();
    for (algorithm, level, ext) in [
        (scenario::Algorithm::Gzip, 9, "gz"),
        (scenario::Algorithm::Br, 11, "br"),
        (scenario::Algorithm::Zstd, 19, "zst"),
    ] {
        let encoded = fixtures::compress(&page, scenario::Compression { algorithm, level });
        std::fs::write(
            ctx.precompressed_dir
                .join(format!("{}.{ext}", fixtures::PAGE_NAME)),
            &encoded,
        )
        .unwrap();
    }
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    std::fs::write(&ctx.cert, cert.cert.pem()).unwrap();
    std::fs::write(&ctx.key, cert.signing_key.serialize_pem()).unwrap();
    ctx
}

/// `sluice import FILE -o OUT`: (exit code, stderr).
fn import(conf: &Path, out: &Path) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("import")
        .arg(conf)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The headers of one response that the check and a client care about.
async fn answer(s: &Scenario, endpoint: &Endpoint) -> Vec<(String, String)> {
    let template = RequestTemplate::new(&s.load, endpoint).unwrap();
    let tls = TlsConnector::new().unwrap();
    let mut conn = client::connect(endpoint, s.load.protocol, &tls)
        .await
        .unwrap();
    let r = check::fetch(&mut conn.sender, &template).await.unwrap();
    let mut out = vec![("status".to_string(), r.status.to_string())];
    for name in ["content-encoding", "vary"] {
        let v = r
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        out.push((name.into(), v));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lab_nginx_config_imports_and_passes_the_lab_check() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = lab_context(dir.path());
    let program = zoo::OriginProgram::sluice(&ctx.exe);
    let nginx_here = target::nginx::available();
    if !nginx_here {
        assert!(
            !sluice_testkit::external::strict(),
            "nginx is not installed, and SLUICE_TEST_STRICT forbids skipping the comparison"
        );
    }
    let page = fixtures::page();
    let mut imported = Vec::new();
    for s in scenario::all(false) {
        if matches!(s.setup, Setup::Direct) {
            continue;
        }
        let sdir = dir.path().join(&s.name);
        std::fs::create_dir_all(&sdir).unwrap();
        let origins = tokio::task::block_in_place(|| Origins::start(&s, &ctx, &program)).unwrap();
        let addr: SocketAddr = free_port().unwrap();
        let conf = match target::nginx::config(&s, &ctx, &origins, addr, &sdir) {
            Ok(c) => c,
            // brotli, zstd, request-body decompression: the lab does not run nginx there.
            Err(StartError::NotSupported(_)) => {
                origins.stop();
                continue;
            }
            Err(e) => panic!("{}: {e:?}", s.name),
        };
        let nginx_conf = sdir.join("nginx.conf");
        std::fs::write(&nginx_conf, &conf).unwrap();
        let out = sdir.join("sluice.toml");
        let (code, stderr) = import(&nginx_conf, &out);
        assert_eq!(code, 0, "{}: {stderr}\n{conf}", s.name);
        let toml = std::fs::read_to_string(&out).unwrap();
        let check_out = Command::new(&ctx.exe)
            .arg("check")
            .arg(&out)
            .output()
            .unwrap();
        assert!(check_out.status.success(), "{}: {toml}", s.name);

        // sluice on the imported config, started as the lab starts its sluice.
        let run_dir = sdir.join("run");
        std::fs::create_dir_all(&run_dir).unwrap();
        let mut process = tokio::task::block_in_place(|| {
            target::sluice::start_toml(&toml, &ctx, &run_dir)
                .unwrap_or_else(|e| panic!("{}: {e:?}", s.name))
        });
        tokio::task::block_in_place(|| process.wait_ready(&Address::Tcp(addr)))
            .unwrap_or_else(|e| panic!("{}: {e}", s.name));
        let endpoint = Endpoint {
            addr,
            tls: s.load.tls,
        };
        let identity = sluice_bench::expected::identity_body(&s, &page)
            .await
            .unwrap();
        check::run(&s, &endpoint, &identity, EXPECT_ALL)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{}: the imported config fails the lab check: {e}\n{toml}",
                    s.name
                )
            });
        let sluice_answer = answer(&s, &endpoint).await;
        tokio::task::block_in_place(|| process.stop());

        if nginx_here {
            let nginx_dir = sdir.join("nginx-run");
            std::fs::create_dir_all(&nginx_dir).unwrap();
            let mut running = tokio::task::block_in_place(|| {
                target::nginx::start(&s, &ctx, &origins, addr, &nginx_dir)
            })
            .unwrap_or_else(|e| panic!("{}: nginx: {e:?}", s.name));
            tokio::task::block_in_place(|| running.wait_ready(&Address::Tcp(addr))).unwrap();
            check::run(&s, &endpoint, &identity, EXPECT_ALL)
                .await
                .unwrap_or_else(|e| panic!("{}: nginx fails the lab check: {e}", s.name));
            let nginx_answer = answer(&s, &endpoint).await;
            tokio::task::block_in_place(|| running.stop());
            assert_eq!(sluice_answer, nginx_answer, "{}", s.name);
        }
        origins.stop();
        imported.push(s.name.clone());
    }
    // Every group nginx runs in the lab: files, gzip, precompressed, TLS h1/h2, proxying to
    // TCP and unix origins, balancing, caching, streams, POST bodies.
    for name in [
        "post-get",
        "post-gz0",
        "post-raw",
        "static-plain",
        "static-gzip-6",
        "static-precompressed",
        "tls-h1",
        "tls-h2",
        "date-proxy-c1",
        "date-uneven",
        "date-cached-c6",
        "date-cached-gzip-6",
        "stream-gzip-1",
        "static-c1000",
    ] {
        assert!(
            imported.iter().any(|n| n == name),
            "{name} not imported: {imported:?}"
        );
    }
}
