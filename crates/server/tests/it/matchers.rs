//! Route matchers over real sockets: `methods` (HEAD goes with GET), `headers` (name case,
//! exact / prefix / regex / present / absent), `query` (repeated names, form decoding),
//! `client` (IPv4 and IPv6 networks, the address from trusted and untrusted forwarded headers),
//! `path_regex` on the normal-form path (`/%61dmin` meets `^/admin`) with its captures in a
//! proxy's rewrite and headers, and the `not` form of each. Every route answers its own name,
//! so each request shows which route took it.

use std::net::IpAddr;
use std::time::Duration;

use sluice_testkit::{Offer, TestServer, client, start_origin, start_toml};

const ROUTES: &str = r#"
[log]
access = "off"
[[listeners]]
name = "plain"
address = "127.0.0.1:0"
[[listeners]]
name = "behind-proxy"
address = "127.0.0.1:0"
trusted_proxies = ["127.0.0.1"]
[[listeners]]
name = "v6"
address = "[::1]:0"

[[routes]]
name = "upload"
path_prefix = "/api/upload"
methods = ["POST", "PUT"]
respond = { body = "upload" }

[[routes]]
name = "api"
path_prefix = "/api"
respond = { body = "api" }

[[routes]]
name = "reads"
path = "/method"
methods = ["GET"]
respond = { body = "reads" }

[[routes]]
name = "not-reads"
path = "/method"
not = { methods = ["GET"] }
respond = { body = "not-reads" }

[[routes]]
name = "header-exact"
path = "/h"
headers = { "X-Env" = "prod" }
respond = { body = "header-exact" }

[[routes]]
name = "header-prefix"
path = "/h"
headers = { accept = "text/*" }
respond = { body = "header-prefix" }

[[routes]]
name = "header-regex"
path = "/h"
headers = { user-agent = "~^curl/[0-9]+" }
respond = { body = "header-regex" }

[[routes]]
name = "header-present"
path = "/h"
headers = { x-token = "present" }
respond = { body = "header-present" }

[[routes]]
name = "header-literal"
path = "/h"
headers = { x-word = "=present" }
respond = { body = "header-literal" }

[[routes]]
name = "header-absent"
path = "/h"
headers = { cookie = "absent" }
not = { headers = { x-debug = "present" } }
respond = { body = "header-absent" }

[[routes]]
name = "header-rest"
path = "/h"
respond = { body = "header-rest" }

[[routes]]
name = "query-value"
path = "/q"
query = { tag = "b", "full name" = "a b" }
respond = { body = "query-value" }

[[routes]]
name = "query-present"
path = "/q"
query = { debug = "present" }
not = { query = { tag = "x" } }
respond = { body = "query-present" }

[[routes]]
name = "query-rest"
path = "/q"
respond = { body = "query-rest" }

[[routes]]
name = "office"
path = "/net"
client = ["10.0.0.0/8", "2001:db8::/32"]
respond = { body = "office" }

[[routes]]
name = "loopback-v6"
path = "/net"
client = ["::1"]
respond = { body = "loopback-v6" }

[[routes]]
name = "not-127-0-0-2"
path = "/net"
not = { client = ["127.0.0.2"] }
respond = { body = "not-127-0-0-2" }

[[routes]]
name = "net-rest"
path = "/net"
respond = { body = "net-rest" }

[[routes]]
name = "admin"
path_regex = "^/admin(/|$)"
respond = { body = "admin" }

[[routes]]
name = "not-images"
path_prefix = "/files/"
not = { path_regex = "\\.(png|jpg)$" }
respond = { body = "not-images" }

[[routes]]
name = "rest"
respond = { body = "rest" }
"#;

async fn body(http: &reqwest::Client, req: reqwest::RequestBuilder) -> String {
    let _ = http;
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap()
}

async fn get(server: &TestServer, path: &str, headers: &[(&str, &str)]) -> String {
    let http = client(Offer::Http1);
    let mut req = http.get(server.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    body(&http, req).await
}

#[tokio::test]
async fn methods_split_a_prefix_and_head_goes_with_get() {
    let server = start_toml(ROUTES).await;
    let http = client(Offer::Http1);
    let url = server.url("/api/upload/x");
    assert_eq!(body(&http, http.post(&url)).await, "upload");
    assert_eq!(body(&http, http.put(&url)).await, "upload");
    assert_eq!(body(&http, http.get(&url)).await, "api");
    assert_eq!(body(&http, http.delete(&url)).await, "api");
    let url = server.url("/method");
    assert_eq!(body(&http, http.get(&url)).await, "reads");
    // RFC 9110 §9.3.2: HEAD is GET without the content; the HEAD response has no body, so the
    // route shows in the length of the GET answer it mirrors.
    let head = http.head(&url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["content-length"], "5");
    assert_eq!(body(&http, http.post(&url)).await, "not-reads");
    assert_eq!(body(&http, http.delete(&url)).await, "not-reads");
}

#[tokio::test]
async fn headers_match_by_case_insensitive_name_and_each_condition() {
    let server = start_toml(ROUTES).await;
    assert_eq!(
        get(&server, "/h", &[("x-env", "prod")]).await,
        "header-exact"
    );
    assert_eq!(
        get(&server, "/h", &[("X-ENV", "prod")]).await,
        "header-exact"
    );
    // Values are compared as they are: `Prod` is not `prod`.
    assert_eq!(
        get(&server, "/h", &[("x-env", "Prod")]).await,
        "header-absent"
    );
    assert_eq!(
        get(&server, "/h", &[("accept", "text/html")]).await,
        "header-prefix"
    );
    assert_eq!(
        get(&server, "/h", &[("accept", "image/png")]).await,
        "header-absent"
    );
    assert_eq!(
        get(&server, "/h", &[("user-agent", "curl/8.5")]).await,
        "header-regex"
    );
    assert_eq!(
        get(&server, "/h", &[("user-agent", "wget/1")]).await,
        "header-absent"
    );
    assert_eq!(
        get(&server, "/h", &[("x-token", "")]).await,
        "header-present"
    );
    assert_eq!(
        get(&server, "/h", &[("x-word", "present")]).await,
        "header-literal"
    );
    assert_eq!(
        get(&server, "/h", &[("x-word", "other")]).await,
        "header-absent"
    );
    // `absent` and the negated `present`.
    assert_eq!(
        get(&server, "/h", &[("cookie", "a=1")]).await,
        "header-rest"
    );
    assert_eq!(get(&server, "/h", &[("x-debug", "1")]).await, "header-rest");
    assert_eq!(get(&server, "/h", &[]).await, "header-absent");
}

#[tokio::test]
async fn repeated_header_lines_are_each_considered() {
    let server = start_toml(ROUTES).await;
    let addr = server.first_addr();
    let request =
        b"GET /h HTTP/1.1\r\nhost: x\r\nx-env: test\r\nX-Env: prod\r\nconnection: close\r\n\r\n";
    let response = sluice_testkit::raw_exchange(addr, request, 1 << 16).await;
    let text = String::from_utf8_lossy(&response);
    assert!(text.ends_with("header-exact"), "{text}");
}

#[tokio::test]
async fn query_values_are_decoded_and_repeated_names_all_count() {
    let server = start_toml(ROUTES).await;
    assert_eq!(
        get(&server, "/q?tag=a&tag=b&full+name=a%20b", &[]).await,
        "query-value"
    );
    assert_eq!(
        get(&server, "/q?tag=b&full%20name=a+b", &[]).await,
        "query-value"
    );
    assert_eq!(
        get(&server, "/q?tag=a&full+name=a%20b", &[]).await,
        "query-rest"
    );
    assert_eq!(get(&server, "/q?tag=b", &[]).await, "query-rest");
    assert_eq!(get(&server, "/q?debug", &[]).await, "query-present");
    assert_eq!(get(&server, "/q?debug=&tag=y", &[]).await, "query-present");
    // The negation: any `tag=x` among the repeated names keeps the route out.
    assert_eq!(
        get(&server, "/q?debug=1&tag=y&tag=x", &[]).await,
        "query-rest"
    );
    assert_eq!(get(&server, "/q", &[]).await, "query-rest");
}

/// GET `path` on `listener`, from `from`, with `X-Forwarded-For` when given.
async fn get_from(
    server: &TestServer,
    listener: &str,
    from: IpAddr,
    forwarded: Option<&str>,
) -> String {
    // (`client` installs the TLS crypto provider reqwest's builder needs.)
    let _ = client(Offer::Http1);
    let http = reqwest::Client::builder()
        .local_address(from)
        .timeout(Duration::from_secs(30))
        .no_proxy()
        .build()
        .unwrap();
    let mut req = http.get(format!("http://{}/net", server.addr(listener)));
    if let Some(xff) = forwarded {
        req = req.header("x-forwarded-for", xff);
    }
    body(&http, req).await
}

#[tokio::test]
async fn client_networks_use_the_resolved_address_v4_and_v6() {
    let server = start_toml(ROUTES).await;
    let lo1: IpAddr = "127.0.0.1".parse().unwrap();
    let lo2: IpAddr = "127.0.0.2".parse().unwrap();
    let v6: IpAddr = "::1".parse().unwrap();
    // Untrusted peer: its X-Forwarded-For is not believed.
    assert_eq!(
        get_from(&server, "plain", lo1, Some("10.1.2.3")).await,
        "not-127-0-0-2"
    );
    assert_eq!(get_from(&server, "plain", lo2, None).await, "net-rest");
    assert_eq!(
        get_from(&server, "plain", lo2, Some("10.1.2.3")).await,
        "net-rest"
    );
    // Trusted peer (127.0.0.1): the client is the address it names, IPv4 or IPv6.
    assert_eq!(
        get_from(&server, "behind-proxy", lo1, Some("10.1.2.3")).await,
        "office"
    );
    assert_eq!(
        get_from(&server, "behind-proxy", lo1, Some("2001:db8::7")).await,
        "office"
    );
    assert_eq!(
        get_from(&server, "behind-proxy", lo1, Some("192.0.2.1")).await,
        "not-127-0-0-2"
    );
    assert_eq!(
        get_from(&server, "behind-proxy", lo1, Some("127.0.0.2")).await,
        "net-rest"
    );
    // 127.0.0.2 is no trusted proxy: what it forwards is ignored.
    assert_eq!(
        get_from(&server, "behind-proxy", lo2, Some("10.1.2.3")).await,
        "net-rest"
    );
    // A real IPv6 connection.
    assert_eq!(get_from(&server, "v6", v6, None).await, "loopback-v6");
}

#[tokio::test]
async fn path_regex_matches_the_normal_form_and_its_negation() {
    let server = start_toml(ROUTES).await;
    let addr = server.first_addr();
    for target in ["/admin", "/%61dmin", "/x/../admin/", "/%61%64min/users"] {
        let request = format!("GET {target} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        let response = sluice_testkit::raw_exchange(addr, request.as_bytes(), 1 << 16).await;
        let text = String::from_utf8_lossy(&response);
        assert!(text.starts_with("HTTP/1.1 200"), "{target}: {text}");
        assert!(text.ends_with("\r\n\r\nadmin"), "{target}: {text}");
    }
    assert_eq!(get(&server, "/administrator", &[]).await, "rest");
    assert_eq!(get(&server, "/files/a.txt", &[]).await, "not-images");
    assert_eq!(get(&server, "/files/a.png", &[]).await, "rest");
    assert_eq!(get(&server, "/files/%61.jpg", &[]).await, "rest");
}

#[tokio::test]
async fn path_regex_captures_fill_a_proxy_rewrite_and_headers() {
    let origin = start_origin(Some("origin")).await;
    let config = format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        name = "users"
        path_regex = "^/users/(?P<id>[0-9]+)/(?P<page>[a-z]+)"
        proxy = {{ to = "{}", replace_prefix = "/{{page}}", request_headers = {{ set = {{ x-user-id = "{{id}}", x-fixed = "v" }} }} }}
        "#,
        origin.addr
    );
    let server = start_toml(&config).await;
    let http = client(Offer::Http1);
    let resp = http
        .get(server.url("/users/42/reqinfo?x=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let info: serde_json::Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(info["path"], "/reqinfo?x=1", "{info}");
    let headers = info["headers"].to_string();
    assert!(
        headers.contains("x-user-id") && headers.contains("42"),
        "{info}"
    );
    assert!(headers.contains("x-fixed"), "{info}");
    // The regex does not match: no route.
    let resp = http
        .get(server.url("/users/abc/reqinfo"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    origin.stop().await;
}
