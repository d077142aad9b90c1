//! Single-byte charsets: MariaDB's mapping of every byte, from the generated tables.

use super::units::Mapped;

/// A single-byte charset's mapping (generated, see `tables.rs`).
#[derive(Debug)]
pub(crate) struct Single {
    /// The code point of bytes 0x80..=0xFF, [`UNMAPPED`] where MariaDB converts it to `'?'`.
    pub high: [u16; 128],
    /// Bytes below 0x80 that are not their ASCII character (swe7's `0x5C` is `Ö`), sorted.
    pub low: &'static [(u8, u16)],
}

/// No character.
pub(crate) const UNMAPPED: u16 = 0xFFFF;

impl Single {
    pub(super) fn map(&self, b: u8) -> Mapped {
        let cp = if b < 0x80 {
            match self.low.binary_search_by_key(&b, |&(x, _)| x) {
                Ok(i) => self.low[i].1,
                Err(_) => u16::from(b),
            }
        } else {
            self.high[usize::from(b - 0x80)]
        };
        match char::from_u32(u32::from(cp)) {
            Some(c) if cp != UNMAPPED => Mapped::Char(c),
            _ => Mapped::Unmapped,
        }
    }

    /// The byte of non-ASCII `c`: the first high byte mapped to it.
    pub(super) fn encode(&self, c: char) -> Option<u8> {
        let cp = u16::try_from(u32::from(c)).ok()?;
        if cp == UNMAPPED {
            return None;
        }
        let i = self.high.iter().position(|&x| x == cp)?;
        Some(0x80 + i as u8)
    }
}
