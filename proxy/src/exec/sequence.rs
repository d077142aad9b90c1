//! Global sequences (Mycat's): an INSERT into a sharded table that leaves out its shard key,
//! when the table has a `sequence`, gets its keys from a segment of ids taken from the
//! `shoal_sequence` table on the sequence's datanode. A segment is taken with one atomic
//! `UPDATE ... SET next_id = LAST_INSERT_ID(next_id + n)`, so several Shoal processes sharing
//! the table never hand out the same id; ids left in a segment when a process stops are
//! skipped, as auto-increment skips ids. The router splices the ids into the text
//! ([`shoal_router::plan::sequence`]) and plans it like any INSERT; the client's OK carries
//! the first id as its last insert id, and so does `LAST_INSERT_ID()` afterwards.
//!
//! A prepared INSERT of that kind is prepared with a parameter for the key in each row
//! ([`PreparedSequence`]); each execute takes its ids and binds them there, with the client's
//! values, so one backend statement serves every execute.

use std::sync::Arc;

use shoal_router::plan::sequence::SequenceFill;
use shoal_router::plan::{Merge, ParamValue, ReadWant, RoutePlan};
use shoal_router::sql::lex::TokKind;

use super::params::{RawParam, literal_in};
use super::request::Request;
use super::unsupported;
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::runtime::routing::Routing;
use crate::wire::command::COM_QUERY;

/// A prepared INSERT that leaves out its table's shard key, which has a sequence: prepared
/// as [`SequenceFill::apply_params`] says, with the ids of each execute bound at `keys`.
#[derive(Debug)]
pub struct PreparedSequence {
    /// The statement as the client prepared it.
    client_sql: String,
    /// The keys' positions among the prepared statement's parameters, in row order.
    keys: Vec<usize>,
}

impl PreparedSequence {
    /// The statement's parameters: the client's `params` with `first`, `first + 1`, ... as
    /// the rows' keys (BIGINT UNSIGNED, as the sequence counts).
    fn bind(&self, params: &[RawParam], first: u64) -> Vec<RawParam> {
        let mut out = Vec::with_capacity(params.len() + self.keys.len());
        let mut client = params.iter();
        let mut row = 0u64;
        for i in 0..params.len() + self.keys.len() {
            if self.keys.get(row as usize) == Some(&i) {
                out.push(RawParam {
                    ty: 0x08,
                    unsigned: 0x80,
                    value: Some((first + row).to_le_bytes().to_vec()),
                });
                row += 1;
            } else if let Some(p) = client.next() {
                out.push(p.clone());
            }
        }
        out
    }

    /// How many parameters the client binds (the keys are Shoal's).
    pub fn client_params(&self, params: u16) -> u16 {
        params.saturating_sub(self.keys.len() as u16)
    }
}

/// For COM_STMT_PREPARE: when `sql` is an INSERT leaving out a shard key that has a sequence,
/// the text to prepare (a parameter for each row's key) and how its executes bind the ids.
pub(super) fn prepared_sequence(
    routing: &Routing,
    current: Option<&str>,
    mode: shoal_router::sql::SqlMode,
    sql: &str,
) -> Option<(String, Arc<PreparedSequence>)> {
    if !is_insert(sql) {
        return None;
    }
    let fill = shoal_router::plan::sequence::sequence_fill(&routing.topology, current, sql)?;
    let filled = fill.apply_params(sql);
    // The keys' places were counted on the text as written; the session's server reads it
    // under its sql_mode: the counts must agree (or the statement is refused as before).
    let count = |text: &str| {
        let mut toks = Vec::new();
        routing.router.tokenize(text, mode, &mut toks).ok()?;
        Some(
            toks.iter()
                .filter(|t| t.kind == TokKind::Placeholder)
                .count(),
        )
    };
    let keys = fill.key_params();
    if count(&filled)? != count(sql)? + keys.len() {
        return None;
    }
    let client_sql = sql.to_string();
    Some((filled, Arc::new(PreparedSequence { client_sql, keys })))
}

const TABLE: &str = "shoal_sequence";

impl Cursor {
    /// Runs the client's INSERT with its shard keys filled from the table's sequence.
    pub(super) async fn insert_with_sequence(
        &mut self,
        routing: &Routing,
        fill: SequenceFill,
        reply_seq: u8,
    ) -> Result<()> {
        let sql = self.client_text();
        let first = self.next_ids(routing, &fill).await?;
        let text = fill.apply(&sql, first);
        self.sequence_first = Some(first);
        let r = self
            .run_completed_insert(routing, &text, "this INSERT with a sequence", reply_seq)
            .await;
        self.sequence_first = None;
        r
    }

    /// COM_STMT_EXECUTE of a statement prepared with [`prepared_sequence`]: the client's
    /// values (`params`, decoded) with the ids taken for its rows bound at the keys' places,
    /// planned and written as the text form is; the OK and `LAST_INSERT_ID()` report the first
    /// id.
    pub(super) async fn execute_with_sequence(
        &mut self,
        routing: &Routing,
        id: u32,
        params: &[RawParam],
        reply_seq: u8,
    ) -> Result<()> {
        let Some((Some(seq), sql)) = self
            .statements
            .get_mut(id)
            .map(|s| (s.sequence.clone(), s.sql.clone()))
        else {
            return Err(Error::unknown_statement(id, "COM_STMT_EXECUTE"));
        };
        // Read again in the session's schema and the configuration of now (a reload may have
        // changed the table or its sequence since PREPARE): it must still be the statement
        // prepared, or the client prepares it again, as MariaDB asks after a table changed.
        let current = self.logical.as_deref();
        let fill = shoal_router::plan::sequence::sequence_fill(
            &routing.topology,
            current,
            &seq.client_sql,
        )
        .filter(|f| f.key_params() == seq.keys && f.apply_params(&seq.client_sql) == *sql)
        .ok_or_else(|| {
            Error::reply(1615, b"HY000", "Prepared statement needs to be re-prepared")
        })?;
        let mode = self.sql_mode();
        let charsets = self.charsets().statements;
        let route = self.read_route_of(routing, mode, &sql);
        self.conns.maybe_writes = ReadWant::single(route).maybe_writes;
        let first = self.next_ids(routing, &fill).await?;
        let bound = seq.bind(params, first);
        let values: Vec<ParamValue> = bound
            .iter()
            .map(|p| literal_in(p, charsets.client))
            .collect();
        let plan = routing
            .router
            .route_in(self.logical.as_deref(), mode, charsets, &sql, &values);
        self.mark.route = Some(crate::observe::RouteKind::of(&plan));
        self.apply_want(ReadWant::of(route, &plan));
        let targets = match plan {
            RoutePlan::Single(t) => vec![t],
            RoutePlan::Scatter {
                targets,
                merge: Merge::AffectedRows,
            } => targets,
            RoutePlan::Refuse(e) => return Err(self.refuse(&e)),
            _ => return Err(unsupported("this prepared INSERT with a sequence")),
        };
        self.sequence_first = Some(first);
        let r = self
            .run_writes(
                routing,
                targets,
                true,
                &Request::Execute { params: &bound },
                reply_seq,
            )
            .await;
        self.sequence_first = None;
        r
    }

    /// The first of `fill.rows` consecutive ids of the table's sequence.
    async fn next_ids(&mut self, routing: &Routing, fill: &SequenceFill) -> Result<u64> {
        let name = format!("{}.{}", fill.schema, fill.table);
        let n = fill.rows as u64;
        if let Some(first) = routing.sequences.take(&name, n) {
            return Ok(first);
        }
        // A fresh segment, large enough for this statement's rows (consecutive ids).
        let k = fill.step.max(n);
        let node = &routing.topology.datanodes[fill.datanode];
        // On the decided primary only (never one of two writable servers), autocommit on.
        let mut conn = self.own_primary_connection(routing, fill.datanode).await?;
        let quoted = name.replace('\'', "''");
        let update = format!(
            "UPDATE {TABLE} SET next_id = LAST_INSERT_ID(next_id + {k}) WHERE name = '{quoted}'"
        );
        let read = "SELECT IF(ROW_COUNT() > 0, LAST_INSERT_ID(), NULL)";
        let mut end = None;
        for attempt in 0..2 {
            match conn.command(COM_QUERY, update.as_bytes()).await {
                Ok(_) => {
                    if let Some(v) = conn.query_value(read).await? {
                        end = Some(v);
                        break;
                    }
                }
                // ER_NO_SUCH_TABLE: made below on the first attempt.
                Err(e) if attempt == 0 && e.as_reply().is_some_and(|r| r.0 == 1146) => {}
                Err(e) => return Err(e),
            }
            if attempt == 0 {
                // First use of this sequence: its row (and the table) are made here; a
                // concurrent process doing the same is harmless.
                let create = format!(
                    "CREATE TABLE IF NOT EXISTS {TABLE} (name VARCHAR(255) NOT NULL PRIMARY KEY, \
                     next_id BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB"
                );
                conn.command(COM_QUERY, create.as_bytes()).await?;
                let insert = format!("INSERT IGNORE INTO {TABLE} VALUES ('{quoted}', 1)");
                conn.command(COM_QUERY, insert.as_bytes()).await?;
            }
        }
        let end: u64 = match end.as_deref().map(str::parse) {
            Some(Ok(v)) => v,
            _ => {
                return Err(Error::reply(
                    1105,
                    b"HY000",
                    format!(
                        "sequence {name}: no row in {TABLE} on datanode {}",
                        node.name
                    ),
                ));
            }
        };
        conn.state.last_insert_id = end;
        conn.release();
        let first = end
            .checked_sub(k)
            .ok_or_else(|| Error::reply(1105, b"HY000", format!("sequence {name}: bad next_id")))?;
        routing.sequences.keep(&name, first + n, end);
        Ok(first)
    }
}

/// Whether `sql` starts with INSERT or REPLACE: the cheap look before a prepared statement is
/// read for an INSERT the executor completes (a column list, a sequence's keys).
pub(super) fn is_insert(sql: &str) -> bool {
    let head = sql.trim_start().get(..7).unwrap_or_default();
    head.get(..6)
        .is_some_and(|h| h.eq_ignore_ascii_case("insert"))
        || head.eq_ignore_ascii_case("replace")
}
