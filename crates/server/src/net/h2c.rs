//! HTTP/2 by prior knowledge (h2c) on a cleartext port: telling its connection preface from
//! HTTP/1.1, and refusing a broken one.
//!
//! An h2c client starts with the 24-byte preface `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`
//! (RFC 9113 §3.4). On a port that speaks both, the first bytes decide:
//! - the whole preface: HTTP/2;
//! - bytes that part from the preface within its first line, `PRI * HTTP/2.0\r\n`: HTTP/1.1,
//!   whose parser answers what it makes of them (a request, or 400 for garbage, as nginx does);
//! - the preface's first line and then something else: an HTTP/2 client with a broken preface
//!   (no HTTP/1.1 request has that line: `PRI` is reserved for it, RFC 9113 §3.4 and RFC 7540
//!   §11.6), a connection error `PROTOCOL_ERROR` (RFC 9113 §3.4): the connection is closed, no
//!   GOAWAY (§3.4 allows leaving it out, the peer does not speak HTTP/2) and no HTTP/1.1 reply.
//!
//! On a port that speaks only HTTP/2, anything but the preface is a broken preface.
//!
//! Written here rather than left to hyper-util's `auto::Builder`: it sends every byte string
//! that is not exactly the preface to HTTP/1.1, so an HTTP/2 client with a broken preface got
//! an HTTP/1.1 answer it cannot read; and it has no hook to change that.
//!
//! A refused connection is closed gracefully (see [`refuse`]): closing a socket with unread bytes
//! makes the kernel reset it, and the client may then lose the close itself.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The preface's first line: a client that sent it speaks HTTP/2.
const FIRST_LINE: usize = b"PRI * HTTP/2.0\r\n".len();

/// How long, and for how many bytes, [`refuse`] reads what the client still sends.
const LINGER_TIME: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 64 * 1024;

/// What the start of a cleartext connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    Http1,
    Http2,
    /// An HTTP/2 client whose preface is wrong, or anything but the preface on an HTTP/2-only
    /// port: a connection error.
    BrokenPreface,
}

/// Decide from the first bytes of a connection; `None` while they are still a prefix of the
/// preface (more are needed). `http1`: the port also speaks HTTP/1.1.
pub fn classify(start: &[u8], http1: bool) -> Option<Sniffed> {
    let same = start
        .iter()
        .zip(PREFACE)
        .take_while(|(got, want)| got == want)
        .count();
    if same == PREFACE.len() {
        Some(Sniffed::Http2)
    } else if same == start.len() {
        None
    } else if http1 && same < FIRST_LINE {
        Some(Sniffed::Http1)
    } else {
        Some(Sniffed::BrokenPreface)
    }
}

/// Read as many of the connection's first bytes as it takes to decide (at most the preface's
/// 24), within `timeout`. Returns the decision and the bytes read, for the caller to replay.
/// An error when the client closes or stays silent before that.
pub async fn sniff<S>(io: &mut S, http1: bool, timeout: Duration) -> io::Result<(Sniffed, Vec<u8>)>
where
    S: AsyncRead + Unpin,
{
    let read = async {
        let mut start = [0u8; PREFACE.len()];
        let mut filled = 0;
        loop {
            let n = io.read(&mut start[filled..]).await?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "closed before the first request",
                ));
            }
            filled += n;
            if let Some(sniffed) = classify(&start[..filled], http1) {
                return Ok((sniffed, start[..filled].to_vec()));
            }
        }
    };
    tokio::time::timeout(timeout, read).await.map_err(|_| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            "no request within the header read timeout",
        )
    })?
}

/// Close a connection whose preface is broken: send our FIN, then read and drop what the
/// client still sends (bounded in time and bytes) so the socket closes without a reset.
pub async fn refuse<S>(mut io: S)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let _ = io.shutdown().await;
    let linger = async {
        let mut buf = [0u8; 4096];
        let mut left = LINGER_BYTES;
        while left > 0 {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, linger).await;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_whole_preface_is_http2() {
        assert_eq!(classify(PREFACE, true), Some(Sniffed::Http2));
        assert_eq!(classify(PREFACE, false), Some(Sniffed::Http2));
    }

    #[test]
    fn a_prefix_of_the_preface_needs_more_bytes() {
        for len in 0..PREFACE.len() {
            assert_eq!(classify(&PREFACE[..len], true), None, "{len} bytes");
            assert_eq!(classify(&PREFACE[..len], false), None, "{len} bytes");
        }
    }

    #[test]
    fn http1_requests_and_garbage_go_to_http1_on_a_port_that_speaks_it() {
        for start in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"POST",
            b"PRI / HTTP/1.1\r\n",
            b"PRI * HTTP/1.1\r\n",
            b"PRI * HTTP/2.0 ",
            b"INVALID CONNECTION PREFACE\r\n\r\n",
            b"\x16\x03\x01",
        ] {
            assert_eq!(classify(start, true), Some(Sniffed::Http1), "{start:?}");
        }
    }

    #[test]
    fn the_first_line_then_something_else_is_a_broken_http2_preface() {
        for start in [
            &b"PRI * HTTP/2.0\r\nX"[..],
            b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\n",
        ] {
            assert_eq!(
                classify(start, true),
                Some(Sniffed::BrokenPreface),
                "{start:?}"
            );
        }
    }

    #[test]
    fn anything_but_the_preface_is_broken_on_an_http2_only_port() {
        for start in [&b"G"[..], b"PRI * HTTP/1.1", b"INVALID CONNECTION PREFACE"] {
            assert_eq!(
                classify(start, false),
                Some(Sniffed::BrokenPreface),
                "{start:?}"
            );
        }
    }

    #[tokio::test]
    async fn sniff_reads_no_further_than_the_decision() {
        let mut bytes = PREFACE.to_vec();
        bytes.extend_from_slice(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00");
        let mut io = &bytes[..];
        let (sniffed, read) = sniff(&mut io, true, Duration::from_secs(5)).await.unwrap();
        assert_eq!(sniffed, Sniffed::Http2);
        assert_eq!(read, PREFACE);
        assert_eq!(io.len(), 9, "the SETTINGS frame is left for h2");
    }

    #[tokio::test]
    async fn sniff_fails_when_the_client_closes_early() {
        let mut io = &b"PRI * HT"[..];
        let err = sniff(&mut io, true, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
