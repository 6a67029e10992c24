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
}
