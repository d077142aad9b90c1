//! Statement shapes for the plan cache: the text with its literals lifted out.
//!
//! Two statements that differ only in literal values (`WHERE id = 1` / `WHERE id = 2`) share a
//! shape and therefore a plan; the plan refers to literals by slot number and is evaluated with
//! the values of the statement at hand. Comments are not part of the shape (they never change a
//! route) but reach the backend unchanged because SQL is rebuilt from the current text.
//!
//! Not lifted: hex/bit literals, adjacent string literals (`'a' 'b'` is one value in MySQL) and
//! literals after a charset introducer (`_utf8mb4'x'`), so the planner may read those as
//! constants. A plan that reads a lifted literal structurally (a positional `ORDER BY 2`) pins
//! that slot's text; a cached plan is reused only when pinned slots match.

use super::lex::{TokKind, Token, glued};
use super::mode::SqlMode;

/// No slot for this token.
pub const NO_SLOT: u16 = u16::MAX;

/// The shape of a statement and where its lifted literals are.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Cache key: the sql_mode, then the token texts joined by spaces (none where
    /// [`glued`]), literals replaced with their kind (`?i` integer, `?n` other number, `?s`
    /// `'string'`, `?q` `"string"`), placeholders `?`. The parser reads the same rendering of
    /// the tokens (`analyze::parse_text`), so statements with equal keys differ only in literal
    /// values of the same lexical kind.
    pub key: String,
    /// Token index of each slot, in order.
    pub slot_tokens: Vec<u32>,
    /// For each token, its slot number or [`NO_SLOT`].
    pub slot_of_token: Vec<u16>,
    /// Token index of each `?` placeholder, in order.
    pub param_tokens: Vec<u32>,
}

/// Lift the literals of a tokenized statement. Statements with more than 65534 literals keep
/// the rest in the shape (they are still planned correctly, just not shared).
pub fn shape(sql: &str, toks: &[Token]) -> Shape {
    build(sql, toks, None, SqlMode::default())
}

/// Like [`shape`], with `prefix` and a NUL at the start of the key (the plan cache keys shapes by
/// the current schema too), and the tokens read under `mode`.
pub fn shape_with_prefix(sql: &str, toks: &[Token], prefix: &str, mode: SqlMode) -> Shape {
    build(sql, toks, Some(prefix), mode)
}

fn build(sql: &str, toks: &[Token], prefix: Option<&str>, mode: SqlMode) -> Shape {
    let mut key = String::with_capacity(prefix.map_or(0, str::len) + sql.len() + 8);
    if let Some(p) = prefix {
        key.push_str(p);
        key.push('\0');
    }
    key.push(mode.key_char());
    key.push('\0');
    let mut slot_tokens = Vec::new();
    let mut slot_of_token = vec![NO_SLOT; toks.len()];
    let mut param_tokens = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if i > 0 && !glued(&toks[i - 1], t) {
            key.push(' ');
        }
        let liftable = t.is_value_literal()
            && slot_tokens.len() < (NO_SLOT as usize - 1)
            && !is_string_run(toks, i)
            && !after_introducer(sql, toks, i);
        if liftable {
            slot_of_token[i] = slot_tokens.len() as u16;
            slot_tokens.push(i as u32);
            key.push_str(match t.kind {
                TokKind::Int => "?i",
                TokKind::Decimal => "?n",
                TokKind::Str => "?s",
                _ => "?q",
            });
        } else if t.kind == TokKind::Placeholder {
            param_tokens.push(i as u32);
            key.push('?');
        } else {
            key.push_str(t.text(sql));
        }
    }
    Shape {
        key,
        slot_tokens,
        slot_of_token,
        param_tokens,
    }
}

fn is_str(t: &Token) -> bool {
    matches!(t.kind, TokKind::Str | TokKind::DqStr)
}

fn is_string_run(toks: &[Token], i: usize) -> bool {
    is_str(&toks[i]) && ((i > 0 && is_str(&toks[i - 1])) || toks.get(i + 1).is_some_and(is_str))
}

fn after_introducer(sql: &str, toks: &[Token], i: usize) -> bool {
    is_str(&toks[i])
        && i > 0
        && toks[i - 1].kind == TokKind::Word
        && (toks[i - 1].text(sql).starts_with('_')
            || toks[i - 1].text(sql).eq_ignore_ascii_case("N"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lex::tokenize;

    fn key(sql: &str) -> String {
        let k = shape(sql, &tokenize(sql).unwrap()).key;
        k.split_once('\0').unwrap().1.to_string()
    }

    #[test]
    fn literals_lifted() {
        assert_eq!(
            key("SELECT c FROM t WHERE id=5"),
            "SELECT c FROM t WHERE id = ?i"
        );
        assert_eq!(
            key("SELECT c FROM t WHERE id = 'x' /* c */"),
            "SELECT c FROM t WHERE id = ?s"
        );
        assert_ne!(key("SELECT 1.5"), key("SELECT 1"));
        assert_ne!(key("SELECT N'x'"), key("SELECT N 'x'"));
        assert_eq!(
            key("SELECT c FROM t WHERE id=?"),
            "SELECT c FROM t WHERE id = ?"
        );
        assert_eq!(
            key("SELECT 'a' 'b', _utf8mb4'c', 0x1f"),
            "SELECT 'a' 'b' , _utf8mb4'c' , 0x1f"
        );
        // IN lists of different lengths are different shapes.
        assert_ne!(
            key("SELECT 1 FROM t WHERE a IN (1,2)"),
            key("SELECT 1 FROM t WHERE a IN (1,2,3)")
        );
    }
}
