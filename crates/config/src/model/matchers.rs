//! A route's request matchers (`methods`, `headers`, `query`, `client`, `path_regex`) and their
//! negation (`not = { ... }`, the same keys): all optional, all required (AND), checked after
//! the route's host and path. Each is a plain function of the request here, so the server's
//! router and its benchmark run the same code.

use std::net::IpAddr;

use http::{HeaderMap, HeaderName, Method};
use ipnet::IpNet;
use regex::Regex;

/// The matchers of a route: `must` all hold, and none of `not`'s does.
#[derive(Debug, Clone, Default)]
pub struct RouteMatchers {
    pub must: Matchers,
    /// `not = { ... }`: each matcher written there is negated on its own (`not.methods` = the
    /// method is none of these; `not.headers` = none of these conditions holds).
    pub not: Matchers,
}

/// One set of matchers; an empty set matches everything.
#[derive(Debug, Clone, Default)]
pub struct Matchers {
    /// The request method is one of these. `GET` takes `HEAD` too (RFC 9110 §9.3.2: HEAD is GET
    /// without the content; nginx's `limit_except GET` does the same).
    pub methods: Option<Vec<Method>>,
    /// Header name (lowercase) and its condition, in file order.
    pub headers: Vec<(HeaderName, ValueMatch)>,
    /// Query parameter name (decoded) and its condition, in file order.
    pub query: Vec<(String, ValueMatch)>,
    /// The client address (resolved through `trusted_proxies`) is in one of these networks.
    pub client: Option<Vec<IpNet>>,
    /// A regex on the path in normal form; its named captures are usable in the proxy's
    /// `replace_prefix` and `request_headers` as `{name}`.
    pub path_regex: Option<Regex>,
}

/// A condition on a header's or query parameter's values.
#[derive(Debug, Clone)]
pub enum ValueMatch {
    /// `"value"` (or `"=value"`): one of the values is exactly this.
    Exact(String),
    /// `"text*"`: one of the values starts with this.
    Prefix(String),
    /// `"~regex"`: one of the values matches (unanchored, like nginx's `~`).
    Regex(Regex),
    /// `"present"`: there is at least one (any value, empty included).
    Present,
    /// `"absent"`: there is none.
    Absent,
}

impl ValueMatch {
    /// Whether the values (every occurrence of the name) satisfy the condition.
    pub fn matches<'a>(&self, mut values: impl Iterator<Item = &'a [u8]>) -> bool {
        match self {
            ValueMatch::Present => values.next().is_some(),
            ValueMatch::Absent => values.next().is_none(),
            ValueMatch::Exact(want) => values.any(|v| v == want.as_bytes()),
            ValueMatch::Prefix(want) => values.any(|v| v.starts_with(want.as_bytes())),
            ValueMatch::Regex(re) => {
                values.any(|v| std::str::from_utf8(v).is_ok_and(|v| re.is_match(v)))
            }
        }
    }
}

/// What the matchers look at in a request, gathered once per request by the router.
#[derive(Debug, Clone, Copy)]
pub struct MatchInput<'a> {
    pub method: &'a Method,
    pub headers: &'a HeaderMap,
    /// The raw query (after `?`), if any.
    pub query: Option<&'a str>,
    /// The resolved client address.
    pub client: IpAddr,
    /// The path in normal form.
    pub path: &'a str,
}

impl Matchers {
    /// Nothing to check.
    pub fn is_empty(&self) -> bool {
        self.methods.is_none()
            && self.headers.is_empty()
            && self.query.is_empty()
            && self.client.is_none()
            && self.path_regex.is_none()
    }
}

impl RouteMatchers {
    /// Nothing to check (the common route: host and path only).
    pub fn is_empty(&self) -> bool {
        self.must.is_empty() && self.not.is_empty()
    }

    /// Whether the request passes every matcher (`must` all true, each of `not` false).
    pub fn matches(&self, input: &MatchInput<'_>) -> bool {
        let m = &self.must;
        let n = &self.not;
        m.methods
            .as_ref()
            .is_none_or(|l| method_in(l, input.method))
            && n.methods
                .as_ref()
                .is_none_or(|l| !method_in(l, input.method))
            && m.client.as_ref().is_none_or(|l| client_in(l, input.client))
            && n.client
                .as_ref()
                .is_none_or(|l| !client_in(l, input.client))
            && m.headers
                .iter()
                .all(|(name, c)| header_matches(input, name, c))
            && n.headers
                .iter()
                .all(|(name, c)| !header_matches(input, name, c))
            && (m.query.is_empty() && n.query.is_empty() || query_matches(m, n, input.query))
            && m.path_regex
                .as_ref()
                .is_none_or(|re| re.is_match(input.path))
            && n.path_regex
                .as_ref()
                .is_none_or(|re| !re.is_match(input.path))
    }
}

fn method_in(list: &[Method], method: &Method) -> bool {
    list.iter()
        .any(|m| m == method || (*method == Method::HEAD && *m == Method::GET))
}

fn client_in(nets: &[IpNet], ip: IpAddr) -> bool {
    // An IPv4 client on a dual-stack socket arrives as `::ffff:a.b.c.d`: it is the IPv4 address.
    let ip = ip.to_canonical();
    nets.iter().any(|net| net.contains(&ip))
}

fn header_matches(input: &MatchInput<'_>, name: &HeaderName, cond: &ValueMatch) -> bool {
    cond.matches(input.headers.get_all(name).iter().map(|v| v.as_bytes()))
}

/// The query matchers: parameters decoded as a form (`+` is a space, `%XX` a byte), every
/// occurrence of a repeated name considered.
fn query_matches(must: &Matchers, not: &Matchers, query: Option<&str>) -> bool {
    let query = query.unwrap_or("").as_bytes();
    let values = |name: &str| {
        let name = name.to_owned();
        form_urlencoded::parse(query)
            .filter(move |(k, _)| *k == name)
            .map(|(_, v)| v)
    };
    let test = |name: &str, cond: &ValueMatch| {
        let owned: Vec<_> = values(name).collect();
        cond.matches(owned.iter().map(|v| v.as_bytes()))
    };
    must.query.iter().all(|(name, c)| test(name, c))
        && not.query.iter().all(|(name, c)| !test(name, c))
}

/// The named captures of `re` on `path`, for a route's rewrite and headers; empty when the
/// regex has none or does not match.
pub fn path_captures(re: &Regex, path: &str) -> Vec<(String, String)> {
    let Some(caps) = re.captures(path) else {
        return Vec::new();
    };
    re.capture_names()
        .flatten()
        .filter_map(|name| Some((name.to_owned(), caps.name(name)?.as_str().to_owned())))
        .collect()
}

/// `template` with each `{name}` replaced by that capture's value; other text as it is.
pub fn expand_captures(template: &str, captures: &[(String, String)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if captures.iter().any(|(n, _)| n == &after[..close]) => {
                let name = &after[..close];
                if let Some((_, value)) = captures.iter().find(|(n, _)| n == name) {
                    out.push_str(value);
                }
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}
