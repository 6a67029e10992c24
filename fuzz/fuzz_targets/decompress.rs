//! Any bytes as a request body in any stack of content codings: decoding ends in data or an
//! error, never a panic or a hang, and never yields a byte past `max_size`. Run with
//! `cargo fuzz run decompress` (nightly) from `fuzz/`; the stable stand-in is
//! `crates/http/src/decompress/proptest.rs`.

#![no_main]

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::Body;
use http_body_util::Full;
use libfuzzer_sys::fuzz_target;
use sluice_core::Compression;
use sluice_http::decompress::{DecompressBody, DecompressLimits};

const MAX_SIZE: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    // The first byte picks one or two codings; the rest is the body.
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let all = Compression::ALL;
    let mut codings = vec![all[usize::from(pick) % all.len()]];
    if pick & 0x80 != 0 {
        codings.push(all[usize::from(pick >> 2) % all.len()]);
    }
    let limits = DecompressLimits {
        max_size: MAX_SIZE,
        max_ratio: 1000,
    };
    let inner = Full::new(Bytes::copy_from_slice(body));
    let Ok(mut decoded) = DecompressBody::new(inner, &codings, limits) else {
        return;
    };
    let mut cx = Context::from_waker(Waker::noop());
    let mut total = 0u64;
    loop {
        match Pin::new(&mut decoded).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => {
                total += frame.into_data().map_or(0, |d| d.len() as u64);
                assert!(total <= MAX_SIZE);
            }
            Poll::Ready(Some(Err(_)) | None) => return,
            Poll::Pending => panic!("an in-memory body pended"),
        }
    }
});
