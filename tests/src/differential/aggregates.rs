//! Generated families of aggregates across shards that do not merge from per-shard partials
//! (issue 49), each answer compared with one MariaDB's:
//!
//! - [`AGGREGATE`]: COUNT(DISTINCT ...) (one column or several), SUM(DISTINCT ...),
//!   AVG(DISTINCT ...) and GROUP_CONCAT (ORDER BY inside, SEPARATOR, DISTINCT), with and without
//!   GROUP BY, over one table of any rule or over a join of two tables of different rules;
//! - [`ROLLUP`]: GROUP BY ... WITH ROLLUP on one or two columns;
//! - [`WINDOW`]: window functions (ROW_NUMBER, RANK, DENSE_RANK, running SUM, COUNT and AVG over
//!   a partition, LAG) over rows of several shards;
//! - [`SHORT`]: GROUP_CONCAT with a session `group_concat_max_len` of [`SHORT_LEN`] bytes, so
//!   that it truncates (and its result column is a VARCHAR, not a TEXT): run on connections of
//!   their own with the variable set on both sides ([`run_short`]).
//!
//! Every GROUP_CONCAT orders its values by a unique key (or concatenates DISTINCT numbers), so
//! the string is fixed; DISTINCT over strings is counted, never listed (which spelling of a
//! collation class stands for it is left open by SQL).

use std::time::Duration;

use mysql_async::Opts;
use mysql_async::prelude::Queryable;

use super::compare::{Check, Norm, fetch};
use super::data::{Dataset, Rng};
use super::joins::plain_col;
use super::queries::{Query, Sql, norm_of, predicate_on};
use super::schema::{self, Kind, Table};
use super::{Fail, Plan, Report, judge};

pub const AGGREGATE: &str = "cross_aggregate";
pub const ROLLUP: &str = "cross_rollup";
pub const WINDOW: &str = "cross_window";
pub const SHORT: &str = "cross_group_concat_short";

/// `group_concat_max_len` of the [`SHORT`] family's sessions.
pub const SHORT_LEN: u32 = 24;

/// Tables the aggregates read (primary keys numeric: window ORDER BY and GROUP_CONCAT order).
const TABLES: &[&Table] = &[
    &schema::ORDERS,
    &schema::ORDERS,
    &schema::LINK,
    &schema::LINK,
    &schema::ORDER_ITEM,
    &schema::ACCOUNT,
    &schema::EVENTS,
    &schema::LEDGER,
    &schema::NOTE,
];

/// Where the rows come from: one table as `t`, or a join.
struct Source {
    from: String,
    /// Group columns, numeric columns, string columns: (expression, kind).
    groups: Vec<(String, Kind)>,
    nums: Vec<String>,
    strs: Vec<String>,
    /// A unique key of the source's rows.
    key: String,
    table: &'static Table,
    alias: &'static str,
}

fn source(rng: &mut Rng) -> Source {
    if rng.pct(25) {
        // orders joined with link on another rule's column: per order, link's values.
        let join = *rng.pick(&["JOIN", "LEFT JOIN"]);
        let on = *rng.pick(&[
            "b.k_int = a.user_id",
            "b.k_dec = a.user_id",
            "b.code = a.country",
        ]);
        return Source {
            from: format!("orders a {join} link b ON {on}"),
            groups: vec![
                ("a.id".into(), Kind::UInt),
                ("a.user_id".into(), Kind::Int),
                ("a.country".into(), Kind::Ci),
            ],
            nums: vec!["b.amount".into(), "b.k_dec".into(), "a.amount".into()],
            strs: vec!["b.label".into(), "b.code".into(), "a.status".into()],
            key: "a.id, b.id".into(),
            table: &schema::ORDERS,
            alias: "a",
        };
    }
    let t = *rng.pick(TABLES);
    let col = |c: &schema::Col| format!("t.{}", c.name);
    Source {
        from: format!("{} t", t.name),
        groups: t
            .cols
            .iter()
            .filter(|c| c.kind != Kind::Double && c.name != t.pk)
            .map(|c| (col(c), c.kind))
            .collect(),
        nums: t
            .cols
            .iter()
            .filter(|c| matches!(c.kind, Kind::Int | Kind::UInt | Kind::Dec))
            .map(col)
            .collect(),
        strs: t
            .cols
            .iter()
            .filter(|c| matches!(c.kind, Kind::Ci | Kind::Bin))
            .map(col)
            .collect(),
        key: format!("t.{}", t.pk),
        table: t,
        alias: "t",
    }
}

fn where_clause(rng: &mut Rng, data: &Dataset, sql: &mut Sql, src: &Source) {
    if rng.pct(50) {
        sql.raw(" WHERE ");
        let c = plain_col(rng, src.table);
        predicate_on(rng, sql, data, src.table, &format!("{}.", src.alias), c);
    }
}

pub fn generate(seed: u64, count: usize, data: &Dataset) -> Vec<Query> {
    let mut rng = Rng::new(seed ^ 0x0c70_55a1_0052);
    (0..count)
        .map(|_| {
            let prepared = rng.pct(33);
            match rng.below(10) {
                0..=5 => aggregate(&mut rng, data, prepared, AGGREGATE),
                6 | 7 => rollup(&mut rng, data, prepared),
                _ => window(&mut rng, data, prepared),
            }
        })
        .collect()
}

/// The [`SHORT`] family's statements (run by [`run_short`]).
pub fn generate_short(seed: u64, count: usize, data: &Dataset) -> Vec<Query> {
    let mut rng = Rng::new(seed ^ 0x0c70_55a1_0053);
    (0..count)
        .map(|_| {
            let prepared = rng.pct(33);
            aggregate(&mut rng, data, prepared, SHORT)
        })
        .collect()
}

/// A GROUP_CONCAT whose string the SQL fixes.
fn group_concat(rng: &mut Rng, src: &Source) -> String {
    let sep = match rng.below(5) {
        0 => " SEPARATOR ';'",
        1 => " SEPARATOR ''",
        2 => " SEPARATOR ' | '",
        _ => "",
    };
    let dir = *rng.pick(&["", " DESC"]);
    match rng.below(4) {
        0 if !src.nums.is_empty() => {
            let n = rng.pick(&src.nums);
            format!("GROUP_CONCAT(DISTINCT {n} ORDER BY {n}{dir}{sep})")
        }
        1 if !src.nums.is_empty() && !src.strs.is_empty() => {
            let n = rng.pick(&src.nums);
            let s = rng.pick(&src.strs);
            format!("GROUP_CONCAT({n}, ':', {s} ORDER BY {}{dir}{sep})", src.key)
        }
        _ if !src.strs.is_empty() => {
            let s = rng.pick(&src.strs);
            format!("GROUP_CONCAT({s} ORDER BY {s}{dir}, {}{sep})", src.key)
        }
        _ => format!("GROUP_CONCAT({} ORDER BY {}{dir}{sep})", src.key, src.key),
    }
}

fn aggregate(rng: &mut Rng, data: &Dataset, prepared: bool, family: &'static str) -> Query {
    let src = source(rng);
    let grouped = rng.pct(60);
    let g = rng.pick(&src.groups).clone();
    let mut items: Vec<String> = Vec::new();
    if grouped {
        items.push(g.0.clone());
    }
    let n = if family == SHORT { 1 } else { rng.range(1, 4) };
    for _ in 0..n {
        let item = match rng.below(if family == SHORT { 1 } else { 6 }) {
            0 => group_concat(rng, &src),
            1 => {
                if rng.pct(20) && !src.strs.is_empty() && !src.nums.is_empty() {
                    format!(
                        "COUNT(DISTINCT {}, {})",
                        rng.pick(&src.nums),
                        rng.pick(&src.strs)
                    )
                } else {
                    let c = if !src.strs.is_empty() && rng.pct(40) {
                        rng.pick(&src.strs).clone()
                    } else if !src.nums.is_empty() {
                        rng.pick(&src.nums).clone()
                    } else {
                        src.key.clone()
                    };
                    format!("COUNT(DISTINCT {c})")
                }
            }
            2 | 3 if !src.nums.is_empty() => {
                format!("SUM(DISTINCT {})", rng.pick(&src.nums))
            }
            4 if !src.nums.is_empty() => format!("AVG(DISTINCT {})", rng.pick(&src.nums)),
            _ => format!("COUNT(DISTINCT {})", g.0),
        };
        items.push(item);
    }
    let mut sql = Sql::default();
    sql.raw(&format!("SELECT {} FROM {}", items.join(", "), src.from));
    where_clause(rng, data, &mut sql, &src);
    let mut check = Check::default();
    if grouped {
        sql.raw(&format!(" GROUP BY {}", g.0));
        check.norm = vec![(0, norm_of(g.1))];
        if rng.pct(20) {
            sql.raw(" HAVING COUNT(*) > 1");
        }
    }
    sql.finish(family, prepared, check)
}

fn rollup(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let src = source(rng);
    let g1 = rng.pick(&src.groups).clone();
    let g2 = rng.pct(40).then(|| rng.pick(&src.groups).clone());
    let mut sql = Sql::default();
    let mut check = Check {
        origin_by_plan: true,
        ..Check::default()
    };
    let mut cols = vec![g1.0.clone()];
    check.norm.push((0, norm_of(g1.1)));
    if let Some(g2) = &g2 {
        cols.push(g2.0.clone());
        check.norm.push((1, norm_of(g2.1)));
    }
    let sum = match src.nums.first() {
        Some(_) => format!(", SUM({})", rng.pick(&src.nums)),
        None => String::new(),
    };
    sql.raw(&format!(
        "SELECT {}, COUNT(*){sum} FROM {}",
        cols.join(", "),
        src.from
    ));
    where_clause(rng, data, &mut sql, &src);
    sql.raw(&format!(" GROUP BY {} WITH ROLLUP", cols.join(", ")));
    sql.finish(ROLLUP, prepared, check)
}

fn window(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    // One table: its primary key orders the rows.
    let mut src = source(rng);
    while src.alias != "t" {
        src = source(rng);
    }
    let key = src.key.clone();
    let (g, _) = rng.pick(&src.groups).clone();
    let num = src.nums.first().map(|_| rng.pick(&src.nums).clone());
    let mut items = vec![key.clone()];
    for _ in 0..rng.range(1, 4) {
        let item = match (rng.below(7), &num) {
            (0, _) => format!("ROW_NUMBER() OVER (ORDER BY {key})"),
            (1, _) => format!("ROW_NUMBER() OVER (PARTITION BY {g} ORDER BY {key} DESC)"),
            (2, Some(n)) => format!("RANK() OVER (PARTITION BY {g} ORDER BY {n})"),
            (3, Some(n)) => format!("DENSE_RANK() OVER (ORDER BY {n} DESC)"),
            (4, Some(n)) => format!("SUM({n}) OVER (PARTITION BY {g} ORDER BY {key})"),
            (5, Some(n)) => format!("LAG({n}) OVER (ORDER BY {key})"),
            (_, Some(n)) => format!("AVG({n}) OVER (PARTITION BY {g})"),
            _ => format!("COUNT(*) OVER (PARTITION BY {g})"),
        };
        items.push(item);
    }
    let mut sql = Sql::default();
    sql.raw(&format!("SELECT {} FROM {}", items.join(", "), src.from));
    where_clause(rng, data, &mut sql, &src);
    let mut check = Check::default();
    if rng.pct(50) {
        sql.raw(&format!(" ORDER BY {key}"));
        check.order = vec![(0, Norm::Exact)];
        check.unique_order = true;
        if rng.pct(50) {
            sql.raw(&format!(" LIMIT {}", rng.range(0, 30)));
            check.limited = true;
        }
    }
    sql.finish(WINDOW, prepared, check)
}

/// The [`SHORT`] family: on a connection of its own on each side with `group_concat_max_len`
/// set to [`SHORT_LEN`], text and prepared through mysql_async.
pub async fn run_short(report: &mut Report, plan: &Plan, oracle: &Opts, subject: &Opts) {
    if plan.short.is_empty() {
        return;
    }
    let set = format!("SET SESSION group_concat_max_len = {SHORT_LEN}");
    let mut o = super::connect(oracle.clone(), "the oracle").await;
    let mut s = super::connect(subject.clone(), "the subject").await;
    o.query_drop(&set)
        .await
        .unwrap_or_else(|e| panic!("{set} on the oracle: {e}"));
    if let Err(e) = s.query_drop(&set).await {
        report.errors.push(super::Finding {
            family: SHORT.into(),
            sql: set.clone(),
            params: None,
            why: "the subject failed the session variable".into(),
            oracle: String::new(),
            subject: format!("      {e}\n"),
        });
        return;
    }
    for q in &plan.short {
        let (sql, params) = q.statement();
        report.count_select(params.is_some());
        let ro = fetch(&mut o, sql, params).await.map_err(Fail::from);
        let rs = match tokio::time::timeout(plan.timeout, fetch(&mut s, sql, params)).await {
            Ok(r) => r.map_err(Fail::from),
            Err(_) => {
                report.errors.push(super::Finding {
                    family: SHORT.into(),
                    sql: sql.to_string(),
                    params: params.map(|p| format!("{p:?}")),
                    why: format!("no answer within {:?} (hang)", plan.timeout),
                    oracle: String::new(),
                    subject: String::new(),
                });
                // The connection is mid-statement and its session variable with it: stop.
                return;
            }
        };
        judge(
            report,
            q.family.to_string(),
            sql,
            params.map(|p| format!("{p:?}")),
            &q.check,
            ro,
            rs,
        );
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), o.disconnect()).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), s.disconnect()).await;
}
