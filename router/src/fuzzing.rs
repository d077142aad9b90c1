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
    let planned = |r: &Router| {
        let cs = crate::charset::Charsets::UTF8MB4;
        render(topo, &r.route_in(schema, mode, cs, &sql, &params))
    };
    let cold = planned(&fresh);
    let cached = planned(warm);
    let again = planned(&fresh);
    assert_eq!(cold, cached, "a warm cache changed the plan of {sql:?}");
    assert_eq!(cold, again, "the cache changed the plan of {sql:?}");
}

/// Entry point of the `nested_expressions` fuzz target: `data` drives a generator of valid
/// statements nested and chained as deep as the bytes ask (see [`nested_statement`]), each
/// routed on a thread of the serving threads' stack (`sql::depth::STACK_SIZE`). Nothing may
/// overflow that stack or panic, and valid SQL is never refused as a syntax error: it is
/// read, or refused as too deep (1436, 1473).
pub fn route_nested(data: &[u8]) {
    let sql = nested_statement(data);
    std::thread::Builder::new()
        .stack_size(crate::sql::depth::STACK_SIZE)
        .spawn(move || {
            if let crate::plan::RoutePlan::Refuse(e) = fixture().1.route(Some("shop"), &sql, &[]) {
                assert_ne!(
                    e.code(),
                    1064,
                    "valid SQL refused as a syntax error: {e:?}\n{sql:.300}"
                );
            }
        })
        .expect("a thread")
        .join()
        .expect("the statement is read within the serving stack, without a panic");
}

/// Routes a statement of [`nested_statement`] on the calling thread: read, or refused as too
/// deep (1436, 1473), never as a syntax error.
pub fn route_nested_on_this_thread(sql: &str) {
    if let crate::plan::RoutePlan::Refuse(e) = fixture().1.route(Some("shop"), sql, &[]) {
        assert_ne!(
            e.code(),
            1064,
            "valid SQL refused as a syntax error: {e:?}\n{sql:.300}"
        );
    }
}

/// A valid SELECT over `orders` whose WHERE is built by `data`: each pair of bytes wraps the
/// expression so far in a construct (parentheses, NOT, unary minus, a call, a subquery, a
/// CASE, IS NULL, IN) or chains it (`+`, `OR`, `AND`, `UNION ALL`), repeated up to 4,096 times.
pub fn nested_statement(data: &[u8]) -> String {
    // The expression is `prefix` (its pieces in reverse) + `id = 1` + `suffix`: wrapping adds
    // a piece on each side, chaining appends, so building stays linear.
    let mut prefix: Vec<&str> = Vec::new();
    let mut suffix = String::new();
    let mut unions = 0usize;
    for pair in data.chunks(2) {
        let (op, times) = (
            pair[0] % 13,
            1 + usize::from(*pair.get(1).unwrap_or(&0)) * 16,
        );
        for i in 0..times {
            if suffix.len() + prefix.len() * 16 > 1 << 22 {
                break;
            }
            let (open, close) = match op {
                0 => ("(", ")".to_string()),
                1 => ("NOT ", String::new()),
                2 => ("- ", String::new()),
                3 => ("abs(", ")".to_string()),
                4 => ("id = (SELECT ", ")".to_string()),
                5 => ("CASE WHEN ", " THEN 1 ELSE 0 END".to_string()),
                6 => ("", format!(" + {i}")),
                7 => ("", format!(" OR id = {i}")),
                8 => ("", format!(" AND id <> {i}")),
                9 => ("(", ") IS NULL".to_string()),
                10 => ("id IN (", format!(", {i})")),
                11 => ("", format!(" XOR id = {i}")),
                _ => {
                    unions += 1;
                    ("", String::new())
                }
            };
            if !open.is_empty() {
                prefix.push(open);
            }
            suffix.push_str(&close);
        }
    }
    let mut sql = String::from("SELECT id FROM orders WHERE ");
    sql.extend(prefix.iter().rev().copied());
    sql.push_str("id = 1");
    sql.push_str(&suffix);
    for _ in 0..unions.min(4096) {
        sql.push_str(" UNION ALL SELECT id FROM orders WHERE id = 1");
    }
    sql
}
