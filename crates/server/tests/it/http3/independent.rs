//! HTTP/3 with clients sluice shares no code with.
