//! Precompressed sidecars (`app.js.br` beside `app.js`): chosen by `Accept-Encoding`, served
//! with the original's type, their own validators, ranges over the encoded bytes, and `Vary`.

use super::*;
use bytes::BytesMut;
use sluice_core::{Compression, ContentCoding, SidecarCoding};
use sluice_http::compress::Encoder;
use sluice_http::compress_policy::Precompressed;

/// A script long enough to compress well.
fn script() -> Vec<u8> {
    (0..200)
        .map(|i| format!("export const value{i} = compute({i}, \"precompressed\");\n"))
        .collect::<String>()
        .into_bytes()
}

fn compress(alg: Compression, input: &[u8]) -> Result<Vec<u8>, BoxError> {
    let mut encoder = Encoder::new(alg, Some(9))?;
    let mut out = BytesMut::new();
    encoder.write(input, &mut out)?;
    encoder.finish(&mut out)?;
    Ok(out.to_vec())
}

/// `app.js` and its three sidecars, real streams, all with the fixed mtime.
struct Sidecars {
    original: Vec<u8>,
    gz: Vec<u8>,
    br: Vec<u8>,
    zst: Vec<u8>,
}

fn with_sidecars(site: &Site, rel: &str) -> Result<Sidecars, BoxError> {
    let original = script();
    let sidecars = Sidecars {
        gz: compress(Compression::GZIP, &original)?,
        br: compress(Compression::BR, &original)?,
        zst: compress(Compression::ZSTD, &original)?,
        original,
    };
    site.file(rel, &sidecars.original)?;
    site.file(&format!("{rel}.gz"), &sidecars.gz)?;
    site.file(&format!("{rel}.br"), &sidecars.br)?;
    site.file(&format!("{rel}.zst"), &sidecars.zst)?;
    Ok(sidecars)
}

/// Every sidecar coding; the memory cache checks the files before every hit, so the tests
/// that change sidecars between requests see the change at once.
fn precompressed_route(site: &Site) -> Result<StaticFiles, BoxError> {
    site.route(|c| {
        c.precompressed = SidecarCoding::ALL.to_vec();
        c.memory_cache_recheck = Duration::ZERO;
    })
}

async fn get_ae(files: &StaticFiles, uri: &str, accept: &str) -> Result<Reply, BoxError> {
    get(files, uri, &[("accept-encoding", accept)]).await
}

const JS: &str = "text/javascript; charset=utf-8";

#[tokio::test]
async fn the_variant_follows_client_weights_then_the_route_order() -> TestResult {
    let site = Site::new()?;
    let s = with_sidecars(&site, "app.js")?;
    let files = precompressed_route(&site)?;
    for (accept, coding, body) in [
        ("gzip;q=0.5, br;q=0.9, zstd;q=0.1", Some("br"), &s.br),
        ("gzip;q=0.5, br;q=0.1, zstd;q=0.9", Some("zstd"), &s.zst),
        ("gzip;q=0.9, br;q=0.5, zstd;q=0.1", Some("gzip"), &s.gz),
        ("gzip, deflate, br, zstd", Some("zstd"), &s.zst),
        ("gzip, deflate, br", Some("br"), &s.br),
        ("x-gzip", Some("gzip"), &s.gz),
        ("identity", None, &s.original),
        ("deflate", None, &s.original),
        ("identity, gzip;q=0.5", None, &s.original),
    ] {
        let reply = get_ae(&files, "/app.js", accept).await?;
        assert_eq!(reply.status, StatusCode::OK, "{accept}");
        assert_eq!(reply.header(header::CONTENT_ENCODING), coding, "{accept}");
        assert_eq!(&reply.body[..], &body[..], "{accept}");
        assert_eq!(reply.header(header::CONTENT_TYPE), Some(JS), "{accept}");
        assert_eq!(
            reply.header(header::CONTENT_LENGTH),
            Some(body.len().to_string().as_str()),
            "{accept}"
        );
        assert_eq!(
            reply.header(header::VARY),
            Some("Accept-Encoding"),
            "{accept}"
        );
        assert_eq!(
            reply.header(header::ACCEPT_RANGES),
            Some("bytes"),
            "{accept}"
        );
        assert_eq!(reply.header(header::LAST_MODIFIED), Some(LAST_MODIFIED));
    }
    // No Accept-Encoding at all: the original, still with Vary.
    let reply = get(&files, "/app.js", &[]).await?;
    assert_eq!(reply.body, s.original);
    assert_eq!(reply.header(header::VARY), Some("Accept-Encoding"));
    Ok(())
}

#[tokio::test]
async fn a_route_order_narrows_and_orders_the_codings() -> TestResult {
    let site = Site::new()?;
    let s = with_sidecars(&site, "app.js")?;
    let files = site.route(|c| c.precompressed = vec![SidecarCoding::GZIP, SidecarCoding::BR])?;
    let reply = get_ae(&files, "/app.js", "zstd, br, gzip").await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), Some("gzip"));
    assert_eq!(reply.body, s.gz);
    let reply = get_ae(&files, "/app.js", "zstd").await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), None);
    assert_eq!(reply.body, s.original);
    Ok(())
}

#[tokio::test]
async fn a_missing_sidecar_falls_back_to_the_next_accepted_one() -> TestResult {
    let site = Site::new()?;
    let s = with_sidecars(&site, "app.js")?;
    fs::remove_file(site.root.join("app.js.zst"))?;
    fs::remove_file(site.root.join("app.js.br"))?;
    let files = precompressed_route(&site)?;
    let reply = get_ae(&files, "/app.js", "zstd, br, gzip;q=0.2").await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), Some("gzip"));
    assert_eq!(reply.body, s.gz);
    fs::remove_file(site.root.join("app.js.gz"))?;
    let reply = get_ae(&files, "/app.js", "zstd, br, gzip").await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), None);
    assert_eq!(reply.body, s.original);
    Ok(())
}

#[tokio::test]
async fn each_variant_has_its_own_etag_and_the_response_is_marked() -> TestResult {
    let site = Site::new()?;
    with_sidecars(&site, "app.js")?;
    let files = precompressed_route(&site)?;
    let mut etags = Vec::new();
    for accept in ["identity", "gzip", "br", "zstd"] {
        let reply = get_ae(&files, "/app.js", accept).await?;
        let etag = reply.header(header::ETAG).ok_or("no etag")?.to_owned();
        assert!(
            etag.starts_with('"') && etag.ends_with('"'),
            "strong: {etag}"
        );
        etags.push(etag);
    }
    let mut distinct = etags.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "{etags:?}");
    assert!(etags[2].ends_with("-br\""), "{etags:?}");

    let mut headers = HeaderMap::new();
    headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("br"));
    let response = files
        .serve(&Method::GET, &Uri::from_static("/app.js"), &headers)
        .await?;
    assert_eq!(
        response.extensions().get::<Precompressed>(),
        Some(&Precompressed(ContentCoding::Br))
    );
    headers.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    let response = files
        .serve(&Method::GET, &Uri::from_static("/app.js"), &headers)
        .await?;
    assert_eq!(response.extensions().get::<Precompressed>(), None);
    Ok(())
}

#[tokio::test]
async fn conditional_requests_use_the_variant_validators() -> TestResult {
    let site = Site::new()?;
    let s = with_sidecars(&site, "app.js")?;
    let files = precompressed_route(&site)?;
    let br = get_ae(&files, "/app.js", "br").await?;
    let br_etag = br.header(header::ETAG).ok_or("no etag")?.to_owned();
    let identity = get(&files, "/app.js", &[]).await?;
    let identity_etag = identity.header(header::ETAG).ok_or("no etag")?.to_owned();

    let headers = [
        ("accept-encoding", "br"),
        ("if-none-match", br_etag.as_str()),
    ];
    let reply = get(&files, "/app.js", &headers).await?;
    assert_eq!(reply.status, StatusCode::NOT_MODIFIED);
    assert_eq!(reply.header(header::VARY), Some("Accept-Encoding"));
    assert_eq!(reply.header(header::ETAG), Some(br_etag.as_str()));
    assert!(reply.body.is_empty());

    // The identity's tag does not validate the br variant, and the br tag not the identity.
    let headers = [
        ("accept-encoding", "br"),
        ("if-none-match", identity_etag.as_str()),
    ];
    let reply = get(&files, "/app.js", &headers).await?;
    assert_eq!((reply.status, &reply.body[..]), (StatusCode::OK, &s.br[..]));
    let reply = get(&files, "/app.js", &[("if-none-match", br_etag.as_str())]).await?;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, s.original);

    // Without sidecars on, the identity 304 carries no Vary.
    let plain = site.default_route()?;
    let reply = get(
        &plain,
        "/app.js",
        &[("if-none-match", identity_etag.as_str())],
    )
    .await?;
    assert_eq!(reply.status, StatusCode::NOT_MODIFIED);
    assert_eq!(reply.header(header::VARY), None);
    Ok(())
}

#[tokio::test]
async fn ranges_address_the_encoded_bytes() -> TestResult {
    let site = Site::new()?;
    let s = with_sidecars(&site, "app.js")?;
    let files = precompressed_route(&site)?;
    let reply = get(
        &files,
        "/app.js",
        &[("accept-encoding", "br"), ("range", "bytes=0-9")],
    )
    .await?;
    assert_eq!(reply.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(&reply.body[..], &s.br[..10]);
    let content_range = format!("bytes 0-9/{}", s.br.len());
    assert_eq!(
        reply.header(header::CONTENT_RANGE),
        Some(content_range.as_str())
    );
    assert_eq!(reply.header(header::CONTENT_ENCODING), Some("br"));
    assert_eq!(reply.header(header::CONTENT_TYPE), Some(JS));
    assert_eq!(reply.header(header::VARY), Some("Accept-Encoding"));

    // If-Range with the variant's tag: the range; with the identity's: the whole variant.
    let br_etag = get_ae(&files, "/app.js", "br").await?;
    let br_etag = br_etag.header(header::ETAG).ok_or("no etag")?.to_owned();
    let identity = get(&files, "/app.js", &[]).await?;
    let identity_etag = identity.header(header::ETAG).ok_or("no etag")?;
    let reply = if_range(&files, &br_etag).await?;
    assert_eq!(reply.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(&reply.body[..], &s.br[s.br.len() - 5..]);
    let reply = if_range(&files, identity_etag).await?;
    assert_eq!((reply.status, &reply.body[..]), (StatusCode::OK, &s.br[..]));

    // Beyond the encoded length: 416 with the encoded length.
    let past = format!("bytes={}-", s.br.len());
    let reply = get(
        &files,
        "/app.js",
        &[("accept-encoding", "br"), ("range", &past)],
    )
    .await?;
    assert_eq!(reply.status, StatusCode::RANGE_NOT_SATISFIABLE);
    let star = format!("bytes */{}", s.br.len());
    assert_eq!(reply.header(header::CONTENT_RANGE), Some(star.as_str()));
    Ok(())
}

async fn if_range(files: &StaticFiles, tag: &str) -> Result<Reply, BoxError> {
    let headers = [
        ("accept-encoding", "br"),
        ("range", "bytes=-5"),
        ("if-range", tag),
    ];
    get(files, "/app.js", &headers).await
}

#[tokio::test]
async fn head_has_the_headers_of_get() -> TestResult {
    let site = Site::new()?;
    let s = with_sidecars(&site, "app.js")?;
    let files = precompressed_route(&site)?;
    let get_reply = get_ae(&files, "/app.js", "zstd").await?;
    let head = request(
        &files,
        Method::HEAD,
        "/app.js",
        &[("accept-encoding", "zstd")],
    )
    .await?
    .map_err(|k| format!("{k:?}"))?;
    assert_eq!(head.status, StatusCode::OK);
    assert_eq!(head.headers, get_reply.headers);
    assert!(head.body.is_empty());
    assert_eq!(head.header(header::CONTENT_ENCODING), Some("zstd"));
    let len = s.zst.len().to_string();
    assert_eq!(head.header(header::CONTENT_LENGTH), Some(len.as_str()));
    Ok(())
}

#[tokio::test]
async fn a_stale_sidecar_is_ignored() -> TestResult {
    let site = Site::new()?;
    let s = with_sidecars(&site, "app.js")?;
    // The original was edited after compressing: one second newer than its sidecars.
    let edited = fs::File::options()
        .write(true)
        .open(site.root.join("app.js"))?;
    edited.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME_SECS + 1))?;
    let files = precompressed_route(&site)?;
    let reply = get_ae(&files, "/app.js", "zstd, br, gzip").await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), None);
    assert_eq!(reply.body, s.original);
    assert_eq!(reply.header(header::VARY), Some("Accept-Encoding"));
    // A sidecar newer than the original (compressed later, mtime not copied) is fine.
    let newer = fs::File::options()
        .write(true)
        .open(site.root.join("app.js.gz"))?;
    newer.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME_SECS + 60))?;
    let reply = get_ae(&files, "/app.js", "zstd, br, gzip").await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), Some("gzip"));
    Ok(())
}

#[cfg(unix)]
#[tokio::test]
async fn a_sidecar_link_out_of_the_root_is_ignored() -> TestResult {
    use std::os::unix::fs::symlink;
    let site = Site::new()?;
    let s = with_sidecars(&site, "app.js")?;
    fs::remove_file(site.root.join("app.js.br"))?;
    symlink(site.outside.join("secret.txt"), site.root.join("app.js.br"))?;
    // A link that stays inside the root is followed.
    fs::rename(site.root.join("app.js.zst"), site.root.join("real.zst"))?;
    symlink("real.zst", site.root.join("app.js.zst"))?;
    let files = precompressed_route(&site)?;

    let reply = get_ae(&files, "/app.js", "br").await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), None);
    assert_eq!(reply.body, s.original);
    assert!(!String::from_utf8_lossy(&reply.body).contains(SECRET));
    let reply = get_ae(&files, "/app.js", "br, gzip;q=0.5").await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), Some("gzip"));
    let reply = get_ae(&files, "/app.js", "zstd").await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), Some("zstd"));
    assert_eq!(reply.body, s.zst);
    Ok(())
}

#[tokio::test]
async fn a_directory_named_like_a_sidecar_is_ignored() -> TestResult {
    let site = Site::new()?;
    let s = with_sidecars(&site, "app.js")?;
    fs::remove_file(site.root.join("app.js.br"))?;
    fs::create_dir(site.root.join("app.js.br"))?;
    let files = precompressed_route(&site)?;
    let reply = get_ae(&files, "/app.js", "br").await?;
    assert_eq!(
        (reply.status, reply.body),
        (StatusCode::OK, Bytes::from(s.original))
    );
    Ok(())
}

#[tokio::test]
async fn an_index_file_gets_its_sidecar_too() -> TestResult {
    let site = Site::new()?;
    let s = with_sidecars(&site, "docs/index.html")?;
    let files = precompressed_route(&site)?;
    let reply = get_ae(&files, "/docs/", "br").await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), Some("br"));
    assert_eq!(
        reply.header(header::CONTENT_TYPE),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(reply.body, s.br);
    Ok(())
}

#[tokio::test]
async fn a_sidecar_requested_by_name_is_a_plain_file() -> TestResult {
    let site = Site::new()?;
    let s = with_sidecars(&site, "app.js")?;
    let files = precompressed_route(&site)?;
    let reply = get_ae(&files, "/app.js.gz", "gzip").await?;
    assert_eq!(reply.header(header::CONTENT_TYPE), Some("application/gzip"));
    assert_eq!(reply.header(header::CONTENT_ENCODING), None);
    assert_eq!(reply.body, s.gz);
    Ok(())
}

#[tokio::test]
async fn sidecars_are_not_served_when_the_option_is_off() -> TestResult {
    let site = Site::new()?;
    let s = with_sidecars(&site, "app.js")?;
    let files = site.default_route()?;
    let reply = get_ae(&files, "/app.js", "zstd, br, gzip").await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), None);
    assert_eq!(reply.header(header::VARY), None);
    assert_eq!(reply.body, s.original);
    Ok(())
}
