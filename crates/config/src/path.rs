//! Key paths such as `listeners[0].tls.sni[1].cert`: where a value sits in the document.
//!
//! Every problem carries one. It is shown to the user, and it is how a problem without a span of
//! its own (a missing key, a table-level mistake) is found in the parsed document ([`crate::source`]).

use std::fmt;

/// One step into the document: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// A path from the document's root; empty means the root itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyPath(Vec<Seg>);

impl KeyPath {
    pub(crate) fn root() -> Self {
        Self(Vec::new())
    }

    /// This path extended by a table key.
    pub(crate) fn key(&self, key: &str) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.to_owned()));
        Self(segs)
    }

    /// This path extended by an array index.
    pub(crate) fn index(&self, index: usize) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        Self(segs)
    }

    pub(crate) fn segs(&self) -> &[Seg] {
        &self.0
    }

    pub(crate) fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The last step and the path of its parent; `None` at the root.
    pub(crate) fn split_last(&self) -> Option<(&Seg, KeyPath)> {
        let (last, parent) = self.0.split_last()?;
        Some((last, KeyPath(parent.to_vec())))
    }

    /// Converts a path reported by `serde_ignored`. Its `Option` and newtype steps are not in the
    /// document, and neither is the private field `toml::Spanned` deserializes through, so they
    /// are dropped.
    pub(crate) fn from_ignored(path: &serde_ignored::Path<'_>) -> Self {
        let mut segs = Vec::new();
        collect(path, &mut segs);
        Self(segs)
    }
}

fn collect(path: &serde_ignored::Path<'_>, out: &mut Vec<Seg>) {
    use serde_ignored::Path;
    match path {
        Path::Root => {}
        Path::Seq { parent, index } => {
            collect(parent, out);
            out.push(Seg::Index(*index));
        }
        Path::Map { parent, key } => {
            collect(parent, out);
            if !key.starts_with("$__serde_spanned_private") {
                out.push(Seg::Key(key.clone()));
            }
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => {
            collect(parent, out);
        }
    }
}

/// A key as it would be written in TOML: bare when it can be, quoted otherwise.
pub(crate) struct TomlKey<'a>(pub &'a str);

impl fmt::Display for TomlKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bare = !self.0.is_empty()
            && self
                .0
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if bare {
            f.write_str(self.0)
        } else {
            write!(f, "{:?}", self.0)
        }
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(key) if i == 0 => write!(f, "{}", TomlKey(key))?,
                Seg::Key(key) => write!(f, ".{}", TomlKey(key))?,
                Seg::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_keys_indices_and_quoted_keys() {
        let path = KeyPath::root()
            .key("listeners")
            .index(0)
            .key("tls")
            .key("sni")
            .index(2);
        assert_eq!(path.to_string(), "listeners[0].tls.sni[2]");
        let path = KeyPath::root()
            .key("upstreams")
            .key("my api")
            .key("servers");
        assert_eq!(path.to_string(), r#"upstreams."my api".servers"#);
        assert_eq!(KeyPath::root().to_string(), "");
    }

    #[test]
    fn split_last_gives_parent() {
        let path = KeyPath::root().key("routes").index(1).key("statc");
        let (last, parent) = path.split_last().unwrap();
        assert_eq!(last, &Seg::Key("statc".into()));
        assert_eq!(parent.to_string(), "routes[1]");
        assert!(KeyPath::root().split_last().is_none());
    }
}
