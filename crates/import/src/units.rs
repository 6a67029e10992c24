//! nginx's sizes and times, in sluice's spelling.

/// `10m` → `"10MiB"`, `512k` → `"512KiB"`, `100` → `100` bytes. nginx's `k`/`m`/`g` are
/// powers of 1024 (ngx_parse_size).
pub fn size(text: &str) -> Option<SizeOut> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], Some(c.to_ascii_lowercase())),
        _ => (text, None),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    match unit {
        None => Some(SizeOut::Bytes(n)),
        Some('k') => Some(SizeOut::Text(format!("{n}KiB"))),
        Some('m') => Some(SizeOut::Text(format!("{n}MiB"))),
        Some('g') => Some(SizeOut::Text(format!("{n}GiB"))),
        _ => None,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeOut {
    Bytes(u64),
    Text(String),
}

/// nginx's time (`30s`, `1m`, `500ms`, `1h30m`, a bare number of seconds) in milliseconds
/// (ngx_parse_time: `ms s m h d w M y`, a month 30 days, a year 365).
pub fn time_ms(text: &str) -> Option<u64> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.chars().all(|c| c.is_ascii_digit()) {
        return text.parse::<u64>().ok()?.checked_mul(1000);
    }
    let mut total: u64 = 0;
    let mut chars = text.chars().peekable();
    while chars.peek().is_some() {
        let mut n: u64 = 0;
        let mut any = false;
        while let Some(&c) = chars.peek() {
            let Some(d) = c.to_digit(10) else { break };
            n = n.checked_mul(10)?.checked_add(u64::from(d))?;
            any = true;
            chars.next();
        }
        if !any {
            return None;
        }
        let unit_ms: u64 = match chars.next()? {
            'm' if chars.peek() == Some(&'s') => {
                chars.next();
                1
            }
            's' => 1000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            'w' => 7 * 86_400_000,
            'M' => 30 * 86_400_000,
            'y' => 365 * 86_400_000,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(unit_ms)?)?;
    }
    Some(total)
}

/// Milliseconds as sluice writes a duration: the largest unit that divides them.
pub fn duration(ms: u64) -> String {
    if ms == 0 {
        return "0s".into();
    }
    for (unit, len) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms.is_multiple_of(len) {
            return format!("{}{unit}", ms / len);
        }
    }
    format!("{ms}ms")
}

/// nginx time text → sluice duration text.
pub fn time(text: &str) -> Option<String> {
    time_ms(text).map(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times() {
        assert_eq!(size("10m"), Some(SizeOut::Text("10MiB".into())));
        assert_eq!(size("1K"), Some(SizeOut::Text("1KiB".into())));
        assert_eq!(size("0"), Some(SizeOut::Bytes(0)));
        assert_eq!(size("1.5m"), None);
        assert_eq!(size("m"), None);
        assert_eq!(time("30"), Some("30s".into()));
        assert_eq!(time("90s"), Some("90s".into()));
        assert_eq!(time("120s"), Some("2m".into()));
        assert_eq!(time("1h30m"), Some("90m".into()));
        assert_eq!(time("500ms"), Some("500ms".into()));
        assert_eq!(time("1M"), Some("30d".into()));
        assert_eq!(time("5x"), None);
        assert_eq!(time("99999999999999999999d"), None);
    }
}
