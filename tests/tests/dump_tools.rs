//! What dump tools send through a sharded Shoal (issue 46, parts 3 and 4).
//!
//! - An INSERT / REPLACE without a column list (mydumper's ``INSERT INTO `t` VALUES``, and
//!   common in hand-written SQL) lands each row on its shard: the column order comes from the
//!   table's definition, kept current through DDL through Shoal and read again when the rows'
//!   width differs from it.
//! - A catalog refresh inside `START TRANSACTION WITH CONSISTENT SNAPSHOT` is a read, never a
//!   write of the transaction (a transaction started so writes to one datanode only).
//!
//! mydumper and myloader themselves: tests/tests/mydumper.rs.

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_tests::{APP_USER, ShoalProcess, text_rows};

const ORDERS: &str = "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT NOT NULL, \
                      note VARCHAR(40)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";
const ORDER_ITEM: &str =
    "CREATE TABLE order_item (id INT PRIMARY KEY, user_id INT NOT NULL, qty INT) ENGINE=InnoDB";

/// A Shoal over the demo layout whose datanodes use databases `first` and `second`.
fn start_shoal(cluster: &Cluster, first: &str, second: &str) -> ShoalProcess {
    let layout = shoal_tests::demo_layout_yaml(1)
        .replace("database: a }", &format!("database: {first} }}"))
        .replace("database: b }", &format!("database: {second} }}"));
    let path = shoal_tests::cluster_config(cluster, APP_USER, &layout, "dumptools");
    ShoalProcess::start(&["--config".to_string(), path.display().to_string()])
}

async fn start(databases: &[&str]) -> Cluster {
    Cluster::start(ClusterSpec {
        primaries: 2,
        databases: databases.iter().map(|d| d.to_string()).collect(),
        ..ClusterSpec::default()
    })
    .await
    .unwrap_or_else(|e| panic!("cannot start the cluster: {e}"))
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

/// The rows of `orders` whose user_id is `user`, read with a routed (single-shard) SELECT:
/// a row stored on another shard is not found.
async fn routed(c: &mut Conn, table: &str, user: i64) -> Vec<Vec<Option<String>>> {
    text_rows(
        c,
        &format!("SELECT * FROM {table} WHERE user_id = {user} ORDER BY id"),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insert_without_a_column_list_lands_on_its_shard() {
    let cluster = start(&["a", "b"]).await;
    let shoal = start_shoal(&cluster, "a", "b");
    let mut c = client(&shoal).await;
    for ddl in [ORDERS, ORDER_ITEM] {
        exec(&mut c, ddl, &shoal).await;
    }
    let r = c
        .query_drop(
            "INSERT INTO `orders` VALUES (1, 1, 'a'), (2, 2, 'b(,'), (3, 3, NULL), (4, 4, 'd')",
        )
        .await;
    assert!(r.is_ok(), "{r:?}\n{}", shoal.log());
    assert_eq!(c.affected_rows(), 4);
    exec(
        &mut c,
        "REPLACE INTO order_item VALUES (10, 1, 5), (11, 2, 6), (12, 3, 7)",
        &shoal,
    )
    .await;
    exec(&mut c, "INSERT shop.orders VALUE (5, 5, 'e')", &shoal).await;
    for user in 1..=5i64 {
        let got = routed(&mut c, "orders", user).await;
        assert_eq!(got.len(), 1, "orders of user {user}: {got:?}");
        assert_eq!(got[0][0].as_deref(), Some(user.to_string().as_str()));
    }
    assert_eq!(
        routed(&mut c, "order_item", 3).await,
        vec![vec![Some("12".into()), Some("3".into()), Some("7".into())]]
    );
    let all = text_rows(&mut c, "SELECT COUNT(*) FROM orders").await;
    assert_eq!(all, vec![vec![Some("5".into())]]);

    // DDL through Shoal: the new column is part of the list at once; an INVISIBLE one is not,
    // as on one server.
    exec(&mut c, "ALTER TABLE orders ADD COLUMN extra INT", &shoal).await;
    exec(&mut c, "INSERT INTO orders VALUES (6, 6, 'f', 60)", &shoal).await;
    exec(
        &mut c,
        "ALTER TABLE orders ADD COLUMN hidden INT INVISIBLE DEFAULT 9",
        &shoal,
    )
    .await;
    exec(&mut c, "INSERT INTO orders VALUES (7, 7, 'g', 70)", &shoal).await;
    // DDL on the datanodes behind Shoal's back: rows of another width read the order again.
    for server in 0..2 {
        for db in ["a", "b"] {
            let mut b = Conn::new(cluster.opts(server, Some(db))).await.unwrap();
            b.query_drop("ALTER TABLE orders ADD COLUMN more INT")
                .await
                .unwrap();
        }
    }
    exec(
        &mut c,
        "INSERT INTO orders VALUES (8, 8, 'h', 80, 800)",
        &shoal,
    )
    .await;
    assert_eq!(
        routed(&mut c, "orders", 8).await,
        vec![vec![
            Some("8".into()),
            Some("8".into()),
            Some("h".into()),
            Some("80".into()),
            Some("800".into())
        ]]
    );
    // A prepared INSERT without a column list: each execute routed by its own key.
    for (id, note) in [(10, "j"), (11, "k")] {
        let r = c
            .exec_drop(
                "INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
                (id, id, note, id * 10, id * 100),
            )
            .await;
        assert!(r.is_ok(), "{r:?}\n{}", shoal.log());
        assert_eq!(
            routed(&mut c, "orders", id).await,
            vec![vec![
                Some(id.to_string()),
                Some(id.to_string()),
                Some(note.to_string()),
                Some((id * 10).to_string()),
                Some((id * 100).to_string())
            ]]
        );
    }
    assert_eq!(
        text_rows(&mut c, "SELECT hidden FROM orders WHERE user_id = 7").await,
        vec![vec![Some("9".into())]]
    );
    // A wrong width is the backend's error, as on one server.
    let err = c
        .query_drop("INSERT INTO orders VALUES (9, 9)")
        .await
        .expect_err("two values for five columns");
    assert!(err.to_string().contains("1136"), "{err}");
    let err = c
        .query_drop("INSERT INTO orders VALUES (9, 9, 'i', 90, 900), (10, 10)")
        .await
        .expect_err("two values for five columns in row 2");
    assert!(err.to_string().contains("at row 2"), "{err}");
    assert_eq!(
        text_rows(&mut c, "SELECT COUNT(*) FROM orders").await,
        vec![vec![Some("10".into())]]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_refresh_is_no_write_of_a_consistent_snapshot() {
    let cluster = start(&["a", "b"]).await;
    let shoal = start_shoal(&cluster, "a", "b");
    let mut c = client(&shoal).await;
    exec(&mut c, ORDERS, &shoal).await;
    exec(
        &mut c,
        "INSERT INTO orders (id, user_id, note) VALUES (1, 1, 'a'), (2, 2, 'b')",
        &shoal,
    )
    .await;
    let mut other = client(&shoal).await;
    for round in 0..2 {
        exec(
            &mut c,
            "START TRANSACTION /*!40108 WITH CONSISTENT SNAPSHOT */",
            &shoal,
        )
        .await;
        // DDL through Shoal makes the catalog's rows stale: the next catalog read refreshes
        // them from every datanode, inside the client's transaction.
        exec(
            &mut other,
            &format!("CREATE TABLE country{round} (code CHAR(2) PRIMARY KEY)"),
            &shoal,
        )
        .await;
        let status: Vec<mysql_async::Row> = c
            .query("SHOW TABLE STATUS")
            .await
            .unwrap_or_else(|e| panic!("SHOW TABLE STATUS: {e}\n{}", shoal.log()));
        let names: Vec<String> = status.iter().map(|r| r.get(0).unwrap()).collect();
        assert!(names.contains(&"orders".to_string()), "{names:?}");
        assert!(names.contains(&format!("country{round}")), "{names:?}");
        let rows = text_rows(&mut c, "SELECT id FROM orders ORDER BY id").await;
        assert_eq!(rows.len(), 2);
        exec(&mut c, "COMMIT", &shoal).await;
    }
}

/// What tools ask of the server around a dump: `SHOW PROCESSLIST` lists the user's own Shoal
/// sessions (every session for an admin) in MariaDB's columns; `SHOW MASTER STATUS` and
/// `SHOW [ALL] SLAVE[S] STATUS` answer as a server without binlog or replication does, with
/// no rows; `FLUSH TABLES WITH READ LOCK` makes other sessions' writes wait until `UNLOCK
/// TABLES`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_statements_of_dump_tools_are_answered() {
    let cluster = start(&["a", "b"]).await;
    let users = format!(
        "{APP_USER}  - {{ name: other, password: other-secret, schemas: [shop] }}\n  \
         - {{ name: boss, password: boss-secret, schemas: [shop], admin: true }}\n"
    );
    let layout = shoal_tests::demo_layout_yaml(1);
    let path = shoal_tests::cluster_config(&cluster, &users, &layout, "dumpshow");
    let shoal = ShoalProcess::start(&["--config".to_string(), path.display().to_string()]);
    let mut c = client(&shoal).await;
    let mut c2 = client(&shoal).await;
    let mut other = Conn::new(shoal.opts_as("other", "other-secret", Some("shop")))
        .await
        .unwrap();
    let mut boss = Conn::new(shoal.opts_as("boss", "boss-secret", Some("shop")))
        .await
        .unwrap();
    exec(&mut c, ORDERS, &shoal).await;
    c2.query_drop("SELECT 1").await.unwrap();

    let list: Vec<mysql_async::Row> = c
        .query("SHOW PROCESSLIST")
        .await
        .unwrap_or_else(|e| panic!("SHOW PROCESSLIST: {e}\n{}", shoal.log()));
    let names: Vec<String> = list[0]
        .columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "Id", "User", "Host", "db", "Command", "Time", "State", "Info", "Progress"
        ]
    );
    let users_of = |rows: &[mysql_async::Row]| -> Vec<String> {
        rows.iter()
            .map(|r| r.get::<String, _>(1).unwrap())
            .collect()
    };
    assert_eq!(users_of(&list), ["app", "app"], "{list:?}");
    let me: u32 = c.id();
    let mine = list
        .iter()
        .find(|r| r.get::<u32, _>(0) == Some(me))
        .expect("the session itself is listed");
    assert_eq!(mine.get::<String, _>(4).as_deref(), Some("Query"));
    assert_eq!(
        mine.get::<String, _>(7).as_deref(),
        Some("SHOW PROCESSLIST")
    );
    assert_eq!(mine.get::<String, _>(3).as_deref(), Some("shop"));
    let full: Vec<mysql_async::Row> = other.query("SHOW FULL PROCESSLIST").await.unwrap();
    assert_eq!(users_of(&full), ["other"]);
    let all: Vec<mysql_async::Row> = boss.query("SHOW PROCESSLIST").await.unwrap();
    let mut seen = users_of(&all);
    seen.sort();
    assert_eq!(seen, ["app", "app", "boss", "other"]);

    for (sql, first_column) in [
        ("SHOW MASTER STATUS", "File"),
        ("SHOW BINLOG STATUS", "File"),
        ("SHOW SLAVE STATUS", "Slave_IO_State"),
        ("SHOW REPLICA STATUS", "Slave_IO_State"),
        ("SHOW ALL SLAVES STATUS", "Connection_name"),
        ("SHOW ALL REPLICAS STATUS", "Connection_name"),
    ] {
        let mut r = c
            .query_iter(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", shoal.log()));
        let cols: Vec<String> = r
            .columns_ref()
            .iter()
            .map(|c| c.name_str().into_owned())
            .collect();
        let rows: Vec<mysql_async::Row> = r.collect().await.unwrap();
        assert_eq!(
            cols.first().map(String::as_str),
            Some(first_column),
            "{sql}"
        );
        assert!(rows.is_empty(), "{sql}: {rows:?}");
        // The columns of the datanodes' own server (which has a binlog: its rows are not
        // the logical schema's).
        let mut b = Conn::new(cluster.opts(0, None)).await.unwrap();
        let r = b.query_iter(sql).await.unwrap();
        let server: Vec<String> = r
            .columns_ref()
            .iter()
            .map(|c| c.name_str().into_owned())
            .collect();
        drop(r);
        assert_eq!(cols, server, "{sql}");
    }

    // FLUSH TABLES WITH READ LOCK: another session's write waits for UNLOCK TABLES.
    exec(
        &mut c2,
        "INSERT INTO orders (id, user_id, note) VALUES (1, 1, 'a')",
        &shoal,
    )
    .await;
    exec(&mut c, "FLUSH TABLES WITH READ LOCK", &shoal).await;
    assert_eq!(
        text_rows(&mut c, "SELECT id FROM orders").await,
        vec![vec![Some("1".into())]]
    );
    let write = tokio::spawn(async move {
        c2.query_drop("INSERT INTO orders (id, user_id, note) VALUES (2, 2, 'b')")
            .await
            .map(|_| c2)
    });
    // The write waits for the lock on its datanode's server (seen in that server's own
    // processlist), and has not ended.
    shoal_tests::within(
        std::time::Duration::from_secs(30),
        "the other session's INSERT waiting for the read lock",
        async {
            loop {
                assert!(!write.is_finished(), "the write ended under the read lock");
                let mut waiting = 0;
                for server in 0..2 {
                    let mut b = Conn::new(cluster.opts(server, None)).await.unwrap();
                    let n: Option<u64> = b
                        .query_first(
                            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE \
                             STATE LIKE 'Waiting for table metadata lock' AND INFO LIKE 'INSERT%'",
                        )
                        .await
                        .unwrap();
                    waiting += n.unwrap_or(0);
                }
                if waiting > 0 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        },
    )
    .await;
    let err = c
        .query_drop("INSERT INTO orders (id, user_id, note) VALUES (3, 3, 'c')")
        .await
        .expect_err("a write under the session's own read lock");
    assert!(err.to_string().contains("READ lock"), "{err}");
    exec(&mut c, "UNLOCK TABLES", &shoal).await;
    let _c2 = write.await.unwrap().expect("the write after UNLOCK TABLES");
    assert_eq!(
        text_rows(&mut c, "SELECT id FROM orders ORDER BY id").await,
        vec![vec![Some("1".into())], vec![Some("2".into())]]
    );
}

/// `INSERT ... SET` leaving out the shard key of a table with a `sequence`: the key comes from
/// the sequence, as it does for an INSERT with a column list; an INSERT without a column list
/// into the same table names every column, the key included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_set_takes_the_shard_key_from_the_sequence() {
    let cluster = start(&["a", "b"]).await;
    let layout = format!(
        "{}      - {{ name: events, type: sharded, shard_key: id, rule: by_user, \
         datanodes: \"dn1, dn2, dn3, dn4\", sequence: {{ datanode: dn1, step: 5 }} }}\n",
        shoal_tests::demo_layout_yaml(1)
    );
    let path = shoal_tests::cluster_config(&cluster, APP_USER, &layout, "seqset");
    let shoal = ShoalProcess::start(&["--config".to_string(), path.display().to_string()]);
    let mut c = client(&shoal).await;
    exec(
        &mut c,
        "CREATE TABLE events (id BIGINT PRIMARY KEY, note VARCHAR(20))",
        &shoal,
    )
    .await;
    let mut ids = Vec::new();
    for note in ["a", "b", "c"] {
        let r = c
            .query_drop(format!("INSERT INTO events SET note = '{note}'"))
            .await;
        assert!(r.is_ok(), "{r:?}\n{}", shoal.log());
        let id = c.last_insert_id().expect("the sequence's id");
        ids.push(id);
        // A read routed by the key finds the row on its shard.
        let got: Option<String> = c
            .query_first(format!("SELECT note FROM events WHERE id = {id}"))
            .await
            .unwrap();
        assert_eq!(got.as_deref(), Some(note));
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    exec(&mut c, "INSERT INTO events VALUES (1000, 'd')", &shoal).await;
    assert_eq!(
        text_rows(&mut c, "SELECT note FROM events WHERE id = 1000").await,
        vec![vec![Some("d".into())]]
    );
}

/// The tables of `db` open in server `server`'s table cache (`SHOW OPEN TABLES`), sorted.
async fn open_tables(cluster: &Cluster, server: usize, db: &str) -> Vec<String> {
    let mut b = Conn::new(cluster.opts(server, None)).await.unwrap();
    let rows: Vec<mysql_async::Row> = b
        .query(format!("SHOW OPEN TABLES FROM `{db}`"))
        .await
        .unwrap();
    let mut names: Vec<String> = rows
        .iter()
        .map(|r| r.get::<String, _>(1).unwrap())
        .collect();
    names.sort();
    names
}

/// Opens every table of the test on both servers (reads them directly).
async fn open_all(cluster: &Cluster) {
    for server in 0..2 {
        let mut b = Conn::new(cluster.opts(server, None)).await.unwrap();
        for t in ["a.orders", "b.orders", "a.country", "b.country", "other.x"] {
            b.query_drop(format!("SELECT COUNT(*) FROM {t}"))
                .await
                .unwrap();
        }
    }
}

/// `FLUSH TABLES` as tools and backup scripts send it: with names, the physical tables of the
/// logical tables named are flushed on their datanodes (others stay open); without, every
/// table of the user's schemas, never a table of another database on the same servers. It
/// commits an open transaction, as on one server; other FLUSH forms are refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_tables_flushes_the_tables_of_the_users_schemas_only() {
    let cluster = start(&["a", "b", "other"]).await;
    let shoal = start_shoal(&cluster, "a", "b");
    let mut c = client(&shoal).await;
    exec(&mut c, ORDERS, &shoal).await;
    exec(
        &mut c,
        "CREATE TABLE country (code CHAR(2) PRIMARY KEY, name VARCHAR(20)) ENGINE=InnoDB",
        &shoal,
    )
    .await;
    exec(
        &mut c,
        "INSERT INTO orders (id, user_id, note) VALUES (1, 1, 'a'), (2, 2, 'b')",
        &shoal,
    )
    .await;
    // A database on the same servers that is no part of the configuration.
    for server in 0..2 {
        let mut b = Conn::new(cluster.opts(server, Some("other")))
            .await
            .unwrap();
        b.query_drop("CREATE TABLE x (id INT)").await.unwrap();
    }
    let both = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    open_all(&cluster).await;
    for server in 0..2 {
        assert_eq!(
            open_tables(&cluster, server, "a").await,
            both(&["country", "orders"])
        );
    }
    let r = c.query_drop("FLUSH TABLES orders").await;
    assert!(r.is_ok(), "{r:?}\n{}", shoal.log());
    for server in 0..2 {
        for db in ["a", "b"] {
            assert_eq!(open_tables(&cluster, server, db).await, both(&["country"]));
        }
        assert_eq!(open_tables(&cluster, server, "other").await, both(&["x"]));
    }

    // Without names: every table of the user's schemas, on every datanode; `other` untouched.
    for sql in [
        "FLUSH TABLES",
        "flush /*!40101 LOCAL */ tables;",
        "FLUSH NO_WRITE_TO_BINLOG TABLE",
    ] {
        open_all(&cluster).await;
        exec(&mut c, sql, &shoal).await;
        for server in 0..2 {
            for db in ["a", "b"] {
                assert_eq!(open_tables(&cluster, server, db).await, both(&[]), "{sql}");
            }
            assert_eq!(open_tables(&cluster, server, "other").await, both(&["x"]));
        }
    }

    // Qualified names, a table that exists nowhere (flushes nothing, as on one server).
    open_all(&cluster).await;
    exec(&mut c, "FLUSH TABLES shop.country, `nosuch`", &shoal).await;
    assert_eq!(open_tables(&cluster, 1, "b").await, both(&["orders"]));
    // As one server answers a table named twice; a database the user may not use.
    let (code, _, message) =
        shoal_tests::server_error(c.query_drop("FLUSH TABLES orders, orders").await);
    assert_eq!(
        (code, message.as_str()),
        (1066, "Not unique table/alias: 'orders'")
    );
    let (code, _, _) = shoal_tests::server_error(c.query_drop("FLUSH TABLES other.x").await);
    assert!(code == 1044 || code == 1049, "{code}");
    assert_eq!(open_tables(&cluster, 0, "other").await, both(&["x"]));

    // FLUSH commits the open transaction, as on one server.
    exec(&mut c, "BEGIN", &shoal).await;
    exec(
        &mut c,
        "INSERT INTO orders (id, user_id, note) VALUES (3, 3, 'c')",
        &shoal,
    )
    .await;
    exec(&mut c, "FLUSH TABLES", &shoal).await;
    exec(&mut c, "ROLLBACK", &shoal).await;
    assert_eq!(
        routed(&mut c, "orders", 3).await,
        vec![vec![Some("3".into()), Some("3".into()), Some("c".into())]]
    );

    // Under LOCK TABLES: the locked tables may be flushed, others are not locked (1100);
    // without names, the locked tables only (the servers keep the others in their cache).
    // (Opened before: a direct read of orders would wait for the session's WRITE lock.)
    open_all(&cluster).await;
    exec(&mut c, "LOCK TABLES orders WRITE", &shoal).await;
    exec(&mut c, "FLUSH TABLES orders", &shoal).await;
    exec(&mut c, "FLUSH TABLES", &shoal).await;
    for server in 0..2 {
        for db in ["a", "b"] {
            let open = open_tables(&cluster, server, db).await;
            assert!(open.contains(&"country".to_string()), "{open:?}");
        }
        assert_eq!(open_tables(&cluster, server, "other").await, both(&["x"]));
    }
    let (code, _, _) = shoal_tests::server_error(c.query_drop("FLUSH TABLES country").await);
    assert_eq!(code, 1100);
    exec(&mut c, "UNLOCK TABLES", &shoal).await;

    // Other FLUSH forms are refused, naming what was sent.
    for sql in [
        "FLUSH PRIVILEGES",
        "FLUSH TABLES orders FOR EXPORT",
        "FLUSH TABLES orders WITH READ LOCK",
        "FLUSH LOGS",
    ] {
        let (code, _, message) = shoal_tests::server_error(c.query_drop(sql).await);
        assert_eq!(code, 1235, "{sql}: {message}");
        assert!(message.contains(sql), "{sql}: {message}");
    }
}
