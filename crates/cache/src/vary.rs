//! The secondary cache key from a response's `Vary` (RFC 9111 §4.1,
//! <https://www.rfc-editor.org/rfc/rfc9111#section-4.1>).
//!
//! A stored response nominates request fields in `Vary`; a later request may reuse it only if
//! those fields match. Instead of comparing fields entry by entry, the zone computes a
//! [`VaryKey`] for the request with the stored response's [`VaryRule`] and looks the variant up
//! by it, so a match is one map lookup.
//!
//! §4.1 allows normalising the nominated values before comparing them: lines are combined
//! with `", "` and whitespace around commas is removed (outside quoted strings, where it is
//! data). A field that is absent is distinct from one that is present and empty ("If (after
//! any normalization that might take place) a header field is absent from a request, it can
//! only match another request if it is also absent there").
//!
//! `Accept-Encoding` is never keyed on its raw text (`gzip, deflate, br` and `br, gzip` would
//! make two entries for the same bytes): the caller says how to treat it with
//! [`AcceptEncodingKey`], either the coding sluice would serve for this request or nothing at
//! all when the route serves every coding from one entry.
//!
//! `Vary: *` never matches (§4.1), so [`vary_key`] has no key for it and such a response is not
//! stored.

use http::header::{self, HeaderMap, HeaderName};

use crate::key::push_escaped;

/// The request fields a stored response varies on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum VaryRule {
    /// No `Vary`: one variant for every request.
    #[default]
    None,
    /// `Vary: *` (or a member that is not a field name): never matches.
    Star,
    /// Lowercase, deduplicated, in the order they appeared.
    Names(Vec<HeaderName>),
}

impl VaryRule {
    /// The rule of a response with `headers`. Every `Vary` line counts (a list field may be
    /// split, RFC 9110 §5.3). A member that is neither `*` nor a valid field name makes the
    /// rule [`VaryRule::Star`]: guessing what it meant could serve one client's variant to
    /// another.
    pub fn of(headers: &HeaderMap) -> VaryRule {
        let mut names: Vec<HeaderName> = Vec::new();
        let members = headers
            .get_all(header::VARY)
            .iter()
            .flat_map(|line| line.as_bytes().split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .filter(|member| !member.is_empty());
        for member in members {
            if member == b"*" {
                return VaryRule::Star;
            }
            let Ok(name) = HeaderName::from_bytes(member) else {
                return VaryRule::Star;
            };
            if !names.contains(&name) {
                names.push(name);
            }
        }
        if names.is_empty() {
            VaryRule::None
        } else {
            VaryRule::Names(names)
        }
    }

    /// The nominated names (empty for `None` and `Star`).
    pub fn names(&self) -> &[HeaderName] {
        match self {
            VaryRule::Names(names) => names,
            VaryRule::None | VaryRule::Star => &[],
        }
    }
}

/// How `Accept-Encoding` enters the key when `Vary` nominates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptEncodingKey<'a> {
    /// Left out: the route compresses itself and serves every coding from one entry (the
    /// stored variants are told apart by their coding, not by the request's field).
    Drop,
    /// The content-coding token sluice would serve for this request (`"br"`, `"identity"`),
    /// computed by the caller's negotiation; requests that get the same coding share a key.
    Coding(&'static str),
    /// The set of codings the request accepts (q > 0), lowercase and sorted: order,
    /// whitespace and non-zero q-values do not split entries. For routes where the origin
    /// negotiates: two requests accepting the same codings get the same answer from it.
    Accepted(&'a HeaderMap),
}

/// The canonical text of a request's nominated fields: one line per name,
/// `name:normalised-value` when present and `name` alone when absent, bytes outside visible
/// ASCII percent-encoded. Empty when the rule nominates nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct VaryKey(String);

impl VaryKey {
    /// The key of a response without `Vary`.
    pub fn empty() -> Self {
        VaryKey(String::new())
    }

    /// Rebuild a key from [`VaryKey::as_str`] (stored meta).
    pub fn from_canonical(text: String) -> Self {
        VaryKey(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The secondary key of a request with `req_headers` under `rule`, or `None` for
/// [`VaryRule::Star`], which no request matches.
pub fn vary_key(
    rule: &VaryRule,
    req_headers: &HeaderMap,
    ae: AcceptEncodingKey<'_>,
) -> Option<VaryKey> {
    let names = match rule {
        VaryRule::None => return Some(VaryKey::empty()),
        VaryRule::Star => return None,
        VaryRule::Names(names) => names,
    };
    let mut key = String::new();
    for name in names {
        if name == header::ACCEPT_ENCODING {
            match ae {
                AcceptEncodingKey::Drop => continue,
                AcceptEncodingKey::Coding(coding) => {
                    key.push_str(name.as_str());
                    key.push(':');
                    push_escaped(&mut key, coding.as_bytes());
                }
                AcceptEncodingKey::Accepted(headers) => {
                    key.push_str(name.as_str());
                    if let Some(set) = accepted_set(headers) {
                        key.push(':');
                        push_escaped(&mut key, set.as_bytes());
                    }
                }
            }
        } else {
            key.push_str(name.as_str());
            if let Some(value) = normalised(req_headers, name) {
                key.push(':');
                push_escaped(&mut key, &value);
            }
        }
        key.push('\n');
    }
    Some(VaryKey(key))
}

/// The codings `Accept-Encoding` accepts, as `br,gzip` (sorted, lowercase, q > 0, `*` kept as
/// a member); `None` when the field is absent (RFC 9110 §12.5.3: absent is not the same as
/// empty, which accepts identity only).
fn accepted_set(headers: &HeaderMap) -> Option<String> {
    let mut lines = headers.get_all(header::ACCEPT_ENCODING).iter().peekable();
    lines.peek()?;
    let mut tokens: Vec<String> = Vec::new();
    for member in lines.flat_map(|line| line.as_bytes().split(|&b| b == b',')) {
        let mut parts = member.split(|&b| b == b';');
        let token = parts.next().unwrap_or_default().trim_ascii();
        if token.is_empty() {
            continue;
        }
        let refused = parts.any(|param| {
            let param = param.trim_ascii();
            param.len() >= 2
                && param[..2].eq_ignore_ascii_case(b"q=")
                && param[2..]
                    .trim_ascii()
                    .iter()
                    .all(|&b| b == b'0' || b == b'.')
        });
        if refused {
            continue;
        }
        let token = String::from_utf8_lossy(token).to_ascii_lowercase();
        if !tokens.contains(&token) {
            tokens.push(token);
        }
    }
    tokens.sort();
    Some(tokens.join(","))
}

/// All lines of `name` combined with `", "`, with whitespace around commas and at both ends
/// removed outside quoted strings; `None` when the field is absent.
fn normalised(headers: &HeaderMap, name: &HeaderName) -> Option<Vec<u8>> {
    let mut lines = headers.get_all(name).iter().peekable();
    lines.peek()?;
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        normalise_line(line.as_bytes(), &mut out);
    }
    Some(out)
}

fn normalise_line(line: &[u8], out: &mut Vec<u8>) {
    let line = line.trim_ascii();
    let mut in_quotes = false;
    let mut escaped = false;
    // Whitespace outside quotes is held back until the next byte shows whether it sits next
    // to a comma (dropped) or inside a member (kept).
    let mut pending_ws: Vec<u8> = Vec::new();
    for &b in line {
        if in_quotes {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_quotes = false;
            }
            continue;
        }
        match b {
            b' ' | b'\t' => pending_ws.push(b),
            b',' => {
                pending_ws.clear();
                out.extend_from_slice(b", ");
            }
            _ => {
                if out.ends_with(b", ") {
                    pending_ws.clear();
                }
                out.append(&mut pending_ws);
                out.push(b);
                in_quotes = b == b'"';
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value).unwrap(),
            );
        }
        map
    }

    fn rule(vary: &[&str]) -> VaryRule {
        let pairs: Vec<(&str, &[u8])> = vary.iter().map(|v| ("vary", v.as_bytes())).collect();
        VaryRule::of(&headers(&pairs))
    }

    #[test]
    fn s4_1_accept_encoding_as_the_accepted_set_ignores_order_spaces_and_q() {
        let rule = rule(&["Accept-Encoding"]);
        let key_of = |value: &[u8]| {
            let req = headers(&[("accept-encoding", value)]);
            vary_key(&rule, &req, AcceptEncodingKey::Accepted(&req))
                .unwrap()
                .as_str()
                .to_owned()
        };
        assert_eq!(
            key_of(b"gzip, deflate, br"),
            key_of(b"br,GZIP;q=0.5 , deflate")
        );
        assert_ne!(key_of(b"gzip, br"), key_of(b"gzip"));
        assert_eq!(key_of(b"gzip, br;q=0"), key_of(b"gzip"));
        let absent = HeaderMap::new();
        let none = vary_key(&rule, &absent, AcceptEncodingKey::Accepted(&absent)).unwrap();
        assert_ne!(none.as_str(), key_of(b""));
    }

    fn key(rule: &VaryRule, req: &[(&str, &[u8])]) -> String {
        vary_key(rule, &headers(req), AcceptEncodingKey::Coding("br"))
            .unwrap()
            .as_str()
            .to_owned()
    }

    #[test]
    fn s4_1_vary_names_are_lowercase_deduplicated_in_order_across_lines() {
        assert_eq!(rule(&[]), VaryRule::None);
        assert_eq!(rule(&["", " , "]), VaryRule::None);
        assert_eq!(
            rule(&["Accept-Language, accept-encoding", "ACCEPT-LANGUAGE,Origin"]),
            VaryRule::Names(vec![
                HeaderName::from_static("accept-language"),
                header::ACCEPT_ENCODING,
                header::ORIGIN,
            ])
        );
    }

    #[test]
    fn s4_1_vary_star_or_a_malformed_member_never_matches() {
        assert_eq!(rule(&["*"]), VaryRule::Star);
        assert_eq!(rule(&["Accept", "*"]), VaryRule::Star);
        assert_eq!(rule(&["Accept, bad name"]), VaryRule::Star);
        assert_eq!(
            vary_key(&VaryRule::Star, &HeaderMap::new(), AcceptEncodingKey::Drop),
            None
        );
    }

    #[test]
    fn s4_1_no_vary_gives_the_empty_key() {
        let k = vary_key(
            &VaryRule::None,
            &headers(&[("accept", b"x")]),
            AcceptEncodingKey::Drop,
        );
        assert_eq!(k, Some(VaryKey::empty()));
    }

    #[test]
    fn s4_1_absent_field_differs_from_empty_field() {
        let r = rule(&["Accept-Language"]);
        assert_eq!(key(&r, &[]), "accept-language\n");
        assert_eq!(key(&r, &[("accept-language", b"")]), "accept-language:\n");
    }

    #[test]
    fn s4_1_lines_are_combined_and_whitespace_around_commas_normalised() {
        let r = rule(&["Accept-Language"]);
        let one_line = key(&r, &[("accept-language", b"fr,  en ;q=0.5")]);
        assert_eq!(one_line, "accept-language:fr,%20en%20;q=0.5\n");
        assert_eq!(
            key(
                &r,
                &[
                    ("accept-language", b" fr "),
                    ("accept-language", b"en ;q=0.5")
                ]
            ),
            one_line
        );
        // Inside a quoted string whitespace and commas are data.
        assert_ne!(
            key(&r, &[("accept-language", b"\"a , b\"")]),
            key(&r, &[("accept-language", b"\"a,b\"")])
        );
        // Case is significant in values.
        assert_ne!(
            key(&r, &[("accept-language", b"FR")]),
            key(&r, &[("accept-language", b"fr")])
        );
    }

    #[test]
    fn s4_1_non_utf8_values_are_keyed_losslessly() {
        let r = rule(&["X-Name"]);
        assert_eq!(key(&r, &[("x-name", b"caf\xe9")]), "x-name:caf%E9\n");
        assert_ne!(
            key(&r, &[("x-name", b"caf\xe9")]),
            key(&r, &[("x-name", b"caf\xe8")])
        );
    }

    #[test]
    fn s4_1_accept_encoding_is_keyed_by_the_served_coding_never_the_raw_string() {
        let r = rule(&["Accept-Encoding, Accept-Language"]);
        let req_a = headers(&[
            ("accept-encoding", b"gzip, deflate, br"),
            ("accept-language", b"fr"),
        ]);
        let req_b = headers(&[("accept-encoding", b"br, gzip"), ("accept-language", b"fr")]);
        let br = AcceptEncodingKey::Coding("br");
        assert_eq!(vary_key(&r, &req_a, br), vary_key(&r, &req_b, br));
        assert_eq!(
            vary_key(&r, &req_a, br).unwrap().as_str(),
            "accept-encoding:br\naccept-language:fr\n"
        );
        assert_ne!(
            vary_key(&r, &req_a, br),
            vary_key(&r, &req_a, AcceptEncodingKey::Coding("gzip"))
        );
        let dropped = vary_key(&r, &req_a, AcceptEncodingKey::Drop).unwrap();
        assert_eq!(dropped.as_str(), "accept-language:fr\n");
    }
}
