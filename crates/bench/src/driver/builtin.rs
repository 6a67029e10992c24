//! The built-in load generator: fixed concurrency, a fixed request count (or fewer when the
//! run reaches its time limit, `LoadSpec::max_secs`), HTTP/1.1 keep-alive
//! or HTTP/2 with several streams per connection (h2load's `-c` / `-m`), TLS or not.
//!
//! It runs on ONE thread pinned to the load CPUs with a current-thread runtime, like h2load's
//! single thread: the server gets its cores to itself and the driver never migrates. So that
//! the driver is not the bottleneck, a request is cloned from a template, bodies are counted
//! frame by frame and never collected, and each stream keeps its own histogram and counters
//! (merged at the end), so nothing is shared on the hot path but one atomic request counter.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use http_body_util::BodyExt;

use crate::client::{self, Endpoint, RequestTemplate, Sender, TlsConnector};
use crate::model::Measurement;
use crate::pin;
use crate::scenario::LoadSpec;

/// Run `spec` against `endpoint` on a new thread pinned to `load_cpus` and wait for it.
pub fn run(spec: &LoadSpec, endpoint: &Endpoint, load_cpus: &str) -> Result<Measurement, String> {
    let spec = spec.clone();
    let endpoint = endpoint.clone();
    let cpus = pin::parse_cpus(load_cpus)?;
    let thread = std::thread::Builder::new()
        .name("bench-load".into())
        .spawn(move || {
            pin::current_thread(&cpus)?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("starting the load runtime: {e}"))?;
            rt.block_on(load(&spec, &endpoint))
        })
        .map_err(|e| format!("starting the load thread: {e}"))?;
    thread
        .join()
        .map_err(|_| "the load thread panicked".to_string())?
}

/// What one stream counted.
struct Tally {
    latency: Histogram<u64>,
    requests: u64,
    failures: u64,
    statuses: std::collections::BTreeMap<u16, u64>,
    body_bytes: u64,
    header_bytes: u64,
    /// The first failure, to say why in the report.
    first_error: Option<String>,
}

impl Tally {
    fn new() -> Result<Self, String> {
        Ok(Self {
            // 1 µs to 10 minutes at 3 significant digits.
            latency: Histogram::new_with_bounds(1, 600_000_000, 3)
                .map_err(|e| format!("histogram: {e}"))?,
            requests: 0,
            failures: 0,
            statuses: Default::default(),
            body_bytes: 0,
            header_bytes: 0,
            first_error: None,
        })
    }

    fn fail(&mut self, error: String) {
        self.failures += 1;
        self.first_error.get_or_insert(error);
    }

    fn merge(&mut self, other: Tally) -> Result<(), String> {
        self.latency
            .add(&other.latency)
            .map_err(|e| format!("merging histograms: {e}"))?;
        self.requests += other.requests;
        self.failures += other.failures;
        for (status, n) in other.statuses {
            *self.statuses.entry(status).or_default() += n;
        }
        self.body_bytes += other.body_bytes;
        self.header_bytes += other.header_bytes;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        Ok(())
    }
}

/// The load itself, on the current runtime. Public so tests can run it in their own runtime.
pub async fn load(spec: &LoadSpec, endpoint: &Endpoint) -> Result<Measurement, String> {
    let template = RequestTemplate::new(spec, endpoint)?;
    let tls = TlsConnector::new()?;
    let remaining = Arc::new(AtomicU64::new(spec.requests));
    let started = Instant::now();
    // Checked before each request: one in flight at the deadline still completes.
    let deadline = spec
        .max_secs
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| started + Duration::from_secs_f64(s));
    let mut tasks = Vec::new();
    for _ in 0..spec.clients.max(1) {
        // Connect up front so the streams of one HTTP/2 connection share it.
        let first = client::connect(endpoint, spec.protocol, &tls).await?;
        let streams = match first.sender.another_stream() {
            Some(_) => spec.streams.max(1),
            None => 1,
        };
        let mut senders = Vec::with_capacity(streams);
        for _ in 1..streams {
            if let Some(s) = first.sender.another_stream() {
                senders.push(s);
            }
        }
        senders.push(first.sender);
        for sender in senders {
            let ctx = StreamCtx {
                template: template.clone(),
                endpoint: endpoint.clone(),
                spec_protocol: spec.protocol,
                tls: tls.clone(),
                remaining: remaining.clone(),
                deadline,
            };
            tasks.push(tokio::spawn(stream_loop(ctx, sender)));
        }
    }
    let mut total = Tally::new()?;
    for task in tasks {
        let tally = task
            .await
            .map_err(|e| format!("a load task failed: {e}"))??;
        total.merge(tally)?;
    }
    let elapsed = started.elapsed();
    Ok(measurement(total, elapsed))
}

struct StreamCtx {
    template: RequestTemplate,
    endpoint: Endpoint,
    spec_protocol: crate::scenario::Protocol,
    tls: TlsConnector,
    remaining: Arc<AtomicU64>,
    deadline: Option<Instant>,
}

/// Claim one request at a time until none are left. A failed request still uses its slot, so
/// a dead server ends the run instead of spinning.
async fn stream_loop(ctx: StreamCtx, sender: Sender) -> Result<Tally, String> {
    let mut tally = Tally::new()?;
    let mut sender = Some(sender);
    while ctx.deadline.is_none_or(|d| Instant::now() < d) && claim(&ctx.remaining) {
        let conn = match sender.as_mut() {
            Some(s) => s,
            None => match client::connect(&ctx.endpoint, ctx.spec_protocol, &ctx.tls).await {
                Ok(c) => sender.insert(c.sender),
                Err(e) => {
                    tally.fail(e);
                    continue;
                }
            },
        };
        let start = Instant::now();
        match exchange(conn, &ctx.template, &mut tally).await {
            Ok(()) => {
                let us = start.elapsed().as_micros().max(1);
                let _ = tally.latency.record(u64::try_from(us).unwrap_or(u64::MAX));
            }
            Err(e) => {
                tally.fail(e);
                // The connection may be dead: open a new one for the next request.
                sender = None;
            }
        }
    }
    Ok(tally)
}

fn claim(remaining: &AtomicU64) -> bool {
    remaining
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

/// One request and its whole response body, counted.
async fn exchange(
    sender: &mut Sender,
    template: &RequestTemplate,
    tally: &mut Tally,
) -> Result<(), String> {
    if let Sender::H3(h3) = sender {
        let (status, head) = client::send_h3(h3, template.build(), &mut tally.body_bytes).await?;
        tally.header_bytes += head;
        tally.requests += 1;
        *tally.statuses.entry(status).or_default() += 1;
        if !(200..300).contains(&status) {
            tally.fail(format!("unexpected status {status}"));
        }
        return Ok(());
    }
    let resp = sender
        .send(template.build())
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    let status = resp.status().as_u16();
    tally.header_bytes += client::header_bytes(&resp);
    let mut body = resp.into_body();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("response body failed: {e}"))?;
        if let Some(data) = frame.data_ref() {
            tally.body_bytes += data.len() as u64;
        }
    }
    tally.requests += 1;
    *tally.statuses.entry(status).or_default() += 1;
    // Every scenario expects success; anything else is a failure the report must show.
    if !(200..300).contains(&status) {
        tally.fail(format!("unexpected status {status}"));
    }
    Ok(())
}

fn measurement(tally: Tally, elapsed: Duration) -> Measurement {
    let secs = elapsed.as_secs_f64().max(1e-9);
    let answered = tally.statuses.values().sum::<u64>();
    Measurement {
        requests: answered,
        failures: tally.failures,
        statuses: tally.statuses,
        elapsed_secs: secs,
        requests_per_sec: answered as f64 / secs,
        latency_p50_us: tally.latency.value_at_quantile(0.5) as f64,
        latency_p99_us: tally.latency.value_at_quantile(0.99) as f64,
        latency_max_us: tally.latency.max() as f64,
        latency_sd_us: tally.latency.stdev(),
        body_bytes: tally.body_bytes,
        header_bytes: tally.header_bytes,
        body_mb_per_sec: tally.body_bytes as f64 / 1e6 / secs,
        first_error: tally.first_error,
        ..Measurement::default()
    }
}

/// The first error a run met, for the report (`None` when it had no failure).
pub fn describe_failures(m: &Measurement) -> Option<String> {
    (m.failures > 0).then(|| {
        let statuses: Vec<String> = m
            .statuses
            .iter()
            .filter(|(s, _)| !(200..300).contains(*s))
            .map(|(s, n)| format!("{n}x {s}"))
            .collect();
        let mut text = format!(
            "{} of {} requests failed",
            m.failures,
            m.requests.max(m.failures)
        );
        if !statuses.is_empty() {
            text.push_str(&format!(" ({})", statuses.join(", ")));
        }
        if let Some(first) = &m.first_error {
            text.push_str(&format!("; first: {first}"));
        }
        text
    })
}
