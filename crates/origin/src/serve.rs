//! Serving connections: accept on a TCP or unix listener, speak HTTP/1.1 and h2c on each, drain on
//! shutdown.
//!
//! hyper-util's `auto` builder sniffs the first bytes of a connection: the HTTP/2 preface means h2c
//! with prior knowledge, anything else HTTP/1.1 with keep-alive, so one socket serves both and a
//! proxy can use either to reach the origin. On shutdown the listener is dropped first (new
//! connections are refused), then every open connection is told to finish: idle HTTP/1.1
//! connections close, busy ones close after their current response, HTTP/2 sends GOAWAY and lets
//! open streams complete.

use std::convert::Infallible;
use std::io;
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use crate::Origin;

/// How long to pause accepting after an accept error such as "too many open files", so the loop
/// does not spin while the process is out of descriptors.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// What the accept loop needs from a listener: TCP and unix sockets differ only in the stream type
/// and in TCP's `TCP_NODELAY`.
trait Listener {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<Self::Io>>;
}

impl Listener for TcpListener {
    type Io = TcpStream;

    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<TcpStream>> {
        TcpListener::poll_accept(self, cx).map_ok(|(stream, _peer)| {
            // Responses are written whole or per stream element; Nagle would only delay the tail.
            if let Err(err) = stream.set_nodelay(true) {
                tracing::debug!(error = %err, "could not set TCP_NODELAY");
            }
            stream
        })
    }
}

impl Listener for UnixListener {
    type Io = UnixStream;

    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<UnixStream>> {
        UnixListener::poll_accept(self, cx).map_ok(|(stream, _peer)| stream)
    }
}

impl Origin {
    /// Serve connections from a TCP listener until `shutdown` resolves, then stop accepting and wait
    /// for open connections to finish (see the module docs).
    pub async fn serve_tcp(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> io::Result<()> {
        self.serve(listener, shutdown).await
    }

    /// Serve connections from a unix-domain listener; otherwise like [`Origin::serve_tcp`].
    pub async fn serve_unix(
        self,
        listener: UnixListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> io::Result<()> {
        self.serve(listener, shutdown).await
    }

    async fn serve<L: Listener>(
        self,
        listener: L,
        shutdown: impl Future<Output = ()> + Send,
    ) -> io::Result<()> {
        let builder = Builder::new(TokioExecutor::new());
        let graceful = GracefulShutdown::new();
        let mut shutdown = pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                accepted = std::future::poll_fn(|cx| listener.poll_accept(cx)) => accepted,
            };
            match accepted {
                Ok(io) => self.spawn_connection(&builder, &graceful, io),
                Err(err) => {
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            }
        }
        drop(listener);
        graceful.shutdown().await;
        Ok(())
    }

    fn spawn_connection<I>(
        &self,
        builder: &Builder<TokioExecutor>,
        graceful: &GracefulShutdown,
        io: I,
    ) where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let origin = self.clone();
        let service = service_fn(move |req: hyper::Request<Incoming>| {
            let origin = origin.clone();
            async move { Ok::<_, Infallible>(origin.handle(req).await) }
        });
        let conn = builder
            .serve_connection(TokioIo::new(io), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            // Clients resetting connections is routine for an origin under load tests.
            if let Err(err) = conn.await {
                tracing::debug!(error = %err, "connection ended with an error");
            }
        });
    }
}
