//! A real 3-master Redis Cluster started and stopped by the tests: three `redis-server
//! --cluster-enabled yes` on free loopback ports, each given a third of the 16,384 slots
//! (`CLUSTER ADDSLOTSRANGE`, so a test knows which master holds a key), introduced with
//! `CLUSTER MEET`, and `cluster-require-full-coverage no`, so that a stopped master leaves the
//! others serving their slots. Then the fleet-wide rate limit on it.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_testkit::start_origin;

use super::{FAILURE_BOUND, wait_listening};

/// The first slot of each master's range (master i holds `FIRST[i]..FIRST[i + 1]`).
const FIRST: [u16; 4] = [0, 5461, 10923, 16384];

pub struct RedisCluster {
    nodes: Vec<Child>,
    ports: Vec<u16>,
    _dir: tempfile::TempDir,
}

impl RedisCluster {
    pub fn start() -> Option<RedisCluster> {
        sluice_testkit::external::require("redis-server", "apt-get install redis-server")?;
        let dir = tempfile::tempdir().unwrap();
        let mut nodes = Vec::new();
        let mut ports = Vec::new();
        for i in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let node_dir = dir.path().join(format!("n{i}"));
            std::fs::create_dir(&node_dir).unwrap();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .args(["--cluster-enabled", "yes"])
                .args(["--cluster-config-file", "nodes.conf"])
                .args(["--cluster-require-full-coverage", "no"])
                .arg("--dir")
                .arg(&node_dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            nodes.push(child);
            ports.push(port);
        }
        let cluster = RedisCluster {
            nodes,
            ports,
            _dir: dir,
        };
        for port in &cluster.ports {
            wait_listening(SocketAddr::from(([127, 0, 0, 1], *port)));
        }
        for (i, port) in cluster.ports.iter().enumerate() {
            let mut conn = cluster.conn(i);
            redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(FIRST[i])
                .arg(FIRST[i + 1] - 1)
                .query::<()>(&mut conn)
                .unwrap();
            if i > 0 {
                redis::cmd("CLUSTER")
                    .arg("MEET")
                    .arg("127.0.0.1")
                    .arg(*port)
                    .query::<()>(&mut cluster.conn(0))
                    .unwrap();
            }
        }
        cluster.wait_ready();
        Some(cluster)
    }

    fn conn(&self, i: usize) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}", self.ports[i]))
            .unwrap()
            .get_connection_with_timeout(FAILURE_BOUND)
            .unwrap()
    }

    /// Until every node knows the three and serves the whole slot range (a readiness poll).
    fn wait_ready(&self) {
        let deadline = Instant::now() + FAILURE_BOUND;
        for i in 0..self.ports.len() {
            loop {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut self.conn(i))
                    .unwrap();
                if info.contains("cluster_state:ok")
                    && info.contains("cluster_known_nodes:3")
                    && info.contains("cluster_slots_assigned:16384")
                {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the cluster never formed: {info}"
                );
                std::thread::sleep(Duration::from_millis(20)); // poll interval
            }
        }
    }

    /// `redis+cluster://` with the three nodes as seeds.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+cluster://{}", seeds.join(","))
    }

    /// The master (0, 1 or 2) holding `key`.
    pub fn master_of(key: &str) -> usize {
        let slot = sluice_cache::storage::shared::engine::slot_of(key.as_bytes());
        FIRST
            .iter()
            .rposition(|first| *first <= slot)
            .unwrap()
            .min(2)
    }

    /// Kill node `node` (SIGKILL): its port refuses connections from now on.
    pub fn kill(&mut self, node: usize) {
        let _ = self.nodes[node].kill();
        let _ = self.nodes[node].wait();
    }

    pub fn signal(&self, node: usize, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.nodes[node].id() as i32);
        nix::sys::signal::kill(pid, signal).unwrap();
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
            let _ = node.wait();
        }
    }
}

/// The shared GCRA on a cluster: its one key is in one slot, so the script runs there; three
/// instances hammering one key get one limit's budget.
#[tokio::test]
async fn three_instances_enforce_one_limit_on_a_redis_cluster() {
    let _serial = crate::fleet::serial().await;
    let Some(cluster) = RedisCluster::start() else {
        return;
    };
    let origin = start_origin(None).await;
    let url = cluster.url();
    let mut fleet = Vec::new();
    for _ in 0..3 {
        let server = super::rate_limit::instance(origin.addr, &url, "local").await;
        super::rate_limit::wait_connected(&server).await;
        fleet.push(Arc::new(server));
    }
    let before: Vec<f64> =
        futures_util::future::join_all(fleet.iter().map(|s| super::rate_limit::fallbacks(s))).await;
    let started = Instant::now();
    let (allowed, refused) = super::rate_limit::hammer(&fleet, 2, Duration::from_secs(5)).await;
    let took = started.elapsed().as_secs_f64();
    let budget = 5.0 + 10.0 * took;
    eprintln!(
        "shared limit on a cluster: {allowed} allowed, {refused} refused in {took:.2}s (budget {budget:.0} + one burst of 5)"
    );
    assert!(
        (allowed as f64) <= budget + 5.0,
        "{allowed} allowed, budget {budget}"
    );
    assert!(
        (allowed as f64) >= 10.0 * took * 0.9,
        "only {allowed} allowed in {took}s"
    );
    assert!(refused > allowed, "the instances did hammer");
    for (server, before) in fleet.iter().zip(before) {
        assert_eq!(
            super::rate_limit::fallbacks(server).await,
            before,
            "the cluster decided every request"
        );
    }
}
