//! HTTP/2 conformance: the h2spec suite (every test of it) against an h2c listener and a TLS
//! listener, several runs in a row each, since a failure that shows once in a few runs is a
//! failure (the stream races behind `sluice_server::pipeline::unread_body` did exactly that).
//!
//! h2spec is a Go program:
//! `go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible` (`.ci/run` does it
//! when it is missing). It is looked up in `$H2SPEC`, then `PATH`, then
//! `$HOME/go/bin`; without it the test fails saying how to install it.
//!
//! The h2c listener speaks only HTTP/2: h2spec 3.5/2 sends `INVALID CONNECTION PREFACE` and
//! expects the connection closed, which on a port that also speaks HTTP/1.1 is HTTP/1.1 garbage
//! and is answered 400 (see `sluice_server::net::h2c`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use sluice_testkit::start_toml_in;

/// Runs of the whole suite per listener.
const RUNS: usize = 5;
/// h2spec 2.2.1 has 145 tests; fewer in a report means the run stopped early.
const TESTS: usize = 145;

const CONFIG: &str = r#"
[log]
access = "off"
[[listeners]]
name = "h2c"
address = "127.0.0.1:0"
protocols = ["h2"]
[[listeners]]
name = "tls"
address = "127.0.0.1:0"
tls = "self-signed"
[[routes]]
static = { root = "public" }
"#;

#[tokio::test]
async fn h2spec_passes_every_test_on_h2c_and_tls() {
    let h2spec = find_h2spec();
    let dir = tempfile::tempdir().unwrap();
    crate::write_files(dir.path(), &[("public/index.html", b"<p>hello</p>\n")]);
    let server = start_toml_in(dir.path(), CONFIG).await;
    for run in 1..=RUNS {
        for (listener, tls) in [("h2c", false), ("tls", true)] {
            let port = server.addr(listener).port();
            let report = dir.path().join(format!("{listener}-{run}.xml"));
            let outcome = run_h2spec(&h2spec, port, tls, &report).await;
            assert!(
                outcome.not_passed.is_empty() && outcome.tests >= TESTS,
                "h2spec on the {listener} listener, run {run} of {RUNS}: {} of {} tests \
                 ran, these did not pass:\n  {}\n{}",
                outcome.tests,
                TESTS,
                outcome.not_passed.join("\n  "),
                outcome.output,
            );
        }
    }
}

/// h2spec's binary, or a failure that says how to install it.
fn find_h2spec() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut candidates = std::env::var_os("H2SPEC")
        .map(PathBuf::from)
        .into_iter()
        .chain(std::env::split_paths(&path).map(|dir| dir.join("h2spec")))
        .chain(std::env::var_os("HOME").map(|home| Path::new(&home).join("go/bin/h2spec")));
    let found = candidates.find(|path| path.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "h2spec not found (in $H2SPEC, PATH or $HOME/go/bin). Install it with Go: \
             go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible (.ci/run does)"
        )
    })
}

struct Outcome {
    tests: usize,
    /// `package classname` of each test that failed, errored or was skipped.
    not_passed: Vec<String>,
    output: String,
}

/// One run of the whole suite against 127.0.0.1:`port`, read from its JUnit report.
async fn run_h2spec(h2spec: &Path, port: u16, tls: bool, report: &Path) -> Outcome {
    let mut command = std::process::Command::new(h2spec);
    command
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        // Per test: how long h2spec waits for the frame it expects. A passing run takes well
        // under a second; this bounds a failing one (and so the whole run).
        .args(["-o", "2"])
        .arg("-j")
        .arg(report);
    if tls {
        command.args(["-t", "-k"]);
    }
    // On the blocking pool, so the in-process server on the test's runtime keeps serving.
    let run = tokio::task::spawn_blocking(move || command.output());
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("h2spec did not finish in 300s")
        .unwrap()
        .expect("h2spec could not be started");
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    let xml = std::fs::read_to_string(report)
        .unwrap_or_else(|err| panic!("h2spec wrote no report ({err}):\n{text}"));
    let (tests, not_passed) = read_junit(&xml);
    if !output.status.success() && not_passed.is_empty() {
        panic!(
            "h2spec exited with {} but its report shows no failure:\n{text}",
            output.status
        );
    }
    Outcome {
        tests,
        not_passed,
        output: tail(&text, 60),
    }
}

/// The number of test cases in an h2spec JUnit report and those that did not pass. The report
/// is h2spec's own flat format: `<testcase package=".." classname="..">` elements, empty when the
/// test passed, holding `<error>`, `<failure>` or `<skipped>` otherwise.
fn read_junit(xml: &str) -> (usize, Vec<String>) {
    let mut tests = 0;
    let mut not_passed = Vec::new();
    for case in xml.split("<testcase ").skip(1) {
        tests += 1;
        let (head, rest) = case.split_once('>').unwrap_or((case, ""));
        let body = rest.split("</testcase>").next().unwrap_or("");
        if ["<error", "<failure", "<skipped"]
            .iter()
            .any(|tag| body.contains(tag))
        {
            let name = format!(
                "{} {}",
                attribute(head, "package"),
                attribute(head, "classname")
            );
            let detail = body.trim().replace('\n', " | ");
            not_passed.push(format!("{name}: {detail}"));
        }
    }
    (tests, not_passed)
}

fn attribute<'a>(head: &'a str, name: &str) -> &'a str {
    head.split_once(&format!("{name}=\""))
        .and_then(|(_, rest)| rest.split_once('"'))
        .map_or("?", |(value, _)| value)
}

/// The last `lines` lines of `text` (h2spec's summary and its list of failures).
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[test]
fn read_junit_names_what_did_not_pass() {
    let xml = r#"<testsuites>
  <testsuite name="3.5" package="http2/3.5" tests="2">
    <testcase package="http2/3.5" classname="Sends client connection preface" time="0.0006"></testcase>
    <testcase package="http2/3.5" classname="Sends invalid connection preface" time="0.0016">
      <error>Connection closed
Error: unexpected EOF</error>
    </testcase>
    <testcase package="http2/8.1" classname="Sends a second HEADERS frame" time="2.0">
      <failure>RST_STREAM Frame (Error Code: PROTOCOL_ERROR)</failure>
    </testcase>
  </testsuite>
</testsuites>"#;
    let (tests, not_passed) = read_junit(xml);
    assert_eq!(tests, 3);
    assert_eq!(not_passed.len(), 2, "{not_passed:?}");
    assert!(not_passed[0].starts_with("http2/3.5 Sends invalid connection preface: <error>"));
    assert!(not_passed[1].starts_with("http2/8.1 Sends a second HEADERS frame"));
}
