//! Paths in the file: resolved against the config file's directory, and checked to exist now
//! rather than when the server first needs them (a missing certificate should fail `sluice
//! check`, not the first handshake).

use std::path::{Path, PathBuf};

use toml::Spanned;

use super::Cx;
use crate::path::KeyPath;

/// What a path must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
}

impl Cx<'_> {
    /// `path` as shown to the user (the base as given, joined) and as stored (absolute).
    pub(super) fn resolve(&self, path: &str) -> (PathBuf, PathBuf) {
        let shown = self.base.join(path);
        // `absolute` does not touch the file system; it only prefixes the current directory.
        let absolute = std::path::absolute(&shown).unwrap_or_else(|_| shown.clone());
        (shown, absolute)
    }

    /// The absolute path of an existing file or directory; `None` (reported) otherwise.
    pub(super) fn existing(
        &mut self,
        key: &KeyPath,
        value: &Spanned<String>,
        what: &str,
        kind: Kind,
    ) -> Option<PathBuf> {
        let written = value.get_ref();
        if written.trim().is_empty() {
            self.r.error(
                key,
                Some(value.span()),
                format!("the {what} path is empty"),
                None,
            );
            return None;
        }
        let (shown, absolute) = self.resolve(written);
        let problem = match (kind, absolute.is_file(), absolute.is_dir()) {
            (Kind::File, true, _) | (Kind::Dir, _, true) => return Some(absolute),
            (Kind::File, _, true) => format!("the {what} `{written}` is a directory, not a file"),
            (Kind::Dir, true, _) => format!("the {what} `{written}` is a file, not a directory"),
            _ => format!("the {what} `{written}` does not exist"),
        };
        let hint = format!(
            "looked for {}{}",
            shown.display(),
            relative_note(Path::new(written))
        );
        self.r.error(key, Some(value.span()), problem, Some(hint));
        None
    }
}

/// Says where a relative path was looked up, the usual surprise.
pub(super) fn relative_note(written: &Path) -> &'static str {
    if written.is_absolute() {
        ""
    } else {
        " (relative paths start at the config file's directory)"
    }
}
