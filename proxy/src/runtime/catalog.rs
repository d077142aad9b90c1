//! The logical `information_schema`'s state for one configuration snapshot (see
//! `exec::catalog`, which builds and answers from it): the catalog tables' built rows, the
//! column order of sharded tables, and Shoal's own connection that evaluates statements.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::backend::conn::BackendConn;

pub type Cell = Option<Vec<u8>>;

/// A catalog table's logical rows, in the column order of the backend's table.
#[derive(Debug, Default)]
pub struct LogicalRows {
    pub rows: Vec<Vec<Cell>>,
    /// The logical schema of each row (what a user limited to some schemas may see), `None`
    /// for `information_schema`'s own row of SCHEMATA.
    pub schema: Vec<Option<String>>,
}

/// How long built rows serve statements when no DDL went through Shoal: row counts and sizes
/// change with every write, and DDL run on the datanodes directly is not seen otherwise.
pub const CACHE_AGE: Duration = Duration::from_secs(3);

/// A table's column order and the generation it was read in.
type ColumnOrder = (u64, Arc<Vec<String>>);

pub(crate) struct Built {
    pub(crate) generation: u64,
    pub(crate) at: Instant,
    pub(crate) version: u64,
    pub(crate) rows: LogicalRows,
}

/// The catalog of one topology: built rows, and the connection that evaluates statements.
#[derive(Default)]
pub struct Catalog {
    pub(crate) generation: AtomicU64,
    pub(crate) versions: AtomicU64,
    pub(crate) built: std::sync::Mutex<HashMap<&'static str, Arc<Built>>>,
    /// The schema lists users are limited to; a list's index names its temporary tables.
    pub(crate) filters: std::sync::Mutex<Vec<Option<Vec<String>>>>,
    pub(crate) conn: tokio::sync::Mutex<Dedicated>,
    /// Column order of sharded tables, for INSERTs without a column list (`exec::column_list`):
    /// (logical schema, table) -> the generation it was read in, the names. One entry per
    /// configured table at most.
    pub(crate) columns: std::sync::Mutex<HashMap<(String, String), ColumnOrder>>,
}

impl Catalog {
    /// DDL went through Shoal: built rows are stale.
    pub fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// The column order read for `schema.table` since the last DDL through Shoal.
    pub(crate) fn table_columns(&self, schema: &str, table: &str) -> Option<Arc<Vec<String>>> {
        let cols = self.columns.lock().unwrap_or_else(|p| p.into_inner());
        let (generation, names) = cols.get(&(schema.to_string(), table.to_string()))?;
        (*generation == self.generation.load(Ordering::Relaxed)).then(|| names.clone())
    }

    /// The generation a read starting now belongs to (DDL during the read makes it stale).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    pub(crate) fn keep_table_columns(
        &self,
        schema: &str,
        table: &str,
        generation: u64,
        names: Arc<Vec<String>>,
    ) {
        let mut cols = self.columns.lock().unwrap_or_else(|p| p.into_inner());
        cols.insert((schema.to_string(), table.to_string()), (generation, names));
    }

    /// A backend found the cached order wrong (1136): read it again next time.
    pub(crate) fn forget_table_columns(&self, schema: &str, table: &str) {
        let mut cols = self.columns.lock().unwrap_or_else(|p| p.into_inner());
        cols.remove(&(schema.to_string(), table.to_string()));
    }

    pub(crate) fn fresh(&self, table: &str) -> Option<Arc<Built>> {
        let built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        let b = built.get(table)?;
        (b.generation == self.generation.load(Ordering::Relaxed) && b.at.elapsed() < CACHE_AGE)
            .then(|| b.clone())
    }

    pub(crate) fn filter_index(&self, allowed: &Option<Vec<String>>) -> usize {
        let mut f = self.filters.lock().unwrap_or_else(|p| p.into_inner());
        match f.iter().position(|x| x == allowed) {
            Some(i) => i,
            None => {
                f.push(allowed.clone());
                f.len() - 1
            }
        }
    }
}

/// Shoal's own connection for the catalog (opened, loaded and run by `exec::catalog::conn`).
#[derive(Default)]
pub struct Dedicated {
    pub(crate) conn: Option<BackendConn>,
    /// The database it works in (the first datanode's): its temporary tables live there.
    pub database: String,
    /// The servers' default sql_mode (what a session that set none runs under).
    pub(crate) default_mode: String,
    /// The sql_mode set on it now.
    pub(crate) mode: Option<String>,
    /// Temporary table -> version of the rows it holds.
    pub(crate) loaded: HashMap<String, u64>,
}
