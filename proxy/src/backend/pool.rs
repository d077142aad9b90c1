//! A pool of backend connections for one datasource.
//!
//! Sessions keep the connection they got between statements (no pool traffic on the hot path,
//! and statement-scoped functions such as `LAST_INSERT_ID()` or `FOUND_ROWS()` keep working);
//! when the pool runs dry, waiters raise `waiters` and sessions give back the connections they
//! are not pinned to (see `reclaim_requested`). Connections are told apart by the wire capabilities their responses
//! depend on, so a response can always be forwarded byte for byte.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_common::constants::CapabilityFlags;
use tokio::sync::Notify;
use tracing::{debug, warn};

use crate::backend::conn::{BackendConn, wire_capabilities};
use crate::config::{BackendSpec, PoolSettings};
use crate::error::{Error, Result};

/// What a session would like the connection it acquires to look like.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// The client's negotiated capabilities (only [`wire_capabilities`] matter).
    pub wire: CapabilityFlags,
    /// The connection this session had last, if any: reusing it avoids replaying state.
    pub prefer: u64,
    pub schema: Option<&'a str>,
    pub multi_statements: bool,
}

struct PoolState {
    idle: Vec<BackendConn>,
    /// Connections that exist (idle, in use, or being opened).
    total: usize,
}

pub struct BackendPool {
    spec: BackendSpec,
    settings: PoolSettings,
    state: Mutex<PoolState>,
    /// Signalled when a connection is returned or a slot frees up.
    available: Notify,
    waiters: AtomicUsize,
}

/// A connection checked out of a pool. Dropping it without [`PooledConn::release`] closes it
/// and frees its slot (e.g. when the session panicked or the connection broke).
pub struct PooledConn {
    conn: Option<BackendConn>,
    pool: Arc<BackendPool>,
}

impl std::ops::Deref for PooledConn {
    type Target = BackendConn;
    fn deref(&self) -> &BackendConn {
        self.conn
            .as_ref()
            .expect("connection present until released")
    }
}

impl std::ops::DerefMut for PooledConn {
    fn deref_mut(&mut self) -> &mut BackendConn {
        self.conn
            .as_mut()
            .expect("connection present until released")
    }
}

impl Drop for PooledConn {
    fn drop(&mut self) {
        if self.conn.take().is_some() {
            self.pool.forget_one();
        }
    }
}

impl PooledConn {
    /// Returns the connection to the idle list. The caller has made sure it carries nothing
    /// that may not leak to another session (see the session's pinning rules).
    pub fn release(mut self) {
        if let Some(c) = self.conn.take() {
            self.pool.put_idle(c);
        }
    }
}

impl BackendPool {
    pub fn new(spec: BackendSpec, settings: PoolSettings) -> Arc<Self> {
        Arc::new(BackendPool {
            spec,
            settings,
            state: Mutex::new(PoolState {
                idle: Vec::new(),
                total: 0,
            }),
            available: Notify::new(),
            waiters: AtomicUsize::new(0),
        })
    }

    pub fn spec(&self) -> &BackendSpec {
        &self.spec
    }

    pub fn settings(&self) -> &PoolSettings {
        &self.settings
    }

    /// Whether sessions are waiting for a connection (idle sessions then give theirs back).
    pub fn reclaim_requested(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) > 0
    }

    /// (total, idle) counts, for logs and tests.
    pub fn counts(&self) -> (usize, usize) {
        let s = self.state.lock().unwrap();
        (s.total, s.idle.len())
    }

    fn forget_one(&self) {
        let mut s = self.state.lock().unwrap();
        s.total = s.total.saturating_sub(1);
        drop(s);
        self.available.notify_one();
    }

    fn put_idle(&self, mut c: BackendConn) {
        c.last_used = Instant::now();
        let mut s = self.state.lock().unwrap();
        s.idle.push(c);
        drop(s);
        self.available.notify_one();
    }

    async fn open(self: &Arc<Self>, want: &Wanted<'_>) -> Result<PooledConn> {
        match BackendConn::connect(
            &self.spec,
            want.wire,
            want.schema,
            want.multi_statements,
            self.settings.connect_timeout,
        )
        .await
        {
            Ok(c) => {
                debug!(
                    backend_id = c.id,
                    thread_id = c.thread_id,
                    "opened backend connection"
                );
                Ok(PooledConn {
                    conn: Some(c),
                    pool: self.clone(),
                })
            }
            Err(e) => {
                self.forget_one();
                Err(e)
            }
        }
    }

    /// Checks out a connection: the one the session had before if it is idle, else one with
    /// the same wire capabilities (and schema, if possible), else a new one while below
    /// `max_size`; otherwise waits up to `acquire_timeout`.
    pub async fn acquire(self: &Arc<Self>, want: Wanted<'_>) -> Result<PooledConn> {
        let deadline = Instant::now() + self.settings.acquire_timeout;
        let wire = want.wire & wire_capabilities();
        loop {
            let notified = self.available.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let taken = {
                let mut s = self.state.lock().unwrap();
                let pick = s
                    .idle
                    .iter()
                    .position(|c| c.id == want.prefer && c.wire_matches(wire))
                    .or_else(|| {
                        s.idle.iter().rposition(|c| {
                            c.wire_matches(wire) && c.state.schema.as_deref() == want.schema
                        })
                    })
                    .or_else(|| s.idle.iter().rposition(|c| c.wire_matches(wire)));
                if let Some(i) = pick {
                    Some(Ok(s.idle.remove(i)))
                } else if s.total < self.settings.max_size {
                    s.total += 1;
                    Some(Err(None))
                } else if !s.idle.is_empty() {
                    // Full of connections with other wire capabilities: replace one.
                    Some(Err(Some(s.idle.remove(0))))
                } else {
                    None
                }
            };
            match taken {
                Some(Ok(mut c)) => {
                    if c.closed_by_server() {
                        debug!(
                            backend_id = c.id,
                            "dropping idle backend connection closed by the server"
                        );
                        self.forget_one();
                        continue;
                    }
                    if c.last_used.elapsed() >= self.settings.validate_after && !c.ping().await {
                        debug!(
                            backend_id = c.id,
                            "dropping idle backend connection that failed ping"
                        );
                        self.forget_one();
                        continue;
                    }
                    return Ok(PooledConn {
                        conn: Some(c),
                        pool: self.clone(),
                    });
                }
                Some(Err(replaced)) => {
                    drop(replaced);
                    return self.open(&want).await;
                }
                None => {
                    let now = Instant::now();
                    if now >= deadline {
                        warn!(
                            max_size = self.settings.max_size,
                            "backend pool exhausted: acquire timed out"
                        );
                        return Err(Error::pool_timeout(
                            self.settings.acquire_timeout.as_millis() as u64,
                            self.settings.max_size,
                        ));
                    }
                    // Idle sessions notice `waiters` within their housekeeping tick and give
                    // back what they hold; look again every few milliseconds.
                    self.waiters.fetch_add(1, Ordering::Relaxed);
                    let wait = (deadline - now).min(Duration::from_millis(20));
                    let _ = tokio::time::timeout(wait, notified).await;
                    self.waiters.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Replaces a checked-out connection with a freshly opened one (same slot), for when its
    /// state cannot be brought to what the session needs (e.g. no schema at all).
    pub async fn reopen(
        self: &Arc<Self>,
        mut old: PooledConn,
        want: Wanted<'_>,
    ) -> Result<PooledConn> {
        // Keep the slot: with the connection taken out, dropping `old` does not free it.
        drop(old.conn.take());
        drop(old);
        self.open(&want).await
    }

    /// Closes idle connections unused for `idle_timeout` (keeping `min_size`), and opens
    /// connections up to `min_size`. Runs until the process ends.
    pub async fn maintain(self: Arc<Self>, default_wire: CapabilityFlags) {
        let period = (self.settings.idle_timeout / 4)
            .clamp(Duration::from_millis(200), Duration::from_secs(5));
        loop {
            let expired: Vec<BackendConn> = {
                let mut s = self.state.lock().unwrap();
                let mut out = Vec::new();
                let mut i = 0;
                while i < s.idle.len() && s.total > self.settings.min_size {
                    if s.idle[i].last_used.elapsed() >= self.settings.idle_timeout {
                        out.push(s.idle.remove(i));
                        s.total -= 1;
                    } else {
                        i += 1;
                    }
                }
                out
            };
            if !expired.is_empty() {
                debug!(count = expired.len(), "closed idle backend connections");
            }
            drop(expired);
            loop {
                let open = {
                    let mut s = self.state.lock().unwrap();
                    if s.total < self.settings.min_size {
                        s.total += 1;
                        true
                    } else {
                        false
                    }
                };
                if !open {
                    break;
                }
                let want = Wanted {
                    wire: default_wire,
                    prefer: 0,
                    schema: self.spec.database.as_deref(),
                    multi_statements: false,
                };
                match self.open(&want).await {
                    Ok(c) => c.release(),
                    Err(e) => {
                        warn!(error = %e, "could not open a backend connection for min_size");
                        break;
                    }
                }
            }
            tokio::time::sleep(period).await;
        }
    }
}
