//! The experiment's sysbench part: many threads (256, 512) against one MariaDB database
//! directly and through Shoal in quick mode with a pool smaller than the threads (64), in turn,
//! with `overhead`'s sysbench driver.

use std::path::Path;

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
    /// `direct` or `shoal`.
    pub target: &'static str,
    pub queries: u64,
    pub qps: f64,
    /// Per sysbench event (a query for oltp_point_select, a transaction for oltp_read_only).
    pub avg_ms: f64,
    pub p95_ms: f64,
    pub errors: u64,
    /// Shoal's CPU time per query (through Shoal only).
    pub shoal_cpu_us_per_query: Option<f64>,
}

/// Prepares the tables, starts Shoal in quick mode (`--pool-max`, a long acquire timeout so that
/// threads queue for a connection rather than fail) and runs every workload and thread count
/// direct, then through Shoal.
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
    let mut shoal = targets::start_shoal(work, bin, &url, &extra, false)?;
    let through = SysbenchTarget {
        host: "127.0.0.1".into(),
        port: shoal.port,
        ..direct.clone()
    };
    let mut runs = Vec::new();
    for workload in &args.sysbench_workloads {
        for &threads in &args.sysbench_threads {
            for (name, target) in [("direct", &direct), ("shoal", &through)] {
                progress.stage(format!("sysbench: {workload}, {threads} threads, {name}"));
                let spec = RunSpec {
                    workload,
                    threads,
                    seconds: args.sysbench_duration.unwrap_or(args.duration),
                    tables: args.sysbench_tables,
                    table_size: args.sysbench_table_size,
                    ps_mode: "disable",
                };
                let cpu0 = targets::cpu_seconds(shoal.pid())?;
                let run = sysbench::run(target, &spec, None, &[])?;
                let cpu = targets::cpu_seconds(shoal.pid())? - cpu0;
                shoal.check_alive()?;
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
                    shoal_cpu_us_per_query: (name == "shoal")
                        .then(|| cpu * 1e6 / queries.max(1) as f64),
                });
                progress.inc(1);
            }
        }
    }
    Ok(runs)
}
