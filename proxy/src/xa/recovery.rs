//! Recovery of XA transactions whose coordinator died (or could not finish): at start and
//! every `recovery_interval`, `XA RECOVER` on every server Shoal knows (every datahost's
//! primary and replicas, and the servers a reload removed, until they hold nothing of ours)
//! lists the prepared branches with Shoal's formatID; each transaction is finished as the
//! decision log says (commit), or rolled back after a rollback tombstone is written (no
//! decision: presumed abort). A transaction is left alone until it is older than
//! `recovery_grace` (its gtrid carries its start time) and was already prepared at the
//! previous scan, so that a live coordinator between its last `XA PREPARE` and its decision
//! is not raced (and if it were, the tombstone makes its decision fail: it rolls back,
//! nothing is half committed).
//!
//! Every server is asked because a branch is not always where today's primary is: a failover
//! (followed or external), or a reload that changed an address, leaves it on a server that is
//! no longer a datahost's primary; a decision row deleted while such a branch exists would
//! have it rolled back the day that server is asked again, while the others committed.
//!
//! Where a branch is finished: on a datahost's current primary, and on a server with no
//! replication source. A copy on a server that replicates (MariaDB 10.5+ replicates
//! `XA PREPARE`) is its source's to finish: the source's `XA COMMIT` reaches it by
//! replication, and finishing it there first would stop that replication (the replicated
//! commit would find no branch). Such a copy is counted in doubt until it goes.
//!
//! Every statement has a time limit ([`STATEMENT_TIMEOUT`]): a server that does not answer
//! (stopped, partitioned) is skipped for this scan (and the log kept whole: nothing is
//! collected after a scan that did not hear from every server), the others are finished.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::{error, info, warn};

use super::log::{self, Outcome};
use super::{FORMAT_ID, Xid, gtrid_time, now_ms};
use crate::backend::conn::BackendConn;
use crate::backend::pool::{PooledConn, Wanted};
use crate::config::BackendSpec;
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::wire::command::COM_QUERY;

/// Tombstones are kept at least this long: a coordinator stalled longer than that between
/// its prepares and its decision is not expected.
const MIN_TOMBSTONE_AGE: Duration = Duration::from_secs(3600);

/// The first scan only records what is prepared; the second, this soon after, acts.
const FIRST_RESCAN: Duration = Duration::from_secs(1);

/// The longest any recovery statement (connecting included) may take; past it the server is
/// treated as unreachable for this scan and its connection closed.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(10);

/// The running process as recovery sees it (the process's shared state implements it).
pub trait Process: Send + Sync {
    fn xa(&self) -> &Arc<super::Xa>;
    /// The current configuration snapshot (a reload swaps it between scans).
    fn runtime(&self) -> Arc<Runtime>;
    /// Changes to `true` when the process shuts down.
    fn shutdown(&self) -> tokio::sync::watch::Receiver<bool>;
}

/// Runs recovery until shutdown.
pub async fn run(shared: Arc<dyn Process>) {
    let xa = shared.xa().clone();
    let mut shutdown = shared.shutdown();
    if let Some(pool) = &xa.log_pool {
        let spec = pool.spec().clone();
        tokio::spawn(async move {
            match super::durability::check(&spec).await {
                Ok(found) => {
                    for w in found {
                        warn!(server = %spec.addr(), "the XA decision log's server can lose a committed decision: {w} (or use semi-synchronous replication; see docs/operations.md)");
                    }
                }
                Err(e) => {
                    warn!(server = %spec.addr(), error = %e, "cannot read the XA decision log server's durability settings")
                }
            }
        });
    }
    let mut previous: HashSet<Vec<u8>> = HashSet::new();
    let mut first = true;
    loop {
        match scan(&*shared, &previous).await {
            Ok(seen) => {
                previous = seen;
                *xa.stats.last_run.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((now_ms(), None));
            }
            Err((seen, e)) => {
                previous = seen;
                warn!(error = %e, "XA recovery scan failed; retried at the next interval");
                *xa.stats.last_run.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((now_ms(), Some(e.to_string())));
            }
        }
        let wait = if first {
            FIRST_RESCAN.min(xa.recovery_interval)
        } else {
            xa.recovery_interval
        };
        first = false;
        tokio::select! {
            _ = crate::timers::sleep(wait) => {}
            _ = xa.kick.notified() => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// A server recovery asks, with its own connection for the scan (not a pool's: a server a
/// reload removed has none, and a session may hold every connection of a pool).
struct Target {
    spec: BackendSpec,
    /// A datahost's primary now (its branches are finished here, replicating or not).
    primary: bool,
    /// Removed by a reload: asked until it holds nothing of ours.
    retired: bool,
    conn: Option<BackendConn>,
}

impl Target {
    fn address(&self) -> String {
        self.spec.addr()
    }

    /// Runs `f` on this server's connection (opened if needed), all within
    /// [`STATEMENT_TIMEOUT`]. The connection is closed after any error (a cut-off answer
    /// leaves it unusable). `what` names the statement for the error.
    async fn run<T>(
        &mut self,
        what: &str,
        f: impl AsyncFnOnce(&mut BackendConn) -> Result<T>,
    ) -> Result<T> {
        let addr = self.address();
        let conn = &mut self.conn;
        let spec = &self.spec;
        let work = async {
            if conn.is_none() {
                let wire = crate::backend::pool::typical_client_wire();
                *conn =
                    Some(BackendConn::connect(spec, wire, None, false, STATEMENT_TIMEOUT).await?);
            }
            f(conn.as_mut().expect("connected")).await
        };
        let r = match crate::timers::timeout(STATEMENT_TIMEOUT, work).await {
            Ok(r) => r,
            Err(_) => Err(Error::backend_unreachable(
                &addr,
                format!("no answer to {what} in {STATEMENT_TIMEOUT:?}"),
            )),
        };
        if r.is_err() {
            self.conn = None;
        }
        r
    }

    /// Our prepared branches here, and whether the server has a replication source.
    async fn list(&mut self) -> Result<(Vec<Xid>, bool)> {
        let rows = self
            .run("XA RECOVER", async |c| c.query_rows("XA RECOVER").await)
            .await?;
        let ours = rows.iter().filter_map(|r| our_xid(r)).collect();
        let status = self
            .run("SHOW SLAVE STATUS", async |c| {
                c.query_named_row(c.info.replica_status_query()).await
            })
            .await;
        let status = match status {
            Ok(s) => s,
            // Refused (no SLAVE MONITOR right): taken as replicating, so that its branches
            // are finished only if it is a primary.
            Err(e) if e.as_reply().is_some_and(|(c, _, _)| c != UNREACHABLE) => {
                warn!(server = %self.address(), error = %e, "cannot read the replication status: XA branches here are finished only while it is a datahost's primary");
                return Ok((ours, true));
            }
            Err(e) => return Err(e),
        };
        let replicates = status.is_some_and(|row| {
            row.iter().any(|(n, v)| {
                (n.eq_ignore_ascii_case("Master_Host") || n.eq_ignore_ascii_case("Source_Host"))
                    && v.as_deref().is_some_and(|h| !h.is_empty())
            })
        });
        Ok((ours, replicates))
    }

    /// Runs `sql` (no rows expected).
    async fn execute(&mut self, sql: &str) -> Result<()> {
        self.run(sql, async |c| {
            c.command(COM_QUERY, sql.as_bytes()).await.map(|_| ())
        })
        .await
    }
}

/// The servers one scan asks: every server of the snapshot (deduplicated by address: two
/// datahosts may share one), then the retired ones the snapshot does not list again.
fn targets(xa: &super::Xa, rt: &crate::runtime::Runtime) -> Vec<Target> {
    let backends = &rt.backends;
    let primaries: HashSet<usize> = (0..backends.hosts.len())
        .map(|dh| backends.primary(dh))
        .collect();
    let mut out: Vec<Target> = Vec::new();
    for (s, server) in backends.servers.iter().enumerate() {
        let spec = server.pool.spec().clone();
        match out.iter_mut().find(|t| t.spec.addr() == spec.addr()) {
            Some(t) => t.primary |= primaries.contains(&s),
            None => out.push(Target {
                spec,
                primary: primaries.contains(&s),
                retired: false,
                conn: None,
            }),
        }
    }
    for spec in xa.retired() {
        if !out.iter().any(|t| t.spec.addr() == spec.addr()) {
            out.push(Target {
                spec,
                primary: false,
                retired: true,
                conn: None,
            });
        }
    }
    out
}

/// A connection to the decision log through its own pool, in a clean state.
async fn log_conn(shared: &dyn Process) -> Result<PooledConn> {
    let pool = shared
        .xa()
        .log_pool
        .clone()
        .ok_or_else(|| Error::reply(1399, b"XAE07", "no XA decision log"))?;
    let mut conn = pool
        .acquire(Wanted {
            wire: crate::backend::pool::typical_client_wire(),
            prefer: 0,
            schema: None,
            multi_statements: false,
        })
        .await?;
    crate::backend::pool::align_to(&Default::default(), None, &mut conn).await?;
    Ok(conn)
}

/// Runs `f` on a decision log connection within [`STATEMENT_TIMEOUT`]; the connection goes
/// back to its pool only after success (dropped, it is closed).
async fn with_log<T>(
    shared: &dyn Process,
    f: impl AsyncFnOnce(&mut PooledConn) -> Result<T>,
) -> Result<T> {
    let run = async {
        let mut conn = log_conn(shared).await?;
        ensure_log(shared.xa(), &mut conn).await?;
        let r = f(&mut conn).await?;
        conn.release();
        Ok(r)
    };
    match crate::timers::timeout(STATEMENT_TIMEOUT, run).await {
        Ok(r) => r,
        Err(_) => Err(Error::reply(
            1399,
            b"XAE07",
            format!("the XA decision log did not answer in {STATEMENT_TIMEOUT:?}"),
        )),
    }
}

/// One scan; returns the gtrids seen prepared (for the next scan's "seen before" test), with
/// the scan's first error if it had one. Recovery holds at most one pooled connection at a
/// time (the decision log's); its connections to the servers are its own.
#[allow(clippy::type_complexity)]
async fn scan(
    shared: &dyn Process,
    previous: &HashSet<Vec<u8>>,
) -> std::result::Result<HashSet<Vec<u8>>, (HashSet<Vec<u8>>, Error)> {
    let xa = shared.xa();
    let rt = shared.runtime();
    let mut targets = targets(xa, &rt);
    // Every prepared branch of ours, by gtrid, with the targets holding it; `complete` while
    // every server answered.
    let mut complete = true;
    let mut by_gtrid: BTreeMap<Vec<u8>, Vec<(usize, Xid)>> = BTreeMap::new();
    let mut replicates = vec![false; targets.len()];
    let mut first_error: Option<Error> = None;
    for (i, t) in targets.iter_mut().enumerate() {
        let listed = t.list().await;
        if t.retired && xa.retired_unanswered(&t.spec, listed.is_err()) {
            error!(server = %t.address(), "a server removed by a reload has not answered XA RECOVER for an hour: recovery stops asking it; XA branches prepared there, if any, must be finished by hand (XA RECOVER on it)");
            continue;
        }
        match listed {
            Ok((xids, r)) => {
                replicates[i] = r;
                if t.retired && xids.is_empty() {
                    info!(server = %t.address(), "a server removed by a reload holds no XA branch of ours: recovery stops asking it");
                    xa.forget_retired(&t.spec);
                }
                for x in xids {
                    by_gtrid.entry(x.gtrid.clone()).or_default().push((i, x));
                }
            }
            Err(e) => {
                warn!(server = %t.address(), error = %e, "XA RECOVER failed: this server is skipped until the next scan");
                complete = false;
                first_error.get_or_insert(e);
            }
        }
    }
    let seen: HashSet<Vec<u8>> = by_gtrid.keys().cloned().collect();
    let now = now_ms();
    let grace = xa.recovery_grace.as_millis() as u64;
    let mut in_doubt = 0u64;
    for (gtrid, branches) in &by_gtrid {
        let old = gtrid_time(gtrid).is_some_and(|t| now.saturating_sub(t) >= grace);
        let orphaned = xa.take_orphan(gtrid);
        if !(orphaned || (old && previous.contains(gtrid))) {
            in_doubt += branches.len() as u64;
            continue;
        }
        let decided = with_log(shared, async |c| log::decide_for_recovery(c, gtrid).await).await;
        let (outcome, named) = match decided {
            Ok(o) => o,
            Err(e) => {
                warn!(gtrid = %String::from_utf8_lossy(gtrid), error = %e, "XA recovery cannot read the decision log");
                in_doubt += branches.len() as u64;
                first_error.get_or_insert(e);
                continue;
            }
        };
        let word = match outcome {
            Outcome::Commit => "COMMIT",
            Outcome::Rollback => "ROLLBACK",
        };
        if outcome == Outcome::Commit && complete {
            report_missing(xa, gtrid, &named, branches);
        }
        let mut done = Vec::new();
        for (i, x) in branches {
            let t = &mut targets[*i];
            if !t.primary && replicates[*i] {
                // A replicated copy: its source finishes it (see the module comment).
                warn!(gtrid = %x.gtrid_str(), datanode = %String::from_utf8_lossy(&x.bqual), server = %t.address(), outcome = word, "XA branch prepared on a replicating server that is no datahost's primary: left to replication");
                in_doubt += 1;
                continue;
            }
            let sql = format!("XA {word} {}", x.sql());
            let mut r = t.execute(&sql).await;
            if r.as_ref().is_err_and(is_held) {
                // Listed by XA RECOVER, yet "unknown" to XA COMMIT: a live connection still
                // holds it (a coordinator stuck, or one whose end the server has not seen).
                // Its connection is killed (the branch survives, detached) and it is tried
                // again.
                if kill_holders(t, xa.recovery_grace).await > 0 {
                    crate::timers::sleep(HOLDER_GONE).await;
                    r = t.execute(&sql).await;
                }
            }
            match r {
                Ok(_) => {
                    done.push(format!(
                        "{}@{}",
                        String::from_utf8_lossy(&x.bqual),
                        t.address()
                    ));
                    let counter = match outcome {
                        Outcome::Commit => &xa.stats.recovered_commit,
                        Outcome::Rollback => &xa.stats.recovered_rollback,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    xa.finished
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(gtrid.clone())
                        .or_default()
                        .insert(x.bqual.clone());
                }
                Err(e) => {
                    warn!(gtrid = %x.gtrid_str(), datanode = %String::from_utf8_lossy(&x.bqual), server = %t.address(), outcome = word, error = %e, "XA recovery could not finish a branch");
                    in_doubt += 1;
                }
            }
        }
        if !done.is_empty() {
            info!(gtrid = %String::from_utf8_lossy(gtrid), outcome = word, branches = %done.join(", "), "XA recovery finished a transaction");
        }
    }
    xa.stats.in_doubt.store(in_doubt, Ordering::Relaxed);
    if complete {
        xa.finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|g, _| seen.contains(g));
    }
    drop(targets);
    if complete {
        // Gtrids still prepared anywhere (copies included) keep their rows.
        let prepared: Vec<Vec<u8>> = seen.iter().cloned().collect();
        let tombstones = MIN_TOMBSTONE_AGE.max(xa.recovery_grace * 10);
        let grace = xa.recovery_grace;
        let gc = with_log(shared, async |c| {
            log::collect_garbage(c, &prepared, grace, tombstones).await
        })
        .await;
        if let Err(e) = gc {
            warn!(error = %e, "XA decision log clean-up failed");
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err((seen, e)),
        None => Ok(seen),
    }
}

/// A commit decision names the datanodes it wrote: one whose branch is prepared on no server
/// (in a scan that heard from every server) and that recovery did not finish itself was
/// either committed by its coordinator before it stopped, or lost (a failover to a server
/// the prepare had not reached, a server restored from a backup). `XA RECOVER` cannot tell
/// which, so recovery says so loudly (error log, `missing_branches` of `SHOW SHOAL XA`, the
/// `shoal_xa_missing_branches` metric), once per transaction it finishes.
fn report_missing(xa: &super::Xa, gtrid: &[u8], named: &[String], branches: &[(usize, Xid)]) {
    let mut finished = xa.finished.lock().unwrap_or_else(|e| e.into_inner());
    let done = finished.entry(gtrid.to_vec()).or_default();
    let missing: Vec<&str> = named
        .iter()
        .filter(|dn| {
            let bqual = Xid::branch("", dn).bqual;
            !branches.iter().any(|(_, x)| x.bqual == bqual) && !done.contains(&bqual)
        })
        .map(|s| s.as_str())
        .collect();
    if missing.is_empty() {
        return;
    }
    // Reported once: they count as dealt with from now on.
    for dn in &missing {
        done.insert(Xid::branch("", dn).bqual);
    }
    xa.stats
        .missing_branches
        .fetch_add(missing.len() as u64, Ordering::Relaxed);
    error!(gtrid = %String::from_utf8_lossy(gtrid), missing = %missing.join(","), "XA commit decision names branches prepared on no server: committed by their coordinator before it stopped, or lost (check these datanodes for the transaction's rows)");
}

/// How long a killed holder's thread gets to end (and leave its branch detached) before the
/// branch is tried again; if it is not enough, the next scan tries again.
const HOLDER_GONE: Duration = Duration::from_millis(500);

/// The code of [`Error::backend_unreachable`].
const UNREACHABLE: u16 = 1429;

/// ER_XAER_NOTA: `XA COMMIT`/`ROLLBACK` of a branch another live connection holds (or that
/// is gone).
const XAER_NOTA: u16 = 1397;

fn is_held(e: &Error) -> bool {
    e.as_reply().is_some_and(|(c, _, _)| c == XAER_NOTA)
}

/// Kills the connections of Shoal's backend account on `t` that hold a prepared transaction
/// older than `grace` (InnoDB's status names them; the server does not say which xid a
/// connection holds, but every one of ours so old is a branch its coordinator did not
/// finish); returns how many were killed. Killing one loses nothing: a prepared branch
/// survives its connection, detached, and recovery finishes it as the log says.
async fn kill_holders(t: &mut Target, grace: Duration) -> usize {
    let status = t
        .run("SHOW ENGINE INNODB STATUS", async |c| {
            c.query_rows("SHOW ENGINE INNODB STATUS").await
        })
        .await;
    let text = match status {
        Ok(rows) => rows
            .first()
            .and_then(|r| r.get(2).cloned().flatten())
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default(),
        Err(e) => {
            warn!(server = %t.address(), error = %e, "cannot read which connections hold prepared XA branches");
            return 0;
        }
    };
    let user = t.spec.user.clone();
    let own = t.conn.as_ref().map(|c| u64::from(c.thread_id));
    let mut killed = 0;
    for h in prepared_holders(&text) {
        if h.user != user || h.age < grace || Some(h.thread) == own {
            continue;
        }
        let sql = format!("KILL CONNECTION {}", h.thread);
        match t.execute(&sql).await {
            Ok(()) => {
                warn!(server = %t.address(), thread = h.thread, prepared_for = ?h.age, "killed a backend connection holding a prepared XA branch recovery must finish");
                killed += 1;
            }
            Err(e) => {
                warn!(server = %t.address(), thread = h.thread, error = %e, "could not kill a backend connection holding a prepared XA branch")
            }
        }
    }
    killed
}

/// A connection holding a prepared transaction, from InnoDB's status.
#[derive(Debug, PartialEq, Eq)]
struct Holder {
    thread: u64,
    user: String,
    age: Duration,
}

/// The connections holding prepared transactions in `SHOW ENGINE INNODB STATUS`'s text:
/// blocks `---TRANSACTION <id>, ACTIVE (PREPARED) <n> sec` whose thread line reads
/// `MariaDB thread id <t>, OS thread handle <h>, query id <q> <host> <user> ...` (MySQL:
/// `MySQL thread id`). A detached branch has no thread line.
fn prepared_holders(text: &str) -> Vec<Holder> {
    let mut out = Vec::new();
    for block in text.split("---TRANSACTION ").skip(1) {
        let mut lines = block.lines();
        let head = lines.next().unwrap_or("");
        let Some(age) = head
            .split_once("(PREPARED) ")
            .and_then(|(_, r)| r.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let Some(line) = lines.find(|l| l.contains(" thread id ")) else {
            continue;
        };
        let thread = line
            .split_once(" thread id ")
            .and_then(|(_, r)| r.split(',').next())
            .and_then(|n| n.trim().parse().ok());
        let user = line
            .split_once("query id ")
            .map(|(_, r)| r.split_whitespace().nth(2).unwrap_or("").to_string());
        if let (Some(thread), Some(user)) = (thread, user) {
            out.push(Holder {
                thread,
                user,
                age: Duration::from_secs(age),
            });
        }
    }
    out
}

/// Creates the decision log's table once per process.
async fn ensure_log(xa: &super::Xa, conn: &mut PooledConn) -> Result<()> {
    if !xa.log_ready.load(Ordering::Relaxed) {
        log::ensure_table(conn).await?;
        xa.log_ready.store(true, Ordering::Relaxed);
    }
    Ok(())
}

/// A row of `XA RECOVER` (formatID, gtrid_length, bqual_length, data) as one of our xids.
pub(crate) fn our_xid(row: &[Option<Vec<u8>>]) -> Option<Xid> {
    let num = |i: usize| -> Option<usize> {
        std::str::from_utf8(row.get(i)?.as_deref()?)
            .ok()?
            .parse()
            .ok()
    };
    if num(0)? != FORMAT_ID as usize {
        return None;
    }
    let (g, b) = (num(1)?, num(2)?);
    let data = row.get(3)?.as_deref()?;
    if data.len() < g + b {
        return None;
    }
    let gtrid = data[..g].to_vec();
    gtrid_time(&gtrid)?;
    Some(Xid {
        gtrid,
        bqual: data[g..g + b].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(f: &str, g: usize, b: usize, data: &str) -> Vec<Option<Vec<u8>>> {
        [f, &g.to_string(), &b.to_string(), data]
            .iter()
            .map(|s| Some(s.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn finds_the_connections_holding_prepared_transactions() {
        let text = "LIST OF TRANSACTIONS FOR EACH SESSION:\n\
            ---TRANSACTION 21, ACTIVE 1 sec\n\
            1 lock struct(s), heap size 1128, 0 row lock(s), undo log entries 1\n\
            MariaDB thread id 12, OS thread handle 1400, query id 43 127.0.0.1 shoal User sleep\n\
            ---TRANSACTION 20, ACTIVE (PREPARED) 15 sec\n\
            1 lock struct(s), heap size 1128, 0 row lock(s), undo log entries 1\n\
            MariaDB thread id 11, OS thread handle 1401, query id 40 127.0.0.1 shoal User sleep\n\
            select sleep(8)\n\
            ---TRANSACTION 19, ACTIVE (PREPARED) 30 sec\n\
            1 lock struct(s), heap size 1128, 0 row lock(s), undo log entries 1\n\
            ---TRANSACTION (0x7f54c39c0b80), not started\n\
            --------\n";
        assert_eq!(
            prepared_holders(text),
            vec![Holder {
                thread: 11,
                user: "shoal".into(),
                age: Duration::from_secs(15)
            }]
        );
    }

    #[test]
    fn reads_xa_recover_rows() {
        let f = FORMAT_ID.to_string();
        let x = our_xid(&row(&f, 17, 3, "shoal-18c-1-2-abcdn1")).expect("ours");
        assert_eq!(x.gtrid, b"shoal-18c-1-2-abc");
        assert_eq!(x.bqual, b"dn1");
        // Another formatID, or a gtrid that is not ours: left alone.
        assert_eq!(our_xid(&row("1", 17, 3, "shoal-18c-1-2-abcdn1")), None);
        assert_eq!(our_xid(&row(&f, 5, 3, "other_dn1")), None);
        assert_eq!(our_xid(&row(&f, 30, 3, "short")), None);
    }
}
