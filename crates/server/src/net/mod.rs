//! The connection layer: everything between an accepted socket and a request handed to the
//! pipeline. The accept loop and one connection (`conn.rs`), the worker runtimes (`workers.rs`),
//! connection limits (`limits.rs`), TLS and its certificates (`tls.rs`, `cert.rs`), the PROXY
//! protocol header (`proxy_protocol/`), HTTP/1.1 connections parked while idle (`h1.rs`), h2c
//! preface sniffing and the hold on a port's protocols (`h2c.rs`, `preface.rs`), what idle means
//! and the header timer (`idle.rs`), the cleartext socket's `sendfile` writes (`sendfile.rs`),
//! and HTTP/3 over QUIC, the TLS listeners' third front end (`h3/`).
//!
//! May import `pipeline` (the service a connection runs) and `shared`; never a feature (an
//! upgrade's link to its connection is `shared::upgrade`), never `ops` (`tests/it/layers.rs`).

pub mod cert;
pub mod conn;
pub mod h1;
pub mod h2c;
pub mod h3;
pub mod idle;
pub mod limits;
pub mod preface;
pub mod proxy_protocol;
pub mod sendfile;
pub mod tickets;
pub mod tls;
pub mod workers;
mod write_through;
