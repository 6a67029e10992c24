//! Checks of single values shared by every table: durations, sizes, counts and statuses, each
//! with a message that names what was found and a hint that shows how to write it.
//!
//! Each returns a usable value even when it reported a problem (the default, or `None`), so that
//! the caller's code reads straight through; the reporter decides whether a config is built.

use std::time::Duration;

use http::StatusCode;
use toml::Spanned;

use super::Cx;
use crate::path::{KeyPath, Seg};
use crate::raw::Scalar;
use crate::units;

impl Cx<'_> {
    /// A duration such as `"30s"`; `default` when absent or bad. `allow_zero = false` refuses
    /// `"0s"` for timeouts where zero would mean "fail at once".
    pub(super) fn duration(
        &mut self,
        path: &KeyPath,
        value: Option<&Spanned<Scalar>>,
        default: Duration,
        allow_zero: bool,
    ) -> Duration {
        let zero =
            (!allow_zero).then_some(r#"a zero timeout would fail every connection; e.g. "10s""#);
        self.duration_or_zero(path, value, default, zero)
    }

    /// A duration, like [`Self::duration`]; `"0s"` is refused with `zero_hint` when one is given.
    pub(super) fn duration_or_zero(
        &mut self,
        path: &KeyPath,
        value: Option<&Spanned<Scalar>>,
        default: Duration,
        zero_hint: Option<&str>,
    ) -> Duration {
        let Some(value) = value else { return default };
        let parsed = match value.get_ref() {
            Scalar::Str(text) => units::duration(text),
            Scalar::Int(n) => Err(units::UnitError {
                message: format!("a duration needs a unit, found integer `{n}`"),
                hint: Some(format!(r#"write "{n}s""#)),
            }),
            Scalar::Float(x) => Err(units::UnitError {
                message: format!("a duration needs a unit, found number `{x}`"),
                hint: Some(format!(r#"write "{}ms""#, (x * 1000.0).round())),
            }),
            other => Err(units::UnitError {
                message: format!("expected a duration, found {}", other.describe()),
                hint: Some(r#"write e.g. "30s""#.into()),
            }),
        };
        match (parsed, zero_hint) {
            (Ok(d), Some(hint)) if d.is_zero() => {
                let message = format!("{} must be longer than 0s", key_name(path));
                self.r
                    .error(path, Some(value.span()), message, Some(hint.to_owned()));
                default
            }
            (Ok(d), _) => d,
            (Err(e), _) => {
                self.r.error(path, Some(value.span()), e.message, e.hint);
                default
            }
        }
    }

    /// A size in bytes (`65536` or `"64KiB"`), at least `min`; `default` when absent or bad.
    pub(super) fn size(
        &mut self,
        path: &KeyPath,
        value: Option<&Spanned<Scalar>>,
        default: u64,
        min: u64,
    ) -> u64 {
        let Some(value) = value else { return default };
        let parsed = match value.get_ref() {
            Scalar::Int(n) => u64::try_from(*n).map_err(|_| units::UnitError {
                message: format!("a size cannot be negative, found `{n}`"),
                hint: None,
            }),
            Scalar::Str(text) => units::size(text),
            other => Err(units::UnitError {
                message: format!("expected a size, found {}", other.describe()),
                hint: Some(r#"write bytes or a number with a unit, e.g. "64KiB""#.into()),
            }),
        };
        match parsed {
            Ok(n) if n < min => {
                let message = format!("{} must be at least {min} bytes, found {n}", key_name(path));
                self.r.error(path, Some(value.span()), message, None);
                default
            }
            Ok(n) => n,
            Err(e) => {
                self.r.error(path, Some(value.span()), e.message, e.hint);
                default
            }
        }
    }

    /// An integer, written without quotes; `None` (reported) otherwise. Range checks are the
    /// caller's, so that their messages can say what the number means.
    pub(super) fn integer(&mut self, path: &KeyPath, value: &Spanned<Scalar>) -> Option<i64> {
        let hint = match value.get_ref() {
            Scalar::Int(n) => return Some(*n),
            Scalar::Str(s) if s.trim().parse::<i64>().is_ok() => {
                Some(format!("write {} without quotes", s.trim()))
            }
            _ => None,
        };
        let message = format!("expected an integer, found {}", value.get_ref().describe());
        self.r.error(path, Some(value.span()), message, hint);
        None
    }

    /// An integer in `min..=max`; `default` when absent or bad. `hint` says what to do instead
    /// of an out-of-range value.
    pub(super) fn count(
        &mut self,
        path: &KeyPath,
        value: Option<&Spanned<Scalar>>,
        default: u64,
        (min, max): (u64, u64),
        hint: Option<&str>,
    ) -> u64 {
        let Some(value) = value else { return default };
        let Some(n) = self.integer(path, value) else {
            return default;
        };
        match u64::try_from(n) {
            Ok(n) if (min..=max).contains(&n) => n,
            _ => {
                let key = key_name(path);
                let message = if n < 0 || (n as u64) < min {
                    format!("{key} must be at least {min}, found {n}")
                } else {
                    format!("{key} must be at most {max}, found {n}")
                };
                self.r
                    .error(path, Some(value.span()), message, hint.map(str::to_owned));
                default
            }
        }
    }

    /// An HTTP status accepted by `allowed`; `default` when absent or bad.
    pub(super) fn status(
        &mut self,
        path: &KeyPath,
        value: Option<&Spanned<Scalar>>,
        default: StatusCode,
        allowed: (&dyn Fn(u16) -> bool, &str),
    ) -> StatusCode {
        let Some(value) = value else { return default };
        let Some(n) = self.integer(path, value) else {
            return default;
        };
        let (is_allowed, described) = allowed;
        let status = u16::try_from(n).ok().filter(|n| is_allowed(*n));
        match status.and_then(|n| StatusCode::from_u16(n).ok()) {
            Some(status) => status,
            None => {
                let message = format!("status {n} is not allowed here");
                self.r.error(
                    path,
                    Some(value.span()),
                    message,
                    Some(format!("use {described}")),
                );
                default
            }
        }
    }

    /// A string that must not be blank; `None` (reported) when it is.
    pub(super) fn non_empty(
        &mut self,
        path: &KeyPath,
        value: &Spanned<String>,
        what: &str,
    ) -> Option<String> {
        let text = value.get_ref().trim();
        if text.is_empty() {
            self.r.error(
                path,
                Some(value.span()),
                format!("{what} cannot be empty"),
                None,
            );
            return None;
        }
        Some(text.to_owned())
    }
}

/// The last key of `path`, quoted for a message: `` `workers` ``.
pub(super) fn key_name(path: &KeyPath) -> String {
    match path.split_last() {
        Some((Seg::Key(key), _)) => format!("`{key}`"),
        _ => "the value".into(),
    }
}
