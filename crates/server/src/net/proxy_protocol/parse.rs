//! The two PROXY protocol header formats, parsed from the bytes received so far.
//!
//! Hand-written rather than taken from a crate: the formats are small and fixed, and the
//! connection code needs one specific answer from a partial buffer (done, need more, or
//! invalid, decided as early as possible so a plain HTTP client is refused on its first bytes).
//! `ppp`, the usual crate, is not in this build's registry either.
//!
//! Spec: <https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt>

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The v2 signature: chosen by the spec so that it can never start a v1 header or an HTTP,
/// TLS or SSH client's first bytes.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The longest v1 line, CRLF included (section 2.1 of the spec).
pub const V1_MAX_LEN: usize = 107;
const V1_PREFIX: &[u8] = b"PROXY ";
/// Signature, version/command, family/transport, and the 2-byte length.
const V2_FIXED_LEN: usize = 16;

/// What a complete header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The original client's address, or `None` for v2 LOCAL (a health check from the load
    /// balancer itself), v1 UNKNOWN and v2 families other than TCP over IPv4/IPv6: then the
    /// connection's own address stands.
    pub source: Option<SocketAddr>,
    /// Bytes the header takes at the start of the stream.
    pub len: usize,
}

/// The bytes so far are no PROXY protocol header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalid(pub &'static str);

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Invalid {}

/// `Ok(Some(header))` once `buf` holds a whole header (bytes past it belong to the
/// connection), `Ok(None)` while `buf` is a valid beginning of one, `Err` as soon as it cannot
/// be one.
pub fn parse(buf: &[u8]) -> Result<Option<Header>, Invalid> {
    if starts_like(buf, &V2_SIGNATURE) {
        return if buf.len() < V2_SIGNATURE.len() {
            Ok(None)
        } else {
            parse_v2(buf)
        };
    }
    if starts_like(buf, V1_PREFIX) {
        return if buf.len() < V1_PREFIX.len() {
            Ok(None)
        } else {
            parse_v1(buf)
        };
    }
    Err(Invalid(
        "the connection does not start with a PROXY protocol header",
    ))
}

/// `buf` and `prefix` agree on their common length.
fn starts_like(buf: &[u8], prefix: &[u8]) -> bool {
    let n = buf.len().min(prefix.len());
    buf[..n] == prefix[..n]
}

fn parse_v1(buf: &[u8]) -> Result<Option<Header>, Invalid> {
    let window = &buf[..buf.len().min(V1_MAX_LEN)];
    let Some(end) = window.windows(2).position(|pair| pair == b"\r\n") else {
        return if buf.len() >= V1_MAX_LEN {
            Err(Invalid("PROXY v1 line longer than 107 bytes"))
        } else {
            Ok(None)
        };
    };
    let line = std::str::from_utf8(&window[V1_PREFIX.len()..end])
        .map_err(|_| Invalid("PROXY v1 line is not ASCII"))?;
    let len = end + 2;
    let mut fields = line.split(' ');
    let source = match fields.next() {
        // The rest of an UNKNOWN line is to be ignored, whatever it holds.
        Some("UNKNOWN") => None,
        Some("TCP4") => Some(v1_addresses(fields, |ip| matches!(ip, IpAddr::V4(_)))?),
        Some("TCP6") => Some(v1_addresses(fields, |ip| matches!(ip, IpAddr::V6(_)))?),
        _ => return Err(Invalid("PROXY v1 protocol is not TCP4, TCP6 or UNKNOWN")),
    };
    Ok(Some(Header { source, len }))
}

/// `SRC DST SPORT DPORT`, single spaces, nothing after; the source address as a socket address.
fn v1_addresses<'a>(
    mut fields: impl Iterator<Item = &'a str>,
    family: impl Fn(&IpAddr) -> bool,
) -> Result<SocketAddr, Invalid> {
    let mut ip = || -> Result<IpAddr, Invalid> {
        let text = fields
            .next()
            .ok_or(Invalid("PROXY v1 line misses an address"))?;
        let ip: IpAddr = text
            .parse()
            .map_err(|_| Invalid("PROXY v1 address is not an IP address"))?;
        if family(&ip) {
            Ok(ip)
        } else {
            Err(Invalid("PROXY v1 address does not match TCP4/TCP6"))
        }
    };
    let (source, _destination) = (ip()?, ip()?);
    let mut port = || -> Result<u16, Invalid> {
        let text = fields
            .next()
            .ok_or(Invalid("PROXY v1 line misses a port"))?;
        // `u16::from_str` takes a leading `+`; the spec allows digits only.
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Invalid("PROXY v1 port is not a number"));
        }
        text.parse()
            .map_err(|_| Invalid("PROXY v1 port is out of range"))
    };
    let (source_port, _destination_port) = (port()?, port()?);
    if fields.next().is_some() {
        return Err(Invalid("PROXY v1 line has extra fields"));
    }
    Ok(SocketAddr::new(source, source_port))
}

fn parse_v2(buf: &[u8]) -> Result<Option<Header>, Invalid> {
    let Some(fixed) = buf.get(..V2_FIXED_LEN) else {
        return Ok(None);
    };
    let (version, command) = (fixed[12] >> 4, fixed[12] & 0x0f);
    if version != 2 {
        return Err(Invalid("PROXY v2 header has an unknown version"));
    }
    let local = match command {
        0 => true,
        1 => false,
        _ => return Err(Invalid("PROXY v2 command is neither LOCAL nor PROXY")),
    };
    let (family, transport) = (fixed[13] >> 4, fixed[13] & 0x0f);
    if family > 3 || transport > 2 {
        return Err(Invalid("PROXY v2 address family or transport is unknown"));
    }
    let body_len = usize::from(u16::from_be_bytes([fixed[14], fixed[15]]));
    let len = V2_FIXED_LEN + body_len;
    let Some(body) = buf.get(V2_FIXED_LEN..len) else {
        return Ok(None);
    };
    // LOCAL: the balancer speaking for itself; whatever addresses follow are to be ignored.
    if local {
        return Ok(Some(Header { source: None, len }));
    }
    // TCP (STREAM) over IPv4 or IPv6; TLVs after the addresses are skipped. UNSPEC, UNIX and
    // UDP say nothing usable about a TCP client, and the spec says to fall back to the
    // connection's own address then.
    let source = match (family, transport) {
        (1, 1) => {
            let a = body
                .get(..12)
                .ok_or(Invalid("PROXY v2 IPv4 addresses are truncated"))?;
            let ip = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
            Some(SocketAddr::new(ip.into(), u16::from_be_bytes([a[8], a[9]])))
        }
        (2, 1) => {
            let a = body
                .get(..36)
                .ok_or(Invalid("PROXY v2 IPv6 addresses are truncated"))?;
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&a[..16]);
            let ip = Ipv6Addr::from(octets);
            Some(SocketAddr::new(
                ip.into(),
                u16::from_be_bytes([a[32], a[33]]),
            ))
        }
        _ => None,
    };
    Ok(Some(Header { source, len }))
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
