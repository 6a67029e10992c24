//! Normal-form paths and trusted forwarding headers, end to end (issue 11, item 3): routes see
//! `/%61dmin` and `/x/../admin` as `/admin`; a path another server could read as another
//! route's is refused; the upstream gets the path as received or normalised, as the route says;
//! `X-Forwarded-*` from a client are replaced unless it is a trusted proxy, and the client
//! address of logs and rate limits follows them. Requests are written on raw sockets so that no
//! client library normalises the target.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use sluice_testkit::{TestServer, raw_exchange, start_toml, start_toml_in};

use crate::proxy::serve_fn;

/// What the recording upstream saw of each request: the target and the forwarding headers.
type Seen = Arc<Mutex<Vec<String>>>;

const RECORDED: [&str; 4] = [
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "forwarded",
];

/// An upstream that notes every request's target and answers with it in `x-target`, and the
/// forwarding headers it got in `x-got-NAME` (every line joined by ` | `).
async fn recording_upstream() -> (SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let (addr, _) = serve_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let log = log.clone();
        async move {
            let target = req.uri().to_string();
            log.lock().unwrap().push(target.clone());
            let mut resp = hyper::Response::builder().header("x-target", target);
            for name in RECORDED {
                let lines: Vec<&str> = req
                    .headers()
                    .get_all(name)
                    .iter()
                    .map(|v| v.to_str().unwrap())
                    .collect();
                if !lines.is_empty() {
                    resp = resp.header(format!("x-got-{name}"), lines.join(" | "));
                }
            }
            resp.body(sluice_core::Body::Empty).unwrap()
        }
    })
    .await;
    (addr, seen)
}

/// A status and the response's headers (lowercase names).
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `GET target` over a fresh HTTP/1.1 connection, with `extra` header lines.
async fn get(addr: SocketAddr, target: &str, extra: &[(&str, &str)]) -> Reply {
    let mut request =
        format!("GET {target} HTTP/1.1\r\nHost: site.test:8080\r\nConnection: close\r\n");
    for (name, value) in extra {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let response = raw_exchange(addr, request.as_bytes(), 1 << 16).await;
    let text = String::from_utf8_lossy(&response);
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{target}: no status in {text:?}"));
    let headers = lines
        .filter_map(|line| line.split_once(": "))
        .map(|(name, value)| (name.to_ascii_lowercase(), value.to_owned()))
        .collect();
    Reply { status, headers }
}

/// A `/admin` rule answering 403, an exact `/secret` rule likewise, a `/n/` route forwarding
/// the normal form (and stripping `/n`), a `/api/` route stripping `/api` from the path as
/// received, and everything else proxied as received.
async fn guarded_proxy(upstream: SocketAddr) -> TestServer {
    start_toml(&format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        [upstreams.backend]
        servers = ["{upstream}"]
        [[routes]]
        path_prefix = "/admin"
        respond = {{ status = 403 }}
        [[routes]]
        path = "/secret"
        respond = {{ status = 403 }}
        [[routes]]
        path_prefix = "/n/"
        proxy = {{ upstream = "backend", forward_path = "normalized", strip_prefix = "/n" }}
        [[routes]]
        path_prefix = "/api/"
        proxy = {{ upstream = "backend", strip_prefix = "/api" }}
        [[routes]]
        proxy = {{ upstream = "backend" }}
        "#
    ))
    .await
}

#[tokio::test]
async fn every_spelling_of_admin_meets_the_admin_rule() {
    let (upstream, seen) = recording_upstream().await;
    let server = guarded_proxy(upstream).await;
    for target in [
        "/admin/x",
        "/%61dmin/x",
        "/%61%64%6D%69%6E/x",
        "/x/../admin/x",
        "/x/%2e%2e/admin",
        "/x/.%2E/admin/",
        "/./admin",
        "/x/y/../../admin?q=1",
    ] {
        assert_eq!(
            get(server.first_addr(), target, &[]).await.status,
            403,
            "{target}"
        );
    }
    // Absolute-form (RFC 9112 §3.2.2) is normalised the same way.
    let absolute = "http://site.test:8080/x/../%61dmin/x";
    assert_eq!(get(server.first_addr(), absolute, &[]).await.status, 403);
    // And HTTP/2's :path (h2c by prior knowledge; reqwest sends `%61` as written, though it
    // resolves dot segments itself, so those are covered on the raw socket above).
    let h2 = sluice_testkit::client(sluice_testkit::Offer::Http2);
    for target in ["/%61dmin/x", "/%61%64min"] {
        let resp = h2.get(server.url(target)).send().await.unwrap();
        assert_eq!(resp.version(), http::Version::HTTP_2);
        assert_eq!(resp.status(), 403, "h2 {target}");
    }
    assert_eq!(seen.lock().unwrap().as_slice(), [] as [String; 0]);
    // The same server forwards other paths, so the rule above is what stopped them.
    assert_eq!(get(server.first_addr(), "/x", &[]).await.status, 200);
    assert_eq!(seen.lock().unwrap().as_slice(), ["/x"]);
}

#[tokio::test]
async fn paths_that_climb_out_or_read_as_another_route_are_400() {
    let (upstream, seen) = recording_upstream().await;
    let server = guarded_proxy(upstream).await;
    for target in [
        // Above the root, as nginx refuses it.
        "/../admin",
        "/%2e%2e/admin",
        "/x/../../admin",
        // An encoded `/` or `\` that would make it /admin to a server that decodes it.
        "/public/..%2Fadmin",
        "/public/..%2fadmin/x",
        "/public%2F..%2Fadmin",
        "/public/..%5Cadmin",
        // Tomcat-style `;` parameters, a NUL that ends a C string, `//` merged.
        "/public/..;/admin/x",
        "/secret%00.txt",
        "//admin",
        // Escapes that are not escapes.
        "/a%zz",
        "/a%2",
    ] {
        assert_eq!(
            get(server.first_addr(), target, &[]).await.status,
            400,
            "{target}"
        );
    }
    assert_eq!(seen.lock().unwrap().as_slice(), [] as [String; 0]);
}

#[tokio::test]
async fn encoded_slashes_that_change_nothing_are_forwarded_as_sent() {
    let (upstream, _) = recording_upstream().await;
    let server = guarded_proxy(upstream).await;
    for (target, forwarded) in [
        ("/docs/a%2fb", "/docs/a%2fb"),
        ("/docs/a%2Fb%5Cc;v=1", "/docs/a%2Fb%5Cc;v=1"),
        ("/admin-notes%2Fx", "/admin-notes%2Fx"),
    ] {
        let reply = get(server.first_addr(), target, &[]).await;
        // `/admin-notes` starts with the `/admin` prefix: the rule takes it either way.
        if target.starts_with("/admin") {
            assert_eq!(reply.status, 403, "{target}");
            continue;
        }
        assert_eq!(reply.status, 200, "{target}");
        assert_eq!(reply.header("x-target"), Some(forwarded), "{target}");
    }
}

#[tokio::test]
async fn the_upstream_gets_the_path_as_received_unless_normalized_is_asked_for() {
    let (upstream, _) = recording_upstream().await;
    let server = guarded_proxy(upstream).await;
    for (target, forwarded) in [
        // As received (the default), byte for byte, the query untouched.
        ("/%7Euser/./a?q=%61", "/%7Euser/./a?q=%61"),
        ("/docs/x/../y", "/docs/x/../y"),
        ("/%64ocs/%2561", "/%64ocs/%2561"),
        // normalized: the form routes matched (unreserved decoded, hex uppercase, dots gone;
        // `%25` is never decoded, so `%2561` stays), then `/n` stripped.
        ("/n/%7Euser/./a?q=%61", "/~user/a?q=%61"),
        ("/n/x/../y%2fz", "/y%2Fz"),
        ("/n/%2561", "/%2561"),
        ("/%6E/b", "/b"),
        // strip_prefix on the received path when it starts with the prefix ...
        ("/api/%7e", "/%7e"),
        // ... and on the normal form when only that does.
        ("/%61pi/%7e", "/~"),
        ("/z/../api/q?x=1", "/q?x=1"),
    ] {
        let reply = get(server.first_addr(), target, &[]).await;
        assert_eq!(reply.status, 200, "{target}");
        assert_eq!(reply.header("x-target"), Some(forwarded), "{target}");
    }
}

#[tokio::test]
async fn forwarding_headers_from_an_untrusted_client_are_replaced() {
    let (upstream, _) = recording_upstream().await;
    let server = guarded_proxy(upstream).await;
    let forged = [
        ("X-Forwarded-For", "6.6.6.6"),
        ("X-Forwarded-For", "7.7.7.7"),
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Host", "bank.test"),
        ("Forwarded", "for=6.6.6.6;proto=https"),
    ];
    let reply = get(server.first_addr(), "/x", &forged).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-got-x-forwarded-for"), Some("127.0.0.1"));
    assert_eq!(reply.header("x-got-x-forwarded-proto"), Some("http"));
    assert_eq!(
        reply.header("x-got-x-forwarded-host"),
        Some("site.test:8080")
    );
    assert_eq!(reply.header("x-got-forwarded"), None);
}

#[tokio::test]
async fn a_client_over_tls_cannot_pass_itself_off_as_plain_or_another_host() {
    let (upstream, _) = recording_upstream().await;
    let server = start_toml(&format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        tls = "self-signed"
        [[routes]]
        proxy = {{ to = "{upstream}" }}
        "#
    ))
    .await;
    let url = format!("https://localhost:{}/x", server.first_addr().port());
    for offer in [sluice_testkit::Offer::Http1, sluice_testkit::Offer::Http2] {
        let resp = sluice_testkit::tls_client(offer)
            .get(&url)
            .header("x-forwarded-proto", "http")
            .header("x-forwarded-host", "forged.test")
            .header("x-forwarded-for", "6.6.6.6")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let got = |name: &str| {
            resp.headers()[format!("x-got-{name}").as_str()]
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(got("x-forwarded-proto"), "https");
        assert_eq!(got("x-forwarded-for"), "127.0.0.1");
        // HTTP/2's :authority and HTTP/1.1's Host both name the host the client asked for.
        assert_eq!(
            got("x-forwarded-host"),
            format!("localhost:{}", server.first_addr().port())
        );
    }
}

/// A proxy that trusts 127.0.0.1 (the test client), with a rate limit of one request per
/// minute per client, and a JSON access log in `dir`.
async fn behind_a_trusted_balancer(
    dir: &std::path::Path,
    upstream: SocketAddr,
    trusted: &str,
) -> TestServer {
    start_toml_in(
        dir,
        &format!(
            r#"
            [log]
            access = "access.log"
            format = "json"
            [server]
            trusted_proxies = [{trusted}]
            [[listeners]]
            address = "127.0.0.1:0"
            [upstreams.backend]
            servers = ["{upstream}"]
            [[routes]]
            path_prefix = "/limited/"
            proxy = {{ upstream = "backend" }}
            rate_limit = {{ requests = 1, per = "1m" }}
            [[routes]]
            proxy = {{ upstream = "backend" }}
            "#
        ),
    )
    .await
}

#[tokio::test]
async fn a_trusted_proxys_forwarding_headers_are_kept_and_appended_to() {
    let temp = tempfile::tempdir().unwrap();
    let (upstream, _) = recording_upstream().await;
    let server =
        behind_a_trusted_balancer(temp.path(), upstream, r#""10.0.0.0/8", "127.0.0.1""#).await;
    let forwarded = [
        ("X-Forwarded-For", "203.0.113.9, 10.0.0.2"),
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Host", "www.site.test"),
        ("Forwarded", "for=203.0.113.9;proto=https"),
    ];
    let reply = get(server.first_addr(), "/x", &forwarded).await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("x-got-x-forwarded-for"),
        Some("203.0.113.9, 10.0.0.2, 127.0.0.1")
    );
    assert_eq!(reply.header("x-got-x-forwarded-proto"), Some("https"));
    assert_eq!(
        reply.header("x-got-x-forwarded-host"),
        Some("www.site.test")
    );
    assert_eq!(
        reply.header("x-got-forwarded"),
        Some("for=203.0.113.9;proto=https")
    );
    // Without them, this hop's own.
    let reply = get(server.first_addr(), "/x", &[]).await;
    assert_eq!(reply.header("x-got-x-forwarded-for"), Some("127.0.0.1"));
    assert_eq!(reply.header("x-got-x-forwarded-proto"), Some("http"));
    assert_eq!(
        reply.header("x-got-x-forwarded-host"),
        Some("site.test:8080")
    );

    // The access log names the client the trusted chain vouches for: the rightmost untrusted
    // address (a forged entry further left is not believed).
    get(
        server.first_addr(),
        "/y",
        &[("X-Forwarded-For", "6.6.6.6, 198.51.100.4")],
    )
    .await;
    let lines = crate::lifecycle::wait_for_lines(&temp.path().join("access.log"), 3).await;
    let mut remotes: Vec<String> = lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|entry| entry["remote"].as_str().unwrap().to_string())
        .collect();
    remotes.sort();
    assert_eq!(remotes, ["127.0.0.1", "198.51.100.4", "203.0.113.9"]);
}

#[tokio::test]
async fn rate_limits_count_the_client_the_trusted_proxies_name() {
    let temp = tempfile::tempdir().unwrap();
    let (upstream, _) = recording_upstream().await;
    let server = behind_a_trusted_balancer(temp.path(), upstream, r#""127.0.0.1""#).await;
    let from = |ip: &'static str| [("X-Forwarded-For", ip)];
    let addr = server.first_addr();
    assert_eq!(
        get(addr, "/limited/a", &from("203.0.113.1")).await.status,
        200
    );
    assert_eq!(
        get(addr, "/limited/a", &from("203.0.113.1")).await.status,
        429
    );
    // Another client behind the same balancer has its own bucket.
    assert_eq!(
        get(addr, "/limited/a", &from("203.0.113.2")).await.status,
        200
    );

    // Trusting nobody, the header is the client's word: every request is 127.0.0.1's.
    let temp = tempfile::tempdir().unwrap();
    let untrusting = behind_a_trusted_balancer(temp.path(), upstream, "").await;
    let addr = untrusting.first_addr();
    assert_eq!(
        get(addr, "/limited/a", &from("203.0.113.1")).await.status,
        200
    );
    assert_eq!(
        get(addr, "/limited/a", &from("203.0.113.2")).await.status,
        429
    );
}

#[tokio::test]
async fn one_cache_entry_for_every_spelling_of_a_path() {
    let (upstream, seen) = recording_upstream().await;
    let temp = tempfile::tempdir().unwrap();
    let server = start_toml_in(
        temp.path(),
        &format!(
            r#"
            [log]
            access = "off"
            [caches.main]
            memory = "1MiB"
            [[listeners]]
            address = "127.0.0.1:0"
            [upstreams.backend]
            servers = ["{upstream}"]
            [[routes]]
            proxy = {{ upstream = "backend" }}
            cache = {{ zone = "main", valid = {{ "200" = "1m" }} }}
            "#
        ),
    )
    .await;
    let first = get(server.first_addr(), "/page", &[]).await;
    assert_eq!(first.status, 200);
    for target in ["/%70age", "/x/../page", "/./page"] {
        let reply = get(server.first_addr(), target, &[]).await;
        assert_eq!(reply.status, 200, "{target}");
    }
    assert_eq!(seen.lock().unwrap().as_slice(), ["/page"]);
}

#[tokio::test]
async fn static_files_see_the_normal_form() {
    let temp = tempfile::tempdir().unwrap();
    crate::write_files(
        temp.path(),
        &[("public/docs/a.txt", b"A"), ("secret.txt", b"TOP-SECRET")],
    );
    let server = crate::static_server(temp.path()).await;
    for target in [
        "/docs/a.txt",
        "/%64ocs/a.txt",
        "/x/../docs/./a.txt",
        "/docs/%61.txt",
    ] {
        let reply = get(server.first_addr(), target, &[]).await;
        assert_eq!(reply.status, 200, "{target}");
    }
    for target in [
        "/../secret.txt",
        "/docs/..%2F..%2Fsecret.txt",
        "/docs/a.txt%00",
    ] {
        let reply = get(server.first_addr(), target, &[]).await;
        assert_eq!(reply.status, 400, "{target}");
    }
}
