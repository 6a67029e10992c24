//! Read back the metrics exposition that [`crate::shared::metrics::Metrics::render`] writes, so
//! the status page shows the very counters Prometheus scrapes and nothing is counted twice.
//!
//! prometheus-client keeps its families' contents private (no iteration), and its only encoder
//! writes text, so the page is derived from that text. Hand-written because it reads only our
//! own output, which is one sample per line, `name{label="value",...} number` (labels escaped
//! as OpenMetrics says: `\\`, `\"`, `\n`), plus `#` comment lines; the general-purpose parser
//! crates are unmaintained or pull in far more than this needs. Lines it does not understand are
//! skipped, so odd input cannot make it panic.

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, or "" when absent.
    pub fn label(&self, key: &str) -> &str {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// Every sample of `text`, in order.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(['{', ' '])?;
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(after)?;
        labels = parsed;
        rest = after;
    }
    // `value` then, optionally, a timestamp or an exemplar: the value is the first field.
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().ok()?,
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `key="value",...}` → the pairs and what follows the `}`.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start_matches(',');
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].to_owned();
        s = s[eq + 1..].strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '"' => break i,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                c => value.push(c),
            }
        };
        labels.push((key, value));
        s = &s[end + 1..];
    }
}

/// The `q` quantile (0..1) of a cumulative histogram given as `(upper bound, count)` pairs in
/// bound order (the last one `+Inf`), interpolated linearly within the bucket as Prometheus's
/// `histogram_quantile` does; `None` with no observations. A quantile in the `+Inf` bucket is
/// reported as the highest finite bound.
pub fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(bound, count) in buckets {
        if count >= rank {
            if bound.is_infinite() {
                return Some(lower.0);
            }
            let in_bucket = count - lower.1;
            if in_bucket <= 0.0 {
                return Some(bound);
            }
            return Some(lower.0 + (bound - lower.0) * (rank - lower.1) / in_bucket);
        }
        lower = (bound, count);
    }
    Some(lower.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_labels_escapes_and_values() {
        let text = "# HELP x y\n# TYPE x counter\nsluice_requests_total{route=\"a \\\"b\\\" \\\\ c\\nd\",code=\"2xx\"} 3\nsluice_build_info 1\nbad line\nh_bucket{le=\"+Inf\"} 7\nweird{a=\"unterminated} 1\n# EOF\n";
        let samples = parse(text);
        assert_eq!(samples.len(), 3, "{samples:?}");
        assert_eq!(samples[0].name, "sluice_requests_total");
        assert_eq!(samples[0].label("route"), "a \"b\" \\ c\nd");
        assert_eq!(samples[0].label("code"), "2xx");
        assert_eq!(samples[0].value, 3.0);
        assert_eq!(samples[1].name, "sluice_build_info");
        assert_eq!(samples[2].label("le"), "+Inf");
        assert_eq!(samples[2].value, 7.0);
    }

    #[test]
    fn quantiles_interpolate_like_histogram_quantile() {
        let b = [(0.1, 50.0), (0.2, 100.0), (f64::INFINITY, 100.0)];
        assert_eq!(quantile(&b, 0.5), Some(0.1));
        assert!((quantile(&b, 0.75).unwrap() - 0.15).abs() < 1e-9);
        assert_eq!(quantile(&[(0.1, 0.0), (f64::INFINITY, 0.0)], 0.5), None);
        assert_eq!(
            quantile(&[(0.1, 0.0), (f64::INFINITY, 4.0)], 0.99),
            Some(0.1)
        );
        assert_eq!(quantile(&[], 0.5), None);
    }
}
