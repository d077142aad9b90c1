//! Statement bombs read by the router: the deepest statements of every kind Shoal accepts are
//! read on a thread of half the serving threads' stack (`sql::depth::STACK_SIZE`), and one
//! level deeper is refused with MariaDB's error for a too-complex statement, never a crash.

use std::sync::Arc;

use shoal_router::config::Config;
use shoal_router::plan::{RoutePlan, Router};
use shoal_router::sql::depth::{MAX_DEPTH, MAX_SELECT_NESTING, MAX_SET_OPERATIONS, STACK_SIZE};
use shoal_router::topology::Topology;

/// `t` sharded by `id` (mod) over two datanodes of schema `s`.
fn router() -> Router {
    let cfg = Config::from_yaml_str(
        "users: [{ name: u, password: p, schemas: [s] }]\n\
         datahosts: [{ name: dh1, primary: { address: '127.0.0.1:3307', user: u, password: p } }]\n\
         datanodes: [{ name: dn1..dn2, datahost: dh1, database: d1..d2 }]\n\
         rules: [{ name: by_id, algorithm: mod }]\n\
         schemas:\n  - name: s\n    default_datanode: dn1\n    tables: [{ name: t, type: sharded, shard_key: id, rule: by_id, datanodes: dn1..dn2 }]\n",
    )
    .expect("config");
    Router::new(Arc::new(Topology::build(&cfg).expect("topology")))
}

/// The plan of each statement, read on a thread of half the serving stack.
fn route_on_half_stack(sqls: Vec<String>) -> Vec<RoutePlan> {
    let r = router();
    std::thread::Builder::new()
        .stack_size(STACK_SIZE / 2)
        .spawn(move || sqls.iter().map(|s| r.route(Some("s"), s, &[])).collect())
        .expect("thread")
        .join()
        .expect("the statements are read within the stack")
}

fn nested(open: &str, inner: &str, close: &str, n: usize) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

fn or_chain(n: usize) -> String {
    let terms: Vec<String> = (0..n).map(|i| format!("id = {i}")).collect();
    format!("SELECT id FROM t WHERE {}", terms.join(" OR "))
}

fn code(p: &RoutePlan) -> Option<u16> {
    match p {
        RoutePlan::Refuse(e) => Some(e.code()),
        _ => None,
    }
}

/// Statements at the deepest Shoal reads: the words of `SELECT id FROM t WHERE id =` count too.
fn deepest() -> Vec<(&'static str, String)> {
    let d = MAX_DEPTH - 10;
    let w = "SELECT id FROM t WHERE id = ";
    vec![
        ("parentheses", format!("{w}{}", nested("(", "1", ")", d))),
        ("unary minus", format!("{w}{}1", "- ".repeat(d))),
        (
            "NOT",
            format!("SELECT id FROM t WHERE {}(id = 1)", "NOT ".repeat(d)),
        ),
        ("+ chain", format!("{w}{}", vec!["1"; d].join(" + "))),
        ("calls", format!("{w}{}", nested("abs(", "1", ")", d / 2))),
        (
            "CASE",
            format!(
                "{w}{}",
                nested("CASE WHEN id = 1 THEN ", "1", " END", d / 4)
            ),
        ),
        (
            "UNION ALL",
            vec!["SELECT id FROM t WHERE id = 1"; MAX_SET_OPERATIONS + 1].join(" UNION ALL "),
        ),
        (
            "subqueries",
            format!(
                "{w}{}",
                nested("(SELECT ", "1", ")", MAX_SELECT_NESTING - 1)
            ),
        ),
    ]
}

#[test]
fn the_deepest_accepted_statements_are_read_on_half_the_stack() {
    let (names, sqls): (Vec<_>, Vec<_>) = deepest().into_iter().unzip();
    for (name, plan) in names.iter().zip(route_on_half_stack(sqls)) {
        assert!(
            !matches!(plan, RoutePlan::Refuse(_)),
            "{name}: refused: {plan:?}"
        );
    }
}

#[test]
fn one_level_deeper_is_refused_as_mariadb_refuses() {
    let w = "SELECT id FROM t WHERE id = ";
    let sqls = vec![
        format!("{w}{}", nested("(", "1", ")", MAX_DEPTH + 1)),
        format!("{w}{}1", "- ".repeat(MAX_DEPTH + 1)),
        format!("{w}{}", vec!["1"; MAX_DEPTH + 2].join(" + ")),
        // Far deeper: refused without building anything.
        format!("{w}{}", nested("(", "1", ")", 1_000_000)),
        format!("{w}{}", nested("(SELECT ", "1", ")", MAX_SELECT_NESTING)),
        vec!["SELECT 1"; MAX_SET_OPERATIONS + 2].join(" UNION ALL "),
    ];
    let codes: Vec<_> = route_on_half_stack(sqls).iter().map(code).collect();
    assert_eq!(
        codes,
        [
            Some(1436),
            Some(1436),
            Some(1436),
            Some(1436),
            Some(1473),
            Some(1436)
        ]
    );
}

#[test]
fn long_or_chains_are_read_and_routed() {
    let plans = route_on_half_stack(vec![
        or_chain(100_000),
        // Every term on one shard: routed there alone.
        format!(
            "SELECT id FROM t WHERE {}",
            (0..10_000)
                .map(|i| format!("id = {}", 2 * i))
                .collect::<Vec<_>>()
                .join(" OR ")
        ),
        // A syntax error at the end of a long chain: refused (the chain is dropped flat).
        format!("{} OR", or_chain(100_000)),
        format!(
            "SELECT id FROM t WHERE {}",
            vec!["id <> 1"; 100_000].join(" AND ")
        ),
    ]);
    assert!(matches!(&plans[0], RoutePlan::Scatter { targets, .. } if targets.len() == 2));
    assert!(
        matches!(&plans[1], RoutePlan::Single(t) if t.datanode == 0),
        "{:?}",
        code(&plans[1])
    );
    assert_eq!(code(&plans[2]), Some(1064));
    assert!(matches!(&plans[3], RoutePlan::Scatter { .. }));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    /// The `nested_expressions` fuzz target's stable twin: generated deep statements are read
    /// or refused as too deep on the serving stack, never refused as a syntax error.
    #[test]
    fn generated_nested_statements_are_read_or_refused_as_too_deep(
        data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8)
    ) {
        shoal_router::fuzzing::route_nested(&data);
    }
}

#[test]
fn explain_route_of_a_bomb_is_answered_or_refused() {
    let plans = route_on_half_stack(vec![
        format!("EXPLAIN ROUTE {}", or_chain(100_000)),
        format!(
            "EXPLAIN ROUTE SELECT id FROM t WHERE id = {}",
            nested("(", "1", ")", MAX_DEPTH + 1)
        ),
    ]);
    for p in plans {
        assert!(matches!(p, RoutePlan::Local(_)), "{:?}", code(&p));
    }
}
