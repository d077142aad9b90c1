//! The backend connections one session holds with the router: at most one per datanode,
//! kept while a transaction, a pin or the session's own reuse wants them.

use shoal_router::topology::DatanodeId;

use super::admission::Admitted;
use crate::backend::pool::PooledConn;

/// One datanode's connection and what ties it to the session.
pub struct Held {
    pub dn: DatanodeId,
    pub conn: PooledConn,
    /// The session's explicit BEGIN was sent here.
    pub txn_begun: bool,
    /// The last response said a transaction is open (or autocommit is off).
    pub in_trans: bool,
    /// State the pool cannot replay (temporary tables, locks...).
    pub sticky: bool,
    /// The session's statement that last used it ([`ConnSet::statement`]).
    pub used_in: u64,
}

impl Held {
    pub fn new(dn: DatanodeId, conn: PooledConn) -> Self {
        Held {
            dn,
            conn,
            txn_begun: false,
            in_trans: false,
            sticky: false,
            used_in: 0,
        }
    }

    /// Whether giving this connection back would lose something the session relies on.
    pub fn pinned(&self) -> bool {
        self.txn_begun || self.in_trans || self.sticky
    }
}

/// Held connections, keyed by datanode (a handful at most: a linear search is fastest).
#[derive(Default)]
pub struct ConnSet {
    pub held: Vec<Held>,
    /// Counts the session's statements, so that connections the running statement has not
    /// used can be told apart from those it holds for its own targets.
    pub statement: u64,
    /// The session's admission (see [`super::admission`]), held with any connection.
    pub admitted: Option<Admitted>,
}

impl ConnSet {
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    pub fn position(&self, dn: DatanodeId) -> Option<usize> {
        self.held.iter().position(|h| h.dn == dn)
    }

    pub fn get_mut(&mut self, dn: DatanodeId) -> Option<&mut Held> {
        self.held.iter_mut().find(|h| h.dn == dn)
    }

    pub fn push(&mut self, h: Held) -> usize {
        self.held.push(h);
        self.held.len() - 1
    }

    pub fn remove(&mut self, dn: DatanodeId) -> Option<Held> {
        let i = self.position(dn)?;
        Some(self.held.remove(i))
    }

    /// Whether any held connection is inside a transaction.
    pub fn in_transaction(&self) -> bool {
        self.held.iter().any(|h| h.txn_begun || h.in_trans)
    }
}
