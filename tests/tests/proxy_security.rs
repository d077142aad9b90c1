//! Security and hardening with real clients: TLS (the `mariadb` CLI and mysql_async verifying the
//! demo CA), `caching_sha2_password` over TLS and over plain TCP (RSA key exchange), hashed
//! passwords in the config, wrong passwords and the per-address throttle, TLS required, login
//! errors as every client sees them, and what unauthenticated clients may cost.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, SslOpts};
use shoal_tests::raw::{COM_QUERY, RawConn, Reply};
use shoal_tests::shoal::{free_port, shoal_bin};
use shoal_tests::{Backend, ShoalProcess, scratch_dir, server_error, shared_backend, unique_name};

/// `shoal gen-cert` into a fresh directory: ca.pem, server-cert.pem, server-key.pem.
fn demo_certs() -> PathBuf {
    let dir = scratch_dir().join(unique_name("certs"));
    let out = Command::new(shoal_bin())
        .args(["gen-cert", "--dir"])
        .arg(&dir)
        .output()
        .expect("run shoal gen-cert");
    assert!(out.status.success(), "gen-cert: {out:?}");
    dir
}

/// `shoal hash-password` of `password`: (native hash, caching_sha2 hash).
fn hashes(password: &str) -> (String, String) {
    use std::io::Write;
    let mut child = Command::new(shoal_bin())
        .arg("hash-password")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run shoal hash-password");
    writeln!(child.stdin.take().unwrap(), "{password}").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {name} in {text:?}"))
    };
    (
        field("mysql_native_password:"),
        field("caching_sha2_password:"),
    )
}

/// Users: `nat` (plain password, native), `sha` (plain password, caching_sha2), `hnat`
/// (native hash), `hsha` (caching_sha2 hash); all with password `pw-<name>`.
fn write_config(backend: &Backend, db: &str, certs: &Path, required: bool) -> PathBuf {
    let (hnat, _) = hashes("pw-hnat");
    let (_, hsha) = hashes("pw-hsha");
    let path = scratch_dir().join(format!("{}.yaml", unique_name("security")));
    let text = format!(
        "server:
  tls:
    cert: {certs}/server-cert.pem
    key: {certs}/server-key.pem
    required: {required}
users:
  - {{ name: nat, password: pw-nat, schemas: [shop] }}
  - {{ name: sha, password: pw-sha, auth_plugin: caching_sha2_password, schemas: [shop] }}
  - {{ name: hnat, password: '{hnat}', schemas: [shop], max_connections: 1 }}
  - {{ name: hsha, password: '{hsha}', schemas: [shop] }}
datahosts:
  - name: dh1
    primary: {{ address: '{host}:{port}', user: {user}, password: {password} }}
datanodes:
  - {{ name: dn1, datahost: dh1, database: {db} }}
schemas:
  - {{ name: shop, default_datanode: dn1 }}
",
        certs = certs.display(),
        host = backend.host,
        port = backend.port,
        user = backend.user,
        password = backend.password,
    );
    std::fs::write(&path, text).expect("write config");
    path
}

fn start(config: &Path, extra: &[&str]) -> ShoalProcess {
    let mut args = vec!["--config".to_string(), config.display().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    ShoalProcess::start(&args)
}

/// Runs the `mariadb` CLI against Shoal; returns (success, stdout + stderr).
fn mariadb_cli(shoal: &ShoalProcess, user: &str, password: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("mariadb")
        .args(["-h127.0.0.1", &format!("-P{}", shoal.port())])
        .arg(format!("-u{user}"))
        .arg(format!("-p{password}"))
        .arg("--connect-timeout=20")
        .args(args)
        .output()
        .expect("run the mariadb CLI");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn tls_args(certs: &Path) -> Vec<String> {
    vec![
        "--ssl".into(),
        format!("--ssl-ca={}/ca.pem", certs.display()),
        "--ssl-verify-server-cert".into(),
    ]
}

fn opts(shoal: &ShoalProcess, user: &str, password: &str, tls: Option<&Path>) -> Opts {
    let mut b = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(shoal.port())
        .user(Some(user))
        .pass(Some(password))
        .db_name(Some("shop"))
        .prefer_socket(false);
    if let Some(certs) = tls {
        b = b.ssl_opts(SslOpts::default().with_root_certs(vec![certs.join("ca.pem").into()]));
    }
    b.into()
}

/// Logs in with mysql_async and returns whether the session is TLS, as the backend-independent
/// proof that a query runs through.
async fn query_through(o: Opts) -> Result<i64, mysql_async::Error> {
    let mut c = Conn::new(o).await?;
    let v: Option<i64> = c.query_first("SELECT 40 + 2").await?;
    c.disconnect().await?;
    Ok(v.unwrap_or(0))
}

#[tokio::test]
async fn tls_and_caching_sha2_with_real_clients() {
    let backend = shared_backend();
    let db = unique_name("sec");
    backend.fresh_db(&db).await;
    let certs = demo_certs();
    let config = write_config(&backend, &db, &certs, false);
    let shoal = start(&config, &[]);
    let tls = tls_args(&certs);
    let tls: Vec<&str> = tls.iter().map(String::as_str).collect();

    // The caching_sha2 hash's first login over plain TCP can only be a full authentication
    // with the RSA key exchange (nothing is cached yet): the mariadb CLI asks for the key.
    let (ok, out) = mariadb_cli(
        &shoal,
        "hsha",
        "pw-hsha",
        &["shop", "--skip-ssl", "-e", "SELECT 'rsa-ok'"],
    );
    assert!(ok && out.contains("rsa-ok"), "{out}\n{}", shoal.log());

    for (user, password) in [
        ("nat", "pw-nat"),
        ("sha", "pw-sha"),
        ("hnat", "pw-hnat"),
        ("hsha", "pw-hsha"),
    ] {
        // mariadb CLI over TLS, verifying the certificate against the demo CA.
        let mut args = vec!["shop", "-e", "\\s"];
        args.extend(&tls);
        let (ok, out) = mariadb_cli(&shoal, user, password, &args);
        assert!(ok, "{user} over TLS: {out}\n{}", shoal.log());
        assert!(
            out.contains("Cipher in use is TLS"),
            "{user}: no TLS cipher in {out}"
        );
        // and over plain TCP.
        let (ok, out) = mariadb_cli(
            &shoal,
            user,
            password,
            &["shop", "--skip-ssl", "-e", "SELECT 'plain-ok'"],
        );
        assert!(ok && out.contains("plain-ok"), "{user} plain: {out}");
        // Wrong passwords, both ways: 1045.
        let mut args = vec!["shop", "-e", "SELECT 1"];
        args.extend(&tls);
        let (ok, out) = mariadb_cli(&shoal, user, "wrong", &args);
        assert!(
            !ok && out.contains("ERROR 1045"),
            "{user} wrong over TLS: {out}"
        );
        let (ok, out) = mariadb_cli(
            &shoal,
            user,
            "wrong",
            &["shop", "--skip-ssl", "-e", "SELECT 1"],
        );
        assert!(
            !ok && out.contains("ERROR 1045"),
            "{user} wrong plain: {out}"
        );

        // mysql_async: announced native, switched to the user's plugin where it differs.
        assert_eq!(
            query_through(opts(&shoal, user, password, Some(&certs)))
                .await
                .unwrap(),
            42,
            "{user} tls"
        );
        assert_eq!(
            query_through(opts(&shoal, user, password, None))
                .await
                .unwrap(),
            42,
            "{user} plain"
        );
        let (code, _, _) =
            server_error(query_through(opts(&shoal, user, "wrong", Some(&certs))).await);
        assert_eq!(code, 1045, "{user}");
        let (code, _, _) = server_error(query_through(opts(&shoal, user, "wrong", None)).await);
        assert_eq!(code, 1045, "{user}");
    }

    // A raw client answering the caching_sha2 scramble for `sha` takes the fast path.
    let (_c, reply) = RawConn::login_claiming_sha2(&shoal.addr(), "sha", "pw-sha", Some("shop"))
        .await
        .unwrap();
    assert!(matches!(reply, Reply::Ok), "{reply:?}");

    // users[].max_connections: hnat may hold one session.
    let mut first = Conn::new(opts(&shoal, "hnat", "pw-hnat", None))
        .await
        .unwrap();
    let (code, _, msg) = server_error(Conn::new(opts(&shoal, "hnat", "pw-hnat", None)).await);
    assert_eq!(code, 1203, "{msg}");
    let (ok, out) = mariadb_cli(&shoal, "hnat", "pw-hnat", &["shop", "-e", "SELECT 1"]);
    assert!(!ok && out.contains("ERROR 1203"), "{out}");
    first.query_drop("DO 1").await.unwrap();
    first.disconnect().await.unwrap();
    // COM_QUIT and the next login race (as on MariaDB): the slot is freed once Shoal has read
    // the quit, so a 1203 in between is retried; any other answer fails at once.
    let mut tries = 0;
    let v = loop {
        match query_through(opts(&shoal, "hnat", "pw-hnat", None)).await {
            Err(mysql_async::Error::Server(e)) if e.code == 1203 && tries < 100 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            other => break other.unwrap(),
        }
    };
    assert_eq!(v, 42);

    // The startup log names the RSA key by fingerprint.
    assert!(shoal.log().contains("fingerprint="), "{}", shoal.log());
}

#[tokio::test]
async fn plain_clients_are_refused_when_tls_is_required() {
    let backend = shared_backend();
    let db = unique_name("sec");
    backend.fresh_db(&db).await;
    let certs = demo_certs();
    let config = write_config(&backend, &db, &certs, true);
    let shoal = start(&config, &[]);

    let (ok, out) = mariadb_cli(
        &shoal,
        "nat",
        "pw-nat",
        &["shop", "--skip-ssl", "-e", "SELECT 1"],
    );
    assert!(!ok && out.contains("ERROR 3159"), "{out}");
    let (code, _, _) = server_error(query_through(opts(&shoal, "nat", "pw-nat", None)).await);
    assert_eq!(code, 3159);
    let (_c, reply) = RawConn::login(&shoal.addr(), "nat", "pw-nat", Some("shop"))
        .await
        .unwrap();
    assert_eq!(reply.err_code(), Some(3159), "{reply:?}");

    let tls = tls_args(&certs);
    let mut args: Vec<&str> = vec!["shop", "-e", "SELECT 'tls-ok'"];
    args.extend(tls.iter().map(String::as_str));
    let (ok, out) = mariadb_cli(&shoal, "nat", "pw-nat", &args);
    assert!(ok && out.contains("tls-ok"), "{out}");
    assert_eq!(
        query_through(opts(&shoal, "nat", "pw-nat", Some(&certs)))
            .await
            .unwrap(),
        42
    );
}

#[tokio::test]
async fn repeated_failed_logins_are_throttled_and_logged() {
    let backend = shared_backend();
    let shoal = ShoalProcess::quick(&backend, "mysql", &[]);
    for _ in 0..5 {
        let (_c, reply) = RawConn::login(&shoal.addr(), &backend.user, "wrong", None)
            .await
            .unwrap();
        assert_eq!(reply.err_code(), Some(1045), "{reply:?}");
    }
    let log = shoal.log();
    assert!(
        log.contains("WARN") && log.contains("login throttled") && log.contains("client=127.0.0.1"),
        "{log}"
    );
    // The right password still gets in (after its delay), and resets the address's record.
    let mut c = shoal.conn(&backend, None).await;
    c.query_drop("DO 1").await.unwrap();
}

#[tokio::test]
async fn login_errors_reach_every_client_intact() {
    let backend = shared_backend();
    // Backend down: a port nothing listens on.
    let dead = format!(
        "mysql://{}:{}@127.0.0.1:{}/shop",
        backend.user,
        backend.password,
        free_port()
    );
    let shoal = ShoalProcess::start(&[
        "--backend".to_string(),
        dead,
        "--max-connections".into(),
        "3".into(),
    ]);
    let (ok, out) = mariadb_cli(
        &shoal,
        &backend.user,
        &backend.password,
        &["shop", "-e", "SELECT 1"],
    );
    assert!(!ok, "{out}");
    assert!(
        !out.contains("2027")
            && out.contains("ERROR 1429")
            && out.contains("Can't connect to backend"),
        "{out}"
    );
    let o = OptsBuilder::from_opts(shoal.opts(&backend, Some("shop")));
    let (code, _, msg) = server_error(Conn::new(o).await);
    assert_eq!(code, 1429, "{msg}");
    let (_c, reply) = RawConn::login(
        &shoal.addr(),
        &backend.user,
        &backend.password,
        Some("shop"),
    )
    .await
    .unwrap();
    assert_eq!(reply.err_code(), Some(1429), "{reply:?}");
    drop(shoal);

    let db = unique_name("sec");
    backend.fresh_db(&db).await;
    let certs = demo_certs();
    let config = write_config(&backend, &db, &certs, false);
    let shoal = start(&config, &["--max-connections", "2"]);
    // Wrong password.
    let (ok, out) = mariadb_cli(&shoal, "nat", "bad", &["shop", "-e", "SELECT 1"]);
    assert!(!ok && out.contains("ERROR 1045"), "{out}");
    let (code, _, _) = server_error(Conn::new(opts(&shoal, "nat", "bad", None)).await);
    assert_eq!(code, 1045);
    let (_c, reply) = RawConn::login(&shoal.addr(), "nat", "bad", Some("shop"))
        .await
        .unwrap();
    assert_eq!(reply.err_code(), Some(1045));
    // Unknown schema.
    let (ok, out) = mariadb_cli(&shoal, "nat", "pw-nat", &["nosuch", "-e", "SELECT 1"]);
    assert!(!ok && out.contains("ERROR 1049"), "{out}");
    let o = OptsBuilder::from_opts(opts(&shoal, "nat", "pw-nat", None)).db_name(Some("nosuch"));
    let (code, _, _) = server_error(Conn::new(o).await);
    assert_eq!(code, 1049);
    let (_c, reply) = RawConn::login(&shoal.addr(), "nat", "pw-nat", Some("nosuch"))
        .await
        .unwrap();
    assert_eq!(reply.err_code(), Some(1049));
    // Too many connections (server.max_connections 2, both held).
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(
            Conn::new(opts(&shoal, "nat", "pw-nat", None))
                .await
                .unwrap(),
        );
    }
    let (ok, out) = mariadb_cli(
        &shoal,
        "nat",
        "pw-nat",
        &["shop", "--skip-ssl", "-e", "SELECT 1"],
    );
    assert!(!ok && out.contains("ERROR 1040"), "{out}");
    // A client that wanted TLS gets the same error before the TLS handshake, which libmariadb
    // reports (as it does against MariaDB itself) with the code and message quoted.
    let (ok, out) = mariadb_cli(
        &shoal,
        "nat",
        "pw-nat",
        &["shop", "--ssl", "-e", "SELECT 1"],
    );
    assert!(!ok && out.contains("1040 - Too many connections"), "{out}");
    let (code, _, _) = server_error(Conn::new(opts(&shoal, "nat", "pw-nat", None)).await);
    assert_eq!(code, 1040);
    let mut raw = RawConn::connect(&shoal.addr()).await.unwrap();
    let first = raw.read_packet().await.unwrap();
    assert_eq!(Reply::parse(&first).err_code(), Some(1040));
    drop(held);
}

/// Shoal's resident memory, from /proc.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[tokio::test]
async fn unauthenticated_clients_are_cut_off_and_cost_little() {
    let backend = shared_backend();
    let shoal = ShoalProcess::quick(&backend, "mysql", &["--handshake-timeout-secs", "3"]);
    // Warm up (first session, pool, allocator) before measuring.
    let mut c = shoal.conn(&backend, None).await;
    c.query_drop("DO 1").await.unwrap();
    let before = rss_kib(shoal.pid());

    // 20 clients announce a 100 MB packet (16 MiB frames) and stream 8 MiB of it: each is
    // refused at the header (1153) and disconnected.
    let mut streams = Vec::new();
    for _ in 0..20 {
        let addr = shoal.addr();
        streams.push(tokio::spawn(async move {
            let mut raw = RawConn::connect(&addr).await.unwrap();
            raw.read_packet().await.unwrap();
            raw.write_raw(&[0xff, 0xff, 0xff, 1]).await.unwrap();
            let chunk = vec![b'x'; 64 * 1024];
            for _ in 0..128 {
                if raw.write_raw(&chunk).await.is_err() {
                    break;
                }
            }
            raw.closed_within(Duration::from_secs(30)).await
        }));
    }
    // 20 clients trickle one byte a second: cut off by the handshake timeout.
    let mut trickles = Vec::new();
    for _ in 0..20 {
        let addr = shoal.addr();
        trickles.push(tokio::spawn(async move {
            let mut raw = RawConn::connect(&addr).await.unwrap();
            raw.read_packet().await.unwrap();
            for _ in 0..60 {
                if raw.write_raw(&[0x10]).await.is_err() {
                    return true;
                }
                if raw.closed_within(Duration::from_secs(1)).await {
                    return true;
                }
            }
            false
        }));
    }
    for t in streams {
        assert!(
            t.await.unwrap(),
            "a client streaming a huge packet before login stayed connected"
        );
    }
    for t in trickles {
        assert!(
            t.await.unwrap(),
            "a trickling client outlived the handshake timeout"
        );
    }
    let after = rss_kib(shoal.pid());
    assert!(
        after <= before + 8 * 1024,
        "Shoal's RSS grew from {before} KiB to {after} KiB for clients that never logged in"
    );

    // 500 unauthenticated clients at once do not keep a real client out.
    let mut idle = Vec::new();
    for _ in 0..500 {
        let mut raw = RawConn::connect(&shoal.addr()).await.unwrap();
        raw.write_raw(&[0x05, 0x00]).await.unwrap();
        idle.push(raw);
    }
    let mut c2 = shoal.conn(&backend, None).await;
    let v: Option<i64> = c2.query_first("SELECT 6 * 7").await.unwrap();
    assert_eq!(v, Some(42));
    drop(idle);
    c.query_drop("DO 1").await.unwrap();
}

#[tokio::test]
async fn max_allowed_packet_is_enforced_with_1153_and_close() {
    let backend = shared_backend();
    let shoal = ShoalProcess::quick(&backend, "mysql", &["--max-allowed-packet", "1048576"]);
    let (mut raw, reply) = RawConn::login(&shoal.addr(), &backend.user, &backend.password, None)
        .await
        .unwrap();
    assert!(matches!(reply, Reply::Ok), "{reply:?}");
    // Just under the limit passes.
    let mut sql = b"SELECT '".to_vec();
    sql.extend(std::iter::repeat_n(b'a', 1_000_000));
    sql.push(b'\'');
    let r = raw.command(COM_QUERY, &sql).await.unwrap();
    assert!(r.err_code().is_none(), "{r:?}");
    raw.read_until_eof().await.ok();
    // Over it: 1153, then the connection is closed.
    let mut raw = RawConn::login(&shoal.addr(), &backend.user, &backend.password, None)
        .await
        .unwrap()
        .0;
    let big = vec![b' '; 2 << 20];
    let r = raw.command(COM_QUERY, &big).await.unwrap();
    assert_eq!(r.err_code(), Some(1153), "{r:?}");
    assert!(raw.closed_within(Duration::from_secs(10)).await);
}
