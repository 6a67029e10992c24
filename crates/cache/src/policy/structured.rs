//! Just enough of RFC 8941 (Structured Field Values, <https://www.rfc-editor.org/rfc/rfc8941>)
//! to read targeted cache-control fields, which RFC 9213 §2.1 defines as Dictionaries.
//!
//! The parser follows §4.2 strictly because RFC 9213 §2.1 makes a parse failure meaningful:
//! a targeted field that fails to parse is ignored as if absent, and the cache falls back to
//! `Cache-Control`. So `max-age=60,` (trailing comma) or `Max-Age=60` (keys are lowercase)
//! reject the whole field. Values are kept only as far as cache directives use them: integers
//! (delta-seconds) and booleans (`?0` turns a directive off); everything else is recognised,
//! checked and discarded. No external crate: this is ~150 lines and no other part of sluice
//! reads structured fields yet.

/// A member's value, reduced to what cache directives need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SfValue {
    Integer(i64),
    Boolean(bool),
    /// A decimal, string, token, byte sequence or inner list.
    Other,
}

/// Parse an `sf-dictionary` (§4.2.2). `None` on any syntax error or when empty. A key seen
/// twice keeps its last value, in its first position (§4.2.2: "overwrite its value").
pub(crate) fn parse_dictionary(input: &[u8]) -> Option<Vec<(String, SfValue)>> {
    let mut p = Parser { rest: input };
    p.skip(|b| b == b' ');
    let mut members: Vec<(String, SfValue)> = Vec::new();
    while !p.rest.is_empty() {
        let key = p.key()?;
        let value = if p.eat(b'=') {
            p.member_value()?
        } else {
            p.parameters()?;
            SfValue::Boolean(true)
        };
        match members.iter_mut().find(|(k, _)| *k == key) {
            Some(member) => member.1 = value,
            None => members.push((key, value)),
        }
        p.skip(is_ows);
        if p.rest.is_empty() {
            break;
        }
        if !p.eat(b',') {
            return None;
        }
        p.skip(is_ows);
        if p.rest.is_empty() {
            // A trailing comma.
            return None;
        }
    }
    (!members.is_empty()).then_some(members)
}

fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

struct Parser<'a> {
    rest: &'a [u8],
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let (&first, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(first)
    }

    fn eat(&mut self, b: u8) -> bool {
        let matched = self.peek() == Some(b);
        if matched {
            self.rest = self.rest.get(1..).unwrap_or_default();
        }
        matched
    }

    fn skip(&mut self, pred: impl Fn(u8) -> bool) {
        let n = self.rest.iter().take_while(|&&b| pred(b)).count();
        self.rest = self.rest.get(n..).unwrap_or_default();
    }

    /// §4.2.3.3: `( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" )`.
    fn key(&mut self) -> Option<String> {
        let first = self.peek()?;
        if !(first.is_ascii_lowercase() || first == b'*') {
            return None;
        }
        let n = self
            .rest
            .iter()
            .take_while(|&&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-.*".contains(&b))
            .count();
        let (key, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(key.iter().map(|&b| char::from(b)).collect())
    }

    /// `sf-item / inner-list`.
    fn member_value(&mut self) -> Option<SfValue> {
        if self.eat(b'(') {
            self.inner_list_rest()?;
            return Some(SfValue::Other);
        }
        let value = self.bare_item()?;
        self.parameters()?;
        Some(value)
    }

    /// §4.2.1.2, after the opening parenthesis.
    fn inner_list_rest(&mut self) -> Option<()> {
        loop {
            self.skip(|b| b == b' ');
            if self.eat(b')') {
                return self.parameters();
            }
            self.bare_item()?;
            self.parameters()?;
            match self.peek()? {
                b' ' | b')' => {}
                _ => return None,
            }
        }
    }

    /// §4.2.3.2: `*( ";" *SP key [ "=" bare-item ] )`.
    fn parameters(&mut self) -> Option<()> {
        while self.eat(b';') {
            self.skip(|b| b == b' ');
            self.key()?;
            if self.eat(b'=') {
                self.bare_item()?;
            }
        }
        Some(())
    }

    /// §4.2.3.1.
    fn bare_item(&mut self) -> Option<SfValue> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => self.string(),
            b':' => self.byte_sequence(),
            b'?' => self.boolean(),
            b if b.is_ascii_alphabetic() || b == b'*' => self.token(),
            _ => None,
        }
    }

    /// §4.2.4: at most 15 integer digits; decimals of at most 12 + 3 digits.
    fn number(&mut self) -> Option<SfValue> {
        let negative = self.eat(b'-');
        let int_len = self.rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if int_len == 0 || int_len > 15 {
            return None;
        }
        let (digits, rest) = self.rest.split_at(int_len);
        self.rest = rest;
        if self.eat(b'.') {
            let frac = self.rest.iter().take_while(|b| b.is_ascii_digit()).count();
            if int_len > 12 || frac == 0 || frac > 3 {
                return None;
            }
            self.rest = self.rest.get(frac..).unwrap_or_default();
            return Some(SfValue::Other);
        }
        let magnitude = digits
            .iter()
            .fold(0i64, |n, &d| n * 10 + i64::from(d - b'0'));
        Some(SfValue::Integer(if negative {
            -magnitude
        } else {
            magnitude
        }))
    }

    /// §4.2.5: printable ASCII, `\` escaping only `"` and `\`.
    fn string(&mut self) -> Option<SfValue> {
        self.bump()?;
        loop {
            match self.bump()? {
                b'"' => return Some(SfValue::Other),
                b'\\' => match self.bump()? {
                    b'"' | b'\\' => {}
                    _ => return None,
                },
                0x20..=0x7e => {}
                _ => return None,
            }
        }
    }

    /// §4.2.6: `( ALPHA / "*" ) *( tchar / ":" / "/" )`.
    fn token(&mut self) -> Option<SfValue> {
        self.bump()?;
        self.skip(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&b));
        Some(SfValue::Other)
    }

    /// §4.2.7: base64 between colons.
    fn byte_sequence(&mut self) -> Option<SfValue> {
        self.bump()?;
        self.skip(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
        self.eat(b':').then_some(SfValue::Other)
    }

    /// §4.2.8: `?0` or `?1`.
    fn boolean(&mut self) -> Option<SfValue> {
        self.bump()?;
        match self.bump()? {
            b'0' => Some(SfValue::Boolean(false)),
            b'1' => Some(SfValue::Boolean(true)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SfValue::{Boolean, Integer, Other};

    fn parse(s: &str) -> Option<Vec<(String, SfValue)>> {
        parse_dictionary(s.as_bytes())
    }

    fn members(pairs: &[(&str, SfValue)]) -> Option<Vec<(String, SfValue)>> {
        Some(pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect())
    }

    #[test]
    fn rfc8941_s4_2_2_dictionary_members_values_and_parameters() {
        assert_eq!(
            parse(
                "  max-age=60, no-store,\ts-maxage=5;x=1, a=?0, b=\"s,t\", c=(1 \"x\");p, d=1.5, e=tok/en, f=:aGk=:"
            ),
            members(&[
                ("max-age", Integer(60)),
                ("no-store", Boolean(true)),
                ("s-maxage", Integer(5)),
                ("a", Boolean(false)),
                ("b", Other),
                ("c", Other),
                ("d", Other),
                ("e", Other),
                ("f", Other),
            ])
        );
        assert_eq!(parse("a=-3"), members(&[("a", Integer(-3))]));
    }

    #[test]
    fn rfc8941_s4_2_2_duplicate_keys_keep_the_last_value() {
        assert_eq!(
            parse("max-age=1, private, max-age=9"),
            members(&[("max-age", Integer(9)), ("private", Boolean(true))])
        );
    }

    #[test]
    fn rfc8941_s4_2_syntax_errors_reject_the_whole_field() {
        for bad in [
            "",
            "   ",
            "max-age=60,",
            "Max-Age=60",
            "max-age=",
            "max-age=60 no-store",
            "a=\"unterminated",
            "a=\"bad\\q\"",
            "a=1234567890123456",
            "a=1.2345",
            "a=?2",
            "a=(1 2",
            "a=(1,2)",
            "a=:abc",
            ",a",
            "a;",
            "a=1;P=2",
            "1a",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        assert_eq!(parse_dictionary(b"a=\"caf\xc3\xa9\""), None);
    }
}
