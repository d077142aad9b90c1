//! SQL analysis: the only module that touches sqlparser.
//!
//! - [`admin`]: Shoal's own statements (`SHOW SHOAL ...`), recognised in one place;
//! - [`lex`]: our tokenizer (byte offsets, MariaDB comment rules, sql_mode-aware);
//! - [`mode`]: the sql_mode flags and server version that change how text reads;
//! - [`classify()`]: statement kind by leading keywords, for the session layer and the planner;
//! - [`clauses`]: the clause keywords that end a part of a statement, for token-level edits;
//! - [`depth`]: how deep a statement's tree can be, checked before it is built;
//! - [`current_db`]: whether text reads the current database beyond its table names;
//! - [`normalize`]: statement shapes (literals lifted out) for the plan cache;
//! - [`effects`]: implicit commits, schema changes and user variables a statement reads;
//! - [`pins`]: state a statement leaves on its connection out of the trackers' sight;
//! - [`statement_time`]: `SET STATEMENT max_statement_time = n FOR ...`;
//! - [`analyze`]: sqlparser's AST turned into our [`stmt::Dml`] description.

pub mod admin;
pub mod analyze;
pub mod classify;
pub mod clauses;
pub mod current_db;
pub mod depth;
mod dialect;
pub mod effects;
pub mod lex;
pub mod mode;
pub mod normalize;
pub mod pins;
pub mod readwrite;
pub mod statement_time;
pub mod stmt;

pub use classify::{
    DdlKind, SetAssignment, SetStatement, StatementKind, VarScope, classify, classify_in,
};
pub use lex::{split_statements, split_statements_in};
pub use mode::{DEFAULT_SERVER_VERSION, SqlMode};
