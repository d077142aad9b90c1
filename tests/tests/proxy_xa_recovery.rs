//! XA recovery that cannot be fooled (issue 45, part 3), end to end over three real MariaDB
//! servers: p0 is datahost dh0's primary (and holds the decision log), p1 is dh1's primary,
//! p2 is listed as dh1's replica but replicates from nobody (a server that is no datahost's
//! primary: an old primary after a failover, say). Prepared branches with Shoal's formatID and
//! a commit decision are left on p1 and p2 as a coordinator that died would leave them.
//! Recovery must finish both, keep the decision row while p2 (stopped with SIGSTOP) cannot be
//! asked, not stall on p2, kill the connection still holding a branch it must finish, and
//! report the branch the decision names that exists nowhere.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_tests::ShoalProcess;

/// Shoal's XA formatID ("SH").
const FORMAT_ID: u32 = 0x5348;

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn xid(gtrid: &str, bqual: &str) -> String {
    format!("X'{}',X'{}',{FORMAT_ID}", hex(gtrid), hex(bqual))
}

/// Leaves branch (`gtrid`, `bqual`) prepared on `c`'s server, inserting `id` into `a.t`.
async fn prepare_branch(c: &mut Conn, gtrid: &str, bqual: &str, id: u32) {
    let x = xid(gtrid, bqual);
    for sql in [
        format!("XA START {x}"),
        format!("INSERT INTO a.t (id) VALUES ({id})"),
        format!("XA END {x}"),
        format!("XA PREPARE {x}"),
    ] {
        c.query_drop(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// Our prepared branches on `c`'s server (their gtrid+bqual text).
async fn prepared(c: &mut Conn) -> Vec<String> {
    let rows: Vec<Row> = c.query("XA RECOVER").await.expect("XA RECOVER");
    rows.into_iter()
        .filter(|r| r.get::<i64, _>(0) == Some(FORMAT_ID as i64))
        .map(|r| r.get::<String, _>(3).unwrap_or_default())
        .collect()
}

async fn ids(c: &mut Conn) -> Vec<u32> {
    c.query("SELECT id FROM a.t ORDER BY id")
        .await
        .expect("ids")
}

/// The decision rows for `gtrid` on the log server.
async fn decision_rows(c: &mut Conn, gtrid: &str) -> u64 {
    c.query_first(format!(
        "SELECT COUNT(*) FROM shoal_xa.decisions WHERE gtrid = X'{}'",
        hex(gtrid)
    ))
    .await
    .expect("decision rows")
    .unwrap_or(0)
}

async fn xa_stat(shoal: &ShoalProcess, name: &str) -> u64 {
    let mut c = Conn::new(shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .expect("connect through shoal");
    let rows: Vec<Row> = c.query("SHOW SHOAL XA").await.expect("SHOW SHOAL XA");
    let row = rows.into_iter().next().expect("one row");
    shoal_tests::named_values(&row)
        .into_iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {name} in SHOW SHOAL XA"))
        .parse()
        .expect("a number")
}

async fn wait_for<F, Fut>(what: &str, shoal: &ShoalProcess, limit: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !f().await {
        assert!(
            Instant::now() < deadline,
            "gave up waiting for {what}\n{}",
            shoal.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// SIGCONTs the server when dropped, so that a failing test never leaves it stopped.
struct Stopped(i32);

impl Stopped {
    fn new(pid: u32) -> Stopped {
        let pid = pid as i32;
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.0, libc::SIGCONT);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn recovery_finishes_branches_on_every_server_and_keeps_their_decision() {
    let cluster = Cluster::start(ClusterSpec {
        primaries: 3,
        databases: vec!["a".into(), "b".into()],
        ..ClusterSpec::default()
    })
    .await
    .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"));
    let mut direct = Vec::new();
    for i in 0..3 {
        let mut c = Conn::new(cluster.opts(i, None)).await.expect("server");
        c.query_drop("CREATE TABLE a.t (id INT PRIMARY KEY)")
            .await
            .expect("create");
        direct.push(c);
    }
    let addr = |i: usize| cluster.instances()[i].addr();
    let (u, pw) = (cluster.user(), cluster.password());
    let text = format!(
        "server:\n  xa: {{ recovery_interval: 1s, recovery_grace: 3s }}\n\
         users:\n  - {{ name: app, password: app-secret, schemas: [shop], admin: true }}\n\
         datahosts:\n  - name: dh0\n    primary: {{ address: \"{}\", user: {u}, password: {pw} }}\n  \
         - name: dh1\n    primary: {{ address: \"{}\", user: {u}, password: {pw} }}\n    \
         health: {{ heartbeat: 1h }}\n    \
         replicas:\n      - {{ address: \"{}\", user: {u}, password: {pw} }}\n\
         datanodes:\n  - {{ name: dn1, datahost: dh0, database: a }}\n  \
         - {{ name: dn2, datahost: dh1, database: a }}\n  \
         - {{ name: dn3, datahost: dh1, database: b }}\n\
         schemas:\n  - name: shop\n    transactions: xa\n    default_datanode: dn1\n    \
         tables:\n      - {{ name: t, type: global, datanodes: \"dn1, dn2, dn3\" }}\n",
        addr(0),
        addr(1),
        addr(2)
    );
    let path = shoal_tests::scratch_dir()
        .join(format!("{}.yaml", shoal_tests::unique_name("xa-recovery")));
    std::fs::write(&path, text).expect("write config");
    let admin = format!("127.0.0.1:{}", shoal_tests::shoal::free_port());
    let shoal = ShoalProcess::start(&[
        "--config".to_string(),
        path.display().to_string(),
        "--admin-listen".to_string(),
        admin.clone(),
    ]);
    // Recovery creates the decision log at its first scan.
    let log = &cluster;
    wait_for(
        "the decision log",
        &shoal,
        Duration::from_secs(30),
        || async move {
            let mut c = Conn::new(log.opts(0, None)).await.expect("p0");
            c.query_drop("SELECT 1 FROM shoal_xa.decisions LIMIT 1")
                .await
                .is_ok()
        },
    )
    .await;

    // A coordinator's leftovers: branches dn2 on p1 and dn3 on p2 (the "replica"), and a
    // commit decision naming dn1 too, whose branch is prepared nowhere.
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let gtrid = format!("shoal-{ms:x}-0000dead-1");
    prepare_branch(&mut direct[1], &gtrid, "dn2", 1).await;
    prepare_branch(&mut direct[2], &gtrid, "dn3", 2).await;
    for c in direct.drain(..) {
        // Disconnected: the branches stay prepared, as a dead coordinator leaves them.
        c.disconnect().await.ok();
    }
    // Another transaction's branch on p1, still held by a live connection of Shoal's backend
    // account (a coordinator stuck after its decision): XA COMMIT from elsewhere says 1397
    // until that connection is gone.
    let held = format!("shoal-{ms:x}-0000dead-2");
    let mut holder = Conn::new(cluster.opts(1, None)).await.expect("p1");
    prepare_branch(&mut holder, &held, "dn2", 3).await;
    {
        let mut c = Conn::new(cluster.opts(0, None)).await.expect("p0");
        c.query_drop(format!(
            "INSERT INTO shoal_xa.decisions (gtrid, outcome, datanodes) VALUES \
             (X'{}', 'commit', 'dn1,dn2,dn3'), (X'{}', 'commit', 'dn2')",
            hex(&gtrid),
            hex(&held)
        ))
        .await
        .expect("the commit decisions");
    }
    // p2 stops answering (within the grace: recovery has not touched the branches yet).
    let stopped = Stopped::new(cluster.instances()[2].pid);
    // Recovery does not stall on p2: p1's branches are committed, the held one after its
    // holder's connection was killed.
    let c1 = &cluster;
    wait_for(
        "p1's branches committed",
        &shoal,
        Duration::from_secs(60),
        || async move {
            let mut c = Conn::new(c1.opts(1, None)).await.expect("p1");
            prepared(&mut c).await.is_empty() && ids(&mut c).await == vec![1, 3]
        },
    )
    .await;
    assert!(
        holder.query_drop("SELECT 1").await.is_err(),
        "the holder's connection should have been killed"
    );
    assert!(
        shoal
            .log()
            .contains("killed a backend connection holding a prepared XA branch"),
        "{}",
        shoal.log()
    );
    // While p2 cannot be asked, the decision stays: several scans and the grace later.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let mut p0 = Conn::new(cluster.opts(0, None)).await.expect("p0");
    assert_eq!(
        decision_rows(&mut p0, &gtrid).await,
        1,
        "the commit decision was collected while p2 still holds a branch of it\n{}",
        shoal.log()
    );
    assert_eq!(xa_stat(&shoal, "missing_branches").await, 0);

    // p2 answers again: its branch (on a server that is no primary) is committed too.
    drop(stopped);
    wait_for(
        "p2's branch committed",
        &shoal,
        Duration::from_secs(60),
        || async move {
            let mut c = Conn::new(c1.opts(2, None)).await.expect("p2");
            prepared(&mut c).await.is_empty() && ids(&mut c).await == vec![2]
        },
    )
    .await;
    assert_eq!(xa_stat(&shoal, "recovered_commit").await, 3);
    // dn1, named by the decision, had no branch anywhere: reported.
    assert_eq!(xa_stat(&shoal, "missing_branches").await, 1);
    assert!(
        shoal
            .log()
            .contains("XA commit decision names branches prepared on no server"),
        "{}",
        shoal.log()
    );
    let (status, metrics) = shoal_tests::http_get(&admin, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(
        shoal_tests::metric_value(&metrics, "shoal_xa_missing_branches_total", &[]),
        1.0,
        "{metrics}"
    );
    // Nothing of it is prepared anywhere any more: the decision is collected.
    let p0 = &cluster;
    let g = &gtrid;
    wait_for(
        "the decision collected",
        &shoal,
        Duration::from_secs(60),
        || async move {
            let mut c = Conn::new(p0.opts(0, None)).await.expect("p0");
            decision_rows(&mut c, g).await == 0
        },
    )
    .await;
}

/// `shoal --check` output (stdout and stderr) and whether it succeeded.
fn check(path: &std::path::Path) -> (bool, String) {
    let out = std::process::Command::new(shoal_tests::shoal::shoal_bin())
        .args(["--check", "--config"])
        .arg(path)
        .output()
        .expect("run shoal --check");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The decision log's server keeps a committed decision through a crash only when it flushes
/// each commit (`innodb_flush_log_at_trx_commit = 1`, `sync_binlog = 1` with the binary log
/// on) or waits for a semi-synchronous replica: `shoal --check` and the start warn otherwise
/// (the launcher's servers trade durability for speed: 2 and 0), and stop warning once the
/// server is made durable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_and_start_warn_when_the_decision_log_server_can_lose_a_decision() {
    let cluster = Cluster::start(ClusterSpec {
        primaries: 1,
        databases: vec!["a".into(), "b".into()],
        ..ClusterSpec::default()
    })
    .await
    .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"));
    let (u, pw) = (cluster.user(), cluster.password());
    let text = format!(
        "users:\n  - {{ name: app, password: app-secret, schemas: [shop] }}\n\
         datahosts:\n  - name: dh0\n    primary: {{ address: \"{}\", user: {u}, password: {pw} }}\n\
         datanodes:\n  - {{ name: dn1, datahost: dh0, database: a }}\n  \
         - {{ name: dn2, datahost: dh0, database: b }}\n\
         schemas:\n  - name: shop\n    transactions: xa\n    default_datanode: dn1\n    \
         tables:\n      - {{ name: t, type: global, datanodes: \"dn1, dn2\" }}\n",
        cluster.instances()[0].addr()
    );
    let path = shoal_tests::scratch_dir().join(format!(
        "{}.yaml",
        shoal_tests::unique_name("xa-durability")
    ));
    std::fs::write(&path, text).expect("write config");

    let (ok, out) = check(&path);
    assert!(ok, "--check refused a valid file:\n{out}");
    for want in [
        "warning: the XA decision log's server",
        "innodb_flush_log_at_trx_commit = 2",
        "sync_binlog = 0",
    ] {
        assert!(out.contains(want), "--check should say {want}:\n{out}");
    }
    let shoal = ShoalProcess::start(&["--config".to_string(), path.display().to_string()]);
    let s = &shoal;
    wait_for(
        "the start's warning",
        s,
        Duration::from_secs(30),
        || async move {
            s.log()
                .contains("the XA decision log's server can lose a committed decision")
        },
    )
    .await;

    let mut p0 = Conn::new(cluster.opts(0, None)).await.expect("p0");
    p0.query_drop("SET GLOBAL innodb_flush_log_at_trx_commit = 1, sync_binlog = 1")
        .await
        .expect("durable settings");
    let (ok, out) = check(&path);
    assert!(
        ok && !out.contains("warning:"),
        "a durable log server got a warning:\n{out}"
    );
}

/// A server a reload removes keeps the prepared branches it held: recovery keeps asking it
/// (until it holds nothing of Shoal's) and commits the branch as the decision says.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_branch_on_a_server_removed_by_a_reload_is_still_finished() {
    let cluster = Cluster::start(ClusterSpec {
        primaries: 3,
        databases: vec!["a".into(), "b".into()],
        ..ClusterSpec::default()
    })
    .await
    .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"));
    let mut p2 = Conn::new(cluster.opts(2, None)).await.expect("p2");
    p2.query_drop("CREATE TABLE a.t (id INT PRIMARY KEY)")
        .await
        .expect("create");
    let addr = |i: usize| cluster.instances()[i].addr();
    let (u, pw) = (cluster.user(), cluster.password());
    let text = |replica: bool| {
        let replicas = if replica {
            format!(
                "    replicas:\n      - {{ address: \"{}\", user: {u}, password: {pw} }}\n",
                addr(2)
            )
        } else {
            String::new()
        };
        format!(
            "server:\n  xa: {{ recovery_interval: 1s, recovery_grace: 3s }}\n\
             users:\n  - {{ name: app, password: app-secret, schemas: [shop], admin: true }}\n\
             datahosts:\n  - name: dh0\n    primary: {{ address: \"{}\", user: {u}, password: {pw} }}\n  \
             - name: dh1\n    primary: {{ address: \"{}\", user: {u}, password: {pw} }}\n    \
             health: {{ heartbeat: 1h }}\n{replicas}\
             datanodes:\n  - {{ name: dn1, datahost: dh0, database: a }}\n  \
             - {{ name: dn2, datahost: dh1, database: a }}\n\
             schemas:\n  - name: shop\n    transactions: xa\n    default_datanode: dn1\n    \
             tables:\n      - {{ name: t, type: global, datanodes: \"dn1, dn2\" }}\n",
            addr(0),
            addr(1)
        )
    };
    let path =
        shoal_tests::scratch_dir().join(format!("{}.yaml", shoal_tests::unique_name("xa-retired")));
    std::fs::write(&path, text(true)).expect("write config");
    let shoal = ShoalProcess::start(&["--config".to_string(), path.display().to_string()]);
    let log = &cluster;
    wait_for(
        "the decision log",
        &shoal,
        Duration::from_secs(30),
        || async move {
            let mut c = Conn::new(log.opts(0, None)).await.expect("p0");
            c.query_drop("SELECT 1 FROM shoal_xa.decisions LIMIT 1")
                .await
                .is_ok()
        },
    )
    .await;
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let gtrid = format!("shoal-{ms:x}-0000beef-1");
    prepare_branch(&mut p2, &gtrid, "dn2", 7).await;
    p2.disconnect().await.ok();
    let mut p0 = Conn::new(cluster.opts(0, None)).await.expect("p0");
    p0.query_drop(format!(
        "INSERT INTO shoal_xa.decisions (gtrid, outcome, datanodes) VALUES \
         (X'{}', 'commit', 'dn2')",
        hex(&gtrid)
    ))
    .await
    .expect("the commit decision");
    // Within the grace (recovery has not touched the branch yet), p2 leaves the file.
    std::fs::write(&path, text(false)).expect("write config");
    let mut c = Conn::new(shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .expect("connect through shoal");
    let rows: Vec<(String, String)> = c.query("RELOAD SHOAL CONFIG").await.expect("RELOAD");
    assert!(
        rows.contains(&("change".into(), format!("server removed: dh1 {}", addr(2)))),
        "{rows:?}"
    );
    let c2 = &cluster;
    wait_for(
        "the removed server's branch committed",
        &shoal,
        Duration::from_secs(60),
        || async move {
            let mut c = Conn::new(c2.opts(2, None)).await.expect("p2");
            prepared(&mut c).await.is_empty() && ids(&mut c).await == vec![7]
        },
    )
    .await;
    let s = &shoal;
    wait_for(
        "recovery to stop asking the removed server",
        s,
        Duration::from_secs(30),
        || async move { s.log().contains("recovery stops asking it") },
    )
    .await;
}

/// A datahost's primary that stops answering (SIGSTOP: connections open, nothing answered)
/// does not stall recovery: each of its statements has a time limit, the other primary's
/// branch is committed, and the decision is kept while the stopped server cannot be asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_that_stops_answering_does_not_stall_recovery() {
    let cluster = Cluster::start(ClusterSpec {
        primaries: 2,
        databases: vec!["a".into()],
        ..ClusterSpec::default()
    })
    .await
    .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"));
    let mut p0 = Conn::new(cluster.opts(0, None)).await.expect("p0");
    p0.query_drop("CREATE TABLE a.t (id INT PRIMARY KEY)")
        .await
        .expect("create");
    let addr = |i: usize| cluster.instances()[i].addr();
    let (u, pw) = (cluster.user(), cluster.password());
    let text = format!(
        "server:\n  xa: {{ recovery_interval: 1s, recovery_grace: 3s }}\n\
         users:\n  - {{ name: app, password: app-secret, schemas: [shop] }}\n\
         datahosts:\n  - name: dh0\n    primary: {{ address: \"{}\", user: {u}, password: {pw} }}\n  \
         - name: dh1\n    primary: {{ address: \"{}\", user: {u}, password: {pw} }}\n    \
         health: {{ heartbeat: 1h }}\n\
         datanodes:\n  - {{ name: dn1, datahost: dh0, database: a }}\n  \
         - {{ name: dn2, datahost: dh1, database: a }}\n\
         schemas:\n  - name: shop\n    transactions: xa\n    default_datanode: dn1\n    \
         tables:\n      - {{ name: t, type: global, datanodes: \"dn1, dn2\" }}\n",
        addr(0),
        addr(1)
    );
    let path =
        shoal_tests::scratch_dir().join(format!("{}.yaml", shoal_tests::unique_name("xa-stall")));
    std::fs::write(&path, text).expect("write config");
    let shoal = ShoalProcess::start(&["--config".to_string(), path.display().to_string()]);
    let log = &cluster;
    wait_for(
        "the decision log",
        &shoal,
        Duration::from_secs(30),
        || async move {
            let mut c = Conn::new(log.opts(0, None)).await.expect("p0");
            c.query_drop("SELECT 1 FROM shoal_xa.decisions LIMIT 1")
                .await
                .is_ok()
        },
    )
    .await;
    // Recovery has asked p1 at least once (its connection may be kept for the next scan).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let gtrid = format!("shoal-{ms:x}-0000f00d-1");
    prepare_branch(&mut p0, &gtrid, "dn1", 5).await;
    p0.disconnect().await.ok();
    let mut p0 = Conn::new(cluster.opts(0, None)).await.expect("p0");
    p0.query_drop(format!(
        "INSERT INTO shoal_xa.decisions (gtrid, outcome, datanodes) VALUES \
         (X'{}', 'commit', 'dn1,dn2')",
        hex(&gtrid)
    ))
    .await
    .expect("the commit decision");
    p0.disconnect().await.ok();
    let _stopped = Stopped::new(cluster.instances()[1].pid);
    let c0 = &cluster;
    wait_for(
        "p0's branch committed while p1 is stopped",
        &shoal,
        Duration::from_secs(90),
        || async move {
            let mut c = Conn::new(c0.opts(0, None)).await.expect("p0");
            prepared(&mut c).await.is_empty() && ids(&mut c).await == vec![5]
        },
    )
    .await;
    // p1 (perhaps holding dn2's branch) cannot be asked: the decision stays.
    let mut c = Conn::new(cluster.opts(0, None)).await.expect("p0");
    assert_eq!(decision_rows(&mut c, &gtrid).await, 1, "{}", shoal.log());
}
