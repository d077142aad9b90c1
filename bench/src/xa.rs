//! `shoal-bench xa`: what atomic commits across datanodes cost (issue 25).
//!
//! Two primaries, two databases on each (4 datanodes), a table `account` sharded by `id` over
//! them. Two Shoals serve it at once, the same config but for the schema's `transactions:`
//! (`xa` and `best_effort`), and clients run transfers through them in turn: `BEGIN; UPDATE
//! ... -1 WHERE id = a; UPDATE ... +1 WHERE id = b; COMMIT`, with a and b
//!
//! - `two servers`: on datanodes of different servers (xa: two branches prepared, the decision
//!   written, both committed; best_effort: two COMMITs),
//! - `one datanode`: on the same datanode (both modes commit one branch in one phase).
//!
//! Each run records transactions per second, the latency of the whole transaction and of its
//! COMMIT (p50, p95), the CPU of Shoal and of both mariadbd per transaction, and the statements
//! the backends ran per transaction (`Questions`, which also counts the health checks: a few a
//! second). The sum of balances is checked unchanged at the end, and no XA branch is left
//! prepared.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::json;

use crate::Verdict;
use crate::cluster::{Cluster, ClusterSpec};
use crate::error::BenchError;
use crate::interrupt;
use crate::load::Endpoint;
use crate::overhead::targets;
use crate::progress::Progress;
use crate::results::{Csv, Report, RunArgs, RunInfo, fixed, markdown_table, percentile_ms};
use crate::shoal_config::{Layout, RunningShoal, ShardedTable};

#[derive(Debug, Clone, Args)]
pub struct XaArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Seconds per run.
    #[arg(long, default_value_t = 10)]
    pub duration: u32,
    /// Rounds; each runs every mode, shape and thread count. Medians are reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Client thread counts.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    pub threads: Vec<u32>,
    /// Accounts per datanode.
    #[arg(long, default_value_t = 1000)]
    pub accounts: u64,
    /// A short smoke run: 3 s per run, 1 round.
    #[arg(long)]
    pub quick: bool,
}

/// The schema's `transactions:` setting of each Shoal, in the order each round runs them.
pub const MODES: [&str; 2] = ["xa", "best_effort"];

/// Where a transfer's two accounts are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Shape {
    #[serde(rename = "two servers")]
    TwoServers,
    #[serde(rename = "one datanode")]
    OneDatanode,
}

impl Shape {
    fn label(self) -> &'static str {
        match self {
            Shape::TwoServers => "two servers",
            Shape::OneDatanode => "one datanode",
        }
    }
}

const SHAPES: [Shape; 2] = [Shape::TwoServers, Shape::OneDatanode];

/// Datanodes `dn1..dn4`: `mod` over 4 places `id` on `dn(id % 4 + 1)`; dn1 and dn2 are on
/// the first server, dn3 and dn4 on the second.
const DATANODES: u64 = 4;

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub mode: &'static str,
    pub shape: Shape,
    pub threads: u32,
    pub round: u32,
    pub secs: f64,
    pub txns: u64,
    pub errors: u64,
    pub tps: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub commit_p50_ms: f64,
    pub commit_p95_ms: f64,
    pub shoal_cpu_us: f64,
    pub backend_cpu_us: f64,
    pub backend_statements: f64,
}

pub async fn run(mut args: XaArgs) -> Result<Verdict, BenchError> {
    if args.quick {
        args.duration = args.duration.min(3);
        args.rounds = 1;
    }
    if args.threads.is_empty() || args.rounds == 0 || args.duration == 0 || args.accounts < 2 {
        return Err(BenchError::Tool(
            "--threads, --rounds, --duration must not be empty or 0, --accounts at least 2".into(),
        ));
    }
    let info = RunInfo::capture("xa");
    let bin = targets::shoal_release_bin_async(args.run.shoal_bin.clone()).await?;
    let work_dir = std::env::temp_dir().join(format!("shoal-xa-{}", std::process::id()));
    std::fs::create_dir_all(&work_dir)
        .map_err(BenchError::io(format!("create {}", work_dir.display())))?;
    let outcome = measure_all(&args, &bin, &work_dir).await;
    let _ = std::fs::remove_dir_all(&work_dir);
    let (samples, checks) = match outcome {
        Err(_) if interrupt::interrupted() => return Err(BenchError::Interrupted),
        other => other?,
    };
    let verdict = if checks.iter().all(|c| c.1) {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    report(&args, &info, &samples, &checks).publish(&args.run.out, &info)?;
    Ok(verdict)
}

async fn measure_all(
    args: &XaArgs,
    bin: &Path,
    work_dir: &Path,
) -> Result<(Vec<Sample>, Vec<(String, bool)>), BenchError> {
    eprintln!("xa: starting 2 primaries");
    let cluster = Cluster::start(ClusterSpec {
        primaries: 2,
        databases: vec!["xa_1".into(), "xa_2".into()],
        ..ClusterSpec::default()
    })
    .await?;
    let mut layout = Layout::from_cluster(&cluster, 2, "xa");
    layout.schema = "bank".into();
    layout.sharded = vec![ShardedTable {
        name: "account".into(),
        key: "id".into(),
    }];
    let mut shoals = Vec::new();
    for mode in MODES {
        let shoal = RunningShoal::start_with(work_dir, bin, &layout, mode, |listen| {
            with_transactions(&layout.yaml(listen), &layout.schema, mode)
        })?;
        shoals.push(shoal);
    }
    for s in &shoals {
        wait_serving(&s.endpoint).await?;
    }
    let endpoint = &shoals[0].endpoint;
    load(endpoint, args.accounts).await?;
    let before = total(endpoint).await?;
    let pids: Vec<u32> = cluster.primaries().iter().map(|i| i.pid).collect();
    let mut admins = Vec::new();
    for p in 0..pids.len() {
        admins.push(
            Conn::new(cluster.admin_opts(p))
                .await
                .map_err(BenchError::sql("backend", "connect"))?,
        );
    }
    let runs = args.rounds as u64 * args.threads.len() as u64 * (SHAPES.len() * MODES.len()) as u64;
    let progress = Progress::new("xa", runs);
    let mut samples = Vec::new();
    for round in 1..=args.rounds {
        for &threads in &args.threads {
            for shape in SHAPES {
                for (m, mode) in MODES.iter().enumerate() {
                    progress.stage(format!(
                        "round {round}: {mode}, {}, {threads} threads",
                        shape.label()
                    ));
                    let shoal = &shoals[m];
                    let shoal_before = targets::cpu_seconds(shoal.process.pid())?;
                    let backend_before = cpu_sum(&pids)?;
                    let questions_before = questions(&mut admins).await?;
                    let run = transfers(&shoal.endpoint, shape, threads, args).await?;
                    let questions_after = questions(&mut admins).await?;
                    let shoal_cpu = targets::cpu_seconds(shoal.process.pid())? - shoal_before;
                    let backend_cpu = cpu_sum(&pids)? - backend_before;
                    let n = run.txns.max(1) as f64;
                    samples.push(Sample {
                        mode,
                        shape,
                        threads,
                        round,
                        secs: run.secs,
                        txns: run.txns,
                        errors: run.errors,
                        tps: run.txns as f64 / run.secs,
                        p50_ms: percentile_ms(&run.latencies_us, 0.5),
                        p95_ms: percentile_ms(&run.latencies_us, 0.95),
                        commit_p50_ms: percentile_ms(&run.commits_us, 0.5),
                        commit_p95_ms: percentile_ms(&run.commits_us, 0.95),
                        shoal_cpu_us: shoal_cpu * 1e6 / n,
                        backend_cpu_us: backend_cpu * 1e6 / n,
                        // The two status reads themselves are not the transactions'.
                        backend_statements: (questions_after - questions_before) as f64 / n,
                    });
                    progress.inc(1);
                    if interrupt::interrupted() {
                        return Err(BenchError::Interrupted);
                    }
                }
            }
        }
    }
    progress.finish();
    let after = total(endpoint).await?;
    let mut prepared = 0usize;
    for a in &mut admins {
        let rows: Vec<mysql_async::Row> = a
            .query("XA RECOVER")
            .await
            .map_err(BenchError::sql("backend", "XA RECOVER"))?;
        prepared += rows.len();
    }
    let checks = vec![
        (
            format!("sum of balances unchanged ({before} before, {after} after)"),
            before == after,
        ),
        (
            format!("no XA branch left prepared on the backends ({prepared} found)"),
            prepared == 0,
        ),
    ];
    Ok((samples, checks))
}

/// `yaml` with `transactions: <mode>` on schema `schema`.
fn with_transactions(yaml: &str, schema: &str, mode: &str) -> String {
    let head = format!("schemas:\n  - name: {schema}\n");
    yaml.replacen(&head, &format!("{head}    transactions: {mode}\n"), 1)
}

/// Waits until Shoal answers (it listens once its config is loaded).
async fn wait_serving(endpoint: &Endpoint) -> Result<(), BenchError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match endpoint.connect().await {
            Ok(c) => {
                let _ = c.disconnect().await;
                return Ok(());
            }
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// `accounts` per datanode, each with a balance of 1000.
async fn load(endpoint: &Endpoint, accounts: u64) -> Result<(), BenchError> {
    let mut statements = vec![
        "DROP TABLE IF EXISTS account".to_string(),
        "CREATE TABLE account (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)".to_string(),
    ];
    let ids: Vec<u64> = (0..accounts * DATANODES).collect();
    for chunk in ids.chunks(1000) {
        let values: Vec<String> = chunk.iter().map(|id| format!("({id}, 1000)")).collect();
        statements.push(format!(
            "INSERT INTO account (id, balance) VALUES {}",
            values.join(",")
        ));
    }
    endpoint.execute(&statements).await
}

async fn total(endpoint: &Endpoint) -> Result<i64, BenchError> {
    let mut c = endpoint.connect().await?;
    // SUM of a BIGINT is a DECIMAL: read as text.
    let sum: Option<String> = c
        .query_first("SELECT SUM(balance) FROM account")
        .await
        .map_err(BenchError::sql(endpoint.label(), "SELECT SUM(balance)"))?;
    let _ = c.disconnect().await;
    sum.unwrap_or_default()
        .parse()
        .map_err(|e| BenchError::Tool(format!("SUM(balance) is not a number: {e}")))
}

fn cpu_sum(pids: &[u32]) -> Result<f64, BenchError> {
    let mut s = 0.0;
    for &p in pids {
        s += targets::cpu_seconds(p)?;
    }
    Ok(s)
}

async fn questions(admins: &mut [Conn]) -> Result<u64, BenchError> {
    let mut n = 0;
    for c in admins {
        let row: Option<(String, u64)> = c
            .query_first("SHOW GLOBAL STATUS LIKE 'Questions'")
            .await
            .map_err(BenchError::sql("backend", "SHOW GLOBAL STATUS"))?;
        n += row.map_or(0, |r| r.1);
    }
    Ok(n)
}

/// What the clients of one run did.
#[derive(Default)]
struct Run {
    secs: f64,
    txns: u64,
    errors: u64,
    latencies_us: Vec<u32>,
    commits_us: Vec<u32>,
}

/// `threads` clients running transfers of `shape` for `args.duration` seconds.
async fn transfers(
    endpoint: &Endpoint,
    shape: Shape,
    threads: u32,
    args: &XaArgs,
) -> Result<Run, BenchError> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..threads {
        let opts: Opts = endpoint.opts();
        let stop = stop.clone();
        let accounts = args.accounts;
        tasks.push(tokio::spawn(async move {
            client(opts, shape, accounts, u64::from(t), stop).await
        }));
    }
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(u64::from(args.duration))).await;
    stop.store(true, Ordering::Relaxed);
    let mut run = Run::default();
    for task in tasks {
        let one = task
            .await
            .map_err(|e| BenchError::Tool(format!("a client task failed: {e}")))??;
        run.txns += one.txns;
        run.errors += one.errors;
        run.latencies_us.extend(one.latencies_us);
        run.commits_us.extend(one.commits_us);
    }
    run.secs = started.elapsed().as_secs_f64();
    Ok(run)
}

async fn client(
    opts: Opts,
    shape: Shape,
    accounts: u64,
    seed: u64,
    stop: Arc<AtomicBool>,
) -> Result<Run, BenchError> {
    let mut c = Conn::new(opts)
        .await
        .map_err(BenchError::sql("shoal", "connect"))?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut run = Run::default();
    while !stop.load(Ordering::Relaxed) {
        let (a, b) = pick(&mut rng, shape, accounts);
        let start = Instant::now();
        let body = async {
            c.query_drop("BEGIN").await?;
            c.query_drop(format!(
                "UPDATE account SET balance = balance - 1 WHERE id = {a}"
            ))
            .await?;
            c.query_drop(format!(
                "UPDATE account SET balance = balance + 1 WHERE id = {b}"
            ))
            .await?;
            let commit = Instant::now();
            c.query_drop("COMMIT").await?;
            Ok::<Duration, mysql_async::Error>(commit.elapsed())
        };
        match body.await {
            Ok(commit) => {
                run.txns += 1;
                run.latencies_us.push(micros(start.elapsed()));
                run.commits_us.push(micros(commit));
            }
            Err(mysql_async::Error::Server(_)) => {
                // A deadlock between two transfers, rolled back by the server: counted, and
                // the transaction ended before the next one.
                run.errors += 1;
                let _ = c.query_drop("ROLLBACK").await;
            }
            Err(e) => return Err(BenchError::Tool(format!("a transfer failed: {e}"))),
        }
    }
    let _ = c.disconnect().await;
    Ok(run)
}

/// Two distinct accounts placed as `shape` says (see [`DATANODES`]).
fn pick(rng: &mut StdRng, shape: Shape, accounts: u64) -> (u64, u64) {
    let row = |rng: &mut StdRng| rng.random_range(0..accounts) * DATANODES;
    match shape {
        Shape::TwoServers => (
            row(rng) + rng.random_range(0..2),
            row(rng) + 2 + rng.random_range(0..2),
        ),
        Shape::OneDatanode => {
            let dn = rng.random_range(0..DATANODES);
            let a = row(rng);
            let mut b = row(rng);
            while b == a {
                b = row(rng);
            }
            (a + dn, b + dn)
        }
    }
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// The median of `f` over the rounds of (mode, shape, threads).
fn median(samples: &[&Sample], f: fn(&Sample) -> f64) -> f64 {
    let mut v: Vec<f64> = samples.iter().map(|s| f(s)).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn report(args: &XaArgs, info: &RunInfo, samples: &[Sample], checks: &[(String, bool)]) -> Report {
    let mut md = info.heading("Atomic commits: xa vs best_effort");
    md.push_str(&format!(
        "\nTransfers (`BEGIN; UPDATE -1; UPDATE +1; COMMIT`) through two Shoals over the same \
         2 primaries and 4 datanodes, `transactions: xa` and `best_effort`, run in turn; \
         {} s per run, {} round(s), medians. `two servers`: the accounts on datanodes of \
         different servers; `one datanode`: on the same one.\n\n",
        args.duration, args.rounds
    ));
    let header = [
        "shape",
        "threads",
        "mode",
        "TPS",
        "p50 ms",
        "p95 ms",
        "COMMIT p50 ms",
        "COMMIT p95 ms",
        "Shoal CPU µs/txn",
        "mariadbd CPU µs/txn",
        "backend statements/txn",
        "errors",
    ];
    let mut rows = Vec::new();
    for shape in SHAPES {
        for &threads in &args.threads {
            let mut tps = Vec::new();
            for mode in MODES {
                let of: Vec<&Sample> = samples
                    .iter()
                    .filter(|s| s.mode == mode && s.shape == shape && s.threads == threads)
                    .collect();
                tps.push(median(&of, |s| s.tps));
                rows.push(vec![
                    shape.label().to_string(),
                    threads.to_string(),
                    mode.to_string(),
                    fixed(median(&of, |s| s.tps), 0),
                    fixed(median(&of, |s| s.p50_ms), 2),
                    fixed(median(&of, |s| s.p95_ms), 2),
                    fixed(median(&of, |s| s.commit_p50_ms), 2),
                    fixed(median(&of, |s| s.commit_p95_ms), 2),
                    fixed(median(&of, |s| s.shoal_cpu_us), 0),
                    fixed(median(&of, |s| s.backend_cpu_us), 0),
                    fixed(median(&of, |s| s.backend_statements), 1),
                    of.iter().map(|s| s.errors).sum::<u64>().to_string(),
                ]);
            }
            rows.push(vec![
                shape.label().to_string(),
                threads.to_string(),
                "xa / best_effort TPS".to_string(),
                fixed(tps[0] / tps[1], 2),
            ]);
        }
    }
    for r in &mut rows {
        r.resize(header.len(), String::new());
    }
    md.push_str(&markdown_table(
        &header,
        &(3..header.len()).collect::<Vec<_>>(),
        &rows,
    ));
    md.push_str("\nChecks:\n\n");
    for (what, ok) in checks {
        md.push_str(&format!(
            "- {}: {what}\n",
            if *ok { "ok" } else { "FAILED" }
        ));
    }
    let csv = Csv::of(
        "runs.csv",
        samples,
        &[
            ("mode", |s: &&Sample| s.mode.to_string()),
            ("shape", |s| s.shape.label().to_string()),
            ("threads", |s| s.threads.to_string()),
            ("round", |s| s.round.to_string()),
            ("secs", |s| fixed(s.secs, 2)),
            ("txns", |s| s.txns.to_string()),
            ("errors", |s| s.errors.to_string()),
            ("tps", |s| fixed(s.tps, 1)),
            ("p50_ms", |s| fixed(s.p50_ms, 3)),
            ("p95_ms", |s| fixed(s.p95_ms, 3)),
            ("commit_p50_ms", |s| fixed(s.commit_p50_ms, 3)),
            ("commit_p95_ms", |s| fixed(s.commit_p95_ms, 3)),
            ("shoal_cpu_us_per_txn", |s| fixed(s.shoal_cpu_us, 1)),
            ("mariadbd_cpu_us_per_txn", |s| fixed(s.backend_cpu_us, 1)),
            ("backend_statements_per_txn", |s| {
                fixed(s.backend_statements, 2)
            }),
        ],
    );
    Report {
        markdown: md,
        csv: vec![csv],
        json: json!({
            "samples": samples,
            "checks": checks.iter().map(|(w, ok)| json!({"check": w, "ok": ok})).collect::<Vec<_>>(),
        }),
        charts: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_place_accounts_as_the_shape_says() {
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..1000 {
            let (a, b) = pick(&mut rng, Shape::TwoServers, 10);
            assert!(a % DATANODES < 2 && b % DATANODES >= 2, "{a} {b}");
            assert!(a < 40 && b < 40);
            let (a, b) = pick(&mut rng, Shape::OneDatanode, 10);
            assert_eq!(a % DATANODES, b % DATANODES);
            assert_ne!(a, b);
        }
    }

    #[test]
    fn the_schema_gets_its_transactions_mode() {
        let y = "rules: []\nschemas:\n  - name: bank\n    tables:\n";
        assert_eq!(
            with_transactions(y, "bank", "xa"),
            "rules: []\nschemas:\n  - name: bank\n    transactions: xa\n    tables:\n"
        );
    }
}
