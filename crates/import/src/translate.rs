//! nginx's directive tree → sluice's configuration. Each directive ends up in one of three
//! states: translated (named in the comment of the table it became), not needed (sluice does
//! it by itself, or it tunes something sluice has no knob for: listed with the reason), or
//! left out (something nginx would do that the output does not: listed with file:line and the
//! reason, and the exit status says so).
//!
//! Where nginx and sluice decide differently, the output does what nginx did:
//! - **location order**: nginx picks `=` first, then the longest prefix, then (unless that
//!   prefix is `^~`) the first matching regex in file order, else that prefix; sluice takes the
//!   first route in file order. So routes are written exact paths first, then prefixes longest
//!   first, each preceded by a copy of every regex location limited to that prefix, then the
//!   regexes alone (for paths no prefix covers).
//! - **inheritance**: `add_header`, `proxy_set_header`, `allow`/`deny`, `limit_req`,
//!   `proxy_cache_valid` are inherited from the level above only when a level has none of its
//!   own; every route gets the set nginx would use for it, spelled out.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::parse::{Directive, Place};
use crate::toml_out::Val;
use crate::units::{self, SizeOut};

/// A directive the output does not carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    pub place: Place,
    /// The directive as written (name and arguments).
    pub directive: String,
    pub why: String,
}

/// A directive that needs no counterpart in sluice, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unneeded {
    pub place: Place,
    pub directive: String,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Status {
    Unseen,
    Unneeded(String),
    Translated,
    LeftOut(String),
}

/// What the translator produced, before it is written out.
pub struct Output {
    pub server: Vec<(String, Val)>,
    pub server_from: Vec<String>,
    pub log: Vec<(String, Val)>,
    pub log_from: Vec<String>,
    pub listeners: Vec<Table>,
    pub upstreams: Vec<Table>,
    pub caches: Vec<Table>,
    pub routes: Vec<Table>,
    pub left_out: Vec<LeftOut>,
    pub unneeded: Vec<Unneeded>,
    pub differences: Vec<String>,
}

/// One `[[listeners]]`, `[upstreams.NAME]`, `[caches.NAME]` or `[[routes]]` table.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub name: String,
    /// `file:line directive` lines it came from.
    pub from: Vec<String>,
    /// How it differs from nginx, or what to know.
    pub notes: Vec<String>,
    pub keys: Vec<(String, Val)>,
}

/// The inherited directives at one level: by name (`allow` and `deny` share `access`), the
/// ones of the innermost level that has any.
#[derive(Clone, Default)]
struct Ctx<'a> {
    dirs: BTreeMap<String, Vec<&'a Directive>>,
    vars: BTreeMap<String, String>,
}

fn group(name: &str) -> &str {
    match name {
        "allow" | "deny" => "access",
        n => n,
    }
}

/// Directives nginx inherits into nested levels (the others are blocks or act where written).
fn inherited(name: &str) -> bool {
    !matches!(
        name,
        "location"
            | "server"
            | "upstream"
            | "if"
            | "limit_except"
            | "types"
            | "events"
            | "http"
            | "map"
            | "geo"
            | "listen"
            | "server_name"
            | "return"
            | "rewrite"
            | "proxy_pass"
            | "internal"
            | "try_files"
            | "set"
    )
}

impl<'a> Ctx<'a> {
    fn child(&self, level: &'a [Directive]) -> Ctx<'a> {
        let mut next = self.clone();
        let mut replaced: Vec<String> = Vec::new();
        for d in level {
            if d.block.is_some() || !inherited(&d.name) {
                continue;
            }
            let g = group(&d.name).to_string();
            if !replaced.contains(&g) {
                next.dirs.insert(g.clone(), Vec::new());
                replaced.push(g.clone());
            }
            next.dirs.entry(g).or_default().push(d);
        }
        next
    }

    fn get(&self, name: &str) -> Option<&'a Directive> {
        self.dirs.get(name).and_then(|v| v.last().copied())
    }

    fn all(&self, name: &str) -> Vec<&'a Directive> {
        self.dirs.get(name).cloned().unwrap_or_default()
    }

    /// `$name` / `${name}` of literal `set`s replaced by their values.
    fn subst(&self, text: &str) -> String {
        if self.vars.is_empty() || !text.contains('$') {
            return text.to_string();
        }
        let mut out = text.to_string();
        for (name, value) in self.vars.iter().rev() {
            out = out.replace(&format!("${{{name}}}"), value);
            out = replace_var(&out, name, value);
        }
        out
    }
}

/// Replaces `$name` when not followed by a name character (`$foo` is not `$foobar`).
fn replace_var(text: &str, name: &str, value: &str) -> String {
    let pattern = format!("${name}");
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(&pattern) {
        let after = &rest[i + pattern.len()..];
        out.push_str(&rest[..i]);
        if after
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            out.push_str(&pattern);
        } else {
            out.push_str(value);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

struct Listener {
    address: String,
    name: String,
    tls: bool,
    h2: bool,
    h3: bool,
    proxy_protocol: bool,
    /// (server names, cert, key) per TLS server on it, first = default certificate.
    certs: Vec<(Vec<String>, String, String)>,
    default_server: Option<usize>,
    from: Vec<String>,
    extra: Vec<(String, Val)>,
}

/// A group the routes use: its name, its base (an `upstream` block or an address), and the
/// timeouts of the locations that use it.
type Group = (String, usize, Vec<(String, Val)>);

struct UpBase {
    name: String,
    from: Vec<String>,
    notes: Vec<String>,
    keys: Vec<(String, Val)>,
}

struct Zone {
    key: String,
    requests: u64,
    per: &'static str,
    from: String,
}

enum Match {
    Exact(String),
    Prefix { path: String, stop: bool },
    Regex { re: String, ci: bool },
}

struct Loc<'a> {
    d: &'a Directive,
    m: Match,
    ctx: Ctx<'a>,
    body: &'a [Directive],
    from: Vec<String>,
}

pub struct Translator<'a> {
    status: Vec<Status>,
    all: Vec<&'a Directive>,
    base_dir: PathBuf,
    prefix: PathBuf,
    out: Output,
    listeners: Vec<Listener>,
    bases: Vec<UpBase>,
    /// (group name, base index, timeouts) in first-use order.
    groups: Vec<Group>,
    upstream_blocks: HashMap<String, usize>,
    zones: HashMap<String, Zone>,
    route_names: HashMap<String, usize>,
}

fn describe(d: &Directive) -> String {
    let mut s = if d.name.is_empty() {
        "''".to_string()
    } else {
        d.name.clone()
    };
    for a in &d.args {
        s.push(' ');
        if a.is_empty() || a.contains(char::is_whitespace) || a.contains([';', '{', '}', '#']) {
            s.push('"');
            s.push_str(a);
            s.push('"');
        } else {
            s.push_str(a);
        }
    }
    if d.block.is_some() {
        s.push_str(" { ... }");
    }
    s
}

fn flatten<'a>(tree: &'a [Directive], out: &mut Vec<&'a Directive>) {
    for d in tree {
        out.push(d);
        if let Some(children) = &d.block {
            flatten(children, out);
        }
    }
}

/// Numbers every directive in reading order.
pub fn number(tree: &mut [Directive], next: &mut usize) {
    for d in tree {
        d.id = *next;
        *next += 1;
        if let Some(children) = &mut d.block {
            number(children, next);
        }
    }
}

/// Unneeded directives: sluice does this itself, or there is nothing to tune.
fn unneeded_reason(name: &str) -> Option<&'static str> {
    Some(match name {
        "user" => "sluice runs as the user that starts it (a systemd unit's User=)",
        "pid" => {
            "nginx's own pid file; sluice's is `[server] pid_file`, set it if `sluice reload` is wanted"
        }
        "daemon" | "master_process" => "sluice runs in the foreground, under a supervisor",
        "error_log" => "sluice writes its diagnostics to stderr (`[log] level`)",
        "events" | "worker_connections" | "use" | "multi_accept" | "accept_mutex" => {
            "connection handling: sluice's workers take connections themselves (`[server] max_connections` bounds them)"
        }
        "worker_rlimit_nofile" => "sluice raises its open-files limit to the hard limit itself",
        "pcre_jit" => "sluice's regexes are compiled (Rust regex)",
        "load_module" => "sluice has no modules; directives of a module are reported on their own",
        "types" | "types_hash_max_size" | "types_hash_bucket_size" => {
            "sluice has its own MIME table (mime_guess)"
        }
        "default_type" => {
            "sluice's MIME table decides unknown types (application/octet-stream, as here)"
        }
        "sendfile" => "sluice sends cached files with sendfile(2) by itself (`static.sendfile`)",
        "tcp_nopush" | "tcp_nodelay" => "sluice sets its sockets up itself",
        "server_names_hash_bucket_size"
        | "server_names_hash_max_size"
        | "variables_hash_max_size"
        | "variables_hash_bucket_size"
        | "proxy_headers_hash_max_size"
        | "proxy_headers_hash_bucket_size" => "a hash table size: sluice has none to size",
        "open_file_cache"
        | "open_file_cache_valid"
        | "open_file_cache_min_uses"
        | "open_file_cache_errors" => {
            "static routes keep hot files in memory by themselves (`memory_cache`)"
        }
        "client_body_temp_path"
        | "proxy_temp_path"
        | "fastcgi_temp_path"
        | "uwsgi_temp_path"
        | "scgi_temp_path"
        | "proxy_max_temp_file_size"
        | "proxy_temp_file_write_size" => "sluice streams bodies and never writes temporary files",
        "proxy_buffer_size"
        | "proxy_buffers"
        | "proxy_busy_buffers_size"
        | "proxy_buffering"
        | "client_body_buffer_size"
        | "output_buffers"
        | "postpone_output"
        | "gzip_buffers" => "sluice streams bodies both ways with its own bounded buffers",
        "keepalive_requests" => {
            "sluice keeps a client connection open for any number of requests (it does not grow with them)"
        }
        "proxy_http_version" => {
            "sluice speaks HTTP/1.1 with keep-alive to upstreams (or HTTP/2 with `http2 = true`)"
        }
        "gzip_vary" => "sluice always sends `Vary: Accept-Encoding` with compressible responses",
        "gzip_http_version" => "sluice compresses for HTTP/1.0 clients too",
        "server_tokens" => "sluice's `Server` header carries no version (`[server] server_header`)",
        "ssl_protocols" => "sluice offers TLS 1.2 and 1.3 only (older versions are broken)",
        "ssl_ciphers" | "ssl_prefer_server_ciphers" | "ssl_ecdh_curve" | "ssl_dhparam" => {
            "sluice offers AEAD suites with forward secrecy only, and honours the client's order"
        }
        "ssl_session_cache" | "ssl_session_timeout" | "ssl_session_tickets" => {
            "sluice resumes TLS sessions by tickets (rotated keys) and session IDs by itself"
        }
        "ssl_buffer_size" => "sluice sizes TLS records itself",
        "reset_timedout_connection"
        | "lingering_close"
        | "lingering_time"
        | "lingering_timeout" => "connection teardown: sluice closes connections itself",
        "access_log" | "log_format" => "handled with the log settings",
        "zone" => "an nginx shared-memory zone: sluice's state is per process",
        "real_ip_recursive" => {
            "sluice always walks X-Forwarded-For from the right, as `real_ip_recursive on`"
        }
        "charset" | "source_charset" | "charset_types" => "sluice does not recode responses",
        "msie_padding" | "msie_refresh" => "for Internet Explorer",
        "server_name_in_redirect" | "port_in_redirect" | "absolute_redirect" => {
            "sluice's redirects are what the route writes"
        }
        _ => return None,
    })
}

/// Why a directive sluice cannot do is left out.
fn left_out_reason(name: &str) -> String {
    match name {
        "try_files" => "only `$uri`, `$uri/` and `=404` are what a static route does; other fallbacks (a front controller, a named location) have no sluice counterpart".into(),
        "fastcgi_pass" | "uwsgi_pass" | "scgi_pass" | "grpc_pass" | "memcached_pass" => {
            "sluice proxies HTTP only: run the application behind an HTTP server (or `uwsgi --http-socket`) and proxy to it".into()
        }
        "error_page" => "sluice has no custom error pages".into(),
        "if" => "conditions are not translated: write a route with matchers (`headers`, `query`, `methods`, `client`)".into(),
        "map" | "geo" | "split_clients" => "variables computed from other variables are not translated".into(),
        "autoindex" => "sluice does not list directories".into(),
        "sub_filter" | "ssi" | "addition_types" => "sluice does not edit response bodies".into(),
        "proxy_redirect" => "sluice does not rewrite the upstream's Location header".into(),
        "proxy_next_upstream" | "proxy_next_upstream_tries" | "proxy_next_upstream_timeout" => {
            "sluice retries failed connections on another server by itself (`[upstreams.NAME.retry]`); the conditions are not translated".into()
        }
        "stream" | "mail" => "sluice serves HTTP only".into(),
        "resolver" => "sluice resolves upstream names with the system resolver".into(),
        "limit_conn" | "limit_conn_zone" => "sluice bounds connections per listener, not per client".into(),
        _ => format!("sluice has no counterpart for `{name}`"),
    }
}

impl<'a> Translator<'a> {
    pub fn new(tree: &'a [Directive], main_file: &Path, prefix: &Path) -> Self {
        let mut all = Vec::new();
        flatten(tree, &mut all);
        let max = all.iter().map(|d| d.id).max().map_or(0, |m| m + 1);
        Translator {
            status: vec![Status::Unseen; max],
            all,
            base_dir: main_file
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            prefix: prefix.to_path_buf(),
            out: Output {
                server: Vec::new(),
                server_from: Vec::new(),
                log: Vec::new(),
                log_from: Vec::new(),
                listeners: Vec::new(),
                upstreams: Vec::new(),
                caches: Vec::new(),
                routes: Vec::new(),
                left_out: Vec::new(),
                unneeded: Vec::new(),
                differences: Vec::new(),
            },
            listeners: Vec::new(),
            bases: Vec::new(),
            groups: Vec::new(),
            upstream_blocks: HashMap::new(),
            zones: HashMap::new(),
            route_names: HashMap::new(),
        }
    }

    fn set(&mut self, d: &Directive, s: Status) {
        let Some(slot) = self.status.get_mut(d.id) else {
            return;
        };
        let rank = |s: &Status| match s {
            Status::Unseen => 0,
            Status::Unneeded(_) => 1,
            Status::Translated => 2,
            Status::LeftOut(_) => 3,
        };
        if rank(&s) >= rank(slot) {
            *slot = s;
        }
    }

    fn ok(&mut self, d: &Directive) {
        self.set(d, Status::Translated);
    }

    fn left(&mut self, d: &Directive, why: impl Into<String>) {
        self.set(d, Status::LeftOut(why.into()));
    }

    fn unneeded(&mut self, d: &Directive, why: impl Into<String>) {
        self.set(d, Status::Unneeded(why.into()));
    }

    fn left_tree(&mut self, d: &Directive, why: &str) {
        self.left(d, why);
        if let Some(children) = &d.block {
            for c in children {
                self.left_tree(
                    c,
                    &format!(
                        "inside `{}` (line {}), which is left out",
                        d.name, d.place.line
                    ),
                );
            }
        }
    }

    fn from(&self, d: &Directive) -> String {
        format!("{}  {}", self.place(&d.place), describe(d))
    }

    /// A place with the file relative to the main file's directory when under it.
    fn place(&self, p: &Place) -> String {
        let file = p
            .file
            .strip_prefix(&self.base_dir)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| p.file.to_path_buf());
        format!("{}:{}", file.display(), p.line)
    }

    /// A path in the nginx config, made absolute against the prefix.
    fn path(&self, p: &str) -> String {
        let path = Path::new(p);
        if path.is_absolute() {
            p.to_string()
        } else {
            self.prefix.join(path).display().to_string()
        }
    }

    pub fn run(mut self, tree: &'a [Directive]) -> Output {
        for d in self.all.clone() {
            if matches!(
                d.name.as_str(),
                "if" | "map" | "geo" | "split_clients" | "stream" | "mail"
            ) {
                self.left_tree(d, &left_out_reason(&d.name));
            }
            if d.name == "types" {
                for c in d.block.as_deref().unwrap_or_default() {
                    self.unneeded(c, "a MIME type: sluice has its own table (mime_guess)");
                }
            }
        }
        let main = Ctx::default().child(tree);
        // A site file read alone (sites-available/example): its servers as if in `http`.
        if tree.iter().any(|d| d.name == "server") && !tree.iter().any(|d| d.name == "http") {
            self.http(&Ctx::default(), tree);
        }
        for d in tree {
            match d.name.as_str() {
                "http" => {
                    self.ok(d);
                    if let Some(children) = &d.block {
                        self.http(&main, children);
                    }
                }
                "worker_processes" => match d.args.first().map(String::as_str) {
                    Some("auto") => {
                        self.ok(d);
                        self.out.server_from.push(self.from(d));
                    }
                    Some(n) if n.parse::<u32>().is_ok_and(|n| (1..=1024).contains(&n)) => {
                        self.ok(d);
                        self.out.server.push((
                            "workers".into(),
                            Val::Int(i64::from(n.parse::<u32>().unwrap_or(1))),
                        ));
                        self.out.server_from.push(self.from(d));
                    }
                    _ => self.left(d, "not a worker count sluice takes (1 to 1024 or auto)"),
                },
                "events" => {
                    self.unneeded(d, unneeded_reason("events").unwrap_or_default());
                    if let Some(children) = &d.block {
                        for c in children {
                            match unneeded_reason(&c.name) {
                                Some(why) => self.unneeded(c, why),
                                None => self.left(c, left_out_reason(&c.name)),
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        self.finish()
    }

    fn http(&mut self, parent: &Ctx<'a>, level: &'a [Directive]) {
        let ctx = parent.child(level);
        // Upstreams, cache paths and rate zones first: servers refer to them.
        for d in level {
            match d.name.as_str() {
                "upstream" => self.upstream(d),
                "proxy_cache_path" => self.cache_path(d),
                "limit_req_zone" => self.limit_req_zone(d),
                _ => {}
            }
        }
        self.logs(&ctx);
        self.real_ip(&ctx, None);
        let servers: Vec<&'a Directive> = level.iter().filter(|d| d.name == "server").collect();
        let mut emitted: Vec<(usize, Vec<Table>, Vec<Table>)> = Vec::new();
        for (i, s) in servers.iter().enumerate() {
            self.ok(s);
            let Some(children) = &s.block else { continue };
            let (named, fallback) = self.server(&ctx, children, i);
            emitted.push((i, named, fallback));
        }
        // Routes of named hosts first, then those of default servers (nginx's fallback for
        // hosts no server_name matches), so a default server does not shadow the others.
        let mut fallbacks = Vec::new();
        for (_, named, fallback) in emitted {
            self.out.routes.extend(named);
            fallbacks.extend(fallback);
        }
        self.out.routes.extend(fallbacks);
    }

    fn logs(&mut self, ctx: &Ctx<'a>) {
        if let Some(d) = ctx.get("access_log") {
            match d.args.first().map(String::as_str) {
                Some("off") => {
                    self.ok(d);
                    self.out.log.push(("access".into(), Val::s("off")));
                    self.out.log_from.push(self.from(d));
                }
                Some(path) if d.args.len() <= 2
                    && d.args.get(1).is_none_or(|f| f == "combined") =>
                {
                    let target = if path == "/dev/stdout" {
                        "stdout".to_string()
                    } else if path == "/dev/stderr" || path == "stderr" {
                        "stderr".to_string()
                    } else {
                        self.path(path)
                    };
                    self.ok(d);
                    self.out.log.push(("access".into(), Val::s(target)));
                    self.out.log_from.push(self.from(d));
                }
                _ => self.left(
                    d,
                    "only `off` or a file in the combined format translate (sluice writes combined or JSON lines, `[log] format`)",
                ),
            }
        }
        for d in ctx.all("log_format") {
            self.left(d, "sluice writes nginx's combined format or JSON lines; custom formats are not translated");
        }
    }

    /// `set_real_ip_from` + `real_ip_header X-Forwarded-For` → trusted proxies: the server's
    /// when `listener` is None, else the listener's own.
    fn real_ip(&mut self, ctx: &Ctx<'a>, listeners: Option<&[usize]>) -> Option<Vec<String>> {
        let froms = ctx.all("set_real_ip_from");
        if froms.is_empty() {
            if let Some(h) = ctx.get("real_ip_header") {
                self.left(h, "without `set_real_ip_from` nobody is trusted");
            }
            return None;
        }
        let header = ctx.get("real_ip_header");
        let header_name = header
            .and_then(|h| h.args.first())
            .map(|s| s.to_ascii_lowercase());
        match header_name.as_deref() {
            Some("x-forwarded-for") => {}
            Some("proxy_protocol") => {
                for d in &froms {
                    self.left(d, "the address a PROXY protocol header gives is trusted by `proxy_protocol = true` on a listener, for every peer");
                }
                if let Some(h) = header {
                    self.left(h, "write `proxy_protocol = true` on the listener and keep it reachable only by the balancers");
                }
                return None;
            }
            _ => {
                // nginx's default is X-Real-IP, which sluice does not read.
                for d in &froms {
                    self.left(d, "sluice reads the client address from X-Forwarded-For only (nginx here uses X-Real-IP or another header)");
                }
                if let Some(h) = header {
                    self.left(h, "sluice reads X-Forwarded-For only");
                }
                return None;
            }
        }
        let mut nets = Vec::new();
        for d in &froms {
            match d.args.first() {
                Some(a)
                    if a.parse::<ipnet::IpNet>().is_ok()
                        || a.parse::<std::net::IpAddr>().is_ok() =>
                {
                    self.ok(d);
                    nets.push(a.clone());
                }
                _ => self.left(
                    d,
                    "not an address or CIDR block (host names and `unix:` are not translated)",
                ),
            }
        }
        if let Some(h) = header {
            self.ok(h);
        }
        match listeners {
            None => {
                self.out
                    .server
                    .push(("trusted_proxies".into(), Val::strs(nets.clone())));
                for d in froms.iter().chain(header.iter()) {
                    self.out.server_from.push(self.from(d));
                }
            }
            Some(ls) => {
                for &i in ls {
                    let l = &mut self.listeners[i];
                    if !l.extra.iter().any(|(k, _)| k == "trusted_proxies") {
                        l.extra
                            .push(("trusted_proxies".into(), Val::strs(nets.clone())));
                    }
                }
            }
        }
        Some(nets)
    }

    fn upstream(&mut self, d: &'a Directive) {
        self.ok(d);
        let Some(name) = d.args.first() else {
            self.left(d, "an upstream needs a name");
            return;
        };
        let mut base = UpBase {
            name: name.clone(),
            from: vec![self.from(d)],
            notes: Vec::new(),
            keys: Vec::new(),
        };
        let mut servers = Vec::new();
        let mut keepalive: Vec<(String, Val)> = Vec::new();
        for c in d.block.as_deref().unwrap_or_default() {
            match c.name.as_str() {
                "server" => match self.upstream_server(c) {
                    Ok(v) => {
                        self.ok(c);
                        servers.push(v);
                    }
                    Err(why) => self.left(c, why),
                },
                "keepalive" => match c.args.first().and_then(|n| n.parse::<i64>().ok()) {
                    Some(n) => {
                        self.ok(c);
                        keepalive.push(("max_idle".into(), Val::Int(n)));
                    }
                    None => self.left(c, "not a number"),
                },
                "keepalive_timeout" => match c.args.first().and_then(|t| units::time(t)) {
                    Some(t) if t != "0s" => {
                        self.ok(c);
                        keepalive.push(("idle_timeout".into(), Val::s(t)));
                    }
                    _ => self.left(c, "not a duration sluice takes"),
                },
                "keepalive_requests" => match c.args.first().and_then(|n| n.parse::<i64>().ok()) {
                    Some(n) => {
                        self.ok(c);
                        keepalive.push(("max_requests".into(), Val::Int(n)));
                    }
                    None => self.left(c, "not a number"),
                },
                "least_conn" => {
                    self.ok(c);
                    base.keys.push(("policy".into(), Val::s("least_conn")));
                }
                "ip_hash" => {
                    self.ok(c);
                    base.keys.push(("policy".into(), Val::s("hash")));
                    base.keys.push(("hash_key".into(), Val::s("client_ip")));
                    base.notes.push(
                        "ip_hash: a client keeps its server, as in nginx, but the mapping is sluice's consistent hash of the whole address (nginx hashes an IPv4 address's first three octets)"
                            .into(),
                    );
                }
                "hash" => match c.args.first().and_then(|k| hash_key(k)) {
                    Some(key) => {
                        self.ok(c);
                        base.keys.push(("policy".into(), Val::s("hash")));
                        base.keys.push(("hash_key".into(), Val::s(key)));
                        if c.args.get(1).map(String::as_str) != Some("consistent") {
                            base.notes.push("hash without `consistent`: sluice's hash is always consistent (ketama, nginx's `consistent` mapping), so keys move less when servers change".into());
                        }
                    }
                    None => self.left(c, "a hash key sluice takes is $remote_addr / $binary_remote_addr, $request_uri, $http_NAME or $cookie_NAME"),
                },
                "random" => {
                    if c.args.first().map(String::as_str) == Some("two") {
                        self.ok(c);
                        base.keys.push(("policy".into(), Val::s("p2c")));
                    } else {
                        self.left(c, "only `random two` (power of two choices) translates");
                    }
                }
                "zone" => self.unneeded(c, unneeded_reason("zone").unwrap_or_default()),
                other => self.left(c, left_out_reason(other)),
            }
        }
        if servers.is_empty() {
            self.left(d, "no server sluice can reach");
            return;
        }
        base.keys.insert(0, ("servers".into(), Val::Arr(servers)));
        if !keepalive.is_empty() {
            base.keys.push(("keepalive".into(), Val::Tbl(keepalive)));
        }
        self.upstream_blocks.insert(name.clone(), self.bases.len());
        self.bases.push(base);
    }

    fn upstream_server(&self, d: &Directive) -> Result<Val, String> {
        let addr = d.args.first().ok_or("a server needs an address")?;
        let address = server_address(addr)?;
        let mut t = vec![("address".to_string(), Val::s(address))];
        for p in &d.args[1..] {
            let (k, v) = p.split_once('=').unwrap_or((p.as_str(), ""));
            match k {
                "weight" => t.push((
                    "weight".into(),
                    Val::Int(v.parse().map_err(|_| format!("weight {v:?}"))?),
                )),
                "max_fails" => t.push((
                    "max_fails".into(),
                    Val::Int(v.parse().map_err(|_| format!("max_fails {v:?}"))?),
                )),
                "fail_timeout" => t.push((
                    "fail_timeout".into(),
                    Val::s(units::time(v).ok_or(format!("fail_timeout {v:?}"))?),
                )),
                "backup" => t.push(("backup".into(), Val::Bool(true))),
                "down" => t.push(("down".into(), Val::Bool(true))),
                "max_conns" => {
                    // Per group in sluice: refused here to keep the group's meaning.
                    return Err("max_conns is a group setting in sluice (`max_conns` of the upstream); not translated per server".into());
                }
                "resolve" | "service" => {
                    return Err(format!("`{k}` (DNS re-resolution, SRV) is not translated"));
                }
                _ => return Err(format!("server parameter `{p}` is not translated")),
            }
        }
        Ok(if t.len() == 1 {
            t.remove(0).1
        } else {
            Val::Tbl(t)
        })
    }

    fn cache_path(&mut self, d: &'a Directive) {
        let Some(path) = d.args.first() else {
            self.left(d, "no path");
            return;
        };
        let mut zone = None;
        let mut max_size = None;
        let mut notes = Vec::new();
        for a in &d.args[1..] {
            let (k, v) = a.split_once('=').unwrap_or((a.as_str(), ""));
            match k {
                "keys_zone" => zone = Some(v.split(':').next().unwrap_or(v).to_string()),
                "max_size" => max_size = units::size(v),
                "levels" | "use_temp_path" | "manager_files" | "manager_sleep" | "manager_threshold"
                | "loader_files" | "loader_sleep" | "loader_threshold" => {}
                "inactive" => notes.push(format!("inactive={v}: sluice keeps entries until their freshness and stale windows end or the tier is full")),
                _ => notes.push(format!("`{a}` is not translated")),
            }
        }
        let Some(zone) = zone else {
            self.left(d, "no keys_zone");
            return;
        };
        self.ok(d);
        let mut keys = Vec::new();
        match max_size {
            Some(size) => {
                let size = match size {
                    SizeOut::Bytes(b) => Val::Int(b as i64),
                    SizeOut::Text(t) => Val::s(t),
                };
                keys.push((
                    "disk".into(),
                    Val::Tbl(vec![("path".into(), Val::s(self.path(path))), ("size".into(), size)]),
                ));
            }
            None => notes.push(format!(
                "nginx kept this zone on disk at {path} with no size limit; sluice keeps it in 64 MiB of memory (add `disk = {{ path, size }}` for a disk tier)"
            )),
        }
        self.out.caches.push(Table {
            name: zone,
            from: vec![self.from(d)],
            notes,
            keys,
        });
    }

    fn limit_req_zone(&mut self, d: &'a Directive) {
        let key = d.args.first().map(String::as_str);
        let key = match key {
            Some("$binary_remote_addr" | "$remote_addr") => "client_ip".to_string(),
            Some(k) if k.starts_with("$http_") => {
                format!("header:{}", k["$http_".len()..].replace('_', "-"))
            }
            _ => {
                self.left(d, "a rate key sluice takes is the client address or a request header ($http_NAME)");
                return;
            }
        };
        let mut name = None;
        let mut rate = None;
        for a in &d.args[1..] {
            if let Some(z) = a.strip_prefix("zone=") {
                name = Some(z.split(':').next().unwrap_or(z).to_string());
            } else if let Some(r) = a.strip_prefix("rate=") {
                rate = r
                    .strip_suffix("r/s")
                    .map(|n| (n, "1s"))
                    .or_else(|| r.strip_suffix("r/m").map(|n| (n, "1m")))
                    .and_then(|(n, per)| {
                        n.parse::<u64>().ok().filter(|n| *n > 0).map(|n| (n, per))
                    });
            }
        }
        match (name, rate) {
            (Some(name), Some((requests, per))) => {
                // Marked translated when a `limit_req` uses it.
                let from = self.from(d);
                self.zones.insert(
                    name,
                    Zone {
                        key,
                        requests,
                        per,
                        from,
                    },
                );
                self.unneeded(d, "a zone no `limit_req` uses");
            }
            _ => self.left(d, "needs zone=NAME:SIZE and rate=Nr/s or Nr/m"),
        }
    }

    /// One `server { }`: its listeners, then its routes (for named hosts, and for the hosts
    /// no server name matches when it is a default server).
    fn server(
        &mut self,
        http: &Ctx<'a>,
        level: &'a [Directive],
        index: usize,
    ) -> (Vec<Table>, Vec<Table>) {
        let mut ctx = http.child(level);
        self.vars(&mut ctx, level);
        // server_name
        let mut names: Vec<String> = Vec::new();
        let mut catch_all = false;
        for d in level.iter().filter(|d| d.name == "server_name") {
            let mut all_ok = true;
            for n in &d.args {
                match host_pattern(n) {
                    HostPat::CatchAll => catch_all = true,
                    HostPat::Hosts(hs) => names.extend(hs),
                    HostPat::No(why) => {
                        all_ok = false;
                        self.left(d, why);
                    }
                }
            }
            if all_ok {
                self.ok(d);
            }
        }
        // listen
        let http2_on = ctx.get("http2").map(|d| {
            self.ok(d);
            d.args.first().map(String::as_str) == Some("on")
        });
        let http3_on = ctx.get("http3").map(|d| {
            self.ok(d);
            d.args.first().map(String::as_str) == Some("on")
        });
        let mut mine: Vec<usize> = Vec::new();
        let mut default_on: Vec<usize> = Vec::new();
        let listens: Vec<&Directive> = level.iter().filter(|d| d.name == "listen").collect();
        let defaults: Vec<Directive>;
        let listens: Vec<&Directive> = if listens.is_empty() {
            // nginx's default: *:80 (this user is root) or *:8000.
            defaults = vec![Directive {
                name: "listen".into(),
                args: vec!["80".into()],
                place: Place {
                    file: std::sync::Arc::new(PathBuf::from("(nginx default)")),
                    line: 0,
                },
                block: None,
                id: usize::MAX,
            }];
            defaults.iter().collect()
        } else {
            listens
        };
        for d in listens {
            match self.listen(d, index, &ctx, http2_on, http3_on) {
                Ok((i, is_default)) => {
                    self.ok(d);
                    if !mine.contains(&i) {
                        mine.push(i);
                    }
                    if is_default {
                        default_on.push(i);
                    }
                }
                Err(why) => self.left(d, why),
            }
        }
        // TLS certificates of this server.
        let cert = ctx.get("ssl_certificate");
        let key = ctx.get("ssl_certificate_key");
        for &i in &mine {
            if !self.listeners[i].tls {
                continue;
            }
            match (cert, key) {
                (Some(c), Some(k))
                    if c.args.len() == 1 && k.args.len() == 1 && !c.args[0].contains('$') =>
                {
                    self.ok(c);
                    self.ok(k);
                    let (cp, kp) = (self.path(&c.args[0]), self.path(&k.args[0]));
                    let from = [self.from(c), self.from(k)];
                    let l = &mut self.listeners[i];
                    if !l.certs.iter().any(|(_, cc, _)| *cc == cp) {
                        l.certs.push((names.clone(), cp, kp));
                        l.from.extend(from);
                    }
                }
                (Some(c), _) => self.left(
                    c,
                    "a certificate needs its key, one file each, without variables",
                ),
                _ => {}
            }
        }
        for d in level {
            if let Some(why) = unneeded_reason(&d.name)
                && d.block.is_none()
                && !matches!(d.name.as_str(), "access_log" | "log_format")
            {
                self.unneeded(d, why);
            }
            if matches!(
                d.name.as_str(),
                "keepalive_timeout" | "client_header_timeout"
            ) {
                self.listener_timeout(d, &mine);
            }
        }
        for d in http
            .all("keepalive_timeout")
            .into_iter()
            .chain(http.all("client_header_timeout"))
        {
            if !level.iter().any(|l| l.name == d.name) {
                self.listener_timeout(d, &mine);
            }
        }
        if level
            .iter()
            .any(|d| d.name == "set_real_ip_from" || d.name == "real_ip_header")
        {
            self.real_ip(&ctx, Some(&mine));
        }
        // The routes.
        let label = names
            .first()
            .cloned()
            .unwrap_or_else(|| format!("server {}", index + 1));
        let mut routes = self.locations(&ctx, level, &label);
        let multi_listener = true;
        let listener_names: Vec<String> = mine
            .iter()
            .map(|&i| self.listeners[i].name.clone())
            .collect();
        let _ = multi_listener;
        let mut named = Vec::new();
        let mut fallback = Vec::new();
        let default_names: Vec<String> = default_on
            .iter()
            .map(|&i| self.listeners[i].name.clone())
            .collect();
        let restrict_hosts = !names.is_empty() && !catch_all;
        for r in routes.drain(..) {
            if restrict_hosts {
                let mut t = r.clone();
                insert_after_name(
                    &mut t.keys,
                    "host",
                    if names.len() == 1 {
                        Val::s(names[0].clone())
                    } else {
                        Val::strs(names.clone())
                    },
                );
                insert_after_name(&mut t.keys, "listeners", Val::strs(listener_names.clone()));
                named.push(t);
                if !default_names.is_empty() {
                    let mut t = r;
                    t.name = format!("{} (default server)", t.name);
                    set_name(&mut t);
                    t.notes.push("the default server of its listeners: it answers hosts no server_name matches".into());
                    insert_after_name(&mut t.keys, "listeners", Val::strs(default_names.clone()));
                    fallback.push(t);
                }
            } else {
                let mut t = r;
                insert_after_name(&mut t.keys, "listeners", Val::strs(listener_names.clone()));
                fallback.push(t);
            }
        }
        (named, fallback)
    }

    fn listener_timeout(&mut self, d: &Directive, mine: &[usize]) {
        let key = if d.name == "keepalive_timeout" {
            "idle_timeout"
        } else {
            "header_read_timeout"
        };
        match d.args.first().and_then(|t| units::time(t)) {
            Some(t) if t != "0s" => {
                self.ok(d);
                for &i in mine {
                    let l = &mut self.listeners[i];
                    if !l.extra.iter().any(|(k, _)| k == key) {
                        l.extra.push((key.into(), Val::s(t.clone())));
                    }
                }
            }
            _ => self.left(
                d,
                "0 (keep-alive off) or not a duration: sluice keeps connections alive",
            ),
        }
    }

    fn vars(&mut self, ctx: &mut Ctx<'a>, level: &'a [Directive]) {
        for d in level.iter().filter(|d| d.name == "set") {
            match d.args.as_slice() {
                [name, value] if name.starts_with('$') && !value.contains('$') => {
                    self.ok(d);
                    ctx.vars.insert(name[1..].to_string(), value.clone());
                }
                _ => self.left(d, "only `set $name literal;` translates (its value is put where the variable is used)"),
            }
        }
    }

    /// Adds (or finds) the listener for a `listen`; returns its index and whether this server
    /// is its default.
    fn listen(
        &mut self,
        d: &Directive,
        server: usize,
        ctx: &Ctx<'a>,
        http2_on: Option<bool>,
        http3_on: Option<bool>,
    ) -> Result<(usize, bool), String> {
        let first = d.args.first().ok_or("listen needs an address")?;
        let address = listen_address(first)?;
        let mut tls = false;
        let mut h2 = http2_on.unwrap_or(false);
        let mut h3 = http3_on.unwrap_or(false);
        let mut pp = false;
        let mut default = false;
        let mut notes = Vec::new();
        for p in &d.args[1..] {
            let k = p.split('=').next().unwrap_or(p);
            match k {
                "ssl" => tls = true,
                "http2" => h2 = true,
                "quic" | "http3" => h3 = true,
                "proxy_protocol" => pp = true,
                "default_server" | "default" => default = true,
                "reuseport" | "backlog" | "rcvbuf" | "sndbuf" | "deferred" | "fastopen"
                | "so_keepalive" | "bind" | "ipv6only" | "setfib" | "accept_filter" => {
                    notes.push(format!("`{p}`: socket tuning sluice does itself"));
                }
                _ => return Err(format!("listen parameter `{p}` is not translated")),
            }
        }
        let _ = ctx;
        let i = match self.listeners.iter().position(|l| l.address == address) {
            Some(i) => i,
            None => {
                self.listeners.push(Listener {
                    name: address.clone(),
                    address,
                    tls: false,
                    h2: false,
                    h3: false,
                    proxy_protocol: false,
                    certs: Vec::new(),
                    default_server: None,
                    from: Vec::new(),
                    extra: Vec::new(),
                });
                self.listeners.len() - 1
            }
        };
        let from = if d.id == usize::MAX {
            "(no listen: nginx's default, port 80)".to_string()
        } else {
            self.from(d)
        };
        let l = &mut self.listeners[i];
        l.tls |= tls;
        l.h2 |= h2;
        l.h3 |= h3;
        l.proxy_protocol |= pp;
        l.from.push(from);
        l.from.extend(notes);
        if default || l.default_server.is_none() {
            l.default_server = Some(server);
        }
        let is_default = l.default_server == Some(server);
        Ok((i, is_default))
    }

    /// The routes of one server's locations, in the order that makes sluice's first-match
    /// pick what nginx's location search picks.
    fn locations(&mut self, sctx: &Ctx<'a>, level: &'a [Directive], label: &str) -> Vec<Table> {
        // A server-level return or redirecting rewrite answers before any location.
        for d in level {
            if d.name == "return" || (d.name == "rewrite" && is_redirect_rewrite(d)) {
                let mut t = Table {
                    name: format!("{label} (server-level {})", d.name),
                    ..Table::default()
                };
                set_name(&mut t);
                t.from.push(self.from(d));
                let action = if d.name == "return" {
                    self.return_action(d, sctx, &mut t)
                } else {
                    self.rewrite_redirect(d, sctx, &mut t).map(|(_, a)| a)
                };
                if let Some(action) = action {
                    self.ok(d);
                    t.keys.push(action);
                    self.response_headers(sctx, &mut t, false);
                    let r = self.finish_route(t);
                    for other in level {
                        if other.name == "location" {
                            self.never_reached(other);
                        }
                    }
                    return vec![r];
                }
            } else if d.name == "rewrite" {
                self.left(
                    d,
                    "a server-level rewrite that is not a redirect is not translated",
                );
            }
        }
        let mut locs: Vec<Loc<'a>> = Vec::new();
        self.collect(sctx, level, &mut locs, &[]);
        // The internal locations auth_request uses are not routes of their own.
        let mut routes = Vec::new();
        let exact: Vec<&Loc> = locs
            .iter()
            .filter(|l| matches!(l.m, Match::Exact(_)))
            .collect();
        let mut prefixes: Vec<&Loc> = locs
            .iter()
            .filter(|l| matches!(l.m, Match::Prefix { .. }))
            .collect();
        let regexes: Vec<&Loc> = locs
            .iter()
            .filter(|l| matches!(l.m, Match::Regex { .. }))
            .collect();
        prefixes.sort_by_key(|l| match &l.m {
            Match::Prefix { path, .. } => std::cmp::Reverse(path.len()),
            _ => std::cmp::Reverse(0),
        });
        let mut plan: Vec<(&Loc, Option<String>)> = Vec::new();
        for l in &exact {
            plan.push((l, None));
        }
        for p in &prefixes {
            if let Match::Prefix { path, stop } = &p.m {
                if !stop {
                    for r in &regexes {
                        plan.push((r, Some(path.clone())));
                    }
                }
                plan.push((p, None));
            }
        }
        for r in &regexes {
            plan.push((r, None));
        }
        let has_root_prefix = prefixes
            .iter()
            .any(|p| matches!(&p.m, Match::Prefix { path, .. } if path == "/"));
        for (loc, under) in plan {
            routes.extend(self.location_routes(loc, under.as_deref(), label, &locs));
        }
        if !has_root_prefix {
            // nginx serves files from `root` for paths no location matches.
            let mut t = Table {
                name: format!("{label} (no location)"),
                ..Table::default()
            };
            set_name(&mut t);
            t.notes
                .push("paths no location matches: nginx serves them from the server's root".into());
            if let Some(action) = self.static_action(sctx, &mut t, None) {
                t.keys.push(("path_prefix".into(), Val::s("/")));
                t.keys.push(action);
                self.compress(sctx, &mut t, true);
                self.response_headers(sctx, &mut t, false);
                routes.push(self.finish_route(t));
            }
        }
        routes
    }

    fn never_reached(&mut self, d: &Directive) {
        self.unneeded(d, "never reached: the server-level return answers first");
        if let Some(children) = &d.block {
            for c in children {
                self.never_reached(c);
            }
        }
    }

    fn collect(
        &mut self,
        parent: &Ctx<'a>,
        level: &'a [Directive],
        out: &mut Vec<Loc<'a>>,
        outer: &[String],
    ) {
        for d in level.iter().filter(|d| d.name == "location") {
            self.ok(d);
            let Some(body) = d.block.as_deref() else {
                continue;
            };
            let m = match d.args.as_slice() {
                [p] if p.starts_with('@') => {
                    self.left_tree(d, "named locations are used by try_files and error_page, which are not translated");
                    continue;
                }
                [p] => Match::Prefix {
                    path: p.clone(),
                    stop: false,
                },
                [m, p] if m == "=" => Match::Exact(p.clone()),
                [m, p] if m == "^~" => Match::Prefix {
                    path: p.clone(),
                    stop: true,
                },
                [m, re] if m == "~" => Match::Regex {
                    re: re.clone(),
                    ci: false,
                },
                [m, re] if m == "~*" => Match::Regex {
                    re: re.clone(),
                    ci: true,
                },
                _ => {
                    self.left_tree(d, "a location form sluice does not take");
                    continue;
                }
            };
            if let Match::Prefix { path, .. } | Match::Exact(path) = &m
                && !path.starts_with('/')
            {
                self.left_tree(d, "a location path must start with /");
                continue;
            }
            let mut ctx = parent.child(body);
            self.vars(&mut ctx, body);
            let mut from: Vec<String> = outer.to_vec();
            from.push(self.from(d));
            // Nested locations: flattened, with this one's settings inherited.
            let nested = body.iter().any(|c| c.name == "location");
            if nested {
                let ctx2 = ctx.clone();
                let from2 = from.clone();
                self.collect(&ctx2, body, out, &from2);
            }
            out.push(Loc {
                d,
                m,
                ctx,
                body,
                from,
            });
        }
    }

    /// The route(s) of one location: an extra route before it for `limit_except` and for
    /// exact-path rewrites, then its own.
    fn location_routes(
        &mut self,
        loc: &Loc<'a>,
        under: Option<&str>,
        label: &str,
        all: &[Loc<'a>],
    ) -> Vec<Table> {
        let mut t = Table::default();
        let loc_text = describe(loc.d).trim_end_matches(" { ... }").to_string();
        t.name = match under {
            Some(p) => format!(
                "{label} {} (under {p})",
                loc_text.trim_start_matches("location ")
            ),
            None => format!("{label} {}", loc_text.trim_start_matches("location ")),
        };
        t.from = loc.from.clone();
        // Path matching.
        match &loc.m {
            Match::Exact(p) => {
                t.keys.push(("path".into(), Val::s(p.clone())));
            }
            Match::Prefix { path, stop } => {
                t.keys.push(("path_prefix".into(), Val::s(path.clone())));
                if *stop {
                    t.notes.push("`^~`: no regex location is tried for these paths (routes of regexes come after)".into());
                }
            }
            Match::Regex { re, ci } => {
                let lit = if *ci { None } else { literal_regex(re) };
                match (lit, under) {
                    (Some((p, exact)), under) => {
                        let ok =
                            under.is_none_or(|u| p.starts_with(u) || (!exact && u.starts_with(&p)));
                        if !ok {
                            return Vec::new();
                        }
                        if exact {
                            t.keys.push(("path".into(), Val::s(p)));
                        } else {
                            let longest = match under {
                                Some(u) if u.len() > p.len() => u.to_string(),
                                _ => p,
                            };
                            t.keys.push(("path_prefix".into(), Val::s(longest)));
                        }
                        t.notes
                            .push("a regex that is a literal path: written as a plain path".into());
                    }
                    (None, under) => {
                        if let Some(u) = under {
                            t.keys.push(("path_prefix".into(), Val::s(u.to_string())));
                        }
                        let re = translate_regex(re, *ci);
                        t.keys.push(("path_regex".into(), Val::s(re)));
                    }
                }
                if under.is_some() {
                    t.notes.push("nginx tries regex locations after the longest prefix location matched, unless it is `^~`: this copy of the regex route comes before that prefix's route".into());
                }
            }
        }
        let ctx = &loc.ctx;
        // `internal`: nginx answers 404 to clients.
        if loc.body.iter().any(|d| d.name == "internal") {
            for d in loc.body.iter().filter(|d| d.name == "internal") {
                self.ok(d);
            }
            let used_by_auth = all.iter().any(|l| {
                l.ctx
                    .get("auth_request")
                    .is_some_and(|a| a.args.first().is_some_and(|u| location_matches(&loc.m, u)))
            });
            if !used_by_auth {
                // Its proxy_pass and friends serve subrequests nginx makes (error_page,
                // X-Accel-Redirect): not translated.
                for d in loc.body {
                    if d.name != "internal" {
                        self.unneeded(d, "in an internal location: clients get 404, and the internal redirects that reach it (error_page, try_files, X-Accel-Redirect) are reported where they are written");
                    }
                }
            }
            t.notes.push("`internal`: clients get 404".into());
            t.keys.push((
                "respond".into(),
                Val::Tbl(vec![("status".into(), Val::Int(404))]),
            ));
            return vec![self.finish_route(t)];
        }
        let mut pre = Vec::new();
        self.access(ctx, &mut t);
        self.auth_basic(ctx, &mut t);
        self.auth_request(ctx, &mut t, all);
        self.limit_req(ctx, &mut t);
        // The action.
        let action = self.action(loc, ctx, &mut t, &mut pre);
        let Some((action, is_proxy, is_static)) = action else {
            return pre;
        };
        if is_proxy {
            self.body_size(ctx, &mut t);
        } else if let Some(d) = ctx.get("client_max_body_size") {
            self.unneeded(d, "only proxy routes read request bodies");
        }
        t.keys.push(action);
        if is_proxy {
            self.cache(ctx, &mut t);
        }
        self.compress(ctx, &mut t, is_static);
        self.response_headers(ctx, &mut t, is_proxy);
        for d in loc.body {
            if let Some(why) = unneeded_reason(&d.name)
                && !matches!(d.name.as_str(), "access_log" | "log_format")
            {
                self.unneeded(d, why);
            }
        }
        let mut routes = pre;
        // Routes a rewrite split off get the location's response headers too.
        if let Some(rh) = t
            .keys
            .iter()
            .find(|(k, _)| k == "response_headers")
            .cloned()
        {
            for r in &mut routes {
                if !r.keys.iter().any(|(k, _)| k == "response_headers") {
                    r.keys.push(rh.clone());
                }
            }
        }
        // limit_except: the other methods go through a route of their own first.
        for le in loc.body.iter().filter(|d| d.name == "limit_except") {
            self.ok(le);
            let methods: Vec<String> = le.args.clone();
            let mut lt = t.clone();
            lt.name = format!("{} (methods other than {})", t.name, methods.join(" "));
            lt.from.push(self.from(le));
            lt.notes.push(format!(
                "limit_except {}: other methods must pass these access rules",
                methods.join(" ")
            ));
            lt.keys
                .retain(|(k, _)| !matches!(k.as_str(), "allow" | "deny" | "basic_auth"));
            let pos = lt
                .keys
                .iter()
                .position(|(k, _)| matches!(k.as_str(), "path" | "path_prefix" | "path_regex"))
                .map_or(0, |p| p + 1);
            let pos = pos.max(
                lt.keys
                    .iter()
                    .rposition(|(k, _)| k == "path_regex")
                    .map_or(0, |p| p + 1),
            );
            lt.keys.insert(
                pos,
                (
                    "not".into(),
                    Val::Tbl(vec![("methods".into(), Val::strs(methods.clone()))]),
                ),
            );
            let inner = ctx.child(le.block.as_deref().unwrap_or_default());
            let mut inner_t = Table::default();
            self.access(&inner, &mut inner_t);
            self.auth_basic(&inner, &mut inner_t);
            for c in le.block.as_deref().unwrap_or_default() {
                if !matches!(
                    c.name.as_str(),
                    "allow" | "deny" | "auth_basic" | "auth_basic_user_file"
                ) {
                    self.left(c, "only access rules inside limit_except translate");
                }
            }
            let at = pos + 1;
            for (i, kv) in inner_t.keys.into_iter().enumerate() {
                lt.keys.insert(at + i, kv);
            }
            lt.from.extend(inner_t.from);
            lt.notes.extend(inner_t.notes);
            routes.push(self.finish_route(lt));
        }
        routes.push(self.finish_route(t));
        routes
    }

    fn finish_route(&mut self, t: Table) -> Table {
        t
    }

    /// What the location does: returns the action key, whether it proxies, whether it serves
    /// files.
    fn action(
        &mut self,
        loc: &Loc<'a>,
        ctx: &Ctx<'a>,
        t: &mut Table,
        pre: &mut Vec<Table>,
    ) -> Option<((String, Val), bool, bool)> {
        let body = loc.body;
        if let Some(h) = body.iter().find(|d| {
            matches!(
                d.name.as_str(),
                "fastcgi_pass" | "uwsgi_pass" | "scgi_pass" | "grpc_pass" | "memcached_pass"
            )
        }) {
            // The application behind it is not reachable through sluice: answer 502 rather
            // than fall through to files or another route.
            self.left(h, left_out_reason(&h.name));
            t.from.push(self.from(h));
            t.notes.push(format!("{} is not translated: this route answers 502 until the application is reachable over HTTP (then write a proxy)", h.name));
            return Some((
                (
                    "respond".into(),
                    Val::Tbl(vec![("status".into(), Val::Int(502))]),
                ),
                false,
                false,
            ));
        }
        let mut strip: Option<(String, Option<String>)> = None;
        let before_return = body
            .iter()
            .position(|d| d.name == "return")
            .unwrap_or(body.len());
        for d in body[..before_return].iter().filter(|d| d.name == "rewrite") {
            if is_redirect_rewrite(d) {
                let mut rt = t.clone();
                rt.from.push(self.from(d));
                match self.rewrite_redirect(d, ctx, &mut rt) {
                    Some((Some(exact), a)) => {
                        self.ok(d);
                        rt.name = format!("{} (rewrite {exact})", rt.name);
                        rt.keys.retain(|(k, _)| {
                            !matches!(k.as_str(), "path" | "path_prefix" | "path_regex")
                        });
                        rt.keys.insert(0, ("path".into(), Val::s(exact)));
                        rt.keys.push(a);
                        pre.push(self.finish_route(rt));
                    }
                    Some((None, a)) => {
                        self.ok(d);
                        t.from.push(self.from(d));
                        return Some((a, false, false));
                    }
                    None => {}
                }
            } else {
                match internal_strip(d) {
                    Some(s) => strip = Some(s),
                    None => self.left(d, "only redirects and `rewrite ^/a/(.*)$ /b/$1 break;` in a proxy location translate"),
                }
            }
        }
        if let Some(d) = body.iter().find(|d| d.name == "return") {
            t.from.push(self.from(d));
            let a = self.return_action(d, ctx, t)?;
            self.ok(d);
            for other in body {
                if matches!(
                    other.name.as_str(),
                    "proxy_pass" | "root" | "alias" | "try_files" | "rewrite"
                ) {
                    self.unneeded(other, "never reached: `return` answers first");
                }
            }
            return Some((a, false, false));
        }
        if let Some(d) = body.iter().find(|d| d.name == "proxy_pass") {
            t.from.push(self.from(d));
            let a = self.proxy(d, loc, ctx, t, strip.take())?;
            self.ok(d);
            if let Some(r) = body
                .iter()
                .find(|d| d.name == "rewrite" && !is_redirect_rewrite(d))
            {
                self.ok(r);
                t.from.push(self.from(r));
            }
            return Some((a, true, false));
        }
        if strip.is_some()
            && let Some(r) = body
                .iter()
                .find(|d| d.name == "rewrite" && !is_redirect_rewrite(d))
        {
            self.left(r, "an internal rewrite translates only in a proxy location");
        }
        let a = self.static_action(ctx, t, Some(loc))?;
        Some((a, false, true))
    }

    fn return_action(
        &mut self,
        d: &Directive,
        ctx: &Ctx<'a>,
        t: &mut Table,
    ) -> Option<(String, Val)> {
        let args: Vec<String> = d.args.iter().map(|a| ctx.subst(a)).collect();
        let (code, text) = match args.as_slice() {
            [code] if code.parse::<u16>().is_ok() => (code.parse::<u16>().ok()?, None),
            [code, text] if code.parse::<u16>().is_ok() => {
                (code.parse::<u16>().ok()?, Some(text.clone()))
            }
            [url] => (302, Some(url.clone())),
            _ => {
                self.left(d, "not a `return` form sluice takes");
                return None;
            }
        };
        if matches!(code, 301 | 302 | 303 | 307 | 308) {
            let Some(url) = text else {
                self.left(d, "a redirect without a target");
                return None;
            };
            let to = match redirect_target(&url, self.scheme_of(t)) {
                Ok(to) => to,
                Err(why) => {
                    self.left(d, why);
                    return None;
                }
            };
            return Some((
                "redirect".into(),
                Val::Tbl(vec![
                    ("to".into(), Val::s(to)),
                    ("status".into(), Val::Int(i64::from(code))),
                ]),
            ));
        }
        if code == 444 || !(200..=599).contains(&code) {
            self.left(
                d,
                "444 (close the connection without answering) has no sluice counterpart",
            );
            return None;
        }
        let mut r = vec![("status".into(), Val::Int(i64::from(code)))];
        if let Some(body) = text {
            if body.contains('$') {
                self.left(d, "a response body with variables is not translated");
                return None;
            }
            if code == 204 || code == 304 {
                self.left(d, "no body with 204 or 304");
                return None;
            }
            r.push(("body".into(), Val::s(body)));
            // nginx sends `default_type` with a `return` body.
            let ty = ctx
                .get("default_type")
                .and_then(|d| d.args.first())
                .cloned()
                .unwrap_or_else(|| "text/plain".into());
            if let Some(dt) = ctx.get("default_type") {
                self.ok(dt);
            }
            r.push((
                "headers".into(),
                Val::Tbl(vec![("content-type".into(), Val::s(ty))]),
            ));
        } else if code >= 400 {
            t.notes.push(
                "nginx sends its own HTML error page with this status; sluice an empty body".into(),
            );
        }
        Some(("respond".into(), Val::Tbl(r)))
    }

    /// The scheme `$scheme` stands for in this route: known when the server's listeners are
    /// all TLS or all plain.
    fn scheme_of(&self, _t: &Table) -> Option<&'static str> {
        let tls: Vec<bool> = self.listeners.iter().map(|l| l.tls).collect();
        if tls.iter().all(|t| *t) {
            Some("https")
        } else if tls.iter().all(|t| !*t) {
            Some("http")
        } else {
            None
        }
    }

    /// A redirecting rewrite: `Some(exact path)` when it applies to one path only (a route of
    /// its own), `None` when it applies to every path of its place.
    fn rewrite_redirect(
        &mut self,
        d: &Directive,
        ctx: &Ctx<'a>,
        _t: &mut Table,
    ) -> Option<(Option<String>, (String, Val))> {
        let args: Vec<String> = d.args.iter().map(|a| ctx.subst(a)).collect();
        let (re, repl, flag) = match args.as_slice() {
            [re, repl] => (re.clone(), repl.clone(), ""),
            [re, repl, flag] => (re.clone(), repl.clone(), flag.as_str()),
            _ => {
                self.left(d, "not a rewrite form sluice takes");
                return None;
            }
        };
        let status = if flag == "permanent" { 301 } else { 302 };
        let keep_query = !repl.ends_with('?');
        let repl = repl.trim_end_matches('?').to_string();
        let whole = matches!(
            re.as_str(),
            "^" | "^(.*)$" | "(.*)" | "^(.*)" | "^/(.*)$" | "^/(.*)" | ".*" | "^.*$"
        );
        let captures_all = matches!(re.as_str(), "^(.*)$" | "(.*)" | "^(.*)");
        let captures_rest = matches!(re.as_str(), "^/(.*)$" | "^/(.*)");
        let mut target = repl.clone();
        if captures_all && target.ends_with("$1") {
            target = format!(
                "{}{}",
                &target[..target.len() - 2],
                if keep_query { "$request_uri" } else { "$uri" }
            );
        } else if captures_rest && target.ends_with("/$1") {
            target = format!(
                "{}{}",
                &target[..target.len() - 3],
                if keep_query { "$request_uri" } else { "$uri" }
            );
        } else if keep_query && !target.contains("$request_uri") && !target.contains('?') {
            // nginx appends the query to a rewrite's target unless it ends with `?`.
            target.push_str("$is_args$args");
        }
        let to = match redirect_target(&target, self.scheme_of(_t)) {
            Ok(to) => to,
            Err(why) => {
                self.left(d, why);
                return None;
            }
        };
        let action = (
            "redirect".to_string(),
            Val::Tbl(vec![
                ("to".into(), Val::s(to)),
                ("status".into(), Val::Int(status)),
            ]),
        );
        if whole {
            return Some((None, action));
        }
        match literal_regex(&re) {
            Some((p, true))
                if !repl.contains('$') || target.contains("{uri}") || !target.contains('$') =>
            {
                Some((Some(p), action))
            }
            _ => {
                self.left(
                    d,
                    "a rewrite with captures other than the whole path is not translated",
                );
                None
            }
        }
    }

    fn proxy(
        &mut self,
        d: &Directive,
        loc: &Loc<'a>,
        ctx: &Ctx<'a>,
        t: &mut Table,
        strip: Option<(String, Option<String>)>,
    ) -> Option<(String, Val)> {
        let url = ctx.subst(d.args.first()?);
        if url.contains('$') {
            self.left(d, "a proxy_pass with variables is not translated");
            return None;
        }
        let (scheme, rest) = if let Some(r) = url.strip_prefix("http://") {
            ("http", r)
        } else if let Some(r) = url.strip_prefix("https://") {
            ("https", r)
        } else {
            self.left(d, "only http:// and https:// upstreams translate");
            return None;
        };
        // unix:/path.sock:/uri
        let (authority, uri) = if let Some(sock) = rest.strip_prefix("unix:") {
            match sock.split_once(':') {
                Some((p, u)) => (format!("unix:{p}"), Some(u.to_string())),
                None => (format!("unix:{sock}"), None),
            }
        } else {
            match rest.find('/') {
                Some(i) => (rest[..i].to_string(), Some(rest[i..].to_string())),
                None => (rest.to_string(), None),
            }
        };
        let mut keys: Vec<(String, Val)> = Vec::new();
        // Upstream group.
        let base = match self.upstream_blocks.get(&authority) {
            Some(&b) => {
                if scheme == "https" {
                    self.left(d, "https:// to an upstream block: write the group's `tls` table (not translated)");
                    return None;
                }
                b
            }
            None => {
                let address = if authority.starts_with("unix:") {
                    authority.clone()
                } else if scheme == "https" {
                    format!("https://{authority}")
                } else if authority.contains(':') && !authority.ends_with(']') {
                    authority.clone()
                } else {
                    format!("{authority}:80")
                };
                if let Err(why) = server_address(&address) {
                    self.left(d, why);
                    return None;
                }
                match self.bases.iter().position(|b| b.name == authority) {
                    Some(i) => i,
                    None => {
                        self.bases.push(UpBase {
                            name: authority.clone(),
                            from: vec![format!(
                                "{}  (the address of a proxy_pass)",
                                self.place(&d.place)
                            )],
                            notes: Vec::new(),
                            keys: vec![("servers".into(), Val::strs([address]))],
                        });
                        self.bases.len() - 1
                    }
                }
            }
        };
        let timeouts = self.proxy_timeouts(ctx);
        let group = self.group(base, timeouts);
        keys.push(("upstream".into(), Val::s(group)));
        // The path: proxy_pass with a URI replaces the location's prefix with it.
        match (&uri, &loc.m) {
            (Some(u), Match::Prefix { path, .. }) if strip.is_none() => {
                let l = path.trim_end_matches('/');
                let r = u.trim_end_matches('/');
                if path.ends_with('/') != u.ends_with('/') {
                    t.notes.push(format!("proxy_pass {u} in location {path}: nginx joins the rest of the path without adjusting the slash; sluice strips and replaces whole segments"));
                }
                if !l.is_empty() {
                    keys.push(("strip_prefix".into(), Val::s(l)));
                }
                if !r.is_empty() {
                    keys.push(("replace_prefix".into(), Val::s(r)));
                }
            }
            (Some(u), Match::Exact(p)) if strip.is_none() => {
                // The whole path is replaced by the URI.
                let l = p.trim_end_matches('/');
                if !l.is_empty() && u.trim_end_matches('/') != l {
                    keys.push(("strip_prefix".into(), Val::s(l)));
                    let r = u.trim_end_matches('/');
                    if !r.is_empty() {
                        keys.push(("replace_prefix".into(), Val::s(r)));
                    }
                } else if l.is_empty() && u != "/" {
                    keys.push(("replace_prefix".into(), Val::s(u.trim_end_matches('/'))));
                }
            }
            (Some(u), _) if u != "/" && strip.is_none() => {
                self.left(
                    d,
                    "a proxy_pass URI in a regex location (nginx refuses it too, outside rewrites)",
                );
                return None;
            }
            _ => {}
        }
        if let Some((s, r)) = strip {
            keys.push(("strip_prefix".into(), Val::s(s)));
            if let Some(r) = r {
                keys.push(("replace_prefix".into(), Val::s(r)));
            }
        }
        // Headers.
        let mut set: Vec<(String, Val)> = Vec::new();
        let mut remove: Vec<String> = Vec::new();
        let auth_copies: Vec<String> = t
            .keys
            .iter()
            .find(|(k, _)| k == "forward_auth")
            .and_then(|(_, v)| match v {
                Val::Tbl(e) => e
                    .iter()
                    .find(|(k, _)| k == "copy_headers")
                    .map(|(_, v)| v.clone()),
                _ => None,
            })
            .and_then(|v| match v {
                Val::Arr(a) => Some(
                    a.iter()
                        .filter_map(|x| {
                            if let Val::Str(s) = x {
                                Some(s.clone())
                            } else {
                                None
                            }
                        })
                        .collect(),
                ),
                _ => None,
            })
            .unwrap_or_default();
        let mut host: Option<String> = None;
        for h in ctx.all("proxy_set_header") {
            let [name, value] = h.args.as_slice() else {
                self.left(h, "proxy_set_header takes a name and a value");
                continue;
            };
            let lname = name.to_ascii_lowercase();
            let value = ctx.subst(value);
            let done: Result<(), String> = match (lname.as_str(), value.as_str()) {
                ("host", "$host" | "$http_host") => {
                    host = Some("pass".into());
                    Ok(())
                }
                ("host", "$proxy_host") => {
                    host = Some("upstream".into());
                    Ok(())
                }
                ("host", v) if !v.contains('$') => {
                    host = Some(v.to_string());
                    Ok(())
                }
                ("x-forwarded-for", "$proxy_add_x_forwarded_for" | "$remote_addr") => Ok(()),
                ("x-forwarded-proto", "$scheme") => Ok(()),
                ("x-forwarded-host", "$host" | "$http_host") => Ok(()),
                ("connection", "" | "upgrade" | "$connection_upgrade" | "\"\"") => Ok(()),
                ("upgrade", "$http_upgrade") => Ok(()),
                (n, v) if auth_copies.iter().any(|c| c == n) && v.starts_with('$') => Ok(()),
                (n, "") if !is_managed(n) => {
                    remove.push(n.to_string());
                    Ok(())
                }
                (n, _) if is_managed(n) => Err(format!("sluice manages `{n}` itself")),
                (_, v) if v.contains('$') => Err(format!(
                    "a header value with variables ({v}) is not translated"
                )),
                (n, v) => {
                    set.push((n.to_string(), Val::s(v)));
                    Ok(())
                }
            };
            match done {
                Ok(()) => {
                    self.ok(h);
                    t.from.push(self.from(h));
                }
                Err(why) => self.left(h, why),
            }
        }
        if let Some(h) = host {
            if h != "pass" {
                keys.push(("host".into(), Val::s(h)));
            }
        } else {
            // nginx's default Host is the proxy_pass host ($proxy_host).
            keys.push(("host".into(), Val::s("upstream")));
            t.notes.push("nginx sends the proxy_pass host as Host unless told otherwise: host = \"upstream\"".into());
        }
        let mut rh = Vec::new();
        if !set.is_empty() {
            rh.push(("set".into(), Val::Tbl(set)));
        }
        if !remove.is_empty() {
            rh.push(("remove".into(), Val::strs(remove)));
        }
        if !rh.is_empty() {
            keys.push(("request_headers".into(), Val::Tbl(rh)));
        }
        // proxy_hide_header → response header removal.
        let hides: Vec<&Directive> = ctx.all("proxy_hide_header");
        if !hides.is_empty() {
            let mut names = Vec::new();
            for h in hides {
                if let Some(n) = h.args.first() {
                    self.ok(h);
                    t.from.push(self.from(h));
                    names.push(n.to_ascii_lowercase());
                }
            }
            keys.push((
                "response_headers".into(),
                Val::Tbl(vec![("remove".into(), Val::strs(names))]),
            ));
        }
        for name in [
            "proxy_http_version",
            "proxy_buffering",
            "proxy_buffer_size",
            "proxy_buffers",
            "proxy_busy_buffers_size",
            "proxy_max_temp_file_size",
        ] {
            if let Some(d) = ctx.get(name) {
                if name == "proxy_http_version" && d.args.first().map(String::as_str) == Some("1.0")
                {
                    self.left(d, "sluice speaks HTTP/1.1 to upstreams");
                } else if let Some(why) = unneeded_reason(name) {
                    self.unneeded(d, why);
                }
            }
        }
        Some(("proxy".into(), Val::Tbl(keys)))
    }

    fn proxy_timeouts(&mut self, ctx: &Ctx<'a>) -> Vec<(String, Val)> {
        let mut out = Vec::new();
        let mut add = |key: &str, v: String| {
            if !out.iter().any(|(k, _): &(String, Val)| k == key) {
                out.push((key.to_string(), Val::s(v)));
            }
        };
        for (name, keys) in [
            ("proxy_connect_timeout", &["connect"][..]),
            ("proxy_read_timeout", &["response_header", "idle"][..]),
            ("proxy_send_timeout", &["idle"][..]),
        ] {
            if let Some(d) = ctx.get(name) {
                match d.args.first().and_then(|t| units::time(t)) {
                    Some(t) if t != "0s" => {
                        self.ok(d);
                        for k in keys {
                            add(k, t.clone());
                        }
                    }
                    _ => self.left(d, "not a duration sluice takes"),
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The group name for `base` with these timeouts (a copy of the group when another route
    /// needs other timeouts: they are per location in nginx, per group in sluice).
    fn group(&mut self, base: usize, timeouts: Vec<(String, Val)>) -> String {
        if let Some((name, _, _)) = self
            .groups
            .iter()
            .find(|(_, b, t)| *b == base && *t == timeouts)
        {
            return name.clone();
        }
        let n = self.groups.iter().filter(|(_, b, _)| *b == base).count();
        let name = if n == 0 {
            self.bases[base].name.clone()
        } else {
            format!("{}-{}", self.bases[base].name, n + 1)
        };
        self.groups.push((name.clone(), base, timeouts));
        name
    }

    fn static_action(
        &mut self,
        ctx: &Ctx<'a>,
        t: &mut Table,
        loc: Option<&Loc<'a>>,
    ) -> Option<(String, Val)> {
        let mut keys = Vec::new();
        let alias = loc.and_then(|l| l.body.iter().find(|d| d.name == "alias"));
        if let Some(a) = alias {
            let path = a.args.first()?;
            if path.contains('$') {
                self.left(
                    a,
                    "an alias with variables (regex captures) is not translated",
                );
                return None;
            }
            if !matches!(loc.map(|l| &l.m), Some(Match::Prefix { .. })) {
                self.left(a, "alias translates in prefix locations only");
                return None;
            }
            self.ok(a);
            t.from.push(self.from(a));
            keys.push(("root".into(), Val::s(self.path(path.trim_end_matches('/')))));
            keys.push(("strip_prefix".into(), Val::Bool(true)));
        } else {
            let root = ctx.get("root");
            let path = match root {
                Some(r) => {
                    let p = r.args.first()?;
                    if p.contains('$') {
                        self.left(r, "a root with variables is not translated");
                        return None;
                    }
                    self.ok(r);
                    t.from.push(self.from(r));
                    self.path(p)
                }
                None => {
                    t.notes.push("no root: nginx's default, html under its prefix (/usr/share/nginx/html on Debian)".into());
                    "/usr/share/nginx/html".into()
                }
            };
            keys.push(("root".into(), Val::s(path)));
        }
        if let Some(i) = ctx.get("index") {
            let names: Vec<String> = i
                .args
                .iter()
                .filter(|n| !n.contains('/') && !n.contains('$'))
                .cloned()
                .collect();
            if names.len() == i.args.len() {
                self.ok(i);
                t.from.push(self.from(i));
                keys.push(("index".into(), Val::strs(names)));
            } else {
                self.left(i, "index names with a path or variables are not translated");
            }
        }
        if let Some(l) = loc {
            for d in l.body.iter().filter(|d| d.name == "try_files") {
                let plain = d
                    .args
                    .iter()
                    .all(|a| matches!(a.as_str(), "$uri" | "$uri/" | "=404"));
                if plain {
                    self.ok(d);
                    t.from.push(self.from(d));
                } else {
                    self.left(d, left_out_reason("try_files"));
                }
            }
        }
        if let Some(g) = ctx.get("gzip_static") {
            match g.args.first().map(String::as_str) {
                Some("on") => {
                    self.ok(g);
                    t.from.push(self.from(g));
                    keys.push(("precompressed".into(), Val::strs(["gzip"])));
                }
                Some("off") => self.ok(g),
                _ => self.left(
                    g,
                    "gzip_static always (send .gz to every client) is not translated",
                ),
            }
        }
        if let Some(e) = ctx.get("expires") {
            let v = match e.args.as_slice() {
                [v] if v == "off" => Some(None),
                [v] if v == "epoch" => Some(Some("0s".to_string())),
                [v] if v == "max" => Some(Some("immutable".to_string())),
                [v] if !v.starts_with('-') && !v.starts_with('@') => units::time(v).map(Some),
                _ => None,
            };
            match v {
                Some(Some(v)) => {
                    self.ok(e);
                    t.from.push(self.from(e));
                    if v == "immutable" {
                        t.notes.push("expires max: sluice's `immutable` is a year, with `immutable` (nginx: ten years)".into());
                    }
                    keys.push(("max_age".into(), Val::s(v)));
                }
                Some(None) => self.ok(e),
                None => self.left(e, "only a lifetime, epoch, max or off translates"),
            }
        }
        for d in ["autoindex"] {
            if let Some(a) = ctx.get(d)
                && a.args.first().map(String::as_str) == Some("on")
            {
                self.left(a, left_out_reason(d));
            }
        }
        Some(("static".into(), Val::Tbl(keys)))
    }

    fn access(&mut self, ctx: &Ctx<'a>, t: &mut Table) {
        let rules = ctx.all("access");
        if rules.is_empty() {
            return;
        }
        let mut list: Vec<(bool, String)> = Vec::new();
        for d in &rules {
            let Some(a) = d.args.first() else { continue };
            list.push((d.name == "allow", a.clone()));
        }
        // Rules after the first `all` are never reached.
        if let Some(i) = list.iter().position(|(_, a)| a == "all") {
            list.truncate(i + 1);
        }
        let final_allow = match list.last() {
            Some((allow, a)) if a == "all" => *allow,
            _ => true,
        };
        let ends_all = list.last().is_some_and(|(_, a)| a == "all");
        let body: Vec<(bool, String)> = if ends_all {
            list[..list.len() - 1].to_vec()
        } else {
            list.clone()
        };
        for (_, a) in &body {
            if a.parse::<ipnet::IpNet>().is_err() && a.parse::<std::net::IpAddr>().is_err() {
                for d in &rules {
                    self.left(
                        d,
                        format!("`{a}` is not an address or CIDR block (unix: is not translated)"),
                    );
                }
                return;
            }
        }
        // Runs of the same kind.
        let mut runs: Vec<(bool, Vec<String>)> = Vec::new();
        for (allow, a) in body {
            match runs.last_mut() {
                Some((k, v)) if *k == allow => v.push(a),
                _ => runs.push((allow, vec![a])),
            }
        }
        let mut keys: Vec<(String, Val)> = Vec::new();
        let ok = match (runs.as_slice(), final_allow) {
            ([], true) => true,
            ([], false) => {
                keys.push(("deny".into(), Val::strs(["all"])));
                true
            }
            ([(true, a)], false) => {
                keys.push(("allow".into(), Val::strs(a.clone())));
                true
            }
            ([(true, _)], true) => {
                t.notes.push(
                    "allow rules with no deny: nginx lets every client in, and so does this route"
                        .into(),
                );
                true
            }
            ([(false, d)], true) => {
                keys.push(("deny".into(), Val::strs(d.clone())));
                true
            }
            ([(false, d)], false) => {
                let _ = d;
                keys.push(("deny".into(), Val::strs(["all"])));
                true
            }
            ([(false, d), (true, a)], false) => {
                keys.push(("deny".into(), Val::strs(d.clone())));
                keys.push(("allow".into(), Val::strs(a.clone())));
                true
            }
            ([(false, d), (true, _)], true) => {
                keys.push(("deny".into(), Val::strs(d.clone())));
                true
            }
            ([(true, a), (false, d)], false) => {
                keys.push(("allow".into(), Val::strs(a.clone())));
                keys.push(("deny".into(), Val::strs(d.clone())));
                true
            }
            _ => false,
        };
        if !ok {
            for d in &rules {
                self.left(d, "allow and deny rules that change kind more than sluice's two ordered lists can say (the route is closed to everyone instead)");
            }
            t.keys.push(("deny".into(), Val::strs(["all"])));
            t.notes
                .push("access rules not translated: closed to every client (fail closed)".into());
            return;
        }
        for d in &rules {
            self.ok(d);
            t.from.push(self.from(d));
        }
        t.keys.extend(keys);
    }

    fn auth_basic(&mut self, ctx: &Ctx<'a>, t: &mut Table) {
        let Some(ab) = ctx.get("auth_basic") else {
            if let Some(f) = ctx.get("auth_basic_user_file") {
                self.unneeded(f, "no auth_basic here");
            }
            return;
        };
        let realm = ab.args.first().cloned().unwrap_or_default();
        if realm == "off" {
            self.ok(ab);
            return;
        }
        let Some(file) = ctx.get("auth_basic_user_file") else {
            self.left(ab, "auth_basic without auth_basic_user_file");
            return;
        };
        let Some(path) = file.args.first().map(|p| self.path(p)) else {
            return;
        };
        t.from.push(self.from(ab));
        t.from.push(self.from(file));
        match htpasswd_problem(Path::new(&path)) {
            None => {
                self.ok(ab);
                self.ok(file);
                let realm: String = realm.chars().filter(|c| *c != '"' && *c != '\\').collect();
                t.keys.push((
                    "basic_auth".into(),
                    Val::Tbl(vec![
                        ("realm".into(), Val::s(realm)),
                        ("users".into(), Val::s(path)),
                    ]),
                ));
            }
            Some(why) => {
                self.left(file, format!("{why}; the route is closed to everyone instead (re-hash the passwords with `htpasswd -B` and add basic_auth)"));
                self.left(
                    ab,
                    "its user file cannot be used (see auth_basic_user_file)",
                );
                t.keys.push(("deny".into(), Val::strs(["all"])));
                t.notes.push("basic auth not translated (see the list at the top): closed to every client (fail closed)".into());
            }
        }
    }

    fn auth_request(&mut self, ctx: &Ctx<'a>, t: &mut Table, all: &[Loc<'a>]) {
        let Some(ar) = ctx.get("auth_request") else {
            return;
        };
        let Some(uri) = ar.args.first() else { return };
        if uri == "off" {
            self.ok(ar);
            return;
        }
        let target = all
            .iter()
            .find(|l| matches!(&l.m, Match::Exact(p) if p == uri))
            .or_else(|| {
                all.iter()
                    .filter(|l| location_matches(&l.m, uri))
                    .max_by_key(|l| match &l.m {
                        Match::Prefix { path, .. } => path.len(),
                        _ => 0,
                    })
            });
        let pass = target.and_then(|l| l.body.iter().find(|d| d.name == "proxy_pass"));
        let (Some(target), Some(pass)) = (target, pass) else {
            self.left(ar, "its location has no proxy_pass to an HTTP service; the route is closed to everyone instead");
            t.keys.push(("deny".into(), Val::strs(["all"])));
            return;
        };
        let url = pass.args.first().cloned().unwrap_or_default();
        let rest = url.strip_prefix("http://").unwrap_or(&url);
        let (authority, path) = match rest.find('/') {
            Some(i) => (rest[..i].to_string(), Some(rest[i..].to_string())),
            None => (rest.to_string(), None),
        };
        let base = match self.upstream_blocks.get(&authority) {
            Some(&b) => b,
            None => {
                let address = if authority.contains(':') {
                    authority.clone()
                } else {
                    format!("{authority}:80")
                };
                if url.contains('$')
                    || !url.starts_with("http://")
                    || server_address(&address).is_err()
                {
                    self.left(ar, "its location's proxy_pass is not a plain http:// address; the route is closed to everyone instead");
                    t.keys.push(("deny".into(), Val::strs(["all"])));
                    return;
                }
                match self.bases.iter().position(|b| b.name == authority) {
                    Some(i) => i,
                    None => {
                        self.bases.push(UpBase {
                            name: authority.clone(),
                            from: vec![format!(
                                "{}  (the address of a proxy_pass)",
                                self.place(&pass.place)
                            )],
                            notes: Vec::new(),
                            keys: vec![("servers".into(), Val::strs([address]))],
                        });
                        self.bases.len() - 1
                    }
                }
            }
        };
        let group = self.group(base, Vec::new());
        let sub_uri = match (&path, &target.m) {
            (Some(p), _) if p != "/" => p.clone(),
            _ => uri.clone(),
        };
        let mut fa = vec![
            ("upstream".to_string(), Val::s(group)),
            ("uri".into(), Val::s(sub_uri)),
        ];
        // auth_request_set $v $upstream_http_NAME; proxy_set_header NAME $v; → copy NAME.
        let mut copies = Vec::new();
        for s in ctx.all("auth_request_set") {
            if let [var, val] = s.args.as_slice()
                && let Some(h) = val.strip_prefix("$upstream_http_")
            {
                let hname = h.replace('_', "-");
                let used_same = ctx.all("proxy_set_header").iter().any(|p| {
                    p.args
                        .first()
                        .is_some_and(|n| n.eq_ignore_ascii_case(&hname))
                        && p.args.get(1) == Some(var)
                });
                if used_same {
                    self.ok(s);
                    t.from.push(self.from(s));
                    copies.push(hname);
                    continue;
                }
            }
            self.left(s, "only `auth_request_set $v $upstream_http_NAME;` with `proxy_set_header NAME $v;` translates (copy_headers)");
        }
        if !copies.is_empty() {
            fa.push(("copy_headers".into(), Val::strs(copies)));
        }
        self.ok(ar);
        self.ok(pass);
        t.from.push(self.from(ar));
        t.from.push(self.from(pass));
        for d in target.body {
            if matches!(
                d.name.as_str(),
                "proxy_pass_request_body" | "proxy_set_header" | "internal"
            ) {
                self.unneeded(
                    d,
                    "forward_auth sends a GET without a body, with the client's headers",
                );
            }
        }
        t.notes.push("auth_request: a 401/403 from the service goes to the client as sent (nginx replaces the body with its own)".into());
        t.keys.push(("forward_auth".into(), Val::Tbl(fa)));
    }

    fn limit_req(&mut self, ctx: &Ctx<'a>, t: &mut Table) {
        let all = ctx.all("limit_req");
        for (i, d) in all.iter().enumerate() {
            if i > 0 {
                self.left(
                    d,
                    "sluice takes one rate limit per route; the first is translated",
                );
                continue;
            }
            let mut zone = None;
            let mut burst: u64 = 0;
            let mut nodelay = false;
            for a in &d.args {
                if let Some(z) = a.strip_prefix("zone=") {
                    zone = Some(z.to_string());
                } else if let Some(b) = a.strip_prefix("burst=") {
                    burst = b.parse().unwrap_or(0);
                } else if a == "nodelay" {
                    nodelay = true;
                }
            }
            let Some(z) = zone.and_then(|z| {
                self.zones
                    .get(&z)
                    .map(|z| (z.key.clone(), z.requests, z.per, z.from.clone()))
            }) else {
                self.left(d, "no limit_req_zone of that name that translates");
                continue;
            };
            let (key, requests, per, from) = z;
            self.ok(d);
            for zd in self.all.clone() {
                if zd.name == "limit_req_zone" && self.from(zd) == from {
                    self.ok(zd);
                }
            }
            t.from.push(from);
            t.from.push(self.from(d));
            // nginx lets burst + 1 requests through at once; sluice's burst is the bucket.
            let mut rl = vec![
                ("requests".into(), Val::Int(requests as i64)),
                ("per".into(), Val::s(per)),
                ("burst".into(), Val::Int((burst + 1) as i64)),
            ];
            if key != "client_ip" {
                rl.push(("key".into(), Val::s(key)));
            }
            if !nodelay && burst > 0 {
                t.notes.push("limit_req without nodelay: nginx delays the burst; sluice passes or refuses (429) at once".into());
            }
            let status = ctx.get("limit_req_status");
            match status {
                Some(s) if s.args.first().map(String::as_str) == Some("429") => self.ok(s),
                Some(s) => self.left(s, "sluice refuses with 429 Too Many Requests"),
                None => t
                    .notes
                    .push("refused requests get 429 (nginx's default is 503)".into()),
            }
            t.keys.push(("rate_limit".into(), Val::Tbl(rl)));
        }
    }

    fn body_size(&mut self, ctx: &Ctx<'a>, t: &mut Table) {
        match ctx.get("client_max_body_size") {
            Some(d) => match d.args.first().and_then(|s| units::size(s)) {
                Some(s) => {
                    self.ok(d);
                    t.from.push(self.from(d));
                    t.keys.push((
                        "max_body_size".into(),
                        match s {
                            SizeOut::Bytes(b) => Val::Int(b as i64),
                            SizeOut::Text(t) => Val::s(t),
                        },
                    ));
                }
                None => self.left(d, "not a size"),
            },
            None => {
                t.keys.push(("max_body_size".into(), Val::s("1MiB")));
                t.notes.push(
                    "max_body_size 1MiB: nginx's default client_max_body_size (sluice's is 10MiB)"
                        .into(),
                );
            }
        }
    }

    fn cache(&mut self, ctx: &Ctx<'a>, t: &mut Table) {
        let Some(pc) = ctx.get("proxy_cache") else {
            return;
        };
        let Some(zone) = pc.args.first() else { return };
        if zone == "off" {
            self.ok(pc);
            return;
        }
        if !self.out.caches.iter().any(|c| c.name == *zone) {
            self.left(pc, "no proxy_cache_path with this keys_zone");
            return;
        }
        self.ok(pc);
        t.from.push(self.from(pc));
        let mut c = vec![("zone".to_string(), Val::s(zone.clone()))];
        if let Some(k) = ctx.get("proxy_cache_key") {
            match k.args.first().map(|k| cache_key(&ctx.subst(k))) {
                Some(Ok(parts)) => {
                    self.ok(k);
                    t.from.push(self.from(k));
                    c.push(("key".into(), Val::strs(parts)));
                }
                Some(Err(why)) => self.left(k, why),
                None => {}
            }
        }
        let valid = ctx.all("proxy_cache_valid");
        if !valid.is_empty() {
            let mut v: Vec<(String, Val)> = Vec::new();
            for d in valid {
                let Some((time, codes)) = d.args.split_last() else {
                    continue;
                };
                let Some(time) = units::time(time) else {
                    self.left(d, "not a duration");
                    continue;
                };
                let codes: Vec<String> = if codes.is_empty() {
                    vec!["200".into(), "301".into(), "302".into()]
                } else {
                    codes.to_vec()
                };
                if codes
                    .iter()
                    .any(|c| c != "any" && c.parse::<u16>().is_err())
                {
                    self.left(d, "a status that is not a number or any");
                    continue;
                }
                self.ok(d);
                t.from.push(self.from(d));
                for code in codes {
                    v.retain(|(k, _)| *k != code);
                    v.push((code, Val::s(time.clone())));
                }
            }
            if !v.is_empty() {
                c.push(("valid".into(), Val::Tbl(v)));
            }
        }
        for (name, key) in [
            ("proxy_cache_bypass", "bypass"),
            ("proxy_no_cache", "no_store"),
        ] {
            let ds = ctx.all(name);
            let mut parts = Vec::new();
            for d in &ds {
                let mut ok = true;
                let mut mine = Vec::new();
                for a in &d.args {
                    if let Some(c) = a.strip_prefix("$cookie_") {
                        mine.push(format!("cookie:{c}"));
                    } else if let Some(h) = a.strip_prefix("$http_") {
                        mine.push(format!("header:{}", h.replace('_', "-")));
                    } else {
                        ok = false;
                    }
                }
                if ok {
                    self.ok(d);
                    t.from.push(self.from(d));
                    parts.extend(mine);
                } else {
                    self.left(d, "only $cookie_NAME and $http_NAME conditions translate");
                }
            }
            if !parts.is_empty() {
                c.push((key.into(), Val::strs(parts)));
            }
        }
        if let Some(d) = ctx.get("proxy_cache_min_uses") {
            match d.args.first().and_then(|n| n.parse::<i64>().ok()) {
                Some(n) if n >= 1 => {
                    self.ok(d);
                    c.push(("min_uses".into(), Val::Int(n)));
                }
                _ => self.left(d, "not a number"),
            }
        }
        if let Some(d) = ctx.get("proxy_cache_methods") {
            let mut m: Vec<String> = d.args.iter().map(|s| s.to_ascii_uppercase()).collect();
            m.retain(|x| x != "HEAD");
            if m == ["GET"] {
                self.ok(d);
            } else {
                self.left(d, "sluice caches GET (and HEAD) only");
            }
        }
        // Collapsing: nginx's proxy_cache_lock is off by default.
        let lock = ctx.get("proxy_cache_lock");
        let lock_on = lock.is_some_and(|d| d.args.first().map(String::as_str) == Some("on"));
        if let Some(d) = lock {
            self.ok(d);
            t.from.push(self.from(d));
        }
        if lock_on {
            let to = ctx.get("proxy_cache_lock_timeout");
            let t5 = match to.and_then(|d| d.args.first()).and_then(|x| units::time(x)) {
                Some(x) => {
                    if let Some(d) = to {
                        self.ok(d);
                    }
                    x
                }
                None => "5s".into(),
            };
            c.push(("lock_timeout".into(), Val::s(t5)));
        } else {
            c.push(("lock_timeout".into(), Val::s("0s")));
            t.notes.push("lock_timeout 0s: nginx's proxy_cache_lock is off by default, so every miss goes upstream (remove the line to collapse misses)".into());
        }
        if let Some(d) = ctx.get("proxy_cache_lock_age") {
            self.unneeded(d, "the lock lasts until the response head arrives");
        }
        // use_stale is per zone in sluice.
        if let Some(d) = ctx.get("proxy_cache_use_stale") {
            let mut words = Vec::new();
            let mut ok = true;
            for a in &d.args {
                match a.as_str() {
                    "error" | "timeout" | "http_500" | "http_502" | "http_503" | "http_504"
                    | "updating" => words.push(a.clone()),
                    "off" => {}
                    _ => ok = false,
                }
            }
            let line = format!("{}  {}", self.place(&d.place), describe(d));
            if let Some(cache) = self.out.caches.iter_mut().find(|c| c.name == *zone) {
                match cache.keys.iter().find(|(k, _)| k == "use_stale") {
                    Some((_, existing)) if *existing != Val::strs(words.clone()) => ok = false,
                    Some(_) => {}
                    None => {
                        cache.keys.push(("use_stale".into(), Val::strs(words)));
                        cache.from.push(line);
                    }
                }
            }
            if ok {
                self.ok(d);
            } else {
                self.left(d, "http_403/http_404/http_429/invalid_header, or another use_stale for the same zone (it is a zone setting in sluice)");
            }
        }
        // add_header X-Cache-Status $upstream_cache_status → the status header.
        for a in ctx.all("add_header") {
            if a.args.get(1).map(String::as_str) == Some("$upstream_cache_status")
                && let Some(n) = a.args.first()
            {
                self.ok(a);
                t.from.push(self.from(a));
                c.push(("status_header".into(), Val::s(n.to_ascii_lowercase())));
            }
        }
        if let Some(d) = ctx.get("proxy_cache_revalidate")
            && d.args.first().map(String::as_str) == Some("on")
        {
            self.unneeded(
                d,
                "sluice revalidates stale entries with their validators by itself",
            );
        }
        if !c.iter().any(|(k, _)| k == "status_header") {
            c.push(("status_header".into(), Val::Bool(false)));
            t.notes
                .push("status_header false: nginx adds no X-Cache-Status unless told to".into());
        }
        t.keys.push(("cache".into(), Val::Tbl(c)));
    }

    fn compress(&mut self, ctx: &Ctx<'a>, t: &mut Table, _is_static: bool) {
        let Some(g) = ctx.get("gzip") else { return };
        if g.args.first().map(String::as_str) != Some("on") {
            self.ok(g);
            return;
        }
        self.ok(g);
        t.from.push(self.from(g));
        let mut c = vec![("algorithms".to_string(), Val::strs(["gzip"]))];
        let level = match ctx.get("gzip_comp_level") {
            Some(d) => match d
                .args
                .first()
                .and_then(|l| l.parse::<i64>().ok())
                .filter(|l| (1..=9).contains(l))
            {
                Some(l) => {
                    self.ok(d);
                    t.from.push(self.from(d));
                    l
                }
                None => {
                    self.left(d, "not a level 1 to 9");
                    1
                }
            },
            None => 1,
        };
        c.push((
            "levels".into(),
            Val::Tbl(vec![("gzip".into(), Val::Int(level))]),
        ));
        let min = match ctx.get("gzip_min_length") {
            Some(d) => match d.args.first().and_then(|s| units::size(s)) {
                Some(SizeOut::Bytes(b)) => {
                    self.ok(d);
                    t.from.push(self.from(d));
                    Val::Int(b as i64)
                }
                Some(SizeOut::Text(s)) => {
                    self.ok(d);
                    t.from.push(self.from(d));
                    Val::s(s)
                }
                None => {
                    self.left(d, "not a size");
                    Val::Int(20)
                }
            },
            None => Val::Int(20),
        };
        c.push(("min_length".into(), min));
        // nginx compresses text/html always, plus gzip_types (default text/html alone).
        let mut types = vec!["text/html".to_string()];
        let mut star = false;
        for d in ctx.all("gzip_types") {
            self.ok(d);
            t.from.push(self.from(d));
            for ty in &d.args {
                if ty == "*" {
                    star = true;
                } else if !types.contains(&ty.to_ascii_lowercase()) {
                    types.push(ty.to_ascii_lowercase());
                }
            }
        }
        if star {
            t.notes.push("gzip_types *: sluice's built-in list of compressible types is used (it refuses */*)".into());
        } else {
            c.push(("types".into(), Val::strs(types)));
        }
        if let Some(p) = ctx.get("gzip_proxied") {
            self.ok(p);
            if p.args.first().map(String::as_str) != Some("any") {
                t.notes.push("gzip_proxied: sluice compresses responses to requests that came through another proxy too".into());
            }
        } else {
            t.notes.push("nginx does not compress for requests with a Via header (gzip_proxied off); sluice does".into());
        }
        for name in ["gzip_vary", "gzip_http_version", "gzip_buffers"] {
            if let Some(d) = ctx.get(name) {
                self.unneeded(d, unneeded_reason(name).unwrap_or_default());
            }
        }
        if let Some(d) = ctx.get("gzip_disable") {
            if d.args.iter().all(|a| a == "msie6") {
                self.unneeded(d, "for Internet Explorer 6");
            } else {
                self.left(d, "sluice does not choose compression by User-Agent");
            }
        }
        t.notes.push("nginx's gzip only: add \"zstd\" and \"br\" to algorithms for the codings modern clients prefer".into());
        t.keys.push(("compress".into(), Val::Tbl(c)));
    }

    fn response_headers(&mut self, ctx: &Ctx<'a>, t: &mut Table, is_proxy: bool) {
        let _ = is_proxy;
        let mut add: Vec<(String, Val)> = Vec::new();
        let mut always = None;
        let mut from = Vec::new();
        for d in ctx.all("add_header") {
            match d.args.as_slice() {
                [_, v] | [_, v, _] if v == "$upstream_cache_status" => {
                    // Translated by the cache (or meaningless without one).
                    if !t.keys.iter().any(|(k, _)| k == "cache") {
                        self.unneeded(d, "no cache on this route");
                    }
                }
                [n, v, rest @ ..] if !v.contains('$') && rest.iter().all(|r| r == "always") => {
                    let lname = n.to_ascii_lowercase();
                    if is_managed(&lname) {
                        self.left(d, format!("sluice manages `{lname}` itself"));
                        continue;
                    }
                    if add.iter().any(|(k, _)| *k == lname) {
                        // One value per name in a TOML table: a second one is left out.
                        self.left(d, "a second add_header of the same name is not translated");
                        continue;
                    }
                    let a = !rest.is_empty();
                    match always {
                        None => always = Some(a),
                        Some(x) if x != a => {
                            self.left(d, "add_header with and without `always` on one route: sluice's `always` is per route");
                            continue;
                        }
                        _ => {}
                    }
                    self.ok(d);
                    from.push(self.from(d));
                    add.push((lname, Val::s(v.clone())));
                }
                _ => self.left(d, "a header value with variables is not translated"),
            }
        }
        if add.is_empty() {
            return;
        }
        t.from.extend(from);
        t.notes.push("add_header: nginx inherits a level's add_header only when the level has none of its own; this route has the ones nginx applies to it".into());
        let mut rh = vec![("add".to_string(), Val::Tbl(add))];
        if always == Some(true) {
            rh.push(("always".into(), Val::Bool(true)));
        }
        t.keys.push(("response_headers".into(), Val::Tbl(rh)));
    }

    fn finish(mut self) -> Output {
        // `listen 80` + `listen [::]:80`: nginx binds the IPv6 socket with ipv6only=on; sluice's
        // `[::]:80` is dual-stack (Linux's default, net.ipv6.bindv6only=0) and serves IPv4 too,
        // so a second socket on 0.0.0.0:80 would collide: one listener, `[::]:80`.
        let mut renamed: Vec<(String, String)> = Vec::new();
        let mut i = 0;
        while i < self.listeners.len() {
            let v4 = self.listeners[i].address.clone();
            if let Some(port) = v4.strip_prefix("0.0.0.0:")
                && let Some(j) = self
                    .listeners
                    .iter()
                    .position(|l| l.address == format!("[::]:{port}"))
                && self.listeners[j].tls == self.listeners[i].tls
            {
                let gone = self.listeners.remove(i);
                let j = if j > i { j - 1 } else { j };
                let keep = &mut self.listeners[j];
                keep.h2 |= gone.h2;
                keep.h3 |= gone.h3;
                keep.from.extend(gone.from);
                keep.from.push(format!(
                    "(0.0.0.0:{port} and [::]:{port} in nginx: one dual-stack [::]:{port} here, which takes IPv4 too where net.ipv6.bindv6only is 0, Linux's default)"
                ));
                for c in gone.certs {
                    if !keep.certs.iter().any(|k| k.1 == c.1) {
                        keep.certs.push(c);
                    }
                }
                renamed.push((gone.name, keep.name.clone()));
                continue;
            }
            i += 1;
        }
        for t in &mut self.out.routes {
            for (k, v) in &mut t.keys {
                if k == "listeners"
                    && let Val::Arr(items) = v
                {
                    let mut names: Vec<Val> = Vec::new();
                    for item in items.iter() {
                        let item = match item {
                            Val::Str(n) => Val::Str(
                                renamed
                                    .iter()
                                    .find(|(from, _)| from == n)
                                    .map_or(n.clone(), |(_, to)| to.clone()),
                            ),
                            other => other.clone(),
                        };
                        if !names.contains(&item) {
                            names.push(item);
                        }
                    }
                    *items = names;
                }
            }
        }
        // Route names, unique (logs and metrics use them).
        for t in &mut self.out.routes {
            let n = self.route_names.entry(t.name.clone()).or_insert(0);
            *n += 1;
            if *n > 1 {
                t.name = format!("{} #{}", t.name, n);
            }
            t.keys.retain(|(k, _)| k != "name");
            t.keys.insert(0, ("name".into(), Val::s(t.name.clone())));
        }
        // Listeners.
        for l in &self.listeners {
            let mut keys = vec![("address".to_string(), Val::s(l.address.clone()))];
            let mut protocols = vec!["http/1.1"];
            if l.h2 {
                protocols.push("h2");
            }
            if l.h3 && l.tls {
                protocols.push("h3");
            }
            keys.push(("protocols".into(), Val::strs(protocols)));
            if l.proxy_protocol {
                keys.push(("proxy_protocol".into(), Val::Bool(true)));
            }
            keys.extend(l.extra.clone());
            let mut notes = Vec::new();
            if !l.h2 {
                notes.push(
                    "no http2 in nginx: HTTP/1.1 only (add \"h2\" to protocols for HTTP/2)".into(),
                );
            }
            if l.tls {
                match l.certs.split_first() {
                    Some(((_, cert, key), rest)) => {
                        let mut tls = vec![
                            ("cert".to_string(), Val::s(cert.clone())),
                            ("key".into(), Val::s(key.clone())),
                        ];
                        let sni: Vec<Val> = rest
                            .iter()
                            .filter(|(hosts, _, _)| !hosts.is_empty())
                            .map(|(hosts, c, k)| {
                                Val::Tbl(vec![
                                    ("hosts".into(), Val::strs(hosts.clone())),
                                    ("cert".into(), Val::s(c.clone())),
                                    ("key".into(), Val::s(k.clone())),
                                ])
                            })
                            .collect();
                        if !sni.is_empty() {
                            tls.push(("sni".into(), Val::Arr(sni)));
                        }
                        keys.push(("tls".into(), Val::Tbl(tls)));
                    }
                    None => {
                        notes.push("ssl without a certificate: a self-signed one for localhost (set tls.cert and tls.key)".into());
                        keys.push(("tls".into(), Val::s("self-signed")));
                    }
                }
            }
            self.out.listeners.push(Table {
                name: l.name.clone(),
                from: l.from.clone(),
                notes,
                keys,
            });
        }
        // Upstream groups, as the routes use them.
        for (name, base, timeouts) in &self.groups {
            let b = &self.bases[*base];
            let mut keys = b.keys.clone();
            if !timeouts.is_empty() {
                keys.push(("timeouts".into(), Val::Tbl(timeouts.clone())));
            }
            let mut notes = b.notes.clone();
            if *name != b.name {
                notes.push(format!("a copy of {} with the timeouts of the routes that use it (per location in nginx, per group in sluice)", b.name));
            }
            self.out.upstreams.push(Table {
                name: name.clone(),
                from: b.from.clone(),
                notes,
                keys,
            });
        }
        for b in &self.bases {
            if !self
                .groups
                .iter()
                .any(|(_, bi, _)| self.bases[*bi].name == b.name)
            {
                self.out.differences.push(format!("upstream {} is not used by any translated proxy_pass and is left out of the output", b.name));
            }
        }
        // Statuses.
        for d in self.all.clone() {
            let s = self.status.get(d.id).cloned().unwrap_or(Status::Unseen);
            match s {
                Status::Translated => {}
                Status::Unneeded(why) => self.out.unneeded.push(Unneeded {
                    place: d.place.clone(),
                    directive: describe(d),
                    why,
                }),
                Status::LeftOut(why) => self.out.left_out.push(LeftOut {
                    place: d.place.clone(),
                    directive: describe(d),
                    why,
                }),
                Status::Unseen => {
                    let why = unneeded_reason(&d.name);
                    match why {
                        Some(why) if !matches!(d.name.as_str(), "access_log" | "log_format") => {
                            self.out.unneeded.push(Unneeded {
                                place: d.place.clone(),
                                directive: describe(d),
                                why: why.into(),
                            })
                        }
                        _ => self.out.left_out.push(LeftOut {
                            place: d.place.clone(),
                            directive: describe(d),
                            why: if d.name == "if" || d.name == "map" {
                                left_out_reason(&d.name)
                            } else {
                                self.unseen_reason(d)
                            },
                        }),
                    }
                }
            }
        }
        self.out
    }

    fn unseen_reason(&self, d: &Directive) -> String {
        // Inside a block that is left out, or not used where it stands.
        let known_used_elsewhere = [
            "proxy_set_header",
            "add_header",
            "gzip",
            "gzip_comp_level",
            "gzip_types",
            "gzip_min_length",
            "gzip_proxied",
            "client_max_body_size",
            "proxy_cache",
            "proxy_cache_valid",
            "proxy_cache_key",
            "root",
            "index",
            "auth_basic",
            "auth_basic_user_file",
            "allow",
            "deny",
            "limit_req",
            "proxy_connect_timeout",
            "proxy_read_timeout",
            "proxy_send_timeout",
            "ssl_certificate",
            "ssl_certificate_key",
            "expires",
            "gzip_static",
            "auth_request",
            "proxy_hide_header",
            "keepalive_timeout",
            "http2",
        ];
        if known_used_elsewhere.contains(&d.name.as_str()) {
            "no translated route uses it here".into()
        } else {
            left_out_reason(&d.name)
        }
    }
}

fn set_name(t: &mut Table) {
    let _ = t;
}

fn insert_after_name(keys: &mut Vec<(String, Val)>, key: &str, v: Val) {
    let pos = keys
        .iter()
        .position(|(k, _)| k == "name")
        .map_or(0, |p| p + 1);
    let pos = keys
        .iter()
        .rposition(|(k, _)| k == "host" || k == "listeners")
        .map_or(pos, |p| p + 1);
    keys.insert(pos, (key.to_string(), v));
}

/// Request headers sluice manages (refused in header edits).
fn is_managed(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "content-length"
            | "host"
    )
}

enum HostPat {
    CatchAll,
    Hosts(Vec<String>),
    No(String),
}

fn host_pattern(n: &str) -> HostPat {
    if n == "_" || n.is_empty() || n == "\"\"" {
        return HostPat::CatchAll;
    }
    if n.starts_with('~') {
        return HostPat::No(format!("regex server name `{n}` is not translated"));
    }
    let n = n.to_ascii_lowercase();
    if let Some(base) = n.strip_prefix('.') {
        return HostPat::Hosts(vec![base.to_string(), format!("*.{base}")]);
    }
    if n.ends_with(".*") || (n.contains('*') && !n.starts_with("*.")) {
        return HostPat::No(format!(
            "server name `{n}`: only a leading `*.` wildcard translates"
        ));
    }
    if n.contains('$') {
        return HostPat::No(format!("server name `{n}` with a variable"));
    }
    HostPat::Hosts(vec![n])
}

/// A `listen` address as sluice writes it.
fn listen_address(a: &str) -> Result<String, String> {
    if a.starts_with("unix:") {
        return Err("unix-socket listeners are not translated".into());
    }
    if a.chars().all(|c| c.is_ascii_digit()) {
        return Ok(format!("0.0.0.0:{a}"));
    }
    if a.starts_with('[') {
        return match a.rfind("]:") {
            Some(_) => Ok(a.to_string()),
            None => Ok(format!("{a}:80")),
        };
    }
    let (host, port) = match a.rsplit_once(':') {
        Some((h, p)) => (h, p),
        None => (a, "80"),
    };
    if port.parse::<u16>().is_err() {
        return Err(format!("`{a}`: not a port"));
    }
    let host = match host {
        "*" => "0.0.0.0",
        "localhost" => "127.0.0.1",
        h => h,
    };
    if host.parse::<std::net::IpAddr>().is_err() {
        return Err(format!(
            "`{a}`: listen on an IP address (sluice does not resolve names)"
        ));
    }
    Ok(format!("{host}:{port}"))
}

/// An upstream `server` address as sluice writes it.
fn server_address(a: &str) -> Result<String, String> {
    if let Some(p) = a.strip_prefix("unix:") {
        if !p.starts_with('/') {
            return Err("a unix socket path must be absolute".into());
        }
        return Ok(a.to_string());
    }
    if a.starts_with("https://") {
        return Ok(a.to_string());
    }
    if a.contains('$') || a.contains('/') {
        return Err(format!("`{a}` is not a host:port"));
    }
    if a.starts_with('[') {
        return Ok(if a.contains("]:") {
            a.to_string()
        } else {
            format!("{a}:80")
        });
    }
    Ok(if a.contains(':') {
        a.to_string()
    } else {
        format!("{a}:80")
    })
}

fn hash_key(k: &str) -> Option<String> {
    match k {
        "$remote_addr" | "$binary_remote_addr" => Some("client_ip".into()),
        "$request_uri" => Some("uri".into()),
        _ => {
            if let Some(h) = k.strip_prefix("$http_") {
                Some(format!("header:{}", h.replace('_', "-")))
            } else {
                k.strip_prefix("$cookie_").map(|c| format!("cookie:{c}"))
            }
        }
    }
}

/// `$scheme$proxy_host$request_uri` → sluice's key parts.
fn cache_key(k: &str) -> Result<Vec<String>, String> {
    let mut parts: Vec<String> = Vec::new();
    let mut rest = k;
    let push = |p: &str, parts: &mut Vec<String>| {
        if !parts.iter().any(|x| x == p) {
            parts.push(p.to_string());
        }
    };
    while !rest.is_empty() {
        let Some(i) = rest.find('$') else { break };
        rest = &rest[i + 1..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let var = &rest[..end];
        rest = &rest[end..];
        match var {
            "scheme" => push("scheme", &mut parts),
            "host" | "proxy_host" | "http_host" | "server_name" => push("host", &mut parts),
            "request_uri" => {
                push("path", &mut parts);
                push("query", &mut parts);
            }
            "uri" | "document_uri" => push("path", &mut parts),
            "args" | "query_string" => push("query", &mut parts),
            "is_args" => {}
            "request_method" => push("method", &mut parts),
            v if v.starts_with("cookie_") => push(&format!("cookie:{}", &v[7..]), &mut parts),
            v if v.starts_with("http_") => {
                push(&format!("header:{}", v[5..].replace('_', "-")), &mut parts)
            }
            v => return Err(format!("cache key variable ${v} is not translated")),
        }
    }
    if parts.is_empty() {
        return Err("a cache key without variables".into());
    }
    Ok(parts)
}

/// `^/literal/` → (path, exact?) when the regex is a plain path.
fn literal_regex(re: &str) -> Option<(String, bool)> {
    let body = re.strip_prefix('^')?;
    let (body, exact) = match body.strip_suffix('$') {
        Some(b) => (b, true),
        None => (body, false),
    };
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                c @ ('.' | '/' | '-') => out.push(c),
                _ => return None,
            },
            c if c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '~') => out.push(c),
            _ => return None,
        }
    }
    if !out.starts_with('/') {
        return None;
    }
    Some((out, exact))
}

/// PCRE → Rust regex: the forms people write are the same; `(?<name>` is taken by both.
fn translate_regex(re: &str, ci: bool) -> String {
    if ci {
        format!("(?i){re}")
    } else {
        re.to_string()
    }
}

fn location_matches(m: &Match, uri: &str) -> bool {
    match m {
        Match::Exact(p) => p == uri,
        Match::Prefix { path, .. } => uri.starts_with(path.as_str()),
        Match::Regex { .. } => false,
    }
}

fn is_redirect_rewrite(d: &Directive) -> bool {
    matches!(
        d.args.get(2).map(String::as_str),
        Some("permanent" | "redirect")
    ) || d.args.get(1).is_some_and(|r| {
        r.starts_with("http://") || r.starts_with("https://") || r.starts_with("$scheme://")
    })
}

/// `rewrite ^/api/(.*)$ /$1 break;` → strip `/api` (and put `/x` in its place for `/x/$1`).
fn internal_strip(d: &Directive) -> Option<(String, Option<String>)> {
    let [re, repl, flag] = d.args.as_slice() else {
        return None;
    };
    if flag != "break" && flag != "last" {
        return None;
    }
    let inner = re
        .strip_prefix('^')?
        .strip_suffix("(.*)$")
        .or_else(|| re.strip_prefix('^')?.strip_suffix("(.*)"))?;
    let (lit, _) = literal_regex(&format!("^{inner}"))?;
    let from = lit.strip_suffix('/')?.to_string();
    let to = repl.strip_suffix("$1")?;
    let to = to.strip_suffix('/')?;
    if from.is_empty() || to.contains('$') {
        return None;
    }
    Some((
        from,
        if to.is_empty() {
            None
        } else {
            Some(to.to_string())
        },
    ))
}

/// A redirect target in sluice's placeholders: `$request_uri` → `{uri}`, `$uri` → `{path}`,
/// `$host` → `{host}`, `$scheme` → the listeners' scheme when they agree.
fn redirect_target(url: &str, scheme: Option<&str>) -> Result<String, String> {
    let mut out = url.to_string();
    if out.contains("$scheme") {
        match scheme {
            Some(s) => out = out.replace("$scheme", s),
            None => {
                return Err(
                    "$scheme in a redirect on a server with both TLS and plain listeners".into(),
                );
            }
        }
    }
    out = out.replace("$is_args$args", "{query}");
    for (var, to) in [
        ("$request_uri", "{uri}"),
        ("$uri", "{path}"),
        ("$document_uri", "{path}"),
        ("$host", "{host}"),
        ("$http_host", "{host}"),
        ("$server_name", "{host}"),
    ] {
        out = replace_var(&out, &var[1..], to);
    }
    if out.contains("{query}") {
        // {path}{query} is {uri}.
        if out.ends_with("{path}{query}") {
            out = out.replace("{path}{query}", "{uri}");
        } else {
            return Err(
                "the query appended to a target that is not the request path is not translated"
                    .into(),
            );
        }
    }
    if out.contains('$') {
        return Err(format!(
            "a redirect target with variables sluice does not have ({url})"
        ));
    }
    Ok(out)
}

/// Why sluice cannot use an htpasswd file, if it cannot: a missing file, or a hash that is
/// not bcrypt or argon2 (nginx also takes crypt(3), MD5-apr1, {SHA} and {PLAIN}; sluice
/// refuses them as too weak).
fn htpasswd_problem(path: &Path) -> Option<String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return Some(format!("cannot read {}: {e}", path.display())),
    };
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((_, hash)) = line.split_once(':') else {
            return Some(format!(
                "line {} of {} is not name:hash",
                i + 1,
                path.display()
            ));
        };
        let hash = hash.split(':').next().unwrap_or(hash);
        let ok = hash.starts_with("$2a$")
            || hash.starts_with("$2b$")
            || hash.starts_with("$2y$")
            || hash.starts_with("$argon2");
        if !ok {
            let kind = if hash.starts_with("$apr1$") {
                "an MD5-apr1 hash"
            } else if hash.starts_with("{SHA}") {
                "a SHA-1 hash"
            } else if hash.starts_with("{PLAIN}") {
                "a plain-text password"
            } else if hash.starts_with("$1$") || hash.starts_with("$5$") || hash.starts_with("$6$")
            {
                "a crypt(3) MD5/SHA-crypt hash"
            } else {
                "a crypt(3) DES hash or plain text"
            };
            return Some(format!(
                "line {} of {} holds {kind}, which sluice does not verify (bcrypt and argon2 only)",
                i + 1,
                path.display()
            ));
        }
    }
    None
}

/// A comment block listing what was left out, what needed nothing, and the differences.
pub fn summary(out: &Output, place: impl Fn(&Place) -> String) -> String {
    let mut s = String::new();
    if out.left_out.is_empty() {
        s.push_str("Every directive was translated or needs no counterpart in sluice.\n");
    } else {
        let _ = writeln!(
            s,
            "NOT TRANSLATED ({}): nginx does these, this file does not.",
            out.left_out.len()
        );
        for l in &out.left_out {
            let _ = writeln!(s, "  {}  {}\n      {}", place(&l.place), l.directive, l.why);
        }
    }
    if !out.unneeded.is_empty() {
        s.push_str("\nNo counterpart needed:\n");
        for u in &out.unneeded {
            let _ = writeln!(s, "  {}  {}: {}", place(&u.place), u.directive, u.why);
        }
    }
    if !out.differences.is_empty() {
        s.push('\n');
        for d in &out.differences {
            let _ = writeln!(s, "{d}");
        }
    }
    s
}
