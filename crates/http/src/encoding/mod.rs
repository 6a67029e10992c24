//! Content codings and `Accept-Encoding` negotiation, shared by response compression and by
//! precompressed sidecars in `static_files` so both pick the same variant for the same request.
//!
//! - [`Encoding`]: the codings sluice can produce, their tokens (RFC 9110 §8.4.1,
//!   <https://www.rfc-editor.org/rfc/rfc9110#section-8.4.1>) and sidecar file extensions.
//! - [`negotiate`](negotiate::negotiate): RFC 9110 §12.5.3
//!   (<https://www.rfc-editor.org/rfc/rfc9110#section-12.5.3>) without allocating.

mod negotiate;

pub use negotiate::{Negotiated, negotiate, negotiate_fields, negotiate_headers};

/// A content coding sluice knows how to produce (or to serve from a precompressed file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// No transformation; always available as the fallback.
    Identity,
    Gzip,
    Deflate,
    Br,
    Zstd,
}

impl Encoding {
    /// Every coding, in [`Encoding::index`] order.
    pub const ALL: [Encoding; 5] = [
        Encoding::Identity,
        Encoding::Gzip,
        Encoding::Deflate,
        Encoding::Br,
        Encoding::Zstd,
    ];

    /// Position in [`Encoding::ALL`], so per-coding state fits a fixed array (no map, no heap).
    pub const fn index(self) -> usize {
        match self {
            Encoding::Identity => 0,
            Encoding::Gzip => 1,
            Encoding::Deflate => 2,
            Encoding::Br => 3,
            Encoding::Zstd => 4,
        }
    }

    /// The registered content-coding token, as sent in `Content-Encoding`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
            Encoding::Br => "br",
            Encoding::Zstd => "zstd",
        }
    }

    /// Parse a content-coding token, case-insensitively (tokens are case-insensitive, RFC 9110
    /// §8.4.1). `x-gzip` is accepted as gzip, as §8.4.1.3 asks of recipients.
    pub fn from_token(token: &str) -> Option<Encoding> {
        Encoding::from_token_bytes(token.as_bytes())
    }

    /// [`Encoding::from_token`] over raw header bytes, which need not be UTF-8.
    pub fn from_token_bytes(token: &[u8]) -> Option<Encoding> {
        const TOKENS: [(&[u8], Encoding); 6] = [
            (b"gzip", Encoding::Gzip),
            (b"br", Encoding::Br),
            (b"zstd", Encoding::Zstd),
            (b"identity", Encoding::Identity),
            (b"deflate", Encoding::Deflate),
            (b"x-gzip", Encoding::Gzip),
        ];
        TOKENS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(token))
            .map(|&(_, encoding)| encoding)
    }

    /// Extension of a precompressed sidecar file (`index.html` → `index.html.br`). Deflate has
    /// none: no tool writes raw zlib sidecars, and gzip covers every client that takes deflate.
    pub const fn extension(self) -> Option<&'static str> {
        match self {
            Encoding::Gzip => Some(".gz"),
            Encoding::Br => Some(".br"),
            Encoding::Zstd => Some(".zst"),
            Encoding::Identity | Encoding::Deflate => None,
        }
    }
}

impl std::fmt::Display for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_case_insensitively() {
        for encoding in Encoding::ALL {
            assert_eq!(Encoding::from_token(encoding.as_str()), Some(encoding));
            let upper = encoding.as_str().to_ascii_uppercase();
            assert_eq!(Encoding::from_token(&upper), Some(encoding));
            assert_eq!(Encoding::ALL[encoding.index()], encoding);
        }
        assert_eq!(Encoding::from_token("X-GZip"), Some(Encoding::Gzip));
        assert_eq!(Encoding::from_token("compress"), None);
        assert_eq!(Encoding::from_token(""), None);
        assert_eq!(Encoding::from_token("gzip "), None);
        assert_eq!(Encoding::from_token_bytes(b"\xffgzip"), None);
    }

    #[test]
    fn sidecar_extensions() {
        assert_eq!(Encoding::Gzip.extension(), Some(".gz"));
        assert_eq!(Encoding::Br.extension(), Some(".br"));
        assert_eq!(Encoding::Zstd.extension(), Some(".zst"));
        assert_eq!(Encoding::Deflate.extension(), None);
        assert_eq!(Encoding::Identity.extension(), None);
        assert_eq!(Encoding::Zstd.to_string(), "zstd");
    }
}
