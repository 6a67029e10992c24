//! `Accept-Encoding` negotiation (RFC 9110 §12.5.3,
//! <https://www.rfc-editor.org/rfc/rfc9110#section-12.5.3>).
//!
//! The field is read byte by byte into one weight per known coding plus one for `*`; nothing is
//! allocated, because this runs on every request. Rules, and the choices the RFC leaves open:
//!
//! - weights are q-values (§12.4.2): `0`..=`1` with at most three decimals, kept in thousandths;
//!   `q=0` means "not acceptable";
//! - `*` gives its weight to every coding the field does not name;
//! - `identity` is acceptable unless refused by `identity;q=0`, or by `*;q=0` with no `identity`
//!   entry. Unnamed (and with no `*`), it ranks below every named coding with q > 0, so
//!   `gzip;q=0.1` still gets gzip;
//! - the highest weight wins; ties go to the server's preference order (`offered`), and
//!   identity, unless the server lists it, comes last;
//! - no field, or an empty one, means identity: the RFC reads a missing field as "anything is
//!   acceptable", but clients that send none are often tools that cannot decode, so servers
//!   (nginx, Caddy, tower-http) send identity and so do we;
//! - malformed input is tolerated, never fatal: an element with an invalid weight (`q=abc`,
//!   `q=2`, `q=0.5555`) is ignored as a whole, unknown codings and stray separators are skipped,
//!   a coding named twice keeps its first weight, parameters other than `q` are ignored, and
//!   commas inside quoted parameter values do not split elements.

use http::HeaderMap;
use http::header::{ACCEPT_ENCODING, HeaderValue};

use sluice_core::ContentCoding;

/// The outcome of negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Negotiated {
    /// Send the representation in this coding (possibly [`ContentCoding::Identity`]).
    Use(ContentCoding),
    /// Every offered coding, identity included, was refused. RFC 9110 §12.5.3 allows either a
    /// `406` or ignoring the field; nginx and Caddy send identity, and the caller chooses.
    NotAcceptable,
}

/// Negotiate from one `Accept-Encoding` field value (`None` when the request has none).
/// `offered` is the server's preference order, e.g. `[Zstd, Br, Gzip]`.
pub fn negotiate(accept_encoding: Option<&HeaderValue>, offered: &[ContentCoding]) -> Negotiated {
    negotiate_fields(accept_encoding.map(HeaderValue::as_bytes), offered)
}

/// Negotiate from every `Accept-Encoding` line of a request: several lines form one list
/// (RFC 9110 §5.3), so `negotiate(headers.get(..))` would miss all but the first.
pub fn negotiate_headers(headers: &HeaderMap, offered: &[ContentCoding]) -> Negotiated {
    let fields = headers.get_all(ACCEPT_ENCODING).into_iter();
    negotiate_fields(fields.map(HeaderValue::as_bytes), offered)
}

/// Negotiate from raw field values (the fuzz target's entry point: any bytes are accepted).
pub fn negotiate_fields<'a>(
    fields: impl IntoIterator<Item = &'a [u8]>,
    offered: &[ContentCoding],
) -> Negotiated {
    let mut weights = Weights::default();
    for field in fields {
        for element in Elements(field) {
            weights.add(element);
        }
    }
    weights.choose(offered)
}

/// The weight in thousandths a client gives `token` by naming it (`*` does not count), across
/// every line of its `Accept-Encoding`; `None` when it does not name it or names it with a bad
/// weight. The dictionary codings (RFC 9842 §6.1) are chosen only when listed by name: a
/// client that says `*` has said nothing about dictionaries. The same element and q-value
/// rules as [`negotiate_fields`].
pub fn listed_weight<'a>(fields: impl IntoIterator<Item = &'a [u8]>, token: &[u8]) -> Option<u16> {
    fields
        .into_iter()
        .flat_map(Elements)
        .map(coding_and_weight)
        // A coding named twice keeps its first (valid) weight, as in `Weights::add`.
        .find_map(|(coding, weight)| weight.filter(|_| coding.eq_ignore_ascii_case(token)))
}

/// One list element, `coding *( OWS ";" OWS param )`: the coding and its weight in thousandths
/// (`None` for an invalid `q`).
fn coding_and_weight(element: &[u8]) -> (&[u8], Option<u16>) {
    let mut parts = element.split(|&b| b == b';');
    let coding = parts.next().unwrap_or_default().trim_ascii();
    let mut weight = Some(1000);
    for param in parts {
        let Some(eq) = param.iter().position(|&b| b == b'=') else {
            continue;
        };
        if param[..eq].trim_ascii().eq_ignore_ascii_case(b"q") {
            weight = parse_qvalue(param[eq + 1..].trim_ascii());
        }
    }
    (coding, weight)
}

/// One weight in thousandths per coding named in the field, and one for `*`.
#[derive(Default)]
struct Weights {
    named: [Option<u16>; ContentCoding::ALL.len()],
    star: Option<u16>,
}

impl Weights {
    /// Record one list element: `coding *( OWS ";" OWS param )`.
    fn add(&mut self, element: &[u8]) {
        let (coding, weight) = coding_and_weight(element);
        // A bad weight makes the client's intent unknowable: drop the element rather than guess.
        let Some(weight) = weight else { return };
        let slot = if coding == b"*" {
            &mut self.star
        } else if let Some(encoding) = ContentCoding::from_token_bytes(coding) {
            &mut self.named[encoding.index()]
        } else {
            return;
        };
        slot.get_or_insert(weight);
    }

    /// Rank on a doubled scale so that an unnamed identity (1) sits below every acceptable
    /// weight (>= 2) and above refusal (0).
    fn rank(&self, encoding: ContentCoding) -> u16 {
        match (self.named[encoding.index()], self.star) {
            (Some(q), _) | (None, Some(q)) => q * 2,
            (None, None) if encoding == ContentCoding::Identity => 1,
            (None, None) => 0,
        }
    }

    fn choose(&self, offered: &[ContentCoding]) -> Negotiated {
        // Identity can always be produced; it goes last unless the server placed it.
        let implicit_identity =
            (!offered.contains(&ContentCoding::Identity)).then_some(ContentCoding::Identity);
        let mut best: Option<(ContentCoding, u16)> = None;
        for encoding in offered.iter().copied().chain(implicit_identity) {
            let rank = self.rank(encoding);
            // Strictly greater: on a tie the earlier (server-preferred) coding stays.
            if rank > 0 && best.is_none_or(|(_, top)| rank > top) {
                best = Some((encoding, rank));
            }
        }
        best.map_or(Negotiated::NotAcceptable, |(encoding, _)| {
            Negotiated::Use(encoding)
        })
    }
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )` (RFC 9110 §12.4.2), in
/// thousandths. `None` for anything else.
fn parse_qvalue(value: &[u8]) -> Option<u16> {
    let (whole, fraction) = match value.iter().position(|&b| b == b'.') {
        Some(dot) => (&value[..dot], &value[dot + 1..]),
        None => (value, &[][..]),
    };
    if fraction.len() > 3 || !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut q: u16 = match whole {
        b"0" => 0,
        b"1" => 1000,
        _ => return None,
    };
    for (&digit, scale) in fraction.iter().zip([100, 10, 1]) {
        q += u16::from(digit - b'0') * scale;
    }
    (q <= 1000).then_some(q)
}

/// Splits a field value at commas outside quoted strings (a parameter value may be quoted and
/// contain commas, RFC 9110 §5.6.4). Empty elements are yielded too; `add` skips them.
struct Elements<'a>(&'a [u8]);

impl<'a> Iterator for Elements<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.0.is_empty() {
            return None;
        }
        let (mut quoted, mut escaped) = (false, false);
        let end = self.0.iter().position(|&b| {
            match b {
                _ if escaped => escaped = false,
                b'\\' if quoted => escaped = true,
                b'"' => quoted = !quoted,
                b',' if !quoted => return true,
                _ => {}
            }
            false
        });
        let (element, rest) = match end {
            Some(comma) => (&self.0[..comma], &self.0[comma + 1..]),
            None => (self.0, &[][..]),
        };
        self.0 = rest;
        Some(element)
    }
}

#[cfg(test)]
#[path = "negotiate_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "negotiate_proptest.rs"]
mod proptests;
