//! A transaction over datanodes is all or nothing whatever the client sends next (issue 45):
//! when a server ends one branch (a deadlock's 1213) or a branch's connection is lost, every
//! branch is rolled back at once and the session is outside its transaction, as one MariaDB
//! leaves it after 1213: the client's COMMIT, BEGIN or next statement commits nothing of it.
//! A stored function called by a SELECT counts as a write (its branch is prepared), and a
//! COMMIT whose `XA COMMIT` was lost after the decision is finished before it is answered, so
//! the session reads its own commit back.
//!
//! The layout is the demo's (`shoal_tests::demo_layout_yaml`): `orders` sharded by `user_id`
//! mod 4 over dn1..dn4 (server 0 `a`, `b`, server 1 `a`, `b`): users 4 and 8 are on dn1,
//! user 1 on dn2, users 2 and 6 on dn3, user 3 on dn4. Every check reads the servers directly.

use std::time::Duration;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_tests::orders::{Options, Orders};
use shoal_tests::within;

/// The fixture (`shoal_tests::orders`), under the name these tests use.
type Setup = Orders;

/// Started with `transactions` and the `SHOAL_FAULT` hook `fault`.
async fn start(transactions: &str, fault: Option<&str>) -> Setup {
    Orders::start(Options {
        transactions,
        fault,
        ..Default::default()
    })
    .await
}

/// What a client does after its statement got 1213.
#[derive(Debug, Clone, Copy)]
enum Reaction {
    Rollback,
    /// Retries at once with BEGIN (on one MariaDB the transaction is gone already).
    Begin,
    Commit,
    /// Sends its next statement as if nothing happened (user 3's row, on dn4), then COMMIT.
    Next,
}

/// Two transfers that lock rows of dn3 (server 1) in opposite orders after each wrote
/// elsewhere (the first on dn1, the second on dn2): InnoDB on server 1 ends one with 1213.
/// The victim reacts with `reaction`, the other commits. Returns (victim's debited row,
/// winner's debited row).
async fn deadlock(s: &Setup, reaction: Reaction) -> (i64, i64) {
    let mut a = s.client().await;
    let mut b = s.client().await;
    // A test that fails waits 5 s for a lock, not 50.
    for c in [&mut a, &mut b] {
        c.query_drop("SET SESSION innodb_lock_wait_timeout = 5")
            .await
            .unwrap();
    }
    a.query_drop("BEGIN").await.unwrap();
    a.query_drop("UPDATE orders SET amount = amount - 10 WHERE user_id = 4")
        .await
        .unwrap();
    a.query_drop("SELECT amount FROM orders WHERE user_id = 2 AND id = 2 FOR UPDATE")
        .await
        .unwrap();
    b.query_drop("BEGIN").await.unwrap();
    b.query_drop("UPDATE orders SET amount = amount - 10 WHERE user_id = 1")
        .await
        .unwrap();
    b.query_drop("SELECT amount FROM orders WHERE user_id = 6 AND id = 5 FOR UPDATE")
        .await
        .unwrap();
    let waiting = tokio::spawn(async move {
        let r = a
            .query_drop("SELECT amount FROM orders WHERE user_id = 6 AND id = 5 FOR UPDATE")
            .await;
        (a, r)
    });
    // A waits for B's lock before B asks for A's.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rb = b
        .query_drop("SELECT amount FROM orders WHERE user_id = 2 AND id = 2 FOR UPDATE")
        .await;
    let (a, ra) = within(Duration::from_secs(30), "the deadlocked lock", waiting)
        .await
        .unwrap();
    let code = |r: &Result<(), mysql_async::Error>| match r {
        Err(mysql_async::Error::Server(e)) => Some(e.code),
        Err(e) => panic!("{e}"),
        Ok(()) => None,
    };
    let (mut victim, mut winner, victim_row, winner_row) = match (code(&ra), code(&rb)) {
        (Some(1213), None) => (a, b, 1, 3),
        (None, Some(1213)) => (b, a, 3, 1),
        other => panic!("expected one 1213, got {other:?}"),
    };
    match reaction {
        Reaction::Rollback => victim.query_drop("ROLLBACK").await.unwrap(),
        Reaction::Begin => {
            victim.query_drop("BEGIN").await.unwrap();
            victim.query_drop("ROLLBACK").await.unwrap();
        }
        Reaction::Commit => victim.query_drop("COMMIT").await.unwrap(),
        Reaction::Next => {
            victim
                .query_drop("UPDATE orders SET amount = amount + 10 WHERE user_id = 3")
                .await
                .unwrap();
            victim.query_drop("COMMIT").await.unwrap();
        }
    }
    winner.query_drop("COMMIT").await.unwrap();
    (victim_row, winner_row)
}

async fn deadlocks_end_every_branch(transactions: &str) {
    let s = start(transactions, None).await;
    for reaction in [
        Reaction::Commit,
        Reaction::Begin,
        Reaction::Next,
        Reaction::Rollback,
    ] {
        s.reset().await;
        let (victim_row, winner_row) = deadlock(&s, reaction).await;
        let amounts = s.amounts().await;
        let of = |id: i64| amounts.iter().find(|(i, _)| *i == id).unwrap().1;
        assert_eq!(
            of(victim_row),
            100,
            "{transactions}, {reaction:?}: the deadlock victim's debit on another datanode \
             was committed: {amounts:?}"
        );
        assert_eq!(
            of(winner_row),
            90,
            "{transactions}, {reaction:?}: {amounts:?}"
        );
        // As on one MariaDB after 1213: the statement after it ran outside the transaction
        // (autocommit), so it stays.
        let next = if matches!(reaction, Reaction::Next) {
            110
        } else {
            100
        };
        assert_eq!(of(4), next, "{transactions}, {reaction:?}: {amounts:?}");
    }
    s.shoal.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_rolls_back_every_datanode_whatever_the_client_sends_next() {
    deadlocks_end_every_branch("xa").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_rolls_back_every_datanode_without_xa_too() {
    deadlocks_end_every_branch("best_effort").await;
}

/// Server 1's thread running a statement whose text contains `marker` in database `a` (dn3),
/// for a KILL.
async fn thread_running(s: &Setup, marker: &str) -> u64 {
    let mut direct = Conn::new(s.cluster.opts(1, None)).await.unwrap();
    for _ in 0..100 {
        let id: Option<u64> = direct
            .exec_first(
                "SELECT ID FROM information_schema.PROCESSLIST \
                 WHERE DB = 'a' AND INFO LIKE ? AND ID <> CONNECTION_ID() LIMIT 1",
                (format!("%{marker}%"),),
            )
            .await
            .unwrap();
        if let Some(id) = id {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no thread on server 1 runs {marker}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_lost_during_a_read_over_datanodes_rolls_back_the_rest() {
    let s = start("xa", None).await;
    for commit_after in [true, false] {
        s.reset().await;
        let mut c = s.client().await;
        c.query_drop("BEGIN").await.unwrap();
        c.query_drop("UPDATE orders SET amount = amount - 10 WHERE user_id = 4")
            .await
            .unwrap();
        c.query_drop("UPDATE orders SET amount = amount + 10 WHERE user_id = 2")
            .await
            .unwrap();
        // A read over dn3 and dn4 (not dn1, which holds the debit) whose dn3 connection is
        // killed while it runs.
        let read = tokio::spawn(async move {
            let r: Result<Vec<i64>, _> = c
                .query("SELECT SLEEP(1) FROM orders WHERE user_id IN (2, 3)")
                .await;
            (c, r)
        });
        let thread = thread_running(&s, "SELECT SLEEP(1)").await;
        let mut direct = Conn::new(s.cluster.opts(1, None)).await.unwrap();
        direct
            .query_drop(format!("KILL CONNECTION {thread}"))
            .await
            .unwrap();
        let (mut c, r) = within(Duration::from_secs(30), "the read", read)
            .await
            .unwrap();
        assert!(r.is_err(), "a read that lost a datanode answered {r:?}");
        if commit_after {
            // The client ignores the error and commits: nothing of the transaction may.
            let _ = c.query_drop("COMMIT").await;
        } else {
            // It goes on: the transaction is gone, so this runs on its own.
            c.query_drop("UPDATE orders SET amount = amount + 1 WHERE user_id = 3")
                .await
                .unwrap();
        }
        let amounts = s.amounts().await;
        let of = |id: i64| amounts.iter().find(|(i, _)| *i == id).unwrap().1;
        assert_eq!(
            (of(1), of(2)),
            (100, 100),
            "half a transfer committed after a lost branch (commit: {commit_after}): \
             {amounts:?}\n{}",
            s.shoal.log()
        );
        if !commit_after {
            assert_eq!(of(4), 101, "{amounts:?}");
        }
    }
    s.shoal.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_function_that_writes_makes_its_branch_a_written_one() {
    let s = start("xa", None).await;
    // On dn3 (server 1, database `a`): a function that writes.
    let mut direct = Conn::new(s.cluster.opts(1, Some("a"))).await.unwrap();
    direct
        .query_drop("CREATE TABLE audit (n INT) ENGINE=InnoDB")
        .await
        .unwrap();
    direct
        .query_drop(
            "CREATE FUNCTION bump() RETURNS INT DETERMINISTIC MODIFIES SQL DATA \
             BEGIN INSERT INTO audit VALUES (1); RETURN 1; END",
        )
        .await
        .unwrap();
    let two_before = s.xa_stat("committed_two_phase").await;
    let one_before = s.xa_stat("committed_one_phase").await;
    let mut c = s.client().await;
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("UPDATE orders SET amount = amount - 10 WHERE user_id = 4")
        .await
        .unwrap();
    let one: Option<i64> = c
        .query_first("SELECT bump() FROM orders WHERE user_id = 2")
        .await
        .unwrap();
    assert_eq!(one, Some(1));
    c.query_drop("COMMIT").await.unwrap();
    // Two written branches: prepared and decided, not committed one by one.
    assert_eq!(
        (
            s.xa_stat("committed_two_phase").await,
            s.xa_stat("committed_one_phase").await
        ),
        (two_before + 1, one_before),
        "a branch whose SELECT called a writing function was committed without a prepare"
    );
    assert_eq!(s.amount(1).await, 90);
    let audited: Option<i64> = direct
        .query_first("SELECT COUNT(*) FROM audit")
        .await
        .unwrap();
    assert_eq!(audited, Some(1));
    s.shoal.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_lost_after_the_decision_is_finished_before_the_client_is_answered() {
    // The hook closes the first written branch's connection after the decision, before its
    // XA COMMIT: the branch stays prepared (its row locked, the old value visible).
    let s = start("xa", Some("xa-lose-commit")).await;
    let mut c = s.client().await;
    for round in 1..=3 {
        c.query_drop("BEGIN").await.unwrap();
        c.query_drop("UPDATE orders SET amount = amount - 10 WHERE user_id = 4")
            .await
            .unwrap();
        c.query_drop("UPDATE orders SET amount = amount + 10 WHERE user_id = 2")
            .await
            .unwrap();
        c.query_drop("COMMIT")
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}\n{}", s.shoal.log()));
        // The same session reads its commit back at once, on both datanodes.
        let read: Vec<(i64, i64)> = c
            .query("SELECT id, amount FROM orders WHERE user_id IN (4, 2) ORDER BY id")
            .await
            .unwrap();
        assert_eq!(
            read,
            vec![(1, 100 - 10 * round), (2, 100 + 10 * round)],
            "round {round}: an acknowledged COMMIT read back stale\n{}",
            s.shoal.log()
        );
    }
    s.shoal.terminate();
}

/// A 1205 on dn3 after a debit on dn1, then a credit on dn4 and COMMIT: the amounts of rows
/// 1 (the debit), 2 (the statement that timed out) and 4 (the credit) afterwards.
async fn after_a_lock_wait_timeout(s: &Setup) -> (i64, i64, i64) {
    let mut holder = s.client().await;
    holder.query_drop("BEGIN").await.unwrap();
    holder
        .query_drop("SELECT amount FROM orders WHERE user_id = 2 AND id = 2 FOR UPDATE")
        .await
        .unwrap();
    let mut c = s.client().await;
    c.query_drop("SET SESSION innodb_lock_wait_timeout = 1")
        .await
        .unwrap();
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("UPDATE orders SET amount = amount - 10 WHERE user_id = 4")
        .await
        .unwrap();
    let (code, _, _) = shoal_tests::server_error(
        c.query_drop("UPDATE orders SET amount = amount + 10 WHERE user_id = 2 AND id = 2")
            .await,
    );
    assert_eq!(code, 1205);
    holder.query_drop("ROLLBACK").await.unwrap();
    c.query_drop("UPDATE orders SET amount = amount + 10 WHERE user_id = 3")
        .await
        .unwrap();
    c.query_drop("COMMIT").await.unwrap();
    let amounts = s.amounts().await;
    let of = |id: i64| amounts.iter().find(|(i, _)| *i == id).unwrap().1;
    (of(1), of(2), of(4))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_wait_timeout_ends_the_statement_only_as_on_one_mariadb() {
    // At MariaDB's default (innodb_rollback_on_timeout off) 1205 rolls back the statement
    // only: the transaction stays open on every datanode and its COMMIT commits the rest.
    let s = start("xa", None).await;
    assert_eq!(after_a_lock_wait_timeout(&s).await, (90, 100, 110));
    s.shoal.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_wait_timeout_that_rolls_back_the_transaction_ends_every_branch() {
    // With innodb_rollback_on_timeout=ON a 1205 rolls back the whole transaction on its server
    // (Shoal asks the server, @@in_transaction, rather than guessing its settings): every
    // branch is rolled back, the COMMIT after it commits nothing, the next statement (the
    // credit) runs on its own.
    let s = Orders::start(Options {
        server_options: &["innodb-rollback-on-timeout=ON".to_string()],
        ..Default::default()
    })
    .await;
    assert_eq!(
        after_a_lock_wait_timeout(&s).await,
        (100, 100, 110),
        "the debit before a 1205 that rolled back its transaction was committed"
    );
    s.shoal.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_session_track_setting_never_turns_off_shoals_view_of_autocommit() {
    // Connector/J (rewriteBatchedStatements) sets session_track_system_variables at connect:
    // sent to a backend, it stopped the reports of `autocommit`, so a later autocommit=0 reached
    // one datanode only and ROLLBACK undid a quarter of the transaction.
    let s = start("xa", None).await;
    for value in ["'auto_increment_increment'", "''"] {
        s.reset().await;
        let mut c = s.client().await;
        c.query_drop(format!(
            "SET session_track_system_variables = {value}, sql_mode = 'STRICT_TRANS_TABLES'"
        ))
        .await
        .unwrap();
        c.query_drop("SET autocommit = 0").await.unwrap();
        for user in [4, 1, 2, 3] {
            c.query_drop(format!(
                "UPDATE orders SET amount = 0 WHERE user_id = {user}"
            ))
            .await
            .unwrap();
        }
        c.query_drop("ROLLBACK").await.unwrap();
        let amounts = s.amounts().await;
        assert!(
            amounts.iter().all(|(_, a)| *a == 100),
            "session_track_system_variables = {value}: ROLLBACK left {amounts:?}"
        );
        let mode: Option<String> = c.query_first("SELECT @@sql_mode").await.unwrap();
        assert_eq!(mode.as_deref(), Some("STRICT_TRANS_TABLES"));
    }
    s.shoal.terminate();
}
