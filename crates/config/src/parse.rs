//! The pipeline from text to [`Config`]: syntax, then serde into [`crate::raw`] while collecting
//! unknown keys, then validation. Each stage reports everything it can find; a stage that cannot
//! go on (a syntax error, a value of the wrong type) ends the run with what was found so far.

use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostics;
use crate::model::Config;
use crate::path::{KeyPath, Seg};
use crate::raw::RawConfig;
use crate::report::Reporter;
use crate::schema::{alias, name_hint, table_keys};
use crate::source::Document;
use crate::validate::{self, Cx};

/// The config and its warnings (valid but risky settings), or every problem found.
pub(crate) fn parse(source: &str, file: &Path) -> Result<(Config, Diagnostics), Diagnostics> {
    let (doc, syntax_errors) = Document::parse(source);
    let mut reporter = Reporter::default();
    if !syntax_errors.is_empty() {
        report_syntax(&mut reporter, &doc, syntax_errors);
        return Err(reporter.into_diagnostics(&doc, file));
    }
    let datetimes = report_datetimes(&mut reporter, &doc);
    // A date-time is a value of the wrong type: like serde's type errors, it stops the run
    // before validation, which would only add follow-on errors about the same value.
    let raw = deserialize(source, &doc, &datetimes, &mut reporter).filter(|_| datetimes.is_empty());
    let config = raw.and_then(|raw| {
        let mut cx = Cx {
            r: &mut reporter,
            base: base_dir(file),
        };
        validate::config(raw, &mut cx)
    });
    match config {
        Some(config) if reporter.is_empty() => Ok((config, reporter.into_diagnostics(&doc, file))),
        _ => Err(reporter.into_diagnostics(&doc, file)),
    }
}

/// Where relative paths start: the config file's directory, or the current one for a bare file
/// name (`Path::parent` gives `""` for it, which joins as the current directory).
fn base_dir(file: &Path) -> PathBuf {
    file.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn report_syntax(reporter: &mut Reporter, doc: &Document<'_>, errors: Vec<toml::de::Error>) {
    // Recovery can report one mistake more than once at the same place.
    let mut seen = Vec::new();
    for error in errors {
        let key = (error.span(), error.message().to_owned());
        if seen.contains(&key) {
            continue;
        }
        let path = error
            .span()
            .map(|s| doc.path_at(s.start))
            .unwrap_or_default();
        reporter.error(
            &path,
            error.span(),
            error.message(),
            syntax_hint(error.message()),
        );
        seen.push(key);
    }
}

/// The key serde shows a TOML date-time's value under: the deserializer hands a date-time out
/// as a table with this one key.
const TOML_DATETIME_KEY: &str = "$__toml_private_datetime";

/// TOML date-times (`at = 1979-05-27`, `timeout = 07:32:00`) are values of no key, and serde
/// would call one "an unknown key `$__toml_private_datetime`" or "a map": say what it is, at its
/// place. Returns their spans, so the serde pass does not report them again.
fn report_datetimes(reporter: &mut Reporter, doc: &Document<'_>) -> Vec<Range<usize>> {
    let datetimes = doc.datetimes();
    for (path, span) in &datetimes {
        reporter.error(
            path,
            Some(span.clone()),
            "a TOML date-time is not a valid value here",
            Some(r#"text values go in quotes, e.g. timeout = "30s""#.into()),
        );
    }
    datetimes.into_iter().map(|(_, span)| span).collect()
}

/// Serde pass: unknown keys are reported (with the closest valid key) and skipped; a value of the
/// wrong type stops it, and is reported at its place (unless it is one of the already reported
/// `datetimes`).
fn deserialize(
    source: &str,
    doc: &Document<'_>,
    datetimes: &[Range<usize>],
    reporter: &mut Reporter,
) -> Option<RawConfig> {
    let mut unknown = Vec::new();
    let result = toml::de::Deserializer::parse(source).and_then(|de| {
        serde_ignored::deserialize(de, |path| unknown.push(KeyPath::from_ignored(&path)))
    });
    for path in &unknown {
        if matches!(path.split_last(), Some((Seg::Key(key), _)) if key == TOML_DATETIME_KEY) {
            continue;
        }
        report_unknown(reporter, path);
    }
    match result {
        Ok(raw) => Some(raw),
        Err(error)
            if error
                .span()
                .is_some_and(|s| datetimes.iter().any(|d| d.start == s.start)) =>
        {
            None
        }
        Err(error) => {
            let path = error
                .span()
                .map(|s| doc.path_at(s.start))
                .unwrap_or_default();
            let hint = type_hint(error.message());
            reporter.error(&path, error.span(), error.message(), hint);
            None
        }
    }
}

fn report_unknown(reporter: &mut Reporter, path: &KeyPath) {
    let Some((Seg::Key(key), table)) = path.split_last() else {
        reporter.error(path, None, format!("unexpected value at {path}"), None);
        return;
    };
    let message = if table.is_root() {
        format!("unknown key `{key}` at the top level")
    } else {
        format!("unknown key `{key}` in {table}")
    };
    let alias = alias(&table, key).map(|(meant, hint)| {
        reporter.note_misspelling(&table, meant);
        hint
    });
    let hint = alias.or_else(|| misplaced(&table, key)).or_else(|| {
        table_keys(&table).map(|keys| {
            let (best, hint) = name_hint(key, keys);
            if let Some(best) = best {
                reporter.note_misspelling(&table, best);
            }
            hint
        })
    });
    reporter.key_error(path, message, hint);
}

/// A key of the enclosing table written inside one of its sub-tables, such as a route's
/// `cache` inside its `proxy = { ... }`: the hint says where it goes, rather than listing keys
/// the sub-table has.
fn misplaced(table: &KeyPath, key: &str) -> Option<String> {
    let (Seg::Key(inner), parent) = table.split_last()? else {
        return None;
    };
    if !table_keys(&parent)?.contains(&key) {
        return None;
    }
    let owner = if parent.is_root() {
        "the top level".to_owned()
    } else {
        format!("`{parent}`")
    };
    Some(format!(
        "`{key}` is a key of {owner}, not of `{inner}`: write it beside `{inner}`"
    ))
}

/// How to fix the usual syntax slips: text without quotes (which TOML reads as a broken number,
/// date or bare word) and a key given twice.
fn syntax_hint(message: &str) -> Option<String> {
    let unquoted = [
        "invalid float",
        "invalid integer",
        "must be quoted",
        "invalid datetime",
    ];
    if unquoted.iter().any(|m| message.contains(m)) {
        Some(r#"text values go in quotes, e.g. address = "127.0.0.1:8080""#.into())
    } else if message.contains("duplicate key") {
        Some("a key may appear only once in a table".into())
    } else {
        None
    }
}

/// How to fix the common type mix-ups serde reports.
fn type_hint(message: &str) -> Option<String> {
    if message.contains("expected a boolean") {
        Some("write true or false, without quotes".into())
    } else if message.contains("expected a string,") || message.ends_with("expected a string") {
        Some("put the value in quotes".into())
    } else if message.contains("expected a sequence") {
        Some("write an array: [...]".into())
    } else {
        None
    }
}
