//! Lock cycles across servers (issue 45, part 5): two transactions that each lock a row on
//! one server and then ask for the other's row on the other server wait for each other, but
//! each InnoDB sees only one wait. Shoal's detector (`proxy/src/deadlock.rs`) sees both and
//! ends the youngest transaction with 1213, every branch rolled back, as one MariaDB would;
//! a cycle within one server stays InnoDB's, and a wait that is no cycle is left alone.
//!
//! The layout is the demo's (`shoal_tests::demo_layout_yaml`): `orders` sharded by `user_id`
//! mod 4 over dn1..dn4 (server 0 `a`, `b`, server 1 `a`, `b`): users 4 and 8 are on dn1
//! (server 0), user 1 on dn2 (server 0), users 2 and 6 on dn3 (server 1), user 3 on dn4
//! (server 1). Every check of the data reads the servers directly.

use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_tests::orders::{Options, Orders};
use shoal_tests::shoal::free_port;
use shoal_tests::{http_get, metric_value, within};

/// A lock wait that is not broken fails the test in this long (1205), not in 50 s.
const LOCK_WAIT: &str = "SET SESSION innodb_lock_wait_timeout = 20";

/// The fixture (`shoal_tests::orders`) with `/metrics` on `admin`.
struct Setup {
    orders: Orders,
    admin: String,
}

impl std::ops::Deref for Setup {
    type Target = Orders;
    fn deref(&self) -> &Orders {
        &self.orders
    }
}

impl Setup {
    /// `server` is appended to the `server:` section (e.g. the detector's settings).
    async fn start(transactions: &str, server: &str) -> Setup {
        let admin = format!("127.0.0.1:{}", free_port());
        let tail = format!("server:\n  admin_listen: \"{admin}\"\n{server}");
        let orders = Orders::start(Options {
            transactions,
            config_tail: &tail,
            ..Default::default()
        })
        .await;
        Setup { orders, admin }
    }

    /// A client through Shoal whose lock waits end in 20 s.
    async fn client(&self) -> Conn {
        let mut c = self.orders.client().await;
        c.query_drop(LOCK_WAIT).await.unwrap();
        c
    }

    /// `shoal_deadlocks_broken_total` from `/metrics`.
    async fn broken(&self) -> f64 {
        let (status, text) = http_get(&self.admin, "/metrics").await;
        assert_eq!(status, 200, "{text}");
        metric_value(&text, "shoal_deadlocks_broken_total", &[])
    }
}

fn code(r: &Result<(), mysql_async::Error>) -> Option<u16> {
    match r {
        Err(mysql_async::Error::Server(e)) => Some(e.code),
        Err(e) => panic!("{e}"),
        Ok(()) => None,
    }
}

/// One session's part of a cycle: it writes `own_row` (a third row, of another datanode),
/// then locks `first`; later it asks for `second`.
struct Part {
    conn: Conn,
    own_row: i64,
}

/// `SELECT ... FOR UPDATE` of the row of `(id, user)`.
fn lock(id: i64, user: i64) -> String {
    format!("SELECT amount FROM orders WHERE user_id = {user} AND id = {id} FOR UPDATE")
}

/// Opens A's and B's transactions: A debits user 1 (id 3, dn2, server 0) and locks user 4's
/// row (id 1, dn1, server 0); `gap` later B debits user 3 (id 4, dn4, server 1) and locks user
/// 2's row (id 2, dn3, server 1).
async fn open_pair(s: &Setup, gap: Duration) -> (Part, Part) {
    // B connects first: its session id is the smaller, so that only the start times make it
    // the youngest (ties go to the larger id).
    let mut b = s.client().await;
    let mut a = s.client().await;
    a.query_drop("BEGIN").await.unwrap();
    a.query_drop("UPDATE orders SET amount = amount - 10 WHERE user_id = 1")
        .await
        .unwrap();
    a.query_drop(lock(1, 4)).await.unwrap();
    tokio::time::sleep(gap).await;
    b.query_drop("BEGIN").await.unwrap();
    b.query_drop("UPDATE orders SET amount = amount - 10 WHERE user_id = 3")
        .await
        .unwrap();
    b.query_drop(lock(2, 2)).await.unwrap();
    (
        Part {
            conn: a,
            own_row: 3,
        },
        Part {
            conn: b,
            own_row: 4,
        },
    )
}

/// A asks for B's row on server 1 (and waits), then B for A's on server 0: a cycle across
/// the servers. Returns (victim, winner) by who got 1213, and the time from B's request to
/// the victim's answer.
async fn provoke_cycle(a: Part, b: Part) -> (Part, Part, Duration) {
    let Part { mut conn, own_row } = a;
    let waiting = tokio::spawn(async move {
        let r = conn.query_drop(lock(2, 2)).await;
        (conn, r)
    });
    // A waits before B asks.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let Part {
        conn: mut bconn,
        own_row: b_row,
    } = b;
    let asked = Instant::now();
    let b_req = tokio::spawn(async move {
        let r = bconn.query_drop(lock(1, 4)).await;
        (bconn, r, Instant::now())
    });
    let (aconn, ra) = within(Duration::from_secs(40), "A's lock", waiting)
        .await
        .unwrap();
    let a_done = Instant::now();
    let (bconn, rb, b_done) = within(Duration::from_secs(40), "B's lock", b_req)
        .await
        .unwrap();
    let a = Part {
        conn: aconn,
        own_row,
    };
    let b = Part {
        conn: bconn,
        own_row: b_row,
    };
    match (code(&ra), code(&rb)) {
        (Some(1213), None) => (a, b, a_done - asked),
        (None, Some(1213)) => (b, a, b_done - asked),
        other => panic!("expected one 1213 and one lock granted, got {other:?}"),
    }
}

async fn cycle_across_servers(transactions: &str) {
    let s = Setup::start(transactions, "").await;
    // B's transaction starts over a second after A's (the servers' `trx_started` has whole
    // seconds): B is the youngest, the one ended.
    let (a, b) = open_pair(&s, Duration::from_millis(1100)).await;
    let (mut victim, mut winner, _) = provoke_cycle(a, b).await;
    assert_eq!(
        victim.own_row, 4,
        "{transactions}: the older transaction (A) was ended instead of the youngest"
    );
    // The victim's transaction is over: its COMMIT commits nothing of it.
    victim.conn.query_drop("COMMIT").await.unwrap();
    winner
        .conn
        .query_drop("UPDATE orders SET amount = amount + 5 WHERE user_id IN (2, 4)")
        .await
        .unwrap();
    winner.conn.query_drop("COMMIT").await.unwrap();
    let amounts = s.amounts().await;
    let of = |id: i64| amounts.iter().find(|(i, _)| *i == id).unwrap().1;
    assert_eq!(
        of(victim.own_row),
        100,
        "{transactions}: the victim's write on another datanode was committed: {amounts:?}"
    );
    assert_eq!(of(winner.own_row), 90, "{transactions}: {amounts:?}");
    assert_eq!((of(1), of(2)), (105, 105), "{transactions}: {amounts:?}");
    assert_eq!(s.broken().await, 1.0);
    // Both sessions, and Shoal, serve on; the victim's locks are gone.
    let n: Option<i64> = victim
        .conn
        .query_first("SELECT COUNT(*) FROM orders")
        .await
        .unwrap();
    assert_eq!(n, Some(6));
    victim.conn.query_drop("BEGIN").await.unwrap();
    victim.conn.query_drop(lock(1, 4)).await.unwrap();
    victim.conn.query_drop(lock(2, 2)).await.unwrap();
    victim.conn.query_drop("ROLLBACK").await.unwrap();
    let mut fresh = s.client().await;
    let n: Option<i64> = fresh
        .query_first("SELECT COUNT(*) FROM orders")
        .await
        .unwrap();
    assert_eq!(n, Some(6));
    s.orders.shoal.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_cycle_across_two_servers_ends_one_transaction_with_1213() {
    cycle_across_servers("xa").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_cycle_across_two_servers_ends_one_transaction_without_xa_too() {
    cycle_across_servers("best_effort").await;
}

/// A wait that is no cycle is left to run (the detector sees it past its threshold and does
/// nothing), and a cycle within one server is InnoDB's to break: the detector kills nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_without_a_cycle_and_deadlocks_on_one_server_are_left_to_innodb() {
    let s = Setup::start("xa", "").await;
    let mut a = s.client().await;
    let mut b = s.client().await;
    a.query_drop("BEGIN").await.unwrap();
    a.query_drop("UPDATE orders SET amount = amount - 10 WHERE user_id = 2")
        .await
        .unwrap();
    a.query_drop(lock(1, 4)).await.unwrap();
    b.query_drop("BEGIN").await.unwrap();
    b.query_drop(lock(6, 8)).await.unwrap();
    // A waits for B on server 0 for 1.5 s: past the threshold, several ticks, no cycle.
    let waiting = tokio::spawn(async move {
        let r = a.query_drop(lock(6, 8)).await;
        (a, r)
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !waiting.is_finished(),
        "A's wait ended before B did anything"
    );
    // B asks for A's row on the same server: InnoDB sees the cycle and ends one with 1213.
    let rb = b.query_drop(lock(1, 4)).await;
    let (a, ra) = within(Duration::from_secs(40), "A's lock", waiting)
        .await
        .unwrap();
    let (mut victim, mut winner) = match (code(&ra), code(&rb)) {
        (Some(1213), None) => (a, b),
        (None, Some(1213)) => (b, a),
        other => panic!("expected InnoDB's 1213 for one of them, got {other:?}"),
    };
    victim.query_drop("ROLLBACK").await.unwrap();
    winner.query_drop("COMMIT").await.unwrap();
    assert_eq!(
        s.broken().await,
        0.0,
        "the detector broke a cycle it should not"
    );
    // A wait on a lock held by an idle transaction is no cycle either: it ends when the
    // holder commits, with the lock granted.
    let mut holder = s.client().await;
    let mut waiter = s.client().await;
    holder.query_drop("BEGIN").await.unwrap();
    holder.query_drop(lock(2, 2)).await.unwrap();
    let waiting = tokio::spawn(async move {
        let r = waiter.query_drop(lock(2, 2)).await;
        (waiter, r)
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    holder.query_drop("COMMIT").await.unwrap();
    let (_waiter, r) = within(Duration::from_secs(40), "the waiter", waiting)
        .await
        .unwrap();
    assert_eq!(code(&r), None);
    assert_eq!(s.broken().await, 0.0);
    s.orders.shoal.terminate();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Detection latency over 100 provoked cycles: from the request that closes the cycle to the
/// victim's 1213. Prints p50/p99 (docs/operations.md, "Deadlocks across servers").
/// `cargo nextest run -p shoal-tests --test deadlock_across_servers detection_latency
/// --run-ignored only --no-capture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn detection_latency() {
    let s = Setup::start("xa", "").await;
    let mut times = Vec::new();
    for _ in 0..100 {
        let (a, b) = open_pair(&s, Duration::ZERO).await;
        let (mut victim, mut winner, took) = provoke_cycle(a, b).await;
        victim.conn.query_drop("ROLLBACK").await.unwrap();
        winner.conn.query_drop("ROLLBACK").await.unwrap();
        times.push(took);
    }
    times.sort_unstable();
    println!(
        "deadlock detection over {} cycles: p50 {:?}, p99 {:?}, max {:?}",
        times.len(),
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times.last().unwrap()
    );
    // How long the victim's statement had waited when the detector broke the cycle, from
    // Shoal's log (A's wait is 100 ms older than the cycle), for the slowest of the last ones.
    let mut waited: Vec<u64> = s
        .shoal
        .log()
        .lines()
        .filter_map(|l| l.split("waited_ms=").nth(1))
        .filter_map(|v| v.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .collect();
    waited.sort_unstable();
    println!(
        "the victim's wait when broken (ms), last {} cycles: {:?}",
        waited.len(),
        waited.iter().rev().take(5).collect::<Vec<_>>()
    );
    assert_eq!(s.broken().await, 100.0);
    s.orders.shoal.terminate();
}

/// Shoal's CPU time (user + system, in clock ticks) so far.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (in parentheses): utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// The detector's cost when nothing waits: Shoal's CPU time over 60 s with 50 idle sessions
/// (half of them idle inside a transaction), with the detector on and off.
/// `cargo nextest run -p shoal-tests --test deadlock_across_servers idle_cpu
/// --run-ignored only --no-capture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn idle_cpu() {
    for (name, server) in [("on", ""), ("off", "  deadlock_check: { interval: 0 }\n")] {
        let s = Setup::start("xa", server).await;
        let mut idle = Vec::new();
        for i in 0..50 {
            let mut c = s.client().await;
            if i % 2 == 0 {
                c.query_drop("BEGIN").await.unwrap();
                c.query_drop(format!(
                    "SELECT amount FROM orders WHERE user_id = {}",
                    i % 8
                ))
                .await
                .unwrap();
            }
            idle.push(c);
        }
        let before = cpu_ticks(s.shoal.pid());
        tokio::time::sleep(Duration::from_secs(60)).await;
        let used = cpu_ticks(s.shoal.pid()) - before;
        println!(
            "detector {name}: shoal used {used} clock ticks (1/100 s) of CPU in 60 s with 50 idle sessions"
        );
        drop(idle);
        s.orders.shoal.terminate();
    }
}

/// Without the PROCESS privilege the backend account sees no other connection's transaction
/// in INNODB_TRX (MariaDB answers 1227): the detector says so in the log and breaks nothing;
/// the cycle waits for `innodb_lock_wait_timeout` (1205), as without Shoal's detector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_process_privilege_the_detector_says_so_and_cycles_time_out() {
    let s = Setup::start("xa", "").await;
    for i in 0..2 {
        let mut root = Conn::new(s.cluster.admin_opts(i)).await.unwrap();
        for host in ["127.0.0.1", "localhost"] {
            root.query_drop(format!(
                "REVOKE PROCESS ON *.* FROM '{}'@'{host}'",
                s.cluster.user()
            ))
            .await
            .unwrap();
        }
    }
    let (mut a, mut b) = open_pair(&s, Duration::ZERO).await;
    for c in [&mut a.conn, &mut b.conn] {
        c.query_drop("SET SESSION innodb_lock_wait_timeout = 3")
            .await
            .unwrap();
    }
    let mut aconn = a.conn;
    let waiting = tokio::spawn(async move {
        let r = aconn.query_drop(lock(2, 2)).await;
        (aconn, r)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let rb = b.conn.query_drop(lock(1, 4)).await;
    let (_a, ra) = within(Duration::from_secs(40), "A's lock", waiting)
        .await
        .unwrap();
    // A times out first (1205 ends only its statement); B then waits on for A's row and times
    // out too, as on main before the detector.
    assert_eq!(code(&ra), Some(1205));
    assert_eq!(code(&rb), Some(1205));
    assert_eq!(s.broken().await, 0.0);
    let log = s.shoal.log();
    assert!(
        log.contains("needs the PROCESS privilege"),
        "no warning naming the PROCESS privilege:\n{log}"
    );
    s.orders.shoal.terminate();
}
