//! The character sets MariaDB clients speak, read as MariaDB reads them.
//!
//! The router plans on `&str`. A client whose connection character set is not UTF-8 sends bytes
//! the proxy [`decode`]s into text that reads exactly as MariaDB's lexer reads those bytes: every
//! lexer unit (one byte, or a structurally valid multi-byte sequence) becomes its character, or,
//! where that would not read the same (a unit MariaDB cannot map, a multi-byte unit whose character
//! is ASCII such as sjis `0x815F` = `\`, one of two units of the same character), *escape
//! characters* carrying its raw bytes. [`encode`] gives the exact bytes back, so what Shoal
//! forwards is still the client's bytes.
//!
//! A shard key value is read as MariaDB converts it ([`stored_text`], [`stored_bytes`]): a unit
//! it cannot map becomes `'?'`, and a `BINARY` column stores the connection character set's bytes.
//!
//! Mappings: MariaDB's own, from tables generated from a real MariaDB
//! (`scripts/gen-charset-tables`): every byte of the single-byte sets, and for the multi-byte
//! sets the units where MariaDB differs from `encoding_rs` (which maps the rest).

use std::borrow::Cow;

use crate::error::RouterError;

mod multi;
mod single;
#[path = "tables.rs"]
mod tables;
mod units;

#[cfg(test)]
mod tests;

/// A failure to read or write text in a character set (the router's one error type).
pub type CharsetError = RouterError;

/// A character set of a MariaDB client connection (`character_set_client` /
/// `character_set_connection`): every one MariaDB 10.11 accepts there, `binary`, and MySQL 8's
/// `gb18030`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Charset {
    Armscii8,
    Ascii,
    Big5,
    Binary,
    Cp1250,
    Cp1251,
    Cp1256,
    Cp1257,
    Cp850,
    Cp852,
    Cp866,
    Cp932,
    Dec8,
    Eucjpms,
    Euckr,
    Gb18030,
    Gb2312,
    Gbk,
    Geostd8,
    Greek,
    Hebrew,
    Hp8,
    Keybcs2,
    Koi8r,
    Koi8u,
    Latin1,
    Latin2,
    Latin5,
    Latin7,
    Macce,
    Macroman,
    Sjis,
    Swe7,
    Tis620,
    Ujis,
    Utf8mb3,
    Utf8mb4,
}

/// Every charset with its MariaDB name.
const NAMES: &[(Charset, &str)] = &[
    (Charset::Armscii8, "armscii8"),
    (Charset::Ascii, "ascii"),
    (Charset::Big5, "big5"),
    (Charset::Binary, "binary"),
    (Charset::Cp1250, "cp1250"),
    (Charset::Cp1251, "cp1251"),
    (Charset::Cp1256, "cp1256"),
    (Charset::Cp1257, "cp1257"),
    (Charset::Cp850, "cp850"),
    (Charset::Cp852, "cp852"),
    (Charset::Cp866, "cp866"),
    (Charset::Cp932, "cp932"),
    (Charset::Dec8, "dec8"),
    (Charset::Eucjpms, "eucjpms"),
    (Charset::Euckr, "euckr"),
    (Charset::Gb18030, "gb18030"),
    (Charset::Gb2312, "gb2312"),
    (Charset::Gbk, "gbk"),
    (Charset::Geostd8, "geostd8"),
    (Charset::Greek, "greek"),
    (Charset::Hebrew, "hebrew"),
    (Charset::Hp8, "hp8"),
    (Charset::Keybcs2, "keybcs2"),
    (Charset::Koi8r, "koi8r"),
    (Charset::Koi8u, "koi8u"),
    (Charset::Latin1, "latin1"),
    (Charset::Latin2, "latin2"),
    (Charset::Latin5, "latin5"),
    (Charset::Latin7, "latin7"),
    (Charset::Macce, "macce"),
    (Charset::Macroman, "macroman"),
    (Charset::Sjis, "sjis"),
    (Charset::Swe7, "swe7"),
    (Charset::Tis620, "tis620"),
    (Charset::Ujis, "ujis"),
    (Charset::Utf8mb3, "utf8mb3"),
    (Charset::Utf8mb4, "utf8mb4"),
];

impl Charset {
    /// Every charset, in name order.
    pub fn all() -> impl Iterator<Item = Charset> {
        NAMES.iter().map(|&(c, _)| c)
    }

    /// The charset MariaDB names `name` (case-insensitive; `utf8` is `utf8mb3`, as in MariaDB's
    /// default `old_mode`).
    pub fn from_name(name: &str) -> Option<Charset> {
        if name.eq_ignore_ascii_case("utf8") {
            return Some(Charset::Utf8mb3);
        }
        NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|&(c, _)| c)
    }

    /// The charset of a collation id (the handshake's, a column definition's): MariaDB 10.11's
    /// ids, and MySQL 8's where they differ (255-323 utf8mb4, 248-250 gb18030). `None` for a
    /// charset clients cannot use (ucs2, utf16, utf32) or an unknown id.
    pub fn from_collation_id(id: u16) -> Option<Charset> {
        match id {
            248..=250 => return Some(Charset::Gb18030),
            255..=323 => return Some(Charset::Utf8mb4),
            _ => {}
        }
        let i = tables::COLLATIONS.partition_point(|&(_, last, _)| last < id);
        let &(first, _, name) = tables::COLLATIONS.get(i)?;
        (id >= first).then(|| Charset::from_name(name)).flatten()
    }

    /// MariaDB's name of the charset (`utf8mb3` for `utf8`).
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|&&(c, _)| c == self)
            .map_or("", |&(_, n)| n)
    }

    /// UTF-8 (`utf8mb4`, `utf8mb3`): the statement is the text, no decoding needed.
    pub fn is_utf8(self) -> bool {
        matches!(self, Charset::Utf8mb4 | Charset::Utf8mb3)
    }

    /// How the charset's units are read and mapped.
    fn kind(self) -> units::Kind {
        units::Kind::of(self)
    }
}

impl std::fmt::Display for Charset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A session's character sets for statements: the one its statements' bytes are in
/// (`character_set_client`) and the one literals are converted to (`character_set_connection`).
/// `SET NAMES x` sets both to x.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Charsets {
    pub client: Charset,
    pub connection: Charset,
}

impl Charsets {
    /// utf8mb4 for both (a UTF-8 client: what the router assumed before it knew charsets).
    pub const UTF8MB4: Charsets = Charsets::names(Charset::Utf8mb4);

    /// Both `cs` (`SET NAMES cs`).
    pub const fn names(cs: Charset) -> Charsets {
        Charsets {
            client: cs,
            connection: cs,
        }
    }
}

impl Default for Charsets {
    fn default() -> Self {
        Charsets::UTF8MB4
    }
}

/// The first escape character: a unit MariaDB's lexer reads that has no character which reads
/// the same is written as one escape character per byte, U+10FE00 + its first byte, then
/// U+10FF00 + each further byte (plane 16's private use area, which no client text needs: the
/// count of U+10FExx is the count of units, each of which MariaDB converts to one `'?'`).
const ESCAPE_FIRST: u32 = 0x10_FE00;
const ESCAPE_NEXT: u32 = 0x10_FF00;

/// The byte an escape character carries and whether it starts a unit; `None` for any other
/// character.
fn escaped_byte(c: char) -> Option<(u8, bool)> {
    let cp = c as u32;
    match cp {
        ESCAPE_FIRST..=0x10_FEFF => Some(((cp - ESCAPE_FIRST) as u8, true)),
        ESCAPE_NEXT..=0x10_FFFF => Some(((cp - ESCAPE_NEXT) as u8, false)),
        _ => None,
    }
}

/// Whether `s` holds an escape character.
pub fn has_escapes(s: &str) -> bool {
    // U+10FE00..U+10FFFF are 4-byte sequences F4 8F B8..BF xx.
    s.as_bytes()
        .windows(3)
        .any(|w| w[0] == 0xF4 && w[1] == 0x8F && w[2] >= 0xB8)
}

fn push_escaped(out: &mut String, unit: &[u8]) {
    for (i, &b) in unit.iter().enumerate() {
        let base = if i == 0 { ESCAPE_FIRST } else { ESCAPE_NEXT };
        // Always a valid char: plane 16, not a surrogate.
        out.extend(char::from_u32(base + u32::from(b)));
    }
}

/// `bytes` (a statement in `cs`) as text that reads as MariaDB's lexer reads the bytes: ASCII
/// bytes as themselves, every other unit as its character where that character's [`encode`] is
/// the unit and it is not ASCII, else as escape characters carrying its bytes. Borrowed when the
/// bytes are that text already (ASCII, or valid UTF-8 in a UTF-8 charset). An error only if
/// the text would not encode back to exactly `bytes` (by construction it does: checked).
pub fn decode(cs: Charset, bytes: &[u8]) -> Result<Cow<'_, str>, CharsetError> {
    let kind = cs.kind();
    if let Some(s) = kind.as_text(bytes) {
        return Ok(Cow::Borrowed(s));
    }
    let mut out = String::with_capacity(bytes.len() * 2);
    let mut rest = bytes;
    while let Some(&b) = rest.first() {
        let n = kind.unit_len(rest);
        let (unit, tail) = rest.split_at(n);
        rest = tail;
        if n == 1 && b < 0x80 {
            out.push(char::from(b));
            continue;
        }
        match kind.map(unit) {
            units::Mapped::Char(c)
                if !c.is_ascii()
                    && escaped_byte(c).is_none()
                    && kind.encode_char(c).as_deref() == Some(unit) =>
            {
                out.push(c)
            }
            _ => push_escaped(&mut out, unit),
        }
    }
    if encode(cs, &out)?.as_ref() != bytes {
        return Err(RouterError::unsupported(format!(
            "a statement in {cs} that Shoal cannot read exactly"
        )));
    }
    Ok(Cow::Owned(out))
}

/// `text` (a statement the router read or rendered) as bytes in `cs`: escape characters as the
/// bytes they carry, every other character as its unit. An error names a character `cs` cannot
/// hold (e.g. a configured table name the client's charset has no letters for).
pub fn encode(cs: Charset, text: &str) -> Result<Cow<'_, [u8]>, CharsetError> {
    let kind = cs.kind();
    if text.is_ascii() || (kind.is_utf8() && !has_escapes(text)) {
        return Ok(Cow::Borrowed(text.as_bytes()));
    }
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c as u8);
        } else if let Some((b, _)) = escaped_byte(c) {
            out.push(b);
        } else if let Some(unit) = kind.encode_char(c) {
            out.extend_from_slice(&unit);
        } else {
            return Err(RouterError::unsupported(format!(
                "text with {c:?} (U+{:04X}) for a {cs} connection, which cannot hold it",
                c as u32
            )));
        }
    }
    Ok(Cow::Owned(out))
}

/// What MariaDB makes of `bytes` in `cs` converted to Unicode (`CONVERT(... USING utf8mb4)`):
/// every unit it cannot map becomes one `'?'`. An error where MariaDB keeps what Rust text
/// cannot hold (a UTF-8 encoded surrogate, which MariaDB's UTF-8 charsets accept; `binary`
/// bytes that are not UTF-8, which a strict UTF-8 column refuses).
pub fn to_unicode(cs: Charset, bytes: &[u8]) -> Result<Cow<'_, str>, CharsetError> {
    let kind = cs.kind();
    if let Some(s) = kind.as_unicode(bytes) {
        return Ok(Cow::Borrowed(s));
    }
    if cs == Charset::Binary {
        return std::str::from_utf8(bytes)
            .map(Cow::Borrowed)
            .map_err(|_| RouterError::unsupported("a binary string that is not UTF-8 as text"));
    }
    let mut out = String::with_capacity(bytes.len() * 2);
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = kind.unit_len(rest);
        let (unit, tail) = rest.split_at(n);
        rest = tail;
        match kind.map(unit) {
            units::Mapped::Char(c) => out.push(c),
            units::Mapped::Unmapped => out.push('?'),
            units::Mapped::Surrogate => {
                return Err(RouterError::unsupported(format!(
                    "a {cs} string holding an encoded surrogate"
                )));
            }
        }
    }
    Ok(Cow::Owned(out))
}

/// The client's bytes of a literal the router read: a UTF-8 client's statement is not decoded
/// (its text is its bytes, an escape character there is a character), any other's is.
fn client_bytes(client: Charset, literal: &str) -> Result<Cow<'_, [u8]>, CharsetError> {
    if client.is_utf8() {
        return Ok(Cow::Borrowed(literal.as_bytes()));
    }
    encode(client, literal)
}

/// A string literal of a statement read in `cs` (its text as [`decode`] gave it; a UTF-8
/// client's statement as it is) as the Unicode string MariaDB converts it to for a UTF-8 column
/// (`'?'` for what it cannot map), going through `cs.connection` as MariaDB does.
pub fn stored_text(cs: Charsets, literal: &str) -> Result<Cow<'_, str>, CharsetError> {
    let text = match cs.client {
        Charset::Utf8mb4 => Cow::Borrowed(literal),
        Charset::Utf8mb3 if !has_supplementary(literal) => Cow::Borrowed(literal),
        // utf8mb3 reads each byte of a 4-byte sequence as a unit it cannot map.
        Charset::Utf8mb3 => Cow::Owned(
            literal
                .chars()
                .flat_map(|c| {
                    let n = if u32::from(c) > 0xFFFF {
                        c.len_utf8()
                    } else {
                        1
                    };
                    std::iter::repeat_n(if n > 1 { '?' } else { c }, n)
                })
                .collect(),
        ),
        client => {
            let bytes = encode(client, literal)?;
            Cow::Owned(to_unicode(client, &bytes)?.into_owned())
        }
    };
    // ASCII converts to itself and back in every connection charset but swe7's kind.
    let ascii_is_ascii =
        !matches!(cs.connection.kind(), units::Kind::Single(t) if !t.low.is_empty());
    if cs.connection == cs.client
        || cs.connection == Charset::Utf8mb4
        || (text.is_ascii() && ascii_is_ascii && cs.connection != Charset::Binary)
    {
        return Ok(text);
    }
    if cs.connection == Charset::Binary {
        // A binary connection keeps the client's bytes; the column reads them as UTF-8.
        let bytes = client_bytes(cs.client, literal)?;
        return Ok(Cow::Owned(
            to_unicode(Charset::Binary, &bytes)?.into_owned(),
        ));
    }
    // Through a utf8mb3 connection: what it cannot hold becomes '?'. Into another charset
    // MariaDB maps some characters its own way (uni -> sjis puts U+005C on 0x815F): not read.
    if cs.connection != Charset::Utf8mb3 {
        return Err(not_exact(cs.connection));
    }
    Ok(Cow::Owned(
        text.chars()
            .map(|c| if u32::from(c) <= 0xFFFF { c } else { '?' })
            .collect(),
    ))
}

fn not_exact(to: Charset) -> CharsetError {
    RouterError::unsupported(format!(
        "a string key converted to {to} (Shoal reads conversions to Unicode exactly, not \
         MariaDB's conversions from it)"
    ))
}

/// The bytes a `BINARY`/`VARBINARY`/`BLOB` column stores for a string literal of a statement read
/// in `cs`: the literal's bytes in `cs.connection` (converted from `cs.client` where they differ,
/// `'?'` for what it cannot hold).
pub fn stored_bytes(cs: Charsets, literal: &str) -> Result<Cow<'_, [u8]>, CharsetError> {
    if cs.connection == cs.client || cs.connection == Charset::Binary {
        return client_bytes(cs.client, literal);
    }
    // Bytes of another charset are MariaDB's conversion from Unicode (uni -> sjis puts `\` on
    // 0x815F): not read.
    if !cs.connection.is_utf8() {
        return Err(not_exact(cs.connection));
    }
    let text = stored_text(cs, literal)?;
    Ok(Cow::Owned(text.into_owned().into_bytes()))
}

/// `CONVERT(text USING cs)` as Unicode text, for a Unicode `cs` (utf8mb4; utf8mb3, where a
/// character beyond the BMP becomes one `'?'`). `None` for any other: MariaDB's conversions
/// from Unicode are its own (uni -> sjis puts U+005C on 0x815F), and Shoal does not read them.
pub fn convert_text(cs: Charset, text: &str) -> Option<Cow<'_, str>> {
    match cs {
        Charset::Utf8mb4 => Some(Cow::Borrowed(text)),
        Charset::Utf8mb3 if !has_supplementary(text) => Some(Cow::Borrowed(text)),
        Charset::Utf8mb3 => Some(Cow::Owned(
            text.chars()
                .map(|c| if u32::from(c) <= 0xFFFF { c } else { '?' })
                .collect(),
        )),
        _ => None,
    }
}

fn has_supplementary(s: &str) -> bool {
    s.bytes().any(|b| b >= 0xF0)
}

/// The character `unit` (one lexer unit of `cs`) maps to in MariaDB, `None` where it converts
/// to `'?'` (or a surrogate): for the tests that compare with MariaDB.
#[doc(hidden)]
pub fn unit_char(cs: Charset, unit: &[u8]) -> Option<char> {
    match cs.kind().map(unit) {
        units::Mapped::Char(c) => Some(c),
        _ => None,
    }
}

/// The length of the lexer unit `bytes` starts with in `cs` (1 for a byte that starts none).
#[doc(hidden)]
pub fn unit_len(cs: Charset, bytes: &[u8]) -> usize {
    cs.kind().unit_len(bytes)
}

/// `encoding_rs`'s reading of one unit, before MariaDB's differences: what the table generator
/// compares MariaDB with.
#[doc(hidden)]
pub fn base_char(cs: Charset, unit: &[u8]) -> Option<char> {
    match cs.kind() {
        units::Kind::Multi(m) => m.base_char(unit),
        _ => None,
    }
}
