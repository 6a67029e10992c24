//! Any text as a configuration file: a `Config` or diagnostics, never a panic, and every
//! diagnostic on a real line of the text. Run with `cargo fuzz run config` (nightly) from
//! `fuzz/`; the stable stand-in is `crates/config/src/proptest.rs`.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(diagnostics) = sluice_config::parse_str(text, Path::new("fuzz.toml")) {
        let lines: Vec<&str> = text.split('\n').collect();
        for d in diagnostics.iter() {
            assert!(d.line <= lines.len());
            if let Some(snippet) = &d.snippet {
                let line = lines[d.line - 1].trim_end_matches('\r');
                assert_eq!(snippet.text, line);
                assert!(d.column >= 1 && d.column <= line.chars().count() + 1);
            }
        }
        let _ = diagnostics.to_string();
    }
});
