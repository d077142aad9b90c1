//! Client compatibility: real ORMs and migration tools (SQLAlchemy 2, Alembic, Sequelize, Knex;
//! the programs are in `tests/clients/`) run one fixed scenario each against a sharded Shoal
//! (the demo's layout: `orders` by user_id over 4 datanodes, its ER child `order_item`, the
//! global `country`, `ledger` as 8 tables by quarter) and against one plain MariaDB database
//! holding the same tables, and their transcripts (every answer each tool observed) must be
//! equal step by step.
//!
//! The libraries come from `scripts/install-clients` (`.clients/venv`,
//! `tests/clients/node_modules`); without them the test fails saying so. Steps known to differ
//! today are listed in `tests/clients/known-differences.txt`, each with the reason: a listed
//! step that differs is reported but does not fail the test, a listed step that now matches
//! fails it (take it off the list), and any other difference fails it.
//! `SHOAL_CLIENTS=sqlalchemy,knex` runs only those clients.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_tests::{ShoalProcess, scratch_dir, unique_name};

/// How long one client program may run (each takes seconds; a hang is a failure, not a wait).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(180);

/// The client programs: name, interpreter (relative to the repository), script.
const CLIENTS: [(&str, &str, &str); 4] = [
    (
        "sqlalchemy",
        ".clients/venv/bin/python",
        "tests/clients/python/sqlalchemy_scenario.py",
    ),
    (
        "alembic",
        ".clients/venv/bin/python",
        "tests/clients/python/alembic_scenario.py",
    ),
    (
        "sequelize",
        "node",
        "tests/clients/node/sequelize_scenario.js",
    ),
    ("knex", "node", "tests/clients/node/knex_scenario.js"),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the repository")
        .to_path_buf()
}

/// Fails (never skips) when the client libraries are not installed.
fn assert_clients_installed(root: &Path) {
    let python = root.join(".clients/venv/bin/python");
    let modules = root.join("tests/clients/node_modules");
    let mut missing = Vec::new();
    if !python.exists() {
        missing.push(python.display().to_string());
    }
    for m in ["mysql2", "sequelize", "knex"] {
        if !modules.join(m).exists() {
            missing.push(modules.join(m).display().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "the client compatibility suite needs its libraries: run scripts/install-clients \
         (missing: {})",
        missing.join(", ")
    );
}

/// Where a client connects.
struct Endpoint {
    host: String,
    port: u16,
    user: String,
    password: String,
    db: String,
}

/// Runs one client program and returns its transcript as (step, answer) in order.
fn run_client(root: &Path, client: (&str, &str, &str), at: &Endpoint) -> Vec<(String, String)> {
    let (name, interpreter, script) = client;
    let program = if interpreter.contains('/') {
        root.join(interpreter).display().to_string()
    } else {
        interpreter.to_string()
    };
    let child = Command::new(&program)
        .arg(root.join(script))
        .current_dir(root)
        .env("CLIENT_HOST", &at.host)
        .env("CLIENT_PORT", at.port.to_string())
        .env("CLIENT_USER", &at.user)
        .env("CLIENT_PASSWORD", &at.password)
        .env("CLIENT_DB", &at.db)
        .env("NODE_PATH", root.join("tests/clients/node_modules"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{name}: cannot run {program}: {e}"));
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(CLIENT_TIMEOUT) {
        Ok(out) => out.unwrap_or_else(|e| panic!("{name}: {e}")),
        Err(_) => {
            // SAFETY: kill(2) on the child we spawned, not reaped yet (its waiter is blocked).
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
            panic!(
                "{name} against port {}: no end within {CLIENT_TIMEOUT:?}",
                at.port
            );
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name} against port {} exited with {}:\n{}\n{stdout}",
        at.port,
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let steps: Vec<serde_json::Value> = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{name}: its transcript is not JSON ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    steps
        .into_iter()
        .map(|s| {
            let step = s["step"].as_str().expect("a step name").to_string();
            (step, s["result"].to_string())
        })
        .collect()
}

/// `client` -> steps known to differ on Shoal today, from tests/clients/known-differences.txt
/// (`client | step | why`).
fn known_differences(root: &Path) -> BTreeMap<(String, String), String> {
    let path = root.join("tests/clients/known-differences.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut known = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.splitn(3, " | ");
        let (Some(client), Some(step), Some(why)) = (parts.next(), parts.next(), parts.next())
        else {
            panic!("{}: not `client | step | why`: {line}", path.display());
        };
        known.insert((client.to_string(), step.to_string()), why.to_string());
    }
    known
}

fn write_config(cluster: &Cluster) -> PathBuf {
    let (u, pw) = (cluster.user(), cluster.password());
    let mut text = String::from(
        "users:\n  - { name: app, password: app-secret, schemas: [shop] }\ndatahosts:\n",
    );
    for (k, p) in cluster.primaries().iter().enumerate() {
        writeln!(
            text,
            "  - name: dh{k}\n    primary: {{ address: \"{}:{}\", user: {u}, password: {pw} }}\n    \
             pool: {{ max: 16, acquire_timeout: 30s }}",
            p.host, p.port
        )
        .unwrap();
    }
    // The demo's layout (conf/demo.yaml.in) over databases `a` and `b` of each server.
    text.push_str(&shoal_tests::demo_layout_yaml(0));
    let path = scratch_dir().join(format!("{}.yaml", unique_name("clients")));
    std::fs::write(&path, text).expect("write config");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orms_and_migration_tools_answer_on_shoal_as_on_one_mariadb() {
    let root = repo();
    assert_clients_installed(&root);
    let known = known_differences(&root);
    let only = std::env::var("SHOAL_CLIENTS").ok();

    // The oracle is database `shop` on the first server: same name as the logical schema, so
    // that DATABASE() and schema-qualified answers compare equal.
    let cluster = Cluster::start(ClusterSpec {
        primaries: 2,
        replicas_per_primary: 0,
        databases: ["a", "b", "shop"].iter().map(|d| d.to_string()).collect(),
        ..ClusterSpec::default()
    })
    .await
    .expect("start 2 MariaDB primaries");
    let shoal = ShoalProcess::start(&[
        "--config".to_string(),
        write_config(&cluster).display().to_string(),
    ]);
    // Shoal answers before any client program runs.
    let mut c = Conn::new(shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .unwrap_or_else(|e| panic!("connect through shoal: {e}\n{}", shoal.log()));
    c.query_drop("SELECT 1").await.unwrap();
    c.disconnect().await.unwrap();

    let sharded = Endpoint {
        host: "127.0.0.1".into(),
        port: shoal.port(),
        user: "app".into(),
        password: "app-secret".into(),
        db: "shop".into(),
    };
    let p0 = cluster.primary(0);
    let plain = Endpoint {
        host: p0.host.clone(),
        port: p0.port,
        user: cluster.user().into(),
        password: cluster.password().into(),
        db: "shop".into(),
    };

    let mut failures = String::new();
    let mut expected = String::new();
    for client in CLIENTS {
        let name = client.0;
        if only
            .as_ref()
            .is_some_and(|o| !o.split(',').any(|c| c == name))
        {
            continue;
        }
        let want = run_client(&root, client, &plain);
        let got = run_client(&root, client, &sharded);
        if want.iter().map(|s| &s.0).ne(got.iter().map(|s| &s.0)) {
            writeln!(
                failures,
                "{name}: the two runs went through other steps:\n  one MariaDB: {:?}\n  Shoal:       {:?}",
                want.iter().map(|s| &s.0).collect::<Vec<_>>(),
                got.iter().map(|s| &s.0).collect::<Vec<_>>()
            )
            .unwrap();
            continue;
        }
        for ((step, w), (_, g)) in want.iter().zip(&got) {
            let key = (name.to_string(), step.clone());
            match (w == g, known.get(&key)) {
                (true, None) => {}
                (true, Some(why)) => writeln!(
                    failures,
                    "{name} | {step}: now answers as one MariaDB does; take it off \
                     tests/clients/known-differences.txt ({why})"
                )
                .unwrap(),
                (false, Some(why)) => writeln!(
                    expected,
                    "{name} | {step} (known: {why})\n    one MariaDB: {w}\n    Shoal:       {g}"
                )
                .unwrap(),
                (false, None) => writeln!(
                    failures,
                    "{name} | {step}\n    one MariaDB: {w}\n    Shoal:       {g}"
                )
                .unwrap(),
            }
        }
    }
    if !expected.is_empty() {
        eprintln!("known differences (tests/clients/known-differences.txt):\n{expected}");
    }
    assert!(
        failures.is_empty(),
        "client transcripts differ between Shoal and one MariaDB:\n{failures}\nshoal log:\n{}",
        shoal.log()
    );
}
