//! A server's health as its monitor last found it ([`super::monitor`]) and as statements
//! report it: up or down, read-only, replication and lag, errors.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What the monitor last learned about one server (read lock-free by every statement; written
/// by the monitor, [`super::monitor`]).
#[derive(Debug)]
pub struct Health {
    pub(super) up: AtomicBool,
    /// The last check succeeded (a server goes down only after `down_after` failures).
    pub(super) last_ok: AtomicBool,
    /// Replication IO and SQL threads running (replicas; true on a server without a source).
    pub(super) replicating: AtomicBool,
    /// The replica's SQL thread runs while its IO thread cannot reach the source (connecting,
    /// or stopped by an error): what a replica shows when only its primary is lost.
    pub(super) source_lost: AtomicBool,
    /// Seconds_Behind_Master; -1 when unknown (NULL, or not a replica).
    pub(super) lag: AtomicI64,
    /// The last lag that was known (-1 never), kept while the current one is unknown.
    pub(super) last_known_lag: AtomicI64,
    /// Unix time in milliseconds since which the server could not be reached (its checks, or
    /// a statement's connect, failing; 0 = reachable at the last check).
    pub(super) unreachable_since_ms: AtomicU64,
    /// 0 unknown, 1 writable, 2 read-only.
    pub(super) read_only: AtomicU8,
    /// 0 unknown, 1 no replication connection, 2 one is configured (running or not).
    pub(super) source: AtomicU8,
    pub(super) errors: AtomicU64,
    /// Unix time of the last check, in milliseconds (0 = never).
    pub(super) last_check_ms: AtomicU64,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            // Until the first check says otherwise, a configured server is assumed to serve.
            up: AtomicBool::new(true),
            last_ok: AtomicBool::new(true),
            replicating: AtomicBool::new(true),
            source_lost: AtomicBool::new(false),
            lag: AtomicI64::new(-1),
            last_known_lag: AtomicI64::new(-1),
            unreachable_since_ms: AtomicU64::new(0),
            read_only: AtomicU8::new(0),
            source: AtomicU8::new(0),
            errors: AtomicU64::new(0),
            last_check_ms: AtomicU64::new(0),
        }
    }
}

impl Health {
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    pub fn last_ok(&self) -> bool {
        self.last_ok.load(Ordering::Relaxed)
    }

    /// `Some(true)` read-only, `Some(false)` writable, `None` not known yet.
    pub fn read_only(&self) -> Option<bool> {
        match self.read_only.load(Ordering::Relaxed) {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        }
    }

    /// `Some(true)`: the server has a replication connection (`SHOW SLAVE STATUS` has a row,
    /// its threads running or not), so it is never a primary; `Some(false)`: none; `None`: not
    /// checked yet.
    pub fn replicates(&self) -> Option<bool> {
        match self.source.load(Ordering::Relaxed) {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        }
    }

    /// Whether the server looks like a primary: up, writable, replicating from nobody (as its
    /// last good check found).
    pub fn claims_primary(&self) -> bool {
        self.is_up() && self.read_only() == Some(false) && self.replicates() == Some(false)
    }

    /// Replication lag in seconds, if known.
    pub fn lag(&self) -> Option<u64> {
        u64::try_from(self.lag.load(Ordering::Relaxed)).ok()
    }

    /// The lag last known, while the current one is not.
    pub fn last_known_lag(&self) -> Option<u64> {
        u64::try_from(self.last_known_lag.load(Ordering::Relaxed)).ok()
    }

    /// Whether this replica's replication stopped only because its source cannot be reached:
    /// its IO thread is connecting (or stopped with an error), its SQL thread runs.
    pub fn source_lost(&self) -> bool {
        self.source_lost.load(Ordering::Relaxed)
    }

    /// Since when the server cannot be reached, if its last check failed or a statement's
    /// connect failed since.
    pub fn unreachable_since(&self) -> Option<SystemTime> {
        match self.unreachable_since_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(UNIX_EPOCH + Duration::from_millis(ms)),
        }
    }

    /// A statement could not connect to this server: it counts as unreachable from now until
    /// a check succeeds (the monitor still decides up and down).
    pub fn note_unreachable(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let _ = self.unreachable_since_ms.compare_exchange(
            0,
            now_ms(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    pub fn last_check(&self) -> Option<SystemTime> {
        match self.last_check_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(UNIX_EPOCH + Duration::from_millis(ms)),
        }
    }

    /// Whether a replica may take reads: it has a replication connection whose threads run,
    /// and its lag is known and within `max`. A server replicating from nobody is not a
    /// replica, whatever its role: its data follows no primary.
    pub fn replica_ok(&self, max: Duration) -> bool {
        self.replicates() == Some(true)
            && self.replicating.load(Ordering::Relaxed)
            && self.lag().is_some_and(|l| l <= max.as_secs())
    }

    /// Sets what a good check would have found (the decision tests of `balance`).
    #[cfg(test)]
    pub(crate) fn set_checked(&self, up: bool, read_only: bool, replicates: bool) {
        self.up.store(up, Ordering::Relaxed);
        self.last_ok.store(up, Ordering::Relaxed);
        self.read_only
            .store(if read_only { 2 } else { 1 }, Ordering::Relaxed);
        self.source
            .store(if replicates { 2 } else { 1 }, Ordering::Relaxed);
        self.replicating.store(true, Ordering::Relaxed);
        self.lag
            .store(if replicates { 0 } else { -1 }, Ordering::Relaxed);
    }

    /// A statement failed to reach this server (counted; the monitor decides up/down).
    pub fn note_error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
