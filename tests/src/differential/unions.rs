//! Generated families of UNION and WITH across shards (issue 49), each answer compared with
//! one MariaDB's:
//!
//! - [`UNION`]: two or three SELECTs over tables of different rules, global and unlisted ones,
//!   joined by UNION (distinct, by MariaDB's comparison of the result columns), UNION ALL or a
//!   mix, sometimes with ORDER BY ... LIMIT after them or inside a parenthesised member;
//! - [`WITH`]: non-recursive common table expressions across shards: a grouped or LIMITed CTE
//!   joined with a table of another rule, one CTE read twice, a UNION ALL inside a CTE.
//!
//! Drawn from a random stream of their own.

use super::compare::{Check, Norm};
use super::data::{Dataset, Rng};
use super::joins::plain_col;
use super::queries::{Query, Sql, predicate_on};
use super::schema::{self, Kind, Table};

pub const UNION: &str = "cross_union";
pub const WITH: &str = "cross_with";

/// Members a UNION draws from: a table, a numeric column and a string column of it (the
/// result's second and third columns).
const MEMBERS: &[(&Table, &str, &str)] = &[
    (&schema::ORDERS, "user_id", "country"),
    (&schema::ORDERS, "amount", "tag"),
    (&schema::LINK, "k_int", "code"),
    (&schema::LINK, "k_dec", "k_str"),
    (&schema::ACCOUNT, "balance", "name"),
    (&schema::EVENTS, "amount", "kind"),
    (&schema::NOTE, "ref_user", "code"),
    (&schema::COUNTRY, "vat", "code"),
    (&schema::LEDGER, "debit", "account"),
    (&schema::ORDER_ITEM, "qty", "sku"),
];

pub fn generate(seed: u64, count: usize, data: &Dataset) -> Vec<Query> {
    let mut rng = Rng::new(seed ^ 0x0c70_55a1_0051);
    (0..count)
        .map(|_| {
            let prepared = rng.pct(33);
            if rng.pct(60) {
                union(&mut rng, data, prepared)
            } else {
                with(&mut rng, data, prepared)
            }
        })
        .collect()
}

fn member(rng: &mut Rng, data: &Dataset, sql: &mut Sql, first: bool) -> Kind {
    let &(t, num, text) = rng.pick(MEMBERS);
    let (id, alias) = if first { (" AS id", " AS n") } else { ("", "") };
    let s = if first { " AS s" } else { "" };
    sql.raw(&format!(
        "SELECT t.{}{id}, t.{num}{alias}, t.{text}{s} FROM {} t",
        t.pk, t.name
    ));
    if rng.pct(60) {
        sql.raw(" WHERE ");
        let c = plain_col(rng, t);
        predicate_on(rng, sql, data, t, "t.", c);
    }
    t.cols[t.col(text)].kind
}

fn union(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let mut sql = Sql::default();
    let members = rng.range(2, 4);
    let mut all_only = true;
    let mut kinds = Vec::new();
    // A parenthesised member with its own ORDER BY ... LIMIT (the LIMIT applies to it alone).
    let paren = rng.pct(20).then(|| rng.below(members as usize));
    for m in 0..members as usize {
        if m > 0 {
            let all = rng.pct(50);
            all_only &= all;
            sql.raw(if all { " UNION ALL " } else { " UNION " });
        }
        if paren == Some(m) {
            sql.raw("(");
        }
        kinds.push(member(rng, data, &mut sql, m == 0));
        if paren == Some(m) {
            sql.raw(&format!(" ORDER BY 1, 2 LIMIT {})", rng.range(0, 20)));
        }
    }
    // The string column's collation: the members' (general_ci against _bin gives _bin). Its
    // spelling is fixed only for UNION ALL; a distinct UNION keeps any member of a class.
    let text = if kinds.iter().all(|&k| k == Kind::Ci) {
        Norm::Ci
    } else {
        Norm::Bin
    };
    let mut check = Check::default();
    if !all_only {
        check.norm = vec![(2, text)];
    }
    if rng.pct(50) {
        // The ids repeat across members: ties are compared as multisets.
        let keys = rng.range(1, 4) as usize;
        let cols = ["1", "2", "3"];
        sql.raw(" ORDER BY ");
        for (k, col) in cols.iter().enumerate().take(keys) {
            if k > 0 {
                sql.raw(", ");
            }
            sql.raw(col);
            check
                .order
                .push((k, if k == 2 { text } else { Norm::Exact }));
        }
        if rng.pct(60) {
            sql.raw(&format!(" LIMIT {}", rng.range(0, 30)));
            check.limited = true;
        }
    }
    sql.finish(UNION, prepared, check)
}

fn with(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let mut sql = Sql::default();
    let mut check = Check::default();
    match rng.below(4) {
        // A grouped CTE over link joined with orders.
        0 => {
            sql.raw(
                "WITH t AS (SELECT l.k_int AS k, COUNT(*) AS n, SUM(l.amount) AS s FROM link l",
            );
            if rng.pct(50) {
                sql.raw(" WHERE ");
                let c = plain_col(rng, &schema::LINK);
                predicate_on(rng, &mut sql, data, &schema::LINK, "l.", c);
            }
            sql.raw(" GROUP BY l.k_int) SELECT o.id, o.user_id, t.n, t.s FROM orders o ");
            let how = *rng.pick(&["JOIN", "LEFT JOIN"]);
            sql.raw(how);
            sql.raw(" t ON t.k = o.user_id");
            if rng.pct(50) {
                sql.raw(" WHERE ");
                let c = plain_col(rng, &schema::ORDERS);
                predicate_on(rng, &mut sql, data, &schema::ORDERS, "o.", c);
            }
            sql.raw(&format!(" ORDER BY o.id LIMIT {}", rng.range(0, 60)));
            check.order = vec![(0, Norm::Exact)];
            check.unique_order = true;
            check.limited = true;
        }
        // A LIMITed CTE of orders with its ER child (the joinedload shape written as WITH).
        1 => {
            sql.raw(&format!(
                "WITH x AS (SELECT id, user_id FROM orders ORDER BY id LIMIT {}) SELECT x.id, x.user_id, i.id AS i_id FROM x LEFT JOIN order_item i ON i.order_id = x.id ORDER BY x.id, i.id",
                rng.range(0, 30)
            ));
            check.order = vec![(0, Norm::Exact), (2, Norm::Exact)];
            check.unique_order = true;
        }
        // One CTE read twice: pairs of link rows sharing a key.
        2 => {
            sql.raw("WITH t AS (SELECT id, k_int, code FROM link");
            if rng.pct(50) {
                sql.raw(" WHERE ");
                let c = plain_col(rng, &schema::LINK);
                predicate_on(rng, &mut sql, data, &schema::LINK, "", c);
            }
            sql.raw(") SELECT a.id, b.id AS b_id, a.code FROM t a JOIN t b ON a.k_int = b.k_int AND a.id < b.id ORDER BY a.id, b.id");
            check.order = vec![(0, Norm::Exact), (1, Norm::Exact)];
            check.unique_order = true;
            if rng.pct(50) {
                sql.raw(&format!(" LIMIT {}", rng.range(0, 50)));
                check.limited = true;
            }
        }
        // A UNION ALL inside a CTE, grouped outside.
        _ => {
            sql.raw("WITH u AS (SELECT k_int AS k FROM link UNION ALL SELECT ref_user FROM note UNION ALL SELECT user_id FROM orders");
            if rng.pct(50) {
                sql.raw(" WHERE ");
                let c = plain_col(rng, &schema::ORDERS);
                predicate_on(rng, &mut sql, data, &schema::ORDERS, "", c);
            }
            sql.raw(") SELECT k, COUNT(*) FROM u GROUP BY k");
            if rng.pct(50) {
                sql.raw(" HAVING COUNT(*) > 10");
            }
        }
    }
    sql.finish(WITH, prepared, check)
}
