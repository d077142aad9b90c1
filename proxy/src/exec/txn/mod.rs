//! A transaction's fate, in one place: its statements with the router (BEGIN sent lazily to
//! each datanode on first touch, COMMIT and ROLLBACK to every datanode touched; SET and USE),
//! XA across datanodes (`xa`), what ends a transaction behind the client's back and how the
//! client learns it (`fate`), and savepoints (`savepoint`).

pub(super) mod fate;
pub(super) mod savepoint;
pub(super) mod xa;

use shoal_router::sql::lex::Token;
use shoal_router::sql::{SetStatement, StatementKind, VarScope};

use super::user_vars;
use super::{IN_TRANS, Use, unsupported};
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::exec::relay::Expect;
use crate::runtime::routing::Routing;
use crate::wire::command::COM_QUERY;
use savepoint::{SavepointOp, savepoint_name};

/// ER_ERROR_DURING_COMMIT: a commit across datanodes that took effect on some only.
const PARTIAL_COMMIT: u16 = 1180;

impl Cursor {
    /// `prepared`: the statement's text when it came as a prepared statement's execute;
    /// `None` when it is the client's COM_QUERY (relayed as it is where it goes to a backend).
    pub(super) async fn session_statement(
        &mut self,
        routing: &Routing,
        kind: StatementKind,
        prepared: Option<&str>,
        reply_seq: u8,
    ) -> Result<()> {
        use StatementKind as K;
        let text = |s: &Self| -> String {
            match prepared {
                Some(sql) => sql.to_string(),
                None => s.client_text(),
            }
        };
        // The statement's words as the backend reads them: comments skipped, executable
        // comments read as code (a comment never changes how a statement is read).
        let mode = self.sql_mode();
        let words = |s: &Self| -> (String, Vec<Token>) {
            let sql = text(s);
            let mut toks = Vec::new();
            if routing.router.tokenize(&sql, mode, &mut toks).is_err() {
                toks.clear();
            }
            (sql, toks)
        };
        match kind {
            K::Use(db) => self.use_logical(&db, reply_seq).await,
            K::Begin {
                consistent_snapshot,
                read_only,
            } => {
                // BEGIN inside a transaction commits it first, as MySQL does, and releases
                // the session's table locks.
                if self.txn_begin.is_some() || self.conns.in_transaction() {
                    self.end_transaction(true).await?;
                }
                self.forget_savepoints();
                self.unlock_tables().await?;
                self.txn_begin = Some(text(self));
                // XA branches replace BEGIN unless the transaction cannot write (READ ONLY)
                // or must begin everywhere at once (WITH CONSISTENT SNAPSHOT).
                self.txn_plain = if read_only {
                    // Writes fail on the servers (1792): nothing for Shoal to refuse.
                    Some("START TRANSACTION READ ONLY")
                } else if consistent_snapshot {
                    Some("WITH CONSISTENT SNAPSHOT")
                } else {
                    None
                };
                self.conns.maybe_writes = false;
                self.status |= IN_TRANS;
                if consistent_snapshot {
                    self.begin_everywhere(routing).await?;
                }
                self.send_ok(reply_seq).await
            }
            K::Commit | K::Rollback => {
                let commit = matches!(kind, K::Commit);
                let chain = {
                    let (sql, toks) = words(self);
                    toks.iter()
                        .any(|t| t.is_kw(&sql, "CHAIN") || t.is_kw(&sql, "RELEASE"))
                };
                if chain {
                    return Err(unsupported("COMMIT/ROLLBACK AND CHAIN or RELEASE"));
                }
                self.end_transaction(commit).await?;
                self.send_ok(reply_seq).await
            }
            K::Set(set) => {
                // A SET naming user variables: the session holds them (`user_vars`); what is
                // left for a backend is the system variables' part, values filled in.
                let mut set = set;
                let mut rewritten: Option<String> = None;
                if let SetStatement::Variables(vars) = &set
                    && vars.iter().any(|v| {
                        v.scope == VarScope::User || user_vars::mentions_user_var(&v.value)
                    })
                {
                    match self.set_user_vars(routing, vars).await? {
                        None => return self.send_ok(reply_seq).await,
                        Some((sql, rest)) => {
                            rewritten = Some(sql);
                            set = SetStatement::Variables(rest);
                        }
                    }
                }
                // The session trackers are how Shoal learns what every statement changed (the
                // autocommit that starts each datanode's branch included): a client's own
                // `SET session_track_...` is answered here, never sent to a backend, where it
                // would turn the trackers off (Connector/J sends one at connect).
                let tracker = |v: &shoal_router::sql::SetAssignment| {
                    v.scope == VarScope::Session && v.name.starts_with("session_track_")
                };
                if let SetStatement::Variables(vars) = &set
                    && vars.iter().any(tracker)
                {
                    let rest: Vec<_> = vars.iter().filter(|v| !tracker(v)).cloned().collect();
                    if rest.is_empty() {
                        return self.send_ok(reply_seq).await;
                    }
                    rewritten = Some(user_vars::set_text(&rest));
                    set = SetStatement::Variables(rest);
                }
                match &set {
                    SetStatement::Variables(vars) => {
                        if vars.iter().any(|v| v.scope == VarScope::Global) {
                            return Err(unsupported("SET GLOBAL"));
                        }
                        // `WHERE key IS NULL` would then mean `key = LAST_INSERT_ID()`, which
                        // the router reads as NULL and routes to the rule's null shard.
                        if vars.iter().any(|v| {
                            v.name == "sql_auto_is_null"
                                && !matches!(
                                    v.value.to_ascii_uppercase().as_str(),
                                    "0" | "OFF" | "FALSE" | "'OFF'" | "DEFAULT"
                                )
                        }) {
                            return Err(unsupported("SET sql_auto_is_null = 1"));
                        }
                        // autocommit back on commits an open transaction everywhere.
                        let autocommit_on = vars.iter().any(|v| {
                            v.name == "autocommit"
                                && matches!(
                                    v.value.to_ascii_uppercase().as_str(),
                                    "1" | "ON" | "TRUE" | "'ON'"
                                )
                        });
                        if autocommit_on && self.conns.in_transaction() {
                            self.end_transaction(true).await?;
                        }
                        if autocommit_on {
                            // The implicit transaction ends, with its savepoints, even where
                            // it touched no datanode.
                            self.forget_savepoints();
                        }
                    }
                    SetStatement::Transaction {
                        scope: VarScope::Global,
                        ..
                    } => return Err(unsupported("SET GLOBAL TRANSACTION")),
                    SetStatement::Transaction {
                        scope: VarScope::Session,
                        characteristics,
                    } if !characteristics.is_empty() && {
                        let (sql, toks) = words(self);
                        !toks
                            .get(1)
                            .is_some_and(|t| t.is_kw(&sql, "SESSION") || t.is_kw(&sql, "LOCAL"))
                    } =>
                    {
                        return Err(unsupported(
                            "SET TRANSACTION for the next transaction only (use SET SESSION \
                             TRANSACTION)",
                        ));
                    }
                    SetStatement::Other => {
                        return Err(unsupported("this form of SET"));
                    }
                    _ => {}
                }
                // Run on one connection; the variables it reports become the session's and are
                // replayed on every other connection before its next statement.
                self.run_anywhere(routing, rewritten.as_deref().or(prepared), reply_seq)
                    .await
            }
            K::Do => self.run_anywhere(routing, prepared, reply_seq).await,
            K::UnlockTables => {
                self.unlock_tables().await?;
                self.send_ok(reply_seq).await
            }
            K::Savepoint | K::RollbackToSavepoint | K::ReleaseSavepoint => {
                let op = match kind {
                    K::Savepoint => SavepointOp::Set,
                    K::RollbackToSavepoint => SavepointOp::RollbackTo,
                    _ => SavepointOp::Release,
                };
                let name = {
                    let (sql, toks) = words(self);
                    savepoint_name(op, &sql, &toks)
                };
                let Some(name) = name else {
                    return Err(Error::reply(
                        1064,
                        b"42000",
                        "You have an error in your SQL syntax near the savepoint name",
                    ));
                };
                self.savepoint_statement(routing, op, &name, reply_seq)
                    .await
            }
            K::Xa => Err(unsupported("XA transactions")),
            K::LockTables => {
                self.conns.no_branch = true;
                let (sql, toks) = words(self);
                self.lock_tables(routing, &sql, &toks, reply_seq).await
            }
            K::Kill => {
                let parsed = {
                    let (sql, toks) = words(self);
                    crate::exec::kill::kill_tokens(&sql, &toks)
                };
                match parsed {
                    Some((query_only, target)) => self.kill(query_only, target, reply_seq).await,
                    None => Err(unsupported("this form of KILL")),
                }
            }
            K::Prepare | K::Execute | K::Deallocate => {
                Err(unsupported("SQL-level PREPARE/EXECUTE"))
            }
            K::Flush => {
                use super::table_locks::Flush;
                let flush = {
                    let (sql, toks) = words(self);
                    super::table_locks::parse_flush(&sql, &toks)
                };
                self.conns.no_branch = true;
                match flush {
                    Flush::TablesWithReadLock => {
                        self.flush_tables_with_read_lock(routing, reply_seq).await
                    }
                    Flush::Tables { local, tables } => {
                        self.flush_tables(routing, local, tables, reply_seq).await
                    }
                    Flush::Other(what) => Err(unsupported(&format!(
                        "{what} (Shoal runs FLUSH TABLES [t, ...] and FLUSH TABLES WITH READ LOCK, \
                         over the tables of the logical schemas)"
                    ))),
                }
            }
            K::Show
                if {
                    let (sql, toks) = words(self);
                    server_level_show(&sql, &toks)
                } =>
            {
                self.run_anywhere(routing, prepared, reply_seq).await
            }
            K::Show
                if let Some(what) = {
                    let (sql, toks) = words(self);
                    super::server_show::parse(&sql, &toks)
                } =>
            {
                self.answer_server_show(what, reply_seq).await
            }
            other => Err(unsupported(&format!("the statement {other:?}"))),
        }
    }

    /// Runs the statement (the client's text, or `prepared`'s) on any one datanode.
    async fn run_anywhere(
        &mut self,
        routing: &Routing,
        prepared: Option<&str>,
        reply_seq: u8,
    ) -> Result<()> {
        let dn = self.any_datanode(routing);
        // SET, DO and server-level SHOW never start a transaction: with autocommit off, no XA
        // branch is opened for them (SET autocommit=1 must not run inside one).
        self.conns.no_branch = true;
        self.run_on(
            routing,
            dn,
            Use::Text,
            prepared,
            Expect::Results { binary: false },
            reply_seq,
        )
        .await
        .map(|_| ())
    }

    /// START TRANSACTION WITH CONSISTENT SNAPSHOT: the transaction begins at once on every
    /// datanode of the session's schema (of every schema it may use, before USE), each
    /// connection first made ready, then the BEGIN sent to all of them before any answer is
    /// read, so the snapshots are taken as close together as the network allows. Each
    /// datanode's snapshot is consistent in itself; across datanodes there is no common
    /// point in time: a transaction committed on two datanodes between their BEGINs can be
    /// seen on one and not the other.
    async fn begin_everywhere(&mut self, routing: &Routing) -> Result<()> {
        let Some(begin) = self.txn_begin.clone() else {
            return Ok(());
        };
        let topology = &routing.topology;
        let schemas: Vec<&shoal_router::topology::LogicalSchema> = match self.logical.as_deref() {
            Some(s) => topology.schema(s).into_iter().collect(),
            None => topology
                .schemas
                .values()
                .filter(|s| self.check_schema_allowed(&s.name).is_ok())
                .collect(),
        };
        let mut dns: Vec<shoal_router::topology::DatanodeId> = Vec::new();
        for s in schemas {
            dns.extend(s.default_datanode);
            for t in s.tables.values() {
                use shoal_router::topology::TableDef;
                match t {
                    TableDef::Sharded(t) => dns.extend(t.shards.iter().map(|s| s.datanode)),
                    TableDef::Child(t) => dns.extend(t.shards.iter().map(|s| s.datanode)),
                    TableDef::Global(t) => dns.extend(t.datanodes.iter().copied()),
                }
            }
        }
        dns.sort_unstable();
        dns.dedup();
        if dns.len() > 1 {
            self.admit(routing).await?;
        }
        // Ready first, without the BEGIN (touch would send it).
        self.txn_begin = None;
        let mut ready = Ok(());
        for &dn in &dns {
            if let Err(e) = self.touch(routing, dn).await {
                ready = Err(e);
                break;
            }
        }
        self.txn_begin = Some(begin.clone());
        if let Err(e) = ready {
            let _ = self.end_transaction(false).await;
            return Err(e);
        }
        let mut sent = Vec::with_capacity(dns.len());
        for &dn in &dns {
            let i = self.conns.touched(dn)?;
            let h = &mut self.conns.held[i];
            let bytes = h.conn.sql_bytes(&begin)?.into_owned();
            h.conn.io.write_command(COM_QUERY, &bytes);
            sent.push(h.conn.io.flush().await.map_err(Error::BackendIo));
        }
        let mut failed = None;
        for (&dn, sent) in dns.iter().zip(sent) {
            let i = self.conns.touched(dn)?;
            let h = &mut self.conns.held[i];
            let r = match sent {
                Ok(()) => super::reader::read_write_result(&mut h.conn)
                    .await
                    .map(|_| ()),
                Err(e) => Err(e),
            };
            match r {
                Ok(()) => h.txn_begun = true,
                Err(e) => {
                    failed.get_or_insert((dn, e));
                }
            }
        }
        if let Some((dn, e)) = failed {
            if matches!(e, Error::BackendIo(_)) {
                self.conns.remove(dn);
            }
            let _ = self.end_transaction(false).await;
            return Err(match e {
                Error::BackendIo(_) => Error::lost_backend(),
                e => e.on_datanode(&topology.datanodes[dn].name),
            });
        }
        Ok(())
    }

    /// Ends the session's transaction on every datanode it touched: COMMIT (`commit`) or
    /// ROLLBACK. A commit that fails after another datanode committed is a distinct error
    /// naming both groups; it is never reported as success.
    pub(crate) async fn end_transaction(&mut self, commit: bool) -> Result<()> {
        let result = self.end_branches(commit).await;
        // Whatever ended during the ending is part of this outcome, not a fate of its own.
        self.conns.doom = None;
        for h in &mut self.conns.held {
            h.conn.txn_error = None;
        }
        result
    }

    /// [`Self::end_transaction`]'s work on every branch.
    async fn end_branches(&mut self, commit: bool) -> Result<()> {
        let word = if commit { "COMMIT" } else { "ROLLBACK" };
        self.disarm_held();
        self.forget_savepoints();
        // Transactions over datanodes exist only with the router: without it, nothing is held.
        let Some(routing) = self.rt.routing.clone() else {
            return Ok(());
        };
        if self.conns.held.iter().any(|h| h.xa) {
            return self.end_xa(&routing, commit).await;
        }
        self.xa_gtrid = None;
        self.txn_plain = None;
        let mut done: Vec<String> = Vec::new();
        let mut failed: Vec<(String, Error)> = Vec::new();
        let mut broken = Vec::new();
        let mut commits: Vec<(usize, String)> = Vec::new();
        for h in self.conns.held.iter_mut() {
            if !(h.txn_begun || h.in_trans()) {
                continue;
            }
            let name = routing.topology.datanodes[h.dn].name.clone();
            match h.conn.command(COM_QUERY, word.as_bytes()).await {
                Ok(tracked) => {
                    // What the transaction wrote is known by this GTID from now on: causal
                    // reads wait for it.
                    if let Some(gtid) = tracked.gtid {
                        commits.push((self.rt.backends.servers[h.server].datahost, gtid));
                    }
                    done.push(name)
                }
                Err(e) => {
                    if matches!(e, Error::BackendIo(_)) {
                        broken.push(h.dn);
                    }
                    failed.push((name, e));
                }
            }
            h.txn_begun = false;
        }
        for dn in broken {
            self.conns.remove(dn);
        }
        for (dh, gtid) in commits {
            self.conns.note_write(dh, Some(gtid));
        }
        self.txn_begin = None;
        self.status &= !IN_TRANS;
        if failed.is_empty() {
            self.release_conns(false).await;
            return Ok(());
        }
        let reasons: Vec<String> = failed
            .iter()
            .map(|(n, e)| match e.as_reply() {
                Some((_, _, m)) => format!("{n} ({m})"),
                None => format!("{n} ({e})"),
            })
            .collect();
        if commit && !done.is_empty() {
            return Err(Error::reply(
                PARTIAL_COMMIT,
                b"HY000",
                format!(
                    "COMMIT was partial: committed on datanodes {}; NOT committed on {}",
                    done.join(", "),
                    reasons.join(", ")
                ),
            ));
        }
        let (code, state) = match failed[0].1.as_reply() {
            Some((c, s, _)) => (c, *s),
            None => crate::error::LOST_BACKEND,
        };
        Err(Error::reply(
            code,
            &state,
            format!("{word} failed on datanodes {}", reasons.join(", ")),
        ))
    }
}

/// `SHOW` statements about the server rather than the session's data or last statement
/// (status, variables, engines, collations, character sets, plugins): the server of one
/// datanode answers them, as a client connected to it directly would see. SHOW PROCESSLIST
/// and the replication status are Shoal's own (`server_show`); SHOW WARNINGS and the rest
/// stay refused: their answer would be one backend connection's.
fn server_level_show(sql: &str, toks: &[Token]) -> bool {
    let is = |i: usize, w: &str| toks.get(i).is_some_and(|t| t.is_kw(sql, w));
    if !is(0, "SHOW") {
        return false;
    }
    let at = if is(1, "GLOBAL") || is(1, "SESSION") || is(1, "LOCAL") {
        2
    } else {
        1
    };
    [
        "STATUS",
        "VARIABLES",
        "ENGINES",
        "COLLATION",
        "CHARSET",
        "PLUGINS",
        "PRIVILEGES",
    ]
    .iter()
    .any(|w| is(at, w))
        || (is(at, "CHARACTER") && is(at + 1, "SET"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_router::sql::lex::tokenize;

    fn server_level(sql: &str) -> bool {
        server_level_show(sql, &tokenize(sql).expect("tokens"))
    }

    #[test]
    fn server_level_shows() {
        for sql in [
            "SHOW STATUS",
            "show global status like 'Uptime'",
            "SHOW SESSION VARIABLES LIKE 'max%'",
            "SHOW VARIABLES;",
            "SHOW CHARACTER SET",
            "SHOW PRIVILEGES",
            "SHOW COLLATION WHERE Charset = 'utf8mb4'",
            "SHOW ENGINES",
            "SHOW PLUGINS",
        ] {
            assert!(server_level(sql), "{sql}");
            // DBeaver prefixes every metadata statement with a comment; other clients use
            // line comments: none changes how the statement is read.
            for prefix in [
                "/* ApplicationName=DBeaver 24.0.0 - Metadata */ ",
                "-- a comment\n",
                "# a comment\n",
                "/*+ hint */",
            ] {
                let with = format!("{prefix}{sql}");
                assert!(server_level(&with), "{with}");
            }
        }
        for sql in [
            "SHOW WARNINGS",
            "SHOW PROCESSLIST",
            "SHOW CHARACTER",
            "SHOW MASTER STATUS",
            "SHOW SLAVE STATUS",
            "SELECT 'SHOW STATUS'",
            "/* SHOW STATUS */ SELECT 1",
            "-- SHOW STATUS\nSHOW PROCESSLIST",
        ] {
            assert!(!server_level(sql), "{sql}");
        }
    }
}
