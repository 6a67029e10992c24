//! A scripted origin for the cache tests: an HTTP/1.1 server on 127.0.0.1 port 0 whose reply per
//! path the test sets and changes while it runs, which counts the requests per path and keeps the
//! last one's head, can hold requests at a gate until the test opens it, and can fail (close the
//! connection without a response, or answer 5xx) instead of being stopped.
//!
//! Scripts and counts are keyed by path without the query. Conditional requests are answered with
//! a 304 only when the reply says so ([`Reply::conditional`]), as a real origin with validators
//! would (RFC 9110 §13.1.2 weak comparison for If-None-Match, which takes precedence over
//! If-Modified-Since, §13.2.2).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::sync::watch;

use super::FAILURE_BOUND;

/// What the origin answers for a path.
#[derive(Clone, Debug)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Bytes,
    conditional: bool,
    /// How long the origin takes to answer (part of the script, as a slow origin).
    delay: std::time::Duration,
    /// Close the connection without a response (this path only; [`Fail`] is every path).
    close: bool,
}

impl Reply {
    /// A 200 with `body` and no header but the ones hyper adds (Date, Content-Length).
    pub fn ok(body: impl Into<Bytes>) -> Self {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: body.into(),
            conditional: false,
            delay: std::time::Duration::ZERO,
            close: false,
        }
    }

    /// Answer after `delay` (a slow origin; the request is counted when it arrives).
    pub fn delay(mut self, delay: std::time::Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Close the connection without answering, for this path only.
    pub fn close(mut self) -> Self {
        self.close = true;
        self
    }

    pub fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    /// Add a header line (several lines of one name are kept).
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    pub fn cache_control(self, value: &str) -> Self {
        self.header("cache-control", value)
    }

    /// Answer If-None-Match matching the `ETag` (or If-Modified-Since not older than the
    /// `Last-Modified`) with a 304 carrying this reply's headers.
    pub fn conditional(mut self) -> Self {
        self.conditional = true;
        self
    }

    fn get(&self, name: &str) -> Option<&str> {
        let found = self
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name));
        found.map(|(_, v)| v.as_str())
    }
}

/// How the origin fails, for every path, while set.
#[derive(Clone, Copy, Debug)]
pub enum Fail {
    /// Close the connection without a response.
    Close,
    /// Answer this status with an empty body.
    Status(u16),
}

/// The head of a request the origin received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: Method,
    pub query: Option<String>,
    pub headers: HeaderMap,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

#[derive(Default)]
struct PathLog {
    requests: usize,
    by_method: HashMap<Method, usize>,
    last: Option<Seen>,
}

#[derive(Default)]
struct Shared {
    /// By `(Some(method), path)` for a method's own script, `(None, path)` for any method.
    replies: Mutex<HashMap<(Option<Method>, String), Reply>>,
    log: Mutex<HashMap<String, PathLog>>,
    /// `false` while closed. A path without an entry is open.
    gates: Mutex<HashMap<String, watch::Sender<bool>>>,
    fail: Mutex<Option<Fail>>,
    /// Bumped after every arrival, for waiters.
    arrivals: watch::Sender<u64>,
}

/// A running scripted origin (it runs until the test's runtime ends).
pub struct Origin {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Origin {
    pub async fn start() -> Origin {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let state = shared.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = state.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let state = state.clone();
                        async move { state.handle(req).await }
                    });
                    // An error is how Fail::Close drops a connection: nothing to report.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Origin { addr, shared }
    }

    /// Answer every method on `path` with `reply` (unless the method has its own).
    pub fn set(&self, path: &str, reply: Reply) {
        let key = (None, path.to_string());
        self.shared.replies.lock().unwrap().insert(key, reply);
    }

    /// Answer `method` on `path` with `reply`.
    pub fn set_for(&self, method: &str, path: &str, reply: Reply) {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let key = (Some(method), path.to_string());
        self.shared.replies.lock().unwrap().insert(key, reply);
    }

    /// Fail every request from now on (`None`: answer again).
    pub fn fail(&self, mode: Option<Fail>) {
        *self.shared.fail.lock().unwrap() = mode;
    }

    /// Requests for `path` so far, any method, counted when they arrive (before any gate).
    pub fn requests(&self, path: &str) -> usize {
        self.shared
            .log
            .lock()
            .unwrap()
            .get(path)
            .map_or(0, |l| l.requests)
    }

    pub fn requests_by(&self, method: &str, path: &str) -> usize {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let log = self.shared.log.lock().unwrap();
        let by_method = log
            .get(path)
            .and_then(|l| l.by_method.get(&method).copied());
        by_method.unwrap_or(0)
    }

    /// The last request for `path`.
    pub fn last(&self, path: &str) -> Seen {
        let log = self.shared.log.lock().unwrap();
        let last = log.get(path).and_then(|l| l.last.clone());
        last.unwrap_or_else(|| panic!("the origin saw no request for {path}"))
    }

    /// From now on, requests for `path` wait until [`Origin::open_gate`].
    pub fn close_gate(&self, path: &str) {
        let mut gates = self.shared.gates.lock().unwrap();
        let gate = gates
            .entry(path.to_string())
            .or_insert_with(|| watch::channel(false).0);
        gate.send_replace(false);
    }

    /// Let every held and future request for `path` through.
    pub fn open_gate(&self, path: &str) {
        if let Some(gate) = self.shared.gates.lock().unwrap().get(path) {
            gate.send_replace(true);
        }
    }

    /// Wait until at least `n` requests for `path` have arrived (at the gate, if it is closed).
    pub async fn wait_requests(&self, path: &str, n: usize) {
        let mut arrivals = self.shared.arrivals.subscribe();
        let arrived = arrivals.wait_for(|_| self.requests(path) >= n);
        match tokio::time::timeout(FAILURE_BOUND, arrived).await {
            Ok(result) => drop(result.unwrap()),
            Err(_) => panic!("{} of {n} requests for {path} arrived", self.requests(path)),
        }
    }
}

type Answer = Result<Response<Full<Bytes>>, std::io::Error>;

impl Shared {
    async fn handle(&self, req: Request<Incoming>) -> Answer {
        let path = req.uri().path().to_string();
        let seen = Seen {
            method: req.method().clone(),
            query: req.uri().query().map(String::from),
            headers: req.headers().clone(),
        };
        self.record(&path, seen.clone());
        let gate = self.gates.lock().unwrap().get(&path).map(|g| g.subscribe());
        if let Some(mut gate) = gate {
            // The test bounds how long it keeps a gate closed; a dropped sender means it ended.
            let _ = gate.wait_for(|open| *open).await;
        }
        // The script is read after the gate, so a test can change it while requests are held.
        match *self.fail.lock().unwrap() {
            Some(Fail::Close) => return Err(std::io::Error::other("scripted failure")),
            Some(Fail::Status(status)) => return Ok(respond(status, &[], Bytes::new())),
            None => {}
        }
        let reply = {
            let replies = self.replies.lock().unwrap();
            let own = replies.get(&(Some(seen.method.clone()), path.clone()));
            own.or_else(|| replies.get(&(None, path.clone()))).cloned()
        };
        let Some(reply) = reply else {
            return Ok(respond(
                404,
                &[],
                Bytes::from(format!("no script for {path}")),
            ));
        };
        if !reply.delay.is_zero() {
            // The scripted origin's own slowness, not a synchronisation.
            tokio::time::sleep(reply.delay).await;
        }
        if reply.close {
            return Err(std::io::Error::other("scripted close"));
        }
        let safe = seen.method == Method::GET || seen.method == Method::HEAD;
        if reply.conditional && safe && not_modified(&reply, &seen.headers) {
            return Ok(respond(304, &reply.headers, Bytes::new()));
        }
        Ok(respond(reply.status, &reply.headers, reply.body))
    }

    fn record(&self, path: &str, seen: Seen) {
        {
            let mut log = self.log.lock().unwrap();
            let entry = log.entry(path.to_string()).or_default();
            entry.requests += 1;
            *entry.by_method.entry(seen.method.clone()).or_default() += 1;
            entry.last = Some(seen);
        }
        self.arrivals.send_modify(|n| *n += 1);
    }
}

fn respond(status: u16, headers: &[(String, String)], body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap();
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).unwrap();
        response.headers_mut().append(name, value.parse().unwrap());
    }
    response
}

/// RFC 9110 §13.1.2 and §13.1.3, evaluated in the order of §13.2.2.
fn not_modified(reply: &Reply, request: &HeaderMap) -> bool {
    let header = |name: &str| request.get(name).and_then(|v| v.to_str().ok());
    if let Some(list) = header("if-none-match") {
        let Some(etag) = reply.get("etag") else {
            return false;
        };
        let opaque = |tag: &str| tag.trim().trim_start_matches("W/").to_string();
        return list
            .split(',')
            .any(|t| t.trim() == "*" || opaque(t) == opaque(etag));
    }
    let since = header("if-modified-since").and_then(|v| httpdate::parse_http_date(v).ok());
    let modified = reply.get("last-modified");
    let modified = modified.and_then(|v| httpdate::parse_http_date(v).ok());
    matches!((since, modified), (Some(since), Some(modified)) if modified <= since)
}

/// The origin itself, without sluice: scripts, counts, conditionals, the gate and failures.
#[tokio::test]
async fn the_scripted_origin_does_what_the_tests_rely_on() {
    let origin = Origin::start().await;
    let url = |path: &str| format!("http://{}{path}", origin.addr);
    let http = sluice_testkit::client(sluice_testkit::Offer::Http1);
    origin.set(
        "/a",
        Reply::ok("one").header("etag", "\"v1\"").conditional(),
    );
    origin.set_for("POST", "/a", Reply::ok("posted").status(201));

    let resp = http.get(url("/a?x=1")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["etag"], "\"v1\"");
    assert_eq!(resp.text().await.unwrap(), "one");
    let resp = http
        .get(url("/a"))
        .header("if-none-match", "W/\"v1\"")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 304);
    assert_eq!(resp.headers()["etag"], "\"v1\"");
    assert!(resp.headers().get("content-length").is_none());
    let resp = http.post(url("/a")).send().await.unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(
        (origin.requests("/a"), origin.requests_by("GET", "/a")),
        (3, 2)
    );
    assert_eq!(origin.last("/a").method, Method::POST);
    assert_eq!(origin.requests("/missing"), 0);

    origin.close_gate("/a");
    let held = tokio::spawn(http.get(url("/a")).header("x-mark", "held").send());
    origin.wait_requests("/a", 4).await;
    assert_eq!(origin.last("/a").header("x-mark"), Some("held"));
    assert!(!held.is_finished());
    origin.set("/a", Reply::ok("two"));
    origin.open_gate("/a");
    assert_eq!(held.await.unwrap().unwrap().text().await.unwrap(), "two");

    origin.fail(Some(Fail::Status(503)));
    assert_eq!(http.get(url("/a")).send().await.unwrap().status(), 503);
    origin.fail(Some(Fail::Close));
    let reply =
        sluice_testkit::raw_exchange(origin.addr, b"GET /a HTTP/1.1\r\nHost: o\r\n\r\n", 1 << 16);
    assert!(
        reply.await.is_empty(),
        "a failing origin must answer nothing"
    );
    origin.fail(None);
    assert_eq!(http.get(url("/a")).send().await.unwrap().status(), 200);
    assert_eq!(origin.requests("/a"), 7);
}
