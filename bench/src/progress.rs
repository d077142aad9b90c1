//! Progress on stderr: an indicatif bar on a terminal, plain lines otherwise (logs, CI, pipes),
//! where a redrawn bar would be noise.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// One bar for a whole command; cheap to clone into worker tasks.
#[derive(Clone)]
pub struct Progress {
    inner: Arc<Inner>,
}

struct Inner {
    bar: Option<ProgressBar>,
    prefix: String,
    total: AtomicU64,
    done: AtomicU64,
    /// Plain mode prints a line at most this often (in ms since `started`).
    last_line_ms: AtomicU64,
    started: Instant,
}

const PLAIN_EVERY: Duration = Duration::from_secs(10);

impl Progress {
    /// A bar of `total` steps when stderr is a terminal, plain lines otherwise.
    pub fn new(prefix: &str, total: u64) -> Progress {
        Self::with_mode(prefix, total, std::io::stderr().is_terminal())
    }

    /// No bar and no lines (library callers and tests that only want the figures).
    pub fn hidden(prefix: &str) -> Progress {
        let p = Self::with_mode(prefix, 0, true);
        if let Some(bar) = &p.inner.bar {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        p
    }

    fn with_mode(prefix: &str, total: u64, bar: bool) -> Progress {
        let bar = bar.then(|| {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}",
                )
                .expect("a valid template"),
            );
            b.set_prefix(prefix.to_string());
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        Progress {
            inner: Arc::new(Inner {
                bar,
                prefix: prefix.to_string(),
                total: AtomicU64::new(total),
                done: AtomicU64::new(0),
                last_line_ms: AtomicU64::new(0),
                started: Instant::now(),
            }),
        }
    }

    pub fn inc_length(&self, n: u64) {
        self.inner.total.fetch_add(n, Ordering::Relaxed);
        if let Some(b) = &self.inner.bar {
            b.inc_length(n);
        }
    }

    /// `n` steps done. In plain mode a line every 10 s says how far along the command is.
    pub fn inc(&self, n: u64) {
        let done = self.inner.done.fetch_add(n, Ordering::Relaxed) + n;
        match &self.inner.bar {
            Some(b) => b.inc(n),
            None => {
                let now = self.inner.started.elapsed().as_millis() as u64;
                let last = self.inner.last_line_ms.load(Ordering::Relaxed);
                if now >= last + PLAIN_EVERY.as_millis() as u64
                    && self
                        .inner
                        .last_line_ms
                        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    let total = self.inner.total.load(Ordering::Relaxed).max(1);
                    eprintln!(
                        "{}: {done}/{total} ({:.0}%) after {:.0} s",
                        self.inner.prefix,
                        done as f64 * 100.0 / total as f64,
                        now as f64 / 1000.0
                    );
                }
            }
        }
    }

    /// What is running now (the bar's message; a line in plain mode).
    pub fn stage(&self, msg: impl Into<String>) {
        let msg = msg.into();
        match &self.inner.bar {
            Some(b) => b.set_message(msg),
            None => eprintln!("{}: {msg}", self.inner.prefix),
        }
    }

    /// A line that stays (a finished measurement), above the bar.
    pub fn println(&self, line: impl AsRef<str>) {
        match &self.inner.bar {
            Some(b) => b.println(format!("{}: {}", self.inner.prefix, line.as_ref())),
            None => eprintln!("{}: {}", self.inner.prefix, line.as_ref()),
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.inner.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
