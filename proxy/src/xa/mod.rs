//! XA transactions over datanodes: transaction ids, the commit decision log and recovery.
//!
//! A transaction that wrote to two or more datanodes commits in two phases
//! ([`crate::exec`]'s `xa` module): every written branch is prepared, then a decision row is
//! written to the log ([`log`]), then every branch is committed. A coordinator that dies after
//! preparing leaves prepared branches on the backends (MariaDB keeps them across a disconnect
//! and a restart); [`recovery`] finds them with `XA RECOVER` on every server Shoal knows and
//! finishes them as the log says:
//! committed where a commit row exists, rolled back otherwise ("presumed abort"), after first
//! writing a rollback row so that a coordinator still alive can no longer decide to commit.

pub mod durability;
pub mod log;
pub mod recovery;

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::Notify;

/// The formatID of every XA transaction Shoal starts ("SH"): recovery touches no other.
pub const FORMAT_ID: u32 = 0x5348;

/// How long recovery keeps asking a server a reload removed that does not answer.
pub const RETIRED_GIVE_UP: Duration = Duration::from_secs(3600);

/// What a gtrid starts with; the rest is `<start ms, hex>-<process, hex>-<counter, hex>`.
const GTRID_PREFIX: &str = "shoal-";

/// MariaDB's limit on each of gtrid and bqual.
const XID_PART_MAX: usize = 64;

/// The datahost whose primary holds the decision log: `server.xa.log_datahost`, else the first.
pub fn log_datahost(t: &shoal_router::topology::Topology) -> usize {
    t.server
        .xa
        .log_datahost
        .as_deref()
        .and_then(|n| t.datahosts.iter().position(|d| d.name == n))
        .unwrap_or(0)
}

/// The test hook `SHOAL_FAULT` (read once at start; inert unless set): the process aborts at
/// that point of a two-phase commit, as a `kill -9` would stop it, or (`LoseCommit`) a
/// connection is lost there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `xa-after-prepare`: every branch is prepared, no decision is written.
    AfterPrepare,
    /// `xa-after-decision`: the commit decision is written, no branch is committed.
    AfterDecision,
    /// `xa-lose-commit`: after the decision, the first written branch's connection is closed
    /// before its `XA COMMIT` is sent (the process goes on).
    LoseCommit,
}

/// The fault the process was started with, if any.
pub fn fault() -> Option<Fault> {
    static FAULT: std::sync::OnceLock<Option<Fault>> = std::sync::OnceLock::new();
    *FAULT.get_or_init(|| match std::env::var("SHOAL_FAULT").ok()?.as_str() {
        "xa-after-prepare" => Some(Fault::AfterPrepare),
        "xa-after-decision" => Some(Fault::AfterDecision),
        "xa-lose-commit" => Some(Fault::LoseCommit),
        other => {
            tracing::warn!(fault = other, "SHOAL_FAULT names no known fault: ignored");
            None
        }
    })
}

/// Aborts the process if it was started with fault `f` (see [`fault`]).
pub fn fault_point(f: Fault) {
    if fault() == Some(f) {
        tracing::error!(fault = ?f, "SHOAL_FAULT: aborting the process (test hook)");
        std::process::abort();
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One process's XA state: its transaction ids, where the decision log is, and what the
/// coordinator and recovery did (`SHOW SHOAL XA`).
pub struct Xa {
    /// This process's part of every gtrid (random: several Shoal processes share backends).
    process: u32,
    counter: AtomicU64,
    /// The datahost whose primary holds the log.
    pub log_datahost: usize,
    /// Connections to the log datahost's primary for the decision log only: a session
    /// committing may hold every connection of that datahost's own pool (its branches), so
    /// the decision is never written through that pool.
    pub log_pool: Option<std::sync::Arc<crate::backend::pool::BackendPool>>,
    pub recovery_interval: Duration,
    pub recovery_grace: Duration,
    /// Wakes recovery before its interval (a commit left a branch to it).
    pub kick: Notify,
    pub stats: Stats,
    /// Transactions this process decided to commit but could not finish: recovery finishes
    /// them at once (no live coordinator to wait for).
    orphans: Mutex<HashSet<Vec<u8>>>,
    /// The log's table is known to exist (created at most once per process; `CREATE ... IF
    /// NOT EXISTS` is binlogged even when there is nothing to create).
    pub log_ready: std::sync::atomic::AtomicBool,
    /// Servers a reload removed: recovery asks them until they hold nothing of ours (a
    /// branch prepared there before the reload is still the transaction's).
    retired: Mutex<Vec<crate::config::BackendSpec>>,
    /// Since when each retired server (by address) has not answered.
    retired_unreachable: Mutex<std::collections::HashMap<String, std::time::Instant>>,
    /// Per transaction recovery is finishing: the branches (bquals) it finished so far, so
    /// that a later scan does not take them for missing ones; forgotten once nothing of the
    /// transaction is prepared anywhere.
    pub(crate) finished: Mutex<std::collections::HashMap<Vec<u8>, HashSet<Vec<u8>>>>,
}

/// Counters since the process started.
#[derive(Default)]
pub struct Stats {
    /// Transactions committed in one phase (at most one datanode written).
    pub one_phase: AtomicU64,
    /// Transactions committed in two phases by their coordinator (a decision row written).
    pub two_phase: AtomicU64,
    /// Two-phase transactions the coordinator rolled back (a prepare failed, or recovery had
    /// already decided to roll back).
    pub rolled_back: AtomicU64,
    /// Branches recovery committed (the log said commit).
    pub recovered_commit: AtomicU64,
    /// Branches recovery rolled back (no commit decision).
    pub recovered_rollback: AtomicU64,
    /// Prepared branches of ours the last recovery scan left (too young, failed, or copies
    /// on a replica left to replication).
    pub in_doubt: AtomicU64,
    /// Datanodes a commit decision named that recovery found prepared on no server when it
    /// finished the transaction (committed by the coordinator before it stopped, or lost).
    pub missing_branches: AtomicU64,
    /// The last recovery scan: when it ended (ms since the epoch) and its error, if any.
    pub last_run: Mutex<Option<(u64, Option<String>)>>,
}

impl Xa {
    pub fn new(
        log_datahost: usize,
        log_pool: Option<std::sync::Arc<crate::backend::pool::BackendPool>>,
        recovery_interval: Duration,
        recovery_grace: Duration,
    ) -> Self {
        Xa {
            process: rand::random(),
            counter: AtomicU64::new(0),
            log_datahost,
            log_pool,
            recovery_interval,
            recovery_grace,
            kick: Notify::new(),
            stats: Stats::default(),
            orphans: Mutex::new(HashSet::new()),
            log_ready: Default::default(),
            retired: Mutex::new(Vec::new()),
            retired_unreachable: Mutex::default(),
            finished: Mutex::default(),
        }
    }

    /// Hands servers a reload removed to recovery, and takes back the ones the new
    /// configuration lists again (`listed`: every server address it has).
    pub fn retire(&self, removed: Vec<crate::config::BackendSpec>, listed: &[String]) {
        let mut r = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        r.retain(|s| !listed.contains(&s.addr()));
        for spec in removed {
            if !listed.contains(&spec.addr()) && !r.iter().any(|s| s.addr() == spec.addr()) {
                r.push(spec);
            }
        }
    }

    /// The servers a reload removed that may still hold branches of ours.
    pub fn retired(&self) -> Vec<crate::config::BackendSpec> {
        self.retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Retired server `spec` could not be asked (`failed`) or answered: after
    /// [`RETIRED_GIVE_UP`] without an answer it is forgotten (`true`), so that a server
    /// decommissioned for good does not keep the decision log from being cleaned forever.
    fn retired_unanswered(&self, spec: &crate::config::BackendSpec, failed: bool) -> bool {
        let mut since = self
            .retired_unreachable
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !failed {
            since.remove(&spec.addr());
            return false;
        }
        let first = *since
            .entry(spec.addr())
            .or_insert_with(std::time::Instant::now);
        if first.elapsed() < RETIRED_GIVE_UP {
            return false;
        }
        since.remove(&spec.addr());
        drop(since);
        self.forget_retired(spec);
        true
    }

    /// Recovery found nothing of ours on retired server `spec`: it is not asked again.
    fn forget_retired(&self, spec: &crate::config::BackendSpec) {
        self.retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|s| s.addr() != spec.addr());
    }

    /// A gtrid no other transaction of any Shoal process has: its start time (which recovery
    /// reads back), this process's random id, and a counter.
    pub fn new_gtrid(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!("{GTRID_PREFIX}{:x}-{:08x}-{n:x}", now_ms(), self.process)
    }

    /// Hands transaction `gtrid`, decided and left with branches not committed, to recovery
    /// and wakes it.
    pub fn orphan(&self, gtrid: &str) {
        self.orphans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(gtrid.as_bytes().to_vec());
        self.kick.notify_one();
    }

    /// Whether `gtrid` was handed to recovery by [`Self::orphan`] (forgotten once asked).
    fn take_orphan(&self, gtrid: &[u8]) -> bool {
        self.orphans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(gtrid)
    }

    /// `SHOW SHOAL XA`'s row.
    pub fn rows(&self) -> Vec<Vec<Option<String>>> {
        let s = &self.stats;
        let n = |a: &AtomicU64| Some(a.load(Ordering::Relaxed).to_string());
        let last = s.last_run.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (at, error) = match last {
            Some((ms, e)) => (Some(format!("{}.{:03}", ms / 1000, ms % 1000)), e),
            None => (None, None),
        };
        vec![vec![
            n(&s.one_phase),
            n(&s.two_phase),
            n(&s.rolled_back),
            n(&s.recovered_commit),
            n(&s.recovered_rollback),
            n(&s.in_doubt),
            n(&s.missing_branches),
            at,
            error,
        ]]
    }

    /// The column names of [`Self::rows`].
    pub const COLUMNS: [&'static str; 9] = [
        "committed_one_phase",
        "committed_two_phase",
        "rolled_back",
        "recovered_commit",
        "recovered_rollback",
        "in_doubt",
        "missing_branches",
        "last_recovery",
        "last_recovery_error",
    ];
}

/// A transaction branch's id: the transaction's gtrid and the datanode's name as bqual.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xid {
    pub gtrid: Vec<u8>,
    pub bqual: Vec<u8>,
}

impl Xid {
    /// The branch of transaction `gtrid` on datanode `datanode` (its name cut to MariaDB's
    /// limit: the bqual only needs to differ between a transaction's branches on one server,
    /// and names are compared in full by the config).
    pub fn branch(gtrid: &str, datanode: &str) -> Xid {
        let mut bqual = datanode.as_bytes().to_vec();
        bqual.truncate(XID_PART_MAX);
        Xid {
            gtrid: gtrid.as_bytes().to_vec(),
            bqual,
        }
    }

    /// The xid as XA statements take it: both parts as hex literals (any bytes are safe).
    pub fn sql(&self) -> String {
        format!(
            "X'{}',X'{}',{FORMAT_ID}",
            hex(&self.gtrid),
            hex(&self.bqual)
        )
    }

    /// The gtrid as text (ours are ASCII).
    pub fn gtrid_str(&self) -> String {
        String::from_utf8_lossy(&self.gtrid).into_owned()
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{c:02x}")).collect()
}

/// When a gtrid of ours was made (ms since the epoch), from its text; `None` for others'.
pub fn gtrid_time(gtrid: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(gtrid).ok()?;
    let rest = s.strip_prefix(GTRID_PREFIX)?;
    let (ms, _) = rest.split_once('-')?;
    u64::from_str_radix(ms, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtrids_are_unique_short_and_carry_their_time() {
        let xa = Xa::new(0, None, Duration::from_secs(1), Duration::from_secs(1));
        let before = now_ms();
        let a = xa.new_gtrid();
        let b = xa.new_gtrid();
        assert_ne!(a, b);
        assert!(a.len() <= XID_PART_MAX, "{a}");
        let t = gtrid_time(a.as_bytes()).expect("time");
        assert!(t >= before && t <= now_ms(), "{a}");
        assert_eq!(gtrid_time(b"other-123"), None);
    }

    #[test]
    fn removed_servers_are_asked_until_listed_again_or_empty() {
        let spec = |port: u16| crate::config::BackendSpec {
            host: "127.0.0.1".into(),
            port,
            user: "u".into(),
            password: String::new(),
            database: None,
            tls: Default::default(),
        };
        let xa = Xa::new(0, None, Duration::from_secs(1), Duration::from_secs(1));
        // 3307 is still listed (its pool was replaced, e.g. new credentials): not retired.
        xa.retire(vec![spec(3306), spec(3307)], &["127.0.0.1:3307".into()]);
        assert_eq!(xa.retired(), vec![spec(3306)]);
        // Removed twice: kept once.
        xa.retire(vec![spec(3306)], &[]);
        assert_eq!(xa.retired(), vec![spec(3306)]);
        // Listed again by a later reload: its pool asks it.
        xa.retire(vec![], &["127.0.0.1:3306".into()]);
        assert!(xa.retired().is_empty());
        xa.retire(vec![spec(3308)], &[]);
        assert!(!xa.retired_unanswered(&spec(3308), true));
        assert_eq!(xa.retired().len(), 1);
        xa.forget_retired(&spec(3308));
        assert!(xa.retired().is_empty());
    }

    #[test]
    fn xids_are_hex_literals() {
        let x = Xid::branch("g'1", "dn'1");
        assert_eq!(x.sql(), format!("X'672731',X'646e2731',{FORMAT_ID}"));
        let long = "d".repeat(100);
        assert_eq!(Xid::branch("g", &long).bqual.len(), XID_PART_MAX);
    }
}
