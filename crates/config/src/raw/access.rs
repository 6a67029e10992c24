//! The raw matcher and access-control keys of a route: `not = { ... }`, `basic_auth = { ... }`
//! and `forward_auth = { ... }` (the flat ones, `methods` to `forward_auth`, are on
//! [`super::RawRoute`]).

use serde::Deserialize;
use toml::Spanned;

use super::{Entries, OneOrMany, Scalar};

/// `not = { methods = [...], headers = {...}, query = {...}, client = [...], path_regex = "..." }`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { methods = [\"POST\"], client = [\"10.0.0.0/8\"] }")]
pub(crate) struct RawNot {
    pub methods: Option<Spanned<OneOrMany>>,
    pub headers: Option<Spanned<Entries>>,
    pub query: Option<Spanned<Entries>>,
    pub client: Option<Spanned<OneOrMany>>,
    pub path_regex: Option<Spanned<String>>,
}

/// `basic_auth = { realm = "...", users = "file" }`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { realm = \"staff\", users = \"users.htpasswd\" }")]
pub(crate) struct RawBasicAuth {
    pub realm: Option<Spanned<String>>,
    pub users: Option<Spanned<String>>,
    pub forward_credentials: Option<bool>,
    pub max_failures: Option<Spanned<Scalar>>,
    pub failure_period: Option<Spanned<Scalar>>,
}

/// `forward_auth = { to = "127.0.0.1:9000", copy_headers = ["x-user"] }`
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a table like { to = \"127.0.0.1:9000\", copy_headers = [\"x-user\"] }")]
pub(crate) struct RawForwardAuth {
    pub to: Option<Spanned<String>>,
    pub upstream: Option<Spanned<String>>,
    pub uri: Option<Spanned<String>>,
    pub copy_headers: Option<Spanned<OneOrMany>>,
    pub timeout: Option<Spanned<Scalar>>,
}
