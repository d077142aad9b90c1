//! `range`: half-open integer intervals `[from, to)`, each mapped to a shard, plus an optional
//! default for values no interval holds.

use super::{NumBound, ParamIssue, floor_span, integer_span};
use crate::config::{KeyType, RuleConfig, Scalar};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RangeRule {
    key: KeyType,
    /// Sorted by `from`; non-overlapping. Bounds inclusive: `[first, last]`.
    entries: Vec<Entry>,
    /// Shards as configured, for index checks that name `ranges[i]`.
    config_shards: Vec<usize>,
    default: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    first: i128,
    last: i128,
    shard: usize,
}

fn bound(v: &Option<Scalar>, key: String) -> Result<Option<i128>, ParamIssue> {
    match v {
        None => Ok(None),
        Some(Scalar::Int(i)) => Ok(Some(*i)),
        Some(Scalar::Str(s)) => match super::value::parse_number(s) {
            Some(n) if n.integral => Ok(Some(n.floor)),
            _ => Err(ParamIssue::at(key, format!("{s:?} is not an integer"))),
        },
    }
}

impl RangeRule {
    /// The lowest value of the first range, if it has one.
    pub(crate) fn first_value(&self) -> Option<i128> {
        self.entries.first().map(|e| e.first)
    }

    pub(crate) fn compile(cfg: &RuleConfig, key: KeyType) -> Result<RangeRule, ParamIssue> {
        let Some(ranges) = &cfg.ranges else {
            return Err(ParamIssue::at("ranges", "a range rule needs `ranges`"));
        };
        if ranges.is_empty() {
            return Err(ParamIssue::at("ranges", "empty list"));
        }
        let mut entries = Vec::with_capacity(ranges.len());
        for (i, r) in ranges.iter().enumerate() {
            let from = bound(&r.from, format!("ranges[{i}].from"))?;
            let to = bound(&r.to, format!("ranges[{i}].to"))?;
            if let (Some(f), Some(t)) = (from, to)
                && f >= t
            {
                return Err(ParamIssue::at(
                    format!("ranges[{i}]"),
                    format!("empty interval: from {f} is not below to {t} (to is exclusive)"),
                ));
            }
            entries.push((
                i,
                Entry {
                    first: from.unwrap_or(i128::MIN),
                    last: to.map_or(i128::MAX, |t| t - 1),
                    shard: r.shard,
                },
            ));
        }
        entries.sort_by_key(|(_, e)| e.first);
        for w in entries.windows(2) {
            let ((ia, a), (ib, b)) = (&w[0], &w[1]);
            if b.first <= a.last {
                return Err(ParamIssue::at(
                    format!("ranges[{ib}]"),
                    format!("overlaps ranges[{ia}]"),
                ));
            }
        }
        Ok(RangeRule {
            key,
            entries: entries.into_iter().map(|(_, e)| e).collect(),
            config_shards: ranges.iter().map(|r| r.shard).collect(),
            default: cfg.default,
        })
    }

    /// A DECIMAL key (fractions between the integer bounds).
    pub(crate) fn decimal(&self) -> bool {
        self.key == KeyType::Decimal
    }

    pub(crate) fn entries_by_config_order(&self) -> &[usize] {
        &self.config_shards
    }

    /// The shard whose interval holds `floor` (a value in `[from, to)` with integer bounds is
    /// exactly a value whose floor is in it), else the default.
    pub(crate) fn shard_of(&self, floor: i128) -> Option<usize> {
        let i = self.entries.partition_point(|e| e.first <= floor);
        if i > 0 && self.entries[i - 1].last >= floor {
            Some(self.entries[i - 1].shard)
        } else {
            self.default
        }
    }

    pub(crate) fn shards_between(&self, lo: NumBound, hi: NumBound) -> Vec<usize> {
        let (a, b) = match self.key {
            KeyType::Decimal => floor_span(lo, hi),
            _ => integer_span(lo, hi),
        };
        let mut out = Vec::new();
        if a > b {
            return out;
        }
        // Walk the intervals that meet [a, b], noting any gap (which the default holds).
        let mut pos = a;
        let mut covered_to_end = false;
        let mut gap = false;
        for e in &self.entries {
            if e.last < pos {
                continue;
            }
            if e.first > b {
                break;
            }
            if e.first > pos {
                gap = true;
            }
            out.push(e.shard);
            if e.last >= b {
                covered_to_end = true;
                break;
            }
            pos = e.last + 1;
        }
        if !covered_to_end {
            gap = true;
        }
        if gap && let Some(d) = self.default {
            out.push(d);
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}
