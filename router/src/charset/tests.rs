use super::*;

fn esc(bytes: &[u8]) -> String {
    let mut s = String::new();
    push_escaped(&mut s, bytes);
    s
}

#[test]
fn names_and_ids() {
    assert_eq!(Charset::from_name("UTF8"), Some(Charset::Utf8mb3));
    assert_eq!(Charset::from_name("GBK"), Some(Charset::Gbk));
    assert_eq!(Charset::from_name("utf16"), None);
    for cs in Charset::all() {
        assert_eq!(Charset::from_name(cs.name()), Some(cs));
    }
    assert_eq!(Charset::from_collation_id(8), Some(Charset::Latin1));
    assert_eq!(Charset::from_collation_id(28), Some(Charset::Gbk));
    assert_eq!(Charset::from_collation_id(45), Some(Charset::Utf8mb4));
    assert_eq!(Charset::from_collation_id(46), Some(Charset::Utf8mb4));
    assert_eq!(Charset::from_collation_id(33), Some(Charset::Utf8mb3));
    assert_eq!(Charset::from_collation_id(63), Some(Charset::Binary));
    assert_eq!(Charset::from_collation_id(255), Some(Charset::Utf8mb4));
    assert_eq!(Charset::from_collation_id(248), Some(Charset::Gb18030));
    assert_eq!(Charset::from_collation_id(35), None); // ucs2
    assert_eq!(Charset::from_collation_id(0), None);
}

#[test]
fn utf8_reads_as_itself() {
    let s = "SELECT '张伟 café 😀'";
    assert!(matches!(
        decode(Charset::Utf8mb4, s.as_bytes()),
        Ok(Cow::Borrowed(_))
    ));
    assert!(matches!(encode(Charset::Utf8mb4, s), Ok(Cow::Borrowed(_))));
    // utf8mb3 has no 4-byte units: each byte is one.
    let d = decode(Charset::Utf8mb3, "'😀'".as_bytes()).unwrap();
    assert_eq!(
        d,
        format!(
            "'{}'",
            esc(&[0xF0]) + &esc(&[0x9F]) + &esc(&[0x98]) + &esc(&[0x80])
        )
    );
    assert_eq!(
        encode(Charset::Utf8mb3, &d).unwrap().as_ref(),
        "'😀'".as_bytes()
    );
    // Malformed bytes are units of one byte; an encoded surrogate is one unit.
    let b = b"a\xE4\xB8'\xED\xA0\x80";
    let d = decode(Charset::Utf8mb4, b).unwrap();
    assert_eq!(
        d,
        format!(
            "a{}{}'{}",
            esc(&[0xE4]),
            esc(&[0xB8]),
            esc(&[0xED, 0xA0, 0x80])
        )
    );
    assert_eq!(encode(Charset::Utf8mb4, &d).unwrap().as_ref(), b);
    assert_eq!(to_unicode(Charset::Utf8mb4, b"a\xE4\xB8'").unwrap(), "a??'");
    assert!(to_unicode(Charset::Utf8mb4, b"\xED\xA0\x80").is_err());
}

#[test]
fn gbk_big5_latin1_round_trip() {
    // 张伟 in gbk; a trail byte 0x5C (\) stays inside its unit.
    let gbk = b"SELECT '\xD5\xC5\xCE\xB0', '\x81\x5C'";
    let d = decode(Charset::Gbk, gbk).unwrap();
    assert!(d.starts_with("SELECT '张伟', '"), "{d}");
    assert!(!d.contains('\\'));
    assert_eq!(encode(Charset::Gbk, &d).unwrap().as_ref(), gbk);
    // big5 許功蓋 (0x5C trails).
    let big5 = b"'\xB3\\\xA5\\\xBB\\'";
    let d = decode(Charset::Big5, big5).unwrap();
    assert_eq!(d, "'許功蓋'");
    assert_eq!(encode(Charset::Big5, &d).unwrap().as_ref(), big5);
    let latin1 = b"'caf\xE9 \x80 \x81'";
    let d = decode(Charset::Latin1, latin1).unwrap();
    assert_eq!(d, "'café € \u{81}'");
    assert_eq!(encode(Charset::Latin1, &d).unwrap().as_ref(), latin1);
    assert!(encode(Charset::Latin1, "张").is_err());
}

#[test]
fn unmapped_units_are_escaped_and_convert_to_question_marks() {
    // gbk A2A0 is a unit without a character; A1 before a non-trail is a unit of one byte.
    let b = b"'\xA2\xA0\xA1\xFF'";
    let d = decode(Charset::Gbk, b).unwrap();
    assert_eq!(
        d,
        format!("'{}{}{}'", esc(&[0xA2, 0xA0]), esc(&[0xA1]), esc(&[0xFF]))
    );
    assert_eq!(encode(Charset::Gbk, &d).unwrap().as_ref(), b);
    assert_eq!(
        stored_text(Charsets::names(Charset::Gbk), &d).unwrap(),
        "'???'"
    );
    // sjis 0x815F is MariaDB's backslash: escaped (not read as one), stored as '\'.
    let d = decode(Charset::Sjis, b"\x81\x5F").unwrap();
    assert_eq!(d, esc(&[0x81, 0x5F]));
    assert_eq!(
        stored_text(Charsets::names(Charset::Sjis), &d).unwrap(),
        "\\"
    );
}

#[test]
fn stored_forms() {
    let gbk = Charsets::names(Charset::Gbk);
    assert_eq!(stored_text(gbk, "张伟").unwrap(), "张伟");
    assert_eq!(
        stored_bytes(gbk, "张伟").unwrap().as_ref(),
        b"\xD5\xC5\xCE\xB0"
    );
    assert_eq!(
        stored_bytes(Charsets::UTF8MB4, "张伟").unwrap().as_ref(),
        "张伟".as_bytes()
    );
    // A utf8mb3 client's 4-byte character: four units MariaDB cannot map.
    assert_eq!(
        stored_text(Charsets::names(Charset::Utf8mb3), "a😀").unwrap(),
        "a????"
    );
    // Through a utf8mb3 connection, what utf8mb3 cannot hold is '?'; through another charset
    // MariaDB's conversion from Unicode is not read (refused, not guessed).
    let mixed = |connection| Charsets {
        client: Charset::Utf8mb4,
        connection,
    };
    assert_eq!(stored_text(mixed(Charset::Utf8mb3), "é😀").unwrap(), "é?");
    assert!(stored_text(mixed(Charset::Latin1), "café").is_err());
    assert!(stored_bytes(mixed(Charset::Sjis), "\\").is_err());
    // swe7 reads 0x40 as '@' in statements, converts it to 'É'.
    assert_eq!(decode(Charset::Swe7, b"@").unwrap(), "@");
    assert_eq!(
        stored_text(Charsets::names(Charset::Swe7), "@").unwrap(),
        "É"
    );
}

/// Every unit of every charset decodes to text that encodes back to it.
#[test]
fn every_unit_round_trips() {
    for cs in Charset::all() {
        let check = |u: &[u8]| {
            let d = decode(cs, u).unwrap_or_else(|e| panic!("{cs} {u:02X?}: {e}"));
            assert_eq!(encode(cs, &d).unwrap().as_ref(), u, "{cs} {u:02X?}");
        };
        for a in 0..=255u8 {
            check(&[a]);
            if a >= 0x80 {
                for b in 0..=255u8 {
                    check(&[a, b]);
                }
            }
        }
    }
}
