//! What a client may cost before and around login: failed-login throttling per client address,
//! sessions per user, and the caching_sha2 fast-auth cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Failures from one address allowed without delay.
const FREE_FAILURES: u32 = 3;
/// Delay after the first failure beyond the free ones; doubles with each further failure.
const FIRST_DELAY: Duration = Duration::from_millis(250);
const MAX_DELAY: Duration = Duration::from_secs(4);
/// An address's record is forgotten this long after its last failure.
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// More addresses than this are pruned of forgotten ones (bounds the map under a scan).
const PRUNE_AT: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

/// Failed logins per client address; a login attempt from an address with repeated failures
/// waits before it is answered (growing delays, as MySQL's connection_control plugin does).
#[derive(Debug, Default)]
pub struct LoginThrottle {
    by_addr: Mutex<HashMap<String, Failures>>,
}

impl LoginThrottle {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Failures>> {
        self.by_addr.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long an attempt from `addr` must wait before it is answered, and the failures that
    /// caused it.
    pub fn delay_for(&self, addr: &str) -> Option<(Duration, u32)> {
        let map = self.lock();
        let f = map.get(addr)?;
        if f.last.elapsed() > FORGET_AFTER || f.count < FREE_FAILURES {
            return None;
        }
        let doublings = (f.count - FREE_FAILURES).min(16);
        Some(((FIRST_DELAY * (1 << doublings)).min(MAX_DELAY), f.count))
    }

    pub fn failed(&self, addr: &str) -> u32 {
        let mut map = self.lock();
        if map.len() >= PRUNE_AT {
            map.retain(|_, f| f.last.elapsed() <= FORGET_AFTER);
        }
        let now = Instant::now();
        let f = map.entry(addr.to_string()).or_insert(Failures {
            count: 0,
            last: now,
        });
        if f.last.elapsed() > FORGET_AFTER {
            f.count = 0;
        }
        f.count += 1;
        f.last = now;
        f.count
    }

    pub fn succeeded(&self, addr: &str) {
        self.lock().remove(addr);
    }
}

/// Sessions per user, for `users[].max_connections`.
#[derive(Debug, Default)]
pub struct UserConnections {
    counts: Mutex<HashMap<String, usize>>,
}

/// One counted session of a user; uncounted when dropped.
#[derive(Debug)]
pub struct UserSlot {
    owner: Arc<UserConnections>,
    user: String,
}

impl UserConnections {
    /// Counts a session of `user`, or `None` if it already has `limit` (0 = no limit).
    pub fn acquire(self: &Arc<Self>, user: &str, limit: usize) -> Option<UserSlot> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let n = counts.entry(user.to_string()).or_insert(0);
        if limit > 0 && *n >= limit {
            return None;
        }
        *n += 1;
        Some(UserSlot {
            owner: self.clone(),
            user: user.to_string(),
        })
    }
}

impl Drop for UserSlot {
    fn drop(&mut self) {
        let mut counts = self.owner.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = counts.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.user);
            }
        }
    }
}

/// SHA256(SHA256(password)) of users who completed a caching_sha2 full authentication, so
/// their next logins can use the fast path (MySQL's cache, per proxy process).
#[derive(Debug, Default)]
pub struct Sha2Cache {
    by_user: Mutex<HashMap<String, [u8; 32]>>,
}

impl Sha2Cache {
    pub fn get(&self, user: &str) -> Option<[u8; 32]> {
        self.by_user
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(user)
            .copied()
    }

    /// Forgets every cached hash (a reload may have changed passwords).
    pub fn clear(&self) {
        self.by_user
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    pub fn put(&self, user: &str, stage2: [u8; 32]) {
        self.by_user
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(user.to_string(), stage2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_after_the_free_failures_and_reset_on_success() {
        let t = LoginThrottle::default();
        for _ in 0..FREE_FAILURES - 1 {
            t.failed("10.0.0.1");
        }
        assert!(t.delay_for("10.0.0.1").is_none());
        t.failed("10.0.0.1");
        let (d1, n) = t.delay_for("10.0.0.1").unwrap();
        assert_eq!((d1, n), (FIRST_DELAY, FREE_FAILURES));
        t.failed("10.0.0.1");
        assert_eq!(t.delay_for("10.0.0.1").unwrap().0, FIRST_DELAY * 2);
        for _ in 0..40 {
            t.failed("10.0.0.1");
        }
        assert_eq!(t.delay_for("10.0.0.1").unwrap().0, MAX_DELAY);
        assert!(t.delay_for("10.0.0.2").is_none());
        t.succeeded("10.0.0.1");
        assert!(t.delay_for("10.0.0.1").is_none());
    }

    #[test]
    fn user_slots_are_counted_and_released() {
        let c = Arc::new(UserConnections::default());
        let a = c.acquire("app", 2).unwrap();
        let _b = c.acquire("app", 2).unwrap();
        assert!(c.acquire("app", 2).is_none());
        assert!(c.acquire("other", 2).is_some());
        drop(a);
        assert!(c.acquire("app", 2).is_some());
        assert!(c.acquire("app", 0).is_some());
    }
}
