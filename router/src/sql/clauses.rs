//! The clause keywords that end a part of a statement, for readers that edit a statement on
//! its tokens (the planner's select-list checks, the proxy's `information_schema` rewrite):
//! one list each, here.

use super::lex::Token;

/// Clause words that end a SELECT's list of items, looking back from a token: the nearest of
/// these or SELECT says which clause the token is in.
pub const BEFORE_ITEMS_END: &[&str] = &[
    "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "INTO", "SET", "VALUES", "ON", "USING",
    "WINDOW",
];

/// Clause words that end a SELECT's item, looking forward from it (or the statement's other
/// clauses, which no item holds at its own depth).
pub const ITEM_ENDS: &[&str] = &[
    "FROM",
    "WHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "INTO",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "WINDOW",
    "FOR",
    "LOCK",
    "SET",
    "VALUES",
    "ON",
    "USING",
];

/// Words that end a table reference rather than alias it (`FROM t WHERE`, `FROM t JOIN`).
pub const TABLE_REFERENCE_ENDS: &[&str] = &[
    "WHERE",
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "CROSS",
    "NATURAL",
    "STRAIGHT_JOIN",
    "FULL",
    "OUTER",
    "ON",
    "USING",
    "GROUP",
    "ORDER",
    "LIMIT",
    "HAVING",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "MINUS",
    "FOR",
    "LOCK",
    "WINDOW",
    "INTO",
    "USE",
    "IGNORE",
    "FORCE",
    "PARTITION",
    "PROCEDURE",
    "OFFSET",
    "FETCH",
    "RETURNING",
];

/// Words that end a WHERE's or an ON's condition at its own depth.
pub const CONDITION_ENDS: &[&str] = &[
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "MINUS",
    "WINDOW",
    "FOR",
    "LOCK",
    "INTO",
    "WHERE",
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "CROSS",
    "NATURAL",
    "STRAIGHT_JOIN",
    "ON",
    "USING",
    "PROCEDURE",
];

/// Whether token `t` of `sql` is one of `words` (a keyword, compared case-insensitively).
pub fn is_one_of(sql: &str, t: &Token, words: &[&str]) -> bool {
    words.iter().any(|w| t.is_kw(sql, w))
}
