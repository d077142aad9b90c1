//! The health monitor: one task per server checks it every `heartbeat` on a connection of its
//! own (`SELECT @@read_only`, and `SHOW SLAVE STATUS` for replication and lag). A server is
//! down after `down_after` failed checks in a row and up again after `up_after` good ones;
//! going down discards its pooled connections. After each check the datahost's primary is
//! decided again from what the checks found (see [`Backends::decide_primary`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use mysql_common::constants::CapabilityFlags;
use tracing::{debug, info};

use super::balance::Backends;
use super::conn::BackendConn;
use super::health::now_ms;
use crate::error::{Error, Result};

/// What one good check found.
struct Status {
    read_only: bool,
    /// `None`: not a replica (no `SHOW SLAVE STATUS` row).
    replica: Option<Replication>,
}

/// A replica's replication, from its status row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Replication {
    /// IO and SQL threads both running.
    running: bool,
    /// The SQL thread runs, the IO thread cannot reach the source: connecting, or stopped
    /// with an error (not stopped on purpose).
    source_lost: bool,
    /// Seconds_Behind_Master (NULL while the IO thread does not run).
    lag: Option<i64>,
}

async fn check(conn: &mut Option<BackendConn>, backends: &Backends, s: usize) -> Result<Status> {
    let server = &backends.servers[s];
    let timeout = backends.hosts[server.datahost].health.timeout;
    if conn.as_mut().is_none_or(|c| c.closed_by_server()) {
        let wire = CapabilityFlags::CLIENT_DEPRECATE_EOF | CapabilityFlags::CLIENT_MULTI_RESULTS;
        *conn = Some(
            BackendConn::connect(server.pool.spec(), wire.into(), None, false, timeout).await?,
        );
    }
    let c = conn.as_mut().expect("connected");
    let read_only = c.query_value("SELECT @@read_only").await?;
    let row = c.query_named_row(c.info.replica_status_query()).await?;
    let replica = row.as_deref().map(replica_status);
    Ok(Status {
        read_only: read_only.as_deref() != Some("0"),
        replica,
    })
}

/// A replica status row read: MariaDB and MySQL before 8.0.22 name the columns `Slave_*` and
/// `Seconds_Behind_Master`, MySQL since `Replica_*` and `Seconds_Behind_Source`.
fn replica_status(row: &[(String, Option<String>)]) -> Replication {
    let get = |names: [&str; 2]| {
        row.iter()
            .find(|(n, _)| names.iter().any(|x| n.eq_ignore_ascii_case(x)))
            .and_then(|(_, v)| v.as_deref())
    };
    let io = get(["Slave_IO_Running", "Replica_IO_Running"]);
    let sql = get(["Slave_SQL_Running", "Replica_SQL_Running"]) == Some("Yes");
    let io_error = get(["Last_IO_Errno"; 2]).is_some_and(|e| e != "0");
    let lag = get(["Seconds_Behind_Master", "Seconds_Behind_Source"]).and_then(|v| v.parse().ok());
    Replication {
        running: io == Some("Yes") && sql,
        source_lost: sql && (io == Some("Connecting") || (io == Some("No") && io_error)),
        lag,
    }
}

/// Checks server `s` every heartbeat until the process ends.
pub async fn monitor(backends: Arc<Backends>, s: usize) {
    let server = &backends.servers[s];
    let host = &backends.hosts[server.datahost];
    let cfg = host.health.clone();
    let h = &server.health;
    let mut conn: Option<BackendConn> = None;
    let (mut fails, mut oks) = (0u32, 0u32);
    let mut tick = crate::timers::interval(cfg.heartbeat);
    loop {
        tick.tick().await;
        let result = match crate::timers::timeout(cfg.timeout, check(&mut conn, &backends, s)).await
        {
            Ok(r) => r,
            Err(_) => Err(Error::backend_unreachable(
                &server.address,
                "check timed out",
            )),
        };
        let now = now_ms();
        h.last_check_ms.store(now, Ordering::Relaxed);
        match result {
            Ok(st) => {
                fails = 0;
                oks = oks.saturating_add(1);
                h.last_ok.store(true, Ordering::Relaxed);
                h.unreachable_since_ms.store(0, Ordering::Relaxed);
                let ro = if st.read_only { 2 } else { 1 };
                if h.read_only.swap(ro, Ordering::Relaxed) != ro && ro == 1 {
                    info!(server = %server.address, datahost = %host.name, "server is writable (read_only=0)");
                }
                let (running, source_lost, lag) = match st.replica {
                    Some(r) => (r.running, r.source_lost, r.lag.unwrap_or(-1)),
                    None => (true, false, 0),
                };
                let source = if st.replica.is_some() { 2 } else { 1 };
                if h.source.swap(source, Ordering::Relaxed) == 3 - source {
                    info!(server = %server.address, datahost = %host.name, replicates = st.replica.is_some(), "replication connection {}", if st.replica.is_some() { "configured" } else { "removed" });
                }
                let was_running = h.replicating.swap(running, Ordering::Relaxed);
                h.source_lost.store(source_lost, Ordering::Relaxed);
                let old_lag = h.lag.swap(lag, Ordering::Relaxed);
                if lag >= 0 {
                    h.last_known_lag.store(lag, Ordering::Relaxed);
                }
                if st.replica.is_some() {
                    if was_running != running {
                        info!(server = %server.address, datahost = %host.name, running, "replication state changed");
                    }
                    let max = cfg.max_replication_lag.as_secs() as i64;
                    let (was_ok, ok) = (old_lag >= 0 && old_lag <= max, lag >= 0 && lag <= max);
                    if was_ok != ok {
                        info!(server = %server.address, datahost = %host.name, lag, "replication lag {}", if ok { "within the limit: back in the read set" } else { "above the limit or unknown: out of the read set" });
                    }
                }
                if !h.is_up() && oks >= cfg.up_after {
                    h.up.store(true, Ordering::Relaxed);
                    info!(server = %server.address, datahost = %host.name, "server is up");
                }
            }
            Err(e) => {
                conn = None;
                oks = 0;
                fails = fails.saturating_add(1);
                h.errors.fetch_add(1, Ordering::Relaxed);
                h.last_ok.store(false, Ordering::Relaxed);
                let _ = h.unreachable_since_ms.compare_exchange(
                    0,
                    now,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                debug!(server = %server.address, error = %e, "health check failed");
                if h.is_up() && fails >= cfg.down_after {
                    h.up.store(false, Ordering::Relaxed);
                    let dropped = server.pool.discard_idle();
                    info!(server = %server.address, datahost = %host.name, error = %e, dropped, "server is down");
                }
            }
        }
        backends.decide_primary(server.datahost);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::conn::ServerInfo;
    use mysql_common::constants::CapabilityFlags;

    fn row(cols: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        cols.iter()
            .map(|(n, v)| (n.to_string(), v.map(str::to_string)))
            .collect()
    }

    #[test]
    fn replica_status_reads_both_column_namings() {
        let mariadb = row(&[
            ("Slave_IO_Running", Some("Yes")),
            ("Slave_SQL_Running", Some("Yes")),
            ("Seconds_Behind_Master", Some("3")),
        ]);
        assert_eq!(
            replica_status(&mariadb),
            Replication {
                running: true,
                source_lost: false,
                lag: Some(3)
            }
        );
        let mysql = row(&[
            ("Replica_IO_Running", Some("Yes")),
            ("Replica_SQL_Running", Some("No")),
            ("Seconds_Behind_Source", None),
        ]);
        assert_eq!(
            replica_status(&mysql),
            Replication {
                running: false,
                source_lost: false,
                lag: None
            }
        );
    }

    /// A replica whose source is unreachable: the IO thread reconnecting, or stopped by its
    /// error; one stopped on purpose, or with its SQL thread stopped, is not.
    #[test]
    fn replica_status_tells_a_lost_source() {
        let status = |io: &str, sql: &str, errno: &str| {
            replica_status(&row(&[
                ("Slave_IO_Running", Some(io)),
                ("Slave_SQL_Running", Some(sql)),
                ("Last_IO_Errno", Some(errno)),
                ("Seconds_Behind_Master", None),
            ]))
            .source_lost
        };
        assert!(status("Connecting", "Yes", "2003"));
        assert!(status("No", "Yes", "2003"));
        assert!(!status("No", "Yes", "0"));
        assert!(!status("Connecting", "No", "2003"));
        assert!(!status("Yes", "Yes", "0"));
    }

    #[test]
    fn replica_status_query_follows_the_server() {
        let info = |v: &str| ServerInfo {
            version: v.as_bytes().to_vec(),
            capabilities: CapabilityFlags::empty(),
            mariadb: Default::default(),
            collation: 45,
        };
        assert_eq!(
            info("11.4.2-MariaDB").replica_status_query(),
            "SHOW SLAVE STATUS"
        );
        assert_eq!(info("8.0.21").replica_status_query(), "SHOW SLAVE STATUS");
        assert_eq!(info("8.4.3").replica_status_query(), "SHOW REPLICA STATUS");
        assert!(!info("5.5.5-10.6.12-MariaDB").is_mysql());
        assert!(info("8.0.36").is_mysql());
    }
}
