//! The storage directory (`[acme] storage`): the account key and the certificates, written
//! atomically (a temporary file in the same directory, synced, renamed over the old one, the
//! directory synced) with mode `0600` in a directory of mode `0700`, and the lock files that
//! keep instances sharing the directory from ordering the same certificate twice.
//!
//! ```text
//! storage/
//!   accounts/<directory hash>.json       the account (key and URL) at one CA directory
//!   certificates/<first name>/cert.pem   the chain, leaf first
//!   certificates/<first name>/key.pem    its private key
//!   locks/<first name>.lock              held while ordering (the pid inside)
//! ```

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::Digest as _;

/// A lock older than this is taken to be left by an instance that died while ordering: an
/// order (its challenges and polling) takes well under a minute; ten leave ample room.
pub const STALE_LOCK: Duration = Duration::from_secs(10 * 60);

/// The storage directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// Create the directory tree (`0700`) if missing.
    pub fn create(&self) -> std::io::Result<()> {
        for sub in ["accounts", "certificates", "locks"] {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(self.dir.join(sub))?;
        }
        Ok(())
    }

    fn account_path(&self, directory_url: &str) -> PathBuf {
        let hash = hex::encode(sha2::Sha256::digest(directory_url.as_bytes()));
        self.dir
            .join("accounts")
            .join(format!("{}.json", &hash[..16]))
    }

    /// The stored account credentials for `directory_url` (JSON), if any.
    pub fn load_account(&self, directory_url: &str) -> Option<String> {
        fs::read_to_string(self.account_path(directory_url)).ok()
    }

    pub fn save_account(&self, directory_url: &str, json: &str) -> std::io::Result<()> {
        write_atomic(&self.account_path(directory_url), json.as_bytes())
    }

    /// Forget the account (the CA no longer knows it).
    pub fn remove_account(&self, directory_url: &str) {
        let _ = fs::remove_file(self.account_path(directory_url));
    }

    fn certificate_dir(&self, names: &[String]) -> PathBuf {
        let first = names.first().map_or("default", String::as_str);
        self.dir.join("certificates").join(file_name(first))
    }

    /// The stored chain and key (PEM) for `names`, if both are there.
    pub fn load_certificate(&self, names: &[String]) -> Option<(String, String)> {
        let dir = self.certificate_dir(names);
        let chain = fs::read_to_string(dir.join("cert.pem")).ok()?;
        let key = fs::read_to_string(dir.join("key.pem")).ok()?;
        Some((chain, key))
    }

    /// Store a new chain and key. The key goes first: a reader that sees the new chain with the
    /// old key refuses the pair (they do not match) and tries again on its next look.
    pub fn save_certificate(
        &self,
        names: &[String],
        chain: &str,
        key: &str,
    ) -> std::io::Result<()> {
        let dir = self.certificate_dir(names);
        DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        write_atomic(&dir.join("key.pem"), key.as_bytes())?;
        write_atomic(&dir.join("cert.pem"), chain.as_bytes())
    }

    /// Take the ordering lock of `names`: `Ok(None)` when another live instance holds it.
    pub fn lock(&self, names: &[String]) -> std::io::Result<Option<LockGuard>> {
        let first = names.first().map_or("default", String::as_str);
        let path = self
            .dir
            .join("locks")
            .join(format!("{}.lock", file_name(first)));
        for _ in 0..2 {
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(mut file) => {
                    writeln!(file, "pid {}", std::process::id())?;
                    return Ok(Some(LockGuard { path }));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let age = fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| SystemTime::now().duration_since(t).ok());
                    match age {
                        Some(age) if age > STALE_LOCK => {
                            tracing::warn!(lock = %path.display(), "ACME: removing a stale lock ({}s old)", age.as_secs());
                            let _ = fs::remove_file(&path);
                        }
                        _ => return Ok(None),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }
}

/// Held while ordering; removes the lock file when dropped.
#[derive(Debug)]
pub struct LockGuard {
    path: PathBuf,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// A name as a file name: DNS names are letters, digits, `-` and `.`; anything else (there is
/// nothing else after validation) becomes `_`, and a leading dot cannot make a hidden file.
fn file_name(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    clean.trim_start_matches('.').to_owned()
}

/// Write `bytes` to `path` so that readers see the old file or the new one, never a part:
/// a `0600` temporary file beside it, synced, renamed over it, and the directory synced.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn files_are_private_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(&dir.path().join("acme"));
        store.create().unwrap();
        let mode = fs::metadata(dir.path().join("acme/certificates"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let names = vec!["a.test".to_owned()];
        store.save_certificate(&names, "chain1", "key1").unwrap();
        store.save_certificate(&names, "chain2", "key2").unwrap();
        assert_eq!(
            store.load_certificate(&names),
            Some(("chain2".into(), "key2".into()))
        );
        let key = dir.path().join("acme/certificates/a.test/key.pem");
        assert_eq!(
            fs::metadata(key).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // No temporary file is left behind.
        let left: Vec<_> = fs::read_dir(dir.path().join("acme/certificates/a.test"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "{left:?}");
    }

    #[test]
    fn a_held_lock_excludes_and_a_stale_one_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.create().unwrap();
        let names = vec!["a.test".to_owned()];
        let held = store.lock(&names).unwrap().expect("free at first");
        assert!(store.lock(&names).unwrap().is_none(), "held by the first");
        drop(held);
        let again = store.lock(&names).unwrap().expect("released on drop");
        // Age the lock past the stale limit: the next instance takes it over.
        let path = dir.path().join("locks/a.test.lock");
        let old = SystemTime::now() - STALE_LOCK - Duration::from_secs(1);
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        std::mem::forget(again);
        assert!(
            store.lock(&names).unwrap().is_some(),
            "stale lock taken over"
        );
    }
}
