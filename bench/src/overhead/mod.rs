//! `shoal-bench overhead`: what a proxy hop costs, measured in one interleaved run on this
//! machine. sysbench `oltp_point_select` and `oltp_read_write` at 1, 8 and 32 threads against
//! the backend directly, through HAProxy in TCP mode (the floor cost of any hop) and through
//! Shoal in quick mode; rounds interleave the three targets so that drift in the machine's load
//! hits them alike, and medians are reported. Alongside QPS and latency it reports the CPU time
//! per query of the proxy process, the figure least disturbed by noisy neighbours.

mod report;
mod sysbench;
mod targets;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;

use crate::cluster::{Cluster, ClusterSpec, LaunchError};
use report::Sample;
use sysbench::SysbenchTarget;
use targets::ProxyProcess;

#[derive(Debug, thiserror::Error)]
pub enum OverheadError {
    #[error("backend: {0}")]
    Launch(#[from] LaunchError),
    #[error("{0}")]
    Tool(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl OverheadError {
    fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> OverheadError {
        let what = what.into();
        move |source| OverheadError::Io { what, source }
    }
}

#[derive(Debug, Clone, Args)]
pub struct OverheadArgs {
    /// Seconds per sysbench run.
    #[arg(long, default_value_t = 20)]
    pub duration: u32,
    /// Interleaved rounds (direct, haproxy, shoal each once per round); medians are reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// sysbench thread counts.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    pub threads: Vec<u32>,
    /// sysbench workloads.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "oltp_point_select,oltp_read_write"
    )]
    pub workloads: Vec<String>,
    /// Targets to measure, in the order of the first round.
    #[arg(long, value_delimiter = ',', default_value = "direct,haproxy,shoal")]
    pub targets: Vec<String>,
    /// sysbench tables.
    #[arg(long, default_value_t = 4)]
    pub tables: u32,
    /// Rows per sysbench table.
    #[arg(long, default_value_t = 100_000)]
    pub table_size: u32,
    /// A short smoke run: 5 s per run, 1 round, 10k rows per table.
    #[arg(long)]
    pub quick: bool,
    /// HAProxy worker threads. Default 2: one per core on the 2-core reference machine, the same
    /// parallelism Shoal's tokio runtime gets by default, so neither hop is starved at 32 threads.
    #[arg(long, default_value_t = 2)]
    pub haproxy_threads: u32,
    /// The shoal binary to measure (default: `target/release/shoal`, built first).
    #[arg(long)]
    pub shoal_bin: Option<PathBuf>,
    /// Extra arguments for shoal's quick mode (repeat the flag for each).
    #[arg(long = "shoal-arg", allow_hyphen_values = true)]
    pub shoal_args: Vec<String>,
    /// Directory for the result file `overhead-<UTC timestamp>.md`.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
}

/// Runs the benchmark; prints and writes the report. Returns whether every target ratio was met.
pub async fn run(mut args: OverheadArgs) -> Result<bool, OverheadError> {
    if args.quick {
        args.duration = args.duration.min(5);
        args.rounds = 1;
        args.table_size = args.table_size.min(10_000);
    }
    for t in &args.targets {
        if !["direct", "haproxy", "shoal"].contains(&t.as_str()) {
            return Err(OverheadError::Tool(format!(
                "unknown target {t:?} (direct, haproxy, shoal)"
            )));
        }
    }
    let shoal_bin = if args.targets.iter().any(|t| t == "shoal") {
        Some(
            tokio::task::spawn_blocking({
                let explicit = args.shoal_bin.clone();
                move || targets::shoal_release_bin(explicit.as_deref())
            })
            .await
            .expect("build task")?,
        )
    } else {
        None
    };

    eprintln!("overhead: starting a MariaDB primary");
    let cluster = Cluster::start(ClusterSpec {
        databases: vec!["sbtest".into()],
        ..ClusterSpec::default()
    })
    .await?;
    let outcome = tokio::task::spawn_blocking(move || {
        let result = measure(&args, &cluster, shoal_bin.as_deref());
        drop(cluster);
        result
    })
    .await
    .expect("benchmark task")?;
    Ok(outcome)
}

fn measure(
    args: &OverheadArgs,
    cluster: &Cluster,
    shoal_bin: Option<&Path>,
) -> Result<bool, OverheadError> {
    let primary = cluster.primary(0);
    let backend_pid = primary.pid;
    let direct = SysbenchTarget {
        host: primary.host.clone(),
        port: primary.port,
        user: cluster.user().to_string(),
        password: cluster.password().to_string(),
        db: "sbtest".into(),
    };
    eprintln!(
        "overhead: sysbench prepare ({} tables x {} rows)",
        args.tables, args.table_size
    );
    sysbench::prepare(&direct, args.tables, args.table_size)?;

    let work_dir = std::env::temp_dir().join(format!("shoal-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&work_dir)
        .map_err(OverheadError::io(format!("create {}", work_dir.display())))?;
    let mut proxies: Vec<(String, ProxyProcess)> = Vec::new();
    if args.targets.iter().any(|t| t == "haproxy") {
        let hp = targets::start_haproxy(&work_dir, &primary.addr(), args.haproxy_threads)?;
        proxies.push(("haproxy".into(), hp));
    }
    if let Some(bin) = shoal_bin {
        let url = format!(
            "mysql://{}:{}@{}/sbtest",
            direct.user,
            direct.password,
            primary.addr()
        );
        let shoal = targets::start_shoal(&work_dir, bin, &url, &args.shoal_args)?;
        proxies.push(("shoal".into(), shoal));
    }

    let total =
        args.rounds as usize * args.workloads.len() * args.threads.len() * args.targets.len();
    eprintln!(
        "overhead: {total} runs of {} s (about {} min)",
        args.duration,
        (total as u64 * (args.duration as u64 + 2)).div_ceil(60)
    );
    let mut samples = Vec::new();
    let mut done = 0;
    for round in 0..args.rounds as usize {
        for workload in &args.workloads {
            for &threads in &args.threads {
                // Rotate the order each round so that no target always runs first (cold) or last.
                let n = args.targets.len();
                for k in 0..n {
                    let target = &args.targets[(k + round) % n];
                    let proxy = proxies
                        .iter_mut()
                        .find(|(name, _)| name == target)
                        .map(|(_, p)| p);
                    let endpoint = match &proxy {
                        None => direct.clone(),
                        Some(p) => SysbenchTarget {
                            host: "127.0.0.1".into(),
                            port: p.port,
                            ..direct.clone()
                        },
                    };
                    let proxy_pid = proxy.as_ref().map(|p| p.pid());
                    let proxy_before = proxy_pid.map(targets::cpu_seconds).transpose()?;
                    let backend_before = targets::cpu_seconds(backend_pid)?;
                    let stats = sysbench::run(
                        &endpoint,
                        workload,
                        threads,
                        args.duration,
                        args.tables,
                        args.table_size,
                    )?;
                    let backend_cpu_s = targets::cpu_seconds(backend_pid)? - backend_before;
                    let proxy_cpu_s = match (proxy_pid, proxy_before) {
                        (Some(pid), Some(before)) => Some(targets::cpu_seconds(pid)? - before),
                        _ => None,
                    };
                    if let Some(p) = proxy {
                        p.check_alive()?;
                    }
                    done += 1;
                    eprintln!(
                        "overhead: [{done}/{total}] round {} {workload} {threads} thr {target}: {:.0} qps, avg {:.3} ms, errors {}",
                        round + 1,
                        stats.qps,
                        stats.avg_ms,
                        stats.errors
                    );
                    samples.push(Sample {
                        workload: workload.clone(),
                        threads,
                        target: target.clone(),
                        stats,
                        proxy_cpu_s,
                        backend_cpu_s,
                    });
                }
            }
        }
    }
    drop(proxies);
    let _ = std::fs::remove_dir_all(&work_dir);

    let cells = report::cells(&samples);
    let ratios = report::ratios(&cells, &args.workloads, &args.threads);
    let header = format!(
        "# Proxy overhead: direct vs HAProxy (TCP mode, nbthread {}) vs Shoal (quick mode)\n\n\
         {} ({} CPUs), {} round(s) x {} s per run, sysbench {} tables x {} rows, \
         --db-ps-mode=auto, medians over rounds.\n\
         Latency is per sysbench event: one query for oltp_point_select, one 18-query transaction \
         for oltp_read_write. CPU per query: utime+stime of the process from /proc over the run, \
         divided by the queries sysbench counted.\n",
        args.haproxy_threads,
        utc_timestamp(SystemTime::now(), true),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        args.rounds,
        args.duration,
        args.tables,
        args.table_size
    );
    let md = report::markdown(&header, &cells, &ratios, &args.targets);
    println!("{md}");
    std::fs::create_dir_all(&args.out)
        .map_err(OverheadError::io(format!("create {}", args.out.display())))?;
    let file = args.out.join(format!(
        "overhead-{}.md",
        utc_timestamp(SystemTime::now(), false)
    ));
    std::fs::write(&file, &md).map_err(OverheadError::io(format!("write {}", file.display())))?;
    eprintln!("overhead: results written to {}", file.display());
    Ok(ratios.iter().all(|r| r.met))
}

/// `2026-11-30T03:04:05Z` (readable) or `20261130T030405Z` (for file names), without a date crate.
fn utc_timestamp(now: SystemTime, readable: bool) -> String {
    let secs = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    if readable {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
    } else {
        format!("{y:04}{m:02}{d:02}T{hh:02}{mm:02}{ss:02}Z")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        let t = UNIX_EPOCH + Duration::from_secs(1_796_008_445); // 2026-11-30T03:14:05Z
        assert_eq!(utc_timestamp(t, true), "2026-11-30T03:14:05Z");
        assert_eq!(utc_timestamp(t, false), "20261130T031405Z");
        assert_eq!(utc_timestamp(UNIX_EPOCH, true), "1970-01-01T00:00:00Z");
    }
}
