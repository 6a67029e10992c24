//! An upstream group's TLS: the `tls = { ... }` table (or `https://` servers, which mean the
//! same with every default), and the checks that tie it to the rest of the group.
//!
//! Keys are named after the listener's (`cert`/`key` become `client_cert`/`client_key`, the
//! client's side) and what nginx (`proxy_ssl_trusted_certificate`, `proxy_ssl_name`) and Caddy
//! (`tls_trusted_ca_certs`, `tls_server_name`, `tls_insecure_skip_verify`) users look for.
//! Files are checked to exist and to hold PEM of the right kind now, so `sluice check` finds a
//! wrong path or a swapped cert and key; rustls parses them at start-up.

use std::path::PathBuf;

use toml::Spanned;

use super::Cx;
use super::address::Scheme;
use super::files::Kind;
use crate::model::{CertFiles, UpstreamAddress, UpstreamServer, UpstreamTls};
use crate::path::KeyPath;
use crate::raw::RawUpstreamTls;

/// The group's TLS: from its `tls` table, or the defaults when its servers are `https://`.
/// Mixed `https://` and plain servers without a table are reported: a group speaks one way.
pub(super) fn group_tls(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    name: &str,
    raw: Option<&Spanned<RawUpstreamTls>>,
    schemes: &[Scheme],
) -> Option<UpstreamTls> {
    if let Some(raw) = raw {
        return Some(tls_table(cx, &path.key("tls"), name, raw.get_ref()));
    }
    let https = schemes.iter().filter(|s| **s == Scheme::Https).count();
    if https == 0 {
        return None;
    }
    if https < schemes.len() {
        let message = format!("upstream `{name}` mixes https:// servers and plain-text ones");
        let hint = "a group reaches all its servers the same way: write https:// on every server, or add tls = { } to the group (TLS to all)";
        cx.r.error(&path.key("servers"), None, message, Some(hint.into()));
    }
    Some(UpstreamTls::default())
}

fn tls_table(cx: &mut Cx<'_>, path: &KeyPath, name: &str, raw: &RawUpstreamTls) -> UpstreamTls {
    let ca = raw
        .ca
        .as_ref()
        .and_then(|ca| pem_file(cx, &path.key("ca"), ca, "CA file", Pem::Certificate));
    let server_name = raw
        .server_name
        .as_ref()
        .and_then(|value| server_name(cx, &path.key("server_name"), value));
    let client_cert = client_cert(cx, path, raw);
    let insecure = raw.insecure_skip_verify.as_ref().filter(|v| *v.get_ref());
    if let Some(insecure) = insecure {
        if let Some(ca) = &raw.ca {
            let message = "`ca` and insecure_skip_verify = true cannot be used together";
            let hint = "remove insecure_skip_verify: with `ca` the servers' certificates are checked against that CA";
            cx.r.error(&path.key("ca"), Some(ca.span()), message, Some(hint.into()));
        } else {
            let message =
                format!("the certificates of upstream `{name}`'s servers are not verified");
            let hint = "anyone on the network path can pose as these servers: set `ca` to the CA that signed their certificates instead";
            let key = path.key("insecure_skip_verify");
            cx.r.warn(&key, Some(insecure.span()), message, Some(hint.into()));
        }
    }
    UpstreamTls {
        ca,
        server_name,
        client_cert,
        insecure_skip_verify: insecure.is_some(),
    }
}

/// `client_cert` and `client_key` go together.
fn client_cert(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawUpstreamTls) -> Option<CertFiles> {
    let (cert, key) = match (&raw.client_cert, &raw.client_key) {
        (None, None) => return None,
        (Some(cert), Some(key)) => (cert, key),
        (Some(_), None) => {
            let hint = r#"add client_key = "...", the PEM private key of the client certificate"#;
            cx.r.missing(path, "client_key", Some(hint.into()));
            return None;
        }
        (None, Some(_)) => {
            let hint = r#"add client_cert = "...", the PEM certificate (chain) of this key"#;
            cx.r.missing(path, "client_cert", Some(hint.into()));
            return None;
        }
    };
    let what = "client certificate file";
    let cert = pem_file(cx, &path.key("client_cert"), cert, what, Pem::Certificate);
    let what = "client key file";
    let key = pem_file(cx, &path.key("client_key"), key, what, Pem::PrivateKey);
    Some(CertFiles {
        cert: cert?,
        key: key?,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pem {
    Certificate,
    PrivateKey,
}

/// An existing file holding PEM of the expected kind. Only the armour lines are looked at (the
/// config crate has no TLS library): enough to catch a DER file, a swapped cert and key, or the
/// wrong file altogether.
fn pem_file(
    cx: &mut Cx<'_>,
    key: &KeyPath,
    value: &Spanned<String>,
    what: &str,
    kind: Pem,
) -> Option<PathBuf> {
    let path = cx.existing(key, value, what, Kind::File)?;
    let text = std::fs::read(&path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let found = match kind {
        Pem::Certificate => text.contains("-----BEGIN CERTIFICATE-----"),
        // PKCS#8 (`PRIVATE KEY`), PKCS#1 (`RSA PRIVATE KEY`) and SEC1 (`EC PRIVATE KEY`).
        Pem::PrivateKey => text.contains("PRIVATE KEY-----"),
    };
    if found {
        return Some(path);
    }
    let written = value.get_ref();
    let (message, hint) = match kind {
        Pem::Certificate if text.contains("PRIVATE KEY-----") => (
            format!("the {what} `{written}` holds a private key, not a certificate"),
            "certificates and keys may be swapped: the certificate is the file with -----BEGIN CERTIFICATE-----",
        ),
        Pem::Certificate => (
            format!("the {what} `{written}` holds no PEM certificate"),
            "expected one or more -----BEGIN CERTIFICATE----- blocks (convert DER with `openssl x509 -inform der`)",
        ),
        Pem::PrivateKey if text.contains("-----BEGIN CERTIFICATE-----") => (
            format!("the {what} `{written}` holds a certificate, not a private key"),
            "certificates and keys may be swapped: the key is the file with -----BEGIN PRIVATE KEY-----",
        ),
        Pem::PrivateKey => (
            format!("the {what} `{written}` holds no PEM private key"),
            "expected a -----BEGIN PRIVATE KEY----- block (PKCS#8, or RSA/EC PRIVATE KEY)",
        ),
    };
    cx.r.error(key, Some(value.span()), message, Some(hint.into()));
    None
}

/// A DNS name or an IP address, as a certificate names it: no scheme, port or path.
fn server_name(cx: &mut Cx<'_>, key: &KeyPath, value: &Spanned<String>) -> Option<String> {
    let text = value.get_ref().trim();
    let host = text
        .split_once("://")
        .map_or(text, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.split_once(']'))
        .map_or_else(
            || host.rsplit_once(':').map_or(host, |(h, _)| h),
            |(h, _)| h,
        );
    let is_ip = bare.parse::<std::net::IpAddr>().is_ok();
    let is_dns = !bare.is_empty()
        && bare.len() <= 253
        && bare.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        });
    if (is_ip || is_dns) && bare == text {
        return Some(text.to_owned());
    }
    let (message, hint) = if text.is_empty() {
        (
            "the server_name is empty".to_owned(),
            "remove it to use each server's host, or write the name the certificates carry"
                .to_owned(),
        )
    } else if is_ip || is_dns {
        (
            format!("invalid server_name `{text}`"),
            format!(r#"write only the name the certificates carry: server_name = "{bare}""#),
        )
    } else {
        (
            format!("invalid server_name `{text}`"),
            r#"write a DNS name or IP address, e.g. server_name = "api.internal""#.to_owned(),
        )
    };
    cx.r.error(key, Some(value.span()), message, Some(hint));
    None
}

/// Checks between TLS and the group's other settings.
pub(super) fn check_group(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    name: &str,
    tls: Option<&UpstreamTls>,
    servers: &[UpstreamServer],
) {
    let Some(tls) = tls else { return };
    let unix = servers
        .iter()
        .any(|s| matches!(s.address, UpstreamAddress::Unix(_)));
    // Even insecure_skip_verify needs a name: rustls sends it as SNI, and a unix path is none.
    if unix && tls.server_name.is_none() {
        let message =
            format!("upstream `{name}` has a unix socket server, and TLS needs a name to verify");
        let hint =
            r#"add server_name = "..." to the group's tls table: the name its certificate carries"#;
        cx.r.error(&path.key("servers"), None, message, Some(hint.into()));
    }
}
