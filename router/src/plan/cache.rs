//! The plan cache: templates by (current schema, statement shape), bounded. The same
//! structure keeps prepared statements' routes by (schema, sql_mode, text).
//!
//! Two generations of at most `capacity / 2` entries each: lookups hit the young generation or
//! promote from the old one; when the young one is full it becomes the old one and the previous
//! old one is dropped. Recently used shapes survive, memory stays bounded, every operation is
//! O(1) (an approximation of LRU without per-hit bookkeeping).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::planner::Template;

/// Statements whose shape is longer than this are planned every time (bulk INSERTs with
/// thousands of rows would otherwise fill the cache with one-off keys).
pub(crate) const MAX_KEY_LEN: usize = 8 * 1024;

pub(crate) struct PlanCache<V = Arc<Template>> {
    half: usize,
    inner: Mutex<Generations<V>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// foldhash, not SipHash: every text statement hashes its shape here, and a lookup compares
/// the whole key, so a collision costs time, never a wrong plan.
type Map<V> = HashMap<String, V, foldhash::fast::RandomState>;

struct Generations<V> {
    young: Map<V>,
    old: Map<V>,
}

impl<V> Default for Generations<V> {
    fn default() -> Self {
        Generations {
            young: Map::default(),
            old: Map::default(),
        }
    }
}

/// Counters for monitoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    pub entries: usize,
    pub capacity: usize,
    pub hits: u64,
    pub misses: u64,
}

impl<V: Clone> PlanCache<V> {
    pub fn new(capacity: usize) -> Self {
        PlanCache {
            half: (capacity / 2).max(1),
            inner: Mutex::new(Generations::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    pub fn get(&self, key: &str) -> Option<V> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = g.young.get(key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Some(t.clone());
        }
        if let Some((k, t)) = g.old.remove_entry(key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            Self::put_young(&mut g, self.half, k, t.clone());
            return Some(t);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        None
    }

    pub fn put(&self, key: String, t: V) {
        if key.len() > MAX_KEY_LEN {
            return;
        }
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        Self::put_young(&mut g, self.half, key, t);
    }

    fn put_young(g: &mut Generations<V>, half: usize, key: String, t: V) {
        if g.young.len() >= half && !g.young.contains_key(&key) {
            g.old = std::mem::take(&mut g.young);
        }
        g.young.insert(key, t);
    }

    pub fn stats(&self) -> CacheStats {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        CacheStats {
            entries: g.young.len() + g.old.len(),
            capacity: self.half * 2,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::RoutePlan;
    use crate::plan::planner::Body;
    use crate::sql::StatementKind;

    fn t() -> Arc<Template> {
        Arc::new(Template {
            pins: Vec::new(),
            body: Body::Done(Box::new(RoutePlan::Session(StatementKind::Commit))),
        })
    }

    #[test]
    fn bounded_and_keeps_recently_used() {
        let c: PlanCache = PlanCache::new(4);
        c.put("hot".into(), t());
        for i in 0..100 {
            c.put(format!("k{i}"), t());
            assert!(c.get("hot").is_some(), "recently used entry evicted at {i}");
            assert!(c.stats().entries <= 4);
        }
        assert!(c.get("k0").is_none());
        let s = c.stats();
        assert_eq!(s.capacity, 4);
        assert!(s.hits >= 100 && s.misses >= 1);
    }

    #[test]
    fn long_shapes_are_not_cached() {
        let c: PlanCache = PlanCache::new(4);
        c.put("x".repeat(MAX_KEY_LEN + 1), t());
        assert_eq!(c.stats().entries, 0);
    }
}
