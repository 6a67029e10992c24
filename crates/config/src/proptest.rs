//! Property tests of the loader (the stable-Rust fuzzing of `parse_str`): any text, and documents
//! built from the schema with values of every type in every place, give a `Config` or
//! diagnostics, never a panic; and every diagnostic points inside the text: a real line, its
//! exact text as the snippet, a column within it (or line and column 0 for problems with no
//! place).
//!
//! Documents are generated from [`table_keys`], the same key lists the unknown-key hints use, so
//! keys added to the raw structs are fuzzed without touching this file. A document is drawn from
//! a tape of random numbers rather than composed from proptest strategies: the schema is only
//! known at run time, and shrinking the tape still shrinks the document (a shorter tape gives
//! fewer tables and keys).

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::Config;

use crate::diagnostic::Diagnostics;
use crate::path::KeyPath;
use crate::schema::table_keys;

/// proptest's configuration with `default_cases` unless `PROPTEST_CASES` is set (docs/testing.md).
fn cases(default_cases: u32) -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = default_cases;
    }
    config
}

/// Checks that every diagnostic has a place inside `text` (or none at all), and that rendering
/// them works.
fn check_places(text: &str, diagnostics: &Diagnostics) -> Result<(), TestCaseError> {
    prop_assert!(!diagnostics.is_empty());
    let lines: Vec<&str> = text.split('\n').collect();
    for d in diagnostics.iter() {
        // Serde's and toml's internals are no words for a person fixing a file.
        for leak in ["$__toml_private", "spanned value"] {
            prop_assert!(!d.to_string().contains(leak), "{}", d);
        }
        if d.line == 0 {
            prop_assert_eq!(d.column, 0, "{}", d);
            prop_assert!(d.snippet.is_none(), "{}", d);
            continue;
        }
        prop_assert!(
            d.line <= lines.len(),
            "line {} of {}: {}",
            d.line,
            lines.len(),
            d
        );
        // The snippet shows the line without its line end (`\n`, `\r\n`, stray `\r`s).
        let line = lines[d.line - 1].trim_end_matches('\r');
        let snippet = d.snippet.as_ref().unwrap();
        prop_assert_eq!(snippet.text.as_str(), line, "{}", d);
        let chars = line.chars().count();
        prop_assert!(
            d.column >= 1 && d.column <= chars + 1,
            "column {} of {chars}: {}",
            d.column,
            d
        );
        prop_assert!(
            snippet.width >= 1 && d.column - 1 + snippet.width <= chars + 1,
            "{}",
            d
        );
    }
    let rendered = diagnostics.to_string();
    prop_assert!(!rendered.is_empty());
    Ok(())
}

fn check(text: &str) -> Result<(), TestCaseError> {
    // A file name without a directory: relative paths resolve against the crate directory,
    // where `.` and `src` exist, so some documents get past the file checks.
    let file = Path::new("fuzz.toml");
    match crate::parse_str(text, file) {
        Ok(_) => Ok(()),
        Err(diagnostics) => {
            check_places(text, &diagnostics)?;
            // The same text gives the same report.
            prop_assert_eq!(crate::parse_str(text, file).err(), Some(diagnostics));
            Ok(())
        }
    }
}

/// Random numbers to build a document from; past the end, zeros (the smallest choices).
struct Tape {
    numbers: Vec<u32>,
    at: usize,
}

impl Tape {
    fn next(&mut self, below: usize) -> usize {
        let n = self.numbers.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        n as usize % below.max(1)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.next(items.len())]
    }

    /// One of [`VALUES`].
    fn value(&mut self) -> &'static str {
        VALUES[self.next(VALUES.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.next(100) < percent
    }
}

/// Values for any key: right for some keys, the wrong type or a bad value for most.
const VALUES: &[&str] = &[
    r#""127.0.0.1:8080""#,
    r#""127.0.0.1:0""#,
    r#""[::1]:0""#,
    r#""0.0.0.0:99999""#,
    r#""localhost:9""#,
    r#""unix:/tmp/sluice.sock""#,
    r#""30s""#,
    r#""1m30s""#,
    r#""0s""#,
    r#""-5s""#,
    r#""10MiB""#,
    r#""1k""#,
    r#""18446744073709551616B""#,
    r#""gzip""#,
    r#""br""#,
    r#""zstd""#,
    r#""identity""#,
    r#""round_robin""#,
    r#""least_conn""#,
    r#""GET""#,
    r#""/""#,
    r#""/a/*""#,
    r#""*.example.com""#,
    r#"".""#,
    r#""src""#,
    r#""Cargo.toml""#,
    r#""app""#,
    r#""a""#,
    r#""""#,
    r#"" ""#,
    r#""é\u0000\n""#,
    r#""self-signed""#,
    r#"'C:\path'"#,
    r#""""multi
line""""#,
    "0",
    "1",
    "-1",
    "2",
    "200",
    "404",
    "65535",
    "65536",
    "9223372036854775807",
    "-9223372036854775808",
    "0.5",
    "1e308",
    "nan",
    "-inf",
    "true",
    "false",
    "1979-05-27T07:32:00Z",
    "07:32:00",
    "[]",
    r#"["a", "gzip"]"#,
    r#"[1, "a"]"#,
    "[[]]",
    "{}",
    "{ a = 1 }",
    "{ status = 204 }",
    r#"{ upstream = "app" }"#,
    r#"{ root = "." }"#,
    r#"{ set = { "x-via" = "s" } }"#,
];

/// Names for the members of free-form tables (`upstreams.NAME`, `caches.NAME`) and keys that
/// no table has.
const NAMES: &[&str] = &["app", "a", "b", "Zz", "é", "a.b", "zz", "adress", "", " "];

/// One entry of a generated document, with its key path as diagnostics spell it.
#[derive(Debug)]
enum Entry {
    Leaf(String, &'static str),
    Table {
        path: String,
        inline: bool,
        table: Table,
    },
    Array {
        path: String,
        inline: bool,
        tables: Vec<Table>,
    },
}

impl Entry {
    fn path(&self) -> &str {
        match self {
            Entry::Leaf(path, _) | Entry::Table { path, .. } | Entry::Array { path, .. } => path,
        }
    }
}

type Table = Vec<(String, Entry)>;

/// What the schema has at `path`.
enum Shape {
    Table,
    ArrayOfTables,
    /// Named tables, e.g. `[upstreams.app]`.
    Map,
    Leaf,
}

fn shape(path: &KeyPath) -> Shape {
    if table_keys(path).is_some() {
        Shape::Table
    } else if table_keys(&path.index(0)).is_some() {
        Shape::ArrayOfTables
    } else if table_keys(&path.key("a")).is_some() {
        Shape::Map
    } else {
        Shape::Leaf
    }
}

fn gen_table(tape: &mut Tape, path: &KeyPath, depth: usize) -> Table {
    let keys = table_keys(path).unwrap_or(&[]);
    let mut table: Table = Vec::new();
    for _ in 0..tape.next(if depth == 0 { 7 } else { 5 }) {
        let key = if keys.is_empty() || tape.chance(10) {
            (*tape.pick(NAMES)).to_owned()
        } else {
            (*tape.pick(keys)).to_owned()
        };
        // A key twice is a syntax error; keep it now and then, to test that path too.
        if table.iter().any(|(k, _)| *k == key) && !tape.chance(5) {
            continue;
        }
        let child = path.key(&key);
        let wrong_type = tape.chance(8);
        let at = child.to_string();
        let entry = match shape(&child) {
            _ if wrong_type || depth > 4 => Entry::Leaf(at, tape.value()),
            Shape::Leaf => Entry::Leaf(at, tape.value()),
            Shape::Table => Entry::Table {
                path: at,
                inline: tape.chance(40),
                table: gen_table(tape, &child, depth + 1),
            },
            Shape::ArrayOfTables => {
                let count = tape.next(3);
                Entry::Array {
                    path: at,
                    inline: tape.chance(30),
                    tables: (0..count)
                        .map(|i| gen_table(tape, &child.index(i), depth + 1))
                        .collect(),
                }
            }
            Shape::Map => {
                let mut members: Table = Vec::new();
                for _ in 0..tape.next(3) {
                    let name = (*tape.pick(NAMES)).to_owned();
                    if members.iter().any(|(k, _)| *k == name) {
                        continue;
                    }
                    let member = child.key(&name);
                    let table = gen_table(tape, &member, depth + 2);
                    let inline = tape.chance(30);
                    let path = member.to_string();
                    members.push((
                        name,
                        Entry::Table {
                            path,
                            inline,
                            table,
                        },
                    ));
                }
                Entry::Table {
                    path: at,
                    inline: false,
                    table: members,
                }
            }
        };
        table.push((key, entry));
    }
    table
}

fn key_text(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        key.to_owned()
    } else {
        format!("{key:?}")
    }
}

fn inline_table(table: &Table) -> String {
    let members: Vec<String> = table
        .iter()
        .map(|(key, entry)| format!("{} = {}", key_text(key), inline_entry(entry)))
        .collect();
    format!("{{ {} }}", members.join(", "))
}

fn inline_entry(entry: &Entry) -> String {
    match entry {
        Entry::Leaf(_, value) => (*value).to_owned(),
        Entry::Table { table, .. } => inline_table(table),
        Entry::Array { tables, .. } => {
            let items: Vec<String> = tables.iter().map(inline_table).collect();
            format!("[{}]", items.join(", "))
        }
    }
}

/// TOML text for `table` at `path`: its values first, then its sub-tables under headers.
fn render(table: &Table, path: &[String], out: &mut String) {
    for (key, entry) in table {
        let inline = match entry {
            Entry::Leaf(..) => true,
            Entry::Table { inline, .. } | Entry::Array { inline, .. } => *inline,
        };
        if inline {
            out.push_str(&format!("{} = {}\n", key_text(key), inline_entry(entry)));
        }
    }
    for (key, entry) in table {
        let mut child = path.to_vec();
        child.push(key_text(key));
        match entry {
            Entry::Table {
                inline: false,
                table,
                ..
            } => {
                out.push_str(&format!("\n[{}]\n", child.join(".")));
                render(table, &child, out);
            }
            Entry::Array {
                inline: false,
                tables,
                ..
            } => {
                for table in tables {
                    out.push_str(&format!("\n[[{}]]\n", child.join(".")));
                    render(table, &child, out);
                }
            }
            _ => {}
        }
    }
}

/// Replace the entry at `path` (a diagnostic's key path) with a value; false if none is there.
fn replace(table: &mut Table, path: &str, value: &'static str) -> bool {
    for (_, entry) in table.iter_mut() {
        if entry.path() == path {
            *entry = Entry::Leaf(path.to_owned(), value);
            return true;
        }
        let found = match entry {
            Entry::Leaf(..) => false,
            Entry::Table { table, .. } => replace(table, path, value),
            Entry::Array { tables, .. } => tables.iter_mut().any(|t| replace(t, path, value)),
        };
        if found {
            return true;
        }
    }
    false
}

/// Documents from the schema, each checked: the first as generated, then, while the loader
/// blames a value this generator wrote (a serde type error stops the loader before validation),
/// with that value drawn again, so later documents get further into validation; the last also
/// damaged as an editor leaves a half-typed file.
fn check_schema_documents(tape: &mut Tape) -> Result<(), TestCaseError> {
    let mut table = gen_table(tape, &KeyPath::root(), 0);
    let mut text = String::new();
    for _ in 0..8 {
        text.clear();
        render(&table, &[], &mut text);
        check(&text)?;
        let Err(diagnostics) = crate::parse_str(&text, Path::new("fuzz.toml")) else {
            break;
        };
        let blamed = diagnostics
            .iter()
            .filter(|d| !d.message.starts_with("unknown key"))
            .any(|d| replace(&mut table, &d.key_path, tape.value()));
        if !blamed {
            break;
        }
    }
    if text.is_empty() {
        return Ok(());
    }
    let chars: Vec<char> = text.chars().collect();
    let at = tape.next(chars.len() + 1);
    let damaged: String = match tape.next(3) {
        0 => chars[..at].iter().collect(),
        1 => {
            let end = (at + 1 + tape.next(8)).min(chars.len());
            chars[..at].iter().chain(&chars[end..]).collect()
        }
        _ => {
            let inserted = *tape.pick(&[
                '[', ']', '=', '"', '\'', '{', '}', ',', '\n', '#', 'é', '\r', '\t', '\\', '\u{0}',
            ]);
            chars[..at]
                .iter()
                .chain([&inserted])
                .chain(&chars[at..])
                .collect()
        }
    };
    check(&damaged)
}

fn tape() -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::vec(any::<u32>(), 0..300)
}

proptest! {
    #![proptest_config(cases(300))]

    /// Documents shaped like the schema, with values of every type in every place.
    #[test]
    fn schema_shaped_documents_give_a_config_or_placed_diagnostics(numbers in tape()) {
        check_schema_documents(&mut Tape { numbers, at: 0 })?;
    }

    /// Any text at all (Unicode, control characters, CR line ends).
    #[test]
    fn any_text_gives_a_config_or_placed_diagnostics(text in "(\\PC|[\\r\\n\\t\\u{0}]){0,120}") {
        check(&text)?;
    }

    /// Text made of TOML's own pieces, where the parser's error recovery has work to do.
    #[test]
    fn toml_like_text_gives_a_config_or_placed_diagnostics(
        pieces in proptest::collection::vec(
            proptest::sample::select(vec![
                "[", "]", "[[", "]]", "=", "\"", "'", "\"\"\"", "{", "}", ",", ".", "\n", "\r\n",
                "#", " ", "\t", "é", "listeners", "routes", "upstreams", "address", "proxy",
                "static", "root", "a", "1", "\"x\"", "true", "1979-05-27", "\\", "\\u00e9",
            ]),
            0..40,
        ),
    ) {
        check(&pieces.concat())?;
    }
}

/// The generator covers the schema: every table the hints know is reached by some tape.
#[test]
fn the_generator_reaches_nested_tables() {
    let mut seen = std::collections::BTreeSet::new();
    // Seeds enough that each listed table shows up with the schema as it grows (a new key
    // changes what every seed draws; 400 stopped reaching routes.proxy at the [resolver] and
    // [acme] tables).
    for seed in 0..2000u32 {
        let numbers = (0..300u32)
            .map(|i| {
                seed.wrapping_mul(2_654_435_761)
                    .wrapping_add(i.wrapping_mul(40_503))
                    ^ (i << 7)
            })
            .collect();
        let table = gen_table(&mut Tape { numbers, at: 0 }, &KeyPath::root(), 0);
        let mut text = String::new();
        render(&table, &[], &mut text);
        for line in text.lines().filter(|l| l.starts_with('[')) {
            seen.insert(line.trim_matches(['[', ']']).to_owned());
        }
    }
    for table in ["listeners", "routes", "listeners.tls", "routes.proxy"] {
        assert!(seen.contains(table), "{table} never generated: {seen:?}");
    }
}
