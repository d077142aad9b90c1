//! A pool of backend connections for one datasource.
//!
//! Sessions keep the connection they got between statements (no pool traffic on the hot path,
//! and statement-scoped functions such as `LAST_INSERT_ID()` or `FOUND_ROWS()` keep working);
//! when the pool runs dry, waiters raise `waiters`, call idle holders at once
//! ([`super::reclaim`]), and sessions give back the connections they are not pinned to (see
//! `reclaim_requested`). Connections are told apart by the wire capabilities their responses
//! depend on, so a response can always be forwarded byte for byte.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_common::constants::CapabilityFlags;
use tokio::sync::oneshot;
use tracing::{debug, warn};

use crate::backend::conn::BackendConn;
use crate::backend::state::SessionState;
use crate::config::{BackendSpec, PoolSettings};
use crate::error::{Error, Result};
use crate::histogram::AtomicHistogram;
use crate::wire::Wire;
use crate::wire::command::COM_QUERY;

/// Wire capabilities most clients ask for; used for connections opened ahead of demand.
pub fn typical_client_wire() -> Wire {
    (CapabilityFlags::CLIENT_DEPRECATE_EOF
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PS_MULTI_RESULTS)
        .into()
}

/// What a session would like the connection it acquires to look like.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// The client's framing (of its capabilities only [`wire_capabilities`] matter).
    pub wire: Wire,
    /// The connection this session had last, if any: reusing it avoids replaying state.
    pub prefer: u64,
    pub schema: Option<&'a str>,
    pub multi_statements: bool,
}

struct PoolState {
    idle: Vec<BackendConn>,
    /// Connections that exist (idle, in use, or being opened).
    total: usize,
    /// Sessions waiting for a connection, first come first served: a connection given back
    /// goes straight to the oldest waiter, so busy sessions that give back and take again at
    /// once cannot starve the ones queued behind them.
    waiting: VecDeque<oneshot::Sender<Handoff>>,
}

/// What a waiting session is handed.
enum Handoff {
    /// A connection someone gave back.
    Conn(Box<BackendConn>),
    /// A free slot (a connection was closed): the waiter opens a new one in it.
    Slot,
}

pub struct BackendPool {
    spec: BackendSpec,
    settings: PoolSettings,
    state: Mutex<PoolState>,
    /// `state.waiting.len()`, readable without the lock (sessions check it between commands).
    waiters: AtomicUsize,
    /// A reload removed this server: no new checkouts, connections closed as they come back
    /// (see `crate::reload`).
    draining: AtomicBool,
    /// Connections opened, closed and moved to another core's event loop since start, and how
    /// long queued acquires waited (for `/metrics`).
    opened: AtomicU64,
    closed: AtomicU64,
    moved: AtomicU64,
    acquire_wait: AtomicHistogram,
    /// Connections given back that went straight to a waiting session.
    handed_off: AtomicU64,
    /// Connections sessions gave back between commands because others waited for them
    /// ([`BackendPool::note_reclaimed`]).
    reclaimed: AtomicU64,
    /// Requests sent to the server on this pool's connections once opened: each write out,
    /// one command or several pipelined, is one round trip.
    requests: Arc<AtomicU64>,
}

/// A pool's counts at one moment (`/metrics`).
#[derive(Debug, Clone, Copy)]
pub struct PoolStats {
    pub idle: usize,
    /// Checked out, or being opened.
    pub busy: usize,
    pub waiting: usize,
    pub opened: u64,
    pub closed: u64,
    /// Idle connections taken by a session of another core than the one they were registered
    /// with, and moved there.
    pub moved: u64,
    pub max: usize,
    /// Acquires that had to wait.
    pub waits: u64,
    /// Connections given back that went straight to a waiting session.
    pub handed_off: u64,
    /// Connections sessions gave back between commands because others waited.
    pub reclaimed: u64,
    /// Requests (round trips) sent on the pool's connections.
    pub requests: u64,
}

/// A connection checked out of a pool. Dropping it without [`PooledConn::release`] closes it
/// and frees its slot (e.g. when the session panicked or the connection broke).
pub struct PooledConn {
    conn: BackendConn,
    slot: Slot,
}

/// The pool slot a checked-out connection occupies; freed when dropped while still held, i.e.
/// unless [`PooledConn::release`] gave the connection back to the idle list.
struct Slot {
    pool: Arc<BackendPool>,
    held: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.held {
            self.pool.closed.fetch_add(1, Ordering::Relaxed);
            self.pool.forget_one();
        }
    }
}

impl std::ops::Deref for PooledConn {
    type Target = BackendConn;
    fn deref(&self) -> &BackendConn {
        &self.conn
    }
}

impl std::ops::DerefMut for PooledConn {
    fn deref_mut(&mut self) -> &mut BackendConn {
        &mut self.conn
    }
}

impl PooledConn {
    /// Returns the connection to the idle list. The caller has made sure it carries nothing
    /// that may not leak to another session (see the session's pinning rules).
    pub fn release(mut self) {
        // An idle connection runs nothing: no statement's deadline goes to the pool.
        self.conn.disarm();
        // Without session tracking the proxy cannot see what a session changed on the
        // connection, so it never goes to another session: dropping it closes it.
        if !self.conn.tracking {
            return;
        }
        // The last line of defence against a transaction leaking to another session (its
        // locks would hold up DDL, its snapshot would serve stale reads): a connection the
        // server last said is inside one is closed, which rolls it back. Sessions end their
        // transactions before giving connections back; this catches what they missed.
        if self.conn.in_transaction() {
            warn!(
                server = %self.slot.pool.spec.addr(),
                thread_id = self.conn.thread_id,
                "a connection given back inside a transaction was closed (rolled back)"
            );
            return;
        }
        let PooledConn { conn, mut slot } = self;
        slot.held = false;
        slot.pool.put_idle(conn);
    }

    /// The pool this connection belongs to.
    pub fn pool(&self) -> &Arc<BackendPool> {
        &self.slot.pool
    }

    /// Bounds the reads of the statement about to run here by `at` (`server.query_timeout`;
    /// see `backend::interrupt`).
    pub fn arm(&mut self, at: tokio::time::Instant) {
        let limit = crate::backend::interrupt::Limit::new(at, self.slot.pool.clone());
        self.conn.arm(limit);
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
                waiting: VecDeque::new(),
            }),
            waiters: AtomicUsize::new(0),
            draining: AtomicBool::new(false),
            opened: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            moved: AtomicU64::new(0),
            acquire_wait: AtomicHistogram::default(),
            handed_off: AtomicU64::new(0),
            reclaimed: AtomicU64::new(0),
            requests: Arc::new(AtomicU64::new(0)),
        })
    }

    /// A reload removed this server: idle connections are closed now, the ones in use when
    /// they come back, and no session gets a new one (sessions still on the snapshot that
    /// listed the server get an error instead). Returns how many idle ones were closed.
    pub fn drain(&self) -> usize {
        self.draining.store(true, Ordering::Relaxed);
        // Waiters would wait for connections that never come back to them.
        {
            let mut s = self.state.lock().unwrap();
            s.waiting.clear();
            self.waiters.store(0, Ordering::Relaxed);
        }
        self.discard_idle()
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
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

    /// A session gave a connection back between commands because others waited for it.
    pub fn note_reclaimed(&self) {
        self.reclaimed.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether every slot is open or sessions are queued: an acquire now could only wait, or
    /// take an idle connection that has to switch database first.
    pub fn is_full(&self) -> bool {
        if self.reclaim_requested() {
            return true;
        }
        self.state.lock().unwrap().total >= self.settings.max_size
    }

    /// (total, idle) counts, for logs and tests.
    pub fn counts(&self) -> (usize, usize) {
        let s = self.state.lock().unwrap();
        (s.total, s.idle.len())
    }

    pub fn stats(&self) -> PoolStats {
        let s = self.state.lock().unwrap();
        PoolStats {
            idle: s.idle.len(),
            busy: s.total.saturating_sub(s.idle.len()),
            waiting: s.waiting.len(),
            opened: self.opened.load(Ordering::Relaxed),
            closed: self.closed.load(Ordering::Relaxed),
            moved: self.moved.load(Ordering::Relaxed),
            max: self.settings.max_size,
            waits: self.acquire_wait.count(),
            handed_off: self.handed_off.load(Ordering::Relaxed),
            reclaimed: self.reclaimed.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
        }
    }

    /// How long acquires that queued waited.
    pub fn acquire_wait(&self) -> &AtomicHistogram {
        &self.acquire_wait
    }

    /// Closes every idle connection (their server went down); returns how many.
    pub fn discard_idle(&self) -> usize {
        let idle: Vec<BackendConn> = {
            let mut s = self.state.lock().unwrap();
            let idle = std::mem::take(&mut s.idle);
            s.total -= idle.len();
            idle
        };
        let n = idle.len();
        self.closed.fetch_add(n as u64, Ordering::Relaxed);
        drop(idle);
        // Each freed slot may let a waiter open a connection (to wherever it is sent next).
        for _ in 0..n {
            self.wake_one_waiter();
        }
        n
    }

    fn wake_one_waiter(&self) {
        let mut s = self.state.lock().unwrap();
        if s.total >= self.settings.max_size {
            return;
        }
        while let Some(waiter) = s.waiting.pop_front() {
            if waiter.send(Handoff::Slot).is_ok() {
                s.total += 1;
                break;
            }
        }
        self.waiters.store(s.waiting.len(), Ordering::Relaxed);
    }

    fn forget_one(&self) {
        let mut s = self.state.lock().unwrap();
        s.total = s.total.saturating_sub(1);
        while let Some(waiter) = s.waiting.pop_front() {
            if waiter.send(Handoff::Slot).is_ok() {
                // The slot is the waiter's now.
                s.total += 1;
                break;
            }
        }
        self.waiters.store(s.waiting.len(), Ordering::Relaxed);
    }

    fn put_idle(&self, mut c: BackendConn) {
        c.last_used = Instant::now();
        let mut s = self.state.lock().unwrap();
        if self.is_draining() {
            s.total = s.total.saturating_sub(1);
            drop(s);
            drop(c);
            return;
        }
        while let Some(waiter) = s.waiting.pop_front() {
            match waiter.send(Handoff::Conn(Box::new(c))) {
                Ok(()) => {
                    self.waiters.store(s.waiting.len(), Ordering::Relaxed);
                    self.handed_off.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                // That waiter gave up: try the next one.
                Err(Handoff::Conn(back)) => c = *back,
                Err(Handoff::Slot) => unreachable!("sent a connection"),
            }
        }
        self.waiters.store(0, Ordering::Relaxed);
        s.idle.push(c);
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
            Ok(mut c) => {
                self.opened.fetch_add(1, Ordering::Relaxed);
                c.io.count_writes(self.requests.clone());
                debug!(
                    backend_id = c.id,
                    thread_id = c.thread_id,
                    "opened backend connection"
                );
                Ok(PooledConn {
                    conn: c,
                    slot: Slot {
                        pool: self.clone(),
                        held: true,
                    },
                })
            }
            Err(e) => {
                self.forget_one();
                Err(e)
            }
        }
    }

    /// Checks out a connection: the one the session had before if it is idle, else one with
    /// the same wire capabilities and schema, else a new one while below `max_size`, else an
    /// idle one in another schema; otherwise waits up to `acquire_timeout`.
    pub async fn acquire(self: &Arc<Self>, want: Wanted<'_>) -> Result<PooledConn> {
        if self.is_draining() {
            return Err(Error::backend_unreachable(
                &self.spec.addr(),
                "removed from the configuration by a reload",
            ));
        }
        let deadline = Instant::now() + self.settings.acquire_timeout;
        let wire = want.wire;
        let taken = {
            let mut s = self.state.lock().unwrap();
            // Waiters whose session went away (cancelled acquire) hold no place.
            s.waiting.retain(|w| !w.is_closed());
            // Nobody may take an idle connection or a new slot ahead of a queued session.
            let free = s.waiting.is_empty();
            let same = free
                .then(|| {
                    s.idle
                        .iter()
                        .position(|c| c.id == want.prefer && c.wire_matches(wire))
                        .or_else(|| {
                            // One opened on this core first: its socket wakes this thread.
                            let fits = |c: &BackendConn| {
                                c.wire_matches(wire) && c.state.schema.as_deref() == want.schema
                            };
                            let core = crate::cores::current();
                            s.idle
                                .iter()
                                .rposition(|c| c.core == core && fits(c))
                                .or_else(|| s.idle.iter().rposition(fits))
                        })
                })
                .flatten();
            if let Some(i) = same {
                Ok(Handoff::Conn(Box::new(s.idle.remove(i))))
            } else if free && s.total < self.settings.max_size {
                // A new connection rather than one in another schema: switching schema costs
                // a round trip on every hand-off, opening costs one handshake per slot, and
                // with several datanodes per server the switching would never end.
                s.total += 1;
                Ok(Handoff::Slot)
            } else if let Some(i) = free
                .then(|| s.idle.iter().rposition(|c| c.wire_matches(wire)))
                .flatten()
            {
                Ok(Handoff::Conn(Box::new(s.idle.remove(i))))
            } else if free && !s.idle.is_empty() {
                // Full of connections with other wire capabilities: replace one (its slot
                // is reused: a BackendConn dropped outside a PooledConn frees nothing).
                drop(s.idle.remove(0));
                self.closed.fetch_add(1, Ordering::Relaxed);
                Ok(Handoff::Slot)
            } else {
                let (tx, rx) = oneshot::channel();
                s.waiting.push_back(tx);
                self.waiters.store(s.waiting.len(), Ordering::Relaxed);
                // Idle sessions holding this pool's connections give them back now.
                super::reclaim::call();
                Err(rx)
            }
        };
        let handoff = match taken {
            Ok(h) => h,
            Err(mut rx) => {
                // Sessions holding connections notice `waiters` between commands (idle
                // ones nudged at once by the sweep the call above woke) and give theirs back.
                let queued = Instant::now();
                let wait = deadline.saturating_duration_since(queued);
                let got = crate::timers::timeout(wait, &mut rx).await;
                self.acquire_wait.observe(queued.elapsed());
                match got {
                    Ok(Ok(h)) => h,
                    Ok(Err(_)) => unreachable!("the pool never drops a waiter's sender"),
                    Err(_) => {
                        // A hand-off may have raced the deadline: take it rather than lose it.
                        rx.close();
                        match rx.try_recv() {
                            Ok(h) => h,
                            Err(_) => {
                                self.prune_waiters();
                                warn!(
                                    max_size = self.settings.max_size,
                                    "backend pool exhausted: acquire timed out"
                                );
                                return Err(Error::pool_timeout(
                                    self.settings.acquire_timeout.as_millis() as u64,
                                    self.settings.max_size,
                                ));
                            }
                        }
                    }
                }
            }
        };
        match handoff {
            Handoff::Conn(c) => {
                let mut c = *c;
                // A connection that cannot serve is replaced in its slot (dropping a bare
                // BackendConn frees no slot), so this session keeps its place.
                if c.closed_by_server() {
                    debug!(
                        backend_id = c.id,
                        "replacing idle backend connection closed by the server"
                    );
                    drop(c);
                    return self.open_in_place(&want).await;
                }
                if !c.wire_matches(wire) {
                    drop(c);
                    return self.open_in_place(&want).await;
                }
                // Taken from another core's session: its socket joins this core's loop before
                // its first round trip here (the ping below, or the session's statement).
                if c.on_other_core() {
                    c = match c.rehome() {
                        Ok(c) => {
                            self.moved.fetch_add(1, Ordering::Relaxed);
                            c
                        }
                        Err(e) => {
                            debug!(error = %e, "replacing idle backend connection that could not move core");
                            return self.open_in_place(&want).await;
                        }
                    };
                }
                if c.last_used.elapsed() >= self.settings.validate_after && !c.ping().await {
                    debug!(
                        backend_id = c.id,
                        "replacing idle backend connection that failed ping"
                    );
                    drop(c);
                    return self.open_in_place(&want).await;
                }
                Ok(PooledConn {
                    conn: c,
                    slot: Slot {
                        pool: self.clone(),
                        held: true,
                    },
                })
            }
            Handoff::Slot => self.open(&want).await,
        }
    }

    /// Drops the queue entries of waiters that gave up.
    fn prune_waiters(&self) {
        let mut s = self.state.lock().unwrap();
        s.waiting.retain(|w| !w.is_closed());
        self.waiters.store(s.waiting.len(), Ordering::Relaxed);
    }

    /// Replaces a checked-out connection with a freshly opened one (same slot), for when its
    /// state cannot be brought to what the session needs (e.g. no schema at all).
    pub async fn reopen(self: &Arc<Self>, old: PooledConn, want: Wanted<'_>) -> Result<PooledConn> {
        // Keep the slot: the old connection closes, the slot is not freed.
        let PooledConn { conn, mut slot } = old;
        slot.held = false;
        drop(conn);
        self.open_in_place(&want).await
    }

    /// Counts the connection just closed in a held slot, and opens its replacement there.
    async fn open_in_place(self: &Arc<Self>, want: &Wanted<'_>) -> Result<PooledConn> {
        self.closed.fetch_add(1, Ordering::Relaxed);
        self.open(want).await
    }

    /// Closes idle connections unused for `idle_timeout` (keeping `min_size`), and opens
    /// connections up to `min_size`. Runs until the process ends.
    pub async fn maintain(self: Arc<Self>, default_wire: Wire) {
        let period = (self.settings.idle_timeout / 4)
            .clamp(Duration::from_millis(200), Duration::from_secs(5));
        loop {
            if self.is_draining() {
                return;
            }
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
            self.closed
                .fetch_add(expired.len() as u64, Ordering::Relaxed);
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
            crate::timers::sleep(period).await;
        }
    }
}

/// Replays the difference between a connection's state and the session's `want` (variables,
/// last insert id, multi-statements), with `schema` as the connection's database (the
/// session's own without the router, the datanode's with it).
pub async fn align_to(
    want: &SessionState,
    schema: Option<&str>,
    conn: &mut PooledConn,
) -> Result<()> {
    if !conn.state.vars_subset_of(want) {
        conn.reset().await?;
    }
    if conn.state.schema.as_deref() != schema
        && let Some(db) = schema
    {
        conn.init_db(db).await?;
    }
    if let Some(sql) = want.set_statement_from(&conn.state) {
        conn.command(COM_QUERY, sql.as_bytes()).await?;
    }
    conn.state.vars = want.vars.clone();
    if conn.state.last_insert_id != want.last_insert_id {
        let sql = format!("DO LAST_INSERT_ID({})", want.last_insert_id);
        conn.command(COM_QUERY, sql.as_bytes()).await?;
        conn.state.last_insert_id = want.last_insert_id;
    }
    if conn.state.multi_statements != want.multi_statements {
        conn.set_multi_statements(want.multi_statements).await?;
    }
    Ok(())
}
