//! Range requests (RFC 9110 §14) and streaming of large files.

use super::*;

const LEN: u64 = HELLO.len() as u64;

async fn ranged(files: &StaticFiles, range: &str) -> Result<Reply, BoxError> {
    get(files, "/hello.txt", &[("range", range)]).await
}

#[tokio::test]
async fn single_ranges_give_206_with_exact_bytes() -> TestResult {
    let site = Site::new()?;
    let files = site.default_route()?;
    for (range, bytes, content_range) in [
        ("bytes=0-9", &HELLO[0..10], "bytes 0-9/36"),
        ("bytes=-10", &HELLO[26..], "bytes 26-35/36"),
        ("bytes=5-", &HELLO[5..], "bytes 5-35/36"),
        ("bytes=30-1000", &HELLO[30..], "bytes 30-35/36"),
        ("bytes=-1000", HELLO, "bytes 0-35/36"),
        ("bytes=35-35", &HELLO[35..], "bytes 35-35/36"),
    ] {
        let reply = ranged(&files, range).await?;
        assert_eq!(reply.status, StatusCode::PARTIAL_CONTENT, "{range}");
        assert_eq!(reply.body, bytes, "{range}");
        assert_eq!(
            reply.header(header::CONTENT_RANGE),
            Some(content_range),
            "{range}"
        );
        let length = bytes.len().to_string();
        assert_eq!(
            reply.header(header::CONTENT_LENGTH),
            Some(length.as_str()),
            "{range}"
        );
        assert_eq!(reply.header(header::ETAG), Some(etag_of(LEN).as_str()));
        assert_eq!(
            reply.header(header::CONTENT_TYPE),
            Some("text/plain; charset=utf-8")
        );
    }
    Ok(())
}

#[tokio::test]
async fn unsatisfiable_ranges_give_416_with_the_length() -> TestResult {
    let site = Site::new()?;
    site.file("empty.txt", b"")?;
    let files = site.default_route()?;
    for range in ["bytes=36-", "bytes=36-40", "bytes=1000-2000"] {
        let reply = ranged(&files, range).await?;
        assert_eq!(reply.status, StatusCode::RANGE_NOT_SATISFIABLE, "{range}");
        assert_eq!(reply.header(header::CONTENT_RANGE), Some("bytes */36"));
        assert!(reply.body.is_empty());
    }
    for range in ["bytes=0-", "bytes=0-0"] {
        let reply = get(&files, "/empty.txt", &[("range", range)]).await?;
        assert_eq!(reply.status, StatusCode::RANGE_NOT_SATISFIABLE, "{range}");
        assert_eq!(reply.header(header::CONTENT_RANGE), Some("bytes */0"));
    }
    // RFC 9110 §14.1.1: a suffix range of an empty file is satisfiable (no 416), and no
    // Content-Range can name zero bytes: the whole empty file.
    let reply = get(&files, "/empty.txt", &[("range", "bytes=-5")]).await?;
    assert_eq!((reply.status, reply.body.len()), (StatusCode::OK, 0));
    assert_eq!(reply.header(header::CONTENT_RANGE), None);
    let reply = get(&files, "/empty.txt", &[]).await?;
    assert_eq!((reply.status, reply.body.len()), (StatusCode::OK, 0));
    assert_eq!(reply.header(header::CONTENT_LENGTH), Some("0"));
    Ok(())
}

#[tokio::test]
async fn invalid_foreign_and_multiple_ranges_give_the_whole_file() -> TestResult {
    let site = Site::new()?;
    let files = site.default_route()?;
    for range in [
        "bytes=abc",
        "items=0-1",
        "bytes=5-1",
        "bytes=0-1,3-4",
        "bytes=0-5, 10-",
    ] {
        let reply = ranged(&files, range).await?;
        assert_eq!(reply.status, StatusCode::OK, "{range}");
        assert_eq!(reply.body, HELLO, "{range}");
        assert_eq!(reply.header(header::CONTENT_RANGE), None);
    }
    Ok(())
}

#[tokio::test]
async fn if_range_honours_the_range_only_for_the_current_version() -> TestResult {
    let site = Site::new()?;
    let files = site.default_route()?;
    let etag = etag_of(LEN);
    for (if_range, expected) in [
        (etag.as_str(), StatusCode::PARTIAL_CONTENT),
        (LAST_MODIFIED, StatusCode::PARTIAL_CONTENT),
        ("\"stale\"", StatusCode::OK),
        (&format!("W/{etag}"), StatusCode::OK),
        ("Tue, 14 Nov 2023 22:13:21 GMT", StatusCode::OK),
        ("Wed, 15 Nov 2023 00:00:00 GMT", StatusCode::OK),
        ("garbage", StatusCode::OK),
    ] {
        let headers = [("range", "bytes=0-9"), ("if-range", if_range)];
        let reply = get(&files, "/hello.txt", &headers).await?;
        assert_eq!(reply.status, expected, "{if_range}");
        let body = if expected == StatusCode::OK {
            HELLO
        } else {
            &HELLO[..10]
        };
        assert_eq!(reply.body, body, "{if_range}");
    }
    // A stale If-Range turns even an unsatisfiable range into a full 200.
    let headers = [("range", "bytes=100-"), ("if-range", "\"stale\"")];
    assert_eq!(
        get(&files, "/hello.txt", &headers).await?.status,
        StatusCode::OK
    );
    Ok(())
}

fn large_content(len: usize) -> Vec<u8> {
    // Not periodic in 64 KiB, so a frame sent twice or out of order shows up.
    (0..len).map(|i| ((i * 7 + i / 251) % 256) as u8).collect()
}

#[tokio::test]
async fn a_large_file_streams_in_several_frames_with_exact_bytes() -> TestResult {
    let site = Site::new()?;
    let content = large_content(1024 * 1024 + 17);
    site.file("big.bin", &content)?;
    let files = site.default_route()?;

    let reply = get(&files, "/big.bin", &[]).await?;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.frames >= 16, "{} frames", reply.frames);
    assert_eq!(reply.body.len(), content.len());
    assert!(reply.body == content, "streamed bytes differ");
    assert_eq!(reply.header(header::CONTENT_LENGTH), Some("1048593"));
    assert_eq!(
        reply.header(header::CONTENT_TYPE),
        Some("application/octet-stream")
    );
    Ok(())
}

#[tokio::test]
async fn a_range_in_the_middle_of_a_large_file_is_exact() -> TestResult {
    let site = Site::new()?;
    let content = large_content(1024 * 1024);
    site.file("big.bin", &content)?;
    let files = site.default_route()?;

    for (start, end) in [
        (300_000usize, 700_000usize),
        (65_535, 65_536),
        (100, 100 + 65_536),
    ] {
        let range = format!("bytes={start}-{end}");
        let reply = get(&files, "/big.bin", &[("range", &range)]).await?;
        assert_eq!(reply.status, StatusCode::PARTIAL_CONTENT);
        let content_range = format!("bytes {start}-{end}/{}", content.len());
        assert_eq!(
            reply.header(header::CONTENT_RANGE),
            Some(content_range.as_str())
        );
        assert!(reply.body == content[start..=end], "{range}: bytes differ");
    }
    Ok(())
}
