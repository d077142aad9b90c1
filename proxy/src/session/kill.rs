//! `KILL [QUERY|CONNECTION] n` and `CONNECTION_ID()` in Shoal's ids: the id a client gets in
//! the handshake. Every session publishes the backend connections it holds at the moment; a
//! KILL of a session of the same user kills there (on every datanode), through a connection of
//! its own. Other users' sessions are refused with 1095, as MySQL does without PROCESS, unless
//! the killer is an admin (`users[].admin`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use shoal_router::sql::lex::{TokKind, Token, tokenize_into};
use tracing::debug;

use super::Session;
use crate::backend::conn::wire_capabilities;
use crate::backend::interrupt::kill_thread;
use crate::backend::pool::{BackendPool, PooledConn};
use crate::error::{Error, Result};
use crate::exec::connset::Held;

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

    fn get(&self, id: u32) -> Option<Arc<SessionHandle>> {
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

/// `KILL [QUERY|CONNECTION] n`: whether only the query dies, and `n`. `None` for anything
/// else (KILL USER, an expression...: the backend or the router answers those).
pub fn parse_kill(sql: &[u8]) -> Option<(bool, u64)> {
    // Cheap reject first: the relay-only path asks this of every query.
    if !crate::session::pinning::contains_ci(sql, b"KILL") {
        return None;
    }
    let text = std::str::from_utf8(sql).ok()?;
    let mut toks = Vec::new();
    tokenize_into(text, &mut toks).ok()?;
    kill_tokens(text, &toks)
}

/// [`parse_kill`] on the statement's tokens (comments skipped, as the server skips them).
pub fn kill_tokens(text: &str, toks: &[Token]) -> Option<(bool, u64)> {
    let mut toks = toks;
    if toks.last().is_some_and(|t| t.is_punct(text, ";")) {
        toks = &toks[..toks.len() - 1];
    }
    let (query, rest) = match toks {
        [k, rest @ ..] if k.is_kw(text, "KILL") => match rest {
            [q, rest @ ..] if q.is_kw(text, "QUERY") => (true, rest),
            [c, rest @ ..] if c.is_kw(text, "CONNECTION") => (false, rest),
            _ => (false, rest),
        },
        _ => return None,
    };
    match rest {
        [n] if n.kind == TokKind::Int => n.text(text).parse().ok().map(|n| (query, n)),
        _ => None,
    }
}

/// Publishes the passthrough connection `backend` and the routed connections `held` in
/// `handle`. A free function so that a caller holding `&mut` to the session's connection
/// can publish it (the session's fields are borrowed one by one).
/// `shown` is the session's own copy of what it published last: compared without the lock,
/// which is taken only on a change.
pub(crate) fn publish(
    handle: &SessionHandle,
    shown: &mut Vec<(usize, u32)>,
    backend: Option<&PooledConn>,
    held: &[Held],
) {
    let current = || {
        backend
            .into_iter()
            .chain(held.iter().map(|h| &h.conn))
            .map(|c| (c.pool(), c.thread_id))
    };
    // `shown` keeps each pool's address: compared without touching refcounts.
    let key = |(p, t): (&Arc<BackendPool>, u32)| (Arc::as_ptr(p) as usize, t);
    if shown.iter().copied().eq(current().map(key)) {
        return;
    }
    shown.clear();
    shown.extend(current().map(key));
    let mut published = handle.backends.lock().unwrap_or_else(|p| p.into_inner());
    published.clear();
    published.extend(
        backend
            .into_iter()
            .chain(held.iter().map(|h| &h.conn))
            .map(|c| Published {
                pool: c.pool().clone(),
                thread: c.thread_id,
                victim: c.deadlock_victim.clone(),
            }),
    );
}

impl Session {
    /// Tells other sessions which backend connections this one holds now.
    /// Called after every command: compares without allocating, writes only on a change.
    pub(crate) fn publish_backends(&mut self) {
        publish(
            &self.handle,
            &mut self.shown_backends,
            self.backend.as_ref(),
            &self.conns.held,
        );
    }

    /// Runs `KILL [QUERY|CONNECTION] n` for Shoal's session `n`.
    pub(crate) async fn kill(
        &mut self,
        query_only: bool,
        target: u64,
        reply_seq: u8,
    ) -> Result<()> {
        let handle = u32::try_from(target)
            .ok()
            .and_then(|id| self.shared.sessions.get(id));
        let Some(handle) = handle else {
            return Err(Error::reply(
                1094,
                b"HY000",
                format!("Unknown thread id: {target}"),
            ));
        };
        let owner = handle
            .user
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        // An admin may end anyone's; others only their own user's, as MySQL without PROCESS.
        if owner != self.user && !self.is_admin() {
            return Err(Error::reply(
                1095,
                b"HY000",
                format!("You are not owner of thread {target}"),
            ));
        }
        if target == u64::from(self.id) {
            if query_only {
                // This session runs nothing else right now.
                return self.send_ok(reply_seq).await;
            }
            return Err(Error::fatal(1927, b"70100", "Connection was killed"));
        }
        if !query_only {
            handle.killed.store(true, Ordering::Relaxed);
            handle.nudge.nudge();
        }
        let backends = handle
            .backends
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let word = if query_only { "QUERY" } else { "CONNECTION" };
        for Published { pool, thread, .. } in backends {
            let limit = pool.settings().connect_timeout;
            let wire = self.caps & wire_capabilities();
            if let Err(e) = kill_thread(pool.spec(), wire, word, thread, limit).await {
                debug!(thread, error = %e, "cannot run KILL on the backend");
            }
        }
        self.send_ok(reply_seq).await
    }
}

#[cfg(test)]
mod tests {
    use super::parse_kill;

    #[test]
    fn parses_kill_forms() {
        assert_eq!(parse_kill(b"KILL 12"), Some((false, 12)));
        assert_eq!(parse_kill(b"kill query 7;"), Some((true, 7)));
        assert_eq!(parse_kill(b" KILL CONNECTION 3"), Some((false, 3)));
        assert_eq!(parse_kill(b"KILL USER bob"), None);
        assert_eq!(parse_kill(b"KILL QUERY ID 5"), None);
        assert_eq!(parse_kill(b"SELECT 1"), None);
        assert_eq!(parse_kill(b"/* tool */ KILL QUERY 9"), Some((true, 9)));
        assert_eq!(parse_kill(b"-- c\nkill 4"), Some((false, 4)));
        assert_eq!(parse_kill(b"/* KILL 4 */ SELECT 1"), None);
    }
}
