//! HTTP/1.1 keep-alive and h2c prior knowledge on one cleartext port; protocol restrictions.

use sluice_testkit::{Offer, client, raw_exchange, start_toml};

const HELLO: &str = r#"
[log]
access = "off"
[[listeners]]
name = "both"
address = "127.0.0.1:0"
[[listeners]]
name = "h1"
address = "127.0.0.1:0"
protocols = ["http/1.1"]
[[routes]]
respond = { status = 200, body = "hello\n", headers = { "content-type" = "text/plain" } }
"#;

#[tokio::test]
async fn http1_keeps_the_connection_alive_for_several_requests() {
    let server = start_toml(HELLO).await;
    let two = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let reply = String::from_utf8(raw_exchange(server.addr("both"), two, 1 << 20).await).unwrap();
    assert_eq!(reply.matches("HTTP/1.1 200 OK").count(), 2, "{reply}");
    assert_eq!(reply.matches("hello\n").count(), 2);
}

#[tokio::test]
async fn h2c_prior_knowledge_works_on_the_cleartext_port() {
    let server = start_toml(HELLO).await;
    let resp = client(Offer::Http2)
        .get(format!("http://{}/", server.addr("both")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(resp.headers()["server"], "sluice");
    assert_eq!(resp.text().await.unwrap(), "hello\n");

    let h1 = client(Offer::Http1)
        .get(format!("http://{}/", server.addr("both")))
        .send()
        .await
        .unwrap();
    assert_eq!(h1.version(), http::Version::HTTP_11);
}

#[tokio::test]
async fn an_http1_only_port_refuses_h2c() {
    let server = start_toml(HELLO).await;
    let result = client(Offer::Http2)
        .get(format!("http://{}/", server.addr("h1")))
        .send()
        .await;
    assert!(
        result.is_err(),
        "h2c must not be spoken on an http/1.1-only listener"
    );
    let ok = client(Offer::Http1)
        .get(format!("http://{}/", server.addr("h1")))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn curl_http2_prior_knowledge_on_cleartext() {
    let server = start_toml(HELLO).await;
    let url = format!("http://{}/", server.addr("both"));
    let out = crate::curl(&[
        "--http2-prior-knowledge",
        "-w",
        "%{http_version}",
        "-o",
        "/dev/null",
        &url,
    ])
    .await;
    assert_eq!(out, "2");
}

/// Connections are served with upgrades on (WebSocket), which in hyper-util means sniffing the
/// protocol whatever the port allows; each port still speaks only its own (`crate::preface`).
#[tokio::test]
async fn an_http2_only_port_refuses_http1() {
    let server = start_toml(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        protocols = ["h2"]
        [[routes]]
        respond = { status = 200, body = "hello\n" }
        "#,
    )
    .await;
    let url = format!("http://{}/", server.first_addr());
    assert!(
        client(Offer::Http1).get(&url).send().await.is_err(),
        "HTTP/1.1 must not be spoken on an h2-only listener"
    );
    let ok = client(Offer::Http2).get(&url).send().await.unwrap();
    assert_eq!(ok.version(), http::Version::HTTP_2);
    assert_eq!(ok.text().await.unwrap(), "hello\n");
}
