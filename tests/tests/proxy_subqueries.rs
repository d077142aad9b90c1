//! Uncorrelated subqueries whose rows live on other shards, run first and bound as values
//! (issue 49), end to end over real MariaDB and compared with one MariaDB holding the same rows:
//! strings under `_ci` and `_bin` collations on either side (case, trailing spaces, 4-byte
//! UTF-8), NOT IN with a NULL in the set and with an empty set, a NULL on the outer side,
//! DECIMAL against INT, DATETIME(6), binary strings, EXISTS, scalar subqueries (none, one and
//! several rows), a prepared statement with parameters in both parts, a read inside a
//! transaction seeing the transaction's own rows, EXPLAIN ROUTE's two steps, and the cap.
//!
//! Layout: the demo's (`orders` sharded by `user_id` mod 4 over two servers), and `kv`, an
//! unlisted table on the default datanode.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shoal_tests::compared::{Compared, rows_text};
use shoal_tests::server_error;

const DBS: [&str; 2] = ["a", "b"];
const REF_DB: &str = "subq_ref";

const TABLES: [&str; 2] = [
    "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, \
     note VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci, \
     tag VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, amount DECIMAL(10,2), \
     raw VARBINARY(8), at DATETIME(6), ratio DOUBLE) ENGINE=InnoDB",
    "CREATE TABLE kv (k INT PRIMARY KEY, name VARCHAR(20) CHARACTER SET utf8mb4 \
     COLLATE utf8mb4_bin, cname VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci, \
     amt DECIMAL(12,3), raw VARBINARY(8), at DATETIME(6)) ENGINE=InnoDB",
];

const ROWS: [&str; 2] = [
    "INSERT INTO orders VALUES \
     (1, 1, 'abc', 'abc', 1.50, X'0061', '2024-01-01 10:00:00.000001', 0.5), \
     (2, 2, 'ABC ', 'ABC', 2.00, X'6100', '2024-01-02 10:00:00', 1.5), \
     (3, 3, 'x\u{1F600}', 'abc ', 3.25, X'61', '2024-01-03 00:00:00.5', NULL), \
     (4, 4, NULL, NULL, NULL, NULL, NULL, NULL), \
     (5, 5, 'Stra\u{df}e', 'x\u{1F600}', 7.00, X'', '2024-01-01 10:00:00', 2.5), \
     (6, 6, 'zz', 'zz', 2.00, X'FF', '2024-02-01 00:00:00', 0.25)",
    "INSERT INTO kv VALUES \
     (1, 'abc', 'abc', 1.500, X'0061', '2024-01-01 10:00:00.000001'), \
     (2, 'ABC', 'ABC', 2.000, X'61', '2024-01-01 10:00:00'), \
     (3, 'abc ', 'abc  ', 3.250, X'6120', '2024-01-03 00:00:00.500000'), \
     (4, NULL, NULL, NULL, NULL, NULL), \
     (5, 'x\u{1F600}', 'X\u{1F600}', 7.000, X'', '2024-01-03 00:00:00'), \
     (7, 'Strasse', 'strasse', 0.001, X'FF00', '2024-02-01 00:00:00'), \
     (8, 'q', 'Q', 9.999, X'6100', '2023-12-31 23:59:59')",
];

/// Shoal over the demo layout and `server` (a `server:` section or nothing), beside one
/// MariaDB holding the same rows.
async fn start(server: &str) -> Compared {
    let layout = format!("{}{server}", shoal_tests::demo_layout_yaml(1));
    let statements: Vec<&str> = TABLES.iter().chain(&ROWS).copied().collect();
    Compared::start(&DBS, &layout, "subqueries", REF_DB, &[], &statements).await
}

/// Rows as text, sorted: the statements fix no order.
fn cells(rows: Vec<Row>) -> Vec<Vec<String>> {
    let mut out = rows_text(rows);
    out.sort();
    out
}

/// The statement's answer through Shoal and from one MariaDB: equal, and returned.
async fn same(shoal: &mut Conn, reference: &mut Conn, sql: &str) -> Vec<Vec<String>> {
    let want = cells(
        reference
            .query(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}")),
    );
    let got = cells(
        shoal
            .query(sql)
            .await
            .unwrap_or_else(|e| panic!("through Shoal: {sql}: {e}")),
    );
    assert_eq!(got, want, "{sql}");
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subqueries_over_other_shards_answer_as_one_mariadb() {
    let s = start("").await;
    let mut c = s.client().await;
    let mut r = s.reference().await;
    let keys = |rows: &[Vec<String>]| rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>();
    // A `_bin` outer column against a `_ci` set: MariaDB compares under `_bin` (the column's
    // collation wins), trailing spaces padded, 4-byte characters compared as themselves.
    let bin_vs_ci = same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE name IN (SELECT note FROM orders)",
    )
    .await;
    assert_eq!(keys(&bin_vs_ci), ["1", "2", "3", "5"], "PAD SPACE");
    // A `_ci` outer column against a `_bin` set: `_bin` again.
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE cname IN (SELECT tag FROM orders)",
    )
    .await;
    // `_ci` against `_ci`: case and trailing spaces do not count.
    let ci = same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE cname IN (SELECT note FROM orders)",
    )
    .await;
    assert!(ci.len() >= 3, "{ci:?}");
    // NOT IN: a NULL in the set leaves no row; without it, the rest (not the NULL outer row);
    // over an empty set every row, the NULL one too; IN of an empty set none.
    let none = same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE name NOT IN (SELECT note FROM orders)",
    )
    .await;
    assert!(none.is_empty(), "{none:?}");
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE name NOT IN (SELECT note FROM orders WHERE note IS NOT NULL)",
    )
    .await;
    let all = same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE name NOT IN (SELECT note FROM orders WHERE id < 0)",
    )
    .await;
    assert_eq!(all.len(), 7);
    let empty = same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE name IN (SELECT note FROM orders WHERE id < 0)",
    )
    .await;
    assert!(empty.is_empty());
    let known = same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE (name IN (SELECT note FROM orders WHERE id < 0)) IS NOT NULL \
         AND (name NOT IN (SELECT note FROM orders WHERE id < 0)) IS NOT NULL",
    )
    .await;
    assert_eq!(
        known.len(),
        7,
        "a NULL outer value IN an empty set is false, not NULL"
    );
    // Numbers: DECIMAL against DECIMAL of another scale, INT against DECIMAL.
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE amt IN (SELECT amount FROM orders)",
    )
    .await;
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE k IN (SELECT amount FROM orders)",
    )
    .await;
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE k NOT IN (SELECT DISTINCT user_id FROM orders ORDER BY user_id)",
    )
    .await;
    // Binary strings (no padding), DATETIME(6).
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE raw IN (SELECT raw FROM orders)",
    )
    .await;
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE at IN (SELECT at FROM orders)",
    )
    .await;
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE name IN (SELECT raw FROM orders)",
    )
    .await;
    // EXISTS, scalar subqueries.
    same(&mut c, &mut r, "SELECT k FROM kv WHERE EXISTS (SELECT 1 FROM orders WHERE amount > 2) AND NOT EXISTS (SELECT 1 FROM orders WHERE amount > 1000)").await;
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE NOT EXISTS (SELECT 1 FROM orders WHERE amount > 2)",
    )
    .await;
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE amt > (SELECT AVG(amount) FROM orders)",
    )
    .await;
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE (SELECT MAX(at) FROM orders) > at",
    )
    .await;
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE name = (SELECT tag FROM orders WHERE id = 2)",
    )
    .await;
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE name <=> (SELECT tag FROM orders WHERE id = 999)",
    )
    .await;
    same(
        &mut c,
        &mut r,
        "SELECT k FROM kv WHERE (k, cname) IN (SELECT user_id, note FROM orders)",
    )
    .await;
    // The outer table sharded: its shard key IN (values) narrows it.
    same(
        &mut c,
        &mut r,
        "SELECT id, note FROM orders WHERE user_id IN (SELECT k FROM kv WHERE k < 3)",
    )
    .await;
    // More than one row for a scalar: MariaDB's error.
    let sql = "SELECT k FROM kv WHERE name = (SELECT tag FROM orders)";
    let (code, state, _) = server_error(c.query_drop(sql).await);
    assert_eq!((code, state.as_str()), (1242, "21000"));
    assert_eq!(server_error(r.query_drop(sql).await).0, 1242);
    // What cannot be written exactly is refused by name: DOUBLE, a string expression.
    for sql in [
        "SELECT k FROM kv WHERE amt IN (SELECT ratio FROM orders)",
        "SELECT k FROM kv WHERE name = (SELECT MIN(note) FROM orders)",
    ] {
        let (code, _, msg) = server_error(c.query_drop(sql).await);
        assert_eq!(code, 1235, "{sql}: {msg}");
        assert!(
            msg.contains("a subquery across shards returning"),
            "{sql}: {msg}"
        );
    }
    // EXPLAIN ROUTE: the subquery's scatter, then the outer statement.
    let plan: Vec<(String, String)> = c
        .query("EXPLAIN ROUTE SELECT k FROM kv WHERE name IN (SELECT note FROM orders)")
        .await
        .unwrap();
    let text = format!("{plan:?}");
    assert!(
        text.contains("(subquery 1)") && text.contains("values bound at execution"),
        "{text}"
    );
    assert!(
        plan.iter().filter(|(dn, _)| dn.starts_with("dn")).count() >= 4,
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subqueries_run_first_in_transactions_and_prepared_statements() {
    let s = start("").await;
    let mut c = s.client().await;
    let mut r = s.reference().await;
    // Inside a transaction the subquery reads the transaction's own rows.
    let sql = "SELECT k FROM kv WHERE cname IN (SELECT note FROM orders)";
    for conn in [&mut c, &mut r] {
        conn.query_drop("BEGIN").await.unwrap();
        conn.query_drop(
            "INSERT INTO orders (id, user_id, note) VALUES (20, 7, 'strasse'), (21, 8, 'q')",
        )
        .await
        .unwrap();
    }
    let inside = same(&mut c, &mut r, sql).await;
    assert!(inside.iter().any(|r| r[0] == "8"), "{inside:?}");
    for conn in [&mut c, &mut r] {
        conn.query_drop("ROLLBACK").await.unwrap();
    }
    let after = same(&mut c, &mut r, sql).await;
    assert!(!after.iter().any(|r| r[0] == "8"), "{after:?}");
    // Prepared, with parameters in the subquery and in the outer statement.
    let sql = "SELECT k, name, amt FROM kv WHERE cname IN (SELECT note FROM orders WHERE id > ?) \
               AND k > ?";
    for params in [(0, 0), (1, 1), (100, 0)] {
        let want: Vec<Row> = r.exec(sql, params).await.unwrap();
        let got: Vec<Row> = c
            .exec(sql, params)
            .await
            .unwrap_or_else(|e| panic!("{sql} {params:?}: {e}\n{}", s.shoal.log()));
        assert_eq!(cells(got), cells(want), "{sql} {params:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_values_past_the_cap_are_refused_naming_it() {
    let s = start("server:\n  subquery_max_values: 4\n").await;
    let mut c = s.client().await;
    // Six rows of one column: past four values.
    let (code, _, msg) = server_error(
        c.query_drop("SELECT k FROM kv WHERE k IN (SELECT user_id FROM orders)")
            .await,
    );
    assert_eq!(code, 1235, "{msg}");
    assert!(msg.contains("server.subquery_max_values"), "{msg}");
    // Within it: answered.
    let rows: Vec<i64> = c
        .query("SELECT k FROM kv WHERE k IN (SELECT user_id FROM orders WHERE id < 4) ORDER BY k")
        .await
        .unwrap();
    assert_eq!(rows, [1, 2, 3]);
}
