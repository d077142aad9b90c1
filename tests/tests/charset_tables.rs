//! `shoal_router::charset` against a real MariaDB: for every client character set, what
//! MariaDB's `CONVERT(... USING utf8mb4)` makes of every single byte and every two-byte sequence
//! from 0x80 (every three-byte SS3 sequence of ujis/eucjpms, every three- and four-byte UTF-8
//! sequence) must be what `charset::to_unicode` says, and `decode` must give each unit's
//! character or escape it. Then the lexer: every byte above ASCII followed by every byte
//! 0x40..=0xFE (trail bytes 0x5C `\` and 0x60 `` ` `` included: one unit or two as the charset
//! says) inside a string literal of a real statement on a connection in that charset must read
//! as the router reads it: the same literals, the same bytes. Failing units are listed.

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use shoal_router::charset::{Charset, decode, encode, to_unicode, unit_len};
use shoal_router::sql::analyze::literal_of_token;
use shoal_router::sql::lex::{TokKind, tokenize};
use shoal_router::sql::stmt::Literal;
use shoal_tests::shared_backend;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

fn unhex(h: &str) -> Vec<u8> {
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The charsets a client can use with MariaDB 10.11 (gb18030 is MySQL 8's).
fn client_charsets() -> Vec<Charset> {
    Charset::all()
        .filter(|&c| c != Charset::Binary && c != Charset::Gb18030)
        .collect()
}

fn multi_byte(cs: Charset) -> bool {
    (0x80..=0xFFu8).any(|a| (0..=0xFFu8).any(|b| unit_len(cs, &[a, b]) == 2))
}

/// The byte sequences compared for `cs`, as SQL producing rows (sequence hex, MariaDB's
/// utf8mb4 hex).
fn sequence_queries(cs: Charset) -> Vec<String> {
    let b = |t: &str| format!("LPAD(HEX({t}.seq), 2, '0')");
    let conv = |seq: &str| {
        format!("SELECT {seq}, HEX(CONVERT(CONVERT(UNHEX({seq}) USING {cs}) USING utf8mb4)) FROM ")
    };
    let mut q = vec![format!("{}mysql.seq_0_to_255 a", conv(&b("a")))];
    if multi_byte(cs) || cs.is_utf8() {
        q.push(format!(
            "{}mysql.seq_128_to_255 a, mysql.seq_0_to_255 b",
            conv(&format!("CONCAT({}, {})", b("a"), b("b")))
        ));
    }
    if matches!(cs, Charset::Ujis | Charset::Eucjpms) {
        q.push(format!(
            "{}mysql.seq_161_to_254 a, mysql.seq_161_to_254 b",
            conv(&format!("CONCAT('8F', {}, {})", b("a"), b("b")))
        ));
    }
    if cs.is_utf8() {
        q.push(format!(
            "{}mysql.seq_224_to_239 a, mysql.seq_128_to_191 b, mysql.seq_128_to_191 c",
            conv(&format!("CONCAT({}, {}, {})", b("a"), b("b"), b("c")))
        ));
        // Four-byte sequences: every one utf8mb4 has (F0 90.., F1-F3, F4 ..8F); utf8mb3 reads
        // each byte alone, sampled.
        let lead = if cs == Charset::Utf8mb4 {
            "mysql.seq_240_to_244 a, mysql.seq_128_to_191 b"
        } else {
            "mysql.seq_240_to_244 a, mysql.seq_144_to_159 b"
        };
        q.push(format!(
            "{}{lead}, mysql.seq_128_to_191 c, mysql.seq_128_to_191 d",
            conv(&format!(
                "CONCAT({}, {}, {}, {})",
                b("a"),
                b("b"),
                b("c"),
                b("d")
            ))
        ));
    }
    q
}

/// What the router says MariaDB converts `seq` to: `to_unicode`, or the bytes themselves where
/// MariaDB keeps what Rust text cannot hold (an encoded surrogate).
fn predicted(cs: Charset, seq: &[u8]) -> Vec<u8> {
    match to_unicode(cs, seq) {
        Ok(s) => s.as_bytes().to_vec(),
        Err(_) => seq.to_vec(),
    }
}

/// `decode` of a sequence starting above ASCII: each unit is MariaDB's character or escaped
/// (never another character), and it encodes back to the sequence.
fn decode_agrees(cs: Charset, seq: &[u8], theirs: &str) -> bool {
    let Ok(d) = decode(cs, seq) else {
        return false;
    };
    if encode(cs, &d).map(|b| b.into_owned()).ok().as_deref() != Some(seq) {
        return false;
    }
    let escape = |c: char| (0x10_FE00..=0x10_FFFF).contains(&u32::from(c));
    // Without escapes the text is MariaDB's (the sequence's ASCII bytes are themselves).
    d.chars().any(escape) || d == theirs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn to_unicode_and_decode_agree_with_mariadb_on_every_unit() {
    let backend = shared_backend();
    let mut conn = backend.conn(None).await;
    let mut failures: Vec<String> = Vec::new();
    let mut compared = 0usize;
    for cs in client_charsets() {
        let mut bad = 0usize;
        for q in sequence_queries(cs) {
            let rows: Vec<(String, String)> = conn.query(&q).await.expect(&q);
            for (seq_hex, their_hex) in rows {
                compared += 1;
                let seq = unhex(&seq_hex);
                let theirs = unhex(&their_hex);
                let ours = predicted(cs, &seq);
                // (Bytes MariaDB keeps that are no Rust text: decode must escape them.)
                let their_text = std::str::from_utf8(&theirs).unwrap_or("\u{10FE00}");
                let decoded_ok = seq[0] < 0x80 || decode_agrees(cs, &seq, their_text);
                if ours != theirs || !decoded_ok {
                    bad += 1;
                    if bad <= 20 {
                        failures.push(format!(
                            "{cs} {seq_hex}: MariaDB {their_hex}, router {} (decode ok: {decoded_ok})",
                            hex(&ours)
                        ));
                    }
                }
            }
        }
        if bad > 20 {
            failures.push(format!("{cs}: {bad} sequences differ in all"));
        }
    }
    println!("{compared} sequences compared");
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// What the lexer test puts in literals for `cs`, each followed by `x` (so that a byte read as a
/// backslash escapes the `x`, not the closing quote): every byte above ASCII, and for a
/// multi-byte charset every pair of such a byte and a byte 0x40..=0xFE (whether MariaDB reads
/// it as one unit or two: 0x5C `\` and 0x60 `` ` `` among them) and every ujis/eucjpms SS3
/// triple.
fn lexer_units(cs: Charset) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let multi = multi_byte(cs);
    for a in 0x80..=0xFFu8 {
        out.push(vec![a]);
        if !multi {
            continue;
        }
        for b in 0x40..=0xFEu8 {
            out.push(vec![a, b]);
        }
        if a == 0x8F && matches!(cs, Charset::Ujis | Charset::Eucjpms) {
            for b in 0xA1..=0xFEu8 {
                for c in 0xA1..=0xFEu8 {
                    out.push(vec![a, b, c]);
                }
            }
        }
    }
    for u in &mut out {
        u.push(b'x');
    }
    out
}

/// The router's reading of `SELECT HEX('u1'), HEX('u2'), ...`: each literal's bytes.
fn router_literals(cs: Charset, stmt: &[u8]) -> Option<Vec<Vec<u8>>> {
    let text = decode(cs, stmt).ok()?;
    let toks = tokenize(&text).ok()?;
    // The first literal is CONCAT_WS's separator.
    toks.iter()
        .filter(|t| t.kind == TokKind::Str)
        .skip(1)
        .map(|t| match literal_of_token(&text, t) {
            Literal::Str(s) => encode(cs, &s).ok().map(|b| b.into_owned()),
            _ => None,
        })
        .collect()
}

fn statement(units: &[Vec<u8>]) -> Vec<u8> {
    let mut s = b"SELECT CONCAT_WS(','".to_vec();
    for u in units {
        s.extend_from_slice(b", HEX('");
        s.extend_from_slice(u);
        s.extend_from_slice(b"')");
    }
    s.push(b')');
    s
}

/// MariaDB's reading: the literals' bytes, or its error.
async fn mariadb_literals(conn: &mut Conn, stmt: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let row: Option<Option<String>> = conn.query_first(stmt).await.map_err(|e| e.to_string())?;
    Ok(row
        .flatten()
        .unwrap_or_default()
        .split(',')
        .map(unhex)
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn literals_read_as_mariadb_lexes_them() {
    let backend = shared_backend();
    let mut conn = backend.conn(None).await;
    let mut failures: Vec<String> = Vec::new();
    let mut checked = 0usize;
    for cs in client_charsets().into_iter().filter(|c| !c.is_utf8()) {
        conn.query_drop(format!("SET NAMES {cs}"))
            .await
            .expect("SET NAMES");
        let units = lexer_units(cs);
        for batch in units.chunks(1000) {
            let stmt = statement(batch);
            let theirs = mariadb_literals(&mut conn, &stmt).await;
            let ours = router_literals(cs, &stmt);
            if theirs.as_ref().ok() == ours.as_ref() {
                checked += batch.len();
                continue;
            }
            // Unit by unit, to name the ones read otherwise.
            for u in batch {
                let stmt = statement(std::slice::from_ref(u));
                let theirs = mariadb_literals(&mut conn, &stmt).await;
                let ours = router_literals(cs, &stmt);
                checked += 1;
                if theirs.as_ref().ok() != ours.as_ref() {
                    failures.push(format!(
                        "{cs} {}: MariaDB {:?}, router {:?}",
                        hex(u),
                        theirs.map(|v| v.iter().map(|b| hex(b)).collect::<Vec<_>>()),
                        ours.map(|v| v.iter().map(|b| hex(b)).collect::<Vec<_>>())
                    ));
                }
            }
        }
    }
    println!("{checked} units read in literals");
    assert!(
        failures.is_empty(),
        "{} units read otherwise:\n{}",
        failures.len(),
        failures
            .iter()
            .take(60)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
