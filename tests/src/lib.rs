//! End-to-end test support shared by the files under `tests/tests/`: real MariaDB backends from
//! the launcher ([`backend`]), the real `shoal` binary as a child process ([`shoal`]), and a
//! hand-written wire client for what `mysql_async` cannot send ([`raw`]).
//!
//! Run them with `cargo test -p shoal-tests` (add `--no-fail-fast` to see every failing file).
//! Each test binary shares one MariaDB primary among its tests (stopped when the binary exits;
//! the launcher also has the kernel kill it if the binary dies); each test starts its own Shoal
//! in quick mode on a free port, with its own database. Knobs:
//! - `SHOAL_BIN=/path/to/shoal`: test that binary instead of building `target/debug/shoal`;
//! - `SHOAL_TEST_LOG=debug` (default `info`): Shoal's log filter; its log is printed when a test
//!   fails and kept under `$TMPDIR/shoal-e2e-<pid>/` when any test of the binary failed (or with
//!   `SHOAL_E2E_KEEP_LOGS=1`);
//! - `SHOAL_E2E_SYSBENCH_SECS=60`: length of each sysbench run in `proxy_sysbench` (default 10).

pub mod backend;
pub mod compared;
pub mod differential;
pub mod faults;
pub mod orders;
pub mod raw;
pub mod shoal;
pub mod sysbench;

use std::future::Future;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use backend::{Backend, private_cluster, shared_backend};
pub use shoal::ShoalProcess;

/// A directory for this test binary's scratch files (Shoal logs, configs). Removed when the
/// binary exits if no test panicked; kept for post-mortems otherwise (or with
/// `SHOAL_E2E_KEEP_LOGS=1`).
pub fn scratch_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("shoal-e2e-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            SOME_TEST_PANICKED.store(true, Ordering::Relaxed);
            previous(info);
        }));
        // SAFETY: registers a plain extern "C" fn with no captured state.
        unsafe {
            libc::atexit(remove_scratch_dir);
        }
        dir
    })
    .clone()
}

static SOME_TEST_PANICKED: AtomicBool = AtomicBool::new(false);

extern "C" fn remove_scratch_dir() {
    if !SOME_TEST_PANICKED.load(Ordering::Relaxed)
        && std::env::var_os("SHOAL_E2E_KEEP_LOGS").is_none()
    {
        let dir = std::env::temp_dir().join(format!("shoal-e2e-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The `(code, SQLSTATE, message)` of a server error, or a panic naming what came instead.
pub fn server_error<T: std::fmt::Debug>(
    result: Result<T, mysql_async::Error>,
) -> (u16, String, String) {
    match result {
        Err(mysql_async::Error::Server(e)) => (e.code, e.state, e.message),
        Err(other) => panic!("expected a server error, got another error: {other:?}"),
        Ok(value) => panic!("expected a server error, got success: {value:?}"),
    }
}

/// Awaits `fut`, failing the test if it takes longer than `limit` (a hang is a bug, never a wait).
pub async fn within<F: Future>(limit: Duration, what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(limit, fut).await {
        Ok(out) => out,
        Err(_) => panic!("{what}: no answer within {limit:?} (hang)"),
    }
}

/// Runs `sleep_sql` (a `SELECT SLEEP(60)` with a text of its own on the server `direct` is
/// connected to) on `victim`, waits until that server's processlist shows it, sends
/// `KILL QUERY <victim's handshake id>` from `killer`, and checks the sleep was interrupted
/// (MariaDB's SLEEP returns 1, or the statement fails with 1317) and `victim` answers after.
pub async fn assert_kill_query_interrupts(
    direct: &mut mysql_async::Conn,
    killer: &mut mysql_async::Conn,
    mut victim: mysql_async::Conn,
    sleep_sql: &str,
) {
    use mysql_async::prelude::Queryable;
    let id = victim.id();
    let sql = sleep_sql.to_string();
    let sleeper = tokio::spawn(async move {
        let r: Result<Option<i64>, _> = victim.query_first(sql).await;
        (victim, r)
    });
    let mut running = false;
    for _ in 0..100 {
        let n: Option<i64> = direct
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?",
                (sleep_sql,),
            )
            .await
            .unwrap();
        if n == Some(1) {
            running = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(running, "the sleep never reached the backend");
    killer.query_drop(format!("KILL QUERY {id}")).await.unwrap();
    let (mut victim, r) = within(Duration::from_secs(30), "the killed query", sleeper)
        .await
        .unwrap();
    match r {
        Ok(v) => assert_eq!(v, Some(1), "SLEEP was not interrupted"),
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1317, "{e:?}"),
        Err(e) => panic!("{e}"),
    }
    let one: Option<i64> = victim.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1), "the killed session goes on");
}

/// A unique name for a database or table, so that tests sharing a backend never collide.
pub fn unique_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The user most configs give: `app` (password `app-secret`), limited to `shop`.
pub const APP_USER: &str = "  - { name: app, password: app-secret, schemas: [shop] }\n";

/// A config file in the scratch directory (named from `tag`): `users` (YAML list items), a
/// datahost `dh<k>` for each primary of `cluster` with the cluster's account, then `layout`
/// (`datanodes:` onward, usually [`demo_layout_yaml`]).
pub fn cluster_config(
    cluster: &shoal_bench::cluster::Cluster,
    users: &str,
    layout: &str,
    tag: &str,
) -> PathBuf {
    let (u, pw) = (cluster.user(), cluster.password());
    let mut text = format!("users:\n{users}datahosts:\n");
    for (k, p) in cluster.primaries().iter().enumerate() {
        text.push_str(&format!(
            "  - name: dh{k}\n    primary: {{ address: \"{}:{}\", user: {u}, password: {pw} }}\n",
            p.host, p.port
        ));
    }
    text.push_str(layout);
    let path = scratch_dir().join(format!("{}.yaml", unique_name(tag)));
    std::fs::write(&path, text).expect("write config");
    path
}

/// Two primaries holding `databases`, and a Shoal over them configured by [`cluster_config`]
/// (`users`, `layout`, `tag`): the fixture of the end-to-end tests over a sharded layout.
pub async fn two_servers_and_shoal(
    databases: &[&str],
    users: &str,
    layout: &str,
    tag: &str,
) -> (shoal_bench::cluster::Cluster, ShoalProcess) {
    let cluster = shoal_bench::cluster::Cluster::start(shoal_bench::cluster::ClusterSpec {
        primaries: 2,
        databases: databases.iter().map(|d| d.to_string()).collect(),
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"));
    let path = cluster_config(&cluster, users, layout, tag);
    let shoal = ShoalProcess::start(&["--config".to_string(), path.display().to_string()]);
    (cluster, shoal)
}

/// The head of a config file over the shared backend: user `app` (password `app-secret`)
/// allowed `schema`, and datahost `dh1` on the backend; datanodes and schemas follow.
pub fn app_on_shared_backend(backend: &Backend, schema: &str) -> String {
    format!(
        "users:
  - {{ name: app, password: app-secret, schemas: [{schema}] }}
datahosts:
  - name: dh1
    primary: {{ address: {h}:{port}, user: {u}, password: {pw} }}
",
        h = backend.host,
        port = backend.port,
        u = backend.user,
        pw = backend.password,
    )
}

/// Shoal over the shared backend's databases `<p>_1`, `<p>_2` (datanodes dn1, dn2) and
/// `<p>_m` (dnm, the default for unlisted tables), created afresh: logical schema `<p>` for
/// user `app` (password `app-secret`), rule `by_id` (`mod`), and `tables` (YAML list items,
/// indented as a schema's tables). Returns the schema's name and the proxy.
pub async fn shared_backend_layout(
    backend: &Backend,
    prefix: &str,
    tables: &str,
) -> (String, ShoalProcess) {
    shared_backend_layout_with(backend, prefix, tables, SharedLayout::default()).await
}

/// What [`shared_backend_layout_with`] sets beyond the tables.
#[derive(Debug, Default, Clone, Copy)]
pub struct SharedLayout<'a> {
    /// The datahost's `pool` settings, a YAML flow map (`{ max: 3, acquire_timeout: 60s }`).
    pub pool: Option<&'a str>,
    /// More arguments for Shoal (`--admin-listen ADDR`, ...).
    pub args: &'a [String],
}

/// [`shared_backend_layout`] with the datahost's pool settings and Shoal's arguments of
/// `with`.
pub async fn shared_backend_layout_with(
    backend: &Backend,
    prefix: &str,
    tables: &str,
    with: SharedLayout<'_>,
) -> (String, ShoalProcess) {
    let p = unique_name(prefix);
    for db in [format!("{p}_1"), format!("{p}_2"), format!("{p}_m")] {
        backend.fresh_db(&db).await;
    }
    let mut head = app_on_shared_backend(backend, &p);
    if let Some(pool) = with.pool {
        // The datahost `dh1` is the head's last entry: its keys follow its `primary`.
        head.push_str(&format!("    pool: {pool}\n"));
    }
    let path = scratch_dir().join(format!("{p}.yaml"));
    std::fs::write(
        &path,
        format!(
            "{head}datanodes:
  - {{ name: dn1, datahost: dh1, database: {p}_1 }}
  - {{ name: dn2, datahost: dh1, database: {p}_2 }}
  - {{ name: dnm, datahost: dh1, database: {p}_m }}
rules:
  - {{ name: by_id, algorithm: mod }}
schemas:
  - name: {p}
    default_datanode: dnm
    tables:
{tables}"
        ),
    )
    .expect("write config");
    let mut args = vec!["--config".to_string(), path.display().to_string()];
    args.extend_from_slice(with.args);
    let shoal = ShoalProcess::start(&args);
    (p, shoal)
}

/// A layout over dn1..dn4 (databases `a`, `b` of datahosts `dh0`, `dh1`) with schema `shop`
/// (its extra keys `schema_keys`, indented as a schema's) holding TPC-C-like tables: each
/// `(name, shard key)` sharded by one `mod` rule `by_warehouse`, each of `globals` global.
pub fn warehouse_layout(schema_keys: &str, tables: &[(&str, &str)], globals: &[&str]) -> String {
    let all = "datanodes: \"dn1, dn2, dn3, dn4\"";
    let mut out = String::from(
        "datanodes:\n  - { name: dn1, datahost: dh0, database: a }\n  \
         - { name: dn2, datahost: dh0, database: b }\n  \
         - { name: dn3, datahost: dh1, database: a }\n  \
         - { name: dn4, datahost: dh1, database: b }\n\
         rules:\n  - { name: by_warehouse, algorithm: mod }\n\
         schemas:\n  - name: shop\n    default_datanode: dn1\n",
    );
    out.push_str(schema_keys);
    out.push_str("    tables:\n");
    for (name, key) in tables {
        out.push_str(&format!(
            "      - {{ name: {name}, type: sharded, shard_key: {key}, rule: by_warehouse, {all} }}\n"
        ));
    }
    for name in globals {
        out.push_str(&format!(
            "      - {{ name: {name}, type: global, {all} }}\n"
        ));
    }
    out
}

/// Every row of `sql`'s result, each column as text (`None` for NULL); panics on an error.
pub async fn text_rows(c: &mut mysql_async::Conn, sql: &str) -> Vec<Vec<Option<String>>> {
    use mysql_async::prelude::Queryable;
    let rows: Vec<mysql_async::Row> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| r.get::<Option<String>, _>(i).flatten())
                .collect()
        })
        .collect()
}

/// The demo's layout (`conf/demo.yaml.in`) as config text: datanodes `dn{first}`..`dn{first+3}`
/// over databases `a` and `b` of datahosts `dh0` and `dh1`, and schema `shop` with `orders`
/// sharded by `user_id` (mod), its ER child `order_item`, the global `country` and `ledger` as
/// two tables per datanode by quarter. The caller writes `users` and `datahosts` before it and
/// may append more schemas.
pub fn demo_layout_yaml(first: usize) -> String {
    let dn: Vec<String> = (first..first + 4).map(|k| format!("dn{k}")).collect();
    let all = dn.join(", ");
    format!(
        "datanodes:\n  - {{ name: {}, datahost: dh0, database: a }}\n  \
         - {{ name: {}, datahost: dh0, database: b }}\n  \
         - {{ name: {}, datahost: dh1, database: a }}\n  \
         - {{ name: {}, datahost: dh1, database: b }}\n\
         rules:\n  - {{ name: by_user, algorithm: mod }}\n  \
         - {{ name: by_quarter, algorithm: date, start: 2024-01-01, unit: month, interval: 3, default: 0 }}\n\
         schemas:\n  - name: shop\n    default_datanode: {}\n    tables:\n      \
         - {{ name: orders, type: sharded, shard_key: user_id, rule: by_user, datanodes: \"{all}\" }}\n      \
         - {{ name: order_item, type: child, parent: orders, join_key: user_id }}\n      \
         - {{ name: country, type: global, datanodes: \"{all}\" }}\n      \
         - {{ name: ledger, type: sharded, shard_key: day, rule: by_quarter, datanodes: \"{all}\", \
         tables_per_datanode: 2, physical_name: \"ledger_{{index:02}}\" }}\n",
        dn[0], dn[1], dn[2], dn[3], dn[0]
    )
}

/// The value of the series of `metric` whose labels include all of `labels` in `/metrics`
/// text, summed over the series that match (0 when absent).
pub fn metric_value(text: &str, metric: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(metric) && l[metric.len()..].starts_with(['{', ' ']))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

/// `GET path` on `addr` (HTTP/1.0, the connection closed by the server): status and body.
pub async fn http_get(addr: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(10), s.read_to_end(&mut buf))
        .await
        .unwrap_or_else(|_| panic!("GET {addr}{path}: no answer"))
        .unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("GET {path}: not HTTP: {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

/// A row's columns by name, as text (`None` for NULL).
pub fn named_values(row: &mysql_async::Row) -> Vec<(String, Option<String>)> {
    row.columns_ref()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            (
                c.name_str().into_owned(),
                row.get::<Option<String>, _>(i).flatten(),
            )
        })
        .collect()
}
