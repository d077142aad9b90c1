//! Observability end to end: Shoal's `/metrics` scraped by a real Prometheus while a load runs
//! over two datanode servers, query digests (`SHOW SHOAL QUERIES`, `RESET SHOAL QUERIES`), the
//! slow log file, and `/health` / `/ready` with the backend up and killed.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_tests::shoal::free_port;
use shoal_tests::{
    ShoalProcess, http_get, metric_value, private_cluster, scratch_dir, text_rows, unique_name,
};

const PROMETHEUS: &str = "/usr/bin/prometheus";

/// A Prometheus server scraping `target` every second; killed when dropped.
struct Prometheus {
    child: Child,
    addr: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(target: &str) -> Option<Prometheus> {
        if !std::path::Path::new(PROMETHEUS).exists() {
            assert!(
                std::env::var_os("SHOAL_REQUIRE_PROMETHEUS").is_none(),
                "{PROMETHEUS} is missing and SHOAL_REQUIRE_PROMETHEUS is set (apt-get install prometheus)"
            );
            eprintln!("SKIPPED: {PROMETHEUS} is not installed (apt-get install prometheus)");
            return None;
        }
        let dir = scratch_dir().join(unique_name("prometheus"));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: shoal\n    static_configs:\n      - targets: [\"{target}\"]\n"
            ),
        )
        .unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        Some(Prometheus { child, addr })
    }

    /// `/api/v1/query` of `query`: HTTP status and body.
    async fn raw_query(&self, query: &str) -> (u16, String) {
        let q: String = query
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        http_get(&self.addr, &format!("/api/v1/query?query={q}")).await
    }

    /// The value of the PromQL `query` (an instant vector of one series, or a scalar-like
    /// sum), `None` while it has no result.
    async fn query(&self, query: &str) -> Option<f64> {
        let (status, body) = self.raw_query(query).await;
        if status != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let r = v["data"]["result"].as_array()?.first()?.clone();
        r["value"][1].as_str()?.parse().ok()
    }

    /// Waits (up to a minute: Prometheus scrapes every second) until `query` reads `want`.
    async fn wait_for(&self, query: &str, want: f64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = None;
        while Instant::now() < deadline {
            last = self.query(query).await;
            if last == Some(want) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("prometheus: {query} = {last:?}, want {want}");
    }
}

fn layout(admin: &str, slow_log: &std::path::Path) -> String {
    let mut l = shoal_tests::warehouse_layout("", &[("stock", "s_w_id")], &["item"]);
    l.push_str(&format!(
        "server:\n  admin_listen: \"{admin}\"\n  slow_log: {{ threshold: 100ms, file: \"{}\" }}\n",
        slow_log.display()
    ));
    l
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_statements_by_route_and_backend_latency() {
    let admin = format!("127.0.0.1:{}", free_port());
    let slow = scratch_dir().join(format!("{}.log", unique_name("slow")));
    let (_cluster, shoal) = shoal_tests::two_servers_and_shoal(
        &["a", "b"],
        "  - { name: app, password: app-secret, schemas: [shop], admin: true }\n",
        &layout(&admin, &slow),
        "observe",
    )
    .await;
    let Some(prom) = Prometheus::start(&admin) else {
        return;
    };
    let mut c = Conn::new(shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\n{}", shoal.log()));
    for sql in [
        "CREATE TABLE stock (s_w_id INT, s_i_id INT, s_qty INT, PRIMARY KEY (s_w_id, s_i_id))",
        "CREATE TABLE item (i_id INT PRIMARY KEY, i_name VARCHAR(20))",
        "INSERT INTO stock (s_w_id, s_i_id, s_qty) VALUES (1, 1, 10), (2, 1, 20), (3, 1, 30), (4, 1, 40)",
    ] {
        c.query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", shoal.log()));
    }
    let (status, before) = http_get(&admin, "/metrics").await;
    assert_eq!(status, 200, "{before}");
    let base = |kind: &str, route: &str| {
        metric_value(
            &before,
            "shoal_statements_total",
            &[("kind", kind), ("route", route)],
        )
    };
    let (single0, scatter0, broadcast0) = (
        base("select", "single"),
        base("select", "scatter"),
        base("insert", "broadcast"),
    );
    // The load: single-datanode reads (by shard key), scatter reads, global writes.
    const SINGLE: usize = 23;
    const SCATTER: usize = 11;
    const BROADCAST: usize = 7;
    for i in 0..SINGLE {
        let sql = format!("SELECT s_qty FROM stock WHERE s_w_id = {}", i % 4 + 1);
        c.query_drop(&sql).await.unwrap();
    }
    for _ in 0..SCATTER {
        c.query_drop("SELECT COUNT(*) FROM stock").await.unwrap();
    }
    for i in 0..BROADCAST {
        let sql = format!("INSERT INTO item (i_id, i_name) VALUES ({i}, 'item {i}')");
        c.query_drop(&sql).await.unwrap();
    }
    prom.wait_for(
        r#"shoal_statements_total{kind="select",route="single"}"#,
        single0 + SINGLE as f64,
    )
    .await;
    prom.wait_for(
        r#"shoal_statements_total{kind="select",route="scatter"}"#,
        scatter0 + SCATTER as f64,
    )
    .await;
    prom.wait_for(
        r#"shoal_statements_total{kind="insert",route="broadcast"}"#,
        broadcast0 + BROADCAST as f64,
    )
    .await;
    // Every datanode answered backend round trips (the scatter reads touch all four), and
    // they took time.
    for dn in ["dn1", "dn2", "dn3", "dn4"] {
        let n = prom
            .query(&format!(
                r#"sum(shoal_backend_duration_seconds_count{{datanode="{dn}"}})"#
            ))
            .await
            .unwrap_or(0.0);
        assert!(n >= SCATTER as f64, "{dn}: {n} round trips");
        let t = prom
            .query(&format!(
                r#"sum(shoal_backend_duration_seconds_sum{{datanode="{dn}"}})"#
            ))
            .await
            .unwrap_or(0.0);
        assert!(t > 0.0, "{dn}: backend latency sum {t}");
    }
    // Pools and health come from the live objects.
    let up = prom.query("sum(shoal_backend_up)").await;
    assert_eq!(up, Some(2.0), "both primaries up");
    // Every query of the Grafana dashboard is PromQL this Prometheus accepts.
    let dashboard = shoal_tests::shoal::workspace_root().join("docs/grafana/shoal-dashboard.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&dashboard).unwrap()).unwrap();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m");
            let (status, body) = prom.raw_query(&expr).await;
            assert_eq!(status, 200, "{expr}: {body}");
        }
    }

    // Digests over the routed path: the single reads are one shape.
    let rows = text_rows(&mut c, "SHOW SHOAL QUERIES").await;
    let single = rows
        .iter()
        .find(|r| r[11].as_deref() == Some("SELECT s_qty FROM stock WHERE s_w_id = ?i"))
        .unwrap_or_else(|| panic!("no digest for the single reads: {rows:?}"));
    assert_eq!(single[3].as_deref(), Some(SINGLE.to_string().as_str()));
    assert_eq!(single[1].as_deref(), Some("shop"));
    assert_eq!(single[2].as_deref(), Some("app"));
    assert_eq!(
        single[6].as_deref(),
        Some(SINGLE.to_string().as_str()),
        "rows: {single:?}"
    );
    let scatter = rows
        .iter()
        .find(|r| r[11].as_deref() == Some("SELECT COUNT ( * ) FROM stock"))
        .unwrap_or_else(|| panic!("no digest for the scatter reads: {rows:?}"));
    assert_eq!(scatter[3].as_deref(), Some(SCATTER.to_string().as_str()));
    // One merged row each, from all four datanodes.
    assert_eq!(scatter[6].as_deref(), Some(SCATTER.to_string().as_str()));
    assert_eq!(
        scatter[8].as_deref(),
        Some("dn1,dn2,dn3,dn4"),
        "{scatter:?}"
    );
    c.query_drop("RESET SHOAL QUERIES").await.unwrap();
    let rows = text_rows(&mut c, "SHOW SHOAL QUERIES").await;
    assert!(
        rows.iter()
            .all(|r| r[11].as_deref() != Some("SELECT COUNT ( * ) FROM stock")),
        "after RESET: {rows:?}"
    );

    // The slow log: a slow statement, not a fast one.
    c.query_drop("SELECT SLEEP(0.2)").await.unwrap();
    c.query_drop("SELECT 1").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let log = loop {
        let log = std::fs::read_to_string(&slow).unwrap_or_default();
        if log.contains("SLEEP(0.2)") || Instant::now() > deadline {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(log.contains("sql=SELECT SLEEP(0.2)"), "slow log: {log:?}");
    assert!(log.contains("user=app schema=shop"), "slow log: {log:?}");
    assert!(
        !log.contains("sql=SELECT 1\n"),
        "fast statement logged: {log:?}"
    );
    assert_eq!(log.lines().count(), 1, "slow log: {log:?}");

    // logrotate: the file is moved away and Shoal gets SIGHUP; the next slow statement goes
    // to a new file of the same name, and the moved one keeps what it had.
    let rotated = slow.with_extension("log.1");
    std::fs::rename(&slow, &rotated).unwrap();
    shoal.signal(libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !shoal.log().contains("SIGHUP: reopening the slow log") {
        assert!(
            Instant::now() < deadline,
            "no SIGHUP handled:\n{}",
            shoal.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.query_drop("SELECT SLEEP(0.2)").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let fresh = loop {
        let log = std::fs::read_to_string(&slow).unwrap_or_default();
        if log.contains("SLEEP(0.2)") || Instant::now() > deadline {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(fresh.lines().count(), 1, "reopened slow log: {fresh:?}");
    assert!(fresh.contains("sql=SELECT SLEEP(0.2)"), "{fresh:?}");
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert_eq!(old, log, "the rotated file changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digests_count_shapes_and_reset_forgets_them_in_quick_mode() {
    let backend = shoal_tests::shared_backend();
    let db = unique_name("digests");
    backend.fresh_db(&db).await;
    // Digests are kept while the admin listener is on.
    let admin = format!("127.0.0.1:{}", free_port());
    let shoal = ShoalProcess::quick(&backend, &db, &["--admin", "--admin-listen", &admin]);
    let mut c = shoal.conn(&backend, Some(&db)).await;
    c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    const N: usize = 9;
    for i in 0..N {
        c.query_drop(format!("INSERT INTO t VALUES ({i}, {})", i * 10))
            .await
            .unwrap();
    }
    let find = |rows: &[Vec<Option<String>>]| {
        rows.iter()
            .find(|r| r[11].as_deref() == Some("INSERT INTO t VALUES ( ?i , ?i )"))
            .cloned()
    };
    let rows = text_rows(&mut c, "SHOW SHOAL QUERIES").await;
    let row = find(&rows).unwrap_or_else(|| panic!("no digest: {rows:?}"));
    assert_eq!(row[3].as_deref(), Some(N.to_string().as_str()), "{row:?}");
    assert_eq!(row[7].as_deref(), Some("0"), "errors: {row:?}");
    assert_eq!(row[8].as_deref(), Some("backend"), "{row:?}");
    // An error counts against its digest.
    assert!(c.query_drop("INSERT INTO t VALUES (1, 1)").await.is_err());
    let rows = text_rows(&mut c, "SHOW SHOAL QUERIES").await;
    let row = find(&rows).unwrap();
    assert_eq!(row[3].as_deref(), Some((N + 1).to_string().as_str()));
    assert_eq!(row[7].as_deref(), Some("1"), "errors: {row:?}");
    c.query_drop("RESET SHOAL QUERIES").await.unwrap();
    let rows = text_rows(&mut c, "SHOW SHOAL QUERIES").await;
    assert!(find(&rows).is_none(), "after RESET: {rows:?}");
    assert!(rows.len() <= 1, "only RESET itself may be left: {rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_metrics_serves_the_live_state_only() {
    let backend = shoal_tests::shared_backend();
    let db = unique_name("nometrics");
    backend.fresh_db(&db).await;
    let admin = format!("127.0.0.1:{}", free_port());
    let shoal = ShoalProcess::quick(
        &backend,
        &db,
        &["--admin", "--admin-listen", &admin, "--no-metrics"],
    );
    let mut c = shoal.conn(&backend, Some(&db)).await;
    c.query_drop("SELECT 1").await.unwrap();
    let (status, metrics) = http_get(&admin, "/metrics").await;
    assert_eq!(status, 200);
    assert!(!metrics.contains("shoal_statements_total"), "{metrics}");
    assert!(
        metric_value(&metrics, "shoal_pool_connections", &[("state", "busy")]) >= 1.0,
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_admin_listener_digests_are_off() {
    let backend = shoal_tests::shared_backend();
    let db = unique_name("nodigests");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &["--admin"]);
    let mut c = shoal.conn(&backend, Some(&db)).await;
    c.query_drop("SELECT 1").await.unwrap();
    let (code, _, msg) = shoal_tests::server_error(c.query_drop("SHOW SHOAL QUERIES").await);
    assert_eq!(code, 1289, "{msg}");
    // The relay path still serves.
    assert_eq!(
        text_rows(&mut c, "SELECT 2").await,
        vec![vec![Some("2".into())]]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_ready_follow_the_backend() {
    let (mut cluster, backend) = private_cluster();
    let db = unique_name("ready");
    backend.fresh_db(&db).await;
    let admin = format!("127.0.0.1:{}", free_port());
    let shoal = ShoalProcess::quick(&backend, &db, &["--admin", "--admin-listen", &admin]);
    let mut c = shoal.conn(&backend, Some(&db)).await;
    c.query_drop("SELECT 1").await.unwrap();
    assert_eq!(http_get(&admin, "/health").await.0, 200);
    let (status, body) = http_get(&admin, "/ready").await;
    assert_eq!(status, 200, "{body}");
    let (status, metrics) = http_get(&admin, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metric_value(&metrics, "shoal_statements_total", &[("route", "relay")]) >= 1.0,
        "{metrics}"
    );
    assert_eq!(metric_value(&metrics, "shoal_client_connections", &[]), 1.0);
    assert_eq!(http_get(&admin, "/nothing").await.0, 404);
    drop(c);
    cluster.kill(0);
    let (status, body) = http_get(&admin, "/ready").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("unreachable"), "{body}");
    assert_eq!(http_get(&admin, "/health").await.0, 200);
}
