//! The threads of a running Shoal: the serving threads run under `SCHED_BATCH` unless
//! `--cpu-policy normal`, the timer thread never does, and statements are served either way.

use mysql_async::prelude::Queryable;
use shoal_tests::{ShoalProcess, shared_backend, unique_name};

const SCHED_OTHER: u32 = 0;
const SCHED_BATCH: u32 = 3;

/// (thread name, scheduling policy) of every thread of `pid`, from /proc (field 41 of stat).
fn thread_policies(pid: u32) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("shoal's /proc entry") {
        let stat = std::fs::read_to_string(task.unwrap().path().join("stat")).unwrap();
        let (head, rest) = stat
            .rsplit_once(')')
            .expect("stat names the thread in parentheses");
        let name = head.split_once('(').unwrap().1.to_string();
        // Fields after the name start at field 3 (state); the policy is field 41.
        let policy = rest
            .split_whitespace()
            .nth(41 - 3)
            .unwrap()
            .parse()
            .unwrap();
        out.push((name, policy));
    }
    out
}

async fn serves(shoal: &ShoalProcess, db: &str) {
    let backend = shared_backend();
    let mut conn = shoal.conn(&backend, Some(db)).await;
    let one: i64 = conn.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
}

#[tokio::test]
async fn serving_threads_run_batch_and_timers_do_not() {
    let backend = shared_backend();
    let db = unique_name("thr");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &["--threads", "2"]);
    serves(&shoal, &db).await;
    let threads = thread_policies(shoal.pid());
    let policy = |name: &str| {
        threads
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no thread {name} in {threads:?}"))
            .1
    };
    assert_eq!(policy("shoal-timers"), SCHED_OTHER, "{threads:?}");
    assert_eq!(policy("shoal-core-1"), SCHED_BATCH, "{threads:?}");
    // Core 0 is the main thread, named after the binary.
    let main = threads
        .iter()
        .find(|(n, _)| n.starts_with("shoal") && !n.contains('-'));
    assert_eq!(main.map(|m| m.1), Some(SCHED_BATCH), "{threads:?}");

    let normal = ShoalProcess::quick(&backend, &db, &["--threads", "2", "--cpu-policy", "normal"]);
    serves(&normal, &db).await;
    let threads = thread_policies(normal.pid());
    assert!(
        threads.iter().all(|(_, p)| *p == SCHED_OTHER),
        "--cpu-policy normal: {threads:?}"
    );
}
