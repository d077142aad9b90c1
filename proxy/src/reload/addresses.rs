//! Reload's rule for the servers of a datahost that exists before and after: a server address
//! the datahost did not list before (as primary or replica) is refused unless that server
//! shows it holds the datahost's data: it is the same server as one listed before (same
//! `@@server_id`, `@@hostname`, `@@port` and `@@datadir`, under another address), it
//! replicates from one of the datahost's servers, or one of them replicates from it (a
//! failover). A server proven so proves others in turn (a new replica of a new primary).
//! Otherwise two datahosts' addresses swapped, or a typo naming another shard's server,
//! would send rows (or reads) to another shard's server as soon as the file is reloaded.
//! Removing a server, reordering a datahost's own servers and adding new datahosts need no
//! proof. A restart takes the file as it is (nothing is running to compare with).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

use mysql_common::constants::CapabilityFlags;
use shoal_router::topology::Topology;

use crate::backend::conn::BackendConn;
use crate::config::{BackendSpec, ProxyConfig};

/// How long one server may take to answer the probe (connecting included).
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Who a server is, as it says itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub server_id: String,
    pub hostname: String,
    pub port: String,
    pub datadir: String,
}

/// Where a server replicates from (its replication status row), if it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub host: String,
    pub port: u16,
    /// The source's `@@server_id` as the replica last saw it (0 or absent: never connected).
    pub server_id: Option<String>,
}

/// What one server answered, or why it did not.
#[derive(Debug, Clone)]
pub struct Probe {
    pub spec_host: String,
    pub spec_port: u16,
    /// The configured address resolved (for comparing with a replica's source host).
    pub resolved: HashSet<SocketAddr>,
    pub answer: Result<(Identity, Option<Source>), String>,
}

/// The changes the rule refuses, as the reason for refusing the whole reload (`Ok`: none).
pub async fn check(
    old_cfg: &ProxyConfig,
    old: &Topology,
    new_cfg: &ProxyConfig,
    new: &Topology,
) -> std::result::Result<(), String> {
    let (Some(or), Some(nr)) = (&old_cfg.routing, &new_cfg.routing) else {
        return Ok(());
    };
    for (dh, h) in new.datahosts.iter().enumerate() {
        let Some(odh) = old.datahosts.iter().position(|o| o.name == h.name) else {
            continue;
        };
        let o = &old.datahosts[odh];
        let listed: HashSet<&str> = std::iter::once(&o.primary)
            .chain(o.replicas.iter())
            .map(|e| e.address.as_str())
            .collect();
        // (config key, address, spec) of every server the datahost did not list before.
        let mut unknown: Vec<(String, String, BackendSpec)> = Vec::new();
        if !listed.contains(h.primary.address.as_str()) {
            unknown.push((
                format!("datahosts.{}.primary", h.name),
                h.primary.address.clone(),
                nr.hosts[dh].0.clone(),
            ));
        }
        for (j, r) in h.replicas.iter().enumerate() {
            if !listed.contains(r.address.as_str()) {
                unknown.push((
                    format!("datahosts.{}.replicas.{}", h.name, j + 1),
                    r.address.clone(),
                    nr.replicas[dh][j].clone(),
                ));
            }
        }
        if unknown.is_empty() {
            continue;
        }
        let old_specs: Vec<BackendSpec> = std::iter::once(or.hosts[odh].0.clone())
            .chain(or.replicas[odh].iter().cloned())
            .collect();
        let mut probes = Vec::new();
        for spec in old_specs.iter().chain(unknown.iter().map(|u| &u.2)) {
            probes.push(probe(spec));
        }
        let probes = join_all(probes).await;
        let (known, new_probes) = probes.split_at(old_specs.len());
        let unproven = unproven(known, new_probes);
        if let Some(&i) = unproven.first() {
            let (key, addr, _) = &unknown[i];
            let why = match &new_probes[i].answer {
                Err(e) => format!("it cannot be asked ({e})"),
                Ok(_) => format!(
                    "it is not a server {0} listed before, does not replicate from one of {0}'s \
                     servers, and none of them replicates from it",
                    h.name
                ),
            };
            return Err(format!(
                "datahost {}'s server changed: {key} is now {addr}, and {why}; a reload does \
                 not point a datahost at a server that may hold another datahost's data: \
                 restore the address, or restart Shoal to use it",
                h.name
            ));
        }
    }
    Ok(())
}

/// Runs the futures one after another's start (all at once) and gives their outputs in order.
async fn join_all<F: std::future::Future<Output = Probe> + Send + 'static>(
    futures: Vec<F>,
) -> Vec<Probe> {
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.unwrap_or_else(|e| Probe {
            spec_host: String::new(),
            spec_port: 0,
            resolved: HashSet::new(),
            answer: Err(format!("probe task failed: {e}")),
        }));
    }
    out
}

/// The indexes of `new` that no chain of proofs links to a server of `known`.
pub fn unproven(known: &[Probe], new: &[Probe]) -> Vec<usize> {
    let mut trusted: Vec<&Probe> = known.iter().collect();
    let mut left: Vec<usize> = (0..new.len()).collect();
    loop {
        let before = left.len();
        left.retain(|&i| {
            let n = &new[i];
            if trusted.iter().any(|t| holds_same_data(t, n)) {
                trusted.push(n);
                false
            } else {
                true
            }
        });
        if left.len() == before {
            return left;
        }
    }
}

/// Whether `n` shows it holds the data of `t`, a server trusted to hold the datahost's.
fn holds_same_data(t: &Probe, n: &Probe) -> bool {
    let Ok((nid, nsrc)) = &n.answer else {
        return false;
    };
    let tid = t.answer.as_ref().ok().map(|(id, _)| id);
    if tid == Some(nid) {
        return true;
    }
    // `n` replicates from `t`; a source whose server id the replica saw must be `t`'s.
    if let Some(src) = nsrc
        && names(src, t)
        && tid.is_none_or(|id| src.server_id.as_ref().is_none_or(|s| *s == id.server_id))
    {
        return true;
    }
    // `t` replicates from `n` (the failover case: the old primary follows the new one).
    if let Ok((_, Some(src))) = &t.answer
        && names(src, n)
        && src.server_id.as_ref().is_none_or(|s| *s == nid.server_id)
    {
        return true;
    }
    false
}

/// Whether a replication source names the server probed as `p` (same port; the same host
/// text, or a host resolving to one of the same addresses).
fn names(src: &Source, p: &Probe) -> bool {
    if src.port != p.spec_port {
        return false;
    }
    if src.host.eq_ignore_ascii_case(&p.spec_host) {
        return true;
    }
    resolve(&src.host, src.port)
        .iter()
        .any(|a| p.resolved.contains(a))
}

fn resolve(host: &str, port: u16) -> HashSet<SocketAddr> {
    use std::net::ToSocketAddrs;
    (host, port)
        .to_socket_addrs()
        .map(|a| a.collect())
        .unwrap_or_default()
}

/// Asks the server of `spec` who it is and where it replicates from.
fn probe(spec: &BackendSpec) -> impl std::future::Future<Output = Probe> + Send + 'static {
    let spec = spec.clone();
    async move {
        let (host, port) = (spec.host.clone(), spec.port);
        let resolved = tokio::task::spawn_blocking(move || resolve(&host, port))
            .await
            .unwrap_or_default();
        let answer = match crate::timers::timeout(PROBE_TIMEOUT, ask(&spec)).await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "{} did not answer in {PROBE_TIMEOUT:?}",
                spec.addr()
            )),
        };
        Probe {
            spec_host: spec.host.clone(),
            spec_port: spec.port,
            resolved,
            answer,
        }
    }
}

async fn ask(spec: &BackendSpec) -> crate::error::Result<(Identity, Option<Source>)> {
    let wire = CapabilityFlags::CLIENT_DEPRECATE_EOF | CapabilityFlags::CLIENT_MULTI_RESULTS;
    let mut c = BackendConn::connect(spec, wire.into(), None, false, PROBE_TIMEOUT).await?;
    let row = c
        .query_named_row("SELECT @@server_id, @@hostname, @@port, @@datadir")
        .await?
        .unwrap_or_default();
    let v = |i: usize| row.get(i).and_then(|(_, v)| v.clone()).unwrap_or_default();
    let id = Identity {
        server_id: v(0),
        hostname: v(1),
        port: v(2),
        datadir: v(3),
    };
    let status_query = c.info.replica_status_query();
    let source = c.query_named_row(status_query).await?.and_then(|row| {
        let get = |names: [&str; 2]| {
            row.iter()
                .find(|(n, _)| names.iter().any(|x| n.eq_ignore_ascii_case(x)))
                .and_then(|(_, v)| v.clone())
        };
        let host = get(["Master_Host", "Source_Host"])?;
        let port = get(["Master_Port", "Source_Port"])?.parse().ok()?;
        let server_id = get(["Master_Server_Id", "Source_Server_Id"]).filter(|s| s != "0");
        Some(Source {
            host,
            port,
            server_id,
        })
    });
    Ok((id, source))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(host: &str, port: u16, id: &str, source: Option<(&str, u16, &str)>) -> Probe {
        Probe {
            spec_host: host.into(),
            spec_port: port,
            resolved: resolve(host, port),
            answer: Ok((
                Identity {
                    server_id: id.into(),
                    hostname: "h".into(),
                    port: port.to_string(),
                    datadir: format!("/d/{port}"),
                },
                source.map(|(h, p, s)| Source {
                    host: h.into(),
                    port: p,
                    server_id: Some(s.into()),
                }),
            )),
        }
    }

    #[test]
    fn a_replica_of_a_listed_server_or_its_new_source_is_proven() {
        let primary = server("127.0.0.1", 3306, "1", None);
        // A new replica of the primary, and a replica of that one.
        let r = server("127.0.0.1", 3307, "2", Some(("127.0.0.1", 3306, "1")));
        let rr = server("127.0.0.1", 3308, "3", Some(("localhost", 3307, "2")));
        assert!(unproven(std::slice::from_ref(&primary), &[rr.clone(), r.clone()]).is_empty());
        // Failover: the old primary now replicates from the new one.
        let new_primary = server("127.0.0.1", 3309, "4", None);
        let old_primary = server("127.0.0.1", 3306, "1", Some(("127.0.0.1", 3309, "4")));
        assert!(unproven(&[old_primary], &[new_primary]).is_empty());
        // The same server under another name.
        let same = server("localhost", 3306, "1", None);
        assert!(unproven(std::slice::from_ref(&primary), &[same]).is_empty());
    }

    #[test]
    fn another_shards_server_or_an_unreachable_one_is_not() {
        let dh1 = server("127.0.0.1", 3306, "1", None);
        let dh2 = server("127.0.0.1", 3406, "2", None);
        let dh2_replica = server("127.0.0.1", 3407, "3", Some(("127.0.0.1", 3406, "2")));
        assert_eq!(
            unproven(std::slice::from_ref(&dh1), &[dh2, dh2_replica]),
            vec![0, 1]
        );
        // A source with the right address but another server id (reused port elsewhere).
        let wrong = server("127.0.0.1", 3307, "5", Some(("127.0.0.1", 3306, "9")));
        assert_eq!(unproven(std::slice::from_ref(&dh1), &[wrong]), vec![0]);
        let mut down = server("127.0.0.1", 3310, "6", None);
        down.answer = Err("refused".into());
        assert_eq!(unproven(&[dh1], &[down]), vec![0]);
    }
}
