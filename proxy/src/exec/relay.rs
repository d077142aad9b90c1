//! Streaming one backend response to the client.
//!
//! Frames are forwarded as raw bytes, one at a time; a [`ResponseReader`] classifies each
//! packet just enough to find where the response ends. Rows are never decoded. OK packets are
//! inspected for their status flags and session-state block (how the session learns what a
//! statement changed), and re-encoded only for clients that did not negotiate
//! CLIENT_SESSION_TRACK.

use mysql_common::constants::{CapabilityFlags, StatusFlags};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::backend::conn::BackendConn;
use crate::backend::interrupt::TIMED_OUT;
use crate::backend::state::Tracked;
use crate::error::{Error, Result};
use crate::runtime::names::{LogicalNames, RenameMemo};
use crate::wire::Wire;
use crate::wire::messages::{OkInfo, encode_ok, err_payload, err_payload_bytes, set_more_results};
use crate::wire::packet::PacketStream;
pub use crate::wire::response::Expect;
use crate::wire::response::{Event, protocol_error};
use shoal_router::topology::DatanodeId;

/// What the response said that the session cares about.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Status flags of the last OK/EOF seen (an ERR carries none).
    pub status: Option<u16>,
    /// The response ended with an ERR.
    pub error: bool,
    /// That ERR's code (for metrics).
    pub error_code: Option<u16>,
    pub tracked: Tracked,
    /// Statement id of a successful COM_STMT_PREPARE.
    pub prepared: Option<u32>,
    /// The last non-zero insert id an OK packet reported.
    pub last_insert_id: Option<u64>,
    /// Rows of the last result set (what FOUND_ROWS() returns after it).
    pub rows: u64,
    /// Affected rows of the last result if it was an OK, `None` if it was a result set (what
    /// ROW_COUNT() returns after the statement: the count, or -1).
    pub affected: Option<u64>,
    /// The response contained a result set.
    pub had_rows: bool,
}

/// Forwards the response to the command just sent on `backend`. `seq` is set to the sequence
/// id the next packet to the client must carry (for an error after a failure midway). Column
/// definitions are renamed by `columns` (a datanode's names in logical ones, through the
/// session's memo of them) and error messages by `errors` when given (with the router; quick
/// mode relays bytes). A client that negotiated metadata caching gets the "metadata follows"
/// byte in each column count from a backend connection without it (always 1: the definitions
/// follow). `more`: the response is not the last of a multi-statement text, so its last
/// packet says more results follow.
#[allow(clippy::too_many_arguments)]
pub async fn relay<C: AsyncRead + AsyncWrite + Unpin>(
    backend: &mut BackendConn,
    client: &mut PacketStream<C>,
    client_wire: Wire,
    expect: Expect,
    seq: &mut u8,
    mut columns: Option<(&LogicalNames, DatanodeId, &mut RenameMemo)>,
    errors: Option<(&LogicalNames, Option<&str>)>,
    more: bool,
) -> Result<Outcome> {
    let strip = backend.caps.contains(CapabilityFlags::CLIENT_SESSION_TRACK)
        && !client_wire
            .caps
            .contains(CapabilityFlags::CLIENT_SESSION_TRACK);
    let add_flag = client_wire.cache_metadata && !backend.cache_metadata;
    // The response must carry the client's numbering, from `*seq`; the backend numbers it
    // after the command it was sent (the client's own frames, or Shoal's): a statement after
    // others of a multi-statement text starts later, so its frames are renumbered by `shift`
    // (learnt from the first frame; 0 in the common case).
    let start = *seq;
    let mut shift: Option<u8> = None;
    let mut reader = backend.reader(expect);
    let mut out = Outcome::default();
    let mut continuing = false;
    let mut scratch = Vec::new();
    // Position of the next column definition in its result (or prepare response).
    let mut column = 0;
    loop {
        let mut h = backend.read_frame().await.map_err(Error::BackendIo)?;
        let shift = *shift.get_or_insert(start.wrapping_sub(h.seq));
        h.seq = h.seq.wrapping_add(shift);
        *seq = h.seq.wrapping_add(1);
        if continuing {
            // The rest of a packet of 16 MiB or more (a big row): bytes only.
            continuing = h.continues();
            forward_raw(client, backend.io.frame(), shift);
        } else {
            continuing = h.continues();
            let p = backend.io.frame_payload();
            match reader.next(p)? {
                Event::Err { code, .. } if !continuing && backend.deadlock_victim_error(code) => {
                    // The deadlock detector's KILL: said as a deadlock on one server is.
                    let (code, state, message) = crate::backend::conn::DEADLOCK;
                    let mut s = h.seq;
                    client.write_packet(&mut s, &err_payload(code, &state, message));
                    out.error = true;
                    out.error_code = Some(code);
                }
                Event::Err { code, .. } if !continuing && backend.timed_out(code) => {
                    // Shoal's KILL at `query_timeout`: said as MariaDB's own limit says it.
                    let (code, state, message) = TIMED_OUT;
                    let mut s = h.seq;
                    client.write_packet(&mut s, &err_payload(code, &state, message));
                    out.error = true;
                    out.error_code = Some(code);
                }
                Event::Err {
                    code,
                    state,
                    message,
                } => {
                    // Only an error can name a physical database or table: in logical names,
                    // read and written in the connection's (the client's) character_set_results.
                    let results = errors.map(|_| backend.charsets().results);
                    let logical = errors.and_then(|(n, current)| {
                        let m =
                            crate::backend::charset::backend_message(results.flatten(), message);
                        n.rewrite(&m, current)
                    });
                    match logical {
                        Some(m) if !continuing => {
                            let mut s = h.seq;
                            let m = crate::backend::charset::message_bytes(results.flatten(), &m);
                            client.write_packet(&mut s, &err_payload_bytes(code, &state, &m));
                        }
                        _ => forward_raw(client, backend.io.frame(), shift),
                    }
                    out.error = true;
                    out.error_code = Some(code);
                }
                Event::Ok(ok) => {
                    if expect != Expect::Single {
                        out.affected = Some(ok.affected_rows);
                    }
                    let more = more && reader.finished();
                    forward_ok(
                        &ok,
                        p[0],
                        backend,
                        client,
                        (strip, more),
                        h.seq,
                        &mut out,
                        &mut scratch,
                    )?;
                }
                Event::ResultDone { ok: Some(ok), .. } => {
                    let more = more && reader.finished();
                    forward_ok(
                        &ok,
                        p[0],
                        backend,
                        client,
                        (strip, more),
                        h.seq,
                        &mut out,
                        &mut scratch,
                    )?;
                }
                Event::ResultDone {
                    status, ok: None, ..
                } if more && reader.finished() => {
                    out.status = Some(status);
                    scratch.clear();
                    scratch.extend_from_slice(p);
                    set_more_results(&mut scratch);
                    let mut s = h.seq;
                    client.write_packet(&mut s, &scratch);
                }
                Event::ResultDone {
                    status, ok: None, ..
                }
                | Event::ColumnsDone { status } => {
                    out.status = Some(status);
                    forward_raw(client, backend.io.frame(), shift);
                }
                Event::Row(_) => {
                    // The rows already buffered behind this one go in the same copy.
                    let (more, last) = if continuing {
                        (0, None)
                    } else {
                        backend.io.take_buffered_rows()
                    };
                    out.rows += 1 + more;
                    if let Some(last) = last {
                        *seq = last.wrapping_add(shift).wrapping_add(1);
                    }
                    forward_raw(client, backend.io.frame(), shift);
                }
                Event::ColumnCount(_) => {
                    column = 0;
                    out.rows = 0;
                    out.affected = None;
                    out.had_rows = true;
                    if add_flag {
                        scratch.clear();
                        scratch.extend_from_slice(p);
                        scratch.push(1);
                        let mut s = h.seq;
                        client.write_packet(&mut s, &scratch);
                    } else {
                        forward_raw(client, backend.io.frame(), shift);
                    }
                }
                Event::PrepareOk { statement_id, .. } => {
                    column = 0;
                    out.prepared = Some(statement_id);
                    forward_raw(client, backend.io.frame(), shift);
                }
                Event::ColumnDef(d) => {
                    let renamed = match &mut columns {
                        Some((n, dn, memo)) if !continuing => n.rename_memo(*dn, column, d, memo),
                        _ => None,
                    };
                    column += 1;
                    match renamed {
                        Some(def) => {
                            let mut s = h.seq;
                            client.write_packet(&mut s, def);
                        }
                        None => forward_raw(client, backend.io.frame(), shift),
                    }
                }
                Event::ParamDef(_) | Event::ParamsDone { .. } | Event::Other(_) => {
                    forward_raw(client, backend.io.frame(), shift)
                }
            }
        }
        if reader.finished() && !continuing {
            break;
        }
        // A plain check before an async call: a flush attempted per frame would cost a
        // future's setup even when nothing is flushed.
        if client.needs_flush() {
            client.flush().await.map_err(Error::ClientIo)?;
        }
    }
    backend.note_response(&reader);
    client.flush().await.map_err(Error::ClientIo)?;
    Ok(out)
}

/// Forwards an OK packet (header 0x00, or 0xFE ending a result set), recording its status and
/// session-state block; rewritten without the state block for clients that do not track it
/// (`strip`), and with SERVER_MORE_RESULTS_EXISTS when more results follow (`more`).
#[allow(clippy::too_many_arguments)]
fn forward_ok<C: AsyncRead + AsyncWrite + Unpin>(
    ok: &OkInfo<'_>,
    header: u8,
    backend: &BackendConn,
    client: &mut PacketStream<C>,
    (strip, more): (bool, bool),
    frame_seq: u8,
    out: &mut Outcome,
    scratch: &mut Vec<u8>,
) -> Result<()> {
    out.status = Some(ok.status);
    if ok.last_insert_id != 0 {
        out.last_insert_id = Some(ok.last_insert_id);
    }
    if !ok.state.is_empty() && !out.tracked.add_block(ok.state) {
        return Err(protocol_error("malformed session-state block"));
    }
    let has_state = ok.status & StatusFlags::SERVER_SESSION_STATE_CHANGED.bits() != 0;
    if strip && (has_state || !ok.info.is_empty()) {
        scratch.clear();
        encode_ok(scratch, header, ok);
        if more {
            set_more_results(scratch);
        }
        let mut s = frame_seq;
        client.write_packet(&mut s, scratch);
    } else if more {
        scratch.clear();
        scratch.extend_from_slice(backend.io.frame_payload());
        set_more_results(scratch);
        let mut s = frame_seq;
        client.write_packet(&mut s, scratch);
    } else {
        forward_raw(
            client,
            backend.io.frame(),
            frame_seq.wrapping_sub(backend_seq(backend)),
        );
    }
    Ok(())
}

/// The sequence id the backend gave the frame last read.
fn backend_seq(backend: &BackendConn) -> u8 {
    backend.io.frame().get(3).copied().unwrap_or(0)
}

/// Forwards raw frames, their sequence ids moved by `shift` (0: as they are).
fn forward_raw<C: AsyncRead + AsyncWrite + Unpin>(
    client: &mut PacketStream<C>,
    bytes: &[u8],
    shift: u8,
) {
    if shift == 0 {
        client.write_raw(bytes);
    } else {
        let mut seq = bytes.get(3).copied().unwrap_or(0).wrapping_add(shift);
        client.write_raw_reseq(bytes, &mut seq);
    }
}
