//! An upstream that records what request bodies reached it, and a raw client that posts a
//! chunked body it may not finish: for tests of what a proxy lets through (bombs, corrupt
//! codings) and the process tests of the binary.

/// What the upstream saw of the request bodies on one connection, sent when it closes.
#[derive(Debug, Default, Clone, Copy)]
pub struct Seen {
    /// Requests that arrived.
    pub requests: usize,
    /// Of them, bodies read to their end without error.
    pub complete: usize,
}

/// A hand-rolled upstream that reads every request body to its end and reports, per
/// connection once it closes, how many requests arrived and how many bodies ended cleanly.
pub async fn recording_upstream() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    tokio::sync::mpsc::UnboundedReceiver<Seen>,
) {
    use http_body_util::BodyExt;
    use std::sync::{Arc, Mutex};
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let (tx, seen) = (tx.clone(), Arc::new(Mutex::new(Seen::default())));
            tokio::spawn(async move {
                let record = seen.clone();
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let record = record.clone();
                        async move {
                            record.lock().unwrap().requests += 1;
                            let body = req.into_body().collect().await;
                            if body.is_ok() {
                                record.lock().unwrap().complete += 1;
                            }
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(
                                sluice_core::Body::from("ok"),
                            ))
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
                let _ = tx.send(*seen.lock().unwrap());
            });
        }
    });
    (addr, accepted, rx)
}

/// POST a chunked body from `chunks` on a raw connection and return the response's status.
/// The body is written by its own task and write errors are ignored: sluice answers 413/400
/// before the body ends and closes the connection, which a client library would report as a
/// broken pipe instead of the answer.
pub async fn raw_post(
    addr: std::net::SocketAddr,
    path: &str,
    coding: &str,
    chunks: impl Iterator<Item = bytes::Bytes> + Send + 'static,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: bomb.test\r\nContent-Encoding: {coding}\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    let writer = tokio::spawn(async move {
        write.write_all(head.as_bytes()).await?;
        for chunk in chunks {
            write
                .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .await?;
            write.write_all(&chunk).await?;
            write.write_all(b"\r\n").await?;
        }
        write.write_all(b"0\r\n\r\n").await?;
        Ok::<_, std::io::Error>(write)
    });
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    let read_head = async {
        while !reply.windows(4).any(|w| w == b"\r\n\r\n") {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => reply.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), read_head)
        .await
        .expect("no answer to the bomb");
    writer.abort();
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let status = reply
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a response: {reply:?}"));
    (status, reply)
}

/// Wait until every upstream connection has closed and add up what they saw.
pub async fn upstream_totals(
    accepted: &std::sync::atomic::AtomicUsize,
    reports: &mut tokio::sync::mpsc::UnboundedReceiver<Seen>,
) -> Seen {
    let mut total = Seen::default();
    let mut closed = 0;
    while closed < accepted.load(std::sync::atomic::Ordering::SeqCst) {
        let seen = tokio::time::timeout(std::time::Duration::from_secs(20), reports.recv())
            .await
            .expect("an upstream connection stayed open")
            .unwrap();
        total.requests += seen.requests;
        total.complete += seen.complete;
        closed += 1;
    }
    total
}
