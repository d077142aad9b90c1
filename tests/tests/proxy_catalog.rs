//! The logical `information_schema` (issue 23), end to end over real MariaDB: queries over
//! the catalog tables through a sharded Shoal answer what one MariaDB database holding the
//! same logical tables answers (same columns, names, types and rows), with joins,
//! `DATABASE()`, ORDER BY and LIMIT; no physical name appears anywhere; other schemas stay
//! unreachable from such a query; DDL through Shoal shows at the next query.
//!
//! The layout is the demo's (`shoal_tests::demo_layout_yaml`): `orders` sharded over 4
//! datanodes (databases `a`, `b` on two servers), its ER child `order_item`, the global
//! `country`, `ledger` as 8 physical tables `ledger_00` .. `ledger_07`; `notes`, `note_tag`
//! and `ledger_99` unlisted (on the default datanode). The reference is database `shop` on
//! server 0 holding the same tables and rows.
//!
//! Differences left, by design, and excluded by name below: the figures that depend on how
//! rows are stored (TABLE_ROWS, AVG_ROW_LENGTH, DATA_LENGTH, MAX_DATA_LENGTH, INDEX_LENGTH,
//! DATA_FREE, AUTO_INCREMENT, CREATE_TIME, UPDATE_TIME, CHECK_TIME, STATISTICS.CARDINALITY):
//! sums over shards through Shoal (checked against the backends' own figures instead).

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shoal_bench::cluster::Cluster;
use shoal_tests::{ShoalProcess, server_error};

const DBS: [&str; 2] = ["a", "b"];

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

/// The logical tables, created through Shoal and in the reference database alike.
const TABLES: [&str; 7] = [
    "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, amount INT, \
     KEY by_user (user_id)) ENGINE=InnoDB",
    "CREATE TABLE order_item (id INT PRIMARY KEY, user_id INT NOT NULL, qty INT) ENGINE=InnoDB",
    "CREATE TABLE country (code CHAR(2) PRIMARY KEY, name VARCHAR(40)) ENGINE=InnoDB",
    "CREATE TABLE ledger (id INT PRIMARY KEY, day DATE NOT NULL, amount INT CHECK (amount >= 0), \
     cc CHAR(2), FOREIGN KEY (cc) REFERENCES country (code)) ENGINE=InnoDB",
    "CREATE TABLE notes (id INT PRIMARY KEY AUTO_INCREMENT, body TEXT) ENGINE=InnoDB",
    "CREATE TABLE note_tag (id INT PRIMARY KEY, note_id INT, tag VARCHAR(20) DEFAULT 'x', \
     CONSTRAINT tag_note FOREIGN KEY (note_id) REFERENCES notes (id) ON DELETE CASCADE) ENGINE=InnoDB",
    "CREATE TABLE ledger_99 (id INT PRIMARY KEY) ENGINE=InnoDB",
];

const VIEW: &str = "CREATE VIEW note_ids AS SELECT id FROM notes";

fn seed() -> Vec<String> {
    let rows: Vec<String> = (0..16)
        .map(|i| {
            let (year, quarter) = (2024 + i / 8, (i / 2) % 4);
            format!(
                "({i}, '{year}-{:02}-{:02}', {}, NULL)",
                quarter * 3 + 1,
                1 + i % 2 * 14,
                i * 10
            )
        })
        .collect();
    vec![
        "INSERT INTO country VALUES ('fr', 'France')".to_string(),
        format!(
            "INSERT INTO ledger (id, day, amount, cc) VALUES {}",
            rows.join(", ")
        ),
        "INSERT INTO orders (id, user_id, amount) VALUES (1, 1, 10), (2, 2, 20), (3, 3, 30)"
            .to_string(),
        "INSERT INTO notes (id, body) VALUES (1, 'one'), (2, 'two')".to_string(),
    ]
}

struct Setup {
    cluster: Cluster,
    shoal: ShoalProcess,
}

impl Setup {
    async fn start() -> Setup {
        let (cluster, shoal) =
            shoal_tests::two_servers_and_shoal(&DBS, &ops_users(), &crm_layout(), "catalog").await;
        let s = Setup { cluster, shoal };
        let mut c = s.client().await;
        let mut r = s.reference().await;
        for sql in TABLES
            .iter()
            .map(|t| t.to_string())
            .chain([VIEW.to_string()])
            .chain(seed())
        {
            c.query_drop(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", s.shoal.log()));
            r.query_drop(&sql)
                .await
                .unwrap_or_else(|e| panic!("reference: {sql}: {e}"));
        }
        s
    }

    async fn client(&self) -> Conn {
        self.client_as("app", "app-secret").await
    }

    async fn client_as(&self, user: &str, password: &str) -> Conn {
        match Conn::new(self.shoal.opts_as(user, password, Some("shop"))).await {
            Ok(c) => c,
            Err(e) => panic!("connect through shoal: {e}\n{}", self.shoal.log()),
        }
    }

    /// Database `shop` on server 0: one MariaDB holding the logical tables.
    async fn reference(&self) -> Conn {
        let mut r = Conn::new(self.cluster.opts(0, None))
            .await
            .expect("server 0");
        r.query_drop("CREATE DATABASE IF NOT EXISTS shop")
            .await
            .expect("create shop");
        r.query_drop("USE shop").await.expect("use shop");
        r
    }
}

/// A result: each column's (name, type, unsigned, not null), and the rows as text.
#[derive(Debug, PartialEq)]
struct Answer {
    columns: Vec<(String, String, bool, bool)>,
    /// Column definitions' (schema, table, org_table).
    origins: Vec<(String, String, String)>,
    rows: Vec<Vec<Option<String>>>,
}

async fn answer(c: &mut Conn, sql: &str) -> Answer {
    let mut r = c
        .query_iter(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let cols = r.columns().map(|c| c.to_vec()).unwrap_or_default();
    let rows: Vec<Row> = r.collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    use mysql_async::consts::ColumnFlags as F;
    Answer {
        columns: cols
            .iter()
            .map(|c| {
                (
                    c.name_str().to_string(),
                    format!("{:?}", c.column_type()),
                    c.flags().contains(F::UNSIGNED_FLAG),
                    c.flags().contains(F::NOT_NULL_FLAG),
                )
            })
            .collect(),
        origins: cols
            .iter()
            .map(|c| {
                (
                    c.schema_str().to_string(),
                    c.table_str().to_string(),
                    c.org_table_str().to_string(),
                )
            })
            .collect(),
        rows: rows
            .into_iter()
            .map(|row| {
                row.unwrap()
                    .into_iter()
                    .map(|v| match v {
                        mysql_async::Value::NULL => None,
                        mysql_async::Value::Bytes(b) => Some(String::from_utf8_lossy(&b).into()),
                        other => Some(format!("{other:?}")),
                    })
                    .collect()
            })
            .collect(),
    }
}

/// No datanode database and no physical table in any cell or column definition.
fn assert_logical(sql: &str, a: &Answer) {
    for row in &a.rows {
        for cell in row.iter().flatten() {
            assert!(
                !cell.contains("ledger_0"),
                "{sql}: physical table in {cell:?}"
            );
            for db in DBS {
                assert_ne!(cell, db, "{sql}: datanode database as a value");
                assert!(
                    !cell.contains(&format!("`{db}`")),
                    "{sql}: datanode database in {cell:?}"
                );
            }
            assert!(!cell.contains("shoal_catalog"), "{sql}: {cell:?}");
        }
    }
    for (schema, table, org_table) in &a.origins {
        assert!(
            ["", "information_schema", "shop"].contains(&schema.as_str()),
            "{sql}: column schema {schema}"
        );
        for n in [table, org_table] {
            assert!(
                !n.contains("shoal_catalog") && !n.contains("ledger_0"),
                "{sql}: {n}"
            );
        }
    }
}

/// Through Shoal and on the reference: the same answer.
async fn same(c: &mut Conn, r: &mut Conn, sql: &str) -> Answer {
    let got = answer(c, sql).await;
    let want = answer(r, sql).await;
    assert_logical(sql, &got);
    assert_eq!(got.columns, want.columns, "{sql}: columns");
    assert_eq!(got.origins, want.origins, "{sql}: column origins");
    assert_eq!(got.rows, want.rows, "{sql}: rows");
    got
}

/// The catalog tables compared one by one, then joined, filtered, grouped and limited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_tables_answer_as_one_mariadb_with_the_logical_tables() {
    let s = Setup::start().await;
    let mut c = s.client().await;
    let mut r = s.reference().await;
    let queries = [
        "SELECT * FROM information_schema.SCHEMATA \
         WHERE schema_name IN ('shop', 'information_schema') ORDER BY schema_name",
        "SELECT TABLE_CATALOG, TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, ENGINE, VERSION, ROW_FORMAT, \
         TABLE_COLLATION, CHECKSUM, CREATE_OPTIONS, TABLE_COMMENT, TEMPORARY \
         FROM information_schema.TABLES WHERE table_schema = DATABASE() ORDER BY table_name",
        "SELECT * FROM information_schema.COLUMNS WHERE table_schema = DATABASE() \
         ORDER BY table_name, ordinal_position",
        "SELECT TABLE_CATALOG, TABLE_SCHEMA, TABLE_NAME, NON_UNIQUE, INDEX_SCHEMA, INDEX_NAME, \
         SEQ_IN_INDEX, COLUMN_NAME, COLLATION, SUB_PART, PACKED, NULLABLE, INDEX_TYPE, COMMENT, \
         INDEX_COMMENT, IGNORED FROM information_schema.STATISTICS \
         WHERE table_schema = 'shop' ORDER BY table_name, index_name, seq_in_index",
        "SELECT * FROM information_schema.KEY_COLUMN_USAGE WHERE table_schema = DATABASE() \
         ORDER BY table_name, constraint_name, ordinal_position",
        "SELECT * FROM information_schema.TABLE_CONSTRAINTS WHERE table_schema = DATABASE() \
         ORDER BY table_name, constraint_name",
        "SELECT * FROM information_schema.REFERENTIAL_CONSTRAINTS \
         WHERE constraint_schema = DATABASE() ORDER BY constraint_name",
        "SELECT * FROM information_schema.CHECK_CONSTRAINTS WHERE constraint_schema = DATABASE() \
         ORDER BY table_name, constraint_name",
        "SELECT TABLE_CATALOG, TABLE_SCHEMA, TABLE_NAME, PARTITION_NAME, SUBPARTITION_NAME, \
         PARTITION_ORDINAL_POSITION, PARTITION_METHOD, PARTITION_EXPRESSION, PARTITION_DESCRIPTION, \
         PARTITION_COMMENT, NODEGROUP, TABLESPACE_NAME FROM information_schema.PARTITIONS \
         WHERE table_schema = DATABASE() ORDER BY table_name",
        "SELECT * FROM information_schema.VIEWS WHERE table_schema = DATABASE()",
        "SELECT * FROM information_schema.ROUTINES WHERE routine_schema = DATABASE()",
        "SELECT * FROM information_schema.TRIGGERS WHERE trigger_schema = DATABASE()",
        "SELECT * FROM information_schema.EVENTS WHERE event_schema = DATABASE()",
        "SELECT * FROM information_schema.PARAMETERS WHERE specific_schema = DATABASE()",
        "SELECT * FROM information_schema.FILES WHERE table_schema = DATABASE()",
        // Joins, grouping, subqueries, ORDER BY and LIMIT: evaluated as MariaDB does.
        "SELECT t.table_name, COUNT(*) AS n, MAX(c.ordinal_position) \
         FROM information_schema.TABLES t JOIN information_schema.COLUMNS c \
         ON c.table_schema = t.table_schema AND c.table_name = t.table_name \
         WHERE t.table_schema = DATABASE() GROUP BY t.table_name ORDER BY n DESC, t.table_name",
        "SELECT k.table_name, k.column_name, k.referenced_table_name, rc.update_rule, rc.delete_rule \
         FROM information_schema.KEY_COLUMN_USAGE k JOIN information_schema.REFERENTIAL_CONSTRAINTS rc \
         ON rc.constraint_schema = k.constraint_schema AND rc.constraint_name = k.constraint_name \
         WHERE k.table_schema = DATABASE() ORDER BY k.table_name",
        "SELECT table_name FROM information_schema.TABLES WHERE table_schema = DATABASE() \
         ORDER BY table_name DESC LIMIT 2 OFFSET 1",
        "SELECT table_name FROM information_schema.TABLES WHERE table_schema = DATABASE() \
         AND table_name IN (SELECT table_name FROM information_schema.COLUMNS \
         WHERE table_schema = DATABASE() AND column_name = 'user_id') ORDER BY 1",
        "SELECT information_schema.TABLES.TABLE_NAME FROM information_schema.TABLES \
         WHERE information_schema.TABLES.TABLE_SCHEMA = 'shop' AND TABLE_TYPE = 'VIEW'",
        "SELECT c.column_name, l.id FROM information_schema.COLUMNS c \
         JOIN information_schema.COLLATIONS l ON l.collation_name = c.collation_name \
         WHERE c.table_schema = DATABASE() ORDER BY c.table_name, c.column_name",
        "SELECT COUNT(*), SUM(table_type = 'VIEW') FROM information_schema.TABLES \
         WHERE table_schema = DATABASE()",
        // What Knex, Sequelize and Django send (tests/clients/known-differences.txt).
        "select table_name from information_schema.tables where table_name = 'country' \
         and table_schema = database()",
        "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_TYPE = 'BASE TABLE' \
         AND TABLE_SCHEMA = 'shop' ORDER BY TABLE_NAME",
        "select column_name, data_type, column_default, is_nullable, character_maximum_length \
         from information_schema.columns where table_name = 'orders' and table_schema = 'shop' \
         order by ordinal_position",
        "SELECT constraint_name, table_name, column_name, referenced_table_name, \
         referenced_column_name FROM INFORMATION_SCHEMA.KEY_COLUMN_USAGE \
         WHERE table_name = 'ledger' AND constraint_schema = 'shop' \
         AND referenced_table_name IS NOT NULL",
        "SELECT table_name, table_type FROM information_schema.tables \
         WHERE table_schema = DATABASE() ORDER BY table_name",
    ];
    for sql in queries {
        let a = same(&mut c, &mut r, sql).await;
        // Nothing of these exists in the layout: every other answer has rows to compare.
        let empty = ["ROUTINES", "TRIGGERS", "EVENTS", "PARAMETERS", "FILES"]
            .iter()
            .any(|t| sql.contains(&format!("information_schema.{t} ")));
        assert_eq!(a.rows.is_empty(), empty, "{sql}: {a:?}");
    }
    // The constraint MariaDB named after the physical table carries the logical name.
    let fk = answer(
        &mut c,
        "SELECT constraint_name FROM information_schema.TABLE_CONSTRAINTS \
         WHERE table_name = 'ledger' AND constraint_type = 'FOREIGN KEY'",
    )
    .await;
    assert_eq!(fk.rows, vec![vec![Some("ledger_ibfk_1".to_string())]]);
    // `DATABASE()` as a column: the logical schema, named as written.
    let a = answer(
        &mut c,
        "SELECT DATABASE(), table_name FROM information_schema.TABLES WHERE table_name = 'orders'",
    )
    .await;
    assert_eq!(a.columns[0].0, "DATABASE()");
    assert_eq!(
        a.rows,
        vec![vec![Some("shop".into()), Some("orders".into())]]
    );
    // DATABASE() beside logical tables: the logical schema, a select item named as written.
    for sql in [
        "SELECT DATABASE(), COUNT(*) FROM orders",
        "SELECT id FROM orders WHERE DATABASE() = 'shop' ORDER BY id",
        "SELECT table_name FROM information_schema.TABLES WHERE table_schema = SCHEMA() ORDER BY 1",
    ] {
        let got = same(&mut c, &mut r, sql).await;
        assert!(!got.rows.is_empty(), "{sql}");
    }
    // Inside a select-list expression the literal would rename the column: refused.
    for sql in [
        "SELECT CONCAT(DATABASE(), ':', id) FROM orders",
        "SELECT CONCAT(DATABASE(), table_name) FROM information_schema.TABLES",
    ] {
        let (code, _, msg) = server_error(c.query_drop(sql).await);
        assert_eq!(code, 1235, "{sql}: {msg}");
    }
    // Prepared (binary protocol), as Connector/C and mysql2 send them: same rows and types.
    let prepared = "SELECT table_name, ordinal_position, column_default FROM information_schema.COLUMNS \
                    WHERE table_schema = DATABASE() AND table_name = ? AND ordinal_position > ? \
                    ORDER BY ordinal_position";
    for params in [("orders", 0), ("note_tag", 1), ("nosuch", 0)] {
        let got: Vec<(String, u64, Option<String>)> = c
            .exec(prepared, params)
            .await
            .unwrap_or_else(|e| panic!("prepared {params:?}: {e}\n{}", s.shoal.log()));
        let want: Vec<(String, u64, Option<String>)> = r.exec(prepared, params).await.unwrap();
        assert_eq!(got, want, "{params:?}");
        assert_eq!(got.is_empty(), params.0 == "nosuch");
    }
    // A backend's error names the catalog table, never the table it runs over.
    let (code, _, msg) = server_error(
        c.query_drop("SELECT nosuch FROM information_schema.TABLES")
            .await,
    );
    assert_eq!(code, 1054, "{msg}");
    assert!(!msg.contains("shoal_catalog"), "{msg}");
}

/// Row counts and sizes of a sharded table are the sums of its physical tables' figures,
/// read from the backends themselves; every table is listed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn figures_are_summed_over_the_shards() {
    let s = Setup::start().await;
    let mut c = s.client().await;
    let mut physical: u64 = 0;
    for server in 0..2 {
        let mut b = Conn::new(s.cluster.opts(server, None)).await.unwrap();
        let n: Option<u64> = b
            .query_first(
                "SELECT SUM(DATA_LENGTH) FROM information_schema.TABLES \
                 WHERE table_schema IN ('a', 'b') AND table_name LIKE 'ledger\\_0%'",
            )
            .await
            .unwrap();
        physical += n.unwrap_or(0);
    }
    let got: Option<u64> = c
        .query_first(
            "SELECT DATA_LENGTH FROM information_schema.TABLES \
             WHERE table_schema = 'shop' AND table_name = 'ledger'",
        )
        .await
        .unwrap();
    assert_eq!(got, Some(physical));
    let a = answer(
        &mut c,
        "SELECT table_name, COUNT(*) FROM information_schema.TABLES GROUP BY table_schema, table_name HAVING COUNT(*) > 1",
    )
    .await;
    assert!(a.rows.is_empty(), "{a:?}");
    let a = answer(
        &mut c,
        "SELECT * FROM information_schema.TABLES WHERE table_schema = 'shop'",
    )
    .await;
    assert_logical("TABLES", &a);
    assert_eq!(a.rows.len(), 8, "{a:?}");
}

/// Nothing but the catalog: other schemas stay out of reach from a catalog query, a user
/// sees only its schemas, and DDL through Shoal shows at the next query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_is_the_logical_schema_only_and_follows_ddl() {
    let s = Setup::start().await;
    let mut c = s.client().await;
    for (sql, code) in [
        (
            "SELECT table_name FROM information_schema.TABLES \
             WHERE table_name IN (SELECT user FROM mysql.user)",
            1044,
        ),
        (
            "SELECT t.table_name FROM information_schema.TABLES t JOIN orders o ON o.id = 1",
            1235,
        ),
        (
            "SELECT CURRENT_USER(), table_name FROM information_schema.TABLES",
            1235,
        ),
        ("SELECT * FROM information_schema.PROCESSLIST", 1235),
        (
            "SELECT table_name FROM information_schema.TABLES t JOIN a.orders o",
            1049,
        ),
    ] {
        let (got, _, msg) = server_error(c.query_drop(sql).await);
        assert_eq!(got, code, "{sql}: {msg}");
    }
    let schemas = |rows: Answer| -> Vec<String> {
        rows.rows
            .into_iter()
            .map(|r| r[0].clone().unwrap())
            .collect()
    };
    let sql = "SELECT schema_name FROM information_schema.SCHEMATA ORDER BY 1";
    assert_eq!(
        schemas(answer(&mut c, sql).await),
        ["information_schema", "shop"]
    );
    let mut ops = s.client_as("ops", "ops-secret").await;
    assert_eq!(
        schemas(answer(&mut ops, sql).await),
        ["crm", "information_schema", "shop"]
    );
    let tables = "SELECT DISTINCT table_schema FROM information_schema.TABLES ORDER BY 1";
    assert_eq!(
        schemas(answer(&mut c, tables).await),
        ["information_schema", "shop"]
    );

    // DDL through Shoal: seen at once, not after the cache's age.
    let count = "SELECT COUNT(*) FROM information_schema.COLUMNS \
                 WHERE table_schema = 'shop' AND table_name = 'orders'";
    let before: Option<i64> = c.query_first(count).await.unwrap();
    c.query_drop("ALTER TABLE orders ADD COLUMN note VARCHAR(10)")
        .await
        .unwrap();
    let after: Option<i64> = c.query_first(count).await.unwrap();
    assert_eq!(after, before.map(|n| n + 1));
    c.query_drop("CREATE TABLE fresh (id INT PRIMARY KEY)")
        .await
        .unwrap();
    let fresh: Option<String> = c
        .query_first(
            "SELECT table_name FROM information_schema.TABLES \
             WHERE table_schema = DATABASE() AND table_name = 'fresh'",
        )
        .await
        .unwrap();
    assert_eq!(fresh.as_deref(), Some("fresh"));
}
