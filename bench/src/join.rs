//! `shoal-bench join`: joins across shards (issue 49). A local cluster (2 MariaDB instances, 4
//! datanodes); `fact` sharded by `user_id`, `dim` (`--rows`, 100k by default) sharded by its
//! `id` (so `fact.dim_id = dim.id` is not co-located) and `gdim`, the same rows as a global
//! table (co-located with everything: the baseline main already answers). Per query: its
//! latency (median and max of `--iterations` runs), the statements the datanodes ran per query
//! (`Questions`, `Com_select` and `Com_insert` deltas of both instances: the round trips),
//! Shoal's peak RSS (`VmHWM`, reset before each case), and whether the answer equals the same
//! statement's on one MariaDB holding every row (the oracle database). The last case runs the
//! join of `fact` with `ldim` (`--large-rows`, 1M rows of 200-byte pads, sharded by id) on a
//! second Shoal whose caps on gathered rows and bytes are raised (`--large-server-config`): the
//! copied side is some 200 MiB and Shoal's peak RSS must stay under `--rss-goal-mib`.
//!
//! A build that refuses a join reports the refusal (1235) for that case and exits with
//! "incomplete".

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};

use crate::Verdict;
use crate::cluster::status::StatusConns;
use crate::cluster::{Cluster, ClusterSpec};
use crate::error::BenchError;
use crate::load::{Endpoint, join_loads};
use crate::memory::{reset_peak, status_kib};
use crate::overhead::targets;
use crate::progress::Progress;
use crate::results::ResultsDir;
use crate::shoal_config::{Layout, RunningShoal, ShardedTable, direct_endpoint};

const SCHEMA: &str = "joindb";
const ORACLE_DB: &str = "join_oracle";
/// Datanodes: 2 databases on each of 2 instances.
const DATANODES: u64 = 4;

#[derive(Debug, Clone, Args)]
pub struct JoinArgs {
    /// Rows of `dim` and of the global `gdim` (the side a cross-shard join copies or looks up).
    #[arg(long, default_value_t = 100_000)]
    pub rows: u64,
    /// Rows of `fact` (sharded by `user_id`, 1,000 users).
    #[arg(long, default_value_t = 100_000)]
    pub fact_rows: u64,
    /// Timed runs per query (after one checked warm-up run).
    #[arg(long, default_value_t = 5)]
    pub iterations: usize,
    /// Settings added to both Shoals' `server:` mapping, `key: value` each (e.g.
    /// `gather_max_rows: 1000000`).
    #[arg(long)]
    pub server_config: Vec<String>,
    /// Settings added to the second Shoal's `server:` mapping only, for the large copy (e.g.
    /// `gather_max_bytes: 4294967296` so that the copy is not refused). Without them the case is
    /// not run.
    #[arg(long)]
    pub large_server_config: Vec<String>,
    /// Rows of `ldim` (each with a 200-byte pad), the side of the large copy.
    #[arg(long, default_value_t = 1_000_000)]
    pub large_rows: u64,
    /// The large copy's goal: Shoal's peak RSS under this many MiB (the copied side is about
    /// `--large-rows` x 220 bytes: it must stream, not be held).
    #[arg(long, default_value_t = 128)]
    pub rss_goal_mib: u64,
    /// Seconds one statement through Shoal may take before its case ends as an error (the
    /// case's remaining runs are skipped).
    #[arg(long, default_value_t = 300)]
    pub query_timeout: u64,
    /// The shoal binary (default: `target/release/shoal`, built first).
    #[arg(long)]
    pub shoal_bin: Option<PathBuf>,
    /// Results go to `<out>/join-<UTC timestamp>/`.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
}

/// One measured query.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Case {
    pub name: String,
    pub sql: String,
    /// Rows of the answer.
    pub rows: u64,
    pub median_ms: f64,
    pub max_ms: f64,
    /// Statements the datanodes ran per query (`Questions` delta), and of them SELECTs and
    /// INSERTs.
    pub statements: f64,
    pub selects: f64,
    pub inserts: f64,
    pub peak_rss_kib: u64,
    /// Peak RSS goal (the large copy only).
    pub goal_kib: Option<u64>,
    /// `exact`, `refused: ...`, `wrong: ...` or `not run: ...`.
    pub outcome: String,
}

impl Case {
    fn exact(&self) -> bool {
        self.outcome == "exact" && self.goal_kib.is_none_or(|g| self.peak_rss_kib <= g)
    }

    fn wrong(&self) -> bool {
        self.outcome.starts_with("wrong")
            || (self.outcome == "exact" && !self.exact())
            || self.outcome.starts_with("error")
    }
}

/// The queries: (name, SQL over `dim` or `gdim`).
fn queries(args: &JoinArgs) -> Vec<(String, String)> {
    let range = 2_000.min(args.fact_rows);
    vec![
        (
            "one user's facts with their dims (fact on 1 shard, dim on 4)".into(),
            "SELECT f.id, f.amount, d.id, d.name FROM fact f JOIN dim d ON d.id = f.dim_id \
             WHERE f.user_id = 7"
                .into(),
        ),
        (
            format!("{range} facts across shards with their dims"),
            format!(
                "SELECT f.id, f.user_id, d.grp, d.val FROM fact f JOIN dim d ON d.id = f.dim_id \
                 WHERE f.id <= {range}"
            ),
        ),
        (
            "dim preserved: LEFT JOIN of 5,000 dims with their facts, grouped".into(),
            "SELECT d.grp, COUNT(*), COUNT(f.id), SUM(f.amount) FROM dim d LEFT JOIN fact f \
             ON f.dim_id = d.id WHERE d.id <= 5000 GROUP BY d.grp"
                .into(),
        ),
        (
            format!(
                "every fact with its dim, grouped ({} x {} rows)",
                args.fact_rows, args.rows
            ),
            "SELECT d.grp, COUNT(*), SUM(f.amount), SUM(d.val) FROM fact f JOIN dim d \
             ON d.id = f.dim_id GROUP BY d.grp"
                .into(),
        ),
        (
            "baseline: the same with the global gdim (co-located)".into(),
            "SELECT d.grp, COUNT(*), SUM(f.amount), SUM(d.val) FROM fact f JOIN gdim d \
             ON d.id = f.dim_id GROUP BY d.grp"
                .into(),
        ),
    ]
}

pub async fn run(args: JoinArgs) -> Result<Verdict, BenchError> {
    if args.rows == 0 || args.fact_rows == 0 || args.iterations == 0 {
        return Err(BenchError::Tool(
            "--rows, --fact-rows and --iterations must be at least 1".into(),
        ));
    }
    let command_line = std::env::args().collect::<Vec<_>>().join(" ");
    let bin = targets::shoal_release_bin_async(args.shoal_bin.clone()).await?;
    let work = std::env::temp_dir().join(format!("shoal-join-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(BenchError::io(format!("create {}", work.display())))?;
    let progress = Progress::new("join", (args.rows * 4 + args.fact_rows) * 2);
    progress.stage("starting 2 MariaDB primaries with 2 databases each");
    let cluster = Cluster::start(ClusterSpec {
        primaries: 2,
        databases: vec!["join_1".into(), "join_2".into(), ORACLE_DB.into()],
        ..ClusterSpec::default()
    })
    .await?;
    let outcome = measure(&args, &cluster, &bin, &work, &progress).await;
    drop(cluster);
    let _ = std::fs::remove_dir_all(&work);
    let cases = outcome?;
    progress.finish();

    let mut md = format!(
        "# shoal-bench join\n\n`{command_line}`\n\n`dim` {} rows sharded by id, `fact` {} rows \
         sharded by user_id, on 4 datanodes (2 MariaDB instances); `gdim` global. {}\n\n\
         | query | rows | median ms | max ms | datanode statements / query (SELECT, INSERT) | \
         Shoal peak RSS | answer |\n|---|---:|---:|---:|---:|---:|---|\n",
        args.rows,
        args.fact_rows,
        crate::results::machine_line()
    );
    for c in &cases {
        let goal = c
            .goal_kib
            .map(|g| format!(" (goal {} MiB)", g / 1024))
            .unwrap_or_default();
        md.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {:.1} ({:.1}, {:.1}) | {:.1} MiB{goal} | {} |\n",
            c.name,
            c.rows,
            c.median_ms,
            c.max_ms,
            c.statements,
            c.selects,
            c.inserts,
            c.peak_rss_kib as f64 / 1024.0,
            c.outcome
        ));
    }
    let results = ResultsDir::create(&args.out, "join")?;
    results.write("join.md", &md)?;
    let json = serde_json::to_value(&cases).map_err(|e| BenchError::Tool(e.to_string()))?;
    results.write_json("join.json", &json)?;
    println!("{md}");
    eprintln!("join: results in {}", results.path().display());
    Ok(if cases.iter().any(Case::wrong) {
        Verdict::Fail
    } else if cases.iter().all(Case::exact) {
        Verdict::Pass
    } else {
        Verdict::Incomplete
    })
}

fn dim_row(id: u64) -> String {
    format!(
        "({id}, {}, 'dim {id:08}', {}.{:02})",
        id % 100,
        id % 1000,
        id % 100
    )
}

fn fact_row(id: u64, dims: u64) -> (u64, String) {
    let user = id % 1000;
    let dim = (id * 7919) % dims + 1;
    (
        user,
        format!("({id}, {user}, {dim}, {}.{:02})", id % 5000, id % 4 * 25),
    )
}

/// Multi-row INSERTs of `rows` into `table` on `conn`, 5,000 rows each.
async fn insert(
    conn: &mut Conn,
    label: &str,
    table: &str,
    rows: impl Iterator<Item = String>,
    progress: &Progress,
) -> Result<(), BenchError> {
    // 5,000 rows a statement, built as they come (the large table is some 200 MiB).
    let mut rows = rows.peekable();
    while rows.peek().is_some() {
        let chunk: Vec<String> = rows.by_ref().take(5_000).collect();
        conn.query_drop(format!("INSERT INTO {table} VALUES {}", chunk.join(", ")))
            .await
            .map_err(BenchError::sql(label, format!("INSERT INTO {table}")))?;
        progress.inc(chunk.len() as u64);
    }
    Ok(())
}

const DDL: &[&str] = &[
    "CREATE TABLE dim (id BIGINT NOT NULL PRIMARY KEY, grp INT NOT NULL, name VARCHAR(32) NOT NULL, \
     val DECIMAL(10,2) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
    "CREATE TABLE gdim (id BIGINT NOT NULL PRIMARY KEY, grp INT NOT NULL, name VARCHAR(32) NOT NULL, \
     val DECIMAL(10,2) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
    "CREATE TABLE ldim (id BIGINT NOT NULL PRIMARY KEY, grp INT NOT NULL, pad VARCHAR(200) NOT NULL) \
     ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
    "CREATE TABLE fact (id BIGINT NOT NULL PRIMARY KEY, user_id INT NOT NULL, dim_id BIGINT NOT NULL, \
     amount DECIMAL(10,2) NOT NULL, KEY (user_id), KEY (dim_id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
];

async fn load(
    args: &JoinArgs,
    cluster: &Cluster,
    layout: &Layout,
    progress: &Progress,
) -> Result<(), BenchError> {
    // The oracle: every row in one database.
    let oracle = direct_endpoint(cluster, 0, ORACLE_DB, "oracle");
    let mut conn = oracle.connect().await?;
    for ddl in DDL {
        conn.query_drop(*ddl)
            .await
            .map_err(BenchError::sql(oracle.label(), "CREATE TABLE"))?;
    }
    progress.stage("loading the oracle");
    let label = oracle.label();
    insert(
        &mut conn,
        &label,
        "dim",
        (1..=args.rows).map(dim_row),
        progress,
    )
    .await?;
    insert(
        &mut conn,
        &label,
        "gdim",
        (1..=args.rows).map(dim_row),
        progress,
    )
    .await?;
    let facts = (1..=args.fact_rows).map(|id| fact_row(id, args.rows).1);
    insert(&mut conn, &label, "fact", facts, progress).await?;
    let _ = conn.disconnect().await;

    // The datanodes, as the `mod` rule places rows (key % 4, datanodes in config order); the
    // tables were created through Shoal.
    progress.stage("loading the 4 datanodes");
    let mut tasks = Vec::new();
    for (i, d) in layout.datanodes.iter().enumerate() {
        let ep = direct_endpoint(cluster, d.datahost, &d.database, &d.name);
        let (rows, facts, progress) = (args.rows, args.fact_rows, progress.clone());
        let i = i as u64;
        tasks.push(tokio::spawn(async move {
            let mut conn = ep.connect().await?;
            let label = ep.label();
            let dims = (1..=rows).filter(|id| id % DATANODES == i).map(dim_row);
            insert(&mut conn, &label, "dim", dims, &progress).await?;
            insert(
                &mut conn,
                &label,
                "gdim",
                (1..=rows).map(dim_row),
                &progress,
            )
            .await?;
            let facts = (1..=facts)
                .map(|id| fact_row(id, rows))
                .filter(|(user, _)| user % DATANODES == i)
                .map(|(_, row)| row);
            insert(&mut conn, &label, "fact", facts, &progress).await?;
            let _ = conn.disconnect().await;
            Ok::<_, BenchError>(())
        }));
    }
    join_loads(tasks).await
}

fn ldim_row(id: u64) -> String {
    format!("({id}, {}, '{:0>200}')", id % 100, id)
}

/// `ldim`'s rows, into the oracle and the datanodes (only for the large copy).
async fn load_large(
    args: &JoinArgs,
    cluster: &Cluster,
    layout: &Layout,
    progress: &Progress,
) -> Result<(), BenchError> {
    progress.stage(format!("loading {} ldim rows", args.large_rows));
    progress.inc_length(args.large_rows * 2);
    let oracle = direct_endpoint(cluster, 0, ORACLE_DB, "oracle");
    let mut conn = oracle.connect().await?;
    let rows = (1..=args.large_rows).map(ldim_row);
    insert(&mut conn, &oracle.label(), "ldim", rows, progress).await?;
    let _ = conn.disconnect().await;
    let mut tasks = Vec::new();
    for (i, d) in layout.datanodes.iter().enumerate() {
        let ep = direct_endpoint(cluster, d.datahost, &d.database, &d.name);
        let (rows, progress, i) = (args.large_rows, progress.clone(), i as u64);
        tasks.push(tokio::spawn(async move {
            let mut conn = ep.connect().await?;
            let mine = (1..=rows).filter(|id| id % DATANODES == i).map(ldim_row);
            insert(&mut conn, &ep.label(), "ldim", mine, &progress).await?;
            let _ = conn.disconnect().await;
            Ok::<_, BenchError>(())
        }));
    }
    join_loads(tasks).await
}

/// The counters a case reports, summed over the cluster's primaries.
const COUNTERS: [&str; 3] = ["Questions", "Com_select", "Com_insert"];

async fn counters(status: &mut StatusConns) -> Result<[u64; 3], BenchError> {
    let sum = status.summed(&COUNTERS).await?;
    Ok(COUNTERS.map(|n| sum.get(n).copied().unwrap_or(0)))
}

fn cell(v: &Value) -> String {
    match v {
        Value::NULL => "NULL".into(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => other.as_sql(true),
    }
}

/// The answer as sorted rows of text, or the server's error.
async fn answer(conn: &mut Conn, sql: &str) -> Result<Vec<String>, mysql_async::Error> {
    let rows: Vec<Row> = conn.query(sql).await?;
    let mut out: Vec<String> = rows
        .iter()
        .map(|r| {
            (0..r.len())
                .map(|i| r.as_ref(i).map_or("?".into(), cell))
                .collect::<Vec<_>>()
                .join("\t")
        })
        .collect();
    out.sort();
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
async fn case(
    name: &str,
    sql: &str,
    iterations: usize,
    shoal: &Endpoint,
    pid: u32,
    oracle: &mut Conn,
    status: &mut StatusConns,
    goal_kib: Option<u64>,
    timeout: std::time::Duration,
) -> Result<Case, BenchError> {
    let mut c = Case {
        name: name.into(),
        sql: sql.into(),
        rows: 0,
        median_ms: 0.0,
        max_ms: 0.0,
        statements: 0.0,
        selects: 0.0,
        inserts: 0.0,
        peak_rss_kib: 0,
        goal_kib,
        outcome: "exact".into(),
    };
    let expected = answer(oracle, sql)
        .await
        .map_err(BenchError::sql("the oracle", name))?;
    c.rows = expected.len() as u64;
    let mut conn = shoal.connect().await?;
    reset_peak(pid)?;
    // The warm-up run is the checked one.
    let got = match tokio::time::timeout(timeout, answer(&mut conn, sql)).await {
        Ok(r) => r,
        Err(_) => {
            c.outcome = format!("error: no answer within {} s", timeout.as_secs());
            c.peak_rss_kib = status_kib(pid, "VmHWM:").unwrap_or(0);
            return Ok(c);
        }
    };
    match got {
        Ok(got) if got == expected => {}
        Ok(got) => {
            let first = got
                .iter()
                .zip(&expected)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(expected.len()));
            c.outcome = format!(
                "wrong: {} rows (oracle {}), first difference at sorted row {first}",
                got.len(),
                expected.len()
            );
            return Ok(c);
        }
        Err(mysql_async::Error::Server(e)) if e.code == 1235 => {
            c.outcome = format!("refused: {}", e.message);
            return Ok(c);
        }
        Err(e) => {
            c.outcome = format!("error: {e}");
            return Ok(c);
        }
    }
    let mut ms = Vec::with_capacity(iterations);
    let before = counters(status).await?;
    for _ in 0..iterations {
        let start = Instant::now();
        let Ok(rows) = tokio::time::timeout(timeout, conn.query::<Row, _>(sql)).await else {
            c.outcome = format!("error: no answer within {} s", timeout.as_secs());
            c.peak_rss_kib = status_kib(pid, "VmHWM:").unwrap_or(0);
            return Ok(c);
        };
        let rows = rows.map_err(BenchError::sql(shoal.label(), name))?;
        ms.push(start.elapsed().as_secs_f64() * 1000.0);
        drop(rows);
    }
    let after = counters(status).await?;
    ms.sort_by(f64::total_cmp);
    c.median_ms = ms[ms.len() / 2];
    c.max_ms = ms[ms.len() - 1];
    let n = iterations as f64;
    c.statements = (after[0] - before[0]) as f64 / n;
    c.selects = (after[1] - before[1]) as f64 / n;
    c.inserts = (after[2] - before[2]) as f64 / n;
    c.peak_rss_kib = status_kib(pid, "VmHWM:").unwrap_or(0);
    let _ = conn.disconnect().await;
    Ok(c)
}

async fn measure(
    args: &JoinArgs,
    cluster: &Cluster,
    bin: &Path,
    work: &Path,
    progress: &Progress,
) -> Result<Vec<Case>, BenchError> {
    let mut layout = Layout::from_cluster(cluster, 2, "join");
    layout.schema = SCHEMA.into();
    layout.sharded = vec![
        ShardedTable {
            name: "fact".into(),
            key: "user_id".into(),
        },
        ShardedTable {
            name: "dim".into(),
            key: "id".into(),
        },
        ShardedTable {
            name: "ldim".into(),
            key: "id".into(),
        },
    ];
    layout.global = vec!["gdim".into()];
    let with = |server: &[String]| {
        let layout = layout.clone();
        let server = server.to_vec();
        move |listen: &str| {
            // Health checks (a SELECT per server every second by default) would count as
            // round trips of the measured queries: one an hour instead.
            let y = layout.yaml_with(listen, &["health: { heartbeat: 3600s }"]);
            let mut extra = String::new();
            for line in &server {
                extra.push_str(", ");
                extra.push_str(line);
            }
            y.replacen(
                "log_level: warn }",
                &format!("log_level: warn{extra} }}"),
                1,
            )
        }
    };
    progress.stage("starting Shoal");
    let shoal = RunningShoal::start_with(work, bin, &layout, "join", with(&args.server_config))?;
    shoal
        .endpoint
        .execute(&DDL.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .await?;
    load(args, cluster, &layout, progress).await?;

    let mut oracle = direct_endpoint(cluster, 0, ORACLE_DB, "oracle")
        .connect()
        .await?;
    let mut status = StatusConns::open(cluster, 0..cluster.primaries().len()).await?;
    let mut cases = Vec::new();
    let qs = queries(args);
    for (name, sql) in &qs {
        progress.stage(name.clone());
        let pid = shoal.process.pid();
        cases.push(
            case(
                name,
                sql,
                args.iterations,
                &shoal.endpoint,
                pid,
                &mut oracle,
                &mut status,
                None,
                std::time::Duration::from_secs(args.query_timeout),
            )
            .await?,
        );
    }
    drop(shoal);

    // The large copy, on a second Shoal whose caps let it through.
    let sql = "SELECT d.grp, COUNT(*), SUM(f.amount), SUM(LENGTH(d.pad)) FROM fact f JOIN ldim d \
               ON d.id = f.dim_id GROUP BY d.grp";
    let name = format!(
        "every fact with its ldim, grouped ({} x {} rows of 200-byte pads)",
        args.fact_rows, args.large_rows
    );
    if args.large_server_config.is_empty() {
        cases.push(Case {
            name,
            sql: sql.into(),
            rows: 0,
            median_ms: 0.0,
            max_ms: 0.0,
            statements: 0.0,
            selects: 0.0,
            inserts: 0.0,
            peak_rss_kib: 0,
            goal_kib: None,
            outcome: "not run: no --large-server-config".into(),
        });
    } else {
        load_large(args, cluster, &layout, progress).await?;
        progress.stage("starting Shoal with raised gather caps");
        let mut lines = args.server_config.clone();
        lines.extend(args.large_server_config.iter().cloned());
        let shoal = RunningShoal::start_with(work, bin, &layout, "join-large", with(&lines))?;
        let pid = shoal.process.pid();
        progress.stage(name.clone());
        cases.push(
            case(
                &name,
                sql,
                args.iterations.min(3),
                &shoal.endpoint,
                pid,
                &mut oracle,
                &mut status,
                Some(args.rss_goal_mib * 1024),
                std::time::Duration::from_secs(args.query_timeout),
            )
            .await?,
        );
    }
    let _ = oracle.disconnect().await;
    status.close().await;
    Ok(cases)
}
