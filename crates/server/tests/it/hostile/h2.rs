//! HTTP/2 attacks, written frame by frame over h2c (prior knowledge), because no well-behaved
//! client sends them: rapid reset (CVE-2023-44487), CONTINUATION flood, SETTINGS and PING
//! floods, a zero flow-control window held open. The attacked connection is cut off or kept in
//! bounds; the server keeps serving everyone else.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::upstreams::Recording;
use sluice_testkit::{Offer, TestServer, client, start_toml};

pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
pub(crate) const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
pub(crate) const SETTINGS: u8 = 4;
pub(crate) const PING: u8 = 6;
const GOAWAY: u8 = 7;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
/// RFC 9113 §7.
const ENHANCE_YOUR_CALM: u32 = 0xb;

/// One HTTP/2 frame (RFC 9113 §4.1): 9-byte header, then `payload`.
pub(crate) fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An HPACK block for `GET /` with `:authority: x`: static-table indices for `:method GET`
/// (2), `:scheme http` (6), `:path /` (4), then `:authority` as a literal (RFC 7541 §6).
const GET_BLOCK: &[u8] = &[0x82, 0x86, 0x84, 0x01, 0x01, b'x'];

/// The preface and a SETTINGS frame with `settings` (id, value) pairs.
fn hello(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut payload = Vec::new();
    for (id, value) in settings {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    let mut out = PREFACE.to_vec();
    out.extend(frame(SETTINGS, 0, 0, &payload));
    out
}

/// The frames a server sent, read until it closes or `bound` passes (the bound only catches a
/// server that never ends the connection: the caller asserts on what was read).
async fn read_frames(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    bound: Duration,
) -> (Vec<(u8, u32, Vec<u8>)>, bool) {
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let closed = tokio::time::timeout(bound, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .is_ok();
    let mut frames = Vec::new();
    let mut rest = bytes.as_slice();
    while rest.len() >= 9 {
        let len = (usize::from(rest[0]) << 16) | (usize::from(rest[1]) << 8) | usize::from(rest[2]);
        let stream_id = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
        let end = (9 + len).min(rest.len());
        frames.push((rest[3], stream_id, rest[9..end].to_vec()));
        rest = &rest[end..];
    }
    (frames, closed)
}

/// The error code of the first GOAWAY among `frames`.
fn goaway(frames: &[(u8, u32, Vec<u8>)]) -> Option<u32> {
    frames
        .iter()
        .find(|(kind, _, payload)| *kind == GOAWAY && payload.len() >= 8)
        .map(|(_, _, p)| u32::from_be_bytes([p[4], p[5], p[6], p[7]]))
}

async fn proxy(upstream: &Recording) -> TestServer {
    start_toml(&format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        idle_timeout = "1s"
        header_read_timeout = "1s"
        [[routes]]
        proxy = {{ to = "{}" }}
        "#,
        upstream.addr
    ))
    .await
}

/// A normal client on its own connection is answered while the attack goes on.
async fn assert_serving(server: &TestServer) {
    for offer in [Offer::Http1, Offer::Http2] {
        let resp = client(offer).get(server.url("/ok")).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{offer:?}");
        assert_eq!(resp.text().await.unwrap(), "ok");
    }
}

/// Write `bytes` from another task (the server may stop reading, which is the point); the
/// handle ends when all is written or the connection is gone.
fn write_behind(
    mut half: tokio::net::tcp::OwnedWriteHalf,
    bytes: Vec<u8>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let _ = half.write_all(&bytes).await;
        // Keep the write half open: a FIN would end the connection for reasons of its own.
        std::future::pending::<()>().await;
    })
}

/// Connect, send `bytes` from behind, and read what the server answers until it closes (or
/// `bound` passes): the frames, and whether the server closed the connection.
async fn attack(
    server: &TestServer,
    bytes: Vec<u8>,
    bound: Duration,
) -> (Vec<(u8, u32, Vec<u8>)>, bool) {
    let stream = TcpStream::connect(server.first_addr()).await.unwrap();
    let (mut read, write) = stream.into_split();
    let writer = write_behind(write, bytes);
    let read = read_frames(&mut read, bound).await;
    writer.abort();
    read
}

#[tokio::test]
async fn rapid_reset_is_cut_off_with_enhance_your_calm() {
    let upstream = Recording::start().await;
    let server = proxy(&upstream).await;
    let mut bytes = hello(&[]);
    // 10,000 requests, each cancelled at once (HEADERS then RST_STREAM CANCEL): far past
    // max_concurrent_streams (250) in total, never more than one open at a time.
    for i in 0..10_000u32 {
        let id = 2 * i + 1;
        bytes.extend(frame(HEADERS, END_HEADERS | END_STREAM, id, GET_BLOCK));
        bytes.extend(frame(RST_STREAM, 0, id, &8u32.to_be_bytes()));
    }
    let (frames, closed) = attack(&server, bytes, Duration::from_secs(20)).await;
    assert!(closed, "the connection was kept open");
    // hyper's h2 allows 20 streams reset before they were accepted
    // (max_pending_accept_reset_streams, set in conn.rs), then answers GOAWAY.
    assert_eq!(goaway(&frames), Some(ENHANCE_YOUR_CALM));
    let forwarded = upstream.seen().len();
    assert!(
        forwarded < 1000,
        "{forwarded} of 10,000 cancelled requests went upstream"
    );
    assert_serving(&server).await;
}

#[tokio::test]
async fn a_continuation_flood_is_cut_off() {
    let upstream = Recording::start().await;
    let server = proxy(&upstream).await;
    let mut bytes = hello(&[]);
    // A header block that never ends: HEADERS without END_HEADERS, then 100,000 CONTINUATION
    // frames (CVE-2024-27316 and friends), each adding a little to the block.
    bytes.extend(frame(HEADERS, END_STREAM, 1, GET_BLOCK));
    let piece = [0x40, 0x01, b'a', 0x01, b'b']; // a literal header `a: b`
    for _ in 0..100_000 {
        bytes.extend(frame(CONTINUATION, 0, 1, &piece));
    }
    let (frames, closed) = attack(&server, bytes, Duration::from_secs(20)).await;
    assert!(closed, "the connection was kept open");
    assert!(goaway(&frames).is_some(), "no GOAWAY: {frames:?}");
    assert!(upstream.seen().is_empty());
    assert_serving(&server).await;
}

#[tokio::test]
async fn settings_and_ping_floods_are_bounded() {
    let upstream = Recording::start().await;
    let server = proxy(&upstream).await;
    for (what, flood) in [
        ("SETTINGS", frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100])),
        ("PING", frame(PING, 0, 0, &[7; 8])),
    ] {
        let mut bytes = hello(&[]);
        for _ in 0..200_000 {
            bytes.extend_from_slice(&flood);
        }
        // The flooder reads nothing back: the server must not queue an answer per frame
        // without bound. h2 keeps one SETTINGS ACK or PONG pending and reads no further frame
        // until it is written, so TCP pushes back on the flooder; everyone else is served.
        let stream = TcpStream::connect(server.first_addr()).await.unwrap();
        let (mut read, write) = stream.into_split();
        let writer = write_behind(write, bytes);
        assert_serving(&server).await;
        // Once the flood is read (and answered), the connection has no stream: the idle
        // timeout (1 s) closes it.
        let (frames, closed) = read_frames(&mut read, Duration::from_secs(30)).await;
        writer.abort();
        assert!(closed, "{what} flood: the connection was kept open");
        assert!(goaway(&frames).is_some(), "{what} flood: no GOAWAY");
    }
    assert_serving(&server).await;
}

#[tokio::test]
async fn a_zero_window_held_open_is_closed_at_the_idle_timeout() {
    let origin = sluice_testkit::start_origin(None).await;
    let server = start_toml(&format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        idle_timeout = "1s"
        [[routes]]
        proxy = {{ to = "{}" }}
        "#,
        origin.addr
    ))
    .await;
    // INITIAL_WINDOW_SIZE 0 (RFC 9113 §6.5.2): the server may send headers but no DATA, and
    // the client never opens the window. A large response is asked for.
    let mut bytes = hello(&[(0x4, 0)]);
    let block = [
        0x82, 0x86, 0x04, 0x1c, b'/', b's', b't', b'r', b'e', b'a', b'm', b'?', b'c', b'h', b'u',
        b'n', b'k', b's', b'=', b'6', b'4', b'&', b's', b'i', b'z', b'e', b'=', b'6', b'5', b'5',
        b'3', b'6', 0x01, 0x01, b'x',
    ];
    bytes.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &block));
    let started = Instant::now();
    let (frames, closed) = attack(&server, bytes, Duration::from_secs(20)).await;
    assert!(closed, "a connection with a zero window was held for 20 s");
    assert!(
        !frames
            .iter()
            .any(|(kind, _, p)| *kind == DATA && !p.is_empty()),
        "DATA sent into a zero window"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let resp = client(Offer::Http2)
        .get(server.url("/hello"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}
