//! The logical namespace, end to end over real MariaDB (issue 21): a client sees its logical
//! schemas and their tables, nothing of the backends behind. Physical table names of a
//! table-per-shard table are neither listed nor reachable (the schema reflection Alembic's
//! autogenerate runs would otherwise drop them), the datanodes' databases and the servers' own
//! schemas are refused, built-ins that read or write a backend host's files are refused, and
//! a comment before a statement (DBeaver prefixes every metadata query with one) never changes
//! how it is read.
//!
//! The layout is the demo's (`conf/demo.yaml.in`): `orders` sharded by `user_id` over 4
//! datanodes, its ER child `order_item`, the global `country`, and `ledger` as 8 tables by
//! quarter, two per datanode (`ledger_00` .. `ledger_07`).

use std::collections::BTreeSet;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shoal_bench::cluster::Cluster;
use shoal_tests::raw::{COM_FIELD_LIST, COM_PING, RawConn, Reply};
use shoal_tests::{ShoalProcess, server_error};

/// Database of every datanode (`a` and `b` on each server).
const DBS: [&str; 2] = ["a", "b"];

/// dn1 = server 0 `a` (the default datanode), dn2 = server 0 `b`, dn3 = server 1 `a`,
/// dn4 = server 1 `b`; `ledger_00`/`ledger_01` on dn1, `ledger_02`/`ledger_03` on dn2, ...
/// A second logical schema, `crm`, that the user `app` may not use.
/// `app`, and `ops` who may also use `crm`.
fn ops_users() -> String {
    format!(
        "{}  - {{ name: ops, password: ops-secret, schemas: [shop, crm] }}\n",
        shoal_tests::APP_USER
    )
}

/// The demo layout and schema `crm`, which has only a default datanode.
fn crm_layout() -> String {
    shoal_tests::demo_layout_yaml(1) + "  - name: crm\n    default_datanode: dn4\n"
}

const TABLES: [&str; 6] = [
    "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, amount INT) ENGINE=InnoDB",
    "CREATE TABLE order_item (id INT PRIMARY KEY, user_id INT NOT NULL, qty INT) ENGINE=InnoDB",
    "CREATE TABLE country (code CHAR(2) PRIMARY KEY, name VARCHAR(40)) ENGINE=InnoDB",
    "CREATE TABLE ledger (id INT PRIMARY KEY, day DATE NOT NULL, amount INT) ENGINE=InnoDB",
    // Unlisted: on the default datanode. `ledger_99` shares the physical names' pattern but is
    // not one of them (the topology generates ledger_00 .. ledger_07): a table like any other.
    "CREATE TABLE notes (id INT PRIMARY KEY, body TEXT) ENGINE=InnoDB",
    "CREATE TABLE ledger_99 (id INT PRIMARY KEY) ENGINE=InnoDB",
];

/// The logical tables of `shop`, as SHOW TABLES must list them.
const LOGICAL: [&str; 6] = [
    "country",
    "ledger",
    "ledger_99",
    "notes",
    "order_item",
    "orders",
];

struct Setup {
    cluster: Cluster,
    shoal: ShoalProcess,
}

impl Setup {
    async fn start() -> Setup {
        let (cluster, shoal) =
            shoal_tests::two_servers_and_shoal(&DBS, &ops_users(), &crm_layout(), "namespace")
                .await;
        let s = Setup { cluster, shoal };
        let mut c = s.client().await;
        for ddl in TABLES {
            c.query_drop(ddl)
                .await
                .unwrap_or_else(|e| panic!("{ddl}: {e}\n{}", s.shoal.log()));
        }
        // Two rows in each quarter of 2024 and 2025: every physical ledger table has rows.
        let rows: Vec<String> = (0..16)
            .map(|i| {
                let (year, quarter) = (2024 + i / 8, (i / 2) % 4);
                format!(
                    "({i}, '{year}-{:02}-{:02}', {})",
                    quarter * 3 + 1,
                    1 + i % 2 * 14,
                    i * 10
                )
            })
            .collect();
        for sql in [
            format!(
                "INSERT INTO ledger (id, day, amount) VALUES {}",
                rows.join(", ")
            ),
            "INSERT INTO orders (id, user_id, amount) VALUES (1, 1, 10), (2, 2, 20), (3, 3, 30)"
                .to_string(),
            "INSERT INTO country VALUES ('fr', 'France')".to_string(),
        ] {
            c.query_drop(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", s.shoal.log()));
        }
        s
    }

    async fn client(&self) -> Conn {
        match Conn::new(self.shoal.opts_as("app", "app-secret", Some("shop"))).await {
            Ok(c) => c,
            Err(e) => panic!("connect through shoal: {e}\n{}", self.shoal.log()),
        }
    }

    /// Rows of every physical ledger table, counted on the backends themselves.
    async fn ledger_rows_on_backends(&self) -> i64 {
        let mut total = 0;
        for (server, first) in [(0usize, 0usize), (1, 4)] {
            for (k, db) in DBS.iter().enumerate() {
                let mut b = Conn::new(self.cluster.opts(server, Some(db)))
                    .await
                    .unwrap();
                for t in [first + 2 * k, first + 2 * k + 1] {
                    let n: Option<i64> = b
                        .query_first(format!("SELECT COUNT(*) FROM ledger_{t:02}"))
                        .await
                        .unwrap_or_else(|e| panic!("ledger_{t:02} on {db}@{server}: {e}"));
                    total += n.unwrap_or(0);
                }
                b.disconnect().await.unwrap();
            }
        }
        total
    }
}

/// `SELECT COUNT(*) FROM ledger` through Shoal.
async fn ledger_rows(c: &mut Conn) -> i64 {
    let n: Option<i64> = c
        .query_first("SELECT COUNT(*) FROM ledger")
        .await
        .expect("count ledger");
    n.expect("a count")
}

/// The first column of every row.
async fn names(c: &mut Conn, sql: &str) -> BTreeSet<String> {
    let rows: Vec<Row> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter()
        .map(|r| r.get::<String, _>(0).expect("a name"))
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// Schema reflection as Alembic's autogenerate (SQLAlchemy's MySQL dialect) runs it: the
/// tables SHOW FULL TABLES lists, then SHOW CREATE TABLE of each. Only logical tables are
/// listed, each definition names its logical table, and the physical names are refused as
/// tables that do not exist, whatever the statement: no physical table is dropped or changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_sees_only_logical_tables_and_physical_names_are_unreachable() {
    let s = Setup::start().await;
    let mut c = s.client().await;

    for sql in [
        "SHOW FULL TABLES",
        "SHOW FULL TABLES FROM shop",
        "SHOW TABLES",
    ] {
        assert_eq!(names(&mut c, sql).await, set(&LOGICAL), "{sql}");
    }
    assert_eq!(
        names(&mut c, "SHOW TABLES LIKE 'ledger%'").await,
        set(&["ledger", "ledger_99"])
    );
    // SHOW TABLE STATUS is the default datanode's answer (see docs/security.md): without the
    // physical tables placed there.
    for sql in [
        "SHOW TABLE STATUS",
        "/* c */ SHOW TABLE STATUS FROM shop",
        "SHOW TABLE STATUS LIKE 'ledger%'",
    ] {
        let listed = names(&mut c, sql).await;
        assert!(listed.is_subset(&set(&LOGICAL)), "{sql}: {listed:?}");
        assert!(listed.contains("ledger_99"), "{sql}: {listed:?}");
    }
    let (code, _, _) = server_error(c.query_drop("SHOW TABLE STATUS FROM a").await);
    assert_eq!(code, 1049);
    let full: Vec<(String, String)> = c.query("SHOW FULL TABLES").await.unwrap();
    assert!(
        full.iter().all(|(_, kind)| kind == "BASE TABLE"),
        "{full:?}"
    );
    for (table, _) in &full {
        let row: Option<(String, String)> = c
            .query_first(format!("SHOW CREATE TABLE `{table}`"))
            .await
            .unwrap_or_else(|e| panic!("SHOW CREATE TABLE {table}: {e}\n{}", s.shoal.log()));
        let (name, ddl) = row.expect("one row");
        assert_eq!(&name, table);
        assert!(
            ddl.starts_with(&format!("CREATE TABLE `{table}` (")),
            "SHOW CREATE TABLE {table}: {ddl}"
        );
    }

    let before = ledger_rows(&mut c).await;
    assert_eq!(before, 16);
    assert_eq!(s.ledger_rows_on_backends().await, 16);

    for (sql, table) in [
        ("DROP TABLE ledger_00", "ledger_00"),
        ("DROP TABLE shop.ledger_01", "ledger_01"),
        ("DROP TABLE IF EXISTS ledger_02", "ledger_02"),
        ("ALTER TABLE ledger_00 ADD COLUMN x INT", "ledger_00"),
        ("TRUNCATE TABLE ledger_03", "ledger_03"),
        ("RENAME TABLE ledger_00 TO gone", "ledger_00"),
        ("SELECT * FROM ledger_00", "ledger_00"),
        ("SELECT COUNT(*) FROM `LEDGER_05`", "LEDGER_05"),
        (
            "INSERT INTO ledger_00 (id, day, amount) VALUES (100, '2024-01-01', 1)",
            "ledger_00",
        ),
        ("UPDATE ledger_04 SET amount = 0", "ledger_04"),
        ("DELETE FROM ledger_06", "ledger_06"),
        ("SHOW CREATE TABLE ledger_00", "ledger_00"),
        ("SHOW COLUMNS FROM ledger_07", "ledger_07"),
        ("SHOW INDEX FROM ledger_01", "ledger_01"),
        ("DESCRIBE ledger_00", "ledger_00"),
        ("CREATE VIEW v AS SELECT * FROM ledger_00", "ledger_00"),
    ] {
        let (code, _, message) = server_error(c.query_drop(sql).await);
        assert_eq!(
            (code, message.as_str()),
            (1146, format!("Table 'shop.{table}' doesn't exist").as_str()),
            "{sql}"
        );
        // The session goes on.
        assert_eq!(ledger_rows(&mut c).await, before, "after {sql}");
    }
    assert_eq!(ledger_rows(&mut c).await, before);
    assert_eq!(s.ledger_rows_on_backends().await, before);

    // The logical table and an unlisted one with a look-alike name still work.
    c.query_drop("INSERT INTO ledger_99 VALUES (1)")
        .await
        .unwrap();
    let n: Option<i64> = c
        .query_first("SELECT COUNT(*) FROM ledger_99")
        .await
        .unwrap();
    assert_eq!(n, Some(1));
    c.disconnect().await.unwrap();
}

/// A user allowed only `shop` reaches nothing else of the backends: not the servers' own
/// schemas (accounts and password hashes, threads), not the datanodes' databases nor another
/// logical schema, not `information_schema` rows that list them, not a backend host's files,
/// and not the servers' global state. Each is refused and the session goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_reaches_only_its_logical_schemas() {
    let s = Setup::start().await;
    let mut c = s.client().await;
    let max_connections = |s: &Setup| {
        let opts = s.cluster.opts(0, None);
        async move {
            let mut b = Conn::new(opts).await.unwrap();
            let v: Option<i64> = b
                .query_first("SELECT @@global.max_connections")
                .await
                .unwrap();
            b.disconnect().await.unwrap();
            v.unwrap()
        }
    };
    let before = max_connections(&s).await;

    for (sql, code) in [
        (
            "SELECT user, host, authentication_string FROM mysql.user",
            1044,
        ),
        ("SELECT * FROM mysql.db", 1044),
        (
            "SELECT id FROM orders WHERE user_id = 1 AND id IN (SELECT 1 FROM mysql.user)",
            1044,
        ),
        ("SELECT * FROM performance_schema.threads", 1044),
        ("SELECT * FROM sys.session", 1044),
        ("SELECT * FROM a.orders", 1049),
        ("SELECT * FROM b.ledger_02", 1049),
        ("SHOW TABLES FROM a", 1049),
        ("SHOW CREATE TABLE a.orders", 1049),
        ("SELECT * FROM crm.anything", 1044),
        ("SHOW TABLES FROM crm", 1044),
        ("USE crm", 1044),
        ("USE a", 1049),
        // The catalog tables answer over the logical schema (tests/tests/proxy_catalog.rs);
        // beside a datanode's database they are refused.
        (
            "SELECT t.table_name FROM information_schema.TABLES t JOIN a.orders o ON o.id = 1",
            1049,
        ),
        ("SELECT * FROM information_schema.PROCESSLIST", 1235),
        ("SELECT * FROM information_schema.USER_PRIVILEGES", 1235),
        ("SELECT LOAD_FILE('/etc/passwd')", 1235),
        ("SET @@session.sql_mode = LOAD_FILE('/etc/passwd')", 1235),
        ("SELECT 1 INTO OUTFILE '/tmp/shoal-namespace-x'", 1235),
        ("SELECT 'x' INTO DUMPFILE '/tmp/shoal-namespace-y'", 1235),
        ("LOAD DATA INFILE '/etc/passwd' INTO TABLE notes", 1235),
        ("SET GLOBAL max_connections = 7", 1235),
        ("SET @@global.max_connections = 7", 1235),
        ("SET GLOBAL TRANSACTION ISOLATION LEVEL SERIALIZABLE", 1235),
        // FLUSH TABLES flushes the user's own tables only (dump_tools tests it); the FLUSH
        // forms that act on a whole server stay refused.
        ("FLUSH LOGS", 1235),
        ("FLUSH PRIVILEGES", 1235),
        ("SHUTDOWN", 1235),
        (
            "CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (HOST 'x')",
            1235,
        ),
        ("INSTALL SONAME 'ha_blackhole'", 1235),
        ("GRANT ALL ON *.* TO 'app'@'%'", 1235),
        ("CREATE USER intruder IDENTIFIED BY 'x'", 1235),
    ] {
        let (got, _, message) = server_error(c.query_drop(sql).await);
        assert_eq!(got, code, "{sql}: {message}");
        if code == 1044 {
            assert!(
                message.starts_with("Access denied for user 'app'@"),
                "{sql}: {message}"
            );
        }
        let one: Option<i64> = c.query_first("SELECT COUNT(*) FROM orders").await.unwrap();
        assert_eq!(one, Some(3), "the session serves after {sql}");
    }
    assert!(!std::path::Path::new("/tmp/shoal-namespace-x").exists());
    assert_eq!(max_connections(&s).await, before);
    let db: Option<String> = c.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(db.as_deref(), Some("shop"));

    // Server-level information_schema tables name no database, table or account: they pass.
    let n: Option<i64> = c
        .query_first("SELECT COUNT(*) FROM information_schema.COLLATIONS WHERE character_set_name = 'utf8mb4'")
        .await
        .unwrap();
    assert!(n.unwrap() > 0);
    // A user allowed `crm` reaches it.
    let mut ops = Conn::new(s.shoal.opts_as("ops", "ops-secret", Some("shop")))
        .await
        .unwrap();
    ops.query_drop("USE crm").await.unwrap();
    ops.disconnect().await.unwrap();
    c.disconnect().await.unwrap();
}

/// DBeaver prefixes every metadata statement with `/* ApplicationName=DBeaver ... - Metadata
/// */`; other tools use line comments. The answer is the one without the comment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leading_comment_does_not_change_how_a_statement_is_read() {
    let s = Setup::start().await;
    let mut c = s.client().await;
    for sql in [
        "SHOW ENGINES",
        "SHOW CHARSET",
        "SHOW CHARACTER SET",
        "SHOW COLLATION",
        "SHOW VARIABLES LIKE 'character_set%'",
        "SHOW SESSION VARIABLES LIKE 'sql_mode'",
        "SHOW CREATE TABLE shop.ledger",
        "SHOW CREATE TABLE ledger",
        "SHOW FULL TABLES",
    ] {
        let plain: Vec<Row> = c
            .query(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", s.shoal.log()));
        let plain: Vec<Vec<mysql_async::Value>> = plain.into_iter().map(Row::unwrap).collect();
        assert!(!plain.is_empty(), "{sql}");
        for prefix in [
            "/* ApplicationName=DBeaver 24.0.0 - Metadata */ ",
            "-- a comment\n",
            "# a comment\n",
        ] {
            let with = format!("{prefix}{sql}");
            let rows: Vec<Row> = c
                .query(&with)
                .await
                .unwrap_or_else(|e| panic!("{with}: {e}\n{}", s.shoal.log()));
            let rows: Vec<Vec<mysql_async::Value>> = rows.into_iter().map(Row::unwrap).collect();
            assert_eq!(rows, plain, "{with}");
        }
    }
    let row: Option<(String, String)> = c
        .query_first(
            "/* ApplicationName=DBeaver 24.0.0 - Metadata */ SHOW CREATE TABLE shop.ledger",
        )
        .await
        .unwrap();
    let (name, ddl) = row.unwrap();
    assert_eq!(name, "ledger");
    assert!(ddl.starts_with("CREATE TABLE `ledger` ("), "{ddl}");
    // Session statements behind comments.
    for sql in [
        "/* c */ SET NAMES utf8mb4",
        "-- c\nUSE shop",
        "# c\nBEGIN",
        "/* c */ COMMIT",
        "/* c */ SET GLOBAL max_connections = 7",
    ] {
        let r = c.query_drop(sql).await;
        if sql.contains("GLOBAL") {
            assert_eq!(server_error(r).0, 1235, "{sql}");
        } else {
            r.unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }
    c.disconnect().await.unwrap();
}

/// The six length-encoded strings a column definition starts with: catalog, schema, table,
/// org_table, name, org_name (each under 251 bytes here).
fn def_names(def: &[u8]) -> (Vec<String>, &[u8]) {
    let mut b = def;
    let mut out = Vec::new();
    for _ in 0..6 {
        let n = b[0] as usize;
        out.push(String::from_utf8_lossy(&b[1..1 + n]).into_owned());
        b = &b[1 + n..];
    }
    (out, b)
}

/// The column definitions a COM_FIELD_LIST for `table` answers, or its error code.
async fn field_list(raw: &mut RawConn, table: &str) -> Result<Vec<Vec<u8>>, (u16, String)> {
    let first = raw
        .command(COM_FIELD_LIST, format!("{table}\0").as_bytes())
        .await
        .unwrap();
    let mut defs = match first {
        Reply::Other(p) => vec![p],
        Reply::Err { code, message, .. } => return Err((code, message)),
        other => panic!("COM_FIELD_LIST {table}: {other:?}"),
    };
    defs.extend(raw.read_until_eof().await.unwrap());
    defs.pop(); // the terminator
    Ok(defs)
}

/// COM_FIELD_LIST, which the `mariadb` client's completion sends for every table: a sharded,
/// a child, a global, a table-per-shard and an unlisted table each answer the columns of their
/// first physical table, named with the logical schema and table; the bytes after the names
/// (types, flags, defaults) are the physical table's own. A physical table-per-shard name is
/// a table that does not exist, as it is for every other statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_list_answers_every_kind_of_table_in_logical_names() {
    let s = Setup::start().await;
    let (mut raw, reply) = RawConn::login(&s.shoal.addr(), "app", "app-secret", Some("shop"))
        .await
        .expect("raw login through shoal");
    assert_eq!(reply, Reply::Ok);
    // dn1 = server 0 database `a`: the first shard of orders and order_item, the first copy
    // of country, ledger_00, and the unlisted notes.
    let (mut direct, reply) = RawConn::login(
        &format!(
            "{}:{}",
            s.cluster.primary(0).host,
            s.cluster.primary(0).port
        ),
        s.cluster.user(),
        s.cluster.password(),
        Some("a"),
    )
    .await
    .expect("raw login to the backend");
    assert_eq!(reply, Reply::Ok);
    for (table, physical, columns) in [
        ("orders", "orders", &["id", "user_id", "amount"][..]),
        ("order_item", "order_item", &["id", "user_id", "qty"][..]),
        ("country", "country", &["code", "name"][..]),
        ("ledger", "ledger_00", &["id", "day", "amount"][..]),
        ("notes", "notes", &["id", "body"][..]),
    ] {
        let got = field_list(&mut raw, table)
            .await
            .unwrap_or_else(|e| panic!("COM_FIELD_LIST {table}: {e:?}\n{}", s.shoal.log()));
        let want = field_list(&mut direct, physical).await.unwrap();
        assert_eq!(got.len(), columns.len(), "{table}");
        for ((g, w), column) in got.iter().zip(&want).zip(columns) {
            let (names, rest) = def_names(g);
            assert_eq!(
                names,
                ["def", "shop", table, table, column, column],
                "COM_FIELD_LIST {table}"
            );
            let (wnames, wrest) = def_names(w);
            assert_eq!(wnames[..3], ["def", "a", physical]);
            assert_eq!(rest, wrest, "{table}.{column}: the type as the backend's");
        }
    }
    for (table, message) in [
        ("ledger_00", "Table 'shop.ledger_00' doesn't exist"),
        ("nosuch", "Table 'shop.nosuch' doesn't exist"),
    ] {
        assert_eq!(
            field_list(&mut raw, table).await,
            Err((1146, message.to_string())),
            "COM_FIELD_LIST {table}"
        );
    }
    // The session goes on.
    assert_eq!(raw.command(COM_PING, b"").await.unwrap(), Reply::Ok);

    // SHOW CREATE DATABASE: the default datanode's answer for its database, in the logical
    // schema's name.
    let mut c = s.client().await;
    let mut d = Conn::new(s.cluster.opts(0, Some("a"))).await.unwrap();
    for (sql, physical) in [
        ("SHOW CREATE DATABASE shop", "SHOW CREATE DATABASE a"),
        (
            "SHOW CREATE SCHEMA IF NOT EXISTS `shop`",
            "SHOW CREATE SCHEMA IF NOT EXISTS `a`",
        ),
    ] {
        let got: Option<(String, String)> = c
            .query_first(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", s.shoal.log()));
        let want: (String, String) = d.query_first(physical).await.unwrap().unwrap();
        assert_eq!(
            got,
            Some(("shop".to_string(), want.1.replacen("`a`", "`shop`", 1))),
            "{sql}"
        );
    }
    assert_eq!(
        server_error(c.query_drop("SHOW CREATE DATABASE a").await).0,
        1049,
        "a datanode's database is not a schema"
    );
}

/// A refusal made for the user's sake (a schema it may not use, a user variable only the
/// session holds) is final: it never turns into the INSERT Shoal completes itself (the shard
/// key from a sequence, the column list from the table), which would write into the denied
/// schema, or write NULL where the client wrote its variable. Before the statement plan kept
/// the two kinds apart, both INSERTs below ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_for_the_user_never_becomes_a_completed_insert() {
    // `crm.contacts`: sharded over dn3 and dn4, its key from a sequence on dn4.
    let layout = crm_layout()
        + "    tables:\n      \
           - { name: contacts, type: sharded, shard_key: id, rule: by_user, datanodes: \"dn3, dn4\", \
           sequence: { datanode: dn4 } }\n";
    let (_cluster, shoal) =
        shoal_tests::two_servers_and_shoal(&DBS, &ops_users(), &layout, "namespace_fill").await;
    let connect = |user: &'static str, password: &'static str| {
        let opts = shoal.opts_as(user, password, Some("shop"));
        async move { Conn::new(opts).await.expect("connect through shoal") }
    };
    let mut ops = connect("ops", "ops-secret").await;
    ops.query_drop("CREATE TABLE crm.contacts (id BIGINT PRIMARY KEY, name VARCHAR(20))")
        .await
        .unwrap_or_else(|e| panic!("create crm.contacts: {e}\n{}", shoal.log()));
    // The table works for a user who may use it: both completed forms run.
    ops.query_drop("INSERT INTO crm.contacts (name) VALUES ('ops')")
        .await
        .unwrap_or_else(|e| panic!("a sequence insert: {e}\n{}", shoal.log()));
    ops.query_drop("INSERT INTO crm.contacts VALUES (1000001, 'ops2')")
        .await
        .unwrap_or_else(|e| panic!("an insert without a column list: {e}\n{}", shoal.log()));

    let mut app = connect("app", "app-secret").await;
    for sql in [
        "INSERT INTO crm.contacts (name) VALUES ('app')",
        "INSERT INTO crm.contacts VALUES (2000002, 'app')",
    ] {
        let (code, _, message) = server_error(app.query_drop(sql).await);
        assert_eq!(code, 1044, "{sql}: {message}");
    }
    // A variable only the session holds, read by an INSERT that needs a sequence.
    ops.query_drop("SET @who = 'held'").await.unwrap();
    let (code, _, message) = server_error(
        ops.query_drop("INSERT INTO crm.contacts (name) VALUES (@who)")
            .await,
    );
    assert_eq!(code, 1235, "{message}");

    let names: Vec<Option<String>> = ops
        .query("SELECT name FROM crm.contacts ORDER BY name")
        .await
        .unwrap();
    assert_eq!(
        names,
        vec![Some("ops".to_string()), Some("ops2".to_string())],
        "only the allowed user's rows"
    );
}
