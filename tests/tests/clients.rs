//! Client compatibility: real ORMs, migration tools, drivers and a CLI (SQLAlchemy 2, Alembic,
//! Sequelize, Knex, Django, mycli's completion refresh, PHP PDO, MariaDB Connector/J, TypeORM,
//! ActiveRecord, Hibernate; the programs
//! are in `tests/clients/`) run one fixed scenario each against a sharded Shoal
//! (the demo's layout: `orders` by user_id over 4 datanodes, its ER child `order_item`, the
//! global `country`, `ledger` as 8 tables by quarter, `events` keyed by a global sequence) and
//! against one plain MariaDB database
//! holding the same tables, and their transcripts (every answer each tool observed) must be
//! equal step by step.
//!
//! The libraries come from `scripts/install-clients` (`.clients/venv`,
//! `tests/clients/node_modules`, Debian's php-mysql, libmariadb-java and a JDK, Debian's
//! ruby-activerecord, ruby-mysql2, libhibernate3-java and libjavassist-java); without them the test fails saying so. Steps known to differ
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

/// The client programs: name, interpreter (relative to the repository when it holds a `/`), the
/// interpreter's arguments before the script, script.
const CLIENTS: [(&str, &str, &[&str], &str); 11] = [
    (
        "sqlalchemy",
        ".clients/venv/bin/python",
        &[],
        "tests/clients/python/sqlalchemy_scenario.py",
    ),
    (
        "alembic",
        ".clients/venv/bin/python",
        &[],
        "tests/clients/python/alembic_scenario.py",
    ),
    (
        "sequelize",
        "node",
        &[],
        "tests/clients/node/sequelize_scenario.js",
    ),
    ("knex", "node", &[], "tests/clients/node/knex_scenario.js"),
    (
        "django",
        ".clients/venv/bin/python",
        &[],
        "tests/clients/python/django_scenario.py",
    ),
    (
        "mycli",
        ".clients/venv/bin/python",
        &[],
        "tests/clients/python/mycli_scenario.py",
    ),
    ("pdo", "php", &[], "tests/clients/php/pdo_scenario.php"),
    // The JDK's source launcher compiles the one-file program in memory at each run (no build
    // step, no class files left behind).
    (
        "connectorj",
        "java",
        &["-cp", CONNECTOR_J_JAR],
        "tests/clients/java/ConnectorJScenario.java",
    ),
    // Issue 49's ORM shapes: paging with relations, IN subqueries, eager_load and joins on
    // the child's foreign key alone.
    (
        "typeorm",
        "node",
        &[],
        "tests/clients/node/typeorm_scenario.js",
    ),
    (
        "activerecord",
        "ruby",
        &[],
        "tests/clients/ruby/activerecord_scenario.rb",
    ),
    (
        "hibernate",
        "java",
        &["-cp", HIBERNATE_CLASSPATH],
        "tests/clients/java/HibernateScenario.java",
    ),
];

/// Hibernate 3.6 as Debian's libhibernate3-java (and libjavassist-java) installs it, with its
/// dependencies and Connector/J.
const HIBERNATE_CLASSPATH: &str = concat!(
    "/usr/share/java/mariadb-java-client.jar:",
    "/usr/share/java/hibernate-core.jar:",
    "/usr/share/java/hibernate-commons-annotations.jar:",
    "/usr/share/java/geronimo-jpa_2.0_spec.jar:",
    "/usr/share/java/geronimo-jta-1.2-spec.jar:",
    "/usr/share/java/dom4j.jar:",
    "/usr/share/java/commons-collections3.jar:",
    "/usr/share/java/antlr.jar:",
    "/usr/share/java/slf4j-api.jar:",
    "/usr/share/java/javassist.jar"
);

/// MariaDB Connector/J as Debian's libmariadb-java installs it.
const CONNECTOR_J_JAR: &str = "/usr/share/java/mariadb-java-client.jar";

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
    // The Python packages added after the first pins (an older venv lacks them).
    for package in ["django", "mycli"] {
        let found = Command::new(&python)
            .args(["-c", &format!("import {package}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if python.exists() && !found {
            missing.push(format!("{package} in {}", python.display()));
        }
    }
    for m in ["mysql2", "sequelize", "knex", "typeorm", "reflect-metadata"] {
        if !modules.join(m).exists() {
            missing.push(modules.join(m).display().to_string());
        }
    }
    let succeeds = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !succeeds(
        "php",
        &["-r", "exit(extension_loaded('pdo_mysql') ? 0 : 1);"],
    ) {
        missing.push("php with pdo_mysql (php-cli, php-mysql)".to_string());
    }
    if !succeeds("ruby", &["-e", "require 'active_record'; require 'mysql2'"]) {
        missing.push(
            "ruby with active_record and mysql2 (ruby-activerecord, ruby-mysql2)".to_string(),
        );
    }
    // The source launcher needs a JDK (its compiler), not only a runtime.
    if !succeeds("javac", &["-version"]) {
        missing.push("a JDK (default-jdk-headless)".to_string());
    }
    if !Path::new(CONNECTOR_J_JAR).exists() {
        missing.push(format!("{CONNECTOR_J_JAR} (libmariadb-java)"));
    }
    for jar in HIBERNATE_CLASSPATH.split(':') {
        if !Path::new(jar).exists() {
            missing.push(format!("{jar} (libhibernate3-java, libjavassist-java)"));
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
fn run_client(
    root: &Path,
    client: (&str, &str, &[&str], &str),
    at: &Endpoint,
) -> Vec<(String, String)> {
    let (name, interpreter, interpreter_args, script) = client;
    let program = if interpreter.contains('/') {
        root.join(interpreter).display().to_string()
    } else {
        interpreter.to_string()
    };
    let child = Command::new(&program)
        .args(interpreter_args)
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
    // The demo's layout (conf/demo.yaml.in) over databases `a` and `b` of each server, and a
    // table whose key comes from a global sequence (AUTO_INCREMENT on one server): on a
    // datanode other than the default one, whose own tables SHOW TABLES would list.
    text.push_str(&shoal_tests::demo_layout_yaml(0));
    text.push_str(
        "      - { name: events, type: sharded, shard_key: id, rule: by_user, \
         datanodes: \"dn0, dn1, dn2, dn3\", sequence: { datanode: dn1, step: 1000 } }\n",
    );
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

/// The GUI clients' statement files (tests/clients/cases/<tool>.sql): DBeaver, MySQL Workbench
/// and Navicat as they open a connection and browse schema `shop`.
const GUI_CASES: [&str; 3] = ["dbeaver", "workbench", "navicat"];

/// Columns whose values are sizes, row counts or times of the physical tables: on Shoal they
/// are sums over shards (or a shard's), on one MariaDB the one table's, and the times are when
/// each server created its table. Compared by name only; their values are left out.
const PHYSICAL_STATISTICS: [&str; 21] = [
    "Rows",
    "Avg_row_length",
    "Data_length",
    "Max_data_length",
    "Index_length",
    "Data_free",
    "Auto_increment",
    "Create_time",
    "Update_time",
    "Check_time",
    "TABLE_ROWS",
    "AVG_ROW_LENGTH",
    "DATA_LENGTH",
    "MAX_DATA_LENGTH",
    "INDEX_LENGTH",
    "DATA_FREE",
    "AUTO_INCREMENT",
    "CREATE_TIME",
    "UPDATE_TIME",
    "CHECK_TIME",
    "SUM((DATA_LENGTH+INDEX_LENGTH))",
];

/// Schemas the reference server holds besides `shop` (the datanodes' databases `a` and `b`,
/// Shoal's XA decision log `shoal_xa`, MariaDB's own): rows of the reference's answers naming
/// one of them in a schema column are dropped from the reference side only, so a Shoal answer
/// naming one still differs.
const REFERENCE_ONLY_SCHEMAS: [&str; 6] =
    ["a", "b", "shoal_xa", "mysql", "performance_schema", "sys"];
const SCHEMA_COLUMNS: [&str; 6] = [
    "Database",
    "SCHEMA_NAME",
    "TABLE_SCHEMA",
    "Db",
    "ROUTINE_SCHEMA",
    "EVENT_SCHEMA",
];

/// The demo tables (and one unlisted table, in the default datanode) that the GUI statements
/// browse, created through each side's own connection, with a few rows.
const GUI_SCHEMA: [&str; 14] = [
    "DROP TABLE IF EXISTS order_item",
    "DROP TABLE IF EXISTS orders",
    "DROP TABLE IF EXISTS country",
    "DROP TABLE IF EXISTS ledger",
    "DROP TABLE IF EXISTS note",
    "CREATE TABLE country (code CHAR(2) NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL) ENGINE=InnoDB",
    "CREATE TABLE orders (id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(10) NOT NULL, \
     amount DECIMAL(10,2) NOT NULL, country_code CHAR(2) NULL, KEY ix_orders_user_id (user_id)) ENGINE=InnoDB",
    "CREATE TABLE order_item (id INT NOT NULL PRIMARY KEY, order_id INT NOT NULL, user_id INT NOT NULL, \
     sku VARCHAR(20) NOT NULL, qty INT NOT NULL, KEY ix_order_item_user_id (user_id), \
     CONSTRAINT fk_item_order FOREIGN KEY (order_id) REFERENCES orders (id)) ENGINE=InnoDB",
    "CREATE TABLE ledger (id INT NOT NULL PRIMARY KEY, day DATE NOT NULL, account VARCHAR(20) NOT NULL, \
     amount DECIMAL(12,2) NOT NULL) ENGINE=InnoDB",
    "CREATE TABLE note (id INT NOT NULL PRIMARY KEY, body VARCHAR(100) NOT NULL) ENGINE=InnoDB",
    "INSERT INTO country (code, name) VALUES ('de', 'Germany'), ('fr', 'France')",
    "INSERT INTO orders (id, user_id, status, amount, country_code) VALUES \
     (1, 1, 'new', 10.50, 'de'), (2, 2, 'paid', 20.00, 'fr'), (3, 3, 'sent', 5.25, NULL)",
    "INSERT INTO order_item (id, order_id, user_id, sku, qty) VALUES (11, 1, 1, 'sku-1', 2), (21, 2, 2, 'sku-2', 1)",
    "INSERT INTO ledger (id, day, account, amount) VALUES (1, '2024-01-10', 'cash', 1.50), (2, '2024-07-10', 'bank', 2.50)",
];

/// (name, statement) of a case file, split at its top-level `;` by Shoal's own tokenizer; the
/// comment lines before each statement are its source note, whose `-- [name]` names it.
fn gui_case(root: &Path, tool: &str) -> Vec<(String, String)> {
    let path = root.join(format!("tests/clients/cases/{tool}.sql"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let ranges = shoal_router::sql::lex::split_statements(&text)
        .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
    let cases: Vec<(String, String)> = ranges
        .into_iter()
        .map(|r| {
            let part = &text[r];
            let lines: Vec<&str> = part.lines().collect();
            let first = lines
                .iter()
                .position(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--"))
                .expect("a statement has a token");
            let name = lines[..first]
                .iter()
                .rev()
                .find_map(|l| l.trim().strip_prefix("-- [")?.split_once(']'))
                .map(|(n, _)| n.to_string())
                .unwrap_or_else(|| {
                    panic!("{}: no `-- [name]` before {}", path.display(), lines[first])
                });
            (name, lines[first..].join("\n").trim().to_string())
        })
        .collect();
    let names = text
        .lines()
        .filter(|l| l.trim_start().starts_with("-- ["))
        .count();
    assert!(
        !cases.is_empty() && cases.len() == names,
        "{}: {} statements for {names} names",
        path.display(),
        cases.len()
    );
    cases
}

/// One statement's answer as text: the column names and the rows (sorted: a GUI shows what it
/// got, in its own order), or the error.
async fn gui_answer(conn: &mut Conn, sql: &str, reference: bool) -> String {
    let mut result = match conn.query_iter(sql).await {
        Ok(r) => r,
        Err(mysql_async::Error::Server(e)) => return format!("ERROR {}: {}", e.code, e.message),
        Err(e) => panic!("{sql}: {e}"),
    };
    let columns: Vec<String> = result
        .columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    let rows: Vec<mysql_async::Row> = match result.collect().await {
        Ok(rows) => rows,
        Err(mysql_async::Error::Server(e)) => return format!("ERROR {}: {}", e.code, e.message),
        Err(e) => panic!("{sql}: {e}"),
    };
    result
        .drop_result()
        .await
        .expect("drop the rest of the result");
    let statistic = |c: &str| {
        PHYSICAL_STATISTICS
            .iter()
            .any(|s| s.eq_ignore_ascii_case(c))
    };
    let schema_column = |c: &str| SCHEMA_COLUMNS.iter().any(|s| s.eq_ignore_ascii_case(c));
    let mut cells: Vec<Vec<String>> = Vec::new();
    'rows: for row in rows {
        let mut out = Vec::new();
        for (value, column) in row.unwrap().into_iter().zip(&columns) {
            let text = match value {
                mysql_async::Value::NULL => "NULL".to_string(),
                mysql_async::Value::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
                other => other.as_sql(true),
            };
            if reference && schema_column(column) && REFERENCE_ONLY_SCHEMAS.contains(&text.as_str())
            {
                continue 'rows;
            }
            out.push(if statistic(column) {
                "<physical statistic>".to_string()
            } else {
                text
            });
        }
        cells.push(out);
    }
    cells.sort();
    serde_json::json!({ "columns": columns, "rows": cells }).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gui_clients_statements_answer_on_shoal_as_on_one_mariadb() {
    let root = repo();
    let known = known_differences(&root);
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
    let mut sharded = Conn::new(shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .unwrap_or_else(|e| panic!("connect through shoal: {e}\n{}", shoal.log()));
    let p0 = cluster.primary(0);
    let mut plain = Conn::new(
        mysql_async::OptsBuilder::default()
            .ip_or_hostname(p0.host.clone())
            .tcp_port(p0.port)
            .user(Some(cluster.user()))
            .pass(Some(cluster.password()))
            .db_name(Some("shop")),
    )
    .await
    .expect("connect to the reference MariaDB");
    for sql in GUI_SCHEMA {
        plain
            .query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("reference: {sql}: {e}"));
        sharded
            .query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("shoal: {sql}: {e}\n{}", shoal.log()));
    }

    let mut failures = String::new();
    let mut expected = String::new();
    for tool in GUI_CASES {
        for (name, sql) in gui_case(&root, tool) {
            let want = gui_answer(&mut plain, &sql, true).await;
            let got = gui_answer(&mut sharded, &sql, false).await;
            let step = format!("{tool} | {name}");
            match (want == got, known.get(&(tool.to_string(), name.clone()))) {
                (true, None) => {}
                (true, Some(why)) => writeln!(
                    failures,
                    "{step}: now answers as one MariaDB does; take it off \
                     tests/clients/known-differences.txt ({why})"
                )
                .unwrap(),
                (false, Some(why)) => writeln!(
                    expected,
                    "{step} (known: {why})\n    {sql}\n    one MariaDB: {want}\n    Shoal:       {got}"
                )
                .unwrap(),
                (false, None) => writeln!(
                    failures,
                    "{step}\n    {sql}\n    one MariaDB: {want}\n    Shoal:       {got}"
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
        "GUI clients' statements answer otherwise on Shoal than on one MariaDB:\n{failures}\nshoal log:\n{}",
        shoal.log()
    );
}
