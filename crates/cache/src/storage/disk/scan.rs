//! Start-up: walks the cache directory, removes what a crash or damage left (temp files, meta
//! files that are foreign, truncated or name a missing body, bodies no meta names) and returns
//! the objects found, least recently written first, to rebuild the index.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::format::{FileName, META_HEADER_LEN, MetaHeader, body_file_len, body_name, meta_name};
use super::lru::Entry;
use crate::storage::ObjectId;

/// Removes a file whose loss does no harm (a leftover, a damaged object): a failure is logged.
pub(super) fn remove_quietly(path: &Path) {
    match fs::remove_file(path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => {
            tracing::warn!(path = %path.display(), %err, "disk cache: cannot remove file");
        }
        _ => {}
    }
}

/// Every valid object under `root`, oldest first. Creates `root` if missing. An unreadable
/// subdirectory is skipped (logged): its objects are missed, the rest of the cache still serves.
pub(super) fn scan(root: &Path) -> io::Result<Vec<(ObjectId, Entry)>> {
    fs::create_dir_all(root)?;
    let mut found = Vec::new();
    for (first, level1) in hex_dirs(root, 1)? {
        let level2 = match hex_dirs(&level1, 2) {
            Ok(dirs) => dirs,
            Err(err) => {
                warn_dir(&level1, &err);
                continue;
            }
        };
        for (next, leaf) in level2 {
            if let Err(err) = scan_leaf(&leaf, &format!("{first}{next}"), &mut found) {
                warn_dir(&leaf, &err);
            }
        }
    }
    found.sort_by_key(|(_, _, modified)| *modified);
    Ok(found
        .into_iter()
        .map(|(id, entry, _)| (id, entry))
        .collect())
}

fn warn_dir(dir: &Path, err: &io::Error) {
    tracing::warn!(dir = %dir.display(), %err, "disk cache: directory unreadable, skipped");
}

/// The subdirectories of `dir` named by `digits` lowercase hex digits, with their names.
fn hex_dirs(dir: &Path, digits: usize) -> io::Result<Vec<(String, PathBuf)>> {
    let mut dirs = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let is_hex =
            name.len() == digits && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if is_hex && entry.file_type()?.is_dir() {
            dirs.push((name, entry.path()));
        }
    }
    Ok(dirs)
}

type Found = Vec<(ObjectId, Entry, SystemTime)>;

/// Scans one leaf directory, whose ids all start with the hex digits `prefix` ("a/bc": "abc").
fn scan_leaf(dir: &Path, prefix: &str, found: &mut Found) -> io::Result<()> {
    let mut metas = Vec::new();
    let mut bodies: HashMap<(ObjectId, u64), u64> = HashMap::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(FileName::parse) else {
            continue;
        };
        let path = entry.path();
        match name {
            FileName::Temp => remove_quietly(&path),
            FileName::Meta(id) | FileName::Body(id, _) if !id.to_hex().starts_with(prefix) => {
                // Ours by name but in the wrong directory: no lookup would ever find it.
                remove_quietly(&path);
            }
            FileName::Meta(id) => metas.push(id),
            FileName::Body(id, generation) => {
                bodies.insert((id, generation), entry.metadata()?.len());
            }
            FileName::Other => {}
        }
    }
    for id in metas {
        let meta_path = dir.join(meta_name(id));
        // A valid meta takes its body out of `bodies`; whatever is left there is deleted below.
        let valid = read_header(&meta_path, id).ok().filter(|(header, _)| {
            let body = (id, header.generation);
            let matches = bodies.get(&body) == Some(&body_file_len(header.body_len));
            if matches {
                bodies.remove(&body);
            }
            matches
        });
        match valid {
            Some((header, modified)) => {
                let entry = Entry {
                    generation: header.generation,
                    body_len: header.body_len,
                    meta_len: header.meta_len,
                    meta_version: 0,
                };
                found.push((id, entry, modified));
            }
            None => {
                tracing::warn!(path = %meta_path.display(), "disk cache: damaged object removed");
                remove_quietly(&meta_path);
            }
        }
    }
    // Bodies no valid meta names: a crash between a commit's renames, a replaced body not yet
    // deleted, or the other half of a damaged object.
    for (id, generation) in bodies.into_keys() {
        remove_quietly(&dir.join(body_name(id, generation)));
    }
    Ok(())
}

/// The meta file's header, checked (magic, version, id, exact length), and its mtime.
fn read_header(path: &Path, id: ObjectId) -> io::Result<(MetaHeader, SystemTime)> {
    let mut file = File::open(path)?;
    let metadata = file.metadata()?;
    let mut head = [0u8; META_HEADER_LEN];
    file.read_exact(&mut head)?;
    let header = MetaHeader::decode(&head)
        .filter(|header| header.id == id && header.file_len() == metadata.len())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not a meta file"))?;
    Ok((header, metadata.modified()?))
}
