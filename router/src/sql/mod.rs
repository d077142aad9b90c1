//! SQL analysis: the only module that touches sqlparser.
//!
//! - [`lex`]: our tokenizer (byte offsets, MySQL comment rules);
//! - [`classify()`]: statement kind by leading keywords, for the session layer and the planner;
//! - [`normalize`]: statement shapes (literals lifted out) for the plan cache;
//! - [`analyze`]: sqlparser's AST turned into our [`stmt::Dml`] description.

pub mod analyze;
pub mod classify;
pub mod lex;
pub mod normalize;
pub mod stmt;

pub use classify::{DdlKind, SetAssignment, SetStatement, StatementKind, VarScope, classify};
pub use lex::split_statements;
