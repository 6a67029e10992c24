//! `max_conns` of an upstream group: one request per server at once here, one more waits in
//! the queue, the next is refused with 503 (queue full), and a wait past `queue_timeout` is
//! refused with 503 too.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};

use super::wait_for_metric;
use crate::proxy::serve_fn;
use sluice_testkit::{Offer, client, start_toml};

/// An upstream that reports each request on `arrived` and answers once `release` gives it a
/// permit.
async fn gated_upstream() -> (
    std::net::SocketAddr,
    mpsc::UnboundedReceiver<()>,
    Arc<Semaphore>,
) {
    let (arrived_tx, arrived) = mpsc::unbounded_channel();
    let release = Arc::new(Semaphore::new(0));
    let gate = release.clone();
    let (addr, _) = serve_fn(move |_req| {
        let (arrived_tx, gate) = (arrived_tx.clone(), gate.clone());
        async move {
            let _ = arrived_tx.send(());
            gate.acquire().await.unwrap().forget();
            hyper::Response::new(sluice_core::Body::from("done"))
        }
    })
    .await;
    (addr, arrived, release)
}

#[tokio::test]
async fn max_conns_queues_then_refuses_with_503() {
    let (upstream, mut arrived, release) = gated_upstream().await;
    let server = start_toml(&format!(
        "[log]\naccess = \"off\"\n[admin]\naddress = \"127.0.0.1:0\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n[[routes]]\nproxy = {{ upstream = \"app\" }}\n[upstreams.app]\nservers = [\"{upstream}\"]\nmax_conns = 1\nqueue_size = 1\nqueue_timeout = \"10s\"\n"
    ))
    .await;
    let admin = server.running().admin_address().unwrap();
    let http = client(Offer::Http1);
    let get = || {
        let request = http.get(server.url("/")).send();
        tokio::spawn(async move { request.await.unwrap().status().as_u16() })
    };
    // The first takes the only slot (the upstream has it); the second waits in the queue.
    let first = get();
    arrived.recv().await.unwrap();
    let second = get();
    let labels = [("upstream", "app"), ("server", &*upstream.to_string())];
    wait_for_metric(admin, "sluice_upstream_queued", &labels, 1.0).await;
    // The queue is full: the third is refused at once.
    assert_eq!(get().await.unwrap(), 503);
    let full = [labels[0], labels[1], ("reason", "full")];
    wait_for_metric(admin, "sluice_upstream_queue_rejected_total", &full, 1.0).await;
    // The first finishes; the second gets the slot and is served.
    release.add_permits(1);
    assert_eq!(first.await.unwrap(), 200);
    arrived.recv().await.unwrap();
    release.add_permits(1);
    assert_eq!(second.await.unwrap(), 200);
}

#[tokio::test]
async fn a_wait_past_queue_timeout_gets_503() {
    let (upstream, mut arrived, release) = gated_upstream().await;
    let server = start_toml(&format!(
        "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n[[routes]]\nproxy = {{ upstream = \"app\" }}\n[upstreams.app]\nservers = [\"{upstream}\"]\nmax_conns = 1\nqueue_timeout = \"200ms\"\n"
    ))
    .await;
    let http = client(Offer::Http1);
    let busy = {
        let request = http.get(server.url("/")).send();
        tokio::spawn(async move { request.await.unwrap().status().as_u16() })
    };
    arrived.recv().await.unwrap();
    let started = std::time::Instant::now();
    let resp = http.get(server.url("/")).send().await.unwrap();
    assert_eq!(resp.status(), 503);
    assert!(started.elapsed() >= Duration::from_millis(200));
    release.add_permits(1);
    assert_eq!(busy.await.unwrap(), 200);
}
