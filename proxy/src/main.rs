//! The `shoal` binary.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use shoal_proxy::config::{BackendSpec, ProxyConfig};
use shoal_proxy::server::Proxy;
use tracing_subscriber::EnvFilter;

/// Shoal: a MySQL-protocol sharding proxy.
///
/// Quick mode (no config file): `shoal --listen 127.0.0.1:8066 --backend mysql://USER:PASS@HOST:PORT/DB`
/// serves one backend; clients log in with the backend's user and password.
#[derive(Debug, Parser)]
#[command(name = "shoal", version)]
struct Cli {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8066")]
    listen: String,
    /// Quick mode: the one backend, as mysql://USER:PASS@HOST:PORT[/DB].
    #[arg(long, conflicts_with = "config")]
    backend: Option<String>,
    /// Configuration file (YAML).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Validate the configuration, print the topology and exit.
    #[arg(long, requires = "config")]
    check: bool,
    /// Most client connections served at once (error 1040 beyond).
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// Most backend connections in the pool.
    #[arg(long, default_value_t = 256)]
    pool_max: usize,
    /// Backend connections kept open even when idle.
    #[arg(long, default_value_t = 0)]
    pool_min: usize,
    /// How long a statement waits for a free backend connection, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    acquire_timeout_ms: u64,
    /// Idle backend connections above --pool-min are closed after this many seconds.
    #[arg(long, default_value_t = 300)]
    pool_idle_timeout_secs: u64,
    /// Clients silent for this many seconds are disconnected.
    #[arg(long, default_value_t = 28_800)]
    client_idle_timeout_secs: u64,
    /// On SIGTERM/SIGINT, how long running statements may take to finish, in seconds.
    #[arg(long, default_value_t = 30)]
    shutdown_timeout_secs: u64,
    /// Worker threads (default: one per CPU core).
    #[arg(long)]
    threads: Option<usize>,
    /// Log filter (e.g. `info`, `shoal_proxy=debug`); default from SHOAL_LOG, RUST_LOG, else info.
    #[arg(long)]
    log: Option<String>,
}

fn init_logging(flag: Option<&str>) {
    let filter = flag
        .map(str::to_string)
        .or_else(|| std::env::var("SHOAL_LOG").ok())
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| "info".to_string());
    let filter = EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log.as_deref());

    if cli.config.is_some() {
        eprintln!(
            "shoal: --config is not available in this build yet (it arrives with the router's \
             config model); use quick mode: --backend mysql://USER:PASS@HOST:PORT[/DB]"
        );
        return ExitCode::from(2);
    }
    let Some(url) = cli.backend.as_deref() else {
        eprintln!("shoal: give --backend mysql://USER:PASS@HOST:PORT[/DB] (or --config FILE)");
        return ExitCode::from(2);
    };
    let backend = match BackendSpec::parse_url(url) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("shoal: --backend: {e}");
            return ExitCode::from(2);
        }
    };
    let mut config = ProxyConfig::quick(cli.listen.clone(), backend);
    config.max_connections = cli.max_connections.max(1);
    config.pool.max_size = cli.pool_max.max(1);
    config.pool.min_size = cli.pool_min.min(config.pool.max_size);
    config.pool.acquire_timeout = Duration::from_millis(cli.acquire_timeout_ms);
    config.pool.idle_timeout = Duration::from_secs(cli.pool_idle_timeout_secs);
    config.client_idle_timeout = Duration::from_secs(cli.client_idle_timeout_secs.max(1));
    config.shutdown_timeout = Duration::from_secs(cli.shutdown_timeout_secs);

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("shoal: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let proxy = match Proxy::bind(config).await {
            Ok(p) => p,
            Err(e) => {
                eprintln!("shoal: cannot listen: {e}");
                return ExitCode::FAILURE;
            }
        };
        proxy.run().await;
        ExitCode::SUCCESS
    })
}
