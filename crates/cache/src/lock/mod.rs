//! Request collapsing: concurrent misses for one key make **one** upstream request.
//!
//! The first request for a key becomes the [`Leader`]; requests that arrive while it is in flight
//! become [`Follower`]s and wait on a `watch` channel, so they are woken the moment the leader
//! publishes the response head (no polling: nginx's cache lock polls every 500 ms). The body then
//! fans out: the leader's fill pushes chunks into one shared buffer through its [`Publisher`],
//! and every client (the leader's own included) reads it through a [`Reader`] at its own pace, as
//! the bytes arrive. A response that turns out not storable is [`Leader::release`]d: the
//! followers go upstream themselves at once. A follower waits at most its lock timeout.
//!
//! Memory: while the response is being stored, the buffer keeps every chunk (late joiners read
//! it from the start, and the object is bounded by the zone's max object size). When the fill
//! learns the object will not be stored after all (it grew past the max object size), it
//! [`Publisher::detach`]es: no new follower joins, chunks every reader has read are dropped, and
//! the fill waits ([`Publisher::poll_room`]) while the slowest reader is more than
//! [`TRIM_WINDOW`] behind, so memory stays bounded whatever the body's size.
//!
//! Written by hand: no crate offers single-flight with a streamed, multi-reader body.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use sluice_core::BoxError;
use tokio::sync::watch;

/// Bytes a detached fill may run ahead of its slowest reader.
pub const TRIM_WINDOW: usize = 1024 * 1024;

/// The in-flight misses of one zone, by key.
pub struct Flights<K, H> {
    map: Arc<Mutex<HashMap<K, Arc<Flight<H>>>>>,
}

impl<K, H> Clone for Flights<K, H> {
    fn clone(&self) -> Self {
        Self {
            map: self.map.clone(),
        }
    }
}

impl<K, H> Default for Flights<K, H> {
    fn default() -> Self {
        Self {
            map: Arc::new(Mutex::new(HashMap::new())),
        }
    }
}

struct Flight<H> {
    state: watch::Sender<State<H>>,
}

enum State<H> {
    Pending,
    Ready(Arc<Shared<H>>),
    Released,
}

impl<H> Clone for State<H> {
    fn clone(&self) -> Self {
        match self {
            State::Pending => State::Pending,
            State::Ready(shared) => State::Ready(shared.clone()),
            State::Released => State::Released,
        }
    }
}

/// What [`Flights::join`] made of a request.
pub enum Join<K: Eq + Hash + Clone, H> {
    /// Nobody is fetching this key: go upstream, then publish or release.
    Leader(Leader<K, H>),
    /// Somebody is: wait for their response.
    Follower(Follower<H>),
}

impl<K: Eq + Hash + Clone, H> Flights<K, H> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Lead the fetch of `key`, or follow the one in flight.
    pub fn join(&self, key: K) -> Join<K, H> {
        let mut map = lock(&self.map);
        if let Some(flight) = map.get(&key) {
            return Join::Follower(Follower {
                state: flight.state.subscribe(),
            });
        }
        let (state, _) = watch::channel(State::Pending);
        let flight = Arc::new(Flight { state });
        map.insert(key.clone(), flight.clone());
        Join::Leader(Leader {
            flights: self.clone(),
            key,
            flight: Some(flight),
        })
    }

    /// Keys in flight (for tests and metrics).
    pub fn len(&self) -> usize {
        lock(&self.map).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forget `flight` under `key`, unless a newer flight took the key meanwhile.
    fn remove(&self, key: &K, flight: &Arc<Flight<H>>) {
        let mut map = lock(&self.map);
        if map.get(key).is_some_and(|f| Arc::ptr_eq(f, flight)) {
            map.remove(key);
        }
    }
}

/// The one request that goes upstream for a key. Dropping it without publishing releases the
/// followers (the leader's client went away, or the fetch failed).
pub struct Leader<K: Eq + Hash + Clone, H> {
    flights: Flights<K, H>,
    key: K,
    flight: Option<Arc<Flight<H>>>,
}

impl<K: Eq + Hash + Clone, H> Leader<K, H> {
    /// The response head is here and will be stored: wake the followers with it. The flight
    /// stays joinable until [`Publisher::done`], so requests arriving meanwhile read the body
    /// from the start instead of going upstream.
    pub fn publish(mut self, head: H) -> Publisher<K, H> {
        let shared = Arc::new(Shared {
            head,
            body: Mutex::new(BodyState::default()),
            settled: watch::channel(false).0,
        });
        let flight = self.flight.take();
        if let Some(flight) = &flight {
            flight.state.send_replace(State::Ready(shared.clone()));
        }
        Publisher {
            flights: self.flights.clone(),
            key: self.key.clone(),
            flight,
            shared,
            ended: false,
        }
    }

    /// The response will not be stored: the followers go upstream on their own, now.
    pub fn release(self) {
        drop(self);
    }
}

impl<K: Eq + Hash + Clone, H> Drop for Leader<K, H> {
    fn drop(&mut self) {
        if let Some(flight) = self.flight.take() {
            self.flights.remove(&self.key, &flight);
            flight.state.send_replace(State::Released);
        }
    }
}

/// A request waiting for a leader.
pub struct Follower<H> {
    state: watch::Receiver<State<H>>,
}

/// How a follower's wait ended.
pub enum Waited<H> {
    /// The leader's response head; attach a [`Reader`] with [`Shared::reader`].
    Ready(Arc<Shared<H>>),
    /// The leader will not store its response (or gave up): go upstream.
    Released,
    /// The lock timeout passed first: go upstream, don't store.
    TimedOut,
}

impl<H> Follower<H> {
    /// Wait for the leader's head, at most `timeout`.
    pub async fn wait(mut self, timeout: Duration) -> Waited<H> {
        let ready = self
            .state
            .wait_for(|state| !matches!(state, State::Pending));
        match tokio::time::timeout(timeout, ready).await {
            Err(_) => Waited::TimedOut,
            Ok(Err(_)) => Waited::Released,
            Ok(Ok(state)) => match &*state {
                State::Ready(shared) => Waited::Ready(shared.clone()),
                State::Pending | State::Released => Waited::Released,
            },
        }
    }
}

/// A published response: its head, and the body as it arrives.
pub struct Shared<H> {
    pub head: H,
    body: Mutex<BodyState>,
    /// Becomes true when the flight is over: the object committed (or not), or the body
    /// failed. See [`Shared::settled`].
    settled: watch::Sender<bool>,
}

#[derive(Default)]
struct BodyState {
    chunks: VecDeque<Bytes>,
    /// Index (from the body's start) of `chunks[0]`.
    base: usize,
    /// Bytes in `chunks`.
    retained: usize,
    /// `Some(true)` once the body ended whole, `Some(false)` if it failed.
    end: Option<bool>,
    /// Detached: read chunks are dropped and no reader may start from the beginning.
    trimming: bool,
    readers: Vec<Option<Slot>>,
    publisher: Option<Waker>,
}

struct Slot {
    cursor: usize,
    waker: Option<Waker>,
}

impl BodyState {
    fn wake_readers(&mut self) {
        for slot in self.readers.iter_mut().flatten() {
            if let Some(waker) = slot.waker.take() {
                waker.wake();
            }
        }
    }

    /// Drop the chunks every reader has read (detached bodies only).
    fn trim(&mut self) {
        if !self.trimming {
            return;
        }
        let min = self
            .readers
            .iter()
            .flatten()
            .map(|slot| slot.cursor)
            .min()
            .unwrap_or(usize::MAX);
        while self.base < min {
            let Some(chunk) = self.chunks.pop_front() else {
                break;
            };
            self.retained -= chunk.len();
            self.base += 1;
        }
        if self.retained <= TRIM_WINDOW
            && let Some(waker) = self.publisher.take()
        {
            waker.wake();
        }
    }

    fn reader_count(&self) -> usize {
        self.readers.iter().flatten().count()
    }
}

impl<H> Shared<H> {
    /// A reader from the body's first byte; `None` once the body is detached (its start may be
    /// gone): go upstream instead.
    pub fn reader(self: &Arc<Self>) -> Option<Reader<H>> {
        let mut state = lock(&self.body);
        if state.trimming {
            return None;
        }
        let slot = Slot {
            cursor: 0,
            waker: None,
        };
        let index = match state.readers.iter().position(Option::is_none) {
            Some(free) => {
                state.readers[free] = Some(slot);
                free
            }
            None => {
                state.readers.push(Some(slot));
                state.readers.len() - 1
            }
        };
        Some(Reader {
            shared: self.clone(),
            index,
            exact_len: None,
        })
    }

    /// Wait until the flight is over: its object is committed and can be looked up (or it
    /// will not be, or the body failed). A reader attached before keeps every byte.
    pub async fn settled(&self) {
        let mut settled = self.settled.subscribe();
        let _ = settled.wait_for(|done| *done).await;
    }

    /// Readers attached now.
    pub fn readers(&self) -> usize {
        lock(&self.body).reader_count()
    }
}

/// The leader's side of a published response: push the body in, then end it.
pub struct Publisher<K: Eq + Hash + Clone, H> {
    flights: Flights<K, H>,
    key: K,
    flight: Option<Arc<Flight<H>>>,
    shared: Arc<Shared<H>>,
    ended: bool,
}

impl<K: Eq + Hash + Clone, H> Publisher<K, H> {
    pub fn shared(&self) -> &Arc<Shared<H>> {
        &self.shared
    }

    /// Append a body chunk; readers waiting for bytes wake.
    pub fn push(&self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        let mut state = lock(&self.shared.body);
        state.retained += chunk.len();
        state.chunks.push_back(chunk);
        state.wake_readers();
        state.trim();
    }

    /// The object will not be stored after all: no new follower joins this flight (new
    /// requests go upstream themselves), and the body keeps only what some reader still needs.
    pub fn detach(&mut self) {
        if let Some(flight) = self.flight.take() {
            self.flights.remove(&self.key, &flight);
        }
        let mut state = lock(&self.shared.body);
        state.trimming = true;
        state.trim();
    }

    /// Ready when the fill may push more: always while storing; when detached, once the slowest
    /// reader is within [`TRIM_WINDOW`].
    pub fn poll_room(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = lock(&self.shared.body);
        if !state.trimming || state.retained <= TRIM_WINDOW || state.reader_count() == 0 {
            return Poll::Ready(());
        }
        state.publisher = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Cut off the readers furthest behind (their bodies end in an error, as a client too slow
    /// for nginx's `send_timeout` is cut), so one client that stopped reading does not hold the
    /// fill, and every other reader, at its pace forever. Returns how many were cut.
    pub fn cut_slowest(&self) -> usize {
        let mut state = lock(&self.shared.body);
        let Some(min) = state.readers.iter().flatten().map(|slot| slot.cursor).min() else {
            return 0;
        };
        let mut cut = 0;
        for slot in state.readers.iter_mut() {
            if slot.as_ref().is_some_and(|s| s.cursor == min) {
                if let Some(waker) = slot.take().and_then(|s| s.waker) {
                    waker.wake();
                }
                cut += 1;
            }
        }
        state.trim();
        cut
    }

    /// Wait for [`Publisher::poll_room`].
    pub async fn room(&self) {
        std::future::poll_fn(|cx| self.poll_room(cx)).await;
    }

    /// True when nobody reads a detached body any more: the fill may stop.
    pub fn abandoned(&self) -> bool {
        let state = lock(&self.shared.body);
        state.trimming && state.reader_count() == 0
    }

    /// The body is complete: readers finish once they have read it all.
    pub fn end(&mut self) {
        self.finish_body(true);
    }

    /// The stored object is committed (or not): requests from now on look it up instead of
    /// joining this flight, and the readers still here keep only what they have yet to read
    /// (a slow client does not hold the whole body in memory once it is stored).
    pub fn done(mut self) {
        self.finish_body(true);
        if let Some(flight) = self.flight.take() {
            self.flights.remove(&self.key, &flight);
        }
        {
            let mut state = lock(&self.shared.body);
            state.trimming = true;
            state.trim();
        }
        self.shared.settled.send_replace(true);
    }

    fn finish_body(&mut self, whole: bool) {
        if self.ended {
            return;
        }
        self.ended = true;
        let mut state = lock(&self.shared.body);
        state.end = Some(whole);
        state.wake_readers();
    }
}

impl<K: Eq + Hash + Clone, H> Drop for Publisher<K, H> {
    /// A publisher dropped before [`Publisher::end`] means the upstream body failed: readers
    /// get an error (their clients see the response cut short, as without a cache).
    fn drop(&mut self) {
        self.finish_body(false);
        if let Some(flight) = self.flight.take() {
            self.flights.remove(&self.key, &flight);
        }
        self.shared.settled.send_replace(true);
    }
}

/// One client's view of a published body: an `http_body::Body` that yields the chunks as the
/// publisher pushes them.
pub struct Reader<H> {
    shared: Arc<Shared<H>>,
    index: usize,
    exact_len: Option<u64>,
}

impl<H> Reader<H> {
    /// Say the body's exact length (from the head's `Content-Length`), for the size hint.
    pub fn with_len(mut self, len: Option<u64>) -> Self {
        self.exact_len = len;
        self
    }
}

/// The upstream body failed while this response was being read.
#[derive(Debug)]
pub struct BodyFailed;

impl std::fmt::Display for BodyFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the upstream response body failed before its end")
    }
}

impl std::error::Error for BodyFailed {}

impl<H> http_body::Body for Reader<H> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let mut state = lock(&this.shared.body);
        let BodyState {
            chunks,
            base,
            end,
            readers,
            ..
        } = &mut *state;
        let Some(Some(slot)) = readers.get_mut(this.index) else {
            return Poll::Ready(Some(Err(Box::new(BodyFailed))));
        };
        if let Some(chunk) = slot
            .cursor
            .checked_sub(*base)
            .and_then(|i| chunks.get(i))
            .cloned()
        {
            slot.cursor += 1;
            state.trim();
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        match end {
            Some(true) => Poll::Ready(None),
            Some(false) => Poll::Ready(Some(Err(Box::new(BodyFailed)))),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self.exact_len {
            Some(len) => SizeHint::with_exact(len),
            None => SizeHint::default(),
        }
    }
}

impl<H> Drop for Reader<H> {
    fn drop(&mut self) {
        let mut state = lock(&self.shared.body);
        if let Some(slot) = state.readers.get_mut(self.index) {
            *slot = None;
        }
        state.trim();
        if state.reader_count() == 0
            && let Some(waker) = state.publisher.take()
        {
            waker.wake();
        }
    }
}

/// A poisoned lock only means another thread panicked mid-update; the state here stays valid
/// (every update is a few field writes), so carry on rather than propagate the panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
