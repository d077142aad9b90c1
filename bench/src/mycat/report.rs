//! The mycat report: our figures beside the seed's, the row-placement results, and which of the
//! report's conclusions this run confirms or contradicts; with CSV, JSON and SVG charts.

use std::fmt::Write;

use serde_json::json;

use super::seed;
use super::{InsertRun, MycatArgs, PlanRun, SelectRun};
use crate::load::RoundStat;
use crate::placement::ShardRows;
use crate::results::{Column, Csv, LineChart, Report, RunInfo, Series, fixed, markdown_table};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    Confirmed,
    Contradicted,
    NotTested,
}

impl Finding {
    fn as_str(&self) -> &'static str {
        match self {
            Finding::Confirmed => "confirmed",
            Finding::Contradicted => "contradicted",
            Finding::NotTested => "not tested",
        }
    }
}

pub struct Conclusion {
    pub claim: &'static str,
    pub finding: Finding,
    pub why: String,
}

/// The report: report.md, inserts.csv, selects.csv, placement.csv, results.json, inserts.svg
/// and seed-inserts.svg.
pub fn build(info: &RunInfo, args: &MycatArgs, runs: &[PlanRun]) -> Report {
    let inserts = || runs.iter().flat_map(|r| &r.inserts);
    let insert_columns: [Column<(&InsertRun, &RoundStat)>; 10] = [
        ("plan", |(i, _)| i.plan.to_string()),
        ("path", |(i, _)| i.path.clone()),
        ("concurrency", |(i, _)| i.concurrency.to_string()),
        ("batch", |(i, _)| i.batch.to_string()),
        ("round", |(_, r)| r.round.to_string()),
        ("rows_after", |(_, r)| r.rows_after.to_string()),
        ("rows", |(_, r)| r.rows.to_string()),
        ("statements", |(_, r)| r.statements.to_string()),
        ("secs", |(_, r)| fixed(r.secs, 3)),
        ("qps", |(_, r)| fixed(r.qps, 1)),
    ];
    let select_columns: [Column<&SelectRun>; 11] = [
        ("plan", |s| s.plan.to_string()),
        ("path", |s| s.path.clone()),
        ("rows", |s| s.rows.to_string()),
        ("index", |s| s.index.to_string()),
        ("queries", |s| s.stat.queries.to_string()),
        ("threads", |s| s.stat.threads.to_string()),
        ("secs", |s| fixed(s.stat.secs, 3)),
        ("qps", |s| fixed(s.stat.qps, 2)),
        ("avg_ms", |s| fixed(s.stat.avg_ms, 3)),
        ("max_ms", |s| fixed(s.stat.max_ms, 3)),
        ("wrong", |s| s.stat.wrong.to_string()),
    ];
    let placement_columns: [Column<(&InsertRun, &ShardRows)>; 9] = [
        ("plan", |(i, _)| i.plan.to_string()),
        ("path", |(i, _)| i.path.clone()),
        ("concurrency", |(i, _)| i.concurrency.to_string()),
        ("datanode", |(_, s)| s.datanode.clone()),
        ("address", |(_, s)| s.address.clone()),
        ("database", |(_, s)| s.database.clone()),
        ("table", |(_, s)| s.table.clone()),
        ("rows", |(_, s)| s.rows.to_string()),
        ("misplaced", |(_, s)| s.misplaced.to_string()),
    ];
    Report {
        markdown: markdown(info, args, runs),
        csv: vec![
            Csv::of(
                "inserts.csv",
                inserts().flat_map(|i| i.rounds.iter().map(move |r| (i, r))),
                &insert_columns,
            ),
            Csv::of(
                "selects.csv",
                runs.iter().flat_map(|r| &r.selects),
                &select_columns,
            ),
            Csv::of(
                "placement.csv",
                inserts().flat_map(|i| i.placement.shards.iter().map(move |s| (i, s))),
                &placement_columns,
            ),
        ],
        json: json!({
            "rows": args.rows,
            "rounds": args.rounds,
            "concurrency": args.concurrency,
            "batch": args.batch,
            "plans": runs,
            "conclusions": conclusions(runs).iter().map(|c| json!({
                "claim": c.claim, "finding": c.finding.as_str(), "why": c.why
            })).collect::<Vec<_>>(),
        }),
        charts: vec![
            ("inserts.svg".into(), insert_chart(runs)),
            ("seed-inserts.svg".into(), seed_chart()),
        ],
    }
}

fn label(i: &InsertRun) -> String {
    format!("plan {} {} c={}", i.plan, i.path, i.concurrency)
}

pub fn insert_chart(runs: &[PlanRun]) -> LineChart {
    LineChart {
        title: "Insert QPS after each round (this run)".into(),
        x_label: "rows in the table".into(),
        y_label: "inserted rows per second".into(),
        series: runs
            .iter()
            .flat_map(|r| &r.inserts)
            .map(|i| Series {
                name: label(i),
                points: i
                    .rounds
                    .iter()
                    .map(|r| (r.rows_after as f64, r.qps))
                    .collect(),
            })
            .collect(),
    }
}

pub fn seed_chart() -> LineChart {
    LineChart {
        title: "Insert QPS after each round (Mycat 1.5 report, seeds/003)".into(),
        x_label: "rows in the table".into(),
        y_label: "inserted rows per second".into(),
        series: seed::INSERTS
            .iter()
            .map(|(plan, conn, qps, _)| Series {
                name: format!("plan {plan} mycat c={conn}"),
                points: seed::ROUND_ROWS
                    .iter()
                    .zip(qps)
                    .map(|(&rows, &q)| (rows as f64, q))
                    .collect(),
            })
            .collect(),
    }
}

fn rows_label(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

pub fn markdown(info: &RunInfo, a: &MycatArgs, runs: &[PlanRun]) -> String {
    let mut md = info.heading("The Mycat sharding experiment (seeds/003) through Shoal");
    let _ = writeln!(
        md,
        "\n{} rows per run in {} rounds, concurrency {:?}, {} row(s) per INSERT; selects by FACTID \
         on {} threads: {} without an index, {} with one. Every plan runs on its own local \
         MariaDB cluster (all instances on this one machine); Shoal's pool: {} connections per \
         server. The report ran 100M rows per run on 4-core VMs, one MySQL instance per VM: \
         compare the shapes, not the absolute numbers.\n",
        a.rows,
        a.rounds,
        a.concurrency,
        a.batch,
        a.select_threads,
        a.noindex_selects,
        a.selects,
        a.effective_pool_max()
    );
    let _ = writeln!(md, "## Plans\n");
    let plan_rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.shape.plan.to_string(),
                r.shape.describe(),
                if r.shape.plan == 1 {
                    "unsharded (default_datanode), plus the direct reference".into()
                } else {
                    format!("`mod` on FACTID over {} datanodes", r.shape.datanodes())
                },
                match &r.not_run {
                    None => "ran".into(),
                    Some(why) => format!("**not run**: {why}"),
                },
            ]
        })
        .collect();
    md.push_str(&markdown_table(
        &["plan", "instances", "table", "status"],
        &[],
        &plan_rows,
    ));

    // Inserts: ours.
    let inserts: Vec<&InsertRun> = runs.iter().flat_map(|r| &r.inserts).collect();
    let _ = writeln!(
        md,
        "\n## Insert QPS per round\n\nThis run (rows/s after each round; rows in the table at the end of the round in the header):\n"
    );
    if let Some(first) = inserts.first() {
        let mut header: Vec<String> = vec!["plan".into(), "path".into(), "conn".into()];
        header.extend(first.rounds.iter().map(|r| rows_label(r.rows_after)));
        header.push("average".into());
        let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
        let right: Vec<usize> = (2..header.len()).collect();
        let rows: Vec<Vec<String>> = inserts
            .iter()
            .map(|i| {
                let mut row = vec![
                    i.plan.to_string(),
                    i.path.clone(),
                    i.concurrency.to_string(),
                ];
                row.extend(i.rounds.iter().map(|r| format!("{:.0}", r.qps)));
                row.push(format!("{:.0}", i.average_qps));
                row
            })
            .collect();
        md.push_str(&markdown_table(&header_refs, &right, &rows));
    } else {
        let _ = writeln!(md, "(no insert run completed)");
    }
    let _ = writeln!(
        md,
        "\nThe report (Mycat 1.5, MySQL 5.7, 20M rows per round):\n"
    );
    let seed_rows: Vec<Vec<String>> = seed::INSERTS
        .iter()
        .map(|(plan, conn, qps, avg)| {
            let mut row = vec![plan.to_string(), "mycat".into(), conn.to_string()];
            row.extend(qps.iter().map(|q| format!("{q:.0}")));
            row.push(format!("{avg:.0}"));
            row
        })
        .collect();
    md.push_str(&markdown_table(
        &[
            "plan", "path", "conn", "20M", "40M", "60M", "80M", "100M", "average",
        ],
        &[2, 3, 4, 5, 6, 7, 8],
        &seed_rows,
    ));
    let _ = writeln!(
        md,
        "\nShapes side by side: each plan's average insert QPS relative to plan 1 at the same \
         concurrency (ours: plan 1 through Shoal), and the change from the first to the last \
         round. Our i-th concurrency is set beside the report's i-th (100, then 300):\n"
    );
    let mut shape_rows = Vec::new();
    for plan in 1u8..=3 {
        for (i, &conn) in a.concurrency.iter().enumerate() {
            let seed_row = seed::INSERTS.iter().filter(|r| r.0 == plan).nth(i);
            let ours = find_insert(runs, plan, "shoal", conn);
            let ours_base = find_insert(runs, 1, "shoal", conn);
            let ours_rel = match (ours, ours_base) {
                (Some(o), Some(b)) => format!("{:.2}", o.average_qps / b.average_qps),
                _ => "-".into(),
            };
            let (seed_conn, seed_avg, seed_rel, seed_drop) = match seed_row {
                Some((_, c, qps, avg)) => (
                    c.to_string(),
                    format!("{avg:.0}"),
                    format!(
                        "{:.2}",
                        avg / seed::insert_average(1, *c).unwrap_or(f64::NAN)
                    ),
                    pct(qps[4] / qps[0] - 1.0),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            shape_rows.push(vec![
                plan.to_string(),
                format!("{conn} / {seed_conn}"),
                seed_avg,
                seed_rel,
                seed_drop,
                ours.map_or("-".into(), |o| format!("{:.0}", o.average_qps)),
                ours_rel,
                ours.map_or("-".into(), round_drop),
            ]);
        }
    }
    md.push_str(&markdown_table(
        &[
            "plan",
            "conn (ours / report)",
            "report avg",
            "report vs plan 1",
            "report first->last round",
            "ours avg",
            "ours vs plan 1",
            "ours first->last round",
        ],
        &[1, 2, 3, 4, 5, 6, 7],
        &shape_rows,
    ));
    if let (Some(d), Some(s)) = (
        runs.iter()
            .flat_map(|r| &r.inserts)
            .find(|i| i.plan == 1 && i.path == "direct"),
        runs.iter()
            .flat_map(|r| &r.inserts)
            .find(|i| i.plan == 1 && i.path == "shoal"),
    ) {
        let _ = writeln!(
            md,
            "\nPlan 1 through Shoal vs direct at {} connections: {:.0} vs {:.0} rows/s ({}).",
            d.concurrency,
            s.average_qps,
            d.average_qps,
            pct(s.average_qps / d.average_qps - 1.0)
        );
    }

    // Selects.
    let _ = writeln!(md, "\n## Selects by FACTID\n");
    let selects: Vec<&SelectRun> = runs.iter().flat_map(|r| &r.selects).collect();
    let mut sel_rows: Vec<Vec<String>> = selects
        .iter()
        .map(|s| {
            let dns = runs
                .iter()
                .find(|r| r.shape.plan == s.plan)
                .map_or(1, |r| if s.plan == 1 { 1 } else { r.shape.datanodes() });
            vec![
                s.plan.to_string(),
                s.path.clone(),
                s.rows.to_string(),
                (s.rows / dns as u64).to_string(),
                s.stat.queries.to_string(),
                s.stat.threads.to_string(),
                if s.index { "yes" } else { "no" }.into(),
                format!("{:.2}", s.stat.avg_ms),
                format!("{:.1}", s.stat.qps),
                s.stat.wrong.to_string(),
            ]
        })
        .collect();
    for (plan, index, ms, qps) in seed::SELECTS {
        sel_rows.push(vec![
            plan.to_string(),
            "report (mycat)".into(),
            "100000000".into(),
            if plan == 1 {
                100_000_000u64
            } else if plan == 2 {
                14_285_714
            } else {
                4_761_904
            }
            .to_string(),
            "1000".into(),
            "10".into(),
            if index { "yes" } else { "no" }.into(),
            ms.map_or("> 1 h".into(), |m| format!("{m:.2}")),
            if qps == 0.0 {
                "~0".into()
            } else {
                format!("{qps:.2}")
            },
            "-".into(),
        ]);
    }
    md.push_str(&markdown_table(
        &[
            "plan",
            "path",
            "rows",
            "rows/shard",
            "selects",
            "threads",
            "index",
            "avg ms",
            "QPS",
            "wrong answers",
        ],
        &[2, 3, 4, 5, 7, 8, 9],
        &sel_rows,
    ));
    for r in runs.iter().filter(|r| !r.index_found_on.is_empty()) {
        let missing: Vec<&str> = r
            .index_found_on
            .iter()
            .filter(|(_, f)| !f)
            .map(|(n, _)| n.as_str())
            .collect();
        let _ = writeln!(
            md,
            "\nPlan {}: the index created through Shoal is on {} of {} shard tables{}.",
            r.shape.plan,
            r.index_found_on.len() - missing.len(),
            r.index_found_on.len(),
            if missing.is_empty() {
                String::new()
            } else {
                format!(" (**missing on {}**)", missing.join(", "))
            }
        );
    }

    // Placement.
    let _ = writeln!(
        md,
        "\n## Row placement\n\nAfter each insert run every datanode was read directly (not \
         through Shoal) and each row's FACTID routed with shoal_router's `mod` rule:\n"
    );
    let place_rows: Vec<Vec<String>> = inserts
        .iter()
        .map(|i| {
            let p = &i.placement;
            let min = p.shards.iter().map(|s| s.rows).min().unwrap_or(0);
            let max = p.shards.iter().map(|s| s.rows).max().unwrap_or(0);
            vec![
                i.plan.to_string(),
                i.path.clone(),
                i.concurrency.to_string(),
                p.expected_rows.to_string(),
                p.found_rows.to_string(),
                p.shards.len().to_string(),
                format!("{min} / {max}"),
                p.misplaced.to_string(),
                p.duplicates.to_string(),
                p.missing.to_string(),
                if p.ok() {
                    "OK".into()
                } else {
                    format!("**FAILED** {}", p.first_problem.clone().unwrap_or_default())
                },
            ]
        })
        .collect();
    md.push_str(&markdown_table(
        &[
            "plan",
            "path",
            "conn",
            "inserted",
            "found",
            "shards",
            "min / max per shard",
            "misplaced",
            "duplicates",
            "missing",
            "result",
        ],
        &[2, 3, 4, 5, 7, 8, 9],
        &place_rows,
    ));

    // Conclusions.
    let _ = writeln!(
        md,
        "\n## The report's conclusions, checked\n\nThis machine runs every instance, Shoal and \
         the load generator on the same few shared cores, so absolute figures differ from the \
         report's; what is compared is the direction of each effect.\n"
    );
    let concl_rows: Vec<Vec<String>> = conclusions(runs)
        .into_iter()
        .map(|c| vec![c.claim.into(), c.finding.as_str().into(), c.why])
        .collect();
    md.push_str(&markdown_table(
        &["the report says", "this run", "why"],
        &[],
        &concl_rows,
    ));
    let _ = writeln!(
        md,
        "\n`inserts.svg` draws this run's insert QPS by round, `seed-inserts.svg` the report's."
    );
    md
}

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:+.0}%", x * 100.0)
    } else {
        "-".into()
    }
}

fn round_drop(i: &InsertRun) -> String {
    match (i.rounds.first(), i.rounds.last()) {
        (Some(f), Some(l)) if i.rounds.len() > 1 => pct(l.qps / f.qps - 1.0),
        _ => "-".into(),
    }
}

fn find_insert<'a>(
    runs: &'a [PlanRun],
    plan: u8,
    path: &str,
    conn: usize,
) -> Option<&'a InsertRun> {
    runs.iter()
        .flat_map(|r| &r.inserts)
        .find(|i| i.plan == plan && i.path == path && i.concurrency == conn)
}

/// Mean over concurrencies of a plan's average insert QPS through Shoal.
fn plan_qps(runs: &[PlanRun], plan: u8) -> Option<f64> {
    let v: Vec<f64> = runs
        .iter()
        .flat_map(|r| &r.inserts)
        .filter(|i| i.plan == plan && i.path == "shoal")
        .map(|i| i.average_qps)
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn select_ms(runs: &[PlanRun], plan: u8, index: bool) -> Option<f64> {
    runs.iter()
        .flat_map(|r| &r.selects)
        .find(|s| s.plan == plan && s.path == "shoal" && s.index == index)
        .map(|s| s.stat.avg_ms)
}

fn missing_plans(runs: &[PlanRun], plans: &[u8]) -> String {
    let missing: Vec<String> = plans
        .iter()
        .filter(|&&p| plan_qps(runs, p).is_none())
        .map(|p| {
            let why = match runs.iter().find(|r| r.shape.plan == *p) {
                Some(r) if r.not_run.is_some() => "not run (Shoal refused its config, see Plans)",
                Some(_) => "ran without the figures needed",
                None => "not asked for",
            };
            format!("plan {p}: {why}")
        })
        .collect();
    format!("needs plans {plans:?}; {}", missing.join("; "))
}

pub fn conclusions(runs: &[PlanRun]) -> Vec<Conclusion> {
    let mut out = Vec::new();
    let shared = "every instance here shares the same cores, where the report gave each \
                  instance its own 4-core VM";

    // 1. Sharding speeds up selects.
    out.push(match (select_ms(runs, 1, false), select_ms(runs, 3, false)) {
        (Some(p1), Some(p3)) => Conclusion {
            claim: "1. Sharding makes selects faster (plan 3 answers unindexed selects, plans 1 and 2 do not)",
            finding: if p3 < p1 { Finding::Confirmed } else { Finding::Contradicted },
            why: format!(
                "unindexed select by FACTID: plan 3 {p3:.2} ms vs plan 1 {p1:.2} ms; each such \
                 select scans only the one shard the rule names, 1/21 of the rows"
            ),
        },
        _ => Conclusion {
            claim: "1. Sharding makes selects faster (plan 3 answers unindexed selects, plans 1 and 2 do not)",
            finding: Finding::NotTested,
            why: missing_plans(runs, &[1, 3]),
        },
    });

    // 2. An index turns seconds into milliseconds.
    let indexed: Vec<(u8, f64, f64)> = [3u8, 2, 1]
        .iter()
        .filter_map(|&p| Some((p, select_ms(runs, p, false)?, select_ms(runs, p, true)?)))
        .collect();
    out.push(match indexed.first() {
        Some(&(p, no, yes)) => Conclusion {
            claim: "2. With an index on FACTID, point selects take milliseconds (plan 3: 6840 ms -> 3.27 ms)",
            finding: if yes * 5.0 < no { Finding::Confirmed } else { Finding::Contradicted },
            why: format!(
                "plan {p}: {no:.2} ms without, {yes:.2} ms with the index ({:.0}x); our shards \
                 hold far fewer rows than the report's, so the unindexed scan is shorter",
                no / yes.max(1e-9)
            ),
        },
        None => Conclusion {
            claim: "2. With an index on FACTID, point selects take milliseconds (plan 3: 6840 ms -> 3.27 ms)",
            finding: Finding::NotTested,
            why: "no plan ran its selects".into(),
        },
    });

    // 3. Throughput grows with the number of instances.
    let claim3 = "3. Insert throughput grows with the number of MySQL instances (plan 2 -> 3: 7500 -> 12439 QPS)";
    out.push(match (plan_qps(runs, 2), plan_qps(runs, 3)) {
        (Some(p2), Some(p3)) => Conclusion {
            claim: claim3,
            finding: if p3 > p2 * 1.1 {
                Finding::Confirmed
            } else {
                Finding::Contradicted
            },
            why: format!(
                "plan 3 {p3:.0} vs plan 2 {p2:.0} rows/s ({}); {shared}, so more instances add \
                 no hardware here — only the report's extra machines could make this grow",
                pct(p3 / p2 - 1.0)
            ),
        },
        _ => Conclusion {
            claim: claim3,
            finding: Finding::NotTested,
            why: missing_plans(runs, &[2, 3]),
        },
    });

    // 4. Shards on one instance divide its insert throughput.
    let claim4 = "4. Splitting one instance into shards divides its insert throughput (plan 2 < plan 1: 7500 vs 19554 QPS)";
    out.push(match (plan_qps(runs, 1), plan_qps(runs, 2)) {
        (Some(p1), Some(p2)) => Conclusion {
            claim: claim4,
            finding: if p2 < p1 * 0.9 {
                Finding::Confirmed
            } else {
                Finding::Contradicted
            },
            why: format!(
                "plan 2 {p2:.0} vs plan 1 {p1:.0} rows/s ({}); plan 2 also feeds a replica \
                 from the same cores",
                pct(p2 / p1 - 1.0)
            ),
        },
        _ => Conclusion {
            claim: claim4,
            finding: Finding::NotTested,
            why: missing_plans(runs, &[1, 2]),
        },
    });

    // 5. Concave in concurrency: 300 at least as good as 100.
    // (plan, lowest concurrency, its QPS, highest concurrency, its QPS)
    let pairs: Vec<(u8, usize, f64, usize, f64)> = [1u8, 2, 3]
        .iter()
        .filter_map(|&p| {
            let mut v: Vec<&InsertRun> = runs
                .iter()
                .flat_map(|r| &r.inserts)
                .filter(|i| i.plan == p && i.path == "shoal")
                .collect();
            v.sort_by_key(|i| i.concurrency);
            let (lo, hi) = (v.first()?, v.last()?);
            (lo.concurrency < hi.concurrency).then_some((
                p,
                lo.concurrency,
                lo.average_qps,
                hi.concurrency,
                hi.average_qps,
            ))
        })
        .collect();
    let claim5 = "5. Throughput against concurrency is concave, best near 300-400: 300 connections insert faster than 100 (+2% to +6% in the report)";
    out.push(if pairs.is_empty() {
        Conclusion {
            claim: claim5,
            finding: Finding::NotTested,
            why: "needs runs at two or more concurrencies".into(),
        }
    } else {
        let all_up = pairs.iter().all(|(_, _, a, _, b)| *b >= a * 0.98);
        Conclusion {
            claim: claim5,
            finding: if all_up {
                Finding::Confirmed
            } else {
                Finding::Contradicted
            },
            why: pairs
                .iter()
                .map(|(p, ca, a, cb, b)| {
                    format!(
                        "plan {p}: {a:.0} at {ca}, {b:.0} at {cb} ({})",
                        pct(b / a - 1.0)
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
                + if all_up {
                    "; more connections did not lower throughput, though with two cores the \
                     server is saturated well below 100 connections, so they mostly add queueing"
                } else {
                    "; with two cores the server saturates well below 100 connections, so more \
                     connections mostly add queueing"
                },
        }
    });

    // 6. Smaller tables keep inserts fast as they grow.
    let drop = |plan: u8| -> Option<f64> {
        let v: Vec<f64> = runs
            .iter()
            .flat_map(|r| &r.inserts)
            .filter(|i| i.plan == plan && i.path == "shoal" && i.rounds.len() > 1)
            .map(|i| i.rounds.last().unwrap().qps / i.rounds[0].qps - 1.0)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let claim6 = "6. Smaller per-shard tables stay faster as data grows (plan 1 loses 12% from the first to the last round at 100 connections, plan 3 stays flat)";
    out.push(match (drop(1), drop(3)) {
        (Some(d1), Some(d3)) => Conclusion {
            claim: claim6,
            finding: if d3 > d1 {
                Finding::Confirmed
            } else {
                Finding::Contradicted
            },
            why: format!(
                "first -> last round: plan 1 {}, plan 3 {}; our largest table is far smaller \
                 than the report's, so the effect (a table outgrowing memory) is weaker here",
                pct(d1),
                pct(d3)
            ),
        },
        _ => Conclusion {
            claim: claim6,
            finding: Finding::NotTested,
            why: missing_plans(runs, &[1, 3]),
        },
    });

    // 7. A proxy in front of one instance costs little.
    let claim7 = "7. Through the proxy, one instance performs about as it does directly (the report's premise: \"mycat single ≈ mysql single\")";
    let pairs: Vec<(usize, f64, f64)> = runs
        .iter()
        .flat_map(|r| &r.inserts)
        .filter(|i| i.plan == 1 && i.path == "direct")
        .filter_map(|d| {
            let s = find_insert(runs, 1, "shoal", d.concurrency)?;
            Some((d.concurrency, d.average_qps, s.average_qps))
        })
        .collect();
    out.push(if pairs.is_empty() {
        Conclusion {
            claim: claim7,
            finding: Finding::NotTested,
            why: "needs plan 1 with its direct reference".into(),
        }
    } else {
        let worst = pairs
            .iter()
            .map(|(_, d, s)| s / d)
            .fold(f64::INFINITY, f64::min);
        Conclusion {
            claim: claim7,
            finding: if worst >= 0.8 {
                Finding::Confirmed
            } else {
                Finding::Contradicted
            },
            why: pairs
                .iter()
                .map(|(c, d, s)| {
                    format!(
                        "{c} connections: Shoal {s:.0} vs direct {d:.0} ({})",
                        pct(s / d - 1.0)
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
                + "; on shared cores Shoal's own CPU comes out of the server's budget",
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{QueryKind, QueryStat, RoundStat};
    use crate::mycat::PlanShape;
    use crate::placement::PlacementReport;

    fn insert(plan: u8, conn: usize, qps: [f64; 5]) -> InsertRun {
        InsertRun {
            plan,
            path: "shoal".into(),
            concurrency: conn,
            batch: 1,
            rounds: qps
                .iter()
                .enumerate()
                .map(|(i, &q)| RoundStat {
                    round: i as u32 + 1,
                    rows_after: (i as u64 + 1) * 100,
                    rows: 100,
                    statements: 100,
                    secs: 100.0 / q,
                    qps: q,
                })
                .collect(),
            average_qps: qps.iter().sum::<f64>() / 5.0,
            placement: PlacementReport {
                shards: vec![],
                expected_rows: 500,
                found_rows: 500,
                misplaced: 0,
                duplicates: 0,
                out_of_range: 0,
                missing: 0,
                first_problem: None,
            },
        }
    }

    fn select(plan: u8, index: bool, avg_ms: f64) -> SelectRun {
        SelectRun {
            plan,
            path: "shoal".into(),
            rows: 500,
            index,
            stat: QueryStat {
                kind: QueryKind::PointSelect,
                queries: 10,
                threads: 10,
                secs: 1.0,
                qps: 10.0,
                avg_ms,
                max_ms: avg_ms,
                wrong: 0,
                first_wrong: None,
            },
        }
    }

    /// A plan run with the report's insert figures scaled down 10x and its select shape.
    fn plan(p: u8, noindex_ms: f64) -> PlanRun {
        let mut seed_rows: Vec<InsertRun> = seed::INSERTS
            .iter()
            .filter(|r| r.0 == p)
            .map(|r| insert(p, r.1, r.2.map(|q| q / 10.0)))
            .collect();
        if p == 1 {
            // The direct reference, a little faster than through the proxy.
            let direct: Vec<InsertRun> = seed_rows
                .iter()
                .map(|i| InsertRun {
                    path: "direct".into(),
                    average_qps: i.average_qps * 1.05,
                    ..i.clone()
                })
                .collect();
            seed_rows.extend(direct);
        }
        PlanRun {
            shape: PlanShape::of(p).unwrap(),
            inserts: seed_rows,
            selects: vec![select(p, false, noindex_ms), select(p, true, 2.0)],
            index_found_on: vec![],
            not_run: None,
        }
    }

    fn finding(runs: &[PlanRun], n: char) -> Finding {
        conclusions(runs)
            .into_iter()
            .find(|c| c.claim.starts_with(n))
            .unwrap()
            .finding
    }

    #[test]
    fn the_reports_own_shape_confirms_its_conclusions() {
        let runs = vec![plan(1, 900.0), plan(2, 300.0), plan(3, 60.0)];
        for c in conclusions(&runs) {
            assert_eq!(c.finding, Finding::Confirmed, "{}: {}", c.claim, c.why);
        }
    }

    #[test]
    fn a_flat_instance_count_contradicts_growth_and_missing_plans_are_not_tested() {
        let mut runs = vec![plan(1, 900.0), plan(2, 300.0), plan(3, 60.0)];
        // Plan 3 no faster than plan 2 (what one shared machine gives).
        runs[2].inserts = runs[1]
            .inserts
            .iter()
            .map(|i| InsertRun {
                plan: 3,
                ..i.clone()
            })
            .collect();
        assert_eq!(finding(&runs, '3'), Finding::Contradicted);

        let mut refused = plan(2, 0.0);
        refused.inserts.clear();
        refused.selects.clear();
        refused.not_run = Some("shoal refused to start: sharded".into());
        let runs = vec![plan(1, 900.0), refused];
        let c = conclusions(&runs);
        let c4 = c.iter().find(|c| c.claim.starts_with('4')).unwrap();
        assert_eq!(c4.finding, Finding::NotTested);
        assert!(
            c4.why.contains("plan 2: not run (Shoal refused"),
            "{}",
            c4.why
        );
        assert_eq!(finding(&runs, '1'), Finding::NotTested);
    }

    #[test]
    fn markdown_puts_the_seed_beside_ours() {
        let runs = vec![plan(1, 900.0)];
        let info = RunInfo {
            experiment: "mycat",
            started: "2026-11-30T00:00:00Z".into(),
            machine: "test".into(),
            command: "shoal-bench mycat".into(),
        };
        let args = <crate::mycat::MycatArgs as clap::FromArgMatches>::from_arg_matches(
            &<crate::mycat::MycatArgs as clap::Args>::augment_args(clap::Command::new("t"))
                .get_matches_from(["t"]),
        )
        .unwrap();
        let md = markdown(&info, &args, &runs);
        assert!(md.contains("| 1 | shoal | 100 | 2034 |"), "{md}");
        assert!(md.contains("| 1 | mycat | 100 | 20344 | 20532 |"));
        assert!(
            md.contains("| 3 | report (mycat) | 100000000 | 4761904 | 1000 | 10 | yes | 3.27 |")
        );
        assert!(
            md.contains("| 1 | 100 / 100 | 19554 | 1.00 | -12% | 1955 | 1.00 | -12% |"),
            "{md}"
        );
    }
}
