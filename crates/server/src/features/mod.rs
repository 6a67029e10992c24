//! What a route does beyond routing: the reverse proxy (`proxy/`) and its upstream groups
//! (`upstreams.rs`), upgraded connections spliced (`tunnel/`), the response cache's place in
//! the request (`cache/`), compression (`compress/`), compression dictionaries
//! (`dictionary/`), per-client rate limits (`rate_limit/`) and a route's response header edits
//! (`response_headers.rs`).
//!
//! Features are called by the pipeline and return responses or errors; they may import only
//! `shared` (and each other), never the pipeline that calls them, the connection layer or `ops`
//! (`tests/it/layers.rs`). Error pages are the pipeline's: a feature returns a
//! `sluice_core::Error`, and the pipeline writes its status (`Error::status`).

pub mod access;
pub mod cache;
pub mod compress;
pub mod dictionary;
pub mod proxy;
pub mod rate_limit;
pub mod response_headers;
pub mod tunnel;
pub mod upstreams;
