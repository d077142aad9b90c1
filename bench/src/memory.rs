//! `shoal-bench memory`: Shoal's peak resident memory while it merges large scattered results.
//! A local cluster (2 MariaDB instances, 4 datanodes), Shoal with a table sharded `mod` over the
//! four, N rows loaded into the datanodes; then (a) `SELECT ... ORDER BY` over every row, read by a
//! deliberately slow client (the merge must wait for it, not buffer), and (b) a `GROUP BY` with
//! one group per `--groups` (sorted group streams). Peak RSS is Shoal's `VmHWM`, reset before
//! each case through `/proc/PID/clear_refs`; every answer is checked (row count, order, sums).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use mysql_async::prelude::Queryable;

use crate::Verdict;
use crate::cluster::{Cluster, ClusterSpec};
use crate::error::BenchError;
use crate::load::join_loads;
use crate::overhead::targets;
use crate::progress::Progress;
use crate::results::ResultsDir;
use crate::shoal_config::{Layout, RunningShoal, ShardedTable};

const SCHEMA: &str = "memdb";
const TABLE: &str = "mem_t";

#[derive(Debug, Clone, Args)]
pub struct MemoryArgs {
    /// Rows loaded (straight into the 4 datanodes, placed as Shoal's rule places them).
    #[arg(long, default_value_t = 2_000_000)]
    pub rows: u64,
    /// Groups of the GROUP BY case (`g = id % groups`).
    #[arg(long, default_value_t = 1_000_000)]
    pub groups: u64,
    /// The slow client sleeps this long every `--slow-every` rows of the ORDER BY case.
    #[arg(long, default_value_t = 2)]
    pub slow_ms: u64,
    #[arg(long, default_value_t = 500)]
    pub slow_every: u64,
    /// The shoal binary (default: `target/release/shoal`, built first).
    #[arg(long)]
    pub shoal_bin: Option<PathBuf>,
    /// Results go to `<out>/memory-<UTC timestamp>/`.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
}

/// One measured case.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Case {
    pub name: String,
    pub sql: String,
    pub rows_read: u64,
    pub seconds: f64,
    /// Shoal's peak resident set during the case (VmHWM after a reset), KiB.
    pub peak_rss_kib: u64,
    pub goal_kib: u64,
    /// Why the answer is wrong, if it is.
    pub wrong: Option<String>,
}

impl Case {
    fn ok(&self) -> bool {
        self.wrong.is_none() && self.peak_rss_kib <= self.goal_kib
    }
}

pub(crate) fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Resets the process's peak RSS (Linux: writing 5 to clear_refs), so VmHWM covers one case.
pub(crate) fn reset_peak(pid: u32) -> Result<(), BenchError> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .map_err(BenchError::io(format!("reset peak RSS of pid {pid}")))
}

pub async fn run(args: MemoryArgs) -> Result<Verdict, BenchError> {
    if args.rows == 0 || args.groups == 0 || args.slow_every == 0 {
        return Err(BenchError::Tool(
            "--rows, --groups and --slow-every must be at least 1".into(),
        ));
    }
    let command_line = std::env::args().collect::<Vec<_>>().join(" ");
    let bin = targets::shoal_release_bin_async(args.shoal_bin.clone()).await?;
    let work = std::env::temp_dir().join(format!("shoal-memory-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(BenchError::io(format!("create {}", work.display())))?;
    let progress = Progress::new("memory", args.rows * 2 + args.groups);
    progress.stage("starting 2 MariaDB primaries with 2 databases each");
    let cluster = Cluster::start(ClusterSpec {
        primaries: 2,
        databases: vec!["mem_1".into(), "mem_2".into()],
        ..ClusterSpec::default()
    })
    .await?;
    let outcome = measure(&args, &cluster, &bin, &work, &progress).await;
    drop(cluster);
    let _ = std::fs::remove_dir_all(&work);
    let cases = outcome?;
    progress.finish();

    let mut md = format!(
        "# shoal-bench memory\n\n`{command_line}`\n\n{} rows on 4 datanodes (2 MariaDB \
         instances), {}\n\n| case | rows read | seconds | Shoal peak RSS | goal | answer |\n\
         |---|---:|---:|---:|---:|---|\n",
        args.rows,
        crate::results::machine_line()
    );
    for c in &cases {
        md.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} MiB | {} MiB | {} |\n",
            c.name,
            c.rows_read,
            c.seconds,
            c.peak_rss_kib as f64 / 1024.0,
            c.goal_kib / 1024,
            c.wrong.as_deref().unwrap_or("exact")
        ));
    }
    let results = ResultsDir::create(&args.out, "memory")?;
    results.write("memory.md", &md)?;
    let json = serde_json::to_value(&cases).map_err(|e| BenchError::Tool(e.to_string()))?;
    results.write_json("memory.json", &json)?;
    println!("{md}");
    eprintln!("memory: results in {}", results.path().display());
    Ok(if cases.iter().all(Case::ok) {
        Verdict::Pass
    } else {
        Verdict::Fail
    })
}

async fn measure(
    args: &MemoryArgs,
    cluster: &Cluster,
    bin: &std::path::Path,
    work: &std::path::Path,
    progress: &Progress,
) -> Result<Vec<Case>, BenchError> {
    let mut layout = Layout::from_cluster(cluster, 2, "mem");
    layout.schema = SCHEMA.into();
    layout.sharded = vec![ShardedTable {
        name: TABLE.into(),
        key: "id".into(),
    }];
    progress.stage("starting Shoal");
    let shoal = RunningShoal::start(work, bin, &layout, "memory")?;
    let pid = shoal.process.pid();
    let ep = shoal.endpoint.clone();
    // DDL on a sharded table runs on every datanode.
    ep.execute(&[format!(
        "CREATE TABLE {TABLE} (id BIGINT NOT NULL PRIMARY KEY, g BIGINT NOT NULL, \
         pad VARCHAR(64) NOT NULL, KEY (g)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    )])
    .await?;

    // Rows go straight to their datanodes (the `mod` rule: datanode id % 4, in config order):
    // loading is not what is measured, and a direct load is faster.
    progress.stage(format!("loading {} rows into the 4 datanodes", args.rows));
    let mut tasks = Vec::new();
    for (i, d) in layout.datanodes.iter().enumerate() {
        let ep = crate::shoal_config::direct_endpoint(cluster, d.datahost, &d.database, &d.name);
        let (rows, groups, progress) = (args.rows, args.groups, progress.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = ep.connect().await?;
            let ids: Vec<u64> = (1..=rows).filter(|id| id % 4 == i as u64).collect();
            for chunk in ids.chunks(5_000) {
                let mut sql = format!("INSERT INTO {TABLE} (id, g, pad) VALUES ");
                for (j, id) in chunk.iter().enumerate() {
                    if j > 0 {
                        sql.push_str(", ");
                    }
                    sql.push_str(&format!(
                        "({id}, {}, 'row {id:010} of the memory test')",
                        id % groups
                    ));
                }
                conn.query_drop(&sql)
                    .await
                    .map_err(BenchError::sql(ep.label(), "INSERT"))?;
                progress.inc(chunk.len() as u64);
            }
            let _ = conn.disconnect().await;
            Ok::<_, BenchError>(())
        }));
    }
    join_loads(tasks).await?;
    let mut cases = Vec::new();

    // (a) ORDER BY over every row, read slowly.
    let sql = format!("SELECT id, g, pad FROM {TABLE} ORDER BY id");
    progress.stage(format!("ORDER BY over {} rows, slow client", args.rows));
    let mut conn = ep.connect().await?;
    reset_peak(pid)?;
    let start = Instant::now();
    let mut wrong = None;
    let mut n = 0u64;
    {
        let mut result = conn
            .query_iter(sql.as_str())
            .await
            .map_err(BenchError::sql(ep.label(), "ORDER BY"))?;
        while let Some(row) = result
            .next()
            .await
            .map_err(BenchError::sql(ep.label(), "ORDER BY row"))?
        {
            let (id, _, _): (u64, u64, String) = mysql_async::from_row(row);
            n += 1;
            if wrong.is_none() && id != n {
                wrong = Some(format!("row {n} has id {id}"));
            }
            if n.is_multiple_of(args.slow_every) {
                tokio::time::sleep(Duration::from_millis(args.slow_ms)).await;
                progress.inc(args.slow_every);
            }
        }
    }
    if wrong.is_none() && n != args.rows {
        wrong = Some(format!("{n} rows, expected {}", args.rows));
    }
    cases.push(Case {
        name: "ORDER BY, slow client".into(),
        sql: sql.clone(),
        rows_read: n,
        seconds: start.elapsed().as_secs_f64(),
        peak_rss_kib: status_kib(pid, "VmHWM:").unwrap_or(0),
        goal_kib: 64 * 1024,
        wrong,
    });

    // (b) GROUP BY with one group per g.
    let groups = args.groups.min(args.rows);
    let sql = format!("SELECT g, COUNT(*), SUM(id) FROM {TABLE} GROUP BY g");
    progress.stage(format!("GROUP BY with {groups} groups"));
    reset_peak(pid)?;
    let start = Instant::now();
    let mut wrong = None;
    let (mut n, mut total) = (0u64, 0u64);
    {
        let mut result = conn
            .query_iter(sql.as_str())
            .await
            .map_err(BenchError::sql(ep.label(), "GROUP BY"))?;
        while let Some(row) = result
            .next()
            .await
            .map_err(BenchError::sql(ep.label(), "GROUP BY row"))?
        {
            let (g, count, _): (u64, u64, String) = mysql_async::from_row(row);
            if wrong.is_none() && g != n {
                wrong = Some(format!("group {n} is g = {g}"));
            }
            n += 1;
            total += count;
            if n.is_multiple_of(10_000) {
                progress.inc(10_000);
            }
        }
    }
    if wrong.is_none() && (n != groups || total != args.rows) {
        wrong = Some(format!(
            "{n} groups of {total} rows, expected {groups} of {}",
            args.rows
        ));
    }
    cases.push(Case {
        name: format!("GROUP BY, {groups} groups"),
        sql,
        rows_read: n,
        seconds: start.elapsed().as_secs_f64(),
        peak_rss_kib: status_kib(pid, "VmHWM:").unwrap_or(0),
        goal_kib: 256 * 1024,
        wrong,
    });
    let _ = conn.disconnect().await;
    drop(shoal);
    Ok(cases)
}
