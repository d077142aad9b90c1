//! Shoal bench.
