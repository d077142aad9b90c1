//! Connections from the proxy to backend servers, and pools of them.

pub mod balance;
pub mod charset;
pub mod conn;
pub mod health;
pub mod interrupt;
pub mod monitor;
pub mod pool;
pub mod reclaim;
pub mod state;
pub mod stmt_cache;
pub mod tls;
pub mod txn_errors;
