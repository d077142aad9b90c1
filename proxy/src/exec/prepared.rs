//! Prepared statements with the router. Shoal owns the client's statement ids: PREPARE plans
//! the text once for its metadata; each EXECUTE decodes the bound values, routes by them, and
//! runs the target's SQL through a backend statement prepared lazily on that datanode's
//! connection (kept while the client statement is open, closed with it).

use mysql_common::constants::CapabilityFlags;
use std::sync::Arc;

use shoal_router::plan::{
    LocalAnswer, Merge, ParamValue, Params, PreparedRoute, ReadWant, RoutePlan, Routed, Target,
    namespace,
};
use shoal_router::sql::lex::TokKind;

use super::local::string_column;
use super::{Use, unsupported};
use crate::backend::conn::BackendConn;
use crate::backend::stmt_cache::{ParamTypes, fingerprint, fingerprint_in};
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::exec::relay::Expect;
use crate::merge::Protocol;
use crate::out_of_line::cold;
use crate::runtime::routing::Routing;
use crate::wire::command::{COM_STMT_CLOSE, COM_STMT_EXECUTE, COM_STMT_PREPARE};
use crate::wire::messages::{eof_payload, read_lenenc, read_lenenc_bytes};
use crate::wire::response::{self, Event};

/// Shoal's ids start high so that they never look like a backend's (helps reading logs).
const FIRST_ID: u32 = 1 << 20;

/// One client statement.
pub struct ClientStmt {
    pub id: u32,
    /// Shared with each execution's plan arms, which outlive the borrow of the statement list.
    pub sql: Arc<str>,
    /// The router's reading of `sql` in the schema and sql_mode it was prepared in: each
    /// EXECUTE only evaluates it with its values (the router plans from the text again where
    /// the schema or sql_mode has changed since).
    pub route: Option<Arc<PreparedRoute>>,
    pub params: u16,
    /// Parameter types from the last EXECUTE that sent them (type, unsigned flag).
    pub types: ParamTypes,
    /// COM_STMT_SEND_LONG_DATA was used: not supported through the router.
    pub long_data: bool,
    /// The router's read/write decision on `sql` (computed at the first EXECUTE).
    pub read_route: Option<shoal_router::sql::readwrite::ReadRoute>,
    /// An INSERT leaving out a shard key that has a sequence: `sql` has a parameter for each
    /// row's key, which each execute binds to the ids it takes (`params` counts the client's).
    pub sequence: Option<Arc<super::sequence::PreparedSequence>>,
}

/// One bound parameter as it came: type and its value bytes (`None` for NULL).
#[derive(Debug, Clone)]
pub struct RawParam {
    pub ty: u8,
    pub unsigned: u8,
    pub value: Option<Vec<u8>>,
}

#[derive(Default)]
pub struct Statements {
    list: Vec<ClientStmt>,
    /// `list`'s ids in the same order: an execute's lookup reads these few bytes, not every
    /// statement's fields.
    ids: Vec<u32>,
    next: u32,
    /// Buffers kept between executes, so that an execute allocates nothing for its values
    /// and its backend payload.
    params: Vec<RawParam>,
    values: Vec<ParamValue>,
    payload: Vec<u8>,
}

impl Statements {
    fn add(
        &mut self,
        sql: Arc<str>,
        route: Option<Arc<PreparedRoute>>,
        params: u16,
        sequence: Option<Arc<super::sequence::PreparedSequence>>,
    ) -> u32 {
        if self.next == 0 {
            self.next = FIRST_ID;
        }
        let id = self.next;
        self.next = self.next.wrapping_add(1).max(FIRST_ID);
        self.ids.push(id);
        self.list.push(ClientStmt {
            id,
            sql,
            route,
            params,
            types: ParamTypes::new(),
            long_data: false,
            read_route: None,
            sequence,
        });
        id
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut ClientStmt> {
        let i = self.ids.iter().position(|&s| s == id)?;
        self.list.get_mut(i)
    }

    /// Plans every statement again with `router` (a reload replaced the router: the old
    /// plans name its tables and rules).
    pub(crate) fn replan(
        &mut self,
        router: &shoal_router::plan::Router,
        current: Option<&str>,
        mode: shoal_router::sql::SqlMode,
        cs: shoal_router::charset::Charsets,
    ) {
        for s in &mut self.list {
            s.route = router.prepare_route(current, mode, cs, &s.sql);
        }
    }

    fn remove(&mut self, id: u32) {
        if let Some(i) = self.ids.iter().position(|&s| s == id) {
            self.ids.remove(i);
            self.list.remove(i);
        }
    }
}

/// Byte length of a binary-protocol value of type `ty` at the front of `b`.
fn value_len(ty: u8, b: &[u8]) -> Option<usize> {
    Some(match ty {
        0x06 => 0,
        0x01 => 1,
        0x02 | 0x0d => 2,
        0x03 | 0x09 | 0x04 => 4,
        0x08 | 0x05 => 8,
        0x07 | 0x0a | 0x0b | 0x0c => 1 + *b.first()? as usize,
        _ => {
            let mut s = b;
            let n = read_lenenc(&mut s)? as usize;
            // A length near 2^64 from a client must not overflow (fuzz finding).
            (b.len() - s.len()).checked_add(n)?
        }
    })
}

/// [`literal_in`] from a UTF-8 client.
pub(crate) fn literal(p: &RawParam) -> ParamValue {
    literal_in(p, shoal_router::charset::Charset::Utf8mb4)
}

/// The router's view of a bound value, its strings read in `cs` (the session's
/// `character_set_client`, which MariaDB reads them in).
pub(crate) fn literal_in(p: &RawParam, cs: shoal_router::charset::Charset) -> ParamValue {
    let Some(v) = &p.value else {
        return ParamValue::Null;
    };
    let unsigned = p.unsigned & 0x80 != 0;
    let int = |bytes: &[u8]| -> i128 {
        let mut buf = [0u8; 8];
        buf[..bytes.len()].copy_from_slice(bytes);
        if unsigned {
            u64::from_le_bytes(buf) as i128
        } else {
            // Sign-extend from the value's width.
            let shift = 64 - 8 * bytes.len() as u32;
            ((i64::from_le_bytes(buf) << shift) >> shift) as i128
        }
    };
    match p.ty {
        0x06 => ParamValue::Null,
        0x01 | 0x02 | 0x0d | 0x03 | 0x09 | 0x08 => ParamValue::Int(int(v)),
        0x04 => {
            ParamValue::Decimal(f32::from_le_bytes(v[..4].try_into().unwrap_or([0; 4])).to_string())
        }
        0x05 => {
            ParamValue::Decimal(f64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8])).to_string())
        }
        0x0a | 0x07 | 0x0c => ParamValue::Str(datetime_text(&v[1..])),
        0x0b => ParamValue::Str(time_text(&v[1..])),
        0x00 | 0xf6 => {
            let mut s = &v[..];
            let t = read_lenenc_bytes(&mut s).unwrap_or(&[]);
            ParamValue::Decimal(String::from_utf8_lossy(t).into_owned())
        }
        _ => {
            let mut s = &v[..];
            let t = read_lenenc_bytes(&mut s).unwrap_or(&[]);
            let text = crate::backend::charset::read_statement(cs, t)
                .map(std::borrow::Cow::into_owned)
                .unwrap_or_else(|_| String::from_utf8_lossy(t).into_owned());
            ParamValue::Str(text)
        }
    }
}

fn datetime_text(b: &[u8]) -> String {
    let g = |i: usize| b.get(i).copied().unwrap_or(0) as u32;
    let year = g(0) | (g(1) << 8);
    let mut s = format!("{year:04}-{:02}-{:02}", g(2), g(3));
    if b.len() >= 7 {
        s.push_str(&format!(" {:02}:{:02}:{:02}", g(4), g(5), g(6)));
    }
    if b.len() >= 11 {
        let us = g(7) | (g(8) << 8) | (g(9) << 16) | (g(10) << 24);
        s.push_str(&format!(".{us:06}"));
    }
    s
}

fn time_text(b: &[u8]) -> String {
    let g = |i: usize| b.get(i).copied().unwrap_or(0) as u32;
    if b.is_empty() {
        return "00:00:00".into();
    }
    let neg = g(0) == 1;
    let days = g(1) | (g(2) << 8) | (g(3) << 16) | (g(4) << 24);
    // u64: a client may send any 4-byte day count (the server clamps, the text must not panic).
    let hours = u64::from(days) * 24 + u64::from(g(5));
    let mut s = format!(
        "{}{hours:02}:{:02}:{:02}",
        if neg { "-" } else { "" },
        g(6),
        g(7)
    );
    if b.len() >= 12 {
        let us = g(8) | (g(9) << 8) | (g(10) << 16) | (g(11) << 24);
        s.push_str(&format!(".{us:06}"));
    }
    s
}

/// Decodes a COM_STMT_EXECUTE payload's parameters (`types` remembered from an earlier
/// execute when this one does not send them). Returns (flags, params).
pub(crate) fn decode_execute(
    p: &[u8],
    n: usize,
    types: &mut ParamTypes,
) -> Result<(u8, Vec<RawParam>)> {
    let mut out = Vec::new();
    let flags = decode_execute_into(p, n, types, &mut out)?;
    Ok((flags, out))
}

/// [`decode_execute`] into `out`, reusing its value buffers. Returns the flags.
fn decode_execute_into(
    p: &[u8],
    n: usize,
    types: &mut ParamTypes,
    out: &mut Vec<RawParam>,
) -> Result<u8> {
    let bad = || Error::malformed("COM_STMT_EXECUTE");
    let flags = *p.get(5).ok_or_else(bad)?;
    let mut b = p.get(10..).ok_or_else(bad)?;
    out.truncate(n);
    if n == 0 {
        return Ok(flags);
    }
    let nb = n.div_ceil(8);
    let nulls = b.get(..nb).ok_or_else(bad)?;
    b = &b[nb..];
    let bound = *b.first().ok_or_else(bad)?;
    b = &b[1..];
    if bound == 1 {
        let t = b.get(..2 * n).ok_or_else(bad)?;
        types.clear();
        types.extend(t.chunks(2).map(|c| (c[0], c[1])));
        b = &b[2 * n..];
    }
    if types.len() != n {
        return Err(Error::malformed("COM_STMT_EXECUTE without parameter types"));
    }
    for (i, &(ty, unsigned)) in types.iter().enumerate() {
        if i == out.len() {
            out.push(RawParam {
                ty,
                unsigned,
                value: None,
            });
        }
        let param = &mut out[i];
        param.ty = ty;
        param.unsigned = unsigned;
        if nulls[i / 8] & (1 << (i % 8)) != 0 {
            param.value = None;
            continue;
        }
        let len = value_len(ty, b).ok_or_else(bad)?;
        let v = b.get(..len).ok_or_else(bad)?;
        b = &b[len..];
        let buf = param.value.get_or_insert_with(Vec::new);
        buf.clear();
        buf.extend_from_slice(v);
    }
    Ok(flags)
}

/// A COM_STMT_EXECUTE for backend statement `id` with the client's parameters `which`.
#[cfg(test)]
fn execute_payload(id: u32, params: &[RawParam], which: &[u16]) -> Vec<u8> {
    let mut out = Vec::new();
    execute_payload_into(&mut out, id, params, which, true);
    out
}

/// [`execute_payload`] into `out` (cleared first); the parameter types only with
/// `send_types` (the server keeps those of the last execute that sent them).
fn execute_payload_into(
    out: &mut Vec<u8>,
    id: u32,
    params: &[RawParam],
    which: &[u16],
    send_types: bool,
) {
    out.clear();
    out.push(COM_STMT_EXECUTE);
    out.extend_from_slice(&id.to_le_bytes());
    out.push(0);
    out.extend_from_slice(&1u32.to_le_bytes());
    let n = which
        .iter()
        .filter(|&&i| (i as usize) < params.len())
        .count();
    if n == 0 {
        return;
    }
    let nulls = out.len();
    out.resize(nulls + n.div_ceil(8) + 1, 0);
    out[nulls + n.div_ceil(8)] = u8::from(send_types);
    let mut k = 0;
    for &i in which {
        let Some(p) = params.get(i as usize) else {
            continue;
        };
        if p.value.is_none() {
            out[nulls + k / 8] |= 1 << (k % 8);
        }
        if send_types {
            out.push(p.ty);
            out.push(p.unsigned);
        }
        k += 1;
    }
    for &i in which {
        if let Some(v) = params.get(i as usize).and_then(|p| p.value.as_ref()) {
            out.extend_from_slice(v);
        }
    }
}

/// MariaDB's error when `max_prepared_stmt_count` statements are open on the server.
pub(super) const ER_MAX_PREPARED_STMT_COUNT_REACHED: u16 = 1461;

/// COM_STMT_PREPARE of `sql` on `conn`, kept in the connection's statement cache. Returns the
/// backend id and, when `columns` is asked for, the result column definitions. Should the
/// server's statement limit be reached, the connection closes what it keeps and tries once more.
async fn prepare_on(
    conn: &mut BackendConn,
    sql: &Arc<str>,
    columns: bool,
) -> Result<(u32, Vec<Vec<u8>>)> {
    let (id, defs) = prepare_freeing(conn, sql, columns).await?;
    let evicted = conn.stmts.insert(fingerprint(&conn.state), sql, id);
    close_statements(conn, &evicted);
    Ok((id, defs))
}

/// [`prepare_once`], once more after closing the statements `conn` keeps should the server's
/// statement limit be reached.
pub(super) async fn prepare_freeing(
    conn: &mut BackendConn,
    sql: &str,
    columns: bool,
) -> Result<(u32, Vec<Vec<u8>>)> {
    match prepare_once(conn, sql, columns).await {
        Err(Error::Reply { code, .. })
            if code == ER_MAX_PREPARED_STMT_COUNT_REACHED && !conn.stmts.is_empty() =>
        {
            let ids = conn.stmts.drain();
            close_statements(conn, &ids);
            prepare_once(conn, sql, columns).await
        }
        other => other,
    }
}

/// One COM_STMT_PREPARE of `sql` on `conn`: the backend id and, when `columns` is asked for,
/// the result column definitions.
async fn prepare_once(
    conn: &mut BackendConn,
    sql: &str,
    columns: bool,
) -> Result<(u32, Vec<Vec<u8>>)> {
    let bytes = conn.sql_bytes(sql)?;
    conn.io.write_command(COM_STMT_PREPARE, &bytes);
    conn.io.flush().await.map_err(Error::BackendIo)?;
    let mut reader = conn.reader(response::Expect::Prepare);
    let mut defs: Vec<Vec<u8>> = Vec::new();
    let mut id = None;
    let mut error = None;
    while !reader.finished() {
        conn.read_packet().await.map_err(Error::BackendIo)?;
        let p = conn.io.packet_payload();
        match reader.next(&p)? {
            Event::PrepareOk { statement_id, .. } => id = Some(statement_id),
            Event::ColumnDef(d) if columns => defs.push(d.to_vec()),
            Event::Err {
                code,
                state,
                message,
            } => {
                error = Some(Error::Reply {
                    code,
                    state,
                    message: crate::backend::charset::backend_message(
                        conn.charsets().results,
                        message,
                    ),
                })
            }
            _ => {}
        }
    }
    if let Some(e) = error {
        return Err(e);
    }
    let id = id.ok_or_else(|| response::protocol_error("prepare without an id"))?;
    Ok((id, defs))
}

/// Queues COM_STMT_CLOSE for `ids` (no response; sent with the connection's next command).
pub(super) fn close_statements(conn: &mut BackendConn, ids: &[u32]) {
    for id in ids {
        conn.io.write_command(COM_STMT_CLOSE, &id.to_le_bytes());
    }
}

/// The bytes target `t` (of datanode database `db`) gets on `conn` for `req`, into `out`: its
/// SQL as a COM_QUERY, or a COM_STMT_EXECUTE of the statement `conn` keeps prepared in `db`
/// (prepared there now if not). Prepared in the datanode's database, it runs there from then
/// on, whichever database the connection is in (see `Use::AnyDatabase`). A qualified target
/// reads the same in any database: it is prepared in the connection's own, so that its
/// executes do not make the server switch databases.
pub(super) async fn request_on(
    conn: &mut BackendConn,
    db: &str,
    t: &Target,
    req: &Request<'_>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let params = match req {
        Request::Text => {
            *out = super::query_payload(conn, t)?;
            return Ok(());
        }
        Request::Execute { params } => *params,
    };
    // The database the statement is (or will be) prepared in: the datanode's, or for a
    // qualified one, whichever the connection is in.
    let in_db = if t.qualified {
        conn.state.schema.as_deref()
    } else {
        Some(db)
    };
    let fp = fingerprint_in(in_db, &conn.state.vars);
    let switch = in_db != conn.state.schema.as_deref();
    let (backend_id, send_types) = match conn.stmts.get_for_execute(fp, &t.sql) {
        Some((id, held)) => (id, !keep_types(held, params, &t.params)),
        None => {
            // First use on this connection: prepared (out of line, see `out_of_line`).
            if switch {
                cold(conn.init_db(db)).await?;
            }
            // Types go with this first execute; the next one records them.
            (cold(prepare_on(conn, &t.sql, false)).await?.0, true)
        }
    };
    execute_payload_into(out, backend_id, params, &t.params, send_types);
    Ok(())
}

/// Whether `held` (the types the server holds for a statement) are the types of `params`
/// chosen by `which`; if not, they become them (the caller sends them with this execute).
/// A caller that then does not send the execute must [`StmtCache::forget_types`].
///
/// [`StmtCache::forget_types`]: crate::backend::stmt_cache::StmtCache::forget_types
fn keep_types(held: &mut ParamTypes, params: &[RawParam], which: &[u16]) -> bool {
    let types = which
        .iter()
        .filter_map(|&i| params.get(i as usize))
        .map(|p| (p.ty, p.unsigned));
    if !held.is_empty() && held.iter().copied().eq(types.clone()) {
        return true;
    }
    held.clear();
    held.extend(types);
    false
}

/// Whether `sql` starts with INSERT or REPLACE: the cheap look before a prepared statement is
/// read for an INSERT the executor completes (a column list, a sequence's keys).
pub(super) fn is_insert(sql: &str) -> bool {
    let head = sql.trim_start().get(..7).unwrap_or_default();
    head.get(..6)
        .is_some_and(|h| h.eq_ignore_ascii_case("insert"))
        || head.eq_ignore_ascii_case("replace")
}

/// The SQL request each target gets: text, or an execute of a prepared statement.
pub enum Request<'a> {
    Text,
    Execute { params: &'a [RawParam] },
}

impl Cursor {
    /// COM_STMT_PREPARE with the router.
    pub(super) async fn prepare_routed(&mut self, routing: &Routing, reply_seq: u8) -> Result<()> {
        let mode = self.sql_mode();
        // Read in the client's charset; each target's SQL is written back in it (`prepare_on`).
        let charsets = self.charsets().statements;
        let sql = {
            let p = self.client.packet_payload();
            crate::backend::charset::read_statement(charsets.client, &p[1..])?.into_owned()
        };
        // An INSERT without a column list into a sharded table is prepared with the table's
        // list spliced in (`column_list.rs`): each execute then plans like any INSERT with
        // one. The order is the table's at PREPARE.
        let sql = match is_insert(&sql)
            .then(|| {
                shoal_router::plan::column_list::column_list_fill(
                    &routing.topology,
                    self.logical.as_deref(),
                    &sql,
                )
            })
            .flatten()
        {
            Some(fill) => {
                let columns = self.column_order(routing, &fill).await?;
                fill.apply(&sql, &columns)
            }
            None => sql,
        };
        // An INSERT leaving out a shard key that has a sequence: prepared with a parameter for
        // each row's key, bound at each execute to the ids it takes (`sequence.rs`).
        let (sql, sequence) = match super::sequence::prepared_sequence(
            routing,
            self.logical.as_deref(),
            mode,
            &sql,
        ) {
            Some((filled, seq)) => (filled, Some(seq)),
            None => (sql, None),
        };
        // `?` counted on the tokens the session's server would read (sql_mode, versioned
        // comments), the same tokens the router plans with.
        let mut toks = Vec::new();
        let tokenized = routing.router.tokenize(&sql, mode, &mut toks);
        let params = toks
            .iter()
            .filter(|t| t.kind == TokKind::Placeholder)
            .count() as u16;
        // Plan without values, for where to read the statement's metadata; where values are
        // needed to plan at all (an INSERT's shard key), with stand-in values: only the
        // metadata is read there, every EXECUTE is planned with its own values.
        self.check_read_only(routing, mode, &sql)?;
        let denied = tokenized
            .is_ok()
            .then(|| namespace::denied_schema_named(&sql, &toks, self.denied_schemas(routing)))
            .flatten();
        let route = |values: &[ParamValue]| match (&tokenized, &denied) {
            (Ok(()), Some(e)) => RoutePlan::Refuse(e.clone()),
            (Ok(()), None) => routing.router.route_tokens(
                self.logical.as_deref(),
                mode,
                charsets,
                &sql,
                &toks,
                values,
            ),
            (Err(e), _) => RoutePlan::Refuse(e.clone()),
        };
        let mut plan = route(&[]);
        // `0` and `'0'` suit most rules; a date rule (or a range or list without a default)
        // places neither, so each configured rule's own sample value is tried too.
        let mut stand_ins = vec![ParamValue::Int(0), ParamValue::Str("0".into())];
        if params > 0 && matches!(plan, RoutePlan::Refuse(_)) {
            for schema in routing.router.topology().schemas.values() {
                for t in schema.tables.values() {
                    if let shoal_router::topology::TableDef::Sharded(t) = t
                        && let Some(v) = t.rule.sample_value()
                        && !stand_ins.contains(&v)
                    {
                        stand_ins.push(v);
                    }
                }
            }
        }
        for stand_in in stand_ins {
            if !matches!(plan, RoutePlan::Refuse(_)) {
                break;
            }
            let values = vec![stand_in; params as usize];
            let retry = route(&values);
            if !matches!(retry, RoutePlan::Refuse(_)) {
                plan = retry;
            }
        }
        let mut local_columns = Vec::new();
        // The columns a scattered read's targets add for the merge (sort keys, AVG's parts):
        // dropped from what the execute returns, so not announced either (Connector/C checks
        // the execute's column count against the prepare's).
        let mut hidden = 0;
        let mut gathered = None;
        let target = match plan {
            RoutePlan::Single(t) => Some(t),
            RoutePlan::Scatter { mut targets, merge } if !targets.is_empty() => {
                if let Merge::Rows(spec) = &merge {
                    hidden = spec.hidden_columns;
                }
                Some(targets.swap_remove(0))
            }
            RoutePlan::Broadcast { mut targets } if !targets.is_empty() => {
                Some(targets.swap_remove(0))
            }
            RoutePlan::Any { sql } => Some(Target {
                datanode: self.any_datanode(routing),
                sql: sql.into(),
                params: Params::first(params as usize),
                qualified: false,
            }),
            // Transaction control and SET (sysbench prepares BEGIN and COMMIT): answered by
            // the session at each execute, no backend statement; no result columns.
            RoutePlan::Session(_) if params == 0 => None,
            RoutePlan::Session(_) => {
                return Err(unsupported("a session statement with parameters"));
            }
            // `SELECT DATABASE()` and other session functions: Shoal answers each execute.
            RoutePlan::Local(LocalAnswer::SessionValues { columns, .. }) if params == 0 => {
                local_columns = columns.iter().map(|(c, _)| string_column(c)).collect();
                None
            }
            // A SELECT over information_schema: Shoal answers each execute over the catalog.
            RoutePlan::Local(LocalAnswer::Catalog { sql, show }) => {
                local_columns = self.catalog_columns(routing, &sql, show).await?;
                None
            }
            // An UPDATE that may move rows: described by its in-place form on one shard.
            RoutePlan::KeyMove(km) if !km.sources.is_empty() => Some(Target {
                datanode: km.shards[km.sources[0].shard].0,
                sql: km.sources[0].update.as_str().into(),
                params: Params::first(params as usize),
                qualified: false,
            }),
            // Unreadable to the tokenizer: MariaDB's error for it (see `unreadable`).
            RoutePlan::Refuse(e) if tokenized.is_err() => {
                return Err(cold(self.unreadable(routing, &sql, &e)).await);
            }
            RoutePlan::Refuse(e) => return Err(self.refuse(&e)),
            // Shoal's administration statements: the privilege first, then MariaDB's refusal
            // of a statement it cannot prepare.
            RoutePlan::Local(LocalAnswer::Admin(_)) => {
                self.check_admin()?;
                return Err(crate::exec::admin::not_preparable());
            }
            RoutePlan::Local(_) => {
                return Err(unsupported(
                    "EXPLAIN ROUTE or session functions with parameters through a prepared \
                     statement (text protocol only)",
                ));
            }
            // Subqueries run first at each execute: described by the outer statement with
            // stand-ins (its columns do not depend on the values bound).
            RoutePlan::BindFirst(b) => {
                let current = self.logical.as_deref();
                match routing
                    .router
                    .route_in(current, mode, charsets, &b.trial(), &[])
                {
                    RoutePlan::Single(t) => Some(t),
                    RoutePlan::Scatter {
                        mut targets,
                        merge: Merge::Rows(spec),
                    } if !targets.is_empty() => {
                        hidden = spec.hidden_columns;
                        Some(targets.swap_remove(0))
                    }
                    _ => return Err(self.refuse(&bind_first_prepared())),
                }
            }
            // Gathered on one datanode at each execute: described by the statement prepared
            // over empty copies.
            RoutePlan::Gather(g) => {
                gathered = Some(self.gather_columns(routing, &g).await?);
                None
            }
            _ => return Err(unsupported("preparing this statement")),
        };
        let columns = match target {
            _ if gathered.is_some() => gathered.unwrap_or_default(),
            Some(target) => {
                let i = self.touch(routing, target.datanode).await?;
                // The statement stays prepared on the connection: executes routed here reuse it.
                let mut defs = prepare_on(&mut self.conns.held[i].conn, &target.sql, true)
                    .await?
                    .1;
                defs.truncate(defs.len().saturating_sub(hidden));
                routing.names.rename_all(target.datanode, &mut defs);
                defs
            }
            None => self.own_definitions(local_columns),
        };
        let prepared = routing
            .router
            .prepare_route(self.logical.as_deref(), mode, charsets, &sql);
        // The parameters the client binds (a sequence's keys are Shoal's).
        let params = sequence
            .as_ref()
            .map_or(params, |s| s.client_params(params));
        let id = self.statements.add(sql.into(), prepared, params, sequence);
        let deprecate_eof = self.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
        let mut seq = reply_seq;
        let mut ok = vec![0x00];
        ok.extend_from_slice(&id.to_le_bytes());
        ok.extend_from_slice(&(columns.len() as u16).to_le_bytes());
        ok.extend_from_slice(&params.to_le_bytes());
        ok.push(0);
        ok.extend_from_slice(&0u16.to_le_bytes());
        self.client.write_packet(&mut seq, &ok);
        let eof = eof_payload(self.status);
        if params > 0 {
            let def = string_column("?");
            for _ in 0..params {
                self.client.write_packet(&mut seq, &def);
            }
            if !deprecate_eof {
                self.client.write_packet(&mut seq, &eof);
            }
        }
        if !columns.is_empty() {
            for c in &columns {
                self.client.write_packet(&mut seq, c);
            }
            if !deprecate_eof {
                self.client.write_packet(&mut seq, &eof);
            }
        }
        self.flush_client().await
    }

    /// COM_STMT_EXECUTE with the router: routed by the bound values.
    pub(super) async fn execute_routed(&mut self, routing: &Routing, reply_seq: u8) -> Result<()> {
        let mut params = std::mem::take(&mut self.statements.params);
        let mut values = std::mem::take(&mut self.statements.values);
        let id = crate::wire::command::stmt_id(&self.client.packet_payload()).unwrap_or(0);
        // Moved out for the execute and put back after: a kept target is borrowed from it,
        // where a copy per execute would write the reference counts every session preparing
        // the statement shares.
        let prepared = self.statements.get_mut(id).and_then(|s| s.route.take());
        let result = self
            .execute_with(
                routing,
                id,
                prepared.as_deref(),
                &mut params,
                &mut values,
                reply_seq,
            )
            .await;
        self.statements.params = params;
        self.statements.values = values;
        if let Some(stmt) = self.statements.get_mut(id) {
            stmt.route = prepared;
        }
        result
    }

    /// [`Self::execute_routed`] of statement `id` (its prepared route `prepared`, moved out
    /// of it meanwhile) with the session's buffers for the bound values: decodes, plans and
    /// runs it. One async level for all three: each level is re-entered when the backend
    /// answers, a state to load from the session's future per level.
    async fn execute_with(
        &mut self,
        routing: &Routing,
        id: u32,
        prepared: Option<&PreparedRoute>,
        params: &mut Vec<RawParam>,
        values: &mut Vec<ParamValue>,
        reply_seq: u8,
    ) -> Result<()> {
        let mode = self.sql_mode();
        let charsets = self.charsets().statements;
        let cs = charsets.client;
        let xa_tracking = self.xa_tracking(routing);
        let payload = self.client.packet_payload();
        let Some(stmt) = self.statements.get_mut(id) else {
            return Err(Error::unknown_statement(id, "COM_STMT_EXECUTE"));
        };
        if stmt.long_data {
            stmt.long_data = false;
            return Err(unsupported("COM_STMT_SEND_LONG_DATA"));
        }
        let n = stmt.params as usize;
        let flags = decode_execute_into(&payload, n, &mut stmt.types, params)?;
        if flags != 0 {
            return Err(unsupported("cursors on prepared statements"));
        }
        if stmt.sequence.is_some() {
            return cold(self.execute_with_sequence(routing, id, params, reply_seq)).await;
        }
        values.clear();
        values.extend(params.iter().map(|p| literal_in(p, cs)));
        let (params, values) = (&params[..], &values[..]);
        let current = self.logical.as_deref();
        let cached_route = stmt.read_route;
        let planned = match prepared {
            Some(r) => routing
                .router
                .route_kept(r, current, mode, charsets, values),
            None => Routed::Plan(
                routing
                    .router
                    .route_in(current, mode, charsets, &stmt.sql, values),
            ),
        };
        self.mark.route = Some(match &planned {
            Routed::Kept(_) => crate::observe::RouteKind::Single,
            Routed::Plan(p) => crate::observe::RouteKind::of(p),
        });
        // The text is needed again only off the common path (a point read or write routed by
        // the statement's template): its refcount sits in memory this session last touched
        // long ago, a cache miss per execute with many sessions.
        let needs_text = matches!(
            planned,
            Routed::Plan(RoutePlan::Broadcast { .. } | RoutePlan::Session(_))
        ) || (cached_route.is_none()
            && (self.rt.backends.any_read_balancing() || xa_tracking));
        let sql = needs_text.then(|| stmt.sql.clone());
        let sql = sql.as_deref().unwrap_or("");
        let route = cached_route.or_else(|| self.read_route_of(routing, mode, sql));
        if route.is_some()
            && let Some(stmt) = self.statements.get_mut(id)
        {
            stmt.read_route = route;
        }
        self.apply_want(match &planned {
            Routed::Kept(_) => ReadWant::single(route),
            Routed::Plan(plan) => ReadWant::of(route, plan),
        });
        let req = Request::Execute { params };
        let plan = match planned {
            Routed::Kept(t) => return self.execute_on(routing, t, &req, reply_seq).await,
            Routed::Plan(plan) => plan,
        };
        match plan {
            RoutePlan::Single(t) => self.execute_on(routing, &t, &req, reply_seq).await,
            RoutePlan::Any { sql } => {
                let dn = self.any_datanode(routing);
                let t = Target {
                    datanode: dn,
                    sql: sql.into(),
                    params: Params::first(n),
                    qualified: false,
                };
                self.execute_on(routing, &t, &req, reply_seq).await
            }
            RoutePlan::Refuse(e) => Err(self.refuse(&e)),
            RoutePlan::Broadcast { targets } => {
                if shoal_router::sql::classify(sql).is_dml() {
                    cold(self.run_writes(routing, targets, false, &req, reply_seq)).await
                } else {
                    Err(unsupported("DDL through a prepared statement"))
                }
            }
            RoutePlan::Scatter {
                targets,
                merge: Merge::AffectedRows,
            } => cold(self.run_writes(routing, targets, true, &req, reply_seq)).await,
            RoutePlan::Scatter {
                targets,
                merge: Merge::Rows(spec),
            } => cold(self.run_scatter(routing, targets, &spec, &req, reply_seq)).await,
            RoutePlan::Session(kind) if n == 0 => {
                cold(self.session_statement(routing, kind, Some(sql), reply_seq)).await
            }
            RoutePlan::Local(LocalAnswer::SessionValues { columns, row }) if n == 0 => {
                cold(self.answer_session_values(&columns, row, Protocol::Binary, reply_seq)).await
            }
            RoutePlan::Local(LocalAnswer::Catalog { sql, show }) => {
                let filled = self.fill_params(routing, &sql, values)?;
                cold(self.answer_catalog(routing, &filled, show, Protocol::Binary, reply_seq)).await
            }
            RoutePlan::Local(_) | RoutePlan::Session(_) => {
                Err(unsupported("this statement through a prepared statement"))
            }
            RoutePlan::BindFirst(b) => {
                cold(self.run_bind_first(routing, &b, &req, reply_seq)).await
            }
            RoutePlan::Gather(g) => cold(self.run_gather(routing, &g, &req, reply_seq)).await,
            RoutePlan::KeyMove(km) if !km.has_params => {
                cold(self.run_key_move(routing, &km, reply_seq)).await
            }
            RoutePlan::KeyMove(km) => {
                Err(self.refuse(&shoal_router::RouterError::unsupported(format!(
                    "This version of Shoal doesn't yet support 'UPDATE of shard key column \
                     {}.{} moving rows to another shard with parameters (send it as text)'",
                    km.table, km.key
                ))))
            }
        }
    }

    /// Executes on one target; a read that fails on its server before anything reached the
    /// client is retried once on another server (see `run_read_on`).
    pub(super) async fn execute_on(
        &mut self,
        routing: &Routing,
        t: &Target,
        req: &Request<'_>,
        reply_seq: u8,
    ) -> Result<()> {
        let retry = matches!(self.conns.want, super::connset::Want::Read { .. })
            && !self.in_transaction_now();
        for attempt in 0..2 {
            // A BEGIN starting the transaction on this connection goes with the execute (the
            // first time: see `begin_lost`).
            self.conns.pipeline_begin = attempt == 0;
            let i = self.touch_for(routing, t.datanode, Use::AnyDatabase).await;
            self.conns.pipeline_begin = false;
            let i = i?;
            let mut p = std::mem::take(&mut self.statements.payload);
            let out = match self.request_into(routing, i, t, req, &mut p).await {
                Ok(()) => {
                    self.conns.retry_read = retry && attempt == 0;
                    let h = &mut self.conns.held[i];
                    h.write_begin();
                    h.conn.io.write_packet(&mut 0, &p);
                    let out = self
                        .relay_from(
                            i,
                            Expect::Results { binary: true },
                            reply_seq,
                            Some((&routing.names, t.datanode)),
                        )
                        .await;
                    // The server sets the sent types up before anything can fail; should an
                    // error come from before that all the same, the next execute sends them.
                    if let Ok(Some(o)) = &out
                        && o.error
                        && let Some(h) = self.conns.held.get_mut(i)
                    {
                        h.conn.stmts.forget_types();
                    }
                    out.map(|_| ())
                }
                Err(e) => {
                    if let Some(h) = self.conns.held.get_mut(i) {
                        h.cancel_begin();
                    }
                    Err(e)
                }
            };
            self.statements.payload = p;
            self.conns.retry_read = false;
            if std::mem::take(&mut self.conns.begin_lost) {
                continue;
            }
            match self.conns.failed_read.take() {
                Some(bad) if out.is_ok() => self.conns.avoid = Some(bad),
                _ => return out,
            }
        }
        Ok(())
    }

    /// The bytes target `t` gets on held connection `i` for `req`: its SQL as a COM_QUERY, or
    /// an execute of a backend statement for it (prepared here on first use).
    pub(super) async fn request_payload(
        &mut self,
        routing: &Routing,
        i: usize,
        t: &Target,
        req: &Request<'_>,
    ) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.request_into(routing, i, t, req, &mut out).await?;
        Ok(out)
    }

    /// [`Self::request_payload`] into `out`.
    async fn request_into(
        &mut self,
        routing: &Routing,
        i: usize,
        t: &Target,
        req: &Request<'_>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let db = routing.topology.datanodes[t.datanode].database.as_str();
        request_on(&mut self.conns.held[i].conn, db, t, req, out).await
    }

    /// After execute payloads were built that will not all be sent: the servers may not hold
    /// the parameter types they carry, so the next executes send types again.
    pub(super) fn forget_unsent_types(&mut self) {
        for h in &mut self.conns.held {
            h.conn.stmts.forget_types();
        }
    }

    /// COM_STMT_CLOSE with the router. The backend statements stay in their connections'
    /// caches, for other sessions preparing the same text (evicted when a cache is full).
    pub(super) fn close_routed(&mut self, id: u32) {
        self.statements.remove(id);
    }
}

#[cfg(test)]
mod tests {
    /// Found by the `client_command` fuzz twin: a TIME parameter with a day count near
    /// u32::MAX overflowed the hour count (a panic with overflow checks, wrapped text without).
    #[test]
    fn time_parameter_with_huge_day_count() {
        let mut p = vec![COM_STMT_EXECUTE, 1, 0, 0, 0, 0, 1, 0, 0, 0];
        p.extend_from_slice(&[0x00, 0x01, 0x0b, 0x00]);
        p.extend_from_slice(&[8, 0, 0xff, 0xff, 0xff, 0xff, 23, 59, 59]);
        let mut types = ParamTypes::new();
        let (_, params) = decode_execute(&p, 1, &mut types).unwrap();
        assert_eq!(
            literal(&params[0]),
            ParamValue::Str("103079215103:59:59".into())
        );
    }

    use super::*;

    #[test]
    fn execute_round_trip_of_a_subset() {
        let params = vec![
            RawParam {
                ty: 0x08,
                unsigned: 0,
                value: Some((-5i64).to_le_bytes().to_vec()),
            },
            RawParam {
                ty: 0xfd,
                unsigned: 0,
                value: Some(vec![2, b'h', b'i']),
            },
            RawParam {
                ty: 0x06,
                unsigned: 0,
                value: None,
            },
        ];
        let p = execute_payload(9, &params, &[0, 1, 2]);
        let mut types = ParamTypes::new();
        let (flags, back) = decode_execute(&p, 3, &mut types).unwrap();
        assert_eq!(flags, 0);
        assert_eq!(literal(&back[0]), ParamValue::Int(-5));
        assert_eq!(literal(&back[1]), ParamValue::Str("hi".into()));
        assert_eq!(literal(&back[2]), ParamValue::Null);
        let sub = execute_payload(9, &params, &[1]);
        let (_, back) = decode_execute(&sub, 1, &mut types).unwrap();
        assert_eq!(literal(&back[0]), ParamValue::Str("hi".into()));
        // Without types: read with the ones the statement holds (the last ones sent).
        let mut bare = Vec::new();
        execute_payload_into(&mut bare, 9, &params, &[0, 1, 2], false);
        assert_eq!(bare.len(), p.len() - 6, "three types fewer");
        let mut held = ParamTypes::new();
        decode_execute(&p, 3, &mut held).unwrap();
        let (_, back) = decode_execute(&bare, 3, &mut held).unwrap();
        assert_eq!(literal(&back[0]), ParamValue::Int(-5));
        assert_eq!(literal(&back[1]), ParamValue::Str("hi".into()));
        assert_eq!(literal(&back[2]), ParamValue::Null);
    }

    /// Types are sent when none are held, when they change, and after being forgotten; the
    /// same types again are not.
    #[test]
    fn types_are_kept_per_statement_until_they_change() {
        let int = |v: i64| RawParam {
            ty: 0x08,
            unsigned: 0,
            value: Some(v.to_le_bytes().to_vec()),
        };
        let text = RawParam {
            ty: 0xfd,
            unsigned: 0,
            value: Some(vec![1, b'x']),
        };
        let mut held = ParamTypes::new();
        assert!(
            !keep_types(&mut held, &[int(1), int(2)], &[0, 1]),
            "none held yet"
        );
        assert!(keep_types(&mut held, &[int(3), int(4)], &[0, 1]));
        assert!(!keep_types(&mut held, &[int(3), text.clone()], &[0, 1]));
        assert!(keep_types(&mut held, &[int(5), text.clone()], &[0, 1]));
        // A subset of the client's parameters (another target's SQL) is its own list.
        assert!(!keep_types(&mut held, &[int(5), text.clone()], &[1]));
        assert!(keep_types(&mut held, &[int(6), text], &[1]));
        held.clear();
        assert!(!keep_types(&mut held, &[int(1)], &[0]), "forgotten");
    }

    #[test]
    fn short_execute_is_malformed_not_a_panic() {
        let mut types = ParamTypes::new();
        assert!(decode_execute(&[0x17, 1, 0, 0], 1, &mut types).is_err());
        assert!(
            decode_execute(
                &[0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 8, 0],
                1,
                &mut types
            )
            .is_err()
        );
    }
}

#[cfg(test)]
mod value_len_tests {
    use super::*;

    /// fuzz/findings/client_command-execute-value-len-overflow: a string parameter whose
    /// length-encoded length is 0xFFFFFFFFFFFFFFFF.
    #[test]
    fn huge_lenenc_length_is_refused_not_overflowed() {
        let b = [0xFEu8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
        assert_eq!(value_len(0xFE, &b), None);
    }
}

/// A prepared statement whose subqueries run first but whose outer statement cannot be
/// described on one datanode.
fn bind_first_prepared() -> shoal_router::RouterError {
    shoal_router::RouterError::unsupported(
        "This version of Shoal doesn't yet support 'a subquery across shards run first in a \
         prepared statement whose outer statement is planned this way'",
    )
}
