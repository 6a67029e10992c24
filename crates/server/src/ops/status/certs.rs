//! The certificates the TLS listeners serve, as the status page lists them: names and validity
//! of each leaf, read from the same PEM files, when the listener loads them (start-up, reload).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use sluice_config::{Config, HostMatch, Tls};

use crate::shared::acme::AcmeCert;

/// One served certificate (the leaf of a chain).
#[derive(Debug, Clone)]
pub struct Certificate {
    pub listener: String,
    /// `file` (a PEM file of the config), `self_signed` (made in memory at start-up) or `acme`
    /// (ordered from a CA, docs/acme.md: its validity and renewal are read live from `acme`).
    pub source: &'static str,
    /// The managed certificate of an `acme` listener.
    pub acme: Option<Arc<AcmeCert>>,
    /// The PEM file, for `file`.
    pub file: Option<String>,
    /// The SNI names it is chosen for, as configured; empty for the listener's default.
    pub sni: Vec<String>,
    pub subject: Option<String>,
    pub issuer: Option<String>,
    /// DNS names and IP addresses of its subjectAltName extension (or the configured names of
    /// a self-signed one).
    pub names: Vec<String>,
    /// Validity, seconds since the Unix epoch; `None` for a self-signed one.
    pub not_before: Option<i64>,
    pub not_after: Option<i64>,
    /// Why it could not be read (the listener loaded it a moment before, so: changed since).
    pub error: Option<String>,
}

/// The certificates of every TLS listener of `config`, in file order; `acme` holds the managed
/// certificates of its `tls = "acme"` listeners, by their names.
pub fn of_config(config: &Config, acme: &HashMap<Vec<String>, Arc<AcmeCert>>) -> Vec<Certificate> {
    let mut out = Vec::new();
    for listener in &config.listeners {
        match &listener.tls {
            None => {}
            Some(Tls::SelfSigned { hosts }) => out.push(Certificate {
                listener: listener.name.clone(),
                source: "self_signed",
                acme: None,
                file: None,
                sni: Vec::new(),
                subject: None,
                issuer: None,
                names: hosts.clone(),
                not_before: None,
                not_after: None,
                error: None,
            }),
            Some(Tls::Acme { names }) => out.push(Certificate {
                listener: listener.name.clone(),
                source: "acme",
                acme: acme.get(names).cloned(),
                file: None,
                sni: Vec::new(),
                subject: None,
                issuer: None,
                names: names.clone(),
                not_before: None,
                not_after: None,
                error: None,
            }),
            Some(Tls::Files { default, sni }) => {
                out.push(from_file(&listener.name, &default.cert, Vec::new()));
                for entry in sni {
                    let hosts = entry
                        .hosts
                        .iter()
                        .map(|h| match h {
                            HostMatch::Exact(host) => host.clone(),
                            HostMatch::Suffix(suffix) => format!("*{suffix}"),
                        })
                        .collect();
                    out.push(from_file(&listener.name, &entry.files.cert, hosts));
                }
            }
        }
    }
    out
}

fn from_file(listener: &str, path: &Path, sni: Vec<String>) -> Certificate {
    let mut cert = Certificate {
        listener: listener.to_owned(),
        source: "file",
        acme: None,
        file: Some(path.display().to_string()),
        sni,
        subject: None,
        issuer: None,
        names: Vec::new(),
        not_before: None,
        not_after: None,
        error: None,
    };
    if let Err(why) = read_leaf(path, &mut cert) {
        cert.error = Some(why);
    }
    cert
}

fn read_leaf(path: &Path, cert: &mut Certificate) -> Result<(), String> {
    use x509_parser::extensions::GeneralName;
    let pem = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem)
        .map_err(|e| format!("{}: not PEM ({e})", path.display()))?;
    let leaf = pem
        .parse_x509()
        .map_err(|e| format!("{}: not an X.509 certificate ({e})", path.display()))?;
    cert.subject = Some(leaf.subject().to_string());
    cert.issuer = Some(leaf.issuer().to_string());
    cert.not_before = Some(leaf.validity().not_before.timestamp());
    cert.not_after = Some(leaf.validity().not_after.timestamp());
    if let Ok(Some(san)) = leaf.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => cert.names.push((*dns).to_owned()),
                GeneralName::IPAddress(ip) => {
                    let ip = match ip.len() {
                        4 => <[u8; 4]>::try_from(*ip).ok().map(std::net::IpAddr::from),
                        16 => <[u8; 16]>::try_from(*ip).ok().map(std::net::IpAddr::from),
                        _ => None,
                    };
                    if let Some(ip) = ip {
                        cert.names.push(ip.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Seconds from `now` to `not_after` (negative once expired).
pub fn expires_in(not_after: i64, now: SystemTime) -> i64 {
    let now = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    not_after - now
}
