//! Every column type round-trips through Shoal, in the text protocol (COM_QUERY) and the binary
//! protocol (COM_STMT_EXECUTE), compared with what the same query returns straight from the
//! backend and with the values that were inserted.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};
use shoal_tests::{ShoalProcess, shared_backend, unique_name};

/// One value of a column type: the SQL literal inserted directly on the backend, what the text
/// protocol must return for it, and what the binary protocol must return.
struct Sample {
    literal: &'static str,
    text: Vec<u8>,
    bin: Value,
}

fn s(literal: &'static str, text: &'static str, bin: Value) -> Sample {
    raw(literal, text.as_bytes(), bin)
}

/// A sample whose text form is not valid UTF-8.
fn raw(literal: &'static str, text: &[u8], bin: Value) -> Sample {
    Sample {
        literal,
        text: text.to_vec(),
        bin,
    }
}

fn bytes(b: &[u8]) -> Value {
    Value::Bytes(b.to_vec())
}

fn date(y: u16, m: u8, d: u8) -> Value {
    Value::Date(y, m, d, 0, 0, 0, 0)
}

/// Column types with values at their limits. Every table also gets a NULL row.
fn cases() -> Vec<(&'static str, Vec<Sample>)> {
    use Value::{Double, Float, Int, Time, UInt};
    vec![
        (
            "TINYINT",
            vec![
                s("-128", "-128", Int(-128)),
                s("127", "127", Int(127)),
                s("0", "0", Int(0)),
            ],
        ),
        (
            "TINYINT UNSIGNED",
            vec![s("0", "0", Int(0)), s("255", "255", Int(255))],
        ),
        (
            "SMALLINT",
            vec![
                s("-32768", "-32768", Int(-32768)),
                s("32767", "32767", Int(32767)),
            ],
        ),
        ("SMALLINT UNSIGNED", vec![s("65535", "65535", Int(65535))]),
        (
            "MEDIUMINT",
            vec![
                s("-8388608", "-8388608", Int(-8388608)),
                s("8388607", "8388607", Int(8388607)),
            ],
        ),
        (
            "MEDIUMINT UNSIGNED",
            vec![s("16777215", "16777215", Int(16777215))],
        ),
        (
            "INT",
            vec![
                s("-2147483648", "-2147483648", Int(-2147483648)),
                s("2147483647", "2147483647", Int(2147483647)),
            ],
        ),
        (
            "INT UNSIGNED",
            vec![s("4294967295", "4294967295", Int(4294967295))],
        ),
        (
            "BIGINT",
            vec![
                s(
                    "-9223372036854775808",
                    "-9223372036854775808",
                    Int(i64::MIN),
                ),
                s("9223372036854775807", "9223372036854775807", Int(i64::MAX)),
            ],
        ),
        (
            "BIGINT UNSIGNED",
            vec![
                s(
                    "18446744073709551615",
                    "18446744073709551615",
                    UInt(u64::MAX),
                ),
                s("0", "0", Int(0)),
            ],
        ),
        (
            "DECIMAL(65,30)",
            vec![
                s(
                    "'99999999999999999999999999999999999.999999999999999999999999999999'",
                    "99999999999999999999999999999999999.999999999999999999999999999999",
                    bytes(b"99999999999999999999999999999999999.999999999999999999999999999999"),
                ),
                s(
                    "'-12345678901234567890123456789012345.123456789012345678901234567890'",
                    "-12345678901234567890123456789012345.123456789012345678901234567890",
                    bytes(b"-12345678901234567890123456789012345.123456789012345678901234567890"),
                ),
                s(
                    "'0.000000000000000000000000000001'",
                    "0.000000000000000000000000000001",
                    bytes(b"0.000000000000000000000000000001"),
                ),
            ],
        ),
        (
            "FLOAT",
            vec![
                s("1.5", "1.5", Float(1.5)),
                s("-1234.5", "-1234.5", Float(-1234.5)),
                s("0", "0", Float(0.0)),
            ],
        ),
        (
            "DOUBLE",
            vec![
                s(
                    "1.7976931348623157e308",
                    "1.7976931348623157e308",
                    Double(f64::MAX),
                ),
                s(
                    "-2.2250738585072014e-308",
                    "-2.2250738585072014e-308",
                    Double(-f64::MIN_POSITIVE),
                ),
                s("0.1", "0.1", Double(0.1)),
            ],
        ),
        (
            "DATE",
            vec![
                s("'1000-01-01'", "1000-01-01", date(1000, 1, 1)),
                s("'9999-12-31'", "9999-12-31", date(9999, 12, 31)),
                s("'0000-00-00'", "0000-00-00", date(0, 0, 0)),
            ],
        ),
        (
            "DATETIME(6)",
            vec![
                s(
                    "'1000-01-01 00:00:00'",
                    "1000-01-01 00:00:00.000000",
                    date(1000, 1, 1),
                ),
                s(
                    "'9999-12-31 23:59:59.999999'",
                    "9999-12-31 23:59:59.999999",
                    Value::Date(9999, 12, 31, 23, 59, 59, 999_999),
                ),
                s(
                    "'2024-02-29 12:34:56.789012'",
                    "2024-02-29 12:34:56.789012",
                    Value::Date(2024, 2, 29, 12, 34, 56, 789_012),
                ),
                s(
                    "'0000-00-00 00:00:00'",
                    "0000-00-00 00:00:00.000000",
                    date(0, 0, 0),
                ),
            ],
        ),
        (
            "TIMESTAMP",
            vec![
                s(
                    "'1970-01-01 00:00:01'",
                    "1970-01-01 00:00:01",
                    Value::Date(1970, 1, 1, 0, 0, 1, 0),
                ),
                s(
                    "'2038-01-19 03:14:07'",
                    "2038-01-19 03:14:07",
                    Value::Date(2038, 1, 19, 3, 14, 7, 0),
                ),
                s(
                    "'0000-00-00 00:00:00'",
                    "0000-00-00 00:00:00",
                    date(0, 0, 0),
                ),
            ],
        ),
        (
            "TIME(6)",
            vec![
                s(
                    "'-838:59:59'",
                    "-838:59:59.000000",
                    Time(true, 34, 22, 59, 59, 0),
                ),
                s(
                    "'838:59:59'",
                    "838:59:59.000000",
                    Time(false, 34, 22, 59, 59, 0),
                ),
                s(
                    "'-00:00:01.5'",
                    "-00:00:01.500000",
                    Time(true, 0, 0, 0, 1, 500_000),
                ),
                s(
                    "'25:00:00.000001'",
                    "25:00:00.000001",
                    Time(false, 1, 1, 0, 0, 1),
                ),
                s("'00:00:00'", "00:00:00.000000", Time(false, 0, 0, 0, 0, 0)),
            ],
        ),
        (
            "YEAR",
            vec![
                s("1901", "1901", Int(1901)),
                s("2155", "2155", Int(2155)),
                s("0", "0000", Int(0)),
            ],
        ),
        (
            "CHAR(10) CHARACTER SET utf8mb4",
            vec![
                s("'abc'", "abc", bytes(b"abc")),
                s("''", "", bytes(b"")),
                s("'é€😀🐬'", "é€😀🐬", bytes("é€😀🐬".as_bytes())),
            ],
        ),
        (
            "VARCHAR(255) CHARACTER SET utf8mb4",
            vec![
                s("'😀🐬 shoal'", "😀🐬 shoal", bytes("😀🐬 shoal".as_bytes())),
                s(
                    r"'it''s a \\ back\\slash'",
                    r"it's a \ back\slash",
                    bytes(br"it's a \ back\slash"),
                ),
                s("'tab\\tnl\\n'", "tab\tnl\n", bytes(b"tab\tnl\n")),
            ],
        ),
        (
            "BLOB",
            vec![raw(
                "x'00FF0A270D5C'",
                &[0x00, 0xff, 0x0a, 0x27, 0x0d, 0x5c],
                bytes(&[0x00, 0xff, 0x0a, 0x27, 0x0d, 0x5c]),
            )],
        ),
        (
            "JSON",
            vec![s(
                r#"'{"a": [1, 2.5, "x😀"], "b": null, "c": {"d": true}}'"#,
                r#"{"a": [1, 2.5, "x😀"], "b": null, "c": {"d": true}}"#,
                bytes(r#"{"a": [1, 2.5, "x😀"], "b": null, "c": {"d": true}}"#.as_bytes()),
            )],
        ),
        (
            "BIT(1)",
            vec![
                s("b'1'", "\u{1}", bytes(&[1])),
                s("b'0'", "\0", bytes(&[0])),
            ],
        ),
        (
            "BIT(64)",
            vec![raw(
                "b'1111111111111111111111111111111111111111111111111111111111111111'",
                &[0xff; 8],
                bytes(&[0xff; 8]),
            )],
        ),
        (
            "ENUM('a','b','c😀')",
            vec![
                s("'c😀'", "c😀", bytes("c😀".as_bytes())),
                s("'a'", "a", bytes(b"a")),
            ],
        ),
        (
            "SET('x','y','z')",
            vec![s("'x,z'", "x,z", bytes(b"x,z")), s("''", "", bytes(b""))],
        ),
    ]
}

const SESSION_SETUP: &str = "SET time_zone = '+00:00', sql_mode = ''";

async fn rows_text(conn: &mut Conn, table: &str) -> Vec<(i64, Value)> {
    let rows: Vec<Row> = conn
        .query(format!("SELECT id, v FROM {table} ORDER BY id"))
        .await
        .unwrap_or_else(|e| panic!("text SELECT from {table}: {e}"));
    rows.into_iter().map(split_row).collect()
}

async fn rows_bin(conn: &mut Conn, table: &str) -> Vec<(i64, Value)> {
    let rows: Vec<Row> = conn
        .exec(
            format!("SELECT id, v FROM {table} WHERE id > ? ORDER BY id"),
            (-1,),
        )
        .await
        .unwrap_or_else(|e| panic!("binary SELECT from {table}: {e}"));
    rows.into_iter().map(split_row).collect()
}

fn split_row(row: Row) -> (i64, Value) {
    let mut values = row.unwrap();
    let v = values.pop().expect("v column");
    let id = match values.pop().expect("id column") {
        Value::Int(i) => i,
        Value::Bytes(b) => String::from_utf8(b).unwrap().parse().unwrap(),
        other => panic!("unexpected id {other:?}"),
    };
    (id, v)
}

#[tokio::test]
async fn every_column_type_round_trips_in_text_and_binary_protocol() {
    let backend = shared_backend();
    let db = unique_name("types");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut direct = backend.conn(Some(&db)).await;
    let mut proxied = shoal.conn(&backend, Some(&db)).await;
    direct.query_drop(SESSION_SETUP).await.unwrap();
    proxied.query_drop(SESSION_SETUP).await.unwrap();

    let mut failures = Vec::new();
    for (n, (ty, samples)) in cases().into_iter().enumerate() {
        let table = format!("t{n}");
        direct
            .query_drop(format!(
                "CREATE TABLE {table} (id INT PRIMARY KEY, v {ty} NULL)"
            ))
            .await
            .unwrap_or_else(|e| panic!("create {ty}: {e}"));
        for (i, sample) in samples.iter().enumerate() {
            direct
                .query_drop(format!(
                    "INSERT INTO {table} VALUES ({i}, {})",
                    sample.literal
                ))
                .await
                .unwrap_or_else(|e| panic!("insert {ty} {}: {e}", sample.literal));
        }
        direct
            .query_drop(format!("INSERT INTO {table} VALUES (999, NULL)"))
            .await
            .unwrap();
        // The same values again, as parameters of a prepared INSERT sent through Shoal.
        for (i, sample) in samples.iter().enumerate() {
            let id = 1000 + i as i64;
            if let Err(e) = proxied
                .exec_drop(
                    format!("INSERT INTO {table} (id, v) VALUES (?, ?)"),
                    vec![Value::Int(id), sample.bin.clone()],
                )
                .await
            {
                failures.push(format!(
                    "{ty}: prepared INSERT of {:?} through shoal: {e}",
                    sample.bin
                ));
            }
        }
        proxied
            .exec_drop(
                format!("INSERT INTO {table} (id, v) VALUES (?, ?)"),
                (1999, Value::NULL),
            )
            .await
            .unwrap_or_else(|e| failures.push(format!("{ty}: prepared INSERT of NULL: {e}")));

        let mut expected_text: Vec<(i64, Value)> = Vec::new();
        let mut expected_bin: Vec<(i64, Value)> = Vec::new();
        for base in [0, 1000] {
            for (i, sample) in samples.iter().enumerate() {
                let text = Value::Bytes(sample.text.clone());
                expected_text.push((base + i as i64, text));
                expected_bin.push((base + i as i64, sample.bin.clone()));
            }
            expected_text.push((base + 999, Value::NULL));
            expected_bin.push((base + 999, Value::NULL));
        }

        let direct_text = rows_text(&mut direct, &table).await;
        let direct_bin = rows_bin(&mut direct, &table).await;
        let shoal_text = rows_text(&mut proxied, &table).await;
        let shoal_bin = rows_bin(&mut proxied, &table).await;
        for (what, got, want) in [
            ("text via shoal vs direct", &shoal_text, &direct_text),
            ("binary via shoal vs direct", &shoal_bin, &direct_bin),
            ("text via shoal vs inserted", &shoal_text, &expected_text),
            ("binary via shoal vs inserted", &shoal_bin, &expected_bin),
        ] {
            if got != want {
                failures.push(format!("{ty}: {what}:\n   got {got:?}\n  want {want:?}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}\nshoal log:\n{}",
        failures.len(),
        failures.join("\n"),
        shoal.log()
    );
}

/// Deterministic pseudo-random bytes, so that a corrupted or shifted chunk cannot go unnoticed.
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        out.extend_from_slice(&seed.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn hex(data: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut s = String::with_capacity(data.len() * 2);
    for b in data {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// A 20 MiB BLOB crosses the 16 MiB packet split both ways: as a prepared-statement parameter
/// and inside a 40 MiB COM_QUERY (client to server), and as a result row (server to client).
#[tokio::test]
async fn blob_of_20_mib_crosses_the_packet_split_both_ways() {
    const LEN: usize = 20 << 20;
    let backend = shared_backend();
    let db = unique_name("blob");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop("CREATE TABLE b (id INT PRIMARY KEY, v LONGBLOB)")
        .await
        .unwrap();
    let mut proxied = shoal.conn(&backend, Some(&db)).await;

    let by_param = noise(LEN, 0x9e37_79b9_7f4a_7c15);
    proxied
        .exec_drop("INSERT INTO b VALUES (1, ?)", (by_param.clone(),))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "prepared insert of 20 MiB: {e}\nshoal log:\n{}",
                shoal.log()
            )
        });

    // A 40 MiB COM_QUERY: three client packets, the first two of 16 MiB - 1.
    let by_text = noise(LEN, 0x2545_f491_4f6c_dd1d);
    proxied
        .query_drop(format!("INSERT INTO b VALUES (2, x'{}')", hex(&by_text)))
        .await
        .unwrap_or_else(|e| panic!("text insert of 20 MiB: {e}\nshoal log:\n{}", shoal.log()));

    for (id, want) in [(1, &by_param), (2, &by_text)] {
        let (len, md5): (u64, String) = direct
            .query_first(format!("SELECT LENGTH(v), MD5(v) FROM b WHERE id = {id}"))
            .await
            .unwrap()
            .expect("row stored on the backend");
        assert_eq!(len as usize, LEN, "row {id} stored with the wrong length");
        let (want_md5,): (String,) = direct
            .exec_first("SELECT MD5(?)", (want.clone(),))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(md5, want_md5, "row {id} stored with different bytes");

        let text: Option<Vec<u8>> = proxied
            .query_first(format!("SELECT v FROM b WHERE id = {id}"))
            .await
            .unwrap_or_else(|e| panic!("text read of 20 MiB: {e}\nshoal log:\n{}", shoal.log()));
        let text = text.expect("row through shoal");
        assert!(
            text == *want,
            "row {id}: text protocol returned other bytes ({} bytes)",
            text.len()
        );
        let bin: Option<Vec<u8>> = proxied
            .exec_first("SELECT v FROM b WHERE id = ?", (id,))
            .await
            .unwrap_or_else(|e| panic!("binary read of 20 MiB: {e}\nshoal log:\n{}", shoal.log()));
        let bin = bin.expect("row through shoal");
        assert!(
            bin == *want,
            "row {id}: binary protocol returned other bytes ({} bytes)",
            bin.len()
        );
    }
    // The session still works after the big packets.
    let one: Option<i64> = proxied.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

/// A result with many rows and columns of mixed types streams through intact.
#[tokio::test]
async fn many_rows_of_mixed_types_match_the_backend() {
    let backend = shared_backend();
    let db = unique_name("many");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let mut direct = backend.conn(Some(&db)).await;
    direct
        .query_drop(
            "CREATE TABLE m (id INT PRIMARY KEY, a BIGINT, b VARCHAR(64), c DOUBLE, d DATETIME(6), \
             e DECIMAL(20,5), f TEXT)",
        )
        .await
        .unwrap();
    direct
        .query_drop(
            "INSERT INTO m SELECT seq, CAST(seq AS SIGNED) * 1000003 - 5000000000, CONCAT('row ', seq, ' 😀'), \
             seq / 7, '2020-01-01' + INTERVAL seq SECOND, seq * 1.25, IF(seq % 10 = 0, NULL, REPEAT('x', seq % 300)) \
             FROM seq_1_to_20000",
        )
        .await
        .unwrap();
    let mut proxied = shoal.conn(&backend, Some(&db)).await;
    let q = "SELECT * FROM m ORDER BY id";
    let want: Vec<Row> = direct.query(q).await.unwrap();
    let got: Vec<Row> = proxied.query(q).await.unwrap();
    assert_eq!(got.len(), 20000);
    let want: Vec<Vec<Value>> = want.into_iter().map(Row::unwrap).collect();
    let got: Vec<Vec<Value>> = got.into_iter().map(Row::unwrap).collect();
    assert!(got == want, "text rows differ from the backend's");
    let want: Vec<Row> = direct
        .exec("SELECT * FROM m WHERE id > ? ORDER BY id", (0,))
        .await
        .unwrap();
    let got: Vec<Row> = proxied
        .exec("SELECT * FROM m WHERE id > ? ORDER BY id", (0,))
        .await
        .unwrap();
    let want: Vec<Vec<Value>> = want.into_iter().map(Row::unwrap).collect();
    let got: Vec<Vec<Value>> = got.into_iter().map(Row::unwrap).collect();
    assert!(got == want, "binary rows differ from the backend's");
}
