//! The live configuration as one immutable snapshot: the settings (users, limits), the router
//! and the pools and servers it routes to. `Shared::runtime` holds the current one behind an
//! `ArcSwap`; a reload (see [`crate::reload`]) builds the next one and swaps it in whole, so
//! that a statement never sees half of one configuration and half of another.
//!
//! Pools are indexed per snapshot (`Backends::servers` order): a session holding connections
//! keeps the snapshot they were taken from (see `Session::follow_reload` for the rule).
//!
//! Besides the configuration (data), a snapshot holds what the
//! process keeps while it serves it ([`routing::Routing`]: sequences, admission, collations,
//! the catalog, the logical names).

pub mod admission;
pub mod catalog;
pub mod collations;
pub mod names;
pub mod routing;
pub mod sequences;

use std::sync::Arc;
use std::time::SystemTime;

use shoal_router::plan::Router;
use shoal_router::topology::Topology;

use crate::backend::balance::Backends;
use crate::backend::pool::BackendPool;
use crate::config::{BackendSpec, PoolSettings, ProxyConfig};
use names::LogicalNames;
use routing::Routing;

/// One configuration, as loaded at start or by a reload.
pub struct Runtime {
    pub config: Arc<ProxyConfig>,
    /// The file's topology (`None` in quick mode, which has no file).
    pub topology: Option<Arc<Topology>>,
    /// With the router: the configuration's sharding and the state kept for it.
    pub routing: Option<Arc<Routing>>,
    /// Without the router, for a config file whose schemas are stored under other names:
    /// relayed errors are rewritten to them (quick mode has none: clients use the backend's
    /// own names).
    pub relay_names: Option<Arc<LogicalNames>>,
    /// The pool of the relay-only path (the one datanode served without the router).
    pub pool: Arc<BackendPool>,
    /// One pool per server (with the router: `backends.servers` order; without it, the relay
    /// path's pool). A held connection's `server` indexes it, in its session's snapshot.
    pub pools: Vec<Arc<BackendPool>>,
    /// Every datahost's servers, their health and the read balancing (with the router).
    pub backends: Arc<Backends>,
    /// 1 at start, +1 per successful reload.
    pub version: u64,
    pub loaded_at: SystemTime,
    /// The metrics histograms labelled by this configuration's schemas, datanodes and servers
    /// (`None` when metrics are off).
    pub slots: Option<crate::observe::metrics::Slots>,
}

impl Runtime {
    /// The servers' addresses of a snapshot, in its pools' order (the `server` label).
    pub fn server_addresses(&self) -> Vec<String> {
        (0..self.pools.len())
            .map(|i| match self.backends.servers.get(i) {
                Some(s) => s.address.clone(),
                None => self.pools[i].spec().addr(),
            })
            .collect()
    }

    /// Gives this snapshot its metrics slots (before it is shared).
    pub fn observe(&mut self, o: &crate::observe::Observer) {
        if let Some(m) = &o.metrics {
            let addrs = self.server_addresses();
            self.slots = Some(m.slots(&self.config, &addrs));
        }
    }

    /// Whether sessions wait for admission to the backend pools (see `runtime::admission`).
    pub fn admission_contended(&self) -> bool {
        self.routing
            .as_ref()
            .is_some_and(|r| r.admission.contended())
    }

    /// Builds the pools and servers of `config`. Servers of `old` whose endpoint, credentials,
    /// TLS and pool settings are unchanged keep their pool (and its connections) and their
    /// health, on which each datahost's primary is decided again.
    pub fn build(
        mut config: ProxyConfig,
        topology: Option<Arc<Topology>>,
        server_version: &[u8],
        version: u64,
        old: Option<&Runtime>,
    ) -> Runtime {
        with_server_version(&mut config, server_version);
        let routing = config.routing.as_ref().map(|sharding| {
            Arc::new(Routing::new(
                sharding.clone(),
                old.and_then(|o| o.routing.as_deref()),
            ))
        });
        let relay_names = config
            .relay_topology
            .as_ref()
            .map(|t| LogicalNames::new(t))
            .filter(|n| !n.rewrites_no_message())
            .map(Arc::new);
        let reuse = |spec: &BackendSpec, settings: &PoolSettings| -> Arc<BackendPool> {
            old.and_then(|o| {
                o.pools
                    .iter()
                    .find(|p| p.spec() == spec && p.settings() == settings && !p.is_draining())
                    .cloned()
            })
            .unwrap_or_else(|| BackendPool::new(spec.clone(), settings.clone()))
        };
        let (pool, pools, backends) = match &config.routing {
            Some(r) => {
                let backends = Backends::new(&r.topology.datahosts, |dh, j| {
                    let (primary, settings) = &r.hosts[dh];
                    let spec = if j == 0 {
                        primary
                    } else {
                        &r.replicas[dh][j - 1]
                    };
                    reuse(spec, settings)
                });
                let mut backends = backends;
                if let Some(o) = old {
                    carry_over(&mut backends, &o.backends);
                }
                let pools: Vec<Arc<BackendPool>> =
                    backends.servers.iter().map(|s| s.pool.clone()).collect();
                let first = backends.primary(r.topology.datanodes[0].datahost);
                (pools[first].clone(), pools, backends)
            }
            None => {
                let pool = reuse(&config.backend, &config.pool);
                let backends = Backends::new(&[], |_, _| unreachable!("no datahosts"));
                (pool.clone(), vec![pool], backends)
            }
        };
        Runtime {
            config: Arc::new(config),
            topology,
            routing,
            relay_names,
            pool,
            pools,
            backends: Arc::new(backends),
            version,
            loaded_at: SystemTime::now(),
            slots: None,
        }
    }
}

/// Gives the servers kept from `old` (same pool) their health; then each datahost's primary
/// is decided on it, starting from the one the configuration names: the reloaded topology is
/// the operator's word, and a failover followed before it is followed again at once when the
/// evidence still holds ([`Backends::decide_primary`]).
fn carry_over(new: &mut Backends, old: &Backends) {
    let old_index =
        |pool: &Arc<BackendPool>| old.servers.iter().position(|s| Arc::ptr_eq(&s.pool, pool));
    for s in new.servers.iter_mut() {
        if let Some(k) = old_index(&s.pool) {
            s.health = old.servers[k].health.clone();
        }
    }
    new.decide_primaries();
}

/// Executable comments are gated by the backend's version, as the backend gates them.
pub fn with_server_version(config: &mut ProxyConfig, version: &[u8]) {
    if let Some(r) = config.routing.as_mut().and_then(Arc::get_mut)
        && let Some(v) = crate::backend::conn::version_number(version)
    {
        r.router = Arc::new(Router::new(r.topology.clone()).with_server_version(v));
    }
}
