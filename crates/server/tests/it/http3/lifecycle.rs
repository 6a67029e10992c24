//! HTTP/3 at shutdown: GOAWAY, then the requests in flight finish (RFC 9114 §5.2).

use std::time::Duration;

use bytes::Bytes;
use sluice_testkit::http3::H3Client;

#[tokio::test]
async fn shutdown_sends_goaway_and_lets_the_request_in_flight_finish() {
    let (pieces, upstream) = crate::proxy::paced_upstream("text/plain", None).await;
    let server = sluice_testkit::start_toml(&format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        name = "site"
        address = "127.0.0.1:0"
        tls = "self-signed"
        protocols = ["http/1.1", "h2", "h3"]
        [[routes]]
        path = "/fixed"
        respond = {{ body = "fixed" }}
        [[routes]]
        proxy = {{ to = "{upstream}" }}
        "#
    ))
    .await;
    let h3 = H3Client::connect(server.addr("site")).await;
    assert_eq!(h3.get("/fixed").await.body, b"fixed");

    // A response in flight: its first piece is out, the rest waits for the test.
    let mut sender = h3.sender();
    let req = http::Request::get(h3.url("/slow")).body(()).unwrap();
    let slow =
        tokio::spawn(
            async move { sluice_testkit::http3::send(&mut sender, req, None, None).await },
        );
    pieces.send(Bytes::from_static(b"first ")).await.unwrap();
    // The channel holds one piece: once this second one is taken too, the request has
    // reached the upstream, so it is in flight when shutdown starts.
    pieces.send(Bytes::from_static(b"middle ")).await.unwrap();

    let shutdown = tokio::spawn(server.shutdown(Duration::from_secs(20)));
    // After GOAWAY the client may open no new request on this connection: it is refused
    // (by the client itself, having read GOAWAY, or by the server, past the GOAWAY's id).
    let mut refused = None;
    for _ in 0..10_000 {
        let req = http::Request::get(h3.url("/fixed")).body(()).unwrap();
        let attempt = tokio::time::timeout(Duration::from_secs(10), h3.request(req, None, None));
        match attempt.await.expect("a request after shutdown hung") {
            Ok(resp) => assert_eq!(resp.body, b"fixed"),
            Err(err) => {
                refused = Some(err);
                break;
            }
        }
    }
    assert!(
        refused.is_some(),
        "new requests kept being served after shutdown"
    );

    // The request in flight still gets its whole body.
    pieces.send(Bytes::from_static(b"last")).await.unwrap();
    drop(pieces);
    let resp = tokio::time::timeout(Duration::from_secs(10), slow)
        .await
        .expect("the request in flight hung")
        .unwrap()
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.body, b"first middle last");
    let drained = tokio::time::timeout(Duration::from_secs(30), shutdown).await;
    assert!(
        drained.expect("shutdown hung").unwrap(),
        "shutdown did not drain in time"
    );
}
