//! The secondary key from `Vary`. (Being written: see the crate README.)
