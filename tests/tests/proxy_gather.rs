//! SELECTs refused across shards before issue 49's gather, answered on one datanode over
//! copies of their tables (`RoutePlan::Gather`), end to end over real MariaDB and compared
//! with one MariaDB holding the same rows: a join of tables sharded on different keys, a LEFT
//! JOIN preserving a global table against a sharded one (NULL and empty sides), UNION and
//! UNION ALL, a LIMITed derived table joined with its ER child, COUNT(DISTINCT), GROUP_CONCAT
//! (ORDER BY, SEPARATOR, truncation at group_concat_max_len with its warning), a correlated
//! EXISTS, window functions, values of every kind copied exactly (FLOAT, TIMESTAMP, zero
//! dates, binary, `_bin` and `_ci` strings), a transaction's own uncommitted rows, a prepared
//! statement, EXPLAIN ROUTE, what stays refused, and the cap.
//!
//! Layout: the demo's (`orders` sharded by `user_id` mod 4 over two servers, `order_item` its
//! ER child, `country` global), `pay` sharded by `order_id` with the same rule (joined on
//! `pay.order_id = orders.id`, not co-located), and `kv`, unlisted on the default datanode.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shoal_tests::compared::{Compared, rows_text as cells};
use shoal_tests::server_error;

const DBS: [&str; 2] = ["a", "b"];
const REF_DB: &str = "gather_ref";

const PAY: &str = "      - { name: pay, type: sharded, shard_key: order_id, rule: by_user, \
                   datanodes: \"dn1, dn2, dn3, dn4\" }\n";

const TABLES: [&str; 5] = [
    "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, \
     note VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci, \
     tag VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, amount DECIMAL(10,2), \
     raw VARBINARY(8), at DATETIME(6), ratio FLOAT, seen TIMESTAMP(3) NULL, \
     country CHAR(2)) ENGINE=InnoDB",
    "CREATE TABLE order_item (id INT PRIMARY KEY, user_id INT NOT NULL, sku VARCHAR(10), \
     qty INT) ENGINE=InnoDB",
    "CREATE TABLE pay (id INT PRIMARY KEY, order_id INT NOT NULL, paid DECIMAL(10,2), \
     kind ENUM('card','cash') NULL, day DATE) ENGINE=InnoDB",
    "CREATE TABLE country (code CHAR(2) PRIMARY KEY, name VARCHAR(30) CHARACTER SET latin1 \
     COLLATE latin1_swedish_ci) ENGINE=InnoDB",
    "CREATE TABLE kv (k INT PRIMARY KEY, v VARCHAR(20) CHARACTER SET utf8mb4 \
     COLLATE utf8mb4_bin, d DATE) ENGINE=InnoDB",
];

const ROWS: [&str; 5] = [
    "INSERT INTO orders VALUES \
     (1, 1, 'abc', 'abc', 1.50, X'0061', '2024-01-01 10:00:00.000001', 1.1234567, \
      '2024-03-31 01:30:00.125', 'FR'), \
     (2, 2, 'ABC ', 'ABC', 2.00, X'6100', '2024-01-02 10:00:00', 0.1, NULL, 'DE'), \
     (3, 3, 'x\u{1F600}', 'abc ', 3.25, X'61', '2024-01-03 00:00:00.5', NULL, \
      '2024-10-27 02:30:00', 'FR'), \
     (4, 4, NULL, NULL, NULL, NULL, NULL, 3.4028e38, NULL, NULL), \
     (5, 5, 'Stra\u{df}e', 'x\u{1F600}', 7.00, X'', '2024-01-01 10:00:00', -2.5, NULL, 'XX'), \
     (6, 6, 'zz', 'zz', 2.00, X'FF', '2024-02-01 00:00:00', 0.25, NULL, 'DE'), \
     (7, 1, 'abc', 'q', 5.00, NULL, NULL, NULL, NULL, 'FR')",
    "INSERT INTO order_item VALUES (1, 1, 'a', 1), (2, 1, 'b', 2), (3, 2, 'a', 5), \
     (4, 3, 'c', 1), (5, 6, 'a', 2), (6, 6, 'd', NULL)",
    "INSERT INTO pay VALUES (1, 1, 1.50, 'card', '2024-01-01'), (2, 1, 0.50, 'cash', NULL), \
     (3, 2, 2.00, NULL, '0000-00-00'), (4, 5, 7.00, 'card', '2024-01-05'), \
     (5, 9, 1.00, 'cash', '2024-02-01')",
    "INSERT INTO country VALUES ('FR', 'France'), ('DE', 'Deutschland'), ('ES', 'Espa\u{f1}a'), \
     ('IT', NULL)",
    "INSERT INTO kv VALUES (1, 'abc', '2024-01-01'), (2, 'ABC', NULL), (3, 'abc ', '2024-01-03'), \
     (5, NULL, '2024-01-01'), (6, 'zz', '2024-02-01')",
];

/// Shoal over the demo layout with `pay`, and `server` (a `server:` section or nothing), beside
/// one MariaDB holding the same rows.
async fn start(server: &str) -> Compared {
    let layout = format!("{}{PAY}{server}", shoal_tests::demo_layout_yaml(1));
    // Zero dates stored as they are.
    let session = ["SET SESSION sql_mode = ''"];
    let statements: Vec<&str> = TABLES.iter().chain(&ROWS).copied().collect();
    Compared::start(&DBS, &layout, "gather", REF_DB, &session, &statements).await
}

/// The statement's answer through Shoal and from one MariaDB: equal (in the order returned:
/// every statement here fixes its order), with the same column names, and returned.
async fn same(shoal: &mut Conn, reference: &mut Conn, sql: &str) -> Vec<Vec<String>> {
    let want: Vec<Row> = reference
        .query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let got: Vec<Row> = shoal
        .query(sql)
        .await
        .unwrap_or_else(|e| panic!("through Shoal: {sql}: {e}"));
    let names = |rows: &[Row]| {
        rows.first().map(|r| {
            r.columns_ref()
                .iter()
                .map(|c| (c.name_str().into_owned(), c.table_str().into_owned()))
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(names(&got), names(&want), "column names of {sql}");
    let (got, want) = (cells(got), cells(want));
    assert_eq!(got, want, "{sql}");
    got
}

/// Each shape the planner refused across shards (1235) is answered as one MariaDB answers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_shard_selects_answer_as_one_mariadb() {
    let s = start("").await;
    let mut c = s.client().await;
    let mut r = s.reference().await;
    let statements = [
        // Tables sharded on different keys, joined off their keys.
        "SELECT o.id, o.note, p.id, p.paid, p.kind, p.day FROM orders o \
         JOIN pay p ON p.order_id = o.id ORDER BY p.id",
        "SELECT orders.id, SUM(pay.paid) FROM orders, pay WHERE pay.order_id = orders.id \
         GROUP BY orders.id ORDER BY orders.id",
        // A global table preserved against a sharded one: each country once, NULL-extended
        // where no order matches (IT, ES), the sharded side's NULLs kept.
        "SELECT c.code, c.name, o.id, o.note FROM country c LEFT JOIN orders o \
         ON o.country = c.code ORDER BY c.code, o.id",
        "SELECT c.code, COUNT(o.id) FROM country c LEFT JOIN orders o ON o.country = c.code \
         AND o.amount > 100 GROUP BY c.code ORDER BY c.code",
        // Conditions pushed into the copies' fetches (one table's WHERE conjuncts, an ON
        // conjunct of the NULL-extended table), and kept where they would change the answer
        // (a WHERE on the NULL-extended side, an OR across tables).
        "SELECT o.id, p.id FROM orders o JOIN pay p ON p.order_id = o.id \
         WHERE o.user_id IN (1, 2) AND p.paid > 0.5 AND (p.kind = 'card' OR p.kind IS NULL) \
         ORDER BY p.id",
        "SELECT c.code, o.id FROM country c LEFT JOIN orders o ON o.country = c.code \
         AND o.note LIKE 'a%' WHERE o.id IS NULL OR c.code = 'FR' ORDER BY c.code, o.id",
        "SELECT c.code, o.id FROM country c LEFT JOIN orders o ON o.country = c.code \
         WHERE o.id IS NULL ORDER BY c.code",
        "SELECT o.id, p.id FROM orders o LEFT JOIN pay p ON p.order_id = o.id \
         AND p.day BETWEEN '2024-01-01' AND '2024-01-31' WHERE o.id <> 3 ORDER BY o.id, p.id",
        // A sharded table with an unlisted one.
        "SELECT o.id, kv.v FROM orders o LEFT JOIN kv ON kv.v = o.tag ORDER BY o.id, kv.k",
        "SELECT o.id, kv.k FROM orders o JOIN kv ON kv.v = o.note ORDER BY o.id, kv.k",
        // UNION (a distinct by MariaDB's comparison) and UNION ALL. (Which of two values
        // equal under `_ci` a UNION keeps depends on the order it reads them: unspecified.)
        "SELECT user_id FROM orders UNION SELECT order_id FROM pay ORDER BY 1",
        "SELECT country FROM orders UNION SELECT code FROM country ORDER BY 1",
        "SELECT tag, HEX(tag) FROM orders UNION ALL SELECT v, HEX(v) FROM kv ORDER BY 1, 2",
        // A LIMITed derived table joined with its child (SQLAlchemy joinedload + limit).
        "SELECT anon_1.id, anon_1.user_id, i.sku FROM (SELECT id, user_id FROM orders \
         ORDER BY id LIMIT 3) AS anon_1 LEFT OUTER JOIN order_item i \
         ON anon_1.user_id = i.user_id ORDER BY anon_1.id, i.id",
        "WITH big AS (SELECT user_id, SUM(amount) s FROM orders GROUP BY user_id) \
         SELECT user_id, s FROM big WHERE s > 1 ORDER BY user_id",
        // Aggregates that do not merge from per-shard partials.
        "SELECT COUNT(DISTINCT note), COUNT(DISTINCT tag), SUM(DISTINCT amount), \
         AVG(DISTINCT amount) FROM orders",
        "SELECT country, GROUP_CONCAT(note ORDER BY id DESC SEPARATOR '|') FROM orders \
         GROUP BY country ORDER BY country",
        // Correlated subqueries.
        "SELECT id FROM orders o WHERE EXISTS (SELECT 1 FROM pay p WHERE p.order_id = o.id) \
         ORDER BY id",
        "SELECT id FROM orders o WHERE NOT EXISTS (SELECT 1 FROM pay p WHERE p.order_id = o.id) \
         ORDER BY id",
        "SELECT id, (SELECT MAX(paid) FROM pay WHERE pay.order_id = orders.id) m FROM orders \
         ORDER BY id",
        // Window functions.
        "SELECT id, user_id, ROW_NUMBER() OVER (PARTITION BY country ORDER BY id) FROM orders \
         ORDER BY id",
        // Every value copied as it was: FLOAT, TIMESTAMP (one in a DST fall-back hour),
        // DATETIME(6), binary, zero dates, ENUM.
        "SELECT o.id, o.ratio, o.seen, o.at, o.raw, p.day, p.kind FROM orders o \
         LEFT JOIN pay p ON p.order_id = o.id ORDER BY o.id, p.id",
    ];
    for sql in statements {
        same(&mut c, &mut r, sql).await;
    }
    // More rows than one INSERT batch holds (500 rows): copied in several.
    let big = "CREATE TABLE big (k INT PRIMARY KEY, v VARCHAR(40)) ENGINE=InnoDB";
    let rows: Vec<String> = (1..=1800)
        .map(|k| format!("({k}, '{}')", "x".repeat(k % 37)))
        .collect();
    let fill = format!("INSERT INTO big VALUES {}", rows.join(", "));
    for conn in [&mut c, &mut r] {
        conn.query_drop(big).await.unwrap();
        conn.query_drop(&fill).await.unwrap();
    }
    same(
        &mut c,
        &mut r,
        "SELECT o.id, COUNT(*), SUM(LENGTH(b.v)), MAX(b.k) FROM orders o JOIN big b \
         ON b.k % 7 = o.id GROUP BY o.id ORDER BY o.id",
    )
    .await;
    // In another time zone, where 2024-10-27 02:30 happens twice.
    for conn in [&mut c, &mut r] {
        conn.query_drop("SET time_zone = '+05:00'").await.unwrap();
    }
    same(
        &mut c,
        &mut r,
        "SELECT o.id, o.seen, UNIX_TIMESTAMP(o.seen) FROM orders o JOIN pay p \
         ON p.order_id = o.id ORDER BY o.id, p.id",
    )
    .await;
    // Another character_set_results: the copies hold the stored strings all the same.
    for conn in [&mut c, &mut r] {
        conn.query_drop("SET NAMES latin1").await.unwrap();
    }
    same(
        &mut c,
        &mut r,
        "SELECT c.code, c.name, o.note, o.tag FROM country c LEFT JOIN orders o \
         ON o.country = c.code ORDER BY c.code, o.id",
    )
    .await;
    for conn in [&mut c, &mut r] {
        conn.query_drop("SET NAMES utf8mb4").await.unwrap();
    }
    // GROUP_CONCAT cut at group_concat_max_len, with MariaDB's warning.
    for conn in [&mut c, &mut r] {
        conn.query_drop("SET SESSION group_concat_max_len = 5")
            .await
            .unwrap();
    }
    let sql = "SELECT GROUP_CONCAT(o.note ORDER BY o.id) FROM orders o JOIN pay p \
               ON p.order_id = o.id";
    same(&mut c, &mut r, sql).await;
    assert_eq!(c.get_warnings(), r.get_warnings(), "warnings of {sql}");
    assert_eq!(c.get_warnings(), 1, "the truncation's warning");
}

/// EXPLAIN ROUTE shows each copy with where it is read, and the statement over the copies;
/// what stays refused is refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gathered_plans_are_explained_and_locking_reads_stay_refused() {
    let s = start("").await;
    let mut c = s.client().await;
    let rows: Vec<(String, String)> = c
        .query("EXPLAIN ROUTE SELECT o.id FROM orders o JOIN pay p ON p.order_id = o.id")
        .await
        .unwrap();
    let text = format!("{rows:?}");
    assert!(rows[0].0.contains("copy shoal_g1"), "{text}");
    assert!(rows.iter().any(|r| r.0.contains("copy shoal_g2")), "{text}");
    let last = rows.last().unwrap();
    assert!(last.0.starts_with("(gather on"), "{text}");
    assert_eq!(
        last.1,
        "SELECT o.id FROM shoal_g1 o JOIN shoal_g2 p ON p.order_id = o.id"
    );
    for (sql, what) in [
        (
            "SELECT o.id FROM orders o JOIN pay p ON p.order_id = o.id FOR UPDATE",
            "FOR UPDATE",
        ),
        (
            "SELECT o.id FROM orders o JOIN pay p ON p.order_id = o.id LOCK IN SHARE MODE",
            "LOCK IN SHARE MODE",
        ),
        (
            "SELECT o.id, CONNECTION_ID() FROM orders o JOIN pay p ON p.order_id = o.id",
            "CONNECTION_ID",
        ),
    ] {
        let (code, _, msg) = server_error(c.query_drop(sql).await);
        assert_eq!(code, 1235, "{sql}: {msg}");
        assert!(msg.contains(what), "{sql}: {msg}");
    }
    // Writes reading across shards stay refused.
    let (code, _, _) = server_error(
        c.query_drop("UPDATE orders o JOIN pay p ON p.order_id = o.id SET o.amount = 0")
            .await,
    );
    assert_eq!(code, 1235);
}

/// Inside a transaction the copies hold its own uncommitted rows; the transaction commits
/// (or rolls back) as before, the copies having been no part of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gathered_reads_see_the_transactions_own_rows() {
    let s = start("").await;
    let mut c = s.client().await;
    let sql = "SELECT o.id, p.id FROM orders o JOIN pay p ON p.order_id = o.id ORDER BY p.id";
    let before: Vec<(i64, i64)> = c.query(sql).await.unwrap();
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("INSERT INTO orders (id, user_id, note) VALUES (20, 3, 'new')")
        .await
        .unwrap();
    c.query_drop("INSERT INTO pay (id, order_id, paid) VALUES (20, 20, 1.00)")
        .await
        .unwrap();
    let inside: Vec<(i64, i64)> = c.query(sql).await.unwrap();
    assert_eq!(inside.len(), before.len() + 1, "{inside:?}");
    assert!(inside.contains(&(20, 20)), "{inside:?}");
    // Another session does not see them.
    let mut other = s.client().await;
    let outside: Vec<(i64, i64)> = other.query(sql).await.unwrap();
    assert_eq!(outside, before);
    c.query_drop("ROLLBACK").await.unwrap();
    let after: Vec<(i64, i64)> = c.query(sql).await.unwrap();
    assert_eq!(after, before);
    // Committed, the rows are there for everyone.
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("INSERT INTO orders (id, user_id, note) VALUES (21, 2, 'new')")
        .await
        .unwrap();
    c.query_drop("INSERT INTO pay (id, order_id, paid) VALUES (21, 21, 1.00)")
        .await
        .unwrap();
    let inside: Vec<(i64, i64)> = c.query(sql).await.unwrap();
    assert!(inside.contains(&(21, 21)), "{inside:?}");
    // Two branches on two servers (user 2's order, order 21's payment): committed through XA
    // as before the gathered read.
    c.query_drop("COMMIT").await.unwrap();
    let outside: Vec<(i64, i64)> = other.query(sql).await.unwrap();
    assert!(outside.contains(&(21, 21)), "{outside:?}");
    // No statement on a copy reached a binary log (the copies' connection runs in ROW format,
    // where temporary tables are not logged; and it is never a transaction's branch).
    let mut logged_orders = false;
    for server in 0..2 {
        let mut admin = Conn::new(s.cluster.opts(server, None)).await.unwrap();
        let logs: Vec<Row> = admin.query("SHOW BINARY LOGS").await.unwrap_or_default();
        for log in logs {
            let file: String = log.get(0).unwrap();
            let events: Vec<Row> = admin
                .query(format!("SHOW BINLOG EVENTS IN '{file}'"))
                .await
                .unwrap();
            for e in events {
                let info: String = e.get("Info").unwrap_or_default();
                assert!(!info.contains("shoal_g"), "server {server} logged: {info}");
                logged_orders |= info.contains("orders");
            }
        }
    }
    assert!(
        logged_orders,
        "the binary logs hold the transaction's writes (they are on)"
    );
}

/// A prepared statement with parameters is gathered at each execute, in the binary protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_are_gathered_at_each_execute() {
    let s = start("").await;
    let mut c = s.client().await;
    let mut r = s.reference().await;
    let sql = "SELECT o.id, o.note, p.paid, p.day FROM orders o JOIN pay p \
               ON p.order_id = o.id WHERE p.paid > ? ORDER BY p.id";
    for param in [0.0f64, 1.0, 100.0] {
        let want: Vec<Row> = r.exec(sql, (param,)).await.unwrap();
        let got: Vec<Row> = c
            .exec(sql, (param,))
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", s.shoal.log()));
        assert_eq!(cells(got), cells(want), "{sql} with {param}");
    }
}

/// Past `server.gather_max_rows` the statement is refused naming the setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_past_the_cap_are_refused_naming_it() {
    let s = start("server:\n  gather_max_rows: 5\n").await;
    let mut c = s.client().await;
    // 7 orders and 5 payments: 12 rows (the payments bound to 7 order ids: still 12).
    let (code, _, msg) = server_error(
        c.query_drop("SELECT o.id FROM orders o JOIN pay p ON p.order_id = o.id")
            .await,
    );
    assert_eq!(code, 1235, "{msg}");
    assert!(msg.contains("server.gather_max_rows"), "{msg}");
    // Conditions on one table narrow its copy (orders of user 1: 2 rows), and the inner join's
    // equality binds the other's read to their ids (their 2 payments of 5): 4 rows.
    let rows: Vec<(i64, i64)> = c
        .query(
            "SELECT o.id, p.id FROM orders o JOIN pay p ON p.order_id = o.id \
             WHERE o.user_id = 1 ORDER BY p.id",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", s.shoal.log()));
    assert_eq!(rows, vec![(1, 1), (1, 2)]);
    // The session goes on; a smaller statement is gathered.
    let rows: Vec<(i64, String)> = c
        .query("SELECT p.id, k.v FROM pay p JOIN kv k ON k.k = p.id WHERE p.id < 3 ORDER BY p.id")
        .await
        .unwrap();
    assert_eq!(rows, vec![(1, "abc".to_string()), (2, "ABC".to_string())]);
}

/// A copy has its table's keys (so that MariaDB plans over it as over the table); a unique
/// key each shard enforces over its own rows only can repeat across shards, and such rows are
/// all in the answer: the copy is made again with the unique keys as plain ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_repeating_a_unique_key_across_shards_are_all_gathered() {
    let s = start("").await;
    let mut c = s.client().await;
    // `pay`'s primary key is `id`, its shard key `order_id`: orders 1 and 2 are on two shards.
    c.query_drop("INSERT INTO pay VALUES (10, 1, 1.25, NULL, NULL), (10, 2, 2.75, NULL, NULL)")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", s.shoal.log()));
    let sql = "SELECT o.id, p.id, p.paid FROM orders o JOIN pay p ON p.order_id = o.id \
               WHERE p.id = 10 ORDER BY o.id";
    let rows: Vec<(i64, i64, String)> = c
        .query(sql)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", s.shoal.log()));
    assert_eq!(
        rows,
        vec![(1, 10, "1.25".to_string()), (2, 10, "2.75".to_string())]
    );
    // Every payment, as the datanodes hold them: the 5 loaded and the 2 above.
    let n: Option<i64> = c
        .query_first("SELECT COUNT(*) FROM pay p LEFT JOIN orders o ON o.id = p.order_id")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", s.shoal.log()));
    assert_eq!(n, Some(7));
}
