//! `shoal --config FILE` and `shoal --check --config FILE`, with a real MariaDB backend.

use std::process::Command;

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder};
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_proxy::config_file;
use shoal_proxy::server::Proxy;
use shoal_router::topology::Topology;

fn opts(port: u16, user: &str, pass: &str, db: Option<&str>) -> Opts {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(pass))
        .db_name(db)
        .prefer_socket(false)
        .into()
}

fn code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

fn yaml(port: u16, user: &str, pass: &str) -> String {
    format!(
        "server:\n  listen: 127.0.0.1:0\nusers:\n  - name: app\n    password: secret\n    schemas: [shop]\n\
         datahosts:\n  - name: dh1\n    primary:\n      address: 127.0.0.1:{port}\n      user: {user}\n      password: {pass}\n\
         datanodes:\n  - name: dn1\n    datahost: dh1\n    database: shop_db\n\
         schemas:\n  - name: shop\n    default_datanode: dn1\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_configured_users_and_schemas() {
    let cluster = Cluster::start(ClusterSpec {
        databases: vec!["shop_db".into(), "other".into()],
        ..Default::default()
    })
    .await
    .expect("cluster");
    let inst = cluster.primary(0);
    let text = yaml(inst.port, cluster.user(), cluster.password());
    let topo = Topology::build(&shoal_router::config::Config::from_yaml_str(&text).unwrap())
        .expect("valid config");
    let cfg = config_file::proxy_config(&topo, None).expect("servable");
    let proxy = Proxy::bind(cfg).await.unwrap();
    let port = proxy.local_addr().unwrap().port();
    let _stop = proxy.shutdown_handle();
    tokio::spawn(proxy.run());

    // The backend's own account is not a proxy user.
    let err = Conn::new(opts(port, cluster.user(), cluster.password(), None))
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some(1045), "{err}");
    let err = Conn::new(opts(port, "app", "wrong", None))
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some(1045), "{err}");
    // Only configured schemas exist.
    let err = Conn::new(opts(port, "app", "secret", Some("other")))
        .await
        .unwrap_err();
    assert!(matches!(code(&err), Some(1049) | Some(1044)), "{err}");

    let mut c = Conn::new(opts(port, "app", "secret", Some("shop")))
        .await
        .unwrap();
    c.query_drop("CREATE TABLE t (a INT)").await.unwrap();
    c.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
    let err = c.query_drop("USE other").await.unwrap_err();
    assert!(matches!(code(&err), Some(1049) | Some(1044)), "{err}");
    c.query_drop("USE shop").await.unwrap();
    let n: i64 = c
        .query_first("SELECT COUNT(*) FROM t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 1);
    let mut direct = Conn::new(cluster.opts(0, Some("shop_db"))).await.unwrap();
    let n: i64 = direct
        .query_first("SELECT COUNT(*) FROM t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 1, "logical schema shop is database shop_db");
}

#[test]
fn check_prints_the_topology_or_the_offending_key() {
    let dir = std::env::temp_dir().join(format!("shoal-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.yaml");
    std::fs::write(&good, yaml(3307, "u", "p")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_shoal"))
        .args(["--check", "--config"])
        .arg(&good)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("dn1: dh1/shop_db"), "{stdout}");
    assert!(stdout.contains("served as one datanode: dn1"), "{stdout}");

    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        yaml(3307, "u", "p").replace("default_datanode: dn1", "default_datanode: dn9"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_shoal"))
        .args(["--check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("dn9"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
