//! Free TCP ports for instances, without collisions between tests running in parallel, in this
//! process or in others (nextest runs every test in its own process).
//!
//! A port is leased by holding an exclusive `flock` on `$TMPDIR/shoal-ports/<port>.lock` for as
//! long as the instance lives (the lock goes away with the process, however it dies), and by
//! checking that nothing listens on it. Ports are drawn at random below Linux's ephemeral range
//! (32768-60999 by default), so outgoing connections, which take ephemeral ports, can never grab
//! one between our check and the server's bind. If the server still fails to bind, the launcher
//! retries with another port.

use std::fs::{self, File};
use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use rand::Rng;

use super::error::{LaunchError, Result};

/// Never handed out: a system MariaDB may own it, and other tools assume it.
const RESERVED: u16 = 3306;

#[derive(Debug)]
pub(crate) struct PortLease {
    pub(crate) port: u16,
    _lock: File,
}

/// Leases a random free port.
pub(crate) fn lease_any() -> Result<PortLease> {
    let (low, high) = auto_range();
    let mut rng = rand::rng();
    for _ in 0..500 {
        let port = rng.random_range(low..high);
        if let Some(lease) = try_lease(port)? {
            return Ok(lease);
        }
    }
    Err(LaunchError::Ports(format!(
        "no free port found in {low}..{high} after 500 tries"
    )))
}

/// Leases exactly `port` (from `--base-port`), or says who has it.
pub(crate) fn lease_exact(port: u16) -> Result<PortLease> {
    if port == RESERVED {
        return Err(LaunchError::Ports(format!(
            "port {RESERVED} is reserved for a system MariaDB; choose another base port"
        )));
    }
    try_lease(port)?.ok_or_else(|| {
        LaunchError::Ports(format!(
            "port {port} is in use (by a listening process or another launcher)"
        ))
    })
}

/// Draw from below the ephemeral range; fall back to a fixed window if the range is unusual.
fn auto_range() -> (u16, u16) {
    let ephemeral_low = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let high = ephemeral_low.min(32000);
    if high >= 12000 {
        (10000, high)
    } else {
        (high.max(1025), high.max(1025).saturating_add(20000))
    }
}

fn lock_dir() -> PathBuf {
    std::env::temp_dir().join("shoal-ports")
}

fn try_lease(port: u16) -> Result<Option<PortLease>> {
    if port == RESERVED || port < 1024 {
        return Ok(None);
    }
    let dir = lock_dir();
    fs::create_dir_all(&dir).map_err(LaunchError::io(format!("creating {}", dir.display())))?;
    let path = dir.join(format!("{port}.lock"));
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(LaunchError::io(format!("opening {}", path.display())))?;
    // SAFETY: the fd is valid for the lifetime of `file`.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Ok(None);
    }
    if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_err() {
        return Ok(None);
    }
    Ok(Some(PortLease { port, _lock: file }))
}
