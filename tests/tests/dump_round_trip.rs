//! `mariadb-dump` of a sharded logical schema through Shoal, and back (issue 23).
//!
//! Rows in `orders`, `order_item`, `country` and `ledger` (the demo layout,
//! `shoal_tests::demo_layout_yaml`) are dumped through Shoal in the default mode (LOCK TABLES
//! ... READ LOCAL per table) and with `--single-transaction` (a consistent snapshot on every
//! datanode, a savepoint rolled back to after each table) and with `--lock-all-tables` (`FLUSH
//! TABLES`, then `FLUSH TABLES WITH READ LOCK`). Each dump is imported into a plain
//! MariaDB database, which must then hold exactly the logical rows, and loaded back through a
//! second Shoal over empty datanode databases, which must put every row on its shard: each
//! datanode's physical tables end up as those of the first configuration.
//!
//! `--complete-insert`: the INSERTs name their columns. Without it, Shoal completes each INSERT
//! with the table's column list (docs/sql-support.md; tests/tests/mydumper.rs loads such INSERTs).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_tests::{ShoalProcess, scratch_dir, unique_name};

/// The source datanodes' databases (`a`, `b`), the target ones (`c`, `d`) and the plain
/// import (`plain`, on server 0).
const DBS: [&str; 5] = ["a", "b", "c", "d", "plain"];

const TABLES: [&str; 4] = [
    "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, amount DECIMAL(10,2), \
     note VARCHAR(40)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
    "CREATE TABLE order_item (id INT PRIMARY KEY, user_id INT NOT NULL, qty INT) ENGINE=InnoDB",
    "CREATE TABLE country (code CHAR(2) PRIMARY KEY, name VARCHAR(40)) ENGINE=InnoDB \
     DEFAULT CHARSET=utf8mb4",
    "CREATE TABLE ledger (id INT PRIMARY KEY, day DATE NOT NULL, amount INT) ENGINE=InnoDB",
];

/// Logical tables and the columns to order their rows by.
const LOGICAL: [(&str, &str); 4] = [
    ("orders", "id"),
    ("order_item", "id"),
    ("country", "code"),
    ("ledger", "id"),
];

/// A Shoal over the demo layout whose datanodes use databases `first` and `second` on each
/// server.
fn start_shoal(cluster: &Cluster, first: &str, second: &str) -> ShoalProcess {
    let layout = shoal_tests::demo_layout_yaml(1)
        .replace("database: a }", &format!("database: {first} }}"))
        .replace("database: b }", &format!("database: {second} }}"));
    let path = shoal_tests::cluster_config(cluster, shoal_tests::APP_USER, &layout, "dump");
    ShoalProcess::start(&["--config".to_string(), path.display().to_string()])
}

async fn client(shoal: &ShoalProcess) -> Conn {
    match Conn::new(shoal.opts_as("app", "app-secret", Some("shop"))).await {
        Ok(c) => c,
        Err(e) => panic!("connect through shoal: {e}\n{}", shoal.log()),
    }
}

/// Every row of `sql`'s answer, as text.
async fn rows(c: &mut Conn, sql: &str) -> Vec<Vec<Option<String>>> {
    let rows: Vec<Row> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| match r.as_ref(i) {
                    Some(mysql_async::Value::NULL) | None => None,
                    Some(v) => Some(v.as_sql(true)),
                })
                .collect()
        })
        .collect()
}

/// Runs a client tool, `input` as its standard input; panics with its stderr and Shoal's log.
fn run(tool: &str, args: &[String], input: Option<&Path>, log: &dyn Fn() -> String) -> Vec<u8> {
    let mut cmd = Command::new(tool);
    cmd.arg("--no-defaults").args(args);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    match input {
        Some(p) => cmd.stdin(std::fs::File::open(p).expect("open dump")),
        None => cmd.stdin(Stdio::null()),
    };
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"));
    assert!(
        out.status.success(),
        "{tool} {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        log()
    );
    out.stdout
}

fn connection_args(host: &str, port: u16, user: &str, password: &str) -> Vec<String> {
    vec![
        "--protocol=tcp".into(),
        format!("--host={host}"),
        format!("--port={port}"),
        format!("--user={user}"),
        format!("--password={password}"),
    ]
}

/// The rows of every table, as INSERTs with column lists (valid through Shoal and on a plain
/// MariaDB alike).
fn inserts() -> Vec<String> {
    let orders: Vec<String> = (1..=40)
        .map(|i| format!("({i}, {}, {}.{:02}, 'n''{i}')", i % 7, i * 3, i % 100))
        .collect();
    let items: Vec<String> = (1..=60)
        .map(|i| format!("({i}, {}, {})", i % 7, i % 5))
        .collect();
    let ledger: Vec<String> = (0..32)
        .map(|i| {
            let (year, month) = (2024 + i / 16, 1 + (i % 12));
            format!("({i}, '{year}-{month:02}-{:02}', {})", 1 + i % 28, i * 10)
        })
        .collect();
    vec![
        format!(
            "INSERT INTO orders (id, user_id, amount, note) VALUES {}",
            orders.join(", ")
        ),
        format!(
            "INSERT INTO order_item (id, user_id, qty) VALUES {}",
            items.join(", ")
        ),
        "INSERT INTO country (code, name) VALUES ('fr', 'France'), ('de', 'Deutschland'), \
         ('jp', NULL)"
            .to_string(),
        format!(
            "INSERT INTO ledger (id, day, amount) VALUES {}",
            ledger.join(", ")
        ),
    ]
}

/// Two servers, a Shoal over datanode databases `a`/`b` holding the tables and rows.
struct Fixture {
    cluster: Cluster,
    source: ShoalProcess,
    /// Each logical table's rows, read through `source`.
    logical: Vec<Vec<Vec<Option<String>>>>,
}

impl Fixture {
    async fn start() -> Fixture {
        let cluster = Cluster::start(ClusterSpec {
            primaries: 2,
            databases: DBS.iter().map(|d| d.to_string()).collect(),
            ..ClusterSpec::default()
        })
        .await
        .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"));
        let source = start_shoal(&cluster, "a", "b");
        let mut c = client(&source).await;
        for sql in TABLES.iter().map(|s| s.to_string()).chain(inserts()) {
            c.query_drop(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", source.log()));
        }
        let mut logical = Vec::new();
        for (t, key) in LOGICAL {
            logical.push(rows(&mut c, &format!("SELECT * FROM {t} ORDER BY {key}")).await);
        }
        Fixture {
            cluster,
            source,
            logical,
        }
    }

    /// Empties the target datanode databases `c` and `d`.
    async fn clear_targets(&self) {
        for server in 0..2 {
            for db in ["c", "d"] {
                let mut b = Conn::new(self.cluster.opts(server, Some(db)))
                    .await
                    .unwrap();
                let tables: Vec<String> = b.query("SHOW TABLES").await.unwrap();
                for t in tables {
                    b.query_drop(format!("DROP TABLE `{t}`")).await.unwrap();
                }
            }
        }
    }

    /// Every physical table of `c`/`d` holds what the same one of `a`/`b` holds: each row
    /// went to its shard.
    async fn assert_targets_match_sources(&self, what: &str) {
        for server in 0..2 {
            for (from, to) in [("a", "c"), ("b", "d")] {
                let mut src = Conn::new(self.cluster.opts(server, Some(from)))
                    .await
                    .unwrap();
                let mut dst = Conn::new(self.cluster.opts(server, Some(to)))
                    .await
                    .unwrap();
                let mut tables: Vec<String> = src.query("SHOW TABLES").await.unwrap();
                tables.sort();
                let mut loaded: Vec<String> = dst.query("SHOW TABLES").await.unwrap();
                loaded.sort();
                assert_eq!(tables, loaded, "physical tables of {to} on server {server}");
                for t in tables {
                    let sql = format!("SELECT * FROM `{t}` ORDER BY 1");
                    assert_eq!(
                        rows(&mut dst, &sql).await,
                        rows(&mut src, &sql).await,
                        "{t} in {to} on server {server} ({what})"
                    );
                }
            }
        }
    }
}

/// The whole round trip: dump through Shoal (default, --single-transaction and
/// --lock-all-tables), import into a plain database, load back through Shoal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_dump_through_shoal_round_trips() {
    let f = Fixture::start().await;
    let (u, pw) = (
        f.cluster.user().to_string(),
        f.cluster.password().to_string(),
    );
    let primary0 = f.cluster.primary(0);
    for mode in [
        &[][..],
        &["--single-transaction".to_string()][..],
        // FLUSH /*!40101 LOCAL */ TABLES, then FLUSH TABLES WITH READ LOCK.
        &["--lock-all-tables".to_string()][..],
    ] {
        // The dump, through Shoal.
        let mut args = connection_args("127.0.0.1", f.source.port(), "app", "app-secret");
        args.push("--complete-insert".into());
        args.extend(mode.iter().cloned());
        args.push("shop".into());
        let dump = run("mariadb-dump", &args, None, &|| f.source.log());
        let path: PathBuf = scratch_dir().join(format!("{}.sql", unique_name("dump")));
        std::fs::write(&path, &dump).expect("write dump");

        // Into a plain MariaDB database: the logical rows, exactly.
        let mut plain = Conn::new(f.cluster.opts(0, Some("plain"))).await.unwrap();
        for (t, _) in LOGICAL {
            plain
                .query_drop(format!("DROP TABLE IF EXISTS {t}"))
                .await
                .unwrap();
        }
        let mut args = connection_args(&primary0.host, primary0.port, &u, &pw);
        args.push("plain".into());
        run("mariadb", &args, Some(&path), &String::new);
        for ((t, key), want) in LOGICAL.iter().zip(&f.logical) {
            let got = rows(&mut plain, &format!("SELECT * FROM {t} ORDER BY {key}")).await;
            assert_eq!(&got, want, "{t} after the plain import ({mode:?})");
        }

        // Back through a second Shoal over empty datanodes: every row on its shard.
        f.clear_targets().await;
        let target = start_shoal(&f.cluster, "c", "d");
        let mut args = connection_args("127.0.0.1", target.port(), "app", "app-secret");
        args.push("shop".into());
        run("mariadb", &args, Some(&path), &|| target.log());
        f.assert_targets_match_sources(&format!("{mode:?}")).await;
    }
}

/// The load half on its own: a data-only dump of a plain MariaDB database holding the same
/// logical rows (`LOCK TABLES t WRITE`, multi-row INSERTs with column lists, `UNLOCK TABLES`
/// per table) loads through Shoal, tables created through Shoal first, and every row lands on
/// its shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dump_loads_through_shoal_onto_the_shards() {
    let f = Fixture::start().await;
    let (u, pw) = (
        f.cluster.user().to_string(),
        f.cluster.password().to_string(),
    );
    let primary0 = f.cluster.primary(0);
    let mut plain = Conn::new(f.cluster.opts(0, Some("plain"))).await.unwrap();
    for sql in TABLES.iter().map(|s| s.to_string()).chain(inserts()) {
        plain.query_drop(&sql).await.unwrap();
    }
    let mut args = connection_args(&primary0.host, primary0.port, &u, &pw);
    for a in [
        "--compact",
        "--no-create-info",
        "--add-locks",
        "--complete-insert",
        "--extended-insert",
        "plain",
    ] {
        args.push(a.into());
    }
    let dump = run("mariadb-dump", &args, None, &String::new);
    let text = String::from_utf8_lossy(&dump);
    assert!(text.contains("LOCK TABLES `orders` WRITE"), "{text}");
    let path: PathBuf = scratch_dir().join(format!("{}.sql", unique_name("data")));
    std::fs::write(&path, &dump).expect("write dump");

    f.clear_targets().await;
    let target = start_shoal(&f.cluster, "c", "d");
    let mut c = client(&target).await;
    for ddl in TABLES {
        c.query_drop(ddl)
            .await
            .unwrap_or_else(|e| panic!("{ddl}: {e}\n{}", target.log()));
    }
    let mut args = connection_args("127.0.0.1", target.port(), "app", "app-secret");
    args.push("shop".into());
    run("mariadb", &args, Some(&path), &|| target.log());
    f.assert_targets_match_sources("data dump").await;
    for ((t, key), want) in LOGICAL.iter().zip(&f.logical) {
        let got = rows(&mut c, &format!("SELECT * FROM {t} ORDER BY {key}")).await;
        assert_eq!(&got, want, "{t} through the target Shoal");
    }
}

/// What mariadb-dump sends in both modes (captured from a plain MariaDB's general log), less
/// the information_schema and SHOW statements the catalog answers: the locks, the snapshot and
/// the savepoint around each table's read, with each table's rows read in between. `ledger`
/// (table-per-shard, two tables per datanode) is left out: see the round trip above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dump_sessions_statements_run_through_shoal() {
    let f = Fixture::start().await;
    let tables = ["country", "order_item", "orders"];
    let reads = |t: &str| format!("SELECT /*!40001 SQL_NO_CACHE */ * FROM `{t}`");
    let setup = [
        "/*!40100 SET @@SQL_MODE='' */",
        "/*!40103 SET TIME_ZONE='+00:00' */",
        "/*M!100100 SET @@MAX_STATEMENT_TIME=0.000000 */",
        "/*M!100100 SET WAIT_TIMEOUT=DEFAULT */",
    ];
    for single in [false, true] {
        let mut c = Conn::new(f.source.opts_as("app", "app-secret", None))
            .await
            .unwrap();
        let mut other = client(&f.source).await;
        other
            .query_drop("SET SESSION lock_wait_timeout = 1")
            .await
            .unwrap();
        for sql in setup {
            c.query_drop(sql).await.unwrap();
        }
        if single {
            for sql in [
                "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
                "START TRANSACTION /*!40100 WITH CONSISTENT SNAPSHOT */",
                "UNLOCK TABLES",
            ] {
                c.query_drop(sql)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", f.source.log()));
            }
        }
        for sql in [
            "set optimizer_switch='semijoin=off'",
            "set optimizer_switch=default",
            "USE shop",
        ] {
            c.query_drop(sql).await.unwrap();
        }
        if single {
            c.query_drop("SAVEPOINT sp").await.unwrap();
            // Written after the snapshot: the dump must not see it.
            other
                .query_drop("INSERT INTO orders (id, user_id, amount) VALUES (1000, 3, 1)")
                .await
                .unwrap();
        } else {
            c.query_drop(
                "LOCK TABLES `country` READ /*!32311 LOCAL */,`order_item` READ /*!32311 \
                 LOCAL */,`orders` READ /*!32311 LOCAL */",
            )
            .await
            .unwrap_or_else(|e| panic!("LOCK TABLES: {e}\n{}", f.source.log()));
            // Held: writers wait.
            let (code, _, _) = shoal_tests::server_error(
                other
                    .query_drop("INSERT INTO orders (id, user_id, amount) VALUES (1000, 3, 1)")
                    .await,
            );
            assert_eq!(code, 1205);
        }
        for t in tables {
            for sql in [
                "SET SQL_QUOTE_SHOW_CREATE=1",
                "SET SESSION character_set_results = 'binary'",
                "SET SESSION character_set_results = 'utf8mb4'",
            ] {
                c.query_drop(sql).await.unwrap();
            }
            let (k, (_, key)) = LOGICAL
                .iter()
                .enumerate()
                .find(|(_, (n, _))| *n == t)
                .unwrap();
            let mut got = rows(&mut c, &reads(t)).await;
            let mut want = f.logical[k].clone();
            got.sort();
            want.sort();
            assert_eq!(got, want, "{t} (single transaction: {single}, by {key})");
            c.query_drop("SET SESSION character_set_results = 'binary'")
                .await
                .unwrap();
            c.query_drop("select @@collation_database").await.unwrap();
            if single {
                c.query_drop("ROLLBACK TO SAVEPOINT sp").await.unwrap();
            }
        }
        if single {
            c.query_drop("RELEASE SAVEPOINT sp").await.unwrap();
        } else {
            c.query_drop("UNLOCK TABLES").await.unwrap();
        }
        drop(c);
        other
            .query_drop("DELETE FROM orders WHERE id = 1000")
            .await
            .unwrap();
    }
}

/// The user variables a dump file saves and restores system variables with are held by the
/// session: `SET @v = @@var` saves the session's value, `SET var = @v` restores it on every
/// datanode's connection; a statement that reads one otherwise is refused, not answered NULL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_variables_save_and_restore_system_variables() {
    let f = Fixture::start().await;
    let mut c = client(&f.source).await;
    let mode: String = c.query_first("SELECT @@SQL_MODE").await.unwrap().unwrap();
    let zone: String = c.query_first("SELECT @@TIME_ZONE").await.unwrap().unwrap();
    for sql in [
        "/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */",
        "/*!40103 SET @OLD_TIME_ZONE=@@TIME_ZONE */",
        "/*!40103 SET TIME_ZONE='+00:00' */",
        "/*!40014 SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0 */",
        "SET @n = 7, @s = 'it''s'",
    ] {
        c.query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    // Every datanode's connection reads the changed values (orders spans both).
    let changed: Vec<(String, String, i64)> = c
        .query("SELECT @@SQL_MODE, @@TIME_ZONE, @@UNIQUE_CHECKS FROM orders")
        .await
        .unwrap();
    assert!(!changed.is_empty());
    for row in &changed {
        assert_eq!(
            row,
            &("NO_AUTO_VALUE_ON_ZERO".to_string(), "+00:00".to_string(), 0)
        );
    }
    for sql in [
        "/*!40101 SET SQL_MODE=@OLD_SQL_MODE */",
        "/*!40103 SET TIME_ZONE=@OLD_TIME_ZONE */",
        "/*!40014 SET UNIQUE_CHECKS=@OLD_UNIQUE_CHECKS */",
    ] {
        c.query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let restored: Vec<(String, String, i64)> = c
        .query("SELECT @@SQL_MODE, @@TIME_ZONE, @@UNIQUE_CHECKS FROM orders")
        .await
        .unwrap();
    for row in &restored {
        assert_eq!(row, &(mode.clone(), zone.clone(), 1));
    }
    // Read anywhere else, a held variable is refused: the backend would answer NULL.
    for sql in ["SELECT @n", "SELECT id FROM orders WHERE id = @n"] {
        match c.query_drop(sql).await {
            Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1235, "{sql}: {e:?}"),
            other => panic!("{sql}: expected 1235, got {other:?}"),
        }
    }
    // An expression is not held.
    match c.query_drop("SET @m = @n + 1").await {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1235, "{e:?}"),
        other => panic!("expected 1235, got {other:?}"),
    }
}
