//! The statements: hand-written SELECT families, SELECTs generated from the seed, and writes.
//!
//! Every SELECT carries a [`Check`] saying what its text fixes about the answer (ORDER BY keys,
//! LIMIT cuts, collation-equal representatives), so the comparer never demands more than SQL
//! promises and never less.

use mysql_async::Value;

use super::colocated;
use super::compare::{Check, Norm};
use super::data::{self, Dataset, Lit, Rng};
use super::schema::{self, Kind, Table};

/// One SELECT.
#[derive(Clone, Debug)]
pub struct Query {
    /// The family it belongs to (report and mismatch listings).
    pub family: &'static str,
    /// The statement with its literals (text protocol).
    pub sql: String,
    /// When set, the statement runs through the prepared protocol instead: its text with `?`
    /// placeholders and the values bound to them.
    pub prepared: Option<(String, Vec<Value>)>,
    pub check: Check,
}

impl Query {
    /// What is sent: the prepared text and its values, else the text with literals.
    pub fn statement(&self) -> (&str, Option<&[Value]>) {
        match &self.prepared {
            Some((sql, params)) => (sql.as_str(), Some(params.as_slice())),
            None => (self.sql.as_str(), None),
        }
    }
}

/// SQL under construction, written twice: with literals, and with `?` plus bound values.
#[derive(Default)]
pub(super) struct Sql {
    text: String,
    prep: String,
    params: Vec<Value>,
}

impl Sql {
    pub(super) fn raw(&mut self, s: &str) -> &mut Self {
        self.text.push_str(s);
        self.prep.push_str(s);
        self
    }

    pub(super) fn lit(&mut self, l: &Lit) -> &mut Self {
        self.text.push_str(&l.sql());
        self.prep.push('?');
        self.params.push(l.param());
        self
    }

    pub(super) fn finish(self, family: &'static str, prepared: bool, check: Check) -> Query {
        Query {
            family,
            prepared: (prepared && !self.params.is_empty()).then_some((self.prep, self.params)),
            sql: self.text,
            check,
        }
    }
}

pub(super) fn norm_of(kind: Kind) -> Norm {
    match kind {
        Kind::Ci => Norm::Ci,
        Kind::Bin => Norm::Bin,
        _ => Norm::Exact,
    }
}

fn multiset(family: &'static str, sql: &str) -> Query {
    Query {
        family,
        sql: sql.to_string(),
        prepared: None,
        check: Check::default(),
    }
}

fn with_norm(mut q: Query, norm: &[(usize, Norm)]) -> Query {
    q.check.norm = norm.to_vec();
    q
}

/// ORDER BY keys (result column, collation); `unique`: they fix every row's place.
fn ordered(family: &'static str, sql: &str, order: &[(usize, Norm)], unique: bool) -> Query {
    let lower = sql.to_ascii_lowercase();
    let limit = lower.rfind(" limit ").map(|p| &lower[p + 7..]);
    Query {
        family,
        sql: sql.to_string(),
        prepared: None,
        check: Check {
            order: order.to_vec(),
            unique_order: unique,
            limited: limit.is_some(),
            offset: limit.is_some_and(|l| l.contains(',') || l.contains("offset")),
            norm: Vec::new(),
            origin_by_plan: false,
        },
    }
}

fn prepared(family: &'static str, sql: &str, params: Vec<Value>) -> Query {
    Query {
        family,
        sql: sql.to_string(),
        prepared: Some((sql.to_string(), params)),
        check: Check::default(),
    }
}

const X: Norm = Norm::Exact;
const CI: Norm = Norm::Ci;
const BIN: Norm = Norm::Bin;

/// Hand-written families: every construct the issue names, at least once, with known shapes.
pub fn hand_written() -> Vec<Query> {
    let mut q = vec![
        // Whole tables (scatter, every shard; global from one node).
        multiset("hand:scan", "SELECT * FROM orders"),
        multiset("hand:scan", "SELECT * FROM order_item"),
        multiset("hand:scan", "SELECT * FROM account"),
        multiset("hand:scan", "SELECT * FROM events"),
        multiset("hand:scan", "SELECT * FROM ledger"),
        multiset("hand:scan", "SELECT * FROM country"),
        // Routing filters on every rule kind.
        multiset("hand:route", "SELECT * FROM orders WHERE user_id = 7"),
        multiset("hand:route", "SELECT * FROM orders WHERE user_id = -3"),
        multiset("hand:route", "SELECT * FROM orders WHERE user_id IS NULL"),
        multiset(
            "hand:route",
            "SELECT * FROM orders WHERE user_id IN (1, -3, 7, NULL)",
        ),
        multiset(
            "hand:route",
            "SELECT * FROM orders WHERE user_id = 1 OR user_id = 2",
        ),
        multiset("hand:route", "SELECT * FROM orders WHERE user_id <=> NULL"),
        multiset("hand:route", "SELECT * FROM orders WHERE user_id = '7'"),
        multiset(
            "hand:route",
            "SELECT * FROM account WHERE email = 'USER3@EX.IO '",
        ),
        multiset(
            "hand:route",
            "SELECT * FROM account WHERE email IN ('user1@ex.io', 'User2@Ex.io')",
        ),
        multiset("hand:route", "SELECT * FROM account WHERE email IS NULL"),
        multiset(
            "hand:route",
            "SELECT * FROM events WHERE id BETWEEN 950 AND 2100",
        ),
        multiset("hand:route", "SELECT * FROM events WHERE id < 0"),
        multiset(
            "hand:route",
            "SELECT * FROM events WHERE id >= 3000 AND id < 4000",
        ),
        multiset(
            "hand:route",
            "SELECT * FROM events WHERE id > 4000 OR id = 17",
        ),
        multiset(
            "hand:route",
            "SELECT * FROM ledger WHERE day BETWEEN '2024-03-01' AND '2024-06-30'",
        ),
        multiset(
            "hand:route",
            "SELECT * FROM ledger WHERE day < '2024-01-01'",
        ),
        multiset(
            "hand:route",
            "SELECT * FROM ledger WHERE day >= '2026-01-01'",
        ),
        multiset(
            "hand:route",
            "SELECT * FROM ledger WHERE day = '2024-02-29'",
        ),
        multiset(
            "hand:route",
            "SELECT * FROM ledger WHERE day > '2024-12-31' AND day <= '2025-02-01'",
        ),
        // Collation: equality under general_ci and PAD SPACE.
        multiset(
            "hand:collation",
            "SELECT id, status FROM orders WHERE status = 'new'",
        ),
        multiset(
            "hand:collation",
            "SELECT id, tag FROM orders WHERE tag = 'x'",
        ),
        multiset(
            "hand:collation",
            "SELECT id, tag FROM orders WHERE tag IN ('X', 'zz ')",
        ),
        multiset(
            "hand:collation",
            "SELECT id, status FROM orders WHERE status = ''",
        ),
        multiset(
            "hand:collation",
            "SELECT id, name FROM account WHERE name = 'o''neil'",
        ),
        // Aggregates, including over no rows.
        multiset(
            "hand:aggregate",
            "SELECT COUNT(*), COUNT(user_id), SUM(amount), MIN(amount), MAX(amount), AVG(amount) FROM orders",
        ),
        multiset(
            "hand:aggregate",
            "SELECT COUNT(*), COUNT(user_id), SUM(amount), MIN(amount), MAX(amount), AVG(amount) FROM orders WHERE user_id = -999999",
        ),
        multiset(
            "hand:aggregate",
            "SELECT COUNT(*), SUM(qty), AVG(qty), MIN(created), MAX(updated) FROM orders WHERE amount > 1000000",
        ),
        multiset(
            "hand:aggregate",
            "SELECT COUNT(*), SUM(id), AVG(id), MAX(id) FROM orders",
        ),
        multiset(
            "hand:aggregate",
            "SELECT SUM(delta), AVG(delta), MIN(delta), MAX(delta) FROM orders",
        ),
        with_norm(
            multiset(
                "hand:aggregate",
                "SELECT MIN(status), MAX(status), MIN(tag), MAX(tag) FROM orders",
            ),
            &[(0, CI), (1, CI), (2, BIN), (3, BIN)],
        ),
        multiset(
            "hand:aggregate",
            "SELECT SUM(price), AVG(price), COUNT(sku), SUM(qty) FROM order_item",
        ),
        multiset(
            "hand:aggregate",
            "SELECT COUNT(*), AVG(score), SUM(score), MIN(born), MAX(balance) FROM account",
        ),
        multiset(
            "hand:aggregate",
            "SELECT AVG(amount), SUM(n), AVG(n), COUNT(payload) FROM events",
        ),
        multiset(
            "hand:aggregate",
            "SELECT SUM(debit), SUM(credit), COUNT(credit), AVG(credit) FROM ledger",
        ),
        multiset(
            "hand:aggregate",
            "SELECT COUNT(*) FROM ledger WHERE day BETWEEN '2025-01-01' AND '2025-03-31'",
        ),
        multiset("hand:aggregate", "SELECT COUNT(*), SUM(vat) FROM country"),
        // GROUP BY / HAVING.
        ordered(
            "hand:group",
            "SELECT user_id, COUNT(*), SUM(amount), AVG(amount) FROM orders GROUP BY user_id ORDER BY user_id",
            &[(0, X)],
            true,
        ),
        with_norm(
            multiset(
                "hand:group",
                "SELECT status, COUNT(*) FROM orders GROUP BY status",
            ),
            &[(0, CI)],
        ),
        with_norm(
            ordered(
                "hand:group",
                "SELECT status, COUNT(*) FROM orders GROUP BY status HAVING COUNT(*) > 20 ORDER BY status DESC",
                &[(0, CI)],
                true,
            ),
            &[(0, CI)],
        ),
        with_norm(
            ordered(
                "hand:group",
                "SELECT tag, MIN(amount), MAX(amount) FROM orders GROUP BY tag ORDER BY tag",
                &[(0, BIN)],
                true,
            ),
            &[(0, BIN)],
        ),
        with_norm(
            ordered(
                "hand:group",
                "SELECT country, COUNT(*) FROM orders GROUP BY country ORDER BY country LIMIT 3",
                &[(0, CI)],
                true,
            ),
            &[(0, CI)],
        ),
        ordered(
            "hand:group",
            "SELECT created, COUNT(*) FROM orders GROUP BY created ORDER BY created DESC LIMIT 5, 5",
            &[(0, X)],
            true,
        ),
        multiset(
            "hand:group",
            "SELECT user_id, COUNT(*) FROM orders GROUP BY user_id HAVING SUM(amount) > 10000",
        ),
        multiset(
            "hand:group",
            "SELECT user_id, COUNT(*), MAX(amount) FROM orders GROUP BY user_id HAVING COUNT(*) >= 15 AND MAX(amount) > 50000",
        ),
        with_norm(
            multiset(
                "hand:group",
                "SELECT kind, COUNT(*), AVG(amount) FROM events GROUP BY kind",
            ),
            &[(0, CI)],
        ),
        with_norm(
            ordered(
                "hand:group",
                "SELECT account, SUM(debit), COUNT(credit) FROM ledger GROUP BY account ORDER BY account",
                &[(0, CI)],
                true,
            ),
            &[(0, CI)],
        ),
        with_norm(
            multiset(
                "hand:group",
                "SELECT email, COUNT(*), SUM(balance) FROM account GROUP BY email",
            ),
            &[(0, CI)],
        ),
        multiset(
            "hand:group",
            "SELECT day, COUNT(*) FROM ledger GROUP BY day HAVING COUNT(*) > 1",
        ),
        with_norm(
            multiset(
                "hand:group",
                "SELECT user_id, status, COUNT(*) FROM orders GROUP BY user_id, status",
            ),
            &[(1, CI)],
        ),
        // DISTINCT.
        with_norm(
            multiset("hand:distinct", "SELECT DISTINCT status FROM orders"),
            &[(0, CI)],
        ),
        with_norm(
            ordered(
                "hand:distinct",
                "SELECT DISTINCT tag FROM orders ORDER BY tag",
                &[(0, BIN)],
                true,
            ),
            &[(0, BIN)],
        ),
        ordered(
            "hand:distinct",
            "SELECT DISTINCT user_id FROM orders ORDER BY user_id DESC",
            &[(0, X)],
            true,
        ),
        with_norm(
            multiset(
                "hand:distinct",
                "SELECT DISTINCT country, status FROM orders",
            ),
            &[(0, CI), (1, CI)],
        ),
        multiset(
            "hand:distinct",
            "SELECT DISTINCT created FROM orders WHERE user_id IN (1, 2, 3)",
        ),
        multiset(
            "hand:distinct",
            "SELECT COUNT(DISTINCT user_id) FROM orders",
        ),
        // ORDER BY, ties, NULLs, LIMIT/OFFSET past the end.
        ordered(
            "hand:order",
            "SELECT id, amount FROM orders ORDER BY amount DESC, id LIMIT 10",
            &[(1, X), (0, X)],
            true,
        ),
        ordered(
            "hand:order",
            "SELECT id, status FROM orders ORDER BY status, id",
            &[(1, CI), (0, X)],
            true,
        ),
        ordered(
            "hand:order",
            "SELECT id, status, amount FROM orders ORDER BY status LIMIT 20",
            &[(1, CI)],
            false,
        ),
        ordered(
            "hand:order",
            "SELECT id, status, amount FROM orders ORDER BY status DESC",
            &[(1, CI)],
            false,
        ),
        ordered(
            "hand:order",
            "SELECT id, tag FROM orders ORDER BY tag DESC LIMIT 5 OFFSET 7",
            &[(1, BIN)],
            false,
        ),
        ordered(
            "hand:order",
            "SELECT id, created FROM orders ORDER BY created, id LIMIT 100000, 10",
            &[(1, X), (0, X)],
            true,
        ),
        ordered(
            "hand:order",
            "SELECT id FROM orders ORDER BY id LIMIT 0",
            &[(0, X)],
            true,
        ),
        ordered(
            "hand:order",
            "SELECT id, updated FROM orders ORDER BY updated DESC, id DESC LIMIT 3",
            &[(1, X), (0, X)],
            true,
        ),
        ordered(
            "hand:order",
            "SELECT id, user_id FROM orders ORDER BY user_id, id",
            &[(1, X), (0, X)],
            true,
        ),
        ordered(
            "hand:order",
            "SELECT user_id, id, amount FROM orders ORDER BY user_id DESC, amount",
            &[(0, X), (2, X)],
            false,
        ),
        ordered(
            "hand:order",
            "SELECT id, email FROM account ORDER BY email, id LIMIT 15",
            &[(1, CI), (0, X)],
            true,
        ),
        ordered(
            "hand:order",
            "SELECT id, amount FROM events ORDER BY amount, id LIMIT 50, 20",
            &[(1, X), (0, X)],
            true,
        ),
        ordered(
            "hand:order",
            "SELECT id, day FROM ledger ORDER BY day DESC, id LIMIT 25",
            &[(1, X), (0, X)],
            true,
        ),
        ordered(
            "hand:order",
            "SELECT id, day, account FROM ledger WHERE day BETWEEN '2024-02-01' AND '2024-09-30' ORDER BY account, day",
            &[(2, CI), (1, X)],
            false,
        ),
        ordered(
            "hand:order",
            "SELECT id, score FROM account ORDER BY score DESC LIMIT 100000",
            &[(1, X)],
            false,
        ),
        ordered(
            "hand:order",
            "SELECT id, kind, at FROM events ORDER BY kind, at DESC, id",
            &[(1, CI), (2, X), (0, X)],
            true,
        ),
        // Joins with the global table and the ER child.
        ordered(
            "hand:join_global",
            "SELECT o.id, o.country, c.name, c.vat FROM orders o JOIN country c ON o.country = c.code ORDER BY o.id LIMIT 30",
            &[(0, X)],
            true,
        ),
        multiset(
            "hand:join_global",
            "SELECT o.id, c.region FROM orders o LEFT JOIN country c ON o.country = c.code WHERE o.user_id = 5",
        ),
        with_norm(
            multiset(
                "hand:join_global",
                "SELECT c.region, COUNT(*), SUM(o.amount) FROM orders o JOIN country c ON o.country = c.code GROUP BY c.region",
            ),
            &[(0, CI)],
        ),
        multiset(
            "hand:join_global",
            "SELECT l.id, c.code FROM ledger l JOIN country c ON c.code = l.account",
        ),
        multiset(
            "hand:join_er",
            "SELECT o.id, i.id, i.sku, i.qty FROM orders o JOIN order_item i ON o.user_id = i.user_id AND o.id = i.order_id WHERE o.user_id = 9",
        ),
        ordered(
            "hand:join_er",
            "SELECT o.user_id, COUNT(*), SUM(i.price) FROM orders o JOIN order_item i ON o.user_id = i.user_id AND o.id = i.order_id GROUP BY o.user_id ORDER BY o.user_id",
            &[(0, X)],
            true,
        ),
        multiset(
            "hand:join_er",
            "SELECT o.id, i.id FROM orders o LEFT JOIN order_item i ON o.user_id = i.user_id AND o.id = i.order_id WHERE o.user_id IN (3, 4)",
        ),
        multiset(
            "hand:join_er",
            "SELECT o.id, i.id, i.price FROM orders o JOIN order_item i ON o.user_id = i.user_id AND o.id = i.order_id",
        ),
        ordered(
            "hand:join_er",
            "SELECT i.id, i.sku, c.name FROM order_item i JOIN orders o ON o.user_id = i.user_id AND o.id = i.order_id JOIN country c ON c.code = o.country ORDER BY i.id LIMIT 40",
            &[(0, X)],
            true,
        ),
        // Expressions and table-less statements.
        multiset(
            "hand:expr",
            "SELECT id, amount * 2, amount + delta, qty IS NULL FROM orders WHERE user_id = 8",
        ),
        multiset("hand:expr", "SELECT 1 + 1, 'x', NULL"),
        multiset(
            "hand:expr",
            "SELECT COUNT(*) FROM orders WHERE amount BETWEEN 10 AND 10.5 OR status IS NULL",
        ),
        // Constructs a sharding proxy cannot answer exactly by running them per shard: refused
        // by Shoal (counted as refusals), answered by the unsharded copies.
        multiset(
            "hand:hard",
            "SELECT GROUP_CONCAT(id ORDER BY id) FROM orders WHERE user_id = 4",
        ),
        multiset(
            "hand:hard",
            "SELECT id FROM orders WHERE amount > (SELECT AVG(amount) FROM orders)",
        ),
        multiset(
            "hand:hard",
            "SELECT o.id, a.id FROM orders o JOIN account a ON o.user_id = a.id",
        ),
        multiset("hand:hard", "SELECT COUNT(DISTINCT status) FROM orders"),
        multiset(
            "hand:hard",
            "SELECT id, ROW_NUMBER() OVER (ORDER BY id) FROM events WHERE id < 100",
        ),
        multiset(
            "hand:hard",
            "SELECT id FROM orders UNION SELECT id FROM events",
        ),
    ];
    // The prepared protocol, routed by bound values.
    q.extend([
        prepared(
            "hand:prepared",
            "SELECT * FROM orders WHERE user_id = ?",
            vec![Value::Int(7)],
        ),
        prepared(
            "hand:prepared",
            "SELECT * FROM orders WHERE user_id IS NULL OR user_id = ?",
            vec![Value::Int(-2)],
        ),
        prepared(
            "hand:prepared",
            "SELECT * FROM account WHERE email = ?",
            vec![Value::Bytes(b"USER3@ex.io ".to_vec())],
        ),
        prepared(
            "hand:prepared",
            "SELECT * FROM events WHERE id BETWEEN ? AND ?",
            vec![Value::Int(990), Value::Int(1010)],
        ),
        prepared(
            "hand:prepared",
            "SELECT id, day FROM ledger WHERE day BETWEEN ? AND ?",
            vec![
                Value::Bytes(b"2024-04-01".to_vec()),
                Value::Bytes(b"2024-05-31".to_vec()),
            ],
        ),
        prepared(
            "hand:prepared",
            "SELECT COUNT(*), SUM(amount), AVG(amount) FROM orders WHERE user_id IN (?, ?)",
            vec![Value::Int(1), Value::Int(2)],
        ),
        prepared(
            "hand:prepared",
            "SELECT COUNT(*), SUM(amount), MIN(created) FROM orders WHERE user_id = ?",
            vec![Value::Int(123_456)],
        ),
    ]);
    // Scattered with columns the merge adds and drops (a sort key after `*`, AVG's SUM and
    // COUNT): the prepare response must announce exactly the columns the executes return, which
    // Connector/C checks (2057) and mysql_async does not.
    let mut star = prepared(
        "hand:prepared",
        "SELECT * FROM account WHERE name = ? ORDER BY id",
        vec![Value::Bytes(b"alice".to_vec())],
    );
    star.check.order = vec![(0, X)];
    star.check.unique_order = true;
    q.push(star);
    let mut avg = prepared(
        "hand:prepared",
        "SELECT user_id, AVG(amount), COUNT(*) FROM orders WHERE status = ? GROUP BY user_id ORDER BY user_id",
        vec![Value::Bytes(b"paid".to_vec())],
    );
    avg.check.order = vec![(0, X)];
    avg.check.unique_order = true;
    q.push(avg);
    let mut order = prepared(
        "hand:prepared",
        "SELECT id, amount, updated FROM orders WHERE user_id > ? ORDER BY amount DESC, id LIMIT 12",
        vec![Value::Int(10)],
    );
    order.check.order = vec![(1, X), (0, X)];
    order.check.unique_order = true;
    q.push(order);
    q
}

/// Result columns of a generated SELECT: (SQL expression, norm when compared, ORDER BY norm).
struct Out {
    expr: String,
    kind: Kind,
}

/// Generates `count` SELECTs from `seed` over `data` (about a third in the prepared protocol).
pub fn generate(seed: u64, count: usize, data: &Dataset) -> Vec<Query> {
    generate_only(seed, count, data, "")
}

/// Like [`generate`], keeping only the first `count` SELECTs whose family name starts with
/// `family` (`""`: every family): the same statements as in a full run of the seed.
pub fn generate_only(seed: u64, count: usize, data: &Dataset, family: &str) -> Vec<Query> {
    let mut rng = Rng::new(seed ^ 0x0005_e1ec_7000);
    let mut out = Vec::with_capacity(count);
    // A family no generator has (or a very rare one) ends the loop with fewer.
    let mut tries = 0usize;
    while out.len() < count && tries < 1_000 * (count + 10) {
        tries += 1;
        let prepared = rng.pct(33);
        let q = match rng.below(140) {
            0..=9 => point(&mut rng, data, prepared),
            10..=29 => filter(&mut rng, data, prepared, false),
            30..=47 => filter(&mut rng, data, prepared, true),
            48..=57 => aggregate(&mut rng, data, prepared),
            58..=71 => group_by(&mut rng, data, prepared),
            72..=79 => distinct(&mut rng, data, prepared),
            80..=89 => join_global(&mut rng, data, prepared),
            90..=99 => join_er(&mut rng, data, prepared),
            100..=111 => outer_join(&mut rng, data, prepared),
            112..=119 => aliases(&mut rng, data, prepared),
            120..=127 => typed_exprs(&mut rng, data, prepared),
            _ => colocated::query(&mut rng, data, prepared),
        };
        if q.family.starts_with(family) {
            out.push(q);
        }
    }
    out
}

/// Tables the single-table families draw from.
const SINGLE: &[&Table] = &[
    &schema::ORDERS,
    &schema::ORDERS,
    &schema::ORDER_ITEM,
    &schema::ACCOUNT,
    &schema::EVENTS,
    &schema::LEDGER,
    &schema::COUNTRY,
    &schema::NOTE,
];

/// A value for column `c` of `table`: mostly one that exists (filters hit rows), sometimes a
/// fresh one (filters miss, aggregates run over nothing).
pub(super) fn value(rng: &mut Rng, data: &Dataset, table: &Table, c: usize) -> Lit {
    let rows = data.rows(table.name);
    if !rows.is_empty() && rng.pct(80) {
        return rows[rng.below(rows.len())][c].clone();
    }
    match table.cols[c].kind {
        Kind::Int => Lit::Int(rng.range(-10_000, 10_000)),
        Kind::UInt => {
            if rng.pct(20) {
                Lit::UInt((1u64 << 63) + rng.range(0, 3_000) as u64)
            } else {
                Lit::UInt(rng.range(0, 5_000) as u64)
            }
        }
        Kind::Dec => Lit::Dec(data::random_dec(rng, -1_000, 100_000, 2)),
        Kind::Double => Lit::Dec(data::random_quarter(rng, -4_000, 40_000)),
        Kind::Ci | Kind::Bin => {
            let pool = [
                data::STATUS,
                data::TAGS,
                data::SKUS,
                data::NAMES,
                data::KINDS,
                &["nomatch", "m", "Z"],
            ];
            let pool = pool[rng.below(pool.len())];
            Lit::Str(rng.pick(pool).to_string())
        }
        Kind::Date => Lit::Str(data::random_date(
            rng,
            data::DAY_2023_01_01 - 200,
            data::DAY_2026_12_31,
        )),
        Kind::DateTime => Lit::Str(data::random_datetime(rng)),
    }
}

/// A non-NULL value for column `c` (comparisons with NULL are tested separately).
pub(super) fn non_null(rng: &mut Rng, data: &Dataset, table: &Table, c: usize) -> Lit {
    for _ in 0..8 {
        let v = value(rng, data, table, c);
        if !v.is_null() {
            return v;
        }
    }
    match table.cols[c].kind {
        Kind::Int | Kind::UInt => Lit::Int(1),
        Kind::Dec | Kind::Double => Lit::Dec("1.00".into()),
        Kind::Date => Lit::Str("2024-06-01".into()),
        Kind::DateTime => Lit::Str("2024-06-01 12:00:00".into()),
        Kind::Ci | Kind::Bin => Lit::Str("a".into()),
    }
}

/// A column for a predicate: the shard key often, so that routing is exercised.
fn pred_col(rng: &mut Rng, table: &Table) -> usize {
    match table.shard_key {
        Some(k) if rng.pct(45) => table.col(k),
        _ => rng.below(table.cols.len()),
    }
}

/// One predicate on `table` (columns prefixed with `alias.` when given).
fn predicate(rng: &mut Rng, sql: &mut Sql, data: &Dataset, table: &Table, alias: &str) {
    let c = pred_col(rng, table);
    predicate_on(rng, sql, data, table, alias, c);
}

/// One predicate on column `c` of `table`: `=`, `IN`, `BETWEEN`, comparisons, `IS [NOT] NULL`,
/// `<>`, `<=>`.
pub(super) fn predicate_on(
    rng: &mut Rng,
    sql: &mut Sql,
    data: &Dataset,
    table: &Table,
    alias: &str,
    c: usize,
) {
    let col = format!("{alias}{}", table.cols[c].name);
    match rng.below(12) {
        0..=2 => {
            let v = value(rng, data, table, c);
            if v.is_null() {
                sql.raw(&format!("{col} IS NULL"));
            } else {
                sql.raw(&format!("{col} = ")).lit(&v);
            }
        }
        3 | 4 => {
            sql.raw(&format!("{col} IN ("));
            for i in 0..rng.range(1, 4) {
                if i > 0 {
                    sql.raw(", ");
                }
                let v = value(rng, data, table, c);
                sql.lit(&v);
            }
            sql.raw(")");
        }
        5 => {
            let (a, b) = (non_null(rng, data, table, c), non_null(rng, data, table, c));
            // Sorted bounds mostly; reversed ones select nothing, which is worth asking too.
            let (a, b) = if rng.pct(85) && b < a && same_variant(&a, &b) {
                (b, a)
            } else {
                (a, b)
            };
            let not = if rng.pct(15) { "NOT " } else { "" };
            sql.raw(&format!("{col} {not}BETWEEN "))
                .lit(&a)
                .raw(" AND ")
                .lit(&b);
        }
        6 | 7 => {
            let op = *rng.pick(&["<", "<=", ">", ">="]);
            let v = non_null(rng, data, table, c);
            sql.raw(&format!("{col} {op} ")).lit(&v);
        }
        8 => {
            sql.raw(&format!("{col} IS NULL"));
        }
        9 => {
            sql.raw(&format!("{col} IS NOT NULL"));
        }
        10 => {
            let v = non_null(rng, data, table, c);
            sql.raw(&format!("{col} <> ")).lit(&v);
        }
        _ => {
            let v = value(rng, data, table, c);
            sql.raw(&format!("{col} <=> ")).lit(&v);
        }
    }
}

fn same_variant(a: &Lit, b: &Lit) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// ` WHERE ...` with zero to three predicates joined by AND/OR.
fn where_clause(rng: &mut Rng, sql: &mut Sql, data: &Dataset, table: &Table, alias: &str) {
    let n = match rng.below(10) {
        0 => 0,
        1..=5 => 1,
        6..=8 => 2,
        _ => 3,
    };
    if n == 0 {
        return;
    }
    sql.raw(" WHERE ");
    let or = rng.pct(35);
    for i in 0..n {
        if i > 0 {
            sql.raw(if or { " OR " } else { " AND " });
        }
        if n > 1 {
            sql.raw("(");
        }
        predicate(rng, sql, data, table, alias);
        if n > 1 {
            sql.raw(")");
        }
    }
}

/// Shard-key lookups: `=`, `IN`, `IS NULL`.
fn point(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let table = *rng.pick(&[
        &schema::ORDERS,
        &schema::ORDER_ITEM,
        &schema::ACCOUNT,
        &schema::EVENTS,
        &schema::LEDGER,
    ]);
    let key = table.col(table.shard_key.expect("sharded"));
    let mut sql = Sql::default();
    sql.raw(&format!(
        "SELECT * FROM {} WHERE {} ",
        table.name, table.cols[key].name
    ));
    if rng.pct(60) {
        let v = value(rng, data, table, key);
        if v.is_null() {
            sql.raw("IS NULL");
        } else {
            sql.raw("= ").lit(&v);
        }
    } else {
        sql.raw("IN (");
        for i in 0..rng.range(2, 5) {
            if i > 0 {
                sql.raw(", ");
            }
            let v = non_null(rng, data, table, key);
            sql.lit(&v);
        }
        sql.raw(")");
    }
    sql.finish("point", prepared, Check::default())
}

/// Some columns of `table` in a random order, the primary key usually among them.
fn select_list(rng: &mut Rng, table: &Table) -> Vec<usize> {
    let mut cols: Vec<usize> = (0..table.cols.len()).collect();
    for i in (1..cols.len()).rev() {
        let j = rng.below(i + 1);
        cols.swap(i, j);
    }
    let n = rng.range(1, cols.len() as i64) as usize;
    cols.truncate(n);
    let pk = table.pk_index();
    if !cols.contains(&pk) && rng.pct(70) {
        cols.insert(rng.below(cols.len() + 1), pk);
    }
    cols
}

/// ` ORDER BY ...` over result columns `outs` (1 to 3 keys, the primary key appended half the
/// time), then maybe ` LIMIT`; returns the check it implies. `pk`: the output index of a unique
/// column, if selected.
fn order_by(rng: &mut Rng, sql: &mut Sql, outs: &[Out], pk: Option<usize>) -> Check {
    let mut idx: Vec<usize> = (0..outs.len()).collect();
    for i in (1..idx.len()).rev() {
        let j = rng.below(i + 1);
        idx.swap(i, j);
    }
    idx.truncate(rng.range(1, 3.min(outs.len() as i64)) as usize);
    if let Some(p) = pk
        && !idx.contains(&p)
        && rng.pct(50)
    {
        idx.push(p);
    }
    let mut check = Check::default();
    sql.raw(" ORDER BY ");
    for (n, &i) in idx.iter().enumerate() {
        if n > 0 {
            sql.raw(", ");
        }
        let dir = *rng.pick(&["", " ASC", " DESC"]);
        sql.raw(&format!("{}{dir}", outs[i].expr));
        check.order.push((i, norm_of(outs[i].kind)));
        if Some(i) == pk {
            check.unique_order = true;
            break;
        }
    }
    limit(rng, sql, &mut check);
    check
}

/// Maybe a LIMIT (sometimes with an OFFSET, sometimes past the end).
pub(super) fn limit(rng: &mut Rng, sql: &mut Sql, check: &mut Check) {
    if !rng.pct(60) {
        return;
    }
    let n = rng.range(0, 30);
    check.limited = true;
    match rng.below(4) {
        0 => {
            let off = rng.range(1, 60);
            sql.raw(&format!(" LIMIT {off}, {n}"));
            check.offset = true;
        }
        1 => {
            let off = *rng.pick(&[5, 40, 1_000, 100_000]);
            sql.raw(&format!(" LIMIT {n} OFFSET {off}"));
            check.offset = true;
        }
        _ => {
            sql.raw(&format!(" LIMIT {n}"));
        }
    }
}

/// Filters, with or without ORDER BY / LIMIT.
fn filter(rng: &mut Rng, data: &Dataset, prepared: bool, sorted: bool) -> Query {
    let table = *rng.pick(SINGLE);
    let cols = select_list(rng, table);
    let outs: Vec<Out> = cols
        .iter()
        .map(|&c| Out {
            expr: table.cols[c].name.to_string(),
            kind: table.cols[c].kind,
        })
        .collect();
    let pk = cols.iter().position(|&c| c == table.pk_index());
    let mut sql = Sql::default();
    let list: Vec<&str> = outs.iter().map(|o| o.expr.as_str()).collect();
    sql.raw(&format!("SELECT {} FROM {}", list.join(", "), table.name));
    where_clause(rng, &mut sql, data, table, "");
    let check = if sorted {
        order_by(rng, &mut sql, &outs, pk)
    } else {
        Check::default()
    };
    sql.finish(
        if sorted { "order_limit" } else { "filter" },
        prepared,
        check,
    )
}

/// Aggregate expressions over `table` (1 to 6 of COUNT(*), COUNT(c), SUM, MIN, MAX, AVG), with
/// the norm a MIN/MAX of a string needs.
fn aggregates(rng: &mut Rng, table: &Table, alias: &str) -> Vec<(String, Option<Norm>)> {
    let numeric: Vec<usize> = (0..table.cols.len())
        .filter(|&c| table.cols[c].kind.is_numeric())
        .collect();
    let mut all = Vec::new();
    let any = rng.below(table.cols.len());
    let num = *rng.pick(&numeric);
    let other = rng.below(table.cols.len());
    let name = |c: usize| format!("{alias}{}", table.cols[c].name);
    all.push(("COUNT(*)".to_string(), None));
    all.push((format!("COUNT({})", name(any)), None));
    all.push((format!("SUM({})", name(num)), None));
    let n = norm_of(table.cols[other].kind);
    let n = (n != Norm::Exact).then_some(n);
    all.push((format!("MIN({})", name(other)), n));
    all.push((format!("MAX({})", name(other)), n));
    all.push((format!("AVG({})", name(num)), None));
    for i in (1..all.len()).rev() {
        let j = rng.below(i + 1);
        all.swap(i, j);
    }
    all.truncate(rng.range(1, 6) as usize);
    all
}

/// Aggregates without GROUP BY (one row, also over no rows).
fn aggregate(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let table = *rng.pick(SINGLE);
    let aggs = aggregates(rng, table, "");
    let mut check = Check::default();
    for (i, (_, n)) in aggs.iter().enumerate() {
        if let Some(n) = n {
            check.norm.push((i, *n));
        }
    }
    let list: Vec<&str> = aggs.iter().map(|a| a.0.as_str()).collect();
    let mut sql = Sql::default();
    sql.raw(&format!("SELECT {} FROM {}", list.join(", "), table.name));
    where_clause(rng, &mut sql, data, table, "");
    sql.finish("aggregate", prepared, check)
}

/// GROUP BY one or two columns, aggregates, maybe HAVING, maybe ORDER BY the groups and LIMIT.
fn group_by(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let table = *rng.pick(SINGLE);
    let mut keys = vec![rng.below(table.cols.len())];
    if rng.pct(30) {
        let k2 = rng.below(table.cols.len());
        if k2 != keys[0] {
            keys.push(k2);
        }
    }
    let mut aggs = aggregates(rng, table, "");
    let having = rng.pct(30);
    if having && !aggs.iter().any(|a| a.0 == "COUNT(*)") {
        aggs.push(("COUNT(*)".to_string(), None));
    }
    let mut check = Check::default();
    let mut list: Vec<String> = Vec::new();
    let mut outs = Vec::new();
    for &k in &keys {
        let col = &table.cols[k];
        let n = norm_of(col.kind);
        if n != Norm::Exact {
            check.norm.push((list.len(), n));
        }
        list.push(col.name.to_string());
        outs.push(list.len() - 1);
    }
    for (a, n) in &aggs {
        if let Some(n) = n {
            check.norm.push((list.len(), *n));
        }
        list.push(a.clone());
    }
    let key_names: Vec<&str> = keys.iter().map(|&k| table.cols[k].name).collect();
    let mut sql = Sql::default();
    sql.raw(&format!("SELECT {} FROM {}", list.join(", "), table.name));
    where_clause(rng, &mut sql, data, table, "");
    sql.raw(&format!(" GROUP BY {}", key_names.join(", ")));
    if having {
        let k = rng.range(0, 12);
        sql.raw(&format!(" HAVING COUNT(*) > {k}"));
    }
    if rng.pct(50) {
        // One row per group: ordering by every group key fixes each row's place.
        sql.raw(" ORDER BY ");
        for (i, &k) in keys.iter().enumerate() {
            if i > 0 {
                sql.raw(", ");
            }
            let dir = *rng.pick(&["", " DESC"]);
            sql.raw(&format!("{}{dir}", table.cols[k].name));
            check.order.push((outs[i], norm_of(table.cols[k].kind)));
        }
        check.unique_order = true;
        limit(rng, &mut sql, &mut check);
    }
    sql.finish("group_by", prepared, check)
}

/// SELECT DISTINCT of one or two columns, maybe ordered.
fn distinct(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let table = *rng.pick(SINGLE);
    let mut cols = vec![rng.below(table.cols.len())];
    let c2 = rng.below(table.cols.len());
    if rng.pct(40) && c2 != cols[0] {
        cols.push(c2);
    }
    let mut check = Check::default();
    for (i, &c) in cols.iter().enumerate() {
        let n = norm_of(table.cols[c].kind);
        if n != Norm::Exact {
            check.norm.push((i, n));
        }
    }
    let names: Vec<&str> = cols.iter().map(|&c| table.cols[c].name).collect();
    let mut sql = Sql::default();
    sql.raw(&format!(
        "SELECT DISTINCT {} FROM {}",
        names.join(", "),
        table.name
    ));
    where_clause(rng, &mut sql, data, table, "");
    if rng.pct(50) {
        sql.raw(" ORDER BY ");
        for (i, &c) in cols.iter().enumerate() {
            if i > 0 {
                sql.raw(", ");
            }
            let dir = *rng.pick(&["", " DESC"]);
            sql.raw(&format!("{}{dir}", table.cols[c].name));
            check.order.push((i, norm_of(table.cols[c].kind)));
        }
        check.unique_order = true;
        limit(rng, &mut sql, &mut check);
    }
    sql.finish("distinct", prepared, check)
}

/// `orders` (or `ledger`) joined with the global `country`: rows, or aggregates per region.
fn join_global(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let orders = &schema::ORDERS;
    let left = if rng.pct(50) { "LEFT " } else { "" };
    let mut sql = Sql::default();
    let mut check = Check::default();
    if rng.pct(30) {
        sql.raw(&format!(
            "SELECT c.region, COUNT(*), SUM(o.amount), MAX(o.amount) FROM orders o {left}JOIN country c ON o.country = c.code"
        ));
        where_clause(rng, &mut sql, data, orders, "o.");
        sql.raw(" GROUP BY c.region");
        check.norm.push((0, Norm::Ci));
        if rng.pct(50) {
            sql.raw(" ORDER BY c.region");
            check.order.push((0, Norm::Ci));
            check.unique_order = true;
        }
        return sql.finish("join_global", prepared, check);
    }
    let mut outs = vec![Out {
        expr: "o.id".into(),
        kind: Kind::UInt,
    }];
    for (e, k) in [
        ("o.user_id", Kind::Int),
        ("o.country", Kind::Ci),
        ("o.amount", Kind::Dec),
        ("c.code", Kind::Ci),
        ("c.name", Kind::Ci),
        ("c.region", Kind::Ci),
        ("c.vat", Kind::Dec),
    ] {
        if rng.pct(50) {
            outs.push(Out {
                expr: e.into(),
                kind: k,
            });
        }
    }
    let list: Vec<&str> = outs.iter().map(|o| o.expr.as_str()).collect();
    sql.raw(&format!(
        "SELECT {} FROM orders o {left}JOIN country c ON o.country = c.code",
        list.join(", ")
    ));
    where_clause(rng, &mut sql, data, orders, "o.");
    if rng.pct(50) {
        check = order_by(rng, &mut sql, &outs, Some(0));
    }
    sql.finish("join_global", prepared, check)
}

/// `orders` joined with its ER child `order_item` on the join key (and the order id).
fn join_er(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let left = if rng.pct(30) { "LEFT " } else { "" };
    let on = "o.user_id = i.user_id AND o.id = i.order_id";
    let mut sql = Sql::default();
    let mut check = Check::default();
    let (filter_table, alias) = if rng.pct(70) {
        (&schema::ORDERS, "o.")
    } else {
        (&schema::ORDER_ITEM, "i.")
    };
    if rng.pct(30) {
        sql.raw(&format!(
            "SELECT o.user_id, COUNT(*), COUNT(i.id), SUM(i.qty), AVG(i.price) FROM orders o {left}JOIN order_item i ON {on}"
        ));
        where_clause(rng, &mut sql, data, filter_table, alias);
        sql.raw(" GROUP BY o.user_id");
        if rng.pct(50) {
            sql.raw(" ORDER BY o.user_id DESC");
            check.order.push((0, Norm::Exact));
            check.unique_order = true;
            limit(rng, &mut sql, &mut check);
        }
        return sql.finish("join_er", prepared, check);
    }
    let mut outs = vec![Out {
        expr: "o.id".into(),
        kind: Kind::UInt,
    }];
    for (e, k) in [
        ("o.user_id", Kind::Int),
        ("o.status", Kind::Ci),
        ("i.id", Kind::UInt),
        ("i.sku", Kind::Bin),
        ("i.qty", Kind::Int),
        ("i.price", Kind::Dec),
    ] {
        if rng.pct(55) {
            outs.push(Out {
                expr: e.into(),
                kind: k,
            });
        }
    }
    let list: Vec<&str> = outs.iter().map(|o| o.expr.as_str()).collect();
    sql.raw(&format!(
        "SELECT {} FROM orders o {left}JOIN order_item i ON {on}",
        list.join(", ")
    ));
    where_clause(rng, &mut sql, data, filter_table, alias);
    if rng.pct(50) {
        // o.id is unique only without items; i.id (when selected, inner join) is unique.
        let unique = if left.is_empty() {
            outs.iter().position(|o| o.expr == "i.id")
        } else {
            None
        };
        check = order_by(rng, &mut sql, &outs, unique);
    }
    sql.finish("join_er", prepared, check)
}

/// Two tables and how to join them: every pair of kinds (sharded co-located and not, ER child,
/// global, unlisted, table-per-shard), in either order, as LEFT, RIGHT or inner joins.
const JOIN_PAIRS: &[(&Table, &str, &Table, &str, &str)] = &[
    (
        &schema::ORDERS,
        "o",
        &schema::COUNTRY,
        "c",
        "o.country = c.code",
    ),
    (
        &schema::ORDERS,
        "o",
        &schema::ORDER_ITEM,
        "i",
        "o.user_id = i.user_id AND o.id = i.order_id",
    ),
    (
        &schema::ORDERS,
        "o",
        &schema::ORDERS,
        "p",
        "o.user_id = p.user_id AND p.id = o.id",
    ),
    (
        &schema::ORDERS,
        "o",
        &schema::NOTE,
        "n",
        "n.ref_user = o.user_id",
    ),
    (&schema::NOTE, "n", &schema::COUNTRY, "c", "n.code = c.code"),
    (
        &schema::ORDER_ITEM,
        "i",
        &schema::NOTE,
        "n",
        "n.ref_user = i.user_id",
    ),
    (
        &schema::ORDER_ITEM,
        "i",
        &schema::COUNTRY,
        "c",
        "c.code = i.sku",
    ),
    (
        &schema::ORDERS,
        "o",
        &schema::ACCOUNT,
        "a",
        "a.id = o.user_id",
    ),
    (
        &schema::LEDGER,
        "l",
        &schema::COUNTRY,
        "c",
        "c.code = l.account",
    ),
    (&schema::EVENTS, "e", &schema::NOTE, "n", "n.id = e.id"),
    (
        &schema::ACCOUNT,
        "a",
        &schema::COUNTRY,
        "c",
        "c.name = a.name",
    ),
    (
        &schema::LEDGER,
        "l",
        &schema::ORDER_ITEM,
        "i",
        "l.id = i.id",
    ),
];

/// Outer joins (and some inner ones) between every pair of table kinds: rows, or aggregates
/// per a column of one side.
fn outer_join(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let &(ta, aa, tb, ab, on) = rng.pick(JOIN_PAIRS);
    let ((t1, a1), (t2, a2)) = if rng.pct(50) {
        ((ta, aa), (tb, ab))
    } else {
        ((tb, ab), (ta, aa))
    };
    let join = *rng.pick(&["LEFT JOIN", "RIGHT JOIN", "LEFT JOIN", "RIGHT JOIN", "JOIN"]);
    let from = format!("{} {a1} {join} {} {a2} ON {on}", t1.name, t2.name);
    let (ft, fa) = if rng.pct(50) { (t1, a1) } else { (t2, a2) };
    let mut sql = Sql::default();
    let mut check = Check::default();
    if rng.pct(30) {
        // Per value of one side's column: how many rows, and matches on the other side.
        let (kt, ka, ot, oa) = if rng.pct(50) {
            (t1, a1, t2, a2)
        } else {
            (t2, a2, t1, a1)
        };
        let k = rng.below(kt.cols.len());
        let key = format!("{ka}.{}", kt.cols[k].name);
        let other = format!("{oa}.{}", ot.cols[rng.below(ot.cols.len())].name);
        let nums: Vec<&str> = ot
            .cols
            .iter()
            .filter(|c| c.kind.is_numeric())
            .map(|c| c.name)
            .collect();
        let num = format!("{oa}.{}", rng.pick(&nums));
        sql.raw(&format!(
            "SELECT {key}, COUNT(*), COUNT({other}), SUM({num}) FROM {from}"
        ));
        where_clause(rng, &mut sql, data, ft, &format!("{fa}."));
        sql.raw(&format!(" GROUP BY {key}"));
        let n = norm_of(kt.cols[k].kind);
        if n != Norm::Exact {
            check.norm.push((0, n));
        }
        if rng.pct(50) {
            sql.raw(&format!(" ORDER BY {key}"));
            check.order.push((0, n));
            check.unique_order = true;
            limit(rng, &mut sql, &mut check);
        }
        return sql.finish("outer_join", prepared, check);
    }
    let mut outs = Vec::new();
    for (t, a) in [(t1, a1), (t2, a2)] {
        let mut cols = select_list(rng, t);
        cols.truncate(3);
        for c in cols {
            outs.push(Out {
                expr: format!("{a}.{}", t.cols[c].name),
                kind: t.cols[c].kind,
            });
        }
    }
    let list: Vec<&str> = outs.iter().map(|o| o.expr.as_str()).collect();
    sql.raw(&format!("SELECT {} FROM {from}", list.join(", ")));
    where_clause(rng, &mut sql, data, ft, &format!("{fa}."));
    if rng.pct(40) {
        // Null-extended rows repeat any key: no order is unique.
        check = order_by(rng, &mut sql, &outs, None);
    }
    sql.finish("outer_join", prepared, check)
}

/// Select-list aliases used in GROUP BY, HAVING and ORDER BY (and ORDER BY alone).
fn aliases(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let table = *rng.pick(SINGLE);
    let c = rng.below(table.cols.len());
    let col = table.cols[c].name;
    let kind = table.cols[c].kind;
    let mut sql = Sql::default();
    let mut check = Check::default();
    if rng.pct(25) {
        // No grouping: aliases of columns in ORDER BY.
        let pk = table.pk;
        sql.raw(&format!(
            "SELECT {pk} AS k_id, {col} AS v FROM {}",
            table.name
        ));
        where_clause(rng, &mut sql, data, table, "");
        let dir = *rng.pick(&["", " DESC"]);
        sql.raw(&format!(" ORDER BY v{dir}, k_id"));
        check.order = vec![(1, norm_of(kind)), (0, Norm::Exact)];
        check.unique_order = true;
        limit(rng, &mut sql, &mut check);
        return sql.finish("alias", prepared, check);
    }
    let (expr, norm) = match kind {
        Kind::Date => (
            rng.pick(&[
                "YEAR({c})",
                "MONTH({c})",
                "DATE_FORMAT({c}, '%Y-%m')",
                "{c}",
            ])
            .replace("{c}", col),
            Norm::Exact,
        ),
        Kind::DateTime => (
            rng.pick(&["DATE({c})", "HOUR({c})", "YEAR({c})", "{c}"])
                .replace("{c}", col),
            Norm::Exact,
        ),
        Kind::Int | Kind::UInt => (
            rng.pick(&["{c} DIV 10", "{c} % 5", "{c}"])
                .replace("{c}", col),
            Norm::Exact,
        ),
        Kind::Dec | Kind::Double => (
            rng.pick(&["FLOOR({c} / 100)", "ROUND({c}, -2)", "{c}"])
                .replace("{c}", col),
            Norm::Exact,
        ),
        Kind::Ci | Kind::Bin => (
            rng.pick(&["UPPER({c})", "LEFT({c}, 1)", "{c}"])
                .replace("{c}", col),
            norm_of(kind),
        ),
    };
    let nums: Vec<&str> = table
        .cols
        .iter()
        .filter(|c| c.kind.is_numeric())
        .map(|c| c.name)
        .collect();
    let num = *rng.pick(&nums);
    sql.raw(&format!(
        "SELECT {expr} AS g_key, COUNT(*) AS cnt, SUM({num}) AS total FROM {}",
        table.name
    ));
    where_clause(rng, &mut sql, data, table, "");
    sql.raw(" GROUP BY g_key");
    if norm != Norm::Exact {
        check.norm.push((0, norm));
    }
    match rng.below(5) {
        0 => {
            sql.raw(&format!(" HAVING cnt > {}", rng.range(0, 8)));
        }
        1 => {
            let v = Lit::Dec(data::random_dec(rng, -100, 20_000, 2));
            sql.raw(" HAVING total > ").lit(&v);
        }
        2 => {
            sql.raw(" HAVING g_key IS NOT NULL");
        }
        3 => {
            let lo = rng.range(-50, 5_000);
            let (a, b) = (Lit::Int(lo), Lit::Int(lo + rng.range(0, 20_000)));
            let not = if rng.pct(25) { "NOT " } else { "" };
            sql.raw(&format!(" HAVING total {not}BETWEEN "))
                .lit(&a)
                .raw(" AND ")
                .lit(&b);
        }
        _ => {}
    }
    match rng.below(3) {
        0 => {
            let dir = *rng.pick(&["", " DESC"]);
            sql.raw(&format!(" ORDER BY g_key{dir}"));
            check.order = vec![(0, norm)];
            check.unique_order = true;
            limit(rng, &mut sql, &mut check);
        }
        1 => {
            sql.raw(" ORDER BY cnt DESC, g_key");
            check.order = vec![(1, Norm::Exact), (0, norm)];
            check.unique_order = true;
            limit(rng, &mut sql, &mut check);
        }
        _ => {}
    }
    sql.finish("alias", prepared, check)
}

/// An expression over column `c` of `table` (written `{qual}{name}`): functions and operators
/// for its type, CONCAT with the primary key, a CASE; the kind says how its values compare.
fn typed_expr(rng: &mut Rng, data: &Dataset, table: &Table, qual: &str, c: usize) -> Out {
    let col = &table.cols[c];
    let name = format!("{qual}{}", col.name);
    if rng.pct(15) {
        let v = non_null(rng, data, table, c);
        return Out {
            expr: format!(
                "CASE WHEN {name} IS NULL THEN 'none' WHEN {name} > {} THEN 'high' ELSE 'low' END",
                v.sql()
            ),
            kind: Kind::Int,
        };
    }
    let pk = format!("{qual}{}", table.pk);
    let (forms, kind): (&[&str], Kind) = match col.kind {
        // No negation or doubling of unsigned or BIGINT values: MariaDB would fail (1690).
        Kind::Int | Kind::UInt => (
            &["{c} + 1", "{c} DIV 3", "{c} % 7", "ABS({c}) DIV 2"],
            Kind::Int,
        ),
        Kind::Dec => (
            &[
                "{c} * 2",
                "{c} + 0.5",
                "{c} / 4",
                "ROUND({c}, 1)",
                "{c} DIV 1",
                "TRUNCATE({c}, 0)",
                // A DOUBLE from a DECIMAL, exact in binary (an integer times 1.5), so that its
                // SUM does not depend on the order of addition: `{c} * 1.5e0` itself is not
                // (12.34 has no exact DOUBLE), and one server's sum changes with its row order.
                "FLOOR({c}) * 1.5e0",
            ],
            Kind::Int,
        ),
        Kind::Double => (
            &["{c} * 2", "{c} + 1", "{c} / 2", "FLOOR({c})", "{c} * 0.5"],
            Kind::Int,
        ),
        Kind::Ci | Kind::Bin => (
            &[
                "CONCAT({c}, ':', {pk})",
                "UPPER({c})",
                "LENGTH({c})",
                "COALESCE({c}, 'none')",
                "CONCAT_WS('-', {c}, 'x')",
                "SUBSTRING({c}, 1, 2)",
            ],
            col.kind,
        ),
        Kind::Date => (
            &[
                "YEAR({c})",
                "MONTH({c})",
                "DATE_ADD({c}, INTERVAL 1 DAY)",
                "DATE_FORMAT({c}, '%Y/%m')",
                "DATEDIFF({c}, '2024-01-01')",
                "DAYOFWEEK({c})",
                "LAST_DAY({c})",
                "CONCAT({c}, '')",
            ],
            Kind::Int,
        ),
        Kind::DateTime => (
            &[
                "DATE({c})",
                "HOUR({c})",
                "{c} + INTERVAL 90 MINUTE",
                "TIMESTAMPDIFF(HOUR, '2024-01-01 00:00:00', {c})",
                "DATE_FORMAT({c}, '%H:%i')",
                "TIME({c})",
            ],
            Kind::Int,
        ),
    };
    let form = *rng.pick(forms);
    // LENGTH and the like are numbers; CONCAT/UPPER of a string keep its collation.
    let kind = if matches!(kind, Kind::Ci | Kind::Bin) && form.starts_with("LENGTH") {
        Kind::Int
    } else {
        kind
    };
    Out {
        expr: form.replace("{c}", &name).replace("{pk}", &pk),
        kind,
    }
}

/// Expressions over every column type in the select list (unaliased, so the column name is the
/// expression's text, table-qualified half the time), ordered by expression, position or
/// alias; or aggregates over such expressions.
fn typed_exprs(rng: &mut Rng, data: &Dataset, prepared: bool) -> Query {
    let table = *rng.pick(SINGLE);
    let qual = if rng.pct(50) {
        format!("{}.", table.name)
    } else {
        String::new()
    };
    let mut sql = Sql::default();
    let mut check = Check::default();
    if rng.pct(25) {
        let mut list = Vec::new();
        for i in 0..rng.range(1, 3) as usize {
            let c = rng.below(table.cols.len());
            let e = typed_expr(rng, data, table, &qual, c);
            let n = norm_of(e.kind);
            let agg = if e.kind == Kind::Int && table.cols[c].kind.is_numeric() && rng.pct(60) {
                "SUM"
            } else {
                *rng.pick(&["MIN", "MAX", "COUNT"])
            };
            if n != Norm::Exact && agg != "COUNT" {
                check.norm.push((i, n));
            }
            list.push(format!("{agg}({})", e.expr));
        }
        sql.raw(&format!("SELECT {} FROM {}", list.join(", "), table.name));
        where_clause(rng, &mut sql, data, table, &qual);
        return sql.finish("typed_expr", prepared, check);
    }
    let mut outs = vec![Out {
        expr: format!("{qual}{}", table.pk),
        kind: Kind::Int,
    }];
    let mut shown = vec![outs[0].expr.clone()];
    for i in 0..rng.range(1, 3) {
        let c = rng.below(table.cols.len());
        let e = typed_expr(rng, data, table, &qual, c);
        shown.push(if rng.pct(30) {
            format!("{} AS e{i}", e.expr)
        } else {
            e.expr.clone()
        });
        outs.push(e);
    }
    sql.raw(&format!("SELECT {} FROM {}", shown.join(", "), table.name));
    where_clause(rng, &mut sql, data, table, &qual);
    if rng.pct(50) {
        let i = rng.range(1, outs.len() as i64 - 1) as usize;
        let key = match rng.below(3) {
            0 => (i + 1).to_string(),
            1 if shown[i].contains(" AS ") => shown[i].rsplit(' ').next().unwrap().to_string(),
            _ => outs[i].expr.clone(),
        };
        let dir = *rng.pick(&["", " DESC"]);
        sql.raw(&format!(" ORDER BY {key}{dir}, {}", outs[0].expr));
        check.order = vec![(i, norm_of(outs[i].kind)), (0, Norm::Exact)];
        check.unique_order = true;
        limit(rng, &mut sql, &mut check);
    }
    sql.finish("typed_expr", prepared, check)
}

/// One write statement, applied to the subject and then (if it succeeded) to the oracle.
#[derive(Clone, Debug)]
pub struct Write {
    pub family: &'static str,
    pub sql: String,
}

/// Writes from `seed` over `data`: multi-row INSERTs across shards, UPDATE, DELETE, REPLACE and
/// INSERT ... ON DUPLICATE KEY UPDATE on sharded, child, global and table-per-shard tables.
/// REPLACE and ON DUPLICATE KEY UPDATE keep each existing id with its shard key, as an
/// application must (unique keys other than the shard key are not enforced across shards).
/// UPDATEs that assign the shard key (issue 23): Django's `save()` (every column, the key to
/// the value it has), a row moved to another shard, a range of rows some of which move and
/// some stay, each row's key shifted by an expression, and a table-per-shard row moved to
/// another date's table. `existing` is the loaded (id, user_id) pairs: by the time a statement
/// runs a row may have moved or gone, which only changes what it does, on both sides alike.
/// Shard-key UPDATEs over `existing`, the orders with ids `first_id..` (the dataset's ids
/// are consecutive): rows the REPLACE and ON DUPLICATE KEY UPDATE writes never pick, as those
/// write an existing id with the shard key the dataset gave it (a moved row would stand on
/// two shards: a primary key without the shard key is not unique across shards).
fn shard_key_updates(
    rng: &mut Rng,
    round: usize,
    existing: &[(Lit, Lit)],
    first_id: i64,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let last_id = first_id + existing.len() as i64;
    let (id, user) = rng.pick(existing).clone();
    out.push((
        "update_key_same",
        format!(
            "UPDATE orders SET user_id = {}, status = 'save{round}', amount = amount + 1 WHERE id = {}",
            user.sql(),
            id.sql()
        ),
    ));
    let (id, _) = rng.pick(existing).clone();
    out.push((
        "update_key_move",
        format!(
            "UPDATE orders SET user_id = {}, tag = 'mv{round}' WHERE id = {}",
            rng.range(-5, 60),
            id.sql()
        ),
    ));
    let first = rng.range(first_id, last_id);
    out.push((
        "update_key_mixed",
        format!(
            "UPDATE orders SET user_id = {}, qty = 7 WHERE id BETWEEN {first} AND {}",
            rng.range(-5, 60),
            first + rng.range(2, 12)
        ),
    ));
    let first = rng.range(first_id, last_id);
    out.push((
        "update_key_expr",
        format!(
            "UPDATE orders SET user_id = user_id + {}, delta = 1 WHERE id BETWEEN {first} AND {}",
            rng.range(1, 7),
            first + rng.range(0, 6)
        ),
    ));
    out.push((
        "update_key_move",
        format!(
            "UPDATE ledger SET day = DATE_ADD(day, INTERVAL {} DAY), credit = 1 WHERE id BETWEEN {first} AND {}",
            rng.range(1, 200),
            first + rng.range(0, 4)
        ),
    ));
    out
}

pub fn writes(seed: u64, rounds: usize, data: &Dataset) -> Vec<Write> {
    let mut rng = Rng::new(seed ^ 0x0000_5717_e500);
    let orders = &schema::ORDERS;
    let existing: Vec<(Lit, Lit)> = data
        .rows("orders")
        .iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
    // The first half keeps its shard keys (REPLACE and ODKU rewrite those rows in place); the
    // second half's may move.
    let half = existing.len() / 2;
    let (kept, movable) = existing.split_at(half);
    let mut next_order = data.rows("orders").len() as u64 + 10_000;
    let mut next_item = data.rows("order_item").len() as u64 + 10_000;
    let mut next_ledger = data.rows("ledger").len() as u64 + 10_000;
    let mut next_account = data.rows("account").len() as i64 + 10_000;
    let ids = data.rows("events").iter().filter_map(|r| match r[0] {
        Lit::Int(i) => Some(i),
        _ => None,
    });
    let (mut next_high, mut next_low) = (
        ids.clone().max().unwrap_or(0).max(4_100),
        ids.min().unwrap_or(0),
    );
    let mut w = Vec::new();
    let mut push = |family: &'static str, sql: String| w.push(Write { family, sql });
    for round in 0..rounds {
        // Multi-row INSERT across shards (NULL shard keys included), then their items.
        let mut new_orders = Vec::new();
        for _ in 0..8 {
            next_order += 1;
            new_orders.push(data::order_row(&mut rng, next_order));
        }
        push("insert_multi", data::insert_sql(orders, &new_orders));
        let items: Vec<Vec<Lit>> = new_orders
            .iter()
            .map(|o| {
                next_item += 1;
                data::item_row(&mut rng, next_item, &o[0], &o[1])
            })
            .collect();
        push(
            "insert_child",
            data::insert_sql(&schema::ORDER_ITEM, &items),
        );
        let (u1, u2) = (rng.range(-5, 60), rng.range(-5, 60));
        push(
            "update",
            format!(
                "UPDATE orders SET amount = amount + 1.25, status = 'upd{round}' WHERE user_id IN ({u1}, {u2})"
            ),
        );
        push(
            "update_scatter",
            format!(
                "UPDATE orders SET qty = NULL, tag = 'X' WHERE amount > {}",
                data::random_dec(&mut rng, 50_000, 99_000, 2)
            ),
        );
        let first = rng.range(1, existing.len() as i64);
        push(
            "delete_scatter",
            format!(
                "DELETE FROM orders WHERE id BETWEEN {first} AND {}",
                first + 4
            ),
        );
        push(
            "delete",
            format!(
                "DELETE FROM order_item WHERE user_id = {}",
                rng.range(-5, 60)
            ),
        );
        // REPLACE an existing order (same id, same shard key) and a new one.
        let (id, user) = rng.pick(kept).clone();
        let mut replaced = data::order_row_for(&mut rng, 0, user);
        replaced[0] = id;
        next_order += 1;
        let fresh = data::order_row(&mut rng, next_order);
        push("replace", {
            let sql = data::insert_sql(orders, &[replaced, fresh]);
            sql.replacen("INSERT INTO", "REPLACE INTO", 1)
        });
        let (id, user) = rng.pick(kept).clone();
        let mut dup = data::order_row_for(&mut rng, 0, user);
        dup[0] = id;
        next_order += 1;
        let fresh = data::order_row(&mut rng, next_order);
        push(
            "insert_odku",
            format!(
                "{} ON DUPLICATE KEY UPDATE amount = VALUES(amount), status = 'dup', qty = qty + 1",
                data::insert_sql(orders, &[dup, fresh])
            ),
        );
        for (family, sql) in shard_key_updates(&mut rng, round, movable, half as i64 + 1) {
            push(family, sql);
        }
        // Global table: written on every node.
        push(
            "update_global",
            format!(
                "UPDATE country SET vat = vat + 1 WHERE code = '{}'",
                rng.pick(data::COUNTRY_CODES).to_uppercase()
            ),
        );
        push(
            "insert_global",
            format!(
                "INSERT INTO country (code, name, region, vat) VALUES ('n{round}', 'New {round}', 'asia', 1.50)"
            ),
        );
        // Table-per-shard by date.
        let rows: Vec<Vec<Lit>> = (0..6)
            .map(|_| {
                next_ledger += 1;
                data::ledger_row(&mut rng, next_ledger)
            })
            .collect();
        push("insert_multi", data::insert_sql(&schema::LEDGER, &rows));
        let from = data::random_date(&mut rng, 19_700, 20_300);
        push(
            "update_range",
            format!(
                "UPDATE ledger SET credit = debit WHERE day BETWEEN '{from}' AND DATE_ADD('{from}', INTERVAL 40 DAY)"
            ),
        );
        push(
            "update_range",
            format!(
                "UPDATE ledger SET credit = NULL WHERE day BETWEEN '{from}' AND '{}'",
                data::random_date(&mut rng, 19_700, 20_300)
            ),
        );
        push(
            "delete_range",
            format!(
                "DELETE FROM ledger WHERE day < '{}'",
                data::random_date(&mut rng, 19_630, 19_700)
            ),
        );
        // Range-sharded events.
        let rows: Vec<Vec<Lit>> = (0..5)
            .map(|_| {
                // Fresh ids in the last range and below the first one: never a duplicate key.
                let id = if rng.pct(50) {
                    next_high += rng.range(1, 400);
                    next_high
                } else {
                    next_low -= rng.range(1, 50);
                    next_low
                };
                data::event_row(&mut rng, id)
            })
            .collect();
        push("insert_multi", data::insert_sql(&schema::EVENTS, &rows));
        let a = rng.range(-200, 4_500);
        push(
            "update_range",
            format!(
                "UPDATE events SET n = {}, kind = 'VIEW' WHERE id BETWEEN {a} AND {}",
                rng.range(0, 255),
                a + rng.range(0, 1_500)
            ),
        );
        push(
            "delete_scatter",
            format!(
                "DELETE FROM events WHERE kind = '{}'",
                rng.pick(data::KINDS)
            ),
        );
        // Hash on a general_ci string.
        let rows: Vec<Vec<Lit>> = (0..4)
            .map(|_| {
                next_account += 1;
                data::account_row(&mut rng, next_account)
            })
            .collect();
        push("insert_multi", data::insert_sql(&schema::ACCOUNT, &rows));
        push(
            "update",
            format!(
                "UPDATE account SET balance = balance * 2, score = NULL WHERE email = '{}'",
                data::email(&mut rng)
            ),
        );
        push(
            "delete",
            format!(
                "DELETE FROM account WHERE email IN ('{}', '{}')",
                data::email(&mut rng),
                data::email(&mut rng)
            ),
        );
        // A row moved to another shard by its key: one of the movable half (ids after `half`),
        // never a row REPLACE or ODKU rewrite with the key the dataset gave it (moved, it would
        // stand on two shards, a primary key without the shard key being unique per shard).
        push(
            "update_shard_key",
            format!(
                "UPDATE orders SET user_id = user_id + 1 WHERE id = {}",
                rng.range(half as i64 + 1, existing.len() as i64)
            ),
        );
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_counts() {
        let data = Dataset::generate(3, 60);
        let a = generate(3, 300, &data);
        let b = generate(3, 300, &data);
        assert_eq!(a.len(), 300);
        assert!(a.iter().zip(&b).all(|(x, y)| x.sql == y.sql));
        let prepared = a.iter().filter(|q| q.prepared.is_some()).count();
        assert!(prepared > 30, "{prepared} prepared");
        for family in [
            "point",
            "filter",
            "order_limit",
            "aggregate",
            "group_by",
            "distinct",
            "join_global",
            "join_er",
            "outer_join",
            "alias",
            "typed_expr",
            "colo_join",
        ] {
            assert!(a.iter().any(|q| q.family == family), "no {family}");
        }
        for q in &a {
            if let Some((sql, params)) = &q.prepared {
                assert_eq!(sql.matches('?').count(), params.len(), "{sql}");
            }
        }
    }

    #[test]
    fn writes_cover_every_kind() {
        let data = Dataset::generate(3, 60);
        let w = writes(3, 2, &data);
        for kind in ["INSERT", "UPDATE", "DELETE", "REPLACE", "ON DUPLICATE KEY"] {
            assert!(w.iter().any(|x| x.sql.contains(kind)), "{kind}");
        }
    }
}
