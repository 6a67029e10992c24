//! The sluice server: listeners, TLS, connection serving, routing and the request pipeline, plus
//! the command-line interface of the `sluice` binary.
//!
//! Start reading at [`server::start`] (how a config becomes running listeners), then
//! [`conn`] (one connection) and [`pipeline`] (one request).

pub mod access_log;
pub mod admin;
pub mod cache;
pub mod cert;
pub mod cli;
pub mod client;
pub mod compress;
pub mod conn;
pub mod context;
pub mod cpu;
pub mod h1;
pub mod h2c;
pub mod host;
pub mod idle;
pub mod lifecycle;
pub mod limits;
pub mod metrics;
pub mod observe;
pub mod pipeline;
pub mod precompress;
pub mod preface;
pub mod proxy;
pub mod proxy_protocol;
pub mod rate_limit;
pub mod responses;
pub mod router;
pub mod sendfile;
pub mod server;
pub mod target;
pub mod tls;
pub mod tunnel;
pub mod unread_body;
pub mod upstreams;
pub mod workers;
mod write_through;

pub use server::{
    BoundListener, Changes, ReloadSummary, RunningServer, StartError, start, start_on,
};
