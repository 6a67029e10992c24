//! The SHA-256 that names a dictionary (RFC 9842 §2.2): what `Available-Dictionary` carries,
//! what a `dcb`/`dcz` body starts with, and the key of sluice's dictionary store.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::HeaderValue;
use sha2::{Digest, Sha256};

/// The SHA-256 of a dictionary's bytes (its decoded content, whatever coding it travelled in).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DictionaryHash(pub [u8; 32]);

impl DictionaryHash {
    /// The hash of `content`.
    pub fn of(content: &[u8]) -> Self {
        Self(Sha256::digest(content).into())
    }

    /// The hash an `Available-Dictionary` field names: a Structured Field Byte Sequence
    /// (RFC 8941 §3.3.5, `:` base64 `:`) of exactly 32 bytes, surrounding spaces allowed.
    /// `None` for anything else (another length, bad base64, parameters, a list): the request
    /// is then answered without a dictionary, as if it had none (RFC 9842 §2.2 allows one
    /// hash only).
    pub fn from_available(value: &HeaderValue) -> Option<Self> {
        let text = value.as_bytes().trim_ascii();
        let inner = text.strip_prefix(b":")?.strip_suffix(b":")?;
        let bytes = STANDARD.decode(inner).ok()?;
        Some(Self(bytes.try_into().ok()?))
    }

    /// The hash as a Structured Field Byte Sequence, as clients send it.
    pub fn to_field(self) -> String {
        format!(":{}:", STANDARD.encode(self.0))
    }

    /// Lowercase hex, for logs and file names.
    pub fn to_hex(self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for DictionaryHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DictionaryHash({})", self.to_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_dictionary_round_trips_and_rejects_what_is_not_one_hash() {
        let hash = DictionaryHash::of(b"dictionary");
        let field = HeaderValue::from_str(&hash.to_field()).unwrap();
        assert_eq!(DictionaryHash::from_available(&field), Some(hash));
        let spaced = HeaderValue::from_str(&format!("  {}  ", hash.to_field())).unwrap();
        assert_eq!(DictionaryHash::from_available(&spaced), Some(hash));
        // The RFC's own example (§2.2) is 32 bytes.
        let example = HeaderValue::from_static(":pZGm1Av0IEBKARczz7exkNYsZb8LzaMrV7J32a2fFG4=:");
        assert!(DictionaryHash::from_available(&example).is_some());
        for bad in [
            "pZGm1Av0IEBKARczz7exkNYsZb8LzaMrV7J32a2fFG4=",
            ":AAAA:",
            ":not base64!:",
            ":pZGm1Av0IEBKARczz7exkNYsZb8LzaMrV7J32a2fFG4=:;x=1",
            "",
        ] {
            let value = HeaderValue::from_static(bad);
            assert_eq!(DictionaryHash::from_available(&value), None, "{bad}");
        }
    }
}
