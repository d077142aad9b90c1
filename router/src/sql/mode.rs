//! The parts of the session's `sql_mode` that change how MariaDB reads statement text, and the
//! backend version that gates `/*!NNNNN ... */` comments.
//!
//! Both are router inputs: the same bytes are a different statement under another mode
//! (`a || b` is OR by default and concatenation under `PIPES_AS_CONCAT`; `"x"` is a string by
//! default and an identifier under `ANSI_QUOTES`), so the lexer, the parser and the plan-cache
//! key all take them.

/// MariaDB 10.11's default server version for gating versioned comments (10.11.0). Tell the
/// router the backend's real version ([`crate::plan::Router::with_server_version`], from the
/// handshake) so that `/*!1011NN ... */` comments are gated as the backend gates them.
pub const DEFAULT_SERVER_VERSION: u32 = 101100;

/// The sql_mode flags that change how text reads. `Default` is MariaDB 10.11's default
/// sql_mode (`STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,
/// NO_ENGINE_SUBSTITUTION`), in which none of them is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SqlMode {
    bits: u8,
}

impl SqlMode {
    /// `||` concatenates (else it is OR).
    pub const PIPES_AS_CONCAT: u8 = 1;
    /// `"x"` is an identifier (else a string).
    pub const ANSI_QUOTES: u8 = 2;
    /// `\` is an ordinary character in strings.
    pub const NO_BACKSLASH_ESCAPES: u8 = 4;
    /// `NOT` binds like `!`.
    pub const HIGH_NOT_PRECEDENCE: u8 = 8;
    /// Spaces allowed between a function name and `(` (built-in names become reserved).
    pub const IGNORE_SPACE: u8 = 16;
    /// `ORACLE` or `MSSQL`: MariaDB reads text with another grammar (PL/SQL, `[ident]`), which
    /// the router does not implement; statements are refused.
    pub const FOREIGN_GRAMMAR: u8 = 32;

    /// Only the given flags (for tests and callers that know them).
    pub const fn from_bits(bits: u8) -> SqlMode {
        SqlMode { bits: bits & 63 }
    }

    pub const fn bits(self) -> u8 {
        self.bits
    }

    pub const fn has(self, flag: u8) -> bool {
        self.bits & flag != 0
    }

    pub fn pipes_as_concat(self) -> bool {
        self.has(Self::PIPES_AS_CONCAT)
    }
    pub fn ansi_quotes(self) -> bool {
        self.has(Self::ANSI_QUOTES)
    }
    pub fn no_backslash_escapes(self) -> bool {
        self.has(Self::NO_BACKSLASH_ESCAPES)
    }
    pub fn high_not_precedence(self) -> bool {
        self.has(Self::HIGH_NOT_PRECEDENCE)
    }
    pub fn ignore_space(self) -> bool {
        self.has(Self::IGNORE_SPACE)
    }
    pub fn foreign_grammar(self) -> bool {
        self.has(Self::FOREIGN_GRAMMAR)
    }

    /// The mode from the value of the `sql_mode` variable as MariaDB reports or accepts it: a
    /// comma-separated list of names (any case, empty items ignored) or the numeric bit set.
    /// Combination modes expand as MariaDB expands them (`ANSI`, `POSTGRESQL`, `DB2`, `MAXDB`:
    /// PIPES_AS_CONCAT, ANSI_QUOTES, IGNORE_SPACE; `MYSQL323`, `MYSQL40`: HIGH_NOT_PRECEDENCE;
    /// `ORACLE`, `MSSQL`: also another grammar). Names that do not change how text reads are
    /// ignored.
    pub fn parse(value: &str) -> SqlMode {
        let v = value.trim().trim_matches(|c| c == '\'' || c == '"');
        if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
            return Self::from_numeric(v.parse::<u64>().unwrap_or(0));
        }
        let mut bits = 0u8;
        for name in v.split(',') {
            bits |= Self::name_bits(name.trim());
        }
        SqlMode { bits }
    }

    fn name_bits(name: &str) -> u8 {
        const ANSI_LIKE: u8 =
            SqlMode::PIPES_AS_CONCAT | SqlMode::ANSI_QUOTES | SqlMode::IGNORE_SPACE;
        let n = name.to_ascii_uppercase();
        match n.as_str() {
            "PIPES_AS_CONCAT" => Self::PIPES_AS_CONCAT,
            "ANSI_QUOTES" => Self::ANSI_QUOTES,
            "NO_BACKSLASH_ESCAPES" => Self::NO_BACKSLASH_ESCAPES,
            "HIGH_NOT_PRECEDENCE" | "MYSQL323" | "MYSQL40" => Self::HIGH_NOT_PRECEDENCE,
            "IGNORE_SPACE" => Self::IGNORE_SPACE,
            "ANSI" | "POSTGRESQL" | "DB2" | "MAXDB" => ANSI_LIKE,
            "ORACLE" | "MSSQL" => ANSI_LIKE | Self::FOREIGN_GRAMMAR,
            _ => 0,
        }
    }

    /// MariaDB's bit numbering of `sql_mode` (`SET sql_mode = 7`).
    fn from_numeric(n: u64) -> SqlMode {
        const NAMES: &[(u32, &str)] = &[
            (1, "PIPES_AS_CONCAT"),
            (2, "ANSI_QUOTES"),
            (3, "IGNORE_SPACE"),
            (8, "POSTGRESQL"),
            (9, "ORACLE"),
            (10, "MSSQL"),
            (11, "DB2"),
            (12, "MAXDB"),
            (16, "MYSQL323"),
            (17, "MYSQL40"),
            (18, "ANSI"),
            (20, "NO_BACKSLASH_ESCAPES"),
            (29, "HIGH_NOT_PRECEDENCE"),
        ];
        let mut bits = 0u8;
        for &(bit, name) in NAMES {
            if n & (1u64 << bit) != 0 {
                bits |= Self::name_bits(name);
            }
        }
        SqlMode { bits }
    }

    /// One character for the plan-cache key: the flags that change how the router reads text
    /// (IGNORE_SPACE does not: spaces before `(` never change a plan, only whether MariaDB
    /// accepts a built-in function call).
    pub(crate) fn key_char(self) -> char {
        (b'@' + (self.bits & !Self::IGNORE_SPACE)) as char
    }
}

#[cfg(test)]
mod tests {
    use super::SqlMode;

    #[test]
    fn parse_names_numbers_and_combinations() {
        assert_eq!(SqlMode::parse(""), SqlMode::default());
        assert_eq!(
            SqlMode::parse(
                "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION"
            ),
            SqlMode::default()
        );
        let ansi = SqlMode::parse("ansi");
        assert!(ansi.pipes_as_concat() && ansi.ansi_quotes() && ansi.ignore_space());
        assert!(!ansi.no_backslash_escapes() && !ansi.foreign_grammar());
        assert_eq!(
            SqlMode::parse("REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI"),
            ansi
        );
        assert_eq!(
            SqlMode::parse("ansi_quotes,,pipes_as_concat").bits(),
            SqlMode::ANSI_QUOTES | SqlMode::PIPES_AS_CONCAT
        );
        assert!(SqlMode::parse("MYSQL40").high_not_precedence());
        assert!(SqlMode::parse("MSSQL").foreign_grammar());
        assert!(SqlMode::parse("ORACLE").foreign_grammar());
        // Numeric forms, as checked against MariaDB 10.11 (`SET sql_mode = N`).
        assert_eq!(
            SqlMode::parse("7").bits(),
            SqlMode::PIPES_AS_CONCAT | SqlMode::ANSI_QUOTES
        );
        assert!(SqlMode::parse("1048576").no_backslash_escapes());
        assert!(SqlMode::parse("536870912").high_not_precedence());
        assert_eq!(SqlMode::parse("262144"), ansi);
        assert!(SqlMode::parse("1024").foreign_grammar());
    }
}
