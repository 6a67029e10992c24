//! What automatic certificates (docs/acme.md) share between layers: the certificate a TLS
//! listener serves and its renewal state ([`AcmeCert`]), and the HTTP-01 tokens
//! ([`Http01Tokens`]).
//!
//! Written by `ops::acme` (the task that orders and renews), read by `net::tls` (the resolver
//! picks [`AcmeCert::current`], or the TLS-ALPN-01 certificate for a handshake offering only
//! `acme-tls/1`), by the pipeline (the challenge path on listeners without TLS) and by whoever
//! shows certificates (the status page: [`AcmeCert::renewal`]). Here rather than in `ops` because
//! `net` and the pipeline read them, and they may not import the layer above.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use rustls::sign::CertifiedKey;

/// The ALPN protocol of TLS-ALPN-01 (RFC 8737 §6.2).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// One ACME certificate: the names it covers, the certificate served now (self-signed until the
/// first one arrives), the TLS-ALPN-01 certificates of an order in progress, and its renewal
/// state. One per set of names, kept across reloads while a listener asks for those names.
pub struct AcmeCert {
    names: Vec<String>,
    current: ArcSwap<CertifiedKey>,
    challenges: Mutex<HashMap<String, Arc<CertifiedKey>>>,
    renewal: Mutex<RenewalState>,
}

/// Where a certificate's renewal stands: what the status page shows as `"renewal"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenewalState {
    /// Whether the certificate served came from the CA (`false`: the self-signed stand-in).
    pub issued: bool,
    /// The served certificate's validity.
    pub not_before: Option<SystemTime>,
    pub not_after: Option<SystemTime>,
    /// When the next order is due (two thirds of the life, or the CA's ARI window).
    pub renew_at: Option<SystemTime>,
    /// Failed attempts since the last success, and the last failure's message.
    pub failures: u32,
    pub last_error: Option<String>,
    /// When the next attempt runs after a failure.
    pub retry_at: Option<SystemTime>,
}

impl AcmeCert {
    /// A certificate for `names`, serving `stand_in` until one is installed.
    pub fn new(names: Vec<String>, stand_in: Arc<CertifiedKey>) -> Arc<Self> {
        Arc::new(Self {
            names,
            current: ArcSwap::new(stand_in),
            challenges: Mutex::new(HashMap::new()),
            renewal: Mutex::new(RenewalState::default()),
        })
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The certificate to present now. Loaded once per handshake, so a swap reaches the next
    /// handshake while open connections keep the one they started with.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.load_full()
    }

    /// Serve `key` from the next handshake on.
    pub fn install(&self, key: Arc<CertifiedKey>) {
        self.current.store(key);
    }

    /// The TLS-ALPN-01 certificate for `name`, while its challenge is open.
    pub fn challenge(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        lock(&self.challenges).get(name).cloned()
    }

    pub fn set_challenge(&self, name: &str, key: Option<Arc<CertifiedKey>>) {
        let mut challenges = lock(&self.challenges);
        match key {
            Some(key) => challenges.insert(name.to_owned(), key),
            None => challenges.remove(name),
        };
    }

    /// The renewal state, for the status page and logs.
    pub fn renewal(&self) -> RenewalState {
        lock(&self.renewal).clone()
    }

    /// Change the renewal state (the ACME task only).
    pub fn update_renewal(&self, change: impl FnOnce(&mut RenewalState)) {
        change(&mut lock(&self.renewal));
    }
}

impl std::fmt::Debug for AcmeCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcmeCert")
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

/// HTTP-01 tokens being validated (RFC 8555 §8.3): token to key authorization. One per
/// process; every listener without TLS answers from it.
#[derive(Debug, Default)]
pub struct Http01Tokens(Mutex<HashMap<String, String>>);

impl Http01Tokens {
    pub fn get(&self, token: &str) -> Option<String> {
        lock(&self.0).get(token).cloned()
    }

    pub fn insert(&self, token: String, key_authorization: String) {
        lock(&self.0).insert(token, key_authorization);
    }

    pub fn remove(&self, token: &str) {
        lock(&self.0).remove(token);
    }
}

/// A poisoned lock only means a panic elsewhere while holding it; the maps stay consistent
/// (each change is one insert or remove).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
