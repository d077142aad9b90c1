//! Statements Shoal's tokenizer cannot read to their end (an unterminated string, quoted
//! identifier or comment; in a multi-byte charset, a lead byte can take the quote after it as
//! its second byte, as MariaDB's lexer does): MariaDB rejects them too, and its error is the
//! one the client gets. It is had by preparing the statement's bytes on a connection in the
//! session's character sets and sql_mode (a prepare runs nothing); should MariaDB prepare it
//! after all, the tokenizer's refusal stands.

use shoal_router::RouterError;

use super::request::{close_statements, prepare_freeing};
use crate::backend::pool::align_to;
use crate::backend::state::SessionState;
use crate::error::Error;
use crate::exec::Cursor;
use crate::runtime::routing::Routing;

/// The variables that decide how MariaDB reads a statement's bytes.
fn reads_statements(name: &str) -> bool {
    name.starts_with("character_set_") || name == "collation_connection" || name == "sql_mode"
}

impl Cursor {
    /// The error for the client's statement `sql` (its text as read) that the tokenizer
    /// refused with `e`: MariaDB's own (see the module docs), else `e`.
    pub(super) async fn unreadable(
        &mut self,
        routing: &Routing,
        sql: &str,
        e: &RouterError,
    ) -> Error {
        let dn = self.any_datanode(routing);
        let mut conn = match self.own_primary_connection(routing, dn).await {
            Ok(c) => c,
            Err(_) => return self.refuse(e),
        };
        let mut want = SessionState::default();
        for (n, v) in self.want.vars.iter().filter(|(n, _)| reads_statements(n)) {
            want.set_var(n, v);
        }
        let db = routing.topology.datanodes[dn].database.clone();
        if align_to(&want, Some(&db), &mut conn).await.is_err() {
            return self.refuse(e);
        }
        match prepare_freeing(&mut conn, sql, false).await {
            Ok((id, _)) => {
                close_statements(&mut conn, &[id]);
                conn.release();
                self.refuse(e)
            }
            Err(reply @ Error::Reply { .. }) => {
                conn.release();
                // MariaDB's words about what the client wrote: kept as they are.
                self.refused = true;
                reply
            }
            Err(_) => self.refuse(e),
        }
    }
}
