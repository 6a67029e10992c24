//! The primary cache key. (Being written: see the crate README.)
