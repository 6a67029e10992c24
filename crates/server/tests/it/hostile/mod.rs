//! Hostile traffic (issue 11, item 5): request smuggling and malformed framing over HTTP/1.1,
//! HTTP/2 floods and resets, slowloris, 10,000 connections at a 1,000-connection limit. Every
//! request attack goes through the proxy to a recording upstream, which checks on the bytes that
//! it never saw a smuggled or truncated request as whole; and the server keeps serving everyone
//! else.

mod connection_flood;
pub mod h2;
mod slowloris;
mod smuggling;
pub mod upstreams;
