//! KEP-5866's server-side sharded list and watch (Kubernetes 1.36 alpha), in one place for the
//! embedded API server, which parses and applies a `shardSelector`, and the host, which writes
//! one for the hash ranges it owns.
//!
//! A selector is `shardRange(<field>, '<start>', '<end>')`, or several joined by `||` over the
//! same field. An object is selected when the 64-bit FNV-1a hash of the field's value (its UTF-8
//! bytes) is in one of the ranges, `start <= hash < end`. Bounds are `0x`-prefixed hexadecimal;
//! the end of the last range may be `0x10000000000000000` (2^64). The fields are
//! `object.metadata.uid` and `object.metadata.namespace`.

use std::fmt;
use std::hash::Hasher as _;

/// The 64-bit FNV-1a hash of `value`, as kube-apiserver computes it for a shard selector.
pub fn hash(value: &str) -> u64 {
    // `FnvHasher::write` is FNV-1a over the bytes as given (unlike `str::hash`, which would
    // append a terminator byte).
    let mut h = fnv::FnvHasher::default();
    h.write(value.as_bytes());
    h.finish()
}

/// The field a selector hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// `object.metadata.uid`.
    Uid,
    /// `object.metadata.namespace` (empty for cluster-scoped objects).
    Namespace,
}

impl Field {
    /// The field path as a selector spells it.
    pub fn path(self) -> &'static str {
        match self {
            Self::Uid => "object.metadata.uid",
            Self::Namespace => "object.metadata.namespace",
        }
    }

    fn parse(path: &str) -> Result<Self, ShardError> {
        match path {
            "object.metadata.uid" => Ok(Self::Uid),
            "object.metadata.namespace" => Ok(Self::Namespace),
            other => Err(ShardError(format!(
                "unsupported field path {other:?}: supported are object.metadata.uid and object.metadata.namespace"
            ))),
        }
    }
}

/// `start <= hash < end`; `end` may be 2^64, hence the wider type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Range {
    /// First hash in the range.
    pub start: u64,
    /// One past the last hash in the range (at most 2^64).
    pub end: u128,
}

/// The whole hash space's end, 2^64.
pub const END: u128 = 1 << 64;

impl Range {
    /// Whether `hash` is in the range.
    pub fn contains(&self, hash: u64) -> bool {
        self.start <= hash && u128::from(hash) < self.end
    }
}

/// A parsed `shardSelector`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardSelector {
    field: Field,
    ranges: Vec<Range>,
}

/// Why a `shardSelector` cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid shardSelector: {0}")]
pub struct ShardError(String);

impl ShardSelector {
    /// A selector of `ranges` of `field`'s hash; `None` when there are no ranges (a selector
    /// must name at least one).
    pub fn new(field: Field, ranges: Vec<Range>) -> Option<Self> {
        (!ranges.is_empty()).then_some(Self { field, ranges })
    }

    /// The field hashed.
    pub fn field(&self) -> Field {
        self.field
    }

    /// The ranges, as given.
    pub fn ranges(&self) -> &[Range] {
        &self.ranges
    }

    /// Whether an object whose field has `value` is selected.
    pub fn selects(&self, value: &str) -> bool {
        let h = hash(value);
        self.ranges.iter().any(|r| r.contains(h))
    }

    /// Parses `shardRange(field, 'start', 'end') [|| shardRange(...)]...`.
    pub fn parse(text: &str) -> Result<Self, ShardError> {
        let mut field = None;
        let mut ranges = Vec::new();
        for term in text.split("||") {
            let (f, range) = parse_range(term.trim())?;
            if field.is_some_and(|seen| seen != f) {
                return Err(ShardError(
                    "all shardRange terms must hash the same field".into(),
                ));
            }
            field = Some(f);
            ranges.push(range);
        }
        let field = field.ok_or_else(|| ShardError("no shardRange".into()))?;
        Ok(Self { field, ranges })
    }
}

fn parse_range(term: &str) -> Result<(Field, Range), ShardError> {
    let args = term
        .strip_prefix("shardRange(")
        .and_then(|rest| rest.strip_suffix(')'))
        .ok_or_else(|| {
            ShardError(format!(
                "{term:?} is not shardRange(<field>, '<start>', '<end>')"
            ))
        })?;
    let parts: Vec<&str> = args.split(',').map(str::trim).collect();
    let [path, start, end] = parts[..] else {
        return Err(ShardError(format!(
            "shardRange takes a field and two bounds, not {args:?}"
        )));
    };
    let field = Field::parse(path)?;
    let start = bound(start)?;
    let end = bound(end)?;
    let start = u64::try_from(start)
        .map_err(|_| ShardError(format!("start {start:#x} is past the 64-bit hash space")))?;
    if end > END {
        return Err(ShardError(format!(
            "end {end:#x} is past 0x10000000000000000"
        )));
    }
    if u128::from(start) >= end {
        return Err(ShardError(format!(
            "start {start:#x} must be less than end {end:#x}"
        )));
    }
    Ok((field, Range { start, end }))
}

/// A quoted `0x`-prefixed hexadecimal bound.
fn bound(text: &str) -> Result<u128, ShardError> {
    let unquoted = ['\'', '"']
        .iter()
        .find_map(|q| text.strip_prefix(*q)?.strip_suffix(*q))
        .ok_or_else(|| ShardError(format!("bound {text} must be a quoted string")))?;
    let digits = unquoted
        .strip_prefix("0x")
        .filter(|d| !d.is_empty() && d.len() <= 17)
        .ok_or_else(|| {
            ShardError(format!(
                "bound {unquoted:?} must be 0x and at most 17 hex digits"
            ))
        })?;
    u128::from_str_radix(digits, 16)
        .map_err(|_| ShardError(format!("bound {unquoted:?} is not hexadecimal")))
}

impl fmt::Display for ShardSelector {
    /// The selector as the query parameter carries it (16-digit bounds, as kube's examples).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '0x{:016x}', '0x{:016x}')",
                self.field.path(),
                r.start,
                r.end
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_fnv_1a_64() {
        // The reference vectors of the FNV specification (draft-eastlake-fnv).
        assert_eq!(hash(""), 0xcbf29ce484222325);
        assert_eq!(hash("a"), 0xaf63dc4c8601ec8c);
        assert_eq!(hash("foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn selectors_parse_print_back_and_select_by_range() {
        let text = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
        let s = ShardSelector::parse(text).unwrap();
        assert_eq!(s.to_string(), text);
        assert_eq!(s.field(), Field::Uid);
        // hash("a") = 0xaf63…: in the upper half.
        assert!(!s.selects("a"));
        let upper = ShardSelector::parse(
            "shardRange(object.metadata.uid, \"0x8000000000000000\", '0x10000000000000000')",
        )
        .unwrap();
        assert!(upper.selects("a") && upper.selects(""));
        let two = ShardSelector::parse(
            "shardRange(object.metadata.namespace,'0x0','0x1') || shardRange(object.metadata.namespace, '0xcbf29ce484222325', '0xcbf29ce484222326')",
        )
        .unwrap();
        assert_eq!(two.ranges().len(), 2);
        assert!(
            two.selects(""),
            "the empty namespace hashes to the offset basis"
        );
        assert!(!two.selects("a"));
    }

    #[test]
    fn malformed_selectors_are_refused_with_the_reason() {
        for (text, why) in [
            ("", "is not shardRange"),
            (
                "shardRange(object.metadata.name, '0x0', '0x1')",
                "unsupported field path",
            ),
            (
                "shardRange(object.metadata.uid, '0x1', '0x1')",
                "must be less than",
            ),
            ("shardRange(object.metadata.uid, 0x0, '0x1')", "quoted"),
            ("shardRange(object.metadata.uid, '10', '0x1')", "0x"),
            (
                "shardRange(object.metadata.uid, '0x0', '0x10000000000000001')",
                "past",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0xzz')",
                "not hexadecimal",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0x1') || shardRange(object.metadata.namespace, '0x0', '0x1')",
                "same field",
            ),
        ] {
            let e = ShardSelector::parse(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
