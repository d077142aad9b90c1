//! The experiment's sysbench part: many threads (256, 512) against one MariaDB database
//! directly and through Shoal in quick mode with a pool smaller than the threads (64), in turn,
//! with `overhead`'s sysbench driver.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::ClientsArgs;
use crate::cluster::Cluster;
use crate::error::BenchError;
use crate::overhead::sysbench::{self, RunSpec, SysbenchTarget};
use crate::overhead::targets;
use crate::progress::Progress;

/// The database sysbench's tables live in, on the first server.
pub const DB: &str = "sbtest";

/// One sysbench run.
#[derive(Debug, Clone, Serialize)]
pub struct SysbenchRun {
    pub workload: String,
    pub threads: u32,
    /// `direct`, `shoal` (`--shoal-bin`), or a `--sysbench-also` Shoal's name.
    pub target: String,
    pub queries: u64,
    pub qps: f64,
    /// Per sysbench event (a query for oltp_point_select, a transaction for oltp_read_only).
    pub avg_ms: f64,
    pub p95_ms: f64,
    pub errors: u64,
    /// Shoal's CPU time per query (through Shoal only).
    pub shoal_cpu_us_per_query: Option<f64>,
}

/// Another Shoal for the sysbench part (`--sysbench-also NAME=BIN[,ARG...]`): e.g. the binary
/// before a change, measured in the same run as the one after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub name: String,
    pub bin: PathBuf,
    /// Arguments after the quick-mode ones.
    pub args: Vec<String>,
}

impl Variant {
    pub fn parse(text: &str) -> Result<Variant, String> {
        let (name, rest) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?}: expected NAME=BIN[,ARG...]"))?;
        let mut parts = rest.split(',');
        let bin = parts.next().unwrap_or_default();
        if name.is_empty() || bin.is_empty() || matches!(name, "direct" | "shoal") {
            return Err(format!(
                "{text:?}: expected NAME=BIN[,ARG...], NAME neither `direct` nor `shoal`"
            ));
        }
        Ok(Variant {
            name: name.to_string(),
            bin: PathBuf::from(bin),
            args: parts.map(str::to_string).collect(),
        })
    }
}

/// Prepares the tables, starts Shoal in quick mode (`--pool-max`, a long acquire timeout so that
/// threads queue for a connection rather than fail) and runs every workload and thread count
/// direct, then through each Shoal (`--shoal-bin`, then every `--sysbench-also`).
pub fn run(
    args: &ClientsArgs,
    cluster: &Cluster,
    bin: &Path,
    work: &Path,
    progress: &Progress,
) -> Result<Vec<SysbenchRun>, BenchError> {
    let primary = cluster.primary(0);
    let direct = SysbenchTarget {
        host: primary.host.clone(),
        port: primary.port,
        user: cluster.user().to_string(),
        password: cluster.password().to_string(),
        db: DB.into(),
        ssl: None,
    };
    progress.stage(format!(
        "sysbench: prepare ({} tables x {} rows)",
        args.sysbench_tables, args.sysbench_table_size
    ));
    sysbench::prepare(&direct, args.sysbench_tables, args.sysbench_table_size)?;
    let url = format!(
        "mysql://{}:{}@{}/{DB}",
        direct.user,
        direct.password,
        primary.addr()
    );
    let extra = [
        "--pool-max".to_string(),
        args.sysbench_pool.to_string(),
        "--acquire-timeout-ms".to_string(),
        "120000".to_string(),
        "--max-connections".to_string(),
        (args.sysbench_threads.iter().copied().max().unwrap_or(0) as usize + 64).to_string(),
    ];
    // `--shoal-bin` first, then the others, each its own process on its own port.
    let mut shoals = vec![(
        "shoal".to_string(),
        targets::start_shoal(work, bin, &url, &extra, false)?,
    )];
    for v in &args.sysbench_also {
        let dir = work.join(&v.name);
        std::fs::create_dir_all(&dir)
            .map_err(BenchError::io(format!("create {}", dir.display())))?;
        let mut with = extra.to_vec();
        with.extend(v.args.iter().cloned());
        shoals.push((
            v.name.clone(),
            targets::start_shoal(&dir, &v.bin, &url, &with, false)?,
        ));
    }
    let mut runs = Vec::new();
    for workload in &args.sysbench_workloads {
        for &threads in &args.sysbench_threads {
            let spec = RunSpec {
                workload,
                threads,
                seconds: args.sysbench_duration.unwrap_or(args.duration),
                tables: args.sysbench_tables,
                table_size: args.sysbench_table_size,
                ps_mode: "disable",
            };
            for k in 0..=shoals.len() {
                let (name, target, pid) = match k {
                    0 => ("direct".to_string(), direct.clone(), None),
                    _ => {
                        let (name, shoal) = &shoals[k - 1];
                        let through = SysbenchTarget {
                            host: "127.0.0.1".into(),
                            port: shoal.port,
                            ..direct.clone()
                        };
                        (name.clone(), through, Some(shoal.pid()))
                    }
                };
                progress.stage(format!("sysbench: {workload}, {threads} threads, {name}"));
                let cpu0 = match pid {
                    Some(pid) => targets::cpu_seconds(pid)?,
                    None => 0.0,
                };
                let run = sysbench::run(&target, &spec, None, &[])?;
                let cpu = match pid {
                    Some(pid) => Some(targets::cpu_seconds(pid)? - cpu0),
                    None => None,
                };
                for (_, shoal) in shoals.iter_mut() {
                    shoal.check_alive()?;
                }
                let queries = run.stats.queries;
                progress.println(format!(
                    "sysbench {workload} {threads} threads {name}: {:.0} qps, avg {:.2} ms, \
                     p95 {:.2} ms, errors {}",
                    run.stats.qps, run.stats.avg_ms, run.stats.p95_ms, run.stats.errors
                ));
                runs.push(SysbenchRun {
                    workload: workload.clone(),
                    threads,
                    target: name,
                    queries,
                    qps: run.stats.qps,
                    avg_ms: run.stats.avg_ms,
                    p95_ms: run.stats.p95_ms,
                    errors: run.stats.errors,
                    shoal_cpu_us_per_query: cpu.map(|cpu| cpu * 1e6 / queries.max(1) as f64),
                });
                progress.inc(1);
            }
        }
    }
    Ok(runs)
}
