//! Entry points for the fuzz targets (`fuzz/`, cargo-fuzz on nightly) and their property-test
//! twins (`proxy/tests/fuzz_props.rs`, stable): each feeds arbitrary bytes, as a client or a
//! backend could send them, to the decoders of the request path and checks what must hold for
//! any input. None may panic, hang or allocate without bound; a panic here is a finding.
//!
//! Kept in the library (not in the fuzz crate) so the targets reach the crate-private decoders
//! without widening their visibility beyond the crate.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use mysql_common::constants::{CapabilityFlags, ColumnFlags, ColumnType};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::exec::params::{decode_execute, literal};
use crate::merge::value::{Dec, cmp_keys, double_text, encode_row, key_of, kind, split_row};
use crate::merge::{Column, Protocol, parse_column};
use crate::session::login::parse_change_user;
use crate::wire::messages::{for_each_state_change, parse_err, parse_ok, read_lenenc_bytes};
use crate::wire::packet::{MAX_FRAME, PacketStream, write_frames};
use crate::wire::response::{Event, Expect, ResponseReader};

/// An in-memory peer that hands out `data` in reads of at most `chunk` bytes (so frames
/// straddle reads as they do on a socket) and accepts every write.
struct ChunkedPeer<'a> {
    data: &'a [u8],
    chunk: usize,
}

impl AsyncRead for ChunkedPeer<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = self.data.len().min(self.chunk).min(buf.remaining());
        let (head, rest) = self.data.split_at(n);
        buf.put_slice(head);
        self.data = rest;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for ChunkedPeer<'_> {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(b.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Runs a future over [`ChunkedPeer`] to completion: the peer is never pending, so one poll
/// finishes it (a second poll would mean the framer waits on something that cannot come).
fn complete<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    match f.as_mut().poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("framer pending on an in-memory stream"),
    }
}

/// The packet framer on an arbitrary byte stream. `data[0]` picks the read size, `data[1]` the
/// packet limit and, per packet, whether whole packets or single frames are read; the rest is
/// the stream. Every packet read must frame back to the bytes it came from.
pub fn packet_framer(data: &[u8]) {
    let [chunk, mode, stream @ ..] = data else {
        return;
    };
    let chunk = usize::from(*chunk).max(1);
    let max_packet = match mode & 3 {
        0 => 16,
        1 => 1024,
        2 => 1 << 16,
        _ => 1 << 30,
    };
    let peer = ChunkedPeer {
        data: stream,
        chunk,
    };
    let mut ps = PacketStream::new(peer, max_packet);
    let mut offset = 0usize;
    for i in 0.. {
        let whole = (mode >> (2 + i % 6)) & 1 == 0;
        if whole {
            let info = match complete(ps.next_packet()) {
                Ok(info) => info,
                Err(_) => return,
            };
            let raw = ps.frame().to_vec();
            assert_eq!(stream.get(offset..offset + raw.len()), Some(&raw[..]));
            offset += raw.len();
            let payload = ps.packet_payload().into_owned();
            assert_eq!(payload.len(), info.payload_len);
            assert!(payload.len() <= max_packet);
            assert_eq!(raw.len(), payload.len() + 4 * info.frames);
            // Framing the payload again gives the same frames (sequence ids aside).
            let mut again = bytes::BytesMut::new();
            let mut seq = info.seq;
            write_frames(&mut again, &mut seq, &payload);
            assert_eq!(&again[..], &raw[..]);
            let _ = info.last_seq;
        } else {
            let h = match complete(ps.next_frame()) {
                Ok(h) => h,
                Err(_) => return,
            };
            assert!(h.len <= MAX_FRAME);
            assert_eq!(ps.frame_payload().len(), h.len);
            offset += 4 + h.len;
        }
        let _ = ps.has_buffered_frame();
    }
}

/// A client's HandshakeResponse41 (the first bytes an unauthenticated client controls).
pub fn handshake_response(data: &[u8]) {
    if let Ok(hello) = crate::wire::handshake::parse_handshake_response(data) {
        // Never more than what the proxy offered is negotiated.
        assert!(
            crate::wire::handshake::server_capabilities().contains(hello.capabilities),
            "negotiated capabilities the proxy never offered"
        );
        let secret = crate::config::secret_of("secret");
        let _ = secret.verify_native(&[7; 20], &hello.auth_response);
        if let Some(stage2) = secret.sha2_stage2() {
            let _ =
                crate::wire::auth::verify_sha2_scramble(&stage2, &[7; 20], &hello.auth_response);
        }
    }
}

/// Every decoder of a client command payload (`data` is the payload, command byte first):
/// COM_CHANGE_USER, COM_STMT_EXECUTE's parameters (with the statement's parameter count and
/// remembered types taken from the payload's tail), COM_SET_OPTION, the statement id of the
/// COM_STMT_* commands, and the text checks run on every COM_QUERY before routing (USE, the
/// diagnostics queries, KILL, session-state effects).
pub fn client_command(data: &[u8]) {
    let _ = crate::wire::command::name(data.first().copied().unwrap_or(0));
    let _ = crate::wire::command::stmt_id(data);
    let _ = data.get(1..3).map(|b| u16::from_le_bytes([b[0], b[1]]));
    for caps in [
        CapabilityFlags::empty(),
        CapabilityFlags::CLIENT_SECURE_CONNECTION | CapabilityFlags::CLIENT_PLUGIN_AUTH,
    ] {
        let _ = parse_change_user(data, caps);
    }
    // The parameter count comes from the backend's prepare-OK (a u16); types may be
    // remembered from an earlier execute.
    let n = usize::from(data.last().copied().unwrap_or(0));
    let mut types = crate::backend::stmt_cache::ParamTypes::new();
    for remembered in [false, true] {
        if remembered {
            types = data
                .chunks(2)
                .take(n)
                .map(|c| (c[0], c[c.len() - 1]))
                .collect();
        }
        if let Ok((_, params)) = decode_execute(data, n, &mut types) {
            assert_eq!(params.len(), n);
            for p in &params {
                let _ = literal(p);
            }
        }
    }
    let sql = data.get(1..).unwrap_or(&[]);
    let _ = crate::session::use_statement(sql);
    let _ = crate::exec::diagnostics::diagnostics_query(sql);
    let _ = crate::exec::kill::parse_kill(sql);
    let _ = shoal_router::sql::pins::effects(sql);
}

/// Splits `data` into packets framed as on the wire, lengths clamped to what is left.
fn packets(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while data.len() >= 4 {
        let len = u32::from_le_bytes([data[0], data[1], data[2], 0]) as usize;
        let len = len.min(data.len() - 4);
        out.push(&data[4..4 + len]);
        data = &data[4 + len..];
    }
    out
}

/// The reader of backend responses. `data[0]` picks the command kind and the negotiated
/// capabilities; the rest is the backend's packets, framed as on the wire.
pub fn backend_response(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let expect = match sel % 7 {
        0 => Expect::Results { binary: false },
        1 => Expect::Results { binary: true },
        2 => Expect::CursorResults,
        3 => Expect::Prepare,
        4 => Expect::FieldList,
        5 => Expect::Rows,
        _ => Expect::Single,
    };
    let mut caps = CapabilityFlags::CLIENT_PROTOCOL_41;
    if sel & 0x10 != 0 {
        caps |= CapabilityFlags::CLIENT_DEPRECATE_EOF;
    }
    if sel & 0x20 != 0 {
        caps |= CapabilityFlags::CLIENT_SESSION_TRACK;
    }
    // MariaDB's metadata caching: a flag byte after each column count.
    let mut reader = ResponseReader::new(expect, caps).metadata_flag(sel & 0x40 != 0);
    for p in packets(rest) {
        let _ = parse_ok(p, caps);
        let _ = parse_err(p);
        match reader.next(p) {
            Ok(ev) => {
                if let Event::Ok(ok) | Event::ResultDone { ok: Some(ok), .. } = ev {
                    let _ = for_each_state_change(ok.state, |_| {});
                }
                if let Event::ColumnDef(c) | Event::ParamDef(c) = ev {
                    let _ = parse_column(c);
                }
            }
            Err(_) => return,
        }
        if reader.finished() {
            // The next packet belongs to no response: refused, never misread.
            assert!(reader.next(b"\x00\x00\x00\x02\x00\x00\x00").is_err());
            return;
        }
    }
}

/// The column types a merged result can have, for [`merge_values`].
const TYPES: [ColumnType; 19] = [
    ColumnType::MYSQL_TYPE_TINY,
    ColumnType::MYSQL_TYPE_SHORT,
    ColumnType::MYSQL_TYPE_LONG,
    ColumnType::MYSQL_TYPE_LONGLONG,
    ColumnType::MYSQL_TYPE_INT24,
    ColumnType::MYSQL_TYPE_YEAR,
    ColumnType::MYSQL_TYPE_NEWDECIMAL,
    ColumnType::MYSQL_TYPE_FLOAT,
    ColumnType::MYSQL_TYPE_DOUBLE,
    ColumnType::MYSQL_TYPE_DATE,
    ColumnType::MYSQL_TYPE_DATETIME,
    ColumnType::MYSQL_TYPE_TIMESTAMP,
    ColumnType::MYSQL_TYPE_TIME,
    ColumnType::MYSQL_TYPE_BIT,
    ColumnType::MYSQL_TYPE_VAR_STRING,
    ColumnType::MYSQL_TYPE_STRING,
    ColumnType::MYSQL_TYPE_BLOB,
    ColumnType::MYSQL_TYPE_NULL,
    ColumnType::MYSQL_TYPE_JSON,
];

const CHARSETS: [u16; 6] = [63, 45, 33, 46, 8, 224];

/// The merge's value decoders on shard rows. `data[0]` is the column count and protocol, the
/// next two bytes per column its type and character set/flags; then rows framed as on the
/// wire. Each row is split into cells, keyed, compared with the previous row, and re-encoded;
/// definitions are also parsed from each packet.
pub fn merge_values(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let ncols = usize::from(sel & 0x07) + 1;
    let protocol = if sel & 0x80 != 0 {
        Protocol::Binary
    } else {
        Protocol::Text
    };
    let Some(spec) = rest.get(..2 * ncols) else {
        return;
    };
    let cols: Vec<Column> = spec
        .chunks(2)
        .map(|c| {
            let mut flags = ColumnFlags::empty();
            if c[1] & 0x80 != 0 {
                flags |= ColumnFlags::UNSIGNED_FLAG;
            }
            if c[1] & 0x40 != 0 {
                flags |= ColumnFlags::BINARY_FLAG;
            }
            Column {
                name: String::new(),
                column_type: TYPES[usize::from(c[0]) % TYPES.len()],
                flags,
                decimals: c[1] & 0x3F,
                charset: CHARSETS[usize::from(c[1]) % CHARSETS.len()],
                length: 0,
                schema: String::new(),
                org_table: String::new(),
                org_name: String::new(),
                declared: None,
                raw: Vec::new(),
            }
        })
        .collect();
    let kinds: Vec<_> = cols.iter().map(kind).collect();
    let mut prev: Option<Vec<_>> = None;
    for p in packets(&rest[2 * ncols..]) {
        let _ = parse_column(p);
        let mut b = p;
        if let Some(s) = read_lenenc_bytes(&mut b)
            && let Some(d) = Dec::parse(s)
        {
            let _ = d.to_text(u32::from(sel & 0x3F));
            let _ = d.to_f64();
            if let Some(sum) = d.checked_add(&d) {
                assert_eq!(sum.cmp(&d), d.m.signum().cmp(&0), "{d:?} + itself");
            }
            let _ = d.div_round(i128::from(sel) + 1, u32::from(sel & 0x1F));
        }
        let cells = match split_row(p, &cols, protocol) {
            Ok(c) => c,
            Err(_) => continue,
        };
        assert_eq!(cells.len(), cols.len());
        // What splits, encodes back to cells that split the same.
        let encoded = encode_row(&cells, &cols, protocol);
        let again = split_row(&encoded, &cols, protocol).expect("re-encoded row splits");
        assert_eq!(&again[..], &cells[..]);
        drop(again);
        let keys: Vec<_> = cells
            .iter()
            .zip(&cols)
            .zip(&kinds)
            .map(|((c, col), k)| key_of(*c, col, *k, protocol).ok())
            .collect();
        for (k, col) in keys.iter().flatten().zip(&cols) {
            assert_eq!(cmp_keys(k, k), std::cmp::Ordering::Equal, "{k:?} != itself");
            if let crate::merge::value::Key::Float(x) = k {
                let _ = double_text(*x, col.decimals);
            }
        }
        if let Some(prev) = &prev {
            for (a, b) in keys.iter().zip(prev) {
                if let (Some(a), Some(b)) = (a, b) {
                    assert_eq!(cmp_keys(a, b), cmp_keys(b, a).reverse(), "{a:?} vs {b:?}");
                }
            }
        }
        prev = Some(keys);
    }
}

/// The config loader on arbitrary text: YAML into the router's model, the topology built from
/// it (every cross-reference and rule checked), and the proxy's own settings derived from it.
pub fn config_yaml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(cfg) = shoal_router::config::Config::from_yaml_str(text) else {
        return;
    };
    let Ok(topo) = shoal_router::topology::Topology::build(&cfg) else {
        return;
    };
    let topo = std::sync::Arc::new(topo);
    let _ = crate::config_file::describe(&topo);
    let _ = crate::config_file::proxy_config(&topo, None);
}
