//! Duration and size syntax, shared by the config file and the command line.
//!
//! Durations always carry a unit (`"30s"`, `"250ms"`, `"1m 30s"`): a bare `30` is ambiguous
//! between seconds and milliseconds, so it is refused with a hint. Sizes are bytes, optionally
//! with a case-sensitive unit: binary `KiB`/`MiB`/`GiB`/`TiB` (1024) or decimal `KB`/`MB`/`GB`/`TB`
//! (1000). Sloppy units like `k` or `mb` are refused because nobody can tell which one was meant.

use std::fmt;
use std::time::Duration;

/// A rejected duration or size: what is wrong, and how to write it instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnitError {
    pub message: String,
    pub hint: Option<String>,
}

impl UnitError {
    fn new(message: String, hint: impl Into<Option<String>>) -> Self {
        Self {
            message,
            hint: hint.into(),
        }
    }
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        match &self.hint {
            Some(hint) => write!(f, " ({hint})"),
            None => Ok(()),
        }
    }
}

/// Parses a duration such as `"5s"`, `"250ms"` or `"1m 30s"` (humantime syntax).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    duration(text).map_err(|e| e.to_string())
}

/// Parses a size in bytes: `"512"`, `"64KiB"`, `"10MiB"`, `"1GiB"`, `"10KB"`, `"10MB"`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    size(text).map_err(|e| e.to_string())
}

const DURATION_EXAMPLES: &str = r#"examples: "250ms", "30s", "1m 30s""#;

pub(crate) fn duration(text: &str) -> Result<Duration, UnitError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(UnitError::new(
            "empty duration".into(),
            DURATION_EXAMPLES.to_owned(),
        ));
    }
    if t.chars().all(|c| c.is_ascii_digit()) {
        return Err(UnitError::new(
            format!("duration `{t}` has no unit"),
            format!(r#"write "{t}s""#),
        ));
    }
    let parsed = humantime::parse_duration(t).map_err(|e| {
        UnitError::new(
            format!("invalid duration `{t}`: {e}"),
            DURATION_EXAMPLES.to_owned(),
        )
    })?;
    // Timers add durations to the clock; one this long would overflow it (and no timeout or
    // lifetime is meant to outlast a deployment).
    if parsed > MAX_DURATION {
        return Err(UnitError::new(
            format!("duration `{t}` is too long"),
            "at most 10 years (\"3650d\")".to_owned(),
        ));
    }
    Ok(parsed)
}

/// The longest duration a config may give: 10 years.
const MAX_DURATION: Duration = Duration::from_secs(3650 * 24 * 3600);

/// (unit, bytes) in the order they are listed in hints.
const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
];

const SIZE_EXAMPLES: &str =
    r#"write bytes or a number with a unit: "512", "64KiB", "10MiB", "10MB""#;

pub(crate) fn size(text: &str) -> Result<u64, UnitError> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = (&t[..digits_end], t[digits_end..].trim_start());
    if digits.is_empty() {
        return Err(UnitError::new(
            format!("invalid size `{t}`"),
            SIZE_EXAMPLES.to_owned(),
        ));
    }
    if unit.starts_with(['.', ',']) {
        return Err(UnitError::new(
            format!("invalid size `{t}`: fractions are not supported"),
            r#"use a smaller unit, e.g. "1536KiB" instead of "1.5MiB""#.to_owned(),
        ));
    }
    let too_large = || UnitError::new(format!("size `{t}` is too large"), None);
    let number: u64 = digits.parse().map_err(|_| too_large())?;
    let multiplier = match unit {
        "" => 1,
        unit => match SIZE_UNITS.iter().find(|(name, _)| *name == unit) {
            Some((_, bytes)) => *bytes,
            None => return Err(unknown_unit(t, digits, unit)),
        },
    };
    number.checked_mul(multiplier).ok_or_else(too_large)
}

fn unknown_unit(text: &str, digits: &str, unit: &str) -> UnitError {
    let message = format!("invalid size `{text}`: unknown unit `{unit}`");
    let lower = unit.to_ascii_lowercase();
    // A binary unit right but for its case (`kib`) has one reading; a bare prefix (`k`) or a
    // decimal-looking one (`kb`, often meant as KiB) has two, so offer both.
    let unambiguous = lower == "b" || lower.contains('i');
    let same_but_case = SIZE_UNITS
        .iter()
        .find(|(name, _)| name.to_ascii_lowercase() == lower);
    if let (true, Some((name, _))) = (unambiguous, same_but_case) {
        let hint = format!(r#"units are case-sensitive: write "{digits}{name}""#);
        return UnitError::new(message, hint);
    }
    let prefix = lower.trim_end_matches(['b', 'i']);
    let binary = SIZE_UNITS
        .iter()
        .find(|(name, _)| name.to_ascii_lowercase() == format!("{prefix}ib"));
    let decimal = SIZE_UNITS
        .iter()
        .find(|(name, _)| name.to_ascii_lowercase() == format!("{prefix}b"));
    let hint = match (binary, decimal) {
        (Some((bin, _)), Some((dec, _))) => format!(
            r#"write "{digits}{bin}" (binary, 1024-based) or "{digits}{dec}" (decimal, 1000-based); units are case-sensitive"#
        ),
        _ => "units are B, KiB, MiB, GiB, TiB (powers of 1024) and KB, MB, GB, TB (powers of 1000)"
            .to_owned(),
    };
    UnitError::new(message, hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_longer_than_ten_years_are_refused() {
        assert_eq!(
            parse_duration("3650d"),
            Ok(Duration::from_secs(3650 * 24 * 3600))
        );
        assert!(parse_duration("3651d").unwrap_err().contains("too long"));
        assert!(parse_duration("300000000000y").is_err());
    }

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration(" 1m 30s "), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        let bare = duration("30").unwrap_err();
        assert_eq!(bare.message, "duration `30` has no unit");
        assert_eq!(bare.hint.as_deref(), Some(r#"write "30s""#));
        assert_eq!(
            parse_duration("30"),
            Err(r#"duration `30` has no unit (write "30s")"#.into())
        );
    }

    #[test]
    fn bad_durations_are_explained() {
        let e = duration("5 parsecs").unwrap_err();
        assert!(
            e.message
                .starts_with("invalid duration `5 parsecs`: unknown time unit"),
            "{e}"
        );
        assert_eq!(e.hint.as_deref(), Some(DURATION_EXAMPLES));
        assert!(duration("").is_err());
        assert!(duration("-5s").is_err());
        assert!(duration("s").is_err());
    }

    #[test]
    fn sizes_with_and_without_units() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("64KiB"), Ok(65_536));
        assert_eq!(parse_size("64 KiB"), Ok(65_536));
        assert_eq!(parse_size("10MiB"), Ok(10 * 1024 * 1024));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("10KB"), Ok(10_000));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert_eq!(parse_size("3B"), Ok(3));
    }

    #[test]
    fn sloppy_units_get_a_hint() {
        let e = size("10k").unwrap_err();
        assert_eq!(e.message, "invalid size `10k`: unknown unit `k`");
        assert_eq!(
            e.hint.as_deref(),
            Some(
                r#"write "10KiB" (binary, 1024-based) or "10KB" (decimal, 1000-based); units are case-sensitive"#
            )
        );
        assert!(
            size("10mb")
                .unwrap_err()
                .hint
                .unwrap()
                .starts_with(r#"write "10MiB" (binary"#)
        );
        let e = size("10mib").unwrap_err();
        assert_eq!(
            e.hint.as_deref(),
            Some(r#"units are case-sensitive: write "10MiB""#)
        );
        let e = size("10 furlongs").unwrap_err();
        assert!(e.hint.unwrap().starts_with("units are B, KiB"));
    }

    #[test]
    fn rejects_fractions_overflow_and_garbage() {
        assert!(
            size("1.5MiB")
                .unwrap_err()
                .hint
                .unwrap()
                .contains("1536KiB")
        );
        assert!(
            size("99999999999999999999")
                .unwrap_err()
                .message
                .contains("too large")
        );
        assert!(
            size("20000000TiB")
                .unwrap_err()
                .message
                .contains("too large")
        );
        assert_eq!(
            size("lots").unwrap_err().hint.as_deref(),
            Some(SIZE_EXAMPLES)
        );
        assert!(size("").is_err());
        assert!(size("-1").is_err());
    }
}
