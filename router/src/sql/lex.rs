//! A small MariaDB tokenizer of our own.
//!
//! sqlparser's tokenizer allocates a `String` per token and gives line/column positions; the hot
//! path (plan-cache lookups, statement classification, splicing) only needs byte ranges and
//! token kinds, so this one borrows the text and records offsets. It follows MySQL's lexical
//! rules where they matter for routing: `-- ` and `#` comments, `/* */` comments, executable
//! comments `/*! ... */` (and MariaDB's `/*M! ... */`) whose content is code, backslash escapes
//! and doubled quotes in strings, backtick identifiers.

pub use super::mode::{DEFAULT_SERVER_VERSION, SqlMode};

/// What a token is. Keywords are `Word`s; compare them with [`Token::is_kw`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokKind {
    /// Bare word: keyword or unquoted identifier (also `_utf8mb4` introducers).
    Word,
    /// Backtick-quoted identifier (or `"`-quoted under ANSI_QUOTES).
    QuotedIdent,
    /// `'...'` string.
    Str,
    /// `"..."` string (without ANSI_QUOTES; with it, `"..."` is a [`TokKind::QuotedIdent`]).
    DqStr,
    /// Integer literal (digits only).
    Int,
    /// Number with a fraction or exponent.
    Decimal,
    /// `0x1F`, `x'1F'`, `b'01'`, `0b01`: kept verbatim, never a shard-key value we interpret.
    HexOrBit,
    /// `?` placeholder of a prepared statement.
    Placeholder,
    /// `@var`, `@@var`, `@@session.var`.
    Variable,
    /// Operator or punctuation (`(`, `,`, `<=>`, ...).
    Punct,
}

/// One token: its kind and byte range in the statement text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: TokKind,
    pub start: u32,
    pub end: u32,
}

impl Token {
    /// The token's text.
    pub fn text<'a>(&self, sql: &'a str) -> &'a str {
        &sql[self.start as usize..self.end as usize]
    }

    /// Case-insensitive keyword test (only bare words match).
    pub fn is_kw(&self, sql: &str, kw: &str) -> bool {
        // The length first: most calls compare a word with a keyword of another length.
        self.kind == TokKind::Word
            && (self.end - self.start) as usize == kw.len()
            && self.text(sql).eq_ignore_ascii_case(kw)
    }

    /// Punctuation test.
    pub fn is_punct(&self, sql: &str, p: &str) -> bool {
        self.kind == TokKind::Punct && self.text(sql) == p
    }

    /// True for literals the plan cache lifts out of the statement text.
    pub fn is_value_literal(&self) -> bool {
        matches!(
            self.kind,
            TokKind::Str | TokKind::DqStr | TokKind::Int | TokKind::Decimal
        )
    }

    /// Identifier name without quotes (the quote undoubled: backtick, or `"` under
    /// ANSI_QUOTES).
    pub fn ident_value(&self, sql: &str) -> String {
        let t = self.text(sql);
        if self.kind == TokKind::QuotedIdent && t.len() >= 2 {
            let q = &t[..1];
            t[1..t.len() - 1].replace(&format!("{q}{q}"), q)
        } else {
            t.to_string()
        }
    }
}

/// Why the text could not be tokenized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    pub offset: usize,
    pub what: &'static str,
}

/// Tokenize `sql` as MariaDB 10.11 reads it in its default sql_mode, skipping whitespace and
/// comments (executable comments are gated with [`DEFAULT_SERVER_VERSION`]).
/// Whether token `i` is right before `(`: a call when it is a name (with IGNORE_SPACE or not,
/// the space between does not matter to what may be called).
pub fn called_at(sql: &str, toks: &[Token], i: usize) -> bool {
    toks.get(i + 1).is_some_and(|n| n.is_punct(sql, "("))
}

/// Whether the tokens from `i` read `NEXT VALUE FOR` or `PREVIOUS VALUE FOR`: a sequence,
/// looked up by name.
pub fn sequence_at(sql: &str, toks: &[Token], i: usize) -> bool {
    toks.get(i)
        .is_some_and(|t| t.is_kw(sql, "NEXT") || t.is_kw(sql, "PREVIOUS"))
        && toks.get(i + 1).is_some_and(|n| n.is_kw(sql, "VALUE"))
        && toks.get(i + 2).is_some_and(|n| n.is_kw(sql, "FOR"))
}

pub fn tokenize(sql: &str) -> Result<Vec<Token>, LexError> {
    let mut out = Vec::with_capacity(sql.len() / 4 + 4);
    tokenize_into(sql, &mut out)?;
    Ok(out)
}

/// Like [`tokenize`], reusing `out`'s allocation.
pub fn tokenize_into(sql: &str, out: &mut Vec<Token>) -> Result<(), LexError> {
    tokenize_with(sql, SqlMode::default(), DEFAULT_SERVER_VERSION, out)
}

/// Tokenize `sql` as MariaDB with server version `version` (e.g. 101106 for 10.11.6) reads it
/// under sql_mode `mode`.
///
/// Comments follow MariaDB's lexer (`sql_lex.cc`, checked against a 10.11 server):
/// - `/*! ... */` and `/*M! ... */` are code;
/// - `/*!NNNNN` / `/*M!NNNNN` with 5 digits, or 6 if a sixth digit follows, are code when the
///   number is at most `version` and (for `/*!`) outside MySQL's 50700..=99999 range, else the
///   comment is skipped up to its `*/`, one level of nested `/* */` allowed; fewer than 5
///   digits are not a version, they are code;
/// - inside executed comment code, `/* */` is an ordinary comment and `/*!` is refused (MariaDB
///   reports a syntax error);
/// - other `/* */` comments (optimizer hints `/*+ ... */` included) end at the first `*/`.
pub fn tokenize_with(
    sql: &str,
    mode: SqlMode,
    version: u32,
    out: &mut Vec<Token>,
) -> Result<(), LexError> {
    out.clear();
    let b = sql.as_bytes();
    let n = b.len();
    let mut i = 0usize;
    // Inside an executed comment: its closing `*/` is skipped like whitespace.
    let mut in_exec = false;
    let nbe = mode.no_backslash_escapes();
    while i < n {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => {
                i += 1;
            }
            b'#' => i = skip_line(b, i),
            b'-' if b.get(i + 1) == Some(&b'-') && b.get(i + 2).is_none_or(|&x| x <= b' ') => {
                i = skip_line(b, i)
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let maria = b.get(i + 2) == Some(&b'M') && b.get(i + 3) == Some(&b'!');
                let exec = maria || b.get(i + 2) == Some(&b'!');
                if !exec {
                    i = skip_comment(b, i + 2, 0).ok_or(LexError {
                        offset: i,
                        what: "unterminated comment",
                    })?;
                    continue;
                }
                if in_exec {
                    return Err(LexError {
                        offset: i,
                        what: "executable comment inside an executable comment",
                    });
                }
                let body = i + if maria { 4 } else { 3 };
                let digits = b[body..]
                    .iter()
                    .take(6)
                    .take_while(|d| d.is_ascii_digit())
                    .count();
                if digits >= 5 {
                    let v: u32 = sql[body..body + digits].parse().unwrap_or(u32::MAX);
                    let runs = v <= version && (maria || !(50700..=99999).contains(&v));
                    if runs {
                        in_exec = true;
                        i = body + digits;
                    } else {
                        i = skip_comment(b, body + digits, 1).ok_or(LexError {
                            offset: i,
                            what: "unterminated comment",
                        })?;
                    }
                } else {
                    in_exec = true;
                    i = body;
                }
            }
            b'*' if in_exec && b.get(i + 1) == Some(&b'/') => {
                in_exec = false;
                i += 2;
            }
            b'"' if mode.ansi_quotes() => {
                let e = skip_quoted_ident(b, i).ok_or(LexError {
                    offset: i,
                    what: "unterminated quoted identifier",
                })?;
                push(out, TokKind::QuotedIdent, i, e);
                i = e;
            }
            b'\'' | b'"' => {
                let e = skip_string(b, i, c, nbe).ok_or(LexError {
                    offset: i,
                    what: "unterminated string",
                })?;
                let kind = if c == b'\'' {
                    TokKind::Str
                } else {
                    TokKind::DqStr
                };
                push(out, kind, i, e);
                i = e;
            }
            b'`' => {
                let e = skip_quoted_ident(b, i).ok_or(LexError {
                    offset: i,
                    what: "unterminated quoted identifier",
                })?;
                push(out, TokKind::QuotedIdent, i, e);
                i = e;
            }
            b'?' => {
                push(out, TokKind::Placeholder, i, i + 1);
                i += 1;
            }
            b'@' => {
                let mut e = i + 1;
                if b.get(e) == Some(&b'@') {
                    e += 1;
                }
                match b.get(e) {
                    Some(b'`') => {
                        e = skip_quoted_ident(b, e).ok_or(LexError {
                            offset: e,
                            what: "unterminated quoted identifier",
                        })?
                    }
                    Some(&q @ (b'\'' | b'"')) => {
                        e = skip_string(b, e, q, nbe).ok_or(LexError {
                            offset: e,
                            what: "unterminated string",
                        })?
                    }
                    _ => {
                        while e < n && (is_word_byte(b[e]) || b[e] == b'.' || b[e] == b'$') {
                            e += 1;
                        }
                    }
                }
                push(out, TokKind::Variable, i, e);
                i = e;
            }
            b'0'..=b'9' => {
                let (kind, e) = lex_number(b, i);
                push(out, kind, i, e);
                i = e;
            }
            b'.' if b.get(i + 1).is_some_and(u8::is_ascii_digit) && !prev_is_name(out, sql) => {
                let (kind, e) = lex_number(b, i);
                push(out, kind, i, e);
                i = e;
            }
            _ if (c == b'x' || c == b'X' || c == b'b' || c == b'B')
                && b.get(i + 1) == Some(&b'\'') =>
            {
                let e = skip_string(b, i + 1, b'\'', nbe).ok_or(LexError {
                    offset: i,
                    what: "unterminated string",
                })?;
                push(out, TokKind::HexOrBit, i, e);
                i = e;
            }
            _ if is_word_byte(c) || c >= 0x80 => {
                let mut e = i + 1;
                while e < n && (is_word_byte(b[e]) || b[e] >= 0x80 || b[e] == b'$') {
                    e += 1;
                }
                push(out, TokKind::Word, i, e);
                i = e;
            }
            _ => {
                let len = punct_len(b, i);
                push(out, TokKind::Punct, i, i + len);
                i += len;
            }
        }
    }
    if in_exec {
        return Err(LexError {
            offset: n,
            what: "unterminated executable comment",
        });
    }
    Ok(())
}

/// End (exclusive) of a `/* */` comment whose body starts at `i`: MariaDB's `consume_comment`,
/// which lets `nest` levels of `/*` open inside (versioned comments that are skipped get one).
fn skip_comment(b: &[u8], mut i: usize, nest: u32) -> Option<usize> {
    while i < b.len() {
        if nest > 0 && b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i = skip_comment(b, i + 2, nest - 1)?;
            continue;
        }
        if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
            return Some(i + 2);
        }
        i += 1;
    }
    None
}

/// True when `cur` must follow `prev` with no space when the statement is rendered from its
/// tokens (shape keys, the parser's text): a word glued to a string (`N'x'`, `_utf8mb4'x'`)
/// may read differently with a space between them.
pub fn glued(prev: &Token, cur: &Token) -> bool {
    prev.end == cur.start
        && prev.kind == TokKind::Word
        && matches!(cur.kind, TokKind::Str | TokKind::DqStr)
}

fn push(out: &mut Vec<Token>, kind: TokKind, s: usize, e: usize) {
    out.push(Token {
        kind,
        start: s as u32,
        end: e as u32,
    });
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `t.5` style: after a name and a dot, digits are an identifier, not a number.
fn prev_is_name(out: &[Token], _sql: &str) -> bool {
    out.last()
        .is_some_and(|t| matches!(t.kind, TokKind::Word | TokKind::QuotedIdent))
}

fn skip_line(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i] != b'\n' {
        i += 1;
    }
    i
}

/// End (exclusive) of a string starting at `i` with quote `q`: doubled quotes, and backslash
/// escapes unless NO_BACKSLASH_ESCAPES (`no_escapes`).
fn skip_string(b: &[u8], i: usize, q: u8, no_escapes: bool) -> Option<usize> {
    let mut j = i + 1;
    while j < b.len() {
        let c = b[j];
        if c == b'\\' && !no_escapes {
            j += 2;
        } else if c == q {
            if b.get(j + 1) == Some(&q) {
                j += 2;
            } else {
                return Some(j + 1);
            }
        } else {
            j += 1;
        }
    }
    None
}

/// End (exclusive) of an identifier quoted with the byte at `i` (backtick, or `"` under
/// ANSI_QUOTES); the quote doubled stands for itself.
fn skip_quoted_ident(b: &[u8], i: usize) -> Option<usize> {
    let q = b[i];
    let mut j = i + 1;
    while j < b.len() {
        if b[j] == q {
            if b.get(j + 1) == Some(&q) {
                j += 2;
            } else {
                return Some(j + 1);
            }
        } else {
            j += 1;
        }
    }
    None
}

fn lex_number(b: &[u8], i: usize) -> (TokKind, usize) {
    let n = b.len();
    if b[i] == b'0' && i + 1 < n && (b[i + 1] == b'x' || b[i + 1] == b'b') {
        let hex = b[i + 1] == b'x';
        let mut e = i + 2;
        while e < n
            && (if hex {
                b[e].is_ascii_hexdigit()
            } else {
                b[e] == b'0' || b[e] == b'1'
            })
        {
            e += 1;
        }
        if e > i + 2 && (e == n || !is_word_byte(b[e])) {
            return (TokKind::HexOrBit, e);
        }
    }
    let mut e = i;
    let mut kind = TokKind::Int;
    while e < n && b[e].is_ascii_digit() {
        e += 1;
    }
    if e < n && b[e] == b'.' {
        kind = TokKind::Decimal;
        e += 1;
        while e < n && b[e].is_ascii_digit() {
            e += 1;
        }
    }
    if e < n && (b[e] == b'e' || b[e] == b'E') {
        let mut f = e + 1;
        if f < n && (b[f] == b'+' || b[f] == b'-') {
            f += 1;
        }
        if f < n && b[f].is_ascii_digit() {
            while f < n && b[f].is_ascii_digit() {
                f += 1;
            }
            kind = TokKind::Decimal;
            e = f;
        }
    }
    // MySQL identifiers may start with digits (`1abc`): then the whole run is a word.
    if kind == TokKind::Int && e < n && (is_word_byte(b[e]) || b[e] == b'$') {
        let mut f = e;
        while f < n && (is_word_byte(b[f]) || b[f] >= 0x80 || b[f] == b'$') {
            f += 1;
        }
        return (TokKind::Word, f);
    }
    (kind, e)
}

fn punct_len(b: &[u8], i: usize) -> usize {
    let rest = &b[i..];
    for op in [&b"<=>"[..], b"->>"] {
        if rest.starts_with(op) {
            return 3;
        }
    }
    for op in [
        &b"<="[..],
        b">=",
        b"<>",
        b"!=",
        b":=",
        b"||",
        b"&&",
        b"<<",
        b">>",
        b"->",
    ] {
        if rest.starts_with(op) {
            return 2;
        }
    }
    // One UTF-8 scalar (non-ASCII bytes are words above, so this is ASCII).
    1
}

/// Decode a string token's value the way MySQL does (backslash escapes unless
/// NO_BACKSLASH_ESCAPES, doubled quotes).
pub fn unquote_string(tok: &str) -> String {
    let b = tok.as_bytes();
    if b.len() < 2 {
        return String::new();
    }
    let q = b[0];
    let inner = &tok[1..tok.len() - 1];
    if !inner.contains('\\') && !inner.contains(q as char) {
        return inner.to_string();
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('0') => out.push('\0'),
                Some('b') => out.push('\u{8}'),
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some('t') => out.push('\t'),
                Some('Z') => out.push('\u{1a}'),
                // `\%` and `\_` keep their backslash (they are LIKE escapes).
                Some('%') => out.push_str("\\%"),
                Some('_') => out.push_str("\\_"),
                Some(o) => out.push(o),
                None => {}
            }
        } else if c as u32 == q as u32 && chars.peek() == Some(&c) {
            chars.next();
            out.push(c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Byte offset of a sqlparser `(line, column)` location (both 1-based, column counted in
/// characters). `None` for the empty location (0, 0) or one past the text.
pub struct LineIndex {
    line_starts: Vec<usize>,
    /// For a text that is not all ASCII: the byte offset of every character, so that a lookup
    /// stays O(1) (a per-lookup walk made one long line quadratic: a 2,000-row INSERT took
    /// seconds to plan).
    char_starts: Option<Vec<u32>>,
}

impl LineIndex {
    pub fn new(sql: &str) -> Self {
        let mut line_starts = vec![0];
        for (i, c) in sql.bytes().enumerate() {
            if c == b'\n' {
                line_starts.push(i + 1);
            }
        }
        let char_starts =
            (!sql.is_ascii()).then(|| sql.char_indices().map(|(i, _)| i as u32).collect());
        LineIndex {
            line_starts,
            char_starts,
        }
    }

    pub fn offset(&self, sql: &str, line: u64, column: u64) -> Option<usize> {
        if line == 0 || column == 0 {
            return None;
        }
        let start = *self.line_starts.get(line as usize - 1)?;
        let Some(chars) = &self.char_starts else {
            let off = start.checked_add(column as usize - 1)?;
            return (off <= sql.len()).then_some(off);
        };
        // Line starts follow a '\n', so they are character boundaries.
        let first = chars.partition_point(|&b| (b as usize) < start);
        let i = first.checked_add(column as usize - 1)?;
        match chars.get(i) {
            Some(&b) => Some(b as usize),
            None => (i == chars.len()).then_some(sql.len()),
        }
    }
}

/// Index of the token starting exactly at byte `off`.
pub fn token_at(tokens: &[Token], off: usize) -> Option<usize> {
    tokens.binary_search_by_key(&(off as u32), |t| t.start).ok()
}

/// Byte ranges of the statements in a multi-statement text, split at top-level `;`
/// (comments and strings respected). Empty statements are dropped.
pub fn split_statements(sql: &str) -> Result<Vec<std::ops::Range<usize>>, LexError> {
    split_statements_in(sql, SqlMode::default(), DEFAULT_SERVER_VERSION)
}

/// [`split_statements`] as a session in sql_mode `mode` on a server of version `version`
/// reads the text (`'a\'; b'` is one string, or a string and more, by NO_BACKSLASH_ESCAPES).
pub fn split_statements_in(
    sql: &str,
    mode: SqlMode,
    version: u32,
) -> Result<Vec<std::ops::Range<usize>>, LexError> {
    let mut toks = Vec::new();
    tokenize_with(sql, mode, version, &mut toks)?;
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut has_tok = false;
    for t in &toks {
        if t.is_punct(sql, ";") {
            if has_tok {
                out.push(start..t.start as usize);
            }
            start = t.end as usize;
            has_tok = false;
        } else {
            has_tok = true;
        }
    }
    if has_tok {
        out.push(start..sql.len());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(sql: &str) -> Vec<(TokKind, &str)> {
        tokenize(sql)
            .unwrap()
            .iter()
            .map(|t| (t.kind, t.text(sql)))
            .collect()
    }

    #[test]
    fn comments_and_exec_comments() {
        let sql = "/* a */ SELECT /*!40001 SQL_NO_CACHE */ c -- x\n FROM t # y\n";
        let k: Vec<_> = kinds(sql).into_iter().map(|(_, t)| t).collect();
        assert_eq!(k, ["SELECT", "SQL_NO_CACHE", "c", "FROM", "t"]);
        let k: Vec<_> = kinds("SELECT 1--2").into_iter().map(|(_, t)| t).collect();
        assert_eq!(k, ["SELECT", "1", "-", "-", "2"]);
    }

    #[test]
    fn literals() {
        use TokKind::*;
        assert_eq!(
            kinds(r"x='a\'b''c' AND y=1.5e3 AND z=0x1F AND w=X'0A' AND v=?"),
            vec![
                (Word, "x"),
                (Punct, "="),
                (Str, r"'a\'b''c'"),
                (Word, "AND"),
                (Word, "y"),
                (Punct, "="),
                (Decimal, "1.5e3"),
                (Word, "AND"),
                (Word, "z"),
                (Punct, "="),
                (HexOrBit, "0x1F"),
                (Word, "AND"),
                (Word, "w"),
                (Punct, "="),
                (HexOrBit, "X'0A'"),
                (Word, "AND"),
                (Word, "v"),
                (Punct, "="),
                (Placeholder, "?"),
            ]
        );
        assert_eq!(unquote_string(r"'a\'b''c\n'"), "a'b'c\n");
        assert_eq!(kinds("a<=>b")[1], (Punct, "<=>"));
        assert_eq!(kinds("t.5a")[2], (Word, "5a"));
    }

    fn texts_with(sql: &str, mode: SqlMode, version: u32) -> Result<Vec<&str>, LexError> {
        let mut out = Vec::new();
        tokenize_with(sql, mode, version, &mut out)?;
        Ok(out.iter().map(|t| t.text(sql)).collect())
    }

    /// Each case checked against MariaDB 10.11.19 (`SELECT 1 <comment>`).
    #[test]
    fn versioned_comments_as_mariadb_gates_them() {
        let d = SqlMode::default();
        let t = |sql| texts_with(sql, d, 101119).unwrap();
        assert_eq!(t("1 /*!100000 +1 */"), ["1", "+", "1"]);
        assert_eq!(t("1 /*!10000 +1 */"), ["1", "+", "1"]);
        assert_eq!(t("1 /*!50700 +1 */"), ["1"]);
        assert_eq!(t("1 /*!99999 +1 */"), ["1"]);
        assert_eq!(t("1 /*M!50700 +1 */"), ["1", "+", "1"]);
        assert_eq!(t("1 /*!50699 +1 */"), ["1", "+", "1"]);
        assert_eq!(t("1 /*M!999999 +1 */"), ["1"]);
        assert_eq!(t("1 /*!999999 +1 */"), ["1"]);
        assert_eq!(t("1 /*M!101119 +1 */"), ["1", "+", "1"]);
        assert_eq!(t("1 /*M!101120 +1 */"), ["1"]);
        assert_eq!(t("1 /*!1000 +1 */"), ["1", "1000", "+", "1"]);
        assert_eq!(t("1 /*!1000000 +1 */"), ["1", "0", "+", "1"]);
        assert_eq!(t("1 /*+ +1 */"), ["1"]);
        assert_eq!(t("1 /*m!+1 */"), ["1"]);
        assert_eq!(t("1 /*!100000 +1 /* x */ +2 */"), ["1", "+", "1", "+", "2"]);
        assert_eq!(t("1 /*!999999 +1 /* x */ +2 */ + 4"), ["1", "+", "4"]);
        assert_eq!(t("1 /*!999999 +1 /* x /* y */ +2 */ + 4"), ["1", "+", "4"]);
        assert_eq!(t("1 /* a /* b */ + 8"), ["1", "+", "8"]);
        assert_eq!(t("1 /*! + '*/' */"), ["1", "+", "'*/'"]);
        // The skipped comment ends inside the string: MariaDB then meets an unterminated one.
        assert!(texts_with("1 /*!999999 + '*/' */", d, 101119).is_err());
        assert!(texts_with("1 /*! +1 /*! +2 */ +4 */", d, 101119).is_err());
        assert!(texts_with("1 /*! +1", d, 101119).is_err());
    }

    #[test]
    fn sql_mode_changes_quotes_and_escapes() {
        let ansi = SqlMode::from_bits(SqlMode::ANSI_QUOTES);
        let mut out = Vec::new();
        tokenize_with(r#"SELECT "a""b" FROM t"#, ansi, 101100, &mut out).unwrap();
        assert_eq!(out[1].kind, TokKind::QuotedIdent);
        assert_eq!(out[1].ident_value(r#"SELECT "a""b" FROM t"#), r#"a"b"#);
        let nbe = SqlMode::from_bits(SqlMode::NO_BACKSLASH_ESCAPES);
        let sql = r"SELECT 'a\'; SELECT 2";
        assert_eq!(split_statements_in(sql, nbe, 101100).unwrap().len(), 2);
        assert!(split_statements(sql).is_err());
    }

    #[test]
    fn line_index() {
        let sql = "SELECT\n  é, b";
        let li = LineIndex::new(sql);
        assert_eq!(li.offset(sql, 2, 3), Some(9));
        assert_eq!(&sql[li.offset(sql, 2, 6).unwrap()..], "b");
        assert_eq!(li.offset(sql, 2, 7), Some(sql.len()));
        assert_eq!(li.offset(sql, 2, 8), None);
        let ascii = "SELECT\n  e, b";
        let li = LineIndex::new(ascii);
        assert_eq!(li.offset(ascii, 2, 3), Some(9));
        assert_eq!(li.offset(ascii, 2, 7), Some(ascii.len()));
        assert_eq!(li.offset(ascii, 2, 8), None);
        assert_eq!(li.offset(ascii, 3, 1), None);
    }

    #[test]
    fn split() {
        let sql = "SELECT ';'; SELECT 2 ;; ";
        let parts: Vec<_> = split_statements(sql)
            .unwrap()
            .into_iter()
            .map(|r| sql[r].trim().to_string())
            .collect();
        assert_eq!(parts, ["SELECT ';'", "SELECT 2"]);
    }
}
