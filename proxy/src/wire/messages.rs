//! The small packets the proxy reads or writes itself: OK, ERR and EOF, length-encoded integers,
//! and the session-state-tracking block of an OK packet. Parsed by hand because they sit on the
//! hot path (every response ends with one) and only a few fields are needed.

use mysql_common::constants::{CapabilityFlags, StatusFlags};

/// Reads a length-encoded integer at the front of `buf`, advancing it.
pub fn read_lenenc(buf: &mut &[u8]) -> Option<u64> {
    let (&first, rest) = buf.split_first()?;
    let (n, width) = match first {
        0..=0xFA => (first as u64, 0),
        0xFC => (0, 2),
        0xFD => (0, 3),
        0xFE => (0, 8),
        _ => return None,
    };
    if width == 0 {
        *buf = rest;
        return Some(n);
    }
    let bytes = rest.get(..width)?;
    let mut v = [0u8; 8];
    v[..width].copy_from_slice(bytes);
    *buf = &rest[width..];
    Some(u64::from_le_bytes(v))
}

/// Reads a length-encoded string at the front of `buf`, advancing it.
pub fn read_lenenc_bytes<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = read_lenenc(buf)? as usize;
    let s = buf.get(..n)?;
    *buf = &buf[n..];
    Some(s)
}

fn read_u16(buf: &mut &[u8]) -> Option<u16> {
    let b = buf.get(..2)?;
    let v = u16::from_le_bytes([b[0], b[1]]);
    *buf = &buf[2..];
    Some(v)
}

pub fn put_lenenc(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=0xFA => out.push(n as u8),
        0xFB..=0xFFFF => {
            out.push(0xFC);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            out.push(0xFD);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xFE);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

pub fn put_lenenc_bytes(out: &mut Vec<u8>, s: &[u8]) {
    put_lenenc(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A column definition's six names (catalog, schema, table, org_table, name, org_name) and
/// what follows them (its fixed fields); `None` when it is cut short.
pub fn column_def_names(def: &[u8]) -> Option<([&[u8]; 6], &[u8])> {
    let mut b = def;
    let mut f: [&[u8]; 6] = [&[]; 6];
    for x in &mut f {
        *x = read_lenenc_bytes(&mut b)?;
    }
    Some((f, b))
}

/// Appends a column definition made of `names` (as [`column_def_names`] splits them) and
/// `rest`, its fixed fields.
pub fn put_column_def(out: &mut Vec<u8>, names: [&[u8]; 6], rest: &[u8]) {
    for n in names {
        put_lenenc_bytes(out, n);
    }
    out.extend_from_slice(rest);
}

/// The fields of an OK packet (header 0x00, or 0xFE when it ends a result set under
/// CLIENT_DEPRECATE_EOF).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OkInfo<'a> {
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub status: u16,
    pub warnings: u16,
    /// Human-readable info ("Rows matched: 1 Changed: 1 ..."), possibly empty.
    pub info: &'a [u8],
    /// The session-state-change block (only with SERVER_SESSION_STATE_CHANGED).
    pub state: &'a [u8],
}

/// Parses an OK packet sent to a connection that negotiated `caps`.
pub fn parse_ok(payload: &[u8], caps: CapabilityFlags) -> Option<OkInfo<'_>> {
    let mut buf = payload.get(1..)?;
    let affected_rows = read_lenenc(&mut buf)?;
    let last_insert_id = read_lenenc(&mut buf)?;
    let status = read_u16(&mut buf)?;
    let warnings = read_u16(&mut buf)?;
    let mut info: &[u8] = &[];
    let mut state: &[u8] = &[];
    if caps.contains(CapabilityFlags::CLIENT_SESSION_TRACK) {
        if !buf.is_empty() {
            info = read_lenenc_bytes(&mut buf)?;
        }
        if status & StatusFlags::SERVER_SESSION_STATE_CHANGED.bits() != 0 && !buf.is_empty() {
            state = read_lenenc_bytes(&mut buf)?;
        }
    } else if !buf.is_empty() {
        // Length-encoded in practice (see `encode_ok`); fall back to string<EOF>.
        let mut b = buf;
        info = match read_lenenc_bytes(&mut b) {
            Some(s) if b.is_empty() => s,
            _ => buf,
        };
    }
    Some(OkInfo {
        affected_rows,
        last_insert_id,
        status,
        warnings,
        info,
        state,
    })
}

/// Sets SERVER_MORE_RESULTS_EXISTS in the status of an OK (header 0x00, or 0xFE with the
/// OK's layout) or EOF packet `payload`, in place: a response that is not the last of a
/// multi-statement text says more follow. `false` if it is neither.
pub fn set_more_results(payload: &mut [u8]) -> bool {
    const MORE: u16 = StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();
    let at = match payload.first() {
        // EOF: header, warnings, status.
        Some(0xFE) if payload.len() < 9 => 3,
        Some(0x00 | 0xFE) => {
            let mut rest = &payload[1..];
            if read_lenenc(&mut rest).is_none() || read_lenenc(&mut rest).is_none() {
                return false;
            }
            payload.len() - rest.len()
        }
        _ => return false,
    };
    let Some(b) = payload.get_mut(at..at + 2) else {
        return false;
    };
    let status = u16::from_le_bytes([b[0], b[1]]) | MORE;
    b.copy_from_slice(&status.to_le_bytes());
    true
}

/// Encodes an OK payload (header byte 0x00 or 0xFE); the same bytes suit clients with or
/// without CLIENT_SESSION_TRACK.
/// Session-state info is never included: the proxy only forwards the backend's own.
pub fn encode_ok(out: &mut Vec<u8>, header: u8, ok: &OkInfo<'_>) {
    out.push(header);
    put_lenenc(out, ok.affected_rows);
    put_lenenc(out, ok.last_insert_id);
    let status = ok.status & !StatusFlags::SERVER_SESSION_STATE_CHANGED.bits();
    out.extend_from_slice(&status.to_le_bytes());
    out.extend_from_slice(&ok.warnings.to_le_bytes());
    // The protocol documentation calls info string<EOF> without CLIENT_SESSION_TRACK, but
    // servers (MySQL and MariaDB `net_send_ok`) send it length-encoded either way, and clients
    // (libmysqlclient, mysql_common) parse it so.
    if !ok.info.is_empty() {
        put_lenenc_bytes(out, ok.info);
    }
}

/// A plain OK (no rows, no info) with the given status flags.
pub fn ok_payload(status: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(11);
    let ok = OkInfo {
        affected_rows: 0,
        last_insert_id: 0,
        status,
        warnings: 0,
        info: &[],
        state: &[],
    };
    encode_ok(&mut out, 0x00, &ok);
    out
}

/// An old-style EOF payload (no warnings) with the given status flags.
pub fn eof_payload(status: u16) -> Vec<u8> {
    let mut out = vec![0xFE, 0, 0];
    out.extend_from_slice(&status.to_le_bytes());
    out
}

/// An ERR payload in protocol 4.1 form.
pub fn err_payload(code: u16, state: &[u8; 5], message: &str) -> Vec<u8> {
    err_payload_bytes(code, state, message.as_bytes())
}

/// [`err_payload`] with the message's bytes as they go out (in the client's charset).
pub fn err_payload_bytes(code: u16, state: &[u8; 5], message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + message.len());
    out.push(0xFF);
    out.extend_from_slice(&code.to_le_bytes());
    out.push(b'#');
    out.extend_from_slice(state);
    out.extend_from_slice(message);
    out
}

/// The error code, SQLSTATE and message of an ERR payload.
pub fn parse_err(payload: &[u8]) -> Option<(u16, [u8; 5], &[u8])> {
    if payload.first() != Some(&0xFF) || payload.len() < 3 {
        return None;
    }
    let code = u16::from_le_bytes([payload[1], payload[2]]);
    let rest = &payload[3..];
    if rest.first() == Some(&b'#') && rest.len() >= 6 {
        let mut state = [0u8; 5];
        state.copy_from_slice(&rest[1..6]);
        Some((code, state, &rest[6..]))
    } else {
        Some((code, *b"HY000", rest))
    }
}

/// Status flags of an old-style EOF packet (0xFE, warnings, status).
pub fn eof_status(payload: &[u8]) -> u16 {
    match payload.get(3..5) {
        Some(s) => u16::from_le_bytes([s[0], s[1]]),
        None => 0,
    }
}

/// One entry of a session-state-change block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateChange<'a> {
    /// A system variable and its new value (SESSION_TRACK_SYSTEM_VARIABLES).
    SysVar(&'a [u8], &'a [u8]),
    /// The new current schema (SESSION_TRACK_SCHEMA).
    Schema(&'a [u8]),
    /// "Some session state changed" (SESSION_TRACK_STATE_CHANGE): user variables, temporary
    /// tables, prepared statements... as well as the changes reported above.
    StateChanged,
    /// The GTIDs of what the statement committed (SESSION_TRACK_GTIDS: MySQL with
    /// `session_track_gtids`; MariaDB reports `last_gtid` as a variable instead).
    Gtids(&'a [u8]),
    /// Transaction characteristics or state: not needed to replay a session.
    Other(u8),
}

/// Walks the entries of a session-state block; returns `None` if it is malformed.
pub fn for_each_state_change<'a>(
    mut block: &'a [u8],
    mut f: impl FnMut(StateChange<'a>),
) -> Option<()> {
    while !block.is_empty() {
        let kind = block[0];
        block = &block[1..];
        let mut data = read_lenenc_bytes(&mut block)?;
        match kind {
            0 => {
                while !data.is_empty() {
                    let name = read_lenenc_bytes(&mut data)?;
                    let value = read_lenenc_bytes(&mut data)?;
                    f(StateChange::SysVar(name, value));
                }
            }
            1 => f(StateChange::Schema(read_lenenc_bytes(&mut data)?)),
            2 => f(StateChange::StateChanged),
            3 => {
                // An encoding byte (0: the set as text), then the GTID set.
                let (_, mut set) = data.split_first()?;
                f(StateChange::Gtids(read_lenenc_bytes(&mut set)?))
            }
            other => f(StateChange::Other(other)),
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    /// SESSION_TRACK_GTIDS as MySQL sends it with `session_track_gtids=OWN_GTID`: type 3, the
    /// entry's length, an encoding byte 0, then the GTID set (length-encoded).
    #[test]
    fn gtid_sets_are_read_from_session_state() {
        let set = b"3E11FA47-71CA-11E1-9E33-C80AA9429562:23";
        let mut entry = vec![0u8, set.len() as u8];
        entry.extend_from_slice(set);
        let mut block = vec![3u8, entry.len() as u8];
        block.extend_from_slice(&entry);
        let mut seen = Vec::new();
        for_each_state_change(&block, |c| {
            if let StateChange::Gtids(g) = c {
                seen.push(g.to_vec());
            }
        })
        .expect("well-formed");
        assert_eq!(seen, vec![set.to_vec()]);
        let mut tracked = crate::backend::state::Tracked::default();
        assert!(tracked.add_block(&block));
        assert_eq!(
            tracked.gtid.as_deref(),
            Some(std::str::from_utf8(set).unwrap())
        );
        // A truncated entry is malformed, not a panic.
        assert!(for_each_state_change(&block[..block.len() - 3], |_| {}).is_none());
    }

    use super::*;

    const TRACK: CapabilityFlags = CapabilityFlags::CLIENT_SESSION_TRACK;

    #[test]
    fn lenenc_roundtrip() {
        for n in [
            0u64,
            250,
            251,
            0xFFFF,
            0x1_0000,
            0xFF_FFFF,
            0x100_0000,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_lenenc(&mut out, n);
            let mut s = &out[..];
            assert_eq!(read_lenenc(&mut s), Some(n));
            assert!(s.is_empty());
        }
    }

    /// An OK packet as MariaDB 10.11 sends it after `SET NAMES latin1; USE db; SET @a=1`
    /// style statements, with session tracking negotiated.
    fn tracked_ok() -> Vec<u8> {
        let mut state = Vec::new();
        // system variable entry
        let mut var = Vec::new();
        put_lenenc_bytes(&mut var, b"character_set_client");
        put_lenenc_bytes(&mut var, b"latin1");
        state.push(0);
        put_lenenc_bytes(&mut state, &var);
        // schema entry
        let mut schema = Vec::new();
        put_lenenc_bytes(&mut schema, b"sbtest");
        state.push(1);
        put_lenenc_bytes(&mut state, &schema);
        // state-change entry
        state.push(2);
        put_lenenc_bytes(&mut state, b"1");

        let mut p = vec![0x00, 3, 0xFC, 0x10, 0x27];
        let status = StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits()
            | StatusFlags::SERVER_SESSION_STATE_CHANGED.bits();
        p.extend_from_slice(&status.to_le_bytes());
        p.extend_from_slice(&2u16.to_le_bytes());
        put_lenenc_bytes(&mut p, b"Rows matched: 3");
        put_lenenc_bytes(&mut p, &state);
        p
    }

    #[test]
    fn parses_tracked_ok_and_its_state_changes() {
        let p = tracked_ok();
        let ok = parse_ok(&p, TRACK).unwrap();
        assert_eq!(ok.affected_rows, 3);
        assert_eq!(ok.last_insert_id, 10000);
        assert_eq!(ok.warnings, 2);
        assert_eq!(ok.info, b"Rows matched: 3");
        let mut seen = Vec::new();
        for_each_state_change(ok.state, |c| seen.push(c)).unwrap();
        assert_eq!(
            seen,
            vec![
                StateChange::SysVar(b"character_set_client", b"latin1"),
                StateChange::Schema(b"sbtest"),
                StateChange::StateChanged,
            ]
        );
    }

    #[test]
    fn rewrite_for_untracked_client_drops_state_and_flag() {
        let p = tracked_ok();
        let ok = parse_ok(&p, TRACK).unwrap();
        let mut out = Vec::new();
        encode_ok(&mut out, 0x00, &ok);
        let back = parse_ok(&out, CapabilityFlags::empty()).unwrap();
        assert_eq!(back.affected_rows, 3);
        assert_eq!(back.last_insert_id, 10000);
        assert_eq!(back.info, b"Rows matched: 3");
        assert_eq!(back.status, StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits());
        assert!(back.state.is_empty());
    }

    #[test]
    fn ok_without_info_under_tracking() {
        let p = ok_payload(2);
        assert_eq!(p, vec![0, 0, 0, 2, 0, 0, 0]);
        let ok = parse_ok(&p, TRACK).unwrap();
        assert_eq!(ok.status, 2);
        assert!(ok.info.is_empty());
    }

    #[test]
    fn err_roundtrip() {
        let p = err_payload(1062, b"23000", "Duplicate entry '1' for key 'PRIMARY'");
        let (code, state, msg) = parse_err(&p).unwrap();
        assert_eq!(code, 1062);
        assert_eq!(&state, b"23000");
        assert_eq!(msg, b"Duplicate entry '1' for key 'PRIMARY'");
    }

    #[test]
    fn malformed_state_block_is_detected() {
        assert!(for_each_state_change(&[0, 5, 1], |_| {}).is_none());
    }
}
