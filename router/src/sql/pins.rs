//! Statements that create session state the backend's trackers do not report in an OK packet
//! (a SELECT GET_LOCK() answers with a result set; the trackers may be off on old servers). A
//! match pins the backend connection to the session.
//!
//! Read on the router's tokens, so text inside strings, comments and identifiers (an e-mail
//! address in a WHERE clause, a column named `prepared_at`) never pins. The routed path has the
//! statement's tokens already ([`token_effects`]); the relay-only path, which tokenizes nothing
//! else, first runs a byte scan cheap enough for every statement and tokenizes only the
//! candidates it finds ([`effects`]).

use super::lex::{TokKind, Token, tokenize_into};

/// What a statement may do out of the trackers' sight, found in one pass over its text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Effects {
    /// It may leave state behind on its connection: user variables, named locks, LOCK TABLES,
    /// FLUSH ... WITH READ LOCK, temporary tables, SQL-level PREPARE, FOUND_ROWS() bookkeeping,
    /// XA transactions, HANDLER cursors.
    pub leaves_state: bool,
    /// It calls `LAST_INSERT_ID(expr)`, which sets the value inside a result set, out of the
    /// proxy's sight (the session then reads the value back).
    pub sets_last_insert_id: bool,
}

/// Whether `sql` starts with a comment (`#`, `/*`, `-- `): a leading-word check on its bytes
/// would read the comment.
pub fn starts_with_comment(sql: &[u8]) -> bool {
    match sql.trim_ascii_start() {
        [b'#', ..] | [b'/', b'*', ..] => true,
        [b'-', b'-', c, ..] => c.is_ascii_whitespace(),
        _ => false,
    }
}

/// What `sql` may do out of the trackers' sight.
pub fn effects(sql: &[u8]) -> Effects {
    let mut candidate = scan(sql);
    if starts_with_comment(sql) {
        // The scan's leading-word checks (`XA`, `HANDLER`, `SET TRANSACTION`) see the comment:
        // the tokens decide.
        candidate.leaves_state = true;
    }
    if candidate == Effects::default() {
        return candidate;
    }
    match std::str::from_utf8(sql) {
        Ok(text) => {
            let mut toks = Vec::new();
            match tokenize_into(text, &mut toks) {
                Ok(()) => token_effects(text, &toks),
                // Unterminated string or comment: the server will refuse it; stay careful.
                Err(_) => candidate,
            }
        }
        Err(_) => candidate,
    }
}

/// The effects, read from the statement's tokens.
pub fn token_effects(sql: &str, toks: &[Token]) -> Effects {
    let word = |i: usize, w: &str| toks.get(i).is_some_and(|t| t.is_kw(sql, w));
    let punct = |i: usize, p: &str| toks.get(i).is_some_and(|t| t.is_punct(sql, p));
    let first_is = |w: &str| word(0, w);
    let mut e = Effects {
        leaves_state: first_is("XA") || first_is("HANDLER") || first_is("PREPARE"),
        sets_last_insert_id: false,
    };
    if first_is("SET")
        && toks.iter().any(|t| t.is_kw(sql, "TRANSACTION"))
        && !toks
            .iter()
            .any(|t| t.is_kw(sql, "SESSION") || t.is_kw(sql, "GLOBAL"))
    {
        e.leaves_state = true;
    }
    if !may_pin(sql.as_bytes()) {
        return e;
    }
    let ddl = first_is("CREATE") || first_is("DROP");
    for (i, t) in toks.iter().enumerate() {
        let pins = match t.kind {
            TokKind::Variable => {
                let text = t.text(sql);
                text.starts_with('@') && !text.starts_with("@@")
            }
            TokKind::Word => {
                (t.is_kw(sql, "GET_LOCK") && punct(i + 1, "("))
                    || (t.is_kw(sql, "LOCK") && (word(i + 1, "TABLE") || word(i + 1, "TABLES")))
                    || (t.is_kw(sql, "TEMPORARY") && ddl)
                    || t.is_kw(sql, "SQL_CALC_FOUND_ROWS")
                    || (t.is_kw(sql, "READ") && word(i + 1, "LOCK"))
            }
            _ => false,
        };
        e.leaves_state |= pins;
        if t.is_kw(sql, "LAST_INSERT_ID") && punct(i + 1, "(") && !punct(i + 2, ")") {
            e.sets_last_insert_id = true;
        }
    }
    e
}

/// The byte scan: a superset of [`token_effects`]; a keyword is compared only where its first
/// letter is.
fn scan(sql: &[u8]) -> Effects {
    let mut e = Effects {
        leaves_state: sets_next_transaction(sql)
            || starts_with_word(sql, b"XA")
            || starts_with_word(sql, b"HANDLER"),
        sets_last_insert_id: false,
    };
    if !may_pin(sql) {
        return e;
    }
    for (i, &b) in sql.iter().enumerate() {
        // Most bytes start no keyword: one table load each.
        if !SCAN_STARTS[b as usize] {
            continue;
        }
        if e.leaves_state && e.sets_last_insert_id {
            break;
        }
        let rest = &sql[i..];
        // The first two letters pick the one keyword to compare (most candidates stop here).
        let second = sql.get(i + 1).map_or(0, u8::to_ascii_uppercase);
        let pins = match (b.to_ascii_uppercase(), second) {
            (b'@', _) => is_user_variable_at(sql, i),
            (b'G', b'E') => starts_ci(rest, b"GET_LOCK"),
            (b'L', b'A') => {
                if starts_ci(rest, b"LAST_INSERT_ID(") && has_argument(&rest[15..]) {
                    e.sets_last_insert_id = true;
                }
                false
            }
            (b'L', b'O') => starts_ci(rest, b"LOCK TABLE"),
            (b'T', b'E') => starts_ci(rest, b"TEMPORARY"),
            (b'P', b'R') => starts_ci(rest, b"PREPARE"),
            (b'S', b'Q') => starts_ci(rest, b"SQL_CALC_FOUND_ROWS"),
            (b'R', b'E') => starts_ci(rest, b"READ LOCK"),
            _ => false,
        };
        e.leaves_state |= pins;
    }
    e
}

/// The bytes [`scan`] looks further at: `@` and the first letters of its keywords.
static SCAN_STARTS: [bool; 256] = byte_set(b"@GLTPSR");

/// Bytes one of which every match of [`scan`] and of [`token_effects`]' token loop contains:
/// `@` (user variables), `_` (GET_LOCK, LAST_INSERT_ID, SQL_CALC_FOUND_ROWS), `K` (LOCK TABLE,
/// READ LOCK), `P` (PREPARE, TEMPORARY).
static SCAN_NEEDS: [bool; 256] = byte_set(b"@_KP");

/// Whether `sql` holds a byte of [`SCAN_NEEDS`]: without one, only the first-word checks can
/// match. Most statements hold none and are done after this pass (branch-free: it runs for
/// every statement).
fn may_pin(sql: &[u8]) -> bool {
    sql.iter()
        .fold(false, |seen, &b| seen | SCAN_NEEDS[b as usize])
}

/// A lookup table of `bytes` in both cases.
const fn byte_set(bytes: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        t[bytes[i] as usize] = true;
        t[bytes[i].to_ascii_lowercase() as usize] = true;
        i += 1;
    }
    t
}

/// Whether a call's argument list (after its `(`) is not empty.
fn has_argument(after_paren: &[u8]) -> bool {
    after_paren
        .iter()
        .find(|c| !c.is_ascii_whitespace())
        .is_some_and(|c| *c != b')')
}

/// `@name` but not `@@system_variable`, with the `@` at `at`.
fn is_user_variable_at(sql: &[u8], at: usize) -> bool {
    let prev_at = at > 0 && sql[at - 1] == b'@';
    let next = sql.get(at + 1).copied();
    !prev_at
        && next.is_some_and(|c| {
            c.is_ascii_alphanumeric() || matches!(c, b'_' | b'`' | b'\'' | b'"' | b'$' | b'.')
        })
}

/// Whether `hay` starts with `needle` (upper-case), ignoring ASCII case.
fn starts_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len() && hay[..needle.len()].eq_ignore_ascii_case(needle)
}

/// Whether the statement's first word is `word` (upper-case).
fn starts_with_word(sql: &[u8], word: &[u8]) -> bool {
    let t = sql.trim_ascii_start();
    t.len() > word.len()
        && t[..word.len()].eq_ignore_ascii_case(word)
        && t[word.len()].is_ascii_whitespace()
}

/// `SET TRANSACTION ...` without SESSION/GLOBAL applies to the next transaction only and is not
/// reported by the trackers: that transaction must start on the same connection.
fn sets_next_transaction(sql: &[u8]) -> bool {
    let trimmed = sql.trim_ascii_start();
    trimmed.len() > 4
        && trimmed[..4].eq_ignore_ascii_case(b"SET ")
        && contains_ci(trimmed, b"TRANSACTION")
        && !contains_ci(trimmed, b"SESSION")
        && !contains_ci(trimmed, b"GLOBAL")
}

/// ASCII case-insensitive substring search; `needle` is upper-case.
pub fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    if needle.is_empty() || hay.len() < needle.len() {
        return needle.is_empty();
    }
    let first = needle[0];
    let last_start = hay.len() - needle.len();
    let mut i = 0;
    while i <= last_start {
        if hay[i].to_ascii_uppercase() == first
            && hay[i + 1..i + needle.len()]
                .iter()
                .zip(&needle[1..])
                .all(|(a, b)| a.to_ascii_uppercase() == *b)
        {
            return true;
        }
        i += 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both paths' answer: the relay-only scan and the routed path's token read must agree.
    fn both(sql: &[u8]) -> Effects {
        let text = std::str::from_utf8(sql).expect("utf-8");
        let toks = crate::sql::lex::tokenize(text).expect("tokens");
        let routed = token_effects(text, &toks);
        assert_eq!(effects(sql), routed, "{text}");
        routed
    }

    fn leaves_state(sql: &[u8]) -> bool {
        both(sql).leaves_state
    }

    fn sets_last_insert_id(sql: &[u8]) -> bool {
        both(sql).sets_last_insert_id
    }

    #[test]
    fn a_leading_comment_changes_nothing() {
        assert!(leaves_state(b"/* tool */ XA START 'x'"));
        assert!(leaves_state(b"-- c\nHANDLER t OPEN"));
        assert!(leaves_state(
            b"# c\nSET TRANSACTION ISOLATION LEVEL SERIALIZABLE"
        ));
        assert!(!leaves_state(b"/* XA START */ SELECT 1"));
        assert!(!leaves_state(b"/* c */ SET SESSION TRANSACTION READ ONLY"));
    }

    #[test]
    fn plain_statements_do_not_pin() {
        for q in [
            "SELECT c FROM sbtest1 WHERE id=5",
            "UPDATE sbtest1 SET k=k+1 WHERE id=3",
            "SELECT @@session.sql_mode, @@autocommit",
            "BEGIN",
            "select 1",
            "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "SELECT max_a FROM t",
        ] {
            assert!(!leaves_state(q.as_bytes()), "{q}");
        }
    }

    #[test]
    fn last_insert_id_with_an_argument_is_noticed() {
        assert!(sets_last_insert_id(b"SELECT LAST_INSERT_ID(42)"));
        assert!(sets_last_insert_id(
            b"update t set id = last_insert_id( id + 1 )"
        ));
        assert!(!sets_last_insert_id(b"SELECT LAST_INSERT_ID()"));
        assert!(!sets_last_insert_id(b"SELECT last_insert_id( )"));
    }

    #[test]
    fn text_in_strings_comments_and_identifiers_does_not_pin() {
        for q in [
            "SELECT * FROM users WHERE email = 'bob@example.com'",
            "SELECT prepared_at FROM jobs",
            "UPDATE jobs SET prepared_at = NOW() WHERE id = 1",
            "SELECT 1 /* SET @a = 1, GET_LOCK('x', 1) */",
            "SELECT `@x`, 'LOCK TABLES t', \"temporary\" FROM t",
            "SELECT temporary FROM t",
            "INSERT INTO log (msg) VALUES ('PREPARE s FROM ''x''')",
            "SELECT last_insert_id_col FROM t",
            "SELECT 'LAST_INSERT_ID(5)'",
        ] {
            assert!(!leaves_state(q.as_bytes()), "{q}");
            assert!(!sets_last_insert_id(q.as_bytes()), "{q}");
        }
    }

    #[test]
    fn stateful_statements_pin() {
        for q in [
            "SET @a = 1",
            "select @x:=3",
            "SELECT GET_LOCK('l', 1)",
            "lock tables t write",
            "CREATE TEMPORARY TABLE t (a int)",
            "prepare s from 'select 1'",
            "SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1",
            "SELECT @`quoted`",
            "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
            "FLUSH TABLES WITH READ LOCK",
            "xa start 'x'",
            "HANDLER t OPEN",
        ] {
            assert!(leaves_state(q.as_bytes()), "{q}");
        }
    }
}
