//! Transactions, and session state that must never leak between clients sharing pooled backend
//! connections (Shoal's pool is capped at 1-2 connections here, so sharing is certain).

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, TxOpts, Value};
use shoal_tests::raw::{COM_QUERY, RawConn, Reply};
use shoal_tests::{Backend, ShoalProcess, server_error, shared_backend, unique_name};

async fn count(conn: &mut Conn, sql: &str) -> i64 {
    conn.query_first::<i64, _>(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .expect("one row")
}

#[tokio::test]
async fn transactions_commit_and_roll_back() {
    let backend = shared_backend();
    let db = unique_name("tx");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut a = shoal.conn(&backend, Some(&db)).await;
    let mut other = shoal.conn(&backend, Some(&db)).await;
    let mut direct = backend.conn(Some(&db)).await;
    a.query_drop("CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB")
        .await
        .unwrap();

    // BEGIN .. COMMIT
    a.query_drop("BEGIN").await.unwrap();
    a.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
    assert_eq!(count(&mut a, "SELECT @@in_transaction").await, 1);
    assert_eq!(
        count(&mut other, "SELECT COUNT(*) FROM t WHERE id = 1").await,
        0,
        "uncommitted row seen by another client"
    );
    assert_eq!(
        count(&mut direct, "SELECT COUNT(*) FROM t WHERE id = 1").await,
        0
    );
    a.query_drop("COMMIT").await.unwrap();
    assert_eq!(
        count(&mut other, "SELECT COUNT(*) FROM t WHERE id = 1").await,
        1,
        "committed row not visible"
    );
    assert_eq!(
        count(&mut direct, "SELECT COUNT(*) FROM t WHERE id = 1").await,
        1
    );

    // START TRANSACTION .. ROLLBACK
    a.query_drop("START TRANSACTION").await.unwrap();
    a.query_drop("INSERT INTO t VALUES (2)").await.unwrap();
    assert_eq!(
        count(&mut a, "SELECT COUNT(*) FROM t WHERE id = 2").await,
        1,
        "own uncommitted row invisible"
    );
    a.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(
        count(&mut a, "SELECT COUNT(*) FROM t WHERE id = 2").await,
        0,
        "rolled-back row still there"
    );
    assert_eq!(
        count(&mut other, "SELECT COUNT(*) FROM t WHERE id = 2").await,
        0
    );
    assert_eq!(
        count(&mut direct, "SELECT COUNT(*) FROM t WHERE id = 2").await,
        0
    );

    // The driver's transaction API (START TRANSACTION with options, prepared statements inside).
    let mut tx = a.start_transaction(TxOpts::default()).await.unwrap();
    tx.exec_drop("INSERT INTO t VALUES (?)", (3,))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    let mut tx = a.start_transaction(TxOpts::default()).await.unwrap();
    tx.exec_drop("INSERT INTO t VALUES (?)", (4,))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    // autocommit=0: an implicit transaction until ROLLBACK / COMMIT.
    a.query_drop("SET autocommit = 0").await.unwrap();
    a.query_drop("INSERT INTO t VALUES (5)").await.unwrap();
    assert_eq!(
        count(&mut other, "SELECT COUNT(*) FROM t WHERE id = 5").await,
        0
    );
    a.query_drop("ROLLBACK").await.unwrap();
    a.query_drop("INSERT INTO t VALUES (6)").await.unwrap();
    a.query_drop("COMMIT").await.unwrap();
    a.query_drop("SET autocommit = 1").await.unwrap();

    let ids: Vec<i64> = direct.query("SELECT id FROM t ORDER BY id").await.unwrap();
    assert_eq!(
        ids,
        vec![1, 4, 6],
        "rows on the backend after commits and rollbacks"
    );
    let ids: Vec<i64> = other.query("SELECT id FROM t ORDER BY id").await.unwrap();
    assert_eq!(
        ids,
        vec![1, 4, 6],
        "rows seen through shoal after commits and rollbacks"
    );
}

/// The session state a client can change; one row, compared as a whole. (No user variable here:
/// reading one pins the backend connection, which the one-connection pool test cannot afford.)
const STATE: &str = "SELECT @@session.sql_mode, @@session.time_zone, @@character_set_client, \
     @@character_set_connection, @@character_set_results, @@collation_connection, \
     @@session.autocommit, @@session.tx_isolation, DATABASE(), @@in_transaction";

async fn state(conn: &mut Conn) -> Vec<Value> {
    conn.query_first::<Row, _>(STATE)
        .await
        .unwrap_or_else(|e| panic!("read session state: {e}"))
        .expect("one row")
        .unwrap()
}

fn text(v: &Value) -> String {
    match v {
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn session_variables_never_leak_between_clients_sharing_one_backend_connection() {
    let backend = shared_backend();
    let db = unique_name("sess");
    let other_db = unique_name("sess_other");
    backend.fresh_db(&db).await;
    backend.fresh_db(&other_db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE s (id INT PRIMARY KEY, v VARCHAR(20) CHARACTER SET utf8mb4)")
        .await
        .unwrap();
    direct
        .query_drop("INSERT INTO s VALUES (1, 'é')")
        .await
        .unwrap();

    // One backend connection for everyone.
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &[]);
    let mut b = shoal.conn(&backend, Some(&db)).await;
    let baseline = state(&mut b).await;
    let mut a = shoal.conn(&backend, Some(&db)).await;
    assert_eq!(
        state(&mut a).await,
        baseline,
        "two fresh clients start with different state"
    );

    a.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES,NO_ZERO_DATE'")
        .await
        .unwrap();
    a.query_drop("SET time_zone = '+05:30'").await.unwrap();
    a.query_drop("SET NAMES latin1").await.unwrap();
    a.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE")
        .await
        .unwrap();
    a.query_drop(format!("USE {other_db}")).await.unwrap();

    for round in 0..3 {
        // B first: it must not inherit anything A set, though it runs on A's backend connection.
        let got_b = state(&mut b).await;
        assert_eq!(
            got_b,
            baseline,
            "round {round}: client B sees client A's session state\nshoal log:\n{}",
            shoal.log()
        );
        let got_a = state(&mut a).await;
        assert_eq!(
            text(&got_a[0]),
            "ANSI_QUOTES,NO_ZERO_DATE",
            "round {round}: A lost its sql_mode"
        );
        assert_eq!(
            text(&got_a[1]),
            "+05:30",
            "round {round}: A lost its time_zone"
        );
        assert_eq!(text(&got_a[2]), "latin1", "round {round}: A lost SET NAMES");
        assert_eq!(
            text(&got_a[4]),
            "latin1",
            "round {round}: A lost SET NAMES (results)"
        );
        assert_eq!(
            text(&got_a[7]),
            "SERIALIZABLE",
            "round {round}: A lost its isolation level"
        );
        assert_eq!(
            text(&got_a[8]),
            other_db,
            "round {round}: A lost its current schema"
        );

        // The same data comes back in each client's own character set.
        let v_b: Vec<u8> = b
            .query_first("SELECT v FROM s WHERE id = 1")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(v_b, "é".as_bytes(), "round {round}: B got another charset");
        let v_a: Vec<u8> = a
            .query_first(format!("SELECT v FROM {db}.s WHERE id = 1"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            v_a,
            vec![0xe9],
            "round {round}: A (SET NAMES latin1) got another charset"
        );

        // sql_mode and time_zone change what statements do, not only what variables say.
        let quoted: String = a
            .query_first("SELECT \"x\" = 'x'")
            .await
            .map(|v: Option<i64>| format!("{v:?}"))
            .unwrap_or_else(|e| format!("error {e}"));
        assert!(
            quoted.contains("error") || quoted.contains("Some(0)"),
            "round {round}: ANSI_QUOTES not in effect for A: {quoted}"
        );
        let dq: Option<String> = b.query_first("SELECT \"x\"").await.unwrap();
        assert_eq!(
            dq.as_deref(),
            Some("x"),
            "round {round}: B runs with A's ANSI_QUOTES"
        );
        let ts_a: String = a
            .query_first("SELECT CAST(FROM_UNIXTIME(0) AS CHAR)")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            ts_a, "1970-01-01 05:30:00",
            "round {round}: A's time_zone not in effect"
        );
    }
    b.query_drop("SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci")
        .await
        .unwrap();
    let got_a = state(&mut a).await;
    assert_eq!(text(&got_a[5]), "latin1_swedish_ci", "A sees B's collation");
    let got_b = state(&mut b).await;
    assert_eq!(
        text(&got_b[5]),
        "utf8mb4_unicode_ci",
        "B lost its collation"
    );
}

/// User variables, temporary tables, open transactions, GET_LOCK and SQL-level PREPARE belong to
/// one backend connection: a client using them owns (is pinned to) its connection, and whoever
/// gets that connection after it must find none of them.
#[tokio::test]
async fn pinned_state_stays_with_its_client_and_is_gone_after_it_leaves() {
    let backend = shared_backend();
    let db = unique_name("pin");
    backend.fresh_db(&db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB")
        .await
        .unwrap();
    let lock = unique_name("lock");

    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 2, &[]);
    let mut a = shoal.conn(&backend, Some(&db)).await;
    a.query_drop("SET @leak = 42").await.unwrap();
    a.query_drop("CREATE TEMPORARY TABLE tmp_a (x INT)")
        .await
        .unwrap();
    a.query_drop("INSERT INTO tmp_a VALUES (1)").await.unwrap();
    a.query_drop("PREPARE sql_stmt FROM 'SELECT 7'")
        .await
        .unwrap();
    assert_eq!(
        count(&mut a, &format!("SELECT GET_LOCK('{lock}', 0)")).await,
        1
    );
    a.query_drop("BEGIN").await.unwrap();
    a.query_drop("INSERT INTO t VALUES (7)").await.unwrap();

    let mut b = shoal.conn(&backend, Some(&db)).await;
    for round in 0..3 {
        let leak: Option<Option<i64>> = b.query_first("SELECT @leak").await.unwrap();
        assert_eq!(leak, Some(None), "round {round}: B sees A's user variable");
        let (code, ..) = server_error(b.query_drop("SELECT * FROM tmp_a").await);
        assert_eq!(code, 1146, "round {round}: B sees A's temporary table");
        let (code, ..) = server_error(b.query_drop("EXECUTE sql_stmt").await);
        assert_eq!(
            code, 1243,
            "round {round}: B sees A's SQL-level prepared statement"
        );
        assert_eq!(
            count(&mut b, "SELECT @@in_transaction").await,
            0,
            "round {round}: B is inside A's transaction"
        );
        assert_eq!(
            count(&mut b, &format!("SELECT GET_LOCK('{lock}', 0)")).await,
            0,
            "round {round}: B could take the lock A holds (same backend connection?)"
        );
        // A still has everything.
        assert_eq!(
            count(&mut a, "SELECT @leak").await,
            42,
            "round {round}: A lost its user variable"
        );
        assert_eq!(
            count(&mut a, "SELECT COUNT(*) FROM tmp_a").await,
            1,
            "round {round}: A lost its temporary table"
        );
        assert_eq!(
            count(&mut a, "EXECUTE sql_stmt").await,
            7,
            "round {round}: A lost its prepared statement"
        );
        assert_eq!(
            count(&mut a, "SELECT COUNT(*) FROM t WHERE id = 7").await,
            1,
            "round {round}: A lost its transaction"
        );
        assert_eq!(
            count(&mut a, "SELECT @@in_transaction").await,
            1,
            "round {round}: A's transaction ended"
        );
    }
    a.disconnect().await.unwrap();
    drop(b);

    // Two clients at once take both pooled connections, whichever A had.
    for round in 0..3 {
        let mut c1 = shoal.conn(&backend, Some(&db)).await;
        let mut c2 = shoal.conn(&backend, Some(&db)).await;
        for c in [&mut c1, &mut c2] {
            let leak: Option<Option<i64>> = c.query_first("SELECT @leak").await.unwrap();
            assert_eq!(
                leak,
                Some(None),
                "round {round}: a later client sees A's user variable"
            );
            let (code, ..) = server_error(c.query_drop("SELECT * FROM tmp_a").await);
            assert_eq!(
                code, 1146,
                "round {round}: a later client sees A's temporary table"
            );
            let (code, ..) = server_error(c.query_drop("EXECUTE sql_stmt").await);
            assert_eq!(
                code, 1243,
                "round {round}: a later client sees A's prepared statement"
            );
            assert_eq!(
                count(c, "SELECT @@in_transaction").await,
                0,
                "round {round}: a later client is in A's transaction"
            );
            assert_eq!(
                count(c, "SELECT COUNT(*) FROM t").await,
                0,
                "round {round}: A's uncommitted row survived"
            );
        }
        assert_eq!(
            count(&mut c1, &format!("SELECT GET_LOCK('{lock}', 0)")).await,
            1,
            "round {round}: A's named lock outlived A"
        );
        assert_eq!(
            count(&mut c1, &format!("SELECT RELEASE_LOCK('{lock}')")).await,
            1
        );
        drop(c1);
        drop(c2);
    }
    assert_eq!(count(&mut direct, "SELECT COUNT(*) FROM t").await, 0);
}

/// A client that changes everything and then vanishes (TCP close, no COM_QUIT) leaves nothing
/// behind on the single pooled connection.
#[tokio::test]
async fn state_of_a_client_that_vanished_is_gone_for_the_next_one() {
    let backend = shared_backend();
    let db = unique_name("vanish");
    backend.fresh_db(&db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB")
        .await
        .unwrap();

    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &[]);
    let mut fresh = shoal.conn(&backend, Some(&db)).await;
    let baseline = state(&mut fresh).await;
    drop(fresh);

    for quit_politely in [false, true] {
        let (mut raw, reply) =
            RawConn::login(&shoal.addr(), &backend.user, &backend.password, Some(&db))
                .await
                .expect("raw login");
        assert_eq!(reply, Reply::Ok, "raw login refused");
        for sql in [
            "SET SESSION sql_mode = 'ANSI_QUOTES'",
            "SET time_zone = '-03:00'",
            "SET NAMES latin1",
            "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
            "SET autocommit = 0",
            "SET @leak = 'vanished'",
            "CREATE TEMPORARY TABLE tmp_v (x INT)",
            "INSERT INTO t VALUES (1)",
        ] {
            let reply = raw
                .command(COM_QUERY, sql.as_bytes())
                .await
                .expect("raw query");
            assert_eq!(reply, Reply::Ok, "{sql}");
        }
        if quit_politely {
            raw.write_packet(&[shoal_tests::raw::COM_QUIT]).await.ok();
        }
        drop(raw);

        let mut next = shoal.conn(&backend, Some(&db)).await;
        assert_eq!(
            state(&mut next).await,
            baseline,
            "quit_politely={quit_politely}: the next client inherits the state of one that left\nshoal log:\n{}",
            shoal.log()
        );
        let leak: Option<Option<String>> = next.query_first("SELECT @leak").await.unwrap();
        assert_eq!(
            leak,
            Some(None),
            "the next client sees the user variable of one that left"
        );
        let (code, ..) = server_error(next.query_drop("SELECT * FROM tmp_v").await);
        assert_eq!(
            code, 1146,
            "the next client sees the temporary table of one that left"
        );
        assert_eq!(
            count(&mut next, "SELECT COUNT(*) FROM t").await,
            0,
            "uncommitted row of a client that left survived"
        );
        drop(next);
    }
    assert_eq!(count(&mut direct, "SELECT COUNT(*) FROM t").await, 0);
}

/// Two clients writing in transactions at once on a pool of 2 each commit only their own rows.
#[tokio::test]
async fn concurrent_transactions_commit_only_their_own_rows() {
    let backend: Backend = shared_backend();
    let db = unique_name("conc");
    backend.fresh_db(&db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY, who INT) ENGINE=InnoDB")
        .await
        .unwrap();
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 2, &[]);
    let mut handles = Vec::new();
    for who in 0..4i64 {
        let opts = shoal.opts(&backend, Some(&db));
        handles.push(tokio::spawn(async move {
            let mut c = Conn::new(opts).await.unwrap();
            for i in 0..25i64 {
                c.query_drop("BEGIN").await.unwrap();
                c.exec_drop("INSERT INTO t VALUES (?, ?)", (who * 1000 + i, who))
                    .await
                    .unwrap();
                if i % 2 == 0 {
                    c.query_drop("COMMIT").await.unwrap();
                } else {
                    c.query_drop("ROLLBACK").await.unwrap();
                }
            }
            c.disconnect().await.unwrap();
        }));
    }
    for h in handles {
        h.await.expect("client task");
    }
    for who in 0..4i64 {
        let ids: Vec<i64> = direct
            .exec("SELECT id FROM t WHERE who = ? ORDER BY id", (who,))
            .await
            .unwrap();
        let want: Vec<i64> = (0..25)
            .filter(|i| i % 2 == 0)
            .map(|i| who * 1000 + i)
            .collect();
        assert_eq!(ids, want, "client {who}: committed rows differ");
    }
}

/// The character set a client asks for in its handshake applies to its session, whoever used
/// the shared backend connection before.
#[tokio::test]
async fn handshake_charset_applies_to_its_own_session_only() {
    let backend = shared_backend();
    let db = unique_name("hscs");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &[]);
    let (mut latin, reply) = RawConn::login_with_collation(
        &shoal.addr(),
        &backend.user,
        &backend.password,
        Some(&db),
        8, // latin1_swedish_ci
    )
    .await
    .expect("raw login");
    assert_eq!(reply, Reply::Ok);
    let mut utf8 = shoal.conn(&backend, Some(&db)).await;
    for round in 0..3 {
        let rows = latin
            .query_rows(
                "SELECT @@character_set_client, @@character_set_results, @@collation_connection",
            )
            .await
            .unwrap();
        let row = String::from_utf8_lossy(&rows[0]).into_owned();
        assert!(
            row.contains("latin1") && !row.contains("utf8"),
            "round {round}: a latin1 client runs with another charset: {row:?}"
        );
        let row: Option<(String, String)> = utf8
            .query_first("SELECT @@character_set_client, @@character_set_results")
            .await
            .unwrap();
        assert_eq!(
            row,
            Some(("utf8mb4".to_string(), "utf8mb4".to_string())),
            "round {round}: a utf8mb4 client runs with the latin1 client's charset"
        );
    }
}

/// LAST_INSERT_ID() is per connection on the server; clients sharing one must still each see
/// their own.
#[tokio::test]
async fn last_insert_id_belongs_to_the_client_that_inserted() {
    let backend = shared_backend();
    let db = unique_name("lastid");
    backend.fresh_db(&db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, who CHAR(1))")
        .await
        .unwrap();
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &[]);
    let mut a = shoal.conn(&backend, Some(&db)).await;
    let mut b = shoal.conn(&backend, Some(&db)).await;
    for round in 0..3 {
        a.query_drop("INSERT INTO t (who) VALUES ('a')")
            .await
            .unwrap();
        let a_id = a.last_insert_id().expect("insert id in A's OK packet");
        b.query_drop("INSERT INTO t (who) VALUES ('b')")
            .await
            .unwrap();
        let b_id = b.last_insert_id().expect("insert id in B's OK packet");
        assert_ne!(a_id, b_id);
        assert_eq!(
            count(&mut a, "SELECT LAST_INSERT_ID()").await as u64,
            a_id,
            "round {round}: A's LAST_INSERT_ID() is another client's"
        );
        assert_eq!(
            count(&mut b, "SELECT LAST_INSERT_ID()").await as u64,
            b_id,
            "round {round}: B's LAST_INSERT_ID() is another client's"
        );
    }
}

/// COM_CHANGE_USER in the middle of a transaction rolls it back, as on the server.
#[tokio::test]
async fn change_user_ends_an_open_transaction() {
    let backend = shared_backend();
    let db = unique_name("cutx");
    backend.fresh_db(&db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB")
        .await
        .unwrap();
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut a = shoal.conn(&backend, Some(&db)).await;
    a.query_drop("BEGIN").await.unwrap();
    a.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
    a.query_drop("SET @v = 1").await.unwrap();
    a.change_user(mysql_async::ChangeUserOpts::default())
        .await
        .expect("COM_CHANGE_USER");
    assert_eq!(count(&mut a, "SELECT @@in_transaction").await, 0);
    let v: Option<Option<i64>> = a.query_first("SELECT @v").await.unwrap();
    assert_eq!(v, Some(None), "user variable survived COM_CHANGE_USER");
    a.query_drop("COMMIT").await.unwrap();
    assert_eq!(
        count(&mut direct, "SELECT COUNT(*) FROM t").await,
        0,
        "the transaction open at COM_CHANGE_USER was committed"
    );
}

/// A client waiting for a pooled connection gets an error after the acquire timeout, not a hang,
/// and is served once the connection is free.
#[tokio::test]
async fn waiting_for_a_busy_pool_ends_in_an_error_not_a_hang() {
    let backend = shared_backend();
    let db = unique_name("acq");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &["--acquire-timeout-ms", "500"]);
    let mut holder = shoal.conn(&backend, Some(&db)).await;
    // Logged in before the pool is busy (a login needs a backend connection too).
    let mut waiter = shoal.conn(&backend, Some(&db)).await;
    holder.query_drop("BEGIN").await.unwrap();
    holder.query_drop("SELECT 1").await.unwrap();
    let result = shoal_tests::within(
        std::time::Duration::from_secs(30),
        "statement waiting for the only pooled connection",
        waiter.query_drop("SELECT 2"),
    )
    .await;
    let (code, state, msg) = server_error(result);
    assert!(code > 0, "{code} {state} {msg}");
    holder.query_drop("COMMIT").await.unwrap();
    let two: Option<i64> = waiter
        .query_first("SELECT 2")
        .await
        .expect("served once the connection is free");
    assert_eq!(two, Some(2));
}

/// Writes change read-only session variables the server reports (e.g. `last_gtid` with binlog
/// on); handing the connection to another client must not try to replay those.
#[tokio::test]
async fn clients_alternating_writes_on_one_pooled_connection_all_succeed() {
    let backend = shared_backend();
    let db = unique_name("altw");
    backend.fresh_db(&db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, who INT)")
        .await
        .unwrap();
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &[]);
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(shoal.conn(&backend, Some(&db)).await);
    }
    for round in 0..5i64 {
        for (who, c) in clients.iter_mut().enumerate() {
            // Text protocol: a server-side prepared statement would pin the connection.
            c.query_drop(format!("INSERT INTO t (who) VALUES ({who})"))
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "round {round}, client {who}: INSERT failed: {e}\nshoal log:\n{}",
                        shoal.log()
                    )
                });
            let one: Option<i64> = c.query_first("SELECT 1").await.unwrap_or_else(|e| {
                panic!(
                    "round {round}, client {who}: SELECT 1 after another client's write failed: {e}"
                )
            });
            assert_eq!(one, Some(1));
        }
    }
    assert_eq!(count(&mut direct, "SELECT COUNT(*) FROM t").await, 15);
}

/// Many clients multiplexed over a small pool each get their own answers, in order.
#[tokio::test]
async fn many_clients_on_a_small_pool_each_get_their_own_answers() {
    let backend = shared_backend();
    let db = unique_name("many");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 3, &[]);
    let mut tasks = Vec::new();
    for client in 0..40u64 {
        let opts = shoal.opts(&backend, Some(&db));
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::new(opts).await.expect("connect");
            for i in 0..40u64 {
                let len = (client * 7 + i * 13) % 3000;
                let row: Option<(u64, u64, String)> = c
                    .query_first(format!("SELECT {client}, {i}, REPEAT('x', {len})"))
                    .await
                    .expect("query");
                assert_eq!(
                    row,
                    Some((client, i, "x".repeat(len as usize))),
                    "client {client} query {i} got another answer"
                );
            }
            c.disconnect().await.expect("disconnect");
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
}

/// A session that gives its connection back because others wait, and at once needs one again
/// (its next statement already arrived), queues behind the waiting sessions: it used to take the
/// connection straight back, so clients that never pause starved the rest until their acquire
/// timeout. Two clients pipeline hundreds of statements on a one-connection pool; a third
/// client's statements must still be served.
#[tokio::test]
async fn pipelining_clients_do_not_starve_others_on_a_small_pool() {
    let backend = shared_backend();
    let db = unique_name("fair");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &["--acquire-timeout-ms", "1500"]);
    const PIPELINED: usize = 300;
    let mut greedy = Vec::new();
    for _ in 0..2 {
        let (mut raw, reply) =
            RawConn::login(&shoal.addr(), &backend.user, &backend.password, Some(&db))
                .await
                .expect("connect");
        assert!(matches!(reply, Reply::Ok), "login: {reply:?}");
        greedy.push(tokio::spawn(async move {
            // Every statement is written before any reply is read: the proxy always finds the
            // next one already waiting when it finishes one.
            let mut burst = Vec::new();
            for _ in 0..PIPELINED {
                let sql = b"DO SLEEP(0.01)";
                burst.extend_from_slice(&((sql.len() + 1) as u32).to_le_bytes()[..3]);
                burst.push(0);
                burst.push(COM_QUERY);
                burst.extend_from_slice(sql);
            }
            raw.write_raw(&burst).await.expect("write burst");
            for i in 0..PIPELINED {
                let reply = raw.read_packet().await.expect("reply");
                assert_eq!(
                    reply.first(),
                    Some(&0),
                    "pipelined statement {i}: {reply:?}"
                );
            }
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mut c = shoal.conn(&backend, Some(&db)).await;
    for i in 0..5u64 {
        let v: Option<u64> = c
            .query_first(format!("SELECT {i}"))
            .await
            .unwrap_or_else(|e| panic!("statement {i} of the patient client: {e}"));
        assert_eq!(v, Some(i));
    }
    for g in greedy {
        g.await.expect("pipelining client");
    }
}

/// Session variables that change what a statement returns stay with the client that set them.
#[tokio::test]
async fn result_changing_session_variables_stay_with_their_client() {
    let backend = shared_backend();
    let db = unique_name("resvar");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &[]);
    let mut a = shoal.conn(&backend, Some(&db)).await;
    let mut b = shoal.conn(&backend, Some(&db)).await;
    a.query_drop(
        "SET SESSION sql_select_limit = 2, SESSION div_precision_increment = 9, \
         SESSION group_concat_max_len = 5, @@session.autocommit = ON",
    )
    .await
    .unwrap();
    a.query_drop("SET SESSION character_set_results = NULL")
        .await
        .unwrap();
    let defaults = SeenVariables {
        rows: 5,
        third: "0.3333",
        concat: "1,2,3,4,5,6,7,8,9",
        results_charset: Some("utf8mb4"),
    };
    let a_set = SeenVariables {
        rows: 2,
        third: "0.333333333",
        concat: "1,2,3",
        results_charset: None,
    };
    for round in 0..3 {
        assert_sees(
            &mut b,
            &defaults,
            &format!("round {round}: B (A's settings leaked)"),
        )
        .await;
        assert_sees(
            &mut a,
            &a_set,
            &format!("round {round}: A (lost its settings)"),
        )
        .await;
    }
}

/// What `sql_select_limit`, `div_precision_increment`, `group_concat_max_len` and
/// `character_set_results` make a connection see.
struct SeenVariables {
    rows: usize,
    third: &'static str,
    concat: &'static str,
    results_charset: Option<&'static str>,
}

async fn assert_sees(conn: &mut Conn, want: &SeenVariables, who: &str) {
    let rows: Vec<u64> = conn.query("SELECT seq FROM seq_1_to_5").await.unwrap();
    assert_eq!(rows.len(), want.rows, "{who}: sql_select_limit");
    let q: Option<String> = conn.query_first("SELECT CAST(1/3 AS CHAR)").await.unwrap();
    assert_eq!(
        q.as_deref(),
        Some(want.third),
        "{who}: div_precision_increment"
    );
    let g: Option<String> = conn
        .query_first("SELECT GROUP_CONCAT(seq) FROM seq_1_to_9")
        .await
        .unwrap();
    assert_eq!(
        g.as_deref(),
        Some(want.concat),
        "{who}: group_concat_max_len"
    );
    let cs: Option<Option<String>> = conn
        .query_first("SELECT @@character_set_results")
        .await
        .unwrap();
    assert_eq!(
        cs,
        Some(want.results_charset.map(str::to_string)),
        "{who}: character_set_results"
    );
}

/// A transaction pins its backend connection only until it ends: on a one-connection pool,
/// another client runs as soon as the first commits (or turns autocommit back on).
#[tokio::test]
async fn the_pooled_connection_is_released_when_a_transaction_ends() {
    let backend = shared_backend();
    let db = unique_name("release");
    backend.fresh_db(&db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB")
        .await
        .unwrap();
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &["--acquire-timeout-ms", "3000"]);
    let mut a = shoal.conn(&backend, Some(&db)).await;
    let mut b = shoal.conn(&backend, Some(&db)).await;
    let ends: [(&str, &str); 3] = [
        ("BEGIN", "COMMIT"),
        ("START TRANSACTION", "ROLLBACK"),
        ("SET autocommit = 0", "COMMIT; SET autocommit = 1"),
    ];
    for (i, (start, end)) in ends.iter().enumerate() {
        a.query_drop(*start).await.unwrap();
        a.query_drop(format!("INSERT INTO t VALUES ({i})"))
            .await
            .unwrap();
        a.query_drop(*end).await.unwrap();
        let one: Option<i64> = b.query_first("SELECT 1").await.unwrap_or_else(|e| {
            panic!(
                "after `{start}` .. `{end}`, another client still cannot get the connection: {e}"
            )
        });
        assert_eq!(one, Some(1));
        assert_eq!(count(&mut a, "SELECT @@in_transaction").await, 0);
    }
}

/// Quick mode: `CONNECTION_ID()` is the handshake id and `KILL QUERY <it>` stops that client's
/// query (not whatever backend thread happens to carry the number).
#[tokio::test]
async fn kill_query_takes_the_handshake_id() {
    let backend = shared_backend();
    let db = unique_name("kill");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut a = shoal.conn(&backend, Some(&db)).await;
    let mut b = shoal.conn(&backend, Some(&db)).await;
    let id: Option<u64> = a.query_first("SELECT CONNECTION_ID()").await.unwrap();
    assert_eq!(id, Some(u64::from(a.id())));
    let mut direct = backend.conn(None).await;
    let sleep = format!("SELECT SLEEP(60) AS {db}");
    shoal_tests::assert_kill_query_interrupts(&mut direct, &mut b, a, &sleep).await;
}

/// Text that merely looks like session state (an e-mail address in a string, a column named
/// `prepared_at`) does not pin the connection: on a one-connection pool, two clients alternate.
#[tokio::test]
async fn look_alike_text_does_not_pin_the_connection() {
    let backend = shared_backend();
    let db = unique_name("lookalike");
    backend.fresh_db(&db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop(
            "CREATE TABLE users (id INT PRIMARY KEY, email VARCHAR(40), prepared_at DATETIME)",
        )
        .await
        .unwrap();
    direct
        .query_drop("INSERT INTO users VALUES (1, 'bob@example.com', NULL)")
        .await
        .unwrap();
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &["--acquire-timeout-ms", "3000"]);
    let mut a = shoal.conn(&backend, Some(&db)).await;
    let mut b = shoal.conn(&backend, Some(&db)).await;
    for sql in [
        "SELECT id FROM users WHERE email = 'bob@example.com'",
        "SELECT prepared_at FROM users WHERE id = 1",
    ] {
        for round in 0..2 {
            let _: Vec<Row> = a.query(sql).await.unwrap();
            let n = b.query_first::<i64, _>("SELECT COUNT(*) FROM users").await;
            assert_eq!(
                n.unwrap_or_else(|e| panic!(
                    "round {round}: after `{sql}` on A, B cannot get the connection: {e}"
                )),
                Some(1)
            );
        }
    }
}

/// State changed by a statement in the middle of a multi-statement (USE, SET) is tracked like
/// any other.
#[tokio::test]
async fn state_changed_inside_a_multi_statement_is_tracked() {
    let backend = shared_backend();
    let db = unique_name("msstate");
    let other = unique_name("msstate_other");
    backend.fresh_db(&db).await;
    backend.fresh_db(&other).await;
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &[]);
    let mut a = shoal.conn(&backend, Some(&db)).await;
    let mut b = shoal.conn(&backend, Some(&db)).await;
    let baseline = state(&mut b).await;
    let mut r = a
        .query_iter(format!(
            "SELECT 1; USE {other}; SET time_zone = '+01:00'; SET SESSION sql_mode = 'ANSI'; SELECT 2"
        ))
        .await
        .unwrap();
    while !r.is_empty() {
        let _: Vec<Row> = r.collect().await.unwrap();
    }
    drop(r);
    for round in 0..3 {
        assert_eq!(
            state(&mut b).await,
            baseline,
            "round {round}: B sees state A set in a multi-statement"
        );
        let got = state(&mut a).await;
        assert_eq!(
            text(&got[8]),
            other,
            "round {round}: A lost the USE of its multi-statement"
        );
        assert_eq!(
            text(&got[1]),
            "+01:00",
            "round {round}: A lost its time_zone"
        );
        assert!(
            text(&got[0]).contains("ANSI_QUOTES"),
            "round {round}: A lost its sql_mode"
        );
    }
}

/// What the server remembers about a connection's *last statement* (warnings, ROW_COUNT(),
/// FOUND_ROWS(), LAST_INSERT_ID()) must be the client's own last statement, even when another
/// client ran a statement on the same backend connection in between.
#[tokio::test]
async fn last_statement_diagnostics_belong_to_their_client() {
    let backend = shared_backend();
    let db = unique_name("diag");
    backend.fresh_db(&db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    direct
        .query_drop("INSERT INTO t (v) SELECT seq FROM seq_1_to_10")
        .await
        .unwrap();
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &[]);
    let mut a = shoal.conn(&backend, Some(&db)).await;
    let mut b = shoal.conn(&backend, Some(&db)).await;
    let mut failures = Vec::new();

    // Warnings: a client reads them with SHOW WARNINGS after a statement reported some.
    a.query_drop("SELECT 1/0").await.unwrap();
    assert_eq!(
        a.get_warnings(),
        1,
        "the division by zero warning is in A's OK/EOF packet"
    );
    b.query_drop("SELECT 1").await.unwrap();
    let warnings: Vec<(String, u32, String)> = a.query("SHOW WARNINGS").await.unwrap();
    if warnings.iter().map(|w| w.1).collect::<Vec<_>>() != vec![1365] {
        failures.push(format!(
            "SHOW WARNINGS after A's 1/0 and B's SELECT 1: {warnings:?}"
        ));
    }

    // ROW_COUNT() of A's UPDATE.
    a.query_drop("UPDATE t SET v = v + 1 WHERE id <= 3")
        .await
        .unwrap();
    b.query_drop("UPDATE t SET v = v + 1 WHERE id = 10")
        .await
        .unwrap();
    let rc = count(&mut a, "SELECT ROW_COUNT()").await;
    if rc != 3 {
        failures.push(format!(
            "ROW_COUNT() after A's 3-row UPDATE and B's 1-row UPDATE: {rc}"
        ));
    }

    // FOUND_ROWS() of A's SELECT.
    let _: Vec<i64> = a.query("SELECT id FROM t LIMIT 2").await.unwrap();
    let _: Vec<i64> = b.query("SELECT id FROM t LIMIT 7").await.unwrap();
    let fr = count(&mut a, "SELECT FOUND_ROWS()").await;
    if fr != 2 {
        failures.push(format!(
            "FOUND_ROWS() after A's 2-row SELECT and B's 7-row SELECT: {fr}"
        ));
    }

    // LAST_INSERT_ID(expr) sets the value; a multi-row INSERT reports its first id.
    let _ = count(&mut a, "SELECT LAST_INSERT_ID(42)").await;
    b.query_drop("INSERT INTO t (v) VALUES (0)").await.unwrap();
    let li = count(&mut a, "SELECT LAST_INSERT_ID()").await;
    if li != 42 {
        failures.push(format!(
            "LAST_INSERT_ID() after A's LAST_INSERT_ID(42) and B's INSERT: {li}"
        ));
    }
    a.query_drop("INSERT INTO t (v) VALUES (1), (2), (3)")
        .await
        .unwrap();
    let first = a.last_insert_id().expect("insert id") as i64;
    b.query_drop("INSERT INTO t (v) VALUES (0)").await.unwrap();
    let li = count(&mut a, "SELECT LAST_INSERT_ID()").await;
    if li != first {
        failures.push(format!(
            "LAST_INSERT_ID() after A's 3-row INSERT (first id {first}) and B's INSERT: {li}"
        ));
    }
    let via_var = count(&mut a, "SELECT @@last_insert_id").await;
    if via_var != first {
        failures.push(format!("@@last_insert_id after the same: {via_var}"));
    }
    assert!(
        failures.is_empty(),
        "{}\nshoal log:\n{}",
        failures.join("\n"),
        shoal.log()
    );
}

/// After COM_RESET_CONNECTION or COM_CHANGE_USER a client's session is back to defaults for
/// good: Shoal must forget the state it replays for that client, not restore it on the next
/// connection hand-over.
#[tokio::test]
async fn reset_and_change_user_clear_the_state_shoal_replays() {
    let backend = shared_backend();
    let db = unique_name("resetrp");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &[]);
    let mut b = shoal.conn(&backend, Some(&db)).await;
    let baseline = state(&mut b).await;
    let mut a = shoal.conn(&backend, Some(&db)).await;
    for how in ["COM_RESET_CONNECTION", "COM_CHANGE_USER"] {
        a.query_drop("SET SESSION sql_mode = 'ANSI', time_zone = '+02:00'")
            .await
            .unwrap();
        a.query_drop("SET NAMES latin1").await.unwrap();
        assert_eq!(state(&mut b).await, baseline);
        if how == "COM_RESET_CONNECTION" {
            assert!(a.reset().await.unwrap());
        } else {
            a.change_user(mysql_async::ChangeUserOpts::default())
                .await
                .unwrap();
        }
        for round in 0..2 {
            assert_eq!(state(&mut b).await, baseline, "{how}, round {round}: B");
            assert_eq!(
                state(&mut a).await,
                baseline,
                "{how}, round {round}: A's old state came back after {how}"
            );
        }
    }
}

/// `--runtime per-core`: each thread its own listener and runtime. Clients spread over both
/// cores by the kernel share a pool of 2 backend connections, so a connection opened on one
/// core serves sessions of the other; every committed row arrives, every transaction stays its
/// own, and SIGTERM ends the process with sessions on both cores.
#[tokio::test]
async fn per_core_runtime_serves_sessions_sharing_connections_across_cores() {
    let backend = shared_backend();
    let db = unique_name("percore");
    backend.fresh_db(&db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE t (client INT, n INT, PRIMARY KEY (client, n)) ENGINE=InnoDB")
        .await
        .unwrap();
    let shoal = ShoalProcess::quick_with_pool(
        &backend,
        &db,
        2,
        &["--runtime", "per-core", "--threads", "2"],
    );
    let clients = 12;
    let mut tasks = Vec::new();
    for client in 0..clients {
        let mut c = shoal.conn(&backend, Some(&db)).await;
        tasks.push(tokio::spawn(async move {
            for round in 0..5 {
                c.query_drop("BEGIN").await.unwrap();
                for i in 0..4 {
                    c.exec_drop("INSERT INTO t VALUES (?, ?)", (client, round * 4 + i))
                        .await
                        .unwrap();
                }
                // Its own uncommitted rows, and nobody else's.
                let mine: i64 = c
                    .exec_first("SELECT COUNT(*) FROM t WHERE client = ?", (client,))
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(mine, (round + 1) * 4, "client {client} round {round}");
                c.query_drop("COMMIT").await.unwrap();
            }
            c.disconnect().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
    assert_eq!(
        count(&mut direct, "SELECT COUNT(*) FROM t").await,
        clients * 20,
        "committed rows missing"
    );
    // The cores start once the first one serves: by now they have.
    let threads: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", shoal.pid()))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .collect();
    assert!(
        threads.iter().any(|t| t == "shoal-core-1"),
        "no second core's thread: {threads:?}"
    );
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut c = shoal.conn(&backend, Some(&db)).await;
        assert_eq!(count(&mut c, "SELECT COUNT(*) FROM t").await, clients * 20);
        held.push(c);
    }
    let status = shoal.terminate();
    assert!(status.success(), "shoal exited with {status}");
}
