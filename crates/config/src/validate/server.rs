//! `[server]` and `[log]`: process-wide settings, each with a default so both tables may be left
//! out.

use std::path::{Path, PathBuf};

use toml::Spanned;

use super::Cx;
use super::files::relative_note;
use crate::model::{AccessLog, AccessLogFormat, LogSettings, ServerSettings};
use crate::path::KeyPath;
use crate::raw::{RawLog, RawServer};
use crate::schema::{closest, name_hint};

pub(super) fn server(cx: &mut Cx<'_>, raw: Option<RawServer>) -> ServerSettings {
    let path = KeyPath::root().key("server");
    let raw = raw.unwrap_or_default();
    let defaults = ServerSettings::default();
    let workers = raw.workers.as_ref().map(|v| {
        // More threads than this is a typo, not a tuning decision.
        let hint = Some("leave `workers` out to run one per CPU core");
        let n = cx.count(&path.key("workers"), Some(v), 1, (1, 1024), hint);
        usize::try_from(n).unwrap_or(1)
    });
    let shutdown_timeout = cx.duration(
        &path.key("shutdown_timeout"),
        raw.shutdown_timeout.as_ref(),
        defaults.shutdown_timeout,
        true,
    );
    let server_header = match &raw.server_header {
        None => defaults.server_header,
        Some(v) if v.get_ref().is_empty() => None,
        Some(v) => match http::HeaderValue::from_str(v.get_ref()) {
            Ok(value) => Some(value),
            Err(_) => {
                let hint =
                    Some(r#"use visible ASCII characters, or "" to send no Server header"#.into());
                cx.r.error(
                    &path.key("server_header"),
                    Some(v.span()),
                    "invalid Server header value",
                    hint,
                );
                None
            }
        },
    };
    let trusted_proxies = raw
        .trusted_proxies
        .as_ref()
        .map(|v| super::trusted::trusted_proxies(cx, &path.key("trusted_proxies"), v))
        .unwrap_or_default();
    let pid_file = raw
        .pid_file
        .as_ref()
        .and_then(|v| file_to_create(cx, &path.key("pid_file"), v, "the pid file"));
    let max_connections = cx.count(
        &path.key("max_connections"),
        raw.max_connections.as_ref(),
        defaults.max_connections as u64,
        (1, 10_000_000),
        None,
    );
    ServerSettings {
        workers,
        shutdown_timeout,
        server_header,
        trusted_proxies,
        pid_file,
        max_connections: usize::try_from(max_connections).unwrap_or(usize::MAX),
    }
}

/// A file the server creates (the pid file): not empty, not a directory, in a directory that
/// exists (checking must not change the file system, so the directory is not created here).
fn file_to_create(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: &Spanned<String>,
    what: &str,
) -> Option<PathBuf> {
    match creatable(cx, value.get_ref(), what) {
        Ok(absolute) => Some(absolute),
        Err((message, hint)) => {
            cx.r.error(path, Some(value.span()), message, Some(hint));
            None
        }
    }
}

fn creatable(cx: &Cx<'_>, text: &str, what: &str) -> Result<PathBuf, (String, String)> {
    if text.trim().is_empty() {
        let hint = r#"name a file, e.g. "/run/sluice.pid", or leave the key out"#;
        return Err((format!("{what} path is empty"), hint.into()));
    }
    creatable_path(cx, text, what, "sluice.pid")
}

/// A path the server will create a file at (`what`, e.g. "the access log"): not a directory
/// (the hint names `example` inside it), in a directory that exists.
fn creatable_path(
    cx: &Cx<'_>,
    text: &str,
    what: &str,
    example: &str,
) -> Result<PathBuf, (String, String)> {
    let (shown, absolute) = cx.resolve(text);
    if absolute.is_dir() {
        return Err((
            format!("{what} `{text}` is a directory"),
            format!(
                "name a file inside it, e.g. \"{}\"",
                shown.join(example).display()
            ),
        ));
    }
    let dir = absolute.parent().filter(|d| !d.as_os_str().is_empty());
    if dir.is_some_and(|d| !d.is_dir()) {
        let shown_dir = shown
            .parent()
            .map(|d| d.display().to_string())
            .unwrap_or_default();
        return Err((
            format!("the directory of {what} `{text}` does not exist"),
            format!("create {shown_dir}{}", relative_note(Path::new(text))),
        ));
    }
    Ok(absolute)
}

pub(super) fn log(cx: &mut Cx<'_>, raw: Option<RawLog>) -> LogSettings {
    let path = KeyPath::root().key("log");
    let raw = raw.unwrap_or_default();
    let defaults = LogSettings::default();
    let level = match &raw.level {
        None => defaults.level,
        Some(v) => cx
            .non_empty(&path.key("level"), v, "the log level")
            .unwrap_or(defaults.level),
    };
    let access = match &raw.access {
        None => defaults.access,
        Some(v) => access(cx, &path.key("access"), v).unwrap_or(defaults.access),
    };
    let format = match raw.format.as_ref().map(|v| (v.get_ref().as_str(), v)) {
        None => defaults.format,
        Some(("combined", _)) => AccessLogFormat::Combined,
        Some(("json", _)) => AccessLogFormat::Json,
        Some((other, v)) => {
            let (_, hint) = name_hint(other, &["combined", "json"]);
            let message = format!("unknown access log format `{other}`");
            cx.r.error(&path.key("format"), Some(v.span()), message, Some(hint));
            defaults.format
        }
    };
    // A line is a few hundred bytes: the default queue holds a few MiB at most.
    let access_queue = cx.count(
        &path.key("access_queue"),
        raw.access_queue.as_ref(),
        defaults.access_queue as u64,
        (1, 1 << 24),
        None,
    );
    LogSettings {
        level,
        access,
        format,
        access_queue: usize::try_from(access_queue).unwrap_or(usize::MAX),
    }
}

const ACCESS_TARGETS: [&str; 3] = ["off", "stdout", "stderr"];

/// `off`, `stdout`, `stderr` or a file path whose directory exists (the file is created by the
/// server, not here: checking must not change the file system).
fn access(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<String>) -> Option<AccessLog> {
    match access_target(cx, value.get_ref()) {
        Ok(access) => Some(access),
        Err((message, hint)) => {
            cx.r.error(path, Some(value.span()), message, Some(hint));
            None
        }
    }
}

fn access_target(cx: &Cx<'_>, text: &str) -> Result<AccessLog, (String, String)> {
    match text {
        "off" => return Ok(AccessLog::Off),
        "stdout" => return Ok(AccessLog::Stdout),
        "stderr" => return Ok(AccessLog::Stderr),
        _ => {}
    }
    if text.trim().is_empty() {
        let hint = r#"write "off", "stdout", "stderr" or a file path"#;
        return Err(("the access log target is empty".into(), hint.into()));
    }
    // `stdot` is far more likely a typo than a file meant to be created next to the config.
    let plain_word = !text.contains(['/', '\\', '.']);
    if let (true, Some(meant)) = (plain_word, closest(text, ACCESS_TARGETS)) {
        return Err((
            format!("unknown access log target `{text}`"),
            format!(r#"did you mean "{meant}"? (to log to a file of that name, write "./{text}")"#),
        ));
    }
    creatable_path(cx, text, "the access log", "access.log").map(AccessLog::File)
}
