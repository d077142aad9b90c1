//! `shoal --config FILE`: clients log in as the users of the file (not the backend's account),
//! see its logical schemas, and `--check` validates a file.

use std::path::{Path, PathBuf};
use std::process::Command;

use mysql_async::prelude::Queryable;
use mysql_async::{ChangeUserOpts, Conn};
use shoal_tests::shoal::shoal_bin;
use shoal_tests::{Backend, ShoalProcess, scratch_dir, server_error, shared_backend, unique_name};

/// A single-datanode config: users `app` (schema `shop`) and `ops` (`shop` and `crm`), both
/// schemas on the one physical database `physical`.
fn write_config(backend: &Backend, physical: &str) -> PathBuf {
    let path = scratch_dir().join(format!("{}.yaml", unique_name("config")));
    let text = format!(
        "users:
  - name: app
    password: app-secret
    schemas: [shop]
  - name: ops
    password: ops-secret
    schemas: [shop, crm]
datahosts:
  - name: dh1
    primary:
      address: {host}:{port}
      user: {user}
      password: {password}
    pool:
      max: 4
datanodes:
  - name: dn1
    datahost: dh1
    database: {physical}
schemas:
  - name: shop
    default_datanode: dn1
  - name: crm
    default_datanode: dn1
",
        host = backend.host,
        port = backend.port,
        user = backend.user,
        password = backend.password,
    );
    std::fs::write(&path, text).expect("write config");
    path
}

fn start(config: &Path) -> ShoalProcess {
    ShoalProcess::start(&["--config".to_string(), config.display().to_string()])
}

#[tokio::test]
async fn config_users_log_in_and_see_their_schemas() {
    let backend = shared_backend();
    let physical = unique_name("cfg");
    backend.fresh_db(&physical).await;
    let config = write_config(&backend, &physical);
    let shoal = start(&config);

    let mut app = Conn::new(shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .unwrap_or_else(|e| panic!("config user login: {e}\nshoal log:\n{}", shoal.log()));
    app.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    app.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
    let mut direct = backend.conn(Some(&physical)).await;
    let n: Option<i64> = direct.query_first("SELECT COUNT(*) FROM t").await.unwrap();
    assert_eq!(
        n,
        Some(1),
        "the logical schema shop is not the physical database"
    );
    // USE of the logical name works; other names do not.
    app.query_drop("USE shop").await.unwrap();
    let (code, state, msg) = server_error(app.query_drop("USE crm").await);
    assert!(
        (code == 1049 || code == 1044) && state == "42000",
        "app may not use crm: got {code} {state} {msg}"
    );
    let (code, ..) = server_error(app.query_drop(format!("USE {physical}")).await);
    assert!(
        code == 1049 || code == 1044,
        "the physical name is not a logical schema: {code}"
    );

    // Wrong passwords, the backend's own account, and a schema outside the user's list.
    for (user, pass, db) in [
        ("app", "wrong", Some("shop")),
        ("nobody", "app-secret", Some("shop")),
        (
            backend.user.as_str(),
            backend.password.as_str(),
            Some("shop"),
        ),
    ] {
        let (code, state, msg) = server_error(Conn::new(shoal.opts_as(user, pass, db)).await);
        assert_eq!(
            (code, state.as_str()),
            (1045, "28000"),
            "{user}/{pass}: {msg}"
        );
    }
    let (code, state, msg) =
        server_error(Conn::new(shoal.opts_as("app", "app-secret", Some("crm"))).await);
    assert!(
        (code == 1049 || code == 1044) && state == "42000",
        "app into crm: {code} {state} {msg}"
    );
    // Issue 3: "an unknown schema 1049 (42000)" (1044 is for a schema that exists but is not
    // the user's).
    let (code, state, msg) =
        server_error(Conn::new(shoal.opts_as("app", "app-secret", Some("nope"))).await);
    assert_eq!(
        (code, state.as_str()),
        (1049, "42000"),
        "login to an unknown schema: {msg}"
    );

    // ops may use both.
    let mut ops = Conn::new(shoal.opts_as("ops", "ops-secret", Some("crm")))
        .await
        .unwrap();
    let n: Option<i64> = ops.query_first("SELECT COUNT(*) FROM t").await.unwrap();
    assert_eq!(n, Some(1));
    ops.query_drop("USE shop").await.unwrap();

    // COM_CHANGE_USER re-authenticates against the file's users.
    app.change_user(
        ChangeUserOpts::default()
            .with_user(Some("ops".into()))
            .with_pass(Some("ops-secret".into()))
            .with_db_name(Some("crm".into())),
    )
    .await
    .expect("change user to ops");
    // Now ops, in crm (the same physical database).
    let n: Option<i64> = app.query_first("SELECT COUNT(*) FROM t").await.unwrap();
    assert_eq!(n, Some(1), "after COM_CHANGE_USER to ops in crm");
    app.query_drop("USE crm").await.expect("ops may use crm");
    let mut other = Conn::new(shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .unwrap();
    let (code, ..) = server_error(
        other
            .change_user(
                ChangeUserOpts::default()
                    .with_user(Some("ops".into()))
                    .with_pass(Some("wrong".into())),
            )
            .await,
    );
    assert_eq!(code, 1045, "change user with a wrong password");
}

#[test]
fn check_validates_and_prints_the_topology() {
    let backend = shared_backend();
    let config = write_config(&backend, "physical_db");
    let out = Command::new(shoal_bin())
        .args(["--check", "--config"])
        .arg(&config)
        .output()
        .expect("run shoal --check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "--check refused a valid file:\n{text}"
    );
    for needle in [
        "dn1",
        "physical_db",
        &format!("{}:{}", backend.host, backend.port),
    ] {
        assert!(
            text.contains(needle),
            "--check output does not mention {needle}:\n{text}"
        );
    }

    let broken = scratch_dir().join(format!("{}.yaml", unique_name("broken")));
    let good = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &broken,
        good.replace("datahost: dh1", "datahost: dh_missing"),
    )
    .unwrap();
    let out = Command::new(shoal_bin())
        .args(["--check", "--config"])
        .arg(&broken)
        .output()
        .expect("run shoal --check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "--check accepted a datanode on an unknown datahost:\n{text}"
    );
    assert!(
        text.contains("dh_missing"),
        "the error does not name the offending value:\n{text}"
    );
}
