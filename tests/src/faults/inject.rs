//! Faults injected in the middle of a workload, each returning the [`FaultEvent`] the report
//! prints: servers killed and restarted or stopped and continued, Shoal killed inside a commit.
//! Shared by the fault scenarios (`tests/tests/faults.rs`) and the contended bank
//! (`tests/tests/bank.rs`).

use std::time::Duration;

use super::check::{FaultEvent, prepared_xids, wait_resolved};
use super::fixture::Fixture;
use super::workload::Workload;

/// How long XA transactions prepared at a restore may take to be resolved.
pub const RESOLVE_LIMIT: Duration = Duration::from_secs(60);

/// The event of a fault whose server is back at `restored`: XA transactions prepared then
/// (left behind by the fault, or in flight) and how long until they are all resolved.
pub async fn restored_event(
    fx: &Fixture,
    what: String,
    at: Duration,
    restored: Duration,
) -> FaultEvent {
    let left = prepared_xids(&fx.cluster).await;
    FaultEvent {
        what,
        at,
        restored,
        prepared_at_restore: left.len(),
        resolved_after: wait_resolved(&fx.cluster, &left, RESOLVE_LIMIT).await,
    }
}

/// kill -9 of instance `i`, restarted on its data after `down`.
pub async fn kill_and_restart(
    fx: &mut Fixture,
    load: &Workload,
    i: usize,
    down: Duration,
    what: &str,
) -> FaultEvent {
    let at = load.now();
    tokio::task::block_in_place(|| fx.cluster.kill(i));
    tokio::time::sleep(down).await;
    fx.cluster
        .restart(i)
        .await
        .unwrap_or_else(|e| panic!("restart instance {i}: {e}"));
    let restored = load.now();
    restored_event(fx, what.to_string(), at, restored).await
}

/// SIGSTOP of instance `i` for `stall`, then SIGCONT.
pub async fn stop_and_continue(
    fx: &mut Fixture,
    load: &Workload,
    i: usize,
    stall: Duration,
    what: &str,
) -> FaultEvent {
    let pid = fx.cluster.instances()[i].pid as libc::pid_t;
    let at = load.now();
    // SAFETY: kill(2) on the pid of a server this test's cluster started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    tokio::time::sleep(stall).await;
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let restored = load.now();
    restored_event(fx, what.to_string(), at, restored).await
}

/// kill -9 of Shoal just after some transfer sent its COMMIT (a random pause under 1.5 ms),
/// restarted on its port once what it left prepared is counted.
pub async fn kill_shoal_during_a_commit(fx: &mut Fixture, load: &Workload) -> FaultEvent {
    let signalled = tokio::time::timeout(Duration::from_secs(10), load.committing()).await;
    assert!(signalled.is_ok(), "no transfer reached COMMIT within 10 s");
    // Somewhere inside the commit: the client's COMMIT is on its way to Shoal.
    let pause = rand::random_range(0..1500u64);
    std::thread::sleep(Duration::from_micros(pause));
    let at = load.now();
    fx.shoal.signal(libc::SIGKILL);
    let status = fx.shoal.wait_exit(Duration::from_secs(10));
    assert!(status.is_some(), "shoal survived SIGKILL");
    tokio::time::sleep(Duration::from_secs(1)).await;
    // With Shoal dead, what is prepared now is exactly what it left behind.
    let left = prepared_xids(&fx.cluster).await;
    tokio::task::block_in_place(|| fx.shoal.restart());
    let restored = load.now();
    FaultEvent {
        what: format!("kill -9 of Shoal {pause} us after a COMMIT was sent"),
        at,
        restored,
        prepared_at_restore: left.len(),
        resolved_after: wait_resolved(&fx.cluster, &left, RESOLVE_LIMIT).await,
    }
}
