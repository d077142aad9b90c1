//! Reads over several datanodes: every shard gets its query at once, their column definitions
//! are checked to agree, and rows stream through the merge operator to the client, a shard
//! read only when the merge needs its next row (memory stays bounded by the merge's needs).

use shoal_router::plan::{MergeSpec, Target};

use shoal_router::topology::DatanodeId;

use super::connset::{ConnSet, Held};
use super::datanode_union;
use super::reader::{ResultStream, Row};
use super::request::{Request, request_on};
use super::unsupported;
use crate::backend::conn::BackendConn;
use crate::backend::pool::align_to;
use crate::backend::pool::{PooledConn, Wanted};
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::merge::{Column, Merger, Protocol, Step, merge_columns, parse_column};
use crate::runtime::routing::Routing;
use crate::wire::messages::err_payload;
use crate::wire::resultset::ResultSetWriter;

/// How one attempt at a scatter read ended ([`Cursor::scatter_attempt`]).
pub(super) enum Scattered {
    /// The merged result went to the client (or to the collecting subquery), an error
    /// included.
    Done,
    /// A server failed before anything reached the client, on a read the caller may run
    /// again elsewhere: `error` is what the client gets should it not.
    Unsent { server: usize, error: Error },
}

/// `sql_select_limit`'s default: no limit.
const UNLIMITED_SELECT: &str = "18446744073709551615";

impl Cursor {
    /// A read over several datanodes; when a server fails before anything reached the client
    /// (the query not sent, or no column definitions back), the whole read runs once more with
    /// that server avoided, on the same terms as [`Self::run_read_on`].
    pub(super) async fn run_scatter(
        &mut self,
        routing: &Routing,
        targets: Vec<Target>,
        spec: &MergeSpec,
        req: &Request<'_>,
        reply_seq: u8,
    ) -> Result<()> {
        self.run_scatter_into(routing, targets, spec, req, reply_seq, None)
            .await
    }

    /// [`Self::run_scatter`], the merged rows kept in `collect` instead of sent to the client
    /// when it is given (a subquery run first, see `subquery.rs`).
    pub(super) async fn run_scatter_into(
        &mut self,
        routing: &Routing,
        targets: Vec<Target>,
        spec: &MergeSpec,
        req: &Request<'_>,
        reply_seq: u8,
        mut collect: Option<&mut super::subquery::Collected>,
    ) -> Result<()> {
        if !self.read_may_retry() {
            return self
                .scatter_attempt(routing, targets, spec, req, reply_seq, collect, false)
                .await
                .map(|_| ());
        }
        let first = self
            .scatter_attempt(
                routing,
                targets.clone(),
                spec,
                req,
                reply_seq,
                collect.as_deref_mut(),
                true,
            )
            .await?;
        match first {
            Scattered::Unsent { server, error } => {
                tracing::debug!(server, %error, "scatter read failed on a server: retried");
                self.rt.backends.servers[server].health.note_error();
                self.conns.avoid = Some(server);
                if let Some(c) = collect.as_deref_mut() {
                    c.reset();
                }
                self.scatter_attempt(routing, targets, spec, req, reply_seq, collect, false)
                    .await
                    .map(|_| ())
            }
            Scattered::Done => Ok(()),
        }
    }

    /// One attempt at a scatter read. `may_retry`: a server failing before anything reached
    /// the client is returned ([`Scattered::Unsent`]) for [`Self::run_scatter`] to
    /// run the read once more without it.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn scatter_attempt(
        &mut self,
        routing: &Routing,
        mut targets: Vec<Target>,
        spec: &MergeSpec,
        req: &Request<'_>,
        reply_seq: u8,
        mut collect: Option<&mut super::subquery::Collected>,
        may_retry: bool,
    ) -> Result<Scattered> {
        // sql_select_limit caps the merged result, as one server caps its result; each shard
        // must answer in full, or a shard's cut rows (groups, the rows of an ORDER BY) would be
        // missing from the merge.
        let capped;
        // Not a subquery's rows: MariaDB applies sql_select_limit to the statement's result only.
        let spec = match self.select_limit() {
            Some(n) if spec.limit.is_none() && collect.is_none() => {
                capped = MergeSpec {
                    limit: Some(n),
                    ..spec.clone()
                };
                &capped
            }
            _ => spec,
        };
        let session_want = self.select_limit().map(|_| {
            let mut unlimited = self.want.clone();
            unlimited.set_var("sql_select_limit", UNLIMITED_SELECT);
            std::mem::replace(&mut self.want, unlimited)
        });
        let connections = match self.stream_targets(routing, &mut targets, spec).await {
            Ok(unions) => self
                .scatter_connections(routing, &targets)
                .await
                .map(|c| (unions, c)),
            Err(e) => Err(e),
        };
        if let Some(want) = session_want {
            self.want = want;
        }
        let ((arms, donors), (place, mut extra)) = connections?;
        let mut payloads = Vec::with_capacity(targets.len());
        for (t, p) in targets.iter().zip(&place) {
            payloads.push(match p {
                Place::Held(i) => match self.request_payload(routing, *i, t, req).await {
                    Ok(payload) => payload,
                    Err(e @ Error::BackendIo(_)) => {
                        return self.broken_unsent(&targets, e, t.datanode, may_retry);
                    }
                    Err(e) => {
                        // Extra connections close with `extra`; held ones stay.
                        self.forget_unsent_types();
                        return Err(e);
                    }
                },
                Place::Extra(x) => {
                    let db = &routing.topology.datanodes[t.datanode].database;
                    let mut payload = Vec::new();
                    if let Err(e) = request_on(&mut extra[*x].0, db, t, req, &mut payload).await {
                        self.forget_unsent_types();
                        return Err(e);
                    }
                    payload
                }
            });
        }
        let binary = matches!(req, Request::Execute { .. });
        let mut failure: Option<(Error, DatanodeId)> = None;
        for ((payload, p), t) in payloads.iter().zip(&place).zip(&targets) {
            let conn = conn_at(&mut self.conns, &mut extra, *p);
            let mut seq = 0;
            conn.io.write_packet(&mut seq, payload);
            if let Err(e) = conn.io.flush().await {
                failure = Some((Error::BackendIo(e), t.datanode));
                break;
            }
        }
        if let Some((e, dn)) = failure {
            return self.broken_unsent(&targets, e, dn, may_retry);
        }
        // Each shard's round trip, up to its column definitions (only with metrics on).
        let sent_at = self.rt.slots.is_some().then(std::time::Instant::now);
        // Column definitions of every shard; a shard's error is the statement's.
        let mut streams: Vec<ResultStream> = place
            .iter()
            .map(|p| ResultStream::new(conn_at(&mut self.conns, &mut extra, *p), binary))
            .collect();
        let mut columns: Vec<Vec<Vec<u8>>> = Vec::with_capacity(targets.len());
        let mut first_err: Option<Error> = None;
        let mut open = vec![false; targets.len()];
        for (k, p) in place.iter().enumerate() {
            let answer = streams[k]
                .columns(conn_at(&mut self.conns, &mut extra, *p))
                .await;
            if let (Some(t0), Some(m)) = (sent_at, &self.rt.slots) {
                let dn = targets[k].datanode;
                let server = match p {
                    Place::Held(i) => self.conns.held[*i].server,
                    Place::Extra(_) => self
                        .rt
                        .backends
                        .primary(routing.topology.datanodes[dn].datahost),
                };
                m.backend(dn, server, t0.elapsed());
            }
            match answer {
                Ok(defs) => {
                    open[k] = true;
                    columns.push(defs);
                }
                Err(e @ Error::Reply { .. }) => {
                    first_err.get_or_insert(e);
                    columns.push(Vec::new());
                }
                Err(e) => {
                    let dn = targets[k].datanode;
                    return self.broken_unsent(&targets, e, dn, may_retry);
                }
            }
        }
        // A union's definitions name no table: the client gets its first arm's.
        let mut widen: Vec<Option<datanode_union::Widening>> = Vec::new();
        for (defs, donor) in columns.iter_mut().zip(&donors) {
            let before = (binary && donor.is_some()).then(|| defs.clone());
            let widened = donor
                .as_ref()
                .is_some_and(|donor| datanode_union::patch(defs, donor));
            widen.push(match before {
                Some(before) if widened => datanode_union::Widening::new(&before, defs),
                _ => None,
            });
        }
        let mut parsed: Result<Vec<Vec<Column>>> = match first_err {
            Some(_) => Ok(Vec::new()),
            None => columns
                .iter()
                .map(|defs| defs.iter().map(|d| parse_column(d)).collect())
                .collect(),
        };
        // Strings the merge compares go by the collation their columns are declared with.
        // Rows kept to be bound as values are written with their columns' collations too.
        let compares = spec.aggregate.is_some()
            || spec.distinct
            || !spec.order_by.is_empty()
            || collect.is_some();
        if let Ok(cols) = &mut parsed
            && compares
            && first_err.is_none()
            && let Err(e) = self.learn_collations(routing, &targets, cols).await
        {
            parsed = Err(e);
        }
        if let Ok(cols) = &mut parsed
            && compares
        {
            self.read_converted_expressions(cols);
        }
        let merger = match (first_err, parsed) {
            (Some(e), _) => Err(e),
            (None, Err(e)) => Err(e),
            (None, Ok(parsed)) => match merge_columns(&parsed) {
                Some(mut merged) => {
                    // Renamed only now: the collations above were looked up under the
                    // physical names the first shard gave.
                    let mut out = Vec::new();
                    for c in &mut merged {
                        if routing.names.rename(targets[0].datanode, &c.raw, &mut out) {
                            std::mem::swap(&mut c.raw, &mut out);
                        }
                    }
                    let protocol = if binary {
                        Protocol::Binary
                    } else {
                        Protocol::Text
                    };
                    Merger::new(spec, merged, targets.len(), protocol).and_then(|m| m.arms(&arms))
                }
                None => Err(Error::reply(
                    1105,
                    b"HY000",
                    "the datanodes returned different columns for this statement (are the \
                     physical tables' definitions the same everywhere?)",
                )),
            },
        };
        let mut merger = match merger {
            Ok(m) => m,
            Err(e) => {
                self.drain_open(&place, &mut extra, &open, &mut streams)
                    .await?;
                release_extra(extra);
                return Err(e);
            }
        };
        // Header: the visible columns, as the shards' definitions merge, in logical names.
        drop(columns);
        let visible = merger.visible_columns();
        let wire = self.client_wire();
        let status = self.reply_status();
        // Kept rows: no header to the client.
        let mut out = match collect.as_deref_mut() {
            Some(c) => {
                c.columns = merger.columns()[..visible].to_vec();
                None
            }
            None => Some(ResultSetWriter::start(
                &mut self.client,
                reply_seq,
                wire,
                status,
                merger.columns()[..visible].iter().map(|c| c.raw.as_slice()),
            )),
        };
        let mut sent = 0u64;
        // The buffer of the row sent last, for the next row read.
        let mut spare: Option<Vec<u8>> = None;
        let mut error: Option<Error> = None;
        // A shard connection broke (or sent a malformed row) after the header went out.
        let mut broken: Option<Error> = None;
        loop {
            let step = match merger.next() {
                Ok(s) => s,
                Err(e @ Error::Reply { .. }) => {
                    error = Some(e);
                    break;
                }
                Err(e) => {
                    broken = Some(e);
                    break;
                }
            };
            match step {
                Step::Done => break,
                Step::Row(row) => {
                    if let Some(c) = collect.as_deref_mut() {
                        if let Err(e) = c.keep(row) {
                            error = Some(e);
                            break;
                        }
                        sent += 1;
                        continue;
                    }
                    if let Some(out) = out.as_mut() {
                        out.row(&mut self.client, &row);
                    }
                    spare = Some(row);
                    sent += 1;
                    if self.client.needs_flush() {
                        self.flush_client().await?;
                    }
                }
                Step::Need(k) => {
                    let conn = conn_at(&mut self.conns, &mut extra, place[k]);
                    match streams[k]
                        .next_row_in(conn, spare.take().unwrap_or_default())
                        .await
                    {
                        Ok(Row::Data(row)) => match match &widen[k] {
                            Some(w) => w.row(&row).and_then(|row| merger.feed_row(k, row)),
                            None => merger.feed_row(k, row),
                        } {
                            Ok(()) => {}
                            Err(e @ Error::Reply { .. }) => {
                                error = Some(e);
                                break;
                            }
                            Err(e) => {
                                broken = Some(e);
                                break;
                            }
                        },
                        Ok(Row::End) => {
                            open[k] = false;
                            merger.feed_end(k);
                        }
                        Err(e @ Error::Reply { .. }) => {
                            open[k] = false;
                            error = Some(e);
                            break;
                        }
                        Err(e) => {
                            broken = Some(e);
                            break;
                        }
                    }
                }
            }
        }
        // Shards the merge did not need to the end (LIMIT, an error elsewhere): read their
        // rest so their connections can serve the next statement.
        if let Some(e) = broken {
            // Every connection of the statement is somewhere in its response: drop them all.
            // Extra connections are dropped too (closed, never pooled mid-response).
            drop(extra);
            error = Some(self.scatter_broken(&targets, e));
        } else {
            self.drain_open(&place, &mut extra, &open, &mut streams)
                .await?;
            release_extra(extra);
        }
        if let Some(e) = error {
            if let Some(c) = collect {
                c.error = Some(e);
                return Ok(Scattered::Done);
            }
            let p = match e.as_reply() {
                Some((code, state, msg)) => {
                    let m = routing.names.rewrite(msg, self.logical.as_deref());
                    let (code, state) = (code, *state);
                    let m = m.unwrap_or_else(|| msg.to_string());
                    self.error_payload(code, &state, &m)
                }
                None => err_payload(
                    crate::error::LOST_BACKEND.0,
                    &crate::error::LOST_BACKEND.1,
                    &e.to_string(),
                ),
            };
            if let Some(out) = out {
                out.fail(&mut self.client, &p);
            }
            self.diag.known = true;
            self.diag.row_count = -1;
            return self.flush_client().await.map(|()| Scattered::Done);
        }
        // With autocommit off the read opened a transaction: say so, as one server would.
        if self.conns.held.iter().any(|h| h.conn.in_transaction()) {
            self.status |= super::IN_TRANS;
        }
        let Some(out) = out else {
            return Ok(Scattered::Done);
        };
        let status = self.reply_status();
        out.finish(&mut self.client, status);
        self.diag.known = true;
        self.diag.row_count = -1;
        self.diag.found_rows = sent;
        self.mark.rows += sent;
        self.flush_client().await.map(|()| Scattered::Done)
    }

    /// The statement each stream of the scatter runs: inside a transaction, the targets of a
    /// datanode holding several of the statement's tables become one statement on the
    /// transaction's connection (`datanode_union`). Returns per stream how many targets it
    /// unions and, for a union, the column definitions of its first target.
    async fn stream_targets(
        &mut self,
        routing: &Routing,
        targets: &mut Vec<Target>,
        spec: &MergeSpec,
    ) -> Result<(Vec<usize>, Vec<Option<Vec<Vec<u8>>>>)> {
        let several = targets
            .iter()
            .enumerate()
            .any(|(k, t)| targets[..k].iter().any(|o| o.datanode == t.datanode));
        if !several || !self.in_transaction_now() || !self.table_locks.is_empty() {
            return Ok((vec![1; targets.len()], vec![None; targets.len()]));
        }
        self.admit(routing).await?;
        let groups = datanode_union::by_datanode(std::mem::take(targets));
        let mut arms = Vec::with_capacity(groups.len());
        let mut donors = Vec::with_capacity(groups.len());
        for g in groups {
            arms.push(g.targets.len());
            if g.targets.len() == 1 {
                targets.extend(g.targets);
                donors.push(None);
                continue;
            }
            datanode_union::check_members(&g.targets)?;
            self.touch(routing, g.datanode).await?;
            let i = self.conns.touched(g.datanode)?;
            let first = &g.targets[0];
            let conn = &mut self.conns.held[i].conn;
            let db = &routing.topology.datanodes[g.datanode].database;
            let described = async {
                if !first.qualified && conn.state.schema.as_deref() != Some(db.as_str()) {
                    // Described where it runs: the datanode's database.
                    conn.init_db(db).await?;
                }
                datanode_union::describe(conn, &first.sql).await
            };
            let donor = match described.await {
                Ok(d) => d,
                Err(e @ Error::BackendIo(_)) => {
                    return Err(self.scatter_broken(&g.targets, e));
                }
                Err(e) => return Err(e),
            };
            targets.push(datanode_union::union_target(&g.targets, spec, donor.len())?);
            donors.push(Some(donor));
        }
        Ok((arms, donors))
    }

    /// The connection each target reads on (see [`Place`]), in the session's state.
    async fn scatter_connections(
        &mut self,
        routing: &Routing,
        targets: &[Target],
    ) -> Result<(Vec<Place>, Vec<(PooledConn, bool)>)> {
        if targets.len() > 1 {
            self.admit(routing).await?;
            // Under LOCK TABLES the locked connections serve (touch refuses any other).
            if self.table_locks.is_empty() {
                self.acquire_together(routing, targets).await?;
            }
        }
        for t in targets {
            self.touch(routing, t.datanode).await?;
        }
        // One connection carries one result at a time, and the merge reads shards side by
        // side: a second target on a datanode (table-per-shard) gets a connection of its own
        // for this statement. Outside a transaction that reads what the held one would.
        // Under READ locks only, the locked connection cannot read a table-per-shard table's
        // physical tables by their logical alias (MariaDB's locks name each table once): all
        // of that datanode's targets read on connections of their own, which see what the
        // locked one would, as no session can write the locked tables.
        let read_locked = !self.table_locks.is_empty() && self.table_locks_read;
        let mut extra: Vec<(PooledConn, bool)> = Vec::new();
        let mut place: Vec<Place> = Vec::with_capacity(targets.len());
        for (k, t) in targets.iter().enumerate() {
            let i = self.conns.touched(t.datanode)?;
            let several_here = targets.iter().filter(|o| o.datanode == t.datanode).count() > 1;
            let first_here = !targets[..k].iter().any(|o| o.datanode == t.datanode);
            let own_connection = read_locked && several_here;
            if first_here && !own_connection {
                place.push(Place::Held(i));
                continue;
            }
            if read_locked {
                place.push(Place::Extra(extra.len()));
                extra.push((self.extra_connection(routing, t.datanode).await?, false));
                continue;
            }
            if self.in_transaction_now() {
                // Another connection would read outside the transaction's snapshot (with
                // autocommit off, every statement is in one).
                return Err(unsupported(
                    "a read over several tables of one datanode (table-per-shard) inside a \
                     transaction",
                ));
            }
            self.refuse_extra_connection_under_locks()?;
            place.push(Place::Extra(extra.len()));
            extra.push((self.extra_connection(routing, t.datanode).await?, false));
        }
        Ok((place, extra))
    }

    /// When a pool the scatter needs is full, the connections it does not hold yet are asked
    /// of their pools together: each pool's wait for a connection given back overlaps the
    /// others', instead of one wait per server one after another. Each lands in the session's
    /// set as chosen for this statement, and [`Self::touch`] aligns it as any other. Otherwise
    /// (every acquire answered at once) nothing happens here.
    async fn acquire_together(&mut self, routing: &Routing, targets: &[Target]) -> Result<()> {
        let mut need: Vec<(DatanodeId, usize)> = Vec::new();
        for t in targets {
            let dn = t.datanode;
            if self.conns.position(dn).is_some() || need.iter().any(|&(d, _)| d == dn) {
                continue;
            }
            let server = self.target_server(routing, dn)?;
            // A replica the session must first wait on goes through `touch` (it may fall
            // back to the primary).
            if self.causal_wait_pending(server) {
                continue;
            }
            need.push((dn, server));
        }
        if need.len() < 2 || !need.iter().any(|&(_, s)| self.rt.pools[s].is_full()) {
            return Ok(());
        }
        self.release_stale();
        let wire = self.routed_wire();
        let multi_statements = self.want.multi_statements;
        let pools = &self.rt.pools;
        let got = futures_util::future::join_all(need.iter().map(|&(dn, server)| {
            let database = routing.topology.datanodes[dn].database.as_str();
            pools[server].acquire(Wanted {
                wire,
                prefer: 0,
                schema: Some(database),
                multi_statements,
            })
        }))
        .await;
        if got.iter().any(|c| c.is_err()) {
            // What was taken goes back: the statement fails holding nothing it took here.
            let mut first = None;
            for conn in got {
                match conn {
                    Ok(conn) => conn.release(),
                    Err(e) => first = first.or(Some(e)),
                }
            }
            return Err(first.unwrap_or_else(|| Error::malformed("acquire")));
        }
        let statement = self.conns.statement;
        for (&(dn, server), conn) in need.iter().zip(got) {
            if let Ok(conn) = conn {
                let mut h = Held::new(dn, server, conn);
                h.used_in = statement;
                self.conns.push(h);
            }
        }
        self.publish_backends();
        Ok(())
    }

    /// The session's `sql_select_limit`, when it is not the default (no limit).
    fn select_limit(&self) -> Option<u64> {
        self.want
            .var("sql_select_limit")
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&n| n != u64::MAX)
    }

    /// Reads the rest of every shard response still open.
    async fn drain_open(
        &mut self,
        place: &[Place],
        extra: &mut [(PooledConn, bool)],
        open: &[bool],
        streams: &mut [ResultStream],
    ) -> Result<()> {
        let mut broken = Vec::new();
        for (k, p) in place.iter().enumerate() {
            if open[k]
                && let Err(e) = streams[k].drain(conn_at(&mut self.conns, extra, *p)).await
            {
                tracing::debug!(error = %e, "shard connection broke while draining");
                match p {
                    Place::Held(i) => broken.push(self.conns.held[*i].dn),
                    // Closed on release below: a broken connection is never pooled.
                    Place::Extra(j) => extra[*j].1 = true,
                }
            }
        }
        for dn in broken {
            self.conns.remove(dn);
        }
        Ok(())
    }

    /// A connection of `dn`'s pool in the session's state, for one statement.
    pub(super) async fn extra_connection(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
    ) -> Result<PooledConn> {
        let node = &routing.topology.datanodes[dn];
        // The same server as the datanode's held connection (the statement chose it).
        let server = match self.conns.get_mut(dn) {
            Some(h) => h.server,
            None => self.rt.backends.primary(node.datahost),
        };
        let mut conn = self.rt.pools[server]
            .acquire(Wanted {
                wire: self.routed_wire(),
                prefer: 0,
                schema: Some(&node.database),
                multi_statements: self.want.multi_statements,
            })
            .await?;
        if let Some(at) = self.conns.deadline {
            conn.arm(at);
        }
        align_to(&self.want, Some(&node.database), &mut conn).await?;
        Ok(conn)
    }

    /// [`Self::scatter_broken`] for datanode `dn`'s connection, broken before anything went
    /// to the client: a read that may go elsewhere gets the server that failed instead of the
    /// error (not when the statement's time ran out).
    fn broken_unsent(
        &mut self,
        targets: &[Target],
        e: Error,
        dn: DatanodeId,
        may_retry: bool,
    ) -> Result<Scattered> {
        let retry = may_retry && !crate::error::error_is_timeout(&e);
        let server = self.conns.get_mut(dn).map(|h| h.server).filter(|_| retry);
        let error = self.scatter_broken(targets, e);
        match server {
            Some(server) => Ok(Scattered::Unsent { server, error }),
            None => Err(error),
        }
    }

    /// A shard connection broke mid-statement: every connection of the statement is in an
    /// unknown place in its response, so they are all dropped (an open transaction with them).
    fn scatter_broken(&mut self, targets: &[Target], e: Error) -> Error {
        tracing::debug!(error = %e, "a shard connection broke during a scatter");
        let timed_out = crate::error::error_is_timeout(&e);
        let in_txn = self.txn_begin.is_some();
        // A branch lost with its connection dooms the transaction: `fate` ends the rest.
        for t in targets {
            self.conns.remove(t.datanode);
        }
        if timed_out {
            // A read over the datanodes: nothing it did outlives its connections.
            let in_transaction = in_txn || self.in_transaction_now();
            return crate::backend::interrupt::stalled_error("a datanode", true, in_transaction);
        }
        Error::lost_backend()
    }
}

/// Where a target's result comes from: the session's connection to its datanode, or one taken
/// for this statement only.
#[derive(Clone, Copy)]
enum Place {
    Held(usize),
    Extra(usize),
}

fn conn_at<'a>(
    conns: &'a mut ConnSet,
    extra: &'a mut [(PooledConn, bool)],
    p: Place,
) -> &'a mut BackendConn {
    match p {
        Place::Held(i) => &mut conns.held[i].conn,
        Place::Extra(j) => &mut extra[j].0,
    }
}

/// Gives back the statement's own connections; a broken one is closed instead.
fn release_extra(extra: Vec<(PooledConn, bool)>) {
    for (c, broken) in extra {
        if !broken {
            c.release();
        }
    }
}
