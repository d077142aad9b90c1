//! String shard keys written by clients in other character sets: the router reads the statement
//! as `charset::decode` gave it and places a key value where MariaDB stores it.

use std::sync::Arc;

use shoal_router::charset::{Charset, Charsets, decode};
use shoal_router::config::Config;
use shoal_router::plan::{RoutePlan, Router};
use shoal_router::sql::SqlMode;
use shoal_router::topology::Topology;

const TOPOLOGY: &str = r#"
users:
  - { name: app, password: app, schemas: [shop] }
datahosts:
  - name: dh1
    primary: { address: 127.0.0.1:3307, user: shoal, password: shoal }
datanodes:
  - { name: dn1..dn8, datahost: dh1, database: shop_db1..shop_db8 }
rules:
  - { name: by_name, algorithm: hash, key_type: string }
  - { name: by_bytes, algorithm: hash, key_type: string, collation: binary }
  - name: by_city
    algorithm: list
    key_type: string
    values:
      - { shard: 0, values: [paris] }
      - { shard: 1, values: ['?'] }
      - { shard: 2, values: ['\'] }
      - { shard: 3, values: ['café'] }
    default: 4
schemas:
  - name: shop
    tables:
      - { name: customers, type: sharded, shard_key: name, rule: by_name, datanodes: dn1..dn8 }
      - { name: blobs, type: sharded, shard_key: b, rule: by_bytes, datanodes: dn1..dn8 }
      - { name: cities, type: sharded, shard_key: city, rule: by_city, datanodes: dn1..dn5 }
"#;

fn router() -> Router {
    let cfg = Config::from_yaml_str(TOPOLOGY).expect("config");
    Router::new(Arc::new(Topology::build(&cfg).expect("topology")))
}

/// The datanode an INSERT of `bytes` (a statement in `cs`) goes to.
fn datanode(r: &Router, cs: Charset, bytes: &[u8]) -> usize {
    let text = decode(cs, bytes).expect("decode");
    match r.route_in(
        Some("shop"),
        SqlMode::default(),
        Charsets::names(cs),
        &text,
        &[],
    ) {
        RoutePlan::Single(t) => t.datanode,
        other => panic!("{cs} {text:?}: {other:?}"),
    }
}

fn insert(table: &str, col: &str, value: &[u8]) -> Vec<u8> {
    let mut s = format!("INSERT INTO {table} ({col}) VALUES ('").into_bytes();
    s.extend_from_slice(value);
    s.extend_from_slice(b"')");
    s
}

#[test]
fn a_gbk_and_a_utf8_key_land_together() {
    let r = router();
    let utf8 = datanode(
        &r,
        Charset::Utf8mb4,
        &insert("customers", "name", "张伟".as_bytes()),
    );
    let gbk = datanode(
        &r,
        Charset::Gbk,
        &insert("customers", "name", b"\xD5\xC5\xCE\xB0"),
    );
    assert_eq!(gbk, utf8);
    // 張偉 (traditional) in big5.
    let big5 = datanode(
        &r,
        Charset::Big5,
        &insert("customers", "name", b"\xB1\x69\xB0\xB6"),
    );
    let utf8 = datanode(
        &r,
        Charset::Utf8mb4,
        &insert("customers", "name", "張偉".as_bytes()),
    );
    assert_eq!(big5, utf8);
    // latin1 'CAFÉ' and utf8 'café' are one general_ci key.
    let latin1 = datanode(
        &r,
        Charset::Latin1,
        &insert("customers", "name", b"CAF\xC9"),
    );
    let utf8 = datanode(
        &r,
        Charset::Utf8mb4,
        &insert("customers", "name", "café".as_bytes()),
    );
    assert_eq!(latin1, utf8);
    let cities = |cs, v: &[u8]| datanode(&r, cs, &insert("cities", "city", v));
    assert_eq!(cities(Charset::Latin1, b"caf\xE9"), 3);
    assert_eq!(cities(Charset::Cp1250, b"caf\xE9"), 3);
}

#[test]
fn units_mariadb_cannot_map_are_question_marks() {
    let r = router();
    let cities = |cs, v: &[u8]| datanode(&r, cs, &insert("cities", "city", v));
    // gbk A2A0 has no character: stored as '?'.
    assert_eq!(cities(Charset::Gbk, b"\xA2\xA0"), 1);
    // A unit of a multi-byte charset whose trail byte is 0x5C is no backslash...
    assert_eq!(cities(Charset::Gbk, b"\xA1\x5C"), 1);
    // ...but sjis 0x815F is MariaDB's backslash.
    assert_eq!(cities(Charset::Sjis, b"\x81\x5F"), 2);
    // A utf8mb3 client's 4-byte character is four units utf8mb3 cannot map.
    assert_eq!(cities(Charset::Utf8mb3, "😀".as_bytes()), 4);
    assert_eq!(cities(Charset::Utf8mb4, "😀".as_bytes()), 4);
}

#[test]
fn binary_keys_are_the_connection_bytes() {
    let r = router();
    // The same four bytes, from a gbk and a latin1 client: one stored value.
    let gbk = datanode(&r, Charset::Gbk, &insert("blobs", "b", b"\xD5\xC5\xCE\xB0"));
    let latin1 = datanode(
        &r,
        Charset::Latin1,
        &insert("blobs", "b", b"\xD5\xC5\xCE\xB0"),
    );
    assert_eq!(gbk, latin1);
    // Plain ASCII: as before, whatever the charset.
    let a = datanode(&r, Charset::Utf8mb4, &insert("blobs", "b", b"abc"));
    assert_eq!(datanode(&r, Charset::Gbk, &insert("blobs", "b", b"abc")), a);
    // A warm plan cache does not carry one charset's reading to another: the utf8mb4 text
    // 'ÕÅÎ°' is other bytes than latin1's.
    let fresh = router();
    let text = "INSERT INTO blobs (b) VALUES ('ÕÅÎ°')";
    for cs in [Charset::Utf8mb4, Charset::Latin1, Charset::Utf8mb4] {
        let plan = |r: &Router| {
            format!(
                "{:?}",
                r.route_in(
                    Some("shop"),
                    SqlMode::default(),
                    Charsets::names(cs),
                    text,
                    &[]
                )
            )
        };
        assert_eq!(plan(&r), plan(&fresh), "{cs}");
        assert_eq!(plan(&r), plan(&router()), "{cs}");
    }
}

/// `_cs'...'`, `N'...'` and `CONVERT(... USING cs)` on a key: the literal's bytes re-read in
/// the named charset, or refused (scattered) where Shoal does not read the conversion.
#[test]
fn introducers_and_convert() {
    let r = router();
    let plan = |cs: Charset, sql: &[u8]| {
        let text = decode(cs, sql).expect("decode");
        r.route_in(
            Some("shop"),
            SqlMode::default(),
            Charsets::names(cs),
            &text,
            &[],
        )
    };
    let dn = |cs: Charset, sql: &[u8]| match plan(cs, sql) {
        RoutePlan::Single(t) => t.datanode,
        other => panic!("{other:?}"),
    };
    let city = |lit: &str| format!("INSERT INTO cities (city) VALUES ({lit})").into_bytes();
    // A utf8mb4 client's 'café' bytes read as latin1 are 'cafÃ©': not 'café'.
    assert_eq!(
        dn(
            Charset::Latin1,
            b"INSERT INTO cities (city) VALUES (_latin1'caf\xE9')"
        ),
        3
    );
    assert_eq!(dn(Charset::Utf8mb4, &city("_latin1'café'")), 4);
    assert_eq!(dn(Charset::Utf8mb4, &city("_utf8mb4'café'")), 3);
    assert_eq!(dn(Charset::Utf8mb4, &city("N'CAFÉ'")), 3);
    assert_eq!(
        dn(Charset::Utf8mb4, &city("CONVERT('café' USING utf8mb3)")),
        3
    );
    assert_eq!(
        dn(
            Charset::Gbk,
            b"INSERT INTO cities (city) VALUES (_gbk'\xA2\xA0')"
        ),
        1
    );
    // sjis bytes 0x815F inside a latin1 client's literal, introduced as sjis: a backslash.
    assert_eq!(
        dn(
            Charset::Latin1,
            b"INSERT INTO cities (city) VALUES (_sjis'\x81\x5F')"
        ),
        2
    );
    // A binary column stores an introduced literal's bytes.
    let blob = |cs, lit: &[u8]| {
        let mut s = b"INSERT INTO blobs (b) VALUES (".to_vec();
        s.extend_from_slice(lit);
        s.push(b')');
        dn(cs, &s)
    };
    assert_eq!(
        blob(Charset::Utf8mb4, b"_latin1'\xC3\x95\xC3\x85'"),
        blob(Charset::Latin1, b"'\xC3\x95\xC3\x85'")
    );
    // Conversions from Unicode to another charset are MariaDB's own: refused, never guessed.
    for sql in [
        "INSERT INTO cities (city) VALUES (CONVERT('café' USING latin1))",
        "INSERT INTO blobs (b) VALUES (CONVERT('x' USING sjis))",
    ] {
        assert!(
            matches!(plan(Charset::Utf8mb4, sql.as_bytes()), RoutePlan::Refuse(_)),
            "{sql}"
        );
    }
    assert!(matches!(
        plan(
            Charset::Utf8mb4,
            b"SELECT * FROM cities WHERE city = CONVERT('x' USING sjis)"
        ),
        RoutePlan::Scatter { .. }
    ));
}
