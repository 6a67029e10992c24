//! HTTP/2 behaviour that h2spec checks too (`h2spec.rs`), pinned here without its races: the
//! preface on cleartext ports (`sluice_server::net::h2c`), and a request whose rest arrives after the
//! response was sent (`sluice_server::pipeline::unread_body`), driven frame by frame over raw TCP.

use std::net::SocketAddr;
use std::time::Duration;

use sluice_testkit::{Offer, client, start_toml};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SERVER: &str = r#"
[log]
access = "off"
[[listeners]]
name = "both"
address = "127.0.0.1:0"
[[listeners]]
name = "h2c"
address = "127.0.0.1:0"
protocols = ["h2"]
[[routes]]
respond = { body = "alive" }
"#;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;
const NO_ERROR: u32 = 0;
const PROTOCOL_ERROR: u32 = 1;

/// `POST /` on `x`, HPACK without the dynamic table: indexed `:method POST`, `:scheme http`,
/// `:path /`, then `:authority` as a literal with an indexed name.
const POST: &[u8] = &[0x83, 0x86, 0x84, 0x01, 0x01, b'x'];
/// A trailer section `x-test: ok` (literal, new name, not indexed).
const TRAILERS: &[u8] = &[0x00, 6, b'x', b'-', b't', b'e', b's', b't', 2, b'o', b'k'];

#[derive(Debug)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

impl Frame {
    fn error_code(&self) -> Option<u32> {
        let code = match self.kind {
            RST_STREAM => self.payload.get(..4)?,
            GOAWAY => self.payload.get(4..8)?,
            _ => return None,
        };
        Some(u32::from_be_bytes(code.try_into().ok()?))
    }
}

/// An HTTP/2 client that sends exactly the frames a test says, over h2c.
struct RawH2 {
    tcp: TcpStream,
    /// Every frame read so far, for failure messages.
    seen: Vec<String>,
}

impl RawH2 {
    async fn connect(addr: SocketAddr) -> Self {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(PREFACE).await.unwrap();
        let mut h2 = Self {
            tcp,
            seen: Vec::new(),
        };
        h2.send(SETTINGS, 0, 0, &[]).await;
        h2
    }

    async fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
        let mut frame = vec![len[1], len[2], len[3], kind, flags];
        frame.extend_from_slice(&stream.to_be_bytes());
        frame.extend_from_slice(payload);
        self.tcp.write_all(&frame).await.unwrap();
    }

    /// The next frame (SETTINGS from the server acknowledged on the way); `None` once the
    /// server closed the connection.
    async fn frame(&mut self) -> Option<Frame> {
        loop {
            let mut head = [0u8; 9];
            self.tcp.read_exact(&mut head).await.ok()?;
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let mut payload = vec![0u8; len];
            self.tcp.read_exact(&mut payload).await.ok()?;
            let frame = Frame {
                kind: head[3],
                flags: head[4],
                stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
                payload,
            };
            self.seen.push(format!(
                "type {} flags {:#x} stream {} code {:?}",
                frame.kind,
                frame.flags,
                frame.stream,
                frame.error_code()
            ));
            if frame.kind == SETTINGS && frame.flags & ACK == 0 {
                self.send(SETTINGS, ACK, 0, &[]).await;
                continue;
            }
            return Some(frame);
        }
    }

    /// Read until a frame on stream 1 (or the connection's GOAWAY) that `wanted` accepts,
    /// within 10s.
    async fn until(&mut self, what: &str, wanted: impl Fn(&Frame) -> bool) -> Frame {
        let found = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(frame) = self.frame().await {
                if (frame.stream == 1 || frame.kind == GOAWAY) && wanted(&frame) {
                    return Some(frame);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(frame)) => frame,
            Ok(None) => panic!("closed before {what}; frames: {:#?}", self.seen),
            Err(_) => panic!("no {what} in 10s; frames: {:#?}", self.seen),
        }
    }

    fn saw_reset_with(&self, code: u32) -> bool {
        let wanted = format!("type {RST_STREAM} flags 0x0 stream 1 code Some({code})");
        self.seen.contains(&wanted)
    }
}

/// Send `bytes` on a fresh connection; what came back, and whether the connection ended with a
/// clean close (FIN) rather than a reset.
async fn send_and_read_to_close(addr: SocketAddr, bytes: &[u8]) -> (Vec<u8>, bool) {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(bytes).await.unwrap();
    let mut reply = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) => return true,
                Ok(n) => reply.extend_from_slice(&buf[..n]),
                Err(_) => return false,
            }
        }
    };
    let clean = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the server did not close the connection in 10s");
    (reply, clean)
}

#[tokio::test]
async fn a_broken_preface_is_closed_without_an_http1_reply_on_a_port_with_both() {
    let server = start_toml(SERVER).await;
    // The preface's first line, then something else: an HTTP/2 client (RFC 9113 §3.4), which
    // HTTP/1.1 would answer 400.
    for bytes in [
        &b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"[..],
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\n",
        b"PRI * HTTP/2.0\r\nHost: x\r\n\r\n",
    ] {
        let (reply, clean) = send_and_read_to_close(server.addr("both"), bytes).await;
        assert!(
            reply.is_empty(),
            "{:?}: {:?}",
            String::from_utf8_lossy(bytes),
            String::from_utf8_lossy(&reply)
        );
        assert!(
            clean,
            "closed with a reset, which can lose the close itself"
        );
    }
}

#[tokio::test]
async fn garbage_is_still_http1_with_a_400_on_a_port_with_both() {
    let server = start_toml(SERVER).await;
    let (reply, _) =
        send_and_read_to_close(server.addr("both"), b"INVALID CONNECTION PREFACE\r\n\r\n").await;
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 400 "), "{reply:?}");
}

#[tokio::test]
async fn an_h2c_only_port_closes_cleanly_on_anything_but_the_preface() {
    let server = start_toml(SERVER).await;
    for bytes in [
        &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"INVALID CONNECTION PREFACE\r\n\r\n",
    ] {
        let (reply, clean) = send_and_read_to_close(server.addr("h2c"), bytes).await;
        assert!(reply.is_empty(), "{:?}", String::from_utf8_lossy(&reply));
        assert!(clean, "{bytes:?}: closed with a reset");
    }
    let resp = client(Offer::Http2)
        .get(format!("http://{}/", server.addr("h2c")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(resp.text().await.unwrap(), "alive");
}

/// The response is all out before the request's body: trailers without END_STREAM after it are
/// still a malformed request, a stream error PROTOCOL_ERROR (RFC 9113 §8.1), not ignored on a
/// stream already reset with NO_ERROR.
#[tokio::test]
async fn trailers_without_end_stream_after_the_response_are_a_protocol_error() {
    let server = start_toml(SERVER).await;
    let mut h2 = RawH2::connect(server.addr("h2c")).await;
    h2.send(HEADERS, END_HEADERS, 1, POST).await;
    let data = h2.until("the response body", |f| f.kind == DATA).await;
    assert_eq!(data.payload, b"alive");
    assert_eq!(
        data.flags & END_STREAM,
        0,
        "the stream ended before the request"
    );

    h2.send(DATA, 0, 1, b"test").await;
    h2.send(HEADERS, END_HEADERS, 1, TRAILERS).await;
    let error = h2
        .until("a stream error", |f| f.error_code().is_some())
        .await;
    assert_eq!(error.error_code(), Some(PROTOCOL_ERROR), "{:#?}", h2.seen);
}

/// A request body that comes after the response: read, and then the response ends cleanly
/// (no reset); the response's bytes were not held back waiting for it.
#[tokio::test]
async fn the_response_ends_once_a_late_request_body_has_arrived() {
    let server = start_toml(SERVER).await;
    let mut h2 = RawH2::connect(server.addr("h2c")).await;
    h2.send(HEADERS, END_HEADERS, 1, POST).await;
    h2.until("the response body", |f| {
        f.kind == DATA && f.payload == b"alive"
    })
    .await;
    h2.send(DATA, END_STREAM, 1, b"the body").await;
    let end = h2
        .until("the end of the response", |f| {
            f.flags & END_STREAM != 0 || f.kind == RST_STREAM
        })
        .await;
    assert_eq!(end.kind, DATA, "{:#?}", h2.seen);
    // The connection goes on: a second request on it is answered.
    h2.send(HEADERS, END_HEADERS | END_STREAM, 3, POST).await;
    let second = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(frame) = h2.frame().await {
            if frame.stream == 3 && frame.flags & END_STREAM != 0 {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(second, Ok(true), "{:#?}", h2.seen);
    assert!(!h2.saw_reset_with(NO_ERROR), "{:#?}", h2.seen);
}

/// A request body that never comes: the response still ends (after about a second), then the
/// stream is reset with NO_ERROR (RFC 9113 §8.1: the client keeps the response).
#[tokio::test]
async fn the_response_ends_even_if_the_request_body_never_comes() {
    let server = start_toml(SERVER).await;
    let mut h2 = RawH2::connect(server.addr("h2c")).await;
    h2.send(HEADERS, END_HEADERS, 1, POST).await;
    h2.until("the end of the response", |f| {
        f.kind == DATA && f.flags & END_STREAM != 0
    })
    .await;
    let reset = h2.until("the reset", |f| f.kind == RST_STREAM).await;
    assert_eq!(reset.error_code(), Some(NO_ERROR));
}

/// An upload larger than what is read of an unread body: the client gets the whole response.
#[tokio::test]
async fn a_large_upload_to_a_route_that_does_not_read_it_gets_its_response() {
    let server = start_toml(SERVER).await;
    for len in [10, 3 << 20] {
        let resp = client(Offer::Http2)
            .post(format!("http://{}/", server.addr("h2c")))
            .body(vec![b'x'; len])
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.text().await.unwrap(), "alive", "{len} bytes up");
    }
}

/// Shutdown reaches an open HTTP/2 connection that is waiting between requests: the server says
/// GOAWAY with NO_ERROR (RFC 9113 §6.8: a graceful close), after serving what came before, and
/// the drain ends once the client has gone. The watchdog in `conn.rs` waits for the shutdown
/// signal once per connection, across every wake-up of the connection.
#[tokio::test]
async fn shutdown_says_goaway_to_an_open_h2_connection() {
    let server = start_toml(SERVER).await;
    let mut h2 = RawH2::connect(server.addr("h2c")).await;
    // A few requests first, so the connection's task has been woken many times before the
    // signal comes.
    for stream in [1u32, 3, 5] {
        h2.send(HEADERS, END_HEADERS | END_STREAM, stream, POST)
            .await;
        let found = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(frame) = h2.frame().await {
                if frame.stream == stream && frame.kind == DATA {
                    return Some(frame);
                }
            }
            None
        })
        .await;
        let data = found.ok().flatten().expect("a response on the stream");
        assert_eq!(data.payload, b"alive");
    }

    let shutdown = tokio::spawn(server.shutdown(Duration::from_secs(10)));
    let goaway = h2
        .until("GOAWAY after shutdown", |f| f.kind == GOAWAY)
        .await;
    assert_eq!(goaway.error_code(), Some(NO_ERROR), "{:#?}", h2.seen);
    drop(h2);
    let drained = tokio::time::timeout(Duration::from_secs(10), shutdown)
        .await
        .expect("shutdown did not end in 10s")
        .unwrap();
    assert!(drained, "the drain did not finish");
}
