//! Server-side prepared statements kept on a backend connection for whichever session uses it
//! next (as ProxySQL does), so that a client's prepared statement does not tie a backend
//! connection to its session: each execute borrows any connection of the datanode and finds,
//! or prepares, the statement there.
//!
//! A statement is parsed by the server in the schema and sql_mode of the moment it is
//! prepared, so the key carries a fingerprint of the connection's state beside the text.
//! The cache is bounded per connection because MariaDB bounds statements per server
//! (`max_prepared_stmt_count`, 16382 by default), shared by every connection.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use foldhash::fast::FixedState;

use super::state::{SessionState, Vars};

/// Parameter types (type, unsigned flag) of a statement's execute: inline up to 8
/// parameters, so that comparing them on an execute reads no separate heap line.
pub type ParamTypes = smallvec::SmallVec<[(u8, u8); 8]>;

/// Statements one connection keeps: a pool of 64 connections keeps at most 8,192.
pub const MAX_PER_CONN: usize = 128;

struct Entry {
    /// The router's text itself (a prepared statement's target is rendered once and shared):
    /// the lookup of the same target compares a pointer, not the text.
    sql: Arc<str>,
    id: u32,
    used: u64,
    /// Parameter types the server holds for the statement: those the last execute sent
    /// (empty: none sent yet, or forgotten). The server keeps them, so an execute with the
    /// same types need not send them again; sending them anyway makes MariaDB set the
    /// statement's parameters up again, about a fifth of its CPU per point select.
    types: ParamTypes,
}

#[derive(Default)]
pub struct StmtCache {
    /// Keyed by a hash of (state fingerprint, text); the entry's text is compared on lookup.
    /// Hashed with foldhash, not SipHash: this runs on every execute, and a crafted collision
    /// only costs its own sessions a re-prepare (the text is compared).
    entries: HashMap<u64, Entry, FixedState>,
    tick: u64,
}

/// Hash of what changes how the server reads a statement's text: schema and variables.
pub fn fingerprint(state: &SessionState) -> u64 {
    fingerprint_in(state.schema.as_deref(), &state.vars)
}

/// [`fingerprint`] of a state in `schema` with `vars`. A statement keeps the schema it was
/// prepared in (the server executes it there whatever the connection's schema is now), so a
/// lookup for another schema than the connection's own is meaningful.
pub fn fingerprint_in(schema: Option<&str>, vars: &Vars) -> u64 {
    FixedState::with_seed(vars.hash()).hash_one(schema)
}

fn key(fingerprint: u64, sql: &str) -> u64 {
    FixedState::with_seed(fingerprint).hash_one(sql)
}

impl StmtCache {
    /// The backend id of `sql` prepared in a state with `fingerprint`, if kept here, with the
    /// parameter types the server holds for it, for the caller to compare with an execute's
    /// and to update when it sends others.
    pub fn get_for_execute(
        &mut self,
        fingerprint: u64,
        sql: &Arc<str>,
    ) -> Option<(u32, &mut ParamTypes)> {
        self.tick += 1;
        let tick = self.tick;
        let e = self.entries.get_mut(&key(fingerprint, sql))?;
        if !Arc::ptr_eq(&e.sql, sql) && *e.sql != **sql {
            return None;
        }
        e.used = tick;
        Some((e.id, &mut e.types))
    }

    /// Forgets which parameter types the server holds, for every statement: where an execute
    /// that carried types may not have reached the server, the next ones send them again.
    pub fn forget_types(&mut self) {
        for e in self.entries.values_mut() {
            e.types.clear();
        }
    }

    /// Keeps `id` for `sql`. Returns the backend ids the caller must close: a hash collision's
    /// previous holder, and the least recently used entry when the cache is full.
    pub fn insert(&mut self, fingerprint: u64, sql: &Arc<str>, id: u32) -> Vec<u32> {
        let mut closed = Vec::new();
        let k = key(fingerprint, sql);
        if self.entries.len() >= MAX_PER_CONN && !self.entries.contains_key(&k) {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| *k);
            if let Some(old) = oldest.and_then(|o| self.entries.remove(&o)) {
                closed.push(old.id);
            }
        }
        self.tick += 1;
        let entry = Entry {
            sql: sql.clone(),
            id,
            used: self.tick,
            types: ParamTypes::new(),
        };
        if let Some(prev) = self.entries.insert(k, entry)
            && prev.id != id
        {
            closed.push(prev.id);
        }
        closed
    }

    /// Forgets everything and returns the ids still open on the server (to close them).
    pub fn drain(&mut self) -> Vec<u32> {
        self.entries.drain().map(|(_, e)| e.id).collect()
    }

    /// Forgets everything the server already dropped (COM_RESET_CONNECTION, COM_CHANGE_USER).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(sql: &str) -> Arc<str> {
        sql.into()
    }

    #[test]
    fn keyed_by_text_and_state() {
        let mut c = StmtCache::default();
        let a = SessionState {
            schema: Some("db1".into()),
            ..Default::default()
        };
        let mut b = a.clone();
        b.set_var("sql_mode", "ANSI_QUOTES");
        let (fa, fb) = (fingerprint(&a), fingerprint(&b));
        assert_ne!(fa, fb);
        assert!(c.insert(fa, &s("SELECT 1"), 7).is_empty());
        assert_eq!(
            c.get_for_execute(fa, &s("SELECT 1")).map(|(id, _)| id),
            Some(7)
        );
        assert_eq!(
            c.get_for_execute(fb, &s("SELECT 1")).map(|(id, _)| id),
            None
        );
        assert_eq!(
            c.get_for_execute(fa, &s("SELECT 2")).map(|(id, _)| id),
            None
        );
    }

    #[test]
    fn full_cache_evicts_the_least_recently_used() {
        let mut c = StmtCache::default();
        for i in 0..MAX_PER_CONN as u32 {
            assert!(c.insert(1, &s(&format!("SELECT {i}")), i).is_empty());
        }
        // Statement 0 is used again, so 1 is now the oldest.
        assert_eq!(
            c.get_for_execute(1, &s("SELECT 0")).map(|(id, _)| id),
            Some(0)
        );
        assert_eq!(c.insert(1, &s("SELECT new"), 1000), vec![1]);
        assert_eq!(c.len(), MAX_PER_CONN);
        assert_eq!(c.get_for_execute(1, &s("SELECT 1")).map(|(id, _)| id), None);
        assert_eq!(
            c.get_for_execute(1, &s("SELECT 0")).map(|(id, _)| id),
            Some(0)
        );
        let mut all = c.drain();
        all.sort();
        assert_eq!(all.len(), MAX_PER_CONN);
        assert!(all.contains(&1000) && !all.contains(&1));
        assert!(c.is_empty());
    }
}
