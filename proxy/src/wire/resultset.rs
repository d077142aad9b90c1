//! Result sets the proxy writes itself (answers of its own, merged scatter reads): the column
//! count, the column definitions, the EOF after them, the rows, and the terminator, framed for
//! what the client negotiated (CLIENT_DEPRECATE_EOF drops the middle EOF and ends with an OK
//! whose header is 0xFE; MariaDB's metadata caching adds a "metadata follows" byte to the column
//! count, always 1 here).

use mysql_common::constants::{CapabilityFlags, ColumnFlags, ColumnType};
use tokio::io::{AsyncRead, AsyncWrite};

use super::Wire;
use super::messages::{eof_payload, ok_payload, put_lenenc, put_lenenc_bytes};
use super::packet::PacketStream;

/// A result set being written: the header is out, rows follow, then [`Self::finish`] or
/// [`Self::fail`]. Packets are buffered on the stream; flushing is the caller's.
pub struct ResultSetWriter {
    seq: u8,
    deprecate_eof: bool,
}

impl ResultSetWriter {
    /// Writes the header: column count, `defs`, and the EOF unless the client deprecated it.
    pub fn start<'d, S: AsyncRead + AsyncWrite + Unpin>(
        out: &mut PacketStream<S>,
        reply_seq: u8,
        client: Wire,
        status: u16,
        defs: impl ExactSizeIterator<Item = &'d [u8]>,
    ) -> Self {
        let mut w = ResultSetWriter {
            seq: reply_seq,
            deprecate_eof: client.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF),
        };
        let mut count = Vec::with_capacity(10);
        put_lenenc(&mut count, defs.len() as u64);
        if client.cache_metadata {
            count.push(1);
        }
        out.write_packet(&mut w.seq, &count);
        for d in defs {
            out.write_packet(&mut w.seq, d);
        }
        if !w.deprecate_eof {
            out.write_packet(&mut w.seq, &eof_payload(status));
        }
        w
    }

    /// One row, already encoded (text or binary protocol).
    pub fn row<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        out: &mut PacketStream<S>,
        row: &[u8],
    ) {
        out.write_packet(&mut self.seq, row);
    }

    /// The terminator after the last row: EOF, or OK with header 0xFE.
    pub fn finish<S: AsyncRead + AsyncWrite + Unpin>(self, out: &mut PacketStream<S>, status: u16) {
        let mut seq = self.seq;
        if self.deprecate_eof {
            let mut ok = ok_payload(status);
            ok[0] = 0xFE;
            out.write_packet(&mut seq, &ok);
        } else {
            out.write_packet(&mut seq, &eof_payload(status));
        }
    }

    /// [`Self::finish`] saying the statement left `warnings` (a result relayed from one
    /// backend statement).
    pub fn finish_warned<S: AsyncRead + AsyncWrite + Unpin>(
        self,
        out: &mut PacketStream<S>,
        status: u16,
        warnings: u16,
    ) {
        let mut seq = self.seq;
        if self.deprecate_eof {
            let mut ok = ok_payload(status);
            ok[0] = 0xFE;
            // header, affected rows, insert id, status (2), warnings (2)
            if ok.len() >= 7 {
                ok[5..7].copy_from_slice(&warnings.to_le_bytes());
            }
            out.write_packet(&mut seq, &ok);
        } else {
            let mut eof = eof_payload(status);
            eof[1..3].copy_from_slice(&warnings.to_le_bytes());
            out.write_packet(&mut seq, &eof);
        }
    }

    /// An ERR packet in place of the terminator (the statement failed after its header).
    pub fn fail<S: AsyncRead + AsyncWrite + Unpin>(self, out: &mut PacketStream<S>, err: &[u8]) {
        let mut seq = self.seq;
        out.write_packet(&mut seq, err);
    }
}

/// A text-protocol row: each value length-encoded, NULL as 0xFB.
pub fn text_row<'v>(out: &mut Vec<u8>, values: impl IntoIterator<Item = Option<&'v [u8]>>) {
    for v in values {
        match v {
            Some(v) => put_lenenc_bytes(out, v),
            None => out.push(0xFB),
        }
    }
}

/// A column definition (protocol 4.1) of a column Shoal computes itself: no schema or table;
/// `org_name` empty for an expression, as the server sends it.
pub fn column_definition(
    name: &str,
    org_name: &str,
    collation: u16,
    length: u32,
    ty: ColumnType,
    flags: ColumnFlags,
) -> Vec<u8> {
    let mut col = Vec::with_capacity(32 + 2 * name.len());
    for field in [
        &b"def"[..],
        b"",
        b"",
        b"",
        name.as_bytes(),
        org_name.as_bytes(),
    ] {
        put_lenenc_bytes(&mut col, field);
    }
    col.push(0x0c);
    col.extend_from_slice(&collation.to_le_bytes());
    col.extend_from_slice(&length.to_le_bytes());
    col.push(ty as u8);
    col.extend_from_slice(&flags.bits().to_le_bytes());
    // Decimals, then two filler bytes.
    col.extend_from_slice(&[0, 0, 0]);
    col
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::parse_column;
    use crate::wire::messages::{eof_status, parse_ok};
    use tokio::io::AsyncReadExt;

    #[test]
    fn column_definitions_parse_as_written() {
        let flags = ColumnFlags::NOT_NULL_FLAG | ColumnFlags::BINARY_FLAG;
        let def = column_definition(
            "ROW_COUNT()",
            "",
            63,
            21,
            ColumnType::MYSQL_TYPE_LONGLONG,
            flags,
        );
        let col = parse_column(&def).expect("column definition");
        assert_eq!(col.name, "ROW_COUNT()");
        assert_eq!(col.charset, 63);
        assert_eq!(col.length, 21);
        assert_eq!(col.column_type, ColumnType::MYSQL_TYPE_LONGLONG);
        assert_eq!(col.flags, flags);
        assert_eq!(col.decimals, 0);
    }

    /// The frames a client reads for a one-column, two-row result set, as (seq, payload).
    async fn frames(client: impl Into<Wire>) -> Vec<(u8, Vec<u8>)> {
        let (a, mut b) = tokio::io::duplex(4096);
        let mut out = PacketStream::new(a, 1 << 24);
        let def = column_definition(
            "x",
            "x",
            45,
            4,
            ColumnType::MYSQL_TYPE_VAR_STRING,
            ColumnFlags::empty(),
        );
        let mut w = ResultSetWriter::start(&mut out, 1, client.into(), 2, [&def[..]].into_iter());
        for v in [Some(&b"a"[..]), None] {
            let mut row = Vec::new();
            text_row(&mut row, [v]);
            w.row(&mut out, &row);
        }
        w.finish(&mut out, 2);
        out.flush().await.expect("flush");
        drop(out);
        let mut bytes = Vec::new();
        b.read_to_end(&mut bytes).await.expect("read");
        let mut frames = Vec::new();
        let mut rest = &bytes[..];
        while rest.len() >= 4 {
            let len = u32::from_le_bytes([rest[0], rest[1], rest[2], 0]) as usize;
            frames.push((rest[3], rest[4..4 + len].to_vec()));
            rest = &rest[4 + len..];
        }
        assert!(rest.is_empty());
        frames
    }

    #[tokio::test]
    async fn frames_follow_the_negotiated_protocol() {
        let old = frames(CapabilityFlags::CLIENT_PROTOCOL_41).await;
        let seqs: Vec<u8> = old.iter().map(|f| f.0).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
        assert_eq!(old[0].1, [1]);
        assert_eq!(eof_status(&old[2].1), 2);
        assert_eq!(old[3].1, b"\x01a");
        assert_eq!(old[4].1, [0xFB]);
        assert_eq!(old[5].1[0], 0xFE);
        assert_eq!(eof_status(&old[5].1), 2);

        let caps = CapabilityFlags::CLIENT_PROTOCOL_41 | CapabilityFlags::CLIENT_DEPRECATE_EOF;
        let new = frames(caps).await;
        let seqs: Vec<u8> = new.iter().map(|f| f.0).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5]);
        assert_eq!(new[2].1, b"\x01a");
        let last = &new[4].1;
        assert_eq!(last[0], 0xFE);
        assert_eq!(parse_ok(last, caps).expect("ok").status, 2);

        // MariaDB's metadata caching: the column count says the definitions follow.
        let cached = frames(Wire {
            caps,
            cache_metadata: true,
        })
        .await;
        assert_eq!(cached[0].1, [1, 1]);
        assert_eq!(&cached[1..], &new[1..]);
    }
}
