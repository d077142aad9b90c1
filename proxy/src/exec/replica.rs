//! Which server of a datanode's datahost a statement's connection goes to: the primary, or
//! (for a plain read outside a transaction) a server of the read set chosen by the datahost's
//! balance mode ([`crate::backend::balance`]), subject to read-your-writes. The router says
//! whether a statement may read from a replica ([`shoal_router::sql::readwrite`]); the session
//! adds what only it knows (an open transaction, pinned connections, its last writes).

use std::time::Duration;

use shoal_router::config::{Balance, ReadYourWrites};
use shoal_router::plan::{ReadWant, Server};
use shoal_router::sql::readwrite::{ReadRoute, read_route};
use shoal_router::topology::DatanodeId;
use tracing::debug;

use super::connset::Want;
use super::single::Relayed;
use super::{AUTOCOMMIT, IN_TRANS, Use};
use crate::backend::pool::PooledConn;
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::exec::relay::{Expect, Outcome};
use crate::runtime::routing::Routing;

/// 1429 (ER_CONNECT_TO_FOREIGN_DATA_SOURCE, as for any unreachable backend: 2003 is a client
/// library's code, which libmariadb reports as a malformed packet): writes (and reads with
/// nowhere else to go) on a datanode whose primary is down.
fn primary_down(datanode: &str, datahost: &str, address: &str) -> Error {
    Error::reply(
        1429,
        b"HY000",
        format!(
            "datanode {datanode}: the primary {address} of datahost {datahost} is down \
             (health check); statements that need it fail until it is back"
        ),
    )
}

impl Cursor {
    /// The router's read/write decision for `sql`, when something reads it: a datahost
    /// balances reads, or the session's XA transaction notes which branches may write.
    pub(super) fn read_route_of(
        &self,
        routing: &Routing,
        mode: shoal_router::sql::SqlMode,
        sql: &str,
    ) -> Option<ReadRoute> {
        (self.rt.backends.any_read_balancing() || self.xa_tracking(routing))
            .then(|| read_route(sql, mode, routing.router.server_version()))
    }

    /// Takes the statement plan's want: the server the statement goes to, whether it counts
    /// as a write for read-your-writes, and whether its XA branch may write.
    pub(super) fn apply_want(&mut self, want: ReadWant) {
        self.conns.want = match want.server {
            Server::Primary => Want::Primary,
            Server::Replica { hinted } => Want::Read { hinted },
        };
        self.conns.writing = want.writes;
        self.conns.maybe_writes = want.maybe_writes;
    }

    /// Whether the session is inside a transaction (or has autocommit off).
    pub(super) fn in_transaction_now(&self) -> bool {
        self.txn_begin.is_some()
            || self.conns.in_transaction()
            || self.status & AUTOCOMMIT == 0
            || self.status & IN_TRANS != 0
    }

    /// The server datanode `dn`'s connection should be on for the running statement.
    pub(super) fn target_server(&mut self, routing: &Routing, dn: DatanodeId) -> Result<usize> {
        let node = &routing.topology.datanodes[dn];
        let dh = node.datahost;
        let in_transaction = self.in_transaction_now();
        // Borrowed field by field, not cloned: an Arc clone per statement is a write to a
        // counter every session's statements share.
        let backends = &self.rt.backends;
        let host = &backends.hosts[dh];
        let primary = host.primary();
        if let Want::Read { hinted } = self.conns.want
            && host.has_replicas()
            && !in_transaction
        {
            let balance = match host.balance {
                Balance::PrimaryOnly if hinted || backends.reads_leave_primary(dh) => {
                    Some(Balance::RoundRobin)
                }
                Balance::PrimaryOnly => None,
                b => Some(b),
            };
            let recent_write = match host.read_your_writes {
                ReadYourWrites::PrimaryAfterWrite(window) if !hinted => self
                    .conns
                    .last_write(dh)
                    .is_some_and(|w| w.at.elapsed() < window),
                _ => false,
            };
            if let Some(balance) = balance
                && !recent_write
                && let Some(s) = backends.pick_read(dh, balance, self.conns.avoid)
            {
                return Ok(s);
            }
        }
        if let Some(e) = backends.primary_refusal(dh, &node.name) {
            return Err(e);
        }
        if !backends.servers[primary].health.is_up() {
            return Err(primary_down(
                &node.name,
                &host.name,
                &backends.servers[primary].address,
            ));
        }
        Ok(primary)
    }

    /// Whether a read on `server` must first wait there for the session's last write on its
    /// datahost (causal reads on a replica that has not been seen to apply it): what
    /// [`Self::causal_ready`] then does.
    pub(super) fn causal_wait_pending(&mut self, server: usize) -> bool {
        self.causal_wait(server).is_some()
    }

    /// [`Self::causal_wait_pending`], with what the wait needs: the datahost and its timeout.
    fn causal_wait(&mut self, server: usize) -> Option<(usize, std::time::Duration)> {
        let backends = &self.rt.backends;
        let dh = backends.servers[server].datahost;
        let host = &backends.hosts[dh];
        let ReadYourWrites::Causal(timeout) = host.read_your_writes else {
            return None;
        };
        if server == host.primary() || matches!(self.conns.want, Want::Read { hinted: true }) {
            return None;
        }
        self.conns
            .last_write(dh)
            .is_some_and(|w| !w.applied_on.contains(&server))
            .then_some((dh, timeout))
    }

    /// Causal reads: before reading on replica `server`, waits there (up to the datahost's
    /// timeout) for the GTID of the session's last write on its datahost. `false`: the replica
    /// has not applied it in time (the read goes to the primary instead).
    pub(super) async fn causal_ready(&mut self, server: usize, conn: &mut PooledConn) -> bool {
        let Some((dh, timeout)) = self.causal_wait(server) else {
            return true;
        };
        let Some(gtid) = self.conns.last_write(dh).and_then(|w| w.gtid.clone()) else {
            // The server did not say which GTID the write committed (binlog or GTID tracking
            // off, or a write that changed nothing): only the primary surely has it.
            return false;
        };
        let secs = timeout.as_secs_f64();
        let set = gtid.replace('\'', "");
        // Both answer 0 once the replica has applied the GTID (set), another value on timeout.
        let sql = if conn.info.is_mysql() {
            format!("SELECT WAIT_FOR_EXECUTED_GTID_SET('{set}', {secs:.3})")
        } else {
            format!("SELECT MASTER_GTID_WAIT('{set}', {secs:.3})")
        };
        let limit = timeout + Duration::from_secs(1);
        let done = crate::timers::timeout(limit, conn.query_value(&sql)).await;
        let ok = matches!(&done, Ok(Ok(Some(v))) if v == "0");
        debug!(server, %gtid, ok, "causal read: waited for the session's last write");
        if ok && let Some(w) = self.conns.last_write(dh) {
            w.applied_on.push(server);
        }
        ok
    }

    /// Whether the running statement, failing on its server before anything reached the
    /// client, runs once more on another: a read (`Want::Read`), outside any transaction.
    pub(super) fn read_may_retry(&self) -> bool {
        matches!(self.conns.want, Want::Read { .. }) && !self.in_transaction_now()
    }

    /// Runs a read on `dn` (the client's command, or `sql`); a read that fails on its server
    /// before anything reached the client is retried once on another server
    /// ([`Self::read_may_retry`]).
    pub(super) async fn run_read_on(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
        how: Use,
        sql: Option<&str>,
        expect: Expect,
        reply_seq: u8,
    ) -> Result<Option<Outcome>> {
        let retry = self.read_may_retry();
        let ran = self
            .run_on_attempt(routing, dn, how, sql, expect, reply_seq, retry)
            .await?;
        match ran {
            Relayed::Unsent { server } => {
                debug!(server, "read failed on its server: retried on another");
                self.conns.avoid = Some(server);
                self.run_on(routing, dn, how, sql, expect, reply_seq).await
            }
            ran => Ok(ran.outcome()),
        }
    }
}

impl Cursor {
    /// `SHOW SHOAL BACKENDS`: one row per server ([`BACKEND_COLUMNS`]). Without the router,
    /// the one backend, which no monitor watches.
    pub(crate) fn backend_rows(&self) -> Vec<Vec<Option<String>>> {
        // The current configuration's servers, whichever snapshot this session is on.
        let rt = self.shared.runtime.load();
        let b = &rt.backends;
        if b.servers.is_empty() {
            let (total, idle) = rt.pool.counts();
            return vec![vec![
                None,
                Some(rt.pool.spec().addr()),
                Some("primary".to_string()),
                Some("not monitored".to_string()),
                None,
                Some(total.saturating_sub(idle).to_string()),
                Some(idle.to_string()),
                None,
                None,
            ]];
        }
        b.servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let host = &b.hosts[s.datahost];
                let h = &s.health;
                let for_lost_primary = b.serves_for_lost_primary(i);
                let state = if !h.is_up() {
                    "down"
                } else if let Some(decided) = b.decision_state(i) {
                    decided
                } else if for_lost_primary {
                    "up, serving reads while the primary is down"
                } else if i != host.primary() && !h.replica_ok(host.health.max_replication_lag) {
                    "up, not in the read set"
                } else {
                    "up"
                };
                let lag = if for_lost_primary {
                    Some(lost_primary_lag(b, s.datahost, h.last_known_lag()))
                } else {
                    h.lag().map(|l| l.to_string())
                };
                let (total, idle) = s.pool.counts();
                let last = h.last_check().map(unix_time);
                vec![
                    Some(host.name.clone()),
                    Some(s.address.clone()),
                    Some(b.role(i).to_string()),
                    Some(state.to_string()),
                    lag,
                    Some(total.saturating_sub(idle).to_string()),
                    Some(idle.to_string()),
                    Some(h.errors().to_string()),
                    last,
                ]
            })
            .collect()
    }
}

/// `SHOW SHOAL BACKENDS`' columns.
pub(crate) const BACKEND_COLUMNS: [&str; 9] = [
    "datahost",
    "address",
    "role",
    "state",
    "lag",
    "in_use",
    "idle",
    "errors",
    "last_check",
];

/// A time as `SHOW SHOAL BACKENDS` shows it: Unix seconds with milliseconds.
fn unix_time(t: std::time::SystemTime) -> String {
    let ms = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// The lag of a replica serving reads while datahost `dh`'s primary is down: unknown (it has
/// what it received before the primary went), with since when and the last lag known.
fn lost_primary_lag(b: &crate::backend::balance::Backends, dh: usize, last: Option<u64>) -> String {
    let primary = &b.servers[b.primary(dh)].health;
    let mut text = String::from("unknown, primary down");
    if let Some(since) = primary.unreachable_since() {
        let secs = since.elapsed().map_or(0.0, |d| d.as_secs_f64());
        text.push_str(&format!(" since {} ({secs:.1} s)", unix_time(since)));
    }
    if let Some(l) = last {
        text.push_str(&format!("; lag {l} s before"));
    }
    text
}
