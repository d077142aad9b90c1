//! The executor: with the router, each statement is planned in one call
//! ([`shoal_router::plan::Router::plan_statement`]: the route and every other decision its
//! text and the session's inputs settle) and run here, one arm per plan kind, over the
//! session's backend connections (one per datanode touched, see [`connset`]). The request
//! path: client -> wire -> session -> router plan -> executor -> backend pool.
//!
//! - `Single` and `Any`: one datanode; the client's bytes are relayed as they are when the
//!   router left the text unchanged, and the response is relayed frame by frame;
//! - `Local`: answered here (`local`);
//! - `Session`: transaction control and session state (`txn`);
//! - broadcast writes and `Scatter` writes: every target, one OK (`write`); broadcast DDL;
//! - `Scatter` reads: merged while streaming (`scatter`, [`crate::merge`]);
//! - an INSERT completed from a sequence (`sequence`) or with its column list (`column_list`);
//! - `Refuse`: the router's error; the session goes on.
//!
//! Prepared statements (`prepared`) are planned per EXECUTE with their bound values and run
//! through the same arms.

pub(crate) mod admin;
pub mod catalog;
pub mod collations;
mod column_list;
pub mod connset;
mod cursor;
pub(crate) mod diagnostics;
pub use cursor::Cursor;
pub use prepared::Statements;
pub(crate) use replica::BACKEND_COLUMNS;
mod datanode_union;
mod gather;
mod gtid_position;
mod keymove;
pub mod kill;
mod local;
mod metadata;
mod multi;
pub(crate) mod params;
pub(crate) mod prepared;
mod reader;
pub mod relay;
mod replica;
mod request;
mod scatter;
mod single;
pub(crate) use single::query_payload;
pub mod sequence;
mod server_show;
mod subquery;
mod table_locks;
mod touch;
mod txn;
mod unreadable;
mod user_vars;
mod write;

use std::borrow::Cow;
use std::sync::Arc;

use mysql_common::constants::StatusFlags;
use shoal_router::RouterError;
use shoal_router::plan::{Merge, RoutePlan, StatementInput, Step, Target, namespace};
use shoal_router::topology::DatanodeId;
use tracing::debug;

use crate::backend::charset;
use crate::backend::pool::Wanted;
use crate::backend::pool::align_to;
use crate::error::{Error, Result};
use crate::out_of_line::cold;
use crate::runtime::routing::Routing;
use crate::wire::command::*;
use connset::{Held, Want};
use diagnostics::DiagQuery;
use relay::{Expect, Outcome, relay};
use shoal_router::config::ReadWhenPrimaryDown;

/// A router refusal as the error the client gets.
pub fn refusal(e: &RouterError) -> Error {
    Error::refusal(e)
}

/// 1290 (HY000), as a server started with --read-only answers, naming the user.
fn read_only_refused(user: &str, what: &str) -> Error {
    Error::reply(
        1290,
        b"HY000",
        format!(
            "User '{user}' is read-only (users.read_only in Shoal's configuration), so it \
             cannot execute this statement ({what})"
        ),
    )
}

fn unsupported(what: &str) -> Error {
    refusal(&RouterError::unsupported(format!(
        "{what} on a sharded configuration"
    )))
}

/// What a statement needs of the connection [`Cursor::touch_for`] gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Use {
    /// Text run in the datanode's database: the connection must be in it.
    Text,
    /// A statement that carries its database with it: a prepared statement's execute (the
    /// server runs it in the database it was prepared in), or text whose tables the router
    /// qualified ([`Target::qualified`]). Any connection to the datanode's server runs it.
    AnyDatabase,
}

/// Token buffer capacity a session keeps between statements.
const MAX_KEPT_TOKENS: usize = 4096;

const IN_TRANS: u16 = StatusFlags::SERVER_STATUS_IN_TRANS.bits();
const AUTOCOMMIT: u16 = StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits();

impl Cursor {
    /// Runs one command with the router (decoded by the session's dispatch, which runs
    /// COM_RESET_CONNECTION and COM_CHANGE_USER itself).
    pub(crate) async fn dispatch_routed(
        &mut self,
        routing: &Arc<Routing>,
        command: Command,
        reply_seq: u8,
    ) -> Result<()> {
        if self.conns.untold.is_some() {
            self.tell_doom(&command)?;
        }
        self.begin_statement();
        // Off: no clock read.
        self.conns.deadline = self
            .rt
            .config
            .query_timeout
            .map(|t| tokio::time::Instant::now() + t);
        let result = match command {
            Command::Ping => self.send_ok(reply_seq).await,
            Command::Query => match self.statements_of_text(routing) {
                Some(ranges) => cold(self.run_multi(routing, ranges, reply_seq)).await,
                None => self.query_routed(routing, reply_seq).await,
            },
            Command::InitDb(db) => cold(self.use_logical(&db, reply_seq)).await,
            Command::FieldList => cold(self.field_list_routed(routing, reply_seq)).await,
            Command::Statistics | Command::SetOption(_) => {
                let dn = self.any_datanode(routing);
                let expect = Expect::Single;
                let on = match command {
                    Command::SetOption(on) => Some(on),
                    _ => None,
                };
                let out =
                    cold(self.run_on(routing, dn, Use::Text, None, expect, reply_seq)).await?;
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
            Command::StmtPrepare => cold(self.prepare_routed(routing, reply_seq)).await,
            Command::StmtExecute { .. } => self.execute_routed(routing, reply_seq).await,
            Command::StmtReset(id) | Command::StmtFetch(id) => {
                let reset = matches!(command, Command::StmtReset(_));
                match self.statements.get_mut(id) {
                    None => {
                        let cmd = if reset {
                            COM_STMT_RESET
                        } else {
                            COM_STMT_FETCH
                        };
                        Err(Error::unknown_statement(id, name(cmd)))
                    }
                    Some(s) if reset => {
                        s.long_data = false;
                        self.send_ok(reply_seq).await
                    }
                    Some(_) => Err(unsupported("cursors on prepared statements")),
                }
            }
            Command::StmtSendLongData(id) => {
                // No response; the next EXECUTE reports it.
                if let Some(s) = self.statements.get_mut(id) {
                    s.long_data = true;
                }
                Ok(())
            }
            Command::StmtClose(id) => {
                self.close_routed(id);
                Ok(())
            }
            // The session's dispatch runs these itself.
            Command::ResetConnection | Command::ChangeUser => Err(Error::malformed("command")),
        };
        if self.conns.doom.is_some() || self.conns.held.iter().any(|h| h.conn.txn_error.is_some()) {
            let told = result.is_err() || self.mark.error.is_some();
            cold(self.settle_fate(told)).await;
        }
        // Connections the pools want back are released by the command loop before the next
        // read (`release_wanted`), not here as well.
        self.settle_admission();
        self.lift_deadline();
        // A backend's error, or Shoal's own wrapping one, names physical databases and tables;
        // the router's refusals name what the client wrote, as they must stay.
        if std::mem::take(&mut self.refused) {
            return result;
        }
        result.map_err(|e| routing.names.error(e, self.logical.as_deref()))
    }

    /// Resets what the connection set knows of the running statement, before each one.
    fn begin_statement(&mut self) {
        self.conns.statement += 1;
        self.conns.want = Want::Primary;
        self.conns.writing = false;
        self.conns.maybe_writes = true;
        self.conns.no_branch = false;
        self.conns.avoid = None;
    }

    /// Ends the running statement's time limit (between statements nothing runs: resets
    /// and pings go unbounded).
    pub(crate) fn lift_deadline(&mut self) {
        if self.conns.deadline.is_some() {
            self.disarm_held();
            self.conns.deadline = None;
        }
    }

    /// Lifts the time limit from every held connection, before COMMIT and ROLLBACK, which
    /// run unbounded: a KILL must never land in a commit, and a deadline already past would
    /// send one to every connection ending a transaction. Connections the statement touches
    /// afterwards are armed again.
    pub(crate) fn disarm_held(&mut self) {
        if self.conns.deadline.is_some() {
            for h in &mut self.conns.held {
                h.conn.disarm();
            }
        }
    }

    /// The router's refusal `e` as the client's error, kept as it is: it names what the client
    /// wrote (`Table 'shop.ledger_00' doesn't exist` must not read as `shop.ledger`).
    pub(crate) fn refuse(&mut self, e: &RouterError) -> Error {
        self.refused = true;
        refusal(e)
    }

    /// What the router needs of the session to plan statement `sql` (read in the client's
    /// charset) under `mode` and `charsets`.
    pub(super) fn statement_input<'a>(
        &'a self,
        routing: &'a Routing,
        sql: &'a str,
        mode: shoal_router::sql::SqlMode,
        charsets: shoal_router::charset::Charsets,
    ) -> StatementInput<'a> {
        StatementInput {
            sql,
            current: self.logical.as_deref(),
            mode,
            charsets,
            read_only: !routing.read_only_users.is_empty()
                && routing.read_only_users.contains(&self.user),
            denied_schemas: self.denied_schemas(routing),
            user_vars: &self.user_vars,
            read_split: self.rt.backends.any_read_balancing(),
            xa_tracking: self.xa_tracking(routing),
            digest: self.shared.observe.wants_digest(),
        }
    }

    /// A COM_QUERY: plan it, then run the plan.
    async fn query_routed(&mut self, routing: &Arc<Routing>, reply_seq: u8) -> Result<()> {
        // One tokenization serves the router and the pin check.
        let mut toks = std::mem::take(&mut self.tokens);
        let (mode, charsets) = (self.sql_mode(), self.charsets());
        let plan = {
            let p = self.client.packet_payload();
            // Read in the client's charset as MariaDB reads it; what the router renders is
            // written back in it (`run_on`, `query_payload`).
            // A text decoded from another charset is kept (moved, not copied) for the arms
            // that read the client's text again; UTF-8 text is read in the packet.
            let read = match charset::read_statement(charsets.client(), &p[1..])? {
                Cow::Borrowed(text) => {
                    self.decoded = None;
                    text
                }
                Cow::Owned(text) => {
                    self.decoded = Some(text);
                    self.decoded.as_deref().unwrap_or_default()
                }
            };
            let input = self.statement_input(routing, read, mode, charsets.statements);
            routing.router.plan_statement(&input, &mut toks)
        };
        let effects = plan.pins;
        // A huge statement's buffer is not kept for the session's lifetime.
        if toks.capacity() <= MAX_KEPT_TOKENS {
            self.tokens = toks;
        }
        if plan.digest.is_some() {
            self.mark.digest = plan.digest;
        }
        // From before it runs until after it ended (or failed part-way): the catalog is
        // built again for every read meanwhile and after.
        let _ddl = plan.changes_schema.then(|| routing.catalog.changing());
        if let Some(limit) = plan.deadline {
            // Its own deadline besides `query_timeout`'s: the sooner one wins.
            let at = tokio::time::Instant::now() + limit;
            self.conns.deadline = Some(self.conns.deadline.map_or(at, |d| d.min(at)));
        }
        self.mark.route = match &plan.step {
            Step::Route(r) => Some(crate::observe::RouteKind::of(r)),
            Step::BroadcastWrites(_) | Step::BroadcastDdl(_) => {
                Some(crate::observe::RouteKind::Broadcast)
            }
            Step::InsertWithSequence(_) | Step::InsertWithColumnList(_) | Step::Unreadable(_) => {
                Some(crate::observe::RouteKind::Refused)
            }
            Step::Diagnostics(_) | Step::ReadOnly(_) => None,
        };
        self.apply_want(plan.want);
        if plan.implicit_commit {
            if self.txn_begin.is_some() || self.conns.in_transaction() {
                cold(self.end_transaction(true)).await?;
            }
            self.conns.no_branch = true;
        }
        let route = match plan.step {
            Step::Route(route) => route,
            Step::ReadOnly(what) => return Err(read_only_refused(&self.user, &what)),
            Step::Diagnostics(which) => {
                // The statement before may have run anywhere: the session's own record answers.
                if self.diag.known || which == DiagQuery::ConnectionId {
                    return cold(self.answer_diagnostics(which, reply_seq)).await;
                }
                let dn = self.any_datanode(routing);
                let expect = Expect::Results { binary: false };
                cold(self.run_on(routing, dn, Use::Text, None, expect, reply_seq)).await?;
                return Ok(());
            }
            Step::Unreadable(e) => {
                let text = self.client_text();
                return Err(cold(self.unreadable(routing, &text, &e)).await);
            }
            Step::InsertWithSequence(fill) => {
                return cold(self.insert_with_sequence(routing, fill, reply_seq)).await;
            }
            Step::InsertWithColumnList(fill) => {
                return cold(self.insert_with_column_list(routing, fill, reply_seq)).await;
            }
            Step::BroadcastWrites(targets) => {
                let req = request::Request::Text;
                return cold(self.run_writes(routing, targets, false, &req, reply_seq)).await;
            }
            Step::BroadcastDdl(targets) => {
                return cold(self.run_ddl(routing, targets, reply_seq)).await;
            }
        };
        let is_show = plan.is_show;
        match route {
            RoutePlan::Single(t) => {
                // The statements of a multi-statement text batched behind this one.
                let joined = self.conns.batch_tail.take().map(|(tail, more)| {
                    self.conns.more_results = more;
                    format!("{};{tail}", t.sql)
                });
                let same = joined.is_none() && self.is_client_text(&t.sql);
                if !same && is_show && cold(self.show_logical(routing, &t, reply_seq)).await? {
                    return Ok(());
                }
                let sql = joined.as_deref().or((!same).then_some(&*t.sql));
                let how = if t.qualified {
                    Use::AnyDatabase
                } else {
                    Use::Text
                };
                self.run_read_on(
                    routing,
                    t.datanode,
                    how,
                    sql,
                    Expect::Results { binary: false },
                    reply_seq,
                )
                .await?;
                self.note_effects(t.datanode, effects);
                Ok(())
            }
            RoutePlan::Any { sql } => {
                let dn = self.any_datanode(routing);
                let same = self.is_client_text(&sql);
                let text = (!same).then_some(sql.as_str());
                self.run_read_on(
                    routing,
                    dn,
                    Use::Text,
                    text,
                    Expect::Results { binary: false },
                    reply_seq,
                )
                .await?;
                self.note_effects(dn, effects);
                Ok(())
            }
            RoutePlan::Local(answer) => cold(self.answer_local(routing, answer, reply_seq)).await,
            RoutePlan::Session(kind) => {
                cold(self.session_statement(routing, kind, None, reply_seq)).await
            }
            RoutePlan::Refuse(e) => Err(self.refuse(&e)),
            // The statement plan makes a broadcast one of its own steps (above).
            RoutePlan::Broadcast { .. } => Err(unsupported("an unclassified broadcast")),
            RoutePlan::Scatter {
                targets,
                merge: Merge::AffectedRows,
            } => {
                let req = request::Request::Text;
                cold(self.run_writes(routing, targets, true, &req, reply_seq)).await
            }
            RoutePlan::Scatter {
                targets,
                merge: Merge::Rows(spec),
            } => {
                let req = request::Request::Text;
                cold(self.run_scatter(routing, targets, &spec, &req, reply_seq)).await
            }
            RoutePlan::KeyMove(km) => cold(self.run_key_move(routing, &km, reply_seq)).await,
            RoutePlan::BindFirst(b) => {
                let req = request::Request::Text;
                cold(self.run_bind_first(routing, &b, &req, reply_seq)).await
            }
            RoutePlan::Gather(g) => {
                let req = request::Request::Text;
                cold(self.run_gather(routing, &g, &req, reply_seq)).await
            }
        }
    }

    /// The logical schemas this session's user may not use (`users.schemas`).
    pub(crate) fn denied_schemas<'r>(&self, routing: &'r Routing) -> &'r [String] {
        if routing.denied_schemas.is_empty() {
            return &[];
        }
        routing
            .denied_schemas
            .iter()
            .find(|(user, _)| *user == self.user)
            .map_or(&[], |(_, denied)| denied.as_slice())
    }

    /// A router refusal of access names the session's account, as MySQL's message does (the
    /// router does not know it).
    pub(crate) fn with_account(&self, e: Error) -> Error {
        match e {
            Error::Reply {
                code,
                state,
                message,
            } if message.starts_with(namespace::ACCESS_DENIED_PREFIX) => Error::Reply {
                code,
                state,
                message: format!(
                    "Access denied for user '{}'@'{}' to {}",
                    self.user,
                    self.peer_host,
                    &message[namespace::ACCESS_DENIED_PREFIX.len()..]
                ),
            },
            e => e,
        }
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
