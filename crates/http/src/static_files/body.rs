//! File bodies: a byte range of an opened file as a [`Body`].
//!
//! Up to [`SMALL_BODY`] bytes are read at once into one `Bytes` ([`Body::full`]): one trip to the
//! blocking pool, one frame, an exact size for hyper. Anything larger is streamed from a
//! `tokio::fs::File` in frames of at most [`FRAME_SIZE`] bytes, reading only the requested range
//! (seek, then `take`), so memory per response stays one frame whatever the file size.
//!
//! A file that shrinks while it is being sent ends the stream with an error instead of short
//! data: the `Content-Length` already promised the full length, and a connection reset is the
//! honest way to tell the client its copy is incomplete.

use std::io::{self, Read, Seek, SeekFrom};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use futures_util::stream::{self, StreamExt};
use http_body::{Frame, SizeHint};
use sluice_core::{Body, Error, ErrorKind};
use tokio::io::{AsyncReadExt, Take};

/// Bodies up to this size are read whole into memory.
pub(crate) const SMALL_BODY: u64 = 256 * 1024;
/// The largest frame a streamed file body yields.
pub(crate) const FRAME_SIZE: usize = 64 * 1024;

/// The body for bytes `start..start + len` of `file`.
pub(crate) async fn file_body(file: std::fs::File, start: u64, len: u64) -> Result<Body, Error> {
    if len == 0 {
        return Ok(Body::Empty);
    }
    // Seek (and for small bodies, read) in one trip to the blocking pool.
    let opened = tokio::task::spawn_blocking(move || -> io::Result<Opened> {
        let mut file = file;
        file.seek(SeekFrom::Start(start))?;
        if len > SMALL_BODY {
            return Ok(Opened::Large(file));
        }
        let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        file.take(len).read_to_end(&mut buf)?;
        Ok(Opened::Small(buf))
    })
    .await
    .map_err(|e| Error::internal(ErrorKind::Io, "file read task failed").with_source(e))?
    .map_err(|e| Error::internal(ErrorKind::Io, "cannot read file").with_source(e))?;

    match opened {
        Opened::Small(buf) if buf.len() as u64 == len => Ok(Body::full(buf)),
        Opened::Small(_) => Err(Error::internal(
            ErrorKind::Io,
            "file shrank while being read",
        )),
        Opened::Large(file) => Ok(Body::stream(FileBody::new(file, len))),
    }
}

enum Opened {
    Small(Vec<u8>),
    Large(std::fs::File),
}

/// A streamed file range with an exact size hint (so hyper and later layers know the length
/// without trusting headers).
struct FileBody {
    chunks: Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>>,
    remaining: u64,
}

impl FileBody {
    /// `file` must already be positioned at the first byte to send.
    fn new(file: std::fs::File, len: u64) -> Self {
        let reader = tokio::fs::File::from_std(file).take(len);
        Self {
            chunks: Box::pin(chunks(reader, len)),
            remaining: len,
        }
    }
}

/// Frames of at most [`FRAME_SIZE`] bytes until `len` bytes have been read; an error (or an
/// early end of file) is the last item.
fn chunks(reader: Take<tokio::fs::File>, len: u64) -> impl Stream<Item = io::Result<Bytes>> + Send {
    stream::unfold((Some(reader), len), |(reader, remaining)| async move {
        let mut reader = reader?;
        if remaining == 0 {
            return None;
        }
        let frame = usize::try_from(remaining).map_or(FRAME_SIZE, |r| r.min(FRAME_SIZE));
        let mut buf = BytesMut::with_capacity(frame);
        match reader.read_buf(&mut buf).await {
            Ok(0) => {
                let err = io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank while sent");
                Some((Err(err), (None, 0)))
            }
            Ok(n) => Some((
                Ok(buf.freeze()),
                (Some(reader), remaining.saturating_sub(n as u64)),
            )),
            Err(err) => Some((Err(err), (None, 0))),
        }
    })
    .fuse()
}

impl http_body::Body for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match ready!(self.chunks.as_mut().poll_next(cx)) {
            Some(Ok(bytes)) => {
                self.remaining = self.remaining.saturating_sub(bytes.len() as u64);
                Poll::Ready(Some(Ok(Frame::data(bytes))))
            }
            Some(Err(err)) => Poll::Ready(Some(Err(err))),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::io::Write;

    fn file_with(content: &[u8]) -> io::Result<std::fs::File> {
        let mut file = tempfile::tempfile()?;
        file.write_all(content)?;
        Ok(file)
    }

    async fn frames(body: Body) -> Result<Vec<Bytes>, sluice_core::BoxError> {
        let mut body = body;
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                out.push(data);
            }
        }
        Ok(out)
    }

    #[tokio::test]
    async fn small_ranges_are_one_buffer() -> Result<(), sluice_core::BoxError> {
        let body = file_body(file_with(b"0123456789")?, 2, 5).await?;
        assert!(matches!(body, Body::Full(_)));
        assert_eq!(frames(body).await?, vec![Bytes::from_static(b"23456")]);
        assert!(matches!(
            file_body(file_with(b"abc")?, 0, 0).await?,
            Body::Empty
        ));
        Ok(())
    }

    #[tokio::test]
    async fn large_ranges_stream_in_bounded_frames() -> Result<(), sluice_core::BoxError> {
        let content: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        let (start, len) = (1_000u64, 400_000u64);
        let body = file_body(file_with(&content)?, start, len).await?;
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(len));
        let frames = frames(body).await?;
        assert!(frames.len() >= 4, "{} frames", frames.len());
        assert!(frames.iter().all(|f| f.len() <= FRAME_SIZE));
        let joined: Vec<u8> = frames.concat();
        assert_eq!(joined, content[1_000..401_000]);
        Ok(())
    }

    #[tokio::test]
    async fn a_file_shorter_than_promised_is_an_error() -> Result<(), sluice_core::BoxError> {
        let small = file_body(file_with(b"abc")?, 0, 10).await;
        assert_eq!(small.map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::Io));

        let content = vec![7u8; 300_000];
        let body = file_body(file_with(&content)?, 0, 400_000).await?;
        assert!(frames(body).await.is_err());
        Ok(())
    }
}
