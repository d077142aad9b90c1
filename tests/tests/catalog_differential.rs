//! The information_schema differential ([`shoal_tests::differential::catalog`]): generated
//! queries over `information_schema` and SHOW statements through a sharded Shoal (the demo
//! layout: sharded, child, global, table-per-shard and unlisted tables) against one MariaDB
//! database holding the same logical tables. Any mismatch fails, except the values
//! `catalog::EXCLUDED` lists with why.
//!
//! `SHOAL_CATALOG_SEED` (default 20261203) and `SHOAL_CATALOG_QUERIES` (default 240) choose the
//! queries. A second test runs the same queries against the reference on both sides: the
//! harness and the generator must find nothing there (no query whose answer is not fixed).

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_tests::differential::catalog::{self, CatalogQuery};
use shoal_tests::shared_backend;

fn queries() -> (u64, Vec<CatalogQuery>) {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
            })
            .unwrap_or(default)
    };
    let seed = env("SHOAL_CATALOG_SEED", 20261203);
    let count = env("SHOAL_CATALOG_QUERIES", 240) as usize;
    (seed, catalog::generate(seed, count))
}

/// Database `shop` on the shared backend, with the logical tables and rows, created with
/// `charset` (the datanodes' default, so that SCHEMATA compares).
async fn reference(charset: Option<(String, String)>) -> Conn {
    let backend = shared_backend();
    let mut c = backend.conn(None).await;
    c.query_drop("DROP DATABASE IF EXISTS shop").await.unwrap();
    let create = match charset {
        Some((cs, coll)) => format!("CREATE DATABASE shop CHARACTER SET {cs} COLLATE {coll}"),
        None => "CREATE DATABASE shop".to_string(),
    };
    c.query_drop(create).await.unwrap();
    c.query_drop("USE shop").await.unwrap();
    for sql in catalog::SCHEMA.iter().chain(catalog::ROWS) {
        c.query_drop(*sql)
            .await
            .unwrap_or_else(|e| panic!("reference: {sql}: {e}"));
    }
    c
}

fn report(seed: u64, total: usize, outcome: &catalog::Outcome) {
    let failures = &outcome.failures;
    assert!(
        outcome.with_rows * 4 >= total * 3,
        "seed {seed}: only {} of {total} queries have rows on the reference",
        outcome.with_rows
    );
    assert!(
        failures.is_empty(),
        "seed {seed}: {} of {total} catalog queries differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_queries_through_shoal_equal_one_mariadb() {
    let (seed, queries) = queries();
    assert!(queries.len() >= 200 || std::env::var("SHOAL_CATALOG_QUERIES").is_ok());
    let (cluster, shoal) = shoal_tests::two_servers_and_shoal(
        &["a", "b"],
        shoal_tests::APP_USER,
        &shoal_tests::demo_layout_yaml(1),
        "catalog",
    )
    .await;
    let mut subject = Conn::new(shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .unwrap_or_else(|e| panic!("connect through shoal: {e}\n{}", shoal.log()));
    for sql in catalog::SCHEMA.iter().chain(catalog::ROWS) {
        subject
            .query_drop(*sql)
            .await
            .unwrap_or_else(|e| panic!("through shoal: {sql}: {e}\n{}", shoal.log()));
    }
    // The datanodes' databases were created with the server's default character set.
    let mut dn = Conn::new(cluster.opts(0, Some("a"))).await.unwrap();
    let charset: Option<(String, String)> = dn
        .query_first(
            "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME \
             FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'a'",
        )
        .await
        .unwrap();
    let mut reference = reference(charset).await;
    let outcome = catalog::run(&mut reference, &mut subject, &queries).await;
    report(seed, queries.len(), &outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_harness_finds_nothing_between_the_reference_and_itself() {
    let (seed, queries) = queries();
    let mut a = reference(None).await;
    let mut b = shared_backend().conn(Some("shop")).await;
    let outcome = catalog::run(&mut a, &mut b, &queries).await;
    eprintln!(
        "seed {seed}: {} queries, {} with rows on the reference, {} mismatches",
        queries.len(),
        outcome.with_rows,
        outcome.failures.len()
    );
    report(seed, queries.len(), &outcome);
}
