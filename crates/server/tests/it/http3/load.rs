//! The lab's HTTP/3 load driver (`sluice_bench`'s built-in driver with `Protocol::H3`: quinn +
//! h3, several streams per connection) against sluice: every request answered, every byte
//! counted.

use sluice_bench::client::Endpoint;
use sluice_bench::scenario::{LoadSpec, Protocol};

#[tokio::test]
async fn the_bench_driver_loads_sluice_over_h3() {
    let server = super::h3_server("").await;
    let spec = LoadSpec {
        protocol: Protocol::H3,
        tls: true,
        method: http::Method::GET,
        path: "/up/hello".into(),
        headers: Vec::new(),
        body: None,
        clients: 4,
        streams: 10,
        requests: 2000,
        max_secs: None,
    };
    let endpoint = Endpoint {
        addr: server.addr("site"),
        tls: true,
    };
    let measured = sluice_bench::driver::builtin::load(&spec, &endpoint)
        .await
        .unwrap();
    assert_eq!(measured.failures, 0, "{:?}", measured.first_error);
    assert_eq!(measured.requests, 2000);
    assert_eq!(measured.statuses.get(&200), Some(&2000));
    let body = "upstream saw /hello\n".len() as u64;
    assert_eq!(measured.body_bytes, 2000 * body);
    let text = crate::scrape_metrics(&server).await;
    let h3 = crate::metric(
        &text,
        "sluice_protocol_requests_total{listener=\"site\",protocol=\"h3\"}",
    );
    assert_eq!(h3, 2000.0);
    let connections = crate::metric(&text, "sluice_connections_total{listener=\"site\"}");
    assert_eq!(connections, 4.0, "one QUIC connection per client");
}
