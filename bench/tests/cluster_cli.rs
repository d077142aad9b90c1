//! `shoal-bench cluster up|status|down` as a user runs it: `up` returns and leaves the servers
//! running, `status` reports them, `down` stops them by pid.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};
use shoal_bench::cluster::state;

fn shoal_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shoal-bench"))
        .args(args)
        .output()
        .expect("running shoal-bench")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `cluster down` when the test ends, so a failing assertion cannot leave servers behind.
struct DownOnDrop(PathBuf);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        let _ = shoal_bench(&["cluster", "down", "--dir", self.0.to_str().unwrap()]);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fresh_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "shoal-cli-test-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn app_conn(addr: &str) -> Conn {
    let (host, port) = addr.split_once(':').unwrap();
    let opts = OptsBuilder::default()
        .ip_or_hostname(host)
        .tcp_port(port.parse().unwrap())
        .user(Some("shoal"))
        .pass(Some("shoal"))
        .prefer_socket(false);
    Conn::new(opts).await.unwrap()
}

fn pids_in(dir: &Path) -> Vec<(u32, PathBuf)> {
    state::read(dir)
        .unwrap()
        .expect("a state file")
        .iter()
        .map(|e| (e.pid, e.dir.join("my.cnf")))
        .collect()
}

#[tokio::test]
async fn up_leaves_servers_running_and_down_stops_them() {
    let dir = fresh_dir();
    let _guard = DownOnDrop(dir.clone());
    let d = dir.to_str().unwrap();

    let up = shoal_bench(&[
        "cluster",
        "up",
        "--primaries",
        "1",
        "--replicas",
        "1",
        "--databases",
        "app,other",
        "--dir",
        d,
    ]);
    assert!(up.status.success(), "up failed: {}", text(&up.stderr));
    let out = text(&up.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].starts_with("primary 127.0.0.1:"), "{out}");
    assert!(lines[1].starts_with("replica 127.0.0.1:"), "{out}");
    assert!(lines[1].contains("of=p0"), "{out}");
    assert_eq!(lines[2], "user shoal");
    assert_eq!(lines[3], "password shoal");
    assert!(text(&up.stderr).contains("started 2 instances in"));

    // The command has returned; its servers still answer, and the replica has the databases.
    let replica_addr = lines[1].split_whitespace().nth(1).unwrap();
    let mut replica = app_conn(replica_addr).await;
    let dbs: Vec<String> = replica.query("SHOW DATABASES").await.unwrap();
    assert!(
        dbs.contains(&"app".to_string()) && dbs.contains(&"other".to_string()),
        "{dbs:?}"
    );
    replica.disconnect().await.unwrap();

    let status = shoal_bench(&["cluster", "status", "--dir", d]);
    assert!(status.status.success(), "{}", text(&status.stdout));
    assert!(text(&status.stdout).contains("replicating=yes"));

    let again = shoal_bench(&["cluster", "up", "--dir", d]);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("already running"),
        "{}",
        text(&again.stderr)
    );

    let pids = pids_in(&dir);
    assert_eq!(pids.len(), 2);
    let down = shoal_bench(&["cluster", "down", "--dir", d]);
    assert!(down.status.success(), "{}", text(&down.stderr));
    assert!(text(&down.stdout).contains("stopped 2 instances"));
    for (pid, cnf) in pids {
        assert!(
            !shoal_bench::cluster::is_our_server(pid, &cnf),
            "pid {pid} still runs"
        );
    }
    let status = shoal_bench(&["cluster", "status", "--dir", d]);
    assert!(!status.status.success());
}
