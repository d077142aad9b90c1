//! Shoal's own administration statements, recognised here and nowhere else:
//! `SHOW SHOAL VERSION | SESSIONS | POOLS | BACKENDS | XA | QUERIES | CONFIG`,
//! `RESET SHOAL QUERIES` and `RELOAD SHOAL CONFIG`.
//!
//! A statement is Shoal's when its first words are `SHOW SHOAL`, `RESET SHOAL` or
//! `RELOAD SHOAL` (comments skipped, as the server skips them): no MariaDB statement starts
//! so. Anything else after those words is Shoal's syntax error (1064), answered by Shoal: it
//! never goes to a backend.

use super::lex::{Token, tokenize};
use crate::error::RouterError;

/// One administration statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdminStatement {
    /// `SHOW SHOAL VERSION`: Shoal's version, the backend version announced, uptime.
    Version,
    /// `SHOW SHOAL SESSIONS`: Shoal's processlist.
    Sessions,
    /// `SHOW SHOAL POOLS`: per server, its backend connection pool.
    Pools,
    /// `SHOW SHOAL BACKENDS`: every server of every datahost, its role and health.
    Backends,
    /// `SHOW SHOAL XA`: what the XA coordinator and recovery of this process did.
    Xa,
    /// `SHOW SHOAL QUERIES`: statement digests.
    Queries,
    /// `SHOW SHOAL CONFIG`: the configuration in force.
    Config,
    /// `RESET SHOAL QUERIES`: forgets the statement digests.
    ResetQueries,
    /// `RELOAD SHOAL CONFIG`: reads the configuration file again.
    ReloadConfig,
}

impl AdminStatement {
    /// The statement as its canonical text (upper case).
    pub fn text(self) -> &'static str {
        match self {
            AdminStatement::Version => "SHOW SHOAL VERSION",
            AdminStatement::Sessions => "SHOW SHOAL SESSIONS",
            AdminStatement::Pools => "SHOW SHOAL POOLS",
            AdminStatement::Backends => "SHOW SHOAL BACKENDS",
            AdminStatement::Xa => "SHOW SHOAL XA",
            AdminStatement::Queries => "SHOW SHOAL QUERIES",
            AdminStatement::Config => "SHOW SHOAL CONFIG",
            AdminStatement::ResetQueries => "RESET SHOAL QUERIES",
            AdminStatement::ReloadConfig => "RELOAD SHOAL CONFIG",
        }
    }
}

/// [`admin_tokens`] on raw statement bytes, for the path that has no tokens (the relay path).
/// A cheap byte check first: statements without the word `SHOAL` (nearly all) cost one scan.
pub fn parse_admin(sql: &[u8]) -> Option<Result<AdminStatement, RouterError>> {
    if !contains_shoal(sql) {
        return None;
    }
    let text = std::str::from_utf8(sql).ok()?;
    let toks = tokenize(text).ok()?;
    admin_tokens(text, &toks)
}

/// Whether `sql` contains `SHOAL` in any case: what a statement of the family must contain.
pub fn contains_shoal(sql: &[u8]) -> bool {
    sql.windows(5).any(|w| w.eq_ignore_ascii_case(b"SHOAL"))
}

/// The administration statement `toks` spell: `None` when they do not start with
/// `SHOW|RESET|RELOAD SHOAL`; a syntax error (1064) when they do but go on otherwise.
pub fn admin_tokens(sql: &str, toks: &[Token]) -> Option<Result<AdminStatement, RouterError>> {
    let [verb, shoal, rest @ ..] = toks else {
        return None;
    };
    if !shoal.is_kw(sql, "SHOAL") {
        return None;
    }
    let show = verb.is_kw(sql, "SHOW");
    let reset = verb.is_kw(sql, "RESET");
    let reload = verb.is_kw(sql, "RELOAD");
    if !(show || reset || reload) {
        return None;
    }
    let rest = match rest.split_last() {
        Some((last, body)) if last.is_punct(sql, ";") => body,
        _ => rest,
    };
    let stmt = match rest {
        [what] if show => [
            ("VERSION", AdminStatement::Version),
            ("SESSIONS", AdminStatement::Sessions),
            ("POOLS", AdminStatement::Pools),
            ("BACKENDS", AdminStatement::Backends),
            ("XA", AdminStatement::Xa),
            ("QUERIES", AdminStatement::Queries),
            ("CONFIG", AdminStatement::Config),
        ]
        .into_iter()
        .find(|(w, _)| what.is_kw(sql, w))
        .map(|(_, s)| s),
        [what] if reset && what.is_kw(sql, "QUERIES") => Some(AdminStatement::ResetQueries),
        [what] if reload && what.is_kw(sql, "CONFIG") => Some(AdminStatement::ReloadConfig),
        _ => None,
    };
    Some(stmt.ok_or_else(|| {
        // Near the first word MariaDB would not accept: the one after SHOAL (or the end).
        let at = rest.first().map_or(sql.len(), |t| t.start as usize);
        syntax_error(sql, at)
    }))
}

/// MariaDB's 1064 for a statement that stops making sense at byte `at`.
fn syntax_error(sql: &str, at: usize) -> RouterError {
    let near: String = sql[at..].chars().take(80).collect();
    let line = sql[..at].matches('\n').count() + 1;
    RouterError::new(
        1064,
        "42000",
        format!(
            "You have an error in your SQL syntax; check the manual that corresponds to your \
             MariaDB server version for the right syntax to use near '{near}' at line {line}"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::{AdminStatement as A, parse_admin};

    fn parsed(sql: &str) -> Option<Result<A, u16>> {
        parse_admin(sql.as_bytes()).map(|r| r.map_err(|e| e.code()))
    }

    #[test]
    fn reads_every_statement() {
        for s in [
            A::Version,
            A::Sessions,
            A::Pools,
            A::Backends,
            A::Xa,
            A::Queries,
            A::Config,
            A::ResetQueries,
            A::ReloadConfig,
        ] {
            assert_eq!(parsed(s.text()), Some(Ok(s)));
            assert_eq!(parsed(&s.text().to_lowercase()), Some(Ok(s)));
        }
    }

    #[test]
    fn comments_case_and_semicolon_do_not_matter() {
        assert_eq!(parsed("show Shoal sessions;"), Some(Ok(A::Sessions)));
        assert_eq!(parsed("  SHOW SHOAL POOLS ; "), Some(Ok(A::Pools)));
        assert_eq!(
            parsed("/* tool */ SHOW /* x */ SHOAL -- c\n VERSION"),
            Some(Ok(A::Version))
        );
        assert_eq!(
            parsed("# c\nRELOAD SHOAL CONFIG"),
            Some(Ok(A::ReloadConfig))
        );
        assert_eq!(parsed("reset shoal queries;"), Some(Ok(A::ResetQueries)));
    }

    #[test]
    fn other_statements_are_not_admin() {
        for sql in [
            "SELECT 'SHOW SHOAL VERSION'",
            "/* SHOW SHOAL VERSION */ SELECT 1",
            "SHOW TABLES",
            "SHOW `SHOAL` VERSION",
            "SELECT shoal FROM t",
            "RESET QUERY CACHE",
            "SHOW FULL PROCESSLIST",
            "",
        ] {
            assert_eq!(parsed(sql), None, "{sql}");
        }
    }

    #[test]
    fn garbage_after_shoal_is_a_syntax_error() {
        for sql in [
            "SHOW SHOAL",
            "SHOW SHOAL;",
            "SHOW SHOAL SECRETS",
            "SHOW SHOAL VERSION extra",
            "SHOW SHOAL VERSION; SELECT 1",
            "RESET SHOAL CONFIG",
            "RELOAD SHOAL QUERIES",
            "RESET SHOAL",
            "SHOW SHOAL 'VERSION'",
        ] {
            assert_eq!(parsed(sql), Some(Err(1064)), "{sql}");
        }
        let e = super::parse_admin(b"SHOW SHOAL\n SECRETS now")
            .unwrap()
            .unwrap_err();
        assert!(
            e.message().ends_with("near 'SECRETS now' at line 2"),
            "{}",
            e.message()
        );
    }
}
