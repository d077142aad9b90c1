//! Prometheus metrics. Counters of the statement path are plain atomics in fixed arrays
//! indexed by enums (route kind, statement kind, error code) and, for the labels a
//! configuration gives (schema, datanode, server), by positions in the snapshot the session
//! runs on ([`Slots`]), so that counting takes no lock, no allocation and no label lookup;
//! they and the live state (pools, health, lag, XA outcomes, plan cache: `process::scrape`)
//! are written out at scrape time by one collector through `prometheus-client`'s encoder.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::{RouteKind, Statement, StatementKind};
use crate::config::ProxyConfig;
use crate::histogram::AtomicHistogram;

/// Why a client connection was refused (a label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Refusal {
    MaxConnections = 0,
    Auth,
    Tls,
    UserLimit,
    Handshake,
}

impl Refusal {
    const ALL: [Refusal; 5] = [
        Refusal::MaxConnections,
        Refusal::Auth,
        Refusal::Tls,
        Refusal::UserLimit,
        Refusal::Handshake,
    ];

    fn label(self) -> &'static str {
        match self {
            Refusal::MaxConnections => "max_connections",
            Refusal::Auth => "auth",
            Refusal::Tls => "tls",
            Refusal::UserLimit => "user_limit",
            Refusal::Handshake => "handshake",
        }
    }

    /// The cause of a failed login, by the error it ended with.
    pub fn of_login_error(e: &crate::error::Error) -> Refusal {
        match e.as_reply().map(|(code, _, _)| code) {
            Some(1045) | Some(1044) | Some(1251) => Refusal::Auth,
            Some(3159) => Refusal::Tls,
            Some(1203) => Refusal::UserLimit,
            Some(1040) => Refusal::MaxConnections,
            _ => Refusal::Handshake,
        }
    }
}

/// Error codes counted one by one (MySQL/MariaDB server and client codes); others share a
/// series with code `other`.
const ERROR_CODES: std::ops::Range<u16> = 1000..5000;

const KINDS: usize = StatementKind::ALL.len();
const ROUTES: usize = RouteKind::ALL.len();

pub struct Metrics {
    pub accepted: AtomicU64,
    pub current: AtomicI64,
    refused: [AtomicU64; Refusal::ALL.len()],
    /// Index: the command byte.
    commands: Vec<AtomicU64>,
    /// Statement kind × route kind.
    statements: [[AtomicU64; ROUTES]; KINDS],
    /// Index `code - ERROR_CODES.start`; the last is `other`.
    errors: Vec<AtomicU64>,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    /// Lock cycles across servers the deadlock detector broke (`crate::deadlock`).
    pub deadlocks_broken: AtomicU64,
    /// Rows and bytes SELECTs gathered on one datanode copied (`exec::gather`).
    pub gathered_rows: AtomicU64,
    pub gathered_bytes: AtomicU64,
    /// Every histogram whose labels a configuration gave, by its labels: what [`Slots`] of
    /// each snapshot point into, and what a scrape writes out.
    series: Mutex<Series>,
}

#[derive(Default)]
struct Series {
    /// (schema, route kind) -> statement latency; schema "" is none, or one not configured.
    latency: BTreeMap<(String, usize), Arc<AtomicHistogram>>,
    /// (datanode, server address) -> backend round trips.
    backend: BTreeMap<(String, String), Arc<AtomicHistogram>>,
}

/// The histograms of one configuration snapshot, by position: schema (sorted names, then one
/// for none) × route kind, and datanode × server (`Runtime::pools` order). A reload builds
/// new slots; a label that stays (a schema, a datanode on a server at the same address) keeps
/// its histogram, so its counts carry over, and a session on the old snapshot counts into the
/// same series.
pub struct Slots {
    schemas: Vec<String>,
    latency: Vec<Arc<AtomicHistogram>>,
    datanodes: usize,
    servers: usize,
    backend: Vec<Arc<AtomicHistogram>>,
}

impl Slots {
    /// One backend round trip of `elapsed` on datanode `dn`, server `server` (indexes of the
    /// snapshot these slots belong to).
    pub fn backend(&self, dn: usize, server: usize, elapsed: Duration) {
        let i = dn.min(self.datanodes - 1) * self.servers + server.min(self.servers - 1);
        self.backend[i].observe(elapsed);
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            accepted: AtomicU64::new(0),
            current: AtomicI64::new(0),
            refused: Default::default(),
            commands: (0..256).map(|_| AtomicU64::new(0)).collect(),
            statements: Default::default(),
            errors: (0..=ERROR_CODES.len()).map(|_| AtomicU64::new(0)).collect(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            deadlocks_broken: AtomicU64::new(0),
            gathered_rows: AtomicU64::new(0),
            gathered_bytes: AtomicU64::new(0),
            series: Default::default(),
        }
    }
}

impl Metrics {
    /// The slots of a configuration whose servers (pools order) have these addresses.
    pub fn slots(&self, config: &ProxyConfig, servers: &[String]) -> Slots {
        let (mut schemas, datanodes): (Vec<String>, Vec<String>) = match &config.routing {
            Some(r) => (
                r.topology.schemas.keys().cloned().collect(),
                r.topology
                    .datanodes
                    .iter()
                    .map(|d| d.name.clone())
                    .collect(),
            ),
            None => (
                config.schema_map.iter().map(|(l, _)| l.clone()).collect(),
                vec!["backend".to_string()],
            ),
        };
        schemas.sort();
        let fallback = [String::new()];
        let servers: &[String] = if servers.is_empty() {
            &fallback
        } else {
            servers
        };
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let mut latency = Vec::with_capacity((schemas.len() + 1) * ROUTES);
        for schema in schemas.iter().chain(std::iter::once(&String::new())) {
            for r in 0..ROUTES {
                latency.push(
                    series
                        .latency
                        .entry((schema.clone(), r))
                        .or_default()
                        .clone(),
                );
            }
        }
        let mut backend = Vec::with_capacity(datanodes.len() * servers.len());
        for dn in &datanodes {
            for server in servers {
                backend.push(
                    series
                        .backend
                        .entry((dn.clone(), server.clone()))
                        .or_default()
                        .clone(),
                );
            }
        }
        Slots {
            schemas,
            latency,
            datanodes: datanodes.len(),
            servers: servers.len(),
            backend,
        }
    }

    pub fn refused(&self, why: Refusal) {
        self.refused[why as usize].fetch_add(1, Relaxed);
    }

    pub(super) fn command(&self, s: &Statement<'_>, statement: bool, slots: &Slots) {
        self.commands[s.command as usize].fetch_add(1, Relaxed);
        self.bytes_in.fetch_add(s.bytes_in, Relaxed);
        self.bytes_out.fetch_add(s.bytes_out, Relaxed);
        if let Some(code) = s.mark.error {
            let i = if ERROR_CODES.contains(&code) {
                (code - ERROR_CODES.start) as usize
            } else {
                ERROR_CODES.len()
            };
            self.errors[i].fetch_add(1, Relaxed);
        }
        if !statement {
            return;
        }
        let kind = StatementKind::of_text(s.text);
        let route = s.mark.route.unwrap_or(RouteKind::Local);
        self.statements[kind as usize][route as usize].fetch_add(1, Relaxed);
        let schema = s
            .schema
            .and_then(|n| slots.schemas.iter().position(|x| x == n))
            .unwrap_or(slots.schemas.len());
        slots.latency[schema * ROUTES + route as usize].observe(s.elapsed);
    }
}

pub(crate) type Labels<'a> = Vec<(&'static str, &'a str)>;

pub(crate) fn family<'a, V>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    ty: MetricType,
    series: impl IntoIterator<Item = (Labels<'a>, V)>,
) -> Result<(), std::fmt::Error>
where
    V: Into<Value>,
{
    let mut m = enc.encode_descriptor(name, help, None, ty)?;
    for (labels, v) in series {
        let mut e = m.encode_family(&labels)?;
        match v.into() {
            Value::Counter(n) => e.encode_counter::<NoLabelSet, _, u64>(&n, None)?,
            Value::Gauge(n) => e.encode_gauge(&n)?,
            Value::GaugeF(n) => e.encode_gauge(&n)?,
        }
    }
    Ok(())
}

pub(crate) enum Value {
    Counter(u64),
    Gauge(i64),
    GaugeF(f64),
}

pub(crate) struct C(pub(crate) u64);
pub(crate) struct G(pub(crate) i64);
impl From<C> for Value {
    fn from(c: C) -> Value {
        Value::Counter(c.0)
    }
}
impl From<G> for Value {
    fn from(g: G) -> Value {
        Value::Gauge(g.0)
    }
}
impl From<f64> for Value {
    fn from(g: f64) -> Value {
        Value::GaugeF(g)
    }
}

pub(crate) fn histograms<'a>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels<'a>, &'a AtomicHistogram)>,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in series {
        let (sum, count, buckets) = h.snapshot();
        m.encode_family(&labels)?
            .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
    }
    Ok(())
}

pub(crate) fn encode_counters(
    m: &Metrics,
    enc: &mut DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    family(
        enc,
        "client_connections",
        "Client connections open now.",
        MetricType::Gauge,
        [(vec![], G(m.current.load(Relaxed)))],
    )?;
    family(
        enc,
        "client_connections_accepted",
        "Client connections accepted.",
        MetricType::Counter,
        [(vec![], C(m.accepted.load(Relaxed)))],
    )?;
    family(
        enc,
        "client_connections_refused",
        "Client connections refused, by cause.",
        MetricType::Counter,
        Refusal::ALL.iter().map(|r| {
            (
                vec![("cause", r.label())],
                C(m.refused[*r as usize].load(Relaxed)),
            )
        }),
    )?;
    family(
        enc,
        "commands",
        "Client commands, by command type.",
        MetricType::Counter,
        (0..=255u8).filter_map(|c| {
            let n = m.commands[c as usize].load(Relaxed);
            (n > 0).then(|| (vec![("command", crate::wire::command::name(c))], C(n)))
        }),
    )?;
    family(
        enc,
        "statements",
        "Statements (COM_QUERY, COM_STMT_EXECUTE), by kind and route kind.",
        MetricType::Counter,
        StatementKind::ALL.iter().flat_map(|k| {
            RouteKind::ALL.iter().filter_map(move |r| {
                let n = m.statements[*k as usize][*r as usize].load(Relaxed);
                (n > 0).then(|| (vec![("kind", k.label()), ("route", r.label())], C(n)))
            })
        }),
    )?;
    let codes: Vec<(String, u64)> = m
        .errors
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let n = n.load(Relaxed);
            let code = if i == ERROR_CODES.len() {
                "other".to_string()
            } else {
                (ERROR_CODES.start + i as u16).to_string()
            };
            (n > 0).then_some((code, n))
        })
        .collect();
    family(
        enc,
        "errors",
        "Errors sent to clients, by error code.",
        MetricType::Counter,
        codes
            .iter()
            .map(|(c, n)| (vec![("code", c.as_str())], C(*n))),
    )?;
    {
        let series = m.series.lock().unwrap_or_else(|e| e.into_inner());
        histograms(
            enc,
            "statement_duration_seconds",
            "Statement latency as the client sees it (first byte read to last byte written), by schema and route kind.",
            series
                .latency
                .iter()
                .filter(|(_, h)| h.count() > 0)
                .map(|((schema, r), h)| {
                    let labels = vec![
                        ("schema", schema.as_str()),
                        ("route", RouteKind::ALL[*r].label()),
                    ];
                    (labels, &**h)
                }),
        )?;
        histograms(
            enc,
            "backend_duration_seconds",
            "Backend round trips (statement sent to response relayed), by datanode and server.",
            series
                .backend
                .iter()
                .filter(|(_, h)| h.count() > 0)
                .map(|((dn, server), h)| {
                    (
                        vec![("datanode", dn.as_str()), ("server", server.as_str())],
                        &**h,
                    )
                }),
        )?;
    }
    family(
        enc,
        "client_received_bytes",
        "Bytes received from clients (MySQL packets, headers included).",
        MetricType::Counter,
        [(vec![], C(m.bytes_in.load(Relaxed)))],
    )?;
    family(
        enc,
        "client_sent_bytes",
        "Bytes sent to clients.",
        MetricType::Counter,
        [(vec![], C(m.bytes_out.load(Relaxed)))],
    )?;
    family(
        enc,
        "deadlocks_broken",
        "Lock cycles across servers the deadlock detector broke (a transaction ended with 1213).",
        MetricType::Counter,
        [(vec![], C(m.deadlocks_broken.load(Relaxed)))],
    )?;
    family(
        enc,
        "gathered_rows",
        "Rows SELECTs gathered on one datanode copied into temporary tables there.",
        MetricType::Counter,
        [(vec![], C(m.gathered_rows.load(Relaxed)))],
    )?;
    family(
        enc,
        "gathered_bytes",
        "Bytes of the rows SELECTs gathered on one datanode copied, as the datanodes sent them.",
        MetricType::Counter,
        [(vec![], C(m.gathered_bytes.load(Relaxed)))],
    )?;
    Ok(())
}

/// The registry as Prometheus text (format 0.0.4).
pub fn encode(registry: &Registry) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, registry);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::collector::Collector;

    #[test]
    fn histogram_buckets_and_text() {
        let h = AtomicHistogram::default();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(20));
        #[derive(Debug)]
        struct One(Arc<AtomicHistogram>, u64);
        impl Collector for One {
            fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
                histograms(
                    &mut enc,
                    "lat_seconds",
                    "Latency.",
                    [(vec![("route", "single")], &*self.0)],
                )?;
                family(
                    &mut enc,
                    "things",
                    "Things.",
                    MetricType::Counter,
                    [(vec![("kind", "a")], C(self.1))],
                )
            }
        }
        let h = Arc::new(h);
        let mut r = Registry::with_prefix("shoal");
        r.register_collector(Box::new(One(h, 7)));
        let text = encode(&r);
        assert!(
            text.contains("# TYPE shoal_lat_seconds histogram\n"),
            "{text}"
        );
        assert!(
            text.contains("shoal_lat_seconds_bucket{route=\"single\",le=\"0.0001\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("shoal_lat_seconds_bucket{route=\"single\",le=\"0.005\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("shoal_lat_seconds_bucket{route=\"single\",le=\"+Inf\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("shoal_lat_seconds_count{route=\"single\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("shoal_things_total{kind=\"a\"} 7\n"),
            "{text}"
        );
    }
}
