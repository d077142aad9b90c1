//! Reload without restart (issue 26), end to end over real MariaDB replication: the config
//! file is rewritten and Shoal told (SIGHUP, or `RELOAD SHOAL CONFIG` from a client) while
//! sysbench runs through it; where statements go is counted on the backends themselves
//! (`Com_select`). Waits are polls with generous deadlines: no test asserts a timing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_tests::{ShoalProcess, scratch_dir, unique_name};

const DB: &str = "sb";
const TABLES: u32 = 2;
const ROWS: u32 = 2000;

/// One version of the config file: datahost `dh1` on primary 0, `dh2` on primary 1, each with
/// the replicas listed (instance index, weight); `sbtest1..2` sharded by `id` (`mod`) over
/// `dn1` (dh1) and `dn2` (dh2); users `app` and `more`.
struct Version<'a> {
    replicas: [&'a [(usize, u32)]; 2],
    more_users: &'a str,
    /// The rule `by_id`'s algorithm (changing it must be refused).
    algorithm: &'a str,
}

impl Default for Version<'_> {
    fn default() -> Self {
        Version {
            replicas: [&[], &[]],
            more_users: "",
            algorithm: "mod",
        }
    }
}

fn config_text(cluster: &Cluster, v: &Version) -> String {
    let inst = cluster.instances();
    let addr = |i: usize| format!("\"{}:{}\"", inst[i].host, inst[i].port);
    let (u, pw) = (cluster.user(), cluster.password());
    let mut text = format!(
        "users:\n  - {{ name: app, password: app-secret, schemas: [{DB}], admin: true }}\n{}datahosts:\n",
        v.more_users
    );
    for (k, replicas) in v.replicas.iter().enumerate() {
        text.push_str(&format!(
            "  - name: dh{}\n    primary: {{ address: {}, user: {u}, password: {pw} }}\n    \
             pool: {{ max: 40 }}\n    health: {{ heartbeat: 1h }}\n",
            k + 1,
            addr(k)
        ));
        if !replicas.is_empty() {
            text.push_str("    balance: round_robin\n    replicas:\n");
            for (r, w) in replicas.iter() {
                text.push_str(&format!(
                    "      - {{ address: {}, user: {u}, password: {pw}, weight: {w} }}\n",
                    addr(*r)
                ));
            }
        }
    }
    text.push_str(&format!(
        "datanodes:\n  - {{ name: dn1, datahost: dh1, database: {DB} }}\n  \
         - {{ name: dn2, datahost: dh2, database: {DB} }}\n\
         rules:\n  - {{ name: by_id, algorithm: {} }}\n\
         schemas:\n  - name: {DB}\n    default_datanode: dn1\n    tables:\n",
        v.algorithm
    ));
    for t in 1..=TABLES {
        text.push_str(&format!(
            "      - {{ name: sbtest{t}, type: sharded, shard_key: id, rule: by_id, datanodes: \"dn1, dn2\" }}\n"
        ));
    }
    text
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write config");
}

async fn start_cluster(replicas: usize) -> Cluster {
    Cluster::start(ClusterSpec {
        primaries: 2,
        replicas_per_primary: replicas,
        databases: vec![DB.to_string()],
        ..ClusterSpec::default()
    })
    .await
    .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"))
}

/// sysbench's tables on both primaries, each keeping the rows `mod` 2 puts there (replicated).
async fn prepare_tables(cluster: &Cluster) {
    for k in 0..2 {
        let p = cluster.primary(k);
        shoal_tests::sysbench::run(&[
            "oltp_read_only".into(),
            "--db-driver=mysql".into(),
            format!("--mysql-host={}", p.host),
            format!("--mysql-port={}", p.port),
            format!("--mysql-user={}", cluster.user()),
            format!("--mysql-password={}", cluster.password()),
            format!("--mysql-db={DB}"),
            "--mysql-ssl=off".into(),
            format!("--tables={TABLES}"),
            format!("--table-size={ROWS}"),
            "prepare".into(),
        ]);
        let mut c = Conn::new(cluster.opts(k, Some(DB))).await.expect("primary");
        for t in 1..=TABLES {
            c.query_drop(format!("DELETE FROM sbtest{t} WHERE MOD(id, 2) <> {k}"))
                .await
                .expect("keep the shard's rows");
        }
        c.disconnect().await.ok();
    }
    cluster.sync_replicas().await.expect("replicas caught up");
}

async fn client_as(shoal: &ShoalProcess, user: &str, password: &str) -> Conn {
    match Conn::new(shoal.opts_as(user, password, Some(DB))).await {
        Ok(c) => c,
        Err(e) => panic!("connect through shoal as {user}: {e}\n{}", shoal.log()),
    }
}

async fn app(shoal: &ShoalProcess) -> Conn {
    client_as(shoal, "app", "app-secret").await
}

/// `Com_select` of instance `i`.
async fn selects(cluster: &Cluster, i: usize) -> u64 {
    let mut c = Conn::new(cluster.admin_opts(i)).await.expect("admin");
    let row: Option<(String, u64)> = c
        .query_first("SHOW GLOBAL STATUS LIKE 'Com_select'")
        .await
        .expect("Com_select");
    c.disconnect().await.ok();
    row.expect("a Com_select row").1
}

/// `SHOW SHOAL CONFIG` as (key, value).
async fn show_config(c: &mut Conn) -> Vec<(String, String)> {
    c.query("SHOW SHOAL CONFIG")
        .await
        .expect("SHOW SHOAL CONFIG")
}

async fn config_version(c: &mut Conn) -> u64 {
    show_config(c)
        .await
        .into_iter()
        .find(|(k, _)| k == "config.version")
        .expect("config.version row")
        .1
        .parse()
        .expect("a number")
}

/// `SHOW SHOAL BACKENDS` as (address, state).
async fn backends(c: &mut Conn) -> Vec<(String, String)> {
    let rows: Vec<Row> = c
        .query("SHOW SHOAL BACKENDS")
        .await
        .expect("SHOW SHOAL BACKENDS");
    rows.into_iter()
        .map(|r| {
            (
                r.get::<String, _>("address").unwrap(),
                r.get::<String, _>("state").unwrap(),
            )
        })
        .collect()
}

async fn wait_until<F, Fut>(what: &str, shoal: &ShoalProcess, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f().await {
        assert!(
            Instant::now() < deadline,
            "gave up waiting for {what}\n{}",
            shoal.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `n` autocommit point reads of rows of datanode `dn` (0: even ids, 1: odd), each checked.
async fn point_reads(c: &mut Conn, dn: u32, n: u32) {
    for k in 0..n {
        let id = 2 * (k % (ROWS / 2)) + if dn == 0 { 2 } else { 1 };
        let got: Option<u32> = c
            .query_first(format!("SELECT id FROM sbtest1 WHERE id = {id}"))
            .await
            .unwrap_or_else(|e| panic!("read id {id}: {e}"));
        assert_eq!(got, Some(id), "row {id}");
    }
}

fn addr(cluster: &Cluster, i: usize) -> String {
    let inst = &cluster.instances()[i];
    format!("{}:{}", inst.host, inst.port)
}

/// Issue 26's main scenario: while sysbench runs through Shoal, the file gains a replica on
/// dh1, a user, and a new weight for dh2's replica, and Shoal is sent SIGHUP; then another
/// user, applied with RELOAD SHOAL CONFIG. sysbench finishes without an error or reconnect,
/// the new users log in, reads reach the new replica. Then dh2's replica is removed: its pool
/// drains and it gets no statement afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reload_under_sysbench_adds_a_replica_and_users_without_dropping_anything() {
    let cluster = start_cluster(1).await;
    // Instances: primaries 0 and 1, then the replica of 0 (2) and of 1 (3).
    let (r1, r2) = (cluster.replicas_of(0)[0], cluster.replicas_of(1)[0]);
    let idx = |r: &shoal_bench::cluster::Instance| {
        cluster
            .instances()
            .iter()
            .position(|i| i.port == r.port)
            .expect("instance")
    };
    let (r1, r2) = (idx(r1), idx(r2));
    prepare_tables(&cluster).await;
    let path: PathBuf = scratch_dir().join(format!("{}.yaml", unique_name("reload")));
    write(
        &path,
        &config_text(
            &cluster,
            &Version {
                replicas: [&[], &[(r2, 1)]],
                ..Version::default()
            },
        ),
    );
    // Metrics on: the new replica must get its own series.
    let admin = format!("127.0.0.1:{}", shoal_tests::shoal::free_port());
    let shoal = ShoalProcess::start(&[
        "--config".to_string(),
        path.display().to_string(),
        "--admin-listen".to_string(),
        admin.clone(),
    ]);
    let mut c = app(&shoal).await;
    assert_eq!(config_version(&mut c).await, 1);

    let secs: u32 = std::env::var("SHOAL_E2E_SYSBENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    let port = shoal.port();
    // Two runs at once: one in transactions (each holds its configuration until COMMIT),
    // one in autocommit (its reads spread to replicas, its sessions move between statements).
    let run = move |skip_trx: &str| {
        let args: Vec<String> = vec![
            "oltp_read_only".into(),
            "--db-driver=mysql".into(),
            "--mysql-host=127.0.0.1".into(),
            format!("--mysql-port={port}"),
            "--mysql-user=app".into(),
            "--mysql-password=app-secret".into(),
            format!("--mysql-db={DB}"),
            "--mysql-ssl=off".into(),
            format!("--tables={TABLES}"),
            format!("--table-size={ROWS}"),
            "--threads=4".into(),
            format!("--time={secs}"),
            "--db-ps-mode=auto".into(),
            format!("--skip-trx={skip_trx}"),
            "--report-interval=0".into(),
            "run".into(),
        ];
        std::thread::spawn(move || shoal_tests::sysbench::run(&args))
    };
    let benches = [run("off"), run("on")];
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Step 1: a replica on dh1, user bob, dh2's replica weight 1 -> 3; SIGHUP.
    write(
        &path,
        &config_text(
            &cluster,
            &Version {
                replicas: [&[(r1, 1)], &[(r2, 3)]],
                more_users: "  - { name: bob, password: bob-secret, schemas: [sb] }\n",
                ..Version::default()
            },
        ),
    );
    shoal.signal(libc::SIGHUP);
    let s = &shoal;
    wait_until("version 2", s, move || async move {
        config_version(&mut app(s).await).await == 2
    })
    .await;
    let log = shoal.log();
    for change in [
        "user added: bob",
        &format!("server added: dh1 {}", addr(&cluster, r1)),
        &format!("weight changed: dh2 {} 1 -> 3", addr(&cluster, r2)),
    ] {
        assert!(log.contains(change), "the log should say {change}:\n{log}");
    }
    let mut bob = client_as(&shoal, "bob", "bob-secret").await;
    // bob is no admin: the reload statement and the running config are not his.
    for sql in ["RELOAD SHOAL CONFIG", "SHOW SHOAL CONFIG"] {
        match bob.query_drop(sql).await {
            Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1227, "{sql}: {}", e.message),
            other => panic!("{sql} by a non-admin: {other:?}"),
        }
    }
    let r1_addr = addr(&cluster, r1);
    let a1 = &r1_addr;
    wait_until("the new replica up", s, move || async move {
        backends(&mut app(s).await)
            .await
            .iter()
            .any(|(a, st)| a == a1 && st == "up")
    })
    .await;
    // sysbench's sessions, opened before the reload, moved to it: their autocommit reads of
    // dn1's rows reach the new replica.
    let before = selects(&cluster, r1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let from_sysbench = selects(&cluster, r1).await - before;
    assert!(
        from_sysbench >= 50,
        "the new replica ran {from_sysbench} SELECTs while sysbench ran\n{}",
        shoal.log()
    );
    // A new user's reads of dn1's rows reach it too (the primary has weight 0).
    let before = selects(&cluster, r1).await;
    point_reads(&mut bob, 0, 200).await;
    let reached = selects(&cluster, r1).await - before;
    assert!(
        reached >= 200,
        "the new replica ran {reached} SELECTs for 200 reads\n{}",
        shoal.log()
    );
    // /metrics has the new server's round trips on dn1 under its own address (the metrics
    // of a snapshot are labelled by its servers, not by the start's).
    let (status, text) = shoal_tests::http_get(&admin, "/metrics").await;
    assert_eq!(status, 200);
    let series =
        format!("shoal_backend_duration_seconds_count{{datanode=\"dn1\",server=\"{a1}\"}} ");
    let count: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in /metrics:\n{text}"));
    assert!(count >= 200, "{series}{count}");

    // Step 2: user carol, applied by RELOAD SHOAL CONFIG from a client.
    write(
        &path,
        &config_text(
            &cluster,
            &Version {
                replicas: [&[(r1, 1)], &[(r2, 3)]],
                more_users: "  - { name: bob, password: bob-secret, schemas: [sb] }\n  \
                             - { name: carol, password: carol-secret, schemas: [sb] }\n",
                ..Version::default()
            },
        ),
    );
    let rows: Vec<(String, String)> = c.query("RELOAD SHOAL CONFIG").await.expect("RELOAD");
    assert!(
        rows.contains(&("version".into(), "3".into()))
            && rows.contains(&("change".into(), "user added: carol".into())),
        "{rows:?}"
    );
    client_as(&shoal, "carol", "carol-secret")
        .await
        .disconnect()
        .await
        .ok();

    for bench in benches {
        let report = bench.join().expect("sysbench thread");
        for label in ["ignored errors:", "reconnects:"] {
            assert_eq!(
                shoal_tests::sysbench::counter(&report, label),
                0,
                "{label} through a reloading shoal:\n{report}\n{}",
                shoal.log()
            );
        }
        assert!(
            shoal_tests::sysbench::counter(&report, "queries:") > 0,
            "{report}"
        );
    }

    // Step 3: dh2's replica removed: its pool drains, no statement goes to it afterwards.
    assert!(
        shoal_connections(&cluster, r2).await > 0,
        "the replica should hold Shoal's pooled connections before its removal"
    );
    write(
        &path,
        &config_text(
            &cluster,
            &Version {
                replicas: [&[(r1, 1)], &[]],
                ..Version::default()
            },
        ),
    );
    let rows: Vec<(String, String)> = c.query("RELOAD SHOAL CONFIG").await.expect("RELOAD");
    let r2_addr = addr(&cluster, r2);
    assert!(
        rows.contains(&("change".into(), format!("server removed: dh2 {r2_addr}"))),
        "{rows:?}"
    );
    assert!(
        !backends(&mut c).await.iter().any(|(a, _)| *a == r2_addr),
        "SHOW SHOAL BACKENDS still lists the removed replica"
    );
    // A monitor check in flight when it was stopped may land: count from a moment later.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = selects(&cluster, r2).await;
    let mut fresh = app(&shoal).await;
    point_reads(&mut fresh, 1, 200).await;
    // `c` held connections on the old snapshot: its next statements move it too.
    point_reads(&mut c, 1, 50).await;
    let after = selects(&cluster, r2).await;
    // The later reading's own connection runs one SELECT (the client library's settings).
    assert_eq!(
        after - before - 1,
        0,
        "the removed replica still got SELECTs\n{}",
        shoal.log()
    );
    assert!(
        shoal
            .log()
            .contains("server removed by the reload: its pool drains"),
        "{}",
        shoal.log()
    );
    // Drained: Shoal keeps no connection to it (pool and health monitor alike).
    let cl = &cluster;
    wait_until(
        "no Shoal connection left on the removed replica",
        s,
        move || async move { shoal_connections(cl, r2).await == 0 },
    )
    .await;
}

/// Connections of Shoal's backend user on instance `i`.
async fn shoal_connections(cluster: &Cluster, i: usize) -> u64 {
    let mut a = Conn::new(cluster.admin_opts(i)).await.expect("admin");
    let n: Option<u64> = a
        .query_first(format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '{}'",
            cluster.user()
        ))
        .await
        .expect("processlist");
    a.disconnect().await.ok();
    n.unwrap_or(0)
}

/// A file that does not load (YAML error, unknown datanode) or changes what places rows (a
/// sharded table's rule) changes nothing: RELOAD returns the reason, the version stays, the
/// old users still log in.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn invalid_or_refused_files_change_nothing() {
    let cluster = start_cluster(0).await;
    prepare_tables(&cluster).await;
    let path: PathBuf = scratch_dir().join(format!("{}.yaml", unique_name("reload-bad")));
    let good = config_text(&cluster, &Version::default());
    write(&path, &good);
    let shoal = ShoalProcess::start(&["--config".to_string(), path.display().to_string()]);
    let mut c = app(&shoal).await;
    assert_eq!(config_version(&mut c).await, 1);
    let config = show_config(&mut c).await;
    assert!(
        config.contains(&("users.app.password".into(), "***".into())),
        "{config:?}"
    );
    assert!(
        !config.iter().any(|(_, v)| v.contains("app-secret")
            || v.contains(&format!("password {}", cluster.password()))),
        "a password shows in SHOW SHOAL CONFIG: {config:?}"
    );

    let cases = [
        (format!("{good}  - {{ name: broken\n"), "reload failed: "),
        (
            good.replace("datanodes: \"dn1, dn2\" }", "datanodes: \"dn1, dn9\" }"),
            "dn9",
        ),
        (
            config_text(
                &cluster,
                &Version {
                    algorithm: "hash",
                    more_users: "  - { name: eve, password: e, schemas: [sb] }\n",
                    ..Version::default()
                },
            ),
            "reload refused: table sb.sbtest1's rule (rule 'by_id' now maps keys differently) \
             changed; that would move rows: restart with a migration instead",
        ),
    ];
    for (text, want) in cases {
        write(&path, &text);
        let err = c
            .query_drop("RELOAD SHOAL CONFIG")
            .await
            .expect_err("the reload must fail");
        let mysql_async::Error::Server(e) = err else {
            panic!("not a server error: {err:?}");
        };
        assert_eq!(e.code, 1105, "{e:?}");
        assert!(
            e.message.contains(want),
            "{} should contain {want}",
            e.message
        );
        assert!(
            shoal.log().contains("configuration not reloaded"),
            "{}",
            shoal.log()
        );
        assert_eq!(config_version(&mut c).await, 1);
        let mut again = app(&shoal).await;
        point_reads(&mut again, 1, 5).await;
        again.disconnect().await.ok();
    }
    // The refused file's new user does not exist.
    assert!(
        Conn::new(shoal.opts_as("eve", "e", Some(DB)))
            .await
            .is_err(),
        "a refused reload added its user"
    );
    // SIGHUP with a bad file: logged, nothing changes, Shoal keeps serving.
    write(&path, "datahosts: [\n");
    shoal.signal(libc::SIGHUP);
    let s = &shoal;
    wait_until("the SIGHUP's refusal in the log", s, move || async move {
        s.log().matches("configuration not reloaded").count() >= 4
    })
    .await;
    assert_eq!(config_version(&mut app(&shoal).await).await, 1);

    // A user removed by a reload: its open session keeps running, new logins are refused.
    // Schema `other` is not one temp may use.
    let with_temp = |more: &str| {
        config_text(
            &cluster,
            &Version {
                more_users: more,
                ..Version::default()
            },
        ) + "  - name: other\n    default_datanode: dn2\n"
    };
    write(
        &path,
        &with_temp("  - { name: temp, password: temp-secret, schemas: [sb] }\n"),
    );
    c.query_drop("RELOAD SHOAL CONFIG").await.expect("add temp");
    let mut temp = client_as(&shoal, "temp", "temp-secret").await;
    point_reads(&mut temp, 0, 5).await;
    write(&path, &with_temp(""));
    let rows: Vec<(String, String)> = c.query("RELOAD SHOAL CONFIG").await.expect("drop temp");
    assert!(
        rows.contains(&("change".into(), "user removed: temp".into())),
        "{rows:?}"
    );
    point_reads(&mut temp, 0, 5).await;
    point_reads(&mut temp, 1, 5).await;
    // It keeps the rights it logged in with: no account in the new file is not "no limits".
    let denied = temp
        .query_drop("USE other")
        .await
        .expect_err("temp may not use other");
    assert!(
        matches!(&denied, mysql_async::Error::Server(e) if e.code == 1044),
        "{denied:?}"
    );
    assert!(
        temp.query_drop("SELECT COUNT(*) FROM other.sbtest1")
            .await
            .is_err(),
        "a removed user's session read a schema it may not use"
    );
    assert!(
        Conn::new(shoal.opts_as("temp", "temp-secret", Some(DB)))
            .await
            .is_err(),
        "a removed user logged in"
    );
}

/// Quick mode has no file: RELOAD says so, SHOW SHOAL CONFIG shows what runs.
#[tokio::test]
async fn quick_mode_shows_its_config_and_has_nothing_to_reload() {
    let backend = shoal_tests::shared_backend();
    let db = unique_name("reload_quick");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &["--admin"]);
    let mut c = Conn::new(shoal.opts(&backend, Some(&db)))
        .await
        .expect("connect");
    let config = show_config(&mut c).await;
    assert!(
        config.contains(&("config.version".into(), "1".into()))
            && config.contains(&(format!("users.{}.password", backend.user), "***".into())),
        "{config:?}"
    );
    assert!(
        backend.password.len() < 4 || !config.iter().any(|(_, v)| v.contains(&backend.password)),
        "{config:?}"
    );
    let err = c
        .query_drop("reload shoal config;")
        .await
        .expect_err("nothing to reload");
    let mysql_async::Error::Server(e) = err else {
        panic!("not a server error: {err:?}");
    };
    assert_eq!(e.code, 1105);
    assert!(e.message.contains("quick mode"), "{}", e.message);
    // The session still serves.
    let one: Option<u32> = c.query_first("SELECT 1").await.expect("SELECT 1");
    assert_eq!(one, Some(1));
}

/// A file served as one datanode (every statement relayed, no router) reloads too: the relay
/// path answers RELOAD and SHOW SHOAL CONFIG itself, and a file that would switch to routing
/// is refused.
#[tokio::test]
async fn a_relayed_one_datanode_file_reloads_users() {
    let backend = shoal_tests::shared_backend();
    let db = unique_name("reload_relay");
    backend.fresh_db(&db).await;
    let text = |users: &str, tables: &str| {
        format!(
            "users:\n  - {{ name: app, password: app-secret, schemas: [{db}], admin: true }}\n{users}\
             datahosts:\n  - name: dh1\n    primary: {{ address: \"{}:{}\", user: {}, password: {} }}\n\
             datanodes:\n  - {{ name: dn1, datahost: dh1, database: {db} }}\n\
             schemas:\n  - name: {db}\n    default_datanode: dn1\n{tables}",
            backend.host, backend.port, backend.user, backend.password
        )
    };
    let path: PathBuf = scratch_dir().join(format!("{}.yaml", unique_name("reload-relay")));
    write(&path, &text("", ""));
    let shoal = ShoalProcess::start(&["--config".to_string(), path.display().to_string()]);
    let mut c = Conn::new(shoal.opts_as("app", "app-secret", Some(&db)))
        .await
        .expect("connect");
    c.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
        .await
        .expect("create");
    assert_eq!(config_version(&mut c).await, 1);
    write(
        &path,
        &text(
            &format!("  - {{ name: ann, password: ann-secret, schemas: [{db}] }}\n"),
            "",
        ),
    );
    let rows: Vec<(String, String)> = c.query("RELOAD SHOAL CONFIG").await.expect("RELOAD");
    assert!(
        rows.contains(&("change".into(), "user added: ann".into())),
        "{rows:?}"
    );
    let mut ann = Conn::new(shoal.opts_as("ann", "ann-secret", Some(&db)))
        .await
        .expect("ann logs in after the reload");
    let n: Option<u64> = ann
        .query_first("SELECT COUNT(*) FROM t")
        .await
        .expect("ann reads");
    assert_eq!(n, Some(0));
    // Listing a table needs the router: refused, nothing changes.
    write(
        &path,
        &text(
            "",
            "    tables:\n      - { name: t, type: global, datanodes: dn1 }\n",
        ),
    );
    let err = c
        .query_drop("RELOAD SHOAL CONFIG")
        .await
        .expect_err("refused");
    assert!(
        err.to_string().contains("needs a restart"),
        "{err}\n{}",
        shoal.log()
    );
    assert_eq!(config_version(&mut c).await, 2);
}

/// Three datahosts (dh1..dh3 on primaries 0..2, each primary with one replica), each with one
/// datanode of `t`, sharded by `id` over them; `primaries` says which primary each datahost
/// uses and `replicas` its replicas (instance indexes).
fn three_datahosts(cluster: &Cluster, primaries: [usize; 3], replicas: [&[usize]; 3]) -> String {
    let (u, pw) = (cluster.user(), cluster.password());
    let mut text = format!(
        "users:\n  - {{ name: app, password: app-secret, schemas: [{DB}], admin: true }}\n\
         datahosts:\n"
    );
    for k in 0..3 {
        text.push_str(&format!(
            "  - name: dh{}\n    primary: {{ address: \"{}\", user: {u}, password: {pw} }}\n    \
             health: {{ heartbeat: 1h }}\n",
            k + 1,
            addr(cluster, primaries[k])
        ));
        if !replicas[k].is_empty() {
            text.push_str("    replicas:\n");
            for r in replicas[k] {
                text.push_str(&format!(
                    "      - {{ address: \"{}\", user: {u}, password: {pw} }}\n",
                    addr(cluster, *r)
                ));
            }
        }
    }
    text.push_str(&format!(
        "datanodes:\n  - {{ name: dn1, datahost: dh1, database: {DB} }}\n  \
         - {{ name: dn2, datahost: dh2, database: {DB} }}\n  \
         - {{ name: dn3, datahost: dh3, database: {DB} }}\n\
         rules:\n  - {{ name: by_id, algorithm: mod }}\n\
         schemas:\n  - name: {DB}\n    default_datanode: dn1\n    tables:\n      \
         - {{ name: t, type: sharded, shard_key: id, rule: by_id, datanodes: \"dn1, dn2, dn3\" }}\n"
    ));
    text
}

/// Issue 45 (4): a reload never points a datahost at another server's data. Two datahosts'
/// primary addresses swapped, or a replica address naming a server that does not replicate
/// from the datahost's servers, is refused by RELOAD and by SIGHUP, naming the datahost and
/// the key; the running configuration keeps serving and rows land where they did. Adding a
/// real replica (it replicates from the primary) and removing it are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reload_never_points_a_datahost_at_another_servers_data() {
    let cluster = Cluster::start(ClusterSpec {
        primaries: 3,
        replicas_per_primary: 1,
        databases: vec![DB.to_string()],
        ..ClusterSpec::default()
    })
    .await
    .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"));
    let idx = |r: &shoal_bench::cluster::Instance| {
        cluster
            .instances()
            .iter()
            .position(|i| i.port == r.port)
            .expect("instance")
    };
    let replica_of: Vec<usize> = (0..3).map(|p| idx(cluster.replicas_of(p)[0])).collect();
    for p in 0..3 {
        let mut c = Conn::new(cluster.opts(p, Some(DB))).await.expect("primary");
        c.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
            .await
            .expect("create t");
        c.disconnect().await.ok();
    }
    let path: PathBuf = scratch_dir().join(format!("{}.yaml", unique_name("reload-addr")));
    write(
        &path,
        &three_datahosts(&cluster, [0, 1, 2], [&[], &[], &[]]),
    );
    let shoal = ShoalProcess::start(&["--config".to_string(), path.display().to_string()]);
    let mut c = app(&shoal).await;
    for id in 1..=9 {
        c.query_drop(format!("INSERT INTO t (id) VALUES ({id})"))
            .await
            .expect("insert");
    }

    let refused = [
        // dh2 and dh3 swap primaries: each would get the other's rows.
        (
            three_datahosts(&cluster, [0, 2, 1], [&[], &[], &[]]),
            "datahosts.dh2.primary",
        ),
        // A replica "typo" naming dh3's replica: dh2's reads would return dh3's rows.
        (
            three_datahosts(&cluster, [0, 1, 2], [&[], &[replica_of[2]], &[]]),
            "datahosts.dh2.replicas.1",
        ),
    ];
    let mut refusals = 0;
    for (text, key) in refused {
        write(&path, &text);
        let err = c
            .query_drop("RELOAD SHOAL CONFIG")
            .await
            .expect_err("the reload must be refused");
        let mysql_async::Error::Server(e) = err else {
            panic!("not a server error: {err:?}");
        };
        assert_eq!(e.code, 1105, "{e:?}");
        assert!(
            e.message
                .contains("reload refused: datahost dh2's server changed")
                && e.message.contains(key),
            "{} should name dh2 and {key}",
            e.message
        );
        // SIGHUP with the same file: refused too.
        shoal.signal(libc::SIGHUP);
        refusals += 2;
        let s = &shoal;
        wait_until("the SIGHUP's refusal in the log", s, move || async move {
            s.log().matches("configuration not reloaded").count() >= refusals
        })
        .await;
        assert_eq!(config_version(&mut c).await, 1);
    }
    // The running configuration still serves, and rows land where they did: each primary
    // holds ids of one residue mod 3, all 18 are found.
    for id in 10..=18 {
        c.query_drop(format!("INSERT INTO t (id) VALUES ({id})"))
            .await
            .expect("insert after the refused reloads");
    }
    let mut found = Vec::new();
    for p in 0..3 {
        let mut b = Conn::new(cluster.opts(p, Some(DB))).await.expect("primary");
        let ids: Vec<u32> = b.query("SELECT id FROM t ORDER BY id").await.expect("ids");
        assert!(
            !ids.is_empty() && ids.iter().all(|i| i % 3 == ids[0] % 3),
            "primary {p} holds {ids:?}"
        );
        found.extend(ids);
    }
    found.sort_unstable();
    assert_eq!(found, (1..=18).collect::<Vec<u32>>());

    // dh2's real replica (it replicates from dh2's primary): added, then removed.
    let r = addr(&cluster, replica_of[1]);
    write(
        &path,
        &three_datahosts(&cluster, [0, 1, 2], [&[], &[replica_of[1]], &[]]),
    );
    let rows: Vec<(String, String)> = c.query("RELOAD SHOAL CONFIG").await.expect("add");
    assert!(
        rows.contains(&("change".into(), format!("server added: dh2 {r}"))),
        "{rows:?}"
    );
    write(
        &path,
        &three_datahosts(&cluster, [0, 1, 2], [&[], &[], &[]]),
    );
    let rows: Vec<(String, String)> = c.query("RELOAD SHOAL CONFIG").await.expect("remove");
    assert!(
        rows.contains(&("change".into(), format!("server removed: dh2 {r}"))),
        "{rows:?}"
    );
    assert_eq!(config_version(&mut c).await, 3);
}
