//! The worker threads: one single-threaded tokio runtime per worker, and the accepted
//! connections spread over them.
//!
//! # Why not tokio's multi-threaded runtime
//! With 1,000 busy keep-alive connections on one core, tokio's work-stealing scheduler served
//! some connections ten times longer than others (`h2load --h1 -c 1000` on a 74 KB file, server
//! on one core: request latency SD 96–111 ms and max 550–580 ms, against nginx's 19–20 ms and
//! 235 ms in the same runs). A worker's local run queue holds 256 tasks; when a poll of the I/O
//! driver wakes more connections than that, the rest go to the shared inject queue, which the
//! worker looks at only every 61st task, so those connections wait rounds behind the others
//! while the ones in the local queue are served again and again. A current-thread runtime has
//! one unbounded FIFO queue: every woken connection gets its turn in order. Same load, same
//! runs: SD 26–30 ms, max 300 ms, req/s unchanged or better (docs/performance.md, "Fairness").
//!
//! This is nginx's model (and HAProxy's threads, Envoy's workers): each worker owns the
//! connections it was given, from accept to close, on one thread, with no stealing. The
//! accept loops run on the first worker (the thread that started the server); each accepted
//! socket goes to the worker with the fewest open connections, which registers it with its
//! own I/O driver (`into_std` / `from_std`: two `epoll_ctl` calls per connection, nothing per
//! request). With one worker (the default on one core, and the bench's set-up) nothing moves.
//!
//! What crosses workers: shared state (routes, caches, metrics, upstream pools) is `Send + Sync`
//! already. A pooled upstream connection is driven by the worker that opened it; a request on
//! another worker that reuses it talks to it through hyper's channels.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::TcpStream;
use tokio::runtime::{Builder, Handle, Runtime};
use tokio::sync::oneshot;

/// Where accepted connections run. Cheap to clone; [`Workers::here`] (the default) runs
/// everything on the calling runtime, as tests and embedders expect.
#[derive(Clone, Default)]
pub struct Workers {
    /// The workers besides the accepting one, with their open-connection counts; empty: one
    /// worker.
    others: Arc<[Remote]>,
    /// Open connections of the accepting worker.
    here: Arc<AtomicUsize>,
}

struct Remote {
    handle: Handle,
    open: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("count", &(self.others.len() + 1))
            .finish()
    }
}

impl Workers {
    /// One worker: the runtime the accept loop runs on.
    pub fn here() -> Self {
        Self::default()
    }

    /// How many workers serve connections.
    pub fn count(&self) -> usize {
        self.others.len() + 1
    }

    /// How many threads run connections: the other workers' plus the calling runtime's own
    /// (one for a worker's current-thread runtime; all of a work-stealing runtime's workers
    /// when everything runs [`here`](Self::here) on one, as in tests and embedders).
    pub fn threads(&self) -> usize {
        let here = tokio::runtime::Handle::try_current()
            .map(|runtime| runtime.metrics().num_workers())
            .unwrap_or(1);
        self.others.len() + here.max(1)
    }

    /// Run `serve(stream)` to completion on the worker with the fewest open connections (ties:
    /// the accepting one, which needs no hand-over).
    pub fn spawn<F, Fut>(&self, stream: TcpStream, serve: F)
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let least = self
            .others
            .iter()
            .min_by_key(|remote| remote.open.load(Ordering::Relaxed))
            .filter(|remote| {
                remote.open.load(Ordering::Relaxed) < self.here.load(Ordering::Relaxed)
            });
        let Some(remote) = least else {
            let open = Open::count(&self.here);
            tokio::spawn(async move {
                serve(stream).await;
                drop(open);
            });
            return;
        };
        // Leaves this runtime's I/O driver; the chosen worker registers it with its own.
        let std = match stream.into_std() {
            Ok(std) => std,
            Err(err) => return tracing::debug!("handing a connection to a worker: {err}"),
        };
        let open = Open::count(&remote.open);
        remote.handle.spawn(async move {
            match TcpStream::from_std(std) {
                Ok(stream) => serve(stream).await,
                Err(err) => tracing::debug!("taking over a connection: {err}"),
            }
            drop(open);
        });
    }
}

/// One open connection in a worker's count, for as long as it is held.
struct Open(Arc<AtomicUsize>);

impl Open {
    fn count(counter: &Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(counter))
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The runtimes of a serving process: the first worker's (the caller blocks on it) and the
/// threads of the others, stopped when this is dropped.
pub struct Runtimes {
    pub main: Runtime,
    pub workers: Workers,
    /// Dropping a sender ends its thread's runtime.
    threads: Vec<(oneshot::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Runtimes {
    /// `count` workers (`None`: one per CPU this process may run on).
    pub fn start(count: Option<usize>) -> std::io::Result<Self> {
        let count = count
            .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
            .unwrap_or(1)
            .max(1);
        let main = single_threaded()?;
        let mut others = Vec::with_capacity(count - 1);
        let mut threads = Vec::with_capacity(count - 1);
        for index in 1..count {
            let runtime = single_threaded()?;
            let handle = runtime.handle().clone();
            let (stop, stopped) = oneshot::channel::<()>();
            let thread = std::thread::Builder::new()
                .name(format!("sluice-worker-{index}"))
                .spawn(move || {
                    // Parked in the driver until stopped; the connections run meanwhile.
                    let _ = runtime.block_on(stopped);
                })?;
            others.push(Remote {
                handle,
                open: Arc::new(AtomicUsize::new(0)),
            });
            threads.push((stop, thread));
        }
        Ok(Self {
            main,
            workers: Workers {
                others: others.into(),
                here: Arc::new(AtomicUsize::new(0)),
            },
            threads,
        })
    }
}

impl Drop for Runtimes {
    fn drop(&mut self) {
        for (stop, thread) in self.threads.drain(..) {
            drop(stop);
            let _ = thread.join();
        }
    }
}

fn single_threaded() -> std::io::Result<Runtime> {
    Builder::new_current_thread().enable_all().build()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Connections go to the least loaded worker, each runs on its worker's thread, and every
    /// one is served.
    #[test]
    fn connections_are_spread_over_the_workers_and_served() {
        let runtimes = Runtimes::start(Some(3)).unwrap();
        let workers = runtimes.workers.clone();
        assert_eq!(workers.count(), 3);
        let threads = runtimes.main.block_on(async move {
            // Two worker threads and the accepting current-thread runtime: `max_cpu`'s 100%.
            assert_eq!(workers.threads(), 3);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let (seen, mut names) = tokio::sync::mpsc::unbounded_channel();
            let (release, _) = tokio::sync::broadcast::channel::<()>(1);
            let mut clients = Vec::new();
            for _ in 0..6 {
                clients.push(tokio::spawn(async move {
                    let mut c = TcpStream::connect(address).await.unwrap();
                    let mut byte = [0u8; 1];
                    c.read_exact(&mut byte).await.unwrap();
                    c.write_all(&byte).await.unwrap();
                    byte[0]
                }));
                let (stream, _) = listener.accept().await.unwrap();
                let seen = seen.clone();
                let mut released = release.subscribe();
                workers.spawn(stream, move |mut stream| async move {
                    let name = std::thread::current().name().unwrap_or("main").to_owned();
                    seen.send(name).unwrap();
                    // Held open until all six are placed, so the counts are what they spread by.
                    let _ = released.recv().await;
                    stream.write_all(b"x").await.unwrap();
                    let mut echo = [0u8; 1];
                    stream.read_exact(&mut echo).await.unwrap();
                });
            }
            let mut threads = Vec::new();
            for _ in 0..6 {
                threads.push(names.recv().await.unwrap());
            }
            release.send(()).unwrap();
            for client in clients {
                assert_eq!(client.await.unwrap(), b'x');
            }
            threads
        });
        for name in ["sluice-worker-1", "sluice-worker-2"] {
            assert_eq!(
                threads.iter().filter(|t| *t == name).count(),
                2,
                "{threads:?}"
            );
        }
        assert_eq!(
            threads
                .iter()
                .filter(|t| !t.starts_with("sluice-worker"))
                .count(),
            2,
            "{threads:?}"
        );
    }
}
