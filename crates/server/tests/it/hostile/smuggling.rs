//! HTTP/1.1 request smuggling and malformed framing, through the proxy to a recording upstream.
//!
//! Every case ends in one of two ways, and the upstream's bytes prove which: refused (a 4xx or
//! 501, or the connection closed, and no request reached the upstream whole), or forwarded (one
//! request, its body exactly what the client framed). In no case does the upstream see a second
//! request hidden in the first one's body (`/smuggled`), or the client get two answers.

use futures_util::future::join_all;

use super::upstreams::Recording;
use sluice_testkit::{TestServer, raw_exchange, start_toml};

/// What a case may end in.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// One of these statuses, or a connection closed without an answer; nothing forwarded whole.
    Refused(&'static [u16]),
    /// Answered 200 by the upstream, which saw exactly one whole request with this body.
    Forwarded(&'static [u8]),
}

use Outcome::{Forwarded, Refused};

struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    allowed: &'static [Outcome],
    /// The server must close the connection after its response, even a 200.
    must_close: bool,
}

fn case(name: &'static str, bytes: impl AsRef<[u8]>, allowed: &'static [Outcome]) -> Case {
    Case {
        name,
        bytes: bytes.as_ref().to_vec(),
        allowed,
        must_close: name.contains("CL") && name.contains("TE"),
    }
}

const BAD_REQUEST: Outcome = Refused(&[400]);
/// RFC 9112 §6.1: a transfer coding the server does not understand: 501 (or 400).
const BAD_CODING: Outcome = Refused(&[400, 501]);

/// A pipelined request hidden after the first one's body if anyone reads the framing wrong.
const SMUGGLED: &str = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";

fn cases() -> Vec<Case> {
    let post = |headers: &str, body: &str| {
        format!("POST /p HTTP/1.1\r\nHost: x\r\n{headers}\r\n{body}{SMUGGLED}")
    };
    let chunked = |body: &str| post("Transfer-Encoding: chunked\r\n", body);
    vec![
        // RFC 9112 §6.1/§6.3: Transfer-Encoding overrides Content-Length; the request is read as
        // chunked (or refused) and the connection closed after the response, so what follows the
        // chunked body is never read as a request.
        case(
            "CL then TE",
            post(
                "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n",
                "0\r\n\r\n",
            ),
            &[BAD_REQUEST, Forwarded(b"")],
        ),
        case(
            "TE then CL",
            post(
                "Transfer-Encoding: chunked\r\nContent-Length: 40\r\n",
                "0\r\n\r\n",
            ),
            &[BAD_REQUEST, Forwarded(b"")],
        ),
        case(
            "TE: chunked not last",
            post(
                "Transfer-Encoding: chunked, identity\r\nContent-Length: 5\r\n",
                "0\r\n\r\n",
            ),
            &[BAD_CODING],
        ),
        case(
            "TE: unknown coding",
            post("Transfer-Encoding: xchunked\r\n", "0\r\n\r\n"),
            &[BAD_CODING],
        ),
        case(
            "TE twice",
            post(
                "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
                "0\r\n\r\n",
            ),
            &[BAD_CODING],
        ),
        // RFC 9112 §5.1: no whitespace between a field name and the colon; 400.
        case(
            "space before the colon of TE",
            post(
                "Transfer-Encoding : chunked\r\nContent-Length: 5\r\n",
                "0\r\n\r\n",
            ),
            &[BAD_REQUEST],
        ),
        // RFC 9112 §6.3 / RFC 9110 §8.6: duplicate identical lengths may be taken as one;
        // anything else about Content-Length that is not one decimal number is a 400.
        case(
            "CL twice, equal",
            post("Content-Length: 5\r\nContent-Length: 5\r\n", "hello"),
            &[BAD_REQUEST, Forwarded(b"hello")],
        ),
        case(
            "CL twice, different",
            post("Content-Length: 5\r\nContent-Length: 40\r\n", "hello"),
            &[BAD_REQUEST],
        ),
        case(
            "CL list",
            post("Content-Length: 5, 40\r\n", "hello"),
            &[BAD_REQUEST],
        ),
        case(
            "CL signed",
            post("Content-Length: +5\r\n", "hello"),
            &[BAD_REQUEST],
        ),
        case(
            "CL hex",
            post("Content-Length: 0x5\r\n", "hello"),
            &[BAD_REQUEST],
        ),
        case(
            "CL negative",
            post("Content-Length: -1\r\n", "hello"),
            &[BAD_REQUEST],
        ),
        case(
            "CL overflow",
            post("Content-Length: 99999999999999999999999\r\n", "hello"),
            &[BAD_REQUEST],
        ),
        // RFC 9112 §5.2: obs-fold is refused (400) or replaced by SP; never forwarded folded.
        case(
            "obs-fold",
            post("Content-Length: 5\r\nX-Folded: a\r\n b\r\n", "hello"),
            &[BAD_REQUEST, Forwarded(b"hello")],
        ),
        case(
            "obs-fold into TE",
            post("Transfer-Encoding: identity\r\n chunked\r\n", "0\r\n\r\n"),
            &[BAD_REQUEST, BAD_CODING],
        ),
        // RFC 9112 §2.2: a recipient MAY take a bare LF as a line end (hyper's httparse does, in
        // the head); a bare CR is refused.
        case(
            "bare LF in the head",
            format!("POST /p HTTP/1.1\nHost: x\nContent-Length: 5\n\nhello{SMUGGLED}"),
            &[BAD_REQUEST, Forwarded(b"hello")],
        ),
        case(
            "bare CR in a value",
            post("Content-Length: 5\r\nX-A: a\rb\r\n", "hello"),
            &[BAD_REQUEST],
        ),
        case(
            "bare LF in the chunked framing",
            chunked("5\nhello\n0\n\n"),
            &[BAD_REQUEST, Forwarded(b"hello")],
        ),
        // RFC 9112 §7.1: a chunk size is 1*HEXDIG; anything else, or one that overflows, fails
        // the body.
        case(
            "chunk size not hex",
            chunked("zz\r\nhello\r\n0\r\n\r\n"),
            &[BAD_REQUEST],
        ),
        case(
            "chunk size negative",
            chunked("-5\r\nhello\r\n0\r\n\r\n"),
            &[BAD_REQUEST],
        ),
        case(
            "chunk size 0x",
            chunked("0x5\r\nhello\r\n0\r\n\r\n"),
            &[BAD_REQUEST],
        ),
        case(
            "chunk size overflow",
            chunked("1ffffffffffffffff\r\nhello\r\n0\r\n\r\n"),
            &[BAD_REQUEST],
        ),
        // The first chunk is already on its way upstream when the second fails: the upstream
        // sees the request cut off, never complete.
        case(
            "bad second chunk size",
            chunked("5\r\nhello\r\nzz\r\nworld\r\n0\r\n\r\n"),
            &[BAD_REQUEST],
        ),
        case(
            "chunk shorter than its size",
            chunked("9\r\nhello\r\n0\r\n\r\n"),
            &[BAD_REQUEST],
        ),
        case(
            "chunk longer than its size",
            chunked("3\r\nhello\r\n0\r\n\r\n"),
            &[BAD_REQUEST],
        ),
        case(
            "oversized chunk size line",
            chunked(&format!("{}5\r\nhello\r\n0\r\n\r\n", "0".repeat(100_000))),
            &[BAD_REQUEST, Forwarded(b"hello")],
        ),
        // Chunk extensions are ignored when well-formed (RFC 9112 §7.1.1), and bounded.
        case(
            "chunk extension",
            chunked("5;name=value;x=\"q\"\r\nhello\r\n0\r\n\r\n"),
            &[Forwarded(b"hello")],
        ),
        case(
            "oversized chunk extension",
            chunked(&format!(
                "5;x={}\r\nhello\r\n0\r\n\r\n",
                "a".repeat(100_000)
            )),
            &[BAD_REQUEST],
        ),
        case(
            "chunk extension with a bare LF",
            chunked("5;x=\n\r\nhello\r\n0\r\n\r\n"),
            &[BAD_REQUEST, Forwarded(b"hello")],
        ),
        // Request-line and header garbage: 400 (or 414/431 when too long), nothing forwarded.
        case(
            "request line with extra words",
            "GET /a HTTP/1.1 extra\r\nHost: x\r\n\r\n",
            &[BAD_REQUEST],
        ),
        case(
            "space in the target",
            "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n",
            &[BAD_REQUEST],
        ),
        case(
            "NUL in the target",
            "GET /a\0b HTTP/1.1\r\nHost: x\r\n\r\n",
            &[BAD_REQUEST],
        ),
        case(
            "HTTP/0.9 request line",
            "GET /a\r\n\r\n",
            &[BAD_REQUEST, Refused(&[505])],
        ),
        case(
            "NUL in a header value",
            "GET /a HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n",
            &[BAD_REQUEST],
        ),
        case(
            "header line without a colon",
            "GET /a HTTP/1.1\r\nHost: x\r\nnonsense\r\n\r\n",
            &[BAD_REQUEST],
        ),
        case(
            "request line of 100 KiB",
            format!(
                "GET /{} HTTP/1.1\r\nHost: x\r\n\r\n",
                "a".repeat(100 * 1024)
            ),
            &[Refused(&[400, 414, 431])],
        ),
        // RFC 9112 §3.2: an HTTP/1.1 request without Host, or with two, is a 400.
        case("no Host", "GET /a HTTP/1.1\r\n\r\n", &[BAD_REQUEST]),
        case(
            "two Hosts",
            "GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
            &[BAD_REQUEST],
        ),
    ]
}

/// sluice in front of `upstream`; keep-alive connections close after 1 s without a new
/// request, which ends each raw exchange.
async fn proxy(upstream: &Recording) -> TestServer {
    start_toml(&format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        header_read_timeout = "1s"
        idle_timeout = "1s"
        max_header_size = "16KiB"
        [[routes]]
        path_prefix = "/gz"
        [routes.proxy]
        to = "{0}"
        decompress_requests = {{}}
        [[routes]]
        proxy = {{ to = "{0}" }}
        "#,
        upstream.addr
    ))
    .await
}

/// The status codes of the responses in `reply`, in order.
fn statuses(reply: &str) -> Vec<u16> {
    reply
        .match_indices("HTTP/1.1 ")
        .filter(|(at, _)| *at == 0 || reply[..*at].ends_with('\n'))
        .filter_map(|(at, _)| reply.get(at + 9..at + 12)?.parse().ok())
        .collect()
}

async fn run(case: Case) -> Result<(), String> {
    let upstream = Recording::start().await;
    let server = proxy(&upstream).await;
    let reply = raw_exchange(server.first_addr(), &case.bytes, 1 << 20).await;
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let statuses = statuses(&reply);
    let raw = upstream.raw();
    let whole = upstream.whole();
    let fits = |allowed: &Outcome| match allowed {
        // A refusal closes the connection (RFC 9112 §6.3, §9.6), so what followed is never
        // read: no second answer, nothing forwarded, the hidden request least of all.
        Refused(codes) => {
            whole.is_empty()
                && !raw.contains("smuggled")
                && statuses.len() <= 1
                && statuses.first().is_none_or(|s| codes.contains(s))
        }
        Forwarded(body) => {
            let first_ok = statuses.first() == Some(&200)
                && whole.first().is_some_and(|w| w.body.as_deref() == Ok(*body))
                // Re-framed by the proxy: never forwarded folded or with both framings.
                && !raw.contains("\r\n ")
                && !raw.contains("\r\n\t")
                && !whole.iter().any(|w| {
                    w.headers.contains_key("content-length")
                        && w.headers.contains_key("transfer-encoding")
                });
            // What followed the body is the client's next request, which is fine when the
            // framing was unambiguous; with both Transfer-Encoding and Content-Length the
            // connection must close after the response instead (RFC 9112 §6.3).
            let rest_ok = if case.must_close {
                statuses.len() == 1 && whole.len() == 1 && !raw.contains("smuggled")
            } else {
                statuses.len() <= 2
                    && whole.len() <= 2
                    && whole
                        .get(1)
                        .is_none_or(|w| w.method == "GET" && w.target == "/smuggled")
            };
            first_ok && rest_ok
        }
    };
    if !case.allowed.iter().any(fits) {
        return Err(format!(
            "{}: expected one of {:?}; the client got {statuses:?} ({:?}), the upstream saw {whole:?}\nraw: {raw:?}",
            case.name,
            case.allowed,
            reply.lines().next()
        ));
    }
    Ok(())
}

#[tokio::test]
async fn smuggling_and_malformed_framing_never_reach_the_upstream_as_whole() {
    let results = join_all(cases().into_iter().map(run)).await;
    let failures: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

#[tokio::test]
async fn a_decoded_request_body_is_re_framed_whole_or_not_at_all() {
    // sluice re-frames a decoded body (chunked, no Content-Length): the upstream must see the
    // decoded bytes exactly, and a truncated or corrupt gzip body never as a whole request.
    let payload = format!("hello{SMUGGLED}").repeat(100).into_bytes();
    let encoded = gzip(&payload);
    let head = |len: usize| {
        format!("POST /gz HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: {len}\r\n\r\n")
            .into_bytes()
    };
    let upstream = Recording::start().await;
    let server = proxy(&upstream).await;

    let mut whole = head(encoded.len());
    whole.extend_from_slice(&encoded);
    let reply = raw_exchange(server.first_addr(), &whole, 1 << 20).await;
    assert_eq!(statuses(&String::from_utf8_lossy(&reply)), [200]);
    let seen = upstream.whole();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body.as_deref(), Ok(payload.as_slice()));
    assert!(!seen[0].headers.contains_key("content-length"));

    for (what, body) in [
        // The gzip stream without its last 20 bytes, sent as if whole (Content-Length says so).
        ("truncated", encoded[..encoded.len() - 20].to_vec()),
        ("corrupt", {
            let mut bad = encoded.clone();
            let middle = bad.len() / 2;
            bad[middle] ^= 0xff;
            bad
        }),
    ] {
        let upstream = Recording::start().await;
        let server = proxy(&upstream).await;
        let mut bytes = head(body.len());
        bytes.extend_from_slice(&body);
        let reply = raw_exchange(server.first_addr(), &bytes, 1 << 20).await;
        let statuses = statuses(&String::from_utf8_lossy(&reply));
        assert!(
            statuses.is_empty() || statuses == [400],
            "{what}: {statuses:?}"
        );
        assert!(
            upstream.whole().is_empty(),
            "{what}: the upstream took {:?}",
            upstream.whole()
        );
    }
}
