//! A backend on which session tracking cannot be switched on: Shoal says so at startup, with the
//! reason, and never pools its connections (it could not see what a session left on them). The
//! backend is a real MariaDB behind a relay that hides `CLIENT_SESSION_TRACK` from its greeting,
//! as an old or stripped-down server would.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};
use shoal_tests::{Backend, ShoalProcess, shared_backend};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CLIENT_SESSION_TRACK: u32 = 1 << 23;

/// Clears `CLIENT_SESSION_TRACK` in a HandshakeV10 payload: protocol version, server version
/// (NUL-terminated), connection id (4), scramble part 1 (8), filler (1), capabilities low (2),
/// collation (1), status (2), capabilities high (2).
fn hide_session_track(payload: &mut [u8]) {
    let nul = payload[1..]
        .iter()
        .position(|b| *b == 0)
        .expect("server version")
        + 1;
    let high = nul + 1 + 4 + 8 + 1 + 2 + 1 + 2;
    let mut caps = u16::from_le_bytes([payload[high], payload[high + 1]]);
    caps &= !((CLIENT_SESSION_TRACK >> 16) as u16);
    payload[high..high + 2].copy_from_slice(&caps.to_le_bytes());
}

/// A TCP relay to `backend` that edits the server's greeting; returns its port.
async fn relay_without_session_track(backend: &Backend) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
    let port = listener.local_addr().unwrap().port();
    let target = format!("{}:{}", backend.host, backend.port);
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let target = target.clone();
            tokio::spawn(async move {
                let mut server = TcpStream::connect(&target).await.expect("relay connects");
                let mut header = [0u8; 4];
                server
                    .read_exact(&mut header)
                    .await
                    .expect("greeting header");
                let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
                let mut payload = vec![0u8; len];
                server.read_exact(&mut payload).await.expect("greeting");
                hide_session_track(&mut payload);
                client.write_all(&header).await.expect("relay greeting");
                client.write_all(&payload).await.expect("relay greeting");
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
    port
}

fn opts(shoal: &ShoalProcess, backend: &Backend) -> Opts {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(shoal.port())
        .user(Some(backend.user.clone()))
        .pass(Some(backend.password.clone()))
        .db_name(Some("tracking"))
        .prefer_socket(false)
        .into()
}

async fn connections(backend: &Backend) -> u64 {
    let mut c = backend.conn(None).await;
    let row: Option<(String, u64)> = c
        .query_first("SHOW GLOBAL STATUS LIKE 'Connections'")
        .await
        .expect("read Connections");
    c.disconnect().await.expect("disconnect");
    row.expect("Connections row").1
}

/// Five client sessions one after another, each reading then setting a user variable; returns
/// how many backend connections the backend saw opened meanwhile (the counting connections
/// excluded) and what each session read.
async fn five_sessions(shoal: &ShoalProcess, backend: &Backend) -> (u64, Vec<Option<i64>>) {
    let before = connections(backend).await;
    let mut seen = Vec::new();
    for _ in 0..5 {
        let mut c = Conn::new(opts(shoal, backend)).await.expect("login");
        let leak: Option<Option<i64>> = c.query_first("SELECT @leak").await.expect("read @leak");
        seen.push(leak.flatten());
        c.query_drop("SET @leak = 42").await.expect("set @leak");
        c.disconnect().await.expect("disconnect");
    }
    (connections(backend).await - before - 1, seen)
}

#[tokio::test]
async fn backend_refusing_session_tracking_is_reported_and_never_pooled() {
    let backend = shared_backend();
    backend.fresh_db("tracking").await;

    // Control: the same sessions through Shoal straight to MariaDB share pooled connections.
    let tracked = ShoalProcess::quick(&backend, "tracking", &[]);
    let (opened, seen) = five_sessions(&tracked, &backend).await;
    assert!(opened < 5, "tracked backend: 5 sessions opened {opened}");
    assert_eq!(
        seen,
        vec![None; 5],
        "a user variable leaked between sessions"
    );
    assert!(
        !tracked
            .log()
            .contains("session tracking cannot be switched on"),
        "{}",
        tracked.log()
    );
    drop(tracked);

    let port = relay_without_session_track(&backend).await;
    let url = format!(
        "mysql://{}:{}@127.0.0.1:{port}/tracking",
        backend.user, backend.password
    );
    let untracked = ShoalProcess::start(&["--backend".to_string(), url]);
    let (opened, seen) = five_sessions(&untracked, &backend).await;
    assert!(
        opened >= 5,
        "untracked backend: 5 sessions opened only {opened} connections (pooled)"
    );
    assert_eq!(
        seen,
        vec![None; 5],
        "a user variable leaked between sessions"
    );
    let log = untracked.log();
    assert!(
        log.contains("session tracking cannot be switched on")
            && log.contains("the server does not offer CLIENT_SESSION_TRACK"),
        "no startup report; log:\n{log}"
    );
}
