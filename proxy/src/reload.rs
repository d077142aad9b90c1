//! Reload without restart: SIGHUP or `RELOAD SHOAL CONFIG` reads the configuration file again,
//! validates it with the code `shoal --check` and the start use (`Topology::load`, then
//! `config_file::proxy_config`), checks what changed against the running snapshot, and swaps in
//! a new [`Runtime`] at once. An invalid file, or a change that cannot be made live, changes
//! nothing: the whole reload is refused (a partial reload would leave a configuration nobody
//! wrote), the reason logged and returned to the RELOAD statement.
//!
//! Allowed live: users and passwords, weights, balance, replicas (a server new to a datahost
//! only if it shows it holds the datahost's data: see [`addresses`]), pool and health settings,
//! limits (`max_connections`, timeouts, `max_allowed_packet`), new datahosts, datanodes,
//! schemas and tables. Refused: anything that would move rows (an existing table's rule,
//! shard key, shard list or kind; a datanode's datahost or database; a schema's default
//! datanode; removing a listed table), and what is bound at start (listen address, TLS, RSA
//! key, `server.xa`, `log_level`, a schema's `transactions`, switching between relayed and
//! routed serving, removing or reordering datahosts and datanodes: their positions index
//! every held connection).
//!
//! Servers kept unchanged keep their pool, connections and health; new ones get pools and
//! monitors; removed ones drain (see `BackendPool::drain`). Sessions move to the new snapshot
//! between commands when they hold nothing on the old one (see `Session::follow_reload`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use shoal_router::config::HostEndpoint;
use shoal_router::topology::{TableDef, Topology};
use tracing::{info, warn};

use crate::backend::monitor;
use crate::backend::pool::typical_client_wire;
use crate::config::ProxyConfig;
use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// Reads the configuration again: the file the process was started with, with the same
/// command-line overrides.
pub struct Reloader {
    pub path: PathBuf,
    #[allow(clippy::type_complexity)]
    load: Box<dyn Fn() -> std::result::Result<(ProxyConfig, Topology), String> + Send + Sync>,
}

impl Reloader {
    pub fn new(
        path: PathBuf,
        load: impl Fn() -> std::result::Result<(ProxyConfig, Topology), String> + Send + Sync + 'static,
    ) -> Self {
        Reloader {
            path,
            load: Box::new(load),
        }
    }
}

/// What a successful reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadSummary {
    pub version: u64,
    /// One line per change, e.g. `user added: bob`.
    pub changes: Vec<String>,
}

/// 1105 (HY000) with the reason: the client sees why nothing changed.
fn failed(message: String) -> Error {
    Error::reply(1105, b"HY000", message)
}

/// The running process as a reload reads and replaces it (the process's shared state
/// implements it).
pub trait Process: Sync {
    /// The current snapshot, swapped whole by a reload.
    fn runtime(&self) -> &arc_swap::ArcSwap<Runtime>;
    /// How to read the configuration again (`None` in quick mode: there is no file).
    fn reloader(&self) -> Option<&Reloader>;
    /// Reloads run one at a time (SIGHUP and RELOAD SHOAL CONFIG may race).
    fn reload_lock(&self) -> &tokio::sync::Mutex<()>;
    /// The version string announced to clients (the backend's own).
    fn server_version(&self) -> &[u8];
    fn observer(&self) -> &crate::observe::Observer;
    /// The health monitors of the current snapshot's servers.
    fn monitors(&self) -> &std::sync::Mutex<Vec<tokio::task::AbortHandle>>;
    fn xa(&self) -> &crate::xa::Xa;
    /// The users changed: what was learnt of their passwords is forgotten.
    fn users_changed(&self);
}

/// Reloads the configuration file and swaps the new snapshot in (see the module comment).
pub async fn reload(shared: &dyn Process) -> Result<ReloadSummary> {
    let _one_at_a_time = shared.reload_lock().lock().await;
    let Some(reloader) = shared.reloader() else {
        return Err(failed(
            "reload failed: Shoal runs in quick mode (--backend), without a config file to \
             read again"
                .into(),
        ));
    };
    let result = reload_from(shared, reloader).await;
    match &result {
        Ok(s) => info!(
            version = s.version,
            file = %reloader.path.display(),
            changes = %if s.changes.is_empty() { "none".to_string() } else { s.changes.join("; ") },
            "configuration reloaded"
        ),
        Err(e) => {
            warn!(file = %reloader.path.display(), error = %e, "configuration not reloaded; the running one is unchanged")
        }
    }
    result
}

async fn reload_from(shared: &dyn Process, reloader: &Reloader) -> Result<ReloadSummary> {
    let (config, topology) =
        (reloader.load)().map_err(|e| failed(format!("reload failed: {e}")))?;
    crate::backend::tls::check_backend_tls(&config)
        .map_err(|e| failed(format!("reload failed: {e}")))?;
    let old = shared.runtime().load_full();
    if let Some(old_topo) = &old.topology {
        check(&old.config, old_topo, &config, &topology)
            .map_err(|why| failed(format!("reload refused: {why}")))?;
        addresses::check(&old.config, old_topo, &config, &topology)
            .await
            .map_err(|why| failed(format!("reload refused: {why}")))?;
    }
    let changes = old
        .topology
        .as_deref()
        .map(|t| changes(&old.config, t, &config, &topology))
        .unwrap_or_default();
    let users_changed = old.config.users != config.users;
    let version = old.version + 1;
    let mut new = Runtime::build(
        config,
        Some(Arc::new(topology)),
        shared.server_version(),
        version,
        Some(&old),
    );
    new.observe(shared.observer());
    let new = Arc::new(new);
    shared.runtime().store(new.clone());
    if users_changed {
        // Cached caching_sha2 hashes are of the old passwords.
        shared.users_changed();
    }
    start_tasks(shared, &new, Some(&old));
    Ok(ReloadSummary { version, changes })
}

/// Starts what a snapshot's servers need (pool maintenance for new pools, a health monitor per
/// server) and, after a reload, drains the pools `old` had that `rt` does not. Monitors are
/// restarted for every server: they read the snapshot's health settings and follow failover on
/// its datahosts; the health they write is the server's own, kept over the reload.
pub fn start_tasks(shared: &dyn Process, rt: &Runtime, old: Option<&Runtime>) {
    let had = |p: &Arc<crate::backend::pool::BackendPool>, r: &Runtime| {
        r.pools.iter().any(|q| Arc::ptr_eq(p, q))
    };
    for pool in &rt.pools {
        if !old.is_some_and(|o| had(pool, o)) {
            tokio::spawn(pool.clone().maintain(typical_client_wire()));
        }
    }
    let mut monitors = shared.monitors().lock().unwrap_or_else(|p| p.into_inner());
    for m in monitors.drain(..) {
        m.abort();
    }
    for s in 0..rt.backends.servers.len() {
        monitors.push(tokio::spawn(monitor::monitor(rt.backends.clone(), s)).abort_handle());
    }
    if let Some(old) = old {
        // XA branches prepared on a removed server are still their transactions': recovery
        // keeps asking it until it holds none.
        let listed: Vec<String> = rt.pools.iter().map(|p| p.spec().addr()).collect();
        let removed = old
            .pools
            .iter()
            .filter(|p| !had(p, rt))
            .map(|p| p.spec().clone())
            .collect();
        shared.xa().retire(removed, &listed);
        for pool in old.pools.iter().filter(|p| !had(p, rt)) {
            let closed = pool.drain();
            info!(server = %pool.spec().addr(), idle_closed = closed, "server removed by the reload: its pool drains (connections in use close when given back)");
        }
    }
}

/// The changes that cannot be made live, as the reason for refusing the whole reload.
pub fn check(
    old_cfg: &ProxyConfig,
    old: &Topology,
    new_cfg: &ProxyConfig,
    new: &Topology,
) -> std::result::Result<(), String> {
    const RESTART: &str = "needs a restart";
    const MOVES: &str = "that would move rows: restart with a migration instead";
    if old_cfg.listen != new_cfg.listen {
        return Err(format!(
            "server.listen changed ({} -> {}): {RESTART}",
            old_cfg.listen, new_cfg.listen
        ));
    }
    if old_cfg.tls != new_cfg.tls {
        return Err(format!("server.tls changed: {RESTART}"));
    }
    if old_cfg.rsa_private_key != new_cfg.rsa_private_key {
        return Err(format!("server.rsa changed: {RESTART}"));
    }
    if old.server.xa != new.server.xa {
        return Err(format!("server.xa changed: {RESTART}"));
    }
    // The admin listener is bound, and the metrics, digests and slow log set up, at start.
    if old_cfg.observe != new_cfg.observe {
        return Err(format!(
            "server.admin_listen, metrics, digests or slow_log changed: {RESTART}"
        ));
    }
    if old.server.log_level != new.server.log_level {
        return Err(format!("server.log_level changed: {RESTART}"));
    }
    if old_cfg.routing.is_some() != new_cfg.routing.is_some() {
        return Err(format!(
            "the file switches between relaying every statement to one datanode and routing \
             over datanodes: {RESTART}"
        ));
    }
    for (i, h) in old.datahosts.iter().enumerate() {
        match new.datahosts.iter().position(|n| n.name == h.name) {
            Some(j) if j == i => {}
            Some(j) => {
                return Err(format!(
                    "datahost {} moved from position {} to {}: add new datahosts after the \
                     existing ones",
                    h.name,
                    i + 1,
                    j + 1
                ));
            }
            None => return Err(format!("datahost {} removed: {RESTART}", h.name)),
        }
    }
    // The XA decision log has its own connections to its datahost's primary, opened at start.
    let xa_log = |t: &Topology| {
        t.datahosts
            .get(crate::xa::log_datahost(t))
            .map(|d| endpoint_key(&d.primary))
    };
    if old_cfg.routing.is_some() && xa_log(old) != xa_log(new) {
        return Err(format!(
            "the primary of the XA decision log's datahost changed: {RESTART}"
        ));
    }
    for (i, d) in old.datanodes.iter().enumerate() {
        let Some(j) = new.datanodes.iter().position(|n| n.name == d.name) else {
            return Err(format!("datanode {} removed: {RESTART}", d.name));
        };
        if j != i {
            return Err(format!(
                "datanode {} moved from position {} to {}: add new datanodes after the existing \
                 ones",
                d.name,
                i + 1,
                j + 1
            ));
        }
        let n = &new.datanodes[j];
        let (oh, nh) = (
            &old.datahosts[d.datahost].name,
            &new.datahosts[n.datahost].name,
        );
        if oh != nh {
            return Err(format!(
                "datanode {}'s datahost changed ({oh} -> {nh}); {MOVES}",
                d.name
            ));
        }
        if d.database != n.database {
            return Err(format!(
                "datanode {}'s database changed ({} -> {}); {MOVES}",
                d.name, d.database, n.database
            ));
        }
    }
    let dn_name = |t: &Topology, d: Option<usize>| d.map(|d| t.datanodes[d].name.clone());
    let mut schemas: Vec<&String> = old.schemas.keys().collect();
    schemas.sort();
    for name in schemas {
        let os = &old.schemas[name];
        let Some(ns) = new.schemas.get(name) else {
            // Nothing is placed by a schema nobody can use any more.
            continue;
        };
        if dn_name(old, os.default_datanode) != dn_name(new, ns.default_datanode) {
            return Err(format!(
                "schema {name}'s default_datanode changed ({} -> {}); {MOVES}",
                dn_name(old, os.default_datanode).unwrap_or_else(|| "none".into()),
                dn_name(new, ns.default_datanode).unwrap_or_else(|| "none".into())
            ));
        }
        if os.transactions != ns.transactions {
            return Err(format!("schema {name}'s transactions changed: {RESTART}"));
        }
        let mut tables: Vec<&String> = os.tables.keys().collect();
        tables.sort();
        for t in tables {
            let Some(nt) = ns.tables.get(t) else {
                return Err(format!(
                    "table {name}.{t} removed: its rows would no longer be found; restart with \
                     a migration instead"
                ));
            };
            if let Some(what) = table_change(old, &os.tables[t], new, nt) {
                return Err(format!("table {name}.{t}'s {what} changed; {MOVES}"));
            }
        }
    }
    Ok(())
}

/// What changed in a listed table that decides where its rows are, if anything.
fn table_change(ot: &Topology, old: &TableDef, nt: &Topology, new: &TableDef) -> Option<String> {
    let shards = |t: &Topology, s: &[shoal_router::topology::Shard]| -> Vec<(String, String)> {
        s.iter()
            .map(|x| {
                (
                    t.datanodes[x.datanode].name.clone(),
                    x.physical_table.clone(),
                )
            })
            .collect()
    };
    match (old, new) {
        (TableDef::Sharded(a), TableDef::Sharded(b)) => {
            if !a.shard_key.eq_ignore_ascii_case(&b.shard_key) {
                return Some(format!("shard key ({} -> {})", a.shard_key, b.shard_key));
            }
            if !a.rule.same_placement(&b.rule) {
                return Some(format!("rule ({})", rule_change(&a.rule, &b.rule)));
            }
            if shards(ot, &a.shards) != shards(nt, &b.shards) {
                return Some("datanode list".into());
            }
            let seq = |t: &Topology, s: &Option<shoal_router::topology::Sequence>| {
                s.as_ref()
                    .map(|s| (t.datanodes[s.datanode].name.clone(), s.step))
            };
            if seq(ot, &a.sequence) != seq(nt, &b.sequence) {
                return Some("sequence".into());
            }
            None
        }
        (TableDef::Global(a), TableDef::Global(b)) => {
            let names = |t: &Topology, d: &[usize]| -> Vec<String> {
                d.iter().map(|d| t.datanodes[*d].name.clone()).collect()
            };
            (names(ot, &a.datanodes) != names(nt, &b.datanodes))
                .then(|| "datanode list".to_string())
        }
        (TableDef::Child(a), TableDef::Child(b)) => {
            if (&a.parent, &a.join_key, &a.parent_key, &a.root)
                != (&b.parent, &b.join_key, &b.parent_key, &b.root)
            {
                return Some("parent or join key".into());
            }
            (shards(ot, &a.shards) != shards(nt, &b.shards)).then(|| "datanode list".to_string())
        }
        _ => Some(format!("kind ({} -> {})", table_kind(old), table_kind(new))),
    }
}

fn rule_change(a: &shoal_router::rule::ShardRule, b: &shoal_router::rule::ShardRule) -> String {
    if a.name() == b.name() {
        format!("rule '{}' now maps keys differently", a.name())
    } else {
        format!("'{}' -> '{}'", a.name(), b.name())
    }
}

fn table_kind(t: &TableDef) -> &'static str {
    match t {
        TableDef::Sharded(_) => "sharded",
        TableDef::Global(_) => "global",
        TableDef::Child(_) => "child",
    }
}

/// A server's identity for the diff: where it is and how Shoal logs in.
fn endpoint_key(e: &HostEndpoint) -> (String, String, String) {
    (e.address.clone(), e.user.clone(), e.password.clone())
}

/// What an allowed reload changes, one line each (for the log and the RELOAD answer).
pub fn changes(
    old_cfg: &ProxyConfig,
    old: &Topology,
    new_cfg: &ProxyConfig,
    new: &Topology,
) -> Vec<String> {
    let mut out = Vec::new();
    for u in &new.users {
        match old.user(&u.name) {
            None => out.push(format!("user added: {}", u.name)),
            Some(o) if o.password != u.password => {
                out.push(format!("user password changed: {}", u.name))
            }
            Some(o) if o != u => out.push(format!("user changed: {}", u.name)),
            Some(_) => {}
        }
    }
    for u in &old.users {
        if new.user(&u.name).is_none() {
            out.push(format!("user removed: {}", u.name));
        }
    }
    let servers = |t: &Topology| -> BTreeMap<(String, String), (u32, HostEndpoint)> {
        let mut m = BTreeMap::new();
        for h in &t.datahosts {
            for (j, e) in std::iter::once(&h.primary)
                .chain(h.replicas.iter())
                .enumerate()
            {
                m.insert(
                    (h.name.clone(), e.address.clone()),
                    (h.read_weight(j), e.clone()),
                );
            }
        }
        m
    };
    let (os, ns) = (servers(old), servers(new));
    for ((dh, addr), (w, e)) in &ns {
        match os.get(&(dh.clone(), addr.clone())) {
            None => out.push(format!("server added: {dh} {addr}")),
            Some((ow, oe)) => {
                if ow != w {
                    out.push(format!("weight changed: {dh} {addr} {ow} -> {w}"));
                }
                if endpoint_key(oe) != endpoint_key(e) || oe.tls != e.tls || oe.tls_ca != e.tls_ca {
                    out.push(format!("server credentials or TLS changed: {dh} {addr}"));
                }
            }
        }
    }
    for (dh, addr) in os.keys() {
        if !ns.contains_key(&(dh.clone(), addr.clone())) {
            out.push(format!("server removed: {dh} {addr}"));
        }
    }
    for h in &new.datahosts {
        let Some(o) = old.datahosts.iter().find(|o| o.name == h.name) else {
            out.push(format!("datahost added: {}", h.name));
            continue;
        };
        if o.balance != h.balance {
            out.push(format!(
                "balance changed: {} {} -> {}",
                h.name,
                o.balance.as_str(),
                h.balance.as_str()
            ));
        }
        if o.pool != h.pool {
            out.push(format!("pool settings changed: {}", h.name));
        }
        if o.health != h.health
            || o.read_your_writes != h.read_your_writes
            || o.read_when_primary_down != h.read_when_primary_down
        {
            out.push(format!("health or read settings changed: {}", h.name));
        }
    }
    for d in new.datanodes.iter().skip(old.datanodes.len()) {
        out.push(format!("datanode added: {}", d.name));
    }
    let mut names: Vec<&String> = new.schemas.keys().collect();
    names.sort();
    for name in names {
        let Some(o) = old.schemas.get(name) else {
            out.push(format!("schema added: {name}"));
            continue;
        };
        let mut tables: Vec<&String> = new.schemas[name].tables.keys().collect();
        tables.sort();
        for t in tables {
            if !o.tables.contains_key(t) {
                out.push(format!("table added: {name}.{t}"));
            }
        }
    }
    let mut gone: Vec<&String> = old
        .schemas
        .keys()
        .filter(|n| !new.schemas.contains_key(*n))
        .collect();
    gone.sort();
    for name in gone {
        out.push(format!("schema removed: {name}"));
    }
    let limits = [
        (
            "server.max_connections",
            old_cfg.max_connections.to_string(),
            new_cfg.max_connections.to_string(),
        ),
        (
            "server.client_idle_timeout",
            format!("{:?}", old_cfg.client_idle_timeout),
            format!("{:?}", new_cfg.client_idle_timeout),
        ),
        (
            "server.shutdown_timeout",
            format!("{:?}", old_cfg.shutdown_timeout),
            format!("{:?}", new_cfg.shutdown_timeout),
        ),
        (
            "server.handshake_timeout",
            format!("{:?}", old_cfg.handshake_timeout),
            format!("{:?}", new_cfg.handshake_timeout),
        ),
        (
            "server.max_allowed_packet",
            old_cfg.max_packet.to_string(),
            new_cfg.max_packet.to_string(),
        ),
        (
            "server.query_timeout",
            format!("{:?}", old_cfg.query_timeout),
            format!("{:?}", new_cfg.query_timeout),
        ),
    ];
    for (name, a, b) in limits {
        if a != b {
            out.push(format!("{name} changed: {a} -> {b}"));
        }
    }
    out
}

/// `SHOW SHOAL CONFIG`: the running configuration as (key, value) rows, passwords shown as
/// `***`, after its version, load time and file.
pub fn show_config(shared: &dyn Process) -> Vec<(String, String)> {
    let rt = shared.runtime().load_full();
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut put = |k: String, v: String| rows.push((k, v));
    put("config.version".into(), rt.version.to_string());
    put("config.loaded_at".into(), unix_time(rt.loaded_at));
    put(
        "config.file".into(),
        shared.reloader().map_or("(none: quick mode)".into(), |r| {
            r.path.display().to_string()
        }),
    );
    let c = &rt.config;
    put("server.listen".into(), c.listen.clone());
    put(
        "server.max_connections".into(),
        c.max_connections.to_string(),
    );
    put(
        "server.client_idle_timeout".into(),
        format!("{:?}", c.client_idle_timeout),
    );
    put(
        "server.shutdown_timeout".into(),
        format!("{:?}", c.shutdown_timeout),
    );
    put(
        "server.handshake_timeout".into(),
        format!("{:?}", c.handshake_timeout),
    );
    put("server.max_allowed_packet".into(), c.max_packet.to_string());
    put(
        "server.query_timeout".into(),
        c.query_timeout.map_or("off".into(), |d| format!("{d:?}")),
    );
    if let Some(t) = &c.tls {
        put(
            "server.tls".into(),
            format!("cert {}, key {}, required {}", t.cert, t.key, t.required),
        );
    }
    if let Some(k) = &c.rsa_private_key {
        put("server.rsa.private_key".into(), k.clone());
    }
    let Some(t) = &rt.topology else {
        put("backend".into(), c.backend.addr());
        for u in &c.users {
            put(format!("users.{}.password", u.name), "***".into());
        }
        return rows;
    };
    put("server.log_level".into(), t.server.log_level.clone());
    for u in &t.users {
        let p = format!("users.{}", u.name);
        put(format!("{p}.password"), "***".into());
        put(format!("{p}.schemas"), u.schemas.join(", "));
        if u.read_only {
            put(format!("{p}.read_only"), "true".into());
        }
        if u.max_connections > 0 {
            put(
                format!("{p}.max_connections"),
                u.max_connections.to_string(),
            );
        }
        if let Some(a) = &u.auth_plugin {
            put(format!("{p}.auth_plugin"), a.clone());
        }
    }
    let endpoint = |e: &HostEndpoint, weight: u32| {
        format!(
            "{} (user {}, password ***, weight {weight}{})",
            e.address,
            e.user,
            match e.tls {
                shoal_router::config::HostTls::Off => "",
                _ => ", tls",
            }
        )
    };
    for h in &t.datahosts {
        let p = format!("datahosts.{}", h.name);
        put(
            format!("{p}.primary"),
            endpoint(&h.primary, h.read_weight(0)),
        );
        for (j, r) in h.replicas.iter().enumerate() {
            put(
                format!("{p}.replicas.{}", j + 1),
                endpoint(r, h.read_weight(j + 1)),
            );
        }
        put(format!("{p}.balance"), h.balance.as_str().into());
        put(
            format!("{p}.pool"),
            format!(
                "min {}, max {}, acquire_timeout {:?}, idle_timeout {:?}",
                h.pool.min, h.pool.max, h.pool.acquire_timeout, h.pool.idle_timeout
            ),
        );
        put(
            format!("{p}.health"),
            format!(
                "heartbeat {:?}, timeout {:?}, down_after {}, up_after {}, max_replication_lag {:?}",
                h.health.heartbeat,
                h.health.timeout,
                h.health.down_after,
                h.health.up_after,
                h.health.max_replication_lag
            ),
        );
    }
    for d in &t.datanodes {
        put(
            format!("datanodes.{}", d.name),
            format!("{}/{}", t.datahosts[d.datahost].name, d.database),
        );
    }
    let mut names: Vec<&String> = t.schemas.keys().collect();
    names.sort();
    for name in names {
        let s = &t.schemas[name];
        put(
            format!("schemas.{name}.default_datanode"),
            s.default_datanode
                .map_or("(none)".into(), |d| t.datanodes[d].name.clone()),
        );
        let mut tables: Vec<&TableDef> = s.tables.values().collect();
        tables.sort_by(|a, b| a.name().cmp(b.name()));
        for table in tables {
            let dns = |d: &mut dyn Iterator<Item = usize>| {
                d.map(|d| t.datanodes[d].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let v = match table {
                TableDef::Sharded(st) => format!(
                    "sharded by {} (rule {}) on {}",
                    st.shard_key,
                    st.rule.name(),
                    dns(&mut st.shards.iter().map(|x| x.datanode))
                ),
                TableDef::Global(g) => {
                    format!("global on {}", dns(&mut g.datanodes.iter().copied()))
                }
                TableDef::Child(ch) => format!(
                    "child of {} ({} = {}.{})",
                    ch.parent, ch.join_key, ch.parent, ch.parent_key
                ),
            };
            put(format!("schemas.{name}.tables.{}", table.name()), v);
        }
    }
    rows
}

fn unix_time(t: SystemTime) -> String {
    t.duration_since(UNIX_EPOCH)
        .map_or_else(|_| "0".into(), |d| format!("{:.3}", d.as_secs_f64()))
}

pub mod addresses;

#[cfg(test)]
mod tests;
