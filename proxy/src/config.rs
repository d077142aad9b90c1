//! Runtime settings of the proxy: the datasource it serves, who may log in, and limits.
//! Quick mode (`--backend mysql://...`) builds one of these from the command line; a config
//! file builds one from the router's [`Topology`] (see `config_file`). Defaults come from the
//! router's config model, written once there.

use std::sync::Arc;
use std::time::Duration;

use shoal_router::config::{PasswordForm, PoolConfig, ServerConfig};
use shoal_router::plan::Router;
use shoal_router::topology::Topology;

use crate::wire::auth::{AuthPlugin, Secret};

/// Largest packet a client may send before it has logged in: a handshake response (user name,
/// schema, connection attributes) is well below this.
pub const LOGIN_MAX_PACKET: usize = 64 * 1024;

/// TLS to clients: PEM files, read when the proxy binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: String,
    pub key: String,
    /// Plain clients are refused with error 3159.
    pub required: bool,
}

/// TLS from the proxy to one backend server (`datahosts[].primary.tls` and replicas').
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum BackendTls {
    /// Plain TCP.
    #[default]
    Off,
    /// Encrypted; the server's certificate is not checked (MySQL's `REQUIRED`).
    Required,
    /// Encrypted, and the server's certificate must be signed by the CA in this PEM file (the
    /// host name is not checked: MySQL's `VERIFY_CA`).
    VerifyCa(String),
}

/// One backend MySQL/MariaDB server and the credentials the proxy uses on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendSpec {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    /// Database the backend connections start in (and the default schema of clients that
    /// connect without naming one).
    pub database: Option<String>,
    pub tls: BackendTls,
}

impl BackendSpec {
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Parses `mysql://USER:PASS@HOST:PORT[/DB]` (user and password percent-decoded; port
    /// defaults to 3306).
    pub fn parse_url(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("mysql://")
            .or_else(|| url.strip_prefix("mariadb://"))
            .ok_or_else(|| format!("backend URL must start with mysql://, got '{url}'"))?;
        let (auth, hostpart) = rest
            .rsplit_once('@')
            .ok_or_else(|| "backend URL needs USER:PASS@ before the host".to_string())?;
        let (user, password) = match auth.split_once(':') {
            Some((u, p)) => (percent_decode(u)?, percent_decode(p)?),
            None => (percent_decode(auth)?, String::new()),
        };
        if user.is_empty() {
            return Err("backend URL has an empty user name".into());
        }
        let (hostport, db) = match hostpart.split_once('/') {
            Some((hp, db)) => {
                let db = db.split('?').next().unwrap_or("");
                (hp, (!db.is_empty()).then(|| db.to_string()))
            }
            None => (hostpart.split('?').next().unwrap_or(""), None),
        };
        let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
            let (h, p) = h
                .split_once(']')
                .ok_or_else(|| format!("bad IPv6 host in '{hostport}'"))?;
            (h.to_string(), p.strip_prefix(':').unwrap_or(""))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p),
                None => (hostport.to_string(), ""),
            }
        };
        if host.is_empty() {
            return Err("backend URL has an empty host".into());
        }
        let port = if port.is_empty() {
            3306
        } else {
            port.parse()
                .map_err(|_| format!("backend URL port '{port}' is not a number"))?
        };
        Ok(BackendSpec {
            host,
            port,
            user,
            password,
            database: db,
            tls: BackendTls::Off,
        })
    }
}

fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent escape in '{s}'"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("'{s}' is not UTF-8 after decoding"))
}

/// Reads a user's configured password, when the configuration loads: a hash when it has one of
/// the hash forms the router's config model recognizes, else plain text.
pub fn secret_of(configured: &str) -> Secret {
    match PasswordForm::of(configured) {
        PasswordForm::Plain => Secret::Plain(configured.to_string()),
        PasswordForm::NativeHash => {
            let mut h = [0u8; 20];
            for (i, b) in h.iter_mut().enumerate() {
                *b = u8::from_str_radix(&configured[1 + 2 * i..3 + 2 * i], 16).unwrap_or(0);
            }
            Secret::NativeHash(h)
        }
        PasswordForm::Sha2Hash => {
            let b = configured.as_bytes();
            let rounds = std::str::from_utf8(&b[3..6])
                .ok()
                .and_then(|r| r.parse::<u32>().ok())
                .unwrap_or(5);
            Secret::Sha2Hash {
                rounds,
                salt: b[7..27].to_vec(),
                digest: String::from_utf8_lossy(&b[27..]).into_owned(),
            }
        }
    }
}

/// A user allowed to log in to the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    /// The password, or its hash.
    pub secret: Secret,
    /// The plugin the user authenticates with (clients using another one are switched).
    pub plugin: AuthPlugin,
    /// Sessions of this user at once (error 1203 beyond); 0 = no limit.
    pub max_connections: usize,
    /// Schemas this user may use; `None` means any the backend has.
    pub schemas: Option<Vec<String>>,
    /// Only reads: the classifier refuses anything else with 1290 (config files route such
    /// users' statements through the router, which classifies them).
    pub read_only: bool,
    /// May run Shoal's administration statements and KILL any session (`users[].admin`; in
    /// quick mode `--admin`).
    pub admin: bool,
}

/// Pool sizing and timing for one datasource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSettings {
    pub min_size: usize,
    pub max_size: usize,
    /// How long a session waits for a free backend connection before getting an error.
    pub acquire_timeout: Duration,
    /// Idle connections above `min_size` are closed after this long.
    pub idle_timeout: Duration,
    /// A connection idle longer than this is pinged before it is handed out.
    pub validate_after: Duration,
    pub connect_timeout: Duration,
}

impl PoolSettings {
    /// The settings of a datahost's `pool:` section.
    pub fn from_config(p: &PoolConfig) -> Self {
        PoolSettings {
            min_size: p.min as usize,
            max_size: (p.max as usize).max(1),
            acquire_timeout: p.acquire_timeout,
            idle_timeout: p.idle_timeout,
            validate_after: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

impl Default for PoolSettings {
    /// A config file's defaults (an omitted `pool:` section).
    fn default() -> Self {
        PoolSettings::from_config(&PoolConfig::default())
    }
}

/// Sharded serving, as configured: the router and one backend per datahost primary (what the
/// process keeps for it while it runs is `runtime::Routing`).
pub struct Sharding {
    pub router: Arc<Router>,
    pub topology: Arc<Topology>,
    /// Per datahost (index as in the topology): its primary, without a database.
    pub hosts: Vec<(BackendSpec, PoolSettings)>,
    /// Per datahost: its replicas, in config order (same pool settings as the primary).
    pub replicas: Vec<Vec<BackendSpec>>,
    /// Users marked `read_only` (their statements are classified; see `exec::replica`).
    pub read_only_users: Vec<String>,
    /// Per user who may not use every logical schema: the ones it may not use (a statement
    /// naming one is refused with 1044). Computed once, not per statement.
    pub denied_schemas: Vec<(String, Vec<String>)>,
}

impl std::fmt::Debug for Sharding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharding")
            .field("datanodes", &self.topology.datanodes.len())
            .field("hosts", &self.hosts)
            .finish()
    }
}

/// The observation settings (see `observe`) of a running proxy (from `server.*`, or quick mode's flags).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObserveConfig {
    pub admin_listen: Option<String>,
    pub metrics: bool,
    pub digests: bool,
    pub slow_log: Option<shoal_router::config::SlowLogConfig>,
}

/// Everything a running proxy needs.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    pub listen: String,
    pub backend: BackendSpec,
    pub users: Vec<User>,
    pub pool: PoolSettings,
    pub max_connections: usize,
    /// A client that sends nothing for this long is disconnected.
    pub client_idle_timeout: Duration,
    /// On SIGTERM/SIGINT, running statements get this long to finish.
    pub shutdown_timeout: Duration,
    /// Largest client packet accepted (the client-side `max_allowed_packet`).
    pub max_packet: usize,
    /// A client must log in within this long of connecting.
    pub handshake_timeout: Duration,
    /// `server.query_timeout`: a backend statement not answered within this long is
    /// interrupted (see `backend::interrupt`); `None` = off.
    pub query_timeout: Option<Duration>,
    /// `server.subquery_max_values` and `server.subquery_max_bytes`: what one statement may
    /// bind from subqueries run first across shards (see `exec::subquery`).
    pub subquery_max_values: usize,
    pub subquery_max_bytes: usize,
    /// `server.gather_max_rows` and `server.gather_max_bytes`: what one statement gathered
    /// on one datanode may copy (see `exec::gather`).
    pub gather_max_rows: usize,
    pub gather_max_bytes: usize,
    /// TLS to clients, if configured.
    pub tls: Option<TlsFiles>,
    /// The RSA private key (PEM) for caching_sha2 over plain TCP; generated at start if `None`.
    pub rsa_private_key: Option<String>,
    /// Logical schema name -> physical database, for schemas whose name differs from the
    /// database that holds them (config files); quick mode has none.
    pub schema_map: Vec<(String, String)>,
    /// Only the schemas in `schema_map` exist for clients (config files); quick mode shows the
    /// backend's databases as they are.
    pub only_mapped_schemas: bool,
    /// Set when statements are planned by the router over several datanodes; `None` relays
    /// every statement to `backend` (quick mode, and config files with one datanode and no
    /// listed tables).
    pub routing: Option<Arc<Sharding>>,
    /// Without the router, a config file's topology: relayed errors are rewritten to its
    /// logical names when its schema's database has another name (see `Runtime::relay_names`;
    /// quick mode has none: clients use the backend's own names).
    pub relay_topology: Option<Arc<Topology>>,
    /// Admin listener, metrics, digests and slow log (`server.*`; see `observe`).
    pub observe: ObserveConfig,
    /// The configuration file this was read from (`None` in quick mode), for
    /// `SHOW SHOAL VERSION`.
    pub config_path: Option<String>,
}

impl ProxyConfig {
    /// Quick mode: one backend, and its own user/password is the only login (not an admin:
    /// `--admin` makes it one).
    pub fn quick(listen: String, backend: BackendSpec) -> Self {
        let secret = Secret::Plain(backend.password.clone());
        let users = vec![User {
            name: backend.user.clone(),
            plugin: secret.default_plugin(),
            secret,
            max_connections: 0,
            schemas: None,
            read_only: false,
            admin: false,
        }];
        let server = ServerConfig::default();
        ProxyConfig {
            listen,
            backend,
            users,
            pool: PoolSettings::default(),
            max_connections: server.max_connections as usize,
            client_idle_timeout: server.client_idle_timeout,
            shutdown_timeout: server.shutdown_timeout,
            max_packet: server.max_allowed_packet as usize,
            handshake_timeout: server.handshake_timeout,
            query_timeout: None,
            subquery_max_values: server.subquery_max_values as usize,
            subquery_max_bytes: server.subquery_max_bytes as usize,
            gather_max_rows: server.gather_max_rows as usize,
            gather_max_bytes: server.gather_max_bytes as usize,
            tls: None,
            rsa_private_key: None,
            schema_map: Vec::new(),
            only_mapped_schemas: false,
            routing: None,
            relay_topology: None,
            observe: ObserveConfig {
                admin_listen: None,
                metrics: true,
                digests: true,
                slow_log: None,
            },
            config_path: None,
        }
    }

    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.iter().find(|u| u.name == name)
    }

    /// Whether `name` may run administration statements.
    pub fn is_admin(&self, name: &str) -> bool {
        self.user(name).is_some_and(|u| u.admin)
    }

    /// The physical database behind a schema name a client used, or `None` if clients cannot
    /// see a schema of that name.
    pub fn physical_schema<'a>(&'a self, logical: &'a str) -> Option<&'a str> {
        match self.schema_map.iter().find(|(l, _)| l == logical) {
            Some((_, p)) => Some(p.as_str()),
            None if self.only_mapped_schemas => None,
            None => Some(logical),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_url() {
        let b = BackendSpec::parse_url("mysql://app:p%40ss@127.0.0.1:3307/shop").unwrap();
        assert_eq!(b.user, "app");
        assert_eq!(b.password, "p@ss");
        assert_eq!(b.host, "127.0.0.1");
        assert_eq!(b.port, 3307);
        assert_eq!(b.database.as_deref(), Some("shop"));
        assert_eq!(b.addr(), "127.0.0.1:3307");
    }

    #[test]
    fn parses_url_without_db_port_or_password() {
        let b = BackendSpec::parse_url("mysql://root@localhost").unwrap();
        assert_eq!((b.user.as_str(), b.password.as_str()), ("root", ""));
        assert_eq!(b.port, 3306);
        assert_eq!(b.database, None);
        let b = BackendSpec::parse_url("mysql://u:p@h:1/").unwrap();
        assert_eq!(b.database, None);
    }

    #[test]
    fn rejects_bad_urls() {
        assert!(BackendSpec::parse_url("postgres://u:p@h:1").is_err());
        assert!(BackendSpec::parse_url("mysql://h:1").is_err());
        assert!(BackendSpec::parse_url("mysql://u:p@h:port").is_err());
    }
}
