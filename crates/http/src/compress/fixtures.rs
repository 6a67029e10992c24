//! The bodies sluice's gzip is held against zlib's on (unit tests and the `compression`
//! bench, which includes this file): the lab's 74 KB static page, the demo origin's 340 KB
//! date JSON and a 1 MiB slice of seed 004's stream, as the origin sends it (16 KiB frames).

// Test and bench code: a fixture that cannot be built is a failed run.
#![allow(clippy::expect_used)]

use bytes::Bytes;

/// The page the lab serves (`sluice bench`, seed 001's 74 KB static page).
pub fn page() -> Vec<u8> {
    sluice_bench::fixtures::page().to_vec()
}

/// `/what-date-is-it` as the demo origin answers it on 2026-11-24 (the date fixed so the bytes,
/// and zlib's sizes below, never change): 10,000 copies of one record, 340,001 bytes.
pub fn dates_json() -> Vec<u8> {
    let record = br#"{"year":2026,"month":11,"day":24}"#;
    let mut out = Vec::with_capacity(340_001);
    out.push(b'[');
    for i in 0..10_000 {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(record);
    }
    out.push(b']');
    out
}

/// The first 64 frames of seed 004's stream (`/stream?chunks=64&size=16384`, the lab's chunk
/// size), as the demo origin produces them: 1 MiB of JSON elements with word-salad padding.
pub fn stream_frames() -> Vec<Bytes> {
    use http_body_util::BodyExt;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(async {
        let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions::default());
        let request = http::Request::get("/stream?chunks=64&size=16384")
            .body(sluice_core::Body::Empty)
            .expect("a valid request");
        let mut body = origin.handle(request).await.into_body();
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.expect("the origin's stream").into_data() {
                frames.push(data);
            }
        }
        frames
    })
}

/// The three bodies by name, the stream's frames joined.
pub fn all() -> [(&'static str, Vec<u8>); 3] {
    [
        ("page-74k", page()),
        ("json-340k", dates_json()),
        ("stream-1m", stream_frames().concat()),
    ]
}
