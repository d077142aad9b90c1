//! Replays every statement sysbench-tpcc sends (`tests/data/sysbench-tpcc-statements.sql`, a
//! copy of the project's capture in `shared/tpcc/`) through Shoal over a sharded TPC-C schema
//! and on one MariaDB database holding the same rows, and compares each answer (issue 24).
//!
//! Layout: schema `shop` (the fixture's user may only use `shop`) over dn1..dn4 (server 0 `a`,
//! `b`, server 1 `a`, `b`); every TPC-C table sharded by its warehouse column with one `mod`
//! rule, `item1` global. The reference is database `tpcc_ref` on server 0, reached directly.
//!
//! Parts, each in fresh sessions on both sides, in order:
//! 1. prepare: the capture's prepare statements on empty tables, then every table's contents;
//! 2. load: generated rows (warehouses 2..4, the districts w1 lacks, and the customers, orders,
//!    order lines, new orders, stock and items the run part's literal ids name, plus others),
//!    as multi-row INSERTs with foreign key checks on (the FOREIGN KEYs of the prepare part are
//!    satisfied row by row, on each datanode too);
//! 3. run: the five transactions' statements in one session (BEGIN/COMMIT/ROLLBACK,
//!    `autocommit=0`); the reference must find rows for each of them (else the load is wrong);
//! 4. check: the consistency checks, then every table's contents again.
//!
//! Every statement's outcome is compared: the same result set (column names and types; rows in
//! order when the statement has ORDER BY, else as multisets), affected-row count, or error code.
//! A statement listed in [`EXPECTED_REFUSALS`] must instead be refused by Shoal with its code.
//! Every session first sets `timestamp` (not a statement of the capture) so that `NOW()` is the
//! same on both sides and the rows can be compared exactly.

use std::time::Duration;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_tests::differential::compare::{Answer, Check, Norm, compare, show_answer};
use shoal_tests::{ShoalProcess, within};

const STATEMENTS: &str = include_str!("../data/sysbench-tpcc-statements.sql");
const REF_DB: &str = "tpcc_ref";
/// 2026-12-02 10:00:00 UTC: `NOW()` on both sides.
const TIMESTAMP: u64 = 1_796_205_600;

/// sysbench-tpcc declares two foreign keys that are not on the shard key (order_line1's
/// ol_supply_w_id, history1's customer columns) and runs with FOREIGN_KEY_CHECKS=0: the schema
/// declares them per datanode.
fn layout() -> String {
    shoal_tests::warehouse_layout(
        "    foreign_keys: datanode_local\n",
        &[
            ("warehouse1", "w_id"),
            ("district1", "d_w_id"),
            ("customer1", "c_w_id"),
            ("history1", "h_w_id"),
            ("orders1", "o_w_id"),
            ("new_orders1", "no_w_id"),
            ("order_line1", "ol_w_id"),
            ("stock1", "s_w_id"),
        ],
        &["item1"],
    )
}

/// A statement Shoal answers with an error where MariaDB answers: matched by the start of its
/// text; Shoal must answer exactly `code`.
struct Refusal {
    prefix: &'static str,
    code: u16,
    why: &'static str,
    /// Also sent to the reference (to keep both sessions alike); not when it would change the
    /// shared server.
    on_reference: bool,
}

/// Kept minimal: each entry is a statement Shoal cannot answer exactly by design.
const EXPECTED_REFUSALS: &[Refusal] = &[Refusal {
    prefix: "SET GLOBAL general_log",
    code: 1235,
    why: "a Shoal user must not change the backends' global state (docs/security.md)",
    on_reference: false,
}];

/// The capture's statements of one part (`prepare`, `run`, `check`), without their `;`.
fn part(name: &str) -> Vec<&'static str> {
    let header = format!("-- == {name} ");
    let mut lines = STATEMENTS.lines();
    assert!(
        lines.any(|l| l.starts_with(&header)),
        "no part {name} in the capture"
    );
    let out: Vec<&str> = lines
        .take_while(|l| !l.starts_with("-- == "))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("--"))
        .map(|l| l.strip_suffix(';').unwrap_or(l))
        .collect();
    assert!(!out.is_empty(), "part {name} is empty");
    out
}

type Outcome = Result<Answer, (Option<u16>, String)>;

async fn outcome(conn: &mut Conn, sql: &str) -> Outcome {
    let fetched = within(
        Duration::from_secs(120),
        sql,
        shoal_tests::differential::compare::fetch(conn, sql, None),
    )
    .await;
    fetched.map_err(|e| match e {
        mysql_async::Error::Server(e) => (Some(e.code), e.message),
        other => (None, other.to_string()),
    })
}

fn show(o: &Outcome) -> String {
    match o {
        Ok(a) if a.columns.is_empty() => format!("ok, {} affected", a.affected),
        Ok(a) => format!("rows\n{}", show_answer(a, 5)),
        Err((Some(code), msg)) => format!("error {code}: {msg}"),
        Err((None, msg)) => format!("client error: {msg}"),
    }
}

/// Rows in order when the statement fixes it (every ORDER BY here is on a key or on a column
/// the data keeps unique), else as a multiset.
fn check_for(sql: &str) -> Check {
    if sql.to_ascii_uppercase().contains("ORDER BY") {
        Check {
            order: vec![(0, Norm::Exact)],
            unique_order: true,
            ..Check::default()
        }
    } else {
        Check::default()
    }
}

/// Why `shoal` is not the answer `reference` is, if it is not.
fn differs(reference: &Outcome, shoal: &Outcome, check: &Check) -> Option<String> {
    match (reference, shoal) {
        (Ok(r), Ok(s)) => compare(r, s, check).err().or_else(|| {
            (r.affected != s.affected).then(|| {
                format!(
                    "affected rows: reference {}, shoal {}",
                    r.affected, s.affected
                )
            })
        }),
        (Err((Some(r), _)), Err((Some(s), _))) if r == s => None,
        _ => Some("outcomes differ".to_string()),
    }
}

struct Replay {
    shoal: ShoalProcess,
    cluster: shoal_bench::cluster::Cluster,
    mismatches: Vec<String>,
    compared: usize,
    refused: usize,
}

impl Replay {
    /// A session on each side: (Shoal, reference), with `NOW()` fixed.
    async fn sessions(&self) -> (Conn, Conn) {
        let mut s = Conn::new(self.shoal.opts_as("app", "app-secret", Some("shop")))
            .await
            .unwrap_or_else(|e| panic!("connect through shoal: {e}\n{}", self.shoal.log()));
        let mut r = Conn::new(self.cluster.opts(0, Some(REF_DB))).await.unwrap();
        let set = format!("SET timestamp = {TIMESTAMP}");
        s.query_drop(&set)
            .await
            .unwrap_or_else(|e| panic!("{set} through shoal: {e}"));
        r.query_drop(&set).await.unwrap();
        (s, r)
    }

    fn mismatch(&mut self, label: &str, sql: &str, why: &str, reference: &str, shoal: &str) {
        let mut short: String = sql.chars().take(300).collect();
        if short.len() < sql.len() {
            short.push_str(" ...");
        }
        self.mismatches.push(format!(
            "{label}: {short}\n    {why}\n    reference: {reference}\n    shoal:     {shoal}"
        ));
    }

    /// Runs `sql` on both sessions and records a mismatch; returns the reference's outcome.
    async fn replay(&mut self, label: &str, s: &mut Conn, r: &mut Conn, sql: &str) -> Outcome {
        if let Some(refusal) = EXPECTED_REFUSALS.iter().find(|x| sql.starts_with(x.prefix)) {
            let got = outcome(s, sql).await;
            let reference = if refusal.on_reference {
                outcome(r, sql).await
            } else {
                Err((None, "not sent to the reference".to_string()))
            };
            match &got {
                Err((Some(code), _)) if *code == refusal.code => self.refused += 1,
                _ => self.mismatch(
                    label,
                    sql,
                    &format!(
                        "expected Shoal's refusal {} ({}): a refusal that no longer happens \
                         leaves EXPECTED_REFUSALS",
                        refusal.code, refusal.why
                    ),
                    &show(&reference),
                    &show(&got),
                ),
            }
            return reference;
        }
        let got = outcome(s, sql).await;
        let want = outcome(r, sql).await;
        self.compared += 1;
        if let Some(why) = differs(&want, &got, &check_for(sql)) {
            self.mismatch(label, sql, &why, &show(&want), &show(&got));
        }
        want
    }

    /// Every table's rows, ordered by its primary key, through Shoal and on the reference.
    async fn compare_tables(&mut self, after: &str) {
        let (mut s, mut r) = self.sessions().await;
        for (table, order) in TABLE_KEYS {
            let sql = format!("SELECT * FROM {table} ORDER BY {order}");
            let (got, want) = (outcome(&mut s, &sql).await, outcome(&mut r, &sql).await);
            // history1 has no key: its rows form a multiset.
            let check = if *table == "history1" {
                Check::default()
            } else {
                check_for(&sql)
            };
            if let Some(why) = differs(&want, &got, &check) {
                self.mismatch(
                    &format!("{table} after {after}"),
                    &sql,
                    &why,
                    &show(&want),
                    &show(&got),
                );
            }
        }
    }
}

const TABLE_KEYS: &[(&str, &str)] = &[
    ("warehouse1", "w_id"),
    ("district1", "d_w_id, d_id"),
    ("customer1", "c_w_id, c_d_id, c_id"),
    (
        "history1",
        "h_w_id, h_d_id, h_c_w_id, h_c_d_id, h_c_id, h_date, h_amount, h_data",
    ),
    ("orders1", "o_w_id, o_d_id, o_id"),
    ("new_orders1", "no_w_id, no_d_id, no_o_id"),
    ("order_line1", "ol_w_id, ol_d_id, ol_o_id, ol_number"),
    ("stock1", "s_w_id, s_i_id"),
    ("item1", "i_id"),
];

/// The rows of the load part (see [`load`]).
mod rows {
    use std::collections::BTreeSet;

    /// splitmix64: a fixed pseudo-random value for `x`.
    pub fn h(x: u64) -> u64 {
        let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn key(parts: &[u64]) -> u64 {
        parts.iter().fold(17, |acc, p| h(acc ^ p))
    }

    /// TPC-C's last names: the syllables of `n`'s three digits (`CALLYEINGESE` is 795).
    pub fn last_name(n: u64) -> String {
        const SYL: [&str; 10] = [
            "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
        ];
        format!(
            "{}{}{}",
            SYL[(n / 100 % 10) as usize],
            SYL[(n / 10 % 10) as usize],
            SYL[(n % 10) as usize]
        )
    }

    /// A lowercase word of `len` letters for `seed`.
    pub fn word(seed: u64, len: usize) -> String {
        (0..len)
            .map(|i| (b'a' + (key(&[seed, i as u64]) % 26) as u8) as char)
            .collect()
    }

    /// `len` copies of one letter, as sysbench-tpcc fills its data columns.
    pub fn filler(seed: u64, len: usize) -> String {
        let c = (b'a' + (h(seed) % 26) as u8) as char;
        std::iter::repeat_n(c, len).collect()
    }

    /// A first name unique among customers (an injective map of `c_id` < 10007 to letters),
    /// so that `ORDER BY c_first` fixes the order of rows.
    pub fn first_name(c_id: u64) -> String {
        let mut n = c_id * 7919 % 10007;
        let mut s = String::from("first-");
        for _ in 0..3 {
            s.push((b'a' + (n % 26) as u8) as char);
            n /= 26;
        }
        s
    }

    /// Items: every id the orders name, and 96346 (the run part's item).
    pub fn items() -> Vec<u64> {
        let mut ids: BTreeSet<u64> = (0..200).map(|k| 6 + k * 499 % 99990).collect();
        ids.insert(96346);
        ids.into_iter().collect()
    }

    /// Customers of district (w, d): the run part's ids, the last names it looks up
    /// (CALLYEINGESE, ESEABLEESE, ABLEABLEESE: ids 796, 526, 226 modulo 1000), and others.
    pub fn customers(w: u64, d: u64) -> Vec<u64> {
        let mut ids: BTreeSet<u64> = (1..=10).collect();
        ids.extend([226, 1226, 2226, 526, 1526, 2526, 796, 1796, 2796]);
        ids.extend([2570, 2903, 1213, 1428, 2188]);
        ids.extend((0..15).map(|k| 1 + (k * 379 + d * 31 + w * 7) % 3000));
        ids.into_iter().collect()
    }

    /// Orders of each district: delivered ones (up to 2100) and new ones (2101 on), among them
    /// 2981..3000 for the stock-level query.
    pub fn orders() -> Vec<u64> {
        (1..=8).chain(2096..=2105).chain(2981..=3000).collect()
    }

    /// The customer of order (w, d, o): the run part's (3, 1, 2101) is 2903's, and customer
    /// 2188 of (3, 8) has orders 8, 2100 and 2990.
    pub fn order_customer(w: u64, d: u64, o: u64) -> u64 {
        match (w, d, o) {
            (3, 1, 2101) => 2903,
            (3, 8, 8 | 2100 | 2990) => 2188,
            _ => {
                let cs = customers(w, d);
                cs[(key(&[w, d, o, 1]) % cs.len() as u64) as usize]
            }
        }
    }

    pub fn cents(x: u64) -> String {
        format!("{}.{:02}", x / 100, x % 100)
    }
}

/// `INSERT INTO table (cols) VALUES ...` of at most 200 rows each.
fn inserts(table: &str, cols: &str, rows: &[String]) -> Vec<String> {
    rows.chunks(200)
        .map(|c| format!("INSERT INTO {table} ({cols}) VALUES {}", c.join(",")))
        .collect()
}

/// The load part: warehouses 2..4 with their districts, customers, history, orders, new orders,
/// order lines and stock; the districts 4..10 of warehouse 1 (prepare loads 1..3); the items.
/// Parents before children, so that the prepare part's FOREIGN KEYs hold row by row. Dates are
/// literals; everything follows from fixed arithmetic and [`rows::h`].
fn load() -> Vec<String> {
    use rows::*;
    const WAREHOUSES: std::ops::RangeInclusive<u64> = 2..=4;
    const LOADED: &str = "'2026-12-01 09:00:00'";
    let items = items();
    let mut out = Vec::new();
    let rows: Vec<String> = items
        .iter()
        .map(|&i| {
            format!(
                "({i},{},'item-{i}-{}',{},'data-{}')",
                1 + h(i) % 10000,
                word(i, 6),
                cents(100 + key(&[i, 2]) % 9900),
                word(i + 1_000_000, 20)
            )
        })
        .collect();
    out.extend(inserts(
        "item1",
        "i_id, i_im_id, i_name, i_price, i_data",
        &rows,
    ));
    let rows: Vec<String> = WAREHOUSES
        .map(|w| {
            format!(
                "({w},'name-{}','street1-{}','street2-{}','city-{}','{}','zip-{:05}',0.{:02},300000)",
                word(w, 5),
                word(w + 10, 10),
                word(w + 20, 10),
                word(w + 30, 10),
                word(w + 40, 2),
                h(w) % 100000,
                h(w + 50) % 20
            )
        })
        .collect();
    out.extend(inserts(
        "warehouse1",
        "w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax, w_ytd",
        &rows,
    ));
    let districts: Vec<(u64, u64)> = (4..=10)
        .map(|d| (1, d))
        .chain(WAREHOUSES.flat_map(|w| (1..=10).map(move |d| (w, d))))
        .collect();
    let rows: Vec<String> = districts
        .iter()
        .map(|&(w, d)| {
            let k = key(&[w, d]);
            format!(
                "({d},{w},'name-{}','street1-{}','street2-{}','city-{}','{}','zip-{:05}',0.{:02},30000,3001)",
                word(k, 5),
                word(k + 1, 10),
                word(k + 2, 10),
                word(k + 3, 10),
                word(k + 4, 2),
                k % 100000,
                k % 20
            )
        })
        .collect();
    out.extend(inserts(
        "district1",
        "d_id, d_w_id, d_name, d_street_1, d_street_2, d_city, d_state, d_zip, d_tax, d_ytd, d_next_o_id",
        &rows,
    ));
    let mut customers = Vec::new();
    let mut history = Vec::new();
    for w in WAREHOUSES {
        for d in 1..=10 {
            for c in rows::customers(w, d) {
                let k = key(&[w, d, c]);
                customers.push(format!(
                    "({c},{d},{w},'{}','OE','{}','street1-{}','street2-{}','city-{}','{}','zip-{:05}','{:016}',{LOADED},'{}',50000,0.{:02},-10,10,1,0,'{}')",
                    first_name(c),
                    last_name((c - 1) % 1000),
                    word(k, 10),
                    word(k + 1, 10),
                    word(k + 2, 10),
                    word(k + 3, 2),
                    k % 100000,
                    k % 10_000_000_000_000_000,
                    if k.is_multiple_of(10) { "BC" } else { "GC" },
                    k % 50,
                    filler(k, 300 + (k % 200) as usize)
                ));
                history.push(format!(
                    "({c},{d},{w},{d},{w},{LOADED},10,'{}')",
                    filler(k + 5, 12 + (k % 12) as usize)
                ));
            }
        }
    }
    out.extend(inserts(
        "customer1",
        "c_id, c_d_id, c_w_id, c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance, c_ytd_payment, c_payment_cnt, c_delivery_cnt, c_data",
        &customers,
    ));
    out.extend(inserts(
        "history1",
        "h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data",
        &history,
    ));
    let (mut orders, mut new_orders, mut lines) = (Vec::new(), Vec::new(), Vec::new());
    for w in WAREHOUSES {
        for d in 1..=10 {
            for o in rows::orders() {
                let k = key(&[w, d, o]);
                let delivered = o <= 2100;
                let count = 5 + k % 11;
                orders.push(format!(
                    "({o},{d},{w},{},{LOADED},{},{count},1)",
                    order_customer(w, d, o),
                    if delivered {
                        (1 + k % 10).to_string()
                    } else {
                        "NULL".to_string()
                    }
                ));
                if !delivered {
                    new_orders.push(format!("({o},{d},{w})"));
                }
                for n in 1..=count {
                    let kl = key(&[k, n]);
                    let (when, amount) = if delivered {
                        (LOADED.to_string(), "0.00".to_string())
                    } else {
                        ("NULL".to_string(), cents(1 + kl % 999_999))
                    };
                    lines.push(format!(
                        "({o},{d},{w},{n},{},{w},{when},5,{amount},'{}')",
                        items[(kl % items.len() as u64) as usize],
                        filler(kl, 24)
                    ));
                }
            }
        }
    }
    out.extend(inserts(
        "orders1",
        "o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local",
        &orders,
    ));
    out.extend(inserts(
        "new_orders1",
        "no_o_id, no_d_id, no_w_id",
        &new_orders,
    ));
    let mut stock = Vec::new();
    for w in WAREHOUSES {
        for &i in &items {
            let k = key(&[w, i, 3]);
            let dists: Vec<String> = (0..10)
                .map(|j| format!("'{}'", filler(k + j, 24)))
                .collect();
            // Quantities 5..54: some below the stock-level threshold (12), none 85 (the
            // run part's new quantity, so that its UPDATE changes a row).
            stock.push(format!(
                "({i},{w},{},{},0,0,0,'{}')",
                5 + k % 50,
                dists.join(","),
                word(k, 26 + (k % 25) as usize)
            ));
        }
    }
    out.extend(inserts(
        "stock1",
        "s_i_id, s_w_id, s_quantity, s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10, s_ytd, s_order_cnt, s_remote_cnt, s_data",
        &stock,
    ));
    out.extend(inserts(
        "order_line1",
        "ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info",
        &lines,
    ));
    out
}

async fn close(s: Conn, r: Conn) {
    let _ = s.disconnect().await;
    r.disconnect().await.unwrap();
}

/// Whether the reference found what the run part's statement looks for: a row that is not
/// all NULL or zero, or a changed row.
fn found(o: &Outcome) -> bool {
    match o {
        Ok(a) if a.columns.is_empty() => a.affected > 0,
        Ok(a) => a.rows.first().is_some_and(|r| {
            r.iter()
                .any(|c| c.as_deref().is_some_and(|v| v != "0" && !v.is_empty()))
        }),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sysbench_tpcc_statement_answers_as_on_one_mariadb() {
    let (cluster, shoal) = shoal_tests::two_servers_and_shoal(
        &["a", "b", REF_DB],
        shoal_tests::APP_USER,
        &layout(),
        "tpcc_replay",
    )
    .await;
    let mut t = Replay {
        shoal,
        cluster,
        mismatches: Vec::new(),
        compared: 0,
        refused: 0,
    };

    // 1. prepare, on empty tables.
    let (mut s, mut r) = t.sessions().await;
    for (n, sql) in part("prepare").into_iter().enumerate() {
        let _ = t
            .replay(&format!("prepare {}", n + 1), &mut s, &mut r, sql)
            .await;
    }
    close(s, r).await;
    t.compare_tables("prepare").await;

    // 2. load.
    let (mut s, mut r) = t.sessions().await;
    for (n, sql) in load().iter().enumerate() {
        let reference = t
            .replay(&format!("load {}", n + 1), &mut s, &mut r, sql)
            .await;
        if let Err(e) = reference {
            panic!("the load fails on the reference: {sql:.300}: {e:?}");
        }
    }
    close(s, r).await;
    t.compare_tables("load").await;

    // 3. run, in one session.
    let mut gaps = Vec::new();
    let (mut s, mut r) = t.sessions().await;
    for (n, sql) in part("run").into_iter().enumerate() {
        let reference = t
            .replay(&format!("run {}", n + 1), &mut s, &mut r, sql)
            .await;
        let looks = ["SELECT", "UPDATE", "DELETE", "INSERT"]
            .iter()
            .any(|k| sql.starts_with(k));
        if looks && !found(&reference) {
            gaps.push(format!("run {}: {sql}\n    {}", n + 1, show(&reference)));
        }
    }
    close(s, r).await;
    assert!(
        gaps.is_empty(),
        "the load leaves the run part's statements without rows to find on the reference:\n{}",
        gaps.join("\n")
    );

    // 4. check.
    let (mut s, mut r) = t.sessions().await;
    for (n, sql) in part("check").into_iter().enumerate() {
        let _ = t
            .replay(&format!("check {}", n + 1), &mut s, &mut r, sql)
            .await;
    }
    close(s, r).await;
    t.compare_tables("run and check").await;

    println!(
        "{} statements compared, {} refused as expected, {} mismatches",
        t.compared,
        t.refused,
        t.mismatches.len()
    );
    assert!(
        t.mismatches.is_empty(),
        "{} mismatches between Shoal and the reference:\n{}",
        t.mismatches.len(),
        t.mismatches.join("\n")
    );
}
