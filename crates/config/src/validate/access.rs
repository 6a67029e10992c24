//! A route's access control: `allow` / `deny` (networks, checked in file order like nginx's),
//! `basic_auth` (its user file is read here too, so `sluice check` reports a missing file or a
//! plain-text password) and `forward_auth` (its upstream, named or inline, like a proxy's).

use std::time::Duration;

use http::HeaderName;
use toml::Spanned;

use super::Cx;
use super::files::Kind;
use super::proxy::Targets;
use crate::model::{Access, AccessRule, BasicAuth, ForwardAuth, Upstream, parse_htpasswd};
use crate::path::KeyPath;
use crate::raw::{OneOrMany, RawBasicAuth, RawForwardAuth, RawProxy, RawRoute};

/// The route's access control and, for an inline `forward_auth.to`, the upstream group made for
/// it. `None` when something was reported.
pub(super) fn access(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawRoute,
    upstreams: &[String],
    route: &str,
) -> Option<(Access, Option<Upstream>)> {
    let mut ok = true;
    // nginx checks `allow` and `deny` in the order written; two TOML keys keep theirs in the
    // file, which the spans tell.
    let mut lists: Vec<(bool, &Spanned<OneOrMany>)> = Vec::new();
    if let Some(allow) = &raw.allow {
        lists.push((true, allow));
    }
    if let Some(deny) = &raw.deny {
        lists.push((false, deny));
    }
    lists.sort_by_key(|(_, list)| list.span().start);
    let mut rules = Vec::new();
    for (allow, list) in &lists {
        let key = path.key(if *allow { "allow" } else { "deny" });
        let items = OneOrMany::items(list);
        if items.is_empty() {
            let hint = "list at least one network, or leave the key out";
            cx.r.error(
                &key,
                Some(list.span()),
                "the network list is empty",
                Some(hint.into()),
            );
            ok = false;
        }
        for item in items {
            match super::matchers::network(item.get_ref()) {
                Ok(nets) => rules.extend(
                    nets.into_iter()
                        .map(|net| AccessRule { allow: *allow, net }),
                ),
                Err((message, hint)) => {
                    let hint = hint.map(|h| h.replace("a proxy is trusted", "a client is matched"));
                    cx.r.error(&key, Some(item.span()), message, hint);
                    ok = false;
                }
            }
        }
    }
    let basic_auth = match &raw.basic_auth {
        Some(b) => match basic_auth(cx, &path.key("basic_auth"), b) {
            Some(b) => Some(b),
            None => {
                ok = false;
                None
            }
        },
        None => None,
    };
    let mut inline = None;
    let forward_auth = match &raw.forward_auth {
        Some(f) => match forward_auth(cx, &path.key("forward_auth"), f, upstreams, route) {
            Some((f, group)) => {
                inline = group;
                Some(f)
            }
            None => {
                ok = false;
                None
            }
        },
        None => None,
    };
    ok.then(|| {
        (
            Access {
                rules,
                default_allow: raw.allow.is_none(),
                basic_auth,
                forward_auth,
            },
            inline,
        )
    })
}

fn basic_auth(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawBasicAuth) -> Option<BasicAuth> {
    let realm = match &raw.realm {
        Some(realm) => {
            let text = realm.get_ref();
            // The realm goes inside a quoted-string (RFC 9110 §11.2, §5.6.4).
            if text
                .chars()
                .any(|c| c == '"' || c == '\\' || c.is_control())
            {
                let message = "the realm cannot hold `\"`, `\\` or control characters";
                cx.r.error(&path.key("realm"), Some(realm.span()), message, None);
                None
            } else {
                Some(text.clone())
            }
        }
        None => {
            let hint = r#"the name browsers show in the login box, e.g. realm = "staff""#;
            cx.r.missing(path, "realm", Some(hint.into()));
            None
        }
    };
    let users = match &raw.users {
        Some(users) => {
            let key = path.key("users");
            let file = cx.existing(&key, users, "user file", Kind::File)?;
            match std::fs::read_to_string(&file) {
                Err(err) => {
                    let message =
                        format!("the user file `{}` cannot be read: {err}", users.get_ref());
                    cx.r.error(&key, Some(users.span()), message, None);
                    None
                }
                Ok(text) => match parse_htpasswd(&text) {
                    Ok(list) if list.is_empty() => {
                        let message = format!("the user file `{}` has no users", users.get_ref());
                        cx.r.error(&key, Some(users.span()), message, Some(HASH_HINT.into()));
                        None
                    }
                    Ok(_) => Some(file),
                    Err((line, why)) => {
                        let message = format!("{}, line {line}: {why}", users.get_ref());
                        cx.r.error(&key, Some(users.span()), message, Some(HASH_HINT.into()));
                        None
                    }
                },
            }
        }
        None => {
            let hint = r#"a file of name:hash lines, e.g. users = "users.htpasswd""#;
            cx.r.missing(path, "users", Some(hint.into()));
            None
        }
    };
    let max_failures = cx.count(
        &path.key("max_failures"),
        raw.max_failures.as_ref(),
        u64::from(BasicAuth::DEFAULT_MAX_FAILURES),
        (1, u64::from(u32::MAX)),
        Some("the failed attempts a client may make per failure_period, e.g. 10"),
    );
    let failure_period = cx.duration(
        &path.key("failure_period"),
        raw.failure_period.as_ref(),
        BasicAuth::DEFAULT_FAILURE_PERIOD,
        false,
    );
    Some(BasicAuth {
        realm: realm?,
        users: users?,
        forward_credentials: raw.forward_credentials.unwrap_or(false),
        max_failures: u32::try_from(max_failures).unwrap_or(u32::MAX),
        failure_period: failure_period.max(Duration::from_millis(1)),
    })
}

const HASH_HINT: &str = "make a bcrypt line with `htpasswd -nbB NAME PASSWORD`, or an argon2 one \
                         with `argon2` (PHC string `$argon2id$...`)";

fn forward_auth(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawForwardAuth,
    upstreams: &[String],
    route: &str,
) -> Option<(ForwardAuth, Option<Upstream>)> {
    let as_proxy = RawProxy {
        upstream: raw.upstream.clone(),
        to: raw.to.clone(),
        ..RawProxy::default()
    };
    let auth_route = format!("{route}:auth");
    let targets = Targets {
        defined: upstreams,
        route: &auth_route,
        path: None,
    };
    let target = super::proxy::target(cx, path, &as_proxy, &targets);
    let uri = match &raw.uri {
        Some(uri)
            if uri.get_ref().starts_with('/')
                && http::uri::PathAndQuery::try_from(uri.get_ref().as_str()).is_ok() =>
        {
            Some(Some(uri.get_ref().clone()))
        }
        Some(uri) => {
            let message = format!(
                "`uri` must be a path such as \"/auth\", found `{}`",
                uri.get_ref()
            );
            cx.r.error(&path.key("uri"), Some(uri.span()), message, None);
            None
        }
        None => Some(None),
    };
    let mut copy_headers = Vec::new();
    let mut headers_ok = true;
    if let Some(list) = &raw.copy_headers {
        for item in OneOrMany::items(list) {
            match HeaderName::from_bytes(item.get_ref().as_bytes()) {
                Ok(name) => copy_headers.push(name),
                Err(_) => {
                    let message = format!("`{}` is not a header name", item.get_ref());
                    cx.r.error(&path.key("copy_headers"), Some(item.span()), message, None);
                    headers_ok = false;
                }
            }
        }
    }
    let timeout = cx.duration(
        &path.key("timeout"),
        raw.timeout.as_ref(),
        ForwardAuth::DEFAULT_TIMEOUT,
        false,
    );
    let (upstream, inline) = target?;
    let uri = uri?;
    headers_ok.then_some((
        ForwardAuth {
            upstream,
            uri,
            copy_headers,
            timeout,
        },
        inline,
    ))
}
