//! Statements and commands: multi-statement COM_QUERY, stored procedures with several results,
//! OK packet details, prepared statements (and that none are left behind on the backend), and
//! the utility commands (COM_PING, COM_INIT_DB, COM_FIELD_LIST, COM_STATISTICS, COM_SET_OPTION,
//! COM_RESET_CONNECTION, COM_CHANGE_USER, unknown commands).

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{ChangeUserOpts, Conn, OptsBuilder, Row, Value};
use shoal_tests::raw::{
    COM_FIELD_LIST, COM_INIT_DB, COM_PING, COM_QUERY, COM_SET_OPTION, COM_STATISTICS,
    COM_STMT_EXECUTE, RawConn, Reply,
};
use shoal_tests::{
    Backend, ShoalProcess, private_cluster, server_error, shared_backend, unique_name, within,
};

/// One result of a (multi-)statement: its rows, or the OK packet's counters.
#[derive(Debug, PartialEq)]
struct Outcome {
    columns: Vec<String>,
    rows: Vec<Vec<Value>>,
    affected: u64,
    last_insert_id: Option<u64>,
    info: String,
    warnings: u16,
}

/// Every result of `sql`, then the error that ended it (if any).
async fn all_results(conn: &mut Conn, sql: &str) -> (Vec<Outcome>, Option<(u16, String, String)>) {
    let mut out = Vec::new();
    let mut result = match conn.query_iter(sql).await {
        Ok(r) => r,
        Err(mysql_async::Error::Server(e)) => return (out, Some((e.code, e.state, e.message))),
        Err(e) => panic!("{sql}: {e}"),
    };
    loop {
        let columns: Vec<String> = result
            .columns_ref()
            .iter()
            .map(|c| c.name_str().into_owned())
            .collect();
        let rows: Vec<Row> = match result.collect().await {
            Ok(rows) => rows,
            Err(mysql_async::Error::Server(e)) => {
                return (out, Some((e.code, e.state, e.message)));
            }
            Err(e) => panic!("{sql}: {e}"),
        };
        out.push(Outcome {
            columns,
            rows: rows.into_iter().map(Row::unwrap).collect(),
            affected: result.affected_rows(),
            last_insert_id: result.last_insert_id(),
            info: result.info().into_owned(),
            warnings: result.warnings(),
        });
        if result.is_empty() {
            return (out, None);
        }
    }
}

/// Runs `setup` on a fresh database directly and another through Shoal, so that the same
/// statements can be compared on identical data.
async fn twin_dbs(backend: &Backend, setup: &[&str]) -> (String, String) {
    let (a, b) = (unique_name("ms_direct"), unique_name("ms_shoal"));
    for db in [&a, &b] {
        backend.fresh_db(db).await;
        let mut c = backend.conn(Some(db)).await;
        for sql in setup {
            c.query_drop(*sql).await.unwrap();
        }
    }
    (a, b)
}

#[tokio::test]
async fn multi_statement_query_returns_every_result() {
    let backend = shared_backend();
    let setup = ["CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB"];
    let (direct_db, shoal_db) = twin_dbs(&backend, &setup).await;
    let shoal = ShoalProcess::quick(&backend, &shoal_db, &[]);
    let mut direct = backend.conn(Some(&direct_db)).await;
    let mut proxied = shoal.conn(&backend, Some(&shoal_db)).await;

    let scripts = [
        "SELECT 1 AS one; SELECT 'a' AS x, 'b' AS y UNION ALL SELECT 'c', 'd'",
        "INSERT INTO t (v) VALUES ('p'), ('q'), ('r'); SELECT COUNT(*) AS n FROM t; \
         UPDATE t SET v = 'z' WHERE id > 1; SELECT id, v FROM t ORDER BY id; DELETE FROM t WHERE id = 3",
        "SET @m = 5; SELECT @m * 2 AS twice; DO 1; SELECT id FROM t WHERE id > 100",
        "INSERT IGNORE INTO t VALUES (1, 'dup'); SHOW WARNINGS",
        "SELECT 1; SELEC 2; SELECT 3",
        "SELECT 'before'; INSERT INTO t VALUES (1, 'dup'); SELECT 'never'",
    ];
    for sql in scripts {
        let want = all_results(&mut direct, sql).await;
        let got = all_results(&mut proxied, sql).await;
        assert_eq!(
            got,
            want,
            "multi-statement: {sql}\nshoal log:\n{}",
            shoal.log()
        );
        // After an error inside a multi-statement, mysql_async reports the error once more on
        // the next query; whatever it does directly it must do through Shoal.
        let after_direct = direct
            .query_first::<i64, _>("SELECT 1")
            .await
            .map_err(|e| e.to_string());
        let after_proxied = proxied
            .query_first::<i64, _>("SELECT 1")
            .await
            .map_err(|e| e.to_string());
        assert_eq!(after_proxied, after_direct, "next query after: {sql}");
        let one: Option<i64> = proxied
            .query_first("SELECT 1")
            .await
            .expect("session goes on");
        assert_eq!(one, Some(1));
        let _ = direct.query_drop("DO 0").await;
    }
    // The statements really ran, the last one of each script included.
    let ids_direct: Vec<(i64, String)> = direct
        .query("SELECT id, v FROM t ORDER BY id")
        .await
        .unwrap();
    let ids_proxied: Vec<(i64, String)> = proxied
        .query("SELECT id, v FROM t ORDER BY id")
        .await
        .unwrap();
    assert_eq!(ids_proxied, ids_direct);
    assert!(
        !ids_proxied.iter().any(|(id, _)| *id == 3),
        "the DELETE at the end of a script did not run"
    );
    // Sanity: the scripts really produced several results each (mysql_async folds a final
    // row-less OK into the previous result).
    let (results, err) = all_results(&mut proxied, scripts[1]).await;
    assert!(results.len() >= 4, "{results:?}");
    assert!(err.is_none());
    let (results, err) = all_results(&mut proxied, scripts[4]).await;
    assert_eq!(results.len(), 1);
    let late = proxied
        .query_drop("DO 0")
        .await
        .err()
        .map(|e| e.to_string());
    assert!(
        err.map(|e| e.0) == Some(1064) || late.as_deref().is_some_and(|e| e.contains("1064")),
        "the syntax error inside a multi-statement never reached the client"
    );
}

/// Each statement gets its own answer: a result that arrives late would be a wrong answer to
/// the next statement.
#[tokio::test]
async fn results_never_shift_to_the_next_statement() {
    let backend = shared_backend();
    let db = unique_name("shift");
    backend.fresh_db(&db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut c = shoal.conn(&backend, Some(&db)).await;
    for i in 0..5i64 {
        // An OK with an info string ("Records: 2 ...") followed by a result set.
        let mut r = c
            .query_iter(format!(
                "INSERT INTO t (v) VALUES ({i}), ({i}); SELECT 'second {i}'"
            ))
            .await
            .unwrap();
        let _: Vec<Row> = r.collect().await.unwrap();
        let second: Vec<String> = r.collect().await.unwrap();
        drop(r);
        assert_eq!(
            second,
            vec![format!("second {i}")],
            "round {i}: the SELECT after the INSERT"
        );
        let next: Option<String> = c.query_first(format!("SELECT 'next {i}'")).await.unwrap();
        assert_eq!(
            next,
            Some(format!("next {i}")),
            "round {i}: a later statement got an earlier result"
        );
    }
    let n: Option<i64> = direct.query_first("SELECT COUNT(*) FROM t").await.unwrap();
    assert_eq!(n, Some(10));
}

#[tokio::test]
async fn stored_procedures_return_every_result_in_text_and_binary_protocol() {
    let backend = shared_backend();
    let setup = [
        "CREATE TABLE t (id INT PRIMARY KEY)",
        "INSERT INTO t VALUES (1), (2), (3)",
        "CREATE PROCEDURE p(IN k INT) BEGIN SELECT id FROM t WHERE id <= k ORDER BY id; \
         SELECT k * 10 AS tens; UPDATE t SET id = id WHERE id = k; END",
    ];
    let (direct_db, shoal_db) = twin_dbs(&backend, &setup).await;
    let shoal = ShoalProcess::quick(&backend, &shoal_db, &[]);
    let mut direct = backend.conn(Some(&direct_db)).await;
    let mut proxied = shoal.conn(&backend, Some(&shoal_db)).await;

    let want = all_results(&mut direct, "CALL p(2)").await;
    let got = all_results(&mut proxied, "CALL p(2)").await;
    assert_eq!(got, want, "CALL via COM_QUERY");
    assert!(
        want.0.len() >= 2,
        "CALL should give 2 result sets: {want:?}"
    );

    // CALL through COM_STMT_EXECUTE (PS_MULTI_RESULTS).
    async fn call_bin(conn: &mut Conn) -> Vec<Vec<Row>> {
        let mut sets = Vec::new();
        let mut result = conn.exec_iter("CALL p(?)", (3,)).await.expect("exec CALL");
        loop {
            sets.push(result.collect::<Row>().await.expect("CALL result set"));
            if result.is_empty() {
                break;
            }
        }
        sets
    }
    let want = call_bin(&mut direct).await;
    let got = call_bin(&mut proxied).await;
    let flat = |sets: Vec<Vec<Row>>| -> Vec<Vec<Vec<Value>>> {
        sets.into_iter()
            .map(|s| s.into_iter().map(Row::unwrap).collect())
            .collect()
    };
    assert_eq!(flat(got), flat(want), "CALL via prepared statement");
}

#[tokio::test]
async fn ok_packets_carry_affected_rows_insert_id_info_and_warnings() {
    let backend = shared_backend();
    let setup =
        ["CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(5), n INT) ENGINE=InnoDB"];
    let (direct_db, shoal_db) = twin_dbs(&backend, &setup).await;
    let shoal = ShoalProcess::quick(&backend, &shoal_db, &[]);
    let mut direct = backend.conn(Some(&direct_db)).await;
    let mut proxied = shoal.conn(&backend, Some(&shoal_db)).await;
    let script = [
        "SET sql_mode = ''",
        "INSERT INTO t (v, n) VALUES ('a', 1), ('b', 2), ('c', 3)",
        "INSERT INTO t (v, n) VALUES ('this is too long', 4)",
        "UPDATE t SET n = 2 WHERE n >= 2",
        "INSERT INTO t (id, v, n) VALUES (2, 'b', 9) ON DUPLICATE KEY UPDATE n = n + 1",
        "INSERT IGNORE INTO t (id, v, n) VALUES (1, 'x', 0), (10, 'y', 0)",
        "DELETE FROM t WHERE n = 0",
        "REPLACE INTO t (id, v, n) VALUES (1, 'r', 7)",
        "SELECT 1/0",
    ];
    for sql in script {
        let want = all_results(&mut direct, sql).await;
        let got = all_results(&mut proxied, sql).await;
        assert_eq!(got, want, "{sql}");
    }
    // Prepared statements report them too.
    for (sql, params) in [
        (
            "INSERT INTO t (v, n) VALUES (?, ?)",
            vec![Value::from("p"), Value::from(5)],
        ),
        (
            "UPDATE t SET n = ? WHERE n < ?",
            vec![Value::from(1), Value::from(100)],
        ),
    ] {
        direct.exec_drop(sql, params.clone()).await.unwrap();
        proxied.exec_drop(sql, params).await.unwrap();
        assert_eq!(proxied.affected_rows(), direct.affected_rows(), "{sql}");
        assert_eq!(proxied.last_insert_id(), direct.last_insert_id(), "{sql}");
        assert_eq!(proxied.info(), direct.info(), "{sql}");
        assert_eq!(proxied.get_warnings(), direct.get_warnings(), "{sql}");
    }
}

async fn prepared_stmt_count(direct: &mut Conn) -> i64 {
    let row: Option<(String, i64)> = direct
        .query_first("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'")
        .await
        .unwrap();
    row.expect("Prepared_stmt_count").1
}

/// Polls until the backend's statement count is back to `want`; Shoal may close statements of a
/// departed client in the background, but it must do so promptly.
async fn wait_for_stmt_count(direct: &mut Conn, want: i64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = prepared_stmt_count(direct).await;
        if now == want {
            return;
        }
        if Instant::now() > deadline {
            panic!("{what}: {now} prepared statements on the backend, expected {want}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn prepared_statements_reexecuted_and_closed_leave_nothing_on_the_backend() {
    // A cluster of its own: Prepared_stmt_count is server-wide, other tests would disturb it.
    let (_cluster, backend) = private_cluster();
    let db = unique_name("ps");
    backend.fresh_db(&db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40), d DOUBLE)")
        .await
        .unwrap();
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let baseline = prepared_stmt_count(&mut direct).await;

    // No client-side statement cache: every prep/close below is a real COM_STMT_PREPARE/CLOSE.
    let opts = OptsBuilder::from_opts(shoal.opts(&backend, Some(&db))).stmt_cache_size(0);
    let mut c = Conn::new(opts.clone())
        .await
        .expect("connect through shoal");
    let insert = c
        .prep("INSERT INTO t (id, v, d) VALUES (?, ?, ?)")
        .await
        .unwrap();
    let select = c
        .prep("SELECT v, d, ? + 1 FROM t WHERE id = ?")
        .await
        .unwrap();
    assert_eq!(insert.num_params(), 3);
    assert_eq!(select.num_params(), 2);
    assert_eq!(select.columns().len(), 3);
    for i in 0..1000i64 {
        let v = format!("value {i} 😀");
        c.exec_drop(&insert, (i, v.clone(), i as f64 / 4.0))
            .await
            .unwrap();
        let row: Option<(String, f64, i64)> = c.exec_first(&select, (i * 2, i)).await.unwrap();
        assert_eq!(row, Some((v, i as f64 / 4.0, i * 2 + 1)), "execution {i}");
    }
    c.close(insert).await.unwrap();
    c.close(select).await.unwrap();
    // Prepare/close cycles.
    for i in 0..200i64 {
        let s = c.prep(format!("SELECT ? * {i}")).await.unwrap();
        let got: Option<i64> = c.exec_first(&s, (2,)).await.unwrap();
        assert_eq!(got, Some(2 * i));
        c.close(s).await.unwrap();
    }
    wait_for_stmt_count(&mut direct, baseline, "after closing every statement").await;

    // Statements left open when the client goes away must be closed on the backend too, both
    // after COM_QUIT and after a dropped TCP connection.
    for polite in [true, false] {
        let mut c = Conn::new(opts.clone())
            .await
            .expect("connect through shoal");
        let mut open = Vec::new();
        for i in 0..5 {
            let s = c.prep(format!("SELECT ? + {i}")).await.unwrap();
            let _: Option<i64> = c.exec_first(&s, (1,)).await.unwrap();
            open.push(s);
        }
        assert!(
            prepared_stmt_count(&mut direct).await > baseline,
            "open statements through shoal are not visible on the backend at all"
        );
        if polite {
            c.disconnect().await.unwrap();
        } else {
            drop(c);
        }
        wait_for_stmt_count(
            &mut direct,
            baseline,
            &format!("after a client with 5 open statements left (polite={polite})"),
        )
        .await;
    }
    // And COM_RESET_CONNECTION drops them too.
    let mut c = Conn::new(opts).await.expect("connect through shoal");
    for i in 0..3 {
        let s = c.prep(format!("SELECT {i} + ?")).await.unwrap();
        let _: Option<i64> = c.exec_first(&s, (1,)).await.unwrap();
    }
    c.reset().await.unwrap();
    wait_for_stmt_count(&mut direct, baseline, "after COM_RESET_CONNECTION").await;
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    drop(c);
    drop(shoal);
    wait_for_stmt_count(&mut direct, baseline, "after shoal stopped").await;
}

#[tokio::test]
async fn prepared_statements_of_concurrent_clients_never_mix() {
    let backend = shared_backend();
    let db = unique_name("psmix");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut tasks = Vec::new();
    for k in 0..6i64 {
        let opts = shoal.opts(&backend, Some(&db));
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::new(opts).await.unwrap();
            let s1 = c
                .prep(format!("SELECT ?, 'client {k}', {k}"))
                .await
                .unwrap();
            let s2 = c.prep(format!("SELECT ? * {}", k + 1)).await.unwrap();
            for i in 0..200i64 {
                let row: Option<(i64, String, i64)> = c.exec_first(&s1, (i,)).await.unwrap();
                assert_eq!(row, Some((i, format!("client {k}"), k)));
                let row: Option<i64> = c.exec_first(&s2, (i,)).await.unwrap();
                assert_eq!(row, Some(i * (k + 1)));
            }
            c.disconnect().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
}

#[tokio::test]
async fn ping_init_db_reset_and_change_user_work() {
    let backend = shared_backend();
    let db = unique_name("cmd");
    let db2 = unique_name("cmd2");
    backend.fresh_db(&db).await;
    backend.fresh_db(&db2).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut c = shoal.conn(&backend, Some(&db)).await;

    c.ping().await.expect("COM_PING");

    // COM_RESET_CONNECTION clears user variables, temp tables and session variables.
    c.query_drop("SET @v = 1, SESSION sql_mode = 'ANSI_QUOTES'")
        .await
        .unwrap();
    c.query_drop("CREATE TEMPORARY TABLE tmp (x INT)")
        .await
        .unwrap();
    c.query_drop("BEGIN").await.unwrap();
    assert!(
        c.reset().await.expect("COM_RESET_CONNECTION"),
        "reset not supported?"
    );
    let v: Option<Option<i64>> = c.query_first("SELECT @v").await.unwrap();
    assert_eq!(v, Some(None), "user variable survived COM_RESET_CONNECTION");
    let mode: Option<String> = c.query_first("SELECT @@session.sql_mode").await.unwrap();
    assert_ne!(
        mode.as_deref(),
        Some("ANSI_QUOTES"),
        "sql_mode survived COM_RESET_CONNECTION"
    );
    let (code, ..) = server_error(c.query_drop("SELECT * FROM tmp").await);
    assert_eq!(code, 1146, "temporary table survived COM_RESET_CONNECTION");
    let in_tx: Option<i64> = c.query_first("SELECT @@in_transaction").await.unwrap();
    assert_eq!(in_tx, Some(0));
    let current: Option<String> = c.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(
        current.as_deref(),
        Some(db.as_str()),
        "COM_RESET_CONNECTION lost the schema"
    );

    // COM_CHANGE_USER re-authenticates and resets the session; the new schema applies.
    c.query_drop("SET @v = 2").await.unwrap();
    c.change_user(ChangeUserOpts::default().with_db_name(Some(db2.clone())))
        .await
        .expect("COM_CHANGE_USER");
    let current: Option<String> = c.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(
        current.as_deref(),
        Some(db2.as_str()),
        "COM_CHANGE_USER ignored the schema"
    );
    let v: Option<Option<i64>> = c.query_first("SELECT @v").await.unwrap();
    assert_eq!(v, Some(None), "user variable survived COM_CHANGE_USER");
    let user: Option<String> = c.query_first("SELECT CURRENT_USER()").await.unwrap();
    assert!(user.unwrap_or_default().starts_with(&backend.user));

    // COM_CHANGE_USER with a wrong password is refused.
    let mut c2 = shoal.conn(&backend, Some(&db)).await;
    let result = within(
        Duration::from_secs(20),
        "COM_CHANGE_USER with a wrong password",
        c2.change_user(ChangeUserOpts::default().with_pass(Some("wrong".into()))),
    )
    .await;
    let (code, state, msg) = server_error(result);
    assert_eq!((code, state.as_str()), (1045, "28000"), "{msg}");
    drop(c2);
    // To an unknown schema: refused with 1049.
    let mut c3 = shoal.conn(&backend, Some(&db)).await;
    let result = within(
        Duration::from_secs(20),
        "COM_CHANGE_USER to an unknown schema",
        c3.change_user(ChangeUserOpts::default().with_db_name(Some("no_such_schema_xyz".into()))),
    )
    .await;
    let (code, ..) = server_error(result);
    assert_eq!(code, 1049);
    drop(c3);

    // The session keeps working after all that.
    c.ping().await.unwrap();
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn raw_commands_init_db_field_list_statistics_set_option_and_unknown() {
    let backend = shared_backend();
    let db = unique_name("raw");
    let db2 = unique_name("raw2");
    backend.fresh_db(&db).await;
    backend.fresh_db(&db2).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE f (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(10,2))")
        .await
        .unwrap();
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let (mut raw, reply) =
        RawConn::login(&shoal.addr(), &backend.user, &backend.password, Some(&db))
            .await
            .expect("raw login through shoal");
    assert_eq!(reply, Reply::Ok, "raw login refused");
    let backend_addr = format!("{}:{}", backend.host, backend.port);
    let (mut raw_direct, reply) =
        RawConn::login(&backend_addr, &backend.user, &backend.password, Some(&db))
            .await
            .expect("raw login to the backend");
    assert_eq!(reply, Reply::Ok);

    assert_eq!(
        raw.command(COM_PING, b"").await.unwrap(),
        Reply::Ok,
        "COM_PING"
    );

    // COM_FIELD_LIST: the column definitions of a table, as the backend sends them.
    let mut want = vec![
        match raw_direct.command(COM_FIELD_LIST, b"f\0").await.unwrap() {
            Reply::Other(p) => p,
            other => panic!("backend COM_FIELD_LIST: {other:?}"),
        },
    ];
    want.extend(raw_direct.read_until_eof().await.unwrap());
    let first = raw.command(COM_FIELD_LIST, b"f\0").await.unwrap();
    let mut got = vec![match first {
        Reply::Other(p) => p,
        other => panic!("COM_FIELD_LIST through shoal: {other:?}"),
    }];
    got.extend(raw.read_until_eof().await.unwrap());
    assert_eq!(got.len(), 4, "3 column definitions and a terminator");
    assert_eq!(
        &got[..3],
        &want[..3],
        "COM_FIELD_LIST column definitions differ from the backend's"
    );

    // COM_STATISTICS: a status string.
    match raw.command(COM_STATISTICS, b"").await.unwrap() {
        Reply::Other(s) => {
            let s = String::from_utf8_lossy(&s);
            assert!(s.contains("Uptime"), "COM_STATISTICS answered {s:?}");
        }
        other => panic!("COM_STATISTICS: {other:?}"),
    }

    // COM_INIT_DB switches the schema.
    assert_eq!(
        raw.command(COM_INIT_DB, db2.as_bytes()).await.unwrap(),
        Reply::Ok,
        "COM_INIT_DB"
    );
    let rows = raw.query_rows("SELECT DATABASE()").await.unwrap();
    assert!(
        rows.iter()
            .any(|p| p.windows(db2.len()).any(|w| w == db2.as_bytes())),
        "DATABASE() after COM_INIT_DB is not {db2}: {rows:?}"
    );
    let rows = raw.query_rows("SELECT @@session.autocommit").await.unwrap();
    assert_eq!(rows.len(), 1, "one row: {rows:?}");
    let rows = raw_direct.query_rows("SELECT 'x'").await.unwrap();
    assert_eq!(rows, vec![vec![1, b'x']], "raw client sanity");

    // COM_SET_OPTION: multi-statements off, then on again.
    let reply = raw
        .command(COM_SET_OPTION, &1u16.to_le_bytes())
        .await
        .unwrap();
    assert!(
        !matches!(reply, Reply::Err { .. }),
        "COM_SET_OPTION off: {reply:?}"
    );
    let reply = raw.command(COM_QUERY, b"SELECT 1; SELECT 2").await.unwrap();
    assert_eq!(
        reply.err_code(),
        Some(1064),
        "multi-statement accepted with the option off: {reply:?}"
    );
    let reply = raw
        .command(COM_SET_OPTION, &0u16.to_le_bytes())
        .await
        .unwrap();
    assert!(
        !matches!(reply, Reply::Err { .. }),
        "COM_SET_OPTION on: {reply:?}"
    );
    let reply = raw.command(COM_QUERY, b"DO 1; DO 2").await.unwrap();
    assert!(
        !matches!(reply, Reply::Err { .. }),
        "multi-statement refused with the option on: {reply:?}"
    );
    // Drain the second OK.
    let second = raw.read_packet().await.unwrap();
    assert_eq!(second.first(), Some(&0x00), "second result of DO 1; DO 2");

    // An unknown command gets 1047 and the session goes on.
    for cmd in [0xeeu8, 0x00] {
        let reply = raw.command(cmd, b"").await.unwrap();
        assert_eq!(
            reply.err_code(),
            Some(1047),
            "command 0x{cmd:02x}: {reply:?}"
        );
        assert_eq!(
            raw.command(COM_PING, b"").await.unwrap(),
            Reply::Ok,
            "session after unknown command"
        );
    }
    let mut ok = shoal.conn(&backend, Some(&db)).await;
    ok.ping().await.unwrap();
}

const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
const COM_STMT_CLOSE: u8 = 0x19;
const COM_STMT_RESET: u8 = 0x1a;
const COM_STMT_FETCH: u8 = 0x1c;
const SERVER_STATUS_CURSOR_EXISTS: u16 = 0x0040;
const SERVER_STATUS_LAST_ROW_SENT: u16 = 0x0080;

/// COM_STMT_PREPARE by hand: the statement id, after reading the parameter and column
/// definitions that follow (each block ends with an EOF: the raw client has no DEPRECATE_EOF).
async fn raw_prepare(raw: &mut RawConn, sql: &str) -> u32 {
    let ok = raw
        .command_payload(COM_STMT_PREPARE, sql.as_bytes())
        .await
        .unwrap();
    assert_eq!(
        ok.first(),
        Some(&0x00),
        "prepare {sql}: {:?}",
        Reply::Other(ok.clone())
    );
    let id = u32::from_le_bytes(ok[1..5].try_into().unwrap());
    let columns = u16::from_le_bytes([ok[5], ok[6]]);
    let params = u16::from_le_bytes([ok[7], ok[8]]);
    for n in [params, columns] {
        if n > 0 {
            let block = raw.read_until_eof().await.unwrap();
            assert_eq!(block.len(), n as usize + 1, "definitions of {sql}");
        }
    }
    id
}

/// Reads packets up to and including an EOF/ERR; returns (rows, status flags of the EOF).
async fn rows_until_eof(raw: &mut RawConn) -> (Vec<Vec<u8>>, u16) {
    let mut rows = raw.read_until_eof().await.unwrap();
    let last = rows.pop().unwrap();
    assert_eq!(
        last.first(),
        Some(&0xfe),
        "ended with {:?}",
        Reply::Other(last.clone())
    );
    (rows, u16::from_le_bytes([last[3], last[4]]))
}

/// One BIGINT UNSIGNED column per binary row: header 0x00, a 1-byte null bitmap, 8 bytes LE.
fn bigint_of(row: &[u8]) -> u64 {
    u64::from_le_bytes(row[2..10].try_into().unwrap())
}

/// A read-only cursor fetched in batches, then COM_STMT_RESET and COM_STMT_CLOSE.
async fn cursor_walk(raw: &mut RawConn) -> Vec<(Vec<u64>, bool)> {
    let id = raw_prepare(raw, "SELECT seq FROM seq_1_to_10").await;
    let mut exec = id.to_le_bytes().to_vec();
    exec.push(0x01); // CURSOR_TYPE_READ_ONLY
    exec.extend_from_slice(&1u32.to_le_bytes());
    let first = raw.command_payload(COM_STMT_EXECUTE, &exec).await.unwrap();
    assert_eq!(first, vec![1], "column count of the cursor's result");
    let (defs, status) = rows_until_eof(raw).await;
    assert_eq!(defs.len(), 1);
    assert!(
        status & SERVER_STATUS_CURSOR_EXISTS != 0,
        "no cursor opened (status {status:#x})"
    );
    let mut batches = Vec::new();
    loop {
        let mut fetch = id.to_le_bytes().to_vec();
        fetch.extend_from_slice(&4u32.to_le_bytes());
        let first = raw.command_payload(COM_STMT_FETCH, &fetch).await.unwrap();
        let (mut rows, status) = if first.first() == Some(&0xfe) && first.len() < 9 {
            (Vec::new(), u16::from_le_bytes([first[3], first[4]]))
        } else {
            let (rest, status) = rows_until_eof(raw).await;
            let mut rows = vec![first];
            rows.extend(rest);
            (rows, status)
        };
        let last = status & SERVER_STATUS_LAST_ROW_SENT != 0;
        batches.push((rows.drain(..).map(|r| bigint_of(&r)).collect(), last));
        if last || batches.len() > 10 {
            break;
        }
    }
    let reply = raw
        .command(COM_STMT_RESET, &id.to_le_bytes())
        .await
        .unwrap();
    assert_eq!(reply, Reply::Ok, "COM_STMT_RESET");
    raw.seq_reset();
    raw.write_packet(&[&[COM_STMT_CLOSE][..], &id.to_le_bytes()].concat())
        .await
        .unwrap();
    assert_eq!(
        raw.command(COM_PING, b"").await.unwrap(),
        Reply::Ok,
        "after COM_STMT_CLOSE"
    );
    batches
}

/// Long data for a parameter, sent in two COM_STMT_SEND_LONG_DATA chunks; then COM_STMT_RESET
/// clears it and an inline value is used.
async fn long_data_walk(raw: &mut RawConn) -> Vec<Vec<u8>> {
    let id = raw_prepare(raw, "SELECT CONCAT('<', ?, '>')").await;
    for chunk in [&b"hello, "[..], &b"long data"[..]] {
        raw.seq_reset();
        let mut p = vec![COM_STMT_SEND_LONG_DATA];
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&0u16.to_le_bytes());
        p.extend_from_slice(chunk);
        raw.write_packet(&p).await.unwrap(); // no response by design
    }
    let execute = |value: Option<&[u8]>| {
        let mut e = id.to_le_bytes().to_vec();
        e.push(0x00);
        e.extend_from_slice(&1u32.to_le_bytes());
        e.push(0x00); // null bitmap
        e.push(0x01); // new params bound
        e.extend_from_slice(&[0xfc, 0x00]); // MYSQL_TYPE_BLOB
        if let Some(v) = value {
            e.push(v.len() as u8);
            e.extend_from_slice(v);
        }
        e
    };
    let mut values = Vec::new();
    for value in [None, Some(&b"inline"[..])] {
        if value.is_some() {
            let reply = raw
                .command(COM_STMT_RESET, &id.to_le_bytes())
                .await
                .unwrap();
            assert_eq!(reply, Reply::Ok, "COM_STMT_RESET");
        }
        let first = raw
            .command_payload(COM_STMT_EXECUTE, &execute(value))
            .await
            .unwrap();
        assert_eq!(first, vec![1], "execute: {:?}", Reply::Other(first.clone()));
        rows_until_eof(raw).await; // column definition
        let (rows, _) = rows_until_eof(raw).await;
        assert_eq!(rows.len(), 1);
        // Binary row: 0x00, null bitmap, then a length-encoded string.
        let row = &rows[0];
        values.push(row[3..3 + row[2] as usize].to_vec());
    }
    values
}

#[tokio::test]
async fn cursor_fetch_long_data_and_statement_reset_behave_as_on_the_backend() {
    let backend = shared_backend();
    let db = unique_name("cursor");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let backend_addr = format!("{}:{}", backend.host, backend.port);
    let mut walks = Vec::new();
    for addr in [backend_addr, shoal.addr()] {
        let (mut raw, reply) = RawConn::login(&addr, &backend.user, &backend.password, Some(&db))
            .await
            .unwrap();
        assert_eq!(reply, Reply::Ok);
        let cursor = cursor_walk(&mut raw).await;
        let long = long_data_walk(&mut raw).await;
        walks.push((cursor, long));
    }
    let direct = &walks[0];
    assert_eq!(
        direct.0,
        vec![
            (vec![1, 2, 3, 4], false),
            (vec![5, 6, 7, 8], false),
            (vec![9, 10], true)
        ],
        "the backend's own cursor behaviour (test sanity)"
    );
    assert_eq!(
        direct.1,
        vec![b"<hello, long data>".to_vec(), b"<inline>".to_vec()]
    );
    assert_eq!(
        walks[1],
        walks[0],
        "through shoal vs the backend\nshoal log:\n{}",
        shoal.log()
    );
}

/// What the client receives is byte for byte what the backend sends: result sets, OK packets
/// (counters, status flags, warnings, info), ERR packets, multi-results, for a client without
/// CLIENT_DEPRECATE_EOF or CLIENT_SESSION_TRACK.
#[tokio::test]
async fn raw_replies_are_byte_identical_to_the_backends() {
    let backend = shared_backend();
    let setup = [
        "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10), d DECIMAL(10,3), \
         ts DATETIME(3), b BLOB) ENGINE=InnoDB",
    ];
    let (direct_db, shoal_db) = twin_dbs(&backend, &setup).await;
    let shoal = ShoalProcess::quick(&backend, &shoal_db, &[]);
    let backend_addr = format!("{}:{}", backend.host, backend.port);
    let (mut direct, reply) = RawConn::login(
        &backend_addr,
        &backend.user,
        &backend.password,
        Some(&direct_db),
    )
    .await
    .unwrap();
    assert_eq!(reply, Reply::Ok);
    let (mut proxied, reply) = RawConn::login(
        &shoal.addr(),
        &backend.user,
        &backend.password,
        Some(&shoal_db),
    )
    .await
    .unwrap();
    assert_eq!(reply, Reply::Ok);
    let script = [
        "SET sql_mode = ''",
        "INSERT INTO t (v, d, ts, b) VALUES ('a', 1.5, '2024-01-02 03:04:05.678', x'00ff'), \
         ('bb', NULL, NULL, NULL), ('much too long', -2.25, '1999-12-31 23:59:59', '')",
        "SELECT * FROM t ORDER BY id",
        "SELECT * FROM t WHERE id < 0",
        "SELECT NULL, 1, 'x', 1.5e3, CAST(1 AS UNSIGNED), NOW() IS NOT NULL",
        "UPDATE t SET v = 'z' WHERE id >= 2",
        "SHOW WARNINGS",
        "DELETE FROM t WHERE id = 3",
        "SELECT 1; SELECT 2, 3; UPDATE t SET d = 0 WHERE id = 1; SELECT COUNT(*) FROM t",
        "SELECT 1; SELEC 2",
        "INSERT INTO t (id, v) VALUES (1, 'dup')",
        "SELECT * FROM no_such_table",
        "BEGIN",
        "INSERT INTO t (v) VALUES ('tx')",
        "COMMIT",
        "DO 1",
    ];
    for sql in script {
        let want = direct.query_packets(sql).await.unwrap();
        let got = proxied.query_packets(sql).await.unwrap();
        // Column definitions name the schema; the two databases differ by name only.
        let normalize = |packets: Vec<Vec<u8>>, db: &str| -> Vec<Vec<u8>> {
            packets
                .into_iter()
                .map(|p| {
                    let mut out = Vec::with_capacity(p.len());
                    let mut i = 0;
                    while i < p.len() {
                        if i > 0
                            && p[i - 1] as usize == db.len()
                            && p[i..].starts_with(db.as_bytes())
                        {
                            // A length-encoded string equal to the database name: its length
                            // byte is the last one copied.
                            *out.last_mut().expect("length byte") = 2;
                            out.extend_from_slice(b"DB");
                            i += db.len();
                        } else if p[i..].starts_with(db.as_bytes()) {
                            // Inside a message (e.g. "Table 'db.x' doesn't exist").
                            out.extend_from_slice(b"DB");
                            i += db.len();
                        } else {
                            out.push(p[i]);
                            i += 1;
                        }
                    }
                    out
                })
                .collect()
        };
        let want = normalize(want, &direct_db);
        let got = normalize(got, &shoal_db);
        assert_eq!(
            got,
            want,
            "reply to {sql:?} differs from the backend's\nshoal log:\n{}",
            shoal.log()
        );
    }
}

/// Wide rows, hundreds of results in one multi-statement, and prepared statements with many
/// parameters (a null bitmap of several bytes) match the backend.
#[tokio::test]
async fn wide_rows_many_results_and_many_parameters_match_the_backend() {
    let backend = shared_backend();
    let (direct_db, shoal_db) = twin_dbs(&backend, &[]).await;
    let shoal = ShoalProcess::quick(&backend, &shoal_db, &[]);
    let mut direct = backend.conn(Some(&direct_db)).await;
    let mut proxied = shoal.conn(&backend, Some(&shoal_db)).await;

    let wide = format!(
        "SELECT {}",
        (0..1000)
            .map(|i| format!("{i} AS c{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let many = (0..300)
        .map(|i| format!("SELECT {i}"))
        .collect::<Vec<_>>()
        .join("; ");
    for sql in [&wide, &many] {
        let want = all_results(&mut direct, sql).await;
        let got = all_results(&mut proxied, sql).await;
        assert_eq!(
            got.0.len(),
            want.0.len(),
            "number of results of a {}-byte statement",
            sql.len()
        );
        assert!(
            got == want,
            "results of a {}-byte statement differ",
            sql.len()
        );
    }

    let n = 100;
    let sql = format!("SELECT CONCAT_WS(',', {})", vec!["?"; n].join(", "));
    let params: Vec<Value> = (0..n)
        .map(|i| match i % 4 {
            0 => Value::NULL,
            1 => Value::Int(i as i64 * -7),
            2 => Value::Bytes(format!("s{i}😀").into_bytes()),
            _ => Value::Double(i as f64 / 8.0),
        })
        .collect();
    let want: Option<String> = direct.exec_first(&sql, params.clone()).await.unwrap();
    let got: Option<String> = proxied.exec_first(&sql, params).await.unwrap();
    assert_eq!(got, want, "CONCAT_WS of {n} mixed parameters");
}

/// A re-execution that leaves the parameter types out (new-params-bound = 0, the server reuses
/// the types of the previous execution) works as on the backend.
#[tokio::test]
async fn reexecution_without_parameter_types_matches_the_backend() {
    let backend = shared_backend();
    let db = unique_name("ptypes");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let backend_addr = format!("{}:{}", backend.host, backend.port);
    let mut answers = Vec::new();
    for addr in [backend_addr, shoal.addr()] {
        let (mut raw, reply) = RawConn::login(&addr, &backend.user, &backend.password, Some(&db))
            .await
            .unwrap();
        assert_eq!(reply, Reply::Ok);
        let id = raw_prepare(&mut raw, "SELECT CONCAT(?, '|', ?)").await;
        let mut got = Vec::new();
        for (bound, a, b) in [(true, 7i64, "x"), (false, -3, "yz"), (false, 1 << 40, "")] {
            let mut e = id.to_le_bytes().to_vec();
            e.push(0x00);
            e.extend_from_slice(&1u32.to_le_bytes());
            e.push(0x00); // null bitmap: no NULLs
            e.push(u8::from(bound));
            if bound {
                e.extend_from_slice(&[0x08, 0x00, 0xfd, 0x00]); // LONGLONG, VAR_STRING
            }
            e.extend_from_slice(&a.to_le_bytes());
            e.push(b.len() as u8);
            e.extend_from_slice(b.as_bytes());
            let first = raw.command_payload(COM_STMT_EXECUTE, &e).await.unwrap();
            if first.first() == Some(&0xff) {
                got.push(format!("{:?}", Reply::Other(first)));
                continue;
            }
            rows_until_eof(&mut raw).await;
            let (rows, _) = rows_until_eof(&mut raw).await;
            let row = &rows[0];
            got.push(String::from_utf8_lossy(&row[3..3 + row[2] as usize]).into_owned());
        }
        answers.push(got);
    }
    assert_eq!(
        answers[0],
        vec!["7|x", "-3|yz", "1099511627776|"],
        "backend sanity"
    );
    assert_eq!(
        answers[1],
        answers[0],
        "through shoal vs the backend\nshoal log:\n{}",
        shoal.log()
    );
}

/// A client that did not ask for multi-statements must not get them: `SELECT 1; CREATE ...`
/// is a syntax error and the second statement never runs (what protects such clients from
/// piggy-backed SQL injection).
#[tokio::test]
async fn multi_statements_stay_off_for_clients_that_did_not_ask() {
    let backend = shared_backend();
    let db = unique_name("nomulti");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    // Another client with multi-statements on shares the pool first.
    let mut multi = shoal.conn(&backend, Some(&db)).await;
    multi.query_drop("DO 1; DO 2").await.unwrap();
    drop(multi);
    let (mut raw, reply) = RawConn::login_with(
        &shoal.addr(),
        &backend.user,
        &backend.password,
        Some(&db),
        45,
        false,
    )
    .await
    .unwrap();
    assert_eq!(reply, Reply::Ok);
    let reply = raw
        .command(COM_QUERY, b"SELECT 1; CREATE TABLE injected (x INT)")
        .await
        .unwrap();
    assert_eq!(
        reply.err_code(),
        Some(1064),
        "multi-statement accepted from a client that did not ask: {reply:?}"
    );
    assert_eq!(raw.command(COM_PING, b"").await.unwrap(), Reply::Ok);
    let mut direct = backend.conn(Some(&db)).await;
    let tables: Vec<String> = direct.query("SHOW TABLES").await.unwrap();
    assert!(
        tables.is_empty(),
        "the piggy-backed statement ran: {tables:?}"
    );
}

/// CLIENT_FOUND_ROWS (affected rows = rows matched) is per client: an UPDATE that changes
/// nothing reports the matched rows to a client that asked, and 0 to one that did not.
#[tokio::test]
async fn client_found_rows_is_honoured_per_client() {
    let backend = shared_backend();
    let db = unique_name("foundrows");
    backend.fresh_db(&db).await;
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    direct
        .query_drop("INSERT INTO t VALUES (1, 0), (2, 0), (3, 0)")
        .await
        .unwrap();
    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 1, &[]);
    let found_opts =
        OptsBuilder::from_opts(shoal.opts(&backend, Some(&db))).client_found_rows(true);
    let mut found = Conn::new(found_opts).await.unwrap();
    let mut plain = shoal.conn(&backend, Some(&db)).await;
    for round in 0..2 {
        found.query_drop("UPDATE t SET v = 0").await.unwrap();
        assert_eq!(
            found.affected_rows(),
            3,
            "round {round}: CLIENT_FOUND_ROWS client"
        );
        plain.query_drop("UPDATE t SET v = 0").await.unwrap();
        assert_eq!(
            plain.affected_rows(),
            0,
            "round {round}: client without CLIENT_FOUND_ROWS"
        );
    }
}

/// A procedure that walks a cursor (FETCH in a loop ended by a CONTINUE HANDLER FOR NOT FOUND)
/// and SELECTs inside the loop: its result sets carry SERVER_STATUS_CURSOR_EXISTS although the
/// client opened no cursor. Called through COM_STMT_EXECUTE it must answer as directly.
#[tokio::test]
async fn cursor_loop_procedure_answers_through_the_prepared_protocol() {
    let backend = shared_backend();
    let setup = [
        "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20))",
        "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "CREATE PROCEDURE p1() BEGIN \
           DECLARE done INT DEFAULT 0; DECLARE v INT; \
           DECLARE cur CURSOR FOR SELECT id FROM t ORDER BY id; \
           DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = 1; \
           OPEN cur; \
           l: LOOP FETCH cur INTO v; IF done THEN LEAVE l; END IF; \
             SELECT id, name FROM t WHERE id = v; \
           END LOOP; \
           CLOSE cur; SELECT COUNT(*) AS n FROM t; END",
    ];
    let (direct_db, shoal_db) = twin_dbs(&backend, &setup).await;
    let shoal = ShoalProcess::quick(&backend, &shoal_db, &[]);
    let mut direct = backend.conn(Some(&direct_db)).await;
    let mut proxied = shoal.conn(&backend, Some(&shoal_db)).await;

    async fn call(conn: &mut Conn, prepared: bool) -> Vec<Vec<Vec<Value>>> {
        macro_rules! collect_sets {
            ($result:expr) => {{
                let mut result = $result;
                let mut sets = Vec::new();
                loop {
                    let rows = result.collect::<Row>().await.expect("CALL result set");
                    sets.push(rows.into_iter().map(Row::unwrap).collect());
                    if result.is_empty() {
                        break;
                    }
                }
                sets
            }};
        }
        if prepared {
            collect_sets!(conn.exec_iter("CALL p1()", ()).await.expect("exec CALL"))
        } else {
            collect_sets!(conn.query_iter("CALL p1()").await.expect("query CALL"))
        }
    }
    for prepared in [false, true] {
        let want = call(&mut direct, prepared).await;
        assert_eq!(want.len(), 4, "3 loop SELECTs and the count: {want:?}");
        let got = within(
            Duration::from_secs(20),
            "CALL p1()",
            call(&mut proxied, prepared),
        )
        .await;
        assert_eq!(got, want, "prepared = {prepared}");
        // The connection is still in step: the next statement gets its own answer.
        let n: Option<i64> = proxied.query_first("SELECT 41 + 1").await.unwrap();
        assert_eq!(n, Some(42));
    }

    // A client without CLIENT_DEPRECATE_EOF gets an EOF after each result's column
    // definitions, which carries the procedure's CURSOR_EXISTS flag: the rows still follow.
    let mut replies = Vec::new();
    for (addr, db) in [
        (format!("{}:{}", backend.host, backend.port), &direct_db),
        (shoal.addr(), &shoal_db),
    ] {
        let (mut raw, reply) = RawConn::login(&addr, &backend.user, &backend.password, Some(db))
            .await
            .unwrap();
        assert_eq!(reply, Reply::Ok);
        let id = raw_prepare(&mut raw, "CALL p1()").await;
        let mut exec = id.to_le_bytes().to_vec();
        exec.push(0x00); // no cursor
        exec.extend_from_slice(&1u32.to_le_bytes());
        let first = raw.command_payload(COM_STMT_EXECUTE, &exec).await.unwrap();
        let packets = within(
            Duration::from_secs(20),
            "raw CALL p1()",
            whole_response(&mut raw, first),
        )
        .await;
        assert_eq!(raw.command(COM_PING, b"").await.unwrap(), Reply::Ok);
        // The two databases' names differ; column definitions name them.
        let mut name = vec![db.len() as u8];
        name.extend_from_slice(db.as_bytes());
        let packets: Vec<Vec<u8>> = packets
            .into_iter()
            .map(|p| match p.windows(name.len()).position(|w| w == name) {
                Some(at) => [&p[..at], b"\x02db", &p[at + name.len()..]].concat(),
                None => p,
            })
            .collect();
        replies.push(packets);
    }
    let cursor_flagged = replies[0]
        .iter()
        .filter(|p| p.first() == Some(&0xfe) && p.len() < 9)
        .any(|p| u16::from_le_bytes([p[3], p[4]]) & SERVER_STATUS_CURSOR_EXISTS != 0);
    assert!(
        cursor_flagged,
        "the backend no longer flags the procedure's results with CURSOR_EXISTS"
    );
    assert_eq!(replies[1], replies[0], "raw CALL through Shoal vs direct");
}

/// The packets of one COM_QUERY/COM_STMT_EXECUTE response without CLIENT_DEPRECATE_EOF,
/// starting with `first`, up to the final OK or ERR.
async fn whole_response(raw: &mut RawConn, first: Vec<u8>) -> Vec<Vec<u8>> {
    const MORE_RESULTS: u16 = 0x0008;
    let lenenc = |p: &[u8], i: &mut usize| {
        let b = p[*i];
        *i += match b {
            0xfc => 3,
            0xfd => 4,
            0xfe => 9,
            _ => 1,
        };
    };
    let mut out = Vec::new();
    let mut packet = first;
    loop {
        match packet[0] {
            0xff => {
                out.push(packet);
                return out;
            }
            0x00 => {
                let mut i = 1;
                lenenc(&packet, &mut i);
                lenenc(&packet, &mut i);
                let status = u16::from_le_bytes([packet[i], packet[i + 1]]);
                out.push(packet);
                if status & MORE_RESULTS == 0 {
                    return out;
                }
            }
            n => {
                out.push(packet);
                for _ in 0..n {
                    out.push(raw.read_packet().await.unwrap());
                }
                out.push(raw.read_packet().await.unwrap()); // EOF after the definitions
                loop {
                    let p = raw.read_packet().await.unwrap();
                    let end = p[0] == 0xfe && p.len() < 9;
                    let more = end && u16::from_le_bytes([p[3], p[4]]) & MORE_RESULTS != 0;
                    out.push(p);
                    if end && !more {
                        return out;
                    }
                    if end {
                        break;
                    }
                }
            }
        }
        packet = raw.read_packet().await.unwrap();
    }
}
