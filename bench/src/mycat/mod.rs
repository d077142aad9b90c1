//! `shoal-bench mycat`: the sharded-vs-single experiment of the Mycat 1.5 report
//! (`../shared/seeds/003_*.txt`, summarised in `../shared/EXPERIMENTS.md` section 1), through
//! Shoal, each plan on its own local cluster:
//!
//! - plan 1: one instance, one database; Shoal serves it unsharded, and the same load also runs
//!   straight at MariaDB as the reference;
//! - plan 2: one primary + one replica, 7 datanodes (databases) on the primary;
//! - plan 3: three primaries + three replicas, 7 datanodes each, 21 shards.
//!
//! The report's 15-column table without key or index, sharded by `FACTID` with `mod`. Inserts in
//! rounds at each concurrency (QPS per round), then point selects by FACTID without and with an
//! index (created through Shoal, a DDL broadcast), then every row's placement checked on the
//! datanodes directly against shoal_router's rule.

pub mod report;
pub mod seed;

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use crate::Verdict;
use crate::cluster::{Cluster, ClusterSpec};
use crate::error::BenchError;
use crate::load::{self, Endpoint, InsertSpec, QueryKind, QuerySpec, QueryStat, RoundStat, table};
use crate::overhead::targets;
use crate::placement::{self, PlacementReport};
use crate::progress::Progress;
use crate::results::{RunArgs, RunInfo};
use crate::shoal_config::{self, Layout, RunningShoal, ShardedTable};

pub const SCHEMA: &str = "TESTDB";

#[derive(Debug, Clone, Args)]
pub struct MycatArgs {
    /// Rows inserted per run (the report: 100,000,000). The default keeps the whole run near
    /// 10 minutes on a 2-core machine.
    #[arg(long, default_value_t = 100_000)]
    pub rows: u64,
    /// Equal insert rounds; QPS is reported after each.
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
    /// Client connections for the inserts; each gets a fresh table.
    #[arg(long, value_delimiter = ',', default_value = "100,300")]
    pub concurrency: Vec<usize>,
    /// Rows per INSERT (1: single-row INSERTs, as the report).
    #[arg(long, default_value_t = 1)]
    pub batch: u64,
    /// Plans to run (1, 2, 3).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    pub plans: Vec<u8>,
    /// Point selects by FACTID with the index (the report: 1000).
    #[arg(long, default_value_t = 1000)]
    pub selects: u64,
    /// Point selects by FACTID before the index exists (each scans a whole shard).
    #[arg(long, default_value_t = 200)]
    pub noindex_selects: u64,
    /// Client threads for the selects (the report: 10).
    #[arg(long, default_value_t = 10)]
    pub select_threads: usize,
    /// Skip plan 1's direct (no proxy) reference run.
    #[arg(long)]
    pub no_direct: bool,
    /// Shoal's backend connections per server (`pool.max`). Default: the highest concurrency
    /// (at least 64), so that no session waits for a backend connection. Sessions that keep
    /// sending statements keep their connection, so with a smaller pool the sessions beyond it
    /// wait until the busy ones finish (up to the 120 s acquire timeout, then error 1040).
    #[arg(long)]
    pub pool_max: Option<usize>,
    #[command(flatten)]
    pub run: RunArgs,
}

impl MycatArgs {
    pub fn effective_pool_max(&self) -> usize {
        self.pool_max.unwrap_or_else(|| {
            let most = self.concurrency.iter().copied().max().unwrap_or(0);
            most.max(self.select_threads).max(64)
        })
    }
}

/// One plan's topology.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PlanShape {
    pub plan: u8,
    pub primaries: usize,
    pub replicas_per_primary: usize,
    pub databases_per_primary: usize,
}

impl PlanShape {
    pub fn of(plan: u8) -> Option<PlanShape> {
        let (primaries, replicas_per_primary, databases_per_primary) = match plan {
            1 => (1, 0, 1),
            2 => (1, 1, 7),
            3 => (3, 1, 7),
            _ => return None,
        };
        Some(PlanShape {
            plan,
            primaries,
            replicas_per_primary,
            databases_per_primary,
        })
    }

    pub fn datanodes(&self) -> usize {
        self.primaries * self.databases_per_primary
    }

    pub fn describe(&self) -> String {
        format!(
            "{} primar{}{}, {} datanode{}",
            self.primaries,
            if self.primaries == 1 { "y" } else { "ies" },
            if self.replicas_per_primary > 0 {
                format!(
                    " + {} replica{}",
                    self.primaries * self.replicas_per_primary,
                    if self.primaries * self.replicas_per_primary == 1 {
                        ""
                    } else {
                        "s"
                    }
                )
            } else {
                String::new()
            },
            self.datanodes(),
            if self.datanodes() == 1 { "" } else { "s" }
        )
    }
}

/// One insert run: a fresh table filled at one concurrency through one path.
#[derive(Debug, Clone, Serialize)]
pub struct InsertRun {
    pub plan: u8,
    /// `direct` (plan 1's reference) or `shoal`.
    pub path: String,
    pub concurrency: usize,
    pub batch: u64,
    pub rounds: Vec<RoundStat>,
    pub average_qps: f64,
    pub placement: PlacementReport,
}

#[derive(Debug, Clone, Serialize)]
pub struct SelectRun {
    pub plan: u8,
    pub path: String,
    pub rows: u64,
    pub index: bool,
    pub stat: QueryStat,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanRun {
    pub shape: PlanShape,
    pub inserts: Vec<InsertRun>,
    pub selects: Vec<SelectRun>,
    /// Datanodes (of the Shoal path) where the index created through Shoal was found.
    pub index_found_on: Vec<(String, bool)>,
    /// Why the plan did not run (Shoal refused its config), if it did not.
    pub not_run: Option<String>,
}

impl PlanRun {
    fn passed(&self) -> bool {
        self.inserts.iter().all(|r| r.placement.ok())
            && self.selects.iter().all(|s| s.stat.wrong == 0)
            && self.index_found_on.iter().all(|(_, found)| *found)
    }
}

pub async fn run(args: MycatArgs) -> Result<Verdict, BenchError> {
    validate(&args)?;
    let bin = targets::shoal_release_bin_async(args.run.shoal_bin.clone()).await?;
    let info = RunInfo::capture("mycat");
    let work = tempdir("mycat")?;
    let total: u64 = args.plans.iter().map(|&p| plan_steps(&args, p)).sum();
    let progress = Progress::new("mycat", total);
    let mut runs = Vec::new();
    for &plan in &args.plans {
        let run = run_plan(plan, &args, &bin, &work.0, &progress).await?;
        if let Some(why) = &run.not_run {
            progress.println(format!("plan {plan} NOT RUN: {why}"));
            progress.inc(plan_steps(&args, plan));
        }
        runs.push(run);
    }
    progress.finish();
    report::build(&info, &args, &runs).publish(&args.run.out, &info)?;
    Ok(if !runs.iter().all(PlanRun::passed) {
        Verdict::Fail
    } else if runs.iter().any(|r| r.not_run.is_some()) {
        Verdict::Incomplete
    } else {
        Verdict::Pass
    })
}

fn validate(args: &MycatArgs) -> Result<(), BenchError> {
    if let Some(p) = args.plans.iter().find(|&&p| PlanShape::of(p).is_none()) {
        return Err(BenchError::Tool(format!("unknown plan {p} (1, 2, 3)")));
    }
    if args.rows == 0 || args.rows > i32::MAX as u64 {
        return Err(BenchError::Tool(
            "--rows must be 1..=2147483647 (FACTID is an int(10))".into(),
        ));
    }
    if args.rounds == 0 || args.concurrency.is_empty() || args.concurrency.contains(&0) {
        return Err(BenchError::Tool(
            "--rounds and every --concurrency must be at least 1".into(),
        ));
    }
    if args.batch == 0 || args.select_threads == 0 {
        return Err(BenchError::Tool(
            "--batch and --select-threads must be at least 1".into(),
        ));
    }
    Ok(())
}

fn paths(args: &MycatArgs, plan: u8) -> u64 {
    if plan == 1 && !args.no_direct { 2 } else { 1 }
}

fn plan_steps(args: &MycatArgs, plan: u8) -> u64 {
    paths(args, plan)
        * (args.rows * args.concurrency.len() as u64 + args.selects + args.noindex_selects)
}

/// A temp dir for configs and logs, removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir(what: &str) -> Result<TempDir, BenchError> {
    let dir = std::env::temp_dir().join(format!(
        "shoal-{what}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).map_err(BenchError::io(format!("create {}", dir.display())))?;
    Ok(TempDir(dir))
}

async fn run_plan(
    plan: u8,
    args: &MycatArgs,
    bin: &std::path::Path,
    work: &std::path::Path,
    progress: &Progress,
) -> Result<PlanRun, BenchError> {
    let shape = PlanShape::of(plan).expect("validated");
    progress.stage(format!("plan {plan}: starting {}", shape.describe()));
    let cluster = Cluster::start(ClusterSpec {
        primaries: shape.primaries,
        replicas_per_primary: shape.replicas_per_primary,
        databases: (1..=shape.databases_per_primary)
            .map(|d| format!("testdb_{d}"))
            .collect(),
        ..ClusterSpec::default()
    })
    .await?;
    let mut layout = Layout::from_cluster(&cluster, shape.databases_per_primary, "testdb");
    layout.schema = SCHEMA.into();
    layout.pool_max = args.effective_pool_max();
    if plan != 1 {
        // Plan 1 is the report's unsharded reference: one datanode, the table not listed.
        layout.sharded = vec![ShardedTable {
            name: table::TABLE.into(),
            key: table::KEY.into(),
        }];
    }
    let mut run = PlanRun {
        shape,
        inserts: Vec::new(),
        selects: Vec::new(),
        index_found_on: Vec::new(),
        not_run: None,
    };
    let mut shoal = match RunningShoal::start(work, bin, &layout, &format!("plan{plan}")) {
        Ok(s) => s,
        Err(e @ BenchError::ExitedAtStart { .. }) => {
            run.not_run = e.refusal_summary();
            return Ok(run);
        }
        Err(e) => return Err(e),
    };
    shoal.endpoint.name = format!("shoal (plan {plan})");
    let mut endpoints: Vec<(&str, Endpoint)> = Vec::new();
    if plan == 1 && !args.no_direct {
        endpoints.push((
            "direct",
            shoal_config::direct_endpoint(&cluster, 0, "testdb_1", "mariadb direct (plan 1)"),
        ));
    }
    endpoints.push(("shoal", shoal.endpoint.clone()));

    for (path, ep) in &endpoints {
        for &c in &args.concurrency {
            progress.stage(format!("plan {plan} {path}: inserts at {c} connections"));
            ep.execute(&[table::drop_table_sql(), table::create_table_sql()])
                .await?;
            let rounds = load::insert_rounds(
                ep,
                &InsertSpec {
                    first_id: 1,
                    rows: args.rows,
                    rounds: args.rounds,
                    concurrency: c,
                    batch: args.batch,
                },
                progress,
            )
            .await?;
            shoal.process.check_alive()?;
            cluster.sync_replicas().await?;
            progress.stage(format!("plan {plan} {path}: checking row placement"));
            let placement =
                placement::check(&shoal.topology, SCHEMA, table::TABLE, table::KEY, args.rows)
                    .await?;
            let average_qps = rounds.iter().map(|r| r.qps).sum::<f64>() / rounds.len() as f64;
            progress.println(format!(
                "plan {plan} {path} c={c}: {} rows, QPS per round [{}], placement {}",
                args.rows,
                rounds
                    .iter()
                    .map(|r| format!("{:.0}", r.qps))
                    .collect::<Vec<_>>()
                    .join(", "),
                placement.summary()
            ));
            run.inserts.push(InsertRun {
                plan,
                path: path.to_string(),
                concurrency: c,
                batch: args.batch,
                rounds,
                average_qps,
                placement,
            });
        }
        for index in [false, true] {
            if index {
                progress.stage(format!("plan {plan} {path}: CREATE INDEX"));
                ep.execute(&[table::create_index_sql()]).await?;
                cluster.sync_replicas().await?;
                if *path == "shoal" {
                    run.index_found_on = placement::index_present(
                        &shoal.topology,
                        SCHEMA,
                        table::TABLE,
                        table::INDEX,
                    )
                    .await?;
                }
            }
            let queries = if index {
                args.selects
            } else {
                args.noindex_selects
            };
            progress.stage(format!(
                "plan {plan} {path}: {queries} selects by FACTID {} index",
                if index { "with" } else { "without" }
            ));
            let stat = load::run_queries(
                ep,
                &QuerySpec {
                    kind: QueryKind::PointSelect,
                    rows: args.rows,
                    queries,
                    threads: args.select_threads,
                },
                progress,
            )
            .await?;
            progress.println(format!(
                "plan {plan} {path} selects {} index: avg {:.2} ms, {:.1} QPS, wrong {}",
                if index { "with" } else { "without" },
                stat.avg_ms,
                stat.qps,
                stat.wrong
            ));
            run.selects.push(SelectRun {
                plan,
                path: path.to_string(),
                rows: args.rows,
                index,
                stat,
            });
        }
    }
    shoal.process.check_alive()?;
    drop(shoal);
    drop(cluster);
    Ok(run)
}
