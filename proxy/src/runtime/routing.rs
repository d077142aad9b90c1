//! What the process keeps for sharded serving besides the configuration: the state the
//! executor shares between sessions, per configuration snapshot (collations, the catalog, the
//! logical names) or across reloads (the sequences' segments, admission while its limits
//! stay the same).

use std::sync::Arc;

use crate::config::Sharding;

use super::admission::{self, Admission};
use super::catalog::Catalog;
use super::collations::Collations;
use super::names::LogicalNames;
use super::sequences::Sequences;

/// Sharded serving as it runs: the configuration's [`Sharding`] (read through this value:
/// the executor takes both as one) and the state kept for it.
pub struct Routing {
    pub sharding: Arc<Sharding>,
    /// Segments of global sequences held by this process.
    /// (Shared with the snapshots after a reload: the segments stay this process's.)
    pub sequences: Arc<Sequences>,
    /// Sessions are admitted here before they take connections (no pool deadlocks).
    /// (Shared with the snapshots after a reload while its limits are the same, so that the
    /// sessions of both count against one limit.)
    pub admission: Arc<Admission>,
    /// Declared collations of physical columns, for merging strings.
    pub collations: Collations,
    /// The logical `information_schema`: built rows and the connection evaluating statements.
    pub catalog: Catalog,
    /// Logical names of physical databases and tables, for result column definitions and
    /// backend errors.
    pub names: LogicalNames,
}

impl std::ops::Deref for Routing {
    type Target = Sharding;

    fn deref(&self) -> &Sharding {
        &self.sharding
    }
}

impl Routing {
    /// The state of `sharding`, taking over `old`'s sequences, and its admission when the
    /// limits are the same.
    pub fn new(sharding: Arc<Sharding>, old: Option<&Routing>) -> Routing {
        let pools: Vec<(usize, usize)> = admission::needs(&sharding.topology)
            .iter()
            .zip(&sharding.hosts)
            .map(|(need, (_, pool))| (pool.max_size, *need))
            .collect();
        let timeout = sharding
            .hosts
            .iter()
            .map(|(_, p)| p.acquire_timeout)
            .max()
            .unwrap_or_default();
        let mut admission = Arc::new(Admission::new(&pools, timeout));
        tracing::info!(
            sessions = admission.capacity(),
            "sessions holding backend connections at once (pool.max / connections one \
             session can need, on the tightest datahost)"
        );
        let mut sequences = Default::default();
        if let Some(o) = old {
            // The global sequences' segments this process holds stay valid: a reload refuses
            // to change an existing table's sequence.
            sequences = o.sequences.clone();
            if admission.same_limits(&o.admission) {
                admission = o.admission.clone();
            }
        }
        Routing {
            names: LogicalNames::new(&sharding.topology),
            sharding,
            sequences,
            admission,
            collations: Default::default(),
            catalog: Default::default(),
        }
    }
}
