//! The memory tier. (Being written.)
