//! Streaming response compression end to end: every coding decodes with the crates and with a
//! decoder that is not the encoder's code (`independent`: the reference C brotli, ruzstd,
//! miniz_oxide), as one stream, flushed when the upstream pauses, after the delay, or per event.

// Helper functions of this test crate are outside #[test] functions, where clippy.toml's
// allow-*-in-tests does not reach.
#![allow(clippy::unwrap_used)]

// The test kit's decoders; the kit itself is out of reach (it depends on sluice-http).
#[path = "../../testkit/src/independent.rs"]
mod independent;
#[path = "compress/support.rs"]
mod support;

use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant as StdInstant};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use sluice_core::Compression;
use sluice_http::compress::{CompressBody, CompressOptions, Encoder};
use support::{ALL, ChannelBody, ReadyBody, StreamDecoder, decode};
use tokio::sync::mpsc;

fn compress<B>(alg: Compression, inner: B, options: CompressOptions) -> CompressBody<B> {
    CompressBody::new(inner, Encoder::new(alg, None).unwrap(), options)
}

/// All data frames concatenated, plus the trailers if any.
async fn collect<B>(mut body: B) -> (Vec<u8>, Option<HeaderMap>)
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Debug,
{
    let (mut data, mut trailers) = (Vec::new(), None);
    while let Some(frame) = body.frame().await {
        match frame.unwrap().into_data() {
            Ok(d) => data.extend_from_slice(&d),
            Err(f) => trailers = f.into_trailers().ok(),
        }
    }
    (data, trailers)
}

#[tokio::test]
async fn fixture_in_uneven_chunks_decodes_with_crates_and_independent_decoders() {
    let fixture = support::json_fixture();
    for alg in ALL {
        // A producer task makes the channel run dry now and then: pending flushes happen.
        let (tx, rx) = mpsc::unbounded_channel();
        let chunks = support::uneven_chunks(&fixture);
        tokio::spawn(async move {
            for c in chunks {
                tx.send(Ok(Frame::data(c))).unwrap();
                tokio::task::yield_now().await;
            }
        });
        let (streamed, _) = collect(compress(alg, ChannelBody(rx), Default::default())).await;
        // An always-ready body: no pending flushes at all.
        let ready = ReadyBody {
            chunks: support::uneven_chunks(&fixture).into(),
            endless: None,
        };
        let (whole, _) = collect(compress(alg, ready, Default::default())).await;
        for data in [&streamed, &whole] {
            assert_eq!(decode(alg, data), fixture, "{alg:?}");
            let independent = independent::decode(alg.as_str(), data);
            assert_eq!(independent, fixture, "{alg:?}, independent decoder");
        }
        assert!(
            whole.len() < fixture.len() / 3,
            "{alg:?}: {} bytes",
            whole.len()
        );
    }
}

#[tokio::test]
async fn the_independent_decoders_refuse_a_cut_stream_and_bytes_after_one() {
    let fixture = support::json_fixture();
    for alg in ALL {
        let ready = ReadyBody {
            chunks: [Bytes::from(fixture.clone())].into(),
            endless: None,
        };
        let (data, _) = collect(compress(alg, ready, Default::default())).await;
        let cut = &data[..data.len() - 1];
        let extended = [&data[..], b"x"].concat();
        for bad in [cut, &extended[..]] {
            let decoded = std::panic::catch_unwind(|| independent::decode(alg.as_str(), bad));
            assert!(decoded.is_err(), "{alg:?}: {} bytes accepted", bad.len());
        }
    }
}

#[tokio::test]
async fn a_paused_upstream_gets_its_bytes_to_the_client_before_more_arrive() {
    for alg in ALL {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut body = compress(alg, ChannelBody(rx), Default::default());
        let mut decoder = StreamDecoder::new(alg);
        tx.send(Ok(Frame::data(Bytes::from_static(
            b"{\"first\": \"chunk\"}\n",
        ))))
        .unwrap();
        // Chunk 2 is not sent yet: this frame can only come from a flush on Pending.
        let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(decoder.feed(&frame), b"{\"first\": \"chunk\"}\n", "{alg:?}");

        tx.send(Ok(Frame::data(Bytes::from_static(b"{\"second\": 2}"))))
            .unwrap();
        drop(tx);
        let (rest, _) = collect(body).await;
        assert_eq!(decoder.feed(&rest), b"{\"second\": 2}", "{alg:?}");
    }
}

/// [`ChannelBody`] announcing an exact length, as a proxied response with `Content-Length`.
struct KnownLength(ChannelBody, u64);

impl Body for KnownLength {
    type Data = Bytes;
    type Error = sluice_core::BoxError;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.0).poll_frame(cx)
    }
    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.1)
    }
}

#[tokio::test(start_paused = true)]
async fn a_paused_body_of_known_length_is_flushed_at_the_delay_not_at_the_pause() {
    let delay = Duration::from_millis(50);
    let first = b"{\"first\": \"half of one document\",";
    for alg in ALL {
        let (tx, rx) = mpsc::unbounded_channel();
        let options = CompressOptions {
            flush_delay: delay,
            event_stream: false,
        };
        let mut body = compress(alg, KnownLength(ChannelBody(rx), 64), options);
        tx.send(Ok(Frame::data(Bytes::from_static(first)))).unwrap();
        let start = tokio::time::Instant::now();
        // The inner body stays paused: only the delay can flush (virtual time auto-advances).
        let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
        let elapsed = start.elapsed();
        assert!(
            elapsed >= delay,
            "{alg:?}: flushed after {elapsed:?}, at the pause"
        );
        let mut decoder = StreamDecoder::new(alg);
        assert_eq!(decoder.feed(&frame), first, "{alg:?}");
        drop(tx);
        let (rest, _) = collect(body).await;
        assert!(decoder.feed(&rest).is_empty(), "{alg:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_busy_upstream_is_flushed_no_later_than_the_delay() {
    let delay = Duration::from_millis(50);
    let line = Bytes::from_static(b"{\"tick\":1}\n");
    for alg in ALL {
        let inner = ReadyBody {
            chunks: Default::default(),
            endless: Some(line.clone()),
        };
        let options = CompressOptions {
            flush_delay: delay,
            event_stream: false,
        };
        let mut body = compress(alg, inner, options);
        let start = tokio::time::Instant::now();
        let frame = loop {
            // One poll per millisecond of virtual time; the body never returns Pending itself.
            let polled = poll_fn(|cx| Poll::Ready(Pin::new(&mut body).poll_frame(cx))).await;
            if let Poll::Ready(frame) = polled {
                break frame.unwrap().unwrap().into_data().unwrap();
            }
            tokio::time::advance(Duration::from_millis(1)).await;
        };
        // Not earlier either: nothing but the timer flushes an always-ready body.
        let elapsed = start.elapsed();
        assert!(
            elapsed <= delay && elapsed >= delay / 2,
            "{alg:?}: first frame after {elapsed:?}"
        );
        let decoded = StreamDecoder::new(alg).feed(&frame);
        assert!(!decoded.is_empty(), "{alg:?}");
        assert!(
            decoded.chunks(line.len()).all(|c| c == line),
            "{alg:?} {} {}",
            decoded.len(),
            frame.len()
        );
    }
}

#[tokio::test]
async fn event_streams_and_zero_delay_flush_every_chunk() {
    let events: Vec<Bytes> = (0..5)
        .map(|i| Bytes::from(format!("data: event {i}\n\n")))
        .collect();
    let options = [
        CompressOptions {
            flush_delay: Duration::from_secs(3600),
            event_stream: true,
        },
        CompressOptions {
            flush_delay: Duration::ZERO,
            event_stream: false,
        },
    ];
    for alg in ALL {
        for options in options {
            // Always ready: only the per-chunk policy can split the output.
            let inner = ReadyBody {
                chunks: events.clone().into(),
                endless: None,
            };
            let mut body = compress(alg, inner, options);
            let mut decoder = StreamDecoder::new(alg);
            for event in &events {
                let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
                assert_eq!(decoder.feed(&frame), event.as_ref(), "{alg:?} {options:?}");
            }
            let (end, _) = collect(body).await;
            assert!(decoder.feed(&end).is_empty());
        }
    }
}

#[tokio::test]
async fn an_empty_body_is_a_valid_empty_stream() {
    for alg in ALL {
        let inner = ReadyBody {
            chunks: Default::default(),
            endless: None,
        };
        let (data, _) = collect(compress(alg, inner, Default::default())).await;
        assert!(
            !data.is_empty(),
            "{alg:?}: a stream needs its header and end marker"
        );
        assert!(decode(alg, &data).is_empty());
        assert!(
            independent::decode(alg.as_str(), &data).is_empty(),
            "{alg:?}"
        );
    }
}

#[tokio::test]
async fn trailers_follow_the_finished_stream() {
    for alg in ALL {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", "0".parse().unwrap());
        tx.send(Ok(Frame::data(Bytes::from_static(b"payload"))))
            .unwrap();
        tx.send(Ok(Frame::trailers(trailers.clone()))).unwrap();
        drop(tx);
        let (data, got) = collect(compress(alg, ChannelBody(rx), Default::default())).await;
        assert_eq!(decode(alg, &data), b"payload");
        assert_eq!(got, Some(trailers), "{alg:?}");
    }
}

#[tokio::test]
async fn an_inner_error_propagates() {
    for alg in ALL {
        let (tx, rx) = mpsc::unbounded_channel();
        tx.send(Ok(Frame::data(Bytes::from_static(b"partial"))))
            .unwrap();
        tx.send(Err("upstream reset".into())).unwrap();
        let mut body = compress(alg, ChannelBody(rx), Default::default());
        let error = loop {
            match body.frame().await {
                Some(Ok(_)) => continue,
                Some(Err(e)) => break e,
                None => panic!("{alg:?}: error swallowed"),
            }
        };
        assert_eq!(error.to_string(), "upstream reset");
        assert!(
            body.frame().await.is_none(),
            "{alg:?}: nothing after the error"
        );
    }
}

/// Throughput of each codec on the fixture. Measured, never asserted:
/// `cargo test --release -p sluice-http --test compress -- --ignored --nocapture`.
#[test]
#[ignore = "performance measurement; run by hand in release mode"]
fn throughput() {
    let fixture = support::json_fixture();
    let runs: [(Compression, &[i32]); 3] = [
        (Compression::GZIP, &[1, 2, 4, 6, 9]),
        (Compression::BR, &[4, 11]),
        (Compression::ZSTD, &[1, 3]),
    ];
    for (alg, levels) in runs {
        for &level in levels {
            let mut out = bytes::BytesMut::new();
            let rounds = if level >= 9 { 10 } else { 50 };
            let start = StdInstant::now();
            for _ in 0..rounds {
                out.clear();
                let mut encoder = Encoder::new(alg, Some(level)).unwrap();
                for chunk in fixture.chunks(16 * 1024) {
                    encoder.write(chunk, &mut out).unwrap();
                }
                encoder.finish(&mut out).unwrap();
            }
            let secs = start.elapsed().as_secs_f64();
            let mbps = (fixture.len() * rounds) as f64 / secs / 1e6;
            let ratio = fixture.len() as f64 / out.len() as f64;
            println!(
                "{:<5} level {level:>2}: {mbps:>7.1} MB/s, ratio {ratio:.2}",
                alg.as_str()
            );
        }
    }
}
