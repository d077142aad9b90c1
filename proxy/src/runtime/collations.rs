//! The collations physical columns are declared with, as `exec::collations` read them for the
//! merge: cached per (datahost, database) for the sessions of one configuration snapshot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Table and column (lower-case) to collation id, for one database.
pub(crate) type Declared = HashMap<(String, String), u16>;

/// Declared collations per (datahost, database), shared by the sessions of one topology.
#[derive(Default)]
pub struct Collations {
    known: Mutex<HashMap<(usize, String), Arc<Declared>>>,
}

impl Collations {
    pub(crate) fn get(&self, datahost: usize, db: &str) -> Option<Arc<Declared>> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.get(&(datahost, db.to_string())).cloned()
    }

    pub(crate) fn put(&self, datahost: usize, db: &str, d: Declared) -> Arc<Declared> {
        let d = Arc::new(d);
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.insert((datahost, db.to_string()), d.clone());
        d
    }

    /// Forgets everything (DDL may have changed a column's collation).
    pub fn clear(&self) {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}
