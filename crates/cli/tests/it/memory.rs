//! Memory of idle keep-alive connections (issue 13, "Memory"): a measurement, not a check
//! (house rule), run by hand against the real `sluice` binary:
//!
//! `cargo build --release -p sluice && SLUICE_BIN=$PWD/target/release/sluice cargo test -p
//! sluice --test it idle_connections_rss -- --ignored --nocapture`
//!
//! For each case (HTTP/1.1 cleartext, h2c, HTTP/1.1 over TLS, HTTP/2 over TLS) a fresh server
//! is started; it prints the RSS of the idle process, then opens `IDLE_CONNS` connections
//! (default 10,000), each makes one request for a small static file and stays open without a
//! word, and prints the RSS once all are answered and again after `SETTLE` (or
//! `IDLE_SETTLE_SECS`; idle connections are parked after a second: `crates/server/src/net/h1.rs`).
//! `CASES=h1,h2c,tls,tls-h2` picks cases; `IDLE_HOLD_SECS=N` keeps the connections open N more
//! seconds, for a look from outside.
//! `docs/performance.md` ("Memory") has the figures.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// Long enough for idle connections to be parked (after 1 s idle) and the allocator to settle.
const SETTLE: Duration = Duration::from_secs(3);
const GET: &[u8] = b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n";
/// Connects in flight at once: below the listen backlog, so no SYN is dropped and retried.
const CONNECTING: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Http1,
    H2c,
    Tls,
    TlsH2,
}

const ALL: [Case; 4] = [Case::Http1, Case::H2c, Case::Tls, Case::TlsH2];

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Http1 => "h1",
            Case::H2c => "h2c",
            Case::Tls => "tls",
            Case::TlsH2 => "tls-h2",
        }
    }

    fn listener(self) -> &'static str {
        match self {
            Case::Http1 => r#"protocols = ["http/1.1"]"#,
            Case::H2c => r#"protocols = ["h2"]"#,
            Case::Tls => "tls = \"self-signed\"\nprotocols = [\"http/1.1\"]",
            Case::TlsH2 => "tls = \"self-signed\"\nprotocols = [\"h2\"]",
        }
    }
}

fn config(case: Case, conns: usize) -> String {
    format!(
        r#"
        [server]
        max_connections = {max}
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        max_connections = {max}
        idle_timeout = "10m"
        {listener}
        [[routes]]
        static = {{ root = "public" }}
        "#,
        max = conns + 100,
        listener = case.listener(),
    )
}

/// `VmRSS` of process `pid`, in KiB.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Raise the soft `ulimit -n` (inherited by the server) so both ends of `conns` fit.
fn raise_nofile(conns: usize) -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let wanted = conns as u64 + 1_000;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < wanted {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, wanted.min(hard), hard);
    }
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    let fit = usize::try_from(soft.saturating_sub(1_000)).unwrap_or(conns);
    if fit < conns {
        eprintln!("ulimit -n {soft}: {fit} connections instead of {conns}");
    }
    fit.min(conns)
}

/// The server for `case`, and the address it listens on.
fn spawn(case: Case, conns: usize, dir: &std::path::Path) -> (Child, SocketAddr) {
    let bin = std::env::var_os("SLUICE_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_sluice")),
        PathBuf::from,
    );
    let file = dir.join("sluice.toml");
    std::fs::create_dir_all(dir.join("public")).unwrap();
    std::fs::write(dir.join("public/small.txt"), "hello, idle world\n").unwrap();
    std::fs::write(&file, config(case, conns)).unwrap();
    let mut child = Command::new(&bin)
        .args(["serve", "-c"])
        .arg(&file)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let addr = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("sluice did not say where it listens");
        if let Some((_, rest)) = line.split_once("listening on ") {
            let addr = rest.split("://").nth(1).unwrap().split_whitespace().next();
            break addr.unwrap().parse().unwrap();
        }
    };
    (child, addr)
}

/// Read one response (head and `Content-Length` body) from an HTTP/1.1 connection.
async fn read_response<S: AsyncRead + Unpin>(stream: &mut S) -> bool {
    let mut out = Vec::new();
    let mut buf = [0u8; 2048];
    loop {
        if let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&out[..end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if out.len() >= end + 4 + length {
                return head.starts_with("http/1.1 200");
            }
        }
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// One request on an HTTP/1.1 stream, which is then kept.
async fn h1_once<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S) -> S {
    stream.write_all(GET).await.unwrap();
    assert!(read_response(&mut stream).await, "not answered 200");
    stream
}

/// What keeps a client connection open.
enum Kept {
    Tcp(#[allow(dead_code)] TcpStream),
    Tls(#[allow(dead_code)] Box<tokio_rustls::client::TlsStream<TcpStream>>),
    H2(#[allow(dead_code)] hyper::client::conn::http2::SendRequest<String>),
}

async fn connect(case: Case, addr: SocketAddr, tls: tokio_rustls::TlsConnector) -> Kept {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    match case {
        Case::Http1 => Kept::Tcp(h1_once(tcp).await),
        Case::Tls => {
            let stream = tls.connect(name, tcp).await.unwrap();
            Kept::Tls(Box::new(h1_once(stream).await))
        }
        Case::H2c => Kept::H2(h2_once(tcp, addr).await),
        Case::TlsH2 => {
            let stream = tls.connect(name, tcp).await.unwrap();
            assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
            Kept::H2(h2_once(stream, addr).await)
        }
    }
}

/// An HTTP/2 connection on `io` that made one request; its sender keeps it open.
async fn h2_once<S>(io: S, addr: SocketAddr) -> hyper::client::conn::http2::SendRequest<String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = hyper_util::rt::TokioIo::new(io);
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get(format!("http://{addr}/small.txt"))
        .body(String::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap();
    assert!(!body.to_bytes().is_empty());
    send
}

async fn measure(case: Case, conns: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (child, addr) = spawn(case, conns, dir.path());
    let pid = child.id();
    // Settled: the process as it starts, nothing asked of it yet.
    tokio::time::sleep(Duration::from_millis(500)).await; // a measurement, not a sync
    let idle = rss(pid);
    let mut config = sluice_testkit::insecure_tls_config();
    config.alpn_protocols = vec![if case == Case::TlsH2 {
        b"h2".to_vec()
    } else {
        b"http/1.1".to_vec()
    }];
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config));
    let gate = Arc::new(Semaphore::new(CONNECTING));
    let started = std::time::Instant::now();
    let clients = (0..conns).map(|_| {
        let (gate, tls) = (gate.clone(), tls.clone());
        tokio::spawn(async move {
            let _permit = gate.acquire().await.unwrap();
            connect(case, addr, tls).await
        })
    });
    let kept = tokio::time::timeout(
        Duration::from_secs(120),
        futures_util::future::join_all(clients),
    )
    .await
    .expect("the connections were not all answered");
    let kept: Vec<Kept> = kept.into_iter().map(Result::unwrap).collect();
    let answered = rss(pid);
    let settle = std::env::var("IDLE_SETTLE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(SETTLE, Duration::from_secs);
    tokio::time::sleep(settle).await; // a measurement: memory once the connections sit idle
    let settled = rss(pid);
    let per = |rss: u64| (rss.saturating_sub(idle) * 1024) as f64 / kept.len() as f64;
    println!(
        "{}: idle process {idle} KiB; {} connections answered in {:?}: {answered} KiB \
         ({:.0} B each); after {settle:?} idle: {settled} KiB ({:.0} B each) = {:.1} MiB",
        case.name(),
        kept.len(),
        started.elapsed(),
        per(answered),
        per(settled),
        settled as f64 / 1024.0,
    );
    if let Some(hold) = std::env::var("IDLE_HOLD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        // For a look from outside while the connections are open (`/proc/PID/smaps`, a heap
        // profiler stopped here): a measurement aid, not a synchronisation.
        println!("holding the connections for {hold} s (server pid {pid})");
        tokio::time::sleep(Duration::from_secs(hold)).await;
    }
    drop(kept);
    assert!(crate::cli::terminate(child));
}

/// See the module docs. Prints one line per case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture (docs/performance.md)"]
async fn idle_connections_rss_measurement() {
    let wanted: usize = std::env::var("IDLE_CONNS").map_or(10_000, |n| n.parse().unwrap());
    let conns = raise_nofile(wanted);
    let cases = std::env::var("CASES").unwrap_or_else(|_| "h1,h2c,tls,tls-h2".into());
    for case in ALL {
        if cases.split(',').any(|c| c.trim() == case.name()) {
            measure(case, conns).await;
        }
    }
}
