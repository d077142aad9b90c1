//! The logical namespace: what a client may name. Clients see their logical schemas and the
//! tables in them, nothing of the backends behind: not the physical tables of a table-per-shard
//! table (`ledger_00`), not the datanodes' databases (`shop_1`), not the servers' own schemas
//! (`mysql`, `performance_schema`, `sys`, most of `information_schema`), and nothing a built-in
//! reads from or writes to a backend host's file system (`LOAD_FILE`, `INTO OUTFILE`).
//!
//! DML is checked table by table when its tables are resolved (`placement::resolve_one`);
//! statements the router does not parse (DDL bodies, SET, DO, SHOW...) are checked on their
//! tokens here ([`check_tokens`]).

use super::placement::{find_schema, refuse};
use crate::error::{RouterError, codes};
use crate::sql::lex::{TokKind, Token, called_at};
use crate::topology::{LogicalSchema, TableDef, Topology};

/// The servers' own schemas no Shoal user may read: accounts and password hashes, the
/// backends' threads and statements, their configuration.
const PRIVATE_SCHEMAS: &[&str] = &["mysql", "performance_schema", "sys"];

/// `information_schema` tables that describe the server software only (character sets,
/// collations, engines, keywords, functions, plugins) or what SHOW STATUS/VARIABLES answer:
/// naming no database, table, account or thread. Every other one would show the backends' physical
/// databases and tables, accounts, grants or threads.
const SERVER_LEVEL_INFORMATION_SCHEMA: &[&str] = &[
    "character_sets",
    "collations",
    "collation_character_set_applicability",
    "engines",
    "keywords",
    "sql_functions",
    "plugins",
    "all_plugins",
    // What SHOW [GLOBAL|SESSION] STATUS/VARIABLES answer, which a datanode answers too.
    "global_status",
    "global_variables",
    "session_status",
    "session_variables",
];

/// `information_schema` tables Shoal answers over the logical catalog (`LocalAnswer::Catalog`):
/// their rows name databases and tables, which the proxy builds as the logical schema has them
/// (every logical table once, under its logical schema and name). Read by SELECTs whose every
/// table is an `information_schema` one; anywhere else (a view body, a statement over logical
/// tables too) they are refused like the rest of `information_schema`.
pub const CATALOG_INFORMATION_SCHEMA: &[&str] = &[
    "schemata",
    "tables",
    "columns",
    "statistics",
    "key_column_usage",
    "table_constraints",
    "referential_constraints",
    "check_constraints",
    "partitions",
    "views",
    "routines",
    "parameters",
    "triggers",
    "events",
    "files",
];

/// Whether `table` (any case) is one of [`CATALOG_INFORMATION_SCHEMA`].
pub fn is_catalog_table(table: &str) -> bool {
    CATALOG_INFORMATION_SCHEMA
        .iter()
        .any(|t| t.eq_ignore_ascii_case(table))
}

/// Whether `table` (any case) is a server-level `information_schema` table (character sets,
/// collations, ...), which any backend answers as it is.
pub fn is_server_level_table(table: &str) -> bool {
    SERVER_LEVEL_INFORMATION_SCHEMA
        .iter()
        .any(|t| t.eq_ignore_ascii_case(table))
}

/// The error MySQL gives a user without privileges on `db` (1044); the proxy puts the user's
/// account in (see [`ACCESS_DENIED_PREFIX`]).
pub fn access_denied(db: &str) -> RouterError {
    RouterError::with(
        codes::ER_DBACCESS_DENIED_ERROR,
        format!("{ACCESS_DENIED_PREFIX}database '{db}'"),
    )
}

/// A logical schema in `denied` (those a user may not use) named in the statement: refused as
/// MySQL refuses a database the user has no grant on (1044). Read on the tokens: any
/// identifier with that name counts, whatever it names.
pub fn denied_schema_named(sql: &str, toks: &[Token], denied: &[String]) -> Option<RouterError> {
    denied.iter().find_map(|s| {
        let named = toks.iter().any(|t| {
            matches!(t.kind, TokKind::Word | TokKind::QuotedIdent)
                && t.ident_value(sql).eq_ignore_ascii_case(s)
        });
        named.then(|| access_denied(s))
    })
}

/// The start of an access-denied message from the router: the router does not know the
/// session's account, the proxy writes it after `user` (`Access denied for user 'app'@'%' to
/// database 'mysql'`, MySQL's wording).
pub const ACCESS_DENIED_PREFIX: &str = "Access denied for user to ";

/// 1146 for `schema.name`, as MySQL reports a table that does not exist.
pub(crate) fn no_such_table(schema: &str, name: &str) -> RouterError {
    RouterError::with(
        codes::ER_NO_SUCH_TABLE,
        format!("Table '{schema}.{name}' doesn't exist"),
    )
}

/// Whether `schema` is a server's own schema (`mysql`, `performance_schema`, `sys`).
pub(crate) fn is_private_schema(schema: &str) -> bool {
    PRIVATE_SCHEMAS
        .iter()
        .any(|s| s.eq_ignore_ascii_case(schema))
}

/// Whether `table` of system schema `schema` may be read by a SELECT: the server-level tables of
/// `information_schema` and its catalog tables (answered over the logical catalog when every
/// table of the SELECT is an `information_schema` one: see `planner`).
pub(crate) fn check_system_table_read(schema: &str, table: &str) -> Result<(), RouterError> {
    if schema.eq_ignore_ascii_case("information_schema") && is_catalog_table(table) {
        return Ok(());
    }
    check_system_table(schema, table)
}

/// Whether `table` of system schema `schema` may be named: only the server-level tables of
/// `information_schema`. The error is the refusal the client gets.
pub(crate) fn check_system_table(schema: &str, table: &str) -> Result<(), RouterError> {
    if is_private_schema(schema) {
        return Err(access_denied(&schema.to_ascii_lowercase()));
    }
    if SERVER_LEVEL_INFORMATION_SCHEMA
        .iter()
        .any(|t| t.eq_ignore_ascii_case(table))
    {
        return Ok(());
    }
    Err(refuse(format!(
        "information_schema.{} through Shoal (its rows would be the backends' physical \
         databases, tables, accounts or threads; the catalog tables (TABLES, COLUMNS, ...) are \
         answered in a SELECT over information_schema tables only)",
        table.to_ascii_uppercase()
    )))
}

/// Whether `name` is the physical name of a table-per-shard table of `schema` (`ledger_00`),
/// not a table listed under that name: such a name is hidden, as if it did not exist.
pub fn is_physical_name(schema: &LogicalSchema, name: &str) -> bool {
    if schema.table(name).is_some() {
        return false;
    }
    schema.tables.values().any(|t| {
        let (logical, shards) = match t {
            TableDef::Sharded(s) => (&s.name, &s.shards),
            TableDef::Child(c) => (&c.name, &c.shards),
            TableDef::Global(_) => return false,
        };
        shards.iter().any(|s| {
            s.physical_table.eq_ignore_ascii_case(name)
                && !s.physical_table.eq_ignore_ascii_case(logical)
        })
    })
}

/// Logical schema `name` (any case).
pub fn find<'t>(topo: &'t Topology, name: &str) -> Option<&'t LogicalSchema> {
    find_schema(topo, name)
}

/// Whether `name` is a datanode's database and not a logical schema's name.
fn is_physical_database(topo: &Topology, name: &str) -> bool {
    find_schema(topo, name).is_none()
        && topo
            .datanodes
            .iter()
            .any(|d| d.database.eq_ignore_ascii_case(name))
}

/// What a statement may not do whatever its kind, read on its tokens: call `LOAD_FILE`
/// (which reads a backend host's file) or write one with `INTO OUTFILE|DUMPFILE`.
pub(crate) fn reaches_host(sql: &str, toks: &[Token]) -> Option<RouterError> {
    for (i, t) in toks.iter().enumerate() {
        if t.kind != TokKind::Word {
            continue;
        }
        if t.is_kw(sql, "LOAD_FILE") && called_at(sql, toks, i) {
            return Some(refuse(
                "LOAD_FILE() through Shoal (it reads a file on a backend's host)",
            ));
        }
        if t.is_kw(sql, "INTO")
            && toks
                .get(i + 1)
                .is_some_and(|n| n.is_kw(sql, "OUTFILE") || n.is_kw(sql, "DUMPFILE"))
        {
            return Some(refuse(format!(
                "SELECT ... INTO {} through Shoal (it writes a file on a backend's host)",
                toks[i + 1].text(sql).to_ascii_uppercase()
            )));
        }
    }
    None
}

/// Names in a statement the router does not resolve table by table (DDL, the bodies of
/// views, routines, triggers and events, SET, DO, SHOW): a qualified name in a server's own
/// schema or a datanode's database, or a physical table name, is refused as MySQL refuses
/// what a user may not see. Dynamic SQL in a stored program body (`PREPARE`/`EXECUTE`)
/// could build any name: refused there.
pub(crate) fn check_tokens(
    topo: &Topology,
    current: Option<&str>,
    sql: &str,
    toks: &[Token],
) -> Option<RouterError> {
    let is_name = |t: &Token| matches!(t.kind, TokKind::Word | TokKind::QuotedIdent);
    let current_schema = current.and_then(|c| find_schema(topo, c));
    let stored_program = toks
        .first()
        .is_some_and(|t| t.is_kw(sql, "CREATE") || t.is_kw(sql, "ALTER"))
        && toks.iter().take(8).any(|t| {
            ["PROCEDURE", "FUNCTION", "TRIGGER", "EVENT"]
                .iter()
                .any(|k| t.is_kw(sql, k))
        });
    for (i, t) in toks.iter().enumerate() {
        if !is_name(t) {
            continue;
        }
        if stored_program && (t.is_kw(sql, "PREPARE") || t.is_kw(sql, "EXECUTE")) {
            return Some(refuse(
                "dynamic SQL (PREPARE/EXECUTE) in a stored program created or altered through Shoal",
            ));
        }
        let qualified = toks.get(i + 1).is_some_and(|d| d.is_punct(sql, "."))
            && toks.get(i + 2).is_some_and(is_name)
            && !(i > 0 && toks[i - 1].is_punct(sql, "."));
        let value = t.ident_value(sql);
        if qualified {
            let next = toks[i + 2].ident_value(sql);
            if is_private_schema(&value) {
                return Some(access_denied(&value.to_ascii_lowercase()));
            }
            if value.eq_ignore_ascii_case("information_schema") {
                if let Err(e) = check_system_table(&value, &next) {
                    return Some(e);
                }
                continue;
            }
            if is_physical_database(topo, &value) {
                return Some(RouterError::with(
                    codes::ER_BAD_DB_ERROR,
                    format!("Unknown database '{value}'"),
                ));
            }
            if let Some(s) = find_schema(topo, &value)
                && is_physical_name(s, &next)
            {
                return Some(no_such_table(&s.name, &next));
            }
            continue;
        }
        let after_dot = i > 0 && toks[i - 1].is_punct(sql, ".");
        if !after_dot
            && let Some(s) = current_schema
            && is_physical_name(s, &value)
        {
            return Some(no_such_table(&s.name, &value));
        }
    }
    None
}
