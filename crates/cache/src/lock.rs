//! Request collapsing. (Being written: see the crate README.)
