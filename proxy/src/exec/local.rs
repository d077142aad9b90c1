//! Answers Shoal gives itself with the router: SHOW DATABASES, SHOW [FULL] TABLES, SELECT
//! DATABASE() and EXPLAIN ROUTE, as result sets of string columns (text protocol; a prepared
//! SELECT DATABASE() in binary).

use mysql_common::constants::{ColumnFlags, ColumnType};
use shoal_router::plan::{LocalAnswer, SessionValue, Target, namespace};
use shoal_router::topology::TableDef;

use crate::config::Routing;
use crate::error::Result;
use crate::merge::value::encode_row;
use crate::merge::{Protocol, parse_column};
use crate::session::Session;
use crate::wire::resultset::{ResultSetWriter, column_definition, text_row};

/// utf8mb4_general_ci, the collation of the proxy's own string columns.
const UTF8MB4: u16 = 45;

impl Session {
    pub(super) async fn answer_local(
        &mut self,
        routing: &Routing,
        answer: LocalAnswer,
        reply_seq: u8,
    ) -> Result<()> {
        match answer {
            LocalAnswer::ShowBackends => {
                let rows = self.backend_rows();
                self.send_rows(
                    reply_seq,
                    &[
                        "datahost",
                        "address",
                        "role",
                        "state",
                        "lag",
                        "in_use",
                        "idle",
                        "errors",
                        "last_check",
                    ],
                    rows,
                )
                .await
            }
            LocalAnswer::ShowDatabases { schemas } => {
                let allowed = self
                    .shared
                    .config
                    .user(&self.user)
                    .and_then(|u| u.schemas.clone());
                let mut rows: Vec<Vec<Option<String>>> = schemas
                    .into_iter()
                    .filter(|s| allowed.as_ref().is_none_or(|a| a.contains(s)))
                    .map(|s| vec![Some(s)])
                    .collect();
                rows.sort();
                self.send_rows(reply_seq, &["Database"], rows).await
            }
            LocalAnswer::ShowTables {
                schema,
                full,
                tables,
                like,
                also_from,
            } => {
                let tables = self.existing_tables(routing, &schema, tables).await?;
                let mut names: Vec<(String, String)> = tables
                    .into_iter()
                    .map(|t| (t, "BASE TABLE".to_string()))
                    .collect();
                if let Some(t) = also_from {
                    // The default datanode's database also holds the physical tables of
                    // table-per-shard tables placed there: not tables of the logical schema.
                    let logical = routing.topology.schema(&schema);
                    for (name, kind) in self.fetch_pairs(routing, &t).await? {
                        if logical.is_some_and(|s| namespace::is_physical_name(s, &name)) {
                            continue;
                        }
                        if !names.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
                            names.push((name, kind.unwrap_or_else(|| "BASE TABLE".into())));
                        }
                    }
                }
                if let Some(p) = &like {
                    names.retain(|(n, _)| like_match(p, n));
                }
                names.sort();
                let col = match &like {
                    Some(p) => format!("Tables_in_{schema} ({p})"),
                    None => format!("Tables_in_{schema}"),
                };
                let rows = names
                    .into_iter()
                    .map(|(n, k)| {
                        if full {
                            vec![Some(n), Some(k)]
                        } else {
                            vec![Some(n)]
                        }
                    })
                    .collect();
                if full {
                    self.send_rows(reply_seq, &[&col, "Table_type"], rows).await
                } else {
                    self.send_rows(reply_seq, &[&col], rows).await
                }
            }
            LocalAnswer::SessionValues { columns, row } => {
                self.answer_session_values(&columns, row, Protocol::Text, reply_seq)
                    .await
            }
            LocalAnswer::ExplainRoute { rows } => {
                let rows = rows
                    .into_iter()
                    .map(|(d, s)| vec![Some(d), Some(s)])
                    .collect();
                self.send_rows(reply_seq, &["datanode", "sql"], rows).await
            }
            LocalAnswer::Catalog { sql } => {
                self.answer_catalog(routing, &sql, Protocol::Text, reply_seq)
                    .await
            }
        }
    }

    /// `SELECT DATABASE(), USER()...`: one row of the session's values (none when `row` is
    /// false), in text or, for a prepared statement, binary protocol.
    pub(super) async fn answer_session_values(
        &mut self,
        columns: &[(String, SessionValue)],
        row: bool,
        protocol: Protocol,
        reply_seq: u8,
    ) -> Result<()> {
        let values = columns
            .iter()
            .map(|(_, v)| {
                match v {
                    SessionValue::Database => self.logical.clone(),
                    SessionValue::User => Some(format!("{}@{}", self.user, self.peer_host)),
                    SessionValue::CurrentUser => Some(format!("{}@%", self.user)),
                }
                .map(String::into_bytes)
            })
            .collect();
        let defs: Vec<Vec<u8>> = columns.iter().map(|(c, _)| string_column(c)).collect();
        let rows = if row { vec![values] } else { Vec::new() };
        self.send_result(reply_seq, &defs, rows, protocol).await
    }

    /// The configured tables of `schema` (`tables`) that exist: each is looked for on the
    /// datanode of its first shard (a global table: its first copy) under its physical name
    /// there. One server lists no table before its CREATE TABLE or after its DROP TABLE, and
    /// tools that reflect every listed table (Alembic's autogenerate, SQLAlchemy's Inspector)
    /// fail on one that is listed but absent.
    async fn existing_tables(
        &mut self,
        routing: &Routing,
        schema: &str,
        tables: Vec<String>,
    ) -> Result<Vec<String>> {
        let Some(ls) = routing.topology.schema(schema) else {
            return Ok(tables);
        };
        // (logical name, datanode, physical name there)
        let mut wanted: Vec<(String, usize, String)> = Vec::new();
        for name in tables {
            let first = match ls.table(&name) {
                Some(TableDef::Sharded(t)) => t
                    .shards
                    .first()
                    .map(|s| (s.datanode, s.physical_table.clone())),
                Some(TableDef::Child(t)) => t
                    .shards
                    .first()
                    .map(|s| (s.datanode, s.physical_table.clone())),
                Some(TableDef::Global(t)) => t.datanodes.first().map(|&d| (d, name.clone())),
                None => None,
            };
            match first {
                Some((dn, physical)) => wanted.push((name, dn, physical)),
                // Nowhere to look: listed as configured.
                None => wanted.push((name.clone(), usize::MAX, name)),
            }
        }
        let mut datanodes: Vec<usize> = wanted.iter().map(|w| w.1).collect();
        datanodes.sort_unstable();
        datanodes.dedup();
        let mut present: Vec<(usize, Vec<String>)> = Vec::new();
        for dn in datanodes.into_iter().filter(|&d| d != usize::MAX) {
            let db = &routing.topology.datanodes[dn].database;
            let t = Target {
                datanode: dn,
                sql: format!("SHOW TABLES FROM `{}`", db.replace('`', "``")).into(),
                params: Default::default(),
                qualified: true,
            };
            let names = self.fetch_pairs(routing, &t).await?;
            present.push((dn, names.into_iter().map(|(n, _)| n).collect()));
        }
        Ok(wanted
            .into_iter()
            .filter(|(_, dn, physical)| {
                *dn == usize::MAX
                    || present.iter().any(|(d, names)| {
                        d == dn && names.iter().any(|n| n.eq_ignore_ascii_case(physical))
                    })
            })
            .map(|(name, _, _)| name)
            .collect())
    }

    /// Runs `t` and returns the first two columns of its rows (the second `None` if absent or
    /// NULL): the table list of a datanode for SHOW TABLES.
    async fn fetch_pairs(
        &mut self,
        routing: &Routing,
        t: &shoal_router::plan::Target,
    ) -> Result<Vec<(String, Option<String>)>> {
        let (_, rows) = self.small_answer(routing, t).await?;
        let text = |c: Option<&Option<Vec<u8>>>| {
            c.and_then(Option::as_ref)
                .map(|v| String::from_utf8_lossy(v).into_owned())
        };
        let out = rows
            .iter()
            .filter_map(|r| Some((text(r.first())?, text(r.get(1)))))
            .collect();
        Ok(out)
    }

    /// Sends a text result set of string columns.
    pub(crate) async fn send_rows(
        &mut self,
        reply_seq: u8,
        columns: &[&str],
        rows: Vec<Vec<Option<String>>>,
    ) -> Result<()> {
        let defs: Vec<Vec<u8>> = columns.iter().map(|c| string_column(c)).collect();
        let rows = rows
            .into_iter()
            .map(|r| r.into_iter().map(|v| v.map(String::into_bytes)).collect())
            .collect();
        self.send_result(reply_seq, &defs, rows, Protocol::Text)
            .await
    }

    /// A result set Shoal answers itself: these column definitions and rows.
    pub(crate) async fn send_result(
        &mut self,
        reply_seq: u8,
        defs: &[Vec<u8>],
        rows: Vec<Vec<Option<Vec<u8>>>>,
        protocol: Protocol,
    ) -> Result<()> {
        let n = rows.len() as u64;
        self.write_result(reply_seq, defs, rows, protocol).await?;
        self.diag.known = true;
        self.diag.row_count = -1;
        self.diag.found_rows = n;
        Ok(())
    }

    /// Writes and flushes a result set, leaving the session's diagnostics to the caller.
    pub(crate) async fn write_result(
        &mut self,
        reply_seq: u8,
        defs: &[Vec<u8>],
        rows: Vec<Vec<Option<Vec<u8>>>>,
        protocol: Protocol,
    ) -> Result<()> {
        // Binary rows are laid out by column type; text rows need no columns.
        let cols = match protocol {
            Protocol::Text => Vec::new(),
            Protocol::Binary => defs
                .iter()
                .map(|d| parse_column(d))
                .collect::<Result<Vec<_>>>()?,
        };
        let status = self.status;
        let mut w = ResultSetWriter::start(
            &mut self.client,
            reply_seq,
            self.caps,
            status,
            defs.iter().map(Vec::as_slice),
        );
        let mut buf = Vec::new();
        for row in &rows {
            match protocol {
                Protocol::Text => {
                    buf.clear();
                    text_row(&mut buf, row.iter().map(Option::as_deref));
                }
                Protocol::Binary => buf = encode_row(row, &cols, protocol),
            }
            w.row(&mut self.client, &buf);
        }
        w.finish(&mut self.client, status);
        self.flush_client().await
    }
}

/// A column definition for a VARCHAR result column named `name`.
pub(crate) fn string_column(name: &str) -> Vec<u8> {
    column_definition(
        name,
        name,
        UTF8MB4,
        256 * 4,
        ColumnType::MYSQL_TYPE_VAR_STRING,
        ColumnFlags::empty(),
    )
}

/// SQL LIKE with `%` and `_` (and `\` escaping), case-insensitive as table names compare.
/// Dynamic programming over (pattern, text) positions: linear memory, no backtracking blowup.
pub(crate) fn like_match(pattern: &str, s: &str) -> bool {
    enum P {
        Any,
        One,
        Lit(char),
    }
    let mut pat = Vec::new();
    let mut it = pattern.chars();
    while let Some(c) = it.next() {
        pat.push(match c {
            '%' => P::Any,
            '_' => P::One,
            '\\' => P::Lit(it.next().unwrap_or('\\')),
            c => P::Lit(c),
        });
    }
    let text: Vec<char> = s.chars().collect();
    let eq = |a: char, b: char| a.to_lowercase().eq(b.to_lowercase());
    // row[j]: pattern prefix matches text[..j].
    let mut row = vec![false; text.len() + 1];
    row[0] = true;
    for p in &pat {
        let mut next = vec![false; text.len() + 1];
        match p {
            P::Any => {
                let mut seen = false;
                for (n, r) in next.iter_mut().zip(&row) {
                    seen |= *r;
                    *n = seen;
                }
            }
            P::One => {
                next[1..].copy_from_slice(&row[..text.len()]);
            }
            P::Lit(c) => {
                for (j, ch) in text.iter().enumerate() {
                    next[j + 1] = row[j] && eq(*ch, *c);
                }
            }
        }
        row = next;
    }
    row[text.len()]
}

#[cfg(test)]
mod tests {
    use super::like_match;

    #[test]
    fn like_patterns() {
        assert!(like_match("t%", "T_order"));
        assert!(like_match("t\\_o%", "t_order"));
        assert!(!like_match("t\\_o%", "txorder"));
        assert!(like_match("_a", "ba"));
        assert!(!like_match("a", "ab"));
    }
}
