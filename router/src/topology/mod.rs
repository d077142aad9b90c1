//! The validated, resolved view of a [`Config`] that the planner reads: names resolved to indexes,
//! ranges expanded, rules bound to their tables' shard counts.

mod build;

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::{Config, ConfigError, DatahostDef, ForeignKeys, ServerConfig, UserDef};
use crate::rule::ShardRule;

/// Index into [`Topology::datanodes`].
pub type DatanodeId = usize;

/// A map by name, hashed with foldhash: looked up for every statement, and its keys come from
/// the configuration (SipHash's resistance to chosen keys buys nothing here).
pub type NameMap<V> = HashMap<String, V, foldhash::fast::RandomState>;

#[derive(Debug, Clone)]
pub struct Topology {
    pub server: ServerConfig,
    pub datanodes: Vec<Datanode>,
    /// Key: schema name as configured.
    pub schemas: NameMap<LogicalSchema>,
    pub users: Vec<UserDef>,
    pub datahosts: Vec<DatahostDef>,
}

/// One physical database on one datahost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datanode {
    pub name: String,
    /// Index into [`Topology::datahosts`].
    pub datahost: usize,
    pub database: String,
}

#[derive(Debug, Clone)]
pub struct LogicalSchema {
    pub name: String,
    /// Where unlisted tables live.
    pub default_datanode: Option<DatanodeId>,
    /// Key: lower-cased table name.
    pub tables: NameMap<TableDef>,
    /// Which FOREIGN KEYs DDL may declare (`schemas[].foreign_keys`).
    pub foreign_keys: ForeignKeys,
    /// How transactions over several datanodes commit (`schemas[].transactions`).
    pub transactions: crate::config::Transactions,
}

impl LogicalSchema {
    /// Case-insensitive lookup of a listed table.
    pub fn table(&self, name: &str) -> Option<&TableDef> {
        if name.bytes().any(|b| b.is_ascii_uppercase()) || !name.is_ascii() {
            self.tables.get(&name.to_lowercase())
        } else {
            self.tables.get(name)
        }
    }
}

#[derive(Debug, Clone)]
pub enum TableDef {
    Sharded(ShardedTable),
    Global(GlobalTable),
    Child(ChildTable),
}

impl TableDef {
    pub fn name(&self) -> &str {
        match self {
            TableDef::Sharded(t) => &t.name,
            TableDef::Global(t) => &t.name,
            TableDef::Child(t) => &t.name,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ShardedTable {
    pub name: String,
    /// Column name, as configured.
    pub shard_key: String,
    pub rule: Arc<ShardRule>,
    /// The rule returns an index into this.
    pub shards: Vec<Shard>,
    /// Fills the shard key of INSERTs that leave it out.
    pub sequence: Option<Sequence>,
}

/// A global sequence resolved: where its table lives and how many ids a segment holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequence {
    pub datanode: DatanodeId,
    pub step: u64,
}

/// Where one shard of a table lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    pub datanode: DatanodeId,
    /// The table's name in that datanode's database (the logical name for database-per-shard).
    pub physical_table: String,
}

#[derive(Debug, Clone)]
pub struct GlobalTable {
    pub name: String,
    pub datanodes: Vec<DatanodeId>,
}

/// An ER child: its rows live with the parent rows they join to.
#[derive(Debug, Clone)]
pub struct ChildTable {
    pub name: String,
    /// The parent table's name (a sharded table, or itself a child).
    pub parent: String,
    /// This table's column ...
    pub join_key: String,
    /// ... equal to this parent column (the parent's shard key, or its join key for a child
    /// parent), so `join_key` always carries the root's shard key value.
    pub parent_key: String,
    /// The sharded table at the top of the parent chain.
    pub root: String,
    /// Parallel to the root's shards: shard `i` of the root holds its children in `shards[i]`.
    pub shards: Vec<Shard>,
}

impl Topology {
    /// Validates `cfg` and resolves it. Errors name the offending key, e.g.
    /// `schemas[0].tables[2].rule: unknown rule "mod5"`.
    pub fn build(cfg: &Config) -> Result<Topology, ConfigError> {
        build::Builder::new(cfg).build()
    }

    /// Reads, parses and validates a config file.
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Topology, ConfigError> {
        let path = path.as_ref();
        Topology::build(&Config::load(path)?).map_err(|e| e.context(path.display()))
    }

    /// For a child table, the sharded table at the top of its parent chain (whose rule, applied
    /// to the child's `join_key`, gives the child row's shard); for a sharded table, itself.
    pub fn sharded_root(&self, schema: &str, table: &str) -> Option<&ShardedTable> {
        let s = self.schemas.get(schema)?;
        match s.table(table)? {
            TableDef::Sharded(t) => Some(t),
            TableDef::Child(c) => match s.table(&c.root)? {
                TableDef::Sharded(t) => Some(t),
                _ => None,
            },
            TableDef::Global(_) => None,
        }
    }

    pub fn schema(&self, name: &str) -> Option<&LogicalSchema> {
        self.schemas.get(name)
    }

    pub fn user(&self, name: &str) -> Option<&UserDef> {
        self.users.iter().find(|u| u.name == name)
    }

    pub fn datanode_by_name(&self, name: &str) -> Option<DatanodeId> {
        self.datanodes.iter().position(|d| d.name == name)
    }
}

// The proxy shares one topology across threads (behind an ArcSwap).
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Topology>();
};
