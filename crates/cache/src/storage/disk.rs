//! The disk tier. (Being written.)
