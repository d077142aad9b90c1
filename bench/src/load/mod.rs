//! The load generator (tokio + mysql_async, no external tool) of the `mycat` and `scale`
//! experiments: the Mycat report's 15-column table, inserts in timed rounds at a fixed
//! concurrency, and query phases (point selects, scatter aggregates) whose every answer is checked.

mod insert;
mod query;
pub mod table;

use std::time::Duration;

use mysql_async::{Conn, Opts, OptsBuilder};

pub use insert::{InsertSpec, RoundStat, insert_rounds};
pub use query::{QueryKind, QuerySpec, QueryStat, run_queries};

use crate::error::BenchError;

/// Waits for every spawned loading task (one per connection); the first failure, or a task that
/// panicked, is the load's.
pub async fn join_loads(
    tasks: Vec<tokio::task::JoinHandle<Result<(), BenchError>>>,
) -> Result<(), BenchError> {
    for t in tasks {
        t.await
            .map_err(|e| BenchError::Tool(format!("load task: {e}")))??;
    }
    Ok(())
}

/// A MySQL-protocol endpoint: a backend, Shoal, or another proxy.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Names the endpoint in errors and reports, e.g. `shoal (plan 2)`.
    pub name: String,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub db: Option<String>,
}

impl Endpoint {
    /// `name at host:port`, how errors name it.
    pub fn label(&self) -> String {
        format!("{} at {}:{}", self.name, self.host, self.port)
    }

    pub fn opts(&self) -> Opts {
        OptsBuilder::default()
            .ip_or_hostname(self.host.clone())
            .tcp_port(self.port)
            .user(Some(self.user.clone()))
            .pass(Some(self.password.clone()))
            .db_name(self.db.clone())
            // TCP only: mysql_async would otherwise switch to the server's unix socket, skipping
            // the proxy.
            .prefer_socket(false)
            .into()
    }

    /// One connection, or an error naming the endpoint: `Unreachable` when nothing answers.
    pub async fn connect(&self) -> Result<Conn, BenchError> {
        match tokio::time::timeout(Duration::from_secs(30), Conn::new(self.opts())).await {
            Err(_) => Err(BenchError::Unreachable {
                endpoint: self.label(),
                detail: "no handshake within 30 s".into(),
            }),
            Ok(Err(mysql_async::Error::Io(e))) => Err(BenchError::Unreachable {
                endpoint: self.label(),
                detail: e.to_string(),
            }),
            Ok(Err(e)) => Err(BenchError::sql(self.label(), "connect")(e)),
            Ok(Ok(conn)) => Ok(conn),
        }
    }

    /// Runs statements one after the other on a fresh connection.
    pub async fn execute(&self, statements: &[String]) -> Result<(), BenchError> {
        use mysql_async::prelude::Queryable;
        let mut conn = self.connect().await?;
        for sql in statements {
            conn.query_drop(sql.as_str())
                .await
                .map_err(BenchError::sql(self.label(), abbreviate(sql)))?;
        }
        let _ = conn.disconnect().await;
        Ok(())
    }
}

/// A statement shortened for an error message.
pub(crate) fn abbreviate(sql: &str) -> String {
    if sql.len() <= 120 {
        sql.to_string()
    } else {
        let mut end = 117;
        while !sql.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &sql[..end])
    }
}
