//! Generated families of joins and correlated subqueries whose rows live on several shards
//! (issue 49), each answer compared with one MariaDB's:
//!
//! - [`JOIN`]: two tables of different rules and keys (and global, unlisted, ER child and
//!   self-joins) joined INNER, LEFT or RIGHT on columns of different types and collations (INT
//!   vs DECIMAL vs VARCHAR, `utf8mb4_general_ci` vs `_bin`: `'a'`, `'A'`, `'a '`), NULL keys on
//!   both sides, a condition on the inner side in ON or in WHERE (vt#19557), a side whose
//!   filter matches nothing, a global table on the preserved side (vt#19545), COUNT over an
//!   outer join (vt#12269), sometimes a third table; rows (ordered by both primary keys, maybe
//!   LIMITed), counts, or groups;
//! - [`CORRELATED`]: `EXISTS`, `NOT EXISTS`, scalar subqueries in the select list and in WHERE,
//!   and `[NOT] IN` with NULLs on both sides, correlated on a column of another rule or type;
//! - [`DERIVED`]: the ORM shapes: a derived table with ORDER BY ... LIMIT joined with its ER
//!   child on the foreign key alone (SQLAlchemy's `joinedload()` + `.limit()`), TypeORM's
//!   `SELECT DISTINCT ... FROM (... LEFT JOIN ...) distinctAlias ... LIMIT` paging, and grouped
//!   or LIMITed derived tables joined with a table of another rule;
//! - [`LOCKING`]: joins across shards with `FOR UPDATE` / `LOCK IN SHARE MODE`: refused by
//!   design (a copy of the rows cannot hold the datanodes' locks), answered only when exact.
//!
//! Drawn from a random stream of their own: the other families' statements stay what they were
//! for a seed.

use super::compare::{Check, Norm};
use super::data::{Dataset, Rng};
use super::queries::{Query, Sql, norm_of, predicate_on};
use super::schema::{self, Kind, Table};

pub const JOIN: &str = "cross_join";
pub const CORRELATED: &str = "cross_correlated";
pub const DERIVED: &str = "cross_derived";
pub const LOCKING: &str = "cross_locking";

/// Join conditions `a.x = b.y` between tables that are not co-located on them (and a few that
/// are, as controls: a global table with a sharded one).
const PAIRS: &[(&Table, &str, &Table, &str)] = &[
    // Different rules, INT = INT.
    (&schema::ORDERS, "user_id", &schema::LINK, "k_int"),
    // INT = DECIMAL(6,1): 7 = 7.0, nothing = 7.5.
    (&schema::ORDERS, "user_id", &schema::LINK, "k_dec"),
    // INT = VARCHAR: compared as numbers ('07' = 7, '7 ' = 7, 'de' = 0).
    (&schema::ORDERS, "user_id", &schema::LINK, "k_str"),
    // general_ci = _bin: compared under _bin ('de' <> 'DE', 'de' = 'de ').
    (&schema::ORDERS, "country", &schema::LINK, "code"),
    // general_ci = general_ci on a non-key column of both.
    (&schema::ORDERS, "country", &schema::LINK, "k_str"),
    // _bin = _bin.
    (&schema::ORDERS, "tag", &schema::LINK, "code"),
    // mod rule against a hash rule on another column.
    (&schema::ORDERS, "user_id", &schema::ACCOUNT, "id"),
    (&schema::ACCOUNT, "id", &schema::LINK, "k_int"),
    // range rule against hash.
    (&schema::EVENTS, "id", &schema::LINK, "k_int"),
    // An unlisted table (dn0 only) against sharded ones.
    (&schema::NOTE, "ref_user", &schema::LINK, "k_int"),
    (&schema::NOTE, "ref_user", &schema::ORDERS, "user_id"),
    (&schema::NOTE, "code", &schema::LINK, "code"),
    // A global table against sharded ones (the last on a co-locating column: a control).
    (&schema::COUNTRY, "code", &schema::LINK, "code"),
    (&schema::COUNTRY, "code", &schema::LINK, "k_str"),
    (&schema::COUNTRY, "code", &schema::ORDERS, "country"),
    // The ER child on its foreign key alone, not the shard key.
    (&schema::ORDER_ITEM, "order_id", &schema::ORDERS, "id"),
    (&schema::ORDER_ITEM, "user_id", &schema::LINK, "k_dec"),
    // Tables of orders' rule on their own keys against link.
    (&schema::WH, "w_id", &schema::LINK, "k_dec"),
    (&schema::CUST, "c_w_id", &schema::LINK, "k_int"),
    // date rule (table-per-shard) against the child.
    (&schema::LEDGER, "id", &schema::ORDER_ITEM, "id"),
    // Self-joins on columns that are not the shard key.
    (&schema::LINK, "k_int", &schema::LINK, "k_dec"),
    (&schema::LINK, "code", &schema::LINK, "k_str"),
    (&schema::ORDERS, "user_id", &schema::ORDERS, "delta"),
];

/// A statement of one of the families, about a third prepared.
pub fn generate(seed: u64, count: usize, data: &Dataset) -> Vec<Query> {
    let mut rng = Rng::new(seed ^ 0x0c70_55a1_0049);
    (0..count)
        .map(|_| {
            let prepared = rng.pct(33);
            match rng.below(20) {
                0..=8 => join(&mut rng, data, prepared),
                9..=13 => correlated(&mut rng, data, prepared),
                14..=18 => derived(&mut rng, data, prepared),
                _ => locking(&mut rng, data, prepared),
            }
        })
        .collect()
}

/// A column of `t` that is not DOUBLE (its sums depend on the order they are added in only
/// when inexact; kept out of filters for simplicity).
pub(super) fn plain_col(rng: &mut Rng, t: &Table) -> usize {
    loop {
        let c = rng.below(t.cols.len());
        if t.cols[c].kind != Kind::Double {
            return c;
        }
    }
}

/// A numeric (not DOUBLE) column of `t`, if it has one.
pub(super) fn numeric_col(rng: &mut Rng, t: &Table) -> Option<usize> {
    let cols: Vec<usize> = (0..t.cols.len())
        .filter(|&c| matches!(t.cols[c].kind, Kind::Int | Kind::UInt | Kind::Dec))
        .collect();
    (!cols.is_empty()).then(|| *rng.pick(&cols))
}

/// ` AND|WHERE <predicate on alias.col>` for a random column of `t`.
fn filter(rng: &mut Rng, sql: &mut Sql, data: &Dataset, t: &Table, alias: &str) {
    let c = plain_col(rng, t);
    predicate_on(rng, sql, data, t, &format!("{alias}."), c);
}

/// A predicate no row satisfies (an empty side), written so no planner can see it is empty.
fn nothing(t: &Table, alias: &str) -> String {
    format!(
        "{alias}.{pk} IS NULL AND {alias}.{pk} IS NOT NULL",
        pk = t.pk
    )
}

fn join(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let &(a, ac, b, bc) = rng.pick(PAIRS);
    let kind = *rng.pick(&["JOIN", "LEFT JOIN", "RIGHT JOIN", "LEFT OUTER JOIN"]);
    let right = kind.starts_with("RIGHT");
    let outer = kind != "JOIN";
    let mut sql = Sql::default();
    let (ax, bx) = (plain_col(rng, a), plain_col(rng, b));
    // A third table now and then: the global country on a's or b's string column.
    let third = match (a.name, b.name) {
        (_, "link") if rng.pct(20) => Some(("b.k_str", *rng.pick(&["JOIN", "LEFT JOIN"]))),
        ("orders", _) if rng.pct(20) => Some(("a.country", *rng.pick(&["JOIN", "LEFT JOIN"]))),
        _ => None,
    };
    let shape = rng.below(10);
    let mut check = Check::default();
    match shape {
        // Rows.
        0..=5 => {
            sql.raw(&format!(
                "SELECT a.{}, b.{}, a.{}, b.{}",
                a.pk, b.pk, a.cols[ax].name, b.cols[bx].name
            ));
            if third.is_some() {
                sql.raw(", c.code, c.vat");
            }
        }
        // Counts over the join (COUNT(b.pk) counts the matched rows of an outer join).
        6 | 7 => {
            let sum = match numeric_col(rng, b) {
                Some(c) => format!(", SUM(b.{})", b.cols[c].name),
                None => String::new(),
            };
            sql.raw(&format!(
                "SELECT COUNT(*), COUNT(b.{}), COUNT(a.{}){sum}",
                b.pk, a.pk
            ));
        }
        // Groups on the preserved side's join column.
        _ => {
            let (g, gk) = if right {
                (format!("b.{bc}"), b.cols[b.col(bc)].kind)
            } else {
                (format!("a.{ac}"), a.cols[a.col(ac)].kind)
            };
            sql.raw(&format!(
                "SELECT {g}, COUNT(*), COUNT(b.{}), MIN(a.{})",
                b.pk, a.pk
            ));
            check.norm = vec![(0, norm_of(gk))];
            // MIN of a string primary key (country.code) is any spelling of its class.
            if a.cols[a.pk_index()].kind == Kind::Ci {
                check.norm.push((3, Norm::Ci));
            }
        }
    }
    sql.raw(&format!(
        " FROM {} a {kind} {} b ON a.{ac} = b.{bc}",
        a.name, b.name
    ));
    // A condition on the inner side in ON (kept there for an outer join) or a side with no row.
    match rng.below(8) {
        0 | 1 => {
            sql.raw(" AND ");
            if right {
                filter(rng, &mut sql, data, a, "a");
            } else {
                filter(rng, &mut sql, data, b, "b");
            }
        }
        2 => {
            sql.raw(" AND ");
            sql.raw(&if right {
                nothing(a, "a")
            } else {
                nothing(b, "b")
            });
        }
        _ => {}
    }
    if let Some((col, how)) = third {
        sql.raw(&format!(" {how} country c ON c.code = {col}"));
    }
    // WHERE: on either side, a side with no row, or nothing.
    match rng.below(10) {
        0..=2 => {
            sql.raw(" WHERE ");
            filter(rng, &mut sql, data, a, "a");
        }
        3 | 4 => {
            sql.raw(" WHERE ");
            filter(rng, &mut sql, data, b, "b");
        }
        5 => {
            sql.raw(" WHERE ");
            sql.raw(&if rng.pct(50) {
                nothing(a, "a")
            } else {
                nothing(b, "b")
            });
        }
        // The outer join's unmatched rows only (an anti-join written as a join).
        6 if outer => {
            sql.raw(&if right {
                format!(" WHERE a.{} IS NULL", a.pk)
            } else {
                format!(" WHERE b.{} IS NULL", b.pk)
            });
        }
        _ => {}
    }
    match shape {
        0..=5 => {
            // Both primary keys fix each row's place (an unmatched side is one NULL row).
            if rng.pct(60) {
                let (first, second) = if right { ("b", "a") } else { ("a", "b") };
                let (ft, st) = if right { (b, a) } else { (a, b) };
                let dir = *rng.pick(&["", " DESC"]);
                sql.raw(&format!(
                    " ORDER BY {first}.{}{dir}, {second}.{}",
                    ft.pk, st.pk
                ));
                let (fi, si) = if right { (1, 0) } else { (0, 1) };
                check.order = vec![
                    (fi, norm_of(ft.cols[ft.pk_index()].kind)),
                    (si, norm_of(st.cols[st.pk_index()].kind)),
                ];
                check.unique_order = true;
                if rng.pct(50) {
                    let n = rng.range(0, 40);
                    if rng.pct(30) {
                        sql.raw(&format!(" LIMIT {n} OFFSET {}", rng.range(1, 50)));
                        check.offset = true;
                    } else {
                        sql.raw(&format!(" LIMIT {n}"));
                    }
                    check.limited = true;
                }
            }
        }
        6 | 7 => {}
        _ => {
            let g = if right {
                format!("b.{bc}")
            } else {
                format!("a.{ac}")
            };
            sql.raw(&format!(" GROUP BY {g}"));
        }
    }
    sql.finish(JOIN, prepared, check)
}

fn correlated(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let &(o, oc, i, ic) = rng.pick(PAIRS);
    // Either direction: the outer side may be either table of the pair.
    let (o, oc, i, ic) = if rng.pct(50) {
        (o, oc, i, ic)
    } else {
        (i, ic, o, oc)
    };
    let ox = plain_col(rng, o);
    let mut sql = Sql::default();
    let corr = format!("i.{ic} = o.{oc}");
    let inner_filter = |rng: &mut Rng, sql: &mut Sql| {
        if rng.pct(40) {
            sql.raw(" AND ");
            filter(rng, sql, data, i, "i");
        }
    };
    match rng.below(8) {
        // [NOT] EXISTS.
        0..=2 => {
            let not = if rng.pct(50) { "NOT " } else { "" };
            sql.raw(&format!(
                "SELECT o.{}, o.{} FROM {} o WHERE {not}EXISTS (SELECT 1 FROM {} i WHERE {corr}",
                o.pk, o.cols[ox].name, o.name, i.name
            ));
            inner_filter(rng, &mut sql);
            sql.raw(")");
        }
        // Scalar subqueries in the select list: a count and an aggregate per outer row.
        3 | 4 => {
            let agg = match numeric_col(rng, i) {
                Some(c) => format!("{}(i.{})", rng.pick(&["MAX", "MIN", "SUM"]), i.cols[c].name),
                None => format!("MAX(i.{})", i.pk),
            };
            sql.raw(&format!(
                "SELECT o.{}, (SELECT COUNT(*) FROM {} i WHERE {corr}), (SELECT {agg} FROM {} i WHERE {corr}) FROM {} o",
                o.pk, i.name, i.name, o.name
            ));
            if rng.pct(50) {
                sql.raw(" WHERE ");
                filter(rng, &mut sql, data, o, "o");
            }
        }
        // A scalar subquery in WHERE.
        5 => {
            let Some(nc) = numeric_col(rng, o) else {
                return join(rng, data, prepared);
            };
            let op = *rng.pick(&["<", ">=", "=", "<>"]);
            let agg = match numeric_col(rng, i) {
                Some(c) => format!("{}(i.{})", rng.pick(&["MAX", "MIN"]), i.cols[c].name),
                None => "COUNT(*)".into(),
            };
            sql.raw(&format!(
                "SELECT o.{}, o.{} FROM {} o WHERE o.{} {op} (SELECT {agg} FROM {} i WHERE {corr}",
                o.pk, o.cols[nc].name, o.name, o.cols[nc].name, i.name
            ));
            inner_filter(rng, &mut sql);
            sql.raw(")");
        }
        // [NOT] IN with NULLs on both sides, correlated on another column pair.
        _ => {
            let not = if rng.pct(60) { "NOT " } else { "" };
            // Correlate on the primary keys' remainders where both are numbers, else on
            // comparable other columns, else not at all.
            let extra = if o.cols[o.pk_index()].kind.is_numeric()
                && i.cols[i.pk_index()].kind.is_numeric()
            {
                format!(" WHERE MOD(i.{}, 3) = MOD(o.{}, 3)", i.pk, o.pk)
            } else {
                let pairs: Vec<usize> = (0..i.cols.len())
                    .filter(|&c| i.cols[c].kind.comparable(o.cols[ox].kind) && i.cols[c].name != ic)
                    .collect();
                match pairs.first() {
                    Some(&c) => format!(" WHERE i.{} = o.{}", i.cols[c].name, o.cols[ox].name),
                    None => String::new(),
                }
            };
            sql.raw(&format!(
                "SELECT o.{}, o.{} FROM {} o WHERE o.{oc} {not}IN (SELECT i.{ic} FROM {} i{extra}",
                o.pk, o.cols[ox].name, o.name, i.name
            ));
            if rng.pct(30) {
                sql.raw(if extra.is_empty() { " WHERE " } else { " AND " });
                filter(rng, &mut sql, data, i, "i");
            }
            sql.raw(")");
        }
    }
    sql.finish(CORRELATED, prepared, Check::default())
}

/// The ORM shapes and derived tables across shards.
fn derived(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let mut sql = Sql::default();
    let mut check = Check::default();
    let n = rng.range(0, 25);
    match rng.below(5) {
        // SQLAlchemy joinedload() + limit(): the parent LIMITed in a derived table, its ER
        // child joined on the foreign key alone.
        0 | 1 => {
            let inner_order = *rng.pick(&["o.id", "o.amount, o.id", "o.user_id DESC, o.id"]);
            sql.raw("SELECT anon_1.id, anon_1.user_id, anon_1.amount, i.id AS i_id, i.sku FROM (SELECT o.id AS id, o.user_id AS user_id, o.amount AS amount FROM orders o");
            if rng.pct(50) {
                sql.raw(" WHERE ");
                filter(rng, &mut sql, data, &schema::ORDERS, "o");
            }
            sql.raw(&format!(" ORDER BY {inner_order} LIMIT {n}"));
            if rng.pct(25) {
                sql.raw(&format!(" OFFSET {}", rng.range(1, 40)));
            }
            sql.raw(") AS anon_1 LEFT OUTER JOIN order_item i ON anon_1.id = i.order_id");
            sql.raw(" ORDER BY anon_1.id, i.id");
            check.order = vec![(0, Norm::Exact), (3, Norm::Exact)];
            check.unique_order = true;
        }
        // TypeORM's paging with relations (sometimes pinned to one user).
        2 => {
            sql.raw("SELECT DISTINCT distinctAlias.o_id AS ids_o_id FROM (SELECT o.id AS o_id, o.user_id AS o_user_id, o.status AS o_status, i.id AS i_id, i.sku AS i_sku FROM orders o LEFT JOIN order_item i ON i.order_id = o.id");
            if rng.pct(60) {
                sql.raw(" WHERE ");
                let c = if rng.pct(50) {
                    schema::ORDERS.col("user_id")
                } else {
                    plain_col(rng, &schema::ORDERS)
                };
                predicate_on(rng, &mut sql, data, &schema::ORDERS, "o.", c);
            }
            sql.raw(&format!(
                ") distinctAlias ORDER BY distinctAlias.o_id ASC LIMIT {n}"
            ));
            check.order = vec![(0, Norm::Exact)];
            check.unique_order = true;
        }
        // A LIMITed derived table of link joined with orders on another rule's key.
        3 => {
            sql.raw("SELECT d.id, d.k_int, o.id AS o_id, o.amount FROM (SELECT l.id, l.k_int FROM link l");
            if rng.pct(50) {
                sql.raw(" WHERE ");
                filter(rng, &mut sql, data, &schema::LINK, "l");
            }
            sql.raw(&format!(
                " ORDER BY l.id LIMIT {n}) d {} orders o ON o.user_id = d.k_int ORDER BY d.id, o.id",
                rng.pick(&["JOIN", "LEFT JOIN"])
            ));
            check.order = vec![(0, Norm::Exact), (2, Norm::Exact)];
            check.unique_order = true;
        }
        // A grouped derived table across shards used by an outer query and joined.
        _ => {
            let (t, g) = *rng.pick(&[
                (&schema::LINK, "k_int"),
                (&schema::ORDERS, "user_id"),
                (&schema::ORDER_ITEM, "order_id"),
            ]);
            sql.raw(&format!(
                "SELECT d.g, d.n, d.s, w.w_name FROM (SELECT t.{g} AS g, COUNT(*) AS n, SUM(t.id) AS s FROM {} t",
                t.name
            ));
            if rng.pct(40) {
                sql.raw(" WHERE ");
                filter(rng, &mut sql, data, t, "t");
            }
            sql.raw(&format!(" GROUP BY t.{g}"));
            if rng.pct(50) {
                // The groups with the most rows (ties broken by the key: deterministic).
                sql.raw(&format!(" ORDER BY n DESC, g LIMIT {n}"));
            }
            sql.raw(") d LEFT JOIN wh w ON w.w_id = d.g");
            if rng.pct(40) {
                sql.raw(" WHERE d.n > 1");
            }
            sql.raw(" ORDER BY d.g");
            check.order = vec![(0, Norm::Exact)];
            check.unique_order = true;
        }
    }
    sql.finish(DERIVED, prepared, check)
}

/// Joins across shards that lock what they read.
fn locking(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let &(a, ac, b, bc) = rng.pick(PAIRS);
    let mut sql = Sql::default();
    sql.raw(&format!(
        "SELECT a.{}, b.{} FROM {} a JOIN {} b ON a.{ac} = b.{bc} WHERE ",
        a.pk, b.pk, a.name, b.name
    ));
    filter(rng, &mut sql, data, a, "a");
    let lock = *rng.pick(&[" FOR UPDATE", " LOCK IN SHARE MODE"]);
    sql.raw(lock);
    sql.finish(LOCKING, prepared, Check::default())
}

#[cfg(test)]
mod tests {
    use super::super::{aggregates, data::Dataset, unions};
    use super::*;

    /// Every shape the families promise is drawn at the default size, and a seed fixes them.
    #[test]
    fn the_families_draw_every_shape_and_a_seed_fixes_them() {
        let data = Dataset::generate(3, 600);
        let mut all = generate(3, 120, &data);
        all.extend(unions::generate(3, 60, &data));
        all.extend(aggregates::generate(3, 80, &data));
        all.extend(aggregates::generate_short(3, 20, &data));
        let text: Vec<&str> = all.iter().map(|q| q.sql.as_str()).collect();
        for shape in [
            " JOIN link b ON",
            " LEFT JOIN ",
            " RIGHT JOIN ",
            "a.user_id = b.k_dec",
            "= b.code",
            "FROM note a",
            "FROM country a",
            "FROM link a JOIN link b",
            " IS NULL AND ",
            "NOT EXISTS (",
            " NOT IN (SELECT",
            "(SELECT COUNT(*) FROM",
            ") AS anon_1 LEFT OUTER JOIN order_item i ON anon_1.id = i.order_id",
            "distinctAlias",
            " UNION ALL ",
            " UNION SELECT",
            "WITH ",
            "COUNT(DISTINCT ",
            "SUM(DISTINCT ",
            "AVG(DISTINCT ",
            "GROUP_CONCAT(DISTINCT ",
            " SEPARATOR ",
            " WITH ROLLUP",
            " OVER (",
            " FOR UPDATE",
        ] {
            assert!(
                text.iter().any(|s| s.contains(shape)),
                "no statement has {shape:?}"
            );
        }
        for family in [JOIN, CORRELATED, DERIVED, LOCKING] {
            assert!(all.iter().any(|q| q.family == family), "{family}");
        }
        assert!(all.iter().any(|q| q.prepared.is_some()));
        let again = generate(3, 120, &data);
        assert!(again.iter().zip(&all).all(|(a, b)| a.sql == b.sql));
    }
}
