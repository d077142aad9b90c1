//! A histogram of durations with atomic buckets: the latency figures the metrics publish
//! (`observe::metrics`), recorded where the time passes (statements, a pool's acquires)
//! without a lock and without knowing who reads them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds (seconds) of the latency histograms: 100 µs to 10 s.
pub const LATENCY_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// A histogram over [`LATENCY_BUCKETS`] with atomic buckets (`prometheus-client`'s own
/// `Histogram` takes a mutex per observation, which every session would contend for).
#[derive(Debug, Default)]
pub struct AtomicHistogram {
    /// Observations per bucket (not cumulative); the last is +Inf.
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl AtomicHistogram {
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = LATENCY_BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[i].fetch_add(1, Relaxed);
        self.count.fetch_add(1, Relaxed);
        self.sum_ns
            .fetch_add(d.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// (sum in seconds, count, non-cumulative buckets) as the encoder takes them.
    pub fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let buckets = LATENCY_BUCKETS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.buckets.iter().map(|b| b.load(Relaxed)))
            .collect::<Vec<_>>();
        // The count is the buckets' sum: a scrape racing an observation stays consistent.
        let count = buckets.iter().map(|(_, n)| n).sum();
        (self.sum_ns.load(Relaxed) as f64 / 1e9, count, buckets)
    }
}
