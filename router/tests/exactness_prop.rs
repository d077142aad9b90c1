//! The plan cache returns only what uncached planning would: a shuffled mix of statements that
//! differ in comments (ordinary, executable, versioned, hints), in `||`/`&&`/XOR/NOT/`!`, in
//! quotes and in the session's sql_mode is planned through a small warm cache in several orders
//! and through fresh routers, and every plan must equal the uncached plan of the same statement
//! in the same sql_mode.

mod common;

use common::{Gen, golden_topology as topology};
use proptest::prelude::*;
use shoal_router::plan::{RoutePlan, Router};
use shoal_router::sql::SqlMode;

const MODES: &[&str] = &[
    "",
    "PIPES_AS_CONCAT",
    "ANSI",
    "ANSI_QUOTES",
    "HIGH_NOT_PRECEDENCE",
    "NO_BACKSLASH_ESCAPES",
    "IGNORE_SPACE",
    "PIPES_AS_CONCAT,HIGH_NOT_PRECEDENCE",
];

const COMMENTS: &[&str] = &[
    "",
    "",
    "/* c */",
    "/*+ NO_INDEX(t) */",
    "/*! OR id = 6 */",
    "/*M! OR id = 7 */",
    "/*!100000 OR id = 6 */",
    "/*M!100000 AND id = 1 */",
    "/*!50700 OR id = 3 */",
    "/*M!999999 OR id = 2 */",
    "/*!999999 OR id = 5 /* n */ OR id = 4 */",
    "-- x\n",
    "# y\n",
];

fn leaf(g: &mut Gen) -> String {
    let n = g.below(9);
    match g.below(7) {
        0 | 1 => format!("id = {n}"),
        2 => format!("id IN ({n}, {})", g.below(9)),
        3 => format!("id BETWEEN {n} AND {}", n + g.below(3)),
        4 => format!("k = {n}"),
        5 => format!("{} = {n}", g.pick(&["\"id\"", "`id`", "id"])),
        _ => format!(
            "id = {}",
            g.pick(&["'3'", "\"2\"", "'a\\'b'", "?", "-1", "2.5"])
        ),
    }
}

fn expr(g: &mut Gen, depth: u32) -> String {
    if depth == 0 || g.below(3) == 0 {
        return leaf(g);
    }
    let l = expr(g, depth - 1);
    let r = expr(g, depth - 1);
    let op = g.pick(&["AND", "OR", "XOR", "&&", "||", "AND NOT", "OR !"]);
    let c = g.pick(COMMENTS);
    match g.below(4) {
        0 => format!("({l}) {op} {c} {r}"),
        1 => format!("{} {l} {op} {r} {c}", g.pick(&["NOT", "!", ""])),
        _ => format!("{l} {c} {op} {r}"),
    }
}

fn statement(g: &mut Gen) -> String {
    let w = expr(g, 3);
    let c = g.pick(COMMENTS);
    match g.below(4) {
        0 => format!("DELETE FROM sbtest1 WHERE {w} {c}"),
        1 => format!("UPDATE sbtest1 SET c = 'x' {c} WHERE {w}"),
        _ => format!("SELECT id {c} FROM sbtest1 WHERE {w}"),
    }
}

fn plan_text(p: &RoutePlan) -> String {
    format!("{p:?}")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn cached_plans_equal_uncached_plans(seed in 1u64.., order in any::<u64>()) {
        let topo = topology();
        let mut g = Gen(seed);
        let mut stmts: Vec<(SqlMode, String)> = Vec::new();
        for _ in 0..12 {
            let s = statement(&mut g);
            // The same text in several modes, and variants that differ only in a comment.
            for _ in 0..3 {
                stmts.push((SqlMode::parse(g.pick(MODES)), s.clone()));
            }
            let c = g.pick(COMMENTS);
            stmts.push((SqlMode::parse(g.pick(MODES)), format!("{s} {c}")));
        }
        let params = [shoal_router::sql::stmt::Literal::Int(3)];
        let reference = Router::new(topo.clone());
        let want: Vec<String> = stmts
            .iter()
            .map(|(m, s)| plan_text(&reference.route_uncached_in(Some("shop"), *m, shoal_router::charset::Charsets::UTF8MB4, s, &params)))
            .collect();
        // Warm, small (evicting) cache, in three different orders.
        let warm = Router::with_cache_capacity(topo.clone(), 8);
        let mut idx: Vec<usize> = (0..stmts.len()).collect();
        let mut o = Gen(order | 1);
        for round in 0..3 {
            for i in 0..idx.len() {
                let j = i + o.below(idx.len() - i);
                idx.swap(i, j);
            }
            for &i in &idx {
                let (m, s) = &stmts[i];
                let got = plan_text(&warm.route_in(Some("shop"), *m, shoal_router::charset::Charsets::UTF8MB4, s, &params));
                prop_assert_eq!(&got, &want[i], "round {} mode {:?}: {}", round, m, s);
            }
        }
        // A large cache that keeps everything, and cold routers.
        let big = Router::new(topo.clone());
        for round in 0..2 {
            for &i in idx.iter().rev() {
                let (m, s) = &stmts[i];
                let got = plan_text(&big.route_in(Some("shop"), *m, shoal_router::charset::Charsets::UTF8MB4, s, &params));
                prop_assert_eq!(&got, &want[i], "big round {} mode {:?}: {}", round, m, s);
            }
        }
        for (i, (m, s)) in stmts.iter().enumerate() {
            let cold = Router::new(topo.clone());
            prop_assert_eq!(&plan_text(&cold.route_in(Some("shop"), *m, shoal_router::charset::Charsets::UTF8MB4, s, &params)), &want[i]);
        }
    }
}
