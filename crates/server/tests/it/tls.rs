//! TLS: ALPN picks h2 or HTTP/1.1, an h1-only listener never selects h2, SNI picks certificates.

use std::sync::Arc;

use sluice_testkit::{Offer, start_toml, start_toml_in, tls_client};

const TLS: &str = r#"
[log]
access = "off"
[[listeners]]
name = "h2"
address = "127.0.0.1:0"
tls = "self-signed"
[[listeners]]
name = "h1"
address = "127.0.0.1:0"
protocols = ["http/1.1"]
tls = "self-signed"
[[routes]]
respond = { body = "secure\n" }
"#;

#[tokio::test]
async fn alpn_selects_h2_or_http1_as_offered() {
    let server = start_toml(TLS).await;
    let url = format!("https://localhost:{}/", server.addr("h2").port());
    let h2 = tls_client(Offer::Both).get(&url).send().await.unwrap();
    assert_eq!(h2.version(), http::Version::HTTP_2);
    assert_eq!(h2.text().await.unwrap(), "secure\n");
    let h1 = tls_client(Offer::Http1).get(&url).send().await.unwrap();
    assert_eq!(h1.version(), http::Version::HTTP_11);
}

#[tokio::test]
async fn an_h1_only_listener_never_selects_h2() {
    let server = start_toml(TLS).await;
    let url = format!("https://localhost:{}/", server.addr("h1").port());
    let resp = tls_client(Offer::Both).get(&url).send().await.unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_11);
    // A client offering only h2 has no protocol in common: the handshake fails.
    assert!(tls_client(Offer::Http2).get(&url).send().await.is_err());
}

#[tokio::test]
async fn curl_negotiates_h2_and_http1_by_alpn() {
    let server = start_toml(TLS).await;
    let both = format!("https://127.0.0.1:{}/", server.addr("h2").port());
    let h1only = format!("https://127.0.0.1:{}/", server.addr("h1").port());
    let base = ["-k", "-w", "%{http_version}", "-o", "/dev/null"];
    assert_eq!(
        crate::curl(&[&base[..], &["--http2", &both]].concat()).await,
        "2"
    );
    assert_eq!(
        crate::curl(&[&base[..], &["--http1.1", &both]].concat()).await,
        "1.1"
    );
    assert_eq!(
        crate::curl(&[&base[..], &["--http2", &h1only]].concat()).await,
        "1.1"
    );
}

#[tokio::test]
async fn sni_picks_the_certificate_for_the_requested_host() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    for (name, host) in [
        ("default", "default.test"),
        ("api", "api.example.test"),
        ("wild", "x.wild.test"),
    ] {
        let cert = sluice_server::net::cert::generate(&[host.to_string()]).unwrap();
        sluice_server::net::cert::write_files(&cert, &dir.join(name)).unwrap();
    }
    let server = start_toml_in(
        dir,
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        [listeners.tls]
        cert = "default/cert.pem"
        key = "default/key.pem"
        [[listeners.tls.sni]]
        hosts = ["api.example.test"]
        cert = "api/cert.pem"
        key = "api/key.pem"
        [[listeners.tls.sni]]
        hosts = ["*.wild.test"]
        cert = "wild/cert.pem"
        key = "wild/key.pem"
        [[routes]]
        respond = { body = "ok" }
        "#,
    )
    .await;
    let addr = server.first_addr();
    for (sni, expected_dir) in [
        ("api.example.test", "api"),
        ("x.wild.test", "wild"),
        ("other.test", "default"),
    ] {
        let presented = peer_certificate(addr, sni).await;
        let pem = std::fs::read(dir.join(expected_dir).join("cert.pem")).unwrap();
        use rustls_pki_types::pem::PemObject;
        let leaf = rustls_pki_types::CertificateDer::pem_slice_iter(&pem)
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(
            presented,
            leaf.as_ref(),
            "SNI {sni} should get the {expected_dir} certificate"
        );
    }
}

/// The leaf certificate the server presents for `sni`.
pub(crate) async fn peer_certificate(addr: std::net::SocketAddr, sni: &str) -> Vec<u8> {
    let config = sluice_testkit::insecure_tls_config();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from(sni.to_string()).unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .as_ref()
        .to_vec()
}

/// Session resumption (RFC 8446 §2.2; RFC 5077 for TLS 1.2): a client that got a ticket on its
/// first connection resumes on the next, skipping the certificate, on an h2 and an h1-only
/// listener, over TLS 1.3 and TLS 1.2; ALPN still picks the listener's protocol.
#[tokio::test]
async fn a_client_resumes_its_session_with_a_ticket() {
    use rustls::HandshakeKind;
    let temp = tempfile::tempdir().unwrap();
    let dev = sluice_server::net::cert::generate(&["localhost".to_string()]).unwrap();
    sluice_server::net::cert::write_files(&dev, temp.path()).unwrap();
    let server = start_toml_in(
        temp.path(),
        r#"
        [log]
        access = "off"
        [[listeners]]
        name = "h2"
        address = "127.0.0.1:0"
        tls = { cert = "cert.pem", key = "key.pem" }
        [[listeners]]
        name = "h1"
        address = "127.0.0.1:0"
        protocols = ["http/1.1"]
        tls = { cert = "cert.pem", key = "key.pem" }
        [[routes]]
        respond = { body = "resumed\n" }
        "#,
    )
    .await;
    let mut roots = rustls::RootCertStore::empty();
    use rustls_pki_types::pem::PemObject;
    roots
        .add(rustls_pki_types::CertificateDer::from_pem_slice(dev.ca_cert_pem.as_bytes()).unwrap())
        .unwrap();
    let cases: [(&str, &[u8]); 2] = [("h2", b"h2"), ("h1", b"http/1.1")];
    for (listener, alpn) in cases {
        for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_protocol_versions(&[version])
                .unwrap()
                .with_root_certificates(roots.clone())
                .with_no_client_auth();
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            // The client's session store (rustls's default: in memory) is shared by the
            // connections made with this config.
            let config = Arc::new(config);
            let what = format!("{listener} listener, {:?}", version.version);
            let (kind, negotiated) = exchange(server.addr(listener), &config, alpn).await;
            assert_eq!(kind, HandshakeKind::Full, "first connection, {what}");
            assert_eq!(negotiated, alpn, "{what}");
            for _ in 0..2 {
                let (kind, negotiated) = exchange(server.addr(listener), &config, alpn).await;
                assert_eq!(kind, HandshakeKind::Resumed, "next connection, {what}");
                assert_eq!(negotiated, alpn, "{what}");
            }
        }
    }
}

/// One connection: the handshake, then enough of an exchange that the client has read what the
/// server sent after it (TLS 1.3 tickets come after the handshake): an HTTP/1.1 response, or the
/// server's HTTP/2 SETTINGS. Returns how the handshake went and the protocol ALPN chose.
async fn exchange(
    addr: std::net::SocketAddr,
    config: &Arc<rustls::ClientConfig>,
    alpn: &[u8],
) -> (rustls::HandshakeKind, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let connector = tokio_rustls::TlsConnector::from(config.clone());
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    let (_, conn) = tls.get_ref();
    let kind = conn.handshake_kind().unwrap();
    let negotiated = conn.alpn_protocol().unwrap().to_vec();
    let read = async {
        if alpn == b"h2" {
            tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
                .await
                .unwrap();
            // A frame header, then its payload: the server's SETTINGS (RFC 9113 §3.4).
            let mut head = [0u8; 9];
            tls.read_exact(&mut head).await.unwrap();
            assert_eq!(head[3], 0x4, "the server's first frame is SETTINGS");
        } else {
            tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut response = Vec::new();
            tls.read_to_end(&mut response).await.unwrap();
            assert!(response.ends_with(b"resumed\n"));
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .expect("exchange timed out");
    (kind, negotiated)
}

/// A fleet's shared ticket keys (`session_ticket_keys`, docs/fleet.md): a client that got its
/// ticket from one instance resumes on another instance reading the same key file (as after an
/// L4 balancer moved it), over TLS 1.3 and 1.2; an instance with other keys makes it start over.
#[tokio::test]
async fn a_session_from_one_instance_resumes_on_another_with_the_same_ticket_keys() {
    use rustls::HandshakeKind;
    let temp = tempfile::tempdir().unwrap();
    let dev = sluice_server::net::cert::generate(&["localhost".to_string()]).unwrap();
    sluice_server::net::cert::write_files(&dev, temp.path()).unwrap();
    std::fs::write(
        temp.path().join("tickets.key"),
        "# shared by the fleet\nc2x1aWNlIHRlc3Qga2V5IG51bWJlciBvbmUsIDQ4IGJ5dGVzIGxvbmcuLi4uLi4u\n",
    )
    .unwrap();
    std::fs::write(
        temp.path().join("other.key"),
        "c2x1aWNlIHRlc3Qga2V5IG51bWJlciB0d28sIDQ4IGJ5dGVzIGxvbmcuLi4uLi4u\n",
    )
    .unwrap();
    let config = |keys: &str| {
        format!(
            r#"
            [log]
            access = "off"
            [[listeners]]
            address = "127.0.0.1:0"
            protocols = ["http/1.1"]
            tls = {{ cert = "cert.pem", key = "key.pem", session_ticket_keys = "{keys}" }}
            [[routes]]
            respond = {{ body = "resumed\n" }}
            "#
        )
    };
    let a = start_toml_in(temp.path(), &config("tickets.key")).await;
    let b = start_toml_in(temp.path(), &config("tickets.key")).await;
    let c = start_toml_in(temp.path(), &config("other.key")).await;
    let mut roots = rustls::RootCertStore::empty();
    use rustls_pki_types::pem::PemObject;
    roots
        .add(rustls_pki_types::CertificateDer::from_pem_slice(dev.ca_cert_pem.as_bytes()).unwrap())
        .unwrap();
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let client = || {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_protocol_versions(&[version])
                .unwrap()
                .with_root_certificates(roots.clone())
                .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Arc::new(config)
        };
        let what = format!("{:?}", version.version);
        let config = client();
        let (kind, _) = exchange(a.first_addr(), &config, b"http/1.1").await;
        assert_eq!(kind, HandshakeKind::Full, "first, on A, {what}");
        let (kind, _) = exchange(b.first_addr(), &config, b"http/1.1").await;
        assert_eq!(kind, HandshakeKind::Resumed, "then on B, {what}");
        let config = client();
        let (kind, _) = exchange(a.first_addr(), &config, b"http/1.1").await;
        assert_eq!(kind, HandshakeKind::Full, "{what}");
        let (kind, _) = exchange(c.first_addr(), &config, b"http/1.1").await;
        assert_eq!(
            kind,
            HandshakeKind::Full,
            "other keys: no resumption, {what}"
        );
    }
}
