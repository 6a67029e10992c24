//! The test kit (dev only): start sluice from a TOML snippet on port 0, start demo origins, and
//! make HTTP/1.1, h2c and TLS clients with a chosen ALPN offer.
//!
//! Everything binds 127.0.0.1 port 0 and waits on real readiness (a bound socket), never a sleep.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::Duration;

pub mod browser;
pub mod external;
pub mod http3;
pub mod independent;
pub mod recording;

pub use reqwest;
use sluice_server::RunningServer;

/// A running sluice with its config directory.
pub struct TestServer {
    server: Option<RunningServer>,
    /// Directory holding `sluice.toml`; relative paths in the config resolve against it.
    pub dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

/// Start sluice from `toml`, written to a fresh temporary directory.
pub async fn start_toml(toml: &str) -> TestServer {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().to_path_buf();
    let mut server = start_toml_in(&dir, toml).await;
    server._temp = Some(temp);
    server
}

/// Start sluice from `toml` written as `dir/sluice.toml`.
pub async fn start_toml_in(dir: &Path, toml: &str) -> TestServer {
    let path = dir.join("sluice.toml");
    std::fs::write(&path, toml).unwrap();
    let config = match sluice_config::load(&path) {
        Ok(config) => config,
        Err(diagnostics) => panic!("test config is invalid:\n{diagnostics}"),
    };
    start_config(&config, dir).await
}

/// Start sluice from a typed config.
pub async fn start_config(config: &sluice_config::Config, dir: &Path) -> TestServer {
    let server = sluice_server::start(config).await.unwrap();
    TestServer {
        server: Some(server),
        dir: dir.to_path_buf(),
        _temp: None,
    }
}

impl TestServer {
    /// The bound address of a listener (by name; the address string when unnamed).
    pub fn addr(&self, listener: &str) -> SocketAddr {
        self.running()
            .address(listener)
            .unwrap_or_else(|| panic!("no listener named {listener}"))
    }

    /// The address of the first listener.
    pub fn first_addr(&self) -> SocketAddr {
        self.running().listeners()[0].address
    }

    /// `http://ADDR/path` on the first listener.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.first_addr())
    }

    pub fn running(&self) -> &RunningServer {
        self.server.as_ref().unwrap()
    }

    /// Write `toml` as `dir/sluice.toml` and reload it as SIGHUP does
    /// ([`sluice_server::ops::lifecycle::reload`]: validated as `sluice check` does, then put in force).
    pub async fn reload_toml(
        &self,
        toml: &str,
    ) -> Result<sluice_server::ReloadSummary, sluice_server::ops::lifecycle::ReloadRefused> {
        let path = self.dir.join("sluice.toml");
        std::fs::write(&path, toml).unwrap();
        sluice_server::ops::lifecycle::reload(self.running(), &path)
            .await
            .map(|(_, summary)| summary)
    }

    /// Drain and stop; returns whether everything finished within `timeout`.
    pub async fn shutdown(mut self, timeout: Duration) -> bool {
        self.server.take().unwrap().shutdown(timeout).await
    }
}

/// A demo origin on 127.0.0.1 port 0.
pub struct TestOrigin {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// Start a demo origin, optionally with an `X-Origin` name.
pub async fn start_origin(name: Option<&str>) -> TestOrigin {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions {
        name: name.map(String::from),
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(origin.serve_tcp(listener, async move {
        let _ = stopped.await;
    }));
    TestOrigin {
        addr,
        stop: Some(stop),
        task: Some(task),
    }
}

impl TestOrigin {
    /// Stop accepting and wait for open connections to finish.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// Which protocols a test client offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// HTTP/1.1 only (ALPN `http/1.1`).
    Http1,
    /// h2 and http/1.1 by ALPN (what browsers and curl do), or HTTP/1.1 on cleartext.
    Both,
    /// HTTP/2 only: ALPN `h2` with TLS, prior knowledge (h2c) without.
    Http2,
}

fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A client for cleartext HTTP offering `offer`.
pub fn client(offer: Offer) -> reqwest::Client {
    install_crypto_provider();
    let builder = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .no_proxy();
    let builder = match offer {
        Offer::Http1 | Offer::Both => builder.http1_only(),
        Offer::Http2 => builder.http2_prior_knowledge(),
    };
    builder.build().unwrap()
}

/// A TLS client that accepts any certificate (test servers are self-signed) and offers `offer`
/// by ALPN.
pub fn tls_client(offer: Offer) -> reqwest::Client {
    install_crypto_provider();
    let mut tls = insecure_tls_config();
    tls.alpn_protocols = match offer {
        Offer::Http1 => vec![b"http/1.1".to_vec()],
        Offer::Both => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        Offer::Http2 => vec![b"h2".to_vec()],
    };
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .no_proxy()
        .use_preconfigured_tls(tls)
        .build()
        .unwrap()
}

/// A rustls client configuration that accepts any server certificate, no ALPN set (the bench
/// driver's, so both trust local self-signed servers the same way).
pub fn insecure_tls_config() -> rustls::ClientConfig {
    sluice_bench::client::insecure_tls_config().unwrap()
}

/// Send raw bytes on a fresh connection and read until the server closes or `limit` bytes
/// arrive (for malformed-request tests that no well-behaved client can send).
pub async fn raw_exchange(addr: SocketAddr, request: &[u8], limit: usize) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let read = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("raw exchange timed out");
    out
}

/// Send raw bytes, keep the connection open for writing, and read until the server closes it
/// or sends a complete response head (for tests of what the server does while waiting for more).
pub async fn raw_exchange_open(addr: SocketAddr, request: &[u8], limit: usize) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let read = async {
        while !out.windows(4).any(|w| w == b"\r\n\r\n") && out.len() < limit {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("raw exchange timed out");
    out
}
