//! Seed corpus for the fuzz targets in `fuzz/`, captured from real traffic: recording relays
//! sit between real clients (the `mariadb` CLI, mysql_async, sysbench) and Shoal, and between
//! Shoal and a MariaDB started by the launcher; what each side sent is cut into the inputs each target takes and written to
//! `fuzz/corpus/<target>/` (deduplicated, capped so the committed corpus stays small).
//!
//! Not part of the normal suite (it writes into the source tree); run it when the decoders'
//! inputs change:
//! `cargo test -p shoal-proxy --test capture_corpus -- --ignored --nocapture`

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use mysql_common::constants::{CapabilityFlags, ColumnFlags};
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_proxy::config::{BackendSpec, ProxyConfig};
use shoal_proxy::merge::parse_column;
use shoal_proxy::server::Proxy;
use shoal_proxy::wire::response::{Event, Expect, ResponseReader};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Both directions of one client connection, as recorded.
#[derive(Default)]
struct Conversation {
    client: Vec<u8>,
    server: Vec<u8>,
}

type Recordings = Arc<Mutex<Vec<Arc<Mutex<Conversation>>>>>;

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    conv: Arc<Mutex<Conversation>>,
    client_side: bool,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        {
            let mut c = conv.lock().unwrap();
            let log = if client_side {
                &mut c.client
            } else {
                &mut c.server
            };
            log.extend_from_slice(&buf[..n]);
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// A relay to `upstream` recording every connection; returns its port.
async fn recording_relay(upstream: String, recs: Recordings) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                continue;
            };
            let conv = Arc::new(Mutex::new(Conversation::default()));
            recs.lock().unwrap().push(conv.clone());
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            tokio::spawn(pump(cr, sw, conv.clone(), true));
            tokio::spawn(pump(sr, cw, conv, false));
        }
    });
    port
}

/// (sequence id, payload) of each packet in a recorded stream.
fn packets(mut b: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let len = u32::from_le_bytes([b[0], b[1], b[2], 0]) as usize;
        if b.len() < 4 + len {
            break;
        }
        out.push((b[3], b[4..4 + len].to_vec()));
        b = &b[4 + len..];
    }
    out
}

fn frame(payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut out = bytes::BytesMut::new();
    let mut seq = 1;
    for p in payloads {
        shoal_proxy::wire::packet::write_frames(&mut out, &mut seq, p);
    }
    out.to_vec()
}

/// Corpus files per target, deduplicated by content.
#[derive(Default)]
struct Corpus {
    files: BTreeMap<&'static str, BTreeMap<u64, Vec<u8>>>,
}

impl Corpus {
    fn add(&mut self, target: &'static str, data: Vec<u8>) {
        let mut h = DefaultHasher::new();
        data.hash(&mut h);
        self.files
            .entry(target)
            .or_default()
            .insert(h.finish(), data);
    }

    /// Writes at most `cap` files per target, the smallest first of each distinct length so
    /// that the variety survives the cap.
    fn write(&self, root: &Path, cap: usize, max_len: usize) {
        for (target, files) in &self.files {
            let dir = root.join(target);
            std::fs::create_dir_all(&dir).unwrap();
            let mut by_len: BTreeMap<usize, Vec<&Vec<u8>>> = BTreeMap::new();
            for d in files.values().filter(|d| d.len() <= max_len) {
                by_len.entry(d.len()).or_default().push(d);
            }
            let mut picked = Vec::new();
            let mut round = 0;
            while picked.len() < cap {
                let before = picked.len();
                for ds in by_len.values() {
                    if let Some(d) = ds.get(round)
                        && picked.len() < cap
                    {
                        picked.push(*d);
                    }
                }
                if picked.len() == before {
                    break;
                }
                round += 1;
            }
            for d in &picked {
                let mut h = DefaultHasher::new();
                d.hash(&mut h);
                std::fs::write(dir.join(format!("cap-{:016x}", h.finish())), d).unwrap();
            }
            println!("{target}: {} files", picked.len());
        }
    }
}

/// The input byte of `merge_values` describing a column (type index, charset and flags).
fn merge_spec(col: &shoal_proxy::merge::Column) -> Option<[u8; 2]> {
    use mysql_common::constants::ColumnType::*;
    const TYPES: [mysql_common::constants::ColumnType; 19] = [
        MYSQL_TYPE_TINY,
        MYSQL_TYPE_SHORT,
        MYSQL_TYPE_LONG,
        MYSQL_TYPE_LONGLONG,
        MYSQL_TYPE_INT24,
        MYSQL_TYPE_YEAR,
        MYSQL_TYPE_NEWDECIMAL,
        MYSQL_TYPE_FLOAT,
        MYSQL_TYPE_DOUBLE,
        MYSQL_TYPE_DATE,
        MYSQL_TYPE_DATETIME,
        MYSQL_TYPE_TIMESTAMP,
        MYSQL_TYPE_TIME,
        MYSQL_TYPE_BIT,
        MYSQL_TYPE_VAR_STRING,
        MYSQL_TYPE_STRING,
        MYSQL_TYPE_BLOB,
        MYSQL_TYPE_NULL,
        MYSQL_TYPE_JSON,
    ];
    const CHARSETS: [u16; 6] = [63, 45, 33, 46, 8, 224];
    let t = TYPES.iter().position(|t| *t == col.column_type)? as u8;
    let want_unsigned = col.flags.contains(ColumnFlags::UNSIGNED_FLAG);
    let want_binary = col.flags.contains(ColumnFlags::BINARY_FLAG);
    (0..=255u8)
        .find(|b| {
            CHARSETS[usize::from(*b) % CHARSETS.len()] == col.charset
                && (b & 0x80 != 0) == want_unsigned
                && (b & 0x40 != 0) == want_binary
        })
        .or_else(|| {
            (0..=255u8).find(|b| (b & 0x80 != 0) == want_unsigned && (b & 0x40 != 0) == want_binary)
        })
        .map(|b| [t, b])
}

/// Cuts one conversation into corpus inputs.
fn harvest(conv: &Conversation, corpus: &mut Corpus) {
    for (chunk, mode) in [(255u8, 0xFFu8), (7, 0x03), (64, 0x02)] {
        for stream in [&conv.client, &conv.server] {
            let mut d = vec![chunk, mode];
            d.extend_from_slice(&stream[..stream.len().min(4096)]);
            corpus.add("packet_framer", d);
        }
    }
    let server = packets(&conv.server);
    let client = packets(&conv.client);
    // The greeting's capabilities and the client's decide the response format.
    let Some((_, greeting)) = server.first() else {
        return;
    };
    let Some((_, hello)) = client.first() else {
        return;
    };
    corpus.add("handshake_response", hello.clone());
    let server_caps = {
        let p = greeting;
        let nul = p[1..].iter().position(|b| *b == 0).unwrap_or(0) + 1;
        let lo = p.get(nul + 1 + 4 + 8 + 1..nul + 1 + 4 + 8 + 3);
        let hi = p.get(nul + 1 + 4 + 8 + 3 + 1 + 2..nul + 1 + 4 + 8 + 3 + 1 + 4);
        match (lo, hi) {
            (Some(l), Some(h)) => u32::from_le_bytes([l[0], l[1], h[0], h[1]]),
            _ => 0,
        }
    };
    let client_caps = u32::from_le_bytes(hello[..4].try_into().unwrap());
    let caps = CapabilityFlags::from_bits_truncate(server_caps & client_caps);

    // Responses: after the login exchange, each begins with the packet of sequence id 1.
    let mut responses: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut login_done = false;
    for (seq, p) in server.iter().skip(1) {
        if !login_done {
            if p.first() == Some(&0x00) {
                login_done = true;
            }
            continue;
        }
        if *seq == 1 || responses.is_empty() {
            responses.push(Vec::new());
        }
        responses.last_mut().unwrap().push(p.clone());
    }
    let commands: Vec<&Vec<u8>> = client
        .iter()
        .filter(|(seq, _)| *seq == 0)
        .map(|(_, p)| p)
        .collect();
    let mut responses = responses.into_iter();
    let mut params_of: HashMap<u32, u8> = HashMap::new();
    for cmd in commands {
        let Some(&code) = cmd.first() else { continue };
        let stmt = cmd
            .get(1..5)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()));
        let mut input = cmd.clone();
        if code == 0x17 {
            input.push(stmt.and_then(|s| params_of.get(&s).copied()).unwrap_or(0));
        }
        corpus.add("client_command", input);
        if code == 0x03 || code == 0x16 {
            let mut d = vec![0x08];
            d.extend_from_slice(&cmd[1..]);
            corpus.add("router", d);
        }
        let expect_sel = match code {
            0x01 | 0x18 | 0x19 => continue, // no response
            0x03 => 0,
            0x17 if cmd.get(5).is_some_and(|f| f & 1 != 0) => 2,
            0x17 => 1,
            0x16 => 3,
            0x04 => 4,
            0x1C => 5,
            _ => 6,
        };
        let Some(resp) = responses.next() else { break };
        let mut sel = expect_sel;
        if caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF) {
            sel |= 0x10;
        }
        if caps.contains(CapabilityFlags::CLIENT_SESSION_TRACK) {
            sel |= 0x20;
        }
        let mut d = vec![sel];
        let take = resp.len().min(24);
        d.extend(frame(&resp[..take]));
        corpus.add("backend_response", d);
        // Column definitions and rows for the merge's value decoders.
        let expect = match expect_sel {
            0 => Expect::Results { binary: false },
            1 | 2 => Expect::Results { binary: true },
            3 => Expect::Prepare,
            _ => continue,
        };
        let mut reader = ResponseReader::new(expect, caps);
        let mut cols = Vec::new();
        let mut rows = Vec::new();
        for p in &resp {
            match reader.next(p) {
                Ok(Event::PrepareOk {
                    statement_id,
                    params,
                    ..
                }) => {
                    params_of.insert(statement_id, params.min(255) as u8);
                }
                Ok(Event::ColumnDef(c)) if expect != Expect::Prepare => {
                    if let Ok(c) = parse_column(c) {
                        cols.push(c);
                    }
                }
                Ok(Event::Row(r)) => rows.push(r.to_vec()),
                _ => {}
            }
        }
        if !cols.is_empty() && cols.len() <= 8 && !rows.is_empty() {
            let specs: Option<Vec<[u8; 2]>> = cols.iter().map(merge_spec).collect();
            if let Some(specs) = specs {
                let binary = matches!(expect, Expect::Results { binary: true });
                let mut d = vec![(cols.len() as u8 - 1) | if binary { 0x80 } else { 0 }];
                d.extend(specs.concat());
                let take = rows.len().min(8);
                d.extend(frame(&rows[..take]));
                corpus.add("merge_values", d);
            }
        }
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run client");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn mysql_async_session(port: u16) {
    use mysql_async::prelude::Queryable;
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(shoal_bench::cluster::APP_USER))
        .pass(Some(shoal_bench::cluster::APP_PASSWORD))
        .db_name(Some("cap"))
        .prefer_socket(false);
    let mut c = mysql_async::Conn::new(opts).await.unwrap();
    c.query_drop(
        "CREATE TABLE IF NOT EXISTS t (id BIGINT PRIMARY KEY, u INT UNSIGNED, d DECIMAL(12,3), \
         f DOUBLE, s VARCHAR(20), b VARBINARY(8), dt DATETIME(6), tm TIME(3), dd DATE, \
         bt BIT(5), y YEAR, fl FLOAT)",
    )
    .await
    .unwrap();
    c.exec_drop(
        "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, b'10101', 2024, 1.5)",
        (
            1i64,
            7u32,
            "12.345",
            -0.5f64,
            "Straße",
            vec![0u8, 1, 2],
            "2024-02-29 12:34:56.789",
            "-838:59:59",
            "2024-01-01",
        ),
    )
    .await
    .unwrap();
    c.exec_drop(
        "INSERT INTO t (id, s, dt) VALUES (?, ?, ?)",
        (
            2i64,
            None::<String>,
            mysql_async::Value::Date(2023, 5, 6, 7, 8, 9, 10),
        ),
    )
    .await
    .unwrap();
    let _: Vec<mysql_async::Row> = c.query("SELECT * FROM t ORDER BY id").await.unwrap();
    let _: Vec<mysql_async::Row> = c
        .exec("SELECT * FROM t WHERE id >= ? ORDER BY id", (0,))
        .await
        .unwrap();
    let _: Vec<mysql_async::Row> = c
        .exec(
            "SELECT id, s, COUNT(*), SUM(d), AVG(f) FROM t WHERE s <> ? GROUP BY id, s",
            ("x",),
        )
        .await
        .unwrap();
    let _: Option<String> = c.query_first("SELECT @@version").await.unwrap();
    c.query_drop("SET @a := 1; SELECT @a; DO 1").await.unwrap();
    let _ = c.query_drop("SELECT * FROM no_such_table").await;
    c.ping().await.unwrap();
    c.reset().await.unwrap();
    c.disconnect().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes fuzz/corpus; run by hand"]
async fn capture_seed_corpus() {
    let cluster = Cluster::start(ClusterSpec {
        databases: vec!["cap".into()],
        ..Default::default()
    })
    .await
    .expect("cluster");
    // clients -> relay -> Shoal -> relay -> MariaDB: the client side as clients speak to
    // Shoal, the backend side with what Shoal negotiates with its backends.
    let recs: Recordings = Arc::default();
    let backend_port = recording_relay(cluster.primary(0).addr(), recs.clone()).await;
    let backend = BackendSpec {
        host: "127.0.0.1".into(),
        port: backend_port,
        user: cluster.user().to_string(),
        password: cluster.password().to_string(),
        database: Some("cap".into()),
        tls: Default::default(),
    };
    let proxy = Proxy::bind(ProxyConfig::quick("127.0.0.1:0".into(), backend))
        .await
        .expect("bind");
    let shoal_addr = proxy.local_addr().unwrap().to_string();
    let _stop = proxy.shutdown_handle();
    tokio::spawn(proxy.run());
    let port = recording_relay(shoal_addr, recs.clone()).await;
    let user = cluster.user().to_string();
    let pw = cluster.password().to_string();
    let port_s = port.to_string();

    mysql_async_session(port).await;

    let mariadb_sql = "SELECT * FROM t; SHOW TABLES; SELECT 1, 'a', NULL, 2.5, NOW(6); \
         USE cap; SELECT CONNECTION_ID(); SELECT ROW_COUNT(); \
         SELECT id, SUM(d) FROM t GROUP BY id HAVING SUM(d) > 0 ORDER BY id DESC LIMIT 5";
    let mut mariadb = Command::new("/usr/bin/mariadb");
    mariadb
        .args(["-h", "127.0.0.1", "-P", &port_s, "-u", &user])
        .arg(format!("-p{pw}"))
        .args(["--skip-ssl", "cap", "-e", mariadb_sql]);
    tokio::task::spawn_blocking(move || run(&mut mariadb))
        .await
        .unwrap();

    let sysbench = |phase: &str, extra: &[&str]| {
        let mut c = Command::new("/usr/bin/sysbench");
        c.arg("oltp_read_write")
            .arg("--mysql-host=127.0.0.1")
            .arg(format!("--mysql-port={port}"))
            .arg(format!("--mysql-user={}", cluster.user()))
            .arg(format!("--mysql-password={}", cluster.password()))
            .args([
                "--mysql-db=cap",
                "--tables=1",
                "--table-size=50",
                "--threads=1",
            ])
            .args(extra)
            .arg(phase);
        c
    };
    let mut prepare = sysbench("prepare", &[]);
    let mut run_ps = sysbench("run", &["--time=2", "--db-ps-mode=auto"]);
    let mut run_text = sysbench("run", &["--time=1", "--db-ps-mode=disable"]);
    tokio::task::spawn_blocking(move || {
        run(&mut prepare);
        run(&mut run_ps);
        run(&mut run_text);
    })
    .await
    .unwrap();

    shoal_proxy::timers::sleep(std::time::Duration::from_millis(300)).await;
    let mut corpus = Corpus::default();
    for conv in recs.lock().unwrap().iter() {
        harvest(&conv.lock().unwrap(), &mut corpus);
    }
    let root: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    // Configs are text, not traffic: the example configs and the golden topology.
    let conf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conf");
    for e in std::fs::read_dir(conf).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            corpus.add("config", std::fs::read(p).unwrap());
        }
    }
    corpus.add(
        "config",
        std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../router/tests/golden/topology.yaml"),
        )
        .unwrap(),
    );
    corpus.write(&root, 60, 2048);
}
