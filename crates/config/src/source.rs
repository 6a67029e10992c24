//! The spanned view of the document: where each key and value is, so that any problem can be
//! shown at its line and column.
//!
//! The serde pass (into [`crate::raw`]) only keeps spans of the leaf values it wraps in
//! `toml::Spanned`. Unknown keys, missing keys and table-level mistakes have no such span, so they
//! are found here by their [`KeyPath`] instead, and a serde type error (which knows its span but
//! not its key) gets its key path from here.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::path::{KeyPath, Seg};

/// A parsed document and its source text.
pub(crate) struct Document<'a> {
    text: &'a str,
    root: Spanned<DeValue<'a>>,
}

/// What part of an entry a problem points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// The key (`adress` in `adress = "..."`): for unknown or misnamed keys.
    Key,
    /// The value, or a table's header: for everything else.
    Value,
}

impl<'a> Document<'a> {
    /// Parses `text`, recovering from syntax errors so that all of them can be reported.
    pub(crate) fn parse(text: &'a str) -> (Self, Vec<toml::de::Error>) {
        let (table, errors) = DeTable::parse_recoverable(text);
        let span = table.span();
        let root = Spanned::new(span, DeValue::Table(table.into_inner()));
        (Self { text, root }, errors)
    }

    pub(crate) fn text(&self) -> &'a str {
        self.text
    }

    /// The span of `path`'s key or value. When the path does not exist (a missing key), the
    /// deepest existing ancestor's value is used: the table the key is missing from. `None` when
    /// not even the first step exists.
    pub(crate) fn locate(&self, path: &KeyPath, part: Part) -> Option<Range<usize>> {
        let mut value = &self.root;
        let mut found: Option<Range<usize>> = None;
        let segs = path.segs();
        for (i, seg) in segs.iter().enumerate() {
            let last = i + 1 == segs.len();
            let (key_span, next) = match (seg, value.get_ref()) {
                (Seg::Key(key), DeValue::Table(table)) => match table.get_key_value(key.as_str()) {
                    Some((k, v)) => (Some(k.span()), v),
                    None => return found,
                },
                (Seg::Index(index), DeValue::Array(array)) => match array.get(*index) {
                    Some(v) => (None, v),
                    None => return found,
                },
                _ => return found,
            };
            value = next;
            found = match (last, part, key_span) {
                (true, Part::Key, Some(span)) => Some(span),
                _ => Some(value.span()),
            };
        }
        found
    }

    /// The key path of the most specific entry whose key or value covers `offset`. A table's
    /// span covers only its header, so every entry is visited rather than descending by span.
    pub(crate) fn path_at(&self, offset: usize) -> KeyPath {
        let mut best: Option<(usize, KeyPath)> = None;
        visit(&self.root, &KeyPath::root(), &mut |path, key, value| {
            for span in key.into_iter().chain([value]) {
                let covers = span.start <= offset && offset < span.end.max(span.start + 1);
                let len = span.end - span.start;
                if covers && best.as_ref().is_none_or(|(best_len, _)| len <= *best_len) {
                    best = Some((len, path.clone()));
                }
            }
        });
        best.map(|(_, path)| path).unwrap_or_default()
    }
}

impl Document<'_> {
    /// Every TOML date-time value, with its key path and span. No key of the schema takes one,
    /// and serde would show one as a table with a private key (see `parse.rs`).
    pub(crate) fn datetimes(&self) -> Vec<(KeyPath, Range<usize>)> {
        fn walk(
            value: &Spanned<DeValue<'_>>,
            path: &KeyPath,
            out: &mut Vec<(KeyPath, Range<usize>)>,
        ) {
            match value.get_ref() {
                DeValue::Datetime(_) => out.push((path.clone(), value.span())),
                DeValue::Table(table) => {
                    for (key, child) in table.iter() {
                        walk(child, &path.key(key.get_ref()), out);
                    }
                }
                DeValue::Array(array) => {
                    for (index, child) in array.iter().enumerate() {
                        walk(child, &path.index(index), out);
                    }
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &KeyPath::root(), &mut out);
        out
    }
}

/// Called with an entry's path, key span (none for array elements) and value span.
type Visitor<'f> = dyn FnMut(&KeyPath, Option<Range<usize>>, Range<usize>) + 'f;

/// Calls `f` for every entry below `value`.
fn visit(value: &Spanned<DeValue<'_>>, path: &KeyPath, f: &mut Visitor<'_>) {
    match value.get_ref() {
        DeValue::Table(table) => {
            for (key, child) in table.iter() {
                let child_path = path.key(key.get_ref());
                f(&child_path, Some(key.span()), child.span());
                visit(child, &child_path, f);
            }
        }
        DeValue::Array(array) => {
            for (index, child) in array.iter().enumerate() {
                let child_path = path.index(index);
                f(&child_path, None, child.span());
                visit(child, &child_path, f);
            }
        }
        _ => {}
    }
}

/// A span turned into what a person reads: 1-based line and column (in characters), the line's
/// text, and how many characters of it to underline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineCol {
    pub line: usize,
    pub column: usize,
    pub text: String,
    pub width: usize,
}

pub(crate) fn line_col(text: &str, span: &Range<usize>) -> LineCol {
    let start = floor_char_boundary(text, span.start.min(text.len()));
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line_text = text[line_start..line_end].trim_end_matches('\r');
    // The snippet leaves a line's `\r` out (of a CRLF, or a stray one that TOML rejects), so a
    // span on or past it is shown at the end of the visible text, not at a column beyond it.
    let visible_end = line_start + line_text.len();
    let start = start.min(visible_end);
    let end = floor_char_boundary(text, span.end.clamp(start, visible_end));
    LineCol {
        line: text[..line_start].matches('\n').count() + 1,
        column: text[line_start..start].chars().count() + 1,
        text: line_text.to_owned(),
        // Underline at least one character, and never past the end of the first line: a table's
        // span may run over several lines.
        width: text[start..end].chars().count().max(1),
    }
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "[server]\nworkers = 2\n\n[[listeners]]\nadress = \"x\"\n\n[[listeners]]\ntls = { cert = \"c\" }\n";

    #[test]
    fn locates_keys_values_and_missing_keys() {
        let (doc, errors) = Document::parse(DOC);
        assert!(errors.is_empty());
        let at = |path: &KeyPath, part| line_col(DOC, &doc.locate(path, part).unwrap());
        let workers = KeyPath::root().key("server").key("workers");
        assert_eq!(at(&workers, Part::Value).column, 11);
        assert_eq!(at(&workers, Part::Key).column, 1);
        let adress = KeyPath::root().key("listeners").index(0).key("adress");
        assert_eq!(
            (at(&adress, Part::Key).line, at(&adress, Part::Key).width),
            (5, 6)
        );
        // A missing key points at its table's header.
        let missing = KeyPath::root().key("listeners").index(1).key("address");
        let header = at(&missing, Part::Value);
        assert_eq!((header.line, header.text.as_str()), (7, "[[listeners]]"));
        let cert = KeyPath::root()
            .key("listeners")
            .index(1)
            .key("tls")
            .key("cert");
        assert_eq!(at(&cert, Part::Value).column, 16);
        assert!(
            doc.locate(&KeyPath::root().key("routes"), Part::Value)
                .is_none()
        );
    }

    #[test]
    fn finds_the_path_at_an_offset() {
        let (doc, _) = Document::parse(DOC);
        let offset = DOC.find("\"c\"").unwrap();
        assert_eq!(doc.path_at(offset).to_string(), "listeners[1].tls.cert");
        let offset = DOC.find('2').unwrap();
        assert_eq!(doc.path_at(offset).to_string(), "server.workers");
    }

    /// Found by `proptest.rs`: a syntax error on a `\r` was placed one column past the end of
    /// the line the snippet shows (`"\r"` alone: line 1, column 2 of an empty line).
    #[test]
    fn a_span_on_a_carriage_return_stays_inside_the_shown_line() {
        let lc = line_col("\r", &(1..1));
        assert_eq!(
            (lc.line, lc.column, lc.text.as_str(), lc.width),
            (1, 1, "", 1)
        );
        let text = "[.\"\r\nb = 1";
        let lc = line_col(text, &(3..5));
        assert_eq!(
            (lc.line, lc.column, lc.text.as_str(), lc.width),
            (1, 4, "[.\"", 1)
        );
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let text = "name = \"héé\" # x\nb = 1";
        let start = text.find('#').unwrap();
        let lc = line_col(text, &(start..start + 1));
        assert_eq!((lc.line, lc.column, lc.width), (1, 14, 1));
        let lc = line_col(text, &(0..text.len()));
        assert_eq!(lc.width, 16, "clipped to the first line");
    }
}
