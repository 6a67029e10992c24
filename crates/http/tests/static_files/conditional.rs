//! Validators and conditional requests (RFC 9110 §8.8, §13).

use super::*;

const LEN: u64 = HELLO.len() as u64;

#[tokio::test]
async fn a_200_carries_validators_and_accept_ranges() -> TestResult {
    let site = Site::new()?;
    let files = site.default_route()?;
    let reply = get(&files, "/hello.txt", &[]).await?;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, HELLO);
    assert_eq!(reply.header(header::ETAG), Some(etag_of(LEN).as_str()));
    assert_eq!(reply.header(header::ETAG), Some("\"6553f100-24\""));
    assert_eq!(reply.header(header::LAST_MODIFIED), Some(LAST_MODIFIED));
    assert_eq!(reply.header(header::ACCEPT_RANGES), Some("bytes"));
    assert_eq!(reply.header(header::CONTENT_LENGTH), Some("36"));
    assert_eq!(
        reply.header(header::CONTENT_TYPE),
        Some("text/plain; charset=utf-8")
    );
    Ok(())
}

#[tokio::test]
async fn the_etag_changes_with_size_and_mtime() -> TestResult {
    let site = Site::new()?;
    let files = site.rechecking_route()?;
    let before = get(&files, "/hello.txt", &[]).await?;
    site.file("hello.txt", b"longer content now")?;
    let resized = get(&files, "/hello.txt", &[]).await?;
    assert_ne!(before.header(header::ETAG), resized.header(header::ETAG));

    let path = site.root.join("hello.txt");
    let file = fs::File::options().write(true).open(&path)?;
    file.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME_SECS + 1))?;
    let touched = get(&files, "/hello.txt", &[]).await?;
    assert_ne!(resized.header(header::ETAG), touched.header(header::ETAG));
    Ok(())
}

#[tokio::test]
async fn if_none_match_gives_304_with_validators_and_no_body() -> TestResult {
    let site = Site::new()?;
    let files = site.default_route()?;
    let etag = get(&files, "/hello.txt", &[])
        .await?
        .header(header::ETAG)
        .map(str::to_owned);
    let etag = etag.ok_or("no ETag")?;

    for value in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
        format!("\"a\",W/{etag} , \"b\""),
        "*".to_owned(),
    ] {
        for method in [Method::GET, Method::HEAD] {
            let reply = request(&files, method, "/hello.txt", &[("if-none-match", &value)])
                .await?
                .map_err(|k| format!("{k:?}"))?;
            assert_eq!(reply.status, StatusCode::NOT_MODIFIED, "{value}");
            assert_eq!(reply.header(header::ETAG), Some(etag.as_str()));
            assert_eq!(reply.header(header::LAST_MODIFIED), Some(LAST_MODIFIED));
            assert_eq!(reply.header(header::CONTENT_LENGTH), None);
            assert!(reply.body.is_empty());
        }
    }

    let reply = get(&files, "/hello.txt", &[("if-none-match", "\"stale\"")]).await?;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, HELLO);
    Ok(())
}

#[tokio::test]
async fn if_modified_since_gives_304_unless_if_none_match_is_present() -> TestResult {
    let site = Site::new()?;
    let files = site.default_route()?;
    let not_modified = [
        LAST_MODIFIED,
        "Wed, 15 Nov 2023 00:00:00 GMT",
        "Tuesday, 14-Nov-23 22:13:20 GMT",
        "Tue Nov 14 22:13:20 2023",
    ];
    for date in not_modified {
        let reply = get(&files, "/hello.txt", &[("if-modified-since", date)]).await?;
        assert_eq!(reply.status, StatusCode::NOT_MODIFIED, "{date}");
    }
    for date in ["Tue, 14 Nov 2023 22:13:19 GMT", "not a date", ""] {
        let reply = get(&files, "/hello.txt", &[("if-modified-since", date)]).await?;
        assert_eq!(reply.status, StatusCode::OK, "{date:?}");
    }
    let headers = [
        ("if-none-match", "\"stale\""),
        ("if-modified-since", LAST_MODIFIED),
    ];
    assert_eq!(
        get(&files, "/hello.txt", &headers).await?.status,
        StatusCode::OK
    );
    Ok(())
}

#[tokio::test]
async fn if_match_and_if_unmodified_since_give_412() -> TestResult {
    let site = Site::new()?;
    let files = site.default_route()?;
    let etag = etag_of(LEN);
    let cases: [(&[(&'static str, &str)], StatusCode); 7] = [
        (
            &[("if-match", "\"stale\"")],
            StatusCode::PRECONDITION_FAILED,
        ),
        (
            &[("if-match", &format!("W/{etag}"))],
            StatusCode::PRECONDITION_FAILED,
        ),
        (&[("if-match", &etag)], StatusCode::OK),
        (&[("if-match", "*")], StatusCode::OK),
        (
            &[("if-unmodified-since", "Tue, 14 Nov 2023 22:13:19 GMT")],
            StatusCode::PRECONDITION_FAILED,
        ),
        (&[("if-unmodified-since", LAST_MODIFIED)], StatusCode::OK),
        // If-Match is evaluated first and, when present, If-Unmodified-Since is not.
        (
            &[
                ("if-match", &etag),
                ("if-unmodified-since", "Mon, 01 Jan 2001 00:00:00 GMT"),
            ],
            StatusCode::OK,
        ),
    ];
    for (headers, expected) in cases {
        let reply = get(&files, "/hello.txt", headers).await?;
        assert_eq!(reply.status, expected, "{headers:?}");
        if expected == StatusCode::PRECONDITION_FAILED {
            assert!(reply.body.is_empty());
        }
    }
    // 412 wins over 304: If-Match fails before If-None-Match is looked at.
    let headers = [("if-match", "\"stale\""), ("if-none-match", "*")];
    assert_eq!(
        get(&files, "/hello.txt", &headers).await?.status,
        StatusCode::PRECONDITION_FAILED
    );
    Ok(())
}

#[tokio::test]
async fn a_304_skips_the_range() -> TestResult {
    let site = Site::new()?;
    let files = site.default_route()?;
    let etag = etag_of(LEN);
    let headers = [("if-none-match", etag.as_str()), ("range", "bytes=0-1")];
    assert_eq!(
        get(&files, "/hello.txt", &headers).await?.status,
        StatusCode::NOT_MODIFIED
    );
    Ok(())
}
