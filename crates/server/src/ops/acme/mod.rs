//! Automatic certificates (ACME, RFC 8555; docs/acme.md): one task per certificate (a set of
//! names) orders it from the CA with instant-acme, stores it ([`store`]), swaps it into the
//! listeners' resolver ([`AcmeCert::install`]: the next handshake gets it, open connections are
//! untouched) and renews it at two thirds of its life, or in the window the CA suggests by ACME
//! Renewal Information (RFC 9773) when it offers that.
//!
//! Failures are logged, counted (`sluice_acme_orders_total{result="failed"}`) and retried with
//! a doubling wait from `[acme] retry_after_failure` up to six hours; the certificate served
//! (the previous one, or the self-signed stand-in before the first) keeps serving. Instances
//! sharing the storage directory look there first and order only under the certificate's lock
//! file ([`store::Store::lock`]), so one orders and the others pick the result up from disk.
//!
//! Challenges: HTTP-01 tokens go into the process's [`Http01Tokens`], answered by listeners
//! without TLS (`crate::pipeline::acme`); TLS-ALPN-01 certificates (RFC 8737 §3: the name as
//! its only SAN and the critical `acmeIdentifier` extension holding the SHA-256 of the key
//! authorization, made with rcgen) go into the [`AcmeCert`], offered by the TLS listener to a
//! handshake whose only ALPN protocol is `acme-tls/1`.

mod order;
pub mod store;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use instant_acme::{Account, AccountCredentials, CertificateIdentifier, NewAccount};
use rustls::sign::CertifiedKey;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use sluice_config::{Acme, MAX_RETRY};
use tokio::task::JoinHandle;

use crate::net::{cert, tls};
use crate::shared::acme::{AcmeCert, Http01Tokens};
use crate::shared::metrics::Metrics;
use crate::shared::metrics::acme::AcmeMetrics;
use store::Store;

/// How often a task looks at the storage directory while waiting for its renewal time, so a
/// certificate another instance stored is picked up.
const RECHECK: Duration = Duration::from_secs(60 * 60);

/// What a certificate's validity says about it.
#[derive(Debug, Clone)]
pub struct CertInfo {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
    pub names: Vec<String>,
    /// The RFC 9773 identifier, when the certificate has an authority key identifier.
    pub ari_id: Option<CertificateIdentifier<'static>>,
}

/// Validity and names of the leaf of a PEM chain.
pub fn cert_info(chain_pem: &str) -> Option<CertInfo> {
    let leaf = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .next()?
        .ok()?;
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf.as_ref()).ok()?;
    let validity = parsed.validity();
    let at = |t: i64| SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(t).unwrap_or(0));
    let names = parsed
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    x509_parser::extensions::GeneralName::DNSName(d) => {
                        Some(d.to_ascii_lowercase())
                    }
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Some(CertInfo {
        not_before: at(validity.not_before.timestamp()),
        not_after: at(validity.not_after.timestamp()),
        names,
        ari_id: CertificateIdentifier::try_from(&leaf)
            .ok()
            .map(CertificateIdentifier::into_owned),
    })
}

/// A uniform number in [0, 1), from the system's random source.
fn random_fraction() -> f64 {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 8];
    let _ = ring::rand::SystemRandom::new().fill(&mut bytes);
    // 53 bits: what an f64 holds exactly.
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

/// Two thirds into the certificate's life: Let's Encrypt's advice for 90-day certificates (renew
/// with 30 days left), which keeps the same margin for short-lived ones.
pub fn two_thirds(info: &CertInfo) -> SystemTime {
    let life = info
        .not_after
        .duration_since(info.not_before)
        .unwrap_or_default();
    info.not_before + life * 2 / 3
}

/// The ACME tasks of a running server: one per certificate, kept across reloads while the same
/// settings ask for the same names.
#[derive(Default)]
pub struct Manager {
    settings: Option<Acme>,
    tasks: HashMap<Vec<String>, (Arc<AcmeCert>, JoinHandle<()>)>,
}

impl Drop for Manager {
    fn drop(&mut self) {
        for (_, (_, task)) in self.tasks.drain() {
            task.abort();
        }
    }
}

impl Manager {
    /// The certificates managed now, for the status page.
    pub fn certificates(&self) -> Vec<Arc<AcmeCert>> {
        self.tasks.values().map(|(c, _)| c.clone()).collect()
    }

    /// Run a task for each of `certs` under `settings`: tasks of certificates no longer
    /// configured stop, new ones start, and all restart when the settings changed.
    pub fn sync(
        &mut self,
        settings: Option<&Acme>,
        certs: &HashMap<Vec<String>, Arc<AcmeCert>>,
        tokens: &Arc<Http01Tokens>,
        metrics: &Arc<Metrics>,
    ) {
        if self.settings.as_ref() != settings {
            for (_, (_, task)) in self.tasks.drain() {
                task.abort();
            }
            self.settings = settings.cloned();
        }
        let Some(settings) = settings else { return };
        self.tasks.retain(|names, (cert, task)| {
            let keep = certs.get(names).is_some_and(|c| Arc::ptr_eq(c, cert));
            if !keep {
                task.abort();
            }
            keep
        });
        let shared = Arc::new(Shared {
            settings: settings.clone(),
            store: Store::new(&settings.storage),
            tokens: tokens.clone(),
            account: tokio::sync::Mutex::new(None),
        });
        for (names, cert) in certs {
            if self.tasks.contains_key(names) {
                continue;
            }
            let first = names.first().map_or("", String::as_str);
            let task = Task {
                shared: shared.clone(),
                cert: cert.clone(),
                metrics: metrics.acme(first),
                failures: 0,
                ari_asked_for: None,
            };
            let handle = tokio::spawn(task.run());
            self.tasks.insert(names.clone(), (cert.clone(), handle));
        }
    }
}

/// A new certificate slot for `names`: the stored certificate when there is a usable one (so a
/// restart serves it at once), else a self-signed stand-in.
pub fn new_cert(settings: &Acme, names: &[String]) -> Result<Arc<AcmeCert>, String> {
    let store = Store::new(&settings.storage);
    store
        .create()
        .map_err(|e| format!("ACME storage {}: {e}", settings.storage.display()))?;
    let dev = cert::generate(names).map_err(|e| format!("self-signed stand-in: {e}"))?;
    let provider = rustls::crypto::ring::default_provider();
    let stand_in = tls::certified_key(
        dev.chain_pem.as_bytes(),
        dev.leaf_key_pem.as_bytes(),
        &provider,
    )?;
    let slot = AcmeCert::new(names.to_vec(), stand_in);
    if let Some((key, info)) = load_stored(&store, names) {
        install(&slot, key, &info);
    }
    Ok(slot)
}

/// The stored certificate for `names`, if it covers them all and has not expired.
fn load_stored(store: &Store, names: &[String]) -> Option<(Arc<CertifiedKey>, CertInfo)> {
    let (chain, key) = store.load_certificate(names)?;
    let info = cert_info(&chain)?;
    if info.not_after <= SystemTime::now() || !names.iter().all(|n| info.names.contains(n)) {
        return None;
    }
    let provider = rustls::crypto::ring::default_provider();
    let key = tls::certified_key(chain.as_bytes(), key.as_bytes(), &provider).ok()?;
    Some((key, info))
}

fn install(slot: &AcmeCert, key: Arc<CertifiedKey>, info: &CertInfo) {
    slot.install(key);
    slot.update_renewal(|r| {
        r.issued = true;
        r.not_before = Some(info.not_before);
        r.not_after = Some(info.not_after);
        r.renew_at = Some(two_thirds(info));
    });
}

/// What the tasks under one `[acme]` share.
struct Shared {
    settings: Acme,
    store: Store,
    tokens: Arc<Http01Tokens>,
    /// The account, made or loaded on first use.
    account: tokio::sync::Mutex<Option<Account>>,
}

impl Shared {
    /// The account at the CA: cached, else loaded from storage, else created (and stored).
    async fn account(&self) -> Result<Account, String> {
        let mut cached = self.account.lock().await;
        if let Some(account) = &*cached {
            return Ok(account.clone());
        }
        let directory = &self.settings.directory;
        let builder = || match &self.settings.ca_root {
            Some(root) => Account::builder_with_root(root),
            None => Account::builder(),
        };
        let account = match self.store.load_account(directory) {
            Some(json) => {
                let credentials: AccountCredentials = serde_json::from_str(&json)
                    .map_err(|e| format!("stored ACME account is unreadable: {e}"))?;
                builder()
                    .map_err(|e| e.to_string())?
                    .from_credentials(credentials)
                    .await
                    .map_err(|e| format!("ACME directory {directory}: {e}"))?
            }
            None => {
                let contact: Vec<&str> = self.settings.contact.iter().map(String::as_str).collect();
                let eab =
                    self.settings.external_account.as_ref().map(|e| {
                        instant_acme::ExternalAccountKey::new(e.key_id.clone(), &e.hmac_key)
                    });
                let (account, credentials) = builder()
                    .map_err(|e| e.to_string())?
                    .create(
                        &NewAccount {
                            contact: &contact,
                            terms_of_service_agreed: true,
                            only_return_existing: false,
                        },
                        directory.clone(),
                        eab.as_ref(),
                    )
                    .await
                    .map_err(|e| format!("creating the ACME account at {directory}: {e}"))?;
                let json = serde_json::to_string(&credentials)
                    .map_err(|e| format!("serialising the ACME account: {e}"))?;
                self.store
                    .save_account(directory, &json)
                    .map_err(|e| format!("storing the ACME account: {e}"))?;
                tracing::info!(directory = %directory, account = %account.id(), "ACME account created");
                account
            }
        };
        *cached = Some(account.clone());
        Ok(account)
    }

    /// Drop the account (the CA said it does not know it): the next attempt makes a new one.
    async fn forget_account(&self) {
        *self.account.lock().await = None;
        self.store.remove_account(&self.settings.directory);
    }
}

/// One certificate's loop: look, wait, order, install; on failure wait longer.
struct Task {
    shared: Arc<Shared>,
    cert: Arc<AcmeCert>,
    metrics: AcmeMetrics,
    failures: u32,
    /// The certificate (by expiry) whose ARI window was asked for.
    ari_asked_for: Option<SystemTime>,
}

/// What one turn of the loop decided.
enum Turn {
    /// Sleep this long, then look again.
    Wait(Duration),
    /// Order now.
    Order,
}

impl Task {
    async fn run(mut self) {
        if let Err(e) = self.shared.store.create() {
            tracing::error!(storage = %self.shared.settings.storage.display(), "ACME storage: {e}");
        }
        self.show_expiry();
        loop {
            let wait = match self.turn().await {
                Turn::Wait(wait) => wait,
                Turn::Order => match self.order_locked().await {
                    Ok(Some(())) => Duration::ZERO,
                    // Another instance holds the lock: look at the disk again shortly.
                    Ok(None) => self.shared.settings.retry_after_failure.min(RECHECK),
                    Err(failure) => self.failed(failure).await,
                },
            };
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
    }

    /// Whether to order now, or how long to wait: the disk first (another instance, or a
    /// previous run, may have stored a newer certificate), then the renewal time.
    async fn turn(&mut self) -> Turn {
        let names = self.cert.names().to_vec();
        let current = self.cert.renewal();
        if let Some((key, info)) = load_stored(&self.shared.store, &names)
            && Some(info.not_after) > current.not_after
        {
            install(&self.cert, key, &info);
            self.metrics.loaded.inc();
            self.show_expiry();
            tracing::info!(names = ?names, "ACME certificate loaded from storage");
        }
        let state = self.cert.renewal();
        if !state.issued {
            return Turn::Order;
        }
        let due = self.renew_at().await;
        let now = SystemTime::now();
        match due.duration_since(now) {
            Ok(left) if !left.is_zero() => Turn::Wait(left.min(RECHECK)),
            _ => Turn::Order,
        }
    }

    /// When to renew: two thirds of the life, or earlier when the CA's ARI window says so (RFC
    /// 9773 §4.2: a random moment in it, so a fleet's renewals spread).
    /// Asked once per certificate: the moment chosen stays put.
    async fn renew_at(&mut self) -> SystemTime {
        let state = self.cert.renewal();
        let fallback = state.renew_at.unwrap_or_else(SystemTime::now);
        if self.ari_asked_for == state.not_after {
            return fallback;
        }
        self.ari_asked_for = state.not_after;
        let Some((chain, _)) = self.shared.store.load_certificate(self.cert.names()) else {
            return fallback;
        };
        let Some(id) = cert_info(&chain).and_then(|i| i.ari_id) else {
            return fallback;
        };
        let Ok(account) = self.shared.account().await else {
            return fallback;
        };
        match account.renewal_info(&id).await {
            Ok((info, _)) => {
                let start = SystemTime::from(info.suggested_window.start);
                let end = SystemTime::from(info.suggested_window.end);
                let span = end.duration_since(start).unwrap_or_default();
                // Whichever comes first: ARI moves a renewal earlier (a revocation ahead), and
                // two thirds keep a margin however wide the window (Pebble's spans the whole
                // life of a short certificate).
                let at = (start + span.mul_f64(random_fraction())).min(fallback);
                self.cert.update_renewal(|r| r.renew_at = Some(at));
                at
            }
            Err(e) => {
                tracing::debug!(names = ?self.cert.names(), "ACME renewal information: {e}");
                fallback
            }
        }
    }

    /// Order under the lock; `Ok(None)`: another instance holds it.
    async fn order_locked(&mut self) -> Result<Option<()>, order::Failure> {
        let names = self.cert.names().to_vec();
        let guard = self
            .shared
            .store
            .lock(&names)
            .map_err(|e| order::Failure::local(format!("lock file: {e}")))?;
        let Some(_guard) = guard else {
            tracing::info!(names = ?names, "ACME: another instance is ordering this certificate");
            return Ok(None);
        };
        // Looked again under the lock: the holder before may just have stored one.
        if let Some((key, info)) = load_stored(&self.shared.store, &names)
            && Some(info.not_after) > self.cert.renewal().not_after
        {
            install(&self.cert, key, &info);
            self.metrics.loaded.inc();
            self.show_expiry();
            return Ok(Some(()));
        }
        let account = self.shared.account().await.map_err(order::Failure::local)?;
        let issued = match order::order(&account, &self.shared, &self.cert).await {
            Ok(issued) => issued,
            Err(failure) => {
                if failure.account_unknown {
                    self.shared.forget_account().await;
                }
                return Err(failure);
            }
        };
        self.shared
            .store
            .save_certificate(&names, &issued.chain_pem, &issued.key_pem)
            .map_err(|e| order::Failure::local(format!("storing the certificate: {e}")))?;
        let provider = rustls::crypto::ring::default_provider();
        let key = tls::certified_key(
            issued.chain_pem.as_bytes(),
            issued.key_pem.as_bytes(),
            &provider,
        )
        .map_err(order::Failure::local)?;
        let info = cert_info(&issued.chain_pem)
            .ok_or_else(|| order::Failure::local("the CA's certificate cannot be parsed".into()))?;
        install(&self.cert, key, &info);
        self.failures = 0;
        self.cert.update_renewal(|r| {
            r.failures = 0;
            r.last_error = None;
            r.retry_at = None;
        });
        self.metrics.issued.inc();
        self.show_expiry();
        tracing::info!(names = ?names, not_after = %httpdate::fmt_http_date(info.not_after), "ACME certificate issued and installed");
        Ok(Some(()))
    }

    /// Count and log a failure; the wait before the next attempt.
    async fn failed(&mut self, failure: order::Failure) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let doubling = 2u32.saturating_pow(self.failures.saturating_sub(1).min(20));
        let mut wait = self
            .shared
            .settings
            .retry_after_failure
            .saturating_mul(doubling)
            .min(MAX_RETRY);
        if let Some(after) = failure.retry_after {
            wait = wait.max(after);
        }
        self.metrics.failed.inc();
        let retry_at = SystemTime::now() + wait;
        let failures = self.failures;
        self.cert.update_renewal(|r| {
            r.failures = failures;
            r.last_error = Some(failure.message.clone());
            r.retry_at = Some(retry_at);
        });
        tracing::warn!(
            names = ?self.cert.names(),
            failures,
            retry_in_s = wait.as_secs_f64(),
            "ACME order failed, the current certificate keeps serving: {}",
            failure.message
        );
        wait
    }

    fn show_expiry(&self) {
        let state = self.cert.renewal();
        let expiry = state
            .not_after
            .filter(|_| state.issued)
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.metrics.expiry.set(expiry);
    }
}
