//! Whether a statement's meaning depends on the connection's current database through
//! something other than its table names.
//!
//! A single-datanode SELECT whose tables are all written with their database runs the same on
//! any connection to the datanode's server, so a session can keep one connection per server
//! instead of one per datanode. That holds only if nothing else in the text is looked up in the
//! current database: a stored function called by its bare name (`f(x)`), a sequence
//! (`NEXT VALUE FOR s`, `NEXTVAL(s)`), `DATABASE()`. MariaDB calls a built-in function before a
//! stored function of the same name, so a call to a known built-in is safe; any other word
//! before `(` may be a stored function and keeps the statement in its datanode's database.
//! Unknown words only cost a connection, never a wrong answer.

use super::lex::{TokKind, Token, called_at, sequence_at};

/// Words that may come before `(` without naming a stored function: reserved words, reserved
/// type names (in `CAST(x AS DECIMAL(10,2))`) and built-in functions that read nothing of the
/// current database. Not window functions (`RANK`, `LAG`...) nor non-reserved type names
/// (`DATETIME`, `SIGNED`): MariaDB reads those as a stored function's name when no `OVER` or
/// `CAST` context makes them its own. Upper case, sorted (binary search).
const BEFORE_PAREN: &[&str] = &[
    "ABS",
    "ADDDATE",
    "AGAINST",
    "ALL",
    "AND",
    "ANY",
    "AS",
    "ASC",
    "ASCII",
    "AVG",
    "BETWEEN",
    "BIGINT",
    "BINARY",
    "BIT_AND",
    "BIT_COUNT",
    "BIT_LENGTH",
    "BIT_OR",
    "BIT_XOR",
    "BY",
    "CASE",
    "CAST",
    "CEIL",
    "CEILING",
    "CHAR",
    "CHARACTER_LENGTH",
    "CHAR_LENGTH",
    "COALESCE",
    "CONCAT",
    "CONCAT_WS",
    "CONV",
    "CONVERT",
    "COUNT",
    "CRC32",
    "CURDATE",
    "CURRENT_DATE",
    "CURRENT_TIME",
    "CURRENT_TIMESTAMP",
    "CURTIME",
    "DATE",
    "DATEDIFF",
    "DATE_ADD",
    "DATE_FORMAT",
    "DATE_SUB",
    "DAY",
    "DAYOFMONTH",
    "DAYOFWEEK",
    "DAYOFYEAR",
    "DEC",
    "DECIMAL",
    "DESC",
    "DISTINCT",
    "DIV",
    "DOUBLE",
    "ELSE",
    "ELT",
    "ESCAPE",
    "EXISTS",
    "EXP",
    "EXTRACT",
    "FIELD",
    "FIND_IN_SET",
    "FLOAT",
    "FLOOR",
    "FORMAT",
    "FROM",
    "FROM_UNIXTIME",
    "GREATEST",
    "GROUP_CONCAT",
    "HAVING",
    "HEX",
    "HOUR",
    "IF",
    "IFNULL",
    "IN",
    "INDEX",
    "INSTR",
    "INT",
    "INTEGER",
    "INTERVAL",
    "IS",
    "ISNULL",
    "JOIN",
    "JSON_ARRAY",
    "JSON_CONTAINS",
    "JSON_EXTRACT",
    "JSON_LENGTH",
    "JSON_OBJECT",
    "JSON_UNQUOTE",
    "JSON_VALUE",
    "KEY",
    "LAST_DAY",
    "LCASE",
    "LEAST",
    "LEFT",
    "LENGTH",
    "LIKE",
    "LN",
    "LOCATE",
    "LOG",
    "LOG10",
    "LOG2",
    "LOWER",
    "LPAD",
    "LTRIM",
    "MATCH",
    "MAX",
    "MD5",
    "MICROSECOND",
    "MID",
    "MIN",
    "MINUTE",
    "MOD",
    "MONTH",
    "NOT",
    "NOW",
    "NULLIF",
    "NUMERIC",
    "OCTET_LENGTH",
    "ON",
    "OR",
    "ORD",
    "OVER",
    "PI",
    "POSITION",
    "POW",
    "POWER",
    "QUARTER",
    "REGEXP",
    "REPEAT",
    "REPLACE",
    "REVERSE",
    "RIGHT",
    "RLIKE",
    "ROUND",
    "ROW",
    "RPAD",
    "RTRIM",
    "SECOND",
    "SELECT",
    "SHA1",
    "SHA2",
    "SIGN",
    "SOME",
    "SPACE",
    "SQRT",
    "STD",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "STRCMP",
    "STR_TO_DATE",
    "SUBDATE",
    "SUBSTR",
    "SUBSTRING",
    "SUBSTRING_INDEX",
    "SUM",
    "THEN",
    "TIME",
    "TIMEDIFF",
    "TIMESTAMP",
    "TIMESTAMPADD",
    "TIMESTAMPDIFF",
    "TRIM",
    "TRUNCATE",
    "UCASE",
    "UNHEX",
    "UNION",
    "UNIX_TIMESTAMP",
    "UPPER",
    "USING",
    "UTC_DATE",
    "UTC_TIMESTAMP",
    "VALUES",
    "VARCHAR",
    "VARIANCE",
    "VAR_POP",
    "VAR_SAMP",
    "WEEK",
    "WEEKDAY",
    "WHEN",
    "WHERE",
    "XOR",
    "YEAR",
];

/// Whether anything in the statement but its table names may be looked up in the current
/// database (see the module docs). `true` when unsure.
pub fn reads_current_database(sql: &str, toks: &[Token]) -> bool {
    for (i, t) in toks.iter().enumerate() {
        let call = called_at(sql, toks, i);
        match t.kind {
            // A quoted name is never a built-in: `` `f`(x) `` is a stored function.
            TokKind::QuotedIdent if call => return true,
            TokKind::Word if call => {
                let w = t.text(sql).to_ascii_uppercase();
                if BEFORE_PAREN.binary_search(&w.as_str()).is_err() {
                    return true;
                }
            }
            TokKind::Word if sequence_at(sql, toks, i) => return true,
            _ => {}
        }
    }
    false
}

/// Whether the statement may call a stored function: a word before `(` that is neither a
/// reserved word nor a known built-in (the same list), or a quoted name. A stored function
/// may write, so a statement calling one is no plain read: it goes to the primary, and its
/// XA branch counts as written. `DATABASE()` and `SCHEMA()` are built-ins that cannot be
/// stored functions' names; unknown words only cost a replica read or a prepare, never a
/// write on a replica or a branch committed without its prepare.
pub fn may_call_stored_function(sql: &str, toks: &[Token]) -> bool {
    toks.iter().enumerate().any(|(i, t)| {
        called_at(sql, toks, i)
            && match t.kind {
                TokKind::QuotedIdent => true,
                TokKind::Word => {
                    let w = t.text(sql).to_ascii_uppercase();
                    BEFORE_PAREN.binary_search(&w.as_str()).is_err()
                        && !["DATABASE", "SCHEMA"].contains(&w.as_str())
                }
                _ => false,
            }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lex::tokenize;

    fn reads(sql: &str) -> bool {
        reads_current_database(sql, &tokenize(sql).unwrap())
    }

    #[test]
    fn list_is_sorted_upper_case_and_unique() {
        for w in BEFORE_PAREN.windows(2) {
            assert!(w[0] < w[1], "{} before {}", w[0], w[1]);
        }
        assert!(BEFORE_PAREN.iter().all(|w| w.to_ascii_uppercase() == *w));
    }

    #[test]
    fn built_ins_and_keywords_do_not_read_it() {
        for sql in [
            "SELECT c FROM t WHERE id = 5",
            "SELECT COUNT(*), SUM(k) FROM t WHERE id IN (1, 2) AND (k > 3 OR k < 1)",
            "SELECT CAST(k AS DECIMAL(10,2)), concat(c, 'f(x)') FROM t JOIN u USING (id)",
            "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id)",
            "SELECT c FROM t FORCE INDEX (k) WHERE id = 5",
            "SELECT c FROM t WHERE c = 'NEXT VALUE FOR s' /* f(x) */",
        ] {
            assert!(!reads(sql), "{sql}");
        }
    }

    #[test]
    fn stored_function_calls_are_told_from_built_ins() {
        let calls = |sql: &str| may_call_stored_function(sql, &tokenize(sql).unwrap());
        for sql in [
            "SELECT f(c) FROM t WHERE id = 5",
            "SELECT shop.debit(5)",
            "SELECT `concat`(c) FROM t",
            "SELECT c FROM t WHERE id = my_func (5)",
        ] {
            assert!(calls(sql), "{sql}");
        }
        for sql in [
            "SELECT c FROM t WHERE id = 5",
            "SELECT COUNT(*), SUM(k), CONCAT(c, 'f(x)') FROM t WHERE id IN (1, 2)",
            "SELECT DATABASE(), schema()",
            "SELECT c FROM t WHERE c = 'g(1)' /* h(2) */",
        ] {
            assert!(!calls(sql), "{sql}");
        }
    }

    #[test]
    fn stored_functions_sequences_database_and_unknown_words_do() {
        for sql in [
            "SELECT f(c) FROM t WHERE id = 5",
            "SELECT c FROM t WHERE id = my_func (5)",
            "SELECT `concat`(c) FROM t",
            "SELECT DATABASE(), c FROM t WHERE id = 5",
            "SELECT schema() FROM t",
            "SELECT NEXT VALUE FOR s, c FROM t",
            "SELECT previous value for s FROM t",
            "SELECT NEXTVAL(s) FROM t",
            "SELECT c FROM t PARTITION (p0)",
            "SELECT ROW_NUMBER() OVER (ORDER BY id) FROM t",
            "SELECT rank(c) FROM t",
        ] {
            assert!(reads(sql), "{sql}");
        }
    }
}
