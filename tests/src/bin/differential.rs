//! The differential test as a command (see `shoal_tests::differential`), plus the two helpers
//! the demo uses: loading generated rows for a config's tables, and printing a route plan.
//!
//! ```text
//! differential --seed 42 --count 10000                 # Shoal over the sharded layout
//! differential --seed 42 --count 1000 --subject copy   # the harness against itself
//! differential --seed 42 --count 2000 --family colo     # one family's generated SELECTs
//! differential --seed 42 --subject 127.0.0.1:8066      # a Shoal you started (loaded through it)
//! differential seed --config .shoal/demo.yaml [--through 127.0.0.1:8066]
//! differential explain --config .shoal/demo.yaml "SELECT ..."
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use mysql_async::{Conn, Opts, OptsBuilder};
use shoal_router::plan::Router;
use shoal_router::topology::Topology;
use shoal_tests::differential::data::{self, Dataset, DirectLoader};
use shoal_tests::differential::queries;
use shoal_tests::differential::{self as diff, Plan, ShoalStart, schema};

#[derive(Parser)]
#[command(
    name = "differential",
    about = "Runs the same generated rows and statements on one unsharded MariaDB (the oracle) and on a subject, and compares every answer",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the comparison (the default).
    Run(RunArgs),
    /// Create the tables a config's schema lists and load generated rows into them.
    Seed(SeedArgs),
    /// Print the route plan of a statement under a config (what EXPLAIN ROUTE shows).
    Explain {
        #[arg(long)]
        config: PathBuf,
        #[arg(long, default_value = schema::SCHEMA)]
        schema: String,
        sql: String,
    },
}

#[derive(Args, Clone)]
struct RunArgs {
    /// Seed of the rows and statements (default: from the clock, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Generated SELECTs, on top of the ~110 hand-written ones.
    #[arg(long, default_value_t = 1000)]
    count: usize,
    /// Rows of `orders` (the other tables scale with it).
    #[arg(long, default_value_t = 600)]
    rows: usize,
    /// Only generated SELECTs of the families whose names start with this (`colo` for the
    /// co-located joins written unqualified, `colo_negative`, `outer_join`, ...), `--count` of
    /// them, without the hand-written ones; the writes run as usual.
    #[arg(long)]
    family: Option<String>,
    /// `shoal`: Shoal started here over the sharded layout on two local MariaDB instances;
    /// `copy`: an unsharded copy in another physical order (the harness checked against itself); `HOST:PORT`: a running
    /// proxy serving the logical schema, which gets the tables and rows through itself.
    #[arg(long, default_value = "shoal")]
    subject: String,
    /// With `--subject shoal`: `direct` places the rows on the datanodes with the router's
    /// plans (reads are tested even if writes through Shoal are not ready); `shoal` loads them
    /// through Shoal (CREATE TABLE and INSERTs).
    #[arg(long, default_value = "direct")]
    load: String,
    /// With `--subject HOST:PORT`: its login and schema.
    #[arg(long, default_value = schema::USER)]
    user: String,
    #[arg(long, default_value = schema::PASSWORD)]
    password: String,
    #[arg(long, default_value = schema::SCHEMA)]
    schema: String,
    /// Write every failure in full (statement, why, both answers) to this file.
    #[arg(long)]
    findings: Option<PathBuf>,
    /// Seconds the subject may take per statement before it counts as a hang.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Skip the Connector/C pass (the prepared SELECTs again and prepared INSERTs into the
    /// date-ruled table through the Python `mariadb` package in .clients/venv, set up by
    /// scripts/install-clients). On by default.
    #[arg(long)]
    no_capi: bool,
}

#[derive(Args)]
struct SeedArgs {
    /// The config whose schema's tables are created and loaded (tables of the harness's
    /// schema only: orders, order_item, account, events, ledger, country).
    #[arg(long)]
    config: PathBuf,
    #[arg(long, default_value = schema::SCHEMA)]
    schema: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Rows of `orders` (the other tables scale with it).
    #[arg(long, default_value_t = 1500)]
    rows: usize,
    /// Load through this proxy (CREATE TABLE and INSERTs) instead of directly on the datanodes.
    #[arg(long)]
    through: Option<String>,
    #[arg(long, default_value = "shoal")]
    user: String,
    #[arg(long, default_value = "shoal")]
    password: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match cli.command {
        Some(Command::Seed(args)) => rt.block_on(seed(args)),
        Some(Command::Explain {
            config,
            schema,
            sql,
        }) => match Topology::load(&config) {
            Ok(t) => {
                print!(
                    "{}",
                    Router::new(Arc::new(t)).explain_text(Some(&schema), &sql)
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: {e}", config.display());
                ExitCode::from(2)
            }
        },
        Some(Command::Run(args)) => rt.block_on(run(args)),
        None => rt.block_on(run(cli.run)),
    }
}

fn addr_opts(addr: &str, user: &str, password: &str, db: Option<&str>) -> Result<Opts, String> {
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| format!("{addr}: expected HOST:PORT"))?;
    let port: u16 = port.parse().map_err(|_| format!("{addr}: bad port"))?;
    Ok(OptsBuilder::default()
        .ip_or_hostname(host.to_string())
        .tcp_port(port)
        .user(Some(user.to_string()))
        .pass(Some(password.to_string()))
        .db_name(db.map(str::to_string))
        .prefer_socket(false)
        .into())
}

async fn run(args: RunArgs) -> ExitCode {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 % 1_000_000_007)
            .unwrap_or(1)
    });
    println!(
        "seed {seed} (rerun with --seed {seed}), {} generated SELECTs, {} orders",
        args.count, args.rows
    );
    let mut plan = Plan::new(seed, args.count, args.rows);
    if let Some(family) = &args.family {
        // The families drawn from streams of their own (the subqueries, issue 49's) as in a
        // full run of the seed; the others generated anew.
        let own: Vec<_> = plan
            .selects
            .iter()
            .filter(|q| {
                q.family.starts_with(family.as_str())
                    && (q.family == diff::subqueries::FAMILY
                        || diff::CROSS_FAMILIES.iter().any(|(f, _)| *f == q.family))
            })
            .cloned()
            .collect();
        plan.short.retain(|q| q.family.starts_with(family.as_str()));
        plan.selects = if own.is_empty() && plan.short.is_empty() {
            queries::generate_only(seed, args.count, &plan.data, family)
        } else {
            own
        };
        if plan.selects.is_empty() && plan.short.is_empty() {
            eprintln!("--family {family}: no generated SELECT has such a family");
            return ExitCode::from(2);
        }
    }
    plan.progress = true;
    if !args.no_capi {
        match shoal_tests::differential::capi::Capi::find() {
            Ok(c) => plan.capi = Some(c),
            Err(e) => {
                eprintln!("the Connector/C client: {e}\n(or pass --no-capi)");
                return ExitCode::from(2);
            }
        }
    }
    plan.timeout = std::time::Duration::from_secs(args.timeout.max(1));
    println!(
        "{} rows, {} SELECTs, {} writes; starting two MariaDB instances...",
        plan.data.total_rows(),
        plan.selects.len(),
        plan.writes.len()
    );
    let cluster = diff::start_cluster().await;
    let mut oracle = diff::load_oracle(&cluster, &plan.data).await;
    let mut _shoal = None;
    let (name, subject) = match args.subject.as_str() {
        "copy" => {
            let mut copy = diff::connect(cluster.opts(0, Some(diff::COPY_DB)), "the copy").await;
            if let Err(e) = data::load_logical_as(&mut copy, &plan.data, Some(seed ^ 1)).await {
                eprintln!("loading the copy: {e}");
                return ExitCode::from(2);
            }
            let _ = copy.disconnect().await;
            (
                "unsharded copy (MyISAM, rows shuffled)".to_string(),
                cluster.opts(0, Some(diff::COPY_DB)),
            )
        }
        "shoal" => {
            let (yaml, topo) = diff::sharded_topology(&cluster);
            let path = shoal_tests::scratch_dir().join("differential.yaml");
            std::fs::write(&path, yaml).expect("write the config");
            let shoal = match diff::start_shoal(&path) {
                ShoalStart::Running(p) => p,
                ShoalStart::RefusesSharded(line) => {
                    eprintln!(
                        "this build of Shoal refuses sharded configs at startup, so there is nothing to compare yet:\n  {line}"
                    );
                    return ExitCode::from(3);
                }
            };
            let opts = shoal.opts_as(schema::USER, schema::PASSWORD, Some(schema::SCHEMA));
            let mut conn = diff::connect(opts.clone(), "Shoal").await;
            let loaded = match args.load.as_str() {
                "direct" => {
                    let mut loader = match DirectLoader::connect(topo.clone(), schema::SCHEMA).await
                    {
                        Ok(l) => l,
                        Err(e) => {
                            eprintln!("{e}");
                            return ExitCode::from(2);
                        }
                    };
                    let r = loader.load(&plan.data).await;
                    loader.disconnect().await;
                    r
                }
                "shoal" => data::load_logical(&mut conn, &plan.data).await,
                other => Err(format!("--load {other}: expected direct or shoal")),
            };
            if let Err(e) = loaded {
                eprintln!("loading the sharded side ({}): {e}", args.load);
                return ExitCode::from(2);
            }
            let name = format!("Shoal {} (sharded, loaded {})", shoal.addr(), args.load);
            _shoal = Some(shoal);
            let _ = conn.disconnect().await;
            (name, opts)
        }
        addr => {
            let opts = match addr_opts(addr, &args.user, &args.password, Some(&args.schema)) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("--subject {e}");
                    return ExitCode::from(2);
                }
            };
            let mut conn = match Conn::new(opts.clone()).await {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("cannot connect to {addr}: {e}");
                    return ExitCode::from(2);
                }
            };
            if let Err(e) = data::load_logical(&mut conn, &plan.data).await {
                eprintln!("loading through {addr}: {e}");
                return ExitCode::from(2);
            }
            let _ = conn.disconnect().await;
            (addr.to_string(), opts)
        }
    };
    let report = diff::run(&plan, &name, &mut oracle, subject).await;
    println!("{report}");
    if let Some(path) = &args.findings {
        // Every failure in full (the report lists the first few of each kind).
        let all: Vec<String> = report
            .mismatches
            .iter()
            .chain(&report.errors)
            .chain(&report.oracle_errors)
            .map(|f| f.to_string())
            .collect();
        match std::fs::write(path, all.join("\n")) {
            Ok(()) => eprintln!("{} failures written to {}", all.len(), path.display()),
            Err(e) => eprintln!("--findings {}: {e}", path.display()),
        }
    }
    if report.failures() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn seed(args: SeedArgs) -> ExitCode {
    let topo = match Topology::load(&args.config) {
        Ok(t) => Arc::new(t),
        Err(e) => {
            eprintln!("{}: {e}", args.config.display());
            return ExitCode::from(2);
        }
    };
    let Some(schema_def) = topo.schema(&args.schema) else {
        eprintln!("{}: no schema {}", args.config.display(), args.schema);
        return ExitCode::from(2);
    };
    let listed: Vec<&str> = schema::TABLES
        .iter()
        .map(|t| t.name)
        .filter(|n| schema_def.table(n).is_some())
        .collect();
    let data = data::subset(&Dataset::generate(args.seed, args.rows), &listed);
    let result = match &args.through {
        Some(addr) => {
            let opts = match addr_opts(addr, &args.user, &args.password, Some(&args.schema)) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("--through {e}");
                    return ExitCode::from(2);
                }
            };
            match Conn::new(opts).await {
                Ok(mut conn) => data::load_logical(&mut conn, &data).await,
                Err(e) => Err(format!("cannot connect to {addr}: {e}")),
            }
        }
        None => match DirectLoader::connect(topo.clone(), &args.schema).await {
            Ok(mut loader) => {
                let r = loader.load(&data).await;
                loader.disconnect().await;
                r
            }
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => {
            let counts: Vec<String> = data
                .tables
                .iter()
                .map(|(t, rows)| format!("{t} {}", rows.len()))
                .collect();
            println!(
                "seeded {} rows ({}) {}",
                data.total_rows(),
                counts.join(", "),
                match &args.through {
                    Some(addr) => format!("through Shoal at {addr}"),
                    None => "directly on the datanodes, placed by the router's plans".to_string(),
                }
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("seeding failed: {e}");
            ExitCode::FAILURE
        }
    }
}
