//! A statement on one datanode: sent (the client's own bytes when the router left the text as
//! it was), its response relayed to the client frame by frame, and what it changed learned.

use super::reader::read_write_result;
use super::*;

/// How relaying one datanode's response ended ([`Cursor::relay_from`]).
pub(crate) enum Relayed {
    /// The response went to the client (an error reply from the server included).
    Done(Outcome),
    /// The connection broke; the client was told so and the transaction abandoned.
    Lost,
    /// A read's server failed before anything reached the client, and the caller said it
    /// may run the read elsewhere: nothing was said to the client.
    Unsent { server: usize },
    /// The BEGIN written ahead of the statement got no reply (see `begin_lost`): the caller
    /// runs the statement again, the BEGIN sent alone first.
    BeginLost,
}

impl Relayed {
    /// The outcome, for callers that neither retry nor write a BEGIN ahead (`None`: the
    /// client was told the connection broke).
    pub(crate) fn outcome(self) -> Option<Outcome> {
        match self {
            Relayed::Done(out) => Some(out),
            Relayed::Lost | Relayed::Unsent { .. } | Relayed::BeginLost => None,
        }
    }
}

impl Cursor {
    /// Whether `sql` is exactly the text of the client's COM_QUERY (then its frame, the client's
    /// own bytes, is relayed).
    pub(super) fn is_client_text(&self, sql: &str) -> bool {
        match &self.decoded {
            Some(text) => text == sql,
            None => self.client.packet_payload().get(1..) == Some(sql.as_bytes()),
        }
    }

    /// State a statement left on a connection out of the trackers' sight pins it.
    pub(super) fn note_effects(
        &mut self,
        dn: DatanodeId,
        effects: shoal_router::sql::pins::Effects,
    ) {
        if effects.leaves_state
            && let Some(h) = self.conns.get_mut(dn)
        {
            h.sticky = true;
        }
    }

    /// Where a statement any datanode can answer goes: a connection already held (in a
    /// transaction, the first one touched), else the current schema's default datanode.
    pub(crate) fn any_datanode(&self, routing: &Routing) -> DatanodeId {
        // Under LOCK TABLES, only the connections holding the locks may run statements.
        if let Some(&dn) = self.table_locks.first() {
            return dn;
        }
        if let Some(h) = self.conns.held.first() {
            return h.dn;
        }
        self.logical
            .as_deref()
            .and_then(|s| routing.topology.schema(s))
            .and_then(|s| s.default_datanode)
            .unwrap_or(0)
    }

    /// Sends the client's command (or `sql` as a new COM_QUERY) to datanode `dn` and relays
    /// the response. `None` if the backend broke (the client already got a 2013 error).
    pub(crate) async fn run_on(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
        how: Use,
        sql: Option<&str>,
        expect: Expect,
        reply_seq: u8,
    ) -> Result<Option<Outcome>> {
        let ran = self
            .run_on_attempt(routing, dn, how, sql, expect, reply_seq, false)
            .await?;
        Ok(ran.outcome())
    }

    /// [`Self::run_on`]; `may_retry`: a failure before anything reached the client is not
    /// reported but returned ([`Relayed::Unsent`]) for the caller to read elsewhere.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_on_attempt(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
        how: Use,
        sql: Option<&str>,
        expect: Expect,
        reply_seq: u8,
        may_retry: bool,
    ) -> Result<Relayed> {
        let ran = self
            .run_on_once(routing, dn, how, sql, expect, reply_seq, true, may_retry)
            .await?;
        match ran {
            Relayed::BeginLost => {
                self.run_on_once(routing, dn, how, sql, expect, reply_seq, false, may_retry)
                    .await
            }
            ran => Ok(ran),
        }
    }

    /// [`Self::run_on`] once; `begin_ahead`: a BEGIN the statement needs is written ahead of it.
    #[allow(clippy::too_many_arguments)]
    async fn run_on_once(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
        how: Use,
        sql: Option<&str>,
        expect: Expect,
        reply_seq: u8,
        begin_ahead: bool,
        may_retry: bool,
    ) -> Result<Relayed> {
        let i = self.touch_ahead(routing, dn, how, begin_ahead).await?;
        let h = &mut self.conns.held[i];
        match sql {
            None => {
                h.write_begin();
                h.conn.io.write_raw(self.client.frame());
            }
            Some(s) => match h.conn.sql_bytes(s) {
                Ok(bytes) => {
                    h.write_begin();
                    h.conn.io.write_command(COM_QUERY, &bytes);
                }
                Err(e) => {
                    h.cancel_begin();
                    return Err(e);
                }
            },
        }
        self.relay_from(i, expect, reply_seq, Some((&routing.names, dn)), may_retry)
            .await
    }

    /// The BEGIN written ahead of the statement on held connection `i` got no reply: the
    /// connection broke. Nothing of the two stayed on the server (the connection was in no
    /// transaction before, and a transaction open there is rolled back when it closes): the
    /// connection is dropped without dooming the transaction, whose start never happened there,
    /// and the caller runs the statement again ([`Relayed::BeginLost`]), the BEGIN alone
    /// first; a connection that died unseen between statements is replaced, as when a BEGIN
    /// sent alone finds it dead.
    async fn begin_lost(&mut self, i: usize) -> Relayed {
        let h = &mut self.conns.held[i];
        h.txn_begun = false;
        h.xa = false;
        h.wrote = false;
        let h = self.conns.take(i);
        self.rt.backends.servers[h.server].health.note_error();
        Relayed::BeginLost
    }

    /// The BEGIN written ahead of the statement on held connection `i` failed with `e`: the
    /// statement's response (read as `expect`) is read and dropped, and the BEGIN's error is
    /// the statement's. The transaction is not started there, as when a BEGIN sent alone
    /// fails. A statement that ran anyway left nothing half-applied: the BEGIN was sent only
    /// to a connection in no transaction, where it fails only if the server is lost (the
    /// statement then fails too); should the statement have opened a transaction of its own,
    /// the connection is closed, which rolls it back.
    async fn begin_failed(&mut self, i: usize, e: Error, expect: Expect) -> Result<Relayed> {
        let h = &mut self.conns.held[i];
        h.txn_begun = false;
        h.xa = false;
        h.wrote = false;
        let dn = h.dn;
        let drained = h.conn.discard_response(expect).await;
        if drained.is_err() || h.conn.in_transaction() {
            self.conns.take(i);
        }
        let node = self
            .rt
            .routing
            .as_ref()
            .map(|r| r.topology.datanodes[dn].name.clone())
            .unwrap_or_default();
        Err(e.on_datanode(&node))
    }

    /// Flushes what was written to held connection `i` and relays its response.
    /// Result column definitions name `names`' logical schema and tables of the datanode given.
    /// `may_retry`: see [`Relayed::Unsent`].
    pub(super) async fn relay_from(
        &mut self,
        i: usize,
        expect: Expect,
        reply_seq: u8,
        names: Option<(&crate::runtime::names::LogicalNames, DatanodeId)>,
        may_retry: bool,
    ) -> Result<Relayed> {
        let wire = self.client_wire();
        let h = &mut self.conns.held[i];
        let mut seq = reply_seq;
        // The round trip's time, only when metrics are counted (no clock read otherwise).
        let timed = self.rt.slots.is_some().then(std::time::Instant::now);
        let errors = self
            .rt
            .routing
            .as_ref()
            .map(|r| (&r.names, self.logical.as_deref()));
        let more = self.conns.more_results;
        let flushed = match h.conn.io.flush().await {
            Ok(()) if h.begin_unread => {
                // The transaction's BEGIN went first, in the same round trip: its reply
                // comes first.
                h.begin_unread = false;
                match read_write_result(&mut h.conn).await {
                    Ok(done) => {
                        h.conn.state.apply(&done.tracked);
                        Ok(())
                    }
                    Err(e @ Error::Reply { .. }) => {
                        return cold(self.begin_failed(i, e, expect)).await;
                    }
                    Err(Error::BackendIo(_)) => {
                        return Ok(cold(self.begin_lost(i)).await);
                    }
                    Err(e) => Err(std::io::Error::other(e.to_string())),
                }
            }
            flushed => flushed,
        };
        let result = match flushed {
            Ok(()) => {
                relay(
                    &mut h.conn,
                    &mut self.client,
                    wire,
                    expect,
                    &mut seq,
                    names.map(|(n, dn)| (n, dn, &mut self.renamed)),
                    errors,
                    more,
                )
                .await
            }
            Err(e) => Err(Error::BackendIo(e)),
        };
        // No `last_used` stamp here: the pool stamps a connection when it is given back, the
        // only time its idle age is read (a clock read per statement was routed-only cost).
        if let (Some(t), Some(m)) = (timed, &self.rt.slots) {
            let h = &self.conns.held[i];
            m.backend(h.dn, h.server, t.elapsed());
        }
        match result {
            Ok(out) => {
                self.mark.rows += out.rows;
                if out.error_code.is_some() {
                    self.mark.error = out.error_code;
                }
                if let Expect::Results { .. } | Expect::CursorResults = expect {
                    self.diag.known = true;
                    self.diag.row_count = if out.error {
                        -1
                    } else {
                        out.affected.map_or(-1, |a| a as i64)
                    };
                    if out.had_rows {
                        self.diag.found_rows = out.rows;
                    }
                }
                if out.prepared.is_some() {
                    // A statement this session owns on the server (not one of the cache's):
                    // the connection is reset before anyone else gets it.
                    self.conns.held[i].sticky = true;
                }
                self.learn(i, out.status, out.last_insert_id, &out.tracked);
                Ok(Relayed::Done(out))
            }
            Err(Error::BackendIo(e)) => {
                let dn = names.map(|(_, dn)| dn);
                let unsent = may_retry && seq == reply_seq;
                cold(self.backend_failed(i, e, seq, dn, unsent)).await
            }
            Err(Error::ClientIo(e)) => {
                // The backend may be mid-response: it cannot be reused.
                self.conns.take(i);
                Err(Error::ClientIo(e))
            }
            Err(e) => Err(e),
        }
    }

    /// Held connection `i` (of datanode `dn`) failed while its response was relayed (`seq`:
    /// the next sequence id to the client): the connection is dropped and the client told,
    /// or, when nothing reached the client and the read may go elsewhere (`unsent`), the
    /// caller retries it.
    pub(super) async fn backend_failed(
        &mut self,
        i: usize,
        e: std::io::Error,
        seq: u8,
        dn: Option<DatanodeId>,
        unsent: bool,
    ) -> Result<Relayed> {
        debug!(error = %e, "backend failed during a command");
        let h = self.conns.take(i);
        self.rt.backends.servers[h.server].health.note_error();
        let answer = if crate::error::is_timeout(&e) {
            // The statement's time is up: not retried elsewhere; said as it stands.
            let in_transaction = self.txn_begin.is_some() || h.pinned();
            let node = match dn {
                Some(dn) => self
                    .rt
                    .config
                    .routing
                    .as_deref()
                    .map(|r| format!("datanode {}", r.topology.datanodes[dn].name)),
                None => None,
            };
            let node = node.unwrap_or_else(|| "the datanode".to_string());
            let read = self.command_is_read();
            crate::backend::interrupt::stalled_error(&node, read, in_transaction)
        } else if unsent {
            // Nothing reached the client: the caller reads elsewhere.
            return Ok(Relayed::Unsent { server: h.server });
        } else {
            Error::lost_backend()
        };
        self.abandon_transaction().await;
        if let Some((code, state, msg)) = answer.as_reply() {
            let (msg, state) = (msg.to_string(), *state);
            self.send_error(seq, code, &state, &msg).await?;
        }
        Ok(Relayed::Lost)
    }

    /// Learns from a response on held connection `i` what changed in the session.
    pub(crate) fn learn(
        &mut self,
        i: usize,
        status: Option<u16>,
        last_insert_id: Option<u64>,
        tracked: &crate::backend::state::Tracked,
    ) {
        let h = &mut self.conns.held[i];
        if let Some(status) = status {
            self.status = status
                & !StatusFlags::SERVER_SESSION_STATE_CHANGED.bits()
                & !StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();
            if self.txn_begin.is_some() {
                self.status |= IN_TRANS;
            }
        }
        if let Some(id) = last_insert_id {
            self.want.last_insert_id = id;
            h.conn.state.last_insert_id = id;
        }
        if let Some(gtid) = &tracked.gtid {
            let dh = self.rt.backends.servers[h.server].datahost;
            let gtid = gtid.clone();
            self.conns.note_write(dh, Some(gtid));
        }
        let h = &mut self.conns.held[i];
        if !tracked.is_empty() {
            if tracked.unexplained_change() {
                h.sticky = true;
            }
            h.conn.state.apply(tracked);
            // The session's schema is logical; each connection keeps its datanode's database.
            let vars_only = crate::backend::state::Tracked {
                schema: None,
                vars: tracked.vars.clone(),
                state_changed: false,
                gtid: None,
            };
            self.want.apply(&vars_only);
        }
    }
}

/// A target's SQL as a COM_QUERY payload for `conn` (in its `character_set_client`).
pub(crate) fn query_payload(
    conn: &crate::backend::conn::BackendConn,
    t: &Target,
) -> Result<Vec<u8>> {
    let sql = conn.sql_bytes(&t.sql)?;
    let mut payload = Vec::with_capacity(1 + sql.len());
    payload.push(COM_QUERY);
    payload.extend_from_slice(&sql);
    Ok(payload)
}
