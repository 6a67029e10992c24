//! `[upstreams.NAME]`: groups of servers a proxy route forwards to. Names are the table keys, so
//! TOML already makes them unique.

use std::collections::BTreeMap;

use super::Cx;
use super::address::parse_upstream_address;
use crate::model::{Upstream, UpstreamServer};
use crate::path::KeyPath;
use crate::raw::{RawUpstream, RawUpstreamServer};

pub(super) fn upstreams(cx: &mut Cx<'_>, raw: BTreeMap<String, RawUpstream>) -> Vec<Upstream> {
    let mut valid = Vec::new();
    for (name, upstream) in raw {
        let path = KeyPath::root().key("upstreams").key(&name);
        if name.trim().is_empty() {
            cx.r.key_error(&path, "an upstream name cannot be empty", None);
        }
        let Some(servers) = &upstream.servers else {
            cx.r.missing(
                &path,
                "servers",
                Some(r#"e.g. servers = ["127.0.0.1:9001"]"#.into()),
            );
            continue;
        };
        if servers.is_empty() {
            let hint = Some(r#"list at least one, e.g. servers = ["127.0.0.1:9001"]"#.into());
            cx.r.error(
                &path.key("servers"),
                None,
                format!("upstream `{name}` has no servers"),
                hint,
            );
        }
        let checked: Vec<Option<UpstreamServer>> = servers
            .iter()
            .enumerate()
            .map(|(i, server)| upstream_server(cx, &path.key("servers").index(i), server))
            .collect();
        if let Some(servers) = checked.into_iter().collect::<Option<Vec<_>>>() {
            valid.push(Upstream { name, servers });
        }
    }
    valid
}

fn upstream_server(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &toml::Spanned<RawUpstreamServer>,
) -> Option<UpstreamServer> {
    let (address, weight) = match raw.get_ref() {
        RawUpstreamServer::Short(text) => (Some((text.as_str(), raw.span(), path.clone())), None),
        RawUpstreamServer::Table(table) => {
            let address = match &table.address {
                Some(a) => Some((a.get_ref().as_str(), a.span(), path.key("address"))),
                None => {
                    cx.r.missing(
                        path,
                        "address",
                        Some(r#"e.g. address = "127.0.0.1:9001""#.into()),
                    );
                    None
                }
            };
            (address, table.weight.as_ref())
        }
    };
    let weight = match weight {
        None => 1,
        Some(value) => match cx.integer(&path.key("weight"), value) {
            Some(n) if n >= 1 && n <= i64::from(u32::MAX) => u32::try_from(n).unwrap_or(1),
            Some(n) => {
                let hint = (n == 0)
                    .then(|| "to send a server no traffic, remove it from the list".to_owned());
                let message = format!("a weight must be from 1 to {}, found {n}", u32::MAX);
                cx.r.error(&path.key("weight"), Some(value.span()), message, hint);
                1
            }
            None => 1,
        },
    };
    let (text, span, address_path) = address?;
    match parse_upstream_address(text) {
        Ok(address) => Some(UpstreamServer { address, weight }),
        Err((message, hint)) => {
            cx.r.error(&address_path, Some(span), message, hint);
            None
        }
    }
}
