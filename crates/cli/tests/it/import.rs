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
    std::fs::write(
        ctx.page_dir.join(fixtures::DOWNLOAD_NAME),
        fixtures::download(),
    )
    .unwrap();
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

/// nginx and sluice side by side on one configuration: the same answers to the same
/// requests, where nginx's rules are not sluice's own (location search order, `^~`, regexes
/// against the longest prefix, `add_header` inheritance, rewrite before return, a server-level
/// return, `alias`, `proxy_pass` with a URI, `limit_except`, `internal`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_answers_like_nginx_on_the_same_configuration() {
    let Some(nginx) = sluice_testkit::external::require("nginx", "apt-get install nginx-light")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("html/images")).unwrap();
    std::fs::create_dir_all(d.join("files")).unwrap();
    std::fs::write(d.join("html/index.html"), "home\n").unwrap();
    std::fs::write(d.join("html/images/a.txt"), "image text\n").unwrap();
    std::fs::write(d.join("files/f.txt"), "aliased\n").unwrap();
    let origin = sluice_testkit::start_origin(Some("o1")).await;
    let conf = |port: u16, redirect_port: u16, prefix: &Path| {
        format!(
            "daemon off;\nmaster_process off;\npid {p}/nginx.pid;\nerror_log stderr warn;\n\
             events {{}}\nhttp {{\n  access_log off;\n  default_type text/plain;\n  \
             client_body_temp_path {p}/body;\n  proxy_temp_path {p}/proxy;\n  \
             add_header X-Level http;\n  server {{\n    listen 127.0.0.1:{redirect_port};\n    \
             return 301 https://example.test$request_uri;\n  }}\n  server {{\n    \
             listen 127.0.0.1:{port};\n    root {root};\n    add_header X-Level server;\n    \
             location = /exact {{ return 200 \"exact\"; }}\n    \
             location / {{ rewrite ^/old$ /new? permanent; try_files $uri $uri/ =404; }}\n    \
             location /images/ {{ add_header X-Level images; }}\n    \
             location ^~ /static/ {{ return 200 \"static stop\"; }}\n    \
             location ~ \\.(png|jpg)$ {{ return 200 \"image regex\"; }}\n    \
             location ~* \\.PDF$ {{ return 200 \"pdf regex\"; }}\n    \
             location /docs/deep/ {{ return 200 \"docs deep\"; }}\n    \
             location ~ ^/docs/ {{ return 200 \"docs regex\"; }}\n    \
             location /files/ {{ alias {files}/; }}\n    \
             location /api/ {{ proxy_pass http://{origin}/; }}\n    \
             location /upload/ {{ limit_except GET {{ deny all; }} return 200 \"upload\"; }}\n    \
             location = /hidden {{ internal; return 200 \"hidden\"; }}\n  }}\n}}\n",
            p = prefix.display(),
            root = d.join("html").display(),
            files = d.join("files").display(),
            origin = origin.addr,
        )
    };
    let ports: Vec<SocketAddr> = (0..4).map(|_| free_port().unwrap()).collect();
    let nginx_dir = d.join("nginx");
    std::fs::create_dir_all(&nginx_dir).unwrap();
    std::fs::write(
        nginx_dir.join("nginx.conf"),
        conf(ports[0].port(), ports[1].port(), &nginx_dir),
    )
    .unwrap();
    let sluice_dir = d.join("sluice");
    std::fs::create_dir_all(&sluice_dir).unwrap();
    std::fs::write(
        sluice_dir.join("nginx.conf"),
        conf(ports[2].port(), ports[3].port(), &sluice_dir),
    )
    .unwrap();
    let (code, stderr) = import(
        &sluice_dir.join("nginx.conf"),
        &sluice_dir.join("sluice.toml"),
    );
    assert_eq!(code, 0, "{stderr}");

    let cpus = "0-1";
    let mut nginx_process = sluice_bench::target::process::Process::spawn_pinned(
        "nginx",
        cpus,
        &nginx,
        &[
            "-p".into(),
            nginx_dir.display().to_string(),
            "-c".into(),
            nginx_dir.join("nginx.conf").display().to_string(),
            "-e".into(),
            "stderr".into(),
        ],
        &nginx_dir.join("log"),
    )
    .unwrap();
    let mut sluice_process = sluice_bench::target::process::Process::spawn_pinned(
        "sluice",
        cpus,
        Path::new(env!("CARGO_BIN_EXE_sluice")),
        &[
            "serve".into(),
            "-c".into(),
            sluice_dir.join("sluice.toml").display().to_string(),
        ],
        &sluice_dir.join("log"),
    )
    .unwrap();
    tokio::task::block_in_place(|| {
        nginx_process.wait_ready(&Address::Tcp(ports[0])).unwrap();
        sluice_process.wait_ready(&Address::Tcp(ports[2])).unwrap();
    });
    // testkit's client installs the crypto provider reqwest needs; this one must not follow
    // redirects.
    drop(sluice_testkit::client(sluice_testkit::Offer::Http1));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(30))
        .no_proxy()
        .build()
        .unwrap();
    async fn ask(
        client: &reqwest::Client,
        method: &str,
        addr: SocketAddr,
        path: &str,
    ) -> (u16, String, String, String) {
        let r = client
            .request(method.parse().unwrap(), format!("http://{addr}{path}"))
            .send()
            .await
            .unwrap();
        let h = |n: &str| {
            r.headers()
                .get_all(n)
                .iter()
                .map(|v| v.to_str().unwrap_or("").to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let (status, level) = (r.status().as_u16(), h("x-level"));
        // nginx writes a relative Location absolute (`absolute_redirect on`), sluice as
        // configured: both are the same URL once resolved (RFC 9110 §10.2.2).
        let location = h("location");
        let location = match location.strip_prefix(&format!("http://{addr}")) {
            Some(rest) => rest.to_string(),
            None => location,
        };
        let body = r.text().await.unwrap();
        // Redirect and error pages are nginx's HTML, sluice's empty: the status is what
        // matters there.
        let body = if status >= 300 { String::new() } else { body };
        (status, body, level, location)
    }
    let cases = [
        ("GET", "/exact"),
        ("GET", "/exact/more"),
        ("GET", "/"),
        ("GET", "/index.html"),
        ("GET", "/old"),
        ("GET", "/missing"),
        ("GET", "/images/a.txt"),
        ("GET", "/images/b.png"),
        ("GET", "/static/c.png"),
        ("GET", "/x/y.PDF"),
        ("GET", "/x/y.pdf"),
        ("GET", "/docs/deep/z"),
        ("GET", "/docs/other"),
        ("GET", "/files/f.txt"),
        ("GET", "/api/hello"),
        ("GET", "/upload/x"),
        ("HEAD", "/upload/x"),
        ("POST", "/upload/x"),
        ("DELETE", "/upload/x"),
        ("GET", "/hidden"),
    ];
    for (method, path) in cases {
        let from_nginx = ask(&client, method, ports[0], path).await;
        let from_sluice = ask(&client, method, ports[2], path).await;
        assert_eq!(from_sluice, from_nginx, "{method} {path}");
    }
    // The server-level redirect, on the other port of each.
    let from_nginx = ask(&client, "GET", ports[1], "/a?b=c").await;
    let from_sluice = ask(&client, "GET", ports[3], "/a?b=c").await;
    assert_eq!(from_sluice, from_nginx);
    assert_eq!(from_nginx.3, "https://example.test/a?b=c");
    tokio::task::block_in_place(|| {
        nginx_process.stop();
        sluice_process.stop();
    });
    origin.stop().await;
}

/// The exit statuses are a contract (docs/import.md): 0 everything translated, 1 something
/// left out (listed on stderr with file:line), 2 unreadable nginx configuration, 3 an output
/// `sluice check` refuses.
#[test]
fn exit_statuses_say_what_happened() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).unwrap();
    write(
        "ok.conf",
        "events {}\nhttp { server { listen 127.0.0.1:8080; location / { return 200 \"hi\"; } } }\n",
    );
    write(
        "partial.conf",
        "events {}\nhttp {\n  server {\n    listen 127.0.0.1:8080;\n    location / {\n      autoindex on;\n      return 200 \"hi\";\n    }\n  }\n}\n",
    );
    write("broken.conf", "http {\n  server {\n");
    write(
        "missing-root.conf",
        "events {}\nhttp { server { listen 127.0.0.1:8080; root /nonexistent/dir; } }\n",
    );
    let out = d.join("out.toml");
    assert_eq!(import(&d.join("ok.conf"), &out).0, 0);
    assert!(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("check")
            .arg(&out)
            .status()
            .unwrap()
            .success()
    );
    let (code, stderr) = import(&d.join("partial.conf"), &out);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "not translated: {}:6: autoindex on: sluice does not list directories",
            d.join("partial.conf").display()
        )),
        "{stderr}"
    );
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .contains("#   partial.conf:6  autoindex on")
    );
    let (code, stderr) = import(&d.join("broken.conf"), &d.join("never.toml"));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("broken.conf:2: unexpected end of file, expecting \"}\""),
        "{stderr}"
    );
    assert!(!d.join("never.toml").exists());
    let (code, stderr) = import(&d.join("missing-root.conf"), &out);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("/nonexistent/dir"), "{stderr}");
    // Standard output when no -o.
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("import")
        .arg(d.join("ok.conf"))
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("[[routes]]"));
}
