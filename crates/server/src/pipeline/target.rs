//! The request target in normal form, first thing in the request phase.
//!
//! Routes, rate limits, the cache key, static files, redirects and hash balancing all read the
//! request's URI, so the pipeline puts the normal form of its path there
//! (`sluice_core::uri_path::normalize`: RFC 3986 §6.2.2, which RFC 9110 §4.2.3 allows an
//! intermediary to apply) before anything looks at it: `/%61dmin` and `/x/../admin` are `/admin`
//! to all of them. The target as the client sent it is kept in the request's extensions
//! ([`ReceivedTarget`]) for the proxy, which forwards it unless the route says
//! `forward_path = "normalized"`. The access log writes the request line as received.
//!
//! The query is never touched. `OPTIONS *` and authority-form targets have no path to
//! normalise; an absolute-form target keeps its scheme and authority.

use http::Request;
use http::uri::{PathAndQuery, Uri};
use sluice_core::uri_path::{self, PathError};

use crate::shared::request::ReceivedTarget;

/// Put the normal form of `req`'s path in its URI, keeping the received target in a
/// [`ReceivedTarget`] extension when they differ. An error is the client's (400).
pub fn normalize<B>(req: &mut Request<B>) -> Result<(), PathError> {
    let Some(received) = req.uri().path_and_query() else {
        return Ok(());
    };
    let normal = match uri_path::normalize(received.path())? {
        std::borrow::Cow::Borrowed(_) => return Ok(()),
        std::borrow::Cow::Owned(normal) => normal,
    };
    let received = received.clone();
    let mut target = normal;
    if let Some(query) = received.query() {
        target.push('?');
        target.push_str(query);
    }
    let mut parts = req.uri().clone().into_parts();
    // The normal form only holds characters the received path did (decoding yields unreserved
    // ones), so this parses; if it ever did not, the request is refused rather than misrouted.
    parts.path_and_query = Some(PathAndQuery::try_from(target).map_err(|_| PathError::BadEscape)?);
    *req.uri_mut() = Uri::from_parts(parts).map_err(|_| PathError::BadEscape)?;
    req.extensions_mut().insert(ReceivedTarget(received));
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn normalized(uri: &str) -> (String, Option<String>) {
        let mut req = Request::builder().uri(uri).body(()).unwrap();
        normalize(&mut req).unwrap();
        let received = req.extensions().get::<ReceivedTarget>();
        (
            req.uri().to_string(),
            received.map(|r| r.0.as_str().to_owned()),
        )
    }

    #[test]
    fn the_path_is_normalised_and_the_query_kept() {
        assert_eq!(
            normalized("/%61dmin/./x?q=%61&r=/../"),
            (
                "/admin/x?q=%61&r=/../".into(),
                Some("/%61dmin/./x?q=%61&r=/../".into())
            )
        );
        assert_eq!(
            normalized("/x/../admin?"),
            ("/admin?".into(), Some("/x/../admin?".into()))
        );
    }

    #[test]
    fn normal_targets_are_left_alone() {
        assert_eq!(normalized("/a/b?x=1"), ("/a/b?x=1".into(), None));
        assert_eq!(normalized("*"), ("*".into(), None));
    }

    #[test]
    fn absolute_form_keeps_scheme_and_authority() {
        assert_eq!(
            normalized("http://a.test:8080/b/../%63"),
            ("http://a.test:8080/c".into(), Some("/b/../%63".into()))
        );
    }

    #[test]
    fn bad_paths_are_errors() {
        for uri in ["/../x", "/%2e%2e/admin", "/a%zz"] {
            let mut req = Request::builder().uri(uri).body(()).unwrap();
            assert!(normalize(&mut req).is_err(), "{uri}");
        }
    }
}
