//! The `shoal` binary.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use shoal_proxy::config::{BackendSpec, ProxyConfig, TlsFiles};
use shoal_proxy::config_file;
use shoal_proxy::reload::Reloader;
use shoal_proxy::server::Proxy;
use shoal_router::topology::Topology;
use tracing_subscriber::EnvFilter;

/// Shoal: a MySQL-protocol sharding proxy.
///
/// Quick mode (no config file): `shoal --listen 127.0.0.1:8066 --backend mysql://USER:PASS@HOST:PORT/DB`
/// serves one backend; clients log in with the backend's user and password.
#[derive(Debug, Clone, Parser)]
#[command(name = "shoal", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Address to listen on [default: 127.0.0.1:8066, or server.listen of the config].
    #[arg(long)]
    listen: Option<String>,
    /// Quick mode: the one backend, as mysql://USER:PASS@HOST:PORT[/DB].
    #[arg(long, conflicts_with = "config")]
    backend: Option<String>,
    /// Configuration file (YAML).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Quick mode: the login user (the backend's) may run Shoal's administration statements
    /// (SHOW SHOAL ...) and KILL any session; without it they get error 1227. With a config
    /// file, `users[].admin` says who may.
    #[arg(long, requires = "backend")]
    admin: bool,
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
    /// Threads serving clients (default: one per CPU core).
    #[arg(long)]
    threads: Option<usize>,
    /// How the threads share the work: `per-core` (the default), each thread its own runtime
    /// with the sessions given to it (a statement never wakes another thread), or
    /// `shared`, one multi-threaded runtime whose workers take any session's work (measured:
    /// more CPU per query and less QPS on 2 cores, docs/benchmarks.md).
    #[arg(long, value_enum, default_value_t = RuntimeKind::PerCore)]
    runtime: RuntimeKind,
    /// Linux scheduling policy of the serving threads: `batch` (the default; a thread woken by
    /// a packet does not preempt the one running, it relays what arrived meanwhile when it
    /// runs: less CPU per query on busy cores, measured in docs/benchmarks.md) or `normal`.
    #[arg(long, value_enum, default_value_t = CpuPolicy::Batch)]
    cpu_policy: CpuPolicy,
    /// Log filter (e.g. `info`, `shoal_proxy=debug`); default from SHOAL_LOG, RUST_LOG, the
    /// config's server.log_level, else info.
    #[arg(long)]
    log: Option<String>,
    /// Largest packet a client may send, in bytes (error 1153 and the connection closed beyond) [default: 67108864, or server.max_allowed_packet].
    #[arg(long)]
    max_allowed_packet: Option<u64>,
    /// Clients not logged in within this many seconds are disconnected [default: 10].
    #[arg(long)]
    handshake_timeout_secs: Option<u64>,
    /// Backend statements not answered within this many milliseconds are interrupted (KILL
    /// QUERY; the client gets error 1969); 0 = off [default: server.query_timeout, else off].
    #[arg(long)]
    query_timeout_ms: Option<u64>,
    /// TLS to clients: certificate chain (PEM); needs --tls-key [default: server.tls.cert].
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<String>,
    /// TLS to clients: private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<String>,
    /// Refuse clients that do not use TLS (error 3159).
    #[arg(long)]
    tls_required: bool,
    /// RSA private key (PEM) for caching_sha2_password over plain TCP [default: generated at start].
    #[arg(long)]
    rsa_key: Option<String>,
    /// Admin HTTP listener (/metrics, /health, /ready), as ip:port [default: server.admin_listen, else off].
    #[arg(long)]
    admin_listen: Option<String>,
    /// Do not count statements for /metrics (the live state is still served) [default: server.metrics].
    #[arg(long)]
    no_metrics: bool,
    /// Do not keep query digests (in quick mode each statement is tokenized for its digest)
    /// [default: server.digests].
    #[arg(long)]
    no_digests: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum CpuPolicy {
    Batch,
    Normal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RuntimeKind {
    PerCore,
    Shared,
}

#[derive(Debug, Clone, clap::Subcommand)]
enum Command {
    /// Prints the hashes of a password for `users[].password` (reads it from stdin, one line).
    HashPassword,
    /// Writes a self-signed CA and a server certificate signed by it (ca.pem, server-cert.pem,
    /// server-key.pem) for trying TLS.
    GenCert {
        /// Directory to write the files into.
        #[arg(long)]
        dir: PathBuf,
        /// Names the server certificate is valid for.
        #[arg(long, default_values_t = ["localhost".to_string(), "127.0.0.1".to_string()])]
        name: Vec<String>,
    },
}

fn hash_password() -> ExitCode {
    let mut line = String::new();
    if let Err(e) = std::io::stdin().read_line(&mut line) {
        eprintln!("shoal: cannot read the password: {e}");
        return ExitCode::FAILURE;
    }
    let pw = line.trim_end_matches(['\n', '\r']);
    println!(
        "mysql_native_password: {}",
        shoal_proxy::wire::auth::native_hash(pw)
    );
    println!(
        "caching_sha2_password: {}",
        shoal_proxy::wire::auth::sha2_hash(pw)
    );
    ExitCode::SUCCESS
}

fn gen_cert(dir: &std::path::Path, names: &[String]) -> ExitCode {
    let (ca, cert, key) = match shoal_proxy::wire::tls::generate_demo_certs(names) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("shoal: cannot make certificates: {e}");
            return ExitCode::FAILURE;
        }
    };
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text);
    if let Err(e) = std::fs::create_dir_all(dir)
        .and_then(|_| write("ca.pem", &ca))
        .and_then(|_| write("server-cert.pem", &cert))
        .and_then(|_| write("server-key.pem", &key))
    {
        eprintln!("shoal: cannot write into {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    println!("{}", dir.display());
    ExitCode::SUCCESS
}

/// `--check`'s look at the XA decision log's server (schemas with `transactions: xa` only):
/// a warning for each setting that can lose a committed decision (see
/// `shoal_proxy::xa::durability`). A server that cannot be asked is a note, not a failure:
/// the file is valid either way.
fn check_xa_log(topo: &Topology) {
    let xa = topo
        .schemas
        .values()
        .any(|s| s.transactions == shoal_router::config::Transactions::Xa);
    let Ok(cfg) = config_file::proxy_config(topo, None) else {
        return;
    };
    let (Some(routing), true) = (&cfg.routing, xa) else {
        return;
    };
    let Some((spec, _)) = routing.hosts.get(shoal_proxy::xa::log_datahost(topo)) else {
        return;
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(_) => return,
    };
    match runtime.block_on(shoal_proxy::xa::durability::check(spec)) {
        Ok(found) => {
            for w in found {
                println!(
                    "warning: the XA decision log's server {} can lose a committed decision: {w} \
                     (or use semi-synchronous replication; see docs/operations.md)",
                    spec.addr()
                );
            }
        }
        Err(e) => println!(
            "note: the XA decision log's server {} could not be asked for its durability \
             settings: {e}",
            spec.addr()
        ),
    }
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

/// Builds the runtime settings from the command line (and config file, whose topology comes
/// along), or says why not. A reload calls it again: the same validation as the start.
fn build_config(cli: &Cli) -> Result<(ProxyConfig, Option<Topology>), String> {
    let (mut config, topology) = if let Some(path) = &cli.config {
        let topo = Topology::load(path).map_err(|e| e.to_string())?;
        let mut cfg = config_file::proxy_config(&topo, cli.listen.as_deref())?;
        cfg.config_path = Some(path.display().to_string());
        (cfg, Some(topo))
    } else {
        let url = cli.backend.as_deref().ok_or(
            "give --backend mysql://USER:PASS@HOST:PORT[/DB] (quick mode) or --config FILE",
        )?;
        let backend = BackendSpec::parse_url(url).map_err(|e| format!("--backend: {e}"))?;
        let listen = cli
            .listen
            .clone()
            .unwrap_or_else(|| "127.0.0.1:8066".into());
        let mut cfg = ProxyConfig::quick(listen, backend);
        for u in &mut cfg.users {
            u.admin = cli.admin;
        }
        (cfg, None)
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
    if let Some(n) = cli.max_allowed_packet {
        if !(1024..=1 << 30).contains(&n) {
            return Err("--max-allowed-packet must be between 1024 and 1073741824".into());
        }
        config.max_packet = n as usize;
    }
    if let Some(s) = cli.handshake_timeout_secs {
        config.handshake_timeout = Duration::from_secs(s.max(1));
    }
    if let Some(ms) = cli.query_timeout_ms {
        if ms > 365 * 24 * 3600 * 1000 {
            return Err("--query-timeout-ms must be at most a year".into());
        }
        config.query_timeout = (ms > 0).then(|| Duration::from_millis(ms));
    }
    if let (Some(cert), Some(key)) = (&cli.tls_cert, &cli.tls_key) {
        config.tls = Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            required: cli.tls_required,
        });
    } else if cli.tls_required {
        match config.tls.as_mut() {
            Some(t) => t.required = true,
            None => return Err("--tls-required needs --tls-cert/--tls-key or server.tls".into()),
        }
    }
    if let Some(k) = &cli.rsa_key {
        config.rsa_private_key = Some(k.clone());
    }
    if let Some(a) = &cli.admin_listen {
        if a.parse::<std::net::SocketAddr>().is_err() {
            return Err(format!("--admin-listen {a:?} is not ip:port"));
        }
        config.observe.admin_listen = Some(a.clone());
    }
    if cli.no_metrics {
        config.observe.metrics = false;
    }
    if cli.no_digests {
        config.observe.digests = false;
    }
    Ok((config, topology))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::HashPassword) => return hash_password(),
        Some(Command::GenCert { dir, name }) => return gen_cert(dir, name),
        None => {}
    }

    if cli.check {
        let path = cli
            .config
            .as_ref()
            .expect("clap requires --config with --check");
        return match Topology::load(path) {
            Ok(topo) => {
                println!("{}: OK", path.display());
                print!("{}", config_file::describe(&topo));
                check_xa_log(&topo);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("shoal: {e}");
                ExitCode::from(2)
            }
        };
    }

    let (config, topology) = match build_config(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("shoal: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(
        cli.log.as_deref(),
        topology.as_ref().map(|t| t.server.log_level.as_str()),
    );
    // SIGHUP and RELOAD SHOAL CONFIG read the file again with the same command line.
    let reloader = cli.config.clone().map(|path| {
        let cli = cli.clone();
        Reloader::new(path, move || {
            let (config, topology) = build_config(&cli)?;
            Ok((config, topology.expect("a config file gives a topology")))
        })
    });

    // The workers relay statements and park between them; timers run on a thread of their own
    // (see `timers`), so the workers' runtime has no time driver to turn at each park.
    if let Err(e) = shoal_proxy::timers::start() {
        eprintln!("shoal: cannot start the timer thread: {e}");
        return ExitCode::FAILURE;
    }
    let threads = cli.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let threads = threads.max(1);
    // Before the runtime and the cores start: they inherit it (see `thread_policy`); the
    // timer thread, started above, does not.
    if cli.cpu_policy == CpuPolicy::Batch {
        shoal_proxy::thread_policy::apply_batch();
    }
    let (mut builder, cores) = match cli.runtime {
        // The first core's thread runs this runtime; `Proxy::run` starts the others.
        RuntimeKind::PerCore => (tokio::runtime::Builder::new_current_thread(), threads),
        RuntimeKind::Shared => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(threads);
            (b, 1)
        }
    };
    // Every thread the runtime starts (the shared runtime's workers) serves with the stack of
    // the cores (see `cores`).
    builder.thread_stack_size(shoal_proxy::cores::STACK_SIZE);
    let runtime = match builder.enable_io().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("shoal: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Not on the main thread, whose stack is whatever `ulimit -s` gave the process: on a
    // thread of the cores' stack size, like every other serving thread.
    let serve = move || {
        runtime.block_on(async move {
            let proxy = match Proxy::bind_per_core(config, topology, reloader, cores).await {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("shoal: cannot listen: {e}");
                    return ExitCode::FAILURE;
                }
            };
            proxy.run().await;
            ExitCode::SUCCESS
        })
    };
    match shoal_proxy::cores::serving_thread(0).spawn(serve) {
        Ok(core0) => core0.join().unwrap_or(ExitCode::FAILURE),
        Err(e) => {
            eprintln!("shoal: cannot start the first core's thread: {e}");
            ExitCode::FAILURE
        }
    }
}
