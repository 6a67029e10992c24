//! Static files over real sockets: validators, conditional GET, ranges, HEAD, traversal.

use sluice_testkit::{Offer, client, raw_exchange};

use crate::{static_server, write_files};

#[tokio::test]
async fn etag_then_if_none_match_gives_304() {
    let temp = tempfile::tempdir().unwrap();
    write_files(temp.path(), &[("public/index.html", b"<h1>hi</h1>")]);
    let server = static_server(temp.path()).await;
    let http = client(Offer::Http1);
    let first = http.get(server.url("/")).send().await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["content-type"], "text/html; charset=utf-8");
    assert!(first.headers().contains_key("last-modified"));
    let etag = first.headers()["etag"].clone();
    assert_eq!(first.text().await.unwrap(), "<h1>hi</h1>");

    let again = http
        .get(server.url("/index.html"))
        .header("if-none-match", etag.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(again.headers()["etag"], etag);
    assert!(again.bytes().await.unwrap().is_empty());
}

#[tokio::test]
async fn range_gives_206_with_the_bytes_asked_for() {
    let temp = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    write_files(temp.path(), &[("public/data.bin", &data)]);
    let server = static_server(temp.path()).await;
    for offer in [Offer::Http1, Offer::Http2] {
        let http = client(offer);
        let resp = http
            .get(server.url("/data.bin"))
            .header("range", "bytes=0-9")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 206);
        assert_eq!(resp.headers()["content-range"], "bytes 0-9/200000");
        assert_eq!(resp.bytes().await.unwrap().as_ref(), &data[..10]);

        let tail = http
            .get(server.url("/data.bin"))
            .header("range", "bytes=150000-")
            .send()
            .await
            .unwrap();
        assert_eq!(tail.bytes().await.unwrap().as_ref(), &data[150_000..]);

        let beyond = http
            .get(server.url("/data.bin"))
            .header("range", "bytes=300000-")
            .send()
            .await
            .unwrap();
        assert_eq!(beyond.status(), 416);
        assert_eq!(beyond.headers()["content-range"], "bytes */200000");

        let whole = http.get(server.url("/data.bin")).send().await.unwrap();
        assert_eq!(whole.headers()["content-length"], "200000");
        assert_eq!(whole.bytes().await.unwrap().as_ref(), &data[..]);
    }
}

#[tokio::test]
async fn head_has_the_headers_of_get_and_no_body() {
    let temp = tempfile::tempdir().unwrap();
    write_files(temp.path(), &[("public/app.js", b"console.log(1)")]);
    let server = static_server(temp.path()).await;
    let reply = raw_exchange(
        server.first_addr(),
        b"HEAD /app.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        1 << 16,
    )
    .await;
    let reply = String::from_utf8(reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
    assert!(
        reply
            .to_ascii_lowercase()
            .contains("content-length: 14\r\n"),
        "{reply}"
    );
    assert!(
        reply.ends_with("\r\n\r\n"),
        "HEAD must have no body: {reply:?}"
    );
}

#[tokio::test]
async fn traversal_tricks_never_leave_the_root() {
    let temp = tempfile::tempdir().unwrap();
    write_files(
        temp.path(),
        &[("public/ok.txt", b"fine"), ("secret.txt", b"TOP-SECRET")],
    );
    let server = static_server(temp.path()).await;
    let attempts = [
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/..%2fsecret.txt",
        "/ok.txt/../../secret.txt",
        "/./../secret.txt",
        "/%2e%2e%5csecret.txt",
        "/ok.txt%00.html",
        "//../secret.txt",
    ];
    for path in attempts {
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let reply = String::from_utf8_lossy(
            &raw_exchange(server.first_addr(), request.as_bytes(), 1 << 16).await,
        )
        .into_owned();
        assert!(
            !reply.contains("TOP-SECRET"),
            "{path} leaked the secret: {reply}"
        );
        let status_ok = reply.starts_with("HTTP/1.1 400") || reply.starts_with("HTTP/1.1 404");
        assert!(status_ok, "{path}: expected 400 or 404, got {reply}");
    }
    // The server still serves normal requests afterwards.
    let ok = client(Offer::Http1)
        .get(server.url("/ok.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.text().await.unwrap(), "fine");
}

#[tokio::test]
async fn symlink_out_of_the_root_is_not_followed() {
    let temp = tempfile::tempdir().unwrap();
    write_files(
        temp.path(),
        &[("secret.txt", b"TOP-SECRET"), ("public/in.txt", b"inside")],
    );
    std::os::unix::fs::symlink(
        temp.path().join("secret.txt"),
        temp.path().join("public/link.txt"),
    )
    .unwrap();
    let server = static_server(temp.path()).await;
    let resp = client(Offer::Http1)
        .get(server.url("/link.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert!(!resp.text().await.unwrap().contains("TOP-SECRET"));
}

/// `static.sendfile`: a cached file goes to a plain HTTP/1.1 client with `sendfile` from the
/// file itself, but a file edited in place while its entry is trusted (`memory_cache_recheck`)
/// is still sent as cached, the version its headers describe, with sendfile on as with it off
/// (`sluice_core::file_bytes`). (A hit is recognised by its unchanged ETag: a response after
/// the entry was looked up again says nothing, and the next file is tried.)
#[tokio::test]
async fn a_cached_file_edited_in_place_is_sent_as_cached_with_and_without_sendfile() {
    use std::io::Write;

    let temp = tempfile::tempdir().unwrap();
    for dir in ["on", "off"] {
        std::fs::create_dir(temp.path().join(dir)).unwrap();
    }
    let toml = r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        path_prefix = "/on/"
        static = { root = "on", strip_prefix = true, memory_cache_recheck = "1s" }
        [[routes]]
        path_prefix = "/off/"
        static = { root = "off", strip_prefix = true, memory_cache_recheck = "1s", sendfile = false }
    "#;
    let server = sluice_testkit::start_toml_in(temp.path(), toml).await;
    let http = client(Offer::Http1);
    const LEN: usize = 100_000;
    for (dir, expected) in [("on", b'a'), ("off", b'a')] {
        let mut hit = false;
        for attempt in 0..5 {
            let path = temp.path().join(dir).join(format!("f{attempt}.bin"));
            std::fs::write(&path, vec![b'a'; LEN]).unwrap();
            let url = server.url(&format!("/{dir}/f{attempt}.bin"));
            let first = http.get(&url).send().await.unwrap();
            let etag = first.headers()["etag"].clone();
            assert_eq!(first.bytes().await.unwrap(), vec![b'a'; LEN]);
            let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            file.write_all(&vec![b'b'; LEN]).unwrap();
            drop(file);
            let second = http.get(&url).send().await.unwrap();
            let same_entry = second.headers()["etag"] == etag;
            let body = second.bytes().await.unwrap();
            assert_eq!(body.len(), LEN);
            if same_entry {
                assert!(body.iter().all(|&b| b == expected), "{dir}: wrong bytes");
                hit = true;
                break;
            }
        }
        assert!(
            hit,
            "{dir}: no second request came within the 1 s recheck interval"
        );
    }
}
