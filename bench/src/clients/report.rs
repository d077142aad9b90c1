//! The clients report: one row per pool size and client count, issue 51's goals against the
//! smallest count of the same pool, the sysbench runs, what the pools said; CSV, JSON, charts.

use std::fmt::Write;

use serde_json::json;

use super::sysbench::SysbenchRun;
use super::{Cell, ClientsArgs, NewSessions, Outcome, SERVERS};
use crate::results::{Column, Csv, LineChart, Report, RunInfo, Series, fixed, markdown_table};

/// Issue 51's goals at many clients, against the smallest count of the same pool: the login
/// p99 at most this many ms above it, the scatter p99 at most this many times it.
const LOGIN_P99_GOAL_MS: f64 = 5.0;
const SCATTER_P99_GOAL: f64 = 2.0;

/// The progress line of a finished cell.
pub fn line(c: &Cell) -> String {
    format!(
        "pool {} {} clients: point p99 {:.2} ms, scatter p50/p99 {:.2}/{:.2} ms, {:.0} QPS, new \
         sessions (loaded/alone): login p99 {:.2}/{:.2} ms, first p99 {:.2}/{:.2} ms, scatter p99 \
         {:.2}/{:.2} ms, Shoal {:.0} us CPU/stmt, RSS {:.1} MiB, backend conns {:?}, errors {}, \
         wrong {}",
        c.pool,
        c.clients,
        c.point_p99_ms,
        c.scatter_p50_ms,
        c.scatter_p99_ms,
        c.qps,
        c.loaded.login_p99_ms,
        c.quiet.login_p99_ms,
        c.loaded.first_p99_ms,
        c.quiet.first_p99_ms,
        c.loaded.scatter_p99_ms,
        c.quiet.scatter_p99_ms,
        c.shoal_cpu_us_per_statement,
        mib(c.shoal_rss_kib),
        c.backend_conns,
        c.errors + c.login_errors + c.setup_failed,
        c.wrong
    )
}

/// A latency for the tables: `-` when nothing was measured.
fn ms(v: f64) -> String {
    if v.is_finite() {
        fixed(v, 2)
    } else {
        "-".into()
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A goal of one cell against the base cell (the smallest count) of its pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    pub pool: usize,
    pub clients: u64,
    pub base_clients: u64,
    pub what: &'static str,
    pub value: f64,
    pub goal: String,
    pub met: bool,
}

pub fn goals(cells: &[Cell]) -> Vec<Goal> {
    let mut out = Vec::new();
    for c in cells {
        let Some(base) = cells.iter().find(|b| b.pool == c.pool) else {
            continue;
        };
        if base.clients == c.clients {
            continue;
        }
        let login = c.loaded.login_p99_ms - base.loaded.login_p99_ms;
        out.push(Goal {
            pool: c.pool,
            clients: c.clients,
            base_clients: base.clients,
            what: "login p99 under load - base's (ms)",
            value: login,
            goal: format!("< {LOGIN_P99_GOAL_MS}"),
            met: login < LOGIN_P99_GOAL_MS,
        });
        for (what, value) in [
            (
                "active clients' scatter p99 / base's",
                c.scatter_p99_ms / base.scatter_p99_ms,
            ),
            (
                "new session's scatter p99 under load / base's",
                c.loaded.scatter_p99_ms / base.loaded.scatter_p99_ms,
            ),
        ] {
            out.push(Goal {
                pool: c.pool,
                clients: c.clients,
                base_clients: base.clients,
                what,
                value,
                goal: format!("<= {SCATTER_P99_GOAL}"),
                met: value <= SCATTER_P99_GOAL,
            });
        }
    }
    out
}

pub fn build(info: &RunInfo, args: &ClientsArgs, outcome: &Outcome) -> Report {
    let mut md = info.heading("Many clients over few backend connections (issue 51)");
    let _ = write!(
        md,
        "\n{SERVERS} MariaDB servers, 4 datanodes (2 on each), table `item` ({} rows) sharded by \
         `id` with `mod`. Per pool size (`pool.max` per server, one Shoal each) and client count: \
         the idle clients logged in and ran one statement each ({}), then stayed open; for {} s, \
         {} active clients ran point selects with every {}th statement a `SELECT COUNT(*)` of \
         the whole table (the scatter), the idle clients woke up in turn for their statement \
         ({} per second in all: idle wake-up), and a probe opened new connections one after another \
         (login: TCP connect, handshake and authentication, no statement; then its first \
         statement, a point select; then the scatter on that new session; a {} ms pause \
         between logins); then the probe alone for half as long (the active clients still \
         open, nobody running anything). QPS counts the active clients' statements. Text \
         protocol (mysql_async). Shoal CPU per statement: its CPU time over the window (the \
         probe's logins included) over every statement in it (active, wake-ups, probe); idle \
         CPU: over 2 s with every client open and none running; RSS after the window; backend \
         conns: connections open on each server after the window (Shoal's \
         pooled ones and its health checks). Open files allowed: {}.\n\n",
        args.rows,
        match args.idle_statement {
            super::IdleStatement::Point => "a point select: one datanode",
            super::IdleStatement::Scatter => "the scatter: every datanode",
        },
        args.duration,
        args.active,
        args.scatter_every,
        args.idle_rate,
        args.login_interval_ms,
        outcome.nofile
    );
    md.push_str(&cells_table(&outcome.cells));
    let _ = writeln!(
        md,
        "\nNew sessions (the probe): while the active clients run, then alone (nobody else \
         running anything, the idle clients still open):\n"
    );
    md.push_str(&sessions_table(&outcome.cells));
    let goals = goals(&outcome.cells);
    if !goals.is_empty() {
        let _ = writeln!(
            md,
            "\nIssue 51's goals, each cell against the smallest client count of the same pool \
             (reported, not the exit status):\n"
        );
        let rows: Vec<Vec<String>> = goals
            .iter()
            .map(|g| {
                vec![
                    g.pool.to_string(),
                    format!("{} vs {}", g.clients, g.base_clients),
                    g.what.to_string(),
                    fixed(g.value, 2),
                    g.goal.clone(),
                    if g.met { "yes" } else { "NO" }.to_string(),
                ]
            })
            .collect();
        md.push_str(&markdown_table(
            &["pool", "clients", "figure", "value", "goal", "met"],
            &[3],
            &rows,
        ));
    }
    let troubled: Vec<&Cell> = outcome
        .cells
        .iter()
        .filter(|c| c.errors + c.login_errors + c.setup_failed + c.wrong > 0)
        .collect();
    if !troubled.is_empty() {
        let _ = writeln!(md, "\nErrors and wrong answers:\n");
        for c in troubled {
            let _ = writeln!(
                md,
                "- pool {} {} clients: {} failed idle logins, {} statement errors, {} probe \
                 login errors, {} WRONG answers; first error: {}; first wrong: {}",
                c.pool,
                c.clients,
                c.setup_failed,
                c.errors,
                c.login_errors,
                c.wrong,
                c.first_error.as_deref().unwrap_or("-"),
                c.first_wrong.as_deref().unwrap_or("-")
            );
        }
    }
    if !outcome.sysbench.is_empty() {
        let _ = writeln!(
            md,
            "\n## sysbench: {} threads, direct and through Shoal (quick mode, `--pool-max {}`)\n\n\
             One MariaDB database ({} tables x {} rows), text protocol, {} s per run, direct \
             then through Shoal. avg and p95 are per sysbench event (a query for \
             oltp_point_select, a transaction of 14 queries for oltp_read_only).\n",
            args.sysbench_threads
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" and "),
            args.sysbench_pool,
            args.sysbench_tables,
            args.sysbench_table_size,
            args.sysbench_duration.unwrap_or(args.duration)
        );
        for v in &args.sysbench_also {
            let _ = writeln!(
                md,
                "- `{}`: `{}` in quick mode with the same pool{}",
                v.name,
                v.bin.display(),
                if v.args.is_empty() {
                    String::new()
                } else {
                    format!(", then `{}`", v.args.join(" "))
                }
            );
        }
        if !args.sysbench_also.is_empty() {
            md.push('\n');
        }
        md.push_str(&sysbench_table(&outcome.sysbench));
    }
    md.push_str(&pools_section(&outcome.cells));
    Report {
        markdown: md,
        csv: vec![cells_csv(&outcome.cells), sysbench_csv(&outcome.sysbench)],
        json: json!({
            "cells": outcome.cells,
            "sysbench": outcome.sysbench,
            "nofile": outcome.nofile,
            "goals": goals.iter().map(|g| json!({
                "pool": g.pool, "clients": g.clients, "base_clients": g.base_clients,
                "figure": g.what, "value": g.value, "goal": g.goal, "met": g.met,
            })).collect::<Vec<_>>(),
        }),
        charts: charts(&outcome.cells),
    }
}

fn cells_table(cells: &[Cell]) -> String {
    let header = [
        "pool",
        "clients",
        "point p50 ms",
        "point p99 ms",
        "scatter p50 ms",
        "scatter p99 ms",
        "idle wake-up p50 ms",
        "idle wake-up p99 ms",
        "QPS",
        "Shoal CPU µs/stmt",
        "Shoal idle CPU %",
        "Shoal RSS MiB",
        "backend conns",
        "setup s",
        "errors",
    ];
    let rows: Vec<Vec<String>> = cells
        .iter()
        .map(|c| {
            vec![
                c.pool.to_string(),
                c.clients.to_string(),
                ms(c.point_p50_ms),
                ms(c.point_p99_ms),
                ms(c.scatter_p50_ms),
                ms(c.scatter_p99_ms),
                ms(c.wake_p50_ms),
                ms(c.wake_p99_ms),
                fixed(c.qps, 0),
                fixed(c.shoal_cpu_us_per_statement, 0),
                fixed(c.shoal_idle_cpu_pct, 1),
                fixed(mib(c.shoal_rss_kib), 1),
                c.backend_conns
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" + "),
                fixed(c.setup_secs, 1),
                (c.errors + c.login_errors + c.setup_failed).to_string(),
            ]
        })
        .collect();
    markdown_table(&header, &(1..header.len()).collect::<Vec<_>>(), &rows)
}

/// The probe's new sessions: under load, then alone.
fn sessions_table(cells: &[Cell]) -> String {
    let header = [
        "pool",
        "clients",
        "login p50 ms",
        "login p99 ms",
        "first stmt p50 ms",
        "first stmt p99 ms",
        "scatter p50 ms",
        "scatter p99 ms",
        "alone: login p50 ms",
        "login p99 ms",
        "first stmt p50 ms",
        "first stmt p99 ms",
        "scatter p50 ms",
        "scatter p99 ms",
        "sessions",
    ];
    let figures = |n: &NewSessions| {
        [
            n.login_p50_ms,
            n.login_p99_ms,
            n.first_p50_ms,
            n.first_p99_ms,
            n.scatter_p50_ms,
            n.scatter_p99_ms,
        ]
        .map(ms)
    };
    let rows: Vec<Vec<String>> = cells
        .iter()
        .map(|c| {
            let mut row = vec![c.pool.to_string(), c.clients.to_string()];
            row.extend(figures(&c.loaded));
            row.extend(figures(&c.quiet));
            row.push(format!("{} + {}", c.loaded.logins, c.quiet.logins));
            row
        })
        .collect();
    markdown_table(&header, &(1..header.len()).collect::<Vec<_>>(), &rows)
}

fn sysbench_table(runs: &[SysbenchRun]) -> String {
    let direct_qps = |r: &SysbenchRun| {
        runs.iter()
            .find(|d| d.target == "direct" && d.workload == r.workload && d.threads == r.threads)
            .map(|d| d.qps)
    };
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.workload.clone(),
                r.threads.to_string(),
                r.target.to_string(),
                fixed(r.qps, 0),
                fixed(r.avg_ms, 2),
                fixed(r.p95_ms, 2),
                r.shoal_cpu_us_per_query.map_or("-".into(), |v| fixed(v, 1)),
                match direct_qps(r) {
                    Some(d) if d > 0.0 && r.target != "direct" => fixed(r.qps / d, 2),
                    _ => "-".into(),
                },
                r.errors.to_string(),
            ]
        })
        .collect();
    markdown_table(
        &[
            "workload",
            "threads",
            "target",
            "QPS",
            "avg ms",
            "p95 ms",
            "Shoal CPU µs/query",
            "QPS / direct",
            "errors",
        ],
        &[1, 3, 4, 5, 6, 7, 8],
        &rows,
    )
}

/// `SHOW SHOAL POOLS` after each cell's window, one line per server.
fn pools_section(cells: &[Cell]) -> String {
    let mut md = String::new();
    if cells.iter().all(|c| c.pools.is_empty()) {
        return md;
    }
    let _ = writeln!(md, "\n`SHOW SHOAL POOLS` after each window:\n");
    for c in cells {
        for row in &c.pools {
            let cols: Vec<String> = row.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(
                md,
                "- pool {} {} clients: {}",
                c.pool,
                c.clients,
                cols.join(" ")
            );
        }
    }
    md
}

fn cells_csv(cells: &[Cell]) -> Csv {
    let columns: [Column<&Cell>; 42] = [
        ("pool", |c| c.pool.to_string()),
        ("clients", |c| c.clients.to_string()),
        ("active", |c| c.active.to_string()),
        ("idle", |c| c.idle.to_string()),
        ("setup_secs", |c| fixed(c.setup_secs, 3)),
        ("setup_failed", |c| c.setup_failed.to_string()),
        ("secs", |c| fixed(c.secs, 3)),
        ("statements", |c| c.statements.to_string()),
        ("qps", |c| fixed(c.qps, 1)),
        ("points", |c| c.points.to_string()),
        ("point_p50_ms", |c| fixed(c.point_p50_ms, 3)),
        ("point_p99_ms", |c| fixed(c.point_p99_ms, 3)),
        ("scatters", |c| c.scatters.to_string()),
        ("scatter_p50_ms", |c| fixed(c.scatter_p50_ms, 3)),
        ("scatter_p99_ms", |c| fixed(c.scatter_p99_ms, 3)),
        ("wakes", |c| c.wakes.to_string()),
        ("wake_p50_ms", |c| fixed(c.wake_p50_ms, 3)),
        ("wake_p99_ms", |c| fixed(c.wake_p99_ms, 3)),
        ("logins", |c| c.loaded.logins.to_string()),
        ("login_p50_ms", |c| fixed(c.loaded.login_p50_ms, 3)),
        ("login_p99_ms", |c| fixed(c.loaded.login_p99_ms, 3)),
        ("first_p50_ms", |c| fixed(c.loaded.first_p50_ms, 3)),
        ("first_p99_ms", |c| fixed(c.loaded.first_p99_ms, 3)),
        ("new_scatter_p50_ms", |c| fixed(c.loaded.scatter_p50_ms, 3)),
        ("new_scatter_p99_ms", |c| fixed(c.loaded.scatter_p99_ms, 3)),
        ("alone_logins", |c| c.quiet.logins.to_string()),
        ("alone_login_p50_ms", |c| fixed(c.quiet.login_p50_ms, 3)),
        ("alone_login_p99_ms", |c| fixed(c.quiet.login_p99_ms, 3)),
        ("alone_first_p50_ms", |c| fixed(c.quiet.first_p50_ms, 3)),
        ("alone_first_p99_ms", |c| fixed(c.quiet.first_p99_ms, 3)),
        ("alone_new_scatter_p50_ms", |c| {
            fixed(c.quiet.scatter_p50_ms, 3)
        }),
        ("alone_new_scatter_p99_ms", |c| {
            fixed(c.quiet.scatter_p99_ms, 3)
        }),
        ("errors", |c| c.errors.to_string()),
        ("login_errors", |c| c.login_errors.to_string()),
        ("wrong", |c| c.wrong.to_string()),
        ("shoal_cpu_us_per_statement", |c| {
            fixed(c.shoal_cpu_us_per_statement, 1)
        }),
        ("shoal_idle_cpu_pct", |c| fixed(c.shoal_idle_cpu_pct, 2)),
        ("shoal_rss_kib", |c| c.shoal_rss_kib.to_string()),
        ("backend_conns", |c| {
            c.backend_conns
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        }),
        ("backend_conns_total", |c| {
            c.backend_conns.iter().sum::<u64>().to_string()
        }),
        ("first_error", |c| c.first_error.clone().unwrap_or_default()),
        ("first_wrong", |c| c.first_wrong.clone().unwrap_or_default()),
    ];
    Csv::of("cells.csv", cells, &columns)
}

fn sysbench_csv(runs: &[SysbenchRun]) -> Csv {
    let columns: [Column<&SysbenchRun>; 9] = [
        ("workload", |r| r.workload.clone()),
        ("threads", |r| r.threads.to_string()),
        ("target", |r| r.target.to_string()),
        ("queries", |r| r.queries.to_string()),
        ("qps", |r| fixed(r.qps, 2)),
        ("avg_ms", |r| fixed(r.avg_ms, 3)),
        ("p95_ms", |r| fixed(r.p95_ms, 3)),
        ("errors", |r| r.errors.to_string()),
        ("shoal_cpu_us_per_query", |r| {
            r.shoal_cpu_us_per_query
                .map_or(String::new(), |v| fixed(v, 2))
        }),
    ];
    Csv::of("sysbench.csv", runs, &columns)
}

fn charts(cells: &[Cell]) -> Vec<(String, LineChart)> {
    let mut pools: Vec<usize> = cells.iter().map(|c| c.pool).collect();
    pools.dedup();
    let chart = |title: &str, y: &str, f: fn(&Cell) -> f64| LineChart {
        title: title.into(),
        x_label: "client connections".into(),
        y_label: y.into(),
        series: pools
            .iter()
            .map(|&p| Series {
                name: format!("pool.max {p}"),
                points: cells
                    .iter()
                    .filter(|c| c.pool == p)
                    .map(|c| (c.clients as f64, f(c)))
                    .collect(),
            })
            .collect(),
    };
    vec![
        (
            "login-p99.svg".into(),
            chart("Login p99 under load by open clients", "ms", |c| {
                c.loaded.login_p99_ms
            }),
        ),
        (
            "scatter-p99.svg".into(),
            chart("Active clients' scatter p99 by open clients", "ms", |c| {
                c.scatter_p99_ms
            }),
        ),
        (
            "new-session-scatter-p99.svg".into(),
            chart(
                "A new session's scatter p99, alone, by open clients",
                "ms",
                |c| c.quiet.scatter_p99_ms,
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::workload::Measured;

    fn cell(pool: usize, clients: u64, login_p99: f64, scatter_p99: f64) -> Cell {
        let m = Measured::default();
        Cell {
            loaded: NewSessions {
                login_p99_ms: login_p99,
                scatter_p99_ms: scatter_p99 * 10.0,
                ..NewSessions::default()
            },
            scatter_p99_ms: scatter_p99,
            shoal_rss_kib: 2048,
            backend_conns: vec![3, 4],
            ..super::super::cell_of(pool, clients, 8, clients - 8, m.clone(), m)
        }
    }

    #[test]
    fn goals_compare_with_the_smallest_count_of_the_same_pool() {
        let cells = vec![
            cell(16, 8, 1.0, 2.0),
            cell(16, 100, 5.5, 3.9),
            cell(64, 8, 2.0, 1.0),
            cell(64, 1000, 3.0, 2.5),
        ];
        let g = goals(&cells);
        assert_eq!(g.len(), 6);
        assert_eq!((g[0].pool, g[0].clients, g[0].base_clients), (16, 100, 8));
        assert!((g[0].value - 4.5).abs() < 1e-9 && g[0].met);
        assert!((g[1].value - 1.95).abs() < 1e-9 && g[1].met);
        assert!((g[2].value - 1.95).abs() < 1e-9 && g[2].met);
        assert_eq!((g[3].pool, g[3].clients, g[3].base_clients), (64, 1000, 8));
        assert!((g[3].value - 1.0).abs() < 1e-9 && g[3].met);
        assert!((g[4].value - 2.5).abs() < 1e-9 && !g[4].met);
    }

    #[test]
    fn the_tables_show_every_cell() {
        let cells = vec![cell(16, 8, 1.0, 2.0), cell(16, 100, 1.5, 2.5)];
        let md = cells_table(&cells);
        assert_eq!(md.lines().count(), 4);
        assert!(md.contains("| 16 | 100 |"), "{md}");
        assert!(md.contains("| 3 + 4 |"), "{md}");
        let md = sessions_table(&cells);
        assert_eq!(md.lines().count(), 4);
        assert!(md.contains("| 16 | 100 | 0.00 | 1.50 |"), "{md}");
        assert!(md.contains("| 25.00 | - | - |"), "{md}");
        let csv = cells_csv(&cells);
        assert_eq!(csv.text.lines().count(), 3);
        assert!(csv.text.lines().nth(2).unwrap().starts_with("16,100,8,92,"));
    }
}
