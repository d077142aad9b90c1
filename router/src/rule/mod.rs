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
use value::{Exact, Num, parse_exact, parse_number};

/// A literal or bound parameter value of the shard key, typed as MariaDB types it (the type
/// decides how MariaDB compares it with the column and what it stores).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ShardValue<'a> {
    Null,
    /// Any integer literal (the signed and unsigned 64-bit ranges fit).
    Int(i128),
    /// An exact non-integer number as written (a DECIMAL literal), e.g. `"12.50"`.
    Decimal(&'a str),
    /// An approximate number: a literal with an exponent (`1e3`) or a DOUBLE/FLOAT parameter.
    /// MariaDB compares it with a number column as doubles and stores it rounded half to even.
    Double(f64),
    /// A string literal (dates arrive as strings too).
    Str(&'a str),
    /// A string as the bytes a `binary` collation column stores, where they are not UTF-8 (a
    /// literal of a client whose character set is not UTF-8).
    Bytes(&'a [u8]),
}

impl ShardValue<'_> {
    /// Compared with a number column as a double (a DOUBLE, or a string: MariaDB compares a
    /// string with a number as doubles).
    pub fn is_approximate(&self) -> bool {
        matches!(
            self,
            ShardValue::Double(_) | ShardValue::Str(_) | ShardValue::Bytes(_)
        )
    }

    /// The value as a double, for a comparison MariaDB makes in doubles; `None` when it is not a
    /// clean number.
    pub fn as_double(&self) -> Option<f64> {
        match self {
            ShardValue::Int(i) => Some(*i as f64),
            ShardValue::Decimal(s) | ShardValue::Str(s) => value::parse_double(s),
            ShardValue::Double(d) => d.is_finite().then_some(*d),
            ShardValue::Null | ShardValue::Bytes(_) => None,
        }
    }
}

impl std::fmt::Display for ShardValue<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShardValue::Null => f.write_str("NULL"),
            ShardValue::Int(i) => write!(f, "{i}"),
            ShardValue::Decimal(d) => f.write_str(d),
            ShardValue::Double(d) => write!(f, "{d:e}"),
            ShardValue::Str(s) => write!(f, "'{}'", s.replace('\'', "''")),
            ShardValue::Bytes(b) => {
                f.write_str("X'")?;
                for x in *b {
                    write!(f, "{x:02X}")?;
                }
                f.write_str("'")
            }
        }
    }
}

/// A configured rule bound to a shard count.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardRule {
    name: String,
    shards: usize,
    /// DECIMAL keys: the column's scale, when configured.
    scale: Option<u32>,
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
    /// Whether `other` puts every key on the same shard as this rule (its name aside): what a
    /// reload must keep for a table whose rows are already placed.
    pub fn same_placement(&self, other: &ShardRule) -> bool {
        self.shards == other.shards
            && self.scale == other.scale
            && self.null == other.null
            && self.kind == other.kind
    }

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
        forbid(
            cfg.scale.is_some()
                && !(alg == Algorithm::Range && cfg.key_type == Some(KeyType::Decimal)),
            "scale",
        )?;
        if cfg.scale.is_some_and(|s| s > 38) {
            return Err(ParamIssue::at("scale", "a DECIMAL scale is at most 38"));
        }
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
            scale: cfg.scale,
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

    /// The shard of the row MariaDB stores when this value is inserted into the key column:
    /// exactly one shard index in `0..shard_count()`, or an error saying why there is none (a
    /// string MariaDB would truncate or reject, a value out of every integer column's range, a
    /// string that is not a date for a date rule, a value no range covers and no default, a NULL
    /// when `null_shard: error`). Numbers are rounded as MariaDB rounds them on INSERT: exact
    /// values and numeric strings half away from zero (4.5 and '4.5' are stored as 5), DOUBLEs
    /// half to even (2.5e0 is stored as 2), DECIMAL keys to the configured `scale`.
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
        match &self.kind {
            Kind::Mod | Kind::Hash(KeyType::Integer | KeyType::Decimal, _) => {
                let n = self.stored_integer(v)?;
                self.int_shard(n).ok_or_else(|| self.unplaced(v))
            }
            Kind::Consistent(KeyType::Integer | KeyType::Decimal, _) => {
                let n = self.stored_integer(v)?;
                self.int_shard(n).ok_or_else(|| self.unplaced(v))
            }
            Kind::Hash(KeyType::String, c) | Kind::Consistent(KeyType::String, c) => {
                let h = self.string_hash(*c, v)?;
                Ok(self.hash_shard(h))
            }
            Kind::Range(r) => {
                let floor = if r.decimal() {
                    self.stored_decimal_floor(v)?
                } else {
                    self.stored_integer(v)?
                };
                r.shard_of(floor).ok_or_else(|| self.unplaced(v))
            }
            Kind::List(l) if l.is_integer() => {
                let n = self.stored_integer(v)?;
                l.shard_of_int(n).ok_or_else(|| self.unplaced(v))
            }
            Kind::List(l) => l.route(&self.name, v),
            Kind::Date(d) => d.route(&self.name, self.shards, v),
        }
    }

    /// A value this rule places on some shard: a stand-in where a statement must be planned
    /// before its values are known (a prepared INSERT's metadata is read at PREPARE, where a
    /// date rule refuses `0`). `None` when none of the candidates is placed.
    pub fn sample_value(&self) -> Option<crate::sql::stmt::Literal> {
        use crate::sql::stmt::Literal;
        let mut candidates = vec![Literal::Int(0), Literal::Str("0".into())];
        match &self.kind {
            Kind::Date(d) => candidates.insert(0, Literal::Str(d.start_text())),
            Kind::Range(r) => candidates.extend(r.first_value().map(Literal::Int)),
            Kind::List(list::ListRule::Integer { map, .. }) => {
                candidates.extend(map.keys().next().map(|&k| Literal::Int(k)))
            }
            // Keys are collation keys, which the same collation places where their values go.
            Kind::List(list::ListRule::String { map, .. }) => {
                candidates.extend(map.keys().next().map(|k| Literal::Str(k.clone())))
            }
            _ => {}
        }
        candidates.push(Literal::Null);
        candidates
            .into_iter()
            .find(|c| self.route(&crate::plan::shard_value_of(c)).is_ok())
    }

    /// The collation of a string key column (`None` for numbers and dates): how a string key
    /// value is stored, as text or as bytes.
    pub fn string_collation(&self) -> Option<Collation> {
        match &self.kind {
            Kind::Hash(KeyType::String, c) | Kind::Consistent(KeyType::String, c) => Some(*c),
            Kind::List(list::ListRule::String { collation, .. }) => Some(*collation),
            _ => None,
        }
    }

    /// Whether MariaDB compares the key column with numbers (every rule but string keys and
    /// dates).
    pub fn compares_numerically(&self) -> bool {
        match &self.kind {
            Kind::Mod | Kind::Range(_) => true,
            Kind::Hash(k, _) | Kind::Consistent(k, _) => *k != KeyType::String,
            Kind::List(l) => l.is_integer(),
            Kind::Date(_) => false,
        }
    }

    /// The shards that can hold rows whose key MariaDB finds equal to `v` (`key = v`), ascending
    /// without duplicates, possibly none; `None` when any shard can (the caller scatters). A
    /// DOUBLE or a string compared with a number column is compared as a double: every integer
    /// that converts to the same double matches (9007199254740993 = 9007199254740992e0).
    pub fn route_eq(&self, v: &ShardValue) -> Option<Vec<usize>> {
        if let ShardValue::Null = v {
            return Some(Vec::new());
        }
        if !self.compares_numerically() {
            return match (&self.kind, v) {
                (_, ShardValue::Str(_) | ShardValue::Bytes(_)) => {
                    self.route(v).ok().map(|s| vec![s])
                }
                _ => None,
            };
        }
        let decimal = matches!(&self.kind, Kind::Range(r) if r.decimal());
        let (lo, hi) = match v {
            ShardValue::Int(i) => (*i, *i),
            ShardValue::Decimal(s) => {
                let n = parse_number(s)?;
                if !n.integral && !decimal {
                    return Some(Vec::new()); // no integer equals 4.5
                }
                (n.floor, n.floor)
            }
            ShardValue::Double(_) | ShardValue::Str(_) => {
                let d = v.as_double()?;
                if decimal {
                    value::floors_near_double(d)
                } else {
                    match value::ints_equal_to_double(d) {
                        Some(span) => span,
                        None => return Some(Vec::new()),
                    }
                }
            }
            ShardValue::Null => return Some(Vec::new()),
            // Bytes that are not UTF-8 are no number MariaDB reads: no integer equals them.
            ShardValue::Bytes(_) => return None,
        };
        self.int_span_shards(lo, hi)
    }

    /// The one shard `key = v` routes to, without allocating: the point lookup of every
    /// execute. `None` leaves the answer to [`ShardRule::route_eq`] (a value it must work out,
    /// a range or list rule, or no shard at all).
    pub fn route_eq_single(&self, v: &ShardValue) -> Option<usize> {
        match (&self.kind, v) {
            (Kind::Mod | Kind::Hash(..) | Kind::Consistent(..), ShardValue::Int(n))
                if self.compares_numerically() =>
            {
                self.int_shard(*n)
            }
            _ => None,
        }
    }

    /// Shards holding the integers (floors, for DECIMAL keys) in `[lo, hi]`; `None` for all.
    fn int_span_shards(&self, lo: i128, hi: i128) -> Option<Vec<usize>> {
        /// Beyond this many values a hashed span is sent everywhere.
        const ENUMERATE: i128 = 64;
        let mut out = match &self.kind {
            Kind::Range(r) => r.shards_between(
                NumBound::Included(Num::int(lo)),
                NumBound::Included(Num::int(hi)),
            ),
            Kind::List(l) => l.shards_between(
                NumBound::Included(Num::int(lo)),
                NumBound::Included(Num::int(hi)),
            )?,
            _ if hi.saturating_sub(lo) < ENUMERATE => {
                (lo..=hi).filter_map(|n| self.int_shard(n)).collect()
            }
            _ => return None,
        };
        out.sort_unstable();
        out.dedup();
        Some(out)
    }

    /// The shard of an integer key value (mod, hash, consistent, integer lists); `None` when
    /// no shard takes it.
    fn int_shard(&self, n: i128) -> Option<usize> {
        match &self.kind {
            // 64-bit arithmetic where the value allows: i128 division is a library call.
            Kind::Mod => Some(match i64::try_from(n) {
                Ok(n) => n.rem_euclid(self.shards as i64) as usize,
                Err(_) => n.rem_euclid(self.shards as i128) as usize,
            }),
            Kind::Hash(..) | Kind::Consistent(..) => Some(self.hash_shard(hash::hash_int(n))),
            Kind::Range(r) => r.shard_of(n),
            Kind::List(l) => l.shard_of_int(n),
            Kind::Date(_) => None,
        }
    }

    fn hash_shard(&self, h: u64) -> usize {
        match self.kind {
            Kind::Consistent(..) => hash::jump_consistent(h, self.shards),
            _ => (h % self.shards as u64) as usize,
        }
    }

    fn unplaced(&self, v: &ShardValue) -> RuleError {
        let why = match self.kind {
            Kind::List(_) => format!("{v} is not listed"),
            _ => format!("no range holds {v}"),
        };
        RouterError::no_shard(format!(
            "rule {:?}: {why} and the rule has no default",
            self.name
        ))
    }

    /// The integer MariaDB stores for `v` in an integer column.
    fn stored_integer(&self, v: &ShardValue) -> Result<i128, RuleError> {
        let n = match v {
            ShardValue::Int(i) => *i,
            ShardValue::Decimal(s) => self.exact(v, s)?.round(0).num().floor,
            ShardValue::Str(s) => self.exact(v, s)?.round(0).num().floor,
            // MariaDB stores a DOUBLE of 2^63 or more as 9223372036854775807 in a signed BIGINT
            // without an error, as itself in an unsigned one: the column's sign decides.
            ShardValue::Double(d) if d.is_finite() && d.round_ties_even() >= 2f64.powi(63) => {
                return Err(RouterError::wrong_value(format!(
                    "rule {:?}: where the DOUBLE {v} is stored depends on whether the column is signed: write it as an integer",
                    self.name
                )));
            }
            ShardValue::Double(d) if d.is_finite() && d.abs() < 1e30 => d.round_ties_even() as i128,
            ShardValue::Double(_) => return Err(self.out_of_range(v)),
            ShardValue::Null => return Err(RouterError::wrong_value("NULL is not a number")),
            ShardValue::Bytes(_) => return Err(self.exact(v, "").unwrap_err()),
        };
        if n < i128::from(i64::MIN) || n > i128::from(u64::MAX) {
            return Err(self.out_of_range(v));
        }
        Ok(n)
    }

    /// The floor of the value MariaDB stores for `v` in a DECIMAL column of the rule's scale.
    fn stored_decimal_floor(&self, v: &ShardValue) -> Result<i128, RuleError> {
        let e = match v {
            ShardValue::Int(i) => return Ok(*i),
            ShardValue::Decimal(s) | ShardValue::Str(s) => self.exact(v, s)?,
            ShardValue::Double(d) => Exact::of_double(*d).ok_or_else(|| self.out_of_range(v))?,
            ShardValue::Null => return Err(RouterError::wrong_value("NULL is not a number")),
            ShardValue::Bytes(_) => return Err(self.exact(v, "").unwrap_err()),
        };
        match self.scale {
            Some(scale) => Ok(e.round(scale as usize).num().floor),
            None if e.floor_depends_on_scale() => Err(RouterError::wrong_value(format!(
                "rule {:?}: where {v} is stored depends on the DECIMAL column's scale: set `scale` on the rule",
                self.name
            ))),
            None => Ok(e.num().floor),
        }
    }

    fn exact(&self, v: &ShardValue, s: &str) -> Result<Exact, RuleError> {
        parse_exact(s).ok_or_else(|| {
            RouterError::wrong_value(format!(
                "rule {:?}: {v} is not a number the rule can route (MariaDB would truncate it)",
                self.name
            ))
        })
    }

    fn out_of_range(&self, v: &ShardValue) -> RuleError {
        RouterError::wrong_value(format!(
            "rule {:?}: {v} is out of range for an integer shard key",
            self.name
        ))
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
                let lo = numeric_bound(lo, true, r.decimal())?;
                let hi = numeric_bound(hi, false, r.decimal())?;
                Some(r.shards_between(lo, hi))
            }
            Kind::List(l) if l.is_integer() => {
                let lo = numeric_bound(lo, true, false)?;
                let hi = numeric_bound(hi, false, false)?;
                l.shards_between(lo, hi)
            }
            Kind::List(_) => None,
            Kind::Date(d) => d.shards_between(self.shards, lo, hi),
        }
    }

    fn string_hash(&self, c: Collation, v: &ShardValue) -> Result<u64, RuleError> {
        match v {
            ShardValue::Str(s) => Ok(hash::hash_str(&collation_key(c, s))),
            // The bytes a binary column stores (only made for one): hashed as a string's are.
            ShardValue::Bytes(b) if c == Collation::Binary => Ok(hash::hash_bytes(b)),
            // MariaDB stores an integer in a string column as its decimal digits.
            ShardValue::Int(i) => Ok(hash::hash_str(&collation_key(c, &i.to_string()))),
            _ => Err(RouterError::wrong_value(format!(
                "rule {:?} shards a string column: compare it with a quoted string, not {v} (MySQL \
                 compares a string column with a number numerically, so '042' and '42' would both match)",
                self.name
            ))),
        }
    }
}

/// A range bound read as a number; `None` when the bound value cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumBound {
    Unbounded,
    Included(Num),
    Excluded(Num),
}

/// A range bound on a number column as MariaDB compares it; `None` when the bound cannot be
/// read (the caller scatters). Exact values (integers, decimals) are bounds as they are; a
/// DOUBLE or a string is compared as a double, so the bound widens to every integer (or, for
/// DECIMAL keys, every floor) whose double is on the bound.
fn numeric_bound(b: Bound<&ShardValue>, lower: bool, decimal: bool) -> Option<NumBound> {
    let v = match b {
        Bound::Unbounded => return Some(NumBound::Unbounded),
        Bound::Included(v) | Bound::Excluded(v) => v,
    };
    let exact = |n: Num| match b {
        Bound::Excluded(_) => NumBound::Excluded(n),
        _ => NumBound::Included(n),
    };
    match v {
        ShardValue::Null | ShardValue::Bytes(_) => None,
        ShardValue::Int(i) => Some(exact(Num::int(*i))),
        ShardValue::Decimal(s) => Some(exact(parse_number(s)?)),
        ShardValue::Double(_) | ShardValue::Str(_) => {
            let d = v.as_double()?;
            let n = if decimal {
                let (a, b) = value::floors_near_double(d);
                if lower { a } else { b }
            } else if d.abs() < value::EXACT_INT_DOUBLE {
                if lower {
                    d.ceil() as i128
                } else {
                    d.floor() as i128
                }
            } else {
                let (a, b) = value::ints_equal_to_double(d)?;
                if lower { a } else { b }
            };
            if n == i128::MIN || n == i128::MAX {
                return Some(NumBound::Unbounded);
            }
            Some(NumBound::Included(Num::int(n)))
        }
    }
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
