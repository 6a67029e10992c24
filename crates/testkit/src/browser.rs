//! Headless Chromium for the browser tests, started one way only: a fresh profile each time and
//! no way off loopback (`--host-resolver-rules` maps every name but 127.0.0.1 and localhost to
//! nothing, background networking and component updates off), so no test can forget a flag and
//! let Chromium reach Google's servers on its own.

use std::path::Path;
use std::process::Command;

/// The flags every headless Chromium run gets.
pub const SAFE_FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
    "--dump-dom",
];

/// `program` (Chromium) with [`SAFE_FLAGS`] and `profile` as its fresh `--user-data-dir`,
/// bounded by coreutils' `timeout` to `seconds`; the caller adds its own flags and the URL.
pub fn headless(program: &Path, profile: &Path, seconds: u32) -> Command {
    let mut command = Command::new("timeout");
    command
        .arg(seconds.to_string())
        .arg(program)
        .args(SAFE_FLAGS)
        .arg(format!("--user-data-dir={}", profile.display()));
    command
}
