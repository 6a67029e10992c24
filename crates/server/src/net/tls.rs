//! TLS for listeners: a rustls server configuration with the listener's ALPN protocols and its
//! certificates (files, SNI entries, or a self-signed one made at start-up).
//!
//! ALPN decides the HTTP version on a TLS connection: a listener offering only `http/1.1` never
//! selects h2, whatever the client offers (seed 002 runs an h1 port and an h2 port side by side).
//!
//! Choices made here for cost per connection and per request (measurements and the profile
//! behind them: docs/performance.md, "TLS"; what operators see: docs/operations.md):
//! - Session resumption ([`Resumption`]): stateless tickets (TLS 1.3 and 1.2) whose keys rotate,
//!   and a session-ID cache for TLS 1.2 clients without tickets. A resumed handshake skips the
//!   certificate and its signature (and, for TLS 1.2, the key exchange).
//! - Protocol versions: TLS 1.2 and 1.3 (rustls's safe defaults), as before.
//! - Cipher suites: rustls's *ring* defaults, AEAD only (AES-GCM, ChaCha20-Poly1305), forward
//!   secret key exchange only; in its order, AES-GCM first. The client's order decides
//!   (`ignore_client_order` stays false): clients with AES hardware (every current browser,
//!   OpenSSL, Go on x86-64 or ARMv8 with AES) list AES-GCM first and get it, and a client without
//!   AES hardware lists ChaCha20 first, which is cheaper *for it* — imposing AES-GCM would make
//!   that client slower for no gain here: on 120-byte responses the suite makes no measurable
//!   difference to the server's CPU per request (docs/performance.md).
//! - Records: rustls's default maximum of 16 KiB per record (`max_fragment_size` unset): fewest
//!   seals and record headers for large bodies; a small response is one record whatever the
//!   limit, since the socket wrappers pass hyper's head and body to rustls as one vectored write.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::crypto::ring;
use rustls::server::{
    ClientHello, ProducesTickets, ResolvesServerCert, ServerSessionMemoryCache,
    StoresServerSessions,
};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sluice_config::{CertFiles, HostMatch, Protocols, Tls};

use crate::net::cert;
use crate::shared::acme::{ACME_TLS_ALPN, AcmeCert};

/// Why a listener's TLS could not be set up.
#[derive(Debug)]
pub struct TlsError(pub String);

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

/// Build the rustls configuration of a listener, resuming sessions with `resumption`.
pub fn server_config(
    tls: &Tls,
    protocols: Protocols,
    resumption: &Resumption,
) -> Result<Arc<ServerConfig>, TlsError> {
    server_config_with(tls, protocols, resumption, None)
}

/// [`server_config`] for a listener with `tls = "acme"`: its certificate is `acme`'s current
/// one, swapped without a reload, and ALPN also offers `acme-tls/1` (after the HTTP
/// protocols, so no HTTP client ever gets it) for TLS-ALPN-01 (RFC 8737).
pub fn server_config_with(
    tls: &Tls,
    protocols: Protocols,
    resumption: &Resumption,
    acme: Option<Arc<AcmeCert>>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(ring::default_provider());
    let offers_acme = acme.is_some();
    let resolver = Arc::new(CertResolver::new(tls, &provider, acme)?);
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(format!("TLS protocol versions: {e}")))?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = alpn_protocols(protocols);
    if offers_acme {
        config.alpn_protocols.push(ACME_TLS_ALPN.to_vec());
    }
    config.ticketer = resumption.ticketer.clone();
    config.session_storage = resumption.cache.clone();
    // TLS 1.3 tickets sent after each full or resumed handshake (RFC 8446 §4.6.1). Clients should
    // use a ticket once (RFC 8446 §C.4), so two let a client open two connections at once and
    // resume both; each is one AEAD seal of ~100 bytes, sent in the same write as the
    // handshake's last flight. The same count as OpenSSL (and so HAProxy, nginx) by default.
    config.send_tls13_tickets = TLS13_TICKETS;
    Ok(Arc::new(config))
}

/// The rustls configuration of a listener's QUIC side (HTTP/3), made from its TCP side's
/// `tcp` so both present the same certificates (the same resolver, so the same self-signed
/// certificate too) and resume with the same ticket keys: TLS 1.3 only (RFC 9001 §4.2), ALPN
/// `h3` only (RFC 9114 §3.1), and no early data: 0-RTT requests can be replayed (RFC 9001 §9.2,
/// RFC 8470), and nothing here tells a replay from a request (docs/http3.md).
pub fn quic_server_config(tcp: &ServerConfig) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TlsError(format!("TLS 1.3 for QUIC: {e}")))?
        .with_no_client_auth()
        .with_cert_resolver(tcp.cert_resolver.clone());
    config.alpn_protocols = vec![b"h3".to_vec()];
    config.ticketer = tcp.ticketer.clone();
    config.session_storage = tcp.session_storage.clone();
    config.send_tls13_tickets = TLS13_TICKETS;
    config.max_early_data_size = 0;
    Ok(config)
}

/// Tickets sent per TLS 1.3 handshake (see [`server_config`]).
const TLS13_TICKETS: usize = 2;

/// TLS 1.2 sessions kept for clients that resume by session ID rather than a ticket (TLS 1.3
/// resumes with tickets only). HAProxy's default (`tune.ssl.cachesize`); an entry is a few hundred
/// bytes, so the cache stays under ~5 MB full, and fills only as such clients come.
const SESSION_CACHE_ENTRIES: usize = 20_000;

/// A listener's session resumption state: the ticket keys and the TLS 1.2 session cache.
///
/// Tickets are stateless: the session is sealed into the ticket with a key only this process
/// holds (ChaCha20-Poly1305, rustls's `Ticketer`). The key is random, made at start-up, and
/// replaced every 6 hours; a ticket stays valid under the previous key, so for 6 to 12 hours.
/// Rotation bounds what a stolen key would let an attacker decrypt (tickets carry the session's
/// secrets: RFC 8446 §8.1 and RFC 5077 §5.5 on forward secrecy); the keys never leave memory.
///
/// A reload keeps a listener's state when its certificates (the `tls` settings) are unchanged, so
/// clients resume across reloads; new certificate settings, a new listener, or a restart start
/// afresh (clients then do one full handshake). Listeners never share it: a session resumed on
/// a listener was authenticated with that listener's certificates.
#[derive(Clone)]
pub struct Resumption {
    /// The listener settings this state was made for, and the ticket key file's text.
    made_for: Tls,
    keys_text: Option<String>,
    ticketer: Arc<dyn ProducesTickets>,
    cache: Arc<dyn StoresServerSessions>,
}

impl Resumption {
    /// `previous` if it was made for the same TLS settings, a fresh state otherwise.
    pub fn keep_or_new(previous: Option<&Resumption>, tls: &Tls) -> Result<Self, TlsError> {
        Self::keep_or_new_with(previous, tls, None)
    }

    /// [`Resumption::keep_or_new`], with ticket keys from `ticket_keys` when given (a fleet's
    /// shared file, [`crate::net::tickets`]): read now, so a reload picks up rotated keys.
    pub fn keep_or_new_with(
        previous: Option<&Resumption>,
        tls: &Tls,
        ticket_keys: Option<&std::path::Path>,
    ) -> Result<Self, TlsError> {
        let keys_text =
            match ticket_keys {
                Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
                    TlsError(format!("session ticket keys `{}`: {e}", path.display()))
                })?),
                None => None,
            };
        match previous {
            Some(kept) if kept.made_for == *tls && kept.keys_text == keys_text => Ok(kept.clone()),
            _ => Self::new(tls, keys_text),
        }
    }

    fn new(tls: &Tls, keys_text: Option<String>) -> Result<Self, TlsError> {
        let ticketer: Arc<dyn ProducesTickets> = match &keys_text {
            Some(text) => Arc::new(
                crate::net::tickets::FileTicketer::parse(text)
                    .map_err(|e| TlsError(format!("session ticket keys: {e}")))?,
            ),
            None => ring::Ticketer::new()
                .map_err(|e| TlsError(format!("making session ticket keys: {e}")))?,
        };
        Ok(Self {
            made_for: tls.clone(),
            keys_text,
            ticketer,
            cache: ServerSessionMemoryCache::new(SESSION_CACHE_ENTRIES),
        })
    }
}

impl std::fmt::Debug for Resumption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resumption")
            .field("ticket_lifetime_s", &self.ticketer.lifetime())
            .finish_non_exhaustive()
    }
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

/// Picks a certificate by SNI: exact host, then `*.suffix`, then the default; on an ACME
/// listener, the ACME certificate (or, for a TLS-ALPN-01 handshake, its challenge certificate).
#[derive(Debug)]
struct CertResolver {
    default: Arc<CertifiedKey>,
    sni: Vec<(Vec<HostMatch>, Arc<CertifiedKey>)>,
    acme: Option<Arc<AcmeCert>>,
}

impl CertResolver {
    fn new(
        tls: &Tls,
        provider: &rustls::crypto::CryptoProvider,
        acme: Option<Arc<AcmeCert>>,
    ) -> Result<Self, TlsError> {
        if let Some(acme) = acme {
            return Ok(Self {
                default: acme.current(),
                sni: Vec::new(),
                acme: Some(acme),
            });
        }
        match tls {
            // An ACME listener always comes with its certificate (`server_config_with`); this
            // is a stand-in for a caller that built one without.
            Tls::Acme { names } => Self::new(
                &Tls::SelfSigned {
                    hosts: names.clone(),
                },
                provider,
                None,
            ),
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
                    acme: None,
                })
            }
            Tls::Files { default, sni } => {
                let default = load_files(default, provider)?;
                let sni = sni
                    .iter()
                    .map(|entry| Ok((entry.hosts.clone(), load_files(&entry.files, provider)?)))
                    .collect::<Result<_, TlsError>>()?;
                Ok(Self {
                    default,
                    sni,
                    acme: None,
                })
            }
        }
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if let Some(acme) = &self.acme {
            // RFC 8737 §3: a TLS-ALPN-01 validation offers `acme-tls/1` as its only protocol
            // and must get the challenge certificate for its SNI, or no handshake at all.
            let validation = hello.alpn().is_some_and(|offered| {
                let mut offered = offered.peekable();
                offered.peek().is_some() && offered.all(|p| p == ACME_TLS_ALPN)
            });
            if validation {
                return hello
                    .server_name()
                    .and_then(|name| acme.challenge(&name.to_ascii_lowercase()));
            }
            return Some(acme.current());
        }
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

/// A rustls certificate from a PEM chain and PEM private key, checked to match.
pub fn certified_key(
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
    use super::*;

    #[test]
    fn h1_only_listener_offers_no_h2() {
        let alpn = alpn_protocols(Protocols {
            http1: true,
            http2: false,
            http3: true,
        });
        assert_eq!(alpn, vec![b"http/1.1".to_vec()]);
        let both = alpn_protocols(Protocols::default());
        assert_eq!(both, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
    }

    #[test]
    fn tickets_and_a_session_cache_are_on() {
        let tls = Tls::SelfSigned { hosts: Vec::new() };
        let resumption = Resumption::keep_or_new(None, &tls).unwrap();
        let config = server_config(&tls, Protocols::default(), &resumption).unwrap();
        assert!(config.ticketer.enabled());
        // Keys rotate every 6 hours; a ticket is accepted under the current or previous key.
        assert_eq!(config.ticketer.lifetime(), 12 * 60 * 60);
        assert!(config.session_storage.can_cache());
        assert_eq!(config.send_tls13_tickets, TLS13_TICKETS);
    }

    #[test]
    fn a_reload_keeps_ticket_keys_only_for_the_same_certificates() {
        let tls = Tls::SelfSigned {
            hosts: vec!["a.test".into()],
        };
        let first = Resumption::keep_or_new(None, &tls).unwrap();
        let kept = Resumption::keep_or_new(Some(&first), &tls).unwrap();
        assert!(Arc::ptr_eq(&first.ticketer, &kept.ticketer));
        assert!(Arc::ptr_eq(&first.cache, &kept.cache));
        let other = Tls::SelfSigned {
            hosts: vec!["b.test".into()],
        };
        let fresh = Resumption::keep_or_new(Some(&first), &other).unwrap();
        assert!(!Arc::ptr_eq(&first.ticketer, &fresh.ticketer));
        assert!(!Arc::ptr_eq(&first.cache, &fresh.cache));
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
