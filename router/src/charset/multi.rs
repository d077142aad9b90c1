//! Multi-byte charsets: MariaDB's unit structure, `encoding_rs`'s mappings, and MariaDB's own
//! mapping where it differs (generated, see `tables.rs`).

use encoding_rs::{
    BIG5, DecoderResult, EUC_JP, EUC_KR, EncoderResult, Encoding, GB18030, GBK, SHIFT_JIS,
};

use super::tables;
use super::units::{Mapped, Unit};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Multi {
    Big5,
    Cp932,
    Eucjpms,
    Euckr,
    Gb18030,
    Gb2312,
    Gbk,
    Sjis,
    Ujis,
}

fn within(b: Option<&u8>, ranges: &[(u8, u8)]) -> bool {
    b.is_some_and(|&b| ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&b)))
}

/// A unit's bytes as a table key: big-endian in a u32.
pub(crate) fn unit_key(unit: &[u8]) -> u32 {
    unit.iter().fold(0, |k, &b| (k << 8) | u32::from(b))
}

impl Multi {
    /// The `encoding_rs` encoding whose mapping MariaDB's mostly is.
    fn encoding(self) -> &'static Encoding {
        match self {
            Multi::Big5 => BIG5,
            Multi::Cp932 | Multi::Sjis => SHIFT_JIS,
            Multi::Eucjpms | Multi::Ujis => EUC_JP,
            Multi::Euckr => EUC_KR,
            Multi::Gb18030 => GB18030,
            Multi::Gb2312 | Multi::Gbk => GBK,
        }
    }

    /// MariaDB's units where they differ from `encoding_rs`: sorted runs (first unit key, last
    /// unit key, code point of the first counting up with the keys, or 0: no character).
    fn differences(self) -> &'static [(u32, u32, u32)] {
        match self {
            Multi::Big5 => &tables::BIG5_DIFF,
            Multi::Cp932 => &tables::CP932_DIFF,
            Multi::Eucjpms => &tables::EUCJPMS_DIFF,
            Multi::Euckr => &tables::EUCKR_DIFF,
            Multi::Gb2312 => &tables::GB2312_DIFF,
            Multi::Gbk => &tables::GBK_DIFF,
            Multi::Sjis => &tables::SJIS_DIFF,
            Multi::Ujis => &tables::UJIS_DIFF,
            // MySQL 8's gb18030 is encoding_rs's (no MariaDB to generate differences from).
            Multi::Gb18030 => &[],
        }
    }

    /// The unit `b` starts with, as MariaDB's `ismbchar` reads it (1 if none).
    pub(super) fn unit_len(self, b: &[u8]) -> usize {
        const GBK_TRAIL: &[(u8, u8)] = &[(0x40, 0x7E), (0x80, 0xFE)];
        const SJIS_TRAIL: &[(u8, u8)] = &[(0x40, 0x7E), (0x80, 0xFC)];
        const EUC: &[(u8, u8)] = &[(0xA1, 0xFE)];
        let lead = |r: &[(u8, u8)]| within(b.first(), r);
        let at = |i: usize, r: &[(u8, u8)]| within(b.get(i), r);
        let two = match self {
            Multi::Gbk => lead(&[(0x81, 0xFE)]) && at(1, GBK_TRAIL),
            Multi::Gb18030 => {
                if lead(&[(0x81, 0xFE)])
                    && at(1, &[(0x30, 0x39)])
                    && at(2, &[(0x81, 0xFE)])
                    && at(3, &[(0x30, 0x39)])
                {
                    return 4;
                }
                lead(&[(0x81, 0xFE)]) && at(1, GBK_TRAIL)
            }
            Multi::Gb2312 => lead(&[(0xA1, 0xF7)]) && at(1, EUC),
            Multi::Big5 => lead(&[(0xA1, 0xF9)]) && at(1, &[(0x40, 0x7E), (0xA1, 0xFE)]),
            Multi::Sjis | Multi::Cp932 => lead(&[(0x81, 0x9F), (0xE0, 0xFC)]) && at(1, SJIS_TRAIL),
            Multi::Euckr => {
                lead(&[(0x81, 0xFE)]) && at(1, &[(0x41, 0x5A), (0x61, 0x7A), (0x81, 0xFE)])
            }
            Multi::Ujis | Multi::Eucjpms => {
                if lead(&[(0x8F, 0x8F)]) && at(1, EUC) && at(2, EUC) {
                    return 3;
                }
                (lead(&[(0x8E, 0x8E)]) && at(1, &[(0xA1, 0xDF)])) || (lead(EUC) && at(1, EUC))
            }
        };
        if two { 2 } else { 1 }
    }

    /// MariaDB's character for `unit` (not a single ASCII byte).
    pub(super) fn map(self, unit: &[u8]) -> Mapped {
        let diff = self.differences();
        let key = unit_key(unit);
        let i = diff.partition_point(|&(_, last, _)| last < key);
        if let Some(&(first, _, cp)) = diff.get(i)
            && first <= key
        {
            return match char::from_u32(cp + (key - first)) {
                Some(c) if cp != 0 => Mapped::Char(c),
                _ => Mapped::Unmapped,
            };
        }
        self.base_char(unit).map_or(Mapped::Unmapped, Mapped::Char)
    }

    /// `encoding_rs`'s one character for `unit` (a unit of this charset), if it has one.
    pub(crate) fn base_char(self, unit: &[u8]) -> Option<char> {
        if let [b] = unit {
            // The only single bytes above ASCII with a character: sjis's half-width katakana.
            let kana = matches!(self, Multi::Sjis | Multi::Cp932) && (0xA1..=0xDF).contains(b);
            if !kana {
                return None;
            }
        }
        let mut decoder = self.encoding().new_decoder_without_bom_handling();
        let mut buf = [0u8; 16];
        let (r, read, written) = decoder.decode_to_utf8_without_replacement(unit, &mut buf, true);
        if r != DecoderResult::InputEmpty || read != unit.len() {
            return None;
        }
        let s = std::str::from_utf8(&buf[..written]).ok()?;
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => Some(c),
            _ => None,
        }
    }

    /// The unit MariaDB reads as `c` (non-ASCII): `encoding_rs`'s where MariaDB reads it so,
    /// else the first difference that maps to `c`.
    pub(super) fn encode_char(self, c: char) -> Option<Unit> {
        let mut encoder = self.encoding().new_encoder();
        let mut buf = [0u8; 8];
        let mut tmp = [0u8; 4];
        let (r, read, written) =
            encoder.encode_from_utf8_without_replacement(c.encode_utf8(&mut tmp), &mut buf, true);
        if r == EncoderResult::InputEmpty && read == c.len_utf8() {
            let unit = &buf[..written];
            if !unit.is_empty()
                && self.unit_len(unit) == unit.len()
                && self.map(unit) == Mapped::Char(c)
            {
                return Unit::new(unit);
            }
        }
        let cp = u32::from(c);
        let &(first, _, cp0) = self
            .differences()
            .iter()
            .find(|&&(first, last, cp0)| cp0 != 0 && (cp0..=cp0 + (last - first)).contains(&cp))?;
        let bytes = (first + (cp - cp0)).to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        Unit::new(&bytes[skip..])
    }
}
