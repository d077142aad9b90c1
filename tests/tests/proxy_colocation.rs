//! Tables sharded by one rule over the same datanodes are co-located on equal shard keys,
//! also when the join equality is written without qualifiers, as TPC-C clients write it
//! (`WHERE w_id = 4 AND c_w_id = w_id`): through Shoal such statements answer as one MariaDB
//! holding the same rows (issue 24's first part). Layout: `warehouse1`, `district1`,
//! `customer1` (sysbench-tpcc's names) by their warehouse column, mod 4 over dn1..dn4 (server
//! 0 `a`, `b`, server 1 `a`, `b`); the reference is database `coloc_ref` on server 0.

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_tests::{server_error, text_rows};

const REF_DB: &str = "coloc_ref";

fn layout() -> String {
    shoal_tests::warehouse_layout(
        "",
        &[
            ("warehouse1", "w_id"),
            ("district1", "d_w_id"),
            ("customer1", "c_w_id"),
            ("district_copy", "d_w_id"),
        ],
        &[],
    )
}

const TABLES: [&str; 3] = [
    "CREATE TABLE warehouse1 (w_id INT PRIMARY KEY, w_name VARCHAR(10), w_tax DECIMAL(4,4)) \
     ENGINE=InnoDB",
    "CREATE TABLE district1 (d_id INT, d_w_id INT, d_name VARCHAR(10), d_ytd DECIMAL(12,2), \
     PRIMARY KEY (d_w_id, d_id)) ENGINE=InnoDB",
    "CREATE TABLE customer1 (c_id INT, c_d_id INT, c_w_id INT, c_last VARCHAR(16), \
     c_discount DECIMAL(4,4), c_credit CHAR(2), PRIMARY KEY (c_w_id, c_d_id, c_id)) \
     ENGINE=InnoDB",
];

/// Rows for warehouses 1..=8: two districts each, three customers per district.
fn rows() -> Vec<String> {
    let mut out = Vec::new();
    for w in 1..=8 {
        out.push(format!(
            "INSERT INTO warehouse1 (w_id, w_name, w_tax) VALUES ({w}, 'w{w}', 0.0{w}00)"
        ));
        for d in 1..=2 {
            out.push(format!(
                "INSERT INTO district1 (d_id, d_w_id, d_name, d_ytd) VALUES ({d}, {w}, 'd{w}_{d}', {}.50)",
                w * 10 + d
            ));
            for c in 1..=3 {
                out.push(format!(
                    "INSERT INTO customer1 (c_id, c_d_id, c_w_id, c_last, c_discount, c_credit) VALUES ({c}, {d}, {w}, 'last{}', 0.0{c}00, '{}')",
                    (w + d + c) % 4,
                    if c == 2 { "BC" } else { "GC" }
                ));
            }
        }
    }
    out
}

/// Statements that answer alike, ordered so the comparison is exact.
const SAME: &[&str] = &[
    // New-Order's first read.
    "SELECT c_discount, c_last, c_credit, w_tax FROM customer1, warehouse1 WHERE w_id = 4 AND \
     c_w_id = w_id AND c_d_id = 2 AND c_id = 3",
    // The equality the other way round, in an ON, and over three tables.
    "SELECT w_name, d_name FROM warehouse1 JOIN district1 ON w_id = d_w_id WHERE d_w_id = 7 \
     ORDER BY d_name",
    "SELECT c_last, d_name, w_name FROM customer1 JOIN district1 ON c_w_id = d_w_id AND c_d_id = d_id \
     JOIN warehouse1 ON d_w_id = w_id WHERE w_id IN (2, 6) ORDER BY w_name, d_name, c_last, c_id",
    // No pinned value: every shard joins its own rows (a consistency check's shape).
    "SELECT d_w_id, SUM(d_ytd) FROM district1, warehouse1 WHERE d_w_id = w_id GROUP BY d_w_id \
     ORDER BY d_w_id",
    "SELECT COUNT(*) FROM customer1, district1 WHERE c_w_id = d_w_id AND c_d_id = d_id AND \
     c_credit = 'BC'",
    // Pinned to one datanode with derived tables and subqueries (the consistency checks).
    "SELECT d_w_id, SUM(d_ytd) - MAX(w_tax) FROM (SELECT d_w_id, d_ytd FROM district1 WHERE \
     d_w_id = 3) x, warehouse1 WHERE w_id = x.d_w_id GROUP BY d_w_id",
    "SELECT COUNT(*) FROM (SELECT d_id, d_w_id, SUM(d_ytd) s1 FROM district1 GROUP BY d_id, \
     d_w_id) d, (SELECT c_d_id, c_w_id, COUNT(*) n FROM customer1 WHERE c_w_id = 5 GROUP BY \
     c_d_id, c_w_id) c WHERE c_d_id = d_id AND d_w_id = c_w_id AND d_w_id = 5",
    "SELECT w_id, (SELECT COUNT(*) FROM customer1 WHERE c_w_id = w.w_id AND c_credit = 'BC') n \
     FROM warehouse1 w WHERE w_id = 6",
    "SELECT COUNT(*) FROM (SELECT c.c_id, c.c_d_id, (SELECT SUM(d_ytd) FROM district1 WHERE \
     d_w_id = c.c_w_id AND d_id = c.c_d_id) s FROM customer1 c WHERE c.c_w_id = 2) t WHERE s > 0",
    // A pin inside NOT EXISTS narrows nothing of the outer rows: every shard answers.
    "SELECT w_id FROM warehouse1 w WHERE NOT EXISTS (SELECT 1 FROM district1 WHERE d_w_id = \
     w.w_id AND d_w_id = 3) ORDER BY w_id",
];

/// INSERT ... SELECT between co-located tables, pinned and on every shard: the same rows land
/// as on one MariaDB (then compared table against table).
const COPIES: &[&str] = &[
    "CREATE TABLE district_copy (d_id INT, d_w_id INT, d_ytd DECIMAL(12,2), PRIMARY KEY (d_w_id, \
     d_id)) ENGINE=InnoDB",
    "INSERT INTO district_copy (d_id, d_w_id, d_ytd) SELECT d_id, d_w_id, d_ytd FROM district1 \
     WHERE d_w_id = 4",
    "INSERT INTO district_copy (d_id, d_w_id, d_ytd) SELECT d_id, d_w_id, d_ytd + 1 FROM \
     district1 WHERE d_w_id <> 4",
    "REPLACE INTO district_copy (d_id, d_w_id, d_ytd) SELECT c_d_id, c_w_id, COUNT(*) FROM \
     customer1 WHERE c_w_id = 7 GROUP BY c_w_id, c_d_id",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_on_the_shard_key_written_unqualified_run_as_on_one_mariadb() {
    let (cluster, shoal) = shoal_tests::two_servers_and_shoal(
        &["a", "b", REF_DB],
        shoal_tests::APP_USER,
        &layout(),
        "coloc",
    )
    .await;
    let mut c = Conn::new(shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\n{}", shoal.log()));
    let mut r = Conn::new(cluster.opts(0, Some(REF_DB))).await.unwrap();
    for sql in TABLES.iter().map(|s| s.to_string()).chain(rows()) {
        c.query_drop(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", shoal.log()));
        r.query_drop(&sql).await.unwrap();
    }
    for sql in SAME {
        let (got, want) = (text_rows(&mut c, sql).await, text_rows(&mut r, sql).await);
        assert!(!want.is_empty(), "{sql}: the reference has rows");
        assert_eq!(got, want, "{sql}");
    }
    for sql in COPIES {
        let got = c.query_iter(*sql).await.map(|q| q.affected_rows());
        let got = got.unwrap_or_else(|e| panic!("{sql}: {e}\n{}", shoal.log()));
        let want = r.query_iter(*sql).await.unwrap().affected_rows();
        assert_eq!(got, want, "{sql}: affected rows");
    }
    let copy = "SELECT d_w_id, d_id, d_ytd FROM district_copy ORDER BY d_w_id, d_id";
    let (got, want) = (text_rows(&mut c, copy).await, text_rows(&mut r, copy).await);
    assert!(want.len() > 10, "the reference copied rows");
    assert_eq!(got, want, "{copy}");
    // An INSERT ... SELECT whose target key is not the source's key, across shards: refused.
    let (code, _, msg) = server_error(
        c.query_drop(
            "INSERT INTO district_copy (d_id, d_w_id, d_ytd) SELECT c_id, c_d_id, 0 FROM customer1",
        )
        .await,
    );
    assert_eq!(code, 1235, "{msg}");
    // Pinned to two datanodes with no equality between them: not a cross product of one
    // shard's rows, but gathered on one datanode (issue 49), as one MariaDB answers.
    let cross = "SELECT c_id, c_d_id, w_id FROM customer1, warehouse1 WHERE c_w_id = 1 \
                 AND w_id = 2 ORDER BY c_id, c_d_id";
    let (got, want) = (
        text_rows(&mut c, cross).await,
        text_rows(&mut r, cross).await,
    );
    assert!(!want.is_empty(), "the reference has rows");
    assert_eq!(got, want, "{cross}");
}
