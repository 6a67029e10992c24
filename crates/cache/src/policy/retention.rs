//! How long a shared tier keeps a stored response: what is left of its freshness lifetime
//! (RFC 9111 §4.2.1, §4.2.3) plus the longest stale window it may still be served in: the
//! origin's `stale-while-revalidate` / `stale-if-error` (RFC 5861 §3, §4) or the zone's own
//! `use_stale` (unbounded: then the shared tier's `max_ttl` caps it). Past that, no instance
//! could serve it without the origin, so it only costs memory.

use std::time::{Duration, SystemTime};

use super::Settings;
use super::directives::ResponseDirectives;
use super::freshness::{current_age, lifetime_with};
use crate::meta::Meta;

pub fn retention(meta: &Meta, settings: &Settings, now: SystemTime) -> Duration {
    let d = ResponseDirectives::parse(&meta.headers, settings);
    let lifetime =
        lifetime_with(&d, meta.status, &meta.headers, meta.response_time, settings).duration;
    let left = lifetime.saturating_sub(current_age(meta, now));
    // §4.2.4: these forbid serving stale whatever else allows it.
    let never_stale = d.no_cache || d.must_revalidate || d.proxy_revalidate;
    let stale = if never_stale {
        Duration::ZERO
    } else {
        let origin = d
            .stale_while_revalidate
            .unwrap_or_default()
            .max(d.stale_if_error.unwrap_or_default());
        let zone = if d.s_maxage.is_some() {
            // §5.2.2.10: s-maxage allows stale only through the origin's own directives.
            Duration::ZERO
        } else {
            settings
                .use_stale
                .updating
                .unwrap_or_default()
                .max(settings.use_stale.error.unwrap_or_default())
        };
        origin.max(zone)
    };
    left.saturating_add(stale)
}

/// `meta` as a response that became stale just now (a soft purge): its `Age` raised to its
/// freshness lifetime under `settings`, so that the stale windows (`stale-while-revalidate`,
/// `use_stale`) apply from this moment, and nothing else changes. Unchanged when already stale.
pub fn expire_now(meta: &Meta, settings: &Settings, now: SystemTime) -> Meta {
    let d = ResponseDirectives::parse(&meta.headers, settings);
    let lifetime =
        lifetime_with(&d, meta.status, &meta.headers, meta.response_time, settings).duration;
    let age = current_age(meta, now);
    let mut stale = meta.clone();
    if age < lifetime {
        // §4.2.3: current_age = corrected_initial_age + resident_time, and an Age field of
        // at least the initial age plus what is left of the lifetime makes the corrected
        // initial age that large. §5.1: whole seconds; one more makes it stale for certain.
        let resident = now
            .duration_since(meta.response_time)
            .unwrap_or(Duration::ZERO);
        let initial = age.saturating_sub(resident);
        let raised = initial.as_secs() + 1 + (lifetime - age).as_secs() + 1;
        stale
            .headers
            .insert(http::header::AGE, http::HeaderValue::from(raised));
    }
    stale
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vary::{VaryKey, VaryRule};
    use http::{HeaderMap, HeaderValue, StatusCode};

    fn meta(cache_control: &str, at: SystemTime) -> Meta {
        let mut headers = HeaderMap::new();
        if let Ok(value) = HeaderValue::from_str(cache_control) {
            headers.insert(http::header::CACHE_CONTROL, value);
        }
        Meta {
            status: StatusCode::OK,
            headers,
            request_time: at,
            response_time: at,
            primary_key: "http://example.com/".into(),
            vary: VaryRule::None,
            vary_key: VaryKey::empty(),
            variant: "identity".into(),
            body_len: 0,
        }
    }

    #[test]
    fn freshness_left_plus_the_longest_stale_window_allowed() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let settings = Settings::default();
        let secs = Duration::from_secs;
        let m = meta("max-age=60, stale-while-revalidate=30", t0);
        assert_eq!(retention(&m, &settings, t0 + secs(10)), secs(80));
        let m = meta("max-age=60, stale-if-error=300, must-revalidate", t0);
        // §4.2.4: never served stale, so not kept for it.
        assert_eq!(retention(&m, &settings, t0), secs(60));
        let m = meta("max-age=60", t0);
        assert_eq!(retention(&m, &settings, t0 + secs(100)), Duration::ZERO);
        let mut zone = settings.clone();
        zone.use_stale.updating = Some(Duration::MAX);
        assert_eq!(retention(&m, &zone, t0), Duration::MAX, "capped by max_ttl");
        let m = meta("s-maxage=60", t0);
        assert_eq!(retention(&m, &zone, t0), secs(60), "§5.2.2.10");
    }

    #[test]
    fn expire_now_makes_a_fresh_response_just_stale() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let settings = Settings::default();
        let m = meta("max-age=60, stale-while-revalidate=30", t0);
        let now = t0 + Duration::from_secs(10);
        let stale = expire_now(&m, &settings, now);
        let age = current_age(&stale, now);
        assert!(
            age >= Duration::from_secs(60) && age <= Duration::from_secs(62),
            "{age:?}"
        );
        assert_eq!(
            crate::policy::evaluate(&m, &http::HeaderMap::new(), &settings, now).reuse,
            crate::policy::Reuse::Fresh
        );
        assert!(matches!(
            crate::policy::evaluate(&stale, &http::HeaderMap::new(), &settings, now).reuse,
            crate::policy::Reuse::Revalidate {
                while_revalidate: Some(_),
                ..
            }
        ));
    }
}
