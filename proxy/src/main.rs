//! The `shoal` binary.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use shoal_proxy::config::{BackendSpec, ProxyConfig};
use shoal_proxy::config_file;
use shoal_proxy::server::Proxy;
use shoal_router::topology::Topology;
use tracing_subscriber::EnvFilter;

/// Shoal: a MySQL-protocol sharding proxy.
///
/// Quick mode (no config file): `shoal --listen 127.0.0.1:8066 --backend mysql://USER:PASS@HOST:PORT/DB`
/// serves one backend; clients log in with the backend's user and password.
#[derive(Debug, Parser)]
#[command(name = "shoal", version)]
struct Cli {
    /// Address to listen on [default: 127.0.0.1:8066, or server.listen of the config].
    #[arg(long)]
    listen: Option<String>,
    /// Quick mode: the one backend, as mysql://USER:PASS@HOST:PORT[/DB].
    #[arg(long, conflicts_with = "config")]
    backend: Option<String>,
    /// Configuration file (YAML).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Validate the configuration, print the topology and exit.
    #[arg(long, requires = "config")]
    check: bool,
    /// Most client connections served at once (error 1040 beyond) [default: 1024].
    #[arg(long)]
    max_connections: Option<usize>,
    /// Most backend connections in the pool [default: 64, as in config files; below MariaDB's default max_connections of 151].
    #[arg(long)]
    pool_max: Option<usize>,
    /// Backend connections kept open even when idle [default: 0].
    #[arg(long)]
    pool_min: Option<usize>,
    /// How long a statement waits for a free backend connection, in milliseconds [default: 5000, as in config files].
    #[arg(long)]
    acquire_timeout_ms: Option<u64>,
    /// Idle backend connections above --pool-min are closed after this many seconds [default: 300].
    #[arg(long)]
    pool_idle_timeout_secs: Option<u64>,
    /// Clients silent for this many seconds are disconnected [default: 28800].
    #[arg(long)]
    client_idle_timeout_secs: Option<u64>,
    /// On SIGTERM/SIGINT, how long running statements may take to finish, in seconds [default: 10, as in config files].
    #[arg(long)]
    shutdown_timeout_secs: Option<u64>,
    /// Worker threads (default: one per CPU core).
    #[arg(long)]
    threads: Option<usize>,
    /// Log filter (e.g. `info`, `shoal_proxy=debug`); default from SHOAL_LOG, RUST_LOG, the
    /// config's server.log_level, else info.
    #[arg(long)]
    log: Option<String>,
}

fn init_logging(flag: Option<&str>, from_config: Option<&str>) {
    let filter = flag
        .map(str::to_string)
        .or_else(|| std::env::var("SHOAL_LOG").ok())
        .or_else(|| std::env::var("RUST_LOG").ok())
        .or_else(|| from_config.map(str::to_string))
        .unwrap_or_else(|| "info".to_string());
    let filter = EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// Builds the runtime settings from the command line (and config file), or says why not.
fn build_config(cli: &Cli) -> Result<(ProxyConfig, Option<String>), String> {
    let (mut config, log_level) = if let Some(path) = &cli.config {
        let topo = Topology::load(path).map_err(|e| e.to_string())?;
        let cfg = config_file::proxy_config(&topo, cli.listen.as_deref())?;
        (cfg, Some(topo.server.log_level.clone()))
    } else {
        let url = cli.backend.as_deref().ok_or(
            "give --backend mysql://USER:PASS@HOST:PORT[/DB] (quick mode) or --config FILE",
        )?;
        let backend = BackendSpec::parse_url(url).map_err(|e| format!("--backend: {e}"))?;
        let listen = cli
            .listen
            .clone()
            .unwrap_or_else(|| "127.0.0.1:8066".into());
        (ProxyConfig::quick(listen, backend), None)
    };
    if let Some(n) = cli.max_connections {
        config.max_connections = n.max(1);
    }
    if let Some(n) = cli.pool_max {
        config.pool.max_size = n.max(1);
    }
    if let Some(n) = cli.pool_min {
        config.pool.min_size = n;
    }
    config.pool.min_size = config.pool.min_size.min(config.pool.max_size);
    if let Some(ms) = cli.acquire_timeout_ms {
        config.pool.acquire_timeout = Duration::from_millis(ms);
    }
    if let Some(s) = cli.pool_idle_timeout_secs {
        config.pool.idle_timeout = Duration::from_secs(s);
    }
    if let Some(s) = cli.client_idle_timeout_secs {
        config.client_idle_timeout = Duration::from_secs(s.max(1));
    }
    if let Some(s) = cli.shutdown_timeout_secs {
        config.shutdown_timeout = Duration::from_secs(s);
    }
    Ok((config, log_level))
}

fn main() -> ExitCode {
    let cli = Cli::parse();

    if cli.check {
        let path = cli
            .config
            .as_ref()
            .expect("clap requires --config with --check");
        return match Topology::load(path) {
            Ok(topo) => {
                println!("{}: OK", path.display());
                print!("{}", config_file::describe(&topo));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("shoal: {e}");
                ExitCode::from(2)
            }
        };
    }

    let (config, log_level) = match build_config(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("shoal: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(cli.log.as_deref(), log_level.as_deref());

    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = cli.threads {
        builder.worker_threads(n.max(1));
    }
    let runtime = match builder.enable_all().build() {
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
