//! The executor's value: what running a client's commands reads and writes, owned by its
//! session (`session::Session::cur`) and handed to the executor for each command.
//!
//! It holds the client's sink (the packet stream answers go to), what the client believes
//! about its connection (schema, variables, status), the connections the statements hold per
//! datanode ([`ConnSet`]), the transaction (its BEGIN, XA branch, savepoints, table locks),
//! the prepared statements, and the record of the running command for `observe`. The
//! executor's modules are `impl Cursor` blocks, one per plan kind; they never see the
//! session's login, its passthrough connection or its command loop.

use std::sync::Arc;

use mysql_common::constants::CapabilityFlags;
use shoal_router::sql::lex::Token;

use super::connset::ConnSet;
use crate::backend::charset;
use crate::backend::pool::PooledConn;
use crate::backend::state::{SessionState, Vars};
use crate::error::{Error, Result};
use crate::process::Shared;
use crate::process::sessions::{SessionHandle, publish};
use crate::wire::Wire;
use crate::wire::command::COM_QUERY;
use crate::wire::messages::{err_payload_bytes, ok_payload};
use crate::wire::packet::PacketStream;
use crate::wire::tls::ClientStream;

/// One client's state as the executor works on it.
pub struct Cursor {
    pub(crate) shared: Arc<Shared>,
    /// The configuration snapshot this session works on (see `Session::follow_reload`).
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
    /// The handshake id (what `CONNECTION_ID()` returns and `KILL` takes).
    pub(crate) id: u32,
    /// What other sessions see of this one.
    pub(crate) handle: Arc<SessionHandle>,
    /// What `handle.backends` holds (only this session writes it).
    pub(crate) shown_backends: Vec<(usize, u32)>,
    /// The state the client expects its connection to be in.
    pub(crate) want: SessionState,
    /// Status flags of the last response, for OK packets the proxy answers itself.
    pub(crate) status: u16,
    /// What ROW_COUNT() and FOUND_ROWS() return after the session's last statement, and the
    /// connection that statement ran on: if the session has moved since, the proxy answers
    /// these itself (the new connection's values are another session's).
    pub(crate) diag: Diagnostics,
    /// With the router: the logical schema the client is in (`USE`).
    pub(crate) logical: Option<String>,
    /// The variables sql_mode was last read from, and what it means for the router (parsed
    /// once per change, not per statement).
    pub(crate) mode_seen: (Vars, shoal_router::sql::SqlMode),
    /// The variables the character sets were last read from, and the character sets (see
    /// [`charset`]; read once per change, not per statement).
    pub(crate) charsets_seen: (Vars, charset::Charsets),
    /// The running COM_QUERY's text when it is not its bytes as they are (a client whose
    /// `character_set_client` is not UTF-8 sent non-ASCII bytes): what the router read.
    pub(crate) decoded: Option<String>,
    /// The routed path's token buffer, reused from statement to statement: each COM_QUERY is
    /// tokenized once into it and read by the router, the pin check and the diagnostics check.
    pub(crate) tokens: Vec<Token>,
    /// Column definitions this session's results had renamed to logical names, kept to be
    /// copied when the same come again (routed only).
    pub(crate) renamed: crate::runtime::names::RenameMemo,
    /// The connections held per datanode, and what the running statement did with them.
    pub(crate) conns: ConnSet,
    /// The BEGIN of an explicit transaction, sent to each datanode on first touch.
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
    pub(crate) statements: super::Statements,
    /// The first id an INSERT got from a global sequence, for its OK packet.
    pub(crate) sequence_first: Option<u64>,
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

impl Cursor {
    /// A new client's state, before login.
    pub(crate) fn new(
        shared: Arc<Shared>,
        rt: Arc<crate::runtime::Runtime>,
        client: PacketStream<ClientStream>,
        peer_host: String,
        id: u32,
        handle: Arc<SessionHandle>,
    ) -> Self {
        Cursor {
            shared,
            rt,
            refused: false,
            client,
            peer_host,
            caps: CapabilityFlags::empty(),
            cache_metadata: false,
            user: String::new(),
            id,
            handle,
            shown_backends: Vec::new(),
            want: SessionState::default(),
            status: mysql_common::constants::StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits(),
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
            mark: crate::observe::Mark::default(),
        }
    }

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

    /// Tells other sessions which backend connections the statements hold now (the routed
    /// path: the session adds its passthrough connection itself, see [`Self::publish_with`]).
    pub(crate) fn publish_backends(&mut self) {
        self.publish_with(None);
    }

    /// Publishes `relay` (the passthrough connection, if any) and the held connections.
    /// Compares without allocating, writes only on a change.
    pub(crate) fn publish_with(&mut self, relay: Option<&PooledConn>) {
        let held = self.conns.held.iter().map(|h| &h.conn);
        publish(
            &self.handle,
            &mut self.shown_backends,
            relay.into_iter().chain(held),
        );
    }

    /// COM_RESET_CONNECTION's part of the executor: the transaction, locks, prepared
    /// statements and held connections go; the variables go back to `initial` (what the
    /// handshake implied); the schema stays.
    pub(crate) async fn reset(&mut self, initial: &Vars) {
        self.txn_begin = None;
        self.txn_plain = None;
        self.xa_gtrid = None;
        self.savepoints.clear();
        self.table_locks.clear();
        self.statements = Default::default();
        self.release_conns(true).await;
        self.want.vars = initial.clone();
        self.want.last_insert_id = 0;
        self.status = mysql_common::constants::StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits();
    }
}
