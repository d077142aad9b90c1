//! Co-located joins written without qualifiers, TPC-C style (issue 24): the tables `wh`,
//! `dist` and `cust` (and `orders`) share one rule and its datanodes and are keyed by columns
//! of their own names (`w_id`, `d_w_id`, `c_w_id`, `user_id`), so `c_w_id = w_id` joins them
//! on one shard however it is written. The family's members, each a family of the report:
//!
//! - `colo_join`: equi-joins of two or three of them on their keys, unqualified, as a comma
//!   join, `JOIN ... ON` or `LEFT JOIN ... ON`; pinned (`w_id = 4`, `IN` of one shard's or of
//!   several shards' values) or not; extra conjuncts on other columns (sometimes ORed with the
//!   pin, which then pins nothing); rows with ORDER BY + LIMIT, GROUP BY with aggregates, or
//!   aggregates alone;
//! - `colo_derived`: derived tables over one of them pinned inside (and joined with another on
//!   the key), or pinned from outside through a column the derived table passes through;
//! - `colo_correlated`: scalar, `EXISTS`, `NOT EXISTS` and `IN` subqueries correlated on the
//!   shard key (the inner side qualified or not), with the outer table pinned or not;
//! - `colo_negative`: shapes a router that pins too eagerly answers wrongly, which must be
//!   refused or answered exactly: `NOT EXISTS` with the pin inside the subquery only, a derived
//!   table with LIMIT pinned from outside, a derived column that is an aggregate, an
//!   expression or another column under the key's name, a subquery correlated on a non-key
//!   column or not correlated at all inside a pinned query, `IN`/`NOT IN` over keys with NULLs
//!   (shard 0 holds them: its answer differs from the others'), a pinned derived table joined
//!   on a non-key column;
//! - `colo_ambiguous` ([`AMBIGUOUS`]): an unqualified column two tables in scope have: MariaDB
//!   answers 1052, and so must Shoal (both failing alike is counted as such; anything else is a
//!   failure).

use super::compare::{Check, Norm};
use super::data::{Dataset, Lit, Rng};
use super::queries::{Query, Sql, limit, norm_of, predicate_on};
use super::schema::{self, Kind, Table};

/// The family whose statements every server rejects (1052): the only SELECTs that may fail
/// alike on both sides.
pub const AMBIGUOUS: &str = "colo_ambiguous";

/// The report families of this generator.
pub const FAMILIES: &[&str] = &[
    "colo_join",
    "colo_derived",
    "colo_correlated",
    "colo_negative",
    AMBIGUOUS,
];

/// One statement of the family.
pub fn query(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    match rng.below(20) {
        0..=6 => join(rng, data, prepared),
        7..=10 => derived(rng, data, prepared),
        11..=14 => correlated(rng, data, prepared),
        15..=18 => negative(rng, data, prepared),
        _ => ambiguous(rng, data),
    }
}

/// A warehouse id: mostly one that exists, sometimes one in the key range without a warehouse
/// (its districts and customers may still exist), now and then one no row has.
fn w_value(rng: &mut Rng, data: &Dataset) -> Lit {
    let wh = data.rows("wh");
    match rng.below(20) {
        0 | 1 => Lit::Int(rng.range(-5, 60)),
        2 => Lit::Int(rng.range(61, 70)),
        _ if !wh.is_empty() => wh[rng.below(wh.len())][0].clone(),
        _ => Lit::Int(rng.range(-5, 60)),
    }
}

/// ` WHERE ` before the first conjunct, ` AND ` before the others.
fn and(sql: &mut Sql, started: &mut bool) {
    sql.raw(if *started { " AND " } else { " WHERE " });
    *started = true;
}

/// A pin on key column `col` (`col = v`, `col IN (...)` with values of one shard or of
/// several), or nothing; whether it wrote one.
fn pin(rng: &mut Rng, data: &Dataset, sql: &mut Sql, col: &str, started: &mut bool) -> bool {
    match rng.below(10) {
        0..=4 => {
            and(sql, started);
            pin_expr(rng, data, sql, col);
            true
        }
        5..=7 => {
            and(sql, started);
            pin_in(rng, data, sql, col);
            true
        }
        _ => false,
    }
}

/// `col = v`.
fn pin_expr(rng: &mut Rng, data: &Dataset, sql: &mut Sql, col: &str) {
    let v = w_value(rng, data);
    sql.raw(&format!("{col} = ")).lit(&v);
}

/// `col IN (...)`: half the time values that all land on one shard of the 6 (`v`, `v + 6`,
/// ...; the mod rule), else any.
fn pin_in(rng: &mut Rng, data: &Dataset, sql: &mut Sql, col: &str) {
    sql.raw(&format!("{col} IN ("));
    let n = rng.range(2, 3);
    let one_shard = rng.pct(50);
    let base = rng.range(0, 48);
    for i in 0..n {
        if i > 0 {
            sql.raw(", ");
        }
        let v = if one_shard {
            Lit::Int(base + 6 * i)
        } else {
            w_value(rng, data)
        };
        sql.lit(&v);
    }
    sql.raw(")");
}

/// A predicate on a column of `table` other than its shard key, unqualified.
fn extra(rng: &mut Rng, data: &Dataset, sql: &mut Sql, table: &Table) {
    let key = table.shard_key.map(|k| table.col(k));
    let cols: Vec<usize> = (0..table.cols.len()).filter(|&c| Some(c) != key).collect();
    let c = *rng.pick(&cols);
    predicate_on(rng, sql, data, table, "", c);
}

/// A result column.
struct Out {
    expr: String,
    kind: Kind,
}

/// `a = b` or `b = a`.
fn eq(rng: &mut Rng, a: &str, b: &str) -> String {
    if rng.pct(50) {
        format!("{a} = {b}")
    } else {
        format!("{b} = {a}")
    }
}

/// Unqualified equi-joins of two or three co-located tables on their keys.
fn join(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let (wh, dist, cust, orders) = (&schema::WH, &schema::DIST, &schema::CUST, &schema::ORDERS);
    // The tables in FROM order, and for each after the first the equalities joining it.
    let (tables, conds): (Vec<&Table>, Vec<Vec<String>>) = match rng.below(9) {
        0 | 1 => (
            vec![wh, dist],
            vec![vec![], vec![eq(rng, "d_w_id", "w_id")]],
        ),
        2 | 3 => (
            vec![wh, cust],
            vec![vec![], vec![eq(rng, "c_w_id", "w_id")]],
        ),
        4 => (
            vec![cust, wh],
            vec![vec![], vec![eq(rng, "c_w_id", "w_id")]],
        ),
        5 => {
            let mut on = vec![eq(rng, "c_w_id", "d_w_id")];
            if rng.pct(70) {
                on.push(eq(rng, "c_d_id", "d_id"));
            }
            (vec![dist, cust], vec![vec![], on])
        }
        6 | 7 => {
            let to_w = if rng.pct(50) {
                eq(rng, "c_w_id", "d_w_id")
            } else {
                eq(rng, "c_w_id", "w_id")
            };
            (
                vec![wh, dist, cust],
                vec![
                    vec![],
                    vec![eq(rng, "d_w_id", "w_id")],
                    vec![to_w, eq(rng, "c_d_id", "d_id")],
                ],
            )
        }
        _ => (
            vec![wh, orders],
            vec![vec![], vec![eq(rng, "user_id", "w_id")]],
        ),
    };
    let style = rng.below(3);
    let mut from = tables[0].name.to_string();
    let mut where_conds: Vec<String> = Vec::new();
    for (t, on) in tables.iter().zip(&conds).skip(1) {
        match style {
            0 => {
                from.push_str(&format!(", {}", t.name));
                where_conds.extend(on.iter().cloned());
            }
            1 => from.push_str(&format!(" JOIN {} ON {}", t.name, on.join(" AND "))),
            _ => from.push_str(&format!(" LEFT JOIN {} ON {}", t.name, on.join(" AND "))),
        }
    }
    let mut sql = Sql::default();
    let mut check = Check::default();
    let mut outs: Vec<Out> = Vec::new();
    let mode = rng.below(10);
    if mode < 5 {
        // Rows: some columns of each table and every table's primary key, which together
        // identify a row of the join.
        let mut pks = Vec::new();
        for t in &tables {
            for c in 0..t.cols.len() {
                let is_pk = t.cols[c].name == t.pk;
                if is_pk || rng.pct(35) {
                    if is_pk {
                        pks.push(outs.len());
                    }
                    outs.push(Out {
                        expr: t.cols[c].name.to_string(),
                        kind: t.cols[c].kind,
                    });
                }
            }
        }
        let list: Vec<&str> = outs.iter().map(|o| o.expr.as_str()).collect();
        sql.raw(&format!("SELECT {} FROM {from}", list.join(", ")));
        where_part(rng, data, &mut sql, &tables, &where_conds);
        if rng.pct(60) {
            sql.raw(" ORDER BY ");
            let mut keys: Vec<usize> = Vec::new();
            for _ in 0..rng.below(3) {
                let i = rng.below(outs.len());
                if !keys.contains(&i) {
                    keys.push(i);
                }
            }
            for p in pks {
                if !keys.contains(&p) {
                    keys.push(p);
                }
            }
            for (n, &i) in keys.iter().enumerate() {
                if n > 0 {
                    sql.raw(", ");
                }
                let dir = *rng.pick(&["", " DESC"]);
                sql.raw(&format!("{}{dir}", outs[i].expr));
                check.order.push((i, norm_of(outs[i].kind)));
            }
            check.unique_order = true;
            limit(rng, &mut sql, &mut check);
        }
        return sql.finish("colo_join", prepared, check);
    }
    // Aggregates, grouped by a column of one of the tables (its key or another) or not.
    let grouped = mode < 8;
    let mut list: Vec<String> = Vec::new();
    let mut group_key = None;
    if grouped {
        let t = *rng.pick(&tables);
        let c = if rng.pct(40) {
            t.col(t.shard_key.expect("sharded"))
        } else {
            rng.below(t.cols.len())
        };
        let n = norm_of(t.cols[c].kind);
        if n != Norm::Exact {
            check.norm.push((0, n));
        }
        list.push(t.cols[c].name.to_string());
        group_key = Some((t.cols[c].name, n));
    }
    let numeric: Vec<(&str, Kind)> = tables
        .iter()
        .flat_map(|t| t.cols.iter())
        .filter(|c| c.kind.is_numeric())
        .map(|c| (c.name, c.kind))
        .collect();
    let any: Vec<(&str, Kind)> = tables
        .iter()
        .flat_map(|t| t.cols.iter())
        .map(|c| (c.name, c.kind))
        .collect();
    list.push("COUNT(*)".into());
    for _ in 0..rng.range(1, 3) {
        let (agg, (col, kind)) = match rng.below(5) {
            0 => ("SUM", *rng.pick(&numeric)),
            1 => ("AVG", *rng.pick(&numeric)),
            2 => ("COUNT", *rng.pick(&any)),
            3 => ("MIN", *rng.pick(&any)),
            _ => ("MAX", *rng.pick(&any)),
        };
        let n = norm_of(kind);
        if n != Norm::Exact && (agg == "MIN" || agg == "MAX") {
            check.norm.push((list.len(), n));
        }
        list.push(format!("{agg}({col})"));
    }
    sql.raw(&format!("SELECT {} FROM {from}", list.join(", ")));
    where_part(rng, data, &mut sql, &tables, &where_conds);
    if let Some((key, n)) = group_key {
        sql.raw(&format!(" GROUP BY {key}"));
        if rng.pct(20) {
            sql.raw(&format!(" HAVING COUNT(*) > {}", rng.range(0, 4)));
        }
        if rng.pct(60) {
            let dir = *rng.pick(&["", " DESC"]);
            sql.raw(&format!(" ORDER BY {key}{dir}"));
            check.order.push((0, n));
            check.unique_order = true;
            limit(rng, &mut sql, &mut check);
        }
    }
    sql.finish("colo_join", prepared, check)
}

/// The WHERE of a join: its equalities (comma joins), a pin on one table's key, and extra
/// conjuncts on other columns (sometimes one ORed with the pin).
fn where_part(rng: &mut Rng, data: &Dataset, sql: &mut Sql, tables: &[&Table], conds: &[String]) {
    let mut started = false;
    for c in conds {
        and(sql, &mut started);
        sql.raw(c);
    }
    let pinned = *rng.pick(tables);
    let key = pinned.shard_key.expect("sharded");
    if rng.pct(12) {
        and(sql, &mut started);
        sql.raw("(");
        pin_expr(rng, data, sql, key);
        sql.raw(" OR ");
        let t = *rng.pick(tables);
        extra(rng, data, sql, t);
        sql.raw(")");
    } else {
        pin(rng, data, sql, key, &mut started);
    }
    for _ in 0..rng.below(3) {
        let t = *rng.pick(tables);
        and(sql, &mut started);
        extra(rng, data, sql, t);
    }
}

/// Derived tables pinned inside, or from outside through a column they pass through.
fn derived(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let mut sql = Sql::default();
    let check = Check::default();
    match rng.below(7) {
        0 | 1 => {
            // Pinned inside, joined with the warehouse on the key (pinned too, or not).
            sql.raw("SELECT x.d_w_id, x.s, x.n, w_name FROM (SELECT d_w_id, SUM(d_ytd) s, COUNT(*) n FROM dist WHERE ");
            if rng.pct(70) {
                pin_expr(rng, data, &mut sql, "d_w_id");
            } else {
                pin_in(rng, data, &mut sql, "d_w_id");
            }
            sql.raw(" GROUP BY d_w_id) x JOIN wh ON ");
            sql.raw(&eq(rng, "w_id", "x.d_w_id"));
            let mut started = false;
            if rng.pct(50) {
                and(&mut sql, &mut started);
                pin_expr(rng, data, &mut sql, "w_id");
            }
        }
        2 => {
            // Pinned from outside through a pass-through column.
            let q = *rng.pick(&["x.", ""]);
            sql.raw("SELECT x.d_w_id, x.d_id, x.s FROM (SELECT d_w_id, d_id, SUM(d_ytd) s FROM dist GROUP BY d_w_id, d_id) x");
            let mut started = false;
            if !pin(rng, data, &mut sql, &format!("{q}d_w_id"), &mut started) {
                and(&mut sql, &mut started);
                pin_expr(rng, data, &mut sql, &format!("{q}d_w_id"));
            }
        }
        3 => {
            // The key passed through under another name.
            sql.raw("SELECT x.k, x.d_id, x.d_ytd FROM (SELECT d_w_id AS k, d_id, d_ytd FROM dist) x WHERE ");
            pin_expr(rng, data, &mut sql, "x.k");
        }
        4 => {
            // A derived table of customers grouped by their key, joined with districts on
            // both keys, pinned through the outer table (or not).
            sql.raw("SELECT d_id, d_name, x.n, x.b FROM dist JOIN (SELECT c_w_id, c_d_id, COUNT(*) n, SUM(c_balance) b FROM cust GROUP BY c_w_id, c_d_id) x ON ");
            sql.raw(&eq(rng, "x.c_w_id", "d_w_id"));
            sql.raw(" AND ");
            sql.raw(&eq(rng, "x.c_d_id", "d_id"));
            let mut started = false;
            pin(rng, data, &mut sql, "d_w_id", &mut started);
        }
        5 => {
            // LIMIT inside, pinned inside: one shard's rows are all the rows.
            sql.raw("SELECT * FROM (SELECT d_id, d_ytd, d_w_id FROM dist WHERE ");
            pin_expr(rng, data, &mut sql, "d_w_id");
            sql.raw(&format!(
                " ORDER BY d_ytd DESC, d_id LIMIT {}) x",
                rng.range(1, 3)
            ));
        }
        _ => {
            // A co-located join written unqualified inside the derived table.
            sql.raw("SELECT * FROM (SELECT w_id, w_name, c_id, c_balance FROM wh, cust WHERE ");
            sql.raw(&eq(rng, "c_w_id", "w_id"));
            let mut started = true;
            pin(rng, data, &mut sql, "w_id", &mut started);
            sql.raw(") x");
            let mut started = false;
            if rng.pct(50) {
                // On a column the derived table passes through.
                and(&mut sql, &mut started);
                let (t, c) = *rng.pick(&[
                    (&schema::CUST, "c_balance"),
                    (&schema::CUST, "c_id"),
                    (&schema::WH, "w_name"),
                ]);
                predicate_on(rng, &mut sql, data, t, "", t.col(c));
            }
            if rng.pct(40) {
                and(&mut sql, &mut started);
                pin_expr(rng, data, &mut sql, "x.w_id");
            }
        }
    }
    sql.finish("colo_derived", prepared, check)
}

/// How a subquery over `inner_key` refers to the outer table's `w.w_id`: qualified on both
/// sides, the inner side unqualified, or both (`w_id` is only the outer table's).
fn correlation(rng: &mut Rng, inner_table: &str, inner_key: &str, outer: &str) -> String {
    let outer_col = outer.rsplit('.').next().unwrap_or(outer).to_string();
    match rng.below(4) {
        0 => eq(rng, inner_key, outer),
        1 => eq(rng, &format!("{inner_table}.{inner_key}"), outer),
        2 => eq(rng, inner_key, &outer_col),
        _ => format!("{inner_key} = {outer}"),
    }
}

/// `AS name` most of the time: an unaliased subquery names its column with its own text.
fn alias(rng: &mut Rng, name: &str) -> String {
    if rng.pct(70) {
        format!(" AS {name}")
    } else {
        String::new()
    }
}

/// Subqueries correlated on the shard key, the outer table pinned or not.
fn correlated(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let mut sql = Sql::default();
    let mut check = Check::default();
    let mut started = false;
    match rng.below(7) {
        0 | 1 => {
            let inner = if rng.pct(60) { "cust" } else { "dist" };
            let key = if inner == "cust" { "c_w_id" } else { "d_w_id" };
            let corr = correlation(rng, inner, key, "w.w_id");
            let agg = if inner == "cust" {
                *rng.pick(&["COUNT(*)", "SUM(c_balance)", "MAX(c_last)"])
            } else {
                *rng.pick(&["COUNT(*)", "SUM(d_ytd)", "MIN(d_name)"])
            };
            if agg.contains("_last") || agg.contains("_name") {
                check.norm.push((1, Norm::Ci));
            }
            sql.raw(&format!(
                "SELECT w_id, (SELECT {agg} FROM {inner} WHERE {corr}){} FROM wh w",
                alias(rng, "v")
            ));
            pin(rng, data, &mut sql, "w_id", &mut started);
        }
        2 => {
            // A co-located join inside the subquery, written unqualified (TPC-C's shape).
            let corr = correlation(rng, "dist", "d_w_id", "w.w_id");
            sql.raw(&format!(
                "SELECT w_id, w_name, (SELECT SUM(c_balance) FROM dist, cust WHERE {} AND {} AND {corr}){} FROM wh w",
                eq(rng, "c_w_id", "d_w_id"),
                eq(rng, "c_d_id", "d_id"),
                alias(rng, "total")
            ));
            pin(rng, data, &mut sql, "w_id", &mut started);
        }
        3 => {
            let not = if rng.pct(40) { "NOT " } else { "" };
            let corr = correlation(rng, "dist", "d_w_id", "w.w_id");
            // Unpinned, NOT EXISTS is exact across shards too: the rows it looks for are on
            // the outer row's shard.
            sql.raw("SELECT w_id, w_name FROM wh w");
            pin(rng, data, &mut sql, "w_id", &mut started);
            and(&mut sql, &mut started);
            sql.raw(&format!("{not}EXISTS (SELECT 1 FROM dist WHERE {corr}"));
            if rng.pct(60) {
                sql.raw(" AND ");
                extra(rng, data, &mut sql, &schema::DIST);
            }
            sql.raw(")");
        }
        4 => {
            // The key in a semi-join (NULL keys inside do not matter in a WHERE).
            sql.raw("SELECT w_id, w_ytd FROM wh");
            pin(rng, data, &mut sql, "w_id", &mut started);
            and(&mut sql, &mut started);
            sql.raw("w_id IN (SELECT c_w_id FROM cust");
            if rng.pct(70) {
                sql.raw(" WHERE ");
                extra(rng, data, &mut sql, &schema::CUST);
            }
            sql.raw(")");
        }
        5 => {
            // From districts to their customers on both keys.
            sql.raw(&format!(
                "SELECT d_id, d_w_id, (SELECT MAX(c_balance) FROM cust WHERE {} AND {}){} FROM dist d",
                correlation(rng, "cust", "c_w_id", "d.d_w_id"),
                eq(rng, "c_d_id", "d.d_id"),
                alias(rng, "top")
            ));
            pin(rng, data, &mut sql, "d_w_id", &mut started);
        }
        _ => {
            // The pin inside EXISTS, which is the outer row's own key: pinning the outer
            // table with it is right here.
            let v = w_value(rng, data);
            sql.raw(&format!(
                "SELECT w_id, w_tax FROM wh w WHERE EXISTS (SELECT 1 FROM cust WHERE {} AND c_w_id = ",
                correlation(rng, "cust", "c_w_id", "w.w_id")
            ))
            .lit(&v)
            .raw(")");
        }
    }
    if rng.pct(40) {
        // w_id / d_id, the first column, is unique.
        sql.raw(" ORDER BY 1");
        check.order.push((0, Norm::Exact));
        check.unique_order = true;
        limit(rng, &mut sql, &mut check);
    }
    sql.finish("colo_correlated", prepared, check)
}

/// Shapes a router that pins too eagerly answers wrongly: refused or answered exactly.
fn negative(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let mut sql = Sql::default();
    let dist = data.rows("dist");
    let d_w_ids: Vec<i64> = dist
        .iter()
        .filter_map(|r| match r[1] {
            Lit::Int(w) => Some(w),
            _ => None,
        })
        .collect();
    match rng.below(11) {
        0 | 1 => {
            // The pin is inside NOT EXISTS only: the outer rows of every shard count.
            let v = w_value(rng, data);
            sql.raw(&format!(
                "SELECT w_id FROM wh w WHERE NOT EXISTS (SELECT 1 FROM cust WHERE {} AND c_w_id = ",
                correlation(rng, "cust", "c_w_id", "w.w_id")
            ))
            .lit(&v)
            .raw(")");
        }
        2 => {
            // LIMIT inside, pinned from outside: the first rows of all shards, not of one.
            let l = rng.range(3, 30) as usize;
            let first: Vec<i64> = dist
                .iter()
                .take(l)
                .filter_map(|r| match r[1] {
                    Lit::Int(w) => Some(w),
                    _ => None,
                })
                .collect();
            let v = if first.is_empty() {
                3
            } else {
                *rng.pick(&first)
            };
            sql.raw(&format!(
                "SELECT * FROM (SELECT d_w_id, d_id, d_ytd FROM dist ORDER BY d_id LIMIT {l}) x WHERE x.d_w_id = "
            ))
            .lit(&Lit::Int(v));
        }
        3 => {
            // A derived column that is an aggregate over every shard, equal to the value of
            // one shard's key.
            let (f, v) = if rng.pct(50) {
                ("MAX", d_w_ids.iter().max().copied().unwrap_or(0))
            } else {
                ("MIN", d_w_ids.iter().min().copied().unwrap_or(0))
            };
            sql.raw(&format!(
                "SELECT m, n FROM (SELECT {f}(d_w_id) m, COUNT(*) n FROM dist) x WHERE m = "
            ))
            .lit(&Lit::Int(v));
        }
        4 => {
            // An expression of the key under a name of its own.
            sql.raw(
                "SELECT x.k, x.d_id FROM (SELECT d_w_id - 1 AS k, d_id FROM dist) x WHERE x.k = ",
            )
            .lit(&Lit::Int(rng.range(-6, 59)));
        }
        5 => {
            // Another column under the key's name.
            let d = if dist.is_empty() {
                Lit::Int(1)
            } else {
                dist[rng.below(dist.len())][0].clone()
            };
            sql.raw("SELECT x.d_w_id, x.d_ytd FROM (SELECT d_id AS d_w_id, d_ytd FROM dist) x WHERE x.d_w_id = ")
                .lit(&d);
        }
        6 => {
            // Correlated on a column that is not the key, in a pinned query.
            sql.raw(&format!(
                "SELECT w_id, (SELECT COUNT(*) FROM cust WHERE {}) AS n FROM wh w WHERE w_id = ",
                eq(rng, "c_d_id", "w.w_id")
            ))
            .lit(&w_value(rng, data));
        }
        7 => {
            // Not correlated, in a pinned query: the whole table, or another shard's rows.
            let inner = if rng.pct(50) {
                "c_credit = 'BC'".to_string()
            } else {
                format!("c_w_id = {}", w_value(rng, data).sql())
            };
            sql.raw(&format!(
                "SELECT w_id, (SELECT COUNT(*) FROM cust WHERE {inner}) AS n FROM wh WHERE w_id = "
            ))
            .lit(&w_value(rng, data));
        }
        8 => {
            // IN as a value: NULL where the subquery holds a NULL key (shard 0's rows), 0
            // elsewhere.
            sql.raw("SELECT w_id, w_id IN (SELECT c_w_id FROM cust WHERE ");
            extra(rng, data, &mut sql, &schema::CUST);
            sql.raw(") AS hit FROM wh");
        }
        9 => {
            // NOT IN over keys that may be NULL: no row at all when one is.
            sql.raw("SELECT w_id FROM wh WHERE w_id NOT IN (SELECT c_w_id FROM cust WHERE ");
            extra(rng, data, &mut sql, &schema::CUST);
            if rng.pct(30) {
                sql.raw(" AND c_w_id IS NOT NULL");
            }
            sql.raw(")");
        }
        _ => {
            // A pinned derived table joined on a column that is not the key.
            sql.raw("SELECT x.s, w_id FROM (SELECT d_w_id, SUM(d_ytd) s FROM dist WHERE d_w_id = ")
                .lit(&w_value(rng, data))
                .raw(" GROUP BY d_w_id) x JOIN wh ON w_ytd > x.s");
        }
    }
    sql.finish("colo_negative", prepared, Check::default())
}

/// An unqualified column two tables in scope have (text protocol only): 1052 on MariaDB.
fn ambiguous(rng: &mut Rng, data: &Dataset) -> Query {
    let v = w_value(rng, data).sql();
    let sql = match rng.below(5) {
        0 => format!(
            "SELECT a.c_id, b.c_id FROM cust a JOIN cust b ON a.c_w_id = b.c_w_id AND a.c_id < b.c_id WHERE c_w_id = {v}"
        ),
        1 => format!(
            "SELECT w_id, c_last FROM wh, cust a, cust b WHERE a.c_w_id = w_id AND b.c_w_id = w_id AND w_id = {v}"
        ),
        2 => format!(
            "SELECT w_id, qty FROM wh, orders, order_item WHERE orders.user_id = w_id AND order_item.user_id = w_id AND w_id = {v}"
        ),
        3 => "SELECT w_id FROM wh, orders o, order_item i WHERE user_id = w_id".to_string(),
        _ => "SELECT a.c_id FROM cust a, cust b WHERE a.c_w_id = b.c_w_id ORDER BY c_balance, a.c_id LIMIT 5"
            .to_string(),
    };
    Query {
        family: AMBIGUOUS,
        sql,
        prepared: None,
        check: Check::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_member_is_generated_and_prepared_ones_bind_every_placeholder() {
        let data = Dataset::generate(5, 120);
        let mut rng = Rng::new(5);
        let qs: Vec<Query> = (0..600)
            .map(|i| query(&mut rng, &data, i % 3 == 0))
            .collect();
        for f in FAMILIES {
            assert!(qs.iter().any(|q| q.family == *f), "no {f}");
        }
        for q in &qs {
            if let Some((sql, params)) = &q.prepared {
                assert_eq!(sql.matches('?').count(), params.len(), "{sql}");
            }
        }
    }
}
