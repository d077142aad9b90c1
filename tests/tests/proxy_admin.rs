//! Shoal's administration statements (`SHOW SHOAL ...`) and admin KILL: refused with 1227 to
//! users without `admin: true` (text and prepared), answered to admins from what the proxy
//! really holds, in quick mode and over a sharded configuration.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shoal_tests::{
    ShoalProcess, demo_layout_yaml, server_error, shared_backend, text_rows, two_servers_and_shoal,
    unique_name, within,
};

/// Every statement of the family.
const ADMIN_STATEMENTS: [&str; 9] = [
    "SHOW SHOAL VERSION",
    "SHOW SHOAL SESSIONS",
    "SHOW SHOAL POOLS",
    "SHOW SHOAL BACKENDS",
    "SHOW SHOAL XA",
    "SHOW SHOAL QUERIES",
    "SHOW SHOAL CONFIG",
    "RESET SHOAL QUERIES",
    "RELOAD SHOAL CONFIG",
];

/// The statements another part of issue 26 answers: parsed and gated here, 1235 in this build.
/// A non-admin gets 1227 for each statement, as text and prepared, and the session goes on;
/// garbage after SHOAL is Shoal's own 1064.
async fn assert_refused_to(c: &mut Conn) {
    for sql in ADMIN_STATEMENTS {
        for spelled in [
            sql.to_string(),
            format!("/* tool */ {} ;", sql.to_lowercase()),
        ] {
            let (code, state, msg) = server_error(c.query_drop(&spelled).await);
            assert_eq!((code, state.as_str()), (1227, "42000"), "{spelled}: {msg}");
            assert_eq!(
                msg,
                "Access denied; you need (at least one of) the SHOAL ADMIN privilege(s) for this \
                 operation"
            );
        }
        let (code, _, msg) = server_error(c.prep(sql).await);
        assert_eq!(code, 1227, "prepared {sql}: {msg}");
    }
    let (code, _, msg) = server_error(c.query_drop("SHOW SHOAL SECRETS").await);
    assert_eq!(code, 1064, "{msg}");
    assert!(msg.contains("near 'SECRETS'"), "{msg}");
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

/// What an admin gets besides real answers: 1064 for garbage, 1295 for a prepared admin
/// statement, 1235 for the statements of other builds.
async fn assert_admin_edges(c: &mut Conn) {
    let (code, _, msg) = server_error(c.query_drop("SHOW SHOAL VERSION extra").await);
    assert_eq!(code, 1064, "{msg}");
    let (code, _, msg) = server_error(c.prep("SHOW SHOAL SESSIONS").await);
    assert_eq!(code, 1295, "{msg}");
    // The statements answered by the observe and reload modules pass the gate: without an
    // admin listener digests are off (1289); the running config is shown, passwords
    // redacted.
    for sql in ["SHOW SHOAL QUERIES", "RESET SHOAL QUERIES"] {
        let (code, _, msg) = server_error(c.query_drop(sql).await);
        assert_eq!(code, 1289, "{sql}: {msg}");
    }
    let config = text_rows(c, "SHOW SHOAL CONFIG").await;
    assert!(
        config
            .iter()
            .any(|r| r[0].as_deref() == Some("config.version") && r[1].as_deref() == Some("1")),
        "{config:?}"
    );
    assert!(
        config
            .iter()
            .all(|r| !r[1].as_deref().is_some_and(|v| v.contains("-secret"))),
        "a password shown: {config:?}"
    );
}

/// `SHOW SHOAL VERSION`'s one row: (version, commit, backend_version, uptime, config_file).
async fn version(c: &mut Conn) -> Vec<Option<String>> {
    let rows = text_rows(c, "SHOW SHOAL VERSION").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = rows.into_iter().next().unwrap();
    assert_eq!(row[0].as_deref(), Some(env!("CARGO_PKG_VERSION")));
    assert!(
        row[2].as_deref().is_some_and(|v| v.contains("MariaDB")),
        "backend version {row:?}"
    );
    assert!(
        row[3].as_deref().is_some_and(|u| u.parse::<u64>().is_ok()),
        "uptime {row:?}"
    );
    row
}

/// Named columns of a result of Shoal's, as text.
async fn named_rows(c: &mut Conn, sql: &str) -> Vec<std::collections::HashMap<String, String>> {
    let rows: Vec<Row> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter()
        .map(|r| {
            shoal_tests::named_values(&r)
                .into_iter()
                .filter_map(|(n, v)| v.map(|v| (n, v)))
                .collect()
        })
        .collect()
}

/// Runs `sleep_sql` (a SLEEP of a few seconds) on `victim` and waits until `admin`'s
/// `SHOW SHOAL SESSIONS` shows it running for at least a second; returns that row.
async fn running_row(
    admin: &mut Conn,
    victim: Conn,
    sleep_sql: &str,
) -> (
    std::collections::HashMap<String, String>,
    tokio::task::JoinHandle<Conn>,
) {
    let id = victim.id().to_string();
    let sql = sleep_sql.to_string();
    let sleeper = tokio::spawn(async move {
        let mut victim = victim;
        victim.query_drop(sql).await.unwrap();
        victim
    });
    for _ in 0..100 {
        let rows = named_rows(admin, "SHOW SHOAL SESSIONS").await;
        let row = rows.into_iter().find(|r| r.get("id") == Some(&id));
        if let Some(row) = row
            && row.get("command").map(String::as_str) == Some("Query")
            && row.get("time").and_then(|t| t.parse::<u64>().ok()) >= Some(1)
        {
            return (row, sleeper);
        }
        assert!(!sleeper.is_finished(), "the sleep ended before it was seen");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("SHOW SHOAL SESSIONS never showed session {id} running {sleep_sql}");
}

#[tokio::test]
async fn quick_mode_admin_statements() {
    let backend = shared_backend();
    let db = unique_name("admin");
    backend.fresh_db(&db).await;

    // Without --admin, quick mode's one login is no admin.
    let plain = ShoalProcess::quick(&backend, &db, &[]);
    let mut c = plain.conn(&backend, Some(&db)).await;
    assert_refused_to(&mut c).await;

    let shoal = ShoalProcess::quick_with_pool(&backend, &db, 4, &["--admin"]);
    let mut admin = shoal.conn(&backend, Some(&db)).await;
    let v = version(&mut admin).await;
    assert_eq!(v[4], None, "no config file in quick mode");
    assert_admin_edges(&mut admin).await;

    // SESSIONS: another session, its schema and its running statement.
    let victim = shoal.conn(&backend, Some(&db)).await;
    let victim_id = victim.id();
    let sleep = format!("SELECT SLEEP(4) AS {db}");
    let (row, sleeper) = running_row(&mut admin, victim, &sleep).await;
    assert_eq!(row.get("user"), Some(&backend.user), "{row:?}");
    assert_eq!(row.get("schema"), Some(&db), "{row:?}");
    assert_eq!(row.get("state").map(String::as_str), Some("running"));
    assert_eq!(row.get("info"), Some(&sleep), "{row:?}");
    assert!(row["client"].starts_with("127.0.0.1:"), "{row:?}");
    assert!(row["backends"].contains("thread"), "{row:?}");
    let mut victim = within(Duration::from_secs(30), "the sleep", sleeper)
        .await
        .unwrap();
    let rows = named_rows(&mut admin, "SHOW SHOAL SESSIONS").await;
    let me = admin.id().to_string();
    let mine = rows.iter().find(|r| r["id"] == me).expect("own session");
    assert_eq!(mine["info"], "SHOW SHOAL SESSIONS");
    let idle = rows
        .iter()
        .find(|r| r["id"] == victim_id.to_string())
        .expect("the victim is listed");
    assert_eq!(idle["command"], "Sleep", "{idle:?}");
    assert_eq!(idle["state"], "idle", "{idle:?}");
    assert!(!idle.contains_key("info"), "{idle:?}");

    // POOLS: the one backend; a session in a transaction holds a connection.
    victim.query_drop("BEGIN").await.unwrap();
    victim.query_drop("SELECT 1").await.unwrap();
    let pools = named_rows(&mut admin, "SHOW SHOAL POOLS").await;
    assert_eq!(pools.len(), 1, "{pools:?}");
    let p = &pools[0];
    let n = |k: &str| p[k].parse::<u64>().unwrap();
    assert_eq!(p["address"], format!("{}:{}", backend.host, backend.port));
    assert!(n("busy") >= 1, "{p:?}");
    assert_eq!(n("max"), 4);
    assert!(n("opened") >= n("busy") + n("idle"), "{p:?}");
    let rows = named_rows(&mut admin, "SHOW SHOAL SESSIONS").await;
    let held = rows
        .iter()
        .find(|r| r["id"] == victim_id.to_string())
        .unwrap();
    assert_eq!(held["state"], "in transaction", "{held:?}");
    victim.query_drop("ROLLBACK").await.unwrap();
    let backends = text_rows(&mut admin, "SHOW SHOAL BACKENDS").await;
    assert_eq!(backends.len(), 1, "{backends:?}");
    let xa = text_rows(&mut admin, "SHOW SHOAL XA").await;
    assert_eq!(xa.len(), 1, "{xa:?}");

    // Admin KILL QUERY stops another session's sleep.
    let mut direct = backend.conn(None).await;
    let sleep = format!("SELECT SLEEP(60) AS {db}_k");
    shoal_tests::assert_kill_query_interrupts(&mut direct, &mut admin, victim, &sleep).await;
}

const USERS: &str = "  - { name: app, password: app-secret, schemas: [shop] }\n  \
                     - { name: boss, password: boss-secret, schemas: [shop], admin: true }\n";

#[tokio::test]
async fn sharded_admin_statements_and_kill() {
    let (cluster, shoal) =
        two_servers_and_shoal(&["a", "b"], USERS, &demo_layout_yaml(1), "admin").await;
    let app = || Conn::new(shoal.opts_as("app", "app-secret", Some("shop")));
    let mut c = app().await.unwrap();
    assert_refused_to(&mut c).await;

    let mut admin = Conn::new(shoal.opts_as("boss", "boss-secret", Some("shop")))
        .await
        .unwrap();
    let v = version(&mut admin).await;
    assert!(
        v[4].as_deref().is_some_and(|p| p.ends_with(".yaml")),
        "config file {v:?}"
    );
    assert_admin_edges(&mut admin).await;

    // SESSIONS: app's session with its logical schema and its running statement.
    let victim = app().await.unwrap();
    let victim_id = victim.id();
    let (row, sleeper) = running_row(&mut admin, victim, "SELECT SLEEP(4)").await;
    assert_eq!(row["user"], "app", "{row:?}");
    assert_eq!(row["schema"], "shop", "{row:?}");
    assert_eq!(row["info"], "SELECT SLEEP(4)", "{row:?}");
    assert!(row["backends"].contains("thread"), "{row:?}");
    let mut victim = within(Duration::from_secs(30), "the sleep", sleeper)
        .await
        .unwrap();

    // POOLS: one row per server; a transaction writing a global table holds a connection on
    // each of them.
    victim
        .query_drop("CREATE TABLE country (code CHAR(2) PRIMARY KEY, name VARCHAR(20))")
        .await
        .unwrap();
    victim.query_drop("BEGIN").await.unwrap();
    victim
        .query_drop("INSERT INTO country VALUES ('pt', 'Portugal')")
        .await
        .unwrap();
    let pools = named_rows(&mut admin, "SHOW SHOAL POOLS").await;
    assert_eq!(pools.len(), 2, "{pools:?}");
    let servers: Vec<String> = cluster
        .primaries()
        .iter()
        .map(|p| format!("{}:{}", p.host, p.port))
        .collect();
    for (p, (dh, addr)) in pools
        .iter()
        .zip([("dh0", &servers[0]), ("dh1", &servers[1])])
    {
        let n = |k: &str| p[k].parse::<u64>().unwrap();
        assert_eq!((p["datahost"].as_str(), &p["address"]), (dh, addr), "{p:?}");
        assert_eq!(p["role"], "primary");
        assert_eq!(p["health"], "up");
        assert!(n("busy") >= 1, "{p:?}");
        assert!(n("opened") >= n("busy") + n("idle"), "{p:?}");
    }
    let rows = named_rows(&mut admin, "SHOW SHOAL SESSIONS").await;
    let held = rows
        .iter()
        .find(|r| r["id"] == victim_id.to_string())
        .unwrap();
    assert_eq!(held["state"], "in transaction", "{held:?}");
    victim.query_drop("ROLLBACK").await.unwrap();
    let backends = text_rows(&mut admin, "SHOW SHOAL BACKENDS").await;
    assert_eq!(backends.len(), 2, "{backends:?}");

    // KILL: another user's session is refused to app (1095), done for the admin.
    let mut other = app().await.unwrap();
    let admin_id = admin.id();
    let (code, _, msg) = server_error(other.query_drop(format!("KILL QUERY {admin_id}")).await);
    assert_eq!(code, 1095, "{msg}");
    let mut direct = Conn::new(cluster.opts(0, None)).await.unwrap();
    shoal_tests::assert_kill_query_interrupts(&mut direct, &mut admin, victim, "SELECT SLEEP(60)")
        .await;
    let target = other.id();
    admin
        .query_drop(format!("KILL CONNECTION {target}"))
        .await
        .unwrap();
    // As in MySQL, a killed session that waits for a command ends at once, not at its next one.
    within(
        Duration::from_secs(10),
        "the killed idle session to end",
        async {
            loop {
                let rows = named_rows(&mut admin, "SHOW SHOAL SESSIONS").await;
                if rows.iter().all(|r| r["id"] != target.to_string()) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        },
    )
    .await;
    let gone = within(
        Duration::from_secs(10),
        "a query of the killed session",
        other.query_drop("SELECT 1"),
    )
    .await;
    assert!(gone.is_err(), "the killed session still answers");
    let rows = named_rows(&mut admin, "SHOW SHOAL SESSIONS").await;
    assert!(
        rows.iter().all(|r| r["id"] != target.to_string()),
        "the killed session is still listed: {rows:?}"
    );
}
