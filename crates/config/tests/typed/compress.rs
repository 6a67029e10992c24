//! A route's `compress` option: `{}` gets the model's defaults, every key maps to its typed
//! value, and a route without it has none. Part of the `typed` test.

use std::path::Path;
use std::time::Duration;

use sluice_config::*;
use sluice_core::Compression;

const TEXT: &str = r#"
[[listeners]]
address = "127.0.0.1:8080"

[[routes]]
path = "/off"
respond = {}

[[routes]]
path = "/defaults"
respond = {}
compress = {}

[[routes]]
path_prefix = "/"
respond = {}
[routes.compress]
algorithms = ["gzip", "Br"]
levels = { gzip = 1, br = 11, zstd = 19 }
min_length = "1KiB"
types = ["Text/*", "application/json"]
flush_delay = "0ms"
max_cpu = " 75 %"
"#;

#[test]
fn compress_maps_to_typed_values_and_defaults() {
    let config = parse_str(TEXT, Path::new("compress.toml")).unwrap_or_else(|d| panic!("{d}"));
    let [off, defaults, full] = config.routes.as_slice() else {
        panic!("three routes")
    };
    assert_eq!(off.compress, None);
    let d = defaults.compress.as_ref().unwrap();
    assert_eq!(d, &Compress::default());
    assert_eq!(
        d.algorithms,
        [Compression::ZSTD, Compression::BR, Compression::GZIP]
    );
    assert_eq!(
        (d.min_length, d.flush_delay, &d.types),
        (256, Duration::from_millis(50), &None)
    );
    assert_eq!(d.levels, CompressLevels::default());

    let c = full.compress.as_ref().unwrap();
    assert_eq!(c.algorithms, [Compression::GZIP, Compression::BR]);
    assert_eq!(c.levels.get(Compression::GZIP), Some(1));
    assert_eq!(c.levels.get(Compression::BR), Some(11));
    assert_eq!(
        c.levels.get(Compression::ZSTD),
        Some(19),
        "a level for an algorithm not listed is kept"
    );
    assert_eq!(c.levels.get(Compression::DEFLATE), None);
    assert_eq!(c.min_length, 1024);
    assert_eq!(
        c.types.as_deref(),
        Some(&["text/*".to_owned(), "application/json".to_owned()][..])
    );
    assert_eq!(c.flush_delay, Duration::ZERO);
    assert_eq!(c.max_cpu.map(CpuShare::percent), Some(75));
    assert_eq!(d.max_cpu, None, "adaptive compression is off by default");
}
