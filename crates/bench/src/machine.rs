//! The machine a run happened on, for the report's header: numbers from different machines are
//! not comparable, so every report says where it was measured.

use std::fs;

use crate::model;

/// Reads the machine's description from /proc; unknown parts become "unknown" or 0 rather than
/// an error, because a report without a CPU model is still a report.
pub struct Machine;

impl Machine {
    pub fn detect() -> model::Machine {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        model::Machine {
            cpu_model: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".into()),
            cores: std::thread::available_parallelism()
                .map_or(0, |n| n.get())
                .max(cpu_count(&cpuinfo)),
            kernel: match kernel.trim() {
                "" => "unknown".into(),
                release => release.to_string(),
            },
            memory_bytes: mem_total_bytes(&meminfo).unwrap_or(0),
        }
    }
}

/// The first `model name` line (x86); arm kernels may only have `Hardware` or nothing.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| matches!(key.trim(), "model name" | "Hardware"))
        .map(|(_, value)| value.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|model| !model.is_empty())
}

/// Logical CPUs listed in /proc/cpuinfo (`processor` lines).
fn cpu_count(cpuinfo: &str) -> usize {
    cpuinfo
        .lines()
        .filter(|line| {
            line.split(':')
                .next()
                .is_some_and(|key| key.trim() == "processor")
        })
        .count()
}

fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpuinfo_and_meminfo() {
        let cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC  7B13 64-Core Processor\n\n\
                       processor\t: 1\nmodel name\t: AMD EPYC  7B13 64-Core Processor\n";
        assert_eq!(
            cpu_model(cpuinfo).as_deref(),
            Some("AMD EPYC 7B13 64-Core Processor")
        );
        assert_eq!(cpu_count(cpuinfo), 2);
        assert_eq!(
            mem_total_bytes("MemTotal:        8131932 kB\nMemFree: 1 kB\n"),
            Some(8_327_098_368)
        );
        assert_eq!(cpu_model("processor: 0\n"), None);
    }

    #[test]
    fn detects_this_machine() {
        let machine = Machine::detect();
        assert!(machine.cores >= 1);
        assert!(machine.memory_bytes > 0);
        assert_ne!(machine.kernel, "unknown");
    }
}
