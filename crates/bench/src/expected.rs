//! What a correct server answers for a scenario, before any content coding: the page for the
//! static scenarios, and for the proxied ones what the demo origin itself answers, asked
//! in-process with the same request (so the check compares against the origin's real bytes,
//! and the baseline serves exactly them).

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};

use crate::fixtures;
use crate::scenario::{Scenario, Setup};

/// The identity body a correct target sends for `scenario`'s request.
pub async fn identity_body(scenario: &Scenario, page: &Bytes) -> Result<Bytes, String> {
    let proxy = match &scenario.setup {
        Setup::Static { .. } | Setup::Precompressed => {
            return Ok(if is_download(scenario) {
                fixtures::download()
            } else {
                page.clone()
            });
        }
        Setup::Direct => None,
        Setup::Proxy(p) => Some(p),
    };
    let load = &scenario.load;
    let mut body = load.body.clone().unwrap_or_default();
    let mut builder = Request::builder()
        .method(load.method.clone())
        .uri(load.path.as_str());
    for (name, value) in &load.headers {
        // The origin sees the body decoded when the proxy decompresses it, with no coding.
        if proxy.is_some_and(|p| p.decompress_requests) && name == "content-encoding" {
            continue;
        }
        builder = builder.header(name.as_str(), value.as_str());
    }
    if proxy.is_some_and(|p| p.decompress_requests) {
        body = Bytes::from(fixtures::decode(Some("gzip"), &body)?);
    }
    let req = builder
        .body(Full::new(body))
        .map_err(|e| format!("building the request for {}: {e}", scenario.name))?;
    let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions::default());
    let resp = origin.handle(req).await;
    if !resp.status().is_success() {
        return Err(format!(
            "the demo origin answers {} to {} {}",
            resp.status(),
            load.method,
            load.path
        ));
    }
    resp.into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| format!("reading the origin's answer: {e}"))
}

/// Whether `scenario` fetches the large download rather than the page.
pub fn is_download(scenario: &Scenario) -> bool {
    scenario
        .load
        .path
        .strip_prefix('/')
        .is_some_and(|p| p == fixtures::DOWNLOAD_NAME)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::scenario;

    #[tokio::test]
    async fn the_download_rows_expect_the_10_mib_file_and_the_others_the_page() {
        let page = fixtures::page();
        for s in scenario::all(false) {
            if !matches!(s.setup, Setup::Static { .. } | Setup::Precompressed) {
                continue;
            }
            let body = identity_body(&s, &page).await.unwrap();
            if s.name.starts_with("download-") {
                assert!(is_download(&s), "{}", s.name);
                assert_eq!(body.len(), fixtures::DOWNLOAD_SIZE, "{}", s.name);
                assert_eq!(body, fixtures::download(), "{}", s.name);
            } else {
                assert!(!is_download(&s), "{}", s.name);
                assert_eq!(body, page, "{}", s.name);
            }
        }
    }
}
