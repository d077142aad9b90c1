//! Fault injection (issue 25): writers and readers through Shoal over two primaries with a
//! replica each, a fault in the middle of the load, then checks made directly on the backends —
//! no acknowledged write lost, no phantom write, the sum of balances unchanged up to what the
//! mode tolerates, global-table copies identical, replicas equal to their primaries. Each
//! scenario prints a summary (operations by outcome, recovery times, violations).
//!
//! The harness is `shoal_tests::faults`; what Shoal is configured with and what the checks
//! demand is [`SETTINGS`] (or `SHOAL_FAULTS_TRANSACTIONS=xa|best_effort`). Timings are
//! reported, never asserted.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use shoal_tests::faults::check::{
    FaultEvent, Report, compare, prepared_xids, replica_diffs, snapshot, wait_no_prepared,
    wait_resolved,
};
use shoal_tests::faults::fixture::{Fixture, REPLICA_OF, admin};
use shoal_tests::faults::inject::{
    RESOLVE_LIMIT, kill_and_restart, kill_shoal_during_a_commit, stop_and_continue,
};
use shoal_tests::faults::workload::{Mix, Workload};
use shoal_tests::faults::{Atomicity, Settings};

/// Today's main: no xa, no query timeout, no reads from replicas while a primary is down.
const SETTINGS: Settings = Settings::ISSUE_25;

/// Load before the first fault and after the last one is restored.
const BEFORE: Duration = Duration::from_secs(3);
const AFTER: Duration = Duration::from_secs(4);
/// How long a killed server stays down before its restart.
const DOWN: Duration = Duration::from_secs(2);

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// kill -9 of primary 1, restarted on its data after [`DOWN`].
    KillPrimary,
    /// kill -9 of primary 0's replica, restarted after [`DOWN`] (replication started again).
    KillReplica,
    /// kill -9 of Shoal just as a transfer sends COMMIT, restarted on its port; three times.
    KillShoalDuringCommits,
    /// SIGTERM of Shoal (graceful stop), restarted on its port.
    TermShoal,
    /// SIGSTOP of primary 1 for longer than the query timeout, then SIGCONT.
    StopPrimary,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_primary() {
    scenario("kill -9 of a primary", Fault::KillPrimary).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_replica() {
    scenario("kill -9 of a replica", Fault::KillReplica).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_shoal_during_commits() {
    scenario(
        "kill -9 of Shoal during commits",
        Fault::KillShoalDuringCommits,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_shoal() {
    scenario("SIGTERM of Shoal", Fault::TermShoal).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stop_primary() {
    scenario("SIGSTOP of a primary", Fault::StopPrimary).await;
}

/// Issue 45: the same stall with the replicas at MariaDB's default `read_only=0`. Missed checks
/// of the primary must not move its writes to its replica (which still replicates): the checks
/// find no acknowledged write lost from the primaries and the replicas equal to them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stop_primary_with_writable_replicas() {
    let settings = Settings {
        writable_replicas: true,
        ..Settings::from_env(SETTINGS)
    };
    scenario_with(
        "SIGSTOP of a primary, replicas at read_only=0",
        Fault::StopPrimary,
        settings,
    )
    .await;
}

async fn scenario(name: &str, fault: Fault) {
    scenario_with(name, fault, Settings::from_env(SETTINGS)).await;
}

async fn scenario_with(name: &str, fault: Fault, settings: Settings) {
    let mode = settings.mode;
    let mut fx = Fixture::start(settings).await;
    let load = Workload::start(fx.client_opts(), fx.accounts.clone(), &Mix::default());
    tokio::time::sleep(BEFORE).await;
    let faults = inject(&mut fx, &load, fault).await;
    tokio::time::sleep(AFTER).await;
    let log = load.stop().await;
    fx.shoal.assert_running();
    // With xa, what a fault left prepared is resolved by Shoal's recovery; nothing is ever
    // prepared with best_effort.
    let prepared_cleared_after = wait_no_prepared(&fx.cluster, Duration::from_secs(60)).await;
    match tokio::time::timeout(Duration::from_secs(120), fx.cluster.sync_replicas()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!(
            "replicas do not catch up: {e}\n{}",
            servers_state(&fx).await
        ),
        Err(_) => panic!(
            "replicas do not catch up within 120 s\n{}",
            servers_state(&fx).await
        ),
    }
    let snap = snapshot(&fx.cluster).await;
    let mut findings = compare(&log, &snap, &fx.accounts);
    findings.replica_diffs = replica_diffs(&fx.cluster).await;
    let report = Report {
        scenario: name.to_string(),
        mode,
        shoal_killed: matches!(fault, Fault::KillShoalDuringCommits),
        faults,
        log,
        findings,
        prepared_cleared_after,
    };
    if mode == Atomicity::BestEffort && report.findings.partial.is_empty() {
        println!("(no partial commit happened in this run)");
    }
    report.assert_invariants();
}

async fn inject(fx: &mut Fixture, load: &Workload, fault: Fault) -> Vec<FaultEvent> {
    match fault {
        Fault::KillPrimary => {
            vec![kill_and_restart(fx, load, 1, DOWN, "kill -9 of primary p1").await]
        }
        Fault::KillReplica => {
            // The restart starts replication again (`Cluster::restart`).
            vec![kill_and_restart(fx, load, REPLICA_OF[0], DOWN, "kill -9 of replica p0r0").await]
        }
        Fault::KillShoalDuringCommits => {
            let mut events = Vec::new();
            for _ in 0..3 {
                events.push(kill_shoal_during_a_commit(fx, load).await);
                tokio::time::sleep(Duration::from_millis(1500)).await;
            }
            events
        }
        Fault::TermShoal => {
            let at = load.now();
            fx.shoal.signal(libc::SIGTERM);
            let status =
                tokio::task::block_in_place(|| fx.shoal.wait_exit(Duration::from_secs(30)));
            let exited = load.now();
            let status = status.unwrap_or_else(|| panic!("shoal did not stop on SIGTERM"));
            let left = prepared_xids(&fx.cluster).await;
            tokio::task::block_in_place(|| fx.shoal.restart());
            let restored = load.now();
            vec![FaultEvent {
                what: format!(
                    "SIGTERM of Shoal (exited after {:.2}s, {status})",
                    (exited - at).as_secs_f64()
                ),
                at,
                restored,
                prepared_at_restore: left.len(),
                resolved_after: wait_resolved(&fx.cluster, &left, RESOLVE_LIMIT).await,
            }]
        }
        Fault::StopPrimary => {
            let stall = fx
                .settings
                .query_timeout
                .map_or(Duration::from_secs(5), |t| t + Duration::from_secs(3));
            let what = format!("SIGSTOP of primary p1 for {:.1}s", stall.as_secs_f64());
            vec![stop_and_continue(fx, load, 1, stall, &what).await]
        }
    }
}

/// The harness's view of XA recovery works on real servers: a transaction left prepared on a
/// primary is seen, and its resolution (here a rollback by hand) is awaited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_xa_transactions_are_seen_until_resolved() {
    let fx = Fixture::start(Settings::BEST_EFFORT).await;
    let mut c = admin(&fx.cluster, 1).await;
    for sql in [
        "XA START 'faults-probe'",
        "INSERT INTO a.event (id, writer, seq, op) VALUES (1, 0, 0, 1)",
        "XA END 'faults-probe'",
        "XA PREPARE 'faults-probe'",
    ] {
        c.query_drop(sql).await.unwrap();
    }
    let left = prepared_xids(&fx.cluster).await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        wait_resolved(&fx.cluster, &left, Duration::from_millis(300))
            .await
            .is_none(),
        "still prepared"
    );
    // MariaDB hands a prepared transaction over to other sessions once its own has ended
    // (as it does to a recovering Shoal after the one that prepared it died).
    // COM_QUIT is not acknowledged: the server may still be ending that session when the next
    // one asks, and then answers XAER_NOTA. Wait until its thread is gone.
    let ended = c.id();
    c.disconnect().await.unwrap();
    let mut other = admin(&fx.cluster, 1).await;
    let start = tokio::time::Instant::now();
    while other
        .query_first::<u64, _>(format!(
            "SELECT id FROM information_schema.processlist WHERE id = {ended}"
        ))
        .await
        .unwrap()
        .is_some()
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "session {ended} never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    other
        .query_drop("XA ROLLBACK 'faults-probe'")
        .await
        .unwrap();
    assert!(
        wait_resolved(&fx.cluster, &left, Duration::from_secs(10))
            .await
            .is_some()
    );
    assert_eq!(
        wait_no_prepared(&fx.cluster, Duration::from_secs(10))
            .await
            .map(|_| ()),
        Some(())
    );
}

/// What every server is doing, for a failure message: GTID positions, prepared XA
/// transactions and the statements running.
async fn servers_state(fx: &Fixture) -> String {
    let mut out = String::new();
    for i in 0..fx.cluster.instances().len() {
        let mut c = admin(&fx.cluster, i).await;
        let pos: Option<(String, String)> = c
            .query_first("SELECT @@gtid_current_pos, @@gtid_slave_pos")
            .await
            .unwrap_or(None);
        let xa: Vec<mysql_async::Row> = c.query("XA RECOVER").await.unwrap_or_default();
        let xids: Vec<String> = xa
            .iter()
            .map(|r| {
                r.get::<Vec<u8>, _>("data")
                    .map(|d| String::from_utf8_lossy(&d).into_owned())
                    .unwrap_or_default()
            })
            .collect();
        let running: Vec<(u64, String, String, Option<String>, u64)> = c
            .query(
                "SELECT id, user, state, LEFT(info, 100), time FROM information_schema.processlist \
                 WHERE command <> 'Sleep' AND id <> CONNECTION_ID()",
            )
            .await
            .unwrap_or_default();
        out.push_str(&format!(
            "instance {i} ({}): positions {pos:?}; XA prepared {xids:?}; running {running:?}\n",
            fx.cluster.instances()[i].name()
        ));
    }
    out
}
