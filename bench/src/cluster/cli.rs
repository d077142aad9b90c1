//! `shoal-bench cluster up|status|down`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::{
    APP_PASSWORD, APP_USER, Cluster, ClusterSpec, LaunchError, Role, StateEntry, admin_opts_for,
    replication, state, stop_dir,
};

const DEFAULT_DIR: &str = ".shoal/cluster";

#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// Start primaries (and replicas) in DIR and leave them running.
    Up {
        /// Number of primaries.
        #[arg(long, default_value_t = 1)]
        primaries: usize,
        /// Replicas per primary.
        #[arg(long, default_value_t = 0)]
        replicas: usize,
        /// First port; instance i gets BASE_PORT + i. Default: free ports picked at random.
        #[arg(long)]
        base_port: Option<u16>,
        /// Where the instances and the state file live.
        #[arg(long, default_value = DEFAULT_DIR)]
        dir: PathBuf,
        /// Databases to create on every primary (comma-separated).
        #[arg(long, value_delimiter = ',')]
        databases: Vec<String>,
    },
    /// Show what `up` started in DIR (exit status 1 unless every instance is up).
    Status {
        #[arg(long, default_value = DEFAULT_DIR)]
        dir: PathBuf,
    },
    /// Stop what `up` started in DIR and remove its instance dirs.
    Down {
        #[arg(long, default_value = DEFAULT_DIR)]
        dir: PathBuf,
    },
}

/// Runs the command; `Ok(false)` means "ran, but report failure through the exit status".
pub async fn run(cmd: ClusterCommand) -> Result<bool, LaunchError> {
    match cmd {
        ClusterCommand::Up {
            primaries,
            replicas,
            base_port,
            dir,
            databases,
        } => {
            let spec = ClusterSpec {
                primaries,
                replicas_per_primary: replicas,
                databases,
                base_port,
                dir: Some(dir),
            };
            let cluster = Cluster::start_detached(spec).await?;
            for inst in cluster.instances() {
                println!(
                    "{}",
                    describe(&inst.name, inst.role, &inst.addr(), inst.pid, &cluster)
                );
            }
            println!("user {APP_USER}");
            println!("password {APP_PASSWORD}");
            eprintln!(
                "started {} instances in {:.2} s in {}; stop them with `shoal-bench cluster down --dir {}`",
                cluster.instances().len(),
                cluster.startup_time().as_secs_f64(),
                cluster.dir().display(),
                cluster.dir().display(),
            );
            Ok(true)
        }
        ClusterCommand::Status { dir } => status(&dir).await,
        ClusterCommand::Down { dir } => {
            let dir_for_task = dir.clone();
            let stopped = tokio::task::spawn_blocking(move || stop_dir(&dir_for_task))
                .await
                .expect("stopping the cluster panicked")?;
            println!("stopped {stopped} instances in {}", dir.display());
            Ok(true)
        }
    }
}

fn describe(name: &str, role: Role, addr: &str, pid: u32, cluster: &Cluster) -> String {
    match role {
        Role::Primary => format!("primary {addr} name={name} pid={pid}"),
        Role::Replica { of } => format!(
            "replica {addr} name={name} of={} pid={pid}",
            cluster.instances()[of].name
        ),
    }
}

async fn status(dir: &Path) -> Result<bool, LaunchError> {
    let Some(entries) = state::read(dir)? else {
        println!("no cluster in {}", dir.display());
        return Ok(false);
    };
    let mut all_up = true;
    for e in &entries {
        let (line, up) = entry_status(e, &entries).await;
        all_up &= up;
        println!("{line}");
    }
    println!("user {APP_USER}");
    println!("password {APP_PASSWORD}");
    Ok(all_up)
}

async fn entry_status(e: &StateEntry, all: &[StateEntry]) -> (String, bool) {
    let head = match e.role {
        Role::Primary => format!("primary {} name={} pid={}", e.addr(), e.name, e.pid),
        Role::Replica { of } => format!(
            "replica {} name={} of={} pid={}",
            e.addr(),
            e.name,
            all.get(of).map(|p| p.name.as_str()).unwrap_or("?"),
            e.pid
        ),
    };
    if !e.is_running() {
        return (format!("{head} state=stopped"), false);
    }
    let probe = tokio::time::timeout(Duration::from_secs(3), async {
        let mut conn = mysql_async::Conn::new(admin_opts_for(e.port)).await?;
        let status = match e.role {
            Role::Primary => None,
            Role::Replica { .. } => replication::slave_status(&mut conn).await?,
        };
        conn.query_drop("DO 1").await?;
        let _ = conn.disconnect().await;
        Ok::<_, mysql_async::Error>(status)
    })
    .await;
    match (e.role, probe) {
        (_, Err(_)) => (
            format!("{head} state=running answering=no (timeout)"),
            false,
        ),
        (_, Ok(Err(err))) => (format!("{head} state=running answering=no ({err})"), false),
        (Role::Primary, Ok(Ok(_))) => (format!("{head} state=up"), true),
        (Role::Replica { .. }, Ok(Ok(Some(s)))) if s.is_replicating() => {
            (format!("{head} state=up replicating=yes"), true)
        }
        (Role::Replica { .. }, Ok(Ok(s))) => (
            format!(
                "{head} state=up replicating=no ({})",
                s.map(|s| format!(
                    "io={} sql={} {} {}",
                    s.io_running, s.sql_running, s.last_io_error, s.last_sql_error
                ))
                .unwrap_or_else(|| "not configured".into())
            ),
            false,
        ),
    }
}
