//! sluice's vocabulary, shared by every other crate: the error type (what went wrong, on which side,
//! and which HTTP status it becomes), the response body type, the content codings, entity tags,
//! and the names the server uses in logs.
//!
//! This crate knows no sockets and no file formats; keep it that way so every crate can depend on it.
//! (It does know the process's open-file limit, `open_files`, which the server and the lab share,
//! and the PROXY protocol v2 signature, which the listener's parser and the upstream side share.)

pub mod body;
pub mod coding;
pub mod error;
pub mod etag;
pub mod file_bytes;
pub mod match_pattern;
pub mod open_files;
pub mod proxy_protocol;
pub mod uri_path;

pub use body::Body;
pub use coding::{Compression, ContentCoding, DictionaryCoding, SidecarCoding};
pub use error::{BoxError, Error, ErrorKind, Side};
