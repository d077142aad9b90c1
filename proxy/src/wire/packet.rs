//! MySQL packet framing over a tokio byte stream.
//!
//! Every packet is a 3-byte little-endian length, a 1-byte sequence id and the payload. Payloads
//! of 16 MiB - 1 bytes or more are split: a frame of exactly `0xFF_FFFF` bytes is always followed
//! by another frame of the same packet (possibly empty).
//!
//! One read buffer per connection: frames are parsed in place and handed out as slices of it
//! (no copy), and the bytes of the previous frame are dropped only when the next one is asked
//! for. Writes go to one write buffer that is flushed at command boundaries (or when it grows
//! past [`FLUSH_THRESHOLD`] while a result set streams through), not once per packet.

use std::borrow::Cow;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest payload of one frame; a frame this long is continued by the next frame.
pub const MAX_FRAME: usize = 0xFF_FFFF;

/// While streaming a result set, the write buffer is flushed once it holds this much, so a large
/// result never sits in memory whole and the client sees the first rows early.
pub const FLUSH_THRESHOLD: usize = 64 * 1024;

const READ_CHUNK: usize = 16 * 1024;

/// Header of the frame or packet last read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length of this frame.
    pub len: usize,
    /// Sequence id of this frame.
    pub seq: u8,
}

impl FrameHeader {
    /// Whether another frame of the same packet follows this one.
    pub fn continues(&self) -> bool {
        self.len == MAX_FRAME
    }
}

/// A whole logical packet sitting in the read buffer (all of its frames).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketInfo {
    /// Sequence id of the first frame.
    pub seq: u8,
    /// Sequence id of the last frame; a reply starts at `last_seq + 1`.
    pub last_seq: u8,
    /// Number of frames (1 unless the payload is 16 MiB - 1 or more).
    pub frames: usize,
    /// Total payload length, frames joined.
    pub payload_len: usize,
}

/// A framed MySQL connection: one read buffer, one write buffer.
pub struct PacketStream<S> {
    stream: S,
    rbuf: BytesMut,
    wbuf: BytesMut,
    /// Bytes at the front of `rbuf` that belong to the frame/packet handed out last and are
    /// dropped at the next read. Zeroed as soon as they are dropped, so a read cancelled in
    /// `select!` and called again does not drop twice (the reads are cancel-safe).
    consumed: usize,
    /// Largest logical packet accepted by `next_packet` (client `max_allowed_packet`).
    max_packet: usize,
    /// Bytes written out since [`Self::take_written`] last asked (for metrics).
    written: u64,
    /// The sequence id after the last frame written, kept while tracked
    /// ([`Self::track_seq`]): the responses to a multi-statement text continue one numbering.
    next_seq: Option<u8>,
    /// Where writes out are counted ([`Self::count_writes`]): a backend connection's pool, so
    /// that the requests Shoal sends a server (each a round trip: one command, or several
    /// pipelined) can be read from `/metrics`.
    writes: Option<Arc<AtomicU64>>,
}

fn eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed by peer")
}

fn header_at(buf: &[u8], pos: usize) -> Option<FrameHeader> {
    let h = buf.get(pos..pos + 4)?;
    Some(FrameHeader {
        len: u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize,
        seq: h[3],
    })
}

impl<S: AsyncRead + AsyncWrite + Unpin> PacketStream<S> {
    pub fn new(stream: S, max_packet: usize) -> Self {
        PacketStream {
            stream,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            wbuf: BytesMut::with_capacity(READ_CHUNK),
            consumed: 0,
            max_packet,
            written: 0,
            next_seq: None,
            writes: None,
        }
    }

    /// The stream and the bytes read from it but not yet handed out (to put TLS on it).
    pub fn into_parts(mut self) -> (S, BytesMut) {
        let unread = self.take_unread();
        (self.stream, unread)
    }

    /// The same framed connection over `f(stream)`, buffers kept: e.g. the socket moved to
    /// another thread's event loop.
    pub fn try_map_stream<T>(
        self,
        f: impl FnOnce(S) -> io::Result<T>,
    ) -> io::Result<PacketStream<T>> {
        Ok(PacketStream {
            stream: f(self.stream)?,
            rbuf: self.rbuf,
            wbuf: self.wbuf,
            consumed: self.consumed,
            max_packet: self.max_packet,
            written: self.written,
            next_seq: self.next_seq,
            writes: self.writes,
        })
    }

    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    pub fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// Changes the largest packet `next_packet` accepts (small until a client has logged in).
    pub fn set_max_packet(&mut self, max_packet: usize) {
        self.max_packet = max_packet;
    }

    /// Takes the bytes read from the stream but not yet handed out (read ahead of the frame
    /// last read), e.g. to give them to a TLS layer put on the stream.
    pub fn take_unread(&mut self) -> BytesMut {
        self.drop_consumed();
        self.rbuf.split()
    }

    /// Reads and drops what the peer still sends, until it closes, `max` bytes have come, or
    /// `wait` has passed. Closing a socket with unread input resets the connection, and a peer
    /// still writing (an oversized packet) would lose the error written to it just before.
    pub async fn discard_incoming(&mut self, max: usize, wait: std::time::Duration) {
        self.rbuf.clear();
        self.consumed = 0;
        let deadline = tokio::time::Instant::now() + wait;
        let mut dropped = 0;
        while dropped < max {
            self.rbuf.clear();
            self.rbuf.reserve(READ_CHUNK);
            match crate::timers::timeout_at(deadline, self.stream.read_buf(&mut self.rbuf)).await {
                Ok(Ok(n)) if n > 0 => dropped += n,
                _ => break,
            }
        }
        self.rbuf.clear();
    }

    fn drop_consumed(&mut self) {
        if self.consumed > 0 {
            if self.consumed == self.rbuf.len() {
                // All of it read (the end of most responses): emptied, no offset bookkeeping.
                self.rbuf.clear();
            } else {
                self.rbuf.advance(self.consumed);
            }
            self.consumed = 0;
        }
    }

    /// Reads until at least `want` bytes are buffered. Cancel-safe: only appends to `rbuf`.
    async fn fill_to(&mut self, want: usize) -> io::Result<()> {
        while self.rbuf.len() < want {
            let missing = want - self.rbuf.len();
            self.rbuf.reserve(missing.max(READ_CHUNK));
            if self.stream.read_buf(&mut self.rbuf).await? == 0 {
                return Err(eof());
            }
        }
        Ok(())
    }

    /// The header of the frame at `pos` in the read buffer, if all of that frame is buffered.
    fn whole_frame_at(&self, pos: usize) -> Option<FrameHeader> {
        header_at(&self.rbuf, pos).filter(|h| self.rbuf.len() >= pos + 4 + h.len)
    }

    /// Whether a whole frame is already buffered after the current one (no read needed).
    pub fn has_buffered_frame(&self) -> bool {
        self.whole_frame_at(self.consumed).is_some()
    }

    /// Reads the next single frame (one piece of a possibly split packet). Its bytes stay valid
    /// until the next read: see [`Self::frame`] and [`Self::frame_payload`].
    pub async fn next_frame(&mut self) -> io::Result<FrameHeader> {
        self.drop_consumed();
        // The frame already buffered (every frame of a response but the first, usually):
        // taken without entering the read loop.
        if let Some(h) = self.whole_frame_at(0) {
            self.consumed = 4 + h.len;
            return Ok(h);
        }
        self.fill_to(4).await?;
        let Some(h) = header_at(&self.rbuf, 0) else {
            return Err(eof());
        };
        self.fill_to(4 + h.len).await?;
        self.consumed = 4 + h.len;
        Ok(h)
    }

    /// Extends the frame last read by [`Self::next_frame`] over the whole frames buffered
    /// behind it that are result-set rows, so that a run of rows is forwarded with one copy and
    /// without classifying each. A row never starts with 0xFF (an ERR) or 0xFE (an EOF or OK
    /// ending the rows; a row starting so is 16 MiB or more, so split); a frame starting with
    /// either, a split one, an empty one or an incomplete one stops the run. Returns how many
    /// frames were taken and the sequence id of the last one.
    pub fn take_buffered_rows(&mut self) -> (u64, Option<u8>) {
        let mut taken = 0;
        let mut last = None;
        while let Some(h) = self.whole_frame_at(self.consumed) {
            let start = self.consumed + 4;
            let end = start + h.len;
            if h.len == 0 || h.continues() {
                break;
            }
            if matches!(self.rbuf[start], 0xFE | 0xFF) {
                break;
            }
            self.consumed = end;
            taken += 1;
            last = Some(h.seq);
        }
        (taken, last)
    }

    /// The raw bytes (header and payload) of the frame or packet last read.
    pub fn frame(&self) -> &[u8] {
        &self.rbuf[..self.consumed]
    }

    /// The payload of the frame last read by [`Self::next_frame`].
    pub fn frame_payload(&self) -> &[u8] {
        &self.rbuf[4..self.consumed]
    }

    /// Reads one whole logical packet (all its frames), refusing one larger than `max_packet`
    /// before buffering it. The raw frames are [`Self::frame`], the joined payload
    /// [`Self::packet_payload`].
    pub async fn next_packet(&mut self) -> io::Result<PacketInfo> {
        self.drop_consumed();
        let mut pos = 0;
        let mut frames = 0;
        let mut payload_len = 0usize;
        let mut first_seq = 0;
        loop {
            self.fill_to(pos + 4).await?;
            let Some(h) = header_at(&self.rbuf, pos) else {
                return Err(eof());
            };
            if frames == 0 {
                first_seq = h.seq;
            }
            payload_len += h.len;
            if payload_len > self.max_packet {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    PacketTooLarge(payload_len),
                ));
            }
            self.fill_to(pos + 4 + h.len).await?;
            pos += 4 + h.len;
            frames += 1;
            if !h.continues() {
                self.consumed = pos;
                return Ok(PacketInfo {
                    seq: first_seq,
                    last_seq: h.seq,
                    frames,
                    payload_len,
                });
            }
        }
    }

    /// The payload of the packet last read by [`Self::next_packet`]: borrowed when it is one
    /// frame (the usual case), joined into a new buffer when it was split.
    pub fn packet_payload(&self) -> Cow<'_, [u8]> {
        let raw = self.frame();
        let first = header_at(raw, 0).map(|h| h.len).unwrap_or(0);
        if 4 + first == raw.len() {
            return Cow::Borrowed(&raw[4..]);
        }
        let mut out = Vec::with_capacity(raw.len());
        let mut pos = 0;
        while let Some(h) = header_at(raw, pos) {
            out.extend_from_slice(&raw[pos + 4..pos + 4 + h.len]);
            pos += 4 + h.len;
        }
        Cow::Owned(out)
    }

    /// Appends one packet, split into frames as the protocol requires; `seq` is the id of the
    /// first frame and is advanced past the last one.
    pub fn write_packet(&mut self, seq: &mut u8, payload: &[u8]) {
        write_frames(&mut self.wbuf, seq, payload);
        if let Some(next) = &mut self.next_seq {
            *next = *seq;
        }
    }

    /// Starts (`true`) or stops keeping the sequence id after the last frame written.
    pub fn track_seq(&mut self, on: bool) {
        self.next_seq = on.then_some(0);
    }

    /// The sequence id after the last frame written since tracking started.
    pub fn next_seq(&self) -> Option<u8> {
        self.next_seq
    }

    /// Makes `payload` the packet last read, as if the peer had sent it alone (sequence id 0);
    /// what was read after it stays unread. The statements of a multi-statement text each run
    /// as the command they would be on their own.
    pub fn replace_packet(&mut self, payload: &[u8]) {
        let rest = self.rbuf.split_off(self.consumed);
        self.rbuf.clear();
        let mut seq = 0;
        write_frames(&mut self.rbuf, &mut seq, payload);
        self.consumed = self.rbuf.len();
        self.rbuf.extend_from_slice(&rest);
    }

    /// Appends a command (`cmd` then `arg`) as the first packet of its exchange, framed
    /// without first copying it into a payload of its own.
    pub fn write_command(&mut self, cmd: u8, arg: &[u8]) {
        write_command_frames(&mut self.wbuf, cmd, arg);
    }

    /// Appends raw bytes (already framed), e.g. a frame forwarded from the other side.
    pub fn write_raw(&mut self, bytes: &[u8]) {
        self.wbuf.extend_from_slice(bytes);
        if self.next_seq.is_some() {
            let mut pos = 0;
            while let Some(h) = header_at(bytes, pos) {
                self.next_seq = Some(h.seq.wrapping_add(1));
                pos += 4 + h.len;
            }
        }
    }

    /// Appends raw frames, giving them consecutive sequence ids from `seq`.
    pub fn write_raw_reseq(&mut self, bytes: &[u8], seq: &mut u8) {
        let start = self.wbuf.len();
        self.wbuf.extend_from_slice(bytes);
        let mut pos = start;
        while let Some(h) = header_at(&self.wbuf, pos) {
            self.wbuf[pos + 3] = *seq;
            *seq = seq.wrapping_add(1);
            pos += 4 + h.len;
        }
        if let Some(next) = &mut self.next_seq {
            *next = *seq;
        }
    }

    /// Bytes written out since the last call.
    pub fn take_written(&mut self) -> u64 {
        std::mem::take(&mut self.written)
    }

    /// Whether enough is buffered for the client that it should be flushed before more is
    /// written (a streamed result goes out in pieces of [`FLUSH_THRESHOLD`]). A plain check,
    /// not an async call: asked once per forwarded frame or merged row.
    pub fn needs_flush(&self) -> bool {
        self.wbuf.len() >= FLUSH_THRESHOLD
    }

    /// Counts every write out from now on into `counter`.
    pub fn count_writes(&mut self, counter: Arc<AtomicU64>) {
        self.writes = Some(counter);
    }

    /// Writes out everything buffered.
    pub async fn flush(&mut self) -> io::Result<()> {
        if !self.wbuf.is_empty() {
            self.written += self.wbuf.len() as u64;
            if let Some(c) = &self.writes {
                c.fetch_add(1, Ordering::Relaxed);
            }
            self.stream.write_all(&self.wbuf).await?;
            self.wbuf.clear();
            // A TLS stream may keep the last records after accepting all bytes (when the
            // socket was full): flushing sends them. A no-op on plain TCP.
            self.stream.flush().await?;
        }
        Ok(())
    }

    /// Forwards the frame last read from `self` into `to`'s write buffer without copying it
    /// anywhere else.
    pub fn forward_frame_to<T: AsyncRead + AsyncWrite + Unpin>(&self, to: &mut PacketStream<T>) {
        to.write_raw(self.frame());
    }

    pub async fn shutdown(&mut self) {
        let _ = self.flush().await;
        let _ = self.stream.shutdown().await;
    }
}

/// A stream that can tell, without waiting, whether its peer closed it or sent something.
pub trait IdleProbe {
    fn closed_or_spoke(&mut self) -> bool;
}

impl IdleProbe for tokio::net::TcpStream {
    fn closed_or_spoke(&mut self) -> bool {
        // `try_read` answers WouldBlock from the runtime's readiness alone, with no system call
        // and no waker registered (a `poll_read_ready` with a no-op waker locks the socket's
        // waiter list to store it, on every statement); only a socket the runtime saw become
        // readable is read, and readiness left from the last response is cleared by that read.
        let mut probe = [0u8; 16];
        !matches!(self.try_read(&mut probe), Err(ref e) if e.kind() == io::ErrorKind::WouldBlock)
    }
}

impl<S: IdleProbe> PacketStream<S> {
    /// Whether the peer closed the connection, or sent something, while nothing was asked of it
    /// (a backend connection sitting idle that the server killed or timed out). Costs no system
    /// call unless the runtime has seen the socket become readable.
    pub fn peer_closed_or_spoke(&mut self) -> bool {
        self.rbuf.len() > self.consumed || self.stream.closed_or_spoke()
    }
}

/// Frames the command `cmd` + `arg` into `out` with sequence id 0, as [`write_frames`] would
/// frame it as one payload.
pub fn write_command_frames(out: &mut BytesMut, cmd: u8, arg: &[u8]) {
    let len = 1 + arg.len();
    if len >= MAX_FRAME {
        // Split into frames (rare: a statement of 16 MiB): the one place a copy is simplest.
        let mut payload = Vec::with_capacity(len);
        payload.push(cmd);
        payload.extend_from_slice(arg);
        write_frames(out, &mut 0, &payload);
        return;
    }
    out.reserve(4 + len);
    out.put_uint_le(len as u64, 3);
    out.put_u8(0);
    out.put_u8(cmd);
    out.extend_from_slice(arg);
}

/// Frames `payload` into `out`: chunks of `MAX_FRAME` bytes, and an empty trailing frame when
/// the payload is an exact multiple of it, so the reader knows the packet ended.
pub fn write_frames(out: &mut BytesMut, seq: &mut u8, payload: &[u8]) {
    out.reserve(payload.len() + 4 * (payload.len() / MAX_FRAME + 1));
    let mut rest = payload;
    loop {
        let n = rest.len().min(MAX_FRAME);
        out.put_uint_le(n as u64, 3);
        out.put_u8(*seq);
        *seq = seq.wrapping_add(1);
        out.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        if n < MAX_FRAME {
            return;
        }
    }
}

/// The payload of an incoming packet exceeded `max_allowed_packet`.
#[derive(Debug)]
pub struct PacketTooLarge(pub usize);

impl std::fmt::Display for PacketTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "packet of at least {} bytes exceeds max_allowed_packet",
            self.0
        )
    }
}

impl std::error::Error for PacketTooLarge {}

/// Whether an i/o error is our "packet too large" refusal.
pub fn is_too_large(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<PacketTooLarge>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(seq0: u8, payload: &[u8]) -> BytesMut {
        let mut out = BytesMut::new();
        let mut seq = seq0;
        write_frames(&mut out, &mut seq, payload);
        out
    }

    #[test]
    fn small_payload_is_one_frame() {
        let out = framed(3, b"abc");
        assert_eq!(&out[..], &[3, 0, 0, 3, b'a', b'b', b'c']);
    }

    #[test]
    fn payload_of_max_minus_one_is_one_frame() {
        let payload = vec![7u8; MAX_FRAME - 1];
        let out = framed(0, &payload);
        assert_eq!(out.len(), 4 + MAX_FRAME - 1);
        assert_eq!(&out[..4], &[0xFE, 0xFF, 0xFF, 0]);
    }

    #[test]
    fn payload_of_exactly_max_gets_empty_trailer() {
        let payload = vec![7u8; MAX_FRAME];
        let out = framed(0, &payload);
        assert_eq!(out.len(), 4 + MAX_FRAME + 4);
        assert_eq!(&out[..4], &[0xFF, 0xFF, 0xFF, 0]);
        assert_eq!(&out[4 + MAX_FRAME..], &[0, 0, 0, 1]);
    }

    #[test]
    fn a_command_is_framed_as_its_whole_payload() {
        for len in [0, 5, MAX_FRAME - 2, MAX_FRAME - 1, MAX_FRAME + 3] {
            let arg = vec![9u8; len];
            let mut out = BytesMut::new();
            write_command_frames(&mut out, 3, &arg);
            let mut whole = vec![3u8];
            whole.extend_from_slice(&arg);
            assert!(out == framed(0, &whole), "argument of {len} bytes");
        }
    }

    #[test]
    fn payload_over_max_is_split_with_consecutive_ids() {
        let payload = vec![1u8; MAX_FRAME + 10];
        let out = framed(255, &payload);
        assert_eq!(&out[..4], &[0xFF, 0xFF, 0xFF, 255]);
        assert_eq!(&out[4 + MAX_FRAME..4 + MAX_FRAME + 4], &[10, 0, 0, 0]);
    }

    async fn roundtrip(payload: Vec<u8>) {
        let (a, b) = tokio::io::duplex(1 << 20);
        let mut w = PacketStream::new(a, 64 << 20);
        let mut r = PacketStream::new(b, 64 << 20);
        let expected = payload.clone();
        let writer = tokio::spawn(async move {
            let mut seq = 0;
            w.write_packet(&mut seq, &payload);
            w.write_packet(&mut seq, b"next");
            w.flush().await.unwrap();
            w
        });
        let info = r.next_packet().await.unwrap();
        assert_eq!(info.payload_len, expected.len());
        assert_eq!(info.frames, expected.len() / MAX_FRAME + 1);
        assert_eq!(&*r.packet_payload(), &expected[..]);
        let next = r.next_packet().await.unwrap();
        assert_eq!(next.seq, info.last_seq.wrapping_add(1));
        assert_eq!(&*r.packet_payload(), b"next");
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn reassembles_at_the_16mib_boundaries() {
        for len in [0, 1, MAX_FRAME - 1, MAX_FRAME, MAX_FRAME + 1, 2 * MAX_FRAME] {
            let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            roundtrip(payload).await;
        }
    }

    #[tokio::test]
    async fn frames_are_read_one_by_one() {
        let (a, b) = tokio::io::duplex(1 << 20);
        let mut w = PacketStream::new(a, 1 << 30);
        let mut r = PacketStream::new(b, 1 << 30);
        let payload = vec![9u8; MAX_FRAME + 2];
        let writer = tokio::spawn(async move {
            let mut seq = 0;
            w.write_packet(&mut seq, &payload);
            w.flush().await.unwrap();
            w
        });
        let h1 = r.next_frame().await.unwrap();
        assert!(h1.continues());
        assert_eq!(r.frame_payload().len(), MAX_FRAME);
        let h2 = r.next_frame().await.unwrap();
        assert_eq!((h2.len, h2.seq), (2, 1));
        assert_eq!(r.frame(), &[2, 0, 0, 1, 9, 9]);
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn a_frame_is_read_whole_whether_buffered_or_split_across_reads() {
        use tokio::io::AsyncWriteExt;
        let (mut a, b) = tokio::io::duplex(1 << 20);
        let mut r = PacketStream::new(b, 1 << 30);
        // Two whole frames in one write, then a third whose header and first payload byte
        // come before the rest of it.
        a.write_all(&[1, 0, 0, 0, b'x', 2, 0, 0, 1, b'y', b'z', 3, 0, 0, 2, b'p'])
            .await
            .unwrap();
        let h = r.next_frame().await.unwrap();
        assert_eq!((h.len, h.seq, r.frame_payload()), (1, 0, &b"x"[..]));
        let h = r.next_frame().await.unwrap();
        assert_eq!((h.len, h.seq, r.frame_payload()), (2, 1, &b"yz"[..]));
        let writer = tokio::spawn(async move {
            tokio::task::yield_now().await;
            a.write_all(b"qr").await.unwrap();
            a
        });
        let h = r.next_frame().await.unwrap();
        assert_eq!(
            (h.len, h.seq, r.frame()),
            (3, 2, &[3, 0, 0, 2, b'p', b'q', b'r'][..])
        );
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn a_run_of_buffered_rows_is_taken_up_to_the_terminator() {
        let (a, b) = tokio::io::duplex(1 << 20);
        let mut w = PacketStream::new(a, 1 << 30);
        let mut r = PacketStream::new(b, 1 << 30);
        let mut seq = 3;
        // Three rows (one starting with NULL's 0xFB), then an EOF, then another row.
        for p in [
            &[1u8, b'a'][..],
            &[0xFB],
            &[2, b'b', b'c'],
            &[0xFE, 0, 0, 2, 0],
            &[1, b'z'],
        ] {
            w.write_packet(&mut seq, p);
        }
        w.flush().await.unwrap();
        let h = r.next_frame().await.unwrap();
        assert_eq!(h.seq, 3);
        assert_eq!(r.take_buffered_rows(), (2, Some(5)));
        assert_eq!(
            r.frame(),
            &[
                2, 0, 0, 3, 1, b'a', 1, 0, 0, 4, 0xFB, 3, 0, 0, 5, 2, b'b', b'c'
            ]
        );
        // The EOF stops the run and is read as the next frame.
        let h = r.next_frame().await.unwrap();
        assert_eq!((h.seq, r.frame_payload()[0]), (6, 0xFE));
        assert_eq!(r.take_buffered_rows(), (1, Some(7)));
        // Nothing buffered: nothing taken.
        assert_eq!(r.take_buffered_rows(), (0, None));
    }

    #[tokio::test]
    async fn oversized_packet_is_refused_before_buffering() {
        let (a, b) = tokio::io::duplex(1 << 16);
        let mut w = PacketStream::new(a, 1 << 30);
        let mut r = PacketStream::new(b, 1000);
        let mut seq = 0;
        // Only the header is sent: the refusal must not wait for the payload.
        w.write_raw(&[0xE9, 0x03, 0x00, 0x00]);
        w.flush().await.unwrap();
        let err = r.next_packet().await.unwrap_err();
        assert!(is_too_large(&err));
        w.write_packet(&mut seq, b"x");
    }

    #[tokio::test]
    async fn reseq_rewrites_ids() {
        let (a, _b) = tokio::io::duplex(64);
        let mut w = PacketStream::new(a, 1 << 20);
        let mut raw = BytesMut::new();
        let mut s = 0;
        write_frames(&mut raw, &mut s, b"a");
        write_frames(&mut raw, &mut s, b"bc");
        let mut seq = 5;
        w.write_raw_reseq(&raw, &mut seq);
        assert_eq!(seq, 7);
        assert_eq!(&w.wbuf[..], &[1, 0, 0, 5, b'a', 2, 0, 0, 6, b'b', b'c']);
    }
}
