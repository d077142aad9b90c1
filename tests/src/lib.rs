//! End-to-end test support shared by the files under `tests/tests/`.
