//! Shoal router.

pub mod plan;
pub mod sql;
