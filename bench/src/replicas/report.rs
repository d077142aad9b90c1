//! Medians per (threads, balance), reads per server, the monitor's share of a core, and the
//! markdown report with the two goals of issue 9.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::SystemTime;

use super::{MODES, ReplicasArgs, Split};
use crate::overhead::report::median;
use crate::overhead::sysbench::RunStats;
use crate::results::{markdown_table, utc_timestamp};

/// One sysbench run through one of the two Shoals.
#[derive(Debug, Clone)]
pub struct Sample {
    pub mode: String,
    pub round: u32,
    pub threads: u32,
    pub stats: RunStats,
    pub wall_s: f64,
    pub shoal_cpu_s: f64,
    /// CPU seconds of every mariadbd during the run, in `Cluster::instances` order.
    pub backend_cpu_s: Vec<f64>,
    pub sysbench_cpu_s: f64,
    /// `Com_select` counted by every server during the run (same order).
    pub reads: Vec<u64>,
}

/// Medians of one (threads, balance) cell.
#[derive(Debug, Clone, Default)]
pub struct Cell {
    pub runs: usize,
    pub qps: f64,
    pub avg_ms: f64,
    pub p95_ms: f64,
    pub shoal_cpu_us_per_query: f64,
    /// All mariadbd processes together.
    pub backend_cpu_us_per_query: f64,
    /// CPU of Shoal, every mariadbd and sysbench over the wall time, as % of all cores.
    pub busy_pct: f64,
    pub errors: u64,
}

pub fn cells(samples: &[Sample]) -> BTreeMap<(u32, String), Cell> {
    let mut groups: BTreeMap<(u32, String), Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        groups
            .entry((s.threads, s.mode.clone()))
            .or_default()
            .push(s);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    groups
        .into_iter()
        .map(|(key, runs)| {
            let pick = |f: &dyn Fn(&Sample) -> f64| {
                median(&mut runs.iter().map(|s| f(s)).collect::<Vec<_>>())
            };
            let per_query = |cpu: f64, s: &Sample| cpu * 1e6 / s.stats.queries.max(1) as f64;
            let backend = |s: &Sample| s.backend_cpu_s.iter().sum::<f64>();
            let cell = Cell {
                runs: runs.len(),
                qps: pick(&|s| s.stats.qps),
                avg_ms: pick(&|s| s.stats.avg_ms),
                p95_ms: pick(&|s| s.stats.p95_ms),
                shoal_cpu_us_per_query: pick(&|s| per_query(s.shoal_cpu_s, s)),
                backend_cpu_us_per_query: pick(&|s| per_query(backend(s), s)),
                busy_pct: pick(&|s| {
                    (s.shoal_cpu_s + backend(s) + s.sysbench_cpu_s) * 100.0
                        / (s.wall_s.max(1e-9) * cores)
                }),
                errors: runs.iter().map(|s| s.stats.errors).sum(),
            };
            (key, cell)
        })
        .collect()
}

/// The columns of [`median_rows`], as `medians.csv` names them.
pub const MEDIAN_COLUMNS: [&str; 10] = [
    "threads",
    "balance",
    "qps",
    "avg_ms",
    "p95_ms",
    "shoal_cpu_us_per_query",
    "mariadbd_cpu_us_per_query",
    "machine_busy_pct",
    "errors",
    "runs",
];

/// One row per cell, for the report's table and `medians.csv`.
pub fn median_rows(cells: &BTreeMap<(u32, String), Cell>) -> Vec<Vec<String>> {
    cells
        .iter()
        .map(|((t, m), c)| {
            vec![
                t.to_string(),
                m.clone(),
                format!("{:.1}", c.qps),
                format!("{:.3}", c.avg_ms),
                format!("{:.3}", c.p95_ms),
                format!("{:.1}", c.shoal_cpu_us_per_query),
                format!("{:.1}", c.backend_cpu_us_per_query),
                format!("{:.0}", c.busy_pct),
                c.errors.to_string(),
                c.runs.to_string(),
            ]
        })
        .collect()
}

/// SELECTs per server summed over every run of each balance mode, in [`MODES`] order.
pub fn reads_by_mode(split: &Split) -> Vec<(String, Vec<u64>)> {
    MODES
        .iter()
        .filter(|m| split.samples.iter().any(|s| s.mode == **m))
        .map(|m| {
            let mut per = vec![0u64; split.servers.len()];
            for s in split.samples.iter().filter(|s| s.mode == *m) {
                for (acc, n) in per.iter_mut().zip(&s.reads) {
                    *acc += n;
                }
            }
            (m.to_string(), per)
        })
        .collect()
}

/// The idle Shoal's cost with its health monitor running.
#[derive(Debug, Clone)]
pub struct MonitorResult {
    pub servers: usize,
    pub heartbeat_ms: u64,
    pub wall_s: f64,
    pub cpu_s: f64,
    /// `SELECT`s the servers ran during the measurement: one per check.
    pub checks: u64,
}

impl MonitorResult {
    /// Shoal's CPU over the wall time, as a percentage of one core.
    pub fn core_percent(&self) -> f64 {
        self.cpu_s * 100.0 / self.wall_s.max(1e-9)
    }

    pub fn us_per_check(&self) -> f64 {
        self.cpu_s * 1e6 / self.checks.max(1) as f64
    }
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

pub fn markdown(
    args: &ReplicasArgs,
    split: Option<&Split>,
    monitor: Option<&MonitorResult>,
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Read/write splitting: round_robin vs primary_only, and the health monitor's cost\n\n\
         Run at {} on {}.\n",
        utc_timestamp(SystemTime::now(), true),
        crate::results::machine_line()
    );
    if let Some(split) = split {
        let _ = writeln!(
            md,
            "## Reads over 2 replicas vs the primary alone\n\n\
             One datahost: a MariaDB primary and {} replicas (real replication), all on this \
             machine. Two Shoals serve it at once, `balance: round_robin` and \
             `balance: primary_only` (heartbeat {} ms); sysbench `oltp_read_only --skip-trx=on` \
             ({} tables x {} rows; autocommit reads: inside a transaction reads stay on the \
             primary by design) runs through them in turn, {} round(s) of {} s each. Both \
             configs also name a read_only user, so that Shoal routes statements in both \
             (alone, primary_only over one unsharded datanode is relayed without the router). \
             Medians \
             over the rounds. CPU per query: utime+stime from /proc over the run divided by \
             the queries sysbench counted. Latency is per sysbench event (14 SELECTs). \
             Machine busy: CPU of Shoal, every mariadbd and \
             sysbench over the wall time, as a share of all cores.{}\n",
            split.servers.len().saturating_sub(1),
            args.heartbeat_ms,
            args.tables,
            args.table_size,
            args.rounds,
            args.duration,
            match args.server_cpus {
                Some(c) => format!(
                    " Every mariadbd is capped at {c} CPU (`--server-cpus`, a cgroup quota), as \
                     servers with CPUs of their own: the capacity replicas add to a real \
                     deployment, which processes sharing this machine's cores cannot show."
                ),
                None => String::new(),
            },
        );
        let cells = cells(&split.samples);
        md.push_str(&markdown_table(
            &[
                "threads",
                "balance",
                "QPS",
                "avg ms",
                "p95 ms",
                "Shoal CPU us/query",
                "mariadbd CPU us/query (all)",
                "machine busy %",
                "errors",
                "runs",
            ],
            &[0, 2, 3, 4, 5, 6, 7, 8, 9],
            &median_rows(&cells),
        ));
        md.push('\n');
        for &t in &args.threads {
            if let (Some(rr), Some(po)) = (
                cells.get(&(t, "round_robin".into())),
                cells.get(&(t, "primary_only".into())),
            ) {
                let ratio = rr.qps / po.qps;
                let _ = writeln!(
                    md,
                    "- {t} threads: round_robin QPS / primary_only QPS = {ratio:.3} \
                     (goal > 1: {})",
                    met(ratio > 1.0)
                );
            }
        }
        let _ = writeln!(
            md,
            "\nSELECTs each server ran (`Com_select`, all runs of a mode; includes Shoal's \
             health checks, one per server per heartbeat from each of the two Shoals):\n"
        );
        let mut header: Vec<String> = vec!["balance".into()];
        header.extend(
            split
                .servers
                .iter()
                .map(|(n, role)| format!("{n} ({role})")),
        );
        let rows: Vec<Vec<String>> = reads_by_mode(split)
            .into_iter()
            .map(|(m, per)| {
                let total: u64 = per.iter().sum();
                let mut row = vec![m];
                row.extend(
                    per.iter()
                        .map(|n| format!("{n} ({:.1}%)", *n as f64 * 100.0 / total.max(1) as f64)),
                );
                row
            })
            .collect();
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let right: Vec<usize> = (1..header.len()).collect();
        md.push_str(&markdown_table(&header, &right, &rows));
        md.push('\n');
    }
    if let Some(m) = monitor {
        let pct = m.core_percent();
        let _ = writeln!(
            md,
            "## Health monitor cost\n\n\
             One Shoal with {} servers ({} datahosts of a primary and {} replicas), heartbeat \
             {} ms, no client: {:.3} CPU s in {:.1} s = **{:.3}% of one core** (goal < 1%: {}). \
             The servers counted {} checks ({:.0} per second, {:.1} us of Shoal CPU each).\n",
            m.servers,
            args.monitor_datahosts,
            args.monitor_replicas,
            m.heartbeat_ms,
            m.cpu_s,
            m.wall_s,
            pct,
            met(pct < 1.0),
            m.checks,
            m.checks as f64 / m.wall_s.max(1e-9),
            m.us_per_check(),
        );
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(mode: &str, qps: f64, reads: Vec<u64>) -> Sample {
        Sample {
            mode: mode.into(),
            round: 1,
            threads: 16,
            stats: RunStats {
                queries: 1000,
                qps,
                avg_ms: 1.0,
                p95_ms: 2.0,
                errors: 0,
            },
            wall_s: 10.0,
            shoal_cpu_s: 0.05,
            backend_cpu_s: vec![1.0, 1.0, 1.0],
            sysbench_cpu_s: 2.0,
            reads,
        }
    }

    #[test]
    fn medians_and_reads_are_per_mode() {
        let split = Split {
            servers: vec![
                ("p0".into(), "primary".into()),
                ("p0r0".into(), "replica".into()),
                ("p0r1".into(), "replica".into()),
            ],
            samples: vec![
                sample("round_robin", 100.0, vec![1, 50, 50]),
                sample("primary_only", 80.0, vec![100, 1, 1]),
                sample("round_robin", 120.0, vec![1, 60, 60]),
                sample("round_robin", 110.0, vec![1, 40, 40]),
            ],
        };
        let c = cells(&split.samples);
        assert_eq!(c[&(16, "round_robin".into())].qps, 110.0);
        assert_eq!(c[&(16, "round_robin".into())].runs, 3);
        assert_eq!(c[&(16, "primary_only".into())].shoal_cpu_us_per_query, 50.0);
        assert_eq!(
            reads_by_mode(&split),
            vec![
                ("round_robin".to_string(), vec![3, 150, 150]),
                ("primary_only".to_string(), vec![100, 1, 1]),
            ]
        );
    }

    #[test]
    fn monitor_share_of_a_core() {
        let m = MonitorResult {
            servers: 16,
            heartbeat_ms: 1000,
            wall_s: 60.0,
            cpu_s: 0.3,
            checks: 960,
        };
        assert!((m.core_percent() - 0.5).abs() < 1e-9);
        assert!((m.us_per_check() - 312.5).abs() < 1e-9);
    }
}
