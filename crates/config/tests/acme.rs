//! `tls = "acme"` and `[acme]` (docs/acme.md): names, defaults, the challenge chosen, and what
//! `sluice check` refuses (no names, no way to answer a challenge, an unusable storage).

// Helper functions unwrap too, which allow-*-in-tests does not reach.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use sluice_config::{AcmeChallenge, LETS_ENCRYPT, LETS_ENCRYPT_STAGING, Tls};

fn errors(text: &str) -> Vec<(String, String)> {
    match sluice_config::parse_str(text, Path::new("acme.toml")) {
        Ok(_) => Vec::new(),
        Err(d) => d
            .iter()
            .filter(|d| d.severity == sluice_config::Severity::Error)
            .map(|d| (d.key_path.clone(), d.message.clone()))
            .collect(),
    }
}

const PLAIN: &str = "[[listeners]]\naddress = \"127.0.0.1:80\"\n";

#[test]
fn names_come_from_the_routes_exact_hosts_and_defaults_are_lets_encrypt() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"{PLAIN}
[[listeners]]
name = "s"
address = "127.0.0.1:443"
tls = "acme"
[[routes]]
host = ["b.example", "*.wild.example", "127.0.0.1", "a.example"]
respond = {{ status = 200 }}
[[routes]]
host = "other.example"
listeners = ["127.0.0.1:80"]
respond = {{ status = 200 }}
[acme]
storage = "{}"
"#,
        dir.path().display()
    );
    let config = sluice_config::parse_str(&text, Path::new("acme.toml")).unwrap();
    let Some(Tls::Acme { names }) = &config.listeners[1].tls else {
        panic!("not acme")
    };
    assert_eq!(names, &["b.example", "a.example"]);
    let acme = config.acme.unwrap();
    assert_eq!(acme.directory, LETS_ENCRYPT);
    assert_eq!(
        acme.challenge,
        AcmeChallenge::Http01,
        "a plain listener exists"
    );
    assert_eq!(
        acme.http_redirect,
        Some(http::StatusCode::PERMANENT_REDIRECT)
    );
}

#[test]
fn listed_names_win_and_without_a_plain_listener_the_challenge_is_tls_alpn() {
    let text = r#"
[[listeners]]
address = "127.0.0.1:443"
tls = "acme"
acme_names = ["Www.Example.com"]
[[routes]]
respond = { status = 200 }
[acme]
staging = true
http_redirect = false
storage = "relative-store"
"#;
    let config = sluice_config::parse_str(text, Path::new("/srv/acme.toml")).unwrap();
    let Some(Tls::Acme { names }) = &config.listeners[0].tls else {
        panic!()
    };
    assert_eq!(names, &["www.example.com"]);
    let acme = config.acme.unwrap();
    assert_eq!(acme.directory, LETS_ENCRYPT_STAGING);
    assert_eq!(acme.challenge, AcmeChallenge::TlsAlpn01);
    assert_eq!(acme.http_redirect, None);
    assert_eq!(acme.storage, Path::new("/srv/relative-store"));
}

#[test]
fn an_acme_listener_without_names_is_an_error() {
    let found = errors(
        r#"
[[listeners]]
address = "127.0.0.1:443"
tls = "acme"
[[routes]]
host = "*.example.com"
respond = { status = 200 }
"#,
    );
    assert!(
        found
            .iter()
            .any(|(path, m)| path == "listeners[0].tls" && m.contains("no names")),
        "{found:?}"
    );
}

#[test]
fn wildcards_and_ip_addresses_are_refused_in_acme_names() {
    let found = errors(
        r#"
[[listeners]]
address = "127.0.0.1:443"
tls = "acme"
acme_names = ["*.example.com", "192.0.2.1"]
"#,
    );
    assert!(found.iter().any(|(_, m)| m.contains("DNS-01")), "{found:?}");
    assert!(
        found.iter().any(|(_, m)| m.contains("IP address")),
        "{found:?}"
    );
}

#[test]
fn no_way_to_answer_a_challenge_is_an_error() {
    // HTTP-01 forced without a listener without TLS.
    let found = errors(
        r#"
[[listeners]]
address = "127.0.0.1:443"
tls = "acme"
acme_names = "a.example"
[acme]
challenge = "http-01"
"#,
    );
    assert!(
        found
            .iter()
            .any(|(p, m)| p == "acme.challenge" && m.contains("HTTP-01 needs")),
        "{found:?}"
    );
    // Only HTTP/3 on the ACME listener and nothing in plain text: TLS-ALPN-01 is impossible.
    let found = errors(
        r#"
[[listeners]]
address = "127.0.0.1:443"
tls = "acme"
protocols = ["h3"]
acme_names = "a.example"
"#,
    );
    assert!(
        found
            .iter()
            .any(|(_, m)| m.contains("no way to answer ACME challenges")),
        "{found:?}"
    );
}

#[test]
fn an_unusable_storage_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let text = |storage: &Path| {
        format!(
            "{PLAIN}[[listeners]]\naddress = \"127.0.0.1:443\"\ntls = \"acme\"\nacme_names = \"a.example\"\n[acme]\nstorage = \"{}\"\n",
            storage.display()
        )
    };
    let found = errors(&text(&file));
    assert!(
        found
            .iter()
            .any(|(p, m)| p == "acme.storage" && m.contains("not a directory")),
        "{found:?}"
    );
    // A directory nobody may list or write (root ignores modes: then it is usable, and fine).
    use std::os::unix::fs::PermissionsExt as _;
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let unreadable = std::fs::read_dir(&locked).is_err();
    let found = errors(&text(&locked));
    if unreadable {
        assert!(
            found
                .iter()
                .any(|(p, m)| p == "acme.storage" && m.contains("cannot be read")),
            "{found:?}"
        );
    } else {
        assert!(found.is_empty(), "{found:?}");
    }
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn bad_acme_values_are_reported_with_their_keys() {
    let found = errors(&format!(
        r#"{PLAIN}
[[listeners]]
address = "127.0.0.1:443"
tls = "acme"
acme_names = "a.example"
[acme]
directory = "http://ca.example/dir"
contact = "ops@example.com"
challenge = "dns-01"
http_redirect = 200
external_account = {{ key_id = "k" }}
"#
    ));
    for key in [
        "acme.directory",
        "acme.contact",
        "acme.challenge",
        "acme.http_redirect",
        "acme.external_account.hmac_key",
    ] {
        assert!(found.iter().any(|(p, _)| p == key), "{key}: {found:?}");
    }
}
