//! Answers Shoal gives itself with the router: SHOW DATABASES, SHOW [FULL] TABLES, SELECT
//! DATABASE() and EXPLAIN ROUTE, as result sets of string columns (text protocol; a prepared
//! SELECT DATABASE() in binary).

use mysql_common::constants::{ColumnFlags, ColumnType};
use shoal_router::plan::{LocalAnswer, SessionValue};

use crate::backend::charset;
use crate::error::Result;
use crate::exec::Cursor;
use crate::merge::value::encode_row;
use crate::merge::{Protocol, parse_column};
use crate::runtime::routing::Routing;
use crate::wire::resultset::{ResultSetWriter, column_definition, text_row};

/// utf8mb4_general_ci, the collation of the proxy's own string columns.
const UTF8MB4: u16 = 45;

impl Cursor {
    pub(super) async fn answer_local(
        &mut self,
        routing: &Routing,
        answer: LocalAnswer,
        reply_seq: u8,
    ) -> Result<()> {
        match answer {
            LocalAnswer::Admin(stmt) => self.admin(stmt, reply_seq).await,
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
            LocalAnswer::Catalog { sql, show } => {
                self.answer_catalog(routing, &sql, show, Protocol::Text, reply_seq)
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
        self.mark.rows += n;
        Ok(())
    }

    /// The session's `character_set_results` when what Shoal builds itself must be converted
    /// to it (not UTF-8, not NULL, not binary).
    fn own_results_charset(&mut self) -> Option<shoal_router::charset::Charset> {
        self.charsets()
            .results
            .filter(|cs| !cs.is_utf8() && *cs != shoal_router::charset::Charset::Binary)
    }

    /// Column definitions of a result Shoal builds itself, as they are sent (see
    /// [`charset::definitions_in`]).
    pub(crate) fn own_definitions(&mut self, defs: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        match self.own_results_charset() {
            Some(cs) => charset::definitions_in(cs, &defs).0,
            None => defs,
        }
    }

    /// Writes and flushes a result set, leaving the session's diagnostics to the caller.
    pub(crate) async fn write_result(
        &mut self,
        reply_seq: u8,
        defs: &[Vec<u8>],
        rows: Vec<Vec<Option<Vec<u8>>>>,
        protocol: Protocol,
    ) -> Result<()> {
        // In the client's `character_set_results`, as MariaDB sends what it builds.
        let converted;
        let (defs, rows) = match self.own_results_charset() {
            Some(cs) => {
                let (d, text) = charset::definitions_in(cs, defs);
                let rows = rows
                    .into_iter()
                    .map(|row| {
                        row.into_iter()
                            .zip(text.iter().chain(std::iter::repeat(&false)))
                            .map(|(v, &t)| match v {
                                Some(v) if t => {
                                    Some(charset::value_bytes(Some(cs), &v).into_owned())
                                }
                                v => v,
                            })
                            .collect()
                    })
                    .collect();
                converted = d;
                (&converted[..], rows)
            }
            _ => (defs, rows),
        };
        // Binary rows are laid out by column type; text rows need no columns.
        let cols = match protocol {
            Protocol::Text => Vec::new(),
            Protocol::Binary => defs
                .iter()
                .map(|d| parse_column(d))
                .collect::<Result<Vec<_>>>()?,
        };
        let status = self.reply_status();
        let wire = self.client_wire();
        let mut w = ResultSetWriter::start(
            &mut self.client,
            reply_seq,
            wire,
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
