//! The `sluice` binary's tests: each runs the binary cargo built (`CARGO_BIN_EXE_sluice`) as a
//! user would, with real sockets on 127.0.0.1 and real clients. What the server does is tested
//! in `crates/server/tests/it`, on the library.

// Helper functions of this test crate are outside #[test] functions, where clippy.toml's
// allow-*-in-tests does not reach.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bench;
mod cli;
mod decompress;
mod import;
mod memory;
mod packaging;
mod precompress;
mod quick;
mod reload;
mod restart;
mod upstream_tls;

use std::path::Path;

/// Write `files` (relative paths and contents) under `dir`.
pub fn write_files(dir: &Path, files: &[(&str, &[u8])]) {
    for (name, contents) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }
}
