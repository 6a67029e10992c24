//! Unit tests of the proxy handler alone, against a demo origin on port 0: what it notes for
//! the request context. Forwarding itself is tested end to end in `tests/it/proxy.rs`.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;

use http::Request;
use sluice_core::Body;

use super::{ProxyHandler, UpstreamTiming};
use crate::features::upstreams;
use crate::shared::client::Client;
use crate::shared::metrics::Metrics;

fn get(path: &str) -> Request<Body> {
    Request::get(path)
        .header("host", "a.test")
        .body(Body::Empty)
        .unwrap()
}

#[tokio::test]
async fn the_time_to_the_response_head_is_noted_when_an_upstream_answers() {
    let origin = sluice_testkit::start_origin(None).await;
    let toml = format!(
        r#"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        proxy = {{ upstream = "backend" }}
        [upstreams.backend]
        servers = ["{}"]
        retry = {{ tries = 1 }}
        "#,
        origin.addr
    );
    let config = sluice_config::parse_str(&toml, Path::new("sluice.toml")).unwrap();
    let running = upstreams::build(&config.upstreams[0], &Metrics::new()).unwrap();
    let sluice_config::Action::Proxy(route) = &config.routes[0].action else {
        panic!("a proxy route")
    };
    let proxy = ProxyHandler::new(route.clone(), &running, None);
    let client = Client::new(
        "127.0.0.1:5000".parse().unwrap(),
        "127.0.0.1:8080".parse().unwrap(),
        false,
    );

    let mut timing = UpstreamTiming::default();
    let response = proxy
        .handle(client, get("/hello"), &mut timing)
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(timing.response_head.is_some());

    // Nobody answers: nothing is noted.
    origin.stop().await;
    let mut timing = UpstreamTiming::default();
    assert!(
        proxy
            .handle(client, get("/hello"), &mut timing)
            .await
            .is_err()
    );
    assert_eq!(timing.response_head, None);
}

/// `host = "upstream"` to `https://example.com` sends `Host: example.com`: 443 is https's
/// default port (RFC 9110 §4.2.2); another port stays.
#[tokio::test]
async fn the_upstream_host_of_a_tls_group_omits_port_443() {
    let toml = r#"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        proxy = { upstream = "backend", host = "upstream" }
        [upstreams.backend]
        servers = ["https://example.com", "https://example.net:8443"]
        "#;
    let config = sluice_config::parse_str(toml, Path::new("sluice.toml")).unwrap();
    let running = upstreams::build(&config.upstreams[0], &Metrics::new()).unwrap();
    let sluice_config::Action::Proxy(route) = &config.routes[0].action else {
        panic!("a proxy route")
    };
    let proxy = ProxyHandler::new(route.clone(), &running, None);
    let hosts: Vec<_> = proxy.peer_hosts.iter().flatten().collect();
    assert_eq!(hosts, ["example.com", "example.net:8443"]);
}
