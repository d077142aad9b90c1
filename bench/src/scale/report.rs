//! The scale report: per datanode count and workload, QPS and Shoal's CPU per statement; the
//! single-shard CPU ratio between the largest and the smallest count; CSV, JSON and charts.

use std::fmt::Write;

use serde_json::json;

use super::{ScaleArgs, Step};
use crate::error::BenchError;
use crate::results::{LineChart, ResultsDir, Series, markdown_table};

pub struct Context {
    pub started: String,
    pub machine: String,
    pub command_line: String,
    pub args: ScaleArgs,
}

const WORKLOADS: [&str; 3] = ["insert", "point_select", "aggregate"];

/// Point-select CPU per statement at the largest count over the smallest (goal: at most 1.2).
pub fn point_cpu_ratio(steps: &[Step]) -> Option<(usize, usize, f64)> {
    let cpu = |s: &Step| {
        s.phases
            .iter()
            .find(|p| p.workload == "point_select")
            .map(|p| p.shoal_cpu_us_per_statement)
    };
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

pub fn write_all(dir: &ResultsDir, ctx: &Context, steps: &[Step]) -> Result<String, BenchError> {
    let md = markdown(ctx, steps);
    dir.write("report.md", &md)?;
    let rows: Vec<Vec<String>> = steps
        .iter()
        .flat_map(|s| {
            s.phases.iter().map(move |p| {
                vec![
                    s.datanodes.to_string(),
                    p.workload.clone(),
                    p.statements.to_string(),
                    format!("{:.3}", p.secs),
                    format!("{:.1}", p.qps),
                    p.avg_ms.map_or(String::new(), |v| format!("{v:.3}")),
                    format!("{:.2}", p.shoal_cpu_us_per_statement),
                    p.wrong.to_string(),
                ]
            })
        })
        .collect();
    dir.write_csv(
        "scale.csv",
        &[
            "datanodes",
            "workload",
            "statements",
            "secs",
            "qps",
            "avg_ms",
            "shoal_cpu_us_per_statement",
            "wrong",
        ],
        &rows,
    )?;
    dir.write_json(
        "results.json",
        &json!({
            "experiment": "scale",
            "started": ctx.started,
            "machine": ctx.machine,
            "command": ctx.command_line,
            "rows": ctx.args.rows,
            "threads": ctx.args.threads,
            "primaries": ctx.args.primaries,
            "steps": steps,
        }),
    )?;
    let chart = |title: &str, y: &str, f: &dyn Fn(&super::Phase) -> f64| LineChart {
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
    dir.write_chart(
        "cpu.svg",
        &chart(
            "Shoal CPU per statement by datanode count",
            "Shoal CPU us per statement",
            &|p| p.shoal_cpu_us_per_statement,
        ),
    )?;
    dir.write_chart(
        "qps.svg",
        &chart(
            "QPS through Shoal by datanode count",
            "statements per second",
            &|p| p.qps,
        ),
    )?;
    Ok(md)
}

pub fn markdown(ctx: &Context, steps: &[Step]) -> String {
    let a = &ctx.args;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Shard-count sweep through Shoal\n\n{} on {}.\n\n`{}`\n\n\
         The Mycat table with an index on FACTID, sharded by `mod` over the first N datanodes \
         (databases spread round-robin over {} MariaDB primar{}). At each N: {} rows inserted \
         ({} per INSERT), {} point selects by FACTID (one shard each), {} `SELECT COUNT(*), \
         SUM(SALENUM)` (every shard each), all on {} connections and every answer checked. \
         Shoal CPU: utime+stime of its process from /proc over the phase, per statement.\n",
        ctx.started,
        ctx.machine,
        ctx.command_line,
        a.primaries,
        if a.primaries == 1 { "y" } else { "ies" },
        a.rows,
        a.batch,
        a.point_selects,
        a.aggregates,
        a.threads
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
    match point_cpu_ratio(steps) {
        Some((lo, hi, r)) => {
            let _ = writeln!(
                md,
                "\nSingle-shard point select, Shoal CPU per statement at {hi} datanodes / at {lo}: \
                 **{r:.2}** (goal <= 1.2: {}).",
                if r <= 1.2 { "met" } else { "NOT met" }
            );
        }
        None => {
            let _ = writeln!(
                md,
                "\nSingle-shard CPU ratio: needs point selects at two or more datanode counts."
            );
        }
    }
    let _ = writeln!(
        md,
        "\nFiles: `scale.csv`, `results.json`, `cpu.svg`, `qps.svg`."
    );
    md
}
