//! The information_schema differential: seed-generated queries over `information_schema`
//! (SCHEMATA, TABLES, COLUMNS, STATISTICS, KEY_COLUMN_USAGE, TABLE_CONSTRAINTS,
//! REFERENTIAL_CONSTRAINTS: filters on schema, table and column names with `=`, `IN`, `LIKE` and
//! `DATABASE()`, joins between them, ORDER BY, LIMIT, COUNT/GROUP BY) and SHOW statements, run
//! on a subject (Shoal over the demo layout, answering from its logical catalog) and on one
//! MariaDB database holding the logical tables (the reference), every answer compared with
//! [`super::compare`] (column names and types, the tables column definitions name, the rows).
//! Both sides have a schema `shop` with the same tables ([`SCHEMA`]).
//!
//! The only values not compared are those a sharded catalog cannot give as one MariaDB does,
//! listed in [`EXCLUDED`] with why: the generator never selects those columns, and a SHOW
//! that has them is compared without them.

use mysql_async::Conn;

use super::compare::{Answer, Check, Norm, compare, fetch, show_answer};
use super::data::Rng;

/// The logical tables, created through Shoal (one statement each, broadcast) and in the
/// reference database alike: the demo layout's `orders` (sharded), `order_item` (its ER child,
/// with a foreign key to it), `country` (global), `ledger` (table-per-shard), and `notes`
/// (unlisted, on the default datanode, with a foreign key to the global table).
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE country (code CHAR(2) NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL, \
     UNIQUE KEY u_name (name)) ENGINE=InnoDB COMMENT 'global'",
    "CREATE TABLE orders (id BIGINT NOT NULL PRIMARY KEY, user_id INT NOT NULL, \
     country CHAR(2) DEFAULT 'fr', amount DECIMAL(10,2) NOT NULL DEFAULT 0, note VARCHAR(64), \
     created DATETIME DEFAULT CURRENT_TIMESTAMP, KEY k_user (user_id, created), KEY k_note (note(8))) \
     ENGINE=InnoDB",
    "CREATE TABLE order_item (id BIGINT NOT NULL, user_id INT NOT NULL, order_id BIGINT NOT NULL, \
     sku VARCHAR(16) NOT NULL COMMENT 'stock unit', qty INT UNSIGNED DEFAULT 1, \
     PRIMARY KEY (id, user_id), KEY k_order (order_id), \
     CONSTRAINT fk_item_order FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE CASCADE) \
     ENGINE=InnoDB",
    "CREATE TABLE ledger (id BIGINT NOT NULL, day DATE NOT NULL, amount DECIMAL(12,2), \
     memo TEXT, PRIMARY KEY (id, day), UNIQUE KEY u_day_id (day, id)) ENGINE=InnoDB",
    "CREATE TABLE notes (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, country CHAR(2) NOT NULL, \
     body TEXT, CONSTRAINT fk_note_country FOREIGN KEY (country) REFERENCES country (code), \
     CONSTRAINT chk_country CHECK (country <> '')) ENGINE=InnoDB",
];

/// A few rows, so that row counts and sizes exist to be excluded rather than all zero.
pub const ROWS: &[&str] = &[
    "INSERT INTO country VALUES ('fr', 'France'), ('de', 'Germany')",
    "INSERT INTO orders (id, user_id, amount) VALUES (1, 1, 10), (2, 2, 20), (3, 3, 30), (4, 4, 40)",
    "INSERT INTO order_item (id, user_id, order_id, sku) VALUES (1, 1, 1, 'a'), (2, 2, 2, 'b')",
    "INSERT INTO ledger (id, day, amount) VALUES (1, '2024-01-02', 1), (2, '2024-05-02', 2), \
     (3, '2025-08-02', 3)",
    "INSERT INTO notes (country, body) VALUES ('fr', 'x')",
];

/// Columns whose values are not compared, and why. (table or SHOW, column)
pub const EXCLUDED: &[(&str, &str, &str)] = &[
    (
        "TABLES",
        "TABLE_ROWS",
        "an engine's estimate per physical table; the catalog sums the shards'",
    ),
    (
        "TABLES",
        "AVG_ROW_LENGTH",
        "computed from the summed sizes and row estimates",
    ),
    ("TABLES", "DATA_LENGTH", "summed over the physical tables"),
    (
        "TABLES",
        "MAX_DATA_LENGTH",
        "summed over the physical tables",
    ),
    ("TABLES", "INDEX_LENGTH", "summed over the physical tables"),
    (
        "TABLES",
        "MAX_INDEX_LENGTH",
        "summed over the physical tables",
    ),
    (
        "TABLES",
        "DATA_FREE",
        "free space of each server's tablespace",
    ),
    (
        "TABLES",
        "AUTO_INCREMENT",
        "each physical table has its own counter",
    ),
    (
        "TABLES",
        "CREATE_TIME",
        "when each server created its physical table",
    ),
    ("TABLES", "UPDATE_TIME", "when each server last wrote it"),
    ("TABLES", "CHECK_TIME", "when each server last checked it"),
    (
        "COLUMNS",
        "PRIVILEGES",
        "the privileges of the account asking: Shoal's user against the reference's",
    ),
    (
        "STATISTICS",
        "CARDINALITY",
        "an engine's estimate per physical table, summed over the shards",
    ),
];

/// The SHOW columns that stand for [`EXCLUDED`] ones.
const EXCLUDED_SHOW: &[&str] = &[
    "Rows",
    "Avg_row_length",
    "Data_length",
    "Max_data_length",
    "Index_length",
    "Max_index_length",
    "Data_free",
    "Auto_increment",
    "Create_time",
    "Update_time",
    "Check_time",
    "Privileges",
    "Cardinality",
];

/// One generated query and how its answer is compared.
#[derive(Clone, Debug)]
pub struct CatalogQuery {
    pub sql: String,
    /// Its ORDER BY fixes every row's place (else rows compare as multisets).
    pub ordered: bool,
}

struct Source {
    table: &'static str,
    /// The column holding the schema name.
    schema_col: &'static str,
    /// The column holding the table name, if any.
    table_col: Option<&'static str>,
    /// A column name column, if any.
    column_col: Option<&'static str>,
    /// Comparable columns (none of [`EXCLUDED`]).
    cols: &'static [&'static str],
    /// A unique key of the rows of one schema (for a total ORDER BY).
    key: &'static [&'static str],
    /// Columns worth grouping by.
    group: &'static [&'static str],
}

const SOURCES: &[Source] = &[
    Source {
        table: "SCHEMATA",
        schema_col: "SCHEMA_NAME",
        table_col: None,
        column_col: None,
        cols: &[
            "CATALOG_NAME",
            "SCHEMA_NAME",
            "DEFAULT_CHARACTER_SET_NAME",
            "DEFAULT_COLLATION_NAME",
            "SQL_PATH",
            "SCHEMA_COMMENT",
        ],
        key: &["SCHEMA_NAME"],
        group: &["DEFAULT_CHARACTER_SET_NAME"],
    },
    Source {
        table: "TABLES",
        schema_col: "TABLE_SCHEMA",
        table_col: Some("TABLE_NAME"),
        column_col: None,
        cols: &[
            "TABLE_CATALOG",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "TABLE_TYPE",
            "ENGINE",
            "VERSION",
            "ROW_FORMAT",
            "TABLE_COLLATION",
            "CHECKSUM",
            "CREATE_OPTIONS",
            "TABLE_COMMENT",
            "TEMPORARY",
        ],
        key: &["TABLE_NAME"],
        group: &["ENGINE", "TABLE_TYPE", "TABLE_COLLATION"],
    },
    Source {
        table: "COLUMNS",
        schema_col: "TABLE_SCHEMA",
        table_col: Some("TABLE_NAME"),
        column_col: Some("COLUMN_NAME"),
        cols: &[
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "COLUMN_NAME",
            "ORDINAL_POSITION",
            "COLUMN_DEFAULT",
            "IS_NULLABLE",
            "DATA_TYPE",
            "CHARACTER_MAXIMUM_LENGTH",
            "CHARACTER_OCTET_LENGTH",
            "NUMERIC_PRECISION",
            "NUMERIC_SCALE",
            "DATETIME_PRECISION",
            "CHARACTER_SET_NAME",
            "COLLATION_NAME",
            "COLUMN_TYPE",
            "COLUMN_KEY",
            "EXTRA",
            "COLUMN_COMMENT",
            "IS_GENERATED",
            "GENERATION_EXPRESSION",
        ],
        key: &["TABLE_NAME", "ORDINAL_POSITION"],
        group: &["TABLE_NAME", "DATA_TYPE", "IS_NULLABLE", "COLUMN_KEY"],
    },
    Source {
        table: "STATISTICS",
        schema_col: "TABLE_SCHEMA",
        table_col: Some("TABLE_NAME"),
        column_col: Some("COLUMN_NAME"),
        cols: &[
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "NON_UNIQUE",
            "INDEX_SCHEMA",
            "INDEX_NAME",
            "SEQ_IN_INDEX",
            "COLUMN_NAME",
            "COLLATION",
            "SUB_PART",
            "PACKED",
            "NULLABLE",
            "INDEX_TYPE",
            "COMMENT",
            "INDEX_COMMENT",
            "IGNORED",
        ],
        key: &["TABLE_NAME", "INDEX_NAME", "SEQ_IN_INDEX"],
        group: &["TABLE_NAME", "INDEX_NAME", "NON_UNIQUE"],
    },
    Source {
        table: "KEY_COLUMN_USAGE",
        schema_col: "TABLE_SCHEMA",
        table_col: Some("TABLE_NAME"),
        column_col: Some("COLUMN_NAME"),
        cols: &[
            "CONSTRAINT_SCHEMA",
            "CONSTRAINT_NAME",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "COLUMN_NAME",
            "ORDINAL_POSITION",
            "POSITION_IN_UNIQUE_CONSTRAINT",
            "REFERENCED_TABLE_SCHEMA",
            "REFERENCED_TABLE_NAME",
            "REFERENCED_COLUMN_NAME",
        ],
        key: &["TABLE_NAME", "CONSTRAINT_NAME", "ORDINAL_POSITION"],
        group: &["TABLE_NAME", "CONSTRAINT_NAME", "REFERENCED_TABLE_NAME"],
    },
    Source {
        table: "TABLE_CONSTRAINTS",
        schema_col: "TABLE_SCHEMA",
        table_col: Some("TABLE_NAME"),
        column_col: None,
        cols: &[
            "CONSTRAINT_SCHEMA",
            "CONSTRAINT_NAME",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "CONSTRAINT_TYPE",
        ],
        key: &["TABLE_NAME", "CONSTRAINT_TYPE", "CONSTRAINT_NAME"],
        group: &["TABLE_NAME", "CONSTRAINT_TYPE"],
    },
    Source {
        table: "REFERENTIAL_CONSTRAINTS",
        schema_col: "CONSTRAINT_SCHEMA",
        table_col: Some("TABLE_NAME"),
        column_col: None,
        cols: &[
            "CONSTRAINT_SCHEMA",
            "CONSTRAINT_NAME",
            "UNIQUE_CONSTRAINT_SCHEMA",
            "UNIQUE_CONSTRAINT_NAME",
            "MATCH_OPTION",
            "UPDATE_RULE",
            "DELETE_RULE",
            "TABLE_NAME",
            "REFERENCED_TABLE_NAME",
        ],
        key: &["TABLE_NAME", "CONSTRAINT_NAME"],
        group: &["TABLE_NAME", "DELETE_RULE", "REFERENCED_TABLE_NAME"],
    },
];

const TABLE_NAMES: &[&str] = &[
    "orders",
    "order_item",
    "country",
    "ledger",
    "notes",
    "nosuch",
];
const COLUMN_NAMES: &[&str] = &["id", "user_id", "country", "amount", "day", "code", "qty"];
const LIKE_PATTERNS: &[&str] = &["order%", "%e%", "l_dger", "%s", "c%", "ORDER%", "%_item"];

fn pick_cols(rng: &mut Rng, s: &Source, prefix: &str) -> Vec<String> {
    let n = 1 + rng.below(s.cols.len().min(6));
    let mut out: Vec<String> = Vec::new();
    while out.len() < n {
        let c = format!("{prefix}{}", rng.pick(s.cols));
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

fn schema_cond(rng: &mut Rng, col: &str) -> String {
    match rng.below(5) {
        0 => format!("{col} = DATABASE()"),
        1 => format!("{col} IN ('shop', 'nowhere')"),
        2 => format!("{col} LIKE 'sh%'"),
        3 => format!("{col} = 'SHOP'"),
        _ => format!("{col} = 'shop'"),
    }
}

fn name_cond(rng: &mut Rng, s: &Source, prefix: &str) -> Option<String> {
    let mut conds = Vec::new();
    if let Some(t) = s.table_col {
        match rng.below(5) {
            0 => conds.push(format!("{prefix}{t} = '{}'", rng.pick(TABLE_NAMES))),
            1 => conds.push(format!(
                "{prefix}{t} IN ('{}', '{}')",
                rng.pick(TABLE_NAMES),
                rng.pick(TABLE_NAMES)
            )),
            2 => conds.push(format!("{prefix}{t} LIKE '{}'", rng.pick(LIKE_PATTERNS))),
            3 => conds.push(format!("{prefix}{t} <> '{}'", rng.pick(TABLE_NAMES))),
            _ => {}
        }
    }
    if let Some(c) = s.column_col {
        match rng.below(4) {
            0 => conds.push(format!("{prefix}{c} = '{}'", rng.pick(COLUMN_NAMES))),
            1 => conds.push(format!(
                "{prefix}{c} LIKE '%{}'",
                rng.pick(&["id", "y", "e"])
            )),
            _ => {}
        }
    }
    (!conds.is_empty()).then(|| conds.join(" AND "))
}

fn filter_query(rng: &mut Rng, s: &Source) -> CatalogQuery {
    let cols = pick_cols(rng, s, "");
    let mut conds = vec![schema_cond(rng, s.schema_col)];
    if let Some(c) = name_cond(rng, s, "") {
        conds.push(c);
    }
    let desc = if rng.pct(30) { " DESC" } else { "" };
    let ordered = s.table != "SCHEMATA" || rng.pct(50);
    let mut sql = format!(
        "SELECT {} FROM information_schema.{} WHERE {}",
        cols.join(", "),
        s.table,
        conds.join(" AND ")
    );
    if ordered {
        let keys: Vec<String> = s.key.iter().map(|k| format!("{k}{desc}")).collect();
        sql.push_str(&format!(" ORDER BY {}", keys.join(", ")));
        if rng.pct(30) {
            sql.push_str(&format!(" LIMIT {}", 1 + rng.below(5)));
            if rng.pct(40) {
                sql.push_str(&format!(" OFFSET {}", rng.below(3)));
            }
        }
    }
    CatalogQuery { sql, ordered }
}

fn group_query(rng: &mut Rng, s: &Source) -> CatalogQuery {
    let g = rng.pick(s.group);
    let agg = match rng.below(4) {
        0 => "COUNT(*)".to_string(),
        1 => format!("COUNT(DISTINCT {})", rng.pick(s.cols)),
        2 => format!("MIN({})", rng.pick(s.key)),
        _ => format!("MAX({})", rng.pick(s.key)),
    };
    let mut conds = vec![schema_cond(rng, s.schema_col)];
    if rng.pct(40)
        && let Some(c) = name_cond(rng, s, "")
    {
        conds.push(c);
    }
    if rng.pct(25) {
        return CatalogQuery {
            sql: format!(
                "SELECT COUNT(*) FROM information_schema.{} WHERE {}",
                s.table,
                conds.join(" AND ")
            ),
            ordered: true,
        };
    }
    let having = if rng.pct(25) {
        " HAVING COUNT(*) > 1"
    } else {
        ""
    };
    CatalogQuery {
        sql: format!(
            "SELECT {g}, {agg} FROM information_schema.{} WHERE {} GROUP BY {g}{having} ORDER BY {g}",
            s.table,
            conds.join(" AND ")
        ),
        ordered: true,
    }
}

fn join_query(rng: &mut Rng) -> CatalogQuery {
    let sql = match rng.below(5) {
        0 => {
            let t = &SOURCES[1];
            let c = &SOURCES[2];
            let mut cols = pick_cols(rng, t, "t.");
            cols.extend(pick_cols(rng, c, "c."));
            let extra = name_cond(rng, c, "c.")
                .map(|x| format!(" AND {x}"))
                .unwrap_or_default();
            format!(
                "SELECT {} FROM information_schema.TABLES t JOIN information_schema.COLUMNS c \
                 ON c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME \
                 WHERE {}{extra} ORDER BY c.TABLE_NAME, c.ORDINAL_POSITION",
                cols.join(", "),
                schema_cond(rng, "t.TABLE_SCHEMA")
            )
        }
        1 => format!(
            "SELECT k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME, tc.CONSTRAINT_TYPE \
             FROM information_schema.KEY_COLUMN_USAGE k JOIN information_schema.TABLE_CONSTRAINTS tc \
             ON tc.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND tc.TABLE_NAME = k.TABLE_NAME \
             AND tc.CONSTRAINT_NAME = k.CONSTRAINT_NAME WHERE {}{} \
             ORDER BY k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION",
            schema_cond(rng, "k.TABLE_SCHEMA"),
            if rng.pct(50) {
                format!(
                    " AND tc.CONSTRAINT_TYPE = '{}'",
                    rng.pick(&["PRIMARY KEY", "UNIQUE", "FOREIGN KEY"])
                )
            } else {
                String::new()
            }
        ),
        2 => format!(
            "SELECT r.CONSTRAINT_NAME, r.TABLE_NAME, r.REFERENCED_TABLE_NAME, k.COLUMN_NAME, \
             k.REFERENCED_COLUMN_NAME, r.DELETE_RULE FROM information_schema.REFERENTIAL_CONSTRAINTS r \
             JOIN information_schema.KEY_COLUMN_USAGE k ON k.CONSTRAINT_SCHEMA = r.CONSTRAINT_SCHEMA \
             AND k.CONSTRAINT_NAME = r.CONSTRAINT_NAME AND k.TABLE_NAME = r.TABLE_NAME \
             WHERE {} ORDER BY r.TABLE_NAME, r.CONSTRAINT_NAME, k.ORDINAL_POSITION",
            schema_cond(rng, "r.CONSTRAINT_SCHEMA")
        ),
        3 => format!(
            "SELECT s.TABLE_NAME, s.INDEX_NAME, s.SEQ_IN_INDEX, c.DATA_TYPE, c.IS_NULLABLE \
             FROM information_schema.STATISTICS s JOIN information_schema.COLUMNS c \
             ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND c.TABLE_NAME = s.TABLE_NAME \
             AND c.COLUMN_NAME = s.COLUMN_NAME WHERE {}{} \
             ORDER BY s.TABLE_NAME, s.INDEX_NAME, s.SEQ_IN_INDEX",
            schema_cond(rng, "s.TABLE_SCHEMA"),
            if rng.pct(50) {
                format!(" AND s.TABLE_NAME = '{}'", rng.pick(TABLE_NAMES))
            } else {
                String::new()
            }
        ),
        _ => format!(
            "SELECT sc.SCHEMA_NAME, sc.DEFAULT_COLLATION_NAME, COUNT(t.TABLE_NAME) \
             FROM information_schema.SCHEMATA sc LEFT JOIN information_schema.TABLES t \
             ON t.TABLE_SCHEMA = sc.SCHEMA_NAME WHERE {} \
             GROUP BY sc.SCHEMA_NAME, sc.DEFAULT_COLLATION_NAME ORDER BY sc.SCHEMA_NAME",
            schema_cond(rng, "sc.SCHEMA_NAME")
        ),
    };
    CatalogQuery { sql, ordered: true }
}

fn show_query(rng: &mut Rng) -> CatalogQuery {
    let t = rng.pick(&TABLE_NAMES[..5]);
    let sql = match rng.below(12) {
        0 => "SHOW TABLES".to_string(),
        1 => "SHOW FULL TABLES FROM shop".to_string(),
        2 => format!("SHOW TABLES LIKE '{}'", rng.pick(LIKE_PATTERNS)),
        3 => format!("SHOW COLUMNS FROM {t}"),
        4 => format!("SHOW FULL COLUMNS FROM {t} FROM shop"),
        5 => format!("SHOW INDEX FROM {t}"),
        6 => "SHOW TABLE STATUS".to_string(),
        7 => format!("SHOW TABLE STATUS LIKE '{}'", rng.pick(LIKE_PATTERNS)),
        8 => "SHOW DATABASES LIKE 'shop'".to_string(),
        9 => format!(
            "SHOW COLUMNS FROM shop.{t} LIKE '%{}'",
            rng.pick(&["id", "y", "e"])
        ),
        10 => format!("SHOW KEYS FROM {t} WHERE Non_unique = 0"),
        _ => "SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'".to_string(),
    };
    CatalogQuery { sql, ordered: true }
}

/// `count` queries from `seed`.
pub fn generate(seed: u64, count: usize) -> Vec<CatalogQuery> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|_| match rng.below(10) {
            0..=3 => {
                let s = rng.pick(SOURCES);
                filter_query(&mut rng, s)
            }
            4 | 5 => {
                let s = rng.pick(SOURCES);
                group_query(&mut rng, s)
            }
            6 | 7 => join_query(&mut rng),
            _ => show_query(&mut rng),
        })
        .collect()
}

/// `a` without the values of the SHOW columns that stand for excluded ones.
fn masked(mut a: Answer) -> Answer {
    let hide: Vec<usize> = a
        .columns
        .iter()
        .enumerate()
        .filter(|(_, (name, _))| EXCLUDED_SHOW.contains(&name.as_str()))
        .map(|(i, _)| i)
        .collect();
    for row in &mut a.rows {
        for &i in &hide {
            if let Some(c) = row.get_mut(i) {
                *c = None;
            }
        }
    }
    a
}

/// What [`run`] found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The mismatches, each with its SQL.
    pub failures: Vec<String>,
    /// Queries the reference answered with at least one row (a generator whose queries all
    /// come back empty would prove nothing).
    pub with_rows: usize,
}

/// Runs every query on both connections. An error on either side is a mismatch unless both
/// sides give the same error code.
pub async fn run(reference: &mut Conn, subject: &mut Conn, queries: &[CatalogQuery]) -> Outcome {
    let mut failures = Vec::new();
    let mut with_rows = 0;
    for q in queries {
        let (a, b) = (
            fetch(reference, &q.sql, None).await,
            fetch(subject, &q.sql, None).await,
        );
        let check = Check {
            order: if q.ordered {
                vec![(0, Norm::Exact)]
            } else {
                Vec::new()
            },
            unique_order: q.ordered,
            ..Check::default()
        };
        if let Ok(a) = &a {
            with_rows += usize::from(!a.rows.is_empty());
        }
        match (a, b) {
            (Ok(a), Ok(b)) => {
                let (a, b) = if q.sql.starts_with("SHOW") {
                    (masked(a), masked(b))
                } else {
                    (a, b)
                };
                if let Err(why) = compare(&a, &b, &check) {
                    failures.push(format!(
                        "{}\n  {why}\n  reference: {}\n  subject: {}",
                        q.sql,
                        show_answer(&a, 4),
                        show_answer(&b, 4)
                    ));
                }
            }
            (Err(mysql_async::Error::Server(x)), Err(mysql_async::Error::Server(y)))
                if x.code == y.code => {}
            (a, b) => failures.push(format!(
                "{}\n  reference: {:?}\n  subject: {:?}",
                q.sql,
                a.map(|a| show_answer(&a, 4)),
                b.map(|b| show_answer(&b, 4))
            )),
        }
    }
    Outcome {
        failures,
        with_rows,
    }
}
