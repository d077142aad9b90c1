//! A minimal hand-written MySQL client for what `mysql_async` cannot send: garbage, malformed
//! and oversized packets, and commands it has no API for (COM_INIT_DB, COM_FIELD_LIST,
//! COM_STATISTICS, COM_SET_OPTION, unknown command bytes).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const COM_QUIT: u8 = 0x01;
pub const COM_INIT_DB: u8 = 0x02;
pub const COM_QUERY: u8 = 0x03;
pub const COM_FIELD_LIST: u8 = 0x04;
pub const COM_STATISTICS: u8 = 0x09;
pub const COM_PING: u8 = 0x0e;
pub const COM_STMT_PREPARE: u8 = 0x16;
pub const COM_STMT_EXECUTE: u8 = 0x17;
pub const COM_SET_OPTION: u8 = 0x1b;

const CLIENT_LONG_PASSWORD: u32 = 0x1;
const CLIENT_CONNECT_WITH_DB: u32 = 0x8;
const CLIENT_PROTOCOL_41: u32 = 0x200;
const CLIENT_TRANSACTIONS: u32 = 0x2000;
const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
const CLIENT_MULTI_STATEMENTS: u32 = 0x1_0000;
const CLIENT_MULTI_RESULTS: u32 = 0x2_0000;
const CLIENT_PLUGIN_AUTH: u32 = 0x8_0000;
/// MariaDB's extended capability (in the handshake's reserved bytes) for metadata caching.
const MARIADB_CLIENT_CACHE_METADATA: u32 = 0x10;

/// How long any single read may wait: a proxy that stops answering fails the test, not hangs it.
pub const READ_TIMEOUT: Duration = Duration::from_secs(20);

/// One reply packet, classified by its first byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Ok,
    Err {
        code: u16,
        state: String,
        message: String,
    },
    /// Anything else (a result set header, a COM_STATISTICS string, ...): the raw payload.
    Other(Vec<u8>),
}

impl Reply {
    pub fn parse(payload: &[u8]) -> Reply {
        match payload.first() {
            Some(0x00) if payload.len() >= 7 => Reply::Ok,
            Some(0xff) if payload.len() >= 3 => {
                let code = u16::from_le_bytes([payload[1], payload[2]]);
                let (state, message) = if payload.get(3) == Some(&b'#') && payload.len() >= 9 {
                    (
                        String::from_utf8_lossy(&payload[4..9]).into_owned(),
                        String::from_utf8_lossy(&payload[9..]).into_owned(),
                    )
                } else {
                    (
                        String::new(),
                        String::from_utf8_lossy(&payload[3..]).into_owned(),
                    )
                };
                Reply::Err {
                    code,
                    state,
                    message,
                }
            }
            _ => Reply::Other(payload.to_vec()),
        }
    }

    /// The error code, if this is an ERR packet.
    pub fn err_code(&self) -> Option<u16> {
        match self {
            Reply::Err { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// A connection speaking the wire protocol by hand.
pub struct RawConn {
    stream: TcpStream,
    seq: u8,
    /// MARIADB_CLIENT_CACHE_METADATA was negotiated.
    cache_metadata: bool,
}

impl RawConn {
    /// Opens a TCP connection without reading anything.
    pub async fn connect(addr: &str) -> std::io::Result<RawConn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(RawConn {
            stream,
            seq: 0,
            cache_metadata: false,
        })
    }

    /// Connects and logs in with `mysql_native_password`; returns the login reply (Ok or Err).
    pub async fn login(
        addr: &str,
        user: &str,
        password: &str,
        db: Option<&str>,
    ) -> std::io::Result<(RawConn, Reply)> {
        Self::login_with_collation(addr, user, password, db, 45).await
    }

    /// Like [`RawConn::login`], with the handshake's collation id (45: utf8mb4_general_ci,
    /// 8: latin1_swedish_ci, 33: utf8mb3_general_ci).
    pub async fn login_with_collation(
        addr: &str,
        user: &str,
        password: &str,
        db: Option<&str>,
        collation: u8,
    ) -> std::io::Result<(RawConn, Reply)> {
        Self::login_with(addr, user, password, db, collation, true).await
    }

    /// Logs in announcing `caching_sha2_password` (what MySQL 8 clients do by default) with a
    /// SHA-256 scramble; follows an auth switch to `mysql_native_password` or a fast-auth
    /// success. Returns the final reply.
    pub async fn login_claiming_sha2(
        addr: &str,
        user: &str,
        password: &str,
        db: Option<&str>,
    ) -> std::io::Result<(RawConn, Reply)> {
        let hello = Hello {
            claim_sha2: true,
            ..Hello::default()
        };
        Self::login_inner(addr, user, password, db, hello).await
    }

    /// Like [`RawConn::login_with_collation`]; `multi_statements: false` leaves
    /// CLIENT_MULTI_STATEMENTS out of the handshake.
    pub async fn login_with(
        addr: &str,
        user: &str,
        password: &str,
        db: Option<&str>,
        collation: u8,
        multi_statements: bool,
    ) -> std::io::Result<(RawConn, Reply)> {
        let hello = Hello {
            collation,
            multi_statements,
            ..Hello::default()
        };
        Self::login_inner(addr, user, password, db, hello).await
    }

    /// Logs in as a MariaDB client asking for metadata caching (MARIADB_CLIENT_CACHE_METADATA)
    /// when the greeting offers it. Also returns whether it was negotiated: then every column
    /// count carries a "metadata follows" byte.
    pub async fn login_caching_metadata(
        addr: &str,
        user: &str,
        password: &str,
        db: Option<&str>,
    ) -> std::io::Result<(RawConn, Reply, bool)> {
        let hello = Hello {
            cache_metadata: true,
            ..Hello::default()
        };
        let (conn, reply) = Self::login_inner(addr, user, password, db, hello).await?;
        let negotiated = conn.cache_metadata;
        Ok((conn, reply, negotiated))
    }

    async fn login_inner(
        addr: &str,
        user: &str,
        password: &str,
        db: Option<&str>,
        hello: Hello,
    ) -> std::io::Result<(RawConn, Reply)> {
        let Hello {
            collation,
            multi_statements,
            claim_sha2,
            cache_metadata,
        } = hello;
        let mut conn = RawConn::connect(addr).await?;
        let greeting = conn.read_packet().await?;
        let greeting = Greeting::parse(&greeting).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "unparsable greeting")
        })?;
        let mut caps = CLIENT_LONG_PASSWORD
            | CLIENT_PROTOCOL_41
            | CLIENT_TRANSACTIONS
            | CLIENT_SECURE_CONNECTION
            | CLIENT_MULTI_STATEMENTS
            | CLIENT_MULTI_RESULTS
            | CLIENT_PLUGIN_AUTH;
        if db.is_some() {
            caps |= CLIENT_CONNECT_WITH_DB;
        }
        if !multi_statements {
            caps &= !CLIENT_MULTI_STATEMENTS;
        }
        caps &= greeting.capabilities | CLIENT_CONNECT_WITH_DB;
        // A MariaDB server announces its extended capabilities by clearing CLIENT_MYSQL (the
        // CLIENT_LONG_PASSWORD bit); a client asks for them the same way.
        let ext = if cache_metadata
            && greeting.capabilities & CLIENT_LONG_PASSWORD == 0
            && greeting.mariadb & MARIADB_CLIENT_CACHE_METADATA != 0
        {
            caps &= !CLIENT_LONG_PASSWORD;
            MARIADB_CLIENT_CACHE_METADATA
        } else {
            0
        };
        conn.cache_metadata = ext != 0;
        let token = if claim_sha2 {
            mysql_common::scramble::scramble_sha256(&greeting.nonce, password.as_bytes())
                .map(|t| t.to_vec())
                .unwrap_or_default()
        } else {
            native_token(&greeting.nonce, password)
        };
        let mut body = Vec::new();
        body.extend_from_slice(&caps.to_le_bytes());
        body.extend_from_slice(&(16u32 << 20).to_le_bytes());
        body.push(collation);
        body.extend_from_slice(&[0u8; 19]);
        body.extend_from_slice(&ext.to_le_bytes());
        body.extend_from_slice(user.as_bytes());
        body.push(0);
        body.push(token.len() as u8);
        body.extend_from_slice(&token);
        if let Some(db) = db {
            body.extend_from_slice(db.as_bytes());
            body.push(0);
        }
        if claim_sha2 {
            body.extend_from_slice(b"caching_sha2_password\0");
        } else {
            body.extend_from_slice(b"mysql_native_password\0");
        }
        conn.write_packet(&body).await?;
        let mut reply = conn.read_packet().await?;
        if reply.as_slice() == [0x01, 0x03] {
            // caching_sha2_password fast-auth success: the OK follows.
            reply = conn.read_packet().await?;
        }
        if reply.first() == Some(&0xfe) {
            // Auth switch request: plugin name, then the new nonce.
            let rest = &reply[1..];
            let name_end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            let plugin = String::from_utf8_lossy(&rest[..name_end]).into_owned();
            if plugin != "mysql_native_password" {
                return Err(std::io::Error::other(format!(
                    "auth switch to unsupported plugin {plugin}"
                )));
            }
            let mut nonce = rest.get(name_end + 1..).unwrap_or(&[]).to_vec();
            if nonce.last() == Some(&0) {
                nonce.pop();
            }
            conn.write_packet(&native_token(&nonce, password)).await?;
            reply = conn.read_packet().await?;
        }
        Ok((conn, Reply::parse(&reply)))
    }

    /// Sends one command packet (sequence id 0) and returns the first reply packet.
    pub async fn command(&mut self, cmd: u8, payload: &[u8]) -> std::io::Result<Reply> {
        let reply = self.command_payload(cmd, payload).await?;
        Ok(Reply::parse(&reply))
    }

    /// Like [`RawConn::command`], but returns the first reply packet's bytes.
    pub async fn command_payload(&mut self, cmd: u8, payload: &[u8]) -> std::io::Result<Vec<u8>> {
        self.seq = 0;
        let mut body = Vec::with_capacity(payload.len() + 1);
        body.push(cmd);
        body.extend_from_slice(payload);
        self.write_packet(&body).await?;
        self.read_packet().await
    }

    /// Runs a COM_QUERY that returns one result set and returns its row packets, or the reply
    /// that came instead of a result set.
    pub async fn query_rows(&mut self, sql: &str) -> std::io::Result<Vec<Vec<u8>>> {
        match self.command(COM_QUERY, sql.as_bytes()).await? {
            Reply::Other(_) => {}
            other => return Err(std::io::Error::other(format!("{sql}: {other:?}"))),
        }
        // Column definitions up to their EOF (no CLIENT_DEPRECATE_EOF), then rows up to EOF.
        self.read_until_eof().await?;
        let mut rows = self.read_until_eof().await?;
        match rows.pop() {
            Some(last) if last.first() == Some(&0xfe) => Ok(rows),
            last => Err(std::io::Error::other(format!(
                "{sql}: result set ended with {:?}",
                last.map(|p| Reply::parse(&p))
            ))),
        }
    }

    /// Sends a COM_QUERY and returns every packet of its response, all results of a
    /// multi-statement included, up to the final OK, EOF or ERR.
    pub async fn query_packets(&mut self, sql: &str) -> std::io::Result<Vec<Vec<u8>>> {
        self.query_packets_bytes(sql.as_bytes()).await
    }

    /// [`RawConn::query_packets`] of a statement's bytes as they are (in a charset other than
    /// UTF-8, say).
    pub async fn query_packets_bytes(&mut self, sql: &[u8]) -> std::io::Result<Vec<Vec<u8>>> {
        const MORE_RESULTS: u16 = 0x0008;
        let mut packets = vec![self.command_payload(COM_QUERY, sql).await?];
        loop {
            let head = packets.last().expect("a packet").clone();
            let more = match head.first() {
                Some(0x00) => {
                    let ok =
                        parse_ok_status(&head).ok_or_else(|| std::io::Error::other("bad OK"))?;
                    ok & MORE_RESULTS != 0
                }
                Some(0xff) => false,
                _ => {
                    // A result set: column definitions up to EOF, rows up to EOF or ERR.
                    packets.extend(self.read_until_eof().await?);
                    let rows = self.read_until_eof().await?;
                    let last = rows.last().cloned().unwrap_or_default();
                    packets.extend(rows);
                    last.first() == Some(&0xfe)
                        && u16::from_le_bytes([last[3], last[4]]) & MORE_RESULTS != 0
                }
            };
            if !more {
                return Ok(packets);
            }
            packets.push(self.read_packet().await?);
        }
    }

    /// COM_STMT_PREPARE: the statement id and its column count (the parameter and column
    /// definitions are read and dropped).
    pub async fn prepare(&mut self, sql: &str) -> std::io::Result<(u32, u16)> {
        let head = self
            .command_payload(COM_STMT_PREPARE, sql.as_bytes())
            .await?;
        if head.first() != Some(&0) || head.len() < 12 {
            return Err(std::io::Error::other(format!(
                "{sql}: {:?}",
                Reply::parse(&head)
            )));
        }
        let id = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
        let columns = u16::from_le_bytes([head[5], head[6]]);
        let params = u16::from_le_bytes([head[7], head[8]]);
        if params > 0 {
            self.read_until_eof().await?;
        }
        if columns > 0 {
            self.read_until_eof().await?;
        }
        Ok((id, columns))
    }

    /// COM_STMT_EXECUTE of a statement without parameters, no cursor: every packet of its
    /// response (one result set: column count, the definitions if they follow, their EOF, the
    /// binary rows, the terminator), or the one reply that came instead.
    pub async fn execute_packets(&mut self, id: u32) -> std::io::Result<Vec<Vec<u8>>> {
        let mut payload = id.to_le_bytes().to_vec();
        payload.push(0);
        payload.extend_from_slice(&1u32.to_le_bytes());
        let head = self.command_payload(COM_STMT_EXECUTE, &payload).await?;
        if !matches!(Reply::parse(&head), Reply::Other(_)) {
            return Ok(vec![head]);
        }
        let mut packets = vec![head];
        packets.extend(self.read_until_eof().await?);
        packets.extend(self.read_until_eof().await?);
        Ok(packets)
    }

    /// Reads the rest of a multi-packet reply up to its terminator (EOF/OK after rows, or ERR).
    /// Returns every packet read, the terminator included.
    pub async fn read_until_eof(&mut self) -> std::io::Result<Vec<Vec<u8>>> {
        let mut packets = Vec::new();
        loop {
            let p = self.read_packet().await?;
            let done =
                matches!(p.first(), Some(0xfe) if p.len() < 0xff_ffff) || p.first() == Some(&0xff);
            packets.push(p);
            if done {
                return Ok(packets);
            }
        }
    }

    /// Starts a new command: the next packet written gets sequence id 0.
    pub fn seq_reset(&mut self) {
        self.seq = 0;
    }

    /// Reads one packet (payloads up to 16 MiB - 1; no reassembly), bounded by READ_TIMEOUT.
    pub async fn read_packet(&mut self) -> std::io::Result<Vec<u8>> {
        tokio::time::timeout(READ_TIMEOUT, async {
            let mut header = [0u8; 4];
            self.stream.read_exact(&mut header).await?;
            let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
            self.seq = header[3].wrapping_add(1);
            let mut payload = vec![0u8; len];
            self.stream.read_exact(&mut payload).await?;
            Ok(payload)
        })
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no reply in time"))?
    }

    /// Writes one packet with the next sequence id.
    pub async fn write_packet(&mut self, payload: &[u8]) -> std::io::Result<()> {
        assert!(payload.len() < 0xff_ffff, "use write_raw for split packets");
        let mut buf = Vec::with_capacity(payload.len() + 4);
        buf.extend_from_slice(&(payload.len() as u32).to_le_bytes()[..3]);
        buf.push(self.seq);
        buf.extend_from_slice(payload);
        self.seq = self.seq.wrapping_add(1);
        self.write_raw(&buf).await
    }

    /// Writes bytes as they are, no framing.
    pub async fn write_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    /// True if the peer closed the connection (EOF or reset) within `wait`; false if it is still
    /// open and silent. Data that arrives meanwhile is read and discarded.
    pub async fn closed_within(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match tokio::time::timeout_at(deadline, self.stream.read(&mut buf)).await {
                Err(_) => return false,
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => continue,
            }
        }
    }
}

/// The status flags of an OK packet (after the two length-encoded counters).
fn parse_ok_status(p: &[u8]) -> Option<u16> {
    let mut i = 1;
    for _ in 0..2 {
        i += match *p.get(i)? {
            0xfc => 3,
            0xfd => 4,
            0xfe => 9,
            _ => 1,
        };
    }
    Some(u16::from_le_bytes([*p.get(i)?, *p.get(i + 1)?]))
}

/// How a login introduces itself.
struct Hello {
    collation: u8,
    multi_statements: bool,
    claim_sha2: bool,
    cache_metadata: bool,
}

impl Default for Hello {
    fn default() -> Hello {
        Hello {
            collation: 45,
            multi_statements: true,
            claim_sha2: false,
            cache_metadata: false,
        }
    }
}

struct Greeting {
    capabilities: u32,
    /// MariaDB's extended capabilities (the last 4 of the 10 reserved bytes).
    mariadb: u32,
    nonce: Vec<u8>,
}

impl Greeting {
    fn parse(p: &[u8]) -> Option<Greeting> {
        if *p.first()? != 10 {
            return None;
        }
        let mut i = 1;
        i += p[i..].iter().position(|&b| b == 0)? + 1; // server version
        i += 4; // connection id
        let mut nonce = p.get(i..i + 8)?.to_vec();
        i += 8 + 1;
        let caps_low = u16::from_le_bytes([*p.get(i)?, *p.get(i + 1)?]) as u32;
        i += 2 + 1 + 2; // caps low, charset, status
        let caps_high = u16::from_le_bytes([*p.get(i)?, *p.get(i + 1)?]) as u32;
        i += 2;
        let auth_len = *p.get(i)? as usize;
        let ext = p.get(i + 7..i + 11)?;
        let mariadb = u32::from_le_bytes([ext[0], ext[1], ext[2], ext[3]]);
        i += 1 + 10;
        let part2_len = auth_len.saturating_sub(8).max(13);
        let part2 = p.get(i..(i + part2_len).min(p.len()))?;
        // The second part is NUL-terminated; the nonce is 20 bytes in all.
        nonce.extend(part2.iter().take_while(|&&b| b != 0).take(12));
        Some(Greeting {
            capabilities: caps_low | (caps_high << 16),
            mariadb,
            nonce,
        })
    }
}

fn native_token(nonce: &[u8], password: &str) -> Vec<u8> {
    mysql_common::scramble::scramble_native(nonce, password.as_bytes())
        .map(|t| t.to_vec())
        .unwrap_or_default()
}
