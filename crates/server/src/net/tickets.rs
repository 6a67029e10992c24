//! Session ticket keys from a file (`[listeners.tls] session_ticket_keys = "file"`), shared by
//! the instances of a fleet so that a client the L4 balancer moves to another instance still
//! resumes its session (nginx's `ssl_session_ticket_key`, HAProxy's `tls-ticket-keys`).
//!
//! The file: one key per line, base64 of at least 32 random bytes (`openssl rand -base64 48`);
//! blank lines and `#` comments are skipped. The **first** key seals new tickets; every key
//! opens them. To rotate without failed resumptions, add a new key as the second line on every
//! instance and `sluice reload`, then move it first and reload, then drop the oldest: HAProxy's
//! order of operations. The file is read at start-up and on every reload.
//!
//! A ticket: key id (4 bytes of SHA-256 of the key) | nonce (12 random bytes) | the session
//! sealed with ChaCha20-Poly1305 under SHA-256 of the key, the key id as associated data.
//! Hand-written over ring's AEAD: rustls's own `Ticketer` makes its keys at random and cannot
//! be given a key, and no crate does this for rustls.

use std::path::Path;

use base64::Engine;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use rustls::server::ProducesTickets;
use sha2::{Digest, Sha256};

/// How long a client may keep a ticket (the same as rustls's rotating ticketer).
const LIFETIME_SECS: u32 = 12 * 60 * 60;

/// Fewest random bytes per key line.
pub const MIN_KEY_BYTES: usize = 32;

pub struct FileTicketer {
    keys: Vec<([u8; 4], LessSafeKey)>,
    rng: SystemRandom,
}

impl std::fmt::Debug for FileTicketer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileTicketer")
            .field("keys", &self.keys.len())
            .finish_non_exhaustive()
    }
}

impl FileTicketer {
    /// The keys of `path`; an error names the file and the line.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("session ticket keys `{}`: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("session ticket keys `{}`: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let secret = base64::engine::general_purpose::STANDARD
                .decode(line)
                .map_err(|e| format!("line {}: not base64 ({e})", n + 1))?;
            if secret.len() < MIN_KEY_BYTES {
                return Err(format!(
                    "line {}: {} bytes, at least {MIN_KEY_BYTES} needed (openssl rand -base64 48)",
                    n + 1,
                    secret.len()
                ));
            }
            let mut id_hash = Sha256::new();
            id_hash.update(b"sluice ticket key id");
            id_hash.update(&secret);
            let mut id = [0u8; 4];
            id.copy_from_slice(&id_hash.finalize()[..4]);
            let sealing = Sha256::digest(&secret);
            let key = UnboundKey::new(&CHACHA20_POLY1305, &sealing)
                .map_err(|_| format!("line {}: unusable key", n + 1))?;
            keys.push((id, LessSafeKey::new(key)));
        }
        if keys.is_empty() {
            return Err("no key in the file (one base64 line: openssl rand -base64 48)".into());
        }
        Ok(Self {
            keys,
            rng: SystemRandom::new(),
        })
    }
}

impl ProducesTickets for FileTicketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        LIFETIME_SECS
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let (id, key) = self.keys.first()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut sealed = plain.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(id),
            &mut sealed,
        )
        .ok()?;
        let mut ticket = Vec::with_capacity(4 + NONCE_LEN + sealed.len());
        ticket.extend_from_slice(id);
        ticket.extend_from_slice(&nonce);
        ticket.extend_from_slice(&sealed);
        Some(ticket)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        if ticket.len() < 4 + NONCE_LEN {
            return None;
        }
        let (id, rest) = ticket.split_at(4);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let (id, key) = self.keys.iter().find(|(k, _)| k == id)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = key.open_in_place(nonce, Aad::from(id), &mut buf).ok()?;
        Some(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "c2x1aWNlIHRlc3Qga2V5IG51bWJlciBvbmUsIDQ4IGJ5dGVzIGxvbmcuLi4uLi4u";
    const B: &str = "c2x1aWNlIHRlc3Qga2V5IG51bWJlciB0d28sIDQ4IGJ5dGVzIGxvbmcuLi4uLi4u";

    #[test]
    fn the_first_key_seals_and_every_key_opens() {
        let old = FileTicketer::parse(A).unwrap();
        let rotating = FileTicketer::parse(&format!("# new first\n{B}\n\n{A}\n")).unwrap();
        let ticket = old.encrypt(b"session").unwrap();
        assert_eq!(rotating.decrypt(&ticket).as_deref(), Some(&b"session"[..]));
        let new = rotating.encrypt(b"session 2").unwrap();
        assert_eq!(
            old.decrypt(&new),
            None,
            "sealed with a key the old file lacks"
        );
        let mut tampered = ticket.clone();
        if let Some(last) = tampered.last_mut() {
            *last ^= 1;
        }
        assert_eq!(old.decrypt(&tampered), None);
        assert_eq!(old.decrypt(&ticket[..10]), None);
        assert_ne!(
            old.encrypt(b"x"),
            old.encrypt(b"x"),
            "a fresh nonce each time"
        );
    }

    #[test]
    fn short_garbled_or_empty_files_are_refused_with_the_line() {
        assert!(
            FileTicketer::parse("c2hvcnQ=")
                .unwrap_err()
                .contains("line 1")
        );
        assert!(FileTicketer::parse("\n!!!").unwrap_err().contains("line 2"));
        assert!(
            FileTicketer::parse("# nothing\n")
                .unwrap_err()
                .contains("no key")
        );
    }
}
