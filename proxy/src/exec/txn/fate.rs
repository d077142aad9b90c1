//! A transaction's fate over datanodes, decided in one place.
//!
//! On one MariaDB, some errors end the whole transaction, not only the statement: a deadlock
//! (1213), a full lock table, a lock wait timeout with `innodb_rollback_on_timeout`
//! ([`crate::backend::txn_errors`]), and the loss of the connection. Afterwards the session is
//! outside any transaction (autocommit as it was): the client's next BEGIN or COMMIT commits
//! nothing of it. A transaction over datanodes must end the same way whichever branch the
//! server ended, or the other branches would commit half of it.
//!
//! So every path that can lose a branch only records it ([`Doom`], on the session's
//! [`crate::exec::connset::ConnSet`]): a connection removed while it carried part of the
//! transaction (`ConnSet::remove`, `ConnSet::take`), or an error of the list above read on it
//! by whoever read the response (`BackendConn::txn_error`). From then on no connection is
//! touched for the statement ([`Cursor::check_doom`]), and when the command ends,
//! [`Cursor::settle_fate`] rolls back every branch at once and ends the transaction:
//! - the client was told by an error of that command (the 1213 itself, or Shoal's error for
//!   the lost connection): the session is then outside the transaction, as on one MariaDB;
//! - the command succeeded all the same (a connection lost after its rows were sent): the
//!   client still believes its transaction open, so its next statement other than ROLLBACK
//!   gets 1402 "the transaction was rolled back" ([`Cursor::tell_doom`]), never a success
//!   that would run outside the transaction the client believes in.

use shoal_router::topology::DatanodeId;
use tracing::{debug, warn};

use crate::backend::txn_errors::{TxnEffect, effect};
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::exec::IN_TRANS;
use crate::wire::command::Command;

/// ER_XA_RBROLLBACK: what a statement gets in a transaction already rolled back.
const RBROLLBACK: (u16, [u8; 5]) = (1402, *b"XA100");

/// Why the session's transaction can no longer commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Doom {
    /// The datanode whose branch ended.
    pub datanode: DatanodeId,
    pub cause: Cause,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Its server rolled the branch back, answering this error.
    RolledBack(u16),
    /// Its connection was lost, or left in a state that is not known.
    Lost,
}

impl Doom {
    pub fn lost(datanode: DatanodeId) -> Doom {
        Doom {
            datanode,
            cause: Cause::Lost,
        }
    }

    /// The error a statement gets in the transaction it ended (`name`: the datanode's).
    fn error(&self, name: &str) -> Error {
        let why = match self.cause {
            Cause::RolledBack(code) => {
                format!("datanode {name} rolled back its part (error {code})")
            }
            Cause::Lost => format!("the connection to datanode {name} was lost"),
        };
        Error::reply(
            RBROLLBACK.0,
            &RBROLLBACK.1,
            format!(
                "Transaction branch was rolled back: {why}, so the whole transaction was rolled \
                 back on every datanode"
            ),
        )
    }
}

impl Cursor {
    /// The running statement may not go on in a doomed transaction: its error, naming why.
    pub(in crate::exec) fn check_doom(&self) -> Result<()> {
        match self.conns.doom {
            None => Ok(()),
            Some(d) => Err(d.error(&self.datanode_name(d.datanode))),
        }
    }

    fn datanode_name(&self, dn: DatanodeId) -> String {
        self.rt
            .config
            .routing
            .as_ref()
            .and_then(|r| r.topology.datanodes.get(dn))
            .map_or_else(|| dn.to_string(), |n| n.name.clone())
    }

    /// Before a command: a transaction rolled back behind the client's back (after a command
    /// that succeeded) is reported to its next statement, which does not run. ROLLBACK runs
    /// (it ends nothing, and answers OK as on one MariaDB); so do commands that are no
    /// statement of the transaction (ping, prepare, close...).
    pub(in crate::exec) fn tell_doom(&mut self, command: &Command) -> Result<()> {
        let Some(d) = self.conns.untold else {
            return Ok(());
        };
        let statement = match command {
            Command::Query => !self.command_is_rollback(),
            Command::StmtExecute { .. } => true,
            _ => false,
        };
        if !statement {
            if *command == Command::Query {
                self.conns.untold = None;
            }
            return Ok(());
        }
        self.conns.untold = None;
        self.status &= !IN_TRANS;
        Err(d.error(&self.datanode_name(d.datanode)))
    }

    /// Whether the client's COM_QUERY is a plain ROLLBACK (not ROLLBACK TO SAVEPOINT).
    fn command_is_rollback(&self) -> bool {
        let sql = &self.client_text();
        let mut toks = Vec::new();
        if shoal_router::sql::lex::tokenize_into(sql, &mut toks).is_err() {
            return false;
        }
        toks.first().is_some_and(|t| t.is_kw(sql, "ROLLBACK"))
            && !toks.iter().any(|t| t.is_kw(sql, "TO"))
    }

    /// After a command: whatever ended a branch of the session's transaction ends all of it
    /// (see the module docs). `told`: the client got an error for this command.
    pub(in crate::exec) async fn settle_fate(&mut self, told: bool) {
        self.note_branch_errors().await;
        let Some(doom) = self.conns.doom else {
            return;
        };
        let name = self.datanode_name(doom.datanode);
        warn!(datanode = %name, cause = ?doom.cause, "a branch of the transaction ended: rolling back every datanode");
        if let Err(e) = self.end_transaction(false).await {
            // Each branch it could not roll back had its connection closed, which rolls it
            // back on the server.
            debug!(error = %e, "rollback of a doomed transaction");
        }
        self.conns.doom = None;
        if !told {
            self.conns.untold = Some(doom);
            // The client goes on believing its transaction open until told.
            self.status |= IN_TRANS;
        }
    }

    /// Takes the transaction-ending errors the session's connections read during the command
    /// ([`crate::backend::txn_errors`]) into the transaction's fate. Where the error only may
    /// have ended the transaction, the server is asked.
    async fn note_branch_errors(&mut self) {
        for i in 0..self.conns.held.len() {
            let h = &mut self.conns.held[i];
            let Some(code) = h.conn.txn_error.take() else {
                continue;
            };
            if !h.in_session_transaction() || self.conns.doom.is_some() {
                continue;
            }
            let ended = match effect(code) {
                Some(TxnEffect::RolledBack) => Some(Cause::RolledBack(code)),
                Some(TxnEffect::Maybe) => {
                    match h.conn.query_value("SELECT @@in_transaction").await {
                        Ok(Some(v)) if v == "1" => None,
                        Ok(_) => Some(Cause::RolledBack(code)),
                        Err(e) => {
                            debug!(error = %e, "asking a branch whether its transaction is open");
                            Some(Cause::Lost)
                        }
                    }
                }
                None => None,
            };
            if let Some(cause) = ended {
                self.conns.doom = Some(Doom {
                    datanode: h.dn,
                    cause,
                });
            }
        }
    }
}
