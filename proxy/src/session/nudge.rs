//! The sweep that nudges sessions waiting for their client's next command (see
//! `process::nudge`): once per [`TICK`], and at once when a session calls for connections.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::process::Shared;
use crate::process::sessions::SessionHandle;

/// How often idle sessions are looked at (their idle timeout, a pool that wants their
/// connection back; a session that finishes a command checks the latter at once).
pub const TICK: Duration = Duration::from_millis(200);

/// How long a session waits for its client before it gives back the connections of pools that
/// have none to give (`BackendPool::short`), nobody waiting yet: the next session to need one
/// then takes it at once. A busy session's next statement comes sooner, and keeps its
/// connection (no pool traffic, no replay).
pub const GIVE_BACK_IDLE: Duration = TICK;

/// [`GIVE_BACK_IDLE`] in milliseconds.
const GIVE_BACK_IDLE_MS: u64 = GIVE_BACK_IDLE.as_millis() as u64;

/// Whether a session waiting for its client since `idle_since_ms` (`Doing::idle_since_ms`) at
/// `now_ms` has waited long enough to give back connections of pools that are short.
pub fn idle_long(idle_since_ms: u64, now_ms: u64) -> bool {
    now_ms.saturating_sub(idle_since_ms) >= GIVE_BACK_IDLE_MS
}

/// Every [`TICK`], and at once when a session calls for connections, nudges each session
/// waiting for a command that has been idle for its idle timeout, that holds connections
/// while sessions wait for their pool or for admission, or that has waited [`GIVE_BACK_IDLE`]
/// holding a connection of a pool that has none to give. Runs as long as the proxy.
pub async fn sweep(shared: Arc<Shared>) {
    let mut tick = crate::timers::interval(TICK);
    loop {
        // A session about to wait for a pool or for admission calls at once (see
        // `backend::reclaim`): it waits for the idle holders' answer, not for the tick.
        tokio::select! {
            _ = tick.tick() => {}
            () = crate::backend::reclaim::called() => crate::backend::reclaim::note_answered(),
        }
        let now_ms =
            crate::process::processlist::ms_since(shared.started, std::time::Instant::now());
        // Sessions waiting for admission want the idle ones' connections back too (see
        // `Cursor::give_back`).
        let admission_waits = shared.runtime.load().admission_contended();
        shared.sessions.for_each(|h| {
            if wants_nudge(h, now_ms, admission_waits) {
                h.nudge.nudge();
            }
        });
    }
}

fn wants_nudge(h: &SessionHandle, now_ms: u64, admission_waits: bool) -> bool {
    let Some(idle_ms) = h.doing.idle_since_ms() else {
        return false;
    };
    let limit = h.idle_timeout_ms.load(Ordering::Relaxed);
    if limit > 0 && now_ms.saturating_sub(idle_ms) >= limit {
        return true;
    }
    // Most idle sessions hold nothing: no lock for them (with 5,000 clients the sweep's lock
    // per session was Shoal's most expensive function, 13% of its CPU).
    if !h.holds.load(Ordering::Relaxed) {
        return false;
    }
    let long = idle_long(idle_ms, now_ms);
    let held = h.backends.lock().unwrap_or_else(|p| p.into_inner());
    !held.is_empty()
        && (admission_waits
            || held
                .iter()
                .any(|b| b.pool.reclaim_requested() || (long && b.pool.short())))
}
