//! PROXY protocol (v1 text, v2 binary) on listeners with `proxy_protocol = true`: a load
//! balancer in front sends one header before anything else on the connection, naming the
//! client it accepted; that address becomes [`Client::remote`](crate::shared::client::Client).
//!
//! The header is read before TLS (it precedes the ClientHello) and before hyper. Reads are
//! plain `read`s, so they may take bytes past the header; [`Prefixed`] hands those back first,
//! so nothing the client sent is lost.
//!
//! Spec: <https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt>

mod parse;

use std::fmt;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};

pub use parse::{Header, Invalid, V1_MAX_LEN, V2_SIGNATURE, parse};

/// Why a connection got no further than its PROXY header.
#[derive(Debug)]
pub enum HeaderError {
    Invalid(Invalid),
    /// The peer closed before a whole header arrived.
    Truncated,
    TimedOut,
    Io(std::io::Error),
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid(invalid) => write!(f, "{invalid}"),
            Self::Truncated => f.write_str("connection closed inside the PROXY header"),
            Self::TimedOut => f.write_str("no complete PROXY header within header_read_timeout"),
            Self::Io(err) => write!(f, "reading the PROXY header: {err}"),
        }
    }
}

/// Reads one PROXY header from `io` within `timeout`. Returns the client address it names
/// (`None`: keep the connection's own) and the stream, with any bytes read past the header
/// still to come.
pub async fn read_header<S>(
    mut io: S,
    timeout: Duration,
) -> Result<(Option<SocketAddr>, Prefixed<S>), HeaderError>
where
    S: AsyncRead + Unpin,
{
    let mut buf = Vec::with_capacity(256);
    let read = async {
        loop {
            if let Some(header) = parse(&buf).map_err(HeaderError::Invalid)? {
                return Ok(header);
            }
            // Most headers arrive in one segment: one read, usually with the request after it.
            if io.read_buf(&mut buf).await.map_err(HeaderError::Io)? == 0 {
                return Err(HeaderError::Truncated);
            }
        }
    };
    let header = tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| HeaderError::TimedOut)??;
    let rest = buf.split_off(header.len);
    Ok((
        header.source,
        Prefixed {
            prefix: rest,
            read: 0,
            inner: io,
        },
    ))
}

/// A stream that first yields `prefix`: bytes already read from `inner` past the header.
#[derive(Debug)]
pub struct Prefixed<S> {
    prefix: Vec<u8>,
    read: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    /// `inner` with nothing read ahead: what listeners without PROXY protocol use.
    pub fn plain(inner: S) -> Self {
        Self {
            prefix: Vec::new(),
            read: 0,
            inner,
        }
    }

    /// The socket itself (for writes that bypass the wrapper: `crate::net::sendfile`).
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Put `bytes` back in front of what is left to read: bytes a caller read ahead to decide
    /// something (the h2c preface) and that the protocol must still see.
    pub fn unread(&mut self, mut bytes: Vec<u8>) {
        if let Some(left) = self.prefix.get(self.read..) {
            bytes.extend_from_slice(left);
        }
        self.prefix = bytes;
        self.read = 0;
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if let Some(left) = this.prefix.get(this.read..).filter(|left| !left.is_empty()) {
            let n = left.len().min(buf.remaining());
            buf.put_slice(&left[..n]);
            this.read += n;
            if this.read == this.prefix.len() {
                // Give the memory back: the connection may live for hours.
                this.prefix = Vec::new();
                this.read = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

crate::net::write_through::write_through!(Prefixed, inner);

#[cfg(test)]
mod tests;
