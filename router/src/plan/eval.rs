//! Evaluating a plan template with the values of the statement at hand.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::OnceLock;

use super::merge::{HavingT, LimitMode, OperandT};
use super::placement::{RouteExpr, refuse};
use super::planner::{Body, DmlT, GroupT, KeyMoveT, RenameWhat, Template, rename_text};
use super::render::{Edit, Piece, Text, push_qualified};
use super::{
    HavingSpec, KeyMove, KeySource, LocalAnswer, Merge, Operand, ParamValue, RoutePlan, Routed,
    Target,
};
use crate::charset::{self, Charsets};
use crate::error::RouterError;
use crate::rule::collation::Collation;
use crate::rule::{ShardRule, ShardValue};
use crate::sql::analyze::literal_of_token;
use crate::sql::stmt::{Literal, ValueRef};
use crate::topology::{DatanodeId, Topology};

/// The statement being evaluated.
pub(crate) struct Values<'a> {
    pub text: Text<'a>,
    pub slot_tokens: &'a [u32],
    pub params: &'a [ParamValue],
    /// A prepared statement's targets rendered so far (its text is the same every execute).
    pub singles: Option<&'a Singles>,
    /// The session's character sets: how its string literals are stored.
    pub charsets: Charsets,
}

/// The one-datanode targets of a prepared statement, rendered on first use and shared by every
/// execute after it. Only targets whose SQL depends on the datanode (and shard) alone are kept:
/// the statement's text is fixed, and the values only choose the slot.
#[derive(Debug)]
pub(crate) struct Singles(Box<[OnceLock<Target>]>);

impl Singles {
    /// Slots for `t`: one per datanode (a statement on a fixed datanode) and, for a point
    /// lookup on one table, one per shard of its group.
    pub fn for_template(t: &Template, topo: &Topology) -> Self {
        let shards = match &t.body {
            Body::Dml(d) if d.insert.is_none() => match d.groups.as_slice() {
                [g] => g.datanodes.len(),
                _ => 0,
            },
            _ => 0,
        };
        let n = topo.datanodes.len() + shards;
        Singles((0..n).map(|_| OnceLock::new()).collect())
    }

    fn fixed_slot(dn: DatanodeId) -> usize {
        dn
    }

    fn shard_slot(topo: &Topology, shard: usize) -> usize {
        topo.datanodes.len() + shard
    }
}

/// The target `make` renders, from `v`'s kept targets when it has them.
fn kept(v: &Values, slot: usize, make: impl FnOnce() -> Target) -> Target {
    match v.singles.and_then(|s| s.0.get(slot)) {
        Some(cell) => cell.get_or_init(make).clone(),
        None => make(),
    }
}

impl Values<'_> {
    pub fn value(&self, v: &ValueRef) -> Option<Literal> {
        match v {
            ValueRef::Slot(s) => {
                let t = self
                    .text
                    .toks
                    .get(*self.slot_tokens.get(*s as usize)? as usize)?;
                Some(literal_of_token(self.text.sql, t))
            }
            ValueRef::Param(p) => self.params.get(*p as usize).cloned(),
            ValueRef::Const(l) => Some(l.clone()),
            ValueRef::Neg(inner) => match self.value(inner)? {
                Literal::Null => Some(Literal::Null),
                Literal::Int(i) => Some(Literal::Int(-i)),
                Literal::Decimal(d) => Some(Literal::Decimal(match d.strip_prefix('-') {
                    Some(p) => p.to_string(),
                    None => format!("-{d}"),
                })),
                Literal::Double(d) => Some(Literal::Double(-d)),
                // `-'5'` is numeric in MySQL: not a value we route on.
                Literal::Str(_) => None,
            },
            // Only a shard key reads them (`Self::key`).
            ValueRef::Introduced(..) | ValueRef::Convert(..) => None,
        }
    }
}

impl Values<'_> {
    /// The value of a shard key `x` as the key column of `rule` stores it (see [`Stored`]);
    /// `None` where it cannot be evaluated, or read exactly.
    fn key(&self, rule: &ShardRule, x: &ValueRef) -> Option<Stored> {
        let binary = rule.string_collation() == Some(Collation::Binary);
        let bytes_key = |b: Vec<u8>| match String::from_utf8(b) {
            Ok(s) => Stored::Lit(Literal::Str(s)),
            Err(e) => Stored::Bytes(e.into_bytes()),
        };
        match x {
            // A binary column stores an introduced literal's bytes as they are.
            ValueRef::Introduced(_, inner) if binary => Some(bytes_key(self.client_bytes(inner)?)),
            ValueRef::Introduced(..) | ValueRef::Convert(..) => {
                let (cs, text) = self.recoded(x)?;
                Some(match binary {
                    // A Unicode string's bytes (an introduced one's are its own, above).
                    true if cs.is_utf8() => Stored::Lit(Literal::Str(text)),
                    true => return None,
                    false => Stored::Lit(Literal::Str(text)),
                })
            }
            _ => stored(rule, self.charsets, self.value(x)?),
        }
    }

    /// The bytes the client sent for string literal `x`.
    fn client_bytes(&self, x: &ValueRef) -> Option<Vec<u8>> {
        let Literal::Str(s) = self.value(x)? else {
            return None;
        };
        Some(match self.charsets.client.is_utf8() {
            true => s.into_bytes(),
            false => charset::encode(self.charsets.client, &s).ok()?.into_owned(),
        })
    }

    /// `_cs'...'` or `CONVERT(x USING cs)` of a string: its charset and its text as MariaDB
    /// reads it (an introduced literal's client bytes read in `cs`; a converted string with
    /// `'?'` for what `cs` cannot hold).
    fn recoded(&self, x: &ValueRef) -> Option<(charset::Charset, String)> {
        match x {
            ValueRef::Introduced(cs, inner) => {
                // A binary string has no characters to compare with a text column.
                if *cs == charset::Charset::Binary {
                    return None;
                }
                let bytes = self.client_bytes(inner)?;
                Some((*cs, charset::to_unicode(*cs, &bytes).ok()?.into_owned()))
            }
            ValueRef::Convert(cs, inner) => {
                let text = match inner.as_ref() {
                    ValueRef::Introduced(..) | ValueRef::Convert(..) => self.recoded(inner)?.1,
                    _ => match self.value(inner)? {
                        Literal::Str(s) => {
                            charset::stored_text(self.charsets, &s).ok()?.into_owned()
                        }
                        _ => return None,
                    },
                };
                Some((*cs, charset::convert_text(*cs, &text)?.into_owned()))
            }
            _ => None,
        }
    }
}

/// A shard key value as its column stores it. A string literal is read in the session's
/// character sets as MariaDB converts it: to Unicode for a text column (a unit MariaDB cannot
/// map becomes `'?'`), to the connection character set's bytes for a `binary` one.
pub(crate) enum Stored {
    Lit(Literal),
    /// A `binary` collation key whose bytes are not UTF-8.
    Bytes(Vec<u8>),
}

impl Stored {
    fn shard_value(&self) -> ShardValue<'_> {
        match self {
            Stored::Lit(l) => shard_value(l),
            Stored::Bytes(b) => ShardValue::Bytes(b),
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, Stored::Lit(Literal::Null))
    }
}

/// `lit` as the key column of `rule` stores it in a session with character sets `cs`; `None`
/// where that cannot be read exactly (the caller scatters or refuses, never guesses).
fn stored(rule: &ShardRule, cs: Charsets, lit: Literal) -> Option<Stored> {
    let Literal::Str(s) = &lit else {
        return Some(Stored::Lit(lit));
    };
    if cs == Charsets::UTF8MB4 {
        return Some(Stored::Lit(lit));
    }
    if rule.string_collation() == Some(Collation::Binary) {
        let bytes = charset::stored_bytes(cs, s).ok()?.into_owned();
        return Some(match String::from_utf8(bytes) {
            Ok(text) => Stored::Lit(Literal::Str(text)),
            Err(e) => Stored::Bytes(e.into_bytes()),
        });
    }
    let text = charset::stored_text(cs, s).ok()?;
    Some(Stored::Lit(Literal::Str(text.into_owned())))
}

/// The value as MariaDB types it: a number written with an exponent is a DOUBLE.
pub(crate) fn shard_value(l: &Literal) -> ShardValue<'_> {
    match l {
        Literal::Null => ShardValue::Null,
        Literal::Int(i) => ShardValue::Int(*i),
        Literal::Decimal(d) if d.contains(['e', 'E']) => match d.parse::<f64>() {
            Ok(f) => ShardValue::Double(f),
            // Not a number MariaDB reads (`1e400` is an error there): the rule refuses it.
            Err(_) => ShardValue::Str(d),
        },
        Literal::Decimal(d) => ShardValue::Decimal(d),
        Literal::Double(f) => ShardValue::Double(*f),
        Literal::Str(s) => ShardValue::Str(s),
    }
}

/// When one value of an `IN` list or a `BETWEEN` is compared with a number column as a double,
/// MariaDB may compare them all as doubles: read every number as one.
fn widen<'a>(g: &GroupT, vals: &mut [ShardValue<'a>]) {
    if g.rule.compares_numerically() && vals.iter().any(ShardValue::is_approximate) {
        for v in vals.iter_mut() {
            if matches!(v, ShardValue::Int(_) | ShardValue::Decimal(_))
                && let Some(d) = v.as_double()
            {
                *v = ShardValue::Double(d);
            }
        }
    }
}

/// Shards a route can touch; `None` means all.
fn shards(g: &GroupT, e: &RouteExpr, v: &Values) -> Option<BTreeSet<usize>> {
    match e {
        RouteExpr::All => None,
        RouteExpr::Eq(vals) => {
            let lits = vals
                .iter()
                .map(|x| v.key(&g.rule, x))
                .collect::<Option<Vec<_>>>()?;
            let mut svs: Vec<ShardValue> = lits.iter().map(Stored::shard_value).collect();
            widen(g, &mut svs);
            let mut set = BTreeSet::new();
            for sv in &svs {
                // `= NULL` matches no row: route_eq gives no shard.
                set.extend(g.rule.route_eq(sv)?);
            }
            Some(set)
        }
        RouteExpr::NullSafe(x) => {
            let lit = v.key(&g.rule, x)?;
            if lit.is_null() {
                return Some(BTreeSet::from([g.rule.route(&ShardValue::Null).ok()?]));
            }
            Some(g.rule.route_eq(&lit.shard_value())?.into_iter().collect())
        }
        RouteExpr::IsNull => Some(BTreeSet::from([g.rule.route(&ShardValue::Null).ok()?])),
        RouteExpr::Range(lo, hi) => {
            let lit = |b: &Bound<ValueRef>| -> Option<Bound<Stored>> {
                Some(match b {
                    Bound::Included(x) => Bound::Included(v.key(&g.rule, x)?),
                    Bound::Excluded(x) => Bound::Excluded(v.key(&g.rule, x)?),
                    Bound::Unbounded => Bound::Unbounded,
                })
            };
            let (lo, hi) = (lit(lo)?, lit(hi)?);
            let is_null = |b: &Bound<Stored>| match b {
                Bound::Included(l) | Bound::Excluded(l) => l.is_null(),
                Bound::Unbounded => false,
            };
            if is_null(&lo) || is_null(&hi) {
                return Some(BTreeSet::new()); // comparisons with NULL are never true
            }
            fn sv(b: &Bound<Stored>) -> Bound<ShardValue<'_>> {
                match b {
                    Bound::Included(l) => Bound::Included(l.shard_value()),
                    Bound::Excluded(l) => Bound::Excluded(l.shard_value()),
                    Bound::Unbounded => Bound::Unbounded,
                }
            }
            let (a, b) = (sv(&lo), sv(&hi));
            let mut both = [bound_value(&a), bound_value(&b)];
            if let [Some(x), Some(y)] = &mut both {
                let mut pair = [*x, *y];
                widen(g, &mut pair);
                both = [Some(pair[0]), Some(pair[1])];
            }
            let (a, b) = (rebound(&a, both[0]), rebound(&b, both[1]));
            let r = g.rule.route_range(a.as_ref(), b.as_ref())?;
            Some(r.into_iter().collect())
        }
        RouteExpr::And(es) => {
            let mut acc: Option<BTreeSet<usize>> = None;
            for e in es {
                if let Some(s) = shards(g, e, v) {
                    acc = Some(match acc {
                        None => s,
                        Some(a) => a.intersection(&s).copied().collect(),
                    });
                }
            }
            acc
        }
        RouteExpr::Or(es) => {
            let mut acc = BTreeSet::new();
            for e in es {
                acc.extend(shards(g, e, v)?);
            }
            Some(acc)
        }
    }
}

fn bound_value<'a>(b: &Bound<ShardValue<'a>>) -> Option<ShardValue<'a>> {
    match b {
        Bound::Included(v) | Bound::Excluded(v) => Some(*v),
        Bound::Unbounded => None,
    }
}

fn rebound<'a>(b: &Bound<ShardValue<'a>>, v: Option<ShardValue<'a>>) -> Bound<ShardValue<'a>> {
    match (b, v) {
        (Bound::Included(_), Some(v)) => Bound::Included(v),
        (Bound::Excluded(_), Some(v)) => Bound::Excluded(v),
        (b, _) => *b,
    }
}

/// The one shard of a point lookup (`key = value` on a mod or hash rule), found without
/// allocating; `None` leaves the answer to [`group_shards`].
fn point_shard(g: &GroupT, v: &Values) -> Option<usize> {
    let RouteExpr::Eq(vals) = &g.route else {
        return None;
    };
    let [x] = vals.as_slice() else {
        return None;
    };
    let lit = v.key(&g.rule, x)?;
    let mut sv = [lit.shard_value()];
    widen(g, &mut sv);
    g.rule
        .route_eq_single(&sv[0])
        .filter(|&s| s < g.datanodes.len())
}

/// The shard indices of a group for this statement.
pub(crate) fn group_shards(g: &GroupT, v: &Values) -> Vec<usize> {
    if let Some(s) = point_shard(g, v) {
        return vec![s];
    }
    // The point lookup (`key = value`), on every execute of a prepared statement: the shards
    // `shards` would give, without its intermediate vectors and set. Where it would not route
    // (no value, a rule that cannot route it) the general path below answers.
    if let RouteExpr::Eq(vals) = &g.route
        && let [x] = vals.as_slice()
        && let Some(lit) = v.key(&g.rule, x)
    {
        let mut sv = [lit.shard_value()];
        widen(g, &mut sv);
        if let Some(mut s) = g.rule.route_eq(&sv[0]) {
            s.sort_unstable();
            s.dedup();
            return placed(g, s);
        }
    }
    match shards(g, &g.route, v) {
        None => (0..g.datanodes.len()).collect(),
        Some(s) => placed(g, s.into_iter().collect()),
    }
}

/// Sorted shard indices as a group's shards: in range, and never none.
fn placed(g: &GroupT, mut s: Vec<usize>) -> Vec<usize> {
    if s.is_empty() {
        // No row can match: one shard still answers, with the right columns and no rows.
        return vec![0];
    }
    s.retain(|&i| i < g.datanodes.len());
    s
}

pub(crate) fn evaluate(t: &Template, topo: &Topology, v: &Values) -> RoutePlan {
    match &t.body {
        Body::Done(p) => (**p).clone(),
        Body::SessionValues { columns, limit } => {
            let row = match limit {
                None => Ok(true),
                Some((count, offset)) => limit_value(v, count).and_then(|c| {
                    let o = offset.as_ref().map(|o| limit_value(v, o)).transpose()?;
                    Ok(c >= 1 && o.unwrap_or(0) == 0)
                }),
            };
            match row {
                Ok(row) => RoutePlan::Local(LocalAnswer::SessionValues {
                    columns: columns.clone(),
                    row,
                }),
                Err(e) => RoutePlan::Refuse(e),
            }
        }
        Body::Any => RoutePlan::Any {
            sql: v.text.sql.to_string(),
        },
        Body::Catalog => RoutePlan::Local(super::LocalAnswer::Catalog {
            sql: v.text.sql.to_string(),
            show: None,
        }),
        Body::Dml(d) => match eval_dml(d, topo, v) {
            Ok(p) => p,
            Err(e) => RoutePlan::Refuse(e),
        },
    }
}

/// A LIMIT count or offset with this statement's values.
fn limit_value(v: &Values, x: &ValueRef) -> Result<u64, RouterError> {
    match v.value(x) {
        Some(Literal::Int(i)) if i >= 0 => Ok(i.min(u64::MAX as i128) as u64),
        // ER_WRONG_ARGUMENTS, as MySQL answers a bad LIMIT parameter.
        _ => Err(RouterError::new(
            1210,
            "HY000",
            "Incorrect arguments to LIMIT",
        )),
    }
}

fn name_edits(d: &DmlT, topo: &Topology, dn: DatanodeId, shard_of_group: &[usize]) -> Vec<Edit> {
    d.renames
        .iter()
        .map(|r| {
            let name = match &r.what {
                RenameWhat::Physical { group, names } => {
                    let s = shard_of_group.get(*group).copied().unwrap_or(0);
                    names.get(s).map(String::as_str).unwrap_or("")
                }
                RenameWhat::Database => topo.datanodes[dn].database.as_str(),
                RenameWhat::Text(t) => return Edit::text(r.tok, r.tok, t.clone()),
            };
            let text = match &r.alias {
                Some(a) => format!("{} AS {a}", rename_text(r, name)),
                None => rename_text(r, name),
            };
            Edit::text(r.tok, r.tok, text)
        })
        .collect()
}

fn check_dn(d: &DmlT, topo: &Topology, dn: DatanodeId) -> Result<(), RouterError> {
    if let Some(f) = d.fixed
        && f != dn
    {
        return Err(refuse(format!(
            "a statement over a table on datanode {} and rows on datanode {}",
            topo.datanodes[f].name, topo.datanodes[dn].name
        )));
    }
    if let Some(a) = &d.allowed
        && !a.contains(&dn)
    {
        return Err(refuse(format!(
            "a statement over a global table that is not on datanode {}",
            topo.datanodes[dn].name
        )));
    }
    Ok(())
}

fn target(v: &Values, dn: DatanodeId, edits: &[Edit]) -> Target {
    rendered(dn, v.text.render(edits), false)
}

/// The target on `dn` of a rendered statement (its SQL and the placeholders it kept).
fn rendered(dn: DatanodeId, (sql, params): (String, Vec<u16>), qualified: bool) -> Target {
    Target {
        datanode: dn,
        sql: sql.into(),
        params: params.into(),
        qualified,
    }
}

/// The one target of a statement on datanode `dn`: where the statement allows it, its tables
/// are qualified with `dn`'s database (see [`DmlT::qualify`]).
fn single_target(
    d: &DmlT,
    topo: &Topology,
    v: &Values,
    dn: DatanodeId,
    shard_of_group: &[usize],
) -> Target {
    let db = &topo.datanodes[dn].database;
    if let Some(qualify) = &d.qualify
        && d.renames.is_empty()
        && let Some(r) = v.text.render_qualified(qualify, db)
    {
        // Only names to qualify (a database-per-shard table): rendered directly.
        return rendered(dn, r, true);
    }
    let mut edits = name_edits(d, topo, dn, shard_of_group);
    let Some(qualify) = &d.qualify else {
        return target(v, dn, &edits);
    };
    // Per routed statement: appended into one string, not `format!`ed (~700 instructions a
    // name).
    let dotted = |name: &str| {
        let mut s = String::with_capacity(db.len() + 3 + name.len());
        push_qualified(&mut s, db, name);
        s
    };
    edits.reserve(qualify.len());
    for (tok, written) in qualify {
        match edits.iter_mut().find(|e| e.first == *tok && !e.insert) {
            // A table-per-shard name: its physical name, qualified.
            Some(e) => {
                for p in &mut e.with {
                    if let Piece::Text(name) = p {
                        *name = dotted(name);
                    }
                }
            }
            None => edits.push(Edit::text(*tok, *tok, dotted(written))),
        }
    }
    edits.sort_by_key(|e| (e.first, e.insert));
    rendered(dn, v.text.render(&edits), true)
}

/// A statement with one target whatever its values but the shard key's: where it goes.
struct OneTarget {
    /// Its slot in a prepared statement's [`Singles`].
    slot: usize,
    dn: DatanodeId,
    /// The shard of its one group (a point lookup), none for a fixed datanode.
    shard: Option<usize>,
}

/// The one target of a non-INSERT statement on a fixed datanode, or of a point lookup on one
/// table (the general path of [`eval_dml`] would give this one target); `None` where the
/// statement may have several, or none it can name without rendering.
fn one_target(d: &DmlT, topo: &Topology, v: &Values) -> Option<Result<OneTarget, RouterError>> {
    if d.insert.is_some() || d.key_move.is_some() {
        return None;
    }
    if d.groups.is_empty() {
        if d.broadcast.is_some() {
            return None;
        }
        let dn = d
            .fixed
            .or_else(|| d.allowed.as_ref().and_then(|a| a.first().copied()))?;
        return Some(Ok(OneTarget {
            slot: Singles::fixed_slot(dn),
            dn,
            shard: None,
        }));
    }
    let [g] = d.groups.as_slice() else {
        return None;
    };
    let s = point_shard(g, v)?;
    let dn = g.datanodes[s];
    Some(check_dn(d, topo, dn).map(|()| OneTarget {
        slot: Singles::shard_slot(topo, s),
        dn,
        shard: Some(s),
    }))
}

/// [`evaluate`] of a prepared statement whose one-datanode targets are kept in `singles`: a
/// kept target is answered borrowed, not copied (its text is shared by every session preparing
/// the statement: a copy per execute writes its shared reference count).
pub(crate) fn evaluate_kept<'s>(
    t: &Template,
    topo: &Topology,
    v: &Values,
    singles: &'s Singles,
) -> Routed<'s> {
    if let Body::Dml(d) = &t.body
        && let Some(one) = one_target(d, topo, v)
    {
        let one = match one {
            Ok(one) => one,
            Err(e) => return Routed::Plan(RoutePlan::Refuse(e)),
        };
        if let Some(cell) = singles.0.get(one.slot) {
            return Routed::Kept(
                cell.get_or_init(|| single_target(d, topo, v, one.dn, one.shard.as_slice())),
            );
        }
    }
    Routed::Plan(evaluate(t, topo, v))
}

fn eval_dml(d: &DmlT, topo: &Topology, v: &Values) -> Result<RoutePlan, RouterError> {
    if let Some(ins) = &d.insert {
        return eval_insert(d, ins, topo, v);
    }
    if let Some(km) = &d.key_move
        && let Some(plan) = key_move(d, km, topo, v)?
    {
        return Ok(plan);
    }
    if let Some(one) = one_target(d, topo, v) {
        let one = one?;
        return Ok(RoutePlan::Single(kept(v, one.slot, || {
            single_target(d, topo, v, one.dn, one.shard.as_slice())
        })));
    }
    if d.groups.is_empty() {
        if let Some(bd) = &d.broadcast {
            let targets = bd
                .iter()
                .map(|&dn| target(v, dn, &name_edits(d, topo, dn, &[])))
                .collect();
            return Ok(RoutePlan::Broadcast { targets });
        }
        return Ok(RoutePlan::Any {
            sql: v.text.sql.to_string(),
        });
    }
    // (datanode, shard per group) of each target.
    let mut placements: Vec<(DatanodeId, Vec<usize>)> = Vec::new();
    if d.groups.len() == 1 {
        let g = &d.groups[0];
        for s in group_shards(g, v) {
            placements.push((g.datanodes[s], vec![s]));
        }
    } else {
        let mut per_group = Vec::new();
        let mut dn = None;
        for (gi, g) in d.groups.iter().enumerate() {
            let s = group_shards(g, v);
            let here = s.iter().map(|&i| g.datanodes[i]).collect::<BTreeSet<_>>();
            if s.len() != 1 || dn.is_some_and(|x| !here.contains(&x)) {
                // A UNION or a derived table is not a join: say what cannot run, and which
                // tables keep the statement off one datanode.
                if let Some(construct) = d.structural {
                    let which = if s.len() != 1 {
                        "is not pinned to one datanode"
                    } else {
                        "is pinned to another datanode"
                    };
                    return Err(refuse(format!(
                        "{construct} ([{}] {which}: a condition on its shard key, or an \
                         equality with a pinned co-located table's key, pins it)",
                        d.labels[gi]
                    )));
                }
                return Err(refuse(format!(
                    "a join of {} that are not co-located (join sharded tables on their shard keys, or make one of them global)",
                    d.labels
                        .iter()
                        .map(|l| format!("[{l}]"))
                        .collect::<Vec<_>>()
                        .join(" and ")
                )));
            }
            dn = Some(g.datanodes[s[0]]);
            per_group.push(s[0]);
        }
        placements.push((dn.unwrap_or(0), per_group));
    }
    for (dn, _) in &placements {
        check_dn(d, topo, *dn)?;
    }
    if placements.len() == 1 {
        let (dn, s) = &placements[0];
        return Ok(RoutePlan::Single(single_target(d, topo, v, *dn, s)));
    }
    let scatter = d.scatter.as_ref().map_err(Clone::clone)?;
    let mut dedup = BTreeSet::new();
    let mut targets = Vec::new();
    match scatter {
        None => {
            for (dn, s) in &placements {
                let t = target(v, *dn, &name_edits(d, topo, *dn, s));
                if dedup.insert((t.datanode, t.sql.clone())) {
                    targets.push(t);
                }
            }
            if targets.len() == 1 {
                // Several shards, one physical table (ER children of a table-per-shard root).
                return Ok(RoutePlan::Single(targets.remove(0)));
            }
            Ok(RoutePlan::Scatter {
                targets,
                merge: Merge::AffectedRows,
            })
        }
        Some(sc) => {
            let mut spec = sc.spec.clone();
            let mut extra = sc.edits.clone();
            if let Some((l, mode)) = &sc.limit {
                let count = limit_value(v, &l.count)?;
                let offset = match &l.offset {
                    Some(o) => limit_value(v, o)?,
                    None => 0,
                };
                spec.limit = Some(count);
                spec.offset = offset;
                match mode {
                    LimitMode::Keep => {}
                    LimitMode::Rewrite => extra.push(Edit::text(
                        l.first_tok,
                        l.last_tok,
                        format!("LIMIT {}", offset.saturating_add(count)),
                    )),
                    LimitMode::Remove => {
                        extra.push(Edit::text(l.first_tok, l.last_tok, String::new()))
                    }
                }
            }
            if let Some(h) = &sc.having {
                spec.having = Some(having(h, v)?);
            }
            for (dn, s) in &placements {
                let mut edits = name_edits(d, topo, *dn, s);
                edits.extend(extra.iter().cloned());
                edits.sort_by_key(|e| (e.first, e.insert));
                let t = target(v, *dn, &edits);
                if dedup.insert((t.datanode, t.sql.clone())) {
                    targets.push(t);
                }
            }
            if targets.len() == 1 {
                // Several shards, one physical table: the datanode answers alone.
                let (dn, s) = &placements[0];
                return Ok(RoutePlan::Single(single_target(d, topo, v, *dn, s)));
            }
            Ok(RoutePlan::Scatter {
                targets,
                merge: Merge::Rows(spec),
            })
        }
    }
}

/// A bound value as SQL text that MariaDB reads as the bound value: numbers as written
/// (a DOUBLE with an exponent, so it stays a DOUBLE), strings as utf8mb4 bytes with an
/// introducer (whatever the connection's character set and sql_mode).
pub(crate) fn literal_sql(l: &Literal) -> String {
    match l {
        Literal::Null => "NULL".into(),
        Literal::Int(i) => i.to_string(),
        Literal::Decimal(d) => d.clone(),
        Literal::Double(f) => format!("{f:e}"),
        Literal::Str(s) => {
            let hex: String = s.bytes().map(|b| format!("{b:02X}")).collect();
            format!("_utf8mb4 X'{hex}'")
        }
    }
}

/// [`literal_sql`] for a bound value of a session in character sets `cs`: a string as the
/// bytes MariaDB reads the bound value as (in the connection's character set), with that
/// character set's introducer.
pub(crate) fn literal_sql_in(l: &Literal, cs: Charsets) -> Result<String, RouterError> {
    let Literal::Str(s) = l else {
        return Ok(literal_sql(l));
    };
    if cs == Charsets::UTF8MB4 {
        return Ok(literal_sql(l));
    }
    let bytes = charset::stored_bytes(cs, s)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
    Ok(format!("_{} X'{hex}'", cs.connection.name()))
}

/// An UPDATE assigning the shard key: `None` when every row it can match stays on its shard
/// (the new value lands on the one shard the statement routes to: updated in place, as any
/// UPDATE), else the move.
fn key_move(
    d: &DmlT,
    km: &KeyMoveT,
    topo: &Topology,
    v: &Values,
) -> Result<Option<RoutePlan>, RouterError> {
    let [g] = d.groups.as_slice() else {
        return Err(km.refuse.clone().unwrap_or_else(|| {
            refuse(format!(
                "UPDATE of shard key column {}.{} over several tables",
                km.table, km.key
            ))
        }));
    };
    let sources = group_shards(g, v);
    let value = match &km.value {
        Some(r) => match v.key(&g.rule, r) {
            Some(Stored::Lit(l)) => Some(l),
            Some(Stored::Bytes(_)) => {
                return Err(refuse(format!(
                    "UPDATE of shard key column {}.{} to bytes that are not UTF-8",
                    km.table, km.key
                )));
            }
            None => return Err(refuse("a shard key value that could not be evaluated")),
        },
        None => None,
    };
    if let Some(lit) = &value {
        let to = g.rule.route(&shard_value(lit))?;
        if sources.iter().all(|&s| s == to) {
            return Ok(None);
        }
    }
    if let Some(e) = &km.refuse {
        return Err(e.clone());
    }
    let text = &v.text;
    let from = text.tok_start(km.table_tok);
    let set = text.tok_start(km.set_tok);
    let end = text.sql.len();
    let where_at = km.where_tok.map_or(end, |w| text.tok_start(w));
    let mut out = Vec::new();
    let mut has_params = false;
    for s in sources {
        let dn = g.datanodes[s];
        check_dn(d, topo, dn)?;
        let names = name_edits(d, topo, dn, &[s]);
        // Shoal's own statements of the move are text: a prepared statement's bound values
        // are written into them as literals that compare and store as the bound values do.
        let mut edits = names.clone();
        for (p, &tok) in text.param_tokens.iter().enumerate() {
            let Some(lit) = v.params.get(p) else {
                continue;
            };
            if matches!(lit, Literal::Str(x) if x.contains('\u{FFFD}')) {
                return Err(refuse(format!(
                    "UPDATE of shard key column {}.{} moving rows with a parameter that is not \
                     valid UTF-8",
                    km.table, km.key
                )));
            }
            edits.push(Edit::text(tok, tok, literal_sql_in(lit, v.charsets)?));
        }
        edits.sort_by_key(|e| (e.first, e.insert));
        let mut params = Vec::new();
        let mut table = String::new();
        text.render_bytes(from, set, &edits, &mut table, &mut params);
        let mut select_from = format!(" FROM {}\n", table.trim_end());
        text.render_bytes(where_at, end, &edits, &mut select_from, &mut params);
        let mut update_head = String::new();
        text.render_bytes(0, where_at, &edits, &mut update_head, &mut params);
        let mut update = String::new();
        text.render_bytes(0, end, &names, &mut update, &mut Vec::new());
        has_params |= !params.is_empty();
        out.push(KeySource {
            shard: s,
            select_from,
            update_head,
            update,
        });
    }
    Ok(Some(RoutePlan::KeyMove(Box::new(KeyMove {
        table: km.table.clone(),
        key: km.key.clone(),
        shards: g
            .datanodes
            .iter()
            .zip(&km.physical)
            .map(|(&dn, p)| (dn, p.clone()))
            .collect(),
        rule: g.rule.clone(),
        sources: out,
        assigned: km.assigned.clone(),
        value,
        has_params,
    }))))
}

fn having(h: &HavingT, v: &Values) -> Result<HavingSpec, RouterError> {
    let op = |o: &OperandT| -> Result<Operand, RouterError> {
        Ok(match o {
            OperandT::Column(c) => Operand::Column(*c),
            OperandT::Value(x) => Operand::Value(
                v.value(x)
                    .ok_or_else(|| refuse("a HAVING value that could not be evaluated"))?,
            ),
        })
    };
    Ok(match h {
        HavingT::And(a, b) => HavingSpec::And(Box::new(having(a, v)?), Box::new(having(b, v)?)),
        HavingT::Or(a, b) => HavingSpec::Or(Box::new(having(a, v)?), Box::new(having(b, v)?)),
        HavingT::Not(a) => HavingSpec::Not(Box::new(having(a, v)?)),
        HavingT::Cmp { op: o, left, right } => HavingSpec::Cmp {
            op: *o,
            left: op(left)?,
            right: op(right)?,
        },
        HavingT::IsNull { operand, negated } => HavingSpec::IsNull {
            operand: op(operand)?,
            negated: *negated,
        },
    })
}

fn eval_insert(
    d: &DmlT,
    ins: &super::planner::InsertT,
    topo: &Topology,
    v: &Values,
) -> Result<RoutePlan, RouterError> {
    let g = &d.groups[0];
    let mut by_shard: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (row, kv) in ins.key_values.iter().enumerate() {
        let lit = v
            .key(&g.rule, kv)
            .ok_or_else(|| refuse("a shard key value that could not be evaluated"))?;
        let s = g.rule.route(&lit.shard_value())?;
        if s >= g.datanodes.len() {
            return Err(refuse(format!(
                "a rule that returned shard {s} of {}",
                g.datanodes.len()
            )));
        }
        by_shard.entry(s).or_default().push(row);
    }
    for &s in by_shard.keys() {
        check_dn(d, topo, g.datanodes[s])?;
    }
    if let Some(k) = &ins.duplicate_key {
        // The duplicate an inserted row meets lives on that row's shard: the new key value
        // must land there too.
        let lit = v
            .key(&g.rule, k)
            .ok_or_else(|| refuse("a shard key value that could not be evaluated"))?;
        let to = g.rule.route(&lit.shard_value())?;
        if by_shard.keys().any(|&s| s != to) {
            return Err(refuse(
                "ON DUPLICATE KEY UPDATE of the shard key to a value on another shard than \
                 the inserted row's (the existing row would have to move)",
            ));
        }
    }
    if by_shard.len() == 1 {
        let s = *by_shard.keys().next().unwrap_or(&0);
        let dn = g.datanodes[s];
        return Ok(RoutePlan::Single(target(
            v,
            dn,
            &name_edits(d, topo, dn, &[s]),
        )));
    }
    let Some(rows) = &ins.rows else {
        return Err(refuse("a multi-shard INSERT ... SET"));
    };
    let text = &v.text;
    let first = text.tok_start(rows[0].0);
    let last = text.tok_end(rows[rows.len() - 1].1);
    let mut targets = Vec::new();
    for (s, idx) in by_shard {
        let dn = g.datanodes[s];
        let edits = name_edits(d, topo, dn, &[s]);
        let mut sql = String::with_capacity(text.sql.len());
        let mut params = Vec::new();
        text.render_bytes(0, first, &edits, &mut sql, &mut params);
        for (k, &r) in idx.iter().enumerate() {
            if k > 0 {
                sql.push_str(", ");
            }
            let (a, b) = rows[r];
            text.render_bytes(
                text.tok_start(a),
                text.tok_end(b),
                &edits,
                &mut sql,
                &mut params,
            );
        }
        text.render_bytes(last, text.sql.len(), &edits, &mut sql, &mut params);
        targets.push(Target {
            datanode: dn,
            sql: sql.into(),
            params: params.into(),
            qualified: false,
        });
    }
    Ok(RoutePlan::Scatter {
        targets,
        merge: Merge::AffectedRows,
    })
}
