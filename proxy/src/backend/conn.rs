//! One connection from the proxy to a backend server: the client side of the handshake
//! (mysql_native_password and caching_sha2_password, including the RSA full-auth path over a
//! plain connection, so MySQL 8 backends work too) and the internal commands the proxy sends on
//! its own behalf (replaying session state, resets, pings).

use std::time::{Duration, Instant};

use mysql_common::constants::{CapabilityFlags, MariadbCapabilities};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthPlugin, HandshakePacket, HandshakeResponse};
use mysql_common::proto::{MyDeserialize, MySerialize};
use tokio::net::TcpStream;
use tracing::debug;

use crate::backend::state::{SessionState, Tracked};
use crate::backend::stmt_cache::StmtCache;
use crate::backend::tls::{self, BackendStream};
use crate::config::{BackendSpec, BackendTls};
use crate::error::{Error, Result};
use crate::wire::Wire;
use crate::wire::command::{
    COM_INIT_DB, COM_PING, COM_QUERY, COM_RESET_CONNECTION, COM_SET_OPTION,
};
use crate::wire::messages::{parse_err, read_lenenc_bytes};
use crate::wire::packet::PacketStream;
use crate::wire::response::{Event, Expect, ResponseReader};

/// Capabilities that change the bytes of responses. A backend connection must have exactly the
/// client's choice of these, so its responses can be forwarded untouched; pools keep
/// connections apart by this subset.
pub fn wire_capabilities() -> CapabilityFlags {
    CapabilityFlags::CLIENT_DEPRECATE_EOF
        | CapabilityFlags::CLIENT_FOUND_ROWS
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
        | CapabilityFlags::CLIENT_IGNORE_SPACE
}

/// Capabilities every backend connection asks for. SESSION_TRACK is how the proxy learns what a
/// statement changed in the session; it is stripped from OK packets for clients that did not
/// negotiate it.
fn base_capabilities() -> CapabilityFlags {
    CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_LONG_FLAG
        | CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_SESSION_TRACK
}

/// Turns on the trackers that report everything a client statement can change in its session.
const ENABLE_TRACKING: &str = "SET SESSION session_track_system_variables='*', \
     SESSION session_track_schema=ON, SESSION session_track_state_change=ON";

/// What the backend said in its handshake, kept to build the proxy's own handshake.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    pub version: Vec<u8>,
    pub capabilities: CapabilityFlags,
    /// MariaDB's extended capabilities the server offered (none from MySQL).
    pub mariadb: MariadbCapabilities,
    pub collation: u8,
}

impl ServerInfo {
    /// A MySQL server, not MariaDB: its GTIDs, GTID wait and replica status differ.
    pub fn is_mysql(&self) -> bool {
        !self
            .version
            .windows(7)
            .any(|w| w.eq_ignore_ascii_case(b"MariaDB"))
    }

    pub fn version_number(&self) -> Option<u32> {
        version_number(&self.version)
    }

    /// The statement that shows the server's replication source: MySQL 8.4 removed `SHOW
    /// SLAVE STATUS` (8.0.22 added `SHOW REPLICA STATUS`); MariaDB keeps it in every version.
    pub fn replica_status_query(&self) -> &'static str {
        if self.is_mysql() && self.version_number().is_some_and(|v| v >= 80022) {
            "SHOW REPLICA STATUS"
        } else {
            "SHOW SLAVE STATUS"
        }
    }
}

/// The version number executable comments are compared with (`10.11.6-MariaDB` -> 101106,
/// `8.0.36` -> 80036), from the version string a backend announces (MariaDB before 11 may
/// prefix `5.5.5-`).
pub fn version_number(announced: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(announced).ok()?;
    let s = s.strip_prefix("5.5.5-").unwrap_or(s);
    let mut parts = s.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    let patch: u32 = parts.next()?.parse().ok()?;
    (minor < 100 && patch < 100).then_some(major * 10_000 + minor * 100 + patch)
}

pub struct BackendConn {
    pub io: PacketStream<BackendStream>,
    /// Our id for this connection (unique in the process), used for session affinity.
    pub id: u64,
    /// The backend's connection id (what `CONNECTION_ID()` returns).
    pub thread_id: u32,
    /// Capabilities negotiated with the backend.
    pub caps: CapabilityFlags,
    /// MARIADB_CLIENT_CACHE_METADATA is on: column counts carry a "metadata follows" byte
    /// and an execute leaves out the definitions this connection already sent for the
    /// statement. Only asked for sessions whose client negotiated it and whose prepared
    /// statements are the backend's own (quick mode): the server's memory of what it sent
    /// must be the client's.
    pub cache_metadata: bool,
    /// Metadata caching was asked for when it was opened (the pool matches sessions on this,
    /// not on what the server granted, so that a server without it does not churn the pool).
    pub cache_metadata_asked: bool,
    /// The state this connection is in now.
    pub state: SessionState,
    /// Session tracking is on: responses report state changes.
    pub tracking: bool,
    /// Why it is not, when it is not (reported at startup).
    pub tracking_refused: Option<String>,
    pub last_used: Instant,
    pub info: ServerInfo,
    /// Statements prepared here for the router's prepared statements, kept across sessions.
    pub stmts: StmtCache,
    /// Status flags of the last response read on it (IN_TRANS and AUTOCOMMIT are what count):
    /// every reader of a response records them ([`Self::note_response`]), so the pool can
    /// refuse a connection still inside a transaction, whoever started it.
    pub status: u16,
    /// The running statement's deadline (`server.query_timeout`), while it runs: the reads
    /// of its response are bounded by it (see `backend::interrupt`).
    pub limit: Option<crate::backend::interrupt::Limit>,
    /// The core whose event loop its socket is registered with (see `crate::cores`).
    pub core: u16,
    /// The last error read on it that ends (or may end) the server's transaction here
    /// ([`super::txn_errors`]), kept until the session's transaction takes it into account
    /// (`exec::fate`): whoever read the response, the session learns it.
    pub txn_error: Option<u16>,
    /// Set by the cross-server deadlock detector before it KILLs this connection's statement
    /// (`KILL QUERY`): the server's 1317 is then the 1213 MariaDB gives a deadlock victim,
    /// and the session's transaction ends as after one ([`Self::deadlock_victim_error`]).
    pub deadlock_victim: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// ER_LOCK_DEADLOCK, as MariaDB words it.
pub const DEADLOCK: (u16, [u8; 5], &str) = (
    1213,
    *b"40001",
    "Deadlock found when trying to get lock; try restarting transaction",
);

use super::interrupt::QUERY_INTERRUPTED;

const IN_TRANS: u16 = mysql_common::constants::StatusFlags::SERVER_STATUS_IN_TRANS.bits();
const AUTOCOMMIT: u16 = mysql_common::constants::StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits();

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn io_err(e: std::io::Error) -> Error {
    Error::BackendIo(e)
}

fn server_err(payload: &[u8]) -> Error {
    match parse_err(payload) {
        Some((code, state, msg)) => Error::Reply {
            code,
            state,
            message: String::from_utf8_lossy(msg).into_owned(),
        },
        None => Error::BackendIo(std::io::Error::other("malformed ERR packet from backend")),
    }
}

fn protocol(what: &str) -> Error {
    Error::BackendIo(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        what.to_string(),
    ))
}

/// How the config asked for TLS, for error messages.
fn tls_setting(mode: &BackendTls) -> String {
    match mode {
        BackendTls::Off => "tls: off".into(),
        BackendTls::Required => "tls: required".into(),
        BackendTls::VerifyCa(ca) => format!("tls: verify_ca (tls_ca {ca})"),
    }
}

/// Puts TLS on a connection that has just sent its SSL request.
async fn start_tls(
    io: PacketStream<BackendStream>,
    spec: &BackendSpec,
    config: std::sync::Arc<rustls::ClientConfig>,
) -> Result<PacketStream<BackendStream>> {
    let (stream, unread) = io.into_parts();
    let BackendStream::Plain(tcp) = stream else {
        return Err(protocol("TLS requested twice"));
    };
    if !unread.is_empty() {
        return Err(protocol("backend sent data before the TLS handshake"));
    }
    let name = tls::server_name(&spec.host).map_err(|e| protocol(&e))?;
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, tls::TlsSocket::new(tcp))
        .await
        .map_err(|e| {
            protocol(&format!(
                "TLS handshake failed ({}): {e}",
                tls_setting(&spec.tls)
            ))
        })?;
    Ok(PacketStream::new(
        BackendStream::Tls(Box::new(stream)),
        usize::MAX,
    ))
}

impl BackendConn {
    /// The character sets this connection is in now (see `backend::charset`).
    pub fn charsets(&self) -> crate::backend::charset::Charsets {
        crate::backend::charset::Charsets::of(&self.state.vars)
    }

    /// `sql` as the bytes this connection's `character_set_client` reads as that text.
    pub fn sql_bytes<'a>(&self, sql: &'a str) -> Result<std::borrow::Cow<'a, [u8]>> {
        if sql.is_ascii() {
            return Ok(std::borrow::Cow::Borrowed(sql.as_bytes()));
        }
        crate::backend::charset::sql_bytes(self.charsets().client(), sql)
    }

    /// An ERR payload this connection sent, its message read in its `character_set_results`.
    fn error_of(&self, payload: &[u8]) -> Error {
        match parse_err(payload) {
            Some((code, state, msg)) => Error::Reply {
                code,
                state,
                message: crate::backend::charset::backend_message(self.charsets().results, msg),
            },
            None => server_err(payload),
        }
    }

    /// Opens and authenticates a connection, then turns session tracking on.
    /// `wire` is the client's choice of [`wire_capabilities`].
    pub async fn connect(
        spec: &BackendSpec,
        wire: Wire,
        schema: Option<&str>,
        multi_statements: bool,
        timeout: Duration,
    ) -> Result<BackendConn> {
        let addr = spec.addr();
        let fut = Self::connect_inner(spec, wire, schema, multi_statements);
        match crate::timers::timeout(timeout, fut).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(Error::BackendIo(e))) => Err(Error::backend_unreachable(&addr, e)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::backend_unreachable(&addr, "connect timed out")),
        }
    }

    async fn connect_inner(
        spec: &BackendSpec,
        wire: Wire,
        schema: Option<&str>,
        multi_statements: bool,
    ) -> Result<BackendConn> {
        let stream = TcpStream::connect(spec.addr()).await.map_err(io_err)?;
        stream.set_nodelay(true).map_err(io_err)?;
        let mut io = PacketStream::new(BackendStream::Plain(stream), usize::MAX);

        io.next_packet().await.map_err(io_err)?;
        let payload = io.packet_payload().into_owned();
        if payload.first() == Some(&0xFF) {
            return Err(server_err(&payload));
        }
        let hs = HandshakePacket::deserialize((), &mut ParseBuf(&payload))
            .map_err(|e| protocol(&format!("bad handshake from backend: {e}")))?;
        let info = ServerInfo {
            version: hs.server_version_ref().to_vec(),
            capabilities: hs.capabilities(),
            mariadb: crate::wire::mariadb_caps(hs.capabilities(), hs.mariadb_ext_capabilities()),
            collation: hs.default_collation(),
        };
        let thread_id = hs.connection_id();
        let status = hs.status_flags().bits();
        let mut nonce = hs.nonce();
        let mut plugin = hs
            .auth_plugin()
            .map(|p| p.into_owned())
            .unwrap_or(AuthPlugin::MysqlNativePassword);
        if !matches!(
            plugin,
            AuthPlugin::MysqlNativePassword | AuthPlugin::CachingSha2Password
        ) {
            plugin = AuthPlugin::MysqlNativePassword;
        }

        let mut want = base_capabilities() | (wire.caps & wire_capabilities());
        let cache_metadata = wire.cache_metadata
            && info
                .mariadb
                .contains(MariadbCapabilities::MARIADB_CLIENT_CACHE_METADATA);
        if cache_metadata {
            // A MariaDB client says so by clearing CLIENT_MYSQL: the server then reads the
            // extended capabilities.
            want.remove(CapabilityFlags::CLIENT_LONG_PASSWORD);
        }
        if multi_statements {
            want |=
                CapabilityFlags::CLIENT_MULTI_STATEMENTS | CapabilityFlags::CLIENT_MULTI_RESULTS;
        }
        let mut caps = want & (hs.capabilities() | CapabilityFlags::CLIENT_CONNECT_WITH_DB);
        let tls_config = tls::client_config(&spec.tls).map_err(|e| protocol(&e))?;
        if tls_config.is_some() {
            if !hs.capabilities().contains(CapabilityFlags::CLIENT_SSL) {
                return Err(protocol(&format!(
                    "the server does not offer TLS, and {} asks for it",
                    tls_setting(&spec.tls)
                )));
            }
            caps |= CapabilityFlags::CLIENT_SSL;
        }
        let pass = spec.password.as_str();
        let data = plugin.gen_data(Some(pass), &nonce);
        let mut scramble = Vec::new();
        if let Some(d) = &data {
            d.serialize(&mut scramble);
        }
        let resp = HandshakeResponse::new(
            Some(scramble),
            (8, 0, 0),
            Some(spec.user.as_bytes()),
            schema.map(str::as_bytes),
            Some(plugin.clone()),
            caps,
            None,
            1 << 30,
        )
        .with_mariadb_ext_capabilities(if cache_metadata {
            MariadbCapabilities::MARIADB_CLIENT_CACHE_METADATA
        } else {
            MariadbCapabilities::empty()
        });
        let mut out = Vec::new();
        resp.serialize(&mut out);
        let mut seq = 1u8;
        if let Some(config) = tls_config {
            // The SSL request is the first 32 bytes of the handshake response (capabilities,
            // max packet, collation, filler); the response itself follows inside TLS.
            io.write_packet(&mut seq, &out[..32]);
            io.flush().await.map_err(io_err)?;
            io = start_tls(io, spec, config).await?;
        }
        let over_tls = matches!(io.get_ref(), BackendStream::Tls(_));
        io.write_packet(&mut seq, &out);
        io.flush().await.map_err(io_err)?;

        loop {
            let p = io.next_packet().await.map_err(io_err)?;
            seq = p.last_seq.wrapping_add(1);
            let payload = io.packet_payload().into_owned();
            match payload.first() {
                Some(0x00) => break,
                Some(0xFF) => return Err(server_err(&payload)),
                Some(0xFE) => {
                    // AuthSwitchRequest: plugin name NUL, then its data.
                    let body = &payload[1..];
                    let nul = body.iter().position(|b| *b == 0).unwrap_or(body.len());
                    plugin = AuthPlugin::from_bytes(&body[..nul]).into_owned();
                    let mut data = body.get(nul + 1..).unwrap_or(&[]).to_vec();
                    if data.last() == Some(&0) {
                        data.pop();
                    }
                    nonce = data;
                    let mut out = Vec::new();
                    match &plugin {
                        AuthPlugin::MysqlNativePassword | AuthPlugin::CachingSha2Password => {
                            if let Some(d) = plugin.gen_data(Some(pass), &nonce) {
                                d.serialize(&mut out);
                            }
                        }
                        AuthPlugin::MysqlClearPassword => {
                            out.extend_from_slice(pass.as_bytes());
                            out.push(0);
                        }
                        other => {
                            return Err(Error::backend_unreachable(
                                &spec.addr(),
                                format!(
                                    "backend asks for unsupported auth plugin {}",
                                    String::from_utf8_lossy(other.as_bytes())
                                ),
                            ));
                        }
                    }
                    io.write_packet(&mut seq, &out);
                    io.flush().await.map_err(io_err)?;
                }
                Some(0x01) => {
                    // AuthMoreData from caching_sha2_password: 3 = fast auth succeeded (an OK
                    // follows), 4 = full auth needed: over TLS the password goes in clear;
                    // without, RSA-encrypted with the server's public key, which we request
                    // (0x02).
                    match payload.get(1) {
                        Some(3) => continue,
                        Some(4) if over_tls => {
                            let mut pw = pass.as_bytes().to_vec();
                            pw.push(0);
                            io.write_packet(&mut seq, &pw);
                            io.flush().await.map_err(io_err)?;
                        }
                        Some(4) => {
                            io.write_packet(&mut seq, &[0x02]);
                            io.flush().await.map_err(io_err)?;
                        }
                        _ => {
                            // The public key we asked for.
                            let key = &payload[1..];
                            let mut pw = pass.as_bytes().to_vec();
                            pw.push(0);
                            for (i, b) in pw.iter_mut().enumerate() {
                                *b ^= nonce[i % nonce.len()];
                            }
                            let enc = mysql_common::crypto::encrypt(&pw, key);
                            io.write_packet(&mut seq, &enc);
                            io.flush().await.map_err(io_err)?;
                        }
                    }
                }
                _ => return Err(protocol("unexpected packet during backend authentication")),
            }
        }

        let mut conn = BackendConn {
            io,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            thread_id,
            caps,
            cache_metadata,
            cache_metadata_asked: wire.cache_metadata,
            state: SessionState {
                schema: schema.map(str::to_string),
                vars: Default::default(),
                multi_statements: caps.contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS),
                last_insert_id: 0,
            },
            tracking: false,
            tracking_refused: None,
            last_used: Instant::now(),
            info,
            stmts: StmtCache::default(),
            status,
            limit: None,
            core: crate::cores::current(),
            txn_error: None,
            deadlock_victim: Default::default(),
        };
        conn.enable_tracking().await?;
        Ok(conn)
    }

    /// Records what a response read with `reader` says of the connection's transaction.
    pub fn note_response(&mut self, reader: &ResponseReader) {
        self.status = reader.status_after(self.status);
        let Some(mut code) = reader.error_code() else {
            return;
        };
        if code == QUERY_INTERRUPTED
            && self
                .deadlock_victim
                .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            code = DEADLOCK.0;
        }
        if super::txn_errors::effect(code).is_some() {
            self.txn_error = Some(code);
        }
    }

    /// Whether error `code`, read now, ends a statement the deadlock detector interrupted:
    /// the client is then given [`DEADLOCK`] instead.
    pub fn deadlock_victim_error(&self, code: u16) -> bool {
        code == QUERY_INTERRUPTED
            && self
                .deadlock_victim
                .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The server said a transaction is open here (or may be: see
    /// [`ResponseReader::status_after`]).
    pub fn in_transaction(&self) -> bool {
        self.status & IN_TRANS != 0
    }

    /// Inside a transaction, or with autocommit off, so that its next statement starts one:
    /// the connection belongs to its session until COMMIT, ROLLBACK or a reset.
    pub fn transactional(&self) -> bool {
        self.in_transaction() || self.status & AUTOCOMMIT == 0
    }

    async fn enable_tracking(&mut self) -> Result<()> {
        if !self.caps.contains(CapabilityFlags::CLIENT_SESSION_TRACK) {
            self.tracking = false;
            self.tracking_refused =
                Some("the server does not offer CLIENT_SESSION_TRACK".to_string());
            return Ok(());
        }
        match self.command(COM_QUERY, ENABLE_TRACKING.as_bytes()).await {
            Ok(_) => {
                if self.info.is_mysql() {
                    // MySQL reports the GTID of a session's commit only when asked (MariaDB's
                    // `last_gtid` comes with the variables). Without it, causal reads wait for
                    // nothing and go to the primary.
                    if let Err(e) = self
                        .command(COM_QUERY, b"SET SESSION session_track_gtids=OWN_GTID")
                        .await
                    {
                        debug!(error = %e, "session_track_gtids refused");
                    }
                }
                self.tracking = true;
                // Enabling the trackers is reported as changes; our baseline starts after it.
                self.state.vars.clear();
                Ok(())
            }
            Err(e @ Error::Reply { .. }) => {
                self.tracking = false;
                self.tracking_refused = Some(format!("{ENABLE_TRACKING}: {e}"));
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Whether `wire` (a client's choice) gives the same response bytes as this connection.
    pub fn wire_matches(&self, wire: Wire) -> bool {
        (self.caps & wire_capabilities()) == (wire.caps & wire_capabilities())
            && self.cache_metadata_asked == wire.cache_metadata
    }

    /// A reader for the response to the command just sent, in this connection's framing.
    pub fn reader(&self, expect: Expect) -> ResponseReader {
        ResponseReader::new(expect, self.caps).metadata_flag(self.cache_metadata)
    }

    /// Sends one command on the proxy's own behalf and reads its response: `Ok` with what it
    /// reported on success, `Error::Reply` with the backend's error, `Error::BackendIo` if the
    /// connection broke. A result set, if any, is read and dropped.
    pub async fn command(&mut self, cmd: u8, arg: &[u8]) -> Result<Tracked> {
        self.io.write_command(cmd, arg);
        self.io.flush().await.map_err(io_err)?;
        let mut tracked = Tracked::default();
        let mut error = None;
        self.drain_response(cmd, &mut tracked, &mut error).await?;
        self.last_used = Instant::now();
        self.state.apply(&tracked);
        match error {
            Some(e) => Err(e),
            None => Ok(tracked),
        }
    }

    /// Reads and drops a whole response to a command that was sent, read as `expect` says
    /// (a statement whose answer is not wanted): `Ok(Some(error))` if it was the backend's
    /// error, `Err` if the connection broke.
    pub async fn discard_response(&mut self, expect: Expect) -> Result<Option<Error>> {
        let mut tracked = Tracked::default();
        let mut error = None;
        self.drain_as(expect, &mut tracked, &mut error).await?;
        self.state.apply(&tracked);
        Ok(error)
    }

    /// Reads a whole response to `cmd` (possibly several results), keeping only what the
    /// session-state blocks and any ERR said.
    async fn drain_response(
        &mut self,
        cmd: u8,
        tracked: &mut Tracked,
        error: &mut Option<Error>,
    ) -> Result<()> {
        let expect = if cmd == COM_QUERY {
            Expect::Results { binary: false }
        } else {
            Expect::Single
        };
        self.drain_as(expect, tracked, error).await
    }

    /// [`Self::drain_response`] for a response read as `expect` says.
    async fn drain_as(
        &mut self,
        expect: Expect,
        tracked: &mut Tracked,
        error: &mut Option<Error>,
    ) -> Result<()> {
        let mut reader = self.reader(expect);
        while !reader.finished() {
            self.read_packet().await.map_err(io_err)?;
            let p = self.io.packet_payload();
            match reader.next(&p)? {
                Event::Ok(ok) | Event::ResultDone { ok: Some(ok), .. } if !ok.state.is_empty() => {
                    tracked.add_block(ok.state);
                }
                Event::Err { .. } => *error = Some(self.error_of(&p)),
                _ => {}
            }
        }
        self.note_response(&reader);
        Ok(())
    }

    /// Runs a query returning one row of one column and gives that value (`None` for NULL).
    /// For the rare reads the proxy needs on its own behalf (e.g. `@@collation_connection`,
    /// which the session trackers do not report after `SET NAMES ... COLLATE`).
    pub async fn query_value(&mut self, sql: &str) -> Result<Option<String>> {
        let row = self.query_named_row(sql).await?;
        Ok(row.and_then(|r| r.into_iter().next()).and_then(|(_, v)| v))
    }

    /// Runs a query and gives every row of its result, values as bytes (`None` for NULL). For
    /// the few small results the proxy reads on its own behalf (`XA RECOVER`, a decision row, a
    /// moved row's columns).
    pub async fn query_rows(&mut self, sql: &str) -> Result<Vec<Vec<Option<Vec<u8>>>>> {
        Ok(self.query_result(sql).await?.1)
    }

    /// Runs a query and gives its first row as (column name, value) pairs (`None` for NULL),
    /// or `None` without rows. For the health monitor's `SHOW SLAVE STATUS`, whose columns
    /// differ between versions and are found by name.
    pub async fn query_named_row(
        &mut self,
        sql: &str,
    ) -> Result<Option<Vec<(String, Option<String>)>>> {
        let (names, rows) = self.query_result(sql).await?;
        Ok(rows.into_iter().next().map(|row| {
            names
                .into_iter()
                .zip(row)
                .map(|(n, v)| (n, v.map(|v| String::from_utf8_lossy(&v).into_owned())))
                .collect()
        }))
    }

    /// Runs a query and reads its whole (small) text result: the column names and every row.
    async fn query_result(
        &mut self,
        sql: &str,
    ) -> Result<(Vec<String>, Vec<Vec<Option<Vec<u8>>>>)> {
        self.io.write_command(COM_QUERY, sql.as_bytes());
        self.io.flush().await.map_err(io_err)?;
        let mut reader = self.reader(Expect::Results { binary: false });
        let mut names = Vec::new();
        let mut rows = Vec::new();
        let mut error = None;
        while !reader.finished() {
            self.read_packet().await.map_err(io_err)?;
            let p = self.io.packet_payload();
            match reader.next(&p)? {
                Event::Err { .. } => error = Some(self.error_of(&p)),
                Event::ColumnDef(mut def) => {
                    // catalog, schema, table, org_table, then the name.
                    let mut name = None;
                    for _ in 0..5 {
                        name = read_lenenc_bytes(&mut def);
                    }
                    names.push(String::from_utf8_lossy(name.unwrap_or(b"")).into_owned());
                }
                Event::Row(mut b) => {
                    let mut row = Vec::with_capacity(names.len());
                    for _ in 0..names.len() {
                        if b.first() == Some(&0xFB) {
                            b = &b[1..];
                            row.push(None);
                        } else {
                            row.push(read_lenenc_bytes(&mut b).map(<[u8]>::to_vec));
                        }
                    }
                    rows.push(row);
                }
                _ => {}
            }
        }
        self.note_response(&reader);
        if let Some(e) = error {
            return Err(e);
        }
        self.last_used = Instant::now();
        Ok((names, rows))
    }

    /// Whether its socket is registered with another core's event loop than the calling
    /// thread's (see [`Self::rehome`]).
    pub fn on_other_core(&self) -> bool {
        self.core != crate::cores::current()
    }

    /// This connection with its socket moved to the calling thread's core's event loop (see
    /// [`BackendStream::rehome`]). An error leaves no connection (the socket is closed).
    pub fn rehome(self) -> std::io::Result<BackendConn> {
        let io = self.io.try_map_stream(BackendStream::rehome)?;
        let core = crate::cores::current();
        Ok(BackendConn { io, core, ..self })
    }

    /// Whether the server closed this idle connection (or sent something unasked, e.g. an
    /// error before closing it): then it must not be used.
    pub fn closed_by_server(&mut self) -> bool {
        self.io.peer_closed_or_spoke()
    }

    /// COM_PING: whether the connection still answers.
    pub async fn ping(&mut self) -> bool {
        self.command(COM_PING, &[]).await.is_ok()
    }

    /// Switches the current schema (COM_INIT_DB).
    pub async fn init_db(&mut self, db: &str) -> Result<()> {
        self.command(COM_INIT_DB, db.as_bytes()).await?;
        self.state.schema = Some(db.to_string());
        Ok(())
    }

    /// COM_RESET_CONNECTION: drops user variables, temporary tables, prepared statements,
    /// locks and any open transaction, and puts system variables back to their defaults, which
    /// also turns our trackers off, so they are enabled again. The schema is kept.
    pub async fn reset(&mut self) -> Result<()> {
        self.command(COM_RESET_CONNECTION, &[]).await?;
        self.stmts.clear();
        self.state.vars.clear();
        self.state.last_insert_id = 0;
        self.enable_tracking().await
    }

    /// Turns multi-statements on or off (COM_SET_OPTION).
    pub async fn set_multi_statements(&mut self, on: bool) -> Result<()> {
        let arg: u16 = if on { 0 } else { 1 };
        self.command(COM_SET_OPTION, &arg.to_le_bytes()).await?;
        self.state.multi_statements = on;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::version_number;

    #[test]
    fn reads_backend_versions() {
        assert_eq!(version_number(b"10.11.6-MariaDB-0+deb12u1"), Some(101106));
        assert_eq!(version_number(b"5.5.5-10.6.12-MariaDB"), Some(100612));
        assert_eq!(version_number(b"8.0.36"), Some(80036));
        assert_eq!(version_number(b"garbage"), None);
    }
}
