//! `AsyncWrite` for the socket wrappers that only look at what is read (the PROXY header's
//! `Prefixed`, the header timer's `ClientIo`, the port's `PrefaceGuard`): every write goes
//! straight to the wrapped socket. One macro, so the three need not each spell out the same
//! five forwarding methods.

/// `write_through!(Wrapper, field)`: `impl AsyncWrite for Wrapper<T>` forwarding each method
/// to `self.field`.
macro_rules! write_through {
    ($wrapper:ident, $field:ident) => {
        impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for $wrapper<T> {
            fn poll_write(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                tokio::io::AsyncWrite::poll_write(std::pin::Pin::new(&mut self.$field), cx, buf)
            }

            fn poll_write_vectored(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                tokio::io::AsyncWrite::poll_write_vectored(
                    std::pin::Pin::new(&mut self.$field),
                    cx,
                    bufs,
                )
            }

            fn is_write_vectored(&self) -> bool {
                tokio::io::AsyncWrite::is_write_vectored(&self.$field)
            }

            fn poll_flush(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                tokio::io::AsyncWrite::poll_flush(std::pin::Pin::new(&mut self.$field), cx)
            }

            fn poll_shutdown(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                tokio::io::AsyncWrite::poll_shutdown(std::pin::Pin::new(&mut self.$field), cx)
            }
        }
    };
}

pub(crate) use write_through;
