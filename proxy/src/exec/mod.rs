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
mod fate;
mod gtid_position;
mod keymove;
pub mod kill;
mod local;
mod metadata;
mod multi;
pub mod pinning;
pub(crate) mod prepared;
mod reader;
pub mod relay;
mod replica;
mod savepoint;
mod scatter;
pub mod sequence;
mod server_show;
mod statement_time;
mod table_locks;
mod txn;
mod unreadable;
mod user_vars;
mod write;
mod xa;

use std::borrow::Cow;
use std::sync::Arc;

use mysql_common::constants::StatusFlags;
use shoal_router::RouterError;
use shoal_router::plan::{Merge, RoutePlan, Target, namespace};
use shoal_router::sql::lex::{TokKind, Token};
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
use diagnostics::diagnostics_tokens;
use relay::{Expect, Outcome, relay};
use shoal_router::config::ReadWhenPrimaryDown;

/// Whether a statement may change the logical schema's tables (DDL, and the stored programs
/// and views the catalog lists): the catalog's built rows are then stale. Read by its first
/// keyword (comments skipped by the tokenizer); a false positive only rebuilds the catalog.
fn changes_schema(sql: &[u8]) -> bool {
    const WORDS: [&[u8]; 5] = [b"CREATE", b"ALTER", b"DROP", b"RENAME", b"TRUNCATE"];
    // The hot path (a statement starting with a word): no tokenizing.
    let rest = sql.trim_ascii_start();
    if rest.first().is_some_and(u8::is_ascii_alphabetic) {
        let n = rest
            .iter()
            .position(|c| !c.is_ascii_alphanumeric() && *c != b'_')
            .unwrap_or(rest.len());
        return WORDS.iter().any(|w| w.eq_ignore_ascii_case(&rest[..n]));
    }
    let Ok(sql) = std::str::from_utf8(sql) else {
        return false;
    };
    let mut toks = Vec::new();
    if shoal_router::sql::lex::tokenize_into(sql, &mut toks).is_err() {
        return false;
    }
    toks.first().is_some_and(|t| {
        ["CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE"]
            .iter()
            .any(|k| t.is_kw(sql, k))
    })
}

/// A router refusal as the error the client gets.
pub fn refusal(e: &RouterError) -> Error {
    Error::refusal(e)
}

fn unsupported(what: &str) -> Error {
    refusal(&RouterError::unsupported(format!(
        "{what} on a sharded configuration"
    )))
}

/// What a statement needs of the connection [`Session::touch_for`] gives it.
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
                None => {
                    // From before it runs until after it ended (or failed part-way): the
                    // catalog is built again for every read meanwhile and after.
                    let _ddl = changes_schema(&self.client.packet_payload()[1..])
                        .then(|| routing.catalog.changing());
                    self.query_routed(routing, reply_seq).await
                }
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

    /// A COM_QUERY: plan it, then run the plan.
    async fn query_routed(&mut self, routing: &Arc<Routing>, reply_seq: u8) -> Result<()> {
        let mode = self.sql_mode();
        // One tokenization serves the diagnostics check, the pin check and the router.
        let mut toks = std::mem::take(&mut self.tokens);
        // `is_show`: the statement is a SHOW (read on its tokens, comments skipped).
        // `commits`: a statement MariaDB runs with an implicit commit, which an XA branch
        // refuses: the transaction is committed first, as MariaDB would.
        let charsets = self.charsets();
        // The tokenizer could not read the statement to its end (see `unreadable`).
        let mut unreadable = false;
        let (plan, effects, diag, read_route, is_show, commits) = {
            let p = self.client.packet_payload();
            // Read in the client's charset as MariaDB reads it; what the router renders is
            // written back in it (`run_on`, `query_payload`).
            let read = charset::read_statement(charsets.client(), &p[1..])?;
            self.decoded = match &read {
                Cow::Owned(text) => Some(text.clone()),
                Cow::Borrowed(_) => None,
            };
            let sql: &str = &read;
            self.check_read_only(routing, mode, sql)?;
            // MariaDB would run a Mycat hint `/*!mycat:...*/` as code: it is cut off (after
            // the read/write decision has seen it).
            let mut text = match shoal_router::sql::readwrite::mycat_hint_len(sql) {
                Some(n) => &sql[n..],
                None => sql,
            };
            if let Some((limit, statement)) = statement_time::statement_time_for(text) {
                // Run as written after FOR, under its own deadline (the sooner one wins).
                if let Some(limit) = limit {
                    let at = tokio::time::Instant::now() + limit;
                    self.conns.deadline = Some(self.conns.deadline.map_or(at, |d| d.min(at)));
                }
                text = statement;
            }
            match routing.router.tokenize(text, mode, &mut toks) {
                // Unterminated string or comment: refused, nothing runs.
                Err(e) => {
                    unreadable = true;
                    (
                        Some(RoutePlan::Refuse(e)),
                        Default::default(),
                        None,
                        None,
                        false,
                        false,
                    )
                }
                // A backend would read NULL for a variable only the session holds.
                Ok(())
                    if !toks.first().is_some_and(|t| t.is_kw(text, "SET"))
                        && self.reads_held_user_var(text, &toks) =>
                {
                    (
                        Some(RoutePlan::Refuse(RouterError::unsupported(
                            "reading a user variable outside SET (through Shoal user variables \
                             save and restore system variables only)",
                        ))),
                        Default::default(),
                        None,
                        None,
                        false,
                        false,
                    )
                }
                Ok(()) => {
                    if self.shared.observe.wants_digest() {
                        self.mark.digest = Some(shoal_router::sql::normalize::digest(text, &toks));
                    }
                    let diag = diagnostics_tokens(text, &toks);
                    let effects = pinning::token_effects(text, &toks);
                    let plan = diag.is_none().then(|| {
                        match self.denied_schema_named(routing, text, &toks) {
                            Some(e) => RoutePlan::Refuse(e),
                            None => routing.router.route_tokens(
                                self.logical.as_deref(),
                                mode,
                                charsets.statements,
                                text,
                                &toks,
                                &[],
                            ),
                        }
                    });
                    let route = plan.as_ref().and_then(|_| {
                        self.read_route_of(routing, mode, sql)
                            .or_else(|| self.xa_route(routing, mode, sql))
                    });
                    let is_show = toks.first().is_some_and(|t| t.is_kw(text, "SHOW"));
                    let commits = plan.is_some()
                        && self.xa_tracking(routing)
                        && xa::causes_implicit_commit(text, &toks);
                    (plan, effects, diag, route, is_show, commits)
                }
            }
        };
        self.mark.route = plan.as_ref().map(crate::observe::RouteKind::of);
        if let (Some(route), Some(plan)) = (read_route, &plan) {
            (self.conns.want, self.conns.writing) = replica::statement_want(route, plan);
        }
        self.note_statement_writes(read_route);
        if commits {
            if self.txn_begin.is_some() || self.conns.in_transaction() {
                cold(self.end_transaction(true)).await?;
            }
            self.conns.no_branch = true;
        }
        // A huge statement's buffer is not kept for the session's lifetime.
        if toks.capacity() <= MAX_KEPT_TOKENS {
            self.tokens = toks;
        }
        if let Some(which) = diag {
            // The statement before may have run anywhere: the session's own record answers.
            if self.diag.known || which == crate::exec::diagnostics::DiagQuery::ConnectionId {
                return cold(self.answer_diagnostics(which, reply_seq)).await;
            }
            let dn = self.any_datanode(routing);
            let expect = Expect::Results { binary: false };
            cold(self.run_on(routing, dn, Use::Text, None, expect, reply_seq)).await?;
            return Ok(());
        }
        let Some(plan) = plan else {
            // Only a diagnostics query goes unplanned, and it was answered above.
            return Err(Error::malformed("COM_QUERY"));
        };
        match plan {
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
            RoutePlan::Refuse(e) if unreadable => {
                let text = self.client_text();
                Err(cold(self.unreadable(routing, &text, &e)).await)
            }
            RoutePlan::Refuse(e) => {
                // Off the hot path: only an INSERT the planner refused can need a sequence.
                let text = self.client_text();
                let fill = shoal_router::plan::sequence::sequence_fill(
                    &routing.topology,
                    self.logical.as_deref(),
                    &text,
                );
                if let Some(fill) = fill {
                    return cold(self.insert_with_sequence(routing, fill, reply_seq)).await;
                }
                // Or an INSERT without a column list into a sharded table.
                let columns = shoal_router::plan::column_list::column_list_fill(
                    &routing.topology,
                    self.logical.as_deref(),
                    &text,
                );
                match columns {
                    Some(fill) => {
                        cold(self.insert_with_column_list(routing, fill, reply_seq)).await
                    }
                    None => Err(self.refuse(&e)),
                }
            }
            RoutePlan::Broadcast { targets } => {
                let dml = shoal_router::sql::classify(&self.client_text()).is_dml();
                let req = prepared::Request::Text;
                if dml {
                    cold(self.run_writes(routing, targets, false, &req, reply_seq)).await
                } else {
                    cold(self.run_ddl(routing, targets, reply_seq)).await
                }
            }
            RoutePlan::Scatter {
                targets,
                merge: Merge::AffectedRows,
            } => {
                let req = prepared::Request::Text;
                cold(self.run_writes(routing, targets, true, &req, reply_seq)).await
            }
            RoutePlan::Scatter {
                targets,
                merge: Merge::Rows(spec),
            } => {
                let req = prepared::Request::Text;
                cold(self.run_scatter(routing, targets, &spec, &req, reply_seq)).await
            }
            RoutePlan::KeyMove(km) => cold(self.run_key_move(routing, &km, reply_seq)).await,
        }
    }

    /// A logical schema of the topology that this session's user may not use, named in the
    /// statement: refused as MySQL refuses a database the user has no grant on (1044). Read
    /// on the tokens: any identifier with that name counts, whatever it names.
    pub(crate) fn denied_schema_named(
        &self,
        routing: &Routing,
        sql: &str,
        toks: &[Token],
    ) -> Option<RouterError> {
        if routing.denied_schemas.is_empty() {
            return None;
        }
        let (_, denied) = routing
            .denied_schemas
            .iter()
            .find(|(user, _)| *user == self.user)?;
        denied.iter().find_map(|s| {
            let named = toks.iter().any(|t| {
                matches!(t.kind, TokKind::Word | TokKind::QuotedIdent)
                    && t.ident_value(sql).eq_ignore_ascii_case(s)
            });
            named.then(|| namespace::access_denied(s))
        })
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

    /// Whether `sql` is exactly the text of the client's COM_QUERY (then its frame, the client's
    /// own bytes, is relayed).
    fn is_client_text(&self, sql: &str) -> bool {
        match &self.decoded {
            Some(text) => text == sql,
            None => self.client.packet_payload().get(1..) == Some(sql.as_bytes()),
        }
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
        // Under LOCK TABLES, only the connections holding the locks may run statements.
        if let Some(&dn) = self.table_locks.first() {
            return dn;
        }
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
        self.touch_for(routing, dn, Use::Text).await
    }

    /// A connection of Shoal's own to datanode `dn`'s decided primary, in a clean state in the
    /// datanode's database (a pooled connection carries another session's variables): for
    /// what Shoal reads or writes on its own behalf (a sequence's segment, a table's column
    /// order, the catalog), never part of the client's transaction.
    pub(crate) async fn own_primary_connection(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
    ) -> Result<crate::backend::pool::PooledConn> {
        let node = &routing.topology.datanodes[dn];
        if let Some(e) = self.rt.backends.primary_refusal(node.datahost, &node.name) {
            return Err(e);
        }
        let pool = self.rt.pools[self.rt.backends.primary(node.datahost)].clone();
        if pool.is_full() {
            self.release_stale();
        }
        let mut conn = pool
            .acquire(Wanted {
                wire: self.routed_wire(),
                prefer: 0,
                schema: Some(&node.database),
                multi_statements: false,
            })
            .await?;
        let clean = crate::backend::state::SessionState::default();
        align_to(&clean, Some(&node.database), &mut conn).await?;
        Ok(conn)
    }

    /// [`Self::touch`] for a use that may not need the connection in `dn`'s database.
    pub(crate) async fn touch_for(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
        how: Use,
    ) -> Result<usize> {
        // Nothing more runs in a transaction a lost branch has doomed.
        self.check_doom()?;
        if let Some(i) = self.conns.position(dn)
            && self.conns.held[i].conn.closed_by_server()
        {
            let h = self.conns.take(i);
            self.rt.backends.servers[h.server].health.note_error();
            if h.table_locks {
                // Its locks are gone: the session's others go too, rather than the session
                // going on with some tables locked and some not.
                let _ = cold(self.unlock_tables()).await;
            }
            if h.pinned() {
                // A transaction or pinned state went with it: say so, as a direct connection
                // would, instead of carrying on without it.
                cold(self.abandon_transaction()).await;
                return Err(Error::lost_backend());
            }
            // Otherwise nothing of the session's was on it (a connection kept from an earlier
            // autocommit statement, perhaps on a replica this statement does not go to, or
            // from before the session's BEGIN, which had not reached it): a fresh one
            // replaces it, and the statement never fails for a server it does not need.
        }
        if !self.table_locks.is_empty() && !self.table_locks.contains(&dn) {
            // Under LOCK TABLES only the locked tables can be used, as on one server; any
            // other connection would read and write without the session's locks.
            return Err(table_locks::not_locked(routing, dn));
        }
        let node = &routing.topology.datanodes[dn];
        let mut chosen = None;
        if how == Use::AnyDatabase
            && self.conns.position(dn).is_none()
            && self.txn_begin.is_none()
            && !self.conns.in_transaction()
        {
            // The statement runs the same whatever the connection's database: the session's
            // connection to the same server serves this datanode too, instead of one more
            // connection (and MariaDB thread) per datanode.
            let server = self.target_server(routing, dn)?;
            chosen = Some(server);
            let statement = self.conns.statement;
            // A read on a replica that must first wait there for the session's write gets a
            // connection through `acquire_for`, which waits: a relabelled one would not.
            if !self.causal_wait_pending(server) {
                for h in self.conns.held.iter_mut() {
                    if h.server == server
                        && h.used_in != statement
                        && !h.pinned()
                        && !h.conn.closed_by_server()
                    {
                        h.dn = dn;
                        break;
                    }
                }
            }
        } else if let Some(i) = self.conns.position(dn) {
            // Each statement picks its server; a connection on another one is given back
            // (unless the session is tied to it, or this statement already used it).
            let h = &self.conns.held[i];
            if h.used_in != self.conns.statement && !h.pinned() {
                let server = self.target_server(routing, dn)?;
                chosen = Some(server);
                if server != self.conns.held[i].server {
                    let h = self.conns.release_slot(i);
                    if self.rt.backends.servers[h.server].health.is_up() {
                        h.conn.release();
                    }
                }
            }
        }
        // Kept from an earlier statement, with nothing of the session's on it.
        let kept = self.conns.position(dn).is_some_and(|i| {
            let h = &self.conns.held[i];
            h.used_in != self.conns.statement && !h.pinned()
        });
        let i = match self.conns.position(dn) {
            Some(i) => i,
            None => {
                if self.may_hold_and_wait() {
                    cold(self.admit(routing)).await?;
                }
                let (server, conn) = cold(self.acquire_for(routing, dn, chosen)).await?;
                let i = self.conns.push(Held::new(dn, server, conn));
                self.publish_backends();
                i
            }
        };
        if self.conns.writing
            && self.conns.held[i].server == self.rt.backends.primary(node.datahost)
        {
            self.conns.note_write(node.datahost, None);
        }
        let h = &mut self.conns.held[i];
        h.used_in = self.conns.statement;
        if let Some(at) = self.conns.deadline {
            // Before the replay below: a server that stops answering bounds it too.
            h.conn.arm(at);
        }
        // An execute finds (or prepares) its statement in the datanode's database itself.
        let schema = match how {
            Use::Text => Some(node.database.as_str()),
            Use::AnyDatabase => None,
        };
        let aligned = (schema.is_none() || h.conn.state.schema.as_deref() == schema)
            && h.conn.state.vars == self.want.vars
            && h.conn.state.last_insert_id == self.want.last_insert_id
            && h.conn.state.multi_statements == self.want.multi_statements;
        let mut result = Ok(());
        if !aligned {
            result = cold(align_to(&self.want, schema, &mut h.conn)).await;
        } else if !h.conn.state.vars.same(&self.want.vars) {
            // Equal but apart (both learnt the same change): share, so the next statements
            // compare a pointer.
            h.conn.state.vars = self.want.vars.clone();
        }
        if result.is_ok()
            && let Some((begin, xa)) = self.branch_start(routing, i, dn)
        {
            let h = &mut self.conns.held[i];
            result = match h.conn.sql_bytes(&begin) {
                Ok(bytes) => {
                    let bytes = bytes.into_owned();
                    cold(h.conn.command(COM_QUERY, &bytes)).await.map(|_| ())
                }
                Err(e) => Err(e),
            };
            if result.is_ok() {
                h.txn_begun = true;
                h.xa = xa;
                h.wrote = false;
            }
        }
        if result.is_ok() && self.conns.maybe_writes {
            result = self.check_plain_write(routing, dn);
            if result.is_ok() {
                self.conns.held[i].wrote = true;
            }
        }
        if result.is_ok() && !self.savepoints.is_empty() {
            result = cold(self.replay_savepoints(i)).await;
        }
        let node = &routing.topology.datanodes[dn];
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
                let h = self.conns.take(i);
                if kept && matches!(e, Error::BackendIo(_)) {
                    // It died unseen (its server killed as the statement came): it held
                    // nothing, so a fresh connection replaces it, once (a read goes elsewhere).
                    self.rt.backends.servers[h.server].health.note_error();
                    if h.server != self.rt.backends.primary(node.datahost) {
                        self.conns.avoid = Some(h.server);
                    }
                    return Box::pin(self.touch_for(routing, dn, how)).await;
                }
                Err(e)
            }
        }
    }

    /// A connection for datanode `dn` on the server the running statement should use. A
    /// replica that cannot be reached (or has not caught up with a causal read) is passed
    /// over for another server of the read set, then the primary.
    async fn acquire_for(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
        mut chosen: Option<usize>,
    ) -> Result<(usize, crate::backend::pool::PooledConn)> {
        let node = &routing.topology.datanodes[dn];
        // The primary could not be reached, for a read that then looked for a replica.
        let mut primary_lost: Option<Error> = None;
        for attempt in 0..3 {
            let server = match chosen.take() {
                Some(s) => s,
                None => self.target_server(routing, dn)?,
            };
            if server == self.rt.backends.primary(node.datahost)
                && let Some(e) = primary_lost.take()
            {
                // No replica can take the read: the primary's error, without connecting again.
                return Err(e);
            }
            let pool = self.rt.pools[server].clone();
            if pool.is_full() {
                // Connections kept from earlier statements go back first. A session keeps one
                // per datanode it touched while the pool has room; once it is full, keeping
                // them would make every acquire wait or switch a connection's database.
                self.release_stale();
            }
            let got = pool
                .acquire(Wanted {
                    wire: self.routed_wire(),
                    prefer: 0,
                    schema: Some(&node.database),
                    multi_statements: self.want.multi_statements,
                })
                .await;
            let primary = self.rt.backends.primary(node.datahost);
            match got {
                Ok(mut conn) => {
                    if server == primary || self.causal_ready(server, &mut conn).await {
                        return Ok((server, conn));
                    }
                    conn.release();
                    // Not caught up in time: the primary has the session's write.
                    self.conns.want = Want::Primary;
                }
                Err(e) if server != primary && attempt < 2 => {
                    debug!(server, error = %e, "replica unreachable: reading elsewhere");
                    self.rt.backends.servers[server].health.note_error();
                    self.conns.avoid = Some(server);
                }
                Err(e) if attempt < 2 && self.read_may_leave_primary(node.datahost, &e) => {
                    // `read_when_primary_down: replicas`: the primary is lost from now on (not
                    // once the monitor's checks agree), and the read goes to a replica that
                    // kept what the primary sent it.
                    debug!(server, error = %e, "primary unreachable: reading on a replica");
                    self.rt.backends.servers[server].health.note_unreachable();
                    primary_lost = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        let server = self.target_server(routing, dn)?;
        let conn = self.rt.pools[server]
            .acquire(Wanted {
                wire: self.routed_wire(),
                prefer: 0,
                schema: Some(&node.database),
                multi_statements: self.want.multi_statements,
            })
            .await?;
        Ok((server, conn))
    }

    /// Whether a failure `e` to connect to datahost `dh`'s primary sends the running statement
    /// to a replica: a plain read outside a transaction, on a datahost with
    /// `read_when_primary_down: replicas`, that could not connect (not a full pool).
    fn read_may_leave_primary(&self, dh: usize, e: &Error) -> bool {
        self.rt.backends.hosts[dh].read_when_primary_down == ReadWhenPrimaryDown::Replicas
            && matches!(self.conns.want, Want::Read { .. })
            && !self.in_transaction_now()
            && e.as_reply().is_some_and(|(code, _, _)| code == 1429)
    }

    /// Sends the client's command (or `sql` as a new COM_QUERY) to datanode `dn` and relays
    /// the response. `None` if the backend broke (the client already got a 2013 error).
    pub(crate) async fn run_on(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
        how: Use,
        sql: Option<&str>,
        expect: Expect,
        reply_seq: u8,
    ) -> Result<Option<Outcome>> {
        let i = self.touch_for(routing, dn, how).await?;
        let h = &mut self.conns.held[i];
        match sql {
            None => h.conn.io.write_raw(self.client.frame()),
            Some(s) => {
                let bytes = h.conn.sql_bytes(s)?;
                h.conn.io.write_command(COM_QUERY, &bytes);
            }
        }
        self.relay_from(i, expect, reply_seq, Some((&routing.names, dn)))
            .await
    }

    /// Flushes what was written to held connection `i` and relays its response.
    /// Result column definitions name `names`' logical schema and tables of the datanode given.
    pub(super) async fn relay_from(
        &mut self,
        i: usize,
        expect: Expect,
        reply_seq: u8,
        names: Option<(&crate::runtime::names::LogicalNames, DatanodeId)>,
    ) -> Result<Option<Outcome>> {
        let wire = self.client_wire();
        let h = &mut self.conns.held[i];
        let mut seq = reply_seq;
        // The round trip's time, only when metrics are counted (no clock read otherwise).
        let timed = self.rt.slots.is_some().then(std::time::Instant::now);
        let errors = self
            .rt
            .routing
            .as_ref()
            .map(|r| (&r.names, self.logical.as_deref()));
        let more = self.conns.more_results;
        let result = match h.conn.io.flush().await {
            Ok(()) => {
                relay(
                    &mut h.conn,
                    &mut self.client,
                    wire,
                    expect,
                    &mut seq,
                    names.map(|(n, dn)| (n, dn, &mut self.renamed)),
                    errors,
                    more,
                )
                .await
            }
            Err(e) => Err(Error::BackendIo(e)),
        };
        // No `last_used` stamp here: the pool stamps a connection when it is given back, the
        // only time its idle age is read (a clock read per statement was routed-only cost).
        if let (Some(t), Some(m)) = (timed, &self.rt.slots) {
            let h = &self.conns.held[i];
            m.backend(h.dn, h.server, t.elapsed());
        }
        match result {
            Ok(out) => {
                self.mark.rows += out.rows;
                if out.error_code.is_some() {
                    self.mark.error = out.error_code;
                }
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
                let dn = names.map(|(_, dn)| dn);
                cold(self.backend_failed(i, e, seq, reply_seq, dn)).await
            }
            Err(Error::ClientIo(e)) => {
                // The backend may be mid-response: it cannot be reused.
                self.conns.take(i);
                Err(Error::ClientIo(e))
            }
            Err(e) => Err(e),
        }
    }

    /// Held connection `i` (of datanode `dn`) failed while its response was relayed (`seq`:
    /// the next sequence id to the client; `reply_seq`: the first, so nothing reached the
    /// client while they are equal): the connection is dropped and the client told, or, for a
    /// read that may go elsewhere, the caller retries it.
    async fn backend_failed(
        &mut self,
        i: usize,
        e: std::io::Error,
        seq: u8,
        reply_seq: u8,
        dn: Option<DatanodeId>,
    ) -> Result<Option<Outcome>> {
        debug!(error = %e, "backend failed during a command");
        let h = self.conns.take(i);
        self.rt.backends.servers[h.server].health.note_error();
        let answer = if crate::error::is_timeout(&e) {
            // The statement's time is up: not retried elsewhere; said as it stands.
            let in_transaction = self.txn_begin.is_some() || h.pinned();
            let node = match dn {
                Some(dn) => self
                    .rt
                    .config
                    .routing
                    .as_deref()
                    .map(|r| format!("datanode {}", r.topology.datanodes[dn].name)),
                None => None,
            };
            let node = node.unwrap_or_else(|| "the datanode".to_string());
            let read = self.command_is_read();
            crate::backend::interrupt::stalled_error(&node, read, in_transaction)
        } else if self.conns.retry_read && seq == reply_seq {
            // Nothing reached the client: the caller reads elsewhere.
            self.conns.failed_read = Some(h.server);
            return Ok(None);
        } else {
            Error::lost_backend()
        };
        self.abandon_transaction().await;
        if let Some((code, state, msg)) = answer.as_reply() {
            let (msg, state) = (msg.to_string(), *state);
            self.send_error(seq, code, &state, &msg).await?;
        }
        Ok(None)
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
        if let Some(gtid) = &tracked.gtid {
            let dh = self.rt.backends.servers[h.server].datahost;
            let gtid = gtid.clone();
            self.conns.note_write(dh, Some(gtid));
        }
        let h = &mut self.conns.held[i];
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
                gtid: None,
            };
            self.want.apply(&vars_only);
        }
    }

    /// Gives held connections back to their pools: all of them (`all`, resetting pinned ones
    /// first) or, between statements, the unpinned ones whose pool has sessions waiting.
    pub(crate) async fn release_conns(&mut self, all: bool) {
        self.release_where(all, false).await;
    }

    /// Gives back, for a session idle a while (`session::nudge`), the unpinned connections
    /// whose pool has none to give (see `BackendPool::short`), and those `release_conns(false)`
    /// would.
    pub(crate) async fn release_idle(&mut self) {
        self.release_where(false, true).await;
    }

    async fn release_where(&mut self, all: bool, idle: bool) {
        let before = self.conns.held.len();
        let mut i = 0;
        while i < self.conns.held.len() {
            let h = &self.conns.held[i];
            let wanted = all
                || self.give_back(h)
                || (idle && !h.pinned() && self.rt.pools[h.server].short());
            if !wanted {
                i += 1;
                continue;
            }
            if !all {
                self.rt.pools[h.server].note_reclaimed();
            }
            let mut h = self.conns.release_slot(i);
            if h.xa {
                // An open XA branch: closing the connection rolls it back (a reset would not
                // end it cleanly).
                continue;
            }
            if h.pinned() {
                let reset =
                    crate::timers::timeout(self.rt.pool.settings().connect_timeout, h.conn.reset())
                        .await;
                if !matches!(reset, Ok(Ok(()))) {
                    // Dropping closes it; the server rolls back and frees everything.
                    continue;
                }
            }
            h.conn.release();
        }
        self.settle_admission();
        if self.conns.held.len() != before {
            self.publish_backends();
        }
    }

    /// Whether held connection `h` goes back between statements: nothing pins it, and other
    /// sessions wait for its pool or for admission (see [`admission`]).
    fn give_back(&self, h: &Held) -> bool {
        !h.pinned() && (self.rt.pools[h.server].reclaim_requested() || self.contended())
    }

    /// Whether sessions wait for admission.
    fn contended(&self) -> bool {
        self.rt.admission_contended()
    }

    /// Whether, between commands, a held connection is to go back because other sessions
    /// wait for it: then `release_conns(false)` gives those back. The check is synchronous
    /// and allocation-free; the release (which may reset a connection) runs only then.
    pub(crate) fn release_wanted(&self) -> bool {
        self.conns.held.iter().any(|h| self.give_back(h))
    }

    /// Gives back this session's connections that the running statement has not used and
    /// nothing pins, before the session waits for a pool: a session must not wait while it
    /// keeps connections from earlier statements, on any datahost (two sessions each keeping
    /// one pool's last connection while waiting for the other's would wait until the acquire
    /// timeout), nor wait on itself where a pool is smaller than what one session can need.
    pub(crate) fn release_stale(&mut self) {
        let statement = self.conns.statement;
        let before = self.conns.held.len();
        let mut i = 0;
        while i < self.conns.held.len() {
            let h = &self.conns.held[i];
            if h.used_in != statement && !h.pinned() {
                self.conns.release_slot(i).conn.release();
            } else {
                i += 1;
            }
        }
        if self.conns.held.len() != before {
            self.publish_backends();
        }
    }

    /// Whether taking another connection now could make this session wait while it holds
    /// one it cannot give back (a transaction's, a pinned one, or one the running statement
    /// uses): only such sessions need admission (see [`admission`]). A lone autocommit
    /// statement on one datanode never does, and stays off the admission path.
    fn may_hold_and_wait(&self) -> bool {
        self.txn_begin.is_some()
            || self.status & AUTOCOMMIT == 0
            || self
                .conns
                .held
                .iter()
                .any(|h| h.pinned() || h.used_in == self.conns.statement)
    }

    /// Admits the session (see [`admission`]). Statements with several targets call it before
    /// touching the first, so that they wait, if they must, holding nothing of their own;
    /// connections kept from earlier statements are given back before waiting.
    pub(crate) async fn admit(&mut self, routing: &Routing) -> Result<()> {
        if self.conns.admitted.is_some() {
            return Ok(());
        }
        if !routing.admission.would_admit() {
            self.release_stale();
        }
        self.conns.admitted = Some(routing.admission.enter().await?);
        Ok(())
    }

    /// Gives the admission back once the session holds no connection.
    pub(crate) fn settle_admission(&mut self) {
        if self.conns.held.is_empty() {
            self.conns.admitted = None;
        }
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

/// A target's SQL as a COM_QUERY payload for `conn` (in its `character_set_client`).
pub(crate) fn query_payload(
    conn: &crate::backend::conn::BackendConn,
    t: &Target,
) -> Result<Vec<u8>> {
    let sql = conn.sql_bytes(&t.sql)?;
    let mut payload = Vec::with_capacity(1 + sql.len());
    payload.push(COM_QUERY);
    payload.extend_from_slice(&sql);
    Ok(payload)
}
