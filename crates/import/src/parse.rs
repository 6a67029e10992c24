//! nginx's configuration syntax: a lexer and parser written here, because no maintained Rust
//! crate reads nginx configuration with the places (file and line) the importer reports
//! (`nginx-config` on crates.io is unmaintained since 2019 and drops the lines). It follows
//! nginx's own `ngx_conf_parse`: words separated by white space, `'...'` / `"..."` quoting
//! with backslash escapes, `#` comments from the start of a word to the end of the line,
//! `;` ending a directive and `{ ... }` a block; `${name}` inside a word is a variable, not a
//! block. `include` is expanded as it is read (shell globs, relative to the prefix), with
//! loops, missing files and runaway depth reported as errors, never panics.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One directive: `name arg...;` or `name arg... { children }`.
#[derive(Debug, Clone)]
pub struct Directive {
    pub name: String,
    pub args: Vec<String>,
    pub place: Place,
    /// `Some` for a block directive (`server { ... }`), even an empty one.
    pub block: Option<Vec<Directive>>,
    /// Its number in reading order, from 0 (set once the whole tree is read).
    pub id: usize,
}

/// Where a directive was written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Place {
    pub file: Arc<PathBuf>,
    pub line: u32,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// Why the configuration could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub file: PathBuf,
    /// 0 when the problem is the file as a whole (missing, unreadable).
    pub line: u32,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
        }
    }
}

impl std::error::Error for ParseError {}

/// Bounds that keep hostile input from growing memory or recursing without end.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
const MAX_FILES: usize = 4096;
const MAX_INCLUDE_DEPTH: usize = 32;
const MAX_BLOCK_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Token {
    Word(String),
    Semicolon,
    Open,
    Close,
}

/// Splits `text` into tokens, each with its line.
pub(crate) fn lex(text: &str, file: &Path) -> Result<Vec<(Token, u32)>, ParseError> {
    let err = |line: u32, message: String| ParseError {
        file: file.to_path_buf(),
        line,
        message,
    };
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1u32;
    while let Some(&c) = chars.peek() {
        match c {
            '\n' => {
                line += 1;
                chars.next();
            }
            c if c.is_whitespace() => {
                chars.next();
            }
            '#' => {
                while let Some(&c) = chars.peek() {
                    if c == '\n' {
                        break;
                    }
                    chars.next();
                }
            }
            ';' => {
                tokens.push((Token::Semicolon, line));
                chars.next();
            }
            '{' => {
                tokens.push((Token::Open, line));
                chars.next();
            }
            '}' => {
                tokens.push((Token::Close, line));
                chars.next();
            }
            '"' | '\'' => {
                let start = line;
                let quote = c;
                chars.next();
                let mut word = String::new();
                loop {
                    match chars.next() {
                        None => {
                            return Err(err(start, format!("unterminated {quote}quoted string")));
                        }
                        Some(c) if c == quote => break,
                        // nginx's escapes: \" \' \\ drop the backslash, \t \r \n are
                        // control characters, any other keeps it (`\.` in a regex).
                        Some('\\') => match chars.next() {
                            Some('n') => word.push('\n'),
                            Some('t') => word.push('\t'),
                            Some('r') => word.push('\r'),
                            Some(c @ ('"' | '\'' | '\\')) => word.push(c),
                            Some(c) => {
                                if c == '\n' {
                                    line += 1;
                                }
                                word.push('\\');
                                word.push(c);
                            }
                            None => {
                                return Err(err(
                                    start,
                                    format!("unterminated {quote}quoted string"),
                                ));
                            }
                        },
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            word.push(c);
                        }
                    }
                }
                tokens.push((Token::Word(word), start));
            }
            _ => {
                let start = line;
                let mut word = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || c == ';' || c == '}' {
                        break;
                    }
                    if c == '{' {
                        // `${name}`: a variable inside the word, not a block.
                        if word.ends_with('$') {
                            word.push(c);
                            chars.next();
                            for c in chars.by_ref() {
                                word.push(c);
                                if c == '}' {
                                    break;
                                }
                            }
                            continue;
                        }
                        break;
                    }
                    if c == '\\' {
                        chars.next();
                        match chars.next() {
                            Some('n') => word.push('\n'),
                            Some('t') => word.push('\t'),
                            Some('r') => word.push('\r'),
                            Some(c @ ('"' | '\'' | '\\')) => word.push(c),
                            Some(c) => {
                                if c == '\n' {
                                    line += 1;
                                }
                                word.push('\\');
                                word.push(c);
                            }
                            None => word.push('\\'),
                        }
                        continue;
                    }
                    word.push(c);
                    chars.next();
                }
                tokens.push((Token::Word(word), start));
            }
        }
    }
    Ok(tokens)
}

/// Builds the directive tree from tokens (no include expansion).
pub(crate) fn parse_tokens(
    tokens: &[(Token, u32)],
    file: &Arc<PathBuf>,
) -> Result<Vec<Directive>, ParseError> {
    let mut pos = 0;
    let out = parse_block(tokens, &mut pos, file, 0)?;
    if let Some((_, line)) = tokens.get(pos) {
        return Err(ParseError {
            file: file.to_path_buf(),
            line: *line,
            message: "unexpected \"}\"".into(),
        });
    }
    Ok(out)
}

fn parse_block(
    tokens: &[(Token, u32)],
    pos: &mut usize,
    file: &Arc<PathBuf>,
    depth: usize,
) -> Result<Vec<Directive>, ParseError> {
    let err = |line: u32, message: &str| ParseError {
        file: file.to_path_buf(),
        line,
        message: message.to_string(),
    };
    let mut out = Vec::new();
    loop {
        let Some((token, line)) = tokens.get(*pos) else {
            if depth > 0 {
                let last = tokens.last().map_or(1, |(_, l)| *l);
                return Err(err(last, "unexpected end of file, expecting \"}\""));
            }
            return Ok(out);
        };
        let line = *line;
        match token {
            Token::Close => {
                if depth == 0 {
                    return Err(err(line, "unexpected \"}\""));
                }
                *pos += 1;
                return Ok(out);
            }
            Token::Semicolon => return Err(err(line, "unexpected \";\"")),
            Token::Open => return Err(err(line, "unexpected \"{\"")),
            Token::Word(name) => {
                *pos += 1;
                let mut args = Vec::new();
                loop {
                    match tokens.get(*pos) {
                        None => {
                            return Err(err(
                                line,
                                &format!(
                                    "unexpected end of file in \"{name}\", expecting \";\" or \"{{\""
                                ),
                            ));
                        }
                        Some((Token::Word(w), _)) => {
                            args.push(w.clone());
                            *pos += 1;
                        }
                        Some((Token::Semicolon, _)) => {
                            *pos += 1;
                            out.push(Directive {
                                name: name.clone(),
                                args,
                                place: Place {
                                    file: file.clone(),
                                    line,
                                },
                                block: None,
                                id: 0,
                            });
                            break;
                        }
                        Some((Token::Open, open_line)) => {
                            if depth + 1 > MAX_BLOCK_DEPTH {
                                return Err(err(*open_line, "blocks nested too deeply"));
                            }
                            *pos += 1;
                            let children = parse_block(tokens, pos, file, depth + 1)?;
                            out.push(Directive {
                                name: name.clone(),
                                args,
                                place: Place {
                                    file: file.clone(),
                                    line,
                                },
                                block: Some(children),
                                id: 0,
                            });
                            break;
                        }
                        Some((Token::Close, close_line)) => {
                            return Err(err(
                                *close_line,
                                &format!("unexpected \"}}\" in \"{name}\", expecting \";\""),
                            ));
                        }
                    }
                }
            }
        }
    }
}

/// Reads `path` and everything it includes. `prefix` is what relative `include` paths start
/// from (nginx's `-p`/conf prefix: by default the main file's directory). `map` rewrites the
/// start of absolute include paths (`/etc/nginx` → a copy of it), for configurations read away
/// from the machine they were written for.
pub fn load(
    path: &Path,
    prefix: &Path,
    map: &[(PathBuf, PathBuf)],
) -> Result<Vec<Directive>, ParseError> {
    let mut loader = Loader {
        prefix: prefix.to_path_buf(),
        map: map.to_vec(),
        stack: Vec::new(),
        files: 0,
    };
    loader.file(path, None)
}

struct Loader {
    prefix: PathBuf,
    map: Vec<(PathBuf, PathBuf)>,
    /// Canonical paths of the files being read, outermost first (include loops).
    stack: Vec<PathBuf>,
    files: usize,
}

impl Loader {
    fn file(&mut self, path: &Path, from: Option<&Place>) -> Result<Vec<Directive>, ParseError> {
        let at = |message: String| match from {
            Some(place) => ParseError {
                file: place.file.to_path_buf(),
                line: place.line,
                message,
            },
            None => ParseError {
                file: path.to_path_buf(),
                line: 0,
                message,
            },
        };
        self.files += 1;
        if self.files > MAX_FILES {
            return Err(at(format!("more than {MAX_FILES} files included")));
        }
        if self.stack.len() >= MAX_INCLUDE_DEPTH {
            return Err(at(format!(
                "includes nested more than {MAX_INCLUDE_DEPTH} deep"
            )));
        }
        let canonical = std::fs::canonicalize(path)
            .map_err(|e| at(format!("cannot open {}: {e}", path.display())))?;
        if let Some(i) = self.stack.iter().position(|p| *p == canonical) {
            let chain: Vec<String> = self.stack[i..]
                .iter()
                .chain(std::iter::once(&canonical))
                .map(|p| p.display().to_string())
                .collect();
            return Err(at(format!("include loop: {}", chain.join(" -> "))));
        }
        let meta = std::fs::metadata(&canonical)
            .map_err(|e| at(format!("cannot open {}: {e}", path.display())))?;
        if meta.is_dir() {
            return Err(at(format!("{} is a directory, not a file", path.display())));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(at(format!(
                "{} is larger than {} MiB",
                path.display(),
                MAX_FILE_BYTES >> 20
            )));
        }
        let bytes = std::fs::read(&canonical)
            .map_err(|e| at(format!("cannot read {}: {e}", path.display())))?;
        let text = String::from_utf8_lossy(&bytes);
        let file = Arc::new(path.to_path_buf());
        let tokens = lex(&text, path)?;
        let tree = parse_tokens(&tokens, &file)?;
        self.stack.push(canonical);
        let expanded = self.expand(tree);
        self.stack.pop();
        expanded
    }

    fn expand(&mut self, tree: Vec<Directive>) -> Result<Vec<Directive>, ParseError> {
        let mut out = Vec::with_capacity(tree.len());
        for mut d in tree {
            if d.name == "include" && d.block.is_none() {
                let [pattern] = d.args.as_slice() else {
                    return Err(ParseError {
                        file: d.place.file.to_path_buf(),
                        line: d.place.line,
                        message: "\"include\" takes one file name or pattern".into(),
                    });
                };
                for path in self.resolve(pattern, &d.place)? {
                    out.extend(self.file(&path, Some(&d.place))?);
                }
                continue;
            }
            if let Some(children) = d.block.take() {
                d.block = Some(self.expand(children)?);
            }
            out.push(d);
        }
        Ok(out)
    }

    /// The files an `include` names: a glob's matches in order (none is fine, as in nginx),
    /// or the one file, which must exist.
    fn resolve(&self, pattern: &str, place: &Place) -> Result<Vec<PathBuf>, ParseError> {
        let err = |message: String| ParseError {
            file: place.file.to_path_buf(),
            line: place.line,
            message,
        };
        let mut path = PathBuf::from(pattern);
        if path.is_relative() {
            path = self.prefix.join(path);
        } else {
            for (from, to) in &self.map {
                if let Ok(rest) = path.strip_prefix(from) {
                    path = to.join(rest);
                    break;
                }
            }
        }
        let text = path.to_string_lossy().to_string();
        if text.contains(['*', '?', '[']) {
            let paths = glob::glob(&text)
                .map_err(|e| err(format!("bad include pattern {pattern:?}: {e}")))?;
            let mut found = Vec::new();
            for p in paths {
                let p = p.map_err(|e| err(format!("reading {pattern:?}: {e}")))?;
                if p.is_file() {
                    found.push(p);
                }
            }
            found.sort();
            Ok(found)
        } else if path.exists() {
            Ok(vec![path])
        } else {
            Err(err(format!(
                "included file {} does not exist",
                path.display()
            )))
        }
    }
}

/// Parses configuration text (no includes): for tests and the proptest.
pub fn parse_str(text: &str, file: &Path) -> Result<Vec<Directive>, ParseError> {
    let tokens = lex(text, file)?;
    parse_tokens(&tokens, &Arc::new(file.to_path_buf()))
}
