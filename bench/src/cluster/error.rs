use std::path::PathBuf;

/// Everything that can go wrong while starting, inspecting or stopping local MariaDB backends.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(
        "no MariaDB server binary found (looked at: {looked}); install one with \
         `apt-get install -y mariadb-server` (as root) or point SHOAL_MARIADBD at mariadbd"
    )]
    ServerNotFound { looked: String },

    #[error(
        "mariadb-install-db not found (looked at: {looked}); install it with \
         `apt-get install -y mariadb-server` (as root) or point SHOAL_MARIADB_INSTALL_DB at it"
    )]
    InstallDbNotFound { looked: String },

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    #[error("initialising the template data dir failed (`{command}`):\n{output}")]
    InstallDb { command: String, output: String },

    #[error("instance {name} (port {port}) exited during start-up; end of {log}:\n{log_tail}")]
    Exited {
        name: String,
        port: u16,
        log: PathBuf,
        log_tail: String,
    },

    #[error("instance {name} (port {port}) did not answer within {secs} s; see {log}")]
    NotReady {
        name: String,
        port: u16,
        secs: u64,
        log: PathBuf,
    },

    #[error("{context}: {source}")]
    Sql {
        context: String,
        #[source]
        source: mysql_async::Error,
    },

    #[error("replica {name}: {detail}")]
    Replication { name: String, detail: String },

    #[error("ports: {0}")]
    Ports(String),

    #[error("cluster dir {dir}: {detail}")]
    State { dir: PathBuf, detail: String },

    #[error("invalid cluster spec: {0}")]
    Spec(String),
}

impl LaunchError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> LaunchError {
        let context = context.into();
        move |source| LaunchError::Io { context, source }
    }

    pub(crate) fn sql(
        context: impl Into<String>,
    ) -> impl FnOnce(mysql_async::Error) -> LaunchError {
        let context = context.into();
        move |source| LaunchError::Sql { context, source }
    }
}

pub type Result<T, E = LaunchError> = std::result::Result<T, E>;
