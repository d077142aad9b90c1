//! LOCK TABLES and UNLOCK TABLES over datanodes.
//!
//! A logical table is locked by locking every physical table of it on every datanode that
//! holds one, on the session's connection to that datanode, which then stays with the session
//! (`Held::table_locks` pins it) until UNLOCK TABLES, START TRANSACTION, another LOCK TABLES
//! or the end of the session (a connection given back is reset first, which unlocks). The
//! datanodes are locked one at a time in one global order (datanode index; within a datanode,
//! one statement whose tables are sorted by physical name, and MariaDB takes one statement's
//! locks in its own fixed order), so two sessions locking overlapping tables queue behind each
//! other and never deadlock.
//!
//! While tables are locked, statements run on those connections only (never on another pooled
//! connection or a replica): a statement that needs a datanode holding none of the locks gets
//! error 1100, as a table not locked does on one server; statements on a locked datanode over a
//! table not locked get MariaDB's own 1100 (its name rewritten to the logical one).
//!
//! `FLUSH TABLES` is here too: it flushes the physical tables of the logical tables named (or,
//! without names, of every table of the user's schemas), never the whole server, which a user
//! confined to logical schemas has no right to.

use std::collections::BTreeMap;

use shoal_router::sql::lex::{TokKind, Token};
use shoal_router::topology::{DatanodeId, LogicalSchema, TableDef};

use super::txn::savepoint::quote_ident;
use super::unsupported;
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::runtime::routing::Routing;
use crate::wire::command::COM_QUERY;

/// ER_TABLE_NOT_LOCKED.
const NOT_LOCKED: u16 = 1100;

/// One table of a datanode's `LOCK TABLES`: its qualified physical name, and what follows it
/// (` AS alias READ`, ` WRITE`...).
type LockEntry = (String, String);

/// One table of a LOCK TABLES statement, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LockItem {
    pub schema: Option<String>,
    pub table: String,
    pub alias: Option<String>,
    /// `READ`, `READ LOCAL`, `WRITE`, `LOW_PRIORITY WRITE`, `WRITE CONCURRENT`.
    pub mode: String,
}

/// The tables of `LOCK TABLE[S] t [[AS] a] mode, ...` and what follows the list (`WAIT n`,
/// `NOWAIT`), read on the tokens (executable comments, such as mariadb-dump's
/// `/*!32311 LOCAL */`, are code there). `None`: not that shape.
pub(super) fn parse_lock_tables(sql: &str, toks: &[Token]) -> Option<(Vec<LockItem>, String)> {
    let is = |i: usize, w: &str| toks.get(i).is_some_and(|t| t.is_kw(sql, w));
    let punct = |i: usize, p: &str| toks.get(i).is_some_and(|t| t.is_punct(sql, p));
    let ident = |i: usize| {
        toks.get(i)
            .filter(|t| matches!(t.kind, TokKind::Word | TokKind::QuotedIdent))
            .map(|t| t.ident_value(sql))
    };
    if !is(0, "LOCK") || !(is(1, "TABLES") || is(1, "TABLE")) {
        return None;
    }
    let mut i = 2;
    let mut items = Vec::new();
    loop {
        let first = ident(i)?;
        i += 1;
        let (schema, table) = if punct(i, ".") {
            let t = ident(i + 1)?;
            i += 2;
            (Some(first), t)
        } else {
            (None, first)
        };
        let mode_word = |i: usize| is(i, "READ") || is(i, "WRITE") || is(i, "LOW_PRIORITY");
        let mut alias = None;
        if is(i, "AS") {
            alias = Some(ident(i + 1)?);
            i += 2;
        } else if !mode_word(i) {
            alias = Some(ident(i)?);
            i += 1;
        }
        let mode = if is(i, "READ") && is(i + 1, "LOCAL") {
            i += 2;
            "READ LOCAL"
        } else if is(i, "READ") {
            i += 1;
            "READ"
        } else if is(i, "LOW_PRIORITY") && is(i + 1, "WRITE") {
            i += 2;
            "LOW_PRIORITY WRITE"
        } else if is(i, "WRITE") && is(i + 1, "CONCURRENT") {
            i += 2;
            "WRITE CONCURRENT"
        } else if is(i, "WRITE") {
            i += 1;
            "WRITE"
        } else {
            return None;
        };
        items.push(LockItem {
            schema,
            table,
            alias,
            mode: mode.to_string(),
        });
        if punct(i, ",") {
            i += 1;
            continue;
        }
        break;
    }
    // `WAIT n` / `NOWAIT`, then at most a `;`.
    let mut tail = String::new();
    if is(i, "NOWAIT") {
        tail = " NOWAIT".into();
        i += 1;
    } else if is(i, "WAIT")
        && toks
            .get(i + 1)
            .is_some_and(|t| matches!(t.kind, TokKind::Int | TokKind::Decimal))
    {
        tail = format!(" WAIT {}", toks[i + 1].text(sql));
        i += 2;
    }
    if punct(i, ";") {
        i += 1;
    }
    (i == toks.len()).then_some((items, tail))
}

/// A FLUSH statement, read on the tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Flush {
    /// `FLUSH [NO_WRITE_TO_BINLOG | LOCAL] TABLE[S] WITH READ LOCK [;]`.
    TablesWithReadLock,
    /// `FLUSH [NO_WRITE_TO_BINLOG | LOCAL] TABLE[S] [t [, [db.]t] ...] [;]`: whether it is kept
    /// out of the binary log (LOCAL is NO_WRITE_TO_BINLOG's alias), and the tables named
    /// (none: every table).
    Tables {
        local: bool,
        tables: Vec<(Option<String>, String)>,
    },
    /// Any other form, as written (what its refusal names).
    Other(String),
}

/// Reads a FLUSH statement (executable comments, such as mariadb-dump's `/*!40101 LOCAL */`,
/// are code there).
pub(super) fn parse_flush(sql: &str, toks: &[Token]) -> Flush {
    let is = |i: usize, w: &str| toks.get(i).is_some_and(|t| t.is_kw(sql, w));
    let punct = |i: usize, p: &str| toks.get(i).is_some_and(|t| t.is_punct(sql, p));
    let ident = |i: usize| {
        toks.get(i)
            .filter(|t| matches!(t.kind, TokKind::Word | TokKind::QuotedIdent))
            .map(|t| t.ident_value(sql))
    };
    // The end of the statement: nothing after `i` but a `;`.
    let ends_at = |i: usize| i == toks.len() || (punct(i, ";") && i + 1 == toks.len());
    let other = || {
        // The words as written, spaced as usual (`t, u`, `db.t`).
        let mut text = String::new();
        let mut glued = true;
        for t in toks.iter().filter(|t| !t.is_punct(sql, ";")) {
            let word = t.text(sql);
            if !glued && word != "," && word != "." {
                text.push(' ');
            }
            glued = word == ".";
            text.push_str(word);
        }
        if text.len() > 80 {
            let cut = (0..=80)
                .rev()
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            text.truncate(cut);
            text.push_str("...");
        }
        Flush::Other(text)
    };
    if !is(0, "FLUSH") {
        return other();
    }
    let mut i = 1;
    let local = is(i, "NO_WRITE_TO_BINLOG") || is(i, "LOCAL");
    if local {
        i += 1;
    }
    if !(is(i, "TABLES") || is(i, "TABLE")) {
        return other();
    }
    i += 1;
    if is(i, "WITH") && is(i + 1, "READ") && is(i + 2, "LOCK") && ends_at(i + 3) {
        return Flush::TablesWithReadLock;
    }
    let mut tables = Vec::new();
    let mut more = !ends_at(i);
    while more {
        let Some(first) = ident(i) else {
            return other();
        };
        i += 1;
        let name = if punct(i, ".") {
            let Some(t) = ident(i + 1) else {
                return other();
            };
            i += 2;
            (Some(first), t)
        } else {
            (None, first)
        };
        tables.push(name);
        if punct(i, ",") {
            i += 1;
        } else if ends_at(i) {
            more = false;
        } else {
            // `FLUSH TABLES t WITH READ LOCK`, `... FOR EXPORT`.
            return other();
        }
    }
    Flush::Tables { local, tables }
}

/// Where logical table `table` of `schema` lives: (datanode, physical table) for each of its
/// physical tables; an unlisted table on the schema's default datanode; `None` for an
/// unlisted table in a schema without one.
fn placements(schema: &LogicalSchema, table: &str) -> Option<Vec<(DatanodeId, String)>> {
    Some(match schema.table(table) {
        Some(TableDef::Sharded(t)) => t
            .shards
            .iter()
            .map(|s| (s.datanode, s.physical_table.clone()))
            .collect(),
        Some(TableDef::Child(t)) => t
            .shards
            .iter()
            .map(|s| (s.datanode, s.physical_table.clone()))
            .collect(),
        Some(TableDef::Global(t)) => t.datanodes.iter().map(|&d| (d, t.name.clone())).collect(),
        None => vec![(schema.default_datanode?, table.to_string())],
    })
}

/// The error for a statement that needs datanode `dn` while the session's locks are elsewhere.
pub(super) fn not_locked(routing: &Routing, dn: DatanodeId) -> Error {
    Error::reply(
        NOT_LOCKED,
        b"HY000",
        format!(
            "Table was not locked with LOCK TABLES (the statement needs datanode {}, which \
             holds none of the locked tables)",
            routing.topology.datanodes[dn].name
        ),
    )
}

impl Cursor {
    /// LOCK TABLES: commits an open transaction and releases the locks held, as MariaDB does,
    /// then locks every physical table of the named tables, datanode by datanode.
    pub(super) async fn lock_tables(
        &mut self,
        routing: &Routing,
        sql: &str,
        toks: &[Token],
        reply_seq: u8,
    ) -> Result<()> {
        let Some((items, tail)) = parse_lock_tables(sql, toks) else {
            return Err(Error::reply(
                1064,
                b"42000",
                "You have an error in your SQL syntax near LOCK TABLES",
            ));
        };
        // What each datanode locks: (physical table, alias, mode), sorted.
        let mut per_dn: BTreeMap<DatanodeId, Vec<LockEntry>> = BTreeMap::new();
        for item in &items {
            let schema_name = match item.schema.as_deref().or(self.logical.as_deref()) {
                Some(s) => s.to_string(),
                None => return Err(Error::reply(1046, b"3D000", "No database selected")),
            };
            self.check_schema_allowed(&schema_name)?;
            let Some(schema) = routing.topology.schema(&schema_name) else {
                return Err(Error::unknown_database(&schema_name));
            };
            let Some(places) = placements(schema, &item.table) else {
                return Err(Error::reply(
                    1146,
                    b"42S02",
                    format!("Table '{}.{}' doesn't exist", schema_name, item.table),
                ));
            };
            // How many physical tables of this table each datanode holds.
            let on = |dn: DatanodeId| places.iter().filter(|(d, _)| *d == dn).count();
            for (dn, physical) in places.iter().map(|(d, p)| (*d, p.clone())) {
                let db = &routing.topology.datanodes[dn].database;
                let name = format!("{}.{}", quote_ident(db), quote_ident(&physical));
                let list = per_dn.entry(dn).or_default();
                match &item.alias {
                    Some(a) => list.push((
                        name.clone(),
                        format!(" AS {} {}", quote_ident(a), item.mode),
                    )),
                    None => {
                        list.push((name.clone(), format!(" {}", item.mode)));
                        // Reads of a table-per-shard table name the physical table with the
                        // logical name as its alias (`ledger_00 AS ledger`): lock that too.
                        // Only one table of a statement may carry an alias, so a datanode
                        // with several of its physical tables locks them by name only (a read
                        // there then gets 1100).
                        if physical != item.table && on(dn) == 1 {
                            list.push((
                                name,
                                format!(" AS {} {}", quote_ident(&item.table), item.mode),
                            ));
                        }
                    }
                }
            }
        }
        if self.txn_begin.is_some() || self.conns.in_transaction() {
            self.end_transaction(true).await?;
        }
        self.unlock_tables().await?;
        self.lock_on_datanodes(routing, per_dn, &tail).await?;
        self.table_locks_read = items.iter().all(|i| i.mode.starts_with("READ"));
        self.send_ok(reply_seq).await
    }

    /// Takes `per_dn`'s locks (`LOCK TABLES <list><tail>` on each datanode, in datanode
    /// order), or none of them.
    async fn lock_on_datanodes(
        &mut self,
        routing: &Routing,
        per_dn: BTreeMap<DatanodeId, Vec<LockEntry>>,
        tail: &str,
    ) -> Result<()> {
        if per_dn.len() > 1 {
            self.admit(routing).await?;
        }
        let mut locked: Vec<DatanodeId> = Vec::new();
        for (dn, mut list) in per_dn {
            list.sort();
            list.dedup();
            let items: Vec<String> = list
                .iter()
                .map(|(name, how)| format!("{name}{how}"))
                .collect();
            let stmt = format!("LOCK TABLES {}{tail}", items.join(", "));
            let r = match self.touch(routing, dn).await {
                Ok(i) => {
                    let h = &mut self.conns.held[i];
                    let r = match h.conn.sql_bytes(&stmt).map(std::borrow::Cow::into_owned) {
                        Ok(bytes) => h.conn.command(COM_QUERY, &bytes).await,
                        Err(e) => Err(e),
                    };
                    if r.is_ok() {
                        h.table_locks = true;
                        let mut names: Vec<String> =
                            list.into_iter().map(|(name, _)| name).collect();
                        names.dedup();
                        h.locked_tables = names;
                    }
                    r.map(|_| ())
                }
                Err(e) => Err(e),
            };
            if let Err(e) = r {
                // None or all: what was locked already is released.
                self.table_locks = locked;
                let _ = self.unlock_tables().await;
                return Err(match e {
                    Error::BackendIo(_) => Error::lost_backend(),
                    e => e,
                });
            }
            locked.push(dn);
        }
        self.table_locks = locked;
        Ok(())
    }

    /// FLUSH TABLES WITH READ LOCK: a READ lock on every physical table of the logical schemas
    /// the user may use (all of them for a user not limited to some), taken as LOCK TABLES
    /// takes its locks (same order, none or all), released by UNLOCK TABLES. Writes through
    /// other sessions wait, as under a global read lock; this session reads the locked tables
    /// only (1100 otherwise), as under LOCK TABLES, and START TRANSACTION releases the locks.
    pub(super) async fn flush_tables_with_read_lock(
        &mut self,
        routing: &Routing,
        reply_seq: u8,
    ) -> Result<()> {
        if self.txn_begin.is_some() || self.conns.in_transaction() {
            self.end_transaction(true).await?;
        }
        self.unlock_tables().await?;
        let mut per_dn: BTreeMap<DatanodeId, Vec<LockEntry>> = BTreeMap::new();
        for (dn, tables) in self.tables_of_user_schemas(routing).await? {
            let db = &routing.topology.datanodes[dn].database;
            let shards_here = |logical: &str| {
                tables
                    .iter()
                    .filter(|(_, l)| l.as_deref() == Some(logical))
                    .count()
            };
            let list = per_dn.entry(dn).or_default();
            for (table, logical) in &tables {
                let name = format!("{}.{}", quote_ident(db), quote_ident(table));
                list.push((name.clone(), " READ".to_string()));
                // As LOCK TABLES does: reads name a lone physical table of another name with
                // the logical name as its alias.
                if let Some(logical) = logical
                    && !logical.eq_ignore_ascii_case(table)
                    && shards_here(logical) == 1
                {
                    list.push((name, format!(" AS {} READ", quote_ident(logical))));
                }
            }
        }
        per_dn.retain(|_, l| !l.is_empty());
        self.lock_on_datanodes(routing, per_dn, "").await?;
        self.table_locks_read = true;
        self.send_ok(reply_seq).await
    }

    /// The existing physical tables of the logical schemas the user may use (every schema
    /// for a user not limited to some), per datanode in datanode order: each with the logical
    /// table it is a shard or copy of (`None`: an unlisted table of a schema's default
    /// datanode). Read on the session's connections, before anything is locked.
    async fn tables_of_user_schemas(
        &mut self,
        routing: &Routing,
    ) -> Result<BTreeMap<DatanodeId, Vec<(String, Option<String>)>>> {
        let allowed = self
            .rt
            .config
            .user(&self.user)
            .and_then(|u| u.schemas.clone());
        let schemas: Vec<_> = routing
            .topology
            .schemas
            .values()
            .filter(|ls| {
                allowed
                    .as_ref()
                    .is_none_or(|a| a.iter().any(|s| s.eq_ignore_ascii_case(&ls.name)))
            })
            .collect();
        // (datanode, physical table) -> the logical table it is a shard of, for every
        // configured table; datanodes that are a schema's default hold its unlisted tables.
        let mut owned: BTreeMap<(DatanodeId, String), String> = BTreeMap::new();
        let mut defaults: Vec<DatanodeId> = Vec::new();
        for ls in &schemas {
            for t in ls.tables.values() {
                for (dn, p) in placements(ls, t.name()).unwrap_or_default() {
                    owned.insert((dn, p.to_lowercase()), t.name().to_string());
                }
            }
            defaults.extend(ls.default_datanode);
        }
        let mut nodes: Vec<DatanodeId> = owned
            .keys()
            .map(|(d, _)| *d)
            .chain(defaults.iter().copied())
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        let mut out = BTreeMap::new();
        for dn in nodes {
            // The tables that exist there (a configured table not created yet is left out).
            let db = routing.topology.datanodes[dn].database.clone();
            let mut here = Vec::new();
            for table in self.base_tables(routing, dn, &db).await? {
                match owned.get(&(dn, table.to_lowercase())) {
                    Some(logical) => here.push((table, Some(logical.clone()))),
                    None if defaults.contains(&dn) => here.push((table, None)),
                    None => {}
                }
            }
            out.insert(dn, here);
        }
        Ok(out)
    }

    /// `FLUSH [NO_WRITE_TO_BINLOG | LOCAL] TABLES [t, ...]`, as one server runs it for a user
    /// confined to the logical schemas: the physical tables of the tables named (or, without
    /// names, of every table of the user's schemas) flushed with one `FLUSH TABLES db.t, ...`
    /// per datanode, in datanode order; never a FLUSH TABLES of a whole server. It commits an
    /// open transaction first, as FLUSH does. Under the session's table locks it runs on the
    /// locked connections (without names: over the tables locked there), where MariaDB
    /// flushes locked tables (1099 for READ-locked ones, 1100 for a named table not locked, as
    /// on one server).
    pub(super) async fn flush_tables(
        &mut self,
        routing: &Routing,
        local: bool,
        tables: Vec<(Option<String>, String)>,
        reply_seq: u8,
    ) -> Result<()> {
        let mut named: BTreeMap<DatanodeId, Vec<String>> = BTreeMap::new();
        for (k, (schema, table)) in tables.iter().enumerate() {
            // As the server answers `FLUSH TABLES t, t`.
            if tables[..k].iter().any(|(s, t)| {
                t == table
                    && s.as_deref().or(self.logical.as_deref())
                        == schema.as_deref().or(self.logical.as_deref())
            }) {
                return Err(Error::reply(
                    1066,
                    b"42000",
                    format!("Not unique table/alias: '{table}'"),
                ));
            }
            let Some(schema_name) = schema.as_deref().or(self.logical.as_deref()) else {
                return Err(Error::reply(1046, b"3D000", "No database selected"));
            };
            self.check_schema_allowed(schema_name)?;
            let Some(ls) = routing.topology.schema(schema_name) else {
                return Err(Error::unknown_database(schema_name));
            };
            // A table that exists nowhere is nothing to flush, as on one server.
            for (dn, physical) in placements(ls, table).unwrap_or_default() {
                let db = &routing.topology.datanodes[dn].database;
                let name = format!("{}.{}", quote_ident(db), quote_ident(&physical));
                named.entry(dn).or_default().push(name);
            }
        }
        let head = if local {
            "FLUSH NO_WRITE_TO_BINLOG TABLES"
        } else {
            "FLUSH TABLES"
        };
        let mut per_dn: BTreeMap<DatanodeId, String> = BTreeMap::new();
        if !self.table_locks.is_empty() {
            if tables.is_empty() {
                // The tables this session locked there (a FLUSH TABLES without names would
                // also drop the server's other unused tables from its cache).
                for h in self.conns.held.iter().filter(|h| h.table_locks) {
                    if !h.locked_tables.is_empty() {
                        per_dn.insert(h.dn, format!("{head} {}", h.locked_tables.join(", ")));
                    }
                }
            } else {
                for (dn, mut list) in named {
                    if !self.table_locks.contains(&dn) {
                        return Err(not_locked(routing, dn));
                    }
                    list.sort();
                    list.dedup();
                    per_dn.insert(dn, format!("{head} {}", list.join(", ")));
                }
            }
        } else {
            if self.txn_begin.is_some() || self.conns.in_transaction() {
                self.end_transaction(true).await?;
            }
            let lists = if tables.is_empty() {
                let mut all = BTreeMap::new();
                for (dn, here) in self.tables_of_user_schemas(routing).await? {
                    let db = &routing.topology.datanodes[dn].database;
                    let names: Vec<String> = here
                        .iter()
                        .map(|(t, _)| format!("{}.{}", quote_ident(db), quote_ident(t)))
                        .collect();
                    all.insert(dn, names);
                }
                all
            } else {
                named
            };
            for (dn, mut list) in lists {
                // An empty list would flush the whole server.
                if list.is_empty() {
                    continue;
                }
                list.sort();
                list.dedup();
                per_dn.insert(dn, format!("{head} {}", list.join(", ")));
            }
            if per_dn.len() > 1 {
                self.admit(routing).await?;
            }
        }
        for (dn, stmt) in per_dn {
            let i = self.touch(routing, dn).await?;
            let r = self.conns.held[i]
                .conn
                .command(COM_QUERY, stmt.as_bytes())
                .await;
            if let Err(e) = r {
                return Err(match e {
                    Error::BackendIo(_) => Error::lost_backend(),
                    e => e,
                });
            }
        }
        self.send_ok(reply_seq).await
    }

    /// The base tables of database `db` on datanode `dn` (read on the session's connection
    /// there, before any lock is taken).
    async fn base_tables(
        &mut self,
        routing: &Routing,
        dn: DatanodeId,
        db: &str,
    ) -> Result<Vec<String>> {
        let t = shoal_router::plan::Target {
            datanode: dn,
            sql: format!(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{}' \
                 AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
                db.replace('\\', "\\\\").replace('\'', "''")
            )
            .into(),
            params: Default::default(),
            qualified: true,
        };
        let writes = std::mem::replace(&mut self.conns.maybe_writes, false);
        let r = self.small_answer(routing, &t).await;
        self.conns.maybe_writes = writes;
        Ok(r?
            .1
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .collect())
    }

    /// Releases the session's table locks on every datanode (UNLOCK TABLES, and the implicit
    /// unlock of START TRANSACTION and LOCK TABLES). A connection that fails to unlock is
    /// closed, which releases its locks.
    pub(crate) async fn unlock_tables(&mut self) -> Result<()> {
        self.table_locks.clear();
        let mut broken = Vec::new();
        for h in self.conns.held.iter_mut() {
            if !h.table_locks {
                continue;
            }
            h.table_locks = false;
            h.locked_tables.clear();
            if h.conn.command(COM_QUERY, b"UNLOCK TABLES").await.is_err() {
                broken.push(h.dn);
            }
        }
        for dn in broken {
            self.conns.remove(dn);
        }
        Ok(())
    }

    /// A read needing a second connection to a locked datanode (table-per-shard) would read
    /// without the session's locks.
    pub(super) fn refuse_extra_connection_under_locks(&self) -> Result<()> {
        if self.table_locks.is_empty() {
            return Ok(());
        }
        Err(unsupported(
            "a read over several tables of one datanode (table-per-shard) under LOCK TABLES",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_router::sql::lex::tokenize;

    fn parse(sql: &str) -> Option<(Vec<LockItem>, String)> {
        parse_lock_tables(sql, &tokenize(sql).expect("tokens"))
    }

    fn item(schema: Option<&str>, table: &str, alias: Option<&str>, mode: &str) -> LockItem {
        LockItem {
            schema: schema.map(str::to_string),
            table: table.into(),
            alias: alias.map(str::to_string),
            mode: mode.into(),
        }
    }

    #[test]
    fn reads_flush_statements() {
        let flush = |sql: &str| parse_flush(sql, &tokenize(sql).unwrap());
        for sql in [
            "FLUSH TABLES WITH READ LOCK",
            "flush /*!40101 LOCAL */ tables with read lock;",
            "FLUSH NO_WRITE_TO_BINLOG TABLE WITH READ LOCK",
        ] {
            assert_eq!(flush(sql), Flush::TablesWithReadLock, "{sql}");
        }
        let tables = |local: bool, names: &[(Option<&str>, &str)]| Flush::Tables {
            local,
            tables: names
                .iter()
                .map(|(s, t)| (s.map(str::to_string), t.to_string()))
                .collect(),
        };
        assert_eq!(flush("FLUSH TABLES"), tables(false, &[]));
        assert_eq!(flush("flush /*!40101 LOCAL */ tables;"), tables(true, &[]));
        assert_eq!(
            flush("FLUSH NO_WRITE_TO_BINLOG TABLE t, shop.`u v`"),
            tables(true, &[(None, "t"), (Some("shop"), "u v")])
        );
        for (sql, named) in [
            (
                "FLUSH TABLES t WITH READ LOCK",
                "FLUSH TABLES t WITH READ LOCK",
            ),
            (
                "flush tables t, u for export;",
                "flush tables t, u for export",
            ),
            (
                "FLUSH TABLES WITH READ LOCK AND DISABLE CHECKPOINT",
                "FLUSH TABLES WITH READ LOCK AND DISABLE CHECKPOINT",
            ),
            ("FLUSH PRIVILEGES", "FLUSH PRIVILEGES"),
            ("FLUSH LOCAL LOGS, STATUS", "FLUSH LOCAL LOGS, STATUS"),
            ("FLUSH TABLES t,", "FLUSH TABLES t,"),
        ] {
            assert_eq!(flush(sql), Flush::Other(named.to_string()), "{sql}");
        }
    }

    #[test]
    fn reads_lock_lists() {
        assert_eq!(
            parse("LOCK TABLES t READ").unwrap().0,
            vec![item(None, "t", None, "READ")]
        );
        assert_eq!(
            parse("lock table `t` as a read local, shop.u write, v b LOW_PRIORITY WRITE;")
                .unwrap()
                .0,
            vec![
                item(None, "t", Some("a"), "READ LOCAL"),
                item(Some("shop"), "u", None, "WRITE"),
                item(None, "v", Some("b"), "LOW_PRIORITY WRITE"),
            ]
        );
        let (items, tail) = parse("LOCK TABLES t WRITE CONCURRENT WAIT 5").unwrap();
        assert_eq!(items, vec![item(None, "t", None, "WRITE CONCURRENT")]);
        assert_eq!(tail, " WAIT 5");
        assert_eq!(parse("LOCK TABLES t READ NOWAIT").unwrap().1, " NOWAIT");
        for bad in [
            "LOCK TABLES",
            "LOCK TABLES t",
            "LOCK TABLES t READ,",
            "LOCK TABLES t READ u WRITE",
            "LOCK TABLES t READ; SELECT 1",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
