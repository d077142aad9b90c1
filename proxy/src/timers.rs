//! Every timer of the proxy lives on a thread of its own, not on the workers that relay
//! statements.
//!
//! A tokio runtime with its time driver runs the timer wheel each time a worker parks: it locks
//! every shard of the wheel, reads the clock before and after the wait and scans the wheel's
//! levels (callgrind: ~1,000 instructions per query when a query arrives at an idle worker, as
//! in a paced load, where a worker parks twice per query). The statements themselves arm no
//! timer unless a query timeout is configured; the timers are the sweep's tick, health checks,
//! the pools' idle reaping, login and acquire limits. So the workers' runtime is built without
//! a time driver ([`start`] before it), and every timer is made here: registered with the wheel
//! of a one-thread runtime that does nothing else, and waking the task that awaits it wherever
//! that task runs.
//!
//! Without [`start`] (unit tests, a proxy embedded in another runtime) timers are made on the
//! current runtime, as `tokio::time` would. `proxy/clippy.toml` forbids calling `tokio::time`'s
//! constructors anywhere else: one made on a worker would panic (no time driver there).

#![allow(clippy::disallowed_methods)]

use std::future::IntoFuture;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::{Instant, Interval, MissedTickBehavior, Sleep, Timeout};

static HOME: OnceLock<Handle> = OnceLock::new();

/// Starts the timer thread. Once per process, before the workers' runtime serves anything;
/// the thread lives as long as the process (timers still armed when the workers' runtime shuts
/// down are dropped with their tasks).
pub fn start() -> std::io::Result<()> {
    if HOME.get().is_some() {
        return Ok(());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let handle = rt.handle().clone();
    std::thread::Builder::new()
        .name("shoal-timers".into())
        .spawn(move || rt.block_on(std::future::pending::<()>()))?;
    let _ = HOME.set(handle);
    Ok(())
}

/// Runs `make` (which creates a timer) with the timer thread's runtime as the current one.
fn at_home<T>(make: impl FnOnce() -> T) -> T {
    match HOME.get() {
        Some(h) => {
            let _entered = h.enter();
            make()
        }
        None => make(),
    }
}

/// [`tokio::time::sleep`], on the timer thread.
pub fn sleep(duration: Duration) -> Sleep {
    at_home(|| tokio::time::sleep(duration))
}

/// [`tokio::time::sleep_until`], on the timer thread.
pub fn sleep_until(deadline: Instant) -> Sleep {
    at_home(|| tokio::time::sleep_until(deadline))
}

/// [`tokio::time::timeout`], its timer on the timer thread.
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    at_home(|| tokio::time::timeout(duration, future))
}

/// [`tokio::time::timeout_at`], its timer on the timer thread.
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> Timeout<F::IntoFuture> {
    at_home(|| tokio::time::timeout_at(deadline, future))
}

/// [`tokio::time::interval`] with [`MissedTickBehavior::Delay`] (what every periodic task
/// here wants: after a stall, the next tick a full period on), on the timer thread.
pub fn interval(period: Duration) -> Interval {
    let mut tick = at_home(|| tokio::time::interval(period));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runtime without a time driver (the workers' runtime once `start` ran) awaits timers
    /// made here: they fire, and a timeout cuts a future short.
    #[test]
    fn timers_fire_on_a_runtime_without_a_time_driver() {
        start().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_io()
            .build()
            .unwrap();
        rt.block_on(async {
            let t0 = std::time::Instant::now();
            let slept = tokio::spawn(async { sleep(Duration::from_millis(30)).await });
            slept.await.unwrap();
            assert!(t0.elapsed() >= Duration::from_millis(30));
            let cut = timeout(Duration::from_millis(20), std::future::pending::<()>()).await;
            assert!(cut.is_err(), "the timeout fired");
            let done = timeout(Duration::from_secs(5), async { 7 }).await;
            assert_eq!(done.unwrap(), 7);
            let mut tick = interval(Duration::from_millis(5));
            for _ in 0..3 {
                tick.tick().await;
            }
        });
    }
}
