//! Merges of literal shard streams, built byte for byte as MariaDB sends them.

use mysql_common::constants::ColumnType as T;
use shoal_router::plan::{
    AggColumn, Aggregation, CmpOp, Column as C, Fold, HavingSpec, MergeSpec, Operand, SortKey,
};
use shoal_router::sql::stmt::Literal;

use super::*;
use crate::wire::messages::put_lenenc_bytes;

const UNSIGNED: u16 = 32;
const BINARY: u16 = 128;
const ENUM: u16 = 256;

fn col(name: &str, t: T, flags: u16, decimals: u8, charset: u16) -> Column {
    let mut p = Vec::new();
    for s in ["def", "db", "t", "t", name, name] {
        put_lenenc_bytes(&mut p, s.as_bytes());
    }
    p.push(0x0C);
    p.extend_from_slice(&charset.to_le_bytes());
    p.extend_from_slice(&20u32.to_le_bytes());
    p.push(t as u8);
    p.extend_from_slice(&flags.to_le_bytes());
    p.push(decimals);
    p.extend_from_slice(&[0, 0]);
    let c = parse_column(&p).unwrap();
    assert_eq!(c.name, name);
    c
}

fn int() -> Column {
    col("i", T::MYSQL_TYPE_LONG, 0, 0, 63)
}
fn bigint() -> Column {
    col("n", T::MYSQL_TYPE_LONGLONG, 0, 0, 63)
}
fn ubigint() -> Column {
    col("u", T::MYSQL_TYPE_LONGLONG, UNSIGNED, 0, 63)
}
fn varchar() -> Column {
    col("s", T::MYSQL_TYPE_VAR_STRING, 0, 0, 45)
}
fn varchar_bin() -> Column {
    col("s", T::MYSQL_TYPE_VAR_STRING, BINARY, 0, 45)
}
fn varbinary() -> Column {
    col("b", T::MYSQL_TYPE_VAR_STRING, BINARY, 0, 63)
}
fn decimal(d: u8) -> Column {
    col("d", T::MYSQL_TYPE_NEWDECIMAL, 0, d, 63)
}
fn double() -> Column {
    col("f", T::MYSQL_TYPE_DOUBLE, 0, 31, 63)
}
fn datetime() -> Column {
    col("t", T::MYSQL_TYPE_DATETIME, 0, 0, 63)
}

/// A cell value in the tests: text form, typed for the binary encoding by its column.
type V = Option<&'static str>;

fn text_row(vals: &[V]) -> Vec<u8> {
    let mut p = Vec::new();
    for v in vals {
        match v {
            None => p.push(0xFB),
            Some(s) => put_lenenc_bytes(&mut p, s.as_bytes()),
        }
    }
    p
}

/// The binary-protocol encoding of a text value of `c`.
fn bin_cell(c: &Column, s: &str) -> Vec<u8> {
    match c.column_type {
        T::MYSQL_TYPE_LONG => s.parse::<i32>().unwrap().to_le_bytes().to_vec(),
        T::MYSQL_TYPE_LONGLONG if c.unsigned() => s.parse::<u64>().unwrap().to_le_bytes().to_vec(),
        T::MYSQL_TYPE_LONGLONG => s.parse::<i64>().unwrap().to_le_bytes().to_vec(),
        T::MYSQL_TYPE_DOUBLE => s.parse::<f64>().unwrap().to_le_bytes().to_vec(),
        T::MYSQL_TYPE_DATETIME => {
            // YYYY-MM-DD HH:MM:SS
            let n: Vec<u32> = s
                .split(['-', ' ', ':'])
                .map(|x| x.parse().unwrap())
                .collect();
            let mut v = (n[0] as u16).to_le_bytes().to_vec();
            v.extend(n[1..].iter().map(|&x| x as u8));
            v
        }
        _ => s.as_bytes().to_vec(),
    }
}

fn bin_row(cols: &[Column], vals: &[V]) -> Vec<u8> {
    let cells: Vec<Option<Vec<u8>>> = cols
        .iter()
        .zip(vals)
        .map(|(c, v)| v.map(|s| bin_cell(c, s)))
        .collect();
    value::encode_row(&cells, cols, Protocol::Binary)
}

fn row(cols: &[Column], vals: &[V], p: Protocol) -> Vec<u8> {
    match p {
        Protocol::Text => text_row(vals),
        Protocol::Binary => bin_row(cols, vals),
    }
}

/// Runs a merge to the end, feeding each shard's rows when asked; the output rows decoded
/// back to text values (for both protocols, through the test's own encoder).
fn run_merge(
    spec: &MergeSpec,
    cols: Vec<Column>,
    shards: &[Vec<Vec<V>>],
    p: Protocol,
) -> Result<Vec<Vec<Option<String>>>> {
    let (out, _) = run_raw(spec, cols.clone(), shards, p)?;
    let m = Merger::new(spec, cols.clone(), shards.len(), p)?;
    let vis = &cols[..m.visible_columns()];
    Ok(out.iter().map(|r| decode(vis, r, p)).collect())
}

fn run_raw(
    spec: &MergeSpec,
    cols: Vec<Column>,
    shards: &[Vec<Vec<V>>],
    p: Protocol,
) -> Result<(Vec<Vec<u8>>, Vec<usize>)> {
    run_raw_max(spec, cols, shards, p, DEFAULT_MAX_GROUPS)
}

fn run_raw_max(
    spec: &MergeSpec,
    cols: Vec<Column>,
    shards: &[Vec<Vec<V>>],
    p: Protocol,
    max_groups: usize,
) -> Result<(Vec<Vec<u8>>, Vec<usize>)> {
    let mut m = Merger::new(spec, cols.clone(), shards.len(), p)?.max_groups(max_groups);
    let mut pos = vec![0; shards.len()];
    let mut out = Vec::new();
    loop {
        match m.next()? {
            Step::Need(s) => match shards[s].get(pos[s]) {
                Some(vals) => {
                    pos[s] += 1;
                    m.feed_row(s, row(&cols, vals, p))?;
                }
                None => m.feed_end(s),
            },
            Step::Row(r) => out.push(r),
            Step::Done => return Ok((out, pos)),
        }
    }
}

fn decode(cols: &[Column], r: &[u8], p: Protocol) -> Vec<Option<String>> {
    let cells = value::split_row(r, cols, p).unwrap();
    cells
        .iter()
        .zip(cols)
        .map(|(c, col)| {
            c.map(|v| match (p, col.column_type) {
                (Protocol::Text, _) => String::from_utf8(v.to_vec()).unwrap(),
                (_, T::MYSQL_TYPE_LONGLONG) if col.unsigned() => {
                    u64::from_le_bytes(v.try_into().unwrap()).to_string()
                }
                (_, T::MYSQL_TYPE_LONGLONG) => {
                    i64::from_le_bytes(v.try_into().unwrap()).to_string()
                }
                (_, T::MYSQL_TYPE_LONG) => i32::from_le_bytes(v.try_into().unwrap()).to_string(),
                (_, T::MYSQL_TYPE_DOUBLE) => f64::from_le_bytes(v.try_into().unwrap()).to_string(),
                (_, T::MYSQL_TYPE_DATETIME) => format!(
                    "{}-{:02}-{:02} {:02}:{:02}:{:02}",
                    u16::from_le_bytes([v[0], v[1]]),
                    v[2],
                    v[3],
                    v[4],
                    v[5],
                    v[6]
                ),
                _ => String::from_utf8(v.to_vec()).unwrap(),
            })
        })
        .collect()
}

fn s(v: &[V]) -> Vec<Option<String>> {
    v.iter().map(|x| x.map(str::to_string)).collect()
}

fn rows(v: &[&[V]]) -> Vec<Vec<Option<String>>> {
    v.iter().map(|r| s(r)).collect()
}

const BOTH: [Protocol; 2] = [Protocol::Text, Protocol::Binary];

fn order(keys: &[(usize, bool)]) -> MergeSpec {
    MergeSpec {
        order_by: keys
            .iter()
            .map(|&(c, desc)| SortKey {
                column: C::At(c),
                desc,
            })
            .collect(),
        ..MergeSpec::default()
    }
}

#[test]
fn concatenation_forwards_bytes_untouched_in_shard_order() {
    for p in BOTH {
        let cols = vec![int(), varchar()];
        let shards = vec![
            vec![vec![Some("3"), Some("c")], vec![Some("1"), None]],
            vec![],
            vec![vec![Some("2"), Some("b")]],
        ];
        let (out, _) = run_raw(&MergeSpec::default(), cols.clone(), &shards, p).unwrap();
        let want: Vec<Vec<u8>> = shards.iter().flatten().map(|r| row(&cols, r, p)).collect();
        assert_eq!(out, want);
    }
}

#[test]
fn concatenation_asks_shards_one_after_the_other() {
    let mut m = Merger::new(&MergeSpec::default(), vec![int()], 2, Protocol::Text).unwrap();
    assert_eq!(m.next().unwrap(), Step::Need(0));
    m.feed_row(0, text_row(&[Some("1")])).unwrap();
    assert_eq!(m.next().unwrap(), Step::Row(text_row(&[Some("1")])));
    assert_eq!(m.next().unwrap(), Step::Need(0));
    m.feed_end(0);
    assert_eq!(m.next().unwrap(), Step::Need(1));
    m.feed_end(1);
    assert_eq!(m.next().unwrap(), Step::Done);
}

#[test]
fn order_by_integers_with_negatives_nulls_and_empty_shards() {
    for p in BOTH {
        let shards = vec![
            vec![
                vec![None],
                vec![Some("-5")],
                vec![Some("2")],
                vec![Some("10")],
            ],
            vec![],
            vec![
                vec![None],
                vec![Some("-7")],
                vec![Some("2")],
                vec![Some("3")],
            ],
        ];
        let got = run_merge(&order(&[(0, false)]), vec![int()], &shards, p).unwrap();
        let want: &[&[V]] = &[
            &[None],
            &[None],
            &[Some("-7")],
            &[Some("-5")],
            &[Some("2")],
            &[Some("2")],
            &[Some("3")],
            &[Some("10")],
        ];
        assert_eq!(got, rows(want), "{p:?}");
        // Descending: NULLs last.
        let desc: Vec<Vec<Vec<V>>> = shards
            .iter()
            .map(|s| s.iter().rev().cloned().collect())
            .collect();
        let got = run_merge(&order(&[(0, true)]), vec![int()], &desc, p).unwrap();
        let mut w: Vec<&[V]> = want.to_vec();
        w.reverse();
        assert_eq!(got, rows(&w));
    }
}

#[test]
fn ties_keep_shard_order() {
    // Second column tags the row; the sort key ties.
    let cols = vec![int(), varchar()];
    let shards = vec![
        vec![vec![Some("1"), Some("a0")], vec![Some("1"), Some("a1")]],
        vec![vec![Some("1"), Some("b0")], vec![Some("2"), Some("b1")]],
    ];
    for p in BOTH {
        let got = run_merge(&order(&[(0, false)]), cols.clone(), &shards, p).unwrap();
        let tags: Vec<_> = got.iter().map(|r| r[1].clone().unwrap()).collect();
        assert_eq!(tags, ["a0", "a1", "b0", "b1"]);
    }
}

#[test]
fn general_ci_ties_and_order() {
    // 'a' = 'A' = 'a ' under utf8mb4_general_ci (PAD SPACE); 'é' = 'E'; 'b' after them.
    let cols = vec![varchar(), int()];
    let shards = vec![
        vec![vec![Some("a"), Some("0")], vec![Some("b"), Some("0")]],
        vec![
            vec![Some("A"), Some("1")],
            vec![Some("a "), Some("1")],
            vec![Some("B"), Some("1")],
        ],
        vec![vec![Some("é"), Some("2")], vec![Some("Z"), Some("2")]],
    ];
    for p in BOTH {
        let got = run_merge(&order(&[(0, false)]), cols.clone(), &shards, p).unwrap();
        let got: Vec<_> = got.iter().map(|r| r[0].clone().unwrap()).collect();
        assert_eq!(got, ["a", "A", "a ", "b", "B", "é", "Z"]);
    }
}

#[test]
fn general_ci_ascii_weights_are_the_character_weights() {
    // ASCII text takes a byte path; it must weigh as the character path does.
    use shoal_router::rule::collation::general_ci_weight;
    // Every byte, at several positions and string lengths (a byte loop may work in words), and
    // with and without trailing spaces.
    for shift in 0..8u8 {
        for len in [128usize, 127, 13, 7, 1] {
            let all: Vec<u8> = (0u8..0x80).map(|b| (b + shift) % 0x80).take(len).collect();
            let Ok(value::Key::Str { w, .. }) = value::weights(&all, value::Coll::GeneralCi) else {
                panic!("a string key");
            };
            let w = w.to_u32s();
            let mut chars: Vec<u32> = all
                .iter()
                .map(|&b| general_ci_weight(char::from(b)) as u32)
                .collect();
            // Trailing spaces do not weigh (PAD SPACE).
            while chars.last() == Some(&0x20) {
                chars.pop();
            }
            assert_eq!(w, chars, "shift {shift}, length {len}");
        }
    }
}

#[test]
fn narrow_and_wide_weights_compare_and_hash_as_the_weights_do() {
    // Weights are kept one byte each while they fit (a canonical form): equal strings must
    // be equal and hash alike whichever characters spell them, and strings of both forms
    // must order as their weights do.
    use std::hash::BuildHasher;
    use value::{Coll, Key, Weights, cmp_keys, weights};
    let key = |s: &str| weights(s.as_bytes(), Coll::GeneralCi).unwrap();
    let w = |k: &Key| match k {
        Key::Str { w, .. } => w.clone(),
        _ => panic!("a string key"),
    };
    let hasher = std::collections::hash_map::RandomState::new();
    // 'é' weighs as 'E' (non-ASCII, still narrow); CJK characters weigh above 255 (wide).
    let (e_acute, e) = (key("é  "), key("E"));
    assert!(matches!(w(&e_acute), Weights::Narrow(_)));
    assert_eq!(e_acute, e);
    assert_eq!(hasher.hash_one(&e_acute), hasher.hash_one(&e));
    let cjk = key("中");
    assert!(matches!(w(&cjk), Weights::Wide(_)));
    // Longer ones too: ASCII is recognised eight bytes at a time, a non-ASCII byte anywhere
    // (in a word or in the rest) sends the string to the character path.
    let strings = [
        "",
        "a",
        "a\t",
        "E",
        "é",
        "ez",
        "z",
        "中",
        "中a",
        "a中",
        "Z中",
        "abcdefgh",
        "ABCDEFGHé",
        "abcdéfghijkl",
        "abcdefghijkl中",
        "abcdefghijklmnop",
        "ABCDEFGHIJKLMNOP  ",
    ];
    for x in strings {
        for y in strings {
            let (kx, ky) = (key(x), key(y));
            // PAD SPACE on the widened weights: the shorter padded with spaces.
            let (mut a, mut b) = (w(&kx).to_u32s(), w(&ky).to_u32s());
            let n = a.len().max(b.len());
            a.resize(n, 0x20);
            b.resize(n, 0x20);
            let widened = a.cmp(&b);
            assert_eq!(cmp_keys(&kx, &ky), widened, "{x:?} against {y:?}");
            if kx == ky {
                assert_eq!(hasher.hash_one(&kx), hasher.hash_one(&ky), "{x:?} = {y:?}");
            }
        }
    }
}

#[test]
fn bin_collation_pads_spaces_binary_does_not() {
    // Under PAD SPACE 'a\t' < 'a' (tab < the padding space); 'a' = 'a '.
    let shards = vec![
        vec![vec![Some("a\t")], vec![Some("a ")]],
        vec![vec![Some("a")], vec![Some("b")]],
    ];
    let got = run_merge(
        &order(&[(0, false)]),
        vec![varchar_bin()],
        &shards,
        Protocol::Text,
    )
    .unwrap();
    assert_eq!(
        got,
        rows(&[&[Some("a\t")], &[Some("a ")], &[Some("a")], &[Some("b")]])
    );
    // binary: bytes; 'a' < 'a\t' < 'a '.
    let shards = vec![
        vec![vec![Some("a\t")], vec![Some("a ")]],
        vec![vec![Some("a")], vec![Some("b")]],
    ];
    let got = run_merge(
        &order(&[(0, false)]),
        vec![varbinary()],
        &shards,
        Protocol::Text,
    )
    .unwrap();
    assert_eq!(
        got,
        rows(&[&[Some("a")], &[Some("a\t")], &[Some("a ")], &[Some("b")]])
    );
    // Case matters under _bin.
    let shards = vec![
        vec![vec![Some("B")], vec![Some("a")]],
        vec![vec![Some("A")]],
    ];
    let got = run_merge(
        &order(&[(0, false)]),
        vec![varchar_bin()],
        &shards,
        Protocol::Text,
    )
    .unwrap();
    assert_eq!(got, rows(&[&[Some("A")], &[Some("B")], &[Some("a")]]));
}

#[test]
fn decimals_of_different_scales_and_unsigned_bigint() {
    let shards = vec![
        vec![vec![Some("-1.50")], vec![Some("0.5")], vec![Some("10")]],
        vec![vec![Some("-1.5")], vec![Some("0.05")], vec![Some("9.999")]],
    ];
    let got = run_merge(
        &order(&[(0, false)]),
        vec![decimal(3)],
        &shards,
        Protocol::Text,
    )
    .unwrap();
    let v: Vec<_> = got.iter().map(|r| r[0].clone().unwrap()).collect();
    assert_eq!(v, ["-1.50", "-1.5", "0.05", "0.5", "9.999", "10"]);
    for p in BOTH {
        let shards = vec![
            vec![vec![Some("1")], vec![Some("18446744073709551615")]],
            vec![vec![Some("9223372036854775808")]],
        ];
        let got = run_merge(&order(&[(0, false)]), vec![ubigint()], &shards, p).unwrap();
        let v: Vec<_> = got.iter().map(|r| r[0].clone().unwrap()).collect();
        assert_eq!(
            v,
            ["1", "9223372036854775808", "18446744073709551615"],
            "{p:?}"
        );
    }
}

#[test]
fn dates_and_doubles() {
    for p in BOTH {
        let shards = vec![
            vec![vec![Some("1999-12-31 23:59:59"), Some("-0.5")]],
            vec![
                vec![Some("2000-01-01 00:00:00"), Some("1e-3")],
                vec![Some("2024-02-29 12:00:00"), Some("2")],
            ],
        ];
        let cols = vec![datetime(), double()];
        let got = run_merge(&order(&[(0, true)]), cols.clone(), &shards, p);
        // Shards sorted ascending fed to a descending merge: refused as out of order.
        assert!(got.is_err());
        let got = run_merge(&order(&[(0, false)]), cols.clone(), &shards, p).unwrap();
        let v: Vec<_> = got.iter().map(|r| r[0].clone().unwrap()).collect();
        assert_eq!(
            v,
            [
                "1999-12-31 23:59:59",
                "2000-01-01 00:00:00",
                "2024-02-29 12:00:00"
            ]
        );
        let shards = vec![
            vec![
                vec![Some("2000-01-01 00:00:00"), Some("-0.5")],
                vec![Some("2000-01-01 00:00:00"), Some("2")],
            ],
            vec![vec![Some("2000-01-01 00:00:00"), Some("0.001")]],
        ];
        let got = run_merge(&order(&[(1, false)]), cols, &shards, p).unwrap();
        let v: Vec<f64> = got
            .iter()
            .map(|r| r[1].clone().unwrap().parse().unwrap())
            .collect();
        assert_eq!(v, [-0.5, 0.001, 2.0]);
    }
}

#[test]
fn limit_and_offset_stop_pulling() {
    let shards: Vec<Vec<Vec<V>>> = vec![
        vec![
            vec![Some("1")],
            vec![Some("4")],
            vec![Some("7")],
            vec![Some("10")],
        ],
        vec![vec![Some("2")], vec![Some("5")], vec![Some("8")]],
        vec![vec![Some("3")], vec![Some("6")], vec![Some("9")]],
    ];
    for p in BOTH {
        let mut spec = order(&[(0, false)]);
        spec.offset = 2;
        spec.limit = Some(3);
        let (out, pulled) = run_raw(&spec, vec![int()], &shards, p).unwrap();
        let got: Vec<_> = out
            .iter()
            .map(|r| decode(&[int()], r, p)[0].clone().unwrap())
            .collect();
        assert_eq!(got, ["3", "4", "5"]);
        // Only what the merge needed was read: 7 (to place 5 after 4), nothing after 5.
        assert_eq!(pulled, [3, 2, 2]);
        spec.limit = Some(0);
        let (out, pulled) = run_raw(&spec, vec![int()], &shards, p).unwrap();
        assert!(out.is_empty());
        assert_eq!(pulled, [0, 0, 0]);
        // Deep offset beyond the rows: nothing, all read.
        spec.offset = 100;
        spec.limit = None;
        let (out, _) = run_raw(&spec, vec![int()], &shards, p).unwrap();
        assert!(out.is_empty());
        // Concatenation with limit.
        let spec = MergeSpec {
            limit: Some(5),
            ..MergeSpec::default()
        };
        let (out, pulled) = run_raw(&spec, vec![int()], &shards, p).unwrap();
        assert_eq!(out.len(), 5);
        assert_eq!(pulled, [4, 1, 0]);
    }
}

#[test]
fn hidden_columns_are_dropped() {
    // SELECT s FROM t ORDER BY i: i added as a hidden last column.
    let cols = vec![varchar(), int()];
    let mut spec = MergeSpec {
        order_by: vec![SortKey {
            column: C::FromEnd(1),
            desc: false,
        }],
        hidden_columns: 1,
        ..MergeSpec::default()
    };
    let shards = vec![
        vec![vec![Some("x"), Some("1")], vec![None, Some("3")]],
        vec![vec![Some("y"), Some("2")]],
    ];
    for p in BOTH {
        let m = Merger::new(&spec, cols.clone(), 2, p).unwrap();
        assert_eq!(m.visible_columns(), 1);
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(got, rows(&[&[Some("x")], &[Some("y")], &[None]]));
        let (out, _) = run_raw(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(out[2], row(&cols[..1], &[None], p));
    }
    spec.hidden_columns = 3;
    assert!(Merger::new(&spec, cols, 2, Protocol::Text).is_err());
}

#[test]
fn ordered_distinct_drops_neighbours_not_only_exact_copies() {
    // ORDER BY the DISTINCT column itself: duplicates from different shards, collation-equal
    // spellings ('a', 'A', 'a '), NULLs, with OFFSET and LIMIT counted on distinct rows.
    let shards = vec![
        vec![
            vec![None, Some("1")],
            vec![Some("a"), Some("1")],
            vec![Some("b"), Some("1")],
            vec![Some("b"), Some("1")],
        ],
        vec![
            vec![None, Some("2")],
            vec![Some("A"), Some("2")],
            vec![Some("a "), Some("2")],
            vec![Some("c"), Some("2")],
        ],
        vec![vec![Some("b"), Some("3")], vec![Some("C"), Some("3")]],
    ];
    let cols = vec![varchar(), int()];
    for p in BOTH {
        let mut spec = order(&[(0, false)]);
        spec.distinct = true;
        spec.hidden_columns = 1;
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        let firsts: Vec<_> = got.iter().map(|r| r[0].clone()).collect();
        assert_eq!(firsts.len(), 4, "{firsts:?}");
        assert_eq!(firsts[0], None);
        assert!(
            firsts[1]
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("a"))
        );
        assert_eq!(firsts[2].as_deref(), Some("b"));
        assert!(
            firsts[3]
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("c"))
        );
        spec.offset = 1;
        spec.limit = Some(2);
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1][0].as_deref(), Some("b"));
        // DESC: the same rows, reversed.
        let mut spec = order(&[(0, true)]);
        spec.distinct = true;
        spec.hidden_columns = 1;
        let rev: Vec<Vec<_>> = shards
            .iter()
            .map(|s| s.iter().rev().cloned().collect())
            .collect();
        assert_eq!(run_merge(&spec, cols.clone(), &rev, p).unwrap().len(), 4);
        // Sorted by a hidden column: equal visible rows are not neighbours ('b' comes from
        // shards 1 and 3 with 'A' and 'c' between): every row is compared with all before.
        let mut spec = order(&[(1, false)]);
        spec.distinct = true;
        spec.hidden_columns = 1;
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(got.len(), 4, "{got:?}");
        // Sorted by one of two visible columns: rows equal in it but not in the other.
        let two = vec![
            vec![vec![Some("a"), Some("1")], vec![Some("a"), Some("2")]],
            vec![vec![Some("a"), Some("1")]],
        ];
        let mut spec = order(&[(0, false)]);
        spec.distinct = true;
        let got = run_merge(&spec, vec![varchar(), int()], &two, p).unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
    }
}

#[test]
fn distinct_by_collation() {
    let spec = MergeSpec {
        distinct: true,
        ..MergeSpec::default()
    };
    let shards = vec![
        vec![vec![Some("a")], vec![Some("b")]],
        vec![
            vec![Some("A")],
            vec![Some("c")],
            vec![Some("a ")],
            vec![None],
        ],
        vec![vec![None]],
    ];
    for p in BOTH {
        let got = run_merge(&spec, vec![varchar()], &shards, p).unwrap();
        assert_eq!(
            got,
            rows(&[&[Some("a")], &[Some("b")], &[Some("c")], &[None]])
        );
        let got = run_merge(&spec, vec![varchar_bin()], &shards, p).unwrap();
        assert_eq!(
            got.len(),
            5,
            "a, b, A, c, NULL ('a ' = 'a' under PAD SPACE)"
        );
    }
    // Bounded.
    let mut m = Merger::new(&spec, vec![int()], 1, Protocol::Text)
        .unwrap()
        .max_groups(2);
    let mut n = 0;
    let err = loop {
        match m.next() {
            Ok(Step::Need(0)) => {
                n += 1;
                let v = n.to_string();
                m.feed_row(0, text_row(&[Some(Box::leak(v.into_boxed_str()))]))
                    .unwrap();
            }
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    assert!(err.to_string().contains("more than 2 groups"), "{err}");
}

fn agg(keys: &[C], folds: &[(C, Fold)]) -> Aggregation {
    Aggregation {
        keys: keys.to_vec(),
        columns: folds
            .iter()
            .map(|&(column, fold)| AggColumn { column, fold })
            .collect(),
    }
}

fn count_col() -> Column {
    col("c", T::MYSQL_TYPE_LONGLONG, 0, 0, 63)
}

#[test]
fn group_by_with_every_fold() {
    // SELECT g, COUNT(*), SUM(d), MIN(s), MAX(s), AVG(d) FROM t GROUP BY g
    // shard SQL adds SUM(d), COUNT(d) hidden for the AVG.
    let cols = vec![
        varchar(),
        count_col(),
        decimal(2),
        varchar(),
        varchar(),
        decimal(6),
        decimal(2),
        count_col(),
    ];
    let spec = MergeSpec {
        aggregate: Some(agg(
            &[C::At(0)],
            &[
                (C::At(1), Fold::SumCounts),
                (C::At(2), Fold::Sum),
                (C::At(3), Fold::Min),
                (C::At(4), Fold::Max),
                (
                    C::At(5),
                    Fold::Avg {
                        sum: C::FromEnd(2),
                        count: C::FromEnd(1),
                    },
                ),
            ],
        )),
        order_by: vec![SortKey {
            column: C::At(0),
            desc: false,
        }],
        hidden_columns: 2,
        ..MergeSpec::default()
    };
    let shards: Vec<Vec<Vec<V>>> = vec![
        vec![
            vec![
                Some("a"),
                Some("2"),
                Some("1.10"),
                Some("m"),
                Some("q"),
                Some("0.550000"),
                Some("1.10"),
                Some("2"),
            ],
            vec![
                Some("b"),
                Some("1"),
                None,
                None,
                None,
                None,
                None,
                Some("0"),
            ],
        ],
        vec![vec![
            Some("A"),
            Some("1"),
            Some("-0.05"),
            Some("K"),
            Some("Z"),
            Some("-0.050000"),
            Some("-0.05"),
            Some("1"),
        ]],
        vec![],
    ];
    for p in BOTH {
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(
            got,
            rows(&[
                // 1.10 + -0.05 = 1.05 over 3 values: 0.35
                &[
                    Some("a"),
                    Some("3"),
                    Some("1.05"),
                    Some("K"),
                    Some("Z"),
                    Some("0.350000")
                ],
                &[Some("b"), Some("1"), None, None, None, None],
            ]),
            "{p:?}"
        );
    }
}

#[test]
fn avg_rounds_half_away_from_zero() {
    let cols = vec![decimal(4), decimal(0), count_col()];
    let spec = MergeSpec {
        aggregate: Some(agg(
            &[],
            &[(
                C::At(0),
                Fold::Avg {
                    sum: C::At(1),
                    count: C::At(2),
                },
            )],
        )),
        hidden_columns: 2,
        ..MergeSpec::default()
    };
    // 5/3 = 1.66666.. -> 1.6667; -5/3 -> -1.6667; 1/8 = 0.125 exact; 1/16 = 0.0625;
    // 1/32 = 0.03125 -> 0.0313 (half away).
    for (sums, counts, want) in [
        (["2", "3"], ["1", "2"], "1.6667"),
        (["-2", "-3"], ["1", "2"], "-1.6667"),
        (["1", "0"], ["8", "0"], "0.1250"),
        (["1", "0"], ["16", "16"], "0.0313"),
        (["-1", "0"], ["16", "16"], "-0.0313"),
    ] {
        for p in BOTH {
            let shards = vec![
                vec![vec![Some("x"), Some(sums[0]), Some(counts[0])]],
                vec![vec![Some("x"), Some(sums[1]), Some(counts[1])]],
            ];
            let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
            assert_eq!(got, rows(&[&[Some(want)]]), "{sums:?} {counts:?} {p:?}");
        }
    }
}

#[test]
fn aggregates_without_keys_give_one_row() {
    // SELECT COUNT(*), SUM(d), MAX(n) FROM t over empty tables: each shard answers 0, NULL, NULL.
    let cols = vec![count_col(), decimal(0), bigint()];
    let spec = MergeSpec {
        aggregate: Some(agg(
            &[],
            &[
                (C::At(0), Fold::SumCounts),
                (C::At(1), Fold::Sum),
                (C::At(2), Fold::Max),
            ],
        )),
        ..MergeSpec::default()
    };
    for p in BOTH {
        let shards = vec![vec![vec![Some("0"), None, None]]; 3];
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(got, rows(&[&[Some("0"), None, None]]));
        // Even with no shard rows at all.
        let got = run_merge(&spec, cols.clone(), &[vec![], vec![]], p).unwrap();
        assert_eq!(got, rows(&[&[Some("0"), None, None]]));
        let shards = vec![
            vec![vec![Some("2"), Some("99999999999999999999"), Some("-3")]],
            vec![vec![Some("1"), Some("1"), Some("9223372036854775807")]],
        ];
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(
            got,
            rows(&[&[
                Some("3"),
                Some("100000000000000000000"),
                Some("9223372036854775807")
            ]])
        );
    }
}

#[test]
fn double_sum_and_avg() {
    let cols = vec![double(), double(), count_col()];
    let spec = MergeSpec {
        aggregate: Some(agg(
            &[],
            &[
                (C::At(0), Fold::Sum),
                (
                    C::At(1),
                    Fold::Avg {
                        sum: C::At(0),
                        count: C::At(2),
                    },
                ),
            ],
        )),
        hidden_columns: 1,
        ..MergeSpec::default()
    };
    let shards = vec![
        vec![vec![Some("1.5"), Some("1.5"), Some("1")]],
        vec![vec![Some("2.5"), Some("1.25"), Some("2")]],
    ];
    for p in BOTH {
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(got, rows(&[&[Some("4"), Some("1.3333333333333333")]]));
    }
}

#[test]
fn having_three_valued() {
    // SELECT g, SUM(d) FROM t GROUP BY g HAVING SUM(d) > 1 OR SUM(d) IS NULL
    let cols = vec![varchar(), decimal(1)];
    let gt = HavingSpec::Cmp {
        op: CmpOp::Gt,
        left: Operand::Column(C::At(1)),
        right: Operand::Value(Literal::Int(1)),
    };
    let is_null = HavingSpec::IsNull {
        operand: Operand::Column(C::At(1)),
        negated: false,
    };
    let shards = vec![
        vec![
            vec![Some("a"), Some("0.6")],
            vec![Some("b"), Some("0.4")],
            vec![Some("c"), None],
        ],
        vec![vec![Some("a"), Some("0.5")], vec![Some("b"), Some("0.6")]],
    ];
    let base = MergeSpec {
        aggregate: Some(agg(&[C::At(0)], &[(C::At(1), Fold::Sum)])),
        order_by: vec![SortKey {
            column: C::At(0),
            desc: false,
        }],
        ..MergeSpec::default()
    };
    for p in BOTH {
        let mut spec = base.clone();
        spec.having = Some(gt.clone());
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(got, rows(&[&[Some("a"), Some("1.1")]]));
        spec.having = Some(HavingSpec::Or(
            Box::new(gt.clone()),
            Box::new(is_null.clone()),
        ));
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(got.len(), 2);
        // NOT (NULL > 1) is NULL: the group is dropped.
        spec.having = Some(HavingSpec::Not(Box::new(gt.clone())));
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(got, rows(&[&[Some("b"), Some("1.0")]]));
        // Comparing with a string literal: as doubles.
        spec.having = Some(HavingSpec::Cmp {
            op: CmpOp::Eq,
            left: Operand::Column(C::At(1)),
            right: Operand::Value(Literal::Str("1.0abc".into())),
        });
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(got, rows(&[&[Some("b"), Some("1.0")]]));
        // The key under its collation: g = 'A' matches 'a'.
        spec.having = Some(HavingSpec::Cmp {
            op: CmpOp::Eq,
            left: Operand::Column(C::At(0)),
            right: Operand::Value(Literal::Str("A ".into())),
        });
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(got, rows(&[&[Some("a"), Some("1.1")]]));
        // NULL <=> NULL
        spec.having = Some(HavingSpec::Cmp {
            op: CmpOp::NullSafeEq,
            left: Operand::Column(C::At(1)),
            right: Operand::Value(Literal::Null),
        });
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(got, rows(&[&[Some("c"), None]]));
    }
}

#[test]
fn grouped_rows_sorted_then_limited() {
    // ORDER BY COUNT(*) DESC LIMIT 2 OFFSET 1
    let cols = vec![int(), count_col()];
    let spec = MergeSpec {
        aggregate: Some(agg(&[C::At(0)], &[(C::At(1), Fold::SumCounts)])),
        order_by: vec![SortKey {
            column: C::At(1),
            desc: true,
        }],
        offset: 1,
        limit: Some(2),
        ..MergeSpec::default()
    };
    let shards = vec![
        vec![
            vec![Some("1"), Some("5")],
            vec![Some("2"), Some("1")],
            vec![Some("3"), Some("2")],
        ],
        vec![vec![Some("2"), Some("3")], vec![Some("4"), Some("1")]],
    ];
    for p in BOTH {
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(
            got,
            rows(&[&[Some("2"), Some("4")], &[Some("3"), Some("2")]])
        );
    }
}

#[test]
fn too_many_groups_is_an_error_naming_the_limit() {
    let cols = vec![int(), count_col()];
    let spec = MergeSpec {
        aggregate: Some(agg(&[C::At(0)], &[(C::At(1), Fold::SumCounts)])),
        ..MergeSpec::default()
    };
    let mut m = Merger::new(&spec, cols, 1, Protocol::Text)
        .unwrap()
        .max_groups(2);
    m.feed_row(0, text_row(&[Some("1"), Some("1")])).unwrap();
    m.feed_row(0, text_row(&[Some("2"), Some("1")])).unwrap();
    m.feed_row(0, text_row(&[Some("1"), Some("1")])).unwrap();
    let e = m
        .feed_row(0, text_row(&[Some("3"), Some("1")]))
        .unwrap_err();
    assert!(e.to_string().contains("max_groups"), "{e}");
}

#[test]
fn refusals() {
    let refused = |c: Column, spec: &MergeSpec| {
        let e = Merger::new(spec, vec![c], 2, Protocol::Text)
            .err()
            .expect("refused");
        let (code, state, _) = e.as_reply().unwrap();
        assert_eq!((code, state), (1235, b"42000"));
        e.to_string()
    };
    let by0 = order(&[(0, false)]);
    assert!(refused(col("u", T::MYSQL_TYPE_VAR_STRING, 0, 0, 224), &by0).contains("unicode_ci"));
    assert!(refused(col("e", T::MYSQL_TYPE_STRING, ENUM, 0, 45), &by0).contains("ENUM"));
    assert!(refused(col("j", T::MYSQL_TYPE_JSON, 0, 0, 63), &by0).contains("JSON"));
    let beyond = order(&[(3, false)]);
    refused(int(), &beyond);
    let sum_str = MergeSpec {
        aggregate: Some(agg(&[], &[(C::At(0), Fold::Sum)])),
        ..MergeSpec::default()
    };
    refused(varchar(), &sum_str);
    // The same column merged without comparing it is fine.
    let plain = MergeSpec::default();
    assert!(
        Merger::new(
            &plain,
            vec![col("u", T::MYSQL_TYPE_VAR_STRING, 0, 0, 224)],
            2,
            Protocol::Text
        )
        .is_ok()
    );
}

#[test]
fn shard_out_of_order_under_the_assumed_collation_is_refused() {
    // A utf8mb4_unicode_ci / swedish column reported as general_ci: the shard sorted 'Z' before
    // 'Ö'; under general_ci 'Ö' = 'O' < 'Z'. Merging would be wrong: refused.
    let shards = vec![
        vec![vec![Some("Z")], vec![Some("Ö")]],
        vec![vec![Some("P")]],
    ];
    let e = run_merge(
        &order(&[(0, false)]),
        vec![varchar()],
        &shards,
        Protocol::Text,
    )
    .unwrap_err();
    assert!(e.to_string().contains("not in the order"), "{e}");
}

#[test]
fn malformed_rows_are_errors() {
    let mut m = Merger::new(&order(&[(0, false)]), vec![int()], 1, Protocol::Text).unwrap();
    assert!(m.feed_row(0, [0xFC, 1]).is_err());
    assert!(m.feed_row(0, text_row(&[Some("x1")])).is_err());
    let mut m = Merger::new(&order(&[(0, false)]), vec![int()], 1, Protocol::Binary).unwrap();
    assert!(m.feed_row(0, [0x00, 0x00, 1, 2]).is_err());
    assert!(m.feed_row(5, [0x00]).is_err());
}

#[test]
fn latin1_swedish_ci_order() {
    // Swedish: Z < Å < Ä = Æ < Ö; é = E; 'a' = 'A' = 'a '.
    let bytes = |v: &[u8]| {
        let mut p = Vec::new();
        put_lenenc_bytes(&mut p, v);
        p
    };
    let cols = vec![col("l", T::MYSQL_TYPE_VAR_STRING, 0, 0, 8)];
    let shards: Vec<Vec<&[u8]>> = vec![
        vec![b"a", b"\xE9", b"Z", b"\xC5", b"\xD6"],
        vec![b"A ", b"e", b"\xE4", b"\xC6"],
    ];
    let mut m = Merger::new(&order(&[(0, false)]), cols, 2, Protocol::Text).unwrap();
    let mut pos = [0, 0];
    let mut out = Vec::new();
    loop {
        match m.next().unwrap() {
            Step::Need(s) => match shards[s].get(pos[s]) {
                Some(v) => {
                    pos[s] += 1;
                    m.feed_row(s, bytes(v)).unwrap();
                }
                None => m.feed_end(s),
            },
            Step::Row(r) => out.push(r[1..].to_vec()),
            Step::Done => break,
        }
    }
    let want: Vec<&[u8]> = vec![
        b"a", b"A ", b"\xE9", b"e", b"Z", b"\xC5", b"\xE4", b"\xC6", b"\xD6",
    ];
    assert_eq!(out, want);
}

#[test]
fn time_year_and_bit_order() {
    // TIME: negative durations first; hours beyond 24.
    let time = col("tm", T::MYSQL_TYPE_TIME, 0, 0, 63);
    let shards = vec![
        vec![
            vec![Some("-838:59:59")],
            vec![Some("00:00:01.5")],
            vec![Some("100:00:00")],
        ],
        vec![vec![Some("-00:00:01")], vec![Some("00:00:01.25")]],
    ];
    let got = run_merge(
        &order(&[(0, false)]),
        vec![time.clone()],
        &shards,
        Protocol::Text,
    )
    .unwrap();
    let v: Vec<_> = got.iter().map(|r| r[0].clone().unwrap()).collect();
    assert_eq!(
        v,
        [
            "-838:59:59",
            "-00:00:01",
            "00:00:01.25",
            "00:00:01.5",
            "100:00:00"
        ]
    );
    // The same in the binary protocol: sign, days, h, m, s, microseconds.
    let bin = |neg: u8, days: u32, h: u8, m: u8, s: u8, us: u32| {
        let mut v = vec![neg];
        v.extend_from_slice(&days.to_le_bytes());
        v.extend_from_slice(&[h, m, s]);
        if us > 0 {
            v.extend_from_slice(&us.to_le_bytes());
        }
        value::encode_row(&[Some(v)], std::slice::from_ref(&time), Protocol::Binary)
    };
    let shards = [
        vec![
            bin(1, 34, 22, 59, 59, 0),
            bin(0, 0, 0, 0, 1, 500_000),
            bin(0, 4, 4, 0, 0, 0),
        ],
        vec![bin(1, 0, 0, 0, 1, 0), bin(0, 0, 0, 0, 1, 250_000)],
    ];
    let mut m = Merger::new(&order(&[(0, false)]), vec![time], 2, Protocol::Binary).unwrap();
    let (mut pos, mut out) = ([0, 0], Vec::new());
    loop {
        match m.next().unwrap() {
            Step::Need(s) => match shards[s].get(pos[s]) {
                Some(r) => {
                    pos[s] += 1;
                    m.feed_row(s, r.as_slice()).unwrap();
                }
                None => m.feed_end(s),
            },
            Step::Row(r) => out.push(r),
            Step::Done => break,
        }
    }
    let want = vec![
        shards[0][0].clone(),
        shards[1][0].clone(),
        shards[1][1].clone(),
        shards[0][1].clone(),
        shards[0][2].clone(),
    ];
    assert_eq!(out, want);
    // YEAR and BIT.
    let year = col("y", T::MYSQL_TYPE_YEAR, UNSIGNED, 0, 63);
    let shards = vec![
        vec![vec![Some("1999")], vec![Some("2155")]],
        vec![vec![Some("2000")]],
    ];
    let got = run_merge(&order(&[(0, true)]), vec![year], &shards, Protocol::Text);
    assert!(
        got.is_err(),
        "ascending shards under a descending merge are refused"
    );
    let bit = col("b", T::MYSQL_TYPE_BIT, UNSIGNED, 0, 63);
    let shards = vec![
        vec![vec![Some("\u{1}\u{0}")]],
        vec![vec![Some("\u{0}\u{7f}")]],
    ];
    let got = run_merge(&order(&[(0, false)]), vec![bit], &shards, Protocol::Text).unwrap();
    assert_eq!(got, rows(&[&[Some("\u{0}\u{7f}")], &[Some("\u{1}\u{0}")]]));
}

#[test]
fn having_on_dates_and_refusals() {
    let cols = vec![datetime(), count_col()];
    let base = MergeSpec {
        aggregate: Some(agg(&[C::At(0)], &[(C::At(1), Fold::SumCounts)])),
        order_by: vec![SortKey {
            column: C::At(0),
            desc: false,
        }],
        ..MergeSpec::default()
    };
    let shards = vec![
        vec![vec![Some("2024-01-01 00:00:00"), Some("1")]],
        vec![vec![Some("2024-06-01 10:00:00"), Some("2")]],
    ];
    for p in BOTH {
        let mut spec = base.clone();
        spec.having = Some(HavingSpec::Cmp {
            op: CmpOp::Ge,
            left: Operand::Column(C::At(0)),
            right: Operand::Value(Literal::Str("2024-03-01".into())),
        });
        let got = run_merge(&spec, cols.clone(), &shards, p).unwrap();
        assert_eq!(got, rows(&[&[Some("2024-06-01 10:00:00"), Some("2")]]));
    }
    let mut spec = base.clone();
    spec.having = Some(HavingSpec::Cmp {
        op: CmpOp::Ge,
        left: Operand::Column(C::At(0)),
        right: Operand::Value(Literal::Str("next week".into())),
    });
    assert!(Merger::new(&spec, cols.clone(), 2, Protocol::Text).is_err());
    spec.having = Some(HavingSpec::Cmp {
        op: CmpOp::Ge,
        left: Operand::Column(C::At(0)),
        right: Operand::Value(Literal::Int(20240101)),
    });
    assert!(Merger::new(&spec, cols, 2, Protocol::Text).is_err());
}

/// `SELECT s, COUNT(*), SUM(d) FROM t GROUP BY s` with the shards sorted by `s`.
fn sorted_spec() -> MergeSpec {
    MergeSpec {
        aggregate: Some(agg(
            &[C::At(0)],
            &[(C::At(1), Fold::SumCounts), (C::At(2), Fold::Sum)],
        )),
        groups_sorted: true,
        order_by: vec![SortKey {
            column: C::At(0),
            desc: false,
        }],
        ..MergeSpec::default()
    }
}

fn sorted_cols() -> Vec<Column> {
    vec![varchar(), count_col(), decimal(2)]
}

#[test]
fn sorted_groups_fold_collation_ties_holding_one_group() {
    // general_ci: 'a' = 'A' = 'a ' is one group; NULL is its own group and comes first.
    let shards = vec![
        vec![
            vec![None, Some("1"), Some("1.00")],
            vec![Some("a"), Some("2"), Some("2.50")],
            vec![Some("b"), Some("1"), None],
        ],
        vec![
            vec![None, Some("2"), Some("3.00")],
            vec![Some("A"), Some("3"), Some("1.25")],
            vec![Some("c"), Some("1"), Some("7.00")],
        ],
        vec![
            vec![Some("a "), Some("1"), Some("0.25")],
            vec![Some("B"), Some("4"), Some("1.00")],
        ],
    ];
    let want = rows(&[
        &[None, Some("3"), Some("4.00")],
        &[Some("a"), Some("6"), Some("4.00")],
        &[Some("b"), Some("5"), Some("1.00")],
        &[Some("c"), Some("1"), Some("7.00")],
    ]);
    for p in BOTH {
        // One group in memory at a time: a bound of one group is enough.
        let (out, pulled) = run_raw_max(&sorted_spec(), sorted_cols(), &shards, p, 1).unwrap();
        let got: Vec<_> = out.iter().map(|r| decode(&sorted_cols(), r, p)).collect();
        assert_eq!(got, want, "{p:?}");
        assert_eq!(pulled, [3, 3, 2]);
        // The hash path agrees (and needs room for every group).
        let hashed = MergeSpec {
            groups_sorted: false,
            ..sorted_spec()
        };
        assert_eq!(run_merge(&hashed, sorted_cols(), &shards, p).unwrap(), want);
        assert!(run_raw_max(&hashed, sorted_cols(), &shards, p, 1).is_err());
    }
}

#[test]
fn sorted_groups_stop_pulling_at_the_limit() {
    let shard = |from: usize| -> Vec<Vec<V>> {
        (from..100)
            .step_by(2)
            .map(|i| {
                let k: &'static str = Box::leak(format!("k{i:03}").into_boxed_str());
                vec![Some(k), Some("1"), Some("1.00")]
            })
            .collect()
    };
    let shards = vec![shard(0), shard(1)];
    let spec = MergeSpec {
        offset: 1,
        limit: Some(2),
        ..sorted_spec()
    };
    for p in BOTH {
        let (out, pulled) = run_raw_max(&spec, sorted_cols(), &shards, p, 1).unwrap();
        let got: Vec<_> = out.iter().map(|r| decode(&sorted_cols(), r, p)).collect();
        assert_eq!(
            got,
            rows(&[
                &[Some("k001"), Some("1"), Some("1.00")],
                &[Some("k002"), Some("1"), Some("1.00")]
            ])
        );
        // k003 closes group k002; nothing beyond it is read.
        assert!(pulled[0] <= 3 && pulled[1] <= 3, "{pulled:?}");
    }
}

#[test]
fn sorted_groups_refuse_shards_out_of_order() {
    for bad in [
        // Descending where ascending was asked.
        vec![
            vec![Some("b"), Some("1"), None],
            vec![Some("a"), Some("1"), None],
        ],
        // The same group twice: the shard's collation tells 'a' from 'A', Shoal's does not.
        vec![
            vec![Some("a"), Some("1"), None],
            vec![Some("A"), Some("1"), None],
        ],
    ] {
        let shards = vec![bad, vec![vec![Some("c"), Some("1"), None]]];
        for p in BOTH {
            let e = run_raw(&sorted_spec(), sorted_cols(), &shards, p).unwrap_err();
            assert!(e.to_string().contains("not in the order"), "{e}");
        }
    }
}

/// Shards of `groups` keys spread over three shards (sorted by key), counts varying.
fn many_groups(groups: usize) -> Vec<Vec<Vec<V>>> {
    let mut shards: Vec<Vec<Vec<V>>> = vec![Vec::new(), Vec::new(), Vec::new()];
    for g in 0..groups {
        let k: &'static str = Box::leak(format!("g{g:05}").into_boxed_str());
        for (s, shard) in shards.iter_mut().enumerate() {
            if (g + s) % 3 != 0 {
                let n: &'static str = Box::leak(((g * 7 + s) % 11).to_string().into_boxed_str());
                shard.push(vec![Some(k), Some(n), Some("0.50")]);
            }
        }
    }
    shards
}

#[test]
fn sorted_groups_agree_with_hashed_groups() {
    let shards = many_groups(300);
    let by = |c: usize, desc: bool| SortKey {
        column: C::At(c),
        desc,
    };
    let count_gt = |n: i64| HavingSpec::Cmp {
        op: CmpOp::Gt,
        left: Operand::Column(C::At(1)),
        right: Operand::Value(Literal::Int(n.into())),
    };
    let variants: Vec<(MergeSpec, usize)> = vec![
        (sorted_spec(), 1),
        (
            MergeSpec {
                having: Some(count_gt(12)),
                offset: 5,
                limit: Some(20),
                ..sorted_spec()
            },
            1,
        ),
        (
            MergeSpec {
                order_by: vec![by(0, true)],
                ..sorted_spec()
            },
            1,
        ),
        (
            MergeSpec {
                distinct: true,
                ..sorted_spec()
            },
            1,
        ),
        // ORDER BY COUNT(*) DESC, s LIMIT 3, 7: a top-10 over the streamed groups.
        (
            MergeSpec {
                order_by: vec![by(1, true), by(0, false)],
                offset: 3,
                limit: Some(7),
                ..sorted_spec()
            },
            10,
        ),
        // ORDER BY SUM(d), s without LIMIT: every group passing HAVING waits for the sort.
        (
            MergeSpec {
                order_by: vec![by(2, false), by(0, true)],
                having: Some(count_gt(15)),
                ..sorted_spec()
            },
            200,
        ),
    ];
    for (spec, max) in variants {
        let mut shards = shards.clone();
        if spec.group_order()[0].desc {
            // The shards sort as the spec says.
            shards.iter_mut().for_each(|s| s.reverse());
        }
        let hashed = MergeSpec {
            groups_sorted: false,
            ..spec.clone()
        };
        for p in BOTH {
            let want = run_raw(&hashed, sorted_cols(), &shards, p).unwrap().0;
            assert!(!want.is_empty());
            let got = run_raw_max(&spec, sorted_cols(), &shards, p, max)
                .unwrap_or_else(|e| panic!("{spec:?}: {e}"))
                .0;
            assert_eq!(got, want, "{spec:?} {p:?}");
        }
    }
    // Without a LIMIT, groups awaiting the final sort are bounded by max_groups.
    let spec = MergeSpec {
        order_by: vec![by(1, true)],
        ..sorted_spec()
    };
    let e = run_raw_max(&spec, sorted_cols(), &shards, Protocol::Text, 50).unwrap_err();
    assert!(e.to_string().contains("max_groups"), "{e}");
}

/// `col` with a display length.
fn col_len(name: &str, t: T, flags: u16, decimals: u8, length: u32) -> Column {
    let mut c = col(name, t, flags, decimals, 63);
    let n = c.raw.len();
    c.raw[n - 10..n - 6].copy_from_slice(&length.to_le_bytes());
    let c = parse_column(&c.raw).unwrap();
    assert_eq!(c.length, length);
    c
}

#[test]
fn merged_definitions_take_the_widest_length_and_the_flags_every_shard_has() {
    const NOT_NULL: u16 = 1;
    const PRI_KEY: u16 = 2;
    const NUM: u16 = 32768;
    let a = vec![
        col_len("d", T::MYSQL_TYPE_NEWDECIMAL, BINARY | NUM, 2, 12),
        col_len("s", T::MYSQL_TYPE_VAR_STRING, NOT_NULL | PRI_KEY, 0, 40),
    ];
    let b = vec![
        col_len("d", T::MYSQL_TYPE_NEWDECIMAL, BINARY | NUM, 2, 14),
        col_len("s", T::MYSQL_TYPE_VAR_STRING, NOT_NULL, 0, 80),
    ];
    let m = merge_columns(&[a.clone(), b.clone(), a.clone()]).unwrap();
    assert_eq!((m[0].length, m[1].length), (14, 80));
    assert_eq!(m[1].flags.bits(), NOT_NULL);
    // The packet the client gets says the same.
    for c in &m {
        let again = parse_column(&c.raw).unwrap();
        assert_eq!((again.length, again.flags), (c.length, c.flags));
        assert_eq!(again.name, c.name);
    }
    // Nothing differs: the first shard's definitions, byte for byte.
    assert_eq!(merge_columns(&[a.clone(), a.clone()]).unwrap(), a);
}

#[test]
fn shards_that_disagree_on_how_values_read_are_not_merged() {
    let base = || vec![col_len("d", T::MYSQL_TYPE_NEWDECIMAL, 0, 2, 12)];
    for other in [
        col_len("d", T::MYSQL_TYPE_NEWDECIMAL, 0, 3, 12),
        col_len("d", T::MYSQL_TYPE_DOUBLE, 0, 2, 12),
        col_len("d", T::MYSQL_TYPE_NEWDECIMAL, UNSIGNED, 2, 12),
        col_len("e", T::MYSQL_TYPE_NEWDECIMAL, 0, 2, 12),
    ] {
        assert!(
            merge_columns(&[base(), vec![other.clone()]]).is_none(),
            "{other:?}"
        );
    }
    assert!(merge_columns(&[base(), vec![]]).is_none());
    assert!(merge_columns(&[base(), [base(), base()].concat()]).is_none());
    let mut latin1 = varchar();
    latin1.charset = 8;
    assert!(merge_columns(&[vec![varchar()], vec![latin1]]).is_none());
}

/// MariaDB flags COUNT/SUM BINARY over a shard without rows (a const table found empty) and not
/// where rows are read: numbers merge, with the flag only where every shard has it; a string's
/// BINARY (bytes, not text) still must agree.
#[test]
fn binary_on_a_number_merges_and_on_a_string_does_not() {
    const NOT_NULL: u16 = 1;
    let count = |flags| col_len("COUNT(*)", T::MYSQL_TYPE_LONGLONG, flags, 0, 21);
    let merged = merge_columns(&[
        vec![count(NOT_NULL)],
        vec![count(NOT_NULL | BINARY)],
        vec![count(NOT_NULL)],
    ])
    .expect("a BINARY number merges");
    assert_eq!(merged[0].flags.bits(), NOT_NULL);
    assert_eq!(parse_column(&merged[0].raw).unwrap().flags.bits(), NOT_NULL);
    let all = merge_columns(&[vec![count(BINARY)], vec![count(BINARY)]]).unwrap();
    assert_eq!(all[0].flags.bits(), BINARY);
    assert!(merge_columns(&[vec![varchar()], vec![varchar_bin()]]).is_none());
}

/// A string's decimals is 0 or NOT_FIXED_DEC (39) as MariaDB's plan goes, not a scale: the
/// definitions below are MariaDB 10.11's, captured from the shards of a prepared
/// `SELECT credit, AVG(debit), .., MAX(account) FROM ledger WHERE .. GROUP BY credit` (account
/// VARCHAR(16) utf8mb4, credit and debit DECIMAL(12,2)). Datanode 0 read two tables as one
/// UNION ALL inside a transaction, its definitions from a COM_STMT_PREPARE of the first arm:
/// MAX(account) with decimals 39; datanode 5 executed the statement alone and, grouping
/// through a temporary table, said 0, as one MariaDB with every row does. They merge, to 0;
/// a number's decimals still must agree.
#[test]
fn a_string_merges_whatever_decimals_the_plan_gave_it() {
    #[rustfmt::skip]
    let max_union: &[u8] = &[
        0x03, 0x64, 0x65, 0x66, 0x00, 0x00, 0x00, 0x0c, 0x4d, 0x41, 0x58, 0x28, 0x61, 0x63,
        0x63, 0x6f, 0x75, 0x6e, 0x74, 0x29, 0x00, 0x0c, 0x2d, 0x00, 0x40, 0x00, 0x00, 0x00,
        0xfd, 0x00, 0x00, 0x27, 0x00, 0x00,
    ];
    #[rustfmt::skip]
    let max_alone: &[u8] = &[
        0x03, 0x64, 0x65, 0x66, 0x00, 0x00, 0x00, 0x0c, 0x4d, 0x41, 0x58, 0x28, 0x61, 0x63,
        0x63, 0x6f, 0x75, 0x6e, 0x74, 0x29, 0x00, 0x0c, 0x2d, 0x00, 0x40, 0x00, 0x00, 0x00,
        0xfd, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    // AVG(debit): the union's without BINARY, the lone statement's with it (both decimals 6).
    #[rustfmt::skip]
    let avg_union: &[u8] = &[
        0x03, 0x64, 0x65, 0x66, 0x00, 0x00, 0x00, 0x0a, 0x41, 0x56, 0x47, 0x28, 0x64, 0x65,
        0x62, 0x69, 0x74, 0x29, 0x00, 0x0c, 0x3f, 0x00, 0x12, 0x00, 0x00, 0x00, 0xf6, 0x00,
        0x00, 0x06, 0x00, 0x00,
    ];
    #[rustfmt::skip]
    let avg_alone: &[u8] = &[
        0x03, 0x64, 0x65, 0x66, 0x00, 0x00, 0x00, 0x0a, 0x41, 0x56, 0x47, 0x28, 0x64, 0x65,
        0x62, 0x69, 0x74, 0x29, 0x00, 0x0c, 0x3f, 0x00, 0x12, 0x00, 0x00, 0x00, 0xf6, 0x80,
        0x00, 0x06, 0x00, 0x00,
    ];
    let parse = |raw: &[u8]| parse_column(raw).unwrap();
    let union = vec![parse(avg_union), parse(max_union)];
    let alone = vec![parse(avg_alone), parse(max_alone)];
    assert_eq!((union[1].decimals, alone[1].decimals), (39, 0));
    for shards in [
        [union.clone(), alone.clone()],
        [alone.clone(), union.clone()],
    ] {
        let merged = merge_columns(&shards).expect("the shards' definitions merge");
        assert_eq!(
            merged[1].raw, max_alone,
            "MAX(account) as one MariaDB describes it"
        );
        assert_eq!(merged[1].decimals, 0);
        assert_eq!(
            merged[0].raw, avg_union,
            "AVG(debit) with the flags both shards have"
        );
    }
    assert_eq!(
        merge_columns(&[union.clone(), union.clone()]).unwrap(),
        union
    );
    // A DECIMAL's decimals is its scale: shards that disagree on it are not merged.
    let mut avg_scale_4 = avg_alone.to_vec();
    avg_scale_4[29] = 4;
    assert!(merge_columns(&[union.clone(), vec![parse(&avg_scale_4), alone[1].clone()]]).is_none());
}

/// Sorted group streams where a shard's stream unions several tables' partial groups (a
/// table-per-shard datanode inside a transaction): equal keys of its arms arrive adjacent and
/// fold; the same stream from a one-table shard fails the order check; a string expression as
/// the key of such a stream is refused (its grouping collation cannot be checked).
#[test]
fn sorted_groups_fold_the_adjacent_keys_of_a_union_stream() {
    let spec = MergeSpec {
        aggregate: Some(agg(
            &[C::At(0)],
            &[(C::At(1), Fold::SumCounts), (C::At(2), Fold::Sum)],
        )),
        groups_sorted: true,
        ..MergeSpec::default()
    };
    let cols = || vec![int(), count_col(), decimal(2)];
    let shards = [
        vec![
            vec![None, Some("1"), Some("1.00")],
            vec![None, Some("2"), None],
            vec![Some("1"), Some("2"), Some("2.50")],
            vec![Some("1"), Some("1"), Some("0.50")],
            vec![Some("3"), Some("1"), Some("1.00")],
        ],
        vec![
            vec![Some("1"), Some("4"), Some("1.00")],
            vec![Some("2"), Some("1"), Some("7.00")],
        ],
    ];
    let run = |arms: &[usize], cols: Vec<Column>, p| -> Result<Vec<Vec<Option<String>>>> {
        let mut m = Merger::new(&spec, cols.clone(), shards.len(), p)?.arms(arms)?;
        let mut pos = vec![0; shards.len()];
        let mut out = Vec::new();
        loop {
            match m.next()? {
                Step::Need(s) => match shards[s].get(pos[s]) {
                    Some(vals) => {
                        pos[s] += 1;
                        m.feed_row(s, row(&cols, vals, p))?;
                    }
                    None => m.feed_end(s),
                },
                Step::Row(r) => out.push(decode(&cols, &r, p)),
                Step::Done => return Ok(out),
            }
        }
    };
    let want = rows(&[
        &[None, Some("3"), Some("1.00")],
        &[Some("1"), Some("7"), Some("4.00")],
        &[Some("2"), Some("1"), Some("7.00")],
        &[Some("3"), Some("1"), Some("1.00")],
    ]);
    for p in BOTH {
        assert_eq!(run(&[2, 1], cols(), p).unwrap(), want, "{p:?}");
        let e = run(&[1, 1], cols(), p).unwrap_err();
        assert!(e.to_string().contains("not in the order"), "{e}");
        let e = run(&[2, 1], vec![varchar(), count_col(), decimal(2)], p).unwrap_err();
        assert!(e.to_string().contains("string expression"), "{e}");
    }
}
