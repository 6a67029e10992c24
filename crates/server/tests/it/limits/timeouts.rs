//! Connection timeouts: an idle HTTP/1.1 keep-alive connection lives for `idle_timeout`, not
//! `header_read_timeout` (which only times a request head from its first byte), and HTTP/2
//! clients that stop answering keep-alive PINGs are dropped.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::read_response;
use sluice_testkit::start_toml;

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

async fn server(header_read_timeout: &str, idle_timeout: &str) -> sluice_testkit::TestServer {
    start_toml(&format!(
        "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\nheader_read_timeout = \"{header_read_timeout}\"\nidle_timeout = \"{idle_timeout}\"\n[[routes]]\nrespond = {{ body = \"alive\" }}\n"
    ))
    .await
}

/// Read until the server closes the connection (bounded); how long that took.
async fn time_to_close(stream: &mut TcpStream) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    let closed = async { while !matches!(stream.read(&mut buf).await, Ok(0) | Err(_)) {} };
    tokio::time::timeout(Duration::from_secs(20), closed)
        .await
        .expect("the server never closed the connection");
    started.elapsed()
}

#[tokio::test]
async fn an_idle_keep_alive_connection_outlives_header_read_timeout() {
    // Before the fix, hyper's header timer ran while the connection sat idle and closed it
    // after header_read_timeout (200ms) instead of idle_timeout.
    let server = server("200ms", "1500ms").await;
    let mut stream = TcpStream::connect(server.first_addr()).await.unwrap();
    stream.write_all(GET).await.unwrap();
    assert!(read_response(&mut stream).await.unwrap().ends_with("alive"));
    // Idle for three header timeouts: the subject of the test is time passing.
    tokio::time::sleep(Duration::from_millis(600)).await;
    stream.write_all(GET).await.unwrap();
    let second = read_response(&mut stream).await;
    assert!(
        second.as_deref().is_some_and(|r| r.ends_with("alive")),
        "the idle connection was closed before idle_timeout: {second:?}"
    );
    // Then idle_timeout closes it: after at least one idle period, within two.
    let closed_after = time_to_close(&mut stream).await;
    assert!(
        closed_after >= Duration::from_millis(1400) && closed_after < Duration::from_secs(5),
        "closed after {closed_after:?}"
    );
}

#[tokio::test]
async fn after_an_idle_period_a_slow_head_is_still_cut_off_at_header_read_timeout() {
    let server = server("200ms", "10s").await;
    let mut stream = TcpStream::connect(server.first_addr()).await.unwrap();
    stream.write_all(GET).await.unwrap();
    assert!(read_response(&mut stream).await.is_some());
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Half a head, then nothing: its timer starts at this first byte.
    stream.write_all(b"GET / HTTP/1.1\r\nHo").await.unwrap();
    let closed_after = time_to_close(&mut stream).await;
    assert!(
        closed_after < Duration::from_secs(3),
        "a stalled head was kept for {closed_after:?} (idle_timeout is 10s)"
    );
}

#[tokio::test]
async fn a_silent_new_connection_is_closed_after_idle_timeout() {
    let server = server("10s", "300ms").await;
    let mut stream = TcpStream::connect(server.first_addr()).await.unwrap();
    let closed_after = time_to_close(&mut stream).await;
    assert!(closed_after < Duration::from_secs(3), "{closed_after:?}");
}

#[tokio::test]
async fn an_h2_client_that_does_not_answer_pings_is_dropped() {
    let server = start_toml(
        "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\nidle_timeout = \"60s\"\nh2_keep_alive_interval = \"200ms\"\nh2_keep_alive_timeout = \"200ms\"\n[[routes]]\nrespond = { body = \"alive\" }\n",
    )
    .await;
    // h2c preface and an empty SETTINGS frame, then silence: no SETTINGS ack, no PING ack.
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
    let started = Instant::now();
    let reply = sluice_testkit::raw_exchange(server.first_addr(), preface, 1 << 20).await;
    // Closed long before idle_timeout (60s), after a PING (frame type 6).
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(has_frame_type(&reply, 6), "no PING was sent: {reply:?}");
}

pub(crate) fn has_frame_type(mut frames: &[u8], wanted: u8) -> bool {
    while frames.len() >= 9 {
        let len =
            usize::from(frames[0]) << 16 | usize::from(frames[1]) << 8 | usize::from(frames[2]);
        if frames[3] == wanted {
            return true;
        }
        frames = frames.get(9 + len..).unwrap_or_default();
    }
    false
}

#[tokio::test]
async fn answered_pings_do_not_keep_an_idle_h2_connection_open() {
    let server = start_toml(
        "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\nidle_timeout = \"1s\"\nh2_keep_alive_interval = \"100ms\"\nh2_keep_alive_timeout = \"5s\"\n[[routes]]\nrespond = { body = \"alive\" }\n",
    )
    .await;
    let mut stream = TcpStream::connect(server.first_addr()).await.unwrap();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    stream.write_all(&hello).await.unwrap();
    let started = Instant::now();
    // Acknowledge every SETTINGS and PING, like a live client, until the server says GOAWAY.
    let mut buf = Vec::new();
    let mut pongs = 0;
    let goaway = async {
        loop {
            while buf.len() >= 9 {
                let len =
                    usize::from(buf[0]) << 16 | usize::from(buf[1]) << 8 | usize::from(buf[2]);
                if buf.len() < 9 + len {
                    break;
                }
                let (kind, flags) = (buf[3], buf[4]);
                let payload = buf[9..9 + len].to_vec();
                buf.drain(..9 + len);
                match (kind, flags & 1) {
                    (7, _) => return,
                    (4, 0) => stream
                        .write_all(&[0, 0, 0, 4, 1, 0, 0, 0, 0])
                        .await
                        .unwrap(),
                    (6, 0) => {
                        let mut ack = vec![0, 0, 8, 6, 1, 0, 0, 0, 0];
                        ack.extend_from_slice(&payload);
                        stream.write_all(&ack).await.unwrap();
                        pongs += 1;
                    }
                    _ => {}
                }
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => panic!("closed without GOAWAY"),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), goaway)
        .await
        .expect("the idle connection was kept open by its PINGs");
    assert!(pongs >= 1, "no PING was sent");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}
