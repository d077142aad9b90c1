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

/// Every [`TICK`], and at once when a session calls for connections, nudges each session
/// waiting for a command that has been idle for its idle timeout, or that holds connections
/// while sessions wait for their pool or for admission. Runs as long as the proxy.
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
        // `Session::give_back`).
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
    let held = h.backends.lock().unwrap_or_else(|p| p.into_inner());
    !held.is_empty() && (admission_waits || held.iter().any(|b| b.pool.reclaim_requested()))
}
