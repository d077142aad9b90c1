//! Admission of sessions to the backend pools, so that sessions never deadlock on them.
//!
//! A session holds one connection per datanode it touches, and several datanodes share a
//! datahost's pool. Sessions that each hold some connections (inside transactions, or for the
//! targets of one scatter) and wait for more would wait for each other until the acquire
//! timeout: with 32 sysbench transactions over 4 datanodes of one server, 64 connections ran
//! out that way; with two datahosts, a session holding one's connections can wait for the
//! other's while another session does the opposite. So a session is admitted before it takes
//! its first connection, and only as many sessions are admitted at once as can all hold, on
//! every datahost at the same time, as many connections as one session can ever need there
//! (the datahost's datanodes, or a statement's widest fan-out on it). Every admitted session
//! can then always get the rest of its connections; the others wait for admission holding
//! nothing. Sessions give their admission back with their last connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use shoal_router::topology::{TableDef, Topology};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Error, Result};

pub struct Admission {
    sessions: Arc<Semaphore>,
    /// How many sessions may hold connections at once.
    capacity: usize,
    /// Sessions waiting for admission (sessions holding idle connections then give them back).
    waiting: AtomicUsize,
    timeout: Duration,
}

/// A session's admission, returned when it holds no connection.
pub struct Admitted {
    _permit: OwnedSemaphorePermit,
}

impl Admission {
    /// `pools`: per datahost, (pool size, connections one session can need there).
    pub fn new(pools: &[(usize, usize)], timeout: Duration) -> Self {
        let capacity = pools
            .iter()
            .map(|&(max, need)| (max / need.max(1)).max(1))
            .min()
            .unwrap_or(1);
        Admission {
            sessions: Arc::new(Semaphore::new(capacity)),
            capacity,
            waiting: AtomicUsize::new(0),
            timeout,
        }
    }

    /// Whether `other` admits as many sessions with the same timeout (a reload then keeps
    /// this one: sessions on the old and the new configuration count against one limit).
    pub fn same_limits(&self, other: &Admission) -> bool {
        self.capacity == other.capacity && self.timeout == other.timeout
    }

    /// Admits a session, waiting up to the acquire timeout.
    pub async fn enter(&self) -> Result<Admitted> {
        if let Ok(p) = self.sessions.clone().try_acquire_owned() {
            return Ok(Admitted { _permit: p });
        }
        self.waiting.fetch_add(1, Ordering::Relaxed);
        // Idle sessions give their connections, and with the last one their admission, back.
        crate::backend::reclaim::call();
        let got = crate::timers::timeout(self.timeout, self.sessions.clone().acquire_owned()).await;
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        match got {
            Ok(Ok(p)) => Ok(Admitted { _permit: p }),
            _ => Err(Error::admission_timeout(
                self.timeout.as_millis() as u64,
                self.capacity,
            )),
        }
    }

    /// Whether a session would be admitted at once.
    pub fn would_admit(&self) -> bool {
        self.sessions.available_permits() > 0 && !self.contended()
    }

    /// Whether sessions wait for admission.
    pub fn contended(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// Per datahost, the most connections one session can hold there at once: one per datanode
/// (a transaction or a broadcast touching them all), or one per physical table of a
/// table-per-shard scatter.
pub fn needs(topology: &Topology) -> Vec<usize> {
    let mut need = vec![0usize; topology.datahosts.len()];
    for dn in &topology.datanodes {
        need[dn.datahost] += 1;
    }
    // A global sequence's segment is fetched on a connection of its own (one at a time),
    // possibly while the session holds one on every datanode.
    let mut sequence = vec![0usize; need.len()];
    for schema in topology.schemas.values() {
        for table in schema.tables.values() {
            if let TableDef::Sharded(t) = table
                && let Some(seq) = &t.sequence
            {
                sequence[topology.datanodes[seq.datanode].datahost] = 1;
            }
            let shards = match table {
                TableDef::Sharded(t) => &t.shards,
                TableDef::Child(t) => &t.shards,
                TableDef::Global(_) => continue,
            };
            let mut on = vec![0usize; need.len()];
            for s in shards {
                on[topology.datanodes[s.datanode].datahost] += 1;
            }
            for (n, o) in need.iter_mut().zip(on) {
                *n = (*n).max(o);
            }
        }
    }
    need.iter().zip(sequence).map(|(n, s)| n + s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn admits_what_every_pool_can_serve_at_once() {
        // 64 connections, 4 needed per session: 16; 10 connections, 3 needed: 3.
        let a = Admission::new(&[(64, 4), (10, 3)], Duration::from_millis(50));
        assert_eq!(a.capacity(), 3);
        let first = a.enter().await.unwrap();
        let _more = [a.enter().await.unwrap(), a.enter().await.unwrap()];
        assert!(a.enter().await.is_err());
        drop(first);
        assert!(a.enter().await.is_ok());
        // A pool smaller than one session's need still admits one session.
        assert_eq!(Admission::new(&[(2, 5)], Duration::ZERO).capacity(), 1);
    }
}
