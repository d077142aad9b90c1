//! `list`: explicit values per shard, plus an optional default for unlisted values.

use std::collections::{BTreeMap, HashMap};

use super::collation::{Collation, collation_key};
use super::value::parse_number;
use super::{NumBound, ParamIssue, ShardValue, integer_span};
use crate::config::{KeyType, RuleConfig, Scalar};
use crate::error::{RouterError, RuleError};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ListRule {
    Integer {
        map: BTreeMap<i128, usize>,
        default: Option<usize>,
    },
    String {
        map: HashMap<String, usize>,
        default: Option<usize>,
        collation: Collation,
    },
}

fn as_integer(v: &Scalar) -> Option<i128> {
    match v {
        Scalar::Int(i) => Some(*i),
        Scalar::Str(s) => parse_number(s).filter(|n| n.integral).map(|n| n.floor),
    }
}

impl ListRule {
    pub(crate) fn compile(cfg: &RuleConfig, collation: Collation) -> Result<ListRule, ParamIssue> {
        let Some(entries) = &cfg.values else {
            return Err(ParamIssue::at("values", "a list rule needs `values`"));
        };
        if entries.iter().all(|e| e.values.is_empty()) {
            return Err(ParamIssue::at("values", "no values listed"));
        }
        // Without key_type: integers if every value is one, else strings.
        let key = cfg.key_type.unwrap_or_else(|| {
            if entries
                .iter()
                .flat_map(|e| &e.values)
                .all(|v| as_integer(v).is_some())
            {
                KeyType::Integer
            } else {
                KeyType::String
            }
        });
        let dup = |i: usize, j: usize, v: &Scalar, prev: usize| {
            ParamIssue::at(
                format!("values[{i}].values[{j}]"),
                format!("{v} is listed twice (also for shard {prev})"),
            )
        };
        match key {
            KeyType::Integer => {
                let mut map = BTreeMap::new();
                for (i, e) in entries.iter().enumerate() {
                    for (j, v) in e.values.iter().enumerate() {
                        let Some(n) = as_integer(v) else {
                            return Err(ParamIssue::at(
                                format!("values[{i}].values[{j}]"),
                                format!("{v} is not an integer (key_type is integer)"),
                            ));
                        };
                        if let Some(prev) = map.insert(n, e.shard) {
                            return Err(dup(i, j, v, prev));
                        }
                    }
                }
                Ok(ListRule::Integer {
                    map,
                    default: cfg.default,
                })
            }
            KeyType::String => {
                let mut map = HashMap::new();
                for (i, e) in entries.iter().enumerate() {
                    for (j, v) in e.values.iter().enumerate() {
                        let text = match v {
                            Scalar::Int(n) => n.to_string(),
                            Scalar::Str(s) => collation_key(collation, s).into_owned(),
                        };
                        if let Some(prev) = map.insert(text, e.shard) {
                            return Err(dup(i, j, v, prev));
                        }
                    }
                }
                Ok(ListRule::String {
                    map,
                    default: cfg.default,
                    collation,
                })
            }
            KeyType::Decimal => Err(ParamIssue::at(
                "key_type",
                "the list algorithm takes key_type integer or string",
            )),
        }
    }

    pub(crate) fn is_integer(&self) -> bool {
        matches!(self, ListRule::Integer { .. })
    }

    /// The shard of an integer key value: its entry, else the default.
    pub(crate) fn shard_of_int(&self, n: i128) -> Option<usize> {
        match self {
            ListRule::Integer { map, default } => map.get(&n).copied().or(*default),
            ListRule::String { .. } => None,
        }
    }

    /// The shard of a string key value (an integer is stored in a string column as its digits).
    pub(crate) fn route(&self, rule: &str, v: &ShardValue) -> Result<usize, RuleError> {
        let ListRule::String {
            map,
            default,
            collation,
        } = self
        else {
            return Err(RouterError::wrong_value(format!(
                "rule {rule:?} lists integers: {v} is not one"
            )));
        };
        let digits;
        let s = match v {
            ShardValue::Str(s) => *s,
            ShardValue::Int(i) => {
                digits = i.to_string();
                &digits
            }
            // Bytes a binary column stores that are not UTF-8: no listed (UTF-8) value.
            ShardValue::Bytes(_) if *collation == Collation::Binary => {
                return default.ok_or_else(|| {
                    RouterError::no_shard(format!(
                        "rule {rule:?}: {v} is not listed and the rule has no default"
                    ))
                });
            }
            _ => {
                return Err(RouterError::wrong_value(format!(
                    "rule {rule:?} lists strings: compare the column with a quoted string, not {v}"
                )));
            }
        };
        map.get(collation_key(*collation, s).as_ref())
            .copied()
            .or(*default)
            .ok_or_else(|| {
                RouterError::no_shard(format!(
                    "rule {rule:?}: {v} is not listed and the rule has no default"
                ))
            })
    }

    pub(crate) fn shards_between(&self, lo: NumBound, hi: NumBound) -> Option<Vec<usize>> {
        let ListRule::Integer { map, default } = self else {
            return None;
        };
        let (a, b) = integer_span(lo, hi);
        let mut out = Vec::new();
        if a > b {
            return Some(out);
        }
        let mut listed: u128 = 0;
        for (_, &s) in map.range(a..=b) {
            out.push(s);
            listed += 1;
        }
        // Unlisted integers inside the range belong to the default shard.
        let span = (b as u128).wrapping_sub(a as u128).wrapping_add(1);
        let all_listed = span != 0 && listed == span;
        if !all_listed && let Some(d) = default {
            out.push(*d);
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }
}
