//! Statement classification by leading keywords, without a full parse.
//!
//! The session layer needs to know, for every statement, whether it changes session state
//! (`SET NAMES`, `USE`, `BEGIN`...) and the planner needs to know whether to parse it at all.
//! Several of these statements are not understood by sqlparser (`START TRANSACTION WITH
//! CONSISTENT SNAPSHOT`, `XA`, `PREPARE s FROM '...'`, `DO`, `SET CHARACTER SET`), so they are
//! recognised here from tokens. Leading comments are skipped; executable comments
//! (`/*!40101 SET NAMES utf8 */`) count as code, as MySQL runs them.

use super::lex::{TokKind, Token, tokenize};

/// What kind of statement a text is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatementKind {
    /// `SELECT`, `WITH ... SELECT`, `(SELECT ...)`, `TABLE t`, `VALUES ...`.
    Select,
    Insert,
    Replace,
    Update,
    Delete,
    /// `SET ...` with its parsed form.
    Set(SetStatement),
    /// `SHOW ...`
    Show,
    /// `USE db`
    Use(String),
    /// `BEGIN [WORK]`, `START TRANSACTION [WITH CONSISTENT SNAPSHOT] [, READ ONLY|READ WRITE]`.
    Begin {
        consistent_snapshot: bool,
        read_only: bool,
    },
    /// `COMMIT [WORK] [AND [NO] CHAIN] [[NO] RELEASE]`
    Commit,
    /// `ROLLBACK [WORK]` (not to a savepoint).
    Rollback,
    /// `SAVEPOINT s`
    Savepoint,
    /// `ROLLBACK [WORK] TO [SAVEPOINT] s`
    RollbackToSavepoint,
    /// `RELEASE SAVEPOINT s`
    ReleaseSavepoint,
    /// `XA START|END|PREPARE|COMMIT|ROLLBACK|RECOVER ...`
    Xa,
    /// `LOCK TABLE[S] ...`
    LockTables,
    /// `UNLOCK TABLE[S]`
    UnlockTables,
    /// `DO expr`
    Do,
    /// `KILL [CONNECTION|QUERY] id`
    Kill,
    /// SQL-level `PREPARE s FROM ...`
    Prepare,
    /// SQL-level `EXECUTE s [USING ...]`
    Execute,
    /// `DEALLOCATE|DROP PREPARE s`
    Deallocate,
    /// `FLUSH ...`
    Flush,
    /// `CALL proc(...)`
    Call,
    /// `EXPLAIN ROUTE <sql>`: Shoal's own, answered from the route plan.
    ExplainRoute,
    /// `EXPLAIN|DESCRIBE|DESC` of a statement, or of a table (`DESC t`).
    Explain,
    /// `CREATE|ALTER|DROP|TRUNCATE|RENAME` (also `DROP PREPARE` is [`Self::Deallocate`]).
    Ddl(DdlKind),
    /// `LOAD DATA|XML`
    Load,
    /// `HANDLER ...`
    Handler,
    /// `ANALYZE|OPTIMIZE|REPAIR|CHECK|CHECKSUM TABLE`
    TableMaintenance,
    /// `GRANT|REVOKE|CREATE USER|...` account management.
    Account,
    /// `HELP ...`
    Help,
    /// Nothing but comments and whitespace.
    Empty,
    /// Anything else; the first keyword upper-cased.
    Other(String),
}

/// Which DDL verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DdlKind {
    Create,
    Alter,
    Drop,
    Truncate,
    Rename,
}

impl StatementKind {
    /// Statements the planner parses with sqlparser.
    pub fn is_dml(&self) -> bool {
        matches!(
            self,
            Self::Select | Self::Insert | Self::Replace | Self::Update | Self::Delete
        )
    }

    /// Statements that start, end or touch a transaction (the session pins or releases its
    /// backend connection on these).
    pub fn is_transaction_control(&self) -> bool {
        matches!(
            self,
            Self::Begin { .. }
                | Self::Commit
                | Self::Rollback
                | Self::Savepoint
                | Self::RollbackToSavepoint
                | Self::ReleaseSavepoint
                | Self::Xa
        )
    }
}

/// A `SET` statement, split into its assignments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetStatement {
    /// `SET NAMES cs [COLLATE coll]` / `SET NAMES DEFAULT`
    Names {
        charset: String,
        collation: Option<String>,
    },
    /// `SET CHARACTER SET cs` / `SET CHARSET cs`
    CharacterSet(String),
    /// `SET [GLOBAL|SESSION] TRANSACTION ...` (the characteristics as written).
    Transaction {
        scope: VarScope,
        characteristics: String,
    },
    /// `SET PASSWORD ...`, `SET ROLE ...`, `SET DEFAULT ROLE ...`, `SET STATEMENT ... FOR ...`.
    Other,
    /// `SET a = 1, @b := 2, @@session.c = DEFAULT, ...`
    Variables(Vec<SetAssignment>),
}

/// One `name = value` of a SET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAssignment {
    pub scope: VarScope,
    /// Variable name, lower-cased for system variables, as written for user variables (no `@`).
    pub name: String,
    /// The value expression's text as written (e.g. `'utf8mb4'`, `0`, `DEFAULT`, `@x + 1`).
    pub value: String,
}

/// Scope of a SET target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarScope {
    /// `SET x` / `SET SESSION x` / `SET LOCAL x` / `SET @@x` / `SET @@session.x`
    Session,
    /// `SET GLOBAL x` / `SET @@global.x`
    Global,
    /// `SET @x`
    User,
}

/// Classify one statement by its leading keywords.
pub fn classify(sql: &str) -> StatementKind {
    match tokenize(sql) {
        Ok(toks) => classify_tokens(sql, &toks),
        // Unterminated strings or comments: the backend (or the parser) reports the error.
        Err(_) => first_word_fallback(sql),
    }
}

/// [`classify`] for a session in sql_mode `mode` against a server of version `version` (see
/// [`super::lex::tokenize_with`]): `/*!NNNNN SET ... */` is a SET only where that server runs it.
pub fn classify_in(sql: &str, mode: super::SqlMode, version: u32) -> StatementKind {
    let mut toks = Vec::new();
    match super::lex::tokenize_with(sql, mode, version, &mut toks) {
        Ok(()) => classify_tokens(sql, &toks),
        Err(_) => first_word_fallback(sql),
    }
}

fn first_word_fallback(sql: &str) -> StatementKind {
    let w: String = sql
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    if w.is_empty() {
        StatementKind::Empty
    } else {
        StatementKind::Other(w.to_ascii_uppercase())
    }
}

/// Classify from an already tokenized text.
pub fn classify_tokens(sql: &str, toks: &[Token]) -> StatementKind {
    let Some(first) = toks.first() else {
        return StatementKind::Empty;
    };
    if first.is_punct(sql, "(") {
        return StatementKind::Select;
    }
    if first.kind != TokKind::Word {
        return StatementKind::Other(first.text(sql).to_string());
    }
    // Upper-case the first keyword on the stack: this runs for every statement.
    let mut buf = [0u8; 16];
    let text = first.text(sql);
    let w0: &str = if text.len() <= buf.len() {
        buf[..text.len()].copy_from_slice(text.as_bytes());
        buf[..text.len()].make_ascii_uppercase();
        std::str::from_utf8(&buf[..text.len()]).unwrap_or("")
    } else {
        ""
    };
    let is = |i: usize, k: &str| toks.get(i).is_some_and(|t| t.is_kw(sql, k));
    use StatementKind as K;
    match w0 {
        "SELECT" | "WITH" | "TABLE" | "VALUES" => K::Select,
        "INSERT" => K::Insert,
        "REPLACE" => K::Replace,
        "UPDATE" => K::Update,
        "DELETE" => K::Delete,
        "SET" => K::Set(classify_set(sql, &toks[1..])),
        "SHOW" => K::Show,
        "USE" => match toks.get(1) {
            Some(t) if matches!(t.kind, TokKind::Word | TokKind::QuotedIdent) => {
                K::Use(t.ident_value(sql))
            }
            _ => K::Other("USE".into()),
        },
        "BEGIN" => {
            // `BEGIN NOT ATOMIC` is a compound statement, not a transaction.
            if is(1, "NOT") {
                K::Other("BEGIN".into())
            } else {
                K::Begin {
                    consistent_snapshot: false,
                    read_only: false,
                }
            }
        }
        "START" if is(1, "TRANSACTION") => {
            let mut consistent_snapshot = false;
            let mut read_only = false;
            let mut i = 2;
            while i < toks.len() {
                if is(i, "CONSISTENT") && is(i + 1, "SNAPSHOT") {
                    consistent_snapshot = true;
                }
                if is(i, "READ") && is(i + 1, "ONLY") {
                    read_only = true;
                }
                i += 1;
            }
            K::Begin {
                consistent_snapshot,
                read_only,
            }
        }
        "COMMIT" => K::Commit,
        "ROLLBACK" => {
            if toks.iter().skip(1).any(|t| t.is_kw(sql, "TO")) {
                K::RollbackToSavepoint
            } else {
                K::Rollback
            }
        }
        "SAVEPOINT" => K::Savepoint,
        "RELEASE" if is(1, "SAVEPOINT") => K::ReleaseSavepoint,
        "XA" => K::Xa,
        "LOCK" if is(1, "TABLES") || is(1, "TABLE") => K::LockTables,
        "UNLOCK" => K::UnlockTables,
        "DO" => K::Do,
        "KILL" => K::Kill,
        "PREPARE" => K::Prepare,
        "EXECUTE" => K::Execute,
        "DEALLOCATE" => K::Deallocate,
        "DROP" if is(1, "PREPARE") => K::Deallocate,
        "FLUSH" => K::Flush,
        "CALL" => K::Call,
        "EXPLAIN" | "DESCRIBE" | "DESC" => {
            if is(1, "ROUTE") {
                K::ExplainRoute
            } else {
                K::Explain
            }
        }
        "CREATE" => {
            if toks
                .iter()
                .skip(1)
                .take(3)
                .any(|t| t.is_kw(sql, "USER") || t.is_kw(sql, "ROLE"))
            {
                K::Account
            } else {
                K::Ddl(DdlKind::Create)
            }
        }
        "ALTER" => {
            if is(1, "USER") {
                K::Account
            } else {
                K::Ddl(DdlKind::Alter)
            }
        }
        "DROP" => {
            if is(1, "USER") || is(1, "ROLE") {
                K::Account
            } else {
                K::Ddl(DdlKind::Drop)
            }
        }
        "TRUNCATE" => K::Ddl(DdlKind::Truncate),
        "RENAME" => {
            if is(1, "USER") {
                K::Account
            } else {
                K::Ddl(DdlKind::Rename)
            }
        }
        "LOAD" => K::Load,
        "HANDLER" => K::Handler,
        "ANALYZE" | "OPTIMIZE" | "REPAIR" | "CHECK" | "CHECKSUM" => K::TableMaintenance,
        "GRANT" | "REVOKE" => K::Account,
        "HELP" => K::Help,
        _ => K::Other(text.to_ascii_uppercase()),
    }
}

fn classify_set(sql: &str, toks: &[Token]) -> SetStatement {
    let is = |i: usize, k: &str| toks.get(i).is_some_and(|t| t.is_kw(sql, k));
    let ident = |i: usize| toks.get(i).map(|t| strip_quotes(sql, t));
    if is(0, "NAMES") {
        let charset = ident(1).unwrap_or_default();
        let collation = if is(2, "COLLATE") { ident(3) } else { None };
        return SetStatement::Names { charset, collation };
    }
    if (is(0, "CHARACTER") && is(1, "SET")) || is(0, "CHARSET") {
        let at = if is(0, "CHARSET") { 1 } else { 2 };
        return SetStatement::CharacterSet(ident(at).unwrap_or_default());
    }
    let (scope, at) = if is(0, "GLOBAL") {
        (VarScope::Global, 1)
    } else if is(0, "SESSION") || is(0, "LOCAL") {
        (VarScope::Session, 1)
    } else {
        (VarScope::Session, 0)
    };
    if is(at, "TRANSACTION") {
        let characteristics = match (toks.get(at + 1), toks.last()) {
            (Some(a), Some(b)) => sql[a.start as usize..b.end as usize].to_string(),
            _ => String::new(),
        };
        return SetStatement::Transaction {
            scope,
            characteristics,
        };
    }
    if is(0, "PASSWORD") || is(0, "ROLE") || is(0, "DEFAULT") || is(0, "STATEMENT") {
        return SetStatement::Other;
    }
    // Split the rest at top-level commas: `name = value` items.
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut start = 0usize;
    let mut default_scope = VarScope::Session;
    for i in 0..=toks.len() {
        let at_end = i == toks.len();
        if !at_end {
            let t = &toks[i];
            if t.is_punct(sql, "(") {
                depth += 1;
            } else if t.is_punct(sql, ")") {
                depth -= 1;
            }
            if !(depth == 0 && t.is_punct(sql, ",")) {
                continue;
            }
        }
        if let Some(item) = parse_assignment(sql, &toks[start..i], &mut default_scope) {
            items.push(item);
        } else {
            return SetStatement::Other;
        }
        start = i + 1;
    }
    SetStatement::Variables(items)
}

fn strip_quotes(sql: &str, t: &Token) -> String {
    match t.kind {
        TokKind::Str | TokKind::DqStr => super::lex::unquote_string(t.text(sql)),
        _ => t.ident_value(sql),
    }
}

/// `[GLOBAL|SESSION|LOCAL] name = value` or `@@[scope.]name = value` or `@user := value`.
/// A scope keyword carries on to the following items, as in MySQL.
fn parse_assignment(sql: &str, toks: &[Token], scope: &mut VarScope) -> Option<SetAssignment> {
    let mut i = 0;
    if let Some(t) = toks.first() {
        if t.is_kw(sql, "GLOBAL") {
            *scope = VarScope::Global;
            i = 1;
        } else if t.is_kw(sql, "SESSION") || t.is_kw(sql, "LOCAL") {
            *scope = VarScope::Session;
            i = 1;
        }
    }
    let target = toks.get(i)?;
    let eq = toks.get(i + 1)?;
    if !(eq.is_punct(sql, "=") || eq.is_punct(sql, ":=")) {
        return None;
    }
    let first_val = toks.get(i + 2)?;
    let value = sql[first_val.start as usize..toks.last()?.end as usize].to_string();
    let (item_scope, name) = match target.kind {
        TokKind::Variable => {
            let text = target.text(sql);
            if let Some(sys) = text.strip_prefix("@@") {
                let lower = sys.to_ascii_lowercase();
                if let Some(n) = lower.strip_prefix("global.") {
                    (VarScope::Global, n.to_string())
                } else if let Some(n) = lower
                    .strip_prefix("session.")
                    .or_else(|| lower.strip_prefix("local."))
                {
                    (VarScope::Session, n.to_string())
                } else {
                    (VarScope::Session, lower)
                }
            } else {
                let name = &text[1..];
                let name = if name.len() >= 2 && matches!(name.as_bytes()[0], b'`' | b'\'' | b'"') {
                    name[1..name.len() - 1].to_string()
                } else {
                    name.to_string()
                };
                (VarScope::User, name)
            }
        }
        TokKind::Word | TokKind::QuotedIdent => {
            // `SET x.y = ...` (component variables) is taken with its dot.
            let mut name = target.ident_value(sql).to_ascii_lowercase();
            if toks.get(i + 1).is_some_and(|t| t.is_punct(sql, ".")) {
                name.push('.');
                name.push_str(&toks.get(i + 2)?.ident_value(sql).to_ascii_lowercase());
            }
            (*scope, name)
        }
        _ => return None,
    };
    Some(SetAssignment {
        scope: item_scope,
        name,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords() {
        use StatementKind as K;
        assert_eq!(classify("  /* x */ select 1"), K::Select);
        assert_eq!(classify("-- c\n(SELECT 1)"), K::Select);
        assert_eq!(
            classify("START TRANSACTION WITH CONSISTENT SNAPSHOT"),
            K::Begin {
                consistent_snapshot: true,
                read_only: false
            }
        );
        assert_eq!(
            classify("start transaction read only"),
            K::Begin {
                consistent_snapshot: false,
                read_only: true
            }
        );
        assert_eq!(
            classify("BEGIN WORK"),
            K::Begin {
                consistent_snapshot: false,
                read_only: false
            }
        );
        assert_eq!(classify("ROLLBACK TO SAVEPOINT a"), K::RollbackToSavepoint);
        assert_eq!(classify("rollback"), K::Rollback);
        assert_eq!(classify("XA START 'x'"), K::Xa);
        assert_eq!(classify("use `my db`"), K::Use("my db".into()));
        assert_eq!(classify("DROP PREPARE s"), K::Deallocate);
        assert_eq!(classify("DROP TABLE t"), K::Ddl(DdlKind::Drop));
        assert_eq!(classify("EXPLAIN ROUTE select 1"), K::ExplainRoute);
        assert_eq!(classify("/* only */ "), K::Empty);
        assert_eq!(classify("LOCK TABLES t READ"), K::LockTables);
        assert_eq!(classify("PREPARE s FROM 'SELECT 1'"), K::Prepare);
    }

    #[test]
    fn versioned_comments_count_where_the_server_runs_them() {
        use crate::sql::SqlMode;
        let sql = "/*!100000 SET autocommit = 0 */";
        assert!(matches!(
            classify_in(sql, SqlMode::default(), 101106),
            StatementKind::Set(_)
        ));
        assert_eq!(
            classify_in(sql, SqlMode::default(), 50700),
            StatementKind::Empty
        );
        // MySQL 5.7+ versions are skipped by MariaDB.
        assert_eq!(
            classify("/*!80000 SET autocommit = 0 */"),
            StatementKind::Empty
        );
    }

    #[test]
    fn executable_comment_counts_as_code() {
        assert_eq!(
            classify("/*!40101 SET NAMES utf8mb4 */"),
            StatementKind::Set(SetStatement::Names {
                charset: "utf8mb4".into(),
                collation: None
            })
        );
    }

    #[test]
    fn set_forms() {
        assert_eq!(
            classify("SET NAMES 'utf8mb4' COLLATE utf8mb4_bin"),
            StatementKind::Set(SetStatement::Names {
                charset: "utf8mb4".into(),
                collation: Some("utf8mb4_bin".into())
            })
        );
        assert_eq!(
            classify("SET CHARACTER SET latin1"),
            StatementKind::Set(SetStatement::CharacterSet("latin1".into()))
        );
        assert_eq!(
            classify("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"),
            StatementKind::Set(SetStatement::Transaction {
                scope: VarScope::Session,
                characteristics: "ISOLATION LEVEL READ COMMITTED".into()
            })
        );
        let StatementKind::Set(SetStatement::Variables(v)) = classify(
            "SET autocommit=0, @a := (1, 2), GLOBAL max_connections = 10, @@session.sql_mode='X'",
        ) else {
            panic!("not variables")
        };
        assert_eq!(v.len(), 4);
        assert_eq!(
            (v[0].scope, v[0].name.as_str(), v[0].value.as_str()),
            (VarScope::Session, "autocommit", "0")
        );
        assert_eq!(
            (v[1].scope, v[1].name.as_str(), v[1].value.as_str()),
            (VarScope::User, "a", "(1, 2)")
        );
        assert_eq!(
            (v[2].scope, v[2].name.as_str()),
            (VarScope::Global, "max_connections")
        );
        assert_eq!(
            (v[3].scope, v[3].name.as_str(), v[3].value.as_str()),
            (VarScope::Session, "sql_mode", "'X'")
        );
    }
}
