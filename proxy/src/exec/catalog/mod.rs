//! The logical `information_schema` (`LocalAnswer::Catalog`): a SELECT over catalog tables
//! (TABLES, COLUMNS, STATISTICS, ...: `shoal_router::plan::namespace::CATALOG_INFORMATION_SCHEMA`),
//! alone or with server-level ones, answered as one MariaDB holding the logical schema would.
//!
//! 1. `rows`: each catalog table the statement names is built from the datanodes' own
//!    `information_schema` rows for their databases, kept for the logical tables only and
//!    renamed to logical names (figures summed over shards). Cached per table until DDL
//!    through Shoal ([`Catalog::changed`](crate::runtime::catalog::Catalog::changed)) or
//!    [`CACHE_AGE`](crate::runtime::catalog::CACHE_AGE).
//! 2. `conn`: the rows are loaded into TEMPORARY tables of the same definition
//!    (`CREATE TEMPORARY TABLE ... LIKE information_schema.X`) on Shoal's own connection.
//! 3. `rewrite`: the client's statement is made to read those tables; the backend evaluates
//!    it (any WHERE, join, GROUP BY, subquery, ORDER BY, LIMIT, with MariaDB's types).
//! 4. The answer's column definitions name `information_schema` and the catalog table, never
//!    the temporary table or its database.
//!
//! The router lets through only statements whose every table is an `information_schema`
//! one and that call no function answering with the backend's account: the connection runs as
//! Shoal's backend account, whose reach must not become the client's.

mod binary;
mod conn;
mod rewrite;
mod rows;
mod spec;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use shoal_router::plan::ParamValue;
use shoal_router::sql::lex::TokKind;

use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::merge::Protocol;
use crate::runtime::catalog::Built;
use crate::runtime::routing::Routing;
use crate::wire::messages::{column_def_names, put_column_def};

/// Prefix of the temporary tables' names.
const TEMP_PREFIX: &str = "shoal_catalog_";

fn temp_name(table: &str, filter: usize) -> String {
    format!("{TEMP_PREFIX}{}_{filter}", table.to_ascii_lowercase())
}

impl Cursor {
    /// Answers `sql`, a SELECT over `information_schema` tables the router planned as
    /// `LocalAnswer::Catalog`, in `protocol`.
    pub(super) async fn answer_catalog(
        &mut self,
        routing: &Routing,
        sql: &str,
        show: Option<&'static str>,
        protocol: Protocol,
        reply_seq: u8,
    ) -> Result<()> {
        let (defs, rows) = self.catalog_result(routing, sql, show).await?;
        let mut rows = rows
            .iter()
            .map(|r| super::metadata::fields(r))
            .collect::<Result<Vec<_>>>()?;
        if protocol == Protocol::Binary {
            let cols = defs
                .iter()
                .map(|d| crate::merge::parse_column(d))
                .collect::<Result<Vec<_>>>()?;
            rows = rows
                .into_iter()
                .map(|r| binary::binary_cells(r, &cols))
                .collect();
        }
        self.send_result(reply_seq, &defs, rows, protocol).await
    }

    /// The column definitions a prepared catalog SELECT returns: the statement run with
    /// NULL for each `?`, its rows dropped.
    pub(super) async fn catalog_columns(
        &mut self,
        routing: &Routing,
        sql: &str,
        show: Option<&'static str>,
    ) -> Result<Vec<Vec<u8>>> {
        let filled = self.fill_params(routing, sql, &[])?;
        Ok(self.catalog_result(routing, &filled, show).await?.0)
    }

    /// `sql` with its `?` placeholders replaced by `values` as SQL literals (NULL past the
    /// end): the catalog's statement runs as text on Shoal's connection.
    pub(super) fn fill_params(
        &mut self,
        routing: &Routing,
        sql: &str,
        values: &[ParamValue],
    ) -> Result<String> {
        let mode = self.sql_mode();
        let mut toks = Vec::new();
        routing
            .router
            .tokenize(sql, mode, &mut toks)
            .map_err(|e| super::refusal(&e))?;
        let mut out = String::with_capacity(sql.len() + 16);
        let mut at = 0;
        let placeholders = toks.iter().filter(|t| t.kind == TokKind::Placeholder);
        for (k, t) in placeholders.enumerate() {
            out.push_str(&sql[at..t.start as usize]);
            out.push_str(&match values.get(k) {
                None | Some(ParamValue::Null) => "NULL".to_string(),
                Some(ParamValue::Int(i)) => i.to_string(),
                Some(ParamValue::Decimal(d)) => d.clone(),
                Some(ParamValue::Double(f)) => format!("{f:e}"),
                Some(ParamValue::Str(s)) => rows::quoted(s.as_bytes()),
            });
            at = t.end as usize;
        }
        out.push_str(&sql[at..]);
        Ok(out)
    }

    /// Runs catalog SELECT `sql`: the column definitions (in logical names) and text rows.
    async fn catalog_result(
        &mut self,
        routing: &Routing,
        sql: &str,
        show: Option<&'static str>,
    ) -> Result<(Vec<Vec<u8>>, Vec<Vec<u8>>)> {
        let allowed = self
            .rt
            .config
            .user(&self.user)
            .and_then(|u| u.schemas.clone());
        let filter = routing.catalog.filter_index(&allowed);
        let mode = self.sql_mode();
        let mut toks = Vec::new();
        routing
            .router
            .tokenize(sql, mode, &mut toks)
            .map_err(|e| super::refusal(&e))?;
        let rw = rewrite::rewrite(sql, &toks, self.logical.as_deref(), |t| {
            temp_name(t, filter)
        });
        let mut tables = Vec::new();
        for &name in &rw.tables {
            let built = match routing.catalog.fresh(name) {
                Some(b) => b,
                None => {
                    let generation = routing.catalog.generation.load(Ordering::Relaxed);
                    let spec = spec::find(name).expect("rewrite names known tables");
                    let rows = self.logical_rows(routing, spec).await?;
                    let b = Arc::new(Built {
                        generation,
                        at: Instant::now(),
                        version: routing.catalog.versions.fetch_add(1, Ordering::Relaxed) + 1,
                        rows,
                    });
                    routing
                        .catalog
                        .built
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(name, b.clone());
                    b
                }
            };
            tables.push((name, built));
        }
        let session_mode = self.want.var("sql_mode").map(str::to_string);
        let visible = |s: Option<&str>| match (s, &allowed) {
            (None, _) | (_, None) => true,
            (Some(s), Some(a)) => a.iter().any(|x| x.eq_ignore_ascii_case(s)),
        };
        let (defs, rows, database) = {
            let mut d = routing.catalog.conn.lock().await;
            let mut result = Err(Error::reply(1105, b"HY000", "catalog not run"));
            // A connection found broken is opened again once.
            for _ in 0..2 {
                result = async {
                    for (name, b) in &tables {
                        d.load(
                            routing,
                            name,
                            &temp_name(name, filter),
                            b.version,
                            &b.rows,
                            visible,
                        )
                        .await?;
                    }
                    d.run(routing, &rw.sql, session_mode.as_deref()).await
                }
                .await;
                match &result {
                    Err(Error::BackendIo(_)) => d.broken(),
                    _ => break,
                }
            }
            match result {
                Ok((defs, rows)) => (defs, rows, d.database.clone()),
                Err(e) => return Err(logical_error(e, &d.database, &rw.tables, filter)),
            }
        };
        let defs: Vec<Vec<u8>> = defs
            .iter()
            .map(|def| match show {
                Some(table) => show_column(def, table),
                None => logical_column(def, &database, &rw.tables, filter),
            })
            .collect();
        Ok((defs, rows))
    }
}

/// A column definition of the temporary table as the catalog table's: schema
/// `information_schema`, table and org_table its name (an alias the statement gave stays).
fn logical_column(def: &[u8], database: &str, tables: &[&'static str], filter: usize) -> Vec<u8> {
    let Some((f, rest)) = column_def_names(def) else {
        return def.to_vec();
    };
    let Some(table) = tables
        .iter()
        .find(|t| temp_name(t, filter).as_bytes().eq_ignore_ascii_case(f[3]))
    else {
        return def.to_vec();
    };
    if !f[1].eq_ignore_ascii_case(database.as_bytes()) {
        return def.to_vec();
    }
    let alias = if f[2] == f[3] { table.as_bytes() } else { f[2] };
    let mut out = Vec::with_capacity(def.len());
    let names = [
        f[0],
        b"information_schema",
        alias,
        table.as_bytes(),
        f[4],
        f[5],
    ];
    put_column_def(&mut out, names, rest);
    out
}

/// A column definition of a SHOW's answer as MariaDB's: schema `information_schema`, table
/// and org_table the table its SHOW reads (`TABLE_NAMES`), and a text column a BLOB, as
/// the fields of an `information_schema` table are (the translation's expressions over
/// them, `Default`'s unquoting, would be a LONG_BLOB).
fn show_column(def: &[u8], table: &str) -> Vec<u8> {
    let Some((f, rest)) = column_def_names(def) else {
        return def.to_vec();
    };
    let mut rest = rest.to_vec();
    // Fixed part: length-of-fixed (0x0c), charset (2), column length (4), type (1), ...
    const TYPE_AT: usize = 1 + 2 + 4;
    const BLOB_TYPES: [u8; 3] = [0xf9, 0xfa, 0xfb]; // TINY_BLOB, MEDIUM_BLOB, LONG_BLOB
    if rest.get(TYPE_AT).is_some_and(|t| BLOB_TYPES.contains(t)) {
        rest[TYPE_AT] = 0xfc;
    }
    let t = table.as_bytes();
    let mut out = Vec::with_capacity(def.len());
    put_column_def(
        &mut out,
        [f[0], b"information_schema", t, t, f[4], f[5]],
        &rest,
    );
    out
}

/// A backend error about the rewritten statement, naming the catalog tables instead of the
/// temporary ones (`Table 'a.shoal_catalog_tables_0' ...` -> `information_schema.TABLES`).
fn logical_error(e: Error, database: &str, tables: &[&'static str], filter: usize) -> Error {
    match e {
        Error::Reply {
            code,
            state,
            mut message,
        } => {
            for t in tables {
                let temp = temp_name(t, filter);
                message = message
                    .replace(
                        &format!("{database}.{temp}"),
                        &format!("information_schema.{t}"),
                    )
                    .replace(&temp, t);
            }
            Error::Reply {
                code,
                state,
                message,
            }
        }
        e => e,
    }
}
