//! Which keys each table accepts, and the closest valid key to a misspelt one.
//!
//! The key lists are not written by hand: they are read from the raw structs' derived
//! `Deserialize` impls (serde passes a struct's field names to `deserialize_struct`; a small
//! deserializer catches them there). So renaming or adding a raw field cannot leave the hints
//! stale. What is written by hand is which struct sits at which path, in [`table_keys`]; a test
//! in `tests/golden.rs` checks every table of the schema against it.

use serde::Deserialize;
use serde::de::{self, Visitor};

use crate::path::{KeyPath, Seg};
use crate::raw::{
    RawAcme, RawAdmin, RawBasicAuth, RawCacheDisk, RawCacheShared, RawCacheZone, RawCompress,
    RawCompressLevels, RawConfig, RawDecompress, RawDictionaryLevels, RawDictionaryTable,
    RawExternalAccount, RawForwardAuth, RawHeaderEdits, RawHealthCheck, RawKeepalive, RawListener,
    RawLog, RawNot, RawProxy, RawRateLimit, RawRedirect, RawResolver, RawRespond,
    RawResponseHeaders, RawRetry, RawRoute, RawRouteCache, RawServer, RawServerTable, RawSni,
    RawStatic, RawTlsTable, RawUpstream, RawUpstreamTimeouts, RawUpstreamTls,
};

/// The keys accepted by the table at `path`, or `None` when that table is free-form (e.g.
/// `respond.headers`) or not part of the schema.
pub(crate) fn table_keys(path: &KeyPath) -> Option<&'static [&'static str]> {
    // `K("key")` / `I` (any index) lets the match below read like the paths it stands for.
    #[derive(Clone, Copy)]
    enum P<'a> {
        K(&'a str),
        I,
    }
    use P::{I, K};
    let pattern: Vec<P<'_>> = path
        .segs()
        .iter()
        .map(|seg| match seg {
            Seg::Key(key) => K(key.as_str()),
            Seg::Index(_) => I,
        })
        .collect();
    match pattern.as_slice() {
        [] => fields_of::<RawConfig>(),
        [K("server")] => fields_of::<RawServer>(),
        [K("resolver")] => fields_of::<RawResolver>(),
        [K("log")] => fields_of::<RawLog>(),
        [K("listeners"), I] => fields_of::<RawListener>(),
        [K("listeners"), I, K("tls")] => fields_of::<RawTlsTable>(),
        [K("listeners"), I, K("tls"), K("sni"), I] => fields_of::<RawSni>(),
        [K("routes"), I] => fields_of::<RawRoute>(),
        [K("routes"), I, K("static")] => fields_of::<RawStatic>(),
        [K("routes"), I, K("respond")] => fields_of::<RawRespond>(),
        [K("routes"), I, K("redirect")] => fields_of::<RawRedirect>(),
        [K("routes"), I, K("proxy")] => fields_of::<RawProxy>(),
        [K("routes"), I, K("compress")] => fields_of::<RawCompress>(),
        [K("routes"), I, K("compress" | "cache"), K("levels")] => fields_of::<RawCompressLevels>(),
        [K("routes"), I, K("cache")] => fields_of::<RawRouteCache>(),
        [K("routes"), I, K("rate_limit")] => fields_of::<RawRateLimit>(),
        [K("routes"), I, K("response_headers")] => fields_of::<RawResponseHeaders>(),
        [K("routes"), I, K("dictionary")] => fields_of::<RawDictionaryTable>(),
        [K("routes"), I, K("dictionary"), K("levels")] => fields_of::<RawDictionaryLevels>(),
        [K("routes"), I, K("not")] => fields_of::<RawNot>(),
        [K("routes"), I, K("basic_auth")] => fields_of::<RawBasicAuth>(),
        [K("routes"), I, K("forward_auth")] => fields_of::<RawForwardAuth>(),
        [
            K("routes"),
            I,
            K("proxy"),
            K("request_headers" | "response_headers"),
        ] => fields_of::<RawHeaderEdits>(),
        [K("routes"), I, K("proxy"), K("decompress_requests")] => fields_of::<RawDecompress>(),
        [K("upstreams"), K(_)] => fields_of::<RawUpstream>(),
        [K("upstreams"), K(_), K("servers"), I] => fields_of::<RawServerTable>(),
        [K("upstreams"), K(_), K("keepalive")] => fields_of::<RawKeepalive>(),
        [K("upstreams"), K(_), K("timeouts")] => fields_of::<RawUpstreamTimeouts>(),
        [K("upstreams"), K(_), K("retry")] => fields_of::<RawRetry>(),
        [K("upstreams"), K(_), K("health_check")] => fields_of::<RawHealthCheck>(),
        [K("upstreams"), K(_), K("tls")] => fields_of::<RawUpstreamTls>(),
        [K("caches"), K(_)] => fields_of::<RawCacheZone>(),
        [K("caches"), K(_), K("disk")] => fields_of::<RawCacheDisk>(),
        [K("caches"), K(_), K("shared")] => fields_of::<RawCacheShared>(),
        [K("admin")] => fields_of::<RawAdmin>(),
        [K("acme")] => fields_of::<RawAcme>(),
        [K("acme"), K("external_account")] => fields_of::<RawExternalAccount>(),
        _ => None,
    }
}

/// Names other proxies use for a key of the table at `path` (nginx's, Caddy's, HAProxy's, or
/// sluice's own listener keys): the key meant, and a hint that says how sluice writes it.
/// Spelling distance cannot find these.
pub(crate) fn alias(path: &KeyPath, key: &str) -> Option<(&'static str, String)> {
    let segs = path.segs();
    let upstream = matches!(segs, [Seg::Key(u), Seg::Key(_)] if u == "upstreams");
    let upstream_tls =
        matches!(segs, [Seg::Key(u), Seg::Key(_), Seg::Key(t)] if u == "upstreams" && t == "tls");
    let lower = key.to_ascii_lowercase().replace('-', "_");
    let meant = match lower.as_str() {
        "proxy_protocol" | "send_proxy" | "send_proxy_v2" if upstream => {
            let hint = "write send_proxy_protocol = true to send a PROXY header to these servers (`proxy_protocol` is a listener's key, for receiving one)";
            return Some(("send_proxy_protocol", hint.into()));
        }
        "ssl" | "https" | "proxy_ssl" if upstream => "tls",
        "cert" | "certificate" | "client_certificate" | "proxy_ssl_certificate" if upstream_tls => {
            "client_cert"
        }
        "key" | "private_key" | "client_private_key" | "proxy_ssl_certificate_key"
            if upstream_tls =>
        {
            "client_key"
        }
        "ca_file"
        | "ca_cert"
        | "cacert"
        | "ca_certificate"
        | "root_ca"
        | "trusted_ca"
        | "trusted_ca_certs"
        | "tls_trusted_ca_certs"
        | "proxy_ssl_trusted_certificate"
            if upstream_tls =>
        {
            "ca"
        }
        "sni" | "servername" | "tls_server_name" | "proxy_ssl_name" if upstream_tls => {
            "server_name"
        }
        "verify"
        | "ssl_verify"
        | "tls_verify"
        | "proxy_ssl_verify"
        | "skip_verify"
        | "insecure"
        | "tls_insecure_skip_verify"
            if upstream_tls =>
        {
            let hint = "certificates are verified by default; insecure_skip_verify = true turns that off (for a lab only)";
            return Some(("insecure_skip_verify", hint.into()));
        }
        _ => return None,
    };
    Some((meant, format!("write `{meant}`")))
}

/// The field names a derived `Deserialize` struct expects, as written in the file (after
/// `rename`).
pub(crate) fn fields_of<'de, T: Deserialize<'de>>() -> Option<&'static [&'static str]> {
    let mut fields = None;
    // The grabber always fails once it has the names; the error is the expected way out.
    let _ = T::deserialize(FieldGrabber {
        fields: &mut fields,
    });
    fields
}

struct FieldGrabber<'a> {
    fields: &'a mut Option<&'static [&'static str]>,
}

impl<'de> de::Deserializer<'de> for FieldGrabber<'_> {
    type Error = de::value::Error;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.fields = Some(fields);
        Err(de::Error::custom("field names captured"))
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The candidate closest to `word`, if it is close enough to be what was meant.
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let word_lower = word.to_lowercase();
    let (distance, best) = candidates
        .into_iter()
        .map(|c| {
            (
                strsim::damerau_levenshtein(&word_lower, &c.to_lowercase()),
                c,
            )
        })
        .min_by_key(|(distance, _)| *distance)?;
    // One edit for short words (else `h1` would suggest anything), a third of the word beyond.
    let allowed = if word.chars().count() <= 4 {
        1
    } else {
        (word.chars().count() / 3).max(2)
    };
    (distance <= allowed).then_some(best)
}

/// A hint for a misspelt name: the closest candidate, or the list of valid ones.
pub(crate) fn name_hint<'a>(word: &str, candidates: &[&'a str]) -> (Option<&'a str>, String) {
    match closest(word, candidates.iter().copied()) {
        Some(best) => (Some(best), format!("did you mean `{best}`?")),
        None => {
            let list: Vec<String> = candidates.iter().map(|c| format!("`{c}`")).collect();
            (None, format!("expected one of {}", list.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_field_names_from_the_derive() {
        let route = fields_of::<RawRoute>().unwrap();
        assert!(
            route.contains(&"static"),
            "renamed field appears under its TOML name"
        );
        assert!(route.contains(&"path_prefix"));
        assert!(!route.contains(&"static_files"));
    }

    #[test]
    fn suggests_close_keys_only() {
        let keys = ["address", "name", "protocols", "idle_timeout"];
        assert_eq!(closest("adress", keys), Some("address"));
        assert_eq!(closest("Protocol", keys), Some("protocols"));
        assert_eq!(closest("nmae", keys), Some("name"));
        assert_eq!(closest("timeout", keys), None);
        assert_eq!(closest("zz", keys), None);
    }

    #[test]
    fn hints_list_valid_names_when_nothing_is_close() {
        let (best, hint) = name_hint("xyz", &["json", "combined"]);
        assert_eq!(
            (best, hint.as_str()),
            (None, "expected one of `json`, `combined`")
        );
        let (best, hint) = name_hint("jsno", &["json", "combined"]);
        assert_eq!(
            (best, hint.as_str()),
            (Some("json"), "did you mean `json`?")
        );
    }

    /// One sample path per table of the schema (the golden test checks the same list against a
    /// real document).
    fn every_table() -> Vec<KeyPath> {
        let root = KeyPath::root();
        let listener = root.key("listeners").index(0);
        let route = root.key("routes").index(0);
        let upstream = root.key("upstreams").key("api");
        vec![
            root.clone(),
            root.key("server"),
            root.key("log"),
            listener.clone(),
            listener.key("tls"),
            listener.key("tls").key("sni").index(0),
            route.clone(),
            route.key("static"),
            route.key("respond"),
            route.key("redirect"),
            route.key("proxy"),
            route.key("proxy").key("request_headers"),
            route.key("proxy").key("response_headers"),
            route.key("proxy").key("decompress_requests"),
            route.key("compress"),
            route.key("compress").key("levels"),
            route.key("cache"),
            route.key("cache").key("levels"),
            route.key("rate_limit"),
            upstream.clone(),
            upstream.key("servers").index(0),
            upstream.key("keepalive"),
            upstream.key("timeouts"),
            upstream.key("retry"),
            upstream.key("health_check"),
            root.key("caches").key("api"),
            root.key("caches").key("api").key("disk"),
            root.key("caches").key("api").key("shared"),
            root.key("admin"),
            root.key("acme"),
            root.key("acme").key("external_account"),
        ]
    }

    #[test]
    fn a_key_missing_one_letter_is_recognised_in_every_table() {
        for table in every_table() {
            let keys = table_keys(&table).unwrap_or_else(|| panic!("no keys for {table}"));
            for key in keys.iter().filter(|k| k.len() > 3) {
                let mid = key.len() / 2;
                let typo = format!("{}{}", &key[..mid], &key[mid + 1..]);
                assert_eq!(
                    closest(&typo, keys.iter().copied()),
                    Some(*key),
                    "{table}: {typo}"
                );
            }
        }
    }

    #[test]
    fn knows_the_tables_of_the_schema() {
        let sni = KeyPath::root()
            .key("listeners")
            .index(3)
            .key("tls")
            .key("sni")
            .index(0);
        assert_eq!(table_keys(&sni), fields_of::<RawSni>());
        let server = KeyPath::root()
            .key("upstreams")
            .key("api")
            .key("servers")
            .index(1);
        assert_eq!(
            table_keys(&server).unwrap(),
            [
                "address",
                "weight",
                "max_fails",
                "fail_timeout",
                "backup",
                "down"
            ]
        );
        let headers = KeyPath::root()
            .key("routes")
            .index(0)
            .key("respond")
            .key("headers");
        assert_eq!(table_keys(&headers), None);
        let set = KeyPath::root()
            .key("routes")
            .index(0)
            .key("proxy")
            .key("request_headers")
            .key("set");
        assert_eq!(table_keys(&set), None, "header names are free-form");
    }
}
