//! Property tests of `Accept-Encoding` negotiation (the stable-Rust side of
//! `fuzz/fuzz_targets/accept_encoding.rs`): any bytes never panic and only ever pick an offered
//! coding or identity; a well-formed list is decided as RFC 9110 §12.5.3 says, whatever its
//! spelling (case, whitespace, q-value digits) and however it is split into field lines (§5.3).

use proptest::prelude::*;
use proptest::sample::subsequence;

use super::*;
use crate::proptest_config::cases;

/// Tokens a list element may carry: every coding's names, `*`, and codings nobody offers.
const TOKENS: [&str; 10] = [
    "gzip",
    "x-gzip",
    "br",
    "zstd",
    "deflate",
    "identity",
    "*",
    "compress",
    "x-compress",
    "sdch",
];

/// One well-formed list element, before spelling: a token and its weight in thousandths.
#[derive(Debug, Clone)]
struct Element {
    token: &'static str,
    weight: Option<u16>,
}

/// The server's offer: any subset of the codings in any order, identity included or not.
fn offered() -> impl Strategy<Value = Vec<ContentCoding>> {
    subsequence(ContentCoding::ALL.to_vec(), 0..=ContentCoding::ALL.len()).prop_shuffle()
}

fn elements() -> impl Strategy<Value = Vec<Element>> {
    let element = (
        proptest::sample::select(TOKENS.to_vec()),
        proptest::option::of(0u16..=1000),
    )
        .prop_map(|(token, weight)| Element { token, weight });
    proptest::collection::vec(element, 0..8)
}

/// The spelling of one element: token case, whitespace around `;` and `=`, and how many
/// decimals the q-value is written with (§12.4.2 allows up to three, trailing zeros included).
#[derive(Debug, Clone)]
struct Spelling {
    upper: Vec<bool>,
    pad: [&'static str; 3],
    extra_decimals: usize,
    q_upper: bool,
}

fn spelling() -> impl Strategy<Value = Spelling> {
    let ws = proptest::sample::select(vec!["", " ", "\t", "  "]);
    (
        proptest::collection::vec(any::<bool>(), 12),
        [ws.clone(), ws.clone(), ws],
        0usize..=3,
        any::<bool>(),
    )
        .prop_map(|(upper, pad, extra_decimals, q_upper)| Spelling {
            upper,
            pad,
            extra_decimals,
            q_upper,
        })
}

/// A q-value in thousandths as text, with between its shortest form and three decimals.
fn qvalue(thousandths: u16, extra_decimals: usize) -> String {
    if thousandths == 1000 {
        return format!("1{}", ["", ".", ".0", ".000"][extra_decimals.min(3)]);
    }
    let digits = format!("{thousandths:03}");
    let shortest = digits.trim_end_matches('0').len();
    let decimals = (shortest + extra_decimals).min(3);
    if decimals == 0 {
        "0".to_string()
    } else {
        format!("0.{}", &digits[..decimals])
    }
}

fn render(element: &Element, s: &Spelling) -> String {
    let token: String = element
        .token
        .chars()
        .zip(s.upper.iter().cycle())
        .map(|(c, &up)| if up { c.to_ascii_uppercase() } else { c })
        .collect();
    let [a, b, c] = s.pad;
    match element.weight {
        None => format!("{a}{token}{c}"),
        Some(w) => {
            let q = if s.q_upper { "Q" } else { "q" };
            format!(
                "{a}{token}{b};{b}{q}{c}={c}{}{a}",
                qvalue(w, s.extra_decimals)
            )
        }
    }
}

/// What RFC 9110 §12.5.3 makes of a well-formed list, written from the rules rather than from
/// the parser: the first weight given to a coding (or its alias) counts, `*` covers every coding
/// not named, and identity is acceptable when not refused, ranking below any named weight.
fn rank(elements: &[Element], coding: ContentCoding) -> u16 {
    let weight_of = |matches: &dyn Fn(&str) -> bool| {
        elements
            .iter()
            .find(|e| matches(e.token))
            .map(|e| e.weight.unwrap_or(1000))
    };
    let named = weight_of(&|t| ContentCoding::from_token(t) == Some(coding));
    let star = weight_of(&|t| t == "*");
    match (named, star) {
        (Some(q), _) | (None, Some(q)) => 2 * q,
        (None, None) if coding == ContentCoding::Identity => 1,
        (None, None) => 0,
    }
}

/// The candidates in the server's order, identity last unless offered.
fn candidates(offered: &[ContentCoding]) -> Vec<ContentCoding> {
    let mut all = offered.to_vec();
    if !all.contains(&ContentCoding::Identity) {
        all.push(ContentCoding::Identity);
    }
    all
}

proptest! {
    #![proptest_config(cases(5000))]

    /// Any bytes, in any number of field lines: no panic, and only an offered coding or identity.
    #[test]
    fn any_bytes_pick_an_offered_coding_or_identity(
        fields in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..4),
        offered in offered(),
    ) {
        if let Negotiated::Use(coding) = negotiate_fields(fields.iter().map(Vec::as_slice), &offered) {
            prop_assert!(coding == ContentCoding::Identity || offered.contains(&coding));
        }
    }

    /// Bytes biased to the parser's alphabet (tokens, separators, quotes, escapes), where the
    /// interesting paths are.
    #[test]
    fn near_miss_fields_never_panic(
        field in proptest::string::string_regex(
            "([gzipbrstdenty*xX;,=qQ.0-9 \\t\"\\\\-]|gzip|br|zstd|identity|q=0\\.5){0,24}"
        ).unwrap(),
        offered in offered(),
    ) {
        if let Negotiated::Use(coding) = negotiate_fields([field.as_bytes()], &offered) {
            prop_assert!(coding == ContentCoding::Identity || offered.contains(&coding));
        }
    }

    /// A well-formed list gets the highest-ranked candidate, the server's order breaking ties
    /// (§12.5.3), or "not acceptable" when every candidate is refused.
    #[test]
    fn well_formed_lists_follow_rfc_9110_12_5_3(
        elements in elements(),
        spellings in proptest::collection::vec(spelling(), 8),
        offered in offered(),
    ) {
        let field: Vec<String> =
            elements.iter().zip(&spellings).map(|(e, s)| render(e, s)).collect();
        let field = field.join(",");
        let ranks: Vec<(ContentCoding, u16)> =
            candidates(&offered).into_iter().map(|c| (c, rank(&elements, c))).collect();
        match negotiate_fields([field.as_bytes()], &offered) {
            Negotiated::NotAcceptable => {
                prop_assert!(ranks.iter().all(|&(_, r)| r == 0), "{field:?}: {ranks:?}");
            }
            Negotiated::Use(chosen) => {
                let position = ranks.iter().position(|&(c, _)| c == chosen);
                prop_assert!(position.is_some(), "{field:?}: {chosen:?} is no candidate");
                let position = position.unwrap();
                let top = ranks[position].1;
                prop_assert!(top > 0, "{field:?}: {chosen:?} was refused");
                prop_assert!(ranks[..position].iter().all(|&(_, r)| r < top), "{field:?}: {ranks:?}");
                prop_assert!(ranks[position..].iter().all(|&(_, r)| r <= top), "{field:?}: {ranks:?}");
            }
        }
    }

    /// §5.3: several field lines are one list; splitting it anywhere between elements, or
    /// adding empty elements and codings nobody offers, changes nothing (§5.6.1, §12.5.3).
    #[test]
    fn field_lines_empty_elements_and_unknown_codings_change_nothing(
        elements in elements(),
        spelling in spelling(),
        cuts in proptest::collection::vec(any::<bool>(), 8),
        noise in proptest::collection::vec(
            proptest::sample::select(vec!["", " ", "compress;q=0.5", "foo;q=abc", "x;y=\"a,b\""]),
            8,
        ),
        offered in offered(),
    ) {
        let rendered: Vec<String> = elements.iter().map(|e| render(e, &spelling)).collect();
        let whole = rendered.join(",");
        let expected = negotiate_fields([whole.as_bytes()], &offered);

        let mut lines = vec![String::new()];
        for (i, element) in rendered.iter().enumerate() {
            let line = lines.last_mut().unwrap();
            if !line.is_empty() {
                line.push(',');
            }
            line.push_str(element);
            line.push(',');
            line.push_str(noise[i]);
            if cuts[i] {
                lines.push(String::new());
            }
        }
        let split = negotiate_fields(lines.iter().map(String::as_bytes), &offered);
        prop_assert_eq!(split, expected, "{:?} vs {:?}", whole, lines);
    }
}

/// The spelling helper itself: q-values are written as §12.4.2 allows.
#[test]
fn qvalue_spelling_is_valid_and_exact() {
    for thousandths in [0, 1, 10, 100, 500, 999, 1000] {
        for extra in 0..=3 {
            let text = qvalue(thousandths, extra);
            assert_eq!(parse_qvalue(text.as_bytes()), Some(thousandths), "{text}");
        }
    }
}
