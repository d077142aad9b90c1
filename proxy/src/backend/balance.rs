//! The servers behind each datahost (its primary and replicas, one pool each) and which one a
//! statement gets: the current primary for anything that must run there, a server of the read
//! set for reads, as the datahost's `balance` mode says. Health comes from [`super::health`];
//! which server is the primary is decided here ([`Backends::decide_primary`]), never guessed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use rand::Rng;
use shoal_router::config::{
    Balance, DatahostDef, HealthConfig, ReadWhenPrimaryDown, ReadYourWrites,
};
use tracing::{info, warn};

use super::health::Health;
use super::pool::BackendPool;
use crate::error::Error;

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
    /// The server writes go to now: the configured primary, or the server an external failover
    /// was followed to ([`Backends::decide_primary`]).
    primary: AtomicUsize,
    /// Two servers that both look like the primary (up, writable, replicating from nobody):
    /// `(a + 1) << 32 | (b + 1)`, 0 when there are not two. Statements that need the primary
    /// fail while it lasts ([`Backends::primary_refusal`]).
    split: AtomicU64,
    /// Per server (as `servers`): a primary an external failover was followed away from. It is
    /// not the primary again until a reload (the operator's topology) says so.
    retired: Vec<AtomicBool>,
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
                split: AtomicU64::new(0),
                retired: (first..servers.len())
                    .map(|_| AtomicBool::new(false))
                    .collect(),
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
            return !self.reads_leave_primary(server.datahost)
                && self.primary_decided(server.datahost);
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

    /// Decides datahost `dh`'s primary from what the checks found (after each check of one of
    /// its servers, and when a reload builds the datahost). Shoal never makes a server writable
    /// itself, and never guesses:
    /// - a server with a replication connection (running or not) is never a primary, whatever
    ///   its `read_only`;
    /// - two servers up, writable and replicating from nobody make the statements that need the
    ///   primary fail, naming both ([`Self::primary_refusal`]), instead of picking one;
    /// - the primary moves (an external failover is followed) only on positive evidence: the
    ///   primary is down (`down_after` failed checks, not one missed check), read-only, or
    ///   replicates; and exactly one other server is up, writable and replicates from nobody,
    ///   its last check good, and it was not a primary moved away from (until a reload).
    pub fn decide_primary(&self, dh: usize) {
        let host = &self.hosts[dh];
        let p = host.primary();
        let mut claims = host
            .servers
            .iter()
            .copied()
            .filter(|&s| self.servers[s].health.claims_primary());
        let (first, second) = (claims.next(), claims.next());
        let split = match (first, second) {
            // The current primary first, when it is one of the two.
            (Some(a), Some(b)) if b == p => pack(b, a),
            (Some(a), Some(b)) => pack(a, b),
            _ => 0,
        };
        let was = host.split.swap(split, Ordering::Relaxed);
        if let Some((a, b)) = unpack(split)
            && was != split
        {
            warn!(
                datahost = %host.name,
                a = %self.servers[a].address,
                b = %self.servers[b].address,
                "two servers are writable and replicate from nobody: statements that need the \
                 primary fail until one of them is read-only, replicates or is down"
            );
        } else if was != 0 && split == 0 {
            info!(datahost = %host.name, "one primary again: statements that need it run");
        }
        if split != 0 {
            return;
        }
        let ph = &self.servers[p].health;
        let primary_gone =
            !ph.is_up() || ph.read_only() == Some(true) || ph.replicates() == Some(true);
        let Some(next) = first.filter(|&s| {
            s != p
                && self.servers[s].health.last_ok()
                && !host.retired[s - host.servers[0]].load(Ordering::Relaxed)
        }) else {
            return;
        };
        if primary_gone
            && host
                .primary
                .compare_exchange(p, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            host.retired[p - host.servers[0]].store(true, Ordering::Relaxed);
            info!(
                datahost = %host.name,
                old = %self.servers[p].address,
                new = %self.servers[next].address,
                "following failover: the old primary is down, read-only or replicates, and \
                 the new one is writable and replicates from nobody"
            );
        }
    }

    /// [`Self::decide_primary`] for every datahost (a reload's snapshot, on the health its
    /// servers kept).
    pub fn decide_primaries(&self) {
        for dh in 0..self.hosts.len() {
            self.decide_primary(dh);
        }
    }

    /// Whether datahost `dh`'s primary may be used (when up): not two writable servers, and
    /// the primary does not replicate.
    pub fn primary_decided(&self, dh: usize) -> bool {
        self.blocked(dh).is_none()
    }

    /// Why datahost `dh`'s primary cannot be used although it is up, if it cannot.
    fn blocked(&self, dh: usize) -> Option<Blocked> {
        let host = &self.hosts[dh];
        if let Some((a, b)) = unpack(host.split.load(Ordering::Relaxed)) {
            return Some(Blocked::TwoWritable(a, b));
        }
        let p = host.primary();
        (self.servers[p].health.replicates() == Some(true)).then_some(Blocked::Replicates(p))
    }

    /// The error of a statement on datanode `datanode` that needs datahost `dh`'s primary,
    /// when the primary cannot be decided ([`Self::decide_primary`]): 1429, naming the
    /// servers. `None`: the primary is [`Self::primary`].
    pub fn primary_refusal(&self, dh: usize, datanode: &str) -> Option<Error> {
        let host = &self.hosts[dh];
        let message = match self.blocked(dh)? {
            Blocked::TwoWritable(a, b) => format!(
                "datanode {datanode}: datahost {} has two writable servers that replicate from \
                 nobody, {} and {}; Shoal does not pick one: statements that need the primary \
                 fail until one of them is read-only, replicates or is down",
                host.name, self.servers[a].address, self.servers[b].address
            ),
            Blocked::Replicates(p) => format!(
                "datanode {datanode}: the primary {} of datahost {} replicates from another \
                 server (SHOW SLAVE STATUS has a row): a server that replicates is never \
                 written to as a primary (a promoted server needs RESET SLAVE ALL); statements \
                 that need the primary fail until it is one",
                self.servers[p].address, host.name
            ),
        };
        Some(Error::reply(1429, b"HY000", message))
    }

    /// What `SHOW SHOAL BACKENDS` says of server `s` (up) because of the primary's decision,
    /// if anything.
    pub fn decision_state(&self, s: usize) -> Option<&'static str> {
        let dh = self.servers[s].datahost;
        let host = &self.hosts[dh];
        match self.blocked(dh) {
            Some(Blocked::TwoWritable(a, b)) if s == a || s == b => {
                return Some("up, writable like another server: writes refused");
            }
            Some(Blocked::Replicates(p)) if s == p => {
                return Some("up, replicates: not written to as the primary");
            }
            _ => {}
        }
        // Said of a replica that does not serve reads: one that does shows that first.
        let retired = host.retired[s - host.servers[0]].load(Ordering::Relaxed);
        (retired
            && !self.servers[s]
                .health
                .replica_ok(host.health.max_replication_lag))
        .then_some("up, former primary: not the primary again until a reload")
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

/// Why a datahost's primary is not used although it is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blocked {
    /// Two servers look like the primary (writable, replicating from nobody).
    TwoWritable(usize, usize),
    /// The primary replicates from another server.
    Replicates(usize),
}

fn pack(a: usize, b: usize) -> u64 {
    ((a as u64 + 1) << 32) | (b as u64 + 1)
}

fn unpack(split: u64) -> Option<(usize, usize)> {
    (split != 0).then(|| {
        (
            (split >> 32) as usize - 1,
            (split & 0xffff_ffff) as usize - 1,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BackendSpec, PoolSettings};
    use shoal_router::config::HostEndpoint;

    /// One datahost: the primary `127.0.0.1:1` and replicas `127.0.0.1:2`, `:3`... (never
    /// connected to: the health is set by hand).
    fn host(servers: u16) -> Backends {
        let endpoint = |port: u16| HostEndpoint {
            address: format!("127.0.0.1:{port}"),
            user: "u".into(),
            password: String::new(),
            weight: None,
            tls: Default::default(),
            tls_ca: None,
        };
        let def = DatahostDef {
            name: "dh".into(),
            primary: endpoint(1),
            replicas: (2..=servers).map(endpoint).collect(),
            pool: Default::default(),
            balance: Default::default(),
            read_your_writes: Default::default(),
            health: Default::default(),
            read_when_primary_down: Default::default(),
        };
        Backends::new(&[def], |_, j| {
            let spec = BackendSpec {
                host: "127.0.0.1".into(),
                port: 1 + j as u16,
                user: "u".into(),
                password: String::new(),
                database: None,
                tls: Default::default(),
            };
            BackendPool::new(spec, PoolSettings::default())
        })
    }

    /// (up, read_only, replicates) of each server, then a decision.
    fn checked(b: &Backends, states: &[(bool, bool, bool)]) {
        for (s, &(up, ro, repl)) in states.iter().enumerate() {
            b.servers[s].health.set_checked(up, ro, repl);
        }
        b.decide_primary(0);
    }

    const PRIMARY: (bool, bool, bool) = (true, false, false);
    /// A replica at MariaDB's default `read_only=0`.
    const WRITABLE_REPLICA: (bool, bool, bool) = (true, false, true);

    /// The failure: the primary stalls (down, its last state writable) while its
    /// replica is writable: the replica still replicates, so it is never the primary.
    #[test]
    fn a_stalled_primary_is_not_replaced_by_a_writable_replica() {
        let b = host(2);
        checked(&b, &[PRIMARY, WRITABLE_REPLICA]);
        assert_eq!(b.primary(0), 0);
        assert!(b.primary_refusal(0, "dn1").is_none());
        checked(&b, &[(false, false, false), WRITABLE_REPLICA]);
        assert_eq!(b.primary(0), 0);
        checked(&b, &[(false, true, false), WRITABLE_REPLICA]);
        assert_eq!(b.primary(0), 0, "read-only, but no server may take over");
        checked(&b, &[PRIMARY, WRITABLE_REPLICA]);
        assert_eq!(b.primary(0), 0);
        assert_eq!(b.role(1), "replica");
    }

    /// An external failover (the replica detached and writable, the old primary read-only or
    /// down) is followed; the old primary, back writable, is not written to again: both
    /// writable make statements fail naming both, and it is never followed back to.
    #[test]
    fn an_external_failover_is_followed_and_the_old_primary_is_retired() {
        let b = host(2);
        checked(&b, &[(true, true, false), (true, false, false)]);
        assert_eq!(b.primary(0), 1);
        assert_eq!(b.role(0), "replica");
        assert!(b.primary_refusal(0, "dn1").is_none());
        assert!(
            b.decision_state(0)
                .is_some_and(|s| s.contains("former primary"))
        );
        // The old primary comes back writable, replicating from nobody.
        checked(&b, &[PRIMARY, PRIMARY]);
        assert_eq!(b.primary(0), 1);
        let e = b.primary_refusal(0, "dn1").expect("two writable servers");
        let text = e.to_string();
        assert!(
            text.contains("127.0.0.1:1") && text.contains("127.0.0.1:2") && text.contains("dn1"),
            "{text}"
        );
        assert!(matches!(e, Error::Reply { code: 1429, .. }), "{e:?}");
        assert!(
            !b.readable(1),
            "no reads on either while the primary is undecided"
        );
        // The new primary goes down: the retired one is not followed back to.
        checked(&b, &[PRIMARY, (false, false, false)]);
        assert_eq!(b.primary(0), 1);
        assert!(b.primary_refusal(0, "dn1").is_none());
    }

    #[test]
    fn a_killed_primary_is_left_for_the_detached_replica() {
        let b = host(3);
        checked(
            &b,
            &[
                (false, false, false),
                WRITABLE_REPLICA,
                (true, false, false),
            ],
        );
        assert_eq!(b.primary(0), 2);
        assert_eq!(b.role(1), "replica");
    }

    /// A primary with a replication connection is never written to: its statements fail,
    /// until a detached writable server takes over.
    #[test]
    fn a_primary_that_replicates_is_refused_then_left() {
        let b = host(2);
        checked(&b, &[WRITABLE_REPLICA, (true, true, true)]);
        assert_eq!(b.primary(0), 0);
        let e = b.primary_refusal(0, "dn1").expect("the primary replicates");
        assert!(e.to_string().contains("replicates"), "{e}");
        checked(&b, &[WRITABLE_REPLICA, PRIMARY]);
        assert_eq!(b.primary(0), 1);
        assert!(b.primary_refusal(0, "dn1").is_none());
    }

    /// A server replicating from nobody is not a replica: it takes no reads.
    #[test]
    fn a_detached_server_takes_no_reads() {
        let b = host(2);
        checked(&b, &[PRIMARY, (true, true, false)]);
        assert!(!b.readable(1));
        checked(&b, &[PRIMARY, (true, true, true)]);
        assert!(b.readable(1));
    }
}
