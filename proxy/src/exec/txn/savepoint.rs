//! Savepoints of a transaction over several datanodes.
//!
//! The session keeps its savepoints in order (`Session::savepoints`). Each is set on every
//! datanode the transaction has touched, and on a datanode touched later right after its
//! BEGIN, in order ([`Cursor::replay_savepoints`]): so `ROLLBACK TO s` on every datanode
//! undoes exactly what followed `s`, a datanode first touched after `s` going back to its
//! start. The list follows MariaDB's rules: a name is compared without regard to case,
//! `SAVEPOINT` with an existing name moves it to the end, `ROLLBACK TO s` drops the later
//! ones, `RELEASE SAVEPOINT s` drops `s` and the later ones, the end of the transaction drops
//! all; outside a transaction (autocommit on, no BEGIN) `SAVEPOINT` does nothing and the
//! others find no savepoint (1305).

use shoal_router::sql::lex::{TokKind, Token};

use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::runtime::routing::Routing;
use crate::wire::command::COM_QUERY;

/// ER_SP_DOES_NOT_EXIST, as MariaDB reports an unknown savepoint.
const NO_SUCH_SAVEPOINT: u16 = 1305;

/// Which savepoint statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::exec) enum SavepointOp {
    Set,
    RollbackTo,
    Release,
}

/// The savepoint a statement names: the identifier after `SAVEPOINT`, after `ROLLBACK [WORK]
/// TO [SAVEPOINT]` or after `RELEASE SAVEPOINT`, with nothing after it but a `;`. `None`
/// when the statement is not of that shape (a syntax error).
pub(in crate::exec) fn savepoint_name(
    op: SavepointOp,
    sql: &str,
    toks: &[Token],
) -> Option<String> {
    let is = |i: usize, w: &str| toks.get(i).is_some_and(|t| t.is_kw(sql, w));
    let at = match op {
        SavepointOp::Set => 1,
        SavepointOp::Release => 2,
        SavepointOp::RollbackTo => {
            let mut i = 1;
            if is(i, "WORK") {
                i += 1;
            }
            if !is(i, "TO") {
                return None;
            }
            i += 1;
            // `SAVEPOINT` is optional: it is the keyword only when a name follows it.
            if is(i, "SAVEPOINT") && toks.len() > i + 1 && !toks[i + 1].is_punct(sql, ";") {
                i += 1;
            }
            i
        }
    };
    let name = toks.get(at)?;
    if !matches!(name.kind, TokKind::Word | TokKind::QuotedIdent) {
        return None;
    }
    match &toks[at + 1..] {
        [] => {}
        [end] if end.is_punct(sql, ";") => {}
        _ => return None,
    }
    let name = name.ident_value(sql);
    (!name.is_empty()).then_some(name)
}

/// `name` as a quoted identifier.
pub(in crate::exec) fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

impl Cursor {
    /// Whether the session is inside a transaction MariaDB keeps savepoints for: an explicit
    /// one, or any statement with autocommit off.
    pub(in crate::exec) fn in_multi_statement_transaction(&self) -> bool {
        self.txn_begin.is_some() || self.autocommit_off()
    }

    /// The session runs with autocommit off.
    pub(in crate::exec) fn autocommit_off(&self) -> bool {
        self.want
            .var("autocommit")
            .is_some_and(|v| v.eq_ignore_ascii_case("OFF") || v == "0")
    }

    /// SAVEPOINT, ROLLBACK TO SAVEPOINT or RELEASE SAVEPOINT `name`.
    pub(in crate::exec) async fn savepoint_statement(
        &mut self,
        routing: &Routing,
        op: SavepointOp,
        name: &str,
        reply_seq: u8,
    ) -> Result<()> {
        let found = self
            .savepoints
            .iter()
            .position(|s| s.eq_ignore_ascii_case(name));
        let sql = match op {
            SavepointOp::Set => {
                if !self.in_multi_statement_transaction() {
                    // MariaDB accepts it and keeps nothing.
                    return self.send_ok(reply_seq).await;
                }
                format!("SAVEPOINT {}", quote_ident(name))
            }
            SavepointOp::RollbackTo | SavepointOp::Release => {
                if found.is_none() {
                    return Err(Error::reply(
                        NO_SUCH_SAVEPOINT,
                        b"42000",
                        format!("SAVEPOINT {name} does not exist"),
                    ));
                }
                let word = if op == SavepointOp::Release {
                    "RELEASE"
                } else {
                    "ROLLBACK TO"
                };
                format!("{word} SAVEPOINT {}", quote_ident(name))
            }
        };
        let mut failed: Option<(String, Error)> = None;
        // Under XA a connection in autocommit-off mode joins the transaction with its next
        // statement's XA START, which replays the savepoints: until then it gets none.
        let autocommit_off = self.autocommit_off() && !self.xa_mode();
        for h in self.conns.held.iter_mut() {
            if !in_session_transaction(h, autocommit_off) {
                continue;
            }
            if op != SavepointOp::Set && !h.savepoints_set {
                continue;
            }
            let bytes = h.conn.sql_bytes(&sql).map(std::borrow::Cow::into_owned);
            let sent = match bytes {
                Ok(bytes) => h.conn.command(COM_QUERY, &bytes).await.map(|_| ()),
                Err(e) => Err(e),
            };
            if let Err(e) = sent {
                failed = Some((routing.topology.datanodes[h.dn].name.clone(), e));
                break;
            }
            h.savepoints_set = true;
        }
        if let Some((dn, e)) = failed {
            // Some datanodes moved and others did not: the transaction can no longer be
            // undone to a common point, so it is undone entirely.
            let _ = self.end_transaction(false).await;
            let (code, state, msg) = match e.as_reply() {
                Some((c, s, m)) => (c, *s, m.to_string()),
                None => {
                    let (c, s) = crate::error::LOST_BACKEND;
                    (c, s, e.to_string())
                }
            };
            return Err(Error::reply(
                code,
                &state,
                format!(
                    "{sql} failed on datanode {dn} ({msg}); the transaction was rolled back on \
                     every datanode"
                ),
            ));
        }
        match (op, found) {
            (SavepointOp::Set, found) => {
                if let Some(i) = found {
                    self.savepoints.remove(i);
                }
                self.savepoints.push(name.to_string());
            }
            (SavepointOp::RollbackTo, Some(i)) => self.savepoints.truncate(i + 1),
            (SavepointOp::Release, Some(i)) => self.savepoints.truncate(i),
            _ => {}
        }
        self.send_ok(reply_seq).await
    }

    /// Sets the session's savepoints, in order, on held connection `i`, which has just joined
    /// the transaction: a later `ROLLBACK TO` takes it back to its start.
    pub(in crate::exec) async fn replay_savepoints(&mut self, i: usize) -> Result<()> {
        let autocommit_off = self.autocommit_off();
        let xa = self.xa_mode();
        let h = &mut self.conns.held[i];
        if self.savepoints.is_empty() || h.savepoints_set {
            return Ok(());
        }
        if xa && !(h.txn_begun || h.conn.in_transaction()) {
            // Not in the transaction yet (a statement that opens no XA branch): the branch's
            // XA START replays them.
            return Ok(());
        }
        if !in_session_transaction(h, autocommit_off) {
            // Savepoints exist only in a transaction: with autocommit off the connection joins
            // it with its next statement, after these SAVEPOINTs (which would be no-ops out of
            // a transaction). It is begun here, so they mark its start.
            h.conn.command(COM_QUERY, b"START TRANSACTION").await?;
            h.txn_begun = true;
        }
        for name in &self.savepoints {
            let sql = format!("SAVEPOINT {}", quote_ident(name));
            let bytes = h.conn.sql_bytes(&sql)?.into_owned();
            h.conn.command(COM_QUERY, &bytes).await?;
        }
        h.savepoints_set = true;
        Ok(())
    }

    /// The transaction ended: no savepoint survives it.
    pub(in crate::exec) fn forget_savepoints(&mut self) {
        self.savepoints.clear();
        for h in self.conns.held.iter_mut() {
            h.savepoints_set = false;
        }
    }
}

/// Whether held connection `h` is in the session's transaction: begun, in one by the
/// server's status, or in autocommit-off mode while the session is. A connection left in
/// autocommit-off mode by an earlier implicit transaction is not: aligning it to the session
/// (`SET autocommit = 'ON'`) commits whatever it holds, savepoints included.
fn in_session_transaction(h: &crate::exec::connset::Held, autocommit_off: bool) -> bool {
    h.txn_begun || h.conn.in_transaction() || (autocommit_off && h.in_trans())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_router::sql::lex::tokenize;

    fn name(op: SavepointOp, sql: &str) -> Option<String> {
        savepoint_name(op, sql, &tokenize(sql).expect("tokens"))
    }

    #[test]
    fn reads_savepoint_names() {
        use SavepointOp::*;
        assert_eq!(name(Set, "SAVEPOINT sp").as_deref(), Some("sp"));
        assert_eq!(name(Set, "savepoint `a b`;").as_deref(), Some("a b"));
        assert_eq!(name(Set, "/* c */ SAVEPOINT s1").as_deref(), Some("s1"));
        assert_eq!(name(RollbackTo, "ROLLBACK TO s").as_deref(), Some("s"));
        assert_eq!(
            name(RollbackTo, "ROLLBACK WORK TO SAVEPOINT s;").as_deref(),
            Some("s")
        );
        assert_eq!(
            name(RollbackTo, "rollback to savepoint `x`").as_deref(),
            Some("x")
        );
        assert_eq!(
            name(RollbackTo, "ROLLBACK TO SAVEPOINT").as_deref(),
            Some("SAVEPOINT")
        );
        assert_eq!(name(Release, "RELEASE SAVEPOINT s").as_deref(), Some("s"));
        assert_eq!(name(Set, "SAVEPOINT"), None);
        assert_eq!(name(Set, "SAVEPOINT a b"), None);
        assert_eq!(name(Set, "SAVEPOINT 'a'"), None);
        assert_eq!(name(RollbackTo, "ROLLBACK WORK s"), None);
        assert_eq!(name(Release, "RELEASE SAVEPOINT s; SELECT 1"), None);
    }

    #[test]
    fn quotes_names() {
        assert_eq!(quote_ident("a`b"), "`a``b`");
    }
}
