//! The character sets of a session or a backend connection, and Shoal's reading and writing of
//! text in them (issue 50).
//!
//! A client's statements are bytes in its `character_set_client`, its literals are read in
//! `character_set_connection`, and what it is sent comes in `character_set_results` (NULL: as
//! stored). They are known from the variables a session or connection holds
//! ([`SessionState::vars`](crate::backend::state::SessionState)): a backend connection opens in
//! utf8mb4 (`session::BACKEND_COLLATION`), a session starts with its handshake
//! collation's (`session::charset_vars`), and every later change (`SET NAMES`, `SET CHARACTER
//! SET`, `SET character_set_... = `, `SET @@session.`..., in a multi-statement text too) is
//! what the backends' session trackers report; RESET CONNECTION and COM_CHANGE_USER go back to
//! the handshake's. [`Charsets::of`] is the one reading of those variables.
//!
//! The router plans on text: a statement is [`read_statement`] into text that reads as MariaDB
//! reads its bytes, and any SQL Shoal writes to a backend is [`sql_bytes`] in that connection's
//! `character_set_client` (the client's bytes again where the text is the client's). Shoal's own
//! error messages ([`message_bytes`]) and the result sets it builds ([`value_bytes`]) go out in
//! `character_set_results`, as MariaDB sends its own.

use std::borrow::Cow;
use std::ops::Range;

use shoal_router::charset::{self, Charset};

use crate::backend::state::Vars;
use crate::error::{Error, Result};

/// A session's (or a connection's) character sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charsets {
    /// `character_set_client` and `character_set_connection`: how statements are read.
    pub statements: charset::Charsets,
    /// `character_set_results`; `None` for NULL (values as stored, messages in UTF-8).
    pub results: Option<Charset>,
}

impl Default for Charsets {
    /// A backend connection as it opens (utf8mb4_general_ci), and a client that changed nothing.
    fn default() -> Self {
        Charsets {
            statements: charset::Charsets::UTF8MB4,
            results: Some(Charset::Utf8mb4),
        }
    }
}

impl Charsets {
    /// The character sets `vars` (the variables changed since a backend connection opened in
    /// utf8mb4) leave. A name Shoal does not know (no client charset MariaDB offers) reads as
    /// utf8mb4, what Shoal assumed before it knew charsets.
    pub fn of(vars: &Vars) -> Charsets {
        let named = |var: &str| {
            vars.get(var)
                .map(|v| v.trim_matches('\''))
                .filter(|v| !v.is_empty() && !v.eq_ignore_ascii_case("NULL"))
        };
        let known = |var: &str| named(var).and_then(Charset::from_name);
        let results = match vars.get("character_set_results") {
            None => Some(Charset::Utf8mb4),
            Some(_) => named("character_set_results")
                .map(|n| Charset::from_name(n).unwrap_or(Charset::Utf8mb4)),
        };
        Charsets {
            statements: charset::Charsets {
                client: known("character_set_client").unwrap_or(Charset::Utf8mb4),
                connection: known("character_set_connection").unwrap_or(Charset::Utf8mb4),
            },
            results,
        }
    }

    /// `character_set_client`.
    pub fn client(&self) -> Charset {
        self.statements.client
    }
}

/// A character set error as the client's error: a 1235 refusal naming what Shoal cannot do.
fn refusal(e: &charset::CharsetError) -> Error {
    Error::refusal(e)
}

/// The client's statement `bytes`, written in `cs`, as text that reads as MariaDB's lexer reads
/// them (see `shoal_router::charset::decode`). Borrowed where the bytes are that text already:
/// ASCII, or valid UTF-8 from a UTF-8 client (the usual case, no copy).
pub fn read_statement(cs: Charset, bytes: &[u8]) -> Result<Cow<'_, str>> {
    if cs.is_utf8()
        && let Ok(s) = std::str::from_utf8(bytes)
    {
        return Ok(Cow::Borrowed(s));
    }
    charset::decode(cs, bytes).map_err(|e| refusal(&e))
}

/// SQL text for a connection whose `character_set_client` is `cs`: the client's bytes again for
/// text read with [`read_statement`], the names Shoal spliced in written in `cs`. A character
/// `cs` cannot hold (a configured table name with letters the client's charset lacks) is
/// refused: the statement would not name it.
pub fn sql_bytes(cs: Charset, sql: &str) -> Result<Cow<'_, [u8]>> {
    if sql.is_ascii() {
        return Ok(Cow::Borrowed(sql.as_bytes()));
    }
    charset::encode(cs, sql).map_err(|e| refusal(&e))
}

/// The statements of a multi-statement text `bytes` as ranges of its bytes, `split` (the
/// lexer's splitting of text) applied as MariaDB reads the text: in `cs`, and after a statement
/// that sets `character_set_client` (`SET NAMES`, `SET CHARACTER SET`, `SET
/// character_set_client = `), the rest in that charset. `None` where the text cannot be read.
pub fn split_statements(
    mut cs: Charset,
    bytes: &[u8],
    split: impl Fn(&str) -> Option<Vec<Range<usize>>>,
) -> Option<Vec<Range<usize>>> {
    let mut out = Vec::new();
    let mut at = 0;
    'text: loop {
        let rest = &bytes[at..];
        let text = read_statement(cs, rest).ok()?;
        let ranges = split(&text)?;
        let in_bytes = byte_ranges(cs, &text, rest, ranges.clone())?;
        for (r, b) in ranges.into_iter().zip(in_bytes) {
            out.push(at + b.start..at + b.end);
            if let Some(next) = sets_client_charset(&text[r])
                && next != cs
            {
                cs = next;
                at += b.end;
                continue 'text;
            }
        }
        return Some(out);
    }
}

/// The `character_set_client` a statement sets, if it is one that does and names a charset.
fn sets_client_charset(sql: &str) -> Option<Charset> {
    use shoal_router::sql::{SetStatement, StatementKind};
    let StatementKind::Set(set) = shoal_router::sql::classify(sql) else {
        return None;
    };
    let name = match set {
        SetStatement::Names { charset, .. } | SetStatement::CharacterSet(charset) => charset,
        SetStatement::Variables(vars) => {
            vars.into_iter()
                .rev()
                .find(|v| v.name == "character_set_client")?
                .value
        }
        _ => return None,
    };
    Charset::from_name(name.trim_matches(['\'', '"', '`']))
}

/// `ranges` of `text` (the client's `bytes` as [`read_statement`] read them in `cs`) as ranges
/// of `bytes`: the same where the text is the bytes; `None` if a range does not map exactly.
pub fn byte_ranges(
    cs: Charset,
    text: &str,
    bytes: &[u8],
    ranges: Vec<Range<usize>>,
) -> Option<Vec<Range<usize>>> {
    if text.as_bytes() == bytes {
        return Some(ranges);
    }
    let mut out = Vec::with_capacity(ranges.len());
    // Byte offset of `text[..at]`, counted on from the last range's end.
    let (mut at, mut offset) = (0, 0);
    let mut to_bytes = |to: usize| -> Option<usize> {
        offset += charset::encode(cs, text.get(at..to)?).ok()?.len();
        at = to;
        Some(offset)
    };
    for r in ranges {
        let start = to_bytes(r.start)?;
        let end = to_bytes(r.end)?;
        out.push(start..end);
    }
    (out.last().is_none_or(|r| r.end <= bytes.len())).then_some(out)
}

/// One character in `cs`, `None` where it cannot hold it.
fn char_bytes(cs: Charset, c: char, out: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 4];
    match charset::encode(cs, c.encode_utf8(&mut buf)) {
        Ok(b) => {
            out.extend_from_slice(&b);
            true
        }
        Err(_) => false,
    }
}

/// A message of Shoal's own (an error) in `character_set_results`, as MariaDB converts its
/// messages (`convert_error_message`): a character the charset cannot hold as `\XXXX` (its code
/// point in hex, `\+XXXXXX` beyond the BMP); UTF-8 as it is for NULL or a UTF-8 charset.
pub fn message_bytes(results: Option<Charset>, text: &str) -> Cow<'_, [u8]> {
    let cs = match results {
        Some(cs) if !cs.is_utf8() && cs != Charset::Binary && !text.is_ascii() => cs,
        _ => return Cow::Borrowed(text.as_bytes()),
    };
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c as u8);
        } else if char_bytes(cs, c, &mut out) {
        } else if (c as u32) <= 0xFFFF {
            out.extend_from_slice(format!("\\{:04X}", c as u32).as_bytes());
        } else {
            out.extend_from_slice(format!("\\+{:06X}", c as u32).as_bytes());
        }
    }
    Cow::Owned(out)
}

/// A value of a result Shoal builds itself (UTF-8 text: catalog rows, session values, admin
/// answers) in `character_set_results`, as MariaDB converts a column's values: a character the
/// charset cannot hold becomes `?`. Bytes that are not UTF-8 are left as they are.
pub fn value_bytes(results: Option<Charset>, value: &[u8]) -> Cow<'_, [u8]> {
    let cs = match results {
        Some(cs) if !cs.is_utf8() && cs != Charset::Binary && !value.is_ascii() => cs,
        _ => return Cow::Borrowed(value),
    };
    let Ok(text) = std::str::from_utf8(value) else {
        return Cow::Borrowed(value);
    };
    if let Ok(b) = charset::encode(cs, text) {
        return b.into_owned().into();
    }
    let mut out = Vec::with_capacity(value.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c as u8);
        } else if !char_bytes(cs, c, &mut out) {
            out.push(b'?');
        }
    }
    Cow::Owned(out)
}

/// Column definitions of a result Shoal builds itself, for a client whose
/// `character_set_results` is `cs`: names in `cs`, and each UTF-8 string column given `cs`'s
/// default collation (its length in `cs`'s bytes), as MariaDB describes a column it converts.
/// Returns the definitions and which columns' values are to be converted ([`value_bytes`]).
/// A definition that does not parse is left as it is.
pub fn definitions_in(cs: Charset, defs: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<bool>) {
    use crate::wire::messages::{put_lenenc_bytes, read_lenenc_bytes};
    let (collation, max_len) = default_collation(cs);
    let mut out = Vec::with_capacity(defs.len());
    let mut text = Vec::with_capacity(defs.len());
    for def in defs {
        let mut rest = &def[..];
        let mut d = Vec::with_capacity(def.len());
        let mut ok = true;
        // catalog, schema, table, org_table, name, org_name.
        for _ in 0..6 {
            match read_lenenc_bytes(&mut rest) {
                Some(s) => put_lenenc_bytes(&mut d, &value_bytes(Some(cs), s)),
                None => ok = false,
            }
        }
        // 0x0c, charset (2), length (4), type, flags, decimals, filler.
        if !ok || rest.len() < 7 || rest[0] != 0x0c {
            out.push(def.clone());
            text.push(false);
            continue;
        }
        let id = u16::from_le_bytes([rest[1], rest[2]]);
        let utf8 = Charset::from_collation_id(id).is_some_and(Charset::is_utf8);
        d.push(0x0c);
        if utf8 {
            let per_char = if id == 33 || (192..=215).contains(&id) {
                3
            } else {
                4
            };
            let len = u32::from_le_bytes([rest[3], rest[4], rest[5], rest[6]]);
            d.extend_from_slice(&collation.to_le_bytes());
            d.extend_from_slice(&(len / per_char * max_len).to_le_bytes());
        } else {
            d.extend_from_slice(&rest[1..7]);
        }
        d.extend_from_slice(&rest[7..]);
        out.push(d);
        text.push(utf8);
    }
    (out, text)
}

/// A backend's message (an error) as text: the bytes a connection whose `character_set_results`
/// is `results` sent, read exactly, so that [`message_bytes`] gives them back to a client of
/// the same charset.
pub fn backend_message(results: Option<Charset>, bytes: &[u8]) -> String {
    let cs = results.unwrap_or(Charset::Utf8mb4);
    match read_statement(cs, bytes) {
        Ok(text) => text.into_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// MariaDB's default collation of `cs` (what a column of Shoal's own is sent with in that
/// charset) and the most bytes one of its characters takes.
pub fn default_collation(cs: Charset) -> (u16, u32) {
    use mysql_common::collations::{Collation, CollationId};
    match cs {
        // MySQL 8's tables name 255 (utf8mb4_0900_ai_ci) the default; MariaDB's is 45.
        Charset::Utf8mb4 => return (45, 4),
        Charset::Utf8mb3 => return (33, 3),
        Charset::Binary => return (63, 1),
        _ => {}
    }
    let name = cs.name();
    (1u16..=255)
        .map(|id| Collation::resolve(CollationId::from(id)))
        .find(|c| c.is_default() && c.charset() == name)
        .map_or((45, 4), |c| (c.id() as u16, u32::from(c.max_len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vars {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn charsets_come_from_the_variables() {
        assert_eq!(Charsets::of(&Vars::default()), Charsets::default());
        let gbk = Charsets::of(&vars(&[
            ("character_set_client", "gbk"),
            ("character_set_connection", "gbk"),
            ("character_set_results", "gbk"),
        ]));
        assert_eq!(gbk.client(), Charset::Gbk);
        assert_eq!(gbk.statements.connection, Charset::Gbk);
        assert_eq!(gbk.results, Some(Charset::Gbk));
        let null = Charsets::of(&vars(&[("character_set_results", "")]));
        assert_eq!(null.results, None);
        let split = Charsets::of(&vars(&[
            ("character_set_client", "latin1"),
            ("character_set_connection", "utf8mb4"),
        ]));
        assert_eq!(split.client(), Charset::Latin1);
        assert_eq!(split.statements.connection, Charset::Utf8mb4);
        assert_eq!(split.results, Some(Charset::Utf8mb4));
    }

    #[test]
    fn statements_round_trip_and_utf8_is_not_copied() {
        let gbk = encoding_bytes("SELECT '张伟'");
        let text = read_statement(Charset::Gbk, &gbk).unwrap();
        assert_eq!(text, "SELECT '张伟'");
        assert_eq!(sql_bytes(Charset::Gbk, &text).unwrap().as_ref(), &gbk[..]);
        assert!(matches!(
            read_statement(Charset::Utf8mb4, "SELECT 'é'".as_bytes()).unwrap(),
            Cow::Borrowed(_)
        ));
    }

    fn encoding_bytes(s: &str) -> Vec<u8> {
        charset::encode(Charset::Gbk, s).unwrap().into_owned()
    }

    #[test]
    fn messages_and_values_in_the_results_charset() {
        assert_eq!(
            message_bytes(Some(Charset::Latin1), "café 😀 ā").as_ref(),
            b"caf\xe9 \\+01F600 \\0101"
        );
        assert_eq!(message_bytes(None, "ā").as_ref(), "ā".as_bytes());
        assert_eq!(
            value_bytes(Some(Charset::Latin1), "café ā".as_bytes()).as_ref(),
            b"caf\xe9 ?"
        );
        assert_eq!(value_bytes(Some(Charset::Gbk), b"abc").as_ref(), b"abc");
        assert_eq!(default_collation(Charset::Gbk), (28, 2));
        assert_eq!(default_collation(Charset::Latin1), (8, 1));
        assert_eq!(default_collation(Charset::Utf8mb4), (45, 4));
    }
}
