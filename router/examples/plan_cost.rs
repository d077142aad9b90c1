//! Instructions per cached point select, counted (not timed: a shared machine's timings are
//! noise): `Router::tokenize` + `Router::route_tokens` alone (`tokens`), with the checks the
//! executor's prelude made around them before the statement plan (`prelude`), and the
//! statement plan (`statement`, `Router::plan_statement`, which makes those checks itself).
//!
//! ```sh
//! cargo build --release -p shoal-router --example plan_cost
//! for w in none tokens prelude statement; do
//!   valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
//!     target/release/examples/plan_cost $w 20000 2>&1 | grep 'I *refs'
//! done
//! ```
//!
//! (`none` is the setup alone: subtract it, divide by the count.)
use shoal_router::config::Config;
use shoal_router::plan::{Router, StatementInput};
use shoal_router::sql::SqlMode;
use shoal_router::topology::Topology;
use std::hint::black_box;
use std::sync::Arc;

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let n: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let yaml = r#"
users:
  - { name: sb, password: sb, schemas: [sbtest] }
datahosts:
  - name: dh1
    primary: { address: 127.0.0.1:3307, user: u, password: p }
datanodes:
  - name: dn1..dn4
    datahost: dh1
    database: sb1..sb4
rules:
  - { name: by_id, algorithm: mod }
schemas:
  - name: sbtest
    default_datanode: dn1
    tables:
      - { name: sbtest1, type: sharded, shard_key: id, rule: by_id, datanodes: dn1..dn4 }
"#;
    let topo = Arc::new(Topology::build(&Config::from_yaml_str(yaml).unwrap()).unwrap());
    let router = Router::new(topo);
    let texts: Vec<String> = (0..1024)
        .map(|i| format!("SELECT c FROM sbtest1 WHERE id={}", i * 7919 % 100_000))
        .collect();
    let held: std::collections::HashMap<String, String> = Default::default();
    let mut toks = Vec::new();
    let cs = shoal_router::charset::Charsets::UTF8MB4;
    for k in 0..n {
        let sql = black_box(&texts[k % texts.len()]);
        match which.as_str() {
            "tokens" => {
                router.tokenize(sql, SqlMode::default(), &mut toks).unwrap();
                black_box(router.route_tokens(
                    Some("sbtest"),
                    SqlMode::default(),
                    cs,
                    sql,
                    &toks,
                    &[],
                ));
            }
            // What the executor's prelude read around the router before the statement plan:
            // the same pure checks, then tokenize + route_tokens.
            "prelude" => {
                let sql: &str = sql;
                black_box(shoal_router::sql::effects::changes_schema(sql.as_bytes()));
                let start = shoal_router::sql::readwrite::mycat_hint_len(sql).unwrap_or(0);
                let mut text = &sql[start..];
                if let Some((_, rest)) = shoal_router::sql::statement_time::statement_time_for(text)
                {
                    text = rest;
                }
                router
                    .tokenize(text, SqlMode::default(), &mut toks)
                    .unwrap();
                black_box(toks.first().is_some_and(|t| t.is_kw(text, "SET")));
                black_box(shoal_router::plan::diagnostics_of(text, &toks));
                black_box(shoal_router::plan::namespace::denied_schema_named(
                    text,
                    &toks,
                    &[],
                ));
                black_box(router.route_tokens(
                    Some("sbtest"),
                    SqlMode::default(),
                    cs,
                    text,
                    &toks,
                    &[],
                ));
                black_box(toks.first().is_some_and(|t| t.is_kw(text, "SHOW")));
            }
            "statement" => {
                let input = StatementInput {
                    sql,
                    current: Some("sbtest"),
                    mode: SqlMode::default(),
                    charsets: cs,
                    read_only: false,
                    denied_schemas: &[],
                    user_vars: &held,
                    read_split: false,
                    xa_tracking: false,
                    digest: false,
                };
                black_box(router.plan_statement(&input, &mut toks));
            }
            _ => {}
        }
    }
}
