//! Hostile HTTP/3 clients: a flood of Initial packets from many source ports (address
//! validation with Retry, memory bounded), and a client opening more streams than allowed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sluice_testkit::http3::H3Client;

/// Initial packets in the flood, each from its own UDP socket (source port).
const FLOOD: usize = 1500;
/// sluice's threshold (`net::h3::RETRY_ABOVE`): handshakes in flight before Retry starts.
const RETRY_ABOVE: usize = 64;

/// `VmRSS` of this process (the server runs in it), in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn an_initial_flood_gets_retry_with_memory_bounded_and_clients_still_connect() {
    let server = sluice_testkit::start_toml(
        r#"
        [log]
        access = "off"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        name = "site"
        address = "127.0.0.1:0"
        tls = "self-signed"
        protocols = ["http/1.1", "h2", "h3"]
        # The flood's first handshakes stay in flight for the whole test.
        tls_handshake_timeout = "60s"
        [[routes]]
        respond = { body = "still here" }
        "#,
    )
    .await;
    let addr = server.addr("site");
    let crypto =
        quinn::crypto::rustls::QuicClientConfig::try_from(sluice_testkit::http3::client_tls())
            .unwrap();
    let client_config = quinn_proto::ClientConfig::new(Arc::new(crypto));
    let mut machine = quinn_proto::Endpoint::new(
        Arc::new(quinn_proto::EndpointConfig::default()),
        None,
        false,
        None,
    );
    let before = rss_kib();
    let flood = tokio::task::spawn_blocking(move || {
        // Serially, each Initial answered before the next is sent: no loopback buffer
        // overflows, so every count below is exact.
        let mut retries = 0;
        let mut handshakes = 0;
        let mut sockets = Vec::with_capacity(FLOOD);
        for _ in 0..FLOOD {
            let now = Instant::now();
            let (_, mut conn) = machine
                .connect(now, client_config.clone(), addr, "localhost")
                .unwrap();
            let mut packet = Vec::new();
            let transmit = conn.poll_transmit(now, 1, &mut packet).unwrap();
            let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            socket
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            socket.send_to(&packet[..transmit.size], addr).unwrap();
            let mut reply = [0u8; 2048];
            let (n, _) = socket
                .recv_from(&mut reply)
                .expect("no reply to an Initial");
            assert!(n > 0 && reply[0] & 0x80 != 0, "a long-header reply");
            // RFC 9000 §17.2: the long packet type is bits 0x30; 3 is Retry.
            if (reply[0] & 0x30) >> 4 == 3 {
                retries += 1;
            } else {
                handshakes += 1;
            }
            // The socket stays open (the server's replies must not bounce as ICMP errors),
            // the client's state goes: the flooder never answers.
            sockets.push(socket);
        }
        (retries, handshakes, sockets)
    });
    let (retries, handshakes, sockets) = flood.await.unwrap();
    let after = rss_kib();
    assert_eq!(handshakes, RETRY_ABOVE, "handshakes started before Retry");
    assert_eq!(retries, FLOOD - RETRY_ABOVE);
    let text = crate::scrape_metrics(&server).await;
    let counted = crate::metric(&text, "sluice_quic_retries_total{listener=\"site\"}");
    assert_eq!(counted, (FLOOD - RETRY_ABOVE) as f64);

    // A real client, under the flood, proves its address and is served.
    let h3 = H3Client::connect(addr).await;
    assert_eq!(h3.get("/").await.body, b"still here");

    // The flood's cost: 64 half-open connections and nothing per Retry. This process holds
    // the test's clients too, so the bound is loose; the number is printed for the record.
    let grown = after.saturating_sub(before);
    eprintln!("HTTP/3 Initial flood: {FLOOD} Initials, {retries} Retries, RSS grew {grown} KiB");
    assert!(
        grown < 64 * 1024,
        "RSS grew {grown} KiB under {FLOOD} Initials"
    );
    drop(sockets);
}

#[tokio::test]
async fn streams_past_the_limit_wait_while_other_connections_are_served() {
    // Each request to /gate is held until the test opens the gate; each tells the test it
    // arrived.
    let (arrived_tx, mut arrived) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (gate_tx, gate) = tokio::sync::watch::channel(false);
    let (upstream, _) =
        crate::proxy::serve_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let arrived = arrived_tx.clone();
            let mut gate = gate.clone();
            async move {
                if req.uri().path() == "/gate" {
                    let _ = arrived.send(());
                    let _ = gate.wait_for(|open| *open).await;
                }
                hyper::Response::new(sluice_core::Body::from(Bytes::from_static(b"done")))
            }
        })
        .await;
    let server = sluice_testkit::start_toml(&format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        name = "site"
        address = "127.0.0.1:0"
        tls = "self-signed"
        protocols = ["http/1.1", "h2", "h3"]
        max_concurrent_streams = 5
        [[routes]]
        proxy = {{ to = "{upstream}" }}
        "#
    ))
    .await;
    let addr = server.addr("site");
    let greedy = H3Client::connect(addr).await;
    let requests: Vec<_> = (0..12)
        .map(|_| {
            let mut sender = greedy.sender();
            let req = http::Request::get(greedy.url("/gate")).body(()).unwrap();
            tokio::spawn(
                async move { sluice_testkit::http3::send(&mut sender, req, None, None).await },
            )
        })
        .collect();
    for _ in 0..5 {
        tokio::time::timeout(Duration::from_secs(20), arrived.recv())
            .await
            .expect("the first five streams did not arrive")
            .unwrap();
    }
    // Another connection is served meanwhile...
    let other = H3Client::connect(addr).await;
    assert_eq!(other.get("/free").await.body, b"done");
    // ... and the greedy one got no sixth stream: QUIC gives it no credit (RFC 9000 §4.6).
    assert!(
        arrived.try_recv().is_err(),
        "a sixth stream reached the upstream"
    );
    gate_tx.send(true).unwrap();
    for request in requests {
        let resp = tokio::time::timeout(Duration::from_secs(20), request)
            .await
            .expect("a held request never finished")
            .unwrap()
            .unwrap();
        assert_eq!(resp.body, b"done");
    }
}
