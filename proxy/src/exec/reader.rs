//! A thin reader of backend responses for the scatter and broadcast paths: the end of a write
//! (its OK or ERR) and a result set row by row. Temporary: it goes once the shared sans-IO
//! response parser (`wire::response`) lands, which the relay and the connection will use too.

use mysql_common::constants::CapabilityFlags;

use crate::backend::conn::BackendConn;
use crate::backend::state::Tracked;
use crate::error::{Error, Result};
use crate::wire::messages::{eof_status, parse_err, parse_ok, read_lenenc};
use crate::wire::packet::MAX_FRAME;

const MORE_RESULTS: u16 = 0x0008;

fn bad(what: &str) -> Error {
    Error::BackendIo(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        what.to_string(),
    ))
}

/// A backend ERR packet as the error the client gets.
pub fn server_err(payload: &[u8]) -> Error {
    match parse_err(payload) {
        Some((code, state, msg)) => Error::Reply {
            code,
            state,
            message: String::from_utf8_lossy(msg).into_owned(),
        },
        None => bad("malformed ERR packet from backend"),
    }
}

/// What the OK ending a write said.
#[derive(Debug, Default)]
pub struct WriteDone {
    pub affected: u64,
    pub last_insert_id: u64,
    pub warnings: u16,
    pub status: u16,
    pub tracked: Tracked,
}

/// Reads a whole response to a statement that was sent: `Ok` with its last OK, `Err(Reply)` on
/// ERR (the response is then over), `Err(BackendIo)` if the connection broke. A result set in
/// it is read and dropped.
pub async fn read_write_result(conn: &mut BackendConn) -> Result<WriteDone> {
    let deprecate_eof = conn.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let mut done = WriteDone::default();
    loop {
        conn.io.next_packet().await.map_err(Error::BackendIo)?;
        let p = conn.io.packet_payload();
        match p.first() {
            Some(0x00) => {
                let ok = parse_ok(&p, conn.caps).ok_or_else(|| bad("bad OK packet"))?;
                done.affected = ok.affected_rows;
                if ok.last_insert_id != 0 {
                    done.last_insert_id = ok.last_insert_id;
                }
                done.warnings = done.warnings.saturating_add(ok.warnings);
                done.status = ok.status;
                if !ok.state.is_empty() {
                    done.tracked.add_block(ok.state);
                }
                if ok.status & MORE_RESULTS == 0 {
                    return Ok(done);
                }
            }
            Some(0xFF) => return Err(server_err(&p)),
            _ => {
                let mut b = &p[..];
                let cols = read_lenenc(&mut b).ok_or_else(|| bad("bad column count"))?;
                drop(p);
                skip_columns(conn, cols, deprecate_eof).await?;
                loop {
                    match next_row(conn).await? {
                        Row::Data(_) => {}
                        Row::End(status) => {
                            done.status = status;
                            break;
                        }
                    }
                }
                if done.status & MORE_RESULTS == 0 {
                    return Ok(done);
                }
            }
        }
    }
}

async fn skip_columns(conn: &mut BackendConn, cols: u64, deprecate_eof: bool) -> Result<()> {
    for _ in 0..cols {
        conn.io.next_packet().await.map_err(Error::BackendIo)?;
    }
    if !deprecate_eof {
        conn.io.next_packet().await.map_err(Error::BackendIo)?;
    }
    Ok(())
}

/// The start of a result set: its column definitions (payloads), or the OK/ERR that came
/// instead (`Err(Reply)` for an ERR; an OK is a protocol surprise for a SELECT).
pub async fn read_columns(conn: &mut BackendConn) -> Result<Vec<Vec<u8>>> {
    let deprecate_eof = conn.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
    conn.io.next_packet().await.map_err(Error::BackendIo)?;
    let cols = {
        let p = conn.io.packet_payload();
        match p.first() {
            Some(0xFF) => return Err(server_err(&p)),
            Some(0x00) => return Err(bad("a shard answered a SELECT without a result set")),
            _ => {
                let mut b = &p[..];
                read_lenenc(&mut b).ok_or_else(|| bad("bad column count"))?
            }
        }
    };
    let mut defs = Vec::with_capacity(cols.min(4096) as usize);
    for _ in 0..cols {
        conn.io.next_packet().await.map_err(Error::BackendIo)?;
        defs.push(conn.io.packet_payload().into_owned());
    }
    if !deprecate_eof {
        conn.io.next_packet().await.map_err(Error::BackendIo)?;
    }
    Ok(defs)
}

/// One packet of a result set's row section.
pub enum Row {
    Data(Vec<u8>),
    /// The terminator, with its status flags.
    End(u16),
}

/// The next row of the result set being read, or its end; `Err(Reply)` for an ERR instead.
pub async fn next_row(conn: &mut BackendConn) -> Result<Row> {
    let deprecate_eof = conn.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let info = conn.io.next_packet().await.map_err(Error::BackendIo)?;
    let p = conn.io.packet_payload();
    match p.first() {
        Some(0xFF) => Err(server_err(&p)),
        Some(0xFE) if deprecate_eof && info.payload_len < MAX_FRAME => {
            let ok = parse_ok(&p, conn.caps).ok_or_else(|| bad("bad OK packet"))?;
            Ok(Row::End(ok.status))
        }
        Some(0xFE) if !deprecate_eof && info.payload_len < 9 => Ok(Row::End(eof_status(&p))),
        _ => Ok(Row::Data(p.into_owned())),
    }
}

/// Reads what is left of a response (after an error elsewhere, or a LIMIT reached), so the
/// connection can serve the next statement.
pub async fn drain_rows(conn: &mut BackendConn) -> Result<()> {
    loop {
        match next_row(conn).await {
            Ok(Row::Data(_)) => {}
            Ok(Row::End(status)) => {
                if status & MORE_RESULTS != 0 {
                    // Unexpected for a SELECT, but read it all.
                    let _ = read_write_result(conn).await;
                }
                return Ok(());
            }
            Err(Error::Reply { .. }) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}
