//! `sluice import nginx.conf`: reads an nginx configuration (includes expanded, literal `set`
//! variables substituted), translates what sluice can express into a commented sluice.toml,
//! and lists every directive it left out with its file and line. The output is validated with
//! sluice's own config crate before it is handed back, so what `import` writes is what
//! `sluice check` accepts (or the validation's errors say why not: a file the nginx config
//! names that is missing on this machine, say).
//!
//! - [`parse`]: nginx's syntax, includes, places;
//! - `translate`: directives → sluice's tables, and what is left out;
//! - `toml_out`: the commented TOML.
//!
//! What translates to what, and what does not and why: docs/import.md.

pub mod parse;
mod toml_out;
mod translate;
mod units;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub use parse::{Directive, ParseError, Place};
pub use translate::{LeftOut, Unneeded};

use toml_out::{comment, entries, key};
use translate::{Output, Table};

/// How to read the nginx configuration.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// What relative paths (includes, roots, certificates) start from: nginx's prefix. The
    /// main file's directory when `None`.
    pub prefix: Option<PathBuf>,
    /// Absolute path prefixes to read elsewhere (`/etc/nginx` → a copy of it), for includes.
    pub map: Vec<(PathBuf, PathBuf)>,
    /// Where the output will be written: the base of relative paths when it is validated.
    pub output: Option<PathBuf>,
}

/// The result of an import.
#[derive(Debug)]
pub struct Imported {
    /// The sluice configuration, commented.
    pub toml: String,
    /// Directives nginx carries out that the output does not.
    pub left_out: Vec<LeftOut>,
    /// Directives that need no counterpart in sluice.
    pub unneeded: Vec<Unneeded>,
    /// `sluice check`'s verdict on `toml`: `Err` with its diagnostics when it refuses it.
    pub check: Result<(), String>,
}

/// Reads `path` and translates it.
pub fn import(path: &Path, options: &Options) -> Result<Imported, ParseError> {
    let prefix = options
        .prefix
        .clone()
        .or_else(|| path.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let prefix = std::path::absolute(&prefix).unwrap_or(prefix);
    let mut tree = parse::load(path, &prefix, &options.map)?;
    let mut next = 0;
    translate::number(&mut tree, &mut next);
    Ok(translate_tree(&tree, path, &prefix, options))
}

fn translate_tree(tree: &[Directive], path: &Path, prefix: &Path, options: &Options) -> Imported {
    let out = translate::Translator::new(tree, path, prefix).run(tree);
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let place = |p: &Place| {
        let file = p
            .file
            .strip_prefix(&base)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| p.file.to_path_buf());
        format!("{}:{}", file.display(), p.line)
    };
    let toml = write(&out, path, &place);
    let target = options
        .output
        .clone()
        .unwrap_or_else(|| base.join("sluice.toml"));
    let check = match sluice_config::parse_str(&toml, &target) {
        Ok(_) => Ok(()),
        Err(diagnostics) => Err(diagnostics.to_string()),
    };
    Imported {
        toml,
        left_out: out.left_out,
        unneeded: out.unneeded,
        check,
    }
}

/// The commented TOML.
fn write(out: &Output, source: &Path, place: &dyn Fn(&Place) -> String) -> String {
    let mut s = String::new();
    comment(
        &mut s,
        &format!(
            "sluice configuration imported from {} by `sluice import`.\n\
             Each table names the nginx directives it came from (file:line). Where nginx and\n\
             sluice differ, this file does what nginx did, and says so.\n",
            source.display()
        ),
    );
    comment(&mut s, &translate::summary(out, place));
    s.push('\n');
    if !out.server.is_empty() {
        from_comment(&mut s, &out.server_from, &[]);
        s.push_str("[server]\n");
        entries(&mut s, &out.server);
        s.push('\n');
    }
    if !out.log.is_empty() {
        from_comment(&mut s, &out.log_from, &[]);
        s.push_str("[log]\n");
        entries(&mut s, &out.log);
        s.push('\n');
    }
    for t in &out.listeners {
        table(&mut s, "[[listeners]]", t, Some(("name", &t.name)));
    }
    for t in &out.upstreams {
        table(&mut s, &format!("[upstreams.{}]", key(&t.name)), t, None);
    }
    for t in &out.caches {
        table(&mut s, &format!("[caches.{}]", key(&t.name)), t, None);
    }
    for t in &out.routes {
        table(&mut s, "[[routes]]", t, None);
    }
    s
}

fn from_comment(s: &mut String, from: &[String], notes: &[String]) {
    let mut text = String::new();
    if !from.is_empty() {
        text.push_str("from:\n");
        for f in from {
            let _ = writeln!(text, "  {f}");
        }
    }
    for n in notes {
        let _ = writeln!(text, "note: {n}");
    }
    comment(s, &text);
}

fn table(s: &mut String, header: &str, t: &Table, name: Option<(&str, &str)>) {
    let mut from = Vec::new();
    for f in &t.from {
        if !from.contains(f) {
            from.push(f.clone());
        }
    }
    let mut notes = Vec::new();
    for n in &t.notes {
        if !notes.contains(n) {
            notes.push(n.clone());
        }
    }
    from_comment(s, &from, &notes);
    s.push_str(header);
    s.push('\n');
    if let Some((k, v)) = name {
        entries(s, &[(k.to_string(), toml_out::Val::s(v))]);
    }
    entries(s, &t.keys);
    s.push('\n');
}

/// Translates configuration text with no includes (the proptest's and unit tests' entry).
pub fn import_str(text: &str, file: &Path) -> Result<Imported, ParseError> {
    let mut tree = parse::parse_str(text, file)?;
    let mut next = 0;
    translate::number(&mut tree, &mut next);
    let prefix = file.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok(translate_tree(&tree, file, &prefix, &Options::default()))
}
