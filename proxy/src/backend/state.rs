//! The replayable part of a MySQL session: current schema, system variables changed since the
//! connection was opened, and the multi-statement option. A client session holds the state it
//! expects; a backend connection holds the state it has; when a connection is handed to a
//! session and the two differ, the difference is replayed. Comparing them is cheap, so the hot
//! path (same state, the usual case) costs no round trip.

use std::hash::BuildHasher;
use std::sync::Arc;

use foldhash::fast::FixedState;

use crate::wire::messages::{StateChange, for_each_state_change};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionState {
    pub schema: Option<String>,
    /// System variables changed since connect.
    pub vars: Vars,
    pub multi_statements: bool,
    /// What `LAST_INSERT_ID()` returns (from the OK packets of the session's own statements).
    pub last_insert_id: u64,
}

/// System variables changed since connect, sorted by (lower-case) name, with their hash.
/// Shared, not copied: a connection aligned to a session holds the session's own list, so the
/// comparison every statement makes (and the statement cache's fingerprint) reads one pointer
/// and one hash instead of every name and value, in memory last touched long ago.
#[derive(Debug, Clone, Default)]
pub struct Vars(Arc<VarList>);

#[derive(Debug, Clone, Default)]
struct VarList {
    list: Vec<(String, String)>,
    hash: u64,
}

impl Vars {
    pub fn get(&self, name: &str) -> Option<&str> {
        let list = &self.0.list;
        list.binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| list[i].1.as_str())
    }

    fn set(&mut self, name: String, value: &str) {
        let at = self.0.list.binary_search_by(|(n, _)| n.as_str().cmp(&name));
        if let Ok(i) = at
            && self.0.list[i].1 == value
        {
            // Unchanged: the list stays shared with whoever else holds it.
            return;
        }
        let v = Arc::make_mut(&mut self.0);
        match at {
            Ok(i) => v.list[i].1 = value.to_string(),
            Err(i) => v.list.insert(i, (name, value.to_string())),
        }
        v.hash = FixedState::default().hash_one(&v.list);
    }

    pub fn clear(&mut self) {
        if !self.0.list.is_empty() {
            *self = Vars::default();
        }
    }

    pub fn iter(&self) -> std::slice::Iter<'_, (String, String)> {
        self.0.list.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.0.list.is_empty()
    }

    /// A hash of the names and values: equal lists hash alike.
    pub fn hash(&self) -> u64 {
        self.0.hash
    }

    pub fn same(&self, other: &Vars) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl PartialEq for Vars {
    fn eq(&self, other: &Vars) -> bool {
        self.same(other) || (self.0.hash == other.0.hash && self.0.list == other.0.list)
    }
}

impl Eq for Vars {}

impl<'a> IntoIterator for &'a Vars {
    type Item = &'a (String, String);
    type IntoIter = std::slice::Iter<'a, (String, String)>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl FromIterator<(String, String)> for Vars {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(it: I) -> Self {
        let mut v = Vars::default();
        for (n, val) in it {
            v.set(n.to_ascii_lowercase(), &val);
        }
        v
    }
}

impl SessionState {
    pub fn set_var(&mut self, name: &str, value: &str) {
        self.vars.set(name.to_ascii_lowercase(), value);
    }

    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name)
    }

    /// Applies what one response reported.
    pub fn apply(&mut self, t: &Tracked) {
        if let Some(s) = &t.schema {
            self.schema = Some(s.clone());
        }
        for (n, v) in &t.vars {
            self.set_var(n, v);
        }
    }

    /// Whether every variable `self` changed is also changed (to some value) in `target`:
    /// then `target` is reachable by SETs alone; otherwise the connection must be reset first.
    pub fn vars_subset_of(&self, target: &SessionState) -> bool {
        self.vars.iter().all(|(n, _)| target.var(n).is_some())
    }

    /// One `SET SESSION ...` statement taking a connection in state `from` to `self`'s
    /// variables (for those that differ), or `None` if nothing differs.
    pub fn set_statement_from(&self, from: &SessionState) -> Option<String> {
        let mut sql = String::new();
        for (n, v) in &self.vars {
            if from.var(n) == Some(v.as_str()) {
                continue;
            }
            if is_tracking_var(n) {
                continue;
            }
            sql.push_str(if sql.is_empty() { "SET " } else { ", " });
            sql.push_str("SESSION ");
            sql.push_str(n);
            sql.push('=');
            push_value(&mut sql, n, v);
        }
        (!sql.is_empty()).then_some(sql)
    }
}

/// Read-only variables the server reports as they change (MariaDB reports `last_gtid` after
/// every write when the binlog is on): facts about the connection, not state to replay.
fn is_read_only_var(name: &[u8]) -> bool {
    [
        &b"last_gtid"[..],
        b"in_transaction",
        b"warning_count",
        b"error_count",
    ]
    .iter()
    .any(|ro| name.eq_ignore_ascii_case(ro))
}

/// Our own tracking settings are never replayed from a client's state.
fn is_tracking_var(name: &str) -> bool {
    name.starts_with("session_track")
}

/// Writes a tracked value as SQL: numbers bare (integer variables refuse strings), everything
/// else as a quoted string; the character_set_* variables accept NULL.
fn push_value(sql: &mut String, name: &str, v: &str) {
    let numeric = !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_digit() || b == b'.' || b == b'-')
        && v.bytes().filter(|b| *b == b'.').count() <= 1
        && v.bytes().skip(1).all(|b| b != b'-')
        && v.bytes().any(|b| b.is_ascii_digit());
    if numeric {
        sql.push_str(v);
    } else if (v.is_empty() || v.eq_ignore_ascii_case("NULL")) && name.starts_with("character_set")
    {
        sql.push_str("NULL");
    } else {
        sql.push('\'');
        for c in v.chars() {
            match c {
                '\'' => sql.push_str("''"),
                '\\' => sql.push_str("\\\\"),
                _ => sql.push(c),
            }
        }
        sql.push('\'');
    }
}

/// What the session-state blocks of one response reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tracked {
    pub schema: Option<String>,
    pub vars: Vec<(String, String)>,
    /// The server said "session state changed".
    pub state_changed: bool,
    /// The GTID of the write this response committed: MariaDB's `last_gtid` (binlog on), or
    /// MySQL's SESSION_TRACK_GTIDS (`session_track_gtids=OWN_GTID`).
    pub gtid: Option<String>,
}

impl Tracked {
    pub fn is_empty(&self) -> bool {
        self.schema.is_none() && self.vars.is_empty() && !self.state_changed && self.gtid.is_none()
    }

    /// A state change that tracked variables and schema do not explain (user variables,
    /// temporary tables, SQL PREPARE...): the connection cannot be shared any more.
    pub fn unexplained_change(&self) -> bool {
        self.state_changed && self.schema.is_none() && self.vars.is_empty()
    }

    /// Adds the entries of one session-state block; `false` if it was malformed.
    pub fn add_block(&mut self, block: &[u8]) -> bool {
        for_each_state_change(block, |c| match c {
            StateChange::SysVar(n, v) => {
                // Checked before allocating: `last_gtid` comes with every write when the
                // binlog is on.
                if n.eq_ignore_ascii_case(b"last_gtid") {
                    if !v.is_empty() {
                        self.gtid = Some(String::from_utf8_lossy(v).into_owned());
                    }
                } else if !is_read_only_var(n) {
                    self.vars.push((
                        String::from_utf8_lossy(n).to_ascii_lowercase(),
                        String::from_utf8_lossy(v).into_owned(),
                    ));
                }
            }
            StateChange::Schema(s) => self.schema = Some(String::from_utf8_lossy(s).into_owned()),
            StateChange::StateChanged => self.state_changed = true,
            StateChange::Gtids(g) if !g.is_empty() => {
                self.gtid = Some(String::from_utf8_lossy(g).into_owned())
            }
            StateChange::Gtids(_) | StateChange::Other(_) => {}
        })
        .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shared lists are never edited under another holder, equal lists compare and hash
    /// alike however they were built, and setting a variable to its value keeps the sharing.
    #[test]
    fn variables_are_shared_copy_on_write() {
        let mut want = SessionState::default();
        want.set_var("SQL_MODE", "ANSI");
        want.set_var("time_zone", "+00:00");
        let mut conn = SessionState {
            vars: want.vars.clone(),
            ..Default::default()
        };
        assert!(conn.vars.same(&want.vars));
        conn.set_var("time_zone", "+00:00");
        assert!(
            conn.vars.same(&want.vars),
            "an unchanged value keeps the list shared"
        );
        conn.set_var("time_zone", "+01:00");
        assert!(!conn.vars.same(&want.vars));
        assert_eq!(want.var("time_zone"), Some("+00:00"));
        assert_eq!(conn.var("time_zone"), Some("+01:00"));
        assert_ne!(conn.vars, want.vars);
        assert_ne!(conn.vars.hash(), want.vars.hash());
        // Built apart, in another order: equal, with equal hashes.
        let mut other = SessionState::default();
        other.set_var("time_zone", "+00:00");
        other.set_var("sql_mode", "ANSI");
        assert!(!other.vars.same(&want.vars));
        assert_eq!(other.vars, want.vars);
        assert_eq!(other.vars.hash(), want.vars.hash());
        other.vars.clear();
        assert!(other.vars.is_empty());
        assert_eq!(other.vars, Vars::default());
    }

    #[test]
    fn same_state_needs_no_statement() {
        let mut a = SessionState::default();
        a.set_var("sql_mode", "ANSI");
        assert_eq!(a.set_statement_from(&a.clone()), None);
    }

    #[test]
    fn set_statement_quotes_strings_and_not_numbers() {
        let mut want = SessionState::default();
        want.set_var("time_zone", "+00:00");
        want.set_var("sql_select_limit", "10");
        want.set_var("character_set_results", "");
        want.set_var("sql_mode", "it's");
        want.set_var("session_track_schema", "OFF");
        let sql = want.set_statement_from(&SessionState::default()).unwrap();
        assert_eq!(
            sql,
            "SET SESSION character_set_results=NULL, SESSION sql_mode='it''s', \
             SESSION sql_select_limit=10, SESSION time_zone='+00:00'"
        );
    }

    #[test]
    fn subset_detects_vars_needing_reset() {
        let mut conn = SessionState::default();
        conn.set_var("sql_mode", "");
        let mut sess = SessionState::default();
        assert!(!conn.vars_subset_of(&sess));
        sess.set_var("sql_mode", "ANSI");
        assert!(conn.vars_subset_of(&sess));
    }

    #[test]
    fn unexplained_change_only_without_vars_or_schema() {
        let mut t = Tracked {
            state_changed: true,
            ..Default::default()
        };
        assert!(t.unexplained_change());
        t.vars.push(("autocommit".into(), "OFF".into()));
        assert!(!t.unexplained_change());
    }
}
