//! Stored response metadata and its encoding. (Being written: see the crate README.)
