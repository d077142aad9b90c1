//! Waking a session that waits for its client's next command, from outside it: at shutdown,
//! at `KILL CONNECTION`, when it has been idle past its timeout, and when a pool it holds a
//! connection of has sessions waiting for one.
//!
//! Why not a timer and a shutdown channel in every session: the command loop waits for the
//! client in a `select!`, and every branch is polled again each time the client is awaited,
//! once per command. A `sleep` re-registers in the timer wheel and a `watch::changed` locks the
//! channel's waiter list, which every session on every worker shares: about 250 instructions
//! and a cache line moved between cores per command. A [`Nudge`] is the session's own flag and
//! waker (a few atomics, nobody else's cache line), and one [`sweep`] task per process looks at
//! the idle sessions every [`TICK`], as each session's own timer used to.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use atomic_waker::AtomicWaker;

use super::Shared;
use super::kill::SessionHandle;

/// How often idle sessions are looked at (their idle timeout, a pool that wants their
/// connection back; a session that finishes a command checks the latter at once).
pub const TICK: Duration = Duration::from_millis(200);

/// One session's wake-up from outside.
#[derive(Default)]
pub struct Nudge {
    set: AtomicBool,
    waker: AtomicWaker,
}

impl Nudge {
    /// Wakes the session (or makes its next wait return at once). It then checks why itself:
    /// shutdown, killed, idle timeout, a pool's reclaim.
    pub fn nudge(&self) {
        self.set.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Completes once nudged. Stateless: polled again after completing it completes again
    /// until [`Nudge::clear`].
    pub fn wait(&self) -> Nudged<'_> {
        Nudged(self)
    }

    /// Called by the session before it checks the reasons, so that a nudge after the checks
    /// is not lost.
    pub fn clear(&self) {
        self.set.store(false, Ordering::Relaxed);
    }
}

pub struct Nudged<'a>(&'a Nudge);

impl Future for Nudged<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let n = self.0;
        if n.set.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        // Registered, then checked again: a nudge between the first check and the
        // registration found no waker to wake.
        n.waker.register(cx.waker());
        if n.set.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

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
        let now_ms = super::processlist::ms_since(shared.started, std::time::Instant::now());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_nudge_wakes_a_waiting_task_and_stays_until_cleared() {
        let n = Arc::new(Nudge::default());
        let waiter = {
            let n = n.clone();
            tokio::spawn(async move { n.wait().await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        n.nudge();
        crate::timers::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the nudge woke the waiter")
            .unwrap();
        // Still set: a wait completes at once until cleared.
        crate::timers::timeout(Duration::from_secs(5), n.wait())
            .await
            .expect("set before the wait");
        n.clear();
        let pending = crate::timers::timeout(Duration::from_millis(50), n.wait()).await;
        assert!(pending.is_err(), "cleared: the wait waits");
    }
}
