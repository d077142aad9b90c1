//! Sharded execution end to end: a config over 2 MariaDB instances and 4 datanodes (a table
//! sharded by `id` mod 4, an ER child, a global table, and an unsharded default datanode).
//! Rows are checked where they land by querying the backends directly; reads, writes, DDL and
//! transactions through Shoal are checked against what one MariaDB would answer.

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use mysql_async::consts::ColumnType;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_tests::{Backend, ShoalProcess, scratch_dir, server_error, unique_name};

/// The two MariaDB primaries shared by the tests of this file.
fn servers() -> (Backend, Backend) {
    static SERVERS: OnceLock<(Backend, Backend)> = OnceLock::new();
    SERVERS
        .get_or_init(|| {
            let cluster = std::thread::spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime")
                    .block_on(Cluster::start(ClusterSpec {
                        primaries: 2,
                        ..ClusterSpec::default()
                    }))
            })
            .join()
            .expect("launcher thread")
            .unwrap_or_else(|e| panic!("cannot start 2 MariaDB primaries: {e}"));
            let of = |i: usize| {
                let p = cluster.primary(i);
                Backend {
                    host: p.host.clone(),
                    port: p.port,
                    pid: p.pid,
                    user: cluster.user().to_string(),
                    password: cluster.password().to_string(),
                }
            };
            let pair = (of(0), of(1));
            *CLUSTER.lock().unwrap_or_else(|p| p.into_inner()) = Some(cluster);
            // SAFETY: registers a plain extern "C" fn with no captured state.
            unsafe {
                libc::atexit(stop_cluster);
            }
            pair
        })
        .clone()
}

static CLUSTER: Mutex<Option<Cluster>> = Mutex::new(None);

extern "C" fn stop_cluster() {
    if let Some(mut c) = CLUSTER.lock().unwrap_or_else(|p| p.into_inner()).take() {
        c.stop();
    }
}

/// One test's layout: databases `<p>_1`, `<p>_2` on both servers and `<p>_main` on the first.
/// dn1 = s1/<p>_1, dn2 = s1/<p>_2, dn3 = s2/<p>_1, dn4 = s2/<p>_2; orders.id mod 4 = shard.
struct Layout {
    s1: Backend,
    s2: Backend,
    prefix: String,
    shoal: ShoalProcess,
}

impl Layout {
    async fn start() -> Layout {
        Self::start_with_pool(8).await
    }

    async fn start_with_pool(pool_max: usize) -> Layout {
        Self::start_with(pool_max, "xa").await
    }

    /// With `transactions: best_effort`: COMMIT goes to each datanode in turn, as before XA.
    async fn start_best_effort() -> Layout {
        Self::start_with(8, "best_effort").await
    }

    async fn start_with(pool_max: usize, transactions: &str) -> Layout {
        let (s1, s2) = servers();
        let prefix = unique_name("sh");
        for db in ["1", "2"] {
            s1.fresh_db(&format!("{prefix}_{db}")).await;
            s2.fresh_db(&format!("{prefix}_{db}")).await;
        }
        s1.fresh_db(&format!("{prefix}_main")).await;
        let config = write_config(&s1, &s2, &prefix, pool_max, transactions);
        let shoal = ShoalProcess::start(&["--config".to_string(), config.display().to_string()]);
        Layout {
            s1,
            s2,
            prefix,
            shoal,
        }
    }

    async fn client(&self) -> Conn {
        match Conn::new(self.shoal.opts_as("app", "app-secret", Some("shop"))).await {
            Ok(c) => c,
            Err(e) => panic!("connect through shoal: {e}\n{}", self.shoal.log()),
        }
    }

    /// A direct connection to datanode `n` (1-based).
    async fn datanode(&self, n: usize) -> Conn {
        let server = if n <= 2 { &self.s1 } else { &self.s2 };
        let db = format!("{}_{}", self.prefix, if n % 2 == 1 { 1 } else { 2 });
        server.conn(Some(&db)).await
    }

    /// The ids of `table` on datanode `n`, sorted.
    async fn ids_on(&self, n: usize, table: &str, column: &str) -> Vec<i64> {
        let mut c = self.datanode(n).await;
        let ids: Vec<i64> = c
            .query(format!("SELECT {column} FROM {table} ORDER BY {column}"))
            .await
            .unwrap_or_else(|e| panic!("datanode {n}: {e}"));
        c.disconnect().await.unwrap();
        ids
    }

    async fn create_tables(&self, c: &mut Conn) {
        for ddl in [
            "CREATE TABLE orders (id INT PRIMARY KEY, user_name VARCHAR(20), amount INT) ENGINE=InnoDB",
            "CREATE TABLE order_item (item_id INT PRIMARY KEY, order_id INT, qty INT) ENGINE=InnoDB",
            "CREATE TABLE country (code CHAR(2) PRIMARY KEY, name VARCHAR(40)) ENGINE=InnoDB",
        ] {
            c.query_drop(ddl)
                .await
                .unwrap_or_else(|e| panic!("{ddl}: {e}\n{}", self.shoal.log()));
        }
    }
}

fn write_config(
    s1: &Backend,
    s2: &Backend,
    prefix: &str,
    pool_max: usize,
    transactions: &str,
) -> PathBuf {
    let path = scratch_dir().join(format!("{prefix}.yaml"));
    let text = format!(
        "users:
  - name: app
    password: app-secret
    schemas: [shop]
  - name: ops
    password: ops-secret
    schemas: [shop]
datahosts:
  - name: dh1
    primary: {{ address: {h1}:{p1}, user: {u}, password: {pw} }}
    pool: {{ max: {pool_max}, acquire_timeout: 30s }}
  - name: dh2
    primary: {{ address: {h2}:{p2}, user: {u}, password: {pw} }}
    pool: {{ max: {pool_max}, acquire_timeout: 30s }}
datanodes:
  - name: dn$1-4
    datahost: dh$1-2
    database: {prefix}_$1-2
  - name: dn_main
    datahost: dh1
    database: {prefix}_main
rules:
  - name: by_id
    algorithm: mod
schemas:
  - name: shop
    default_datanode: dn_main
    transactions: {transactions}
    tables:
      - {{ name: orders, type: sharded, shard_key: id, rule: by_id, datanodes: dn$1-4 }}
      - {{ name: order_item, type: child, parent: orders, join_key: order_id }}
      - {{ name: country, type: global, datanodes: dn$1-4 }}
      - {{ name: logs, type: sharded, shard_key: id, rule: by_id, datanodes: dn$1-2,
          tables_per_datanode: 2, physical_name: \"logs_{{index}}\" }}
      - {{ name: events, type: sharded, shard_key: id, rule: by_id, datanodes: dn$1-4,
          sequence: {{ datanode: dn_main, step: 5 }} }}
",
        h1 = s1.host,
        p1 = s1.port,
        h2 = s2.host,
        p2 = s2.port,
        u = s1.user,
        pw = s1.password,
    );
    std::fs::write(&path, text).expect("write config");
    path
}

/// Datanode (1-based) of an orders id under `mod 4`.
fn dn_of(id: i64) -> usize {
    (id.rem_euclid(4) + 1) as usize
}

#[tokio::test]
async fn ddl_is_broadcast_and_rows_land_on_their_datanodes() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;
    for n in 1..=4 {
        assert_eq!(l.ids_on(n, "orders", "id").await, Vec::<i64>::new());
    }

    // A multi-row INSERT is split per shard; one OK with every row counted.
    c.query_drop(
        "INSERT INTO orders (id, user_name, amount) VALUES \
         (1,'ann',10),(2,'bob',20),(3,'cy',30),(4,'di',40),(5,'ed',50),(6,'flo',60),\
         (7,'gus',70),(8,'hal',80),(9,'ivy',90),(10,'jo',100),(11,'kim',110),(12,'lu',120)",
    )
    .await
    .unwrap_or_else(|e| panic!("split insert: {e}\n{}", l.shoal.log()));
    assert_eq!(c.affected_rows(), 12);
    for n in 1..=4 {
        let want: Vec<i64> = (1..=12).filter(|id| dn_of(*id) == n).collect();
        assert_eq!(l.ids_on(n, "orders", "id").await, want, "datanode dn{n}");
    }

    // A point read goes to one shard, a scatter read sees every row exactly once.
    let name: Option<String> = c
        .query_first("SELECT user_name FROM orders WHERE id = 7")
        .await
        .unwrap();
    assert_eq!(name.as_deref(), Some("gus"));
    let mut all: Vec<i64> = c.query("SELECT id FROM orders").await.unwrap();
    all.sort();
    assert_eq!(all, (1..=12).collect::<Vec<_>>());
    let limited: Vec<i64> = c.query("SELECT id FROM orders LIMIT 5").await.unwrap();
    assert_eq!(limited.len(), 5);
    let filtered: Vec<i64> = c
        .query("SELECT id FROM orders WHERE amount > 85")
        .await
        .unwrap();
    let mut filtered = filtered;
    filtered.sort();
    assert_eq!(filtered, vec![9, 10, 11, 12]);

    // ER child rows follow their parent's shard.
    c.query_drop("INSERT INTO order_item (item_id, order_id, qty) VALUES (100, 5, 1), (101, 6, 2)")
        .await
        .unwrap();
    assert_eq!(l.ids_on(dn_of(5), "order_item", "item_id").await, vec![100]);
    assert_eq!(l.ids_on(dn_of(6), "order_item", "item_id").await, vec![101]);
    let joined: Vec<(i64, String, i64)> = c
        .query(
            "SELECT i.item_id, o.user_name, i.qty FROM orders o JOIN order_item i \
             ON i.order_id = o.id WHERE o.id = 6",
        )
        .await
        .unwrap();
    assert_eq!(joined, vec![(101, "flo".to_string(), 2)]);
}

#[tokio::test]
async fn cross_shard_updates_and_deletes_sum_affected_rows() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;
    c.query_drop(
        "INSERT INTO orders (id, user_name, amount) VALUES \
         (1,'a',1),(2,'b',2),(3,'c',3),(4,'d',4),(5,'e',5),(6,'f',6),(7,'g',7),(8,'h',8)",
    )
    .await
    .unwrap();
    c.query_drop("UPDATE orders SET amount = amount + 100 WHERE amount >= 3")
        .await
        .unwrap();
    assert_eq!(c.affected_rows(), 6, "rows changed on all shards together");
    let mut d = l.datanode(dn_of(8)).await;
    let amount: Option<i64> = d
        .query_first("SELECT amount FROM orders WHERE id = 8")
        .await
        .unwrap();
    assert_eq!(amount, Some(108));
    c.query_drop("DELETE FROM orders WHERE id IN (1, 2, 3)")
        .await
        .unwrap();
    assert_eq!(c.affected_rows(), 3);
    c.query_drop("DELETE FROM orders WHERE amount > 100")
        .await
        .unwrap();
    assert_eq!(c.affected_rows(), 5);
    for n in 1..=4 {
        assert_eq!(
            l.ids_on(n, "orders", "id").await,
            Vec::<i64>::new(),
            "dn{n}"
        );
    }
}

#[tokio::test]
async fn global_table_writes_reach_every_copy_or_none() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;
    c.query_drop("INSERT INTO country VALUES ('fr', 'France'), ('de', 'Germany')")
        .await
        .unwrap();
    assert_eq!(c.affected_rows(), 2, "a global write counts its rows once");
    for n in 1..=4 {
        let mut d = l.datanode(n).await;
        let codes: Vec<String> = d
            .query("SELECT code FROM country ORDER BY code")
            .await
            .unwrap();
        assert_eq!(codes, vec!["de", "fr"], "copy on dn{n}");
    }
    // A row only dn3 has makes the insert fail there: the other copies must not keep it.
    let mut d3 = l.datanode(3).await;
    d3.query_drop("INSERT INTO country VALUES ('it', 'Italy (dn3 only)')")
        .await
        .unwrap();
    let (code, _, message) = server_error(
        c.query_drop("INSERT INTO country VALUES ('it', 'Italy')")
            .await,
    );
    assert_eq!(code, 1062, "{message}");
    assert!(
        message.contains("dn3"),
        "the error names the datanode: {message}"
    );
    for n in [1, 2, 4] {
        let mut d = l.datanode(n).await;
        let n_it: Option<i64> = d
            .query_first("SELECT COUNT(*) FROM country WHERE code = 'it'")
            .await
            .unwrap();
        assert_eq!(n_it, Some(0), "dn{n} kept a row of a failed global write");
    }
    // The session goes on.
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn transactions_span_datanodes() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;

    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("INSERT INTO orders (id, user_name, amount) VALUES (1, 'x', 1)")
        .await
        .unwrap();
    c.query_drop("INSERT INTO orders (id, user_name, amount) VALUES (2, 'y', 2)")
        .await
        .unwrap();
    // Not visible outside before the commit.
    assert_eq!(l.ids_on(dn_of(1), "orders", "id").await, Vec::<i64>::new());
    c.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(l.ids_on(dn_of(1), "orders", "id").await, Vec::<i64>::new());
    assert_eq!(l.ids_on(dn_of(2), "orders", "id").await, Vec::<i64>::new());

    c.query_drop("START TRANSACTION").await.unwrap();
    c.query_drop("INSERT INTO orders (id, user_name, amount) VALUES (1, 'x', 1)")
        .await
        .unwrap();
    c.query_drop("UPDATE orders SET amount = 5 WHERE id = 1")
        .await
        .unwrap();
    c.query_drop("INSERT INTO orders (id, user_name, amount) VALUES (2, 'y', 2)")
        .await
        .unwrap();
    // Inside the transaction, the session reads its own writes.
    let mut seen: Vec<i64> = c.query("SELECT id FROM orders").await.unwrap();
    seen.sort();
    assert_eq!(seen, vec![1, 2]);
    assert_eq!(l.ids_on(dn_of(2), "orders", "id").await, Vec::<i64>::new());
    c.query_drop("COMMIT").await.unwrap();
    assert_eq!(l.ids_on(dn_of(1), "orders", "id").await, vec![1]);
    assert_eq!(l.ids_on(dn_of(2), "orders", "id").await, vec![2]);

    // autocommit=0: the next statements are a transaction on every datanode they touch.
    c.query_drop("SET autocommit = 0").await.unwrap();
    c.query_drop("INSERT INTO orders (id, user_name, amount) VALUES (3, 'z', 3), (4, 'w', 4)")
        .await
        .unwrap();
    assert_eq!(l.ids_on(dn_of(3), "orders", "id").await, Vec::<i64>::new());
    c.query_drop("ROLLBACK").await.unwrap();
    c.query_drop("INSERT INTO orders (id, user_name, amount) VALUES (3, 'z', 3), (4, 'w', 4)")
        .await
        .unwrap();
    c.query_drop("COMMIT").await.unwrap();
    assert_eq!(l.ids_on(dn_of(3), "orders", "id").await, vec![3]);
    assert_eq!(l.ids_on(dn_of(4), "orders", "id").await, vec![4]);
    c.query_drop("SET autocommit = 1").await.unwrap();

    // A write on several datanodes failing inside a transaction rolls it back everywhere, and
    // the error says so.
    let mut d1 = l.datanode(1).await;
    d1.query_drop("INSERT INTO country VALUES ('es', 'only on dn1')")
        .await
        .unwrap();
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("INSERT INTO orders (id, user_name, amount) VALUES (5, 'v', 5)")
        .await
        .unwrap();
    let (code, _, message) = server_error(
        c.query_drop("INSERT INTO country VALUES ('es', 'Spain')")
            .await,
    );
    assert_eq!(code, 1062, "{message}");
    assert!(message.contains("rolled back"), "{message}");
    c.query_drop("COMMIT").await.unwrap();
    // id 1 (committed before) shares id 5's datanode; 5 must be gone.
    assert_eq!(
        l.ids_on(dn_of(5), "orders", "id").await,
        vec![1],
        "the transaction's earlier write survived its rollback"
    );
}

/// With `transactions: best_effort`, a COMMIT that fails on one datanode after another
/// committed is never reported as success: error 1180 names the datanodes that committed and
/// those that did not, and the rows are where it says. (Under XA, the default, the same
/// failure rolls back every datanode: tests/tests/proxy_xa.rs.)
#[tokio::test]
async fn a_partial_commit_is_reported_with_the_datanodes_on_each_side() {
    let l = Layout::start_best_effort().await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;

    c.query_drop("BEGIN").await.unwrap();
    // id 4 lands on dn1 (server 1), then id 2 on dn3 (server 2): committed in that order.
    c.query_drop("INSERT INTO orders (id, user_name, amount) VALUES (4, 'a', 1)")
        .await
        .unwrap();
    c.query_drop("INSERT INTO orders (id, user_name, amount) VALUES (2, 'b', 2)")
        .await
        .unwrap();
    assert_eq!((dn_of(4), dn_of(2)), (1, 3));
    // dn3's connection dies before the COMMIT (its server rolls its transaction back).
    let mut admin = l.datanode(3).await;
    let ids: Vec<u64> = admin
        .exec(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()",
            (format!("{}_1", l.prefix),),
        )
        .await
        .unwrap();
    assert!(!ids.is_empty(), "no Shoal connection on dn3");
    for id in ids {
        let _ = admin.query_drop(format!("KILL CONNECTION {id}")).await;
    }
    let (code, state, message) = server_error(c.query_drop("COMMIT").await);
    assert_eq!((code, state.as_str()), (1180, "HY000"), "{message}");
    assert!(
        message.contains("committed on datanodes dn1") && message.contains("NOT committed on dn3"),
        "{message}"
    );
    assert_eq!(l.ids_on(1, "orders", "id").await, vec![4]);
    assert_eq!(l.ids_on(3, "orders", "id").await, Vec::<i64>::new());
    // The session goes on, outside any transaction.
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM orders").await.unwrap();
    assert_eq!(n, Some(1));
    c.query_drop("INSERT INTO orders (id, user_name, amount) VALUES (2, 'b', 2)")
        .await
        .unwrap();
    assert_eq!(l.ids_on(3, "orders", "id").await, vec![2]);
}

/// Server-level SHOW statements are answered by one datanode's server (in the session's
/// variables); SHOW WARNINGS stays refused.
#[tokio::test]
async fn server_level_show_statements_are_answered() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    c.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES'")
        .await
        .unwrap();
    let mode: Vec<(String, String)> = c.query("SHOW VARIABLES LIKE 'sql_mode'").await.unwrap();
    assert_eq!(mode, vec![("sql_mode".into(), "ANSI_QUOTES".into())]);
    let uptime: Vec<(String, String)> = c.query("SHOW GLOBAL STATUS LIKE 'Uptime'").await.unwrap();
    assert_eq!(uptime.len(), 1, "{uptime:?}");
    let charsets: Vec<mysql_async::Row> = c.query("SHOW CHARACTER SET").await.unwrap();
    assert!(charsets.len() > 10);
    let (code, _, message) = server_error(c.query_drop("SHOW WARNINGS").await);
    assert_eq!(code, 1235, "{message}");
}

#[tokio::test]
async fn refusals_reach_the_client_and_the_session_goes_on() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;
    let (code, state, message) = server_error(
        c.query_drop(
            "SELECT id FROM orders WHERE amount > ANY (SELECT amount FROM orders) FOR UPDATE",
        )
        .await,
    );
    assert!(code != 0 && !state.is_empty(), "{code} {state} {message}");
    // A user variable is held by the session (dump files save system variables in them);
    // read outside SET it is refused, as a backend would answer NULL.
    c.query_drop("SET @v = 1").await.unwrap();
    let (code, _, message) = server_error(c.query_drop("SELECT @v").await);
    assert!(message.contains("user variable"), "{code}: {message}");
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    // A shard's own error (an unknown column) is the statement's error.
    let (code, _, message) = server_error(c.query_drop("SELECT nope FROM orders").await);
    assert_eq!(code, 1054, "{message}");
    let n: Vec<i64> = c.query("SELECT id FROM orders").await.unwrap();
    assert!(n.is_empty());
}

#[tokio::test]
async fn shoal_answers_metadata_in_logical_names() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;
    let mut m = l.s1.conn(Some(&format!("{}_main", l.prefix))).await;
    m.query_drop("CREATE TABLE notes (id INT)").await.unwrap();

    // As one MariaDB lists them: information_schema and the logical schema.
    let dbs: Vec<String> = c.query("SHOW DATABASES").await.unwrap();
    assert_eq!(dbs, vec!["information_schema", "shop"]);
    let db: Option<String> = c.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(db.as_deref(), Some("shop"));
    // The `mariadb` client's `status` asks this first: the logical schema and Shoal's
    // client, not a datanode's database and Shoal's backend account.
    // Prepared (binary protocol, as mysql_async and Connector/J with server-side statements
    // send it): the same answers.
    let status = "select DATABASE(), USER(), CURRENT_USER() limit 1";
    let text: Option<(Option<String>, String, String)> = c.query_first(status).await.unwrap();
    let want = (Some("shop".into()), "app@127.0.0.1".into(), "app@%".into());
    assert_eq!(text, Some(want));
    let prepared: Option<(Option<String>, String, String)> =
        c.exec_first(status, ()).await.unwrap();
    assert_eq!(prepared, text);
    // As MariaDB: LIMIT decides whether the one row comes.
    for (sql, rows) in [
        ("SELECT DATABASE() LIMIT 1", 1),
        ("SELECT DATABASE() LIMIT 0", 0),
        ("SELECT DATABASE() LIMIT 1, 1", 0),
    ] {
        let text: Vec<Option<String>> = c.query(sql).await.unwrap();
        assert_eq!(text.len(), rows, "{sql}");
        let prepared: Vec<Option<String>> = c.exec(sql, ()).await.unwrap();
        assert_eq!(prepared, text, "{sql} prepared");
    }
    // Prepared without a schema: NULL, then the schema of each execute.
    let mut none = Conn::new(l.shoal.opts_as("app", "app-secret", None))
        .await
        .expect("connect without a schema");
    let db: Option<Option<String>> = none.exec_first("SELECT DATABASE() AS d", ()).await.unwrap();
    assert_eq!(db, Some(None));
    none.query_drop("USE shop").await.unwrap();
    let db: Option<String> = none.exec_first("SELECT DATABASE() AS d", ()).await.unwrap();
    assert_eq!(
        db.as_deref(),
        Some("shop"),
        "the schema of each execute, not of PREPARE"
    );
    none.disconnect().await.unwrap();
    // A prepared SHOW is answered over the catalog at each execute, as the text one.
    let prepared: Vec<String> = c.exec("SHOW TABLES", ()).await.unwrap();
    // Shoal's other own answers are refused when prepared, naming what.
    let (code, _, msg) = server_error(c.exec_drop("EXPLAIN ROUTE SELECT 1", ()).await);
    assert_eq!(code, 1235, "{msg}");
    assert!(msg.contains("EXPLAIN ROUTE"), "{msg}");
    // The configured tables that exist, and the default datanode's own: `events` and `logs`
    // are configured but not created here, and one server lists no table before its CREATE.
    let tables: Vec<String> = c.query("SHOW TABLES").await.unwrap();
    assert_eq!(tables, vec!["country", "notes", "order_item", "orders"]);
    assert_eq!(prepared, tables);
    c.query_drop("CREATE TABLE logs (id INT PRIMARY KEY) ENGINE=InnoDB")
        .await
        .unwrap();
    let tables: Vec<String> = c.query("SHOW TABLES").await.unwrap();
    assert_eq!(
        tables,
        vec!["country", "logs", "notes", "order_item", "orders"]
    );
    c.query_drop("DROP TABLE logs").await.unwrap();
    let like: Vec<String> = c.query("SHOW TABLES LIKE 'order%'").await.unwrap();
    assert_eq!(like, vec!["order_item", "orders"]);
    let route: Vec<Row> = c
        .query("EXPLAIN ROUTE SELECT * FROM orders WHERE id = 6")
        .await
        .unwrap();
    assert_eq!(route.len(), 1, "one datanode");
    let dn: String = route[0].get(0).unwrap();
    assert_eq!(dn, "dn3");
    // Unlisted tables live on the default datanode.
    c.query_drop("INSERT INTO notes VALUES (7)").await.unwrap();
    let n: Option<i64> = m.query_first("SELECT COUNT(*) FROM notes").await.unwrap();
    assert_eq!(n, Some(1));
}

#[tokio::test]
async fn check_refuses_two_datanodes_on_one_server_database() {
    let path = scratch_dir().join(format!("{}.yaml", unique_name("dup")));
    std::fs::write(
        &path,
        "users:
  - { name: app, password: pw, schemas: [shop] }
datahosts:
  - name: dh1
    primary: { address: 127.0.0.1:3307, user: u }
  - name: dh2
    primary: { address: localhost:3307, user: u }
datanodes:
  - { name: dn$1-2, datahost: dh$1-2, database: shop }
schemas:
  - { name: shop, default_datanode: dn1 }
",
    )
    .unwrap();
    for args in [&["--check", "--config"][..], &["--config"][..]] {
        let out = std::process::Command::new(shoal_tests::shoal::shoal_bin())
            .args(args)
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("read its rows twice"), "{args:?}: {stderr}");
    }
}

/// Scatter reads merged as one MariaDB would answer them: the same rows in a plain database on
/// one server are the reference.
#[tokio::test]
async fn scatter_reads_merge_like_one_database() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;
    let reference_db = format!("{}_ref", l.prefix);
    l.s2.fresh_db(&reference_db).await;
    let mut r = l.s2.conn(Some(&reference_db)).await;
    r.query_drop(
        "CREATE TABLE orders (id INT PRIMARY KEY, user_name VARCHAR(20), amount INT) ENGINE=InnoDB",
    )
    .await
    .unwrap();
    let mut values = Vec::new();
    for id in 1..=40i64 {
        let amount = if id % 7 == 0 {
            "NULL".to_string()
        } else {
            ((id * 37) % 50).to_string()
        };
        values.push(format!("({id}, 'u{}', {amount})", id % 5));
    }
    let insert = format!(
        "INSERT INTO orders (id, user_name, amount) VALUES {}",
        values.join(",")
    );
    c.query_drop(&insert).await.unwrap();
    r.query_drop(&insert).await.unwrap();
    for sql in [
        "SELECT id, amount FROM orders ORDER BY amount, id",
        "SELECT id, amount FROM orders ORDER BY amount DESC, id LIMIT 7",
        "SELECT id FROM orders ORDER BY id LIMIT 5 OFFSET 30",
        "SELECT COUNT(*) FROM orders",
        "SELECT COUNT(*), SUM(amount), MIN(amount), MAX(amount) FROM orders",
        "SELECT COUNT(*) FROM orders WHERE id > 1000",
        "SELECT user_name, COUNT(*), SUM(amount) FROM orders GROUP BY user_name ORDER BY user_name",
        "SELECT DISTINCT user_name FROM orders ORDER BY user_name",
    ] {
        let want: Vec<Row> = r.query(sql).await.unwrap();
        let got: Vec<Row> = match c.query(sql).await {
            Ok(rows) => rows,
            Err(e) => panic!("{sql}: {e}"),
        };
        let show = |rows: &[Row]| -> Vec<Vec<mysql_async::Value>> {
            rows.iter().map(|r| r.clone().unwrap()).collect()
        };
        assert_eq!(show(&got), show(&want), "{sql}");
    }
}

/// The rows of a result as values, for comparing Shoal with the reference database.
fn values(rows: &[Row]) -> Vec<Vec<mysql_async::Value>> {
    rows.iter().map(|r| r.clone().unwrap()).collect()
}

/// A global (or unlisted) table on the preserved side of an outer join whose NULL-extended
/// side is sharded, or with the sharded table only in a subquery, would be answered by every
/// shard (each null-extends or repeats the global rows): refused across shards, exact where
/// the sharded side is routed to one shard. The allowed outer joins answer as one database.
#[tokio::test]
async fn outer_joins_preserving_a_global_table_are_exact_or_refused() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;
    c.query_drop("CREATE TABLE notes (id INT PRIMARY KEY, code CHAR(2)) ENGINE=InnoDB")
        .await
        .unwrap();
    let reference_db = format!("{}_ref", l.prefix);
    l.s2.fresh_db(&reference_db).await;
    let mut r = l.s2.conn(Some(&reference_db)).await;
    for ddl in [
        "CREATE TABLE orders (id INT PRIMARY KEY, user_name VARCHAR(20), amount INT) ENGINE=InnoDB",
        "CREATE TABLE order_item (item_id INT PRIMARY KEY, order_id INT, qty INT) ENGINE=InnoDB",
        "CREATE TABLE country (code CHAR(2) PRIMARY KEY, name VARCHAR(40)) ENGINE=InnoDB",
        "CREATE TABLE notes (id INT PRIMARY KEY, code CHAR(2)) ENGINE=InnoDB",
    ] {
        r.query_drop(ddl).await.unwrap();
    }
    // Countries u0..u9; orders of users u0..u4 on every shard: u5..u9 match no order, u0..u4
    // match orders on some shards only.
    let countries: Vec<String> = (0..10).map(|k| format!("('u{k}', 'land {k}')")).collect();
    let orders: Vec<String> = (1..=30)
        .map(|id| format!("({id}, 'u{}', {})", (id * 3) % 5, id * 10))
        .collect();
    let items: Vec<String> = (1..=20)
        .map(|k| format!("({k}, {}, {k})", (k * 7) % 25 + 1))
        .collect();
    let notes: Vec<String> = (1..=12)
        .map(|id| format!("({id}, 'u{}')", id % 7))
        .collect();
    for insert in [
        format!("INSERT INTO country VALUES {}", countries.join(", ")),
        format!(
            "INSERT INTO orders (id, user_name, amount) VALUES {}",
            orders.join(", ")
        ),
        format!(
            "INSERT INTO order_item (item_id, order_id, qty) VALUES {}",
            items.join(", ")
        ),
        format!("INSERT INTO notes (id, code) VALUES {}", notes.join(", ")),
    ] {
        c.query_drop(&insert)
            .await
            .unwrap_or_else(|e| panic!("{insert}: {e}"));
        r.query_drop(&insert).await.unwrap();
    }
    for sql in [
        // The statement and its forms.
        "SELECT c.code, o.id FROM country c LEFT JOIN orders o ON o.user_name = c.code ORDER BY c.code, o.id",
        "SELECT c.code, o.id FROM country c LEFT OUTER JOIN orders o ON o.user_name = c.code",
        "SELECT c.code, o.id FROM orders o RIGHT JOIN country c ON o.user_name = c.code",
        "SELECT c.code, COUNT(o.id) FROM country c LEFT JOIN orders o ON o.user_name = c.code GROUP BY c.code",
        "SELECT c.code, o.id FROM country c LEFT JOIN orders o ON o.user_name = c.code AND o.id = 6",
        "SELECT c.code, o.id FROM country c LEFT JOIN (orders o JOIN order_item i ON i.order_id = o.id) ON o.user_name = c.code",
        // The sharded table only in a correlated subquery (uncorrelated ones run first and
        // are bound as values: compared below).
        "SELECT c.code FROM country c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.user_name = c.code)",
        "SELECT c.code, (SELECT COUNT(*) FROM orders o WHERE o.user_name = c.code) FROM country c",
        "SELECT (SELECT COUNT(*) FROM orders)",
        // An unlisted table preserved.
        "SELECT n.id, o.id FROM notes n LEFT JOIN orders o ON o.id = n.id ORDER BY n.id",
    ] {
        // Gathered on one datanode over copies of the tables (issue 49): each country once,
        // as one MariaDB answers (some statements fix no order: compared sorted).
        let want: Vec<Row> = r.query(sql).await.unwrap();
        let got: Vec<Row> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        let sorted = |rows: &[Row]| {
            let mut v: Vec<String> = values(rows).iter().map(|r| format!("{r:?}")).collect();
            v.sort();
            v
        };
        let (got, want) = (sorted(&got), sorted(&want));
        assert_eq!(got, want, "{sql}");
    }
    for sql in [
        "SELECT o.id, c.name FROM orders o LEFT JOIN country c ON c.code = o.user_name ORDER BY o.id",
        "SELECT o.id, c.name FROM country c RIGHT JOIN orders o ON c.code = o.user_name ORDER BY o.id",
        "SELECT o.id, i.item_id FROM orders o LEFT JOIN order_item i ON i.order_id = o.id ORDER BY o.id, i.item_id",
        "SELECT o.id, COUNT(i.item_id) FROM orders o LEFT JOIN order_item i ON i.order_id = o.id GROUP BY o.id ORDER BY o.id",
        "SELECT c.code, c2.name FROM country c LEFT JOIN country c2 ON c2.code = c.code AND c2.code < 'u3' ORDER BY c.code",
        // The sharded side routed to one shard: exact there.
        "SELECT c.code, o.id FROM country c LEFT JOIN orders o ON o.user_name = c.code WHERE o.id = 6 ORDER BY c.code",
        "SELECT c.code FROM country c WHERE c.code NOT IN (SELECT user_name FROM orders WHERE id = 7) ORDER BY c.code",
        // The sharded table only in an uncorrelated subquery: run first, bound as values.
        "SELECT c.code FROM country c WHERE c.code IN (SELECT user_name FROM orders) ORDER BY c.code",
        "SELECT c.code FROM country c WHERE c.code NOT IN (SELECT user_name FROM orders WHERE user_name IS NOT NULL) ORDER BY c.code",
        // Inner ON conditions in a NULL-extended nested join filter only that join's rows.
        "SELECT o2.id, o.id FROM orders o2 LEFT JOIN (orders o JOIN order_item i ON i.order_id = o.id AND o.id = 10) ON o.id = o2.id ORDER BY o2.id",
        "SELECT o2.id, o.id FROM orders o JOIN order_item i ON i.order_id = o.id AND o.id = 10 RIGHT JOIN orders o2 ON o2.id = o.id ORDER BY o2.id, o.id",
        "SELECT o.id, c.name FROM orders o LEFT JOIN (country c JOIN country c2 ON c2.code = c.code) ON c.code = o.user_name ORDER BY o.id",
    ] {
        let want: Vec<Row> = r.query(sql).await.unwrap();
        let got: Vec<Row> = match c.query(sql).await {
            Ok(rows) => rows,
            Err(e) => panic!("{sql}: {e}"),
        };
        assert!(!want.is_empty(), "{sql}: no rows to compare");
        assert_eq!(values(&got), values(&want), "{sql}");
    }
}

/// Shards whose physical tables differ in what only describes the values (a column widened on
/// some datanodes, as a migration in progress leaves it): the merged result is described as
/// one MariaDB describes the widest table (length, decimals, flags, character set), with the
/// same rows; shards that differ in how values read (a DOUBLE here, a DECIMAL there) are still
/// refused.
#[tokio::test]
async fn column_definitions_merge_across_datanodes_like_one_table() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    c.query_drop(
        "CREATE TABLE events (id INT PRIMARY KEY, name VARCHAR(10), price DECIMAL(8,2), f DOUBLE) \
         ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
    )
    .await
    .unwrap();
    let widen = "ALTER TABLE events MODIFY name VARCHAR(30), MODIFY price DECIMAL(12,2)";
    for n in [2, 3] {
        l.datanode(n).await.query_drop(widen).await.unwrap();
    }
    let reference_db = format!("{}_ref", l.prefix);
    l.s2.fresh_db(&reference_db).await;
    let mut r = l.s2.conn(Some(&reference_db)).await;
    r.query_drop(
        "CREATE TABLE events (id INT PRIMARY KEY, name VARCHAR(30), price DECIMAL(12,2), f DOUBLE) \
         ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
    )
    .await
    .unwrap();
    let names = ["a", "bbbbbbb", "cc", "dddd", "e"];
    let rows: Vec<String> = (1..=16)
        .map(|id| {
            format!(
                "({id}, '{}', {}.{}, {})",
                names[id % 5],
                id * 37 % 1000,
                id * 3 % 100,
                id as f64 / 4.0
            )
        })
        .collect();
    let insert = format!(
        "INSERT INTO events (id, name, price, f) VALUES {}",
        rows.join(", ")
    );
    c.query_drop(&insert).await.unwrap();
    r.query_drop(&insert).await.unwrap();
    let describe = |rows: &[Row]| -> Vec<String> {
        rows[0]
            .columns_ref()
            .iter()
            .map(|k| {
                format!(
                    "{} {:?} length {} decimals {} flags {:?} charset {}",
                    k.name_str(),
                    k.column_type(),
                    k.column_length(),
                    k.decimals(),
                    k.flags(),
                    k.character_set()
                )
            })
            .collect()
    };
    for sql in [
        "SELECT id, name, price, f FROM events ORDER BY id",
        "SELECT CONCAT(name, ':', id) FROM events WHERE id < 8 ORDER BY id",
        "SELECT price * 2, ROUND(price, 1), CASE WHEN id > 3 THEN name ELSE price END FROM events ORDER BY id",
        "SELECT name, SUM(price), MAX(price), COUNT(*) FROM events GROUP BY name ORDER BY name",
        "SELECT id, name FROM events WHERE name LIKE 'b%' ORDER BY id DESC LIMIT 2",
    ] {
        let want: Vec<Row> = r.query(sql).await.unwrap();
        let got: Vec<Row> = match c.query(sql).await {
            Ok(rows) => rows,
            Err(e) => panic!("{sql}: {e}"),
        };
        assert!(!want.is_empty(), "{sql}: no rows to compare");
        assert_eq!(describe(&got), describe(&want), "{sql}");
        assert_eq!(values(&got), values(&want), "{sql}");
        // The binary protocol: the executes' definitions merge the same way.
        let want: Vec<Row> = r.exec(sql, ()).await.unwrap();
        let got: Vec<Row> = match c.exec(sql, ()).await {
            Ok(rows) => rows,
            Err(e) => panic!("{sql} (prepared): {e}"),
        };
        assert_eq!(describe(&got), describe(&want), "{sql} (prepared)");
        assert_eq!(values(&got), values(&want), "{sql} (prepared)");
    }
    // A column that reads differently per datanode: refused, never merged.
    l.datanode(4)
        .await
        .query_drop("ALTER TABLE events MODIFY f DECIMAL(10,3)")
        .await
        .unwrap();
    let (code, _, message) = server_error(c.query::<Row, _>("SELECT id, f FROM events").await);
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains("different columns"), "{message}");
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM events").await.unwrap();
    assert_eq!(n, Some(16));
}

/// `CONNECTION_ID()` is the handshake id; `KILL QUERY <it>` from another session of the same
/// user stops the query on its datanode; another user's session is refused with 1095.
#[tokio::test]
async fn kill_uses_shoal_ids() {
    let l = Layout::start().await;
    let mut a = l.client().await;
    let mut b = l.client().await;
    let id: Option<u64> = a.query_first("SELECT CONNECTION_ID()").await.unwrap();
    assert_eq!(
        id,
        Some(u64::from(a.id())),
        "CONNECTION_ID() is the handshake id"
    );
    let mut ops = Conn::new(l.shoal.opts_as("ops", "ops-secret", Some("shop")))
        .await
        .unwrap();
    let (code, _, message) = server_error(ops.query_drop(format!("KILL QUERY {}", a.id())).await);
    assert_eq!(code, 1095, "{message}");
    let (code, _, message) = server_error(b.query_drop("KILL QUERY 999999").await);
    assert_eq!(code, 1094, "{message}");

    // The sleep runs on a backend of the first server (the schema's default datanode).
    let mut direct = l.s1.conn(None).await;
    shoal_tests::assert_kill_query_interrupts(&mut direct, &mut b, a, "SELECT SLEEP(60)").await;
}

/// Prepared statements on sharded and global tables: every EXECUTE routes by its bound values.
#[tokio::test]
async fn prepared_statements_route_by_bound_values() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;
    let insert = c
        .prep("INSERT INTO orders (id, user_name, amount) VALUES (?, ?, ?)")
        .await
        .unwrap_or_else(|e| panic!("prepare insert: {e}\n{}", l.shoal.log()));
    for id in 1..=8i64 {
        c.exec_drop(&insert, (id, format!("u{id}"), id * 10))
            .await
            .unwrap_or_else(|e| panic!("execute insert {id}: {e}\n{}", l.shoal.log()));
        assert_eq!(c.affected_rows(), 1);
    }
    for n in 1..=4 {
        let want: Vec<i64> = (1..=8).filter(|id| dn_of(*id) == n).collect();
        assert_eq!(l.ids_on(n, "orders", "id").await, want, "datanode dn{n}");
    }
    let name: Option<String> = c
        .exec_first("SELECT user_name FROM orders WHERE id = ?", (6,))
        .await
        .unwrap();
    assert_eq!(name.as_deref(), Some("u6"));
    let mut big: Vec<i64> = c
        .exec("SELECT id FROM orders WHERE amount > ?", (45,))
        .await
        .unwrap();
    big.sort();
    assert_eq!(big, vec![5, 6, 7, 8]);
    c.exec_drop("UPDATE orders SET amount = ? WHERE id = ?", (1, 3))
        .await
        .unwrap();
    assert_eq!(c.affected_rows(), 1);
    c.exec_drop("UPDATE orders SET amount = amount + ? WHERE id > ?", (1, 4))
        .await
        .unwrap();
    assert_eq!(c.affected_rows(), 4);
    c.exec_drop("INSERT INTO country VALUES (?, ?)", ("pt", "Portugal"))
        .await
        .unwrap();
    for n in 1..=4 {
        let mut d = l.datanode(n).await;
        let name: Option<String> = d
            .query_first("SELECT name FROM country WHERE code = 'pt'")
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("Portugal"), "dn{n}");
    }
    // Transaction control as prepared statements (sysbench prepares BEGIN and COMMIT).
    for (end, kept) in [("ROLLBACK", false), ("COMMIT", true)] {
        c.exec_drop("BEGIN", ()).await.unwrap();
        c.exec_drop(&insert, (21i64, "t", 1)).await.unwrap();
        c.exec_drop(&insert, (22i64, "t", 1)).await.unwrap();
        c.exec_drop(end, ())
            .await
            .unwrap_or_else(|e| panic!("{end}: {e}\n{}", l.shoal.log()));
        let n: Option<i64> = c
            .query_first("SELECT COUNT(*) FROM orders WHERE id IN (21, 22)")
            .await
            .unwrap();
        assert_eq!(n, Some(if kept { 2 } else { 0 }), "after {end}");
    }
    let (code, _, msg) = server_error(c.exec_drop("SET SESSION sql_mode = ?", ("ANSI",)).await);
    assert_eq!(code, 1235, "{msg}");
    c.close(insert).await.unwrap();
    let one: Option<i64> = c.exec_first("SELECT ?", (1,)).await.unwrap();
    assert_eq!(one, Some(1));
}

/// A client's prepared statement does not hold backend connections: with 2 connections per
/// datahost, 12 clients keep statements open and execute them at once, each execute borrowing
/// whichever connection is free and finding (or preparing) the statement there. The backend
/// statement is reused only under the sql_mode it was prepared in.
#[tokio::test]
async fn open_prepared_statements_share_a_small_pool() {
    let l = Layout::start_with_pool(2).await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;
    c.query_drop("INSERT INTO orders (id, user_name, amount) VALUES (1,'u1',10),(2,'u2',20),(3,'u3',30),(4,'u4',40)")
        .await
        .unwrap();
    let mut clients = Vec::new();
    for _ in 0..12 {
        let mut k = l.client().await;
        let s = k
            .prep("SELECT user_name FROM orders WHERE id = ?")
            .await
            .unwrap_or_else(|e| panic!("prepare: {e}\n{}", l.shoal.log()));
        clients.push((k, s));
    }
    let mut runs = tokio::task::JoinSet::new();
    for (n, (mut k, s)) in clients.into_iter().enumerate() {
        runs.spawn(async move {
            for round in 0..20i64 {
                let id = (n as i64 + round) % 4 + 1;
                let name: Option<String> = k
                    .exec_first(&s, (id,))
                    .await
                    .map_err(|e| format!("client {n} round {round}: {e}"))?;
                if name != Some(format!("u{id}")) {
                    return Err(format!("client {n} id {id}: {name:?}"));
                }
            }
            Ok::<_, String>(k)
        });
    }
    while let Some(r) = runs.join_next().await {
        match r.expect("client task") {
            Ok(k) => k.disconnect().await.unwrap(),
            Err(e) => panic!("{e}\n{}", l.shoal.log()),
        }
    }
}

/// Transactions over several datanodes of one datahost never wait on each other for pool
/// connections: with 4 connections per datahost, 8 clients run transactions that each touch
/// two datanodes of each server; every one commits and every update lands once.
#[tokio::test]
async fn transactions_across_datanodes_do_not_deadlock_a_small_pool() {
    let l = Layout::start_with_pool(4).await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;
    c.query_drop(
        "INSERT INTO orders (id, user_name, amount) VALUES (0,'a',0),(1,'b',0),(2,'c',0),(3,'d',0)",
    )
    .await
    .unwrap();
    let mut runs = tokio::task::JoinSet::new();
    for n in 0..8i64 {
        let mut k = l.client().await;
        runs.spawn(async move {
            for round in 0..10i64 {
                // Each transaction touches all four datanodes, starting at a different one.
                let ids: Vec<i64> = (0..4).map(|j| (n + round + j) % 4).collect();
                let mut tx = k
                    .start_transaction(Default::default())
                    .await
                    .map_err(|e| format!("client {n} BEGIN: {e}"))?;
                for id in ids {
                    tx.query_drop(format!(
                        "UPDATE orders SET amount = amount + 1 WHERE id = {id}"
                    ))
                    .await
                    .map_err(|e| format!("client {n} round {round} id {id}: {e}"))?;
                }
                tx.commit()
                    .await
                    .map_err(|e| format!("client {n} COMMIT: {e}"))?;
            }
            Ok::<_, String>(k)
        });
    }
    while let Some(r) = runs.join_next().await {
        match r.expect("client task") {
            Ok(k) => k.disconnect().await.unwrap(),
            Err(e) => panic!("{e}\n{}", l.shoal.log()),
        }
    }
    for n in 1..=4 {
        let mut d = l.datanode(n).await;
        let amount: Option<i64> = d.query_first("SELECT amount FROM orders").await.unwrap();
        assert_eq!(amount, Some(80), "dn{n}: 8 clients x 10 transactions");
    }
}

/// Backend statements outlive the client statement on their connection, for the next session
/// that prepares the same text, but only under the state they were parsed in: with one
/// connection per datahost, both sessions below run on the same backend connection, and the
/// same text reads a column under ANSI_QUOTES and a string literal by default.
#[tokio::test]
async fn a_backend_statement_is_reused_only_under_the_sql_mode_it_was_prepared_in() {
    let l = Layout::start_with_pool(1).await;
    for n in 1..=4 {
        let mut d = l.datanode(n).await;
        d.query_drop("CREATE TABLE orders (id INT PRIMARY KEY, user_name VARCHAR(20), amount INT)")
            .await
            .unwrap();
        let id = n - 1;
        d.query_drop(format!("INSERT INTO orders VALUES ({id}, 'u{id}', 0)"))
            .await
            .unwrap();
    }
    // id 3 lives on dn4, the only datanode of dh2 in use here.
    let sql = "SELECT \"user_name\" FROM orders WHERE id = ?";
    let mut ansi = l.client().await;
    ansi.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES'")
        .await
        .unwrap();
    let mut plain = l.client().await;
    for round in 0..3 {
        let got: Option<String> = ansi.exec_first(sql, (3,)).await.unwrap();
        assert_eq!(got.as_deref(), Some("u3"), "ANSI_QUOTES, round {round}");
        let got: Option<String> = plain
            .exec_first(sql, (3,))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", l.shoal.log()));
        assert_eq!(
            got.as_deref(),
            Some("user_name"),
            "default mode, round {round}"
        );
    }
}

/// Statements are planned as the backend reads them under the session's sql_mode: `"id"` is a
/// string in the default mode (no pruning: every shard) and the column under ANSI_QUOTES (one
/// shard); `||` is OR by default and concatenation under PIPES_AS_CONCAT.
#[tokio::test]
async fn the_session_sql_mode_decides_how_statements_route() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;
    c.query_drop(
        "INSERT INTO orders (id, user_name, amount) VALUES (1, 'a', 1), (2, 'b', 2), (6, 'c', 3)",
    )
    .await
    .unwrap();
    let route = |rows: Vec<Row>| -> Vec<String> {
        rows.iter()
            .map(|r| r.get::<String, _>(0).unwrap())
            .filter(|dn| dn != "(merge)")
            .collect()
    };
    let quoted = "EXPLAIN ROUTE SELECT * FROM orders WHERE \"id\" = 6";
    assert_eq!(route(c.query(quoted).await.unwrap()).len(), 4);
    let n: Option<i64> = c
        .query_first("SELECT COUNT(*) FROM orders WHERE id = 1 AND id = 1 || id = 2")
        .await
        .unwrap();
    assert_eq!(n, Some(2), "|| is OR in the default sql_mode");

    c.query_drop("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
        .await
        .unwrap();
    assert_eq!(route(c.query(quoted).await.unwrap()), vec!["dn3"]);
    let n: Option<i64> = c
        .query_first("SELECT COUNT(*) FROM orders WHERE \"id\" = 6")
        .await
        .unwrap();
    assert_eq!(n, Some(1));

    c.query_drop("SET SESSION sql_mode = 'PIPES_AS_CONCAT'")
        .await
        .unwrap();
    let v: Option<String> = c
        .query_first("SELECT user_name || 'x' FROM orders WHERE id = 6")
        .await
        .unwrap();
    assert_eq!(
        v.as_deref(),
        Some("cx"),
        "|| concatenates under PIPES_AS_CONCAT"
    );
}

/// A sharded table with a global sequence: INSERTs that leave out the shard key get ids from
/// segments of `shoal_sequence` on dn_main, unique across two Shoal processes sharing it; the
/// OK and `LAST_INSERT_ID()` report the first id, multi-row INSERTs get consecutive ids.
#[tokio::test]
async fn global_sequence_fills_the_shard_key_across_two_shoal_processes() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    c.query_drop(
        "CREATE TABLE events (id BIGINT PRIMARY KEY, note VARCHAR(20), src INT) ENGINE=InnoDB",
    )
    .await
    .unwrap();

    c.query_drop("INSERT INTO events (note) VALUES ('a')")
        .await
        .unwrap();
    let first = c.last_insert_id().expect("an insert id in the OK");
    assert_eq!(c.affected_rows(), 1);
    let lid: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
    assert_eq!(lid, Some(first));
    let note: Option<String> = c
        .query_first(format!("SELECT note FROM events WHERE id = {first}"))
        .await
        .unwrap();
    assert_eq!(note.as_deref(), Some("a"));
    assert_eq!(
        l.ids_on(dn_of(first as i64), "events", "id").await,
        vec![first as i64]
    );

    // Several rows: consecutive ids from the first, over several shards; more rows than a
    // segment (step 5) holds.
    c.query_drop("INSERT INTO events (note, src) VALUES ('b', 0), ('c', 0), ('d', 0), ('e', 0), ('f', 0), ('g', 0), ('h', 0)")
        .await
        .unwrap();
    let multi = c.last_insert_id().expect("an insert id");
    assert_eq!(c.affected_rows(), 7);
    let lid: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
    assert_eq!(lid, Some(multi));
    let rows: Vec<(i64, String)> = c
        .query("SELECT id, note FROM events WHERE src = 0 ORDER BY id")
        .await
        .unwrap();
    let want: Vec<(i64, String)> = ["b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .enumerate()
        .map(|(i, n)| (multi as i64 + i as i64, n.to_string()))
        .collect();
    assert_eq!(rows, want);

    // Two Shoal processes, two clients each, inserting at once.
    let config = scratch_dir().join(format!("{}.yaml", l.prefix));
    let second = ShoalProcess::start(&["--config".to_string(), config.display().to_string()]);
    let mut tasks = Vec::new();
    for (p, shoal) in [&l.shoal, &second].into_iter().enumerate() {
        for k in 0..2 {
            let opts = shoal.opts_as("app", "app-secret", Some("shop"));
            let src = (p * 2 + k + 1) as i64;
            tasks.push(tokio::spawn(async move {
                let mut c = Conn::new(opts).await.expect("connect");
                let mut got = Vec::new();
                for i in 0..15 {
                    let sql = if i % 3 == 0 {
                        format!("INSERT INTO events (src, note) VALUES ({src}, 'x'), ({src}, 'y')")
                    } else {
                        format!("INSERT INTO events (src, note) VALUES ({src}, 'z')")
                    };
                    c.query_drop(&sql).await.expect("insert");
                    let first = c.last_insert_id().expect("insert id");
                    for r in 0..c.affected_rows() {
                        got.push(first as i64 + r as i64);
                    }
                }
                got
            }));
        }
    }
    let mut given = Vec::new();
    for t in tasks {
        match t.await {
            Ok(g) => given.extend(g),
            Err(e) => panic!("{e}\n{}\n----\n{}", l.shoal.log(), second.log()),
        }
    }
    let mut stored = Vec::new();
    for n in 1..=4 {
        for id in l.ids_on(n, "events", "id").await {
            assert_eq!(dn_of(id), n, "id {id} on the wrong datanode");
            stored.push(id);
        }
    }
    stored.sort_unstable();
    let before = stored.len();
    stored.dedup();
    assert_eq!(stored.len(), before, "an id given twice");
    assert_eq!(stored.len(), 1 + 7 + 4 * (5 * 2 + 10));
    given.sort_unstable();
    let reported: std::collections::BTreeSet<i64> = given.iter().copied().collect();
    assert_eq!(
        reported.len(),
        given.len(),
        "the OKs reported overlapping ids"
    );
    assert!(reported.iter().all(|id| stored.binary_search(id).is_ok()));

    // A sharded table without a sequence still refuses an INSERT without its key.
    let (code, _, message) = server_error(
        c.query_drop("INSERT INTO orders (user_name) VALUES ('x')")
            .await,
    );
    assert_eq!(code, 1235, "{message}");
}

/// What one prepared INSERT did, told apart from where its ids start: rows affected, whether
/// the OK's insert id and `LAST_INSERT_ID()` (as text and prepared) are the first row's id, and
/// the statement's rows as (id - that first id, note), in id order.
#[derive(Debug, PartialEq, Eq)]
struct InsertSeen {
    affected: u64,
    ok_id_is_first: bool,
    last_insert_id_is_first: (bool, bool),
    rows: Vec<(i64, String)>,
}

/// Runs prepared `sql` (its table written `T`) with `params` into `table` on `c`, then reads
/// back the rows of `src`.
async fn prepared_insert(
    c: &mut Conn,
    table: &str,
    sql: &str,
    params: Vec<mysql_async::Value>,
    src: i64,
) -> (InsertSeen, i64) {
    let sql = sql.replace(" T ", &format!(" {table} "));
    c.exec_drop(&sql, params)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let affected = c.affected_rows();
    let ok_id = c.last_insert_id().unwrap_or(0) as i64;
    let text: Option<i64> = c.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
    let prepared: Option<i64> = c.exec_first("SELECT LAST_INSERT_ID()", ()).await.unwrap();
    let rows: Vec<(i64, String)> = c
        .query(format!(
            "SELECT id, note FROM {table} WHERE src = {src} ORDER BY id"
        ))
        .await
        .unwrap();
    let first = rows.first().map_or(0, |r| r.0);
    let seen = InsertSeen {
        affected,
        ok_id_is_first: ok_id == first,
        last_insert_id_is_first: (text == Some(first), prepared == Some(first)),
        rows: rows.into_iter().map(|(id, n)| (id - first, n)).collect(),
    };
    (seen, first)
}

/// Prepared INSERTs that leave out the shard key of a table with a `sequence` (one row, several
/// rows, more rows than a segment, `INSERT ... SET`) run as one MariaDB runs them into an
/// AUTO_INCREMENT table: each execute takes the next ids, consecutive within the statement, the
/// OK's insert id and `LAST_INSERT_ID()` are the first, each row lands on its key's datanode.
#[tokio::test]
async fn prepared_inserts_take_the_shard_key_from_the_sequence_as_auto_increment_does() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    c.query_drop(
        "CREATE TABLE events (id BIGINT PRIMARY KEY, note VARCHAR(20), src INT) ENGINE=InnoDB",
    )
    .await
    .unwrap();
    // The oracle: one MariaDB, an AUTO_INCREMENT key.
    let mut one = l.s1.conn(Some(&format!("{}_main", l.prefix))).await;
    one.query_drop(
        "CREATE TABLE events_ai (id BIGINT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(20), src INT)",
    )
    .await
    .unwrap();
    let one_row = "INSERT INTO T (note, src) VALUES (?, ?)";
    let three_rows = "INSERT INTO T (src, note) VALUES (?, 'x'), (?, ?), (?, 'z')";
    let set_form = "INSERT INTO T SET note = ?, src = ?";
    let steps: Vec<(&str, Vec<mysql_async::Value>)> = vec![
        (one_row, vec!["a".into(), 1.into()]),
        // The same statement again: the next id.
        (one_row, vec!["b".into(), 2.into()]),
        (three_rows, vec![3.into(), 3.into(), "y".into(), 3.into()]),
        (set_form, vec!["c".into(), 4.into()]),
        (
            "INSERT INTO T (note, src) VALUES (?, 5), (?, 5), (?, 5), (?, 5), (?, 5), (?, 5), (?, 5)",
            ["a", "b", "c", "d", "e", "f", "g"]
                .into_iter()
                .map(mysql_async::Value::from)
                .collect(),
        ),
        (one_row, vec!["d".into(), 6.into()]),
    ];
    let mut firsts = Vec::new();
    for (k, (sql, params)) in steps.into_iter().enumerate() {
        let src = k as i64 + 1;
        let want = prepared_insert(&mut one, "events_ai", sql, params.clone(), src)
            .await
            .0;
        let (got, first) = prepared_insert(&mut c, "events", sql, params, src).await;
        assert_eq!(got, want, "step {src}: {sql}\n{}", l.shoal.log());
        firsts.push(first);
        for (offset, _) in &got.rows {
            let id = first + offset;
            assert!(
                l.ids_on(dn_of(id), "events", "id").await.contains(&id),
                "id {id} is not on datanode {}",
                dn_of(id)
            );
        }
    }
    assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{firsts:?}");
    let total: Option<i64> = c.query_first("SELECT COUNT(*) FROM events").await.unwrap();
    assert_eq!(total, Some(1 + 1 + 3 + 1 + 7 + 1));
}

/// Table metadata answers in logical names: SHOW CREATE TABLE and SHOW INDEX of a
/// table-per-shard table name the logical table, not `logs_0`; DESCRIBE works;
/// information_schema.TABLES/COLUMNS list the logical table once.
#[tokio::test]
async fn table_metadata_in_logical_names() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;
    c.query_drop("CREATE TABLE logs (id INT PRIMARY KEY, msg VARCHAR(10), UNIQUE KEY u_msg (msg)) ENGINE=InnoDB")
        .await
        .unwrap();
    // The physical tables exist: logs_0, logs_1 on dn1, logs_2, logs_3 on dn2.
    let mut d1 = l.datanode(1).await;
    let phys: Vec<String> = d1.query("SHOW TABLES LIKE 'logs%'").await.unwrap();
    assert_eq!(phys, vec!["logs_0", "logs_1"]);

    for sql in ["SHOW CREATE TABLE logs", "show create table shop.`logs`"] {
        let row: (String, String) = c.query_first(sql).await.unwrap().unwrap();
        assert_eq!(row.0, "logs", "{sql}");
        assert!(
            row.1.starts_with("CREATE TABLE `logs` ("),
            "{sql}: {}",
            row.1
        );
        assert!(!row.1.contains("logs_"), "{sql}: {}", row.1);
        assert!(row.1.contains("UNIQUE KEY `u_msg`"), "{}", row.1);
    }
    let direct: (String, String) = d1
        .query_first("SHOW CREATE TABLE logs_0")
        .await
        .unwrap()
        .unwrap();
    let got: (String, String) = c
        .query_first("SHOW CREATE TABLE logs")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.1, direct.1.replacen("`logs_0`", "`logs`", 1));

    let index: Vec<Row> = c.query("SHOW INDEX FROM logs").await.unwrap();
    assert_eq!(index.len(), 2);
    for r in &index {
        assert_eq!(r.get::<String, _>(0).as_deref(), Some("logs"));
    }
    let keys: Vec<String> = index
        .iter()
        .map(|r| r.get::<String, _>(2).unwrap())
        .collect();
    assert_eq!(keys, vec!["PRIMARY", "u_msg"]);
    let cols: Vec<Row> = c.query("DESCRIBE logs").await.unwrap();
    let names: Vec<String> = cols
        .iter()
        .map(|r| r.get::<String, _>(0).unwrap())
        .collect();
    assert_eq!(names, vec!["id", "msg"]);
    // Database-per-shard tables have their logical name on every datanode.
    let row: (String, String) = c
        .query_first("SHOW CREATE TABLE orders")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.0, "orders");

    let tables: Vec<String> = c
        .query(
            "SELECT table_name FROM information_schema.TABLES \
             WHERE table_schema = 'shop' AND table_name LIKE 'logs%'",
        )
        .await
        .unwrap();
    assert_eq!(tables, vec!["logs"]);
    let columns: Vec<String> = c
        .query(
            "SELECT column_name FROM information_schema.`COLUMNS` \
             WHERE table_name = 'logs' ORDER BY ordinal_position",
        )
        .await
        .unwrap();
    assert_eq!(columns, vec!["id", "msg"]);
    // The session goes on.
    c.query_drop("INSERT INTO logs (id, msg) VALUES (6, 'six')")
        .await
        .unwrap();
    let msg: Option<String> = c
        .query_first("SELECT msg FROM logs WHERE id = 6")
        .await
        .unwrap();
    assert_eq!(msg.as_deref(), Some("six"));
}

/// Strings merge under the collation their column is declared with, not the one result
/// metadata reports (the client's `character_set_results`): a `utf8mb4_bin` column tells case
/// apart, a `latin1_swedish_ci` one sorts Ä, Å and Ö after Z and the cp1252 bytes 0x80..0x9F
/// by their byte, as one MariaDB does; a collation Shoal does not implement is refused.
#[tokio::test]
async fn string_merges_use_each_columns_declared_collation() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    let reference_db = format!("{}_ref", l.prefix);
    l.s2.fresh_db(&reference_db).await;
    let mut r = l.s2.conn(Some(&reference_db)).await;
    let ddl = "CREATE TABLE orders (id INT PRIMARY KEY, \
               user_name VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, amount INT, \
               note VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_swedish_ci, \
               uni VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci) ENGINE=InnoDB";
    c.query_drop(ddl)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", l.shoal.log()));
    r.query_drop(ddl).await.unwrap();
    let sql_text = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"));
    let mut rows = Vec::new();
    // Case and accent variants, spread over the shards (id mod 4).
    let words = [
        "a", "A", "b", "B", "ä", "Ä", "z", "Z", "å", "Ö", "ü", "y", "Y", "e", "é", "œ",
    ];
    for (i, w) in words.iter().enumerate() {
        let id = i as i64 + 1;
        rows.push(format!(
            "({id}, {u}, {amount}, {n}, {n})",
            u = sql_text(w),
            amount = id % 3,
            n = sql_text(w),
        ));
    }
    // Every latin1 character but NUL, one a row.
    for b in 1u32..=255 {
        let ch = match b {
            0x80..=0x9F => char::from_u32(
                [
                    0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030,
                    0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F, 0x0090, 0x2018, 0x2019, 0x201C,
                    0x201D, 0x2022, 0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D,
                    0x017E, 0x0178,
                ][(b - 0x80) as usize],
            ),
            _ => char::from_u32(b),
        }
        .expect("latin1 character");
        let id = 1000 + b as i64;
        rows.push(format!(
            "({id}, NULL, NULL, {n}, NULL)",
            n = sql_text(&ch.to_string())
        ));
    }
    let insert = format!(
        "INSERT INTO orders (id, user_name, amount, note, uni) VALUES {}",
        rows.join(",")
    );
    c.query_drop(&insert)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", l.shoal.log()));
    r.query_drop(&insert).await.unwrap();
    let show = |rows: Vec<Row>| -> Vec<Vec<mysql_async::Value>> {
        rows.into_iter().map(|r| r.unwrap()).collect()
    };
    for (sql, ordered) in [
        (
            "SELECT id, user_name FROM orders WHERE id < 1000 ORDER BY user_name, id",
            true,
        ),
        (
            "SELECT id, user_name FROM orders WHERE id < 1000 ORDER BY user_name DESC LIMIT 5",
            true,
        ),
        (
            "SELECT DISTINCT user_name FROM orders WHERE id < 1000 ORDER BY user_name",
            true,
        ),
        (
            "SELECT user_name, COUNT(*), SUM(amount) FROM orders WHERE id < 1000 GROUP BY user_name",
            false,
        ),
        ("SELECT MIN(user_name), MAX(user_name) FROM orders", true),
        ("SELECT id FROM orders ORDER BY note, id", true),
        (
            "SELECT id FROM orders ORDER BY note DESC, id LIMIT 20",
            true,
        ),
        (
            "SELECT COUNT(*), MIN(id), MAX(id) FROM orders GROUP BY note",
            false,
        ),
        (
            "SELECT COUNT(*), MIN(id) FROM orders WHERE id < 1000 GROUP BY note ORDER BY note",
            true,
        ),
        ("SELECT MAX(note) FROM orders WHERE id < 1000", true),
    ] {
        let mut want = show(r.query(sql).await.unwrap());
        let mut got = match c.query(sql).await {
            Ok(rows) => show(rows),
            Err(e) => panic!("{sql}: {e}\n{}", l.shoal.log()),
        };
        if !ordered {
            want.sort_by_key(|r| format!("{r:?}"));
            got.sort_by_key(|r| format!("{r:?}"));
        }
        assert_eq!(got, want, "{sql}");
    }
    // utf8mb4_unicode_ci ('ß' = 'ss', ignorable characters) is not implemented: refused, not
    // sorted as the utf8mb4_general_ci its metadata reports.
    for sql in [
        "SELECT id FROM orders WHERE id < 1000 ORDER BY uni, id",
        "SELECT uni, COUNT(*) FROM orders WHERE id < 1000 GROUP BY uni",
        "SELECT DISTINCT uni FROM orders WHERE id < 1000",
    ] {
        let (code, _, msg) = server_error(c.query_drop(sql).await);
        assert_eq!(code, 1235, "{sql}: {msg}");
        assert!(msg.contains("collation"), "{sql}: {msg}");
    }
    // The session goes on.
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM orders").await.unwrap();
    assert_eq!(n, Some(words.len() as i64 + 255));
}

/// While a pool has room, a backend connection stays in its datanode's database: a session
/// that needs a datanode gets a connection opened there rather than an idle one of another
/// datanode of the same server, whose database switch would cost a round trip on every
/// hand-off (a 32-thread sysbench run over 4 datanodes switched on 46% of its statements).
#[tokio::test(flavor = "multi_thread")]
async fn pooled_connections_stay_in_their_datanodes_database() {
    let (_cluster, backend) = shoal_tests::private_cluster();
    let prefix = unique_name("pl");
    for n in ["1", "2"] {
        backend.fresh_db(&format!("{prefix}_{n}")).await;
    }
    let shoal = one_server_shoal(&backend, &prefix, 2, "pool: { max: 32 }");
    let opts = || shoal.opts_as("app", "app-secret", Some("shop"));
    let mut c = Conn::new(opts()).await.expect("connect through shoal");
    c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        .await
        .expect("create");
    c.query_drop("INSERT INTO t (id, v) VALUES (0, 10), (1, 11), (2, 12), (3, 13)")
        .await
        .expect("insert");
    c.disconnect().await.expect("disconnect");

    // Six sessions read from both datanodes, then leave: their connections, idle now, are in
    // both databases.
    let mut first = Vec::new();
    for _ in 0..6 {
        let mut s = Conn::new(opts()).await.expect("connect");
        let n: Vec<i64> = s.query("SELECT v FROM t WHERE id IN (0, 1)").await.unwrap();
        assert_eq!(n.len(), 2);
        first.push(s);
    }
    for s in first {
        s.disconnect().await.expect("disconnect");
    }
    let switches = || async {
        let mut d = backend.conn(None).await;
        let row: Option<(String, u64)> = d
            .query_first("SHOW GLOBAL STATUS LIKE 'Com_change_db'")
            .await
            .expect("status");
        d.disconnect().await.expect("disconnect");
        row.expect("a Com_change_db row").1
    };
    let before = switches().await;

    // Twelve sessions at once on dn1 only: six idle connections are in its database, the
    // other six must be opened there (the pool has room), not switched from dn2's.
    let mut second = Vec::new();
    for _ in 0..12 {
        let mut s = Conn::new(opts()).await.expect("connect");
        let v: Option<i64> = s.query_first("SELECT v FROM t WHERE id = 2").await.unwrap();
        assert_eq!(v, Some(12));
        second.push(s);
    }
    assert_eq!(
        switches().await - before,
        0,
        "backend connections switched database while the pool had room\n{}",
        shoal.log()
    );
    for s in second {
        s.disconnect().await.expect("disconnect");
    }
}

/// A prepared statement runs in the database it was prepared in, whatever database its
/// connection is in by then: one backend connection per server serves the executes of every
/// datanode there, instead of one connection (and MariaDB thread) per datanode a session
/// touches. The answers come from the right datanode each time: every id lives in one
/// datanode's database only, so a read in the connection's current database would miss it.
#[tokio::test(flavor = "multi_thread")]
async fn prepared_executes_share_one_connection_per_server() {
    let FourDatanodes {
        _cluster,
        backend,
        prefix,
        shoal,
        mut c,
    } = four_datanodes_of_one_server("px").await;
    let stmt = c
        .prep("SELECT v FROM t WHERE id = ?")
        .await
        .expect("prepare");
    for round in 0..3 {
        for id in 0..16i64 {
            let v: Option<i64> = c.exec_first(&stmt, (id,)).await.expect("execute");
            assert_eq!(v, Some(100 + id), "id {id}, round {round}");
        }
    }
    let mut d = backend.conn(None).await;
    assert_eq!(
        connections_in_datanodes(&mut d, &prefix).await,
        1,
        "backend connections the session holds for 4 datanodes of one server\n{}",
        shoal.log()
    );
    // Text statements after the executes still read each datanode's own rows.
    let v: Vec<i64> = c
        .query("SELECT v FROM t WHERE id IN (1, 2, 7) ORDER BY id")
        .await
        .expect("text read");
    assert_eq!(v, vec![101, 102, 107]);
    d.disconnect().await.expect("disconnect");
    c.disconnect().await.expect("disconnect");
}

/// A text SELECT on one datanode goes out with its tables qualified with the datanode's
/// database, so that one backend connection per server serves every datanode there, as for
/// prepared statements. Every id lives in one datanode's database only: a read in the
/// connection's current database would miss it. What the router cannot qualify (a stored
/// function called by its bare name) still runs in its datanode's own database: each
/// database's `shard_label()` names it, and would name another datanode's were the statement
/// run on the shared connection. `DATABASE()` beside tables is the logical schema (a
/// datanode would name its physical database: the router puts the name in).
#[tokio::test(flavor = "multi_thread")]
async fn text_reads_share_one_connection_per_server() {
    let mut s = four_datanodes_of_one_server("tq").await;
    let (prefix, c) = (s.prefix.clone(), &mut s.c);
    let mut d = s.backend.conn(None).await;
    for n in 1..=4 {
        d.query_drop(format!(
            "CREATE FUNCTION `{prefix}_{n}`.shard_label() RETURNS INT DETERMINISTIC RETURN {n}"
        ))
        .await
        .expect("create function");
    }
    for round in 0..3 {
        for id in 0..16i64 {
            let v: Option<i64> = c
                .query_first(format!("SELECT v FROM t WHERE id = {id}"))
                .await
                .expect("text read");
            assert_eq!(v, Some(100 + id), "id {id}, round {round}");
        }
    }
    assert_eq!(
        connections_in_datanodes(&mut d, &prefix).await,
        1,
        "backend connections the session holds for text reads of 4 datanodes of one server\n{}",
        s.shoal.log()
    );
    for id in 0..16i64 {
        let n = id % 4 + 1;
        let row: Option<(i64, i64)> = c
            .query_first(format!("SELECT v, shard_label() FROM t WHERE id = {id}"))
            .await
            .expect("read with a stored function");
        assert_eq!(
            row,
            Some((100 + id, n)),
            "id {id} ran outside datanode dn{n}'s database"
        );
    }
    let row: Option<(i64, String)> = c
        .query_first("SELECT v, DATABASE() FROM t WHERE id = 1 AND DATABASE() = 'shop'")
        .await
        .expect("DATABASE() beside a table");
    assert_eq!(row, Some((101, "shop".to_string())));
    d.disconnect().await.expect("disconnect");
    s.c.disconnect().await.expect("disconnect");
}

/// Backend connections whose current database is one of the datanodes `{prefix}_*`.
async fn connections_in_datanodes(d: &mut Conn, prefix: &str) -> i64 {
    d.query_first(format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB LIKE '{prefix}\\_%'"
    ))
    .await
    .expect("processlist")
    .expect("a count")
}

/// A private server with 4 datanodes' databases seeded by [`seed_four_datanodes`], Shoal over
/// them, and a client session in schema `shop`.
struct FourDatanodes {
    _cluster: Cluster,
    backend: Backend,
    prefix: String,
    shoal: ShoalProcess,
    c: Conn,
}

async fn four_datanodes_of_one_server(tag: &str) -> FourDatanodes {
    let (_cluster, backend) = shoal_tests::private_cluster();
    let prefix = unique_name(tag);
    seed_four_datanodes(&backend, &prefix).await;
    let shoal = one_server_shoal(&backend, &prefix, 4, "");
    let c = Conn::new(shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .expect("connect through shoal");
    FourDatanodes {
        _cluster,
        backend,
        prefix,
        shoal,
        c,
    }
}

/// `t (id, v)` with ids 0..16 and `v = 100 + id` in the databases `{prefix}_1..4`, each id in
/// the one its datanode holds under the mod rule over dn1..dn4 (dn{n}: `id % 4 == n - 1`).
/// Written on the backend directly: Shoal opens no connection before the test's session.
async fn seed_four_datanodes(backend: &Backend, prefix: &str) {
    for n in 1..=4 {
        let db = format!("{prefix}_{n}");
        backend.fresh_db(&db).await;
        let mut d = backend.conn(Some(&db)).await;
        d.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
            .await
            .expect("create");
        for id in (0..16).filter(|id| id % 4 == n - 1) {
            d.exec_drop("INSERT INTO t VALUES (?, ?)", (id, 100 + id))
                .await
                .expect("insert");
        }
        d.disconnect().await.expect("disconnect");
    }
}

/// Shoal sends a backend statement its parameter types only when they differ from the last
/// ones it sent there (the server keeps them; sending them again costs MariaDB about a fifth
/// of a point select). A client that changes a parameter's type between executes must still
/// be read right: were the new types not sent, the server would read a string's bytes as the
/// integer it last saw, or a NULL flag with the wrong width, and miss the row. The types the
/// server holds outlive its own re-prepare after an ALTER TABLE.
#[tokio::test(flavor = "multi_thread")]
async fn prepared_executes_send_types_again_when_they_change() {
    let mut s = four_datanodes_of_one_server("pt").await;
    let c = &mut s.c;
    let stmt = c
        .prep("SELECT id FROM t WHERE id = ? AND (v = ? OR ? IS NULL)")
        .await
        .expect("prepare");
    use mysql_async::Value;
    for round in 0..3 {
        if round == 2 {
            // MariaDB prepares its statements again after the table changes; the types it
            // holds must survive that, since the next execute (the last round's types again)
            // sends none.
            c.query_drop("ALTER TABLE t ADD COLUMN w INT")
                .await
                .expect("alter through shoal");
        }
        for id in 0..16i64 {
            let v = 100 + id;
            // The routing parameter stays an integer; the others change type every execute.
            // A row matches where `v = a` or `b` is NULL.
            let typed: [(Value, Value, bool); 7] = [
                (Value::Int(v), Value::Int(v), true),
                (
                    Value::Bytes(v.to_string().into_bytes()),
                    Value::Int(0),
                    true,
                ),
                (Value::Double(v as f64), Value::Bytes(b"x".to_vec()), true),
                (Value::UInt(v as u64 + 1), Value::UInt(1), false),
                (Value::NULL, Value::NULL, true),
                (Value::NULL, Value::Int(1), false),
                (Value::Int(v), Value::Int(v), true),
            ];
            for (k, (a, b, hit)) in typed.into_iter().enumerate() {
                let got: Option<i64> = c
                    .exec_first(&stmt, (Value::Int(id), a, b))
                    .await
                    .expect("execute");
                assert_eq!(
                    got,
                    hit.then_some(id),
                    "id {id}, variant {k}, round {round}"
                );
            }
        }
    }
    s.c.disconnect().await.expect("disconnect");
}

/// A prepared read over a table-per-shard table: two physical tables on each datanode are
/// read side by side (the second one on a connection of its own, with its own backend
/// statement), merged in order; inside a transaction they are read as one UNION ALL on the
/// transaction's connection (another connection would read outside its snapshot).
#[tokio::test]
async fn prepared_reads_over_tables_of_one_datanode() {
    let l = Layout::start().await;
    let mut c = l.client().await;
    l.create_tables(&mut c).await;
    c.query_drop("CREATE TABLE logs (id INT PRIMARY KEY, msg VARCHAR(10))")
        .await
        .unwrap();
    c.query_drop(
        "INSERT INTO logs (id, msg) VALUES (1,'a'),(2,'b'),(3,'c'),(4,'d'),(5,'e'),(6,'f'),\
         (7,'g'),(8,'h')",
    )
    .await
    .unwrap();
    // Each physical table holds some of the rows: the read needs all four.
    let mut used = 0;
    for (n, table) in [(1, "logs_0"), (1, "logs_1"), (2, "logs_2"), (2, "logs_3")] {
        let mut d = l.datanode(n).await;
        let k: i64 = d
            .query_first(format!("SELECT COUNT(*) FROM {table}"))
            .await
            .unwrap()
            .unwrap();
        used += (k > 0) as usize;
    }
    assert_eq!(used, 4, "rows spread over every physical table");
    let stmt = c
        .prep("SELECT id, msg FROM logs WHERE id > ? ORDER BY id DESC LIMIT 5")
        .await
        .unwrap();
    for (from, want) in [(0, vec![8, 7, 6, 5, 4]), (5, vec![8, 7, 6]), (8, vec![])] {
        let rows: Vec<(i64, String)> = c.exec(&stmt, (from,)).await.unwrap();
        let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        assert_eq!(ids, want, "id > {from}");
    }
    let count: Option<i64> = c
        .exec_first("SELECT COUNT(*) FROM logs WHERE msg <> ?", ("c",))
        .await
        .unwrap();
    assert_eq!(count, Some(7));

    // Inside a transaction each datanode's two tables are read as one statement on the
    // transaction's connection, which sees its uncommitted rows.
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("INSERT INTO logs (id, msg) VALUES (9, 'i'), (10, 'j')")
        .await
        .unwrap();
    let rows: Vec<(i64, String)> = c.exec(&stmt, (6,)).await.unwrap();
    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    assert_eq!(ids, vec![10, 9, 8, 7]);
    // MariaDB types a UNION's integer column by its width (LONG for a short BIGINT
    // expression): the client still gets the types one statement has, as outside the
    // transaction, with the values read right in both protocols.
    let narrowed = "SELECT MAX(LENGTH(msg)), MAX(id), COUNT(*) FROM logs";
    let inside = column_types_and_rows(&mut c, narrowed).await;
    c.query_drop("ROLLBACK").await.unwrap();
    let outside = column_types_and_rows(&mut c, narrowed).await;
    assert_eq!(
        inside.0, outside.0,
        "column types inside and outside a transaction"
    );
    assert_eq!(inside.1, vec![vec![Some(1), Some(10), Some(10)]; 2]);
    assert_eq!(outside.1, vec![vec![Some(1), Some(8), Some(8)]; 2]);
    let rows: Vec<(i64, String)> = c.exec(&stmt, (6,)).await.unwrap();
    assert_eq!(rows, vec![(8, "h".into()), (7, "g".into())]);
}

/// The column types `sql` returns as text and as a prepared statement (the two must agree),
/// and its rows read both ways.
async fn column_types_and_rows(
    c: &mut mysql_async::Conn,
    sql: &str,
) -> (Vec<ColumnType>, Vec<Vec<Option<i64>>>) {
    let mut types = Vec::new();
    let mut rows = Vec::new();
    for prepared in [false, true] {
        let (t, got): (Vec<ColumnType>, Vec<Row>) = if prepared {
            let stmt = c.prep(sql).await.unwrap();
            let mut r = c.exec_iter(stmt, ()).await.unwrap();
            (column_types(&r), r.collect().await.unwrap())
        } else {
            let mut r = c.query_iter(sql).await.unwrap();
            (column_types(&r), r.collect().await.unwrap())
        };
        for row in got {
            rows.push(
                (0..row.len())
                    .map(|i| row.get::<Option<i64>, _>(i).flatten())
                    .collect(),
            );
        }
        if prepared {
            assert_eq!(t, types, "{sql}: text and prepared column types");
        }
        types = t;
    }
    (types, rows)
}

/// Shoal over `n` datanodes `{prefix}_1..` of one server, table `t` of schema `shop` sharded by
/// `id` (mod) over them, user `app`; `pool` is the datahost's extra settings line (or empty).
fn one_server_shoal(backend: &Backend, prefix: &str, n: usize, pool: &str) -> ShoalProcess {
    let datanodes: String = (1..=n)
        .map(|i| format!("  - {{ name: dn{i}, datahost: dh1, database: {prefix}_{i} }}\n"))
        .collect();
    let names: Vec<String> = (1..=n).map(|i| format!("dn{i}")).collect();
    let path = scratch_dir().join(format!("{prefix}.yaml"));
    std::fs::write(
        &path,
        format!(
            "users:
  - {{ name: app, password: app-secret, schemas: [shop] }}
datahosts:
  - name: dh1
    primary: {{ address: {h}:{p}, user: {u}, password: {pw} }}
    {pool}
datanodes:
{datanodes}rules:
  - {{ name: by_id, algorithm: mod }}
schemas:
  - name: shop
    tables:
      - {{ name: t, type: sharded, shard_key: id, rule: by_id, datanodes: \"{list}\" }}
",
            h = backend.host,
            p = backend.port,
            u = backend.user,
            pw = backend.password,
            list = names.join(", "),
        ),
    )
    .expect("write config");
    ShoalProcess::start(&["--config".to_string(), path.display().to_string()])
}

/// The column types of a result's (first) set.
fn column_types<P: mysql_async::prelude::Protocol>(
    r: &mysql_async::QueryResult<'_, '_, P>,
) -> Vec<ColumnType> {
    r.columns()
        .unwrap()
        .iter()
        .map(|col| col.column_type())
        .collect()
}
