//! Request bodies that decode to far more than they are (bombs) get 413 from a `sluice serve`
//! process whose peak memory stays bounded, and never reach the upstream whole.

use std::io::Write;

use sluice_testkit::recording::{raw_post, recording_upstream, upstream_totals};

use crate::cli::{spawn_listening, terminate};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

// The server runs as a child process (the `sluice` binary), not in the test process:
// tests run in parallel threads of one process, so the test's own VmRSS moves with whatever the
// other tests allocate, while the child's VmHWM (peak resident set) is sluice's alone.

/// Peak resident memory of process `pid`, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// One gzip member of `len` zeros; a gzip body may be a series of members (RFC 1952 §2.2), so
/// repeating it makes a bomb of any size from a few kilobytes held in memory.
fn gzip_zeros_member(len: usize) -> bytes::Bytes {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..len >> 20 {
        enc.write_all(&zeros).unwrap();
    }
    enc.finish().unwrap().into()
}

/// One zstd frame of 1 MiB that compresses about 1000:1 (zeros with a few varying bytes per
/// 4 KiB), at level 3 whose window fits the 8 MiB limit; frames may follow each other.
fn zstd_sparse_frame() -> bytes::Bytes {
    let mut block = vec![0u8; 1 << 20];
    let mut x: u32 = 12345;
    for i in (0..block.len()).step_by(4096) {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        block[i..i + 4].copy_from_slice(&x.to_le_bytes());
    }
    zstd::encode_all(&block[..], 3).unwrap().into()
}

#[tokio::test]
async fn bombs_get_413_in_bounded_memory_and_never_reach_the_upstream_whole() {
    let (upstream, accepted, mut reports) = recording_upstream().await;
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("sluice.toml");
    // `/size`: only the size limit applies, so 64 MiB of decoded zeros stream through sluice
    // before the 413 (a buffering proxy would hold them all). `/`: the default limits, where the
    // ratio stops a bomb early.
    std::fs::write(
        &config,
        format!(
            "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n\
             [[routes]]\npath_prefix = \"/size\"\n[routes.proxy]\nto = \"{upstream}\"\n\
             decompress_requests = {{ max_size = \"64MiB\", max_ratio = 1000000 }}\n\
             [[routes]]\n[routes.proxy]\nto = \"{upstream}\"\ndecompress_requests = {{}}\n"
        ),
    )
    .unwrap();
    let (child, addr) = spawn_listening(&["serve", "-c", config.to_str().unwrap()]);

    // Warm up (threads, pools, the codecs' first allocations) with a legitimate body per coding.
    let json = br#"{"warm":"up"}"#.repeat(4000);
    let legit_gzip = gzip(&json);
    let legit_zstd = zstd::encode_all(&json[..], 3).unwrap();
    for path in ["/size", "/"] {
        for (coding, body) in [("gzip", &legit_gzip), ("zstd", &legit_zstd)] {
            let body = bytes::Bytes::from(body.clone());
            let (status, reply) = raw_post(addr, path, coding, std::iter::once(body)).await;
            assert_eq!(status, 200, "{reply}");
        }
    }
    let before = peak_rss(child.id());

    // 10 GiB of zeros as gzip: 640 members of 16 MiB, about 10 MB on the wire.
    let member = gzip_zeros_member(16 << 20);
    let wire = member.len() * 640;
    assert!(wire < 20 << 20, "{wire} bytes on the wire");
    // 1:1000 zstd: 10,240 frames of 1 MiB.
    let frame = zstd_sparse_frame();
    let ratio = (1 << 20) / frame.len();
    assert!((300..=3000).contains(&ratio), "zstd ratio {ratio}");
    for path in ["/size", "/"] {
        let gzip_bomb = std::iter::repeat_n(member.clone(), 640);
        let (status, reply) = raw_post(addr, path, "gzip", gzip_bomb).await;
        assert_eq!(status, 413, "gzip bomb on {path}: {reply}");
        let zstd_bomb = std::iter::repeat_n(frame.clone(), 10_240);
        let (status, reply) = raw_post(addr, path, "zstd", zstd_bomb).await;
        assert_eq!(status, 413, "zstd bomb on {path}: {reply}");
    }
    // brotli streams cannot be chained, so this one is 128 MiB of zeros in one stream (about
    // 100 KB) with the largest window accepted (8 MiB), whose ring buffer the decoder fills.
    let br_bomb = {
        let mut out = Vec::new();
        let mut enc = brotli::CompressorWriter::new(&mut out, 1 << 16, 1, 23);
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..128 {
            enc.write_all(&zeros).unwrap();
        }
        drop(enc);
        bytes::Bytes::from(out)
    };
    assert_eq!(br_bomb[0] & 0b1111, 0b1101, "window of 2^23");
    for path in ["/size", "/"] {
        let (status, reply) = raw_post(addr, path, "br", std::iter::once(br_bomb.clone())).await;
        assert_eq!(status, 413, "brotli bomb on {path}: {reply}");
    }
    let grown = peak_rss(child.id()).saturating_sub(before);
    eprintln!(
        "peak RSS {} KiB before the bombs, +{} KiB after",
        before >> 10,
        grown >> 10
    );
    assert!(
        grown < 16 << 20,
        "sluice's peak RSS grew by {} KiB",
        grown >> 10
    );

    // Stopping sluice closes its pooled upstream connections, so every report comes in.
    assert!(terminate(child));
    let seen = upstream_totals(&accepted, &mut reports).await;
    assert_eq!(
        seen.complete, 4,
        "only the warm-up bodies may arrive whole: {seen:?}"
    );
    // The `/size` bombs did reach the upstream (their first 64 MiB streamed there).
    assert!(seen.requests >= 4 + 3, "{seen:?}");
}
