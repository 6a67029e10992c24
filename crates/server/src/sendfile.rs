//! [`FileWrites`]: a plain (not TLS) client socket that sends the bytes of cached static files
//! with `sendfile(2)` from the file, instead of copying them from memory.
//!
//! hyper writes a response as vectored writes of its head and its body's `Bytes`. When one of
//! those buffers lies inside a file's bytes registered by the static memory cache
//! (`sluice_core::file_bytes`, which says why that is sound and what may differ), the buffers
//! before it (the head) go with `sendmsg(MSG_MORE)`, so the kernel holds them for the file's
//! bytes, and the file's part with `sendfile`, which hands the page cache's pages to the socket
//! without a copy: what nginx's `sendfile on; tcp_nopush on;` does. Anything else, and any
//! `sendfile` the kernel refuses or cuts short at the file's end, is written from memory.
//!
//! TLS connections encrypt in user space, and HTTP/2 frames its data into its own buffer: their
//! writes never find a registered buffer, so they are written as before.

use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use nix::sys::socket::{MsgFlags, SockaddrStorage, sendmsg};
use sluice_core::file_bytes::{self, InFile};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

use crate::proxy_protocol::Prefixed;

/// A cleartext client connection's socket (see the module docs).
#[derive(Debug)]
pub struct FileWrites {
    inner: Prefixed<TcpStream>,
}

impl FileWrites {
    pub fn new(inner: Prefixed<TcpStream>) -> Self {
        Self { inner }
    }

    /// `sendmsg` of `bufs` with `MSG_MORE`, without waiting.
    fn try_send_more(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let tcp = self.inner.get_ref();
        tcp.try_io(Interest::WRITABLE, || {
            sendmsg::<SockaddrStorage>(tcp.as_raw_fd(), bufs, &[], more(), None)
                .map_err(io::Error::from)
        })
    }

    /// `sendfile` of up to `len` bytes of `at`, without waiting; `Ok(0)`: the file ends there.
    fn try_send_file(&self, at: &InFile, len: usize) -> io::Result<usize> {
        let tcp = self.inner.get_ref();
        let mut offset = i64::try_from(at.offset).map_err(io::Error::other)?;
        tcp.try_io(Interest::WRITABLE, || {
            nix::sys::sendfile::sendfile(tcp, &*at.file, Some(&mut offset), len)
                .map_err(io::Error::from)
        })
    }
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
        let found = bufs
            .iter()
            .enumerate()
            .find_map(|(i, buf)| file_bytes::find(buf).map(|at| (i, at)));
        let Some((index, at)) = found else {
            return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        };
        let len = bufs[index].len();
        if index > 0 {
            // The head first, held back by the kernel until the file's bytes follow it.
            let head = &bufs[..index];
            let head_len: usize = head.iter().map(|b| b.len()).sum();
            let sent = loop {
                ready!(self.inner.get_ref().poll_write_ready(cx))?;
                match self.try_send_more(head) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    sent => break sent?,
                }
            };
            if sent < head_len {
                return Poll::Ready(Ok(sent));
            }
            // The file's part only if the socket takes it now: bytes were written already.
            return Poll::Ready(Ok(sent + self.try_send_file(&at, len).unwrap_or(0)));
        }
        loop {
            ready!(self.inner.get_ref().poll_write_ready(cx))?;
            match self.try_send_file(&at, len) {
                Ok(0) => break,
                Ok(sent) => return Poll::Ready(Ok(sent)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => {
                    tracing::debug!("sendfile refused ({e}); writing from memory");
                    break;
                }
            }
        }
        // The file ends early (it shrank) or the kernel refused: the bytes are in memory too.
        Pin::new(&mut self.inner).poll_write_vectored(cx, &bufs[index..])
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
    async fn pair() -> (FileWrites, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let connect = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(connect, listener.accept());
        let server = FileWrites::new(Prefixed::plain(accepted.unwrap().0));
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

    async fn exchange(parts: Vec<Bytes>) -> Vec<u8> {
        let (mut server, mut client) = pair().await;
        let read = async {
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.unwrap();
            got
        };
        let ((), got) = tokio::join!(send_all(&mut server, parts), read);
        got
    }

    #[tokio::test]
    async fn registered_bytes_are_sent_from_the_file_between_bytes_from_memory() {
        let (file, contents) = file_of(b'a');
        let mut writer = file.try_clone().unwrap();
        let _registration = file_bytes::register(&contents, file, 0).unwrap();
        // Edited in place after it was cached: bytes that could only have come from the file.
        rewrite(&mut writer, b'b');
        let parts = vec![
            Bytes::from_static(b"HEAD"),
            contents.slice(1000..),
            Bytes::from_static(b"TAIL"),
        ];
        let got = exchange(parts).await;
        assert_eq!(&got[..4], b"HEAD");
        assert_eq!(got.len(), 8 + LEN - 1000);
        assert!(got[4..4 + LEN - 1000].iter().all(|&b| b == b'b'));
        assert_eq!(&got[4 + LEN - 1000..], b"TAIL");
    }

    #[tokio::test]
    async fn a_file_cut_short_is_completed_from_memory() {
        let (file, contents) = file_of(b'c');
        let writer = file.try_clone().unwrap();
        let _registration = file_bytes::register(&contents, file, 0).unwrap();
        writer.set_len((LEN / 2) as u64).unwrap();
        let got = exchange(vec![Bytes::from_static(b"HEAD"), contents.clone()]).await;
        assert_eq!(got.len(), 4 + LEN);
        assert!(got[4..].iter().all(|&b| b == b'c'));
    }

    #[tokio::test]
    async fn unregistered_bytes_are_written_from_memory() {
        let (file, contents) = file_of(b'd');
        let mut writer = file.try_clone().unwrap();
        let registration = file_bytes::register(&contents, file, 0).unwrap();
        drop(registration);
        rewrite(&mut writer, b'e');
        let got = exchange(vec![Bytes::from_static(b"HEAD"), contents.clone()]).await;
        assert_eq!(got.len(), 4 + LEN);
        assert!(
            got[4..].iter().all(|&b| b == b'd'),
            "the cached bytes, not the file's"
        );
    }
}
