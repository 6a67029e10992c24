//! The process's limit on open files: every socket and every file held open is one. `sluice
//! serve` and the lab raise the soft limit to the hard one at start; the static memory cache
//! sizes how many files it keeps open from the limit (`crate::file_bytes`).

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// The soft and hard limits, if the system says.
pub fn limits() -> Option<(u64, u64)> {
    getrlimit(Resource::RLIMIT_NOFILE).ok()
}

/// Raise the soft limit to the hard one, as Go programs and HAProxy do at start (the soft limit
/// is often 1,024 where the hard one is far higher). `Ok(Some((old, new)))` when raised,
/// `Ok(None)` when it was the hard limit already; the error says what could not be raised.
pub fn raise_to_hard() -> Result<Option<(u64, u64)>, String> {
    let (soft, hard) =
        limits().ok_or_else(|| "the open files limit could not be read".to_owned())?;
    if soft >= hard {
        return Ok(None);
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
        .map_err(|e| format!("could not raise the open files limit from {soft} to {hard}: {e}"))?;
    Ok(Some((soft, hard)))
}
