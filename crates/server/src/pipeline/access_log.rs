//! The access log: one line per finished response, in nginx's `combined` format or as JSON.
//!
//! A line is written when the response body ends (or is dropped because the client went away;
//! see `observe.rs`), so it carries the bytes actually sent, like nginx. Lines go through a
//! bounded channel (`[log] access_queue` lines) to a writer thread that flushes whenever the
//! channel runs dry: request tasks never block on a file or terminal. When the destination is
//! slower than the traffic (a full disk, a stalled pipe, a terminal nobody reads) and the queue
//! is full, lines are dropped and counted in `sluice_access_log_dropped_total`: memory stays
//! bounded and no request waits for its log line.
//! When the log is off, none of this runs (benchmarks compare with nginx's `access_log off`).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Instant, SystemTime};

use prometheus_client::metrics::counter::Counter;

use http::{HeaderMap, Method, StatusCode, Uri, Version};
use sluice_config::{AccessLog, AccessLogFormat, LogSettings};

/// The writer side of the access log.
pub struct AccessLogger {
    tx: mpsc::SyncSender<String>,
    format: AccessLogFormat,
    /// Lines dropped because the queue was full.
    dropped: Counter,
}

impl AccessLogger {
    /// Open the configured destination; `None` when the log is off.
    pub fn open(settings: &LogSettings, dropped: Counter) -> std::io::Result<Option<Arc<Self>>> {
        let out: Box<dyn Write + Send> = match &settings.access {
            AccessLog::Off => return Ok(None),
            AccessLog::Stdout => Box::new(std::io::stdout()),
            AccessLog::Stderr => Box::new(std::io::stderr()),
            AccessLog::File(path) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            ),
        };
        Self::with_writer(out, settings.format, settings.access_queue, dropped).map(Some)
    }

    /// A logger writing to `out` through a queue of `queue` lines.
    fn with_writer(
        out: Box<dyn Write + Send>,
        format: AccessLogFormat,
        queue: usize,
        dropped: Counter,
    ) -> std::io::Result<Arc<Self>> {
        let (tx, rx) = mpsc::sync_channel::<String>(queue);
        std::thread::Builder::new()
            .name("sluice-access-log".into())
            .spawn(move || write_lines(rx, out))?;
        Ok(Arc::new(Self {
            tx,
            format,
            dropped,
        }))
    }

    /// Queue the line for a finished response.
    /// `complete`: the response body was sent whole (see `observe.rs`); only the JSON format
    /// says so, combined stays nginx's.
    pub fn write(&self, entry: &Entry, bytes_sent: u64, complete: bool) {
        let line = match self.format {
            AccessLogFormat::Combined => entry.combined(bytes_sent),
            // A response to HEAD has no content to send (RFC 9110 §9.3.2): hyper drops its body.
            AccessLogFormat::Json => {
                entry.json(bytes_sent, complete || entry.method == Method::HEAD)
            }
        };
        match self.tx.try_send(line) {
            Ok(()) => {}
            // The writer is behind: drop the line rather than wait or grow.
            Err(mpsc::TrySendError::Full(_)) => {
                self.dropped.inc();
            }
            // The writer thread only stops when every sender is gone: the process is exiting,
            // and the line has nowhere to go.
            Err(mpsc::TrySendError::Disconnected(_)) => {}
        };
    }
}

fn write_lines(rx: mpsc::Receiver<String>, out: Box<dyn Write + Send>) {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    while let Ok(line) = rx.recv() {
        let mut ok = out.write_all(line.as_bytes()).is_ok();
        while let Ok(line) = rx.try_recv() {
            ok &= out.write_all(line.as_bytes()).is_ok();
        }
        if !(ok && out.flush().is_ok()) {
            tracing::warn!("access log: write failed");
        }
    }
}

/// What is known about a request when its response starts.
pub struct Entry {
    pub remote: SocketAddr,
    pub time: SystemTime,
    pub start: Instant,
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    pub host: Option<String>,
    pub referer: Option<String>,
    pub user_agent: Option<String>,
    pub status: StatusCode,
    pub route: Option<String>,
    /// The response's content coding as sent (`gzip`, `br`, ...); `None` for identity.
    pub encoding: Option<&'static str>,
    /// The compression decision (`compressed`, `too_small`, ...); `None` when the route does
    /// not compress.
    pub compress: Option<&'static str>,
    /// What the cache did (`HIT`, `MISS`, ...); `None` off cached routes.
    pub cache: Option<&'static str>,
    /// Time from sending the request upstream to the response head (nginx's
    /// `$upstream_header_time`); `None` when no upstream answered (a cache hit, a static file).
    pub upstream_ms: Option<f64>,
    /// Why the route's access control refused the request (`client`, `auth`, `auth_slowed`,
    /// `auth_error`); `None` when it did not.
    pub deny: Option<&'static str>,
}

impl Entry {
    pub fn new(
        remote: SocketAddr,
        start: Instant,
        method: &Method,
        uri: &Uri,
        version: Version,
        headers: &HeaderMap,
    ) -> Self {
        let header = |name: http::header::HeaderName| {
            headers
                .get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        Self {
            remote,
            time: SystemTime::now(),
            start,
            method: method.clone(),
            uri: uri.clone(),
            version,
            host: header(http::header::HOST).or_else(|| uri.authority().map(|a| a.to_string())),
            referer: header(http::header::REFERER),
            user_agent: header(http::header::USER_AGENT),
            status: StatusCode::OK,
            route: None,
            encoding: None,
            compress: None,
            cache: None,
            upstream_ms: None,
            deny: None,
        }
    }

    /// `$remote_addr - - [$time_local] "$request" $status $body_bytes_sent "$http_referer"
    /// "$http_user_agent"`, time in UTC; ` deny=REASON` after it when access control refused
    /// the request (log parsers of the combined format read the fields they know and skip
    /// what follows).
    fn combined(&self, bytes_sent: u64) -> String {
        let deny = match self.deny {
            Some(reason) => format!(" deny={reason}"),
            None => String::new(),
        };
        format!(
            "{} - - [{}] \"{} {} {:?}\" {} {} \"{}\" \"{}\"{deny}\n",
            self.remote.ip(),
            clf_time(self.time),
            self.method,
            self.uri,
            self.version,
            self.status.as_u16(),
            bytes_sent,
            escape(self.referer.as_deref().unwrap_or("-")),
            escape(self.user_agent.as_deref().unwrap_or("-")),
        )
    }

    fn json(&self, bytes_sent: u64, complete: bool) -> String {
        let value = serde_json::json!({
            "time": httpdate::fmt_http_date(self.time),
            "remote": self.remote.ip().to_string(),
            "method": self.method.as_str(),
            "uri": self.uri.to_string(),
            "version": format!("{:?}", self.version),
            "host": self.host,
            "status": self.status.as_u16(),
            "bytes_sent": bytes_sent,
            "complete": complete,
            "duration_ms": self.start.elapsed().as_secs_f64() * 1000.0,
            "route": self.route,
            "encoding": self.encoding,
            "compress": self.compress,
            "cache": self.cache,
            "upstream_ms": self.upstream_ms,
            "deny": self.deny,
            "referer": self.referer,
            "user_agent": self.user_agent,
        });
        let mut line = value.to_string();
        line.push('\n');
        line
    }
}

/// nginx's `$time_local` shape (`22/Nov/2026:10:04:05 +0000`), always UTC.
fn clf_time(time: SystemTime) -> String {
    // httpdate gives "Sun, 22 Nov 2026 10:04:05 GMT"; rearrange rather than pull in a date crate.
    let http = httpdate::fmt_http_date(time);
    let parts: Vec<&str> = http.split(' ').collect();
    match parts.as_slice() {
        [_, day, month, year, hms, _] => format!("{day}/{month}/{year}:{hms} +0000"),
        _ => http,
    }
}

/// Escape quotes and control bytes as nginx does (`\x22`), so a header cannot forge a log line.
fn escape(value: &str) -> std::borrow::Cow<'_, str> {
    if !value
        .bytes()
        .any(|b| b == b'"' || b == b'\\' || b.is_ascii_control())
    {
        return std::borrow::Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 8);
    for ch in value.chars() {
        if ch == '"' || ch == '\\' || ch.is_ascii_control() {
            out.push_str(&format!("\\x{:02X}", ch as u32));
        } else {
            out.push(ch);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        let mut headers = HeaderMap::new();
        headers.insert("user-agent", "curl/8 \"evil\"".parse().unwrap());
        let uri: Uri = "/a?b=1".parse().unwrap();
        let mut e = Entry::new(
            "127.0.0.1:5000".parse().unwrap(),
            Instant::now(),
            &Method::GET,
            &uri,
            Version::HTTP_11,
            &headers,
        );
        e.time = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_795_000_000);
        e.status = StatusCode::NOT_FOUND;
        e
    }

    #[test]
    fn combined_line_matches_nginx_shape() {
        let line = entry().combined(123);
        assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
        assert!(
            line.contains(
                " +0000] \"GET /a?b=1 HTTP/1.1\" 404 123 \"-\" \"curl/8 \\x22evil\\x22\"\n"
            ),
            "{line}"
        );
    }

    #[test]
    fn json_line_is_one_object() {
        let line = entry().json(7, false);
        let v: serde_json::Value = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(v["status"], 404);
        assert_eq!(v["bytes_sent"], 7);
        assert_eq!(v["complete"], false);
        assert_eq!(v["user_agent"], "curl/8 \"evil\"");
        assert_eq!(v["encoding"], serde_json::Value::Null);
        assert_eq!(v["compress"], serde_json::Value::Null);
        assert_eq!(v["cache"], serde_json::Value::Null);
        assert_eq!(v["upstream_ms"], serde_json::Value::Null);
    }

    /// A sink that blocks until told to go on, like a pipe nobody reads; it says when a write
    /// has reached it (the writer thread is then stuck in it).
    struct Stalled {
        entered: mpsc::Sender<()>,
        go_on: std::sync::Mutex<mpsc::Receiver<()>>,
    }

    impl Write for Stalled {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _ = self.entered.send(());
            // Blocks until the test lets go (sends, or drops its sender).
            let _ = self.go_on.lock().unwrap().recv();
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_sink_drops_lines_instead_of_blocking_or_growing() {
        let (go_on, wait) = mpsc::channel();
        let (entered, writer_stuck) = mpsc::channel();
        let dropped = Counter::default();
        let sink = Box::new(Stalled {
            entered,
            go_on: std::sync::Mutex::new(wait),
        });
        let logger =
            AccessLogger::with_writer(sink, AccessLogFormat::Combined, 4, dropped.clone()).unwrap();
        // One line, and the writer thread is stuck in the sink with it (the queue is empty).
        logger.write(&entry(), 1, true);
        writer_stuck.recv().unwrap();
        // Every write returns at once (the test would hang otherwise): the queue takes 4, the
        // other 96 are dropped and counted.
        for _ in 0..100 {
            logger.write(&entry(), 1, true);
        }
        assert_eq!(dropped.get(), 96);
        drop(go_on);
    }
}
