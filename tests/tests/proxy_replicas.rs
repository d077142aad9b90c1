//! Read/write splitting end to end, over real MariaDB replication (the launcher's replicas):
//! where statements run is counted on the backends themselves (`Com_select`, rows), health
//! changes are provoked for real (kill -9, stopped SQL threads, delayed replication), and every
//! wait is a poll with a generous deadline: no test asserts a timing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_tests::{ShoalProcess, scratch_dir, server_error, unique_name};

const DB: &str = "rw";

async fn start_cluster(primaries: usize, replicas: usize) -> Cluster {
    Cluster::start(ClusterSpec {
        primaries,
        replicas_per_primary: replicas,
        databases: vec![DB.to_string()],
        ..ClusterSpec::default()
    })
    .await
    .unwrap_or_else(|e| panic!("cannot start {primaries} primaries x {replicas} replicas: {e}"))
}

/// One datahost of a generated config: its primary and replicas (instance indices) and extra
/// YAML lines (balance, read_your_writes, health...).
struct Host<'a> {
    primary: usize,
    replicas: &'a [(usize, Option<u32>)],
    extra: &'a str,
}

/// A config with one datanode per datahost (database `rw`), table `t` sharded by `id` over
/// them when there are several, users `app` and `report` (read-only).
fn write_config(cluster: &Cluster, hosts: &[Host]) -> PathBuf {
    write_config_with(cluster, hosts, "")
}

/// [`write_config`] with more table lines for schema `shop` (when there are several hosts).
fn write_config_with(cluster: &Cluster, hosts: &[Host], tables: &str) -> PathBuf {
    let inst = cluster.instances();
    let addr = |i: usize| format!("{}:{}", inst[i].host, inst[i].port);
    let (u, pw) = (cluster.user(), cluster.password());
    let mut text = String::from(
        "users:\n  - { name: app, password: app-secret, schemas: [shop], admin: true }\n  \
         - { name: report, password: report-secret, schemas: [shop], read_only: true }\n\
         datahosts:\n",
    );
    for (k, h) in hosts.iter().enumerate() {
        text.push_str(&format!(
            "  - name: dh{}\n    primary: {{ address: {}, user: {u}, password: {pw} }}\n",
            k + 1,
            addr(h.primary)
        ));
        if !h.replicas.is_empty() {
            text.push_str("    replicas:\n");
            for (r, w) in h.replicas {
                let weight = w.map(|w| format!(", weight: {w}")).unwrap_or_default();
                text.push_str(&format!(
                    "      - {{ address: {}, user: {u}, password: {pw}{weight} }}\n",
                    addr(*r)
                ));
            }
        }
        text.push_str("    pool: { max: 40 }\n");
        for line in h.extra.lines().filter(|l| !l.trim().is_empty()) {
            text.push_str(&format!("    {}\n", line.trim()));
        }
    }
    text.push_str("datanodes:\n");
    for k in 0..hosts.len() {
        text.push_str(&format!(
            "  - {{ name: dn{}, datahost: dh{}, database: {DB} }}\n",
            k + 1,
            k + 1
        ));
    }
    text.push_str("schemas:\n  - name: shop\n    default_datanode: dn1\n");
    if hosts.len() > 1 {
        text.push_str(&format!(
            "    tables:\n      - {{ name: t, type: sharded, shard_key: id, rule: by_id, \
             datanodes: dn$1-{} }}\n{tables}rules:\n  - {{ name: by_id, algorithm: mod }}\n",
            hosts.len()
        ));
    }
    let path = scratch_dir().join(format!("{}.yaml", unique_name("replicas")));
    std::fs::write(&path, text).expect("write config");
    path
}

fn start_shoal(config: &Path) -> ShoalProcess {
    ShoalProcess::start(&["--config".to_string(), config.display().to_string()])
}

/// Shoal over one datahost: primary 0 and `replicas`, with `extra` datahost keys.
fn start_one_host(
    cluster: &Cluster,
    replicas: &[(usize, Option<u32>)],
    extra: &str,
) -> ShoalProcess {
    start_shoal(&write_config(
        cluster,
        &[Host {
            primary: 0,
            replicas,
            extra,
        }],
    ))
}

/// `n` point reads of `items` (each answer checked) on `c`; returns the SELECTs each of the
/// first `servers` instances ran meanwhile.
async fn read_items(c: &mut Conn, cluster: &Cluster, servers: usize, n: u64) -> Vec<u64> {
    let before = all_selects(cluster, servers).await;
    for k in 0..n {
        let id = k % 100 + 1;
        let v: Option<String> = c
            .query_first(format!("SELECT v FROM items WHERE id = {id}"))
            .await
            .unwrap();
        assert_eq!(v, Some(format!("v{id}")));
    }
    delta(&all_selects(cluster, servers).await, &before)
}

async fn client(shoal: &ShoalProcess) -> Conn {
    client_as(shoal, "app", "app-secret").await
}

async fn client_as(shoal: &ShoalProcess, user: &str, password: &str) -> Conn {
    match Conn::new(shoal.opts_as(user, password, Some("shop"))).await {
        Ok(c) => c,
        Err(e) => panic!("connect through shoal as {user}: {e}\n{}", shoal.log()),
    }
}

async fn admin(cluster: &Cluster, i: usize) -> Conn {
    admin_opts(cluster.admin_opts(i)).await
}

async fn admin_opts(opts: Opts) -> Conn {
    Conn::new(opts).await.expect("admin connection")
}

/// `Com_select` of instance `i` (every SELECT it ran, whoever sent it).
async fn selects(cluster: &Cluster, i: usize) -> u64 {
    let mut c = admin(cluster, i).await;
    let row: Option<(String, u64)> = c
        .query_first("SHOW GLOBAL STATUS LIKE 'Com_select'")
        .await
        .expect("Com_select");
    c.disconnect().await.ok();
    row.expect("a Com_select row").1
}

async fn all_selects(cluster: &Cluster, n: usize) -> Vec<u64> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(selects(cluster, i).await);
    }
    out
}

/// SELECTs run between two snapshots: the later snapshot's own connection runs one (the
/// client library reads server settings on connect), which is not counted.
fn delta(after: &[u64], before: &[u64]) -> Vec<u64> {
    after.iter().zip(before).map(|(a, b)| a - b - 1).collect()
}

/// `SHOW SHOAL BACKENDS` rows: (address, role, state, lag).
async fn backends(c: &mut Conn) -> Vec<(String, String, String, Option<String>)> {
    let rows: Vec<mysql_async::Row> = c
        .query("SHOW SHOAL BACKENDS")
        .await
        .expect("SHOW SHOAL BACKENDS");
    rows.into_iter()
        .map(|r| {
            (
                r.get::<String, _>("address").unwrap(),
                r.get::<String, _>("role").unwrap(),
                r.get::<String, _>("state").unwrap(),
                r.get::<Option<String>, _>("lag").unwrap(),
            )
        })
        .collect()
}

/// Polls `SHOW SHOAL BACKENDS` until server `addr` is in `state` (generous deadline: a wait,
/// not a timing assertion).
async fn wait_state(shoal: &ShoalProcess, addr: &str, state: &str) {
    wait_state_on(&mut client(shoal).await, shoal, addr, state).await
}

/// Waits until the health monitor's first check of every replica has finished (its lag is
/// known): its `SELECT @@read_only` is then not counted among a test's reads.
async fn wait_first_checks(c: &mut Conn, shoal: &ShoalProcess) {
    wait_backends(c, shoal, "the first checks never finished", |rows| {
        rows.iter()
            .all(|(_, role, _, lag)| role != "replica" || lag.is_some())
    })
    .await
}

/// [`wait_state`] on connection `c`.
async fn wait_state_on(c: &mut Conn, shoal: &ShoalProcess, addr: &str, state: &str) {
    let what = format!("{addr} never became {state:?}");
    wait_backends(c, shoal, &what, |rows| {
        rows.iter().any(|(a, _, s, _)| a == addr && s == state)
    })
    .await
}

/// Polls `SHOW SHOAL BACKENDS` on `c` until `done` holds for its rows; fails saying `what`
/// after 60 s.
async fn wait_backends(
    c: &mut Conn,
    shoal: &ShoalProcess,
    what: &str,
    done: impl Fn(&[(String, String, String, Option<String>)]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = backends(c).await;
        if done(&rows) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {rows:?}\n{}",
            shoal.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn addr_of(cluster: &Cluster, i: usize) -> String {
    let inst = &cluster.instances()[i];
    format!("{}:{}", inst.host, inst.port)
}

async fn prepare_table(cluster: &Cluster) {
    let mut c = admin(cluster, 0).await;
    c.query_drop(format!(
        "CREATE TABLE {DB}.items (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB"
    ))
    .await
    .unwrap();
    c.query_drop(format!(
        "INSERT INTO {DB}.items SELECT seq, CONCAT('v', seq) FROM {DB}.seq_1_to_100"
    ))
    .await
    .unwrap();
    c.disconnect().await.ok();
    cluster.sync_replicas().await.expect("replicas caught up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_spread_by_balance_writes_and_transactions_stay_on_the_primary() {
    let cluster = start_cluster(1, 2).await;
    prepare_table(&cluster).await;
    // A long heartbeat: the monitor's own SELECTs happen once, at start, not during counting.
    let quiet = "health: { heartbeat: 1h }";
    let two = [(1, None), (2, None)];
    let shoal_rr = start_one_host(&cluster, &two, &format!("balance: round_robin\n{quiet}"));
    let mut c = client(&shoal_rr).await;
    wait_first_checks(&mut c, &shoal_rr).await;
    let n = 200u64;
    let d = read_items(&mut c, &cluster, 3, n).await;
    // Round robin over two replicas of weight 1: each takes half, the primary none.
    assert!(d[0] <= 2, "round_robin: primary ran {} reads: {d:?}", d[0]);
    for r in [1, 2] {
        assert!(
            (n / 2 - 5..=n / 2 + 5).contains(&d[r]),
            "round_robin: replica {r} ran {} of {n} reads: {d:?}",
            d[r]
        );
    }

    // Prepared reads spread the same way.
    let before = all_selects(&cluster, 3).await;
    let stmt = c.prep("SELECT v FROM items WHERE id = ?").await.unwrap();
    for k in 0..100u64 {
        let v: Option<String> = c.exec_first(&stmt, (k % 100 + 1,)).await.unwrap();
        assert_eq!(v, Some(format!("v{}", k % 100 + 1)));
    }
    let d = delta(&all_selects(&cluster, 3).await, &before);
    assert!(
        d[1] >= 40 && d[2] >= 40 && d[0] <= 2,
        "prepared reads: {d:?}"
    );

    // Writes, transactional reads, locking reads, side effects and hints: the primary.
    let before = all_selects(&cluster, 3).await;
    c.query_drop("INSERT INTO items VALUES (1000, 'w')")
        .await
        .unwrap();
    c.query_drop("BEGIN").await.unwrap();
    for _ in 0..10 {
        let _: Option<String> = c
            .query_first("SELECT v FROM items WHERE id = 1000")
            .await
            .unwrap();
    }
    c.query_drop("COMMIT").await.unwrap();
    let _: Option<String> = c
        .query_first("SELECT v FROM items WHERE id = 1 FOR UPDATE")
        .await
        .unwrap();
    let _: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
    for hint in [
        "/*+ shoal:primary */",
        "/*!mycat:db_type=master*/",
        "/*#mycat:db_type=master*/",
    ] {
        let v: Option<String> = c
            .query_first(format!("{hint} SELECT v FROM items WHERE id = 2"))
            .await
            .unwrap_or_else(|e| panic!("{hint}: {e}"));
        assert_eq!(v.as_deref(), Some("v2"), "{hint}");
    }
    let d = delta(&all_selects(&cluster, 3).await, &before);
    assert_eq!(
        d[1] + d[2],
        0,
        "nothing of that may read on a replica: {d:?}"
    );
    assert!(
        d[0] >= 14,
        "10 transactional + 1 locking + 3 hinted reads: {d:?}"
    );
    // The write is on the primary itself (a replica rejects writes: read_only).
    let mut p = admin(&cluster, 0).await;
    let w: Option<String> = p
        .query_first(format!("SELECT v FROM {DB}.items WHERE id = 1000"))
        .await
        .unwrap();
    assert_eq!(w.as_deref(), Some("w"));
    drop(shoal_rr);

    // weighted_random: weights 1 and 3.
    let shoal_wr = start_one_host(
        &cluster,
        &[(1, Some(1)), (2, Some(3))],
        &format!("balance: weighted_random\n{quiet}"),
    );
    let mut c = client(&shoal_wr).await;
    wait_first_checks(&mut c, &shoal_wr).await;
    let n = 400u64;
    let d = read_items(&mut c, &cluster, 3, n).await;
    assert!(d[0] <= 2, "weighted_random: primary {d:?}");
    assert!(
        d[1] + d[2] >= n,
        "weighted_random: every read on a replica {d:?}"
    );
    assert!(
        d[1] >= 40 && d[2] > 2 * d[1],
        "weighted_random 1:3 should give about 100:300: {d:?}"
    );
    drop(shoal_wr);

    // primary_only: every read on the primary, but a replica hint is honoured.
    let shoal_po = start_one_host(&cluster, &two, &format!("balance: primary_only\n{quiet}"));
    let mut c = client(&shoal_po).await;
    wait_first_checks(&mut c, &shoal_po).await;
    let d = read_items(&mut c, &cluster, 3, 50).await;
    assert!(d[0] >= 50 && d[1] + d[2] == 0, "primary_only: {d:?}");
    let before = all_selects(&cluster, 3).await;
    for _ in 0..10 {
        let v: Option<String> = c
            .query_first("/*+ shoal:replica */ SELECT v FROM items WHERE id = 3")
            .await
            .unwrap();
        assert_eq!(v.as_deref(), Some("v3"));
    }
    let d = delta(&all_selects(&cluster, 3).await, &before);
    assert!(d[1] + d[2] >= 10, "replica hint: {d:?}");

    // least_connections: reads on replicas.
    drop(shoal_po);
    let shoal_lc = start_one_host(
        &cluster,
        &two,
        &format!("balance: least_connections\n{quiet}"),
    );
    let mut c = client(&shoal_lc).await;
    wait_first_checks(&mut c, &shoal_lc).await;
    let d = read_items(&mut c, &cluster, 3, 50).await;
    assert!(d[0] <= 2 && d[1] + d[2] >= 50, "least_connections: {d:?}");

    // A read-only user reads, and its write is refused with 1290 naming it.
    let mut r = client_as(&shoal_lc, "report", "report-secret").await;
    let v: Option<String> = r
        .query_first("SELECT v FROM items WHERE id = 4")
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("v4"));
    for sql in [
        "INSERT INTO items VALUES (2000, 'x')",
        "UPDATE items SET v = 'x' WHERE id = 4",
        "DELETE FROM items WHERE id = 4",
        "CREATE TABLE nope (id INT)",
    ] {
        let (code, _, msg) = server_error(r.query_drop(sql).await);
        assert_eq!(code, 1290, "{sql}: {msg}");
        assert!(msg.contains("'report'"), "{sql}: {msg}");
    }
    let (code, _, _) = server_error(r.prep("DELETE FROM items WHERE id = ?").await);
    assert_eq!(code, 1290);
    let gone: Option<String> = p
        .query_first(format!("SELECT v FROM {DB}.items WHERE id = 2000"))
        .await
        .unwrap();
    assert_eq!(gone, None, "the refused INSERT must not have run");
}

/// Starts instance `i`'s replication SQL thread again after `ms` milliseconds, in the background.
fn restart_sql_thread_after(cluster: &Cluster, i: usize, ms: u64) -> tokio::task::JoinHandle<()> {
    let opts = cluster.admin_opts(i);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let mut r = admin_opts(opts).await;
        r.query_drop("START SLAVE SQL_THREAD").await.unwrap();
    })
}

/// A session's write, read back at once: with `causal` it is always seen (the replica waits
/// for the write's GTID, or the read falls back to the primary); with `off` the same read on a
/// held-back replica misses it (so the test can fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn causal_reads_see_the_sessions_own_writes() {
    let cluster = start_cluster(1, 1).await;
    prepare_table(&cluster).await;
    // The monitor checks once (1h heartbeat): the replica stays in the read set while its SQL
    // thread is stopped, as during a short replication delay.
    let one = [(1, None)];
    let causal = start_one_host(
        &cluster,
        &one,
        "balance: round_robin\nread_your_writes: { causal: 20s }\nhealth: { heartbeat: 1h }",
    );
    let off = start_one_host(
        &cluster,
        &one,
        "balance: round_robin\nhealth: { heartbeat: 1h }",
    );
    let short = start_one_host(
        &cluster,
        &one,
        "balance: round_robin\nread_your_writes: { causal: 300ms }\nhealth: { heartbeat: 1h }",
    );
    // Reads go to the replica only once the monitor's first check has found it up.
    for shoal in [&causal, &off, &short] {
        wait_state(shoal, &addr_of(&cluster, 1), "up").await;
    }
    let mut replica = admin(&cluster, 1).await;

    // off: the replica does not have the write yet.
    replica.query_drop("STOP SLAVE SQL_THREAD").await.unwrap();
    let mut c = client(&off).await;
    c.query_drop("INSERT INTO items VALUES (500, 'off')")
        .await
        .unwrap();
    let seen: Option<String> = c
        .query_first("SELECT v FROM items WHERE id = 500")
        .await
        .unwrap();
    assert_eq!(
        seen, None,
        "without read_your_writes the stopped replica answers"
    );

    // causal: the read waits on the replica until its SQL thread runs again.
    let mut c = client(&causal).await;
    c.query_drop("INSERT INTO items VALUES (501, 'causal')")
        .await
        .unwrap();
    let restart = restart_sql_thread_after(&cluster, 1, 1500);
    let before = selects(&cluster, 1).await;
    let seen: Option<String> = c
        .query_first("SELECT v FROM items WHERE id = 501")
        .await
        .unwrap();
    assert_eq!(seen.as_deref(), Some("causal"));
    // MASTER_GTID_WAIT and the read itself ran on the replica.
    assert!(
        selects(&cluster, 1).await - before >= 2,
        "the causal read used the replica"
    );
    restart.await.unwrap();

    // causal with a short timeout and a replica held back longer: the primary answers.
    replica.query_drop("STOP SLAVE SQL_THREAD").await.unwrap();
    let mut c = client(&short).await;
    c.query_drop("INSERT INTO items VALUES (502, 'fallback')")
        .await
        .unwrap();
    let seen: Option<String> = c
        .query_first("SELECT v FROM items WHERE id = 502")
        .await
        .unwrap();
    assert_eq!(seen.as_deref(), Some("fallback"));
    replica.query_drop("START SLAVE SQL_THREAD").await.unwrap();
}

/// A read load through Shoal on `threads` connections: worker `w` runs `query(k)` for
/// k = w, w + threads, ... and compares the first row's columns with the expected texts.
/// Client errors are kept apart: before and after [`ReadLoad::detected`] is set.
struct ReadLoad {
    stop: Arc<AtomicBool>,
    detected: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    errors_before: Arc<std::sync::Mutex<Vec<String>>>,
    errors_after: Arc<std::sync::Mutex<Vec<String>>>,
    workers: Vec<tokio::task::JoinHandle<()>>,
}

/// A read and the texts of its first row's columns.
type Query = fn(u64) -> (String, Vec<String>);

impl ReadLoad {
    fn start(shoal: &ShoalProcess, threads: u64, query: Query) -> ReadLoad {
        let load = ReadLoad {
            stop: Arc::default(),
            detected: Arc::default(),
            ok: Arc::default(),
            errors_before: Arc::default(),
            errors_after: Arc::default(),
            workers: Vec::new(),
        };
        let workers = (0..threads)
            .map(|w| {
                let opts = shoal.opts_as("app", "app-secret", Some("shop"));
                let (stop, detected, ok) =
                    (load.stop.clone(), load.detected.clone(), load.ok.clone());
                let (before, after) = (load.errors_before.clone(), load.errors_after.clone());
                tokio::spawn(async move {
                    let mut c: Option<Conn> = None;
                    let mut k = w;
                    while !stop.load(Ordering::Relaxed) {
                        let errors = if detected.load(Ordering::Relaxed) {
                            &after
                        } else {
                            &before
                        };
                        let conn = match c.as_mut() {
                            Some(c) => c,
                            None => match Conn::new(opts.clone()).await {
                                Ok(n) => c.insert(n),
                                Err(e) => {
                                    errors.lock().unwrap().push(e.to_string());
                                    continue;
                                }
                            },
                        };
                        let (sql, want) = query(k);
                        k += threads;
                        match conn.query_first::<mysql_async::Row, _>(&sql).await {
                            Ok(Some(row)) => {
                                let got: Vec<String> = row
                                    .unwrap()
                                    .into_iter()
                                    .map(|v| match v {
                                        mysql_async::Value::Bytes(b) => {
                                            String::from_utf8_lossy(&b).into_owned()
                                        }
                                        other => format!("{other:?}"),
                                    })
                                    .collect();
                                assert_eq!(got, want, "wrong answer to {sql}");
                                ok.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(None) => panic!("no row for {sql}"),
                            Err(e) => {
                                errors.lock().unwrap().push(e.to_string());
                                c = None;
                            }
                        }
                    }
                })
            })
            .collect();
        ReadLoad { workers, ..load }
    }

    fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    /// Waits until `n` more reads than `from` have succeeded (a generous deadline: not a
    /// timing assertion).
    async fn wait_reads(&self, from: u64, n: u64, shoal: &ShoalProcess) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.ok() < from + n {
            assert!(
                Instant::now() < deadline,
                "the read load is stuck at {} (errors before {:?}, after {:?})\n{}",
                self.ok(),
                self.errors_before.lock().unwrap(),
                self.errors_after.lock().unwrap(),
                shoal.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn mark_detected(&self) {
        self.detected.store(true, Ordering::Relaxed);
    }

    /// Stops the workers; the client errors seen before and after detection.
    async fn finish(self) -> (Vec<String>, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for w in self.workers {
            w.await.expect("worker");
        }
        let before = self.errors_before.lock().unwrap().clone();
        let after = self.errors_after.lock().unwrap().clone();
        (before, after)
    }
}

const KILL_HEALTH: &str = "balance: round_robin\nhealth: { heartbeat: 200ms, timeout: 500ms, down_after: 2, up_after: 2 }";

fn point_read(k: u64) -> (String, Vec<String>) {
    let id = k % 100 + 1;
    (
        format!("SELECT v FROM items WHERE id = {id}"),
        vec![format!("v{id}")],
    )
}

/// kill -9 of a replica under a 16-thread read load: once the monitor has marked it down, no
/// client sees an error; restarted, it takes reads again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_replica_leaves_the_read_set_without_client_errors_and_rejoins() {
    let mut cluster = start_cluster(1, 2).await;
    prepare_table(&cluster).await;
    let shoal = start_one_host(&cluster, &[(1, None), (2, None)], KILL_HEALTH);
    let victim = addr_of(&cluster, 1);
    let load = ReadLoad::start(&shoal, 16, point_read);
    // Load running, then the crash.
    load.wait_reads(0, 500, &shoal).await;
    cluster.kill(1);
    wait_state(&shoal, &victim, "down").await;
    load.mark_detected();
    let before = selects(&cluster, 2).await;
    load.wait_reads(load.ok(), 2000, &shoal).await;
    // The surviving replica (the primary has weight 0) took the reads.
    let r2 = selects(&cluster, 2).await - before;
    assert!(r2 >= 2000, "the other replica served the reads: {r2}");

    // Replicating again once restarted.
    cluster.restart(1).await.expect("restart the replica");
    wait_state(&shoal, &victim, "up").await;
    let back = selects(&cluster, 1).await;
    load.wait_reads(load.ok(), 1000, &shoal).await;
    let reads = load.ok();
    let (errors_before, errors_after) = load.finish().await;
    let rejoined = selects(&cluster, 1).await - back;
    assert!(
        rejoined >= 100,
        "the restarted replica takes reads again: {rejoined}"
    );
    assert!(
        errors_after.is_empty(),
        "client errors after the replica was marked down ({errors_before:?} before): \
         {errors_after:?}"
    );
    eprintln!(
        "replica kill: {reads} reads, {} client errors before detection, 0 after",
        errors_before.len()
    );
}

/// Scatter reads (a sharded table's aggregate over 2 datahosts, each a primary and 2
/// replicas) under a 16-thread load while one replica is killed with -9: a read whose replica
/// dies before its answer reached the client runs again elsewhere, so no client sees an
/// error, before or after the monitor marks the replica down.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scatter_reads_survive_a_killed_replica_without_client_errors() {
    let mut cluster = start_cluster(2, 2).await;
    // Instances: p0, p1, then p0r0, p0r1, p1r0, p1r1.
    for i in 0..2 {
        admin(&cluster, i)
            .await
            .query_drop(format!(
                "CREATE TABLE {DB}.t (id INT PRIMARY KEY, w INT) ENGINE=InnoDB"
            ))
            .await
            .unwrap();
    }
    let shoal = start_shoal(&write_config(
        &cluster,
        &[
            Host {
                primary: 0,
                replicas: &[(2, None), (3, None)],
                extra: KILL_HEALTH,
            },
            Host {
                primary: 1,
                replicas: &[(4, None), (5, None)],
                extra: KILL_HEALTH,
            },
        ],
    ));
    let mut c = client(&shoal).await;
    let values: Vec<String> = (1..=200).map(|id| format!("({id}, {id})")).collect();
    c.query_drop(format!(
        "INSERT INTO t (id, w) VALUES {}",
        values.join(", ")
    ))
    .await
    .unwrap();
    cluster.sync_replicas().await.expect("replicas caught up");
    for r in 2..6 {
        wait_state(&shoal, &addr_of(&cluster, r), "up").await;
    }
    let victim = addr_of(&cluster, 2);
    fn scatter_read(k: u64) -> (String, Vec<String>) {
        // Both shards, every time; the bound varies the text.
        let below = 150 + k % 50;
        (
            format!("SELECT COUNT(*), SUM(w) FROM t WHERE id <= {below}"),
            vec![below.to_string(), (below * (below + 1) / 2).to_string()],
        )
    }
    let load = ReadLoad::start(&shoal, 16, scatter_read);
    load.wait_reads(0, 500, &shoal).await;
    let on_victim = selects(&cluster, 2).await;
    load.wait_reads(load.ok(), 200, &shoal).await;
    assert!(
        selects(&cluster, 2).await - on_victim >= 20,
        "the victim served scatter reads before the kill"
    );
    cluster.kill(2);
    wait_state(&shoal, &victim, "down").await;
    load.mark_detected();
    let before = selects(&cluster, 3).await;
    load.wait_reads(load.ok(), 1000, &shoal).await;
    let reads = load.ok();
    let (errors_before, errors_after) = load.finish().await;
    // The victim's datahost read on its other replica meanwhile.
    let took = selects(&cluster, 3).await - before;
    assert!(
        took >= 500,
        "the other replica of dh1 took its reads: {took}"
    );
    assert!(
        errors_before.is_empty() && errors_after.is_empty(),
        "client errors: {errors_before:?} before detection, {errors_after:?} after\n{}",
        shoal.log()
    );
    eprintln!("scatter reads under a replica kill: {reads} reads, no client error");
}

/// A replica further behind than `max_replication_lag` leaves the read set, and comes back
/// once it has caught up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lagging_replica_leaves_the_read_set_until_it_catches_up() {
    let cluster = start_cluster(1, 1).await;
    prepare_table(&cluster).await;
    let shoal = start_one_host(
        &cluster,
        &[(1, None)],
        "balance: round_robin\nhealth: { heartbeat: 200ms, max_replication_lag: 2s }",
    );
    let replica = addr_of(&cluster, 1);
    wait_state(&shoal, &replica, "up").await;
    // Delayed replication: events are applied 30 s after they were written.
    let mut r = admin(&cluster, 1).await;
    r.query_drop("STOP SLAVE").await.unwrap();
    r.query_drop("CHANGE MASTER TO MASTER_DELAY = 30")
        .await
        .unwrap();
    r.query_drop("START SLAVE").await.unwrap();
    let writing = Arc::new(AtomicBool::new(true));
    let writer = {
        let opts = cluster.admin_opts(0);
        let writing = writing.clone();
        tokio::spawn(async move {
            let mut p = admin_opts(opts).await;
            let mut k = 10_000;
            while writing.load(Ordering::Relaxed) {
                k += 1;
                p.query_drop(format!("INSERT INTO {DB}.items VALUES ({k}, 'lag')"))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    // Out of the read set for its lag (not for the moment replication was restarted).
    let mut c = client(&shoal).await;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let rows = backends(&mut c).await;
        let row = rows
            .iter()
            .find(|(a, ..)| *a == replica)
            .expect("replica row");
        let lag = row.3.as_deref().and_then(|l| l.parse::<u64>().ok());
        if row.2 == "up, not in the read set" && lag.is_some_and(|l| l > 2) {
            break;
        }
        assert!(Instant::now() < deadline, "never lagging: {rows:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let d = read_items(&mut c, &cluster, 2, 50).await;
    assert!(
        d[0] >= 50,
        "reads on the primary while the replica lags: {d:?}"
    );
    // Caught up: back in the read set.
    writing.store(false, Ordering::Relaxed);
    writer.await.unwrap();
    r.query_drop("STOP SLAVE").await.unwrap();
    r.query_drop("CHANGE MASTER TO MASTER_DELAY = 0")
        .await
        .unwrap();
    r.query_drop("START SLAVE").await.unwrap();
    wait_state(&shoal, &replica, "up").await;
    let d = read_items(&mut c, &cluster, 2, 50).await;
    assert!(d[1] >= 50, "reads on the replica again: {d:?}");
}

/// kill -9 of one shard's primary under a 16-thread insert load over 2 shards: the other
/// shard keeps inserting, the dead one's inserts fail with an error naming its datanode, and
/// after a restart every acknowledged insert is there exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_primary_fails_its_shard_only_and_loses_no_acknowledged_insert() {
    let mut cluster = start_cluster(2, 0).await;
    for i in 0..2 {
        let mut c = admin(&cluster, i).await;
        // No key: a row inserted twice would show.
        c.query_drop(format!(
            "CREATE TABLE {DB}.t (id INT NOT NULL, w INT) ENGINE=InnoDB"
        ))
        .await
        .unwrap();
    }
    let health = "health: { heartbeat: 200ms, timeout: 500ms, down_after: 2, up_after: 2 }";
    let shoal = start_shoal(&write_config(
        &cluster,
        &[
            Host {
                primary: 0,
                replicas: &[],
                extra: health,
            },
            Host {
                primary: 1,
                replicas: &[],
                extra: health,
            },
        ],
    ));
    let victim = addr_of(&cluster, 1);
    let stop = Arc::new(AtomicBool::new(false));
    let down = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(std::sync::Mutex::new(Vec::<i64>::new()));
    let even_after_down = Arc::new(AtomicU64::new(0));
    let clear_errors = Arc::new(AtomicU64::new(0));
    let other_errors = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut workers = Vec::new();
    for w in 0..16i64 {
        let opts = shoal.opts_as("app", "app-secret", Some("shop"));
        let (stop, down, acked) = (stop.clone(), down.clone(), acked.clone());
        let (even_after_down, clear_errors, other_errors) = (
            even_after_down.clone(),
            clear_errors.clone(),
            other_errors.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut c = Conn::new(opts.clone()).await.expect("connect");
            let mut k = 0i64;
            while !stop.load(Ordering::Relaxed) {
                k += 1;
                let id = w * 1_000_000 + k;
                let was_down = down.load(Ordering::Relaxed);
                match c
                    .query_drop(format!("INSERT INTO t (id, w) VALUES ({id}, {w})"))
                    .await
                {
                    Ok(()) => {
                        acked.lock().unwrap().push(id);
                        if was_down && id % 2 == 0 {
                            even_after_down.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(mysql_async::Error::Server(e))
                        if was_down && id % 2 == 1 && e.message.contains("datanode dn2") =>
                    {
                        clear_errors.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        if was_down || id % 2 == 0 {
                            other_errors.lock().unwrap().push(format!("{id}: {e}"));
                        }
                        if !matches!(e, mysql_async::Error::Server(_)) {
                            c = match Conn::new(opts.clone()).await {
                                Ok(c) => c,
                                Err(e) => panic!("reconnect to shoal: {e}"),
                            };
                        }
                    }
                }
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while acked.lock().unwrap().len() < 1000 {
        assert!(
            Instant::now() < deadline,
            "no insert load: {:?}\n{}",
            other_errors.lock().unwrap(),
            shoal.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.kill(1);
    wait_state(&shoal, &victim, "down").await;
    down.store(true, Ordering::Relaxed);
    let mark = even_after_down.load(Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(120);
    while even_after_down.load(Ordering::Relaxed) < mark + 500
        || clear_errors.load(Ordering::Relaxed) < 50
    {
        assert!(
            Instant::now() < deadline,
            "stuck: {} inserts on the live shard, {} clear errors, others {:?}\n{}",
            even_after_down.load(Ordering::Relaxed) - mark,
            clear_errors.load(Ordering::Relaxed),
            other_errors.lock().unwrap(),
            shoal.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.expect("worker");
    }
    let others = other_errors.lock().unwrap().clone();
    assert!(
        others.is_empty(),
        "after detection, only the dead shard may fail, with its datanode named: {others:?}"
    );
    cluster.restart(1).await.expect("restart the primary");
    wait_state(&shoal, &victim, "up").await;
    // Every acknowledged insert is there, once.
    let acked = acked.lock().unwrap().clone();
    let mut present: Vec<i64> = Vec::new();
    for i in 0..2 {
        let mut c = admin(&cluster, i).await;
        let ids: Vec<i64> = c.query(format!("SELECT id FROM {DB}.t")).await.unwrap();
        present.extend(ids);
    }
    present.sort_unstable();
    let total = present.len();
    present.dedup();
    assert_eq!(total, present.len(), "rows inserted twice");
    let missing: Vec<&i64> = acked
        .iter()
        .filter(|id| present.binary_search(id).is_err())
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged inserts lost: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    // Shard 2 serves again.
    let mut c = client(&shoal).await;
    c.query_drop("INSERT INTO t (id, w) VALUES (99999999, 0)")
        .await
        .unwrap();
    c.query_drop("INSERT INTO t (id, w) VALUES (99999997, 0)")
        .await
        .unwrap();
    eprintln!(
        "primary kill: {} inserts acknowledged, {} refused naming dn2",
        acked.len(),
        clear_errors.load(Ordering::Relaxed)
    );
}

/// Failover following: the primary dies, the test (as a failover tool would) makes the replica
/// writable, and writes resume on it without restarting Shoal.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_follow_an_external_failover_to_the_writable_replica() {
    let mut cluster = start_cluster(1, 1).await;
    prepare_table(&cluster).await;
    let shoal = start_one_host(
        &cluster,
        &[(1, None)],
        "balance: round_robin\nhealth: { heartbeat: 200ms, timeout: 500ms, down_after: 2 }",
    );
    let mut c = client(&shoal).await;
    c.query_drop("INSERT INTO items VALUES (700, 'before')")
        .await
        .unwrap();
    cluster.sync_replicas().await.unwrap();
    cluster.kill(0);
    wait_state(&shoal, &addr_of(&cluster, 0), "down").await;
    let (code, _, msg) = server_error(c.query_drop("INSERT INTO items VALUES (701, 'x')").await);
    assert_eq!(code, 1429, "{msg}");
    assert!(msg.contains("datanode dn1"), "{msg}");
    // The failover tool's part: the replica stops replicating, drops its replication
    // connection (a server that has one is never a primary) and becomes writable.
    let mut r = admin(&cluster, 1).await;
    r.query_drop("STOP SLAVE").await.unwrap();
    r.query_drop("RESET SLAVE ALL").await.unwrap();
    r.query_drop("SET GLOBAL read_only = 0").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match c
            .query_drop("INSERT INTO items VALUES (702, 'after')")
            .await
        {
            Ok(()) => break,
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
    let on_new: Option<String> = r
        .query_first(format!("SELECT v FROM {DB}.items WHERE id = 702"))
        .await
        .unwrap();
    assert_eq!(
        on_new.as_deref(),
        Some("after"),
        "the write went to the new primary"
    );
    let rows = backends(&mut c).await;
    let new_role = rows
        .iter()
        .find(|(a, ..)| *a == addr_of(&cluster, 1))
        .map(|r| r.1.clone());
    assert_eq!(new_role.as_deref(), Some("primary"), "{rows:?}");
    let seen: Option<String> = c
        .query_first("SELECT v FROM items WHERE id = 700")
        .await
        .unwrap();
    assert_eq!(seen.as_deref(), Some("before"));
}

/// A prepared EXECUTE may run on the session's connection to the datanode's server that was
/// taken for another datanode (MariaDB runs the statement in its own database). After the
/// session's write, such a connection on a replica is not reused for a causal read: the read
/// takes one through the pool, which waits for the write there first. The session below holds a
/// replica connection (read on dn1) when it writes dn2 and dn3; its read of dn2 must see the
/// write although the replica's SQL thread is stopped until 1.5 s later.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn causal_reads_wait_on_a_connection_taken_for_another_datanode() {
    let dbs = ["rw", "rw_2", "rw_3"];
    let cluster = Cluster::start(ClusterSpec {
        primaries: 1,
        replicas_per_primary: 1,
        databases: dbs.iter().map(|d| d.to_string()).collect(),
        ..ClusterSpec::default()
    })
    .await
    .expect("cluster");
    let mut p = admin(&cluster, 0).await;
    for db in dbs {
        p.query_drop(format!(
            "CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB"
        ))
        .await
        .unwrap();
    }
    p.query_drop("INSERT INTO rw.t VALUES (3, 'three')")
        .await
        .unwrap();
    cluster.sync_replicas().await.expect("replicas caught up");
    let inst = cluster.instances();
    let addr = |i: usize| format!("{}:{}", inst[i].host, inst[i].port);
    let (u, pw) = (cluster.user(), cluster.password());
    let path = scratch_dir().join(format!("{}.yaml", unique_name("causal3")));
    std::fs::write(
        &path,
        format!(
            "users:
  - {{ name: app, password: app-secret, schemas: [shop], admin: true }}
datahosts:
  - name: dh1
    primary: {{ address: {p}, user: {u}, password: {pw} }}
    replicas:
      - {{ address: {r}, user: {u}, password: {pw} }}
    balance: round_robin
    read_your_writes: {{ causal: 20s }}
    health: {{ heartbeat: 1h }}
datanodes:
  - {{ name: dn1, datahost: dh1, database: rw }}
  - {{ name: dn2, datahost: dh1, database: rw_2 }}
  - {{ name: dn3, datahost: dh1, database: rw_3 }}
rules:
  - {{ name: by_id, algorithm: mod }}
schemas:
  - name: shop
    tables:
      - {{ name: t, type: sharded, shard_key: id, rule: by_id, datanodes: \"dn1, dn2, dn3\" }}
",
            p = addr(0),
            r = addr(1),
        ),
    )
    .expect("write config");
    let shoal = start_shoal(&path);
    wait_state(&shoal, &addr_of(&cluster, 1), "up").await;
    let mut c = client(&shoal).await;
    let read = c.prep("SELECT v FROM t WHERE id = ?").await.unwrap();
    let write = c.prep("INSERT INTO t (id, v) VALUES (?, ?)").await.unwrap();
    // id 3 lives on dn1 (3 mod 3 = 0): read on the replica, whose connection the session keeps.
    let before = selects(&cluster, 1).await;
    let v: Option<String> = c.exec_first(&read, (3,)).await.unwrap();
    assert_eq!(v.as_deref(), Some("three"));
    assert!(
        selects(&cluster, 1).await > before,
        "the first read used the replica"
    );

    let mut replica = admin(&cluster, 1).await;
    replica.query_drop("STOP SLAVE SQL_THREAD").await.unwrap();
    // Writes on dn2 (id 1) and dn3 (id 2): the second runs on the first's primary connection.
    c.exec_drop(&write, (1, "one")).await.unwrap();
    c.exec_drop(&write, (2, "two")).await.unwrap();
    let restart = restart_sql_thread_after(&cluster, 1, 1500);
    let v: Option<String> = c.exec_first(&read, (1,)).await.unwrap();
    assert_eq!(
        v.as_deref(),
        Some("one"),
        "the causal read of dn2 missed the session's write\n{}",
        shoal.log()
    );
    restart.await.unwrap();
}

/// Two datahosts, each a primary with one replica (instances 0 and 1, replicas 2 and 3),
/// table `t` sharded over dn1 and dn2 and global table `g` on both, rows 1..=20 in `t`.
async fn two_hosts_with_replicas(extra: &str) -> (Cluster, ShoalProcess) {
    let cluster = start_cluster(2, 1).await;
    for i in 0..2 {
        let mut c = admin(&cluster, i).await;
        for table in ["t", "g"] {
            c.query_drop(format!(
                "CREATE TABLE {DB}.{table} (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB"
            ))
            .await
            .unwrap();
        }
        // mod over 2 datanodes: even ids on dn1 (instance 0), odd on dn2 (instance 1).
        c.query_drop(format!(
            "INSERT INTO {DB}.t SELECT seq, CONCAT('v', seq) FROM {DB}.seq_1_to_20 \
             WHERE seq % 2 = {i}"
        ))
        .await
        .unwrap();
    }
    cluster.sync_replicas().await.expect("replicas caught up");
    let hosts = [
        Host {
            primary: 0,
            replicas: &[(2, None)],
            extra,
        },
        Host {
            primary: 1,
            replicas: &[(3, None)],
            extra,
        },
    ];
    let tables = "      - { name: g, type: global, datanodes: dn$1-2 }\n";
    let shoal = start_shoal(&write_config_with(&cluster, &hosts, tables));
    for r in [2, 3] {
        wait_state(&shoal, &addr_of(&cluster, r), "up").await;
    }
    (cluster, shoal)
}

/// The ids and values of `t`, read through `c`, sorted.
async fn all_rows(c: &mut Conn) -> Result<Vec<(i64, String)>, mysql_async::Error> {
    let mut rows: Vec<(i64, String)> = c.query("SELECT id, v FROM t").await?;
    rows.sort();
    Ok(rows)
}

/// kill -9 of a replica that sessions read from last: their next statements that do not need
/// it (a multi-row INSERT over both datanodes, a global-table write, a transaction with a
/// savepoint, statements with autocommit off) succeed without an error, and their reads go on
/// elsewhere. The monitor checks once (1h heartbeat): Shoal still counts the dead replica as up,
/// so every read first meets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_replica_fails_no_statement_that_does_not_need_it() {
    let (mut cluster, shoal) =
        two_hosts_with_replicas("balance: round_robin\nhealth: { heartbeat: 1h }").await;
    let mut sessions = Vec::new();
    let before = all_selects(&cluster, 4).await;
    for _ in 0..6 {
        let mut c = client(&shoal).await;
        // A read of both datanodes: the session keeps a connection to each replica.
        let n: i64 = c
            .query_first("SELECT COUNT(*) FROM t")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n, 20);
        sessions.push(c);
    }
    let d = delta(&all_selects(&cluster, 4).await, &before);
    assert!(
        d[2] >= 6 && d[3] >= 6,
        "the reads went to the replicas: {d:?}"
    );
    cluster.kill(2);
    let [a, b, c, d, e, f] = &mut sessions[..] else {
        unreachable!()
    };
    a.query_drop("INSERT INTO t (id, v) VALUES (102, 'a'), (103, 'a')")
        .await
        .expect("multi-row INSERT over both datanodes");
    b.query_drop("INSERT INTO g (id, v) VALUES (1, 'b')")
        .await
        .expect("global-table write");
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("INSERT INTO t (id, v) VALUES (104, 'c')")
        .await
        .expect("the transaction's first write");
    c.query_drop("SAVEPOINT s1").await.unwrap();
    c.query_drop("INSERT INTO t (id, v) VALUES (105, 'c')")
        .await
        .unwrap();
    c.query_drop("ROLLBACK TO SAVEPOINT s1").await.unwrap();
    c.query_drop("COMMIT").await.unwrap();
    d.query_drop("SET autocommit = 0")
        .await
        .expect("SET autocommit");
    d.query_drop("INSERT INTO t (id, v) VALUES (106, 'd')")
        .await
        .expect("a write with autocommit off");
    d.query_drop("COMMIT").await.unwrap();
    d.query_drop("SET autocommit = 1").await.unwrap();
    e.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .await
        .expect("a snapshot on every datanode");
    e.query_drop("INSERT INTO t (id, v) VALUES (108, 'e')")
        .await
        .unwrap();
    e.query_drop("COMMIT").await.unwrap();
    // A read whose replica died between statements runs elsewhere (the primary of dn1, as
    // the primary's weight is 0 and the datahost has no other replica).
    let v: Option<String> = f
        .query_first("SELECT v FROM t WHERE id = 2")
        .await
        .expect("a read after its replica died");
    assert_eq!(v.as_deref(), Some("v2"));
    let mut expected: Vec<(i64, String)> = (1..=20).map(|k| (k, format!("v{k}"))).collect();
    expected.extend([
        (102, "a".to_string()),
        (103, "a".to_string()),
        (104, "c".to_string()),
        (106, "d".to_string()),
        (108, "e".to_string()),
    ]);
    expected.sort();
    for s in sessions.iter_mut() {
        // Reads of dn1 fall back to its primary (dn2's replica has not applied the writes
        // yet, perhaps: the rows are read on the primaries).
        let rows = all_rows(s).await.expect("reads keep working");
        assert!(rows.len() >= 20, "{rows:?}");
    }
    let mut p = client(&shoal).await;
    p.query_drop("BEGIN").await.unwrap();
    // Inside a transaction every read is on the primaries.
    assert_eq!(all_rows(&mut p).await.unwrap(), expected);
    let g: Vec<(i64, String)> = p.query("SELECT id, v FROM g").await.unwrap();
    assert_eq!(g, vec![(1, "b".to_string())]);
    p.query_drop("COMMIT").await.unwrap();
}

/// Plain reads of `t` on `sessions` connections until `stop`: a scan of every row and point
/// reads, each answer compared with rows 1..=20. Returns the reads done and what went wrong.
fn read_loop(
    shoal: &ShoalProcess,
    sessions: usize,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<(u64, Vec<String>)>> {
    (0..sessions)
        .map(|w| {
            let opts = shoal.opts_as("app", "app-secret", Some("shop"));
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut c = Conn::new(opts).await.expect("connect");
                let expected: Vec<(i64, String)> = (1..=20).map(|k| (k, format!("v{k}"))).collect();
                let (mut reads, mut wrong) = (0u64, Vec::new());
                let mut k = w as i64;
                while !stop.load(Ordering::Relaxed) {
                    k += 1;
                    let id = k % 20 + 1;
                    if k % 2 == 0 {
                        match all_rows(&mut c).await {
                            Ok(rows) if rows == expected => {}
                            Ok(rows) => wrong.push(format!("scan: {rows:?}")),
                            Err(e) => wrong.push(format!("scan: {e}")),
                        }
                    } else {
                        let sql = format!("SELECT v FROM t WHERE id = {id}");
                        match c.query_first::<String, _>(sql).await {
                            Ok(Some(v)) if v == format!("v{id}") => {}
                            other => wrong.push(format!("id {id}: {other:?}")),
                        }
                    }
                    reads += 1;
                }
                (reads, wrong)
            })
        })
        .collect()
}

/// `read_when_primary_down: replicas`: kill -9 of a datahost's primary under a read load. Its
/// replica keeps answering plain reads with the rows it holds (no client error, also before
/// the monitor marks the primary down), and `SHOW SHOAL BACKENDS` says so with its lag
/// unknown; writes and transactions on the datahost fail with 1429, the other datahost
/// writes on; restarted, the primary takes writes again. Then a session's causal read after
/// its own write, with the primary killed before the replica applied the write (a delayed
/// replica), fails instead of reading without it, while plain reads go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_read_when_primary_down_replicas_answer_reads_while_the_primary_is_down() {
    let (mut cluster, shoal) = two_hosts_with_replicas(
        "balance: round_robin\nread_your_writes: { causal: 1s }\n\
         read_when_primary_down: replicas\n\
         health: { heartbeat: 200ms, timeout: 500ms, down_after: 2, up_after: 2 }",
    )
    .await;
    let (primary, replica) = (addr_of(&cluster, 0), addr_of(&cluster, 2));
    let stop = Arc::new(AtomicBool::new(false));
    let load = read_loop(&shoal, 4, stop.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.kill(0);
    wait_state(&shoal, &primary, "down").await;
    wait_state(
        &shoal,
        &replica,
        "up, serving reads while the primary is down",
    )
    .await;
    // Reads for a while longer with the primary marked down.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut c = client(&shoal).await;
    let rows = backends(&mut c).await;
    let lag = rows
        .iter()
        .find(|r| r.0 == replica)
        .and_then(|r| r.3.clone())
        .unwrap_or_default();
    assert!(
        lag.starts_with("unknown, primary down since "),
        "the replica's lag is stated: {rows:?}"
    );
    stop.store(true, Ordering::Relaxed);
    let (mut reads, mut wrong) = (0, Vec::new());
    for w in load {
        let (r, e) = w.await.expect("reader");
        reads += r;
        wrong.extend(e);
    }
    assert!(
        wrong.is_empty(),
        "{} of {reads} reads failed or were wrong while the primary was down: {:?}\n{}",
        wrong.len(),
        &wrong[..wrong.len().min(10)],
        shoal.log()
    );
    // The primary is dead: dn1's rows came from its replica.
    let v: Option<String> = c
        .query_first("SELECT v FROM t WHERE id = 2")
        .await
        .expect("a read of dn1 with its primary down");
    assert_eq!(v.as_deref(), Some("v2"));
    // Writes and transactions need the primary: 1429 naming the datanode.
    let (code, _, msg) = server_error(c.query_drop("INSERT INTO t (id, v) VALUES (30, 'x')").await);
    assert_eq!(code, 1429, "{msg}");
    assert!(msg.contains("dn1"), "{msg}");
    c.query_drop("INSERT INTO t (id, v) VALUES (31, 'x')")
        .await
        .expect("the other datahost takes writes");
    c.query_drop("BEGIN").await.unwrap();
    let (code, _, msg) = server_error(c.query_drop("SELECT v FROM t WHERE id = 2").await);
    assert_eq!(
        code, 1429,
        "a read in a transaction needs the primary: {msg}"
    );
    c.query_drop("ROLLBACK").await.ok();
    // Back on its data: writes resume.
    cluster.restart(0).await.expect("restart the primary");
    wait_state(&shoal, &primary, "up").await;
    c.query_drop("INSERT INTO t (id, v) VALUES (30, 'x')")
        .await
        .expect("writes resume on the restarted primary");
    c.query_drop("DELETE FROM t WHERE id IN (30, 31)")
        .await
        .unwrap();
    wait_state(&shoal, &replica, "up").await;

    // Causal reads: the replica holds the session's write back (MASTER_DELAY), the primary dies.
    let mut r = admin(&cluster, 2).await;
    for sql in [
        "STOP SLAVE",
        "CHANGE MASTER TO MASTER_DELAY = 3600",
        "START SLAVE",
    ] {
        r.query_drop(sql).await.unwrap();
    }
    let mut w = client(&shoal).await;
    w.query_drop("INSERT INTO t (id, v) VALUES (40, 'w')")
        .await
        .unwrap();
    cluster.kill(0);
    let read = w
        .query_first::<String, _>("SELECT v FROM t WHERE id = 40")
        .await;
    assert!(
        !matches!(read, Ok(None)),
        "a causal read missed the session's own write"
    );
    let (code, _, msg) = server_error(read.map(|_| ()));
    assert_eq!(code, 1429, "{msg}");
    // A plain read of another session is answered, by the replica, without the write.
    let mut p = client(&shoal).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        match p
            .query_first::<String, _>("SELECT v FROM t WHERE id = 40")
            .await
        {
            Ok(v) => break v,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "plain reads never resumed: {e}\n{}",
                    shoal.log()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(seen, None, "the delayed replica answered the plain read");
}

/// Without `read_when_primary_down` (`none`), a replica whose replication lost its primary
/// leaves the read set, and reads of the primary's datanodes fail (1429) until it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_read_when_primary_down_reads_fail_while_the_primary_is_down() {
    let (mut cluster, shoal) = two_hosts_with_replicas(
        "balance: round_robin\n\
         health: { heartbeat: 200ms, timeout: 500ms, down_after: 2, up_after: 2 }",
    )
    .await;
    // Connected before: a new connection's first query (the client library's) reads on the
    // default datanode, dn1, and would fail too.
    let mut c = client(&shoal).await;
    cluster.kill(0);
    wait_state_on(&mut c, &shoal, &addr_of(&cluster, 0), "down").await;
    wait_state_on(
        &mut c,
        &shoal,
        &addr_of(&cluster, 2),
        "up, not in the read set",
    )
    .await;
    let (code, _, msg) = server_error(
        c.query_first::<String, _>("SELECT v FROM t WHERE id = 2")
            .await
            .map(|_| ()),
    );
    assert_eq!(code, 1429, "{msg}");
    assert!(msg.contains("is down"), "{msg}");
    // The other datahost reads on.
    let v: Option<String> = c.query_first("SELECT v FROM t WHERE id = 3").await.unwrap();
    assert_eq!(v.as_deref(), Some("v3"));
}

/// `read_when_primary_down: replicas` with `balance: primary_only`: reads stay on the primary
/// while it serves; the first read that cannot connect to it goes to the replica at once,
/// without an error, before any check has run (1h heartbeat: the monitor never sees the
/// primary go). Writes fail with 1429.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_read_that_cannot_reach_the_primary_goes_to_the_replica_at_once() {
    let mut cluster = start_cluster(1, 1).await;
    prepare_table(&cluster).await;
    let shoal = start_one_host(
        &cluster,
        &[(1, None)],
        "read_when_primary_down: replicas\nhealth: { heartbeat: 1h }",
    );
    wait_state(&shoal, &addr_of(&cluster, 1), "up").await;
    let mut c = client(&shoal).await;
    let before = all_selects(&cluster, 2).await;
    let v: Option<String> = c
        .query_first("SELECT v FROM items WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("v1"));
    let d = delta(&all_selects(&cluster, 2).await, &before);
    assert_eq!(
        d,
        vec![1, 0],
        "primary_only: the primary answers while it serves"
    );
    cluster.kill(0);
    for id in [5, 6] {
        let v: Option<String> = c
            .query_first(format!("SELECT v FROM items WHERE id = {id}"))
            .await
            .unwrap_or_else(|e| panic!("read {id} with the primary killed: {e}\n{}", shoal.log()));
        assert_eq!(v, Some(format!("v{id}")));
    }
    let mut other = client(&shoal).await;
    let v: Option<String> = other
        .query_first("SELECT v FROM items WHERE id = 7")
        .await
        .expect("a new session reads too");
    assert_eq!(v.as_deref(), Some("v7"));
    let (code, _, msg) = server_error(c.query_drop("INSERT INTO items VALUES (800, 'x')").await);
    assert_eq!(code, 1429, "{msg}");
}
