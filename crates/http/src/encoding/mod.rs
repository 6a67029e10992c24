//! `Accept-Encoding` negotiation, shared by response compression and by precompressed sidecars
//! in `static_files` so both pick the same variant for the same request.
//!
//! - The codings themselves, their tokens (RFC 9110 §8.4.1,
//!   <https://www.rfc-editor.org/rfc/rfc9110#section-8.4.1>) and sidecar file extensions are
//!   [`sluice_core::ContentCoding`]'s, the one enum every crate uses.
//! - [`negotiate`](negotiate::negotiate): RFC 9110 §12.5.3
//!   (<https://www.rfc-editor.org/rfc/rfc9110#section-12.5.3>) without allocating.

mod negotiate;

pub use negotiate::{Negotiated, listed_weight, negotiate, negotiate_fields, negotiate_headers};
