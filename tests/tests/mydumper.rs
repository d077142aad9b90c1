//! mydumper and myloader through a sharded Shoal (issue 46, part 4): a dump in each of
//! mydumper's consistency modes (default: `FLUSH TABLES WITH READ LOCK` then a consistent
//! snapshot per thread; `--trx-consistency-only`; `--no-locks`), loaded back by myloader
//! (whose data files are INSERTs without a column list) through a second Shoal over empty
//! datanodes: every physical table ends up as in the source. Skipped, saying so, when the
//! tools are not installed (`apt-get install mydumper`, scripts/install-clients).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_tests::{APP_USER, ShoalProcess, scratch_dir, text_rows, unique_name};

const ORDERS: &str = "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, \
                      note VARCHAR(40)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";
const ORDER_ITEM: &str =
    "CREATE TABLE order_item (id INT PRIMARY KEY, user_id INT NOT NULL, qty INT) ENGINE=InnoDB";
const COUNTRY: &str = "CREATE TABLE country (code CHAR(2) PRIMARY KEY, name VARCHAR(40)) \
                       ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

/// A Shoal over the demo layout whose datanodes use databases `first` and `second`.
fn start_shoal(cluster: &Cluster, first: &str, second: &str) -> ShoalProcess {
    let layout = shoal_tests::demo_layout_yaml(1)
        .replace("database: a }", &format!("database: {first} }}"))
        .replace("database: b }", &format!("database: {second} }}"));
    let path = shoal_tests::cluster_config(cluster, APP_USER, &layout, "mydumper");
    ShoalProcess::start(&["--config".to_string(), path.display().to_string()])
}

async fn client(shoal: &ShoalProcess) -> Conn {
    match Conn::new(shoal.opts_as("app", "app-secret", Some("shop"))).await {
        Ok(c) => c,
        Err(e) => panic!("connect through shoal: {e}\n{}", shoal.log()),
    }
}

async fn exec(c: &mut Conn, sql: &str, shoal: &ShoalProcess) {
    c.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", shoal.log()));
}

/// Runs a client tool; panics with its stderr and Shoal's log.
fn run(tool: &str, args: &[String], log: &dyn Fn() -> String) -> String {
    let out = Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{tool} {args:?} failed: {stderr}\n{}",
        log()
    );
    stderr
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

fn connection(port: u16) -> Vec<String> {
    [
        "--host=127.0.0.1".to_string(),
        format!("--port={port}"),
        "--user=app".into(),
        "--password=app-secret".into(),
    ]
    .to_vec()
}

/// Every physical table of `to_a`/`to_b` holds what the same one of `a`/`b` holds.
async fn assert_same_physical(cluster: &Cluster, to_a: &str, to_b: &str, what: &str) {
    for server in 0..2 {
        for (from, to) in [("a", to_a), ("b", to_b)] {
            let mut src = Conn::new(cluster.opts(server, Some(from))).await.unwrap();
            let mut dst = Conn::new(cluster.opts(server, Some(to))).await.unwrap();
            let mut tables: Vec<String> = src.query("SHOW TABLES").await.unwrap();
            tables.sort();
            let mut loaded: Vec<String> = dst.query("SHOW TABLES").await.unwrap();
            loaded.sort();
            assert_eq!(
                tables, loaded,
                "physical tables of {to} on server {server} ({what})"
            );
            for t in tables {
                let sql = format!("SELECT * FROM `{t}` ORDER BY 1");
                assert_eq!(
                    text_rows(&mut dst, &sql).await,
                    text_rows(&mut src, &sql).await,
                    "{t} in {to} on server {server} ({what})"
                );
            }
        }
    }
}

/// mydumper through Shoal in its three consistency modes, and myloader (whose data files are
/// INSERTs without a column list) back through a second Shoal over empty datanodes: every
/// physical table ends up as in the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mydumper_and_myloader_round_trip_in_each_consistency_mode() {
    if !have("mydumper") || !have("myloader") {
        eprintln!(
            "SKIPPED: mydumper/myloader not installed (apt-get install mydumper, see \
             scripts/install-clients)"
        );
        return;
    }
    let modes: [(&str, &[&str]); 3] = [
        ("default", &[]),
        ("trx-consistency-only", &["--trx-consistency-only"]),
        ("no-locks", &["--no-locks"]),
    ];
    let mut dbs = vec!["a".to_string(), "b".to_string()];
    for k in 0..modes.len() {
        dbs.push(format!("c{k}"));
        dbs.push(format!("d{k}"));
    }
    let cluster = Cluster::start(ClusterSpec {
        primaries: 2,
        databases: dbs,
        ..ClusterSpec::default()
    })
    .await
    .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"));
    let source = start_shoal(&cluster, "a", "b");
    let mut c = client(&source).await;
    for ddl in [ORDERS, ORDER_ITEM, COUNTRY] {
        exec(&mut c, ddl, &source).await;
    }
    let orders: Vec<String> = (1..=40)
        .map(|i| format!("({i}, {}, 'n''{i}')", i % 7))
        .collect();
    let items: Vec<String> = (1..=30)
        .map(|i| format!("({i}, {}, {})", i % 7, i))
        .collect();
    for sql in [
        format!(
            "INSERT INTO orders (id, user_id, note) VALUES {}",
            orders.join(", ")
        ),
        format!(
            "INSERT INTO order_item (id, user_id, qty) VALUES {}",
            items.join(", ")
        ),
        "INSERT INTO country (code, name) VALUES ('fr', 'France'), ('jp', NULL)".to_string(),
    ] {
        exec(&mut c, &sql, &source).await;
    }
    for (k, (name, flags)) in modes.iter().enumerate() {
        let dir: PathBuf = scratch_dir().join(unique_name(&format!("mydumper-{name}")));
        let mut args = connection(source.port());
        args.extend([
            "--database=shop".to_string(),
            format!("--outputdir={}", dir.display()),
        ]);
        args.extend(["--threads=2".to_string(), "--verbose=3".to_string()]);
        args.extend(flags.iter().map(|f| f.to_string()));
        let stderr = run("mydumper", &args, &|| source.log());
        // Every statement it sends is answered: no lock it could not take, no check it
        // had to skip.
        assert!(
            !stderr.contains("CRITICAL") && !stderr.contains("Could not"),
            "mydumper {name}: {stderr}"
        );
        let data = std::fs::read_to_string(Path::new(&dir).join("shop.orders.sql"))
            .unwrap_or_else(|e| panic!("no data file for orders in {}: {e}", dir.display()));
        // What myloader sends back: INSERTs without a column list.
        assert!(data.contains("INSERT INTO `orders` VALUES"), "{data}");
        let target = start_shoal(&cluster, &format!("c{k}"), &format!("d{k}"));
        let mut args = connection(target.port());
        args.extend([
            "--database=shop".to_string(),
            format!("--directory={}", dir.display()),
            "--overwrite-tables".to_string(),
            "--threads=2".to_string(),
        ]);
        run("myloader", &args, &|| target.log());
        assert_same_physical(&cluster, &format!("c{k}"), &format!("d{k}"), name).await;
    }
}
