//! UPDATEs that assign the shard key, end to end over real MariaDB (issue 23): Django's
//! `save()` (every column assigned, the unchanged key included) runs in place; rows whose key
//! changes move to their new shard in one transaction; counts are MariaDB's (with and without
//! CLIENT_FOUND_ROWS, compared with a reference MariaDB holding the same rows); every row is
//! afterwards on exactly its shard (read on the datanodes' physical tables); a move inside a
//! client's transaction is undone by its ROLLBACK; concurrent moves neither lose nor duplicate
//! rows; the cases a move cannot do exactly are refused with their cause.
//!
//! The layout is the demo's (`shoal_tests::demo_layout_yaml`): `orders` sharded by `user_id`
//! mod 4 over dn1..dn4 (server 0 `a`, `b`, server 1 `a`, `b`), its ER child `order_item`,
//! `ledger` as 8 tables by quarter (`ledger_00` .. `ledger_07`, two per datanode).

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Row};
use shoal_bench::cluster::Cluster;
use shoal_tests::{ShoalProcess, server_error};

const DBS: [&str; 2] = ["a", "b"];
const REF_DB: &str = "keymove_ref";

const TABLES: [&str; 3] = [
    "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, amount DECIMAL(10,2), \
     note VARCHAR(40) CHARACTER SET utf8mb4, raw VARBINARY(8), at DATETIME(6), \
     total DECIMAL(12,2) AS (amount * 2) VIRTUAL) ENGINE=InnoDB",
    // Without a primary key: its rows cannot be re-read exactly after an update.
    "CREATE TABLE order_item (id INT, user_id INT NOT NULL, qty INT) ENGINE=InnoDB",
    "CREATE TABLE ledger (id INT PRIMARY KEY, day DATE NOT NULL, amount INT) ENGINE=InnoDB",
];

struct Setup {
    cluster: Cluster,
    shoal: ShoalProcess,
}

impl Setup {
    async fn start() -> Setup {
        let (cluster, shoal) = shoal_tests::two_servers_and_shoal(
            &DBS,
            shoal_tests::APP_USER,
            &shoal_tests::demo_layout_yaml(1),
            "keymove",
        )
        .await;
        let s = Setup { cluster, shoal };
        let mut admin = Conn::new(s.cluster.opts(0, None)).await.unwrap();
        admin
            .query_drop(format!("CREATE DATABASE {REF_DB}"))
            .await
            .unwrap();
        admin.disconnect().await.unwrap();
        let mut c = s.client(false).await;
        let mut r = s.reference(false).await;
        for ddl in TABLES {
            c.query_drop(ddl)
                .await
                .unwrap_or_else(|e| panic!("{ddl}: {e}\n{}", s.shoal.log()));
            r.query_drop(ddl).await.unwrap();
        }
        let rows: Vec<String> = (1..=8)
            .map(|i| {
                format!(
                    "({i}, {i}, {i}.25, 'n\u{e9}{i}''s', X'00FF{i:02}', '2024-0{}-0{} 10:00:00.{i}', \
                     NULL)",
                    1 + i % 9,
                    1 + i % 9
                )
            })
            .collect();
        let seed = [
            format!(
                "INSERT INTO orders (id, user_id, amount, note, raw, at, total) VALUES {}",
                rows.join(", ")
            )
            .replace(", NULL)", ")")
            .replace("raw, at, total)", "raw, at)"),
            "INSERT INTO order_item (id, user_id, qty) VALUES (1, 1, 1), (2, 2, 2)".to_string(),
            "INSERT INTO ledger (id, day, amount) VALUES (1, '2024-01-15', 10), \
             (2, '2024-05-15', 20), (3, '2025-08-01', 30)"
                .to_string(),
        ];
        for sql in seed {
            c.query_drop(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", s.shoal.log()));
            r.query_drop(&sql).await.unwrap();
        }
        s
    }

    async fn client(&self, found_rows: bool) -> Conn {
        let opts: Opts =
            OptsBuilder::from_opts(self.shoal.opts_as("app", "app-secret", Some("shop")))
                .client_found_rows(found_rows)
                .into();
        match Conn::new(opts).await {
            Ok(c) => c,
            Err(e) => panic!("connect through shoal: {e}\n{}", self.shoal.log()),
        }
    }

    /// One MariaDB holding the same logical rows.
    async fn reference(&self, found_rows: bool) -> Conn {
        let opts: Opts = OptsBuilder::from_opts(self.cluster.opts(0, Some(REF_DB)))
            .client_found_rows(found_rows)
            .into();
        Conn::new(opts).await.unwrap()
    }

    /// Every row of the physical tables `physical(shard)` as stored on each datanode:
    /// (shard, physical table, id, shard key value as text).
    async fn placed(
        &self,
        key: &str,
        physical: impl Fn(usize) -> Vec<String>,
    ) -> Vec<(usize, String, i64, String)> {
        let mut out = Vec::new();
        for shard in 0..4 {
            let (server, db) = (shard / 2, DBS[shard % 2]);
            let mut b = Conn::new(self.cluster.opts(server, Some(db)))
                .await
                .unwrap();
            for t in physical(shard) {
                let rows: Vec<(i64, String)> = b
                    .query(format!(
                        "SELECT id, CAST({key} AS CHAR) FROM {t} ORDER BY id"
                    ))
                    .await
                    .unwrap_or_else(|e| panic!("{t} on {db}@{server}: {e}"));
                for (id, k) in rows {
                    out.push((shard, t.clone(), id, k));
                }
            }
            b.disconnect().await.unwrap();
        }
        out
    }
}

fn texts(r: Row) -> Vec<String> {
    r.unwrap()
        .into_iter()
        .map(|v| match v {
            mysql_async::Value::Bytes(b) => format!("{b:?}"),
            other => format!("{other:?}"),
        })
        .collect()
}

async fn all(c: &mut Conn, sql: &str) -> Vec<Vec<String>> {
    let rows: Vec<Row> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter().map(texts).collect()
}

/// Runs `sql` through Shoal and on the reference (both with and without CLIENT_FOUND_ROWS):
/// the affected-rows counts must be equal.
async fn same_counts(s: &Setup, conns: &mut [Conn; 4], sql: &str) {
    // conns: [shoal, reference, shoal found_rows, reference found_rows]
    for k in [0, 2] {
        let (a, b) = conns.split_at_mut(k + 1);
        let shoal = &mut a[k];
        let reference = &mut b[0];
        shoal
            .query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", s.shoal.log()));
        reference.query_drop(sql).await.unwrap();
        assert_eq!(
            shoal.affected_rows(),
            reference.affected_rows(),
            "{sql} (found_rows: {})",
            k == 2
        );
    }
}

/// Every order is on its shard (`user_id mod 4`), once, and the logical contents equal the
/// reference's.
async fn check_orders(s: &Setup, shoal: &mut Conn, reference: &mut Conn) {
    let sql = "SELECT id, user_id, amount, note, raw, at, total FROM orders ORDER BY id";
    assert_eq!(all(shoal, sql).await, all(reference, sql).await, "orders");
    let placed = s.placed("user_id", |_| vec!["orders".into()]).await;
    let want = all(reference, "SELECT id FROM orders").await.len();
    assert_eq!(placed.len(), want, "rows on the datanodes: {placed:?}");
    for (shard, _, id, user) in &placed {
        let user: usize = user.parse().unwrap();
        assert_eq!(
            user % 4,
            *shard,
            "order {id} (user {user}) on shard {shard}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_key_updates_run_in_place_or_move_rows_exactly() {
    let s = Setup::start().await;
    let mut conns = [
        s.client(false).await,
        s.reference(false).await,
        s.client(true).await,
        s.reference(true).await,
    ];
    // Django's save(): every column, the unchanged key included: in place (run twice: the
    // second changes nothing, matched 1 with CLIENT_FOUND_ROWS, changed 0 without).
    for sql in [
        "UPDATE orders SET user_id = 3, amount = 31.5, note = 'saved', raw = X'01', at = '2024-01-01 00:00:00' WHERE id = 3",
        "UPDATE orders SET user_id = 3, amount = 31.5, note = 'saved', raw = X'01', at = '2024-01-01 00:00:00' WHERE id = 3",
        // The same, with the key written as a string.
        "UPDATE orders SET user_id = '3', amount = 32 WHERE id = 3",
        // `SET key = key` on every shard.
        "UPDATE orders SET user_id = user_id, amount = amount + 1 WHERE amount > 5",
        // A move of one row, to another server.
        "UPDATE orders SET user_id = 6, note = CONCAT(note, '!') WHERE id = 1",
        // Several rows to several datanodes (the new key an expression of each row).
        "UPDATE orders SET user_id = user_id + 1, amount = amount * 2 WHERE id <= 4",
        // Mixed: some rows stay, some move, and an unchanged one.
        "UPDATE orders SET user_id = 5 WHERE id IN (5, 2, 7)",
        // Matches nothing.
        "UPDATE orders SET user_id = 9 WHERE id = 100",
        // The key to the value it has on some rows and not on others, by a non-key filter.
        "UPDATE orders SET user_id = 8 WHERE note LIKE 'n%'",
    ] {
        same_counts(&s, &mut conns, sql).await;
        let [shoal, reference, ..] = &mut conns;
        check_orders(&s, shoal, reference).await;
    }

    // Prepared (binary protocol): Django-style in place, and a move with bound values.
    for (sql, params) in [
        (
            "UPDATE orders SET user_id = ?, amount = ?, note = ? WHERE id = ?",
            (7i64, "7.5", "pr\u{e9}p", 7i64),
        ),
        (
            "UPDATE orders SET user_id = ?, amount = ?, note = ? WHERE id = ?",
            (10i64, "8.5", "moved", 7i64),
        ),
    ] {
        for k in [0, 1] {
            conns[k]
                .exec_drop(sql, params)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", s.shoal.log()));
        }
        assert_eq!(conns[0].affected_rows(), conns[1].affected_rows(), "{sql}");
        let [shoal, reference, ..] = &mut conns;
        check_orders(&s, shoal, reference).await;
    }

    // Inside a client transaction: the move joins it and goes with its ROLLBACK.
    let [shoal, reference, ..] = &mut conns;
    let before = all(shoal, "SELECT * FROM orders ORDER BY id").await;
    shoal.query_drop("BEGIN").await.unwrap();
    shoal
        .query_drop("UPDATE orders SET user_id = 2 WHERE id IN (6, 8)")
        .await
        .unwrap();
    assert_eq!(shoal.affected_rows(), 2);
    let moved = all(
        shoal,
        "SELECT user_id FROM orders WHERE id IN (6, 8) ORDER BY id",
    )
    .await;
    assert_eq!(moved.len(), 2, "{moved:?}");
    let seen = all(shoal, "SELECT id FROM orders WHERE user_id = 2 ORDER BY id").await;
    assert!(
        seen.len() >= 2,
        "the moved rows are read on their new shard: {seen:?}"
    );
    shoal.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(all(shoal, "SELECT * FROM orders ORDER BY id").await, before);
    check_orders(&s, shoal, reference).await;

    // ... and is kept by its COMMIT.
    shoal.query_drop("START TRANSACTION").await.unwrap();
    reference.query_drop("START TRANSACTION").await.unwrap();
    for sql in [
        "UPDATE orders SET user_id = 11 WHERE id = 6",
        "UPDATE orders SET amount = 7 WHERE user_id = 11",
    ] {
        shoal.query_drop(sql).await.unwrap();
        reference.query_drop(sql).await.unwrap();
        assert_eq!(shoal.affected_rows(), reference.affected_rows(), "{sql}");
    }
    shoal.query_drop("COMMIT").await.unwrap();
    reference.query_drop("COMMIT").await.unwrap();
    check_orders(&s, shoal, reference).await;

    // Table-per-shard: a row moves between physical tables (ledger_00 -> ledger_05).
    let sql = "UPDATE ledger SET day = '2025-05-02', amount = amount + 1 WHERE id = 1";
    same_counts(&s, &mut conns, sql).await;
    let [shoal, reference, ..] = &mut conns;
    let q = "SELECT * FROM ledger ORDER BY id";
    assert_eq!(all(shoal, q).await, all(reference, q).await);
    let placed = s
        .placed("day", |shard| {
            vec![
                format!("ledger_{:02}", 2 * shard),
                format!("ledger_{:02}", 2 * shard + 1),
            ]
        })
        .await;
    assert_eq!(placed.len(), 3, "{placed:?}");
    // 2025-05-02 is in the sixth quarter from 2024-01: ledger_05, on dn3 (shard 2).
    assert!(
        placed.contains(&(2, "ledger_05".to_string(), 1, "2025-05-02".to_string())),
        "{placed:?}"
    );

    // Refused with the real cause, nothing changed.
    let before = all(shoal, "SELECT * FROM orders ORDER BY id").await;
    for (sql, cause) in [
        (
            "UPDATE order_item SET user_id = 3 WHERE id = 1",
            "moving rows of a table without a primary key",
        ),
        (
            "UPDATE orders SET user_id = 3 WHERE id = 2 LIMIT 1",
            "UPDATE of shard key column orders.user_id with ORDER BY or LIMIT",
        ),
        (
            "UPDATE orders SET user_id = 3, id = 99 WHERE id = 2",
            "also assigning primary key column id",
        ),
        (
            "INSERT INTO orders (id, user_id) VALUES (2, 2) ON DUPLICATE KEY UPDATE user_id = 3",
            "ON DUPLICATE KEY UPDATE of the shard key to a value on another shard",
        ),
    ] {
        let (code, _, message) = server_error(shoal.query_drop(sql).await);
        assert_eq!(code, 1235, "{sql}: {message}");
        assert!(message.contains(cause), "{sql}: {message}");
    }
    assert_eq!(all(shoal, "SELECT * FROM orders ORDER BY id").await, before);
    // ON DUPLICATE KEY UPDATE of the key that keeps the row on its shard runs.
    // (The inserted row's key is the existing row's: a primary key without the shard key is
    // unique per shard only, see docs/sql-support.md.)
    let user: Option<i64> = shoal
        .query_first("SELECT user_id FROM orders WHERE id = 3")
        .await
        .unwrap();
    let user = user.expect("order 3");
    let sql = format!(
        "INSERT INTO orders (id, user_id, amount) VALUES (3, {user}, 1) ON DUPLICATE KEY UPDATE \
         user_id = VALUES(user_id), amount = 3"
    );
    same_counts(&s, &mut conns, &sql).await;
    let [shoal, reference, ..] = &mut conns;
    check_orders(&s, shoal, reference).await;

    // A table with a trigger: Django's save() routed by id (every shard, no row changing
    // shard) runs in place; a row that would move is refused and nothing changes.
    for shard in 0..4 {
        let (server, db) = (shard / 2, DBS[shard % 2]);
        let mut b = Conn::new(s.cluster.opts(server, Some(db))).await.unwrap();
        b.query_drop(
            "CREATE TRIGGER orders_keep BEFORE UPDATE ON orders FOR EACH ROW SET NEW.amount = NEW.amount",
        )
        .await
        .unwrap();
        b.disconnect().await.unwrap();
    }
    let user: Option<i64> = shoal
        .query_first("SELECT user_id FROM orders WHERE id = 4")
        .await
        .unwrap();
    let user = user.expect("order 4");
    let sql =
        format!("UPDATE orders SET user_id = {user}, amount = 44, note = 'kept' WHERE id = 4");
    same_counts(&s, &mut conns, &sql).await;
    let [shoal, reference, ..] = &mut conns;
    check_orders(&s, shoal, reference).await;
    let before = all(shoal, "SELECT * FROM orders ORDER BY id").await;
    let sql = format!(
        "UPDATE orders SET user_id = {}, amount = 45 WHERE id = 4",
        user + 1
    );
    let (code, _, message) = server_error(shoal.query_drop(&sql).await);
    assert_eq!(code, 1235, "{message}");
    assert!(
        message.contains("moving rows of a table with triggers"),
        "{message}"
    );
    assert_eq!(all(shoal, "SELECT * FROM orders ORDER BY id").await, before);
}

/// Sessions moving the same rows at once: every row stays exactly once, on its shard, and
/// each update that reported a matched row applied exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_moves_neither_lose_nor_duplicate_rows() {
    let s = Setup::start().await;
    let mut tasks = Vec::new();
    for step in [1i64, 2] {
        let mut c = s.client(true).await;
        tasks.push(tokio::spawn(async move {
            let mut applied = 0i64;
            for _ in 0..15 {
                let r = c
                    .query_drop(format!(
                        "UPDATE orders SET user_id = user_id + {step} WHERE id IN (1, 2)"
                    ))
                    .await;
                match r {
                    Ok(()) => applied += step * c.affected_rows() as i64,
                    // A deadlock between the two: the statement did nothing.
                    Err(mysql_async::Error::Server(e)) if e.code == 1213 || e.code == 1205 => {}
                    Err(e) => panic!("{e}"),
                }
            }
            applied
        }));
    }
    let mut applied = 0;
    for t in tasks {
        applied += t.await.unwrap();
    }
    let mut c = s.client(false).await;
    let rows = all(&mut c, "SELECT id FROM orders ORDER BY id").await;
    assert_eq!(rows.len(), 8, "{rows:?}");
    let sum: Option<String> = c
        .query_first("SELECT SUM(user_id) FROM orders WHERE id IN (1, 2)")
        .await
        .unwrap();
    let sum: i64 = sum.expect("a sum").parse().expect("a number");
    assert_eq!(sum, 3 + applied, "{}", s.shoal.log());
    let placed = s.placed("user_id", |_| vec!["orders".into()]).await;
    assert_eq!(placed.len(), 8, "{placed:?}");
    for (shard, _, id, user) in &placed {
        let user: usize = user.parse().unwrap();
        assert_eq!(
            user % 4,
            *shard,
            "order {id} (user {user}) on shard {shard}"
        );
    }
}
