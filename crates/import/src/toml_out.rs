//! The TOML the importer writes. Hand-made rather than `toml::to_string`, because the output
//! is read by people: keys in the order a person writes them, a comment above each table
//! naming the nginx directives it came from, inline tables for route options. Strings and
//! keys are escaped by the `toml` crate itself.

use std::fmt::Write as _;

/// A TOML value, written inline.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Str(String),
    Int(i64),
    Bool(bool),
    Arr(Vec<Val>),
    Tbl(Vec<(String, Val)>),
}

impl Val {
    pub fn s(text: impl Into<String>) -> Val {
        Val::Str(text.into())
    }

    pub fn strs<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Val {
        Val::Arr(items.into_iter().map(|s| Val::Str(s.into())).collect())
    }

    pub fn write(&self, out: &mut String) {
        match self {
            Val::Str(s) => out.push_str(&toml::Value::String(s.clone()).to_string()),
            Val::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Val::Bool(b) => {
                let _ = write!(out, "{b}");
            }
            Val::Arr(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    v.write(out);
                }
                out.push(']');
            }
            Val::Tbl(entries) => {
                if entries.is_empty() {
                    out.push_str("{}");
                    return;
                }
                out.push_str("{ ");
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&key(k));
                    out.push_str(" = ");
                    v.write(out);
                }
                out.push_str(" }");
            }
        }
    }
}

/// A key, bare when TOML allows it, quoted otherwise.
pub fn key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_string()
    } else {
        toml::Value::String(k.to_string()).to_string()
    }
}

/// `# text` lines, each line of `text` commented.
pub fn comment(out: &mut String, text: &str) {
    for line in text.lines() {
        if line.is_empty() {
            out.push_str("#\n");
        } else {
            let _ = writeln!(out, "# {line}");
        }
    }
}

/// `key = value` lines.
pub fn entries(out: &mut String, entries: &[(String, Val)]) {
    for (k, v) in entries {
        out.push_str(&key(k));
        out.push_str(" = ");
        v.write(out);
        out.push('\n');
    }
}
