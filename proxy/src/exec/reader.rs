//! Reading backend responses for the scatter and broadcast paths, on the one response parser
//! ([`crate::wire::response`]): the end of a write (its OK or ERR), and a result set column
//! definitions first, then row by row as the merge asks.

use crate::backend::conn::BackendConn;
use crate::backend::state::Tracked;
use crate::error::{Error, Result};
use crate::wire::response::{Event, Expect, ResponseReader, protocol_error};

/// A shard's ERR as an error; the end of a statement Shoal interrupted at `query_timeout` as
/// MariaDB's own limit says it.
fn reply(conn: &BackendConn, code: u16, state: [u8; 5], message: &[u8]) -> Error {
    if conn.deadlock_victim_error(code) {
        let (code, state, message) = crate::backend::conn::DEADLOCK;
        return Error::reply(code, &state, message);
    }
    if conn.timed_out(code) {
        let (code, state, message) = crate::backend::interrupt::TIMED_OUT;
        return Error::reply(code, &state, message);
    }
    Error::Reply {
        code,
        state,
        message: crate::backend::charset::backend_message(conn.charsets().results, message),
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
    let mut reader = conn.reader(Expect::Results { binary: false });
    let mut done = WriteDone::default();
    let mut error = None;
    while !reader.finished() {
        conn.read_packet().await.map_err(Error::BackendIo)?;
        let p = conn.io.packet_payload();
        match reader.next(&p)? {
            Event::Ok(ok) => {
                done.affected = ok.affected_rows;
                if ok.last_insert_id != 0 {
                    done.last_insert_id = ok.last_insert_id;
                }
                done.warnings = done.warnings.saturating_add(ok.warnings);
                done.status = ok.status;
                if !ok.state.is_empty() {
                    done.tracked.add_block(ok.state);
                }
            }
            Event::ResultDone { status, ok, .. } => {
                done.status = status;
                if let Some(ok) = ok
                    && !ok.state.is_empty()
                {
                    done.tracked.add_block(ok.state);
                }
            }
            Event::Err {
                code,
                state,
                message,
            } => error = Some(reply(conn, code, state, message)),
            _ => {}
        }
    }
    conn.note_response(&reader);
    match error {
        Some(e) => Err(e),
        None => Ok(done),
    }
}

/// One result set being read from one backend connection.
pub struct ResultStream {
    reader: ResponseReader,
}

/// One packet of a result set's row section.
pub enum Row {
    Data(Vec<u8>),
    /// The terminator.
    End,
}

impl ResultStream {
    pub fn new(conn: &BackendConn, binary: bool) -> Self {
        ResultStream {
            reader: conn.reader(Expect::Results { binary }),
        }
    }

    /// The column definitions (payloads) of the result set, or `Err(Reply)` for the ERR that
    /// came instead.
    pub async fn columns(&mut self, conn: &mut BackendConn) -> Result<Vec<Vec<u8>>> {
        let mut defs = Vec::new();
        loop {
            conn.read_packet().await.map_err(Error::BackendIo)?;
            let p = conn.io.packet_payload();
            match self.reader.next(&p)? {
                Event::Err {
                    code,
                    state,
                    message,
                } => {
                    let e = reply(conn, code, state, message);
                    drop(p);
                    conn.note_response(&self.reader);
                    return Err(e);
                }
                Event::ColumnCount(n) => defs.reserve(n.min(4096) as usize),
                Event::ColumnDef(d) => defs.push(d.to_vec()),
                Event::Ok(_) => {
                    return Err(protocol_error(
                        "a shard answered a SELECT without a result set",
                    ));
                }
                _ => {}
            }
            if self.reader.in_rows() {
                return Ok(defs);
            }
            if self.reader.finished() {
                return Err(protocol_error("a result set without rows section"));
            }
        }
    }

    /// The next row, or the end of the rows; `Err(Reply)` for an ERR instead.
    pub async fn next_row(&mut self, conn: &mut BackendConn) -> Result<Row> {
        self.next_row_in(conn, Vec::new()).await
    }

    /// [`Self::next_row`] read into `buf` (cleared first): the buffer of a row already sent,
    /// so that a merge of many rows does not allocate one per row.
    pub async fn next_row_in(&mut self, conn: &mut BackendConn, mut buf: Vec<u8>) -> Result<Row> {
        conn.read_packet().await.map_err(Error::BackendIo)?;
        let p = conn.io.packet_payload();
        let row = match self.reader.next(&p)? {
            Event::Row(r) => {
                buf.clear();
                buf.extend_from_slice(r);
                return Ok(Row::Data(buf));
            }
            Event::ResultDone { .. } => {
                if !self.reader.finished() {
                    // More results after a SELECT: not something a shard query produces.
                    return Err(protocol_error("several result sets from one shard query"));
                }
                Ok(Row::End)
            }
            Event::Err {
                code,
                state,
                message,
            } => Err(reply(conn, code, state, message)),
            _ => return Err(protocol_error("unexpected packet among rows")),
        };
        drop(p);
        conn.note_response(&self.reader);
        row
    }

    /// Reads what is left (after an error elsewhere, or a LIMIT reached), so the connection
    /// can serve the next statement.
    pub async fn drain(&mut self, conn: &mut BackendConn) -> Result<()> {
        while !self.reader.finished() {
            conn.read_packet().await.map_err(Error::BackendIo)?;
            let p = conn.io.packet_payload();
            self.reader.next(&p)?;
        }
        conn.note_response(&self.reader);
        Ok(())
    }
}
