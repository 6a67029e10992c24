//! What requests see across a reload: the next request on an open connection gets the new
//! config, one in flight finishes on the old; a refused reload changes nothing.

use std::time::Duration;

use sluice_server::ops::lifecycle::ReloadRefused;
use sluice_testkit::{Offer, client, start_origin, start_toml};

use super::{KeepAlive, respond_config};

#[tokio::test]
async fn the_next_request_on_an_open_keep_alive_connection_sees_the_new_route() {
    let server = start_toml(&respond_config("before")).await;
    let mut conn = KeepAlive::connect(server.first_addr()).await;
    assert_eq!(conn.get("/").await, (200, "before".into()));

    let summary = server.reload_toml(&respond_config("after")).await.unwrap();
    assert_eq!(summary.routes.changed, ["answer"]);
    assert_eq!(summary.listeners.kept, ["main"]);

    // Same socket: `KeepAlive` panics if the server closed it.
    assert_eq!(conn.get("/").await, (200, "after".into()));
    assert_eq!(conn.get("/missing-is-still-routed").await.1, "after");
}

#[tokio::test]
async fn the_next_stream_on_an_open_h2_connection_sees_the_new_route() {
    let toml = |body: &str| {
        format!(
            "[admin]\naddress = \"127.0.0.1:0\"\n{}",
            respond_config(body)
        )
    };
    let server = start_toml(&toml("before")).await;
    let h2 = client(Offer::Http2);
    let get = || async {
        let resp = h2.get(server.url("/")).send().await.unwrap();
        assert_eq!(resp.version(), http::Version::HTTP_2);
        resp.text().await.unwrap()
    };
    assert_eq!(get().await, "before");
    server.reload_toml(&toml("after")).await.unwrap();
    assert_eq!(get().await, "after");
    // Both requests were streams of one connection.
    let metrics = crate::scrape_metrics(&server).await;
    assert_eq!(
        crate::metric(&metrics, r#"sluice_connections_total{listener="main"}"#),
        1.0
    );
}

#[tokio::test]
async fn a_request_in_flight_finishes_on_the_old_config() {
    let old = start_origin(Some("old")).await;
    let new = start_origin(Some("new")).await;
    let toml = |origin: std::net::SocketAddr| {
        format!(
            r#"
            [log]
            access = "off"
            [[listeners]]
            address = "127.0.0.1:0"
            [[routes]]
            proxy = {{ upstream = "backend" }}
            [upstreams.backend]
            servers = ["{origin}"]
            "#
        )
    };
    let server = start_toml(&toml(old.addr)).await;
    let http = client(Offer::Http1);
    // 20 chunks 50 ms apart: about a second on the wire, the reload lands in the middle.
    let mut slow = http
        .get(server.url("/stream?chunks=20&size=64&delay_ms=50"))
        .send()
        .await
        .unwrap();
    assert_eq!(slow.headers()["x-origin"], "old");
    let first = slow.chunk().await.unwrap().unwrap();

    let summary = server.reload_toml(&toml(new.addr)).await.unwrap();
    assert_eq!(summary.upstreams.changed, ["backend"]);
    let next = http.get(server.url("/hello")).send().await.unwrap();
    assert_eq!(next.headers()["x-origin"], "new");

    let mut body = first.to_vec();
    while let Some(chunk) = slow.chunk().await.unwrap() {
        body.extend_from_slice(&chunk);
    }
    let elements: Vec<serde_json::Value> = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        elements.len(),
        20,
        "the old upstream's response arrived whole"
    );
}

#[tokio::test]
async fn an_invalid_config_is_refused_with_checks_diagnostics_and_the_old_one_serves() {
    let server = start_toml(&respond_config("still here")).await;
    let bad = "[log]\naccess = \"off\"\n[[listeners]]\naddres = \"127.0.0.1:0\"\n";
    let Err(ReloadRefused::Invalid(diagnostics)) = server.reload_toml(bad).await else {
        panic!("an invalid config was not refused as invalid");
    };
    let text = diagnostics.to_string();
    // What `sluice check` prints for the same file.
    let path = server.dir.join("sluice.toml");
    assert_eq!(text, sluice_config::load(&path).unwrap_err().to_string());
    assert!(text.contains("sluice.toml:4:1"), "{text}");
    assert!(text.contains("did you mean `address`?"), "{text}");

    let resp = client(Offer::Http1).get(server.url("/")).send().await;
    assert_eq!(resp.unwrap().text().await.unwrap(), "still here");
}

#[tokio::test]
async fn a_config_that_cannot_be_put_in_force_is_refused_and_changes_nothing() {
    let server = start_toml(&respond_config("old")).await;
    // A port someone else holds: valid, but binding fails.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let toml = format!(
        "{}\n[[listeners]]\nname = \"extra\"\naddress = \"127.0.0.1:{port}\"\n",
        respond_config("new")
    );
    let Err(ReloadRefused::Failed(message)) = server.reload_toml(&toml).await else {
        panic!("a reload whose listener cannot bind was not refused");
    };
    assert!(
        message.contains("listener `extra`: cannot listen on"),
        "{message}"
    );
    assert!(message.contains("change `address`"), "{message}");
    // The old config serves, route included: nothing of the refused one leaked in.
    let resp = client(Offer::Http1)
        .get(server.url("/"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "old");
    assert!(server.running().address("extra").is_none());
    // And a good reload after it works.
    server.reload_toml(&respond_config("new")).await.unwrap();
    let resp = client(Offer::Http1)
        .get(server.url("/"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "new");
    assert!(server.shutdown(Duration::from_secs(5)).await);
}
