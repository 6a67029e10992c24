//! Keeping a connection to the protocol its port or ALPN chose, whatever hyper-util sniffs.
//!
//! HTTP/2 connections are served with hyper-util's `serve_connection_with_upgrades` (for
//! extended CONNECT); HTTP/1.1 ones by hyper directly (`crate::net::h1`), whose parser would answer
//! the HTTP/2 preface with an error response where a closed connection is wanted. That method always
//! tells HTTP/1.1 from HTTP/2 by the first bytes (the HTTP/2 connection preface, RFC 9113 §3.4)
//! and ignores the builder's `http1_only` / `http2_only` (documented on `http1_only`). So an
//! HTTP/1.1-only port (or a TLS connection that chose `http/1.1` by ALPN) would speak h2c to a
//! client that sends the preface, and an HTTP/2-only one HTTP/1.1. [`PrefaceGuard`] sits under
//! hyper and fails the connection's first read as soon as its bytes show the wrong protocol;
//! after that decision (at most 24 bytes in) it only passes bytes through.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// RFC 9113 §3.4.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a connection may speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    Http1,
    Http2,
    /// Either: hyper-util's sniffing decides (a cleartext port with both).
    Either,
}

impl Expect {
    /// From what a hyper-util builder was configured for.
    pub fn of<E>(builder: &hyper_util::server::conn::auto::Builder<E>) -> Self {
        match (builder.is_http1_available(), builder.is_http2_available()) {
            (true, false) => Expect::Http1,
            (false, true) => Expect::Http2,
            _ => Expect::Either,
        }
    }
}

/// A connection whose first bytes must be (`Http2`) or must not be (`Http1`) the HTTP/2 preface.
pub struct PrefaceGuard<T> {
    inner: T,
    expect: Expect,
    /// Preface bytes matched so far; `None` once decided (bytes then pass untouched).
    matched: Option<usize>,
}

impl<T> PrefaceGuard<T> {
    pub fn new(inner: T, expect: Expect) -> Self {
        let matched = (expect != Expect::Either).then_some(0);
        Self {
            inner,
            expect,
            matched,
        }
    }

    /// Look at `new` bytes just read: `Err` when they show the wrong protocol.
    fn check(&mut self, new: &[u8]) -> std::io::Result<()> {
        let Some(matched) = self.matched else {
            return Ok(());
        };
        let take = new.len().min(PREFACE.len() - matched);
        let is_preface_so_far = new[..take] == PREFACE[matched..matched + take];
        let wrong = |what: &str| Err(std::io::Error::new(std::io::ErrorKind::InvalidData, what));
        if !is_preface_so_far {
            self.matched = None;
            return match self.expect {
                Expect::Http2 => wrong("not HTTP/2 on a connection that speaks only HTTP/2"),
                _ => Ok(()),
            };
        }
        if matched + take == PREFACE.len() {
            self.matched = None;
            return match self.expect {
                Expect::Http1 => wrong("HTTP/2 on a connection that speaks only HTTP/1.1"),
                _ => Ok(()),
            };
        }
        self.matched = Some(matched + take);
        Ok(())
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for PrefaceGuard<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled
            && self.matched.is_some()
        {
            let filled = buf.filled();
            if let Err(err) = self.check(&filled[before..]) {
                return Poll::Ready(Err(err));
            }
        }
        polled
    }
}

crate::net::write_through::write_through!(PrefaceGuard, inner);

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `chunks` one read at a time; the index of the first refused chunk, if any.
    fn refused(expect: Expect, chunks: &[&[u8]]) -> Option<usize> {
        let mut guard = PrefaceGuard::new((), expect);
        chunks.iter().position(|c| guard.check(c).is_err())
    }

    #[test]
    fn http1_ports_refuse_the_preface_even_in_pieces() {
        assert_eq!(refused(Expect::Http1, &[b"GET / HTTP/1.1\r\n"]), None);
        assert_eq!(refused(Expect::Http1, &[PREFACE]), Some(0));
        assert_eq!(
            refused(
                Expect::Http1,
                &[b"PRI * ", b"HTTP/2.0\r\n\r\nSM", b"\r\n\r\n"]
            ),
            Some(2)
        );
        // `PRI` as a method with another version is HTTP/1.1's to judge.
        assert_eq!(refused(Expect::Http1, &[b"PRI * HTTP/1.1\r\n"]), None);
    }

    #[test]
    fn http2_ports_refuse_anything_else() {
        assert_eq!(refused(Expect::Http2, &[PREFACE, b"\0\0\x12\x04"]), None);
        assert_eq!(
            refused(Expect::Http2, &[b"PRI", b" * HTTP/2.0\r\n\r\nSM\r\n\r\nxx"]),
            None
        );
        assert_eq!(refused(Expect::Http2, &[b"GET / HTTP/1.1\r\n"]), Some(0));
        assert_eq!(refused(Expect::Http2, &[b"PRI * HT", b"TP/1.1"]), Some(1));
    }

    #[test]
    fn either_decides_nothing() {
        assert_eq!(refused(Expect::Either, &[PREFACE]), None);
        assert_eq!(refused(Expect::Either, &[b"GET /"]), None);
    }
}
