//! Stable-toolchain twins of the fuzz targets in `fuzz/` (which need nightly): the same entry
//! points of `shoal_proxy::fuzzing`, fed by proptest with arbitrary bytes and with
//! well-formed messages bent out of shape, so CI catches a decoder that panics again without
//! running libFuzzer. Each property runs a few thousand cases in seconds.

use bytes::BytesMut;
use proptest::prelude::*;
use shoal_proxy::fuzzing;
use shoal_proxy::wire::packet::write_frames;

const CASES: u32 = 2000;

/// Frames `payloads` as a peer would send them, from sequence id 0.
fn framed(payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut out = BytesMut::new();
    let mut seq = 0;
    for p in payloads {
        write_frames(&mut out, &mut seq, p);
    }
    out.to_vec()
}

/// Well-formed bytes with some of them overwritten, cut short, or with junk appended.
fn bent(base: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = base.len().max(1);
    (
        prop::collection::vec((0..len, any::<u8>()), 0..4),
        0..=base.len(),
        prop::collection::vec(any::<u8>(), 0..8),
        any::<bool>(),
    )
        .prop_map(move |(edits, cut, tail, truncate)| {
            let mut b = base.clone();
            for (i, v) in edits {
                if let Some(x) = b.get_mut(i) {
                    *x = v;
                }
            }
            if truncate {
                b.truncate(cut);
            }
            b.extend(tail);
            b
        })
}

/// A COM_CHANGE_USER, COM_STMT_EXECUTE, COM_QUERY or COM_SET_OPTION payload as clients send them.
fn command_payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"\x11bob\0\x14abcdefghijklmnopqrstshop\0\x21\0mysql_native_password\0".to_vec()),
        // EXECUTE of statement 1, no cursor, 3 params (NULL bitmap, types, values).
        Just(
            b"\x17\x01\0\0\0\0\x01\0\0\0\x02\x01\x08\0\xfd\0\x0c\0\x07\0\0\0\0\0\0\0\x03abc\x0b\xe8\x07\x01\x02\x03\x04\x05\x06\x07\x08\x09\x03"
                .to_vec()
        ),
        Just(b"\x03KILL QUERY 12;".to_vec()),
        Just(b"\x03USE `shop`".to_vec()),
        Just(b"\x03SELECT ROW_COUNT()".to_vec()),
        Just(b"\x03SET @a := GET_LOCK('x', 1)".to_vec()),
        Just(b"\x1b\x00\x00".to_vec()),
    ]
    .prop_flat_map(bent)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn framer_on_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..300)) {
        fuzzing::packet_framer(&data);
    }

    #[test]
    fn framer_on_framed_packets(
        ctl in any::<[u8; 2]>(),
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..100), 0..5),
        tail in prop::collection::vec(any::<u8>(), 0..6),
    ) {
        let mut data = ctl.to_vec();
        data.extend(framed(&payloads));
        data.extend(tail);
        fuzzing::packet_framer(&data);
    }

    #[test]
    fn handshake_response_on_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..200)) {
        fuzzing::handshake_response(&data);
    }

    #[test]
    fn handshake_response_bent(data in bent(
        b"\x8d\xa6\xff\x19\0\0\0\x01\x21\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\
          app\0\x14abcdefghijklmnopqrstshop\0mysql_native_password\0\x0c\x03_os\x05Linux"
            .to_vec(),
    )) {
        fuzzing::handshake_response(&data);
    }

    #[test]
    fn client_commands_on_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..200)) {
        fuzzing::client_command(&data);
    }

    #[test]
    fn client_commands_bent(data in command_payload()) {
        fuzzing::client_command(&data);
    }

    #[test]
    fn backend_responses_on_arbitrary_packets(
        sel in any::<u8>(),
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..8),
    ) {
        let mut data = vec![sel];
        data.extend(framed(&payloads));
        fuzzing::backend_response(&data);
    }

    #[test]
    fn backend_responses_bent(sel in any::<u8>(), data in bent(framed(&[
        b"\x01".to_vec(),
        b"\x03def\x04shop\x01t\x01t\x02id\x02id\x0c\x3f\0\x0b\0\0\0\x03\x03\x42\0\0\0".to_vec(),
        b"\xfe\0\0\x02\0".to_vec(),
        b"\x011".to_vec(),
        b"\xfe\0\0\x22\x40\0\0\x1b\0\x19\x0f\x0aautocommit\x02ON".to_vec(),
    ]))) {
        let mut d = vec![sel];
        d.extend(data);
        fuzzing::backend_response(&d);
    }

    #[test]
    fn merge_values_on_arbitrary_rows(
        sel in any::<u8>(),
        spec in prop::collection::vec(any::<u8>(), 16),
        rows in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..6),
    ) {
        let mut data = vec![sel];
        data.extend(&spec[..2 * (usize::from(sel & 7) + 1)]);
        data.extend(framed(&rows));
        fuzzing::merge_values(&data);
    }
}

// Dozens of typed cells per case: fewer cases.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn merge_values_on_text_cells(
        sel in any::<u8>(),
        spec in prop::collection::vec(any::<u8>(), 16),
        cells in prop::collection::vec(prop::collection::vec(cell(), 8), 0..5),
    ) {
        let ncols = usize::from(sel & 7) + 1;
        let mut data = vec![sel & 0x7f];
        data.extend(&spec[..2 * ncols]);
        let rows: Vec<Vec<u8>> = cells
            .iter()
            .map(|row| {
                let mut r = Vec::new();
                for c in &row[..ncols] {
                    r.push(c.len() as u8);
                    r.extend(c.as_bytes());
                }
                r
            })
            .collect();
        data.extend(framed(&rows));
        fuzzing::merge_values(&data);
    }

}

/// A text cell as shards send them: numbers, decimals, dates and times, strings; in and out
/// of range.
fn cell() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|v| v.to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        (any::<i32>(), 0..1000u32).prop_map(|(a, b)| format!("{a}.{b:03}")),
        (any::<u16>(), any::<u8>(), any::<u8>(), any::<u32>()).prop_map(|(y, m, d, t)| format!(
            "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:06}",
            t % 30,
            t % 61,
            t % 67,
            t % 1_000_000
        )),
        (any::<i32>(), any::<u8>(), any::<u8>()).prop_map(|(h, m, s)| format!("{h}:{m:02}:{s:02}")),
        prop::sample::select(vec![
            "",
            " ",
            "abc ",
            "ÄÖÜ",
            "nan",
            "inf",
            "-0",
            "1e308",
            "+.5",
            "99999999999999999999999999999999999999999",
            "9999999999999999999999999999999999999999999.5",
            "0000-00-00",
            "-838:59:59.999999",
        ])
        .prop_map(String::from),
    ]
}

// Each config costs milliseconds to parse and build in a debug build: fewer cases.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn config_loader_on_arbitrary_text(text in "[a-z_:\\- \n0-9\\[\\]{},.'\"#*]{0,200}") {
        fuzzing::config_yaml(text.as_bytes());
    }
}

/// The lines of each example config in `conf/`.
fn example_configs() -> &'static [Vec<String>] {
    static CONFIGS: std::sync::OnceLock<Vec<Vec<String>>> = std::sync::OnceLock::new();
    CONFIGS.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../conf");
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).expect("conf dir") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "yaml") {
                let text = std::fs::read_to_string(p).expect("read config");
                out.push(text.lines().map(String::from).collect());
            }
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// An example config with one line dropped, duplicated, or a value replaced or extended.
    #[test]
    fn config_loader_on_bent_examples(
        which in any::<prop::sample::Index>(),
        op in 0..4u8,
        at in any::<prop::sample::Index>(),
        value in "[a-z0-9_.,\\-\\[\\] ]{0,12}",
    ) {
        let configs = example_configs();
        let mut lines = configs[which.index(configs.len())].clone();
        let i = at.index(lines.len());
        match op {
            0 => { lines.remove(i); }
            1 => { let l = lines[i].clone(); lines.insert(i, l); }
            2 => {
                if let Some((k, _)) = lines[i].split_once(':') {
                    lines[i] = format!("{k}: {value}");
                }
            }
            _ => lines[i] = format!("{}{value}", lines[i]),
        }
        fuzzing::config_yaml(lines.join("\n").as_bytes());
    }
}
