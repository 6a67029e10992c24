//! One ACME order (RFC 8555 §7.4): new order, a challenge per authorization (HTTP-01 or
//! TLS-ALPN-01), finalize with a CSR for a fresh key, download the chain. The challenge answers
//! are withdrawn when the order ends, however it ends.

use std::sync::Arc;
use std::time::Duration;

use instant_acme::{
    Account, AuthorizationStatus, ChallengeType, Identifier, NewOrder, OrderStatus, RetryPolicy,
};
use rcgen::{CertificateParams, CustomExtension, DistinguishedName, KeyPair};
use sluice_config::AcmeChallenge;

use super::Shared;
use crate::shared::acme::{AcmeCert, Http01Tokens};

/// A certificate the CA issued: the chain (leaf first) and its key, PEM.
pub(super) struct Issued {
    pub chain_pem: String,
    pub key_pem: String,
}

/// Why an order failed, and what that says about the next attempt.
#[derive(Debug)]
pub(super) struct Failure {
    pub message: String,
    /// The CA asked to wait at least this long (a rate limit).
    pub retry_after: Option<Duration>,
    /// The CA does not know the account (it was reset, or it is another CA): make a new one.
    pub account_unknown: bool,
}

impl Failure {
    pub(super) fn local(message: String) -> Self {
        Self {
            message,
            retry_after: None,
            account_unknown: false,
        }
    }

    fn acme(context: &str, err: instant_acme::Error) -> Self {
        let mut failure = Self::local(format!("{context}: {err}"));
        if let instant_acme::Error::Api(problem) = &err {
            let kind = problem.r#type.as_deref().unwrap_or("");
            failure.account_unknown = kind.ends_with(":accountDoesNotExist");
            // RFC 8555 §6.6: a rateLimited problem comes with Retry-After, which instant-acme
            // does not pass on with errors; Let's Encrypt's limits refill within hours, so wait
            // at least one before asking again.
            if kind.ends_with(":rateLimited") {
                failure.retry_after = Some(Duration::from_secs(60 * 60));
            }
            if let Some(detail) = &problem.detail {
                failure.message = format!("{context}: {kind}: {detail}");
            }
        }
        failure
    }
}

/// How long to poll an order's state before giving up on this attempt.
fn polling() -> RetryPolicy {
    RetryPolicy::new()
        .initial_delay(Duration::from_millis(250))
        .timeout(Duration::from_secs(90))
}

/// Order a certificate for `cert`'s names.
pub(super) async fn order(
    account: &Account,
    shared: &Shared,
    cert: &Arc<AcmeCert>,
) -> Result<Issued, Failure> {
    let identifiers: Vec<Identifier> = cert
        .names()
        .iter()
        .map(|n| Identifier::Dns(n.clone()))
        .collect();
    let mut order = account
        .new_order(&NewOrder::new(&identifiers))
        .await
        .map_err(|e| Failure::acme("new order", e))?;
    let mut answers = Answers {
        tokens: shared.tokens.clone(),
        cert: cert.clone(),
        tokens_set: Vec::new(),
        names_set: Vec::new(),
    };
    let kind = match shared.settings.challenge {
        AcmeChallenge::Http01 => ChallengeType::Http01,
        AcmeChallenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
    };
    let mut authorizations = order.authorizations();
    while let Some(authorization) = authorizations.next().await {
        let mut authorization =
            authorization.map_err(|e| Failure::acme("fetching an authorization", e))?;
        match authorization.status {
            AuthorizationStatus::Valid => continue,
            AuthorizationStatus::Pending => {}
            other => {
                return Err(Failure::local(format!(
                    "authorization for {:?} is {other:?}",
                    authorization.identifier()
                )));
            }
        }
        let name = match authorization.identifier().identifier {
            Identifier::Dns(name) => name.clone(),
            other => return Err(Failure::local(format!("unexpected identifier {other:?}"))),
        };
        let mut challenge = authorization.challenge(kind.clone()).ok_or_else(|| {
            Failure::local(format!(
                "the CA offers no {} challenge for {name}",
                shared.settings.challenge.as_str()
            ))
        })?;
        let key_authorization = challenge.key_authorization();
        match kind {
            ChallengeType::TlsAlpn01 => {
                let key = alpn_certificate(&name, key_authorization.digest().as_ref())
                    .map_err(Failure::local)?;
                answers.cert.set_challenge(&name, Some(key));
                answers.names_set.push(name.clone());
            }
            _ => {
                answers.tokens.insert(
                    challenge.token.clone(),
                    key_authorization.as_str().to_owned(),
                );
                answers.tokens_set.push(challenge.token.clone());
            }
        }
        challenge
            .set_ready()
            .await
            .map_err(|e| Failure::acme("answering the challenge", e))?;
    }
    let status = order
        .poll_ready(&polling())
        .await
        .map_err(|e| Failure::acme("validation", e))?;
    if status != OrderStatus::Ready {
        return Err(Failure::local(format!(
            "the order is {status:?} after validation"
        )));
    }
    // A fresh key per certificate (ECDSA P-256, rcgen's default), never the account's.
    let key = KeyPair::generate().map_err(|e| Failure::local(format!("certificate key: {e}")))?;
    let mut params = CertificateParams::new(cert.names().to_vec())
        .map_err(|e| Failure::local(format!("CSR: {e}")))?;
    params.distinguished_name = DistinguishedName::new();
    let csr = params
        .serialize_request(&key)
        .map_err(|e| Failure::local(format!("CSR: {e}")))?;
    order
        .finalize_csr(csr.der())
        .await
        .map_err(|e| Failure::acme("finalize", e))?;
    let chain_pem = order
        .poll_certificate(&polling())
        .await
        .map_err(|e| Failure::acme("downloading the certificate", e))?;
    drop(answers);
    Ok(Issued {
        chain_pem,
        key_pem: key.serialize_pem(),
    })
}

/// The TLS-ALPN-01 certificate for `name` (RFC 8737 §3): self-signed, `name` its only SAN, with
/// the critical acmeIdentifier extension holding `digest` (SHA-256 of the key authorization).
fn alpn_certificate(name: &str, digest: &[u8]) -> Result<Arc<rustls::sign::CertifiedKey>, String> {
    let mut params = CertificateParams::new(vec![name.to_owned()])
        .map_err(|e| format!("TLS-ALPN-01 certificate: {e}"))?;
    params
        .custom_extensions
        .push(CustomExtension::new_acme_identifier(digest));
    let key = KeyPair::generate().map_err(|e| format!("TLS-ALPN-01 key: {e}"))?;
    let made = params
        .self_signed(&key)
        .map_err(|e| format!("TLS-ALPN-01 certificate: {e}"))?;
    // Not `tls::certified_key`: its check that key and certificate match parses the certificate
    // with webpki, which refuses the critical acmeIdentifier extension it does not know. The
    // key is the one the certificate was just made with.
    let provider = rustls::crypto::ring::default_provider();
    let der = rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let signing_key = provider
        .key_provider
        .load_private_key(der)
        .map_err(|e| format!("TLS-ALPN-01 key: {e}"))?;
    Ok(Arc::new(rustls::sign::CertifiedKey::new(
        vec![made.der().clone()],
        signing_key,
    )))
}

/// The challenge answers an order put up, withdrawn when it is dropped.
struct Answers {
    tokens: Arc<Http01Tokens>,
    cert: Arc<AcmeCert>,
    tokens_set: Vec<String>,
    names_set: Vec<String>,
}

impl Drop for Answers {
    fn drop(&mut self) {
        for token in &self.tokens_set {
            self.tokens.remove(token);
        }
        for name in &self.names_set {
            self.cert.set_challenge(name, None);
        }
    }
}
