//! `shoal-bench overhead`: what a proxy hop costs, measured in one interleaved run on this
//! machine. sysbench `oltp_point_select` and `oltp_read_write` at 1, 8 and 32 threads against
//! the backend directly, through HAProxy in TCP mode (the floor cost of any hop), through Shoal
//! in quick mode, optionally through Shoal with a sharded config (`shoal-config`: the sysbench
//! tables sharded by id over 4 datanodes) and through any other endpoint (`--target`); rounds
//! interleave the targets so that drift in the machine's load hits them alike, and medians are
//! reported. Alongside QPS and latency it reports the CPU time per query of the proxy process,
//! the figure least disturbed by noisy neighbours.

pub(crate) mod report;
pub(crate) mod sysbench;
pub(crate) mod targets;

use std::collections::BTreeMap;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use clap::Args;
use serde_json::json;

use crate::Verdict;
use crate::cluster::{Cluster, ClusterSpec};
use crate::interrupt;
use crate::progress::Progress;
use crate::results::{Column, Csv, LineChart, ResultsDir, Series, fixed, utc_timestamp};
use crate::shoal_config::{Layout, ShardedTable};
use report::Sample;
use sysbench::SysbenchTarget;
use targets::ProxyProcess;

pub use crate::error::BenchError as OverheadError;

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
    /// sysbench workloads: its own scripts, or ours: `shoal_scatter_count` (a prepared
    /// `SELECT COUNT(*)` of a whole table: a 4-way scatter on shoal-config) and
    /// `shoal_scatter_top10` (`WHERE k >= ? ORDER BY k, id LIMIT 10`: a scattered top-10 page).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "oltp_point_select,oltp_read_write"
    )]
    pub workloads: Vec<String>,
    /// Targets to measure, in the order of the first round: direct, haproxy, shoal (quick mode),
    /// shoal-config (Shoal with the sysbench tables sharded by id over 4 datanodes), shoal-tls
    /// (quick mode with TLS to clients, sysbench connecting with `--mysql-ssl=on`),
    /// shoal-metrics (quick mode with `--admin-listen`: metrics and query digests counted),
    /// shoal-1thread (quick mode with `--threads 1`), haproxy-1thread (`nbthread 1`).
    #[arg(long, value_delimiter = ',', default_value = "direct,haproxy,shoal")]
    pub targets: Vec<String>,
    /// Another endpoint to measure beside them, `NAME=HOST:PORT[:PID]` (repeatable): a proxy you
    /// started yourself in front of the backend (see --backend-port), reached with user and
    /// password `shoal`, database `sbtest`. With PID, its CPU per query is reported too.
    #[arg(long = "target")]
    pub extra_targets: Vec<String>,
    /// Start the MariaDB backend on this port (default: a free one), so that a proxy given with
    /// --target can be configured before the run.
    #[arg(long)]
    pub backend_port: Option<u16>,
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
    /// Extra arguments for the Shoal targets, quick mode and shoal-config (repeat the flag for
    /// each).
    #[arg(long = "shoal-arg", allow_hyphen_values = true)]
    pub shoal_args: Vec<String>,
    /// After the closed-loop rounds, run the same rounds again with every target offered the
    /// same load: sysbench `--rate` = FRACTION (in (0, 1]) x the lowest closed-loop median event
    /// rate of any target in each (workload, threads) cell. CPU per query depends on the QPS it
    /// is taken at; this compares the targets at one.
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    pub paced: Option<f64>,
    /// MariaDB instances the shoal-config target's 4 datanodes live on (1, 2 or 4). With 1 they
    /// share the instance of the other targets (databases sbtest_1..4 beside sbtest).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = parse_sharded_servers)]
    pub sharded_servers: usize,
    /// sysbench `--db-ps-mode`: `auto` runs its statements prepared (binary protocol),
    /// `disable` as text queries, which is what most applications and the peers' own
    /// comparisons send.
    #[arg(long, default_value = "auto", value_parser = ["auto", "disable"])]
    pub ps_mode: String,
    /// InnoDB buffer pool of the MariaDB instances: every table in memory (the sysbench tables,
    /// and shoal-config's copies beside them), so that what is measured is the proxy's hop and
    /// not the backend reading pages it evicted.
    #[arg(long, default_value = "1G")]
    pub buffer_pool: String,
    /// InnoDB redo log of the MariaDB instances: large enough that read_write's writes do not
    /// force a checkpoint's page flushing in the middle of a run (the launcher's own 32 MiB
    /// fills in seconds).
    #[arg(long, default_value = "1G")]
    pub redo_log: String,
    /// Results go to `<out>/overhead-<UTC timestamp>/` (report.md, CSV, JSON, SVG charts).
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
}

/// `--paced`: a share of the slowest target's rate; above 1 some target could not keep it.
fn parse_fraction(s: &str) -> Result<f64, String> {
    let f: f64 = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if f > 0.0 && f <= 1.0 {
        Ok(f)
    } else {
        Err(format!("{s} is not in (0, 1]"))
    }
}

/// `--sharded-servers`: the datanodes are spread evenly, as many on each instance.
fn parse_sharded_servers(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if n > 0 && SHARDED_DATANODES.is_multiple_of(n) {
        Ok(n)
    } else {
        Err(format!(
            "{n} does not divide the {SHARDED_DATANODES} datanodes (1, 2 or 4)"
        ))
    }
}

/// Datanodes (databases `sbtest_1..`) of the `shoal-config` target on each of `servers`
/// instances: they are spread evenly over the instances (`--sharded-servers` divides them).
fn datanodes_per_server(servers: usize) -> usize {
    SHARDED_DATANODES / servers
}

/// An endpoint given with `--target NAME=HOST:PORT[:PID]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalTarget {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub pid: Option<u32>,
}

impl ExternalTarget {
    pub fn parse(spec: &str) -> Result<ExternalTarget, OverheadError> {
        let bad = |why: &str| {
            OverheadError::Tool(format!(
                "--target {spec:?}: {why} (expected NAME=HOST:PORT[:PID])"
            ))
        };
        let (name, rest) = spec.split_once('=').ok_or_else(|| bad("no '='"))?;
        if name.is_empty() || BUILT_IN.contains(&name) {
            return Err(bad("the name is empty or a built-in target's"));
        }
        let parts: Vec<&str> = rest.split(':').collect();
        let (host, port, pid) = match parts.as_slice() {
            [h, p] => (*h, *p, None),
            [h, p, pid] => (*h, *p, Some(*pid)),
            _ => return Err(bad("not HOST:PORT or HOST:PORT:PID")),
        };
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        Ok(ExternalTarget {
            name: name.to_string(),
            host: host.to_string(),
            port: port.parse().map_err(|_| bad("bad port"))?,
            pid: pid
                .map(|p| p.parse().map_err(|_| bad("bad pid")))
                .transpose()?,
        })
    }

    /// Fails with an error naming the endpoint when nothing accepts connections there.
    fn check_reachable(&self) -> Result<(), OverheadError> {
        let unreachable = |detail: String| OverheadError::Unreachable {
            endpoint: format!("target {} at {}:{}", self.name, self.host, self.port),
            detail,
        };
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| unreachable(e.to_string()))?
            .next()
            .ok_or_else(|| unreachable("no address".into()))?;
        TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| unreachable(e.to_string()))?;
        if let Some(pid) = self.pid {
            targets::cpu_seconds(pid).map_err(|e| {
                OverheadError::Tool(format!("target {}: pid {pid}: {e}", self.name))
            })?;
        }
        Ok(())
    }
}

const BUILT_IN: [&str; 8] = [
    "direct",
    "haproxy",
    "shoal",
    "shoal-config",
    "shoal-tls",
    "shoal-metrics",
    "haproxy-1thread",
    "shoal-1thread",
];

/// Datanodes of the `shoal-config` target.
const SHARDED_DATANODES: usize = 4;

/// How the `shoal-config` target's datanodes are laid out, for the report's header.
fn sharded_layout(servers: usize) -> String {
    if servers == 1 {
        format!(
            "{SHARDED_DATANODES} datanodes on the one MariaDB instance the other targets use \
             (databases sbtest_1..{SHARDED_DATANODES} beside sbtest)"
        )
    } else {
        format!(
            "{SHARDED_DATANODES} datanodes on {servers} MariaDB instances ({} each)",
            datanodes_per_server(servers)
        )
    }
}

/// Runs the benchmark; prints and writes the report. Pass when every target ratio was met.
pub async fn run(mut args: OverheadArgs) -> Result<Verdict, OverheadError> {
    if args.quick {
        args.duration = args.duration.min(5);
        args.rounds = 1;
        args.table_size = args.table_size.min(10_000);
    }
    for t in &args.targets {
        if !BUILT_IN.contains(&t.as_str()) {
            return Err(OverheadError::Tool(format!(
                "unknown target {t:?} ({}; others with --target NAME=HOST:PORT[:PID])",
                BUILT_IN.join(", ")
            )));
        }
    }
    let externals = args
        .extra_targets
        .iter()
        .map(|s| ExternalTarget::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    for e in &externals {
        if args.targets.contains(&e.name) {
            return Err(OverheadError::Tool(format!(
                "target {} given twice",
                e.name
            )));
        }
        // Before anything starts: a wrong address should cost a second, not a prepare.
        e.check_reachable()?;
    }
    let shoal_bin = if args.targets.iter().any(|t| t.starts_with("shoal")) {
        Some(targets::shoal_release_bin_async(args.shoal_bin.clone()).await?)
    } else {
        None
    };

    let sharded = args.targets.iter().any(|t| t == "shoal-config");
    let primaries = if sharded { args.sharded_servers } else { 1 };
    eprintln!("overhead: starting {primaries} MariaDB primary instance(s)");
    let mut databases = vec!["sbtest".to_string()];
    if sharded {
        databases.extend(
            (1..=datanodes_per_server(args.sharded_servers)).map(|i| format!("sbtest_{i}")),
        );
    }
    let cluster = Cluster::start_with_options(
        ClusterSpec {
            primaries,
            databases,
            base_port: args.backend_port,
            ..ClusterSpec::default()
        },
        &server_options(&args),
    )
    .await?;
    let handle = tokio::runtime::Handle::current();
    let outcome = tokio::task::spawn_blocking(move || {
        let result = measure(&args, &externals, &cluster, shoal_bin.as_deref(), &handle);
        drop(cluster);
        result
    })
    .await
    .expect("benchmark task");
    match outcome {
        Err(_) if interrupt::interrupted() => Err(OverheadError::Interrupted),
        other => other,
    }
}

/// The MariaDB settings of `--buffer-pool` and `--redo-log`.
fn server_options(args: &OverheadArgs) -> Vec<String> {
    vec![
        format!("innodb-buffer-pool-size={}", args.buffer_pool),
        format!("innodb-log-file-size={}", args.redo_log),
    ]
}

/// What one target is: where sysbench connects and whose CPU is read.
struct Resolved {
    name: String,
    host: String,
    port: u16,
    pid: Option<u32>,
}

fn measure(
    args: &OverheadArgs,
    externals: &[ExternalTarget],
    cluster: &Cluster,
    shoal_bin: Option<&Path>,
    rt: &tokio::runtime::Handle,
) -> Result<Verdict, OverheadError> {
    let primary = cluster.primary(0);
    // Every instance's CPU: the others serve shoal-config only (idle for the other targets).
    let backend_pids: Vec<u32> = cluster.primaries().iter().map(|p| p.pid).collect();
    let direct = SysbenchTarget {
        host: primary.host.clone(),
        port: primary.port,
        user: cluster.user().to_string(),
        password: cluster.password().to_string(),
        db: "sbtest".into(),
        ssl: None,
    };
    eprintln!(
        "overhead: sysbench prepare ({} tables x {} rows) on {}",
        args.tables,
        args.table_size,
        primary.addr()
    );
    sysbench::prepare(&direct, args.tables, args.table_size)?;

    let work_dir = std::env::temp_dir().join(format!("shoal-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&work_dir)
        .map_err(OverheadError::io(format!("create {}", work_dir.display())))?;
    let mut proxies: Vec<(String, ProxyProcess)> = Vec::new();
    let mut not_run: Vec<(String, String)> = Vec::new();
    for (name, threads) in [("haproxy", args.haproxy_threads), ("haproxy-1thread", 1)] {
        if args.targets.iter().any(|t| t == name) {
            let hp = targets::start_haproxy(&work_dir, name, &primary.addr(), threads)?;
            proxies.push((name.into(), hp));
        }
    }
    if let Some(bin) = shoal_bin {
        let url = format!(
            "mysql://{}:{}@{}/sbtest",
            direct.user,
            direct.password,
            primary.addr()
        );
        for (name, tls) in [("shoal", false), ("shoal-tls", true)] {
            if args.targets.iter().any(|t| t == name) {
                let shoal = targets::start_shoal(&work_dir, bin, &url, &args.shoal_args, tls)?;
                proxies.push((name.into(), shoal));
            }
        }
        if args.targets.iter().any(|t| t == "shoal-1thread") {
            // Quick mode on one worker thread: no worker wakes another (see docs/benchmarks.md).
            let mut extra = args.shoal_args.clone();
            extra.extend(["--threads".to_string(), "1".to_string()]);
            let shoal = targets::start_shoal(&work_dir, bin, &url, &extra, false)?;
            proxies.push(("shoal-1thread".into(), shoal));
        }
        if args.targets.iter().any(|t| t == "shoal-metrics") {
            // Quick mode with the admin listener: metrics and query digests counted (the
            // cost of observation, against the `shoal` target).
            let port = targets::free_port()?;
            let mut extra = args.shoal_args.clone();
            extra.extend(["--admin-listen".to_string(), format!("127.0.0.1:{port}")]);
            let shoal = targets::start_shoal(&work_dir, bin, &url, &extra, false)?;
            proxies.push(("shoal-metrics".into(), shoal));
        }
        if args.targets.iter().any(|t| t == "shoal-config") {
            match start_sharded_shoal(args, cluster, bin, &work_dir, rt) {
                Ok(p) => proxies.push(("shoal-config".into(), p)),
                Err(e @ OverheadError::ExitedAtStart { .. }) => {
                    let why = e.refusal_summary().unwrap_or_default();
                    eprintln!("overhead: shoal-config NOT RUN: {why}");
                    not_run.push(("shoal-config".into(), why));
                }
                Err(e) => return Err(e),
            }
        }
    }
    let mut resolved: Vec<Resolved> = Vec::new();
    for t in &args.targets {
        if t == "direct" {
            resolved.push(Resolved {
                name: t.clone(),
                host: direct.host.clone(),
                port: direct.port,
                pid: None,
            });
        } else if let Some((_, p)) = proxies.iter().find(|(n, _)| n == t) {
            resolved.push(Resolved {
                name: t.clone(),
                host: "127.0.0.1".into(),
                port: p.port,
                pid: Some(p.pid()),
            });
        }
    }
    for e in externals {
        resolved.push(Resolved {
            name: e.name.clone(),
            host: e.host.clone(),
            port: e.port,
            pid: e.pid,
        });
    }
    let names: Vec<String> = resolved.iter().map(|r| r.name.clone()).collect();

    // The paced pass repeats every run of the closed-loop one.
    let passes = if args.paced.is_some() { 2 } else { 1 };
    let total =
        passes * args.rounds as usize * args.workloads.len() * args.threads.len() * resolved.len();
    eprintln!(
        "overhead: {total} runs of {} s (about {} min)",
        args.duration,
        (total as u64 * (args.duration as u64 + 2)).div_ceil(60)
    );
    let bench = Bench {
        args,
        direct: &direct,
        work_dir: &work_dir,
        backend_pids,
        progress: Progress::new("overhead", total as u64),
    };
    let mut samples = Vec::new();
    bench.rounds(&resolved, &mut proxies, None, &mut samples)?;
    if let Some(fraction) = args.paced {
        let rates = report::paced_rates(&report::cells(&samples), fraction);
        bench.rounds(&resolved, &mut proxies, Some(&rates), &mut samples)?;
    }
    bench.progress.finish();
    drop(proxies);
    let _ = std::fs::remove_dir_all(&work_dir);

    let cells = report::cells(&samples);
    let ratios = report::ratios(&cells, &args.workloads, &args.threads);
    let mut header = format!(
        "# Proxy overhead: {}\n\n\
         {} on {}, {} round(s) x {} s per run, sysbench {} tables x {} rows, \
         --db-ps-mode={}, MariaDB with innodb-buffer-pool-size={} and innodb-log-file-size={}, \
         medians over rounds. HAProxy: TCP mode, nbthread {}; shoal: quick \
         mode; shoal-1thread: quick mode with one worker thread; haproxy-1thread: nbthread 1; \
         shoal-tls: quick mode, sysbench connecting with TLS (`--mysql-ssl=on`); \
         shoal-config: the sysbench tables sharded by id (`mod`) over {}, pool.max = threads x \
         datanodes; mariadbd CPU is every instance's.\n\
         Latency is per sysbench event: one query for oltp_point_select and the shoal_scatter_* \
         workloads, one 18-query transaction \
         for oltp_read_write. CPU per query: utime+stime of the process from /proc over the run, \
         divided by the queries sysbench counted.\n",
        names.join(" vs "),
        utc_timestamp(SystemTime::now(), true),
        crate::results::machine_line(),
        args.rounds,
        args.duration,
        args.tables,
        args.table_size,
        args.ps_mode,
        args.buffer_pool,
        args.redo_log,
        args.haproxy_threads,
        sharded_layout(args.sharded_servers),
    );
    for (name, why) in &not_run {
        header.push_str(&format!("\n**{name}: not run**: {why}\n"));
    }
    let md = report::markdown(&header, &cells, &ratios, &names, args.paced);
    println!("{md}");
    let results = ResultsDir::create(&args.out, "overhead")?;
    write_results(&results, args, &md, &samples, &cells, &names, &not_run)?;
    eprintln!("overhead: results in {}", results.path().display());
    // The ratio goals are in the report ("met" column); timings never decide the exit status.
    Ok(if !not_run.is_empty() {
        Verdict::Incomplete
    } else {
        Verdict::Pass
    })
}

/// What every sysbench run of the benchmark shares.
struct Bench<'a> {
    args: &'a OverheadArgs,
    direct: &'a SysbenchTarget,
    work_dir: &'a Path,
    backend_pids: Vec<u32>,
    progress: Progress,
}

impl Bench<'_> {
    fn backend_cpu(&self) -> Result<f64, OverheadError> {
        self.backend_pids
            .iter()
            .map(|&p| targets::cpu_seconds(p))
            .sum()
    }

    /// Every round of every (workload, threads) cell against every target: closed loop, or
    /// paced at each cell's rate in `rates`.
    fn rounds(
        &self,
        resolved: &[Resolved],
        proxies: &mut [(String, ProxyProcess)],
        rates: Option<&BTreeMap<(String, u32), u32>>,
        samples: &mut Vec<Sample>,
    ) -> Result<(), OverheadError> {
        for round in 0..self.args.rounds as usize {
            for workload in &self.args.workloads {
                for &threads in &self.args.threads {
                    let rate = rates
                        .map(|r| {
                            r.get(&(workload.clone(), threads)).copied().ok_or_else(|| {
                                OverheadError::Tool(format!(
                                    "no closed-loop figure to pace {workload} at {threads} threads"
                                ))
                            })
                        })
                        .transpose()?;
                    // Rotate the order each round so that no target always runs first (cold)
                    // or last.
                    let n = resolved.len();
                    for k in 0..n {
                        interrupt::check()?;
                        let target = &resolved[(k + round) % n];
                        let sample = self.run(target, workload, threads, round, rate)?;
                        if let Some((_, p)) =
                            proxies.iter_mut().find(|(name, _)| *name == target.name)
                        {
                            p.check_alive()?;
                        }
                        samples.push(sample);
                    }
                }
            }
        }
        Ok(())
    }

    /// One sysbench run against `target`, with the CPU the proxy and mariadbd used during it.
    fn run(
        &self,
        target: &Resolved,
        workload: &str,
        threads: u32,
        round: usize,
        rate: Option<u32>,
    ) -> Result<Sample, OverheadError> {
        let pass = match rate {
            None => format!("round {}", round + 1),
            Some(r) => format!("paced round {} at {r}/s", round + 1),
        };
        self.progress
            .stage(format!("{pass} {workload} {threads} thr {}", target.name));
        let endpoint = SysbenchTarget {
            host: target.host.clone(),
            port: target.port,
            ssl: (target.name == "shoal-tls").then(|| self.work_dir.join("tls")),
            ..self.direct.clone()
        };
        let proxy_before = target.pid.map(targets::cpu_times).transpose()?;
        let backend_before = self.backend_cpu()?;
        let args = self.args;
        let spec = sysbench::RunSpec {
            workload,
            threads,
            seconds: args.duration,
            tables: args.tables,
            table_size: args.table_size,
            ps_mode: &args.ps_mode,
        };
        let run = sysbench::run(&endpoint, &spec, rate, &[])
            .map_err(|e| run_failed(target, workload, threads, rate, e))?;
        let backend_cpu_s = self.backend_cpu()? - backend_before;
        let proxy_cpu = match (target.pid, proxy_before) {
            (Some(pid), Some(before)) => Some(targets::cpu_times(pid)? - before),
            _ => None,
        };
        self.progress.inc(1);
        let behind = match rate {
            Some(r) if !report::kept_pace(run.events_per_s, r) => format!(
                ", DID NOT KEEP THE PACE ({:.0} of {r} events/s)",
                run.events_per_s
            ),
            _ => String::new(),
        };
        self.progress.println(format!(
            "{pass} {workload} {threads} thr {}: {:.0} qps, avg {:.3} ms, errors {}{behind}",
            target.name, run.stats.qps, run.stats.avg_ms, run.stats.errors
        ));
        Ok(Sample {
            workload: workload.to_string(),
            threads,
            target: target.name.clone(),
            stats: run.stats,
            events_per_s: run.events_per_s,
            rate,
            proxy_cpu_s: proxy_cpu.map(|t| t.user + t.system),
            proxy_user_s: proxy_cpu.map(|t| t.user),
            backend_cpu_s,
        })
    }
}

/// A failed run's error, naming the target and, for a paced run, the cell and its rate (a
/// closed-loop run's sysbench message already names the workload and threads).
fn run_failed(
    target: &Resolved,
    workload: &str,
    threads: u32,
    rate: Option<u32>,
    e: OverheadError,
) -> OverheadError {
    let OverheadError::Tool(msg) = e else {
        return e;
    };
    let at = format!("target {} at {}:{}", target.name, target.host, target.port);
    OverheadError::Tool(match rate {
        None => format!("{at}: {msg}"),
        Some(r) => format!("{at}, {workload} at {threads} threads paced at {r} events/s: {msg}"),
    })
}

/// Shoal serving the sysbench tables sharded by id over 4 datanodes (databases `sbtest_N` on
/// `--sharded-servers` instances): each datanode gets the full prepared tables, then keeps only
/// its own rows; the placement is then checked against shoal_router's rule before Shoal starts.
fn start_sharded_shoal(
    args: &OverheadArgs,
    cluster: &Cluster,
    bin: &Path,
    work_dir: &Path,
    rt: &tokio::runtime::Handle,
) -> Result<ProxyProcess, OverheadError> {
    let mut layout = Layout::from_cluster(
        cluster,
        datanodes_per_server(args.sharded_servers),
        "sbtest",
    );
    layout.schema = "sbtest".into();
    // Room for every sysbench thread to keep a connection per datanode, as a sharding proxy's
    // pools are sized (ShardingSphere: 50 per datanode; Mycat: 1000 per host). A smaller pool
    // still serves, giving connections back between statements; that costs more per query.
    layout.pool_max = layout
        .pool_max
        .max(args.threads.iter().copied().max().unwrap_or(1) as usize * SHARDED_DATANODES);
    layout.sharded = (1..=args.tables)
        .map(|t| ShardedTable {
            name: format!("sbtest{t}"),
            key: "id".into(),
        })
        .collect();
    for (i, dn) in layout.datanodes.iter().enumerate() {
        let primary = cluster.primary(dn.datahost);
        let target = SysbenchTarget {
            host: primary.host.clone(),
            port: primary.port,
            user: cluster.user().to_string(),
            password: cluster.password().to_string(),
            db: dn.database.clone(),
            ssl: None,
        };
        eprintln!(
            "overhead: shoal-config: preparing {} on {}",
            dn.database,
            primary.addr()
        );
        sysbench::prepare(&target, args.tables, args.table_size)?;
        // Each shard keeps its quarter of the rows, rebuilt afterwards: a real shard never held
        // the others, and pages three quarters empty, with their purge running during the
        // measurement, would be MariaDB work the dense tables of the other targets do not have.
        let statements: Vec<String> = (1..=args.tables)
            .flat_map(|t| {
                [
                    format!("DELETE FROM sbtest{t} WHERE MOD(id, {SHARDED_DATANODES}) <> {i}"),
                    format!("ALTER TABLE sbtest{t} FORCE"),
                ]
            })
            .collect();
        rt.block_on(
            crate::shoal_config::direct_endpoint(cluster, dn.datahost, &dn.database, &dn.database)
                .execute(&statements),
        )?;
    }
    let port = targets::free_port()?;
    let yaml = layout.yaml(&format!("127.0.0.1:{port}"));
    let topology = crate::shoal_config::topology(&yaml)?;
    for t in &layout.sharded {
        let report = rt.block_on(crate::placement::check(
            &topology,
            "sbtest",
            &t.name,
            "id",
            u64::from(args.table_size),
        ))?;
        if !report.ok() {
            return Err(OverheadError::Tool(format!(
                "shoal-config: {} is not laid out as the rule says: {}",
                t.name,
                report.summary()
            )));
        }
    }
    let config = work_dir.join("shoal-config.yaml");
    std::fs::write(&config, &yaml)
        .map_err(OverheadError::io(format!("write {}", config.display())))?;
    // The same extra flags as the quick-mode target (a runtime choice applies to both).
    targets::start_shoal_config(
        work_dir,
        bin,
        &config,
        port,
        &args.shoal_args,
        "shoal-config.log",
    )
}

fn write_results(
    dir: &ResultsDir,
    args: &OverheadArgs,
    md: &str,
    samples: &[Sample],
    cells: &BTreeMap<report::Key, report::Cell>,
    names: &[String],
    not_run: &[(String, String)],
) -> Result<(), OverheadError> {
    dir.write("report.md", md)?;
    // The load columns come last, so that the columns of earlier runs keep their places.
    let sample_columns: [Column<&Sample>; 14] = [
        ("workload", |s| s.workload.clone()),
        ("threads", |s| s.threads.to_string()),
        ("target", |s| s.target.clone()),
        ("queries", |s| s.stats.queries.to_string()),
        ("qps", |s| fixed(s.stats.qps, 2)),
        ("avg_ms", |s| fixed(s.stats.avg_ms, 3)),
        ("p95_ms", |s| fixed(s.stats.p95_ms, 3)),
        ("errors", |s| s.stats.errors.to_string()),
        ("proxy_cpu_s", |s| {
            s.proxy_cpu_s.map_or(String::new(), |v| fixed(v, 3))
        }),
        ("proxy_user_s", |s| {
            s.proxy_user_s.map_or(String::new(), |v| fixed(v, 3))
        }),
        ("backend_cpu_s", |s| fixed(s.backend_cpu_s, 3)),
        ("load", |s| s.load().name().to_string()),
        ("rate", |s| s.rate.map_or(String::new(), |r| r.to_string())),
        ("events_per_s", |s| fixed(s.events_per_s, 2)),
    ];
    type CellKey<'a> = (&'a report::Key, &'a report::Cell);
    let median_columns: [Column<CellKey>; 15] = [
        ("workload", |(k, _)| k.workload.clone()),
        ("threads", |(k, _)| k.threads.to_string()),
        ("target", |(k, _)| k.target.clone()),
        ("runs", |(_, c)| c.runs.to_string()),
        ("qps", |(_, c)| fixed(c.qps, 2)),
        ("avg_ms", |(_, c)| fixed(c.avg_ms, 3)),
        ("p95_ms", |(_, c)| fixed(c.p95_ms, 3)),
        ("proxy_cpu_us_per_query", |(_, c)| {
            c.proxy_cpu_us_per_query
                .map_or(String::new(), |v| fixed(v, 3))
        }),
        ("proxy_user_us_per_query", |(_, c)| {
            c.proxy_user_us_per_query
                .map_or(String::new(), |v| fixed(v, 3))
        }),
        ("backend_cpu_us_per_query", |(_, c)| {
            fixed(c.backend_cpu_us_per_query, 2)
        }),
        ("errors", |(_, c)| c.errors.to_string()),
        ("load", |(k, _)| k.load.name().to_string()),
        ("rate", |(_, c)| {
            c.pace.map_or(String::new(), |p| p.rate.to_string())
        }),
        ("kept_pace", |(_, c)| {
            c.pace.map_or(String::new(), |p| p.kept.to_string())
        }),
        ("events_per_s", |(_, c)| fixed(c.events_per_s, 2)),
    ];
    for csv in [
        Csv::of("samples.csv", samples, &sample_columns),
        Csv::of("medians.csv", cells, &median_columns),
    ] {
        dir.write(&csv.name, &csv.text)?;
    }
    dir.write_json(
        "results.json",
        &json!({
            "experiment": "overhead",
            "machine": crate::results::machine_line(),
            "rounds": args.rounds,
            "duration_s": args.duration,
            "tables": args.tables,
            "table_size": args.table_size,
            "sharded_servers": args.sharded_servers,
            "ps_mode": args.ps_mode,
            "buffer_pool": args.buffer_pool,
            "redo_log": args.redo_log,
            "paced_fraction": args.paced,
            "targets": names,
            "not_run": not_run.iter().map(|(n, w)| json!({"target": n, "why": w})).collect::<Vec<_>>(),
            "medians": cells.iter().map(|(k, c)| json!({
                "load": k.load.name(), "workload": k.workload, "threads": k.threads,
                "target": k.target, "runs": c.runs, "qps": c.qps, "events_per_s": c.events_per_s,
                "avg_ms": c.avg_ms, "p95_ms": c.p95_ms,
                "proxy_cpu_us_per_query": c.proxy_cpu_us_per_query,
                "backend_cpu_us_per_query": c.backend_cpu_us_per_query, "errors": c.errors,
                "rate": c.pace.map(|p| p.rate), "kept_pace": c.pace.map(|p| p.kept),
            })).collect::<Vec<_>>(),
        }),
    )?;
    for w in &args.workloads {
        let series = |load: report::Load, value: &dyn Fn(&report::Cell) -> Option<f64>| {
            names
                .iter()
                .map(|t| Series {
                    name: t.clone(),
                    points: args
                        .threads
                        .iter()
                        .filter_map(|&th| {
                            let c = cells.get(&report::Key::new(load, w, th, t))?;
                            Some((f64::from(th), value(c)?))
                        })
                        .collect(),
                })
                .filter(|s| !s.points.is_empty())
                .collect::<Vec<_>>()
        };
        dir.write_chart(
            &format!("qps-{w}.svg"),
            &LineChart {
                title: format!("{w}: QPS by client threads"),
                x_label: "sysbench threads".into(),
                y_label: "queries per second".into(),
                series: series(report::Load::Closed, &|c| Some(c.qps)),
            },
        )?;
        dir.write_chart(
            &format!("cpu-{w}.svg"),
            &LineChart {
                title: format!("{w}: proxy CPU per query by client threads"),
                x_label: "sysbench threads".into(),
                y_label: "proxy CPU us per query".into(),
                series: series(report::Load::Closed, &|c| c.proxy_cpu_us_per_query),
            },
        )?;
        if let Some(fraction) = args.paced {
            dir.write_chart(
                &format!("cpu-paced-{w}.svg"),
                &LineChart {
                    title: format!(
                        "{w}: proxy CPU per query at an equal rate ({fraction} x the slowest \
                         target's closed-loop rate)"
                    ),
                    x_label: "sysbench threads".into(),
                    y_label: "proxy CPU us per query".into(),
                    series: series(report::Load::Paced, &|c| c.proxy_cpu_us_per_query),
                },
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_targets_parse_with_and_without_pid() {
        assert_eq!(
            ExternalTarget::parse("proxysql=127.0.0.1:6033:4242").unwrap(),
            ExternalTarget {
                name: "proxysql".into(),
                host: "127.0.0.1".into(),
                port: 6033,
                pid: Some(4242)
            }
        );
        assert_eq!(
            ExternalTarget::parse("kingshard=db.local:9696")
                .unwrap()
                .pid,
            None
        );
        for bad in [
            "x",
            "=h:1",
            "shoal=h:1",
            "x=h",
            "x=h:port",
            "x=:1",
            "x=h:1:2:3",
        ] {
            assert!(ExternalTarget::parse(bad).is_err(), "{bad}");
        }
    }

    /// The options as the command line gives them.
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: OverheadArgs,
    }

    fn parse(extra: &[&str]) -> Result<OverheadArgs, clap::Error> {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("overhead").chain(extra.iter().copied()))
            .map(|c| c.args)
    }

    #[test]
    fn paced_takes_a_fraction_in_zero_one() {
        assert_eq!(parse(&[]).unwrap().paced, None);
        assert_eq!(parse(&["--paced", "0.8"]).unwrap().paced, Some(0.8));
        assert_eq!(parse(&["--paced", "1"]).unwrap().paced, Some(1.0));
        for bad in ["0", "-0.5", "1.01", "NaN", "inf", "x"] {
            assert!(parse(&["--paced", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn ps_mode_is_prepared_unless_text_is_asked_for() {
        assert_eq!(parse(&[]).unwrap().ps_mode, "auto");
        assert_eq!(parse(&["--ps-mode", "disable"]).unwrap().ps_mode, "disable");
        assert!(parse(&["--ps-mode", "text"]).is_err());
    }

    #[test]
    fn sharded_servers_must_divide_the_datanodes() {
        assert_eq!(parse(&[]).unwrap().sharded_servers, 2);
        for ok in [1, 2, 4] {
            let n = ok.to_string();
            assert_eq!(
                parse(&["--sharded-servers", &n]).unwrap().sharded_servers,
                ok
            );
        }
        for bad in ["0", "3", "5", "8", "-1"] {
            assert!(parse(&["--sharded-servers", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_failed_paced_run_names_target_cell_and_rate() {
        let shoal = Resolved {
            name: "shoal".into(),
            host: "127.0.0.1".into(),
            port: 4000,
            pid: None,
        };
        let failed = |rate| {
            let e = OverheadError::Tool("sysbench failed".into());
            run_failed(&shoal, "oltp_read_write", 32, rate, e).to_string()
        };
        assert!(
            failed(Some(250)).contains(
                "target shoal at 127.0.0.1:4000, oltp_read_write at 32 threads paced at 250 \
                 events/s: sysbench failed"
            ),
            "{}",
            failed(Some(250))
        );
        assert!(failed(None).contains("target shoal at 127.0.0.1:4000: sysbench failed"));
    }

    #[test]
    fn the_header_names_the_sharded_layout() {
        assert_eq!(
            sharded_layout(2),
            "4 datanodes on 2 MariaDB instances (2 each)"
        );
        assert!(sharded_layout(1).contains("the one MariaDB instance the other targets use"));
    }
}
