//! The disk tier's file names and headers (the layout is described in [`super`]).
//!
//! Headers are fixed-size, little-endian, and start with a magic and a version, so a file of
//! another program or of an older format is recognised and dropped instead of misread.

use std::path::{Path, PathBuf};

use crate::storage::ObjectId;

/// First bytes of a meta file.
pub(super) const META_MAGIC: [u8; 8] = *b"SLCMETA\0";
/// First bytes of a body file.
pub(super) const BODY_MAGIC: [u8; 8] = *b"SLCBODY\0";
/// Bumped when either header or the layout changes; files of another version are dropped.
pub(super) const VERSION: u32 = 1;

/// magic 8, version 4, meta length 4, id 16, generation 8, body length 8.
pub(super) const META_HEADER_LEN: usize = 48;
/// magic 8, version 4, reserved 4, id 16, generation 8.
pub(super) const BODY_HEADER_LEN: usize = 40;

/// Usage is counted in filesystem blocks: a 100-byte object still takes a block per file, and a
/// budget of apparent sizes would let a cache of small objects overrun its disk several times.
const BLOCK: u64 = 4096;

/// What a meta file's header says: which object, which body file, how long each part is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MetaHeader {
    pub(super) id: ObjectId,
    pub(super) generation: u64,
    pub(super) body_len: u64,
    pub(super) meta_len: u32,
}

impl MetaHeader {
    pub(super) fn encode(&self) -> [u8; META_HEADER_LEN] {
        let mut out = [0u8; META_HEADER_LEN];
        out[0..8].copy_from_slice(&META_MAGIC);
        out[8..12].copy_from_slice(&VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&self.meta_len.to_le_bytes());
        out[16..32].copy_from_slice(&self.id.0);
        out[32..40].copy_from_slice(&self.generation.to_le_bytes());
        out[40..48].copy_from_slice(&self.body_len.to_le_bytes());
        out
    }

    /// `None` for anything but a header of this version.
    pub(super) fn decode(buf: &[u8]) -> Option<Self> {
        let buf: &[u8; META_HEADER_LEN] = buf.get(..META_HEADER_LEN)?.try_into().ok()?;
        if buf[0..8] != META_MAGIC || u32_at(buf, 8) != VERSION {
            return None;
        }
        Some(MetaHeader {
            meta_len: u32_at(buf, 12),
            id: ObjectId(buf[16..32].try_into().ok()?),
            generation: u64_at(buf, 32),
            body_len: u64_at(buf, 40),
        })
    }

    /// The exact length of the meta file this header starts.
    pub(super) fn file_len(&self) -> u64 {
        META_HEADER_LEN as u64 + u64::from(self.meta_len)
    }
}

pub(super) fn body_header(id: ObjectId, generation: u64) -> [u8; BODY_HEADER_LEN] {
    let mut out = [0u8; BODY_HEADER_LEN];
    out[0..8].copy_from_slice(&BODY_MAGIC);
    out[8..12].copy_from_slice(&VERSION.to_le_bytes());
    out[16..32].copy_from_slice(&id.0);
    out[32..40].copy_from_slice(&generation.to_le_bytes());
    out
}

pub(super) fn body_file_len(body_len: u64) -> u64 {
    BODY_HEADER_LEN as u64 + body_len
}

/// The disk space an object takes, both files rounded up to whole blocks.
pub(super) fn disk_bytes(meta_len: u64, body_len: u64) -> u64 {
    let blocks = |len: u64| len.div_ceil(BLOCK).max(1) * BLOCK;
    blocks(META_HEADER_LEN as u64 + meta_len).saturating_add(blocks(body_file_len(body_len)))
}

fn u32_at(buf: &[u8; META_HEADER_LEN], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(word)
}

fn u64_at(buf: &[u8; META_HEADER_LEN], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(word)
}

/// `root/a/bc/`: the first hex digit, then the next two (nginx's `levels=1:2`): 4096 leaf
/// directories, so a million objects make about 500 files per directory.
pub(super) fn leaf_dir(root: &Path, id: ObjectId) -> PathBuf {
    let hex = id.to_hex();
    root.join(&hex[0..1]).join(&hex[1..3])
}

pub(super) fn meta_path(root: &Path, id: ObjectId) -> PathBuf {
    leaf_dir(root, id).join(meta_name(id))
}

pub(super) fn body_path(root: &Path, id: ObjectId, generation: u64) -> PathBuf {
    leaf_dir(root, id).join(body_name(id, generation))
}

pub(super) fn meta_name(id: ObjectId) -> String {
    format!("{}.m", id.to_hex())
}

pub(super) fn body_name(id: ObjectId, generation: u64) -> String {
    format!("{}-{generation:016x}.b", id.to_hex())
}

/// Temporary files start with this; whatever carries it at start-up is a crash's leftover.
pub(super) const TEMP_PREFIX: &str = ".tmp-";

/// A temp file beside the object's final files (a rename is atomic only within one filesystem),
/// unique per `nonce`.
pub(super) fn temp_path(root: &Path, id: ObjectId, nonce: u64) -> PathBuf {
    leaf_dir(root, id).join(format!("{TEMP_PREFIX}{}-{nonce:016x}", id.to_hex()))
}

/// What a directory entry's name says it is.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum FileName {
    Meta(ObjectId),
    Body(ObjectId, u64),
    Temp,
    /// Not a name this tier writes: left alone.
    Other,
}

impl FileName {
    pub(super) fn parse(name: &str) -> Self {
        if name.starts_with(TEMP_PREFIX) {
            return FileName::Temp;
        }
        if let Some(hex) = name.strip_suffix(".m") {
            return ObjectId::from_hex(hex).map_or(FileName::Other, FileName::Meta);
        }
        let body = name.strip_suffix(".b").and_then(|stem| {
            let (hex, generation) = stem.split_once('-')?;
            let generation = u64::from_str_radix(generation, 16).ok()?;
            Some(FileName::Body(ObjectId::from_hex(hex)?, generation))
        });
        body.unwrap_or(FileName::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_header_round_trips_and_rejects_foreign_bytes() {
        let header = MetaHeader {
            id: ObjectId([7; 16]),
            generation: 0xdead_beef,
            body_len: 5 << 20,
            meta_len: 300,
        };
        assert_eq!(MetaHeader::decode(&header.encode()), Some(header));
        let mut other_version = header.encode();
        other_version[8] = 2;
        assert_eq!(MetaHeader::decode(&other_version), None);
        assert_eq!(
            MetaHeader::decode(b"GIF89a and then some bytes, long enough to parse"),
            None
        );
        assert_eq!(MetaHeader::decode(&header.encode()[..47]), None);
    }

    #[test]
    fn names_parse_back() {
        let id = ObjectId([0xab; 16]);
        let root = Path::new("/c");
        let name = |path: PathBuf| path.file_name().unwrap().to_str().unwrap().to_owned();
        assert_eq!(
            FileName::parse(&name(meta_path(root, id))),
            FileName::Meta(id)
        );
        assert_eq!(
            FileName::parse(&name(body_path(root, id, 42))),
            FileName::Body(id, 42)
        );
        assert_eq!(
            FileName::parse(&name(temp_path(root, id, 1))),
            FileName::Temp
        );
        assert_eq!(FileName::parse("notes.txt"), FileName::Other);
        assert_eq!(FileName::parse("abc.m"), FileName::Other);
        assert_eq!(
            meta_path(root, id),
            Path::new("/c/a/ba").join(format!("{}.m", id.to_hex()))
        );
    }

    #[test]
    fn usage_counts_whole_blocks() {
        assert_eq!(disk_bytes(0, 0), 2 * BLOCK);
        assert_eq!(disk_bytes(100, BLOCK - BODY_HEADER_LEN as u64), 2 * BLOCK);
        assert_eq!(disk_bytes(100, BLOCK), 3 * BLOCK);
    }
}
