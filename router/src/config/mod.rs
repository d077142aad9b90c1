//! The YAML configuration model, deserialised straight into these types (serde + serde-saphyr).
//!
//! Every struct denies unknown fields, so a typo is an error with its line and column instead of a
//! silently ignored setting. Semantic checks (names that must exist, shard counts that must agree)
//! happen in [`Config::validate`] / [`crate::topology::Topology::build`], whose errors name the key.

mod de;
pub mod pattern;

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

pub use crate::error::ConfigError;
use crate::error::RouterError;
pub use crate::rule::collation::Collation;
pub use de::{NamePatterns, NullPolicy, Scalar};

/// The whole configuration file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub users: Vec<UserDef>,
    #[serde(default)]
    pub datahosts: Vec<DatahostDef>,
    #[serde(default)]
    pub datanodes: Vec<DatanodeConfig>,
    #[serde(default)]
    pub schemas: Vec<SchemaConfig>,
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
}

impl Config {
    /// Parses YAML text; syntax errors, type errors and unknown keys carry a line and column.
    pub fn from_yaml_str(text: &str) -> Result<Config, ConfigError> {
        serde_saphyr::from_str(text)
            .map_err(|e| RouterError::config_file(format!("invalid configuration: {e}")))
    }

    /// Reads and parses a YAML file (the only I/O in this crate).
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            RouterError::config_file(format!("cannot read config {}: {e}", path.display()))
        })?;
        Config::from_yaml_str(&text).map_err(|e| e.context(path.display()))
    }

    /// Checks every cross-reference and rule; the same checks as building the topology.
    pub fn validate(&self) -> Result<(), ConfigError> {
        crate::topology::Topology::build(self).map(|_| ())
    }
}

/// `server:` — the proxy's own listener and limits.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// `host:port` to listen on.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Client connections accepted at once; more are refused with ER_CON_COUNT_ERROR.
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    /// A client connection idle this long is closed (`0` = never).
    #[serde(default = "default_client_idle_timeout", with = "de::duration")]
    pub client_idle_timeout: Duration,
    /// On shutdown, how long running statements get to finish before connections are cut.
    #[serde(default = "default_shutdown_timeout", with = "de::duration")]
    pub shutdown_timeout: Duration,
    /// `error`, `warn`, `info`, `debug` or `trace` (or a tracing filter directive).
    #[serde(default = "default_log_level")]
    pub log_level: String,
    /// A client must have logged in within this long of connecting, or it is disconnected.
    #[serde(default = "default_handshake_timeout", with = "de::duration")]
    pub handshake_timeout: Duration,
    /// Largest packet a logged-in client may send, in bytes; a larger one gets error 1153 and
    /// the connection is closed, as MySQL does.
    #[serde(default = "default_max_allowed_packet")]
    pub max_allowed_packet: u64,
    /// A statement a backend has not answered in full this long after Shoal sent it is
    /// interrupted (`KILL QUERY` on the backend) and the client gets error 1969, as from
    /// MariaDB's `max_statement_time` (`0` = off, the default).
    #[serde(default, with = "de::duration")]
    pub query_timeout: Duration,
    /// Subqueries run first across shards (their rows bound into the outer statement as
    /// values): the most values (rows x columns) one statement binds; past it the statement
    /// is refused.
    #[serde(default = "default_subquery_max_values")]
    pub subquery_max_values: u64,
    /// ... and the most bytes of those values, as the datanodes sent them.
    #[serde(default = "default_subquery_max_bytes")]
    pub subquery_max_bytes: u64,
    /// SELECTs gathered on one datanode (their tables copied into temporary tables there):
    /// the most rows one statement copies; past it the statement is refused.
    #[serde(default = "default_gather_max_rows")]
    pub gather_max_rows: u64,
    /// ... and the most bytes of those rows, as the datanodes sent them.
    #[serde(default = "default_gather_max_bytes")]
    pub gather_max_bytes: u64,
    /// TLS to clients; without it clients connect in plain text only.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// RSA key pair (PEM files) for `caching_sha2_password` over plain connections; without it
    /// a key pair is generated at start.
    #[serde(default)]
    pub rsa: Option<RsaKeyConfig>,
    /// XA transactions over datanodes: where decisions are logged, how recovery runs.
    #[serde(default)]
    pub xa: XaConfig,
    /// Lock cycles across servers (which no one server sees whole): how often they are looked
    /// for, and after how long a wait.
    #[serde(default)]
    pub deadlock_check: DeadlockCheckConfig,
    /// `host:port` of the admin HTTP listener (`/metrics`, `/health`, `/ready`); off without.
    #[serde(default)]
    pub admin_listen: Option<String>,
    /// Whether statements are counted for `/metrics` (only with `admin_listen`; default on).
    #[serde(default = "default_true")]
    pub metrics: bool,
    /// Whether statements are grouped into query digests (`SHOW SHOAL QUERIES`); default on.
    #[serde(default = "default_true")]
    pub digests: bool,
    /// Statements slower than a threshold are logged; off without.
    #[serde(default)]
    pub slow_log: Option<SlowLogConfig>,
}

/// `server.slow_log:` statements that took at least `threshold` are logged, one line each, to
/// `file` (appended) or, without it, as `tracing` events at target `shoal::slow`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlowLogConfig {
    #[serde(with = "de::duration")]
    pub threshold: Duration,
    #[serde(default)]
    pub file: Option<String>,
}

fn default_true() -> bool {
    true
}

/// `server.xa:` the commit decision log and recovery of XA transactions over datanodes
/// (schemas with `transactions: xa`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct XaConfig {
    /// The datahost whose primary holds the decision log (database `shoal_xa`); default the
    /// first datahost.
    #[serde(default)]
    pub log_datahost: Option<String>,
    /// How often recovery looks for prepared branches left by a coordinator that died.
    #[serde(default = "default_xa_recovery_interval", with = "de::duration")]
    pub recovery_interval: Duration,
    /// Recovery leaves alone transactions younger than this (their coordinator may still be
    /// committing them).
    #[serde(default = "default_xa_recovery_grace", with = "de::duration")]
    pub recovery_grace: Duration,
}

impl Default for XaConfig {
    fn default() -> Self {
        XaConfig {
            log_datahost: None,
            recovery_interval: default_xa_recovery_interval(),
            recovery_grace: default_xa_recovery_grace(),
        }
    }
}

fn default_xa_recovery_interval() -> Duration {
    Duration::from_secs(10)
}
fn default_xa_recovery_grace() -> Duration {
    Duration::from_secs(30)
}

/// `server.deadlock_check:` a session's statement running longer than `wait_threshold` makes
/// Shoal read the servers' lock waits, every `interval`, and end the youngest transaction of a
/// cycle of sessions waiting for each other across servers with 1213.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeadlockCheckConfig {
    /// How often running statements are looked at (`0` turns the detector off).
    #[serde(default = "default_deadlock_interval", with = "de::duration")]
    pub interval: Duration,
    /// The servers are asked for their lock waits only while some statement has run this long.
    #[serde(default = "default_deadlock_wait_threshold", with = "de::duration")]
    pub wait_threshold: Duration,
}

impl Default for DeadlockCheckConfig {
    fn default() -> Self {
        DeadlockCheckConfig {
            interval: default_deadlock_interval(),
            wait_threshold: default_deadlock_wait_threshold(),
        }
    }
}

fn default_deadlock_interval() -> Duration {
    Duration::from_millis(200)
}
fn default_deadlock_wait_threshold() -> Duration {
    Duration::from_millis(500)
}

/// `server.tls:` certificate and key (PEM files) offered to clients.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// Certificate chain, leaf first.
    pub cert: String,
    /// Private key (PKCS#8, PKCS#1 or SEC1).
    pub key: String,
    /// Refuse clients that do not switch to TLS (error 3159).
    #[serde(default)]
    pub required: bool,
}

/// `server.rsa:` the key pair clients encrypt `caching_sha2_password` passwords with.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RsaKeyConfig {
    /// Private key (PKCS#8 or PKCS#1 PEM).
    pub private_key: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: default_listen(),
            max_connections: default_max_connections(),
            client_idle_timeout: default_client_idle_timeout(),
            shutdown_timeout: default_shutdown_timeout(),
            log_level: default_log_level(),
            handshake_timeout: default_handshake_timeout(),
            max_allowed_packet: default_max_allowed_packet(),
            query_timeout: Duration::ZERO,
            subquery_max_values: default_subquery_max_values(),
            subquery_max_bytes: default_subquery_max_bytes(),
            gather_max_rows: default_gather_max_rows(),
            gather_max_bytes: default_gather_max_bytes(),
            tls: None,
            rsa: None,
            xa: XaConfig::default(),
            deadlock_check: DeadlockCheckConfig::default(),
            admin_listen: None,
            metrics: true,
            digests: true,
            slow_log: None,
        }
    }
}

fn default_listen() -> String {
    "127.0.0.1:8066".to_string()
}
fn default_max_connections() -> u32 {
    1024
}
fn default_client_idle_timeout() -> Duration {
    Duration::from_secs(28800) // MySQL's wait_timeout default
}
fn default_shutdown_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_handshake_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_subquery_max_values() -> u64 {
    100_000
}
fn default_subquery_max_bytes() -> u64 {
    16 << 20
}
fn default_gather_max_rows() -> u64 {
    1_000_000
}
fn default_gather_max_bytes() -> u64 {
    256 << 20
}
fn default_max_allowed_packet() -> u64 {
    64 << 20 // MySQL 8's default
}
fn default_log_level() -> String {
    "info".to_string()
}

/// `users:` — who may connect to the proxy.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UserDef {
    pub name: String,
    /// The password in plain text, or its hash: `*` and 40 hex digits (`mysql_native_password`,
    /// as `PASSWORD('...')` prints it) or `$A$005$...` (`caching_sha2_password`). See
    /// `shoal hash-password`.
    #[serde(default)]
    pub password: String,
    /// The plugin clients authenticate with: `mysql_native_password` or
    /// `caching_sha2_password`; default from the password form (a `$A$` hash means caching_sha2,
    /// otherwise native).
    #[serde(default)]
    pub auth_plugin: Option<String>,
    /// Connections of this user at once; more are refused with error 1203. 0 = no limit.
    #[serde(default)]
    pub max_connections: u32,
    /// Logical schemas this user may use (at least one).
    pub schemas: Vec<String>,
    /// Refuse every write from this user.
    #[serde(default)]
    pub read_only: bool,
    /// May run Shoal's administration statements (`SHOW SHOAL ...`, `RELOAD SHOAL CONFIG`)
    /// and KILL any user's session; others get error 1227.
    #[serde(default)]
    pub admin: bool,
}

/// How a configured password is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PasswordForm {
    Plain,
    /// `*` and 40 hex digits: SHA1(SHA1(password)), MySQL's `mysql_native_password` hash.
    NativeHash,
    /// `$A$005$` + 20-byte salt + 43-character digest: MySQL's `caching_sha2_password` hash.
    Sha2Hash,
}

impl PasswordForm {
    pub fn of(password: &str) -> PasswordForm {
        let b = password.as_bytes();
        if b.len() == 41 && b[0] == b'*' && b[1..].iter().all(u8::is_ascii_hexdigit) {
            PasswordForm::NativeHash
        } else if password.starts_with("$A$") && b.len() == 70 {
            PasswordForm::Sha2Hash
        } else {
            PasswordForm::Plain
        }
    }
}

/// `datahosts:` — one MySQL primary with optional replicas.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DatahostDef {
    pub name: String,
    pub primary: HostEndpoint,
    #[serde(default)]
    pub replicas: Vec<HostEndpoint>,
    #[serde(default)]
    pub pool: PoolConfig,
    /// How reads that may use a replica are spread over the servers.
    #[serde(default)]
    pub balance: Balance,
    /// Whether a session's reads after its own writes must see them.
    #[serde(default)]
    pub read_your_writes: ReadYourWrites,
    /// The health monitor's checks of every server of this datahost.
    #[serde(default)]
    pub health: HealthConfig,
    /// Where plain reads go while the primary cannot be reached.
    #[serde(default)]
    pub read_when_primary_down: ReadWhenPrimaryDown,
}

impl DatahostDef {
    /// The read weight of server `i` (0 = the primary, then the replicas): replicas default to
    /// 1; the primary takes reads only with an explicit weight (or when no replica can).
    pub fn read_weight(&self, i: usize) -> u32 {
        if i == 0 {
            self.primary.weight.unwrap_or(0)
        } else {
            self.replicas
                .get(i - 1)
                .map_or(0, |r| r.weight.unwrap_or(default_weight()))
        }
    }
}

/// `balance:` of a datahost: where reads that may leave the primary go.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Every statement on the primary (replicas ignored).
    #[default]
    PrimaryOnly,
    /// In turn over the servers with a non-zero weight.
    RoundRobin,
    /// At random, in proportion to the servers' weights.
    WeightedRandom,
    /// The server with the fewest connections in use (relative to its weight).
    LeastConnections,
}

impl Balance {
    pub fn as_str(self) -> &'static str {
        match self {
            Balance::PrimaryOnly => "primary_only",
            Balance::RoundRobin => "round_robin",
            Balance::WeightedRandom => "weighted_random",
            Balance::LeastConnections => "least_connections",
        }
    }
}

/// `read_your_writes:` of a datahost: `off`, `{ primary_after_write: 2s }` (reads go to the
/// primary for that long after the session's last write there) or `{ causal: 1s }` (a replica
/// read first waits up to that long for the GTID of the session's last write, else the read
/// goes to the primary).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ReadYourWrites {
    #[default]
    Off,
    PrimaryAfterWrite(#[serde(with = "de::duration")] Duration),
    Causal(#[serde(with = "de::duration")] Duration),
}

/// `read_when_primary_down:` of a datahost: `none` (reads that would go to the primary fail
/// with it, and a replica whose replication cannot reach the primary leaves the read set) or
/// `replicas` (a replica whose only fault is the lost primary, its IO thread failing to reach
/// it while its SQL thread runs, keeps serving plain reads, at an unknown lag; causal reads
/// still wait for the session's writes, and writes and transactions still fail).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ReadWhenPrimaryDown {
    #[default]
    None,
    Replicas,
}

/// `health:` of a datahost.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    /// How often each server is checked.
    #[serde(default = "default_heartbeat", with = "de::duration")]
    pub heartbeat: Duration,
    /// A check (connect included) slower than this fails.
    #[serde(default = "default_health_timeout", with = "de::duration")]
    pub timeout: Duration,
    /// Consecutive failed checks that mark a server down.
    #[serde(default = "default_down_after")]
    pub down_after: u32,
    /// Consecutive good checks that bring a down server back.
    #[serde(default = "default_up_after")]
    pub up_after: u32,
    /// A replica further behind than this (`Seconds_Behind_Master`) takes no reads.
    #[serde(default = "default_max_replication_lag", with = "de::duration")]
    pub max_replication_lag: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            heartbeat: default_heartbeat(),
            timeout: default_health_timeout(),
            down_after: default_down_after(),
            up_after: default_up_after(),
            max_replication_lag: default_max_replication_lag(),
        }
    }
}

fn default_heartbeat() -> Duration {
    Duration::from_secs(1)
}
fn default_health_timeout() -> Duration {
    Duration::from_secs(1)
}
fn default_down_after() -> u32 {
    3
}
fn default_up_after() -> u32 {
    2
}
fn default_max_replication_lag() -> Duration {
    Duration::from_secs(10)
}

/// One MySQL server: where it is and how to log in.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostEndpoint {
    /// `host:port`.
    pub address: String,
    pub user: String,
    #[serde(default)]
    pub password: String,
    /// Share of reads (see [`DatahostDef::read_weight`]): replicas default to 1, the primary
    /// to 0 (it reads only when no replica can); 0 = no reads.
    #[serde(default)]
    pub weight: Option<u32>,
    /// TLS from the proxy to this server.
    #[serde(default)]
    pub tls: HostTls,
    /// PEM file of the CA that must have signed the server's certificate (`tls: verify_ca`).
    #[serde(default)]
    pub tls_ca: Option<String>,
}

/// `tls:` of a datahost server (the proxy is checked by `shoal-proxy`, which reads `tls_ca`).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum HostTls {
    /// Plain TCP.
    #[default]
    Off,
    /// Encrypted; the certificate is not checked.
    Required,
    /// Encrypted; the certificate must be signed by `tls_ca` (the host name is not checked).
    VerifyCa,
}

impl HostEndpoint {
    /// The host and port of `address` (validated by `Topology::build`).
    pub fn host_port(&self) -> Option<(&str, u16)> {
        pattern::split_host_port(&self.address)
    }
}

fn default_weight() -> u32 {
    1
}

/// `pool:` of a datahost: connections to each of its servers.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// Connections kept open even when idle.
    #[serde(default)]
    pub min: u32,
    /// At most this many connections per server.
    #[serde(default = "default_pool_max")]
    pub max: u32,
    /// How long a statement waits for a free connection before failing.
    #[serde(default = "default_acquire_timeout", with = "de::duration")]
    pub acquire_timeout: Duration,
    /// Idle connections above `min` are closed after this long.
    #[serde(default = "default_pool_idle_timeout", with = "de::duration")]
    pub idle_timeout: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            min: 0,
            max: default_pool_max(),
            acquire_timeout: default_acquire_timeout(),
            idle_timeout: default_pool_idle_timeout(),
        }
    }
}

fn default_pool_max() -> u32 {
    64
}
fn default_acquire_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_pool_idle_timeout() -> Duration {
    Duration::from_secs(300)
}

/// `datanodes:` — one entry may define many datanodes with ranges (see [`pattern`]).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DatanodeConfig {
    /// `dn1`, or a range: `dn$1-21` / `dn1..dn21`.
    pub name: String,
    /// A datahost name, or a range of them (`dh$1-3`).
    pub datahost: String,
    /// The physical database, or a range (`db$1-7`).
    pub database: String,
}

/// `schemas:` — a logical database as clients see it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SchemaConfig {
    pub name: String,
    /// Where tables not listed under `tables` live; without it they are unknown.
    #[serde(default)]
    pub default_datanode: Option<String>,
    #[serde(default)]
    pub tables: Vec<TableConfig>,
    /// Which FOREIGN KEYs DDL through Shoal may declare on the datanodes.
    #[serde(default)]
    pub foreign_keys: ForeignKeys,
    /// How a transaction that wrote to several datanodes commits.
    #[serde(default)]
    pub transactions: Transactions,
}

/// `transactions:` of a schema: how a transaction (or one statement's own) that wrote to
/// several datanodes commits.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Transactions {
    /// Two-phase commit over XA branches, with a durable decision record and recovery: all
    /// datanodes commit or none does, also when Shoal dies during COMMIT.
    #[default]
    Xa,
    /// Each datanode committed in turn; a failure after one committed is error 1180 naming
    /// both sides (no record, no recovery).
    BestEffort,
}

impl Transactions {
    pub fn as_str(self) -> &'static str {
        match self {
            Transactions::Xa => "xa",
            Transactions::BestEffort => "best_effort",
        }
    }
}

/// `foreign_keys:` of a schema. Each datanode enforces a foreign key over its own rows only,
/// so a constraint means what it says only when every row and the row it references share a
/// datanode.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ForeignKeys {
    /// Only foreign keys that are exact per datanode: between co-located tables on their shard
    /// keys, to a global table on every datanode of the referencing table, within one datanode.
    #[default]
    Exact,
    /// Also any other foreign key whose referenced table is on each datanode of the referencing
    /// one, declared there as written (Vitess's `foreign_key_mode: unmanaged`): for clients
    /// that declare foreign keys they never rely on (sysbench-tpcc, with FOREIGN_KEY_CHECKS=0).
    DatanodeLocal,
}

impl ForeignKeys {
    pub fn as_str(self) -> &'static str {
        match self {
            ForeignKeys::Exact => "exact",
            ForeignKeys::DatanodeLocal => "datanode_local",
        }
    }
}

/// The kind of a listed table.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TableKind {
    Sharded,
    Global,
    Child,
}

/// One entry of `schemas[].tables`. Which keys apply depends on `type`; the others are errors.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TableConfig {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: TableKind,
    /// sharded: the column the rule is applied to.
    #[serde(default)]
    pub shard_key: Option<String>,
    /// sharded: the name of a `rules:` entry.
    #[serde(default)]
    pub rule: Option<String>,
    /// sharded, global: datanode names and ranges (`dn$1-4`, `[dn1, dn2]`, `"dn1,dn3"`).
    #[serde(default)]
    pub datanodes: Option<NamePatterns>,
    /// sharded (table-per-shard), child: physical table name, e.g. `t_order_{index:04}`.
    #[serde(default)]
    pub physical_name: Option<String>,
    /// sharded: physical tables per datanode (table-per-shard); default 1.
    #[serde(default)]
    pub tables_per_datanode: Option<usize>,
    /// child: the parent table (sharded, or itself a child).
    #[serde(default)]
    pub parent: Option<String>,
    /// child: this table's column that equals the parent's `parent_key` column.
    #[serde(default)]
    pub join_key: Option<String>,
    /// child: the parent's column; must be the parent's shard key (or, for a child parent, its
    /// join key). Defaults to exactly that.
    #[serde(default)]
    pub parent_key: Option<String>,
    /// sharded: fill the shard key from a global sequence when an INSERT leaves it out.
    #[serde(default)]
    pub sequence: Option<SequenceConfig>,
}

/// A global sequence (Mycat's): ids handed out in segments of `step` from the table
/// `shoal_sequence` on `datanode`, one row per sequenced table, shared by every Shoal process.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SequenceConfig {
    pub datanode: String,
    /// Ids taken per round trip to the sequence table; default 1000.
    #[serde(default)]
    pub step: Option<u64>,
}

/// Shard algorithms.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    Mod,
    Hash,
    Range,
    Date,
    List,
    Consistent,
}

impl Algorithm {
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Mod => "mod",
            Algorithm::Hash => "hash",
            Algorithm::Range => "range",
            Algorithm::Date => "date",
            Algorithm::List => "list",
            Algorithm::Consistent => "consistent",
        }
    }
}

/// How a rule reads the shard key's values.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
    /// Integer column (any size, signed or unsigned): numbers, and strings holding numbers
    /// (`'42'` routes like 42). Stored values are rounded as MariaDB rounds them.
    Integer,
    /// DECIMAL column (range rule only): bounds are exact over fractional values.
    Decimal,
    /// String column: compared case-insensitively, trailing spaces ignored.
    String,
}

/// Date interval unit of the `date` rule.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum DateUnit {
    Day,
    Week,
    Month,
    Year,
}

/// `rules:` — a named shard algorithm with its parameters.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    pub name: String,
    pub algorithm: Algorithm,
    /// Number of shards; optional (the table's shard count is used), but must match when given.
    #[serde(default)]
    pub shards: Option<usize>,
    /// hash, consistent, list, range: how values are read (see [`KeyType`]).
    #[serde(default)]
    pub key_type: Option<KeyType>,
    /// hash, consistent, list with string keys: the column's collation (default `general_ci`).
    #[serde(default)]
    pub collation: Option<Collation>,
    /// range: `[from, to)` intervals, each to a shard index.
    #[serde(default)]
    pub ranges: Option<Vec<RangeConfig>>,
    /// list: values per shard index.
    #[serde(default)]
    pub values: Option<Vec<ListEntry>>,
    /// date: the first day of shard 0, `YYYY-MM-DD`.
    #[serde(default)]
    pub start: Option<String>,
    /// date: `day`, `week`, `month` or `year`.
    #[serde(default)]
    pub unit: Option<DateUnit>,
    /// date: units per shard (default 1).
    #[serde(default)]
    pub interval: Option<u32>,
    /// range with `key_type: decimal`: the DECIMAL column's scale (digits after the point).
    /// MariaDB rounds a stored value to it (999999.995 is stored as 1000000.00 in DECIMAL(10,2)),
    /// so an INSERT goes where the rounded value lives. Without it, an INSERT whose floor depends
    /// on the scale is refused.
    #[serde(default)]
    pub scale: Option<u32>,
    /// range, list, date: shard for values no entry covers; without it such values are errors.
    #[serde(default)]
    pub default: Option<usize>,
    /// Shard for NULL (default 0), or `error` to refuse NULL shard keys.
    #[serde(default)]
    pub null_shard: NullPolicy,
}

/// One interval of a `range` rule: `from` inclusive, `to` exclusive; either may be omitted
/// (unbounded).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RangeConfig {
    #[serde(default)]
    pub from: Option<Scalar>,
    #[serde(default)]
    pub to: Option<Scalar>,
    pub shard: usize,
}

/// One entry of a `list` rule: these values go to `shard`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ListEntry {
    pub shard: usize,
    pub values: Vec<Scalar>,
}
