//! Protocol details of the reverse proxy: timeouts around a slow upload, multi-line forwarding
//! fields, `TE: trailers`, `OPTIONS *`, and an HTTP/2 client's empty body.

use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{Value, json};
use sluice_testkit::{Offer, client};

use crate::proxy::{proxy_in_front, serve_fn};

/// An upstream that answers with what it received: method, request target, version, headers
/// (every line), whether the body was chunked, and its length.
async fn echo_upstream() -> std::net::SocketAddr {
    let (addr, _) = serve_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
        let (parts, body) = req.into_parts();
        let body = body.collect().await.map(|c| c.to_bytes());
        let headers: Vec<(String, String)> = parts
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
            .collect();
        let info = json!({
            "method": parts.method.as_str(),
            "target": parts.uri.to_string(),
            "version": format!("{:?}", parts.version),
            "headers": headers,
            "body": body.as_ref().map(|b| b.len()).ok(),
        });
        hyper::Response::new(sluice_core::Body::from(info.to_string()))
    })
    .await;
    addr
}

/// Every value of `name` the upstream received, one per line.
fn values(info: &Value, name: &str) -> Vec<String> {
    info["headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p[0] == name)
        .map(|p| p[1].as_str().unwrap().to_string())
        .collect()
}

async fn json_of(resp: sluice_testkit::reqwest::Response) -> Value {
    assert_eq!(resp.status(), 200);
    serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap()
}

#[tokio::test]
async fn a_slow_upload_is_not_cut_off_by_the_response_timeout() {
    let upstream = echo_upstream().await;
    let server = proxy_in_front(&format!(
        "servers = [\"{upstream}\"]\n[upstreams.backend.timeouts]\nresponse_header = \"300ms\"\nidle = \"5s\""
    ))
    .await;
    // Six chunks 150 ms apart: the upload takes 750 ms, well past the 300 ms response timeout,
    // yet never pauses for longer than the idle timeout.
    let upload = futures_util::stream::unfold(0, |i| async move {
        if i == 6 {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(150)).await; // the client's pace
        Some((Ok::<_, std::io::Error>(vec![b'u'; 1000]), i + 1))
    });
    let resp = client(Offer::Http1)
        .post(server.url("/upload"))
        .body(sluice_testkit::reqwest::Body::wrap_stream(upload))
        .send()
        .await
        .unwrap();
    let info = json_of(resp).await;
    assert_eq!(info["body"], 6000);
}

#[tokio::test]
async fn the_response_timeout_still_runs_after_the_upload() {
    // Reads the whole body, then never answers.
    let (addr, _) = serve_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
        let _ = req.into_body().collect().await;
        std::future::pending::<()>().await;
        hyper::Response::new(sluice_core::Body::Empty)
    })
    .await;
    let server = proxy_in_front(&format!(
        "servers = [\"{addr}\"]\n[upstreams.backend.timeouts]\nresponse_header = \"300ms\"\nidle = \"5s\""
    ))
    .await;
    let started = std::time::Instant::now();
    let resp = client(Offer::Http1)
        .post(server.url("/"))
        .body(vec![b'x'; 100_000])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 504);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_upstream_that_stops_reading_the_upload_is_a_504() {
    // Answers nothing and reads nothing: the upload stalls on the upstream's side.
    let (addr, _) = serve_fn(|_req: hyper::Request<hyper::body::Incoming>| async move {
        std::future::pending::<()>().await;
        hyper::Response::new(sluice_core::Body::Empty)
    })
    .await;
    let upstream = format!(
        "servers = [\"{addr}\"]\n[upstreams.backend.timeouts]\nresponse_header = \"60s\"\nidle = \"500ms\""
    );
    // The upload is over the default max_body_size (10 MiB).
    let route = "proxy = { upstream = \"backend\" }\nmax_body_size = 0";
    let server = sluice_testkit::start_toml(&crate::proxy::proxy_toml(&upstream, route)).await;
    let started = std::time::Instant::now();
    // Far more than the socket buffers hold, so the upload cannot complete.
    let resp = client(Offer::Http1)
        .post(server.url("/"))
        .body(vec![b'x'; 64 << 20])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 504);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn forwarding_fields_on_several_lines_are_kept_whole() {
    let upstream = echo_upstream().await;
    // The client must be a trusted proxy for its X-Forwarded-For to be kept (see paths.rs).
    let server = sluice_testkit::start_toml(&format!(
        r#"
        [log]
        access = "off"
        [server]
        trusted_proxies = ["127.0.0.1"]
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        proxy = {{ upstream = "backend" }}
        [upstreams.backend]
        servers = ["{upstream}"]
        "#
    ))
    .await;
    // reqwest sends each added value as its own field line.
    let resp = client(Offer::Http1)
        .get(server.url("/"))
        .header("x-forwarded-for", "10.0.0.1")
        .header("x-forwarded-for", "10.0.0.2, 10.0.0.3")
        .header("via", "1.1 edge")
        .header("via", "1.0 old")
        .send()
        .await
        .unwrap();
    let info = json_of(resp).await;
    assert_eq!(
        values(&info, "x-forwarded-for"),
        ["10.0.0.1, 10.0.0.2, 10.0.0.3, 127.0.0.1"]
    );
    assert_eq!(values(&info, "via"), ["1.1 edge, 1.0 old, 1.1 sluice"]);
}

#[tokio::test]
async fn te_trailers_is_forwarded_and_other_te_values_are_not() {
    let upstream = echo_upstream().await;
    for http2 in [false, true] {
        let server = proxy_in_front(&format!("servers = [\"{upstream}\"]\nhttp2 = {http2}")).await;
        let http = client(Offer::Http1);
        let send = |te: &'static str| {
            http.get(server.url("/"))
                .header("te", te)
                .header("connection", "te")
                .send()
        };
        let info = json_of(send("gzip, trailers;q=1").await.unwrap()).await;
        let expected_version = if http2 { "HTTP/2.0" } else { "HTTP/1.1" };
        assert_eq!(info["version"], expected_version);
        assert_eq!(values(&info, "te"), ["trailers"], "http2 = {http2}: {info}");
        if !http2 {
            // The sender of TE names it in Connection (RFC 9110 §10.1.4).
            assert_eq!(values(&info, "connection"), ["te"], "{info}");
        }
        let info = json_of(send("gzip").await.unwrap()).await;
        assert!(values(&info, "te").is_empty(), "http2 = {http2}: {info}");
    }
}

/// Send `OPTIONS *` over HTTP/1.1 through a proxy to an echo upstream configured with
/// `upstream_extra`; what the upstream saw, after checking the 200.
async fn options_asterisk_seen_by_upstream(upstream_extra: &str) -> Value {
    let upstream = echo_upstream().await;
    let server = proxy_in_front(&format!("servers = [\"{upstream}\"]\n{upstream_extra}")).await;
    let reply = sluice_testkit::raw_exchange(
        server.first_addr(),
        b"OPTIONS * HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
        1 << 16,
    )
    .await;
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let body = &reply[reply.find("\r\n\r\n").unwrap() + 4..];
    let info: Value = serde_json::from_str(body).unwrap();
    assert_eq!(info["method"], "OPTIONS");
    info
}

#[tokio::test]
async fn options_asterisk_is_forwarded_as_such() {
    let info = options_asterisk_seen_by_upstream("").await;
    assert_eq!(info["target"], "*");
}

#[tokio::test]
async fn options_asterisk_reaches_an_http2_upstream_as_path_asterisk() {
    let info = options_asterisk_seen_by_upstream("http2 = true").await;
    assert_eq!(info["version"], "HTTP/2.0");
    // hyper's server shows an HTTP/2 target with its authority.
    assert!(info["target"].as_str().unwrap().ends_with('*'), "{info}");
}

#[tokio::test]
async fn an_http2_request_ending_in_an_empty_data_frame_goes_upstream_without_a_body() {
    let upstream = echo_upstream().await;
    let server = proxy_in_front(&format!("servers = [\"{upstream}\"]")).await;
    let http = client(Offer::Http2);
    for method in ["GET", "DELETE", "OPTIONS"] {
        for _ in 0..10 {
            // An empty stream body: hyper sends HEADERS, then an empty DATA frame with
            // END_STREAM.
            let empty = futures_util::stream::empty::<Result<Vec<u8>, std::io::Error>>();
            let resp = http
                .request(method.parse().unwrap(), server.url("/"))
                .body(sluice_testkit::reqwest::Body::wrap_stream(empty))
                .send()
                .await
                .unwrap();
            let info = json_of(resp).await;
            assert!(values(&info, "transfer-encoding").is_empty(), "{info}");
            let length = values(&info, "content-length");
            assert!(length.is_empty() || length == ["0"], "{info}");
            assert_eq!(info["body"], 0);
        }
    }
}

#[tokio::test]
async fn an_http2_body_without_a_length_still_streams_whole() {
    let upstream = echo_upstream().await;
    let server = proxy_in_front(&format!("servers = [\"{upstream}\"]")).await;
    let chunks =
        futures_util::stream::iter((0..4).map(|_| Ok::<_, std::io::Error>(vec![b'b'; 10_000])));
    let resp = client(Offer::Http2)
        .delete(server.url("/"))
        .body(sluice_testkit::reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    let info = json_of(resp).await;
    assert_eq!(info["body"], 40_000);
}

#[tokio::test]
async fn trailers_reach_an_http2_client_from_an_http2_upstream() {
    // A gRPC-like upstream: a data frame, then the status in trailers; it says whether it was
    // asked with `te: trailers`, as gRPC servers require.
    let (addr, _) = serve_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
        let te = req.headers().get("te").cloned();
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        let frames = vec![
            Ok::<_, std::io::Error>(hyper::body::Frame::data(bytes::Bytes::from(format!(
                "te={te:?}"
            )))),
            Ok(hyper::body::Frame::trailers(trailers)),
        ];
        let body = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
        hyper::Response::new(sluice_core::Body::stream(body))
    })
    .await;
    let server = proxy_in_front(&format!("servers = [\"{addr}\"]\nhttp2 = true")).await;

    let h2c = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let request = hyper::Request::post(server.url("/grpc.Service/Call"))
        .header("te", "trailers")
        .header("content-type", "application/grpc")
        .body(http_body_util::Empty::new())
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(10), h2c.request(request))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resp.status(), 200);
    let collected = resp.into_body().collect().await.unwrap();
    let trailers = collected.trailers().cloned();
    assert_eq!(
        String::from_utf8_lossy(&collected.to_bytes()),
        "te=Some(\"trailers\")"
    );
    assert_eq!(
        trailers.as_ref().and_then(|t| t.get("grpc-status")),
        Some(&http::HeaderValue::from_static("0")),
        "{trailers:?}"
    );
}

#[tokio::test]
async fn a_small_request_body_read_whole_before_forwarding_keeps_its_trailers() {
    // Bodies of known length up to 64 KiB are read whole before they go upstream (nginx's
    // request buffering); an HTTP/2 client's trailers after such a body still reach an HTTP/2
    // upstream, and the body arrives byte for byte.
    let (addr, _) = serve_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
        let collected = req.into_body().collect().await.unwrap();
        let trailer = collected
            .trailers()
            .and_then(|t| t.get("x-checksum"))
            .map(|v| v.to_str().unwrap().to_owned());
        let body = collected.to_bytes();
        hyper::Response::new(sluice_core::Body::full(format!(
            "{} bytes, {} 'a', trailer {trailer:?}",
            body.len(),
            body.iter().filter(|b| **b == b'a').count()
        )))
    })
    .await;
    let server = proxy_in_front(&format!("servers = [\"{addr}\"]\nhttp2 = true")).await;

    let h2c = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<sluice_core::Body>();
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-checksum", http::HeaderValue::from_static("abc"));
    let frames = vec![
        Ok::<_, std::io::Error>(hyper::body::Frame::data(bytes::Bytes::from(vec![
            b'a';
            30_000
        ]))),
        Ok(hyper::body::Frame::data(bytes::Bytes::from(vec![
            b'a';
            10_000
        ]))),
        Ok(hyper::body::Frame::trailers(trailers)),
    ];
    let request = hyper::Request::post(server.url("/upload"))
        .header("te", "trailers")
        .header("content-length", "40000")
        .body(sluice_core::Body::stream(http_body_util::StreamBody::new(
            futures_util::stream::iter(frames),
        )))
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(10), h2c.request(request))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        String::from_utf8_lossy(&text),
        "40000 bytes, 40000 'a', trailer Some(\"abc\")"
    );
}
