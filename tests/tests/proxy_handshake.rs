//! Handshake variants real drivers use: connection attributes, compression, a client that
//! announces `caching_sha2_password` (MySQL 8 connectors), no default schema.

use std::collections::HashMap;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};
use shoal_tests::raw::{COM_PING, RawConn, Reply};
use shoal_tests::{ShoalProcess, shared_backend, unique_name};

#[tokio::test]
async fn connection_attributes_are_accepted() {
    let backend = shared_backend();
    let db = unique_name("attrs");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let attrs: HashMap<String, String> = [
        ("_client_name", "libmysql"),
        ("_client_version", "8.0.36"),
        ("program_name", "shoal-e2e ✓"),
        ("_os", "Linux"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let opts = OptsBuilder::from_opts(shoal.opts(&backend, Some(&db))).connect_attributes(attrs);
    let mut c = Conn::new(opts).await.unwrap_or_else(|e| {
        panic!(
            "login with connection attributes: {e}\nshoal log:\n{}",
            shoal.log()
        )
    });
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn a_client_asking_for_compression_still_works() {
    let backend = shared_backend();
    let db = unique_name("compress");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let opts = OptsBuilder::from_opts(shoal.opts(&backend, Some(&db)))
        .compression(mysql_async::Compression::default());
    let mut c = Conn::new(opts).await.unwrap_or_else(|e| {
        panic!(
            "login asking for compression: {e}\nshoal log:\n{}",
            shoal.log()
        )
    });
    // Big enough to be compressed if compression was negotiated.
    let s: Option<String> = c.query_first("SELECT REPEAT('abc', 100000)").await.unwrap();
    assert_eq!(s.map(|s| s.len()), Some(300_000));
    let n: Option<i64> = c.exec_first("SELECT ? + 1", (41,)).await.unwrap();
    assert_eq!(n, Some(42));
}

#[tokio::test]
async fn a_client_announcing_caching_sha2_password_can_log_in() {
    let backend = shared_backend();
    let db = unique_name("sha2");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let (mut raw, reply) =
        RawConn::login_claiming_sha2(&shoal.addr(), &backend.user, &backend.password, Some(&db))
            .await
            .expect("handshake");
    assert_eq!(
        reply,
        Reply::Ok,
        "login announcing caching_sha2_password\nshoal log:\n{}",
        shoal.log()
    );
    assert_eq!(raw.command(COM_PING, b"").await.unwrap(), Reply::Ok);
    let (_, reply) = RawConn::login_claiming_sha2(&shoal.addr(), &backend.user, "wrong", Some(&db))
        .await
        .expect("handshake");
    assert_eq!(
        reply.err_code(),
        Some(1045),
        "wrong password announcing caching_sha2_password: {reply:?}"
    );
}

#[tokio::test]
async fn a_client_without_a_default_schema_can_pick_one() {
    let backend = shared_backend();
    let db = unique_name("nodb");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut c = shoal.conn(&backend, None).await;
    c.query_drop(format!("USE {db}")).await.unwrap();
    c.query_drop("CREATE TABLE t (x INT)").await.unwrap();
    let current: Option<String> = c.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(current.as_deref(), Some(db.as_str()));
    let mut direct = backend.conn(Some(&db)).await;
    let tables: Vec<String> = direct.query("SHOW TABLES").await.unwrap();
    assert_eq!(tables, vec!["t".to_string()]);
}
