//! User variables held by the session, in the narrow form dump files and tools use them to
//! save and restore system variables:
//!
//! ```sql
//! SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO';
//! ...
//! SET SQL_MODE=@OLD_SQL_MODE;
//! ```
//!
//! A user variable set on one backend connection would live on that connection only, and a
//! session reads over several; so Shoal keeps the value itself: `SET @v = @@var` reads the
//! session's value of `var` (on a connection in the session's state), `SET @v = <literal>` or
//! `= @w` takes the value as written, and a system variable set from `@v` is set to that value
//! (the SET sent to the backend carries it as a literal). Any other statement that reads a
//! variable the session holds is refused (1235): the backend would read NULL (the statement
//! plan's refusal, `shoal_router::sql::effects::reads_held_var`).

use shoal_router::plan::{Params, Target};
use shoal_router::sql::classify::{SetAssignment, VarScope};
use shoal_router::sql::effects::user_var;

use super::unsupported;
use crate::error::Result;
use crate::exec::Cursor;
use crate::runtime::routing::Routing;

/// `@@name`, `@@session.name`, `@@local.name`: the system variable's name.
fn session_var(text: &str) -> Option<&str> {
    let name = text.strip_prefix("@@")?;
    let lower = name.to_ascii_lowercase();
    let name = if lower.starts_with("session.") {
        &name[8..]
    } else if lower.starts_with("local.") {
        &name[6..]
    } else if lower.starts_with("global.") {
        return None;
    } else {
        name
    };
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .then_some(name)
}

/// `value` names a user variable (`@x`, not `@@x`) outside quotes.
pub(super) fn mentions_user_var(value: &str) -> bool {
    let b = value.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < b.len() {
        match (quote, b[i]) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), b'\\') => i += 1,
            (Some(_), _) => {}
            (None, q @ (b'\'' | b'"' | b'`')) => quote = Some(q),
            (None, b'@') if b.get(i + 1) == Some(&b'@') => i += 1,
            (None, b'@') => return true,
            _ => {}
        }
        i += 1;
    }
    false
}

/// A literal as SET writes it: a number, a quoted string, NULL, TRUE/FALSE, ON/OFF.
fn is_literal(value: &str) -> bool {
    let v = value.trim();
    let number = v.strip_prefix('-').unwrap_or(v);
    let quoted = |q: char| v.len() >= 2 && v.starts_with(q) && v.ends_with(q);
    (!number.is_empty() && number.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
        || quoted('\'')
        || ["NULL", "TRUE", "FALSE", "ON", "OFF"]
            .iter()
            .any(|w| v.eq_ignore_ascii_case(w))
}

/// A value read from a backend as a literal: numbers as written, text as a character string
/// in hex (read the same under any sql_mode).
fn literal_of(cell: Option<&[u8]>, numeric: bool) -> String {
    match cell {
        None => "NULL".to_string(),
        Some(v) if numeric => String::from_utf8_lossy(v).into_owned(),
        Some(v) => {
            let hex: String = v.iter().map(|b| format!("{b:02X}")).collect();
            format!("_utf8mb4 X'{hex}'")
        }
    }
}

impl Cursor {
    /// A SET with user variables: those assigned are held by the session, references to held
    /// ones are replaced by their values. Returns the SET of the system variables left to run
    /// on a backend, if any, and those assignments.
    pub(super) async fn set_user_vars(
        &mut self,
        routing: &Routing,
        vars: &[SetAssignment],
    ) -> Result<Option<(String, Vec<SetAssignment>)>> {
        let mut rest: Vec<SetAssignment> = Vec::new();
        for v in vars {
            let value = v.value.trim();
            let held = user_var(value).map(|n| {
                self.user_vars
                    .get(&n)
                    .cloned()
                    .unwrap_or_else(|| "NULL".to_string())
            });
            match v.scope {
                VarScope::User => {
                    let literal = if let Some(h) = held {
                        h
                    } else if let Some(sys) = session_var(value) {
                        self.read_session_var(routing, sys).await?
                    } else if is_literal(value) {
                        value.to_string()
                    } else {
                        return Err(unsupported(
                            "SET @variable to an expression (through Shoal a user variable \
                             holds a literal, another user variable or a system variable's \
                             session value)",
                        ));
                    };
                    self.user_vars.insert(v.name.to_lowercase(), literal);
                }
                VarScope::Global => return Err(unsupported("SET GLOBAL")),
                VarScope::Session => {
                    let mut a = v.clone();
                    if let Some(h) = held {
                        a.value = h;
                    } else if mentions_user_var(value) {
                        return Err(unsupported(
                            "a user variable inside an expression of SET (through Shoal a \
                             system variable can be set from one user variable)",
                        ));
                    }
                    rest.push(a);
                }
            }
        }
        if rest.is_empty() {
            return Ok(None);
        }
        Ok(Some((set_text(&rest), rest)))
    }

    /// The session's value of system variable `name`, as a literal.
    async fn read_session_var(&mut self, routing: &Routing, name: &str) -> Result<String> {
        let t = Target {
            datanode: self.any_datanode(routing),
            sql: format!("SELECT @@session.{name}").into(),
            params: Params::first(0),
            qualified: false,
        };
        let (defs, rows) = self.small_answer(routing, &t).await?;
        let numeric = match defs.first() {
            Some(d) => {
                use mysql_common::constants::ColumnType as T;
                let c = crate::merge::parse_column(d)?;
                matches!(
                    c.column_type,
                    T::MYSQL_TYPE_TINY
                        | T::MYSQL_TYPE_SHORT
                        | T::MYSQL_TYPE_LONG
                        | T::MYSQL_TYPE_LONGLONG
                        | T::MYSQL_TYPE_INT24
                        | T::MYSQL_TYPE_DECIMAL
                        | T::MYSQL_TYPE_NEWDECIMAL
                        | T::MYSQL_TYPE_FLOAT
                        | T::MYSQL_TYPE_DOUBLE
                )
            }
            None => false,
        };
        let cell = rows
            .first()
            .and_then(|r| r.first())
            .and_then(|c| c.as_deref());
        Ok(literal_of(cell, numeric))
    }
}

/// The SET a backend runs for system-variable assignments `vars` (session scope, values as
/// written or filled in).
pub(super) fn set_text(vars: &[shoal_router::sql::SetAssignment]) -> String {
    let list: Vec<String> = vars
        .iter()
        .map(|a| format!("@@session.{} = {}", a.name, a.value))
        .collect();
    format!("SET {}", list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_forms() {
        assert_eq!(session_var("@@SQL_MODE"), Some("SQL_MODE"));
        assert_eq!(session_var("@@session.time_zone"), Some("time_zone"));
        assert_eq!(session_var("@@global.time_zone"), None);
        assert!(is_literal("'NO_AUTO_VALUE_ON_ZERO'"));
        assert!(is_literal("0") && is_literal("-1.5") && is_literal("NULL"));
        assert!(!is_literal("@x + 1") && !is_literal("CONCAT('a')"));
        assert!(mentions_user_var("@x + 1") && mentions_user_var("CONCAT(@@a, @b)"));
        assert!(!mentions_user_var("CONCAT(@@sql_mode, ',x')") && !mentions_user_var("'a@b'"));
        assert_eq!(
            literal_of(Some(b"+00:00"), false),
            "_utf8mb4 X'2B30303A3030'"
        );
        assert_eq!(literal_of(Some(b"1"), true), "1");
        assert_eq!(literal_of(None, true), "NULL");
    }
}
