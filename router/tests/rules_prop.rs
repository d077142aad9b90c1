//! Property tests of the shard rules: every value routes to exactly one configured shard; an IN
//! list routes to the union of its members' shards; a range on range/date/list rules never misses
//! the shard of a value inside it.

use std::collections::BTreeSet;
use std::ops::Bound::{Excluded, Included, Unbounded};

use proptest::prelude::*;
use shoal_router::config::Config;
use shoal_router::rule::{ShardRule, ShardValue};

fn build(rule_yaml: &str, shards: usize) -> ShardRule {
    let cfg = Config::from_yaml_str(&format!("rules:\n  - {rule_yaml}\n"))
        .unwrap_or_else(|e| panic!("{rule_yaml}: {e}"));
    ShardRule::build(&cfg.rules[0], shards).unwrap_or_else(|e| panic!("{rule_yaml}: {e}"))
}

fn int_value() -> impl Strategy<Value = i128> {
    prop_oneof![
        (-1000i128..1000),
        any::<i64>().prop_map(i128::from),
        any::<u64>().prop_map(i128::from),
        Just(i128::from(i64::MIN)),
        Just(i128::from(i64::MAX)),
        Just(i128::from(u64::MAX)),
    ]
}

/// An integer shard key value written as an integer, a numeric string or a decimal.
fn int_spelling(v: i128) -> impl Strategy<Value = (String, u8)> {
    (Just(v), 0u8..4).prop_map(|(v, k)| (v.to_string(), k))
}

fn spell(text: &str, k: u8) -> ShardValue<'_> {
    match k {
        0 => ShardValue::Int(text.parse().unwrap()),
        1 | 2 => ShardValue::Str(text),
        _ => ShardValue::Decimal(text),
    }
}

fn integer_rule() -> impl Strategy<Value = (String, usize)> {
    (1usize..=64, 0u8..3).prop_map(|(n, alg)| {
        let a = ["mod", "hash", "consistent"][alg as usize];
        (format!("{{name: r, algorithm: {a}}}"), n)
    })
}

/// A range rule over sorted cut points, some intervals left out, with or without a default.
fn range_rule() -> impl Strategy<Value = (String, usize)> {
    (
        proptest::collection::btree_set(-5000i64..5000, 1..8),
        proptest::collection::vec((any::<bool>(), 0usize..8), 9),
        any::<bool>(),
        any::<bool>(),
        1usize..=8,
        prop::option::of(0usize..8),
    )
        .prop_map(|(cuts, picks, open_lo, open_hi, n, default)| {
            let cuts: Vec<i64> = cuts.into_iter().collect();
            let mut ranges = Vec::new();
            let mut bounds: Vec<(Option<i64>, Option<i64>)> = Vec::new();
            if open_lo {
                bounds.push((None, Some(cuts[0])));
            }
            for w in cuts.windows(2) {
                bounds.push((Some(w[0]), Some(w[1])));
            }
            if open_hi || bounds.is_empty() {
                bounds.push((Some(*cuts.last().unwrap()), None));
            }
            for (i, (from, to)) in bounds.iter().enumerate() {
                let (keep, shard) = picks[i % picks.len()];
                if !keep && i > 0 {
                    continue;
                }
                let mut r = String::from("{");
                if let Some(f) = from {
                    r += &format!("from: {f}, ");
                }
                if let Some(t) = to {
                    r += &format!("to: {t}, ");
                }
                r += &format!("shard: {}}}", shard % n);
                ranges.push(r);
            }
            let mut y = format!(
                "{{name: r, algorithm: range, ranges: [{}]",
                ranges.join(", ")
            );
            if let Some(d) = default {
                y += &format!(", default: {}", d % n);
            }
            y += "}";
            (y, n)
        })
}

fn list_rule() -> impl Strategy<Value = (String, usize)> {
    (
        proptest::collection::btree_map(-50i64..50, 0usize..8, 1..20),
        1usize..=8,
        prop::option::of(0usize..8),
    )
        .prop_map(|(map, n, default)| {
            let entries: Vec<String> = map
                .iter()
                .map(|(v, s)| format!("{{shard: {}, values: [{v}]}}", s % n))
                .collect();
            let mut y = format!(
                "{{name: r, algorithm: list, values: [{}]",
                entries.join(", ")
            );
            if let Some(d) = default {
                y += &format!(", default: {}", d % n);
            }
            (y + "}", n)
        })
}

fn date_rule() -> impl Strategy<Value = (String, usize)> {
    (1990i64..2030, 1i64..=12, 1i64..=28, 0u8..4, 1u32..4, 1usize..=24, prop::option::of(0usize..24))
        .prop_map(|(y, m, d, unit, interval, n, default)| {
            let (unit, m, d) = match unit {
                0 => ("day", m, d),
                1 => ("week", m, d),
                2 => ("month", m, 1),
                _ => ("year", 1, 1),
            };
            let mut s = format!(
                "{{name: r, algorithm: date, start: {y:04}-{m:02}-{d:02}, unit: {unit}, interval: {interval}"
            );
            if let Some(x) = default {
                s += &format!(", default: {}", x % n);
            }
            (s + "}", n)
        })
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
}

/// A date rule with an instant near its shards (so ranges meet them) and a range length.
fn date_case() -> impl Strategy<Value = (String, usize, i64, i64)> {
    (1990i64..2030, 1i64..=12, 1i64..=28, 0u8..4, 1i64..4, 1usize..=24, prop::option::of(0usize..24))
        .prop_flat_map(|(y, m, d, unit, interval, n, default)| {
            let (name, m, d, unit_days) = match unit {
                0 => ("day", m, d, 1),
                1 => ("week", m, d, 7),
                2 => ("month", m, 1, 31),
                _ => ("year", 1, 1, 366),
            };
            let mut yaml = format!(
                "{{name: r, algorithm: date, start: {y:04}-{m:02}-{d:02}, unit: {name}, interval: {interval}"
            );
            if let Some(x) = default {
                yaml += &format!(", default: {}", x % n);
            }
            yaml += "}";
            let start = days_from_civil(y, m, d) * 86_400;
            let span = n as i64 * interval * unit_days * 86_400;
            let margin = span / 4 + 30 * 86_400;
            let at = prop_oneof![
                (-margin..span + margin),
                (-margin / 86_400..(span + margin) / 86_400).prop_map(|d| d * 86_400),
                (-margin / 86_400..(span + margin) / 86_400).prop_map(|d| d * 86_400 - 1),
            ];
            let len = prop_oneof![0i64..3 * 86_400, 0..span / 2 + 1];
            (Just(yaml), Just(n), at.prop_map(move |o| start + o), len)
        })
}

/// Seconds since 1970 → `YYYY-MM-DD[ hh:mm:ss]` (midnight written without a time half the time).
fn datetime_text(secs: i64, long: bool) -> String {
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    if tod == 0 && !long {
        format!("{y:04}-{m:02}-{d:02}")
    } else {
        format!(
            "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
            tod / 3600,
            tod / 60 % 60,
            tod % 60
        )
    }
}

/// Seconds in 1985..2045, often exactly at midnight or a month start to hit boundaries.
fn instant() -> impl Strategy<Value = i64> {
    let lo = 473_385_600i64; // 1985-01-01
    let hi = 2_366_841_600i64; // 2045-01-01
    prop_oneof![
        (lo..hi),
        (lo / 86_400..hi / 86_400).prop_map(|d| d * 86_400),
        (lo / 86_400..hi / 86_400).prop_map(|d| d * 86_400 - 1),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn integer_rules_route_every_value_to_one_shard(
        (yaml, n) in integer_rule(),
        (text, k) in int_value().prop_flat_map(int_spelling),
    ) {
        let rule = build(&yaml, n);
        let v = spell(&text, k);
        let s = rule.route(&v).unwrap();
        prop_assert!(s < n);
        // Every spelling of the same number routes the same.
        let i: i128 = text.parse().unwrap();
        prop_assert_eq!(rule.route(&ShardValue::Int(i)).unwrap(), s);
        let padded = format!(" {text}  ");
        prop_assert_eq!(rule.route(&ShardValue::Str(&padded)).unwrap(), s);
        let dec = format!("{text}.000");
        prop_assert_eq!(rule.route(&ShardValue::Decimal(&dec)).unwrap(), s);
        prop_assert!(rule.route(&ShardValue::Null).unwrap() < n);
    }

    #[test]
    fn string_hash_rules_route_collation_equal_strings_together(
        n in 1usize..=64,
        consistent in any::<bool>(),
        s in "[a-zA-Z0-9 _äÄéÉ]{0,12}",
        spaces in 0usize..4,
    ) {
        let a = if consistent { "consistent" } else { "hash" };
        let rule = build(&format!("{{name: r, algorithm: {a}, key_type: string}}"), n);
        let base = rule.route(&ShardValue::Str(&s)).unwrap();
        prop_assert!(base < n);
        let upper = s.to_uppercase();
        let lower = s.to_lowercase();
        let padded = format!("{s}{}", " ".repeat(spaces));
        for variant in [&upper, &lower, &padded] {
            prop_assert_eq!(rule.route(&ShardValue::Str(variant)).unwrap(), base, "{:?} vs {:?}", variant, s);
        }
    }

    #[test]
    fn string_lists_route_every_string_to_one_shard_or_say_why(
        listed in proptest::collection::btree_set("[a-z]{1,4}", 1..10),
        n in 1usize..=8,
        default in prop::option::of(0usize..8),
        probe in "[a-zA-Z ]{0,5}",
    ) {
        let entries: Vec<String> = listed
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{{shard: {}, values: ['{v}']}}", i % n))
            .collect();
        let mut yaml = format!("{{name: r, algorithm: list, key_type: string, values: [{}]", entries.join(", "));
        if let Some(d) = default {
            yaml += &format!(", default: {}", d % n);
        }
        let rule = build(&(yaml + "}"), n);
        match rule.route(&ShardValue::Str(&probe)) {
            Ok(s) => {
                prop_assert!(s < n);
                let key = probe.trim_end_matches(' ').to_lowercase();
                if let Some(i) = listed.iter().position(|v| *v == key) {
                    prop_assert_eq!(s, i % n);
                }
            }
            Err(e) => prop_assert!(default.is_none() && e.message().contains("not listed")),
        }
    }

    #[test]
    fn in_list_routes_to_the_union_of_its_members(
        (yaml, n) in prop_oneof![integer_rule(), range_rule(), list_rule()],
        members in proptest::collection::vec(prop::option::of(-6000i128..6000), 0..12),
    ) {
        let rule = build(&yaml, n);
        let values: Vec<ShardValue> = members
            .iter()
            .map(|m| m.map_or(ShardValue::Null, ShardValue::Int))
            .collect();
        let each: Result<BTreeSet<usize>, _> = values
            .iter()
            .filter(|v| **v != ShardValue::Null)
            .map(|v| rule.route(v))
            .collect();
        match (rule.route_in(&values), each) {
            (Ok(got), Ok(want)) => {
                prop_assert_eq!(got.iter().copied().collect::<BTreeSet<_>>(), want);
                prop_assert!(got.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(got.iter().all(|&s| s < n));
            }
            (Err(_), Err(_)) => {}
            (got, want) => prop_assert!(false, "route_in {:?} but members {:?}", got, want),
        }
    }

    #[test]
    fn range_rules_route_every_integer_to_one_shard_or_say_why(
        (yaml, n) in range_rule(),
        v in int_value(),
    ) {
        let rule = build(&yaml, n);
        match rule.route(&ShardValue::Int(v)) {
            Ok(s) => prop_assert!(s < n),
            Err(e) => prop_assert!(!yaml.contains("default") && e.message().contains("no range holds")),
        }
    }

    #[test]
    fn integer_ranges_never_miss_a_shard(
        (yaml, n) in prop_oneof![range_rule(), list_rule()],
        a in -6000i128..6000,
        len in 0i128..3000,
        probes in proptest::collection::vec(0.0f64..=1.0, 1..16),
        lo_kind in 0u8..3,
        hi_kind in 0u8..3,
    ) {
        let rule = build(&yaml, n);
        let b = a + len;
        let bound = |k: u8, x: &ShardValue<'static>| match k {
            0 => Included(*x),
            1 => Excluded(*x),
            _ => Unbounded,
        };
        let (lo_v, hi_v) = (ShardValue::Int(a), ShardValue::Int(b));
        let lo = bound(lo_kind, &lo_v);
        let hi = bound(hi_kind, &hi_v);
        let shards = rule.route_range(lo.as_ref(), hi.as_ref()).expect("integer range rules narrow");
        prop_assert!(shards.iter().all(|&s| s < n));
        let mut inside: Vec<i128> = probes.iter().map(|p| a + (p * len as f64) as i128).collect();
        inside.extend([a, b, a - 1, b + 1, a - 1000, b + 1000]);
        for v in inside {
            let in_range = match lo { Included(_) => v >= a, Excluded(_) => v > a, Unbounded => true }
                && match hi { Included(_) => v <= b, Excluded(_) => v < b, Unbounded => true };
            if !in_range {
                continue;
            }
            if let Ok(s) = rule.route(&ShardValue::Int(v)) {
                prop_assert!(shards.contains(&s), "{} routes to {} but range gave {:?}", v, s, shards);
            }
        }
    }

    #[test]
    fn decimal_ranges_never_miss_a_shard(
        (yaml, n) in range_rule(),
        a in -600_000i128..600_000,
        len in 0i128..300_000,
        probes in proptest::collection::vec(0.0f64..=1.0, 1..16),
        lo_excl in any::<bool>(),
        hi_excl in any::<bool>(),
    ) {
        // Values in hundredths, written as decimals: exact over fractions with key_type: decimal.
        let yaml = yaml.replacen("algorithm: range", "algorithm: range, key_type: decimal", 1);
        let rule = build(&yaml, n);
        let text = |c: i128| format!("{}{}.{:02}", if c < 0 { "-" } else { "" }, c.abs() / 100, c.abs() % 100);
        let b = a + len;
        let (ta, tb) = (text(a), text(b));
        let (lo_v, hi_v) = (ShardValue::Decimal(&ta), ShardValue::Decimal(&tb));
        let lo = if lo_excl { Excluded(&lo_v) } else { Included(&lo_v) };
        let hi = if hi_excl { Excluded(&hi_v) } else { Included(&hi_v) };
        let shards = rule.route_range(lo, hi).unwrap();
        let mut inside: Vec<i128> = probes.iter().map(|p| a + (p * len as f64) as i128).collect();
        inside.extend([a, b, a + 1, b - 1]);
        for c in inside {
            if (lo_excl && c <= a) || c < a || (hi_excl && c >= b) || c > b {
                continue;
            }
            let t = text(c);
            if let Ok(s) = rule.route(&ShardValue::Decimal(&t)) {
                prop_assert!(shards.contains(&s), "{} routes to {} but range gave {:?}", t, s, shards);
            }
        }
    }

    #[test]
    fn date_rules_route_every_date_to_one_shard_or_say_why(
        (yaml, n) in date_rule(),
        t in instant(),
        long in any::<bool>(),
    ) {
        let rule = build(&yaml, n);
        let text = datetime_text(t, long);
        match rule.route(&ShardValue::Str(&text)) {
            Ok(s) => prop_assert!(s < n),
            Err(e) => prop_assert!(!yaml.contains("default") && e.message().contains("no default")),
        }
        prop_assert!(rule.route(&ShardValue::Null).unwrap() < n);
    }

    #[test]
    fn date_ranges_never_miss_a_shard(
        (yaml, n, a, len) in date_case(),
        probes in proptest::collection::vec(0.0f64..=1.0, 1..16),
        lo_kind in 0u8..3,
        hi_kind in 0u8..3,
        long in any::<bool>(),
    ) {
        let rule = build(&yaml, n);
        let b = a + len;
        let (ta, tb) = (datetime_text(a, long), datetime_text(b, !long));
        let (lo_v, hi_v) = (ShardValue::Str(&ta), ShardValue::Str(&tb));
        let lo = match lo_kind { 0 => Included(&lo_v), 1 => Excluded(&lo_v), _ => Unbounded };
        let hi = match hi_kind { 0 => Included(&hi_v), 1 => Excluded(&hi_v), _ => Unbounded };
        let shards = rule.route_range(lo, hi).unwrap();
        prop_assert!(shards.iter().all(|&s| s < n));
        let mut inside: Vec<i64> = probes.iter().map(|p| a + (p * len as f64) as i64).collect();
        inside.extend([a, b, a + 1, b - 1, a - 86_400 * 400, b + 86_400 * 400]);
        for v in inside {
            let in_range = match lo { Included(_) => v >= a, Excluded(_) => v > a, Unbounded => true }
                && match hi { Included(_) => v <= b, Excluded(_) => v < b, Unbounded => true };
            if !in_range {
                continue;
            }
            // The value as a DATETIME and, when at midnight, as a DATE.
            let text = datetime_text(v, true);
            if let Ok(s) = rule.route(&ShardValue::Str(&text)) {
                prop_assert!(shards.contains(&s), "{} routes to {} but range {:?} gave {:?}", text, s, (lo, hi), shards);
            }
        }
    }

    /// Narrowing is exact, not only safe: every shard a range rule returns holds some integer of
    /// the range. `route` is constant between the configured cut points, so the shards of the
    /// range are the shards of its ends and of the cut points inside it.
    #[test]
    fn integer_ranges_are_exact(
        (yaml, n) in range_rule(),
        a in -6000i128..6000,
        len in 0i128..3000,
        lo_kind in 0u8..3,
        hi_kind in 0u8..3,
    ) {
        let rule = build(&yaml, n);
        let b = a + len;
        let (lo_v, hi_v) = (ShardValue::Int(a), ShardValue::Int(b));
        let lo = match lo_kind { 0 => Included(&lo_v), 1 => Excluded(&lo_v), _ => Unbounded };
        let hi = match hi_kind { 0 => Included(&hi_v), 1 => Excluded(&hi_v), _ => Unbounded };
        let got = rule.route_range(lo, hi).unwrap();
        let first = match lo_kind { 0 => a, 1 => a + 1, _ => i128::from(i64::MIN) };
        let last = match hi_kind { 0 => b, 1 => b - 1, _ => i128::from(u64::MAX) };
        let mut candidates = vec![first, last];
        for part in yaml.split(['{', ',']) {
            let part = part.trim();
            if let Some(x) = part.strip_prefix("from: ").or_else(|| part.strip_prefix("to: ")) {
                let cut: i128 = x.trim_end_matches('}').trim().parse().unwrap();
                candidates.extend([cut - 1, cut]);
            }
        }
        let want: BTreeSet<usize> = candidates
            .into_iter()
            .filter(|v| (first..=last).contains(v))
            .filter_map(|v| rule.route(&ShardValue::Int(v)).ok())
            .collect();
        prop_assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want, "{} [{}, {}]", yaml, first, last);
    }

    /// Date narrowing is exact at day granularity: the shards returned are exactly those of the
    /// days a DATETIME(6) inside the range can fall on (a value a microsecond after an exclusive
    /// lower bound is still on its day).
    #[test]
    fn date_ranges_are_exact(
        (yaml, n, a, len) in date_case(),
        lo_kind in 0u8..2,
        hi_kind in 0u8..2,
        long in any::<bool>(),
    ) {
        let rule = build(&yaml, n);
        let b = a + len - 86_400; // sometimes below a: an empty range
        let (ta, tb) = (datetime_text(a, long), datetime_text(b, long));
        let (lo_v, hi_v) = (ShardValue::Str(&ta), ShardValue::Str(&tb));
        let lo = if lo_kind == 0 { Included(&lo_v) } else { Excluded(&lo_v) };
        let hi = if hi_kind == 0 { Included(&hi_v) } else { Excluded(&hi_v) };
        let got: BTreeSet<usize> = rule.route_range(lo, hi).unwrap().into_iter().collect();
        // Days of the first and last DATETIME(6) values in range.
        let first_day = a.div_euclid(86_400);
        let last_day = if hi_kind == 1 && b.rem_euclid(86_400) == 0 {
            b.div_euclid(86_400) - 1
        } else {
            b.div_euclid(86_400)
        };
        let empty = a > b || (a == b && (lo_kind == 1 || hi_kind == 1));
        let mut want = BTreeSet::new();
        if !empty {
            let mut day = first_day;
            while day <= last_day {
                if let Ok(s) = rule.route(&ShardValue::Str(&datetime_text(day * 86_400, false))) {
                    want.insert(s);
                }
                day += 1;
            }
        }
        prop_assert_eq!(got, want, "{} {:?}..{:?}", yaml, lo, hi);
    }
}
