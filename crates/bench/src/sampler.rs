//! CPU time and memory of the server's process tree, sampled from /proc while the load runs.
//!
//! The tree is every process whose parent chain reaches `root_pid` (nginx's master and its
//! workers, sluice and whatever it spawns). It is re-scanned on every tick, so workers spawned
//! during the run count. CPU is `utime + stime` of `/proc/PID/stat` (all threads of the process);
//! a process that exits between ticks keeps the CPU it had at its last sample, so at most one tick
//! (~100 ms) of its time is lost. Children's `cutime`/`cstime` are NOT added: they would count a
//! reaped child twice (once from its own samples, once through its parent). Memory is the sum of
//! `VmRSS` over the tree at each tick; the report keeps the peak.

use std::collections::HashMap;
use std::fs;
use std::process::Command;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the tree is sampled: often enough that an exiting process loses little CPU, rarely
/// enough that scanning /proc costs nothing measurable.
const TICK: Duration = Duration::from_millis(100);

/// What the process tree used between [`Sampler::start`] and [`Sampler::stop`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ProcessUsage {
    /// User + system CPU seconds of the whole tree (1.0 = one core busy for one second).
    pub cpu_secs: f64,
    /// The system (kernel) part of `cpu_secs`: system calls, the network stack, page faults.
    /// What is left when a server's own code costs nothing, so it shows how far below a peer
    /// user-space work alone can bring a row.
    pub system_cpu_secs: f64,
    pub wall_secs: f64,
    /// Highest sum of resident memory over the tree seen at any tick.
    pub peak_rss_bytes: u64,
}

impl ProcessUsage {
    /// CPU in % of one core (100 = one core busy for the whole time).
    pub fn cpu_percent(&self) -> f64 {
        if self.wall_secs > 0.0 {
            100.0 * self.cpu_secs / self.wall_secs
        } else {
            0.0
        }
    }
}

/// Samples one process tree on a background thread until stopped.
pub struct Sampler {
    state: Arc<Mutex<TreeState>>,
    stop: Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Takes a first sample now (the baseline: CPU used before the run is not counted) and samples
    /// again every ~100 ms on a thread.
    pub fn start(root_pid: u32) -> Sampler {
        let state = Arc::new(Mutex::new(TreeState::new(root_pid, clock_ticks_per_sec())));
        lock(&state).sample();
        let (stop, stopped) = mpsc::channel::<()>();
        let for_thread = Arc::clone(&state);
        // recv_timeout is the tick: it returns early (and the loop ends) as soon as stop() sends.
        let thread = std::thread::Builder::new()
            .name("bench-sampler".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
                    lock(&for_thread).sample();
                }
            })
            // Without a thread, start and stop samples still give the CPU of processes that
            // live through the run; only the peak memory and short-lived workers are missed.
            .ok();
        Sampler {
            state,
            stop,
            thread,
        }
    }

    /// What the tree used so far (for progress lines), without stopping.
    pub fn snapshot(&self) -> ProcessUsage {
        lock(&self.state).usage()
    }

    /// Takes a last sample and returns the totals.
    pub fn stop(mut self) -> ProcessUsage {
        // A send error means the thread is already gone: nothing to stop.
        let _ = self.stop.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let mut state = lock(&self.state);
        state.sample();
        state.usage()
    }
}

/// A poisoned lock only means a sample panicked half-way; the totals are still the best we have.
fn lock(state: &Mutex<TreeState>) -> std::sync::MutexGuard<'_, TreeState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A process is known by pid AND start time, so a recycled pid is a new process.
type ProcessKey = (u32, u64);

/// CPU ticks of one process: user + system, and system alone.
#[derive(Debug, Clone, Copy, Default)]
struct Ticks {
    total: u64,
    system: u64,
}

struct TreeState {
    root_pid: u32,
    ticks_per_sec: f64,
    started: Instant,
    /// CPU ticks (user + system, and system alone) each process had at its first sample (0 for
    /// processes born during the run, whose whole life counts) and at its latest one.
    cpu_ticks: HashMap<ProcessKey, (Ticks, Ticks)>,
    first_sample_done: bool,
    peak_rss_bytes: u64,
}

impl TreeState {
    fn new(root_pid: u32, ticks_per_sec: f64) -> Self {
        TreeState {
            root_pid,
            ticks_per_sec,
            started: Instant::now(),
            cpu_ticks: HashMap::new(),
            first_sample_done: false,
            peak_rss_bytes: 0,
        }
    }

    fn sample(&mut self) {
        let mut rss = 0;
        for stat in tree(self.root_pid) {
            let now = Ticks {
                total: stat.utime + stat.stime,
                system: stat.stime,
            };
            let baseline = if self.first_sample_done {
                Ticks::default()
            } else {
                now
            };
            self.cpu_ticks
                .entry((stat.pid, stat.start_time))
                .and_modify(|(_, last)| *last = now)
                .or_insert((baseline, now));
            rss += vm_rss_bytes(stat.pid).unwrap_or(0);
        }
        self.first_sample_done = true;
        self.peak_rss_bytes = self.peak_rss_bytes.max(rss);
    }

    fn usage(&self) -> ProcessUsage {
        let used = |part: fn(&Ticks) -> u64| -> u64 {
            self.cpu_ticks
                .values()
                .map(|(first, last)| part(last).saturating_sub(part(first)))
                .sum()
        };
        ProcessUsage {
            cpu_secs: used(|t| t.total) as f64 / self.ticks_per_sec,
            system_cpu_secs: used(|t| t.system) as f64 / self.ticks_per_sec,
            wall_secs: self.started.elapsed().as_secs_f64(),
            peak_rss_bytes: self.peak_rss_bytes,
        }
    }
}

/// The fields of /proc/PID/stat the sampler needs.
#[derive(Debug, Clone, PartialEq)]
struct ProcStat {
    pid: u32,
    ppid: u32,
    utime: u64,
    stime: u64,
    start_time: u64,
}

/// Parses /proc/PID/stat. The command name (field 2) is in parentheses and may itself contain
/// spaces and parentheses, so fields are counted from the LAST ')'.
fn parse_stat(text: &str) -> Option<ProcStat> {
    let (pid, rest) = text.split_once(" (")?;
    let after_comm = &rest[rest.rfind(')')? + 1..];
    // After the name: state(3) ppid(4) ... utime(14) stime(15) ... starttime(22).
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    Some(ProcStat {
        pid: pid.trim().parse().ok()?,
        ppid: u32::try_from(field(4)?).ok()?,
        utime: field(14)?,
        stime: field(15)?,
        start_time: field(22)?,
    })
}

/// The PIDs of `root_pid` and all its descendants alive now (what strace attaches to).
pub fn tree_pids(root_pid: u32) -> Vec<u32> {
    tree(root_pid).into_iter().map(|s| s.pid).collect()
}

/// The root process and all its descendants alive now.
fn tree(root_pid: u32) -> Vec<ProcStat> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let all: Vec<ProcStat> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        // A process may exit between listing and reading: it is simply not in this sample.
        .filter_map(|pid| parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?))
        .collect();
    let mut in_tree = vec![root_pid];
    let mut found = Vec::new();
    // Breadth first over the parent links; pids never repeat within one listing.
    let mut next = 0;
    while let Some(&parent) = in_tree.get(next) {
        next += 1;
        for stat in &all {
            if stat.pid == parent {
                found.push(stat.clone());
            }
            if stat.ppid == parent && stat.pid != parent {
                in_tree.push(stat.pid);
            }
        }
    }
    found
}

fn vm_rss_bytes(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// USER_HZ, the unit of utime/stime. `getconf CLK_TCK` asks the C library; if that fails, 100 is
/// the value the kernel ABI fixes on every mainstream architecture (x86, arm, riscv).
fn clock_ticks_per_sec() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| {
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<f64>()
                .ok()
        })
        .filter(|ticks| *ticks > 0.0)
        .unwrap_or(100.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Stdio};

    #[test]
    fn stat_lines_parse_even_with_odd_command_names() {
        let line = "4242 (my (odd) name) S 17 4242 4242 0 -1 4194560 300 0 0 0 \
                    125 37 0 0 20 0 3 0 987654 123456 789 18446744073709551615";
        let stat = parse_stat(line);
        assert_eq!(
            stat,
            Some(ProcStat {
                pid: 4242,
                ppid: 17,
                utime: 125,
                stime: 37,
                start_time: 987654
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    /// A shell in its own process group, so the test can kill the whole tree; `timeout` bounds
    /// every busy loop even if the test dies before killing it.
    fn spawn_tree(script: &str) -> Child {
        let spawned = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn();
        match spawned {
            Ok(child) => child,
            Err(e) => panic!("spawn sh: {e}"),
        }
    }

    fn kill_tree(mut child: Child) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", child.id())])
            .status();
        let _ = child.wait();
    }

    fn total_child_cpu_secs(pid: u32) -> f64 {
        // cutime + cstime (fields 16, 17): CPU of children the shell has waited for.
        let text = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let after = text
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .unwrap_or_default();
        let fields: Vec<i64> = after
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        // fields[] starts at ppid (field 4) because the state letter does not parse.
        (fields[16 - 4] + fields[17 - 4]) as f64 / clock_ticks_per_sec()
    }

    #[test]
    fn counts_cpu_and_memory_of_children_spawned_after_start() {
        let child = spawn_tree(
            "sleep 0.2; for i in 1 2; do timeout 60 sh -c 'while :; do :; done' & done; wait",
        );
        let sampler = Sampler::start(child.id());
        // Poll (bounded) until the busy grandchildren have burnt some CPU.
        let deadline = Instant::now() + Duration::from_secs(30);
        while sampler.snapshot().cpu_secs < 0.5 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let usage = sampler.stop();
        kill_tree(child);
        assert!(usage.cpu_secs >= 0.5, "{usage:?}");
        assert!(usage.system_cpu_secs <= usage.cpu_secs, "{usage:?}");
        // Two busy processes cannot use more than the machine's cores.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        assert!(usage.cpu_secs <= usage.wall_secs * cores + 0.2, "{usage:?}");
        assert!(usage.peak_rss_bytes > 0, "{usage:?}");
    }

    #[test]
    fn a_child_that_exits_mid_run_keeps_its_cpu() {
        // The child burns a bounded amount of CPU, exits, and the shell says so and waits.
        let mut child = spawn_tree(
            "timeout 60 sh -c 'i=0; while [ $i -lt 600000 ]; do i=$((i+1)); done'; echo done; \
             read -r never",
        );
        let sampler = Sampler::start(child.id());
        let mut line = String::new();
        if let Some(stdout) = child.stdout.take() {
            let _ = BufReader::new(stdout).read_line(&mut line);
        }
        assert_eq!(line.trim(), "done");
        let truth = total_child_cpu_secs(child.id());
        let usage = sampler.stop();
        kill_tree(child);
        assert!(truth >= 0.2, "the loop should burn CPU, got {truth}");
        // Only the last tick before the exit (~100 ms) may be lost.
        assert!(usage.cpu_secs >= truth - 0.15, "{usage:?} vs {truth}");
        assert!(usage.cpu_secs <= truth + 0.1, "{usage:?} vs {truth}");
    }

    #[test]
    fn counts_the_kernel_part_of_the_cpu_apart() {
        // One-byte reads and writes: almost all of dd's time is in system calls.
        let child = spawn_tree("timeout 60 dd if=/dev/zero of=/dev/null bs=1 2>/dev/null");
        let sampler = Sampler::start(child.id());
        let deadline = Instant::now() + Duration::from_secs(30);
        while sampler.snapshot().system_cpu_secs < 0.3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let usage = sampler.stop();
        kill_tree(child);
        assert!(usage.system_cpu_secs >= 0.3, "{usage:?}");
        assert!(usage.system_cpu_secs <= usage.cpu_secs, "{usage:?}");
    }
}
