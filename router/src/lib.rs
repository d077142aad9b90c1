//! Shoal router.
