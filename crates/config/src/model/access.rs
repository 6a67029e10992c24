//! A route's access control: `allow` / `deny` (client networks), `basic_auth` (a user file of
//! bcrypt / argon2 hashes) and `forward_auth` (a subrequest to an auth service).

use std::path::PathBuf;
use std::time::Duration;

use http::HeaderName;
use ipnet::IpNet;

/// Everything a route checks before its action; the default checks nothing.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// `allow` / `deny` rules in file order (the list written first is checked first, each in
    /// its own order): the first rule whose network holds the client decides, as in nginx.
    pub rules: Vec<AccessRule>,
    /// What a client no rule matched gets: refused when the route has an `allow` list (nginx
    /// would let it in: `allow 10.0.0.0/8;` alone refuses nobody, a classic mistake), allowed
    /// otherwise.
    pub default_allow: bool,
    pub basic_auth: Option<BasicAuth>,
    pub forward_auth: Option<ForwardAuth>,
}

impl Access {
    /// No access control on this route.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.basic_auth.is_none() && self.forward_auth.is_none()
    }
}

/// One `allow` or `deny` network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRule {
    pub allow: bool,
    pub net: IpNet,
}

/// `basic_auth = { realm = "...", users = "file" }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicAuth {
    /// Sent in `WWW-Authenticate: Basic realm="..."`.
    pub realm: String,
    /// The user file (absolute): `name:hash` lines, bcrypt (`$2b$...`) or argon2 (`$argon2id$...`).
    pub users: PathBuf,
    /// Send the client's `Authorization` upstream (default: removed).
    pub forward_credentials: bool,
    /// Failed attempts a client may make per `failure_period` before its next attempts are
    /// answered 429 without being checked (default 10).
    pub max_failures: u32,
    /// The period `max_failures` are spread over (default 1 minute).
    pub failure_period: Duration,
}

impl BasicAuth {
    pub const DEFAULT_MAX_FAILURES: u32 = 10;
    pub const DEFAULT_FAILURE_PERIOD: Duration = Duration::from_secs(60);
}

/// `forward_auth = { to = "...", copy_headers = [...] }`: ask an auth service first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardAuth {
    /// The upstream group the subrequest goes through (a `to` address gets a group of its own,
    /// like a proxy's).
    pub upstream: String,
    /// The path (and query) asked for; `None`: the request's own target.
    pub uri: Option<String>,
    /// Headers of a 2xx answer copied onto the request (replacing the client's own).
    pub copy_headers: Vec<HeaderName>,
    /// How long the auth service may take to answer (default 5 s); over it: 500.
    pub timeout: Duration,
}

impl ForwardAuth {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
}

/// One user of a basic-auth file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HtpasswdUser {
    pub name: String,
    pub hash: String,
}

/// Which hash a user file line holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashKind {
    Bcrypt,
    Argon2,
}

/// Reads a user file: `name:hash` per line, `#` comments and blank lines skipped. Only bcrypt
/// (`$2a$`, `$2b$`, `$2y$`) and argon2 (`$argon2id$`, `$argon2i$`, `$argon2d$`) hashes are
/// taken: a plain-text password, or a weak or unsalted hash (`{SHA}`, `$apr1$`, crypt), is
/// refused with its line number. Shared by `sluice check` and the server, which reads the file
/// at start and on reload.
pub fn parse_htpasswd(text: &str) -> Result<Vec<HtpasswdUser>, (usize, String)> {
    let mut users = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((name, hash)) = line.split_once(':') else {
            return Err((n, "a line must be `name:hash`".into()));
        };
        if name.is_empty() {
            return Err((n, "the user name is empty".into()));
        }
        if hash_kind(hash).is_none() {
            let what = if hash.starts_with("$apr1$") || hash.starts_with("{SHA}") {
                "an MD5 or SHA-1 hash, too fast to resist guessing"
            } else if hash.starts_with('$') {
                "a hash sluice does not take"
            } else {
                "a plain-text password (or a crypt hash)"
            };
            return Err((
                n,
                format!("user `{name}` has {what}; write a bcrypt or argon2 hash"),
            ));
        }
        if users.iter().any(|u: &HtpasswdUser| u.name == name) {
            return Err((n, format!("user `{name}` is listed twice")));
        }
        users.push(HtpasswdUser {
            name: name.to_owned(),
            hash: hash.to_owned(),
        });
    }
    Ok(users)
}

/// The kind of a stored hash, by its prefix.
pub fn hash_kind(hash: &str) -> Option<HashKind> {
    if ["$2a$", "$2b$", "$2y$"].iter().any(|p| hash.starts_with(p)) && hash.len() == 60 {
        Some(HashKind::Bcrypt)
    } else if ["$argon2id$", "$argon2i$", "$argon2d$"]
        .iter()
        .any(|p| hash.starts_with(p))
    {
        Some(HashKind::Argon2)
    } else {
        None
    }
}
