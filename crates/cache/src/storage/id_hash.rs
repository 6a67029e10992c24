//! A hasher for maps keyed by [`ObjectId`]. An id is already 16 bytes of SHA-256, uniform and not
//! chosen by a client (finding ids that collide in a table means breaking the hash), so hashing it
//! again with SipHash is wasted work on the hot path of every lookup: this hasher folds the bytes
//! with one multiply per word instead.

use std::hash::{BuildHasher, Hasher};

#[cfg(doc)]
use super::ObjectId;

/// Builds [`IdHasher`]s; stateless, so every map and shard agrees.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct BuildIdHasher;

impl BuildHasher for BuildIdHasher {
    type Hasher = IdHasher;

    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

/// Folds 8-byte words with a multiply (the length prefix `[u8; 16]` writes first is folded too;
/// it is the same for every id, so it costs one multiply and changes nothing).
#[derive(Default, Debug)]
pub(crate) struct IdHasher(u64);

/// An odd constant with well-spread bits (from splitmix64): multiplying by it moves every input
/// bit into the high bits, which hashbrown uses for its control bytes.
const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for word in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..word.len()].copy_from_slice(word);
            self.0 = (self.0.rotate_left(23) ^ u64::from_le_bytes(buf)).wrapping_mul(MIX);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(MIX);
    }

    fn finish(&self) -> u64 {
        // quick_cache picks the shard from some bits and hashbrown the bucket from others: fold
        // the high half down so both see well-mixed bits.
        self.0 ^ (self.0 >> 29)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    use super::BuildIdHasher;
    use crate::storage::ObjectId;

    #[test]
    fn distinct_ids_hash_apart_in_low_and_high_bits() {
        let hashes: Vec<u64> = (0u32..1000)
            .map(|n| BuildIdHasher.hash_one(ObjectId::of(&[&n.to_be_bytes()])))
            .collect();
        let low: HashSet<u64> = hashes.iter().map(|h| h & 0x3ff).collect();
        let high: HashSet<u64> = hashes.iter().map(|h| h >> 54).collect();
        // 1000 balls in 1024 bins: about 630 distinct when uniform; a broken hash gives a handful.
        assert!(low.len() > 500, "low bits: {}", low.len());
        assert!(high.len() > 500, "high bits: {}", high.len());
    }
}
