//! The load generator and the row-placement check against real MariaDB (the launcher), small
//! enough to run in seconds.

use mysql_async::prelude::Queryable;
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_bench::load::{self, Endpoint, InsertSpec, QueryKind, QuerySpec, table};
use shoal_bench::placement;
use shoal_bench::progress::Progress;
use shoal_bench::shoal_config::{self, Layout, ShardedTable};

fn endpoint(cluster: &Cluster, p: usize, db: &str) -> Endpoint {
    shoal_config::direct_endpoint(cluster, p, db, &format!("p{p}/{db}"))
}

async fn one_value(ep: &Endpoint, sql: &str) -> (u64, u64, u64, u64) {
    let mut conn = ep.connect().await.unwrap();
    let row: (u64, u64, u64, u64) = conn.query_first(sql).await.unwrap().unwrap();
    conn.disconnect().await.unwrap();
    row
}

#[tokio::test]
async fn inserts_land_once_each_and_every_answer_is_checked() {
    let cluster = Cluster::start(ClusterSpec {
        databases: vec!["lg".into()],
        ..ClusterSpec::default()
    })
    .await
    .unwrap();
    let ep = endpoint(&cluster, 0, "lg");
    let progress = Progress::hidden("test");
    let counts = format!(
        "SELECT COUNT(*), COUNT(DISTINCT FACTID), MIN(FACTID), MAX(FACTID) FROM {}",
        table::TABLE
    );

    // Single-row INSERTs: 5 rounds of 100 rows, the last one takes the remainder.
    ep.execute(&[table::drop_table_sql(), table::create_table_sql()])
        .await
        .unwrap();
    let spec = InsertSpec {
        first_id: 1,
        rows: 503,
        rounds: 5,
        concurrency: 6,
        batch: 1,
    };
    let rounds = load::insert_rounds(&ep, &spec, &progress).await.unwrap();
    let per_round: Vec<u64> = rounds.iter().map(|r| r.rows).collect();
    assert_eq!(per_round, vec![100, 100, 100, 100, 103]);
    assert_eq!(rounds.last().unwrap().rows_after, 503);
    assert_eq!(rounds.iter().map(|r| r.statements).sum::<u64>(), 503);
    assert!(rounds.iter().all(|r| r.qps > 0.0 && r.secs > 0.0));
    assert_eq!(one_value(&ep, &counts).await, (503, 503, 1, 503));

    // Multi-row INSERTs: the same rows in fewer statements.
    ep.execute(&[table::drop_table_sql(), table::create_table_sql()])
        .await
        .unwrap();
    let batched = load::insert_rounds(&ep, &InsertSpec { batch: 7, ..spec }, &progress)
        .await
        .unwrap();
    let statements: u64 = batched.iter().map(|r| r.statements).sum();
    // Each round's 100 (or 103) rows in statements of 7: 15 per round, 15 in the last.
    assert_eq!(statements, 4 * 15 + 15, "{batched:?}");
    assert_eq!(one_value(&ep, &counts).await, (503, 503, 1, 503));

    // Every answer is right on a complete table ...
    let point = QuerySpec {
        kind: QueryKind::PointSelect,
        rows: 503,
        queries: 80,
        threads: 4,
    };
    let ok = load::run_queries(&ep, &point, &progress).await.unwrap();
    assert_eq!((ok.queries, ok.wrong), (80, 0), "{:?}", ok.first_wrong);
    let agg = QuerySpec {
        kind: QueryKind::Aggregate,
        queries: 6,
        ..point.clone()
    };
    let ok = load::run_queries(&ep, &agg, &progress).await.unwrap();
    assert_eq!(ok.wrong, 0, "{:?}", ok.first_wrong);

    // ... and wrong answers are counted, not timed as answers.
    ep.execute(&[format!("DELETE FROM {} WHERE FACTID > 250", table::TABLE)])
        .await
        .unwrap();
    let bad = load::run_queries(&ep, &point, &progress).await.unwrap();
    assert!(bad.wrong > 10 && bad.wrong < 80, "{bad:?}");
    assert!(bad.first_wrong.unwrap().contains("0 rows"));
    let bad = load::run_queries(&ep, &agg, &progress).await.unwrap();
    assert_eq!(bad.wrong, 6);
}

#[tokio::test]
async fn placement_check_finds_misplaced_duplicate_stray_and_missing_rows() {
    let cluster = Cluster::start(ClusterSpec {
        primaries: 2,
        databases: vec!["pl_1".into(), "pl_2".into()],
        ..ClusterSpec::default()
    })
    .await
    .unwrap();
    let mut layout = Layout::from_cluster(&cluster, 2, "pl");
    layout.schema = "PL".into();
    layout.sharded = vec![ShardedTable {
        name: table::TABLE.into(),
        key: table::KEY.into(),
    }];
    let topology = shoal_config::topology(&layout.yaml("127.0.0.1:1")).unwrap();
    // dn1..dn4 = p0/pl_1, p0/pl_2, p1/pl_1, p1/pl_2; `mod` over 4: id % 4 picks the datanode.
    let nodes = [
        endpoint(&cluster, 0, "pl_1"),
        endpoint(&cluster, 0, "pl_2"),
        endpoint(&cluster, 1, "pl_1"),
        endpoint(&cluster, 1, "pl_2"),
    ];
    for (i, ep) in nodes.iter().enumerate() {
        let ids: Vec<String> = (1..=200u64)
            .filter(|id| id % 4 == i as u64)
            .map(|id| id.to_string())
            .collect();
        ep.execute(&[
            table::create_table_sql(),
            format!(
                "INSERT INTO {} (FACTID) VALUES ({})",
                table::TABLE,
                ids.join("), (")
            ),
        ])
        .await
        .unwrap();
    }
    let check = || placement::check(&topology, "PL", table::TABLE, table::KEY, 200);

    let good = check().await.unwrap();
    assert!(good.ok(), "{}", good.summary());
    assert_eq!(
        good.shards.iter().map(|s| s.rows).collect::<Vec<_>>(),
        vec![50, 50, 50, 50]
    );

    // Row 5 belongs on dn2 (5 mod 4 = 1); put it on dn1 instead.
    nodes[1]
        .execute(&[format!("DELETE FROM {} WHERE FACTID = 5", table::TABLE)])
        .await
        .unwrap();
    nodes[0]
        .execute(&[format!("INSERT INTO {} (FACTID) VALUES (5)", table::TABLE)])
        .await
        .unwrap();
    let moved = check().await.unwrap();
    assert!(!moved.ok());
    assert_eq!(
        (moved.misplaced, moved.duplicates, moved.missing),
        (1, 0, 0)
    );
    assert_eq!(moved.found_rows, 200);
    let problem = moved.first_problem.unwrap();
    assert!(
        problem.contains("key 5 is on dn1") && problem.contains("dn2"),
        "{problem}"
    );

    // A copy on its right shard too, a key never inserted, and a lost row.
    nodes[1]
        .execute(&[format!("INSERT INTO {} (FACTID) VALUES (5)", table::TABLE)])
        .await
        .unwrap();
    nodes[3]
        .execute(&[
            format!("INSERT INTO {} (FACTID) VALUES (999)", table::TABLE),
            format!("DELETE FROM {} WHERE FACTID = 7", table::TABLE),
        ])
        .await
        .unwrap();
    let worse = check().await.unwrap();
    assert_eq!(
        (
            worse.misplaced,
            worse.duplicates,
            worse.out_of_range,
            worse.missing
        ),
        (1, 1, 1, 1),
        "{}",
        worse.summary()
    );

    // The index check reads every shard.
    for ep in &nodes[..3] {
        ep.execute(&[table::create_index_sql()]).await.unwrap();
    }
    let found = placement::index_present(&topology, "PL", table::TABLE, table::INDEX)
        .await
        .unwrap();
    let flags: Vec<bool> = found.iter().map(|(_, f)| *f).collect();
    assert_eq!(flags, vec![true, true, true, false], "{found:?}");

    // Unsharded: every row on the default datanode.
    let mut single = Layout::from_cluster(&cluster, 1, "pl");
    single.schema = "PL".into();
    let topology = shoal_config::topology(&single.yaml("127.0.0.1:1")).unwrap();
    let r = placement::check(&topology, "PL", table::TABLE, table::KEY, 200)
        .await
        .unwrap();
    assert_eq!(r.shards.len(), 1);
    assert_eq!(r.found_rows, 51, "{}", r.summary());
    assert!(!r.ok() && r.missing == 149);
}
