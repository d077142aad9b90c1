//! What `/metrics` reads of the live process at scrape time (pools, health, lag, XA outcomes,
//! the plan cache, observation's own counters: see `observe::metrics`), and the count of
//! logged-in sessions.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::Shared;
use crate::observe::metrics::{C, G, encode_counters, family, histograms};

/// Counts a logged-in session in `shoal_client_connections` while it lives (dropped when the
/// session ends, a panic included).
pub struct OpenSession(Option<Arc<Shared>>);

impl OpenSession {
    pub fn new(shared: &Arc<Shared>) -> OpenSession {
        let Some(m) = &shared.observe.metrics else {
            return OpenSession(None);
        };
        m.current.fetch_add(1, Relaxed);
        OpenSession(Some(shared.clone()))
    }
}

impl Drop for OpenSession {
    fn drop(&mut self) {
        if let Some(m) = self.0.as_ref().and_then(|s| s.observe.metrics.as_ref()) {
            m.current.fetch_sub(1, Relaxed);
        }
    }
}

/// Builds the registry `/metrics` encodes: one collector over everything.
pub fn registry(shared: Arc<Shared>) -> Registry {
    let mut r = Registry::with_prefix("shoal");
    r.register_collector(Box::new(Scrape { shared }));
    r
}

/// Reads the counters and the live objects at scrape time.
struct Scrape {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Scrape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scrape")
    }
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sh = &self.shared;
        if let Some(m) = &sh.observe.metrics {
            encode_counters(m, &mut enc)?;
        }
        encode_live(sh, &mut enc)
    }
}

fn encode_live(sh: &Shared, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let rt = sh.runtime.load();
    let addrs = rt.server_addresses();
    let pools: Vec<_> = rt.pools.iter().zip(&addrs).collect();
    let stats: Vec<_> = pools.iter().map(|(p, a)| (p.stats(), a.as_str())).collect();
    family(
        enc,
        "pool_connections",
        "Backend connections per server, by state (idle, busy: checked out or opening).",
        MetricType::Gauge,
        stats.iter().flat_map(|(s, a)| {
            [
                (vec![("server", *a), ("state", "idle")], G(s.idle as i64)),
                (vec![("server", *a), ("state", "busy")], G(s.busy as i64)),
            ]
        }),
    )?;
    family(
        enc,
        "pool_waiting",
        "Sessions waiting for a backend connection, per server.",
        MetricType::Gauge,
        stats
            .iter()
            .map(|(s, a)| (vec![("server", *a)], G(s.waiting as i64))),
    )?;
    family(
        enc,
        "pool_opened",
        "Backend connections opened, per server.",
        MetricType::Counter,
        stats
            .iter()
            .map(|(s, a)| (vec![("server", *a)], C(s.opened))),
    )?;
    family(
        enc,
        "pool_closed",
        "Backend connections closed, per server.",
        MetricType::Counter,
        stats
            .iter()
            .map(|(s, a)| (vec![("server", *a)], C(s.closed))),
    )?;
    family(
        enc,
        "pool_moved",
        "Idle backend connections taken by a session on another core and moved to its event loop, per server.",
        MetricType::Counter,
        stats
            .iter()
            .map(|(s, a)| (vec![("server", *a)], C(s.moved))),
    )?;
    family(
        enc,
        "pool_handed_off",
        "Backend connections given back that went straight to a session waiting for one, per server.",
        MetricType::Counter,
        stats
            .iter()
            .map(|(s, a)| (vec![("server", *a)], C(s.handed_off))),
    )?;
    family(
        enc,
        "pool_reclaimed",
        "Backend connections sessions gave back between commands because others waited for them (their affinity given up), per server.",
        MetricType::Counter,
        stats
            .iter()
            .map(|(s, a)| (vec![("server", *a)], C(s.reclaimed))),
    )?;
    family(
        enc,
        "pool_reclaim_calls",
        "Times a session about to wait for a pool or for admission woke the idle sessions at once (instead of the periodic sweep).",
        MetricType::Counter,
        std::iter::once((vec![], C(crate::backend::reclaim::answered()))),
    )?;
    histograms(
        enc,
        "pool_acquire_wait_seconds",
        "Time sessions waited in a pool's queue for a connection (acquires that queued), per server.",
        pools
            .iter()
            .map(|(p, a)| (vec![("server", a.as_str())], p.acquire_wait())),
    )?;
    let servers: Vec<_> = rt
        .backends
        .servers
        .iter()
        .map(|s| (s, rt.backends.hosts[s.datahost].name.as_str()))
        .collect();
    family(
        enc,
        "backend_up",
        "Whether the health monitor last found the server reachable (1) or not (0).",
        MetricType::Gauge,
        servers.iter().map(|(s, dh)| {
            (
                vec![("datahost", *dh), ("server", s.address.as_str())],
                G(s.health.is_up() as i64),
            )
        }),
    )?;
    family(
        enc,
        "backend_replication_lag_seconds",
        "Replication lag the health monitor last read on a replica (absent: primary, or unknown).",
        MetricType::Gauge,
        servers.iter().filter_map(|(s, dh)| {
            s.health.lag().map(|l| {
                (
                    vec![("datahost", *dh), ("server", s.address.as_str())],
                    G(l as i64),
                )
            })
        }),
    )?;
    family(
        enc,
        "backend_errors",
        "Errors seen talking to the server (connects, broken connections, failed checks).",
        MetricType::Counter,
        servers.iter().map(|(s, dh)| {
            (
                vec![("datahost", *dh), ("server", s.address.as_str())],
                C(s.health.errors()),
            )
        }),
    )?;
    let x = &sh.xa.stats;
    family(
        enc,
        "xa_transactions",
        "Transactions over datanodes by outcome (the counters of SHOW SHOAL XA).",
        MetricType::Counter,
        [
            ("committed_one_phase", &x.one_phase),
            ("committed_two_phase", &x.two_phase),
            ("rolled_back", &x.rolled_back),
            ("recovered_commit", &x.recovered_commit),
            ("recovered_rollback", &x.recovered_rollback),
        ]
        .map(|(o, a)| (vec![("outcome", o)], C(a.load(Relaxed)))),
    )?;
    family(
        enc,
        "xa_in_doubt",
        "Prepared branches of this process the last recovery scan left.",
        MetricType::Gauge,
        [(vec![], G(x.in_doubt.load(Relaxed) as i64))],
    )?;
    family(
        enc,
        "xa_missing_branches",
        "Datanodes a commit decision named that XA recovery found prepared on no server \
         (committed by their coordinator before it stopped, or lost: see the error log).",
        MetricType::Counter,
        [(vec![], C(x.missing_branches.load(Relaxed)))],
    )?;
    if let Some(r) = &rt.config.routing {
        let c = r.router.cache_stats();
        family(
            enc,
            "plan_cache_lookups",
            "Plan cache lookups, by result.",
            MetricType::Counter,
            [
                (vec![("result", "hit")], C(c.hits)),
                (vec![("result", "miss")], C(c.misses)),
            ],
        )?;
        family(
            enc,
            "plan_cache_entries",
            "Statement shapes in the plan cache.",
            MetricType::Gauge,
            [(vec![], G(c.entries as i64))],
        )?;
    }
    if let Some(d) = &sh.observe.digests {
        family(
            enc,
            "query_digests",
            "Distinct query digests kept.",
            MetricType::Gauge,
            [(vec![], G(d.len() as i64))],
        )?;
    }
    if let Some(l) = &sh.observe.slow {
        family(
            enc,
            "slow_log",
            "Slow statements, by what became of their line (written, or dropped: the writer was behind).",
            MetricType::Counter,
            [
                (vec![("result", "logged")], C(l.logged())),
                (vec![("result", "dropped")], C(l.dropped())),
            ],
        )?;
    }
    family(
        enc,
        "up_seconds",
        "Seconds since the process started.",
        MetricType::Gauge,
        [(vec![], sh.started.elapsed().as_secs_f64())],
    )?;
    Ok(())
}
