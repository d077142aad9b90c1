//! The cursor's connections: a datanode's connection for a statement (touched: held from
//! then on, aligned to the session's state, inside its transaction), admitted to the pools,
//! acquired, and given back when the statement, the transaction or the pools want it.

use super::*;

impl Cursor {
    /// The connection to datanode `dn`, held from now on, in the session's state: opened from
    /// its datahost's pool if not held yet, its variables aligned, and inside the session's
    /// transaction if one is open. Returns its index in `self.conns`.
    pub(crate) async fn touch(&mut self, routing: &Routing, dn: DatanodeId) -> Result<usize> {
        self.touch_for(routing, dn, Use::Text).await
    }

    /// A connection of Shoal's own to datanode `dn`'s decided primary, in a clean state in the
    /// datanode's database (a pooled connection carries another session's variables): for
    /// what Shoal reads or writes on its own behalf (a sequence's segment, a table's column
    /// order, the catalog), never part of the client's transaction.
    pub(crate) async fn own_primary_connection(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
    ) -> Result<crate::backend::pool::PooledConn> {
        let node = &routing.topology.datanodes[dn];
        if let Some(e) = self.rt.backends.primary_refusal(node.datahost, &node.name) {
            return Err(e);
        }
        let pool = self.rt.pools[self.rt.backends.primary(node.datahost)].clone();
        if pool.is_full() {
            self.release_stale();
        }
        let mut conn = pool
            .acquire(Wanted {
                wire: self.routed_wire(),
                prefer: 0,
                schema: Some(&node.database),
                multi_statements: false,
            })
            .await?;
        let clean = crate::backend::state::SessionState::default();
        align_to(&clean, Some(&node.database), &mut conn).await?;
        Ok(conn)
    }

    /// [`Self::touch`] for a use that may not need the connection in `dn`'s database.
    pub(crate) async fn touch_for(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
        how: Use,
    ) -> Result<usize> {
        self.touch_ahead(routing, dn, how, false).await
    }

    /// [`Self::touch_for`]; `begin_ahead`: the caller writes its statement next and reads
    /// the reply with [`Self::relay_from`], so a BEGIN the transaction needs here may be
    /// written just ahead of it instead of sent alone (one round trip for the two).
    pub(crate) async fn touch_ahead(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
        how: Use,
        begin_ahead: bool,
    ) -> Result<usize> {
        // Nothing more runs in a transaction a lost branch has doomed.
        self.check_doom()?;
        if let Some(i) = self.conns.position(dn)
            && self.conns.held[i].conn.closed_by_server()
        {
            let h = self.conns.take(i);
            self.rt.backends.servers[h.server].health.note_error();
            if h.table_locks {
                // Its locks are gone: the session's others go too, rather than the session
                // going on with some tables locked and some not.
                let _ = cold(self.unlock_tables()).await;
            }
            if h.pinned() {
                // A transaction or pinned state went with it: say so, as a direct connection
                // would, instead of carrying on without it.
                cold(self.abandon_transaction()).await;
                return Err(Error::lost_backend());
            }
            // Otherwise nothing of the session's was on it (a connection kept from an earlier
            // autocommit statement, perhaps on a replica this statement does not go to, or
            // from before the session's BEGIN, which had not reached it): a fresh one
            // replaces it, and the statement never fails for a server it does not need.
        }
        if !self.table_locks.is_empty() && !self.table_locks.contains(&dn) {
            // Under LOCK TABLES only the locked tables can be used, as on one server; any
            // other connection would read and write without the session's locks.
            return Err(table_locks::not_locked(routing, dn));
        }
        let node = &routing.topology.datanodes[dn];
        let mut chosen = None;
        if how == Use::AnyDatabase
            && self.conns.position(dn).is_none()
            && self.txn_begin.is_none()
            && !self.conns.in_transaction()
        {
            // The statement runs the same whatever the connection's database: the session's
            // connection to the same server serves this datanode too, instead of one more
            // connection (and MariaDB thread) per datanode.
            let server = self.target_server(routing, dn)?;
            chosen = Some(server);
            let statement = self.conns.statement;
            // A read on a replica that must first wait there for the session's write gets a
            // connection through `acquire_for`, which waits: a relabelled one would not.
            if !self.causal_wait_pending(server) {
                for h in self.conns.held.iter_mut() {
                    if h.server == server
                        && h.used_in != statement
                        && !h.pinned()
                        && !h.conn.closed_by_server()
                    {
                        h.dn = dn;
                        break;
                    }
                }
            }
        } else if let Some(i) = self.conns.position(dn) {
            // Each statement picks its server; a connection on another one is given back
            // (unless the session is tied to it, or this statement already used it).
            let h = &self.conns.held[i];
            if h.used_in != self.conns.statement && !h.pinned() {
                let server = self.target_server(routing, dn)?;
                chosen = Some(server);
                if server != self.conns.held[i].server {
                    let h = self.conns.release_slot(i);
                    if self.rt.backends.servers[h.server].health.is_up() {
                        h.conn.release();
                    }
                }
            }
        }
        // Kept from an earlier statement, with nothing of the session's on it.
        let kept = self.conns.position(dn).is_some_and(|i| {
            let h = &self.conns.held[i];
            h.used_in != self.conns.statement && !h.pinned()
        });
        let i = match self.conns.position(dn) {
            Some(i) => i,
            None => {
                if self.may_hold_and_wait() {
                    cold(self.admit(routing)).await?;
                }
                let (server, conn) = cold(self.acquire_for(routing, dn, chosen)).await?;
                let i = self.conns.push(Held::new(dn, server, conn));
                self.publish_backends();
                i
            }
        };
        if self.conns.writing
            && self.conns.held[i].server == self.rt.backends.primary(node.datahost)
        {
            self.conns.note_write(node.datahost, None);
        }
        let h = &mut self.conns.held[i];
        h.used_in = self.conns.statement;
        if let Some(at) = self.conns.deadline {
            // Before the replay below: a server that stops answering bounds it too.
            h.conn.arm(at);
        }
        // An execute finds (or prepares) its statement in the datanode's database itself.
        let schema = match how {
            Use::Text => Some(node.database.as_str()),
            Use::AnyDatabase => None,
        };
        let aligned = (schema.is_none() || h.conn.state.schema.as_deref() == schema)
            && h.conn.state.vars == self.want.vars
            && h.conn.state.last_insert_id == self.want.last_insert_id
            && h.conn.state.multi_statements == self.want.multi_statements;
        let mut result = Ok(());
        if !aligned {
            result = cold(align_to(&self.want, schema, &mut h.conn)).await;
        } else if !h.conn.state.vars.same(&self.want.vars) {
            // Equal but apart (both learnt the same change): share, so the next statements
            // compare a pointer.
            h.conn.state.vars = self.want.vars.clone();
        }
        self.conns.held[i].begin_deferred = None;
        if result.is_ok()
            && let Some(start) = self.branch_start(routing, i, dn)
        {
            let (begin, xa) = (start.sql, start.xa);
            // The BEGIN travels with the statement (one round trip) when the caller writes
            // the statement next, and it cannot fail: the connection is in no transaction (a
            // BEGIN or an XA START with a fresh xid fails only there), the xid was never
            // started here, and no deadline can interrupt it. Savepoints to replay need it
            // first.
            let defer = begin_ahead
                && !start.again
                && self.savepoints.is_empty()
                && self.conns.deadline.is_none();
            let h = &mut self.conns.held[i];
            let defer = defer && !h.conn.in_transaction();
            result = match h.conn.sql_bytes(&begin) {
                Ok(bytes) if defer => {
                    h.begin_deferred = Some(bytes.into_owned());
                    Ok(())
                }
                Ok(bytes) => {
                    let bytes = bytes.into_owned();
                    cold(h.conn.command(COM_QUERY, &bytes)).await.map(|_| ())
                }
                Err(e) => Err(e),
            };
            if result.is_ok() {
                h.txn_begun = true;
                h.xa = xa;
                h.wrote = false;
            }
        }
        if result.is_ok() && self.conns.maybe_writes {
            result = self.check_plain_write(routing, dn);
            if result.is_ok() {
                self.conns.held[i].wrote = true;
            }
        }
        if result.is_ok() && !self.savepoints.is_empty() {
            result = cold(self.replay_savepoints(i)).await;
        }
        if result.is_err() {
            self.conns.held[i].cancel_begin();
        }
        let node = &routing.topology.datanodes[dn];
        match result {
            Ok(()) => Ok(i),
            Err(e @ Error::Reply { .. }) => Err(e.on_datanode(&node.name)),
            Err(e) => {
                let h = self.conns.take(i);
                if kept && matches!(e, Error::BackendIo(_)) {
                    // It died unseen (its server killed as the statement came): it held
                    // nothing, so a fresh connection replaces it, once (a read goes elsewhere).
                    self.rt.backends.servers[h.server].health.note_error();
                    if h.server != self.rt.backends.primary(node.datahost) {
                        self.conns.avoid = Some(h.server);
                    }
                    return Box::pin(self.touch_ahead(routing, dn, how, begin_ahead)).await;
                }
                Err(e)
            }
        }
    }

    /// A connection for datanode `dn` on the server the running statement should use. A
    /// replica that cannot be reached (or has not caught up with a causal read) is passed
    /// over for another server of the read set, then the primary.
    pub(super) async fn acquire_for(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
        mut chosen: Option<usize>,
    ) -> Result<(usize, crate::backend::pool::PooledConn)> {
        let node = &routing.topology.datanodes[dn];
        // The primary could not be reached, for a read that then looked for a replica.
        let mut primary_lost: Option<Error> = None;
        for attempt in 0..3 {
            let server = match chosen.take() {
                Some(s) => s,
                None => self.target_server(routing, dn)?,
            };
            if server == self.rt.backends.primary(node.datahost)
                && let Some(e) = primary_lost.take()
            {
                // No replica can take the read: the primary's error, without connecting again.
                return Err(e);
            }
            let pool = self.rt.pools[server].clone();
            if pool.is_full() {
                // Connections kept from earlier statements go back first. A session keeps one
                // per datanode it touched while the pool has room; once it is full, keeping
                // them would make every acquire wait or switch a connection's database.
                self.release_stale();
            }
            let got = pool
                .acquire(Wanted {
                    wire: self.routed_wire(),
                    prefer: 0,
                    schema: Some(&node.database),
                    multi_statements: self.want.multi_statements,
                })
                .await;
            let primary = self.rt.backends.primary(node.datahost);
            match got {
                Ok(mut conn) => {
                    if server == primary || self.causal_ready(server, &mut conn).await {
                        return Ok((server, conn));
                    }
                    conn.release();
                    // Not caught up in time: the primary has the session's write.
                    self.conns.want = Want::Primary;
                }
                Err(e) if server != primary && attempt < 2 => {
                    debug!(server, error = %e, "replica unreachable: reading elsewhere");
                    self.rt.backends.servers[server].health.note_error();
                    self.conns.avoid = Some(server);
                }
                Err(e) if attempt < 2 && self.read_may_leave_primary(node.datahost, &e) => {
                    // `read_when_primary_down: replicas`: the primary is lost from now on (not
                    // once the monitor's checks agree), and the read goes to a replica that
                    // kept what the primary sent it.
                    debug!(server, error = %e, "primary unreachable: reading on a replica");
                    self.rt.backends.servers[server].health.note_unreachable();
                    primary_lost = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        let server = self.target_server(routing, dn)?;
        let conn = self.rt.pools[server]
            .acquire(Wanted {
                wire: self.routed_wire(),
                prefer: 0,
                schema: Some(&node.database),
                multi_statements: self.want.multi_statements,
            })
            .await?;
        Ok((server, conn))
    }

    /// Whether a failure `e` to connect to datahost `dh`'s primary sends the running statement
    /// to a replica: a plain read outside a transaction, on a datahost with
    /// `read_when_primary_down: replicas`, that could not connect (not a full pool).
    pub(super) fn read_may_leave_primary(&self, dh: usize, e: &Error) -> bool {
        self.rt.backends.hosts[dh].read_when_primary_down == ReadWhenPrimaryDown::Replicas
            && matches!(self.conns.want, Want::Read { .. })
            && !self.in_transaction_now()
            && e.as_reply().is_some_and(|(code, _, _)| code == 1429)
    }

    /// Gives held connections back to their pools: all of them (`all`, resetting pinned ones
    /// first) or, between statements, the unpinned ones whose pool has sessions waiting.
    pub(crate) async fn release_conns(&mut self, all: bool) {
        self.release_where(all, false).await;
    }

    /// Gives back, for a session idle a while (`session::nudge`), the unpinned connections
    /// whose pool has none to give (see `BackendPool::short`), and those `release_conns(false)`
    /// would.
    pub(crate) async fn release_idle(&mut self) {
        self.release_where(false, true).await;
    }

    async fn release_where(&mut self, all: bool, idle: bool) {
        let before = self.conns.held.len();
        let mut i = 0;
        while i < self.conns.held.len() {
            let h = &self.conns.held[i];
            let wanted = all
                || self.give_back(h)
                || (idle && !h.pinned() && self.rt.pools[h.server].short());
            if !wanted {
                i += 1;
                continue;
            }
            if !all {
                self.rt.pools[h.server].note_reclaimed();
            }
            let mut h = self.conns.release_slot(i);
            if h.xa {
                // An open XA branch: closing the connection rolls it back (a reset would not
                // end it cleanly).
                continue;
            }
            if h.pinned() {
                let reset =
                    crate::timers::timeout(self.rt.pool.settings().connect_timeout, h.conn.reset())
                        .await;
                if !matches!(reset, Ok(Ok(()))) {
                    // Dropping closes it; the server rolls back and frees everything.
                    continue;
                }
            }
            h.conn.release();
        }
        self.settle_admission();
        if self.conns.held.len() != before {
            self.publish_backends();
        }
    }

    /// Whether held connection `h` goes back between statements: nothing pins it, and other
    /// sessions wait for its pool or for admission (see [`admission`]).
    fn give_back(&self, h: &Held) -> bool {
        !h.pinned() && (self.rt.pools[h.server].reclaim_requested() || self.contended())
    }

    /// Whether sessions wait for admission.
    fn contended(&self) -> bool {
        self.rt.admission_contended()
    }

    /// Whether, between commands, a held connection is to go back because other sessions
    /// wait for it: then `release_conns(false)` gives those back. The check is synchronous
    /// and allocation-free; the release (which may reset a connection) runs only then.
    pub(crate) fn release_wanted(&self) -> bool {
        self.conns.held.iter().any(|h| self.give_back(h))
    }

    /// Gives back this session's connections that the running statement has not used and
    /// nothing pins, before the session waits for a pool: a session must not wait while it
    /// keeps connections from earlier statements, on any datahost (two sessions each keeping
    /// one pool's last connection while waiting for the other's would wait until the acquire
    /// timeout), nor wait on itself where a pool is smaller than what one session can need.
    pub(crate) fn release_stale(&mut self) {
        let statement = self.conns.statement;
        let before = self.conns.held.len();
        let mut i = 0;
        while i < self.conns.held.len() {
            let h = &self.conns.held[i];
            if h.used_in != statement && !h.pinned() {
                self.conns.release_slot(i).conn.release();
            } else {
                i += 1;
            }
        }
        if self.conns.held.len() != before {
            self.publish_backends();
        }
    }

    /// Whether taking another connection now could make this session wait while it holds
    /// one it cannot give back (a transaction's, a pinned one, or one the running statement
    /// uses): only such sessions need admission (see [`admission`]). A lone autocommit
    /// statement on one datanode never does, and stays off the admission path.
    fn may_hold_and_wait(&self) -> bool {
        self.txn_begin.is_some()
            || self.status & AUTOCOMMIT == 0
            || self
                .conns
                .held
                .iter()
                .any(|h| h.pinned() || h.used_in == self.conns.statement)
    }

    /// Admits the session (see [`admission`]). Statements with several targets call it before
    /// touching the first, so that they wait, if they must, holding nothing of their own;
    /// connections kept from earlier statements are given back before waiting.
    pub(crate) async fn admit(&mut self, routing: &Routing) -> Result<()> {
        if self.conns.admitted.is_some() {
            return Ok(());
        }
        if !routing.admission.would_admit() {
            self.release_stale();
        }
        self.conns.admitted = Some(routing.admission.enter().await?);
        Ok(())
    }

    /// Gives the admission back once the session holds no connection.
    pub(crate) fn settle_admission(&mut self) {
        if self.conns.held.is_empty() {
            self.conns.admitted = None;
        }
    }

    /// A connection of an open transaction broke: the others roll back, the transaction ends.
    pub(super) async fn abandon_transaction(&mut self) {
        if self.txn_begin.is_none() && !self.conns.in_transaction() {
            return;
        }
        let _ = self.end_transaction(false).await;
    }
}
