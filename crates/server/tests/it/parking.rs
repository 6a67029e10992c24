//! Idle connections give their buffers back and carry on (`crates/server/src/net/h1.rs`,
//! `docs/performance.md` "Memory"): an HTTP/1.1 connection idle for a second between requests
//! is parked (`sluice_connections_parked` counts it), over TLS too, and its next request, or
//! requests pipelined in one write, are answered in order; an idle HTTP/2 connection still
//! answers PING and serves its next stream.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use sluice_testkit::{TestServer, start_toml_in};

use crate::hostile::h2::{HEADERS, PING, PREFACE, SETTINGS, frame};

/// A cleartext and a TLS HTTP/1.1 listener, an h2c one, and two files to tell responses apart.
async fn server(dir: &std::path::Path) -> TestServer {
    std::fs::create_dir_all(dir.join("public")).unwrap();
    std::fs::write(dir.join("public/a.txt"), "first file\n").unwrap();
    std::fs::write(dir.join("public/b.txt"), "second file, longer\n").unwrap();
    start_toml_in(
        dir,
        r#"
        [log]
        access = "off"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        name = "plain"
        address = "127.0.0.1:0"
        protocols = ["http/1.1"]
        [[listeners]]
        name = "tls"
        address = "127.0.0.1:0"
        protocols = ["http/1.1"]
        tls = "self-signed"
        [[listeners]]
        name = "h2c"
        address = "127.0.0.1:0"
        protocols = ["h2"]
        [[routes]]
        static = { root = "public" }
        "#,
    )
    .await
}

/// `sluice_connections_parked` of `listener`.
async fn parked(server: &TestServer, listener: &str) -> f64 {
    let text = crate::scrape_metrics(server).await;
    crate::metric(
        &text,
        &format!("sluice_connections_parked{{listener=\"{listener}\"}}"),
    )
}

/// Wait until `listener` has `want` parked connections (parking happens after a second idle;
/// the bound only catches a connection that is never parked).
async fn until_parked(server: &TestServer, listener: &str, want: f64) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let now = parked(server, listener).await;
        if now == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{listener}: {now} parked, want {want}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await; // polling, bounded above
    }
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n")
}

/// Read `count` responses (head and `Content-Length` body) and return their bodies.
async fn responses<S: AsyncRead + Unpin>(stream: &mut S, count: usize) -> Vec<String> {
    let mut bytes = Vec::new();
    let mut bodies = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        while bodies.len() < count {
            let parsed = bytes
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .and_then(|end| {
                    let head = String::from_utf8_lossy(&bytes[..end]).to_lowercase();
                    assert!(head.starts_with("http/1.1 200"), "{head}");
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))?
                        .trim()
                        .parse()
                        .ok()?;
                    (bytes.len() >= end + 4 + length).then_some((end + 4, length))
                });
            if let Some((start, length)) = parsed {
                bodies.push(String::from_utf8_lossy(&bytes[start..start + length]).into_owned());
                bytes.drain(..start + length);
                continue;
            }
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed after {} responses", bodies.len());
            bytes.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("responses not read in time");
    bodies
}

/// One request, parked, then one request alone and two pipelined in one write, on `stream`.
async fn park_and_carry_on<S>(server: &TestServer, listener: &str, mut stream: S)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    stream.write_all(get("/a.txt").as_bytes()).await.unwrap();
    assert_eq!(responses(&mut stream, 1).await, ["first file\n"]);
    until_parked(server, listener, 1.0).await;

    stream.write_all(get("/b.txt").as_bytes()).await.unwrap();
    assert_eq!(responses(&mut stream, 1).await, ["second file, longer\n"]);
    assert_eq!(parked(server, listener).await, 0.0);

    // Parked again; then two requests in one write, each longer than the 64 bytes the parked
    // connection reads to wake: both answered, in order.
    until_parked(server, listener, 1.0).await;
    let long = |path: &str| {
        format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nUser-Agent: {}\r\n\r\n",
            "p".repeat(80)
        )
    };
    let both = [long("/b.txt"), long("/a.txt")].concat();
    stream.write_all(both.as_bytes()).await.unwrap();
    assert_eq!(
        responses(&mut stream, 2).await,
        ["second file, longer\n", "first file\n"]
    );
}

#[tokio::test]
async fn an_idle_http1_connection_is_parked_and_serves_its_next_requests() {
    let temp = tempfile::tempdir().unwrap();
    let server = server(temp.path()).await;
    let stream = TcpStream::connect(server.addr("plain")).await.unwrap();
    park_and_carry_on(&server, "plain", stream).await;
}

/// A TLS connection to the `tls` listener that offers only HTTP/1.1.
async fn tls_http1(server: &TestServer) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut config = sluice_testkit::insecure_tls_config();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(server.addr("tls")).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_idle_tls_connection_is_parked_and_serves_its_next_requests() {
    let temp = tempfile::tempdir().unwrap();
    let server = server(temp.path()).await;
    let stream = tls_http1(&server).await;
    park_and_carry_on(&server, "tls", stream).await;
}

#[tokio::test]
async fn a_parked_tls_connection_sends_close_notify_on_shutdown() {
    let temp = tempfile::tempdir().unwrap();
    let server = server(temp.path()).await;
    let mut stream = tls_http1(&server).await;
    stream.write_all(get("/a.txt").as_bytes()).await.unwrap();
    assert_eq!(responses(&mut stream, 1).await, ["first file\n"]);
    until_parked(&server, "tls", 1.0).await;
    let stopped = tokio::spawn(server.shutdown(Duration::from_secs(10)));
    // A clean end of stream: rustls reports a missing close_notify as an error.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest)).await;
    assert!(matches!(read, Ok(Ok(0))), "{read:?}");
    assert!(stopped.await.unwrap(), "drain did not finish");
}

const ACK: u8 = 0x1;
const END_STREAM_HEADERS: u8 = 0x5;

/// `GET /a.txt` with `:authority: x`: `:method GET` (2), `:scheme http` (6) from the static
/// table, `:path` (name 4) and `:authority` (name 1) as literals (RFC 7541 §6.2.2).
fn get_block() -> Vec<u8> {
    let mut block = vec![0x82, 0x86, 0x04, 6];
    block.extend_from_slice(b"/a.txt");
    block.extend_from_slice(&[0x01, 1, b'x']);
    block
}

/// Read frames until one matches `want` (kind, flags, stream); returns its payload.
async fn frame_until(stream: &mut TcpStream, bytes: &mut Vec<u8>, want: (u8, u8, u32)) -> Vec<u8> {
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            while bytes.len() >= 9 {
                let len = (usize::from(bytes[0]) << 16)
                    | (usize::from(bytes[1]) << 8)
                    | usize::from(bytes[2]);
                if bytes.len() < 9 + len {
                    break;
                }
                let id = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff;
                let (kind, flags) = (bytes[3], bytes[4]);
                let payload = bytes[9..9 + len].to_vec();
                bytes.drain(..9 + len);
                if kind == want.0 && flags & want.1 == want.1 && id == want.2 {
                    return payload;
                }
            }
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed while waiting for frame {want:?}");
            bytes.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap_or_else(|_| panic!("no frame {want:?}"))
}

#[tokio::test]
async fn an_idle_http2_connection_answers_ping_and_serves_its_next_stream() {
    let temp = tempfile::tempdir().unwrap();
    let server = server(temp.path()).await;
    let mut stream = TcpStream::connect(server.addr("h2c")).await.unwrap();
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(SETTINGS, 0, 0, &[]));
    hello.extend(frame(HEADERS, END_STREAM_HEADERS, 1, &get_block()));
    stream.write_all(&hello).await.unwrap();
    let mut bytes = Vec::new();
    frame_until(&mut stream, &mut bytes, (HEADERS, 0, 1)).await;

    // Idle past the time after which an HTTP/1.1 connection would be parked: the condition
    // under test, not a synchronisation.
    tokio::time::sleep(sluice_server::net::h1::PARK_AFTER * 2).await;
    let ping = frame(PING, 0, 0, b"idle-ok!");
    stream.write_all(&ping).await.unwrap();
    assert_eq!(
        frame_until(&mut stream, &mut bytes, (PING, ACK, 0)).await,
        b"idle-ok!"
    );
    stream
        .write_all(&frame(HEADERS, END_STREAM_HEADERS, 3, &get_block()))
        .await
        .unwrap();
    frame_until(&mut stream, &mut bytes, (HEADERS, 0, 3)).await;
}
