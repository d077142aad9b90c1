//! A fixed number of routing operations, for instruction counts that do not depend on machine
//! load (the criterion bench `route` measures time):
//!
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/deps/route_count-* OP N`
//! with OP one of `cached`, `prepared`, `cold`, `parse`, `dn1`, `dn4`, `dn16`, `dn64`; run once
//! with N and once with 0 and divide the difference by N.

use std::hint::black_box;
use std::sync::Arc;

use shoal_router::config::Config;
use shoal_router::plan::Router;
use shoal_router::sql::stmt::Literal;
use shoal_router::topology::Topology;

fn topology(datanodes: usize) -> Arc<Topology> {
    let yaml = format!(
        "users: [{{ name: sb, password: sb, schemas: [sbtest] }}]\n\
         datahosts: [{{ name: dh1, primary: {{ address: '127.0.0.1:3307', user: u, password: p }} }}]\n\
         datanodes: [{{ name: dn1..dn{datanodes}, datahost: dh1, database: sb1..sb{datanodes} }}]\n\
         rules: [{{ name: by_id, algorithm: mod }}]\n\
         schemas:\n  - name: sbtest\n    default_datanode: dn1\n    tables: [{{ name: sbtest1, type: sharded, shard_key: id, rule: by_id, datanodes: dn1..dn{datanodes} }}]\n"
    );
    Arc::new(Topology::build(&Config::from_yaml_str(&yaml).expect("config")).expect("topology"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let op = args.get(1).map(String::as_str).unwrap_or("cached");
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let dn = match op {
        "dn1" => 1,
        "dn16" => 16,
        "dn64" => 64,
        _ => 4,
    };
    let router = Router::new(topology(dn));
    let texts: Vec<String> = (0..1024)
        .map(|i| format!("SELECT c FROM sbtest1 WHERE id={}", i * 7919 % 100_000))
        .collect();
    let values: Vec<[Literal; 1]> = (0..1024)
        .map(|i| [Literal::Int(i * 7919 % 100_000)])
        .collect();
    // Warm the cache (and allocator) outside the counted loop.
    for t in &texts {
        black_box(router.route(Some("sbtest"), t, &[]));
    }
    black_box(router.route(
        Some("sbtest"),
        "SELECT c FROM sbtest1 WHERE id=?",
        &values[0],
    ));
    let dialect = sqlparser::dialect::MySqlDialect {};
    for i in 0..n {
        let t = &texts[i % texts.len()];
        match op {
            "prepared" => {
                black_box(router.route(
                    Some("sbtest"),
                    "SELECT c FROM sbtest1 WHERE id=?",
                    &values[i % values.len()],
                ));
            }
            "cold" => {
                black_box(router.route_uncached(Some("sbtest"), t, &[]));
            }
            "parse" => {
                black_box(sqlparser::parser::Parser::parse_sql(&dialect, t).ok());
            }
            _ => {
                black_box(router.route(Some("sbtest"), t, &[]));
            }
        }
    }
}
