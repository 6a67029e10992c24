//! Bad input never panics or hangs the server: malformed requests get a 4xx or a closed
//! connection, and the server keeps serving.

use std::time::Duration;

use sluice_testkit::{Offer, client, raw_exchange, start_toml};

const SERVER: &str = r#"
[log]
access = "off"
[[listeners]]
address = "127.0.0.1:0"
header_read_timeout = "1s"
idle_timeout = "1s"
max_header_size = "16KiB"
[[routes]]
respond = { body = "alive" }
"#;

async fn assert_alive(server: &sluice_testkit::TestServer) {
    let resp = client(Offer::Http1)
        .get(server.url("/"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "alive");
}

#[tokio::test]
async fn malformed_requests_get_4xx_and_the_server_survives() {
    let server = start_toml(SERVER).await;
    let addr = server.first_addr();
    let cases: [(&str, &[u8]); 5] = [
        ("garbage request line", b"\x00\x01\x02 nonsense\r\n\r\n"),
        ("bad version", b"GET / HTTP/9.9\r\nHost: x\r\n\r\n"),
        (
            "space in header name",
            b"GET / HTTP/1.1\r\nHo st: x\r\n\r\n",
        ),
        (
            "bad content-length",
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        ),
        (
            "two content-lengths",
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        ),
    ];
    for (what, bytes) in cases {
        let reply = String::from_utf8_lossy(&raw_exchange(addr, bytes, 1 << 16).await).into_owned();
        let refused = reply.is_empty() || reply.starts_with("HTTP/1.1 4");
        assert!(
            refused,
            "{what}: expected a 4xx or a closed connection, got {reply:?}"
        );
        assert!(
            !reply.contains("alive"),
            "{what}: must not be served: {reply:?}"
        );
    }
    assert_alive(&server).await;
}

#[tokio::test]
async fn a_corrupt_chunked_body_cannot_smuggle_a_second_request() {
    let server = start_toml(SERVER).await;
    // The route answers without reading the body; hyper must then refuse to parse the garbage
    // as a body and must not serve the request hidden behind it.
    let bytes = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    let reply = String::from_utf8_lossy(&raw_exchange(server.first_addr(), bytes, 1 << 16).await)
        .into_owned();
    assert!(
        reply.matches("HTTP/1.1").count() <= 1,
        "a second response was served: {reply:?}"
    );
    assert_alive(&server).await;
}

#[tokio::test]
async fn oversized_headers_get_431() {
    let server = start_toml(SERVER).await;
    let big = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    let reply =
        String::from_utf8_lossy(&raw_exchange(server.first_addr(), big.as_bytes(), 1 << 16).await)
            .into_owned();
    assert!(reply.starts_with("HTTP/1.1 431"), "{reply:?}");
    assert_alive(&server).await;
}

#[tokio::test]
async fn a_client_that_stops_mid_headers_is_cut_off() {
    let server = start_toml(SERVER).await;
    // header_read_timeout is 1s: the server must close well before raw_exchange's 20 s bound.
    let started = std::time::Instant::now();
    let _ = raw_exchange(
        server.first_addr(),
        b"GET / HTTP/1.1\r\nHost: x\r\n",
        1 << 16,
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "slow client kept for {:?}",
        started.elapsed()
    );
    assert_alive(&server).await;
}

#[tokio::test]
async fn an_idle_h2_connection_is_closed() {
    let server = start_toml(SERVER).await;
    // h2c preface and an empty SETTINGS frame, then silence: idle_timeout (1s) closes it.
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
    let started = std::time::Instant::now();
    let reply = raw_exchange(server.first_addr(), preface, 1 << 20).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "idle h2 kept for {:?}",
        started.elapsed()
    );
    // The server spoke HTTP/2 (a SETTINGS frame first) and said goodbye with GOAWAY (type 7).
    assert!(
        reply.len() >= 9 && reply[3] == 4,
        "expected a SETTINGS frame first: {reply:?}"
    );
    assert!(
        has_frame_type(&reply, 7),
        "expected a GOAWAY frame: {reply:?}"
    );
}

#[tokio::test]
async fn h2_garbage_after_the_preface_closes_only_that_connection() {
    let server = start_toml(SERVER).await;
    let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    bytes.extend_from_slice(&[0xff; 64]);
    let _ = raw_exchange(server.first_addr(), &bytes, 1 << 20).await;
    assert_alive(&server).await;
}

fn has_frame_type(mut frames: &[u8], wanted: u8) -> bool {
    while frames.len() >= 9 {
        let len = ((frames[0] as usize) << 16) | ((frames[1] as usize) << 8) | frames[2] as usize;
        if frames[3] == wanted {
            return true;
        }
        frames = &frames[(9 + len).min(frames.len())..];
    }
    false
}
