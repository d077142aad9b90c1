//! `shoal-bench tpcc`: a TPC-C driver of our own (the sysbench-tpcc schema and statement style,
//! with the remote New-Order lines and remote Payments that client never sends). Modes:
//! `load`, `run` and `check` against any endpoint (Shoal or MariaDB), `config` to write the
//! Shoal config that shards the tables by warehouse, and, without a mode, the experiment: one
//! MariaDB holding every warehouse (direct) against Shoal over 1, 2 and 4 primaries holding the
//! same warehouses, each loaded, run in interleaved rounds at several thread counts, and checked.

pub mod check;
pub mod keys;
pub mod load;
pub mod report;
pub mod schema;
pub mod txn;

use std::path::Path;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::Verdict;
use crate::cluster::status::{StatusConns, growth};
use crate::cluster::{Cluster, ClusterSpec};
use crate::error::BenchError;
use crate::load::Endpoint;
use crate::overhead::targets::{self, ProxyProcess};
use crate::progress::Progress;
use crate::results::{RunArgs, RunInfo};
use crate::shoal_config::{Datahost, Datanode, Layout, RunningShoal, ShardedTable};
use schema::Scale;

/// The logical schema every side serves.
pub const SCHEMA: &str = "tpcc";

#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TpccArgs {
    #[command(subcommand)]
    pub mode: Option<Mode>,
    #[command(flatten)]
    pub experiment: ExperimentArgs,
}

#[derive(Debug, Clone, Subcommand)]
pub enum Mode {
    /// Drop and create the tables, then load the initial database, through an endpoint.
    Load(LoadArgs),
    /// Run the transaction mix against an endpoint and print the figures.
    Run(RunModeArgs),
    /// Check the 12 consistency conditions (clause 3.3.2) through an endpoint.
    Check(CheckArgs),
    /// Print a Shoal config sharding the TPC-C tables by warehouse (`mod`) over backends, one
    /// datanode per backend, `item` global.
    Config(ConfigArgs),
}

/// The database's size. Defaults are the spec's; the smaller knobs are for tests.
#[derive(Debug, Clone, Args)]
pub struct SizeArgs {
    #[arg(long, default_value_t = 2)]
    pub warehouses: u32,
    /// Items (and stock rows per warehouse). The spec's is 100,000; smaller only for tests.
    #[arg(long, default_value_t = 100_000)]
    pub items: u32,
    /// Customers (and orders) per district. The spec's is 3,000; smaller only for tests.
    #[arg(long, default_value_t = 3_000)]
    pub customers_per_district: u32,
}

impl SizeArgs {
    fn scale(&self) -> Result<Scale, BenchError> {
        let s = Scale {
            warehouses: self.warehouses,
            items: self.items,
            customers: self.customers_per_district,
        };
        s.validate().map_err(BenchError::Tool)?;
        Ok(s)
    }
}

/// Where a mode connects.
#[derive(Debug, Clone, Args)]
pub struct EndpointArgs {
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long)]
    pub port: u16,
    #[arg(long, default_value = "shoal")]
    pub user: String,
    #[arg(long, default_value = "shoal")]
    pub password: String,
    #[arg(long, default_value = SCHEMA)]
    pub database: String,
}

impl EndpointArgs {
    fn endpoint(&self) -> Endpoint {
        Endpoint {
            name: "target".into(),
            host: self.host.clone(),
            port: self.port,
            user: self.user.clone(),
            password: self.password.clone(),
            db: Some(self.database.clone()),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    #[command(flatten)]
    pub size: SizeArgs,
    /// Connections loading in parallel.
    #[arg(long, default_value_t = 4)]
    pub load_threads: usize,
}

#[derive(Debug, Clone, Args)]
pub struct RunModeArgs {
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    #[command(flatten)]
    pub size: SizeArgs,
    /// Terminals (connections); terminal i's home warehouse is i mod warehouses + 1.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Seconds.
    #[arg(long, default_value_t = 30)]
    pub duration: u64,
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    #[command(flatten)]
    pub size: SizeArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// A MariaDB primary, `HOST:PORT` (repeat; datanode k is database `<db-prefix>_1` on the
    /// k-th, and warehouse w lives on datanode w mod the count).
    #[arg(long = "backend", required = true)]
    pub backends: Vec<String>,
    #[arg(long, default_value = "shoal")]
    pub user: String,
    #[arg(long, default_value = "shoal")]
    pub password: String,
    #[arg(long, default_value = SCHEMA)]
    pub db_prefix: String,
    #[arg(long, default_value = "127.0.0.1:8066")]
    pub listen: String,
    /// Backend connections per server (`pool.max`): at least the terminals that will run.
    #[arg(long, default_value_t = 64)]
    pub pool_max: usize,
}

#[derive(Debug, Clone, Args)]
pub struct ExperimentArgs {
    #[command(flatten)]
    pub size: SizeArgs,
    /// Terminal counts (seed 004 ran 50-400 threads on 3 big servers; scaled to 2 cores).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    pub threads: Vec<usize>,
    /// Shoal targets: Shoal over this many MariaDB primaries each (one datanode per primary),
    /// holding the same warehouses.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub servers: Vec<usize>,
    /// Seconds per run.
    #[arg(long, default_value_t = 20)]
    pub duration: u64,
    /// Interleaved rounds (every target once per thread count per round); medians reported.
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// Connections loading in parallel, per side.
    #[arg(long, default_value_t = 4)]
    pub load_threads: usize,
    /// InnoDB buffer pool of every MariaDB instance: the whole database in memory on every side.
    #[arg(long, default_value = "1G")]
    pub buffer_pool: String,
    /// Cap every MariaDB server at this many CPUs (cgroups; needs root), so that servers sharing
    /// this machine's cores behave like servers with CPUs of their own: the servers question
    /// (tpmC over 1, 2, 4 servers) cannot show on shared cores without it.
    #[arg(long)]
    pub server_cpus: Option<f64>,
    /// Another shoal binary (a before or after build) measured beside the first: side
    /// `shoal-1-b`, Shoal over the first server with databases of its own, loaded, run in the
    /// same interleaved rounds and checked like the others.
    #[arg(long)]
    pub compare_bin: Option<std::path::PathBuf>,
    /// More sides in front of the direct server and its database (comma-separated):
    /// `haproxy` (HAProxy in TCP mode, 2 threads: the cost of a bare proxy hop on this
    /// machine), `shoal-quick` (Shoal in quick mode, relaying one database: its routed path's
    /// cost against its relay's).
    #[arg(long, value_delimiter = ',', value_parser = ["haproxy", "shoal-quick"])]
    pub hops: Vec<String>,
    #[command(flatten)]
    pub run: RunArgs,
}

pub async fn run(args: TpccArgs) -> Result<Verdict, BenchError> {
    match args.mode {
        None => run_experiment(args.experiment).await,
        Some(Mode::Load(a)) => {
            let scale = a.size.scale()?;
            let progress = Progress::new("tpcc load", scale.rows());
            let stat =
                load::load(&a.endpoint.endpoint(), &scale, a.load_threads, &progress).await?;
            progress.finish();
            println!(
                "loaded {} warehouses: {} rows in {} statements, {:.1} s",
                scale.warehouses, stat.rows, stat.statements, stat.secs
            );
            Ok(Verdict::Pass)
        }
        Some(Mode::Run(a)) => {
            let scale = a.size.scale()?;
            let stat = txn::run_terminals(
                &a.endpoint.endpoint(),
                &scale,
                a.threads,
                Duration::from_secs(a.duration),
            )
            .await?;
            println!("{}", report::run_summary(&stat));
            Ok(if stat.errors() > 0 {
                Verdict::Fail
            } else {
                Verdict::Pass
            })
        }
        Some(Mode::Check(a)) => {
            let scale = a.size.scale()?;
            let r = check::check(&a.endpoint.endpoint(), &scale).await?;
            println!("{}", r.summary());
            Ok(if r.ok() { Verdict::Pass } else { Verdict::Fail })
        }
        Some(Mode::Config(a)) => {
            let layout = Layout {
                schema: SCHEMA.into(),
                user: a.user.clone(),
                password: a.password.clone(),
                datahosts: a
                    .backends
                    .iter()
                    .map(|b| Datahost {
                        primary: b.clone(),
                        replicas: Vec::new(),
                    })
                    .collect(),
                datanodes: (0..a.backends.len())
                    .map(|k| Datanode {
                        name: format!("dn{}", k + 1),
                        datahost: k,
                        database: format!("{}_1", a.db_prefix),
                    })
                    .collect(),
                sharded: Vec::new(),
                global: Vec::new(),
                pool_max: a.pool_max,
            };
            let yaml = sharded(layout).yaml_with(&a.listen, &[HEALTH]);
            crate::shoal_config::topology(&yaml)?;
            print!("{yaml}");
            Ok(Verdict::Pass)
        }
    }
}

/// The health checks of the generated configs: a 5 s timeout instead of Shoal's 1 s. Loading
/// through Shoal on a busy 2-core machine, the default marked a live primary down (three checks
/// slower than 1 s) and the load failed with 1429; the benchmark measures throughput, not that.
const HEALTH: &str = "health: { timeout: 5s }";

/// `layout` serving the TPC-C tables: each sharded by its warehouse column, `item` global.
fn sharded(mut layout: Layout) -> Layout {
    layout.schema = SCHEMA.into();
    layout.sharded = schema::SHARDED
        .iter()
        .map(|(t, k)| ShardedTable {
            name: t.to_string(),
            key: k.to_string(),
        })
        .collect();
    layout.global = vec![schema::GLOBAL.to_string()];
    layout
}

/// One measured side: direct, a hop in front of the direct server and its database (HAProxy,
/// Shoal in quick mode), or Shoal over `servers` primaries.
pub struct Side {
    pub name: String,
    pub servers: Option<usize>,
    pub endpoint: Endpoint,
    shoal: Option<RunningShoal>,
    hop: Option<ProxyProcess>,
}

impl Side {
    /// The proxy's process, whose CPU a run measures.
    fn pid(&self) -> Option<u32> {
        let shoal = self.shoal.as_ref().map(|s| s.process.pid());
        shoal.or(self.hop.as_ref().map(ProxyProcess::pid))
    }
}

/// Context switches of the mariadbd processes `pids`, summed.
fn switches(pids: &[u32]) -> Result<u64, BenchError> {
    pids.iter().map(|&p| targets::context_switches(p)).sum()
}

/// The servers' counters each run reads (what reached MariaDB, per transaction).
pub const COUNTERS: [&str; 16] = [
    "Questions",
    "Com_begin",
    "Com_commit",
    "Com_rollback",
    "Com_xa_start",
    "Com_xa_end",
    "Com_xa_prepare",
    "Com_xa_commit",
    "Com_xa_rollback",
    "Com_select",
    "Com_insert",
    "Com_update",
    "Com_delete",
    // How well commits batch: one binary log write (and, durably configured, one sync) per
    // group commit, and InnoDB's redo writes.
    "Binlog_commits",
    "Binlog_group_commits",
    "Innodb_log_writes",
];

async fn run_experiment(a: ExperimentArgs) -> Result<Verdict, BenchError> {
    let scale = a.size.scale()?;
    if a.threads.is_empty() || a.threads.contains(&0) || a.rounds == 0 || a.duration == 0 {
        return Err(BenchError::Tool(
            "--threads needs counts of at least 1; --rounds and --duration at least 1".into(),
        ));
    }
    if a.servers.contains(&0) {
        return Err(BenchError::Tool(
            "--servers needs counts of at least 1".into(),
        ));
    }
    let bin = targets::shoal_release_bin_async(a.run.shoal_bin.clone()).await?;
    let info = RunInfo::capture("tpcc");
    let work = std::env::temp_dir().join(format!("shoal-tpcc-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(BenchError::io(format!("create {}", work.display())))?;
    let primaries = a.servers.iter().copied().max().unwrap_or(1);
    let mut databases = vec![SCHEMA.to_string()];
    databases.extend(a.servers.iter().map(|s| format!("{SCHEMA}_s{s}_1")));
    if a.compare_bin.is_some() {
        databases.push(format!("{SCHEMA}_b_1"));
    }
    eprintln!(
        "tpcc: starting {primaries} MariaDB primar{}",
        if primaries == 1 { "y" } else { "ies" }
    );
    let cluster = Cluster::start_with_options(
        ClusterSpec {
            primaries,
            databases,
            ..ClusterSpec::default()
        },
        &[format!("innodb-buffer-pool-size={}", a.buffer_pool)],
    )
    .await?;
    let pids: Vec<u32> = cluster.instances().iter().map(|i| i.pid).collect();
    let limit = a
        .server_cpus
        .map(|cores| crate::cpu_limit::CpuLimit::apply(&pids, cores))
        .transpose()?;
    let outcome = experiment(&a, &scale, &cluster, &bin, &work, &info).await;
    drop(limit);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&work);
    outcome
}

async fn experiment(
    a: &ExperimentArgs,
    scale: &Scale,
    cluster: &Cluster,
    bin: &Path,
    work: &Path,
    info: &RunInfo,
) -> Result<Verdict, BenchError> {
    let max_threads = a.threads.iter().copied().max().unwrap_or(1);
    let mut sides = vec![Side {
        name: "direct".into(),
        servers: None,
        endpoint: crate::shoal_config::direct_endpoint(cluster, 0, SCHEMA, "direct"),
        shoal: None,
        hop: None,
    }];
    for name in &a.hops {
        let direct = sides[0].endpoint.clone();
        let addr = cluster.primary(0).addr();
        let hop = match name.as_str() {
            "haproxy" => targets::start_haproxy(work, name, &addr, 2)?,
            _ => {
                let url = format!(
                    "mysql://{}:{}@{addr}/{SCHEMA}",
                    direct.user, direct.password
                );
                targets::start_shoal(work, bin, &url, &[], false)?
            }
        };
        let endpoint = Endpoint {
            name: name.clone(),
            host: "127.0.0.1".into(),
            port: hop.port,
            ..direct
        };
        sides.push(Side {
            name: name.clone(),
            servers: None,
            endpoint,
            shoal: None,
            hop: Some(hop),
        });
    }
    let mut not_run: Vec<(String, String)> = Vec::new();
    // (servers, binary, database prefix, side, servers for the by-servers chart)
    let compared = a
        .compare_bin
        .as_deref()
        .map(|b| (1, b, format!("{SCHEMA}_b"), "shoal-1-b".to_string(), None));
    let shoals = a
        .servers
        .iter()
        .map(|&s| {
            let name = format!("shoal-{s}");
            (s, bin, format!("{SCHEMA}_s{s}"), name, Some(s))
        })
        .chain(compared);
    for (s, bin, prefix, name, servers) in shoals {
        let mut layout = Layout::from_cluster(cluster, 1, &prefix);
        layout.datahosts.truncate(s);
        layout.datanodes.retain(|d| d.datahost < s);
        // Every terminal may hold a connection per datanode of a server inside a transaction.
        layout.pool_max = layout.pool_max.max(max_threads + 8);
        let layout = sharded(layout);
        match RunningShoal::start_with(work, bin, &layout, &name, |listen| {
            layout.yaml_with(listen, &[HEALTH])
        }) {
            Ok(mut shoal) => {
                shoal.endpoint.name = format!("shoal over {s} server(s)");
                sides.push(Side {
                    name,
                    servers,
                    endpoint: shoal.endpoint.clone(),
                    shoal: Some(shoal),
                    hop: None,
                });
            }
            Err(e @ BenchError::ExitedAtStart { .. }) => {
                let why = e.refusal_summary().unwrap_or_default();
                eprintln!("tpcc: {name} NOT RUN: {why}");
                not_run.push((name, why));
            }
            Err(e) => return Err(e),
        }
    }

    // The hops run on the direct side's database: nothing of their own to load.
    let loaded: Vec<&Side> = sides.iter().filter(|s| s.hop.is_none()).collect();
    let progress = Progress::new("tpcc load", scale.rows() * loaded.len() as u64);
    let mut loads = Vec::new();
    for side in loaded {
        progress.stage(format!(
            "loading {} warehouses into {}",
            scale.warehouses, side.name
        ));
        let stat = load::load(&side.endpoint, scale, a.load_threads, &progress).await?;
        progress.println(format!(
            "{}: loaded {} rows in {:.1} s",
            side.name, stat.rows, stat.secs
        ));
        loads.push((side.name.clone(), stat));
    }
    progress.finish();

    let runs = a.rounds * a.threads.len() * sides.len();
    eprintln!(
        "tpcc: {runs} runs of {} s (about {} min)",
        a.duration,
        (runs as u64 * (a.duration + 1)).div_ceil(60)
    );
    let progress = Progress::new("tpcc run", runs as u64);
    let backend_pids: Vec<u32> = cluster.primaries().iter().map(|p| p.pid).collect();
    let mut status = StatusConns::open(cluster, 0..backend_pids.len()).await?;
    let mut samples = Vec::new();
    for round in 0..a.rounds {
        for &threads in &a.threads {
            // Alternate the order of the sides between rounds, as `overhead` does, so that
            // drift in the machine's load favours none.
            let order: Vec<usize> = if round % 2 == 0 {
                (0..sides.len()).collect()
            } else {
                (0..sides.len()).rev().collect()
            };
            for i in order {
                let side = &mut sides[i];
                progress.stage(format!(
                    "round {} {} at {threads} threads",
                    round + 1,
                    side.name
                ));
                let cpu0 = side.pid().map(targets::cpu_seconds).transpose()?;
                let backend0: f64 = backend_pids
                    .iter()
                    .map(|&p| targets::cpu_seconds(p))
                    .sum::<Result<f64, _>>()?;
                let counters0 = status.summed(&COUNTERS).await?;
                let switches0 = switches(&backend_pids)?;
                let stat = txn::run_terminals(
                    &side.endpoint,
                    scale,
                    threads,
                    Duration::from_secs(a.duration),
                )
                .await?;
                let proxy_cpu_s = match (side.pid(), cpu0) {
                    (Some(pid), Some(c0)) => Some(targets::cpu_seconds(pid)? - c0),
                    _ => None,
                };
                let backend_cpu_s = backend_pids
                    .iter()
                    .map(|&p| targets::cpu_seconds(p))
                    .sum::<Result<f64, _>>()?
                    - backend0;
                let server_counters = growth(&counters0, &status.summed(&COUNTERS).await?);
                let backend_switches = switches(&backend_pids)?.saturating_sub(switches0);
                if let Some(shoal) = side.shoal.as_mut() {
                    shoal.process.check_alive()?;
                }
                if let Some(hop) = side.hop.as_mut() {
                    hop.check_alive()?;
                }
                progress.inc(1);
                progress.println(format!(
                    "round {} {} {threads} thr: {:.0} tpmC, {:.1} TPS, {} errors, {} retries",
                    round + 1,
                    side.name,
                    stat.tpmc(),
                    stat.tps(),
                    stat.errors(),
                    stat.retries()
                ));
                samples.push(report::Sample {
                    round: round + 1,
                    threads,
                    side: side.name.clone(),
                    servers: side.servers,
                    stat,
                    proxy_cpu_s,
                    backend_cpu_s,
                    server_counters,
                    backend_switches,
                });
            }
        }
    }
    progress.finish();
    status.close().await;

    let mut checks = Vec::new();
    for side in sides.iter().filter(|s| s.hop.is_none()) {
        eprintln!("tpcc: checking {}", side.name);
        let r = check::check(&side.endpoint, scale).await?;
        eprintln!("tpcc: {}: {}", side.name, r.summary());
        checks.push((side.name.clone(), r));
    }
    let names: Vec<String> = sides.iter().map(|s| s.name.clone()).collect();
    drop(sides);
    let r = report::Results {
        scale: *scale,
        args: a,
        sides: names,
        loads,
        samples,
        checks,
        not_run,
    };
    let failed = r.failed();
    let incomplete = !r.not_run.is_empty();
    r.build(info).publish(&a.run.out, info)?;
    Ok(if failed {
        Verdict::Fail
    } else if incomplete {
        Verdict::Incomplete
    } else {
        Verdict::Pass
    })
}
