//! The generated family of uncorrelated subqueries whose rows live on several shards (issue 49):
//! `x [NOT] IN (SELECT ...)`, `[NOT] EXISTS (SELECT ...)` and scalar subqueries in WHERE, over
//! an outer table of another rule, a global or an unlisted table, with the compared columns of
//! different types and collations (INT vs DECIMAL, `utf8mb4_general_ci` vs `_bin`, DATE vs
//! DATETIME), NULLs among the values and on the outer side, and inner sets that are empty.
//! Shoal runs the subquery first and binds its rows as values; every answer must be MariaDB's.
//!
//! Drawn from a random stream of its own: the other families' statements stay what they were
//! for a seed.

use super::compare::Check;
use super::data::{Dataset, Rng};
use super::queries::{Query, Sql, value};
use super::schema::{self, Kind, Table};

/// The family name.
pub const FAMILY: &str = "subquery";

/// Tables the outer statement reads: sharded by several rules, global, unlisted.
const OUTER: &[&Table] = &[
    &schema::ORDERS,
    &schema::ACCOUNT,
    &schema::EVENTS,
    &schema::LEDGER,
    &schema::COUNTRY,
    &schema::NOTE,
    &schema::ORDER_ITEM,
];

/// Tables a subquery reads: sharded (the global and unlisted ones run where the outer does).
const INNER: &[&Table] = &[
    &schema::ORDERS,
    &schema::ORDER_ITEM,
    &schema::ACCOUNT,
    &schema::EVENTS,
    &schema::LEDGER,
];

/// `count` statements of the family from `seed`, about a third prepared.
pub fn generate(seed: u64, count: usize, data: &Dataset) -> Vec<Query> {
    let mut rng = Rng::new(seed ^ 0x5ab_9e41_0049);
    let mut out = Vec::with_capacity(count);
    let mut tries = 0;
    while out.len() < count && tries < 100 * (count + 10) {
        tries += 1;
        if let Some(q) = one(&mut rng, data) {
            out.push(q);
        }
    }
    out
}

/// A column of `t` other than DOUBLE.
fn column(rng: &mut Rng, t: &Table) -> usize {
    loop {
        let c = rng.below(t.cols.len());
        if t.cols[c].kind != Kind::Double {
            return c;
        }
    }
}

/// The inner SELECT's WHERE: none, a filter on one of its columns, or one that matches no row.
fn inner_where(rng: &mut Rng, sql: &mut Sql, data: &Dataset, t: &Table) {
    match rng.below(10) {
        0..=2 => {}
        3 => {
            // No row: an empty set.
            sql.raw(&format!(
                " WHERE i.{} IS NULL AND i.{} IS NOT NULL",
                t.pk, t.pk
            ));
        }
        _ => {
            let c = column(rng, t);
            let v = value(rng, data, t, c);
            let name = t.cols[c].name;
            if v.is_null() {
                sql.raw(&format!(" WHERE i.{name} IS NULL"));
            } else {
                let op = *rng.pick(&["=", "<>", "<", ">=", "<=>"]);
                sql.raw(&format!(" WHERE i.{name} {op} ")).lit(&v);
                if rng.pct(30) {
                    sql.raw(&format!(" OR i.{name} IS NULL"));
                }
            }
        }
    }
}

fn one(rng: &mut Rng, data: &Dataset) -> Option<Query> {
    let o = *rng.pick(OUTER);
    let i = *rng.pick(INNER);
    let prepared = rng.pct(33);
    let mut sql = Sql::default();
    let out_cols = format!("o.{}, o.{}", o.pk, o.cols[column(rng, o)].name);
    sql.raw(&format!("SELECT {out_cols} FROM {} o WHERE ", o.name));
    match rng.below(10) {
        // [NOT] IN over a column of a comparable kind.
        0..=4 => {
            let oc = column(rng, o);
            let pairs: Vec<usize> = (0..i.cols.len())
                .filter(|&c| o.cols[oc].kind.comparable(i.cols[c].kind))
                .collect();
            if pairs.is_empty() {
                return None;
            }
            let ic = *rng.pick(&pairs);
            let not = if rng.pct(45) { "NOT " } else { "" };
            let distinct = if rng.pct(30) { "DISTINCT " } else { "" };
            sql.raw(&format!(
                "o.{} {not}IN (SELECT {distinct}i.{} FROM {} i",
                o.cols[oc].name, i.cols[ic].name, i.name
            ));
            inner_where(rng, &mut sql, data, i);
            if rng.pct(15) {
                // ORDER BY ... LIMIT inside: MariaDB refuses LIMIT in IN (1235 on both sides),
                // so only ORDER BY.
                sql.raw(&format!(" ORDER BY i.{}", i.pk));
            }
            sql.raw(")");
        }
        // [NOT] EXISTS, uncorrelated.
        5..=6 => {
            let not = if rng.pct(50) { "NOT " } else { "" };
            sql.raw(&format!("{not}EXISTS (SELECT 1 FROM {} i", i.name));
            inner_where(rng, &mut sql, data, i);
            sql.raw(")");
            // Something on the outer rows too, so both outcomes show.
            let c = column(rng, o);
            sql.raw(&format!(" AND o.{} IS NOT NULL", o.cols[c].name));
        }
        // A scalar subquery: an aggregate, or one row by primary key (or none).
        _ => {
            let oc = column(rng, o);
            let kind = o.cols[oc].kind;
            let pairs: Vec<usize> = (0..i.cols.len())
                .filter(|&c| kind.comparable(i.cols[c].kind))
                .collect();
            if pairs.is_empty() {
                return None;
            }
            let ic = *rng.pick(&pairs);
            let icol = i.cols[ic].name;
            let op = *rng.pick(&["=", "<", ">=", "<>"]);
            let numeric = i.cols[ic].kind.is_numeric();
            let inner = match rng.below(4) {
                // MIN/MAX of a string is an expression whose collation Shoal does not learn
                // (refused): numbers and dates only.
                0 if !matches!(i.cols[ic].kind, Kind::Ci | Kind::Bin) => {
                    format!("SELECT MAX(i.{icol}) FROM {} i", i.name)
                }
                1 if numeric => format!("SELECT COUNT(i.{icol}) FROM {} i", i.name),
                2 if numeric => format!("SELECT SUM(i.{icol}) FROM {} i", i.name),
                _ => {
                    // One row or none: the primary key of an existing row, or a missing one.
                    let pk = i.pk_index();
                    let rows = data.rows(i.name);
                    let key = if rows.is_empty() || rng.pct(20) {
                        "0".to_string()
                    } else {
                        rows[rng.below(rows.len())][pk].sql()
                    };
                    format!("SELECT i.{icol} FROM {} i WHERE i.{} = {key}", i.name, i.pk)
                }
            };
            if rng.pct(50) {
                sql.raw(&format!("o.{} {op} ({inner}", o.cols[oc].name));
            } else {
                sql.raw(&format!("({inner}) {op} o.{}", o.cols[oc].name));
                return Some(sql.finish(FAMILY, prepared, Check::default()));
            }
            sql.raw(")");
        }
    }
    Some(sql.finish(FAMILY, prepared, Check::default()))
}
