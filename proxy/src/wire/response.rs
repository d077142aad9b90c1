//! The one reader of backend responses: payloads in, events out, no I/O.
//!
//! Every consumer of a response (the relay that streams it to the client, the backend
//! connection's own commands, the scatter executor) feeds the packets it reads, in order, to a
//! [`ResponseReader`] made for the command that was sent, and gets one [`Event`] per packet until
//! [`ResponseReader::finished`]. The reader only classifies: rows and column definitions are
//! handed back as the payload slices they came in, never decoded, so forwarding them costs
//! nothing beyond a look at the first byte.
//!
//! Packets of 16 MiB - 1 bytes or more arrive split in frames. A consumer that forwards frames
//! may pass just the first frame of such a packet: a split packet is always a row or a column
//! definition in practice, and those are recognised from the first byte and the length alone
//! (a first frame is exactly [`MAX_FRAME`] long).

use mysql_common::constants::{CapabilityFlags, StatusFlags};

use crate::error::{Error, Result};
use crate::wire::messages::{OkInfo, parse_err, parse_ok, read_lenenc};
use crate::wire::packet::MAX_FRAME;

/// What kind of response the command that was just sent produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// COM_QUERY / COM_STMT_EXECUTE: OK, ERR, or result sets (possibly several). MariaDB sets
    /// SERVER_STATUS_CURSOR_EXISTS on every result a procedure or function sends while one of
    /// its own cursors is open (or was): the rows follow as usual, so the flag is ignored here.
    Results { binary: bool },
    /// COM_STMT_EXECUTE that asked for a cursor (CURSOR_TYPE_READ_ONLY): as `Results`, except
    /// that CURSOR_EXISTS after the column definitions (without MORE_RESULTS, which only a
    /// procedure's results have) ends the response: the rows come by COM_STMT_FETCH.
    CursorResults,
    /// COM_STMT_PREPARE: prepare-OK and parameter/column definitions, or ERR.
    Prepare,
    /// COM_FIELD_LIST: column definitions up to an EOF, or ERR.
    FieldList,
    /// COM_STMT_FETCH: rows up to a terminator, or ERR.
    Rows,
    /// One packet: OK, ERR, EOF or a string (COM_STATISTICS).
    Single,
}

/// One packet of a response, classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// An OK packet (header 0x00): a statement's result that is not a result set. More
    /// results follow when its status has SERVER_MORE_RESULTS_EXISTS.
    Ok(OkInfo<'a>),
    /// An ERR packet: the response ends here, whatever came before.
    Err {
        code: u16,
        state: [u8; 5],
        message: &'a [u8],
    },
    /// The column count that opens a result set.
    ColumnCount(u64),
    /// One column definition (of a result set, a prepared statement or a field list).
    ColumnDef(&'a [u8]),
    /// The EOF packet after column definitions; only without CLIENT_DEPRECATE_EOF, where the
    /// last [`Event::ColumnDef`] is followed directly by rows. When the execute asked for a
    /// cursor and the status has SERVER_STATUS_CURSOR_EXISTS, a cursor was opened and the
    /// response ends here: rows come through COM_STMT_FETCH.
    ColumnsDone { status: u16 },
    /// One row, text or binary protocol, as sent.
    Row(&'a [u8]),
    /// The packet ending the rows of a result set, a field list, a fetch, or a single-packet
    /// response: an old EOF (`ok` is `None`), or under CLIENT_DEPRECATE_EOF an OK packet with
    /// header 0xFE (`ok` holds it, with its session-state block).
    ResultDone {
        status: u16,
        warnings: u16,
        ok: Option<OkInfo<'a>>,
    },
    /// The first packet of a successful COM_STMT_PREPARE.
    PrepareOk {
        statement_id: u32,
        columns: u16,
        params: u16,
        warnings: u16,
    },
    /// One parameter definition of a prepared statement.
    ParamDef(&'a [u8]),
    /// The EOF after parameter definitions (only without CLIENT_DEPRECATE_EOF).
    ParamsDone { status: u16 },
    /// A single-packet response that is none of the above (COM_STATISTICS' string).
    Other(&'a [u8]),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Start,
    /// Column definitions of a result set still to come.
    Columns(u64),
    ColumnsEof,
    Rows,
    /// Parameter definitions still to come, then `cols` column definitions.
    Params {
        left: u16,
        cols: u16,
    },
    ParamsEof {
        cols: u16,
    },
    /// Column definitions of a prepared statement still to come.
    PrepColumns(u16),
    PrepColumnsEof,
    FieldDefs,
    Done,
}

const MORE_RESULTS: u16 = StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();
const CURSOR_EXISTS: u16 = StatusFlags::SERVER_STATUS_CURSOR_EXISTS.bits();
const IN_TRANS: u16 = StatusFlags::SERVER_STATUS_IN_TRANS.bits();
const AUTOCOMMIT: u16 = StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits();

/// A response the backend should never send: the connection cannot be trusted any more.
pub fn protocol_error(what: &str) -> Error {
    Error::BackendIo(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        what.to_string(),
    ))
}

/// Follows one response packet by packet.
#[derive(Debug, Clone)]
pub struct ResponseReader {
    expect: Expect,
    caps: CapabilityFlags,
    deprecate_eof: bool,
    /// MARIADB_CLIENT_CACHE_METADATA: a column count is followed by a byte saying whether
    /// the column definitions follow.
    metadata_flag: bool,
    state: State,
    /// Status flags of the last OK/EOF read so far, and whether an ERR came: what the
    /// response says of the connection's transaction ([`Self::status_after`]).
    status: Option<u16>,
    /// The code of the ERR that ended the response, if one did.
    error: Option<u16>,
}

impl ResponseReader {
    /// A reader for the response to a command of kind `expect`, on a connection that
    /// negotiated `caps` (CLIENT_DEPRECATE_EOF and CLIENT_SESSION_TRACK change the bytes).
    pub fn new(expect: Expect, caps: CapabilityFlags) -> ResponseReader {
        let state = match expect {
            Expect::Results { .. } | Expect::CursorResults | Expect::Prepare | Expect::Single => {
                State::Start
            }
            Expect::FieldList => State::FieldDefs,
            Expect::Rows => State::Rows,
        };
        ResponseReader {
            expect,
            caps,
            deprecate_eof: caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF),
            metadata_flag: false,
            state,
            status: None,
            error: None,
        }
    }

    /// The same reader for a connection that negotiated MARIADB_CLIENT_CACHE_METADATA (`on`).
    pub fn metadata_flag(mut self, on: bool) -> ResponseReader {
        self.metadata_flag = on;
        self
    }

    /// The connection's status flags after what was read of the response, given `before`,
    /// its flags before the command. An ERR carries no flags: after one, a connection that was
    /// in a transaction is taken to still be in it (a deadlock's rollback is not reported
    /// either), and one with autocommit off may have started one. Only IN_TRANS and
    /// AUTOCOMMIT are meaningful across commands.
    pub fn status_after(&self, before: u16) -> u16 {
        let base = self.status.unwrap_or(before);
        if self.error.is_some() && base & AUTOCOMMIT == 0 {
            base | IN_TRANS
        } else {
            base
        }
    }

    /// The code of the ERR the response ended with, if any.
    pub fn error_code(&self) -> Option<u16> {
        self.error
    }

    /// Whether the response is complete: the next packet belongs to the next command.
    pub fn finished(&self) -> bool {
        self.state == State::Done
    }

    /// Whether the rows of a result set come next (the column definitions are all read).
    pub fn in_rows(&self) -> bool {
        self.state == State::Rows
    }

    /// Classifies the next packet of the response. An `Err` means the backend broke the
    /// protocol (or asked for LOCAL INFILE, never negotiated): the connection must be dropped.
    pub fn next<'a>(&mut self, payload: &'a [u8]) -> Result<Event<'a>> {
        let ev = self.classify(payload)?;
        match &ev {
            Event::Ok(ok) => self.status = Some(ok.status),
            Event::ResultDone { status, .. }
            | Event::ColumnsDone { status }
            | Event::ParamsDone { status } => self.status = Some(*status),
            Event::Err { code, .. } => self.error = Some(*code),
            _ => {}
        }
        Ok(ev)
    }

    fn classify<'a>(&mut self, payload: &'a [u8]) -> Result<Event<'a>> {
        let first = match payload.first() {
            Some(&b) => b,
            None => return Err(protocol_error("empty packet in a response")),
        };
        if self.state == State::Done {
            return Err(protocol_error("packet after the end of a response"));
        }
        if first == 0xFF {
            // ERR ends the whole response, whatever came before. No row or definition starts
            // with 0xFF (not a valid length-encoded prefix; binary rows start with 0x00).
            let (code, state, message) =
                parse_err(payload).ok_or_else(|| protocol_error("malformed ERR packet"))?;
            self.state = State::Done;
            return Ok(Event::Err {
                code,
                state,
                message,
            });
        }
        match self.state {
            State::Start => self.start(first, payload),
            State::Columns(n) => {
                self.state = if n > 1 {
                    State::Columns(n - 1)
                } else if self.deprecate_eof {
                    State::Rows
                } else {
                    State::ColumnsEof
                };
                Ok(Event::ColumnDef(payload))
            }
            State::ColumnsEof => {
                let status = self.eof(first, payload, "column definitions")?;
                let asked = self.expect == Expect::CursorResults;
                // A procedure's results carry MORE_RESULTS; an execute's cursor never does.
                let opened = status & CURSOR_EXISTS != 0 && status & MORE_RESULTS == 0;
                self.state = if asked && opened {
                    State::Done
                } else {
                    State::Rows
                };
                Ok(Event::ColumnsDone { status })
            }
            State::Rows => {
                if !self.is_terminator(first, payload) {
                    return Ok(Event::Row(payload));
                }
                let ev = self.terminator(payload)?;
                let more =
                    matches!(ev, Event::ResultDone { status, .. } if status & MORE_RESULTS != 0);
                self.state = if more && self.expect != Expect::Rows {
                    State::Start
                } else {
                    State::Done
                };
                Ok(ev)
            }
            State::Params { left, cols } => {
                self.state = if left > 1 {
                    State::Params {
                        left: left - 1,
                        cols,
                    }
                } else if !self.deprecate_eof {
                    State::ParamsEof { cols }
                } else {
                    self.prep_columns(cols)
                };
                Ok(Event::ParamDef(payload))
            }
            State::ParamsEof { cols } => {
                let status = self.eof(first, payload, "parameter definitions")?;
                self.state = self.prep_columns(cols);
                Ok(Event::ParamsDone { status })
            }
            State::PrepColumns(n) => {
                self.state = if n > 1 {
                    State::PrepColumns(n - 1)
                } else if self.deprecate_eof {
                    State::Done
                } else {
                    State::PrepColumnsEof
                };
                Ok(Event::ColumnDef(payload))
            }
            State::PrepColumnsEof => {
                let status = self.eof(first, payload, "column definitions")?;
                self.state = State::Done;
                Ok(Event::ColumnsDone { status })
            }
            State::FieldDefs => {
                if self.is_terminator(first, payload) {
                    self.state = State::Done;
                    self.terminator(payload)
                } else {
                    Ok(Event::ColumnDef(payload))
                }
            }
            State::Done => unreachable!("checked above"),
        }
    }

    fn start<'a>(&mut self, first: u8, payload: &'a [u8]) -> Result<Event<'a>> {
        match (self.expect, first) {
            (Expect::Prepare, 0x00) => {
                let p = payload;
                if p.len() < 9 {
                    return Err(protocol_error("short prepare-OK packet"));
                }
                let statement_id = u32::from_le_bytes([p[1], p[2], p[3], p[4]]);
                let columns = u16::from_le_bytes([p[5], p[6]]);
                let params = u16::from_le_bytes([p[7], p[8]]);
                let warnings = match p.get(10..12) {
                    Some(w) => u16::from_le_bytes([w[0], w[1]]),
                    None => 0,
                };
                self.state = if params > 0 {
                    State::Params {
                        left: params,
                        cols: columns,
                    }
                } else {
                    self.prep_columns(columns)
                };
                Ok(Event::PrepareOk {
                    statement_id,
                    columns,
                    params,
                    warnings,
                })
            }
            (Expect::Prepare, _) => Err(protocol_error("unexpected answer to COM_STMT_PREPARE")),
            (_, 0x00) => {
                let ok = parse_ok(payload, self.caps)
                    .ok_or_else(|| protocol_error("malformed OK packet"))?;
                self.state = if ok.status & MORE_RESULTS == 0 || self.expect == Expect::Single {
                    State::Done
                } else {
                    State::Start
                };
                Ok(Event::Ok(ok))
            }
            (Expect::Single, 0xFE) => {
                self.state = State::Done;
                self.terminator(payload)
            }
            (Expect::Single, _) => {
                self.state = State::Done;
                Ok(Event::Other(payload))
            }
            (_, 0xFB) => Err(protocol_error(
                "LOCAL INFILE request from backend (never negotiated): refused",
            )),
            (_, 0xFE) => Err(protocol_error("EOF packet where a result was expected")),
            _ => {
                let mut b = payload;
                let n = read_lenenc(&mut b).ok_or_else(|| protocol_error("bad column count"))?;
                let follows = match (self.metadata_flag, b) {
                    (false, []) => true,
                    (true, [f @ (0 | 1)]) => *f == 1,
                    _ => return Err(protocol_error("bad column count")),
                };
                if n == 0 {
                    return Err(protocol_error("bad column count"));
                }
                self.state = if follows {
                    State::Columns(n)
                } else if self.deprecate_eof {
                    State::Rows
                } else {
                    State::ColumnsEof
                };
                Ok(Event::ColumnCount(n))
            }
        }
    }

    fn prep_columns(&self, cols: u16) -> State {
        if cols > 0 {
            State::PrepColumns(cols)
        } else {
            State::Done
        }
    }

    /// Whether a packet met where rows (or definitions) may come ends them. A row can start
    /// with 0xFE only when its first value is 16 MiB or longer (an 8-byte length), so the
    /// packet is then at least a whole frame; an old EOF is 5 bytes, an OK with header 0xFE
    /// (CLIENT_DEPRECATE_EOF) shorter than a frame.
    fn is_terminator(&self, first: u8, payload: &[u8]) -> bool {
        first == 0xFE
            && if self.deprecate_eof {
                payload.len() < MAX_FRAME
            } else {
                payload.len() < 9
            }
    }

    fn terminator<'a>(&self, payload: &'a [u8]) -> Result<Event<'a>> {
        // Under DEPRECATE_EOF the server sends an OK (7 bytes or more) with header 0xFE.
        if self.deprecate_eof && payload.len() >= 7 {
            let ok = parse_ok(payload, self.caps)
                .ok_or_else(|| protocol_error("malformed OK packet"))?;
            return Ok(Event::ResultDone {
                status: ok.status,
                warnings: ok.warnings,
                ok: Some(ok),
            });
        }
        let (warnings, status) = eof_fields(payload);
        Ok(Event::ResultDone {
            status,
            warnings,
            ok: None,
        })
    }

    fn eof(&self, first: u8, payload: &[u8], after: &str) -> Result<u16> {
        if first != 0xFE || payload.len() >= 9 {
            return Err(protocol_error(&format!("missing EOF after {after}")));
        }
        Ok(eof_fields(payload).1)
    }
}

/// Warnings and status of an old EOF packet (0xFE, warnings, status); zero if absent (the
/// pre-4.1 one-byte EOF).
fn eof_fields(p: &[u8]) -> (u16, u16) {
    let at = |i: usize| match p.get(i..i + 2) {
        Some(s) => u16::from_le_bytes([s[0], s[1]]),
        None => 0,
    };
    (at(1), at(3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::messages::{err_payload, put_lenenc, put_lenenc_bytes};

    const AUTOCOMMIT: u16 = 0x0002;

    fn caps(deprecate: bool) -> CapabilityFlags {
        let mut c = CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SESSION_TRACK
            | CapabilityFlags::CLIENT_MULTI_RESULTS;
        if deprecate {
            c |= CapabilityFlags::CLIENT_DEPRECATE_EOF;
        }
        c
    }

    /// A column definition as MariaDB 10.11 sends it for `SELECT id FROM t` (INT, utf8mb4).
    fn coldef(name: &str, ty: u8) -> Vec<u8> {
        let mut p = Vec::new();
        for s in ["def", "db", "t", "t", name, name] {
            put_lenenc_bytes(&mut p, s.as_bytes());
        }
        p.push(0x0C);
        p.extend_from_slice(&45u16.to_le_bytes());
        p.extend_from_slice(&11u32.to_le_bytes());
        p.push(ty);
        p.extend_from_slice(&0u16.to_le_bytes());
        p.push(0);
        p.extend_from_slice(&[0, 0]);
        p
    }

    fn eof(status: u16) -> Vec<u8> {
        let mut p = vec![0xFE, 0, 0];
        p.extend_from_slice(&status.to_le_bytes());
        p
    }

    fn ok(header: u8, affected: u64, status: u16, state: &[u8]) -> Vec<u8> {
        let mut p = vec![header];
        put_lenenc(&mut p, affected);
        put_lenenc(&mut p, 0);
        let status = if state.is_empty() {
            status
        } else {
            status | StatusFlags::SERVER_SESSION_STATE_CHANGED.bits()
        };
        p.extend_from_slice(&status.to_le_bytes());
        p.extend_from_slice(&0u16.to_le_bytes());
        if !state.is_empty() {
            put_lenenc_bytes(&mut p, b"");
            put_lenenc_bytes(&mut p, state);
        }
        p
    }

    fn text_row(vals: &[Option<&[u8]>]) -> Vec<u8> {
        let mut p = Vec::new();
        for v in vals {
            match v {
                Some(v) => put_lenenc_bytes(&mut p, v),
                None => p.push(0xFB),
            }
        }
        p
    }

    fn run(expect: Expect, deprecate: bool, packets: &[Vec<u8>]) -> Vec<String> {
        run_reader(ResponseReader::new(expect, caps(deprecate)), packets)
    }

    fn run_reader(mut r: ResponseReader, packets: &[Vec<u8>]) -> Vec<String> {
        let mut out = Vec::new();
        for (i, p) in packets.iter().enumerate() {
            assert!(!r.finished(), "finished early, before packet {i}");
            let ev = r.next(p).unwrap();
            out.push(match ev {
                Event::Ok(ok) => format!("ok {} {:x}", ok.affected_rows, ok.status),
                Event::Err { code, .. } => format!("err {code}"),
                Event::ColumnCount(n) => format!("count {n}"),
                Event::ColumnDef(_) => "col".into(),
                Event::ColumnsDone { status } => format!("cols-done {status:x}"),
                Event::Row(_) => "row".into(),
                Event::ResultDone { status, ok, .. } => {
                    format!("done {status:x}{}", if ok.is_some() { " ok" } else { "" })
                }
                Event::PrepareOk {
                    statement_id,
                    columns,
                    params,
                    ..
                } => format!("prepared {statement_id} {columns} {params}"),
                Event::ParamDef(_) => "param".into(),
                Event::ParamsDone { .. } => "params-done".into(),
                Event::Other(_) => "other".into(),
            });
        }
        assert!(r.finished(), "not finished after the last packet");
        out
    }

    fn result_set(deprecate: bool, rows: usize, end_status: u16) -> Vec<Vec<u8>> {
        let mut v = vec![vec![2], coldef("a", 3), coldef("b", 253)];
        if !deprecate {
            v.push(eof(AUTOCOMMIT));
        }
        for i in 0..rows {
            let n = i.to_string();
            v.push(text_row(&[Some(n.as_bytes()), None]));
        }
        v.push(if deprecate {
            ok(0xFE, 0, end_status, b"")
        } else {
            eof(end_status)
        });
        v
    }

    #[test]
    fn result_set_with_and_without_deprecate_eof() {
        let got = run(
            Expect::Results { binary: false },
            false,
            &result_set(false, 2, 2),
        );
        assert_eq!(
            got,
            [
                "count 2",
                "col",
                "col",
                "cols-done 2",
                "row",
                "row",
                "done 2"
            ]
        );
        let got = run(
            Expect::Results { binary: false },
            true,
            &result_set(true, 2, 2),
        );
        assert_eq!(got, ["count 2", "col", "col", "row", "row", "done 2 ok"]);
    }

    #[test]
    fn metadata_flag_says_whether_definitions_follow() {
        let binary = Expect::Results { binary: true };
        for deprecate in [false, true] {
            let flagged = || ResponseReader::new(binary, caps(deprecate)).metadata_flag(true);
            // Metadata follows (1): as without the flag.
            let mut v = result_set(deprecate, 1, AUTOCOMMIT);
            v[0] = vec![2, 1];
            let got = run_reader(flagged(), &v);
            assert_eq!(got.iter().filter(|e| *e == "col").count(), 2);
            // Skipped (0): straight to the EOF (or the rows under DEPRECATE_EOF).
            let mut skipped = vec![vec![2, 0]];
            skipped.extend(v.into_iter().skip(3));
            let got = run_reader(flagged(), &skipped);
            assert!(!got.iter().any(|e| e == "col"), "{got:?}");
            assert_eq!(got.iter().filter(|e| *e == "row").count(), 1);
            assert_eq!(got[1], if deprecate { "row" } else { "cols-done 2" });
        }
        // A cursor opened on an execute whose metadata was skipped ends at the EOF.
        let got = run_reader(
            ResponseReader::new(Expect::CursorResults, caps(false)).metadata_flag(true),
            &[vec![1, 0], eof(AUTOCOMMIT | CURSOR_EXISTS)],
        );
        assert_eq!(got, ["count 1", "cols-done 42"]);
        // The byte is there exactly when the flag was negotiated.
        let mut r = ResponseReader::new(binary, caps(true));
        assert!(r.next(&[2, 1]).is_err());
        let mut r = ResponseReader::new(binary, caps(true)).metadata_flag(true);
        assert!(r.next(&[2]).is_err());
        let mut r = ResponseReader::new(binary, caps(true)).metadata_flag(true);
        assert!(r.next(&[2, 2]).is_err());
    }

    #[test]
    fn empty_result_set() {
        let got = run(
            Expect::Results { binary: false },
            true,
            &result_set(true, 0, 2),
        );
        assert_eq!(got, ["count 2", "col", "col", "done 2 ok"]);
    }

    #[test]
    fn multiple_results_from_a_procedure() {
        // CALL p(): two result sets, then the procedure's final OK.
        for deprecate in [false, true] {
            let mut v = result_set(deprecate, 1, AUTOCOMMIT | MORE_RESULTS);
            v.extend(result_set(deprecate, 2, AUTOCOMMIT | MORE_RESULTS));
            v.push(ok(0x00, 0, AUTOCOMMIT, b""));
            let got = run(Expect::Results { binary: false }, deprecate, &v);
            assert_eq!(got.iter().filter(|e| *e == "row").count(), 3);
            assert_eq!(got.last().unwrap(), "ok 0 2");
        }
    }

    #[test]
    fn multi_statement_oks_then_error() {
        let v = vec![
            ok(0x00, 1, AUTOCOMMIT | MORE_RESULTS, b""),
            ok(0x00, 3, AUTOCOMMIT | MORE_RESULTS, b""),
            err_payload(1146, b"42S02", "Table 'db.x' doesn't exist"),
        ];
        let got = run(Expect::Results { binary: false }, true, &v);
        assert_eq!(got, ["ok 1 a", "ok 3 a", "err 1146"]);
    }

    #[test]
    fn error_midway_through_rows_ends_the_response() {
        let mut v = result_set(false, 2, 2);
        v.pop();
        v.push(err_payload(
            1317,
            b"70100",
            "Query execution was interrupted",
        ));
        let got = run(Expect::Results { binary: false }, false, &v);
        assert_eq!(got.last().unwrap(), "err 1317");
    }

    #[test]
    fn session_state_of_the_final_ok_is_kept() {
        let mut state = vec![1];
        let mut schema = Vec::new();
        put_lenenc_bytes(&mut schema, b"shop");
        put_lenenc_bytes(&mut state, &schema);
        let p = ok(0xFE, 0, AUTOCOMMIT, &state);
        let mut r = ResponseReader::new(Expect::Rows, caps(true));
        match r.next(&p).unwrap() {
            Event::ResultDone { ok: Some(ok), .. } => assert_eq!(ok.state, &state[..]),
            e => panic!("{e:?}"),
        }
        assert!(r.finished());
    }

    #[test]
    fn rows_starting_with_0xfe_are_rows() {
        // A text row whose first value is 16 MiB or more starts with 0xFE (8-byte length).
        // Only the first frame is passed, as the relay does: exactly MAX_FRAME bytes.
        let mut big = vec![0xFE];
        big.extend_from_slice(&(MAX_FRAME as u64 + 10).to_le_bytes());
        big.resize(MAX_FRAME, b'x');
        for deprecate in [false, true] {
            let mut r = ResponseReader::new(Expect::Results { binary: false }, caps(deprecate));
            r.next(&[1]).unwrap();
            r.next(&coldef("a", 252)).unwrap();
            if !deprecate {
                r.next(&eof(2)).unwrap();
            }
            assert!(r.in_rows());
            assert!(matches!(r.next(&big).unwrap(), Event::Row(_)));
            let end = if deprecate {
                ok(0xFE, 0, 2, b"")
            } else {
                eof(2)
            };
            assert!(matches!(r.next(&end).unwrap(), Event::ResultDone { .. }));
            assert!(r.finished());
        }
        // Without DEPRECATE_EOF, any 0xFE packet of 9 bytes or more is a row.
        let mut r = ResponseReader::new(Expect::Rows, caps(false));
        let nine = [0xFE, 1, 0, 0, 0, 0, 0, 0, 0];
        assert!(matches!(r.next(&nine).unwrap(), Event::Row(_)));
        assert!(!r.finished());
    }

    #[test]
    fn binary_rows_and_a_null_first_text_value() {
        // Binary rows start with 0x00 and must not be read as OK packets.
        let v = vec![
            vec![1],
            coldef("a", 3),
            eof(2),
            vec![0x00, 0x00, 1, 0, 0, 0],
            vec![0x00, 0x04],
            eof(2),
        ];
        let got = run(Expect::Results { binary: true }, false, &v);
        assert_eq!(
            got,
            ["count 1", "col", "cols-done 2", "row", "row", "done 2"]
        );
        let v = vec![
            vec![1],
            coldef("a", 3),
            text_row(&[None]),
            ok(0xFE, 0, 2, b""),
        ];
        let got = run(Expect::Results { binary: false }, true, &v);
        assert_eq!(got, ["count 1", "col", "row", "done 2 ok"]);
    }

    #[test]
    fn cursor_opened_by_execute() {
        // COM_STMT_EXECUTE with CURSOR_TYPE_READ_ONLY: definitions, then an EOF with
        // CURSOR_EXISTS; the rows come with COM_STMT_FETCH.
        let cursor = AUTOCOMMIT | CURSOR_EXISTS;
        let v = vec![vec![1], coldef("a", 3), eof(cursor)];
        let got = run(Expect::CursorResults, false, &v);
        assert_eq!(got, ["count 1", "col", "cols-done 42"]);
        // Under DEPRECATE_EOF the cursor is announced by the 0xFE OK right after definitions.
        let v = vec![vec![1], coldef("a", 3), ok(0xFE, 0, cursor, b"")];
        let got = run(Expect::CursorResults, true, &v);
        assert_eq!(got, ["count 1", "col", "done 42 ok"]);
        // The fetch: rows, then an EOF (LAST_ROW_SENT when exhausted); never more results.
        let last_row = StatusFlags::SERVER_STATUS_LAST_ROW_SENT.bits();
        let v = vec![
            vec![0x00, 0x00, 7, 0, 0, 0],
            eof(cursor | last_row | MORE_RESULTS),
        ];
        let got = run(Expect::Rows, false, &v);
        assert_eq!(got, ["row", "done ca"]);
    }

    #[test]
    fn procedure_results_flagged_cursor_exists_still_have_rows() {
        // CALL p1() by COM_STMT_EXECUTE (no cursor asked) of a procedure that walks a cursor
        // and SELECTs in its loop, as MariaDB 10.11 answers without DEPRECATE_EOF: each
        // result's EOFs carry CURSOR_EXISTS | MORE_RESULTS (0x6a), the rows follow anyway.
        let flagged = AUTOCOMMIT | CURSOR_EXISTS | MORE_RESULTS | 0x20;
        let one = |id: u8| {
            vec![
                vec![1],
                coldef("id", 3),
                eof(flagged),
                vec![0x00, 0x00, id, 0, 0, 0],
                eof(flagged),
            ]
        };
        let mut v = Vec::new();
        for id in 1..=3 {
            v.extend(one(id));
        }
        v.push(ok(0x00, 0, AUTOCOMMIT, b""));
        for expect in [Expect::Results { binary: true }, Expect::CursorResults] {
            let got = run(expect, false, &v);
            assert_eq!(got.iter().filter(|e| *e == "row").count(), 3, "{got:?}");
            assert_eq!(got.last().unwrap(), "ok 0 2");
        }
        // `SELECT f()` where f walked a cursor: the flag lingers without MORE_RESULTS; no
        // cursor was asked, so the row still comes.
        let lingering = AUTOCOMMIT | CURSOR_EXISTS;
        let v = vec![
            vec![1],
            coldef("f()", 3),
            eof(lingering),
            vec![0x00, 0x00, 9, 0, 0, 0],
            eof(lingering),
        ];
        let got = run(Expect::Results { binary: true }, false, &v);
        assert_eq!(got, ["count 1", "col", "cols-done 42", "row", "done 42"]);
    }

    #[test]
    fn text_protocol_ignores_cursor_flag() {
        let v = vec![vec![1], coldef("a", 3), eof(CURSOR_EXISTS), eof(2)];
        let got = run(Expect::Results { binary: false }, false, &v);
        assert_eq!(got, ["count 1", "col", "cols-done 40", "done 2"]);
    }

    fn prepare_ok(id: u32, cols: u16, params: u16) -> Vec<u8> {
        let mut p = vec![0x00];
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&cols.to_le_bytes());
        p.extend_from_slice(&params.to_le_bytes());
        p.push(0);
        p.extend_from_slice(&0u16.to_le_bytes());
        p
    }

    #[test]
    fn prepare_with_params_and_columns() {
        // SELECT a, b FROM t WHERE id = ?
        let mut v = vec![prepare_ok(7, 2, 1), coldef("?", 253), eof(2)];
        v.extend([coldef("a", 3), coldef("b", 253), eof(2)]);
        let got = run(Expect::Prepare, false, &v);
        assert_eq!(
            got,
            [
                "prepared 7 2 1",
                "param",
                "params-done",
                "col",
                "col",
                "cols-done 2"
            ]
        );
        let v = vec![
            prepare_ok(7, 2, 1),
            coldef("?", 253),
            coldef("a", 3),
            coldef("b", 253),
        ];
        let got = run(Expect::Prepare, true, &v);
        assert_eq!(got, ["prepared 7 2 1", "param", "col", "col"]);
    }

    #[test]
    fn prepare_without_params_or_columns() {
        // INSERT INTO t VALUES (?, ?): params only.
        let v = vec![
            prepare_ok(3, 0, 2),
            coldef("?", 253),
            coldef("?", 253),
            eof(2),
        ];
        let got = run(Expect::Prepare, false, &v);
        assert_eq!(got, ["prepared 3 0 2", "param", "param", "params-done"]);
        // SELECT 1: columns only.
        let v = vec![prepare_ok(4, 1, 0), coldef("1", 8), eof(2)];
        let got = run(Expect::Prepare, false, &v);
        assert_eq!(got, ["prepared 4 1 0", "col", "cols-done 2"]);
        // DO 1 / SET @a = 1: neither.
        for deprecate in [false, true] {
            let got = run(Expect::Prepare, deprecate, &[prepare_ok(5, 0, 0)]);
            assert_eq!(got, ["prepared 5 0 0"]);
        }
        let v = vec![err_payload(1064, b"42000", "You have an error")];
        assert_eq!(run(Expect::Prepare, true, &v), ["err 1064"]);
    }

    #[test]
    fn field_list() {
        let v = vec![coldef("a", 3), coldef("b", 253), eof(2)];
        assert_eq!(run(Expect::FieldList, false, &v), ["col", "col", "done 2"]);
        let v = vec![coldef("a", 3), ok(0xFE, 0, 2, b"")];
        assert_eq!(run(Expect::FieldList, true, &v), ["col", "done 2 ok"]);
        let v = vec![eof(2)];
        assert_eq!(run(Expect::FieldList, false, &v), ["done 2"]);
    }

    #[test]
    fn single_packet_responses() {
        assert_eq!(
            run(Expect::Single, true, &[ok(0x00, 0, 2, b"")]),
            ["ok 0 2"]
        );
        // An OK with MORE_RESULTS still ends a single-packet response.
        assert_eq!(
            run(Expect::Single, true, &[ok(0x00, 0, 2 | MORE_RESULTS, b"")]),
            ["ok 0 a"]
        );
        // COM_SET_OPTION answers EOF, or a 0xFE OK under DEPRECATE_EOF.
        assert_eq!(run(Expect::Single, false, &[eof(2)]), ["done 2"]);
        assert_eq!(
            run(Expect::Single, true, &[ok(0xFE, 0, 2, b"")]),
            ["done 2 ok"]
        );
        assert_eq!(run(Expect::Single, true, &[eof(2)]), ["done 2"]);
        // COM_STATISTICS answers a bare string.
        let stats = b"Uptime: 5  Threads: 1".to_vec();
        assert_eq!(run(Expect::Single, true, &[stats]), ["other"]);
    }

    #[test]
    fn protocol_violations_are_errors() {
        let results = Expect::Results { binary: false };
        let mut r = ResponseReader::new(results, caps(true));
        // LOCAL INFILE request: the proxy never negotiates CLIENT_LOCAL_FILES.
        assert!(r.next(b"\xFBdata.csv").is_err());
        let mut r = ResponseReader::new(results, caps(true));
        assert!(r.next(&[]).is_err());
        let mut r = ResponseReader::new(results, caps(true));
        assert!(r.next(&[0x00, 1]).is_err(), "truncated OK");
        let mut r = ResponseReader::new(results, caps(false));
        assert!(r.next(&[0xFC, 1]).is_err(), "truncated column count");
        let mut r = ResponseReader::new(results, caps(false));
        r.next(&[1]).unwrap();
        r.next(&coldef("a", 3)).unwrap();
        assert!(r.next(&text_row(&[Some(b"1")])).is_err(), "missing EOF");
        let mut r = ResponseReader::new(Expect::Single, caps(false));
        r.next(&ok(0, 0, 2, b"")).unwrap();
        assert!(r.next(&ok(0, 0, 2, b"")).is_err(), "packet after the end");
        let mut r = ResponseReader::new(Expect::Prepare, caps(false));
        assert!(r.next(&[0x00, 1, 0, 0]).is_err(), "short prepare-OK");
    }

    #[test]
    fn err_fields() {
        let p = err_payload(1062, b"23000", "Duplicate entry");
        let mut r = ResponseReader::new(Expect::Results { binary: true }, caps(true));
        assert_eq!(
            r.next(&p).unwrap(),
            Event::Err {
                code: 1062,
                state: *b"23000",
                message: b"Duplicate entry"
            }
        );
        assert!(r.finished());
    }
}
