//! A proxy's `upgrade` and `tunnel_idle_timeout`: every shape, and the defaults (WebSocket only,
//! ten minutes). Part of the `typed` test.

use std::path::Path;
use std::time::Duration;

use sluice_config::*;

fn upgrades(text: &str) -> Vec<Upgrade> {
    let file = format!(
        "[[listeners]]\naddress = \"127.0.0.1:8080\"\n[upstreams.app]\nservers = [\"127.0.0.1:9001\"]\n{text}"
    );
    let config = parse_str(&file, Path::new("upgrade.toml")).unwrap_or_else(|d| panic!("{d}"));
    config
        .routes
        .iter()
        .map(|route| match &route.action {
            Action::Proxy(proxy) => proxy.upgrade.clone(),
            _ => panic!("proxy routes only"),
        })
        .collect()
}

#[test]
fn every_shape_of_upgrade_maps_to_its_protocols() {
    let got = upgrades(
        r#"
[[routes]]
path_prefix = "/default/"
proxy = { upstream = "app" }
[[routes]]
path_prefix = "/any/"
proxy = { upstream = "app", upgrade = true, tunnel_idle_timeout = "1h" }
[[routes]]
path_prefix = "/none/"
proxy = { upstream = "app", upgrade = false }
[[routes]]
proxy = { upstream = "app", upgrade = ["WebSocket", "x-custom"], tunnel_idle_timeout = "90s" }
"#,
    );
    let ten_minutes = Duration::from_secs(600);
    assert_eq!(got[0], Upgrade::default());
    assert_eq!(
        got[0].protocols,
        UpgradeProtocols::Only(vec!["websocket".into()])
    );
    assert_eq!(got[0].idle_timeout, ten_minutes);
    assert_eq!(got[1].protocols, UpgradeProtocols::Any);
    assert_eq!(got[1].idle_timeout, Duration::from_secs(3600));
    assert_eq!(got[2].protocols, UpgradeProtocols::None);
    assert_eq!(
        got[3].protocols,
        UpgradeProtocols::Only(vec!["websocket".into(), "x-custom".into()]),
        "lowercased, in file order"
    );
    assert_eq!(got[3].idle_timeout, Duration::from_secs(90));
    assert_eq!(Proxy::to("app").upgrade, Upgrade::default());
}
