//! Memory in front of disk. (Being written.)
