//! How each peer is tuned, as its best operators tune it, and the drift check that holds the
//! generated configs to it.
//!
//! A comparison is only worth the fairness of its peers: an nginx without `open_file_cache` in
//! front of static files, or one that spills a 340 KB upstream answer to a temporary file because
//! its proxy buffers are the 4 KB default, loses rows it would win in production. [`TUNING`] is
//! the one list of what every peer's config must carry, each line with the reason and a source
//! (docs/benchmarks.md, "How each peer is tuned", renders the same list, and a test holds the two
//! together). Before a peer starts, [`verify`] checks its generated config against the lines that
//! apply to the scenario; a config that lost one is refused ("tuning drift"), so a row is never
//! measured against a peer weaker than the one documented.
//!
//! Each line is matched as a substring of the text the peer reads (nginx.conf, haproxy.cfg, the
//! Caddyfile; for Varnish its command line, joined by spaces, then the VCL), so it is written
//! exactly as the generator writes it.

use super::TargetKind;
use crate::scenario::{Scenario, Setup};

/// The scenarios a tuning line applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Every scenario the peer runs.
    Always,
    /// Static files (plain, compressed on the fly, precompressed, many connections).
    Files,
    /// Proxying to origins (with or without cache and compression).
    Proxy,
    /// Proxying where the body passes through untouched: no compression, no cache (where a
    /// proxy can hand the body from socket to socket in the kernel).
    PassThrough,
    /// The HTTP/3 rows (only sluice and Caddy serve them).
    Http3,
}

impl When {
    pub fn applies(self, scenario: &Scenario) -> bool {
        match (self, &scenario.setup) {
            (When::Always, _) => true,
            (When::Files, Setup::Static { .. } | Setup::Precompressed) => true,
            (When::Proxy, Setup::Proxy(_)) => true,
            (When::PassThrough, Setup::Proxy(p)) => p.compress.is_none() && !p.cache,
            (When::Http3, _) => scenario.load.protocol == crate::scenario::Protocol::H3,
            _ => false,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            When::Always => "every row",
            When::Files => "static files",
            When::Proxy => "proxying",
            When::PassThrough => "proxying without compression or cache",
            When::Http3 => "HTTP/3 rows",
        }
    }
}

/// One line a peer's config must carry.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    pub peer: TargetKind,
    pub when: When,
    /// Exactly as the generated config has it.
    pub line: &'static str,
    pub reason: &'static str,
    pub source: &'static str,
}

const NGINX_CORE: &str = "https://nginx.org/en/docs/http/ngx_http_core_module.html";
const NGINX_PROXY: &str = "https://nginx.org/en/docs/http/ngx_http_proxy_module.html";
const NGINX_UPSTREAM: &str = "https://nginx.org/en/docs/http/ngx_http_upstream_module.html";
const NGINX_STATIC_GUIDE: &str =
    "https://docs.nginx.com/nginx/admin-guide/web-server/serving-static-content/";
const HAPROXY_MANUAL: &str = "https://docs.haproxy.org/2.6/configuration.html";
const CADDY_PROXY: &str = "https://caddyserver.com/docs/caddyfile/directives/reverse_proxy";
const CADDY_OPTIONS: &str = "https://caddyserver.com/docs/caddyfile/options";
const VARNISH_PARAMS: &str = "https://varnish-cache.org/docs/7.1/reference/varnishd.html";

/// Every peer's tuning. docs/benchmarks.md ("How each peer is tuned") lists the same lines.
pub const TUNING: &[Tuning] = &[
    // nginx
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Always,
        line: "access_log off;",
        reason: "no log write per request (every target logs nothing)",
        source: "https://nginx.org/en/docs/http/ngx_http_log_module.html#access_log",
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Always,
        line: "keepalive_requests 1000000;",
        reason: "the default (1,000) closes a keep-alive client connection after 1,000 requests, \
                 so long runs would measure reconnects",
        source: NGINX_CORE,
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Always,
        line: "worker_connections 4096;",
        reason: "the default 512 is short of 1,000 clients plus upstream connections",
        source: "https://nginx.org/en/docs/ngx_core_module.html#worker_connections",
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Always,
        line: " reuseport",
        reason: "a listening socket per worker, the kernel spreading connections: what the \
                 tuning guides set (with one worker, it changes no figure but keeps the config \
                 the one operators run)",
        source: "https://www.f5.com/company/blog/nginx/socket-sharding-nginx-release-1-9-1",
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Always,
        line: "backlog=4096",
        reason: "the default listen backlog is 511 on Linux; 1,000 clients connecting at once \
                 overflow it and wait for SYN retransmits (1 s and more), which shows as latency \
                 maximum, not as server work",
        source: NGINX_STATIC_GUIDE,
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Files,
        line: "sendfile on;",
        reason: "the file goes from the page cache to the socket without a user-space copy",
        source: NGINX_STATIC_GUIDE,
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Files,
        line: "tcp_nopush on;",
        reason: "with sendfile, the headers leave in the same packet as the start of the file",
        source: NGINX_STATIC_GUIDE,
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Files,
        line: "open_file_cache max=1000 inactive=60s;",
        reason: "keeps the open descriptor and stat of hot files: without it every request \
                 opens, stats and closes the file (sluice's memory cache does the same job, \
                 with a stat per hit)",
        source: "https://nginx.org/en/docs/http/ngx_http_core_module.html#open_file_cache",
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Proxy,
        line: "keepalive 100;",
        reason: "a pool of idle upstream connections (nginx opens one per request otherwise)",
        source: NGINX_UPSTREAM,
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Proxy,
        line: "proxy_http_version 1.1;",
        reason: "upstream keep-alive needs HTTP/1.1 (nginx speaks 1.0 upstream by default)",
        source: NGINX_UPSTREAM,
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Proxy,
        line: "proxy_set_header Connection \"\";",
        reason: "drops the client's Connection header so upstream connections stay open",
        source: NGINX_UPSTREAM,
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Proxy,
        line: "proxy_buffers 8 64k;",
        reason: "the default 8 × 4 KB (one page) holds 32 KB: the 340 KB JSON is read in 4 KB \
                 pieces and the rest spilled to a temporary file; 8 × 64 KB holds it in memory",
        source: NGINX_PROXY,
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Proxy,
        line: "proxy_buffer_size 64k;",
        reason: "the first buffer (headers and the start of the body) as large as the others",
        source: NGINX_PROXY,
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Proxy,
        line: "proxy_busy_buffers_size 128k;",
        reason: "how much may be sent to the client while the rest is still read: two buffers",
        source: NGINX_PROXY,
    },
    Tuning {
        peer: TargetKind::Nginx,
        when: When::Proxy,
        line: "proxy_max_temp_file_size 0;",
        reason: "never spill a response to disk: a stream larger than the buffers waits for the \
                 client instead of going through a temporary file",
        source: NGINX_PROXY,
    },
    // HAProxy
    Tuning {
        peer: TargetKind::Haproxy,
        when: When::Always,
        line: "tune.bufsize 65536",
        reason: "64 KB buffers instead of 16 KB: a quarter of the reads and writes for large \
                 bodies (issue 13's reference measurement ran so)",
        source: HAPROXY_MANUAL,
    },
    Tuning {
        peer: TargetKind::Haproxy,
        when: When::Always,
        line: "maxconn 4096",
        reason: "room for every client and upstream connection, and for the splice pipes \
                 within the lab's file limit (at 8192, HAProxy asks for more descriptors than \
                 the 20,000 allowed here and refuses to start)",
        source: HAPROXY_MANUAL,
    },
    Tuning {
        peer: TargetKind::Haproxy,
        when: When::Proxy,
        line: "http-reuse always",
        reason: "one pool of idle upstream connections shared by all clients, like nginx's \
                 `keepalive` (the default `safe` keeps a client's first request on a new one)",
        source: HAPROXY_MANUAL,
    },
    Tuning {
        peer: TargetKind::Haproxy,
        when: When::Proxy,
        line: "timeout http-keep-alive 60s",
        reason: "idle client connections survive between runs",
        source: HAPROXY_MANUAL,
    },
    Tuning {
        peer: TargetKind::Haproxy,
        when: When::PassThrough,
        line: "option splice-response",
        reason: "hands response bodies from the upstream socket to the client's through a \
                 kernel pipe (splice), without copying them through user space; only where no \
                 filter (compression, cache) needs the bytes",
        source: HAPROXY_MANUAL,
    },
    // Caddy
    Tuning {
        peer: TargetKind::Caddy,
        when: When::Always,
        line: "\t\tprotocols h1",
        reason: "only the protocols the row speaks: no HTTP/3 listener and Alt-Svc header, \
                 no h2c upgrade check on cleartext",
        source: CADDY_OPTIONS,
    },
    Tuning {
        peer: TargetKind::Caddy,
        when: When::Http3,
        line: "\t\tprotocols h1 h2 h3",
        reason: "HTTP/3 on the HTTPS port's UDP side, as Caddy 2.6 serves by default (quic-go); \
                 the host's `net.core.rmem_max` (4 MiB here) is above the 2 MiB receive buffer \
                 quic-go asks for, so it runs with the buffer its docs ask operators to allow",
        source: CADDY_OPTIONS,
    },
    Tuning {
        peer: TargetKind::Caddy,
        when: When::Always,
        line: "\t\tlevel ERROR",
        reason: "no log line per request (Caddy has no access log unless asked)",
        source: CADDY_OPTIONS,
    },
    Tuning {
        peer: TargetKind::Caddy,
        when: When::Proxy,
        line: "keepalive_idle_conns_per_host 100",
        reason: "keeps up to 100 idle upstream connections (the default is 32), like nginx's \
                 `keepalive 100`",
        source: CADDY_PROXY,
    },
    Tuning {
        peer: TargetKind::Caddy,
        when: When::Proxy,
        line: "keepalive 60s",
        reason: "idle upstream connections live through the pauses between runs",
        source: CADDY_PROXY,
    },
    // Varnish
    Tuning {
        peer: TargetKind::Varnish,
        when: When::Always,
        line: "-p thread_pools=1",
        reason: "one thread pool per CPU the server has (one here)",
        source: VARNISH_PARAMS,
    },
    Tuning {
        peer: TargetKind::Varnish,
        when: When::Always,
        line: "-p thread_pool_min=",
        reason: "every worker thread made up front (a thread per connection and per backend \
                 fetch), so no run pays for creating them",
        source: VARNISH_PARAMS,
    },
    Tuning {
        peer: TargetKind::Varnish,
        when: When::Always,
        line: "-s malloc,256m",
        reason: "objects in memory, room for every object of a scenario",
        source: VARNISH_PARAMS,
    },
];

/// The tuning lines of `peer` that apply to `scenario`.
pub fn lines_for(peer: TargetKind, scenario: &Scenario) -> impl Iterator<Item = &'static Tuning> {
    TUNING
        .iter()
        .filter(move |t| t.peer == peer && t.when.applies(scenario))
}

/// Refuses a generated config that lacks one of `peer`'s tuning lines for `scenario`: the row
/// would measure a peer weaker than the one docs/benchmarks.md describes.
pub fn verify(peer: TargetKind, scenario: &Scenario, config: &str) -> Result<(), String> {
    let missing: Vec<String> = lines_for(peer, scenario)
        .filter(|t| !config.contains(t.line))
        .map(|t| format!("`{}`", t.line.trim()))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "tuning drift: the {} config lacks {} (docs/benchmarks.md, \"How each peer is tuned\")",
            peer.name(),
            missing.join(", ")
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use std::net::SocketAddr;
    use std::path::Path;

    use super::*;
    use crate::scenario;
    use crate::target::process::Address;
    use crate::target::test_support::ctx;
    use crate::target::{Origins, StartError, caddy, haproxy, nginx, varnish};

    fn origins(s: &Scenario) -> Origins {
        let mut origins = Origins::none();
        for i in 0..s.origins() {
            origins.addresses.push(if s.unix_origins() {
                Address::Unix(format!("/w/o{i}.sock").into())
            } else {
                Address::Tcp(SocketAddr::from(([127, 0, 0, 1], 9000 + i as u16)))
            });
        }
        origins
    }

    /// The text `verify` reads for `peer` on `s`, or None where the peer does not run it.
    fn generated(peer: TargetKind, s: &Scenario) -> Option<String> {
        if s.load.protocol == scenario::Protocol::H3 && crate::target::no_http3(peer).is_some() {
            return None;
        }
        let addr = SocketAddr::from(([127, 0, 0, 1], 8080));
        let dir = Path::new("/w/d");
        let o = origins(s);
        let text = match peer {
            TargetKind::Nginx => nginx::config(s, &ctx(), &o, addr, dir),
            TargetKind::Haproxy => haproxy::config(s, &ctx(), &o, addr, dir),
            TargetKind::Caddy => caddy::caddyfile(s, &ctx(), &o, addr, dir),
            TargetKind::Varnish => varnish::vcl(s, &o).map(|vcl| {
                let args = varnish::args(s, addr, dir, Path::new("/w/v.vcl"));
                format!("{}\n{vcl}", args.join(" "))
            }),
            _ => return None,
        };
        match text {
            Ok(text) => Some(text),
            Err(StartError::NotSupported(_)) => None,
            Err(e) => panic!("{}: {e:?}", s.name),
        }
    }

    const PEERS: [TargetKind; 4] = [
        TargetKind::Nginx,
        TargetKind::Haproxy,
        TargetKind::Caddy,
        TargetKind::Varnish,
    ];

    #[test]
    fn every_generated_peer_config_carries_its_tuning() {
        let mut checked = 0;
        for s in scenario::all(false) {
            if s.setup == Setup::Direct {
                continue;
            }
            for peer in PEERS {
                if let Some(text) = generated(peer, &s) {
                    assert_eq!(
                        verify(peer, &s, &text),
                        Ok(()),
                        "{} {}",
                        peer.name(),
                        s.name
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 50, "{checked}");
    }

    /// The drift check: remove any one tuning line from a config that has it, and the row is
    /// refused with the line named.
    #[test]
    fn a_config_that_lost_a_tuning_line_is_refused() {
        let mut refused = Vec::new();
        for tuning in TUNING {
            // The first scenario the line applies to that the peer runs.
            let found = scenario::all(false).into_iter().find_map(|s| {
                (s.setup != Setup::Direct && tuning.when.applies(&s))
                    .then(|| generated(tuning.peer, &s).map(|text| (s, text)))
                    .flatten()
            });
            let Some((s, text)) = found else {
                panic!("no scenario exercises `{}`", tuning.line)
            };
            let drifted = text.replace(tuning.line, "");
            let err = verify(tuning.peer, &s, &drifted).unwrap_err();
            assert!(err.contains(tuning.line.trim()), "{err}");
            assert!(err.starts_with("tuning drift"), "{err}");
            refused.push(tuning.line);
        }
        assert_eq!(refused.len(), TUNING.len());
        // nginx in front of static files without open_file_cache: the issue's own example.
        let s = crate::target::test_support::scenario("static-plain");
        let text = generated(TargetKind::Nginx, &s).unwrap();
        let without: String = text
            .lines()
            .filter(|l| !l.contains("open_file_cache"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(
            verify(TargetKind::Nginx, &s, &without)
                .is_err_and(|e| e.contains("open_file_cache max=1000 inactive=60s;"))
        );
    }

    #[test]
    fn lines_apply_where_they_belong() {
        let files = crate::target::test_support::scenario("static-plain");
        let proxy = crate::target::test_support::scenario("date-proxy-c6");
        let gzip = crate::target::test_support::scenario("date-proxy-gzip-1");
        let lines = |peer, s: &Scenario| lines_for(peer, s).map(|t| t.line).collect::<Vec<_>>();
        assert!(
            lines(TargetKind::Nginx, &files).contains(&"open_file_cache max=1000 inactive=60s;")
        );
        assert!(
            !lines(TargetKind::Nginx, &proxy).contains(&"open_file_cache max=1000 inactive=60s;")
        );
        assert!(lines(TargetKind::Haproxy, &proxy).contains(&"option splice-response"));
        assert!(!lines(TargetKind::Haproxy, &gzip).contains(&"option splice-response"));
        let h3 = crate::target::test_support::scenario("tls-h3");
        let h2 = crate::target::test_support::scenario("tls-h2");
        assert!(lines(TargetKind::Caddy, &h3).contains(&"\t\tprotocols h1 h2 h3"));
        assert!(!lines(TargetKind::Caddy, &h2).contains(&"\t\tprotocols h1 h2 h3"));
    }
}
