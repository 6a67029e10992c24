//! CPU-adaptive compression: a route's `max_cpu` (`docs/performance.md`, "CPU-adaptive
//! compression"). When the process's CPU share reaches `max_cpu`, new responses compressed on
//! the fly step down to each algorithm's fastest level; if it is still there at the next
//! sample, to identity. They step back up one step at a time once the share has stayed below
//! a lower mark (4/5 of `max_cpu`) for [`CALM_SAMPLES`] samples in a row: the gap and the wait
//! are the hysteresis, so a load hovering at the limit does not flip the level every sample.
//!
//! Like HAProxy's `maxcompcpuusage`, but for every coding, and stepping per CPU sample (every
//! 250 ms, `crate::shared::cpu`) rather than per response. Only work done per response adapts:
//! precompressed sidecars, stored variants and cached compressed responses cost nothing to
//! serve and go on being served. The step is read once, when a response's encoder is made, so
//! a response already streaming keeps its level to the end.
//!
//! The decision is [`next`], a plain function of the state and one reading, so it is tested
//! without load or time; [`Adaptive`] holds one route's state in atomics (written by the
//! sampler only, read per response with one relaxed load).

use std::sync::atomic::{AtomicU8, Ordering};

use prometheus_client::metrics::gauge::Gauge;
use sluice_config::CpuShare;
use sluice_core::Compression;
use sluice_http::compress::Encoder;

use crate::shared::cpu::CpuWatcher;

/// Samples in a row below the lower mark before a step back up (1 s at the 250 ms period).
pub const CALM_SAMPLES: u8 = 4;

/// How new on-the-fly responses of a route are compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// At the configured levels.
    Configured,
    /// At each algorithm's fastest level.
    Fastest,
    /// Not at all: identity (stored variants are still served).
    Identity,
}

impl Step {
    const ALL: [Step; 3] = [Step::Configured, Step::Fastest, Step::Identity];

    fn cheaper(self) -> Self {
        match self {
            Step::Configured => Step::Fastest,
            Step::Fastest | Step::Identity => Step::Identity,
        }
    }

    fn richer(self) -> Self {
        match self {
            Step::Configured | Step::Fastest => Step::Configured,
            Step::Identity => Step::Fastest,
        }
    }

    fn index(self) -> u8 {
        match self {
            Step::Configured => 0,
            Step::Fastest => 1,
            Step::Identity => 2,
        }
    }
}

/// A route's controller state: its step, and how many samples in a row were calm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct State {
    pub step: Step,
    pub calm: u8,
}

impl State {
    pub const START: State = State {
        step: Step::Configured,
        calm: 0,
    };
}

/// The state after one sample of `permille` (of the workers' capacity) against a limit of
/// `max` permille: at or above the limit, one step cheaper at once; below the lower mark for
/// [`CALM_SAMPLES`] samples in a row, one step richer; in between, hold (and the calm count
/// starts again).
pub fn next(state: State, permille: u32, max: u32) -> State {
    if permille >= max {
        return State {
            step: state.step.cheaper(),
            calm: 0,
        };
    }
    if permille >= lower_mark(max) || state.step == Step::Configured {
        return State {
            step: state.step,
            calm: 0,
        };
    }
    let calm = state.calm.saturating_add(1);
    if calm >= CALM_SAMPLES {
        State {
            step: state.step.richer(),
            calm: 0,
        }
    } else {
        State {
            step: state.step,
            calm,
        }
    }
}

/// Below this the load counts as calm: 4/5 of the limit (64% for `max_cpu = "80%"`).
pub fn lower_mark(max: u32) -> u32 {
    max * 4 / 5
}

/// One route's controller, watching the sampler.
pub struct Adaptive {
    /// `max_cpu` in permille.
    max: u32,
    step: AtomicU8,
    calm: AtomicU8,
    /// `sluice_compress_level` of each offered algorithm, with its configured and fastest level.
    gauges: Vec<(Gauge, i64, i64)>,
}

impl Adaptive {
    /// A controller at the configured levels. `levels` are the route's (indexed by
    /// [`Compression::index`], `None` the default); `gauge` gives an algorithm's level gauge.
    pub fn new(
        max_cpu: CpuShare,
        algorithms: &[Compression],
        levels: &[Option<i32>; Compression::ALL.len()],
        gauge: impl Fn(Compression) -> Gauge,
    ) -> Self {
        let gauges = algorithms
            .iter()
            .map(|&algorithm| {
                let configured =
                    levels[algorithm.index()].unwrap_or_else(|| Encoder::default_level(algorithm));
                let configured = Encoder::clamp_level(algorithm, configured);
                let fastest = fastest_level(algorithm);
                (gauge(algorithm), i64::from(configured), i64::from(fastest))
            })
            .collect();
        let adaptive = Self {
            max: u32::from(max_cpu.percent()) * 10,
            step: AtomicU8::new(State::START.step.index()),
            calm: AtomicU8::new(State::START.calm),
            gauges,
        };
        adaptive.show(State::START.step);
        adaptive
    }

    /// The step new responses are compressed at.
    pub fn step(&self) -> Step {
        let index = self.step.load(Ordering::Relaxed);
        Step::ALL
            .into_iter()
            .find(|s| s.index() == index)
            .unwrap_or(Step::Configured)
    }

    fn show(&self, step: Step) {
        for (gauge, configured, fastest) in &self.gauges {
            gauge.set(match step {
                Step::Configured => *configured,
                Step::Fastest => *fastest,
                Step::Identity => -1,
            });
        }
    }
}

impl CpuWatcher for Adaptive {
    /// Called by the sampler only (one at a time, under its lock), so load-then-store is not a
    /// race.
    fn sampled(&self, permille: u32) {
        let state = State {
            step: self.step(),
            calm: self.calm.load(Ordering::Relaxed),
        };
        let new = next(state, permille, self.max);
        self.calm.store(new.calm, Ordering::Relaxed);
        if new.step != state.step {
            self.step.store(new.step.index(), Ordering::Relaxed);
            self.show(new.step);
            tracing::debug!(
                "max_cpu: CPU at {}.{}% of the workers, compression {:?} -> {:?}",
                permille / 10,
                permille % 10,
                state.step,
                new.step
            );
        }
    }
}

/// The level compressing the most bytes per CPU second: the bottom of the algorithm's range.
pub fn fastest_level(algorithm: Compression) -> i32 {
    i32::try_from(algorithm.levels().0).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Feed `readings` (percent) from `state` against `max` percent; the steps after each.
    fn run(mut state: State, max: u32, readings: &[u32]) -> Vec<Step> {
        readings
            .iter()
            .map(|&percent| {
                state = next(state, percent * 10, max * 10);
                state.step
            })
            .collect()
    }

    use Step::{Configured as C, Fastest as F, Identity as I};

    #[test]
    fn above_the_limit_steps_down_one_sample_at_a_time_to_identity() {
        assert_eq!(run(State::START, 80, &[50, 80, 95, 100]), [C, F, I, I]);
    }

    #[test]
    fn a_single_spike_only_reaches_the_fastest_level_and_comes_back_after_calm() {
        assert_eq!(
            run(State::START, 80, &[90, 10, 10, 10, 10, 10]),
            [F, F, F, F, C, C]
        );
    }

    #[test]
    fn recovery_needs_calm_samples_in_a_row_below_the_lower_mark() {
        let identity = State { step: I, calm: 0 };
        // 70% is below the limit but above the 64% mark: hold, and it resets the count.
        assert_eq!(
            run(identity, 80, &[60, 60, 60, 70, 60, 60, 60, 60]),
            [I, I, I, I, I, I, I, F]
        );
        // Then one more calm stretch back to the configured levels.
        let fastest = State { step: F, calm: 0 };
        assert_eq!(run(fastest, 80, &[0, 0, 0, 0]), [F, F, F, C]);
    }

    #[test]
    fn hovering_at_the_limit_does_not_flap() {
        // Alternating just above and just below the limit stays cheap.
        let readings = [81, 79, 81, 79, 81, 79, 81, 79];
        assert!(
            run(State::START, 80, &readings)[1..]
                .iter()
                .all(|&s| s != C)
        );
    }

    #[test]
    fn the_limit_is_inclusive_and_100_percent_needs_saturation() {
        assert_eq!(run(State::START, 100, &[99, 100]), [C, F]);
        assert_eq!(run(State::START, 1, &[0, 1]), [C, F]);
        assert_eq!(lower_mark(800), 640);
    }

    #[test]
    fn the_controller_shows_its_level_per_algorithm() {
        let gzip = Gauge::default();
        let br = Gauge::default();
        let mut levels = [None; Compression::ALL.len()];
        levels[Compression::GZIP.index()] = Some(6);
        let adaptive = Adaptive::new(
            CpuShare::from_percent(50).unwrap(),
            &[Compression::GZIP, Compression::BR],
            &levels,
            |a| {
                if a == Compression::GZIP {
                    gzip.clone()
                } else {
                    br.clone()
                }
            },
        );
        assert_eq!(
            (gzip.get(), br.get()),
            (6, 4),
            "configured, and br's default"
        );
        adaptive.sampled(500);
        assert_eq!(adaptive.step(), F);
        assert_eq!((gzip.get(), br.get()), (1, 0));
        adaptive.sampled(700);
        assert_eq!(adaptive.step(), I);
        assert_eq!((gzip.get(), br.get()), (-1, -1));
        for _ in 0..CALM_SAMPLES {
            adaptive.sampled(0);
        }
        assert_eq!(adaptive.step(), F);
    }

    /// A response that started compressing keeps its level to the end, however the CPU moves;
    /// the next one follows the new step.
    #[tokio::test]
    async fn a_streaming_response_keeps_the_level_it_started_with() {
        use bytes::Bytes;
        use http::header::{self, HeaderMap, HeaderValue};
        use http::{Method, Response};
        use http_body_util::BodyExt;
        use sluice_core::Body;

        use super::super::{AcceptEncoding, RouteCompression};

        let cpu = crate::shared::cpu::CpuLoad::new(Gauge::default(), 1);
        cpu.sample_for_tests(0);
        let config = sluice_config::Compress {
            algorithms: vec![Compression::GZIP],
            max_cpu: CpuShare::from_percent(50),
            ..sluice_config::Compress::default()
        };
        let route = RouteCompression::new(
            &config,
            crate::shared::metrics::Metrics::new().compress("r"),
        )
        .adapt_to_cpu(CpuShare::from_percent(50).unwrap(), &cpu, |_| {
            Gauge::default()
        });
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        let accept = AcceptEncoding::of(&headers);
        let streamed = |tx: &mut Option<tokio::sync::mpsc::Sender<Bytes>>| {
            let (sender, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
            *tx = Some(sender);
            let stream = futures_util::stream::unfold(rx, |mut rx| async move {
                let chunk = rx.recv().await?;
                Some((Ok::<_, std::io::Error>(http_body::Frame::data(chunk)), rx))
            });
            let mut response = Response::new(Body::stream(http_body_util::StreamBody::new(stream)));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            response
        };

        let mut tx = None;
        let mut first = streamed(&mut tx);
        let outcome = route.apply(&Method::GET, &accept, &mut first).await;
        assert_eq!(outcome.encoding, Some("gzip"));
        let text = "a streamed line of text\n".repeat(200);
        let sender = tx.take().unwrap();
        sender.send(Bytes::from(text.clone())).await.ok();
        // The CPU rises to identity while the first response streams.
        cpu.sample_for_tests(90);
        cpu.sample_for_tests(90);
        sender.send(Bytes::from(text.clone())).await.ok();
        drop(sender);
        let body = first.into_body().collect().await.map(|b| b.to_bytes());
        let body = body.unwrap();
        let mut decoded = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&body[..]), &mut decoded)
            .unwrap();
        assert_eq!(decoded, text.repeat(2), "one whole gzip stream");

        let mut second = streamed(&mut tx);
        let outcome = route.apply(&Method::GET, &accept, &mut second).await;
        assert_eq!((outcome.decision, outcome.encoding), ("cpu", None));
        assert_eq!(second.headers()[header::VARY], "Accept-Encoding");
    }
}
