//! Interrupting a statement a backend server is running: `KILL QUERY` (or `KILL CONNECTION`)
//! sent on a connection of its own to the same server, for a client's `KILL` of a Shoal
//! session and for `server.query_timeout`.
//!
//! The time limit: a statement's connections are armed with its deadline ([`Limit`]). Reads
//! on an armed connection ([`BackendConn::read_frame`], [`BackendConn::read_packet`]) that are
//! still waiting at the deadline send `KILL QUERY` for the connection's thread, then wait up to
//! [`KILL_LIMIT`] more for the rest of the response: a live server ends the statement with
//! error 1317, which the readers pass on as 1969 ([`TIMED_OUT`]), the error MariaDB's own
//! `max_statement_time` gives, and the connection serves on. A server that cannot be reached
//! in [`KILL_LIMIT`] (stopped, partitioned), or that does not answer after the KILL, fails the
//! read with a [`StatementTimeout`](crate::error::StatementTimeout) i/o error: the connection is dropped like a broken one.
//! Such a statement may still run once the server resumes (it has the query), so its outcome
//! is unknown (see `Session::statement_timeout_error`).

use std::sync::Arc;
use std::time::Duration;

use mysql_common::constants::CapabilityFlags;
use tokio::time::Instant;
use tracing::debug;

use crate::backend::conn::{BackendConn, wire_capabilities};
use crate::backend::pool::BackendPool;
use crate::config::BackendSpec;
use crate::error::{Error, Result};
use crate::wire::command::COM_QUERY;

/// How long the KILL of a timed-out statement may take (connecting included), and then how
/// long the killed statement's answer may take to come.
pub const KILL_LIMIT: Duration = Duration::from_secs(2);

/// MariaDB's answer to a statement that ran past `max_statement_time`: what a client gets for
/// a statement Shoal interrupted at `query_timeout`.
pub const TIMED_OUT: (u16, [u8; 5], &str) = (
    1969,
    *b"70100",
    "Query execution was interrupted (max_statement_time exceeded)",
);

/// ER_QUERY_INTERRUPTED: how the server ends a statement `KILL QUERY` interrupted.
pub const QUERY_INTERRUPTED: u16 = 1317;

/// Runs `KILL {word} {thread}` (`word` is `QUERY` or `CONNECTION`) on a connection of its own
/// to `spec`'s server, all within `limit`. `Ok` once the server answered: an error answer
/// (an unknown thread: the statement or connection already ended) counts, the server is alive.
pub async fn kill_thread(
    spec: &BackendSpec,
    wire: CapabilityFlags,
    word: &str,
    thread: u32,
    limit: Duration,
) -> Result<()> {
    let sql = format!("KILL {word} {thread}");
    let run = async {
        let mut c = BackendConn::connect(spec, wire.into(), None, false, limit).await?;
        match c.command(COM_QUERY, sql.as_bytes()).await {
            Ok(_) => Ok(()),
            Err(e @ Error::Reply { .. }) => {
                debug!(thread, error = %e, "backend KILL answered with an error");
                Ok(())
            }
            Err(e) => Err(e),
        }
    };
    match crate::timers::timeout(limit, run).await {
        Ok(r) => r,
        Err(_) => Err(Error::backend_unreachable(&spec.addr(), "KILL timed out")),
    }
}

/// Where a connection's running statement stands against its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Running,
    /// The deadline passed and the server accepted `KILL QUERY`: the statement's answer is
    /// awaited (for [`KILL_LIMIT`]).
    Killed,
    /// The KILL could not be run, or the answer did not come after it.
    Stalled,
}

/// A statement's deadline on one connection, and the pool of its server (where the KILL goes).
pub struct Limit {
    at: Instant,
    pool: Arc<BackendPool>,
    stage: Stage,
}

impl Limit {
    pub fn new(at: Instant, pool: Arc<BackendPool>) -> Self {
        Limit {
            at,
            pool,
            stage: Stage::Running,
        }
    }
}

fn timeout_error() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, crate::error::StatementTimeout)
}

impl BackendConn {
    /// Puts the connection's reads under `limit` (see the module documentation).
    pub fn arm(&mut self, limit: Limit) {
        self.limit = Some(limit);
    }

    /// Lifts the time limit (the statement is over).
    pub fn disarm(&mut self) {
        self.limit = None;
    }

    /// Whether the ERR `code` ends a statement Shoal interrupted at its deadline: then the
    /// client gets [`TIMED_OUT`] instead.
    pub fn timed_out(&self, code: u16) -> bool {
        code == QUERY_INTERRUPTED
            && self
                .limit
                .as_ref()
                .is_some_and(|l| l.stage == Stage::Killed)
    }

    /// The next frame of the response, under the connection's time limit if it has one.
    pub async fn read_frame(&mut self) -> std::io::Result<crate::wire::packet::FrameHeader> {
        // Without a limit, or with the frame already buffered: no timer.
        if self.limit.is_none() || self.io.has_buffered_frame() {
            return self.io.next_frame().await;
        }
        loop {
            let at = self.deadline();
            if let Ok(r) = crate::timers::timeout_at(at, self.io.next_frame()).await {
                return r;
            }
            // The reads are cancel-safe: nothing read so far is lost.
            self.expire().await?;
        }
    }

    /// The next packet of the response, under the connection's time limit if it has one.
    pub async fn read_packet(&mut self) -> std::io::Result<crate::wire::packet::PacketInfo> {
        if self.limit.is_none() || self.io.has_buffered_frame() {
            return self.io.next_packet().await;
        }
        loop {
            let at = self.deadline();
            if let Ok(r) = crate::timers::timeout_at(at, self.io.next_packet()).await {
                return r;
            }
            self.expire().await?;
        }
    }

    fn deadline(&self) -> Instant {
        self.limit.as_ref().map_or_else(Instant::now, |l| l.at)
    }

    /// The deadline passed with the statement still running: KILL it (once), and give its
    /// answer [`KILL_LIMIT`] to come; a server that cannot be reached, or does not answer
    /// then, fails the read.
    async fn expire(&mut self) -> std::io::Result<()> {
        let Some(limit) = self.limit.as_mut() else {
            return Err(timeout_error());
        };
        if limit.stage != Stage::Running {
            limit.stage = Stage::Stalled;
            return Err(timeout_error());
        }
        let pool = limit.pool.clone();
        let wire = self.caps & wire_capabilities();
        // Boxed: a KILL opens a connection, whose reads are these reads (a recursive future).
        let kill = kill_thread(pool.spec(), wire, "QUERY", self.thread_id, KILL_LIMIT);
        let killed = Box::pin(kill).await;
        let limit = self.limit.as_mut().expect("armed above");
        match killed {
            Ok(()) => {
                debug!(thread = self.thread_id, "query_timeout: statement killed");
                limit.stage = Stage::Killed;
                limit.at = Instant::now() + KILL_LIMIT;
                Ok(())
            }
            Err(e) => {
                debug!(thread = self.thread_id, error = %e, "query_timeout: KILL failed");
                limit.stage = Stage::Stalled;
                Err(timeout_error())
            }
        }
    }
}

/// What the client gets for a statement whose server did not answer the KILL at
/// `query_timeout` (its connection is dropped): a read outside a transaction changed nothing,
/// and gets [`TIMED_OUT`] as from MariaDB; anything else gets 1430 (lost connection) saying
/// what is known. A write is not known to have failed: the server has it, and may still run
/// it when it resumes, so the client must not take it as not applied. A transaction on that
/// connection is gone (its server rolls it back when it sees the connection closed).
pub fn stalled_error(where_: &str, read: bool, in_transaction: bool) -> Error {
    if read && !in_transaction {
        let (code, state, message) = TIMED_OUT;
        return Error::reply(code, &state, message);
    }
    let outcome = if read {
        String::new()
    } else {
        format!(
            "; the statement's outcome on {where_} is unknown (it may still take effect when \
             the server resumes)"
        )
    };
    let txn = if in_transaction {
        "; the transaction was rolled back"
    } else {
        ""
    };
    let (code, state) = crate::error::LOST_BACKEND;
    Error::reply(
        code,
        &state,
        format!(
            "Lost connection to backend server during query (query_timeout exceeded and \
             {where_} did not answer KILL QUERY{outcome}{txn})"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{error_is_timeout, is_timeout};

    #[test]
    fn stalled_statements_say_what_is_known() {
        let code = |e: Error| e.as_reply().map(|(c, _, m)| (c, m.to_string())).unwrap();
        assert_eq!(code(stalled_error("datanode dn1", true, false)).0, 1969);
        let (c, m) = code(stalled_error("datanode dn1", false, false));
        assert_eq!(c, 1430);
        assert!(m.contains("outcome on datanode dn1 is unknown"), "{m}");
        assert!(!m.contains("rolled back"), "{m}");
        let (c, m) = code(stalled_error("datanode dn2", true, true));
        assert_eq!(c, 1430);
        assert!(m.contains("transaction was rolled back"), "{m}");
        assert!(!m.contains("outcome"), "{m}");
    }

    #[test]
    fn timeouts_are_told_from_other_io_errors() {
        assert!(is_timeout(&timeout_error()));
        assert!(!is_timeout(&std::io::Error::other("reset")));
        assert!(error_is_timeout(&Error::BackendIo(timeout_error())));
        assert!(!error_is_timeout(&Error::lost_backend()));
    }
}
