//! Ctrl-C (SIGINT) and SIGTERM: the first one sets a flag that every experiment checks between
//! statements and runs, so it unwinds through its normal error path and the `Drop`s of what it
//! started (clusters, Shoal, HAProxy) stop them; a second one exits at once.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::BenchError;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Helper processes running now (Shoal, HAProxy: each in its own process group, so a terminal's
/// Ctrl-C does not reach them); killed before a forced exit skips their `Drop`. MariaDB servers
/// need no entry: the kernel kills them with this process (`PR_SET_PDEATHSIG`).
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

pub fn register_child(pid: u32) {
    CHILDREN.lock().unwrap_or_else(|p| p.into_inner()).push(pid);
}

pub fn unregister_child(pid: u32) {
    CHILDREN
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|&p| p != pid);
}

/// Installs the handlers (needs a tokio runtime). Call once, from `main`.
pub fn install() {
    tokio::spawn(async {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("shoal-bench: cannot watch SIGTERM: {e}");
                    return;
                }
            };
        for n in 0.. {
            tokio::select! {
                r = tokio::signal::ctrl_c() => if r.is_err() { return },
                _ = term.recv() => {}
            }
            if n == 0 {
                INTERRUPTED.store(true, Ordering::SeqCst);
                eprintln!(
                    "shoal-bench: interrupted, stopping what was started (again to exit now)"
                );
            } else {
                for &pid in CHILDREN.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                    // SAFETY: kill(2) on a child we spawned and have not reaped (still listed).
                    unsafe {
                        libc::kill(pid as libc::pid_t, libc::SIGKILL);
                    }
                }
                std::process::exit(130);
            }
        }
    });
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// `Err(Interrupted)` once a stop was asked for.
pub fn check() -> Result<(), BenchError> {
    if interrupted() {
        Err(BenchError::Interrupted)
    } else {
        Ok(())
    }
}
