//! Thread-per-core serving: each core is a thread with its own single-threaded tokio runtime
//! and the sessions given to it, which open their backend connections there too. A
//! statement's client read, backend write, backend read and client write then all happen on
//! one thread: no task is handed to another worker, and no worker is woken for it (the
//! multi-threaded runtime's futex wakeups and work stealing).
//!
//! One listener, on core 0, accepts every client and gives each to the core serving the fewest
//! sessions ([`Load`]), as HAProxy gives a connection to its least loaded thread. A listener
//! per core (`SO_REUSEPORT`) left the spread to the kernel's hash of the addresses: 32 clients
//! over 2 cores often split 20 to 12, and the busier core queued at loads the other could
//! take (a paced point select's average latency 251 ms against HAProxy's 47).
//!
//! Pools stay shared between cores (a connection is a server's, whoever opened it); an idle
//! connection goes preferably to a session of the core its socket is registered with
//! ([`current`]); one taken by a session of another core moves to that core's event loop
//! (`BackendConn::rehome`: two `epoll_ctl` calls once, rather than the other core's thread
//! woken to pass on every response).
//!
//! Every thread that serves sessions (each core, the first included, and the shared runtime's
//! workers with `--runtime shared`) has the same stack, [`STACK_SIZE`]: what reading the
//! deepest statement Shoal accepts takes, with room to spare (see
//! `shoal_router::sql::depth`). Which core a client lands on never decides whether its
//! statement is read or aborts the process.

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The stack of every serving thread (see the module's comment).
pub const STACK_SIZE: usize = shoal_router::sql::depth::STACK_SIZE;

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
    let started = serving_thread(index).spawn(move || {
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

/// The builder of serving thread `index`: its name and [`STACK_SIZE`].
pub fn serving_thread(index: usize) -> std::thread::Builder {
    std::thread::Builder::new()
        .name(format!("shoal-core-{index}"))
        .stack_size(STACK_SIZE)
}

/// Sessions being served per core.
#[derive(Clone)]
pub struct Load(Arc<[AtomicUsize]>);

impl Load {
    pub fn new(cores: usize) -> Load {
        Load((0..cores.max(1)).map(|_| AtomicUsize::new(0)).collect())
    }

    /// The core serving the fewest sessions (the lowest index among equals), counted as
    /// serving one more until the returned share is dropped. Only the accepting thread
    /// picks, so a pick is never raced by another.
    pub fn pick(&self) -> Share {
        let core = (0..self.0.len())
            .min_by_key(|&c| self.0[c].load(Ordering::Relaxed))
            .unwrap_or(0);
        self.0[core].fetch_add(1, Ordering::Relaxed);
        Share {
            load: self.clone(),
            core,
        }
    }
}

/// One session's place in a core's [`Load`].
pub struct Share {
    load: Load,
    pub core: usize,
}

impl Drop for Share {
    fn drop(&mut self) {
        self.load.0[self.core].fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic in one session's task ends that task alone: the core's runtime, and every other
    /// session it serves, go on (tokio catches a task's panic; a core's runtime must keep it so).
    #[test]
    fn a_panicking_session_leaves_the_others_of_its_core_served() {
        let (tx, rx) = std::sync::mpsc::channel();
        spawn(7, move || async move {
            let (go, wait) = tokio::sync::oneshot::channel::<()>();
            let other = tokio::spawn(async move {
                let _ = wait.await;
                tx.send(current()).expect("the test waits");
            });
            let crashed = tokio::spawn(async { panic!("one session's bug") });
            assert!(crashed.await.is_err_and(|e| e.is_panic()));
            go.send(()).expect("the other session waits");
            other.await.expect("the other session ends normally");
            std::future::pending::<()>().await;
        });
        let served = rx.recv_timeout(std::time::Duration::from_secs(30));
        assert_eq!(served, Ok(7), "the other session of core 7 was served");
    }

    #[test]
    fn sessions_go_to_the_least_loaded_core() {
        let load = Load::new(2);
        let shares: Vec<Share> = (0..32).map(|_| load.pick()).collect();
        let on = |c| shares.iter().filter(|s| s.core == c).count();
        assert_eq!((on(0), on(1)), (16, 16));
        // Sessions of core 1 end: the next ones go there until it is even again.
        let mut shares: Vec<Share> = shares.into_iter().filter(|s| s.core == 0).collect();
        shares.extend((0..4).map(|_| load.pick()));
        assert!(shares[16..].iter().all(|s| s.core == 1));
        drop(shares);
        assert_eq!(load.pick().core, 0, "all ended: both idle, the first wins");
    }
}
