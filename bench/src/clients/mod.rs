//! `shoal-bench clients` (issue 51): many client connections over few backend connections.
//!
//! Two MariaDB servers, two databases on each (4 datanodes), a table sharded by `id` over them.
//! For each pool size (`pool.max` per server, one Shoal each) and each client count, ascending,
//! through Shoal:
//!
//! - idle clients (the count less the active ones) log in, run one point select and stay open
//!   (kept from one count to the next);
//! - for `--duration` seconds, `--active` clients run point selects in a loop, every
//!   `--scatter-every`-th statement a `SELECT COUNT(*)` of the whole table (every datanode), the
//!   idle clients wake up in turn for one statement each (`--idle-rate` in all), and
//!   a probe opens new connections one after another (login, one point select, the scatter,
//!   close);
//! - then the probe alone for half as long (new sessions while nobody else runs anything, the
//!   active clients still open);
//! - measured: the probe's login, first statement and scatter (under load and alone), the
//!   active clients' point select and scatter latency (p50, p99) and QPS, Shoal's CPU per statement over the window and while the
//!   clients are idle, Shoal's RSS, the backend connections open on each server, and what
//!   `SHOW SHOAL POOLS` says after the window (results.json).
//!
//! Then the sysbench part ([`sysbench`]): 256 and 512 threads directly and through Shoal with a
//! pool of 64. Every answer is checked; a wrong one fails the run (exit status 1). The latency
//! goals of issue 51 are reported, never turned into the exit status.

pub mod report;
pub mod sysbench;
pub mod workload;

use std::path::Path;
use std::time::{Duration, Instant};

use clap::Args;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use serde::Serialize;

use crate::Verdict;
use crate::cluster::{Cluster, ClusterSpec};
use crate::error::BenchError;
use crate::interrupt;
use crate::load::Endpoint;
use crate::overhead::targets;
use crate::progress::Progress;
use crate::results::{RunArgs, RunInfo, percentile_ms};
use crate::shoal_config::{Layout, RunningShoal, ShardedTable};
use workload::{IdleStatement, Measured, Window};

/// The logical schema and the sharded table.
pub const SCHEMA: &str = "clientsdb";
pub const TABLE: &str = "item";

/// Datanodes on each of the two servers.
const DATANODES_PER_SERVER: usize = 2;
const SERVERS: usize = 2;

/// Open files this process and Shoal need beyond one socket per client: the backend
/// connections, MariaDB's and sysbench's pipes, logs, the runtime's own descriptors.
const FD_MARGIN: u64 = 512;

#[derive(Debug, Clone, Args)]
pub struct ClientsArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Client connections open at once in each cell (the active ones included), ascending.
    #[arg(long, value_delimiter = ',', default_value = "8,100,1000,5000")]
    pub clients: Vec<u64>,
    /// Shoal's backend connections per server (`pool.max`): one Shoal for each.
    #[arg(long, value_delimiter = ',', default_value = "16,64")]
    pub pools: Vec<usize>,
    /// Clients running statements during the window; the others are idle.
    #[arg(long, default_value_t = 8)]
    pub active: u64,
    /// Seconds of each cell's window (and of each sysbench run, unless --sysbench-duration).
    #[arg(long, default_value_t = 10)]
    pub duration: u32,
    /// Every Nth statement of an active client is the scatter; the others are point selects.
    #[arg(long, default_value_t = 10)]
    pub scatter_every: u64,
    /// Rows of the sharded table (ids 1..=rows).
    #[arg(long, default_value_t = 10_000)]
    pub rows: u64,
    /// The one statement each idle client runs after logging in and at each wake-up: `point`
    /// (one datanode; measured, the waking clients then keep the pool drained of idle
    /// connections) or `scatter` (every datanode).
    #[arg(long, value_enum, default_value = "point")]
    pub idle_statement: IdleStatement,
    /// Statements per second the idle clients run in all during each window, one client after
    /// another (each its idle statement): idle clients of an application wake up now and then,
    /// and take a backend connection again. 0: they stay silent.
    #[arg(long, default_value_t = 100.0)]
    pub idle_rate: f64,
    /// Milliseconds the login probe pauses between two logins.
    #[arg(long, default_value_t = 20)]
    pub login_interval_ms: u64,
    /// Idle clients logging in at once while a cell is set up.
    #[arg(long, default_value_t = 64)]
    pub connect_concurrency: usize,
    /// sysbench thread counts (direct and through Shoal).
    #[arg(long, value_delimiter = ',', default_value = "256,512")]
    pub sysbench_threads: Vec<u32>,
    /// sysbench workloads.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "oltp_read_only,oltp_point_select"
    )]
    pub sysbench_workloads: Vec<String>,
    /// Shoal's `--pool-max` for the sysbench part.
    #[arg(long, default_value_t = 64)]
    pub sysbench_pool: usize,
    /// Seconds per sysbench run (default: --duration).
    #[arg(long)]
    pub sysbench_duration: Option<u32>,
    #[arg(long, default_value_t = 4)]
    pub sysbench_tables: u32,
    #[arg(long, default_value_t = 10_000)]
    pub sysbench_table_size: u32,
    /// Leave the sysbench part out.
    #[arg(long)]
    pub no_sysbench: bool,
    /// Another Shoal the sysbench part runs through, beside `--shoal-bin`, in the same run:
    /// `NAME=BIN` or `NAME=BIN,ARG,ARG...` (quick mode with the same pool, then these
    /// arguments: `before=/tmp/shoal-before`, `normal=target/release/shoal,--sched,normal`).
    /// Repeatable; each (workload, threads) runs direct, then every Shoal in turn.
    #[arg(long = "sysbench-also", value_parser = sysbench::Variant::parse)]
    pub sysbench_also: Vec<sysbench::Variant>,
}

impl ClientsArgs {
    fn validate(&self) -> Result<(), BenchError> {
        let ascending = self.clients.windows(2).all(|w| w[0] < w[1]);
        if self.clients.is_empty() || !ascending || self.clients[0] == 0 {
            return Err(BenchError::Tool(
                "--clients needs counts of at least 1, ascending".into(),
            ));
        }
        if self.pools.is_empty() || self.pools.contains(&0) {
            return Err(BenchError::Tool("--pools needs sizes of at least 1".into()));
        }
        if self.active == 0 || self.duration == 0 || self.rows == 0 || self.scatter_every == 0 {
            return Err(BenchError::Tool(
                "--active, --duration, --rows and --scatter-every must be at least 1".into(),
            ));
        }
        if !(self.idle_rate >= 0.0 && self.idle_rate.is_finite()) {
            return Err(BenchError::Tool("--idle-rate must be 0 or more".into()));
        }
        if !self.no_sysbench
            && (self.sysbench_threads.is_empty()
                || self.sysbench_workloads.is_empty()
                || self.sysbench_pool == 0)
        {
            return Err(BenchError::Tool(
                "--sysbench-threads and --sysbench-workloads must not be empty (or give \
                 --no-sysbench)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Active clients of a cell of `clients` connections: all of them when there are fewer.
    fn active_of(&self, clients: u64) -> u64 {
        self.active.min(clients)
    }
}

/// One cell: a pool size and a client count.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub pool: usize,
    pub clients: u64,
    pub active: u64,
    pub idle: u64,
    /// Seconds it took to open this cell's new idle clients.
    pub setup_secs: f64,
    pub setup_failed: u64,
    pub secs: f64,
    pub statements: u64,
    pub qps: f64,
    pub points: u64,
    pub point_p50_ms: f64,
    pub point_p99_ms: f64,
    pub scatters: u64,
    pub scatter_p50_ms: f64,
    pub scatter_p99_ms: f64,
    /// Idle clients waking up for one statement (`--idle-rate`) during the window.
    pub wakes: u64,
    pub wake_p50_ms: f64,
    pub wake_p99_ms: f64,
    /// The probe's new sessions while the active clients run, and then alone.
    pub loaded: NewSessions,
    pub quiet: NewSessions,
    /// Failed statements and logins during the window and the quiet probe.
    pub errors: u64,
    pub login_errors: u64,
    pub first_error: Option<String>,
    /// Wrong answers (any fails the run).
    pub wrong: u64,
    pub first_wrong: Option<String>,
    /// Shoal's CPU time over the window, per statement (the active clients', the wake-ups and
    /// the probe's; the probe's logins are in the CPU time too).
    pub shoal_cpu_us_per_statement: f64,
    /// Shoal's CPU use while every client is idle, in percent of one core.
    pub shoal_idle_cpu_pct: f64,
    /// Shoal's resident set after the window, every client still open.
    pub shoal_rss_kib: u64,
    /// Connections open on each MariaDB server after the window (ours excluded).
    pub backend_conns: Vec<u64>,
    /// `SHOW SHOAL POOLS` after the window, each row as column = value.
    pub pools: Vec<Vec<(String, String)>>,
}

/// What the probe's new sessions measured: login, their first statement (a point select), then
/// the scatter from that session.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NewSessions {
    pub secs: f64,
    pub logins: u64,
    pub login_p50_ms: f64,
    pub login_p99_ms: f64,
    pub first_p50_ms: f64,
    pub first_p99_ms: f64,
    pub scatter_p50_ms: f64,
    pub scatter_p99_ms: f64,
}

impl NewSessions {
    fn of(m: &Measured) -> NewSessions {
        NewSessions {
            secs: m.secs,
            logins: m.login_us.len() as u64,
            login_p50_ms: percentile_ms(&m.login_us, 0.5),
            login_p99_ms: percentile_ms(&m.login_us, 0.99),
            first_p50_ms: percentile_ms(&m.first_us, 0.5),
            first_p99_ms: percentile_ms(&m.first_us, 0.99),
            scatter_p50_ms: percentile_ms(&m.fresh_scatter_us, 0.5),
            scatter_p99_ms: percentile_ms(&m.fresh_scatter_us, 0.99),
        }
    }
}

/// The whole run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub cells: Vec<Cell>,
    pub sysbench: Vec<sysbench::SysbenchRun>,
    /// The open-files limit (soft) the run had after raising it.
    pub nofile: u64,
}

pub async fn run(args: ClientsArgs) -> Result<Verdict, BenchError> {
    args.validate()?;
    let max_clients = *args.clients.last().expect("validated");
    let nofile = raise_open_files(max_clients + FD_MARGIN)?;
    let info = RunInfo::capture("clients");
    let bin = targets::shoal_release_bin_async(args.run.shoal_bin.clone()).await?;
    let work = std::env::temp_dir().join(format!("shoal-clients-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(BenchError::io(format!("create {}", work.display())))?;
    let outcome = measure(&args, &bin, &work, nofile).await;
    let _ = std::fs::remove_dir_all(&work);
    let outcome = match outcome {
        Err(_) if interrupt::interrupted() => return Err(BenchError::Interrupted),
        other => other?,
    };
    let wrong = outcome.cells.iter().any(|c| c.wrong > 0);
    report::build(&info, &args, &outcome).publish(&args.run.out, &info)?;
    Ok(if wrong { Verdict::Fail } else { Verdict::Pass })
}

async fn measure(
    args: &ClientsArgs,
    bin: &Path,
    work: &Path,
    nofile: u64,
) -> Result<Outcome, BenchError> {
    let sysbench_runs = if args.no_sysbench {
        0
    } else {
        (2 + args.sysbench_also.len()) * args.sysbench_threads.len() * args.sysbench_workloads.len()
    };
    let progress = Progress::new(
        "clients",
        (args.pools.len() * args.clients.len() + sysbench_runs) as u64,
    );
    progress.stage(format!("starting {SERVERS} MariaDB servers"));
    let mut databases: Vec<String> = (1..=DATANODES_PER_SERVER)
        .map(|d| format!("clients_{d}"))
        .collect();
    databases.push(sysbench::DB.into());
    let cluster = Cluster::start(ClusterSpec {
        primaries: SERVERS,
        databases,
        ..ClusterSpec::default()
    })
    .await?;
    let mut layout = Layout::from_cluster(&cluster, DATANODES_PER_SERVER, "clients");
    layout.schema = SCHEMA.into();
    layout.sharded = vec![ShardedTable {
        name: TABLE.into(),
        key: "id".into(),
    }];
    let mut admins = Vec::new();
    for p in 0..SERVERS {
        admins.push(
            Conn::new(cluster.admin_opts(p))
                .await
                .map_err(BenchError::sql("backend", "connect"))?,
        );
    }
    let mut cells = Vec::new();
    for (i, &pool) in args.pools.iter().enumerate() {
        layout.pool_max = pool;
        let max_clients = *args.clients.last().expect("validated");
        let shoal = RunningShoal::start_with(work, bin, &layout, &format!("pool{pool}"), |l| {
            with_max_connections(&layout.yaml(l), max_clients + 64)
        })?;
        wait_serving(&shoal.endpoint).await?;
        if i == 0 {
            progress.stage(format!("loading {} rows", args.rows));
            load(&shoal.endpoint, args.rows).await?;
        }
        cells.extend(pool_cells(args, pool, &shoal, &mut admins, &progress).await?);
    }
    let sysbench = if args.no_sysbench {
        Vec::new()
    } else {
        // sysbench runs as a child process for seconds: off the runtime's workers.
        tokio::task::block_in_place(|| sysbench::run(args, &cluster, bin, work, &progress))?
    };
    progress.finish();
    Ok(Outcome {
        cells,
        sysbench,
        nofile,
    })
}

/// Every client count of one pool size, ascending, the idle clients kept from one to the next.
async fn pool_cells(
    args: &ClientsArgs,
    pool: usize,
    shoal: &RunningShoal,
    admins: &mut [Conn],
    progress: &Progress,
) -> Result<Vec<Cell>, BenchError> {
    let ep = &shoal.endpoint;
    let pid = shoal.process.pid();
    let mut idle: Vec<Conn> = Vec::new();
    let mut cells = Vec::new();
    let result = async {
        for &clients in &args.clients {
            let active = args.active_of(clients);
            let want = clients - active;
            progress.stage(format!(
                "pool {pool}: {clients} clients: opening {} idle",
                want - idle.len() as u64
            ));
            let t = Instant::now();
            let opened = workload::open_idle(
                ep,
                idle.len() as u64,
                want - idle.len() as u64,
                args.rows,
                args.idle_statement,
                args.connect_concurrency,
            )
            .await?;
            let setup_secs = t.elapsed().as_secs_f64();
            let workload::Opened {
                conns,
                failed,
                first_error,
                wrong,
                first_wrong,
            } = opened;
            idle.extend(conns);
            // Idle CPU: every client open, none running anything.
            let idle_window = Duration::from_secs(2);
            let cpu0 = targets::cpu_seconds(pid)?;
            tokio::time::sleep(idle_window).await;
            let idle_cpu = targets::cpu_seconds(pid)? - cpu0;

            progress.stage(format!("pool {pool}: {clients} clients: {active} active"));
            let cpu0 = targets::cpu_seconds(pid)?;
            let window = Window {
                active: active as usize,
                duration: Duration::from_secs(u64::from(args.duration)),
                scatter_every: args.scatter_every,
                rows: args.rows,
                login_interval: Duration::from_millis(args.login_interval_ms),
                idle_rate: args.idle_rate,
                idle_statement: args.idle_statement,
            };
            let end = workload::run_window(ep, window, std::mem::take(&mut idle)).await?;
            idle = end.idle;
            let m = end.measured;
            let cpu = targets::cpu_seconds(pid)? - cpu0;
            let rss = crate::memory::status_kib(pid, "VmRSS:").unwrap_or(0);
            let backend_conns = backend_connections(admins).await?;
            let pools = show_pools(ep).await?;
            // The active clients stay open through it, holding what they last held.
            progress.stage(format!(
                "pool {pool}: {clients} clients: new sessions alone"
            ));
            let alone = workload::run_window(
                ep,
                Window {
                    active: 0,
                    duration: quiet_duration(args.duration),
                    idle_rate: 0.0,
                    ..window
                },
                std::mem::take(&mut idle),
            )
            .await?;
            idle = alone.idle;
            let quiet = alone.measured;
            workload::close_all(end.active).await;
            let cell = Cell {
                setup_secs,
                setup_failed: failed,
                shoal_idle_cpu_pct: idle_cpu * 100.0 / idle_window.as_secs_f64(),
                shoal_cpu_us_per_statement: cpu * 1e6 / m.all_statements().max(1) as f64,
                shoal_rss_kib: rss,
                backend_conns,
                pools,
                ..cell_of(pool, clients, active, idle.len() as u64, m, quiet)
            };
            let cell = Cell {
                first_error: cell.first_error.or(first_error),
                wrong: cell.wrong + wrong,
                first_wrong: cell.first_wrong.or(first_wrong),
                ..cell
            };
            progress.println(report::line(&cell));
            progress.inc(1);
            cells.push(cell);
        }
        Ok::<_, BenchError>(())
    }
    .await;
    workload::close_all(idle).await;
    result?;
    Ok(cells)
}

/// How long the probe runs alone after a cell's window: half the window, at least a second.
fn quiet_duration(window_secs: u32) -> Duration {
    Duration::from_millis((u64::from(window_secs) * 500).max(1000))
}

/// A cell's figures from what its clients measured, under load (`m`) and the probe alone
/// (`quiet`); the process figures are added after.
fn cell_of(
    pool: usize,
    clients: u64,
    active: u64,
    idle: u64,
    m: Measured,
    quiet: Measured,
) -> Cell {
    let statements = m.statements();
    let alone = NewSessions::of(&quiet);
    Cell {
        pool,
        clients,
        active,
        idle,
        setup_secs: 0.0,
        setup_failed: 0,
        secs: m.secs,
        statements,
        qps: statements as f64 / m.secs.max(1e-9),
        points: m.point_us.len() as u64,
        point_p50_ms: percentile_ms(&m.point_us, 0.5),
        point_p99_ms: percentile_ms(&m.point_us, 0.99),
        scatters: m.scatter_us.len() as u64,
        scatter_p50_ms: percentile_ms(&m.scatter_us, 0.5),
        scatter_p99_ms: percentile_ms(&m.scatter_us, 0.99),
        wakes: m.wake_us.len() as u64,
        wake_p50_ms: percentile_ms(&m.wake_us, 0.5),
        wake_p99_ms: percentile_ms(&m.wake_us, 0.99),
        loaded: NewSessions::of(&m),
        quiet: alone,
        errors: m.errors + quiet.errors,
        login_errors: m.login_errors + quiet.login_errors,
        first_error: m.first_error.or(quiet.first_error),
        wrong: m.wrong + quiet.wrong,
        first_wrong: m.first_wrong.or(quiet.first_wrong),
        shoal_cpu_us_per_statement: 0.0,
        shoal_idle_cpu_pct: 0.0,
        shoal_rss_kib: 0,
        backend_conns: Vec::new(),
        pools: Vec::new(),
    }
}

/// `yaml` with `server.max_connections` set: Shoal's default (1024) would refuse the 1,025th
/// client with 1040.
fn with_max_connections(yaml: &str, max: u64) -> String {
    let out = yaml.replacen(
        "log_level: warn }",
        &format!("log_level: warn, max_connections: {max} }}"),
        1,
    );
    assert_ne!(out, yaml, "the generated server line changed: {yaml}");
    out
}

/// Raises this process's soft limit of open files to at least `needed` (its children, Shoal and
/// MariaDB, inherit it), up to the hard limit; fails naming both when the hard limit is lower.
/// Returns the soft limit now in force.
fn raise_open_files(needed: u64) -> Result<u64, BenchError> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(BenchError::Tool(format!(
            "getrlimit(RLIMIT_NOFILE): {}",
            std::io::Error::last_os_error()
        )));
    }
    // rlim_t is u64 on Linux.
    let (soft, hard): (u64, u64) = (lim.rlim_cur, lim.rlim_max);
    if soft >= needed {
        return Ok(soft);
    }
    if hard < needed {
        return Err(BenchError::Tool(format!(
            "{needed} open files are needed (the clients and a margin), but the hard limit is \
             {hard}: raise it (`ulimit -Hn {needed}` as root, or `nofile` in \
             /etc/security/limits.conf) or run fewer --clients"
        )));
    }
    lim.rlim_cur = needed;
    // SAFETY: setrlimit reads the struct we pass; a soft limit up to the hard one is allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(BenchError::Tool(format!(
            "setrlimit(RLIMIT_NOFILE, {needed}): {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(needed)
}

/// Waits until Shoal answers (it listens once its config is loaded).
async fn wait_serving(ep: &Endpoint) -> Result<(), BenchError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match ep.connect().await {
            Ok(c) => {
                let _ = c.disconnect().await;
                return Ok(());
            }
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The table, `rows` rows through Shoal (`k` derived from `id`, see [`workload::k_of`]).
async fn load(ep: &Endpoint, rows: u64) -> Result<(), BenchError> {
    let mut statements = vec![
        format!("DROP TABLE IF EXISTS {TABLE}"),
        format!(
            "CREATE TABLE {TABLE} (id BIGINT PRIMARY KEY, k INT NOT NULL, pad CHAR(60) NOT NULL)"
        ),
    ];
    let ids: Vec<u64> = (1..=rows).collect();
    for chunk in ids.chunks(500) {
        let values: Vec<String> = chunk
            .iter()
            .map(|&id| format!("({id}, {}, 'pad-{id}')", workload::k_of(id)))
            .collect();
        statements.push(format!(
            "INSERT INTO {TABLE} (id, k, pad) VALUES {}",
            values.join(",")
        ));
    }
    ep.execute(&statements).await
}

/// `Threads_connected` of each server less our own connection: Shoal's pooled connections and
/// its health checks.
async fn backend_connections(admins: &mut [Conn]) -> Result<Vec<u64>, BenchError> {
    let mut out = Vec::new();
    for c in admins {
        let row: Option<(String, u64)> = c
            .query_first("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
            .await
            .map_err(BenchError::sql("backend", "SHOW GLOBAL STATUS"))?;
        out.push(row.map_or(0, |r| r.1.saturating_sub(1)));
    }
    Ok(out)
}

/// `SHOW SHOAL POOLS`, every column as text (whatever columns this Shoal has).
async fn show_pools(ep: &Endpoint) -> Result<Vec<Vec<(String, String)>>, BenchError> {
    let mut c = ep.connect().await?;
    let rows: Vec<Row> = c
        .query("SHOW SHOAL POOLS")
        .await
        .map_err(BenchError::sql(ep.label(), "SHOW SHOAL POOLS"))?;
    let _ = c.disconnect().await;
    Ok(rows
        .iter()
        .map(|r| {
            r.columns_ref()
                .iter()
                .enumerate()
                .map(|(i, col)| {
                    let v = match r.as_ref(i) {
                        Some(mysql_async::Value::NULL) | None => "NULL".to_string(),
                        Some(mysql_async::Value::Bytes(b)) => String::from_utf8_lossy(b).into(),
                        Some(v) => v.as_sql(true),
                    };
                    (col.name_str().into_owned(), v)
                })
                .collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ClientsArgs,
    }

    fn parse(extra: &[&str]) -> Result<ClientsArgs, clap::Error> {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("clients").chain(extra.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn another_shoal_for_sysbench_is_a_name_a_binary_and_arguments() {
        let a = parse(&[
            "--sysbench-also",
            "before=/tmp/shoal-before",
            "--sysbench-also",
            "normal=/tmp/shoal,--sched,normal",
        ])
        .unwrap();
        assert_eq!(
            a.sysbench_also,
            vec![
                sysbench::Variant {
                    name: "before".into(),
                    bin: "/tmp/shoal-before".into(),
                    args: vec![],
                },
                sysbench::Variant {
                    name: "normal".into(),
                    bin: "/tmp/shoal".into(),
                    args: vec!["--sched".into(), "normal".into()],
                },
            ]
        );
        for bad in ["shoal=/tmp/x", "direct=/tmp/x", "x", "=/tmp/x", "x="] {
            assert!(parse(&["--sysbench-also", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn defaults_are_the_issues_experiment() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.clients, vec![8, 100, 1000, 5000]);
        assert_eq!(a.pools, vec![16, 64]);
        assert_eq!(a.sysbench_threads, vec![256, 512]);
        assert_eq!(a.sysbench_pool, 64);
        assert_eq!(a.idle_statement, IdleStatement::Point);
        a.validate().unwrap();
        assert_eq!(a.active_of(8), 8);
        assert_eq!(a.active_of(3), 3);
    }

    #[test]
    fn client_counts_must_ascend_and_sizes_be_positive() {
        for bad in [
            &["--clients", "100,8"][..],
            &["--clients", "0,8"],
            &["--pools", "0"],
            &["--active", "0"],
            &["--sysbench-threads", ""],
        ] {
            let a = parse(bad);
            assert!(a.is_err() || a.unwrap().validate().is_err(), "{bad:?}");
        }
        let a = parse(&["--sysbench-threads", "", "--no-sysbench"]);
        assert!(a.is_err() || a.unwrap().validate().is_ok());
    }

    #[test]
    fn the_config_serves_every_client() {
        let layout = Layout {
            schema: SCHEMA.into(),
            user: "u".into(),
            password: "p".into(),
            datahosts: vec![crate::shoal_config::Datahost {
                primary: "127.0.0.1:3306".into(),
                replicas: vec![],
            }],
            datanodes: vec![crate::shoal_config::Datanode {
                name: "dn1".into(),
                datahost: 0,
                database: "clients_1".into(),
            }],
            sharded: vec![],
            global: vec![],
            pool_max: 16,
        };
        let yaml = with_max_connections(&layout.yaml("127.0.0.1:1"), 5064);
        assert!(
            yaml.contains("log_level: warn, max_connections: 5064 }"),
            "{yaml}"
        );
        // Shoal's own parser reads it as the server's limit.
        let cfg = shoal_router::config::Config::from_yaml_str(&yaml).unwrap();
        assert_eq!(cfg.server.max_connections, 5064);
    }

    #[test]
    fn the_open_files_limit_is_at_least_what_is_needed() {
        let now = raise_open_files(64).unwrap();
        assert!(now >= 64);
    }
}
