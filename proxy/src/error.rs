//! The one error type of the proxy. Every error that can reach a client carries the MySQL error
//! code and SQLSTATE it is sent with, so a driver sees the same codes it would see from a server.

use std::io;

/// What went wrong, and whether the client session can go on after it has been reported.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An error answered to the client as an ERR packet; the session goes on.
    #[error("ERROR {code} ({}): {message}", String::from_utf8_lossy(state))]
    Reply {
        code: u16,
        state: [u8; 5],
        message: String,
    },
    /// Same as `Reply`, but the session ends after the ERR packet is sent (auth failures,
    /// malformed or oversized packets).
    #[error(
        "ERROR {code} ({}): {message} (closing session)",
        String::from_utf8_lossy(state)
    )]
    Fatal {
        code: u16,
        state: [u8; 5],
        message: String,
    },
    /// The client went away or its socket failed: nothing can be sent any more.
    #[error("client i/o: {0}")]
    ClientIo(io::Error),
    /// The backend connection broke (closed, reset, or sent bytes we cannot frame). The
    /// connection is discarded and the client gets [`Error::lost_backend`].
    #[error("backend i/o: {0}")]
    BackendIo(io::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Code and SQLSTATE of "lost connection to backend" (see [`Error::lost_backend`]).
pub const LOST_BACKEND: (u16, [u8; 5]) = (1430, *b"HY000");

impl Error {
    pub fn reply(code: u16, state: &[u8; 5], message: impl Into<String>) -> Self {
        Error::Reply {
            code,
            state: *state,
            message: message.into(),
        }
    }

    pub fn fatal(code: u16, state: &[u8; 5], message: impl Into<String>) -> Self {
        Error::Fatal {
            code,
            state: *state,
            message: message.into(),
        }
    }

    /// 1045 (28000), the message MySQL itself uses.
    pub fn access_denied(user: &str, host: &str, using_password: bool) -> Self {
        let yes = if using_password { "YES" } else { "NO" };
        Self::fatal(
            1045,
            b"28000",
            format!("Access denied for user '{user}'@'{host}' (using password: {yes})"),
        )
    }

    /// A router refusal (a `RouterError`: its code, SQLSTATE and message) as the client's error.
    pub fn refusal(e: &shoal_router::RouterError) -> Self {
        let mut state = [b'H', b'Y', b'0', b'0', b'0'];
        let s = e.sqlstate().as_bytes();
        if s.len() == 5 {
            state.copy_from_slice(s);
        }
        Self::reply(e.code(), &state, e.message())
    }

    /// 1049 (42000).
    pub fn unknown_database(db: &str) -> Self {
        Self::reply(1049, b"42000", format!("Unknown database '{db}'"))
    }

    /// 1203 (42000): the user already has `users[].max_connections` sessions.
    pub fn too_many_user_connections(user: &str) -> Self {
        Self::fatal(
            1203,
            b"42000",
            format!("User {user} already has more than 'max_user_connections' active connections"),
        )
    }

    /// 3159 (HY000): a plain connection while `server.tls.required` is set (MySQL's message for
    /// require_secure_transport).
    pub fn insecure_transport() -> Self {
        Self::fatal(
            3159,
            b"HY000",
            "Connections using insecure transport are prohibited while --require_secure_transport=ON.",
        )
    }

    /// 1040 (08004): beyond `max_connections`.
    pub fn too_many_connections() -> Self {
        Self::fatal(1040, b"08004", "Too many connections")
    }

    /// 1047 (08S01): a command we do not implement; the session goes on.
    pub fn unknown_command(cmd: u8) -> Self {
        Self::reply(1047, b"08S01", format!("Unknown command 0x{cmd:02x}"))
    }

    /// A datanode's reply to something Shoal sent on the client's behalf (a BEGIN, a
    /// transaction's start), its message prefixed with the datanode it came from; any other
    /// error as it is.
    pub fn on_datanode(self, datanode: &str) -> Self {
        match self {
            Error::Reply {
                code,
                state,
                message,
            } => Error::Reply {
                code,
                state,
                message: format!("datanode {datanode}: {message}"),
            },
            e => e,
        }
    }

    /// The backend died while serving the statement. Not 2013: codes 2000-2999 are the
    /// client library's own, and libmariadb (the `mariadb` CLI) reads a server sending one as
    /// a malformed packet (2027); 1430 is what MariaDB's FEDERATED engine says of a remote
    /// server failing mid-query.
    pub fn lost_backend() -> Self {
        Self::reply(
            LOST_BACKEND.0,
            &LOST_BACKEND.1,
            "Lost connection to backend server during query",
        )
    }

    /// 1429 (HY000), ER_CONNECT_TO_FOREIGN_DATA_SOURCE: no backend connection could be opened
    /// (not 2003, a client-side code: see [`Error::lost_backend`]).
    pub fn backend_unreachable(addr: &str, why: impl std::fmt::Display) -> Self {
        Self::reply(
            1429,
            b"HY000",
            format!("Can't connect to backend server on '{addr}' ({why})"),
        )
    }

    /// 1040 (08004): the pool stayed exhausted for the whole acquire timeout.
    pub fn pool_timeout(waited_ms: u64, max_size: usize) -> Self {
        Self::reply(
            1040,
            b"08004",
            format!(
                "Too many connections: no backend connection became free within {waited_ms} ms \
                 (pool max_size {max_size})"
            ),
        )
    }

    /// 1040 (08004): the session was not admitted to the backend pools in time.
    pub fn admission_timeout(waited_ms: u64, sessions: usize) -> Self {
        Self::reply(
            1040,
            b"08004",
            format!(
                "Too many connections: not admitted to the backend pools within {waited_ms} ms \
                 ({sessions} sessions may hold backend connections at once; raise pool.max)"
            ),
        )
    }

    /// 1153 (08S01): a client packet larger than `max_allowed_packet`.
    pub fn packet_too_large() -> Self {
        Self::fatal(
            1153,
            b"08S01",
            "Got a packet bigger than 'max_allowed_packet' bytes",
        )
    }

    /// 1047 (08S01) and close: bytes that are not a well-formed packet.
    pub fn malformed(what: impl std::fmt::Display) -> Self {
        Self::fatal(1047, b"08S01", format!("Malformed packet: {what}"))
    }

    /// 1243 (HY000): COM_STMT_* with an id this session does not hold.
    pub fn unknown_statement(id: u32, cmd: &str) -> Self {
        Self::reply(
            1243,
            b"HY000",
            format!("Unknown prepared statement handler ({id}) given to {cmd}"),
        )
    }

    /// The MySQL code, SQLSTATE and message to put in an ERR packet, if this error has one.
    pub fn as_reply(&self) -> Option<(u16, &[u8; 5], &str)> {
        match self {
            Error::Reply {
                code,
                state,
                message,
            }
            | Error::Fatal {
                code,
                state,
                message,
            } => Some((*code, state, message)),
            Error::ClientIo(_) => None,
            // Where nothing more is known (see `backend::interrupt::stalled_error`).
            Error::BackendIo(e) if is_timeout(e) => Some((
                LOST_BACKEND.0,
                &LOST_BACKEND.1,
                "Lost connection to backend server during query (query_timeout exceeded and the \
                 server did not answer KILL QUERY: the statement's outcome there is unknown)",
            )),
            Error::BackendIo(_) => Some((
                LOST_BACKEND.0,
                &LOST_BACKEND.1,
                "Lost connection to backend server during query",
            )),
        }
    }

    /// Whether the client session must end after this error.
    pub fn ends_session(&self) -> bool {
        matches!(self, Error::Fatal { .. } | Error::ClientIo(_))
    }
}

/// The i/o error of a read whose statement ran past its deadline on a server that did not
/// answer the KILL (or not after it): the connection is dropped as broken (raised by
/// `backend::interrupt`).
#[derive(Debug)]
pub struct StatementTimeout;

impl std::fmt::Display for StatementTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("query_timeout exceeded and the server did not answer KILL QUERY within 2 s")
    }
}

impl std::error::Error for StatementTimeout {}

/// Whether a backend i/o error is a [`StatementTimeout`].
pub fn is_timeout(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<StatementTimeout>())
}

/// [`is_timeout`] of an error, if it is a backend i/o error.
pub fn error_is_timeout(e: &Error) -> bool {
    matches!(e, Error::BackendIo(io) if is_timeout(io))
}
