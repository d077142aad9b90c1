//! The servers behind each datahost (its primary and replicas, one pool each) and which one a
//! statement gets: the current primary for anything that must run there, a server of the read
//! set for reads, as the datahost's `balance` mode says. Health comes from [`super::health`].

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rand::Rng;
use shoal_router::config::{
    Balance, DatahostDef, HealthConfig, ReadWhenPrimaryDown, ReadYourWrites,
};
use tracing::info;

use super::health::Health;
use super::pool::BackendPool;

/// One server (primary or replica) of a datahost.
pub struct Server {
    pub datahost: usize,
    pub address: String,
    pub pool: Arc<BackendPool>,
    /// Share of reads (0 = none).
    pub weight: u32,
    /// Shared with the snapshots that keep this server over a reload (see `crate::reload`).
    pub health: Arc<Health>,
}

/// One datahost: its servers and how reads are spread over them.
pub struct Host {
    pub name: String,
    /// Indices in [`Backends::servers`]; the configured primary first.
    pub servers: Vec<usize>,
    pub balance: Balance,
    pub read_your_writes: ReadYourWrites,
    pub health: HealthConfig,
    pub read_when_primary_down: ReadWhenPrimaryDown,
    /// The server writes go to now (moves when failover is followed).
    primary: AtomicUsize,
    /// Round-robin position.
    next: AtomicUsize,
}

impl Host {
    pub fn primary(&self) -> usize {
        self.primary.load(Ordering::Relaxed)
    }

    pub fn has_replicas(&self) -> bool {
        self.servers.len() > 1
    }
}

/// Every server of every datahost; pools are indexed like `servers`.
pub struct Backends {
    pub servers: Vec<Server>,
    pub hosts: Vec<Host>,
    /// Some datahost has replicas (asked on every statement: kept, not recounted).
    read_balancing: bool,
}

impl Backends {
    /// One server per primary and replica of each datahost; `pool_of(datahost, endpoint)`
    /// builds a server's pool (endpoint 0 is the primary).
    pub fn new(
        datahosts: &[DatahostDef],
        mut pool_of: impl FnMut(usize, usize) -> Arc<BackendPool>,
    ) -> Backends {
        let mut servers = Vec::new();
        let mut hosts = Vec::new();
        for (dh, def) in datahosts.iter().enumerate() {
            let endpoints = std::iter::once(&def.primary).chain(def.replicas.iter());
            let first = servers.len();
            for (j, e) in endpoints.enumerate() {
                servers.push(Server {
                    datahost: dh,
                    address: e.address.clone(),
                    pool: pool_of(dh, j),
                    weight: def.read_weight(j),
                    health: Arc::default(),
                });
            }
            hosts.push(Host {
                name: def.name.clone(),
                servers: (first..servers.len()).collect(),
                balance: def.balance,
                read_your_writes: def.read_your_writes,
                health: def.health.clone(),
                read_when_primary_down: def.read_when_primary_down,
                primary: AtomicUsize::new(first),
                next: AtomicUsize::new(0),
            });
        }
        let read_balancing = hosts.iter().any(|h| h.has_replicas());
        Backends {
            servers,
            hosts,
            read_balancing,
        }
    }

    /// Whether any datahost spreads reads (else the executor skips the read/write decision).
    pub fn any_read_balancing(&self) -> bool {
        self.read_balancing
    }

    /// The current primary of datahost `dh`.
    pub fn primary(&self, dh: usize) -> usize {
        self.hosts[dh].primary()
    }

    /// Whether server `s` may take reads now: up, with weight, and (unless it is the primary)
    /// replicating within the lag limit, or serving while the primary is down
    /// ([`Self::serves_for_lost_primary`]). With `read_when_primary_down: replicas`, a primary
    /// that cannot be reached is not read from.
    fn readable(&self, s: usize) -> bool {
        let server = &self.servers[s];
        let host = &self.hosts[server.datahost];
        if server.weight == 0 || !server.health.is_up() || server.pool.is_draining() {
            return false;
        }
        if s == host.primary() {
            return !self.reads_leave_primary(server.datahost);
        }
        server.health.replica_ok(host.health.max_replication_lag) || self.serves_for_lost_primary(s)
    }

    /// Whether datahost `dh` reads on its replicas because its primary cannot be reached
    /// (`read_when_primary_down: replicas`): the primary is down, its last check failed, or a
    /// statement failed to connect to it since.
    pub fn reads_leave_primary(&self, dh: usize) -> bool {
        let host = &self.hosts[dh];
        if host.read_when_primary_down != ReadWhenPrimaryDown::Replicas {
            return false;
        }
        let h = &self.servers[host.primary()].health;
        !h.is_up() || h.unreachable_since().is_some()
    }

    /// Whether replica `s` is in the read set only because its datahost reads on replicas
    /// while the primary is down: its replication stopped because it cannot reach the primary
    /// (IO thread failing, SQL thread running), which Shoal cannot reach either. Its lag is
    /// unknown: it has applied what it received before the primary went.
    pub fn serves_for_lost_primary(&self, s: usize) -> bool {
        let server = &self.servers[s];
        let dh = server.datahost;
        s != self.hosts[dh].primary()
            && server.weight > 0
            && server.health.is_up()
            && !server
                .health
                .replica_ok(self.hosts[dh].health.max_replication_lag)
            && server.health.source_lost()
            && self.reads_leave_primary(dh)
    }

    /// The server a read on datahost `dh` goes to, by its balance mode (`balance` overrides it,
    /// for a hint on a `primary_only` datahost), avoiding `avoid`. `None`: no server of the
    /// read set qualifies (the read goes to the primary).
    pub fn pick_read(&self, dh: usize, balance: Balance, avoid: Option<usize>) -> Option<usize> {
        let host = &self.hosts[dh];
        let mut set: [(usize, u32); 16] = [(0, 0); 16];
        let mut n = 0;
        for &s in &host.servers {
            if n < set.len() && Some(s) != avoid && self.readable(s) {
                set[n] = (s, self.servers[s].weight);
                n += 1;
            }
        }
        let set = &set[..n];
        if set.is_empty() {
            return None;
        }
        let total: u64 = set.iter().map(|(_, w)| u64::from(*w)).sum();
        let by_weight = |mut k: u64| {
            for &(s, w) in set {
                if k < u64::from(w) {
                    return s;
                }
                k -= u64::from(w);
            }
            set[set.len() - 1].0
        };
        Some(match balance {
            Balance::PrimaryOnly | Balance::RoundRobin => {
                let k = host.next.fetch_add(1, Ordering::Relaxed) as u64;
                by_weight(k % total)
            }
            Balance::WeightedRandom => by_weight(rand::rng().random_range(0..total)),
            Balance::LeastConnections => {
                let load = |s: usize| {
                    let (total, idle) = self.servers[s].pool.counts();
                    (total.saturating_sub(idle) as u64 * 1000) / u64::from(self.servers[s].weight)
                };
                set.iter().map(|&(s, _)| s).min_by_key(|&s| load(s))?
            }
        })
    }

    /// Failover following, after a check of a server of `dh`: when the primary is down (or its
    /// last check failed) or read-only, a replica that is up and writable becomes the primary.
    /// Shoal never makes a server writable itself.
    pub fn follow_failover(&self, dh: usize) {
        let host = &self.hosts[dh];
        let p = host.primary();
        let ph = &self.servers[p].health;
        let primary_gone = !ph.is_up() || !ph.last_ok() || ph.read_only() == Some(true);
        if !primary_gone {
            return;
        }
        let Some(&next) = host.servers.iter().find(|&&s| {
            s != p
                && self.servers[s].health.last_ok()
                && self.servers[s].health.read_only() == Some(false)
        }) else {
            return;
        };
        if host
            .primary
            .compare_exchange(p, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            info!(
                datahost = %host.name,
                old = %self.servers[p].address,
                new = %self.servers[next].address,
                "following failover: a writable replica is the datahost's primary now"
            );
        }
    }

    /// Carries a followed failover over a reload: datahost `dh`'s primary is server `s`.
    pub fn set_primary(&self, dh: usize, s: usize) {
        self.hosts[dh].primary.store(s, Ordering::Relaxed);
    }

    /// The role of server `s` now.
    pub fn role(&self, s: usize) -> &'static str {
        if self.hosts[self.servers[s].datahost].primary() == s {
            "primary"
        } else {
            "replica"
        }
    }
}
