//! Real replication between launcher instances: binlog + GTID, replicas `read_only`.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Row};

use super::error::{LaunchError, Result};
use super::{REPL_PASSWORD, REPL_USER};

const REPLICATING_TIMEOUT: Duration = Duration::from_secs(60);
const CATCH_UP_TIMEOUT_SECS: u32 = 60;

/// Points a replica at its primary and starts it. `slave_pos` with an empty position on a fresh
/// replica means "from the primary's first binlog", which holds everything the primary ever did.
pub(crate) async fn start_replica(replica: &Opts, name: &str, primary_port: u16) -> Result<()> {
    let mut conn = Conn::new(replica.clone())
        .await
        .map_err(LaunchError::sql(format!("connecting to replica {name}")))?;
    let change = format!(
        "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary_port}, \
         MASTER_USER='{REPL_USER}', MASTER_PASSWORD='{REPL_PASSWORD}', \
         MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1"
    );
    conn.query_drop(change)
        .await
        .map_err(LaunchError::sql(format!("CHANGE MASTER on {name}")))?;
    conn.query_drop("START SLAVE")
        .await
        .map_err(LaunchError::sql(format!("START SLAVE on {name}")))?;
    let _ = conn.disconnect().await;
    Ok(())
}

/// The replication threads' state as `SHOW SLAVE STATUS` reports it.
#[derive(Debug, Clone, Default)]
pub struct SlaveStatus {
    pub io_running: String,
    pub sql_running: String,
    pub last_io_error: String,
    pub last_sql_error: String,
    /// The code of `last_sql_error` (0 if none).
    pub last_sql_errno: u32,
}

impl SlaveStatus {
    pub fn is_replicating(&self) -> bool {
        self.io_running == "Yes" && self.sql_running == "Yes"
    }

    fn describe(&self) -> String {
        format!(
            "Slave_IO_Running={} Slave_SQL_Running={} Last_IO_Error={:?} Last_SQL_Error={:?}",
            self.io_running, self.sql_running, self.last_io_error, self.last_sql_error
        )
    }
}

pub(crate) async fn slave_status(
    conn: &mut Conn,
) -> Result<Option<SlaveStatus>, mysql_async::Error> {
    let row: Option<Row> = conn.query_first("SHOW SLAVE STATUS").await?;
    Ok(row.map(|row| {
        let field = |name: &str| -> String {
            row.get_opt::<Option<String>, _>(name)
                .and_then(|v| v.ok())
                .flatten()
                .unwrap_or_default()
        };
        SlaveStatus {
            io_running: field("Slave_IO_Running"),
            sql_running: field("Slave_SQL_Running"),
            last_io_error: field("Last_IO_Error"),
            last_sql_error: field("Last_SQL_Error"),
            last_sql_errno: field("Last_SQL_Errno").parse().unwrap_or(0),
        }
    }))
}

/// Waits until both replication threads of a replica run.
pub(crate) async fn wait_replicating(replica: &Opts, name: &str) -> Result<()> {
    let started = Instant::now();
    let mut conn = Conn::new(replica.clone())
        .await
        .map_err(LaunchError::sql(format!("connecting to replica {name}")))?;
    loop {
        let status = slave_status(&mut conn)
            .await
            .map_err(LaunchError::sql(format!("SHOW SLAVE STATUS on {name}")))?;
        match status {
            Some(s) if s.is_replicating() => break,
            Some(s) if !s.last_sql_error.is_empty() => {
                return Err(LaunchError::Replication {
                    name: name.into(),
                    detail: s.describe(),
                });
            }
            other => {
                if started.elapsed() > REPLICATING_TIMEOUT {
                    return Err(LaunchError::Replication {
                        name: name.into(),
                        detail: format!(
                            "not replicating after {} s: {}",
                            REPLICATING_TIMEOUT.as_secs(),
                            other
                                .map(|s| s.describe())
                                .unwrap_or("no slave status".into())
                        ),
                    });
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let _ = conn.disconnect().await;
    Ok(())
}

/// Starts replication again on a replica restarted after a crash, and sees it past every group
/// it may have applied before the crash. MariaDB keeps a replica's XA PREPARE across a crash but
/// not always the GTID position recording it (XA on a replica is not crash-safe: MDEV-31038), so
/// replication can apply that group again and stop with 1440 XAER_DUPID. What a DBA does then
/// is skip that one group: the transaction is prepared on the replica already, and its XA
/// COMMIT or ROLLBACK follows in the next group. Only while the replica is short of `written`
/// (the primary's position at the restart): past it no group can be a replay. Anything else
/// stopping the replica is left for [`wait_applied`] to report.
pub(crate) async fn resume_after_crash(replica: &Opts, name: &str, written: &str) -> Result<()> {
    let mut conn = Conn::new(replica.clone())
        .await
        .map_err(LaunchError::sql(format!("connecting to replica {name}")))?;
    conn.query_drop("START SLAVE")
        .await
        .map_err(LaunchError::sql(format!("START SLAVE on {name}")))?;
    let started = Instant::now();
    while !written.is_empty() && started.elapsed() < REPLICATING_TIMEOUT {
        let waited: Option<i64> = conn
            .exec_first("SELECT MASTER_GTID_WAIT(?, 1)", (written,))
            .await
            .map_err(LaunchError::sql(format!("MASTER_GTID_WAIT on {name}")))?;
        if waited == Some(0) {
            break;
        }
        let status = slave_status(&mut conn)
            .await
            .map_err(LaunchError::sql(format!("SHOW SLAVE STATUS on {name}")))?;
        let Some(s) = status else { break };
        if s.sql_running == "Yes" || s.last_sql_errno != 1440 {
            continue;
        }
        let prepared: Vec<Row> = conn
            .query("XA RECOVER")
            .await
            .map_err(LaunchError::sql(format!("XA RECOVER on {name}")))?;
        if prepared.is_empty() {
            break;
        }
        tracing::warn!(
            replica = name,
            error = %s.last_sql_error,
            "the replica replayed an XA PREPARE it kept across its crash; skipping that group"
        );
        for skip in [
            "SET GLOBAL sql_slave_skip_counter = 1",
            "START SLAVE SQL_THREAD",
        ] {
            conn.query_drop(skip)
                .await
                .map_err(LaunchError::sql(format!("{skip} on {name}")))?;
        }
    }
    let _ = conn.disconnect().await;
    Ok(())
}

/// The primary's current GTID position: everything it has written so far.
pub(crate) async fn primary_position(primary: &Opts, name: &str) -> Result<String> {
    let mut conn = Conn::new(primary.clone())
        .await
        .map_err(LaunchError::sql(format!("connecting to primary {name}")))?;
    let pos: Option<String> = conn
        .query_first("SELECT @@GLOBAL.gtid_binlog_pos")
        .await
        .map_err(LaunchError::sql(format!(
            "reading gtid_binlog_pos on {name}"
        )))?;
    let _ = conn.disconnect().await;
    Ok(pos.unwrap_or_default())
}

/// Blocks until the replica has applied `position`.
pub(crate) async fn wait_applied(replica: &Opts, name: &str, position: &str) -> Result<()> {
    if position.is_empty() {
        return Ok(());
    }
    let mut conn = Conn::new(replica.clone())
        .await
        .map_err(LaunchError::sql(format!("connecting to replica {name}")))?;
    let waited: Option<i64> = conn
        .exec_first(
            "SELECT MASTER_GTID_WAIT(?, ?)",
            (position, CATCH_UP_TIMEOUT_SECS),
        )
        .await
        .map_err(LaunchError::sql(format!("MASTER_GTID_WAIT on {name}")))?;
    if waited != Some(0) {
        let status = slave_status(&mut conn).await.ok().flatten();
        let _ = conn.disconnect().await;
        return Err(LaunchError::Replication {
            name: name.into(),
            detail: format!(
                "did not reach GTID position {position} within {CATCH_UP_TIMEOUT_SECS} s ({})",
                status
                    .map(|s| s.describe())
                    .unwrap_or("no slave status".into())
            ),
        });
    }
    let _ = conn.disconnect().await;
    Ok(())
}
