//! What the pipeline marks on a request for the features below it: the target as the client
//! sent it (kept when the path was put in normal form; the proxy may forward it), and why a
//! request body failed (over a limit, or the client's connection broke), so that the proxy
//! answers for the client instead of blaming the upstream.

use std::time::Duration;

use http::uri::PathAndQuery;
use sluice_core::ErrorKind;

/// The request target as the client sent it (path and query), when normalising changed it.
#[derive(Debug, Clone)]
pub struct ReceivedTarget(pub PathAndQuery);

/// Why a request body was cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLimitError {
    /// More than `max_body_size` bytes.
    TooLarge { max: u64 },
    /// Not complete within `body_timeout` of the request head.
    TimedOut { timeout: Duration },
}

impl BodyLimitError {
    /// 413 or 408.
    pub fn kind(self) -> ErrorKind {
        match self {
            BodyLimitError::TooLarge { .. } => ErrorKind::PayloadTooLarge,
            BodyLimitError::TimedOut { .. } => ErrorKind::RequestTimeout,
        }
    }
}

impl std::fmt::Display for BodyLimitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyLimitError::TooLarge { max } => {
                write!(f, "the request body exceeds max_body_size ({max} bytes)")
            }
            BodyLimitError::TimedOut { timeout } => {
                write!(
                    f,
                    "the request body did not arrive within body_timeout ({timeout:?})"
                )
            }
        }
    }
}

impl std::error::Error for BodyLimitError {}

/// The client's request body failed (it went away, or sent a broken chunked body): the
/// client's fault, which the proxy must not count against the upstream server.
#[derive(Debug)]
pub struct ClientBodyError(pub sluice_core::BoxError);

impl std::fmt::Display for ClientBodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "reading the client's request body: {}", self.0)
    }
}

impl std::error::Error for ClientBodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// The named captures of the route's `path_regex` on the request's normal-form path, and where
/// its match ended: the proxy puts them in its `replace_prefix` and `request_headers` values
/// (`{name}`).
#[derive(Debug, Clone, Default)]
pub struct PathCaptures {
    pub values: Vec<(String, String)>,
    /// Byte offset in the normal-form path where the regex's match ends; the match starts at 0
    /// (only then does a `replace_prefix` replace it).
    pub end: Option<usize>,
}
