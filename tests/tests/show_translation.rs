//! The SHOW family's SELECTs over `information_schema` (`shoal_router::plan::show`), checked
//! against MariaDB itself: on one MariaDB database holding tables (with keys of every kind, a
//! view, case and spaces in names, column defaults of every kind), triggers, a procedure, a
//! function and an event, each SHOW runs as it is and as its SELECT, on the same server with
//! its own `information_schema`; column names, types and every row must be the same, in the
//! same order. This proves the translations without the logical catalog that answers them
//! through Shoal.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value};
use shoal_router::plan::show;
use shoal_router::sql::lex::tokenize;
use shoal_tests::{shared_backend, unique_name};

/// A column as a client sees its type: name, type, character set, decimals and the flags
/// that change how a value reads (NOT NULL, UNSIGNED, BINARY). A column's display length is
/// not compared: MariaDB sizes SHOW TABLES' column for the longest name with a pattern
/// (`Tables_in_db (p%)`), a derived column for its own. Text columns compare as one kind
/// whatever their size class (TEXT, MEDIUMTEXT, LONGTEXT: type 252, 250, 251, with the BLOB
/// flag and decimals that go with each): SHOW COLUMNS' `Default` is an expression over
/// `COLUMN_DEFAULT` (a LONGTEXT), where SHOW sends the TEXT column itself.
#[derive(Debug, PartialEq, Eq)]
struct Col {
    name: String,
    kind: String,
    charset: u16,
    decimals: u8,
    flags: u16,
}

type Answer = Result<(Vec<Col>, Vec<Vec<Value>>), String>;

async fn answer(conn: &mut Conn, sql: &str) -> Answer {
    use mysql_common::constants::{ColumnFlags as F, ColumnType as T};
    let mut r = conn.query_iter(sql).await.map_err(|e| e.to_string())?;
    let cols = r
        .columns()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    // Text columns of every size class are one kind here (see `Col`).
                    let text = c.character_set() != 63
                        && matches!(
                            c.column_type(),
                            T::MYSQL_TYPE_TINY_BLOB
                                | T::MYSQL_TYPE_BLOB
                                | T::MYSQL_TYPE_MEDIUM_BLOB
                                | T::MYSQL_TYPE_LONG_BLOB
                        );
                    Col {
                        name: c.name_str().into_owned(),
                        kind: if text {
                            "TEXT".into()
                        } else {
                            format!("{:?}", c.column_type())
                        },
                        charset: c.character_set(),
                        decimals: if text { 0 } else { c.decimals() },
                        flags: (c.flags() & (F::NOT_NULL_FLAG | F::UNSIGNED_FLAG | F::BINARY_FLAG))
                            .bits(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let rows: Vec<mysql_async::Row> = r.collect().await.map_err(|e| e.to_string())?;
    let rows = rows.into_iter().map(|r| r.unwrap()).collect();
    Ok((cols, rows))
}

const SETUP: &[&str] = &[
    "CREATE TABLE orders (id INT PRIMARY KEY AUTO_INCREMENT, user_id INT NOT NULL, \
     note VARCHAR(40) COMMENT 'a note', amount DECIMAL(10,2) DEFAULT 0, \
     KEY k_user (user_id), UNIQUE KEY u_note (note, user_id), KEY k_part (note(5)) COMMENT 'prefix') \
     COMMENT 'orders table'",
    "CREATE TABLE order_item (id INT, order_id INT, qty INT NOT NULL DEFAULT 1, \
     PRIMARY KEY (id, order_id), CONSTRAINT fk_order FOREIGN KEY (order_id) REFERENCES orders (id))",
    "CREATE TABLE Country (code CHAR(2) PRIMARY KEY, name VARCHAR(64) COLLATE utf8mb4_bin, \
     FULLTEXT KEY ft (name)) ENGINE=MyISAM",
    "CREATE TABLE `odd name` (`a b` INT, `c``d` INT UNIQUE)",
    "CREATE TABLE order_archive (id INT) ENGINE=MyISAM",
    "CREATE TABLE defs (a INT, b INT NOT NULL, c VARCHAR(10) DEFAULT 'x', d VARCHAR(10) DEFAULT NULL, \
     e TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, f INT DEFAULT (1+2), \
     g VARCHAR(10) DEFAULT 'it''s', h BLOB, i DOUBLE DEFAULT 1.5, j BIT(2) DEFAULT b'01', \
     k DATE DEFAULT '2020-01-01', l INT AS (a+1) VIRTUAL, m ENUM('p','q') DEFAULT 'p', \
     n VARCHAR(5) NOT NULL DEFAULT '', o TEXT DEFAULT 'NULL', p VARCHAR(5) DEFAULT 'NULL', \
     q VARCHAR(9) DEFAULT 'a\\\\b', r VARCHAR(9) DEFAULT '''', w VARCHAR(9) DEFAULT 'x\\\\ny', x VARCHAR(9) DEFAULT 'l\\n\\0\\r''\\\\', s DECIMAL(5,2) UNSIGNED DEFAULT 2.5, \
     t DATETIME(3) DEFAULT NOW(3), u JSON DEFAULT '{}', v CHAR(3) CHARACTER SET latin1 DEFAULT 'é')",
    "CREATE VIEW v_orders AS SELECT id, note FROM orders",
    "CREATE SEQUENCE seq_a",
    "INSERT INTO orders (user_id, note) VALUES (1, 'a'), (2, 'b'), (3, NULL)",
    "CREATE TRIGGER trg_bi BEFORE INSERT ON orders FOR EACH ROW SET NEW.note = COALESCE(NEW.note, 'x')",
    "CREATE TRIGGER trg_ai AFTER INSERT ON orders FOR EACH ROW SET @n = 1",
    "CREATE TRIGGER trg_bi2 BEFORE INSERT ON orders FOR EACH ROW PRECEDES trg_bi SET @m = 2",
    "CREATE TRIGGER trg_bu BEFORE UPDATE ON orders FOR EACH ROW SET @u = 1",
    "CREATE TRIGGER trg_ad AFTER DELETE ON orders FOR EACH ROW SET @d = 1",
    "CREATE TRIGGER a_trg BEFORE INSERT ON order_item FOR EACH ROW SET @i = 1",
    "CREATE TRIGGER c_trg BEFORE INSERT ON Country FOR EACH ROW SET @c = 1",
    "CREATE PROCEDURE p_one(IN a INT) COMMENT 'one' SELECT a",
    "CREATE PROCEDURE P_two() SQL SECURITY INVOKER SELECT 2",
    "CREATE FUNCTION f_two(a INT) RETURNS INT DETERMINISTIC RETURN a * 2",
    "CREATE FUNCTION Fz() RETURNS INT NO SQL RETURN 1",
    "CREATE EVENT ev_one ON SCHEDULE EVERY 1 DAY STARTS '2030-01-01 00:00:00' DISABLE DO SET @e = 1",
    "CREATE EVENT Ev_two ON SCHEDULE AT '2031-01-01 00:00:00' DISABLE DO SET @e = 2",
    "ANALYZE TABLE orders, order_item, Country",
];

/// The SHOW variants, `{db}` standing for the test's database and `{other}` for a second one.
const SHOWS: &[&str] = &[
    "SHOW TABLES",
    "SHOW FULL TABLES",
    "SHOW TABLES FROM {db}",
    "SHOW TABLES IN `{db}`",
    "SHOW TABLES LIKE 'order%'",
    "SHOW TABLES LIKE 'ORDER%'",
    "SHOW TABLES LIKE 'order\\_%'",
    "SHOW TABLES LIKE 'C%'",
    "SHOW TABLES LIKE 'nothing'",
    "SHOW FULL TABLES FROM {db} LIKE '%o%'",
    "SHOW TABLES WHERE `Tables_in_{db}` LIKE 'o%'",
    "SHOW TABLES WHERE `Tables_in_{db}` = 'COUNTRY'",
    "SHOW FULL TABLES WHERE Table_type = 'VIEW'",
    "SHOW FULL TABLES WHERE Table_type <> 'BASE TABLE' OR `Tables_in_{db}` > 'p'",
    "SHOW TABLES FROM {other}",
    "SHOW TABLE STATUS",
    "SHOW TABLE STATUS FROM {db}",
    "SHOW TABLE STATUS LIKE 'order%'",
    "SHOW TABLE STATUS LIKE 'country'",
    "SHOW TABLE STATUS WHERE Engine = 'MyISAM'",
    "SHOW TABLE STATUS WHERE `Rows` > 1 AND Comment LIKE '%table'",
    "SHOW TABLE STATUS WHERE Name = 'v_orders'",
    "SHOW COLUMNS FROM orders",
    "SHOW FULL COLUMNS FROM orders",
    "SHOW FIELDS FROM {db}.defs",
    "SHOW FULL FIELDS IN defs FROM {db}",
    "SHOW COLUMNS FROM defs LIKE 'a'",
    "SHOW COLUMNS FROM orders LIKE 'NOTE'",
    "SHOW COLUMNS FROM orders LIKE '%i_%'",
    "SHOW COLUMNS FROM defs WHERE `Default` IS NULL",
    "SHOW COLUMNS FROM defs WHERE `Null` = 'NO' OR `Key` <> ''",
    "SHOW FULL COLUMNS FROM defs WHERE Collation LIKE 'latin1%'",
    "SHOW COLUMNS FROM Country",
    "SHOW COLUMNS FROM `odd name`",
    "SHOW COLUMNS FROM v_orders",
    "SHOW INDEX FROM orders",
    "SHOW INDEXES FROM order_item",
    "SHOW KEYS IN Country",
    "SHOW INDEX FROM {db}.`odd name`",
    "SHOW INDEX FROM orders FROM {db}",
    "SHOW INDEX FROM orders WHERE Non_unique = 1",
    "SHOW KEYS FROM orders WHERE Key_name = 'PRIMARY' OR Column_name = 'NOTE'",
    "SHOW INDEX FROM defs",
    "SHOW TRIGGERS",
    "SHOW TRIGGERS FROM {db}",
    "SHOW FULL TRIGGERS FROM `{db}`",
    "SHOW TRIGGERS LIKE 'order%'",
    "SHOW TRIGGERS LIKE 'ORDERS'",
    "SHOW TRIGGERS WHERE `Event` = 'INSERT'",
    "SHOW TRIGGERS WHERE `Trigger` LIKE 'TRG%' AND Timing = 'BEFORE'",
    "SHOW TRIGGERS FROM {other}",
    "SHOW PROCEDURE STATUS WHERE Db = '{db}'",
    "SHOW PROCEDURE STATUS LIKE 'p\\_%'",
    "SHOW PROCEDURE STATUS LIKE 'nothing'",
    "SHOW FUNCTION STATUS WHERE Db = '{db}'",
    "SHOW FUNCTION STATUS LIKE 'F%'",
    "SHOW FUNCTION STATUS WHERE Db LIKE '{db}' AND Security_type = 'DEFINER'",
    "SHOW PROCEDURE STATUS WHERE Name = 'P_ONE'",
    "SHOW EVENTS",
    "SHOW EVENTS FROM {db}",
    "SHOW EVENTS LIKE 'ev%'",
    "SHOW EVENTS WHERE Type = 'RECURRING'",
    "SHOW DATABASES LIKE '{db}'",
    "SHOW SCHEMAS LIKE '{db}%'",
    "SHOW DATABASES LIKE '{DB}'",
    "SHOW DATABASES WHERE `Database` IN ('{db}', '{other}')",
    "SHOW DATABASES WHERE `Database` LIKE '{db}%' AND `Database` <> '{other}'",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_statements_equal_their_information_schema_selects() {
    let backend = shared_backend();
    let db = unique_name("showtr");
    let other = format!("{db}_Other");
    backend.fresh_db(&db).await;
    backend.fresh_db(&other).await;
    let mut conn = backend.conn(Some(&db)).await;
    for sql in SETUP {
        conn.query_drop(*sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    {
        let mut o = backend.conn(Some(&other)).await;
        o.query_drop("CREATE TABLE zeta (id INT)").await.unwrap();
        o.query_drop("CREATE TABLE Alpha (id INT)").await.unwrap();
        o.query_drop("CREATE TRIGGER t_z BEFORE INSERT ON zeta FOR EACH ROW SET @z = 1")
            .await
            .unwrap();
    }
    let mut failures = Vec::new();
    let mut rows_seen = 0;
    for template in SHOWS {
        let sql = template
            .replace("{db}", &db)
            .replace("{DB}", &db.to_uppercase())
            .replace("{other}", &other);
        let toks = tokenize(&sql).unwrap();
        let parsed = show::parse(&sql, &toks, Some(&db))
            .unwrap_or_else(|| panic!("{sql}: not read as a SHOW of the family"))
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let select = parsed.select();
        let (a, b) = (
            answer(&mut conn, &sql).await,
            answer(&mut conn, &select).await,
        );
        match (&a, &b) {
            (Ok((ca, ra)), Ok((cb, rb))) => {
                rows_seen += ra.len();
                if ca != cb {
                    failures.push(format!("{sql}\n  {select}\n  columns {ca:?}\n  vs {cb:?}"));
                } else if ra != rb {
                    let first = (0..ra.len().max(rb.len()))
                        .find(|&k| ra.get(k) != rb.get(k))
                        .unwrap_or(0);
                    let show = |r: Option<&Vec<Value>>| {
                        r.map(|r| r.iter().map(|v| v.as_sql(true)).collect::<Vec<_>>())
                    };
                    failures.push(format!(
                        "{sql}\n  {select}\n  rows: {} vs {}; row {first}: {:?}\n  vs {:?}",
                        ra.len(),
                        rb.len(),
                        show(ra.get(first)),
                        show(rb.get(first))
                    ));
                }
            }
            _ => failures.push(format!("{sql}\n  {select}\n  {a:?}\n  vs {b:?}")),
        }
    }
    assert!(SHOWS.len() >= 40);
    // The setup must give the SHOWs rows to compare, not only empty answers.
    assert!(rows_seen > 100, "only {rows_seen} rows");
    assert!(
        failures.is_empty(),
        "{} of {} SHOWs differ from their SELECT:\n{}",
        failures.len(),
        SHOWS.len(),
        failures.join("\n")
    );
    for d in [&db, &other] {
        conn.query_drop(format!("DROP DATABASE `{d}`"))
            .await
            .unwrap();
    }
}
