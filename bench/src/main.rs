//! `shoal-bench`: local MariaDB backends, load generation and experiments for Shoal.
//! One subcommand per tool; add yours to `Command`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use shoal_bench::Verdict;

#[derive(Debug, Parser)]
#[command(name = "shoal-bench", version, about = "Shoal's bench tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start, inspect and stop local MariaDB backends (primaries and replicas).
    #[command(subcommand)]
    Cluster(shoal_bench::cluster::cli::ClusterCommand),
    /// Proxy overhead: sysbench direct vs HAProxy (TCP) vs Shoal (and any other endpoint),
    /// interleaved, medians.
    Overhead(shoal_bench::overhead::OverheadArgs),
    /// The Mycat report's sharded-vs-single experiment (plans 1-3) through Shoal.
    Mycat(shoal_bench::mycat::MycatArgs),
    /// Shard-count sweep: inserts, point selects and a scatter aggregate at 1..21 datanodes.
    Scale(shoal_bench::scale::ScaleArgs),
    /// Shoal's peak RSS merging a 2-million-row ORDER BY to a slow client and a
    /// 1-million-group GROUP BY over 4 datanodes.
    Memory(shoal_bench::memory::MemoryArgs),
    /// Read/write splitting: sysbench oltp_read_only through round_robin vs primary_only over
    /// 2 replicas (reads counted per server), and the health monitor's idle CPU at 16 servers.
    Replicas(shoal_bench::replicas::ReplicasArgs),
    /// TPC-C: load, run (the five transactions) and check (the 12 consistency conditions),
    /// one MariaDB (direct) vs Shoal over 1, 2 and 4 servers; or one mode against an endpoint.
    Tpcc(shoal_bench::tpcc::TpccArgs),
    /// Atomic commits: transfers between datanodes with `transactions: xa` vs `best_effort`
    /// (throughput, latency, CPU and backend statements per transaction).
    Xa(shoal_bench::xa::XaArgs),
    /// Many clients over few backend connections (issue 51): login, point and scatter latency,
    /// QPS, Shoal's CPU and RSS at 8 to 5,000 open clients and pools of 16 and 64 per server;
    /// sysbench at 256 and 512 threads direct and through Shoal.
    Clients(shoal_bench::clients::ClientsArgs),
    /// Joins across shards (issue 49): a 100k-row side joined with a sharded table over 4
    /// datanodes; latency, datanode statements per query, Shoal's peak RSS, and a join over a
    /// small memory budget.
    Join(shoal_bench::join::JoinArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    shoal_bench::interrupt::install();
    let outcome = match cli.command {
        Command::Cluster(cmd) => shoal_bench::cluster::cli::run(cmd)
            .await
            .map(pass_or_fail)
            .map_err(|e| e.to_string()),
        Command::Overhead(args) => shoal_bench::overhead::run(args)
            .await
            .map_err(|e| e.to_string()),
        Command::Mycat(args) => shoal_bench::mycat::run(args)
            .await
            .map_err(|e| e.to_string()),
        Command::Scale(args) => shoal_bench::scale::run(args)
            .await
            .map_err(|e| e.to_string()),
        Command::Memory(args) => shoal_bench::memory::run(args)
            .await
            .map_err(|e| e.to_string()),
        Command::Replicas(args) => shoal_bench::replicas::run(args)
            .await
            .map_err(|e| e.to_string()),
        Command::Tpcc(args) => shoal_bench::tpcc::run(args)
            .await
            .map_err(|e| e.to_string()),
        Command::Xa(args) => shoal_bench::xa::run(args).await.map_err(|e| e.to_string()),
        Command::Clients(args) => shoal_bench::clients::run(args)
            .await
            .map_err(|e| e.to_string()),
        Command::Join(args) => shoal_bench::join::run(args)
            .await
            .map_err(|e| e.to_string()),
    };
    match outcome {
        Ok(Verdict::Pass) => ExitCode::SUCCESS,
        Ok(Verdict::Fail) => ExitCode::FAILURE,
        Ok(Verdict::Incomplete) => {
            eprintln!(
                "shoal-bench: incomplete: some parts did not run (see \"not run\" in the report)"
            );
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("shoal-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn pass_or_fail(ok: bool) -> Verdict {
    if ok { Verdict::Pass } else { Verdict::Fail }
}
