//! The segments of global sequences this process holds (see `exec::sequence`, which takes
//! them from the `shoal_sequence` table): kept across reloads, as a reload refuses to change
//! an existing table's sequence.

use std::collections::HashMap;
use std::sync::Mutex;

/// The ids this process holds, per sequence (`schema.table`): `next..end`.
#[derive(Debug, Default)]
pub struct Sequences {
    segments: Mutex<HashMap<String, (u64, u64)>>,
}

impl Sequences {
    /// `n` consecutive ids from the segment held for `name`, if it has that many left.
    pub(crate) fn take(&self, name: &str, n: u64) -> Option<u64> {
        let mut s = self.segments.lock().unwrap_or_else(|e| e.into_inner());
        let seg = s.get_mut(name)?;
        if seg.1 - seg.0 < n {
            return None;
        }
        let first = seg.0;
        seg.0 += n;
        Some(first)
    }

    pub(crate) fn keep(&self, name: &str, next: u64, end: u64) {
        let mut s = self.segments.lock().unwrap_or_else(|e| e.into_inner());
        s.insert(name.to_string(), (next, end));
    }
}
