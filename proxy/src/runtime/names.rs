//! The logical names of the physical ones a topology stores its schemas under, computed once
//! per configuration snapshot: result column definitions ([`columns`]) and backend error
//! messages ([`messages`]) are given them instead of the datanodes' own.

mod columns;
mod messages;

use std::collections::HashMap;

use shoal_router::topology::Topology;

pub use columns::RenameMemo;

/// Logical names of every datanode's physical ones.
#[derive(Debug, Default)]
pub struct LogicalNames {
    /// Per datanode, for column definitions.
    datanodes: Vec<columns::Datanode>,
    /// Unique per build: what a [`RenameMemo`] filled from it is keyed by, so that a reloaded
    /// topology is never answered from a memo of the one before.
    id: u64,
    /// Physical database -> the logical schemas stored in it (sorted; a database no schema
    /// stores under another name is absent), for error messages.
    databases: HashMap<String, Vec<String>>,
    /// Physical table -> logical table (table-per-shard tables only), for error messages.
    tables: HashMap<String, String>,
}

impl LogicalNames {
    pub fn new(topology: &Topology) -> Self {
        let mut names = LogicalNames::default();
        names.read_columns(topology);
        names.read_messages(topology);
        names
    }
}
