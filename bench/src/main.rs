//! `shoal-bench`: local MariaDB backends, load generation and experiments for Shoal.
//! One subcommand per tool; add yours to `Command`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// Proxy overhead: sysbench direct vs HAProxy (TCP) vs Shoal, interleaved, medians.
    Overhead(shoal_bench::overhead::OverheadArgs),
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
    let outcome = match cli.command {
        Command::Cluster(cmd) => shoal_bench::cluster::cli::run(cmd)
            .await
            .map_err(|e| e.to_string()),
        Command::Overhead(args) => shoal_bench::overhead::run(args)
            .await
            .map_err(|e| e.to_string()),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("shoal-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
