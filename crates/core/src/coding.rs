//! Content codings ([RFC 9110 §8.4.1](https://www.rfc-editor.org/rfc/rfc9110#section-8.4.1)):
//! the one enum sluice uses for them, in the config, in negotiation, in the encoders and
//! decoders, in metrics and logs.
//!
//! - [`ContentCoding`]: every coding sluice knows, identity included, with its token and its
//!   sidecar file extension.
//! - [`Compression`]: a coding that transforms the body (every one but identity): what the
//!   encoders produce, the decoders undo and `compress.algorithms` lists.
//! - [`SidecarCoding`]: a coding a precompressed sidecar file can have (gzip, br, zstd).
//!
//! The subsets are validated newtypes over the one enum, not enums of their own, so converting
//! between them is `new` (may refuse) or `coding` (always works), here and nowhere else.

use std::fmt;

/// A content coding sluice knows how to produce, serve from a sidecar or decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContentCoding {
    /// No transformation; always available as the fallback.
    Identity,
    /// `gzip` (and its alias `x-gzip` when parsed): one or more gzip members.
    Gzip,
    /// `deflate`: the zlib format (RFC 9110 §8.4.1.2), not raw deflate.
    Deflate,
    /// `br`: brotli (RFC 7932).
    Br,
    /// `zstd`: Zstandard (RFC 8878), windows of at most 8 MiB in HTTP (RFC 9659).
    Zstd,
}

impl ContentCoding {
    /// Every coding, in [`ContentCoding::index`] order.
    pub const ALL: [ContentCoding; 5] = [
        ContentCoding::Identity,
        ContentCoding::Gzip,
        ContentCoding::Deflate,
        ContentCoding::Br,
        ContentCoding::Zstd,
    ];

    /// Position in [`ContentCoding::ALL`], so per-coding state fits a fixed array (no map, no
    /// heap).
    pub const fn index(self) -> usize {
        match self {
            ContentCoding::Identity => 0,
            ContentCoding::Gzip => 1,
            ContentCoding::Deflate => 2,
            ContentCoding::Br => 3,
            ContentCoding::Zstd => 4,
        }
    }

    /// The registered content-coding token, as sent in `Content-Encoding` and written in the
    /// config.
    pub const fn as_str(self) -> &'static str {
        match self {
            ContentCoding::Identity => "identity",
            ContentCoding::Gzip => "gzip",
            ContentCoding::Deflate => "deflate",
            ContentCoding::Br => "br",
            ContentCoding::Zstd => "zstd",
        }
    }

    /// Parse a content-coding token, case-insensitively (tokens are case-insensitive, RFC 9110
    /// §8.4.1). `x-gzip` is accepted as gzip, as §8.4.1.3 asks of recipients.
    pub fn from_token(token: &str) -> Option<ContentCoding> {
        ContentCoding::from_token_bytes(token.as_bytes())
    }

    /// [`ContentCoding::from_token`] over raw header bytes, which need not be UTF-8.
    pub fn from_token_bytes(token: &[u8]) -> Option<ContentCoding> {
        // Most frequent first: this runs for every token of every `Accept-Encoding`.
        const TOKENS: [(&[u8], ContentCoding); 6] = [
            (b"gzip", ContentCoding::Gzip),
            (b"br", ContentCoding::Br),
            (b"zstd", ContentCoding::Zstd),
            (b"identity", ContentCoding::Identity),
            (b"deflate", ContentCoding::Deflate),
            (b"x-gzip", ContentCoding::Gzip),
        ];
        TOKENS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(token))
            .map(|&(_, coding)| coding)
    }

    /// Extension of a precompressed sidecar file (`index.html` → `index.html.br`). Deflate has
    /// none: no tool writes raw zlib sidecars, and gzip covers every client that takes deflate.
    pub const fn extension(self) -> Option<&'static str> {
        match self {
            ContentCoding::Gzip => Some(".gz"),
            ContentCoding::Br => Some(".br"),
            ContentCoding::Zstd => Some(".zst"),
            ContentCoding::Identity | ContentCoding::Deflate => None,
        }
    }
}

impl fmt::Display for ContentCoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A content coding that transforms the body: every [`ContentCoding`] but identity. The
/// encoders produce these, the request decoders undo them, a route's `compress.algorithms`
/// lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Compression(ContentCoding);

impl Compression {
    pub const GZIP: Compression = Compression(ContentCoding::Gzip);
    pub const DEFLATE: Compression = Compression(ContentCoding::Deflate);
    pub const BR: Compression = Compression(ContentCoding::Br);
    pub const ZSTD: Compression = Compression(ContentCoding::Zstd);

    /// Every compression, in [`Compression::index`] order ([`ContentCoding::ALL`] without
    /// identity).
    pub const ALL: [Compression; 4] = [
        Compression::GZIP,
        Compression::DEFLATE,
        Compression::BR,
        Compression::ZSTD,
    ];

    /// `coding` if it transforms the body; `None` for identity.
    pub const fn new(coding: ContentCoding) -> Option<Compression> {
        match coding {
            ContentCoding::Identity => None,
            coding => Some(Compression(coding)),
        }
    }

    pub const fn coding(self) -> ContentCoding {
        self.0
    }

    pub const fn as_str(self) -> &'static str {
        self.0.as_str()
    }

    /// Position in [`Compression::ALL`], for per-compression arrays.
    pub const fn index(self) -> usize {
        // Identity is index 0 of `ContentCoding::ALL` and never inside a `Compression`.
        self.0.index().saturating_sub(1)
    }

    /// The levels the encoders accept, `(fastest, smallest output)`. zstd stops at 19: higher
    /// ("ultra") levels need windows larger than the 8 MiB HTTP clients must support (RFC 9659).
    pub const fn levels(self) -> (u32, u32) {
        match self.0 {
            ContentCoding::Br => (0, 11),
            ContentCoding::Zstd => (1, 19),
            ContentCoding::Gzip | ContentCoding::Deflate | ContentCoding::Identity => (1, 9),
        }
    }
}

impl From<Compression> for ContentCoding {
    fn from(compression: Compression) -> Self {
        compression.0
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The coding of a precompressed sidecar file: one with a [`ContentCoding::extension`] (gzip,
/// br, zstd).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SidecarCoding(Compression);

impl SidecarCoding {
    pub const ZSTD: SidecarCoding = SidecarCoding(Compression::ZSTD);
    pub const BR: SidecarCoding = SidecarCoding(Compression::BR);
    pub const GZIP: SidecarCoding = SidecarCoding(Compression::GZIP);

    /// Every sidecar coding in the default preference order: zstd > br > gzip (smallest first
    /// at the levels `sluice precompress` writes).
    pub const ALL: [SidecarCoding; 3] =
        [SidecarCoding::ZSTD, SidecarCoding::BR, SidecarCoding::GZIP];

    /// `coding` if a sidecar file can have it; `None` for identity and deflate.
    pub const fn new(coding: ContentCoding) -> Option<SidecarCoding> {
        match (coding.extension(), Compression::new(coding)) {
            (Some(_), Some(compression)) => Some(SidecarCoding(compression)),
            _ => None,
        }
    }

    pub const fn coding(self) -> ContentCoding {
        self.0.coding()
    }

    pub const fn compression(self) -> Compression {
        self.0
    }

    pub const fn as_str(self) -> &'static str {
        self.0.as_str()
    }

    /// The file extension (`.gz`, `.br`, `.zst`).
    pub const fn extension(self) -> &'static str {
        match self.0.coding().extension() {
            Some(extension) => extension,
            // `new` admits only codings with an extension.
            None => "",
        }
    }
}

impl From<SidecarCoding> for ContentCoding {
    fn from(sidecar: SidecarCoding) -> Self {
        sidecar.coding()
    }
}

impl fmt::Display for SidecarCoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_case_insensitively() {
        for coding in ContentCoding::ALL {
            assert_eq!(ContentCoding::from_token(coding.as_str()), Some(coding));
            let upper = coding.as_str().to_ascii_uppercase();
            assert_eq!(ContentCoding::from_token(&upper), Some(coding));
            assert_eq!(ContentCoding::ALL[coding.index()], coding);
        }
        assert_eq!(
            ContentCoding::from_token("X-GZip"),
            Some(ContentCoding::Gzip)
        );
        assert_eq!(ContentCoding::from_token("compress"), None);
        assert_eq!(ContentCoding::from_token(""), None);
        assert_eq!(ContentCoding::from_token("gzip "), None);
        assert_eq!(ContentCoding::from_token_bytes(b"\xffgzip"), None);
    }

    #[test]
    fn sidecar_extensions() {
        assert_eq!(ContentCoding::Gzip.extension(), Some(".gz"));
        assert_eq!(ContentCoding::Br.extension(), Some(".br"));
        assert_eq!(ContentCoding::Zstd.extension(), Some(".zst"));
        assert_eq!(ContentCoding::Deflate.extension(), None);
        assert_eq!(ContentCoding::Identity.extension(), None);
        assert_eq!(ContentCoding::Zstd.to_string(), "zstd");
        for sidecar in SidecarCoding::ALL {
            assert_eq!(Some(sidecar.extension()), sidecar.coding().extension());
        }
    }

    #[test]
    fn subsets_are_the_codings_they_say() {
        for compression in Compression::ALL {
            assert_eq!(Compression::ALL[compression.index()], compression);
            assert_eq!(Compression::new(compression.coding()), Some(compression));
        }
        assert_eq!(Compression::new(ContentCoding::Identity), None);
        let compressions: Vec<_> = ContentCoding::ALL
            .into_iter()
            .filter_map(Compression::new)
            .collect();
        assert_eq!(compressions, Compression::ALL);

        assert_eq!(SidecarCoding::new(ContentCoding::Deflate), None);
        assert_eq!(SidecarCoding::new(ContentCoding::Identity), None);
        assert_eq!(
            SidecarCoding::new(ContentCoding::Br),
            Some(SidecarCoding::BR)
        );
        assert_eq!(
            SidecarCoding::ALL.map(SidecarCoding::as_str),
            ["zstd", "br", "gzip"]
        );
    }
}

/// A dictionary content coding (RFC 9842 §4, §5): a response compressed with a dictionary the
/// client holds, named by its SHA-256 in the first bytes of the body. Kept apart from
/// [`ContentCoding`]: such a body can only be made for one client's dictionary, never decoded
/// or transformed by sluice, and never chosen by `Accept-Encoding` alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DictionaryCoding {
    /// `dcb`: Dictionary-Compressed Brotli (RFC 9842 §4).
    Dcb,
    /// `dcz`: Dictionary-Compressed Zstandard (RFC 9842 §5).
    Dcz,
}

impl DictionaryCoding {
    /// Both codings, in sluice's order of preference when a client accepts both equally:
    /// `dcz` first (made at zstd level 19 it is as small as `dcb` at 11 on the lab's bundles,
    /// and far cheaper to make).
    pub const ALL: [DictionaryCoding; 2] = [DictionaryCoding::Dcz, DictionaryCoding::Dcb];

    /// The registered token, as sent in `Content-Encoding` and listed in `Accept-Encoding`.
    pub const fn as_str(self) -> &'static str {
        match self {
            DictionaryCoding::Dcb => "dcb",
            DictionaryCoding::Dcz => "dcz",
        }
    }

    /// Position in a per-coding array.
    pub const fn index(self) -> usize {
        match self {
            DictionaryCoding::Dcb => 0,
            DictionaryCoding::Dcz => 1,
        }
    }

    /// Parse a token, ignoring ASCII case.
    pub fn from_token_bytes(token: &[u8]) -> Option<Self> {
        if token.eq_ignore_ascii_case(b"dcb") {
            Some(DictionaryCoding::Dcb)
        } else if token.eq_ignore_ascii_case(b"dcz") {
            Some(DictionaryCoding::Dcz)
        } else {
            None
        }
    }
}

impl fmt::Display for DictionaryCoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
