//! Statement time limits, end to end over real MariaDB (issue 25): `server.query_timeout`
//! interrupts a backend statement with `KILL QUERY` and answers 1969 as MariaDB's own
//! `max_statement_time` does, on one datanode, over all of them (reads and writes), and in quick
//! mode; the killed statements are gone from the servers and the sessions (their transactions
//! included) go on.
//! A server stopped with SIGSTOP cannot run the KILL: a read gets an error instead of a hang,
//! an autocommit write gets "outcome unknown" (and does take effect when the server resumes),
//! and other sessions keep working. A session's own `max_statement_time` is enforced by the
//! backends, single and scattered, with or without `query_timeout`.

use std::time::Duration;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_bench::cluster::Cluster;
use shoal_tests::{ShoalProcess, server_error, shared_backend, unique_name, within};

const DBS: [&str; 2] = ["a", "b"];
/// Generous: a hang is what these limits catch, never a slow answer.
const LIMIT: Duration = Duration::from_secs(15);

/// `t` sharded by `w` mod 4 over dn1..dn4 (server 0 `a`, `b`, server 1 `a`, `b`), with
/// `server:` keys `server` (e.g. `query_timeout: 500ms`).
fn layout(server: &str) -> String {
    let tables = shoal_tests::warehouse_layout("", &[("t", "w")], &[]);
    format!("server:\n  log_level: debug\n{server}{tables}")
}

async fn start(server: &str, tag: &str) -> (Cluster, ShoalProcess) {
    let (cluster, shoal) =
        shoal_tests::two_servers_and_shoal(&DBS, shoal_tests::APP_USER, &layout(server), tag).await;
    let mut c = client(&shoal).await;
    c.query_drop("CREATE TABLE t (w INT PRIMARY KEY, v VARCHAR(20))")
        .await
        .unwrap_or_else(|e| panic!("CREATE TABLE: {e}\n{}", shoal.log()));
    // One row on each datanode.
    c.query_drop("INSERT INTO t (w, v) VALUES (0, 'x'), (1, 'x'), (2, 'x'), (3, 'x')")
        .await
        .unwrap();
    (cluster, shoal)
}

async fn client(shoal: &ShoalProcess) -> Conn {
    Conn::new(shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\n{}", shoal.log()))
}

/// Statements of the cluster's account whose text contains `needle`, on every server (the
/// query asking is left out).
async fn running_on(cluster: &Cluster, needle: &str) -> i64 {
    let mut n = 0;
    for i in 0..2 {
        let mut c = Conn::new(cluster.opts(i, None)).await.unwrap();
        let k: Option<i64> = c
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ? \
                 AND INFO LIKE CONCAT('%', ?, '%') AND INFO NOT LIKE '%PROCESSLIST%'",
                (cluster.user(), needle),
            )
            .await
            .unwrap();
        n += k.unwrap_or(0);
        c.disconnect().await.unwrap();
    }
    n
}

/// Waits until no statement containing `needle` runs on the servers. The statements tested
/// sleep 30 s, so one still there after a few seconds was not interrupted.
async fn assert_gone(cluster: &Cluster, needle: &str) {
    for _ in 0..30 {
        if running_on(cluster, needle).await == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("a statement with {needle:?} still runs on a backend: it was not killed");
}

async fn expect_timeout(c: &mut Conn, sql: &str, shoal: &ShoalProcess) {
    let r = within(LIMIT, sql, c.query_drop(sql)).await;
    let (code, state, message) = server_error(r);
    assert_eq!(
        (code, state.as_str()),
        (1969, "70100"),
        "{sql}: {message}\n{}",
        shoal.log()
    );
    assert_eq!(
        message, "Query execution was interrupted (max_statement_time exceeded)",
        "{sql}"
    );
}

async fn one(c: &mut Conn) -> Option<i64> {
    within(LIMIT, "SELECT 1", c.query_first("SELECT 1"))
        .await
        .unwrap()
}

#[tokio::test]
async fn query_timeout_kills_single_and_scattered_statements() {
    let (cluster, shoal) = start("  query_timeout: 500ms\n", "timeouts_kill").await;
    let mut c = client(&shoal).await;

    // One datanode (the schema's default).
    expect_timeout(&mut c, "SELECT SLEEP(30) AS single_tag", &shoal).await;
    assert_gone(&cluster, "single_tag").await;
    assert_eq!(one(&mut c).await, Some(1), "the session goes on");

    // Every datanode, a result merged from all of them.
    expect_timeout(&mut c, "SELECT SLEEP(30) AS scatter_tag FROM t", &shoal).await;
    assert_gone(&cluster, "scatter_tag").await;
    assert_eq!(one(&mut c).await, Some(1));
    let rows: Vec<(i64, String)> = c.query("SELECT w, v FROM t ORDER BY w").await.unwrap();
    assert_eq!(rows.len(), 4, "the shard connections serve on: {rows:?}");

    // A write the KILL interrupted did not happen (MariaDB rolls the statement back).
    expect_timeout(
        &mut c,
        "UPDATE t SET v = CONCAT('slept', SLEEP(30)) WHERE w = 2",
        &shoal,
    )
    .await;
    assert_gone(&cluster, "slept").await;
    let v: Option<String> = c.query_first("SELECT v FROM t WHERE w = 2").await.unwrap();
    assert_eq!(v.as_deref(), Some("x"));

    // A write over every datanode (in a transaction Shoal opens for it): interrupted, rolled
    // back everywhere, the connections serve on.
    let r = within(
        LIMIT,
        "a write over every datanode",
        c.query_drop("UPDATE t SET v = CONCAT('all', SLEEP(30))"),
    )
    .await;
    let (code, _, message) = server_error(r);
    assert_eq!(code, 1969, "{message}\n{}", shoal.log());
    // Every datanode was interrupted alike: one server's answer.
    assert_eq!(
        message,
        "Query execution was interrupted (max_statement_time exceeded)"
    );
    assert_gone(&cluster, "CONCAT('all'").await;
    let changed: Option<i64> = c
        .query_first("SELECT COUNT(*) FROM t WHERE v <> 'x'")
        .await
        .unwrap();
    assert_eq!(changed, Some(0), "nothing of the interrupted write stays");

    // Inside a transaction: the statement fails, the transaction goes on, as on one server.
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("INSERT INTO t (w, v) VALUES (4, 'in txn')")
        .await
        .unwrap();
    expect_timeout(
        &mut c,
        "SELECT SLEEP(30) AS txn_tag FROM t WHERE w = 4",
        &shoal,
    )
    .await;
    assert_gone(&cluster, "txn_tag").await;
    c.query_drop("COMMIT").await.unwrap();
    let mut other = client(&shoal).await;
    let v: Option<String> = other
        .query_first("SELECT v FROM t WHERE w = 4")
        .await
        .unwrap();
    assert_eq!(
        v.as_deref(),
        Some("in txn"),
        "the transaction kept its write"
    );

    // Statements within the limit are untouched.
    let slept: Option<i64> = c.query_first("SELECT SLEEP(0.1)").await.unwrap();
    assert_eq!(slept, Some(0));
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM t").await.unwrap();
    assert_eq!(n, Some(5));
}

/// SIGCONTs the server when dropped, so that a failing test never leaves it stopped.
struct Stopped(i32);

impl Stopped {
    fn stop(pid: u32) -> Stopped {
        let pid = pid as i32;
        // SAFETY: a plain signal to a child process the cluster started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        // kill() only queues the signal: on a loaded machine the server's threads can still
        // answer a statement sent right after it. Wait until the kernel says it is stopped.
        let stat = format!("/proc/{pid}/stat");
        for _ in 0..200 {
            let state = std::fs::read_to_string(&stat)
                .ok()
                .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('T')));
            if state == Some(true) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe {
            libc::kill(self.0, libc::SIGCONT);
        }
    }
}

#[tokio::test]
async fn a_stopped_server_gives_errors_not_hangs() {
    let (cluster, shoal) = start("  query_timeout: 500ms\n", "timeouts_stall").await;
    let mut reader = client(&shoal).await;
    let mut writer = client(&shoal).await;
    let mut bystander = client(&shoal).await;
    // Each holds its connection from here on (w = 0 is on dn1, server 0; w = 2 on server 1).
    for c in [&mut reader, &mut writer] {
        let n: Option<i64> = c
            .query_first("SELECT COUNT(*) FROM t WHERE w = 0")
            .await
            .unwrap();
        assert_eq!(n, Some(1));
    }
    let n: Option<i64> = bystander
        .query_first("SELECT COUNT(*) FROM t WHERE w = 2")
        .await
        .unwrap();
    assert_eq!(n, Some(1));

    let stopped = Stopped::stop(cluster.primary(0).pid);
    // Both at once, before the health monitor can notice the server.
    let read = tokio::spawn(async move {
        let r = within(
            LIMIT,
            "a read on the stopped server",
            reader.query_drop("SELECT COUNT(*) FROM t WHERE w = 0"),
        )
        .await;
        (reader, r)
    });
    let write = tokio::spawn(async move {
        let r = within(
            LIMIT,
            "a write on the stopped server",
            writer.query_drop("INSERT INTO t (w, v) VALUES (8, 'stalled')"),
        )
        .await;
        (writer, r)
    });
    let (mut reader, r) = read.await.unwrap();
    let (code, _, message) = server_error(r);
    assert_eq!(code, 1969, "{message}\n{}", shoal.log());
    let (mut writer, r) = write.await.unwrap();
    let (code, _, message) = server_error(r);
    assert_eq!(code, 1430, "{message}\n{}", shoal.log());
    assert!(
        message.contains("outcome on datanode dn1 is unknown"),
        "a write the server may still run is not reported as failed: {message}"
    );
    // The other server serves on meanwhile.
    let n: Option<i64> = within(
        LIMIT,
        "a read on the running server",
        bystander.query_first("SELECT COUNT(*) FROM t WHERE w = 2"),
    )
    .await
    .unwrap();
    assert_eq!(n, Some(1));
    drop(stopped);

    // The server had the INSERT in its socket: resumed, it runs it. That is why the client
    // was told the outcome is unknown, not that the write failed.
    let mut direct = Conn::new(cluster.opts(0, Some("a"))).await.unwrap();
    let mut applied = None;
    for _ in 0..100 {
        applied = direct
            .query_first("SELECT COUNT(*) FROM t WHERE w = 8 AND v = 'stalled'")
            .await
            .unwrap();
        if applied == Some(1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(applied, Some(1), "the stalled write's outcome");

    // Both sessions work again (once the health monitor has the server back).
    let mut back = false;
    for _ in 0..60 {
        let r: Result<Option<i64>, _> = within(
            LIMIT,
            "a read after the server resumed",
            reader.query_first("SELECT COUNT(*) FROM t WHERE w IN (0, 8)"),
        )
        .await;
        if let Ok(n) = r {
            assert_eq!(n, Some(2), "both rows of dn1");
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        back,
        "the reading session never worked again\n{}",
        shoal.log()
    );
    assert_eq!(one(&mut writer).await, Some(1));
    writer
        .query_drop("UPDATE t SET v = 'after' WHERE w = 8")
        .await
        .unwrap();
    let mut fresh = client(&shoal).await;
    let v: Option<String> = fresh
        .query_first("SELECT v FROM t WHERE w = 8")
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("after"));
}

#[tokio::test]
async fn session_max_statement_time_is_enforced_by_the_backends() {
    // No query_timeout: nothing but the session's own limit interrupts statements.
    let (cluster, shoal) = start("", "timeouts_session").await;
    let mut c = client(&shoal).await;
    let slept: Option<i64> = c.query_first("SELECT SLEEP(1)").await.unwrap();
    assert_eq!(
        slept,
        Some(0),
        "without any limit a statement runs to its end"
    );

    c.query_drop("SET max_statement_time = 0.5").await.unwrap();
    expect_timeout(&mut c, "SELECT SLEEP(30) AS mst_single", &shoal).await;
    assert_gone(&cluster, "mst_single").await;
    expect_timeout(&mut c, "SELECT SLEEP(30) AS mst_scatter FROM t", &shoal).await;
    assert_gone(&cluster, "mst_scatter").await;
    assert_eq!(one(&mut c).await, Some(1));
    c.query_drop("SET SESSION max_statement_time = 0")
        .await
        .unwrap();
    let slept: Option<i64> = c.query_first("SELECT SLEEP(0.6)").await.unwrap();
    assert_eq!(slept, Some(0), "the limit is lifted");

    // For one statement only.
    expect_timeout(
        &mut c,
        "SET STATEMENT max_statement_time = 0.5 FOR SELECT SLEEP(30) AS mst_for",
        &shoal,
    )
    .await;
    assert_gone(&cluster, "mst_for").await;
    let slept: Option<i64> = c.query_first("SELECT SLEEP(0.6)").await.unwrap();
    assert_eq!(slept, Some(0));
}

#[tokio::test]
async fn session_limit_and_query_timeout_the_lower_wins() {
    let (cluster, shoal) = start("  query_timeout: 20s\n", "timeouts_lower").await;
    let mut c = client(&shoal).await;
    // The session's 0.5 s is below Shoal's 20 s: the backends interrupt at 0.5 s, well before
    // the 30 s sleep, and say so as Shoal would.
    c.query_drop("SET max_statement_time = 0.5").await.unwrap();
    expect_timeout(&mut c, "SELECT SLEEP(30) AS lower_tag FROM t", &shoal).await;
    assert_gone(&cluster, "lower_tag").await;
    assert_eq!(one(&mut c).await, Some(1));
}

#[tokio::test]
async fn quick_mode_query_timeout() {
    let backend = shared_backend();
    let db = unique_name("timeouts");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &["--query-timeout-ms", "500"]);
    let mut c = shoal.conn(&backend, Some(&db)).await;
    c.query_drop("CREATE TABLE q (id INT PRIMARY KEY)")
        .await
        .unwrap();
    expect_timeout(&mut c, "SELECT SLEEP(30) AS quick_tag", &shoal).await;
    let mut direct = backend.conn(None).await;
    let mut gone = false;
    for _ in 0..30 {
        let n: Option<i64> = direct
            .query_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE INFO LIKE 'SELECT SLEEP(30) AS quick_tag%'",
            )
            .await
            .unwrap();
        if n == Some(0) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the sleep still runs on the backend");
    // The transaction survives its interrupted statement.
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("INSERT INTO q VALUES (1)").await.unwrap();
    expect_timeout(&mut c, "SELECT SLEEP(30) AS quick_txn", &shoal).await;
    c.query_drop("COMMIT").await.unwrap();
    let n: Option<i64> = direct
        .query_first(format!("SELECT COUNT(*) FROM `{db}`.q"))
        .await
        .unwrap();
    assert_eq!(n, Some(1));
    assert_eq!(one(&mut c).await, Some(1));
}
