//! Reload: a new config reaches the next request (on open keep-alive and HTTP/2 connections
//! too) while requests in flight finish on the old one; a bad config is refused and the old one
//! goes on serving; sockets, unchanged upstream pools, cache entries and metrics survive;
//! certificates are read again. Through the library call SIGHUP makes
//! (`sluice_server::ops::lifecycle::reload`), and through the binary (`process.rs`).

mod listeners;
mod load;
mod serving;
mod state;

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A config with one plain listener and a fixed response at `/`, saying `body`.
pub fn respond_config(body: &str) -> String {
    format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        name = "main"
        address = "127.0.0.1:0"
        [[routes]]
        name = "answer"
        respond = {{ body = "{body}" }}
        "#
    )
}

/// One HTTP/1.1 keep-alive connection, driven by hand so a test knows every request goes over
/// the same socket.
pub struct KeepAlive {
    stream: TcpStream,
    buffered: Vec<u8>,
}

impl KeepAlive {
    pub async fn connect(addr: SocketAddr) -> Self {
        Self {
            stream: TcpStream::connect(addr).await.unwrap(),
            buffered: Vec::new(),
        }
    }

    /// `GET path` on this connection; the status and body (responses carry Content-Length).
    pub async fn get(&mut self, path: &str) -> (u16, String) {
        let request = format!("GET {path} HTTP/1.1\r\nHost: reload.test\r\n\r\n");
        self.stream.write_all(request.as_bytes()).await.unwrap();
        let head_end = loop {
            if let Some(end) = find(&self.buffered, b"\r\n\r\n") {
                break end + 4;
            }
            self.fill().await;
        };
        let head = String::from_utf8(self.buffered[..head_end].to_vec()).unwrap();
        let status: u16 = head[9..12].parse().unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().unwrap())
            })
            .expect("a Content-Length");
        while self.buffered.len() < head_end + length {
            self.fill().await;
        }
        let body = String::from_utf8(self.buffered[head_end..head_end + length].to_vec()).unwrap();
        self.buffered.drain(..head_end + length);
        (status, body)
    }

    async fn fill(&mut self) {
        let mut buf = [0u8; 4096];
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            self.stream.read(&mut buf),
        )
        .await
        .expect("the response took over 10 s")
        .unwrap();
        assert!(read > 0, "the server closed the keep-alive connection");
        self.buffered.extend_from_slice(&buf[..read]);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
