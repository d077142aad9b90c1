//! Errors reach the client as the backend sent them (code, SQLSTATE, message), login failures are
//! refused with the right codes, and a session goes on after an error.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use shoal_tests::raw::{COM_INIT_DB, COM_PING, RawConn, Reply};
use shoal_tests::{ShoalProcess, server_error, shared_backend, unique_name, within};
use std::time::Duration;

async fn still_works(conn: &mut Conn) {
    let one: Option<i64> = conn
        .query_first("SELECT 1")
        .await
        .expect("session after an error");
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn statement_errors_arrive_with_the_backends_code_state_and_message() {
    let backend = shared_backend();
    let db = unique_name("err");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY, u VARCHAR(10) UNIQUE)")
        .await
        .unwrap();
    direct
        .query_drop("INSERT INTO t VALUES (1, 'one')")
        .await
        .unwrap();
    let mut proxied = shoal.conn(&backend, Some(&db)).await;

    let cases: &[(&str, u16, &str)] = &[
        ("INSERT INTO t VALUES (1, 'uno')", 1062, "23000"),
        ("INSERT INTO t VALUES (2, 'one')", 1062, "23000"),
        ("SELEC 1", 1064, "42000"),
        ("SELECT * FROM no_such_table", 1146, "42S02"),
        ("SELECT no_such_column FROM t", 1054, "42S22"),
        (
            "INSERT INTO t VALUES (3, 'much too long for ten')",
            1406,
            "22001",
        ),
        (
            "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'custom ✓ message', MYSQL_ERRNO = 1644",
            1644,
            "45000",
        ),
    ];
    for &(sql, code, state) in cases {
        let want = server_error(direct.query_drop(sql).await);
        let got = server_error(proxied.query_drop(sql).await);
        assert_eq!(got, want, "text protocol: {sql}");
        assert_eq!(
            (got.0, got.1.as_str()),
            (code, state),
            "text protocol: {sql}"
        );
        still_works(&mut proxied).await;
    }
    let dup = server_error(proxied.query_drop("INSERT INTO t VALUES (1, 'uno')").await);
    assert_eq!(dup.2, "Duplicate entry '1' for key 'PRIMARY'");

    // The same through prepared statements: errors at execute and at prepare.
    for (sql, params, code, state) in [
        (
            "INSERT INTO t VALUES (?, ?)",
            vec![1.into(), "x".into()],
            1062u16,
            "23000",
        ),
        (
            "INSERT INTO t VALUES (?, ?)",
            vec![5.into(), "much too long for ten".into()],
            1406,
            "22001",
        ),
    ] {
        let params: Vec<mysql_async::Value> = params;
        let want = server_error(direct.exec_drop(sql, params.clone()).await);
        let got = server_error(proxied.exec_drop(sql, params).await);
        assert_eq!(got, want, "binary protocol: {sql}");
        assert_eq!((got.0, got.1.as_str()), (code, state));
        still_works(&mut proxied).await;
    }
    for sql in ["SELEC ?", "SELECT ? FROM no_such_table"] {
        let want = server_error(direct.prep(sql).await);
        let got = server_error(proxied.prep(sql).await);
        assert_eq!(got, want, "prepare: {sql}");
        still_works(&mut proxied).await;
    }
    let (code, state, _) = server_error(proxied.prep("SELEC ?").await);
    assert_eq!((code, state.as_str()), (1064, "42000"));
    let rows: Vec<(i64, String)> = proxied.query("SELECT id, u FROM t").await.unwrap();
    assert_eq!(
        rows,
        vec![(1, "one".to_string())],
        "a failed statement changed data"
    );
}

fn opts_with(shoal: &ShoalProcess, user: &str, pass: &str, db: Option<&str>) -> Opts {
    shoal.opts_as(user, pass, db)
}

#[tokio::test]
async fn wrong_password_unknown_user_and_unknown_schema_are_refused() {
    let backend = shared_backend();
    let db = unique_name("auth");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let limit = Duration::from_secs(20);

    let wrong_pw = within(
        limit,
        "login with a wrong password",
        Conn::new(opts_with(
            &shoal,
            &backend.user,
            "not-the-password",
            Some(&db),
        )),
    )
    .await;
    let (code, state, msg) = server_error(wrong_pw);
    assert_eq!(
        (code, state.as_str()),
        (1045, "28000"),
        "wrong password: {msg}"
    );

    let empty_pw = within(
        limit,
        "login with an empty password",
        Conn::new(opts_with(&shoal, &backend.user, "", Some(&db))),
    )
    .await;
    let (code, state, msg) = server_error(empty_pw);
    assert_eq!(
        (code, state.as_str()),
        (1045, "28000"),
        "empty password: {msg}"
    );

    let unknown = within(
        limit,
        "login as an unknown user",
        Conn::new(opts_with(
            &shoal,
            "nobody_here",
            &backend.password,
            Some(&db),
        )),
    )
    .await;
    let (code, state, msg) = server_error(unknown);
    assert_eq!(
        (code, state.as_str()),
        (1045, "28000"),
        "unknown user: {msg}"
    );

    let no_schema = within(
        limit,
        "login to an unknown schema",
        Conn::new(opts_with(
            &shoal,
            &backend.user,
            &backend.password,
            Some("no_such_schema_xyz"),
        )),
    )
    .await;
    let (code, state, msg) = server_error(no_schema);
    assert_eq!(
        (code, state.as_str()),
        (1049, "42000"),
        "unknown schema: {msg}"
    );

    // The right credentials still work after all those refusals, with and without a schema.
    let mut ok = Conn::new(opts_with(
        &shoal,
        &backend.user,
        &backend.password,
        Some(&db),
    ))
    .await
    .expect("login with the right password");
    still_works(&mut ok).await;
    let mut ok = Conn::new(opts_with(&shoal, &backend.user, &backend.password, None))
        .await
        .expect("login without a schema");
    let current: Option<Option<String>> = ok.query_first("SELECT DATABASE()").await.unwrap();
    assert!(current.is_some());

    // Switching to an unknown schema later: USE and COM_INIT_DB.
    let (code, state, _) = server_error(ok.query_drop("USE no_such_schema_xyz").await);
    assert_eq!((code, state.as_str()), (1049, "42000"));
    still_works(&mut ok).await;
    let (mut raw, reply) =
        RawConn::login(&shoal.addr(), &backend.user, &backend.password, Some(&db))
            .await
            .unwrap();
    assert_eq!(reply, Reply::Ok);
    match raw
        .command(COM_INIT_DB, b"no_such_schema_xyz")
        .await
        .unwrap()
    {
        Reply::Err { code, state, .. } => assert_eq!((code, state.as_str()), (1049, "42000")),
        other => panic!("COM_INIT_DB of an unknown schema answered {other:?}"),
    }
    assert_eq!(raw.command(COM_PING, b"").await.unwrap(), Reply::Ok);

    // A wrong password through the raw client too (no auth-switch shortcuts).
    let (_, reply) = RawConn::login(&shoal.addr(), &backend.user, "nope", Some(&db))
        .await
        .unwrap();
    match reply {
        Reply::Err { code, state, .. } => assert_eq!((code, state.as_str()), (1045, "28000")),
        other => panic!("raw login with a wrong password answered {other:?}"),
    }
}
