//! STUBS for the parts another engineer builds in parallel (h2load adapter, /proc sampler,
//! machine info, report). They follow the agreed signatures so the runner compiles and runs;
//! the lead deletes this file when merging the real modules (and points `driver/mod.rs` at
//! `pub mod h2load;`).
#![allow(dead_code)]

pub mod sampler {
    use std::time::Instant;

    pub struct ProcessUsage {
        pub cpu_secs: f64,
        pub wall_secs: f64,
        pub peak_rss_bytes: u64,
    }

    /// Root process only, read at start and stop (the real one samples the tree every 100 ms).
    pub struct Sampler {
        pid: u32,
        cpu_start: f64,
        started: Instant,
    }

    impl Sampler {
        pub fn start(root_pid: u32) -> Sampler {
            Sampler {
                pid: root_pid,
                cpu_start: cpu_secs(root_pid),
                started: Instant::now(),
            }
        }

        pub fn stop(self) -> ProcessUsage {
            ProcessUsage {
                cpu_secs: cpu_secs(self.pid) - self.cpu_start,
                wall_secs: self.started.elapsed().as_secs_f64(),
                peak_rss_bytes: peak_rss(self.pid),
            }
        }
    }

    fn cpu_secs(pid: u32) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // utime and stime are fields 14 and 15; `after` starts at field 3.
        (ticks(11) + ticks(12)) / 100.0
    }

    fn peak_rss(pid: u32) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    }
}

pub mod machine {
    pub struct Machine;

    impl Machine {
        pub fn detect() -> crate::model::Machine {
            let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
            crate::model::Machine {
                cpu_model: cpuinfo
                    .lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
                    .unwrap_or_default(),
                cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
                kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
                memory_bytes: 0,
            }
        }
    }
}

pub mod report {
    use std::io;
    use std::path::Path;

    use crate::model::Report;

    pub fn write(dir: &Path, report: &Report) -> io::Result<()> {
        let json = serde_json::to_vec_pretty(report).map_err(io::Error::other)?;
        std::fs::write(dir.join("results.json"), json)
    }

    pub fn read(dir: &Path) -> io::Result<Report> {
        let json = std::fs::read(dir.join("results.json"))?;
        serde_json::from_slice(&json).map_err(io::Error::other)
    }
}

pub mod h2load {
    use std::path::PathBuf;
    use std::time::Duration;

    use crate::model::Measurement;

    #[derive(Debug, Clone)]
    pub struct H2loadArgs {
        pub h2: bool,
        pub tls: bool,
        pub method: String,
        pub path: String,
        pub headers: Vec<(String, String)>,
        pub body_file: Option<PathBuf>,
        pub clients: usize,
        pub streams: usize,
        pub requests: u64,
        pub duration: Option<Duration>,
    }

    pub fn available() -> bool {
        false
    }

    pub fn run(
        _args: &H2loadArgs,
        _base_url: &str,
        _load_cpus: &str,
    ) -> Result<Measurement, String> {
        Err("the h2load adapter is not merged yet".into())
    }
}
