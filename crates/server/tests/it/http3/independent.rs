//! HTTP/3 with clients sluice shares no code with: ngtcp2's `gtlsclient` (Debian's
//! `ngtcp2-client`, C, GnuTLS) and aioquic's `http3_client.py` (Python, from its PyPI sdist, in
//! a venv under target/: `scripts/test` makes it; `$AIOQUIC_HTTP3_CLIENT` names the script and
//! `$AIOQUIC_PYTHON` the venv's python). Each GETs the 10 MB file byte-exact, POSTs 1 MB through
//! the proxy to an upstream that hashes it, receives trailers, and runs 100 streams on one
//! connection.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sluice_testkit::external;

use super::{LARGE, h3_server, large_file, sha256};

/// A run of an external client, bounded in time.
pub(super) async fn run(mut command: Command) -> std::process::Output {
    let shown = format!("{command:?}");
    let output = tokio::task::spawn_blocking(move || {
        command.stdin(std::process::Stdio::null()).output().unwrap()
    });
    tokio::time::timeout(Duration::from_secs(120), output)
        .await
        .unwrap_or_else(|_| panic!("{shown} did not finish in 120 s"))
        .unwrap()
}

fn post_body() -> Vec<u8> {
    (0..1024 * 1024).map(|i| (i * 7 % 253) as u8).collect()
}

const GTLSCLIENT_INSTALL: &str = "apt-get install ngtcp2-client";

/// `gtlsclient` against `port` for `uris`, with `args` first; downloads go to `dir`.
fn gtlsclient(program: &Path, dir: &Path, port: u16, args: &[&str], uris: &[String]) -> Command {
    let mut command = Command::new(program);
    command
        .args(["--exit-on-all-streams-close", "--timeout=20s"])
        .arg(format!("--download={}", dir.display()))
        .args(args)
        .args(["127.0.0.1", &port.to_string()])
        .args(uris);
    command
}

#[tokio::test]
async fn ngtcp2_client_gets_posts_receives_trailers_and_runs_100_streams() {
    let Some(program) = external::require("gtlsclient", GTLSCLIENT_INSTALL) else {
        return;
    };
    let server = h3_server("").await;
    let port = server.addr("site").port();
    let url = |path: &str| format!("https://localhost:{port}{path}");
    let dir = tempfile::tempdir().unwrap();

    // 10 MB, byte-exact.
    let out = run(gtlsclient(
        &program,
        dir.path(),
        port,
        &["-q"],
        &[url("/static/large.bin")],
    ))
    .await;
    assert!(out.status.success(), "{out:?}");
    let got = std::fs::read(dir.path().join("large.bin")).unwrap();
    assert_eq!(got.len(), LARGE);
    assert!(got == large_file(), "10 MB file differs over h3 (ngtcp2)");

    // 1 MB POST through the proxy; the upstream's hash is the body's.
    let body = post_body();
    let body_file = dir.path().join("body.bin");
    std::fs::write(&body_file, &body).unwrap();
    let data = format!("--data={}", body_file.display());
    let out = run(gtlsclient(
        &program,
        dir.path(),
        port,
        &["-q", "-m", "POST", &data],
        &[url("/up/hash")],
    ))
    .await;
    assert!(out.status.success(), "{out:?}");
    let answer = std::fs::read_to_string(dir.path().join("hash")).unwrap();
    assert_eq!(answer, format!("{} {}", sha256(&body), body.len()));

    // Trailers: gtlsclient prints the header sections it receives (without -q).
    let out = run(gtlsclient(
        &program,
        dir.path(),
        port,
        &[],
        &[url("/up/trailers")],
    ))
    .await;
    assert!(out.status.success(), "{out:?}");
    let printed =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("grpc-status: 0"),
        "no trailer in gtlsclient's output"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("trailers")).unwrap(),
        "before the trailers"
    );

    // 100 requests on one connection, all at once (the listener allows 250 streams).
    let out = run(gtlsclient(
        &program,
        dir.path(),
        port,
        &["-q", "-n", "100"],
        &[url("/up/many")],
    ))
    .await;
    assert!(out.status.success(), "{out:?}");
    let text = crate::scrape_metrics(&server).await;
    let h3 = crate::metric(
        &text,
        "sluice_protocol_requests_total{listener=\"site\",protocol=\"h3\"}",
    );
    assert_eq!(h3, 103.0, "every request arrived over h3");
    let connections = crate::metric(&text, "sluice_connections_total{listener=\"site\"}");
    assert_eq!(connections, 4.0, "one connection per gtlsclient run");
}

/// Where `scripts/test` puts aioquic: a venv with the PyPI package, and the example client
/// from the same version's sdist (the wheel has no examples).
const AIOQUIC_VENV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/h3-venv");

/// aioquic's example client: (python, script). `$AIOQUIC_HTTP3_CLIENT` names another script.
fn aioquic() -> Option<(PathBuf, PathBuf)> {
    let venv = Path::new(AIOQUIC_VENV);
    let script = venv.join("examples/http3_client.py");
    if script.is_file() && venv.join("bin/python").is_file() {
        return Some((venv.join("bin/python"), script));
    }
    let install = "scripts/test makes it: python3 -m venv target/h3-venv; \
                   target/h3-venv/bin/pip install aioquic==1.7.2; examples/http3_client.py of \
                   the aioquic-1.7.2 sdist (pip download --no-binary :all:) into target/h3-venv/examples/";
    let script = external::require("aioquic-http3-client", install)?;
    let python = script.parent()?.parent()?.join("bin/python");
    Some((python, script))
}

/// The client run in-process by a two-line wrapper, so that a 1 MB POST body (`--data` takes
/// the body itself, as a string) need not fit in one command-line argument (128 KiB on Linux):
/// the wrapper reads it from `data`.
fn aioquic_client(
    (python, script): &(PathBuf, PathBuf),
    dir: &Path,
    data: Option<&Path>,
    args: &[&str],
    urls: &[String],
) -> Command {
    let wrapper = "import runpy, sys\n\
                   argv = sys.argv[1:]\n\
                   if argv[0] != '-':\n    argv = ['--data', open(argv[0]).read()] + argv[1:]\n\
                   else:\n    argv = argv[1:]\n\
                   sys.argv = [sys.argv[0]] + argv\n\
                   runpy.run_path(SCRIPT, run_name='__main__')\n";
    let wrapper = wrapper.replace("SCRIPT", &format!("{:?}", script.display().to_string()));
    let mut command = Command::new(python);
    command
        .args(["-c", &wrapper])
        .arg(data.map_or_else(|| "-".into(), |d| d.display().to_string()))
        .args(["--insecure", "--output-dir"])
        .arg(dir)
        .args(args)
        .args(urls);
    command
}

#[tokio::test]
async fn aioquic_client_gets_posts_receives_trailers_and_runs_100_streams() {
    let Some(client) = aioquic() else {
        return;
    };
    let server = h3_server("").await;
    let port = server.addr("site").port();
    let url = |path: &str| format!("https://localhost:{port}{path}");
    let dir = tempfile::tempdir().unwrap();

    let out = run(aioquic_client(
        &client,
        dir.path(),
        None,
        &[],
        &[url("/static/large.bin")],
    ))
    .await;
    assert!(out.status.success(), "{out:?}");
    let got = std::fs::read(dir.path().join("large.bin")).unwrap();
    assert_eq!(got.len(), LARGE);
    assert!(got == large_file(), "10 MB file differs over h3 (aioquic)");

    // The client sends `--data` as UTF-8 text: a 1 MB body of printable bytes.
    let body: Vec<u8> = post_body().iter().map(|b| b'!' + b % 90).collect();
    let body_file = dir.path().join("body.txt");
    std::fs::write(&body_file, &body).unwrap();
    let out = run(aioquic_client(
        &client,
        dir.path(),
        Some(&body_file),
        &[],
        &[url("/up/hash")],
    ))
    .await;
    assert!(out.status.success(), "{out:?}");
    let answer = std::fs::read_to_string(dir.path().join("hash")).unwrap();
    assert_eq!(answer, format!("{} {}", sha256(&body), body.len()));

    // Trailers: with --include the client writes every header section it received, the
    // trailer section after the body.
    let out = run(aioquic_client(
        &client,
        dir.path(),
        None,
        &["--include"],
        &[url("/up/trailers")],
    ))
    .await;
    assert!(out.status.success(), "{out:?}");
    let written = std::fs::read_to_string(dir.path().join("trailers")).unwrap();
    assert!(
        written.ends_with("before the trailersgrpc-status: 0\r\n\r\n"),
        "{written:?}"
    );

    // 100 URLs on one connection, requested concurrently.
    let urls: Vec<String> = (0..100).map(|i| url(&format!("/up/m{i}"))).collect();
    let out = run(aioquic_client(&client, dir.path(), None, &[], &urls)).await;
    assert!(out.status.success(), "{out:?}");
    for i in 0..100 {
        let got = std::fs::read_to_string(dir.path().join(format!("m{i}"))).unwrap();
        assert_eq!(got, format!("upstream saw /m{i}\n"));
    }
    let text = crate::scrape_metrics(&server).await;
    let connections = crate::metric(&text, "sluice_connections_total{listener=\"site\"}");
    assert_eq!(connections, 4.0, "one connection per aioquic run");
}
