//! `shoal-bench replicas`: what read/write splitting buys and what the health monitor costs,
//! measured in one run on this machine (issue 9's "Speed" criteria).
//!
//! Split phase: one datahost, a primary and 2 replicas (the launcher's real replication), the
//! sysbench tables prepared on the primary and replicated. Two Shoals serve it at once, one with
//! `balance: round_robin`, one with `balance: primary_only`; sysbench `oltp_read_only` runs
//! through them in turn (round_robin, primary_only, round_robin, ...) with `--skip-trx=on`, since
//! reads inside a transaction stay on the primary by design. Each run records QPS, latency, the
//! CPU of Shoal, of every mariadbd and of sysbench, and the SELECTs each server ran
//! (`Com_select`), which shows where the reads went.
//!
//! Monitor phase: 16 servers (4 datahosts of a primary and 3 replicas by default) behind one
//! Shoal with a 1 s heartbeat and no client at all; Shoal's CPU time over the wall time is the
//! monitor's cost, as a share of one core. The checks the servers counted prove it ran.

mod report;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use clap::Args;
use mysql_async::prelude::Queryable;
use serde_json::json;

use crate::Verdict;
use crate::cluster::status::StatusConns;
use crate::cluster::{Cluster, ClusterSpec, Role};
use crate::error::BenchError;
use crate::interrupt;
use crate::load::Endpoint;
use crate::overhead::sysbench::{self, SysbenchTarget};
use crate::overhead::targets;
use crate::progress::Progress;
use crate::results::{ResultsDir, utc_timestamp};
use crate::shoal_config::{Layout, RunningShoal};
pub use report::{MonitorResult, Sample};

#[derive(Debug, Clone, Args)]
pub struct ReplicasArgs {
    /// Seconds per sysbench run.
    #[arg(long, default_value_t = 30)]
    pub duration: u32,
    /// Rounds; each runs round_robin then primary_only. Medians are reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// sysbench thread counts.
    #[arg(long, value_delimiter = ',', default_value = "16")]
    pub threads: Vec<u32>,
    /// Replicas of the datahost in the split phase.
    #[arg(long, default_value_t = 2)]
    pub replicas: usize,
    /// sysbench tables.
    #[arg(long, default_value_t = 4)]
    pub tables: u32,
    /// Rows per sysbench table.
    #[arg(long, default_value_t = 100_000)]
    pub table_size: u32,
    /// Seconds the idle Shoal's CPU is measured in the monitor phase.
    #[arg(long, default_value_t = 60)]
    pub monitor_seconds: u32,
    /// Datahosts of the monitor phase.
    #[arg(long, default_value_t = 4)]
    pub monitor_datahosts: usize,
    /// Replicas per datahost in the monitor phase (default 4 x (1 + 3) = 16 servers).
    #[arg(long, default_value_t = 3)]
    pub monitor_replicas: usize,
    /// Health check interval in milliseconds (both phases).
    #[arg(long, default_value_t = 1000)]
    pub heartbeat_ms: u64,
    /// Cap every MariaDB server of the split phase at this many CPUs (cgroups; needs root), so
    /// that servers sharing this machine's cores behave like servers with CPUs of their own.
    /// Without it, on a 2-core machine replicas add processes, not capacity.
    #[arg(long)]
    pub server_cpus: Option<f64>,
    /// Only the monitor phase.
    #[arg(long, conflicts_with = "skip_monitor")]
    pub monitor_only: bool,
    /// Only the split phase.
    #[arg(long)]
    pub skip_monitor: bool,
    /// A short smoke run: 5 s per run, 1 round, 10k rows per table, 10 s of monitor.
    #[arg(long)]
    pub quick: bool,
    /// The shoal binary to measure (default: `target/release/shoal`, built first).
    #[arg(long)]
    pub shoal_bin: Option<PathBuf>,
    /// Results go to `<out>/replicas-<UTC timestamp>/` (report.md, CSV, JSON).
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
}

/// The two configurations compared, in the order each round runs them.
pub const MODES: [&str; 2] = ["round_robin", "primary_only"];

/// What the split phase measured.
pub struct Split {
    /// `p0`, `p0r0`, ... with their role, in `Cluster::instances` order.
    pub servers: Vec<(String, String)>,
    pub samples: Vec<Sample>,
}

pub async fn run(mut args: ReplicasArgs) -> Result<Verdict, BenchError> {
    if args.quick {
        args.duration = args.duration.min(5);
        args.rounds = 1;
        args.table_size = args.table_size.min(10_000);
        args.monitor_seconds = args.monitor_seconds.min(10);
    }
    if args.threads.is_empty() || args.rounds == 0 || args.duration == 0 {
        return Err(BenchError::Tool(
            "--threads, --rounds and --duration must not be empty or 0".into(),
        ));
    }
    if args.monitor_datahosts * (1 + args.monitor_replicas) == 0 {
        return Err(BenchError::Tool("the monitor phase needs servers".into()));
    }
    let bin = targets::shoal_release_bin_async(args.shoal_bin.clone()).await?;
    let work_dir = std::env::temp_dir().join(format!("shoal-replicas-{}", std::process::id()));
    std::fs::create_dir_all(&work_dir)
        .map_err(BenchError::io(format!("create {}", work_dir.display())))?;
    let outcome = phases(&args, &bin, &work_dir).await;
    let _ = std::fs::remove_dir_all(&work_dir);
    let (split, monitor) = match outcome {
        Err(_) if interrupt::interrupted() => return Err(BenchError::Interrupted),
        other => other?,
    };
    let md = report::markdown(&args, split.as_ref(), monitor.as_ref());
    println!("{md}");
    let results = ResultsDir::create(&args.out, "replicas")?;
    write_results(&results, &args, &md, split.as_ref(), monitor.as_ref())?;
    eprintln!("replicas: results in {}", results.path().display());
    // The goals are in the report ("met"); timings never decide the exit status.
    Ok(Verdict::Pass)
}

async fn phases(
    args: &ReplicasArgs,
    bin: &Path,
    work_dir: &Path,
) -> Result<(Option<Split>, Option<MonitorResult>), BenchError> {
    let split = if args.monitor_only {
        None
    } else {
        Some(split_phase(args, bin, work_dir).await?)
    };
    let monitor = if args.skip_monitor {
        None
    } else {
        Some(monitor_phase(args, bin, work_dir).await?)
    };
    Ok((split, monitor))
}

/// Shoal on `layout` with extra datahost keys, listening on a free port.
fn start_shoal(
    work_dir: &Path,
    bin: &Path,
    layout: &Layout,
    name: &str,
    extra: &[&str],
) -> Result<RunningShoal, BenchError> {
    // A read_only user: Shoal then routes every statement whatever the balance mode. Without
    // one, `primary_only` over one unsharded datanode is relayed without the router (and
    // without health checks), so the two configurations would differ in more than the mode.
    let reader = format!(
        "users:\n  - {{ name: bench_reader, password: bench_reader, schemas: [{}], \
         read_only: true }}\n",
        layout.schema
    );
    RunningShoal::start_with(work_dir, bin, layout, name, |listen| {
        layout
            .yaml_with(listen, extra)
            .replacen("users:\n", &reader, 1)
    })
}

/// Waits until `SHOW SHOAL BACKENDS` lists `servers` servers, every one `up` (in the read set)
/// and checked at least once.
async fn wait_all_up(endpoint: &Endpoint, servers: usize) -> Result<(), BenchError> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut conn = endpoint.connect().await?;
    loop {
        let rows: Vec<mysql_async::Row> = conn
            .query("SHOW SHOAL BACKENDS")
            .await
            .map_err(BenchError::sql(endpoint.label(), "SHOW SHOAL BACKENDS"))?;
        let ready = rows
            .iter()
            .filter(|r| {
                r.get::<String, _>("state").as_deref() == Some("up")
                    && r.get::<Option<String>, _>("last_check").flatten().is_some()
            })
            .count();
        if rows.len() == servers && ready == servers {
            break;
        }
        if Instant::now() > deadline {
            return Err(BenchError::Tool(format!(
                "{}: {ready} of {servers} servers up after 60 s",
                endpoint.label()
            )));
        }
        interrupt::check()?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    conn.disconnect().await.ok();
    Ok(())
}

/// `Com_select` of every instance.
async fn selects(conns: &mut StatusConns) -> Result<Vec<u64>, BenchError> {
    Ok(conns
        .per_server(&["Com_select"])
        .await?
        .iter()
        .map(|c| c.get("Com_select").copied().unwrap_or(0))
        .collect())
}

fn cpu_all(pids: &[u32]) -> Result<Vec<f64>, BenchError> {
    pids.iter().map(|&p| targets::cpu_seconds(p)).collect()
}

/// CPU seconds of this process's waited-for children so far (the sysbench runs).
fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the struct we pass; RUSAGE_CHILDREN is a valid target.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

async fn split_phase(
    args: &ReplicasArgs,
    bin: &Path,
    work_dir: &Path,
) -> Result<Split, BenchError> {
    eprintln!(
        "replicas: starting a primary with {} replicas",
        args.replicas
    );
    let cluster = Cluster::start(ClusterSpec {
        primaries: 1,
        replicas_per_primary: args.replicas,
        databases: vec!["sbtest_1".into()],
        ..ClusterSpec::default()
    })
    .await?;
    let primary = cluster.primary(0);
    let direct = SysbenchTarget {
        host: primary.host.clone(),
        port: primary.port,
        user: cluster.user().to_string(),
        password: cluster.password().to_string(),
        db: "sbtest_1".into(),
        ssl: None,
    };
    eprintln!(
        "replicas: sysbench prepare ({} tables x {} rows) on the primary",
        args.tables, args.table_size
    );
    {
        let (direct, tables, size) = (direct.clone(), args.tables, args.table_size);
        tokio::task::spawn_blocking(move || sysbench::prepare(&direct, tables, size))
            .await
            .map_err(|e| BenchError::Tool(format!("prepare task: {e}")))??;
    }
    cluster.sync_replicas().await?;

    let mut layout = Layout::from_cluster(&cluster, 1, "sbtest");
    layout.schema = "sbtest".into();
    let heartbeat = format!("health: {{ heartbeat: {}ms }}", args.heartbeat_ms);
    let mut shoals = Vec::new();
    for mode in MODES {
        let balance = format!("balance: {mode}");
        let shoal = start_shoal(work_dir, bin, &layout, mode, &[&balance, &heartbeat])?;
        wait_all_up(&shoal.endpoint, 1 + args.replicas).await?;
        shoals.push((mode, shoal));
    }
    let servers: Vec<(String, String)> = cluster
        .instances()
        .iter()
        .map(|i| {
            let role = match i.role {
                Role::Primary => "primary",
                Role::Replica { .. } => "replica",
            };
            (i.name().to_string(), role.to_string())
        })
        .collect();
    let pids: Vec<u32> = cluster.instances().iter().map(|i| i.pid).collect();
    let _limit = args
        .server_cpus
        .map(|cores| crate::cpu_limit::CpuLimit::apply(&pids, cores))
        .transpose()?;
    let mut conns = StatusConns::all(&cluster).await?;

    let total = args.rounds as usize * args.threads.len() * MODES.len();
    eprintln!(
        "replicas: {total} runs of {} s (about {} min)",
        args.duration,
        (total as u64 * (u64::from(args.duration) + 2)).div_ceil(60)
    );
    let progress = Progress::new("replicas", total as u64);
    let mut samples = Vec::new();
    for round in 0..args.rounds {
        for &threads in &args.threads {
            for (mode, shoal) in shoals.iter_mut() {
                let endpoint = &shoal.endpoint;
                interrupt::check()?;
                progress.stage(format!("round {} {threads} thr {mode}", round + 1));
                let target = SysbenchTarget {
                    host: endpoint.host.clone(),
                    port: endpoint.port,
                    db: "sbtest".into(),
                    ..direct.clone()
                };
                let reads_before = selects(&mut conns).await?;
                let shoal_before = targets::cpu_seconds(shoal.process.pid())?;
                let backends_before = cpu_all(&pids)?;
                let children_before = children_cpu_seconds();
                let started = Instant::now();
                let (tables, size, secs) = (args.tables, args.table_size, args.duration);
                let stats = tokio::task::spawn_blocking(move || {
                    let spec = sysbench::RunSpec {
                        workload: "oltp_read_only",
                        threads,
                        seconds: secs,
                        tables,
                        table_size: size,
                        ps_mode: "auto",
                    };
                    sysbench::run(&target, &spec, None, &["--skip-trx=on"]).map(|r| r.stats)
                })
                .await
                .map_err(|e| BenchError::Tool(format!("sysbench task: {e}")))?
                .map_err(|e| BenchError::Tool(format!("{}: {e}", shoal.endpoint.label())))?;
                let wall_s = started.elapsed().as_secs_f64();
                let sysbench_cpu_s = children_cpu_seconds() - children_before;
                let shoal_cpu_s = targets::cpu_seconds(shoal.process.pid())? - shoal_before;
                let backend_cpu_s: Vec<f64> = cpu_all(&pids)?
                    .iter()
                    .zip(&backends_before)
                    .map(|(a, b)| a - b)
                    .collect();
                let reads: Vec<u64> = selects(&mut conns)
                    .await?
                    .iter()
                    .zip(&reads_before)
                    .map(|(a, b)| a.saturating_sub(*b))
                    .collect();
                shoal.process.check_alive()?;
                progress.inc(1);
                progress.println(format!(
                    "round {} {threads} thr {mode}: {:.0} qps, avg {:.3} ms, Shoal {:.1} us/query, \
                     reads per server {reads:?}",
                    round + 1,
                    stats.qps,
                    stats.avg_ms,
                    shoal_cpu_s * 1e6 / stats.queries.max(1) as f64,
                ));
                samples.push(Sample {
                    mode: mode.to_string(),
                    round: round + 1,
                    threads,
                    stats,
                    wall_s,
                    shoal_cpu_s,
                    backend_cpu_s,
                    sysbench_cpu_s,
                    reads,
                });
            }
        }
    }
    progress.finish();
    conns.close().await;
    drop(shoals);
    drop(cluster);
    Ok(Split { servers, samples })
}

async fn monitor_phase(
    args: &ReplicasArgs,
    bin: &Path,
    work_dir: &Path,
) -> Result<MonitorResult, BenchError> {
    let servers = args.monitor_datahosts * (1 + args.monitor_replicas);
    eprintln!(
        "replicas: monitor phase: starting {} primaries x {} replicas ({servers} servers)",
        args.monitor_datahosts, args.monitor_replicas
    );
    let cluster = Cluster::start(ClusterSpec {
        primaries: args.monitor_datahosts,
        replicas_per_primary: args.monitor_replicas,
        databases: vec!["mon_1".into()],
        ..ClusterSpec::default()
    })
    .await?;
    let mut layout = Layout::from_cluster(&cluster, 1, "mon");
    layout.schema = "mon".into();
    let heartbeat = format!("health: {{ heartbeat: {}ms }}", args.heartbeat_ms);
    let mut shoal = start_shoal(
        work_dir,
        bin,
        &layout,
        "monitor",
        &["balance: round_robin", &heartbeat],
    )?;
    wait_all_up(&shoal.endpoint, servers).await?;
    let mut conns = StatusConns::all(&cluster).await?;
    // The monitor's connections are open and the start-up is over: from here Shoal only checks.
    tokio::time::sleep(Duration::from_secs(2)).await;
    eprintln!(
        "replicas: measuring the idle Shoal's CPU for {} s",
        args.monitor_seconds
    );
    let checks_before = selects(&mut conns).await?;
    let cpu_before = targets::cpu_seconds(shoal.process.pid())?;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(u64::from(args.monitor_seconds));
    while Instant::now() < deadline {
        interrupt::check()?;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cpu_s = targets::cpu_seconds(shoal.process.pid())? - cpu_before;
    let wall_s = started.elapsed().as_secs_f64();
    let checks: u64 = selects(&mut conns)
        .await?
        .iter()
        .zip(&checks_before)
        .map(|(a, b)| a.saturating_sub(*b))
        .sum();
    shoal.process.check_alive()?;
    conns.close().await;
    drop(shoal);
    drop(cluster);
    let result = MonitorResult {
        servers,
        heartbeat_ms: args.heartbeat_ms,
        wall_s,
        cpu_s,
        checks,
    };
    eprintln!(
        "replicas: monitor: {:.3} CPU s in {:.1} s = {:.3}% of one core, {} checks",
        cpu_s,
        wall_s,
        result.core_percent(),
        checks
    );
    Ok(result)
}

fn write_results(
    dir: &ResultsDir,
    args: &ReplicasArgs,
    md: &str,
    split: Option<&Split>,
    monitor: Option<&MonitorResult>,
) -> Result<(), BenchError> {
    dir.write("report.md", md)?;
    let mut json_split = serde_json::Value::Null;
    if let Some(split) = split {
        let names: Vec<&str> = split.servers.iter().map(|(n, _)| n.as_str()).collect();
        let mut header = vec![
            "round",
            "threads",
            "balance",
            "queries",
            "qps",
            "avg_ms",
            "p95_ms",
            "errors",
            "wall_s",
            "shoal_cpu_s",
            "sysbench_cpu_s",
        ];
        let cpu_cols: Vec<String> = names.iter().map(|n| format!("{n}_cpu_s")).collect();
        let read_cols: Vec<String> = names.iter().map(|n| format!("{n}_selects")).collect();
        header.extend(cpu_cols.iter().map(String::as_str));
        header.extend(read_cols.iter().map(String::as_str));
        let rows: Vec<Vec<String>> = split
            .samples
            .iter()
            .map(|s| {
                let mut row = vec![
                    s.round.to_string(),
                    s.threads.to_string(),
                    s.mode.clone(),
                    s.stats.queries.to_string(),
                    format!("{:.2}", s.stats.qps),
                    format!("{:.3}", s.stats.avg_ms),
                    format!("{:.3}", s.stats.p95_ms),
                    s.stats.errors.to_string(),
                    format!("{:.3}", s.wall_s),
                    format!("{:.3}", s.shoal_cpu_s),
                    format!("{:.3}", s.sysbench_cpu_s),
                ];
                row.extend(s.backend_cpu_s.iter().map(|c| format!("{c:.3}")));
                row.extend(s.reads.iter().map(u64::to_string));
                row
            })
            .collect();
        dir.write_csv("samples.csv", &header, &rows)?;
        let cells = report::cells(&split.samples);
        dir.write_csv(
            "medians.csv",
            &report::MEDIAN_COLUMNS,
            &report::median_rows(&cells),
        )?;
        let reads = report::reads_by_mode(split);
        dir.write_csv(
            "reads.csv",
            &["balance", "server", "role", "selects", "share_pct"],
            &reads
                .iter()
                .flat_map(|(mode, per)| {
                    per.iter()
                        .zip(&split.servers)
                        .map(move |(n, (name, role))| {
                            let total: u64 = per.iter().sum();
                            vec![
                                mode.clone(),
                                name.clone(),
                                role.clone(),
                                n.to_string(),
                                format!("{:.1}", *n as f64 * 100.0 / total.max(1) as f64),
                            ]
                        })
                })
                .collect::<Vec<_>>(),
        )?;
        json_split = json!({
            "servers": split.servers.iter().map(|(n, r)| json!({"name": n, "role": r})).collect::<Vec<_>>(),
            "medians": cells.iter().map(|((t, m), c)| json!({
                "threads": t, "balance": m, "runs": c.runs, "qps": c.qps, "avg_ms": c.avg_ms,
                "p95_ms": c.p95_ms, "shoal_cpu_us_per_query": c.shoal_cpu_us_per_query,
                "mariadbd_cpu_us_per_query": c.backend_cpu_us_per_query,
                "machine_busy_pct": c.busy_pct, "errors": c.errors,
            })).collect::<Vec<_>>(),
            "reads": reads.iter().map(|(m, per)| json!({"balance": m, "selects": per})).collect::<Vec<_>>(),
        });
    }
    let json_monitor = monitor.map_or(serde_json::Value::Null, |m| {
        json!({
            "servers": m.servers, "heartbeat_ms": m.heartbeat_ms, "wall_s": m.wall_s,
            "cpu_s": m.cpu_s, "core_percent": m.core_percent(), "checks": m.checks,
            "goal_met": m.core_percent() < 1.0,
        })
    });
    dir.write_json(
        "results.json",
        &json!({
            "experiment": "replicas",
            "at": utc_timestamp(SystemTime::now(), true),
            "machine": crate::results::machine_line(),
            "rounds": args.rounds,
            "duration_s": args.duration,
            "threads": args.threads,
            "tables": args.tables,
            "table_size": args.table_size,
            "split": json_split,
            "monitor": json_monitor,
        }),
    )?;
    Ok(())
}
