//! Smoke tests of quick mode against a real MariaDB started by the launcher, with mysql_async
//! as the client. (The main end-to-end suite lives in `tests/`.)

use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder};
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_proxy::config::{BackendSpec, ProxyConfig};
use shoal_proxy::server::Proxy;

struct Setup {
    cluster: Cluster,
    port: u16,
    _stop: tokio::sync::watch::Sender<bool>,
}

async fn setup(tune: impl FnOnce(&mut ProxyConfig)) -> Setup {
    if let Ok(filter) = std::env::var("SHOAL_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
    let cluster = Cluster::start(ClusterSpec {
        databases: vec!["app".into()],
        ..Default::default()
    })
    .await
    .expect("cluster");
    let mut admin = Conn::new(cluster.admin_opts(0)).await.unwrap();
    admin
        .query_drop("SET GLOBAL max_allowed_packet = 67108864")
        .await
        .unwrap();
    admin.disconnect().await.unwrap();
    let inst = cluster.primary(0);
    let backend = BackendSpec {
        host: inst.host.clone(),
        port: inst.port,
        user: cluster.user().to_string(),
        password: cluster.password().to_string(),
        database: Some("app".into()),
        tls: Default::default(),
    };
    let mut config = ProxyConfig::quick("127.0.0.1:0".into(), backend);
    tune(&mut config);
    let proxy = Proxy::bind(config).await.expect("bind");
    let port = proxy.local_addr().unwrap().port();
    let stop = proxy.shutdown_handle();
    tokio::spawn(proxy.run());
    Setup {
        cluster,
        port,
        _stop: stop,
    }
}

impl Setup {
    fn opts(&self, user: &str, pass: &str, db: Option<&str>) -> Opts {
        OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .user(Some(user))
            .pass(Some(pass))
            .db_name(db)
            .prefer_socket(false)
            .into()
    }

    async fn connect(&self) -> Conn {
        Conn::new(self.opts(self.cluster.user(), self.cluster.password(), Some("app")))
            .await
            .expect("connect through shoal")
    }
}

fn server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_checks_password_user_and_schema() {
    let s = setup(|_| {}).await;
    let user = s.cluster.user().to_string();
    let err = Conn::new(s.opts(&user, "wrong", None)).await.unwrap_err();
    assert_eq!(server_code(&err), Some(1045), "{err}");
    let err = Conn::new(s.opts("nobody", s.cluster.password(), None))
        .await
        .unwrap_err();
    assert_eq!(server_code(&err), Some(1045), "{err}");
    let err = Conn::new(s.opts(&user, s.cluster.password(), Some("no_such_db")))
        .await
        .unwrap_err();
    assert_eq!(server_code(&err), Some(1049), "{err}");
    let mut c = s.connect().await;
    let db: Option<String> = c.query_first("SELECT DATABASE()").await.unwrap().unwrap();
    assert_eq!(db.as_deref(), Some("app"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_errors_and_multi_statements_pass_through() {
    let s = setup(|_| {}).await;
    let mut c = s.connect().await;
    c.query_drop("CREATE TABLE t (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(20))")
        .await
        .unwrap();
    c.query_drop("INSERT INTO t (v) VALUES ('a'), ('b'), ('😀')")
        .await
        .unwrap();
    assert_eq!(c.affected_rows(), 3);
    assert_eq!(c.last_insert_id(), Some(1));
    let err = c
        .query_drop("INSERT INTO t VALUES (1, 'dup')")
        .await
        .unwrap_err();
    match &err {
        mysql_async::Error::Server(e) => {
            assert_eq!(e.code, 1062);
            assert_eq!(e.state, "23000");
        }
        other => panic!("expected a server error, got {other}"),
    }
    let mut r = c
        .query_iter("SELECT COUNT(*) FROM t; SELECT v FROM t ORDER BY id; UPDATE t SET v = v")
        .await
        .unwrap();
    let first: Vec<i64> = r.collect().await.unwrap();
    let second: Vec<String> = r.collect().await.unwrap();
    drop(r);
    assert_eq!(first, vec![3]);
    assert_eq!(second, vec!["a", "b", "😀"]);
    // The session goes on after all of that.
    let one: i32 = c.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_and_a_20mib_blob() {
    let s = setup(|_| {}).await;
    let mut c = s.connect().await;
    c.query_drop("CREATE TABLE b (id INT PRIMARY KEY, data LONGBLOB)")
        .await
        .unwrap();
    let blob: Vec<u8> = (0..20 * 1024 * 1024).map(|i| (i % 253) as u8).collect();
    let ins = c.prep("INSERT INTO b VALUES (?, ?)").await.unwrap();
    c.exec_drop(&ins, (1, blob.clone())).await.unwrap();
    let sel = c.prep("SELECT data FROM b WHERE id = ?").await.unwrap();
    let back: Vec<u8> = c.exec_first(&sel, (1,)).await.unwrap().unwrap();
    assert!(back == blob, "binary protocol blob differs");
    let back: Vec<u8> = c
        .query_first("SELECT data FROM b WHERE id = 1")
        .await
        .unwrap()
        .unwrap();
    assert!(back == blob, "text protocol blob differs");
    let add = c.prep("SELECT ? + ?").await.unwrap();
    for i in 0..200i64 {
        let v: i64 = c.exec_first(&add, (i, 1)).await.unwrap().unwrap();
        assert_eq!(v, i + 1);
    }
    for st in [ins, sel, add] {
        c.close(st).await.unwrap();
    }
    let open: Option<(String, u64)> = c
        .query_first("SHOW SESSION STATUS LIKE 'Prepared_stmt_count'")
        .await
        .unwrap();
    let mut admin = Conn::new(s.cluster.admin_opts(0)).await.unwrap();
    let global: (String, u64) = admin
        .query_first("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(global.1, 0, "statements left on the backend ({open:?})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_sharing_one_backend_never_see_each_other() {
    let s = setup(|c| {
        c.pool.max_size = 1;
        c.pool.acquire_timeout = Duration::from_secs(2);
    })
    .await;
    let mut direct = Conn::new(s.cluster.opts(0, Some("app"))).await.unwrap();
    let default_mode: String = direct
        .query_first("SELECT @@sql_mode")
        .await
        .unwrap()
        .unwrap();

    let mut a = s.connect().await;
    a.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES', time_zone = '+03:00'")
        .await
        .unwrap();
    a.query_drop("SET NAMES latin1").await.unwrap();
    a.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE")
        .await
        .unwrap();
    a.query_drop("CREATE DATABASE IF NOT EXISTS other")
        .await
        .unwrap();
    a.query_drop("USE other").await.unwrap();
    let mut b = s.connect().await;
    let (mode, tz): (String, String) = b
        .query_first("SELECT @@sql_mode, @@time_zone")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(mode, default_mode);
    assert_ne!(tz, "+03:00");
    let (mode, tz): (String, String) = a
        .query_first("SELECT @@sql_mode, @@time_zone")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((mode.as_str(), tz.as_str()), ("ANSI_QUOTES", "+03:00"));

    // A transaction pins the only connection: the other session waits, then times out.
    a.query_drop("CREATE TABLE IF NOT EXISTS app.tx (id INT PRIMARY KEY)")
        .await
        .unwrap();
    a.query_drop("BEGIN").await.unwrap();
    a.query_drop("INSERT INTO app.tx VALUES (1)").await.unwrap();
    let err = b.query_drop("SELECT 1").await.unwrap_err();
    assert_eq!(server_code(&err), Some(1040), "{err}");
    a.query_drop("ROLLBACK").await.unwrap();
    let n: i64 = b
        .query_first("SELECT COUNT(*) FROM app.tx")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 0);

    // So does a user variable, until the session resets.
    a.query_drop("SET @mine = 42").await.unwrap();
    let err = b.query_drop("SELECT 1").await.unwrap_err();
    assert_eq!(server_code(&err), Some(1040), "{err}");
    let v: Option<i64> = a.query_first("SELECT @mine").await.unwrap().unwrap();
    assert_eq!(v, Some(42));
    a.reset().await.unwrap();
    let v: Option<i64> = b.query_first("SELECT @mine").await.unwrap().unwrap();
    assert_eq!(v, None);
    drop(b);
    let db: Option<String> = a.query_first("SELECT DATABASE()").await.unwrap().unwrap();
    assert_eq!(
        db.as_deref(),
        Some("other"),
        "a reset keeps the current schema"
    );
    let v: Option<i64> = a.query_first("SELECT @mine").await.unwrap().unwrap();
    assert_eq!(v, None, "a reset drops user variables");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_death_mid_query_is_an_error_not_a_hang() {
    let s = setup(|_| {}).await;
    let mut c = s.connect().await;
    let admin_opts = s.cluster.admin_opts(0);
    // CONNECTION_ID() through Shoal is Shoal's id: find the backend thread by its statement.
    let killer = tokio::spawn(async move {
        let mut admin = Conn::new(admin_opts).await.unwrap();
        let mut thread = None;
        for _ in 0..100 {
            shoal_proxy::timers::sleep(Duration::from_millis(100)).await;
            thread = admin
                .query_first::<u64, _>(
                    "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(15)'",
                )
                .await
                .unwrap();
            if thread.is_some() {
                break;
            }
        }
        let thread = thread.expect("the sleep reached the backend");
        admin.query_drop(format!("KILL {thread}")).await.unwrap();
    });
    let res =
        shoal_proxy::timers::timeout(Duration::from_secs(20), c.query_drop("SELECT SLEEP(15)"))
            .await;
    killer.await.unwrap();
    let err = res.expect("no hang").unwrap_err();
    assert!(
        server_code(&err).is_some(),
        "expected an error packet, got {err}"
    );
    // The session survives on a fresh backend connection.
    let mut tries = 0;
    loop {
        match c.query_first::<i32, _>("SELECT 7").await {
            Ok(v) => {
                assert_eq!(v, Some(7));
                break;
            }
            Err(e) if tries < 1 => {
                assert_eq!(server_code(&e), Some(2013), "{e}");
                tries += 1;
            }
            Err(e) => panic!("session did not recover: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_limit_get_1040() {
    let s = setup(|c| c.max_connections = 2).await;
    let _a = s.connect().await;
    let _b = s.connect().await;
    let err = Conn::new(s.opts(s.cluster.user(), s.cluster.password(), None))
        .await
        .unwrap_err();
    assert_eq!(server_code(&err), Some(1040), "{err}");
}
