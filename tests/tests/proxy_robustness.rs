//! Shoal keeps serving through bad clients and dying backends: garbage and malformed or oversized
//! packets end only the offending session, a backend that dies mid-query gives the client an
//! error (never a hang), the client connection cap answers 1040, and SIGTERM lets a running
//! statement finish.

use std::time::Duration;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_tests::raw::{COM_QUERY, COM_STMT_EXECUTE, RawConn, Reply};
use shoal_tests::shoal::max_connections_args;
use shoal_tests::{
    Backend, ShoalProcess, private_cluster, server_error, shared_backend, unique_name, within,
};

const LIMIT: Duration = Duration::from_secs(30);

async fn serves_others(shoal: &mut ShoalProcess, backend: &Backend, db: &str, after: &str) {
    shoal.assert_running();
    let mut c = within(
        LIMIT,
        &format!("connect after {after}"),
        Conn::new(shoal.opts(backend, Some(db))),
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "shoal refuses a good client after {after}: {e}\nshoal log:\n{}",
            shoal.log()
        )
    });
    let one: Option<i64> = within(LIMIT, "SELECT 1", c.query_first("SELECT 1"))
        .await
        .unwrap();
    assert_eq!(one, Some(1), "after {after}");
    shoal.assert_running();
}

/// The peer answered with an error packet or closed the connection (both are fine); it did not
/// accept the bytes as valid and it did not hang.
async fn refused(raw: &mut RawConn, what: &str) {
    let outcome = tokio::time::timeout(LIMIT, raw.read_packet()).await;
    match outcome {
        Err(_) => panic!("{what}: neither an error nor a close within {LIMIT:?}"),
        Ok(Err(_)) => {} // closed or reset
        Ok(Ok(p)) => {
            assert_eq!(
                p.first(),
                Some(&0xff),
                "{what}: answered with a non-error packet {p:?}"
            );
        }
    }
}

#[tokio::test]
async fn garbage_and_malformed_packets_end_only_that_session() {
    let backend = shared_backend();
    let db = unique_name("garbage");
    backend.fresh_db(&db).await;
    let mut shoal = ShoalProcess::quick(&backend, &db, &[]);
    // A client that is in the middle of its work the whole time.
    let mut bystander = shoal.conn(&backend, Some(&db)).await;
    bystander
        .query_drop("SET @mine = 'still here'")
        .await
        .unwrap();

    // 1. Random bytes instead of a handshake response.
    let mut raw = RawConn::connect(&shoal.addr()).await.unwrap();
    let _greeting = raw.read_packet().await.expect("greeting");
    let junk: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let _ = raw.write_raw(&junk).await;
    refused(&mut raw, "random bytes as handshake response").await;
    drop(raw);
    serves_others(&mut shoal, &backend, &db, "random bytes").await;

    // 2. A well-framed handshake response whose content is nonsense.
    let mut raw = RawConn::connect(&shoal.addr()).await.unwrap();
    let _greeting = raw.read_packet().await.expect("greeting");
    raw.write_packet(&[0x05, 0x00, 0xff]).await.unwrap();
    refused(&mut raw, "truncated handshake response").await;
    drop(raw);
    serves_others(&mut shoal, &backend, &db, "a truncated handshake response").await;

    // 3. Bytes before the greeting was even read, then a hang-up.
    let mut raw = RawConn::connect(&shoal.addr()).await.unwrap();
    let _ = raw
        .write_raw(b"GET / HTTP/1.1\r\nHost: shoal\r\n\r\n")
        .await;
    drop(raw);
    serves_others(&mut shoal, &backend, &db, "an HTTP request").await;

    // 4. After a real login: malformed COM_STMT_EXECUTE (truncated, unknown statement id).
    let (mut raw, reply) =
        RawConn::login(&shoal.addr(), &backend.user, &backend.password, Some(&db))
            .await
            .unwrap();
    assert_eq!(reply, Reply::Ok);
    let reply = raw.command(COM_STMT_EXECUTE, &[0x01, 0x02]).await;
    if let Ok(reply) = reply {
        assert!(
            reply.err_code().is_some(),
            "truncated COM_STMT_EXECUTE answered {reply:?}"
        );
    }
    drop(raw);
    serves_others(&mut shoal, &backend, &db, "a truncated COM_STMT_EXECUTE").await;

    // 5. After a real login: a packet with a wrong sequence id.
    let (mut raw, reply) =
        RawConn::login(&shoal.addr(), &backend.user, &backend.password, Some(&db))
            .await
            .unwrap();
    assert_eq!(reply, Reply::Ok);
    let _ = raw
        .write_raw(&[
            0x09, 0x00, 0x00, 0x07, COM_QUERY, b'S', b'E', b'L', b'E', b'C', b'T', b' ', b'1',
        ])
        .await;
    let _ = tokio::time::timeout(Duration::from_secs(5), raw.read_packet()).await;
    drop(raw);
    serves_others(
        &mut shoal,
        &backend,
        &db,
        "a packet with a wrong sequence id",
    )
    .await;

    // 6. A header announcing a payload that never comes, then a hang-up mid-packet.
    let (mut raw, _) = RawConn::login(&shoal.addr(), &backend.user, &backend.password, Some(&db))
        .await
        .unwrap();
    let _ = raw
        .write_raw(&[0xff, 0xff, 0xff, 0x00, COM_QUERY, b'S'])
        .await;
    drop(raw);
    serves_others(
        &mut shoal,
        &backend,
        &db,
        "a hang-up in the middle of a packet",
    )
    .await;

    let mine: Option<String> = bystander.query_first("SELECT @mine").await.unwrap();
    assert_eq!(
        mine.as_deref(),
        Some("still here"),
        "an unrelated session was disturbed"
    );
}

#[tokio::test]
async fn oversized_packet_ends_only_that_session() {
    let backend = shared_backend();
    let db = unique_name("oversize");
    backend.fresh_db(&db).await;
    let mut shoal = ShoalProcess::quick(&backend, &db, &[]);
    let (mut raw, reply) =
        RawConn::login(&shoal.addr(), &backend.user, &backend.password, Some(&db))
            .await
            .unwrap();
    assert_eq!(reply, Reply::Ok);
    // A COM_QUERY of 1.2 GiB announced in 16 MiB frames: beyond any max_allowed_packet
    // (MariaDB's hard limit is 1 GiB). Stop sending as soon as the peer hangs up or answers.
    let frame_len = 0xff_ffffusize;
    let mut frame = vec![b' '; frame_len + 4];
    frame[..3].copy_from_slice(&[0xff, 0xff, 0xff]);
    let mut answered = false;
    for seq in 0..=76u8 {
        frame[3] = seq;
        if seq == 0 {
            frame[4] = COM_QUERY;
        } else {
            frame[4] = b' ';
        }
        match tokio::time::timeout(LIMIT, raw.write_raw(&frame)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => {
                answered = true;
                break;
            }
            Err(_) => {
                panic!("shoal stopped reading an oversized packet without closing or answering")
            }
        }
    }
    if !answered {
        // Every frame was accepted: the end of the packet must now get an error, not a result.
        let _ = raw.write_raw(&[0x00, 0x00, 0x00, 77]).await;
        refused(&mut raw, "an oversized COM_QUERY").await;
    }
    drop(raw);
    serves_others(&mut shoal, &backend, &db, "an oversized packet").await;
}

#[tokio::test]
async fn backend_connection_killed_mid_query_gives_an_error_not_a_hang() {
    let backend = shared_backend();
    let db = unique_name("killconn");
    backend.fresh_db(&db).await;
    let mut shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut direct = backend.conn(Some(&db)).await;
    let mut victim = shoal.conn(&backend, Some(&db)).await;
    let marker = unique_name("marker");
    let sql = format!("SELECT SLEEP(60) AS `{marker}`");
    let running = tokio::spawn(async move {
        let result = victim.query_drop(sql).await;
        (victim, result)
    });
    // Find the backend connection running the statement and kill it.
    let id = wait_until_running(&backend, &db, &marker).await;
    direct
        .query_drop(format!("KILL CONNECTION {id}"))
        .await
        .unwrap();
    let (_victim, result) = within(LIMIT, "query whose backend connection was killed", running)
        .await
        .expect("query task");
    assert!(
        result.is_err(),
        "a killed backend connection returned success: {result:?}"
    );
    serves_others(&mut shoal, &backend, &db, "a backend connection was killed").await;
    // Again, so that a broken connection handed back to the pool would show.
    for _ in 0..3 {
        serves_others(
            &mut shoal,
            &backend,
            &db,
            "a backend connection was killed (again)",
        )
        .await;
    }
}

#[tokio::test]
async fn backend_server_killed_mid_query_gives_an_error_not_a_hang() {
    let (mut cluster, backend) = private_cluster();
    let db = unique_name("killsrv");
    backend.fresh_db(&db).await;
    let mut shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut idle = shoal.conn(&backend, Some(&db)).await;
    idle.query_drop("SELECT 1").await.unwrap();
    let mut victim = shoal.conn(&backend, Some(&db)).await;
    let running = tokio::spawn(async move {
        let result = victim.query_drop("SELECT SLEEP(60)").await;
        (victim, result)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // SAFETY: kill(2) on the pid of a mariadbd this test's own cluster started.
    unsafe {
        libc::kill(backend.pid as libc::pid_t, libc::SIGKILL);
    }
    let (_victim, result) = within(LIMIT, "query whose backend server died", running)
        .await
        .expect("query task");
    assert!(
        result.is_err(),
        "a dead backend returned success: {result:?}"
    );

    // The client that was idle, and new clients, get errors too, promptly.
    let idle_result = within(
        LIMIT,
        "query on an idle session after the backend died",
        idle.query_drop("SELECT 1"),
    )
    .await;
    assert!(
        idle_result.is_err(),
        "query against a dead backend succeeded"
    );
    let new_client = within(LIMIT, "connect after the backend died", async {
        let mut c = Conn::new(shoal.opts(&backend, Some(&db))).await?;
        c.query_drop("SELECT 1").await?;
        Ok::<_, mysql_async::Error>(())
    })
    .await;
    assert!(
        new_client.is_err(),
        "a new client was served by a dead backend?"
    );
    shoal.assert_running();
    cluster.stop();
}

#[tokio::test]
async fn client_connection_cap_answers_1040() {
    let backend = shared_backend();
    let db = unique_name("maxconn");
    backend.fresh_db(&db).await;
    let args = max_connections_args(3);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut shoal = ShoalProcess::quick(&backend, &db, &args);
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(shoal.conn(&backend, Some(&db)).await);
    }
    let refused = within(
        LIMIT,
        "connect beyond the cap",
        Conn::new(shoal.opts(&backend, Some(&db))),
    )
    .await;
    let (code, state, msg) = server_error(refused);
    assert_eq!(code, 1040, "{state} {msg}");
    // Those inside still work; once one leaves there is room again.
    for c in &mut held {
        c.ping().await.expect("a session under the cap");
    }
    held.pop().unwrap().disconnect().await.unwrap();
    let mut admitted = None;
    for _ in 0..100 {
        match Conn::new(shoal.opts(&backend, Some(&db))).await {
            Ok(c) => {
                admitted = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let mut admitted = admitted.expect("no room after a client left");
    admitted.ping().await.unwrap();
    shoal.assert_running();
}

/// Waits until a statement containing `marker` shows in the backend's process list; returns
/// the backend connection id running it.
async fn wait_until_running(backend: &Backend, db: &str, marker: &str) -> u64 {
    let mut direct = backend.conn(Some(db)).await;
    for _ in 0..400 {
        let id: Option<u64> = direct
            .query_first(format!(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%{marker}%' \
                 AND INFO NOT LIKE '%PROCESSLIST%'"
            ))
            .await
            .unwrap();
        if let Some(id) = id {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the statement marked {marker} never reached the backend");
}

#[tokio::test]
async fn sigterm_lets_a_running_statement_finish() {
    shutdown_lets_a_running_statement_finish(libc::SIGTERM).await;
}

#[tokio::test]
async fn sigint_lets_a_running_statement_finish() {
    shutdown_lets_a_running_statement_finish(libc::SIGINT).await;
}

async fn shutdown_lets_a_running_statement_finish(signal: libc::c_int) {
    let backend = shared_backend();
    let db = unique_name("sigterm");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut c = shoal.conn(&backend, Some(&db)).await;
    let marker = unique_name("drain");
    let sql = format!("SELECT SLEEP(2) AS `{marker}`");
    let running = tokio::spawn(async move {
        let r: Result<Option<i64>, _> = c.query_first(sql).await;
        r
    });
    // Signal only once the statement runs on the backend (a statement that arrives after the
    // signal may rightly be refused).
    wait_until_running(&backend, &db, &marker).await;
    let addr = shoal.addr();
    let status = tokio::task::spawn_blocking(move || shoal.signal_and_wait(signal));
    tokio::time::sleep(Duration::from_millis(300)).await;
    // No new clients while draining.
    let late = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::TcpStream::connect(&addr),
    )
    .await;
    let result = within(LIMIT, "statement running at SIGTERM", running)
        .await
        .expect("task");
    assert_eq!(
        result.expect("statement running at SIGTERM failed"),
        Some(0)
    );
    let status = status.await.expect("terminate");
    assert!(
        status.success(),
        "shoal exited with {status} after signal {signal}"
    );
    if let Ok(Ok(mut stream)) = late {
        // Accepted at the TCP level (a backlog) but must not be served.
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 1];
        let r = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await;
        assert!(
            !matches!(r, Ok(Ok(1))) || buf[0] != 10,
            "a new client got a greeting during shutdown"
        );
    }
}

#[tokio::test]
async fn idle_clients_are_disconnected_and_others_are_not() {
    let backend = shared_backend();
    let db = unique_name("idle");
    backend.fresh_db(&db).await;
    let mut shoal = ShoalProcess::quick(&backend, &db, &["--client-idle-timeout-secs", "2"]);
    let mut idle = shoal.conn(&backend, Some(&db)).await;
    idle.query_drop("SELECT 1").await.unwrap();
    let mut busy = shoal.conn(&backend, Some(&db)).await;
    // `busy` keeps talking for 5 s while `idle` stays silent.
    for _ in 0..25 {
        busy.query_drop("SELECT 1")
            .await
            .expect("an active client was disconnected");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let result = within(
        LIMIT,
        "query on a connection past its idle timeout",
        idle.query_drop("SELECT 1"),
    )
    .await;
    assert!(
        result.is_err(),
        "a client idle for 5 s with a 2 s idle timeout was still served"
    );
    serves_others(&mut shoal, &backend, &db, "an idle client was dropped").await;
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A 400 MB result read slowly by the client passes through Shoal without Shoal holding it:
/// results are streamed, never buffered whole.
#[tokio::test]
async fn a_large_result_is_streamed_not_buffered() {
    let backend = shared_backend();
    let db = unique_name("stream");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let before = rss_kib(shoal.pid());
    let mut c = shoal.conn(&backend, Some(&db)).await;
    let mut result = c
        .query_iter("SELECT seq, REPEAT(CHAR(65 + seq % 26), 1000000) FROM seq_1_to_400")
        .await
        .unwrap();
    let mut rows = 0u64;
    let mut peak = before;
    while let Some(row) = within(LIMIT, "next row of a large result", result.next())
        .await
        .unwrap()
    {
        let v: Vec<u8> = row.get(1).unwrap();
        assert_eq!(v.len(), 1_000_000);
        rows += 1;
        if rows.is_multiple_of(20) {
            // A slow reader: the backend is far ahead unless Shoal applies back-pressure.
            tokio::time::sleep(Duration::from_millis(100)).await;
            peak = peak.max(rss_kib(shoal.pid()));
        }
    }
    drop(result);
    assert_eq!(rows, 400);
    let grown_mib = peak.saturating_sub(before) / 1024;
    assert!(
        grown_mib < 150,
        "shoal's memory grew by {grown_mib} MiB while relaying a 400 MB result (buffered?)"
    );
}

/// A pooled connection the backend closed while it sat idle (KILL, wait_timeout, a restart)
/// is discarded and replaced: the next client statement succeeds, with its session state.
#[tokio::test]
async fn idle_pooled_connections_closed_by_the_backend_are_replaced() {
    let backend = shared_backend();
    let db = unique_name("idlekill");
    backend.fresh_db(&db).await;
    let mut shoal = ShoalProcess::quick(&backend, &db, &["--pool-max", "1"]);
    let mut direct = backend.conn(Some(&db)).await;
    let mut c = shoal.conn(&backend, Some(&db)).await;
    c.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES'")
        .await
        .unwrap();
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    for round in 0..3 {
        let ids: Vec<u64> = direct
            .query(format!(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = '{db}' \
                 AND COMMAND = 'Sleep' AND ID <> CONNECTION_ID()"
            ))
            .await
            .unwrap();
        assert!(
            !ids.is_empty(),
            "round {round}: no idle pooled connection on the backend"
        );
        for id in ids {
            direct
                .query_drop(format!("KILL CONNECTION {id}"))
                .await
                .unwrap();
        }
        // Give the backend a moment to close the sockets.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mode: Option<String> = within(LIMIT, "statement after the pooled connection was killed", c.query_first("SELECT @@session.sql_mode"))
            .await
            .unwrap_or_else(|e| panic!("round {round}: a client statement failed because an idle pooled connection had been closed: {e}\nshoal log:\n{}", shoal.log()));
        assert_eq!(
            mode.as_deref(),
            Some("ANSI_QUOTES"),
            "round {round}: session state lost on the replacement connection"
        );
    }
    shoal.assert_running();
}
