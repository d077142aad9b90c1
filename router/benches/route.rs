//! Routing cost micro-benchmarks (criterion).
//!
//! `cargo bench -p shoal-router --bench route -- --warm-up-time 1 --measurement-time 3`
//!
//! - `cached/*`: a sysbench point select through the plan cache (tokenize, shape key, cache
//!   lookup, evaluate the template with this statement's value, render the SQL);
//!   `cached/point_select_tokens` as the proxy's session runs it (`Router::tokenize` into a
//!   reused buffer, then `Router::route_tokens`); `cached/point_select_statement` as the
//!   executor runs it now (`Router::plan_statement`: the route and the statement's other
//!   decisions, in one call);
//! - `cold/*`: the same statement parsed and planned from scratch (no cache);
//! - `datanodes/N`: the cached point select on a table sharded over N datanodes (should be flat).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use shoal_router::config::Config;
use shoal_router::plan::Router;
use shoal_router::sql::SqlMode;
use shoal_router::sql::stmt::Literal;
use shoal_router::topology::Topology;

fn topology(datanodes: usize) -> Arc<Topology> {
    let yaml = format!(
        r#"
users:
  - {{ name: sb, password: sb, schemas: [sbtest] }}
datahosts:
  - name: dh1
    primary: {{ address: 127.0.0.1:3307, user: u, password: p }}
datanodes:
  - name: dn1..dn{datanodes}
    datahost: dh1
    database: sb1..sb{datanodes}
rules:
  - {{ name: by_id, algorithm: mod }}
schemas:
  - name: sbtest
    default_datanode: dn1
    tables:
      - {{ name: sbtest1, type: sharded, shard_key: id, rule: by_id, datanodes: dn1..dn{datanodes} }}
"#
    );
    let cfg = Config::from_yaml_str(&yaml).expect("config");
    Arc::new(Topology::build(&cfg).expect("topology"))
}

fn point_selects() -> Vec<String> {
    (0..1024)
        .map(|i| format!("SELECT c FROM sbtest1 WHERE id={}", i * 7919 % 100_000))
        .collect()
}

fn bench(c: &mut Criterion) {
    let router = Router::new(topology(4));
    let texts = point_selects();

    let mut g = c.benchmark_group("cached");
    let mut i = 0usize;
    g.bench_function("point_select_literal", |b| {
        b.iter(|| {
            i = (i + 1) % texts.len();
            black_box(router.route(Some("sbtest"), black_box(&texts[i]), &[]))
        })
    });
    // The session's path: its own token buffer, tokenized once, then routed from the tokens.
    let mut toks = Vec::new();
    g.bench_function("point_select_tokens", |b| {
        b.iter(|| {
            i = (i + 1) % texts.len();
            let sql = black_box(&texts[i]);
            router
                .tokenize(sql, SqlMode::default(), &mut toks)
                .expect("tokens");
            black_box(router.route_tokens(
                Some("sbtest"),
                SqlMode::default(),
                shoal_router::charset::Charsets::UTF8MB4,
                sql,
                &toks,
                &[],
            ))
        })
    });
    // The executor's one call: the route and every other decision of the statement plan.
    let held: std::collections::HashMap<String, String> = Default::default();
    g.bench_function("point_select_statement", |b| {
        b.iter(|| {
            i = (i + 1) % texts.len();
            let input = shoal_router::plan::StatementInput {
                sql: black_box(&texts[i]),
                current: Some("sbtest"),
                mode: SqlMode::default(),
                charsets: shoal_router::charset::Charsets::UTF8MB4,
                read_only: false,
                denied_schemas: &[],
                user_vars: &held,
                read_split: false,
                xa_tracking: false,
                digest: false,
            };
            black_box(router.plan_statement(&input, &mut toks))
        })
    });
    let values: Vec<[Literal; 1]> = (0..1024)
        .map(|i| [Literal::Int(i * 7919 % 100_000)])
        .collect();
    g.bench_function("point_select_prepared", |b| {
        b.iter(|| {
            i = (i + 1) % values.len();
            black_box(router.route(
                Some("sbtest"),
                "SELECT c FROM sbtest1 WHERE id=?",
                &values[i],
            ))
        })
    });
    g.finish();

    let mut g = c.benchmark_group("cold");
    g.bench_function("point_select_literal", |b| {
        b.iter(|| {
            i = (i + 1) % texts.len();
            black_box(router.route_uncached(Some("sbtest"), black_box(&texts[i]), &[]))
        })
    });
    // Baseline: sqlparser alone on the same text (what a cold plan cannot avoid).
    let dialect = sqlparser::dialect::MySqlDialect {};
    g.bench_function("sqlparser_parse_only", |b| {
        b.iter(|| {
            i = (i + 1) % texts.len();
            black_box(sqlparser::parser::Parser::parse_sql(&dialect, black_box(&texts[i])).ok())
        })
    });
    // Our analysis on top of sqlparser (tokenize, shape, parse, describe), without planning.
    g.bench_function("analyze_only", |b| {
        b.iter(|| {
            i = (i + 1) % texts.len();
            let sql = black_box(&texts[i]);
            let toks = shoal_router::sql::lex::tokenize(sql).expect("tokens");
            let shape = shoal_router::sql::normalize::shape(sql, &toks);
            let src = shoal_router::sql::analyze::Source::new(sql, &toks, &shape);
            black_box(shoal_router::sql::analyze::analyze(&src).ok())
        })
    });
    g.finish();

    let mut g = c.benchmark_group("datanodes");
    for n in [1usize, 4, 16, 64] {
        let r = Router::new(topology(n));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                i = (i + 1) % texts.len();
                black_box(r.route(Some("sbtest"), black_box(&texts[i]), &[]))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
