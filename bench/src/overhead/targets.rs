//! The ways a client reaches the backend: directly, through HAProxy in TCP mode, through Shoal
//! in quick mode or with a config file; plus reading a process's CPU time from /proc.

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::OverheadError;

/// A proxy process this benchmark started; SIGTERM then SIGKILL on drop.
pub struct ProxyProcess {
    pub name: &'static str,
    pub port: u16,
    child: Child,
}

impl ProxyProcess {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn spawn(
        name: &'static str,
        port: u16,
        mut cmd: Command,
        log: &Path,
    ) -> Result<Self, OverheadError> {
        let log_file = fs::File::create(log)
            .map_err(OverheadError::io(format!("create {}", log.display())))?;
        // Its own process group: a Ctrl-C in the terminal reaches only shoal-bench, which then
        // stops this process itself, after the statements in flight (not before them).
        let child = cmd
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(
                log_file
                    .try_clone()
                    .map_err(OverheadError::io("clone log handle"))?,
            )
            .stderr(log_file)
            .spawn()
            .map_err(|e| OverheadError::Tool(format!("cannot start {name}: {e}")))?;
        crate::interrupt::register_child(child.id());
        let mut proc = ProxyProcess { name, port, child };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = proc
                .child
                .try_wait()
                .map_err(OverheadError::io("try_wait"))?
            {
                return Err(OverheadError::ExitedAtStart {
                    name: name.to_string(),
                    status: status.to_string(),
                    log_path: log.to_path_buf(),
                    log: fs::read_to_string(log).unwrap_or_default(),
                });
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(proc);
            }
            if Instant::now() > deadline {
                return Err(OverheadError::Tool(format!(
                    "{name} did not accept on port {port} within 30 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Fails if the process has died (a crashed proxy must not be measured as a slow one).
    pub fn check_alive(&mut self) -> Result<(), OverheadError> {
        match self
            .child
            .try_wait()
            .map_err(OverheadError::io("try_wait"))?
        {
            Some(status) => Err({
                // Reaped: its pid may be reused, so it must not be killed by pid any more.
                crate::interrupt::unregister_child(self.child.id());
                OverheadError::Tool(format!(
                    "{} exited with {status} during the benchmark",
                    self.name
                ))
            }),
            None => Ok(()),
        }
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        crate::interrupt::unregister_child(self.child.id());
        // SAFETY: kill(2) on a child we spawned and have not reaped.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> Result<u16, OverheadError> {
    Ok(TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(OverheadError::io("bind an ephemeral port"))?
        .port())
}

/// HAProxy as a plain TCP forwarder: the floor cost of any proxy hop.
pub fn start_haproxy(
    dir: &Path,
    name: &str,
    backend: &str,
    threads: u32,
) -> Result<ProxyProcess, OverheadError> {
    let port = free_port()?;
    let config = dir.join(format!("{name}.cfg"));
    // Long timeouts: sysbench holds its connections for the whole run.
    let text = format!(
        "global\n  nbthread {threads}\n  maxconn 4096\n\
         defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 1h\n  timeout server 1h\n\
         listen mysql\n  bind 127.0.0.1:{port}\n  server backend {backend}\n"
    );
    fs::write(&config, text).map_err(OverheadError::io(format!("write {}", config.display())))?;
    let mut cmd = Command::new("haproxy");
    // -db: stay in the foreground, so that the pid we hold is the one doing the work.
    cmd.arg("-db").arg("-f").arg(&config);
    ProxyProcess::spawn("haproxy", port, cmd, &dir.join(format!("{name}.log")))
}

/// Shoal in quick mode in front of `backend_url`; with `tls`, also offering TLS to clients
/// (a certificate made by `shoal gen-cert` in `dir/tls`).
pub fn start_shoal(
    dir: &Path,
    bin: &Path,
    backend_url: &str,
    extra: &[String],
    tls: bool,
) -> Result<ProxyProcess, OverheadError> {
    let port = free_port()?;
    let mut cmd = Command::new(bin);
    if tls {
        let cert_dir = dir.join("tls");
        let status = Command::new(bin)
            .arg("gen-cert")
            .arg("--dir")
            .arg(&cert_dir)
            .stdout(Stdio::null())
            .status()
            .map_err(|e| OverheadError::Tool(format!("cannot run shoal gen-cert: {e}")))?;
        if !status.success() {
            return Err(OverheadError::Tool(format!(
                "shoal gen-cert failed: {status}"
            )));
        }
        // sysbench 1.0 loads these fixed names from its working directory (the client pair is
        // never asked for: Shoal does not request client certificates).
        for (from, to) in [
            ("ca.pem", "cacert.pem"),
            ("server-cert.pem", "client-cert.pem"),
            ("server-key.pem", "client-key.pem"),
        ] {
            fs::copy(cert_dir.join(from), cert_dir.join(to))
                .map_err(OverheadError::io(format!("copy {from} for sysbench")))?;
        }
        cmd.arg("--tls-cert")
            .arg(cert_dir.join("server-cert.pem"))
            .arg("--tls-key")
            .arg(cert_dir.join("server-key.pem"));
    }
    cmd.arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--backend")
        .arg(backend_url)
        .args(extra)
        .env(
            "RUST_LOG",
            std::env::var("SHOAL_BENCH_LOG").unwrap_or_else(|_| "warn".into()),
        );
    let log = if tls { "shoal-tls.log" } else { "shoal.log" };
    ProxyProcess::spawn("shoal", port, cmd, &dir.join(log))
}

/// Shoal with a configuration file, listening on `port` (the config's `server.listen` is
/// overridden). A config it refuses makes it exit at start: [`OverheadError::ExitedAtStart`].
pub fn start_shoal_config(
    dir: &Path,
    bin: &Path,
    config: &Path,
    port: u16,
    extra: &[String],
    log_name: &str,
) -> Result<ProxyProcess, OverheadError> {
    let mut cmd = Command::new(bin);
    cmd.arg("--config")
        .arg(config)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .args(extra)
        .env(
            "RUST_LOG",
            std::env::var("SHOAL_BENCH_LOG").unwrap_or_else(|_| "warn".into()),
        );
    ProxyProcess::spawn("shoal", port, cmd, &dir.join(log_name))
}

/// [`shoal_release_bin`] off the async runtime (it may run a cargo build).
pub async fn shoal_release_bin_async(explicit: Option<PathBuf>) -> Result<PathBuf, OverheadError> {
    tokio::task::spawn_blocking(move || shoal_release_bin(explicit.as_deref()))
        .await
        .map_err(|e| OverheadError::Tool(format!("build task: {e}")))?
}

/// The release `shoal` binary: `--shoal-bin`, else `target/release/shoal` built now (a no-op when
/// it is up to date, and never a stale binary).
pub fn shoal_release_bin(explicit: Option<&Path>) -> Result<PathBuf, OverheadError> {
    if let Some(bin) = explicit {
        return Ok(bin.to_path_buf());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf();
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&root)
        .args(["build", "--release", "-p", "shoal-proxy", "--bin", "shoal"])
        .status()
        .map_err(|e| OverheadError::Tool(format!("cannot run cargo to build shoal: {e}")))?;
    if !status.success() {
        return Err(OverheadError::Tool(
            "cargo build --release -p shoal-proxy failed".into(),
        ));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Ok(target.join("release").join("shoal"))
}

/// User + system CPU time a process (all its threads) has used so far, in seconds.
pub fn cpu_seconds(pid: u32) -> Result<f64, OverheadError> {
    cpu_times(pid).map(|t| t.user + t.system)
}

/// CPU time of a process in seconds, user and system apart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTimes {
    pub user: f64,
    pub system: f64,
}

impl std::ops::Sub for CpuTimes {
    type Output = CpuTimes;
    fn sub(self, before: CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user - before.user,
            system: self.system - before.system,
        }
    }
}

/// [`cpu_seconds`], user and system apart.
pub fn cpu_times(pid: u32) -> Result<CpuTimes, OverheadError> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(OverheadError::io(format!("read /proc/{pid}/stat")))?;
    let (user, system) = parse_cpu_ticks(&stat)
        .ok_or_else(|| OverheadError::Tool(format!("unreadable /proc/{pid}/stat")))?;
    let hz = clock_ticks_per_second();
    Ok(CpuTimes {
        user: user as f64 / hz,
        system: system as f64 / hz,
    })
}

/// Context switches (voluntary and not) of a process's live threads so far, from
/// /proc/PID/task/*/status. A thread that exits takes its count with it, so across an
/// interval this undercounts by what exiting threads did (MariaDB keeps its connection
/// threads while their connections last).
pub fn context_switches(pid: u32) -> Result<u64, OverheadError> {
    let dir = format!("/proc/{pid}/task");
    let tasks = fs::read_dir(&dir).map_err(OverheadError::io(format!("read {dir}")))?;
    let mut sum = 0;
    for task in tasks.flatten() {
        // A thread may exit between the listing and the read: it counts nothing.
        let Ok(status) = fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        sum += parse_switches(&status);
    }
    Ok(sum)
}

/// `voluntary_ctxt_switches` + `nonvoluntary_ctxt_switches` of a /proc status file.
fn parse_switches(status: &str) -> u64 {
    status
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k, "voluntary_ctxt_switches" | "nonvoluntary_ctxt_switches")
                .then(|| v.trim().parse::<u64>().ok())?
        })
        .sum()
}

/// utime and stime (fields 14 and 15) of a /proc/PID/stat line, in clock ticks. The command
/// name (field 2) may contain spaces and parentheses, so fields are counted after its last ')'.
pub fn parse_cpu_ticks(stat: &str) -> Option<(u64, u64)> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // after_name starts at field 3 (state): utime is field 14, i.e. index 11 here.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime, stime))
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_utime_and_stime() {
        let stat = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194304 500 0 0 0 1234 567 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_cpu_ticks(stat), Some((1234, 567)));
    }

    #[test]
    fn context_switches_sum_both_kinds() {
        let status = "Name:\tmariadbd\nvoluntary_ctxt_switches:\t120\n\
                      nonvoluntary_ctxt_switches:\t7\nThreads:\t3\n";
        assert_eq!(parse_switches(status), 127);
        // A thread that sleeps switches: the process's own count grows.
        let before = context_switches(std::process::id()).unwrap();
        std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(5)))
            .join()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(context_switches(std::process::id()).unwrap() > before);
    }

    #[test]
    fn own_process_has_cpu_time() {
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(cpu_seconds(std::process::id()).unwrap() >= 0.0);
    }
}
