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
    /// Sessions waiting for a connection, oldest first: a connection given back goes straight
    /// to a waiter (see [`pick_waiter`]), so busy sessions that give back and take again at
    /// once cannot starve the ones queued behind them.
    waiting: VecDeque<Waiter>,
}

/// A session queued for a connection, and what makes a connection handed to it cheap.
struct Waiter {
    tx: oneshot::Sender<Handoff>,
    /// The core the session runs on: a connection given back there needs no move to another
    /// core's event loop and wakes no other thread.
    core: u16,
    /// The database the session wants the connection in (hashed: compared on every hand-off,
    /// never allocated): a connection already there needs no `COM_INIT_DB` first.
    schema: u64,
    wire: Wire,
    since: Instant,
}

/// How many waiters behind the oldest one a connection given back may go to instead, when it
/// fits one of them better (same database, same core).
const LOOKAHEAD: usize = 8;

/// How long the oldest waiter may be passed over for ones that fit a connection better: after
/// that it takes the next connection given back, whatever it costs to bring over.
const PASS_OVER: Duration = Duration::from_millis(2);

fn schema_key(schema: Option<&str>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    schema.hash(&mut h);
    h.finish()
}

/// Which of `waiting` gets connection `c`: among the oldest live waiter and the few behind it,
/// the first one wanting `c`'s database and wire on `c`'s core, else the first wanting its
/// database and wire, else the first on its core, else the oldest. Measured with 5,000 clients
/// over pools of 16 and 64 (docs/benchmarks.md): a scatter's connections handed over in
/// another datanode's database each cost a round trip more, and a connection handed to
/// another core's session moves event loops and wakes that thread. The oldest waiter is never
/// passed over for longer than [`PASS_OVER`]. Drops the waiters that gave up on the way.
fn pick_waiter(waiting: &mut VecDeque<Waiter>, c: &BackendConn, now: Instant) -> Option<Waiter> {
    let schema = schema_key(c.state.schema.as_deref());
    pick_by(waiting, now, |w| {
        let fits = w.schema == schema && c.wire_matches(w.wire);
        2 * u8::from(fits) + u8::from(w.core == c.core)
    })
}

/// [`pick_waiter`]'s choice, by `score` (3 the best): the oldest of the best scored among the
/// first [`LOOKAHEAD`] + 1 live waiters, or the oldest once it waited [`PASS_OVER`].
fn pick_by(
    waiting: &mut VecDeque<Waiter>,
    now: Instant,
    score: impl Fn(&Waiter) -> u8,
) -> Option<Waiter> {
    loop {
        let oldest = waiting.front()?;
        if !oldest.tx.is_closed() {
            break;
        }
        waiting.pop_front();
    }
    if now.saturating_duration_since(waiting[0].since) >= PASS_OVER {
        return waiting.pop_front();
    }
    let mut best = (0u8, 0usize);
    for (i, w) in waiting.iter().enumerate().take(LOOKAHEAD + 1) {
        if w.tx.is_closed() {
            continue;
        }
        let score = score(w);
        if score > best.0 {
            best = (score, i);
            if score == 3 {
                break;
            }
        }
    }
    waiting.remove(best.1)
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

    /// Whether the pool is short of connections to give at once: every slot open, and fewer
    /// idle than an eighth of the pool (at least one; a scatter takes one per datanode). A
    /// session idle for a while then gives its connection back (`session::nudge`), so that the
    /// next session to need one takes it at once instead of queueing for a hand-back (with
    /// 5,000 mostly idle clients over 64 connections, the idle ones held them all).
    pub fn short(&self) -> bool {
        let reserve = (self.settings.max_size / 8).max(1);
        let s = self.state.lock().unwrap();
        s.idle.len() < reserve && s.total >= self.settings.max_size
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
            if waiter.tx.send(Handoff::Slot).is_ok() {
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
            if waiter.tx.send(Handoff::Slot).is_ok() {
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
        let now = c.last_used;
        while let Some(waiter) = pick_waiter(&mut s.waiting, &c, now) {
            match waiter.tx.send(Handoff::Conn(Box::new(c))) {
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
            // Waiters whose session went away (cancelled acquire) hold no place. Only the
            // front is looked at (behind a live waiter the queue is not free anyway): a scan
            // of every waiter on every acquire cost 2.5% of Shoal's CPU with 448 queued.
            while s.waiting.front().is_some_and(|w| w.tx.is_closed()) {
                s.waiting.pop_front();
            }
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
                s.waiting.push_back(Waiter {
                    tx,
                    core: crate::cores::current(),
                    schema: schema_key(want.schema),
                    wire,
                    since: Instant::now(),
                });
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
        s.waiting.retain(|w| !w.tx.is_closed());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue of waiters on `cores` wanting `schemas`, queued `ago` before `now` (oldest
    /// first), and their receivers (kept open: a dropped receiver is a waiter that gave up).
    fn queue(
        now: Instant,
        entries: &[(u16, &str, Duration)],
    ) -> (VecDeque<Waiter>, Vec<oneshot::Receiver<Handoff>>) {
        let mut waiting = VecDeque::new();
        let mut rxs = Vec::new();
        for &(core, schema, ago) in entries {
            let (tx, rx) = oneshot::channel();
            waiting.push_back(Waiter {
                tx,
                core,
                schema: schema_key(Some(schema)),
                wire: typical_client_wire(),
                since: now - ago,
            });
            rxs.push(rx);
        }
        (waiting, rxs)
    }

    /// The score `pick_waiter` gives for a connection in `schema` on `core` (wires equal).
    fn score(schema: &str, core: u16) -> impl Fn(&Waiter) -> u8 {
        let key = schema_key(Some(schema));
        move |w| 2 * u8::from(w.schema == key) + u8::from(w.core == core)
    }

    #[test]
    fn a_connection_goes_to_a_waiter_in_its_database_on_its_core_first() {
        let now = Instant::now() + Duration::from_secs(1);
        let ms = Duration::from_micros(500);
        let (mut q, _rx) = queue(
            now,
            &[(0, "a", ms), (1, "a", ms), (0, "b", ms), (1, "b", ms)],
        );
        let w = pick_by(&mut q, now, score("b", 1)).unwrap();
        assert_eq!((w.core, w.schema), (1, schema_key(Some("b"))));
        // Its database before its core; the oldest among equals.
        let w = pick_by(&mut q, now, score("b", 1)).unwrap();
        assert_eq!((w.core, w.schema), (0, schema_key(Some("b"))));
        let w = pick_by(&mut q, now, score("c", 1)).unwrap();
        assert_eq!((w.core, w.schema), (1, schema_key(Some("a"))));
        // Nobody fits: the oldest.
        let w = pick_by(&mut q, now, score("c", 1)).unwrap();
        assert_eq!((w.core, w.schema), (0, schema_key(Some("a"))));
        assert!(pick_by(&mut q, now, score("c", 1)).is_none());
    }

    #[test]
    fn the_oldest_waiter_is_passed_over_only_briefly_and_only_for_a_few() {
        let now = Instant::now() + Duration::from_secs(1);
        let (mut q, _rx) = queue(now, &[(0, "a", PASS_OVER), (1, "b", Duration::ZERO)]);
        let w = pick_by(&mut q, now, score("b", 1)).unwrap();
        assert_eq!(w.core, 0, "waited PASS_OVER: it goes first");

        let mut entries = vec![(0, "a", Duration::ZERO); LOOKAHEAD + 1];
        entries.push((1, "b", Duration::ZERO));
        let (mut q, _rx) = queue(now, &entries);
        let w = pick_by(&mut q, now, score("b", 1)).unwrap();
        assert_eq!(w.core, 0, "the fitting waiter is beyond the lookahead");
    }

    #[test]
    fn waiters_that_gave_up_are_dropped_not_handed_anything() {
        let now = Instant::now() + Duration::from_secs(1);
        let (mut q, mut rx) = queue(
            now,
            &[
                (1, "b", Duration::ZERO),
                (0, "a", Duration::ZERO),
                (1, "b", Duration::ZERO),
            ],
        );
        rx[0].close();
        rx[2].close();
        let w = pick_by(&mut q, now, score("b", 1)).unwrap();
        assert_eq!(w.core, 0);
        assert!(pick_by(&mut q, now, score("b", 1)).is_none());
    }
}
