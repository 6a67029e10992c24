//! `tls = "acme"` on listeners and the `[acme]` table (docs/acme.md): which names each ACME
//! listener orders a certificate for, and where and how it orders them.
//!
//! Names come from the listener's `acme_names`, else from the exact hosts of the routes that
//! serve it. Wildcards need the DNS-01 challenge (RFC 8555 §8.4), which sluice does not do, and
//! public CAs issue no certificates for IP addresses over these challenges: both are refused in
//! `acme_names` and skipped among route hosts. The challenge is HTTP-01 when a listener without
//! TLS exists to answer it, TLS-ALPN-01 (RFC 8737) on the ACME listener itself otherwise.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use toml::Spanned;

use super::Cx;
use super::files::Kind;
use super::hosts::parse_host_pattern;
use crate::model::{
    Acme, AcmeChallenge, ExternalAccount, HostMatch, LETS_ENCRYPT, LETS_ENCRYPT_STAGING, Listener,
    Route, Tls,
};
use crate::path::KeyPath;
use crate::raw::{OneOrMany, RawAcme, Scalar};

/// Where certificates are kept when `storage` is not given.
const DEFAULT_STORAGE: &str = "/var/lib/sluice/acme";
/// The first wait after a failed order (`retry_after_failure`).
const DEFAULT_RETRY: Duration = Duration::from_secs(60);

/// A listener's `acme_names`, put into its `tls = "acme"`.
pub(super) fn listed_names(
    cx: &mut Cx<'_>,
    listener: &KeyPath,
    raw: Option<&Spanned<OneOrMany>>,
    tls: Option<&mut Tls>,
) {
    let Some(raw) = raw else { return };
    let path = listener.key("acme_names");
    let Some(Tls::Acme { names }) = tls else {
        let hint = r#"add tls = "acme", or remove acme_names"#;
        cx.r.error(
            &path,
            Some(raw.span()),
            "`acme_names` applies only to a listener with tls = \"acme\"",
            Some(hint.into()),
        );
        return;
    };
    let items = OneOrMany::items(raw);
    if items.is_empty() {
        let hint = "list the names, or leave the key out to use the routes' hosts";
        cx.r.error(
            &path,
            Some(raw.span()),
            "acme_names is empty",
            Some(hint.into()),
        );
    }
    for item in items {
        let text = item.get_ref().trim().to_ascii_lowercase();
        match parse_host_pattern(&text) {
            Ok(HostMatch::Exact(name)) if !is_ip(&name) => {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            Ok(HostMatch::Exact(_)) => cx.r.error(
                &path,
                Some(item.span()),
                format!("`{text}` is an IP address: ACME certificates here are for DNS names"),
                Some("list the DNS names clients use".into()),
            ),
            Ok(HostMatch::Suffix(_)) => cx.r.error(
                &path,
                Some(item.span()),
                format!("`{text}` is a wildcard: wildcard certificates need DNS-01, not supported"),
                Some("list each name, or use a certificate from files for the wildcard".into()),
            ),
            Err((message, hint)) => cx.r.error(&path, Some(item.span()), message, hint),
        }
    }
}

/// Fills in the names of ACME listeners without `acme_names` from their routes' exact hosts.
pub(super) fn resolve_names(cx: &mut Cx<'_>, listeners: &mut [Listener], routes: &[Route]) {
    for (i, listener) in listeners.iter_mut().enumerate() {
        let Some(Tls::Acme { names }) = &mut listener.tls else {
            continue;
        };
        if !names.is_empty() {
            continue;
        }
        let serving = routes
            .iter()
            .filter(|r| r.listeners.is_empty() || r.listeners.contains(&listener.name));
        for route in serving {
            for host in &route.hosts {
                if let HostMatch::Exact(name) = host
                    && !is_ip(name)
                    && !names.contains(name)
                {
                    names.push(name.clone());
                }
            }
        }
        if names.is_empty() {
            let path = KeyPath::root().key("listeners").index(i).key("tls");
            let message = format!(
                "listener `{}` has tls = \"acme\" but no names to order a certificate for",
                listener.name
            );
            let hint = r#"add acme_names = ["example.com"] to the listener, or a host to its routes (wildcards and IP addresses do not count)"#;
            cx.r.error(&path, None, message, Some(hint.into()));
        }
    }
}

fn is_ip(name: &str) -> bool {
    name.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_ok()
}

/// The `[acme]` settings, when a listener has `tls = "acme"`.
pub(super) fn acme(cx: &mut Cx<'_>, raw: Option<RawAcme>, listeners: &[Listener]) -> Option<Acme> {
    let path = KeyPath::root().key("acme");
    let acme_listeners: Vec<&Listener> = listeners
        .iter()
        .filter(|l| matches!(l.tls, Some(Tls::Acme { .. })))
        .collect();
    if acme_listeners.is_empty() {
        if raw.is_some() {
            let hint = r#"add tls = "acme" to a listener, or remove [acme]"#;
            cx.r.warn(
                &path,
                None,
                "[acme] is unused: no listener has tls = \"acme\"",
                Some(hint.into()),
            );
        }
        return None;
    }
    let raw = raw.unwrap_or_default();
    let staging = raw.staging.as_ref().is_some_and(|s| *s.get_ref());
    let directory = match (&raw.directory, staging) {
        (Some(dir), true) => {
            let hint = "remove one: staging = true means Let's Encrypt's staging directory";
            cx.r.error(
                &path.key("staging"),
                None,
                "`staging` and `directory` cannot both be set",
                Some(hint.into()),
            );
            dir.get_ref().clone()
        }
        (Some(dir), false) => {
            let text = dir.get_ref().trim();
            // RFC 8555 §6.1: the server's resources are HTTPS URLs.
            if !text.starts_with("https://") {
                cx.r.error(
                    &path.key("directory"),
                    Some(dir.span()),
                    format!("the ACME directory `{text}` is not an https:// URL"),
                    Some(format!("e.g. directory = \"{LETS_ENCRYPT}\"")),
                );
            }
            text.to_owned()
        }
        (None, true) => LETS_ENCRYPT_STAGING.to_owned(),
        (None, false) => LETS_ENCRYPT.to_owned(),
    };
    let contact = raw
        .contact
        .as_ref()
        .map(|value| {
            OneOrMany::items(value)
                .into_iter()
                .filter_map(|item| {
                    let text = item.get_ref().trim();
                    if text.starts_with("mailto:") && text.len() > "mailto:".len() {
                        Some(text.to_owned())
                    } else {
                        cx.r.error(
                            &path.key("contact"),
                            Some(item.span()),
                            format!("contact `{text}` is not a mailto: URL"),
                            Some(r#"e.g. contact = "mailto:ops@example.com""#.into()),
                        );
                        None
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let external_account = raw
        .external_account
        .as_ref()
        .and_then(|eab| external_account(cx, &path.key("external_account"), eab));
    let storage = storage(cx, &path.key("storage"), raw.storage.as_ref());
    let ca_root = raw
        .ca_root
        .as_ref()
        .and_then(|root| cx.existing(&path.key("ca_root"), root, "CA root file", Kind::File));
    let plain = listeners.iter().any(|l| l.tls.is_none());
    // TLS-ALPN-01 is a TLS handshake over TCP (RFC 8737 §3): an HTTP/3-only listener cannot.
    let alpn_possible = acme_listeners
        .iter()
        .any(|l| l.protocols.http1 || l.protocols.http2);
    let challenge = match raw.challenge.as_ref().map(|c| (c, c.get_ref().as_str())) {
        None if plain => AcmeChallenge::Http01,
        None => {
            if !alpn_possible {
                let hint = "add a listener without TLS (on port 80) for HTTP-01, or http1/h2 to the ACME listener";
                cx.r.error(
                    &path,
                    None,
                    "no way to answer ACME challenges: no listener without TLS, and TLS-ALPN-01 needs TCP",
                    Some(hint.into()),
                );
            }
            AcmeChallenge::TlsAlpn01
        }
        Some((_, "tls-alpn-01")) => AcmeChallenge::TlsAlpn01,
        Some((value, "http-01")) => {
            if !plain {
                let hint = r#"add a listener without TLS on port 80, or challenge = "tls-alpn-01""#;
                cx.r.error(
                    &path.key("challenge"),
                    Some(value.span()),
                    "HTTP-01 needs a listener without TLS to answer it",
                    Some(hint.into()),
                );
            }
            AcmeChallenge::Http01
        }
        Some((value, other)) => {
            let hint = r#"use "http-01" or "tls-alpn-01" (DNS-01 is not supported)"#;
            cx.r.error(
                &path.key("challenge"),
                Some(value.span()),
                format!("unknown ACME challenge `{other}`"),
                Some(hint.into()),
            );
            AcmeChallenge::Http01
        }
    };
    let http_redirect = match &raw.http_redirect {
        Some(value) if matches!(value.get_ref(), Scalar::Bool(false)) => None,
        other => Some(cx.status(
            &path.key("http_redirect"),
            other.as_ref(),
            http::StatusCode::PERMANENT_REDIRECT,
            (
                &|n| matches!(n, 301 | 302 | 303 | 307 | 308),
                "301, 302, 303, 307 or 308, or false for no redirect",
            ),
        )),
    };
    let retry_after_failure = cx.duration(
        &path.key("retry_after_failure"),
        raw.retry_after_failure.as_ref(),
        DEFAULT_RETRY,
        false,
    );
    Some(Acme {
        directory,
        contact,
        external_account,
        storage,
        ca_root,
        challenge,
        http_redirect,
        retry_after_failure,
    })
}

fn external_account(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &crate::raw::RawExternalAccount,
) -> Option<ExternalAccount> {
    let key_id = match &raw.key_id {
        Some(id) => cx.non_empty(&path.key("key_id"), id, "key_id"),
        None => {
            cx.r.missing(
                path,
                "key_id",
                Some("the key identifier your CA gave".into()),
            );
            None
        }
    };
    let hmac_key = match &raw.hmac_key {
        Some(key) => {
            let text = key.get_ref().trim().trim_end_matches('=');
            match base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text) {
                Ok(bytes) if !bytes.is_empty() => Some(bytes),
                _ => {
                    cx.r.error(
                        &path.key("hmac_key"),
                        Some(key.span()),
                        "hmac_key is not base64url",
                        Some("paste the MAC key exactly as the CA shows it".into()),
                    );
                    None
                }
            }
        }
        None => {
            cx.r.missing(
                path,
                "hmac_key",
                Some("the base64url MAC key your CA gave".into()),
            );
            None
        }
    };
    Some(ExternalAccount {
        key_id: key_id?,
        hmac_key: hmac_key?,
    })
}

/// The storage directory: created at start-up when missing; when it exists, it must be a
/// directory sluice can list and write (checked by making and removing a file in it).
fn storage(cx: &mut Cx<'_>, path: &KeyPath, raw: Option<&Spanned<String>>) -> PathBuf {
    let written = raw.map_or(DEFAULT_STORAGE, |s| s.get_ref().as_str());
    let span = raw.map(Spanned::span);
    let (shown, absolute) = cx.resolve(written);
    if !absolute.exists() {
        return absolute;
    }
    let problem = if !absolute.is_dir() {
        Some(format!("the ACME storage `{written}` is not a directory"))
    } else if let Err(e) = std::fs::read_dir(&absolute) {
        Some(format!("the ACME storage `{written}` cannot be read: {e}"))
    } else {
        let probe = absolute.join(format!(".sluice-check-{}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
        {
            Ok(_) => {
                let _ = std::fs::remove_file(&probe);
                None
            }
            Err(e) => Some(format!(
                "the ACME storage `{written}` cannot be written: {e}"
            )),
        }
    };
    if let Some(problem) = problem {
        let hint = format!(
            "{} must be a directory the sluice user owns (it holds keys: mode 0700)",
            shown.display()
        );
        cx.r.error(path, span, problem, Some(hint));
    }
    absolute
}
