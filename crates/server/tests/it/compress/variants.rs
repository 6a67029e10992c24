//! Compress once, serve many, for static files: each coding of a file is made once and served
//! from memory with its length while the file is unchanged; an edit makes it again. Bodies are
//! decoded by [`independent`] decoders, the counts read from `/metrics`.

use super::*;

/// About 20 KB of HTML, different for each `version`.
fn page_20k(version: usize) -> Vec<u8> {
    let mut html = format!("<!doctype html><!-- version {version} -->\n").into_bytes();
    for i in 0..250 {
        writeln!(
            html,
            "<li id=\"item-{i}\">Item {i} of version {version}</li>"
        )
        .unwrap();
    }
    html
}

/// The count of the `name` series of route `files` for `algorithm`, 0 if absent.
async fn variants(server: &TestServer, name: &str, algorithm: &str) -> f64 {
    let text = crate::scrape_metrics(server).await;
    let series = format!("{name}{{route=\"files\",algorithm=\"{algorithm}\"}}");
    crate::metric(&text, &series)
}

const MADE: &str = "sluice_compress_variants_made_total";
const HITS: &str = "sluice_compress_variant_hits_total";

/// `n` GETs of `url` in `coding`, `concurrent` of them at once first: each decodes to
/// `expected` and says its length.
async fn get_many(url: &str, coding: &str, n: usize, concurrent: usize, expected: &[u8]) {
    let accept = [("accept-encoding", coding)];
    let burst = (0..concurrent).map(|_| get(url, &accept));
    let mut replies = futures_util::future::join_all(burst).await;
    for _ in concurrent..n {
        replies.push(get(url, &accept).await);
    }
    for (i, (status, headers, body)) in replies.into_iter().enumerate() {
        assert_eq!(status, StatusCode::OK, "{coding} #{i}");
        assert_eq!(headers["content-encoding"], coding, "{coding} #{i}");
        let length = headers.get("content-length").map(|v| v.to_str().unwrap());
        assert_eq!(
            length,
            Some(body.len().to_string().as_str()),
            "{coding} #{i}"
        );
        assert!(body.len() < expected.len() / 3, "{coding} #{i}");
        let decoded = independent::decode(coding, &body);
        assert!(decoded == expected, "{coding} #{i}: decoded body differs");
    }
}

#[tokio::test]
async fn a_static_file_is_compressed_once_per_coding_and_version() {
    let temp = tempfile::tempdir().unwrap();
    let server = static_server(temp.path(), "{}").await;
    let file = temp.path().join("public/twenty.html");
    std::fs::write(&file, page_20k(1)).unwrap();
    let url = server.url("/twenty.html");

    for (coding, concurrent) in [("gzip", 1), ("br", 1), ("zstd", 10)] {
        // zstd starts with a burst: the requests that find the variant being made wait for it.
        get_many(&url, coding, 50, concurrent, &page_20k(1)).await;
        assert_eq!(variants(&server, MADE, coding).await, 1.0, "{coding}");
        assert_eq!(variants(&server, HITS, coding).await, 49.0, "{coding}");
    }

    // An edit (another size): the next response is the new content, compressed once more.
    std::fs::write(&file, page_20k(22)).unwrap();
    for coding in ["gzip", "br", "zstd"] {
        get_many(&url, coding, 5, 1, &page_20k(22)).await;
        assert_eq!(variants(&server, MADE, coding).await, 2.0, "{coding}");
        assert_eq!(variants(&server, HITS, coding).await, 53.0, "{coding}");
    }

    // A HEAD describes the GET, length included, and compresses nothing.
    let resp = client(Offer::Http1)
        .head(&url)
        .header("accept-encoding", "br")
        .send()
        .await
        .unwrap();
    let (_, get_headers, _) = get(&url, &[("accept-encoding", "br")]).await;
    for name in ["content-encoding", "content-length", "etag", "vary"] {
        assert_eq!(resp.headers().get(name), get_headers.get(name), "{name}");
    }
    assert!(resp.bytes().await.unwrap().is_empty());
    assert_eq!(variants(&server, MADE, "br").await, 2.0);

    // The decision is the on-the-fly one: counted `compressed`, logged with its coding.
    let text = crate::scrape_metrics(&server).await;
    let compressed = "sluice_compress_responses_total{route=\"files\",decision=\"compressed\"}";
    assert_eq!(
        crate::metric(&text, compressed),
        (3 * 50 + 3 * 5 + 2) as f64
    );
}

#[tokio::test]
async fn conditional_and_range_requests_are_answered_as_on_the_fly() {
    let temp = tempfile::tempdir().unwrap();
    let server = static_server(temp.path(), "{}").await;
    let url = server.url("/page.html");
    let gz = ("accept-encoding", "gzip");
    let (_, first, _) = get(&url, &[gz]).await;
    let (_, stored, body) = get(&url, &[gz]).await;
    assert_eq!(stored["etag"], first["etag"]);
    let etag = stored["etag"].to_str().unwrap();
    assert!(etag.starts_with("W/\""), "{etag}");
    assert!(!stored.contains_key("accept-ranges"), "{stored:?}");
    assert!(independent::decode("gzip", &body) == page());

    // The weakened tag revalidates: 304 with the same tag and Vary, no body.
    let (status, h, body) = get(&url, &[gz, ("if-none-match", etag)]).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert_eq!(h.get("etag"), stored.get("etag"));
    assert!(has_vary(&h) && body.is_empty(), "{h:?}");

    // A range is of the identity bytes, never of a variant.
    let (status, h, body) = get(&url, &[gz, ("range", "bytes=100-199")]).await;
    assert_eq!(status, StatusCode::PARTIAL_CONTENT);
    assert!(!h.contains_key("content-encoding"), "{h:?}");
    assert!(body == page()[100..200], "wrong range");
}
