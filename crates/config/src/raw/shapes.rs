//! Values that may be written in more than one shape: a number or a string ([`Scalar`]), one
//! string or a list ([`OneOrMany`]), a shorthand string or a table ([`RawTls`],
//! [`RawUpstreamServer`]); and a table of free-form keys in file order ([`Entries`]).
//!
//! Each has a hand-written `Deserialize` with one visitor per shape. `#[serde(untagged)]` would
//! be shorter but buffers the input into serde's private `Content`, which loses `Spanned`
//! positions and hides unknown keys from `serde_ignored`. A table shape is handed to its derived
//! struct through `MapAccessDeserializer`, so it stays on the same, tracked path.

use std::fmt;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

use super::{RawServerTable, RawTlsTable};

/// A number, string or boolean, judged by validation: durations, sizes, counts, statuses and
/// addresses, where people mix up `30` and `"30s"` or `200` and `"200"`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Scalar {
    /// How the value reads in a message, e.g. ``integer `30` ``.
    pub(crate) fn describe(&self) -> String {
        match self {
            Scalar::Str(s) => format!("string {s:?}"),
            Scalar::Int(i) => format!("integer `{i}`"),
            Scalar::Float(x) => format!("number `{x}`"),
            Scalar::Bool(b) => format!("boolean `{b}`"),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(v.to_owned()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
                // TOML integers are i64; saturating keeps a wild value wild for validation.
                Ok(Scalar::Int(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(v))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// `"a"` or `["a", "b"]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OneOrMany {
    One(String),
    Many(Vec<Spanned<String>>),
}

impl OneOrMany {
    /// The items with their places; a lone string's place is the whole value's.
    pub(crate) fn items(value: &Spanned<OneOrMany>) -> Vec<Spanned<String>> {
        match value.get_ref() {
            OneOrMany::One(s) => vec![Spanned::new(value.span(), s.clone())],
            OneOrMany::Many(items) => items.clone(),
        }
    }
}

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OneOrMany;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of strings")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<OneOrMany, E> {
                Ok(OneOrMany::One(v.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OneOrMany, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(OneOrMany::Many(items))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// `true` / `false`, or a list of strings: a switch whose "on" can be narrowed down, like
/// `precompressed = true` or `precompressed = ["br", "gzip"]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BoolOrList {
    Bool(bool),
    List(Vec<Spanned<String>>),
}

impl<'de> Deserialize<'de> for BoolOrList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BoolOrList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false or an array of strings")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<BoolOrList, E> {
                Ok(BoolOrList::Bool(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<BoolOrList, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(BoolOrList::List(items))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// A table of free-form keys (header names), kept in file order: `BTreeMap` would sort
/// `"X-Env"` before `"x-b"`, an order neither written nor meaningful.
#[derive(Debug, Default)]
pub(crate) struct Entries(pub Vec<(String, Spanned<String>)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a table of header names and values, like { "x-env" = "prod" }"#)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// `tls = "self-signed"` or a `[listeners.tls]` table.
#[derive(Debug)]
pub(crate) enum RawTls {
    /// The shorthand; validation checks it says `self-signed`.
    Shorthand(String),
    Table(RawTlsTable),
}

impl<'de> Deserialize<'de> for RawTls {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawTls;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#""self-signed" or a table with cert and key"#)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawTls, E> {
                Ok(RawTls::Shorthand(v.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawTls, A::Error> {
                RawTlsTable::deserialize(MapAccessDeserializer::new(map)).map(RawTls::Table)
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// `"host:port"` or `{ address = "host:port", weight = 3, ... }`.
#[derive(Debug)]
pub(crate) enum RawUpstreamServer {
    Short(String),
    Table(RawServerTable),
}

impl<'de> Deserialize<'de> for RawUpstreamServer {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawUpstreamServer;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a "host:port" string or a table { address, weight, ... }"#)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawUpstreamServer, E> {
                Ok(RawUpstreamServer::Short(v.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawUpstreamServer, A::Error> {
                RawServerTable::deserialize(MapAccessDeserializer::new(map))
                    .map(RawUpstreamServer::Table)
            }
        }
        deserializer.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Doc {
        a: Spanned<Scalar>,
        b: Spanned<Scalar>,
        one: Spanned<OneOrMany>,
        many: Spanned<OneOrMany>,
        tls: RawTls,
        servers: Vec<RawUpstreamServer>,
        set: Entries,
    }

    #[test]
    fn each_shape_deserializes_with_its_place() {
        let text = r#"
a = 30
b = "30s"
one = "x"
many = ["y", "z"]
tls = "self-signed"
servers = ["h:1", { address = "h:2", weight = 3 }]
set = { "X-Env" = "prod", "x-b" = "2" }
"#;
        let doc: Doc = toml::from_str(text).unwrap();
        assert_eq!(doc.a.get_ref(), &Scalar::Int(30));
        assert_eq!(doc.b.get_ref(), &Scalar::Str("30s".into()));
        assert_eq!(&text[doc.b.span()], "\"30s\"");
        let one = OneOrMany::items(&doc.one);
        assert_eq!(
            (one[0].get_ref().as_str(), &text[one[0].span()]),
            ("x", "\"x\"")
        );
        let many = OneOrMany::items(&doc.many);
        assert_eq!(&text[many[1].span()], "\"z\"");
        assert!(matches!(doc.tls, RawTls::Shorthand(s) if s == "self-signed"));
        assert!(matches!(&doc.servers[0], RawUpstreamServer::Short(s) if s == "h:1"));
        let RawUpstreamServer::Table(table) = &doc.servers[1] else {
            panic!("not a table")
        };
        assert_eq!(table.weight.as_ref().unwrap().get_ref(), &Scalar::Int(3));
        let names: Vec<&str> = doc.set.0.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["X-Env", "x-b"], "file order");
        assert_eq!(&text[doc.set.0[1].1.span()], "\"2\"");
    }

    #[test]
    fn the_table_shape_of_tls_keeps_unknown_keys_visible() {
        let text = "[tls]\ncert = \"c\"\nkee = \"k\"\n";
        #[derive(Deserialize)]
        struct T {
            #[allow(dead_code)]
            tls: RawTls,
        }
        let mut ignored = Vec::new();
        let de = toml::de::Deserializer::parse(text).unwrap();
        let _: T = serde_ignored::deserialize(de, |p| ignored.push(p.to_string())).unwrap();
        assert_eq!(ignored, ["tls.kee"]);
    }
}
