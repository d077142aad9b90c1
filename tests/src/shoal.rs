//! Runs the real `shoal` binary as a child process for one test.

use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::scratch_dir;

/// How long Shoal may take to start accepting connections (a debug build on a busy 2-core box).
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long Shoal gets to exit after SIGTERM before it is SIGKILLed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A running `shoal` process, stopped (SIGTERM, then SIGKILL) when dropped.
pub struct ShoalProcess {
    child: Child,
    port: u16,
    log_path: PathBuf,
    args: Vec<String>,
    /// Environment variables set for Shoal beyond the test's own (set again on restart).
    env: Vec<(String, String)>,
    /// The test waited for the exit ([`Self::wait_exit`]): it is expected, not a failure.
    exit_expected: bool,
}

impl ShoalProcess {
    /// Starts Shoal in quick mode in front of `db` on the backend's primary, with `extra` flags.
    pub fn quick(backend: &Backend, db: &str, extra: &[&str]) -> ShoalProcess {
        let mut args = vec!["--backend".to_string(), backend.url(Some(db))];
        args.extend(extra.iter().map(|s| s.to_string()));
        ShoalProcess::start(&args)
    }

    /// Quick mode with the backend pool capped at `max` connections (clients must share them).
    pub fn quick_with_pool(
        backend: &Backend,
        db: &str,
        max: usize,
        extra: &[&str],
    ) -> ShoalProcess {
        let mut args = vec!["--backend".to_string(), backend.url(Some(db))];
        args.extend(pool_max_args(max));
        args.extend(extra.iter().map(|s| s.to_string()));
        ShoalProcess::start(&args)
    }

    /// Starts `shoal --listen 127.0.0.1:<free port> <args>` and waits until it accepts.
    pub fn start(args: &[String]) -> ShoalProcess {
        // A free port found by binding port 0 can be taken by someone else before Shoal binds it;
        // retrying with a fresh port makes that race harmless.
        let mut last_failure = String::new();
        for _ in 0..3 {
            match Self::try_start(args) {
                Ok(shoal) => return shoal,
                Err(failure) => last_failure = failure,
            }
        }
        panic!("shoal did not start: {last_failure}");
    }

    /// One attempt at [`Self::start`]: `Err` with the reason and Shoal's log when it exits
    /// before accepting (a refused config, a port taken meanwhile).
    pub fn try_start(args: &[String]) -> Result<ShoalProcess, String> {
        Self::try_start_with_env(args, &[])
    }

    /// [`Self::start`] with environment variables set for Shoal (e.g. the `SHOAL_FAULT` test
    /// hook); a [`Self::restart`] sets them again.
    pub fn start_with_env(args: &[String], env: &[(&str, &str)]) -> ShoalProcess {
        let mut last_failure = String::new();
        for _ in 0..3 {
            match Self::try_start_with_env(args, env) {
                Ok(shoal) => return shoal,
                Err(failure) => last_failure = failure,
            }
        }
        panic!("shoal did not start: {last_failure}");
    }

    fn try_start_with_env(args: &[String], env: &[(&str, &str)]) -> Result<ShoalProcess, String> {
        let port = free_port();
        let log_path = scratch_dir().join(format!("shoal-{port}-{}.log", unique_suffix()));
        let mut full_args = vec!["--listen".to_string(), format!("127.0.0.1:{port}")];
        full_args.extend(args.iter().cloned());
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Self::spawn(full_args, env, port, log_path)
    }

    /// Starts Shoal again with the same arguments on the same port, its output appended to the
    /// same log, after the previous process has exited (killed by [`Self::signal`], or stopped
    /// by SIGTERM): what an operator's restart after a crash or a stop does. Clients reconnect
    /// to the same address.
    pub fn restart(&mut self) {
        assert!(
            self.child.try_wait().expect("try_wait on shoal").is_some(),
            "restart: shoal is still running"
        );
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match Self::spawn(
                self.args.clone(),
                self.env.clone(),
                self.port,
                self.log_path.clone(),
            ) {
                Ok(next) => {
                    // The old child is reaped: replacing it leaves nothing to stop.
                    let old = std::mem::replace(self, next);
                    std::mem::forget(old);
                    return;
                }
                // The port may still be held for a moment by the exiting process's sockets.
                Err(failure) if Instant::now() < deadline => {
                    eprintln!("shoal restart failed, retrying: {failure}");
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(failure) => panic!("shoal did not restart: {failure}"),
            }
        }
    }

    /// Sends `signal` (SIGKILL, SIGTERM, SIGSTOP...) without waiting.
    pub fn signal(&self, signal: libc::c_int) {
        send_signal(self.child.id(), signal);
    }

    /// Waits up to `limit` for the process to exit; its status, or `None` if it still runs.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait on shoal") {
                self.exit_expected = true;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn spawn(
        full_args: Vec<String>,
        env: Vec<(String, String)>,
        port: u16,
        log_path: PathBuf,
    ) -> Result<ShoalProcess, String> {
        let bin = shoal_bin();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("open shoal log file");
        let child = Command::new(&bin)
            .args(&full_args)
            .env(
                "RUST_LOG",
                std::env::var("SHOAL_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env("RUST_BACKTRACE", "1")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", bin.display()));
        let mut shoal = ShoalProcess {
            child,
            port,
            log_path,
            args: full_args,
            env,
            exit_expected: false,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        loop {
            if let Some(status) = shoal.child.try_wait().expect("try_wait on shoal") {
                let failure = format!(
                    "shoal {:?} exited with {status} before accepting; its log:\n{}",
                    shoal.args,
                    shoal.log()
                );
                // Already reaped: nothing left for Drop to stop.
                std::mem::forget(shoal);
                return Err(failure);
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(shoal);
            }
            if Instant::now() > deadline {
                panic!(
                    "shoal {:?} did not accept on port {port} within {START_TIMEOUT:?}; its log:\n{}",
                    shoal.args,
                    shoal.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Everything Shoal wrote to stdout/stderr so far.
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(&self.log_path) {
            let _ = f.read_to_string(&mut text);
        }
        const MAX: usize = 20_000;
        if text.len() > MAX {
            let mut cut = text.len() - MAX;
            while !text.is_char_boundary(cut) {
                cut += 1;
            }
            text = format!("[...]{}", &text[cut..]);
        }
        text
    }

    /// Panics (with Shoal's log) if the process has exited.
    pub fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().expect("try_wait on shoal") {
            panic!(
                "shoal {:?} exited unexpectedly with {status}; its log:\n{}",
                self.args,
                self.log()
            );
        }
    }

    /// Client options for `user`/`password` through Shoal.
    pub fn opts_as(&self, user: &str, password: &str, db: Option<&str>) -> mysql_async::Opts {
        mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .user(Some(user))
            .pass(Some(password))
            .db_name(db)
            .prefer_socket(false)
            .into()
    }

    /// Client options for the backend's application user through Shoal (quick mode logins).
    pub fn opts(&self, backend: &Backend, db: Option<&str>) -> mysql_async::Opts {
        self.opts_as(&backend.user, &backend.password, db)
    }

    /// A connection through Shoal, failing the test with Shoal's log if it cannot be made.
    pub async fn conn(&self, backend: &Backend, db: Option<&str>) -> mysql_async::Conn {
        match mysql_async::Conn::new(self.opts(backend, db)).await {
            Ok(conn) => conn,
            Err(e) => panic!(
                "connect through shoal failed: {e}; shoal log:\n{}",
                self.log()
            ),
        }
    }

    /// A client-side pool through Shoal (create one per test: a Pool must not cross runtimes).
    pub fn pool(&self, backend: &Backend, db: Option<&str>) -> mysql_async::Pool {
        mysql_async::Pool::new(self.opts(backend, db))
    }

    /// Sends SIGTERM and waits for the exit status (up to the grace period, then SIGKILL).
    pub fn terminate(self) -> ExitStatus {
        self.signal_and_wait(libc::SIGTERM)
    }

    /// Sends `signal` and waits for the exit status (up to the grace period, then SIGKILL).
    pub fn signal_and_wait(mut self, signal: libc::c_int) -> ExitStatus {
        let status = self.stop_with(signal);
        // The child is reaped; Drop has nothing left to do (its log file stays for post-mortems).
        std::mem::forget(self);
        status
    }

    fn stop(&mut self) -> ExitStatus {
        self.stop_with(libc::SIGTERM)
    }

    fn stop_with(&mut self, signal: libc::c_int) -> ExitStatus {
        if let Some(status) = self.child.try_wait().ok().flatten() {
            return status;
        }
        send_signal(self.child.id(), signal);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().ok().flatten() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.child.wait().expect("wait for killed shoal")
    }
}

impl Drop for ShoalProcess {
    fn drop(&mut self) {
        let exited_early = self.child.try_wait().ok().flatten();
        self.stop();
        if let Some(status) = exited_early
            && !self.exit_expected
            && !std::thread::panicking()
        {
            panic!(
                "shoal {:?} had exited on its own with {status} before the test ended; its log:\n{}",
                self.args,
                self.log()
            );
        }
    }
}

fn send_signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on a pid we spawned and have not reaped yet.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral port")
        .port()
}

fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The workspace root (the parent of this crate's manifest dir).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests crate has a parent dir")
        .to_path_buf()
}

/// The `shoal` binary under test: `$SHOAL_BIN`, else `target/debug/shoal`, (re)built by cargo first.
pub fn shoal_bin() -> PathBuf {
    static BIN: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut guard = BIN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(bin) = guard.as_ref() {
        return bin.clone();
    }
    let bin = locate_or_build();
    *guard = Some(bin.clone());
    bin
}

fn locate_or_build() -> PathBuf {
    if let Some(bin) = std::env::var_os("SHOAL_BIN") {
        let bin = PathBuf::from(bin);
        assert!(bin.exists(), "SHOAL_BIN={} does not exist", bin.display());
        return bin;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let bin = target.join("debug").join("shoal");
    // `cargo test -p shoal-tests` does not build other packages' binaries, so build it here: a
    // no-op when it is up to date, and never a stale binary under test. Cargo's own lock makes
    // parallel test binaries wait for one build (cargo test does not hold it while tests run).
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(&cargo)
        .current_dir(workspace_root())
        .args(["build", "-p", "shoal-proxy", "--bin", "shoal"])
        .env("CARGO_TARGET_DIR", &target)
        .output();
    match output {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "cargo build -p shoal-proxy --bin shoal failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        // No cargo (a test binary run by hand): use what was built before, if anything.
        Err(e) => assert!(
            bin.exists(),
            "{} is missing and cargo ({cargo}) cannot run: {e}; build shoal or set SHOAL_BIN",
            bin.display()
        ),
    }
    bin
}

/// Shoal's `--help` text (run once per test binary).
pub fn shoal_help() -> String {
    static HELP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HELP.get_or_init(|| {
        let out = Command::new(shoal_bin())
            .arg("--help")
            .output()
            .expect("run shoal --help");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
    .clone()
}

/// Quick-mode flags that cap the backend pool at `max` connections, so that clients must share
/// them.
pub fn pool_max_args(max: usize) -> Vec<String> {
    vec!["--pool-max".into(), max.to_string()]
}

/// Quick-mode flags that cap client connections at `max`.
pub fn max_connections_args(max: usize) -> Vec<String> {
    vec!["--max-connections".into(), max.to_string()]
}
