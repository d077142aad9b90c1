//! Shoal's bench crate: the local MariaDB launcher ([`cluster`]) used by tests, benchmarks and the
//! demo, and (later) the load generator and experiments behind the `shoal-bench` binary.

pub mod cluster;
pub mod overhead;
