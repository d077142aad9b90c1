//! The executor: with the router, each statement is planned ([`shoal_router::plan::Router`])
//! and run here, one arm per plan kind, over the session's backend connections (one per
//! datanode touched, see [`connset`]). The request path: client -> wire -> session -> router
//! plan -> executor -> backend pool.
//!
//! - `Single` and `Any`: one datanode; the client's bytes are relayed as they are when the
//!   router left the text unchanged, and the response is relayed frame by frame;
//! - `Local`: answered here (`local`);
//! - `Session`: transaction control and session state (`txn`);
//! - `Broadcast` and `Scatter` writes: every target, one OK (`write`);
//! - `Scatter` reads: merged while streaming (`scatter`, [`crate::merge`]);
//! - `Refuse`: the router's error; the session goes on.
//!
//! Prepared statements (`prepared`) are planned per EXECUTE with their bound values and run
//! through the same arms.

pub mod connset;
pub use prepared::Statements;
mod local;
mod metadata;
pub(crate) mod prepared;
mod reader;
mod scatter;
pub mod sequence;
mod txn;
mod write;

use std::sync::Arc;
use std::time::Instant;

use mysql_common::constants::StatusFlags;
use shoal_router::RouterError;
use shoal_router::plan::{Merge, RoutePlan, Target};
use shoal_router::topology::DatanodeId;
use tracing::debug;

use crate::backend::pool::Wanted;
use crate::config::Routing;
use crate::error::{Error, Result};
use crate::session::relay::{Expect, Outcome, relay};
use crate::session::{Session, align_to, diagnostics_query, pinning};
use crate::wire::command::*;
use connset::Held;

/// A router refusal as the error the client gets.
pub fn refusal(e: &RouterError) -> Error {
    let mut state = [b'H', b'Y', b'0', b'0', b'0'];
    let s = e.sqlstate().as_bytes();
    if s.len() == 5 {
        state.copy_from_slice(s);
    }
    Error::reply(e.code(), &state, e.message())
}

fn unsupported(what: &str) -> Error {
    refusal(&RouterError::unsupported(format!(
        "{what} on a sharded configuration"
    )))
}

const IN_TRANS: u16 = StatusFlags::SERVER_STATUS_IN_TRANS.bits();
const AUTOCOMMIT: u16 = StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits();

impl Session {
    /// Runs one command with the router.
    pub(crate) async fn dispatch_routed(
        &mut self,
        routing: &Arc<Routing>,
        cmd: u8,
        reply_seq: u8,
    ) -> Result<()> {
        self.conns.statement += 1;
        let result = match cmd {
            COM_PING => self.send_ok(reply_seq).await,
            COM_QUERY => self.query_routed(routing, reply_seq).await,
            COM_INIT_DB => {
                let db = String::from_utf8_lossy(&self.client.packet_payload()[1..]).into_owned();
                self.use_logical(&db, reply_seq).await
            }
            COM_FIELD_LIST | COM_STATISTICS | COM_SET_OPTION => {
                let dn = self.any_datanode(routing);
                let expect = if cmd == COM_FIELD_LIST {
                    Expect::FieldList
                } else {
                    Expect::Single
                };
                let on = if cmd == COM_SET_OPTION {
                    let p = self.client.packet_payload();
                    match p.get(1..3).map(|b| u16::from_le_bytes([b[0], b[1]])) {
                        Some(MYSQL_OPTION_MULTI_STATEMENTS_ON) => Some(true),
                        Some(MYSQL_OPTION_MULTI_STATEMENTS_OFF) => Some(false),
                        _ => {
                            return Err(Error::reply(
                                1047,
                                b"08S01",
                                "Unknown COM_SET_OPTION option",
                            ));
                        }
                    }
                } else {
                    None
                };
                let out = self.run_on(routing, dn, None, expect, reply_seq).await?;
                if let (Some(on), Some(out)) = (on, out)
                    && !out.error
                {
                    self.want.multi_statements = on;
                    if let Some(h) = self.conns.get_mut(dn) {
                        h.conn.state.multi_statements = on;
                    }
                }
                Ok(())
            }
            COM_RESET_CONNECTION => {
                self.reset_session().await?;
                self.send_ok(reply_seq).await
            }
            COM_CHANGE_USER => self.change_user(reply_seq).await,
            COM_STMT_PREPARE => self.prepare_routed(routing, reply_seq).await,
            COM_STMT_EXECUTE => self.execute_routed(routing, reply_seq).await,
            COM_STMT_RESET | COM_STMT_FETCH => {
                let id = stmt_id(&self.client.packet_payload()).unwrap_or(0);
                match self.statements.get_mut(id) {
                    None => Err(Error::unknown_statement(id, name(cmd))),
                    Some(s) if cmd == COM_STMT_RESET => {
                        s.long_data = false;
                        self.send_ok(reply_seq).await
                    }
                    Some(_) => Err(unsupported("cursors on prepared statements")),
                }
            }
            COM_STMT_SEND_LONG_DATA => {
                // No response; the next EXECUTE reports it.
                let id = stmt_id(&self.client.packet_payload()).unwrap_or(0);
                if let Some(s) = self.statements.get_mut(id) {
                    s.long_data = true;
                }
                Ok(())
            }
            COM_STMT_CLOSE => {
                let id = stmt_id(&self.client.packet_payload()).unwrap_or(0);
                self.close_routed(id);
                Ok(())
            }
            other => Err(Error::unknown_command(other)),
        };
        if self.txn_begin.is_none() && !self.conns.is_empty() {
            self.release_conns(false).await;
        }
        result
    }

    /// A COM_QUERY: plan it, then run the plan.
    async fn query_routed(&mut self, routing: &Arc<Routing>, reply_seq: u8) -> Result<()> {
        let mode = self.sql_mode();
        let (plan, effects, diag) = {
            let p = self.client.packet_payload();
            let Ok(sql) = std::str::from_utf8(&p[1..]) else {
                return Err(refusal(&RouterError::unsupported(
                    "a statement that is not valid UTF-8 on a sharded configuration",
                )));
            };
            let diag = diagnostics_query(sql.as_bytes());
            let effects = pinning::effects(sql.as_bytes());
            let plan = if diag.is_some() {
                None
            } else {
                Some(
                    routing
                        .router
                        .route_in(self.logical.as_deref(), mode, sql, &[]),
                )
            };
            (plan, effects, diag)
        };
        if let Some(which) = diag {
            // The statement before may have run anywhere: the session's own record answers.
            if self.diag.known || which == crate::session::DiagQuery::ConnectionId {
                return self.answer_diagnostics(which, reply_seq).await;
            }
            let dn = self.any_datanode(routing);
            self.run_on(
                routing,
                dn,
                None,
                Expect::Results { binary: false },
                reply_seq,
            )
            .await?;
            return Ok(());
        }
        let plan = plan.expect("planned unless a diagnostics query");
        match plan {
            RoutePlan::Single(t) => {
                let same = self.is_client_text(&t.sql);
                if !same
                    && t.sql
                        .get(..4)
                        .is_some_and(|w| w.eq_ignore_ascii_case("SHOW"))
                    && self.show_logical(routing, &t, reply_seq).await?
                {
                    return Ok(());
                }
                let sql = (!same).then_some(t.sql.as_str());
                self.run_on(
                    routing,
                    t.datanode,
                    sql,
                    Expect::Results { binary: false },
                    reply_seq,
                )
                .await?;
                self.note_effects(t.datanode, effects);
                Ok(())
            }
            RoutePlan::Any { sql } => {
                if metadata::reads_schema_tables(&sql) {
                    // Their rows name physical databases and tables, per datanode.
                    return Err(refusal(&RouterError::unsupported(
                        "information_schema.TABLES/COLUMNS on a sharded configuration \
                         (use SHOW TABLES, SHOW COLUMNS, SHOW CREATE TABLE)",
                    )));
                }
                let dn = self.any_datanode(routing);
                let same = self.is_client_text(&sql);
                let text = (!same).then_some(sql.as_str());
                self.run_on(
                    routing,
                    dn,
                    text,
                    Expect::Results { binary: false },
                    reply_seq,
                )
                .await?;
                self.note_effects(dn, effects);
                Ok(())
            }
            RoutePlan::Local(answer) => self.answer_local(routing, answer, reply_seq).await,
            RoutePlan::Session(kind) => self.session_statement(routing, kind, reply_seq).await,
            RoutePlan::Refuse(e) => {
                // Off the hot path: only an INSERT the planner refused can need a sequence.
                let fill = {
                    let p = self.client.packet_payload();
                    std::str::from_utf8(&p[1..]).ok().and_then(|sql| {
                        shoal_router::plan::sequence::sequence_fill(
                            &routing.topology,
                            self.logical.as_deref(),
                            sql,
                        )
                    })
                };
                match fill {
                    Some(fill) => self.insert_with_sequence(routing, fill, reply_seq).await,
                    None => Err(refusal(&e)),
                }
            }
            RoutePlan::Broadcast { targets } => {
                let dml = {
                    let p = self.client.packet_payload();
                    let sql = std::str::from_utf8(&p[1..]).unwrap_or("");
                    shoal_router::sql::classify(sql).is_dml()
                };
                if dml {
                    self.run_writes(routing, targets, false, &prepared::Request::Text, reply_seq)
                        .await
                } else {
                    self.run_ddl(routing, targets, reply_seq).await
                }
            }
            RoutePlan::Scatter {
                targets,
                merge: Merge::AffectedRows,
            } => {
                self.run_writes(routing, targets, true, &prepared::Request::Text, reply_seq)
                    .await
            }
            RoutePlan::Scatter {
                targets,
                merge: Merge::Rows(spec),
            } => {
                self.run_scatter(routing, targets, &spec, &prepared::Request::Text, reply_seq)
                    .await
            }
        }
    }

    /// Whether `sql` is exactly the text of the client's COM_QUERY (then its frame is relayed).
    fn is_client_text(&self, sql: &str) -> bool {
        self.client.packet_payload().get(1..) == Some(sql.as_bytes())
    }

    /// State a statement left on a connection out of the trackers' sight pins it.
    fn note_effects(&mut self, dn: DatanodeId, effects: pinning::Effects) {
        if effects.leaves_state
            && let Some(h) = self.conns.get_mut(dn)
        {
            h.sticky = true;
        }
    }

    /// Where a statement any datanode can answer goes: a connection already held (in a
    /// transaction, the first one touched), else the current schema's default datanode.
    pub(crate) fn any_datanode(&self, routing: &Routing) -> DatanodeId {
        if let Some(h) = self.conns.held.first() {
            return h.dn;
        }
        self.logical
            .as_deref()
            .and_then(|s| routing.topology.schema(s))
            .and_then(|s| s.default_datanode)
            .unwrap_or(0)
    }

    /// The connection to datanode `dn`, held from now on, in the session's state: opened from
    /// its datahost's pool if not held yet, its variables aligned, and inside the session's
    /// transaction if one is open. Returns its index in `self.conns`.
    pub(crate) async fn touch(&mut self, routing: &Routing, dn: DatanodeId) -> Result<usize> {
        if let Some(i) = self.conns.position(dn)
            && self.conns.held[i].conn.closed_by_server()
        {
            let h = self.conns.held.remove(i);
            if h.pinned() || self.txn_begin.is_some() {
                // A transaction or pinned state went with it: say so, as a direct connection
                // would, instead of carrying on without it.
                self.abandon_transaction().await;
                return Err(Error::lost_backend());
            }
        }
        let node = &routing.topology.datanodes[dn];
        let i = match self.conns.position(dn) {
            Some(i) => i,
            None => {
                let pool = self.shared.pools[node.datahost].clone();
                if pool.would_wait() {
                    self.release_idle_of(routing, node.datahost);
                }
                let conn = pool
                    .acquire(Wanted {
                        wire: self.caps,
                        prefer: 0,
                        schema: Some(&node.database),
                        multi_statements: self.want.multi_statements,
                    })
                    .await?;
                let i = self.conns.push(Held::new(dn, conn));
                self.publish_backends();
                i
            }
        };
        let h = &mut self.conns.held[i];
        h.used_in = self.conns.statement;
        let aligned = h.conn.state.schema.as_deref() == Some(node.database.as_str())
            && h.conn.state.vars == self.want.vars
            && h.conn.state.last_insert_id == self.want.last_insert_id
            && h.conn.state.multi_statements == self.want.multi_statements;
        let mut result = Ok(());
        if !aligned {
            result = align_to(&self.want, Some(&node.database), &mut h.conn).await;
        }
        if result.is_ok()
            && let Some(begin) = &self.txn_begin
            && !h.txn_begun
        {
            result = h
                .conn
                .command(COM_QUERY, begin.as_bytes())
                .await
                .map(|_| ());
            if result.is_ok() {
                h.txn_begun = true;
                h.in_trans = true;
            }
        }
        match result {
            Ok(()) => Ok(i),
            Err(Error::Reply {
                code,
                state,
                message,
            }) => Err(Error::Reply {
                code,
                state,
                message: format!("datanode {}: {message}", node.name),
            }),
            Err(e) => {
                self.conns.held.remove(i);
                Err(e)
            }
        }
    }

    /// Sends the client's command (or `sql` as a new COM_QUERY) to datanode `dn` and relays
    /// the response. `None` if the backend broke (the client already got a 2013 error).
    pub(crate) async fn run_on(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
        sql: Option<&str>,
        expect: Expect,
        reply_seq: u8,
    ) -> Result<Option<Outcome>> {
        let i = self.touch(routing, dn).await?;
        let h = &mut self.conns.held[i];
        match sql {
            None => h.conn.io.write_raw(self.client.frame()),
            Some(s) => {
                let mut payload = Vec::with_capacity(1 + s.len());
                payload.push(COM_QUERY);
                payload.extend_from_slice(s.as_bytes());
                let mut seq = 0;
                h.conn.io.write_packet(&mut seq, &payload);
            }
        }
        self.relay_from(i, expect, reply_seq).await
    }

    /// Sends `payload` (a whole command) to datanode `dn` and relays the response.
    pub(crate) async fn run_on_bytes(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
        payload: &[u8],
        expect: Expect,
        reply_seq: u8,
    ) -> Result<Option<Outcome>> {
        let i = self.touch(routing, dn).await?;
        let mut seq = 0;
        self.conns.held[i].conn.io.write_packet(&mut seq, payload);
        self.relay_from(i, expect, reply_seq).await
    }

    /// Flushes what was written to held connection `i` and relays its response.
    async fn relay_from(
        &mut self,
        i: usize,
        expect: Expect,
        reply_seq: u8,
    ) -> Result<Option<Outcome>> {
        let h = &mut self.conns.held[i];
        let mut seq = reply_seq;
        let result = match h.conn.io.flush().await {
            Ok(()) => relay(&mut h.conn, &mut self.client, self.caps, expect, &mut seq).await,
            Err(e) => Err(Error::BackendIo(e)),
        };
        h.conn.last_used = Instant::now();
        match result {
            Ok(out) => {
                if let Expect::Results { .. } | Expect::CursorResults = expect {
                    self.diag.known = true;
                    self.diag.row_count = if out.error {
                        -1
                    } else {
                        out.affected.map_or(-1, |a| a as i64)
                    };
                    if out.had_rows {
                        self.diag.found_rows = out.rows;
                    }
                }
                if out.prepared.is_some() {
                    // A statement this session owns on the server (not one of the cache's):
                    // the connection is reset before anyone else gets it.
                    self.conns.held[i].sticky = true;
                }
                self.learn(i, out.status, out.last_insert_id, &out.tracked);
                Ok(Some(out))
            }
            Err(Error::BackendIo(e)) => {
                debug!(error = %e, "backend failed during a command");
                self.conns.held.remove(i);
                self.abandon_transaction().await;
                let (code, state, msg) = match Error::lost_backend() {
                    Error::Reply {
                        code,
                        state,
                        message,
                    } => (code, state, message),
                    _ => (2013, *b"HY000", "Lost connection to backend".into()),
                };
                self.send_error(seq, code, &state, &msg).await?;
                Ok(None)
            }
            Err(Error::ClientIo(e)) => {
                // The backend may be mid-response: it cannot be reused.
                self.conns.held.remove(i);
                Err(Error::ClientIo(e))
            }
            Err(e) => Err(e),
        }
    }

    /// Learns from a response on held connection `i` what changed in the session.
    pub(crate) fn learn(
        &mut self,
        i: usize,
        status: Option<u16>,
        last_insert_id: Option<u64>,
        tracked: &crate::backend::state::Tracked,
    ) {
        let h = &mut self.conns.held[i];
        if let Some(status) = status {
            h.in_trans = status & IN_TRANS != 0 || status & AUTOCOMMIT == 0;
            self.status = status
                & !StatusFlags::SERVER_SESSION_STATE_CHANGED.bits()
                & !StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();
            if self.txn_begin.is_some() {
                self.status |= IN_TRANS;
            }
        }
        if let Some(id) = last_insert_id {
            self.want.last_insert_id = id;
            h.conn.state.last_insert_id = id;
        }
        if !tracked.is_empty() {
            if tracked.unexplained_change() {
                h.sticky = true;
            }
            h.conn.state.apply(tracked);
            // The session's schema is logical; each connection keeps its datanode's database.
            let vars_only = crate::backend::state::Tracked {
                schema: None,
                vars: tracked.vars.clone(),
                state_changed: false,
            };
            self.want.apply(&vars_only);
        }
    }

    /// Gives held connections back to their pools: all of them (`all`, resetting pinned ones
    /// first) or, between statements, the unpinned ones whose pool has sessions waiting.
    pub(crate) async fn release_conns(&mut self, all: bool) {
        let mut i = 0;
        while i < self.conns.held.len() {
            let h = &self.conns.held[i];
            let wanted = all || (!h.pinned() && h.conn.pool().reclaim_requested());
            if !wanted {
                i += 1;
                continue;
            }
            let mut h = self.conns.held.remove(i);
            if h.pinned() {
                let reset = tokio::time::timeout(
                    self.shared.pool.settings().connect_timeout,
                    h.conn.reset(),
                )
                .await;
                if !matches!(reset, Ok(Ok(()))) {
                    // Dropping closes it; the server rolls back and frees everything.
                    continue;
                }
            }
            h.conn.release();
        }
        self.publish_backends();
    }

    /// Gives back this session's connections to `datahost` that the running statement has not
    /// used and nothing pins: a statement needing more connections of a full pool must not wait
    /// for ones its own session keeps from earlier statements.
    fn release_idle_of(&mut self, routing: &Routing, datahost: usize) {
        let statement = self.conns.statement;
        let mut i = 0;
        while i < self.conns.held.len() {
            let h = &self.conns.held[i];
            if h.used_in != statement
                && !h.pinned()
                && routing.topology.datanodes[h.dn].datahost == datahost
            {
                self.conns.held.remove(i).conn.release();
            } else {
                i += 1;
            }
        }
        self.publish_backends();
    }

    /// A connection of an open transaction broke: the others roll back, the transaction ends.
    async fn abandon_transaction(&mut self) {
        if self.txn_begin.is_none() && !self.conns.in_transaction() {
            return;
        }
        let _ = self.end_transaction(false).await;
    }

    /// COM_INIT_DB or `USE db`: the logical schema changes; connections keep their datanodes'
    /// databases.
    pub(crate) async fn use_logical(&mut self, db: &str, reply_seq: u8) -> Result<()> {
        self.check_schema_allowed(db)?;
        self.logical = Some(db.to_string());
        self.send_ok(reply_seq).await
    }

    /// Sends everything written to the client so far.
    pub(crate) async fn flush_client(&mut self) -> Result<()> {
        self.client.flush().await.map_err(Error::ClientIo)
    }
}

/// A target's SQL as a COM_QUERY payload.
pub(crate) fn query_payload(t: &Target) -> Vec<u8> {
    let mut payload = Vec::with_capacity(1 + t.sql.len());
    payload.push(COM_QUERY);
    payload.extend_from_slice(t.sql.as_bytes());
    payload
}
