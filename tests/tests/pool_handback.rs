//! More clients than backend connections (issue 51). A session keeps the connection it last used
//! between commands only while nobody waits for it: a session about to queue for a pool wakes
//! the idle holders at once (`backend/reclaim.rs`), they give their connections back, and the
//! queued session is handed one. Before, queued sessions waited for a sweep that ran every
//! 200 ms, once per server a scatter touched: with 300 idle clients each login's first
//! statement took 200 ms and a scattered `COUNT(*)` 400-600 ms. Timings are not asserted here:
//! the pool's counters say who handed what to whom.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use shoal_tests::shoal::free_port;
use shoal_tests::{
    SharedLayout, http_get, metric_value, shared_backend, shared_backend_layout_with,
};

/// The counters that tell the hand-back apart: on-demand wakes of idle holders, connections
/// they gave back, and connections that went straight to a queued session.
async fn counters(admin: &str) -> (f64, f64, f64, String) {
    let (status, metrics) = http_get(admin, "/metrics").await;
    assert_eq!(status, 200, "{metrics}");
    (
        metric_value(&metrics, "shoal_pool_reclaim_calls_total", &[]),
        metric_value(&metrics, "shoal_pool_reclaimed_total", &[]),
        metric_value(&metrics, "shoal_pool_handed_off_total", &[]),
        metrics,
    )
}

#[tokio::test]
async fn idle_sessions_hand_their_connections_to_a_queued_scatter_at_once() {
    let backend = shared_backend();
    // Three connections for the server, eight clients, and a ninth that scatters.
    let admin = format!("127.0.0.1:{}", free_port());
    let (p, shoal) = shared_backend_layout_with(
        &backend,
        "handback",
        "      - { name: orders, type: sharded, shard_key: id, rule: by_id, datanodes: \"dn1, dn2\" }\n",
        SharedLayout {
            pool: Some("{ max: 3, acquire_timeout: 60s }"),
            args: &["--admin-listen".to_string(), admin.clone()],
        },
    )
    .await;
    let opts: Opts = shoal.opts_as("app", "app-secret", Some(&p));
    let mut setup = Conn::new(opts.clone()).await.unwrap();
    setup
        .query_drop("CREATE TABLE orders (id INT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    setup
        .query_drop("INSERT INTO orders (id, v) VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)")
        .await
        .unwrap();
    drop(setup);

    // Eight clients each read one row and stay open: from the fourth on, each needed a
    // connection an idle one gave back (straight to it if it had queued already).
    let mut idle = Vec::new();
    for i in 0..8 {
        let mut c = Conn::new(opts.clone()).await.unwrap();
        let v: Option<i64> = c
            .query_first(format!("SELECT v FROM orders WHERE id = {}", i % 5 + 1))
            .await
            .unwrap_or_else(|e| panic!("client {i}: {e}\n{}", shoal.log()));
        assert_eq!(v, Some(i % 5 + 1));
        idle.push(c);
    }
    let (calls, reclaimed, handed, metrics) = counters(&admin).await;
    assert!(
        calls >= 1.0 && reclaimed >= 5.0 && handed >= 1.0,
        "eight clients over three connections: idle holders woken {calls} times, gave back \
         {reclaimed}, {handed} handed to a queued session\n{metrics}"
    );

    // A connection may lie idle (two holders woken for one waiter both gave back): more
    // clients take those, so that idle sessions hold the whole pool, and the scatter, which
    // needs two connections at once, must have them given back.
    let (_, body) = http_get(&admin, "/metrics").await;
    let lying = metric_value(&body, "shoal_pool_connections", &[("state", "idle")]) as usize;
    for _ in 0..lying {
        let mut c = Conn::new(opts.clone()).await.unwrap();
        let _: Option<i64> = c
            .query_first("SELECT v FROM orders WHERE id = 1")
            .await
            .unwrap();
        idle.push(c);
    }
    let (_, body) = http_get(&admin, "/metrics").await;
    assert_eq!(
        metric_value(&body, "shoal_pool_connections", &[("state", "idle")]),
        0.0,
        "{body}"
    );
    let mut scatter = Conn::new(opts.clone()).await.unwrap();
    let n: Option<i64> = scatter
        .query_first("SELECT COUNT(*) FROM orders")
        .await
        .unwrap_or_else(|e| panic!("scatter: {e}\n{}", shoal.log()));
    assert_eq!(n, Some(5));
    let (calls_after, reclaimed_after, handed_after, metrics) = counters(&admin).await;
    assert!(
        calls_after > calls && reclaimed_after > reclaimed && handed_after > handed,
        "the scatter woke the idle holders ({calls} -> {calls_after}), which gave back \
         ({reclaimed} -> {reclaimed_after}) to it ({handed} -> {handed_after})\n{metrics}"
    );

    // Every idle client still answers, each getting a connection back in turn.
    for (i, c) in idle.iter_mut().enumerate() {
        let v: Option<i64> = c
            .query_first(format!("SELECT v FROM orders WHERE id = {}", i % 5 + 1))
            .await
            .unwrap();
        assert!(v.is_some(), "client {i}");
    }
}

/// Sessions that hold a full pool's connections and stay idle give some back without anyone
/// asking (an eighth of the pool, at least one, lies idle then): the next session to need one
/// takes it at once instead of queueing for a hand-back. Before, they kept them until a session
/// queued.
#[tokio::test]
async fn idle_sessions_holding_a_full_pool_give_a_connection_back_unasked() {
    let backend = shared_backend();
    let admin = format!("127.0.0.1:{}", free_port());
    let (p, shoal) = shared_backend_layout_with(
        &backend,
        "idleback",
        "      - { name: orders, type: sharded, shard_key: id, rule: by_id, datanodes: \"dn1, dn2\" }\n",
        SharedLayout {
            pool: Some("{ max: 3, acquire_timeout: 60s }"),
            args: &["--admin-listen".to_string(), admin.clone()],
        },
    )
    .await;
    let opts: Opts = shoal.opts_as("app", "app-secret", Some(&p));
    let mut setup = Conn::new(opts.clone()).await.unwrap();
    setup
        .query_drop("CREATE TABLE orders (id INT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    setup
        .query_drop("INSERT INTO orders (id, v) VALUES (1, 1), (2, 2), (3, 3)")
        .await
        .unwrap();
    drop(setup);

    // Three clients read a row each and stay open: they hold the pool's three connections.
    let mut idle = Vec::new();
    for id in 1..=3 {
        let mut c = Conn::new(opts.clone()).await.unwrap();
        let v: Option<i64> = c
            .query_first(format!("SELECT v FROM orders WHERE id = {id}"))
            .await
            .unwrap_or_else(|e| panic!("client {id}: {e}\n{}", shoal.log()));
        assert_eq!(v, Some(id));
        idle.push(c);
    }
    let (_, _, handed, _) = counters(&admin).await;

    // Nobody asks for a connection; the sweep finds the idle holders of a full pool.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (lying, body) = loop {
        let (_, body) = http_get(&admin, "/metrics").await;
        let lying = metric_value(&body, "shoal_pool_connections", &[("state", "idle")]);
        if lying >= 1.0 || std::time::Instant::now() >= deadline {
            break (lying, body);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(
        lying >= 1.0,
        "idle sessions kept every connection of the full pool\n{body}"
    );
    let (_, reclaimed, handed_after, metrics) = counters(&admin).await;
    assert!(
        reclaimed >= 1.0 && handed_after == handed,
        "given back unasked ({reclaimed} given back), to nobody queued ({handed} -> \
         {handed_after} handed over)\n{metrics}"
    );

    // A new session takes the connection lying idle, and every idle client still answers.
    let mut fresh = Conn::new(opts.clone()).await.unwrap();
    let v: Option<i64> = fresh
        .query_first("SELECT v FROM orders WHERE id = 2")
        .await
        .unwrap();
    assert_eq!(v, Some(2));
    for (i, c) in idle.iter_mut().enumerate() {
        let id = i as i64 + 1;
        let v: Option<i64> = c
            .query_first(format!("SELECT v FROM orders WHERE id = {id}"))
            .await
            .unwrap();
        assert_eq!(v, Some(id), "client {id}");
    }
}
