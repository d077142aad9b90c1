//! TLS from Shoal to its backends (`datahosts[].primary.tls`): against a MariaDB started with
//! ssl-cert/ssl-key and an account that may only log in over TLS, each mode is checked by what
//! the backend itself reports (`Ssl_version` of the session, the account that logged in), a
//! certificate signed by another CA is refused under `verify_ca` with a clear error, and pooled
//! TLS connections are reused across client sessions.

use std::path::{Path, PathBuf};
use std::process::Command;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_tests::shoal::{free_port, shoal_bin};
use shoal_tests::{ShoalProcess, http_get, metric_value, scratch_dir, server_error, unique_name};

/// The backend account that MariaDB lets in over TLS only (`REQUIRE SSL`).
const TLS_USER: &str = "tlsonly";
const TLS_PASSWORD: &str = "tls-pw";

/// `shoal gen-cert` into a fresh directory: ca.pem, server-cert.pem, server-key.pem.
fn certs(tag: &str) -> PathBuf {
    let dir = scratch_dir().join(unique_name(tag));
    let out = Command::new(shoal_bin())
        .args(["gen-cert", "--dir"])
        .arg(&dir)
        .output()
        .expect("run shoal gen-cert");
    assert!(out.status.success(), "gen-cert: {out:?}");
    dir
}

/// A MariaDB with TLS on (its certificate from `certs`), database `app` and the TLS-only account.
async fn tls_backend(certs: &Path) -> Cluster {
    let options = [
        format!("ssl-cert={}", certs.join("server-cert.pem").display()),
        format!("ssl-key={}", certs.join("server-key.pem").display()),
        format!("ssl-ca={}", certs.join("ca.pem").display()),
    ];
    let cluster = Cluster::start_with_options(
        ClusterSpec {
            databases: vec!["app".into()],
            ..Default::default()
        },
        &options,
    )
    .await
    .expect("TLS backend starts");
    let mut admin = Conn::new(cluster.admin_opts(0)).await.expect("admin login");
    let have_ssl: Option<String> = admin
        .query_first("SELECT @@have_ssl")
        .await
        .expect("read have_ssl");
    assert_eq!(have_ssl.as_deref(), Some("YES"), "the backend has TLS on");
    for sql in [
        format!("CREATE USER '{TLS_USER}'@'127.0.0.1' IDENTIFIED BY '{TLS_PASSWORD}' REQUIRE SSL"),
        format!("GRANT ALL ON app.* TO '{TLS_USER}'@'127.0.0.1'"),
    ] {
        admin.query_drop(sql).await.expect("create the TLS account");
    }
    admin.disconnect().await.expect("disconnect");
    cluster
}

/// A config with one datahost whose primary has `tls_lines` (YAML flow-map entries).
fn config(cluster: &Cluster, tls_lines: &str) -> PathBuf {
    config_with_pool(cluster, tls_lines, "{}")
}

/// The same, with `pool` (a YAML flow map) as the datahost's pool settings.
fn config_with_pool(cluster: &Cluster, tls_lines: &str, pool: &str) -> PathBuf {
    let path = scratch_dir().join(format!("{}.yaml", unique_name("backend-tls")));
    let text = format!(
        "users:
  - {{ name: app, password: pw-app, schemas: [shop] }}
datahosts:
  - name: dh1
    primary: {{ address: '{addr}', user: {TLS_USER}, password: {TLS_PASSWORD}{tls_lines} }}
    pool: {pool}
datanodes:
  - {{ name: dn1, datahost: dh1, database: app }}
schemas:
  - {{ name: shop, default_datanode: dn1 }}
",
        addr = cluster.primary(0).addr(),
    );
    std::fs::write(&path, text).expect("write config");
    path
}

fn start(config: &Path) -> ShoalProcess {
    ShoalProcess::start(&["--config".to_string(), config.display().to_string()])
}

fn opts(shoal: &ShoalProcess) -> Opts {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(shoal.port())
        .user(Some("app"))
        .pass(Some("pw-app"))
        .db_name(Some("shop"))
        .prefer_socket(false)
        .into()
}

/// What the backend says about the session Shoal gave this client: (TLS version, account).
async fn backend_session(shoal: &ShoalProcess) -> Result<(String, String), mysql_async::Error> {
    let mut c = Conn::new(opts(shoal)).await?;
    let version: Option<String> = c
        .query_first(
            "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
             WHERE VARIABLE_NAME = 'SSL_VERSION'",
        )
        .await?;
    let account: Option<String> = c.query_first("SELECT CURRENT_USER()").await?;
    c.disconnect().await?;
    Ok((version.unwrap_or_default(), account.unwrap_or_default()))
}

async fn global_connections(admin: &mut Conn) -> u64 {
    let row: Option<(String, u64)> = admin
        .query_first("SHOW GLOBAL STATUS LIKE 'Connections'")
        .await
        .expect("read Connections");
    row.expect("Connections row").1
}

#[tokio::test]
async fn backend_tls_modes_against_a_tls_only_account() {
    let good = certs("backend-ca");
    let other = certs("other-ca");
    let cluster = tls_backend(&good).await;
    let expected_account = format!("{TLS_USER}@127.0.0.1");

    // Plain: MariaDB refuses the TLS-only account, so what follows proves TLS is really used.
    let shoal = start(&config(&cluster, ", tls: off"));
    let (code, _, message) = server_error(backend_session(&shoal).await);
    assert!(
        message.contains("Access denied") || code == 1045,
        "plain login of a REQUIRE SSL account: {code} {message}"
    );
    drop(shoal);

    for tls in [
        ", tls: required".to_string(),
        format!(
            ", tls: verify_ca, tls_ca: '{}'",
            good.join("ca.pem").display()
        ),
    ] {
        let shoal = start(&config(&cluster, &tls));
        let (version, account) = backend_session(&shoal)
            .await
            .unwrap_or_else(|e| panic!("{tls}: {e}; log:\n{}", shoal.log()));
        assert!(
            version.starts_with("TLSv1.2") || version.starts_with("TLSv1.3"),
            "{tls}: backend session TLS version {version:?}"
        );
        assert_eq!(account, expected_account, "{tls}");

        // Pooled TLS connections are reused: ten client sessions one after another open far
        // fewer backend connections (an idle TLS connection must not look closed to the pool).
        let mut admin = Conn::new(cluster.admin_opts(0)).await.expect("admin login");
        let before = global_connections(&mut admin).await;
        for _ in 0..10 {
            backend_session(&shoal).await.expect("session over TLS");
        }
        let opened = global_connections(&mut admin).await - before;
        assert!(
            opened < 5,
            "{tls}: 10 sequential sessions opened {opened} backend connections"
        );
        admin.disconnect().await.expect("disconnect");
    }

    // A certificate from another CA (of the same name: rustls finds it and reports
    // BadSignature; a CA of another name gives UnknownIssuer): refused, saying why, at startup
    // and to clients.
    let wrong = format!(
        ", tls: verify_ca, tls_ca: '{}'",
        other.join("ca.pem").display()
    );
    let shoal = start(&config(&cluster, &wrong));
    let (code, _, message) = server_error(backend_session(&shoal).await);
    assert_eq!(code, 1429, "{message}");
    assert!(
        message.contains("TLS handshake failed")
            && message.contains("verify_ca")
            && message.contains("invalid peer certificate"),
        "{message}"
    );
    assert!(
        shoal.log().contains("invalid peer certificate"),
        "startup warning missing; log:\n{}",
        shoal.log()
    );
}

#[tokio::test]
async fn backend_tls_settings_are_checked_at_start() {
    let good = certs("backend-ca-settings");
    let cluster = tls_backend(&good).await;
    let missing = scratch_dir().join(unique_name("no-such-ca")).join("ca.pem");
    for (tls, says) in [
        (
            ", tls: verify_ca".to_string(),
            "tls: verify_ca needs tls_ca",
        ),
        (
            format!(
                ", tls: required, tls_ca: '{}'",
                good.join("ca.pem").display()
            ),
            "tls_ca is used only with tls: verify_ca",
        ),
        (
            format!(", tls: verify_ca, tls_ca: '{}'", missing.display()),
            "tls_ca",
        ),
        (", tls: sometimes".to_string(), "verify_ca"),
    ] {
        let path = config(&cluster, &tls);
        let failure =
            match ShoalProcess::try_start(&["--config".into(), path.display().to_string()]) {
                Ok(_) => panic!("{tls}: shoal started"),
                Err(failure) => failure,
            };
        assert!(failure.contains(says), "{tls}: {failure}");
    }
}

#[tokio::test]
async fn tls_required_against_a_backend_without_tls_is_refused() {
    let backend = shoal_tests::shared_backend();
    let path = scratch_dir().join(format!("{}.yaml", unique_name("backend-no-tls")));
    std::fs::write(
        &path,
        format!(
            "users:
  - {{ name: app, password: pw-app, schemas: [shop] }}
datahosts:
  - name: dh1
    primary: {{ address: '{}:{}', user: {}, password: {}, tls: required }}
datanodes:
  - {{ name: dn1, datahost: dh1, database: mysql }}
schemas:
  - {{ name: shop, default_datanode: dn1 }}
",
            backend.host, backend.port, backend.user, backend.password
        ),
    )
    .expect("write config");
    let shoal = start(&path);
    let (code, _, message) = server_error(backend_session(&shoal).await);
    assert_eq!(code, 1429, "{message}");
    assert!(
        message.contains("does not offer TLS") && message.contains("tls: required"),
        "{message}"
    );
}

/// A pooled TLS connection taken by a session served on the other core moves to that core's
/// event loop with its TLS session. With one connection in the pool and two sessions (the
/// second goes to the core serving fewer, the other one), every hand-off between them is a
/// move: each statement still runs over TLS on the one connection, and `/metrics` counts the
/// moves (before, a TLS connection never moved and every response woke the core it was
/// opened on).
#[tokio::test]
async fn a_pooled_tls_connection_moves_to_the_core_of_the_session_that_takes_it() {
    let cluster = tls_backend(&certs("backend-ca-move")).await;
    let admin = format!("127.0.0.1:{}", free_port());
    let config = config_with_pool(
        &cluster,
        ", tls: required",
        "{ max: 1, acquire_timeout: 30s }",
    );
    let shoal = ShoalProcess::start(&[
        "--config".to_string(),
        config.display().to_string(),
        "--threads".to_string(),
        "2".to_string(),
        "--admin-listen".to_string(),
        admin.clone(),
    ]);
    let tls_version = "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
                       WHERE VARIABLE_NAME = 'SSL_VERSION'";
    let mut first = Conn::new(opts(&shoal)).await.expect("first session");
    let mut second = Conn::new(opts(&shoal)).await.expect("second session");
    for round in 0..3 {
        for (name, c) in [("first", &mut first), ("second", &mut second)] {
            let version: Option<String> = c
                .query_first(tls_version)
                .await
                .unwrap_or_else(|e| panic!("round {round}, {name}: {e}; log:\n{}", shoal.log()));
            let version = version.unwrap_or_default();
            assert!(
                version.starts_with("TLSv1.2") || version.starts_with("TLSv1.3"),
                "round {round}, {name}: backend session TLS version {version:?}"
            );
        }
    }
    let (status, metrics) = http_get(&admin, "/metrics").await;
    assert_eq!(status, 200, "{metrics}");
    assert_eq!(
        metric_value(&metrics, "shoal_pool_opened_total", &[]),
        1.0,
        "one connection in the pool served both sessions:\n{metrics}"
    );
    // Five hand-offs between the two sessions, each to the other core.
    assert!(
        metric_value(&metrics, "shoal_pool_moved_total", &[]) >= 5.0,
        "moves between cores:\n{metrics}"
    );
    first.disconnect().await.expect("disconnect");
    second.disconnect().await.expect("disconnect");
}
