//! `sluice precompress DIR` (the real binary) and static routes with `precompressed` on, over
//! real sockets. Sidecars and bodies are decoded as a client would, by decoders that are not the
//! encoders `sluice precompress` uses ([`sluice_testkit::independent`]: the reference C brotli,
//! ruzstd, miniz_oxide).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};

use sluice_testkit::independent::decode;
use sluice_testkit::{Offer, client};

use crate::write_files;

fn sluice_precompress(args: &[&str], dir: &Path) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("precompress")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sluice precompress failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Each sidecar's extension and its content coding.
const SIDECARS: [(&str, &str); 3] = [(".gz", "gzip"), (".br", "br"), (".zst", "zstd")];

/// A page that compresses well.
fn page() -> Vec<u8> {
    (0..400)
        .map(|i| format!("<li class=\"item\">Item number {i} of a long list</li>\n"))
        .collect::<String>()
        .into_bytes()
}

/// Bytes no coding can shrink, from a fixed-seed xorshift (no randomness crate needed).
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn mtime(path: &Path) -> std::time::SystemTime {
    fs::metadata(path).unwrap().modified().unwrap()
}

#[test]
fn precompress_writes_once_keeps_mtimes_and_clean_removes() {
    let temp = tempfile::tempdir().unwrap();
    let site = temp.path().join("site");
    let page = page();
    let noise = noise(4096);
    write_files(
        temp.path(),
        &[
            ("site/index.html", &page),
            ("site/css/app.css", &page),
            ("site/small.txt", b"too small to bother"),
            ("site/photo.png", &page), // compressible bytes, but not a compressible type
            ("site/noise.txt", &noise),
            ("outside/secret.txt", &page),
        ],
    );
    std::os::unix::fs::symlink(temp.path().join("outside"), site.join("linked")).unwrap();

    let first = sluice_precompress(&["--jobs", "2"], &site);
    let report = String::from_utf8(first.stdout).unwrap();
    assert!(report.contains("5 files seen, 3 compressible"), "{report}");
    assert!(report.contains("1 links not followed"), "{report}");
    assert!(
        report.contains("2 files compressed, 6 variants written"),
        "{report}"
    );
    assert!(
        report.contains("gzip 2 written, 0 up to date, 1 not smaller"),
        "{report}"
    );

    let mut stamps = Vec::new();
    for original in ["index.html", "css/app.css"] {
        let original = site.join(original);
        for (ext, coding) in SIDECARS {
            let variant = site.join(format!("{}{ext}", original.display()));
            let encoded = fs::read(&variant).unwrap();
            assert!(
                encoded.len() < page.len() / 4,
                "{} is small",
                variant.display()
            );
            assert_eq!(decode(coding, &encoded), page, "{coding} decodes {ext}");
            assert_eq!(mtime(&variant), mtime(&original), "{ext} has the mtime");
            let meta = fs::metadata(&variant).unwrap();
            stamps.push((variant, meta.ino(), meta.modified().unwrap()));
        }
    }
    for skipped in ["small.txt", "photo.png", "noise.txt"] {
        for (ext, _) in SIDECARS {
            let variant = site.join(format!("{skipped}{ext}"));
            assert!(!variant.exists(), "{} must not exist", variant.display());
        }
    }
    assert!(!temp.path().join("outside/secret.txt.gz").exists());
    let leftovers: Vec<_> = fs::read_dir(&site)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("sluice-precompress"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");

    // Second run: nothing is rewritten (same inode: no rename happened) and it says so.
    let second = sluice_precompress(&[], &site);
    let report = String::from_utf8(second.stdout).unwrap();
    assert!(
        report.contains("nothing written: every variant is up to date"),
        "{report}"
    );
    assert!(report.contains("gzip 0 written, 2 up to date"), "{report}");
    for (variant, ino, modified) in &stamps {
        let meta = fs::metadata(variant).unwrap();
        assert_eq!((meta.ino(), meta.modified().unwrap()), (*ino, *modified));
    }

    // An edited original gets fresh variants; the others stay.
    fs::write(site.join("index.html"), [&page[..], b"<p>new</p>"].concat()).unwrap();
    let third = sluice_precompress(&["--algorithms", "gzip"], &site);
    let report = String::from_utf8(third.stdout).unwrap();
    assert!(report.contains("gzip 1 written, 1 up to date"), "{report}");
    assert!(!report.contains("br "), "only gzip was asked for: {report}");
    let gz = fs::read(site.join("index.html.gz")).unwrap();
    assert!(decode("gzip", &gz).ends_with(b"<p>new</p>"));

    // A variant that is no longer smaller is removed, not kept (index.html's br is refreshed).
    fs::write(site.join("css/app.css"), &noise).unwrap();
    let fourth = sluice_precompress(&["--algorithms", "br"], &site);
    let report = String::from_utf8(fourth.stdout).unwrap();
    assert!(
        report.contains("br   1 written, 0 up to date, 2 not smaller"),
        "{report}"
    );
    assert!(!site.join("css/app.css.br").exists());

    // --clean removes the sidecars of compressible files only.
    fs::write(site.join("photo.png.gz"), b"hand made").unwrap();
    let clean = sluice_precompress(&["--clean"], &site);
    let report = String::from_utf8(clean.stdout).unwrap();
    assert!(report.contains("sidecar files removed"), "{report}");
    for (ext, _) in SIDECARS {
        assert!(!site.join(format!("index.html{ext}")).exists());
        assert!(!site.join(format!("css/app.css{ext}")).exists());
    }
    assert!(site.join("index.html").exists() && site.join("css/app.css").exists());
    assert!(site.join("photo.png.gz").exists(), "not ours to remove");
}

#[test]
fn precompress_reports_a_missing_directory() {
    let temp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("precompress")
        .arg(temp.path().join("nope"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nope"), "{stderr}");
}

#[tokio::test]
async fn a_precompressed_route_serves_each_coding_by_q_value() {
    let temp = tempfile::tempdir().unwrap();
    let page = page();
    write_files(temp.path(), &[("public/index.html", &page)]);
    sluice_precompress(&[], &temp.path().join("public"));
    let server = sluice_testkit::start_toml_in(
        temp.path(),
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        static = { root = "public", precompressed = true }
        "#,
    )
    .await;
    for offer in [Offer::Http1, Offer::Http2] {
        let http = client(offer);
        for (accept, coding) in [
            ("gzip;q=0.9, br;q=0.5, zstd;q=0.1", "gzip"),
            ("gzip;q=0.5, br;q=0.9, zstd;q=0.1", "br"),
            ("gzip;q=0.5, br;q=0.1, zstd;q=0.9", "zstd"),
        ] {
            let resp = http
                .get(server.url("/"))
                .header("accept-encoding", accept)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            let h = resp.headers().clone();
            assert_eq!(h["content-encoding"], coding, "{accept}");
            assert_eq!(h["content-type"], "text/html; charset=utf-8");
            assert_eq!(h["vary"], "Accept-Encoding");
            let body = resp.bytes().await.unwrap();
            assert_eq!(h["content-length"], body.len().to_string().as_str());
            assert_eq!(decode(coding, &body), page, "{accept}");

            // Revalidating the variant: 304 with Vary.
            let again = http
                .get(server.url("/"))
                .header("accept-encoding", accept)
                .header("if-none-match", h["etag"].clone())
                .send()
                .await
                .unwrap();
            assert_eq!(again.status(), 304, "{accept}");
            assert_eq!(again.headers()["vary"], "Accept-Encoding");
        }
        let plain = http.get(server.url("/")).send().await.unwrap();
        assert!(!plain.headers().contains_key("content-encoding"));
        assert_eq!(plain.headers()["vary"], "Accept-Encoding");
        assert_eq!(plain.bytes().await.unwrap(), page);
    }
}

#[tokio::test]
async fn file_server_precompressed_flag_serves_sidecars() {
    let temp = tempfile::tempdir().unwrap();
    let page = page();
    write_files(temp.path(), &[("site/index.html", &page)]);
    let root = temp.path().join("site");
    sluice_precompress(&["--algorithms", "br"], &root);
    let (child, addr) = crate::cli::spawn_listening(&[
        "file-server",
        "--root",
        root.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--precompressed",
    ]);
    let resp = client(Offer::Http1)
        .get(format!("http://{addr}/"))
        .header("accept-encoding", "gzip, br")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-encoding"], "br");
    assert_eq!(decode("br", &resp.bytes().await.unwrap()), page);
    assert!(crate::cli::terminate(child));
}

#[tokio::test]
async fn a_route_with_compress_serves_sidecars_as_they_are_and_compresses_the_rest() {
    let temp = tempfile::tempdir().unwrap();
    let page = page();
    write_files(
        temp.path(),
        &[("public/index.html", &page), ("public/other.html", &page)],
    );
    sluice_precompress(&["--algorithms", "br"], &temp.path().join("public"));
    fs::remove_file(temp.path().join("public/other.html.br")).unwrap();
    let sidecar = fs::read(temp.path().join("public/index.html.br")).unwrap();
    let server = sluice_testkit::start_toml_in(
        temp.path(),
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        static = { root = "public", precompressed = true }
        compress = {}
        "#,
    )
    .await;
    let http = client(Offer::Http1);
    let get = |path: &'static str| {
        http.get(server.url(path))
            .header("accept-encoding", "br")
            .send()
    };
    // The sidecar, byte for byte (not compressed twice), with its strong ETag and length.
    let resp = get("/index.html").await.unwrap();
    let h = resp.headers().clone();
    assert_eq!(h["content-encoding"], "br");
    assert!(h["etag"].to_str().unwrap().starts_with('"'));
    assert_eq!(h["content-length"], sidecar.len().to_string().as_str());
    assert_eq!(h.get_all("vary").iter().count(), 1, "one Vary: {h:?}");
    assert_eq!(resp.bytes().await.unwrap(), sidecar);
    // No sidecar: compressed on the fly.
    let resp = get("/other.html").await.unwrap();
    assert_eq!(resp.headers()["content-encoding"], "br");
    assert!(resp.headers()["etag"].to_str().unwrap().starts_with("W/"));
    assert_eq!(decode("br", &resp.bytes().await.unwrap()), page);
}
