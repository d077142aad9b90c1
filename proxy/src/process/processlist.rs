//! What each session is doing, for `SHOW SHOAL SESSIONS` (Shoal's processlist).
//!
//! A session publishes, around every command: the command, when it started (or when the last
//! one ended), its statement text (bounded) and whether it idles in a transaction. All of it
//! goes into the session's own [`Activity`] and atomics: one uncontended lock and a bounded
//! copy for a query, no allocation once the buffer has grown, nothing for an execute.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Instant;

use crate::wire::command::*;

/// Most bytes of a statement `SHOW SHOAL SESSIONS` shows.
pub const INFO_MAX: usize = 1024;

/// Between commands: what the session holds.
pub const IDLE: u8 = 0;
pub const IN_TRANSACTION: u8 = 1;
pub const LOCKED_TABLES: u8 = 2;

/// The parts of a session's activity that need a lock.
#[derive(Default)]
pub struct Activity {
    /// The running (or last) statement's first [`INFO_MAX`] bytes.
    pub info: Vec<u8>,
    /// The logical schema the session is in.
    pub schema: Option<String>,
}

/// What a session does now, as other sessions read it.
#[derive(Default)]
pub struct Doing {
    pub activity: Mutex<Activity>,
    /// The running command's byte, or `COM_SLEEP` (0) between commands.
    pub command: AtomicU8,
    /// [`IDLE`], [`IN_TRANSACTION`] or [`LOCKED_TABLES`], as of the last command's end.
    pub holds: AtomicU8,
    /// Milliseconds since the proxy started at which the running command started, or the
    /// last one ended.
    pub since_ms: AtomicU64,
}

pub(crate) const COM_SLEEP: u8 = 0;

impl Doing {
    /// A command starts at `now_ms`; `frame` is its packet (header included).
    pub fn begin(&self, cmd: u8, frame: &[u8], now_ms: u64) {
        if matches!(cmd, COM_QUERY | COM_STMT_PREPARE) {
            // The first packet holds at least INFO_MAX bytes of a longer statement.
            let text = frame.get(5..).unwrap_or_default();
            let text = &text[..text.len().min(INFO_MAX)];
            let mut a = self.activity.lock().unwrap_or_else(|p| p.into_inner());
            a.info.clear();
            a.info.extend_from_slice(text);
        }
        self.since_ms.store(now_ms, Ordering::Relaxed);
        self.command.store(cmd, Ordering::Release);
    }

    /// The command ended at `now_ms`; the session holds `holds` now.
    pub fn end(&self, now_ms: u64, holds: u8) {
        self.holds.store(holds, Ordering::Relaxed);
        self.since_ms.store(now_ms, Ordering::Relaxed);
        self.command.store(COM_SLEEP, Ordering::Release);
    }

    /// When the session waits for a command: the milliseconds (as `since_ms`) at which its
    /// last one ended.
    pub fn idle_since_ms(&self) -> Option<u64> {
        (self.command.load(Ordering::Acquire) == COM_SLEEP)
            .then(|| self.since_ms.load(Ordering::Relaxed))
    }

    /// Records the session's schema (called only when it changed).
    pub fn set_schema(&self, schema: Option<&str>) {
        let mut a = self.activity.lock().unwrap_or_else(|p| p.into_inner());
        a.schema = schema.map(str::to_string);
    }
}

/// Milliseconds from `started` (the proxy's start) to `at`: the clock of `since_ms`.
pub fn ms_since(started: Instant, at: Instant) -> u64 {
    // Seconds and millis apart: `as_millis` divides a u128 (twice per command).
    let d = at.saturating_duration_since(started);
    d.as_secs() * 1000 + u64::from(d.subsec_millis())
}
