//! The SHOW family as SELECTs over `information_schema`.
//!
//! MariaDB answers `SHOW TABLES`, `SHOW TABLE STATUS`, `SHOW COLUMNS`, `SHOW INDEX`,
//! `SHOW TRIGGERS`, `SHOW PROCEDURE|FUNCTION STATUS`, `SHOW EVENTS` and `SHOW DATABASES` from its
//! `information_schema` tables, with their columns renamed. Each is read here into a [`Show`]
//! and written back as the SELECT over `information_schema.X` that gives the same columns (names,
//! types, order) and rows in the same order; the proxy answers that SELECT over the logical
//! catalog ([`super::LocalAnswer::Catalog`]), so a SHOW lists logical schemas and tables only.
//! `tests/tests/show_translation.rs` runs every form both ways on one MariaDB and compares.
//!
//! What MariaDB does that the SELECTs reproduce:
//! - rows: databases and tables in binary order of their names (the server sorts the names it
//!   discovers with a byte comparison), columns by position, indexes in the table's key order
//!   (STATISTICS' own row order: no column carries it, so that SELECT has no ORDER BY),
//!   triggers by table, then event (INSERT, UPDATE, DELETE), timing (BEFORE, AFTER) and action
//!   order, routines and events by schema (binary) then name (as `mysql.proc`/`mysql.event`'s
//!   primary keys order them);
//! - `LIKE`: database, table and trigger-table names match case-sensitively byte by byte (the
//!   server's `wild_compare` with `lower_case_table_names=0`), column, routine and event names
//!   under their column's case-insensitive collation;
//! - `WHERE` is over the SHOW's own column names: the SELECT becomes a derived table with those
//!   names and the condition applies to it, under the same column types and collations;
//! - `SHOW COLUMNS`' `Default` is `COLUMN_DEFAULT` unquoted: MariaDB shows a string default
//!   bare (`x`, not `'x'`), a NULL default as NULL, and TEXT/BLOB defaults (expressions) as
//!   they are. Being an expression, it is a LONGTEXT column (type 251) where SHOW's is the
//!   TEXT column itself (252); same character set, same values. The only column whose type
//!   differs.
//!
//! The SQL is read in MariaDB's default sql_mode (backslash escapes in strings).

use crate::error::{RouterError, codes};
use crate::sql::lex::{TokKind, Token, unquote_string};

/// Which SHOW.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    Databases,
    Tables { full: bool },
    TableStatus,
    Columns { full: bool },
    Index,
    Triggers,
    ProcedureStatus,
    FunctionStatus,
    Events,
}

/// The optional filter of a SHOW.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    None,
    /// `LIKE 'pattern'`: the pattern's value.
    Like(String),
    /// `WHERE expr`: the expression's text, over the SHOW's column names.
    Where(String),
}

/// A SHOW of the family, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Show {
    pub what: What,
    /// The schema it lists (`FROM db`, the table's qualifier or the current schema); `None`
    /// for SHOW DATABASES and SHOW PROCEDURE/FUNCTION STATUS, which list every schema.
    pub schema: Option<String>,
    /// The table of SHOW COLUMNS / SHOW INDEX.
    pub table: Option<String>,
    pub filter: Filter,
}

fn kw(sql: &str, toks: &[Token], i: usize, k: &str) -> bool {
    toks.get(i).is_some_and(|t| t.is_kw(sql, k))
}

fn is_name(t: &Token) -> bool {
    matches!(t.kind, TokKind::Word | TokKind::QuotedIdent)
}

fn syntax_error(sql: &str) -> RouterError {
    RouterError::with(
        codes::ER_PARSE_ERROR,
        format!("You have an error in your SQL syntax near '{sql}'"),
    )
}

/// Reads `SHOW ...` (`toks` its tokens) if it is one of the family; `None` for any other SHOW
/// (and for forms this does not translate, such as `SHOW EXTENDED ...`). `current` is the
/// session's schema: what an unqualified form lists.
pub fn parse(
    sql: &str,
    toks: &[Token],
    current: Option<&str>,
) -> Option<Result<Show, RouterError>> {
    if !kw(sql, toks, 0, "SHOW") {
        return None;
    }
    // A statement's closing `;` is not part of it.
    let end = toks.len()
        - toks
            .iter()
            .rev()
            .take_while(|t| t.is_punct(sql, ";"))
            .count();
    let toks = &toks[..end];
    let mut i = 1;
    let full = kw(sql, toks, i, "FULL");
    if full {
        i += 1;
    }
    let what = if kw(sql, toks, i, "TABLES") {
        i += 1;
        What::Tables { full }
    } else if kw(sql, toks, i, "COLUMNS") || kw(sql, toks, i, "FIELDS") {
        i += 1;
        What::Columns { full }
    } else if kw(sql, toks, i, "TRIGGERS") {
        // MariaDB takes SHOW FULL TRIGGERS (DBeaver sends it) as SHOW TRIGGERS.
        i += 1;
        What::Triggers
    } else if full {
        return None;
    } else if kw(sql, toks, i, "DATABASES") || kw(sql, toks, i, "SCHEMAS") {
        i += 1;
        What::Databases
    } else if kw(sql, toks, i, "TABLE") && kw(sql, toks, i + 1, "STATUS") {
        i += 2;
        What::TableStatus
    } else if ["INDEX", "INDEXES", "KEYS"]
        .iter()
        .any(|k| kw(sql, toks, i, k))
    {
        i += 1;
        What::Index
    } else if kw(sql, toks, i, "TRIGGERS") {
        i += 1;
        What::Triggers
    } else if kw(sql, toks, i, "PROCEDURE") && kw(sql, toks, i + 1, "STATUS") {
        i += 2;
        What::ProcedureStatus
    } else if kw(sql, toks, i, "FUNCTION") && kw(sql, toks, i + 1, "STATUS") {
        i += 2;
        What::FunctionStatus
    } else if kw(sql, toks, i, "EVENTS") {
        i += 1;
        What::Events
    } else {
        return None;
    };
    let from_in = |i: usize| kw(sql, toks, i, "FROM") || kw(sql, toks, i, "IN");
    let mut schema: Option<String> = None;
    let mut table = None;
    if matches!(what, What::Columns { .. } | What::Index) {
        // {FROM|IN} [db.]t [{FROM|IN} db]
        if !from_in(i) {
            return Some(Err(syntax_error(sql)));
        }
        let Some(a) = toks.get(i + 1).filter(|t| is_name(t)) else {
            return Some(Err(syntax_error(sql)));
        };
        i += 2;
        if toks.get(i).is_some_and(|t| t.is_punct(sql, ".")) {
            let Some(b) = toks.get(i + 1).filter(|t| is_name(t)) else {
                return Some(Err(syntax_error(sql)));
            };
            schema = Some(a.ident_value(sql));
            table = Some(b.ident_value(sql));
            i += 2;
        } else {
            table = Some(a.ident_value(sql));
        }
    }
    if !matches!(
        what,
        What::Databases | What::ProcedureStatus | What::FunctionStatus
    ) && from_in(i)
    {
        let Some(db) = toks.get(i + 1).filter(|t| is_name(t)) else {
            return Some(Err(syntax_error(sql)));
        };
        schema = Some(db.ident_value(sql));
        i += 2;
    }
    let filter = if kw(sql, toks, i, "LIKE") && what != What::Index {
        match toks.get(i + 1) {
            Some(t) if t.kind == TokKind::Str && i + 2 == toks.len() => {
                Filter::Like(unquote_string(t.text(sql)))
            }
            _ => return Some(Err(syntax_error(sql))),
        }
    } else if kw(sql, toks, i, "WHERE") && i + 1 < toks.len() {
        let from = toks[i + 1].start as usize;
        let to = toks[toks.len() - 1].end as usize;
        Filter::Where(sql[from..to].to_string())
    } else if i == toks.len() {
        Filter::None
    } else {
        return Some(Err(syntax_error(sql)));
    };
    let lists_schema = !matches!(
        what,
        What::Databases | What::ProcedureStatus | What::FunctionStatus
    );
    if lists_schema && schema.is_none() {
        match current {
            Some(c) => schema = Some(c.to_string()),
            None => {
                return Some(Err(RouterError::with(
                    codes::ER_NO_DB_ERROR,
                    "No database selected",
                )));
            }
        }
    }
    Some(Ok(Show {
        what,
        schema,
        table,
        filter,
    }))
}

/// `s` as a string literal (MariaDB's default sql_mode).
fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// `s` as a quoted identifier.
fn ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

/// A SHOW's SELECT: its columns over `from` (expression, SHOW's name), the conditions every
/// row meets, the expression LIKE applies to, and the order (over `from`'s columns).
struct Spec {
    from: &'static str,
    cols: Vec<(String, String)>,
    conds: Vec<String>,
    like_on: &'static str,
    order: Vec<&'static str>,
}

/// SHOW COLUMNS' `Default` from `COLUMN_DEFAULT`, which quotes a string default as
/// MariaDB's `append_unescaped` does (`'it''s'`, `\\`, `\n`, `\r`, `\0`) and writes a NULL
/// default as the word NULL. `\\` is set aside as U+E000 while the other escapes are undone,
/// so that `\\n` reads as a backslash and an `n`.
const SHOW_DEFAULT: &str = r"CASE WHEN COLUMN_DEFAULT = 'NULL' THEN NULL WHEN COLUMN_DEFAULT LIKE '''%''' AND DATA_TYPE NOT LIKE '%text' AND DATA_TYPE NOT LIKE '%blob' THEN REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(SUBSTRING(COLUMN_DEFAULT, 2, CHAR_LENGTH(COLUMN_DEFAULT) - 2), '''''', ''''), '\\\\', CHAR(0xEE8080 USING utf8mb4)), '\\n', '\n'), '\\r', '\r'), '\\0', '\0'), CHAR(0xEE8080 USING utf8mb4), '\\') ELSE COLUMN_DEFAULT END";

/// A LIMIT that keeps every row.
const ALL_ROWS: u64 = u64::MAX;

const BY_TABLE_NAME: &str = "CAST(TABLE_NAME AS BINARY)";

impl Show {
    fn spec(&self) -> Spec {
        let schema = self.schema.as_deref().unwrap_or_default();
        let table = self.table.as_deref().unwrap_or_default();
        let c = |e: &str, a: &str| (e.to_string(), a.to_string());
        match self.what {
            What::Databases => Spec {
                from: "SCHEMATA",
                cols: vec![c("SCHEMA_NAME", &self.named("Database", ""))],
                conds: vec![],
                like_on: "CAST(SCHEMA_NAME AS BINARY)",
                order: vec!["CAST(SCHEMA_NAME AS BINARY)"],
            },
            What::Tables { full } => {
                let mut cols = vec![c("TABLE_NAME", &self.named("Tables_in_", schema))];
                if full {
                    cols.push(c("TABLE_TYPE", "Table_type"));
                }
                Spec {
                    from: "TABLES",
                    cols,
                    conds: vec![format!("TABLE_SCHEMA = {}", lit(schema))],
                    like_on: BY_TABLE_NAME,
                    order: vec![BY_TABLE_NAME],
                }
            }
            What::TableStatus => Spec {
                from: "TABLES",
                cols: [
                    ("TABLE_NAME", "Name"),
                    ("ENGINE", "Engine"),
                    ("VERSION", "Version"),
                    ("ROW_FORMAT", "Row_format"),
                    ("TABLE_ROWS", "Rows"),
                    ("AVG_ROW_LENGTH", "Avg_row_length"),
                    ("DATA_LENGTH", "Data_length"),
                    ("MAX_DATA_LENGTH", "Max_data_length"),
                    ("INDEX_LENGTH", "Index_length"),
                    ("DATA_FREE", "Data_free"),
                    ("AUTO_INCREMENT", "Auto_increment"),
                    ("CREATE_TIME", "Create_time"),
                    ("UPDATE_TIME", "Update_time"),
                    ("CHECK_TIME", "Check_time"),
                    ("TABLE_COLLATION", "Collation"),
                    ("CHECKSUM", "Checksum"),
                    ("CREATE_OPTIONS", "Create_options"),
                    ("TABLE_COMMENT", "Comment"),
                    ("MAX_INDEX_LENGTH", "Max_index_length"),
                    ("TEMPORARY", "Temporary"),
                ]
                .iter()
                .map(|(e, a)| c(e, a))
                .collect(),
                conds: vec![format!("TABLE_SCHEMA = {}", lit(schema))],
                like_on: BY_TABLE_NAME,
                order: vec![BY_TABLE_NAME],
            },
            What::Columns { full } => {
                let mut cols = vec![c("COLUMN_NAME", "Field"), c("COLUMN_TYPE", "Type")];
                if full {
                    cols.push(c("COLLATION_NAME", "Collation"));
                }
                cols.extend([
                    c("IS_NULLABLE", "Null"),
                    c("COLUMN_KEY", "Key"),
                    c(SHOW_DEFAULT, "Default"),
                    c("EXTRA", "Extra"),
                ]);
                if full {
                    cols.push(c("PRIVILEGES", "Privileges"));
                    cols.push(c("COLUMN_COMMENT", "Comment"));
                }
                Spec {
                    from: "COLUMNS",
                    cols,
                    conds: vec![
                        format!("TABLE_SCHEMA = {}", lit(schema)),
                        format!("TABLE_NAME = {}", lit(table)),
                    ],
                    like_on: "COLUMN_NAME",
                    order: vec!["ORDINAL_POSITION"],
                }
            }
            What::Index => Spec {
                from: "STATISTICS",
                cols: [
                    ("TABLE_NAME", "Table"),
                    ("NON_UNIQUE", "Non_unique"),
                    ("INDEX_NAME", "Key_name"),
                    ("SEQ_IN_INDEX", "Seq_in_index"),
                    ("COLUMN_NAME", "Column_name"),
                    ("COLLATION", "Collation"),
                    ("CARDINALITY", "Cardinality"),
                    ("SUB_PART", "Sub_part"),
                    ("PACKED", "Packed"),
                    ("NULLABLE", "Null"),
                    ("INDEX_TYPE", "Index_type"),
                    ("COMMENT", "Comment"),
                    ("INDEX_COMMENT", "Index_comment"),
                    ("IGNORED", "Ignored"),
                ]
                .iter()
                .map(|(e, a)| c(e, a))
                .collect(),
                conds: vec![
                    format!("TABLE_SCHEMA = {}", lit(schema)),
                    format!("TABLE_NAME = {}", lit(table)),
                ],
                like_on: "INDEX_NAME",
                // The table's key order, which STATISTICS lists its rows in.
                order: vec![],
            },
            What::Triggers => Spec {
                from: "TRIGGERS",
                cols: [
                    ("TRIGGER_NAME", "Trigger"),
                    ("EVENT_MANIPULATION", "Event"),
                    ("EVENT_OBJECT_TABLE", "Table"),
                    ("ACTION_STATEMENT", "Statement"),
                    ("ACTION_TIMING", "Timing"),
                    ("CREATED", "Created"),
                    ("SQL_MODE", "sql_mode"),
                    ("DEFINER", "Definer"),
                    ("CHARACTER_SET_CLIENT", "character_set_client"),
                    ("COLLATION_CONNECTION", "collation_connection"),
                    ("DATABASE_COLLATION", "Database Collation"),
                ]
                .iter()
                .map(|(e, a)| c(e, a))
                .collect(),
                conds: vec![format!("EVENT_OBJECT_SCHEMA = {}", lit(schema))],
                like_on: "CAST(EVENT_OBJECT_TABLE AS BINARY)",
                order: vec![
                    "CAST(EVENT_OBJECT_TABLE AS BINARY)",
                    "FIELD(EVENT_MANIPULATION, 'INSERT', 'UPDATE', 'DELETE')",
                    "FIELD(ACTION_TIMING, 'BEFORE', 'AFTER')",
                    "ACTION_ORDER",
                ],
            },
            What::ProcedureStatus | What::FunctionStatus => Spec {
                from: "ROUTINES",
                cols: [
                    ("ROUTINE_SCHEMA", "Db"),
                    ("ROUTINE_NAME", "Name"),
                    ("ROUTINE_TYPE", "Type"),
                    ("DEFINER", "Definer"),
                    ("LAST_ALTERED", "Modified"),
                    ("CREATED", "Created"),
                    ("SECURITY_TYPE", "Security_type"),
                    ("ROUTINE_COMMENT", "Comment"),
                    ("CHARACTER_SET_CLIENT", "character_set_client"),
                    ("COLLATION_CONNECTION", "collation_connection"),
                    ("DATABASE_COLLATION", "Database Collation"),
                ]
                .iter()
                .map(|(e, a)| c(e, a))
                .collect(),
                conds: vec![format!(
                    "ROUTINE_TYPE = {}",
                    lit(if self.what == What::ProcedureStatus {
                        "PROCEDURE"
                    } else {
                        "FUNCTION"
                    })
                )],
                like_on: "ROUTINE_NAME",
                order: vec!["CAST(ROUTINE_SCHEMA AS BINARY)", "ROUTINE_NAME"],
            },
            What::Events => Spec {
                from: "EVENTS",
                cols: [
                    ("EVENT_SCHEMA", "Db"),
                    ("EVENT_NAME", "Name"),
                    ("DEFINER", "Definer"),
                    ("TIME_ZONE", "Time zone"),
                    ("EVENT_TYPE", "Type"),
                    ("EXECUTE_AT", "Execute at"),
                    ("INTERVAL_VALUE", "Interval value"),
                    ("INTERVAL_FIELD", "Interval field"),
                    ("STARTS", "Starts"),
                    ("ENDS", "Ends"),
                    ("STATUS", "Status"),
                    ("ORIGINATOR", "Originator"),
                    ("CHARACTER_SET_CLIENT", "character_set_client"),
                    ("COLLATION_CONNECTION", "collation_connection"),
                    ("DATABASE_COLLATION", "Database Collation"),
                ]
                .iter()
                .map(|(e, a)| c(e, a))
                .collect(),
                conds: vec![format!("EVENT_SCHEMA = {}", lit(schema))],
                like_on: "EVENT_NAME",
                order: vec!["CAST(EVENT_SCHEMA AS BINARY)", "EVENT_NAME"],
            },
        }
    }

    /// `Tables_in_db` / `Database`, with ` (pattern)` after it under LIKE, as MariaDB names
    /// the column.
    fn named(&self, base: &str, schema: &str) -> String {
        match &self.filter {
            Filter::Like(p) => format!("{base}{schema} ({p})"),
            _ => format!("{base}{schema}"),
        }
    }

    /// The SELECT over `information_schema` that answers this SHOW.
    /// The `information_schema` table MariaDB's answer to this SHOW names in its column
    /// definitions.
    pub fn answer_table(&self) -> &'static str {
        match self.what {
            What::Databases => "SCHEMATA",
            What::Tables { .. } => "TABLE_NAMES",
            What::TableStatus => "TABLES",
            What::Columns { .. } => "COLUMNS",
            What::Index => "STATISTICS",
            What::Triggers => "TRIGGERS",
            What::ProcedureStatus | What::FunctionStatus => "ROUTINES",
            What::Events => "EVENTS",
        }
    }

    pub fn select(&self) -> String {
        let spec = self.spec();
        let from = format!("information_schema.{}", spec.from);
        let mut conds = spec.conds.clone();
        if let Filter::Like(p) = &self.filter {
            conds.push(format!("{} LIKE {}", spec.like_on, lit(p)));
        }
        let where_ = if conds.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conds.join(" AND "))
        };
        match &self.filter {
            Filter::Where(e) => {
                // The SHOW's columns as a derived table, the sort keys as hidden columns.
                let mut inner: Vec<String> = spec
                    .cols
                    .iter()
                    .map(|(e, a)| format!("{e} AS {}", ident(a)))
                    .collect();
                inner.extend(
                    spec.order
                        .iter()
                        .enumerate()
                        .map(|(k, o)| format!("{o} AS `_show_order_{k}`")),
                );
                let outer: Vec<String> = spec.cols.iter().map(|(_, a)| ident(a)).collect();
                let order = (0..spec.order.len())
                    .map(|k| format!("`_show_order_{k}`"))
                    .collect::<Vec<_>>();
                // The LIMIT keeps the derived table whole: MariaDB would otherwise push the
                // condition down into its information_schema lookup, where a table or schema
                // name compares as a file name (case-sensitively), not under the column's
                // collation as SHOW ... WHERE compares it.
                format!(
                    "SELECT {} FROM (SELECT {} FROM {from}{where_} LIMIT {ALL_ROWS}) AS t \
                     WHERE {e}{}",
                    outer.join(", "),
                    inner.join(", "),
                    order_by(&order)
                )
            }
            _ => {
                let cols: Vec<String> = spec
                    .cols
                    .iter()
                    .map(|(e, a)| format!("{e} AS {}", ident(a)))
                    .collect();
                let order: Vec<String> = spec.order.iter().map(|o| o.to_string()).collect();
                format!(
                    "SELECT {} FROM {from}{where_}{}",
                    cols.join(", "),
                    order_by(&order)
                )
            }
        }
    }
}

fn order_by(keys: &[String]) -> String {
    if keys.is_empty() {
        String::new()
    } else {
        format!(" ORDER BY {}", keys.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lex::tokenize;

    fn show(sql: &str, current: Option<&str>) -> Result<Show, RouterError> {
        let toks = tokenize(sql).unwrap();
        parse(sql, &toks, current).expect("a SHOW of the family")
    }

    #[test]
    fn reads_the_forms() {
        let s = show("SHOW FULL TABLES IN `x y` LIKE 'a\\_%'", None).unwrap();
        assert_eq!(s.what, What::Tables { full: true });
        assert_eq!(s.schema.as_deref(), Some("x y"));
        assert_eq!(s.filter, Filter::Like("a\\_%".into()));
        let s = show("show keys in t from d where Non_unique = 0", Some("c")).unwrap();
        assert_eq!(
            (s.schema.as_deref(), s.table.as_deref()),
            (Some("d"), Some("t"))
        );
        assert_eq!(s.filter, Filter::Where("Non_unique = 0".into()));
        let s = show("SHOW COLUMNS FROM d.t", Some("c")).unwrap();
        assert_eq!(
            (s.schema.as_deref(), s.table.as_deref()),
            (Some("d"), Some("t"))
        );
        assert_eq!(show("SHOW PROCEDURE STATUS", None).unwrap().schema, None);
        assert_eq!(
            show("SHOW TABLE STATUS", None).unwrap_err().code(),
            codes::ER_NO_DB_ERROR.0
        );
        assert_eq!(
            show("SHOW TABLES LIKE", Some("c")).unwrap_err().code(),
            codes::ER_PARSE_ERROR.0
        );
        let s = show("SHOW TABLES LIKE 'a%';", Some("c")).unwrap();
        assert_eq!(s.filter, Filter::Like("a%".into()));
        let s = show("SHOW TABLES WHERE 1 ;", Some("c")).unwrap();
        assert_eq!(s.filter, Filter::Where("1".into()));
        for other in [
            "SHOW VARIABLES",
            "SHOW FULL PROCESSLIST",
            "SHOW CREATE TABLE t",
            "SELECT 1",
        ] {
            let toks = tokenize(other).unwrap();
            assert!(parse(other, &toks, Some("c")).is_none(), "{other}");
        }
    }

    #[test]
    fn writes_selects() {
        assert_eq!(
            show("SHOW TABLES LIKE 'o%'", Some("shop"))
                .unwrap()
                .select(),
            "SELECT TABLE_NAME AS `Tables_in_shop (o%)` FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = 'shop' AND CAST(TABLE_NAME AS BINARY) LIKE 'o%' \
             ORDER BY CAST(TABLE_NAME AS BINARY)"
        );
        assert_eq!(
            show("SHOW DATABASES WHERE `Database` <> 'x'", None)
                .unwrap()
                .select(),
            "SELECT `Database` FROM (SELECT SCHEMA_NAME AS `Database`, \
             CAST(SCHEMA_NAME AS BINARY) AS `_show_order_0` FROM information_schema.SCHEMATA \
             LIMIT 18446744073709551615) AS t WHERE `Database` <> 'x' ORDER BY `_show_order_0`"
        );
    }
}
