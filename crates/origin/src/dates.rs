//! `GET /what-date-is-it`: 10,000 copies of `{"year":Y,"month":M,"day":D}`, today's date in UTC.
//!
//! The body only changes once a day, so it is rendered once per day and the same `Bytes` (a
//! reference-counted buffer) is handed to every request. A request takes the read side of a
//! `std::sync::RwLock` just long enough to compare the day number and clone the `Bytes`: readers
//! never wait for each other, and the write side is taken only for the instant it takes to swap in
//! the next day's body, which is rendered outside the lock. (arc-swap would save the lock word's two
//! atomics, but cloning the `Bytes` is an atomic on a shared counter anyway, and the 340 KB copy to
//! the socket dwarfs both.)
//!
//! UTC, not local time, so two origins in different time zones behind one proxy agree, and so the
//! answer does not depend on the machine's zone configuration.

use std::sync::{PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderValue, Method, Response};
use sluice_core::Body;
use time::OffsetDateTime;

use crate::json::{RECORDS, repeated_array};
use crate::respond;

/// Seed 003's origin let nginx cache the answer for a few seconds.
const CACHE_CONTROL: HeaderValue = HeaderValue::from_static("max-age=5");
const SECONDS_PER_DAY: u64 = 86_400;

/// The rendered body for one UTC day.
struct Rendered {
    /// Days since 1970-01-01 (UTC).
    day: u64,
    body: Bytes,
}

/// The date body, rendered once per day and shared by every request of that day.
pub(crate) struct DateBody {
    current: RwLock<Rendered>,
}

impl DateBody {
    /// Render today's body up front so the first request is as fast as the others.
    pub(crate) fn new() -> Self {
        let day = today();
        Self {
            current: RwLock::new(Rendered {
                day,
                body: render(day),
            }),
        }
    }

    /// The body for `day`: the cached one, or a freshly rendered one swapped in.
    fn body_for(&self, day: u64) -> Bytes {
        {
            // A poisoned lock only means a writer panicked mid-swap; the value is still a whole
            // `Rendered` (both fields are replaced together), so keep serving it.
            let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
            if current.day == day {
                return current.body.clone();
            }
        }
        // Render outside the lock: around midnight several threads may render the same day at
        // once, which wastes a millisecond but never blocks a reader.
        let body = render(day);
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        // Never go back in time if a request that started before midnight arrives late.
        if day > current.day {
            *current = Rendered {
                day,
                body: body.clone(),
            };
        }
        body
    }

    /// Answer GET or HEAD.
    pub(crate) fn respond(&self, method: &Method) -> Response<Body> {
        let body = self.body_for(today());
        respond::full_cacheable(method, respond::APPLICATION_JSON, CACHE_CONTROL, body)
    }
}

/// Days since the Unix epoch, UTC. A clock set before 1970 counts as day 0 rather than failing.
fn today() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / SECONDS_PER_DAY)
}

/// The JSON element for `day`, e.g. `{"year":2026,"month":11,"day":22}`.
fn element(day: u64) -> String {
    let seconds = i64::try_from(day.saturating_mul(SECONDS_PER_DAY)).unwrap_or(0);
    let date = OffsetDateTime::from_unix_timestamp(seconds).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    format!(
        r#"{{"year":{},"month":{},"day":{}}}"#,
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

fn render(day: u64) -> Bytes {
    repeated_array(element(day).as_bytes(), RECORDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_uses_calendar_numbers() {
        // 2026-11-22 is day 20,779 since 1970-01-01.
        assert_eq!(element(20_779), r#"{"year":2026,"month":11,"day":22}"#);
        assert_eq!(element(0), r#"{"year":1970,"month":1,"day":1}"#);
    }

    #[test]
    fn same_day_shares_one_buffer_and_a_new_day_swaps_it() {
        let dates = DateBody::new();
        let day = today();
        let a = dates.body_for(day);
        let b = dates.body_for(day);
        assert_eq!(a.as_ptr(), b.as_ptr(), "rendered once, not per request");
        let tomorrow = dates.body_for(day + 1);
        assert_ne!(a, tomorrow);
        assert_eq!(dates.body_for(day + 1).as_ptr(), tomorrow.as_ptr());
        // A late request for yesterday gets yesterday's answer without evicting today's.
        assert_eq!(dates.body_for(day), a);
        assert_eq!(dates.body_for(day + 1).as_ptr(), tomorrow.as_ptr());
    }
}
