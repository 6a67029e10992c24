//! System calls per request (`--syscalls`): after a proxied row's measured runs, one more run
//! with `strace -c -f` attached to every process of the server's tree, counting each system
//! call. strace stops the server on every call, so that run's speed is strace's: only the
//! counts are kept, divided by the requests the run answered.
//!
//! The attach is confirmed before the load starts (each process's `TracerPid` in
//! /proc/PID/status, polled with a deadline), and strace is stopped with SIGINT, on which it
//! detaches and writes its table.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::client::Endpoint;
use crate::driver::{self, DriverKind};
use crate::model::SyscallCounts;
use crate::sampler;
use crate::scenario::LoadSpec;
use crate::target::Context;

const ATTACH_DEADLINE: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(10);

/// Whether strace runs here.
pub fn available() -> bool {
    Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// One side run of `load` (a fifth of its requests) with strace counting the calls of the
/// process tree rooted at `pid`.
pub fn side_run(
    driver: DriverKind,
    load: &LoadSpec,
    ctx: &Context,
    endpoint: &Endpoint,
    pid: u32,
) -> Result<SyscallCounts, String> {
    let pids = sampler::tree_pids(pid);
    if pids.is_empty() {
        return Err(format!("no process {pid}"));
    }
    let out = ctx.work_dir.join(format!("strace-{pid}.txt"));
    let mut cmd = Command::new("strace");
    cmd.args(["-c", "-f", "-qq", "-o"]).arg(&out);
    for p in &pids {
        cmd.args(["-p", &p.to_string()]);
    }
    let mut strace = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting strace (apt-get install strace): {e}"))?;
    let deadline = Instant::now() + ATTACH_DEADLINE;
    while !pids.iter().all(|p| traced(*p)) {
        if Instant::now() > deadline || strace.try_wait().ok().flatten().is_some() {
            let _ = strace.kill();
            let _ = strace.wait();
            return Err("strace did not attach (ptrace not permitted here?)".into());
        }
        std::thread::sleep(POLL);
    }
    let mut side = load.clone();
    side.requests = (load.requests / 5).max(load.concurrency() as u64 * 2);
    let run = driver::run(driver, &side, endpoint, &ctx.load_cpus, &ctx.work_dir);
    let _ = kill(
        Pid::from_raw(i32::try_from(strace.id()).unwrap_or(0)),
        Signal::SIGINT,
    );
    let _ = strace.wait();
    let measured = run?;
    let table =
        std::fs::read_to_string(&out).map_err(|e| format!("reading {}: {e}", out.display()))?;
    let _ = std::fs::remove_file(&out);
    Ok(SyscallCounts {
        requests: measured.requests,
        calls: parse(&table),
    })
}

/// Whether a tracer is attached to `pid` (and to all its threads, which strace -f attaches
/// together).
fn traced(pid: u32) -> bool {
    let tasks = Path::new("/proc").join(pid.to_string()).join("task");
    let Ok(entries) = std::fs::read_dir(&tasks) else {
        return false;
    };
    entries.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("status")).is_ok_and(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("TracerPid:"))
                .is_some_and(|v| v.trim() != "0")
        })
    })
}

/// `strace -c`'s table: `% time  seconds  usecs/call  calls  [errors]  syscall` rows between
/// dashed lines, then a `total` row (left out: the rows are summed where needed).
pub fn parse(table: &str) -> BTreeMap<String, u64> {
    let mut calls = BTreeMap::new();
    for line in table.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // time, seconds, usecs/call, calls, (errors), name
        if !(5..=6).contains(&fields.len()) || fields[0].parse::<f64>().is_err() {
            continue;
        }
        let name = fields[fields.len() - 1];
        if name == "total" {
            continue;
        }
        if let Ok(n) = fields[3].parse::<u64>() {
            *calls.entry(name.to_string()).or_default() += n;
        }
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_strace_c_tables_with_and_without_errors() {
        let table = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 45.10    0.012000           2      6000           writev
 30.00    0.008000           1      6000      1000 recvfrom
 20.00    0.005000           1      3000           epoll_wait
  4.90    0.001300         650         2           accept4
------ ----------- ----------- --------- --------- ----------------
100.00    0.026300                 15002      1000 total
";
        let calls = parse(table);
        assert_eq!(calls.len(), 4);
        assert_eq!(calls["writev"], 6000);
        assert_eq!(calls["recvfrom"], 6000);
        assert_eq!(calls["accept4"], 2);
        let counts = SyscallCounts {
            requests: 3000,
            calls,
        };
        assert!((counts.per_request() - 15002.0 / 3000.0).abs() < 1e-9);
        assert_eq!(counts.top(2)[0].0, "recvfrom");
        assert_eq!(counts.top(2)[1].0, "writev");
        assert!(parse("garbage\n\n").is_empty());
    }
}
