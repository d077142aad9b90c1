//! Collation keys: two strings the backend's collation considers equal get the same key, so they
//! hash to and list under the same shard.

use std::borrow::Cow;

use serde::Deserialize;

#[path = "general_ci_table.rs"]
mod table;

/// The collation of a string shard key column.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Collation {
    /// `utf8mb4_general_ci` / `utf8_general_ci` (MariaDB's default): case- and accent-insensitive
    /// per character, trailing spaces ignored.
    #[default]
    GeneralCi,
    /// `utf8mb4_bin`: code points compared exactly, trailing spaces ignored.
    Bin,
    /// `utf8mb3_general_ci` (`utf8_general_ci`) where the column is utf8mb3: as `general_ci`,
    /// for the text a utf8mb3 column stores (a character beyond the BMP is stored as one `'?'`
    /// per UTF-8 byte).
    #[serde(rename = "utf8mb3_general_ci")]
    Utf8mb3GeneralCi,
    /// `utf8mb3_bin`: as `bin`, for the text a utf8mb3 column stores.
    #[serde(rename = "utf8mb3_bin")]
    Utf8mb3Bin,
    /// `BINARY`/`VARBINARY`/`BLOB`: bytes compared exactly, trailing spaces count.
    Binary,
}

impl Collation {
    /// The column is utf8mb3.
    pub fn is_utf8mb3(self) -> bool {
        matches!(self, Collation::Utf8mb3GeneralCi | Collation::Utf8mb3Bin)
    }
}

/// `s` as a utf8mb3 column stores it: each character beyond the BMP becomes one `'?'` per byte
/// of its UTF-8 form (MariaDB 10.11 stores `'a😀'` as `'a????'`).
pub fn utf8mb3_stored(s: &str) -> Cow<'_, str> {
    if !s.bytes().any(|b| b >= 0xF0) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if u32::from(c) > 0xFFFF {
            out.push_str("????");
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The weight of one character under `utf8mb4_general_ci`.
pub fn general_ci_weight(c: char) -> char {
    let cp = c as u32;
    if cp < 0x80 {
        // The table's only ASCII entries are a-z (weighing A-Z): no search for the common
        // case, which a merged ORDER BY or DISTINCT on a text column runs per character.
        return c.to_ascii_uppercase();
    }
    table_weight(c)
}

/// [`general_ci_weight`] read from the table.
fn table_weight(c: char) -> char {
    let cp = c as u32;
    if cp > 0xFFFF {
        // general_ci gives every supplementary character (emoji, rare CJK) the same weight.
        return '\u{FFFD}';
    }
    match table::GENERAL_CI_WEIGHTS.binary_search_by_key(&(cp as u16), |&(from, _)| from) {
        // The table only holds BMP weights that are not surrogates, so the char is valid.
        Ok(i) => char::from_u32(u32::from(table::GENERAL_CI_WEIGHTS[i].1)).unwrap_or(c),
        Err(_) => c,
    }
}

/// The collation key of `s`: for `general_ci`, each character replaced by its weight (its
/// upper-case base letter: `'é'` → `'E'`, `'ß'` → `'S'`, `'ı'` → `'I'`), and trailing spaces
/// removed; for `bin`, trailing spaces removed; for `binary`, the string itself.
pub fn collation_key(collation: Collation, s: &str) -> Cow<'_, str> {
    if collation.is_utf8mb3() && s.bytes().any(|b| b >= 0xF0) {
        let stored = utf8mb3_stored(s);
        let k = collation_key(collation, &stored).into_owned();
        return Cow::Owned(k);
    }
    match collation {
        Collation::Binary => Cow::Borrowed(s),
        Collation::Bin | Collation::Utf8mb3Bin => Cow::Borrowed(s.trim_end_matches(' ')),
        Collation::GeneralCi | Collation::Utf8mb3GeneralCi => {
            let s = s.trim_end_matches(' ');
            if s.is_ascii() {
                if s.bytes().any(|b| b.is_ascii_lowercase()) {
                    Cow::Owned(s.to_ascii_uppercase())
                } else {
                    Cow::Borrowed(s)
                }
            } else {
                // A weight may itself be a space (U+3000 does not, but be exact): trim again.
                let k: String = s.chars().map(general_ci_weight).collect();
                Cow::Owned(k.trim_end_matches(' ').to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_valid() {
        let t = &table::GENERAL_CI_WEIGHTS;
        assert!(t.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(
            t.iter()
                .all(|&(_, w)| char::from_u32(u32::from(w)).is_some())
        );
    }

    #[test]
    fn ascii_shortcut_is_the_table() {
        for b in 0u8..0x80 {
            let c = char::from(b);
            assert_eq!(general_ci_weight(c), table_weight(c), "{b:#x}");
        }
    }

    #[test]
    fn general_ci_keys() {
        let k = |s| collation_key(Collation::GeneralCi, s).into_owned();
        assert_eq!(k("abc"), "ABC");
        assert_eq!(k("ABC"), "ABC");
        assert_eq!(k("abc  "), "ABC");
        assert_eq!(k(" abc"), " ABC");
        assert_eq!(k("abc\t"), "ABC\t");
        assert_eq!(k("Café"), "CAFE");
        assert_eq!(k("straße"), "STRASE");
        assert_eq!(k("ı"), "I");
        assert_eq!(k("😀"), k("😁"));
        assert_eq!(k("北京"), "北京");
        assert_eq!(k(""), "");
    }

    fn unhex(h: &str) -> String {
        let bytes: Vec<u8> = (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect();
        String::from_utf8(bytes).unwrap()
    }

    /// 600 string pairs (case, accents, ß/ı, full-width, emoji, trailing and leading spaces)
    /// with MariaDB 10.11's verdict on `s = t` under utf8mb4_general_ci: keys are equal exactly
    /// when the server says the strings are.
    #[test]
    fn general_ci_agrees_with_mariadb() {
        let mut n = 0;
        for line in include_str!("general_ci_pairs.tsv").lines().skip(1) {
            let f: Vec<&str> = line.split('\t').collect();
            let (s, t, equal) = (unhex(f[0]), unhex(f[1]), f[2] == "1");
            let (ks, kt) = (
                collation_key(Collation::GeneralCi, &s),
                collation_key(Collation::GeneralCi, &t),
            );
            assert_eq!(ks == kt, equal, "{s:?} vs {t:?}: keys {ks:?} {kt:?}");
            n += 1;
        }
        assert_eq!(n, 600);
    }

    #[test]
    fn utf8mb3_columns_store_question_marks() {
        let k = |c, s| collation_key(c, s).into_owned();
        assert_eq!(k(Collation::Utf8mb3GeneralCi, "a😀"), "A????");
        assert_eq!(
            k(Collation::Utf8mb3GeneralCi, "a😀"),
            k(Collation::GeneralCi, "A????")
        );
        assert_ne!(
            k(Collation::GeneralCi, "a😀"),
            k(Collation::GeneralCi, "a????")
        );
        assert_eq!(k(Collation::Utf8mb3Bin, "é😀 "), "é????");
        assert_eq!(k(Collation::Utf8mb3GeneralCi, "é"), "E");
    }

    #[test]
    fn other_collations() {
        assert_eq!(collation_key(Collation::Bin, "Abc  "), "Abc");
        assert_eq!(collation_key(Collation::Binary, "Abc  "), "Abc  ");
    }
}
