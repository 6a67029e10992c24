//! `basic_auth`: HTTP Basic authentication (RFC 7617) against a user file of bcrypt or argon2
//! hashes.
//!
//! - No credentials (or another scheme): 401 with `WWW-Authenticate: Basic realm="...",
//!   charset="UTF-8"` (RFC 9110 §11.6.1, RFC 7617 §2.1).
//! - Right ones: the request goes on, without its `Authorization` header unless the route says
//!   `forward_credentials = true`: the upstream never sees the password by default.
//! - Wrong ones: 401, and a failed attempt for the client's address.
//!
//! Brute force is slowed per client: each client address may fail `max_failures` times per
//! `failure_period` (a token bucket, `features::rate_limit`'s, bounded in memory); past that its
//! attempts get 429 with `Retry-After` without a hash being computed. A token is taken before
//! the password is checked (so 100 concurrent guesses cannot all be checked before the first
//! failure counts), and credentials that were right once are remembered (a keyed SHA-256 of
//! them, never the password) so a client that logged in does not spend tokens. Another client's
//! bucket is its own: one client's guessing never locks anyone else out.
//!
//! Hashes are computed on tokio's blocking pool: bcrypt at cost 10 takes ~50 ms of CPU, which
//! must not stall the connections sharing an async worker. Credentials are never logged.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;

use base64::Engine as _;
use http::{HeaderValue, Request, Response, StatusCode, header};
use quick_cache::sync::Cache;
use sluice_config::{BasicAuth, HashKind, RateLimit, hash_kind, parse_htpasswd};
use sluice_core::Body;

use crate::features::rate_limit::{RouteRateLimit, retry_after_secs};

/// Credentials remembered as right, per route.
const REMEMBERED: usize = 4096;
/// Client addresses whose failures are remembered, per route.
const CLIENTS: usize = 100_000;

pub enum Outcome {
    Allowed,
    /// 401 with the challenge.
    Refused(Response<Body>),
    /// 429: too many failed attempts from this client.
    Slowed(Response<Body>),
}

pub struct BasicAuthCheck {
    users: Arc<HashMap<String, String>>,
    challenge: HeaderValue,
    forward_credentials: bool,
    failures: RouteRateLimit,
    /// SHA-256 of (a per-process secret, user, password) of credentials found right.
    remembered: Cache<[u8; 32], ()>,
    secret: [u8; 16],
}

impl BasicAuthCheck {
    /// Reads the user file (at start and at each reload, when routes are compiled).
    pub fn new(config: &BasicAuth) -> Result<Self, sluice_core::Error> {
        let fail = |why: String| {
            sluice_core::Error::internal(
                sluice_core::ErrorKind::Unavailable,
                format!("basic_auth user file {}: {why}", config.users.display()),
            )
        };
        let text = std::fs::read_to_string(&config.users).map_err(|e| fail(e.to_string()))?;
        let users =
            parse_htpasswd(&text).map_err(|(line, why)| fail(format!("line {line}: {why}")))?;
        let challenge = HeaderValue::try_from(format!(
            "Basic realm=\"{}\", charset=\"UTF-8\"",
            config.realm
        ))
        .map_err(|_| fail("the realm cannot go in a header".into()))?;
        let limit = RateLimit::new(
            NonZeroU32::new(config.max_failures).unwrap_or(NonZeroU32::MIN),
            config.failure_period,
        );
        let mut secret = [0u8; 16];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret)
            .map_err(|_| fail("no randomness for the credential cache".into()))?;
        Ok(Self {
            users: Arc::new(users.into_iter().map(|u| (u.name, u.hash)).collect()),
            challenge,
            forward_credentials: config.forward_credentials,
            failures: RouteRateLimit::with_capacity(&limit, Default::default(), CLIENTS),
            remembered: Cache::new(REMEMBERED),
            secret,
        })
    }

    pub async fn check<B>(&self, ip: IpAddr, req: &mut Request<B>) -> Outcome {
        let Some((user, password)) = credentials(req.headers()) else {
            return Outcome::Refused(self.challenge());
        };
        // A slowed client is answered before anything is looked at: were remembered
        // credentials let through, a 200 among its 429s would tell a guesser it found them.
        if let Err(wait) = self.failures.peek(ip) {
            return Outcome::Slowed(slowed(ip, wait));
        }
        let key = self.key(&user, &password);
        if self.remembered.get(&key).is_none() {
            // A token per checked attempt, taken before the check: a client has
            // `max_failures` checks per period until one succeeds (then it is remembered).
            if let Err(wait) = self.failures.check(ip, req.headers()) {
                return Outcome::Slowed(slowed(ip, wait));
            }
            let hash = self.users.get(&user).cloned();
            let right = match hash {
                Some(hash) => tokio::task::spawn_blocking(move || verify(&password, &hash))
                    .await
                    .unwrap_or(false),
                None => false,
            };
            if !right {
                tracing::debug!(client = %ip, "basic auth: wrong credentials");
                return Outcome::Refused(self.challenge());
            }
            self.remembered.insert(key, ());
        }
        if !self.forward_credentials {
            req.headers_mut().remove(header::AUTHORIZATION);
        }
        Outcome::Allowed
    }

    fn challenge(&self) -> Response<Body> {
        let mut response = crate::shared::error_page(StatusCode::UNAUTHORIZED, None);
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, self.challenge.clone());
        response
    }

    fn key(&self, user: &str, password: &str) -> [u8; 32] {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(&self.secret);
        ctx.update(user.as_bytes());
        ctx.update(&[0]);
        ctx.update(password.as_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.finish().as_ref());
        out
    }
}

/// The 429 of a client over its rate of failed attempts.
fn slowed(ip: IpAddr, wait: std::time::Duration) -> Response<Body> {
    let secs = retry_after_secs(wait);
    tracing::debug!(client = %ip, "basic auth: too many failed attempts");
    let mut response = crate::shared::error_page(
        StatusCode::TOO_MANY_REQUESTS,
        Some("too many failed login attempts; retry later"),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    response
}

/// The user and password of `Authorization: Basic ...` (the scheme is case-insensitive, RFC
/// 9110 §11.1; the user is what precedes the first `:`, RFC 7617 §2).
fn credentials(headers: &http::HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// Whether `password` is the one `hash` was made from.
fn verify(password: &str, hash: &str) -> bool {
    match hash_kind(hash) {
        Some(HashKind::Bcrypt) => bcrypt::verify(password, hash).unwrap_or(false),
        Some(HashKind::Argon2) => {
            use argon2::password_hash::{PasswordHash, PasswordVerifier};
            PasswordHash::new(hash).is_ok_and(|parsed| {
                argon2::Argon2::default()
                    .verify_password(password.as_bytes(), &parsed)
                    .is_ok()
            })
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_read_from_basic_only() {
        let mut h = http::HeaderMap::new();
        h.insert(header::AUTHORIZATION, "bAsIc YWxpY2U6cDp3".parse().unwrap());
        assert_eq!(credentials(&h), Some(("alice".into(), "p:w".into())));
        h.insert(
            header::AUTHORIZATION,
            "Bearer YWxpY2U6cDp3".parse().unwrap(),
        );
        assert_eq!(credentials(&h), None);
        h.insert(header::AUTHORIZATION, "Basic !!!".parse().unwrap());
        assert_eq!(credentials(&h), None);
    }

    #[test]
    fn bcrypt_and_argon2_hashes_verify() {
        let b = bcrypt::hash("secret", 4).unwrap();
        assert!(verify("secret", &b));
        assert!(!verify("Secret", &b));
        use argon2::password_hash::{PasswordHasher, SaltString};
        let salt = SaltString::encode_b64(b"0123456789abcdef").unwrap();
        let a = argon2::Argon2::default()
            .hash_password(b"secret", &salt)
            .unwrap()
            .to_string();
        assert!(verify("secret", &a));
        assert!(!verify("other", &a));
    }

    #[test]
    fn hashes_made_by_other_tools_verify() {
        // examples/access.htpasswd: made with Python's bcrypt and argon2-cffi (its default
        // argon2id parameters, p=4), so not by the crates that check them.
        let text = std::fs::read_to_string("../../examples/access.htpasswd").unwrap();
        let users: HashMap<String, String> = parse_htpasswd(&text)
            .unwrap()
            .into_iter()
            .map(|u| (u.name, u.hash))
            .collect();
        assert!(verify("change-me-alice", &users["alice"]));
        assert!(!verify("change-me-bob", &users["alice"]));
        assert!(verify("change-me-bob", &users["bob"]));
        assert!(!verify("change-me-alice", &users["bob"]));
    }
}
