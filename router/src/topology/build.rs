//! Validation and resolution of a [`Config`] into a [`Topology`]: every check names the key it
//! found wrong.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{
    ChildTable, Datanode, DatanodeId, GlobalTable, LogicalSchema, Sequence, Shard, ShardedTable,
    TableDef, Topology,
};
use crate::config::pattern::{self, PhysicalName};
use crate::config::{Config, ConfigError, NamePatterns, RuleConfig, TableConfig, TableKind};
use crate::error::RouterError;
use crate::rule::ShardRule;

/// A guard against typos like `tables_per_datanode: 1000000`.
const MAX_SHARDS: usize = 100_000;
const DEFAULT_SEQUENCE_STEP: u64 = 1000;
/// A segment larger than this would let a restart skip more ids than anyone expects.
const MAX_SEQUENCE_STEP: u64 = 1_000_000;
/// The longest `server.query_timeout` (a deadline this far away is as good as none).
const MAX_QUERY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);
/// A detector that looks less often than this would not be one.
const MAX_DEADLOCK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3600);

pub(super) struct Builder<'a> {
    cfg: &'a Config,
    datanode_ids: HashMap<String, DatanodeId>,
    datahost_ids: HashMap<&'a str, usize>,
    rules: HashMap<&'a str, (usize, &'a RuleConfig)>,
    bound_rules: HashMap<(usize, usize), Arc<ShardRule>>,
}

fn err(key: impl std::fmt::Display, msg: impl std::fmt::Display) -> ConfigError {
    RouterError::config(key, msg)
}

fn non_empty(key: &str, v: &str) -> Result<(), ConfigError> {
    if v.trim().is_empty() {
        Err(err(key, "must not be empty"))
    } else {
        Ok(())
    }
}

/// Names Shoal splices into SQL (databases, tables, columns) must be valid MySQL identifiers
/// that can be quoted with backticks.
fn identifier(key: &str, v: &str) -> Result<(), ConfigError> {
    non_empty(key, v)?;
    if v.chars().count() > 64 {
        return Err(err(key, format!("{v:?} is longer than 64 characters")));
    }
    if v.contains(['`', '\0']) || v.ends_with(' ') {
        return Err(err(
            key,
            format!("{v:?} is not a usable identifier (no backticks, NUL or trailing spaces)"),
        ));
    }
    Ok(())
}

/// The server an address names, for telling datanodes apart: host lower-cased, the loopback
/// spellings made one.
fn server_key(address: &str) -> (String, u16) {
    match crate::config::pattern::split_host_port(address) {
        Some((h, port)) => {
            let h = h.to_ascii_lowercase();
            let h = match h.as_str() {
                "localhost" | "::1" | "127.0.0.1" => "127.0.0.1".to_string(),
                _ => h,
            };
            (h, port)
        }
        None => (address.to_string(), 0),
    }
}

impl<'a> Builder<'a> {
    pub(super) fn new(cfg: &'a Config) -> Self {
        Builder {
            cfg,
            datanode_ids: HashMap::new(),
            datahost_ids: HashMap::new(),
            rules: HashMap::new(),
            bound_rules: HashMap::new(),
        }
    }

    pub(super) fn build(mut self) -> Result<Topology, ConfigError> {
        self.check_server()?;
        self.check_datahosts()?;
        let datanodes = self.datanodes()?;
        self.check_rules()?;
        let mut schemas = super::NameMap::default();
        for (si, s) in self.cfg.schemas.iter().enumerate() {
            let key = format!("schemas[{si}]");
            identifier(&format!("{key}.name"), &s.name)?;
            if schemas.contains_key(&s.name) {
                return Err(err(
                    format!("{key}.name"),
                    format!("duplicate schema {:?}", s.name),
                ));
            }
            let schema = self.schema(si)?;
            schemas.insert(s.name.clone(), schema);
        }
        self.check_users()?;
        self.check_xa()?;
        Ok(Topology {
            server: self.cfg.server.clone(),
            datanodes,
            schemas,
            users: self.cfg.users.clone(),
            datahosts: self.cfg.datahosts.clone(),
        })
    }

    fn check_server(&self) -> Result<(), ConfigError> {
        let s = &self.cfg.server;
        let ok = s
            .listen
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !ok {
            return Err(err(
                "server.listen",
                format!("{:?} is not host:port", s.listen),
            ));
        }
        if s.max_connections == 0 {
            return Err(err("server.max_connections", "must be at least 1"));
        }
        if !(1024..=(1 << 30)).contains(&s.max_allowed_packet) {
            return Err(err(
                "server.max_allowed_packet",
                "must be between 1024 and 1073741824 bytes (1 GiB), as in MySQL",
            ));
        }
        if s.handshake_timeout.is_zero() {
            return Err(err("server.handshake_timeout", "must be more than 0"));
        }
        if s.query_timeout > MAX_QUERY_TIMEOUT {
            return Err(err(
                "server.query_timeout",
                "must be at most 1 year (0 turns it off)",
            ));
        }
        let d = &s.deadlock_check;
        if d.interval > MAX_DEADLOCK_INTERVAL {
            return Err(err(
                "server.deadlock_check.interval",
                "must be at most 1 hour (0 turns the detector off)",
            ));
        }
        if d.wait_threshold > MAX_QUERY_TIMEOUT {
            return Err(err(
                "server.deadlock_check.wait_threshold",
                "must be at most 1 year",
            ));
        }
        if let Some(a) = &s.admin_listen
            && a.parse::<std::net::SocketAddr>().is_err()
        {
            return Err(err(
                "server.admin_listen",
                format!("{a:?} is not ip:port (e.g. 127.0.0.1:9066)"),
            ));
        }
        if let Some(l) = &s.slow_log {
            if l.threshold > MAX_QUERY_TIMEOUT {
                return Err(err("server.slow_log.threshold", "must be at most 1 year"));
            }
            if let Some(f) = &l.file {
                non_empty("server.slow_log.file", f)?;
            }
        }
        if let Some(t) = &s.tls {
            non_empty("server.tls.cert", &t.cert)?;
            non_empty("server.tls.key", &t.key)?;
        }
        non_empty("server.log_level", &s.log_level)
    }

    fn check_xa(&self) -> Result<(), ConfigError> {
        let x = &self.cfg.server.xa;
        if x.recovery_interval.is_zero() {
            return Err(err("server.xa.recovery_interval", "must be more than 0"));
        }
        if x.recovery_grace.is_zero() {
            return Err(err("server.xa.recovery_grace", "must be more than 0"));
        }
        if let Some(name) = &x.log_datahost
            && !self.datahost_ids.contains_key(name.as_str())
        {
            return Err(err(
                "server.xa.log_datahost",
                format!("no datahost is named {name:?}"),
            ));
        }
        Ok(())
    }

    fn check_datahosts(&mut self) -> Result<(), ConfigError> {
        for (i, h) in self.cfg.datahosts.iter().enumerate() {
            let key = format!("datahosts[{i}]");
            non_empty(&format!("{key}.name"), &h.name)?;
            if self.datahost_ids.insert(&h.name, i).is_some() {
                return Err(err(
                    format!("{key}.name"),
                    format!("duplicate datahost {:?}", h.name),
                ));
            }
            let endpoints = std::iter::once((format!("{key}.primary"), &h.primary)).chain(
                h.replicas
                    .iter()
                    .enumerate()
                    .map(|(j, r)| (format!("{key}.replicas[{j}]"), r)),
            );
            let mut seen = HashSet::new();
            for (ekey, e) in endpoints {
                if e.host_port().is_none() {
                    return Err(err(
                        format!("{ekey}.address"),
                        format!("{:?} is not host:port", e.address),
                    ));
                }
                if !seen.insert(e.address.as_str()) {
                    return Err(err(
                        format!("{ekey}.address"),
                        format!("{} is listed twice in this datahost", e.address),
                    ));
                }
                non_empty(&format!("{ekey}.user"), &e.user)?;
            }
            if h.pool.max == 0 {
                return Err(err(format!("{key}.pool.max"), "must be at least 1"));
            }
            if h.pool.min > h.pool.max {
                return Err(err(
                    format!("{key}.pool.min"),
                    format!("{} is above pool.max {}", h.pool.min, h.pool.max),
                ));
            }
            check_health(&key, h)?;
        }
        Ok(())
    }

    fn datanodes(&mut self) -> Result<Vec<Datanode>, ConfigError> {
        let mut out: Vec<Datanode> = Vec::new();
        // Keyed by the server a datahost's primary resolves to, not by the datahost: two
        // datahosts naming one server would otherwise hold one database twice, and a scatter
        // would read its rows twice.
        let mut by_target: HashMap<(String, u16, String), String> = HashMap::new();
        for (i, d) in self.cfg.datanodes.iter().enumerate() {
            let key = format!("datanodes[{i}]");
            let names = pattern::expand(&d.name).map_err(|m| err(format!("{key}.name"), m))?;
            let hosts =
                pattern::expand(&d.datahost).map_err(|m| err(format!("{key}.datahost"), m))?;
            let dbs =
                pattern::expand(&d.database).map_err(|m| err(format!("{key}.database"), m))?;
            let (n, h, b) = (names.len(), hosts.len(), dbs.len());
            // Ranges expand in parallel when they have the same length; otherwise the datahost
            // and database ranges combine datahost-major (dh1/db1, dh1/db2, ..., dh2/db1, ...).
            let pairs: Vec<(&String, &String)> = if h == n && b == n {
                hosts.iter().zip(dbs.iter()).collect()
            } else if h * b == n {
                hosts
                    .iter()
                    .flat_map(|hh| dbs.iter().map(move |db| (hh, db)))
                    .collect()
            } else {
                return Err(err(
                    &key,
                    format!(
                        "name expands to {n} datanodes but datahost × database expand to {h} × {b} = {}; \
                         use ranges of the same length, or datahost and database ranges whose product is {n}",
                        h * b
                    ),
                ));
            };
            for (name, (host, db)) in names.into_iter().zip(pairs) {
                identifier(&format!("{key}.database"), db)?;
                let Some(&hid) = self.datahost_ids.get(host.as_str()) else {
                    return Err(err(
                        format!("{key}.datahost"),
                        format!("unknown datahost {host:?} (datanode {name:?})"),
                    ));
                };
                if self.datanode_ids.contains_key(&name) {
                    return Err(err(
                        format!("{key}.name"),
                        format!("duplicate datanode {name:?}"),
                    ));
                }
                let server = server_key(&self.cfg.datahosts[hid].primary.address);
                let addr = self.cfg.datahosts[hid].primary.address.as_str();
                if let Some(other) =
                    by_target.insert((server.0, server.1, db.clone()), name.clone())
                {
                    return Err(err(
                        format!("{key}.database"),
                        format!(
                            "datanodes {other:?} and {name:?} are both database {db:?} on server \
                             {addr} (datahost {host:?}); a scatter would read its rows twice"
                        ),
                    ));
                }
                self.datanode_ids.insert(name.clone(), out.len());
                out.push(Datanode {
                    name,
                    datahost: hid,
                    database: db.clone(),
                });
            }
        }
        Ok(out)
    }

    fn check_rules(&mut self) -> Result<(), ConfigError> {
        for (i, r) in self.cfg.rules.iter().enumerate() {
            non_empty(&format!("rules[{i}].name"), &r.name)?;
            if self.rules.insert(&r.name, (i, r)).is_some() {
                return Err(err(
                    format!("rules[{i}].name"),
                    format!("duplicate rule {:?}", r.name),
                ));
            }
            // Check the parameters on their own, so that unused rules are validated too; shard
            // indexes are checked again against each table's shard count.
            let count = r.shards.unwrap_or(usize::MAX / 2);
            ShardRule::compile(r, count).map_err(|e| match e.key {
                Some(k) => err(format!("rules[{i}].{k}"), e.message),
                None => err(format!("rules[{i}]"), e.message),
            })?;
        }
        Ok(())
    }

    fn datanode_list(&self, key: &str, p: &NamePatterns) -> Result<Vec<DatanodeId>, ConfigError> {
        let mut out = Vec::new();
        for item in &p.0 {
            for name in pattern::expand(item).map_err(|m| err(key, m))? {
                let Some(&id) = self.datanode_ids.get(&name) else {
                    return Err(err(key, format!("unknown datanode {name:?}")));
                };
                if out.contains(&id) {
                    return Err(err(key, format!("datanode {name:?} is listed twice")));
                }
                out.push(id);
            }
        }
        if out.is_empty() {
            return Err(err(key, "no datanodes listed"));
        }
        Ok(out)
    }

    fn schema(&mut self, si: usize) -> Result<LogicalSchema, ConfigError> {
        let s = &self.cfg.schemas[si];
        let default_datanode = match &s.default_datanode {
            None => None,
            Some(n) => Some(*self.datanode_ids.get(n).ok_or_else(|| {
                err(
                    format!("schemas[{si}].default_datanode"),
                    format!("unknown datanode {n:?}"),
                )
            })?),
        };
        let mut tables = super::NameMap::default();
        let mut index_of: HashMap<String, usize> = HashMap::new();
        for (ti, t) in s.tables.iter().enumerate() {
            let key = format!("schemas[{si}].tables[{ti}]");
            identifier(&format!("{key}.name"), &t.name)?;
            let lname = t.name.to_lowercase();
            if index_of.insert(lname.clone(), ti).is_some() {
                return Err(err(
                    format!("{key}.name"),
                    format!("duplicate table {:?}", t.name),
                ));
            }
            self.forbid_keys(&key, t)?;
            let def = match t.kind {
                TableKind::Sharded => TableDef::Sharded(self.sharded(&key, t)?),
                TableKind::Global => {
                    let datanodes = match &t.datanodes {
                        Some(p) => self.datanode_list(&format!("{key}.datanodes"), p)?,
                        None => {
                            return Err(err(
                                format!("{key}.datanodes"),
                                "a global table needs datanodes",
                            ));
                        }
                    };
                    TableDef::Global(GlobalTable {
                        name: t.name.clone(),
                        datanodes,
                    })
                }
                TableKind::Child => continue, // resolved below, once every parent is known
            };
            tables.insert(lname, def);
        }
        for (ti, t) in s.tables.iter().enumerate() {
            if t.kind == TableKind::Child {
                let key = format!("schemas[{si}].tables[{ti}]");
                let child = self.child(&key, si, ti, &index_of, &tables)?;
                tables.insert(t.name.to_lowercase(), TableDef::Child(child));
            }
        }
        Ok(LogicalSchema {
            name: s.name.clone(),
            default_datanode,
            tables,
            foreign_keys: s.foreign_keys,
            transactions: s.transactions,
        })
    }

    /// Keys that do not apply to the table's kind are errors, not silently ignored.
    fn forbid_keys(&self, key: &str, t: &TableConfig) -> Result<(), ConfigError> {
        let present = [
            (
                "shard_key",
                t.shard_key.is_some(),
                TableKind::Sharded == t.kind,
            ),
            ("rule", t.rule.is_some(), TableKind::Sharded == t.kind),
            (
                "tables_per_datanode",
                t.tables_per_datanode.is_some(),
                TableKind::Sharded == t.kind,
            ),
            (
                "datanodes",
                t.datanodes.is_some(),
                t.kind != TableKind::Child,
            ),
            (
                "physical_name",
                t.physical_name.is_some(),
                t.kind != TableKind::Global,
            ),
            ("parent", t.parent.is_some(), TableKind::Child == t.kind),
            ("join_key", t.join_key.is_some(), TableKind::Child == t.kind),
            (
                "parent_key",
                t.parent_key.is_some(),
                TableKind::Child == t.kind,
            ),
            (
                "sequence",
                t.sequence.is_some(),
                TableKind::Sharded == t.kind,
            ),
        ];
        for (name, is_set, allowed) in present {
            if is_set && !allowed {
                let kind = match t.kind {
                    TableKind::Sharded => "sharded",
                    TableKind::Global => "global",
                    TableKind::Child => "child",
                };
                return Err(err(
                    format!("{key}.{name}"),
                    format!("does not apply to a {kind} table"),
                ));
            }
        }
        Ok(())
    }

    fn sharded(&mut self, key: &str, t: &TableConfig) -> Result<ShardedTable, ConfigError> {
        let shard_key = match &t.shard_key {
            Some(k) if !k.trim().is_empty() => k.clone(),
            _ => {
                return Err(err(
                    format!("{key}.shard_key"),
                    "a sharded table needs shard_key",
                ));
            }
        };
        let Some(rule_name) = &t.rule else {
            return Err(err(format!("{key}.rule"), "a sharded table needs a rule"));
        };
        let Some(&(ri, rule_cfg)) = self.rules.get(rule_name.as_str()) else {
            return Err(err(
                format!("{key}.rule"),
                format!("unknown rule {rule_name:?}"),
            ));
        };
        let Some(dn) = &t.datanodes else {
            return Err(err(
                format!("{key}.datanodes"),
                "a sharded table needs datanodes",
            ));
        };
        let datanodes = self.datanode_list(&format!("{key}.datanodes"), dn)?;
        let per = t.tables_per_datanode.unwrap_or(1);
        if datanodes.len().saturating_mul(per) > MAX_SHARDS {
            return Err(err(
                format!("{key}.tables_per_datanode"),
                format!("more than {MAX_SHARDS} shards"),
            ));
        }
        if per == 0 {
            return Err(err(
                format!("{key}.tables_per_datanode"),
                "must be at least 1",
            ));
        }
        let physical = match &t.physical_name {
            Some(p) => {
                Some(PhysicalName::parse(p).map_err(|m| err(format!("{key}.physical_name"), m))?)
            }
            None => None,
        };
        if per > 1 && !physical.as_ref().is_some_and(PhysicalName::is_numbered) {
            return Err(err(
                format!("{key}.physical_name"),
                "tables_per_datanode > 1 needs a physical_name with {index} or {local}, e.g. t_order_{index:04}",
            ));
        }
        // Shard i lives on datanodes[i / per] as its (i % per)-th table.
        let shards: Vec<Shard> = (0..datanodes.len() * per)
            .map(|i| Shard {
                datanode: datanodes[i / per],
                physical_table: physical
                    .as_ref()
                    .map_or_else(|| t.name.clone(), |p| p.render(&t.name, i, i % per)),
            })
            .collect();
        unique_shards(&format!("{key}.physical_name"), &shards)?;
        let rule = match self.bound_rules.get(&(ri, shards.len())) {
            Some(r) => r.clone(),
            None => {
                let r = ShardRule::compile(rule_cfg, shards.len()).map_err(|e| {
                    let k = e
                        .key
                        .map_or(format!("rules[{ri}]"), |k| format!("rules[{ri}].{k}"));
                    err(
                        k,
                        format!(
                            "{} (rule used by {key} {:?}, which has {} shards)",
                            e.message,
                            t.name,
                            shards.len()
                        ),
                    )
                })?;
                let r = Arc::new(r);
                self.bound_rules.insert((ri, shards.len()), r.clone());
                r
            }
        };
        let sequence = match &t.sequence {
            None => None,
            Some(sc) => {
                let datanode = self.datanode_list(
                    &format!("{key}.sequence.datanode"),
                    &NamePatterns(vec![sc.datanode.clone()]),
                )?;
                let step = sc.step.unwrap_or(DEFAULT_SEQUENCE_STEP);
                if !(1..=MAX_SEQUENCE_STEP).contains(&step) {
                    return Err(err(
                        format!("{key}.sequence.step"),
                        format!("must be between 1 and {MAX_SEQUENCE_STEP}"),
                    ));
                }
                match datanode.as_slice() {
                    [dn] => Some(Sequence {
                        datanode: *dn,
                        step,
                    }),
                    _ => {
                        return Err(err(
                            format!("{key}.sequence.datanode"),
                            "names exactly one datanode",
                        ));
                    }
                }
            }
        };
        Ok(ShardedTable {
            name: t.name.clone(),
            shard_key,
            rule,
            shards,
            sequence,
        })
    }

    fn child(
        &self,
        key: &str,
        si: usize,
        ti: usize,
        index_of: &HashMap<String, usize>,
        resolved: &super::NameMap<TableDef>,
    ) -> Result<ChildTable, ConfigError> {
        let tables = &self.cfg.schemas[si].tables;
        let t = &tables[ti];
        let Some(parent) = &t.parent else {
            return Err(err(format!("{key}.parent"), "a child table needs parent"));
        };
        let join_key = match &t.join_key {
            Some(k) if !k.trim().is_empty() => k.clone(),
            _ => {
                return Err(err(
                    format!("{key}.join_key"),
                    "a child table needs join_key",
                ));
            }
        };
        let Some(&pi) = index_of.get(&parent.to_lowercase()) else {
            return Err(err(
                format!("{key}.parent"),
                format!(
                    "unknown parent table {parent:?} in schema {:?}",
                    self.cfg.schemas[si].name
                ),
            ));
        };
        let p = &tables[pi];
        // The column of the parent that carries the root's shard key value.
        let parent_carrier = match p.kind {
            TableKind::Sharded => p.shard_key.clone().unwrap_or_default(),
            TableKind::Child => p.join_key.clone().unwrap_or_default(),
            TableKind::Global => {
                return Err(err(
                    format!("{key}.parent"),
                    format!(
                        "parent {:?} is a global table; a child's parent must be sharded or a child",
                        p.name
                    ),
                ));
            }
        };
        let parent_key = match &t.parent_key {
            None => parent_carrier,
            Some(k) if k.eq_ignore_ascii_case(&parent_carrier) => k.clone(),
            Some(k) => {
                let what = if p.kind == TableKind::Sharded {
                    "shard key"
                } else {
                    "join key"
                };
                return Err(err(
                    format!("{key}.parent_key"),
                    format!(
                        "{k:?} is not the {what} {parent_carrier:?} of parent {:?}: a child's rows can only \
                         follow the parent's shard key",
                        p.name
                    ),
                ));
            }
        };
        // Walk up to the sharded root, refusing cycles and chains through global tables.
        let mut seen = vec![ti];
        let mut cur = pi;
        let root = loop {
            let c = &tables[cur];
            match c.kind {
                TableKind::Sharded => break c,
                TableKind::Global => {
                    return Err(err(
                        format!("{key}.parent"),
                        format!(
                            "the parent chain of {:?} reaches global table {:?}, not a sharded table",
                            t.name, c.name
                        ),
                    ));
                }
                TableKind::Child => {
                    if seen.contains(&cur) {
                        return Err(err(
                            format!("{key}.parent"),
                            format!("the parent chain of {:?} is a cycle", t.name),
                        ));
                    }
                    seen.push(cur);
                    let next = c.parent.as_deref().unwrap_or_default().to_lowercase();
                    match index_of.get(&next) {
                        Some(&n) => cur = n,
                        None => {
                            return Err(err(
                                format!("{key}.parent"),
                                format!(
                                    "the parent chain of {:?} reaches unknown table {next:?}",
                                    t.name
                                ),
                            ));
                        }
                    }
                }
            }
        };
        let Some(TableDef::Sharded(root_def)) = resolved.get(&root.name.to_lowercase()) else {
            return Err(err(
                format!("{key}.parent"),
                "internal: root table not resolved",
            ));
        };
        let physical = match &t.physical_name {
            Some(p) => {
                Some(PhysicalName::parse(p).map_err(|m| err(format!("{key}.physical_name"), m))?)
            }
            None => None,
        };
        let per = root.tables_per_datanode.unwrap_or(1);
        if per > 1 && !physical.as_ref().is_some_and(PhysicalName::is_numbered) {
            return Err(err(
                format!("{key}.physical_name"),
                format!(
                    "root table {:?} has several tables per datanode; the child needs a physical_name \
                     with {{index}} or {{local}}, e.g. {}_{{index:04}}",
                    root.name, t.name
                ),
            ));
        }
        let shards: Vec<Shard> = root_def
            .shards
            .iter()
            .enumerate()
            .map(|(i, s)| Shard {
                datanode: s.datanode,
                physical_table: physical
                    .as_ref()
                    .map_or_else(|| t.name.clone(), |p| p.render(&t.name, i, i % per)),
            })
            .collect();
        unique_shards(&format!("{key}.physical_name"), &shards)?;
        Ok(ChildTable {
            name: t.name.clone(),
            parent: p.name.clone(),
            join_key,
            parent_key,
            root: root.name.clone(),
            shards,
        })
    }

    fn check_users(&self) -> Result<(), ConfigError> {
        let mut names = HashSet::new();
        for (i, u) in self.cfg.users.iter().enumerate() {
            let key = format!("users[{i}]");
            non_empty(&format!("{key}.name"), &u.name)?;
            if !names.insert(&u.name) {
                return Err(err(
                    format!("{key}.name"),
                    format!("duplicate user {:?}", u.name),
                ));
            }
            let form = crate::config::PasswordForm::of(&u.password);
            match (u.auth_plugin.as_deref(), form) {
                (None, _) => {}
                (Some("mysql_native_password"), crate::config::PasswordForm::Sha2Hash)
                | (Some("caching_sha2_password"), crate::config::PasswordForm::NativeHash) => {
                    return Err(err(
                        format!("{key}.auth_plugin"),
                        "the password is a hash of the other plugin: give the plain password \
                         or this plugin's hash",
                    ));
                }
                (Some("mysql_native_password" | "caching_sha2_password"), _) => {}
                (Some(other), _) => {
                    return Err(err(
                        format!("{key}.auth_plugin"),
                        format!(
                            "{other:?}: expected mysql_native_password or caching_sha2_password"
                        ),
                    ));
                }
            }
            if u.admin && u.password.is_empty() {
                // An admin sees every session's statements and may end any of them.
                return Err(err(
                    format!("{key}.admin"),
                    "an admin user needs a password",
                ));
            }
            if u.schemas.is_empty() {
                return Err(err(format!("{key}.schemas"), "list at least one schema"));
            }
            for (j, s) in u.schemas.iter().enumerate() {
                if !self.cfg.schemas.iter().any(|d| &d.name == s) {
                    return Err(err(
                        format!("{key}.schemas[{j}]"),
                        format!("unknown schema {s:?}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn unique_shards(key: &str, shards: &[Shard]) -> Result<(), ConfigError> {
    let mut seen = HashSet::new();
    for s in shards {
        identifier(key, &s.physical_table)?;
        if !seen.insert((s.datanode, s.physical_table.as_str())) {
            return Err(err(
                key,
                format!(
                    "two shards would both be table {:?} on the same datanode; the pattern must tell them apart",
                    s.physical_table
                ),
            ));
        }
    }
    Ok(())
}

/// The read-balancing and health settings of one datahost.
fn check_health(key: &str, h: &crate::config::DatahostDef) -> Result<(), ConfigError> {
    use crate::config::{Balance, ReadWhenPrimaryDown, ReadYourWrites};
    let hc = &h.health;
    if hc.heartbeat.is_zero() {
        return Err(err(format!("{key}.health.heartbeat"), "must be above 0"));
    }
    if hc.timeout.is_zero() {
        return Err(err(format!("{key}.health.timeout"), "must be above 0"));
    }
    if hc.down_after == 0 {
        return Err(err(
            format!("{key}.health.down_after"),
            "must be at least 1",
        ));
    }
    if hc.up_after == 0 {
        return Err(err(format!("{key}.health.up_after"), "must be at least 1"));
    }
    match h.read_your_writes {
        ReadYourWrites::PrimaryAfterWrite(d) | ReadYourWrites::Causal(d) if d.is_zero() => {
            return Err(err(
                format!("{key}.read_your_writes"),
                "the window or timeout must be above 0 (or write `off`)",
            ));
        }
        _ => {}
    }
    if h.read_when_primary_down == ReadWhenPrimaryDown::Replicas
        && (1..=h.replicas.len()).all(|i| h.read_weight(i) == 0)
    {
        return Err(err(
            format!("{key}.read_when_primary_down"),
            "replicas needs a replica with a weight above 0; without one use none",
        ));
    }
    if h.balance != Balance::PrimaryOnly {
        if h.replicas.is_empty() {
            return Err(err(
                format!("{key}.balance"),
                format!(
                    "{} needs replicas; without them use primary_only",
                    h.balance.as_str()
                ),
            ));
        }
        if (0..=h.replicas.len()).all(|i| h.read_weight(i) == 0) {
            return Err(err(
                format!("{key}.balance"),
                "every server has weight 0: nothing could take reads",
            ));
        }
    }
    Ok(())
}
