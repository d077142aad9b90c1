//! Transactions over datanodes as XA branches (schemas with `transactions: xa`, the default).
//!
//! Each datanode a transaction touches gets `XA START` where it would have got BEGIN (for an
//! explicit transaction, an implicit one with autocommit off, and a write's own transaction
//! over several datanodes). At COMMIT:
//! - at most one branch wrote: every branch gets `XA END` and `XA COMMIT ... ONE PHASE`,
//!   both written before either answer is read (no round trip more than COMMIT);
//! - two or more wrote: `XA END` and `XA PREPARE` on each written branch (all connections
//!   written first, then all read), `XA END` on the read-only ones; a failure rolls every
//!   branch back; once all are prepared the decision row is written to the log
//!   ([`crate::xa::log`]), then `XA COMMIT` goes to every written branch (`... ONE PHASE` to
//!   the read-only ones). A branch whose commit fails after the decision is committed by
//!   recovery ([`crate::xa::recovery`]): the client's COMMIT succeeded.
//!
//! Plain BEGIN stays where XA cannot apply: `START TRANSACTION READ ONLY`, `WITH CONSISTENT
//! SNAPSHOT` (such a transaction may then write to one datanode only), and under LOCK TABLES;
//! and where it is not needed: a topology of one datanode ([`Cursor::txn_mode`]).

use shoal_router::config::Transactions;
use shoal_router::topology::DatanodeId;
use tracing::{debug, warn};

use crate::backend::pool::Wanted;
use crate::error::{Error, LOST_BACKEND, Result};
use crate::exec::Cursor;
use crate::exec::IN_TRANS;
use crate::exec::reader::{WriteDone, read_write_result};
use crate::runtime::routing::Routing;
use crate::wire::command::COM_QUERY;
use crate::xa::{Fault, Xid, fault_point, log};

/// ER_ERROR_DURING_COMMIT: a commit that is decided but not yet done everywhere.
const PARTIAL_COMMIT: (u16, [u8; 5]) = (1180, *b"HY000");

/// XAER_NOTA: no branch of that xid on the server.
const XAER_NOTA: u16 = 1397;

/// ER_XA_RBROLLBACK: the transaction was rolled back.
const XA_RBROLLBACK: (u16, [u8; 5]) = (1402, *b"XA100");

/// Errors of `XA ROLLBACK` that mean the branch is rolled back already: XAER_NOTA (unknown
/// xid), XA_RBROLLBACK, XA_RBTIMEOUT, XA_RBDEADLOCK.
const ALREADY_ROLLED_BACK: [u16; 4] = [1397, 1402, 1613, 1614];

/// What starts a transaction's branch on one datanode ([`Cursor::branch_start`]).
pub(in crate::exec) struct BranchStart {
    pub sql: String,
    /// An XA branch, not a plain BEGIN.
    pub xa: bool,
    /// The same xid was started on this datanode before in this transaction (its start failed
    /// or its connection was lost): the server may still hold it, so that this `XA START` can
    /// fail (XAER_DUPID). It is sent on its own, never ahead of a statement.
    pub again: bool,
}

/// One branch at commit time.
struct Branch {
    dn: DatanodeId,
    xid: String,
    wrote: bool,
}

/// Per branch, `XA END` and the statement `then` makes of its xid: what the pipeline sends.
fn end_then(branches: &[Branch], then: impl Fn(&str) -> String) -> Vec<(DatanodeId, Vec<String>)> {
    branches
        .iter()
        .map(|b| (b.dn, vec![format!("XA END {}", b.xid), then(&b.xid)]))
        .collect()
}

/// `sql`'s error after a broken connection (the first one's cause is reported).
fn broken() -> Error {
    Error::BackendIo(std::io::Error::other("backend connection broke"))
}

impl Cursor {
    /// How the session's transactions over several datanodes commit: as its logical schema
    /// says; before USE, XA if any schema uses it. Over a topology of one datanode no
    /// transaction can span two, so XA would buy nothing and costs MariaDB more per
    /// transaction than BEGIN/COMMIT (issue 48: one more statement, more redo writes and
    /// mutex waits): such transactions are plain, as under `best_effort`.
    pub(in crate::exec) fn txn_mode(&self, routing: &Routing) -> Transactions {
        if routing.topology.datanodes.len() == 1 {
            return Transactions::BestEffort;
        }
        let schemas = &routing.topology.schemas;
        match self
            .logical
            .as_deref()
            .and_then(|s| routing.topology.schema(s))
        {
            Some(s) => s.transactions,
            None if schemas.values().any(|s| s.transactions == Transactions::Xa) => {
                Transactions::Xa
            }
            None => Transactions::BestEffort,
        }
    }

    /// Whether the session's transactions over datanodes use XA (see [`Self::txn_mode`]).
    pub(in crate::exec) fn xa_mode(&self) -> bool {
        self.rt
            .routing
            .as_ref()
            .is_some_and(|r| self.txn_mode(r) == Transactions::Xa)
    }

    /// Whether the session is in a transaction whose branches XA tracks (explicit, or any
    /// statement with autocommit off), so that the statements' read/write nature matters.
    pub(in crate::exec) fn xa_tracking(&self, routing: &Routing) -> bool {
        (self.txn_begin.is_some() || self.autocommit_off())
            && self.txn_mode(routing) == Transactions::Xa
    }

    /// What starts the session's transaction on held connection `i` (datanode `dn`), if it
    /// is not started there yet: `XA START` for an XA branch, else the client's BEGIN text.
    pub(in crate::exec) fn branch_start(
        &mut self,
        routing: &Routing,
        i: usize,
        dn: DatanodeId,
    ) -> Option<BranchStart> {
        let h = &self.conns.held[i];
        if h.txn_begun {
            return None;
        }
        let explicit = self.txn_begin.is_some();
        let implicit =
            !explicit && !self.conns.no_branch && !h.conn.in_transaction() && self.autocommit_off();
        if !explicit && !implicit {
            return None;
        }
        let xa = self.txn_mode(routing) == Transactions::Xa
            && self.txn_plain.is_none()
            && self.table_locks.is_empty();
        if !xa {
            return self.txn_begin.clone().map(|sql| BranchStart {
                sql,
                xa: false,
                again: false,
            });
        }
        if !self.conns.held.iter().any(|h| h.xa) {
            self.xa_gtrid = None;
        }
        if self.xa_gtrid.is_none() {
            self.conns.xa_started.clear();
        }
        let gtrid = self
            .xa_gtrid
            .get_or_insert_with(|| self.shared.xa.new_gtrid());
        let xid = Xid::branch(gtrid, &routing.topology.datanodes[dn].name);
        let again = self.conns.xa_started.contains(&dn);
        if !again {
            self.conns.xa_started.push(dn);
        }
        Some(BranchStart {
            sql: format!("XA START {}", xid.sql()),
            xa: true,
            again,
        })
    }

    /// A transaction started WITH CONSISTENT SNAPSHOT uses plain BEGINs, so its commit over
    /// several datanodes could not be atomic: under XA, its writes stay on one datanode.
    pub(in crate::exec) fn check_plain_write(
        &self,
        routing: &Routing,
        dn: DatanodeId,
    ) -> Result<()> {
        let Some(why @ "WITH CONSISTENT SNAPSHOT") = self.txn_plain else {
            return Ok(());
        };
        if !self.conns.maybe_writes || self.txn_mode(routing) != Transactions::Xa {
            return Ok(());
        }
        match self.conns.held.iter().find(|h| h.wrote && h.dn != dn) {
            Some(other) => Err(Error::reply(
                1235,
                b"42000",
                format!(
                    "a transaction started with {why} writes to one datanode only (it commits \
                     without XA, so a commit over several could be partial): it wrote to {} \
                     and this statement writes to {}; start the transaction without {why}",
                    routing.topology.datanodes[other.dn].name, routing.topology.datanodes[dn].name
                ),
            )),
            None => Ok(()),
        }
    }

    /// Ends the session's XA transaction: COMMIT (`commit`) or ROLLBACK of every branch, as
    /// the module says. The session is outside any transaction afterwards, whatever the
    /// outcome.
    pub(in crate::exec) async fn end_xa(&mut self, routing: &Routing, commit: bool) -> Result<()> {
        let gtrid = self.xa_gtrid.take().unwrap_or_default();
        let branches: Vec<Branch> = self
            .conns
            .held
            .iter()
            .filter(|h| h.xa)
            .map(|h| Branch {
                dn: h.dn,
                xid: Xid::branch(&gtrid, &routing.topology.datanodes[h.dn].name).sql(),
                wrote: h.wrote,
            })
            .collect();
        let written = branches.iter().filter(|b| b.wrote).count();
        let result = if !commit {
            self.xa_rollback(routing, &branches, &gtrid).await
        } else if written <= 1 {
            self.xa_one_phase(routing, &branches).await
        } else {
            self.xa_two_phase(routing, &branches, &gtrid).await
        };
        // Connections in a plain transaction beside the branches (none is expected: every
        // branch of an XA transaction starts with XA START) end as today.
        let word = if commit && result.is_ok() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        let mut broken_plain = Vec::new();
        for h in self.conns.held.iter_mut() {
            if !h.xa
                && (h.txn_begun || h.conn.in_transaction())
                && let Err(e) = h.conn.command(COM_QUERY, word.as_bytes()).await
            {
                warn!(datanode = %routing.topology.datanodes[h.dn].name, error = %e, "plain branch of an XA transaction failed to end");
                if matches!(e, Error::BackendIo(_)) {
                    broken_plain.push(h.dn);
                }
            }
            h.txn_begun = false;
            h.xa = false;
            h.wrote = false;
        }
        for dn in broken_plain {
            self.conns.remove(dn);
        }
        self.txn_begin = None;
        self.txn_plain = None;
        self.status &= !IN_TRANS;
        if result.is_ok() {
            self.release_conns(false).await;
        }
        result
    }

    /// Writes every step's statements to its branch's connection, then reads every answer:
    /// per branch, per statement, its result. A connection that breaks is removed from the
    /// session (the server rolls back its branch unless it is prepared: recovery then finishes
    /// it).
    async fn pipeline(
        &mut self,
        steps: &[(DatanodeId, Vec<String>)],
    ) -> Vec<Vec<Result<WriteDone>>> {
        let mut sent = Vec::with_capacity(steps.len());
        for (dn, stmts) in steps {
            let Some(h) = self.conns.get_mut(*dn) else {
                sent.push(false);
                continue;
            };
            for s in stmts {
                h.conn.io.write_command(COM_QUERY, s.as_bytes());
            }
            sent.push(h.conn.io.flush().await.is_ok());
        }
        let mut out = Vec::with_capacity(steps.len());
        let mut gone = Vec::new();
        let mut gtids = Vec::new();
        for ((dn, stmts), sent) in steps.iter().zip(sent) {
            let mut results = Vec::with_capacity(stmts.len());
            let h = self.conns.get_mut(*dn);
            match (h, sent) {
                (Some(h), true) => {
                    let mut ok = true;
                    for _ in stmts {
                        if !ok {
                            results.push(Err(broken()));
                            continue;
                        }
                        let r = read_write_result(&mut h.conn).await;
                        match &r {
                            Ok(d) => {
                                h.conn.state.apply(&d.tracked);
                                if let Some(g) = &d.tracked.gtid {
                                    gtids.push((h.server, g.clone()));
                                }
                            }
                            Err(Error::BackendIo(_)) => ok = false,
                            Err(_) => {}
                        }
                        results.push(r);
                    }
                    if !ok {
                        gone.push(*dn);
                    }
                }
                _ => {
                    results.extend(stmts.iter().map(|_| Err(broken())));
                    gone.push(*dn);
                }
            }
            out.push(results);
        }
        for dn in gone {
            if let Some(h) = self.conns.remove(dn) {
                self.rt.backends.servers[h.server].health.note_error();
            }
        }
        for (server, gtid) in gtids {
            // What the transaction wrote is known by this GTID from now on: causal reads
            // wait for it.
            let dh = self.rt.backends.servers[server].datahost;
            self.conns.note_write(dh, Some(gtid));
        }
        out
    }

    /// `XA END` and `XA ROLLBACK` on every branch.
    async fn xa_rollback(
        &mut self,
        routing: &Routing,
        branches: &[Branch],
        gtrid: &str,
    ) -> Result<()> {
        let steps = end_then(branches, |xid| format!("XA ROLLBACK {xid}"));
        let results = self.pipeline(&steps).await;
        let mut failed = Vec::new();
        for (b, r) in branches.iter().zip(results) {
            // XA END fails on a branch the server already rolled back (a deadlock): its
            // rollback then says so too, which is the outcome wanted.
            match &r[1] {
                Ok(_) => {}
                Err(e)
                    if e.as_reply()
                        .is_some_and(|(c, _, _)| ALREADY_ROLLED_BACK.contains(&c)) => {}
                Err(Error::BackendIo(_)) => {
                    // Not prepared: the server rolled it back with its connection.
                }
                Err(e) => {
                    // Left open on a live connection: closing it rolls it back.
                    self.conns.remove(b.dn);
                    failed.push((routing.topology.datanodes[b.dn].name.clone(), e.to_string()));
                }
            }
        }
        if failed.is_empty() {
            return Ok(());
        }
        debug!(
            gtrid,
            "XA ROLLBACK failed on a branch; its connection was closed"
        );
        let reasons: Vec<String> = failed.iter().map(|(n, m)| format!("{n} ({m})")).collect();
        Err(Error::reply(
            XA_RBROLLBACK.0,
            &XA_RBROLLBACK.1,
            format!(
                "ROLLBACK failed on datanodes {}; their connections were closed, which rolls \
                 them back",
                reasons.join(", ")
            ),
        ))
    }

    /// At most one branch wrote: `XA END` + `XA COMMIT ... ONE PHASE` everywhere.
    async fn xa_one_phase(&mut self, routing: &Routing, branches: &[Branch]) -> Result<()> {
        let steps = end_then(branches, |xid| format!("XA COMMIT {xid} ONE PHASE"));
        let results = self.pipeline(&steps).await;
        let mut failure = None;
        for (b, r) in branches.iter().zip(results) {
            let err = match r.into_iter().find_map(|x| x.err()) {
                Some(e) => e,
                None => continue,
            };
            let name = routing.topology.datanodes[b.dn].name.clone();
            if let Some(h) = self.conns.get_mut(b.dn) {
                // Whatever state the failure left: rolled back, and the connection clean.
                let end = format!("XA END {}", b.xid);
                let _ = h.conn.command(COM_QUERY, end.as_bytes()).await;
                let rb = format!("XA ROLLBACK {}", b.xid);
                if let Err(e) = h.conn.command(COM_QUERY, rb.as_bytes()).await
                    && !e
                        .as_reply()
                        .is_some_and(|(c, _, _)| ALREADY_ROLLED_BACK.contains(&c))
                {
                    self.conns.remove(b.dn);
                }
            }
            if b.wrote {
                failure = Some((name, err));
            } else {
                debug!(datanode = %name, error = %err, "a read-only XA branch failed to end");
            }
        }
        match failure {
            None => {
                self.shared
                    .xa
                    .stats
                    .one_phase
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            Some((name, Error::BackendIo(_))) => Err(Error::reply(
                LOST_BACKEND.0,
                &LOST_BACKEND.1,
                format!(
                    "COMMIT on datanode {name} lost its connection: whether the transaction \
                     committed there is unknown (it wrote to that datanode only)"
                ),
            )),
            Some((name, e)) => {
                let (code, state, msg) = match e.as_reply() {
                    Some((c, s, m)) => (c, *s, m.to_string()),
                    None => (XA_RBROLLBACK.0, XA_RBROLLBACK.1, e.to_string()),
                };
                Err(Error::reply(
                    code,
                    &state,
                    format!(
                        "COMMIT failed on datanode {name} ({msg}); the transaction was rolled \
                         back on every datanode"
                    ),
                ))
            }
        }
    }

    /// Two or more branches wrote: prepare, decide, commit.
    async fn xa_two_phase(
        &mut self,
        routing: &Routing,
        branches: &[Branch],
        gtrid: &str,
    ) -> Result<()> {
        let names = |dn: DatanodeId| routing.topology.datanodes[dn].name.clone();
        let steps: Vec<_> = branches
            .iter()
            .map(|b| {
                let mut s = vec![format!("XA END {}", b.xid)];
                if b.wrote {
                    s.push(format!("XA PREPARE {}", b.xid));
                }
                (b.dn, s)
            })
            .collect();
        let results = self.pipeline(&steps).await;
        let mut failure: Option<(DatanodeId, Error)> = None;
        for (b, r) in branches.iter().zip(results) {
            if !b.wrote {
                continue;
            }
            if let Some(e) = r.into_iter().find_map(|x| x.err()) {
                // A prepare cut off may have prepared the branch: recovery rolls it back (no
                // decision is ever written for this gtrid).
                if matches!(e, Error::BackendIo(_)) {
                    self.shared.xa.orphan(gtrid);
                }
                if failure.is_none() {
                    failure = Some((b.dn, e));
                }
            }
        }
        if let Some((dn, e)) = failure {
            let _ = self.xa_rollback_ended(routing, branches, gtrid).await;
            self.shared
                .xa
                .stats
                .rolled_back
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let (code, state, msg) = match e.as_reply() {
                Some((c, s, m)) => (c, *s, m.to_string()),
                None => (
                    XA_RBROLLBACK.0,
                    XA_RBROLLBACK.1,
                    "lost connection".to_string(),
                ),
            };
            return Err(Error::reply(
                code,
                &state,
                format!(
                    "COMMIT failed: datanode {} could not prepare ({msg}); the transaction was \
                     rolled back on every datanode",
                    names(dn)
                ),
            ));
        }
        fault_point(Fault::AfterPrepare);
        let written: Vec<String> = branches
            .iter()
            .filter(|b| b.wrote)
            .map(|b| names(b.dn))
            .collect();
        match self.record_decision(gtrid, &written.join(",")).await {
            Ok(()) => {}
            Err(Decision::Refused(why)) => {
                let _ = self.xa_rollback_ended(routing, branches, gtrid).await;
                self.shared
                    .xa
                    .stats
                    .rolled_back
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Err(Error::reply(
                    XA_RBROLLBACK.0,
                    &XA_RBROLLBACK.1,
                    format!(
                        "COMMIT failed: {why}; the transaction was rolled back on every datanode"
                    ),
                ));
            }
            Err(Decision::Unknown(why)) => {
                // The decision may be written: the branches stay prepared, their connections
                // are closed, and recovery finishes them as the log says.
                for b in branches {
                    self.conns.remove(b.dn);
                }
                self.shared.xa.orphan(gtrid);
                warn!(gtrid, error = %why, "XA decision write cut off: recovery decides");
                return Err(Error::reply(
                    LOST_BACKEND.0,
                    &LOST_BACKEND.1,
                    format!(
                        "COMMIT's decision record was cut off ({why}): recovery commits or \
                         rolls back the transaction on every datanode, as the record says"
                    ),
                ));
            }
        }
        fault_point(Fault::AfterDecision);
        if crate::xa::fault() == Some(Fault::LoseCommit)
            && let Some(b) = branches.iter().find(|b| b.wrote)
        {
            self.conns.release_slot_of(b.dn);
        }
        let steps: Vec<_> = branches
            .iter()
            .map(|b| {
                let s = if b.wrote {
                    format!("XA COMMIT {}", b.xid)
                } else {
                    format!("XA COMMIT {} ONE PHASE", b.xid)
                };
                (b.dn, vec![s])
            })
            .collect();
        let results = self.pipeline(&steps).await;
        let mut pending = Vec::new();
        for (b, r) in branches.iter().zip(results) {
            if let Some(e) = r.into_iter().find_map(|x| x.err()) {
                // Its connection is closed so that the branch is free (a prepared branch
                // outlives its connection).
                self.conns.release_slot_of(b.dn);
                if !b.wrote {
                    debug!(datanode = %names(b.dn), error = %e, "a read-only XA branch failed to end");
                    continue;
                }
                // Committed all the same (the decision says commit), but not yet visible
                // there: finished now on a connection of its own, before the client is told
                // (it would read its own commit back stale otherwise).
                match self.commit_prepared(routing, b, gtrid).await {
                    Ok(()) => {}
                    Err(again) => {
                        warn!(gtrid, datanode = %names(b.dn), error = %e, again = %again, "XA COMMIT failed after the decision: recovery commits the branch");
                        self.shared.xa.orphan(gtrid);
                        pending.push(format!("{} ({again})", names(b.dn)));
                    }
                }
            }
        }
        self.shared
            .xa
            .stats
            .two_phase
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if pending.is_empty() {
            return Ok(());
        }
        Err(Error::reply(
            PARTIAL_COMMIT.0,
            &PARTIAL_COMMIT.1,
            format!(
                "COMMIT is decided and took effect on every datanode but {}, whose part is \
                 prepared and will be committed by recovery once it can be reached: do not \
                 run the transaction again",
                pending.join(", ")
            ),
        ))
    }

    /// `XA COMMIT` of prepared branch `b` (of `gtrid`) on a new connection to its datahost's
    /// primary, within the pool's connect timeout. XAER_NOTA (1397) is what a server answers
    /// both for a branch no longer prepared (the first `XA COMMIT` took effect before its
    /// answer was lost: nothing else ends a branch whose decision is commit) and for one still
    /// attached to the connection that prepared it (its close not yet seen by the server):
    /// `XA RECOVER` tells them apart, and the second is tried again.
    async fn commit_prepared(&mut self, routing: &Routing, b: &Branch, gtrid: &str) -> Result<()> {
        let node = &routing.topology.datanodes[b.dn];
        let server = self.rt.backends.primary(node.datahost);
        let pool = self.rt.pools[server].clone();
        let limit = self.rt.pool.settings().connect_timeout;
        let wire = self.routed_wire();
        let id = Xid::branch(gtrid, &node.name);
        let sql = format!("XA COMMIT {}", b.xid);
        let run = async {
            let mut conn = pool
                .acquire(Wanted {
                    wire,
                    prefer: 0,
                    schema: None,
                    multi_statements: false,
                })
                .await?;
            loop {
                match conn.command(COM_QUERY, sql.as_bytes()).await {
                    Ok(_) => break,
                    Err(e) if e.as_reply().is_some_and(|(c, _, _)| c == XAER_NOTA) => {
                        if !still_prepared(&mut conn, &id).await? {
                            break;
                        }
                        crate::timers::sleep(std::time::Duration::from_millis(20)).await;
                    }
                    // A branch that changed nothing is prepared read-only: its commit ends
                    // it with XA_RBROLLBACK, there being nothing to commit (nothing else
                    // rolls back a branch whose decision is commit).
                    Err(e) if e.as_reply().is_some_and(|(c, _, _)| c == XA_RBROLLBACK.0) => break,
                    Err(e) => return Err(e),
                }
            }
            conn.release();
            Ok(())
        };
        match crate::timers::timeout(limit, run).await {
            Ok(r) => r,
            Err(_) => Err(Error::backend_unreachable(
                &pool.spec().addr(),
                "XA COMMIT timed out",
            )),
        }
    }

    /// `XA ROLLBACK` on branches already ended (some prepared).
    async fn xa_rollback_ended(
        &mut self,
        routing: &Routing,
        branches: &[Branch],
        gtrid: &str,
    ) -> Result<()> {
        let steps: Vec<_> = branches
            .iter()
            .filter(|b| self.conns.position(b.dn).is_some())
            .map(|b| (b.dn, vec![format!("XA ROLLBACK {}", b.xid)]))
            .collect();
        let results = self.pipeline(&steps).await;
        for ((dn, _), r) in steps.iter().zip(results) {
            if let Some(e) = r.into_iter().find_map(|x| x.err())
                && !e
                    .as_reply()
                    .is_some_and(|(c, _, _)| ALREADY_ROLLED_BACK.contains(&c))
            {
                warn!(gtrid, datanode = %routing.topology.datanodes[*dn].name, error = %e, "XA ROLLBACK failed: recovery rolls the branch back");
                self.conns.remove(*dn);
                self.shared.xa.orphan(gtrid);
            }
        }
        Ok(())
    }

    /// Writes the commit decision of `gtrid` on the log datahost's primary.
    async fn record_decision(
        &mut self,
        gtrid: &str,
        datanodes: &str,
    ) -> std::result::Result<(), Decision> {
        let Some(pool) = self.shared.xa.log_pool.clone() else {
            return Err(Decision::Refused("no XA decision log".to_string()));
        };
        let conn = pool
            .acquire(Wanted {
                wire: self.routed_wire(),
                prefer: 0,
                schema: None,
                multi_statements: false,
            })
            .await;
        let mut conn = match conn {
            Ok(c) => c,
            Err(e) => {
                return Err(Decision::Refused(format!(
                    "no connection to the XA decision log ({e})"
                )));
            }
        };
        if let Err(e) = crate::backend::pool::align_to(&Default::default(), None, &mut conn).await {
            return Err(Decision::Refused(format!(
                "no usable connection to the XA decision log ({e})"
            )));
        }
        match log::record_commit(&mut conn, gtrid, datanodes).await {
            Ok(()) => {
                conn.release();
                Ok(())
            }
            Err(e) if e.as_reply().is_some_and(|(c, _, _)| c == log::DUP_ENTRY) => {
                conn.release();
                Err(Decision::Refused(
                    "XA recovery had already decided to roll it back (the transaction was \
                     prepared for longer than server.xa.recovery_grace)"
                        .to_string(),
                ))
            }
            Err(e @ Error::Reply { .. }) => {
                conn.release();
                Err(Decision::Refused(format!(
                    "the XA decision log refused the decision ({e})"
                )))
            }
            Err(e) => Err(Decision::Unknown(e.to_string())),
        }
    }
}

/// Whether `XA RECOVER` on `conn` lists branch `id` as prepared.
async fn still_prepared(conn: &mut crate::backend::pool::PooledConn, id: &Xid) -> Result<bool> {
    let rows = conn.query_rows("XA RECOVER").await?;
    Ok(rows
        .iter()
        .filter_map(|r| crate::xa::recovery::our_xid(r))
        .any(|x| x == *id))
}

/// Why the decision was not (surely) written.
enum Decision {
    /// Not written: the transaction rolls back.
    Refused(String),
    /// Perhaps written (the connection broke): recovery decides.
    Unknown(String),
}
