//! Multi-statement texts on a sharded configuration (issue 46). A text led by a session
//! statement (`SET NAMES ...; SELECT COUNT(*) ...`, as PDO's `query()` or PyMySQL send it)
//! used to run whole on one datanode and count that datanode's rows only. Until several
//! statements are planned one by one, such a text is refused (1235) rather than answered
//! wrong; texts of system-variable SETs only still run.

use mysql_async::prelude::Queryable;
use mysql_async::{OptsBuilder, Row};
use shoal_tests::{shared_backend, shared_backend_layout};

#[tokio::test]
async fn a_text_led_by_set_names_is_never_answered_by_one_datanode() {
    let backend = shared_backend();
    let (schema, shoal) = shared_backend_layout(
        &backend,
        "multi",
        "      - { name: orders, type: sharded, shard_key: id, rule: by_id, datanodes: \"dn1, dn2\" }\n",
    )
    .await;
    let opts = OptsBuilder::from_opts(shoal.opts_as("app", "app-secret", Some(&schema)))
        .client_found_rows(false);
    let mut c = mysql_async::Conn::new(opts).await.unwrap();
    c.query_drop("CREATE TABLE orders (id INT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    c.query_drop("INSERT INTO orders (id, v) VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)")
        .await
        .unwrap();
    for sql in [
        "SET NAMES utf8mb4; SELECT COUNT(*) FROM orders WHERE id < 11000",
        "SET sql_mode = 'STRICT_TRANS_TABLES'; SELECT COUNT(*) FROM orders",
        "SHOW VARIABLES LIKE 'version'; SELECT COUNT(*) FROM orders",
    ] {
        match c.query_iter(sql).await {
            Ok(mut r) => {
                // Every result's rows, as text: the count is the last result's one value.
                let mut counts: Vec<Vec<Option<String>>> = Vec::new();
                loop {
                    let rows: Vec<Row> = r.collect().await.unwrap();
                    counts.extend(rows.iter().map(|row| {
                        (0..row.len())
                            .map(|i| row.get::<Option<String>, _>(i).flatten())
                            .collect()
                    }));
                    if r.is_empty() {
                        break;
                    }
                }
                let last = counts.last().and_then(|row| row.last().cloned().flatten());
                assert_eq!(
                    last.as_deref(),
                    Some("5"),
                    "{sql}: a wrong count: {counts:?}"
                );
            }
            Err(mysql_async::Error::Server(e)) => {
                assert_eq!(e.code, 1235, "{sql}: {e:?}");
                assert!(e.message.contains("several statements"), "{sql}: {e:?}");
            }
            Err(e) => panic!("{sql}: {e}"),
        }
    }
    // System variables set one after another still run (the trackers report each).
    c.query_drop("SET NAMES utf8mb4; SET time_zone = '+02:00'")
        .await
        .unwrap();
    let tz: Option<String> = c.query_first("SELECT @@time_zone").await.unwrap();
    assert_eq!(tz.as_deref(), Some("+02:00"));
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM orders").await.unwrap();
    assert_eq!(n, Some(5));
}
