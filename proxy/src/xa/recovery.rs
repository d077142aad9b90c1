//! Recovery of XA transactions whose coordinator died (or could not finish): at start and
//! every `recovery_interval`, `XA RECOVER` on the primary of every datahost lists the
//! prepared branches with Shoal's formatID; each transaction is finished as the decision log
//! says (commit), or rolled back after a rollback tombstone is written (no decision: presumed
//! abort). A transaction is left alone until it is older than `recovery_grace` (its gtrid
//! carries its start time) and was already prepared at the previous scan, so that a live
//! coordinator between its last `XA PREPARE` and its decision is not raced (and if it were,
//! the tombstone makes its decision fail: it rolls back, nothing is half committed).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::{info, warn};

use super::log::{self, Outcome};
use super::{FORMAT_ID, Xid, gtrid_time, now_ms};
use crate::backend::pool::{PooledConn, Wanted};
use crate::error::{Error, Result};
use crate::session::Shared;
use crate::wire::command::COM_QUERY;

/// Tombstones are kept at least this long: a coordinator stalled longer than that between
/// its prepares and its decision is not expected.
const MIN_TOMBSTONE_AGE: Duration = Duration::from_secs(3600);

/// The first scan only records what is prepared; the second, this soon after, acts.
const FIRST_RESCAN: Duration = Duration::from_secs(1);

/// Runs recovery until shutdown.
pub async fn run(shared: Arc<Shared>) {
    let xa = shared.xa.clone();
    let mut shutdown = shared.shutdown.clone();
    let mut previous: HashSet<Vec<u8>> = HashSet::new();
    let mut first = true;
    loop {
        match scan(&shared, &previous).await {
            Ok(seen) => {
                previous = seen;
                *xa.stats.last_run.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((now_ms(), None));
            }
            Err(e) => {
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

/// A connection to `server` for recovery's own statements, in a clean state (`None`: to the
/// decision log, through its own pool).
async fn connect(
    shared: &Shared,
    rt: &crate::runtime::Runtime,
    server: Option<usize>,
) -> Result<PooledConn> {
    let pool = match server {
        Some(s) => rt.pools[s].clone(),
        None => shared
            .xa
            .log_pool
            .clone()
            .ok_or_else(|| Error::reply(1399, b"XAE07", "no XA decision log"))?,
    };
    let mut conn = pool
        .acquire(Wanted {
            wire: crate::server::typical_client_wire(),
            prefer: 0,
            schema: None,
            multi_statements: false,
        })
        .await?;
    crate::session::align_to(&Default::default(), None, &mut conn).await?;
    Ok(conn)
}

/// One scan; returns the gtrids seen prepared (for the next scan's "seen before" test).
/// Recovery holds at most one connection at a time (taken from the pools, given back after
/// each use): it never waits for a pool while holding another pool's connection, so it cannot
/// deadlock with sessions, even with pools of one connection.
async fn scan(shared: &Shared, previous: &HashSet<Vec<u8>>) -> Result<HashSet<Vec<u8>>> {
    let xa = &shared.xa;
    // One snapshot for the whole scan: server indexes are the snapshot's.
    let rt = shared.runtime.load_full();
    let backends = &rt.backends;
    let mut servers: Vec<usize> = (0..backends.hosts.len())
        .map(|dh| backends.primary(dh))
        .collect();
    servers.sort_unstable();
    servers.dedup();
    // Every prepared branch of ours, by gtrid; `complete` while every server answered.
    let mut complete = true;
    let mut by_gtrid: BTreeMap<Vec<u8>, Vec<(usize, Xid)>> = BTreeMap::new();
    let mut first_error: Option<Error> = None;
    for &server in &servers {
        let listed = async {
            let mut conn = connect(shared, &rt, Some(server)).await?;
            let rows = conn.query_rows("XA RECOVER").await?;
            conn.release();
            Ok::<_, Error>(rows)
        }
        .await;
        match listed {
            Ok(rows) => {
                for r in rows {
                    if let Some(x) = our_xid(&r) {
                        by_gtrid
                            .entry(x.gtrid.clone())
                            .or_default()
                            .push((server, x));
                    }
                }
            }
            Err(e) => {
                warn!(server = %backends.servers[server].address, error = %e, "XA RECOVER failed");
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
        let decided = async {
            let mut conn = connect(shared, &rt, None).await?;
            ensure_log(xa, &mut conn).await?;
            let o = log::decide_for_recovery(&mut conn, gtrid).await?;
            conn.release();
            Ok::<_, Error>(o)
        }
        .await;
        let outcome = match decided {
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
        let mut done = Vec::new();
        for (server, x) in branches {
            let sql = format!("XA {word} {}", x.sql());
            let r = async {
                let mut conn = connect(shared, &rt, Some(*server)).await?;
                conn.command(COM_QUERY, sql.as_bytes()).await?;
                conn.release();
                Ok::<_, Error>(())
            }
            .await;
            match r {
                Ok(()) => {
                    done.push(format!(
                        "{}@{}",
                        String::from_utf8_lossy(&x.bqual),
                        backends.servers[*server].address
                    ));
                    let counter = match outcome {
                        Outcome::Commit => &xa.stats.recovered_commit,
                        Outcome::Rollback => &xa.stats.recovered_rollback,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    warn!(gtrid = %x.gtrid_str(), datanode = %String::from_utf8_lossy(&x.bqual), outcome = word, error = %e, "XA recovery could not finish a branch");
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
        // Gtrids still prepared anywhere keep their rows.
        let prepared: Vec<Vec<u8>> = seen.iter().cloned().collect();
        let tombstones = MIN_TOMBSTONE_AGE.max(xa.recovery_grace * 10);
        let gc = async {
            let mut conn = connect(shared, &rt, None).await?;
            ensure_log(xa, &mut conn).await?;
            log::collect_garbage(&mut conn, &prepared, xa.recovery_grace, tombstones).await?;
            conn.release();
            Ok::<_, Error>(())
        }
        .await;
        if let Err(e) = gc {
            warn!(error = %e, "XA decision log clean-up failed");
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(seen),
    }
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
fn our_xid(row: &[Option<Vec<u8>>]) -> Option<Xid> {
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
