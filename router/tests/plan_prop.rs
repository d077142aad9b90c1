//! Property tests of the planner against the golden topology: a point select goes to exactly the
//! shard the rule picks; an IN list to the union of its members' shards; BETWEEN on a range rule
//! never misses a shard holding a matching value; and the plan cache never changes a plan.

mod common;

use std::collections::BTreeSet;

use proptest::prelude::*;
use shoal_router::plan::{RoutePlan, Router};
use shoal_router::rule::ShardValue;
use shoal_router::topology::{TableDef, Topology};

use common::golden_topology as topology;

/// Physical (datanode, table) of each shard of `table` in schema `shop`.
fn shards(topo: &Topology, table: &str) -> Vec<(usize, String)> {
    match topo.schemas["shop"].table(table) {
        Some(TableDef::Sharded(t)) => t
            .shards
            .iter()
            .map(|s| (s.datanode, s.physical_table.clone()))
            .collect(),
        _ => panic!("{table} is not sharded"),
    }
}

fn rule_shard(topo: &Topology, table: &str, v: &ShardValue) -> usize {
    match topo.schemas["shop"].table(table) {
        Some(TableDef::Sharded(t)) => t.rule.route(v).expect("routable"),
        _ => panic!("{table} is not sharded"),
    }
}

/// (datanode, physical table) pairs a plan sends to, from the table name in each target's SQL.
fn targets(plan: &RoutePlan, physical: &[(usize, String)]) -> BTreeSet<usize> {
    let ts = match plan {
        RoutePlan::Single(t) => vec![t.clone()],
        RoutePlan::Scatter { targets, .. } => targets.clone(),
        other => panic!("unexpected plan {other:?}"),
    };
    ts.iter()
        .map(|t| {
            physical
                .iter()
                .position(|(dn, name)| {
                    // A single target's table is qualified with its database.
                    *dn == t.datanode
                        && (t.sql.contains(&format!(" {name} "))
                            || t.sql.contains(&format!(".{name} ")))
                })
                .unwrap_or_else(|| panic!("target {t:?} is no shard"))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn point_select_goes_to_the_rules_shard(v in any::<i64>(), table in prop::sample::select(vec!["sbtest1", "orders", "t_order", "t_range", "t_session"])) {
        let topo = topology();
        let router = Router::new(topo.clone());
        let key = match table { "t_order" => "order_id", "t_session" => "user_id", _ => "id" };
        let plan = router.route(Some("shop"), &format!("SELECT * FROM {table} WHERE {key} = {v} "), &[]);
        let phys = shards(&topo, table);
        let want = rule_shard(&topo, table, &ShardValue::Int(v as i128));
        prop_assert_eq!(targets(&plan, &phys), BTreeSet::from([want]));
    }

    #[test]
    fn in_list_goes_to_the_union(vs in prop::collection::vec(any::<i32>(), 1..12), table in prop::sample::select(vec!["sbtest1", "orders", "t_order", "t_range"])) {
        let topo = topology();
        let router = Router::new(topo.clone());
        let key = if table == "t_order" { "order_id" } else { "id" };
        let list: Vec<String> = vs.iter().map(|v| v.to_string()).collect();
        let sql = format!("SELECT * FROM {table} WHERE {key} IN ({}) ", list.join(", "));
        let plan = router.route(Some("shop"), &sql, &[]);
        let phys = shards(&topo, table);
        let want: BTreeSet<usize> = vs.iter().map(|&v| rule_shard(&topo, table, &ShardValue::Int(v as i128))).collect();
        prop_assert_eq!(targets(&plan, &phys), want);
    }

    #[test]
    fn between_on_a_range_rule_misses_no_shard(a in -500i64..4000, len in 0i64..3000, probes in prop::collection::vec(0i64..3000, 1..8)) {
        let topo = topology();
        let router = Router::new(topo.clone());
        let b = a + len;
        let plan = router.route(Some("shop"), &format!("SELECT * FROM t_range WHERE id BETWEEN {a} AND {b} "), &[]);
        let got = targets(&plan, &shards(&topo, "t_range"));
        for p in probes {
            let v = a + p % (len + 1);
            let s = rule_shard(&topo, "t_range", &ShardValue::Int(v as i128));
            prop_assert!(got.contains(&s), "value {} on shard {} missed by {:?}", v, s, got);
        }
    }

    #[test]
    fn cached_plans_equal_fresh_plans(vals in prop::collection::vec((any::<i32>(), any::<u8>()), 1..6)) {
        let topo = topology();
        let warm = Router::new(topo.clone());
        for (v, limit) in vals {
            for sql in [
                format!("SELECT c FROM sbtest1 WHERE id = {v}"),
                format!("SELECT c FROM t_order WHERE order_id IN ({v}, {}) ORDER BY c LIMIT {limit}, 5", v.wrapping_add(1)),
                format!("INSERT INTO t_order (order_id, amount) VALUES ({v}, 1), ({}, 2)", v.wrapping_mul(3)),
                format!("SELECT k, COUNT(*) FROM sbtest1 GROUP BY k HAVING COUNT(*) > {limit} LIMIT {limit}"),
                format!("SELECT * FROM customer WHERE city = 'c{v}'"),
            ] {
                let cold = Router::new(topo.clone()).route(Some("shop"), &sql, &[]);
                prop_assert_eq!(warm.route(Some("shop"), &sql, &[]), cold);
            }
        }
    }
}

/// Fragments that make plausible and implausible SQL when glued together.
const FRAGMENTS: &[&str] = &[
    "SELECT",
    "INSERT INTO",
    "UPDATE",
    "DELETE FROM",
    "FROM",
    "WHERE",
    "sbtest1",
    "t_order",
    "orders o",
    "order_item i",
    "country",
    "kv",
    "shop.",
    "id",
    "k",
    "c",
    "order_id",
    "=",
    "<=>",
    "IN (",
    ")",
    "(",
    ",",
    "1",
    "-2",
    "'x'",
    "NULL",
    "?",
    "AND",
    "OR",
    "NOT",
    "BETWEEN",
    "GROUP BY",
    "ORDER BY",
    "HAVING",
    "LIMIT",
    "OFFSET",
    "COUNT(*)",
    "AVG(k)",
    "DISTINCT",
    "*",
    "JOIN",
    "ON",
    "VALUES",
    "SET",
    "UNION",
    "WITH x AS",
    "/*!40001",
    "*/",
    "-- c\n",
    "`",
    "\"",
    ";",
    "EXPLAIN",
    "ROUTE",
    "SHOW",
    "TABLES",
    "CREATE TABLE",
    "DROP",
    "LOCK IN SHARE MODE",
    "MOD",
    "é",
    "\n",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn never_panics(parts in prop::collection::vec(prop::sample::select(FRAGMENTS), 0..24), params in prop::collection::vec(any::<i16>(), 0..3)) {
        let topo = topology();
        let router = Router::new(topo.clone());
        let sql = parts.join(" ");
        let params: Vec<_> = params.into_iter().map(|p| shoal_router::sql::stmt::Literal::Int(p as i128)).collect();
        let plan = router.route(Some("shop"), &sql, &params);
        let again = router.route(Some("shop"), &sql, &params);
        prop_assert_eq!(&plan, &again);
        let _ = shoal_router::plan::render(&topo, &plan);
    }

    #[test]
    fn arbitrary_text_never_panics(sql in "\\PC{0,80}") {
        let router = Router::new(topology());
        let _ = router.route(Some("shop"), &sql, &[]);
        let _ = shoal_router::sql::classify(&sql);
        let _ = shoal_router::sql::split_statements(&sql);
    }
}
