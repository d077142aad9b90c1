//! Statements on several datanodes that answer with an OK: writes split over shards (one OK
//! with the summed affected rows), writes to global tables (every copy or none), and DDL
//! (every datanode of the table, failures named per datanode).

use shoal_router::plan::{Merge, RoutePlan, Target};

use super::AUTOCOMMIT;
use super::reader::{WriteDone, read_write_result};
use super::request::Request;
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::runtime::routing::Routing;
use crate::wire::messages::{OkInfo, encode_ok};

/// The outcome of one target.
type Each = (usize, std::result::Result<WriteDone, Error>);

impl Cursor {
    /// Sends every target its SQL (all requests first, then all responses read: the datanodes
    /// work in parallel) and returns each one's result, in target order.
    async fn send_all(
        &mut self,
        routing: &Routing,
        targets: &[Target],
        req: &Request<'_>,
    ) -> Result<Vec<Each>> {
        if targets.len() > 1 {
            self.admit(routing).await?;
        }
        for t in targets {
            self.touch(routing, t.datanode).await?;
        }
        let mut payloads = Vec::with_capacity(targets.len());
        for t in targets {
            let i = self.conns.touched(t.datanode)?;
            match self.request_payload(routing, i, t, req).await {
                Ok(p) => payloads.push(p),
                Err(e) => {
                    self.forget_unsent_types();
                    return Err(e);
                }
            }
        }
        let mut sent = Vec::with_capacity(targets.len());
        for (t, payload) in targets.iter().zip(&payloads) {
            let i = self.conns.touched(t.datanode)?;
            let h = &mut self.conns.held[i];
            let mut seq = 0;
            h.conn.io.write_packet(&mut seq, payload);
            let r = h.conn.io.flush().await.map_err(Error::BackendIo);
            sent.push(r);
        }
        let mut out = Vec::with_capacity(targets.len());
        // Each target's round trip (only with metrics on).
        let sent_at = self.rt.slots.is_some().then(std::time::Instant::now);
        for (t, sent) in targets.iter().zip(sent) {
            let i = self.conns.touched(t.datanode)?;
            let r = match sent {
                Ok(()) => read_write_result(&mut self.conns.held[i].conn).await,
                Err(e) => Err(e),
            };
            if let (Some(t0), Some(m)) = (sent_at, &self.rt.slots) {
                m.backend(t.datanode, self.conns.held[i].server, t0.elapsed());
            }
            if let Ok(d) = &r {
                let tracked = d.tracked.clone();
                let lid = (d.last_insert_id != 0).then_some(d.last_insert_id);
                self.learn(i, Some(d.status), lid, &tracked);
            }
            out.push((t.datanode, r));
        }
        // Connections that broke are gone (their transactions with them).
        for (dn, r) in &out {
            if matches!(r, Err(Error::BackendIo(_))) {
                self.conns.remove(*dn);
            }
        }
        Ok(out)
    }

    /// Runs an INSERT the executor completed (the client's text with its sequence ids or its
    /// column list spliced in): planned again as text, then written as any INSERT; `what`
    /// names it if the plan is of another kind.
    pub(super) async fn run_completed_insert(
        &mut self,
        routing: &Routing,
        text: &str,
        what: &str,
        reply_seq: u8,
    ) -> Result<()> {
        // Read as the client's text was (its sql_mode and character sets).
        let (mode, cs) = (self.sql_mode(), self.charsets().statements);
        let targets = match routing
            .router
            .route_in(self.logical.as_deref(), mode, cs, text, &[])
        {
            RoutePlan::Single(t) => vec![t],
            RoutePlan::Scatter {
                targets,
                merge: Merge::AffectedRows,
            } => targets,
            RoutePlan::Refuse(e) => return Err(self.refuse(&e)),
            _ => return Err(super::unsupported(what)),
        };
        self.run_writes(routing, targets, true, &Request::Text, reply_seq)
            .await
    }

    /// Writes on several datanodes: split shard writes (`sum`: affected rows summed) or
    /// global-table writes (every copy: affected rows of the first). Outside a transaction
    /// they run inside one opened for them, so they take effect everywhere or nowhere (up to
    /// the commit, whose partial failure is its own error).
    pub(super) async fn run_writes(
        &mut self,
        routing: &Routing,
        targets: Vec<Target>,
        sum: bool,
        req: &Request<'_>,
        reply_seq: u8,
    ) -> Result<()> {
        let autocommit_off = self
            .want
            .var("autocommit")
            .is_some_and(|v| v.eq_ignore_ascii_case("OFF") || v == "0");
        let in_txn = self.txn_begin.is_some() || autocommit_off;
        // Under LOCK TABLES a BEGIN would release the session's locks: the write runs on
        // each datanode on its own (a failure names where it took effect).
        let locked = !self.table_locks.is_empty();
        let own_txn = !in_txn && targets.len() > 1 && !locked;
        if own_txn {
            self.txn_begin = Some("START TRANSACTION".to_string());
            self.txn_plain = None;
        }
        let results = match self.send_all(routing, &targets, req).await {
            Ok(r) => r,
            Err(e) => {
                if own_txn {
                    let _ = self.end_transaction(false).await;
                }
                return Err(e);
            }
        };
        let failed: Vec<String> = results
            .iter()
            .filter_map(|(dn, r)| {
                r.as_ref().err().map(|e| {
                    let name = &routing.topology.datanodes[*dn].name;
                    match e.as_reply() {
                        Some((_, _, m)) => format!("{name}: {m}"),
                        None => format!("{name}: {e}"),
                    }
                })
            })
            .collect();
        if !failed.is_empty() {
            let (code, state) = results
                .iter()
                .find_map(|(_, r)| r.as_ref().err().and_then(|e| e.as_reply()))
                .map(|(c, s, _)| (c, *s))
                .unwrap_or(crate::error::LOST_BACKEND);
            let whole = targets.len() > 1;
            let note = if own_txn {
                "; the statement was rolled back on every datanode"
            } else if whole && in_txn {
                "; the transaction was rolled back on every datanode"
            } else if whole && locked {
                "; it took effect on the other datanodes (under LOCK TABLES a write over \
                 several datanodes is not wrapped in a transaction)"
            } else {
                ""
            };
            if own_txn || (whole && in_txn) {
                let _ = self.end_transaction(false).await;
            }
            let replies: Vec<String> = results
                .iter()
                .filter_map(|(_, r)| r.as_ref().err()?.as_reply())
                .map(|(_, _, m)| logical(routing, self.logical.as_deref(), m))
                .collect();
            let message = if whole
                && own_txn
                && replies.len() == results.len()
                && let Some(same) = same_error(&replies)
            {
                // Failed alike everywhere and rolled back: what one server would answer.
                same.to_string()
            } else if whole {
                format!("{}{note}", failed.join("; "))
            } else {
                results
                    .into_iter()
                    .find_map(|(_, r)| r.err())
                    .and_then(|e| e.as_reply().map(|(_, _, m)| m.to_string()))
                    .unwrap_or_else(|| failed.join("; "))
            };
            return Err(Error::reply(code, &state, message));
        }
        if own_txn {
            self.end_transaction(true).await?;
        }
        let mut affected = 0u64;
        let mut last_insert_id = 0u64;
        let mut warnings = 0u16;
        for (k, d) in results
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .enumerate()
        {
            if sum || k == 0 {
                affected = affected.saturating_add(d.affected);
            }
            if last_insert_id == 0 {
                last_insert_id = d.last_insert_id;
            }
            warnings = warnings.saturating_add(d.warnings);
        }
        if let Some(first) = self.sequence_first.take() {
            // The ids came from a sequence: the first is what auto-increment would report.
            last_insert_id = first;
            for h in &mut self.conns.held {
                // Their LAST_INSERT_ID is not the session's any more: realigned on next use.
                h.conn.state.last_insert_id = u64::MAX;
            }
        }
        if last_insert_id != 0 {
            self.want.last_insert_id = last_insert_id;
        }
        self.diag.known = true;
        self.diag.row_count = affected as i64;
        self.send_ok_with(reply_seq, affected, last_insert_id, warnings)
            .await
    }

    /// DDL on every datanode of a table. Each datanode commits DDL on its own, so failures are
    /// reported per datanode, with the ones where it succeeded.
    pub(super) async fn run_ddl(
        &mut self,
        routing: &Routing,
        targets: Vec<Target>,
        reply_seq: u8,
    ) -> Result<()> {
        // DDL commits an open transaction, on every datanode.
        if self.txn_begin.is_some() || self.conns.in_transaction() {
            self.end_transaction(true).await?;
        }
        self.conns.no_branch = true;
        let results = self.send_all(routing, &targets, &Request::Text).await?;
        // A column's collation may have changed (on some datanodes, if some failed).
        routing.collations.clear();
        let mut ok = Vec::new();
        let mut failed = Vec::new();
        let mut first_err = None;
        let mut messages = Vec::new();
        let mut warnings = 0u16;
        for (dn, r) in results {
            let name = routing.topology.datanodes[dn].name.clone();
            match r {
                Ok(d) => {
                    warnings = warnings.saturating_add(d.warnings);
                    ok.push(name);
                }
                Err(e) => {
                    let msg = match e.as_reply() {
                        Some((c, s, m)) => {
                            first_err.get_or_insert((c, *s));
                            m.to_string()
                        }
                        None => e.to_string(),
                    };
                    failed.push(format!("{name} ({msg})"));
                    messages.push(logical(routing, self.logical.as_deref(), &msg));
                }
            }
        }
        if failed.is_empty() {
            self.diag.known = true;
            self.diag.row_count = 0;
            return self.send_ok_with(reply_seq, 0, 0, warnings).await;
        }
        let (code, state) = first_err.unwrap_or(crate::error::LOST_BACKEND);
        if ok.is_empty()
            && let Some(same) = same_error(&messages)
        {
            // Refused alike everywhere, so done nowhere: what one server would answer.
            return Err(Error::reply(code, &state, same));
        }
        let done = if ok.is_empty() {
            String::new()
        } else {
            format!("; it succeeded on {}", ok.join(", "))
        };
        Err(Error::reply(
            code,
            &state,
            format!("DDL failed on datanodes {}{done}", failed.join(", ")),
        ))
    }

    /// An OK packet with these counts and the session's status.
    pub(crate) async fn send_ok_with(
        &mut self,
        reply_seq: u8,
        affected: u64,
        last_insert_id: u64,
        warnings: u16,
    ) -> Result<()> {
        let mut status = self.reply_status();
        if self.txn_begin.is_none() && !self.conns.in_transaction() {
            status &= !super::IN_TRANS;
        }
        let autocommit_off = self
            .want
            .var("autocommit")
            .is_some_and(|v| v.eq_ignore_ascii_case("OFF") || v == "0");
        if autocommit_off {
            status &= !AUTOCOMMIT;
        } else {
            status |= AUTOCOMMIT;
        }
        let ok = OkInfo {
            affected_rows: affected,
            last_insert_id,
            status,
            warnings,
            info: b"",
            state: b"",
        };
        let mut payload = Vec::with_capacity(16);
        encode_ok(&mut payload, 0x00, &ok);
        let mut seq = reply_seq;
        self.client.write_packet(&mut seq, &payload);
        self.flush_client().await
    }
}

/// The message every datanode failed with, when they all failed with the same one.
fn same_error(messages: &[String]) -> Option<&str> {
    let first = messages.first()?;
    messages
        .iter()
        .all(|m| m == first)
        .then_some(first.as_str())
}

/// A backend's message in logical names (datanodes' messages are compared in them: each names
/// its own database).
fn logical(routing: &Routing, current: Option<&str>, message: &str) -> String {
    routing
        .names
        .rewrite(message, current)
        .unwrap_or_else(|| message.to_string())
}
