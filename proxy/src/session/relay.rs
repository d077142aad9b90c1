//! Streaming one backend response to the client.
//!
//! Frames are forwarded as raw bytes, one at a time, with just enough parsing to find where
//! the response ends: column count, column definitions, EOF or OK terminators, the
//! more-results flag, ERR. Rows are never decoded. OK packets are inspected for their status
//! flags and session-state block (how the session learns what a statement changed), and
//! re-encoded only for clients that did not negotiate CLIENT_SESSION_TRACK.

use mysql_common::constants::{CapabilityFlags, StatusFlags};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::backend::conn::BackendConn;
use crate::backend::state::Tracked;
use crate::error::{Error, Result};
use crate::wire::messages::{encode_ok, eof_status, parse_ok, read_lenenc};
use crate::wire::packet::{FLUSH_THRESHOLD, MAX_FRAME, PacketStream};

/// What kind of response the command that was just sent produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// COM_QUERY / COM_STMT_EXECUTE: OK, ERR, or result sets (possibly several).
    Results { binary: bool },
    /// COM_STMT_PREPARE: prepare-OK and parameter/column definitions, or ERR.
    Prepare,
    /// COM_FIELD_LIST: column definitions up to an EOF, or ERR.
    FieldList,
    /// COM_STMT_FETCH: rows up to a terminator, or ERR.
    Rows,
    /// One packet: OK, ERR, EOF or a string (COM_STATISTICS).
    Single,
}

/// What the response said that the session cares about.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Status flags of the last OK/EOF seen (an ERR carries none).
    pub status: Option<u16>,
    /// The response ended with an ERR.
    pub error: bool,
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

const MORE_RESULTS: u16 = StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();
const CURSOR_EXISTS: u16 = StatusFlags::SERVER_STATUS_CURSOR_EXISTS.bits();

enum State {
    Start,
    Columns(u64),
    ColumnsEof,
    Rows,
    /// Packets left after a prepare-OK (definitions and their EOFs).
    PrepareDefs(u32),
    FieldDefs,
}

fn bad(what: &str) -> Error {
    Error::BackendIo(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        what.to_string(),
    ))
}

/// Forwards the response to the command just sent on `backend`. `seq` is set to the sequence
/// id the next packet to the client must carry (for an error after a failure midway).
pub async fn relay<C: AsyncRead + AsyncWrite + Unpin>(
    backend: &mut BackendConn,
    client: &mut PacketStream<C>,
    client_caps: CapabilityFlags,
    expect: Expect,
    seq: &mut u8,
) -> Result<Outcome> {
    let deprecate_eof = backend.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let strip = backend.caps.contains(CapabilityFlags::CLIENT_SESSION_TRACK)
        && !client_caps.contains(CapabilityFlags::CLIENT_SESSION_TRACK);
    let binary = matches!(expect, Expect::Results { binary: true } | Expect::Rows);
    let mut out = Outcome::default();
    let mut state = match expect {
        Expect::Results { .. } | Expect::Single => State::Start,
        Expect::Prepare => State::Start,
        Expect::FieldList => State::FieldDefs,
        Expect::Rows => State::Rows,
    };
    let mut continuing = false;
    let mut scratch = Vec::new();
    loop {
        let h = backend.io.next_frame().await.map_err(Error::BackendIo)?;
        *seq = h.seq.wrapping_add(1);
        if continuing {
            // The rest of a packet of 16 MiB or more (a big row): bytes only.
            continuing = h.continues();
            client.write_raw(backend.io.frame());
            maybe_flush(client).await?;
            continue;
        }
        continuing = h.continues();
        let p = backend.io.frame_payload();
        let first = p.first().copied().unwrap_or(0);
        let mut done = false;

        if first == 0xFF && !continuing && !matches!(state, State::Columns(_)) {
            // ERR ends the whole response, whatever came before.
            client.write_raw(backend.io.frame());
            out.error = true;
            break;
        }

        match state {
            State::Start => match (expect, first) {
                (Expect::Prepare, 0x00) => {
                    if p.len() < 9 {
                        return Err(bad("short prepare-OK packet"));
                    }
                    out.prepared = Some(u32::from_le_bytes([p[1], p[2], p[3], p[4]]));
                    let cols = u16::from_le_bytes([p[5], p[6]]) as u32;
                    let params = u16::from_le_bytes([p[7], p[8]]) as u32;
                    let eofs = if deprecate_eof {
                        0
                    } else {
                        (params > 0) as u32 + (cols > 0) as u32
                    };
                    let left = cols + params + eofs;
                    client.write_raw(backend.io.frame());
                    if left == 0 {
                        done = true;
                    } else {
                        state = State::PrepareDefs(left);
                    }
                }
                (_, 0x00) => {
                    if expect != Expect::Single {
                        out.affected = parse_ok(p, backend.caps).map(|ok| ok.affected_rows);
                    }
                    let status =
                        forward_ok(p, backend, client, strip, h.seq, &mut out, &mut scratch)?;
                    done = status & MORE_RESULTS == 0 || expect == Expect::Single;
                }
                (Expect::Single, 0xFE) if deprecate_eof => {
                    let status =
                        forward_ok(p, backend, client, strip, h.seq, &mut out, &mut scratch)?;
                    let _ = status;
                    done = true;
                }
                (Expect::Single, _) => {
                    if first == 0xFE {
                        out.status = Some(eof_status(p));
                    }
                    client.write_raw(backend.io.frame());
                    done = true;
                }
                (_, 0xFB) => {
                    // LOCAL INFILE request: never negotiated with the backend, so never expected.
                    return Err(bad("unexpected LOCAL INFILE request from backend"));
                }
                _ => {
                    let mut b = p;
                    let n = read_lenenc(&mut b).ok_or_else(|| bad("bad column count"))?;
                    if n == 0 {
                        return Err(bad("zero column count"));
                    }
                    client.write_raw(backend.io.frame());
                    out.rows = 0;
                    out.affected = None;
                    out.had_rows = true;
                    state = State::Columns(n);
                }
            },
            State::Columns(n) => {
                client.write_raw(backend.io.frame());
                state = if n > 1 {
                    State::Columns(n - 1)
                } else if deprecate_eof {
                    State::Rows
                } else {
                    State::ColumnsEof
                };
            }
            State::ColumnsEof => {
                client.write_raw(backend.io.frame());
                let status = eof_status(p);
                out.status = Some(status);
                if binary && status & CURSOR_EXISTS != 0 {
                    // A cursor was opened: rows come later, through COM_STMT_FETCH.
                    done = true;
                } else {
                    state = State::Rows;
                }
            }
            State::Rows => {
                let terminator = first == 0xFE
                    && if deprecate_eof {
                        h.len < MAX_FRAME
                    } else {
                        h.len < 9
                    };
                if terminator {
                    let status = if deprecate_eof {
                        forward_ok(p, backend, client, strip, h.seq, &mut out, &mut scratch)?
                    } else {
                        client.write_raw(backend.io.frame());
                        let s = eof_status(p);
                        out.status = Some(s);
                        s
                    };
                    if status & MORE_RESULTS != 0 && expect != Expect::Rows {
                        state = State::Start;
                    } else {
                        done = true;
                    }
                } else {
                    out.rows += 1;
                    client.write_raw(backend.io.frame());
                }
            }
            State::PrepareDefs(left) => {
                client.write_raw(backend.io.frame());
                if left > 1 {
                    state = State::PrepareDefs(left - 1);
                } else {
                    done = true;
                }
            }
            State::FieldDefs => {
                if first == 0xFE && h.len < MAX_FRAME {
                    if deprecate_eof && h.len >= 7 {
                        forward_ok(p, backend, client, strip, h.seq, &mut out, &mut scratch)?;
                    } else {
                        out.status = Some(eof_status(p));
                        client.write_raw(backend.io.frame());
                    }
                    done = true;
                } else {
                    client.write_raw(backend.io.frame());
                }
            }
        }
        if done && !continuing {
            break;
        }
        maybe_flush(client).await?;
    }
    client.flush().await.map_err(Error::ClientIo)?;
    Ok(out)
}

async fn maybe_flush<C: AsyncRead + AsyncWrite + Unpin>(
    client: &mut PacketStream<C>,
) -> Result<()> {
    if client.pending_write() >= FLUSH_THRESHOLD {
        client.flush().await.map_err(Error::ClientIo)?;
    }
    Ok(())
}

/// Forwards an OK packet (header 0x00, or 0xFE ending a result set), recording its status and
/// session-state block; rewritten without the state block for clients that do not track it.
fn forward_ok<C: AsyncRead + AsyncWrite + Unpin>(
    p: &[u8],
    backend: &BackendConn,
    client: &mut PacketStream<C>,
    strip: bool,
    frame_seq: u8,
    out: &mut Outcome,
    scratch: &mut Vec<u8>,
) -> Result<u16> {
    let ok = parse_ok(p, backend.caps).ok_or_else(|| bad("malformed OK packet"))?;
    out.status = Some(ok.status);
    if ok.last_insert_id != 0 {
        out.last_insert_id = Some(ok.last_insert_id);
    }
    if !ok.state.is_empty() && !out.tracked.add_block(ok.state) {
        return Err(bad("malformed session-state block"));
    }
    let has_state = ok.status & StatusFlags::SERVER_SESSION_STATE_CHANGED.bits() != 0;
    if strip && (has_state || !ok.info.is_empty()) {
        scratch.clear();
        encode_ok(scratch, p[0], &ok);
        let mut s = frame_seq;
        client.write_packet(&mut s, scratch);
    } else {
        client.write_raw(backend.io.frame());
    }
    Ok(ok.status)
}
