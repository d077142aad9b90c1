//! Transactions over datanodes commit through XA (issue 25), end to end over two real MariaDB
//! servers: a transfer between datanodes on both servers is prepared, decided (a row in
//! `shoal_xa.decisions`, collected afterwards) and committed; a one-datanode transaction
//! commits in one phase without a decision; ROLLBACK, a failing statement and a failing
//! prepare roll back every datanode; autocommit=0 sessions and autocommit writes over several
//! datanodes use it too. With Shoal aborted (the `SHOAL_FAULT` test hook) between prepare and
//! decision, the branches stay prepared on the servers and a restarted Shoal's recovery rolls
//! them back; aborted after the decision, recovery commits them; `SHOW SHOAL XA` says what it
//! did.
//!
//! The layout is the demo's (`shoal_tests::demo_layout_yaml`): `orders` sharded by `user_id`
//! mod 4 over dn1..dn4 (server 0 `a`, `b`, server 1 `a`, `b`): user 4 is on dn1 (server 0),
//! user 2 on dn3 (server 1).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shoal_bench::cluster::Cluster;
use shoal_tests::{ShoalProcess, server_error, text_rows};

const DBS: [&str; 2] = ["a", "b"];

/// Recovery runs every second and leaves transactions younger than 3 s alone.
const XA_SETTINGS: &str = "server:\n  xa: { recovery_interval: 1s, recovery_grace: 3s }\n";

struct Setup {
    cluster: Cluster,
    config: PathBuf,
    shoal: Option<ShoalProcess>,
}

impl Setup {
    async fn start(transactions: &str, fault: Option<&str>) -> Setup {
        let cluster = Cluster::start(shoal_bench::cluster::ClusterSpec {
            primaries: 2,
            databases: DBS.iter().map(|d| d.to_string()).collect(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"));
        let layout = shoal_tests::demo_layout_yaml(1).replace(
            "  - name: shop\n",
            &format!("  - name: shop\n    transactions: {transactions}\n"),
        ) + XA_SETTINGS;
        // `app` reads SHOW SHOAL XA: an admin.
        let users = "  - { name: app, password: app-secret, schemas: [shop], admin: true }\n";
        let config = shoal_tests::cluster_config(&cluster, users, &layout, "xa");
        let mut s = Setup {
            cluster,
            config,
            shoal: None,
        };
        s.start_shoal(fault);
        let mut c = s.client().await;
        c.query_drop(
            "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, amount INT) \
             ENGINE=InnoDB",
        )
        .await
        .unwrap();
        c.query_drop("CREATE TABLE country (code CHAR(2) PRIMARY KEY, name VARCHAR(20))")
            .await
            .unwrap();
        c.query_drop("INSERT INTO orders (id, user_id, amount) VALUES (1, 4, 100)")
            .await
            .unwrap();
        c.query_drop("INSERT INTO orders (id, user_id, amount) VALUES (2, 2, 0)")
            .await
            .unwrap();
        s
    }

    fn start_shoal(&mut self, fault: Option<&str>) {
        let args = ["--config".to_string(), self.config.display().to_string()];
        let env: Vec<(&str, &str)> = fault.map(|f| ("SHOAL_FAULT", f)).into_iter().collect();
        self.shoal = Some(ShoalProcess::start_with_env(&args, &env));
    }

    fn shoal(&self) -> &ShoalProcess {
        self.shoal.as_ref().expect("shoal running")
    }

    async fn client(&self) -> Conn {
        match Conn::new(self.shoal().opts_as("app", "app-secret", Some("shop"))).await {
            Ok(c) => c,
            Err(e) => panic!("connect through shoal: {e}\n{}", self.shoal().log()),
        }
    }

    /// A direct connection to server `i` (0 or 1).
    async fn server(&self, i: usize, db: Option<&str>) -> Conn {
        Conn::new(self.cluster.opts(i, db)).await.unwrap()
    }

    /// `orders` (id, amount) as stored on datanode dn1 (server 0 `a`) and dn3 (server 1 `a`).
    async fn amounts(&self) -> (Vec<(i64, i64)>, Vec<(i64, i64)>) {
        let mut out = Vec::new();
        for i in 0..2 {
            let mut b = self.server(i, Some("a")).await;
            let rows: Vec<(i64, i64)> = b
                .query("SELECT id, amount FROM orders ORDER BY id")
                .await
                .unwrap();
            out.push(rows);
        }
        (out[0].clone(), out[1].clone())
    }

    /// Our prepared branches on server `i` (XA RECOVER, Shoal's formatID).
    async fn prepared(&self, i: usize) -> Vec<String> {
        let mut b = self.server(i, None).await;
        let rows: Vec<Row> = b.query("XA RECOVER").await.unwrap();
        rows.into_iter()
            .filter(|r| r.get::<i64, _>(0) == Some(0x5348))
            .map(|r| r.get::<String, _>(3).unwrap_or_default())
            .collect()
    }

    /// The decision log's rows: (outcome, datanodes).
    async fn decisions(&self) -> Vec<(String, String)> {
        let mut b = self.server(0, None).await;
        b.query("SELECT outcome, datanodes FROM shoal_xa.decisions ORDER BY decided")
            .await
            .unwrap_or_default()
    }

    /// `SHOW SHOAL XA` as (column, value).
    async fn xa_stats(&self) -> Vec<(String, Option<String>)> {
        let mut c = self.client().await;
        let rows: Vec<Row> = c.query("SHOW SHOAL XA").await.unwrap();
        let row = rows.into_iter().next().expect("one row");
        shoal_tests::named_values(&row)
    }

    async fn stat(&self, name: &str) -> u64 {
        self.xa_stats()
            .await
            .into_iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v)
            .unwrap_or_else(|| panic!("no {name} in SHOW SHOAL XA"))
            .parse()
            .unwrap()
    }

    /// Waits (up to 40 s) until `SHOW SHOAL XA`'s `name` reaches `n`.
    async fn wait_stat(&self, name: &str, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            let v = self.stat(name).await;
            if v >= n {
                assert_eq!(v, n, "{name}: {:?}", self.xa_stats().await);
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "{name} stayed at {v} (wanted {n}): {:?}\n{}",
                    self.xa_stats().await,
                    self.shoal().log()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

async fn transfer(c: &mut Conn) {
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("UPDATE orders SET amount = amount - 10 WHERE user_id = 4")
        .await
        .unwrap();
    c.query_drop("UPDATE orders SET amount = amount + 10 WHERE user_id = 2")
        .await
        .unwrap();
}

#[tokio::test]
async fn a_transfer_over_two_servers_commits_through_xa() {
    let s = Setup::start("xa", None).await;
    let mut c = s.client().await;
    let two_before = s.stat("committed_two_phase").await;
    transfer(&mut c).await;
    c.query_drop("COMMIT").await.unwrap();
    assert_eq!(s.amounts().await, (vec![(1, 90)], vec![(2, 10)]));
    assert_eq!(s.stat("committed_two_phase").await, two_before + 1);
    // The decision was logged before the branches committed; nothing is left prepared.
    let decisions = s.decisions().await;
    assert!(
        decisions
            .iter()
            .any(|(o, d)| o == "commit" && d == "dn1,dn3"),
        "{decisions:?}"
    );
    assert!(s.prepared(0).await.is_empty() && s.prepared(1).await.is_empty());
    // Recovery collects the decision row once no branch of it is left (after the grace).
    let deadline = Instant::now() + Duration::from_secs(30);
    while !s.decisions().await.is_empty() {
        assert!(Instant::now() < deadline, "decision row never collected");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // A transaction on one datanode, and one reading a second datanode: one phase, no record.
    let one_before = s.stat("committed_one_phase").await;
    let two_before = s.stat("committed_two_phase").await;
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("UPDATE orders SET amount = amount - 1 WHERE user_id = 4")
        .await
        .unwrap();
    c.query_drop("UPDATE orders SET amount = amount - 1 WHERE user_id = 4")
        .await
        .unwrap();
    c.query_drop("COMMIT").await.unwrap();
    c.query_drop("START TRANSACTION").await.unwrap();
    let read: Option<i64> = c
        .query_first("SELECT amount FROM orders WHERE user_id = 2")
        .await
        .unwrap();
    assert_eq!(read, Some(10));
    c.query_drop("UPDATE orders SET amount = amount - 1 WHERE user_id = 4")
        .await
        .unwrap();
    c.query_drop("COMMIT").await.unwrap();
    assert_eq!(s.amounts().await, (vec![(1, 87)], vec![(2, 10)]));
    assert_eq!(s.stat("committed_one_phase").await, one_before + 2);
    assert_eq!(s.stat("committed_two_phase").await, two_before);
    assert!(s.decisions().await.is_empty());

    // Autocommit writes over several datanodes: their own XA transaction.
    c.query_drop(
        "INSERT INTO orders (id, user_id, amount) VALUES (11, 1, 1), (12, 2, 2), (13, 3, 3), (14, 4, 4)",
    )
    .await
    .unwrap();
    c.query_drop("INSERT INTO country (code, name) VALUES ('fr', 'France')")
        .await
        .unwrap();
    c.query_drop("UPDATE orders SET amount = amount + 100 WHERE id > 10")
        .await
        .unwrap();
    assert_eq!(s.stat("committed_two_phase").await, two_before + 3);
    let n: Option<i64> = c
        .query_first("SELECT SUM(amount) FROM orders WHERE id > 10")
        .await
        .unwrap();
    assert_eq!(n, Some(410));
    for i in 0..2 {
        for db in DBS {
            let mut b = s.server(i, Some(db)).await;
            let name: Option<String> = b
                .query_first("SELECT name FROM country WHERE code = 'fr'")
                .await
                .unwrap();
            assert_eq!(name.as_deref(), Some("France"), "server {i} {db}");
        }
    }
    assert!(s.prepared(0).await.is_empty() && s.prepared(1).await.is_empty());
}

#[tokio::test]
async fn rollback_failures_and_autocommit_off_roll_back_every_datanode() {
    let s = Setup::start("xa", None).await;
    let mut c = s.client().await;
    transfer(&mut c).await;
    c.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(s.amounts().await, (vec![(1, 100)], vec![(2, 0)]));

    // A write over several datanodes that fails on one: the whole transaction goes.
    transfer(&mut c).await;
    let (code, _, message) = server_error(
        c.query_drop("INSERT INTO orders (id, user_id, amount) VALUES (21, 1, 0), (2, 2, 0)")
            .await,
    );
    assert_eq!(code, 1062, "{message}");
    assert!(message.contains("rolled back"), "{message}");
    c.query_drop("COMMIT").await.unwrap();
    assert_eq!(s.amounts().await, (vec![(1, 100)], vec![(2, 0)]));

    // A branch lost before COMMIT (its connection killed: the server rolls it back): the
    // prepare fails there and every datanode rolls back.
    transfer(&mut c).await;
    let mut admin = s.server(1, None).await;
    let ids: Vec<u64> = admin
        .query(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = 'a' AND ID <> \
             CONNECTION_ID()",
        )
        .await
        .unwrap();
    assert!(!ids.is_empty(), "no Shoal connection on dn3");
    for id in ids {
        let _ = admin.query_drop(format!("KILL CONNECTION {id}")).await;
    }
    let (_, _, message) = server_error(c.query_drop("COMMIT").await);
    assert!(
        message.contains("dn3") && message.contains("rolled back on every datanode"),
        "{message}"
    );
    assert_eq!(s.amounts().await, (vec![(1, 100)], vec![(2, 0)]));
    assert!(s.prepared(0).await.is_empty() && s.prepared(1).await.is_empty());
    // The session goes on.
    transfer(&mut c).await;
    c.query_drop("COMMIT").await.unwrap();
    assert_eq!(s.amounts().await, (vec![(1, 90)], vec![(2, 10)]));

    // autocommit=0: the implicit transaction's branches are XA branches too.
    let two_before = s.stat("committed_two_phase").await;
    c.query_drop("SET autocommit = 0").await.unwrap();
    c.query_drop("UPDATE orders SET amount = amount - 10 WHERE user_id = 4")
        .await
        .unwrap();
    c.query_drop("UPDATE orders SET amount = amount + 10 WHERE user_id = 2")
        .await
        .unwrap();
    c.query_drop("COMMIT").await.unwrap();
    assert_eq!(s.amounts().await, (vec![(1, 80)], vec![(2, 20)]));
    assert_eq!(s.stat("committed_two_phase").await, two_before + 1);
    c.query_drop("UPDATE orders SET amount = 0 WHERE user_id = 4")
        .await
        .unwrap();
    c.query_drop("UPDATE orders SET amount = 0 WHERE user_id = 2")
        .await
        .unwrap();
    c.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(s.amounts().await, (vec![(1, 80)], vec![(2, 20)]));
    // DDL commits the open transaction first, as MariaDB's implicit commit does.
    c.query_drop("UPDATE orders SET amount = 1 WHERE user_id = 4")
        .await
        .unwrap();
    c.query_drop("UPDATE orders SET amount = 1 WHERE user_id = 2")
        .await
        .unwrap();
    c.query_drop("CREATE TABLE notes (id INT PRIMARY KEY)")
        .await
        .unwrap();
    c.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(s.amounts().await, (vec![(1, 1)], vec![(2, 1)]));
    // SET autocommit=1 commits too.
    c.query_drop("UPDATE orders SET amount = 2 WHERE user_id = 4")
        .await
        .unwrap();
    c.query_drop("UPDATE orders SET amount = 2 WHERE user_id = 2")
        .await
        .unwrap();
    c.query_drop("SET autocommit = 1").await.unwrap();
    assert_eq!(s.amounts().await, (vec![(1, 2)], vec![(2, 2)]));
    c.query_drop("UPDATE orders SET amount = 3 WHERE user_id = 4")
        .await
        .unwrap();
    assert_eq!(s.amounts().await, (vec![(1, 3)], vec![(2, 2)]));
    assert!(s.prepared(0).await.is_empty() && s.prepared(1).await.is_empty());

    // WITH CONSISTENT SNAPSHOT begins with plain BEGINs: its writes stay on one datanode.
    c.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .await
        .unwrap();
    c.query_drop("UPDATE orders SET amount = 5 WHERE user_id = 4")
        .await
        .unwrap();
    let (code, _, message) = server_error(
        c.query_drop("UPDATE orders SET amount = 5 WHERE user_id = 2")
            .await,
    );
    assert_eq!(code, 1235, "{message}");
    assert!(message.contains("WITH CONSISTENT SNAPSHOT"), "{message}");
    c.query_drop("COMMIT").await.unwrap();
    assert_eq!(s.amounts().await, (vec![(1, 5)], vec![(2, 2)]));
}

/// Shoal aborts after preparing both branches, before any decision: they stay prepared on the
/// servers; a restarted Shoal's recovery finds no decision and rolls them back.
#[tokio::test]
async fn a_crash_before_the_decision_is_rolled_back_by_recovery() {
    let mut s = Setup::start("xa", Some("xa-after-prepare")).await;
    let mut c = s.client().await;
    transfer(&mut c).await;
    let r = c.query_drop("COMMIT").await;
    assert!(r.is_err(), "COMMIT answered OK from an aborting Shoal");
    let status = s.shoal.take().unwrap().wait_exit(Duration::from_secs(10));
    assert!(status.is_some_and(|st| !st.success()), "{status:?}");
    assert_eq!(s.prepared(0).await.len(), 1);
    assert_eq!(s.prepared(1).await.len(), 1);
    assert!(s.decisions().await.is_empty());
    s.start_shoal(None);
    s.wait_stat("recovered_rollback", 2).await;
    assert_eq!(s.stat("recovered_commit").await, 0);
    assert!(s.prepared(0).await.is_empty() && s.prepared(1).await.is_empty());
    assert_eq!(s.amounts().await, (vec![(1, 100)], vec![(2, 0)]));
    // Recovery left a tombstone: the dead coordinator could not have committed after it.
    let d = s.decisions().await;
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].0, "rollback");
    let stats = s.xa_stats().await;
    assert!(
        stats
            .iter()
            .any(|(n, v)| n == "last_recovery" && v.is_some()),
        "{stats:?}"
    );
    // Rows are usable again (the prepared branches held their locks).
    let mut c = s.client().await;
    c.query_drop("UPDATE orders SET amount = 1 WHERE user_id IN (2, 4)")
        .await
        .unwrap();
}

/// Shoal aborts after the commit decision, before any XA COMMIT: a restarted Shoal's recovery
/// commits both branches.
#[tokio::test]
async fn a_crash_after_the_decision_is_committed_by_recovery() {
    let mut s = Setup::start("xa", Some("xa-after-decision")).await;
    let mut c = s.client().await;
    transfer(&mut c).await;
    assert!(c.query_drop("COMMIT").await.is_err());
    let status = s.shoal.take().unwrap().wait_exit(Duration::from_secs(10));
    assert!(status.is_some_and(|st| !st.success()), "{status:?}");
    assert_eq!(s.prepared(0).await.len(), 1);
    assert_eq!(s.prepared(1).await.len(), 1);
    let d = s.decisions().await;
    assert_eq!(d, vec![("commit".to_string(), "dn1,dn3".to_string())]);
    s.start_shoal(None);
    s.wait_stat("recovered_commit", 2).await;
    assert_eq!(s.stat("recovered_rollback").await, 0);
    assert!(s.prepared(0).await.is_empty() && s.prepared(1).await.is_empty());
    assert_eq!(s.amounts().await, (vec![(1, 90)], vec![(2, 10)]));
    let mut c = s.client().await;
    let rows = text_rows(
        &mut c,
        "SELECT user_id, amount FROM orders ORDER BY user_id",
    )
    .await;
    assert_eq!(
        rows,
        vec![
            vec![Some("2".into()), Some("10".into())],
            vec![Some("4".into()), Some("90".into())]
        ]
    );
}

/// `transactions: best_effort`: no XA; a lost branch at COMMIT is error 1180 naming both sides.
#[tokio::test]
async fn best_effort_commits_each_datanode_in_turn() {
    let s = Setup::start("best_effort", None).await;
    let mut c = s.client().await;
    transfer(&mut c).await;
    let mut admin = s.server(1, None).await;
    let ids: Vec<u64> = admin
        .query(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = 'a' AND ID <> \
             CONNECTION_ID()",
        )
        .await
        .unwrap();
    for id in ids {
        let _ = admin.query_drop(format!("KILL CONNECTION {id}")).await;
    }
    let (code, _, message) = server_error(c.query_drop("COMMIT").await);
    assert_eq!(code, 1180, "{message}");
    assert_eq!(s.amounts().await, (vec![(1, 90)], vec![(2, 0)]));
    assert_eq!(s.stat("committed_two_phase").await, 0);
    assert!(s.decisions().await.is_empty());
}
