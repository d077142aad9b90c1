//! Entry point for the router's fuzz target (`fuzz/fuzz_targets/router.rs`, nightly) and its
//! property-test twin (`router/tests/fuzz_props.rs`, stable): arbitrary text, as a client could
//! send it, tokenized, classified and routed against the golden test topology. Nothing may
//! panic, and the plan cache must never change a plan.

use std::sync::{Arc, OnceLock};

use crate::config::Config;
use crate::plan::{ParamValue, Router, render};
use crate::sql::lex::tokenize_with;
use crate::sql::{DEFAULT_SERVER_VERSION, SqlMode, classify_in, split_statements_in};
use crate::topology::Topology;

const GOLDEN_TOPOLOGY: &str = include_str!("../tests/golden/topology.yaml");

/// The golden topology, and one router with a warm plan cache shared by every input.
fn fixture() -> &'static (Arc<Topology>, Router) {
    static F: OnceLock<(Arc<Topology>, Router)> = OnceLock::new();
    F.get_or_init(|| {
        let cfg = Config::from_yaml_str(GOLDEN_TOPOLOGY).expect("golden topology parses");
        let topo = Arc::new(Topology::build(&cfg).expect("golden topology builds"));
        let router = Router::with_cache_capacity(topo.clone(), 256);
        (topo, router)
    })
}

const MODES: [&str; 6] = [
    "",
    "ANSI_QUOTES",
    "NO_BACKSLASH_ESCAPES",
    "PIPES_AS_CONCAT,IGNORE_SPACE",
    "HIGH_NOT_PRECEDENCE",
    "ORACLE",
];

/// `data[0]` picks the sql_mode, the current schema and how many parameters are bound;
/// the rest is the statement text (invalid UTF-8 replaced, as the proxy never routes it).
pub fn route_text(data: &[u8]) {
    let Some((&sel, text)) = data.split_first() else {
        return;
    };
    let sql = String::from_utf8_lossy(text);
    let mode = SqlMode::parse(MODES[usize::from(sel & 7) % MODES.len()]);
    let schema = match (sel >> 3) & 3 {
        0 => None,
        1 => Some("shop"),
        2 => Some("nope"),
        _ => Some("analytics"),
    };
    let params: Vec<ParamValue> = (0..usize::from(sel >> 5))
        .map(|i| match i % 4 {
            0 => ParamValue::Int(i128::from(sel) - 100),
            1 => ParamValue::Str(sql.chars().take(8).collect()),
            2 => ParamValue::Null,
            _ => ParamValue::Decimal("12.50".into()),
        })
        .collect();
    let version = DEFAULT_SERVER_VERSION;
    let mut toks = Vec::new();
    let _ = tokenize_with(&sql, mode, version, &mut toks);
    let _ = classify_in(&sql, mode, version);
    if let Ok(ranges) = split_statements_in(&sql, mode, version) {
        for r in ranges {
            assert!(
                sql.get(r.clone()).is_some(),
                "statement range {r:?} off a char boundary"
            );
        }
    }
    let (topo, warm) = fixture();
    let fresh = Router::new(topo.clone());
    let cold = render(topo, &fresh.route_in(schema, mode, &sql, &params));
    let cached = render(topo, &warm.route_in(schema, mode, &sql, &params));
    let again = render(topo, &fresh.route_in(schema, mode, &sql, &params));
    assert_eq!(cold, cached, "a warm cache changed the plan of {sql:?}");
    assert_eq!(cold, again, "the cache changed the plan of {sql:?}");
}
