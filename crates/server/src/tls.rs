//! TLS for listeners: a rustls server configuration with the listener's ALPN protocols and its
//! certificates (files, SNI entries, or a self-signed one made at start-up).
//!
//! ALPN decides the HTTP version on a TLS connection: a listener offering only `http/1.1` never
//! selects h2, whatever the client offers (seed 002 runs an h1 port and an h2 port side by side).

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::crypto::ring;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sluice_config::{CertFiles, HostMatch, Protocols, Tls};

use crate::cert;

/// Why a listener's TLS could not be set up.
#[derive(Debug)]
pub struct TlsError(pub String);

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

/// Build the rustls configuration of a listener.
pub fn server_config(tls: &Tls, protocols: Protocols) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(ring::default_provider());
    let resolver = Arc::new(CertResolver::new(tls, &provider)?);
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(format!("TLS protocol versions: {e}")))?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = alpn_protocols(protocols);
    Ok(Arc::new(config))
}

/// ALPN protocol ids in preference order: h2 first when offered.
pub fn alpn_protocols(protocols: Protocols) -> Vec<Vec<u8>> {
    let mut alpn = Vec::with_capacity(2);
    if protocols.http2 {
        alpn.push(b"h2".to_vec());
    }
    if protocols.http1 {
        alpn.push(b"http/1.1".to_vec());
    }
    alpn
}

/// Picks a certificate by SNI: exact host, then `*.suffix`, then the default.
#[derive(Debug)]
struct CertResolver {
    default: Arc<CertifiedKey>,
    sni: Vec<(Vec<HostMatch>, Arc<CertifiedKey>)>,
}

impl CertResolver {
    fn new(tls: &Tls, provider: &rustls::crypto::CryptoProvider) -> Result<Self, TlsError> {
        match tls {
            Tls::SelfSigned { hosts } => {
                let hosts = if hosts.is_empty() {
                    cert::DEFAULT_HOSTS
                        .iter()
                        .map(|h| (*h).to_string())
                        .collect()
                } else {
                    hosts.clone()
                };
                let dev = cert::generate(&hosts)
                    .map_err(|e| TlsError(format!("making a self-signed certificate: {e}")))?;
                let key = certified_key(
                    dev.chain_pem.as_bytes(),
                    dev.leaf_key_pem.as_bytes(),
                    provider,
                )
                .map_err(|e| TlsError(format!("self-signed certificate: {e}")))?;
                Ok(Self {
                    default: key,
                    sni: Vec::new(),
                })
            }
            Tls::Files { default, sni } => {
                let default = load_files(default, provider)?;
                let sni = sni
                    .iter()
                    .map(|entry| Ok((entry.hosts.clone(), load_files(&entry.files, provider)?)))
                    .collect::<Result<_, TlsError>>()?;
                Ok(Self { default, sni })
            }
        }
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let Some(name) = hello.server_name() else {
            return Some(self.default.clone());
        };
        let name = name.to_ascii_lowercase();
        let exact = self.sni.iter().find(|(hosts, _)| {
            hosts
                .iter()
                .any(|h| matches!(h, HostMatch::Exact(_)) && h.matches(&name))
        });
        let chosen = exact.or_else(|| {
            self.sni
                .iter()
                .find(|(hosts, _)| hosts.iter().any(|h| h.matches(&name)))
        });
        Some(chosen.map_or_else(|| self.default.clone(), |(_, key)| key.clone()))
    }
}

fn load_files(
    files: &CertFiles,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<Arc<CertifiedKey>, TlsError> {
    let cert = std::fs::read(&files.cert)
        .map_err(|e| TlsError(format!("reading certificate {}: {e}", files.cert.display())))?;
    let key = std::fs::read(&files.key)
        .map_err(|e| TlsError(format!("reading key {}: {e}", files.key.display())))?;
    certified_key(&cert, &key, provider).map_err(|e| {
        TlsError(format!(
            "certificate {} with key {}: {e}",
            files.cert.display(),
            files.key.display()
        ))
    })
}

fn certified_key(
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &rustls::crypto::CryptoProvider,
) -> Result<Arc<CertifiedKey>, String> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM certificate chain ({e})"))?;
    if chain.is_empty() {
        return Err("no certificate found in the PEM file".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("not a PEM private key ({e})"))?;
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("unusable private key: {e}"))?;
    let certified = CertifiedKey::new(chain, signing_key);
    certified
        .keys_match()
        .map_err(|e| format!("certificate and key do not match: {e}"))?;
    Ok(Arc::new(certified))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn h1_only_listener_offers_no_h2() {
        let alpn = alpn_protocols(Protocols {
            http1: true,
            http2: false,
        });
        assert_eq!(alpn, vec![b"http/1.1".to_vec()]);
        let both = alpn_protocols(Protocols::default());
        assert_eq!(both, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
    }

    #[test]
    fn mismatched_key_is_refused() {
        let a = cert::generate(&["a.test".into()]).unwrap();
        let b = cert::generate(&["b.test".into()]).unwrap();
        let provider = ring::default_provider();
        let err = certified_key(a.chain_pem.as_bytes(), b.leaf_key_pem.as_bytes(), &provider);
        assert!(err.unwrap_err().contains("do not match"));
    }
}
