//! `[caches.NAME]`: the response cache's storage zones (memory budget, optional disk tier, when
//! stale responses may be served), and across zones, that no two share a disk directory. A
//! route's `cache` option, which uses a zone, is in [`route`]; the words both accept (key parts,
//! request conditions, `use_stale`) are parsed in [`words`].
//!
//! Names are the table keys, so TOML already makes them unique. A zone no route uses is valid:
//! the server simply creates no storage for it.

mod route;
pub(super) mod shared;
mod words;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use super::Cx;
use super::files::relative_note;
use crate::model::{CacheDisk, CacheZone, UseStale};
use crate::path::KeyPath;
use crate::raw::{OneOrMany, RawCacheDisk, RawCacheZone, Scalar};

pub(super) use route::{RouteFacts, route_cache};

/// The valid zones, sorted by name.
pub(super) fn zones(cx: &mut Cx<'_>, raw: BTreeMap<String, RawCacheZone>) -> Vec<CacheZone> {
    let mut valid = Vec::new();
    // (zone, directory as compared, the `path` value's place), for the shared-directory check.
    let mut disks: Vec<(String, PathBuf, Range<usize>)> = Vec::new();
    for (name, raw) in &raw {
        let path = KeyPath::root().key("caches").key(name);
        if name.trim().is_empty() {
            let hint = Some("routes name the zone in `cache.zone`, e.g. [caches.api]".into());
            cx.r.key_error(&path, "a cache zone name cannot be empty", hint);
        }
        let zone = zone(cx, &path, name, raw);
        if let (Some(disk), Some(written)) =
            (&zone.disk, raw.disk.as_ref().and_then(|d| d.path.as_ref()))
        {
            disks.push((name.clone(), comparable(&disk.path), written.span()));
        }
        valid.push(zone);
    }
    shared_disks(cx, &disks);
    valid
}

fn zone(cx: &mut Cx<'_>, path: &KeyPath, name: &str, raw: &RawCacheZone) -> CacheZone {
    let d = CacheZone::new(name);
    let reported = cx.r.len();
    let memory_hint = "the memory tier holds the hottest responses: e.g. \"64MiB\"";
    let memory = positive_size(cx, &path.key("memory"), raw.memory.as_ref(), memory_hint)
        .unwrap_or(d.memory);
    let disk = raw
        .disk
        .as_ref()
        .and_then(|raw| disk(cx, &path.key("disk"), raw));
    // A bad memory or disk was reported and stands at a default: no comparison against it.
    let limits_known = cx.r.len() == reported;
    let object_hint = "responses larger than this are streamed through: e.g. \"8MiB\"";
    let max_object_size = positive_size(
        cx,
        &path.key("max_object_size"),
        raw.max_object_size.as_ref(),
        object_hint,
    );
    // The largest stored response must fit the tier it goes to: memory without a disk, the
    // disk with one (larger than the memory budget, it lives on disk only). Left out, the
    // default shrinks to fit, as in `CacheZone::memory_only`; written, it is checked.
    let tier = disk.as_ref().map_or(memory, |disk| disk.size);
    let max_object_size = match (max_object_size, &raw.max_object_size) {
        (Some(size), Some(value)) if size > tier && limits_known => {
            too_large(cx, path, value, size, tier, disk.is_some());
            size
        }
        (Some(size), _) => size,
        (None, _) => CacheZone::DEFAULT_MAX_OBJECT_SIZE.min(tier),
    };
    let use_stale = raw.use_stale.as_ref().map_or_else(Vec::new, |value| {
        use_stale(cx, &path.key("use_stale"), value)
    });
    let heuristic = raw
        .heuristic
        .as_ref()
        .and_then(|value| heuristic(cx, &path.key("heuristic"), value));
    let shared = raw
        .shared
        .as_ref()
        .and_then(|raw| shared::shared(cx, &path.key("shared"), raw));
    CacheZone {
        shared,
        keep_tag_headers: raw.keep_tag_headers.unwrap_or(d.keep_tag_headers),
        name: name.to_owned(),
        memory,
        max_object_size,
        disk,
        use_stale,
        store_set_cookie: raw.store_set_cookie.unwrap_or(d.store_set_cookie),
        heuristic,
    }
}

/// A size above zero; `None` when absent or bad (reported).
fn positive_size(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: Option<&Spanned<Scalar>>,
    hint: &str,
) -> Option<u64> {
    let value = value?;
    let reported = cx.r.len();
    let n = cx.size(path, Some(value), 0, 0);
    if cx.r.len() != reported {
        return None;
    }
    if n == 0 {
        let message = format!("{} cannot be 0", super::values::key_name(path));
        cx.r.error(path, Some(value.span()), message, Some(hint.into()));
        return None;
    }
    Some(n)
}

fn too_large(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: &Spanned<Scalar>,
    size: u64,
    tier: u64,
    on_disk: bool,
) {
    let (what, fix) = if on_disk {
        ("the disk tier's size", "raise `disk.size`")
    } else {
        ("the memory budget", "raise `memory`, or add a disk tier")
    };
    let message = format!(
        "`max_object_size` ({}) is larger than {what} ({})",
        human_size(size),
        human_size(tier)
    );
    let hint =
        format!("a response that large could never be stored: lower `max_object_size`, or {fix}");
    cx.r.error(
        &path.key("max_object_size"),
        Some(value.span()),
        message,
        Some(hint),
    );
}

/// `8MiB` for 8388608: sizes in messages read like the sizes in the file.
fn human_size(bytes: u64) -> String {
    let units = [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    units
        .iter()
        .find(|(_, size)| bytes >= *size && bytes.is_multiple_of(*size))
        .map_or_else(
            || format!("{bytes} bytes"),
            |(unit, size)| format!("{}{unit}", bytes / size),
        )
}

fn disk(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawCacheDisk) -> Option<CacheDisk> {
    let dir = match &raw.path {
        Some(value) => disk_dir(cx, &path.key("path"), value),
        None => {
            let hint = r#"e.g. path = "/var/cache/sluice/api", a directory for this zone alone"#;
            cx.r.missing(path, "path", Some(hint.into()));
            None
        }
    };
    let size_hint = "the most the disk tier may use: e.g. \"10GiB\"";
    let size = match &raw.size {
        Some(value) => positive_size(cx, &path.key("size"), Some(value), size_hint),
        None => {
            cx.r.missing(
                path,
                "size",
                Some(format!(
                    "{size_hint}; to keep everything in memory, remove `disk`"
                )),
            );
            None
        }
    };
    Some(CacheDisk {
        path: dir?,
        size: size?,
    })
}

/// An existing directory, or a missing one whose parent exists: the server creates it at
/// start-up (checking must not change the file system), but not a chain of parents, which is
/// more likely a typo than a wish.
fn disk_dir(cx: &mut Cx<'_>, key: &KeyPath, value: &Spanned<String>) -> Option<PathBuf> {
    let written = value.get_ref();
    if written.trim().is_empty() {
        let hint = r#"a directory for this zone's files, e.g. "/var/cache/sluice/api""#;
        cx.r.error(
            key,
            Some(value.span()),
            "the disk path is empty",
            Some(hint.into()),
        );
        return None;
    }
    let (shown, absolute) = cx.resolve(written);
    if absolute.is_dir() {
        return Some(absolute);
    }
    let note = relative_note(Path::new(written));
    let (message, hint) = if absolute.exists() {
        (
            format!("the disk path `{written}` is a file, not a directory"),
            format!(
                "name a directory for the cache's files; looked at {}{note}",
                shown.display()
            ),
        )
    } else {
        let parent = absolute.parent().filter(|p| !p.as_os_str().is_empty());
        let shown_parent = shown
            .parent()
            .map_or_else(String::new, |p| p.display().to_string());
        match parent {
            None => return Some(absolute),
            Some(parent) if parent.is_dir() => return Some(absolute),
            Some(parent) if parent.exists() => (
                format!("the disk directory `{written}` does not exist, and its parent is a file"),
                format!(
                    "sluice creates the directory at start-up inside an existing one; {shown_parent} is a file{note}"
                ),
            ),
            Some(_) => (
                format!(
                    "the disk directory `{written}` does not exist, and neither does its parent"
                ),
                format!(
                    "sluice creates the directory at start-up, but not its parents: create {shown_parent}{note}"
                ),
            ),
        }
    };
    cx.r.error(key, Some(value.span()), message, Some(hint));
    None
}

/// The directory as the file system sees it, so that `cache`, `./cache` and a symbolic link to
/// it compare equal; a missing directory through its (existing) parent.
fn comparable(dir: &Path) -> PathBuf {
    if let Ok(real) = dir.canonicalize() {
        return real;
    }
    match (dir.parent().map(Path::canonicalize), dir.file_name()) {
        (Some(Ok(parent)), Some(name)) => parent.join(name),
        _ => dir.to_path_buf(),
    }
}

/// Each zone's disk tier needs a directory of its own: two tiers in one would count and evict
/// each other's files.
fn shared_disks(cx: &mut Cx<'_>, disks: &[(String, PathBuf, Range<usize>)]) {
    for (i, (zone, dir, span)) in disks.iter().enumerate() {
        let clash = disks[..i].iter().find_map(|(other, other_dir, _)| {
            if dir == other_dir {
                Some(format!(
                    "zone `{zone}` uses the same disk directory as zone `{other}`"
                ))
            } else if dir.starts_with(other_dir) {
                Some(format!(
                    "the disk directory of zone `{zone}` is inside zone `{other}`'s"
                ))
            } else if other_dir.starts_with(dir) {
                Some(format!(
                    "the disk directory of zone `{zone}` holds zone `{other}`'s"
                ))
            } else {
                None
            }
        });
        if let Some(message) = clash {
            let hint = "give each zone a directory of its own, side by side, e.g. /var/cache/sluice/api and /var/cache/sluice/pages";
            let key = KeyPath::root()
                .key("caches")
                .key(zone)
                .key("disk")
                .key("path");
            cx.r.error(&key, Some(span.clone()), message, Some(hint.into()));
        }
    }
}

/// The `use_stale` words, each once.
fn use_stale(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<OneOrMany>) -> Vec<UseStale> {
    let mut found = Vec::new();
    for item in OneOrMany::items(value) {
        match words::use_stale(item.get_ref()) {
            Ok(word) if found.contains(&word) => {
                let message = format!("`{}` is listed twice", word.token());
                let hint = Some("list each condition once".into());
                cx.r.error(path, Some(item.span()), message, hint);
            }
            Ok(word) => found.push(word),
            Err((message, hint)) => cx.r.error(path, Some(item.span()), message, hint),
        }
    }
    found
}

/// `false` (off), `true` (capped at a day) or the cap itself, a duration above zero.
fn heuristic(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<Scalar>) -> Option<Duration> {
    match value.get_ref() {
        Scalar::Bool(false) => None,
        Scalar::Bool(true) => Some(CacheZone::DEFAULT_HEURISTIC_CAP),
        _ => {
            let zero = r#"write heuristic = false to turn it off, or a cap such as "1d""#;
            let cap = CacheZone::DEFAULT_HEURISTIC_CAP;
            Some(cx.duration_or_zero(path, Some(value), cap, Some(zero)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_the_file() {
        assert_eq!(human_size(8 << 20), "8MiB");
        assert_eq!(human_size(10 << 30), "10GiB");
        assert_eq!(human_size(1536), "1536 bytes");
        assert_eq!(human_size(3 << 10), "3KiB");
        assert_eq!(human_size(0), "0 bytes");
    }
}
