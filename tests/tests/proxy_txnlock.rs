//! Savepoints, LOCK TABLES and consistent snapshots over several datanodes (issue 23), end to
//! end over real MariaDB. Savepoint scripts run through Shoal and on a plain MariaDB database
//! holding the same logical tables: every statement must succeed or fail the same way on both,
//! and the rows must end the same.
//!
//! The layout is the demo's (`shoal_tests::demo_layout_yaml`): `orders` sharded by `user_id`
//! (mod 4) over dn1..dn4, its ER child `order_item`, the global `country`, and `ledger` as 8
//! tables by quarter, two per datanode.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shoal_bench::cluster::Cluster;
use shoal_tests::{ShoalProcess, server_error, within};
use std::time::Duration;

/// Databases of the datanodes (`a`, `b` on each server) and the reference one (server 0).
const DBS: [&str; 3] = ["a", "b", "reference"];

const TABLES: [&str; 4] = [
    "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, amount INT) ENGINE=InnoDB",
    "CREATE TABLE order_item (id INT PRIMARY KEY, user_id INT NOT NULL, qty INT) ENGINE=InnoDB",
    "CREATE TABLE country (code CHAR(2) PRIMARY KEY, name VARCHAR(40)) ENGINE=InnoDB",
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
            "txnlock",
        )
        .await;
        let s = Setup { cluster, shoal };
        let mut c = s.client().await;
        let mut r = s.reference().await;
        for ddl in TABLES {
            c.query_drop(ddl)
                .await
                .unwrap_or_else(|e| panic!("{ddl}: {e}\n{}", s.shoal.log()));
            r.query_drop(ddl).await.expect("reference DDL");
        }
        s
    }

    async fn client(&self) -> Conn {
        match Conn::new(self.shoal.opts_as("app", "app-secret", Some("shop"))).await {
            Ok(c) => c,
            Err(e) => panic!("connect through shoal: {e}\n{}", self.shoal.log()),
        }
    }

    async fn reference(&self) -> Conn {
        Conn::new(self.cluster.opts(0, Some("reference")))
            .await
            .expect("reference connection")
    }
}

/// What a statement answered: its rows as text, or its error code.
async fn outcome(c: &mut Conn, sql: &str) -> Result<Vec<Vec<Option<String>>>, u16> {
    match c.query::<Row, _>(sql).await {
        Ok(rows) => Ok(rows
            .into_iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| {
                        r.as_ref(i).and_then(|v| match v {
                            mysql_async::Value::NULL => None,
                            v => Some(v.as_sql(true).trim_matches('\'').to_string()),
                        })
                    })
                    .collect()
            })
            .collect()),
        Err(e) => Err(server_error::<()>(Err(e)).0),
    }
}

/// Runs `script` through Shoal and on the reference, statement by statement, comparing each
/// outcome, then compares the tables' rows.
async fn same_as_reference(s: &Setup, script: &[&str]) {
    let mut c = s.client().await;
    let mut r = s.reference().await;
    for t in ["orders", "order_item", "country"] {
        for conn in [&mut c, &mut r] {
            conn.query_drop(format!("DELETE FROM {t}")).await.unwrap();
        }
    }
    for sql in script {
        let got = outcome(&mut c, sql).await;
        let want = outcome(&mut r, sql).await;
        assert_eq!(got, want, "{sql}\n{}", s.shoal.log());
    }
    // A fresh session reads what was committed.
    let mut c = s.client().await;
    for sql in [
        "SELECT id, user_id, amount FROM orders ORDER BY id",
        "SELECT id, user_id, qty FROM order_item ORDER BY id",
        "SELECT code, name FROM country ORDER BY code",
    ] {
        assert_eq!(
            outcome(&mut c, sql).await,
            outcome(&mut r, sql).await,
            "{sql} after {script:?}"
        );
    }
}

/// Savepoints over four datanodes: a datanode first touched after a savepoint goes back to its
/// start, ROLLBACK TO drops later savepoints, RELEASE drops the named one and later ones, a
/// name reused moves, unknown names are 1305, and COMMIT / ROLLBACK end them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn savepoints_behave_as_on_one_server() {
    let s = Setup::start().await;
    // user_id 1..4 land on four different datanodes.
    same_as_reference(
        &s,
        &[
            "BEGIN",
            "INSERT INTO orders (id, user_id, amount) VALUES (1, 1, 10)",
            "SAVEPOINT a",
            "INSERT INTO orders (id, user_id, amount) VALUES (2, 2, 20)",
            "INSERT INTO order_item (id, user_id, qty) VALUES (1, 2, 5)",
            "SAVEPOINT b",
            "INSERT INTO orders (id, user_id, amount) VALUES (3, 3, 30), (4, 4, 40)",
            "UPDATE orders SET amount = amount + 1",
            "INSERT INTO country VALUES ('fr', 'France')",
            "SELECT COUNT(*), SUM(amount) FROM orders",
            "ROLLBACK TO SAVEPOINT b",
            "SELECT COUNT(*), SUM(amount) FROM orders",
            "SELECT COUNT(*) FROM country",
            "ROLLBACK WORK TO b",
            "INSERT INTO orders (id, user_id, amount) VALUES (5, 5, 50)",
            "ROLLBACK TO a",
            "ROLLBACK TO b",
            "SELECT id FROM orders ORDER BY id",
            "INSERT INTO orders (id, user_id, amount) VALUES (6, 2, 60)",
            "SAVEPOINT `c c`",
            "SAVEPOINT d",
            "INSERT INTO orders (id, user_id, amount) VALUES (7, 3, 70)",
            "RELEASE SAVEPOINT `C C`",
            "ROLLBACK TO d",
            "ROLLBACK TO a",
            "SAVEPOINT a",
            "INSERT INTO orders (id, user_id, amount) VALUES (8, 4, 80)",
            "SAVEPOINT e",
            "SAVEPOINT a",
            "INSERT INTO orders (id, user_id, amount) VALUES (9, 1, 90)",
            "ROLLBACK TO e",
            "ROLLBACK TO a",
            "COMMIT",
            "ROLLBACK TO e",
            "SELECT id, amount FROM orders ORDER BY id",
        ],
    )
    .await;
    // Outside a transaction SAVEPOINT does nothing; with autocommit off every statement is in
    // one; a ROLLBACK ends the savepoints.
    same_as_reference(
        &s,
        &[
            "SAVEPOINT x",
            "ROLLBACK TO x",
            "RELEASE SAVEPOINT x",
            "SET autocommit = 0",
            "SAVEPOINT x",
            "INSERT INTO orders (id, user_id, amount) VALUES (1, 1, 10), (2, 2, 20)",
            "SAVEPOINT y",
            "INSERT INTO orders (id, user_id, amount) VALUES (3, 3, 30), (4, 4, 40)",
            "ROLLBACK TO y",
            "COMMIT",
            "ROLLBACK TO y",
            "INSERT INTO orders (id, user_id, amount) VALUES (5, 1, 50)",
            "SAVEPOINT z",
            "INSERT INTO orders (id, user_id, amount) VALUES (6, 4, 60)",
            "ROLLBACK TO z",
            "SET autocommit = 1",
            "ROLLBACK TO z",
            "BEGIN",
            "SAVEPOINT p",
            "DELETE FROM orders",
            "ROLLBACK",
            "ROLLBACK TO p",
            "START TRANSACTION",
            "SAVEPOINT p",
            "BEGIN",
            "ROLLBACK TO p",
            "COMMIT",
        ],
    )
    .await;
}

/// A write over several datanodes that fails on one inside a transaction with savepoints: the
/// transaction is rolled back on every datanode (Shoal cannot undo the statement alone), and
/// its savepoints are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_multi_datanode_write_inside_a_savepoint_transaction_rolls_back_everything() {
    let s = Setup::start().await;
    let mut c = s.client().await;
    c.query_drop("INSERT INTO orders (id, user_id, amount) VALUES (3, 3, 30)")
        .await
        .unwrap();
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("INSERT INTO orders (id, user_id, amount) VALUES (1, 1, 10)")
        .await
        .unwrap();
    c.query_drop("SAVEPOINT a").await.unwrap();
    // id 3 exists on user 3's datanode: this fails there after succeeding elsewhere.
    let (code, _, msg) = server_error(
        c.query_drop("INSERT INTO orders (id, user_id, amount) VALUES (2, 2, 20), (3, 3, 30)")
            .await,
    );
    assert_eq!(code, 1062, "{msg}");
    assert!(msg.contains("rolled back on every datanode"), "{msg}");
    let (code, _, _) = server_error(c.query_drop("ROLLBACK TO a").await);
    assert_eq!(code, 1305);
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM orders").await.unwrap();
    assert_eq!(n, Some(1));
}

/// LOCK TABLES on sharded, child, global and table-per-shard tables, with aliases and every
/// lock type: the session uses only what it locked (1100 otherwise, as on one server), other
/// sessions wait for its locks, and UNLOCK TABLES / START TRANSACTION / disconnect release
/// every one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_tables_locks_every_physical_table() {
    let s = Setup::start().await;
    let mut c = s.client().await;
    for sql in [
        "INSERT INTO orders (id, user_id, amount) VALUES (1, 1, 10), (2, 2, 20), (3, 3, 30), (4, 4, 40)",
        "INSERT INTO country VALUES ('fr', 'France')",
        "INSERT INTO ledger (id, day, amount) VALUES (1, '2024-01-05', 1), (2, '2024-05-05', 2)",
    ] {
        c.query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", s.shoal.log()));
    }
    let mut other = s.client().await;
    other
        .query_drop("SET SESSION lock_wait_timeout = 1")
        .await
        .unwrap();

    c.query_drop(
        "LOCK TABLES orders READ /*!32311 LOCAL */, country AS k WRITE, \
         order_item LOW_PRIORITY WRITE, ledger READ",
    )
    .await
    .unwrap_or_else(|e| panic!("LOCK TABLES: {e}\n{}", s.shoal.log()));
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM orders").await.unwrap();
    assert_eq!(n, Some(4));
    c.query_drop("INSERT INTO order_item (id, user_id, qty) VALUES (1, 2, 5)")
        .await
        .unwrap();
    c.query_drop("UPDATE country AS k SET name = 'FR' WHERE code = 'fr'")
        .await
        .unwrap();
    // The table-per-shard table: each of its physical tables is locked.
    let r = c
        .query_drop("INSERT INTO ledger (id, day, amount) VALUES (3, '2024-01-06', 3)")
        .await;
    assert!(r.is_err(), "{}", s.shoal.log());
    let (code, _, _) = server_error(r);
    assert_eq!(code, 1099, "locked for reading\n{}", s.shoal.log());
    let (code, _, _) = server_error(
        other
            .query_drop("INSERT INTO ledger (id, day, amount) VALUES (3, '2024-05-06', 3)")
            .await,
    );
    assert_eq!(code, 1205, "locked by the other session");
    // Locked for reading only; `country` only under its alias: as on one server.
    let (code, _, _) = server_error(
        c.query_drop("INSERT INTO orders (id, user_id, amount) VALUES (9, 1, 1)")
            .await,
    );
    assert_eq!(code, 1099);
    let (code, _, msg) = server_error(c.query_drop("SELECT * FROM country").await);
    assert_eq!(code, 1100, "{msg}");
    assert!(!msg.contains("`a`") && !msg.contains("'a'"), "{msg}");
    // Other sessions wait for the locks (and give up after their lock_wait_timeout).
    let (code, _, _) = server_error(
        other
            .query_drop("INSERT INTO orders (id, user_id, amount) VALUES (9, 3, 1)")
            .await,
    );
    assert_eq!(code, 1205);
    let (code, _, _) = server_error(other.query_drop("SELECT * FROM order_item").await);
    assert_eq!(code, 1205);
    let n: Option<i64> = other
        .query_first("SELECT COUNT(*) FROM orders")
        .await
        .unwrap();
    assert_eq!(n, Some(4), "READ locks let others read");
    c.query_drop("UNLOCK TABLES").await.unwrap();
    other
        .query_drop("INSERT INTO orders (id, user_id, amount) VALUES (9, 3, 1)")
        .await
        .unwrap();
    // Unlocked: every table is usable again.
    let n: Option<i64> = c
        .query_first("SELECT COUNT(*) FROM order_item")
        .await
        .unwrap();
    assert_eq!(n, Some(1));

    // START TRANSACTION releases the locks; so does the end of the session.
    c.query_drop("LOCK TABLE orders WRITE").await.unwrap();
    let (code, _, _) = server_error(other.query_drop("DELETE FROM orders WHERE id = 9").await);
    assert_eq!(code, 1205);
    c.query_drop("START TRANSACTION").await.unwrap();
    other
        .query_drop("DELETE FROM orders WHERE id = 9")
        .await
        .unwrap();
    c.query_drop("COMMIT").await.unwrap();
    c.query_drop("LOCK TABLES orders WRITE, order_item WRITE")
        .await
        .unwrap();
    // Another LOCK TABLES replaces the locks.
    c.query_drop("LOCK TABLES order_item READ").await.unwrap();
    other
        .query_drop("INSERT INTO orders (id, user_id, amount) VALUES (10, 2, 1)")
        .await
        .unwrap();
    // MariaDB's way with transactional tables: autocommit off, then LOCK TABLES; COMMIT and
    // ROLLBACK end the transaction on every datanode and keep the locks.
    c.query_drop("SET autocommit = 0").await.unwrap();
    c.query_drop("LOCK TABLES orders WRITE").await.unwrap();
    c.query_drop("INSERT INTO orders (id, user_id, amount) VALUES (20, 1, 1), (21, 2, 1)")
        .await
        .unwrap();
    c.query_drop("ROLLBACK").await.unwrap();
    c.query_drop("INSERT INTO orders (id, user_id, amount) VALUES (22, 3, 1), (23, 4, 1)")
        .await
        .unwrap();
    c.query_drop("COMMIT").await.unwrap();
    let (code, _, _) = server_error(other.query_drop("DELETE FROM orders WHERE id = 22").await);
    assert_eq!(code, 1205, "still locked after COMMIT");
    let n: Option<i64> = c
        .query_first("SELECT COUNT(*) FROM orders WHERE id >= 20")
        .await
        .unwrap();
    assert_eq!(n, Some(2));
    c.query_drop("SET autocommit = 1").await.unwrap();
    drop(c);
    within(
        Duration::from_secs(20),
        "a write after the locking session disconnected",
        async {
            other
                .query_drop("SET SESSION lock_wait_timeout = 10")
                .await
                .unwrap();
            other
                .query_drop("INSERT INTO orders (id, user_id, amount) VALUES (11, 3, 1)")
                .await
                .unwrap();
        },
    )
    .await;
    let n: Option<i64> = other
        .query_first("SELECT COUNT(*) FROM orders")
        .await
        .unwrap();
    assert_eq!(n, Some(8));
}

/// START TRANSACTION WITH CONSISTENT SNAPSHOT begins on every datanode at once: writes
/// committed by others afterwards are not seen on any datanode, even one the transaction
/// first reads later; READ ONLY refuses writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistent_snapshot_begins_on_every_datanode() {
    let s = Setup::start().await;
    let mut c = s.client().await;
    let mut other = s.client().await;
    other
        .query_drop("INSERT INTO orders (id, user_id, amount) VALUES (1, 1, 10)")
        .await
        .unwrap();
    c.query_drop("START TRANSACTION /*!40100 WITH CONSISTENT SNAPSHOT */, READ ONLY")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", s.shoal.log()));
    other
        .query_drop(
            "INSERT INTO orders (id, user_id, amount) VALUES (2, 2, 20), (3, 3, 30), (4, 4, 40)",
        )
        .await
        .unwrap();
    let n: Option<i64> = c
        .query_first("SELECT COUNT(*) FROM orders WHERE user_id = 3")
        .await
        .unwrap();
    assert_eq!(n, Some(0), "a datanode first read after the writes");
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM orders").await.unwrap();
    assert_eq!(n, Some(1));
    c.query_drop("SAVEPOINT sp").await.unwrap();
    let (code, _, _) = server_error(
        c.query_drop("INSERT INTO orders (id, user_id, amount) VALUES (5, 1, 1)")
            .await,
    );
    assert_eq!(code, 1792);
    c.query_drop("ROLLBACK TO SAVEPOINT sp").await.unwrap();
    c.query_drop("RELEASE SAVEPOINT sp").await.unwrap();
    c.query_drop("COMMIT").await.unwrap();
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM orders").await.unwrap();
    assert_eq!(n, Some(4));

    // Before USE: every datanode of the schemas the user may use.
    let mut bare = Conn::new(s.shoal.opts_as("app", "app-secret", None))
        .await
        .unwrap();
    bare.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .await
        .unwrap();
    other
        .query_drop("INSERT INTO orders (id, user_id, amount) VALUES (6, 2, 60)")
        .await
        .unwrap();
    bare.query_drop("USE shop").await.unwrap();
    let n: Option<i64> = bare
        .query_first("SELECT COUNT(*) FROM orders")
        .await
        .unwrap();
    assert_eq!(n, Some(4));
    bare.query_drop("COMMIT").await.unwrap();
}
