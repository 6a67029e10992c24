//! Automatic certificates (`[acme]` and `tls = "acme"` on a listener): where to order them,
//! where to keep them, how to prove control of the names. docs/acme.md explains each choice.

use std::path::PathBuf;
use std::time::Duration;

/// Let's Encrypt's production directory, the default `directory`.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";
/// Let's Encrypt's staging directory (`staging = true`): untrusted certificates, generous limits.
pub const LETS_ENCRYPT_STAGING: &str = "https://acme-staging-v02.api.letsencrypt.org/directory";

/// The `[acme]` table, present (with its defaults) whenever a listener has `tls = "acme"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acme {
    /// The CA's directory URL (RFC 8555 §7.1.1).
    pub directory: String,
    /// `contact`: `mailto:` URLs the CA may write to about the account (expiry, incidents).
    pub contact: Vec<String>,
    /// External account binding (RFC 8555 §7.3.4), for CAs that ask for one (ZeroSSL, Google).
    pub external_account: Option<ExternalAccount>,
    /// `storage`: the directory of the account key and the certificates (created `0700`).
    pub storage: PathBuf,
    /// `ca_root`: a PEM file of the root to trust for the directory's HTTPS (a private or test
    /// CA such as Pebble); `None`: the system's trust store.
    pub ca_root: Option<PathBuf>,
    /// The challenge used, decided at validation: `challenge`, or HTTP-01 when a listener
    /// without TLS exists (it answers them), else TLS-ALPN-01 on the ACME listener itself.
    pub challenge: AcmeChallenge,
    /// `http_redirect`: the status with which listeners without TLS send requests (other than
    /// the challenge path) to HTTPS; `None` (`http_redirect = false`): no redirect.
    pub http_redirect: Option<http::StatusCode>,
    /// `retry_after_failure`: the first wait after a failed order; it doubles per failure up to
    /// [`MAX_RETRY`], and a CA's `Retry-After` is waited out when longer.
    pub retry_after_failure: Duration,
}

/// The longest wait between two attempts after failures.
pub const MAX_RETRY: Duration = Duration::from_secs(6 * 60 * 60);

/// An external account binding: the key id and MAC key the CA gave.
#[derive(Clone, PartialEq, Eq)]
pub struct ExternalAccount {
    pub key_id: String,
    /// The MAC key, decoded from base64url.
    pub hmac_key: Vec<u8>,
}

impl std::fmt::Debug for ExternalAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalAccount")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

/// How the CA checks that this server answers for a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcmeChallenge {
    /// HTTP-01 (RFC 8555 §8.3): a token at `/.well-known/acme-challenge/` on port 80.
    Http01,
    /// TLS-ALPN-01 (RFC 8737): a special certificate offered on port 443 for ALPN `acme-tls/1`.
    TlsAlpn01,
}

impl AcmeChallenge {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http01 => "http-01",
            Self::TlsAlpn01 => "tls-alpn-01",
        }
    }
}
