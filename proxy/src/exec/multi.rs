//! Multi-statement texts with the router: a COM_QUERY holding several statements (a client
//! that negotiated CLIENT_MULTI_STATEMENTS: PDO's `query()`, PyMySQL, Connector/J's
//! `rewriteBatchedStatements` batches of UPDATEs) is split with the one tokenizer (strings,
//! comments and executable comments as the session's sql_mode reads them) and run as MariaDB
//! runs it: each statement in turn, planned in the session's state as the ones before left it
//! (a `SET NAMES` or `USE` applies to the statements after it), each answered in order with
//! SERVER_MORE_RESULTS_EXISTS on every response but the last, stopping at the first error
//! (the statements after it do not run). Without the router (quick mode) the text is relayed
//! as bytes, as always.

use std::ops::Range;
use std::sync::Arc;

use mysql_common::constants::StatusFlags;

use super::changes_schema;
use crate::config::Routing;
use crate::error::Result;
use crate::session::Session;
use crate::wire::command::COM_QUERY;

const MORE_RESULTS: u16 = StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();

impl Session {
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
        let ranges = crate::session::charset::split_statements(cs, &p[1..], |sql| {
            shoal_router::sql::lex::split_statements_in(sql, mode, routing.router.server_version())
                .ok()
        })?;
        (ranges.len() > 1).then_some(ranges)
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
        for (k, r) in ranges.iter().enumerate() {
            let piece = &text[r.clone()];
            payload.clear();
            payload.push(COM_QUERY);
            payload.extend_from_slice(piece);
            self.client.replace_packet(&payload);
            self.begin_statement();
            self.conns.more_results = k + 1 < ranges.len();
            self.mark.error = None;
            let ddl = changes_schema(piece);
            let r = self.query_routed(routing, seq).await;
            if ddl {
                routing.catalog.changed();
            }
            match r {
                Ok(()) => {
                    if self.mark.error.is_some() {
                        // A backend's error ended this statement's response: the text stops.
                        return Ok(());
                    }
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
                        routing.error_names.error(e, self.logical.as_deref())
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
