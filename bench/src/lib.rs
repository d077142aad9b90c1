//! Shoal's bench crate: the local MariaDB launcher ([`cluster`]) used by tests, benchmarks and the
//! demo, the load generator ([`load`]) and the experiments behind the `shoal-bench` binary
//! (`overhead`, `mycat`, `scale`, `tpcc`, `clients`, ...), with their progress display and report writers.

pub mod clients;
pub mod cluster;
pub mod cpu_limit;
pub mod error;
pub mod interrupt;
pub mod join;
pub mod load;
pub mod memory;
pub mod mycat;
pub mod overhead;
pub mod placement;
pub mod progress;
pub mod replicas;
pub mod results;
pub mod scale;
pub mod shoal_config;
pub mod tpcc;
pub mod xa;

pub use error::BenchError;

/// How a command ended, for its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Everything asked for ran, and every check passed.
    Pass,
    /// What ran passed, but some parts could not run (e.g. Shoal refused a sharded config).
    Incomplete,
    /// A check failed (wrong answers, misplaced rows, a target ratio missed).
    Fail,
}
