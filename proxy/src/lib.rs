//! Shoal proxy library.
