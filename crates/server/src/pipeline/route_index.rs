//! Finding a request's route without trying every route: the first route in file order whose
//! host, path and matchers all take the request.
//!
//! Routes are indexed by exact host (`example.com`; routes without hosts, or with a wildcard,
//! are in a bucket every request looks at), then by path: exact paths and prefixes in hash
//! maps, looked up once for each distinct prefix length the routes use. A request costs a few
//! hash lookups whatever the number of routes, plus the full check (wildcard hosts, matchers)
//! of the routes whose host and path fit, in file order until one takes it.
//! `docs/performance.md` ("Routing cost") has the measurements at 10 / 1,000 / 10,000 routes.
//!
//! A `path_regex` anchored at the start (`^/users/...`) has a literal prefix every path it
//! matches starts with (`/users/`, found by `regex-syntax`'s literal extractor): the route is
//! indexed under it like a `path_prefix`, and only its own regex runs, only for paths that start
//! so. The others (unanchored, or starting with a class or a group of alternatives) are
//! checked against one `RegexSet` of them all, run once per request that reaches one of them.
//! Measured, a set of 10,000 regexes costs milliseconds per match (it outgrows its DFA), so
//! prefixed ones are kept out of it.

use std::collections::HashMap;

use regex::RegexSet;
use sluice_config::{HostMatch, MatchInput, PathMatch, Route, RouteMatchers};

/// What the index needs of a route to check it.
struct Entry {
    /// Host patterns still to check (empty once the host bucket decided it).
    hosts: Vec<HostMatch>,
    matchers: RouteMatchers,
    /// The route's place in the `RegexSet`, when it has a `path_regex`.
    regex: Option<usize>,
}

/// The routes of one listener, by host and path.
pub struct RouteIndex {
    entries: Vec<Entry>,
    any_host: PathIndex,
    by_host: HashMap<Box<str>, PathIndex>,
    regexes: Option<RegexSet>,
}

#[derive(Default)]
struct PathIndex {
    exact: HashMap<Box<str>, Vec<u32>>,
    prefix: HashMap<Box<str>, Vec<u32>>,
    /// Distinct prefix lengths, shortest first.
    prefix_lens: Vec<usize>,
}

impl PathIndex {
    fn insert(&mut self, path: &PathMatch, i: u32) {
        match path {
            PathMatch::Exact(p) => self.exact.entry(p.as_str().into()).or_default().push(i),
            PathMatch::Prefix(p) => {
                self.prefix.entry(p.as_str().into()).or_default().push(i);
                if let Err(at) = self.prefix_lens.binary_search(&p.len()) {
                    self.prefix_lens.insert(at, p.len());
                }
            }
        }
    }

    /// Calls `each` with every list of route numbers (each ascending) whose path fits `path`.
    fn candidates<'a>(&'a self, path: &str, mut each: impl FnMut(&'a [u32])) {
        if let Some(list) = self.exact.get(path) {
            each(list);
        }
        for &len in &self.prefix_lens {
            if len > path.len() {
                break;
            }
            if let Some(list) = path.get(..len).and_then(|p| self.prefix.get(p)) {
                each(list);
            }
        }
    }
}

impl RouteIndex {
    /// Index `routes` (in file order).
    pub fn new<'a>(routes: impl IntoIterator<Item = &'a Route>) -> Self {
        let routes: Vec<&Route> = routes.into_iter().collect();
        // Where each route goes in the path index: its path, narrowed by its regex's prefix.
        let paths: Vec<(PathMatch, bool)> = routes.iter().map(|r| indexed_path(r)).collect();
        let patterns: Vec<&str> = routes
            .iter()
            .zip(&paths)
            .filter(|(_, (_, prefixed))| !prefixed)
            .filter_map(|(r, _)| r.matchers.must.path_regex.as_ref().map(|re| re.as_str()))
            .collect();
        // Every pattern compiled on its own when the config was validated; a set of them can
        // still exceed the size limit, and then each route's own regex is used.
        let regexes = if patterns.is_empty() {
            None
        } else {
            RegexSet::new(&patterns).ok()
        };
        let mut entries = Vec::new();
        let mut any_host = PathIndex::default();
        let mut by_host: HashMap<Box<str>, PathIndex> = HashMap::new();
        let mut in_set = 0;
        for (i, (route, (path, prefixed))) in routes.iter().zip(&paths).enumerate() {
            let n = u32::try_from(i).unwrap_or(u32::MAX);
            let exact_only = !route.hosts.is_empty()
                && route.hosts.iter().all(|h| matches!(h, HostMatch::Exact(_)));
            if exact_only {
                for host in &route.hosts {
                    if let HostMatch::Exact(h) = host {
                        by_host
                            .entry(h.as_str().into())
                            .or_default()
                            .insert(path, n);
                    }
                }
            } else {
                any_host.insert(path, n);
            }
            let mut matchers = route.matchers.clone();
            let mut regex = None;
            if matchers.must.path_regex.is_some() && !prefixed {
                if regexes.is_some() {
                    // The set answers for it.
                    matchers.must.path_regex = None;
                    regex = Some(in_set);
                }
                in_set += 1;
            }
            entries.push(Entry {
                hosts: if exact_only {
                    Vec::new()
                } else {
                    route.hosts.clone()
                },
                matchers,
                regex,
            });
        }
        Self {
            entries,
            any_host,
            by_host,
            regexes,
        }
    }

    /// The number (file order) of the first route that takes the request.
    pub fn find(&self, host: Option<&str>, input: &MatchInput<'_>) -> Option<usize> {
        let mut best: Option<usize> = None;
        // The set's answer for this path, computed when a candidate first needs it.
        let mut set: Option<regex::SetMatches> = None;
        let mut check = |list: &[u32]| {
            for &n in list {
                let n = n as usize;
                if best.is_some_and(|b| n >= b) {
                    return;
                }
                if self.takes(n, host, input, &mut set) {
                    best = Some(n);
                    return;
                }
            }
        };
        if let Some(index) = host.and_then(|h| self.by_host.get(h)) {
            index.candidates(input.path, &mut check);
        }
        self.any_host.candidates(input.path, &mut check);
        best
    }

    fn takes(
        &self,
        n: usize,
        host: Option<&str>,
        input: &MatchInput<'_>,
        set: &mut Option<regex::SetMatches>,
    ) -> bool {
        let Some(entry) = self.entries.get(n) else {
            return false;
        };
        if !entry.hosts.is_empty()
            && !host.is_some_and(|h| entry.hosts.iter().any(|m| m.matches(h)))
        {
            return false;
        }
        if let (Some(at), Some(regexes)) = (entry.regex, &self.regexes) {
            let matches = set.get_or_insert_with(|| regexes.matches(input.path));
            if !matches.matched(at) {
                return false;
            }
        }
        entry.matchers.is_empty() || entry.matchers.matches(input)
    }
}

/// The path a route is indexed under, and whether its regex gave it (then the route's own regex
/// is checked, outside the `RegexSet`). A regex anchored at the start whose every match begins
/// with a literal narrows the route's prefix to that literal when one is a prefix of the other.
fn indexed_path(route: &Route) -> (PathMatch, bool) {
    let Some(literal) = route
        .matchers
        .must
        .path_regex
        .as_ref()
        .and_then(|re| literal_prefix(re.as_str()))
    else {
        return (route.path.clone(), false);
    };
    match &route.path {
        PathMatch::Prefix(p) if literal.starts_with(p.as_str()) => {
            (PathMatch::Prefix(literal), true)
        }
        // The route's own prefix is the longer one (or they disagree, and nothing matches):
        // the set decides.
        other => (other.clone(), false),
    }
}

/// The literal every match of `pattern` starts with at the start of the text, when it is
/// anchored there (`^/users/(?P<id>[0-9]+)` → `/users/`). `None` for an empty one.
fn literal_prefix(pattern: &str) -> Option<String> {
    use regex_syntax::hir::Look;
    use regex_syntax::hir::literal::Extractor;
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    if !hir.properties().look_set_prefix().contains(Look::Start) {
        return None;
    }
    let seq = Extractor::new().extract(&hir);
    let prefix = std::str::from_utf8(seq.longest_common_prefix()?).ok()?;
    (!prefix.is_empty()).then(|| prefix.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchored_regexes_have_their_literal_prefix() {
        let cases = [
            ("^/users/(?P<id>[0-9]+)$", Some("/users/")),
            ("^/admin(/|$)", Some("/admin")),
            ("^/ab*", Some("/a")),
            ("^/(a|b)/x", Some("/")),
            ("/admin", None),
            ("^/a|/b", None),
            ("^(?i)/Admin", Some("/")),
            ("^[a-z]", None),
        ];
        for (pattern, want) in cases {
            assert_eq!(literal_prefix(pattern).as_deref(), want, "{pattern}");
        }
    }
}
