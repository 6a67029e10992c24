//! Decoders that are not sluice's own: a compressed body must decode to the original bytes with
//! an implementation written independently of the encoder that made it, so that a bug shared by
//! an encoder and its own decoder cannot hide. All are built by cargo (no command-line tool):
//!
//! - `br`: the reference C brotli (google/brotli), vendored and compiled with the system C
//!   compiler by `brotlic-sys`; sluice encodes with the `brotli` crate, Dropbox's Rust port.
//! - `zstd`: `ruzstd`, a decoder written in Rust from the format's specification; sluice encodes
//!   with the C libzstd (`zstd` crate).
//! - `gzip`, `deflate` (zlib): `miniz_oxide`'s inflate (a Rust port of miniz), with the gzip
//!   framing (RFC 1952) and its CRC-32 read here; sluice encodes with flate2 on zlib-rs (a Rust
//!   port of zlib).
//!
//! Each is as strict as a careful client: exactly one gzip member, zlib stream, brotli stream or
//! zstd frame with nothing after it, checksums checked, and zstd windows up to 8 MiB only (RFC
//! 9659: clients may refuse more).
//!
//! sluice-http's `tests/compress.rs` includes this file by path (sluice-http is below the server
//! this kit starts, so it cannot depend on the kit): it uses only std and the three crates.
#![allow(clippy::panic)]

use std::io::Read as _;

/// Decode `data` in the content coding `coding` (`gzip`, `x-gzip`, `deflate`, `br`, `zstd`),
/// panicking with the reason if it is not exactly one valid stream.
pub fn decode(coding: &str, data: &[u8]) -> Vec<u8> {
    match coding {
        "gzip" | "x-gzip" => gunzip(data),
        "deflate" => unzlib(data),
        "br" => unbrotli(data),
        "zstd" => unzstd(data),
        other => panic!("no independent decoder for the coding {other:?}"),
    }
}

/// One gzip member (RFC 1952): header, deflate data, CRC-32 and length of the original.
fn gunzip(data: &[u8]) -> Vec<u8> {
    assert!(data.len() >= 18, "gzip: {} bytes is too short", data.len());
    assert_eq!(
        data[..3],
        [0x1f, 0x8b, 8],
        "gzip: not a deflate gzip member"
    );
    let flags = data[3];
    assert_eq!(flags & 0xe0, 0, "gzip: reserved flag bits set");
    let mut at = 10;
    if flags & 0x04 != 0 {
        // FEXTRA: a length, then that many bytes.
        at += 2 + usize::from(u16::from_le_bytes([data[at], data[at + 1]]));
    }
    for (flag, field) in [(0x08, "FNAME"), (0x10, "FCOMMENT")] {
        if flags & flag != 0 {
            let Some(len) = data[at..].iter().position(|&b| b == 0) else {
                panic!("gzip: {field} is not terminated");
            };
            at += len + 1;
        }
    }
    if flags & 0x02 != 0 {
        // FHCRC: the low 16 bits of the header's CRC-32.
        let stored = u16::from_le_bytes([data[at], data[at + 1]]);
        assert_eq!(crc32(&data[..at]) as u16, stored, "gzip: header CRC");
        at += 2;
    }
    let (out, used) = inflate(&data[at..], 0, "gzip");
    let trailer = &data[at + used..];
    assert_eq!(
        trailer.len(),
        8,
        "gzip: {} bytes after the deflate data, not the 8-byte trailer alone (cut, or a second member?)",
        trailer.len()
    );
    let crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    let size = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
    assert_eq!(crc32(&out), crc, "gzip: CRC-32 of the decoded data");
    assert_eq!(out.len() as u32, size, "gzip: ISIZE");
    out
}

/// One zlib stream (RFC 1950, HTTP's `deflate`); miniz checks the header and the Adler-32.
fn unzlib(data: &[u8]) -> Vec<u8> {
    use miniz_oxide::inflate::core::inflate_flags::TINFL_FLAG_PARSE_ZLIB_HEADER;
    let (out, used) = inflate(data, TINFL_FLAG_PARSE_ZLIB_HEADER, "deflate");
    assert_eq!(used, data.len(), "deflate: bytes after the zlib stream");
    out
}

/// Inflate one stream at the start of `input`: the output and the input bytes it used.
fn inflate(input: &[u8], flags: u32, coding: &str) -> (Vec<u8>, usize) {
    use miniz_oxide::inflate::TINFLStatus;
    use miniz_oxide::inflate::core::inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
    use miniz_oxide::inflate::core::{DecompressorOxide, decompress};
    let flags = flags | TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
    let mut state = Box::<DecompressorOxide>::default();
    let mut out = vec![0; 4 * input.len() + 1024];
    let (mut used, mut written) = (0, 0);
    loop {
        let (status, read, wrote) =
            decompress(&mut state, &input[used..], &mut out, written, flags);
        used += read;
        written += wrote;
        match status {
            TINFLStatus::Done => {
                out.truncate(written);
                return (out, used);
            }
            TINFLStatus::HasMoreOutput => out.resize(2 * out.len(), 0),
            failed => panic!("{coding}: inflate failed after {used} bytes: {failed:?}"),
        }
    }
}

/// CRC-32 (ISO-HDLC, as gzip uses it), bit by bit: short, and shares no code with zlib-rs.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// One brotli stream, decoded by the reference C decoder.
fn unbrotli(data: &[u8]) -> Vec<u8> {
    let mut reader = brotlic::DecompressorReader::new(data);
    let mut out = Vec::new();
    if let Err(e) = reader.read_to_end(&mut out) {
        panic!("br: {e}");
    }
    let (rest, _) = reader.into_parts();
    assert!(rest.is_empty(), "br: {} bytes after the stream", rest.len());
    out
}

/// One zstd frame with a window of at most 8 MiB; its content checksum checked if it has one.
fn unzstd(data: &[u8]) -> Vec<u8> {
    use ruzstd::decoding::StreamingDecoder;
    let mut rest = data;
    let mut decoder = StreamingDecoder::new_with_max_window_size(&mut rest, 8 << 20)
        .unwrap_or_else(|e| panic!("zstd: {e}"));
    let mut out = Vec::new();
    if let Err(e) = decoder.read_to_end(&mut out) {
        panic!("zstd: {e}");
    }
    let frame = decoder.into_frame_decoder();
    if let Some(stored) = frame.get_checksum_from_data() {
        assert_eq!(
            frame.get_calculated_checksum(),
            Some(stored),
            "zstd: content checksum"
        );
    }
    assert!(
        rest.is_empty(),
        "zstd: {} bytes after the frame",
        rest.len()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn a_second_gzip_member_is_refused() {
        // `printf a | gzip -n`, twice.
        let member = [
            0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0x4b, 0x04, 0, 0x43, 0xbe, 0xb7, 0xe8, 1, 0, 0, 0,
        ];
        assert_eq!(decode("gzip", &member), b"a");
        let two = [&member[..], &member[..]].concat();
        assert!(std::panic::catch_unwind(|| decode("gzip", &two)).is_err());
    }
}
