//! A SELECT gathered on one datanode ([`RoutePlan::Gather`]): the rows of each table it reads
//! are copied into a TEMPORARY table on a connection of Shoal's own to one datanode (the
//! scratch), and the statement runs there over the copies; its result goes to the client with
//! the logical schema and table names in its column definitions.
//!
//! Exactness: MariaDB evaluates the whole statement; Shoal only copies rows, each value written
//! as a literal the copy's column (declared as the table's own, from
//! `information_schema.COLUMNS`) stores as the value it was read as:
//! - numbers as their text; FLOAT read as `CAST(c AS DOUBLE)` (the text protocol prints a
//!   FLOAT rounded to 6 digits; a DOUBLE's text reads back exactly, and stored into the FLOAT
//!   column it is the same FLOAT again);
//! - TIMESTAMP read as `UNIX_TIMESTAMP(c)` and written `FROM_UNIXTIME(v)` at time_zone UTC (the
//!   session's local time is ambiguous in the hour a clock goes back);
//! - DATE, DATETIME, TIME as their text; binary strings, BIT and geometry as `X'..'`; text,
//!   ENUM and SET read as `CAST(c AS BINARY)` (the stored bytes, whatever
//!   `character_set_results` the session has) and written `_charset X'..'` in the column's own
//!   charset;
//! - the INSERTs run with `sql_mode=''`, so that stored values such as a zero date are copied
//!   as they are (the statement itself runs in the session's sql_mode).
//!
//! The fetches run on the session's connections (inside a transaction, its snapshot and its own
//! writes); the scratch is never the transaction's connection (a temporary table's statements
//! would enter its XA branch), is set to `binlog_format=ROW` where the account may (temporary
//! tables are then not binlogged), and is closed, never pooled, after the statement.

use mysql_common::constants::ColumnType;
use shoal_router::RouterError;
use shoal_router::plan::gather::{BIND_BATCH, BIND_MAX_VALUES, Bind, Copy, Gather, quote};
use shoal_router::plan::{Merge, RoutePlan, Target};
use shoal_router::topology::DatanodeId;

use super::Use;
use super::reader::{ResultStream, Row};
use super::request::Request;
use crate::backend::pool::{PooledConn, align_to};
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::merge::{Column, parse_column};
use crate::runtime::routing::Routing;
use crate::wire::command::{COM_QUERY, COM_STMT_EXECUTE};
use crate::wire::messages::{err_payload, put_lenenc_bytes, read_lenenc_bytes};
use crate::wire::response::{Event, Expect};
use crate::wire::resultset::ResultSetWriter;

/// Rows per INSERT into a copy, and the bytes past which a batch is sent sooner.
const BATCH_ROWS: usize = 500;
const BATCH_BYTES: usize = 1 << 20;

/// One column of a copied table, as `information_schema.COLUMNS` declares it.
#[derive(Debug, Clone)]
struct Declared {
    name: String,
    column_type: String,
    data_type: String,
    charset: Option<String>,
    collation: Option<String>,
    nullable: bool,
    invisible: bool,
}

impl Declared {
    /// The column in CREATE TEMPORARY TABLE.
    fn definition(&self) -> String {
        let mut d = format!("{} {}", quote(&self.name), self.column_type);
        if let (Some(cs), Some(co)) = (&self.charset, &self.collation) {
            d.push_str(&format!(" CHARACTER SET {cs} COLLATE {co}"));
        }
        d.push_str(if self.nullable { " NULL" } else { " NOT NULL" });
        if self.invisible {
            d.push_str(" INVISIBLE");
        }
        d
    }

    /// A column of characters in a charset (read as bytes, written with an introducer).
    fn text(&self) -> bool {
        self.charset.is_some()
            && matches!(
                self.data_type.as_str(),
                "char"
                    | "varchar"
                    | "tinytext"
                    | "text"
                    | "mediumtext"
                    | "longtext"
                    | "enum"
                    | "set"
                    | "json"
            )
    }

    /// An integer column (compared with an integer literal exactly as with another integer
    /// column).
    fn integer(&self) -> bool {
        matches!(
            self.data_type.as_str(),
            "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint"
        )
    }

    /// A column whose values make a short index key (numbers, dates, strings of at most 191
    /// characters).
    fn short_key(&self) -> bool {
        let chars = || {
            let t = &self.column_type;
            t.find('(')
                .and_then(|a| t[a + 1..].find(')').map(|b| &t[a + 1..a + 1 + b]))
                .and_then(|n| n.parse::<u32>().ok())
        };
        match self.data_type.as_str() {
            "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint" | "decimal"
            | "numeric" | "year" | "date" | "datetime" | "timestamp" | "time" | "float"
            | "double" => true,
            "char" | "varchar" | "binary" | "varbinary" => chars().is_some_and(|n| n <= 191),
            _ => false,
        }
    }

    fn unsigned(&self) -> bool {
        self.column_type.to_ascii_lowercase().contains("unsigned")
    }

    /// The column in the fetch's select list.
    fn fetched(&self) -> String {
        let c = quote(&self.name);
        match self.data_type.as_str() {
            "float" => format!("CAST({c} AS DOUBLE)"),
            "timestamp" => format!("UNIX_TIMESTAMP({c})"),
            // Text as its stored bytes, whatever character_set_results the session has: written
            // back with its charset's introducer, it is the same string.
            _ if self.text() => format!("CAST({c} AS BINARY)"),
            _ => c,
        }
    }
}

/// What the statement copied so far, against `server.gather_max_rows` / `_bytes`.
struct Budget {
    rows: usize,
    bytes: usize,
    max_rows: usize,
    max_bytes: usize,
}

impl Budget {
    fn refusal(&self) -> String {
        format!(
            "This version of Shoal doesn't yet support 'a statement gathered on one datanode \
             copying more than {} rows or {} bytes (server.gather_max_rows, \
             server.gather_max_bytes)'",
            self.max_rows, self.max_bytes
        )
    }
}

impl Cursor {
    /// Runs `g`: copies, then the statement on the scratch, its result relayed.
    pub(super) async fn run_gather(
        &mut self,
        routing: &Routing,
        g: &Gather,
        req: &Request<'_>,
        reply_seq: u8,
    ) -> Result<()> {
        let mut scratch = self.scratch_connection(routing, g).await?;
        // KILL [QUERY] of this session reaches the scratch's statements too.
        self.publish_with(Some(&scratch));
        let mut budget = Budget {
            rows: 0,
            bytes: 0,
            max_rows: self.rt.config.gather_max_rows,
            max_bytes: self.rt.config.gather_max_bytes,
        };
        let mut copied = Ok(());
        // The values of each copy's column a later copy is bound by.
        let mut keys: Vec<Option<KeySet>> = vec![None; g.copies.len()];
        for (k, c) in g.copies.iter().enumerate() {
            let wanted = g
                .copies
                .iter()
                .filter_map(|o| o.bind.as_ref())
                .find(|b| b.source == k)
                .map(|b| b.source_column.as_str());
            let bound = c
                .bind
                .as_ref()
                .and_then(|b| keys.get(b.source).and_then(Option::as_ref).map(|s| (b, s)));
            let bound = bound.map(|(b, s)| (b, s.clone()));
            let before = (budget.rows, budget.bytes);
            let mut set = self
                .copy_table(
                    routing,
                    &mut scratch,
                    c,
                    &mut budget,
                    wanted,
                    bound.clone(),
                    true,
                )
                .await;
            if let Err(Error::Reply { code: 1062, .. }) = set {
                // A unique key each shard enforces over its own rows only repeats across
                // shards: copied again with its keys as plain ones (the rows are the answer's;
                // only the plan MariaDB makes over them may differ from one over the table).
                (budget.rows, budget.bytes) = before;
                set = match run_text(&mut scratch, &format!("DROP TEMPORARY TABLE {}", c.temp))
                    .await
                {
                    Ok(()) => {
                        self.copy_table(routing, &mut scratch, c, &mut budget, wanted, bound, false)
                            .await
                    }
                    Err(e) => Err(e),
                };
            }
            copied = set.map(|set| keys[k] = set);
            if copied.is_err() {
                break;
            }
        }
        if let Some(m) = &self.shared.observe.metrics {
            use std::sync::atomic::Ordering::Relaxed;
            m.gathered_rows.fetch_add(budget.rows as u64, Relaxed);
            m.gathered_bytes.fetch_add(budget.bytes as u64, Relaxed);
        }
        if let Err(e) = copied {
            if e.as_reply().is_some_and(|r| r.0 == 1235) {
                self.refused = true;
            }
            // The scratch is dropped (closed, its temporary tables with it) on any error.
            drop(scratch);
            self.publish_backends();
            return Err(e);
        }
        let binary = matches!(req, Request::Execute { .. });
        let out = self
            .gather_statement(routing, &mut scratch, g, binary, reply_seq)
            .await;
        // The copies go with the connection, which is closed: it carries temporary tables and
        // a binlog_format of its own.
        drop(scratch);
        self.publish_backends();
        out
    }

    /// The columns `g`'s result has (a PREPARE's answer): the statement prepared on the
    /// scratch over empty copies.
    pub(super) async fn gather_columns(
        &mut self,
        routing: &Routing,
        g: &Gather,
    ) -> Result<Vec<Vec<u8>>> {
        let mut scratch = self.scratch_connection(routing, g).await?;
        for c in &g.copies {
            let (cols, keys) = self.declared_columns(routing, c).await?;
            run_text(&mut scratch, &create_table(c, &cols, &keys)).await?;
        }
        let (_, defs) = super::request::prepare_freeing(&mut scratch, &g.statement, true).await?;
        let logical = self.logical.clone();
        Ok(defs
            .iter()
            .map(|d| rename_column(d, g, logical.as_deref()))
            .collect())
    }

    /// A connection of Shoal's own to the scratch datanode's primary in the session's state.
    async fn scratch_connection(&mut self, routing: &Routing, g: &Gather) -> Result<PooledConn> {
        let mut conn = self.own_primary_connection(routing, g.scratch).await?;
        if let Some(at) = self.conns.deadline {
            conn.arm(at);
        }
        let db = routing.topology.datanodes[g.scratch].database.clone();
        align_to(&self.want, Some(&db), &mut conn).await?;
        // Best effort: in ROW format temporary tables are not binlogged (in MIXED, MariaDB's
        // default, every statement on them is); an account that may not set it goes on.
        let _ = conn
            .command(COM_QUERY, b"SET SESSION binlog_format = 'ROW'")
            .await;
        Ok(conn)
    }

    /// The columns and keys of `c`'s table, read from its definition's datanode.
    async fn declared_columns(
        &mut self,
        routing: &Routing,
        c: &Copy,
    ) -> Result<(Vec<Declared>, Vec<DeclaredKey>)> {
        let (dn, physical) = &c.definition;
        let db = routing.topology.datanodes[*dn].database.clone();
        let mut conn = self.own_primary_connection(routing, *dn).await?;
        if let Some(at) = self.conns.deadline {
            conn.arm(at);
        }
        let text = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"));
        let read = format!(
            "SELECT COLUMN_NAME, COLUMN_TYPE, DATA_TYPE, CHARACTER_SET_NAME, COLLATION_NAME, \
             IS_NULLABLE, EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {} AND \
             TABLE_NAME = {} ORDER BY ORDINAL_POSITION",
            text(&db),
            text(physical)
        );
        let rows = conn.query_rows(&read).await?;
        let read_keys = format!(
            "SELECT INDEX_NAME, NON_UNIQUE, COLUMN_NAME, SUB_PART, INDEX_TYPE FROM \
             information_schema.STATISTICS WHERE TABLE_SCHEMA = {} AND TABLE_NAME = {} \
             ORDER BY INDEX_NAME, SEQ_IN_INDEX",
            text(&db),
            text(physical)
        );
        let key_rows = conn.query_rows(&read_keys).await?;
        conn.release();
        let s = |v: &Option<Vec<u8>>| v.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
        let mut keys: Vec<DeclaredKey> = Vec::new();
        for r in key_rows.iter().filter(|r| r.len() == 5) {
            let name = s(&r[0]).unwrap_or_default();
            let kind = s(&r[4]).unwrap_or_default().to_ascii_uppercase();
            // A FULLTEXT or SPATIAL index changes no plan a copy's statement can have that
            // needs it to run (InnoDB's temporary tables take neither).
            if kind == "FULLTEXT" || kind == "SPATIAL" {
                continue;
            }
            let mut part = quote(&s(&r[2]).unwrap_or_default());
            if let Some(n) = s(&r[3]) {
                part.push_str(&format!("({n})"));
            }
            match keys.last_mut() {
                Some(k) if k.name == name => k.parts.push(part),
                _ => keys.push(DeclaredKey {
                    unique: s(&r[1]).as_deref() == Some("0"),
                    name,
                    parts: vec![part],
                }),
            }
        }
        let cols: Vec<Declared> = rows
            .iter()
            .filter(|r| r.len() == 7)
            .map(|r| Declared {
                name: s(&r[0]).unwrap_or_default(),
                column_type: s(&r[1]).unwrap_or_default(),
                data_type: s(&r[2]).unwrap_or_default().to_ascii_lowercase(),
                charset: s(&r[3]),
                collation: s(&r[4]),
                nullable: s(&r[5]).as_deref() == Some("YES"),
                invisible: s(&r[6]).is_some_and(|e| e.to_ascii_uppercase().contains("INVISIBLE")),
            })
            .collect();
        if cols.is_empty() {
            return Err(Error::reply(
                1146,
                b"42S02",
                format!("Table '{}.{}' doesn't exist", c.schema, c.table),
            ));
        }
        Ok((cols, keys))
    }

    /// Creates `c`'s temporary table on the scratch and copies the table's rows into it, one
    /// batch at a time: each target's rows are read as they come and sent on in multi-row
    /// INSERTs of at most [`BATCH_ROWS`] rows or about [`BATCH_BYTES`].
    #[allow(clippy::too_many_arguments)]
    async fn copy_table(
        &mut self,
        routing: &Routing,
        scratch: &mut PooledConn,
        c: &Copy,
        budget: &mut Budget,
        wanted: Option<&str>,
        bound: Option<(&Bind, KeySet)>,
        unique: bool,
    ) -> Result<Option<KeySet>> {
        let (cols, mut keys) = self.declared_columns(routing, c).await?;
        if !unique {
            for k in &mut keys {
                k.unique = false;
            }
        }
        run_text(scratch, &create_table(c, &cols, &keys)).await?;
        let list: Vec<String> = cols.iter().map(Declared::fetched).collect();
        let list = list.join(", ");
        // The values of `wanted` (an integer column) are kept for a later copy.
        let key_at = wanted.and_then(|name| {
            cols.iter()
                .position(|d| d.name.eq_ignore_ascii_case(name) && d.integer())
        });
        let mut keys = key_at.map(|k| KeySet {
            values: Default::default(),
            usable: true,
            unsigned: cols[k].unsigned(),
        });
        // Bound by another copy's values: one read per batch of them (none: no row can join).
        let fetches: Vec<String> = match bound {
            Some((b, set))
                if set.usable
                    && cols.iter().any(|d| {
                        d.name.eq_ignore_ascii_case(&b.column)
                            && d.integer()
                            && d.unsigned() == set.unsigned
                    }) =>
            {
                let values: Vec<String> = set
                    .values
                    .iter()
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .collect();
                values
                    .chunks(BIND_BATCH)
                    .map(|chunk| {
                        let cond = format!(
                            "{}.{} IN ({})",
                            quote(&c.known_as),
                            quote(&b.column),
                            chunk.join(", ")
                        );
                        c.fetch_with(&list, &cond)
                    })
                    .collect()
            }
            _ => vec![c.fetch(&list)],
        };
        let mut targets = Vec::new();
        let mode = self.sql_mode();
        let cs = self.charsets().statements;
        for fetch in &fetches {
            let plan = routing
                .router
                .route_in(self.logical.as_deref(), mode, cs, fetch, &[]);
            match plan {
                RoutePlan::Single(t) => targets.push(t),
                RoutePlan::Scatter {
                    targets: ts,
                    merge: Merge::Rows(_),
                } => targets.extend(ts),
                RoutePlan::Refuse(e) => return Err(self.refuse(&e)),
                _ => return Err(self.refuse(&ungathered("a copy planned this way"))),
            }
        }
        let names: Vec<String> = cols.iter().map(|d| quote(&d.name)).collect();
        let stamps = cols.iter().any(|d| d.data_type == "timestamp");
        let head = format!(
            "SET STATEMENT sql_mode = ''{} FOR INSERT INTO {} ({}) VALUES ",
            if stamps { ", time_zone = '+00:00'" } else { "" },
            c.temp,
            names.join(", ")
        );
        let mut batch = Batch {
            sql: String::with_capacity(BATCH_BYTES + 4096),
            head,
            rows: 0,
        };
        for t in &targets {
            let collect = key_at.zip(keys.as_mut());
            self.copy_target(routing, scratch, t, &cols, budget, &mut batch, collect)
                .await?;
        }
        batch.send(scratch).await?;
        Ok(keys)
    }

    /// The rows of one target of a copy's fetch, read on the session's connection to its
    /// datanode (its transaction and snapshot), into `batch`.
    #[allow(clippy::too_many_arguments)]
    async fn copy_target(
        &mut self,
        routing: &Routing,
        scratch: &mut PooledConn,
        t: &Target,
        cols: &[Declared],
        budget: &mut Budget,
        batch: &mut Batch,
        mut keys: Option<(usize, &mut KeySet)>,
    ) -> Result<()> {
        let how = if t.qualified {
            Use::AnyDatabase
        } else {
            Use::Text
        };
        let i = self.touch_for(routing, t.datanode, how).await?;
        let h = &mut self.conns.held[i];
        let bytes = h.conn.sql_bytes(&t.sql)?.into_owned();
        h.write_begin();
        h.conn.io.write_command(COM_QUERY, &bytes);
        if let Err(e) = h.conn.io.flush().await {
            return Err(self.copy_broken(t.datanode, Error::BackendIo(e)));
        }
        let mut stream = ResultStream::new(&self.conns.held[i].conn, false);
        if std::mem::take(&mut self.conns.held[i].begin_unread) {
            // The transaction's BEGIN went first: its reply comes first.
            if let Err(e) = super::reader::read_write_result(&mut self.conns.held[i].conn).await {
                let _ = stream.drain(&mut self.conns.held[i].conn).await;
                return Err(e);
            }
        }
        let defs = match stream.columns(&mut self.conns.held[i].conn).await {
            Ok(d) => d,
            Err(e @ Error::Reply { .. }) => {
                return Err(e.on_datanode(&routing.topology.datanodes[t.datanode].name));
            }
            Err(e) => return Err(self.copy_broken(t.datanode, e)),
        };
        let fetched: Vec<Column> = match defs.iter().map(|d| parse_column(d)).collect() {
            Ok(f) => f,
            Err(e) => return Err(self.copy_broken(t.datanode, e)),
        };
        let mut failed: Option<Error> = None;
        if fetched.len() != cols.len() {
            failed = Some(self.refuse(&ungathered("a copy whose columns changed")));
        }
        let mut row_buf = Vec::new();
        while failed.is_none() {
            let conn = &mut self.conns.held[i].conn;
            match stream.next_row_in(conn, std::mem::take(&mut row_buf)).await {
                Ok(Row::Data(row)) => {
                    budget.rows += 1;
                    budget.bytes += row.len();
                    if budget.rows > budget.max_rows || budget.bytes > budget.max_bytes {
                        failed = Some(self.refuse(&RouterError::unsupported(budget.refusal())));
                        break;
                    }
                    if let Some((k, set)) = keys.as_mut() {
                        set.keep(&row, *k);
                    }
                    match row_literal(&row, &fetched, cols) {
                        Ok(written) => batch.push(&written),
                        Err(e) => {
                            failed = Some(self.refuse(&e));
                            break;
                        }
                    }
                    row_buf = row;
                    if batch.full()
                        && let Err(e) = batch.send(scratch).await
                    {
                        failed = Some(e);
                    }
                }
                Ok(Row::End) => return Ok(()),
                Err(e @ Error::Reply { .. }) => return Err(e),
                Err(e) => return Err(self.copy_broken(t.datanode, e)),
            }
        }
        // Stopped early: the rest of the target's rows are read and dropped, so that its
        // connection serves the next statement.
        if let Err(e) = stream.drain(&mut self.conns.held[i].conn).await {
            return Err(self.copy_broken(t.datanode, e));
        }
        Err(failed.unwrap_or_else(Error::lost_backend))
    }

    /// The session's connection to `dn` broke mid-copy: it is dropped (a transaction on it
    /// is doomed with it, as a scatter's broken shard dooms it).
    fn copy_broken(&mut self, dn: DatanodeId, e: Error) -> Error {
        tracing::debug!(error = %e, "a datanode connection broke during a gather's copy");
        let timed_out = crate::error::error_is_timeout(&e);
        let in_txn = self.txn_begin.is_some();
        self.conns.remove(dn);
        if timed_out {
            let in_transaction = in_txn || self.in_transaction_now();
            return crate::backend::interrupt::stalled_error("a datanode", true, in_transaction);
        }
        Error::lost_backend()
    }

    /// Runs the statement on the scratch and relays its result, column definitions in logical
    /// names.
    async fn gather_statement(
        &mut self,
        routing: &Routing,
        scratch: &mut PooledConn,
        g: &Gather,
        binary: bool,
        reply_seq: u8,
    ) -> Result<()> {
        if binary {
            let (id, _) = super::request::prepare_freeing(scratch, &g.statement, false).await?;
            let mut exec = Vec::with_capacity(10);
            exec.extend_from_slice(&id.to_le_bytes());
            exec.push(0); // no cursor
            exec.extend_from_slice(&1u32.to_le_bytes());
            scratch.io.write_command(COM_STMT_EXECUTE, &exec);
        } else {
            let bytes = scratch.sql_bytes(&g.statement)?.into_owned();
            scratch.io.write_command(COM_QUERY, &bytes);
        }
        scratch.io.flush().await.map_err(Error::BackendIo)?;
        let logical = self.logical.clone();
        let rename = |def: &[u8]| rename_column(def, g, logical.as_deref());
        let mut reader = scratch.reader(Expect::Results { binary });
        let mut defs: Vec<Vec<u8>> = Vec::new();
        let mut out: Option<ResultSetWriter> = None;
        let mut sent = 0u64;
        let wire = self.client_wire();
        loop {
            scratch.read_packet().await.map_err(Error::BackendIo)?;
            let p = scratch.io.packet_payload();
            match reader.next(&p)? {
                Event::Err {
                    code,
                    state,
                    message,
                } => {
                    let (code, state, m) = if scratch.timed_out(code) {
                        // Shoal's KILL at `query_timeout`: said as MariaDB's own limit says it.
                        let (code, state, m) = crate::backend::interrupt::TIMED_OUT;
                        (code, state, m.to_string())
                    } else {
                        let m = crate::backend::charset::backend_message(
                            scratch.charsets().results,
                            message,
                        );
                        (code, state, m)
                    };
                    drop(p);
                    return match out {
                        Some(w) => {
                            let payload = err_payload(code, &state, &m);
                            w.fail(&mut self.client, &payload);
                            self.flush_client().await
                        }
                        None => Err(Error::Reply {
                            code,
                            state,
                            message: m,
                        }),
                    };
                }
                Event::ColumnDef(d) => defs.push(rename(d)),
                Event::Row(r) => {
                    if out.is_none() {
                        let status = self.reply_status();
                        out = Some(ResultSetWriter::start(
                            &mut self.client,
                            reply_seq,
                            wire,
                            status,
                            defs.iter().map(Vec::as_slice),
                        ));
                    }
                    if let Some(w) = out.as_mut() {
                        w.row(&mut self.client, r);
                    }
                    sent += 1;
                    drop(p);
                    if self.client.needs_flush() {
                        self.flush_client().await?;
                    }
                    continue;
                }
                Event::ResultDone { warnings, .. } => {
                    drop(p);
                    let status = self.reply_status();
                    let w = match out.take() {
                        Some(w) => w,
                        None => ResultSetWriter::start(
                            &mut self.client,
                            reply_seq,
                            wire,
                            status,
                            defs.iter().map(Vec::as_slice),
                        ),
                    };
                    w.finish_warned(&mut self.client, status, warnings);
                    if reader.finished() {
                        break;
                    }
                    return Err(crate::wire::response::protocol_error(
                        "several results from a gathered statement",
                    ));
                }
                Event::Ok(_) => {
                    return Err(crate::wire::response::protocol_error(
                        "a gathered SELECT answered without a result set",
                    ));
                }
                _ => {}
            }
            if reader.finished() {
                break;
            }
        }
        scratch.note_response(&reader);
        let _ = routing;
        self.diag.known = true;
        self.diag.row_count = -1;
        self.diag.found_rows = sent;
        self.mark.rows += sent;
        self.flush_client().await
    }
}

/// The distinct values of a copy's integer column a later copy is bound by (see [`Bind`]).
#[derive(Debug, Clone)]
struct KeySet {
    values: std::collections::BTreeSet<Vec<u8>>,
    /// Still all of them (past [`BIND_MAX_VALUES`] they are dropped: the later copy is read
    /// whole).
    usable: bool,
    unsigned: bool,
}

impl KeySet {
    /// Keeps the value of column `k` of a fetched row (text protocol); NULL joins nothing.
    fn keep(&mut self, row: &[u8], k: usize) {
        if !self.usable {
            return;
        }
        let mut b = row;
        for i in 0..=k {
            let v = if b.first() == Some(&0xFB) {
                b = &b[1..];
                None
            } else {
                match read_lenenc_bytes(&mut b) {
                    Some(v) => Some(v),
                    None => {
                        self.give_up();
                        return;
                    }
                }
            };
            if i == k
                && let Some(v) = v
            {
                // An integer's text, as the datanode sent it.
                let digits = v.strip_prefix(b"-").unwrap_or(v);
                if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                    self.give_up();
                    return;
                }
                self.values.insert(v.to_vec());
                if self.values.len() > BIND_MAX_VALUES {
                    self.give_up();
                }
            }
        }
    }

    fn give_up(&mut self) {
        self.usable = false;
        self.values.clear();
    }
}

/// The INSERT being written into a copy.
struct Batch {
    sql: String,
    /// `INSERT INTO shoal_gN (...) VALUES `, with its settings.
    head: String,
    rows: usize,
}

impl Batch {
    fn push(&mut self, row: &str) {
        if self.rows == 0 {
            self.sql.clear();
            self.sql.push_str(&self.head);
        } else {
            self.sql.push_str(", ");
        }
        self.sql.push_str(row);
        self.rows += 1;
    }

    fn full(&self) -> bool {
        self.rows >= BATCH_ROWS || self.sql.len() >= BATCH_BYTES
    }

    /// Sends the rows written so far, if any.
    async fn send(&mut self, scratch: &mut PooledConn) -> Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        self.rows = 0;
        // A 1062 (rows repeating a unique key across shards) is the caller's to handle.
        run_text(scratch, &self.sql).await
    }
}

/// One key of a copied table, as `information_schema.STATISTICS` declares it.
#[derive(Debug, Clone)]
struct DeclaredKey {
    name: String,
    unique: bool,
    /// Its columns, quoted, each with its prefix length.
    parts: Vec<String>,
}

/// The CREATE TEMPORARY TABLE of `c`'s copy: the table's columns and keys, so that MariaDB
/// plans the statement over the copy as over the table. InnoDB, as the tables copied are: an
/// engine that knows its exact row count (Aria, MyISAM), or a copy without the table's unique
/// keys, changes which tables MariaDB reads as constant (0 or 1 rows, a unique key's lookup),
/// which changes what it answers about the result (checked on 10.11: a `WITH ROLLUP` column's
/// table in its definition; a derived table merged instead of materialized). Where rows repeat
/// a unique key across shards, the copy is made again with plain keys (`run_gather`).
fn create_table(c: &Copy, cols: &[Declared], keys: &[DeclaredKey]) -> String {
    let mut defs: Vec<String> = cols.iter().map(Declared::definition).collect();
    for k in keys {
        let parts = k.parts.join(", ");
        let primary = k.name.eq_ignore_ascii_case("PRIMARY");
        defs.push(match (k.unique, primary) {
            (true, true) => format!("PRIMARY KEY ({parts})"),
            (true, false) => format!("UNIQUE KEY {} ({parts})", quote(&k.name)),
            // A primary key made plain has no name of its own.
            (false, true) => format!("KEY ({parts})"),
            (false, false) => format!("KEY {} ({parts})", quote(&k.name)),
        });
    }
    // An index on each join column no key starts with, whose values make a short key (an
    // index changes no answer).
    for name in &c.join_columns {
        let first = quote(name).to_ascii_lowercase();
        let keyed = keys.iter().any(|k| {
            k.parts
                .first()
                .is_some_and(|p| p.to_ascii_lowercase().starts_with(&first))
        });
        if let Some(d) = cols.iter().find(|d| d.name.eq_ignore_ascii_case(name))
            && d.short_key()
            && !keyed
        {
            defs.push(format!("KEY ({})", quote(&d.name)));
        }
    }
    format!(
        "CREATE TEMPORARY TABLE {} ({}) ENGINE=InnoDB",
        c.temp,
        defs.join(", ")
    )
}

/// Runs one statement of Shoal's own on the scratch.
async fn run_text(conn: &mut PooledConn, sql: &str) -> Result<()> {
    conn.command(COM_QUERY, sql.as_bytes()).await.map(|_| ())
}

fn ungathered(what: impl std::fmt::Display) -> RouterError {
    RouterError::unsupported(format!(
        "This version of Shoal doesn't yet support '{what} gathered on one datanode'"
    ))
}

/// A column definition of the scratch's result with the logical schema and, for a copy's
/// column, the logical table as its original table (the alias the statement gave stays).
fn rename_column(def: &[u8], g: &Gather, logical: Option<&str>) -> Vec<u8> {
    let mut b = def;
    let mut fields: [&[u8]; 6] = [&[]; 6];
    for f in &mut fields {
        match read_lenenc_bytes(&mut b) {
            Some(v) => *f = v,
            None => return def.to_vec(),
        }
    }
    let copy = g
        .copies
        .iter()
        .find(|c| c.temp.as_bytes().eq_ignore_ascii_case(fields[3]));
    let mut out = Vec::with_capacity(def.len() + 16);
    // The logical schema where the scratch names its database (a copy's column, a merged
    // derived table's or CTE's); none where it names none (a materialized derived table's
    // columns, an expression), as one MariaDB over the tables themselves.
    let schema: &[u8] = match (fields[1].is_empty(), copy) {
        (true, _) => &[],
        (false, Some(c)) => c.schema.as_bytes(),
        (false, None) => logical.unwrap_or_default().as_bytes(),
    };
    let org_table = copy.map_or(fields[3], |c| c.table.as_bytes());
    put_lenenc_bytes(&mut out, fields[0]);
    put_lenenc_bytes(&mut out, schema);
    put_lenenc_bytes(&mut out, fields[2]);
    put_lenenc_bytes(&mut out, org_table);
    put_lenenc_bytes(&mut out, fields[4]);
    put_lenenc_bytes(&mut out, fields[5]);
    out.extend_from_slice(b);
    out
}

fn hex_into(out: &mut String, v: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.reserve(v.len() * 2);
    for &b in v {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
}

/// One fetched row (text protocol) as `(v1, v2, ...)` for the INSERT into its copy.
fn row_literal(
    row: &[u8],
    fetched: &[Column],
    declared: &[Declared],
) -> std::result::Result<String, RouterError> {
    let mut b = row;
    let mut out = String::with_capacity(row.len() * 2 + 8);
    out.push('(');
    for (i, (f, d)) in fetched.iter().zip(declared).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let v = if b.first() == Some(&0xFB) {
            b = &b[1..];
            None
        } else {
            Some(read_lenenc_bytes(&mut b).ok_or_else(|| ungathered("a malformed row"))?)
        };
        match v {
            None => out.push_str("NULL"),
            Some(v) => value_literal(&mut out, v, f, d)?,
        }
    }
    out.push(')');
    Ok(out)
}

/// One value of declared column `d` (fetched as `f`) as a literal its copy stores as that value.
fn value_literal(
    out: &mut String,
    v: &[u8],
    f: &Column,
    d: &Declared,
) -> std::result::Result<(), RouterError> {
    let bad = |what: &str| {
        ungathered(format!(
            "a copy of column '{}' ({}) holding {what}",
            d.name, d.column_type
        ))
    };
    let text = |chars: &str| -> std::result::Result<&str, RouterError> {
        let t = std::str::from_utf8(v).map_err(|_| bad("a value that is not text"))?;
        if t.is_empty() || !t.chars().all(|c| chars.contains(c)) {
            return Err(bad("a value that does not read back"));
        }
        Ok(t)
    };
    match d.data_type.as_str() {
        "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint" | "decimal"
        | "numeric" | "year" | "float" | "double" | "real" => {
            out.push_str(text("-+.0123456789eE")?);
        }
        "timestamp" => {
            out.push_str("FROM_UNIXTIME(");
            out.push_str(text("-.0123456789")?);
            out.push(')');
        }
        "date" | "datetime" | "time" => {
            out.push('\'');
            out.push_str(text("-0123456789: .")?);
            out.push('\'');
        }
        "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" | "bit"
        | "geometry" | "point" | "linestring" | "polygon" | "multipoint" | "multilinestring"
        | "multipolygon" | "geometrycollection" => {
            out.push_str("X'");
            hex_into(out, v);
            out.push('\'');
        }
        _ if d.text() => {
            // The stored bytes (read `CAST(c AS BINARY)`), in the column's charset.
            let cs = d.charset.as_deref().unwrap_or_default();
            if cs.is_empty() || !cs.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(bad("a string in an unknown charset"));
            }
            out.push('_');
            out.push_str(cs);
            out.push_str(" X'");
            hex_into(out, v);
            out.push('\'');
        }
        // No charset: ASCII text (inet4, inet6, uuid).
        "inet4" | "inet6" | "uuid" => {
            out.push('\'');
            out.push_str(text("0123456789abcdefABCDEF:.-")?);
            out.push('\'');
        }
        _ => {
            if f.column_type == ColumnType::MYSQL_TYPE_NULL {
                out.push_str("NULL");
            } else {
                return Err(bad("a value of this type"));
            }
        }
    }
    Ok(())
}
