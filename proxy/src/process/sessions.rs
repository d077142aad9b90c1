//! The live sessions, as other sessions see them: by Shoal's id (the one a client gets in the
//! handshake), each with what it holds and does now. Every session publishes the backend
//! connections it holds at the moment, which `KILL` (`exec::kill`), the deadlock detector and
//! `SHOW SHOAL SESSIONS` read.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dashmap::DashMap;

use crate::backend::pool::{BackendPool, PooledConn};

/// One backend connection a session holds, as others see it: its pool (the pool itself, not
/// an index: indexes are per configuration snapshot, and the killer may be on another one),
/// its server thread id, and its deadlock-victim mark (`BackendConn::deadlock_victim`).
#[derive(Clone)]
pub struct Published {
    pub pool: Arc<BackendPool>,
    pub thread: u32,
    pub victim: Arc<AtomicBool>,
}

/// What other sessions may see of one session.
#[derive(Default)]
pub struct SessionHandle {
    pub user: Mutex<String>,
    /// The backend connections held now.
    pub backends: Mutex<Vec<Published>>,
    /// Whether `backends` is not empty, readable without its lock: the sweep that nudges idle
    /// holders (`session::nudge`) looks at thousands of idle sessions that hold nothing.
    pub holds: AtomicBool,
    /// Set by `KILL CONNECTION` from another session: the session ends before its next command
    /// (at once if it waits for one: the killer nudges it).
    pub killed: AtomicBool,
    /// Wakes the session between commands (shutdown, KILL, idle timeout, a pool's reclaim).
    pub nudge: super::nudge::Nudge,
    /// The session's idle timeout in milliseconds (0 until its command loop starts), for the
    /// sweep that nudges idle sessions.
    pub idle_timeout_ms: AtomicU64,
    /// The client's address (host:port).
    pub client: String,
    /// What the session does now (`SHOW SHOAL SESSIONS`).
    pub doing: super::processlist::Doing,
}

impl SessionHandle {
    pub fn new(client: String) -> Self {
        SessionHandle {
            client,
            ..Default::default()
        }
    }
}

/// The live sessions by handshake id.
#[derive(Default)]
pub struct Registry {
    map: DashMap<u32, Arc<SessionHandle>>,
}

impl Registry {
    pub fn register(&self, id: u32, handle: Arc<SessionHandle>) {
        self.map.insert(id, handle);
    }

    pub fn unregister(&self, id: u32) {
        self.map.remove(&id);
    }

    pub fn get(&self, id: u32) -> Option<Arc<SessionHandle>> {
        self.map.get(&id).map(|h| h.clone())
    }

    /// Calls `f` on every live session (no copy of the map, no order).
    pub fn for_each(&self, mut f: impl FnMut(&SessionHandle)) {
        for e in self.map.iter() {
            f(e.value());
        }
    }

    /// Every live session, by id.
    pub fn all(&self) -> Vec<(u32, Arc<SessionHandle>)> {
        let mut all: Vec<_> = self.map.iter().map(|e| (*e.key(), e.clone())).collect();
        all.sort_unstable_by_key(|(id, _)| *id);
        all
    }
}

/// Publishes the backend connections `conns` (the passthrough one, the routed ones) in
/// `handle`. A free function so that a caller holding `&mut` to the session's connection
/// can publish it (the session's fields are borrowed one by one).
/// `shown` is the session's own copy of what it published last: compared without the lock,
/// which is taken only on a change.
pub(crate) fn publish<'a>(
    handle: &SessionHandle,
    shown: &mut Vec<(usize, u32)>,
    conns: impl Iterator<Item = &'a PooledConn> + Clone,
) {
    let current = || conns.clone().map(|c| (c.pool(), c.thread_id));
    // `shown` keeps each pool's address: compared without touching refcounts.
    let key = |(p, t): (&Arc<BackendPool>, u32)| (Arc::as_ptr(p) as usize, t);
    if shown.iter().copied().eq(current().map(key)) {
        return;
    }
    shown.clear();
    shown.extend(current().map(key));
    let mut published = handle.backends.lock().unwrap_or_else(|p| p.into_inner());
    published.clear();
    published.extend(conns.map(|c| Published {
        pool: c.pool().clone(),
        thread: c.thread_id,
        victim: c.deadlock_victim.clone(),
    }));
    handle.holds.store(!published.is_empty(), Ordering::Relaxed);
}
