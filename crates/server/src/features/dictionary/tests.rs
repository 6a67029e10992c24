use super::*;
use sluice_config::Compress;
use sluice_http::dictionary::MatchPattern;

fn id(n: u64) -> ContentId {
    ContentId([7, n, 1, 2, 3, 4, 5])
}

fn text(seed: u64) -> Bytes {
    let mut s = String::new();
    for i in 0..3_000u64 {
        s.push_str(&format!(
            "var v{i} = {};\n",
            (i * 7919 + seed * 104_729) % 100_003
        ));
    }
    Bytes::from(s)
}

#[tokio::test]
async fn deltas_per_response_are_bounded_most_recent_first() {
    let metrics = crate::shared::metrics::Metrics::new();
    let store = Store::new(64 << 20, 2, metrics.dictionary("r"));
    let compression = RouteCompression::new(&Compress::default(), metrics.compress("r"));
    let pattern = MatchPattern::parse("/a.*.js").unwrap();
    let mut dictionaries = Vec::new();
    for n in 1..=3 {
        let tie = Tie::new("http://h".into(), pattern.clone(), Vec::new());
        let tie = store.tie(&id(n), tie).expect("not kept yet");
        store.keep(id(n), text(n), tie.clone()).await;
        assert!(store.tie(&id(n), tie).is_none(), "kept now");
        dictionaries.push(DictionaryHash::of(&text(n)));
    }
    let target = id(9);
    for hash in &dictionaries {
        let kept = store.dictionary(hash).unwrap();
        let key = DeltaKey {
            id: target,
            coding: DictionaryCoding::Dcz,
            hash: *hash,
        };
        let delta = store
            .delta(
                key,
                kept,
                text(9),
                3,
                Some(sluice_core::Compression::ZSTD),
                &compression,
            )
            .await
            .unwrap();
        assert!(delta.saved > 0);
    }
    assert_eq!(
        store.delta_count(),
        2,
        "at most two deltas for one response"
    );
    let oldest = DeltaKey {
        id: target,
        coding: DictionaryCoding::Dcz,
        hash: dictionaries[0],
    };
    assert!(
        store.peek_delta(&oldest).is_none(),
        "the oldest dictionary's delta went first"
    );
    let newest = DeltaKey {
        hash: dictionaries[2],
        ..oldest
    };
    assert!(store.peek_delta(&newest).is_some());
}
