//! Collecting problems while parsing and validating, and turning them into [`Diagnostics`].
//!
//! A [`Problem`] is a diagnostic before it has a line and column: its key path and, when known,
//! its span. [`Reporter`] gathers them all (validation never stops at the first), then places each
//! in the document and sorts them into file order.

use std::ops::Range;
use std::path::Path;

use crate::diagnostic::{Diagnostic, Diagnostics, Severity, Snippet};
use crate::path::KeyPath;
use crate::source::{Document, Part, line_col};

/// One problem, not yet placed.
#[derive(Debug, Clone)]
pub(crate) struct Problem {
    pub path: KeyPath,
    /// Its exact place when the raw value carried one; otherwise found by `path` and `part`.
    pub span: Option<Range<usize>>,
    pub part: Part,
    pub message: String,
    pub hint: Option<String>,
    pub severity: Severity,
}

/// Gathers problems; validation code reports into it and carries on.
#[derive(Debug, Default)]
pub(crate) struct Reporter {
    problems: Vec<Problem>,
    /// Valid but risky settings; they do not stop the file from loading.
    warnings: Vec<Problem>,
    /// `(table, key)` for unknown keys that look like a misspelt `key` of `table`: the key is
    /// then not also reported as missing.
    misspelt: Vec<(KeyPath, String)>,
}

impl Reporter {
    /// Reports a problem at a value's span (or, without one, at `path`).
    pub(crate) fn error(
        &mut self,
        path: &KeyPath,
        span: Option<Range<usize>>,
        message: impl Into<String>,
        hint: Option<String>,
    ) {
        self.problems.push(Problem {
            path: path.clone(),
            span,
            part: Part::Value,
            message: message.into(),
            hint,
            severity: Severity::Error,
        });
    }

    /// Warns about a valid but risky value (at its span, or at `path`).
    pub(crate) fn warn(
        &mut self,
        path: &KeyPath,
        span: Option<Range<usize>>,
        message: impl Into<String>,
        hint: Option<String>,
    ) {
        self.warnings.push(Problem {
            path: path.clone(),
            span,
            part: Part::Value,
            message: message.into(),
            hint,
            severity: Severity::Warning,
        });
    }

    /// Reports a problem with a key itself (an unknown key, a bad header name).
    pub(crate) fn key_error(
        &mut self,
        path: &KeyPath,
        message: impl Into<String>,
        hint: Option<String>,
    ) {
        self.problems.push(Problem {
            path: path.clone(),
            span: None,
            part: Part::Key,
            message: message.into(),
            hint,
            severity: Severity::Error,
        });
    }

    /// Records that an unknown key in `table` was probably meant as `key`.
    pub(crate) fn note_misspelling(&mut self, table: &KeyPath, key: &str) {
        self.misspelt.push((table.clone(), key.to_owned()));
    }

    /// Whether any of `keys` of `table` was already reported as misspelt.
    pub(crate) fn misspelt(&self, table: &KeyPath, keys: &[&str]) -> bool {
        self.misspelt
            .iter()
            .any(|(t, k)| t == table && keys.contains(&k.as_str()))
    }

    /// Reports that a required key is missing from `table`, unless it was misspelt (already
    /// reported, with the right name as its hint).
    pub(crate) fn missing(&mut self, table: &KeyPath, key: &str, hint: Option<String>) {
        if !self.misspelt(table, &[key]) {
            let where_ = if table.is_root() {
                String::new()
            } else {
                format!(" in {table}")
            };
            self.error(
                &table.key(key),
                None,
                format!("missing `{key}`{where_}"),
                hint,
            );
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.problems.is_empty()
    }

    /// How many problems have been reported so far: a check that compares two values can skip
    /// itself when either was just reported.
    pub(crate) fn len(&self) -> usize {
        self.problems.len()
    }

    /// Places every problem (errors and warnings) in `doc` and returns them in file order;
    /// problems without a place come last.
    pub(crate) fn into_diagnostics(self, doc: &Document<'_>, file: &Path) -> Diagnostics {
        let mut placed: Vec<(Option<usize>, Diagnostic)> = self
            .problems
            .into_iter()
            .chain(self.warnings)
            .map(|problem| {
                let span = problem
                    .span
                    .clone()
                    .or_else(|| doc.locate(&problem.path, problem.part));
                (
                    span.as_ref().map(|s| s.start),
                    place(problem, span, doc, file),
                )
            })
            .collect();
        placed.sort_by_key(|(start, _)| start.unwrap_or(usize::MAX));
        Diagnostics::new(placed.into_iter().map(|(_, d)| d).collect())
    }
}

fn place(
    problem: Problem,
    span: Option<Range<usize>>,
    doc: &Document<'_>,
    file: &Path,
) -> Diagnostic {
    let mut diagnostic = Diagnostic::whole_file(file, problem.message, problem.hint);
    diagnostic.key_path = problem.path.to_string();
    diagnostic.severity = problem.severity;
    if let Some(span) = span {
        let at = line_col(doc.text(), &span);
        diagnostic.line = at.line;
        diagnostic.column = at.column;
        diagnostic.snippet = Some(Snippet {
            text: at.text,
            width: at.width,
        });
    }
    diagnostic
}
