//! The process: what every session of one proxy shares ([`Shared`]): the configuration
//! snapshot swapped on reload, the live sessions (for KILL, the processlist and the deadlock
//! detector), XA, observation, login limits. Built once by `server`; sessions and the
//! executor read it, and the layers below reach it through traits of their own (`hooks`).

mod hooks;
pub mod http;
pub mod limits;
pub mod nudge;
pub mod processlist;
pub mod scrape;
pub mod sessions;

use std::sync::Arc;
use std::time::Instant;

use mysql_common::constants::CapabilityFlags;
use tokio::sync::watch;

/// What every session of one proxy shares.
pub struct Shared {
    /// The current configuration snapshot: settings, router, pools and servers. New sessions
    /// and sessions that hold nothing on their old snapshot take it (see
    /// `Session::follow_reload`); a reload swaps it whole (see `crate::reload`).
    pub runtime: arc_swap::ArcSwap<crate::runtime::Runtime>,
    /// How to read the configuration again (`None` in quick mode: there is no file).
    pub reloader: Option<crate::reload::Reloader>,
    /// Reloads run one at a time (SIGHUP and RELOAD SHOAL CONFIG may race).
    pub reload_lock: tokio::sync::Mutex<()>,
    /// The health monitors of the current snapshot's servers (replaced by a reload).
    pub monitors: std::sync::Mutex<Vec<tokio::task::AbortHandle>>,
    /// Version string announced to clients (the backend's own, so drivers enable the same
    /// features they would against it directly).
    pub server_version: Vec<u8>,
    /// The backends' sql_mode at startup: what sessions that never set one are planned with.
    pub default_sql_mode: shoal_router::sql::SqlMode,
    /// Capabilities offered to clients: ours, limited to what the backend supports.
    pub capabilities: CapabilityFlags,
    /// MariaDB's extended capabilities offered to clients (likewise).
    pub mariadb: mysql_common::constants::MariadbCapabilities,
    pub shutdown: watch::Receiver<bool>,
    /// Set once shutdown starts; sessions check it between commands (a cheap load).
    pub stopping: std::sync::atomic::AtomicBool,
    /// Live sessions by handshake id, for KILL.
    pub sessions: sessions::Registry,
    /// TLS to clients, when configured.
    pub tls: Option<crate::wire::tls::ClientTls>,
    /// The key caching_sha2 clients encrypt their password with over plain TCP.
    pub rsa: Arc<crate::wire::rsa_key::RsaKey>,
    pub throttle: limits::LoginThrottle,
    pub user_conns: Arc<limits::UserConnections>,
    pub sha2_cache: limits::Sha2Cache,
    /// XA transactions over datanodes: ids, decision log, recovery, counters.
    pub xa: Arc<crate::xa::Xa>,
    /// Metrics, query digests, slow log (see `observe`).
    pub observe: crate::observe::Observer,
    /// When the proxy started (uptime; the clock of `SHOW SHOAL SESSIONS`).
    pub started: Instant,
}

impl Shared {
    /// Milliseconds from the proxy's start to `at`: the clock of the processlist.
    pub fn ms(&self, at: Instant) -> u64 {
        processlist::ms_since(self.started, at)
    }
}
