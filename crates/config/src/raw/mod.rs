//! The raw configuration: serde types mirroring the TOML file one to one, before validation.
//!
//! This layer is deliberately lenient so that validation, not serde, judges the values: serde
//! stops at the first error, validation reports them all. So every key is optional (a missing
//! key is a validation error with a place), numbers-or-strings are [`Scalar`]s, and leaf values
//! are `Spanned` to keep their place. Unknown keys are not denied here (that would also stop at
//! the first); they are collected by `serde_ignored` in [`crate::parse`]. `expecting` keeps
//! serde's type errors in the file's words rather than these types' names.
//! Nothing here is used outside the crate: the contract is [`crate::model`].

mod access;
mod cache;
mod shapes;
mod upstream;

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

pub(crate) use access::{RawBasicAuth, RawForwardAuth, RawNot};
pub(crate) use cache::{RawCacheDisk, RawCacheShared, RawCacheZone, RawRouteCache};
pub(crate) use shapes::{BoolOrList, Entries, OneOrMany, RawTls, RawUpstreamServer, Scalar};
pub(crate) use upstream::{
    RawHealthCheck, RawKeepalive, RawRetry, RawServerTable, RawUpstream, RawUpstreamTimeouts,
    RawUpstreamTls,
};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a TOML document")]
pub(crate) struct RawConfig {
    pub server: Option<RawServer>,
    pub log: Option<RawLog>,
    #[serde(default)]
    pub listeners: Vec<RawListener>,
    #[serde(default)]
    pub routes: Vec<RawRoute>,
    #[serde(default)]
    pub upstreams: BTreeMap<String, RawUpstream>,
    #[serde(default)]
    pub caches: BTreeMap<String, RawCacheZone>,
    pub admin: Option<RawAdmin>,
    pub resolver: Option<RawResolver>,
    pub acme: Option<RawAcme>,
}

/// `[resolver]`: how `dns+` upstream servers are looked up.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a [resolver] table like { servers = [\"127.0.0.1:53\"], timeout = \"2s\" }")]
pub(crate) struct RawResolver {
    pub servers: Option<Spanned<OneOrMany>>,
    pub timeout: Option<Spanned<Scalar>>,
    pub attempts: Option<Spanned<Scalar>>,
    pub min_ttl: Option<Spanned<Scalar>>,
    pub max_ttl: Option<Spanned<Scalar>>,
    pub keep_last_good: Option<Spanned<Scalar>>,
}

/// `[acme]` (docs/acme.md)
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "an [acme] table")]
pub(crate) struct RawAcme {
    pub directory: Option<Spanned<String>>,
    pub staging: Option<Spanned<bool>>,
    pub contact: Option<Spanned<OneOrMany>>,
    pub external_account: Option<RawExternalAccount>,
    pub storage: Option<Spanned<String>>,
    pub ca_root: Option<Spanned<String>>,
    pub challenge: Option<Spanned<String>>,
    /// A status, or `false` for none.
    pub http_redirect: Option<Spanned<Scalar>>,
    pub retry_after_failure: Option<Spanned<Scalar>>,
}

/// `[acme.external_account]`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "an external_account table with key_id and hmac_key")]
pub(crate) struct RawExternalAccount {
    pub key_id: Option<Spanned<String>>,
    pub hmac_key: Option<Spanned<String>>,
}

/// `[admin]`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "an [admin] table with an address")]
pub(crate) struct RawAdmin {
    pub address: Option<Spanned<Scalar>>,
}

/// `[server]`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a [server] table")]
pub(crate) struct RawServer {
    pub workers: Option<Spanned<Scalar>>,
    pub shutdown_timeout: Option<Spanned<Scalar>>,
    pub server_header: Option<Spanned<String>>,
    pub trusted_proxies: Option<Spanned<OneOrMany>>,
    pub pid_file: Option<Spanned<String>>,
    pub max_connections: Option<Spanned<Scalar>>,
}

/// `[log]`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a [log] table")]
pub(crate) struct RawLog {
    pub level: Option<Spanned<String>>,
    pub access: Option<Spanned<String>>,
    pub format: Option<Spanned<String>>,
    pub access_queue: Option<Spanned<Scalar>>,
}

/// `[[listeners]]`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a [[listeners]] table with an address")]
pub(crate) struct RawListener {
    pub name: Option<Spanned<String>>,
    pub address: Option<Spanned<Scalar>>,
    pub protocols: Option<Spanned<OneOrMany>>,
    pub header_read_timeout: Option<Spanned<Scalar>>,
    pub idle_timeout: Option<Spanned<Scalar>>,
    pub tls_handshake_timeout: Option<Spanned<Scalar>>,
    pub max_header_size: Option<Spanned<Scalar>>,
    pub max_headers: Option<Spanned<Scalar>>,
    pub max_concurrent_streams: Option<Spanned<Scalar>>,
    pub max_connections: Option<Spanned<Scalar>>,
    pub max_uri_length: Option<Spanned<Scalar>>,
    pub max_content_codings: Option<Spanned<Scalar>>,
    pub h2_keep_alive_interval: Option<Spanned<Scalar>>,
    pub h2_keep_alive_timeout: Option<Spanned<Scalar>>,
    /// A `Scalar` rather than a `bool`, so `"true"` or `"v2"` gets a hint instead of a bare
    /// type error.
    pub proxy_protocol: Option<Spanned<Scalar>>,
    pub trusted_proxies: Option<Spanned<OneOrMany>>,
    pub tls: Option<Spanned<RawTls>>,
    /// HTTP/3: the `ma` of the `Alt-Svc` header on the listener's TCP responses; "0s": none.
    pub alt_svc_max_age: Option<Spanned<Scalar>>,
    /// `tls = "acme"`: the names to order a certificate for (else the routes' hosts).
    pub acme_names: Option<Spanned<OneOrMany>>,
}

/// `[listeners.tls]`, the table form of `tls`.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a tls table")]
pub(crate) struct RawTlsTable {
    pub self_signed: Option<Spanned<bool>>,
    pub hosts: Option<Spanned<OneOrMany>>,
    pub cert: Option<Spanned<String>>,
    pub key: Option<Spanned<String>>,
    #[serde(default)]
    pub sni: Vec<RawSni>,
    pub session_ticket_keys: Option<Spanned<String>>,
}

/// `[[listeners.tls.sni]]`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "an SNI table with hosts, cert and key")]
pub(crate) struct RawSni {
    pub hosts: Option<Spanned<OneOrMany>>,
    pub cert: Option<Spanned<String>>,
    pub key: Option<Spanned<String>>,
}

/// `[[routes]]`. The four actions are separate optional tables so that "none" and "two" are
/// both reportable, rather than an enum serde would reject without saying where. `compress` is
/// not an action: it applies to whatever response the action produced; `cache` is not one
/// either, and only a proxy may have it.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a [[routes]] table")]
pub(crate) struct RawRoute {
    pub name: Option<Spanned<String>>,
    pub host: Option<Spanned<OneOrMany>>,
    pub path: Option<Spanned<String>>,
    pub path_prefix: Option<Spanned<String>>,
    pub listeners: Option<Spanned<OneOrMany>>,
    pub methods: Option<Spanned<OneOrMany>>,
    pub headers: Option<Spanned<Entries>>,
    pub query: Option<Spanned<Entries>>,
    pub client: Option<Spanned<OneOrMany>>,
    pub path_regex: Option<Spanned<String>>,
    pub not: Option<RawNot>,
    pub allow: Option<Spanned<OneOrMany>>,
    pub deny: Option<Spanned<OneOrMany>>,
    pub basic_auth: Option<RawBasicAuth>,
    pub forward_auth: Option<RawForwardAuth>,
    #[serde(rename = "static")]
    pub static_files: Option<RawStatic>,
    pub respond: Option<RawRespond>,
    pub redirect: Option<RawRedirect>,
    pub proxy: Option<RawProxy>,
    pub compress: Option<RawCompress>,
    pub cache: Option<RawRouteCache>,
    pub rate_limit: Option<RawRateLimit>,
    pub max_body_size: Option<Spanned<Scalar>>,
    pub body_timeout: Option<Spanned<Scalar>>,
    pub response_headers: Option<RawResponseHeaders>,
    pub dictionary: Option<Spanned<RawDictionary>>,
}

/// `response_headers = { set = {...}, add = {...}, remove = [...], always = false }` of a route.
#[derive(Debug, Default, Deserialize)]
#[serde(
    expecting = "a table like { set = { \"cache-control\" = \"max-age=3600\" }, remove = [\"x-powered-by\"] }"
)]
pub(crate) struct RawResponseHeaders {
    #[serde(default)]
    pub set: Entries,
    #[serde(default)]
    pub add: Entries,
    pub remove: Option<Spanned<OneOrMany>>,
    pub always: Option<bool>,
}

/// `dictionary = "auto"` or `dictionary = { match = "/assets/app.*.js", ... }` of a route.
#[derive(Debug)]
pub(crate) enum RawDictionary {
    /// The shorthand; validation checks it says `auto`.
    Shorthand(String),
    // Boxed: the table is large, and most routes have neither form.
    Table(Box<RawDictionaryTable>),
}

impl<'de> Deserialize<'de> for RawDictionary {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawDictionary;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#""auto" or a table like { match = "/assets/app.*.js" }"#)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawDictionary, E> {
                Ok(RawDictionary::Shorthand(v.to_owned()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawDictionary, A::Error> {
                RawDictionaryTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(|table| RawDictionary::Table(Box::new(table)))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// The table form of `dictionary`.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { match = \"/assets/app.*.js\" } or { auto = true }")]
pub(crate) struct RawDictionaryTable {
    #[serde(rename = "match")]
    pub match_: Option<Spanned<String>>,
    pub match_dest: Option<Spanned<OneOrMany>>,
    pub id: Option<Spanned<String>>,
    pub auto: Option<Spanned<bool>>,
    pub codings: Option<Spanned<OneOrMany>>,
    pub levels: Option<RawDictionaryLevels>,
    pub max_size: Option<Spanned<Scalar>>,
    pub memory: Option<Spanned<Scalar>>,
    pub deltas_per_response: Option<Spanned<Scalar>>,
}

/// `levels = { dcz = 19, dcb = 11 }` of `dictionary`.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { dcz = 19, dcb = 11 }")]
pub(crate) struct RawDictionaryLevels {
    pub dcz: Option<Spanned<Scalar>>,
    pub dcb: Option<Spanned<Scalar>>,
}

/// `rate_limit = { requests = 100, per = "1s", burst = 50, key = "client_ip" }` of a route.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { requests = 100, per = \"1s\" }")]
pub(crate) struct RawRateLimit {
    pub requests: Option<Spanned<Scalar>>,
    pub per: Option<Spanned<Scalar>>,
    pub burst: Option<Spanned<Scalar>>,
    pub key: Option<Spanned<String>>,
    pub shared: Option<Spanned<String>>,
    pub on_error: Option<Spanned<String>>,
    pub fleet_size: Option<Spanned<Scalar>>,
    pub deadline: Option<Spanned<Scalar>>,
}

/// `compress = { ... }` of a route; `{}` turns compression on with the defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(
    expecting = "a table like { algorithms = [\"zstd\", \"br\", \"gzip\"] } ({} for the defaults)"
)]
pub(crate) struct RawCompress {
    pub algorithms: Option<Spanned<OneOrMany>>,
    pub levels: Option<RawCompressLevels>,
    pub min_length: Option<Spanned<Scalar>>,
    pub types: Option<Spanned<OneOrMany>>,
    pub flush_delay: Option<Spanned<Scalar>>,
    pub max_cpu: Option<Spanned<Scalar>>,
}

/// `levels = { gzip = 2, br = 4, zstd = 3 }` of `compress`: one key per algorithm.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { gzip = 2, br = 4, zstd = 3 }")]
pub(crate) struct RawCompressLevels {
    pub gzip: Option<Spanned<Scalar>>,
    pub deflate: Option<Spanned<Scalar>>,
    pub br: Option<Spanned<Scalar>>,
    pub zstd: Option<Spanned<Scalar>>,
}

/// `static = { ... }`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { root = \"public\" }")]
pub(crate) struct RawStatic {
    pub root: Option<Spanned<String>>,
    pub index: Option<Spanned<OneOrMany>>,
    pub strip_prefix: Option<bool>,
    pub follow_symlinks_outside_root: Option<bool>,
    pub precompressed: Option<Spanned<BoolOrList>>,
    pub memory_cache: Option<Spanned<Scalar>>,
    pub memory_cache_recheck: Option<Spanned<Scalar>>,
    pub sendfile: Option<bool>,
    pub max_age: Option<Spanned<Scalar>>,
}

/// `respond = { ... }`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { status = 200, body = \"ok\" }")]
pub(crate) struct RawRespond {
    pub status: Option<Spanned<Scalar>>,
    pub body: Option<String>,
    /// Header name -> value. Names are checked in validation (a bad one is pointed at by key).
    #[serde(default)]
    pub headers: BTreeMap<String, Spanned<String>>,
}

/// `redirect = { ... }`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { to = \"https://example.com{uri}\" }")]
pub(crate) struct RawRedirect {
    pub to: Option<Spanned<String>>,
    pub status: Option<Spanned<Scalar>>,
}

/// `proxy = { ... }`. `upstream` (a group's name) and `to` (one server's address) are both
/// optional so that "neither" and "both" are reported by validation, with their places.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { upstream = \"api\" } or { to = \"127.0.0.1:9001\" }")]
pub(crate) struct RawProxy {
    pub upstream: Option<Spanned<String>>,
    pub to: Option<Spanned<String>>,
    pub host: Option<Spanned<String>>,
    pub request_headers: Option<RawHeaderEdits>,
    pub response_headers: Option<RawHeaderEdits>,
    pub decompress_requests: Option<RawDecompress>,
    pub strip_prefix: Option<Spanned<String>>,
    pub replace_prefix: Option<Spanned<String>>,
    pub forward_path: Option<Spanned<String>>,
    pub upgrade: Option<Spanned<BoolOrList>>,
    pub tunnel_idle_timeout: Option<Spanned<Scalar>>,
}

/// `decompress_requests = { max_size = "10MiB", max_ratio = 100 }` of a proxy.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { max_size = \"10MiB\", max_ratio = 100 } ({} for the defaults)")]
pub(crate) struct RawDecompress {
    pub max_size: Option<Spanned<Scalar>>,
    pub max_ratio: Option<Spanned<Scalar>>,
}

/// `request_headers = { ... }` / `response_headers = { ... }` of a proxy.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { set = { \"x-env\" = \"prod\" }, remove = [\"x-debug\"] }")]
pub(crate) struct RawHeaderEdits {
    /// Header name -> value, in file order. Names are checked in validation (a bad one is
    /// pointed at by key).
    #[serde(default)]
    pub set: Entries,
    pub remove: Option<Spanned<OneOrMany>>,
}
