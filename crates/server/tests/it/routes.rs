//! Routing: host (exact, wildcard), path (exact, prefix), listener restriction, first match wins;
//! fixed responses and redirects.

use sluice_testkit::{Offer, client, start_toml};

const ROUTES: &str = r#"
[log]
access = "off"
[[listeners]]
name = "main"
address = "127.0.0.1:0"
[[listeners]]
name = "admin"
address = "127.0.0.1:0"

[[routes]]
name = "admin-only"
listeners = ["admin"]
respond = { body = "admin" }

[[routes]]
name = "exact"
path = "/exact"
respond = { body = "exact" }

[[routes]]
name = "api-host"
host = "api.example.test"
path_prefix = "/v1/"
respond = { status = 201, body = "api", headers = { "x-test" = "yes" } }

[[routes]]
name = "wildcard"
host = "*.example.test"
respond = { body = "wildcard" }

[[routes]]
name = "old"
path_prefix = "/old/"
redirect = { to = "https://new.example.test{uri}", status = 301 }

[[routes]]
name = "fallback"
respond = { status = 404, body = "nothing here" }
"#;

async fn get(
    server: &sluice_testkit::TestServer,
    listener: &str,
    host: &str,
    path: &str,
) -> (u16, String, http::HeaderMap) {
    let resp = client(Offer::Http1)
        .get(format!("http://{}{path}", server.addr(listener)))
        .header("host", host)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, resp.text().await.unwrap(), headers)
}

#[tokio::test]
async fn first_matching_route_wins() {
    let server = start_toml(ROUTES).await;
    assert_eq!(get(&server, "admin", "a.test", "/exact").await.1, "admin");
    assert_eq!(get(&server, "main", "a.test", "/exact").await.1, "exact");
    assert_eq!(
        get(&server, "main", "a.test", "/exact/more").await.1,
        "nothing here"
    );
    let (status, body, headers) = get(&server, "main", "API.example.test:8080", "/v1/users").await;
    assert_eq!((status, body.as_str()), (201, "api"));
    assert_eq!(headers["x-test"], "yes");
    assert_eq!(
        get(&server, "main", "api.example.test", "/v2/").await.1,
        "wildcard"
    );
    assert_eq!(
        get(&server, "main", "deep.sub.example.test", "/").await.1,
        "wildcard"
    );
    // `*.example.test` does not match the bare domain.
    assert_eq!(get(&server, "main", "example.test", "/").await.0, 404);
}

#[tokio::test]
async fn redirect_keeps_the_request_uri() {
    let server = start_toml(ROUTES).await;
    let no_follow = sluice_testkit::reqwest::Client::builder()
        .redirect(sluice_testkit::reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .unwrap();
    let resp = no_follow
        .get(format!("http://{}/old/page?x=1", server.addr("main")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 301);
    assert_eq!(
        resp.headers()["location"],
        "https://new.example.test/old/page?x=1"
    );
}

#[tokio::test]
async fn no_route_is_a_404() {
    let server = start_toml(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        path = "/only"
        respond = { body = "x" }
        "#,
    )
    .await;
    let resp = client(Offer::Http1)
        .get(server.url("/other"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}
