//! RFC 9111 policy. (Being written: see the crate README.)
