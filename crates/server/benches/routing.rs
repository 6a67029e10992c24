//! Cost of finding a request's route with 10, 1,000 and 10,000 routes (issue 27): the route
//! index (`pipeline::route_index`) against the linear scan it replaced (every route's host and
//! path tried in file order, the router before issue 27), for routes that share no prefix.
//!
//! `cargo bench -p sluice-server --bench routing -- --warm-up-time 1 --measurement-time 2`
//!
//! Sets:
//! - `prefix`: route i is `path_prefix = "/svc{i}/"`; the request is for the last route (the
//!   linear scan's worst case), the middle one, and a path no route takes (404).
//! - `mixed`: the same routes, each with `methods = ["GET"]` and `headers = { accept = "text/*" }`.
//! - `host`: route i is `host = "site{i}.example"` (the whole site); the request is for the
//!   last host.
//! - `regex`: route i is `path_regex = "^/item{i}/(?P<id>[0-9]+)$"`; request for the last.

// A bench's setup may fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use http::{HeaderMap, Method};
use sluice_config::{
    Action, FixedResponse, HostMatch, MatchInput, Matchers, PathMatch, Route, RouteMatchers,
    ValueMatch,
};
use sluice_server::pipeline::route_index::RouteIndex;

fn route(i: usize, hosts: Vec<HostMatch>, path: PathMatch, matchers: RouteMatchers) -> Route {
    Route {
        name: format!("r{i}"),
        hosts,
        path,
        listeners: Vec::new(),
        matchers,
        access: Default::default(),
        action: Action::Respond(FixedResponse {
            status: http::StatusCode::OK,
            headers: HeaderMap::new(),
            body: bytes::Bytes::new(),
        }),
        compress: None,
        cache: None,
        rate_limit: None,
        body: Default::default(),
        response_headers: None,
        dictionary: None,
    }
}

fn prefix_routes(n: usize, with_matchers: bool) -> Vec<Route> {
    (0..n)
        .map(|i| {
            let mut matchers = RouteMatchers::default();
            if with_matchers {
                matchers.must.methods = Some(vec![Method::GET]);
                matchers.must.headers = vec![(
                    http::HeaderName::from_static("accept"),
                    ValueMatch::Prefix("text/".into()),
                )];
            }
            route(
                i,
                Vec::new(),
                PathMatch::Prefix(format!("/svc{i}/")),
                matchers,
            )
        })
        .collect()
}

fn host_routes(n: usize) -> Vec<Route> {
    (0..n)
        .map(|i| {
            let hosts = vec![HostMatch::Exact(format!("site{i}.example"))];
            route(
                i,
                hosts,
                PathMatch::Prefix("/".into()),
                RouteMatchers::default(),
            )
        })
        .collect()
}

fn regex_routes(n: usize) -> Vec<Route> {
    (0..n)
        .map(|i| {
            let re = regex::Regex::new(&format!("^/item{i}/(?P<id>[0-9]+)$")).unwrap();
            let matchers = RouteMatchers {
                must: Matchers {
                    path_regex: Some(re),
                    ..Default::default()
                },
                not: Matchers::default(),
            };
            route(i, Vec::new(), PathMatch::Prefix("/".into()), matchers)
        })
        .collect()
}

/// The router before issue 27: every route in file order, host and path.
fn linear(routes: &[Route], host: Option<&str>, path: &str) -> Option<usize> {
    routes.iter().position(|r| {
        r.path.matches(path)
            && (r.hosts.is_empty() || host.is_some_and(|h| r.hosts.iter().any(|m| m.matches(h))))
    })
}

fn bench(c: &mut Criterion) {
    let mut headers = HeaderMap::new();
    headers.insert("accept", http::HeaderValue::from_static("text/html"));
    headers.insert("user-agent", http::HeaderValue::from_static("bench/1"));
    let headers = headers;
    let client = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
    let input = |path: &'static str| MatchInput {
        method: &Method::GET,
        headers: &headers,
        query: None,
        client,
        path,
    };
    let mut group = c.benchmark_group("routing");
    for n in [10usize, 1_000, 10_000] {
        let last: &'static str = format!("/svc{}/x/y", n - 1).leak();
        let middle: &'static str = format!("/svc{}/x/y", n / 2).leak();
        let routes = prefix_routes(n, false);
        let index = RouteIndex::new(&routes);
        for (case, path) in [
            ("last", last),
            ("middle", middle),
            ("none", "/nothing/here"),
        ] {
            let found = index.find(Some("a.example"), &input(path));
            assert_eq!(found, linear(&routes, None, path));
            let id = BenchmarkId::new(format!("prefix-{case}/index"), n);
            group.bench_with_input(id, &n, |b, _| {
                b.iter(|| index.find(black_box(Some("a.example")), black_box(&input(path))))
            });
            let id = BenchmarkId::new(format!("prefix-{case}/linear"), n);
            group.bench_with_input(id, &n, |b, _| {
                b.iter(|| {
                    linear(
                        black_box(&routes),
                        black_box(Some("a.example")),
                        black_box(path),
                    )
                })
            });
        }

        let routes = prefix_routes(n, true);
        let index = RouteIndex::new(&routes);
        assert_eq!(index.find(None, &input(last)), Some(n - 1));
        group.bench_with_input(BenchmarkId::new("mixed-last/index", n), &n, |b, _| {
            b.iter(|| index.find(black_box(Some("a.example")), black_box(&input(last))))
        });

        let routes = host_routes(n);
        let index = RouteIndex::new(&routes);
        let host: &'static str = format!("site{}.example", n - 1).leak();
        assert_eq!(index.find(Some(host), &input("/page")), Some(n - 1));
        group.bench_with_input(BenchmarkId::new("host-last/index", n), &n, |b, _| {
            b.iter(|| index.find(black_box(Some(host)), black_box(&input("/page"))))
        });
        group.bench_with_input(BenchmarkId::new("host-last/linear", n), &n, |b, _| {
            b.iter(|| {
                linear(
                    black_box(&routes),
                    black_box(Some(host)),
                    black_box("/page"),
                )
            })
        });

        let routes = regex_routes(n);
        let started = std::time::Instant::now();
        let index = RouteIndex::new(&routes);
        eprintln!("regex index of {n} routes built in {:?}", started.elapsed());
        let path: &'static str = format!("/item{}/42", n - 1).leak();
        assert_eq!(index.find(None, &input(path)), Some(n - 1));
        group.bench_with_input(BenchmarkId::new("regex-last/index", n), &n, |b, _| {
            b.iter(|| index.find(black_box(None), black_box(&input(path))))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
