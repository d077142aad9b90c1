//! What a target gets on a backend connection: its SQL as a COM_QUERY, or a COM_STMT_EXECUTE
//! of a statement prepared there (lazily, kept in the connection's statement cache), and the
//! backend statements' PREPARE and CLOSE.

use std::sync::Arc;

use shoal_router::plan::Target;

use super::params::RawParam;
use crate::backend::conn::BackendConn;
use crate::backend::stmt_cache::{ParamTypes, fingerprint, fingerprint_in};
use crate::error::{Error, Result};
use crate::out_of_line::cold;
use crate::wire::command::{COM_STMT_CLOSE, COM_STMT_EXECUTE, COM_STMT_PREPARE};
use crate::wire::response::{self, Event};

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
pub(super) async fn prepare_on(
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

/// The SQL request each target gets: text, or an execute of a prepared statement.
pub enum Request<'a> {
    Text,
    Execute { params: &'a [RawParam] },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::params::{decode_execute, literal};
    use shoal_router::plan::ParamValue;
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
