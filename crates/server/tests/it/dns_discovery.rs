//! Upstreams discovered by DNS (`dns+a:`, `dns+srv:`), against a real `dnsmasq` (Debian's
//! `dnsmasq-base`) started and stopped by the tests on a free loopback port, with a hosts
//! directory the tests rewrite and SRV records on its command line.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice_testkit::{Offer, TestServer, client, start_toml};

/// Upper bound for anything awaited; only reached when a test fails.
const FAILURE_BOUND: Duration = Duration::from_secs(30);

/// A dnsmasq of its own, killed when dropped.
struct Dnsmasq {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Dnsmasq {
    /// Serves the hosts file `hosts` (rewritten with [`Self::hosts`]) and `srv` records, all
    /// with TTL `ttl` seconds.
    fn start(hosts: &str, srv: &[&str], ttl: u32) -> Option<Self> {
        sluice_testkit::external::require("dnsmasq", "apt-get install dnsmasq-base")?;
        let dir = tempfile::tempdir().unwrap();
        // dnsmasq started as root reads as `nobody`.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        write_hosts(dir.path(), hosts);
        let port = free_udp_port();
        let mut command = Command::new("dnsmasq");
        command
            .args(["--no-daemon", "--conf-file=/dev/null", "--pid-file"])
            .arg(format!("--port={port}"))
            .args(["--listen-address=127.0.0.1", "--bind-interfaces"])
            .args(["--no-resolv", "--no-hosts"])
            .arg(format!("--hostsdir={}", dir.path().display()))
            .arg(format!("--local-ttl={ttl}"));
        for record in srv {
            command.arg(format!("--srv-host={record}"));
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let dns = Self { child, port, dir };
        // Ready once it answers over TCP (it serves both).
        let deadline = Instant::now() + FAILURE_BOUND;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "dnsmasq never listened");
            std::thread::sleep(Duration::from_millis(5)); // poll interval
        }
        Some(dns)
    }

    fn hosts(&self, hosts: &str) {
        write_hosts(self.dir.path(), hosts);
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        self.stop();
    }
}

fn write_hosts(dir: &Path, hosts: &str) {
    // Written beside, then renamed: dnsmasq (inotify) reads the whole new file.
    let tmp = dir.join(".hosts.tmp");
    std::fs::write(&tmp, hosts).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::rename(&tmp, dir.join("hosts")).unwrap();
}

/// A port free for both UDP and TCP on 127.0.0.1.
fn free_udp_port() -> u16 {
    loop {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A demo origin named `name` on `addr`.
async fn origin(addr: SocketAddr, name: &str) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions {
        name: Some(name.into()),
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(origin.serve_tcp(listener, async move {
        let _ = stopped.await;
    }));
    (addr, stop)
}

/// Two origins on one port, at 127.0.0.2 and 127.0.0.3 (A records carry no port).
async fn origin_pair() -> (u16, [tokio::sync::oneshot::Sender<()>; 2]) {
    loop {
        let (a, stop_a) = origin("127.0.0.2:0".parse().unwrap(), "a").await;
        let second = tokio::net::TcpListener::bind(("127.0.0.3", a.port())).await;
        if let Ok(listener) = second {
            drop(listener);
            let (_, stop_b) = origin(SocketAddr::from(([127, 0, 0, 3], a.port())), "b").await;
            return (a.port(), [stop_a, stop_b]);
        }
    }
}

async fn proxy(dns_port: u16, server: &str) -> TestServer {
    start_toml(&format!(
        r#"
        [log]
        access = "off"
        [admin]
        address = "127.0.0.1:0"
        [resolver]
        servers = ["127.0.0.1:{dns_port}"]
        timeout = "500ms"
        attempts = 1
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        name = "app"
        [routes.proxy]
        upstream = "app"
        [upstreams.app]
        servers = [{server}]
        "#
    ))
    .await
}

async fn metric(server: &TestServer, series: &str) -> f64 {
    let text = crate::scrape_metrics(server).await;
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Until the first lookup of `name` succeeded (the group has no peer of it before).
async fn first_lookup(server: &TestServer, name: &str) {
    let series = format!(
        "sluice_upstream_dns_refreshes_total{{upstream=\"app\",name=\"{name}\",result=\"ok\"}}"
    );
    let deadline = Instant::now() + FAILURE_BOUND;
    while metric(server, &series).await < 1.0 {
        assert!(Instant::now() < deadline, "no lookup of {name} succeeded");
        tokio::time::sleep(Duration::from_millis(10)).await; // poll interval
    }
}

/// The `X-Origin` of one `GET /hello`, which must succeed.
async fn hello(http: &reqwest::Client, server: &TestServer) -> String {
    let resp = http.get(server.url("/hello")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let name = resp.headers()["x-origin"].to_str().unwrap().to_owned();
    resp.bytes().await.unwrap();
    name
}

/// Send `GET /hello` until `want` answers (every answer must be a 200); how long it took.
async fn until_origin(http: &reqwest::Client, server: &TestServer, want: &str) -> Duration {
    let started = Instant::now();
    while hello(http, server).await != want {
        assert!(
            started.elapsed() < FAILURE_BOUND,
            "never reached origin {want}"
        );
    }
    started.elapsed()
}

#[tokio::test]
async fn an_address_change_moves_new_connections_and_dns_down_keeps_the_last_good_set() {
    let (port, _stops) = origin_pair().await;
    let ttl = 1;
    let Some(mut dns) = Dnsmasq::start("127.0.0.2 app.test\n", &[], ttl) else {
        return;
    };
    let server = proxy(dns.port, &format!("\"dns+a:app.test:{port}\"")).await;
    first_lookup(&server, &format!("dns+a:app.test:{port}")).await;
    let http = client(Offer::Http1);
    until_origin(&http, &server, "a").await;

    // A response in flight on a: a large stream the client reads after the change.
    let in_flight = http
        .get(server.url("/stream?chunks=64&size=65536"))
        .send()
        .await
        .unwrap();
    assert_eq!(in_flight.status(), 200);
    assert_eq!(in_flight.headers()["x-origin"], "a");

    dns.hosts("127.0.0.3 app.test\n");
    let moved = until_origin(&http, &server, "b").await;
    // TTL, then the next lookup at the latest after TTL + 10% jitter, plus dnsmasq's
    // re-read and a loaded machine's slack.
    assert!(
        moved < Duration::from_secs(u64::from(ttl)) * 2 + Duration::from_secs(3),
        "took {moved:?}"
    );
    // Once moved, every request goes to b.
    for _ in 0..20 {
        assert_eq!(hello(&http, &server).await, "b");
    }
    let body = in_flight.bytes().await.unwrap();
    let whole = http
        .get(server.url("/stream?chunks=64&size=65536"))
        .send()
        .await
        .unwrap();
    assert_eq!(whole.headers()["x-origin"], "b");
    let whole = whole.bytes().await.unwrap();
    assert!(whole.len() >= 64 * 65536);
    assert_eq!(body.len(), whole.len(), "the in-flight response finished");
    let changes = "sluice_upstream_dns_changes_total{upstream=\"app\",change=\"removed\"}";
    assert!(metric(&server, changes).await >= 1.0);

    // DNS down: lookups fail, traffic continues to the last good set.
    dns.stop();
    let errors = "sluice_upstream_dns_refreshes_total{upstream=\"app\",name=\"dns+a:app.test:";
    let error_series = format!("{errors}{port}\",result=\"error\"}}");
    let deadline = Instant::now() + FAILURE_BOUND;
    while metric(&server, &error_series).await < 1.0 {
        assert_eq!(hello(&http, &server).await, "b");
        assert!(Instant::now() < deadline, "no lookup failed");
    }
    for _ in 0..50 {
        assert_eq!(hello(&http, &server).await, "b");
    }
    let age = format!(
        "sluice_upstream_dns_last_good_age_seconds{{upstream=\"app\",name=\"dns+a:app.test:{port}\"}}"
    );
    assert!(metric(&server, &age).await >= 0.0);
}

#[tokio::test]
async fn srv_weights_split_traffic_and_priorities_are_backup_levels() {
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    let (a, stop_a) = origin(local, "a").await;
    let (b, stop_b) = origin(local, "b").await;
    let (c, _stop_c) = origin(local, "c").await;
    let srv = [
        format!("_http._tcp.svc.test,a.test,{},0,3", a.port()),
        format!("_http._tcp.svc.test,b.test,{},0,1", b.port()),
        format!("_http._tcp.svc.test,c.test,{},1,1", c.port()),
    ];
    let srv: Vec<&str> = srv.iter().map(String::as_str).collect();
    let Some(_dns) = Dnsmasq::start("127.0.0.1 a.test b.test c.test\n", &srv, 60) else {
        return;
    };
    let server = proxy(_dns.port, "\"dns+srv:_http._tcp.svc.test\"").await;
    first_lookup(&server, "dns+srv:_http._tcp.svc.test").await;
    let http = client(Offer::Http1);
    until_origin(&http, &server, "a").await;
    // Smooth weighted round robin is exact: 3:1 over every 4 picks, the backup idle.
    let mut counts = std::collections::HashMap::<String, u32>::new();
    for _ in 0..400 {
        *counts.entry(hello(&http, &server).await).or_default() += 1;
    }
    let (na, nb) = (
        counts.get("a").copied().unwrap_or(0),
        counts.get("b").copied().unwrap_or(0),
    );
    assert_eq!(na + nb, 400, "{counts:?}");
    assert!(na.abs_diff(300) <= 15, "3:1 within 5%: {counts:?}");
    assert_eq!(counts.get("c"), None, "priority 1 is a backup: {counts:?}");

    // The priority-0 servers gone: the backup level answers, nothing fails.
    let _ = stop_a.send(());
    let _ = stop_b.send(());
    for _ in 0..20 {
        assert_eq!(hello(&http, &server).await, "c");
    }
}
