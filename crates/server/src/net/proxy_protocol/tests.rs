#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

const LONG: Duration = Duration::from_secs(5);

async fn rest<S: AsyncRead + Unpin>(mut stream: Prefixed<S>) -> Vec<u8> {
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn bytes_read_past_the_header_come_first() {
    let input = &b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\nGET / HTTP/1.1\r\n\r\n"[..];
    let (source, stream) = read_header(input, LONG).await.unwrap();
    assert_eq!(source, Some("1.2.3.4:1111".parse().unwrap()));
    assert_eq!(rest(stream).await, b"GET / HTTP/1.1\r\n\r\n");
}

#[tokio::test]
async fn a_header_split_over_many_writes_is_assembled() {
    let (mut client, server) = tokio::io::duplex(64);
    let reader = tokio::spawn(async move {
        let (source, stream) = read_header(server, LONG).await.unwrap();
        (source, rest(stream).await)
    });
    for chunk in [&b"PRO"[..], b"XY UNKNOWN\r", b"\nhello"] {
        client.write_all(chunk).await.unwrap();
        tokio::task::yield_now().await;
    }
    drop(client);
    let (source, rest) = reader.await.unwrap();
    assert_eq!(source, None);
    assert_eq!(rest, b"hello");
}

#[tokio::test]
async fn garbage_truncation_and_silence_are_errors() {
    let garbage = read_header(&b"GET / HTTP/1.1\r\n\r\n"[..], LONG).await;
    assert!(matches!(garbage, Err(HeaderError::Invalid(_))));
    let truncated = read_header(&b"PROXY TCP4 1.2.3.4"[..], LONG).await;
    assert!(matches!(truncated, Err(HeaderError::Truncated)));
    let (_client, server) = tokio::io::duplex(64);
    let silent = read_header(server, Duration::from_millis(20)).await;
    assert!(matches!(silent, Err(HeaderError::TimedOut)));
}
