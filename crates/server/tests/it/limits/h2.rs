//! HTTP/2 limits with real clients: `max_concurrent_streams` (a client that opens one stream
//! more than the server's SETTINGS allow gets RST_STREAM REFUSED_STREAM for it; well-behaved
//! clients such as hyper queue instead) and the header list size (`max_header_size`, counted as
//! RFC 9113 §6.5.2 does: name + value + 32 per field; over it the stream is answered 431).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::proxy::serve_fn;
use sluice_testkit::{Offer, client, start_toml};

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// HEADERS (END_STREAM | END_HEADERS) for `GET http://x/`, HPACK from the static table:
/// `:method GET`, `:scheme http`, `:path /`, then `:authority: x` as a literal.
fn get(stream: u32) -> Vec<u8> {
    frame(1, 0x5, stream, &[0x82, 0x86, 0x84, 0x01, 0x01, b'x'])
}

/// Frames received until one matches `done` (bounded), as (type, flags, stream, payload).
async fn frames_until(
    stream: &mut TcpStream,
    done: impl Fn(&(u8, u8, u32, Vec<u8>)) -> bool,
) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut frames = Vec::new();
    let read = async {
        loop {
            while buf.len() >= 9 {
                let len =
                    usize::from(buf[0]) << 16 | usize::from(buf[1]) << 8 | usize::from(buf[2]);
                if buf.len() < 9 + len {
                    break;
                }
                let id = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
                let f = (buf[3], buf[4], id, buf[9..9 + len].to_vec());
                buf.drain(..9 + len);
                let stop = done(&f);
                frames.push(f);
                if stop {
                    return;
                }
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("no such frame");
    frames
}

#[tokio::test]
async fn one_stream_over_max_concurrent_streams_is_refused() {
    // An upstream that never answers keeps the streams open.
    let (upstream, _) = serve_fn(|_req| std::future::pending()).await;
    let server = start_toml(&format!(
        "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\nmax_concurrent_streams = 2\n[[routes]]\nproxy = {{ to = \"{upstream}\" }}\n"
    ))
    .await;
    let mut stream = TcpStream::connect(server.first_addr()).await.unwrap();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(frame(4, 0, 0, &[]));
    for id in [1, 3, 5] {
        hello.extend(get(id));
    }
    stream.write_all(&hello).await.unwrap();
    // RST_STREAM (type 3) for stream 5 with REFUSED_STREAM (7); streams 1 and 3 stay open.
    let frames = frames_until(&mut stream, |f| f.0 == 3 && f.2 == 5).await;
    let resets: Vec<_> = frames.iter().filter(|f| f.0 == 3).collect();
    assert_eq!(resets.len(), 1, "{frames:?}");
    assert_eq!(resets[0].3, 7u32.to_be_bytes(), "not REFUSED_STREAM");
}

#[tokio::test]
async fn a_header_list_of_max_header_size_passes_and_a_larger_one_gets_431() {
    let server = start_toml(
        "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\nmax_header_size = \"8KiB\"\n[[routes]]\nrespond = { body = \"ok\" }\n",
    )
    .await;
    let http = client(Offer::Http2);
    let authority = server.first_addr().to_string();
    // What hyper's client sends besides X-Big: :method GET, :scheme http, :path /,
    // :authority, accept: */*; each field counts name + value + 32 (RFC 9113 §6.5.2).
    let fixed =
        (7 + 3 + 32) + (7 + 4 + 32) + (5 + 1 + 32) + (10 + authority.len() + 32) + (6 + 3 + 32);
    let big = |total: usize| "a".repeat(total - fixed - (5 + 32));
    let resp = http
        .get(server.url("/"))
        .header("x-big", big(8192))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = http
        .get(server.url("/"))
        .header("x-big", big(8193))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 431);
}
