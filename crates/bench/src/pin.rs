//! CPU pinning: `--server-cpus` / `--load-cpus` lists (`1`, `0-1`, `0,2-3`), applied to a
//! thread with `sched_setaffinity` (through nix: the workspace forbids `unsafe`) or to a child
//! process with `taskset -c`.

use nix::sched::{CpuSet, sched_setaffinity};
use nix::unistd::Pid;

/// Parse a CPU list as taskset takes it.
pub fn parse_cpus(list: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("CPU list {list:?}: expected e.g. 1, 0-1 or 0,2-3");
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim) {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let first: usize = first.parse().map_err(|_| bad())?;
        let last: usize = last.parse().map_err(|_| bad())?;
        if first > last || last >= CpuSet::count() {
            return Err(bad());
        }
        cpus.extend(first..=last);
    }
    if cpus.is_empty() {
        return Err(bad());
    }
    Ok(cpus)
}

/// Pin the calling thread to `cpus`.
pub fn current_thread(cpus: &[usize]) -> Result<(), String> {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(|e| format!("CPU {cpu}: {e}"))?;
    }
    // Pid 0 is the calling thread.
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| format!("pinning to {cpus:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_like_taskset() {
        assert_eq!(parse_cpus("1").unwrap(), vec![1]);
        assert_eq!(parse_cpus("0-1").unwrap(), vec![0, 1]);
        assert_eq!(parse_cpus("0, 2-3").unwrap(), vec![0, 2, 3]);
        assert!(parse_cpus("").is_err());
        assert!(parse_cpus("2-1").is_err());
        assert!(parse_cpus("x").is_err());
    }
}
