//! The decision log: table `shoal_xa.decisions` on the log datahost's primary, created by
//! Shoal with its backend account when missing (a physical database no logical schema maps,
//! so clients never see it). One row per two-phase transaction: `commit`, written by the
//! coordinator after every branch prepared and before the first `XA COMMIT`; or `rollback`, a
//! tombstone recovery writes before rolling back branches that have no decision (the
//! coordinator's own `commit` insert then fails on the key and it rolls back too).

use crate::backend::conn::BackendConn;
use crate::error::{Error, Result};
use crate::wire::command::COM_QUERY;

const CREATE_DATABASE: &str = "CREATE DATABASE IF NOT EXISTS shoal_xa";
const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS shoal_xa.decisions (\
     gtrid VARBINARY(64) NOT NULL PRIMARY KEY, \
     outcome ENUM('commit','rollback') NOT NULL, \
     datanodes VARBINARY(2048) NOT NULL DEFAULT '', \
     decided TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)) ENGINE=InnoDB";

/// ER_DUP_ENTRY: a row for the gtrid exists already (recovery's tombstone).
pub const DUP_ENTRY: u16 = 1062;

/// What the log says of a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Commit,
    Rollback,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{c:02x}")).collect()
}

/// Creates the log's database and table if they are missing.
pub async fn ensure_table(conn: &mut BackendConn) -> Result<()> {
    conn.command(COM_QUERY, CREATE_DATABASE.as_bytes()).await?;
    conn.command(COM_QUERY, CREATE_TABLE.as_bytes()).await?;
    Ok(())
}

/// Whether `e` says the log's database or table does not exist (yet).
fn missing_table(e: &Error) -> bool {
    matches!(e.as_reply(), Some((1146 | 1049, _, _)))
}

/// How long writing a decision may take: past it the connection is given up (an I/O error:
/// the caller drops it) and the decision is unknown, which recovery settles; a log server that
/// stopped answering does not hold a committing session forever.
pub const DECISION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Writes the commit decision of `gtrid` (branches on `datanodes`). `Err` with
/// [`DUP_ENTRY`]: recovery decided first (rollback). Any other error: the decision may or may
/// not be written (an I/O error, or no answer within [`DECISION_TIMEOUT`]: the connection must
/// not be reused) or is not (a server error).
pub async fn record_commit(conn: &mut BackendConn, gtrid: &str, datanodes: &str) -> Result<()> {
    match crate::timers::timeout(DECISION_TIMEOUT, write_commit(conn, gtrid, datanodes)).await {
        Ok(r) => r,
        Err(_) => Err(Error::BackendIo(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("the XA decision log did not answer in {DECISION_TIMEOUT:?}"),
        ))),
    }
}

async fn write_commit(conn: &mut BackendConn, gtrid: &str, datanodes: &str) -> Result<()> {
    let sql = format!(
        "INSERT INTO shoal_xa.decisions (gtrid, outcome, datanodes) VALUES (X'{}', 'commit', X'{}')",
        hex(gtrid.as_bytes()),
        hex(datanodes.as_bytes())
    );
    match conn.command(COM_QUERY, sql.as_bytes()).await {
        Err(e) if missing_table(&e) => {
            ensure_table(conn).await?;
            conn.command(COM_QUERY, sql.as_bytes()).await.map(|_| ())
        }
        r => r.map(|_| ()),
    }
}

/// The decision for `gtrid`, as recovery takes it: the row if there is one, else a rollback
/// tombstone written now (so that its coordinator, if still alive, cannot commit any more);
/// with the datanodes a commit decision names.
pub async fn decide_for_recovery(
    conn: &mut BackendConn,
    gtrid: &[u8],
) -> Result<(Outcome, Vec<String>)> {
    let g = hex(gtrid);
    let insert = format!(
        "INSERT IGNORE INTO shoal_xa.decisions (gtrid, outcome) VALUES (X'{g}', 'rollback')"
    );
    conn.command(COM_QUERY, insert.as_bytes()).await?;
    let select = format!("SELECT outcome, datanodes FROM shoal_xa.decisions WHERE gtrid = X'{g}'");
    let rows = conn.query_rows(&select).await?;
    let Some(row) = rows.first() else {
        return Err(Error::reply(
            1399,
            b"XAE07",
            "the XA decision row vanished while recovery read it",
        ));
    };
    let named = row
        .get(1)
        .cloned()
        .flatten()
        .map(|d| {
            String::from_utf8_lossy(&d)
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    match row.first().cloned().flatten() {
        Some(v) if v == b"commit" => Ok((Outcome::Commit, named)),
        _ => Ok((Outcome::Rollback, named)),
    }
}

/// Removes decision rows no branch needs any more: commit rows older than `grace` and
/// tombstones older than `tombstone_age` whose gtrid is not in `prepared` (every prepared
/// branch of ours seen on every server in this scan).
pub async fn collect_garbage(
    conn: &mut BackendConn,
    prepared: &[Vec<u8>],
    grace: std::time::Duration,
    tombstone_age: std::time::Duration,
) -> Result<()> {
    let keep = if prepared.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = prepared.iter().map(|g| format!("X'{}'", hex(g))).collect();
        format!(" AND gtrid NOT IN ({})", list.join(", "))
    };
    let sql = format!(
        "DELETE FROM shoal_xa.decisions WHERE ((outcome = 'commit' AND decided < \
         NOW(3) - INTERVAL {} MICROSECOND) OR (outcome = 'rollback' AND decided < NOW(3) - \
         INTERVAL {} MICROSECOND)){keep}",
        grace.as_micros(),
        tombstone_age.as_micros()
    );
    conn.command(COM_QUERY, sql.as_bytes()).await.map(|_| ())
}
