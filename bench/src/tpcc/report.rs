//! The tpcc report: per thread count and side, medians over the rounds of tpmC, TPS, p95
//! latency per transaction type and Shoal's CPU per transaction; errors, retries, rollbacks and
//! remote work summed; load times; the consistency checks; tpmC by threads and by servers as SVG.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::json;

use super::ExperimentArgs;
use super::check::CheckReport;
use super::load::LoadStat;
use super::schema::Scale;
use super::txn::{Kind, RunStat};
use crate::cluster::status::Counters;
use crate::overhead::report::median;
use crate::results::{Column, Csv, LineChart, Report, RunInfo, Series, fixed, markdown_table};

/// One run of one side at one thread count.
#[derive(Debug, Clone)]
pub struct Sample {
    pub round: usize,
    pub threads: usize,
    pub side: String,
    pub servers: Option<usize>,
    pub stat: RunStat,
    /// CPU seconds of the proxy's process (Shoal or HAProxy) over the run (none for direct).
    pub proxy_cpu_s: Option<f64>,
    /// CPU seconds of every mariadbd over the run.
    pub backend_cpu_s: f64,
    /// How much the servers' [`super::COUNTERS`] grew over the run, summed over servers.
    pub server_counters: Counters,
    /// Context switches of every mariadbd's threads over the run.
    pub backend_switches: u64,
}

impl Sample {
    fn proxy_cpu_us_per_txn(&self) -> Option<f64> {
        self.proxy_cpu_s
            .map(|c| c * 1e6 / self.stat.transactions().max(1) as f64)
    }
}

/// Medians (and sums) of one (threads, side) cell.
#[derive(Debug, Clone, Default)]
pub struct Cell {
    pub runs: usize,
    pub tpmc: f64,
    pub tps: f64,
    pub p95_ms: BTreeMap<Kind, f64>,
    pub proxy_cpu_us_per_txn: Option<f64>,
    pub backend_cpu_us_per_txn: f64,
    pub transactions: u64,
    pub errors: u64,
    pub retries: u64,
    pub rolled_back: u64,
    pub remote_lines: u64,
    pub lines: u64,
    pub remote_payments: u64,
    pub payments: u64,
    /// The servers' counters summed over the runs.
    pub server_counters: Counters,
    /// mariadbd's context switches summed over the runs.
    pub backend_switches: u64,
}

impl Cell {
    /// Counter `name` per transaction finished.
    pub fn per_txn(&self, name: &str) -> f64 {
        self.server_counters.get(name).copied().unwrap_or(0) as f64
            / self.transactions.max(1) as f64
    }

    /// Counters `names` together, per transaction finished.
    fn per_txn_of(&self, names: &[&str]) -> f64 {
        names.iter().map(|n| self.per_txn(n)).sum()
    }
}

pub fn cells(samples: &[Sample]) -> BTreeMap<(usize, String), Cell> {
    let mut groups: BTreeMap<(usize, String), Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        groups
            .entry((s.threads, s.side.clone()))
            .or_default()
            .push(s);
    }
    groups
        .into_iter()
        .map(|(k, runs)| {
            let of = |f: &dyn Fn(&Sample) -> f64| {
                median(&mut runs.iter().map(|s| f(s)).collect::<Vec<_>>())
            };
            let sum = |f: &dyn Fn(&Sample) -> u64| runs.iter().map(|s| f(s)).sum::<u64>();
            let cell = Cell {
                runs: runs.len(),
                tpmc: of(&|s| s.stat.tpmc()),
                tps: of(&|s| s.stat.tps()),
                p95_ms: Kind::ALL
                    .iter()
                    .map(|&kind| (kind, of(&|s| s.stat.kind(kind).p95_ms())))
                    .collect(),
                proxy_cpu_us_per_txn: runs[0]
                    .proxy_cpu_s
                    .map(|_| of(&|s| s.proxy_cpu_us_per_txn().unwrap_or(f64::NAN))),
                backend_cpu_us_per_txn: of(&|s| {
                    s.backend_cpu_s * 1e6 / s.stat.transactions().max(1) as f64
                }),
                transactions: sum(&|s| s.stat.transactions()),
                errors: sum(&|s| s.stat.errors()),
                retries: sum(&|s| s.stat.retries()),
                rolled_back: sum(&|s| s.stat.rolled_back()),
                remote_lines: sum(&|s| s.stat.remote_lines),
                lines: sum(&|s| s.stat.lines),
                remote_payments: sum(&|s| s.stat.remote_payments),
                payments: sum(&|s| s.stat.kind(Kind::Payment).committed),
                backend_switches: sum(&|s| s.backend_switches),
                server_counters: runs.iter().fold(Counters::new(), |mut acc, s| {
                    for (n, v) in &s.server_counters {
                        *acc.entry(n.clone()).or_default() += v;
                    }
                    acc
                }),
            };
            (k, cell)
        })
        .collect()
}

/// Everything the experiment measured.
pub struct Results<'a> {
    pub scale: Scale,
    pub args: &'a ExperimentArgs,
    pub sides: Vec<String>,
    pub loads: Vec<(String, LoadStat)>,
    pub samples: Vec<Sample>,
    pub checks: Vec<(String, CheckReport)>,
    pub not_run: Vec<(String, String)>,
}

impl Results<'_> {
    /// Errors in any run, or a consistency condition broken on any side.
    pub fn failed(&self) -> bool {
        self.samples.iter().any(|s| s.stat.errors() > 0) || self.checks.iter().any(|c| !c.1.ok())
    }

    pub fn build(&self, info: &RunInfo) -> Report {
        let cells = cells(&self.samples);
        let a = self.args;
        let s = &self.scale;
        let mut md = info.heading("TPC-C: one MariaDB (direct) vs Shoal over 1..N MariaDB servers");
        let _ = writeln!(
            md,
            "\n{} warehouses ({} items, {} customers and orders per district{}), the \
             sysbench-tpcc schema; every table but `item` sharded by its warehouse column with \
             one `mod` rule over one datanode per server, `item` global. `direct`: one MariaDB \
             holding every warehouse; `shoal-N`: Shoal over N MariaDB primaries (launcher, \
             InnoDB buffer pool {} each, {}). The transactions of \
             `shoal-bench tpcc` (mix 45/43/4/4/4, NURand keys, 1% of New-Orders rolled back, 1% \
             of New-Order lines and 15% of Payments from a remote warehouse, 60% of Payments and \
             Order-Status by last name, no keying or think time; terminal i at home warehouse \
             i mod W + 1); deadlocks and lock wait timeouts retried and counted. {} round(s) of \
             {} s per run, sides interleaved (order reversed every other round); medians over \
             rounds, counts summed. tpmC: New-Orders committed per minute; TPS: transactions \
             finished per second; proxy CPU: utime+stime of Shoal's (or HAProxy's) process per \
             transaction; mariadbd CPU: every instance's, per transaction.{}\n",
            s.warehouses,
            s.items,
            s.customers,
            if s.items == 100_000 && s.customers == 3_000 {
                ", the spec's size"
            } else {
                ", **smaller than the spec's**"
            },
            a.buffer_pool,
            match a.server_cpus {
                Some(c) => format!("each capped at {c} CPU with a cgroup quota"),
                None => "all on this machine's cores".to_string(),
            },
            a.rounds,
            a.duration,
            hops_text(&a.hops),
        );
        for (name, why) in &self.not_run {
            let _ = writeln!(md, "\n**{name}: not run**: {why}\n");
        }

        let _ = writeln!(md, "\n## Load\n");
        let rows: Vec<Vec<String>> = self
            .loads
            .iter()
            .map(|(n, l)| {
                vec![
                    n.clone(),
                    l.rows.to_string(),
                    l.statements.to_string(),
                    format!("{:.1}", l.secs),
                    format!("{:.0}", l.rows as f64 / l.secs.max(1e-9)),
                ]
            })
            .collect();
        md.push_str(&markdown_table(
            &["side", "rows", "INSERTs", "seconds", "rows/s"],
            &[1, 2, 3, 4],
            &rows,
        ));
        let _ = writeln!(
            md,
            "\n{} connections per side, {} rows per INSERT.\n",
            a.load_threads,
            super::load::BATCH
        );

        let _ = writeln!(md, "\n## tpmC by threads\n");
        let mut header = vec!["threads".to_string()];
        header.extend(self.sides.iter().cloned());
        let rows: Vec<Vec<String>> = a
            .threads
            .iter()
            .map(|&t| {
                let mut row = vec![t.to_string()];
                row.extend(self.sides.iter().map(|side| {
                    cells
                        .get(&(t, side.clone()))
                        .map_or("-".into(), |c| format!("{:.0}", c.tpmc))
                }));
                row
            })
            .collect();
        let h: Vec<&str> = header.iter().map(String::as_str).collect();
        md.push_str(&markdown_table(
            &h,
            &(0..h.len()).collect::<Vec<_>>(),
            &rows,
        ));

        let _ = writeln!(md, "\n## Every cell\n");
        let mut rows = Vec::new();
        for ((t, side), c) in &cells {
            let mut row = vec![
                t.to_string(),
                side.clone(),
                format!("{:.0}", c.tpmc),
                format!("{:.1}", c.tps),
            ];
            row.extend(Kind::ALL.iter().map(|k| format!("{:.1}", c.p95_ms[k])));
            row.extend([
                c.proxy_cpu_us_per_txn
                    .map_or("-".into(), |v| format!("{v:.0}")),
                format!("{:.0}", c.backend_cpu_us_per_txn),
                c.errors.to_string(),
                c.retries.to_string(),
                c.rolled_back.to_string(),
                format!("{}/{}", c.remote_lines, c.lines),
                format!("{}/{}", c.remote_payments, c.payments),
            ]);
            rows.push(row);
        }
        md.push_str(&markdown_table(
            &[
                "threads",
                "side",
                "tpmC",
                "TPS",
                "p95 ms NO",
                "p95 ms P",
                "p95 ms OS",
                "p95 ms D",
                "p95 ms SL",
                "proxy CPU µs/txn",
                "mariadbd CPU µs/txn",
                "errors",
                "retries (1213/1205)",
                "rolled back (1% NO)",
                "remote NO lines",
                "remote payments",
            ],
            &(0..16).filter(|&i| i != 1).collect::<Vec<_>>(),
            &rows,
        ));

        let _ = writeln!(
            md,
            "\n## What reached MariaDB per transaction\n\nThe servers' own counters (`SHOW \
             GLOBAL STATUS`, summed over servers and runs) per transaction finished: \
             `Questions` (every statement a server ran for a client), the transaction \
             statements (BEGIN, COMMIT, ROLLBACK; XA START, END, PREPARE, COMMIT, ROLLBACK) \
             and the rest by kind. Direct, they are what the driver sent; a retried \
             transaction's attempts count. How commits batched: `Binlog_commits` per \
             `Binlog_group_commits`, and `Innodb_log_writes` per transaction; the context \
             switches of every mariadbd's threads (/proc, live threads) per transaction.\n"
        );
        let rows: Vec<Vec<String>> = cells
            .iter()
            .map(|((t, side), c)| {
                let f = |v: f64| format!("{v:.2}");
                vec![
                    t.to_string(),
                    side.clone(),
                    f(c.per_txn("Questions")),
                    f(c.per_txn_of(&["Com_begin", "Com_commit", "Com_rollback"])),
                    f(c.per_txn_of(&[
                        "Com_xa_start",
                        "Com_xa_end",
                        "Com_xa_prepare",
                        "Com_xa_commit",
                        "Com_xa_rollback",
                    ])),
                    f(c.per_txn("Com_xa_prepare")),
                    f(c.per_txn("Com_select")),
                    f(c.per_txn_of(&["Com_insert", "Com_update", "Com_delete"])),
                    f(c.per_txn("Binlog_commits") / c.per_txn("Binlog_group_commits").max(1e-9)),
                    f(c.per_txn("Innodb_log_writes")),
                    format!(
                        "{:.1}",
                        c.backend_switches as f64 / c.transactions.max(1) as f64
                    ),
                ]
            })
            .collect();
        md.push_str(&markdown_table(
            &[
                "threads",
                "side",
                "Questions",
                "BEGIN/COMMIT/ROLLBACK",
                "XA statements",
                "of which XA PREPARE",
                "SELECT",
                "INSERT/UPDATE/DELETE",
                "commits per binlog group commit",
                "InnoDB log writes",
                "mariadbd context switches",
            ],
            &[0, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            &rows,
        ));

        let shoal_sides: Vec<(usize, &String)> = self
            .samples
            .iter()
            .filter_map(|s| s.servers.map(|n| (n, &s.side)))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if shoal_sides.len() > 1 {
            let _ = writeln!(
                md,
                "\n## tpmC by servers (Shoal; the same {} warehouses)\n",
                s.warehouses
            );
            let mut header = vec!["threads".to_string(), "direct (1 server)".to_string()];
            header.extend(shoal_sides.iter().map(|(n, _)| format!("{n} server(s)")));
            let rows: Vec<Vec<String>> = a
                .threads
                .iter()
                .map(|&t| {
                    let mut row = vec![t.to_string()];
                    row.push(
                        cells
                            .get(&(t, "direct".into()))
                            .map_or("-".into(), |c| format!("{:.0}", c.tpmc)),
                    );
                    row.extend(shoal_sides.iter().map(|(_, side)| {
                        cells
                            .get(&(t, (*side).clone()))
                            .map_or("-".into(), |c| format!("{:.0}", c.tpmc))
                    }));
                    row
                })
                .collect();
            let h: Vec<&str> = header.iter().map(String::as_str).collect();
            md.push_str(&markdown_table(
                &h,
                &(0..h.len()).collect::<Vec<_>>(),
                &rows,
            ));
        }

        let _ = writeln!(
            md,
            "\n## Consistency (TPC-C clause 3.3.2, after the runs)\n"
        );
        let rows: Vec<Vec<String>> = self
            .checks
            .iter()
            .map(|(n, r)| {
                vec![
                    n.clone(),
                    if r.ok() {
                        "pass".into()
                    } else {
                        "**FAIL**".into()
                    },
                    r.summary(),
                ]
            })
            .collect();
        md.push_str(&markdown_table(
            &["side", "12 conditions", "detail"],
            &[],
            &rows,
        ));

        let mut errors: BTreeMap<(String, String), u64> = BTreeMap::new();
        for s in &self.samples {
            for (t, n) in &s.stat.error_texts {
                *errors.entry((s.side.clone(), t.clone())).or_default() += n;
            }
        }
        if !errors.is_empty() {
            let _ = writeln!(md, "\n## Errors\n");
            let rows: Vec<Vec<String>> = errors
                .iter()
                .map(|((side, t), n)| vec![side.clone(), n.to_string(), t.clone()])
                .collect();
            md.push_str(&markdown_table(
                &["side", "count", "error -- statement"],
                &[1],
                &rows,
            ));
        }
        let _ = writeln!(
            md,
            "\nVerdict: **{}** (fails on any error or broken condition).",
            if self.failed() { "FAIL" } else { "pass" }
        );

        let sample_columns: [Column<&Sample>; 18] = [
            ("round", |s| s.round.to_string()),
            ("threads", |s| s.threads.to_string()),
            ("side", |s| s.side.clone()),
            ("secs", |s| fixed(s.stat.secs, 3)),
            ("tpmc", |s| fixed(s.stat.tpmc(), 1)),
            ("tps", |s| fixed(s.stat.tps(), 2)),
            ("p95_ms_new_order", |s| {
                fixed(s.stat.kind(Kind::NewOrder).p95_ms(), 3)
            }),
            ("p95_ms_payment", |s| {
                fixed(s.stat.kind(Kind::Payment).p95_ms(), 3)
            }),
            ("p95_ms_order_status", |s| {
                fixed(s.stat.kind(Kind::OrderStatus).p95_ms(), 3)
            }),
            ("p95_ms_delivery", |s| {
                fixed(s.stat.kind(Kind::Delivery).p95_ms(), 3)
            }),
            ("p95_ms_stock_level", |s| {
                fixed(s.stat.kind(Kind::StockLevel).p95_ms(), 3)
            }),
            ("errors", |s| s.stat.errors().to_string()),
            ("retries", |s| s.stat.retries().to_string()),
            ("rolled_back", |s| s.stat.rolled_back().to_string()),
            ("remote_lines", |s| s.stat.remote_lines.to_string()),
            ("remote_payments", |s| s.stat.remote_payments.to_string()),
            ("proxy_cpu_s", |s| {
                s.proxy_cpu_s.map_or(String::new(), |v| fixed(v, 3))
            }),
            ("server_questions", |s| {
                s.server_counters
                    .get("Questions")
                    .copied()
                    .unwrap_or(0)
                    .to_string()
            }),
        ];
        let tpmc_by_threads = LineChart {
            title: format!("TPC-C tpmC by threads ({} warehouses)", s.warehouses),
            x_label: "threads (terminals)".into(),
            y_label: "tpmC (New-Orders per minute)".into(),
            series: self
                .sides
                .iter()
                .map(|side| Series {
                    name: side.clone(),
                    points: a
                        .threads
                        .iter()
                        .filter_map(|&t| cells.get(&(t, side.clone())).map(|c| (t as f64, c.tpmc)))
                        .collect(),
                })
                .collect(),
        };
        let tpmc_by_servers = LineChart {
            title: format!(
                "TPC-C tpmC through Shoal by servers ({} warehouses)",
                s.warehouses
            ),
            x_label: "MariaDB servers".into(),
            y_label: "tpmC (New-Orders per minute)".into(),
            series: a
                .threads
                .iter()
                .map(|&t| Series {
                    name: format!("{t} threads"),
                    points: shoal_sides
                        .iter()
                        .filter_map(|(n, side)| {
                            cells
                                .get(&(t, (*side).clone()))
                                .map(|c| (*n as f64, c.tpmc))
                        })
                        .collect(),
                })
                .collect(),
        };
        Report {
            markdown: md,
            csv: vec![Csv::of("samples.csv", self.samples.iter(), &sample_columns)],
            json: json!({
                "scale": s,
                "threads": a.threads,
                "servers": a.servers,
                "rounds": a.rounds,
                "duration_s": a.duration,
                "loads": self.loads.iter().map(|(n, l)| json!({"side": n, "load": l})).collect::<Vec<_>>(),
                "cells": cells.iter().map(|((t, side), c)| json!({
                    "threads": t, "side": side, "runs": c.runs, "tpmc": c.tpmc, "tps": c.tps,
                    "p95_ms": c.p95_ms.iter().map(|(k, v)| (k.name().to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
                    "proxy_cpu_us_per_txn": c.proxy_cpu_us_per_txn,
                    "backend_cpu_us_per_txn": c.backend_cpu_us_per_txn,
                    "transactions": c.transactions, "errors": c.errors, "retries": c.retries,
                    "server_counters": c.server_counters,
                    "backend_switches": c.backend_switches,
                    "rolled_back": c.rolled_back, "remote_lines": c.remote_lines, "lines": c.lines,
                    "remote_payments": c.remote_payments, "payments": c.payments,
                })).collect::<Vec<_>>(),
                "checks": self.checks.iter().map(|(n, r)| json!({"side": n, "ok": r.ok(), "conditions": r.conditions})).collect::<Vec<_>>(),
                "not_run": self.not_run.iter().map(|(n, w)| json!({"side": n, "why": w})).collect::<Vec<_>>(),
                "failed": self.failed(),
            }),
            charts: vec![
                ("tpmc-threads.svg".into(), tpmc_by_threads),
                ("tpmc-servers.svg".into(), tpmc_by_servers),
            ],
        }
    }
}

/// What the report says of the sides in front of the direct server (`--hops`).
fn hops_text(hops: &[String]) -> String {
    hops.iter()
        .map(|h| match h.as_str() {
            "haproxy" => " `haproxy`: HAProxy in TCP mode (2 threads) in front of the direct \
                          server and database, a bare proxy hop."
                .to_string(),
            other => format!(
                " `{other}`: Shoal in quick mode in front of the direct server and database \
                 (every statement relayed, nothing routed)."
            ),
        })
        .collect()
}

/// The figures of one `tpcc run`, as lines of text.
pub fn run_summary(s: &RunStat) -> String {
    let mut out = format!(
        "{:.1} s: {:.0} tpmC, {:.1} TPS, {} errors, {} retries (deadlock/lock wait), {} rolled \
         back, remote New-Order lines {}/{}, remote payments {}\n",
        s.secs,
        s.tpmc(),
        s.tps(),
        s.errors(),
        s.retries(),
        s.rolled_back(),
        s.remote_lines,
        s.lines,
        s.remote_payments
    );
    for k in Kind::ALL {
        let st = s.kind(k);
        let _ = writeln!(
            out,
            "  {:<12} committed {:>7}  p95 {:>8.1} ms  retries {}  errors {}",
            k.name(),
            st.committed,
            st.p95_ms(),
            st.retries,
            st.errors
        );
    }
    for (t, n) in &s.error_texts {
        let _ = writeln!(out, "  error x{n}: {t}");
    }
    out
}
