//! Purge on the admin listener, never on the public ones: `PURGE /cache/ZONE?key=KEY` (or
//! `DELETE`) removes the stored responses of one primary key, `?prefix=P` every key that starts
//! with `P`. Keys are as the route's `key` builds them, by default `http://host/path?query`.
//! `?tag=T` every response carrying surrogate key `T` (`Surrogate-Key`, `Cache-Tag`, `xkey`),
//! and `&soft=1` marks them stale instead (served within their stale windows while one request
//! refreshes them). The answer says how many stored responses went (`404` when none did). With
//! a shared tier (docs/fleet.md) every purge reaches every instance sharing the zone, and the
//! answer is `200` whatever this instance held.

use http::{Method, StatusCode};
use percent_encoding::percent_decode_str;

use super::zones::Zones;

/// What to remove.
enum Target {
    Key(String),
    Prefix(String),
    /// A surrogate key (`Surrogate-Key`, `Cache-Tag`, `xkey`); `soft`: mark stale.
    Tag {
        tag: String,
        soft: bool,
    },
}

/// Answer one purge request: status and a line of text.
pub async fn purge(
    zones: &Zones,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> (StatusCode, String) {
    if method != Method::DELETE && method.as_str() != "PURGE" {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            "use PURGE or DELETE /cache/ZONE?key=KEY (or ?prefix=PREFIX)\n".into(),
        );
    }
    let Some(name) = path
        .strip_prefix("/cache/")
        .filter(|n| !n.is_empty() && !n.contains('/'))
    else {
        return (
            StatusCode::NOT_FOUND,
            "purge is /cache/ZONE?key=KEY\n".into(),
        );
    };
    let Some(zone) = zones.zone(name) else {
        let known: Vec<&str> = zones.iter().map(|z| z.name()).collect();
        return (
            StatusCode::NOT_FOUND,
            format!("no cache zone `{name}`; zones: {}\n", known.join(", ")),
        );
    };
    let Some(target) = query.and_then(target) else {
        return (
            StatusCode::BAD_REQUEST,
            "say what to purge: ?key=http://host/path (one key), ?prefix=http://host/dir/ or ?tag=TAG (&soft=1 marks stale)\n"
                .into(),
        );
    };
    let removed = match &target {
        Target::Key(key) => zone.invalidate(key).await,
        Target::Prefix(prefix) => zone.purge_prefix(prefix).await,
        Target::Tag { tag, soft } => zone.purge_tag(tag, *soft).await,
    };
    if zone.shared().is_some() {
        // Other instances apply it to what they hold: nothing here may still mean something
        // there.
        return (
            StatusCode::OK,
            format!("purged {removed} here; sent to every instance sharing the zone\n"),
        );
    }
    let status = if removed == 0 {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::OK
    };
    (status, format!("purged {removed}\n"))
}

fn target(query: &str) -> Option<Target> {
    let mut soft = false;
    let mut found = None;
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=')?;
        // `+` is a space in form encoding; keys never contain spaces, so read it literally.
        let value = percent_decode_str(value).decode_utf8().ok()?.into_owned();
        match name {
            "key" if !value.is_empty() && found.is_none() => found = Some(Target::Key(value)),
            "prefix" if !value.is_empty() && found.is_none() => {
                found = Some(Target::Prefix(value));
            }
            "tag" if !value.is_empty() && found.is_none() => {
                found = Some(Target::Tag {
                    tag: value,
                    soft: false,
                });
            }
            "soft" => soft = value == "1" || value == "true",
            _ => {}
        }
    }
    match found? {
        Target::Tag { tag, .. } => Some(Target::Tag { tag, soft }),
        other => Some(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_and_prefix_are_percent_decoded() {
        assert!(matches!(
            target("key=http%3A%2F%2Fa.test%2Fx%3Fy%3D1"),
            Some(Target::Key(k)) if k == "http://a.test/x?y=1"
        ));
        assert!(matches!(
            target("prefix=http://a.test/api/"),
            Some(Target::Prefix(p)) if p == "http://a.test/api/"
        ));
        assert!(target("key=").is_none());
        assert!(target("other=1").is_none());
    }
}
