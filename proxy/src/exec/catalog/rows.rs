//! The logical rows of a catalog table: each datanode's own `information_schema` rows for its
//! database, kept for the tables of the logical schema only and renamed to logical names.
//!
//! Which physical table stands for a logical one: the first shard of a sharded or child table
//! (its definition: columns, indexes, constraints are the same on every shard), the first
//! copy of a global table, and on a schema's default datanode its tables that are not listed
//! (minus the physical tables of table-per-shard tables). The other shards' rows only add
//! their figures to the first shard's row (`Spec::sums`; see `merge_figures`); other copies
//! of a global table and anything else in a datanode's database are left out.

use std::collections::HashMap;

use shoal_router::plan::namespace;
use shoal_router::topology::{TableDef, Topology};

use super::spec::Spec;
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::exec::reader::{ResultStream, Row};
use crate::runtime::catalog::{Cell, LogicalRows};
use crate::runtime::routing::Routing;
use crate::wire::command::COM_QUERY;
use crate::wire::messages::read_lenenc_bytes;

/// What a physical table of a datanode is to the logical schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// It stands for the logical table.
    Rep,
    /// Another shard: its figures are added to the representative's.
    Extra,
    /// Another copy of a global table: left out.
    Skip,
}

/// Per datanode: physical table (lower case) -> (schema, logical table, role).
type Owners = Vec<HashMap<String, (String, String, Role)>>;

fn owners(topo: &Topology) -> Owners {
    let mut out: Owners = vec![HashMap::new(); topo.datanodes.len()];
    let mut schemas: Vec<_> = topo.schemas.values().collect();
    schemas.sort_by(|a, b| a.name.cmp(&b.name));
    for s in schemas {
        for t in s.tables.values() {
            let mut add = |dn: usize, physical: &str, logical: &str, role: Role| {
                if let Some(m) = out.get_mut(dn) {
                    m.entry(physical.to_lowercase())
                        .or_insert_with(|| (s.name.clone(), logical.to_string(), role));
                }
            };
            let (name, shards) = match t {
                TableDef::Sharded(t) => (&t.name, &t.shards),
                TableDef::Child(t) => (&t.name, &t.shards),
                TableDef::Global(g) => {
                    for (k, &dn) in g.datanodes.iter().enumerate() {
                        let role = if k == 0 { Role::Rep } else { Role::Skip };
                        add(dn, &g.name, &g.name, role);
                    }
                    continue;
                }
            };
            for (k, sh) in shards.iter().enumerate() {
                let role = if k == 0 { Role::Rep } else { Role::Extra };
                add(sh.datanode, &sh.physical_table, name, role);
            }
        }
    }
    out
}

/// The schemas whose unlisted tables live on datanode `dn`.
fn default_schemas(topo: &Topology, dn: usize) -> Vec<String> {
    let mut v: Vec<String> = topo
        .schemas
        .values()
        .filter(|s| s.default_datanode == Some(dn))
        .map(|s| s.name.clone())
        .collect();
    v.sort();
    v
}

/// The datanode whose database stands for logical schema `s` in SCHEMATA (its character set
/// and collation): the default datanode, else the first datanode of one of its tables.
fn schema_datanode(s: &shoal_router::topology::LogicalSchema) -> usize {
    if let Some(dn) = s.default_datanode {
        return dn;
    }
    let mut first: Vec<usize> = s
        .tables
        .values()
        .filter_map(|t| match t {
            TableDef::Sharded(t) => t.shards.first().map(|x| x.datanode),
            TableDef::Child(t) => t.shards.first().map(|x| x.datanode),
            TableDef::Global(g) => g.datanodes.first().copied(),
        })
        .collect();
    first.sort_unstable();
    first.first().copied().unwrap_or(0)
}

/// `s` as a single-quoted SQL string (backslash escapes on: the catalog connection's mode).
pub fn quoted(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in String::from_utf8_lossy(s).chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Column names of column definitions.
pub fn column_names(defs: &[Vec<u8>]) -> Vec<String> {
    defs.iter()
        .map(|d| {
            let mut b = d.as_slice();
            let mut name = None;
            for _ in 0..5 {
                name = read_lenenc_bytes(&mut b);
            }
            String::from_utf8_lossy(name.unwrap_or(b"")).into_owned()
        })
        .collect()
}

fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Option<Vec<u8>> {
    if from.is_empty() || hay.len() < from.len() {
        return None;
    }
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    let mut hit = false;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
            hit = true;
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    hit.then_some(out)
}

/// One physical row, placed.
struct Placed {
    role: Role,
    schema: String,
    row: Vec<Cell>,
    /// (schema, logical table, key cells) lower-cased: which logical row it is.
    key: Vec<Vec<u8>>,
}

impl Cursor {
    /// The logical rows of catalog table `spec`, read from every datanode's database.
    pub(super) async fn logical_rows(
        &mut self,
        routing: &Routing,
        spec: &Spec,
    ) -> Result<LogicalRows> {
        let topo = routing.topology.clone();
        let owners = owners(&topo);
        let mut placed: Vec<Placed> = Vec::new();
        let mut out = LogicalRows::default();
        let mut all_names = Vec::new();
        if spec.name == "SCHEMATA" {
            return self.schemata(routing, spec).await;
        }
        // One query per (datahost, database): datanodes sharing one read the same rows.
        let mut seen: Vec<(usize, String)> = Vec::new();
        for (dn, d) in topo.datanodes.iter().enumerate() {
            let key = (d.datahost, d.database.to_lowercase());
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            let defaults = default_schemas(&topo, dn);
            if owners[dn].is_empty() && defaults.is_empty() {
                continue;
            }
            let (names, rows) = self.catalog_fetch(routing, dn, spec).await?;
            let col = |n: &str| names.iter().position(|c| c.eq_ignore_ascii_case(n));
            let table_col = spec.table_col.and_then(col);
            for mut row in rows {
                let physical = table_col
                    .and_then(|i| row.get(i).cloned().flatten())
                    .map(|v| String::from_utf8_lossy(&v).into_owned());
                let (schema, logical, role) = match &physical {
                    Some(p) => match owners[dn].get(&p.to_lowercase()) {
                        Some((s, l, r)) => (s.clone(), Some(l.clone()), *r),
                        None => {
                            // An unlisted table of the schema this datanode is the default of.
                            let Some(s) = defaults.iter().find(|s| {
                                topo.schema(s)
                                    .is_some_and(|ls| !namespace::is_physical_name(ls, p))
                            }) else {
                                continue;
                            };
                            (s.clone(), Some(p.clone()), Role::Rep)
                        }
                    },
                    None if table_col.is_some() => continue,
                    // Routines, events: the default datanode's.
                    None => match defaults.first() {
                        Some(s) => (s.clone(), None, Role::Rep),
                        None => continue,
                    },
                };
                if role == Role::Skip {
                    continue;
                }
                let db = d.database.as_bytes();
                for c in spec.schema_cols.iter().filter_map(|c| col(c)) {
                    if let Some(Some(v)) = row.get_mut(c)
                        && v.eq_ignore_ascii_case(db)
                    {
                        *v = schema.as_bytes().to_vec();
                    }
                }
                if let (Some(i), Some(l)) = (table_col, &logical) {
                    row[i] = Some(l.as_bytes().to_vec());
                }
                for c in spec.other_table_cols.iter().filter_map(|c| col(c)) {
                    if let Some(Some(v)) = row.get_mut(c) {
                        let name = String::from_utf8_lossy(v).to_lowercase();
                        if let Some((_, l, _)) = owners[dn].get(&name) {
                            *v = l.as_bytes().to_vec();
                        }
                    }
                }
                if let (Some(p), Some(l)) = (&physical, &logical)
                    && p != l
                {
                    for c in spec.derived_name_cols.iter().filter_map(|c| col(c)) {
                        if let Some(Some(v)) = row.get_mut(c)
                            && let Some(n) = replace_all(v, p.as_bytes(), l.as_bytes())
                        {
                            *v = n;
                        }
                    }
                }
                let from = format!("`{}`.", d.database.replace('`', "``"));
                let to = format!("`{}`.", schema.replace('`', "``"));
                for c in spec.text_cols.iter().filter_map(|c| col(c)) {
                    if let Some(Some(v)) = row.get_mut(c)
                        && let Some(n) = replace_all(v, from.as_bytes(), to.as_bytes())
                    {
                        *v = n;
                    }
                }
                let mut key = vec![
                    schema.to_lowercase().into_bytes(),
                    logical
                        .clone()
                        .unwrap_or_default()
                        .to_lowercase()
                        .into_bytes(),
                ];
                for c in spec.key_cols.iter().filter_map(|c| col(c)) {
                    key.push(row[c].clone().unwrap_or_default());
                }
                placed.push(Placed {
                    role,
                    schema,
                    row,
                    key,
                });
            }
            all_names = names;
        }
        // information_schema's own (its tables and their columns), as every server lists them.
        let sql = format!(
            "SELECT * FROM information_schema.{} WHERE {} = 'information_schema'",
            spec.name, spec.filter
        );
        for row in self.catalog_query(routing, 0, &sql).await?.1 {
            out.rows.push(row);
            out.schema.push(None);
        }
        finish(placed, spec, &all_names, &mut out);
        Ok(out)
    }

    /// SCHEMATA: one row per logical schema (the character set and collation of the database
    /// that stands for it) and `information_schema`'s own.
    async fn schemata(&mut self, routing: &Routing, spec: &Spec) -> Result<LogicalRows> {
        let topo = routing.topology.clone();
        let mut out = LogicalRows::default();
        let mut schemas: Vec<_> = topo.schemas.values().collect();
        schemas.sort_by(|a, b| a.name.cmp(&b.name));
        let (names, is_rows) = self
            .catalog_query(
                routing,
                0,
                "SELECT * FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'information_schema'",
            )
            .await?;
        let name_col = names
            .iter()
            .position(|c| c.eq_ignore_ascii_case(spec.filter))
            .unwrap_or(1);
        for row in is_rows {
            out.rows.push(row);
            out.schema.push(None);
        }
        for s in schemas {
            let dn = schema_datanode(s);
            let (_, rows) = self.catalog_fetch(routing, dn, spec).await?;
            if let Some(mut row) = rows.into_iter().next() {
                if let Some(c) = row.get_mut(name_col) {
                    *c = Some(s.name.as_bytes().to_vec());
                }
                out.rows.push(row);
                out.schema.push(Some(s.name.clone()));
            }
        }
        Ok(out)
    }

    /// `spec`'s rows for datanode `dn`'s database, with the column names.
    async fn catalog_fetch(
        &mut self,
        routing: &Routing,
        dn: usize,
        spec: &Spec,
    ) -> Result<(Vec<String>, Vec<Vec<Cell>>)> {
        let db = &routing.topology.datanodes[dn].database;
        let sql = format!(
            "SELECT * FROM information_schema.{} WHERE {} = {}",
            spec.name,
            spec.filter,
            quoted(db.as_bytes())
        );
        self.catalog_query(routing, dn, &sql).await
    }

    /// Runs `sql` (a read of the datanode's own `information_schema`) on a pooled connection
    /// of Shoal's own to `dn`'s primary, never on the session's: the catalog's rows are no
    /// part of the client's transaction (a consistent snapshot's writes stay on one datanode,
    /// and a refresh reads every one), nor limited by its LOCK TABLES or FLUSH TABLES WITH
    /// READ LOCK.
    async fn catalog_query(
        &mut self,
        routing: &Routing,
        dn: usize,
        sql: &str,
    ) -> Result<(Vec<String>, Vec<Vec<Cell>>)> {
        let mut conn = self.own_primary_connection(routing, dn).await?;
        conn.io.write_command(COM_QUERY, sql.as_bytes());
        conn.io.flush().await.map_err(Error::BackendIo)?;
        let mut stream = ResultStream::new(&conn, false);
        let defs = stream.columns(&mut conn).await?;
        let mut rows = Vec::new();
        loop {
            match stream.next_row(&mut conn).await? {
                Row::End => break,
                Row::Data(row) => rows.push(crate::exec::metadata::fields(&row)?),
            }
        }
        conn.release();
        Ok((column_names(&defs), rows))
    }
}

/// Positions of the columns whose figures combine over shards.
struct Figures {
    sums: Vec<usize>,
    rows: Option<usize>,
    data_length: Option<usize>,
    avg_row_length: Option<usize>,
    auto_increment: Option<usize>,
    create_time: Option<usize>,
    update_time: Option<usize>,
}

impl Figures {
    fn of(names: &[String], spec: &Spec) -> Figures {
        let col = |n: &str| names.iter().position(|c| c.eq_ignore_ascii_case(n));
        Figures {
            sums: spec.sums.iter().filter_map(|c| col(c)).collect(),
            rows: col("TABLE_ROWS"),
            data_length: col("DATA_LENGTH"),
            avg_row_length: col("AVG_ROW_LENGTH"),
            auto_increment: col("AUTO_INCREMENT"),
            create_time: col("CREATE_TIME"),
            update_time: col("UPDATE_TIME"),
        }
    }
}

fn num(v: &[u8]) -> u64 {
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// `a + b`, NULL only when both are.
fn add(a: &Cell, b: &Cell) -> Cell {
    match (a, b) {
        (None, None) => None,
        _ => {
            let x = a.as_deref().map(num).unwrap_or(0);
            let y = b.as_deref().map(num).unwrap_or(0);
            Some(x.saturating_add(y).to_string().into_bytes())
        }
    }
}

/// `b` when `a` is NULL or `better(a, b)`, else `a`.
fn pick(a: &Cell, b: &Cell, better: impl Fn(&[u8], &[u8]) -> bool) -> Cell {
    match (a, b) {
        (None, b) => b.clone(),
        (a, None) => a.clone(),
        (Some(x), Some(y)) => Some(if better(x, y) { y.clone() } else { x.clone() }),
    }
}

/// Representative rows in order, each with the figures of the other shards' rows of the same
/// logical row added: the `Spec::sums` columns summed, `AUTO_INCREMENT` the largest,
/// `CREATE_TIME` the earliest, `UPDATE_TIME` the latest, `AVG_ROW_LENGTH` recomputed as
/// `DATA_LENGTH / TABLE_ROWS`. Extra rows whose representative is absent are dropped.
fn finish(placed: Vec<Placed>, spec: &Spec, names: &[String], out: &mut LogicalRows) {
    let mut index: HashMap<Vec<Vec<u8>>, usize> = HashMap::new();
    let mut extras = Vec::new();
    for p in placed {
        match p.role {
            Role::Rep => {
                index.insert(p.key.clone(), out.rows.len());
                out.rows.push(p.row);
                out.schema.push(Some(p.schema));
            }
            _ => extras.push(p),
        }
    }
    if spec.sums.is_empty() {
        return;
    }
    let f = Figures::of(names, spec);
    let mut merged = vec![false; out.rows.len()];
    for e in extras {
        let Some(&i) = index.get(&e.key) else {
            continue;
        };
        merged[i] = true;
        let row = &mut out.rows[i];
        if row.len() != e.row.len() {
            continue;
        }
        for &c in &f.sums {
            row[c] = add(&row[c], &e.row[c]);
        }
        if let Some(c) = f.auto_increment {
            row[c] = pick(&row[c], &e.row[c], |a, b| num(b) > num(a));
        }
        if let Some(c) = f.create_time {
            row[c] = pick(&row[c], &e.row[c], |a, b| b < a);
        }
        if let Some(c) = f.update_time {
            row[c] = pick(&row[c], &e.row[c], |a, b| b > a);
        }
    }
    if let (Some(avg), Some(rows), Some(len)) = (f.avg_row_length, f.rows, f.data_length) {
        for (row, _) in out.rows.iter_mut().zip(&merged).filter(|(_, m)| **m) {
            let n = row[rows].as_deref().map(num).unwrap_or(0);
            let l = row[len].as_deref().map(num).unwrap_or(0);
            if row[avg].is_some() {
                row[avg] = Some(l.checked_div(n).unwrap_or(0).to_string().into_bytes());
            }
        }
    }
}
