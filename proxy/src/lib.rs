//! Shoal proxy: a MySQL-protocol sharding proxy. The request path, top to bottom:
//! client -> [`wire`] (framing, handshake) -> [`session`] (commands, state, pinning) ->
//! the router's plan -> [`exec`] (one arm per plan kind, [`merge`] for scatter reads) ->
//! [`backend`] (pools, connections) -> MySQL/MariaDB.

pub mod backend;
pub mod config;
pub mod config_file;
pub mod cores;
pub mod deadlock;
pub mod error;
pub mod exec;
pub mod fuzzing;
pub mod histogram;
pub mod merge;
pub mod observe;
pub mod out_of_line;
pub mod process;
pub mod reload;
pub mod runtime;
pub mod server;
pub mod session;
pub mod thread_policy;
pub mod timers;
pub mod wire;
pub mod xa;
