use std::ops::Bound::{self, Excluded, Included, Unbounded};

use super::*;
use crate::config::RuleConfig;
use crate::error::codes;

fn rule(yaml: &str, shards: usize) -> ShardRule {
    let cfg: RuleConfig = serde_saphyr::from_str(yaml).unwrap();
    ShardRule::build(&cfg, shards).unwrap()
}

fn build_err(yaml: &str, shards: usize) -> String {
    let cfg: RuleConfig = serde_saphyr::from_str(yaml).unwrap();
    ShardRule::build(&cfg, shards).unwrap_err().to_string()
}

use ShardValue::{Decimal, Double, Int, Null, Str};

fn r(rule: &ShardRule, v: ShardValue) -> usize {
    rule.route(&v).unwrap_or_else(|e| panic!("{v}: {e}"))
}

fn rr(rule: &ShardRule, lo: Bound<ShardValue>, hi: Bound<ShardValue>) -> Option<Vec<usize>> {
    rule.route_range(lo.as_ref(), hi.as_ref())
}

#[test]
fn mod_rule() {
    let m = rule("{name: m, algorithm: mod}", 4);
    assert_eq!(m.shard_count(), 4);
    assert_eq!(m.algorithm(), Algorithm::Mod);
    assert_eq!(r(&m, Int(0)), 0);
    assert_eq!(r(&m, Int(7)), 3);
    // Euclidean: negatives never give a negative index.
    assert_eq!(r(&m, Int(-1)), 3);
    assert_eq!(r(&m, Int(-4)), 0);
    assert_eq!(r(&m, Int(-5)), 3);
    assert_eq!(r(&m, Int(i64::MIN.into())), 0);
    assert_eq!(r(&m, Int(i64::MAX.into())), 3);
    assert_eq!(r(&m, Int(u64::MAX.into())), 3);
    // Numeric strings and decimals route like the integer MariaDB stores for them (verified on
    // MariaDB 10.11: exact values and strings round half away from zero, DOUBLEs half to even).
    assert_eq!(r(&m, Str("42")), r(&m, Int(42)));
    assert_eq!(r(&m, Str(" 042 ")), r(&m, Int(42)));
    assert_eq!(r(&m, Decimal("42.00")), r(&m, Int(42)));
    assert_eq!(r(&m, Decimal("42.5")), r(&m, Int(43)));
    assert_eq!(r(&m, Decimal("42.49")), r(&m, Int(42)));
    assert_eq!(r(&m, Decimal("-0.5")), r(&m, Int(-1)));
    assert_eq!(r(&m, Decimal("-0.4")), r(&m, Int(0)));
    assert_eq!(r(&m, Str("4.5")), r(&m, Int(5)));
    assert_eq!(r(&m, Str("2.5e0")), r(&m, Int(3)));
    assert_eq!(r(&m, Double(2.5)), r(&m, Int(2)));
    assert_eq!(r(&m, Double(3.5)), r(&m, Int(4)));
    assert_eq!(r(&m, Double(-2.5)), r(&m, Int(-2)));
    assert_eq!(
        r(&m, Double(9007199254740993.0)),
        r(&m, Int(9007199254740992))
    );
    // Out of every integer column's range, or not a clean number: MariaDB rejects or truncates.
    assert!(m.route(&Str("1e30")).is_err());
    assert!(m.route(&Int(i128::from(u64::MAX) + 1)).is_err());
    assert!(m.route(&Str("4.5x")).is_err());
    assert!(m.route(&Str("")).is_err());
    // NULL: shard 0 by default.
    assert_eq!(r(&m, Null), 0);
    let e = m.route(&Str("abc")).unwrap_err();
    assert_eq!((e.code(), e.sqlstate()), codes::ER_TRUNCATED_WRONG_VALUE);
    assert_eq!(m.route_range(Included(&Int(1)), Included(&Int(2))), None);
}

#[test]
fn null_policy() {
    let m = rule("{name: m, algorithm: mod, null_shard: 2}", 4);
    assert_eq!(r(&m, Null), 2);
    let m = rule("{name: m, algorithm: hash, null_shard: error}", 4);
    let e = m.route(&Null).unwrap_err();
    assert_eq!(
        (e.code(), e.sqlstate()),
        codes::ER_NO_PARTITION_FOR_GIVEN_VALUE
    );
    assert!(e.message().contains("NULL"), "{e}");
    assert!(build_err("{name: m, algorithm: mod, null_shard: 4}", 4).contains("null_shard"));
}

#[test]
fn hash_rule_integers() {
    let h = rule("{name: h, algorithm: hash}", 4);
    // Pinned: hash_int is fmix64 of the value's low 64 bits.
    let got: Vec<usize> = (0..10).map(|i| r(&h, Int(i))).collect();
    assert_eq!(got, [0, 0, 3, 2, 1, 1, 3, 1, 3, 1]);
    assert_eq!(r(&h, Str("7")), r(&h, Int(7)));
    assert_eq!(r(&h, Str("+7 ")), r(&h, Int(7)));
    assert_eq!(r(&h, Decimal("7.0")), r(&h, Int(7)));
    for v in [i64::MIN as i128, -1, i64::MAX as i128, u64::MAX as i128] {
        assert!(r(&h, Int(v)) < 4);
    }
    assert!(h.route(&Str("abc")).is_err());
    assert_eq!(h.route_range(Unbounded, Included(&Int(2))), None);
    // Roughly even over sequential ids.
    let mut counts = [0; 4];
    for i in 0..40_000 {
        counts[r(&h, Int(i))] += 1;
    }
    assert!(
        counts.iter().all(|&c| (9_000..11_000).contains(&c)),
        "{counts:?}"
    );
}

#[test]
fn hash_rule_strings_are_collation_equal() {
    let h = rule("{name: h, algorithm: hash, key_type: string}", 8);
    let a = r(&h, Str("abc"));
    assert_eq!(r(&h, Str("ABC")), a);
    assert_eq!(r(&h, Str("abc  ")), a);
    assert_eq!(r(&h, Str("aBc ")), a);
    assert_eq!(a, (hash::hash_str("ABC") % 8) as usize);
    assert_eq!(r(&h, Str("Ärger")), r(&h, Str("ärger ")));
    // An integer is stored in a string column as its digits.
    assert_eq!(r(&h, Int(42)), r(&h, Str("42")));
    // A number compared with a string column matches several spellings: any shard.
    assert_eq!(h.route_eq(&Int(42)), None);
    let e = h.route(&Decimal("4.5")).unwrap_err();
    assert_eq!(e.code(), codes::ER_TRUNCATED_WRONG_VALUE.0);
    assert!(r(&h, Str("")) < 8);
}

#[test]
fn consistent_rule() {
    let c = rule("{name: c, algorithm: consistent}", 16);
    assert_eq!(r(&c, Int(42)), 10);
    assert_eq!(r(&c, Str("42")), 10);
    let c = rule("{name: c, algorithm: consistent, key_type: string}", 16);
    assert_eq!(r(&c, Str("Key")), r(&c, Str("key   ")));
    assert_eq!(c.route_range(Unbounded, Unbounded), None);
}

const RANGE: &str = "{name: r, algorithm: range, ranges: [\
    {to: 0, shard: 3}, {from: 0, to: 100, shard: 0}, {from: 100, to: 200, shard: 1}, \
    {from: 300, shard: 2}]}";

#[test]
fn range_rule_route() {
    let g = rule(RANGE, 4);
    assert_eq!(r(&g, Int(-1)), 3);
    assert_eq!(r(&g, Int(i64::MIN.into())), 3);
    assert_eq!(r(&g, Int(0)), 0);
    assert_eq!(r(&g, Int(99)), 0);
    assert_eq!(r(&g, Int(100)), 1);
    assert_eq!(r(&g, Int(199)), 1);
    assert_eq!(r(&g, Int(300)), 2);
    assert_eq!(r(&g, Int(u64::MAX.into())), 2);
    assert_eq!(r(&g, Decimal("99.49")), 0);
    assert_eq!(r(&g, Decimal("99.5")), 1); // stored as 100
    assert_eq!(r(&g, Decimal("-0.5")), 3);
    assert_eq!(r(&g, Decimal("-0.4")), 0); // stored as 0
    assert_eq!(r(&g, Str("150")), 1);
    assert_eq!(r(&g, Null), 0);
    // 200..300 is in no interval and there is no default.
    let e = g.route(&Int(250)).unwrap_err();
    assert_eq!(
        (e.code(), e.sqlstate()),
        codes::ER_NO_PARTITION_FOR_GIVEN_VALUE
    );
    let d = rule(&RANGE.replace("}]}", "}], default: 1}"), 4);
    assert_eq!(r(&d, Int(250)), 1);
}

#[test]
fn range_rule_ranges() {
    let g = rule(RANGE, 4);
    assert_eq!(rr(&g, Included(Int(10)), Included(Int(20))), Some(vec![0]));
    assert_eq!(
        rr(&g, Included(Int(10)), Included(Int(100))),
        Some(vec![0, 1])
    );
    assert_eq!(rr(&g, Included(Int(10)), Excluded(Int(100))), Some(vec![0]));
    assert_eq!(rr(&g, Excluded(Int(99)), Included(Int(150))), Some(vec![1]));
    assert_eq!(
        rr(&g, Included(Int(99)), Included(Int(150))),
        Some(vec![0, 1])
    );
    assert_eq!(
        rr(&g, Included(Int(-5)), Included(Int(5))),
        Some(vec![0, 3])
    );
    assert_eq!(rr(&g, Unbounded, Excluded(Int(0))), Some(vec![3]));
    assert_eq!(rr(&g, Included(Int(150)), Unbounded), Some(vec![1, 2]));
    assert_eq!(rr(&g, Unbounded, Unbounded), Some(vec![0, 1, 2, 3]));
    // Inside the gap with no default: no shard can hold a value.
    assert_eq!(rr(&g, Included(Int(210)), Included(Int(290))), Some(vec![]));
    // Empty ranges.
    assert_eq!(rr(&g, Included(Int(20)), Included(Int(10))), Some(vec![]));
    assert_eq!(rr(&g, Excluded(Int(10)), Excluded(Int(11))), Some(vec![]));
    // Fractional bounds on an integer key.
    assert_eq!(
        rr(&g, Included(Decimal("99.5")), Included(Int(150))),
        Some(vec![1])
    );
    assert_eq!(
        rr(&g, Included(Int(10)), Included(Decimal("99.9"))),
        Some(vec![0])
    );
    assert_eq!(
        rr(&g, Included(Str("10")), Included(Str("100"))),
        Some(vec![0, 1])
    );
    // Unreadable bounds scatter.
    assert_eq!(rr(&g, Included(Null), Included(Int(5))), None);
    assert_eq!(rr(&g, Included(Str("x")), Included(Int(5))), None);
    // With a default, a range over the gap includes it.
    let d = rule(&RANGE.replace("}]}", "}], default: 1}"), 4);
    assert_eq!(
        rr(&d, Included(Int(150)), Included(Int(350))),
        Some(vec![1, 2])
    );
    assert_eq!(
        rr(&d, Included(Int(210)), Included(Int(220))),
        Some(vec![1])
    );
    let d = rule(&RANGE.replace("}]}", "}], default: 3}"), 4);
    assert_eq!(
        rr(&d, Included(Int(150)), Included(Int(350))),
        Some(vec![1, 2, 3])
    );
    assert_eq!(rr(&d, Included(Int(10)), Included(Int(20))), Some(vec![0]));
}

#[test]
fn range_rule_decimal_keys() {
    let g = rule(
        "{name: r, algorithm: range, key_type: decimal, ranges: [{to: 100, shard: 0}, {from: 100, shard: 1}]}",
        2,
    );
    // x > 99 on a DECIMAL column includes 99.5, which is on shard 0.
    assert_eq!(rr(&g, Excluded(Int(99)), Unbounded), Some(vec![0, 1]));
    assert_eq!(rr(&g, Included(Int(100)), Unbounded), Some(vec![1]));
    assert_eq!(rr(&g, Unbounded, Excluded(Int(100))), Some(vec![0]));
    assert_eq!(rr(&g, Unbounded, Included(Decimal("99.99"))), Some(vec![0]));
    // Where 99.99 is stored depends on the column's scale (DECIMAL(5,1) stores 100.0).
    assert!(g.route(&Decimal("99.99")).is_err());
    assert_eq!(r(&g, Decimal("99.49")), 0);
    assert_eq!(r(&g, Decimal("-0.5")), 0);
    let s2 = rule(
        "{name: r, algorithm: range, key_type: decimal, scale: 2, ranges: [{to: 100, shard: 0}, {from: 100, shard: 1}]}",
        2,
    );
    assert_eq!(r(&s2, Decimal("99.99")), 0);
    assert_eq!(r(&s2, Decimal("99.995")), 1);
    assert_eq!(r(&s2, Str("99.995")), 1);
    assert_eq!(r(&s2, Double(99.995)), 1); // shortest digits 99.995, then rounded
    assert_eq!(r(&s2, Double(99.994)), 0);
    assert!(
        build_err(
            "{name: r, algorithm: range, scale: 2, ranges: [{to: 100, shard: 0}]}",
            1
        )
        .contains("scale")
    );
    let i = rule(
        "{name: r, algorithm: range, ranges: [{to: 100, shard: 0}, {from: 100, shard: 1}]}",
        2,
    );
    assert_eq!(rr(&i, Excluded(Int(99)), Unbounded), Some(vec![1]));
}

#[test]
fn range_rule_config_errors() {
    assert!(build_err("{name: r, algorithm: range}", 2).contains("ranges"));
    let e = build_err(
        "{name: r, algorithm: range, ranges: [{from: 0, to: 10, shard: 0}, {from: 5, to: 20, shard: 1}]}",
        2,
    );
    assert!(e.contains("ranges[1]: overlaps ranges[0]"), "{e}");
    let e = build_err(
        "{name: r, algorithm: range, ranges: [{from: 10, to: 10, shard: 0}]}",
        2,
    );
    assert!(e.contains("ranges[0]: empty interval"), "{e}");
    let e = build_err(
        "{name: r, algorithm: range, ranges: [{from: 0, shard: 5}]}",
        2,
    );
    assert!(e.contains("ranges[0].shard"), "{e}");
    let e = build_err(
        "{name: r, algorithm: range, ranges: [{from: x, shard: 0}]}",
        2,
    );
    assert!(e.contains("ranges[0].from"), "{e}");
    let e = build_err(
        "{name: r, algorithm: mod, ranges: [{from: 0, shard: 0}]}",
        2,
    );
    assert!(
        e.contains("ranges: not a parameter of the mod algorithm"),
        "{e}"
    );
    let e = build_err("{name: r, algorithm: mod, shards: 3}", 2);
    assert!(
        e.contains("the rule says 3 shards but the table has 2"),
        "{e}"
    );
    let e = build_err("{name: r, algorithm: mod, key_type: string}", 2);
    assert!(e.contains("key_type"), "{e}");
}

const QUARTER: &str = "{name: d, algorithm: date, start: 2024-01-01, unit: month, interval: 3}";

#[test]
fn date_rule_route() {
    let d = rule(QUARTER, 4);
    assert_eq!(r(&d, Str("2024-01-01")), 0);
    assert_eq!(r(&d, Str("2024-03-31 23:59:59")), 0);
    assert_eq!(r(&d, Str("2024-04-01")), 1);
    assert_eq!(r(&d, Str("2024-12-31")), 3);
    assert_eq!(r(&d, Null), 0);
    let e = d.route(&Str("2023-12-31")).unwrap_err();
    assert_eq!(
        (e.code(), e.sqlstate()),
        codes::ER_NO_PARTITION_FOR_GIVEN_VALUE
    );
    assert!(e.message().contains("before"), "{e}");
    assert!(
        d.route(&Str("2025-01-01"))
            .unwrap_err()
            .message()
            .contains("after")
    );
    let e = d.route(&Str("2024-02-30")).unwrap_err();
    assert_eq!((e.code(), e.sqlstate()), codes::ER_TRUNCATED_WRONG_VALUE);
    // A number YYYYMMDD is a date to a DATE column (as MariaDB stores it).
    assert_eq!(r(&d, Int(20240101)), r(&d, Str("2024-01-01")));
    assert!(d.route(&Int(2024)).is_err());
    let dd = rule(&QUARTER.replace('}', ", default: 0}"), 4);
    assert_eq!(r(&dd, Str("2023-12-31")), 0);
    assert_eq!(r(&dd, Str("2031-06-01")), 0);

    let day = rule(
        "{name: d, algorithm: date, start: 2024-02-27, unit: day}",
        5,
    );
    assert_eq!(r(&day, Str("2024-02-29")), 2); // leap day
    assert_eq!(r(&day, Str("2024-03-02 12:00:00")), 4);
    let week = rule(
        "{name: d, algorithm: date, start: 2024-01-01, unit: week, interval: 2}",
        4,
    );
    assert_eq!(r(&week, Str("2024-01-14")), 0);
    assert_eq!(r(&week, Str("2024-01-15")), 1);
    let year = rule(
        "{name: d, algorithm: date, start: 2020-01-01, unit: year}",
        10,
    );
    assert_eq!(r(&year, Str("2029-12-31 23:59:59")), 9);
}

#[test]
fn date_rule_ranges() {
    let d = rule(QUARTER, 4);
    let s = |x: &'static str| Str(x);
    // The classic month scan: >= first day, < first day of the next month.
    assert_eq!(
        rr(&d, Included(s("2024-04-01")), Excluded(s("2024-07-01"))),
        Some(vec![1])
    );
    assert_eq!(
        rr(&d, Included(s("2024-04-01")), Included(s("2024-07-01"))),
        Some(vec![1, 2])
    );
    // An exclusive upper bound with a time keeps its day.
    assert_eq!(
        rr(
            &d,
            Included(s("2024-04-01")),
            Excluded(s("2024-07-01 00:00:01"))
        ),
        Some(vec![1, 2])
    );
    // An exclusive lower bound keeps its day (DATETIME values later that day are greater).
    assert_eq!(
        rr(&d, Excluded(s("2024-03-31")), Included(s("2024-04-02"))),
        Some(vec![0, 1])
    );
    assert_eq!(rr(&d, Unbounded, Excluded(s("2024-04-01"))), Some(vec![0]));
    assert_eq!(rr(&d, Included(s("2024-11-01")), Unbounded), Some(vec![3]));
    assert_eq!(
        rr(&d, Included(s("2020-01-01")), Included(s("2030-01-01"))),
        Some(vec![0, 1, 2, 3])
    );
    assert_eq!(
        rr(&d, Included(s("2024-06-01")), Included(s("2024-05-01"))),
        Some(vec![])
    );
    assert_eq!(rr(&d, Included(s("2025-06-01")), Unbounded), Some(vec![]));
    assert_eq!(rr(&d, Included(s("bad")), Unbounded), None);
    assert_eq!(rr(&d, Included(Int(1)), Unbounded), None);
    let dd = rule(&QUARTER.replace('}', ", default: 2}"), 4);
    assert_eq!(
        rr(&dd, Included(s("2023-01-01")), Included(s("2024-01-05"))),
        Some(vec![0, 2])
    );
    assert_eq!(rr(&dd, Included(s("2025-06-01")), Unbounded), Some(vec![2]));
}

#[test]
fn date_rule_config_errors() {
    assert!(build_err("{name: d, algorithm: date, unit: day}", 2).contains("start"));
    assert!(build_err("{name: d, algorithm: date, start: 2024-01-01}", 2).contains("unit"));
    assert!(
        build_err(
            "{name: d, algorithm: date, start: 2024-01-15, unit: month}",
            2
        )
        .contains("1st")
    );
    assert!(
        build_err(
            "{name: d, algorithm: date, start: 2024-03-01, unit: year}",
            2
        )
        .contains("January")
    );
    assert!(
        build_err(
            "{name: d, algorithm: date, start: 2024-02-30, unit: day}",
            2
        )
        .contains("start")
    );
    assert!(
        build_err(
            "{name: d, algorithm: date, start: 2024-01-01, unit: day, interval: 0}",
            2
        )
        .contains("interval")
    );
    assert!(
        build_err(
            "{name: d, algorithm: date, start: 2024-01-01, unit: day, default: 2}",
            2
        )
        .contains("default")
    );
}

#[test]
fn list_rule_strings() {
    let l = rule(
        "{name: l, algorithm: list, values: [{shard: 0, values: [Paris, lyon]}, {shard: 1, values: [berlin, 10]}], default: 2}",
        3,
    );
    assert_eq!(r(&l, Str("paris")), 0);
    assert_eq!(r(&l, Str("PARIS  ")), 0);
    assert_eq!(r(&l, Str("Lyon")), 0);
    assert_eq!(r(&l, Str("berlin")), 1);
    assert_eq!(r(&l, Str("10")), 1);
    assert_eq!(r(&l, Str("rome")), 2);
    assert_eq!(r(&l, Str(" paris")), 2); // leading spaces matter
    assert_eq!(r(&l, Null), 0);
    assert_eq!(r(&l, Int(10)), 1); // stored as '10'
    assert_eq!(l.route_eq(&Int(10)), None); // matches '10', '010', ' 10', ...
    assert_eq!(
        l.route_range(Included(&Str("a")), Included(&Str("z"))),
        None
    );
}

#[test]
fn list_rule_integers() {
    let l = rule(
        "{name: l, algorithm: list, values: [{shard: 0, values: [1, 2, 3]}, {shard: 1, values: [4, '5']}, {shard: 2, values: [-1]}]}",
        3,
    );
    assert_eq!(r(&l, Int(2)), 0);
    assert_eq!(r(&l, Int(5)), 1);
    assert_eq!(r(&l, Str("05")), 1);
    assert_eq!(r(&l, Decimal("4.0")), 1);
    assert_eq!(r(&l, Int(-1)), 2);
    assert!(l.route(&Int(6)).is_err());
    assert_eq!(r(&l, Decimal("4.5")), 1); // stored as 5
    assert_eq!(l.route_eq(&Decimal("4.5")), Some(vec![])); // equals no integer
    assert_eq!(rr(&l, Included(Int(1)), Included(Int(3))), Some(vec![0]));
    assert_eq!(rr(&l, Included(Int(3)), Included(Int(4))), Some(vec![0, 1]));
    assert_eq!(rr(&l, Excluded(Int(3)), Unbounded), Some(vec![1]));
    assert_eq!(rr(&l, Unbounded, Unbounded), Some(vec![0, 1, 2]));
    let ld = rule(
        "{name: l, algorithm: list, values: [{shard: 0, values: [1, 2, 3]}, {shard: 1, values: [4]}], default: 2}",
        3,
    );
    // 1..=3 is fully listed; 1..=5 holds an unlisted 5 (default shard).
    assert_eq!(rr(&ld, Included(Int(1)), Included(Int(3))), Some(vec![0]));
    assert_eq!(
        rr(&ld, Included(Int(1)), Included(Int(5))),
        Some(vec![0, 1, 2])
    );
    assert_eq!(rr(&ld, Included(Int(10)), Unbounded), Some(vec![2]));
}

#[test]
fn list_rule_config_errors() {
    let e = build_err(
        "{name: l, algorithm: list, values: [{shard: 0, values: [a, B]}, {shard: 1, values: ['b ']}]}",
        2,
    );
    assert!(
        e.contains("values[1].values[0]") && e.contains("listed twice"),
        "{e}"
    );
    let e = build_err(
        "{name: l, algorithm: list, values: [{shard: 0, values: [1, '01']}]}",
        2,
    );
    assert!(e.contains("listed twice"), "{e}");
    let e = build_err(
        "{name: l, algorithm: list, key_type: integer, values: [{shard: 0, values: [x]}]}",
        2,
    );
    assert!(e.contains("not an integer"), "{e}");
    let e = build_err(
        "{name: l, algorithm: list, values: [{shard: 3, values: [x]}]}",
        2,
    );
    assert!(e.contains("values[0].shard"), "{e}");
    assert!(build_err("{name: l, algorithm: list}", 2).contains("values"));
}

#[test]
fn values_display_as_sql() {
    assert_eq!(Str("it's").to_string(), "'it''s'");
    assert_eq!(Int(-3).to_string(), "-3");
    assert_eq!(Null.to_string(), "NULL");
    assert_eq!(Decimal("1.50").to_string(), "1.50");
}

#[test]
fn string_collations() {
    let g = rule("{name: h, algorithm: hash, key_type: string}", 4);
    assert_eq!(r(&g, Str("abc")), 1); // pinned: fmix64(fnv1a64("ABC")) % 4
    assert_eq!(r(&g, Str("Café")), r(&g, Str("CAFE ")));
    assert_eq!(r(&g, Str("straße")), r(&g, Str("STRASE")));
    let b = rule(
        "{name: h, algorithm: consistent, key_type: string, collation: bin}",
        64,
    );
    assert_eq!(r(&b, Str("abc  ")), r(&b, Str("abc")));
    assert_eq!(
        r(&b, Str("abc")),
        hash::jump_consistent(hash::hash_str("abc"), 64)
    );
    let x = rule(
        "{name: h, algorithm: hash, key_type: string, collation: binary}",
        1024,
    );
    assert_eq!(
        r(&x, Str("abc  ")),
        (hash::hash_str("abc  ") % 1024) as usize
    );
    let l = rule(
        "{name: l, algorithm: list, collation: bin, values: [{shard: 0, values: [abc]}, {shard: 1, values: [ABC]}]}",
        2,
    );
    assert_eq!(r(&l, Str("abc ")), 0);
    assert_eq!(r(&l, Str("ABC")), 1);
    let e = build_err("{name: h, algorithm: hash, collation: bin}", 2);
    assert!(e.contains("collation: only string keys"), "{e}");
    let e = build_err("{name: h, algorithm: mod, collation: bin}", 2);
    assert!(e.contains("collation"), "{e}");
    let e = build_err(
        "{name: l, algorithm: list, key_type: integer, collation: bin, values: [{shard: 0, values: [1]}]}",
        2,
    );
    assert!(e.contains("collation"), "{e}");
}

#[test]
fn date_exclusive_lower_bound_keeps_fractional_seconds() {
    // DATETIME(6) '2024-01-02 23:59:59.5' > '2024-01-02 23:59:59': the day still counts.
    let d = rule(
        "{name: d, algorithm: date, start: 2024-01-01, unit: day}",
        10,
    );
    assert_eq!(
        rr(
            &d,
            Excluded(Str("2024-01-02 23:59:59")),
            Included(Str("2024-01-03"))
        ),
        Some(vec![1, 2])
    );
}

/// MariaDB compares an integer column with a DOUBLE (or a string) as doubles: every integer that
/// converts to the same double matches (checked on MariaDB 10.11: `k IN (9007199254740993e0)`
/// matches 9007199254740992 and 9007199254740993).
#[test]
fn doubles_compare_as_doubles() {
    let m = rule("{name: m, algorithm: mod}", 4);
    // 9007199254740992 and 9007199254740993 (ties to even) both convert to 2^53.
    assert_eq!(m.route_eq(&Double(9007199254740993.0)), Some(vec![0, 1]));
    assert_eq!(m.route_eq(&Str("9007199254740993")), Some(vec![0, 1]));
    assert_eq!(m.route_eq(&Double(9007199254740994.0)), Some(vec![2]));
    let h = rule("{name: h, algorithm: hash}", 4);
    let both: Vec<usize> = {
        let mut v = vec![r(&h, Int(9007199254740992)), r(&h, Int(9007199254740993))];
        v.sort_unstable();
        v.dedup();
        v
    };
    assert!(
        both.iter()
            .all(|s| h.route_eq(&Double(9007199254740992.0)).unwrap().contains(s))
    );
    assert_eq!(m.route_eq(&Double(4.0)), Some(vec![0]));
    assert_eq!(m.route_eq(&Double(4.5)), Some(vec![]));
    assert_eq!(m.route_eq(&Str("4.5")), Some(vec![]));
    assert_eq!(m.route_eq(&Str(" 5 ")), Some(vec![1]));
    assert_eq!(m.route_eq(&Str("5abc")), None);
    let g = rule(RANGE, 4);
    assert_eq!(g.route_eq(&Str("1e2")), Some(vec![1]));
    assert_eq!(
        g.route_range(Included(&Double(99.5)), Unbounded),
        g.route_range(Included(&Int(100)), Unbounded)
    );
    assert_eq!(
        g.route_range(Unbounded, Excluded(&Str("99.5"))),
        g.route_range(Unbounded, Included(&Int(99)))
    );
}

/// Every kind of rule offers a value it places (a prepared INSERT's PREPARE plans with it),
/// including those that place neither `0` nor `'0'`.
#[test]
fn sample_values_are_placed() {
    use crate::sql::stmt::Literal;
    let date = rule(
        "{name: d, algorithm: date, start: 2024-01-01, unit: month, interval: 3}",
        4,
    );
    assert_eq!(date.sample_value(), Some(Literal::Str("2024-01-01".into())));
    let range = rule(
        "{name: r, algorithm: range, ranges: [{from: 1000, to: 2000, shard: 0}, {from: 2000, shard: 1}]}",
        2,
    );
    assert_eq!(range.sample_value(), Some(Literal::Int(1000)));
    let list = rule(
        "{name: l, algorithm: list, values: [{shard: 0, values: [paris]}, {shard: 1, values: [rome]}]}",
        2,
    );
    let v = list.sample_value().expect("a listed value");
    assert!(
        list.route(&crate::plan::shard_value_of(&v)).is_ok(),
        "{v:?}"
    );
    let m = rule("{name: m, algorithm: mod}", 4);
    assert_eq!(m.sample_value(), Some(Literal::Int(0)));
}
