//! Query digests: statements grouped by shape (the router's normalisation, literals lifted:
//! `shoal_router::sql::normalize::digest`), schema and user, with their counts and times, as
//! ProxySQL's `stats_mysql_query_digest`. `SHOW SHOAL QUERIES` lists them by total time;
//! `RESET SHOAL QUERIES` forgets them.
//!
//! Bounded: at most [`MAX_DIGESTS`] distinct digests are kept; once full, statements of new
//! shapes are counted in one `(other)` entry (known digests keep counting), until a reset.
//! Nothing is evicted, so the numbers of a digest shown are never partial.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dashmap::DashMap;
use shoal_router::sql::lex::{Token, tokenize, tokenize_into};
use shoal_router::sql::normalize;

use super::Statement;

pub const MAX_DIGESTS: usize = 10_000;

/// A digest's text is kept up to this many bytes (then ` ...`): a statement may be as long as
/// max_allowed_packet (a 100,000-term OR is megabytes), and 10,000 such would hold gigabytes.
/// The digest itself is the hash of the whole shape.
pub const MAX_TEXT: usize = 4096;

/// The key of the `(other)` entry.
const OTHER: u64 = 0;

/// One digest's numbers.
#[derive(Debug, Clone)]
pub struct Entry {
    pub digest: u64,
    pub schema: String,
    pub user: String,
    pub text: String,
    pub count: u64,
    pub sum: Duration,
    pub max: Duration,
    pub rows: u64,
    pub errors: u64,
    /// Bit `i`: datanode `i` was touched.
    pub datanodes: u64,
    /// Seconds since the epoch.
    pub first_seen: u64,
    pub last_seen: u64,
}

pub struct Digests {
    map: DashMap<u64, Entry, foldhash::fast::RandomState>,
    len: AtomicUsize,
    cap: usize,
    seed: foldhash::quality::FixedState,
}

impl Default for Digests {
    fn default() -> Self {
        Digests::with_capacity(MAX_DIGESTS)
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Digests {
    pub fn with_capacity(cap: usize) -> Digests {
        Digests {
            map: DashMap::default(),
            len: AtomicUsize::new(0),
            cap,
            seed: foldhash::quality::FixedState::with_seed(0x5348_0a1d),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The map key: the shape's digest with the schema and user (never 0, the `(other)` key).
    fn key(&self, digest: u64, schema: &str, user: &str) -> u64 {
        let mut h = self.seed.build_hasher();
        h.write_u64(digest);
        h.write(schema.as_bytes());
        h.write_u8(0);
        h.write(user.as_bytes());
        h.finish().max(1)
    }

    pub(super) fn record(&self, s: &Statement<'_>) {
        let schema = s.schema.unwrap_or("");
        // The routed path hashed its tokens already; otherwise the text is read here.
        let digest = match s.mark.digest {
            Some(d) => d,
            None => match text_digest(s.text) {
                Some(d) => d,
                None => return,
            },
        };
        let key = self.key(digest, schema, s.user);
        let now = now_secs();
        let update = |e: &mut Entry| {
            e.count += 1;
            e.sum += s.elapsed;
            e.max = e.max.max(s.elapsed);
            e.rows += s.mark.rows;
            e.errors += s.mark.error.is_some() as u64;
            e.datanodes |= s.datanodes;
            e.last_seen = now;
        };
        // A known digest: one shard lock, no allocation.
        if let Some(mut e) = self.map.get_mut(&key) {
            update(&mut e);
            return;
        }
        let full = self.len.load(Ordering::Relaxed) >= self.cap;
        let (key, text, schema, user) = if full {
            (OTHER, "(other)".to_string(), String::new(), String::new())
        } else {
            let text = std::str::from_utf8(s.text)
                .ok()
                .and_then(|t| {
                    tokenize(t)
                        .ok()
                        .map(|toks| normalize::digest_text(t, &toks))
                })
                .map(cut)
                .unwrap_or_default();
            (key, text, schema.to_string(), s.user.to_string())
        };
        let mut e = self.map.entry(key).or_insert_with(|| {
            if key != OTHER {
                self.len.fetch_add(1, Ordering::Relaxed);
            }
            Entry {
                digest: if key == OTHER { 0 } else { digest },
                schema,
                user,
                text,
                count: 0,
                sum: Duration::ZERO,
                max: Duration::ZERO,
                rows: 0,
                errors: 0,
                datanodes: 0,
                first_seen: now,
                last_seen: now,
            }
        });
        update(&mut e);
    }

    /// Every entry, by total time (longest first).
    pub fn top(&self) -> Vec<Entry> {
        let mut v: Vec<Entry> = self.map.iter().map(|e| e.value().clone()).collect();
        v.sort_by(|a, b| b.sum.cmp(&a.sum).then(b.count.cmp(&a.count)));
        v
    }

    pub fn reset(&self) {
        self.map.clear();
        self.len.store(0, Ordering::Relaxed);
    }

    /// `SHOW SHOAL QUERIES`'s columns.
    pub const COLUMNS: [&'static str; 12] = [
        "digest",
        "schema",
        "user",
        "count",
        "sum_time_us",
        "max_time_us",
        "rows_sent",
        "errors",
        "datanodes",
        "first_seen",
        "last_seen",
        "digest_text",
    ];

    /// `SHOW SHOAL QUERIES`'s rows; `datanode_names` names the bits of `datanodes`.
    pub fn rows(&self, datanode_names: &[String]) -> Vec<Vec<Option<String>>> {
        self.top()
            .into_iter()
            .map(|e| {
                let dns: Vec<&str> = (0..64)
                    .filter(|i| e.datanodes & (1u64 << i) != 0)
                    .map(|i| datanode_names.get(i).map_or("?", String::as_str))
                    .collect();
                vec![
                    Some(format!("0x{:016X}", e.digest)),
                    Some(e.schema),
                    Some(e.user),
                    Some(e.count.to_string()),
                    Some(e.sum.as_micros().to_string()),
                    Some(e.max.as_micros().to_string()),
                    Some(e.rows.to_string()),
                    Some(e.errors.to_string()),
                    Some(dns.join(",")),
                    Some(e.first_seen.to_string()),
                    Some(e.last_seen.to_string()),
                    Some(e.text),
                ]
            })
            .collect()
    }
}

/// `SHOW SHOAL QUERIES` or `RESET SHOAL QUERIES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestStatement {
    Show,
    Reset,
}

thread_local! {
    /// The relay path's tokens for digests, reused: a statement read there allocates nothing
    /// once the buffer has grown.
    static TOKENS: std::cell::RefCell<Vec<Token>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `text` cut at [`MAX_TEXT`] bytes (on a character boundary).
fn cut(mut text: String) -> String {
    if text.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(" ...");
    }
    text
}

/// The digest of a statement the relay path did not tokenize (quick mode).
fn text_digest(text: &[u8]) -> Option<u64> {
    let t = std::str::from_utf8(text).ok()?;
    TOKENS.with(|toks| {
        let mut toks = toks.borrow_mut();
        tokenize_into(t, &mut toks).ok()?;
        Some(normalize::digest(t, &toks))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::Mark;

    fn stmt<'a>(text: &'a str, ms: u64) -> Statement<'a> {
        Statement {
            command: crate::wire::command::COM_QUERY,
            text: text.as_bytes(),
            mark: Mark {
                rows: 1,
                ..Mark::default()
            },
            schema: Some("shop"),
            user: "app",
            client: "127.0.0.1",
            datanodes: 0b10,
            elapsed: Duration::from_millis(ms),
            bytes_in: 0,
            bytes_out: 0,
        }
    }

    #[test]
    fn a_statement_bomb_keeps_a_bounded_text_and_one_digest() {
        let d = Digests::default();
        let or = |n: usize| {
            let terms: Vec<String> = (0..100_000).map(|i| format!("id = {}", i + n)).collect();
            // (Past the first literals, the shape keeps them: see `normalize::MAX_SLOTS`.)
            format!("SELECT * FROM t WHERE {}", terms.join(" OR "))
        };
        d.record(&stmt(&or(0), 1));
        d.record(&stmt(&or(0), 1));
        let top = d.top();
        assert_eq!(top.len(), 1, "one statement, one digest");
        assert_eq!(top[0].count, 2);
        assert!(top[0].text.len() <= MAX_TEXT + 4, "{}", top[0].text.len());
        assert!(top[0].text.starts_with("SELECT * FROM t WHERE id = ?i OR "));
        assert!(top[0].text.ends_with(" ..."));
    }

    #[test]
    fn same_shape_one_digest() {
        let d = Digests::default();
        for i in 0..5 {
            d.record(&stmt(&format!("SELECT * FROM t WHERE id = {i}"), i + 1));
        }
        d.record(&stmt("SELECT * FROM u", 1));
        let top = d.top();
        assert_eq!(top.len(), 2);
        assert_eq!(top[0].count, 5);
        assert_eq!(top[0].sum, Duration::from_millis(15));
        assert_eq!(top[0].max, Duration::from_millis(5));
        assert_eq!(top[0].rows, 5);
        assert_eq!(top[0].text, "SELECT * FROM t WHERE id = ?i");
        let rows = d.rows(&["dn0".into(), "dn1".into()]);
        assert_eq!(rows[0][8].as_deref(), Some("dn1"));
        d.reset();
        assert!(d.is_empty());
    }

    #[test]
    fn bounded_with_an_other_bucket() {
        let d = Digests::with_capacity(3);
        for t in ["a", "b", "c", "d", "e"] {
            d.record(&stmt(&format!("SELECT 1 FROM {t}"), 1));
        }
        // A known digest keeps counting once full.
        d.record(&stmt("SELECT 1 FROM a", 1));
        let top = d.top();
        assert_eq!(top.len(), 4, "{top:?}");
        let other = top.iter().find(|e| e.text == "(other)").expect("other");
        assert_eq!(other.count, 2);
        let a = top
            .iter()
            .find(|e| e.text == "SELECT ?i FROM a")
            .expect("a");
        assert_eq!(a.count, 2);
        d.reset();
        d.record(&stmt("SELECT 1 FROM z", 1));
        assert_eq!(d.top()[0].text, "SELECT ?i FROM z");
    }
}
