//! A listener's `tls`: the `"self-signed"` shorthand, or a table with either `self_signed = true`
//! or certificate files (plus SNI certificates). Certificates are only checked to exist here;
//! reading and parsing the PEM is the server's (it owns rustls).

use toml::Spanned;

use super::Cx;
use super::files::Kind;
use crate::model::{CertFiles, HostMatch, SniCertificate, Tls};
use crate::path::KeyPath;
use crate::raw::{RawSni, RawTls, RawTlsTable};

/// The hosts of `tls = "self-signed"`: what a browser on the same machine asks for.
fn default_self_signed_hosts() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into()]
}

pub(super) fn tls(cx: &mut Cx<'_>, path: &KeyPath, raw: Option<&Spanned<RawTls>>) -> Option<Tls> {
    let raw = raw?;
    match raw.get_ref() {
        RawTls::Shorthand(text) if text == "self-signed" => Some(Tls::SelfSigned {
            hosts: default_self_signed_hosts(),
        }),
        // The names are filled in by `acme::resolve_names` once the routes are known.
        RawTls::Shorthand(text) if text == "acme" => Some(Tls::Acme { names: Vec::new() }),
        RawTls::Shorthand(text) => {
            let hint = if text.ends_with(".pem") || text.ends_with(".crt") {
                format!(
                    r#"certificate files go in a table: tls = {{ cert = "{text}", key = "..." }}"#
                )
            } else {
                r#"write tls = "self-signed", tls = "acme", or a table with cert and key"#.into()
            };
            cx.r.error(
                path,
                Some(raw.span()),
                format!("unknown tls shorthand `{text}`"),
                Some(hint),
            );
            None
        }
        RawTls::Table(table) => tls_table(cx, path, table),
    }
}

/// `session_ticket_keys = "file"` of a `tls` table: an existing file (its keys are read and
/// checked by the server, which owns the crypto, at start-up and on reload).
pub(super) fn ticket_keys(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: Option<&Spanned<RawTls>>,
) -> Option<std::path::PathBuf> {
    let RawTls::Table(table) = raw?.get_ref() else {
        return None;
    };
    let file = table.session_ticket_keys.as_ref()?;
    cx.existing(
        &path.key("session_ticket_keys"),
        file,
        "session ticket key file",
        Kind::File,
    )
}

fn tls_table(cx: &mut Cx<'_>, path: &KeyPath, t: &RawTlsTable) -> Option<Tls> {
    let self_signed = t.self_signed.as_ref().is_some_and(|v| *v.get_ref());
    if self_signed {
        return self_signed_table(cx, path, t);
    }
    if let Some(hosts) = &t.hosts {
        let hint =
            "add self_signed = true, or remove `hosts`: a certificate file names its own hosts";
        let message = "`hosts` applies only to a self-signed certificate";
        cx.r.error(
            &path.key("hosts"),
            Some(hosts.span()),
            message,
            Some(hint.into()),
        );
    }
    let default = match (&t.cert, &t.key) {
        (None, None) => {
            if !cx.r.misspelt(path, &["cert", "key", "self_signed"]) {
                let hint = r#"add cert and key (PEM files), or self_signed = true (or write tls = "self-signed")"#;
                cx.r.error(
                    path,
                    None,
                    "a TLS listener needs a certificate",
                    Some(hint.into()),
                );
            }
            None
        }
        (cert, key) => cert_files(cx, path, cert.as_ref(), key.as_ref()),
    };
    let mut sni = Vec::new();
    for (i, entry) in t.sni.iter().enumerate() {
        sni.extend(sni_certificate(cx, &path.key("sni").index(i), entry));
    }
    Some(Tls::Files {
        default: default?,
        sni,
    })
}

fn self_signed_table(cx: &mut Cx<'_>, path: &KeyPath, t: &RawTlsTable) -> Option<Tls> {
    for (key, value) in [("cert", &t.cert), ("key", &t.key)] {
        if let Some(value) = value {
            let message = format!("`{key}` cannot be used together with self_signed = true");
            let hint = "remove self_signed to serve the files, or remove cert and key";
            cx.r.error(
                &path.key(key),
                Some(value.span()),
                message,
                Some(hint.into()),
            );
        }
    }
    if !t.sni.is_empty() {
        let message = "SNI certificates need certificate files, not self_signed = true";
        let hint =
            "list every host in `hosts` instead: one self-signed certificate covers them all";
        cx.r.error(&path.key("sni"), None, message, Some(hint.into()));
    }
    let hosts = match &t.hosts {
        None => default_self_signed_hosts(),
        Some(hosts) => cx
            .host_patterns(&path.key("hosts"), hosts)
            .into_iter()
            .map(|host| match host {
                HostMatch::Exact(name) => name,
                HostMatch::Suffix(suffix) => format!("*{suffix}"),
            })
            .collect(),
    };
    Some(Tls::SelfSigned { hosts })
}

/// Both files, each existing; reports a missing half.
fn cert_files(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    cert: Option<&Spanned<String>>,
    key: Option<&Spanned<String>>,
) -> Option<CertFiles> {
    let cert = match cert {
        Some(cert) => cx.existing(&path.key("cert"), cert, "certificate file", Kind::File),
        None => {
            let hint = r#"add cert = "...", the PEM certificate chain for this key"#;
            cx.r.missing(path, "cert", Some(hint.into()));
            None
        }
    };
    let key = match key {
        Some(key) => cx.existing(&path.key("key"), key, "private key file", Kind::File),
        None => {
            let hint = r#"add key = "...", the PEM private key of this certificate"#;
            cx.r.missing(path, "key", Some(hint.into()));
            None
        }
    };
    Some(CertFiles {
        cert: cert?,
        key: key?,
    })
}

fn sni_certificate(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawSni) -> Option<SniCertificate> {
    let hosts = match &raw.hosts {
        Some(hosts) => cx.host_patterns(&path.key("hosts"), hosts),
        None => {
            let hint = r#"e.g. hosts = ["api.example.com", "*.example.com"]"#;
            cx.r.missing(path, "hosts", Some(hint.into()));
            Vec::new()
        }
    };
    let files = cert_files(cx, path, raw.cert.as_ref(), raw.key.as_ref())?;
    (!hosts.is_empty()).then_some(SniCertificate { hosts, files })
}
