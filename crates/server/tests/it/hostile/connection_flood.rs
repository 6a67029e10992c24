//! Connection flood: 10,000 clients knock at once on a listener limited to 1,000 connections
//! (`max_connections`). The first 1,000 accepted are answered and stay open; the others wait in
//! the kernel's listen backlog or have their SYNs dropped once it is full (Linux drops a SYN for
//! a full accept queue; the client sends it again after 1 s and 3 s) and give up at the
//! client's connect bound. The server never holds more than 1,000, goes on answering the ones it
//! holds, and once the flood has left, serves a new client.
//!
//! The memory cost is measured, not asserted (house rule): the ignored test
//! `connection_flood_rss_measurement` floods the real `sluice` binary and prints its RSS before,
//! at the peak and after; `docs/operations.md` ("Connection limits") has the figures and the
//! command.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::limits::{metric, read_response};
use sluice_testkit::{Offer, client, start_toml};

const LIMIT: usize = 1_000;
const FLOOD: usize = 10_000;
/// How long a client waits for its connect: long enough for the SYNs the kernel dropped to be
/// sent again twice (after 1 s and 3 s), so a slow accept loop still fills its 1,000 slots.
const CONNECT_BOUND: Duration = Duration::from_secs(4);
/// File descriptors left for the rest of the test binary (other tests run in parallel in this
/// process: the slowloris test alone holds 2,000 sockets).
const FD_HEADROOM: u64 = 3_000;
const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
const OPEN: &str = "sluice_connections_open";
const REACHED: &str = "sluice_connection_limit_reached_total";
const LISTENER: [(&str, &str); 1] = [("listener", "flood")];

/// A listener limited to `LIMIT` connections that answers "ok", and an admin listener.
fn config() -> String {
    format!(
        r#"
        [log]
        access = "off"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        name = "flood"
        address = "127.0.0.1:0"
        max_connections = {LIMIT}
        [[routes]]
        respond = {{ body = "ok" }}
        "#
    )
}

/// How many clients this process can open: every client is a socket here, and the in-process
/// server holds up to 1,000 more. The soft `ulimit -n` is raised to the hard limit first (up
/// to what the test needs); below that the flood is made smaller, never below twice the limit.
fn clients_that_fit() -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let wanted = (FLOOD + LIMIT) as u64 + FD_HEADROOM;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < wanted {
        // Raising the soft limit up to the hard one needs no privilege.
        let _ = setrlimit(Resource::RLIMIT_NOFILE, wanted.min(hard), hard);
    }
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    let fit = usize::try_from(soft.saturating_sub(LIMIT as u64 + FD_HEADROOM)).unwrap_or(FLOOD);
    let clients = fit.min(FLOOD);
    assert!(
        clients >= 2 * LIMIT,
        "ulimit -n is {soft} (hard {hard}): too few file descriptors for a flood of \
         {FLOOD} (raise it to {wanted})"
    );
    if clients < FLOOD {
        eprintln!("ulimit -n {soft}: flooding with {clients} clients instead of {FLOOD}");
    }
    clients
}

/// How one client's connect ended.
#[derive(Debug)]
enum Knock {
    Connected,
    /// RST to the SYN (`tcp_abort_on_overflow`, or a reset before the answer).
    Refused,
    /// Still not connected at [`CONNECT_BOUND`]: the kernel kept dropping its SYN.
    TimedOut,
    /// Anything else (a crash, an error page, a client out of descriptors): fails the test.
    Failed(String),
}

/// What the clients reported by the peak.
#[derive(Debug, Default)]
struct Counts {
    connected: usize,
    refused: usize,
    timed_out: usize,
}

/// The flood: `clients` tasks, each connecting, sending a request and waiting for its answer
/// until released. The answered connections are handed to the test, which keeps them open.
struct Flood {
    knocks: mpsc::UnboundedReceiver<Knock>,
    served: mpsc::UnboundedReceiver<TcpStream>,
    release: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    clients: usize,
}

impl Flood {
    fn start(addr: SocketAddr, clients: usize) -> Self {
        let (knock_tx, knocks) = mpsc::unbounded_channel();
        let (served_tx, served) = mpsc::unbounded_channel();
        let (release, released) = watch::channel(false);
        let tasks = (0..clients)
            .map(|_| {
                let (knocks, served, released) =
                    (knock_tx.clone(), served_tx.clone(), released.clone());
                tokio::spawn(knock(addr, knocks, served, released))
            })
            .collect();
        Self {
            knocks,
            served,
            release,
            tasks,
            clients,
        }
    }

    /// Wait (bounded) until every client's connect has ended and `LIMIT` have been answered:
    /// the server is full and the rest are knocking. Returns the answered connections.
    async fn peak(&mut self) -> (Vec<TcpStream>, Counts) {
        let deadline = Instant::now() + CONNECT_BOUND + Duration::from_secs(20);
        let mut counts = Counts::default();
        let mut held = Vec::with_capacity(LIMIT);
        let mut knocked = 0;
        while knocked < self.clients || held.len() < LIMIT {
            tokio::select! {
                Some(knock) = self.knocks.recv() => {
                    knocked += 1;
                    match knock {
                        Knock::Connected => counts.connected += 1,
                        Knock::Refused => counts.refused += 1,
                        Knock::TimedOut => counts.timed_out += 1,
                        Knock::Failed(why) => panic!("a client failed: {why}"),
                    }
                }
                Some(stream) = self.served.recv() => held.push(stream),
                _ = tokio::time::sleep_until(deadline) => panic!(
                    "no peak: {knocked} of {} connects ended ({counts:?}), {} answered",
                    self.clients,
                    held.len()
                ),
            }
        }
        (held, counts)
    }

    /// No client was answered since the peak (every one answered is counted in `held`).
    fn assert_none_answered_since(&mut self) {
        assert!(
            self.served.try_recv().is_err(),
            "a client past the limit was answered"
        );
    }

    /// Every client closes its connection (or stops waiting for one); bounded.
    async fn release(self) {
        let _ = self.release.send(true);
        let all = futures_util::future::join_all(self.tasks);
        tokio::time::timeout(Duration::from_secs(10), all)
            .await
            .expect("clients did not stop after the release");
        let mut knocks = self.knocks;
        while let Ok(knock) = knocks.try_recv() {
            if let Knock::Failed(why) = knock {
                panic!("a client failed: {why}");
            }
        }
    }
}

/// One client: connect (bounded), send a request, and wait for the answer or the release.
async fn knock(
    addr: SocketAddr,
    knocks: mpsc::UnboundedSender<Knock>,
    served: mpsc::UnboundedSender<TcpStream>,
    mut released: watch::Receiver<bool>,
) {
    let refused = |e: &std::io::Error| {
        use std::io::ErrorKind::{ConnectionRefused, ConnectionReset};
        matches!(e.kind(), ConnectionRefused | ConnectionReset)
    };
    let mut stream = match tokio::time::timeout(CONNECT_BOUND, TcpStream::connect(addr)).await {
        Err(_) => return drop(knocks.send(Knock::TimedOut)),
        Ok(Err(e)) if refused(&e) => return drop(knocks.send(Knock::Refused)),
        Ok(Err(e)) => return drop(knocks.send(Knock::Failed(format!("connect: {e}")))),
        Ok(Ok(stream)) => stream,
    };
    let _ = knocks.send(Knock::Connected);
    // Sent at once: a client in the backlog has its request waiting in the kernel's buffers.
    if let Err(e) = stream.write_all(GET).await {
        let _ = knocks.send(Knock::Failed(format!("write: {e}")));
        return;
    }
    tokio::select! {
        answer = read_response(&mut stream) => match answer {
            Some(text) if text.starts_with("HTTP/1.1 200") && text.ends_with("ok") => {
                let _ = served.send(stream);
            }
            other => {
                let _ = knocks.send(Knock::Failed(format!("answered {other:?}")));
            }
        },
        _ = released.wait_for(|r| *r) => {}
    }
}

/// Scrape the admin page until `stop`, returning the highest `sluice_connections_open` seen
/// and how many pages were read.
fn sample_open(admin: SocketAddr, mut stop: watch::Receiver<bool>) -> JoinHandle<(f64, usize)> {
    tokio::spawn(async move {
        let http = client(Offer::Http1);
        let (mut highest, mut pages) = (0f64, 0);
        loop {
            let page = metrics_page(&http, admin).await;
            highest = highest.max(metric(&page, OPEN, &LISTENER).unwrap_or(0.0));
            pages += 1;
            if *stop.borrow() {
                return (highest, pages);
            }
            // Polling a gauge as fast as the scrapes allow, with a short pause between them.
            tokio::select! {
                _ = stop.changed() => {}
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    })
}

async fn metrics_page(http: &reqwest::Client, admin: SocketAddr) -> String {
    http.get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Another request on every held connection, all at once; each must be answered.
async fn ask_again(held: &mut [TcpStream]) {
    let asks = held.iter_mut().map(|stream| async move {
        stream.write_all(GET).await.unwrap();
        read_response(stream).await
    });
    let answers = tokio::time::timeout(
        Duration::from_secs(20),
        futures_util::future::join_all(asks),
    )
    .await
    .expect("the held connections were not answered");
    for (i, answer) in answers.into_iter().enumerate() {
        let answer = answer.unwrap_or_else(|| panic!("held connection {i} was closed"));
        assert!(answer.ends_with("ok"), "held connection {i}: {answer}");
    }
}

/// Poll (bounded) until the listener's open-connection gauge is back at 0: every permit given
/// back, including those of the backlog's connections accepted after the release.
async fn wait_until_all_closed(admin: SocketAddr) {
    let http = client(Offer::Http1);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let page = metrics_page(&http, admin).await;
        let open = metric(&page, OPEN, &LISTENER).unwrap();
        if open == 0.0 {
            return;
        }
        assert!(Instant::now() < deadline, "{open} connections still open");
        tokio::time::sleep(Duration::from_millis(20)).await; // polling the gauge
    }
}

/// A new client, after the flood: answered (bounded).
async fn assert_new_client_served(addr: SocketAddr) {
    let http = client(Offer::Http1);
    let resp = tokio::time::timeout(Duration::from_secs(10), async {
        http.get(format!("http://{addr}/")).send().await.unwrap()
    })
    .await
    .expect("a new client was not served after the flood");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "ok");
}

// Two workers, as the slowloris test: 10,000 clients' tasks share them with the accept loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_connections_at_a_limit_of_a_thousand() {
    let clients = clients_that_fit();
    let server = start_toml(&config()).await;
    let addr = server.first_addr();
    let admin = server.running().admin_address().unwrap();
    let (stop, stopped) = watch::channel(false);
    let sampler = sample_open(admin, stopped);

    let mut flood = Flood::start(addr, clients);
    let started = Instant::now();
    let (mut held, counts) = flood.peak().await;
    eprintln!("peak after {:?}: {counts:?}", started.elapsed());
    assert!(counts.connected >= LIMIT, "{counts:?}");
    let page = metrics_page(&client(Offer::Http1), admin).await;
    assert_eq!(metric(&page, OPEN, &LISTENER), Some(LIMIT as f64), "{page}");
    let labels = [("listener", "flood"), ("scope", "listener")];
    let reached = metric(&page, REACHED, &labels).unwrap();
    assert!(reached >= 1.0, "{page}");
    // The server is full, the rest knock: the connections it holds are still served.
    ask_again(&mut held).await;
    flood.assert_none_answered_since();

    drop(held);
    flood.release().await;
    wait_until_all_closed(admin).await;
    assert_new_client_served(addr).await;
    let _ = stop.send(true);
    let (highest, pages) = sampler.await.unwrap();
    assert!(
        highest <= LIMIT as f64,
        "{highest} connections open at once"
    );
    assert!(pages >= 2, "the gauge was read {pages} times");
}

/// `VmRSS` and `VmHWM` of process `pid`, in KiB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The words after `texts` in the lines sluice logs, in that order, however the lines come
/// (bounded).
fn logged<const N: usize>(
    lines: &std::sync::mpsc::Receiver<String>,
    texts: [&str; N],
) -> [String; N] {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut found: [Option<String>; N] = std::array::from_fn(|_| None);
    while found.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("sluice did not log all of {texts:?}"));
        for (text, slot) in texts.iter().zip(&mut found) {
            if let Some((_, rest)) = line.split_once(text) {
                *slot = rest.split_whitespace().next().map(str::to_owned);
            }
        }
    }
    found.map(Option::unwrap_or_default)
}

/// Measurement, not a check: the same flood against the `sluice` binary (`SLUICE_BIN`),
/// printing the server process's RSS before, at the
/// peak and after each of `FLOODS` floods. For a release build (docs/operations.md):
/// `cargo build --release -p sluice && SLUICE_BIN=$PWD/target/release/sluice FLOODS=5
/// cargo test -p sluice-server --test it connection_flood_rss -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture (docs/operations.md)"]
async fn connection_flood_rss_measurement() {
    let clients = clients_that_fit();
    // The binary is another crate's (crates/cli), so cargo does not hand its path to this one.
    let bin = PathBuf::from(std::env::var_os("SLUICE_BIN").expect(
        "set SLUICE_BIN to the sluice binary: cargo build --release -p sluice && SLUICE_BIN=$PWD/target/release/sluice",
    ));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sluice.toml");
    std::fs::write(&file, config()).unwrap();
    let mut child = Command::new(&bin)
        .args(["serve", "-c"])
        .arg(&file)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let [admin, addr] = logged(
        &lines,
        ["admin: metrics at http://", "listening on http://"],
    );
    let admin: SocketAddr = admin.trim_end_matches("/metrics").parse().unwrap();
    let addr: SocketAddr = addr.parse().unwrap();
    let pid = child.id();

    // Warm up: a few connections served and closed, as a server that has run a while.
    for _ in 0..100 {
        assert_new_client_served(addr).await;
    }
    let (before, _) = memory(pid);
    println!("sluice: {}", bin.display());
    println!("RSS before: {before} KiB");
    // Several floods in a row (`FLOODS`, default 3): whether what one leaves behind is kept for
    // reuse (the allocator's free memory) or grows with every flood.
    let floods: usize = std::env::var("FLOODS").map_or(3, |n| n.parse().unwrap());
    for round in 1..=floods {
        let mut flood = Flood::start(addr, clients);
        let (mut held, counts) = flood.peak().await;
        ask_again(&mut held).await;
        let (peak, _) = memory(pid);
        let page = metrics_page(&client(Offer::Http1), admin).await;
        let open = metric(&page, OPEN, &LISTENER).unwrap();
        drop(held);
        flood.release().await;
        wait_until_all_closed(admin).await;
        assert_new_client_served(addr).await;
        let (after, highest) = memory(pid);
        println!(
            "flood {round}: {clients} clients at max_connections = {LIMIT}, {open} open at the \
             peak ({} connected, {} refused, {} gave up connecting after {CONNECT_BOUND:?}); \
             RSS {peak} KiB at the peak, {after} KiB after (VmHWM {highest} KiB)",
            counts.connected, counts.refused, counts.timed_out,
        );
    }
    // SIGTERM drains and exits 0.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
}
