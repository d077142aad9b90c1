//! How Shoal decides a datahost's primary (issue 45), end to end over real MariaDB replication
//! whose replica is at MariaDB's default `read_only=0` (the launcher starts replicas
//! read-only; each test sets its replica writable, as an unconfigured server is): a stalled
//! primary keeps its writes and its role, a real external failover is followed, two writable
//! servers replicating from nobody make writes fail naming both, and an old primary that comes
//! back is not written to again until a reload says so. What happened is checked on the
//! backends themselves (rows, GTIDs); every wait is a poll with a generous deadline.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_tests::{ShoalProcess, scratch_dir, unique_name};

const DB: &str = "pd";
const PRIMARY: usize = 0;
const REPLICA: usize = 1;

/// A primary and its replica (database `pd`, table `w`), the replica made writable
/// (`read_only=0`, MariaDB's default), and Shoal over them as one datahost with quick checks.
async fn start() -> (Cluster, ShoalProcess, PathBuf) {
    let cluster = Cluster::start(ClusterSpec {
        primaries: 1,
        replicas_per_primary: 1,
        databases: vec![DB.to_string()],
        ..ClusterSpec::default()
    })
    .await
    .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"));
    let mut p = admin(&cluster, PRIMARY).await;
    p.query_drop(format!(
        "CREATE TABLE {DB}.w (id BIGINT PRIMARY KEY, writer INT NOT NULL) ENGINE=InnoDB"
    ))
    .await
    .unwrap();
    cluster.sync_replicas().await.expect("replica caught up");
    let mut r = admin(&cluster, REPLICA).await;
    r.query_drop("SET GLOBAL read_only = 0").await.unwrap();
    let config = write_config(&cluster);
    let shoal = ShoalProcess::start(&["--config".to_string(), config.display().to_string()]);
    let mut c = client(&shoal).await;
    // The first checks done: both servers' state known.
    wait_backends(&mut c, &shoal, "the first checks never finished", |rows| {
        rows.iter().all(|r| r.state == "up" && r.lag.is_some())
    })
    .await;
    (cluster, shoal, config)
}

fn write_config(cluster: &Cluster) -> PathBuf {
    let (u, pw) = (cluster.user(), cluster.password());
    let text = format!(
        "users:\n  - {{ name: app, password: app-secret, schemas: [shop], admin: true }}\n\
         datahosts:\n  - name: dh1\n    \
         primary: {{ address: {}, user: {u}, password: {pw} }}\n    \
         replicas:\n      - {{ address: {}, user: {u}, password: {pw} }}\n    \
         balance: round_robin\n    pool: {{ max: 20 }}\n    \
         health: {{ heartbeat: 200ms, timeout: 500ms, down_after: 2, up_after: 2 }}\n\
         datanodes:\n  - {{ name: dn1, datahost: dh1, database: {DB} }}\n\
         schemas:\n  - name: shop\n    default_datanode: dn1\n",
        addr_of(cluster, PRIMARY),
        addr_of(cluster, REPLICA)
    );
    let path = scratch_dir().join(format!("{}.yaml", unique_name("primary")));
    std::fs::write(&path, text).expect("write config");
    path
}

fn addr_of(cluster: &Cluster, i: usize) -> String {
    let inst = &cluster.instances()[i];
    format!("{}:{}", inst.host, inst.port)
}

async fn admin(cluster: &Cluster, i: usize) -> Conn {
    admin_opts(cluster.admin_opts(i)).await
}

async fn admin_opts(opts: Opts) -> Conn {
    Conn::new(opts).await.expect("admin connection")
}

async fn client(shoal: &ShoalProcess) -> Conn {
    match Conn::new(shoal.opts_as("app", "app-secret", Some("shop"))).await {
        Ok(c) => c,
        Err(e) => panic!("connect through shoal: {e}\n{}", shoal.log()),
    }
}

/// One `SHOW SHOAL BACKENDS` row.
#[derive(Debug, Clone)]
struct Backend {
    address: String,
    role: String,
    state: String,
    lag: Option<String>,
}

async fn backends(c: &mut Conn) -> Vec<Backend> {
    let rows: Vec<mysql_async::Row> = c
        .query("SHOW SHOAL BACKENDS")
        .await
        .expect("SHOW SHOAL BACKENDS");
    rows.into_iter()
        .map(|r| Backend {
            address: r.get("address").unwrap(),
            role: r.get("role").unwrap(),
            state: r.get("state").unwrap(),
            lag: r.get::<Option<String>, _>("lag").unwrap(),
        })
        .collect()
}

/// Polls `SHOW SHOAL BACKENDS` until `done` holds; fails saying `what` after 60 s.
async fn wait_backends(
    c: &mut Conn,
    shoal: &ShoalProcess,
    what: &str,
    done: impl Fn(&[Backend]) -> bool,
) -> Vec<Backend> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = backends(c).await;
        if done(&rows) {
            return rows;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {rows:?}\n{}",
            shoal.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn role_of(rows: &[Backend], addr: &str) -> String {
    rows.iter()
        .find(|r| r.address == addr)
        .map(|r| r.role.clone())
        .unwrap_or_else(|| panic!("no row for {addr}: {rows:?}"))
}

/// The ids in `pd.w` on instance `i`, read directly.
async fn ids_on(cluster: &Cluster, i: usize) -> Vec<u64> {
    admin(cluster, i)
        .await
        .query(format!("SELECT id FROM {DB}.w ORDER BY id"))
        .await
        .unwrap()
}

/// The GTIDs instance `i` wrote itself: entries of its `gtid_binlog_state` with its own
/// server id (with `log-slave-updates`, what it replicated carries its primary's).
async fn own_gtids(cluster: &Cluster, i: usize) -> Vec<String> {
    let mut c = admin(cluster, i).await;
    let (id, state): (u64, String) = c
        .query_first("SELECT @@server_id, @@gtid_binlog_state")
        .await
        .unwrap()
        .unwrap();
    state
        .split(',')
        .map(str::trim)
        .filter(|g| g.split('-').nth(1) == Some(id.to_string().as_str()))
        .map(str::to_string)
        .collect()
}

/// Inserts through Shoal until one is acknowledged (60 s at most), trying ids from `next`;
/// returns the id written.
async fn write_until_ok(c: &mut Conn, shoal: &ShoalProcess, next: &mut u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        *next += 1;
        match c
            .query_drop(format!("INSERT INTO w VALUES ({next}, 0)"))
            .await
        {
            Ok(()) => return *next,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "writes never resumed: {e}\n{}",
                    shoal.log()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Inserts through Shoal until one fails with 1429 (60 s at most); returns its message.
async fn write_until_refused(c: &mut Conn, shoal: &ShoalProcess, next: &mut u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        *next += 1;
        match c
            .query_drop(format!("INSERT INTO w VALUES ({next}, 0)"))
            .await
        {
            Err(mysql_async::Error::Server(e)) if e.code == 1429 => return e.message,
            other => {
                assert!(
                    Instant::now() < deadline,
                    "writes were never refused with 1429 (last: {other:?})\n{}",
                    shoal.log()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Sends SIGCONT to a stopped server when dropped (also when the test panics).
struct Stopped(libc::pid_t);

impl Stopped {
    fn stop(pid: u32) -> Stopped {
        // SAFETY: kill(2) on the pid of a server this test's cluster started.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        Stopped(pid as libc::pid_t)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as in `stop`.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// The failure: writers through Shoal, the primary stopped for 2 s (a long GC-like
/// stall, a VM pause), then continued. The replica, at read_only=0, replicates: it must never
/// be written to, whatever the missed checks. Afterwards, on the backends: the replica wrote
/// nothing of its own, holds exactly the primary's rows, every acknowledged insert is on the
/// primary, and `SHOW SHOAL BACKENDS` shows the roles unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_primary_keeps_its_writes_and_its_role() {
    let (cluster, shoal, _config) = start().await;
    let stop = Arc::new(AtomicBool::new(false));
    let acked_total = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for w in 0..4u64 {
        let (stop, acked_total) = (stop.clone(), acked_total.clone());
        let opts = shoal.opts_as("app", "app-secret", Some("shop"));
        writers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut errors = 0u64;
            let mut conn: Option<Conn> = None;
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let c = match conn.as_mut() {
                    Some(c) => c,
                    None => match Conn::new(opts.clone()).await {
                        Ok(c) => conn.insert(c),
                        Err(_) => {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    },
                };
                seq += 1;
                let id = (w + 1) * 1_000_000 + seq;
                match c
                    .query_drop(format!("INSERT INTO w VALUES ({id}, {w})"))
                    .await
                {
                    Ok(()) => {
                        acked.push(id);
                        acked_total.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(mysql_async::Error::Server(_)) => errors += 1,
                    Err(_) => {
                        errors += 1;
                        conn = None;
                    }
                }
            }
            (acked, errors)
        }));
    }
    let mut c = client(&shoal).await;
    let progress = |n: u64, what: &str| {
        let acked_total = acked_total.clone();
        let what = what.to_string();
        async move {
            let from = acked_total.load(Ordering::Relaxed);
            let deadline = Instant::now() + Duration::from_secs(60);
            while acked_total.load(Ordering::Relaxed) < from + n {
                assert!(Instant::now() < deadline, "no progress {what}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    progress(50, "before the stall").await;
    let primary_pid = cluster.instances()[PRIMARY].pid;
    let stalled = Stopped::stop(primary_pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(stalled);
    let (p, r) = (addr_of(&cluster, PRIMARY), addr_of(&cluster, REPLICA));
    // Writes go on after the stall, with the primary up again.
    wait_backends(&mut c, &shoal, "the primary never came back up", |rows| {
        rows.iter().any(|row| row.address == p && row.state == "up")
    })
    .await;
    progress(50, "after the stall").await;
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    let mut errors = 0;
    for w in writers {
        let (a, e) = w.await.unwrap();
        acked.extend(a);
        errors += e;
    }
    println!(
        "SIGSTOP of the primary for 2 s: {} inserts acknowledged, {errors} refused",
        acked.len()
    );
    let rows = backends(&mut c).await;
    assert_eq!(
        (role_of(&rows, &p), role_of(&rows, &r)),
        ("primary".to_string(), "replica".to_string()),
        "the roles moved: {rows:?}\n{}",
        shoal.log()
    );
    let own = own_gtids(&cluster, REPLICA).await;
    assert!(
        own.is_empty(),
        "the replica wrote transactions of its own (GTIDs {own:?}): writes went to it\n{}",
        shoal.log()
    );
    cluster.sync_replicas().await.expect("replica caught up");
    let on_primary = ids_on(&cluster, PRIMARY).await;
    let on_replica = ids_on(&cluster, REPLICA).await;
    let missing: Vec<u64> = acked
        .iter()
        .copied()
        .filter(|id| on_primary.binary_search(id).is_err())
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged inserts are not on the primary: {:?}",
        missing.len(),
        &missing[..missing.len().min(20)]
    );
    assert!(
        on_primary == on_replica,
        "the replica diverged from its primary: {} rows there, {} on the primary",
        on_replica.len(),
        on_primary.len()
    );
}

/// A real external failover is followed: the old primary made read-only, the replica detached
/// (STOP SLAVE; RESET SLAVE ALL), and writes go to the new primary. The old primary, made
/// writable again, is not written to: with two writable servers replicating from nobody,
/// writes fail naming both. Rejoined as a replica, writes go on at the new primary; when it
/// is switched back by hand, Shoal waits for the operator's word (a reload) before writing
/// to it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_external_failover_is_followed_and_the_old_primary_waits_for_a_reload() {
    let (cluster, shoal, _config) = start().await;
    let (p, r) = (addr_of(&cluster, PRIMARY), addr_of(&cluster, REPLICA));
    let mut c = client(&shoal).await;
    let mut next = 0u64;
    let first = write_until_ok(&mut c, &shoal, &mut next).await;
    assert!(ids_on(&cluster, PRIMARY).await.contains(&first));
    cluster.sync_replicas().await.unwrap();
    // The failover tool: the old primary demoted, the replica detached and writable.
    let mut old = admin(&cluster, PRIMARY).await;
    old.query_drop("SET GLOBAL read_only = 1").await.unwrap();
    let mut new = admin(&cluster, REPLICA).await;
    new.query_drop("STOP SLAVE").await.unwrap();
    new.query_drop("RESET SLAVE ALL").await.unwrap();
    let on_new = write_until_ok(&mut c, &shoal, &mut next).await;
    assert!(
        ids_on(&cluster, REPLICA).await.contains(&on_new),
        "the write after the failover is on the new primary"
    );
    assert!(!ids_on(&cluster, PRIMARY).await.contains(&on_new));
    let rows = backends(&mut c).await;
    assert_eq!(role_of(&rows, &r), "primary", "{rows:?}");
    assert_eq!(role_of(&rows, &p), "replica", "{rows:?}");

    // The old primary comes back writable, replicating from nobody: writes fail, naming both.
    let before = ids_on(&cluster, PRIMARY).await;
    old.query_drop("SET GLOBAL read_only = 0").await.unwrap();
    let message = write_until_refused(&mut c, &shoal, &mut next).await;
    assert!(
        message.contains(&p) && message.contains(&r) && message.contains("dn1"),
        "{message}"
    );
    assert_eq!(
        ids_on(&cluster, PRIMARY).await,
        before,
        "the old primary was written to"
    );

    // Rejoined as the new primary's replica: one primary again, writes go on there.
    let new_port = cluster.instances()[REPLICA].port;
    old.query_drop(format!(
        "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={new_port}, \
         MASTER_USER='shoal_repl', MASTER_PASSWORD='shoal_repl', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1"
    ))
    .await
    .unwrap();
    old.query_drop("START SLAVE").await.unwrap();
    let after = write_until_ok(&mut c, &shoal, &mut next).await;
    assert!(ids_on(&cluster, REPLICA).await.contains(&after));

    // Switched back by hand: the current primary demoted, the old one detached. Shoal does not
    // follow back to a primary it moved away from: writes fail (the current primary is
    // read-only) until a reload of the configuration, which names the old primary.
    let pos: String = new
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    new.query_drop("SET GLOBAL read_only = 1").await.unwrap();
    let waited: Option<i64> = old
        .exec_first("SELECT MASTER_GTID_WAIT(?, 60)", (pos,))
        .await
        .unwrap();
    assert_eq!(waited, Some(0), "the old primary caught up");
    old.query_drop("STOP SLAVE").await.unwrap();
    old.query_drop("RESET SLAVE ALL").await.unwrap();
    let before = ids_on(&cluster, PRIMARY).await;
    // Several checks of both servers' new state.
    tokio::time::sleep(Duration::from_secs(2)).await;
    next += 1;
    let refused = c
        .query_drop(format!("INSERT INTO w VALUES ({next}, 0)"))
        .await;
    assert!(refused.is_err(), "a write went somewhere");
    assert_eq!(ids_on(&cluster, PRIMARY).await, before);
    let rows = backends(&mut c).await;
    assert_eq!(role_of(&rows, &r), "primary", "{rows:?}");
    let reloaded: Vec<(String, String)> = c.query("RELOAD SHOAL CONFIG").await.expect("reload");
    assert!(!reloaded.is_empty());
    let back = write_until_ok(&mut c, &shoal, &mut next).await;
    assert!(
        ids_on(&cluster, PRIMARY).await.contains(&back),
        "after the reload, writes go to the primary the configuration names"
    );
    let rows = backends(&mut c).await;
    assert_eq!(role_of(&rows, &p), "primary", "{rows:?}");
}

/// Two writable servers of one datahost, neither replicating (the replica detached while the
/// primary stays writable): Shoal does not pick one; writes fail with 1429 naming both, and
/// neither server gets a write meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_writable_servers_that_replicate_from_nobody_fail_writes_naming_both() {
    let (cluster, shoal, _config) = start().await;
    let (p, r) = (addr_of(&cluster, PRIMARY), addr_of(&cluster, REPLICA));
    let mut c = client(&shoal).await;
    let mut next = 0u64;
    write_until_ok(&mut c, &shoal, &mut next).await;
    let mut replica = admin(&cluster, REPLICA).await;
    replica.query_drop("STOP SLAVE").await.unwrap();
    replica.query_drop("RESET SLAVE ALL").await.unwrap();
    let message = write_until_refused(&mut c, &shoal, &mut next).await;
    assert!(
        message.contains(&p) && message.contains(&r) && message.contains("dh1"),
        "{message}"
    );
    let (on_p, on_r) = (
        ids_on(&cluster, PRIMARY).await,
        ids_on(&cluster, REPLICA).await,
    );
    for _ in 0..5 {
        next += 1;
        let (code, _, msg) = shoal_tests::server_error(
            c.query_drop(format!("INSERT INTO w VALUES ({next}, 0)"))
                .await,
        );
        assert_eq!(code, 1429, "{msg}");
    }
    assert_eq!(ids_on(&cluster, PRIMARY).await, on_p);
    assert_eq!(ids_on(&cluster, REPLICA).await, on_r);
    assert!(
        own_gtids(&cluster, REPLICA).await.is_empty(),
        "the detached replica was written to"
    );
    let rows = backends(&mut c).await;
    assert_eq!(role_of(&rows, &p), "primary", "{rows:?}");
}
