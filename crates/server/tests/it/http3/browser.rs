//! The browser acceptance test: headless Chromium (Debian's) loads a page and a compressed JSON
//! fetch through a sluice proxy route over HTTP/3 and writes each one's `nextHopProtocol` into
//! the DOM (`--dump-dom`): `h3` with `--origin-to-force-quic-on`, `h2` without (the negative
//! control). Chromium upgrades to h3 from `Alt-Svc` only for publicly trusted certificates, so
//! the test checks that it recorded the advertised service in its profile
//! (`Default/Network Persistent State`).
//!
//! Every run has a fresh `--user-data-dir`, `--disable-background-networking` and
//! `--host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"`: Chromium reaches only loopback.

use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use sha2::Digest as _;
use sluice_testkit::{external, start_origin, start_toml_in};

/// The page: the navigation's protocol at once, the fetch's (and whether its body came
/// compressed) when it has loaded; `done` marks the end for `--dump-dom`.
const PAGE: &str = r#"<!doctype html><html><body><p id="nav"></p><p id="fetch"></p><script>
document.getElementById('nav').textContent =
  'nav=' + performance.getEntriesByType('navigation')[0].nextHopProtocol;
fetch('/api/what-date-is-it').then(r => r.text()).then(text => {
  const e = performance.getEntriesByType('resource').find(e => e.name.includes('/api/'));
  document.getElementById('fetch').textContent = 'fetch=' + e.nextHopProtocol +
    ' compressed=' + (e.encodedBodySize < e.decodedBodySize) + ' json=' + (typeof JSON.parse(text) === 'object') +
    ' done';
});
</script></body></html>"#;

/// Chromium's `--ignore-certificate-errors-spki-list` value: base64 of the SHA-256 of the
/// leaf's SubjectPublicKeyInfo.
fn spki_hash(key_pem: &str) -> String {
    use rustls_pki_types::pem::PemObject;
    let key = rcgen::KeyPair::from_pem(key_pem).unwrap();
    let spki =
        rustls_pki_types::SubjectPublicKeyInfoDer::from_pem_slice(key.public_key_pem().as_bytes())
            .unwrap();
    base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(spki.as_ref()))
}

fn chromium(program: &Path, profile: &Path, port: u16, spki: &str, force_quic: bool) -> Command {
    let mut command = sluice_testkit::browser::headless(program, profile, 60);
    command
        .arg("--virtual-time-budget=10000")
        .arg(format!("--ignore-certificate-errors-spki-list={spki}"));
    if force_quic {
        command.arg(format!("--origin-to-force-quic-on=127.0.0.1:{port}"));
    }
    command.arg(format!("https://127.0.0.1:{port}/"));
    command
}

async fn dom(command: Command) -> String {
    let out = super::independent::run(command).await;
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn chromium_loads_a_page_and_a_compressed_fetch_over_h3() {
    let Some(program) = external::require("chromium", "apt-get install chromium") else {
        return;
    };
    let origin = start_origin(None).await;
    let dir = tempfile::tempdir().unwrap();
    let cert =
        sluice_server::net::cert::generate(&["127.0.0.1".into(), "localhost".into()]).unwrap();
    sluice_server::net::cert::write_files(&cert, &dir.path().join("tls")).unwrap();
    let server = start_toml_in(
        dir.path(),
        &format!(
            r#"
            [log]
            access = "off"
            [[listeners]]
            name = "site"
            address = "127.0.0.1:0"
            tls = {{ cert = "tls/cert.pem", key = "tls/key.pem" }}
            protocols = ["http/1.1", "h2", "h3"]
            [[routes]]
            path = "/"
            respond = {{ body = '''{PAGE}''', headers = {{ content-type = "text/html" }} }}
            [[routes]]
            path_prefix = "/api/"
            proxy = {{ to = "{}", strip_prefix = "/api" }}
            compress = {{ min_length = 0 }}
            "#,
            origin.addr
        ),
    )
    .await;
    let port = server.addr("site").port();
    let spki = spki_hash(&cert.leaf_key_pem);

    let profile = tempfile::tempdir().unwrap();
    let over_h3 = dom(chromium(&program, profile.path(), port, &spki, true)).await;
    assert!(over_h3.contains("nav=h3"), "{over_h3}");
    assert!(
        over_h3.contains("fetch=h3 compressed=true json=true done"),
        "{over_h3}"
    );

    // The negative control: the same page without the flag comes over TCP.
    let profile = tempfile::tempdir().unwrap();
    let over_tcp = dom(chromium(&program, profile.path(), port, &spki, false)).await;
    assert!(over_tcp.contains("nav=h2"), "{over_tcp}");
    assert!(
        over_tcp.contains("fetch=h2 compressed=true json=true done"),
        "{over_tcp}"
    );
    // ... and the Alt-Svc it was sent is in the profile.
    let state = std::fs::read_to_string(profile.path().join("Default/Network Persistent State"))
        .unwrap_or_default();
    assert!(
        state.contains("alternative_service") && state.contains(&format!("\"port\":{port}")),
        "no alternative service for port {port} recorded: {state}"
    );
}
