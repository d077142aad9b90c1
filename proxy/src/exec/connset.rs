//! The backend connections one session holds with the router: at most one per datanode,
//! kept while a transaction, a pin or the session's own reuse wants them. Each records the
//! server it is on (the datahost's primary or one of its replicas).

use std::time::Instant;

use shoal_router::topology::DatanodeId;

use crate::backend::pool::PooledConn;
use crate::runtime::admission::Admitted;

/// One datanode's connection and what ties it to the session.
pub struct Held {
    pub dn: DatanodeId,
    /// The server (index in `Backends::servers` and `Shared::pools`) it is connected to.
    pub server: usize,
    pub conn: PooledConn,
    /// The session's explicit BEGIN (or, for an XA branch, XA START) was sent here (or is
    /// about to be, with the statement: `begin_deferred`, `begin_unread`).
    pub txn_begun: bool,
    /// The BEGIN (or XA START) that starts the transaction here, kept to be written just
    /// before the statement that needs it, so that both travel in one round trip
    /// ([`Held::write_begin`]).
    pub begin_deferred: Option<Vec<u8>>,
    /// That BEGIN was written ahead of the statement: its reply comes first.
    pub begin_unread: bool,
    /// An XA branch of the session's transaction is open here (see `exec::xa`).
    pub xa: bool,
    /// A statement that may write ran here since the branch started (read-only branches are
    /// not prepared).
    pub wrote: bool,
    /// State the pool cannot replay (temporary tables, locks...).
    pub sticky: bool,
    /// Every savepoint of the session's transaction is set here ([`crate::exec`]'s
    /// savepoints).
    pub savepoints_set: bool,
    /// It holds the session's LOCK TABLES locks on this datanode's tables.
    pub table_locks: bool,
    /// Those tables, by qualified physical name (what a FLUSH TABLES under the locks flushes).
    pub locked_tables: Vec<String>,
    /// The session's statement that last used it ([`ConnSet::statement`]).
    pub used_in: u64,
}

impl Held {
    pub fn new(dn: DatanodeId, server: usize, mut conn: PooledConn) -> Self {
        // What an earlier holder's statements did is not this session's.
        conn.txn_error = None;
        Held {
            dn,
            server,
            conn,
            txn_begun: false,
            begin_deferred: None,
            begin_unread: false,
            xa: false,
            wrote: false,
            sticky: false,
            savepoints_set: false,
            table_locks: false,
            locked_tables: Vec::new(),
            used_in: 0,
        }
    }

    /// The last response said a transaction is open here, or autocommit is off (whatever
    /// started it: BEGIN, a statement with autocommit off, a multi-statement text).
    pub fn in_trans(&self) -> bool {
        self.conn.transactional()
    }

    /// It carries part of the session's transaction: losing it loses that part. (Autocommit
    /// off alone is not a transaction: nothing is lost with a connection that has none open.)
    pub fn in_session_transaction(&self) -> bool {
        self.txn_begun || self.xa || self.conn.in_transaction()
    }

    /// Writes the deferred BEGIN, if any, ahead of the statement about to be written here.
    pub fn write_begin(&mut self) {
        if let Some(begin) = self.begin_deferred.take() {
            self.conn
                .io
                .write_command(crate::wire::command::COM_QUERY, &begin);
            self.begin_unread = true;
        }
    }

    /// The statement the BEGIN was deferred for is not sent: neither is the BEGIN, and the
    /// transaction is not started here (the next statement starts it).
    pub fn cancel_begin(&mut self) {
        if self.begin_deferred.take().is_some() {
            self.txn_begun = false;
            self.xa = false;
            self.wrote = false;
        }
    }

    /// Whether giving this connection back would lose something the session relies on.
    pub fn pinned(&self) -> bool {
        self.txn_begun || self.in_trans() || self.sticky || self.table_locks
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
    /// Where the running statement's connections go.
    pub want: Want,
    /// The running statement writes (read-your-writes starts its window on the primary).
    pub writing: bool,
    /// The running statement is not known to be a plain read: the XA branches it touches
    /// count as written.
    pub maybe_writes: bool,
    /// The running statement must run outside any XA branch (SET, SHOW, DDL, LOCK TABLES...):
    /// with autocommit off, no branch is started for it.
    pub no_branch: bool,
    /// Read-your-writes: per datahost, when the session last wrote there and the GTID of its
    /// last write, with the servers known to have applied it.
    pub writes: Vec<LastWrite>,
    /// The datanodes whose branch of the session's XA transaction (its current gtrid) had an
    /// `XA START` sent, whatever came of it.
    pub xa_started: Vec<DatanodeId>,
    /// A server the running statement must not read from (it just failed).
    pub avoid: Option<usize>,
    /// The running statement's deadline (`server.query_timeout`): each connection it touches
    /// is armed with it (see `backend::interrupt`). `None` when the setting is off.
    pub deadline: Option<tokio::time::Instant>,
    /// The session's transaction can no longer commit: a branch was rolled back by its server
    /// or lost with its connection ([`super::fate`] ends the rest).
    pub doom: Option<super::txn::fate::Doom>,
    /// The transaction was rolled back for `doom` after a statement that succeeded: the
    /// client has not been told yet, and is at its next statement.
    pub untold: Option<super::txn::fate::Doom>,
    /// The running statement is not the last of its multi-statement text: the last packet of
    /// its response says more results follow ([`super::multi`]).
    pub more_results: bool,
    /// The statements after the running one that go to its datanode in the same request
    /// (`;`-joined SQL, [`super::multi`]), and whether more results follow theirs: taken by
    /// the one-datanode path, which appends them.
    pub batch_tail: Option<(String, bool)>,
}

/// Where a statement's connections go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Want {
    /// The datahost's primary (anything but a plain read).
    #[default]
    Primary,
    /// A plain read; `hinted` when `/*+ shoal:replica */` asked for a replica.
    Read { hinted: bool },
}

/// The session's last write on one datahost.
#[derive(Debug, Clone)]
pub struct LastWrite {
    pub datahost: usize,
    pub at: Instant,
    /// The replication position covering the session's writes there.
    pub gtid: Option<String>,
    /// Replicas a `MASTER_GTID_WAIT` showed have applied `gtid`.
    pub applied_on: Vec<usize>,
}

impl ConnSet {
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    pub fn position(&self, dn: DatanodeId) -> Option<usize> {
        self.held.iter().position(|h| h.dn == dn)
    }

    /// The index of datanode `dn`'s connection, which the running statement has touched. Gone
    /// only if it broke since: the statement fails as with a lost backend, never a panic.
    pub fn touched(&self, dn: DatanodeId) -> crate::error::Result<usize> {
        self.position(dn)
            .ok_or_else(crate::error::Error::lost_backend)
    }

    pub fn get_mut(&mut self, dn: DatanodeId) -> Option<&mut Held> {
        self.held.iter_mut().find(|h| h.dn == dn)
    }

    pub fn push(&mut self, h: Held) -> usize {
        self.held.push(h);
        self.held.len() - 1
    }

    /// Removes datanode `dn`'s connection because it broke or is left in an unknown state (it
    /// is closed when dropped): if it carried part of the session's transaction, the
    /// transaction is doomed (see [`super::fate`]).
    pub fn remove(&mut self, dn: DatanodeId) -> Option<Held> {
        let i = self.position(dn)?;
        Some(self.take(i))
    }

    /// [`Self::remove`] by index.
    pub fn take(&mut self, i: usize) -> Held {
        let h = self.held.remove(i);
        if h.in_session_transaction() && self.doom.is_none() {
            self.doom = Some(super::txn::fate::Doom::lost(h.dn));
        }
        h
    }

    /// Removes held connection `i` to give it back (or reset it): nothing of the transaction
    /// is on it, or the transaction is being ended.
    pub fn release_slot(&mut self, i: usize) -> Held {
        self.held.remove(i)
    }

    /// [`Self::release_slot`] by datanode, the connection dropped (closed).
    pub fn release_slot_of(&mut self, dn: DatanodeId) {
        if let Some(i) = self.position(dn) {
            self.held.remove(i);
        }
    }

    /// The session's last write on `datahost`, if it wrote there.
    pub fn last_write(&mut self, datahost: usize) -> Option<&mut LastWrite> {
        self.writes.iter_mut().find(|w| w.datahost == datahost)
    }

    /// Records a write on `datahost`, with its GTID when the server reported one (kept with
    /// the earlier ones as the position covering them all, see `gtid_position`). `None` is
    /// a write whose GTID is not known (yet: a statement inside a transaction is only given
    /// one at COMMIT): the GTID of an earlier write no longer covers the session's writes, so
    /// until a GTID is known again causal reads go to the primary.
    pub fn note_write(&mut self, datahost: usize, gtid: Option<String>) {
        let at = Instant::now();
        match self.last_write(datahost) {
            Some(w) => {
                w.at = at;
                // Two connections on one datahost commit concurrently: the GTID read last
                // need not be the one committed last, so the position covers both.
                w.gtid = match (w.gtid.take(), gtid) {
                    (Some(old), Some(new)) => Some(super::gtid_position::covering(&old, &new)),
                    (_, gtid) => gtid,
                };
                w.applied_on.clear();
            }
            None => self.writes.push(LastWrite {
                datahost,
                at,
                gtid,
                applied_on: Vec::new(),
            }),
        }
    }

    /// Whether any held connection is inside a transaction.
    pub fn in_transaction(&self) -> bool {
        self.held.iter().any(|h| h.txn_begun || h.in_trans())
    }
}
