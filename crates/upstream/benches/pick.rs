//! Cost of one pick of the consistent hash policy (`hash $key consistent`): hashing the request's
//! key and finding its point on the ring, per request, for a URI key and a client-IP key, on a
//! small group (4 peers of weight 1) and a large ring (16 peers of weight 10).
//!
//! `cargo bench -p sluice-upstream --bench pick -- --warm-up-time 1 --measurement-time 3`
//!
//! Each iteration picks for 64 different keys (so one key's branch history does not flatter the
//! search); criterion reports keys per second.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use http::{HeaderMap, Uri};
use sluice_config::{HashKey, UpstreamAddress, UpstreamServer};
use sluice_upstream::balance::hash::Hash;
use sluice_upstream::balance::{Balance, Filter};
use sluice_upstream::{Peer, PickContext};

const KEYS: usize = 64;

fn group(peers: usize, weight: u32) -> Vec<Arc<Peer>> {
    (0..peers)
        .map(|i| {
            let address = UpstreamAddress::Tcp(format!("10.0.0.{}:8080", i + 1));
            let mut server = UpstreamServer::new(address);
            server.weight = weight;
            Arc::new(Peer::new(i, server))
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let uris: Vec<Uri> = (0..KEYS)
        .map(|i| format!("/static/app/item-{}.js?v=20{i:02}", i * 7919))
        .map(|s| Uri::try_from(s).unwrap_or_default())
        .collect();
    let ips: Vec<IpAddr> = (0..KEYS)
        .map(|i| IpAddr::V4(Ipv4Addr::new(192, 0, 2, i as u8)))
        .collect();
    let headers = HeaderMap::new();
    let mut bench_group = c.benchmark_group("hash_pick");
    bench_group.throughput(Throughput::Elements(KEYS as u64));
    for (ring, peers, weight) in [("4x1", 4, 1), ("16x10", 16, 10)] {
        for (name, key) in [("uri", HashKey::Uri), ("client_ip", HashKey::ClientIp)] {
            let hash = Hash::new(key, group(peers, weight));
            let filter = Filter {
                now: Instant::now(),
                tried: &[],
            };
            let id = BenchmarkId::new(name, ring);
            bench_group.bench_function(id, |b| {
                b.iter(|| {
                    for (uri, ip) in uris.iter().zip(&ips) {
                        let ctx = PickContext {
                            client_ip: *ip,
                            uri,
                            headers: &headers,
                        };
                        black_box(hash.pick(black_box(&ctx), &filter).map(|p| p.index()));
                    }
                })
            });
        }
    }
    bench_group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
