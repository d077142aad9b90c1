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

/// Literals lifted per statement at most (slot numbers are u16): the rest stay in the shape.
const MAX_SLOTS: usize = u16::MAX as usize - 1;

/// The shape of a statement and where its lifted literals are.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Cache key: the sql_mode, then the token texts joined by spaces (none where
    /// [`glued`]), literals replaced with their kind (`?i` integer, `?n` other number, `?s`
    /// `'string'`, `?q` `"string"`), placeholders `?`. The parser reads the same rendering of
    /// the tokens (`analyze::parse_text`), so statements with equal keys differ only in literal
    /// values of the same lexical kind.
    pub key: String,
    /// Token index of each slot, in order (a token's slot is its position here: read by a
    /// binary search when a plan is built, rather than a per-token table on every statement).
    pub slot_tokens: Vec<u32>,
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
    let mut param_tokens = Vec::new();
    render(sql, toks, &mut key, |i, literal| match literal {
        true => slot_tokens.push(i as u32),
        false => param_tokens.push(i as u32),
    });
    Shape {
        key,
        slot_tokens,
        param_tokens,
    }
}

/// Where a shape's rendering goes: the plan cache's key, or a query digest's hash.
trait KeyOut {
    fn put(&mut self, s: &str);
}

impl KeyOut for String {
    fn put(&mut self, s: &str) {
        self.push_str(s);
    }
}

struct HashOut(foldhash::quality::FoldHasher<'static>);

impl KeyOut for HashOut {
    fn put(&mut self, s: &str) {
        std::hash::Hasher::write(&mut self.0, s.as_bytes());
    }
}

/// The one rendering of a statement's shape (see [`Shape::key`]): written to `out`, with
/// `lifted(token index, true)` for each lifted literal (in slot order) and `lifted(index,
/// false)` for each `?` placeholder.
fn render(sql: &str, toks: &[Token], out: &mut impl KeyOut, mut lifted: impl FnMut(usize, bool)) {
    let mut slots = 0usize;
    for (i, t) in toks.iter().enumerate() {
        if i > 0 && !glued(&toks[i - 1], t) {
            out.put(" ");
        }
        let liftable = t.is_value_literal()
            && slots < MAX_SLOTS
            && !is_string_run(toks, i)
            && !after_introducer(sql, toks, i);
        if liftable {
            lifted(i, true);
            slots += 1;
            out.put(match t.kind {
                TokKind::Int => "?i",
                TokKind::Decimal => "?n",
                TokKind::Str => "?s",
                _ => "?q",
            });
        } else if t.kind == TokKind::Placeholder {
            lifted(i, false);
            out.put("?");
        } else {
            out.put(t.text(sql));
        }
    }
}

/// A query digest's id: the hash of the statement's shape (the plan cache's rendering, without
/// schema and sql_mode), computed without building the text. Statements that differ only in
/// literal values share it; the same statement always gets the same one (a fixed seed).
pub fn digest(sql: &str, toks: &[Token]) -> u64 {
    static SEED: foldhash::quality::FixedState = foldhash::quality::FixedState::with_seed(0x5348);
    let mut h = HashOut(std::hash::BuildHasher::build_hasher(&SEED));
    render(sql, toks, &mut h, |_, _| {});
    std::hash::Hasher::finish(&h.0)
}

/// A query digest's text: the shape [`digest`] hashes (literals shown as `?i`, `?n`, `?s`,
/// `?q`).
pub fn digest_text(sql: &str, toks: &[Token]) -> String {
    let mut text = String::with_capacity(sql.len());
    render(sql, toks, &mut text, |_, _| {});
    text
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
        // A digest is the key's hash: equal shapes, equal digests.
        let dig = |sql: &str| digest(sql, &tokenize(sql).unwrap());
        assert_eq!(
            dig("SELECT c FROM t WHERE id=5"),
            dig("SELECT c FROM t WHERE id = 6")
        );
        assert_ne!(
            dig("SELECT c FROM t WHERE id=5"),
            dig("SELECT c FROM t WHERE id='5'")
        );
        let text = "SELECT c FROM t WHERE id = 7 /* x */";
        assert_eq!(digest_text(text, &tokenize(text).unwrap()), key(text));
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
