//! The router reads statement text as MariaDB does: a real MariaDB (the launcher) decides which
//! rows a predicate matches, under each sql_mode that changes how text reads; the datanodes
//! holding those rows (by the golden topology's `sbtest1`, sharded `mod` 4 by `id`) must be
//! among the datanodes the router plans for the same text, mode and server version. One server
//! holds every row in one table, so one query answers "which rows match" for all shards.
//!
//! Covers `||`/`&&`/XOR/NOT/`!`, BETWEEN, IS, executable and versioned comments (gated by the
//! server's own version), optimizer hints, quotes under ANSI_QUOTES and backslashes under
//! NO_BACKSLASH_ESCAPES. The value half (literal conversions) is the MariaDB-oracle test's.

#[path = "../../router/tests/common/mod.rs"]
mod common;

use std::collections::BTreeSet;

use mysql_async::prelude::Queryable;
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_router::plan::{RoutePlan, Router};
use shoal_router::rule::ShardValue;
use shoal_router::sql::SqlMode;
use shoal_router::topology::{TableDef, Topology};

use common::{Gen, golden_topology as topology};

const MODES: &[&str] = &[
    "DEFAULT",
    "PIPES_AS_CONCAT",
    "ANSI",
    "ANSI_QUOTES",
    "HIGH_NOT_PRECEDENCE",
    "NO_BACKSLASH_ESCAPES",
    "IGNORE_SPACE",
    "PIPES_AS_CONCAT,HIGH_NOT_PRECEDENCE",
];

/// The datanode holding `id` by the topology's rule for `sbtest1`.
fn datanode_of(topo: &Topology, id: i64) -> usize {
    let Some(TableDef::Sharded(t)) = topo.schemas["shop"].table("sbtest1") else {
        panic!("sbtest1 is not sharded");
    };
    let shard = t
        .rule
        .route(&ShardValue::Int(id as i128))
        .expect("routable");
    t.shards[shard].datanode
}

fn plan_datanodes(plan: &RoutePlan) -> Option<BTreeSet<usize>> {
    match plan {
        RoutePlan::Single(t) => Some(BTreeSet::from([t.datanode])),
        RoutePlan::Scatter { targets, .. } => Some(targets.iter().map(|t| t.datanode).collect()),
        RoutePlan::Refuse(_) => None,
        other => panic!("unexpected plan {other:?}"),
    }
}

/// `10.11.19-MariaDB-...` -> 101119.
fn version_number(v: &str) -> u32 {
    let mut parts = v
        .split(|c: char| !c.is_ascii_digit())
        .filter(|p| !p.is_empty());
    let mut n = 0;
    for _ in 0..3 {
        n = n * 100
            + parts
                .next()
                .and_then(|p| p.parse::<u32>().ok())
                .unwrap_or(0);
    }
    n
}

fn comments(version: u32) -> Vec<String> {
    vec![
        String::new(),
        String::new(),
        "/* OR id = 1 */".into(),
        "/*+ OR id = 2 */".into(),
        "/*! OR id = 6 */".into(),
        "/*M! OR id = 7 */".into(),
        "/*!100000 OR id = 6 */".into(),
        "/*M!100000 AND id = 1 */".into(),
        "/*!50700 OR id = 3 */".into(),
        "/*!50699 OR id = 9 */".into(),
        "/*M!999999 OR id = 2 */".into(),
        format!("/*M!{version} OR id = 10 */"),
        format!("/*M!{} OR id = 11 */", version + 1),
        "/*!999999 OR id = 5 /* n */ OR id = 4 */".into(),
        "-- x\n".into(),
    ]
}

fn leaf(g: &mut Gen) -> String {
    let n = g.below(12) as i64 - 2;
    match g.below(9) {
        0..=2 => format!("id = {n}"),
        3 => format!("id IN ({n}, {})", g.below(12)),
        4 => format!("id BETWEEN {n} AND {}", n + g.below(3) as i64),
        5 => format!("k = {}", g.below(3)),
        6 => format!("{} = {n}", g.pick(&["\"id\"", "`id`", "id"])),
        7 => format!("id IS {}", g.pick(&["NULL", "NOT NULL", "TRUE", "FALSE"])),
        _ => format!(
            "id = {}",
            g.pick(&["'3'", "\"2\"", "'4\\\\'", "-1", "- -5"])
        ),
    }
}

fn expr(g: &mut Gen, cs: &[String], depth: u32) -> String {
    if depth == 0 || g.below(3) == 0 {
        return leaf(g);
    }
    let l = expr(g, cs, depth - 1);
    let r = expr(g, cs, depth - 1);
    let op = g.pick(&["AND", "OR", "XOR", "&&", "||", "AND NOT", "OR !", "XOR NOT"]);
    let c = &cs[g.below(cs.len())];
    match g.below(5) {
        0 => format!("({l}) {op} {c} {r}"),
        1 => format!("{} {l} {op} {r} {c}", g.pick(&["NOT", "!", "! !"])),
        2 => format!(
            "{l} {op} {r} IS {}",
            g.pick(&["TRUE", "NOT FALSE", "UNKNOWN"])
        ),
        _ => format!("{l} {c} {op} {r}"),
    }
}

#[tokio::test]
async fn routes_cover_the_rows_mariadb_matches_in_every_reading() {
    let cluster = Cluster::start(ClusterSpec {
        primaries: 1,
        replicas_per_primary: 0,
        databases: vec!["app".into()],
        ..Default::default()
    })
    .await
    .expect("start MariaDB");
    let mut conn = mysql_async::Conn::new(cluster.opts(0, Some("app")))
        .await
        .expect("connect");
    conn.query_drop(
        "CREATE TABLE sbtest1 (id INT PRIMARY KEY, k INT, c VARCHAR(20), pad VARCHAR(20))",
    )
    .await
    .expect("create");
    let ids: Vec<i64> = (-3..=12).collect();
    for id in &ids {
        conn.exec_drop(
            "INSERT INTO sbtest1 VALUES (?, ?, 'x', 'y')",
            (id, id.rem_euclid(3)),
        )
        .await
        .expect("insert");
    }
    let version_text: String = conn
        .query_first("SELECT VERSION()")
        .await
        .expect("version")
        .expect("a row");
    let version = version_number(&version_text);
    let topo = topology();
    let router = Router::new(topo.clone()).with_server_version(version);

    // The cases, exactly.
    let exact: &[(&str, &str, &[i64])] = &[
        ("DEFAULT", "id = 1 AND id = 1 || id = 2", &[1, 2]),
        ("DEFAULT", "id = 1 AND id = 2 XOR id = 3", &[3]),
        ("DEFAULT", "id = 5 /*M!100000 OR id = 6 */", &[5, 6]),
        ("DEFAULT", "id = 1 OR id = 2", &[1, 2]),
        ("PIPES_AS_CONCAT", "id = 1 AND id = 1 || id = 2", &[]),
        ("DEFAULT", "! id = 0 AND id = 2", &[2]),
    ];
    for (mode, pred, want_ids) in exact {
        conn.query_drop(format!("SET SESSION sql_mode = {}", quote_mode(mode)))
            .await
            .expect("set sql_mode");
        let sql = format!("SELECT id FROM sbtest1 WHERE {pred}");
        let mut got: Vec<i64> = conn.query(&sql).await.expect("query");
        got.sort();
        assert_eq!(&got, want_ids, "MariaDB rows for `{sql}` in {mode}");
        let plan = router.route_in(
            Some("shop"),
            SqlMode::parse(mode),
            shoal_router::charset::Charsets::UTF8MB4,
            &sql,
            &[],
        );
        let want: BTreeSet<usize> = want_ids.iter().map(|&i| datanode_of(&topo, i)).collect();
        let dns = plan_datanodes(&plan).expect("planned");
        assert!(want.is_subset(&dns), "`{sql}` in {mode}: {dns:?}");
        if *mode == "DEFAULT" && !pred.contains("!") {
            assert_eq!(dns, want, "`{sql}` is pruned to the matching datanodes");
        }
    }

    let cs = comments(version);
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let (mut statements, mut refused, mut server_errors, mut pruned, mut violations) =
        (0, 0, 0, 0, Vec::new());
    // (refusal, whether MariaDB rejected the statement too) -> count
    let mut reasons = std::collections::BTreeMap::new();
    for mode in MODES {
        conn.query_drop(format!("SET SESSION sql_mode = {}", quote_mode(mode)))
            .await
            .expect("set sql_mode");
        let m = SqlMode::parse(mode);
        for _ in 0..150 {
            let sql = format!("SELECT id FROM sbtest1 WHERE {}", expr(&mut g, &cs, 3));
            statements += 1;
            let plan = router.route_in(
                Some("shop"),
                m,
                shoal_router::charset::Charsets::UTF8MB4,
                &sql,
                &[],
            );
            let rows: Result<Vec<i64>, _> = conn.query(&sql).await;
            let Some(dns) = plan_datanodes(&plan) else {
                refused += 1;
                if let RoutePlan::Refuse(e) = &plan {
                    let why: String = e.to_string().chars().take(70).collect();
                    *reasons.entry((why, rows.is_err())).or_insert(0) += 1;
                }
                continue;
            };
            let Ok(rows) = rows else {
                server_errors += 1;
                continue;
            };
            let need: BTreeSet<usize> = rows.iter().map(|&i| datanode_of(&topo, i)).collect();
            if !need.is_subset(&dns) {
                violations.push(format!("{mode}: `{sql}` needs {need:?}, planned {dns:?}"));
            }
            if dns.len() < 4 {
                pruned += 1;
            }
        }
    }
    for ((why, server_too), n) in &reasons {
        println!("refused {n}x (MariaDB error too: {server_too}): {why}");
    }
    println!(
        "{statements} statements: {pruned} pruned, {refused} refused, {server_errors} MariaDB errors, {} violations",
        violations.len()
    );
    assert!(
        violations.is_empty(),
        "{} violations:\n{}",
        violations.len(),
        violations.join("\n")
    );
    // Not vacuous: many statements are pruned, few refused.
    assert!(
        pruned > statements / 4,
        "only {pruned} of {statements} pruned"
    );
    assert!(
        refused < statements / 4,
        "{refused} of {statements} refused"
    );
}

fn quote_mode(mode: &str) -> String {
    if mode == "DEFAULT" {
        "DEFAULT".into()
    } else {
        format!("'{mode}'")
    }
}
