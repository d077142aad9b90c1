//! What real applications rely on without saying so, end to end over real MariaDB: no backend
//! transaction outlives the client's (autocommit off, implicit transactions, disconnects and
//! resets), session variables that shape results apply to the merged result, and
//! read-your-writes holds for every write path Shoal commits itself. Each check is made on the
//! backends themselves (`information_schema.INNODB_TRX`, DDL under a short lock wait, replicas
//! held back) or against one plain MariaDB database holding the same rows.

use std::path::PathBuf;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shoal_bench::cluster::{Cluster, ClusterSpec, Role};
use shoal_tests::{ShoalProcess, scratch_dir, unique_name};

/// Database of every datanode (`a` and `b` on each server) and of the reference.
const DBS: [&str; 3] = ["a", "b", "plain"];

async fn start_cluster(primaries: usize, replicas: usize) -> Cluster {
    Cluster::start(ClusterSpec {
        primaries,
        replicas_per_primary: replicas,
        databases: DBS.iter().map(|d| d.to_string()).collect(),
        ..ClusterSpec::default()
    })
    .await
    .unwrap_or_else(|e| panic!("cannot start {primaries} primaries x {replicas} replicas: {e}"))
}

/// `orders` sharded by `user_id` (mod 4) over dn1..dn4 (`a`, `b` on each primary), its ER
/// child `order_item`, the global `country`; `extra` is added to every datahost (read
/// balancing, read-your-writes).
fn write_config(cluster: &Cluster, extra: &str) -> PathBuf {
    let (u, pw) = (cluster.user(), cluster.password());
    let mut text = String::from(
        "users:\n  - { name: app, password: app-secret, schemas: [shop], admin: true }\ndatahosts:\n",
    );
    let insts = cluster.instances();
    for (k, p) in cluster.primaries().iter().enumerate() {
        text.push_str(&format!(
            "  - name: dh{k}\n    primary: {{ address: \"{}:{}\", user: {u}, password: {pw} }}\n",
            p.host, p.port
        ));
        let index = insts.iter().position(|i| i.port == p.port).unwrap();
        let replicas = cluster.replicas_of(index);
        if !replicas.is_empty() {
            text.push_str("    replicas:\n");
            for r in replicas {
                text.push_str(&format!(
                    "      - {{ address: \"{}:{}\", user: {u}, password: {pw} }}\n",
                    r.host, r.port
                ));
            }
        }
        text.push_str("    pool: { max: 16, acquire_timeout: 30s }\n");
        for line in extra.lines().filter(|l| !l.trim().is_empty()) {
            text.push_str(&format!("    {}\n", line.trim()));
        }
    }
    text.push_str(
        "datanodes:\n  - { name: dn1, datahost: dh0, database: a }\n  \
         - { name: dn2, datahost: dh0, database: b }\n  \
         - { name: dn3, datahost: dh1, database: a }\n  \
         - { name: dn4, datahost: dh1, database: b }\n\
         rules:\n  - { name: by_user, algorithm: mod }\n\
         schemas:\n  - name: shop\n    default_datanode: dn1\n    tables:\n      \
         - { name: orders, type: sharded, shard_key: user_id, rule: by_user, datanodes: dn$1-4 }\n      \
         - { name: order_item, type: child, parent: orders, join_key: user_id }\n      \
         - { name: country, type: global, datanodes: dn$1-4 }\n",
    );
    let path = scratch_dir().join(format!("{}.yaml", unique_name("app-safety")));
    std::fs::write(&path, text).expect("write config");
    path
}

const TABLES: [&str; 3] = [
    "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(10), \
     amount INT) ENGINE=InnoDB",
    "CREATE TABLE order_item (id INT PRIMARY KEY, user_id INT NOT NULL, qty INT) ENGINE=InnoDB",
    "CREATE TABLE country (code CHAR(2) PRIMARY KEY, name VARCHAR(40)) ENGINE=InnoDB",
];

/// 40 orders over 4 users' shards and every status, the same rows in `c`'s tables.
fn seed_orders() -> String {
    let statuses = ["new", "paid", "sent", "done", "void"];
    let rows: Vec<String> = (1..=40)
        .map(|id| {
            format!(
                "({id}, {}, '{}', {})",
                id % 7,
                statuses[id % 5],
                (id * 37) % 100
            )
        })
        .collect();
    format!(
        "INSERT INTO orders (id, user_id, status, amount) VALUES {}",
        rows.join(", ")
    )
}

struct Setup {
    cluster: Cluster,
    shoal: ShoalProcess,
}

impl Setup {
    /// A cluster, Shoal over it, the tables created through Shoal and in the reference
    /// database `plain` on the first primary, with the same rows in both.
    async fn start(primaries: usize, replicas: usize, extra: &str) -> Setup {
        let cluster = start_cluster(primaries, replicas).await;
        let shoal = ShoalProcess::start(&[
            "--config".to_string(),
            write_config(&cluster, extra).display().to_string(),
        ]);
        let s = Setup { cluster, shoal };
        let mut c = s.client().await;
        let mut plain = s.plain().await;
        for ddl in TABLES {
            c.query_drop(ddl)
                .await
                .unwrap_or_else(|e| panic!("{ddl}: {e}\n{}", s.shoal.log()));
            plain.query_drop(ddl).await.unwrap();
        }
        for sql in [
            seed_orders(),
            "INSERT INTO country VALUES ('fr', 'France'), ('de', 'Germany')".to_string(),
        ] {
            c.query_drop(&sql).await.unwrap();
            plain.query_drop(&sql).await.unwrap();
        }
        if replicas > 0 {
            s.cluster.sync_replicas().await.unwrap();
        }
        s
    }

    async fn client(&self) -> Conn {
        match Conn::new(self.shoal.opts_as("app", "app-secret", Some("shop"))).await {
            Ok(c) => c,
            Err(e) => panic!("connect through shoal: {e}\n{}", self.shoal.log()),
        }
    }

    /// The reference: one plain MariaDB database with the same tables and rows.
    async fn plain(&self) -> Conn {
        Conn::new(self.cluster.opts(0, Some("plain")))
            .await
            .unwrap()
    }

    /// Open InnoDB transactions on every primary, as (server, thread id, state, what the
    /// thread last ran).
    async fn open_transactions(&self) -> Vec<(u16, u64, String, Option<String>)> {
        // InnoDB answers INNODB_TRX from a copy it refreshes only when the last is older than
        // 100 ms: read sooner after the previous look and it shows the transactions as they
        // were then.
        tokio::time::sleep(Duration::from_millis(150)).await;
        let mut open = Vec::new();
        for (i, inst) in self.cluster.instances().iter().enumerate() {
            if inst.role != Role::Primary {
                continue;
            }
            let mut admin = Conn::new(self.cluster.admin_opts(i)).await.unwrap();
            let rows: Vec<(u64, String, Option<String>)> = admin
                .query(
                    "SELECT t.trx_mysql_thread_id, t.trx_state, \
                     CONCAT_WS(' ', p.DB, p.COMMAND, p.INFO, t.trx_query) \
                     FROM information_schema.INNODB_TRX t \
                     LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id",
                )
                .await
                .unwrap();
            open.extend(rows.into_iter().map(|(t, s, q)| (inst.port, t, s, q)));
            admin.disconnect().await.unwrap();
        }
        open
    }

    /// No backend connection, pooled or held, is inside a transaction.
    async fn assert_no_open_transaction(&self, after: &str) {
        let open = self.open_transactions().await;
        assert!(
            open.is_empty(),
            "after {after}: backend transactions still open (port, thread, state): {open:?}\n{}",
            self.shoal.log()
        );
    }
}

/// PyMySQL (so SQLAlchemy) turns autocommit off at connect; a client that only reads and
/// leaves must leave no transaction behind, and the next DDL must not wait on its locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_clients_with_autocommit_off_leave_no_transaction_behind() {
    let s = Setup::start(2, 0, "").await;
    s.assert_no_open_transaction("setup").await;

    // Read and leave, as `pymysql.connect(); SELECT COUNT(*) FROM orders; close()` does.
    let mut c = s.client().await;
    c.query_drop("SET autocommit = 0").await.unwrap();
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM orders").await.unwrap();
    assert_eq!(n, Some(40));
    let _: Vec<Row> = c
        .query("SELECT o.id, i.qty FROM orders o JOIN order_item i ON i.user_id = o.user_id")
        .await
        .unwrap();
    let _: Vec<Row> = c.query("SELECT * FROM country").await.unwrap();
    c.disconnect().await.unwrap();
    s.assert_no_open_transaction("a read-only autocommit-off client left")
        .await;

    // The DDL of the reproduction goes through on every datanode at once.
    let mut ddl = s.client().await;
    ddl.query_drop("SET lock_wait_timeout = 3").await.unwrap();
    ddl.query_drop("ALTER TABLE orders COMMENT = 'x'")
        .await
        .unwrap_or_else(|e| panic!("DDL after the reader left: {e}\n{}", s.shoal.log()));

    // ROLLBACK and COMMIT with autocommit off reach every datanode the reads touched, while
    // the client stays connected.
    let mut c = s.client().await;
    c.query_drop("SET autocommit = 0").await.unwrap();
    for end in ["ROLLBACK", "COMMIT", "rollback /* c */", "/* c */ COMMIT"] {
        let _: Vec<Row> = c.query("SELECT * FROM orders ORDER BY id").await.unwrap();
        let _: Option<i64> = c
            .query_first("SELECT amount FROM orders WHERE user_id = 3 LIMIT 1")
            .await
            .unwrap();
        assert!(
            !s.open_transactions().await.is_empty(),
            "autocommit off: the reads opened transactions (else this test checks nothing)"
        );
        c.query_drop(end).await.unwrap();
        s.assert_no_open_transaction(end).await;
    }
    // A write with autocommit off is not visible elsewhere until COMMIT, and ROLLBACK undoes
    // it on every datanode.
    c.query_drop(
        "INSERT INTO orders (id, user_id, status, amount) VALUES (100, 1, 'new', 1), \
         (101, 2, 'new', 1), (102, 3, 'new', 1)",
    )
    .await
    .unwrap();
    let mut other = s.client().await;
    let seen: Option<i64> = other
        .query_first("SELECT COUNT(*) FROM orders WHERE id >= 100")
        .await
        .unwrap();
    assert_eq!(seen, Some(0), "uncommitted rows seen by another client");
    c.query_drop("ROLLBACK").await.unwrap();
    s.assert_no_open_transaction("ROLLBACK of a write").await;
    let after: Option<i64> = other
        .query_first("SELECT COUNT(*) FROM orders WHERE id >= 100")
        .await
        .unwrap();
    assert_eq!(after, Some(0), "rolled-back rows are there");
    // Disconnecting inside an implicit transaction rolls it back.
    c.query_drop("INSERT INTO orders (id, user_id, status, amount) VALUES (103, 1, 'new', 1)")
        .await
        .unwrap();
    c.disconnect().await.unwrap();
    s.assert_no_open_transaction("a disconnect with a write pending")
        .await;
    let after: Option<i64> = other
        .query_first("SELECT COUNT(*) FROM orders WHERE id >= 100")
        .await
        .unwrap();
    assert_eq!(
        after,
        Some(0),
        "a disconnected client's write was committed"
    );
    other.disconnect().await.unwrap();
}

/// Explicit transactions that only read, ended by COMMIT, ROLLBACK, a reset or a disconnect:
/// nothing stays open on any backend, pooled connections included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_read_transactions_end_on_every_datanode() {
    let s = Setup::start(2, 0, "").await;
    for (begin, end) in [
        ("BEGIN", "COMMIT"),
        ("START TRANSACTION", "ROLLBACK"),
        ("START TRANSACTION READ ONLY", "COMMIT"),
        ("BEGIN", "reset"),
        ("BEGIN", "disconnect"),
    ] {
        let mut c = s.client().await;
        c.query_drop(begin).await.unwrap();
        let _: Vec<Row> = c.query("SELECT * FROM orders").await.unwrap();
        let _: Vec<Row> = c
            .query("SELECT status, COUNT(*) FROM orders GROUP BY status")
            .await
            .unwrap();
        assert!(
            !s.open_transactions().await.is_empty(),
            "{begin}: the reads run inside a transaction"
        );
        match end {
            "reset" => {
                c.reset().await.unwrap();
            }
            "disconnect" => {
                c.disconnect().await.unwrap();
                s.assert_no_open_transaction("disconnect in a transaction")
                    .await;
                continue;
            }
            _ => c.query_drop(end).await.unwrap(),
        }
        s.assert_no_open_transaction(&format!("{begin} ... {end}"))
            .await;
        // The session goes on outside a transaction.
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM orders").await.unwrap();
        assert_eq!(n, Some(40));
        s.assert_no_open_transaction(&format!("a read after {begin} ... {end}"))
            .await;
        c.disconnect().await.unwrap();
    }
    s.assert_no_open_transaction("every client left").await;
}

/// The rows of `sql` run on `c`, each as text.
async fn rows_of(c: &mut Conn, sql: &str) -> Vec<Vec<Option<String>>> {
    let rows: Vec<Row> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter()
        .map(|r| {
            r.unwrap()
                .into_iter()
                .map(|v| match v {
                    mysql_async::Value::NULL => None,
                    mysql_async::Value::Bytes(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                    other => Some(other.as_sql(true)),
                })
                .collect()
        })
        .collect()
}

/// `sql_select_limit` caps the rows of the whole result, as on one server (Connector/J's
/// `setMaxRows` sends it), not the rows of each shard; an explicit LIMIT overrides it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_select_limit_applies_to_the_merged_result() {
    let s = Setup::start(2, 0, "").await;
    let mut c = s.client().await;
    let mut plain = s.plain().await;
    for conn in [&mut c, &mut plain] {
        conn.query_drop("SET SQL_SELECT_LIMIT = 5").await.unwrap();
    }
    // Without an order the rows are any 5: only their count is MariaDB's.
    assert_eq!(rows_of(&mut c, "SELECT id FROM orders").await.len(), 5);
    for sql in [
        "SELECT id, status FROM orders ORDER BY id",
        "SELECT id FROM orders ORDER BY amount DESC, id",
        "SELECT status, COUNT(*), SUM(amount) FROM orders GROUP BY status ORDER BY status",
        "SELECT status, COUNT(*) AS n FROM orders GROUP BY status ORDER BY n DESC, status",
        "SELECT user_id, COUNT(*) FROM orders GROUP BY user_id ORDER BY user_id DESC",
        "SELECT DISTINCT status FROM orders ORDER BY status",
        "SELECT id FROM orders ORDER BY id LIMIT 12",
        "SELECT id FROM orders ORDER BY id LIMIT 3",
        "SELECT id FROM orders WHERE user_id = 3 ORDER BY id",
        "SELECT COUNT(*) FROM orders",
        "SELECT o.id, i.qty FROM orders o LEFT JOIN order_item i ON i.user_id = o.user_id \
         ORDER BY o.id",
        "SELECT code FROM country ORDER BY code",
    ] {
        let (got, want) = (rows_of(&mut c, sql).await, rows_of(&mut plain, sql).await);
        assert_eq!(got, want, "{sql}\n{}", s.shoal.log());
    }
    for conn in [&mut c, &mut plain] {
        conn.query_drop("SET SQL_SELECT_LIMIT = DEFAULT")
            .await
            .unwrap();
    }
    assert_eq!(rows_of(&mut c, "SELECT id FROM orders").await.len(), 40);
    let sql = "SELECT id FROM orders ORDER BY id";
    assert_eq!(rows_of(&mut c, sql).await, rows_of(&mut plain, sql).await);
    // `WHERE key IS NULL` would mean `key = LAST_INSERT_ID()` there: refused, not misrouted.
    let (code, _, msg) = shoal_tests::server_error(c.query_drop("SET sql_auto_is_null = 1").await);
    assert_eq!(code, 1235, "{msg}");
    assert!(msg.contains("sql_auto_is_null"), "{msg}");
    c.query_drop("SET sql_auto_is_null = 0").await.unwrap();
    // The prepared protocol too.
    c.query_drop("SET SQL_SELECT_LIMIT = 7").await.unwrap();
    let ids: Vec<i64> = c
        .exec("SELECT id FROM orders WHERE amount >= ? ORDER BY id", (0,))
        .await
        .unwrap();
    assert_eq!(ids, (1..=7).collect::<Vec<i64>>());
}

/// Stops the SQL thread of every replica, so that none has the writes that follow.
async fn hold_back_replicas(cluster: &Cluster) {
    for (i, inst) in cluster.instances().iter().enumerate() {
        if inst.role != Role::Primary {
            let mut r = Conn::new(cluster.admin_opts(i)).await.unwrap();
            r.query_drop("STOP SLAVE SQL_THREAD").await.unwrap();
        }
    }
}

/// Starts the replicas' SQL threads again after `ms`.
fn release_replicas_after(cluster: &Cluster, ms: u64) -> tokio::task::JoinHandle<()> {
    let opts: Vec<_> = cluster
        .instances()
        .iter()
        .enumerate()
        .filter(|(_, inst)| inst.role != Role::Primary)
        .map(|(i, _)| cluster.admin_opts(i))
        .collect();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        for o in opts {
            let mut r = Conn::new(o).await.unwrap();
            r.query_drop("START SLAVE SQL_THREAD").await.unwrap();
        }
    })
}

/// With `causal` read-your-writes, a session's next read sees what it wrote, whichever way
/// Shoal committed it: a multi-row INSERT split over datanodes, an explicit transaction, a
/// global-table write (on every datanode), a scattered UPDATE. The replicas are held back
/// while the write runs, so a read that neither waits nor goes to the primary misses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn causal_reads_see_writes_shoal_commits_itself() {
    let s = Setup::start(
        2,
        1,
        "balance: round_robin\nread_your_writes: { causal: 20s }\nhealth: { heartbeat: 1h }",
    )
    .await;
    // Reads reach the replicas only once the monitor has found them up.
    let mut c = s.client().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let rows: Vec<Row> = c.query("SHOW SHOAL BACKENDS").await.unwrap();
        let states: Vec<(String, String)> = rows
            .iter()
            .map(|r| (r.get("role").unwrap(), r.get("state").unwrap()))
            .collect();
        let replicas_up = states
            .iter()
            .filter(|(role, state)| role == "replica" && state == "up")
            .count();
        if replicas_up == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "replicas never up: {states:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A first write and read: the session now knows a GTID its replicas have applied, which
    // must not pass for the GTID of the writes below.
    c.query_drop("INSERT INTO orders (id, user_id, status, amount) VALUES (199, 1, 'w', 1)")
        .await
        .unwrap();
    let first = rows_of(&mut c, "SELECT status FROM orders WHERE id = 199").await;
    assert_eq!(first, vec![vec![Some("w".to_string())]]);
    let cases: [(&str, &[&str], &str, &str); 4] = [
        (
            "a multi-row INSERT over every datanode",
            &[
                "INSERT INTO orders (id, user_id, status, amount) VALUES (200, 0, 'x', 1), \
               (201, 1, 'x', 1), (202, 2, 'x', 1), (203, 3, 'x', 1)",
            ],
            "SELECT COUNT(*) FROM orders WHERE id BETWEEN 200 AND 203",
            "4",
        ),
        (
            "BEGIN ... COMMIT over two datanodes",
            &[
                "BEGIN",
                "INSERT INTO orders (id, user_id, status, amount) VALUES (300, 0, 'y', 1)",
                "INSERT INTO orders (id, user_id, status, amount) VALUES (301, 3, 'y', 1)",
                "COMMIT",
            ],
            "SELECT COUNT(*) FROM orders WHERE status = 'y'",
            "2",
        ),
        (
            "a global-table write",
            &["INSERT INTO country VALUES ('it', 'Italy')"],
            "SELECT name FROM country WHERE code = 'it'",
            "Italy",
        ),
        (
            "a scattered UPDATE",
            &["UPDATE orders SET amount = 999 WHERE status = 'paid'"],
            "SELECT COUNT(*) FROM orders WHERE amount = 999",
            "8",
        ),
    ];
    for (what, writes, read, want) in cases {
        hold_back_replicas(&s.cluster).await;
        for w in writes {
            c.query_drop(*w)
                .await
                .unwrap_or_else(|e| panic!("{what}: {w}: {e}"));
        }
        let release = release_replicas_after(&s.cluster, 1500);
        let got = rows_of(&mut c, read).await;
        assert_eq!(
            got,
            vec![vec![Some(want.to_string())]],
            "{what}: the session's next read missed its own write\n{}",
            s.shoal.log()
        );
        release.await.unwrap();
        s.cluster.sync_replicas().await.unwrap();
    }
}
