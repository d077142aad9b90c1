//! Deadlocks across servers: a lock cycle whose waits are on different servers (session A
//! waits on server 0 for B, B waits on server 1 for A) is invisible to each InnoDB, which sees
//! only its half, and would last until `innodb_lock_wait_timeout` (50 s). Shoal knows which
//! backend connections every session holds, so it can see the whole cycle.
//!
//! Every `server.deadlock_check.interval` the detector looks, in memory, for a session whose
//! statement has run longer than `wait_threshold`; only then does it ask the servers those
//! running sessions hold connections on for their lock waits (`information_schema.INNODB_TRX`
//! joined with `INNODB_LOCK_WAITS`), maps each transaction to its Shoal session through the
//! (server, thread id) pairs sessions publish (`session::kill::Published`), and builds the
//! wait-for graph over sessions. In each cycle it ends the youngest transaction, as InnoDB
//! picks a victim: it marks the victim's waiting connection (`BackendConn::deadlock_victim`)
//! and runs `KILL QUERY` for it; the server ends the statement with 1317, which the session's
//! readers answer as MariaDB's 1213, and `exec::fate` rolls back every branch.
//!
//! Costs: nothing but a scan of the session registry per tick while no statement waits (and
//! then the next tick is when the oldest running statement would reach the threshold: at
//! most `wait_threshold` apart, so a cycle is seen as soon as its first wait is that old); one
//! connection per server is kept only while some statement has waited past the threshold.
//! A cycle within one server never lasts (InnoDB breaks it at once); one that does (with
//! `innodb_deadlock_detect=OFF`, or two branches of one session on one server) is broken too.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mysql_common::constants::CapabilityFlags;
use tracing::{debug, info, warn};

use crate::backend::conn::BackendConn;
use crate::config::BackendSpec;
use crate::error::{Error, Result};
use crate::process::Shared;
use crate::process::processlist::ms_since;
use crate::process::sessions::Published;
use crate::wire::command::COM_QUERY;

/// Every transaction on a server, with the one it waits for if it waits: one row per
/// (transaction, blocker). `trx_started` has whole seconds.
const LOCK_WAITS: &str = "SELECT t.trx_mysql_thread_id, UNIX_TIMESTAMP(t.trx_started), \
     b.trx_mysql_thread_id \
     FROM information_schema.INNODB_TRX t \
     LEFT JOIN information_schema.INNODB_LOCK_WAITS w ON w.requesting_trx_id = t.trx_id \
     LEFT JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id";

/// One row of [`LOCK_WAITS`]: (thread, `trx_started` in Unix seconds, blocking thread).
type TrxRow = (u32, Option<u64>, Option<u32>);

/// How long a server may take to connect and answer (or to run the KILL).
const SERVER_LIMIT: Duration = Duration::from_secs(2);

/// How often the settings are read again while the detector is off (a reload may switch it
/// on), or while nothing waits.
const OFF_RECHECK: Duration = Duration::from_secs(1);

/// The shortest wait between looks while no statement waits (the oldest running one may be a
/// millisecond from the threshold: no wake-up per millisecond).
const QUIET_FLOOR: Duration = Duration::from_millis(10);

/// A running session as the tick saw it.
struct Running {
    id: u32,
    /// When its statement started (`Doing::since_ms`): identifies the statement.
    since_ms: u64,
    backends: Vec<Published>,
}

/// A session the detector KILLed, until its statement is over.
struct Victim {
    since_ms: u64,
    /// The marks of its connections that were KILLed.
    marks: Vec<Arc<AtomicBool>>,
}

/// The detector's state between ticks.
#[derive(Default)]
struct Detector {
    /// One connection per server address, kept while statements wait.
    conns: HashMap<String, BackendConn>,
    /// Sessions chosen as victims, by id: not chosen again for the same statement.
    victims: HashMap<u32, Victim>,
    /// Whether the last failure to read a server was logged (once until one succeeds).
    warned: bool,
}

/// Runs the detector until shutdown.
pub async fn run(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.clone();
    let mut d = Detector::default();
    loop {
        let (interval, threshold) = settings(&shared);
        let wait = if interval.is_zero() {
            d.conns.clear();
            OFF_RECHECK
        } else {
            match d.tick(&shared, threshold).await {
                // Statements wait: the next look in `interval`.
                None => interval,
                // None does: the next look is when the oldest running statement would reach
                // the threshold (two a second with nothing running, at the default
                // threshold), at most a second on, so that a reload's settings count soon.
                Some(quiet) => quiet.clamp(QUIET_FLOOR, OFF_RECHECK),
            }
        };
        tokio::select! {
            _ = crate::timers::sleep(wait) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// `server.deadlock_check` of the current snapshot: (interval, wait threshold); the interval
/// is zero (off) without the router, where one server sees every lock.
fn settings(shared: &Shared) -> (Duration, Duration) {
    let rt = shared.runtime.load();
    match &rt.config.routing {
        Some(r) => {
            let d = &r.topology.server.deadlock_check;
            (d.interval, d.wait_threshold)
        }
        None => (Duration::ZERO, Duration::ZERO),
    }
}

/// The running sessions, when one of them has run at least `threshold` (`now_ms` on the
/// sessions' clock). Otherwise, having copied nothing, how soon one can have: no statement
/// running now crosses the threshold before the oldest does, and none started later crosses
/// it sooner than `threshold` from now.
fn running_sessions(
    shared: &Shared,
    now_ms: u64,
    threshold: Duration,
) -> std::result::Result<Vec<Running>, Duration> {
    let threshold_ms = u64::try_from(threshold.as_millis()).unwrap_or(u64::MAX);
    let mut oldest = now_ms;
    shared.sessions.for_each(|h| {
        if let Some(since) = statement_since(h) {
            oldest = oldest.min(since);
        }
    });
    let waited = now_ms.saturating_sub(oldest);
    if waited < threshold_ms {
        return Err(Duration::from_millis(threshold_ms - waited));
    }
    let mut running = Vec::new();
    for (id, h) in shared.sessions.all() {
        let Some(since_ms) = statement_since(&h) else {
            continue;
        };
        let backends = h.backends.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if !backends.is_empty() {
            running.push(Running {
                id,
                since_ms,
                backends,
            });
        }
    }
    Ok(running)
}

/// When the session's running statement started, if one runs.
fn statement_since(h: &crate::process::sessions::SessionHandle) -> Option<u64> {
    let d = &h.doing;
    match d.idle_since_ms() {
        Some(_) => None,
        None => Some(d.since_ms.load(Ordering::Relaxed)),
    }
}

/// The wait-for graph over sessions, from every server's lock waits.
#[derive(Debug, Default, PartialEq)]
struct Graph {
    /// Session -> when its transaction started: the earliest `trx_started` of its branches
    /// (Unix seconds).
    started: BTreeMap<u32, u64>,
    /// (waiting session, blocking session, server address, waiting thread).
    edges: Vec<(u32, u32, String, u32)>,
}

impl Graph {
    /// Adds one server's rows (thread, started, blocking thread); `session` maps a thread of
    /// this server to the Shoal session holding it (other threads are not Shoal's, or belong
    /// to sessions that run nothing: neither can be in a cycle of waiting sessions).
    fn add_server(&mut self, addr: &str, rows: &[TrxRow], session: impl Fn(u32) -> Option<u32>) {
        for &(thread, started, blocker) in rows {
            let Some(s) = session(thread) else {
                continue;
            };
            if let Some(t) = started {
                let e = self.started.entry(s).or_insert(t);
                *e = (*e).min(t);
            }
            if let Some(b) = blocker.and_then(&session) {
                let edge = (s, b, addr.to_string(), thread);
                if !self.edges.contains(&edge) {
                    self.edges.push(edge);
                }
            }
        }
    }

    /// A cycle of sessions, if there is one (its members in order).
    fn cycle(&self) -> Option<Vec<u32>> {
        let mut next: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (a, b, _, _) in &self.edges {
            next.entry(*a).or_default().push(*b);
        }
        // Depth-first with colours: on the stack (1), done (2).
        let mut colour: HashMap<u32, u8> = HashMap::new();
        for &start in next.keys() {
            if colour.contains_key(&start) {
                continue;
            }
            let mut path = vec![start];
            let mut stack = vec![(start, 0usize)];
            colour.insert(start, 1);
            while let Some((node, i)) = stack.last_mut() {
                let node = *node;
                let succ = next.get(&node).map_or(&[][..], Vec::as_slice);
                if let Some(&n) = succ.get(*i) {
                    *i += 1;
                    match colour.get(&n) {
                        Some(1) => {
                            let from = path.iter().position(|&p| p == n).expect("on the path");
                            return Some(path[from..].to_vec());
                        }
                        Some(_) => {}
                        None => {
                            colour.insert(n, 1);
                            path.push(n);
                            stack.push((n, 0));
                        }
                    }
                } else {
                    colour.insert(node, 2);
                    path.pop();
                    stack.pop();
                }
            }
        }
        None
    }

    /// The youngest transaction of `cycle`: the latest start, ties to the larger session id.
    fn youngest(&self, cycle: &[u32]) -> u32 {
        *cycle
            .iter()
            .max_by_key(|s| (self.started.get(s).copied().unwrap_or(u64::MAX), **s))
            .expect("a cycle has members")
    }

    /// Where `session` waits: (server address, its waiting thread), on every server where
    /// it does (a statement over several datanodes may wait on more than one; a KILL on one
    /// server would leave it waiting on the others).
    fn waits_of(&self, session: u32) -> Vec<(String, u32)> {
        let mut w: Vec<(String, u32)> = self
            .edges
            .iter()
            .filter(|(a, ..)| *a == session)
            .map(|(_, _, addr, t)| (addr.clone(), *t))
            .collect();
        w.sort_unstable();
        w.dedup();
        w
    }

    /// Takes `session` out of the graph (its cycle is being broken).
    fn remove(&mut self, session: u32) {
        self.edges
            .retain(|(a, b, ..)| *a != session && *b != session);
    }
}

impl Detector {
    /// One look; returns how long nothing needs to be looked at, when no statement waits.
    async fn tick(&mut self, shared: &Shared, threshold: Duration) -> Option<Duration> {
        let now_ms = ms_since(shared.started, Instant::now());
        self.forget_victims(shared);
        let running = match running_sessions(shared, now_ms, threshold) {
            Ok(running) => running,
            Err(quiet) => {
                // Nothing waits: hold no connection.
                self.conns.clear();
                return Some(quiet);
            }
        };
        // (server address, thread) -> session; and one spec per server to reach it.
        let mut owner: HashMap<(String, u32), u32> = HashMap::new();
        let mut servers: BTreeMap<String, BackendSpec> = BTreeMap::new();
        for r in &running {
            for b in &r.backends {
                let addr = b.pool.spec().addr();
                owner.insert((addr.clone(), b.thread), r.id);
                servers.entry(addr).or_insert_with(|| b.pool.spec().clone());
            }
        }
        self.conns.retain(|addr, _| servers.contains_key(addr));
        let mut graph = Graph::default();
        let mut failed = false;
        for (addr, spec) in &servers {
            match self.lock_waits(addr, spec).await {
                Ok(rows) => {
                    graph.add_server(addr, &rows, |t| owner.get(&(addr.clone(), t)).copied());
                }
                // A cycle through this server is not seen; others still are.
                Err(e) => {
                    failed = true;
                    if !std::mem::replace(&mut self.warned, true) {
                        let why = if e.as_reply().is_some_and(|(code, ..)| code == 1227) {
                            "the backend account needs the PROCESS privilege to read INNODB_TRX"
                        } else {
                            "retried at every tick while statements wait"
                        };
                        warn!(server = %addr, error = %e, "the deadlock detector cannot read the server's lock waits: {why}");
                    }
                }
            }
        }
        if !failed {
            self.warned = false;
        }
        while let Some(cycle) = graph.cycle() {
            let victim = graph.youngest(&cycle);
            let waits = graph.waits_of(victim);
            graph.remove(victim);
            self.break_cycle(shared, &running, &cycle, victim, &waits)
                .await;
        }
        None
    }

    /// Ends `victim`'s statement waiting on `waits` (server address, thread), unless a member
    /// of `cycle` has moved on since the tick saw it (the cycle may be gone) or the victim was
    /// already chosen for this statement.
    async fn break_cycle(
        &mut self,
        shared: &Shared,
        running: &[Running],
        cycle: &[u32],
        victim: u32,
        waits: &[(String, u32)],
    ) {
        let seen = |id: u32| running.iter().find(|r| r.id == id);
        let live: HashMap<u32, Option<u64>> = shared
            .sessions
            .all()
            .into_iter()
            .map(|(id, h)| (id, statement_since(&h)))
            .collect();
        let still = |id: u32| {
            seen(id).is_some_and(|r| live.get(&id).copied().flatten() == Some(r.since_ms))
        };
        if !cycle.iter().all(|&s| still(s)) {
            debug!(?cycle, "a cycle's statements moved on before it was broken");
            return;
        }
        let Some(r) = seen(victim) else {
            return;
        };
        if self
            .victims
            .get(&victim)
            .is_some_and(|v| v.since_ms == r.since_ms)
        {
            return;
        }
        let mut marks = Vec::new();
        for (addr, thread) in waits {
            let Some(conn) = r
                .backends
                .iter()
                .find(|b| b.thread == *thread && b.pool.spec().addr() == *addr)
            else {
                continue;
            };
            // Marked before the KILL: the statement's answer may come at once.
            conn.victim.store(true, Ordering::Relaxed);
            if self.kill(addr, *thread).await {
                marks.push(conn.victim.clone());
            } else {
                conn.victim.store(false, Ordering::Relaxed);
            }
        }
        if marks.is_empty() {
            // Nothing was KILLed: tried again at the next tick.
            return;
        }
        self.victims.insert(
            victim,
            Victim {
                since_ms: r.since_ms,
                marks,
            },
        );
        if let Some(m) = &shared.observe.metrics {
            m.deadlocks_broken.fetch_add(1, Ordering::Relaxed);
        }
        let waited_ms = ms_since(shared.started, Instant::now()).saturating_sub(r.since_ms);
        info!(
            sessions = ?cycle,
            victim,
            waits = ?waits,
            waited_ms,
            "deadlock across servers: the youngest transaction is rolled back (1213)"
        );
    }

    /// `KILL QUERY thread` on the server at `addr`, through the detector's connection there;
    /// whether the server answered.
    async fn kill(&mut self, addr: &str, thread: u32) -> bool {
        let sql = format!("KILL QUERY {thread}");
        let killed = match self.conns.get_mut(addr) {
            Some(c) => {
                crate::timers::timeout(SERVER_LIMIT, c.command(COM_QUERY, sql.as_bytes())).await
            }
            None => Ok(Err(Error::backend_unreachable(addr, "no connection"))),
        };
        match killed {
            // An error answer (the thread is gone: its statement ended) counts.
            Ok(Ok(_)) | Ok(Err(Error::Reply { .. })) => true,
            Ok(Err(e)) => {
                self.conns.remove(addr);
                warn!(server = %addr, thread, error = %e, "the deadlock detector cannot KILL its victim's statement");
                false
            }
            Err(_) => {
                self.conns.remove(addr);
                warn!(server = %addr, thread, "the deadlock detector's KILL timed out");
                false
            }
        }
    }

    /// Drops the victims whose statement is over. A mark the server's answer did not take
    /// (the statement ended before the KILL came) is cleared once the session is between
    /// statements, so that a later `KILL QUERY` is not taken for the detector's.
    fn forget_victims(&mut self, shared: &Shared) {
        if self.victims.is_empty() {
            return;
        }
        let live: HashMap<u32, Option<u64>> = shared
            .sessions
            .all()
            .into_iter()
            .map(|(id, h)| (id, statement_since(&h)))
            .collect();
        self.victims.retain(|id, v| match live.get(id) {
            Some(Some(since)) if *since == v.since_ms => true,
            Some(None) => {
                for m in &v.marks {
                    m.store(false, Ordering::Relaxed);
                }
                false
            }
            // Another statement runs (the mark may be what its KILLed answer needs: left to
            // the next tick that finds the session idle), or the session is gone.
            Some(Some(_)) => true,
            None => false,
        });
    }

    /// Every transaction on the server at `addr` and what it waits for, through the
    /// detector's connection to it (opened if need be; dropped on an error).
    async fn lock_waits(&mut self, addr: &str, spec: &BackendSpec) -> Result<Vec<TrxRow>> {
        let read = async {
            if self
                .conns
                .get_mut(addr)
                .is_none_or(|c| c.closed_by_server())
            {
                let wire =
                    CapabilityFlags::CLIENT_DEPRECATE_EOF | CapabilityFlags::CLIENT_MULTI_RESULTS;
                let c = BackendConn::connect(spec, wire.into(), None, false, SERVER_LIMIT).await?;
                self.conns.insert(addr.to_string(), c);
            }
            let c = self.conns.get_mut(addr).expect("connected above");
            c.query_rows(LOCK_WAITS).await
        };
        let rows = match crate::timers::timeout(SERVER_LIMIT, read).await {
            Ok(Ok(rows)) => rows,
            Ok(Err(e)) => {
                self.conns.remove(addr);
                return Err(e);
            }
            Err(_) => {
                self.conns.remove(addr);
                return Err(Error::backend_unreachable(
                    addr,
                    "lock waits not read in 2 s",
                ));
            }
        };
        Ok(rows.iter().filter_map(|r| parse_row(r)).collect())
    }
}

/// Reads one row of [`LOCK_WAITS`].
fn parse_row(r: &[Option<Vec<u8>>]) -> Option<TrxRow> {
    fn num<T: std::str::FromStr>(v: Option<&Option<Vec<u8>>>) -> Option<T> {
        std::str::from_utf8(v?.as_deref()?).ok()?.parse().ok()
    }
    Some((num(r.first())?, num(r.get(1)), num(r.get(2))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(servers: &[(&str, &[TrxRow])]) -> Graph {
        // Thread t belongs to session t / 10 on every server.
        let mut g = Graph::default();
        for (addr, rows) in servers {
            g.add_server(addr, rows, |t| (t >= 10).then_some(t / 10));
        }
        g
    }

    #[test]
    fn a_cycle_across_two_servers_ends_the_youngest() {
        // Session 1 (started at 100) waits on s0 for 2; session 2 (started at 105 on s1,
        // 107 on s0) waits on s1 for 1.
        let g = graph(&[
            ("s0", &[(11, Some(100), Some(21)), (21, Some(107), None)]),
            ("s1", &[(22, Some(105), Some(12)), (12, Some(101), None)]),
        ]);
        let cycle = g.cycle().expect("a cycle");
        assert_eq!(cycle.len(), 2);
        assert_eq!(g.started[&2], 105);
        assert_eq!(g.youngest(&cycle), 2);
        assert_eq!(g.waits_of(2), vec![("s1".to_string(), 22)]);
    }

    #[test]
    fn ties_go_to_the_larger_session_and_chains_are_no_cycles() {
        let g = graph(&[
            (
                "s0",
                &[(11, Some(100), Some(21)), (31, Some(100), Some(11))],
            ),
            ("s1", &[(22, Some(100), Some(32))]),
        ]);
        // 1 -> 2 -> 3 -> 1.
        let cycle = g.cycle().expect("a cycle");
        assert_eq!(cycle.len(), 3);
        assert_eq!(g.youngest(&cycle), 3);
        // A chain, and waits on threads no session holds (t < 10), are no cycle.
        let g = graph(&[
            ("s0", &[(11, Some(1), Some(21)), (21, Some(2), Some(5))]),
            ("s1", &[(31, Some(3), Some(11))]),
        ]);
        assert_eq!(g.cycle(), None);
    }

    #[test]
    fn a_session_waiting_for_itself_is_a_cycle_and_removal_breaks_it() {
        // Two branches of session 1 on one server (two datanodes there), one waiting for the
        // other: no server sees a deadlock.
        let mut g = graph(&[("s0", &[(11, Some(5), Some(12)), (12, Some(4), None)])]);
        assert_eq!(g.cycle(), Some(vec![1]));
        g.remove(1);
        assert_eq!(g.cycle(), None);
    }

    #[test]
    fn rows_parse_with_nulls() {
        let row = vec![Some(b"7".to_vec()), Some(b"1700000000".to_vec()), None];
        assert_eq!(parse_row(&row), Some((7, Some(1_700_000_000), None)));
        assert_eq!(parse_row(&[None, None, None]), None);
    }
}
