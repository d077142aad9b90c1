//! The error of every experiment command (`overhead`, `mycat`, `scale`); the launcher keeps its
//! own [`LaunchError`], wrapped here.

use std::path::PathBuf;

use crate::cluster::LaunchError;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("backend: {0}")]
    Launch(#[from] LaunchError),
    #[error("{0}")]
    Tool(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    /// A statement failed on a named endpoint (`shoal (plan 2) at 127.0.0.1:PORT`).
    #[error("{endpoint}: {what}: {source}")]
    Sql {
        endpoint: String,
        what: String,
        source: mysql_async::Error,
    },
    /// Nothing answers at an endpoint the run needs.
    #[error("{endpoint} is unreachable: {detail}")]
    Unreachable { endpoint: String, detail: String },
    /// A process exited while starting: for Shoal, usually a configuration it refuses (today:
    /// any sharded table, until sharded execution is wired in). Callers report it as "not run".
    #[error("{name} exited with {status} at start-up; its log ({}):\n{log}", log_path.display())]
    ExitedAtStart {
        name: String,
        status: String,
        log_path: PathBuf,
        log: String,
    },
    #[error("interrupted (Ctrl-C); everything started was stopped")]
    Interrupted,
}

impl BenchError {
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
        let what = what.into();
        move |source| BenchError::Io { what, source }
    }

    pub fn sql(
        endpoint: impl Into<String>,
        what: impl Into<String>,
    ) -> impl FnOnce(mysql_async::Error) -> BenchError {
        let (endpoint, what) = (endpoint.into(), what.into());
        move |source| BenchError::Sql {
            endpoint,
            what,
            source,
        }
    }

    /// The first lines of a start-up refusal, for a one-line "not run" note in a report.
    pub fn refusal_summary(&self) -> Option<String> {
        match self {
            BenchError::ExitedAtStart { name, log, .. } => {
                let line = log
                    .lines()
                    .map(str::trim)
                    .find(|l| l.starts_with("shoal:") || l.contains("ERROR"))
                    .or_else(|| log.lines().map(str::trim).find(|l| !l.is_empty()))
                    .unwrap_or("(empty log)");
                Some(format!("{name} refused to start: {line}"))
            }
            _ => None,
        }
    }
}
