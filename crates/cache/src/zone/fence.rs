//! Invalidation fences: a response that went upstream before its key was invalidated (an unsafe
//! method's success, RFC 9111 §4.4, or a purge) is not stored when it arrives, since it may be
//! what the invalidation meant to remove.
//!
//! Per key, not per zone. A zone-wide counter ("anything invalidated since this request went
//! upstream?") threw away every fill in flight whenever any URL of the zone was invalidated: under
//! concurrent load, a `PUT` to one URL made the fresh, storable response being stored for another
//! URL vanish, and the next request for that URL went to the origin again. That breaks read after
//! write (RFC 9111 §3 and §4: a stored response is reused while fresh) for keys the
//! invalidation never named, at random, depending on which requests overlapped (issue 21).
//!
//! A [`Fence`] is registered under its primary key for as long as its request and fill run;
//! invalidating a key (or a prefix of keys) crosses the fences registered under it. The registry
//! holds only fences alive now, so it is bounded by the requests in flight.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::lock::lock;

/// The fences alive in one zone, by primary key.
#[derive(Default)]
pub(super) struct Fences {
    by_key: Mutex<HashMap<String, Vec<Arc<AtomicBool>>>>,
}

impl Fences {
    /// A fence for `primary`, from now on.
    pub(super) fn fence(self: &Arc<Self>, primary: &str) -> Fence {
        let crossed = Arc::new(AtomicBool::new(false));
        lock(&self.by_key)
            .entry(primary.to_string())
            .or_default()
            .push(crossed.clone());
        Fence {
            fences: self.clone(),
            primary: primary.to_string(),
            crossed,
        }
    }

    /// `primary` is being invalidated: every fence under it is crossed.
    pub(super) fn cross(&self, primary: &str) {
        if let Some(list) = lock(&self.by_key).get(primary) {
            for crossed in list {
                crossed.store(true, Ordering::Release);
            }
        }
    }

    /// Every key starting with `prefix` is being purged.
    pub(super) fn cross_prefix(&self, prefix: &str) {
        for (key, list) in lock(&self.by_key).iter() {
            if key.starts_with(prefix) {
                for crossed in list {
                    crossed.store(true, Ordering::Release);
                }
            }
        }
    }

    /// Keys with a fence alive (tests).
    pub(super) fn keys(&self) -> usize {
        lock(&self.by_key).len()
    }
}

/// Taken when a request for a key goes upstream (or a variant starts being made); handed to the
/// fill that stores the answer, which commits nothing once the fence is crossed.
pub struct Fence {
    fences: Arc<Fences>,
    primary: String,
    crossed: Arc<AtomicBool>,
}

impl Fence {
    /// Whether the key was invalidated since this fence was taken.
    pub fn crossed(&self) -> bool {
        self.crossed.load(Ordering::Acquire)
    }

    /// The key it guards.
    pub fn primary(&self) -> &str {
        &self.primary
    }
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence")
            .field("primary", &self.primary)
            .field("crossed", &self.crossed())
            .finish()
    }
}

impl Drop for Fence {
    fn drop(&mut self) {
        let mut by_key = lock(&self.fences.by_key);
        if let Some(list) = by_key.get_mut(&self.primary) {
            list.retain(|c| !Arc::ptr_eq(c, &self.crossed));
            if list.is_empty() {
                by_key.remove(&self.primary);
            }
        }
    }
}
