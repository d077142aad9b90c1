//! Starting and stopping server processes by pid, so that nothing outlives its owner.
//!
//! Instances owned by a library `Cluster` are spawned with `PR_SET_PDEATHSIG = SIGKILL`: if the
//! test binary is killed (a timeout, `kill -9`, a crash that skips destructors) the kernel kills
//! its servers too. The death signal fires when the *thread* that forked the child exits, not the
//! process, so those children are forked from one dedicated thread that lives as long as the
//! process (a tokio blocking thread, for one, exits after 10 s idle and would take the servers
//! with it). Detached instances (`shoal-bench cluster up`) get their own session instead, so they
//! survive the command that started them.

use std::fs;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How a process is tied to the one that started it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lifetime {
    /// Killed by the kernel when this process dies, and by `Drop`.
    Owned,
    /// Left running when this process exits (the CLI's `cluster up`).
    Detached,
}

#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: Option<Child>,
    pid: u32,
    lifetime: Lifetime,
}

impl ServerProcess {
    pub(crate) fn spawn(mut cmd: Command, lifetime: Lifetime) -> io::Result<ServerProcess> {
        let child = match lifetime {
            Lifetime::Owned => {
                let parent = std::process::id() as libc::pid_t;
                // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) run between fork
                // and exec.
                unsafe {
                    cmd.pre_exec(move || {
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                            return Err(io::Error::last_os_error());
                        }
                        // The parent may have died before prctl took effect.
                        if libc::getppid() != parent {
                            libc::_exit(1);
                        }
                        Ok(())
                    });
                }
                spawn_from_long_lived_thread(cmd)?
            }
            Lifetime::Detached => {
                // SAFETY: setsid is async-signal-safe.
                unsafe {
                    cmd.pre_exec(|| {
                        if libc::setsid() < 0 {
                            return Err(io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
                cmd.spawn()?
            }
        };
        Ok(ServerProcess {
            pid: child.id(),
            child: Some(child),
            lifetime,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// True once the process has exited (and has been reaped).
    pub(crate) fn has_exited(&mut self) -> bool {
        match &mut self.child {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => true,
        }
    }

    pub(crate) fn signal(&mut self, signal: libc::c_int) {
        if !self.has_exited() {
            // SAFETY: the pid is our unreaped child, so it cannot have been recycled.
            unsafe {
                libc::kill(self.pid as libc::pid_t, signal);
            }
        }
    }

    /// Waits until the process exits or `deadline` passes; true if it exited.
    pub(crate) fn wait_until(&mut self, deadline: Instant) -> bool {
        loop {
            if self.has_exited() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL and reap.
    pub(crate) fn kill_now(&mut self) {
        if let Some(mut child) = self.child.take() {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if self.lifetime == Lifetime::Owned {
            self.kill_now();
        }
    }
}

type SpawnJob = (Command, mpsc::Sender<io::Result<Child>>);

fn spawn_from_long_lived_thread(cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnJob>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        thread::Builder::new()
            .name("shoal-mariadbd-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawning the mariadbd spawner thread");
        tx
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner
        .send((cmd, reply_tx))
        .map_err(|_| io::Error::other("the mariadbd spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("the mariadbd spawner thread is gone"))?
}

/// Whether `pid` is a live (not zombie) mariadbd started with `defaults_file`. Checking the
/// command line guards against signalling a recycled pid that now belongs to someone else.
pub fn is_our_server(pid: u32, defaults_file: &Path) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let needle = format!("--defaults-file={}", defaults_file.display());
    let matches = cmdline
        .split(|b| *b == 0)
        .any(|arg| arg == needle.as_bytes());
    if !matches {
        return false;
    }
    // A zombie still has a /proc entry (with an empty cmdline, but be explicit).
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Sends `signal` to a server we did not spawn ourselves (from a state file), if it is still ours.
pub(crate) fn signal_foreign(pid: u32, defaults_file: &Path, signal: libc::c_int) -> bool {
    if !is_our_server(pid, defaults_file) {
        return false;
    }
    // SAFETY: plain kill(2); the pid was just checked to be our server.
    unsafe { libc::kill(pid as libc::pid_t, signal) == 0 }
}
