//! A proxied request between its attempts: the request as prepared once ([`Forward`]), what a
//! failed attempt means ([`Failure`]) and the retry state that decides whether another
//! attempt follows ([`Retries`]). `mod.rs` runs the attempts in that order.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use http::{HeaderValue, Response};
use sluice_core::{Body, Error};
use sluice_upstream::Peer;

use super::ProxyHandler;
use super::upgrade::Switch;

/// What `prepare` leaves: a request to forward, or an answer already (a refused upgrade or
/// request coding). Returned once per request and taken apart at once: boxing the large
/// variant would cost an allocation per request for nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Ready {
    Forward(Forward),
    Answered(Response<Body>),
}

/// The request as every attempt sends it.
pub(super) struct Forward {
    /// The forwarded head; cloned per attempt, moved into the last one.
    pub parts: http::request::Parts,
    /// A streamed body's slot (`None`: no body); the first attempt to poll it empties it.
    pub body: Option<Arc<Mutex<Option<Body>>>>,
    /// The client's `Host`, for `host = "pass"`.
    pub host: Option<HeaderValue>,
    /// The client's URI when the forwarded one differs (the balancer hashes the client's).
    pub received_uri: Option<http::Uri>,
    /// The upgrade asked for, until a `101` takes it.
    pub switch: Option<Switch>,
}

/// What a failed attempt means.
pub(super) enum Failure {
    /// The client's body was at fault: answered with this error, no retry.
    ClientBody(Error),
    /// The server closed a pooled connection as the request went out on it: once more, on a
    /// new connection to the same server.
    KeepaliveRace,
    /// The server failed; `retry_safe` when nothing of the request can have been acted on.
    Server { error: Error, retry_safe: bool },
}

/// The retry state of one request.
pub(super) struct Retries {
    /// Attempts on distinct servers: the group's `retry.tries`, or 1 when it has one server.
    tries: u32,
    /// The group's `retry.budget`: no new attempt starts after it, from the first.
    budget: std::time::Duration,
    /// A request that may meet a keep-alive race (no body, idempotent) keeps its head for one
    /// more try even when no other server could take it.
    pub race_retry_left: bool,
    /// After a keep-alive race: the server to send the request to again, on a new connection.
    pub again_on_new: Option<Arc<Peer>>,
    /// The servers that failed this request, by index.
    pub tried: Vec<usize>,
    /// The last failure, answered when no server is left.
    pub last_error: Option<Error>,
    /// When the first attempt started (or the body began to arrive).
    started: Option<Instant>,
}

impl Retries {
    pub fn new(proxy: &ProxyHandler, req: &Forward, started: Option<Instant>) -> Self {
        // Another attempt needs the head again; when none can follow (one try, or one server)
        // the head is moved into the first attempt instead of cloned.
        let tries = if proxy.group.peers().len() > 1 {
            proxy.upstream.retry.tries
        } else {
            1
        };
        Self {
            tries,
            budget: proxy.upstream.retry.budget,
            race_retry_left: req.body.is_none() && req.parts.method.is_idempotent(),
            again_on_new: None,
            tried: Vec::new(),
            last_error: None,
            started,
        }
    }

    /// The retry budget's start: the first attempt's clock reading unless a body started it.
    pub fn started(&mut self, now: Instant) -> Instant {
        *self.started.get_or_insert(now)
    }

    /// No attempt can follow this one: its head is moved, not cloned.
    pub fn last_try(&self) -> bool {
        self.tried.len() as u32 + 1 >= self.tries && !self.race_retry_left
    }

    /// After a keep-alive race on `peer`: one more try there, on a new connection.
    pub fn after_race(&mut self, peer: Arc<Peer>) {
        self.race_retry_left = false;
        self.again_on_new = Some(peer);
    }

    /// After server `peer` failed with `error`: `Ok` when another server may be tried (safe to
    /// replay, within the budget and the tries), else the error to answer with.
    pub fn after_failure(
        &mut self,
        peer: usize,
        error: Error,
        retry_safe: bool,
        started: Instant,
    ) -> Result<(), Error> {
        self.tried.push(peer);
        let within_budget = started.elapsed() < self.budget;
        if !(retry_safe && within_budget && (self.tried.len() as u32) < self.tries) {
            return Err(error);
        }
        self.last_error = Some(error);
        Ok(())
    }
}
