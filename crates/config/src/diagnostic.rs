//! What a configuration error looks like to its reader: file, line, column, key path, message
//! and a hint, rendered like a compiler error with the offending line underlined.
//!
//! [`Diagnostics`] is the error type of [`crate::load`] and [`crate::parse_str`]; it always holds
//! every problem found, so a person fixes their file in one round. A [`Severity::Warning`] is a
//! valid but risky setting (certificate checks turned off, say): [`crate::check`] returns them
//! beside the config, and they come along with the errors of an invalid file.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file as it was given (shown as is, so a relative path stays relative).
    pub file: PathBuf,
    /// 1-based line; 0 when the problem has no place in the file (unreadable file, missing table).
    pub line: usize,
    /// 1-based column, counted in characters; 0 when `line` is 0.
    pub column: usize,
    /// Where in the document, e.g. `listeners[0].address`; empty for the whole document.
    pub key_path: String,
    pub message: String,
    pub hint: Option<String>,
    /// The source line and how much of it to underline, when the problem has a place.
    pub snippet: Option<Snippet>,
    pub severity: Severity,
}

/// Whether a diagnostic stops the file from loading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Severity {
    /// The file is invalid.
    #[default]
    Error,
    /// Valid, but probably not what should run in production.
    Warning,
}

/// The line a [`Diagnostic`] points into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    /// The full source line, without its line ending.
    pub text: String,
    /// How many characters to underline from `column`, at least 1.
    pub width: usize,
}

impl Diagnostic {
    /// A problem about the file as a whole, e.g. that it cannot be read.
    pub fn whole_file(file: &Path, message: impl Into<String>, hint: Option<String>) -> Self {
        Self {
            file: file.to_path_buf(),
            line: 0,
            column: 0,
            key_path: String::new(),
            message: message.into(),
            hint,
            snippet: None,
            severity: Severity::Error,
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The gutter is as wide as the line number, plus one space of margin like the example in
        // docs/config.md.
        let number = if self.line > 0 {
            self.line.to_string()
        } else {
            String::new()
        };
        let pad = " ".repeat(number.len().max(1) + 1);
        let label = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        writeln!(f, "{label}: {}", self.message)?;
        if self.line == 0 {
            writeln!(f, "{pad}--> {}", self.file.display())?;
        } else {
            writeln!(
                f,
                "{pad}--> {}:{}:{}",
                self.file.display(),
                self.line,
                self.column
            )?;
        }
        if let Some(snippet) = &self.snippet {
            // Tabs would throw the underline off; one space each keeps columns aligned.
            let text = snippet.text.replace('\t', " ");
            writeln!(f, "{pad} |")?;
            writeln!(f, " {number} | {text}")?;
            let indent = " ".repeat(self.column.saturating_sub(1));
            writeln!(f, "{pad} | {indent}{}", "^".repeat(snippet.width))?;
        }
        if let Some(hint) = &self.hint {
            writeln!(f, "{pad} = hint: {hint}")?;
        }
        Ok(())
    }
}

/// Every problem found in a configuration file, in file order. Never empty when returned as an
/// error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics(Vec<Diagnostic>);

impl Diagnostics {
    pub fn new(diagnostics: Vec<Diagnostic>) -> Self {
        Self(diagnostics)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }

    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.0
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(diagnostic: Diagnostic) -> Self {
        Self(vec![diagnostic])
    }
}

impl<'a> IntoIterator for &'a Diagnostics {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for diagnostic in &self.0 {
            writeln!(f, "{diagnostic}")?;
        }
        let warnings = self
            .0
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .count();
        let errors = self.0.len() - warnings;
        let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        match (errors, warnings) {
            (_, 0) => write!(f, "{}", count(errors, "error")),
            (0, _) => write!(f, "{}", count(warnings, "warning")),
            _ => write!(
                f,
                "{}, {}",
                count(errors, "error"),
                count(warnings, "warning")
            ),
        }
    }
}

impl std::error::Error for Diagnostics {}

#[cfg(test)]
mod tests {
    use super::*;

    fn located() -> Diagnostic {
        Diagnostic {
            file: PathBuf::from("examples/bad.toml"),
            line: 4,
            column: 1,
            key_path: "listeners[0].adress".into(),
            message: "unknown key `adress` in listeners[0]".into(),
            hint: Some("did you mean `address`?".into()),
            snippet: Some(Snippet {
                text: "adress = \"127.0.0.1:8080\"".into(),
                width: 6,
            }),
            severity: Severity::Error,
        }
    }

    #[test]
    fn renders_like_a_compiler_error() {
        let expected = "\
error: unknown key `adress` in listeners[0]
  --> examples/bad.toml:4:1
   |
 4 | adress = \"127.0.0.1:8080\"
   | ^^^^^^
   = hint: did you mean `address`?
";
        assert_eq!(located().to_string(), expected);
    }

    #[test]
    fn renders_whole_file_problems_and_the_count() {
        let unreadable = Diagnostic::whole_file(
            Path::new("nope.toml"),
            "cannot read the config file: not found",
            Some("check the path".into()),
        );
        let all = Diagnostics::new(vec![unreadable, located()]);
        let text = all.to_string();
        assert!(text.starts_with(
            "error: cannot read the config file: not found\n  --> nope.toml\n   = hint: check the path\n\n"
        ));
        assert!(text.ends_with("\n2 errors"));
        assert_eq!(
            Diagnostics::from(located()).to_string().lines().last(),
            Some("1 error")
        );
    }

    #[test]
    fn warnings_are_labelled_and_counted_apart() {
        let mut warning = located();
        warning.severity = Severity::Warning;
        assert!(warning.to_string().starts_with("warning: unknown key"));
        let only = Diagnostics::from(warning.clone()).to_string();
        assert!(only.ends_with("\n1 warning"), "{only}");
        let both = Diagnostics::new(vec![located(), located(), warning]).to_string();
        assert!(both.ends_with("\n2 errors, 1 warning"), "{both}");
    }

    #[test]
    fn widens_the_gutter_for_long_line_numbers() {
        let mut d = located();
        d.line = 120;
        d.column = 3;
        let text = d.to_string();
        assert!(text.contains("\n    --> examples/bad.toml:120:3\n     |\n 120 | adress"));
        assert!(text.contains("\n     |   ^^^^^^\n"));
    }
}
