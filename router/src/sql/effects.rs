//! What a statement does beyond its result, read on its text: whether MariaDB commits the
//! open transaction before running it, whether it may change the logical schema's tables,
//! which user variables it reads. The proxy acts on these; the reading is here, once.

use super::lex::{TokKind, Token, tokenize_into};

/// Whether MariaDB runs the statement (tokens `toks` of `sql`) with an implicit commit (and
/// refuses it inside an XA branch with 1399): DDL other than on temporary tables, table
/// maintenance, account management, index cache statements. The proxy commits the
/// transaction first, as MariaDB would. BEGIN, LOCK TABLES and SET autocommit=1 are handled
/// where the proxy runs them.
pub fn causes_implicit_commit(sql: &str, toks: &[Token]) -> bool {
    let is = |i: usize, w: &str| toks.get(i).is_some_and(|t| t.is_kw(sql, w));
    if ["CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE"]
        .iter()
        .any(|w| is(0, w))
    {
        // CREATE [OR REPLACE] TEMPORARY TABLE, DROP TEMPORARY TABLE: no implicit commit.
        return !(1..4).any(|i| is(i, "TEMPORARY"));
    }
    [
        "ANALYZE",
        "OPTIMIZE",
        "REPAIR",
        "GRANT",
        "REVOKE",
        "CACHE",
        "INSTALL",
        "UNINSTALL",
    ]
    .iter()
    .any(|w| is(0, w))
        || (is(0, "CHECK") && (is(1, "TABLE") || is(1, "TABLES")))
        || (is(0, "LOAD") && is(1, "INDEX"))
}

/// Whether a statement may change the logical schema's tables (DDL, and the stored programs
/// and views the catalog lists): the catalog's built rows are then stale. Read by its first
/// keyword (comments skipped by the tokenizer); a false positive only rebuilds the catalog.
pub fn changes_schema(sql: &[u8]) -> bool {
    const WORDS: [&[u8]; 5] = [b"CREATE", b"ALTER", b"DROP", b"RENAME", b"TRUNCATE"];
    // The hot path (a statement starting with a word): no tokenizing.
    let rest = sql.trim_ascii_start();
    if let Some(&first) = rest.first()
        && first.is_ascii_alphabetic()
    {
        // Most statements are rejected by their first letter.
        if !matches!(first.to_ascii_uppercase(), b'C' | b'A' | b'D' | b'R' | b'T') {
            return false;
        }
        let n = rest
            .iter()
            .position(|c| !c.is_ascii_alphanumeric() && *c != b'_')
            .unwrap_or(rest.len());
        return WORDS.iter().any(|w| w.eq_ignore_ascii_case(&rest[..n]));
    }
    let Ok(sql) = std::str::from_utf8(sql) else {
        return false;
    };
    let mut toks = Vec::new();
    if tokenize_into(sql, &mut toks).is_err() {
        return false;
    }
    toks.first().is_some_and(|t| {
        ["CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE"]
            .iter()
            .any(|k| t.is_kw(sql, k))
    })
}

/// `@name` (not `@@`): the user variable's key (user variable names are case-insensitive,
/// kept lower case). `None` for a system variable or a malformed name.
pub fn user_var(text: &str) -> Option<String> {
    let name = text.strip_prefix('@')?;
    if name.starts_with('@') || name.is_empty() {
        return None;
    }
    let quoted = name
        .strip_prefix('`')
        .and_then(|n| n.strip_suffix('`'))
        .or_else(|| name.strip_prefix('\'').and_then(|n| n.strip_suffix('\'')))
        .or_else(|| name.strip_prefix('"').and_then(|n| n.strip_suffix('"')));
    let name = match quoted {
        Some(n) => n,
        None if name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b == b'.') =>
        {
            name
        }
        None => return None,
    };
    Some(name.to_lowercase())
}

/// The user variables a session holds itself (see the proxy's `exec/user_vars.rs`), as the
/// planner asks about them: by key ([`user_var`]).
pub trait HeldVars {
    /// Whether it holds none (then no token is looked at).
    fn holds_none(&self) -> bool;
    /// Whether it holds the variable with key `name`.
    fn holds(&self, name: &str) -> bool;
}

impl<V, S: std::hash::BuildHasher> HeldVars for std::collections::HashMap<String, V, S> {
    fn holds_none(&self) -> bool {
        self.is_empty()
    }
    fn holds(&self, name: &str) -> bool {
        self.contains_key(name)
    }
}

impl<T: AsRef<str>> HeldVars for Vec<T> {
    fn holds_none(&self) -> bool {
        self.is_empty()
    }
    fn holds(&self, name: &str) -> bool {
        self.iter().any(|v| v.as_ref() == name)
    }
}

/// Whether `sql` (tokens `toks`) reads a user variable `held` holds.
pub fn reads_held_var(sql: &str, toks: &[Token], held: &(impl HeldVars + ?Sized)) -> bool {
    !held.holds_none()
        && toks.iter().any(|t| {
            t.kind == TokKind::Variable && user_var(t.text(sql)).is_some_and(|n| held.holds(&n))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lex::tokenize;

    fn commits(sql: &str) -> bool {
        causes_implicit_commit(sql, &tokenize(sql).expect("tokens"))
    }

    #[test]
    fn statements_with_an_implicit_commit() {
        for sql in [
            "CREATE TABLE t (a INT)",
            "alter table t add column b int",
            "DROP TABLE t",
            "TRUNCATE t",
            "RENAME TABLE a TO b",
            "CREATE INDEX i ON t (a)",
            "ANALYZE TABLE t",
            "OPTIMIZE TABLE t",
            "CHECK TABLE t",
            "GRANT SELECT ON *.* TO u",
            "/* c */ DROP VIEW v",
        ] {
            assert!(commits(sql), "{sql}");
        }
        for sql in [
            "CREATE TEMPORARY TABLE t (a INT)",
            "CREATE OR REPLACE TEMPORARY TABLE t (a INT)",
            "DROP TEMPORARY TABLE IF EXISTS t",
            "SELECT 1",
            "INSERT INTO t VALUES (1)",
            "CHECKSUM TABLE t",
            "SET autocommit = 0",
        ] {
            assert!(!commits(sql), "{sql}");
        }
    }

    #[test]
    fn schema_changes_by_first_keyword() {
        for sql in [
            "CREATE TABLE t (a INT)",
            "  alter table t add b int",
            "/* c */ DROP VIEW v",
            "truncate t",
        ] {
            assert!(changes_schema(sql.as_bytes()), "{sql}");
        }
        for sql in [
            "SELECT 1",
            "INSERT INTO t VALUES (1)",
            "/* c */ SELECT 1",
            "",
        ] {
            assert!(!changes_schema(sql.as_bytes()), "{sql}");
        }
    }

    #[test]
    fn user_variable_names_and_reads() {
        assert_eq!(user_var("@OLD_Mode").as_deref(), Some("old_mode"));
        assert_eq!(user_var("@`a b`").as_deref(), Some("a b"));
        assert_eq!(user_var("@@sql_mode"), None);
        assert_eq!(user_var("@n + 1"), None);
        let held = vec!["old_mode"];
        let reads = |sql: &str, held: &Vec<&str>| {
            reads_held_var(sql, &tokenize(sql).expect("tokens"), held)
        };
        assert!(reads("SELECT @OLD_MODE", &held));
        assert!(!reads("SELECT @other, @@sql_mode", &held));
        assert!(!reads("SELECT @old_mode", &Vec::new()));
    }
}
