//! Thread-per-core serving: each core is a thread with its own single-threaded tokio runtime,
//! its own listener (`SO_REUSEPORT`) and the sessions it accepted, which open their backend
//! connections there too. A statement's client read, backend write, backend read and client
//! write then all happen on one thread: no task is handed to another worker, and no worker
//! is woken for it (the multi-threaded runtime's futex wakeups and work stealing).
//!
//! Pools stay shared between cores (a connection is a server's, whoever opened it); an idle
//! connection goes preferably to a session of the core that opened it ([`current`]), since
//! its socket is registered with that core's event loop.

use std::cell::Cell;
use std::future::Future;

thread_local! {
    static CORE: Cell<u16> = const { Cell::new(0) };
}

/// The core this thread serves (0 on the main thread and in the multi-threaded runtime).
pub fn current() -> u16 {
    CORE.with(Cell::get)
}

/// Starts core `index`: a thread running `serve()` on a new single-threaded runtime, for the
/// life of the process.
pub fn spawn<F, Fut>(index: usize, serve: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let name = format!("shoal-core-{index}");
    let started = std::thread::Builder::new().name(name).spawn(move || {
        CORE.with(|c| c.set(index as u16));
        // No time driver: timers run on their own thread (see `timers`).
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .expect("a core's runtime starts like the main one did");
        runtime.block_on(serve());
    });
    if let Err(e) = started {
        tracing::error!(error = %e, core = index, "cannot start a core's thread");
    }
}
