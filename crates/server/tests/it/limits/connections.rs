//! `max_connections`: at a listener's (or the server's) limit, accepting pauses, the kernel's
//! backlog holds the next client, and it is served as soon as a connection closes.

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::{read_response, wait_for_metric};
use sluice_testkit::start_toml;

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

async fn served(addr: std::net::SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(GET).await.unwrap();
    assert!(read_response(&mut stream).await.unwrap().ends_with("ok"));
    stream
}

/// A client past the limit: connected (the backlog), request sent, no answer yet.
async fn waiting_client(addr: std::net::SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(GET).await.unwrap();
    stream
}

async fn assert_unanswered(stream: &mut TcpStream) {
    // Bounded look for an answer that must not come while the limit holds.
    let early = tokio::time::timeout(Duration::from_millis(300), read_response(stream)).await;
    assert!(early.is_err(), "served past the limit: {early:?}");
}

#[tokio::test]
async fn a_listener_at_max_connections_pauses_accepting_until_one_closes() {
    let server = start_toml(
        "[log]\naccess = \"off\"\n[admin]\naddress = \"127.0.0.1:0\"\n[[listeners]]\nname = \"main\"\naddress = \"127.0.0.1:0\"\nmax_connections = 2\n[[routes]]\nrespond = { body = \"ok\" }\n",
    )
    .await;
    let addr = server.first_addr();
    // Two connections are the limit: both served, and kept open.
    let first = served(addr).await;
    let _second = served(addr).await;
    let mut third = waiting_client(addr).await;
    let admin = server.running().admin_address().unwrap();
    let labels = [("listener", "main"), ("scope", "listener")];
    wait_for_metric(admin, "sluice_connection_limit_reached_total", &labels, 1.0).await;
    assert_unanswered(&mut third).await;
    drop(first);
    let answer = tokio::time::timeout(Duration::from_secs(10), read_response(&mut third))
        .await
        .expect("the waiting client was not served after a connection closed");
    assert!(answer.unwrap().ends_with("ok"));
}

#[tokio::test]
async fn the_server_wide_limit_spans_listeners() {
    let server = start_toml(
        "[server]\nmax_connections = 1\n[log]\naccess = \"off\"\n[admin]\naddress = \"127.0.0.1:0\"\n[[listeners]]\nname = \"a\"\naddress = \"127.0.0.1:0\"\n[[listeners]]\nname = \"b\"\naddress = \"127.0.0.1:0\"\n[[routes]]\nrespond = { body = \"ok\" }\n",
    )
    .await;
    let first = served(server.addr("a")).await;
    let mut other = waiting_client(server.addr("b")).await;
    let admin = server.running().admin_address().unwrap();
    let labels = [("listener", "b"), ("scope", "server")];
    wait_for_metric(admin, "sluice_connection_limit_reached_total", &labels, 1.0).await;
    assert_unanswered(&mut other).await;
    drop(first);
    let answer = tokio::time::timeout(Duration::from_secs(10), read_response(&mut other))
        .await
        .expect("not served after the other listener's connection closed");
    assert!(answer.unwrap().ends_with("ok"));
}

/// A reload resizes the limit in place: raised, the client waiting at the old limit is let in
/// at once; lowered, the connections opened before it count against the new limit.
#[tokio::test]
async fn a_reload_resizes_max_connections_in_place() {
    let config = |max: u32| {
        format!(
            "[log]\naccess = \"off\"\n[admin]\naddress = \"127.0.0.1:0\"\n[[listeners]]\nname = \"main\"\naddress = \"127.0.0.1:0\"\nmax_connections = {max}\n[[routes]]\nrespond = {{ body = \"ok\" }}\n"
        )
    };
    let server = start_toml(&config(1)).await;
    let addr = server.first_addr();
    let first = served(addr).await;
    let mut second = waiting_client(addr).await;
    let admin = server.running().admin_address().unwrap();
    let labels = [("listener", "main"), ("scope", "listener")];
    wait_for_metric(admin, "sluice_connection_limit_reached_total", &labels, 1.0).await;
    assert_unanswered(&mut second).await;
    // Raised to 2 while `first` stays open: `second` is served without anything closing.
    server.reload_toml(&config(2)).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), read_response(&mut second))
        .await
        .expect("the raised limit let the waiting client in");
    assert!(answer.unwrap().ends_with("ok"));
    // Lowered to 1 with two open: a third waits even after one of the two closes...
    server.reload_toml(&config(1)).await.unwrap();
    let mut third = waiting_client(addr).await;
    wait_for_metric(admin, "sluice_connection_limit_reached_total", &labels, 2.0).await;
    drop(first);
    assert_unanswered(&mut third).await;
    // ... and is served once both are gone.
    drop(second);
    let answer = tokio::time::timeout(Duration::from_secs(10), read_response(&mut third))
        .await
        .expect("served once under the lowered limit");
    assert!(answer.unwrap().ends_with("ok"));
}
