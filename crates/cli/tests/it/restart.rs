//! An app behind `sluice reverse-proxy --to` killed and restarted under load (issue 21, point
//! 3): the only server of the group is never taken out by its failures, so requests after the
//! app is back succeed at once, each with one connection attempt, instead of 10 s of
//! `502 no server available` (`fail_timeout`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sluice_testkit::{Offer, client};

use crate::cli::spawn_listening;

/// An address nothing listens on (yet).
fn free_address() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `sluice origin --listen addr` as the app, until it is killed.
fn app(addr: SocketAddr) -> std::process::Child {
    let (child, listening) = spawn_listening(&["origin", "--listen", &addr.to_string()]);
    assert_eq!(listening, addr);
    child
}

#[tokio::test]
async fn an_app_restarted_behind_reverse_proxy_is_served_as_soon_as_it_is_back() {
    let addr = free_address();
    let mut origin = app(addr);
    let (mut proxy, listen) = spawn_listening(&[
        "reverse-proxy",
        "--listen",
        "127.0.0.1:0",
        "--to",
        &addr.to_string(),
    ]);
    // Load: 4 clients in a loop, each request noted with when it started and its status.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(std::sync::Mutex::new(Vec::<(Instant, u16)>::new()));
    let ok = Arc::new(tokio::sync::Notify::new());
    let failed = Arc::new(tokio::sync::Notify::new());
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (stop, done, ok, failed) = (stop.clone(), done.clone(), ok.clone(), failed.clone());
            let http = client(Offer::Http1);
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let started = Instant::now();
                    let status = match http.get(format!("http://{listen}/hello")).send().await {
                        Ok(resp) => resp.status().as_u16(),
                        Err(_) => 0,
                    };
                    done.lock().unwrap().push((started, status));
                    if status == 200 {
                        ok.notify_one()
                    } else {
                        failed.notify_one()
                    }
                }
            })
        })
        .collect();
    let wait = |what: &'static str, notify: Arc<tokio::sync::Notify>| async move {
        tokio::time::timeout(Duration::from_secs(20), notify.notified())
            .await
            .unwrap_or_else(|_| panic!("no {what} in 20 s"));
    };
    wait("success before the kill", ok.clone()).await;
    // SIGKILL: the app dies without closing anything itself.
    origin.kill().unwrap();
    origin.wait().unwrap();
    wait("failure while the app is down", failed.clone()).await;
    let mut origin = app(addr);
    let back = Instant::now();
    // Enough requests after it is back to see an outage if there were one.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let after = done
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| *t >= back)
            .count();
        if after >= 100 {
            break;
        }
        assert!(Instant::now() < deadline, "only {after} requests in 20 s");
        wait("request after the restart", ok.clone()).await;
    }
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.await.unwrap();
    }
    let done = done.lock().unwrap().clone();
    let after: Vec<_> = done.iter().filter(|(t, _)| *t >= back).collect();
    let failures: Vec<_> = after.iter().filter(|(_, s)| *s != 200).collect();
    let down = done.iter().filter(|(_, s)| *s != 200).count();
    eprintln!(
        "{} requests, {down} failed while the app was down; {} after it was back, {} failed",
        done.len(),
        after.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "failed after the app was back: {failures:?}"
    );
    origin.kill().unwrap();
    origin.wait().unwrap();
    proxy.kill().unwrap();
    proxy.wait().unwrap();
}
