//! Waking a session that waits for its client's next command, from outside it: at shutdown,
//! at `KILL CONNECTION`, when it has been idle past its timeout, and when a pool it holds a
//! connection of has sessions waiting for one.
//!
//! Why not a timer and a shutdown channel in every session: the command loop waits for the
//! client in a `select!`, and every branch is polled again each time the client is awaited,
//! once per command. A `sleep` re-registers in the timer wheel and a `watch::changed` locks the
//! channel's waiter list, which every session on every worker shares: about 250 instructions
//! and a cache line moved between cores per command. A [`Nudge`] is the session's own flag and
//! waker (a few atomics, nobody else's cache line), and one sweep task per process (`session::nudge`) looks at
//! the idle sessions every tick, as each session's own timer used to.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

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
