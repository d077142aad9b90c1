//! FOREIGN KEYs declared through Shoal (issue 24): between tables sharded by one rule over the
//! same datanodes whose shard keys sit at one position of both column lists, and to global
//! tables, they are declared on every datanode, where each row and the row it references share
//! a datanode, so they check and cascade as on one MariaDB holding the same rows. Others are
//! refused (1235). Layout: `warehouse1`, `district1`, `customer1`, `stock1` (sysbench-tpcc's
//! names) by their warehouse column, mod 4 over dn1..dn4 (server 0 `a`, `b`, server 1 `a`,
//! `b`), and the global `item1`; the reference is database `fk_ref` on server 0.

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_tests::{server_error, text_rows};

const REF_DB: &str = "fk_ref";

fn layout() -> String {
    shoal_tests::warehouse_layout(
        "",
        &[
            ("warehouse1", "w_id"),
            ("district1", "d_w_id"),
            ("customer1", "c_w_id"),
            ("stock1", "s_w_id"),
            ("history1", "h_w_id"),
        ],
        &["item1"],
    )
}

/// The schema, with its foreign keys in CREATE TABLE (a table constraint, and a column's
/// REFERENCES) and in ALTER TABLE, two in one statement.
const DDL: &[&str] = &[
    "CREATE TABLE warehouse1 (w_id INT PRIMARY KEY, w_name VARCHAR(10)) ENGINE=InnoDB",
    "CREATE TABLE district1 (d_id INT, d_w_id INT, d_name VARCHAR(10), PRIMARY KEY (d_w_id, d_id), \
     KEY d_w (d_id, d_w_id), CONSTRAINT fk_district_w FOREIGN KEY (d_w_id) REFERENCES warehouse1 (w_id)) ENGINE=InnoDB",
    "CREATE TABLE customer1 (c_id INT, c_d_id INT, c_w_id INT, c_last VARCHAR(16), \
     PRIMARY KEY (c_w_id, c_d_id, c_id)) ENGINE=InnoDB",
    // The shard keys second in both lists.
    "ALTER TABLE customer1 ADD CONSTRAINT fk_customer_d FOREIGN KEY (c_d_id, c_w_id) \
     REFERENCES district1 (d_id, d_w_id) ON DELETE CASCADE",
    "CREATE TABLE history1 (h_w_id INT REFERENCES warehouse1 (w_id), h_amount INT) ENGINE=InnoDB",
    "CREATE TABLE item1 (i_id INT PRIMARY KEY, i_name VARCHAR(24)) ENGINE=InnoDB",
    "CREATE TABLE stock1 (s_i_id INT, s_w_id INT, s_quantity INT, PRIMARY KEY (s_w_id, s_i_id)) \
     ENGINE=InnoDB",
    "ALTER TABLE stock1 ADD CONSTRAINT fk_stock_w FOREIGN KEY (s_w_id) REFERENCES warehouse1 (w_id), \
     ADD CONSTRAINT fk_stock_i FOREIGN KEY (s_i_id) REFERENCES item1 (i_id)",
];

fn rows() -> Vec<String> {
    let mut out = vec!["INSERT INTO item1 (i_id, i_name) VALUES (1, 'i1'), (2, 'i2')".to_string()];
    for w in 1..=8 {
        out.push(format!(
            "INSERT INTO warehouse1 (w_id, w_name) VALUES ({w}, 'w{w}')"
        ));
        for d in 1..=2 {
            out.push(format!(
                "INSERT INTO district1 (d_id, d_w_id, d_name) VALUES ({d}, {w}, 'd{w}_{d}')"
            ));
            out.push(format!(
                "INSERT INTO customer1 (c_id, c_d_id, c_w_id, c_last) VALUES (1, {d}, {w}, 'a'), \
                 (2, {d}, {w}, 'b')"
            ));
        }
        out.push(format!(
            "INSERT INTO stock1 (s_i_id, s_w_id, s_quantity) VALUES (1, {w}, 10), (2, {w}, 20)"
        ));
    }
    out
}

/// The foreign keys of the connection's database, as information_schema lists them.
const FKS: &str = "SELECT CONSTRAINT_NAME, TABLE_NAME, REFERENCED_TABLE_NAME, DELETE_RULE \
                   FROM information_schema.REFERENTIAL_CONSTRAINTS \
                   WHERE CONSTRAINT_SCHEMA = DATABASE() ORDER BY CONSTRAINT_NAME";

/// Runs `sql` through Shoal and on the reference: both fail alike (code, SQLSTATE, and the
/// message once the reference's database is named as the logical schema).
async fn same_error(c: &mut Conn, r: &mut Conn, sql: &str) -> u16 {
    let got = server_error(c.query_drop(sql).await);
    let (code, state, msg) = server_error(r.query_drop(sql).await);
    let want = (code, state, msg.replace(REF_DB, "shop"));
    assert_eq!(got, want, "{sql}");
    code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn co_located_foreign_keys_check_and_cascade_as_on_one_mariadb() {
    let (cluster, shoal) = shoal_tests::two_servers_and_shoal(
        &["a", "b", REF_DB],
        shoal_tests::APP_USER,
        &layout(),
        "fk",
    )
    .await;
    let mut c = Conn::new(shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\n{}", shoal.log()));
    let mut r = Conn::new(cluster.opts(0, Some(REF_DB))).await.unwrap();
    for sql in DDL.iter().map(|s| s.to_string()).chain(rows()) {
        c.query_drop(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", shoal.log()));
        r.query_drop(&sql).await.unwrap();
    }

    // Every datanode holds every foreign key, as the reference does.
    let want = text_rows(&mut r, FKS).await;
    // Five: MariaDB declares a column's REFERENCES as a foreign key (`history1_ibfk_1`).
    assert_eq!(want.len(), 5, "{want:?}");
    for server in 0..2 {
        for db in ["a", "b"] {
            let mut d = Conn::new(cluster.opts(server, Some(db))).await.unwrap();
            assert_eq!(
                text_rows(&mut d, FKS).await,
                want,
                "server {server} database {db}"
            );
        }
    }

    // A child row without its parent: 1452, on every kind of foreign key.
    for sql in [
        "INSERT INTO district1 (d_id, d_w_id, d_name) VALUES (1, 9, 'orphan')",
        "INSERT INTO customer1 (c_id, c_d_id, c_w_id, c_last) VALUES (1, 3, 4, 'orphan')",
        "INSERT INTO stock1 (s_i_id, s_w_id, s_quantity) VALUES (3, 5, 1)",
        "INSERT INTO history1 (h_w_id, h_amount) VALUES (9, 1)",
    ] {
        assert_eq!(same_error(&mut c, &mut r, sql).await, 1452, "{sql}");
    }
    // A parent row with children: 1451.
    assert_eq!(
        same_error(&mut c, &mut r, "DELETE FROM warehouse1 WHERE w_id = 6").await,
        1451
    );
    // ON DELETE CASCADE within each datanode: the district's customers go with it.
    let sql = "DELETE FROM district1 WHERE d_w_id = 3 AND d_id = 1";
    c.query_drop(sql).await.unwrap();
    r.query_drop(sql).await.unwrap();
    let count = "SELECT c_w_id, c_d_id, COUNT(*) FROM customer1 GROUP BY c_w_id, c_d_id \
                 ORDER BY c_w_id, c_d_id";
    assert_eq!(
        text_rows(&mut c, count).await,
        text_rows(&mut r, count).await
    );

    // FOREIGN_KEY_CHECKS=0 is the session's, passed to the datanodes as MariaDB takes it.
    let orphan = "INSERT INTO district1 (d_id, d_w_id, d_name) VALUES (1, 9, 'orphan')";
    for conn in [&mut c, &mut r] {
        conn.query_drop("SET FOREIGN_KEY_CHECKS = 0").await.unwrap();
        conn.query_drop(orphan).await.unwrap();
        conn.query_drop("SET FOREIGN_KEY_CHECKS = 1").await.unwrap();
    }
    let orphans = "SELECT d_w_id, d_name FROM district1 WHERE d_w_id = 9";
    assert_eq!(
        text_rows(&mut c, orphans).await,
        text_rows(&mut r, orphans).await
    );

    // Not co-located: the referencing columns lack the shard key, or the keys sit at
    // different positions. Refused before any datanode sees it.
    for (sql, needle) in [
        (
            "ALTER TABLE stock1 ADD CONSTRAINT fk_stock_d FOREIGN KEY (s_quantity, s_i_id) \
             REFERENCES district1 (d_w_id, d_id)",
            "its columns do not include the shard key s_w_id",
        ),
        (
            "ALTER TABLE customer1 ADD CONSTRAINT fk_customer_d2 FOREIGN KEY (c_w_id, c_d_id) \
             REFERENCES district1 (d_id, d_w_id)",
            "at different positions",
        ),
        (
            "ALTER TABLE item1 ADD CONSTRAINT fk_item_w FOREIGN KEY (i_id) REFERENCES warehouse1 (w_id)",
            "shop.item1 is not sharded",
        ),
    ] {
        let (code, state, msg) = server_error(c.query_drop(sql).await);
        assert_eq!((code, state.as_str()), (1235, "42000"), "{sql}: {msg}");
        assert!(msg.contains("FOREIGN KEY") && msg.contains(needle), "{msg}");
    }
    let mut d = Conn::new(cluster.opts(1, Some("b"))).await.unwrap();
    assert_eq!(
        text_rows(&mut d, FKS).await,
        want,
        "nothing declared by the refusals"
    );
}
