//! The acceptance exchange: 10,000 messages of random sizes up to 1 MiB through sluice to a
//! WebSocket echo upstream and back, every one checked byte for byte, over HTTP/1.1 and over
//! HTTP/2 (extended CONNECT), then a clean close from the client; and a close started by the
//! upstream.
//!
//! Sizes: tests run unoptimised on two busy cores, so most messages are small: the size's bit
//! length is uniform in 0..=16 (up to 64 KiB), every 100th message's in 0..=20 (up to 1 MiB),
//! message 1 is exactly 1 MiB and message 0 is empty: about 70 MB each way. With
//! `SLUICE_WS_HEAVY=1` sizes are uniform in 0..=1 MiB instead (about 5 GB each way). The seed is
//! random unless `SLUICE_WS_SEED` gives one, and printed on failure.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::{WAIT, h1_client, h2_client, proxy_to, wait_for_metric, ws_upstream};

const MESSAGES: u64 = 10_000;
const MIB: usize = 1 << 20;

/// The bulk exchange may take a while unoptimised; this bounds it, not its speed (an hour for
/// the heavy version).
fn exchange_limit() -> Duration {
    if std::env::var_os("SLUICE_WS_HEAVY").is_some() {
        Duration::from_secs(3600)
    } else {
        Duration::from_secs(240)
    }
}

fn seed() -> u64 {
    std::env::var("SLUICE_WS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..))
}

/// Message `i` of the run seeded `seed`: made again from the two numbers on the receiving side,
/// so nothing is kept in memory while it travels.
fn message(seed: u64, i: u64) -> Message {
    let mut rng = fastrand::Rng::with_seed(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let heavy = std::env::var_os("SLUICE_WS_HEAVY").is_some();
    let len = match i {
        0 => 0,
        1 => MIB,
        _ if heavy => rng.usize(..=MIB),
        _ => {
            let bits = rng.u32(..=if i.is_multiple_of(100) { 20 } else { 16 });
            let high = 1usize << bits;
            rng.usize(high / 2..=high)
        }
    };
    let mut bytes = vec![0u8; len];
    if i % 10 == 3 {
        // Now and then a text message (UTF-8 is checked on the way back, by tungstenite).
        bytes.iter_mut().for_each(|b| *b = rng.alphanumeric() as u8);
        Message::text(String::from_utf8(bytes).unwrap())
    } else {
        rng.fill(&mut bytes);
        Message::binary(bytes)
    }
}

/// Send `MESSAGES` messages while reading the echoes, checking each; then close from this side
/// and wait for the close to complete.
async fn exchange<S>(ws: WebSocketStream<S>, seed: u64) -> u64
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut stream) = ws.split();
    let sender = tokio::spawn(async move {
        for i in 0..MESSAGES {
            sink.send(message(seed, i)).await.unwrap();
        }
        sink
    });
    let mut bytes = 0u64;
    for i in 0..MESSAGES {
        let got = stream
            .next()
            .await
            .unwrap_or_else(|| panic!("seed {seed}: stream ended before echo {i}"))
            .unwrap_or_else(|e| panic!("seed {seed}: echo {i} failed: {e}"));
        let expected = message(seed, i);
        bytes += expected.len() as u64;
        assert!(
            got == expected,
            "seed {seed}: echo {i} differs: {} bytes, expected {} bytes",
            got.len(),
            expected.len()
        );
    }
    let mut sink = sender.await.unwrap();
    sink.send(Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "done".into(),
    })))
    .await
    .unwrap();
    // The upstream answers the close; then the stream ends (the upstream closes its side).
    let mut answered = false;
    while let Some(next) = stream.next().await {
        match next {
            Ok(Message::Close(Some(frame))) => {
                assert_eq!(frame.code, CloseCode::Normal, "seed {seed}");
                answered = true;
            }
            Ok(other) => panic!("seed {seed}: unexpected {other:?} after close"),
            Err(e) => panic!("seed {seed}: close failed: {e}"),
        }
    }
    assert!(
        answered,
        "seed {seed}: the upstream's close frame came through"
    );
    eprintln!("seed {seed}: {MESSAGES} messages, {bytes} bytes each way");
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_messages_over_http1_then_the_client_closes() {
    let upstream = ws_upstream().await;
    // Compression and the cache on the route must leave the upgraded exchange alone.
    let server = sluice_testkit::start_toml(&format!(
        r#"
        [log]
        access = "off"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        address = "127.0.0.1:0"
        [caches.main]
        memory = "16MiB"
        [[routes]]
        name = "ws"
        compress = {{}}
        cache = {{ zone = "main" }}
        proxy = {{ upstream = "backend" }}
        [upstreams.backend]
        servers = ["{}"]
        "#,
        upstream.addr
    ))
    .await;
    let addr = server.first_addr();
    let (ws, headers) = h1_client(addr, "/echo", Some("chat, superchat"))
        .await
        .unwrap();
    assert_eq!(headers["sec-websocket-protocol"], "chat", "end to end");
    assert!(headers.get("content-encoding").is_none());
    assert!(headers.get("x-cache").is_none());
    let seed = seed();
    let bytes = tokio::time::timeout(exchange_limit(), exchange(ws, seed))
        .await
        .unwrap_or_else(|_| panic!("seed {seed}: exchange timed out"));
    assert!(bytes > MIB as u64);

    // What the upstream saw: the client's own handshake (its key: tungstenite checked the
    // accept), with the upgrade forwarded.
    let seen = upstream.seen.lock().unwrap().clone();
    let (method, path, h) = &seen[0];
    assert_eq!((method.as_str(), path.as_str()), ("GET", "/echo"));
    assert!(
        h["upgrade"]
            .to_str()
            .unwrap()
            .eq_ignore_ascii_case("websocket")
    );
    assert_eq!(h["sec-websocket-protocol"], "chat, superchat");
    assert!(h.contains_key("sec-websocket-key"));

    wait_for_metric(&server, "sluice_tunnels_open{route=\"ws\"}", 0.0).await;
    wait_for_metric(
        &server,
        "sluice_tunnels_total{route=\"ws\",end=\"closed\"}",
        1.0,
    )
    .await;
    // The upgraded upstream connection was not given back to the keep-alive pool.
    let pool = format!(
        "sluice_upstream_connections{{upstream=\"backend\",server=\"{}\"}}",
        upstream.addr
    );
    wait_for_metric(&server, &pool, 0.0).await;
    let text = crate::scrape_metrics(&server).await;
    assert_eq!(
        crate::metric(&text, "sluice_requests_total{route=\"ws\",code=\"1xx\"}"),
        1.0,
        "the 101 is counted (and logged) when the tunnel opens"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_messages_over_http2_extended_connect_then_the_client_closes() {
    let upstream = ws_upstream().await;
    // Compression must leave the 200 to the CONNECT alone (RFC 9110 §9.3.6: a tunnel).
    let server = proxy_to(upstream.addr, "", "compress = {}").await;
    let (ws, parts) = h2_client(server.first_addr(), "/echo").await;
    assert!(parts.headers.get("content-encoding").is_none());
    assert!(
        parts.headers.get("sec-websocket-accept").is_none(),
        "RFC 8441 §5"
    );
    let seed = seed();
    tokio::time::timeout(exchange_limit(), exchange(ws, seed))
        .await
        .unwrap_or_else(|_| panic!("seed {seed}: exchange timed out"));

    // The upstream got an HTTP/1.1 handshake with a key made by the proxy.
    let seen = upstream.seen.lock().unwrap().clone();
    let (method, path, h) = &seen[0];
    assert_eq!((method.as_str(), path.as_str()), ("GET", "/echo"));
    assert_eq!(h["upgrade"], "websocket");
    assert_eq!(h["sec-websocket-version"], "13");
    assert!(h.contains_key("sec-websocket-key"));
    wait_for_metric(
        &server,
        "sluice_tunnels_total{route=\"ws\",end=\"closed\"}",
        1.0,
    )
    .await;
}

/// The upstream starts the close: the client sees its close frame, answers, and the stream
/// ends, over both protocols.
#[tokio::test]
async fn the_upstream_closes_over_http1_and_http2() {
    let upstream = ws_upstream().await;
    let server = proxy_to(upstream.addr, "", "").await;
    let addr = server.first_addr();
    let (h1, _) = h1_client(addr, "/server-close", None).await.unwrap();
    upstream_closes(h1).await;
    let (h2, _) = h2_client(addr, "/server-close").await;
    upstream_closes(h2).await;
    wait_for_metric(
        &server,
        "sluice_tunnels_total{route=\"ws\",end=\"closed\"}",
        2.0,
    )
    .await;
}

async fn upstream_closes<S: AsyncRead + AsyncWrite + Unpin>(mut ws: WebSocketStream<S>) {
    let run = async {
        ws.send(Message::text("hello")).await.unwrap();
        assert_eq!(ws.next().await.unwrap().unwrap(), Message::text("hello"));
        ws.send(Message::text("bye")).await.unwrap();
        let mut closed_by_upstream = false;
        while let Some(next) = ws.next().await {
            match next.unwrap() {
                Message::Close(_) => closed_by_upstream = true,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(closed_by_upstream);
    };
    tokio::time::timeout(WAIT, run).await.unwrap();
}
