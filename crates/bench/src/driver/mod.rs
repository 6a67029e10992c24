//! Load drivers: what sends the requests and measures the responses.
//!
//! - [`h2load`]: nghttp2's `h2load`, when installed (the seeds' own tool for seed 002), its
//!   summary parsed into a [`crate::model::Measurement`].

pub mod h2load;
