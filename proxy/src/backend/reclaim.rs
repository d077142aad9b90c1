//! The call for idle sessions' connections: a session that has to wait for a pool's connection
//! or for admission says so here, and the sweep that nudges idle sessions
//! (`session::nudge::sweep`) runs at once instead of at its next tick. Sessions keep the
//! connection they last used between commands (the next statement of a busy session then costs
//! no pool traffic); that affinity lasts only while nobody waits: with 1,000 mostly idle
//! clients over a pool of 64, waiting for the periodic sweep cost every login and scatter up to
//! a tick (200 ms) per server it touched.
//!
//! One signal per process: pools and admission raise it, one sweep answers it, and calls made
//! while a pass runs fold into the next pass (a `Notify` keeps one permit).

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

static WANTED: Notify = Notify::const_new();

/// Passes the sweep ran because a session waited (not at its tick).
static ANSWERED: AtomicU64 = AtomicU64::new(0);

/// A session is about to wait for a connection or for admission: idle holders are to be
/// asked for theirs now.
pub fn call() {
    WANTED.notify_one();
}

/// Completes when a session has called since the last completion.
pub async fn called() {
    WANTED.notified().await;
}

/// Counts a sweep pass run for a call.
pub fn note_answered() {
    ANSWERED.fetch_add(1, Ordering::Relaxed);
}

/// Sweep passes run for a call since the process started (`SHOW SHOAL POOLS`, `/metrics`).
pub fn answered() -> u64 {
    ANSWERED.load(Ordering::Relaxed)
}
