//! Unit tests for the variant store (made once per key, collapsed, bounded) and for the
//! responses served from it (headers of the fly plus a length, HEAD, what does not qualify).

#![allow(clippy::unwrap_used)]

use http::{HeaderMap, StatusCode};
use sluice_config::Compress;

use super::*;
use crate::features::compress::{AcceptEncoding, Outcome};

fn id(n: u64) -> ContentId {
    ContentId([1, n, 20_000, 1_700_000_000, 0, 1_700_000_000, 0])
}

fn html(len: usize) -> Bytes {
    let row = b"<p class=\"row\">compress once, serve many</p>\n";
    Bytes::from(row.iter().copied().cycle().take(len).collect::<Vec<u8>>())
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(data), &mut out).unwrap();
    out
}

#[tokio::test]
async fn a_variant_is_made_once_per_id_and_algorithm() {
    let store = Variants::new(STORE_BYTES).unwrap();
    let source = html(20_000);
    let key = Key {
        id: id(1),
        algorithm: Compression::GZIP,
    };
    assert!(store.peek(&key).is_none());

    let (made, got) = store.get_or_make(key, source.clone(), None).await.unwrap();
    assert_eq!(got, Got::Made);
    assert_eq!(gunzip(&made), source);
    let (again, got) = store.get_or_make(key, source.clone(), None).await.unwrap();
    assert_eq!((got, &again), (Got::Stored, &made));
    assert_eq!(store.peek(&key), Some(made));

    // Another coding of the same file, and a new version of it, are variants of their own.
    for other in [
        Key {
            algorithm: Compression::BR,
            ..key
        },
        Key { id: id(2), ..key },
    ] {
        let (_, got) = store
            .get_or_make(other, source.clone(), None)
            .await
            .unwrap();
        assert_eq!(got, Got::Made, "{other:?}");
    }
}

#[tokio::test]
async fn concurrent_first_requests_compress_once() {
    let store = Variants::new(STORE_BYTES).unwrap();
    // Above the inline limit: the maker awaits the blocking pool while the others arrive.
    let source = html(200_000);
    let key = Key {
        id: id(1),
        algorithm: Compression::GZIP,
    };
    let requests = (0..8).map(|_| store.get_or_make(key, source.clone(), None));
    let results = futures_util::future::join_all(requests).await;
    let made = results
        .iter()
        .filter(|r| matches!(r, Ok((_, Got::Made))))
        .count();
    assert_eq!(made, 1);
    for result in results {
        assert_eq!(gunzip(&result.unwrap().0), source);
    }
}

#[tokio::test]
async fn the_budget_bounds_the_store() {
    let budget = 64 * 1024;
    let store = Variants::new(budget).unwrap();
    for n in 0..200 {
        let key = Key {
            id: id(n),
            algorithm: Compression::ZSTD,
        };
        // Noise: each variant weighs about its 4 KiB, so 200 of them overflow the budget.
        let mut seed = n as u32 + 1;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (seed >> 16) as u8
            })
            .collect();
        store.get_or_make(key, noise.into(), None).await.unwrap();
    }
    assert!(store.weight() <= budget, "{}", store.weight());
    assert!(Variants::new(0).is_none());
}

#[tokio::test]
async fn the_largest_variant_fits_the_default_store() {
    let store = Variants::new(STORE_BYTES).unwrap();
    // At most 16 shards (quick_cache keeps 32 estimated items per shard), whatever the cores.
    assert!(
        store.shard_capacity() >= 1024 * 1024,
        "{}",
        store.shard_capacity()
    );
    // The largest body in memory (256 KiB) that does not compress at all.
    let mut seed = 7u32;
    let noise: Vec<u8> = (0..256 * 1024)
        .map(|_| {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (seed >> 16) as u8
        })
        .collect();
    let key = Key {
        id: id(1),
        algorithm: Compression::GZIP,
    };
    store.get_or_make(key, noise.into(), None).await.unwrap();
    assert!(
        store.peek(&key).is_some(),
        "an overweight variant is never stored"
    );
}

#[test]
fn only_cheap_compressions_run_on_the_worker_thread() {
    assert_eq!(inline_limit(Compression::GZIP, None), 64 * 1024);
    assert_eq!(inline_limit(Compression::GZIP, Some(1)), 64 * 1024);
    assert_eq!(inline_limit(Compression::ZSTD, Some(3)), 64 * 1024);
    assert_eq!(inline_limit(Compression::BR, None), 16 * 1024);
    assert_eq!(inline_limit(Compression::GZIP, Some(6)), 0);
    assert_eq!(inline_limit(Compression::BR, Some(11)), 0);
    assert_eq!(inline_limit(Compression::ZSTD, Some(19)), 0);
}

// Through `RouteCompression::apply`, as the pipeline calls it.

/// A static route's compression (with a store unless `store` is 0), and its metrics.
fn route(
    store: u64,
) -> (
    RouteCompression,
    std::sync::Arc<crate::shared::metrics::Metrics>,
) {
    let metrics = crate::shared::metrics::Metrics::new();
    let route = RouteCompression::new(&Compress::default(), metrics.compress("files"));
    (route.keep_variants(store), metrics)
}

/// What the static handler answers for a 20 KB page: `body` (`None` for a HEAD), its validators
/// and length, and its identity.
fn page(id: ContentId, body: Option<Bytes>) -> Response<Body> {
    let mut response = Response::new(body.map_or(Body::Empty, Body::full));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(20_000));
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(header::ETAG, HeaderValue::from_static("\"65f1-4e20\""));
    response.extensions_mut().insert(id);
    response
}

fn gzip() -> AcceptEncoding {
    let mut headers = HeaderMap::new();
    headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
    AcceptEncoding::of(&headers)
}

async fn body_of(response: Response<Body>) -> Bytes {
    use http_body_util::BodyExt;
    response.into_body().collect().await.unwrap().to_bytes()
}

/// A variants counter of route `files` for gzip.
fn counted(metrics: &crate::shared::metrics::Metrics, name: &str) -> f64 {
    let series = format!("{name}_total{{route=\"files\",algorithm=\"gzip\"}} ");
    let text = metrics.render();
    let line = text.lines().find(|l| l.starts_with(&series)).unwrap();
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_marked_page_is_compressed_once_and_sent_with_its_length() {
    let (route, metrics) = route(STORE_BYTES);
    let source = html(20_000);
    let mut sent = Vec::new();
    for _ in 0..3 {
        let mut response = page(id(1), Some(source.clone()));
        let outcome = route.apply(&Method::GET, &gzip(), &mut response).await;
        let expected = Outcome {
            decision: "compressed",
            encoding: Some("gzip"),
        };
        assert_eq!(outcome, expected);
        let h = response.headers();
        // The headers of the fly, and a length.
        assert_eq!(h[header::CONTENT_ENCODING], "gzip");
        assert_eq!(h[header::VARY], "Accept-Encoding");
        assert_eq!(h[header::ETAG], "W/\"65f1-4e20\"");
        assert!(!h.contains_key(header::ACCEPT_RANGES));
        let length: usize = h[header::CONTENT_LENGTH].to_str().unwrap().parse().unwrap();
        assert!(matches!(response.body(), Body::Full(_)));
        let body = body_of(response).await;
        assert_eq!(body.len(), length);
        assert_eq!(gunzip(&body), source);
        sent.push(body);
    }
    assert!(sent.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(counted(&metrics, "sluice_compress_variants_made"), 1.0);
    assert_eq!(counted(&metrics, "sluice_compress_variant_hits"), 2.0);
    let bytes_in = "sluice_compress_bytes_in_total{algorithm=\"gzip\"} 20000";
    assert!(
        metrics.render().contains(bytes_in),
        "one compression's bytes"
    );
}

#[tokio::test]
async fn head_sends_the_length_of_a_stored_variant_and_makes_none() {
    let (route, metrics) = route(STORE_BYTES);
    let head = || async {
        let mut response = page(id(1), None);
        route.apply(&Method::HEAD, &gzip(), &mut response).await;
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip");
        assert!(matches!(response.body(), Body::Empty));
        response.headers().get(header::CONTENT_LENGTH).cloned()
    };
    // Before any GET: the length is unknown, so none is sent (as on the fly).
    assert_eq!(head().await, None);
    assert_eq!(counted(&metrics, "sluice_compress_variants_made"), 0.0);

    let mut get = page(id(1), Some(html(20_000)));
    route.apply(&Method::GET, &gzip(), &mut get).await;
    let length = get.headers()[header::CONTENT_LENGTH].clone();
    assert_eq!(head().await, Some(length));
    assert_eq!(counted(&metrics, "sluice_compress_variant_hits"), 0.0);
}

#[tokio::test]
async fn unmarked_responses_ranges_and_routes_without_a_store_stream_as_before() {
    let source = html(20_000);
    let unmarked = || {
        let mut response = page(id(1), Some(source.clone()));
        response.extensions_mut().remove::<ContentId>();
        response
    };
    let mut partial = page(id(1), Some(source.slice(0..1000)));
    *partial.status_mut() = StatusCode::PARTIAL_CONTENT;
    for (store, mut response) in [
        (STORE_BYTES, unmarked()),
        (0, page(id(1), Some(source.clone()))),
        (STORE_BYTES, partial),
    ] {
        let (route, metrics) = route(store);
        let outcome = route.apply(&Method::GET, &gzip(), &mut response).await;
        assert_eq!(counted(&metrics, "sluice_compress_variants_made"), 0.0);
        if response.status() == StatusCode::PARTIAL_CONTENT {
            // 206 is never compressed: the ranges index the identity bytes.
            assert_eq!(outcome.decision, "range");
            continue;
        }
        assert!(!response.headers().contains_key(header::CONTENT_LENGTH));
        assert!(matches!(response.body(), Body::Stream(_)));
        assert_eq!(gunzip(&body_of(response).await), source);
    }
}
