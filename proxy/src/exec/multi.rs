//! Multi-statement texts with the router: a COM_QUERY holding several statements (a client
//! that negotiated CLIENT_MULTI_STATEMENTS: PDO's `query()`, PyMySQL, Connector/J's
//! `rewriteBatchedStatements` batches of UPDATEs) is split with the one tokenizer (strings,
//! comments and executable comments as the session's sql_mode reads them) and run as MariaDB
//! runs it: each statement in turn, planned in the session's state as the ones before left it
//! (a `SET NAMES` or `USE` applies to the statements after it), each answered in order with
//! SERVER_MORE_RESULTS_EXISTS on every response but the last, stopping at the first error
//! (the statements after it do not run). Without the router (quick mode) the text is relayed
//! as bytes, as always.
//!
//! Consecutive plain writes that each go whole to one and the same datanode (a Connector/J
//! `rewriteBatchedStatements` batch of UPDATEs by key) are sent to it as one multi-statement
//! request ([`Batch`]): the server answers each statement in order and stops at the first
//! error, as it would for the client, so every statement keeps its own result and error, and
//! the batch costs one round trip instead of one per statement.

use std::ops::Range;
use std::sync::Arc;

use mysql_common::constants::StatusFlags;

use shoal_router::plan::{RoutePlan, StatementInput, Step};
use shoal_router::sql::SqlMode;
use shoal_router::sql::lex::Token;
use shoal_router::sql::pins::Effects;
use shoal_router::topology::DatanodeId;

use crate::error::Result;
use crate::exec::Cursor;
use crate::runtime::routing::Routing;
use crate::wire::command::COM_QUERY;

const MORE_RESULTS: u16 = StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();

/// Statements in one batched request at most, and the size of its SQL: well under any
/// server's `max_allowed_packet`, and a bound on what a batch holds in memory.
const BATCH_STATEMENTS: usize = 1000;
const BATCH_BYTES: usize = 1 << 20;

/// Statements `k+1 .. end` of a text, behind statement `k` in its request: their SQL for the
/// datanode, `;`-joined.
struct Batch {
    end: usize,
    tail: String,
}

impl Cursor {
    /// The status flags of the response being written: the session's, and
    /// SERVER_MORE_RESULTS_EXISTS while a statement of a multi-statement text that is not its
    /// last runs.
    pub(crate) fn reply_status(&self) -> u16 {
        if self.conns.more_results {
            self.status | MORE_RESULTS
        } else {
            self.status
        }
    }

    /// The statements of the client's COM_QUERY when it holds more than one and the client
    /// negotiated multi-statements; `None` otherwise (the common case costs a scan for `;`, and
    /// a text whose only `;` ends it, as some clients send every statement, is not tokenized).
    pub(super) fn statements_of_text(&mut self, routing: &Routing) -> Option<Vec<Range<usize>>> {
        {
            let p = self.client.packet_payload();
            let text = p.get(1..)?.trim_ascii_end();
            let before_last = &text[..text.len().saturating_sub(1)];
            if !self.want.multi_statements || !before_last.contains(&b';') {
                return None;
            }
        }
        let mode = self.sql_mode();
        let cs = self.charsets().client();
        let p = self.client.packet_payload();
        // Split as read in the client's charset (and in the one a SET NAMES in the text
        // switches to); the ranges are of the client's bytes.
        let ranges = crate::backend::charset::split_statements(cs, &p[1..], |sql| {
            shoal_router::sql::lex::split_statements_in(sql, mode, routing.router.server_version())
                .ok()
        })?;
        (ranges.len() > 1).then_some(ranges)
    }

    /// The statements after statement `k` of `text` that can ride in its request: each a
    /// plain INSERT, UPDATE, DELETE or REPLACE whose statement plan routes it whole to the
    /// datanode statement `k` goes to (itself one such), with nothing the session must do
    /// around it (no user variable, hint or `SET STATEMENT ... FOR`, nothing that pins its
    /// connection; a refusal is no route). `None` when fewer than two statements would go
    /// together.
    fn batch_after(
        &mut self,
        routing: &Routing,
        text: &[u8],
        ranges: &[Range<usize>],
        k: usize,
    ) -> Option<Batch> {
        if k + 1 >= ranges.len() {
            return None;
        }
        // The ranges are of the client's bytes: read as text where the bytes are it (a UTF-8
        // client); another charset's statements run one by one.
        let cs = self.charsets().statements;
        if !cs.client.is_utf8() {
            return None;
        }
        let sql = std::str::from_utf8(text).ok()?;
        let mode = (self.sql_mode(), cs);
        let mut toks = Vec::new();
        let (dn, qualified, _) =
            self.batchable(routing, mode, &sql[ranges[k].clone()], &mut toks)?;
        let mut tail = String::new();
        let mut end = k + 1;
        while end < ranges.len() && end - k < BATCH_STATEMENTS {
            let Some((d, q, target)) =
                self.batchable(routing, mode, &sql[ranges[end].clone()], &mut toks)
            else {
                break;
            };
            if d != dn || q != qualified || tail.len() + target.len() >= BATCH_BYTES {
                break;
            }
            if !tail.is_empty() {
                tail.push(';');
            }
            tail.push_str(&target);
            end += 1;
        }
        (end > k + 1).then_some(Batch { end, tail })
    }

    /// Statement `piece`'s datanode, whether its SQL is qualified, and its SQL there, when it
    /// can go in a batch (see [`Self::batch_after`]).
    fn batchable(
        &self,
        routing: &Routing,
        (mode, cs): (SqlMode, shoal_router::charset::Charsets),
        piece: &str,
        toks: &mut Vec<Token>,
    ) -> Option<(DatanodeId, bool, Arc<str>)> {
        // A user variable may be one the session holds or reads back: alone.
        if piece.contains('@') {
            return None;
        }
        let input = StatementInput {
            digest: false,
            ..self.statement_input(routing, piece, mode, cs)
        };
        let plan = routing.router.plan_statement(&input, toks);
        // A Mycat hint or `SET STATEMENT ... FOR` (the planned text starts later) has the
        // session do something around the statement.
        if plan.start != 0 || plan.pins != Effects::default() {
            return None;
        }
        let first = toks.first()?;
        // LAST_INSERT_ID(expr) sets the session's value, which the session reads back after
        // the statement that set it: alone.
        if !["INSERT", "UPDATE", "DELETE", "REPLACE"]
            .iter()
            .any(|kw| first.is_kw(piece, kw))
            || toks.iter().any(|t| t.is_kw(piece, "LAST_INSERT_ID"))
        {
            return None;
        }
        match plan.step {
            Step::Route(RoutePlan::Single(t)) => Some((t.datanode, t.qualified, t.sql)),
            _ => None,
        }
    }

    /// Runs the statements `ranges` of the client's COM_QUERY one after another (see the
    /// module docs).
    pub(super) async fn run_multi(
        &mut self,
        routing: &Arc<Routing>,
        ranges: Vec<Range<usize>>,
        reply_seq: u8,
    ) -> Result<()> {
        let full = self.client.packet_payload().into_owned();
        self.client.track_seq(true);
        let result = self.run_each(routing, &full, &ranges, reply_seq).await;
        self.conns.more_results = false;
        self.client.track_seq(false);
        // The command as the client sent it, for what observes it afterwards.
        self.client.replace_packet(&full);
        result
    }

    async fn run_each(
        &mut self,
        routing: &Arc<Routing>,
        full: &[u8],
        ranges: &[Range<usize>],
        reply_seq: u8,
    ) -> Result<()> {
        let text = &full[1..];
        let mut seq = reply_seq;
        let mut payload = Vec::new();
        let mut k = 0;
        while k < ranges.len() {
            let piece = &text[ranges[k].clone()];
            payload.clear();
            payload.push(COM_QUERY);
            payload.extend_from_slice(piece);
            self.client.replace_packet(&payload);
            self.begin_statement();
            let batch = self.batch_after(routing, text, ranges, k);
            let end = batch.as_ref().map_or(k + 1, |b| b.end);
            // Statement `k` alone promises more results if any follow; run with its batch,
            // the batch's last statement does if any follow it.
            self.conns.batch_tail = batch.map(|b| (b.tail, end < ranges.len()));
            self.conns.more_results = k + 1 < ranges.len();
            self.mark.error = None;
            let r = self.query_routed(routing, seq).await;
            // Not taken: statement `k` did not reach its datanode, and ran alone.
            let next = match self.conns.batch_tail.take() {
                Some(_) => k + 1,
                None => end,
            };
            match r {
                Ok(()) => {
                    if self.mark.error.is_some() {
                        // A backend's error ended this statement's response: the text stops.
                        return Ok(());
                    }
                    k = next;
                    seq = self.client.next_seq().unwrap_or(seq);
                }
                Err(e) => {
                    // Nothing of this statement was written: its error takes its place in the
                    // numbering, and ends the text.
                    self.conns.more_results = false;
                    if e.ends_session() || e.as_reply().is_none() {
                        return Err(e);
                    }
                    let e = if std::mem::take(&mut self.refused) {
                        e
                    } else {
                        routing.names.error(e, self.logical.as_deref())
                    };
                    if let Some((code, state, msg)) = e.as_reply() {
                        let (state, msg) = (*state, msg.to_string());
                        self.send_error(seq, code, &state, &msg).await?;
                    }
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}
