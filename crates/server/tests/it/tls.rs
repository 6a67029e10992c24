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
        let cert = sluice::cert::generate(&[host.to_string()]).unwrap();
        sluice::cert::write_files(&cert, &dir.join(name)).unwrap();
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
