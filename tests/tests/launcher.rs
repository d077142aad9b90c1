//! The local MariaDB launcher (`shoal_bench::cluster`) against real servers: replication works,
//! replicas refuse application writes, parallel clusters do not collide, and nothing a test
//! started is left running — after a drop, a panic, or the test process being killed.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Error, ServerError};
use shoal_bench::cluster::{Cluster, ClusterSpec, Role, is_our_server};

/// (pid, defaults file): enough to tell whether that exact server still runs.
type ServerId = (u32, PathBuf);

fn server_ids(cluster: &Cluster) -> Vec<ServerId> {
    cluster
        .instances()
        .iter()
        .map(|i| (i.pid, i.defaults_file()))
        .collect()
}

/// Any live, non-zombie process with this pid running a MariaDB server binary counts: stricter
/// than matching our config file, in case that check itself were wrong.
fn mariadbd_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let zombie = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|s| s == "Z" || s == "X");
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    !zombie && (exe.contains("mariadbd") || exe.contains("mysqld"))
}

fn assert_all_gone(ids: &[ServerId], within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let alive: Vec<&ServerId> = ids
            .iter()
            .filter(|(pid, cnf)| is_our_server(*pid, cnf) || mariadbd_alive(*pid))
            .collect();
        if alive.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "servers still running after {within:?}: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn server_error(e: Error) -> ServerError {
    match e {
        Error::Server(se) => se,
        other => panic!("expected a server error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_written_on_a_primary_is_read_back_from_its_replica() {
    let cluster = Cluster::start(ClusterSpec {
        primaries: 2,
        replicas_per_primary: 1,
        databases: vec!["app".into()],
        ..Default::default()
    })
    .await
    .expect("cluster starts");
    assert_eq!(cluster.instances().len(), 4);
    assert_eq!(cluster.primaries().len(), 2);

    for p in 0..2 {
        let mut conn = Conn::new(cluster.opts(p, Some("app"))).await.unwrap();
        conn.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB")
            .await
            .unwrap();
        conn.exec_drop(
            "INSERT INTO t VALUES (?, ?)",
            (p + 1, format!("from p{p} 🐟")),
        )
        .await
        .unwrap();
        conn.disconnect().await.unwrap();
    }
    cluster.sync_replicas().await.expect("replicas catch up");

    for p in 0..2 {
        let replicas = cluster.replicas_of(p);
        assert_eq!(replicas.len(), 1);
        assert_eq!(replicas[0].role, Role::Replica { of: p });
        let index = cluster
            .instances()
            .iter()
            .position(|i| i.port == replicas[0].port)
            .unwrap();
        let mut conn = Conn::new(cluster.opts(index, Some("app"))).await.unwrap();
        let rows: Vec<(u32, String)> = conn.query("SELECT id, v FROM t ORDER BY id").await.unwrap();
        // Each replica holds its own primary's row and only that one.
        assert_eq!(rows, vec![(p as u32 + 1, format!("from p{p} 🐟"))]);
        conn.disconnect().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_refuses_writes_from_the_application_user() {
    let cluster = Cluster::start(ClusterSpec {
        primaries: 1,
        replicas_per_primary: 1,
        databases: vec!["app".into()],
        ..Default::default()
    })
    .await
    .expect("cluster starts");
    let mut primary = Conn::new(cluster.opts(0, Some("app"))).await.unwrap();
    primary
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    cluster.sync_replicas().await.unwrap();

    let mut replica = Conn::new(cluster.opts(1, Some("app"))).await.unwrap();
    let read_only: i64 = replica
        .query_first("SELECT @@read_only")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read_only, 1);
    let err = server_error(
        replica
            .query_drop("INSERT INTO t VALUES (1)")
            .await
            .expect_err("a replica must refuse the application user's write"),
    );
    assert_eq!(err.code, 1290, "{err:?}");
    assert_eq!(err.state, "HY000");

    let count: i64 = replica
        .query_first("SELECT COUNT(*) FROM t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(count, 0);
    // The primary still takes writes, and the replica still follows.
    primary
        .query_drop("INSERT INTO t VALUES (2)")
        .await
        .unwrap();
    cluster.sync_replicas().await.unwrap();
    let count: i64 = replica
        .query_first("SELECT COUNT(*) FROM t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(count, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_started_at_once_do_not_collide() {
    let spec = || ClusterSpec {
        primaries: 2,
        replicas_per_primary: 1,
        databases: vec!["app".into()],
        ..Default::default()
    };
    let (a, b) = tokio::join!(Cluster::start(spec()), Cluster::start(spec()));
    let (a, b) = (a.expect("cluster a starts"), b.expect("cluster b starts"));

    let mut ports: Vec<u16> = a
        .instances()
        .iter()
        .chain(b.instances())
        .map(|i| i.port)
        .collect();
    assert!(!ports.contains(&3306));
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 8, "every instance has its own port");
    assert_ne!(a.dir(), b.dir());

    // Every instance is its own server: a marker written to one primary is not on the other
    // cluster's primary, and each instance reports the port it was given.
    for (cluster, marker) in [(&a, "a"), (&b, "b")] {
        let mut conn = Conn::new(cluster.opts(0, Some("app"))).await.unwrap();
        conn.query_drop("CREATE TABLE marker (m VARCHAR(4))")
            .await
            .unwrap();
        conn.exec_drop("INSERT INTO marker VALUES (?)", (marker,))
            .await
            .unwrap();
        for (i, inst) in cluster.instances().iter().enumerate() {
            let mut c = Conn::new(cluster.opts(i, None)).await.unwrap();
            let port: u16 = c.query_first("SELECT @@port").await.unwrap().unwrap();
            assert_eq!(port, inst.port);
            c.disconnect().await.unwrap();
        }
    }
    for (cluster, marker) in [(&a, "a"), (&b, "b")] {
        cluster.sync_replicas().await.unwrap();
        let replica = cluster.instances().len() - 2; // p0r0
        assert_eq!(cluster.instances()[replica].role, Role::Replica { of: 0 });
        for i in [0, replica] {
            let mut conn = Conn::new(cluster.opts(i, Some("app"))).await.unwrap();
            let seen: Vec<String> = conn.query("SELECT m FROM marker").await.unwrap();
            assert_eq!(seen, vec![marker.to_string()]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_cluster_stops_its_servers_and_removes_its_dir() {
    let cluster = Cluster::start(ClusterSpec {
        primaries: 1,
        replicas_per_primary: 1,
        ..Default::default()
    })
    .await
    .expect("cluster starts");
    let ids = server_ids(&cluster);
    let dir = cluster.dir().to_path_buf();
    assert!(ids.iter().all(|(pid, cnf)| is_our_server(*pid, cnf)));
    assert!(dir.exists());
    drop(cluster);
    assert_all_gone(&ids, Duration::ZERO);
    assert!(!dir.exists(), "{} is left behind", dir.display());
}

#[test]
fn a_panic_while_holding_a_cluster_stops_its_servers() {
    let (tx, rx) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let cluster = Cluster::start(ClusterSpec {
                primaries: 1,
                replicas_per_primary: 1,
                ..Default::default()
            })
            .await
            .expect("cluster starts");
            tx.send((server_ids(&cluster), cluster.dir().to_path_buf()))
                .unwrap();
            panic!("deliberate panic while holding a cluster");
        })
    });
    let (ids, dir) = rx.recv().expect("the holder reports its servers");
    assert!(holder.join().is_err(), "the holder thread panicked");
    assert_all_gone(&ids, Duration::ZERO);
    assert!(!dir.exists(), "{} is left behind", dir.display());
}

const HELPER_ENV: &str = "SHOAL_LAUNCHER_TEST_HOLD_CLUSTER";

/// Not a test of its own: `killing_the_test_process_kills_its_servers` runs this in a child
/// process, which starts a cluster, reports it and then waits to be killed.
#[test]
#[ignore = "helper process for killing_the_test_process_kills_its_servers"]
fn helper_hold_a_cluster_until_killed() {
    if std::env::var_os(HELPER_ENV).is_none() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cluster = rt
        .block_on(Cluster::start(ClusterSpec {
            primaries: 1,
            replicas_per_primary: 1,
            ..Default::default()
        }))
        .expect("cluster starts");
    let pids: Vec<String> = cluster
        .instances()
        .iter()
        .map(|i| i.pid.to_string())
        .collect();
    println!("CLUSTER {} {}", cluster.dir().display(), pids.join(" "));
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn killing_the_test_process_kills_its_servers() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_hold_a_cluster_until_killed",
            "--ignored",
            "--nocapture",
        ])
        .env(HELPER_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawning the helper");
    let stdout = child.stdout.take().unwrap();
    let line = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("CLUSTER "));
    let Some(line) = line else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the helper did not report a cluster");
    };
    let mut fields = line.split_whitespace().skip(1);
    let dir = PathBuf::from(fields.next().unwrap());
    let pids: Vec<u32> = fields.map(|p| p.parse().unwrap()).collect();
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|p| mariadbd_alive(*p)));

    // SIGKILL: no destructor runs; only the kernel's parent-death signal can stop the servers.
    child.kill().unwrap();
    child.wait().unwrap();
    let ids: Vec<ServerId> = pids
        .iter()
        .map(|p| (*p, PathBuf::from("/nonexistent")))
        .collect();
    assert_all_gone(&ids, Duration::from_secs(10));
    // The helper could not clean up its temp dir; do it for it.
    let _ = std::fs::remove_dir_all(&dir);
}
