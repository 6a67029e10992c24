//! An upstream group's `servers`: each one's address, weight and passive-check settings, then
//! the checks across the group (someone must be able to serve; the weights must stay small
//! enough for the balancer's precomputed schedule).

use toml::Spanned;

use super::Cx;
use super::address::{Scheme, parse_upstream_address};
use crate::model::{UpstreamAddress, UpstreamServer};
use crate::path::KeyPath;
use crate::raw::{RawServerTable, RawUpstreamServer};

/// The largest weight of one server.
const MAX_WEIGHT: u32 = 1000;
/// The largest sum of a group's weights: smooth weighted round robin precomputes a schedule
/// this long.
const MAX_TOTAL_WEIGHT: u32 = 10_000;

/// The group's servers and how each was written (plain or `https://`); `None` when any of them
/// (or the list itself) was reported.
pub(super) fn servers(
    cx: &mut Cx<'_>,
    group: &KeyPath,
    name: &str,
    raw: Option<&[Spanned<RawUpstreamServer>]>,
) -> Option<(Vec<UpstreamServer>, Vec<Scheme>)> {
    let Some(raw) = raw else {
        cx.r.missing(
            group,
            "servers",
            Some(r#"e.g. servers = ["127.0.0.1:9001"]"#.into()),
        );
        return None;
    };
    let path = group.key("servers");
    if raw.is_empty() {
        let hint = Some(r#"list at least one, e.g. servers = ["127.0.0.1:9001"]"#.into());
        let message = format!("upstream `{name}` has no servers");
        cx.r.error(&path, None, message, hint);
        return None;
    }
    let checked: Vec<(Option<(UpstreamAddress, Scheme)>, UpstreamServer)> = raw
        .iter()
        .enumerate()
        .map(|(i, server)| upstream_server(cx, &path.index(i), server))
        .collect();
    let settings: Vec<&UpstreamServer> = checked.iter().map(|(_, s)| s).collect();
    check_group(cx, &path, name, &settings);
    checked
        .into_iter()
        .map(|(address, server)| {
            address.map(|(address, scheme)| (UpstreamServer { address, ..server }, scheme))
        })
        .collect::<Option<Vec<_>>>()
        .map(|both| both.into_iter().unzip())
}

/// Whole-group mistakes. A weight that was itself reported counts as the default here, so it is
/// not reported twice.
fn check_group(cx: &mut Cx<'_>, path: &KeyPath, name: &str, servers: &[&UpstreamServer]) {
    if servers.iter().all(|s| s.down) {
        let message = format!("every server of upstream `{name}` is marked down");
        let hint = "nothing could answer its requests: set `down = false` on at least one server";
        cx.r.error(path, None, message, Some(hint.into()));
    } else if servers.iter().all(|s| s.backup) {
        let message = format!("every server of upstream `{name}` is a backup");
        let hint =
            "backups only take traffic when every primary is down: make at least one a primary";
        cx.r.error(path, None, message, Some(hint.into()));
    }
    let total: u64 = servers.iter().map(|s| u64::from(s.weight)).sum();
    if total > u64::from(MAX_TOTAL_WEIGHT) {
        let message = format!(
            "the weights of upstream `{name}` add up to {total}, more than {MAX_TOTAL_WEIGHT}"
        );
        let hint = "the balancer precomputes a schedule that long; only the ratios matter, so scale them down (3 and 1, not 3000 and 1000)";
        cx.r.error(path, None, message, Some(hint.into()));
    }
}

/// One server: its address (`None` when reported) and its other settings.
fn upstream_server(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &Spanned<RawUpstreamServer>,
) -> (Option<(UpstreamAddress, Scheme)>, UpstreamServer) {
    // The model's defaults; the placeholder address is replaced by the caller.
    let defaults = UpstreamServer::new(UpstreamAddress::Tcp(String::new()));
    let table = match raw.get_ref() {
        RawUpstreamServer::Short(text) => {
            let address = address(cx, path, text, raw.span());
            return (address, defaults);
        }
        RawUpstreamServer::Table(table) => table,
    };
    let address = match &table.address {
        Some(a) => address(cx, &path.key("address"), a.get_ref(), a.span()),
        None => {
            let hint = Some(r#"e.g. address = "127.0.0.1:9001""#.into());
            cx.r.missing(path, "address", hint);
            None
        }
    };
    (address, settings(cx, path, table, defaults))
}

/// An upstream server's address (also a proxy's inline `to`) and its scheme, reported at `span`
/// when invalid.
pub(super) fn address(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    text: &str,
    span: std::ops::Range<usize>,
) -> Option<(UpstreamAddress, Scheme)> {
    parse_upstream_address(text)
        .map_err(|(message, hint)| cx.r.error(path, Some(span), message, hint))
        .ok()
}

fn settings(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    table: &RawServerTable,
    defaults: UpstreamServer,
) -> UpstreamServer {
    let weight = match &table.weight {
        None => defaults.weight,
        Some(value) => weight(cx, &path.key("weight"), value).unwrap_or(defaults.weight),
    };
    let hint = Some("0 never takes the server out");
    let max_fails = cx.count(
        &path.key("max_fails"),
        table.max_fails.as_ref(),
        u64::from(defaults.max_fails),
        (0, u64::from(u32::MAX)),
        hint,
    );
    let max_fails = u32::try_from(max_fails).unwrap_or(defaults.max_fails);
    let key = path.key("fail_timeout");
    let value = table.fail_timeout.as_ref();
    let fail_timeout = cx.duration_or_zero(&key, value, defaults.fail_timeout, None);
    if let Some(value) = value
        && fail_timeout.is_zero()
        && max_fails > 0
    {
        let message = "`fail_timeout` must be longer than 0s when `max_fails` is above 0";
        let hint = r#"a server taken out for 0s is never out: e.g. "10s", or max_fails = 0 to turn passive checks off"#;
        cx.r.error(&key, Some(value.span()), message, Some(hint.into()));
    }
    UpstreamServer {
        weight,
        max_fails,
        fail_timeout,
        backup: table.backup.unwrap_or(defaults.backup),
        down: table.down.unwrap_or(defaults.down),
        ..defaults
    }
}

fn weight(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<crate::raw::Scalar>) -> Option<u32> {
    let n = cx.integer(path, value)?;
    if let Ok(weight @ 1..=MAX_WEIGHT) = u32::try_from(n) {
        return Some(weight);
    }
    let hint = match n {
        0 => Some("to send a server no traffic, mark it `down = true` or remove it".to_owned()),
        n if n > 0 => {
            Some("only the ratios of weights matter: e.g. 3 and 1, not 3000 and 1000".to_owned())
        }
        _ => None,
    };
    let message = format!("a weight must be from 1 to {MAX_WEIGHT}, found {n}");
    cx.r.error(path, Some(value.span()), message, hint);
    None
}
