//! One MariaDB server: its directory, config file, process and port.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::error::{LaunchError, Result};
use super::mariadb::Binaries;
use super::ports::{self, PortLease};
use super::process::{Lifetime, ServerProcess};
use super::template::{self, REDO_LOG_SIZE};
use super::{Role, admin_opts_for};

/// How long a server may take to answer after it was spawned. Generous: five helpers share two
/// cores and a busy machine can make InnoDB start-up slow.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// Start attempts with a fresh random port when the server finds its port taken at bind time.
const BIND_ATTEMPTS: usize = 5;

/// A running MariaDB server started by the launcher.
#[derive(Debug)]
pub struct Instance {
    pub role: Role,
    pub host: String,
    pub port: u16,
    pub pid: u32,
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) process: Option<ServerProcess>,
    pub(crate) _lease: Option<PortLease>,
}

impl Instance {
    /// "127.0.0.1:PORT"
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Short name, unique in its cluster: `p0` for primary 0, `p0r1` for its second replica.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The instance's own directory (config, data dir, error log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's error log, the first place to look when an instance misbehaves.
    pub fn error_log(&self) -> PathBuf {
        self.dir.join("error.log")
    }

    /// The config file the server was started with (`--defaults-file`); with the pid it
    /// identifies the process, see [`super::is_our_server`].
    pub fn defaults_file(&self) -> PathBuf {
        defaults_file(&self.dir)
    }
}

pub(crate) fn defaults_file(dir: &Path) -> PathBuf {
    dir.join("my.cnf")
}

/// What to start.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) name: String,
    pub(crate) role: Role,
    pub(crate) server_id: usize,
    /// `None`: pick a free port.
    pub(crate) port: Option<u16>,
    pub(crate) dir: PathBuf,
    pub(crate) lifetime: Lifetime,
    /// Extra lines for the `[mariadbd]` section.
    pub(crate) server_options: Vec<String>,
}

/// Copies the template, writes the config, starts the server and waits until it answers.
pub(crate) async fn launch(bins: Arc<Binaries>, template: PathBuf, plan: Plan) -> Result<Instance> {
    let prepared = {
        let plan = plan.clone();
        tokio::task::spawn_blocking(move || prepare_dir(&template, &plan))
            .await
            .expect("preparing an instance dir panicked")
    };
    prepared?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let lease = match plan.port {
            Some(port) => ports::lease_exact(port)?,
            None => ports::lease_any()?,
        };
        let port = lease.port;
        write_config(&plan, port)?;
        let process = spawn(&bins, &plan)?;
        let mut instance = Instance {
            role: plan.role,
            host: "127.0.0.1".into(),
            port,
            pid: process.pid(),
            name: plan.name.clone(),
            dir: plan.dir.clone(),
            process: Some(process),
            _lease: Some(lease),
        };
        match wait_ready(&mut instance).await {
            Ok(()) => return Ok(instance),
            Err(Startup::BindConflict(err)) if plan.port.is_none() && attempt < BIND_ATTEMPTS => {
                tracing::debug!(
                    "{}: port {port} taken at bind time, retrying: {err}",
                    plan.name
                );
                drop(instance);
                continue;
            }
            Err(Startup::BindConflict(err) | Startup::Failed(err)) => return Err(err),
        }
    }
}

/// Starts a stopped instance again with its data dir, config and port (after a crash, InnoDB
/// recovers), and waits until it answers.
pub(crate) async fn relaunch(
    bins: &Binaries,
    instance: &mut Instance,
    lifetime: Lifetime,
) -> Result<()> {
    let plan = Plan {
        name: instance.name.clone(),
        role: instance.role,
        server_id: 0,
        port: Some(instance.port),
        dir: instance.dir.clone(),
        lifetime,
        server_options: Vec::new(),
    };
    let process = spawn(bins, &plan)?;
    instance.pid = process.pid();
    instance.process = Some(process);
    match wait_ready(instance).await {
        Ok(()) => Ok(()),
        Err(Startup::BindConflict(e) | Startup::Failed(e)) => Err(e),
    }
}

fn prepare_dir(template: &Path, plan: &Plan) -> Result<()> {
    if plan.dir.exists() {
        fs::remove_dir_all(&plan.dir).map_err(LaunchError::io(format!(
            "removing old {}",
            plan.dir.display()
        )))?;
    }
    fs::create_dir_all(&plan.dir)
        .map_err(LaunchError::io(format!("creating {}", plan.dir.display())))?;
    let tmp = plan.dir.join("tmp");
    fs::create_dir_all(&tmp).map_err(LaunchError::io(format!("creating {}", tmp.display())))?;
    template::copy_to(template, &plan.dir.join("data"))
}

/// The unix socket lives in the instance dir unless that path is too long for `sun_path`
/// (108 bytes); it must be set either way, or the server would take the system server's socket.
fn socket_path(plan: &Plan, port: u16) -> PathBuf {
    let inside = plan.dir.join("mariadbd.sock");
    if inside.as_os_str().len() < 100 {
        inside
    } else {
        std::env::temp_dir().join(format!("shoal-{}-{port}.sock", std::process::id()))
    }
}

/// Settings chosen so that 8+ instances fit on a small machine and start in well under a second.
/// Durability is traded for speed (`innodb_flush_log_at_trx_commit=2`, `sync_binlog=0`): these
/// are throwaway test and benchmark backends, and a power cut is not a test case.
fn write_config(plan: &Plan, port: u16) -> Result<()> {
    let dir = &plan.dir;
    let mut cnf = format!(
        "# Written by shoal-bench's cluster launcher; the server is started with --defaults-file,
# so no other option file (e.g. /etc/mysql) is read.
[mariadbd]
datadir={data}
port={port}
bind-address=127.0.0.1
socket={socket}
pid-file={dir}/mariadbd.pid
# Private: at start-up a server deletes every `#sql*` file in its tmpdir, which in a shared /tmp
# would be the in-flight temporary tables of every other instance on the machine.
tmpdir={dir}/tmp
log-error={dir}/error.log
server-id={server_id}
log-bin=binlog
log-slave-updates=ON
binlog-format=ROW
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
skip-name-resolve
performance-schema=OFF
max-connections=1000
# Room for the 20 MiB BLOBs the end-to-end tests send.
max-allowed-packet=64M
innodb-buffer-pool-size=64M
innodb-log-file-size={REDO_LOG_SIZE}
innodb-flush-log-at-trx-commit=2
sync-binlog=0
# Native AIO reserves io_setup(2) slots from a machine-wide pool (fs.aio-max-nr); with many
# instances from parallel tests it runs out, so use InnoDB's own I/O threads.
innodb-use-native-aio=0
key-buffer-size=8M
",
        data = dir.join("data").display(),
        socket = socket_path(plan, port).display(),
        dir = dir.display(),
        server_id = plan.server_id,
    );
    if let Role::Replica { .. } = plan.role {
        cnf.push_str("read-only=1\nskip-slave-start\nslave-net-timeout=10\n");
    }
    for option in &plan.server_options {
        cnf.push_str(option);
        cnf.push('\n');
    }
    if template::is_root() {
        // mariadbd refuses to run as root unless told to.
        cnf.push_str("user=root\n");
    }
    let path = defaults_file(dir);
    fs::write(&path, cnf).map_err(LaunchError::io(format!("writing {}", path.display())))
}

fn spawn(bins: &Binaries, plan: &Plan) -> Result<ServerProcess> {
    let mut cmd = Command::new(&bins.server);
    cmd.arg(format!(
        "--defaults-file={}",
        defaults_file(&plan.dir).display()
    ))
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .current_dir(&plan.dir);
    ServerProcess::spawn(cmd, plan.lifetime).map_err(LaunchError::io(format!(
        "starting {} for {}",
        bins.server.display(),
        plan.name
    )))
}

enum Startup {
    BindConflict(LaunchError),
    Failed(LaunchError),
}

async fn wait_ready(instance: &mut Instance) -> Result<(), Startup> {
    let started = Instant::now();
    let opts = admin_opts_for(instance.port);
    loop {
        let exited = instance
            .process
            .as_mut()
            .map(|p| p.has_exited())
            .unwrap_or(true);
        if exited {
            let log = instance.error_log();
            let log_tail = tail(&log, 15);
            let err = LaunchError::Exited {
                name: instance.name.clone(),
                port: instance.port,
                log,
                log_tail: log_tail.clone(),
            };
            let conflict = log_tail.contains("Address already in use")
                || log_tail.contains("Do you already have another server running");
            return Err(if conflict {
                Startup::BindConflict(err)
            } else {
                Startup::Failed(err)
            });
        }
        let attempt = tokio::time::timeout(Duration::from_secs(5), async {
            let mut conn = mysql_async::Conn::new(opts.clone()).await?;
            conn.query_drop("DO 1").await?;
            conn.disconnect().await
        })
        .await;
        if let Ok(Ok(())) = attempt {
            tracing::debug!(
                "{} answered on port {} after {:?}",
                instance.name,
                instance.port,
                started.elapsed()
            );
            return Ok(());
        }
        if started.elapsed() > READY_TIMEOUT {
            return Err(Startup::Failed(LaunchError::NotReady {
                name: instance.name.clone(),
                port: instance.port,
                secs: READY_TIMEOUT.as_secs(),
                log: instance.error_log(),
            }));
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
}

/// The last `lines` lines of a (small) log file, for error messages.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
