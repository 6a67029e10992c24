//! HTTP/3 across reloads and shutdown.
