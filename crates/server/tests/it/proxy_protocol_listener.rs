//! `proxy_protocol = true` on a listener: the PROXY header's (v1 or v2) source address becomes
//! the client address upstreams (X-Forwarded-For) and the access log see; a connection without
//! a valid header is closed with no response and counted. (Not `proxy_protocol.rs`: that one is
//! about HTTP details of the reverse proxy.)

use std::net::SocketAddr;

use sluice_testkit::{TestServer, raw_exchange, start_toml_in};

use crate::proxy::serve_fn;

/// An upstream answering with the `X-Forwarded-For` it received.
async fn xff_upstream() -> SocketAddr {
    let (addr, _) = serve_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
        let xff = req
            .headers()
            .get("x-forwarded-for")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default();
        hyper::Response::new(sluice_core::Body::from(format!("xff={xff}")))
    })
    .await;
    addr
}

/// Two listeners proxying to `upstream`: `lb` with `proxy_protocol = true`, `direct` without.
/// `lb` waits 1 s for a header, so the truncated case is quick. JSON access log in `dir/access.log`, admin for metrics.
async fn server(dir: &std::path::Path, upstream: SocketAddr) -> TestServer {
    start_toml_in(
        dir,
        &format!(
            r#"
            [log]
            access = "access.log"
            format = "json"
            [admin]
            address = "127.0.0.1:0"
            [[listeners]]
            name = "lb"
            address = "127.0.0.1:0"
            proxy_protocol = true
            header_read_timeout = "1s"
            [[listeners]]
            name = "direct"
            address = "127.0.0.1:0"
            [[routes]]
            name = "api"
            proxy = {{ to = "{upstream}" }}
            "#
        ),
    )
    .await
}

const REQUEST: &[u8] = b"GET /who HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";

fn with_header(header: &[u8]) -> Vec<u8> {
    let mut out = header.to_vec();
    out.extend_from_slice(REQUEST);
    out
}

fn body(response: &[u8]) -> String {
    let text = String::from_utf8_lossy(response);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text.split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

/// A v2 PROXY TCP over IPv4 header from 198.51.100.7:4242, with one TLV.
fn v2_header() -> Vec<u8> {
    let mut out = b"\r\n\r\n\0\r\nQUIT\n\x21\x11".to_vec();
    let mut body = vec![198, 51, 100, 7, 127, 0, 0, 1];
    body.extend_from_slice(&4242u16.to_be_bytes());
    body.extend_from_slice(&443u16.to_be_bytes());
    body.extend_from_slice(&[0x02, 0, 4]);
    body.extend_from_slice(b"lb.t");
    out.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    out.extend_from_slice(&body);
    out
}

#[tokio::test]
async fn the_header_address_is_the_client_address() {
    let temp = tempfile::tempdir().unwrap();
    let server = server(temp.path(), xff_upstream().await).await;
    let lb = server.addr("lb");

    let v1 = b"PROXY TCP4 203.0.113.9 127.0.0.1 5555 80\r\n";
    let response = raw_exchange(lb, &with_header(v1), 1 << 16).await;
    assert_eq!(body(&response), "xff=203.0.113.9");

    let response = raw_exchange(lb, &with_header(&v2_header()), 1 << 16).await;
    assert_eq!(body(&response), "xff=198.51.100.7");

    let v1_v6 = b"PROXY TCP6 2001:db8::5 ::1 5555 80\r\n";
    let response = raw_exchange(lb, &with_header(v1_v6), 1 << 16).await;
    assert_eq!(body(&response), "xff=2001:db8::5");

    // UNKNOWN (and v2 LOCAL): the balancer's own connection keeps its address.
    let response = raw_exchange(lb, &with_header(b"PROXY UNKNOWN\r\n"), 1 << 16).await;
    assert_eq!(body(&response), "xff=127.0.0.1");

    let lines = crate::lifecycle::wait_for_lines(&temp.path().join("access.log"), 4).await;
    let remotes: Vec<String> = lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|entry| entry["remote"].as_str().unwrap().to_string())
        .collect();
    for expected in ["203.0.113.9", "198.51.100.7", "2001:db8::5", "127.0.0.1"] {
        assert!(remotes.iter().any(|r| r == expected), "{remotes:?}");
    }
}

#[tokio::test]
async fn a_header_split_from_its_request_still_works() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let temp = tempfile::tempdir().unwrap();
    let server = server(temp.path(), xff_upstream().await).await;
    let mut stream = tokio::net::TcpStream::connect(server.addr("lb"))
        .await
        .unwrap();
    // Two writes without Nagle: two segments, so the server's first read has half a header.
    stream.set_nodelay(true).unwrap();
    stream.write_all(b"PROXY TCP4 203.0.").await.unwrap();
    stream
        .write_all(&with_header(b"113.10 127.0.0.1 1 2\r\n"))
        .await
        .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    assert_eq!(body(&response), "xff=203.0.113.10");
}

#[tokio::test]
async fn connections_without_a_valid_header_get_no_response() {
    let temp = tempfile::tempdir().unwrap();
    let server = server(temp.path(), xff_upstream().await).await;
    let lb = server.addr("lb");
    let long_line = {
        let mut line = b"PROXY UNKNOWN ".to_vec();
        line.resize(120, b'x');
        line.extend_from_slice(b"\r\n");
        line
    };
    let cases: [&[u8]; 4] = [
        REQUEST,
        b"\x00\x01garbage\r\n\r\n",
        &long_line,
        // Truncated: the rest never comes, and header_read_timeout ends the wait.
        b"PROXY TCP4 203.0.113.9",
    ];
    for case in cases {
        let response = raw_exchange(lb, case, 1 << 16).await;
        assert!(
            response.is_empty(),
            "{:?} got {:?}",
            String::from_utf8_lossy(case),
            String::from_utf8_lossy(&response)
        );
    }
    let text = crate::scrape_metrics(&server).await;
    assert_eq!(
        crate::metric(&text, "sluice_proxy_protocol_errors_total{listener=\"lb\"}"),
        4.0
    );
}

#[tokio::test]
async fn a_listener_without_the_option_is_unchanged() {
    let temp = tempfile::tempdir().unwrap();
    let server = server(temp.path(), xff_upstream().await).await;
    let response = raw_exchange(server.addr("direct"), REQUEST, 1 << 16).await;
    assert_eq!(body(&response), "xff=127.0.0.1");
    // A PROXY header there is just a malformed request line.
    let v1 = b"PROXY TCP4 203.0.113.9 127.0.0.1 5555 80\r\n";
    let response = raw_exchange(server.addr("direct"), &with_header(v1), 1 << 16).await;
    assert!(
        String::from_utf8_lossy(&response).starts_with("HTTP/1.1 400"),
        "{}",
        String::from_utf8_lossy(&response)
    );
    let text = crate::scrape_metrics(&server).await;
    assert_eq!(
        crate::metric(
            &text,
            "sluice_proxy_protocol_errors_total{listener=\"direct\"}"
        ),
        0.0
    );
}

#[tokio::test]
async fn the_header_comes_before_the_tls_handshake() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let temp = tempfile::tempdir().unwrap();
    let upstream = xff_upstream().await;
    let server = start_toml_in(
        temp.path(),
        &format!(
            r#"
            [log]
            access = "off"
            [[listeners]]
            address = "127.0.0.1:0"
            protocols = ["http/1.1"]
            tls = "self-signed"
            proxy_protocol = true
            [[routes]]
            proxy = {{ to = "{upstream}" }}
            "#
        ),
    )
    .await;
    let mut tcp = tokio::net::TcpStream::connect(server.first_addr())
        .await
        .unwrap();
    tcp.write_all(&v2_header()).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(
        sluice_testkit::insecure_tls_config(),
    ));
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    tls.write_all(REQUEST).await.unwrap();
    let mut response = Vec::new();
    // The server may close without close_notify once the response is sent.
    let _ = tls.read_to_end(&mut response).await;
    assert_eq!(body(&response), "xff=198.51.100.7");
}
