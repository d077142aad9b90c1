//! Shard rules: map a shard key value to exactly one shard index, and a range of values to the
//! shards that can hold them. See `docs/config.md` for each algorithm's definition.

pub mod collation;
mod date;
pub mod hash;
mod list;
mod range;
pub mod value;

use std::ops::Bound;

use crate::config::RuleConfig;
pub use crate::config::{Algorithm, DateUnit, KeyType, NullPolicy};
use crate::error::RouterError;
pub use crate::error::RuleError;
use collation::{Collation, collation_key};
use value::{Num, parse_number};

/// A literal or bound parameter value of the shard key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShardValue<'a> {
    Null,
    /// Any integer literal (the signed and unsigned 64-bit ranges fit).
    Int(i128),
    /// A non-integer number as written, e.g. `"12.50"` or `"1e3"`.
    Decimal(&'a str),
    /// A string literal (dates arrive as strings too).
    Str(&'a str),
}

impl std::fmt::Display for ShardValue<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShardValue::Null => f.write_str("NULL"),
            ShardValue::Int(i) => write!(f, "{i}"),
            ShardValue::Decimal(d) => f.write_str(d),
            ShardValue::Str(s) => write!(f, "'{}'", s.replace('\'', "''")),
        }
    }
}

/// A configured rule bound to a shard count.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardRule {
    name: String,
    shards: usize,
    null: NullPolicy,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Mod,
    Hash(KeyType, Collation),
    Consistent(KeyType, Collation),
    Range(range::RangeRule),
    Date(date::DateRule),
    List(list::ListRule),
}

/// A problem in a rule's parameters: the key under `rules[i]` (if any) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParamIssue {
    pub key: Option<String>,
    pub message: String,
}

impl ParamIssue {
    pub(crate) fn at(key: impl Into<String>, message: impl Into<String>) -> ParamIssue {
        ParamIssue {
            key: Some(key.into()),
            message: message.into(),
        }
    }
}

impl ShardRule {
    /// Builds a rule from its `rules:` entry for a table with `shards` shards.
    pub fn build(cfg: &RuleConfig, shards: usize) -> Result<ShardRule, RuleError> {
        Self::compile(cfg, shards).map_err(|i| match i.key {
            Some(k) => RouterError::config(format!("rule {:?}: {k}", cfg.name), i.message),
            None => RouterError::config(format!("rule {:?}", cfg.name), i.message),
        })
    }

    pub(crate) fn compile(cfg: &RuleConfig, shards: usize) -> Result<ShardRule, ParamIssue> {
        if shards == 0 {
            return Err(ParamIssue::at("shards", "a rule needs at least one shard"));
        }
        if let Some(s) = cfg.shards
            && s != shards
        {
            return Err(ParamIssue::at(
                "shards",
                format!("the rule says {s} shards but the table has {shards}"),
            ));
        }
        let alg = cfg.algorithm;
        let forbid = |present: bool, key: &str| -> Result<(), ParamIssue> {
            if present {
                Err(ParamIssue::at(
                    key,
                    format!("not a parameter of the {} algorithm", alg.as_str()),
                ))
            } else {
                Ok(())
            }
        };
        let check_index = |key: &str, i: usize| -> Result<(), ParamIssue> {
            if i >= shards {
                Err(ParamIssue::at(
                    key,
                    format!(
                        "shard {i} does not exist: the table has {shards} shards (0..{})",
                        shards - 1
                    ),
                ))
            } else {
                Ok(())
            }
        };
        if let NullPolicy::Shard(i) = cfg.null_shard {
            check_index("null_shard", i)?;
        }
        if let Some(d) = cfg.default {
            check_index("default", d)?;
        }
        let not_range_date_list =
            !matches!(alg, Algorithm::Range | Algorithm::Date | Algorithm::List);
        forbid(not_range_date_list && cfg.default.is_some(), "default")?;
        forbid(alg != Algorithm::Range && cfg.ranges.is_some(), "ranges")?;
        forbid(alg != Algorithm::List && cfg.values.is_some(), "values")?;
        forbid(alg != Algorithm::Date && cfg.start.is_some(), "start")?;
        forbid(alg != Algorithm::Date && cfg.unit.is_some(), "unit")?;
        forbid(alg != Algorithm::Date && cfg.interval.is_some(), "interval")?;
        forbid(alg == Algorithm::Date && cfg.key_type.is_some(), "key_type")?;
        let key_type = |allowed: &[KeyType], default: KeyType| -> Result<KeyType, ParamIssue> {
            let k = cfg.key_type.unwrap_or(default);
            if allowed.contains(&k) {
                Ok(k)
            } else {
                Err(ParamIssue::at(
                    "key_type",
                    format!(
                        "the {} algorithm does not take key_type {k:?}",
                        alg.as_str()
                    ),
                ))
            }
        };
        // A collation only applies to string keys.
        let collation = || -> Result<Collation, ParamIssue> {
            let string_keys = match alg {
                Algorithm::Hash | Algorithm::Consistent => cfg.key_type == Some(KeyType::String),
                Algorithm::List => cfg.key_type != Some(KeyType::Integer),
                _ => false,
            };
            match cfg.collation {
                Some(_) if !string_keys => Err(ParamIssue::at(
                    "collation",
                    "only string keys have a collation (set key_type: string)",
                )),
                c => Ok(c.unwrap_or_default()),
            }
        };
        collation()?;
        let kind = match alg {
            Algorithm::Mod => {
                key_type(&[KeyType::Integer], KeyType::Integer)?;
                Kind::Mod
            }
            Algorithm::Hash => Kind::Hash(
                key_type(&[KeyType::Integer, KeyType::String], KeyType::Integer)?,
                collation()?,
            ),
            Algorithm::Consistent => Kind::Consistent(
                key_type(&[KeyType::Integer, KeyType::String], KeyType::Integer)?,
                collation()?,
            ),
            Algorithm::Range => {
                let k = key_type(&[KeyType::Integer, KeyType::Decimal], KeyType::Integer)?;
                let r = range::RangeRule::compile(cfg, k)?;
                for (i, e) in r.entries_by_config_order().iter().enumerate() {
                    check_index(&format!("ranges[{i}].shard"), *e)?;
                }
                Kind::Range(r)
            }
            Algorithm::Date => Kind::Date(date::DateRule::compile(cfg)?),
            Algorithm::List => {
                let r = list::ListRule::compile(cfg, collation()?)?;
                for (i, e) in cfg.values.iter().flatten().enumerate() {
                    check_index(&format!("values[{i}].shard"), e.shard)?;
                }
                Kind::List(r)
            }
        };
        Ok(ShardRule {
            name: cfg.name.clone(),
            shards,
            null: cfg.null_shard,
            kind,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn algorithm(&self) -> Algorithm {
        match self.kind {
            Kind::Mod => Algorithm::Mod,
            Kind::Hash(..) => Algorithm::Hash,
            Kind::Consistent(..) => Algorithm::Consistent,
            Kind::Range(_) => Algorithm::Range,
            Kind::Date(_) => Algorithm::Date,
            Kind::List(_) => Algorithm::List,
        }
    }

    pub fn shard_count(&self) -> usize {
        self.shards
    }

    /// Exactly one shard index in `0..shard_count()` for every value, NULL included, or an error
    /// saying why (a string that is not a date for a date rule, a value no range covers and no
    /// default, a NULL when `null_shard: error`).
    pub fn route(&self, v: &ShardValue) -> Result<usize, RuleError> {
        if let ShardValue::Null = v {
            return match self.null {
                NullPolicy::Shard(i) => Ok(i),
                NullPolicy::Error => Err(RouterError::no_shard(format!(
                    "rule {:?} does not accept NULL shard keys",
                    self.name
                ))),
            };
        }
        let n = self.shards as u64;
        match &self.kind {
            Kind::Mod => {
                let num = self.number(v)?;
                Ok(num.floor.rem_euclid(i128::from(n)) as usize)
            }
            Kind::Hash(k, c) => Ok((self.stable_hash(*k, *c, v)? % n) as usize),
            Kind::Consistent(k, c) => Ok(hash::jump_consistent(
                self.stable_hash(*k, *c, v)?,
                self.shards,
            )),
            Kind::Range(r) => {
                let num = self.number(v)?;
                r.shard_of(num.floor).ok_or_else(|| {
                    RouterError::no_shard(format!(
                        "rule {:?}: no range holds {v} and the rule has no default",
                        self.name
                    ))
                })
            }
            Kind::Date(d) => d.route(&self.name, self.shards, v),
            Kind::List(l) => l.route(&self.name, v),
        }
    }

    /// The shards of an `IN` list: the union of its members' shards, ascending, without
    /// duplicates. NULL members are skipped (`x IN (1, NULL)` never matches a NULL row); an
    /// error from any other member is returned.
    pub fn route_in(&self, values: &[ShardValue]) -> Result<Vec<usize>, RuleError> {
        let mut out = Vec::with_capacity(values.len());
        for v in values {
            if *v != ShardValue::Null {
                out.push(self.route(v)?);
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// Shards that can hold values in the range between `lo` and `hi`, in ascending order without
    /// duplicates (empty when no value can lie in the range). `None` when the rule cannot narrow a
    /// range (mod, hash, consistent, string lists) or a bound is not a value the rule reads
    /// (NULL, a non-date for a date rule): the caller then scatters to every shard. Never misses a
    /// shard that can hold a matching value; NULL never matches a range, so the NULL shard is
    /// only included when it can hold matching values.
    pub fn route_range(
        &self,
        lo: Bound<&ShardValue>,
        hi: Bound<&ShardValue>,
    ) -> Option<Vec<usize>> {
        match &self.kind {
            Kind::Mod | Kind::Hash(..) | Kind::Consistent(..) => None,
            Kind::Range(r) => {
                let lo = map_bound(lo, |v| self.number(v).ok())?;
                let hi = map_bound(hi, |v| self.number(v).ok())?;
                Some(r.shards_between(lo, hi))
            }
            Kind::List(l) => {
                let lo = map_bound(lo, |v| l.number(v))?;
                let hi = map_bound(hi, |v| l.number(v))?;
                l.shards_between(lo, hi)
            }
            Kind::Date(d) => d.shards_between(self.shards, lo, hi),
        }
    }

    fn number(&self, v: &ShardValue) -> Result<Num, RuleError> {
        to_number(v).map_err(|m| m.context(format!("rule {:?}", self.name)))
    }

    fn stable_hash(&self, k: KeyType, c: Collation, v: &ShardValue) -> Result<u64, RuleError> {
        match (k, v) {
            (KeyType::String, ShardValue::Str(s)) => Ok(hash::hash_str(&collation_key(c, s))),
            (KeyType::String, _) => Err(RouterError::wrong_value(format!(
                "rule {:?} shards a string column: compare it with a quoted string, not {v} (MySQL \
                 compares a string column with a number numerically, so '042' and '42' would both match)",
                self.name
            ))),
            _ => Ok(hash::hash_int(self.number(v)?.floor)),
        }
    }
}

/// The number a value stands for on a numeric column: integers as they are, decimals and numeric
/// strings parsed (`'42'` is 42).
pub(crate) fn to_number(v: &ShardValue) -> Result<Num, RuleError> {
    match v {
        ShardValue::Int(i) => Ok(Num::int(*i)),
        ShardValue::Decimal(s) | ShardValue::Str(s) => parse_number(s).ok_or_else(|| {
            RouterError::wrong_value(format!("{v} is not a number the rule can route"))
        }),
        ShardValue::Null => Err(RouterError::wrong_value("NULL is not a number")),
    }
}

/// A range bound read as a number; `None` when the bound value cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumBound {
    Unbounded,
    Included(Num),
    Excluded(Num),
}

fn map_bound(b: Bound<&ShardValue>, f: impl Fn(&ShardValue) -> Option<Num>) -> Option<NumBound> {
    Some(match b {
        Bound::Unbounded => NumBound::Unbounded,
        Bound::Included(ShardValue::Null) | Bound::Excluded(ShardValue::Null) => return None,
        Bound::Included(v) => NumBound::Included(f(v)?),
        Bound::Excluded(v) => NumBound::Excluded(f(v)?),
    })
}

/// Integers a column of integers can hold inside the bounds, as an inclusive `[lo, hi]` with
/// `i128::MIN`/`MAX` for unbounded ends.
pub(crate) fn integer_span(lo: NumBound, hi: NumBound) -> (i128, i128) {
    let lo = match lo {
        NumBound::Unbounded => i128::MIN,
        NumBound::Included(n) => n.ceil(),
        NumBound::Excluded(n) => n.floor.saturating_add(1),
    };
    let hi = match hi {
        NumBound::Unbounded => i128::MAX,
        NumBound::Included(n) => n.floor,
        NumBound::Excluded(n) if n.integral => n.floor.saturating_sub(1),
        NumBound::Excluded(n) => n.floor,
    };
    (lo, hi)
}

/// Floors of the real numbers inside the bounds (for DECIMAL columns), as an inclusive range.
pub(crate) fn floor_span(lo: NumBound, hi: NumBound) -> (i128, i128) {
    let lo = match lo {
        NumBound::Unbounded => i128::MIN,
        NumBound::Included(n) | NumBound::Excluded(n) => n.floor,
    };
    let (_, hi) = integer_span(NumBound::Unbounded, hi);
    (lo, hi)
}

#[cfg(test)]
mod tests;
