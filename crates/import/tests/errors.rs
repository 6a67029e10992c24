//! Bad input gives a clear error with its place, never a panic: unterminated blocks and
//! strings, stray braces, include loops, missing includes, and (a proptest) any stream of
//! nginx tokens.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use proptest::prelude::*;
use sluice_import::{Options, import, import_str};

fn err(text: &str) -> String {
    import_str(text, Path::new("/x/nginx.conf"))
        .err()
        .unwrap_or_else(|| panic!("{text:?} was accepted"))
        .to_string()
}

#[test]
fn syntax_errors_name_the_file_and_line() {
    assert_eq!(
        err("http {\n  server {\n    listen 80;\n"),
        "/x/nginx.conf:3: unexpected end of file, expecting \"}\""
    );
    assert_eq!(err("events {}\n}\n"), "/x/nginx.conf:2: unexpected \"}\"");
    assert_eq!(
        err("http {\n  root \"/var/www;\n}\n"),
        "/x/nginx.conf:2: unterminated \"quoted string"
    );
    assert_eq!(
        err("http {\n  gzip on\n}\n"),
        "/x/nginx.conf:3: unexpected \"}\" in \"gzip\", expecting \";\""
    );
    assert_eq!(
        err("worker_processes 1"),
        "/x/nginx.conf:1: unexpected end of file in \"worker_processes\", expecting \";\" or \"{\""
    );
    assert_eq!(err("; gzip on;"), "/x/nginx.conf:1: unexpected \";\"");
}

#[test]
fn include_loops_and_missing_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("nginx.conf"),
        "events {}\nhttp {\n  include a.conf;\n}\n",
    )
    .unwrap();
    std::fs::write(d.join("a.conf"), "# a\ninclude b.conf;\n").unwrap();
    std::fs::write(d.join("b.conf"), "\n\ninclude a.conf;\n").unwrap();
    let e = import(&d.join("nginx.conf"), &Options::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("{}:3: include loop: ", d.join("b.conf").display())),
        "{e}"
    );
    assert!(e.ends_with("a.conf -> ") || e.contains("a.conf ->"), "{e}");

    std::fs::write(d.join("a.conf"), "include missing.conf;\n").unwrap();
    let e = import(&d.join("nginx.conf"), &Options::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "{}:1: included file {} does not exist",
            d.join("a.conf").display(),
            d.join("missing.conf").display()
        )
    );
    // A glob that matches nothing is fine, as in nginx.
    std::fs::write(d.join("a.conf"), "include sites/*.conf;\n").unwrap();
    assert!(import(&d.join("nginx.conf"), &Options::default()).is_ok());

    let e = import(&d.join("nope.conf"), &Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope.conf: cannot open"), "{e}");
    // A file including itself.
    std::fs::write(d.join("self.conf"), "include self.conf;\n").unwrap();
    let e = import(&d.join("self.conf"), &Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("include loop"), "{e}");
}

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(";".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("\n".to_string()),
        Just("\"".to_string()),
        Just("'".to_string()),
        Just("\\".to_string()),
        Just("#".to_string()),
        Just("$".to_string()),
        prop::sample::select(vec![
            "http",
            "server",
            "location",
            "listen",
            "server_name",
            "root",
            "alias",
            "index",
            "return",
            "rewrite",
            "proxy_pass",
            "upstream",
            "proxy_set_header",
            "add_header",
            "allow",
            "deny",
            "all",
            "gzip",
            "on",
            "off",
            "limit_except",
            "GET",
            "=",
            "~",
            "~*",
            "^~",
            "/",
            "/api/",
            "80",
            "127.0.0.1:8080",
            "ssl",
            "http2",
            "default_server",
            "proxy_cache",
            "proxy_cache_path",
            "keys_zone=z:10m",
            "limit_req_zone",
            "limit_req",
            "zone=z",
            "burst=5",
            "rate=1r/s",
            "auth_basic",
            "auth_request",
            "$host",
            "$request_uri",
            "301",
            "200",
            "https://x$request_uri",
            "weight=3",
            "if",
            "set",
            "$v",
            "client_max_body_size",
            "1m",
            "^/(.*)$",
            "/$1",
            "permanent",
            "break",
            "http://up",
            "http://127.0.0.1:1/",
            "include",
            "server 1",
            "\u{e9}",
        ])
        .prop_map(String::from),
        "[ -~]{0,8}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Any stream of tokens: a translation or an error with a line, never a panic.
    #[test]
    fn random_token_streams_never_panic(tokens in prop::collection::vec(token(), 0..80)) {
        let text = tokens.join(" ");
        match import_str(&text, Path::new("/p/nginx.conf")) {
            Ok(imported) => {
                for l in &imported.left_out {
                    prop_assert!(!l.why.is_empty());
                }
            }
            Err(e) => {
                prop_assert!(!e.message.is_empty());
                prop_assert!(e.line >= 1, "{e}");
            }
        }
    }

    /// Well-formed blocks of random directives: always an output, never a panic.
    #[test]
    fn random_directives_in_a_server_never_panic(
        lines in prop::collection::vec((token(), prop::collection::vec(token(), 0..4)), 0..20)
    ) {
        let mut text = String::from("http { server { listen 127.0.0.1:8080; location / {\n");
        for (name, args) in &lines {
            let clean = |s: &str| s.replace([';', '{', '}', '"', '\'', '\\', '#', '\n'], "x");
            let name = clean(name);
            if name.trim().is_empty() { continue; }
            text.push_str(&name);
            for a in args {
                text.push(' ');
                text.push_str(&clean(a));
            }
            text.push_str(";\n");
        }
        text.push_str("} } }\n");
        prop_assert!(import_str(&text, Path::new("/p/nginx.conf")).is_ok(), "{text}");
    }
}
