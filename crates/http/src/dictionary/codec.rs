//! The `dcb` and `dcz` content codings (RFC 9842 §4, §5): a fixed header naming the
//! dictionary by its SHA-256, then a brotli stream or a zstd frame compressed with the
//! dictionary as *raw content* (RFC 9842 §2.1.4: `raw` is the only dictionary type).
//!
//! - `dcb` (§4): the 4 bytes `FF 44 43 42`, the 32-byte hash, then a brotli stream whose
//!   window is at most 16 MiB. The encoder (the `brotli` crate) puts the dictionary before the
//!   input in its window, which a decoder attaching the same bytes as a raw shared dictionary
//!   reads alike (a back-reference beyond the output so far lands in the dictionary), as long
//!   as dictionary and body fit the window together: [`Dictionary`]s are bounded far below it.
//! - `dcz` (§5): an 8-byte zstd skippable frame header (`5E 2A 4D 18`, size 32), the hash as
//!   its content, then one zstd frame. Its window must stay below max(8 MiB, 1.25 × the
//!   dictionary), at most 128 MiB; sluice sets it to the smallest power of two that covers the
//!   body (so the whole dictionary stays reachable: it is usable only while the input fits
//!   the window) within that limit.
//!
//! A dictionary is *raw content* even when its first bytes are zstd's dictionary magic
//! (`37 A4 30 EC`): zstd's prepared dictionaries (`ZSTD_createCDict`) would parse such bytes as
//! a formatted zstd dictionary, so those are referenced as a prefix instead, which zstd always
//! reads as raw content. Other dictionaries are prepared once (a `CDict`, kept in the
//! [`Dictionary`]) and reused for every delta made with them.

use std::io;
use std::sync::OnceLock;

use brotli::enc::StandardAlloc;
use brotli::enc::encode::{
    BrotliEncoderDestroyInstance, BrotliEncoderOperation, BrotliEncoderParameter,
    BrotliEncoderStateStruct,
};
use bytes::Bytes;
use sluice_core::DictionaryCoding;
use zstd::zstd_safe::{CCtx, CDict, CParameter};

use super::DictionaryHash;

/// The first bytes of a `dcb` body, before the hash (RFC 9842 §4).
pub const DCB_MAGIC: [u8; 4] = [0xff, 0x44, 0x43, 0x42];
/// The first bytes of a `dcz` body: a skippable frame (magic `0x184D2A5E`) of 32 bytes, the
/// hash (RFC 9842 §5).
pub const DCZ_MAGIC: [u8; 8] = [0x5e, 0x2a, 0x4d, 0x18, 0x20, 0x00, 0x00, 0x00];
/// zstd's magic number for a formatted dictionary (RFC 8878 §5), little-endian.
pub const ZSTD_DICTIONARY_MAGIC: [u8; 4] = [0x37, 0xa4, 0x30, 0xec];

/// The largest brotli window `dcb` allows: 16 MiB (RFC 9842 §4), window bits 24.
const BROTLI_MAX_LGWIN: u32 = 24;

/// A dictionary: its bytes, its hash, and zstd's prepared form, made on first use.
pub struct Dictionary {
    bytes: Bytes,
    hash: DictionaryHash,
    /// The `CDict` and the level it was prepared at; `None` inside when these bytes must not be
    /// prepared (zstd's magic) or preparing failed: a prefix is used then.
    zstd: OnceLock<Option<(i32, CDict<'static>)>>,
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionary")
            .field("len", &self.bytes.len())
            .field("hash", &self.hash)
            .finish()
    }
}

impl Dictionary {
    /// A dictionary of `bytes` (the decoded content of the response it came from).
    pub fn new(bytes: Bytes) -> Self {
        let hash = DictionaryHash::of(&bytes);
        Self {
            bytes,
            hash,
            zstd: OnceLock::new(),
        }
    }

    pub fn hash(&self) -> DictionaryHash {
        self.hash
    }

    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Whether zstd would read these bytes as a formatted dictionary if prepared.
    pub fn has_zstd_magic(&self) -> bool {
        self.bytes.starts_with(&ZSTD_DICTIONARY_MAGIC)
    }

    /// zstd's prepared form for `level`, made once.
    fn prepared(&self, level: i32) -> Option<&CDict<'static>> {
        let prepared = self.zstd.get_or_init(|| {
            if self.has_zstd_magic() {
                return None;
            }
            // `CDict::try_create` copies the bytes; they are raw content, since they do not
            // start with the magic (zstd's "auto" content type).
            CDict::try_create(&self.bytes, level).map(|cdict| (level, cdict))
        });
        match prepared {
            Some((prepared_level, cdict)) if *prepared_level == level => Some(cdict),
            _ => None,
        }
    }
}

/// `data` encoded in `coding` with `dictionary` at `level` (brotli quality 0–11 for `dcb`,
/// zstd 1–19 for `dcz`; clamped), header included: the whole body of a `dcb`/`dcz` response.
pub fn encode(
    coding: DictionaryCoding,
    dictionary: &Dictionary,
    data: &[u8],
    level: i32,
) -> io::Result<Bytes> {
    let mut out = Vec::with_capacity(data.len() / 8 + 64);
    match coding {
        DictionaryCoding::Dcb => {
            out.extend_from_slice(&DCB_MAGIC);
            out.extend_from_slice(&dictionary.hash.0);
            brotli_with(dictionary, data, level.clamp(0, 11), &mut out)?;
        }
        DictionaryCoding::Dcz => {
            out.extend_from_slice(&DCZ_MAGIC);
            out.extend_from_slice(&dictionary.hash.0);
            zstd_with(dictionary, data, level.clamp(1, 19), &mut out)?;
        }
    }
    Ok(Bytes::from(out))
}

/// The zstd window log for a body of `len` bytes with a dictionary of `dict_len`: the smallest
/// window covering the body (at least 1 KiB), below RFC 9842 §5's limit of max(8 MiB, 1.25 ×
/// the dictionary), itself at most 128 MiB.
pub fn zstd_window_log(dict_len: usize, len: usize) -> u32 {
    let limit = (dict_len.saturating_add(dict_len / 4)).clamp(8 << 20, 128 << 20);
    let max_log = usize::BITS - 1 - limit.leading_zeros();
    let need_log = usize::BITS - len.max(1).saturating_sub(1).leading_zeros();
    need_log.clamp(10, max_log)
}

fn zstd_with(
    dictionary: &Dictionary,
    data: &[u8],
    level: i32,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let mut cctx = CCtx::try_create().ok_or_else(|| io::Error::other("no zstd context"))?;
    let window_log = zstd_window_log(dictionary.len(), data.len());
    let set = |cctx: &mut CCtx<'_>, param| {
        cctx.set_parameter(param)
            .map(drop)
            .map_err(|code| io::Error::other(zstd::zstd_safe::get_error_name(code)))
    };
    set(&mut cctx, CParameter::CompressionLevel(level))?;
    set(&mut cctx, CParameter::ContentSizeFlag(true))?;
    match dictionary.prepared(level) {
        Some(cdict) => cctx.ref_cdict(cdict),
        None => cctx.ref_prefix(&dictionary.bytes[..]),
    }
    .map_err(|code| io::Error::other(zstd::zstd_safe::get_error_name(code)))?;
    // Set after the dictionary: a prepared dictionary brings its own parameters, and the
    // window must be this one.
    set(&mut cctx, CParameter::WindowLog(window_log))?;
    // zstd writes a `Vec` from its start, not after its contents: a frame buffer of its own.
    let mut frame = Vec::with_capacity(zstd::zstd_safe::compress_bound(data.len()));
    cctx.compress2(&mut frame, data)
        .map_err(|code| io::Error::other(zstd::zstd_safe::get_error_name(code)))?;
    out.extend_from_slice(&frame);
    Ok(())
}

/// Owns a brotli state and releases it the way brotli's own writer does.
struct Brotli(BrotliEncoderStateStruct<StandardAlloc>);

impl Drop for Brotli {
    fn drop(&mut self) {
        BrotliEncoderDestroyInstance(&mut self.0);
    }
}

fn brotli_with(
    dictionary: &Dictionary,
    data: &[u8],
    quality: i32,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let total = dictionary.len() + data.len() + 16;
    let lgwin = (usize::BITS - total.saturating_sub(1).leading_zeros()).clamp(18, BROTLI_MAX_LGWIN);
    if dictionary.len() + 16 > 1 << lgwin {
        // The encoder would keep only the dictionary's tail; callers bound dictionaries far
        // below 16 MiB, so this is a misuse, not a request to serve.
        return Err(io::Error::other("dictionary too large for a dcb window"));
    }
    let mut state = Brotli(BrotliEncoderStateStruct::new(StandardAlloc::default()));
    let s = &mut state.0;
    s.set_parameter(
        BrotliEncoderParameter::BROTLI_PARAM_QUALITY,
        u32::try_from(quality).unwrap_or(11),
    );
    s.set_parameter(BrotliEncoderParameter::BROTLI_PARAM_LGWIN, lgwin);
    s.set_parameter(
        BrotliEncoderParameter::BROTLI_PARAM_SIZE_HINT,
        u32::try_from(data.len()).unwrap_or(u32::MAX),
    );
    s.set_custom_dictionary(dictionary.len(), &dictionary.bytes);
    let mut nop =
        |_: &mut brotli::interface::PredictionModeContextMap<brotli::InputReferenceMut>,
         _: &mut [brotli::interface::StaticCommand],
         _: brotli::interface::InputPair,
         _: &mut StandardAlloc| ();
    let mut avail_in = data.len();
    let mut in_offset = 0;
    let mut buf = vec![0u8; 64 * 1024];
    while !s.is_finished() {
        let mut avail_out = buf.len();
        let mut out_offset = 0;
        let ok = s.compress_stream(
            BrotliEncoderOperation::BROTLI_OPERATION_FINISH,
            &mut avail_in,
            data,
            &mut in_offset,
            &mut avail_out,
            &mut buf,
            &mut out_offset,
            &mut None,
            &mut nop,
        );
        if !ok {
            return Err(io::Error::other("brotli encoder rejected its input"));
        }
        out.extend_from_slice(&buf[..out_offset]);
    }
    Ok(())
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
