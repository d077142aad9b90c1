//! What a MariaDB error says of the transaction on the connection that got it.
//!
//! Most errors end only the statement: MariaDB rolls back what the statement did and the
//! transaction goes on. A few end the whole transaction on that server, and the next statement
//! of the connection runs outside it (or starts a new one with autocommit off):
//! - 1213 (ER_LOCK_DEADLOCK) and 1206 (ER_LOCK_TABLE_FULL): InnoDB rolls back the transaction
//!   (`row_mysql_handle_errors`, `thd_mark_transaction_to_rollback(thd, true)`);
//! - 1402, 1613, 1614 (XA_RBROLLBACK, XA_RBTIMEOUT, XA_RBDEADLOCK): an XA branch that was
//!   rolled back says so; it is left "rollback only" until `XA ROLLBACK`.
//!
//! Some depend on the server's settings: 1205 (ER_LOCK_WAIT_TIMEOUT) rolls back the
//! transaction only with `innodb_rollback_on_timeout` (off by default), 1020 (ER_CHECKREAD)
//! comes with `innodb_snapshot_isolation`, 1197 (ER_TRANS_CACHE_FULL) with a binlog cache too
//! small for the transaction. After those the session asks the server (`@@in_transaction`,
//! 0 once the transaction is gone, XA branches included) instead of guessing its settings.
//!
//! The session's transaction over datanodes follows: see `exec::fate`.

/// What an error did to the transaction of the connection that got it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnEffect {
    /// The server rolled back the whole transaction.
    RolledBack,
    /// It may have: ask the server.
    Maybe,
}

/// The effect of error `code` on the connection's transaction, `None` when it ends the
/// statement only.
pub fn effect(code: u16) -> Option<TxnEffect> {
    match code {
        1213 | 1206 | 1402 | 1613 | 1614 => Some(TxnEffect::RolledBack),
        1205 | 1020 | 1197 => Some(TxnEffect::Maybe),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlocks_end_the_transaction_timeouts_may_and_the_rest_do_not() {
        assert_eq!(effect(1213), Some(TxnEffect::RolledBack));
        assert_eq!(effect(1614), Some(TxnEffect::RolledBack));
        assert_eq!(effect(1205), Some(TxnEffect::Maybe));
        // A duplicate key, a statement timeout, a KILL QUERY: the statement only.
        for code in [1062, 1969, 1317, 1064, 1146] {
            assert_eq!(effect(code), None, "{code}");
        }
    }
}
