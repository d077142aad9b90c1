//! MariaDB's metadata caching (MARIADB_CLIENT_CACHE_METADATA, what Connector/C and the
//! MariaDB connectors ask for): a prepared statement's execute leaves its column definitions
//! out while they have not changed, and every column count carries a "metadata follows" byte.
//! Checked byte for byte against the backend itself, with a hand-written client that shows
//! every packet.

use mysql_async::prelude::Queryable;
use shoal_tests::raw::{RawConn, Reply};
use shoal_tests::{ShoalProcess, shared_backend, shared_backend_layout, unique_name};

/// What one connection saw: the executes' packets before and after an ALTER TABLE, and a text
/// query's column count.
struct Seen {
    first: Vec<Vec<u8>>,
    second: Vec<Vec<u8>>,
    altered: Vec<Vec<u8>>,
    text_count: Vec<u8>,
}

/// Logs in at `addr` (asking for metadata caching when `cache`), builds `t` afresh, then
/// prepares a select of it and executes it twice, alters a column's type, and executes it
/// again.
async fn run(addr: &str, user: &str, password: &str, db: &str, cache: bool) -> (bool, Seen) {
    let (mut c, reply, negotiated) = if cache {
        RawConn::login_caching_metadata(addr, user, password, Some(db))
            .await
            .expect("login")
    } else {
        let (c, r) = RawConn::login(addr, user, password, Some(db))
            .await
            .expect("login");
        (c, r, false)
    };
    assert_eq!(reply, Reply::Ok, "login at {addr}");
    for sql in [
        "DROP TABLE IF EXISTS t",
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO t (id, v) VALUES (1, 10), (2, 20)",
    ] {
        let r = c.query_packets(sql).await.expect(sql);
        assert_eq!(r.len(), 1, "{sql}: {r:?}");
        assert_eq!(Reply::parse(&r[0]), Reply::Ok, "{sql} at {addr}");
    }
    let (id, columns) = c
        .prepare("SELECT id, v FROM t ORDER BY id")
        .await
        .expect("prepare");
    assert_eq!(columns, 2);
    let first = c.execute_packets(id).await.expect("execute");
    let second = c.execute_packets(id).await.expect("execute");
    c.query_packets("ALTER TABLE t MODIFY v VARCHAR(10)")
        .await
        .expect("alter");
    let altered = c.execute_packets(id).await.expect("execute");
    for e in [&first, &second, &altered] {
        assert_eq!(e.len(), if e[0] == [2, 0] { 5 } else { 7 }, "{addr}: {e:?}");
    }
    let text = c.query_packets("SELECT id, v FROM t").await.expect("text");
    (
        negotiated,
        Seen {
            first,
            second,
            altered,
            text_count: text[0].clone(),
        },
    )
}

#[tokio::test]
async fn quick_mode_skips_unchanged_metadata_exactly_as_the_backend_does() {
    let backend = shared_backend();
    let db = unique_name("mdcache");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let direct_addr = format!("{}:{}", backend.host, backend.port);
    let (u, pw) = (backend.user.as_str(), backend.password.as_str());

    let (direct_on, direct) = run(&direct_addr, u, pw, &db, true).await;
    assert!(
        direct_on,
        "the backend (MariaDB 10.6 or later) offers metadata caching"
    );
    // The backend's own behaviour, which the relay must reproduce: the prepare sent the
    // definitions, so the executes leave them out (the EOF only); after the ALTER they
    // changed and come again.
    assert_eq!(direct.first[0], [2, 0]);
    assert_eq!(direct.second[0], [2, 0]);
    assert_eq!(direct.altered[0], [2, 1]);
    assert_eq!(direct.text_count, [2, 1]);

    let (via_on, via) = run(&shoal.addr(), u, pw, &db, true).await;
    assert!(
        via_on,
        "Shoal offers metadata caching in front of a backend that does"
    );
    assert_eq!(via.first, direct.first, "first execute\n{}", shoal.log());
    assert_eq!(via.second, direct.second, "second execute\n{}", shoal.log());
    assert_eq!(via.altered, direct.altered, "after ALTER\n{}", shoal.log());
    assert_eq!(via.text_count, direct.text_count);

    // A client without it, on the same pool: no flag byte, definitions every time (a
    // connection that negotiated caching for the client before is not given to it).
    let (_, plain_direct) = run(&direct_addr, u, pw, &db, false).await;
    let (_, plain) = run(&shoal.addr(), u, pw, &db, false).await;
    assert_eq!(plain_direct.second[0], [2]);
    assert_eq!(plain_direct.second.len(), 7);
    assert_eq!(plain.first, plain_direct.first, "{}", shoal.log());
    assert_eq!(plain.second, plain_direct.second, "{}", shoal.log());
    assert_eq!(plain.altered, plain_direct.altered, "{}", shoal.log());
    assert_eq!(plain.text_count, [2]);
}

#[tokio::test]
async fn routed_results_say_their_definitions_follow() {
    let backend = shared_backend();
    let (schema, shoal) = shared_backend_layout(
        &backend,
        "mdroute",
        "      - { name: t, type: sharded, shard_key: id, rule: by_id, datanodes: \"dn1, dn2\" }\n",
    )
    .await;
    // The router's backend connections never cache metadata (their statements serve every
    // session): a caching client gets every definition, flagged as following, from merged
    // results and from one datanode's relayed result alike.
    let (on, seen) = run(&shoal.addr(), "app", "app-secret", &schema, true).await;
    assert!(on, "offered in front of a MariaDB backend");
    let (_, plain) = run(&shoal.addr(), "app", "app-secret", &schema, false).await;
    for (what, cached, plain) in [
        ("first", &seen.first, &plain.first),
        ("second", &seen.second, &plain.second),
        ("altered", &seen.altered, &plain.altered),
    ] {
        assert_eq!(cached[0], [2, 1], "{what}\n{}", shoal.log());
        assert_eq!(plain[0], [2], "{what}");
        // Definitions, rows and terminator as a client without caching gets them.
        assert_eq!(cached[1..], plain[1..], "{what}\n{}", shoal.log());
        assert_eq!(cached.len(), 1 + 3 + 2 + 1, "{what}");
    }
    assert_eq!(seen.text_count, [2, 1]);
    assert_eq!(plain.text_count, [2]);

    // One shard's statement: relayed from the datanode with the flag added.
    let (mut c, _, _) =
        RawConn::login_caching_metadata(&shoal.addr(), "app", "app-secret", Some(&schema))
            .await
            .expect("login");
    let (id, _) = c
        .prepare("SELECT id, v FROM t WHERE id = 1")
        .await
        .expect("prepare");
    for _ in 0..2 {
        let e = c.execute_packets(id).await.expect("execute");
        assert_eq!(e[0], [2, 1], "{}", shoal.log());
        assert_eq!(e.len(), 1 + 3 + 1 + 1);
    }
    // The session is still in step: a client library reads the same.
    let mut m = mysql_async::Conn::new(shoal.opts_as("app", "app-secret", Some(&schema)))
        .await
        .expect("mysql_async");
    let v: Vec<(i64, String)> = m.exec("SELECT id, v FROM t ORDER BY id", ()).await.unwrap();
    assert_eq!(v, [(1, "10".to_string()), (2, "20".to_string())]);
}
