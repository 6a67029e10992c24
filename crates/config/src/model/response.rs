//! What a route does to its responses, whatever its action: header edits
//! (`response_headers = { ... }`) and, on static routes, how long browsers may keep files
//! (`static.max_age`, nginx's `expires`).

use std::time::Duration;

use http::{HeaderName, HeaderValue, StatusCode};

/// `response_headers = { set = {...}, add = {...}, remove = [...], always = false }` of a
/// route. Applied in that order: `remove`, then `set` (replacing any value), then `add`
/// (another line beside those there).
#[derive(Debug, Clone, Default)]
pub struct ResponseHeaders {
    pub set: Vec<(HeaderName, HeaderValue)>,
    pub add: Vec<(HeaderName, HeaderValue)>,
    pub remove: Vec<HeaderName>,
    /// Edit every response, errors included. Off by default, as nginx's `add_header`: only
    /// responses with a status in [`ResponseHeaders::applies_to`]'s list, so a `Cache-Control`
    /// meant for pages is not put on a 404 or a 502.
    pub always: bool,
}

impl ResponseHeaders {
    /// Whether the edits apply to a response with `status`: with `always`, every one;
    /// otherwise nginx's list for `add_header`: 200, 201, 204, 206, 301, 302, 303, 304, 307,
    /// 308.
    pub fn applies_to(&self, status: StatusCode) -> bool {
        self.always
            || matches!(
                status.as_u16(),
                200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308
            )
    }
}

/// `max_age` of a static route: the `Cache-Control` its files are sent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxAge {
    /// `max_age = "7d"`: `Cache-Control: max-age=604800`; `"0s"` sends `no-cache` (stored, but
    /// revalidated before each use: nginx's `expires epoch` / `-1`).
    Lifetime(Duration),
    /// `max_age = "immutable"`: `Cache-Control: public, max-age=31536000, immutable`, for
    /// names that change with their content (`app.3f9c2e.js`): a year, never revalidated
    /// (RFC 8246).
    Immutable,
}

impl MaxAge {
    /// A year, the longest lifetime RFC 9111 §5.3 suggests an origin gives (`immutable`'s).
    pub const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

    /// The `Cache-Control` value.
    pub fn cache_control(self) -> HeaderValue {
        match self {
            MaxAge::Immutable => HeaderValue::from_static("public, max-age=31536000, immutable"),
            MaxAge::Lifetime(d) if d.is_zero() => HeaderValue::from_static("no-cache"),
            // Digits only: always a valid value.
            MaxAge::Lifetime(d) => HeaderValue::from_str(&format!("max-age={}", d.as_secs()))
                .unwrap_or_else(|_| HeaderValue::from_static("no-cache")),
        }
    }
}
