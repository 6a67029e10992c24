//! [`FileWrites`]: a plain (not TLS) client socket that sends the bytes of cached static files
//! with `sendfile(2)` from the file, instead of copying them from memory.
//!
//! hyper writes a response as vectored writes of its head and its body's `Bytes`. When one of
//! those buffers lies inside a file's bytes registered by the static memory cache
//! (`sluice_core::file_bytes`, which says why that is sound and what may differ), the buffers
//! before it (the head) go with `sendmsg(MSG_MORE)`, so the kernel holds them for the file's
//! bytes, and the file's part with `sendfile`, which hands the page cache's pages to the socket
//! without a copy: what nginx's `sendfile on; tcp_nopush on;` does. Each such write first checks
//! (one `fstat`) that the file is the version that was cached; a changed file's bytes, and any
//! `sendfile` the kernel refuses, are written from memory, the cached version the response's
//! headers describe. A `sendfile` cut short by a file that shrank after that check closes the
//! connection (see `sluice_core::file_bytes`).
//!
//! Only HTTP/1.1 connections look: TLS encrypts in user space, and HTTP/2 (h2c) writes its
//! frames' heads apart from their data, which would make two system calls of each frame.

use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use nix::sys::socket::{MsgFlags, SockaddrStorage, sendmsg};
use sluice_core::file_bytes::{self, InFile};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

use crate::net::proxy_protocol::Prefixed;

/// A cleartext client connection's socket (see the module docs).
#[derive(Debug)]
pub struct FileWrites {
    inner: Prefixed<TcpStream>,
    /// Look for file bytes at all (HTTP/1.1); otherwise every write goes straight through.
    enabled: bool,
}

impl FileWrites {
    pub fn new(inner: Prefixed<TcpStream>, enabled: bool) -> Self {
        Self { inner, enabled }
    }

    /// `op` on the socket once it is writable: waits (`Pending`) while the kernel would block.
    fn poll_send(
        &self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&TcpStream) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        let tcp = self.inner.get_ref();
        loop {
            ready!(tcp.poll_write_ready(cx))?;
            match self.try_send(&mut op) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                sent => return Poll::Ready(sent),
            }
        }
    }

    /// `op` on the socket now, without waiting (`WouldBlock` clears tokio's readiness).
    fn try_send(&self, op: impl FnOnce(&TcpStream) -> io::Result<usize>) -> io::Result<usize> {
        let tcp = self.inner.get_ref();
        tcp.try_io(Interest::WRITABLE, || op(tcp))
    }
}

/// `sendmsg` of `bufs` with `MSG_MORE`.
fn send_more(tcp: &TcpStream, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    sendmsg::<SockaddrStorage>(tcp.as_raw_fd(), bufs, &[], more(), None).map_err(io::Error::from)
}

/// `sendfile` of up to `len` bytes of `at`; `Ok(0)`: the file ends there.
fn send_file(tcp: &TcpStream, at: &InFile, len: usize) -> io::Result<usize> {
    let mut offset = i64::try_from(at.offset).map_err(io::Error::other)?;
    nix::sys::sendfile::sendfile(tcp, &*at.file, Some(&mut offset), len).map_err(io::Error::from)
}

impl AsyncRead for FileWrites {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for FileWrites {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let found = self.enabled.then(|| {
            bufs.iter()
                .enumerate()
                .find_map(|(i, buf)| file_bytes::find(buf).map(|at| (i, at)))
        });
        let Some((index, at)) = found.flatten() else {
            return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        };
        if !at.unchanged() {
            // Changed since it was cached: the cached bytes, which the headers describe.
            return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        }
        let len = bufs[index].len();
        if index > 0 {
            // The head first, held back by the kernel until the file's bytes follow it.
            let head = &bufs[..index];
            let head_len: usize = head.iter().map(|b| b.len()).sum();
            let sent = ready!(self.poll_send(cx, |tcp| send_more(tcp, head)))?;
            if sent < head_len {
                return Poll::Ready(Ok(sent));
            }
            // The file's part only if the socket takes it now: bytes were written already. Any
            // failure here leaves it to the next write, which checks the file again.
            let file_part = self.try_send(|tcp| send_file(tcp, &at, len));
            return Poll::Ready(Ok(sent + file_part.unwrap_or(0)));
        }
        match ready!(self.poll_send(cx, |tcp| send_file(tcp, &at, len))) {
            // The file shrank between the check and the send: its bytes no longer match the
            // response's length, and bytes of it may be on the wire already.
            Ok(0) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "a cached file was cut short while it was being sent",
            ))),
            Ok(sent) => Poll::Ready(Ok(sent)),
            Err(e) => {
                // The file is unchanged, so its cached bytes are the same bytes.
                tracing::debug!("sendfile refused ({e}); writing from memory");
                Pin::new(&mut self.inner).poll_write_vectored(cx, &bufs[index..])
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        // hyper queues the head and the body's buffers unflattened only for vectored writers,
        // and only unflattened does a buffer still point into the file's registered bytes.
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// `MSG_MORE` (Linux): more data follows, so the kernel waits for it before sending a segment.
/// nix names no constant for it.
fn more() -> MsgFlags {
    MsgFlags::from_bits_retain(nix::libc::MSG_MORE)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::VecDeque;
    use std::io::{Seek, SeekFrom, Write};

    use bytes::{Buf, Bytes};
    use futures_util::future::poll_fn;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const LEN: usize = 200 * 1024;

    /// A connected pair on loopback: the writer wrapped as a client connection is.
    async fn pair(enabled: bool) -> (FileWrites, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let connect = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(connect, listener.accept());
        let server = FileWrites::new(Prefixed::plain(accepted.unwrap().0), enabled);
        (server, client.unwrap())
    }

    /// Write `parts` as hyper does: vectored writes of what is left, advanced by what each took.
    async fn send_all(io: &mut FileWrites, parts: Vec<Bytes>) {
        let mut parts: VecDeque<Bytes> = parts.into();
        while !parts.is_empty() {
            let slices: Vec<IoSlice<'_>> = parts.iter().map(|b| IoSlice::new(b)).collect();
            let mut n = poll_fn(|cx| Pin::new(&mut *io).poll_write_vectored(cx, &slices))
                .await
                .unwrap();
            drop(slices);
            assert!(n > 0, "a write took nothing");
            while n > 0 {
                let front = parts.front_mut().unwrap();
                if n >= front.len() {
                    n -= front.len();
                    parts.pop_front();
                } else {
                    front.advance(n);
                    n = 0;
                }
            }
        }
        io.shutdown().await.unwrap();
    }

    /// A file of `LEN` bytes of `fill`, and those bytes read into memory.
    fn file_of(fill: u8) -> (std::fs::File, Bytes) {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&vec![fill; LEN]).unwrap();
        (file, Bytes::from(vec![fill; LEN]))
    }

    /// Overwrite the file's bytes in place with `fill`, same length.
    fn rewrite(file: &mut std::fs::File, fill: u8) {
        file.seek(SeekFrom::Start(0)).unwrap();
        file.write_all(&vec![fill; LEN]).unwrap();
    }

    async fn exchange(parts: Vec<Bytes>, enabled: bool) -> Vec<u8> {
        let (mut server, mut client) = pair(enabled).await;
        let read = async {
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.unwrap();
            got
        };
        let ((), got) = tokio::join!(send_all(&mut server, parts), read);
        got
    }

    /// Register `contents` as the bytes of `file` as the file is now.
    fn register(contents: &Bytes, file: std::fs::File) -> file_bytes::Registration {
        let stamp = file_bytes::Stamp::of(&file.metadata().unwrap());
        file_bytes::register(contents, file, 0, stamp).unwrap()
    }

    fn all(bytes: &[u8], fill: u8) -> bool {
        bytes.iter().all(|&b| b == fill)
    }

    #[tokio::test]
    async fn registered_bytes_are_sent_from_the_file_between_bytes_from_memory() {
        // The memory says `a`, the file (registered as it is) says `b`: only a send from the
        // file puts `b` on the wire.
        let (file, _) = file_of(b'b');
        let contents = Bytes::from(vec![b'a'; LEN]);
        let _registration = register(&contents, file);
        let parts = vec![
            Bytes::from_static(b"HEAD"),
            contents.slice(1000..),
            Bytes::from_static(b"TAIL"),
        ];
        let got = exchange(parts, true).await;
        assert_eq!(&got[..4], b"HEAD");
        assert_eq!(got.len(), 8 + LEN - 1000);
        assert!(all(&got[4..4 + LEN - 1000], b'b'));
        assert_eq!(&got[4 + LEN - 1000..], b"TAIL");
        // Off (an HTTP/2 connection), the same write goes from memory.
        let got = exchange(vec![Bytes::from_static(b"HEAD"), contents.clone()], false).await;
        assert!(all(&got[4..], b'a'));
    }

    #[tokio::test]
    async fn a_file_changed_since_it_was_cached_is_sent_as_cached() {
        let (file, contents) = file_of(b'c');
        let mut writer = file.try_clone().unwrap();
        let _registration = register(&contents, file);
        rewrite(&mut writer, b'x');
        let got = exchange(vec![Bytes::from_static(b"HEAD"), contents.clone()], true).await;
        assert_eq!(got.len(), 4 + LEN);
        assert!(all(&got[4..], b'c'), "edited in place: the cached bytes");
        writer.set_len((LEN / 2) as u64).unwrap();
        let got = exchange(vec![contents.clone()], true).await;
        assert_eq!(got.len(), LEN);
        assert!(all(&got, b'c'), "cut short: the cached bytes");
    }

    #[tokio::test]
    async fn unregistered_bytes_are_written_from_memory() {
        let (file, _) = file_of(b'e');
        let contents = Bytes::from(vec![b'd'; LEN]);
        drop(register(&contents, file));
        let got = exchange(vec![Bytes::from_static(b"HEAD"), contents.clone()], true).await;
        assert_eq!(got.len(), 4 + LEN);
        assert!(all(&got[4..], b'd'));
    }
}
