//! Ctrl-C (SIGINT) and SIGTERM: the first one sets a flag that every experiment checks between
//! statements and runs, so it unwinds through its normal error path and the `Drop`s of what it
//! started (clusters, Shoal, HAProxy) stop them; a second one exits at once.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::BenchError;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

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
