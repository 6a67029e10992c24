//! What is stored beside a cached body, and its byte encoding for the storage tiers.
//!
//! [`Meta`] holds what RFC 9111 needs to reuse a response later: the status and header fields
//! as stored (§3.1, <https://www.rfc-editor.org/rfc/rfc9111#section-3.1>), the request and
//! response times of the exchange that produced them (the age calculation of §4.2.3 needs
//! both), and what the zone needs to find it again: the primary key, the `Vary` rule with the
//! request's secondary key under it, and the content coding of the stored body.
//!
//! The encoding is compact and versioned, and decoding trusts nothing: a blob read back from
//! disk may be truncated, from an older version, or garbage, and each case is an error, never a
//! panic. Layout (integers big-endian; `var` is an unsigned LEB128 varint; `bytes` is a `var`
//! length then that many bytes):
//!
//! ```text
//! "SLCM" version:u8=1 status:u16
//! request_time: secs:u64 nanos:u32   response_time: secs:u64 nanos:u32   (since the Unix epoch)
//! body_len:var  primary_key:bytes  variant:bytes
//! vary: tag:u8 (0 none, 1 star, 2 names) [count:var name:bytes...]   vary_key:bytes
//! headers: count:var (name:bytes value:bytes)...
//! ```
//!
//! Header values are bytes (they may carry obs-text, which is not UTF-8); names are the
//! lowercase tokens `http` keeps. Trailing bytes after the last header are an error too, so a
//! blob is either exactly one valid `Meta` or rejected.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use crate::vary::{VaryKey, VaryRule};

const MAGIC: &[u8; 4] = b"SLCM";
const VERSION: u8 = 1;

/// A stored response, without its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub status: StatusCode,
    /// The response's header fields as stored (hop-by-hop fields already removed, see
    /// [`crate::policy::headers_to_store`]).
    pub headers: HeaderMap,
    /// When the request that produced this response was sent (§4.2.3 `request_time`).
    pub request_time: SystemTime,
    /// When the response was received (§4.2.3 `response_time`).
    pub response_time: SystemTime,
    /// [`crate::key::primary_key`] of the request.
    pub primary_key: String,
    /// The response's `Vary`, so a loaded entry can compute a request's secondary key.
    pub vary: VaryRule,
    /// The secondary key of the request that produced this response under [`Meta::vary`].
    pub vary_key: VaryKey,
    /// Content coding of the stored body: `identity`, `gzip`, `br`, `zstd`, `deflate`.
    pub variant: String,
    /// Exact length of the stored body.
    pub body_len: u64,
}

/// Why a meta blob could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaError {
    /// The blob ends inside a field.
    Truncated,
    /// Not a meta blob at all.
    BadMagic,
    /// Written by another version of this format.
    UnsupportedVersion(u8),
    BadStatus(u16),
    BadTime,
    /// A varint longer than 64 bits or a length that does not fit in memory.
    BadLength,
    BadUtf8,
    BadVaryTag(u8),
    BadHeaderName,
    BadHeaderValue,
    /// Bytes left after the last header.
    TrailingBytes,
}

impl fmt::Display for MetaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetaError::Truncated => f.write_str("cache meta truncated"),
            MetaError::BadMagic => f.write_str("not a cache meta blob"),
            MetaError::UnsupportedVersion(v) => write!(f, "cache meta version {v} not supported"),
            MetaError::BadStatus(s) => write!(f, "cache meta: invalid status {s}"),
            MetaError::BadTime => f.write_str("cache meta: invalid time"),
            MetaError::BadLength => f.write_str("cache meta: invalid length"),
            MetaError::BadUtf8 => f.write_str("cache meta: text is not UTF-8"),
            MetaError::BadVaryTag(t) => write!(f, "cache meta: invalid vary tag {t}"),
            MetaError::BadHeaderName => f.write_str("cache meta: invalid header name"),
            MetaError::BadHeaderValue => f.write_str("cache meta: invalid header value"),
            MetaError::TrailingBytes => f.write_str("cache meta: trailing bytes"),
        }
    }
}

impl std::error::Error for MetaError {}

impl Meta {
    /// The blob a storage tier keeps beside the body.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(256);
        out.put_slice(MAGIC);
        out.put_u8(VERSION);
        out.put_u16(self.status.as_u16());
        put_time(&mut out, self.request_time);
        put_time(&mut out, self.response_time);
        put_var(&mut out, self.body_len);
        put_bytes(&mut out, self.primary_key.as_bytes());
        put_bytes(&mut out, self.variant.as_bytes());
        match &self.vary {
            VaryRule::None => out.put_u8(0),
            VaryRule::Star => out.put_u8(1),
            VaryRule::Names(names) => {
                out.put_u8(2);
                put_var(&mut out, names.len() as u64);
                for name in names {
                    put_bytes(&mut out, name.as_str().as_bytes());
                }
            }
        }
        put_bytes(&mut out, self.vary_key.as_str().as_bytes());
        put_var(&mut out, self.headers.len() as u64);
        for (name, value) in &self.headers {
            put_bytes(&mut out, name.as_str().as_bytes());
            put_bytes(&mut out, value.as_bytes());
        }
        out.freeze()
    }

    /// Read back what [`Meta::encode`] wrote.
    pub fn decode(blob: &[u8]) -> Result<Meta, MetaError> {
        let mut r = Reader { rest: blob };
        if r.take(MAGIC.len())? != MAGIC {
            return Err(MetaError::BadMagic);
        }
        let version = r.u8()?;
        if version != VERSION {
            return Err(MetaError::UnsupportedVersion(version));
        }
        let code = r.u16()?;
        let status = StatusCode::from_u16(code).map_err(|_| MetaError::BadStatus(code))?;
        let request_time = r.time()?;
        let response_time = r.time()?;
        let body_len = r.var()?;
        let primary_key = r.string()?;
        let variant = r.string()?;
        let vary = match r.u8()? {
            0 => VaryRule::None,
            1 => VaryRule::Star,
            2 => {
                let count = r.var()?;
                let mut names = Vec::new();
                for _ in 0..count {
                    names.push(r.header_name()?);
                }
                VaryRule::Names(names)
            }
            tag => return Err(MetaError::BadVaryTag(tag)),
        };
        let vary_key = VaryKey::from_canonical(r.string()?);
        let count = r.var()?;
        let mut headers = HeaderMap::new();
        for _ in 0..count {
            let name = r.header_name()?;
            let value =
                HeaderValue::from_bytes(r.bytes()?).map_err(|_| MetaError::BadHeaderValue)?;
            headers.append(name, value);
        }
        if !r.rest.is_empty() {
            return Err(MetaError::TrailingBytes);
        }
        Ok(Meta {
            status,
            headers,
            request_time,
            response_time,
            primary_key,
            vary,
            vary_key,
            variant,
            body_len,
        })
    }
}

/// Seconds and nanoseconds since the epoch; a time before it (a badly set clock) is stored as
/// the epoch, which only makes the entry look older.
fn put_time(out: &mut BytesMut, time: SystemTime) {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    out.put_u64(since.as_secs());
    out.put_u32(since.subsec_nanos());
}

fn put_var(out: &mut BytesMut, mut n: u64) {
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.put_u8(low);
            return;
        }
        out.put_u8(low | 0x80);
    }
}

fn put_bytes(out: &mut BytesMut, bytes: &[u8]) {
    put_var(out, bytes.len() as u64);
    out.put_slice(bytes);
}

/// A cursor that fails instead of reading past the end.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], MetaError> {
        if n > self.rest.len() {
            return Err(MetaError::Truncated);
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], MetaError> {
        self.take(N)?.try_into().map_err(|_| MetaError::Truncated)
    }

    fn u8(&mut self) -> Result<u8, MetaError> {
        Ok(u8::from_be_bytes(self.array()?))
    }

    fn u16(&mut self) -> Result<u16, MetaError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn time(&mut self) -> Result<SystemTime, MetaError> {
        let secs = u64::from_be_bytes(self.array()?);
        let nanos = u32::from_be_bytes(self.array()?);
        // Checked before `Duration::new`, which panics when the nanoseconds carry over a full
        // seconds counter.
        if nanos >= 1_000_000_000 {
            return Err(MetaError::BadTime);
        }
        UNIX_EPOCH
            .checked_add(Duration::new(secs, nanos))
            .ok_or(MetaError::BadTime)
    }

    fn var(&mut self) -> Result<u64, MetaError> {
        let mut n: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            let bits = u64::from(byte & 0x7f);
            // The tenth byte may only carry the top bit of a u64.
            if shift == 63 && bits > 1 {
                return Err(MetaError::BadLength);
            }
            n |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(MetaError::BadLength)
    }

    fn bytes(&mut self) -> Result<&'a [u8], MetaError> {
        let len = usize::try_from(self.var()?).map_err(|_| MetaError::BadLength)?;
        self.take(len)
    }

    fn string(&mut self) -> Result<String, MetaError> {
        let bytes = self.bytes()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| MetaError::BadUtf8)
    }

    fn header_name(&mut self) -> Result<HeaderName, MetaError> {
        let bytes = self.bytes()?;
        // Names were written lowercase; anything else did not come from `encode`.
        if bytes.iter().any(u8::is_ascii_uppercase) {
            return Err(MetaError::BadHeaderName);
        }
        HeaderName::from_bytes(bytes).map_err(|_| MetaError::BadHeaderName)
    }
}

#[cfg(test)]
#[path = "meta_tests.rs"]
mod tests;
