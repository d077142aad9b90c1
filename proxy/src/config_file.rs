//! `shoal --config FILE`: the router's configuration (see `shoal_router::config`). A file whose
//! schemas list no tables and share one datanode is served as that datanode, every statement
//! relayed without planning (as fast as quick mode); any other file is served by the router
//! over all its datanodes.

use crate::runtime::admission;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use shoal_router::config::{Balance, HostEndpoint, HostTls};
use shoal_router::plan::Router;
use shoal_router::topology::{TableDef, Topology};

use crate::config::{
    BackendSpec, BackendTls, ObserveConfig, PoolSettings, ProxyConfig, Sharding, TlsFiles, User,
    secret_of,
};
use crate::wire::auth::AuthPlugin;

/// The one datanode a file can be served from without the router: the one every schema
/// defaults to, when no schema lists (sharded, global, child) tables. `Err` says why the
/// router is needed.
fn passthrough_datanode(t: &Topology) -> Result<usize, String> {
    if let Some(u) = t.users.iter().find(|u| u.read_only) {
        return Err(format!(
            "users.{}: read_only (statements are classified)",
            u.name
        ));
    }
    if let Some(h) = t
        .datahosts
        .iter()
        .find(|h| h.balance != Balance::PrimaryOnly)
    {
        return Err(format!(
            "datahosts.{}: balance {} (reads are split)",
            h.name,
            h.balance.as_str()
        ));
    }
    let mut names: Vec<&String> = t.schemas.keys().collect();
    names.sort();
    let mut served: Option<usize> = None;
    for name in names {
        let s = &t.schemas[name];
        if !s.tables.is_empty() {
            let mut listed: Vec<&str> = s.tables.values().map(|t| t.name()).collect();
            listed.sort_unstable();
            return Err(format!(
                "schemas.{name}: lists sharded/global/child tables ({})",
                listed.join(", ")
            ));
        }
        let Some(dn) = s.default_datanode else {
            return Err(format!(
                "schemas.{name}: no default_datanode to serve it from"
            ));
        };
        match served {
            None => served = Some(dn),
            Some(other) if other != dn => {
                return Err(format!(
                    "schemas.{name}: on datanode {} while another schema is on {}",
                    t.datanodes[dn].name, t.datanodes[other].name
                ));
            }
            Some(_) => {}
        }
    }
    served.ok_or_else(|| "the configuration has no schema to serve".to_string())
}

/// The primary of datahost `i`, starting in `database`.
fn host_spec(t: &Topology, i: usize, database: Option<&str>) -> Result<BackendSpec, String> {
    endpoint_spec(&t.datahosts[i].primary, database)
}

fn endpoint_spec(e: &HostEndpoint, database: Option<&str>) -> Result<BackendSpec, String> {
    let (h, port) = e
        .host_port()
        .ok_or_else(|| format!("{}: expected host:port", e.address))?;
    Ok(BackendSpec {
        host: h.to_string(),
        port,
        user: e.user.clone(),
        password: e.password.clone(),
        database: database.map(str::to_string),
        tls: endpoint_tls(e)?,
    })
}

/// The TLS mode of a datahost server (its CA file is read when the proxy binds).
fn endpoint_tls(e: &HostEndpoint) -> Result<BackendTls, String> {
    let at = |what: String| format!("datahost server {}: {what}", e.address);
    let tls = match (e.tls, &e.tls_ca) {
        (HostTls::Off, None) => return Ok(BackendTls::Off),
        (HostTls::Required, None) => BackendTls::Required,
        (HostTls::VerifyCa, Some(ca)) => BackendTls::VerifyCa(ca.clone()),
        (HostTls::VerifyCa, None) => {
            return Err(at("tls: verify_ca needs tls_ca (a PEM file)".into()));
        }
        (_, Some(_)) => return Err(at("tls_ca is used only with tls: verify_ca".into())),
    };
    Ok(tls)
}

/// Builds the proxy's runtime settings from a validated topology. `listen` overrides
/// `server.listen` when given on the command line.
pub fn proxy_config(t: &Topology, listen: Option<&str>) -> Result<ProxyConfig, String> {
    let passthrough = passthrough_datanode(t).ok();
    // The datanode whose server version is announced to clients (and, without the router,
    // the one served).
    let first = passthrough.unwrap_or(0);
    let Some(dn) = t.datanodes.get(first) else {
        return Err("datanodes: none configured; Shoal needs at least one backend".into());
    };
    let host = &t.datahosts[dn.datahost];
    let backend = host_spec(t, dn.datahost, Some(&dn.database))?;
    let users = t
        .users
        .iter()
        .map(|u| {
            let secret = secret_of(&u.password);
            User {
                name: u.name.clone(),
                plugin: u
                    .auth_plugin
                    .as_deref()
                    .and_then(|p| AuthPlugin::from_name(p.as_bytes()))
                    .unwrap_or_else(|| secret.default_plugin()),
                secret,
                max_connections: u.max_connections as usize,
                schemas: Some(u.schemas.clone()),
                read_only: u.read_only,
                admin: u.admin,
            }
        })
        .collect();
    // Without the router, logical schemas served by the datanode are its physical database;
    // with it, the session keeps the logical name and each connection its datanode's database.
    let mut schema_map: Vec<(String, String)> = match passthrough {
        Some(_) => t
            .schemas
            .values()
            .filter(|s| s.default_datanode.map(|d| &t.datanodes[d]) == Some(dn))
            .map(|s| (s.name.clone(), dn.database.clone()))
            .collect(),
        None => t
            .schemas
            .values()
            .map(|s| (s.name.clone(), s.name.clone()))
            .collect(),
    };
    schema_map.sort();
    let server = &t.server;
    let pool = PoolSettings::from_config(&host.pool);
    let routing = match passthrough {
        Some(_) => None,
        None => {
            let mut hosts = Vec::with_capacity(t.datahosts.len());
            let mut replicas = Vec::with_capacity(t.datahosts.len());
            for (i, h) in t.datahosts.iter().enumerate() {
                hosts.push((host_spec(t, i, None)?, PoolSettings::from_config(&h.pool)));
                replicas.push(
                    h.replicas
                        .iter()
                        .map(|r| endpoint_spec(r, None))
                        .collect::<Result<Vec<_>, _>>()?,
                );
            }
            let topology = Arc::new(t.clone());
            let needs = admission::needs(&topology);
            for (i, (need, (_, pool))) in needs.iter().zip(&hosts).enumerate() {
                if *need > pool.max_size {
                    tracing::warn!(
                        datahost = %topology.datahosts[i].name,
                        pool_max = pool.max_size,
                        need,
                        "pool.max is below the connections one session can need on this \
                         datahost: such statements run one session at a time and wait for \
                         connections the pool cannot give (acquire timeout)"
                    );
                }
            }
            Some(Arc::new(Sharding {
                router: Arc::new(Router::new(topology.clone())),
                topology,
                hosts,
                replicas,
                read_only_users: t
                    .users
                    .iter()
                    .filter(|u| u.read_only)
                    .map(|u| u.name.clone())
                    .collect(),
                denied_schemas: t
                    .users
                    .iter()
                    .map(|u| {
                        let mut denied: Vec<String> = t
                            .schemas
                            .values()
                            .filter(|s| !u.schemas.iter().any(|a| a == &s.name))
                            .map(|s| s.name.clone())
                            .collect();
                        denied.sort();
                        (u.name.clone(), denied)
                    })
                    .filter(|(_, denied)| !denied.is_empty())
                    .collect(),
            }))
        }
    };
    let idle = if server.client_idle_timeout.is_zero() {
        Duration::from_secs(100 * 365 * 24 * 3600)
    } else {
        server.client_idle_timeout
    };
    let mut cfg = ProxyConfig::quick(listen.unwrap_or(&server.listen).to_string(), backend);
    cfg.users = users;
    cfg.schema_map = schema_map;
    cfg.only_mapped_schemas = true;
    cfg.pool = pool;
    cfg.max_connections = (server.max_connections as usize).max(1);
    cfg.client_idle_timeout = idle;
    cfg.shutdown_timeout = server.shutdown_timeout;
    if passthrough.is_some() && routing.is_none() {
        cfg.relay_topology = Some(Arc::new(t.clone()));
    }
    cfg.routing = routing;
    cfg.max_packet = server.max_allowed_packet as usize;
    cfg.handshake_timeout = server.handshake_timeout;
    cfg.query_timeout = (!server.query_timeout.is_zero()).then_some(server.query_timeout);
    cfg.subquery_max_values = server.subquery_max_values as usize;
    cfg.subquery_max_bytes = server.subquery_max_bytes as usize;
    cfg.gather_max_rows = server.gather_max_rows as usize;
    cfg.gather_max_bytes = server.gather_max_bytes as usize;
    cfg.tls = server.tls.as_ref().map(|t| TlsFiles {
        cert: t.cert.clone(),
        key: t.key.clone(),
        required: t.required,
    });
    cfg.rsa_private_key = server.rsa.as_ref().map(|r| r.private_key.clone());
    cfg.observe = ObserveConfig {
        admin_listen: server.admin_listen.clone(),
        metrics: server.metrics,
        digests: server.digests,
        slow_log: server.slow_log.clone(),
    };
    Ok(cfg)
}

/// A readable summary of the topology, for `shoal --check`.
pub fn describe(t: &Topology) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "listen: {}", t.server.listen);
    let _ = writeln!(out, "datahosts:");
    for h in &t.datahosts {
        let _ = writeln!(
            out,
            "  {}: primary {} (pool {}..{})",
            h.name, h.primary.address, h.pool.min, h.pool.max
        );
        for (j, r) in h.replicas.iter().enumerate() {
            let _ = writeln!(
                out,
                "      replica {} (weight {})",
                r.address,
                h.read_weight(j + 1)
            );
        }
        if !h.replicas.is_empty() {
            let _ = writeln!(
                out,
                "      reads: {}, primary weight {}, read_your_writes {:?}{}",
                h.balance.as_str(),
                h.read_weight(0),
                h.read_your_writes,
                match h.read_when_primary_down {
                    shoal_router::config::ReadWhenPrimaryDown::None => "",
                    shoal_router::config::ReadWhenPrimaryDown::Replicas => {
                        ", read_when_primary_down replicas"
                    }
                }
            );
        }
    }
    let _ = writeln!(out, "datanodes:");
    for d in &t.datanodes {
        let _ = writeln!(
            out,
            "  {}: {}/{}",
            d.name, t.datahosts[d.datahost].name, d.database
        );
    }
    let _ = writeln!(out, "schemas:");
    let mut names: Vec<&String> = t.schemas.keys().collect();
    names.sort();
    for name in names {
        let s = &t.schemas[name];
        let default = s
            .default_datanode
            .map(|d| t.datanodes[d].name.as_str())
            .unwrap_or("(none)");
        let _ = writeln!(out, "  {name}: default datanode {default}");
        let mut tables: Vec<&TableDef> = s.tables.values().collect();
        tables.sort_by(|a, b| a.name().cmp(b.name()));
        for table in tables {
            let line = match table {
                TableDef::Sharded(st) => format!(
                    "sharded by {} ({} rule '{}') over {} shards: {}",
                    st.shard_key,
                    st.rule.algorithm().as_str(),
                    st.rule.name(),
                    st.shards.len(),
                    shard_list(t, st.shards.iter().map(|x| (x.datanode, &x.physical_table)))
                ),
                TableDef::Global(g) => format!(
                    "global on {}",
                    g.datanodes
                        .iter()
                        .map(|d| t.datanodes[*d].name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                TableDef::Child(c) => format!(
                    "child of {} ({} = {}.{}), root {}",
                    c.parent, c.join_key, c.parent, c.parent_key, c.root
                ),
            };
            let _ = writeln!(out, "    {}: {line}", table.name());
        }
    }
    let _ = writeln!(out, "users:");
    for u in &t.users {
        let ro = match (u.read_only, u.admin) {
            (true, true) => " (read-only, admin)",
            (true, false) => " (read-only)",
            (false, true) => " (admin)",
            (false, false) => "",
        };
        let _ = writeln!(out, "  {}: schemas {}{ro}", u.name, u.schemas.join(", "));
    }
    match passthrough_datanode(t) {
        Ok(dn) => {
            let d = &t.datanodes[dn];
            let h = &t.datahosts[d.datahost];
            let _ = writeln!(
                out,
                "served as one datanode: {} ({}/{}), statements relayed without planning",
                d.name, h.primary.address, d.database
            );
        }
        Err(why) => {
            let _ = writeln!(
                out,
                "served by the router over {} datanodes ({why})",
                t.datanodes.len()
            );
        }
    }
    out
}

fn shard_list<'a>(t: &Topology, shards: impl Iterator<Item = (usize, &'a String)>) -> String {
    let all: Vec<String> = shards
        .map(|(d, table)| format!("{}.{table}", t.datanodes[d].name))
        .collect();
    if all.len() <= 6 {
        all.join(", ")
    } else {
        format!("{}, ..., {}", all[..3].join(", "), all[all.len() - 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_router::config::Config;

    /// Found by the `config` fuzz target: a config without datanodes builds a topology, and
    /// deriving the proxy's settings from it indexed the first datanode.
    #[test]
    fn config_without_datanodes_is_refused() {
        for text in ["#", "", "datahosts: []\n"] {
            let t = Topology::build(&Config::from_yaml_str(text).unwrap()).unwrap();
            let err = proxy_config(&t, None).unwrap_err();
            assert!(err.contains("datanodes"), "{err}");
            let _ = describe(&t);
        }
    }
}
