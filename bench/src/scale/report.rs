//! The scale report: per datanode count and workload, QPS and Shoal's CPU per statement; the
//! single-shard CPU ratio between the largest and the smallest count; CSV, JSON and charts.

use std::fmt::Write;

use serde_json::json;

use super::{Phase, ScaleArgs, Step};
use crate::overhead::report::median;
use crate::results::{Column, Csv, LineChart, Report, RunInfo, Series, fixed, markdown_table};

const WORKLOADS: [&str; 4] = [
    "insert",
    "point_select",
    "point_select_prepared",
    "aggregate",
];

/// The single-shard workloads whose CPU ratio is the goal, text then prepared.
pub const POINT: [&str; 2] = ["point_select", "point_select_prepared"];

/// `workload`'s CPU per statement at the largest count over the smallest (goal: at most 1.2).
pub fn point_cpu_ratio(steps: &[Step], workload: &str) -> Option<(usize, usize, f64)> {
    let cpu = |s: &Step| phase_cpu(s, workload);
    let ran: Vec<&Step> = steps.iter().filter(|s| cpu(s).is_some()).collect();
    let (first, last) = (ran.first()?, ran.last()?);
    if first.datanodes == last.datanodes {
        return None;
    }
    Some((
        first.datanodes,
        last.datanodes,
        cpu(last)? / cpu(first)?.max(1e-9),
    ))
}

fn phase_cpu(s: &Step, workload: &str) -> Option<f64> {
    s.phases
        .iter()
        .find(|p| p.workload == workload)
        .map(|p| p.shoal_cpu_us_per_statement)
}

/// One step per datanode count from sweeps that ran the same counts: each phase's figures are
/// the medians over the sweeps (wrong answers summed); a count any sweep could not run, or whose
/// placement failed, is reported as that sweep saw it.
pub fn medians(sweeps: &[Vec<Step>]) -> Vec<Step> {
    let Some(first) = sweeps.first() else {
        return Vec::new();
    };
    (0..first.len())
        .map(|i| {
            let runs: Vec<&Step> = sweeps.iter().filter_map(|s| s.get(i)).collect();
            if let Some(bad) = runs
                .iter()
                .find(|s| s.not_run.is_some() || s.placement.as_ref().is_some_and(|p| !p.ok()))
            {
                return (*bad).clone();
            }
            let mut step = runs[0].clone();
            for (j, phase) in step.phases.iter_mut().enumerate() {
                let all: Vec<&Phase> = runs.iter().filter_map(|s| s.phases.get(j)).collect();
                let of = |f: fn(&Phase) -> f64| {
                    median(&mut all.iter().map(|p| f(p)).collect::<Vec<_>>())
                };
                phase.secs = of(|p| p.secs);
                phase.qps = of(|p| p.qps);
                phase.shoal_cpu_us_per_statement = of(|p| p.shoal_cpu_us_per_statement);
                phase.avg_ms = phase.avg_ms.map(|_| of(|p| p.avg_ms.unwrap_or(0.0)));
                phase.statements = all.iter().map(|p| p.statements).sum();
                phase.wrong = all.iter().map(|p| p.wrong).sum();
            }
            step.rounds = runs
                .iter()
                .map(|s| {
                    let cpu = |w| phase_cpu(s, w).unwrap_or(f64::NAN);
                    (cpu(POINT[0]), cpu(POINT[1]))
                })
                .collect();
            step
        })
        .collect()
}

/// The report: report.md, scale.csv, results.json, cpu.svg and qps.svg.
pub fn build(info: &RunInfo, args: &ScaleArgs, steps: &[Step]) -> Report {
    let columns: [Column<(&Step, &Phase)>; 8] = [
        ("datanodes", |(s, _)| s.datanodes.to_string()),
        ("workload", |(_, p)| p.workload.clone()),
        ("statements", |(_, p)| p.statements.to_string()),
        ("secs", |(_, p)| fixed(p.secs, 3)),
        ("qps", |(_, p)| fixed(p.qps, 1)),
        ("avg_ms", |(_, p)| {
            p.avg_ms.map_or(String::new(), |v| fixed(v, 3))
        }),
        ("shoal_cpu_us_per_statement", |(_, p)| {
            fixed(p.shoal_cpu_us_per_statement, 2)
        }),
        ("wrong", |(_, p)| p.wrong.to_string()),
    ];
    let chart = |title: &str, y: &str, f: fn(&Phase) -> f64| LineChart {
        title: title.into(),
        x_label: "datanodes".into(),
        y_label: y.into(),
        series: WORKLOADS
            .iter()
            .map(|w| Series {
                name: w.to_string(),
                points: steps
                    .iter()
                    .filter_map(|s| {
                        let p = s.phases.iter().find(|p| p.workload == *w)?;
                        Some((s.datanodes as f64, f(p)))
                    })
                    .collect(),
            })
            .collect(),
    };
    Report {
        markdown: markdown(info, args, steps),
        csv: vec![Csv::of(
            "scale.csv",
            steps
                .iter()
                .flat_map(|s| s.phases.iter().map(move |p| (s, p))),
            &columns,
        )],
        json: json!({
            "rows": args.rows,
            "threads": args.threads,
            "primaries": args.primaries,
            "steps": steps,
        }),
        charts: vec![
            (
                "cpu.svg".into(),
                chart(
                    "Shoal CPU per statement by datanode count",
                    "Shoal CPU us per statement",
                    |p| p.shoal_cpu_us_per_statement,
                ),
            ),
            (
                "qps.svg".into(),
                chart(
                    "QPS through Shoal by datanode count",
                    "statements per second",
                    |p| p.qps,
                ),
            ),
        ],
    }
}

pub fn markdown(info: &RunInfo, a: &ScaleArgs, steps: &[Step]) -> String {
    let mut md = info.heading("Shard-count sweep through Shoal");
    let _ = writeln!(
        md,
        "\nThe Mycat table with an index on FACTID, sharded by `mod` over the first N datanodes \
         (databases spread round-robin over {} MariaDB primar{}). At each N: {} rows inserted \
         ({} per INSERT), {} point selects by FACTID (one shard each) as text, as many again as a \
         prepared statement, {} `SELECT COUNT(*), SUM(SALENUM)` (every shard each), all on {} connections and every answer checked. \
         Shoal CPU: utime+stime of its process from /proc over the phase, per statement.{}\n",
        a.primaries,
        if a.primaries == 1 { "y" } else { "ies" },
        a.rows,
        a.batch,
        a.point_selects,
        a.aggregates,
        a.threads,
        if a.rounds > 1 {
            format!(
                " {} sweeps, alternately ascending and descending; each figure is the median \
                 over them (statements and wrong answers: totals).",
                a.rounds
            )
        } else {
            String::new()
        }
    );
    let mut rows = Vec::new();
    for s in steps {
        if let Some(why) = &s.not_run {
            rows.push(vec![
                s.datanodes.to_string(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                format!("**not run**: {why}"),
            ]);
            continue;
        }
        for p in &s.phases {
            rows.push(vec![
                s.datanodes.to_string(),
                p.workload.clone(),
                format!("{:.0}", p.qps),
                p.avg_ms.map_or("-".into(), |v| format!("{v:.2}")),
                format!("{:.1}", p.shoal_cpu_us_per_statement),
                p.wrong.to_string(),
                if p.workload == "insert" {
                    s.placement.as_ref().map_or("-".into(), |pl| {
                        if pl.ok() {
                            "placement OK".into()
                        } else {
                            format!("placement **FAILED**: {}", pl.summary())
                        }
                    })
                } else {
                    String::new()
                },
            ]);
        }
    }
    md.push_str(&markdown_table(
        &[
            "datanodes",
            "workload",
            "QPS",
            "avg ms",
            "Shoal CPU us/stmt",
            "wrong answers",
            "notes",
        ],
        &[0, 2, 3, 4, 5],
        &rows,
    ));
    for (k, workload) in POINT.iter().enumerate() {
        let Some((lo, hi, r)) = point_cpu_ratio(steps, workload) else {
            let _ = writeln!(
                md,
                "\n`{workload}` CPU ratio: needs it at two or more datanode counts."
            );
            continue;
        };
        let _ = writeln!(
            md,
            "\nSingle-shard `{workload}`, Shoal CPU per statement at {hi} datanodes / at {lo}: \
             **{r:.2}** (goal <= 1.2: {}).",
            if r <= 1.2 { "met" } else { "NOT met" }
        );
        if a.rounds > 1 {
            let per = |n: usize| {
                steps
                    .iter()
                    .find(|s| s.datanodes == n)
                    .map(|s| {
                        s.rounds
                            .iter()
                            .map(|v| format!("{:.1}", if k == 0 { v.0 } else { v.1 }))
                            .collect::<Vec<_>>()
                            .join(" / ")
                    })
                    .unwrap_or_default()
            };
            let _ = writeln!(
                md,
                "\n`{workload}` CPU us per statement in each sweep: {lo} datanode(s) {}; \
                 {hi} datanodes {}.",
                per(lo),
                per(hi)
            );
        }
    }
    md
}
