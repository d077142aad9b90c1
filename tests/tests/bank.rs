//! The contended bank (issue 45): transfers between any two of 16 accounts spread over four
//! datanodes on two primaries (each with a replica), every transfer locking both accounts
//! first (`SELECT ... FOR UPDATE` in a random order: deadlocks on one server and across
//! servers), by clients that answer 1213 as real ones do: ROLLBACK, BEGIN at once, COMMIT, or
//! nothing (an autocommit=0 client going on with its next transfer). Each scenario runs the
//! load with or without a fault, then checks directly on the backends: money conserved,
//! every transfer all or nothing (each leg is logged beside its account), every acknowledged
//! transfer present, replicas identical to their primaries, no prepared XA branch left.
//!
//! One run of each scenario is part of `scripts/test`; `SHOAL_BANK_RUNS=10` repeats each
//! (the figures in the issue notes). The harness is `shoal_tests::faults`.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use shoal_tests::faults::check::{
    FaultEvent, Report, compare, replica_diffs, snapshot, wait_no_prepared,
};
use shoal_tests::faults::fixture::{Fixture, REPLICA_OF, admin};
use shoal_tests::faults::inject::{
    kill_and_restart, kill_shoal_during_a_commit, restored_event, stop_and_continue,
};
use shoal_tests::faults::workload::{Mix, Workload};
use shoal_tests::faults::{Atomicity, Settings};

/// Load before the fault and after it is over.
const BEFORE: Duration = Duration::from_secs(3);
const AFTER: Duration = Duration::from_secs(3);

#[derive(Clone, Copy, Debug)]
enum Fault {
    None,
    /// kill -9 of Shoal just as a transfer sends COMMIT, restarted on its port.
    KillShoal,
    /// kill -9 of primary p1, restarted on its data 2 s later.
    KillPrimary,
    /// Both replicas made writable (MariaDB's default `read_only=0`), then primary p1 stopped
    /// (SIGSTOP) for 2 s: its datahost's writes must not move to its replica.
    StallPrimaryWritableReplicas,
    /// p0's replica stops replicating and is made writable for 2 s, then replicates again:
    /// it must never be written to.
    ReplicaStoppedAndWritable,
}

fn mix() -> Mix {
    Mix {
        inserters: 0,
        multi_inserters: 0,
        transferrers: 0,
        lockers: 8,
        upserters: 0,
        point_readers: 0,
        sum_readers: 1,
    }
}

fn runs() -> usize {
    std::env::var("SHOAL_BANK_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bank_without_faults() {
    repeat("no fault", Fault::None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bank_with_shoal_killed() {
    repeat("kill -9 of Shoal", Fault::KillShoal).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bank_with_a_primary_killed() {
    repeat("kill -9 of a primary", Fault::KillPrimary).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bank_with_a_primary_stalled_and_writable_replicas() {
    repeat(
        "a primary stalled 2 s, replicas writable",
        Fault::StallPrimaryWritableReplicas,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bank_with_a_replica_stopped_and_writable() {
    repeat(
        "a replica's replication stopped, made writable",
        Fault::ReplicaStoppedAndWritable,
    )
    .await;
}

async fn repeat(name: &str, fault: Fault) {
    let n = runs();
    for run in 1..=n {
        scenario(&format!("{name} (run {run} of {n})"), fault).await;
    }
}

async fn scenario(name: &str, fault: Fault) {
    // No query timeout: a lock wait ends as MariaDB ends it (a deadlock's 1213, or the
    // transferrers' 5 s innodb_lock_wait_timeout), not by Shoal's KILL.
    let settings = Settings::from_env(Settings {
        query_timeout: None,
        ..Settings::ISSUE_25
    });
    let mode = settings.mode;
    let mut fx = Fixture::start(settings).await;
    let load = Workload::start(fx.client_opts(), fx.accounts.clone(), &mix());
    tokio::time::sleep(BEFORE).await;
    let faults = inject(&mut fx, &load, fault).await;
    tokio::time::sleep(AFTER).await;
    let log = load.stop().await;
    fx.shoal.assert_running();
    let prepared_cleared_after = wait_no_prepared(&fx.cluster, Duration::from_secs(60)).await;
    match tokio::time::timeout(Duration::from_secs(120), fx.cluster.sync_replicas()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{name}: replicas do not catch up: {e}"),
        Err(_) => panic!("{name}: replicas do not catch up within 120 s"),
    }
    let snap = snapshot(&fx.cluster).await;
    let mut findings = compare(&log, &snap, &fx.accounts);
    findings.replica_diffs = replica_diffs(&fx.cluster).await;
    let deadlocks = log
        .ops
        .iter()
        .filter(|o| matches!(o.seen, shoal_tests::faults::workload::Seen::Server(1213)))
        .count();
    println!(
        "{name}: {} transfers, {deadlocks} answered 1213",
        log.ops.len()
    );
    let report = Report {
        scenario: name.to_string(),
        mode,
        shoal_killed: matches!(fault, Fault::KillShoal),
        faults,
        log,
        findings,
        prepared_cleared_after,
    };
    assert!(
        mode == Atomicity::Xa,
        "the bank runs with transactions: xa (the default)"
    );
    report.assert_invariants();
}

async fn inject(fx: &mut Fixture, load: &Workload, fault: Fault) -> Vec<FaultEvent> {
    let two = Duration::from_secs(2);
    match fault {
        Fault::None => Vec::new(),
        Fault::KillShoal => vec![kill_shoal_during_a_commit(fx, load).await],
        Fault::KillPrimary => {
            vec![kill_and_restart(fx, load, 1, two, "kill -9 of primary p1").await]
        }
        Fault::StallPrimaryWritableReplicas => {
            for r in REPLICA_OF {
                admin(&fx.cluster, r)
                    .await
                    .query_drop("SET GLOBAL read_only = 0")
                    .await
                    .unwrap();
            }
            // Long enough for the monitor to see the replicas writable.
            tokio::time::sleep(two).await;
            vec![stop_and_continue(fx, load, 1, two, "SIGSTOP of primary p1 for 2 s").await]
        }
        Fault::ReplicaStoppedAndWritable => {
            let r = REPLICA_OF[0];
            let at = load.now();
            let mut c = admin(&fx.cluster, r).await;
            c.query_drop("STOP SLAVE").await.unwrap();
            c.query_drop("SET GLOBAL read_only = 0").await.unwrap();
            tokio::time::sleep(two).await;
            c.query_drop("SET GLOBAL read_only = 1").await.unwrap();
            c.query_drop("START SLAVE").await.unwrap();
            let restored = load.now();
            let what = "replica p0r0 stopped and writable for 2 s".to_string();
            vec![restored_event(fx, what, at, restored).await]
        }
    }
}
