//! The memory cache of small files (on by default): a hit answers exactly as a lookup would;
//! any change to a file the lookup looked at is served by the first request after
//! `memory_cache_recheck` (here mostly "0s": the very next one); the identity a response
//! carries to compression changes with the file, hit or lookup.

use super::*;
use sluice_core::SidecarCoding;
use sluice_http::compress_policy::ContentId;

/// A route with the cache turned off, to compare against.
fn uncached_route(site: &Site) -> Result<StaticFiles, BoxError> {
    site.route(|c| c.memory_cache = 0)
}

/// Everything a client sees of a reply except the `Date`-like parts (there are none here).
fn seen(reply: &Reply) -> (StatusCode, Vec<(String, String)>, Bytes) {
    let mut headers: Vec<(String, String)> = (reply.headers.iter())
        .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
        .collect();
    headers.sort();
    (reply.status, headers, reply.body.clone())
}

/// Rewrite `root/rel` in place (same inode) keeping the fixed mtime: only ctime and the bytes
/// change, as with an editor that preserves times or a fast second edit.
fn edit_in_place(site: &Site, rel: &str, content: &[u8]) -> Result<(), BoxError> {
    use std::io::Write;
    let path = site.root.join(rel);
    let mut file = fs::File::options().write(true).truncate(true).open(&path)?;
    file.write_all(content)?;
    file.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME_SECS))?;
    Ok(())
}

/// A method, a target and request headers.
type Case<'a> = (Method, &'a str, Vec<(&'static str, &'a str)>);

#[tokio::test]
async fn hits_answer_every_request_as_a_lookup_would() -> TestResult {
    let site = Site::new()?;
    let page: Vec<u8> = (0..70_000u32)
        .map(|i| b"<p>hello</p>\n"[i as usize % 13])
        .collect();
    site.file("index.html", &page)?;
    let cached = site.default_route()?;
    let uncached = uncached_route(&site)?;
    let etag = etag_of(page.len() as u64);

    let requests: Vec<Case<'_>> = vec![
        (Method::GET, "/index.html", vec![]), // fills the cache
        (Method::GET, "/index.html", vec![]),
        (Method::GET, "/", vec![]),
        (Method::GET, "/", vec![]),
        (Method::HEAD, "/index.html", vec![]),
        (Method::GET, "/index.html", vec![("if-none-match", &etag)]),
        (Method::GET, "/index.html", vec![("if-match", "\"other\"")]),
        (Method::GET, "/index.html", vec![("range", "bytes=100-199")]),
        (Method::GET, "/index.html", vec![("range", "bytes=-10")]),
        (Method::GET, "/index.html", vec![("range", "bytes=70000-")]),
        (
            Method::GET,
            "/index.html",
            vec![("range", "bytes=0-9"), ("if-range", "\"stale\"")],
        ),
        (
            Method::GET,
            "/index.html",
            vec![("if-modified-since", LAST_MODIFIED)],
        ),
    ];
    for (method, uri, headers) in &requests {
        let hit = request(&cached, method.clone(), uri, headers).await?;
        let lookup = request(&uncached, method.clone(), uri, headers).await?;
        let (hit, lookup) = (
            hit.map_err(|k| format!("{k:?}"))?,
            lookup.map_err(|k| format!("{k:?}"))?,
        );
        assert_eq!(seen(&hit), seen(&lookup), "{method} {uri} {headers:?}");
        if hit.status == StatusCode::OK && *method == Method::GET {
            assert_eq!(hit.frames, 1, "{method} {uri} {headers:?}");
        }
    }
    let range = get(&cached, "/index.html", &[("range", "bytes=100-199")]).await?;
    assert_eq!(range.status, StatusCode::PARTIAL_CONTENT);
    assert!(range.body == page[100..200], "cached range differs");
    Ok(())
}

/// With the default `memory_cache_recheck` (100 ms) a hit within the interval is served
/// without looking at the file system: a change is seen by the first request once the interval
/// has passed since the entry was filled, never before (a slow machine may take that long
/// between two requests, so only "never before" is asserted of the first one). Polled with a
/// deadline: no sleep decides the outcome.
#[tokio::test]
async fn a_change_is_seen_once_the_recheck_interval_has_passed() -> TestResult {
    let site = Site::new()?;
    let interval = Duration::from_millis(100);
    let files = site.route(|c| c.memory_cache_recheck = interval)?;
    let filled = std::time::Instant::now();
    assert_eq!(get(&files, "/hello.txt", &[]).await?.body, HELLO);
    let staged = site.file("hello.txt.new", b"the new release")?;
    fs::rename(staged, site.root.join("hello.txt"))?;

    let deadline = filled + Duration::from_secs(10);
    loop {
        let reply = get(&files, "/hello.txt", &[]).await?;
        if reply.body == "the new release" {
            assert!(
                filled.elapsed() >= interval,
                "seen before the interval passed"
            );
            assert_eq!(reply.header(header::CONTENT_LENGTH), Some("15"));
            break;
        }
        assert_eq!(
            reply.body, HELLO,
            "the old version or the new one, nothing else"
        );
        assert!(std::time::Instant::now() < deadline, "not seen within 10 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// The longest interval: within it, the old version is served from memory (unless the
/// machine stalled for that long); after it, the new one.
#[tokio::test]
async fn within_the_recheck_interval_a_hit_is_served_without_a_stat() -> TestResult {
    let site = Site::new()?;
    let interval = Duration::from_secs(1);
    let files = site.route(|c| c.memory_cache_recheck = interval)?;
    let filled = std::time::Instant::now();
    assert_eq!(get(&files, "/hello.txt", &[]).await?.body, HELLO);
    fs::remove_file(site.root.join("hello.txt"))?;
    match request(&files, Method::GET, "/hello.txt", &[]).await? {
        Ok(reply) => assert_eq!(reply.body, HELLO),
        Err(kind) => {
            assert_eq!(kind, ErrorKind::NotFound);
            assert!(
                filled.elapsed() >= interval,
                "seen before the interval passed"
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn an_edit_in_place_with_the_same_size_and_mtime_is_served_at_once() -> TestResult {
    let site = Site::new()?;
    let files = site.rechecking_route()?;
    assert_eq!(get(&files, "/hello.txt", &[]).await?.body, HELLO);
    let edited = HELLO.to_uppercase();
    edit_in_place(&site, "hello.txt", edited.as_bytes())?;
    assert_eq!(get(&files, "/hello.txt", &[]).await?.body, edited);
    Ok(())
}

#[tokio::test]
async fn a_file_replaced_by_rename_is_served_at_once() -> TestResult {
    let site = Site::new()?;
    let files = site.rechecking_route()?;
    assert_eq!(get(&files, "/hello.txt", &[]).await?.body, HELLO);
    let staged = site.file("hello.txt.new", b"the new release")?;
    fs::rename(staged, site.root.join("hello.txt"))?;
    let reply = get(&files, "/hello.txt", &[]).await?;
    assert_eq!(reply.body, "the new release");
    assert_eq!(reply.header(header::CONTENT_LENGTH), Some("15"));
    Ok(())
}

#[tokio::test]
async fn a_deleted_file_is_404_at_once() -> TestResult {
    let site = Site::new()?;
    let files = site.rechecking_route()?;
    assert_eq!(get(&files, "/hello.txt", &[]).await?.status, StatusCode::OK);
    fs::remove_file(site.root.join("hello.txt"))?;
    assert_eq!(get_err(&files, "/hello.txt").await?, ErrorKind::NotFound);
    Ok(())
}

#[tokio::test]
async fn sidecars_that_appear_change_or_go_stale_are_seen_at_once() -> TestResult {
    let site = Site::new()?;
    let original = "x".repeat(4096);
    site.file("app.js", original.as_bytes())?;
    let files = site.route(|c| {
        c.precompressed = vec![SidecarCoding::GZIP];
        c.memory_cache_recheck = Duration::ZERO;
    })?;
    let gzip = [("accept-encoding", "gzip")];

    // No sidecar yet: the original, cached under this Accept-Encoding.
    let reply = get(&files, "/app.js", &gzip).await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), None);

    // `sluice precompress` writes one (newer than the original): served by the next request.
    let gz = gzip_of(original.as_bytes())?;
    fs::write(site.root.join("app.js.gz"), &gz)?;
    let reply = get(&files, "/app.js", &gzip).await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), Some("gzip"));
    assert!(reply.body == gz, "the new sidecar's bytes");

    // The original is edited after compressing: its sidecar is stale from the next request on.
    let newer = fs::File::options()
        .write(true)
        .open(site.root.join("app.js"))?;
    newer.set_modified(std::time::SystemTime::now() + Duration::from_secs(60))?;
    let reply = get(&files, "/app.js", &gzip).await?;
    assert_eq!(reply.header(header::CONTENT_ENCODING), None);
    assert_eq!(reply.body, original);
    Ok(())
}

fn gzip_of(input: &[u8]) -> Result<Vec<u8>, BoxError> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(input)?;
    Ok(encoder.finish()?)
}

#[cfg(unix)]
#[tokio::test]
async fn a_removed_or_repointed_file_link_is_seen_at_once() -> TestResult {
    use std::os::unix::fs::symlink;
    let site = Site::new()?;
    site.file("v1.txt", b"version one")?;
    site.file("v2.txt", b"version two")?;
    symlink("v1.txt", site.root.join("app.txt"))?;
    let files = site.rechecking_route()?;
    assert_eq!(get(&files, "/app.txt", &[]).await?.body, "version one");

    // Re-pointed atomically, as deploys do.
    symlink("v2.txt", site.root.join("app.txt.tmp"))?;
    fs::rename(site.root.join("app.txt.tmp"), site.root.join("app.txt"))?;
    assert_eq!(get(&files, "/app.txt", &[]).await?.body, "version two");

    fs::remove_file(site.root.join("app.txt"))?;
    assert_eq!(get_err(&files, "/app.txt").await?, ErrorKind::NotFound);
    Ok(())
}

#[cfg(unix)]
#[tokio::test]
async fn a_repointed_directory_link_is_seen_at_once() -> TestResult {
    use std::os::unix::fs::symlink;
    let site = Site::new()?;
    site.file("releases/1/app.js", b"release one")?;
    site.file("releases/1/index.html", b"index one")?;
    site.file("releases/2/app.js", b"release two")?;
    site.file("releases/2/index.html", b"index two")?;
    symlink("releases/1", site.root.join("current"))?;
    let files = site.rechecking_route()?;
    assert_eq!(
        get(&files, "/current/app.js", &[]).await?.body,
        "release one"
    );
    assert_eq!(get(&files, "/current/", &[]).await?.body, "index one");

    symlink("releases/2", site.root.join("current.tmp"))?;
    fs::rename(site.root.join("current.tmp"), site.root.join("current"))?;
    assert_eq!(
        get(&files, "/current/app.js", &[]).await?.body,
        "release two"
    );
    assert_eq!(get(&files, "/current/", &[]).await?.body, "index two");
    Ok(())
}

#[tokio::test]
async fn an_index_file_earlier_in_the_list_is_served_once_it_appears() -> TestResult {
    let site = Site::new()?;
    site.file("docs/index.htm", b"the old index")?;
    let files = site.route(|c| {
        c.index = vec!["index.html".into(), "index.htm".into()];
        c.memory_cache_recheck = Duration::ZERO;
    })?;
    assert_eq!(get(&files, "/docs/", &[]).await?.body, "the old index");
    site.file("docs/index.html", b"the new index")?;
    let reply = get(&files, "/docs/", &[]).await?;
    assert_eq!(reply.body, "the new index");
    assert_eq!(
        reply.header(header::CONTENT_TYPE),
        Some("text/html; charset=utf-8")
    );
    Ok(())
}

/// Revalidations (HEAD, Range, If-None-Match) fill the cache too, and a HEAD from memory still
/// has the GET's length and no body.
#[tokio::test]
async fn any_request_fills_the_cache_and_head_stays_bodiless() -> TestResult {
    let site = Site::new()?;
    let files = site.default_route()?;
    let uncached = uncached_route(&site)?;
    for _ in 0..2 {
        let head = request(&files, Method::HEAD, "/hello.txt", &[]).await?;
        let head = head.map_err(|k| format!("{k:?}"))?;
        assert_eq!(head.status, StatusCode::OK);
        assert!(head.body.is_empty());
        assert_eq!(head.header(header::CONTENT_LENGTH), Some("36"));
    }
    let range = get(&files, "/hello.txt", &[("range", "bytes=10-12")]).await?;
    assert_eq!(range.body, "abc");
    let lookup = get(&uncached, "/hello.txt", &[("range", "bytes=10-12")]).await?;
    assert_eq!(seen(&range), seen(&lookup));
    Ok(())
}

/// The [`ContentId`] a request's response carries to compression, if any.
async fn content_id(
    files: &StaticFiles,
    method: Method,
    headers: &[(&'static str, &str)],
) -> Result<Option<ContentId>, BoxError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(*name, HeaderValue::from_str(value)?);
    }
    let uri = Uri::from_static("/hello.txt");
    let response = files.serve(&method, &uri, &map).await?;
    Ok(response.extensions().get::<ContentId>().copied())
}

#[cfg(unix)]
#[tokio::test]
async fn the_whole_file_carries_an_id_that_changes_with_the_file() -> TestResult {
    let site = Site::new()?;
    for files in [site.rechecking_route()?, uncached_route(&site)?] {
        // A lookup and a hit, GET and HEAD: one version, one id.
        let first = content_id(&files, Method::GET, &[]).await?.ok_or("no id")?;
        assert_eq!(content_id(&files, Method::GET, &[]).await?, Some(first));
        assert_eq!(content_id(&files, Method::HEAD, &[]).await?, Some(first));
        // Not the whole representation: nothing to keep an encoded form of.
        let etag = etag_of(HELLO.len() as u64);
        for headers in [[("range", "bytes=0-9")], [("if-none-match", etag.as_str())]] {
            assert_eq!(content_id(&files, Method::GET, &headers).await?, None);
        }
        // Same size and mtime, new bytes: a new id, though the ETag is the same. (Replaced by
        // a rename, whose new inode differs for sure; an edit in place changes the ctime, but
        // only by a clock tick that two quick edits may share.)
        let staged = site.file("hello.txt.new", HELLO.to_uppercase().as_bytes())?;
        fs::rename(staged, site.root.join("hello.txt"))?;
        let edited = content_id(&files, Method::GET, &[]).await?.ok_or("no id")?;
        assert_ne!(edited, first);
        let staged = site.file("hello.txt.new", HELLO.as_bytes())?;
        fs::rename(staged, site.root.join("hello.txt"))?;
    }

    // A sidecar is encoded already: it carries none.
    site.file("hello.txt.gz", &gzip_of(HELLO.as_bytes())?)?;
    let sidecars = site.route(|c| c.precompressed = vec![SidecarCoding::GZIP])?;
    let gzip = [("accept-encoding", "gzip")];
    assert_eq!(content_id(&sidecars, Method::GET, &gzip).await?, None);
    Ok(())
}
