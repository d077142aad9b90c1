//! Shoal proxy: a MySQL-protocol proxy. The request path, top to bottom:
//! client -> [`wire`] (framing, handshake) -> [`session`] (commands, state, pinning) ->
//! [`backend`] (pool, connections) -> MySQL.

pub mod backend;
pub mod config;
pub mod config_file;
pub mod error;
pub mod merge;
pub mod server;
pub mod session;
pub mod wire;
