//! The row-placement check: read every row's shard key from every datanode directly (the
//! primaries named in the Shoal config, not through Shoal), compute with shoal_router's own rule
//! where the row should be, and count what is misplaced, duplicated, out of range or missing.

use std::collections::BTreeMap;

use mysql_async::Row;
use mysql_async::prelude::Queryable;
use serde::Serialize;
use shoal_router::rule::ShardValue;
use shoal_router::topology::{Shard, Topology};

use crate::error::BenchError;
use crate::interrupt;
use crate::load::Endpoint;

/// What one physical table (shard) holds.
#[derive(Debug, Clone, Serialize)]
pub struct ShardRows {
    pub datanode: String,
    pub address: String,
    pub database: String,
    pub table: String,
    pub rows: u64,
    /// Rows whose key the rule sends elsewhere.
    pub misplaced: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlacementReport {
    pub shards: Vec<ShardRows>,
    pub expected_rows: u64,
    pub found_rows: u64,
    pub misplaced: u64,
    /// Keys seen more than once (across all shards).
    pub duplicates: u64,
    /// Keys outside the inserted range, or NULL, or not a number.
    pub out_of_range: u64,
    /// Inserted keys found nowhere.
    pub missing: u64,
    /// The first problem found, described.
    pub first_problem: Option<String>,
}

impl PlacementReport {
    pub fn ok(&self) -> bool {
        self.found_rows == self.expected_rows
            && self.misplaced == 0
            && self.duplicates == 0
            && self.out_of_range == 0
            && self.missing == 0
    }

    pub fn summary(&self) -> String {
        let per: Vec<String> = self.shards.iter().map(|s| s.rows.to_string()).collect();
        let verdict = if self.ok() { "OK" } else { "FAILED" };
        format!(
            "{verdict}: {} of {} rows found on {} shard(s) [{}], misplaced {}, duplicates {}, \
             out of range {}, missing {}{}",
            self.found_rows,
            self.expected_rows,
            self.shards.len(),
            per.join(", "),
            self.misplaced,
            self.duplicates,
            self.out_of_range,
            self.missing,
            self.first_problem
                .as_ref()
                .map(|p| format!("; first: {p}"))
                .unwrap_or_default()
        )
    }
}

/// Checks that `schema.table` holds exactly the integer keys `1..=rows` in column `key`, each
/// once and each on the shard the rule names (for a table the config does not list: on the
/// schema's default datanode).
pub async fn check(
    topology: &Topology,
    schema: &str,
    table: &str,
    key: &str,
    rows: u64,
) -> Result<PlacementReport, BenchError> {
    let logical = topology
        .schema(schema)
        .ok_or_else(|| BenchError::Tool(format!("placement check: no schema {schema:?}")))?;
    let (shards, rule) = match topology.sharded_root(schema, table) {
        Some(t) => (t.shards.clone(), Some(t.rule.clone())),
        None => {
            let dn = logical.default_datanode.ok_or_else(|| {
                BenchError::Tool(format!(
                    "placement check: {schema}.{table} is neither sharded nor on a default datanode"
                ))
            })?;
            (
                vec![Shard {
                    datanode: dn,
                    physical_table: table.to_string(),
                }],
                None,
            )
        }
    };
    let mut seen = vec![0u64; (rows as usize).div_ceil(64)];
    let mut report = PlacementReport {
        shards: Vec::new(),
        expected_rows: rows,
        found_rows: 0,
        misplaced: 0,
        duplicates: 0,
        out_of_range: 0,
        missing: 0,
        first_problem: None,
    };
    // A physical table may back several shard indexes only if the config says so; group by it.
    let mut tables: BTreeMap<(usize, String), Vec<usize>> = BTreeMap::new();
    for (i, s) in shards.iter().enumerate() {
        tables
            .entry((s.datanode, s.physical_table.clone()))
            .or_default()
            .push(i);
    }
    for ((dn_id, physical), indexes) in tables {
        interrupt::check()?;
        let dn = &topology.datanodes[dn_id];
        let ep = datanode_endpoint(topology, dn_id)?;
        let mut conn = ep.connect().await?;
        let sql = format!("SELECT `{key}` FROM `{physical}`");
        let mut result = conn
            .query_iter(sql.as_str())
            .await
            .map_err(BenchError::sql(ep.label(), sql.clone()))?;
        let mut here = ShardRows {
            datanode: dn.name.clone(),
            address: topology.datahosts[dn.datahost].primary.address.clone(),
            database: dn.database.clone(),
            table: physical.clone(),
            rows: 0,
            misplaced: 0,
        };
        let mut problems: Vec<String> = Vec::new();
        result
            .for_each(|row: Row| {
                here.rows += 1;
                let value = row.get_opt::<Option<i64>, _>(0).and_then(Result::ok);
                let id = match value {
                    Some(Some(v)) if v >= 1 && (v as u64) <= rows => v as u64,
                    other => {
                        report.out_of_range += 1;
                        if problems.is_empty() {
                            problems.push(format!("key {other:?} on {}", dn.name));
                        }
                        return;
                    }
                };
                let bit = (id - 1) as usize;
                if seen[bit / 64] & (1 << (bit % 64)) != 0 {
                    report.duplicates += 1;
                    if problems.is_empty() {
                        problems.push(format!("key {id} seen twice (again on {})", dn.name));
                    }
                }
                seen[bit / 64] |= 1 << (bit % 64);
                let expected = match &rule {
                    Some(rule) => rule.route(&ShardValue::Int(id as i128)).ok(),
                    None => Some(0),
                };
                if !expected.is_some_and(|s| indexes.contains(&s)) {
                    here.misplaced += 1;
                    if problems.is_empty() {
                        let goes = expected
                            .map(|s| topology.datanodes[shards[s].datanode].name.clone())
                            .unwrap_or_else(|| "nowhere".into());
                        problems.push(format!(
                            "key {id} is on {} but the rule sends it to {goes}",
                            dn.name
                        ));
                    }
                }
            })
            .await
            .map_err(BenchError::sql(ep.label(), sql.clone()))?;
        drop(result);
        let _ = conn.disconnect().await;
        report.found_rows += here.rows;
        report.misplaced += here.misplaced;
        if report.first_problem.is_none() {
            report.first_problem = problems.pop();
        }
        report.shards.push(here);
    }
    let present: u64 = seen.iter().map(|w| u64::from(w.count_ones())).sum();
    report.missing = rows - present;
    if report.missing > 0 && report.first_problem.is_none() {
        let first = (0..rows as usize)
            .find(|&b| seen[b / 64] & (1 << (b % 64)) == 0)
            .map_or(0, |b| b + 1);
        report.first_problem = Some(format!("key {first} is on no shard"));
    }
    Ok(report)
}

/// For each physical table of `schema.table` (each shard, or the default datanode's table):
/// whether index `index` exists there, read on the datanode's primary directly. Shows that DDL
/// sent through Shoal reached every shard.
pub async fn index_present(
    topology: &Topology,
    schema: &str,
    table: &str,
    index: &str,
) -> Result<Vec<(String, bool)>, BenchError> {
    let shards: Vec<Shard> = match topology.sharded_root(schema, table) {
        Some(t) => t.shards.clone(),
        None => match topology.schema(schema).and_then(|s| s.default_datanode) {
            Some(dn) => vec![Shard {
                datanode: dn,
                physical_table: table.to_string(),
            }],
            None => return Ok(Vec::new()),
        },
    };
    let mut out = Vec::new();
    for s in shards {
        let dn = &topology.datanodes[s.datanode];
        let ep = datanode_endpoint(topology, s.datanode)?;
        let mut conn = ep.connect().await?;
        let found: Option<u64> = conn
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.STATISTICS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = ?",
                (dn.database.as_str(), s.physical_table.as_str(), index),
            )
            .await
            .map_err(BenchError::sql(
                ep.label(),
                "reading information_schema.STATISTICS",
            ))?;
        let _ = conn.disconnect().await;
        out.push((
            format!("{}/{}", dn.name, s.physical_table),
            found.unwrap_or(0) > 0,
        ));
    }
    Ok(out)
}

/// A direct connection's endpoint for datanode `dn`: its datahost's primary, in its database.
fn datanode_endpoint(topology: &Topology, dn: usize) -> Result<Endpoint, BenchError> {
    let node = &topology.datanodes[dn];
    let host = &topology.datahosts[node.datahost].primary;
    let (h, port) = host.host_port().ok_or_else(|| {
        BenchError::Tool(format!(
            "datanode {}: bad address {}",
            node.name, host.address
        ))
    })?;
    Ok(Endpoint {
        name: format!("datanode {} ({})", node.name, node.database),
        host: h.to_string(),
        port,
        user: host.user.clone(),
        password: host.password.clone(),
        db: Some(node.database.clone()),
    })
}
