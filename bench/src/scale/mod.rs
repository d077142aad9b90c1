//! `shoal-bench scale`: one set of MariaDB instances, the Mycat table sharded with `mod` over a
//! growing number of datanodes (1, 2, 4, 8, 16, 21 by default). At each count, through Shoal:
//! inserts, single-shard point selects and a scatter aggregate, each with its QPS and the CPU
//! time Shoal's process spent per statement (from /proc, as `overhead` measures it). Single-shard
//! statements should cost Shoal the same at any count; a scatter's cost grows with the count.

pub mod report;

use clap::Args;
use serde::Serialize;

use crate::Verdict;
use crate::cluster::{Cluster, ClusterSpec};
use crate::error::BenchError;
use crate::load::{self, InsertSpec, QueryKind, QuerySpec, table};
use crate::overhead::targets;
use crate::placement::{self, PlacementReport};
use crate::progress::Progress;
use crate::results::{RunArgs, RunInfo};
use crate::shoal_config::{Layout, RunningShoal, ShardedTable};

pub const SCHEMA: &str = "SCALEDB";

#[derive(Debug, Clone, Args)]
pub struct ScaleArgs {
    /// Datanode counts to sweep, ascending.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,21")]
    pub datanodes: Vec<usize>,
    /// MariaDB primaries; datanode i lives on primary i mod this.
    #[arg(long, default_value_t = 1)]
    pub primaries: usize,
    /// Rows inserted at each count.
    #[arg(long, default_value_t = 20_000)]
    pub rows: u64,
    /// Rows per INSERT.
    #[arg(long, default_value_t = 1)]
    pub batch: u64,
    /// Client connections for every phase.
    #[arg(long, default_value_t = 16)]
    pub threads: usize,
    /// Sweeps, alternately ascending and descending (so that a drifting machine load favours
    /// no count); per count and phase the medians are reported.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Point selects by FACTID (indexed; one shard each), as text and again as a prepared
    /// statement.
    #[arg(long, default_value_t = 20_000)]
    pub point_selects: u64,
    /// `SELECT COUNT(*), SUM(SALENUM)` over the whole table (every shard each).
    #[arg(long, default_value_t = 500)]
    pub aggregates: u64,
    /// Shoal's backend connections per server (`pool.max`). Default: Shoal's own (64). A bigger
    /// pool lets every session keep a connection per datanode (threads x datanodes per primary);
    /// measured here, hundreds of backend connections on one server cost more per statement
    /// than sessions giving connections back once the pool is full.
    #[arg(long)]
    pub pool_max: Option<usize>,
    #[command(flatten)]
    pub run: RunArgs,
}

/// One phase at one datanode count.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// `insert`, `point_select`, `point_select_prepared`, `aggregate`.
    pub workload: String,
    pub statements: u64,
    pub secs: f64,
    pub qps: f64,
    pub avg_ms: Option<f64>,
    pub shoal_cpu_us_per_statement: f64,
    pub wrong: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub datanodes: usize,
    pub phases: Vec<Phase>,
    pub placement: Option<PlacementReport>,
    pub not_run: Option<String>,
    /// With several sweeps: the point-select CPU per statement of each, in sweep order (text,
    /// then prepared).
    pub rounds: Vec<(f64, f64)>,
}

pub async fn run(args: ScaleArgs) -> Result<Verdict, BenchError> {
    if args.datanodes.is_empty() || args.datanodes.contains(&0) || args.primaries == 0 {
        return Err(BenchError::Tool(
            "--datanodes needs counts of at least 1, --primaries at least 1".into(),
        ));
    }
    if args.rows == 0
        || args.rows > i32::MAX as u64
        || args.threads == 0
        || args.batch == 0
        || args.rounds == 0
    {
        return Err(BenchError::Tool(
            "--rows must be 1..=2147483647; --threads, --batch and --rounds at least 1".into(),
        ));
    }
    let bin = targets::shoal_release_bin_async(args.run.shoal_bin.clone()).await?;
    let info = RunInfo::capture("scale");
    let work = std::env::temp_dir().join(format!("shoal-scale-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(BenchError::io(format!("create {}", work.display())))?;
    let per_step = args.rows + 2 * args.point_selects + args.aggregates;
    let progress = Progress::new(
        "scale",
        per_step * (args.datanodes.len() * args.rounds) as u64,
    );

    let max = *args.datanodes.iter().max().expect("not empty");
    let per_primary = max.div_ceil(args.primaries);
    progress.stage(format!(
        "starting {} MariaDB primar{} with {per_primary} database(s) each",
        args.primaries,
        if args.primaries == 1 { "y" } else { "ies" }
    ));
    let cluster = Cluster::start(ClusterSpec {
        primaries: args.primaries,
        databases: (1..=per_primary).map(|d| format!("scale_{d}")).collect(),
        ..ClusterSpec::default()
    })
    .await?;
    let full = Layout::from_cluster(&cluster, per_primary, "scale");
    let mut sweeps: Vec<Vec<Step>> = Vec::new();
    let outcome = async {
        for round in 0..args.rounds {
            let mut order = args.datanodes.clone();
            if round % 2 == 1 {
                order.reverse();
            }
            let mut steps = Vec::new();
            for n in order {
                let step = run_step(&args, &full, n, &bin, &work, &progress).await?;
                if let Some(why) = &step.not_run {
                    progress.println(format!("{n} datanodes NOT RUN: {why}"));
                    progress.inc(per_step);
                }
                steps.push(step);
            }
            steps.sort_by_key(|s| s.datanodes);
            sweeps.push(steps);
        }
        Ok::<_, BenchError>(())
    }
    .await;
    drop(cluster);
    let _ = std::fs::remove_dir_all(&work);
    outcome?;
    progress.finish();
    let steps = report::medians(&sweeps);
    report::build(&info, &args, &steps).publish(&args.run.out, &info)?;
    // Wrong answers and misplaced rows fail the run. The CPU-ratio goal is reported, not turned
    // into the exit status: on a small or busy run it is clock-tick noise (10 ms per tick).
    let failed = steps.iter().any(|s| {
        s.phases.iter().any(|p| p.wrong > 0) || s.placement.as_ref().is_some_and(|p| !p.ok())
    });
    Ok(if failed {
        Verdict::Fail
    } else if steps.iter().any(|s| s.not_run.is_some()) {
        Verdict::Incomplete
    } else {
        Verdict::Pass
    })
}

/// The layout's datanodes spread round-robin over the primaries: datanode i on primary i mod P.
fn first_datanodes(full: &Layout, n: usize, primaries: usize) -> Layout {
    let per_primary = full.datanodes.len() / primaries;
    let mut layout = full.clone();
    layout.datanodes = (0..n)
        .map(|i| {
            let mut d = full.datanodes[(i % primaries) * per_primary + i / primaries].clone();
            d.name = format!("dn{}", i + 1);
            d
        })
        .collect();
    layout
}

async fn run_step(
    args: &ScaleArgs,
    full: &Layout,
    n: usize,
    bin: &std::path::Path,
    work: &std::path::Path,
    progress: &Progress,
) -> Result<Step, BenchError> {
    let mut layout = first_datanodes(full, n, args.primaries);
    layout.schema = SCHEMA.into();
    layout.pool_max = args.pool_max.unwrap_or(layout.pool_max);
    layout.sharded = vec![ShardedTable {
        name: table::TABLE.into(),
        key: table::KEY.into(),
    }];
    let mut step = Step {
        datanodes: n,
        phases: Vec::new(),
        placement: None,
        not_run: None,
        rounds: Vec::new(),
    };
    progress.stage(format!("{n} datanodes: starting Shoal"));
    let mut shoal = match RunningShoal::start(work, bin, &layout, &format!("scale{n}")) {
        Ok(s) => s,
        Err(e @ BenchError::ExitedAtStart { .. }) => {
            step.not_run = e.refusal_summary();
            return Ok(step);
        }
        Err(e) => return Err(e),
    };
    shoal.endpoint.name = format!("shoal ({n} datanodes)");
    let ep = shoal.endpoint.clone();
    let pid = shoal.process.pid();
    ep.execute(&[
        table::drop_table_sql(),
        table::create_table_sql(),
        table::create_index_sql(),
    ])
    .await?;

    progress.stage(format!("{n} datanodes: inserts"));
    let cpu0 = targets::cpu_seconds(pid)?;
    let rounds = load::insert_rounds(
        &ep,
        &InsertSpec {
            first_id: 1,
            rows: args.rows,
            rounds: 1,
            concurrency: args.threads,
            batch: args.batch,
        },
        progress,
    )
    .await?;
    let cpu = targets::cpu_seconds(pid)? - cpu0;
    let r = &rounds[0];
    step.phases.push(Phase {
        workload: "insert".into(),
        statements: r.statements,
        secs: r.secs,
        qps: r.statements as f64 / r.secs.max(1e-9),
        avg_ms: None,
        shoal_cpu_us_per_statement: cpu * 1e6 / r.statements.max(1) as f64,
        wrong: 0,
    });
    progress.stage(format!("{n} datanodes: checking row placement"));
    step.placement =
        Some(placement::check(&shoal.topology, SCHEMA, table::TABLE, table::KEY, args.rows).await?);

    for (kind, queries) in [
        (QueryKind::PointSelect, args.point_selects),
        (QueryKind::PointSelectPrepared, args.point_selects),
        (QueryKind::Aggregate, args.aggregates),
    ] {
        let name = match kind {
            QueryKind::PointSelect => "point_select",
            QueryKind::PointSelectPrepared => "point_select_prepared",
            QueryKind::Aggregate => "aggregate",
        };
        progress.stage(format!("{n} datanodes: {queries} {name}"));
        let cpu0 = targets::cpu_seconds(pid)?;
        let stat = load::run_queries(
            &ep,
            &QuerySpec {
                kind,
                rows: args.rows,
                queries,
                threads: args.threads,
            },
            progress,
        )
        .await?;
        let cpu = targets::cpu_seconds(pid)? - cpu0;
        step.phases.push(Phase {
            workload: name.into(),
            statements: stat.queries,
            secs: stat.secs,
            qps: stat.qps,
            avg_ms: Some(stat.avg_ms),
            shoal_cpu_us_per_statement: cpu * 1e6 / stat.queries.max(1) as f64,
            wrong: stat.wrong,
        });
    }
    shoal.process.check_alive()?;
    progress.println(format!(
        "{n} datanodes: {}; placement {}",
        step.phases
            .iter()
            .map(|p| format!(
                "{} {:.0} QPS {:.1} us CPU/stmt",
                p.workload, p.qps, p.shoal_cpu_us_per_statement
            ))
            .collect::<Vec<_>>()
            .join(", "),
        step.placement
            .as_ref()
            .map_or(String::new(), |p| p.summary())
    ));
    Ok(step)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shoal_config::{Datahost, Datanode};

    #[test]
    fn datanodes_spread_round_robin_over_primaries() {
        let full = Layout {
            schema: String::new(),
            user: "u".into(),
            password: "p".into(),
            datahosts: vec![
                Datahost {
                    primary: "a:1".into(),
                    replicas: vec![],
                },
                Datahost {
                    primary: "b:1".into(),
                    replicas: vec![],
                },
            ],
            datanodes: (0..4)
                .map(|i| Datanode {
                    name: format!("dn{}", i + 1),
                    datahost: i / 2,
                    database: format!("scale_{}", i % 2 + 1),
                })
                .collect(),
            sharded: vec![],
            global: vec![],
            pool_max: 64,
        };
        let l = first_datanodes(&full, 3, 2);
        let got: Vec<(usize, &str)> = l
            .datanodes
            .iter()
            .map(|d| (d.datahost, d.database.as_str()))
            .collect();
        assert_eq!(got, vec![(0, "scale_1"), (1, "scale_1"), (0, "scale_2")]);
    }

    fn step(n: usize, cpu: f64, qps: f64, wrong: u64) -> Step {
        Step {
            datanodes: n,
            phases: vec![Phase {
                workload: "point_select".into(),
                statements: 100,
                secs: 1.0,
                qps,
                avg_ms: Some(2.0),
                shoal_cpu_us_per_statement: cpu,
                wrong,
            }],
            placement: None,
            not_run: None,
            rounds: Vec::new(),
        }
    }

    #[test]
    fn sweeps_merge_into_medians_per_count() {
        let sweeps = vec![
            vec![step(1, 50.0, 900.0, 0), step(21, 90.0, 500.0, 0)],
            vec![step(1, 40.0, 1000.0, 1), step(21, 55.0, 700.0, 0)],
            vec![step(1, 45.0, 800.0, 0), step(21, 50.0, 600.0, 0)],
        ];
        let merged = report::medians(&sweeps);
        assert_eq!(merged.len(), 2);
        let p = &merged[0].phases[0];
        assert_eq!((p.shoal_cpu_us_per_statement, p.qps), (45.0, 900.0));
        assert_eq!((p.statements, p.wrong), (300, 1));
        assert_eq!(merged[1].phases[0].shoal_cpu_us_per_statement, 55.0);
        let text: Vec<f64> = merged[1].rounds.iter().map(|r| r.0).collect();
        assert_eq!(text, vec![90.0, 55.0, 50.0]);
        // The 90 us outlier of one sweep does not decide the ratio: 55 / 45.
        let (lo, hi, r) = report::point_cpu_ratio(&merged, "point_select").unwrap();
        assert_eq!((lo, hi), (1, 21));
        assert!((r - 55.0 / 45.0).abs() < 1e-9);
        let mut failed = sweeps.clone();
        failed[2][1].not_run = Some("refused".into());
        assert_eq!(
            report::medians(&failed)[1].not_run.as_deref(),
            Some("refused")
        );
    }
}
