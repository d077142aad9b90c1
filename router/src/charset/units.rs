//! How each charset splits bytes into MariaDB's lexer units, maps a unit to a character and a
//! character back to its unit.

use std::ops::Deref;

use super::Charset;
use super::multi::Multi;
use super::single::Single;
use super::tables;

/// What MariaDB converts one unit to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mapped {
    Char(char),
    /// Converted to `'?'`: malformed, or structurally valid without a mapping.
    Unmapped,
    /// A UTF-8 encoded surrogate, which MariaDB's UTF-8 charsets accept and keep.
    Surrogate,
}

/// One unit's bytes (at most 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unit {
    bytes: [u8; 4],
    len: u8,
}

impl Unit {
    pub(super) fn new(b: &[u8]) -> Option<Unit> {
        let mut bytes = [0; 4];
        bytes.get_mut(..b.len())?.copy_from_slice(b);
        Some(Unit {
            bytes,
            len: b.len() as u8,
        })
    }
}

impl Deref for Unit {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    Utf8 {
        mb4: bool,
    },
    /// Every byte is a unit; bytes are not characters.
    Binary,
    Single(&'static Single),
    Multi(Multi),
}

impl Kind {
    pub(super) fn of(cs: Charset) -> Kind {
        use Charset as C;
        let single = |t| Kind::Single(t);
        match cs {
            C::Utf8mb4 => Kind::Utf8 { mb4: true },
            C::Utf8mb3 => Kind::Utf8 { mb4: false },
            C::Binary => Kind::Binary,
            C::Big5 => Kind::Multi(Multi::Big5),
            C::Cp932 => Kind::Multi(Multi::Cp932),
            C::Eucjpms => Kind::Multi(Multi::Eucjpms),
            C::Euckr => Kind::Multi(Multi::Euckr),
            C::Gb18030 => Kind::Multi(Multi::Gb18030),
            C::Gb2312 => Kind::Multi(Multi::Gb2312),
            C::Gbk => Kind::Multi(Multi::Gbk),
            C::Sjis => Kind::Multi(Multi::Sjis),
            C::Ujis => Kind::Multi(Multi::Ujis),
            C::Armscii8 => single(&tables::ARMSCII8),
            C::Ascii => single(&tables::ASCII),
            C::Cp1250 => single(&tables::CP1250),
            C::Cp1251 => single(&tables::CP1251),
            C::Cp1256 => single(&tables::CP1256),
            C::Cp1257 => single(&tables::CP1257),
            C::Cp850 => single(&tables::CP850),
            C::Cp852 => single(&tables::CP852),
            C::Cp866 => single(&tables::CP866),
            C::Dec8 => single(&tables::DEC8),
            C::Geostd8 => single(&tables::GEOSTD8),
            C::Greek => single(&tables::GREEK),
            C::Hebrew => single(&tables::HEBREW),
            C::Hp8 => single(&tables::HP8),
            C::Keybcs2 => single(&tables::KEYBCS2),
            C::Koi8r => single(&tables::KOI8R),
            C::Koi8u => single(&tables::KOI8U),
            C::Latin1 => single(&tables::LATIN1),
            C::Latin2 => single(&tables::LATIN2),
            C::Latin5 => single(&tables::LATIN5),
            C::Latin7 => single(&tables::LATIN7),
            C::Macce => single(&tables::MACCE),
            C::Macroman => single(&tables::MACROMAN),
            C::Swe7 => single(&tables::SWE7),
            C::Tis620 => single(&tables::TIS620),
        }
    }

    pub(super) fn is_utf8(self) -> bool {
        matches!(self, Kind::Utf8 { .. })
    }

    /// `bytes` when they are their own decoded text (ASCII; valid UTF-8 without escape
    /// characters in a UTF-8 charset, and nothing beyond the BMP in utf8mb3).
    pub(super) fn as_text(self, bytes: &[u8]) -> Option<&str> {
        if bytes.is_ascii() {
            return std::str::from_utf8(bytes).ok();
        }
        match self {
            Kind::Utf8 { mb4 } => {
                let s = std::str::from_utf8(bytes).ok()?;
                let four = s.bytes().any(|b| b >= 0xF0);
                (!four || (mb4 && !super::has_escapes(s))).then_some(s)
            }
            _ => None,
        }
    }

    /// `bytes` when MariaDB converts them to Unicode unchanged.
    pub(super) fn as_unicode(self, bytes: &[u8]) -> Option<&str> {
        match self {
            Kind::Utf8 { mb4 } => {
                let s = std::str::from_utf8(bytes).ok()?;
                (mb4 || !s.bytes().any(|b| b >= 0xF0)).then_some(s)
            }
            Kind::Single(t) if !t.low.is_empty() => None,
            _ if bytes.is_ascii() => std::str::from_utf8(bytes).ok(),
            _ => None,
        }
    }

    /// The length of the unit `bytes` starts with (1 for a byte that starts no valid
    /// multi-byte unit, as MariaDB's lexer reads it). `bytes` is not empty.
    pub(super) fn unit_len(self, bytes: &[u8]) -> usize {
        match self {
            Kind::Utf8 { mb4 } => utf8_len(bytes, mb4),
            Kind::Binary | Kind::Single(_) => 1,
            Kind::Multi(m) => m.unit_len(bytes),
        }
    }

    pub(super) fn map(self, unit: &[u8]) -> Mapped {
        match (self, unit) {
            (Kind::Single(t), &[b]) => t.map(b),
            (_, &[b]) if b < 0x80 => Mapped::Char(char::from(b)),
            (Kind::Utf8 { .. }, u) => match std::str::from_utf8(u) {
                Ok(s) => s.chars().next().map_or(Mapped::Unmapped, Mapped::Char),
                Err(_) if u.len() == 3 && u[0] == 0xED => Mapped::Surrogate,
                Err(_) => Mapped::Unmapped,
            },
            (Kind::Multi(m), u) => m.map(u),
            _ => Mapped::Unmapped,
        }
    }

    /// The unit of non-ASCII `c` (the one [`Self::map`] reads back as `c`); `None` where the
    /// charset has none. UTF-8 charsets encode every character (utf8mb3 clients' text is not
    /// decoded, so it may hold what utf8mb3 splits into units of one byte).
    pub(super) fn encode_char(self, c: char) -> Option<Unit> {
        match self {
            Kind::Utf8 { .. } => Unit::new(c.encode_utf8(&mut [0; 4]).as_bytes()),
            Kind::Binary => None,
            Kind::Single(t) => t.encode(c).and_then(|b| Unit::new(&[b])),
            Kind::Multi(m) => m.encode_char(c),
        }
    }
}

/// The unit length of UTF-8 as MariaDB reads it: standard UTF-8, except that encoded
/// surrogates (ED A0..BF xx) are units too, and utf8mb3 has no 4-byte units.
fn utf8_len(b: &[u8], mb4: bool) -> usize {
    let cont = |i: usize| b.get(i).is_some_and(|&x| (0x80..=0xBF).contains(&x));
    let second = |lo: u8, hi: u8| b.get(1).is_some_and(|&x| (lo..=hi).contains(&x));
    match b[0] {
        0xC2..=0xDF if cont(1) => 2,
        0xE0 if second(0xA0, 0xBF) && cont(2) => 3,
        0xE1..=0xEF if cont(1) && cont(2) => 3,
        0xF0 if mb4 && second(0x90, 0xBF) && cont(2) && cont(3) => 4,
        0xF1..=0xF3 if mb4 && cont(1) && cont(2) && cont(3) => 4,
        0xF4 if mb4 && second(0x80, 0x8F) && cont(2) && cont(3) => 4,
        _ => 1,
    }
}
