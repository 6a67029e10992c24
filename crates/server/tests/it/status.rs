//! The live status page of the admin listener: `/status.json` validated against
//! `docs/status.schema.json` under a load with several routes, a server marked down and a cache
//! zone with hits (every count is what the test sent), and `/status` in headless Chromium while
//! a load runs: the page refreshes its own figures (several samples, a rate), and two reads
//! show the counts moving.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_testkit::{Offer, TestServer, client, external, start_origin, start_toml};

const SCHEMA: &str = include_str!("../../../../docs/status.schema.json");

fn config(origin: std::net::SocketAddr) -> String {
    format!(
        r#"
        [log]
        access = "off"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        name = "main"
        address = "127.0.0.1:0"
        [caches.pages]
        [[routes]]
        name = "api"
        path = "/hello"
        proxy = {{ upstream = "backend" }}
        compress = {{}}
        [[routes]]
        name = "cached"
        path = "/what-date-is-it"
        proxy = {{ upstream = "backend" }}
        cache = {{ zone = "pages", valid = {{ "200" = "1h" }} }}
        [[routes]]
        name = "fixed"
        path = "/fixed"
        respond = {{ status = 503, body = "no" }}
        [upstreams.backend]
        servers = ["{origin}", {{ address = "127.0.0.1:9", down = true }}]
        "#
    )
}

async fn status_json(server: &TestServer) -> Value {
    let admin = server.running().admin_address().unwrap();
    let response = client(Offer::Http1)
        .get(format!("http://{admin}/status.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(response.headers()["cache-control"], "no-store");
    serde_json::from_str(&response.text().await.unwrap()).unwrap()
}

fn find<'a>(list: &'a Value, key: &str, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|v| v[key] == name)
        .unwrap_or_else(|| panic!("no {key} = {name} in {list:#}"))
}

fn validate(doc: &Value) {
    let schema: Value = serde_json::from_str(SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{doc:#}");
}

/// Poll `/status.json` until `done` holds (a response's metrics are recorded as its body ends,
/// which can be a moment after the client has read it), or fail at the deadline.
async fn status_when(server: &TestServer, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let doc = status_json(server).await;
        if done(&doc) {
            return doc;
        }
        assert!(Instant::now() < deadline, "condition never held: {doc:#}");
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn status_json_matches_its_schema_and_the_load_sent() {
    let origin = start_origin(None).await;
    let server = start_toml(&config(origin.addr)).await;
    let http = client(Offer::Http1);
    let get = |path: &str| {
        let request = http.get(server.url(path));
        async move {
            let response = request.send().await.unwrap();
            let status = response.status();
            let _ = response.bytes().await.unwrap();
            status.as_u16()
        }
    };
    for _ in 0..6 {
        assert_eq!(get("/hello").await, 200);
    }
    for _ in 0..5 {
        assert_eq!(get("/what-date-is-it").await, 200);
    }
    for _ in 0..3 {
        assert_eq!(get("/fixed").await, 503);
    }
    for _ in 0..2 {
        assert_eq!(get("/nowhere").await, 404);
    }

    let doc = status_when(&server, |doc| {
        let total: u64 = doc["routes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["requests"].as_u64().unwrap())
            .sum();
        total == 16
    })
    .await;
    validate(&doc);
    assert_eq!(doc["schema"], "sluice-status/1");

    let api = find(&doc["routes"], "name", "api");
    assert_eq!(api["requests"], 6);
    assert_eq!(api["status"]["2xx"], 6);
    assert_eq!(api["latency"]["count"], 6);
    assert!(api["latency"]["p50"].as_f64().unwrap() > 0.0, "{api}");
    assert!(api["response_bytes"].as_u64().unwrap() > 0);
    let cached = find(&doc["routes"], "name", "cached");
    assert_eq!(cached["status"]["2xx"], 5);
    let fixed = find(&doc["routes"], "name", "fixed");
    assert_eq!(fixed["status"]["5xx"], 3);
    assert_eq!(fixed["status"]["2xx"], 0);
    let unmatched = find(&doc["routes"], "name", "(unmatched)");
    assert_eq!(unmatched["status"]["4xx"], 2);

    // One miss went upstream, four hits did not: 6 + 1 attempts on the live server, none on
    // the one marked down.
    let backend = find(&doc["upstreams"], "name", "backend");
    let live = find(&backend["servers"], "server", &origin.addr.to_string());
    assert_eq!(live["attempts"]["ok"], 7, "{backend:#}");
    assert_eq!(live["available"], true);
    assert_eq!(live["passive_out"], false);
    assert_eq!(live["active_health"], Value::Null);
    assert_eq!(live["in_flight"], 0);
    assert_eq!(live["response_latency"]["count"], 7);
    assert!(live["connections"].as_u64().unwrap() >= 1, "{live}");
    let down = find(&backend["servers"], "server", "127.0.0.1:9");
    assert_eq!(down["down"], true);
    assert_eq!(down["available"], false);
    let attempts: u64 = down["attempts"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(attempts, 0);

    let zone = find(&doc["cache_zones"], "name", "pages");
    assert_eq!(zone["status"]["miss"], 1, "{zone:#}");
    assert_eq!(zone["status"]["hit"], 4);
    assert_eq!(zone["requests"], 5);
    assert_eq!(zone["hit_ratio"], 0.8);
    assert!(zone["objects"].as_u64().unwrap() >= 1);
    assert!(zone["bytes"].as_u64().unwrap() > 0);
    assert_eq!(zone["shared"], Value::Null);

    let main = find(&doc["listeners"], "name", "main");
    assert_eq!(main["requests_by_protocol"]["http/1.1"], 16);
    assert_eq!(main["requests_by_protocol"]["h2"], 0);
    assert_eq!(
        main["address"],
        server.running().address("main").unwrap().to_string()
    );
    assert!(main["connections_total"].as_u64().unwrap() >= 1);
    assert!(
        find(&doc["compression"]["routes"], "route", "api")["responses"]
            .as_object()
            .is_some()
    );
    assert_eq!(doc["config"]["last_reload"], Value::Null);
    assert_eq!(doc["certificates"], serde_json::json!([]));
}

/// A reload shows in `config.last_reload` (refused, then put in force), and a TLS listener's
/// certificate with its expiry and the `renewal` field ACME fills.
#[tokio::test]
async fn status_json_shows_reloads_and_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let cert = sluice_server::net::cert::generate(&["status.test".to_owned()]).unwrap();
    let written = sluice_server::net::cert::write_files(&cert, &dir.path().join("tls")).unwrap();
    let toml = |extra: &str| {
        format!(
            r#"
            [log]
            access = "off"
            [admin]
            address = "127.0.0.1:0"
            [[listeners]]
            name = "secure"
            address = "127.0.0.1:0"
            tls = {{ cert = "{}", key = "{}" }}
            [[routes]]
            respond = {{ status = 200, body = "ok" }}
            {extra}
            "#,
            written.cert.display(),
            written.key.display()
        )
    };
    let server = sluice_testkit::start_toml_in(dir.path(), &toml("")).await;
    let doc = status_json(&server).await;
    validate(&doc);
    let certificate = find(&doc["certificates"], "listener", "secure");
    assert_eq!(certificate["source"], "file");
    assert_eq!(certificate["renewal"], Value::Null);
    assert_eq!(certificate["error"], Value::Null);
    assert!(
        certificate["names"]
            .as_array()
            .unwrap()
            .contains(&Value::from("status.test")),
        "{certificate:#}"
    );
    let expires_in = certificate["expires_in_seconds"].as_i64().unwrap();
    assert!(expires_in > 0, "{certificate:#}");
    assert!(
        certificate["not_after"].as_i64().unwrap() > certificate["not_before"].as_i64().unwrap()
    );
    let loaded_at = doc["config"]["loaded_at"].as_f64().unwrap();

    // A config that cannot be put in force (a second listener on a port in use): refused,
    // recorded, and the load time stays.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let path = dir.path().join("sluice.toml");
    let broken = sluice_config::parse_str(
        &toml(&format!(
            "[[listeners]]\nname = \"taken\"\naddress = \"127.0.0.1:{port}\""
        )),
        &path,
    )
    .unwrap();
    assert!(server.running().reload(&broken).await.is_err());
    let doc = status_json(&server).await;
    validate(&doc);
    let last = &doc["config"]["last_reload"];
    assert_eq!(last["ok"], false, "{doc:#}");
    assert!(
        last["error"].as_str().unwrap().contains(&port.to_string()),
        "{last}"
    );
    assert_eq!(doc["config"]["loaded_at"].as_f64().unwrap(), loaded_at);

    // A good one: ok, and the load time moves.
    let good = sluice_config::parse_str(&toml(""), &path).unwrap();
    server.running().reload(&good).await.unwrap();
    let doc = status_json(&server).await;
    validate(&doc);
    assert_eq!(doc["config"]["last_reload"]["ok"], true);
    assert_eq!(doc["config"]["last_reload"]["error"], Value::Null);
    assert!(doc["config"]["loaded_at"].as_f64().unwrap() >= loaded_at);
}

/// Run Chromium on `url` (virtual time `budget_ms`), returning the DOM.
async fn chromium_dom(
    chromium: &std::path::Path,
    url: &str,
    budget_ms: u32,
    extra: &[String],
) -> String {
    let profile = tempfile::tempdir().unwrap();
    // The testkit's one launcher: --headless --no-sandbox, this fresh profile,
    // --disable-background-networking and
    // --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost".
    let mut cmd = sluice_testkit::browser::headless(chromium, profile.path(), 60);
    cmd.arg(format!("--virtual-time-budget={budget_ms}"))
        .args(extra)
        .arg(url);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        dom.contains("id=\"samples\""),
        "no page: {dom}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dom
}

/// The text of the element with `attr` (e.g. `id="samples"`) in `dom`.
fn text_of(dom: &str, attr: &str) -> String {
    let start = dom
        .find(attr)
        .unwrap_or_else(|| panic!("no {attr} in {dom}"));
    let rest = &dom[start..];
    let rest = &rest[rest.find('>').unwrap() + 1..];
    rest[..rest.find('<').unwrap()].to_string()
}

fn number(text: &str) -> f64 {
    text.replace(',', "")
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {text:?}"))
}

#[tokio::test]
async fn chromium_shows_live_figures_while_a_load_runs() {
    let Some(chromium) = external::require("chromium", "apt-get install chromium") else {
        return;
    };
    let origin = start_origin(None).await;
    let server = Arc::new(start_toml(&config(origin.addr)).await);
    // The load: two clients asking in turn until told to stop (at most 200,000 requests).
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let mut load = Vec::new();
    for path in ["/hello", "/what-date-is-it"] {
        let (stop, sent, url) = (stop.clone(), sent.clone(), server.url(path));
        load.push(tokio::spawn(async move {
            let http = client(Offer::Http1);
            while !stop.load(Ordering::Relaxed) && sent.fetch_add(1, Ordering::Relaxed) < 200_000 {
                let response = http.get(&url).send().await.unwrap();
                let _ = response.bytes().await.unwrap();
            }
        }));
    }
    let admin = server.running().admin_address().unwrap();
    let url = format!("http://{admin}/status");

    let first = chromium_dom(&chromium, &url, 5_000, &[]).await;
    // Refreshed in place: several samples in one page load, and a rate between two of them.
    assert!(number(&text_of(&first, "id=\"samples\"")) >= 2.0, "{first}");
    assert_eq!(text_of(&first, "id=\"state\""), "live", "{first}");
    assert_ne!(
        text_of(&first, "data-key=\"route-rate:api\""),
        "-",
        "{first}"
    );
    let first_api = number(&text_of(&first, "data-key=\"route-requests:api\""));
    assert!(first_api > 0.0, "{first}");
    assert!(first.contains("pages"), "{first}");

    // Let the load pass what the first read showed, then read again: the figures moved.
    status_when(&server, |doc| {
        find(&doc["routes"], "name", "api")["requests"]
            .as_f64()
            .unwrap()
            > first_api
    })
    .await;
    let shot = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/status-screenshot.png"
    );
    let _ = std::fs::remove_file(shot);
    let second = chromium_dom(
        &chromium,
        &url,
        5_000,
        &[
            format!("--screenshot={shot}"),
            "--window-size=1400,1500".to_owned(),
            "--hide-scrollbars".to_owned(),
        ],
    )
    .await;
    let second_api = number(&text_of(&second, "data-key=\"route-requests:api\""));
    assert!(second_api > first_api, "{first_api} then {second_api}");
    assert!(number(&text_of(&second, "id=\"samples\"")) >= 2.0);

    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.unwrap();
    }
    let png = std::fs::read(shot).unwrap_or_else(|e| panic!("no screenshot at {shot}: {e}"));
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
}
