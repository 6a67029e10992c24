//! Purge on the admin listener, never on the public ones: `PURGE /cache/ZONE?key=KEY` (or
//! `DELETE`) removes the stored responses of one primary key, `?prefix=P` every key that starts
//! with `P`. Keys are as the route's `key` builds them, by default `http://host/path?query`.
//! The answer says how many stored responses went (`404` when none did).

use http::{Method, StatusCode};
use percent_encoding::percent_decode_str;

use super::zones::Zones;

/// What to remove.
enum Target {
    Key(String),
    Prefix(String),
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
            "say what to purge: ?key=http://host/path (one key) or ?prefix=http://host/dir/\n"
                .into(),
        );
    };
    let removed = match &target {
        Target::Key(key) => zone.invalidate(key).await,
        Target::Prefix(prefix) => zone.purge_prefix(prefix).await,
    };
    let status = if removed == 0 {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::OK
    };
    (status, format!("purged {removed}\n"))
}

fn target(query: &str) -> Option<Target> {
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=')?;
        // `+` is a space in form encoding; keys never contain spaces, so read it literally.
        let value = percent_decode_str(value).decode_utf8().ok()?.into_owned();
        match name {
            "key" if !value.is_empty() => return Some(Target::Key(value)),
            "prefix" if !value.is_empty() => return Some(Target::Prefix(value)),
            _ => {}
        }
    }
    None
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
