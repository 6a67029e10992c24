//! The correctness check run before the load: numbers of a server that skips compression,
//! serves the wrong bytes, loses a POST body or ignores the weights would be meaningless, so
//! such a target is reported as `CheckFailed` instead of measured.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http::header::CONTENT_ENCODING;
use http_body_util::BodyExt;

use crate::client::{self, Endpoint, RequestTemplate, TlsConnector};
use crate::fixtures;
use crate::scenario::{Scenario, Setup};

/// Header naming the demo origin that answered (`sluice origin --name`).
const X_ORIGIN: &str = "x-origin";
/// Requests per unit of weight in the balancing check: 3:1 over 20 per unit is 60 / 20.
const BALANCE_ROUNDS: u32 = 20;

/// What the check may ask of a target: the baseline answers from memory, so it neither
/// balances nor caches.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    pub balancing: bool,
    pub caching: bool,
}

/// Check `scenario` against `endpoint`; `identity` is the body a correct server sends before
/// content coding.
pub async fn run(
    scenario: &Scenario,
    endpoint: &Endpoint,
    identity: &Bytes,
    expect: Expect,
) -> Result<(), String> {
    tokio::time::timeout(
        Duration::from_secs(120),
        check(scenario, endpoint, identity, expect),
    )
    .await
    .map_err(|_| "the check did not finish within 120 s".to_string())?
}

async fn check(
    scenario: &Scenario,
    endpoint: &Endpoint,
    identity: &Bytes,
    expect: Expect,
) -> Result<(), String> {
    let load = &scenario.load;
    let template = RequestTemplate::new(load, endpoint)?;
    let tls = TlsConnector::new()?;
    let mut conn = client::connect(endpoint, load.protocol, &tls).await?;
    if load.tls && conn.alpn.as_deref() != Some(load.protocol.alpn()) {
        return Err(format!(
            "ALPN chose {:?}, expected {}",
            conn.alpn,
            load.protocol.alpn()
        ));
    }
    let first = fetch(&mut conn.sender, &template).await?;
    verify_response(scenario, &first, identity)?;

    if expect.caching && scenario.check.cache_hit {
        let again = fetch(&mut conn.sender, &template).await?;
        let status = again.header("x-cache-status");
        if !status.eq_ignore_ascii_case("HIT") {
            return Err(format!(
                "a repeated request was not a cache hit (X-Cache-Status: {status:?})"
            ));
        }
    }
    if expect.balancing
        && scenario.check.balance
        && let Setup::Proxy(proxy) = &scenario.setup
    {
        let total: u32 = proxy.weights.iter().sum::<u32>() * BALANCE_ROUNDS;
        let mut seen: BTreeMap<String, u32> = BTreeMap::new();
        for _ in 0..total {
            let resp = fetch(&mut conn.sender, &template).await?;
            *seen.entry(resp.header(X_ORIGIN).to_string()).or_default() += 1;
        }
        verify_split(&proxy.weights, &seen)?;
    }
    Ok(())
}

/// One response, whole.
pub struct Fetched {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Fetched {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

pub async fn fetch(
    sender: &mut client::Sender,
    template: &RequestTemplate,
) -> Result<Fetched, String> {
    if let client::Sender::H3(h3) = sender {
        let (status, headers, body) = client::fetch_h3(h3, template.build()).await?;
        return Ok(Fetched {
            status,
            headers,
            body,
        });
    }
    let resp = sender
        .send(template.build())
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    let status = resp.status().as_u16();
    let (parts, body) = resp.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| format!("reading the response body: {e}"))?
        .to_bytes();
    Ok(Fetched {
        status,
        headers: parts.headers,
        body,
    })
}

/// Status, `Content-Encoding`, and the decoded body (or, for `/reqinfo`, the hash of what the
/// origin received).
pub fn verify_response(
    scenario: &Scenario,
    resp: &Fetched,
    identity: &Bytes,
) -> Result<(), String> {
    if !(200..300).contains(&resp.status) {
        return Err(format!("status {}, expected 2xx", resp.status));
    }
    let encoding = resp
        .headers
        .get(CONTENT_ENCODING)
        .map(|v| v.to_str().unwrap_or("(not text)").to_string());
    let wanted = scenario.check.encoding.map(|a| a.token());
    let identity_sent = matches!(encoding.as_deref(), None | Some("identity"));
    match wanted {
        Some(w) if encoding.as_deref() != Some(w) => {
            return Err(format!(
                "Content-Encoding {encoding:?}, expected {w:?} (the target did not compress)"
            ));
        }
        None if !identity_sent => {
            return Err(format!(
                "Content-Encoding {encoding:?}, expected an identity body"
            ));
        }
        _ => {}
    }
    let decoded = fixtures::decode(encoding.as_deref(), &resp.body)?;
    if let Some(sha) = &scenario.check.origin_saw_sha256 {
        let info: serde_json::Value = serde_json::from_slice(&decoded)
            .map_err(|e| format!("/reqinfo answered no JSON: {e}"))?;
        let seen = info["body_sha256"].as_str().unwrap_or("(none)");
        if seen != sha {
            return Err(format!(
                "the origin received a body with SHA-256 {seen} ({} bytes), expected {sha}",
                info["body_length"]
            ));
        }
        return Ok(());
    }
    if decoded != identity[..] {
        let at = decoded
            .iter()
            .zip(identity.iter())
            .position(|(a, b)| a != b)
            .unwrap_or(decoded.len().min(identity.len()));
        return Err(format!(
            "the decoded body differs from the expected one: {} bytes vs {} expected, first \
             difference at byte {at}",
            decoded.len(),
            identity.len()
        ));
    }
    Ok(())
}

/// Each origin (`origin-0`, `origin-1`, ...) must get its weight's share, within 10 points.
pub fn verify_split(weights: &[u32], seen: &BTreeMap<String, u32>) -> Result<(), String> {
    let total_weight: u32 = weights.iter().sum();
    let total_seen: u32 = seen.values().sum();
    for (i, weight) in weights.iter().enumerate() {
        let got = seen.get(&origin_name(i)).copied().unwrap_or(0);
        let share = f64::from(got) / f64::from(total_seen.max(1));
        let want = f64::from(*weight) / f64::from(total_weight.max(1));
        if (share - want).abs() > 0.10 {
            return Err(format!(
                "balancing split {seen:?} does not follow the weights {weights:?} \
                 ({} got {:.0}%, expected {:.0}%)",
                origin_name(i),
                share * 100.0,
                want * 100.0
            ));
        }
    }
    Ok(())
}

/// The `X-Origin` name of the `i`-th origin of a scenario.
pub fn origin_name(i: usize) -> String {
    format!("origin-{i}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_follows_weights_within_ten_points() {
        let seen = |a: u32, b: u32| BTreeMap::from([(origin_name(0), a), (origin_name(1), b)]);
        assert!(verify_split(&[3, 1], &seen(60, 20)).is_ok());
        assert!(verify_split(&[1, 1], &seen(20, 20)).is_ok());
        let err = verify_split(&[3, 1], &seen(40, 40)).unwrap_err();
        assert!(err.contains("origin-0 got 50%"), "{err}");
        assert!(verify_split(&[1, 1], &seen(40, 0)).is_err());
    }
}
