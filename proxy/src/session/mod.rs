//! One client session: login, then the command loop, which decodes each command once
//! ([`Command`]) and hands it on: with the router to the executor, which runs it over the
//! client's state ([`Cursor`], owned here as `Session::cur`); without it to the relay below.
//!
//! The relay (quick mode, or a configuration that lists no tables) keeps one backend
//! connection per session while it can, gives it back to the pool when the pool is short and
//! nothing pins it, and replays the client's state onto whatever connection it gets next.

pub(crate) mod login;
pub mod nudge;
mod publish;

use std::sync::Arc;
use std::time::Instant;

use mysql_common::collations::{Collation, CollationId};
use mysql_common::constants::StatusFlags;
use shoal_router::sql::lex::TokKind;
use tokio::net::TcpStream;

use tracing::{debug, trace, warn};

use crate::backend::pool::{PooledConn, Wanted, align_to};
use crate::backend::state::Vars;
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::exec::diagnostics::{DiagQuery, diagnostics_query, starts_with_comment};
use crate::exec::relay::{Expect, Outcome, relay};
use crate::out_of_line::cold;
use crate::process::Shared;
use crate::process::sessions::SessionHandle;
use crate::wire::command::*;
use crate::wire::packet::{PacketStream, is_too_large};
use crate::wire::tls::ClientStream;
use shoal_router::sql::pins;

/// How much of an oversized packet is read and dropped after the 1153, at most.
const OVERSIZE_DRAIN_BYTES: usize = 64 << 20;
const OVERSIZE_DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Collation the proxy's backend connections are opened with (utf8mb4_general_ci).
pub const BACKEND_COLLATION: u8 = 45;

/// Why the backend connection must stay with this session.
#[derive(Debug, Default)]
pub(crate) struct Pins {
    /// A transaction is open, or autocommit is off.
    pub(crate) transaction: bool,
    /// State the pool cannot replay: user variables, temporary tables, locks, SQL PREPARE...
    /// Kept until the session ends or resets.
    pub(crate) sticky: bool,
    /// Server-side prepared statements open on the connection.
    pub(crate) statements: Vec<u32>,
}

impl Pins {
    pub(crate) fn any(&self) -> bool {
        self.transaction || self.sticky || !self.statements.is_empty()
    }
}

pub struct Session {
    /// What the executor works on: the client's sink, its state, its connections and
    /// transaction (see `exec::cursor`).
    pub(crate) cur: Cursor,
    pub(crate) scramble: [u8; 20],
    /// Variables implied by the client's handshake collation (what a reset goes back to).
    pub(crate) initial_vars: Vars,
    /// Without the router: the passthrough connection (see `relay`).
    pub(crate) backend: Option<PooledConn>,
    pub(crate) last_backend: u64,
    /// When the running command arrived (or the last one did): the one clock read a command
    /// takes on the relay path, reused for connection ages and the processlist.
    pub(crate) command_at: Instant,
    pub(crate) pins: Pins,
    /// The schema last published in the handle (compared after each command).
    shown_schema: Option<String>,
    /// Counts this session against its user's `max_connections`.
    pub(crate) user_slot: Option<crate::process::limits::UserSlot>,
    /// The session's own handle on the router (`None` in quick mode), taken out for each
    /// command: cloning the shared one per command would write to a counter every session's
    /// commands share.
    routing: Option<Arc<crate::runtime::routing::Routing>>,
}

/// Serves one client connection until it quits, breaks, idles out or the proxy shuts down.
pub async fn serve(stream: TcpStream, connection_id: u32, shared: Arc<Shared>) {
    let peer = stream.peer_addr().ok();
    let peer_host = peer
        .map(|a| a.ip().to_string())
        .unwrap_or_else(|| "unknown".into());
    let client_addr = peer.map_or_else(|| "unknown".into(), |a| a.to_string());
    let _ = stream.set_nodelay(true);
    let rt = shared.runtime.load_full();
    let client = PacketStream::new(ClientStream::Plain(stream), rt.config.max_packet);
    let routing = rt.routing.clone();
    let handle = Arc::new(SessionHandle::new(client_addr));
    let cur = Cursor::new(shared, rt, client, peer_host, connection_id, handle);
    let mut session = Session {
        cur,
        scramble: [0; 20],
        initial_vars: Vars::default(),
        backend: None,
        last_backend: 0,
        command_at: Instant::now(),
        pins: Pins::default(),
        shown_schema: None,
        user_slot: None,
        routing,
    };
    match session.login(connection_id).await {
        Ok(()) => {
            let _open = crate::process::scrape::OpenSession::new(&session.cur.shared);
            debug!(connection_id, user = %session.cur.user, "client logged in");
            *session
                .cur
                .handle
                .user
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = session.cur.user.clone();
            session.publish_end(Instant::now());
            session
                .cur
                .shared
                .sessions
                .register(connection_id, session.cur.handle.clone());
            if let Err(e) = session.command_loop().await {
                debug!(connection_id, error = %e, "session ended with error");
            }
        }
        Err(e) => {
            debug!(connection_id, error = %e, "login failed");
            if let Some(m) = &session.cur.shared.observe.metrics {
                m.refused(crate::observe::metrics::Refusal::of_login_error(&e));
            }
        }
    }
    session.cur.shared.sessions.unregister(connection_id);
    session.finish().await;
}

/// The charset variables a client's handshake collation implies on a backend connection opened
/// with [`BACKEND_COLLATION`].
fn charset_vars(collation: u8) -> Vars {
    if collation == BACKEND_COLLATION {
        return Vars::default();
    }
    let c = Collation::resolve(CollationId::from(collation as u16));
    if c.id() == CollationId::UNKNOWN_COLLATION_ID {
        return Vars::default();
    }
    let charset = c.charset().to_string();
    let mut vars = vec![
        ("character_set_client".to_string(), charset.clone()),
        ("character_set_connection".to_string(), charset.clone()),
        ("character_set_results".to_string(), charset),
    ];
    // MySQL 8's utf8mb4_0900_* collations do not exist on MariaDB: keep the charset's default.
    if !c.collation().contains("_0900_") {
        vars.push((
            "collation_connection".to_string(),
            c.collation().to_string(),
        ));
    }
    vars.into_iter().collect()
}

/// The schema of a query that is exactly `USE db` (optionally back-quoted, optionally ending
/// with `;`), handled like COM_INIT_DB so schema names are checked and mapped the same way.
pub(crate) fn use_statement(sql: &[u8]) -> Option<String> {
    if starts_with_comment(sql) {
        // A comment before it changes nothing: read on the tokens.
        let text = std::str::from_utf8(sql).ok()?;
        let toks = shoal_router::sql::lex::tokenize(text).ok()?;
        return match &toks[..] {
            [u, db] | [u, db, _] if u.is_kw(text, "USE") => {
                let end_ok = toks.len() == 2 || toks[2].is_punct(text, ";");
                let name = matches!(db.kind, TokKind::Word | TokKind::QuotedIdent)
                    .then(|| db.ident_value(text));
                name.filter(|n| end_ok && !n.is_empty())
            }
            _ => None,
        };
    }
    // Cheap reject first: this runs for every query.
    let head = sql.trim_ascii_start();
    if head.len() < 5 || !head[..4].eq_ignore_ascii_case(b"USE ") {
        return None;
    }
    let s = std::str::from_utf8(sql).ok()?.trim();
    let s = s.strip_suffix(';').unwrap_or(s).trim_end();
    if s.len() < 5 || !s[..4].eq_ignore_ascii_case("USE ") {
        return None;
    }
    let name = s[4..].trim();
    if let Some(inner) = name.strip_prefix('`').and_then(|n| n.strip_suffix('`')) {
        if inner.is_empty() || inner.contains('`') {
            return None;
        }
        return Some(inner.to_string());
    }
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80);
    plain.then(|| name.to_string())
}

/// The statement's first word (ASCII letters), or `None` when it starts with anything else
/// (a comment, a parenthesis): what the relay path's checks for statements Shoal answers
/// itself look at before reading further.
pub(crate) fn lead_word(sql: &[u8]) -> Option<&[u8]> {
    let s = sql.trim_ascii_start();
    let end = s
        .iter()
        .position(|b| !b.is_ascii_alphabetic())
        .unwrap_or(s.len());
    // `-- ` and `#` comments and `/*` start with no letter; a word glued to something other
    // than a space (`KILL/**/5`) is read in full too.
    match s.get(end) {
        None => (end > 0).then_some(s),
        Some(b) if end > 0 && (b.is_ascii_whitespace() || *b == b';') => Some(&s[..end]),
        _ => None,
    }
}

/// A statement of the relay path that Shoal answers itself.
enum RelayLocal {
    Use(String),
    Diagnostics(DiagQuery),
    Kill(bool, u64),
    Admin(std::result::Result<shoal_router::sql::admin::AdminStatement, shoal_router::RouterError>),
}

impl Session {
    fn wanted(&self) -> Wanted<'_> {
        Wanted {
            // The relay's backend connection speaks the client's framing, metadata caching
            // included: the client's prepared statements are the connection's own (pinned to
            // it), so what the server remembers having sent is what the client holds.
            wire: self.cur.client_wire(),
            prefer: self.last_backend,
            schema: self.cur.want.schema.as_deref(),
            multi_statements: self.cur.want.multi_statements,
        }
    }

    /// Makes sure a backend connection in the state the client expects is at hand, and
    /// returns it.
    async fn ensure_backend(&mut self) -> Result<&mut PooledConn> {
        self.ready_backend().await?;
        Ok(self
            .backend
            .as_mut()
            .expect("ready_backend leaves a connection"))
    }

    /// Makes sure `self.backend` holds a connection, acquired first if there was none and
    /// brought to the state the client expects, and published for KILL. The connection stays
    /// in place when it is ready (the usual case: no move of it per statement).
    async fn ready_backend(&mut self) -> Result<()> {
        if let Some(b) = self.backend.as_mut() {
            let validate = self.cur.rt.pool.settings().validate_after;
            let pinned = self.pins.any();
            if b.closed_by_server() {
                self.lose_backend();
                if pinned {
                    // An open transaction, locks or statements went with it: say so, as a
                    // direct connection would, instead of carrying on without them.
                    return Err(Error::lost_backend());
                }
            } else if !pinned
                && self.command_at.saturating_duration_since(b.last_used) >= validate
                && !cold(b.ping()).await
            {
                debug!(
                    backend_id = b.id,
                    "held backend connection failed ping; replacing it"
                );
                self.lose_backend();
            }
        }
        if self
            .backend
            .as_ref()
            .is_some_and(|conn| conn.state == self.cur.want)
        {
            return Ok(());
        }
        let conn = match self.backend.take() {
            Some(conn) => cold(self.align_backend(conn)).await?,
            None => {
                let conn = cold(self.cur.rt.pool.acquire(self.wanted())).await?;
                self.last_backend = conn.id;
                if conn.state == self.cur.want {
                    conn
                } else {
                    cold(self.align_backend(conn)).await?
                }
            }
        };
        self.cur.publish_with(Some(&conn));
        self.backend = Some(conn);
        Ok(())
    }

    /// Replays the difference between `conn`'s state and the client's. A refused replay keeps
    /// the connection as the session's (it is fine); a broken one drops it.
    async fn align_backend(&mut self, mut conn: PooledConn) -> Result<PooledConn> {
        if self.cur.want.schema.is_none() && conn.state.schema.is_some() {
            // There is no way to leave a schema: start over on a fresh connection.
            let want = self.wanted();
            conn = self.cur.rt.pool.reopen(conn, want).await?;
            self.last_backend = conn.id;
        }
        let result = align_to(&self.cur.want, self.cur.want.schema.as_deref(), &mut conn).await;
        match result {
            Ok(()) => Ok(conn),
            Err(Error::Reply {
                code,
                state,
                message,
            }) => {
                // The backend refused part of the replay (e.g. the schema was dropped): the
                // connection itself is fine.
                self.backend = Some(conn);
                Err(Error::Reply {
                    code,
                    state,
                    message,
                })
            }
            Err(e) => {
                // The connection broke while being prepared: whatever was pinned to it is gone.
                self.pins = Pins::default();
                Err(e)
            }
        }
    }

    /// Nudged while waiting for its client: once it has waited [`nudge::GIVE_BACK_IDLE`], the
    /// unpinned connections of pools that have none to give go back (see `nudge`).
    async fn give_back_idle(&mut self) {
        let Some(since) = self.cur.handle.doing.idle_since_ms() else {
            return;
        };
        if !nudge::idle_long(since, self.cur.shared.ms(Instant::now())) {
            return;
        }
        if self.backend.is_some() && !self.pins.any() && self.cur.rt.pool.short() {
            self.cur.rt.pool.note_reclaimed();
            self.release_backend().await;
        }
        if !self.cur.conns.is_empty() {
            self.cur.release_idle().await;
        }
    }

    /// Gives the connection back to the pool, resetting it first if it carries state that
    /// must not reach another session.
    async fn release_backend(&mut self) {
        let Some(mut conn) = self.backend.take() else {
            return;
        };
        self.cur.publish_with(self.backend.as_ref());
        self.cur.diag.on_backend = false;
        if self.pins.any() {
            let reset =
                crate::timers::timeout(self.cur.rt.pool.settings().connect_timeout, conn.reset())
                    .await;
            if !matches!(reset, Ok(Ok(()))) {
                // Dropping closes it; the server rolls back and frees everything.
                return;
            }
            self.pins = Pins::default();
        }
        conn.release();
    }

    async fn finish(&mut self) {
        // The client is gone: its user's session slot is free now, not after the backend
        // cleanup below, so a client that quits and logs straight back in is not refused 1203.
        self.user_slot = None;
        self.release_backend().await;
        self.cur.release_conns(true).await;
        self.cur.client.shutdown().await;
    }

    /// The backend connection broke: drop it, and with it whatever was pinned to it.
    fn lose_backend(&mut self) {
        self.cur.diag.on_backend = false;
        if let Some(b) = self.backend.take() {
            warn!(
                backend_id = b.id,
                thread_id = b.thread_id,
                "backend connection lost"
            );
        }
        self.pins = Pins::default();
    }

    async fn command_loop(&mut self) -> Result<()> {
        let idle_timeout = self.cur.rt.config.client_idle_timeout;
        let pool = self.cur.rt.pool.clone();
        let handle = self.cur.handle.clone();
        handle.idle_timeout_ms.store(
            u64::try_from(idle_timeout.as_millis()).unwrap_or(u64::MAX),
            std::sync::atomic::Ordering::Relaxed,
        );
        let mut last_active = Instant::now();
        loop {
            if self
                .cur
                .shared
                .stopping
                .load(std::sync::atomic::Ordering::Relaxed)
                || handle.killed.load(std::sync::atomic::Ordering::Relaxed)
            {
                return Ok(());
            }
            // Between commands: give the connection back if sessions are waiting for one.
            if self.backend.is_some() && !self.pins.any() && pool.reclaim_requested() {
                pool.note_reclaimed();
                cold(self.release_backend()).await;
            }
            if !self.cur.conns.is_empty() && self.cur.release_wanted() {
                cold(self.cur.release_conns(false)).await;
            }
            // Shutdown, KILL, the idle timeout and a pool's reclaim nudge the session from
            // outside (see `nudge`): the only other branch, and a cheap one to poll.
            let read = tokio::select! {
                biased;
                r = self.cur.client.next_packet() => Some(r),
                () = handle.nudge.wait() => None,
            };
            let Some(read) = read else {
                handle.nudge.clear();
                if last_active.elapsed() >= idle_timeout {
                    debug!("client idle timeout");
                    return Ok(());
                }
                cold(self.give_back_idle()).await;
                // The loop's top checks the other reasons.
                continue;
            };
            last_active = Instant::now();
            self.command_at = last_active;
            let info = match read {
                Ok(info) => info,
                Err(e) if is_too_large(&e) => return cold(self.refuse_oversize()).await,
                Err(e) => return Err(Error::ClientIo(e)),
            };
            // Killed while it waited for this command: it does not run (a cheap load).
            if handle.killed.load(std::sync::atomic::Ordering::Relaxed) {
                return Ok(());
            }
            let reply_seq = info.last_seq.wrapping_add(1);
            let cmd = self.cur.client.frame().get(4).copied();
            let Some(cmd) = cmd else {
                cold(
                    self.cur
                        .send_error(reply_seq, 1047, b"08S01", "Empty command packet"),
                )
                .await?;
                continue;
            };
            if cmd == COM_QUIT {
                return Ok(());
            }
            if self.reload_pending() {
                cold(self.follow_reload()).await;
            }
            let started = last_active;
            self.cur.mark = crate::observe::Mark::default();
            self.publish_begin(cmd, last_active);
            let result = self.dispatch(reply_seq).await;
            last_active = Instant::now();
            if let Some(b) = self.backend.as_mut() {
                // Read once here for every path that used it (pool ages, validation).
                b.last_used = last_active;
            }
            self.cur.publish_with(self.backend.as_ref());
            self.publish_end(last_active);
            let fatal = match result {
                Ok(()) => None,
                Err(e) => cold(self.answer_error(reply_seq, e)).await?,
            };
            if self.cur.shared.observe.any() {
                let bytes_in = info.payload_len as u64 + 4 * info.frames as u64;
                self.observe(cmd, last_active - started, bytes_in);
            }
            if let Some(e) = fatal {
                return Err(e);
            }
        }
    }

    /// The 1153 for a packet over `max_allowed_packet`, which ends the session.
    async fn refuse_oversize(&mut self) -> Result<()> {
        let err = Error::packet_too_large();
        if let Some((code, state, msg)) = err.as_reply() {
            let msg = msg.to_string();
            let _ = self.cur.send_error(0, code, state, &msg).await;
        }
        // The client may still be sending the packet: let it finish (bounded), so that it
        // reads the 1153 instead of a reset, as it would from MySQL.
        self.cur
            .client
            .discard_incoming(OVERSIZE_DRAIN_BYTES, OVERSIZE_DRAIN_WAIT)
            .await;
        Err(err)
    }

    /// Answers a command's error `e` at `reply_seq` (one with a reply to send); `Some(e)` when
    /// it ends the session.
    async fn answer_error(&mut self, reply_seq: u8, e: Error) -> Result<Option<Error>> {
        if let Some((code, state, msg)) = e.as_reply() {
            let msg = msg.to_string();
            let state = *state;
            self.cur.send_error(reply_seq, code, &state, &msg).await?;
        }
        Ok(e.ends_session().then_some(e))
    }

    /// Whether a newer configuration snapshot than the session's is published (one
    /// `ArcSwap::load` per command): then [`Self::follow_reload`] runs.
    fn reload_pending(&self) -> bool {
        !Arc::ptr_eq(&self.cur.shared.runtime.load(), &self.cur.rt)
    }

    /// Moves the session to the newest configuration snapshot, before a command.
    ///
    /// The rule: a session keeps the snapshot it works on while it holds anything that
    /// depends on it: an open transaction (explicit, or a statement run with autocommit
    /// off), an XA branch, savepoints, LOCK TABLES, temporary tables or other state a pool
    /// cannot replay, or (relay path) server-side prepared statements. All of these live on
    /// connections of that snapshot's pools, which held connections name by the snapshot's
    /// server order; so a running transaction finishes on the configuration it started with.
    /// Once nothing pins it, the session gives its unpinned connections back to their pools
    /// (a server the reload kept has the same pool, so the connection is simply reused),
    /// takes the current snapshot, and has the new router plan its client prepared
    /// statements again; from then on its user's new rights (schemas, read_only) apply. Run
    /// when [`Self::reload_pending`] (checked before every command) says so.
    async fn follow_reload(&mut self) {
        {
            let current = self.cur.shared.runtime.load();
            // A session whose user the reload removed keeps running with the rights it logged
            // in with (as MariaDB keeps a dropped user's open sessions): the new snapshot has
            // no account to read them from, and reading none would mean no limits at all.
            if current.config.user(&self.cur.user).is_none() {
                return;
            }
        }
        let holds = self.pins.any()
            || self.cur.txn_begin.is_some()
            || self.cur.xa_gtrid.is_some()
            || !self.cur.table_locks.is_empty()
            || !self.cur.savepoints.is_empty()
            || self.cur.conns.held.iter().any(|h| h.pinned() || h.xa);
        if holds {
            return;
        }
        self.release_backend().await;
        self.cur.release_conns(true).await;
        self.cur.rt = self.cur.shared.runtime.load_full();
        self.routing = self.cur.rt.routing.clone();
        // Server indexes are per snapshot: what read-your-writes learned of replicas is
        // learned again.
        for w in &mut self.cur.conns.writes {
            w.applied_on.clear();
        }
        if let Some(r) = self.routing.clone() {
            let (mode, cs) = (self.cur.sql_mode(), self.cur.charsets().statements);
            self.cur
                .statements
                .replan(&r.router, self.cur.logical.as_deref(), mode, cs);
        }
    }

    /// Runs one command. Errors returned here are answered at `reply_seq`; errors after part
    /// of a response was forwarded are answered inside.
    ///
    /// The one dispatch of client commands: the packet is decoded once ([`Command`]); what
    /// concerns the login and the whole session is done here in both modes, the rest is
    /// handed to the executor (with the router) or to the relay (without).
    async fn dispatch(&mut self, reply_seq: u8) -> Result<()> {
        let command = Command::decode(&self.cur.client.packet_payload())?;
        match command {
            Command::ResetConnection => {
                cold(self.reset_session()).await?;
                self.cur.send_ok(reply_seq).await
            }
            Command::ChangeUser => cold(self.change_user(reply_seq)).await,
            command => match self.routing.take() {
                Some(routing) => {
                    // Put back after the command; a command stopped half-way ends the session
                    // anyway.
                    let result = self.cur.dispatch_routed(&routing, command, reply_seq).await;
                    self.routing = Some(routing);
                    result.map_err(|e| self.cur.with_account(e))
                }
                None => self.relay_command(command, reply_seq).await,
            },
        }
    }

    /// Runs one command without the router: relayed to the session's backend connection,
    /// but for the statements Shoal answers itself.
    async fn relay_command(&mut self, command: Command, reply_seq: u8) -> Result<()> {
        match command {
            Command::Ping => self.cur.send_ok(reply_seq).await,
            Command::Query => {
                // What Shoal answers itself is read only where the first word allows it; a
                // statement that starts otherwise (a comment, a parenthesis) is read in full.
                let local = {
                    let p = self.cur.client.packet_payload();
                    let sql = &p[1..];
                    let lead = lead_word(sql);
                    let may = |w: &[u8]| lead.is_none_or(|l| l.eq_ignore_ascii_case(w));
                    if may(b"USE")
                        && let Some(db) = use_statement(sql)
                    {
                        Some(RelayLocal::Use(db))
                    } else if may(b"SELECT")
                        && let Some(which) = diagnostics_query(sql)
                    {
                        Some(RelayLocal::Diagnostics(which))
                    } else if may(b"KILL")
                        && let Some((query_only, target)) = crate::exec::kill::parse_kill(sql)
                    {
                        Some(RelayLocal::Kill(query_only, target))
                    } else if (may(b"SHOW") || may(b"RESET") || may(b"RELOAD"))
                        && let Some(parsed) = shoal_router::sql::admin::parse_admin(sql)
                    {
                        Some(RelayLocal::Admin(parsed))
                    } else {
                        None
                    }
                };
                match local {
                    Some(RelayLocal::Use(db)) => {
                        return cold(self.use_schema(&db, reply_seq)).await;
                    }
                    Some(RelayLocal::Diagnostics(which))
                        if which == DiagQuery::ConnectionId
                            || (self.cur.diag.known && !self.cur.diag.on_backend) =>
                    {
                        return cold(self.cur.answer_diagnostics(which, reply_seq)).await;
                    }
                    Some(RelayLocal::Kill(query_only, target)) => {
                        return cold(self.cur.kill(query_only, target, reply_seq)).await;
                    }
                    Some(RelayLocal::Admin(parsed)) => {
                        return match parsed {
                            Ok(stmt) => cold(self.cur.admin(stmt, reply_seq)).await,
                            Err(e) => Err(crate::exec::refusal(&e)),
                        };
                    }
                    _ => {}
                }
                let pins::Effects {
                    leaves_state: sticky,
                    sets_last_insert_id: sets_lid,
                } = pins::effects(&self.cur.client.packet_payload()[1..]);
                if sticky {
                    self.pins.sticky = true;
                }
                let out = self
                    .forward(Expect::Results { binary: false }, reply_seq)
                    .await?;
                if let Some(out) = out
                    && out
                        .tracked
                        .vars
                        .iter()
                        .any(|(n, _)| n == "character_set_connection")
                {
                    cold(self.refresh_collation()).await;
                }
                if sets_lid {
                    cold(self.refresh_last_insert_id()).await;
                }
                Ok(())
            }
            Command::InitDb(db) => cold(self.use_schema(&db, reply_seq)).await,
            Command::FieldList => {
                cold(self.forward(Expect::FieldList, reply_seq)).await?;
                Ok(())
            }
            Command::Statistics => {
                cold(self.forward(Expect::Single, reply_seq)).await?;
                Ok(())
            }
            Command::SetOption(on) => {
                let out = cold(self.forward(Expect::Single, reply_seq)).await?;
                if let Some(out) = out
                    && !out.error
                {
                    self.cur.want.multi_statements = on;
                    if let Some(b) = self.backend.as_mut() {
                        b.state.multi_statements = on;
                    }
                }
                Ok(())
            }
            Command::StmtPrepare => {
                if let Some(refused) = self.cur.prepare_admin() {
                    return Err(refused);
                }
                let out = cold(self.forward(Expect::Prepare, reply_seq)).await?;
                if let Some(Outcome {
                    prepared: Some(id), ..
                }) = out
                {
                    self.pins.statements.push(id);
                }
                Ok(())
            }
            Command::StmtExecute { id, .. } | Command::StmtFetch(id) | Command::StmtReset(id) => {
                if !self.pins.statements.contains(&id) || self.backend.is_none() {
                    let cmd = self.cur.client.frame().get(4).copied().unwrap_or(0);
                    return Err(Error::unknown_statement(id, name(cmd)));
                }
                let expect = match command {
                    Command::StmtExecute { cursor: true, .. } => Expect::CursorResults,
                    Command::StmtExecute { .. } => Expect::Results { binary: true },
                    Command::StmtFetch(_) => Expect::Rows,
                    _ => Expect::Single,
                };
                self.forward(expect, reply_seq).await?;
                Ok(())
            }
            Command::StmtSendLongData(id) | Command::StmtClose(id) => {
                // No response: errors are kept by the server for the next EXECUTE.
                if !self.pins.statements.contains(&id) {
                    return Ok(());
                }
                let Some(backend) = self.backend.as_mut() else {
                    return Ok(());
                };
                if matches!(command, Command::StmtClose(_)) {
                    self.pins.statements.retain(|s| *s != id);
                }
                backend.io.write_raw(self.cur.client.frame());
                if let Err(e) = backend.io.flush().await {
                    debug!(error = %e, "backend write failed");
                    self.lose_backend();
                }
                Ok(())
            }
            // `dispatch` runs these itself, in both modes.
            Command::ResetConnection | Command::ChangeUser => Err(Error::malformed("command")),
        }
    }

    /// COM_INIT_DB, or a plain `USE db` query: switches the session's schema (mapped to its
    /// physical database) after the backend accepted it.
    async fn use_schema(&mut self, db: &str, reply_seq: u8) -> Result<()> {
        self.cur.check_schema_allowed(db)?;
        let physical = self
            .cur
            .rt
            .config
            .physical_schema(db)
            .ok_or_else(|| Error::unknown_database(db))?
            .to_string();
        let backend = self.ensure_backend().await?;
        match backend.init_db(&physical).await {
            Ok(()) => {
                self.cur.want.schema = Some(physical);
                self.cur.send_ok(reply_seq).await
            }
            Err(Error::BackendIo(e)) => {
                debug!(error = %e, "backend failed while switching schema");
                self.lose_backend();
                Err(Error::lost_backend())
            }
            Err(e) => Err(e),
        }
    }

    /// Sends the client's command as is to the backend and streams the response back.
    /// Returns `None` if the backend broke (the client already got a 2013 error).
    async fn forward(&mut self, expect: Expect, reply_seq: u8) -> Result<Option<Outcome>> {
        self.ready_backend().await?;
        let wire = self.cur.client_wire();
        let backend = self
            .backend
            .as_mut()
            .expect("ready_backend leaves a connection");
        let limited = self.cur.rt.config.query_timeout;
        if let Some(t) = limited {
            backend.arm(tokio::time::Instant::now() + t);
        }
        backend.io.write_raw(self.cur.client.frame());
        let mut seq = reply_seq;
        let names = self.cur.rt.relay_names.as_deref().map(|n| (n, None));
        // The round trip's time, only when metrics are counted (no clock read otherwise).
        let timed = self.cur.rt.slots.is_some().then(Instant::now);
        let result = match backend.io.flush().await {
            Ok(()) => {
                relay(
                    backend,
                    &mut self.cur.client,
                    wire,
                    expect,
                    &mut seq,
                    None,
                    names,
                    false,
                )
                .await
            }
            Err(e) => Err(Error::BackendIo(e)),
        };
        if let (Some(t), Some(m)) = (timed, &self.cur.rt.slots) {
            m.backend(0, 0, t.elapsed());
        }
        if limited.is_some() {
            backend.disarm();
        }
        if matches!(result, Err(Error::ClientIo(_))) {
            // The client went away mid-response: the connection may be mid-response itself
            // and cannot be reused.
            self.backend = None;
        }
        match result {
            Ok(out) => {
                self.cur.mark.rows += out.rows;
                if out.error_code.is_some() {
                    self.cur.mark.error = out.error_code;
                }
                if let Expect::Results { .. } | Expect::CursorResults = expect {
                    self.cur.diag.known = true;
                    self.cur.diag.on_backend = true;
                    if out.error {
                        self.cur.diag.row_count = -1;
                    } else {
                        self.cur.diag.row_count = out.affected.map_or(-1, |a| a as i64);
                    }
                    if out.had_rows {
                        self.cur.diag.found_rows = out.rows;
                    }
                }
                self.after_response(&out);
                Ok(Some(out))
            }
            Err(Error::BackendIo(e)) => {
                debug!(error = %e, "backend failed during a command");
                let in_transaction = self.pins.transaction;
                self.lose_backend();
                let lost = if crate::error::is_timeout(&e) {
                    let read = self.cur.command_is_read();
                    crate::backend::interrupt::stalled_error("the server", read, in_transaction)
                } else {
                    Error::lost_backend()
                };
                if let Some((code, state, msg)) = lost.as_reply() {
                    let (msg, state) = (msg.to_string(), *state);
                    cold(self.cur.send_error(seq, code, &state, &msg)).await?;
                }
                Ok(None)
            }
            Err(Error::ClientIo(e)) => Err(Error::ClientIo(e)),
            Err(e) => Err(e),
        }
    }

    /// `SET NAMES x COLLATE y` reports the charset variables but not `collation_connection`:
    /// read it, so a replay on another connection restores the collation too.
    async fn refresh_collation(&mut self) {
        let Some(b) = self.backend.as_mut() else {
            return;
        };
        match b.query_value("SELECT @@collation_connection").await {
            Ok(Some(c)) => {
                b.state.set_var("collation_connection", &c);
                self.cur.want.set_var("collation_connection", &c);
            }
            Ok(None) => {}
            Err(Error::Reply { .. }) => {}
            Err(e) => {
                debug!(error = %e, "backend failed while reading the collation");
                self.lose_backend();
            }
        }
    }

    /// After `LAST_INSERT_ID(expr)`: read the value back so it follows the session.
    async fn refresh_last_insert_id(&mut self) {
        let Some(b) = self.backend.as_mut() else {
            return;
        };
        match b.query_value("SELECT LAST_INSERT_ID()").await {
            Ok(Some(v)) => {
                if let Ok(id) = v.parse::<u64>() {
                    b.state.last_insert_id = id;
                    self.cur.want.last_insert_id = id;
                }
            }
            Ok(None) | Err(Error::Reply { .. }) => {}
            Err(e) => {
                debug!(error = %e, "backend failed while reading LAST_INSERT_ID()");
                self.lose_backend();
            }
        }
    }

    /// Learns from a response what changed in the session.
    fn after_response(&mut self, out: &Outcome) {
        trace!(status = ?out.status, error = out.error, tracked = ?out.tracked, "response");
        if let Some(status) = out.status {
            self.cur.status = status
                & !StatusFlags::SERVER_SESSION_STATE_CHANGED.bits()
                & !StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();
            let in_trans = status & StatusFlags::SERVER_STATUS_IN_TRANS.bits() != 0;
            let autocommit = status & StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits() != 0;
            self.pins.transaction = in_trans || !autocommit;
        }
        if let Some(id) = out.last_insert_id {
            self.cur.want.last_insert_id = id;
            if let Some(b) = self.backend.as_mut() {
                b.state.last_insert_id = id;
            }
        }
        if !out.tracked.is_empty() {
            if out.tracked.unexplained_change() {
                self.pins.sticky = true;
            }
            self.cur.want.apply(&out.tracked);
            if let Some(b) = self.backend.as_mut() {
                b.state.apply(&out.tracked);
            }
        }
    }

    /// COM_RESET_CONNECTION: back to the state right after login (schema kept).
    pub(crate) async fn reset_session(&mut self) -> Result<()> {
        if self.pins.any()
            && let Some(b) = self.backend.as_mut()
            && let Err(e) = b.reset().await
        {
            debug!(error = %e, "backend reset failed");
            self.lose_backend();
        }
        self.pins = Pins::default();
        self.cur.reset(&self.initial_vars).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::use_statement;

    #[test]
    fn lead_word_is_a_plain_first_word_or_nothing() {
        use super::lead_word;
        assert_eq!(lead_word(b"  select c from t"), Some(&b"select"[..]));
        assert_eq!(lead_word(b"KILL 5"), Some(&b"KILL"[..]));
        assert_eq!(lead_word(b"SHOW\nSHOAL VERSION"), Some(&b"SHOW"[..]));
        assert_eq!(lead_word(b"COMMIT"), Some(&b"COMMIT"[..]));
        assert_eq!(lead_word(b"COMMIT;"), Some(&b"COMMIT"[..]));
        // Anything the checks could misread: read in full.
        for sql in [
            &b"/* x */ KILL 5"[..],
            b"-- c\nKILL 5",
            b"# c\nKILL 5",
            b"/*!KILL 5*/",
            b"(SELECT ROW_COUNT())",
            b"KILL/**/5",
            b"SELECT*FROM t",
            b"",
            b"   ",
        ] {
            assert_eq!(lead_word(sql), None, "{}", String::from_utf8_lossy(sql));
        }
    }

    #[test]
    fn recognises_plain_use_statements() {
        assert_eq!(use_statement(b"USE shop").as_deref(), Some("shop"));
        assert_eq!(use_statement(b"  use `my db`;  ").as_deref(), Some("my db"));
        assert_eq!(use_statement(b"use shop_1;").as_deref(), Some("shop_1"));
        assert_eq!(use_statement(b"USE a; SELECT 1"), None);
        assert_eq!(use_statement(b"USER"), None);
        // A comment before it changes nothing (MariaDB skips it).
        assert_eq!(use_statement(b"/* hint */ USE a").as_deref(), Some("a"));
        assert_eq!(use_statement(b"-- c\nuse `b`;").as_deref(), Some("b"));
        assert_eq!(use_statement(b"# c\nUSE c").as_deref(), Some("c"));
        assert_eq!(use_statement(b"/* USE a */ SELECT 1"), None);
        assert_eq!(use_statement(b"/* c */ USE a; SELECT 1"), None);
        assert_eq!(use_statement(b"USE `a`b`"), None);
    }
}
