//! Read/write splitting: whether a statement may read from a replica, from its text alone.
//!
//! The executor asks this for every statement on a datahost with replicas; the answer is about
//! the statement only (the session adds what it knows: an open transaction, pinned connections,
//! read-your-writes). Anything not recognised as a plain read goes to the primary: sending a
//! read to the primary is never wrong, sending anything else to a replica is.

use super::classify::{StatementKind, classify_tokens};
use super::lex::{TokKind, Token, called_at, sequence_at, tokenize_with};
use super::mode::SqlMode;

/// Where a statement must or may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadRoute {
    /// On the primary, for this reason.
    Primary(PrimaryWhy),
    /// A plain read: any server in the read set. `hinted` when `/*+ shoal:replica */` asked
    /// for a replica (then `primary_only` and read-your-writes do not keep it on the primary).
    Replica { hinted: bool },
}

/// Why a statement stays on the primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrimaryWhy {
    /// Not a SELECT: a write, DDL, session or transaction statement, SHOW, CALL, ...
    NotARead,
    /// `/*+ shoal:primary */`, `/*!mycat:db_type=master*/` or `/*#mycat:db_type=master*/`.
    Hint,
    /// `FOR UPDATE`, `LOCK IN SHARE MODE`, `FOR SHARE`.
    LockingRead,
    /// A function or construct with effects on the server or the session (named).
    SideEffect(&'static str),
}

impl ReadRoute {
    pub fn may_use_replica(self) -> bool {
        matches!(self, ReadRoute::Replica { .. })
    }

    /// For logs and the golden files.
    pub fn describe(self) -> String {
        match self {
            ReadRoute::Replica { hinted: false } => "replica".into(),
            ReadRoute::Replica { hinted: true } => "replica (hint)".into(),
            ReadRoute::Primary(PrimaryWhy::NotARead) => "primary (not a read)".into(),
            ReadRoute::Primary(PrimaryWhy::Hint) => "primary (hint)".into(),
            ReadRoute::Primary(PrimaryWhy::LockingRead) => "primary (locking read)".into(),
            ReadRoute::Primary(PrimaryWhy::SideEffect(what)) => format!("primary ({what})"),
        }
    }
}

/// Functions whose call has effects beyond the result, or reads state that lives on the
/// primary's connection (the session's own, or the server's locks and sequences).
const EFFECT_FUNCTIONS: &[&str] = &[
    "GET_LOCK",
    "RELEASE_LOCK",
    "RELEASE_ALL_LOCKS",
    "IS_FREE_LOCK",
    "IS_USED_LOCK",
    "LAST_INSERT_ID",
    "FOUND_ROWS",
    "ROW_COUNT",
    "NEXTVAL",
    "LASTVAL",
    "SETVAL",
    "MASTER_GTID_WAIT",
    "MASTER_POS_WAIT",
    "SLEEP",
    "BENCHMARK",
];

/// The hint a comment gives, if any.
fn comment_hint(body: &str) -> Option<bool> {
    let b: String = body
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    match b.as_str() {
        "+shoal:primary" | "!mycat:db_type=master" | "#mycat:db_type=master" => Some(true),
        "+shoal:replica" | "!mycat:db_type=slave" | "#mycat:db_type=slave" => Some(false),
        _ => None,
    }
}

/// The Mycat hint comments (`/*!mycat:...*/`, `/*#mycat:...*/`) a statement starts with, if
/// any: their byte length. MariaDB would run `/*!mycat...*/` as code, so the executor sends the
/// statement without them.
pub fn mycat_hint_len(sql: &str) -> Option<usize> {
    let mut rest = sql;
    let mut cut = 0;
    loop {
        let t = rest.trim_start();
        let skipped = rest.len() - t.len();
        // Compared in place: this runs for every statement.
        let hint = t.as_bytes().get(..8).is_some_and(|h| {
            h.eq_ignore_ascii_case(b"/*!mycat") || h.eq_ignore_ascii_case(b"/*#mycat")
        });
        if !hint {
            break;
        }
        let Some(end) = t.find("*/") else { break };
        cut += skipped + end + 2;
        rest = &t[end + 2..];
    }
    (cut > 0).then_some(cut)
}

/// Where `sql` (one statement) may run. `mode` and `version` as the statement is planned.
pub fn read_route(sql: &str, mode: SqlMode, version: u32) -> ReadRoute {
    // Hints: the first shoal or mycat comment wins (comments are not tokens).
    let hint = hint_of(sql);
    if hint == Some(true) {
        return ReadRoute::Primary(PrimaryWhy::Hint);
    }
    let text = match mycat_hint_len(sql) {
        Some(n) => &sql[n..],
        None => sql,
    };
    let mut toks = Vec::new();
    if tokenize_with(text, mode, version, &mut toks).is_err() {
        return ReadRoute::Primary(PrimaryWhy::NotARead);
    }
    if classify_tokens(text, &toks) != StatementKind::Select {
        return ReadRoute::Primary(PrimaryWhy::NotARead);
    }
    if let Some(why) = primary_only_read(text, &toks) {
        return ReadRoute::Primary(why);
    }
    ReadRoute::Replica {
        hinted: hint == Some(false),
    }
}

/// Whether a comment in `sql` (outside strings) is a routing hint: `Some(true)` for the
/// primary, `Some(false)` for a replica.
fn hint_of(sql: &str) -> Option<bool> {
    let b = sql.as_bytes();
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match c {
            b'\'' | b'"' | b'`' => quote = Some(c),
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let body_start = i + 2;
                let len = sql[body_start..].find("*/")?;
                if let Some(h) = comment_hint(&sql[body_start..body_start + len]) {
                    return Some(h);
                }
                // Executable comments hold code: look inside them too.
                if matches!(b.get(body_start), Some(b'!' | b'+')) {
                    i = body_start + 1;
                    continue;
                }
                i = body_start + len + 2;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Why a SELECT must read on the primary, if it must.
fn primary_only_read(sql: &str, toks: &[Token]) -> Option<PrimaryWhy> {
    if let Some(why) = effect_read(sql, toks) {
        return Some(why);
    }
    super::current_db::may_call_stored_function(sql, toks)
        .then_some(PrimaryWhy::SideEffect("a stored function"))
}

/// [`primary_only_read`] but for stored functions.
fn effect_read(sql: &str, toks: &[Token]) -> Option<PrimaryWhy> {
    for (i, t) in toks.iter().enumerate() {
        let next = toks.get(i + 1);
        match t.kind {
            TokKind::Word => {
                let w = t.text(sql);
                if w.eq_ignore_ascii_case("FOR")
                    && next.is_some_and(|n| n.is_kw(sql, "UPDATE") || n.is_kw(sql, "SHARE"))
                {
                    return Some(PrimaryWhy::LockingRead);
                }
                if w.eq_ignore_ascii_case("LOCK")
                    && next.is_some_and(|n| n.is_kw(sql, "IN"))
                    && toks.get(i + 2).is_some_and(|n| n.is_kw(sql, "SHARE"))
                {
                    return Some(PrimaryWhy::LockingRead);
                }
                if w.eq_ignore_ascii_case("SQL_CALC_FOUND_ROWS") {
                    return Some(PrimaryWhy::SideEffect("SQL_CALC_FOUND_ROWS"));
                }
                if w.eq_ignore_ascii_case("INTO") {
                    return Some(PrimaryWhy::SideEffect("SELECT ... INTO"));
                }
                if sequence_at(sql, toks, i) {
                    return Some(PrimaryWhy::SideEffect("a sequence"));
                }
                if called_at(sql, toks, i)
                    && let Some(f) = EFFECT_FUNCTIONS.iter().find(|f| w.eq_ignore_ascii_case(f))
                {
                    return Some(PrimaryWhy::SideEffect(f));
                }
            }
            TokKind::Punct if t.text(sql) == ":=" => {
                return Some(PrimaryWhy::SideEffect("a user variable assignment"));
            }
            TokKind::Variable if !t.text(sql).starts_with("@@") => {
                // User variables live on the session's own (primary) connection.
                return Some(PrimaryWhy::SideEffect("a user variable"));
            }
            _ => {}
        }
    }
    None
}

/// For a `read_only` user: the first statement of `sql` (every statement of a multi-statement
/// text is checked) that is not a read, by its kind; `None` when all may run. Reads, SHOW,
/// EXPLAIN, session variables, USE and transaction control are allowed; anything that could
/// write (including `SELECT ... INTO`, SQL-level PREPARE/EXECUTE whose text is not seen here,
/// CALL and DO, which may run routines that write) is not.
pub fn read_only_violation(sql: &str, mode: SqlMode, version: u32) -> Option<String> {
    let Ok(ranges) = super::lex::split_statements_in(sql, mode, version) else {
        return Some("a statement that cannot be read".into());
    };
    for r in ranges {
        let one = &sql[r];
        let one = match mycat_hint_len(one) {
            Some(n) => &one[n..],
            None => one,
        };
        let mut toks = Vec::new();
        if tokenize_with(one, mode, version, &mut toks).is_err() {
            return Some("a statement that cannot be read".into());
        }
        let kind = classify_tokens(one, &toks);
        use super::classify::{SetStatement, VarScope};
        let allowed = match &kind {
            StatementKind::Select => {
                if toks.iter().any(|t| t.is_kw(one, "INTO")) {
                    return Some("SELECT ... INTO".into());
                }
                true
            }
            StatementKind::Set(SetStatement::Variables(a)) => {
                a.iter().all(|a| a.scope != VarScope::Global)
            }
            StatementKind::Set(SetStatement::Transaction { scope, .. }) => {
                *scope != VarScope::Global
            }
            StatementKind::Set(SetStatement::Names { .. } | SetStatement::CharacterSet(_)) => true,
            StatementKind::Show
            | StatementKind::Use(_)
            | StatementKind::Begin { .. }
            | StatementKind::Commit
            | StatementKind::Rollback
            | StatementKind::Savepoint
            | StatementKind::RollbackToSavepoint
            | StatementKind::ReleaseSavepoint
            | StatementKind::UnlockTables
            | StatementKind::Kill
            | StatementKind::ExplainRoute
            | StatementKind::Help
            | StatementKind::Empty => true,
            StatementKind::Explain => !toks.iter().any(|t| {
                ["INSERT", "UPDATE", "DELETE", "REPLACE"]
                    .iter()
                    .any(|w| t.is_kw(one, w))
            }),
            _ => false,
        };
        if !allowed {
            let first = toks
                .iter()
                .find(|t| t.kind == TokKind::Word)
                .map_or(String::new(), |t| t.text(one).to_ascii_uppercase());
            return Some(match kind {
                StatementKind::Set(_) => "SET GLOBAL or SET STATEMENT".into(),
                _ => first,
            });
        }
    }
    None
}
