//! Shoal router: the config model, shard rules and route plans. A pure library: no I/O (except
//! [`config::Config::load`]) and no async runtime, so every routing decision is testable as data.

pub mod charset;
pub mod config;
pub mod error;
pub mod fuzzing;
pub mod plan;
pub mod rule;
pub mod sql;
pub mod topology;

pub use error::RouterError;
