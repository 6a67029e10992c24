//! A route's `response_headers` (any action) and a static route's `max_age`: edits every
//! response of the route gets on its way out, in the response phase after compression, so a
//! `Cache-Control` or `Vary` set here is exactly what the client sees.
//!
//! Which responses: nginx's list for `add_header` and `expires` (200, 201, 204, 206, 301, 302,
//! 303, 304, 307, 308), or every one with `always = true` (as nginx's `add_header ... always`),
//! so a lifetime meant for files is not put on a 404. Order: `max_age`'s `Cache-Control` first
//! (a static route's), then `remove`, `set` (replacing), `add` (one more line), so an explicit
//! edit wins over `max_age`. Headers sluice manages (framing, connection) cannot be named here
//! (`sluice check` refuses them).

use http::StatusCode;
use http::header::{self, HeaderMap, HeaderValue};
use sluice_config::{Action, ResponseHeaders, Route};

/// A route's response edits, ready for requests.
pub struct RouteResponseHeaders {
    /// A static route's `max_age`, as its `Cache-Control` value.
    cache_control: Option<HeaderValue>,
    edits: ResponseHeaders,
}

impl RouteResponseHeaders {
    /// `None` when the route edits nothing.
    pub fn new(route: &Route) -> Option<Self> {
        let cache_control = match &route.action {
            Action::Static(files) => files.max_age.map(|m| m.cache_control()),
            _ => None,
        };
        if cache_control.is_none() && route.response_headers.is_none() {
            return None;
        }
        Some(Self {
            cache_control,
            edits: route.response_headers.clone().unwrap_or_default(),
        })
    }

    /// Edit the headers of a response with `status`.
    pub fn apply(&self, status: StatusCode, headers: &mut HeaderMap) {
        if !self.edits.applies_to(status) {
            return;
        }
        if let Some(value) = &self.cache_control {
            headers.insert(header::CACHE_CONTROL, value.clone());
        }
        for name in &self.edits.remove {
            headers.remove(name);
        }
        for (name, value) in &self.edits.set {
            headers.insert(name.clone(), value.clone());
        }
        for (name, value) in &self.edits.add {
            headers.append(name.clone(), value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_config::{MaxAge, PathMatch, StaticFiles};

    fn route(max_age: Option<MaxAge>, edits: Option<ResponseHeaders>) -> Route {
        let mut files = StaticFiles::new(std::path::PathBuf::from("/srv"));
        files.max_age = max_age;
        Route {
            name: "r".into(),
            hosts: Vec::new(),
            path: PathMatch::Prefix("/".into()),
            listeners: Vec::new(),
            matchers: Default::default(),
            access: Default::default(),
            action: Action::Static(files),
            compress: None,
            cache: None,
            rate_limit: None,
            body: Default::default(),
            response_headers: edits,
            dictionary: None,
        }
    }

    #[test]
    fn max_age_then_edits_on_success_statuses_only() {
        let edits = ResponseHeaders {
            set: vec![(
                header::HeaderName::from_static("x-frame-options"),
                HeaderValue::from_static("DENY"),
            )],
            add: vec![(
                header::LINK,
                HeaderValue::from_static("</a.css>; rel=preload"),
            )],
            remove: vec![header::HeaderName::from_static("x-powered-by")],
            always: false,
        };
        let compiled =
            RouteResponseHeaders::new(&route(Some(MaxAge::Immutable), Some(edits))).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("x-powered-by", HeaderValue::from_static("php"));
        headers.insert(
            header::LINK,
            HeaderValue::from_static("</b.js>; rel=preload"),
        );
        compiled.apply(StatusCode::OK, &mut headers);
        assert_eq!(
            headers[header::CACHE_CONTROL],
            "public, max-age=31536000, immutable"
        );
        assert_eq!(headers["x-frame-options"], "DENY");
        assert!(!headers.contains_key("x-powered-by"));
        assert_eq!(headers.get_all(header::LINK).iter().count(), 2);
        let mut not_found = HeaderMap::new();
        compiled.apply(StatusCode::NOT_FOUND, &mut not_found);
        assert!(not_found.is_empty(), "nothing on a 404 without `always`");
    }

    #[test]
    fn a_set_cache_control_wins_over_max_age_and_always_reaches_errors() {
        let edits = ResponseHeaders {
            set: vec![(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
            always: true,
            ..Default::default()
        };
        let lifetime = MaxAge::Lifetime(std::time::Duration::from_secs(3600));
        let compiled = RouteResponseHeaders::new(&route(Some(lifetime), Some(edits))).unwrap();
        let mut headers = HeaderMap::new();
        compiled.apply(StatusCode::NOT_FOUND, &mut headers);
        assert_eq!(headers[header::CACHE_CONTROL], "no-store");
        assert!(RouteResponseHeaders::new(&route(None, None)).is_none());
        let compiled = RouteResponseHeaders::new(&route(Some(lifetime), None)).unwrap();
        let mut headers = HeaderMap::new();
        compiled.apply(StatusCode::NOT_MODIFIED, &mut headers);
        assert_eq!(headers[header::CACHE_CONTROL], "max-age=3600");
    }
}
