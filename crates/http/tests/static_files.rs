//! Static files end to end, without sockets: a temporary directory, a `StaticFiles` route and
//! requests as plain values. Every site has a secret file *beside* its root; traversal tests
//! check that its content never comes back.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use http_body_util::BodyExt;
use sluice_core::{Body, BoxError, ErrorKind};
use sluice_http::static_files::StaticFiles;

type TestResult = Result<(), BoxError>;

const SECRET: &str = "TOP-SECRET-CONTENT";
#[path = "static_files/conditional.rs"]
mod conditional;
#[path = "static_files/memory_cache.rs"]
mod memory_cache;
#[path = "static_files/precompressed.rs"]
mod precompressed;
#[path = "static_files/range.rs"]
mod range;

const HELLO: &str = "0123456789abcdefghijklmnopqrstuvwxyz";
/// Tue, 14 Nov 2023 22:13:20 GMT
const MTIME_SECS: u64 = 1_700_000_000;
const LAST_MODIFIED: &str = "Tue, 14 Nov 2023 22:13:20 GMT";

/// A temporary tree: `<tmp>/secret.txt` and the served root `<tmp>/www`.
struct Site {
    _dir: tempfile::TempDir,
    outside: PathBuf,
    root: PathBuf,
}

impl Site {
    fn new() -> Result<Self, BoxError> {
        let dir = tempfile::tempdir()?;
        let outside = dir.path().to_path_buf();
        let root = outside.join("www");
        fs::create_dir(&root)?;
        fs::write(outside.join("secret.txt"), SECRET)?;
        let site = Self {
            _dir: dir,
            outside,
            root,
        };
        site.file("hello.txt", HELLO.as_bytes())?;
        Ok(site)
    }

    /// Write `root/rel` with a fixed mtime, so validators are predictable.
    fn file(&self, rel: &str, content: &[u8]) -> Result<PathBuf, BoxError> {
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&path, content)?;
        let file = fs::File::options().write(true).open(&path)?;
        file.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME_SECS))?;
        Ok(path)
    }

    fn route(
        &self,
        edit: impl FnOnce(&mut sluice_config::StaticFiles),
    ) -> Result<StaticFiles, BoxError> {
        let mut cfg = sluice_config::StaticFiles::new(self.root.clone());
        edit(&mut cfg);
        Ok(StaticFiles::new(&cfg, "/static")?)
    }

    fn default_route(&self) -> Result<StaticFiles, BoxError> {
        self.route(|_| {})
    }

    /// The default route, but its memory cache checks the files before every hit
    /// (`memory_cache_recheck = "0s"`): a change is served by the very next request.
    fn rechecking_route(&self) -> Result<StaticFiles, BoxError> {
        self.route(|c| c.memory_cache_recheck = Duration::ZERO)
    }
}

/// What came back: a response (with its collected body and frame count) or an error's kind.
#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    frames: usize,
}

impl Reply {
    fn header(&self, name: header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

async fn request(
    files: &StaticFiles,
    method: Method,
    uri: &str,
    headers: &[(&'static str, &str)],
) -> Result<Result<Reply, ErrorKind>, BoxError> {
    let uri: Uri = uri.parse()?;
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(*name, HeaderValue::from_str(value)?);
    }
    let response = match files.serve(&method, &uri, &map).await {
        Ok(response) => response,
        Err(err) => return Ok(Err(err.kind())),
    };
    let (parts, mut body): (_, Body) = response.into_parts();
    let mut collected = Vec::new();
    let mut frames = 0;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            frames += 1;
            collected.extend_from_slice(&data);
        }
    }
    Ok(Ok(Reply {
        status: parts.status,
        headers: parts.headers,
        body: collected.into(),
        frames,
    }))
}

async fn get(
    files: &StaticFiles,
    uri: &str,
    headers: &[(&'static str, &str)],
) -> Result<Reply, BoxError> {
    request(files, Method::GET, uri, headers)
        .await?
        .map_err(|kind| format!("GET {uri}: expected a response, got {kind:?}").into())
}

async fn get_err(files: &StaticFiles, uri: &str) -> Result<ErrorKind, BoxError> {
    match request(files, Method::GET, uri, &[]).await? {
        Ok(reply) => Err(format!("GET {uri}: expected an error, got {}", reply.status).into()),
        Err(kind) => Ok(kind),
    }
}

// ---------------------------------------------------------------------------------------------
// Traversal and containment

#[tokio::test]
async fn traversal_attempts_are_refused_and_never_leak_the_secret() -> TestResult {
    let site = Site::new()?;
    for files in [
        site.default_route()?,
        site.route(|c| c.strip_prefix = true)?,
    ] {
        for uri in [
            "/../secret.txt",
            "/../etc/passwd",
            "/%2e%2e/secret.txt",
            "/%2E%2E%2Fsecret.txt",
            "/..%2fsecret.txt",
            "/..%2f..%2fetc%2fpasswd",
            "/a/../../secret.txt",
            "/static/../secret.txt",
            "/static/%2e%2e/secret.txt",
            "/static/..%2F..%2Fsecret.txt",
            "/hello.txt%00.html",
            "/%00",
            "/%ff",
            "/..%5csecret.txt",
            "/%5c..%5csecret.txt",
        ] {
            match request(&files, Method::GET, uri, &[]).await? {
                Ok(reply) => {
                    let body = String::from_utf8_lossy(&reply.body);
                    assert!(!body.contains(SECRET), "{uri} leaked the secret");
                    return Err(format!("{uri}: expected 400/404, got {}", reply.status).into());
                }
                Err(kind) => assert!(
                    matches!(kind, ErrorKind::BadRequest | ErrorKind::NotFound),
                    "{uri}: {kind:?}"
                ),
            }
        }
    }
    Ok(())
}

#[cfg(unix)]
#[tokio::test]
async fn symlinks_out_of_the_root_are_404_unless_allowed() -> TestResult {
    use std::os::unix::fs::symlink;
    let site = Site::new()?;
    symlink(
        site.outside.join("secret.txt"),
        site.root.join("link-out.txt"),
    )?;
    symlink(&site.outside, site.root.join("dir-out"))?;
    symlink("hello.txt", site.root.join("link-in.txt"))?;

    let files = site.default_route()?;
    assert_eq!(get_err(&files, "/link-out.txt").await?, ErrorKind::NotFound);
    assert_eq!(
        get_err(&files, "/dir-out/secret.txt").await?,
        ErrorKind::NotFound
    );
    assert_eq!(get_err(&files, "/dir-out/").await?, ErrorKind::NotFound);
    let inside = get(&files, "/link-in.txt", &[]).await?;
    assert_eq!(inside.body, HELLO);

    let files = site.route(|c| c.follow_symlinks_outside_root = true)?;
    assert_eq!(get(&files, "/link-out.txt", &[]).await?.body, SECRET);
    assert_eq!(get(&files, "/dir-out/secret.txt", &[]).await?.body, SECRET);
    Ok(())
}

#[cfg(unix)]
#[tokio::test]
async fn a_root_reached_through_a_symlink_still_serves() -> TestResult {
    let site = Site::new()?;
    let alias = site.outside.join("www-alias");
    std::os::unix::fs::symlink(&site.root, &alias)?;
    let files = StaticFiles::new(&sluice_config::StaticFiles::new(alias), "/")?;
    assert_eq!(get(&files, "/hello.txt", &[]).await?.body, HELLO);
    Ok(())
}

#[cfg(unix)]
#[tokio::test]
async fn a_fifo_is_404_and_never_blocks() -> TestResult {
    let site = Site::new()?;
    let fifo = site.root.join("pipe.txt");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        return Ok(()); // no mkfifo here
    }
    let files = site.default_route()?;
    let answer = tokio::time::timeout(Duration::from_secs(10), get_err(&files, "/pipe.txt")).await;
    let Ok(kind) = answer else {
        // Release the blocking thread stuck in open(2), or the runtime never shuts down.
        drop(fs::File::options().write(true).open(&fifo));
        return Err("the request blocked on the FIFO".into());
    };
    assert_eq!(kind?, ErrorKind::NotFound);
    Ok(())
}

#[tokio::test]
async fn hidden_files_are_served_like_nginx() -> TestResult {
    let site = Site::new()?;
    site.file(".well-known/security.txt", b"contact")?;
    let files = site.default_route()?;
    assert_eq!(
        get(&files, "/.well-known/security.txt", &[]).await?.body,
        "contact"
    );
    Ok(())
}

#[tokio::test]
async fn a_missing_root_is_an_error_at_start_up() -> TestResult {
    let site = Site::new()?;
    let cfg = sluice_config::StaticFiles::new(site.outside.join("nope"));
    assert!(StaticFiles::new(&cfg, "/").is_err());
    let cfg = sluice_config::StaticFiles::new(site.outside.join("secret.txt"));
    assert!(StaticFiles::new(&cfg, "/").is_err());
    Ok(())
}

#[cfg(unix)]
#[tokio::test]
async fn an_unreadable_file_is_403() -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    let site = Site::new()?;
    let path = site.file("private.txt", b"private")?;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o000))?;
    if fs::read(&path).is_ok() {
        return Ok(()); // running as root: permissions are not enforced
    }
    let files = site.default_route()?;
    assert_eq!(get_err(&files, "/private.txt").await?, ErrorKind::Forbidden);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Methods, directories, MIME, prefixes

#[tokio::test]
async fn only_get_and_head_are_allowed() -> TestResult {
    let site = Site::new()?;
    let files = site.default_route()?;
    for method in [Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS] {
        let reply = request(&files, method, "/hello.txt", &[])
            .await?
            .map_err(|k| format!("{k:?}"))?;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(reply.header(header::ALLOW), Some("GET, HEAD"));
    }
    Ok(())
}

#[tokio::test]
async fn head_has_the_headers_of_get_and_no_body() -> TestResult {
    let site = Site::new()?;
    let files = site.default_route()?;
    let get_reply = get(&files, "/hello.txt", &[]).await?;
    let head = request(&files, Method::HEAD, "/hello.txt", &[])
        .await?
        .map_err(|k| format!("{k:?}"))?;
    assert_eq!(head.status, StatusCode::OK);
    assert_eq!(head.headers, get_reply.headers);
    assert!(head.body.is_empty());
    assert_eq!(head.header(header::CONTENT_LENGTH), Some("36"));

    // Range is defined for GET only: HEAD describes the whole file.
    let head = request(
        &files,
        Method::HEAD,
        "/hello.txt",
        &[("range", "bytes=0-9")],
    )
    .await?
    .map_err(|k| format!("{k:?}"))?;
    assert_eq!(head.status, StatusCode::OK);
    assert_eq!(head.header(header::CONTENT_LENGTH), Some("36"));
    Ok(())
}

#[tokio::test]
async fn directories_redirect_then_serve_their_index() -> TestResult {
    let site = Site::new()?;
    site.file("docs/index.html", b"<h1>docs</h1>")?;
    fs::create_dir(site.root.join("empty"))?;
    let files = site.default_route()?;

    let reply = get(&files, "/docs?lang=en&x=1", &[]).await?;
    assert_eq!(reply.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(reply.header(header::LOCATION), Some("/docs/?lang=en&x=1"));

    let reply = get(&files, "/docs/", &[]).await?;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, "<h1>docs</h1>");
    assert_eq!(
        reply.header(header::CONTENT_TYPE),
        Some("text/html; charset=utf-8")
    );

    assert_eq!(get_err(&files, "/").await?, ErrorKind::NotFound);
    assert_eq!(get_err(&files, "/empty/").await?, ErrorKind::NotFound);
    assert_eq!(get_err(&files, "/hello.txt/").await?, ErrorKind::NotFound);
    assert_eq!(get_err(&files, "/missing.txt").await?, ErrorKind::NotFound);
    assert_eq!(get_err(&files, "/hello.txt/x").await?, ErrorKind::NotFound);
    Ok(())
}

#[tokio::test]
async fn index_names_are_tried_in_order() -> TestResult {
    let site = Site::new()?;
    site.file("a/index.htm", b"htm")?;
    fs::create_dir_all(site.root.join("a/index.html"))?; // a directory is not an index file
    let files = site.route(|c| c.index = vec!["index.html".into(), "index.htm".into()])?;
    assert_eq!(get(&files, "/a/", &[]).await?.body, "htm");
    Ok(())
}

#[tokio::test]
async fn content_types_follow_the_extension() -> TestResult {
    let site = Site::new()?;
    let files = site.default_route()?;
    for (name, expected) in [
        ("a.html", "text/html; charset=utf-8"),
        ("a.css", "text/css; charset=utf-8"),
        ("a.js", "text/javascript; charset=utf-8"),
        ("a.json", "application/json; charset=utf-8"),
        ("a.svg", "image/svg+xml"),
        ("a.wasm", "application/wasm"),
        ("a.unknownext", "application/octet-stream"),
    ] {
        site.file(name, b"x")?;
        let reply = get(&files, &format!("/{name}"), &[]).await?;
        assert_eq!(reply.header(header::CONTENT_TYPE), Some(expected), "{name}");
    }
    Ok(())
}

#[tokio::test]
async fn strip_prefix_maps_the_rest_of_the_path_to_the_root() -> TestResult {
    let site = Site::new()?;
    site.file("static/nested.txt", b"nested")?;
    let stripped = site.route(|c| c.strip_prefix = true)?;
    assert_eq!(get(&stripped, "/static/hello.txt", &[]).await?.body, HELLO);
    let reply = get(&stripped, "/static?v=2", &[]).await?;
    assert_eq!(reply.header(header::LOCATION), Some("/static/?v=2"));
    assert_eq!(
        get_err(&stripped, "/other/hello.txt").await?,
        ErrorKind::NotFound
    );

    let kept = site.default_route()?;
    assert_eq!(get(&kept, "/static/nested.txt", &[]).await?.body, "nested");
    assert_eq!(
        get_err(&kept, "/static/hello.txt").await?,
        ErrorKind::NotFound
    );
    Ok(())
}

#[tokio::test]
async fn encoded_names_are_decoded() -> TestResult {
    let site = Site::new()?;
    site.file("hello world.txt", b"spaced")?;
    site.file("caf\u{e9}.txt", b"accent")?;
    let files = site.default_route()?;
    assert_eq!(get(&files, "/hello%20world.txt", &[]).await?.body, "spaced");
    assert_eq!(get(&files, "/caf%C3%A9.txt", &[]).await?.body, "accent");
    assert_eq!(get(&files, "//./hello.txt", &[]).await?.body, HELLO);
    Ok(())
}

fn etag_of(len: u64) -> String {
    format!("\"{MTIME_SECS:x}-{len:x}\"")
}

/// Files up to 256 KiB go out as one in-memory frame, read on the lookup's trip for a plain GET
/// or by the range path otherwise; larger ones stream. Every way gives the exact bytes.
#[tokio::test]
async fn small_files_are_one_frame_and_large_ones_stream_with_exact_bytes() -> TestResult {
    let site = Site::new()?;
    let medium: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let large: Vec<u8> = (0..600_000u32).map(|i| (i % 241) as u8).collect();
    site.file("medium.bin", &medium)?;
    site.file("large.bin", &large)?;
    let files = site.default_route()?;

    let plain = get(&files, "/medium.bin", &[]).await?;
    assert_eq!((plain.status, plain.frames), (StatusCode::OK, 1));
    assert!(plain.body == medium, "prefetched body differs");

    // A validator that does not match: the file is read after the precondition, same bytes.
    let revalidated = get(&files, "/medium.bin", &[("if-none-match", "\"other\"")]).await?;
    assert_eq!(
        (revalidated.status, revalidated.frames),
        (StatusCode::OK, 1)
    );
    assert!(
        revalidated.body == medium,
        "body after a failed validator differs"
    );

    let ranged = get(&files, "/medium.bin", &[("range", "bytes=10-19")]).await?;
    assert_eq!(ranged.status, StatusCode::PARTIAL_CONTENT);
    assert!(ranged.body == medium[10..20], "range differs");

    let streamed = get(&files, "/large.bin", &[]).await?;
    assert_eq!(streamed.status, StatusCode::OK);
    assert!(streamed.frames > 1, "{} frames", streamed.frames);
    assert!(streamed.body == large, "streamed body differs");
    assert_eq!(streamed.header(header::CONTENT_LENGTH), Some("600000"));
    Ok(())
}
