//! UPDATEs that assign a sharded table's shard key and move rows to another shard
//! ([`KeyMove`], Vitess's update of a changed primary vindex). In one transaction over the
//! datanodes involved (the client's, or one opened and committed here), on each source shard:
//!
//! 1. the rows the statement's WHERE matches are locked and their primary keys read
//!    (`SELECT <pk> FROM t WHERE ... FOR UPDATE`), on every source shard before anything
//!    moves (a row moved onto a source shard is not matched a second time there);
//! 2. the client's UPDATE runs there on exactly those rows (`... WHERE <pk> IN (...)`): the
//!    backend evaluates every assignment as MariaDB does, and its matched (CLIENT_FOUND_ROWS)
//!    or changed count is what the client gets, summed over the shards;
//! 3. the rows are read back; each whose new key value lands on another shard is deleted here
//!    and inserted on that shard with every stored column as read.
//!
//! Values are copied exactly: strings and binary columns as `X'..'` of `HEX(col)` (the bytes
//! in the column's own character set, no conversion either way), numbers and temporal values
//! as MariaDB prints them, generated columns left to the new shard to compute. A statement
//! that fails part-way rolls back the transaction it ran in, so no half-moved row survives.
//! Refused (1235, before anything is written) when the rows cannot be re-read exactly: a
//! table without a primary key, an UPDATE that also assigns another primary key column, or
//! sets a primary-key shard key to an expression. A table with triggers or referenced by
//! foreign keys is updated in place as long as no row changes shard; a row that would is
//! refused (1235), the statement's transaction rolled back.
//! Memory: the primary keys of the matched rows of one shard, and one batch of rows.

use shoal_router::RouterError;
use shoal_router::plan::KeyMove;

use super::reader::{WriteDone, read_write_result};
use crate::backend::conn::BackendConn;
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::runtime::routing::Routing;
use crate::wire::command::COM_QUERY;

/// Rows per UPDATE / read-back / DELETE / INSERT statement.
const BATCH: usize = 500;

/// No row cap (`sql_select_limit` of the session must not cut the lock).
const ALL_ROWS: &str = "\nLIMIT 18446744073709551615";

/// How a column's value is read back and written again as SQL.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Enc {
    /// Printed by MariaDB as a number: written as printed.
    Number,
    /// BIT: read as `c+0`, written as that number.
    Bit,
    /// Temporal and other types printed in a quote-free form: written quoted.
    Quoted,
    /// Strings, binary, ENUM/SET, JSON, geometry: `HEX(c)`, written `X'..'`.
    Hex,
}

#[derive(Debug)]
struct Column {
    name: String,
    enc: Enc,
}

/// What a move needs to know of the table, read from the source datanode.
#[derive(Debug)]
struct Meta {
    /// Stored columns (generated ones left out).
    columns: Vec<Column>,
    /// Indices (into `columns`) of the primary key's columns.
    pk: Vec<usize>,
    /// Index of the shard key column.
    key: usize,
    /// Why rows of this table cannot move (triggers, foreign keys referencing it), checked only
    /// when a row would: updated in place, such a table's rows behave as in MariaDB.
    blocker: Option<RouterError>,
}

fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

fn quote_str(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

impl Meta {
    /// The select-list expression reading column `c` in its encoding.
    fn read(&self, c: usize) -> String {
        let col = &self.columns[c];
        let q = quote_ident(&col.name);
        match col.enc {
            Enc::Number | Enc::Quoted => q,
            Enc::Bit => format!("{q}+0"),
            Enc::Hex => format!("HEX({q})"),
        }
    }

    /// Value `v` of column `c`, read with [`Meta::read`], as SQL.
    fn write(&self, c: usize, v: &Option<Vec<u8>>) -> String {
        let Some(v) = v else {
            return "NULL".into();
        };
        let text = String::from_utf8_lossy(v);
        match self.columns[c].enc {
            Enc::Number | Enc::Bit => text.into_owned(),
            Enc::Quoted => quote_str(&text),
            Enc::Hex => format!("X'{text}'"),
        }
    }

    /// `(pk...) IN ((...), ...)` over rows whose first `pk.len()` values are the primary key
    /// (read with [`Meta::read`]); `key_value` replaces the shard key's value where given.
    fn pk_in(&self, rows: &[Vec<Option<Vec<u8>>>], key_value: Option<&str>) -> String {
        let cols: Vec<String> = self
            .pk
            .iter()
            .map(|&c| quote_ident(&self.columns[c].name))
            .collect();
        let tuples: Vec<String> = rows
            .iter()
            .map(|r| {
                let vals: Vec<String> = self
                    .pk
                    .iter()
                    .enumerate()
                    .map(|(k, &c)| match key_value {
                        Some(kv) if c == self.key => kv.to_string(),
                        _ => self.write(c, &r[k]),
                    })
                    .collect();
                format!("({})", vals.join(", "))
            })
            .collect();
        format!("({}) IN ({})", cols.join(", "), tuples.join(", "))
    }
}

fn refused(km: &KeyMove, what: impl std::fmt::Display) -> RouterError {
    RouterError::unsupported(format!(
        "This version of Shoal doesn't yet support 'UPDATE of shard key column {}.{} {what}'",
        km.table, km.key
    ))
}

/// The table's stored columns, primary key and shard key, or why a move cannot be exact.
async fn table_meta(
    conn: &mut BackendConn,
    km: &KeyMove,
    physical: &str,
) -> Result<std::result::Result<(Meta, bool), RouterError>> {
    let name = quote_str(physical);
    let cols = conn
        .query_rows(&format!(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_KEY, IS_GENERATED FROM \
             information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = {name} \
             ORDER BY ORDINAL_POSITION"
        ))
        .await?;
    let text = |v: &Option<Vec<u8>>| {
        v.as_deref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let mut columns = Vec::new();
    let mut pk = Vec::new();
    let mut key = None;
    let mut key_numeric = false;
    for r in &cols {
        let (cname, ty, ckey, generated) = (text(&r[0]), text(&r[1]), text(&r[2]), text(&r[3]));
        if generated.eq_ignore_ascii_case("ALWAYS") {
            continue;
        }
        let ty = ty.to_ascii_lowercase();
        let enc = match ty.as_str() {
            "tinyint" | "smallint" | "mediumint" | "int" | "bigint" | "decimal" | "float"
            | "double" | "year" => Enc::Number,
            "bit" => Enc::Bit,
            "date" | "datetime" | "timestamp" | "time" | "uuid" | "inet4" | "inet6" => Enc::Quoted,
            _ => Enc::Hex,
        };
        let i = columns.len();
        if cname.eq_ignore_ascii_case(&km.key) {
            key = Some(i);
            key_numeric = matches!(enc, Enc::Number | Enc::Bit);
        }
        if ckey == "PRI" {
            pk.push(i);
        }
        columns.push(Column { name: cname, enc });
    }
    let Some(key) = key else {
        return Ok(Err(refused(
            km,
            "on a table whose columns could not be read",
        )));
    };
    if pk.is_empty() {
        return Ok(Err(refused(
            km,
            "moving rows of a table without a primary key (its rows cannot be re-read exactly)",
        )));
    }
    for &c in &pk {
        let name = &columns[c].name;
        if c != key && km.assigned.iter().any(|a| a.eq_ignore_ascii_case(name)) {
            return Ok(Err(refused(
                km,
                format!("moving rows while also assigning primary key column {name}"),
            )));
        }
    }
    if pk.contains(&key) && km.value.is_none() {
        return Ok(Err(refused(
            km,
            "to an expression while it is part of the primary key (moved rows cannot be re-read)",
        )));
    }
    let counts = conn
        .query_rows(&format!(
            "SELECT (SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE \
             EVENT_OBJECT_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = {name}), \
             (SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE \
             UNIQUE_CONSTRAINT_SCHEMA = DATABASE() AND REFERENCED_TABLE_NAME = {name})"
        ))
        .await?;
    let count = |k: usize| {
        counts
            .first()
            .and_then(|r| r.get(k))
            .map(text)
            .is_some_and(|c| c != "0")
    };
    let blocker = if count(0) {
        Some(refused(
            km,
            "moving rows of a table with triggers (they would see a DELETE and an INSERT)",
        ))
    } else if count(1) {
        Some(refused(
            km,
            "moving rows of a table referenced by foreign keys",
        ))
    } else {
        None
    };
    Ok(Ok((
        Meta {
            columns,
            pk,
            key,
            blocker,
        },
        key_numeric,
    )))
}

impl Cursor {
    /// Runs a [`KeyMove`]: the client gets one OK with the UPDATE's matched or changed rows.
    pub(super) async fn run_key_move(
        &mut self,
        routing: &Routing,
        km: &KeyMove,
        reply_seq: u8,
    ) -> Result<()> {
        let autocommit_off = self
            .want
            .var("autocommit")
            .is_some_and(|v| v.eq_ignore_ascii_case("OFF") || v == "0");
        let in_txn = self.txn_begin.is_some() || autocommit_off;
        let Some(first) = km.sources.first() else {
            return self.send_ok_with(reply_seq, 0, 0, 0).await;
        };
        if !in_txn {
            self.txn_begin = Some("START TRANSACTION".to_string());
            self.txn_plain = None;
        }
        if let Err(e) = self.admit(routing).await {
            if !in_txn {
                self.txn_begin = None;
            }
            return Err(e);
        }
        // The table's definition, before anything is written: a refusal leaves no trace.
        let (dn, physical) = km.shards[first.shard].clone();
        let meta = async {
            let i = self.touch(routing, dn).await?;
            table_meta(&mut self.conns.held[i].conn, km, &physical).await
        }
        .await;
        let meta = match meta {
            Ok(Ok(m)) => Ok(m),
            Ok(Err(refusal)) => Err(self.refuse(&refusal)),
            Err(e) => Err(e),
        };
        let (meta, key_numeric) = match meta {
            Ok(m) => m,
            Err(e) => {
                if !in_txn {
                    let _ = self.end_transaction(false).await;
                }
                return Err(e);
            }
        };
        match self.move_rows(routing, km, &meta, key_numeric).await {
            Ok(done) => {
                if !in_txn {
                    self.end_transaction(true).await?;
                }
                self.diag.known = true;
                self.diag.row_count = done.affected as i64;
                self.send_ok_with(reply_seq, done.affected, 0, done.warnings)
                    .await
            }
            Err(e) => {
                // Part of the statement may be done: the transaction it ran in goes, so no row
                // is left half moved.
                let _ = self.end_transaction(false).await;
                self.refused = false;
                Err(match e {
                    Error::Reply {
                        code,
                        state,
                        message,
                    } if in_txn => Error::Reply {
                        code,
                        state,
                        message: format!(
                            "{message}; the transaction was rolled back on every datanode"
                        ),
                    },
                    e => e,
                })
            }
        }
    }

    /// Steps 1-3 of the module's description on every source shard.
    async fn move_rows(
        &mut self,
        routing: &Routing,
        km: &KeyMove,
        meta: &Meta,
        key_numeric: bool,
    ) -> Result<WriteDone> {
        let mut total = WriteDone::default();
        let pk_list: Vec<String> = meta.pk.iter().map(|&c| meta.read(c)).collect();
        let all_list: Vec<String> = (0..meta.columns.len()).map(|c| meta.read(c)).collect();
        let names: Vec<String> = meta.columns.iter().map(|c| quote_ident(&c.name)).collect();
        let new_key = km.value_sql();
        // Every source's rows are locked and listed before any moves: a row moved onto a
        // source shard must not be matched again there.
        let mut lists = Vec::with_capacity(km.sources.len());
        for src in &km.sources {
            let dn = km.shards[src.shard].0;
            let i = self.touch(routing, dn).await?;
            let locked = self.conns.held[i]
                .conn
                .query_rows(&format!(
                    "SELECT {}{}{ALL_ROWS}\nFOR UPDATE",
                    pk_list.join(", "),
                    src.select_from
                ))
                .await?;
            lists.push(locked);
        }
        for (src, locked) in km.sources.iter().zip(lists) {
            let (dn, physical) = km.shards[src.shard].clone();
            let table = quote_ident(&physical);
            for batch in locked.chunks(BATCH) {
                let i = self.touch(routing, dn).await?;
                let update = format!("{}\nWHERE {}", src.update_head, meta.pk_in(batch, None));
                let done = self.write_on(i, &update).await?;
                total.affected = total.affected.saturating_add(done.affected);
                total.warnings = total.warnings.saturating_add(done.warnings);
                // Read back: primary key first, then every stored column, then the key as
                // MariaDB prints it (to place the row).
                let reread = format!(
                    "SELECT {}, {}, {} FROM {table} WHERE {}{ALL_ROWS}",
                    pk_list.join(", "),
                    all_list.join(", "),
                    quote_ident(&meta.columns[meta.key].name),
                    meta.pk_in(batch, new_key.as_deref())
                );
                let rows = self.conns.held[i].conn.query_rows(&reread).await?;
                let mut moving: std::collections::BTreeMap<usize, Vec<&Vec<Option<Vec<u8>>>>> =
                    Default::default();
                for r in &rows {
                    let key = r.last().and_then(|v| v.as_deref());
                    let key = key.map(String::from_utf8_lossy);
                    let to = km
                        .shard_of(key.as_deref(), key_numeric)
                        .map_err(|e| super::refusal(&e))?;
                    if to != src.shard {
                        moving.entry(to).or_default().push(r);
                    }
                }
                if let Some(blocker) = &meta.blocker
                    && !moving.is_empty()
                {
                    return Err(super::refusal(blocker));
                }
                let npk = meta.pk.len();
                for (to, rows) in moving {
                    let owned: Vec<Vec<Option<Vec<u8>>>> =
                        rows.iter().map(|r| r[..npk].to_vec()).collect();
                    let delete = format!("DELETE FROM {table} WHERE {}", meta.pk_in(&owned, None));
                    let i = self.touch(routing, dn).await?;
                    self.write_on(i, &delete).await?;
                    let values: Vec<String> = rows
                        .iter()
                        .map(|r| {
                            let vals: Vec<String> = (0..meta.columns.len())
                                .map(|c| meta.write(c, &r[npk + c]))
                                .collect();
                            format!("({})", vals.join(", "))
                        })
                        .collect();
                    let (to_dn, to_physical) = km.shards[to].clone();
                    let insert = format!(
                        "INSERT INTO {} ({}) VALUES {}",
                        quote_ident(&to_physical),
                        names.join(", "),
                        values.join(", ")
                    );
                    let j = self.touch(routing, to_dn).await?;
                    self.write_on(j, &insert).await?;
                }
            }
        }
        Ok(total)
    }

    /// A write of Shoal's own on held connection `i`: its OK, the session learning from it.
    async fn write_on(&mut self, i: usize, sql: &str) -> Result<WriteDone> {
        let conn = &mut self.conns.held[i].conn;
        let bytes = conn.sql_bytes(sql)?.into_owned();
        conn.io.write_command(COM_QUERY, &bytes);
        conn.io.flush().await.map_err(Error::BackendIo)?;
        let done = read_write_result(conn).await?;
        let tracked = done.tracked.clone();
        self.learn(i, Some(done.status), None, &tracked);
        Ok(done)
    }
}
