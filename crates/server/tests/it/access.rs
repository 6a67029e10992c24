//! Access control over real sockets: `allow` / `deny` in file order (403, `deny=client` in the
//! access log, counted by route and reason), `basic_auth` with a bcrypt and an argon2 user
//! (401 with the realm, the credentials removed before the upstream, the file read again on
//! reload, one client's guessing slowed while another logs in), and `forward_auth` against a
//! real auth service that checks a cookie (headers copied, its 401 passed through, down and slow
//! services answered 500, 1,000 requests through a pooled subrequest).

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use base64::Engine as _;
use futures_util::StreamExt as _;
use futures_util::future::join_all;
use sluice_testkit::{Offer, client, start_origin, start_toml_in};

/// A client whose connections come from `from` (any 127.0.0.0/8 address is loopback).
fn client_from(from: &str) -> reqwest::Client {
    // (`client` installs the TLS crypto provider reqwest's builder needs.)
    let _ = client(Offer::Http1);
    reqwest::Client::builder()
        .local_address(from.parse::<IpAddr>().unwrap())
        .timeout(Duration::from_secs(30))
        .no_proxy()
        .build()
        .unwrap()
}

fn basic(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

async fn status(req: reqwest::RequestBuilder) -> u16 {
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let _ = resp.bytes().await.unwrap();
    status
}

#[tokio::test]
async fn allow_and_deny_decide_in_file_order_and_say_why() {
    let temp = tempfile::tempdir().unwrap();
    let server = start_toml_in(
        temp.path(),
        r#"
        [log]
        access = "access.log"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        address = "127.0.0.1:0"

        [[routes]]
        name = "office-only"
        path = "/office"
        allow = ["127.0.0.2", "10.0.0.0/8"]
        respond = { body = "office" }

        [[routes]]
        name = "deny-first"
        path = "/deny-first"
        deny = ["127.0.0.3"]
        allow = ["127.0.0.0/8"]
        respond = { body = "ok" }

        [[routes]]
        name = "allow-first"
        path = "/allow-first"
        allow = ["127.0.0.0/8"]
        deny = ["127.0.0.3"]
        respond = { body = "ok" }

        [[routes]]
        name = "deny-only"
        path = "/deny-only"
        deny = ["127.0.0.3", "::1"]
        respond = { body = "ok" }
        "#,
    )
    .await;
    let addr = server.first_addr();
    let get = |from: &'static str, path: &'static str| async move {
        status(client_from(from).get(format!("http://{addr}{path}"))).await
    };
    // `allow` alone: everyone else is refused (nginx would need `deny all`).
    assert_eq!(get("127.0.0.2", "/office").await, 200);
    assert_eq!(get("127.0.0.3", "/office").await, 403);
    // The first rule that holds the client decides, in the order the keys are written.
    assert_eq!(get("127.0.0.3", "/deny-first").await, 403);
    assert_eq!(get("127.0.0.2", "/deny-first").await, 200);
    assert_eq!(get("127.0.0.3", "/allow-first").await, 200);
    // `deny` alone: everyone else gets in.
    assert_eq!(get("127.0.0.3", "/deny-only").await, 403);
    assert_eq!(get("127.0.0.2", "/deny-only").await, 200);

    let log = crate::lifecycle::wait_for_lines(&temp.path().join("access.log"), 7).await;
    let denied: Vec<&str> = log.lines().filter(|l| l.contains(" 403 ")).collect();
    assert_eq!(denied.len(), 3, "{log}");
    assert!(denied.iter().all(|l| l.ends_with(" deny=client")), "{log}");
    assert!(
        log.lines()
            .filter(|l| l.contains(" 200 "))
            .all(|l| !l.contains("deny=")),
        "{log}"
    );

    let text = crate::scrape_metrics(&server).await;
    let series = |route: &str, reason: &str| {
        crate::metric(
            &text,
            &format!("sluice_access_denied_total{{route=\"{route}\",reason=\"{reason}\"}}"),
        )
    };
    assert_eq!(series("office-only", "client"), 1.0);
    assert_eq!(series("deny-first", "client"), 1.0);
    assert_eq!(series("allow-first", "client"), 0.0);
    assert_eq!(series("deny-only", "client"), 1.0);
    assert_eq!(series("office-only", "auth"), 0.0);
}

/// `alice` (bcrypt) and `bob` (argon2id) with these passwords.
fn users_file(alice: &str, bob: &str) -> String {
    use argon2::password_hash::{PasswordHasher, SaltString};
    let bcrypt = bcrypt::hash(alice, 4).unwrap();
    let salt = SaltString::encode_b64(b"sluice-test-salt").unwrap();
    let argon = argon2::Argon2::default()
        .hash_password(bob.as_bytes(), &salt)
        .unwrap()
        .to_string();
    format!("# test users\nalice:{bcrypt}\nbob:{argon}\n")
}

fn basic_auth_config(origin: std::net::SocketAddr) -> String {
    format!(
        r#"
        [log]
        access = "access.log"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        address = "127.0.0.1:0"

        [[routes]]
        name = "internal"
        path_prefix = "/reqinfo"
        basic_auth = {{ realm = "staff only", users = "users.htpasswd", max_failures = 5, failure_period = "1h" }}
        proxy = {{ to = "{origin}" }}
        "#
    )
}

#[tokio::test]
async fn basic_auth_takes_bcrypt_and_argon2_users_and_keeps_credentials_from_the_upstream() {
    let origin = start_origin(Some("origin")).await;
    let temp = tempfile::tempdir().unwrap();
    std::fs::write(
        temp.path().join("users.htpasswd"),
        users_file("alice-pw", "bob-pw"),
    )
    .unwrap();
    let server = start_toml_in(temp.path(), &basic_auth_config(origin.addr)).await;
    let http = client(Offer::Http1);
    let url = server.url("/reqinfo");

    let resp = http.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(
        resp.headers()["www-authenticate"],
        "Basic realm=\"staff only\", charset=\"UTF-8\""
    );
    let _ = resp.bytes().await;
    for (user, password) in [("alice", "alice-pw"), ("bob", "bob-pw")] {
        let resp = http
            .get(&url)
            .header("authorization", basic(user, password))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{user}");
        let info: serde_json::Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        let headers = info["headers"].to_string().to_ascii_lowercase();
        assert!(!headers.contains("authorization"), "{info}");
    }
    for (user, password) in [("alice", "bob-pw"), ("bob", "wrong"), ("carol", "x")] {
        let req = http
            .get(&url)
            .header("authorization", basic(user, password));
        assert_eq!(status(req).await, 401, "{user}");
    }
    // Another scheme is no credentials: the challenge again.
    assert_eq!(
        status(http.get(&url).header("authorization", "Bearer abc")).await,
        401
    );

    // The file is read again on reload: alice's new password works, the old one no longer.
    std::fs::write(
        temp.path().join("users.htpasswd"),
        users_file("alice-new", "bob-pw"),
    )
    .unwrap();
    server
        .reload_toml(&basic_auth_config(origin.addr))
        .await
        .unwrap();
    let req = |pw: &str| http.get(&url).header("authorization", basic("alice", pw));
    assert_eq!(status(req("alice-new")).await, 200);
    assert_eq!(status(req("alice-pw")).await, 401);

    // The access log says why, and never holds the credentials.
    let log = crate::lifecycle::wait_for_lines(&temp.path().join("access.log"), 9).await;
    let refused = log.lines().filter(|l| l.contains(" 401 ")).count();
    assert_eq!(
        refused,
        log.lines().filter(|l| l.ends_with(" deny=auth")).count(),
        "{log}"
    );
    for secret in ["alice-pw", "bob-pw", "alice-new", "YWxpY2", "Ym9i"] {
        assert!(!log.contains(secret), "{secret} in {log}");
    }
    origin.stop().await;
}

#[tokio::test]
async fn guessing_from_one_client_is_slowed_while_another_logs_in() {
    let origin = start_origin(Some("origin")).await;
    let temp = tempfile::tempdir().unwrap();
    std::fs::write(
        temp.path().join("users.htpasswd"),
        users_file("alice-pw", "bob-pw"),
    )
    .unwrap();
    let server = start_toml_in(temp.path(), &basic_auth_config(origin.addr)).await;
    let url = format!("http://{}/reqinfo", server.first_addr());
    let guesser = client_from("127.0.0.2");
    let user = client_from("127.0.0.3");

    let guesses = join_all((0..100).map(|i| {
        let req = guesser
            .get(&url)
            .header("authorization", basic("alice", &format!("guess-{i}")));
        status(req)
    }));
    let login = async {
        let started = std::time::Instant::now();
        let status = status(
            user.get(&url)
                .header("authorization", basic("alice", "alice-pw")),
        )
        .await;
        (status, started.elapsed())
    };
    let (guesses, (login, took)) = tokio::join!(guesses, login);
    assert_eq!(login, 200, "the other client's right password");
    let checked = guesses.iter().filter(|s| **s == 401).count();
    let slowed = guesses.iter().filter(|s| **s == 429).count();
    // Five failures an hour: five guesses were checked, the other 95 were not.
    assert_eq!(
        (checked, slowed),
        (5, 95),
        "{guesses:?} (login took {took:?})"
    );
    // The guessing client stays slowed, even with the right password; the other is not.
    let right = || basic("alice", "alice-pw");
    assert_eq!(
        status(guesser.get(&url).header("authorization", right())).await,
        429
    );
    assert_eq!(
        status(user.get(&url).header("authorization", right())).await,
        200
    );

    let text = crate::scrape_metrics(&server).await;
    let series = |reason: &str| {
        crate::metric(
            &text,
            &format!("sluice_access_denied_total{{route=\"internal\",reason=\"{reason}\"}}"),
        )
    };
    assert_eq!(series("auth"), 5.0);
    assert_eq!(series("auth_slowed"), 96.0);
    origin.stop().await;
}

/// An auth service that checks a cookie: `session=good` is alice (200 with `x-user` and
/// `x-role`), `session=slow` never answers, anything else gets its own 401 page.
async fn auth_service() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    crate::proxy::serve_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
        let cookie = req
            .headers()
            .get("cookie")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let asked = req
            .headers()
            .get("x-forwarded-uri")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        if cookie.contains("session=slow") {
            std::future::pending::<()>().await;
        }
        if cookie.contains("session=good") {
            return hyper::Response::builder()
                .header("x-user", "alice")
                .header("x-role", "admin")
                .header("x-asked", asked)
                .body(sluice_core::Body::Empty)
                .unwrap();
        }
        if cookie.contains("session=broken") {
            return hyper::Response::builder()
                .status(502)
                .body(sluice_core::Body::full("oops"))
                .unwrap();
        }
        hyper::Response::builder()
            .status(401)
            .header("content-type", "text/plain")
            .header("x-login", "/login")
            .body(sluice_core::Body::full("please log in at /login"))
            .unwrap()
    })
    .await
}

fn forward_auth_config(auth: std::net::SocketAddr, origin: std::net::SocketAddr) -> String {
    format!(
        r#"
        [log]
        access = "access.log"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        address = "127.0.0.1:0"

        [upstreams.auth]
        servers = ["{auth}"]

        [[routes]]
        name = "app"
        path_prefix = "/reqinfo"
        forward_auth = {{ upstream = "auth", copy_headers = ["x-user", "x-role"], timeout = "500ms" }}
        proxy = {{ to = "{origin}" }}
        "#
    )
}

#[tokio::test]
async fn forward_auth_lets_through_with_headers_and_passes_its_refusal_on() {
    let origin = start_origin(Some("origin")).await;
    let (auth, _) = auth_service().await;
    let temp = tempfile::tempdir().unwrap();
    let server = start_toml_in(temp.path(), &forward_auth_config(auth, origin.addr)).await;
    let http = client(Offer::Http1);
    let url = server.url("/reqinfo?page=2");

    // Allowed: the answer's headers replace what the client sent.
    let resp = http
        .get(&url)
        .header("cookie", "session=good")
        .header("x-user", "mallory")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let info: serde_json::Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    let headers = info["headers"].to_string();
    assert!(
        headers.contains("alice") && headers.contains("admin"),
        "{info}"
    );
    assert!(!headers.contains("mallory"), "{info}");
    assert!(
        !headers.contains("x-asked"),
        "only the listed headers are copied: {info}"
    );

    // Denied: the service's own 401, body and headers.
    let resp = http
        .get(&url)
        .header("cookie", "session=bad")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["x-login"], "/login");
    assert_eq!(resp.text().await.unwrap(), "please log in at /login");

    // Neither 2xx nor 401/403: 500. Too slow: 500 after the timeout.
    let req = http.get(&url).header("cookie", "session=broken");
    assert_eq!(status(req).await, 500);
    let req = http.get(&url).header("cookie", "session=slow");
    assert_eq!(status(req).await, 500);

    let log = crate::lifecycle::wait_for_lines(&temp.path().join("access.log"), 4).await;
    assert!(
        log.lines()
            .any(|l| l.contains(" 401 ") && l.ends_with(" deny=auth")),
        "{log}"
    );
    assert_eq!(
        log.lines()
            .filter(|l| l.ends_with(" deny=auth_error"))
            .count(),
        2,
        "{log}"
    );
    let text = crate::scrape_metrics(&server).await;
    let outcome = |o: &str| {
        crate::metric(
            &text,
            &format!("sluice_forward_auth_requests_total{{route=\"app\",outcome=\"{o}\"}}"),
        )
    };
    assert_eq!(
        [
            outcome("allowed"),
            outcome("denied"),
            outcome("error"),
            outcome("timeout")
        ],
        [1.0, 1.0, 1.0, 1.0]
    );
    origin.stop().await;
}

#[tokio::test]
async fn forward_auth_down_is_a_500_and_said_in_the_log() {
    let origin = start_origin(Some("origin")).await;
    // An address nobody listens on: bound, then closed.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let temp = tempfile::tempdir().unwrap();
    let server = start_toml_in(temp.path(), &forward_auth_config(closed, origin.addr)).await;
    let http = client(Offer::Http1);
    let req = http
        .get(server.url("/reqinfo"))
        .header("cookie", "session=good");
    assert_eq!(status(req).await, 500);
    let log = crate::lifecycle::wait_for_lines(&temp.path().join("access.log"), 1).await;
    assert!(
        log.contains(" 500 ") && log.contains("deny=auth_error"),
        "{log}"
    );
    let text = crate::scrape_metrics(&server).await;
    let errors = crate::metric(
        &text,
        "sluice_forward_auth_requests_total{route=\"app\",outcome=\"error\"}",
    );
    assert_eq!(errors, 1.0);
    origin.stop().await;
}

#[tokio::test]
async fn a_thousand_requests_through_forward_auth_share_pooled_connections() {
    let origin = start_origin(Some("origin")).await;
    let (auth, accepted) = auth_service().await;
    let temp = tempfile::tempdir().unwrap();
    let server = start_toml_in(temp.path(), &forward_auth_config(auth, origin.addr)).await;
    let http = client(Offer::Http1);
    let url = server.url("/reqinfo");
    const IN_FLIGHT: usize = 50;
    let statuses: Vec<u16> = futures_util::stream::iter(0..1000)
        .map(|_| status(http.get(&url).header("cookie", "session=good")))
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let errors = statuses.iter().filter(|s| **s != 200).count();
    assert_eq!(errors, 0, "{statuses:?}");
    // At most one connection per subrequest in flight, each reused: not one per request.
    let connections = accepted.load(Ordering::SeqCst);
    assert!(
        (1..=IN_FLIGHT).contains(&connections),
        "{connections} connections for 1000 subrequests"
    );

    // 1,000 at once, as HTTP/2 streams of one connection (the listener runs 250 at a time,
    // `max_concurrent_streams`). A connection goes back to the pool when its connection task
    // has seen the answer end, which under this load can lag behind the next subrequests: one
    // run opened 463 for the 1,000, so the bound here is only "fewer than one per subrequest".
    let h2 = client(Offer::Http2);
    let statuses =
        join_all((0..1000).map(|_| status(h2.get(&url).header("cookie", "session=good")))).await;
    let errors = statuses.iter().filter(|s| **s != 200).count();
    assert_eq!(errors, 0, "{statuses:?}");
    let more = accepted.load(Ordering::SeqCst) - connections;
    assert!(
        more < 1000,
        "{more} new connections for 1000 concurrent subrequests"
    );
    let text = crate::scrape_metrics(&server).await;
    let allowed = crate::metric(
        &text,
        "sluice_forward_auth_requests_total{route=\"app\",outcome=\"allowed\"}",
    );
    assert_eq!(allowed, 2000.0);
    origin.stop().await;
}
