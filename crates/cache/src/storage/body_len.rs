//! The two checks every tier's writer makes against the length announced to
//! [`Storage::writer`](super::Storage::writer): a stored body that disagrees with its announced
//! length (and so with the stored `Content-Length`) would be served truncated or overlong.

use std::io;

/// Called as bytes arrive: more than announced is a framing error upstream.
pub(crate) fn check_not_past(len: u64, expected: Option<u64>) -> io::Result<()> {
    match expected {
        Some(expected) if len > expected => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "body longer than its announced length",
        )),
        _ => Ok(()),
    }
}

/// Called at `finish`: fewer bytes than announced is a truncated response, never stored.
pub(crate) fn check_complete(len: u64, expected: Option<u64>) -> io::Result<()> {
    match expected {
        Some(expected) if len != expected => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "body shorter than its announced length",
        )),
        _ => Ok(()),
    }
}
