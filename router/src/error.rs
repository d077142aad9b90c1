//! The crate's one error type: every failure the router reports carries the MySQL error code and
//! SQLSTATE the proxy sends to the client, so no layer has to translate or guess them.

use std::fmt;

/// MySQL error codes and SQLSTATEs the router uses. Kept in one place so that a client sees the
/// same code for the same kind of failure wherever the router detects it.
pub mod codes {
    /// ER_UNKNOWN_ERROR: configuration problems (they reach a client only through an admin reload).
    pub const ER_UNKNOWN_ERROR: (u16, &str) = (1105, "HY000");
    /// ER_NO_PARTITION_FOR_GIVEN_VALUE: a shard rule has no shard for the value.
    pub const ER_NO_PARTITION_FOR_GIVEN_VALUE: (u16, &str) = (1526, "HY000");
    /// ER_TRUNCATED_WRONG_VALUE: the value is not of the kind the rule needs (e.g. not a date).
    pub const ER_TRUNCATED_WRONG_VALUE: (u16, &str) = (1292, "22007");
    /// ER_NOT_SUPPORTED_YET: a statement or construct the router refuses rather than guesses.
    pub const ER_NOT_SUPPORTED_YET: (u16, &str) = (1235, "42000");
    /// ER_PARSE_ERROR: SQL the parser does not accept.
    pub const ER_PARSE_ERROR: (u16, &str) = (1064, "42000");
    /// ER_STACK_OVERRUN_NEED_MORE: MariaDB's answer to a statement nested too deep for its stack.
    pub const ER_STACK_OVERRUN_NEED_MORE: (u16, &str) = (1436, "HY000");
    /// ER_TOO_HIGH_LEVEL_OF_NESTING_FOR_SELECT.
    pub const ER_TOO_HIGH_LEVEL_OF_NESTING_FOR_SELECT: (u16, &str) = (1473, "HY000");
    /// ER_NO_SUCH_TABLE.
    pub const ER_NO_SUCH_TABLE: (u16, &str) = (1146, "42S02");
    /// ER_BAD_DB_ERROR: unknown database (logical schema).
    pub const ER_BAD_DB_ERROR: (u16, &str) = (1049, "42000");
    /// ER_NO_DB_ERROR: no database selected.
    pub const ER_NO_DB_ERROR: (u16, &str) = (1046, "3D000");
    /// ER_DBACCESS_DENIED_ERROR: the user may not use this schema.
    pub const ER_DBACCESS_DENIED_ERROR: (u16, &str) = (1044, "42000");
    /// ER_OPTION_PREVENTS_STATEMENT: e.g. a write from a read-only user.
    pub const ER_OPTION_PREVENTS_STATEMENT: (u16, &str) = (1290, "HY000");
}

/// An error with its MySQL code, SQLSTATE and a message a user can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterError {
    code: u16,
    sqlstate: &'static str,
    message: String,
}

impl RouterError {
    pub fn new(code: u16, sqlstate: &'static str, message: impl Into<String>) -> Self {
        RouterError {
            code,
            sqlstate,
            message: message.into(),
        }
    }

    /// Builds an error from one of the [`codes`] pairs.
    pub fn with(code: (u16, &'static str), message: impl Into<String>) -> Self {
        Self::new(code.0, code.1, message)
    }

    /// A configuration error; `key` names the offending key, e.g. `schemas[0].tables[2].rule`.
    pub fn config(key: impl fmt::Display, message: impl fmt::Display) -> Self {
        Self::with(codes::ER_UNKNOWN_ERROR, format!("{key}: {message}"))
    }

    /// A configuration file that could not be read or parsed (no single key to name).
    pub fn config_file(message: impl Into<String>) -> Self {
        Self::with(codes::ER_UNKNOWN_ERROR, message)
    }

    /// A shard rule has no shard for this value.
    pub fn no_shard(message: impl Into<String>) -> Self {
        Self::with(codes::ER_NO_PARTITION_FOR_GIVEN_VALUE, message)
    }

    /// The value is not of a kind the rule can route.
    pub fn wrong_value(message: impl Into<String>) -> Self {
        Self::with(codes::ER_TRUNCATED_WRONG_VALUE, message)
    }

    /// A construct the router refuses rather than guesses.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::with(codes::ER_NOT_SUPPORTED_YET, message)
    }

    pub fn code(&self) -> u16 {
        self.code
    }

    pub fn sqlstate(&self) -> &'static str {
        self.sqlstate
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// Prefixes the message with more context (e.g. the table a rule was routing for).
    pub fn context(mut self, prefix: impl fmt::Display) -> Self {
        self.message = format!("{prefix}: {}", self.message);
        self
    }
}

impl fmt::Display for RouterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RouterError {}

/// Errors from loading and validating a configuration.
pub type ConfigError = RouterError;
/// Errors from routing a value through a shard rule.
pub type RuleError = RouterError;
