//! The corpus (tests/corpus/, its READMEs say where each file comes from): Debian's packaged
//! nginx configuration, the field reports' setups, and one small configuration per directive
//! family. Each imports, the output passes sluice's own validation (what `sluice check`
//! runs), the translation is the one docs/import.md describes, and every directive left out is
//! reported with its file and line.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use sluice_import::{Imported, Options, import};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(rel)
}

fn run(rel: &str, map_etc_nginx: bool) -> Imported {
    let out = tempfile::tempdir().unwrap();
    let mut options = Options {
        output: Some(out.path().join("sluice.toml")),
        ..Options::default()
    };
    if map_etc_nginx {
        options.map = vec![(PathBuf::from("/etc/nginx"), corpus("debian"))];
    }
    let imported = import(&corpus(rel), &options).unwrap_or_else(|e| panic!("{rel}: {e}"));
    if let Err(why) = &imported.check {
        panic!(
            "{rel}: sluice check refuses the import:\n{why}\n{}",
            imported.toml
        );
    }
    // What `check` validated is what a file holds: parse it again from disk.
    let file = out.path().join("sluice.toml");
    std::fs::write(&file, &imported.toml).unwrap();
    sluice_config::load(&file).unwrap_or_else(|e| panic!("{rel}: {e}"));
    imported
}

/// `file:line directive` of every directive left out, the file relative to the corpus.
fn left_out(i: &Imported) -> Vec<String> {
    let base = corpus("");
    i.left_out
        .iter()
        .map(|l| {
            let file = l.place.file.strip_prefix(&base).unwrap_or(&l.place.file);
            format!("{}:{} {}", file.display(), l.place.line, l.directive)
        })
        .collect()
}

fn has(i: &Imported, lines: &[&str]) {
    for line in lines {
        assert!(
            i.toml
                .lines()
                .any(|l| l.trim() == *line || l.contains(line)),
            "missing {line:?} in:\n{}",
            i.toml
        );
    }
}

#[test]
fn debians_packaged_configuration_translates_whole() {
    let i = run("debian/nginx.conf", true);
    assert_eq!(left_out(&i), Vec::<String>::new(), "{}", i.toml);
    has(
        &i,
        &[
            // nginx's 0.0.0.0:80 and [::]:80 (ipv6only=on): one dual-stack listener.
            r#"address = "[::]:80""#,
            r#"listeners = ["[::]:80"]"#,
            r#"static = { root = "/var/www/html", index = ["index.html", "index.htm", "index.nginx-debian.html"] }"#,
            r#"compress = { algorithms = ["gzip"], levels = { gzip = 1 }, min_length = 20, types = ["text/html"] }"#,
            r#"access = "/var/log/nginx/access.log""#,
        ],
    );
    // Read through the include of sites-enabled/* and modules-enabled/*.conf, with places.
    assert!(
        i.toml
            .contains("sites-enabled/default:48  location / { ... }"),
        "{}",
        i.toml
    );
    assert!(
        i.unneeded
            .iter()
            .any(|u| u.directive.starts_with("load_module") && u.place.line == 1),
        "{:?}",
        i.unneeded
    );
}

#[test]
fn debians_php_example_reports_fastcgi_with_its_lines_and_answers_502() {
    let i = run("debian/php-site.conf", true);
    let out = left_out(&i);
    for expected in [
        "debian/php-site.conf:25 fastcgi_pass unix:/run/php/php7.4-fpm.sock",
        "debian/snippets/fastcgi-php.conf:2 fastcgi_split_path_info ^(.+?\\.php)(/.*)$",
        "debian/snippets/fastcgi-php.conf:5 try_files $fastcgi_script_name =404",
        "debian/fastcgi.conf:2 fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name",
    ] {
        assert!(
            out.iter().any(|l| l == expected),
            "{expected} not in {out:#?}"
        );
    }
    // The snakeoil certificate of the snippet, on both TLS listeners.
    has(
        &i,
        &[
            r#"tls = { cert = "/etc/ssl/certs/ssl-cert-snakeoil.pem", key = "/etc/ssl/private/ssl-cert-snakeoil.key" }"#,
            r#"path_regex = '\.php$'"#,
            "respond = { status = 502 }",
            r#"path_regex = '/\.ht'"#,
            r#"deny = ["all"]"#,
        ],
    );
}

#[test]
fn the_seeds_setups_import() {
    let i = run("seeds/seed-000-gunzip-request.conf", false);
    assert_eq!(
        left_out(&i),
        ["seeds/seed-000-gunzip-request.conf:12 gunzip_request_body on"]
    );
    has(
        &i,
        &[
            r#"servers = ["127.0.0.1:9000"]"#,
            "keepalive = { max_idle = 100 }",
            r#"proxy = { upstream = "backend", host = "upstream", request_headers = { remove = ["content-encoding"] } }"#,
        ],
    );

    let i = run("seeds/seed-001-gzip.conf", false);
    assert_eq!(left_out(&i), Vec::<String>::new());
    assert!(i.toml.contains(r#"precompressed = ["gzip"]"#), "{}", i.toml);
    assert!(i.toml.contains("levels = { gzip = 2 }"), "{}", i.toml);

    let i = run("seeds/seed-002-h2-uwsgi.conf", false);
    let out = left_out(&i);
    assert!(
        out.contains(&"seeds/seed-002-h2-uwsgi.conf:13 uwsgi_pass unix:/tmp/app.sock".to_string()),
        "{out:?}"
    );
    assert!(
        out.contains(&"seeds/seed-002-h2-uwsgi.conf:23 uwsgi_pass unix:/tmp/app.sock".to_string()),
        "{out:?}"
    );
    has(
        &i,
        &[
            r#"protocols = ["http/1.1"]"#,
            r#"protocols = ["http/1.1", "h2"]"#,
            r#"host = "kuryu.local""#,
        ],
    );

    let i = run("seeds/seed-003-cache-balance.conf", false);
    assert_eq!(left_out(&i), Vec::<String>::new(), "{}", i.toml);
    has(
        &i,
        &[
            r#"servers = [{ address = "127.0.0.1:9001", weight = 3 }, "127.0.0.1:9002"]"#,
            r#"path = "/what-date-is-it""#,
        ],
    );
    assert!(i.toml.contains(r#"valid = { 200 = "5s" }"#), "{}", i.toml);
    assert!(
        i.toml.contains(r#"status_header = "x-cache-status""#),
        "{}",
        i.toml
    );
}

#[test]
fn one_config_per_directive() {
    let cases: &[(&str, &[&str])] = &[
        (
            "listen-server-name.conf",
            &[
                r#"host = ["example.com", "www.example.com"]"#,
                r#"host = ["example.org", "*.example.org"]"#,
                r#"name = "example.org / (default server)""#,
                r#"listeners = ["127.0.0.1:8080"]"#,
            ],
        ),
        (
            "root-alias-index.conf",
            &[
                r#"path_prefix = "/files/""#,
                r#"strip_prefix = true, index = ["index.html"], max_age = "1h" }"#,
            ],
        ),
        (
            "return-rewrite.conf",
            &[
                r#"redirect = { to = "https://new.example{uri}", status = 301 }"#,
                r#"path = "/old-page""#,
                r#"redirect = { to = "/new-page", status = 301 }"#,
                r#"redirect = { to = "https://elsewhere.example{uri}", status = 302 }"#,
                "respond = { status = 410 }",
            ],
        ),
        (
            "proxy.conf",
            &[
                r#"proxy = { upstream = "127.0.0.1:9001-2", strip_prefix = "/api", request_headers = { set = { x-env = "prod" } } }"#,
                r#"proxy = { upstream = "127.0.0.1:9001", strip_prefix = "/v1", replace_prefix = "/v2", request_headers = { set = { x-env = "prod" } } }"#,
                r#"timeouts = { connect = "3s", idle = "2m", response_header = "2m" }"#,
                r#"max_body_size = "20MiB""#,
                r#"response_headers = { add = { x-api = "v1" } }"#,
                r#"response_headers = { add = { x-frame-options = "DENY" } }"#,
                r#"proxy = { upstream = "127.0.0.1:9001", host = "upstream", request_headers = { remove = ["x-debug"] } }"#,
            ],
        ),
        (
            "upstream.conf",
            &[
                r#"servers = [{ address = "127.0.0.1:9001", weight = 3, max_fails = 2, fail_timeout = "30s" }, "127.0.0.1:9002", { address = "127.0.0.1:9003", backup = true }, { address = "127.0.0.1:9004", down = true }]"#,
                r#"keepalive = { max_idle = 32, idle_timeout = "30s" }"#,
                r#"policy = "least_conn""#,
                r#"hash_key = "client_ip""#,
                r#"hash_key = "uri""#,
                r#"servers = ["unix:/run/app.sock"]"#,
            ],
        ),
        (
            "gzip.conf",
            &[
                r#"compress = { algorithms = ["gzip"], levels = { gzip = 5 }, min_length = 1000, types = ["text/html", "text/css", "application/json"] }"#,
            ],
        ),
        (
            "proxy-cache.conf",
            &[
                r#"cache = { zone = "api", key = ["scheme", "host", "path", "query", "cookie:lang"], valid = { 200 = "10m", 302 = "10m", 404 = "1m" }, bypass = ["header:x-no-cache"], lock_timeout = "3s", status_header = "x-cache" }"#,
                r#"use_stale = ["error", "timeout", "updating", "http_502"]"#,
            ],
        ),
        ("tls.conf", &[r#"protocols = ["http/1.1", "h2"]"#]),
        (
            "limit-req.conf",
            &[
                r#"rate_limit = { requests = 10, per = "1s", burst = 6 }"#,
                r#"rate_limit = { requests = 100, per = "1m", burst = 1, key = "header:x-api-key" }"#,
            ],
        ),
        (
            "real-ip.conf",
            &[r#"trusted_proxies = ["10.0.0.0/8", "192.0.2.7"]"#],
        ),
        (
            "access.conf",
            &[
                r#"allow = ["192.0.2.0/24", "127.0.0.1"]"#,
                r#"deny = ["203.0.113.0/24"]"#,
                r#"not = { methods = ["GET"] }"#,
                r#"allow = ["10.0.0.0/8"]"#,
                r#"deny = ["all"]"#,
            ],
        ),
        (
            "auth-request.conf",
            &[
                r#"forward_auth = { upstream = "127.0.0.1:9100", uri = "/verify", copy_headers = ["x-user"] }"#,
                r#"path = "/auth""#,
                "respond = { status = 404 }",
            ],
        ),
        ("variables.conf", &[r#"servers = ["127.0.0.1:9001"]"#]),
        ("include.conf", &[r#"address = "127.0.0.1:8081""#]),
    ];
    for (file, lines) in cases {
        let i = run(&format!("directives/{file}"), false);
        has(&i, lines);
    }
    let i = run("directives/return-rewrite.conf", false);
    assert_eq!(
        left_out(&i),
        ["directives/return-rewrite.conf:13 rewrite ^/keep-query$ /new-page permanent"]
    );
    // The TLS certificate, relative to the config's directory.
    let i = run("directives/tls.conf", false);
    assert!(i.toml.contains("directives/certs/cert.pem"), "{}", i.toml);
    // bcrypt users translate; an MD5-apr1 file closes the route (fail closed) and is listed.
    let i = run("directives/access.conf", false);
    assert!(
        i.toml
            .contains(r#"basic_auth = { realm = "staff only", users = "#),
        "{}",
        i.toml
    );
    let out = left_out(&i);
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(
        out[0].starts_with("directives/access.conf:22 auth_basic legacy"),
        "{out:?}"
    );
    assert!(
        out[1].starts_with("directives/access.conf:23 auth_basic_user_file"),
        "{out:?}"
    );
    assert!(
        i.left_out[1].why.contains("MD5-apr1"),
        "{:?}",
        i.left_out[1]
    );
    // Everything but the intended gaps translates.
    for file in [
        "listen-server-name",
        "root-alias-index",
        "proxy",
        "upstream",
        "gzip",
        "proxy-cache",
        "tls",
        "limit-req",
        "real-ip",
        "auth-request",
        "variables",
    ] {
        let i = run(&format!("directives/{file}.conf"), false);
        assert_eq!(left_out(&i), Vec::<String>::new(), "{file}");
    }
}

/// Every directive sluice cannot do is listed with its file and line, in the output's
/// comment block too.
#[test]
fn untranslated_directives_are_reported_with_file_and_line() {
    let i = run("directives/left-out.conf", false);
    assert_eq!(
        left_out(&i),
        [
            "directives/left-out.conf:3 map $http_upgrade $connection_upgrade { ... }",
            "directives/left-out.conf:3 default upgrade",
            "directives/left-out.conf:3 '' close",
            "directives/left-out.conf:7 error_page 404 /404.html",
            "directives/left-out.conf:9 try_files $uri /index.php?$args",
            "directives/left-out.conf:12 fastcgi_pass 127.0.0.1:9000",
            "directives/left-out.conf:14 if ($request_method = POST) { ... }",
            "directives/left-out.conf:14 return 405",
        ]
    );
    assert!(i.toml.contains("# NOT TRANSLATED (8)"), "{}", i.toml);
    assert!(
        i.toml
            .contains("#   left-out.conf:12  fastcgi_pass 127.0.0.1:9000"),
        "{}",
        i.toml
    );
    let i = run("directives/include.conf", false);
    assert_eq!(
        left_out(&i),
        ["directives/conf.d/b.conf:3 sub_filter foo bar"]
    );
}
