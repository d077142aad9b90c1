//! Local MariaDB backends for tests, benchmarks and the demo: N primaries, each with R replicas
//! that really replicate from it (binlog + GTID, `read_only=1`), every instance on its own free
//! port on 127.0.0.1 with its own data dir.
//!
//! Start-up is fast because `mariadb-install-db` runs once per MariaDB version (the result is
//! cached, see [`template`]), then each instance gets a copy of that data dir and all instances
//! start in parallel. Everything a `Cluster` started is stopped by pid when it is dropped — also
//! when a test panics — and, for library use, killed by the kernel if the process itself dies.
//!
//! Instances are ordered primaries first (`p0`, `p1`, ...), then replicas grouped by primary
//! (`p0r0`, `p0r1`, `p1r0`, ...); [`Cluster::opts`] indexes into that order.

mod error;
mod instance;
mod mariadb;
mod ports;
mod process;
mod replication;
pub mod state;
pub mod status;
mod template;

pub mod cli;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Opts, OptsBuilder};

pub use error::LaunchError;
pub use instance::Instance;
pub use mariadb::Binaries;
pub use process::is_our_server;
pub use replication::SlaveStatus;
pub use state::StateEntry;

use error::Result;
use instance::Plan;
use process::Lifetime;

/// The application user every instance has: all privileges except READ ONLY ADMIN.
pub const APP_USER: &str = "shoal";
pub const APP_PASSWORD: &str = "shoal";
/// Administrative account (`root@127.0.0.1`, no password): only for the launcher and for tests
/// that must do what the application user may not (e.g. write to a replica).
pub const ADMIN_USER: &str = "root";
pub(crate) const REPL_USER: &str = "shoal_repl";
pub(crate) const REPL_PASSWORD: &str = "shoal_repl";

/// What to start.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// Number of primaries; default 1.
    pub primaries: usize,
    /// Replicas per primary; default 0.
    pub replicas_per_primary: usize,
    /// Databases created on every primary (and so, by replication, on its replicas).
    pub databases: Vec<String>,
    /// `None`: free ports picked by the launcher (never 3306). `Some(p)`: instance `i` (in
    /// [`Cluster::instances`] order) gets port `p + i`.
    pub base_port: Option<u16>,
    /// `None`: a fresh temp dir, removed on drop. `Some(d)`: instances live in `d/<name>`, kept
    /// after stop for post-mortems; a state file in `d` lets `shoal-bench cluster down` clean up.
    pub dir: Option<PathBuf>,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            primaries: 1,
            replicas_per_primary: 0,
            databases: Vec::new(),
            base_port: None,
            dir: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Primary,
    /// `of` is the index of the primary it replicates from.
    Replica {
        of: usize,
    },
}

/// Running instances; stopped on drop.
#[derive(Debug)]
pub struct Cluster {
    instances: Vec<Instance>,
    dir: PathBuf,
    remove_dir: bool,
    lifetime: Lifetime,
    stopped: bool,
    startup: Duration,
}

impl Cluster {
    /// Starts the instances, creates the databases, starts replication and waits until every
    /// replica has caught up. The instances die with this `Cluster` (or with the process).
    pub async fn start(spec: ClusterSpec) -> Result<Cluster, LaunchError> {
        Self::start_with(spec, Lifetime::Owned, &[]).await
    }

    /// Like [`Cluster::start`], with `server_options` (e.g. `ssl-cert=/path`) added to the
    /// `[mariadbd]` section of every instance's config.
    pub async fn start_with_options(
        spec: ClusterSpec,
        server_options: &[String],
    ) -> Result<Cluster, LaunchError> {
        Self::start_with(spec, Lifetime::Owned, server_options).await
    }

    /// Like [`Cluster::start`], but the instances outlive this process (what `cluster up` does):
    /// dropping the `Cluster` leaves them running, [`Cluster::stop`] or [`stop_dir`] stops them.
    /// Needs `spec.dir`, where the state file is written.
    pub async fn start_detached(spec: ClusterSpec) -> Result<Cluster, LaunchError> {
        if spec.dir.is_none() {
            return Err(LaunchError::Spec(
                "a detached cluster needs a dir to record its state in".into(),
            ));
        }
        Self::start_with(spec, Lifetime::Detached, &[]).await
    }

    async fn start_with(
        spec: ClusterSpec,
        lifetime: Lifetime,
        server_options: &[String],
    ) -> Result<Cluster> {
        let started = Instant::now();
        validate(&spec)?;
        let (bins, template) = tokio::task::spawn_blocking(|| -> Result<_> {
            let bins = Binaries::find()?;
            let template = template::ensure(&bins)?;
            Ok((bins, template))
        })
        .await
        .expect("finding MariaDB panicked")?;
        let bins = Arc::new(bins);

        let (dir, remove_dir) = match &spec.dir {
            Some(dir) => (prepare_explicit_dir(dir)?, false),
            None => (make_temp_dir()?, true),
        };
        let mut cluster = Cluster {
            instances: Vec::new(),
            dir,
            remove_dir,
            lifetime,
            stopped: false,
            startup: Duration::ZERO,
        };
        // On any error below, stop what did start (also for a detached cluster) before returning.
        match cluster
            .bring_up(&spec, bins, template, server_options)
            .await
        {
            Ok(()) => {
                cluster.startup = started.elapsed();
                Ok(cluster)
            }
            Err(e) => {
                cluster.stop();
                Err(e)
            }
        }
    }

    async fn bring_up(
        &mut self,
        spec: &ClusterSpec,
        bins: Arc<Binaries>,
        template: PathBuf,
        server_options: &[String],
    ) -> Result<()> {
        let plans = plan(spec, &self.dir, self.lifetime, server_options);
        let handles: Vec<_> = plans
            .into_iter()
            .map(|plan| tokio::spawn(instance::launch(bins.clone(), template.clone(), plan)))
            .collect();
        // Await every launch, even after a failure, so no task still writes into the dir while
        // it is being cleaned up; failed launches have already killed their own process.
        let mut first_error = None;
        for handle in handles {
            match handle.await.expect("launching an instance panicked") {
                Ok(instance) => self.instances.push(instance),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        if !self.remove_dir {
            state::write(&self.dir, &self.state_entries())?;
        }

        for i in 0..spec.primaries {
            create_databases(
                &self.admin_opts(i),
                &self.instances[i].name,
                &spec.databases,
            )
            .await?;
        }
        let mut starts = Vec::new();
        for (i, inst) in self.instances.iter().enumerate() {
            if let Role::Replica { of } = inst.role {
                let opts = self.admin_opts(i);
                let name = inst.name.clone();
                let primary_port = self.instances[of].port;
                starts.push(tokio::spawn(async move {
                    replication::start_replica(&opts, &name, primary_port).await?;
                    replication::wait_replicating(&opts, &name).await
                }));
            }
        }
        for start in starts {
            start.await.expect("starting replication panicked")?;
        }
        self.sync_replicas().await
    }

    pub fn instances(&self) -> &[Instance] {
        &self.instances
    }

    /// Primary `i`. Panics if there is no such primary.
    pub fn primary(&self, i: usize) -> &Instance {
        let inst = &self.instances[i];
        assert_eq!(inst.role, Role::Primary, "instance {i} is not a primary");
        inst
    }

    pub fn primaries(&self) -> Vec<&Instance> {
        self.instances
            .iter()
            .filter(|i| i.role == Role::Primary)
            .collect()
    }

    pub fn replicas_of(&self, primary: usize) -> Vec<&Instance> {
        self.instances
            .iter()
            .filter(|i| i.role == Role::Replica { of: primary })
            .collect()
    }

    /// The application user's name, "shoal".
    pub fn user(&self) -> &str {
        APP_USER
    }

    /// The application user's password, "shoal".
    pub fn password(&self) -> &str {
        APP_PASSWORD
    }

    /// The directory the instances live in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How long [`Cluster::start`] took, template included.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// mysql_async options for the application user on instance `i` (index into `instances()`).
    /// TCP only: mysql_async would otherwise switch to the server's unix socket.
    pub fn opts(&self, i: usize, db: Option<&str>) -> Opts {
        OptsBuilder::default()
            .ip_or_hostname(self.instances[i].host.clone())
            .tcp_port(self.instances[i].port)
            .user(Some(APP_USER))
            .pass(Some(APP_PASSWORD))
            .db_name(db)
            .prefer_socket(false)
            .into()
    }

    /// mysql_async options for the administrative account (`root`, all privileges, including
    /// writes to a read-only replica) on instance `i`.
    pub fn admin_opts(&self, i: usize) -> Opts {
        admin_opts_for(self.instances[i].port)
    }

    /// Kills instance `i` with SIGKILL (a crash, no clean shutdown) and waits for it to exit;
    /// its data dir and port stay, for [`Cluster::restart`].
    pub fn kill(&mut self, i: usize) {
        if let Some(mut p) = self.instances[i].process.take() {
            p.signal(libc::SIGKILL);
            p.wait_until(Instant::now() + Duration::from_secs(20));
            p.kill_now();
        }
    }

    /// Starts killed instance `i` again on its port and data dir and waits until it answers.
    /// A replica (launched with `skip-slave-start`) replicates again, past anything it may
    /// replay from before the crash (see [`replication::resume_after_crash`]).
    pub async fn restart(&mut self, i: usize) -> Result<(), LaunchError> {
        let bins = tokio::task::spawn_blocking(Binaries::find)
            .await
            .expect("finding MariaDB panicked")?;
        let lifetime = self.lifetime;
        instance::relaunch(&bins, &mut self.instances[i], lifetime).await?;
        if let Role::Replica { of } = self.instances[i].role {
            let written =
                replication::primary_position(&self.admin_opts(of), &self.instances[of].name)
                    .await?;
            let name = &self.instances[i].name;
            replication::resume_after_crash(&self.admin_opts(i), name, &written).await?;
        }
        Ok(())
    }

    /// Waits until every replica has applied everything its primary has written so far.
    pub async fn sync_replicas(&self) -> Result<(), LaunchError> {
        for (p, primary) in self.instances.iter().enumerate() {
            if primary.role != Role::Primary {
                continue;
            }
            let position =
                replication::primary_position(&self.admin_opts(p), &primary.name).await?;
            for (r, replica) in self.instances.iter().enumerate() {
                if replica.role == (Role::Replica { of: p }) {
                    replication::wait_applied(&self.admin_opts(r), &replica.name, &position)
                        .await?;
                }
            }
        }
        Ok(())
    }

    /// Stops every instance by pid and waits for it; removes a temp dir. Idempotent.
    /// Throwaway (temp dir) instances get SIGKILL at once: their data is deleted next anyway,
    /// and a clean shutdown would cost about a second per test. Instances in an explicit dir get
    /// SIGTERM, and SIGKILL if they have not exited after 20 s.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let signal = if self.remove_dir {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        for inst in &mut self.instances {
            if let Some(p) = inst.process.as_mut() {
                p.signal(signal);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for inst in &mut self.instances {
            if let Some(mut p) = inst.process.take() {
                if !p.wait_until(deadline) {
                    tracing::warn!("{} did not stop within 20 s, killing it", inst.name);
                }
                p.kill_now();
            }
            inst._lease = None;
        }
        if self.remove_dir {
            let _ = fs::remove_dir_all(&self.dir);
        } else {
            state::remove(&self.dir);
        }
    }

    fn state_entries(&self) -> Vec<StateEntry> {
        self.instances
            .iter()
            .map(|i| StateEntry {
                name: i.name.clone(),
                role: i.role,
                port: i.port,
                pid: i.pid,
                dir: i.dir.clone(),
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.lifetime == Lifetime::Owned {
            self.stop();
        }
    }
}

pub(crate) fn admin_opts_for(port: u16) -> Opts {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(ADMIN_USER))
        .prefer_socket(false)
        .into()
}

fn validate(spec: &ClusterSpec) -> Result<()> {
    if spec.primaries == 0 {
        return Err(LaunchError::Spec("at least one primary is needed".into()));
    }
    let total = spec.primaries * (1 + spec.replicas_per_primary);
    if total > 256 {
        return Err(LaunchError::Spec(format!(
            "{total} instances is too many (max 256)"
        )));
    }
    if let Some(base) = spec.base_port {
        let last = base as usize + total - 1;
        if base < 1024 || last > u16::MAX as usize {
            return Err(LaunchError::Spec(format!(
                "ports {base}..={last} are out of range (1024..=65535)"
            )));
        }
        if (base as usize..=last).contains(&3306) {
            return Err(LaunchError::Spec(format!(
                "ports {base}..={last} include 3306, which is left to a system MariaDB"
            )));
        }
    }
    for db in &spec.databases {
        if db.is_empty() || db.len() > 64 || db.contains(['`', '/', '\\', '.', '\0']) {
            return Err(LaunchError::Spec(format!("bad database name {db:?}")));
        }
    }
    Ok(())
}

fn plan(
    spec: &ClusterSpec,
    dir: &Path,
    lifetime: Lifetime,
    server_options: &[String],
) -> Vec<Plan> {
    let mut plans = Vec::new();
    let mut push = |name: String, role: Role| {
        let index = plans.len();
        plans.push(Plan {
            dir: dir.join(&name),
            name,
            role,
            server_id: index + 1,
            port: spec.base_port.map(|b| b + index as u16),
            lifetime,
            server_options: server_options.to_vec(),
        });
    };
    for p in 0..spec.primaries {
        push(format!("p{p}"), Role::Primary);
    }
    for p in 0..spec.primaries {
        for r in 0..spec.replicas_per_primary {
            push(format!("p{p}r{r}"), Role::Replica { of: p });
        }
    }
    plans
}

async fn create_databases(opts: &Opts, name: &str, databases: &[String]) -> Result<()> {
    if databases.is_empty() {
        return Ok(());
    }
    let mut conn = mysql_async::Conn::new(opts.clone())
        .await
        .map_err(LaunchError::sql(format!("connecting to {name}")))?;
    for db in databases {
        conn.query_drop(format!("CREATE DATABASE IF NOT EXISTS `{db}`"))
            .await
            .map_err(LaunchError::sql(format!(
                "creating database {db} on {name}"
            )))?;
    }
    let _ = conn.disconnect().await;
    Ok(())
}

fn make_temp_dir() -> Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "shoal-cluster-{}-{n}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    fs::create_dir_all(&dir).map_err(LaunchError::io(format!("creating {}", dir.display())))?;
    Ok(dir)
}

/// Makes `dir` absolute (config files need absolute paths) and refuses to start over a cluster
/// that is still running there.
fn prepare_explicit_dir(dir: &Path) -> Result<PathBuf> {
    fs::create_dir_all(dir).map_err(LaunchError::io(format!("creating {}", dir.display())))?;
    let dir =
        fs::canonicalize(dir).map_err(LaunchError::io(format!("resolving {}", dir.display())))?;
    if let Some(entries) = state::read(&dir)? {
        if entries.iter().any(StateEntry::is_running) {
            return Err(LaunchError::State {
                dir: dir.clone(),
                detail: format!(
                    "a cluster is already running there; stop it first with \
                     `shoal-bench cluster down --dir {}`",
                    dir.display()
                ),
            });
        }
        state::remove(&dir);
    }
    Ok(dir)
}

/// Stops the cluster recorded in `dir` (started by another process, e.g. `cluster up`): SIGTERM,
/// SIGKILL after 30 s, then removes the instance dirs and the state file. Returns how many
/// instances were still running.
pub fn stop_dir(dir: &Path) -> Result<usize, LaunchError> {
    let Some(entries) = state::read(dir)? else {
        return Ok(0);
    };
    let running: Vec<&StateEntry> = entries.iter().filter(|e| e.is_running()).collect();
    for e in &running {
        process::signal_foreign(e.pid, &instance::defaults_file(&e.dir), libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for e in &running {
        while e.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if e.is_running() {
            process::signal_foreign(e.pid, &instance::defaults_file(&e.dir), libc::SIGKILL);
        }
    }
    for e in &running {
        let kill_deadline = Instant::now() + Duration::from_secs(5);
        while e.is_running() && Instant::now() < kill_deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    for e in &entries {
        if e.is_running() {
            return Err(LaunchError::State {
                dir: dir.to_path_buf(),
                detail: format!("{} (pid {}) is still running after SIGKILL", e.name, e.pid),
            });
        }
        let _ = fs::remove_dir_all(&e.dir);
    }
    state::remove(dir);
    Ok(running.len())
}
