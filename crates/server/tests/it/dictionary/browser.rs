//! A real browser, end to end: headless Chromium (Debian's) loads a page from sluice over
//! `http://127.0.0.1` and over HTTPS (a development certificate, trusted by its key with
//! `--ignore-certificate-errors-spki-list`), fetches v1 of a bundle, waits on a real-time
//! endpoint (Chromium stores a dictionary asynchronously once its body has ended, and under
//! `--virtual-time-budget` timers fire at once), then fetches v2: the page writes the
//! `Content-Encoding` it got and the SHA-256 of the decoded bytes into the DOM, read with
//! `--dump-dom`. Managed and automatic modes, `dcz` and `dcb`, and a dictionary that starts
//! with zstd's magic (raw content all the same, RFC 9842 §2.1.4).
//!
//! Chromium reaches nothing but loopback: `--host-resolver-rules` maps every other name to
//! nothing, background networking is off, and each run has a fresh profile.

use std::path::Path;

use sha2::Digest as _;

use super::*;
use sluice_testkit::start_origin;

const PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"></head><body>
<pre id="out">pending</pre>
<script>
async function sha(buffer) {
  const d = await crypto.subtle.digest('SHA-256', buffer);
  return Array.from(new Uint8Array(d)).map(b => b.toString(16).padStart(2, '0')).join('');
}
(async () => {
  const out = document.getElementById('out');
  const q = new URLSearchParams(location.search);
  try {
    await (await fetch(q.get('v1'))).arrayBuffer();
    let encoding = null, body = null, tries = 0;
    for (; tries < 10; tries++) {
      // Real time passes here (the origin delays), so Chromium can store the dictionary.
      await (await fetch('/slow/stream?chunks=2&size=32&delay_ms=300', {cache: 'no-store'})).text();
      const v2 = await fetch(q.get('v2'), {cache: 'no-store'});
      encoding = v2.headers.get('content-encoding');
      body = await v2.arrayBuffer();
      if (encoding === 'dcz' || encoding === 'dcb') break;
    }
    out.textContent = JSON.stringify({encoding, tries, sha256: await sha(body)});
  } catch (e) {
    out.textContent = JSON.stringify({error: String(e)});
  }
})();
</script></body></html>"#;

/// The SPKI SHA-256 (base64) of the certificate whose key is `key_pem`, as Chromium's
/// `--ignore-certificate-errors-spki-list` wants it.
fn spki_hash(key_pem: &str) -> String {
    use base64::Engine as _;
    let key = rcgen::KeyPair::from_pem(key_pem).unwrap();
    // `PUBLIC KEY` PEM is the SubjectPublicKeyInfo in base64 between its armour lines.
    let pem = key.public_key_pem();
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let spki = base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap();
    base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(spki))
}

/// Run Chromium on `url` and return what the page wrote, as JSON.
async fn chromium(chromium: &Path, url: &str, spki: &str) -> serde_json::Value {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = sluice_testkit::browser::headless(chromium, profile.path(), 90);
    cmd.arg("--virtual-time-budget=30000")
        .arg(format!("--ignore-certificate-errors-spki-list={spki}"))
        .arg(url);
    // Off the runtime: the server under test runs on it.
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let json = dom
        .split("<pre id=\"out\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .unwrap_or_else(|| {
            panic!(
                "no result in the DOM of {url}: {dom}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

fn hex_sha256(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

#[tokio::test]
async fn chromium_decodes_dcz_and_dcb_deltas_over_http_and_https() {
    let Some(chromium_path) = external::require("chromium", "apt-get install chromium") else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let mut magic_v1 = vec![0x37, 0xa4, 0x30, 0xec];
    magic_v1.extend_from_slice(&bundle(11, 1));
    let mut magic_v2 = vec![0x37, 0xa4, 0x30, 0xec];
    magic_v2.extend_from_slice(&bundle(11, 2));
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("public/index.html", PAGE.as_bytes().to_vec()),
        ("public/app.v1.js", bundle(7, 1)),
        ("public/app.v2.js", bundle(7, 2)),
        ("public/lib-1.0.0.js", bundle(8, 1)),
        ("public/lib-1.0.1.js", bundle(8, 2)),
        ("public/magic.v1.js", magic_v1),
        ("public/magic.v2.js", magic_v2),
    ];
    for (name, data) in &files {
        write_files(dir, &[(name, data)]);
    }
    let cert = sluice_server::net::cert::generate(&["127.0.0.1".to_owned()]).unwrap();
    let written = sluice_server::net::cert::write_files(&cert, &dir.join("tls")).unwrap();
    let spki = spki_hash(&cert.leaf_key_pem);
    let origin = start_origin(None).await;
    // One route per mode and coding, each over the same files.
    let mut routes = String::new();
    for (prefix, dictionary) in [
        ("/dcz/", r#"{ match = "/dcz/*.v*.js", codings = ["dcz"] }"#),
        ("/dcb/", r#"{ match = "/dcb/*.v*.js", codings = ["dcb"] }"#),
        ("/auto-dcz/", r#"{ auto = true, codings = ["dcz"] }"#),
        ("/auto-dcb/", r#"{ auto = true, codings = ["dcb"] }"#),
        // Nothing configured beyond turning it on.
        ("/auto/", r#""auto""#),
    ] {
        routes.push_str(&format!(
            r#"
            [[routes]]
            path_prefix = "{prefix}"
            static = {{ root = "public", strip_prefix = true, max_age = "1h" }}
            compress = {{}}
            dictionary = {dictionary}
            "#
        ));
    }
    let server = start_toml_in(
        dir,
        &format!(
            r#"
            [log]
            access = "off"
            [[listeners]]
            name = "plain"
            address = "127.0.0.1:0"
            [[listeners]]
            name = "tls"
            address = "127.0.0.1:0"
            tls = {{ cert = "{cert}", key = "{key}" }}
            [[routes]]
            path_prefix = "/slow/"
            proxy = {{ to = "{origin}", strip_prefix = "/slow" }}
            {routes}
            [[routes]]
            static = {{ root = "public" }}
            "#,
            cert = written.cert.display(),
            key = written.key.display(),
            origin = origin.addr,
        ),
    )
    .await;
    let plain = format!("http://127.0.0.1:{}", server.addr("plain").port());
    let tls = format!("https://127.0.0.1:{}", server.addr("tls").port());
    let v2_of = |name: &str| {
        let (_, data) = files.iter().find(|(n, _)| n.ends_with(name)).unwrap();
        hex_sha256(data)
    };
    let cases = [
        (&plain, "dcz", "/dcz/app.v1.js", "/dcz/app.v2.js"),
        (&tls, "dcz", "/dcz/app.v1.js", "/dcz/app.v2.js"),
        (&plain, "dcb", "/dcb/app.v1.js", "/dcb/app.v2.js"),
        (&tls, "dcb", "/dcb/app.v1.js", "/dcb/app.v2.js"),
        (
            &plain,
            "dcz",
            "/auto-dcz/lib-1.0.0.js",
            "/auto-dcz/lib-1.0.1.js",
        ),
        (
            &tls,
            "dcb",
            "/auto-dcb/lib-1.0.0.js",
            "/auto-dcb/lib-1.0.1.js",
        ),
        (&tls, "dcz", "/auto/lib-1.0.0.js", "/auto/lib-1.0.1.js"),
        (&plain, "dcz", "/dcz/magic.v1.js", "/dcz/magic.v2.js"),
    ];
    for (base, coding, v1, v2) in cases {
        let url = format!("{base}/index.html?v1={v1}&v2={v2}");
        let result = chromium(&chromium_path, &url, &spki).await;
        assert_eq!(result["encoding"], coding, "{url}: {result}");
        let name = v2.rsplit('/').next().unwrap();
        assert_eq!(result["sha256"], v2_of(name), "{url}: decoded bytes differ");
    }
    origin.stop().await;
}
