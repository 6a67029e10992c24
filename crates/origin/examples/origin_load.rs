//! A quick throughput check of the origin, for when `sluice bench` is not at hand.
//!
//! ```text
//! cargo run --release -p sluice-origin --example origin_load -- serve 127.0.0.1:8081 [THREADS]
//! cargo run --release -p sluice-origin --example origin_load -- load 127.0.0.1:8081 PATH CONNS SECS [h2]
//! ```
//! Pin each side to its own core with `taskset -c` for numbers that mean something. `load` sends
//! GETs back to back on CONNS keep-alive connections (or h2c streams) and prints req/s and MB/s of
//! body received.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use sluice_core::{Body, BoxError};
use sluice_origin::{Origin, OriginOptions};

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| {
        args.get(i)
            .map(String::as_str)
            .ok_or("missing argument (see the docs)")
    };
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = args
        .get(2)
        .filter(|_| args.first().is_some_and(|m| m == "serve"))
    {
        runtime.worker_threads(threads.parse()?);
    }
    let runtime = runtime.enable_all().build()?;
    match arg(0)? {
        "serve" => runtime.block_on(serve(arg(1)?.to_owned())),
        "load" => runtime.block_on(load(
            arg(1)?.to_owned(),
            arg(2)?.to_owned(),
            arg(3)?.parse()?,
            Duration::from_secs(arg(4)?.parse()?),
            args.get(5).is_some_and(|v| v == "h2"),
        )),
        _ => Err("the first argument is `serve` or `load`".into()),
    }
}

async fn serve(addr: String) -> Result<(), BoxError> {
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("origin on http://{}", listener.local_addr()?);
    let origin = Origin::new(OriginOptions {
        name: Some("load".into()),
    });
    origin
        .serve_tcp(listener, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

async fn load(
    addr: String,
    path: String,
    conns: usize,
    time: Duration,
    h2: bool,
) -> Result<(), BoxError> {
    let requests = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + time;
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let stream = tokio::net::TcpStream::connect(&addr).await?;
        stream.set_nodelay(true)?;
        let io = TokioIo::new(stream);
        let uri: http::Uri = format!("http://{addr}{path}").parse()?;
        let (requests, bytes) = (requests.clone(), bytes.clone());
        tasks.push(tokio::spawn(async move {
            if h2 {
                let (mut send, conn) =
                    hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
                tokio::spawn(conn);
                while Instant::now() < deadline {
                    let req = http::Request::get(uri.clone()).body(Body::Empty)?;
                    let n = send.send_request(req).await?.into_body().collect().await?;
                    bytes.fetch_add(n.to_bytes().len() as u64, Ordering::Relaxed);
                    requests.fetch_add(1, Ordering::Relaxed);
                }
            } else {
                let (mut send, conn) = hyper::client::conn::http1::handshake(io).await?;
                tokio::spawn(conn);
                while Instant::now() < deadline {
                    let req = http::Request::get(uri.path_and_query().map_or("/", |p| p.as_str()))
                        .header(http::header::HOST, "origin")
                        .body(Body::Empty)?;
                    let n = send.send_request(req).await?.into_body().collect().await?;
                    bytes.fetch_add(n.to_bytes().len() as u64, Ordering::Relaxed);
                    requests.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok::<_, BoxError>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let secs = start.elapsed().as_secs_f64();
    let (requests, bytes) = (
        requests.load(Ordering::Relaxed),
        bytes.load(Ordering::Relaxed),
    );
    println!(
        "{path}: {:.0} req/s, {:.1} MB/s body, {requests} requests in {secs:.1} s",
        requests as f64 / secs,
        bytes as f64 / secs / 1e6
    );
    Ok(())
}
