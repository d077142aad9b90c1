//! One client session: login, then the command loop.
//!
//! The session owns what the client believes about its connection (schema, variables,
//! transaction, prepared statements) and decides which backend connection serves each command:
//! it keeps the one it has while it can, gives it back to the pool when the pool is short and
//! nothing pins it, and replays its state onto whatever connection it gets next.

pub(crate) mod admin;
pub mod kill;
pub mod limits;
pub(crate) mod login;
pub mod nudge;
pub mod pinning;
mod process;
pub mod processlist;
pub mod relay;

use std::sync::Arc;
use std::time::Instant;

use mysql_common::collations::{Collation, CollationId};
use mysql_common::constants::{CapabilityFlags, ColumnFlags, ColumnType, StatusFlags};
use shoal_router::sql::lex::{TokKind, Token};
use tokio::net::TcpStream;

use crate::wire::tls::ClientStream;
use tokio::sync::watch;
use tracing::{debug, trace, warn};

use crate::backend::charset;
use crate::backend::pool::{PooledConn, Wanted, align_to};
use crate::backend::state::{SessionState, Vars};
use crate::error::{Error, Result};
use crate::exec::connset::ConnSet;
use crate::out_of_line::cold;
use crate::wire::Wire;
use crate::wire::command::*;
use crate::wire::messages::{err_payload_bytes, ok_payload};
use crate::wire::packet::{PacketStream, is_too_large};
use crate::wire::resultset::column_definition;
use relay::{Expect, Outcome, relay};

/// What every session of one proxy shares.
pub struct Shared {
    /// The current configuration snapshot: settings, router, pools and servers. New sessions
    /// and sessions that hold nothing on their old snapshot take it (see
    /// [`Session::follow_reload`]); a reload swaps it whole (see `crate::reload`).
    pub runtime: arc_swap::ArcSwap<crate::runtime::Runtime>,
    /// How to read the configuration again (`None` in quick mode: there is no file).
    pub reloader: Option<crate::reload::Reloader>,
    /// Reloads run one at a time (SIGHUP and RELOAD SHOAL CONFIG may race).
    pub reload_lock: tokio::sync::Mutex<()>,
    /// The health monitors of the current snapshot's servers (replaced by a reload).
    pub monitors: std::sync::Mutex<Vec<tokio::task::AbortHandle>>,
    /// Version string announced to clients (the backend's own, so drivers enable the same
    /// features they would against it directly).
    pub server_version: Vec<u8>,
    /// The backends' sql_mode at startup: what sessions that never set one are planned with.
    pub default_sql_mode: shoal_router::sql::SqlMode,
    /// Capabilities offered to clients: ours, limited to what the backend supports.
    pub capabilities: CapabilityFlags,
    /// MariaDB's extended capabilities offered to clients (likewise).
    pub mariadb: mysql_common::constants::MariadbCapabilities,
    pub shutdown: watch::Receiver<bool>,
    /// Set once shutdown starts; sessions check it between commands (a cheap load).
    pub stopping: std::sync::atomic::AtomicBool,
    /// Live sessions by handshake id, for KILL.
    pub sessions: kill::Registry,
    /// TLS to clients, when configured.
    pub tls: Option<crate::wire::tls::ClientTls>,
    /// The key caching_sha2 clients encrypt their password with over plain TCP.
    pub rsa: Arc<crate::wire::rsa_key::RsaKey>,
    pub throttle: limits::LoginThrottle,
    pub user_conns: Arc<limits::UserConnections>,
    pub sha2_cache: limits::Sha2Cache,
    /// XA transactions over datanodes: ids, decision log, recovery, counters.
    pub xa: Arc<crate::xa::Xa>,
    /// Metrics, query digests, slow log (see `observe`).
    pub observe: crate::observe::Observer,
    /// When the proxy started (uptime; the clock of `SHOW SHOAL SESSIONS`).
    pub started: Instant,
}

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
    pub(crate) shared: Arc<Shared>,
    /// The configuration snapshot this session works on (see [`Session::follow_reload`]).
    pub(crate) rt: Arc<crate::runtime::Runtime>,
    /// The command's error is the router's refusal, in the client's own words: not rewritten
    /// to logical names like a backend's (taken by the routed dispatch).
    pub(crate) refused: bool,
    pub(crate) client: PacketStream<ClientStream>,
    pub(crate) peer_host: String,
    /// Capabilities negotiated with the client.
    pub(crate) caps: CapabilityFlags,
    /// The client negotiated MariaDB's metadata caching (MARIADB_CLIENT_CACHE_METADATA).
    pub(crate) cache_metadata: bool,
    pub(crate) user: String,
    pub(crate) scramble: [u8; 20],
    /// The state the client expects its connection to be in.
    pub(crate) want: SessionState,
    /// Variables implied by the client's handshake collation (what a reset goes back to).
    pub(crate) initial_vars: Vars,
    pub(crate) backend: Option<PooledConn>,
    pub(crate) last_backend: u64,
    /// When the running command arrived (or the last one did): the one clock read a command
    /// takes on the relay path, reused for connection ages and the processlist.
    pub(crate) command_at: Instant,
    pub(crate) pins: Pins,
    /// Status flags of the last response, for OK packets the proxy answers itself.
    pub(crate) status: u16,
    /// What ROW_COUNT() and FOUND_ROWS() return after the session's last statement, and the
    /// connection that statement ran on: if the session has moved since, the proxy answers
    /// these itself (the new connection's values are another session's).
    pub(crate) diag: Diagnostics,
    /// With the router: the logical schema the client is in (`USE`), the connections held per
    /// datanode, and the BEGIN of an explicit transaction, sent to each datanode on first touch.
    pub(crate) logical: Option<String>,
    /// The variables sql_mode was last read from, and what it means for the router (parsed
    /// once per change, not per statement).
    mode_seen: (Vars, shoal_router::sql::SqlMode),
    /// The variables the character sets were last read from, and the character sets (see
    /// [`charset`]; read once per change, not per statement).
    charsets_seen: (Vars, charset::Charsets),
    /// The running COM_QUERY's text when it is not its bytes as they are (a client whose
    /// `character_set_client` is not UTF-8 sent non-ASCII bytes): what the router read.
    pub(crate) decoded: Option<String>,
    /// The routed path's token buffer, reused from statement to statement: each COM_QUERY is
    /// tokenized once into it and read by the router, the pin check and the diagnostics check.
    pub(crate) tokens: Vec<Token>,
    /// Column definitions this session's results had renamed to logical names, kept to be
    /// copied when the same come again (routed only).
    pub(crate) renamed: crate::runtime::names::RenameMemo,
    pub(crate) conns: ConnSet,
    pub(crate) txn_begin: Option<String>,
    /// Why the explicit transaction uses plain BEGIN on each datanode instead of XA (`START
    /// TRANSACTION READ ONLY` or `WITH CONSISTENT SNAPSHOT`), if it does.
    pub(crate) txn_plain: Option<&'static str>,
    /// The gtrid of the transaction's XA branches, while it has any (see `exec::xa`).
    pub(crate) xa_gtrid: Option<String>,
    /// The savepoints of the open transaction, oldest first (see `exec::savepoint`).
    pub(crate) savepoints: Vec<String>,
    /// The datanodes whose held connections hold the session's LOCK TABLES locks (empty:
    /// no table is locked; see `exec::table_locks`).
    pub(crate) table_locks: Vec<shoal_router::topology::DatanodeId>,
    /// Every lock of the session's LOCK TABLES is a READ lock: no session can change those
    /// tables, so another connection reads what the locked one would.
    pub(crate) table_locks_read: bool,
    /// User variables the session holds (lower-cased name -> SQL literal; `exec::user_vars`).
    pub(crate) user_vars: std::collections::HashMap<String, String>,
    /// Client prepared statements with the router (Shoal's ids).
    pub(crate) statements: crate::exec::Statements,
    /// The first id an INSERT got from a global sequence, for its OK packet.
    pub(crate) sequence_first: Option<u64>,
    /// The handshake id (what `CONNECTION_ID()` returns and `KILL` takes), and what other
    /// sessions see of this one.
    pub(crate) id: u32,
    pub(crate) handle: Arc<kill::SessionHandle>,
    /// What `handle.backends` holds (only this session writes it).
    shown_backends: Vec<(usize, u32)>,
    /// The schema last published in `handle` (compared after each command).
    shown_schema: Option<String>,
    /// Counts this session against its user's `max_connections`.
    pub(crate) user_slot: Option<limits::UserSlot>,
    /// The session's own handle on the router (`None` in quick mode), taken out for each
    /// command: cloning the shared one per command would write to a counter every session's
    /// commands share.
    routing: Option<Arc<crate::runtime::routing::Routing>>,
    /// What the running command did, for `observe` (reset before each command).
    pub(crate) mark: crate::observe::Mark,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Diagnostics {
    pub(crate) row_count: i64,
    pub(crate) found_rows: u64,
    /// The values above come from a statement of this session.
    pub(crate) known: bool,
    /// The connection still holds them: the session has not let go of it since.
    pub(crate) on_backend: bool,
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
    let mut session = Session {
        shared,
        rt,
        refused: false,
        client,
        peer_host,
        caps: CapabilityFlags::empty(),
        cache_metadata: false,
        user: String::new(),
        scramble: [0; 20],
        want: SessionState::default(),
        initial_vars: Vars::default(),
        backend: None,
        last_backend: 0,
        command_at: Instant::now(),
        pins: Pins::default(),
        status: StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits(),
        diag: Diagnostics {
            row_count: -1,
            found_rows: 0,
            known: false,
            on_backend: false,
        },
        logical: None,
        mode_seen: (Vars::default(), shoal_router::sql::SqlMode::default()),
        charsets_seen: (Vars::default(), charset::Charsets::default()),
        decoded: None,
        tokens: Vec::new(),
        renamed: Default::default(),
        conns: ConnSet::default(),
        txn_begin: None,
        txn_plain: None,
        xa_gtrid: None,
        savepoints: Vec::new(),
        table_locks: Vec::new(),
        table_locks_read: false,
        user_vars: Default::default(),
        statements: Default::default(),
        sequence_first: None,
        id: connection_id,
        handle: Arc::new(kill::SessionHandle::new(client_addr)),
        shown_backends: Vec::new(),
        shown_schema: None,
        user_slot: None,
        routing,
        mark: crate::observe::Mark::default(),
    };
    match session.login(connection_id).await {
        Ok(()) => {
            let _open = crate::observe::metrics::OpenSession::new(&session.shared);
            debug!(connection_id, user = %session.user, "client logged in");
            *session
                .handle
                .user
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = session.user.clone();
            session.publish_end(Instant::now());
            session
                .shared
                .sessions
                .register(connection_id, session.handle.clone());
            if let Err(e) = session.command_loop().await {
                debug!(connection_id, error = %e, "session ended with error");
            }
        }
        Err(e) => {
            debug!(connection_id, error = %e, "login failed");
            if let Some(m) = &session.shared.observe.metrics {
                m.refused(crate::observe::metrics::Refusal::of_login_error(&e));
            }
        }
    }
    session.shared.sessions.unregister(connection_id);
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DiagQuery {
    RowCount,
    FoundRows,
    /// `SELECT CONNECTION_ID()`: Shoal's id (the handshake's), always answered by Shoal.
    ConnectionId,
}

/// Whether the statement starts with a comment (`/* */`, `-- `, `#`): the byte-level fast
/// paths below read its tokens instead, so that a comment never changes how it is read.
pub(crate) fn starts_with_comment(sql: &[u8]) -> bool {
    match sql.trim_ascii_start() {
        [b'#', ..] | [b'/', b'*', ..] => true,
        [b'-', b'-', c, ..] => c.is_ascii_whitespace(),
        _ => false,
    }
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

/// A query that is exactly `SELECT ROW_COUNT()` or `SELECT FOUND_ROWS()`.
pub(crate) fn diagnostics_query(sql: &[u8]) -> Option<DiagQuery> {
    if starts_with_comment(sql) {
        let text = std::str::from_utf8(sql).ok()?;
        let toks = shoal_router::sql::lex::tokenize(text).ok()?;
        return diagnostics_tokens(text, &toks);
    }
    let s = sql.trim_ascii();
    let s = s.strip_suffix(b";").unwrap_or(s).trim_ascii_end();
    // All three end with `()`; a usual SELECT ends otherwise and stops here.
    if s.len() < 7 || !s.ends_with(b")") || !s[..7].eq_ignore_ascii_case(b"SELECT ") {
        return None;
    }
    // Compared lazily, without a copy: this runs for every SELECT and most stop at one byte.
    let squeezed = || {
        s[7..]
            .iter()
            .filter(|b| !b.is_ascii_whitespace())
            .map(|b| b.to_ascii_uppercase())
    };
    if squeezed().eq(b"ROW_COUNT()".iter().copied()) {
        Some(DiagQuery::RowCount)
    } else if squeezed().eq(b"FOUND_ROWS()".iter().copied()) {
        Some(DiagQuery::FoundRows)
    } else if squeezed().eq(b"CONNECTION_ID()".iter().copied()) {
        Some(DiagQuery::ConnectionId)
    } else {
        None
    }
}

/// [`diagnostics_query`] read on the statement's tokens (the routed path, which has them):
/// comments and spacing do not matter, text in strings cannot match.
pub(crate) fn diagnostics_tokens(sql: &str, toks: &[Token]) -> Option<DiagQuery> {
    let toks = match toks.split_last() {
        Some((last, rest)) if last.is_punct(sql, ";") => rest,
        _ => toks,
    };
    let [select, func, open, close] = toks else {
        return None;
    };
    if !select.is_kw(sql, "SELECT") || !open.is_punct(sql, "(") || !close.is_punct(sql, ")") {
        return None;
    }
    if func.is_kw(sql, "ROW_COUNT") {
        Some(DiagQuery::RowCount)
    } else if func.is_kw(sql, "FOUND_ROWS") {
        Some(DiagQuery::FoundRows)
    } else if func.is_kw(sql, "CONNECTION_ID") {
        Some(DiagQuery::ConnectionId)
    } else {
        None
    }
}

impl Session {
    pub(crate) async fn send_error(
        &mut self,
        seq: u8,
        code: u16,
        state: &[u8; 5],
        message: &str,
    ) -> Result<()> {
        let mut s = seq;
        self.mark.error = Some(code);
        let p = self.error_payload(code, state, message);
        self.client.write_packet(&mut s, &p);
        self.client.flush().await.map_err(Error::ClientIo)
    }

    /// An ERR payload of Shoal's own, its message in the session's `character_set_results`.
    pub(crate) fn error_payload(&mut self, code: u16, state: &[u8; 5], message: &str) -> Vec<u8> {
        let results = self.charsets().results;
        err_payload_bytes(code, state, &charset::message_bytes(results, message))
    }

    pub(crate) async fn send_ok(&mut self, seq: u8) -> Result<()> {
        let mut s = seq;
        let p = ok_payload(self.reply_status());
        self.client.write_packet(&mut s, &p);
        self.client.flush().await.map_err(Error::ClientIo)
    }

    /// The framing of what the client is sent.
    pub(crate) fn client_wire(&self) -> Wire {
        Wire {
            caps: self.caps,
            cache_metadata: self.cache_metadata,
        }
    }

    /// The framing asked of the router's backend connections: the client's without metadata
    /// caching. Their prepared statements serve every session (`backend::stmt_cache`), so
    /// what the server remembers having sent is no one client's; and the router renames every
    /// execute's column definitions, so it needs them. Clients that cache metadata are told
    /// that the definitions follow (see `relay`).
    pub(crate) fn routed_wire(&self) -> Wire {
        self.caps.into()
    }

    fn wanted(&self) -> Wanted<'_> {
        Wanted {
            // The relay's backend connection speaks the client's framing, metadata caching
            // included: the client's prepared statements are the connection's own (pinned to
            // it), so what the server remembers having sent is what the client holds.
            wire: self.client_wire(),
            prefer: self.last_backend,
            schema: self.want.schema.as_deref(),
            multi_statements: self.want.multi_statements,
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
            let validate = self.rt.pool.settings().validate_after;
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
            .is_some_and(|conn| conn.state == self.want)
        {
            return Ok(());
        }
        let conn = match self.backend.take() {
            Some(conn) => cold(self.align_backend(conn)).await?,
            None => {
                let conn = cold(self.rt.pool.acquire(self.wanted())).await?;
                self.last_backend = conn.id;
                if conn.state == self.want {
                    conn
                } else {
                    cold(self.align_backend(conn)).await?
                }
            }
        };
        kill::publish(
            &self.handle,
            &mut self.shown_backends,
            Some(&conn),
            &self.conns.held,
        );
        self.backend = Some(conn);
        Ok(())
    }

    /// Replays the difference between `conn`'s state and the client's. A refused replay keeps
    /// the connection as the session's (it is fine); a broken one drops it.
    async fn align_backend(&mut self, mut conn: PooledConn) -> Result<PooledConn> {
        if self.want.schema.is_none() && conn.state.schema.is_some() {
            // There is no way to leave a schema: start over on a fresh connection.
            let want = self.wanted();
            conn = self.rt.pool.reopen(conn, want).await?;
            self.last_backend = conn.id;
        }
        let result = align_to(&self.want, self.want.schema.as_deref(), &mut conn).await;
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

    /// Gives the connection back to the pool, resetting it first if it carries state that
    /// must not reach another session.
    async fn release_backend(&mut self) {
        let Some(mut conn) = self.backend.take() else {
            return;
        };
        self.publish_backends();
        self.diag.on_backend = false;
        if self.pins.any() {
            let reset =
                crate::timers::timeout(self.rt.pool.settings().connect_timeout, conn.reset()).await;
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
        self.release_conns(true).await;
        self.client.shutdown().await;
    }

    /// The backend connection broke: drop it, and with it whatever was pinned to it.
    fn lose_backend(&mut self) {
        self.diag.on_backend = false;
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
        let idle_timeout = self.rt.config.client_idle_timeout;
        let pool = self.rt.pool.clone();
        let handle = self.handle.clone();
        handle.idle_timeout_ms.store(
            u64::try_from(idle_timeout.as_millis()).unwrap_or(u64::MAX),
            std::sync::atomic::Ordering::Relaxed,
        );
        let mut last_active = Instant::now();
        loop {
            if self
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
            if !self.conns.is_empty() && self.release_wanted() {
                cold(self.release_conns(false)).await;
            }
            // Shutdown, KILL, the idle timeout and a pool's reclaim nudge the session from
            // outside (see `nudge`): the only other branch, and a cheap one to poll.
            let read = tokio::select! {
                biased;
                r = self.client.next_packet() => Some(r),
                () = handle.nudge.wait() => None,
            };
            let Some(read) = read else {
                handle.nudge.clear();
                if last_active.elapsed() >= idle_timeout {
                    debug!("client idle timeout");
                    return Ok(());
                }
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
            let cmd = self.client.frame().get(4).copied();
            let Some(cmd) = cmd else {
                cold(self.send_error(reply_seq, 1047, b"08S01", "Empty command packet")).await?;
                continue;
            };
            if cmd == COM_QUIT {
                return Ok(());
            }
            if self.reload_pending() {
                cold(self.follow_reload()).await;
            }
            let started = last_active;
            self.mark = crate::observe::Mark::default();
            self.publish_begin(cmd, last_active);
            let result = self.dispatch(cmd, reply_seq).await;
            last_active = Instant::now();
            if let Some(b) = self.backend.as_mut() {
                // Read once here for every path that used it (pool ages, validation).
                b.last_used = last_active;
            }
            self.publish_backends();
            self.publish_end(last_active);
            let fatal = match result {
                Ok(()) => None,
                Err(e) => cold(self.answer_error(reply_seq, e)).await?,
            };
            if self.shared.observe.any() {
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
            let _ = self.send_error(0, code, state, &msg).await;
        }
        // The client may still be sending the packet: let it finish (bounded), so that it
        // reads the 1153 instead of a reset, as it would from MySQL.
        self.client
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
            self.send_error(reply_seq, code, &state, &msg).await?;
        }
        Ok(e.ends_session().then_some(e))
    }

    /// Whether a newer configuration snapshot than the session's is published (one
    /// `ArcSwap::load` per command): then [`Self::follow_reload`] runs.
    fn reload_pending(&self) -> bool {
        !Arc::ptr_eq(&self.shared.runtime.load(), &self.rt)
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
            let current = self.shared.runtime.load();
            // A session whose user the reload removed keeps running with the rights it logged
            // in with (as MariaDB keeps a dropped user's open sessions): the new snapshot has
            // no account to read them from, and reading none would mean no limits at all.
            if current.config.user(&self.user).is_none() {
                return;
            }
        }
        let holds = self.pins.any()
            || self.txn_begin.is_some()
            || self.xa_gtrid.is_some()
            || !self.table_locks.is_empty()
            || !self.savepoints.is_empty()
            || self.conns.held.iter().any(|h| h.pinned() || h.xa);
        if holds {
            return;
        }
        self.release_backend().await;
        self.release_conns(true).await;
        self.rt = self.shared.runtime.load_full();
        self.routing = self.rt.routing.clone();
        // Server indexes are per snapshot: what read-your-writes learned of replicas is
        // learned again.
        for w in &mut self.conns.writes {
            w.applied_on.clear();
        }
        if let Some(r) = self.routing.clone() {
            let (mode, cs) = (self.sql_mode(), self.charsets().statements);
            self.statements
                .replan(&r.router, self.logical.as_deref(), mode, cs);
        }
    }

    /// Runs one command. Errors returned here are answered at `reply_seq`; errors after part
    /// of a response was forwarded are answered inside.
    async fn dispatch(&mut self, cmd: u8, reply_seq: u8) -> Result<()> {
        if let Some(routing) = self.routing.take() {
            // Put back after the command; a command stopped half-way ends the session anyway.
            let result = self.dispatch_routed(&routing, cmd, reply_seq).await;
            self.routing = Some(routing);
            return result.map_err(|e| self.with_account(e));
        }
        match cmd {
            COM_PING => self.send_ok(reply_seq).await,
            COM_QUERY => {
                // What Shoal answers itself is read only where the first word allows it; a
                // statement that starts otherwise (a comment, a parenthesis) is read in full.
                let local = {
                    let p = self.client.packet_payload();
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
                        && let Some((query_only, target)) = kill::parse_kill(sql)
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
                            || (self.diag.known && !self.diag.on_backend) =>
                    {
                        return cold(self.answer_diagnostics(which, reply_seq)).await;
                    }
                    Some(RelayLocal::Kill(query_only, target)) => {
                        return cold(self.kill(query_only, target, reply_seq)).await;
                    }
                    Some(RelayLocal::Admin(parsed)) => {
                        return match parsed {
                            Ok(stmt) => cold(self.admin(stmt, reply_seq)).await,
                            Err(e) => Err(crate::exec::refusal(&e)),
                        };
                    }
                    _ => {}
                }
                let pinning::Effects {
                    leaves_state: sticky,
                    sets_last_insert_id: sets_lid,
                } = pinning::effects(&self.client.packet_payload()[1..]);
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
            COM_INIT_DB => {
                let db = String::from_utf8_lossy(&self.client.packet_payload()[1..]).into_owned();
                cold(self.use_schema(&db, reply_seq)).await
            }
            COM_FIELD_LIST => {
                cold(self.forward(Expect::FieldList, reply_seq)).await?;
                Ok(())
            }
            COM_STATISTICS => {
                cold(self.forward(Expect::Single, reply_seq)).await?;
                Ok(())
            }
            COM_SET_OPTION => {
                let p = self.client.packet_payload();
                let opt = p.get(1..3).map(|b| u16::from_le_bytes([b[0], b[1]]));
                drop(p);
                let on = match opt {
                    Some(MYSQL_OPTION_MULTI_STATEMENTS_ON) => true,
                    Some(MYSQL_OPTION_MULTI_STATEMENTS_OFF) => false,
                    _ => {
                        return Err(Error::reply(
                            1047,
                            b"08S01",
                            "Unknown COM_SET_OPTION option",
                        ));
                    }
                };
                let out = cold(self.forward(Expect::Single, reply_seq)).await?;
                if let Some(out) = out
                    && !out.error
                {
                    self.want.multi_statements = on;
                    if let Some(b) = self.backend.as_mut() {
                        b.state.multi_statements = on;
                    }
                }
                Ok(())
            }
            COM_RESET_CONNECTION => {
                cold(self.reset_session()).await?;
                self.send_ok(reply_seq).await
            }
            COM_CHANGE_USER => cold(self.change_user(reply_seq)).await,
            COM_STMT_PREPARE => {
                if let Some(refused) = self.prepare_admin() {
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
            COM_STMT_EXECUTE | COM_STMT_FETCH | COM_STMT_RESET => {
                let id = stmt_id(&self.client.packet_payload()).unwrap_or(0);
                if !self.pins.statements.contains(&id) || self.backend.is_none() {
                    return Err(Error::unknown_statement(id, name(cmd)));
                }
                let expect = match cmd {
                    // The flags byte after the statement id; CURSOR_TYPE_READ_ONLY is 1.
                    COM_STMT_EXECUTE
                        if self
                            .client
                            .packet_payload()
                            .get(5)
                            .is_some_and(|f| f & 1 != 0) =>
                    {
                        Expect::CursorResults
                    }
                    COM_STMT_EXECUTE => Expect::Results { binary: true },
                    COM_STMT_FETCH => Expect::Rows,
                    _ => Expect::Single,
                };
                self.forward(expect, reply_seq).await?;
                Ok(())
            }
            COM_STMT_SEND_LONG_DATA | COM_STMT_CLOSE => {
                // No response: errors are kept by the server for the next EXECUTE.
                let id = stmt_id(&self.client.packet_payload()).unwrap_or(0);
                if !self.pins.statements.contains(&id) {
                    return Ok(());
                }
                let Some(backend) = self.backend.as_mut() else {
                    return Ok(());
                };
                if cmd == COM_STMT_CLOSE {
                    self.pins.statements.retain(|s| *s != id);
                }
                backend.io.write_raw(self.client.frame());
                if let Err(e) = backend.io.flush().await {
                    debug!(error = %e, "backend write failed");
                    self.lose_backend();
                }
                Ok(())
            }
            other => Err(Error::unknown_command(other)),
        }
    }

    /// Answers `SELECT ROW_COUNT()` / `SELECT FOUND_ROWS()` from what the session's own last
    /// statement reported, as a one-row result shaped like the server's.
    pub(crate) async fn answer_diagnostics(
        &mut self,
        which: DiagQuery,
        reply_seq: u8,
    ) -> Result<()> {
        let (name, value) = match which {
            DiagQuery::RowCount => ("ROW_COUNT()", self.diag.row_count.to_string()),
            DiagQuery::FoundRows => ("FOUND_ROWS()", self.diag.found_rows.to_string()),
            DiagQuery::ConnectionId => ("CONNECTION_ID()", self.id.to_string()),
        };
        let def = column_definition(
            name,
            "",
            63, // binary
            21,
            ColumnType::MYSQL_TYPE_LONGLONG,
            ColumnFlags::NOT_NULL_FLAG | ColumnFlags::BINARY_FLAG,
        );
        self.write_result(
            reply_seq,
            &[def],
            vec![vec![Some(value.into_bytes())]],
            crate::merge::Protocol::Text,
        )
        .await?;
        self.diag.row_count = -1;
        self.diag.found_rows = 1;
        Ok(())
    }

    /// COM_INIT_DB, or a plain `USE db` query: switches the session's schema (mapped to its
    /// physical database) after the backend accepted it.
    async fn use_schema(&mut self, db: &str, reply_seq: u8) -> Result<()> {
        self.check_schema_allowed(db)?;
        let physical = self
            .rt
            .config
            .physical_schema(db)
            .ok_or_else(|| Error::unknown_database(db))?
            .to_string();
        let backend = self.ensure_backend().await?;
        match backend.init_db(&physical).await {
            Ok(()) => {
                self.want.schema = Some(physical);
                self.send_ok(reply_seq).await
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
        let wire = self.client_wire();
        let backend = self
            .backend
            .as_mut()
            .expect("ready_backend leaves a connection");
        let limited = self.rt.config.query_timeout;
        if let Some(t) = limited {
            backend.arm(tokio::time::Instant::now() + t);
        }
        backend.io.write_raw(self.client.frame());
        let mut seq = reply_seq;
        let names = self.rt.relay_names.as_deref().map(|n| (n, None));
        // The round trip's time, only when metrics are counted (no clock read otherwise).
        let timed = self.rt.slots.is_some().then(Instant::now);
        let result = match backend.io.flush().await {
            Ok(()) => {
                relay(
                    backend,
                    &mut self.client,
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
        if let (Some(t), Some(m)) = (timed, &self.rt.slots) {
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
                self.mark.rows += out.rows;
                if out.error_code.is_some() {
                    self.mark.error = out.error_code;
                }
                if let Expect::Results { .. } | Expect::CursorResults = expect {
                    self.diag.known = true;
                    self.diag.on_backend = true;
                    if out.error {
                        self.diag.row_count = -1;
                    } else {
                        self.diag.row_count = out.affected.map_or(-1, |a| a as i64);
                    }
                    if out.had_rows {
                        self.diag.found_rows = out.rows;
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
                    let read = self.command_is_read();
                    crate::backend::interrupt::stalled_error("the server", read, in_transaction)
                } else {
                    Error::lost_backend()
                };
                if let Some((code, state, msg)) = lost.as_reply() {
                    let (msg, state) = (msg.to_string(), *state);
                    cold(self.send_error(seq, code, &state, &msg)).await?;
                }
                Ok(None)
            }
            Err(Error::ClientIo(e)) => Err(Error::ClientIo(e)),
            Err(e) => Err(e),
        }
    }

    /// Whether the client's command is a query that only reads (a SELECT): what a statement
    /// whose server stalled at `query_timeout` is answered by (see
    /// `backend::interrupt::stalled_error`). Asked only then; anything else (an EXECUTE
    /// included) counts as a possible write.
    pub(crate) fn command_is_read(&self) -> bool {
        let p = self.client.packet_payload();
        p.first() == Some(&COM_QUERY)
            && std::str::from_utf8(&p[1..]).is_ok_and(|sql| {
                shoal_router::sql::classify(sql) == shoal_router::sql::StatementKind::Select
            })
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
                self.want.set_var("collation_connection", &c);
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
                    self.want.last_insert_id = id;
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
            self.status = status
                & !StatusFlags::SERVER_SESSION_STATE_CHANGED.bits()
                & !StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();
            let in_trans = status & StatusFlags::SERVER_STATUS_IN_TRANS.bits() != 0;
            let autocommit = status & StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits() != 0;
            self.pins.transaction = in_trans || !autocommit;
        }
        if let Some(id) = out.last_insert_id {
            self.want.last_insert_id = id;
            if let Some(b) = self.backend.as_mut() {
                b.state.last_insert_id = id;
            }
        }
        if !out.tracked.is_empty() {
            if out.tracked.unexplained_change() {
                self.pins.sticky = true;
            }
            self.want.apply(&out.tracked);
            if let Some(b) = self.backend.as_mut() {
                b.state.apply(&out.tracked);
            }
        }
    }

    /// The sql_mode statements of this session are read with: the one it set, else the
    /// backends' default.
    pub(crate) fn sql_mode(&mut self) -> shoal_router::sql::SqlMode {
        // Read again only when the variables changed (they are replaced, never edited in
        // place, while `mode_seen` holds them).
        if !self.mode_seen.0.same(&self.want.vars) {
            let mode = match self.want.var("sql_mode") {
                None => self.shared.default_sql_mode,
                Some(v) => shoal_router::sql::SqlMode::parse(v),
            };
            self.mode_seen = (self.want.vars.clone(), mode);
        }
        self.mode_seen.1
    }

    /// The session's character sets (see [`charset`]): read again only when its variables
    /// changed.
    pub(crate) fn charsets(&mut self) -> charset::Charsets {
        if !self.charsets_seen.0.same(&self.want.vars) {
            self.charsets_seen = (
                self.want.vars.clone(),
                charset::Charsets::of(&self.want.vars),
            );
        }
        self.charsets_seen.1
    }

    /// The running COM_QUERY's text as the router read it (owned: off the hot path).
    pub(crate) fn client_text(&self) -> String {
        match &self.decoded {
            Some(text) => text.clone(),
            None => String::from_utf8_lossy(&self.client.packet_payload()[1..]).into_owned(),
        }
    }

    /// An unknown schema is 1049; a known one outside the user's list is 1044, as MySQL says.
    pub(crate) fn check_schema_allowed(&self, db: &str) -> Result<()> {
        if self.rt.config.physical_schema(db).is_none() {
            return Err(Error::unknown_database(db));
        }
        let user = self.rt.config.user(&self.user);
        if let Some(list) = user.and_then(|u| u.schemas.as_ref())
            && !list.iter().any(|s| s == db)
        {
            return Err(Error::reply(
                1044,
                b"42000",
                format!(
                    "Access denied for user '{}'@'{}' to database '{}'",
                    self.user, self.peer_host, db
                ),
            ));
        }
        Ok(())
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
        self.txn_begin = None;
        self.txn_plain = None;
        self.xa_gtrid = None;
        self.savepoints.clear();
        self.table_locks.clear();
        self.statements = Default::default();
        self.release_conns(true).await;
        self.want.vars = self.initial_vars.clone();
        self.want.last_insert_id = 0;
        self.status = StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits();
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

    #[test]
    fn recognises_diagnostics_queries() {
        use super::{DiagQuery, diagnostics_query};
        assert_eq!(
            diagnostics_query(b"SELECT ROW_COUNT()"),
            Some(DiagQuery::RowCount)
        );
        assert_eq!(
            diagnostics_query(b" select found_rows( ) ;"),
            Some(DiagQuery::FoundRows)
        );
        assert_eq!(diagnostics_query(b"SELECT ROW_COUNT() + 1"), None);
        assert_eq!(diagnostics_query(b"SELECT 1"), None);
        assert_eq!(
            diagnostics_query(b"/* tool */ SELECT ROW_COUNT()"),
            Some(DiagQuery::RowCount)
        );
    }

    #[test]
    fn recognises_diagnostics_queries_on_tokens() {
        use super::{DiagQuery, diagnostics_tokens};
        use shoal_router::sql::lex::tokenize;
        let diag = |sql: &str| diagnostics_tokens(sql, &tokenize(sql).expect("tokens"));
        assert_eq!(diag("SELECT ROW_COUNT()"), Some(DiagQuery::RowCount));
        assert_eq!(diag(" select found_rows( ) ;"), Some(DiagQuery::FoundRows));
        assert_eq!(
            diag("SELECT /* id 7 */ connection_id()"),
            Some(DiagQuery::ConnectionId)
        );
        for sql in [
            "SELECT ROW_COUNT() + 1",
            "SELECT 1",
            "SELECT 'ROW_COUNT()'",
            "SELECT `ROW_COUNT`()",
            "SELECT ROW_COUNT(); SELECT 1",
            "SELECT FOUND_ROWS(1)",
            ";",
            "",
        ] {
            assert_eq!(diag(sql), None, "{sql}");
        }
    }
}
