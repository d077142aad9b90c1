//! The router against a real MariaDB as the oracle: for every rule kind and key type, generated
//! values (boundaries, negatives, NULL, collation variants, every literal spelling, text and bound
//! parameters of every type) are INSERTed into one real table, each row recording the datanode
//! the router chose for its INSERT. Then for generated and hand-written predicates MariaDB says
//! which rows match; the datanodes holding them must be among the router's targets for the
//! SELECT, UPDATE and DELETE with that WHERE. Plans are compared warm, cold and in a shuffled
//! order. A refusal is safe (counted); anything else is a violation, listed when the test fails.
//!
//! Knobs: `SHOAL_ORACLE_PREDICATES` (generated predicates per table, default 60),
//! `SHOAL_ORACLE_VALUES` (extra random values per table, default 4), `SHOAL_ORACLE_SEED`
//! (default: from the clock; printed). Predicates only right once the router reads `||`, `&&`,
//! `!`, XOR and executable comments as MariaDB does are a separate family, reported apart
//! (`SHOAL_ORACLE_STRICT_SYNTAX=1` makes their violations fail the test too).
//!
//! A second test writes string keys from clients in gbk, gb2312, latin1, big5, sjis and utf8mb3
//! (statements and bound values in those character sets, as the proxy hands them to the router:
//! `charset::decode`d; plain, with their charset's introducer, and `CONVERT`ed) next to their
//! utf8mb4 spellings, in a session that is not strict (a unit
//! MariaDB cannot map is stored as '?'): every value MariaDB stores equal under the column's
//! collation is on one datanode, the router's targets hold MariaDB's matching rows, and nothing
//! is refused.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value};
use shoal_router::charset::{Charset, Charsets, decode};
use shoal_router::config::Config;
use shoal_router::plan::{ParamValue, RoutePlan, Router};
use shoal_router::sql::SqlMode;
use shoal_router::sql::stmt::Literal;
use shoal_router::topology::Topology;
use shoal_tests::{shared_backend, unique_name};

/// SplitMix64: a small seeded generator, so a failing run can be repeated from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One spelling of a value: its SQL text and, when it can be bound, the parameter (as the client
/// sends it, and as the proxy hands it to the router).
#[derive(Clone, Debug)]
struct Lit {
    sql: String,
    param: Option<Value>,
}

fn lit(sql: impl Into<String>, param: Option<Value>) -> Lit {
    Lit {
        sql: sql.into(),
        param,
    }
}

/// What the proxy passes to the router for a bound parameter (the contract of `ParamValue`).
fn param_value(v: &Value) -> ParamValue {
    match v {
        Value::NULL => Literal::Null,
        Value::Int(i) => Literal::Int(i128::from(*i)),
        Value::UInt(u) => Literal::Int(i128::from(*u)),
        Value::Float(f) => Literal::Double(f64::from(*f)),
        Value::Double(d) => Literal::Double(*d),
        Value::Bytes(b) => Literal::Str(String::from_utf8_lossy(b).into_owned()),
        Value::Date(y, m, d, h, mi, s, us) => Literal::Str(format!(
            "{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06}"
        )),
        Value::Time(neg, d, h, m, s, us) => Literal::Str(format!(
            "{}{}:{m:02}:{s:02}.{us:06}",
            if *neg { "-" } else { "" },
            u32::from(*h) + d * 24
        )),
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

fn bytes(s: &str) -> Option<Value> {
    Some(Value::Bytes(s.as_bytes().to_vec()))
}

/// Spellings of an integer: as it is, quoted, as a decimal, as a DOUBLE, and as each parameter.
fn int_spellings(n: i128) -> Vec<Lit> {
    let mut out = vec![
        lit(n.to_string(), None),
        lit(quote(&n.to_string()), bytes(&n.to_string())),
    ];
    if let Ok(i) = i64::try_from(n) {
        out[0].param = Some(Value::Int(i));
    } else if let Ok(u) = u64::try_from(n) {
        out[0].param = Some(Value::UInt(u));
    }
    out.push(lit(format!("{n}.0"), bytes(&format!("{n}.0"))));
    out.push(lit(format!("{n}e0"), Some(Value::Double(n as f64))));
    out.push(lit(format!("'{n}e0'"), bytes(&format!("{n}e0"))));
    if n.abs() < 1 << 20 {
        out.push(lit(format!("' {n} '"), bytes(&format!(" {n} "))));
        if n >= 0 {
            out.push(lit(format!("0x{n:x}"), None));
            out.push(lit(format!("+{n}"), None));
        }
        out.push(lit(format!("{n}"), Some(Value::Float(n as f32))));
    }
    out
}

/// Spellings of an exact decimal written `s` (e.g. "4.5").
fn decimal_spellings(s: &str) -> Vec<Lit> {
    let d: f64 = s.parse().expect("decimal");
    vec![
        lit(s, bytes(s)),
        lit(quote(s), bytes(s)),
        lit(format!("{s}e0"), Some(Value::Double(d))),
        lit(format!("'{s}e0'"), bytes(&format!("{s}e0"))),
        lit(format!("-(-{s})"), None),
    ]
}

fn string_spellings(s: &str) -> Vec<Lit> {
    vec![
        lit(quote(s), bytes(s)),
        lit(format!("_utf8mb4{}", quote(s)), None),
        lit(
            format!(
                "X'{}'",
                s.bytes().map(|b| format!("{b:02X}")).collect::<String>()
            ),
            None,
        ),
    ]
}

fn date_spellings(y: i32, m: u32, d: u32, time: Option<(u32, u32, u32)>) -> Vec<Lit> {
    let (h, mi, s) = time.unwrap_or((0, 0, 0));
    let iso = match time {
        None => format!("{y:04}-{m:02}-{d:02}"),
        Some(_) => format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}"),
    };
    let dv = Some(Value::Date(
        y as u16, m as u8, d as u8, h as u8, mi as u8, s as u8, 0,
    ));
    let mut out = vec![
        lit(quote(&iso), bytes(&iso)),
        lit(quote(&iso), dv),
        lit(
            quote(&format!("{y}-{m}-{d}")),
            bytes(&format!("{y}-{m}-{d}")),
        ),
        lit(quote(&format!("{y:04}{m:02}{d:02}")), None),
        lit(quote(&format!("{y:04}/{m:02}/{d:02}")), None),
        lit(format!("{y:04}{m:02}{d:02}"), None),
        lit(format!("DATE'{y:04}-{m:02}-{d:02}'"), None),
    ];
    if time.is_some() {
        out.push(lit(
            quote(&format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}")),
            bytes(&format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}")),
        ));
        out.push(lit(quote(&format!("{iso}.5")), bytes(&format!("{iso}.5"))));
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum KeyKind {
    Int,
    UInt,
    Decimal,
    Str,
    Date,
    DateTime,
}

struct Case {
    name: &'static str,
    column: &'static str,
    kind: KeyKind,
    /// The rule's YAML (without `name`).
    rule: &'static str,
}

fn cases() -> Vec<Case> {
    use KeyKind::*;
    let c = |name, column, kind, rule| Case {
        name,
        column,
        kind,
        rule,
    };
    vec![
        c("mod_int", "BIGINT", Int, "algorithm: mod"),
        c("mod_uint", "BIGINT UNSIGNED", UInt, "algorithm: mod"),
        c("mod_int32", "INT", Int, "algorithm: mod"),
        c("hash_int", "BIGINT", Int, "algorithm: hash"),
        c("consistent_int", "BIGINT", Int, "algorithm: consistent"),
        c(
            "range_int",
            "BIGINT",
            Int,
            "algorithm: range\n    ranges: [{to: 0, shard: 0}, {from: 0, to: 100, shard: 1}, {from: 100, to: 9007199254740993, shard: 2}]\n    default: 3",
        ),
        c(
            "range_uint",
            "BIGINT UNSIGNED",
            UInt,
            "algorithm: range\n    ranges: [{to: 1000, shard: 0}, {from: 1000, to: 9223372036854775808, shard: 1}, {from: 9223372036854775808, shard: 2}]",
        ),
        c(
            "range_dec",
            "DECIMAL(20,2)",
            Decimal,
            "algorithm: range\n    key_type: decimal\n    scale: 2\n    ranges: [{to: 0, shard: 0}, {from: 0, to: 100, shard: 1}, {from: 100, to: 1000000, shard: 2}, {from: 1000000, shard: 3}]",
        ),
        c(
            "list_int",
            "BIGINT",
            Int,
            "algorithm: list\n    key_type: integer\n    values: [{shard: 0, values: [0, 1, 2]}, {shard: 1, values: [3, 4, 5, -1]}, {shard: 2, values: [100, 9007199254740992]}]\n    default: 3",
        ),
        c(
            "hash_str_ci",
            "VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
            Str,
            "algorithm: hash\n    key_type: string",
        ),
        c(
            "hash_str_bin",
            "VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
            Str,
            "algorithm: hash\n    key_type: string\n    collation: bin",
        ),
        c(
            "consistent_str_ci",
            "VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
            Str,
            "algorithm: consistent\n    key_type: string",
        ),
        c(
            "list_str_ci",
            "VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
            Str,
            "algorithm: list\n    key_type: string\n    values: [{shard: 0, values: [paris, lyon]}, {shard: 1, values: [straße, abc]}, {shard: 2, values: ['10', 'é']}]\n    default: 3",
        ),
        c(
            "list_str_bin",
            "VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
            Str,
            "algorithm: list\n    key_type: string\n    collation: bin\n    values: [{shard: 0, values: [paris, Paris]}, {shard: 1, values: [abc]}, {shard: 2, values: ['10']}]\n    default: 3",
        ),
        c(
            "date_date",
            "DATE",
            Date,
            "algorithm: date\n    start: 2024-01-01\n    unit: month\n    interval: 3\n    default: 3",
        ),
        c(
            "date_datetime",
            "DATETIME",
            DateTime,
            "algorithm: date\n    start: 2024-01-01\n    unit: week\n    default: 0",
        ),
    ]
}

/// The values stored in a table of this key kind, every spelling of each.
fn values(kind: KeyKind, rng: &mut Rng, extra: usize) -> Vec<Lit> {
    let mut out = vec![lit("NULL", Some(Value::NULL))];
    match kind {
        KeyKind::Int | KeyKind::UInt => {
            let p53: i128 = 1 << 53;
            let mut ints: Vec<i128> = vec![
                0,
                1,
                2,
                3,
                4,
                5,
                6,
                7,
                10,
                42,
                99,
                100,
                101,
                999,
                1000,
                1001,
                p53 - 1,
                p53,
                p53 + 1,
                p53 + 2,
                p53 + 3,
                p53 + 5,
                i128::from(i64::MAX),
                i128::from(i32::MAX),
                i128::from(i32::MAX) + 1,
            ];
            if kind == KeyKind::Int {
                ints.extend([
                    -1,
                    -2,
                    -4,
                    -5,
                    -100,
                    -p53 - 1,
                    i128::from(i64::MIN),
                    i128::from(i32::MIN),
                ]);
            } else {
                ints.extend([1 << 63, (1 << 63) - 1, i128::from(u64::MAX), -1]);
            }
            for _ in 0..extra {
                let n = match rng.below(3) {
                    0 => rng.below(2000) as i128 - 1000,
                    1 => (rng.next() >> 1) as i128,
                    _ => p53 + rng.below(16) as i128 - 8,
                };
                ints.push(if kind == KeyKind::UInt { n.abs() } else { n });
            }
            for n in ints {
                out.extend(int_spellings(n));
            }
            for d in [
                "4.5", "-4.5", "2.5", "0.5", "-0.5", "1.4", "99.5", "999.5", "-2.5", "3.49999",
            ] {
                out.extend(decimal_spellings(d));
            }
            out.extend([
                lit("2.5e0", Some(Value::Double(2.5))),
                lit("3.5e0", Some(Value::Float(3.5))),
                lit(
                    "9007199254740993e0",
                    Some(Value::Double(9007199254740993.0)),
                ),
                lit("'4.5x'", bytes("4.5x")),
                lit("''", bytes("")),
                lit("1e20", Some(Value::Double(1e20))),
                lit("'2024-01-01'", Some(Value::Date(2024, 1, 1, 0, 0, 0, 0))),
            ]);
        }
        KeyKind::Decimal => {
            for s in [
                "0",
                "1",
                "-1",
                "0.005",
                "-0.005",
                "0.004",
                "99.99",
                "99.995",
                "99.994",
                "100",
                "100.001",
                "-0.01",
                "999999.995",
                "999999.994",
                "1000000",
                "12.345",
                "2.675",
                "1.005",
                "-99.995",
                "42",
            ] {
                out.extend(decimal_spellings(s));
            }
            for _ in 0..extra {
                let cents = rng.below(300_000) as i64 - 100_000;
                let v = format!("{}.{:03}", cents / 1000, (cents % 1000).abs());
                let v = if cents < 0 && cents / 1000 == 0 {
                    format!("-{v}")
                } else {
                    v
                };
                out.extend(decimal_spellings(&v));
            }
            out.extend(int_spellings(7));
            out.extend(int_spellings(-3));
        }
        KeyKind::Str => {
            for s in [
                "abc", "ABC", "abc  ", " abc", "Abc", "àbc", "ÀBC", "straße", "STRASSE", "strasse",
                "ß", "s", "ss", "ı", "I", "i", "é", "E", "e", "😀", "😁", "", " ", "paris",
                "PARIS", "Paris", "lyon", "10", "010", "10 ", "1e1", "a\tb", "a'b", "北京",
            ] {
                out.extend(string_spellings(s));
            }
            for _ in 0..extra {
                let alphabet = ['a', 'B', 'é', 'ß', ' ', 'z', '1'];
                let len = rng.below(5);
                let s: String = (0..len).map(|_| *rng.pick(&alphabet)).collect();
                out.extend(string_spellings(&s));
            }
            out.push(lit("10", Some(Value::Int(10))));
            out.push(lit("4.5", None));
        }
        KeyKind::Date | KeyKind::DateTime => {
            let with_time = kind == KeyKind::DateTime;
            let t = |h, m, s| with_time.then_some((h, m, s));
            for (y, m, d, time) in [
                (2024, 1, 1, None),
                (2024, 1, 31, t(23, 59, 59)),
                (2024, 3, 31, t(12, 0, 0)),
                (2024, 4, 1, None),
                (2024, 2, 29, t(0, 0, 1)),
                (2023, 12, 31, t(23, 59, 59)),
                (2024, 12, 31, None),
                (2025, 1, 1, None),
                (2024, 6, 15, t(6, 30, 0)),
                (1999, 12, 31, None),
                (2024, 1, 7, t(23, 0, 0)),
                (2024, 1, 8, None),
            ] {
                out.extend(date_spellings(y, m, d, time));
            }
            for _ in 0..extra {
                let (y, m, d) = (
                    2023 + rng.below(3) as i32,
                    1 + rng.below(12) as u32,
                    1 + rng.below(28) as u32,
                );
                let time = with_time.then(|| {
                    (
                        rng.below(24) as u32,
                        rng.below(60) as u32,
                        rng.below(60) as u32,
                    )
                });
                out.extend(date_spellings(y, m, d, time));
            }
            out.extend([
                lit("'24-01-31'", None),
                lit("'2024-02-30'", bytes("2024-02-30")),
                lit("'0000-00-00'", None),
                lit("'2024-01-31 10'", None),
                lit("20240131", Some(Value::Int(20240131))),
            ]);
        }
    }
    out
}

/// A predicate in two forms: with literals in the text, and with `?` and bound parameters (when
/// every literal has a parameter form).
#[derive(Clone, Debug)]
struct Pred {
    text: String,
    prepared: Option<(String, Vec<Value>)>,
}

fn atom(text: String, prepared: Option<(String, Vec<Value>)>) -> Pred {
    Pred { text, prepared }
}

fn combine(parts: &[&Pred], f: impl Fn(&[&str]) -> String) -> Pred {
    let texts: Vec<&str> = parts.iter().map(|p| p.text.as_str()).collect();
    let prepared = parts
        .iter()
        .map(|p| p.prepared.as_ref())
        .collect::<Option<Vec<_>>>()
        .map(|ps| {
            let sqls: Vec<&str> = ps.iter().map(|(s, _)| s.as_str()).collect();
            let params = ps.iter().flat_map(|(_, v)| v.iter().cloned()).collect();
            (f(&sqls), params)
        });
    Pred {
        text: f(&texts),
        prepared,
    }
}

/// `k OP lit`, in both forms.
fn cmp(col: &str, op: &str, l: &Lit, reversed: bool) -> Pred {
    let (t, p) = if reversed {
        (format!("{} {op} {col}", l.sql), format!("? {op} {col}"))
    } else {
        (format!("{col} {op} {}", l.sql), format!("{col} {op} ?"))
    };
    atom(t, l.param.clone().map(|v| (p, vec![v])))
}

fn list_pred(col: &str, kw: &str, ls: &[&Lit]) -> Pred {
    let text = format!(
        "{col} {kw} ({})",
        ls.iter()
            .map(|l| l.sql.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let prepared = ls
        .iter()
        .map(|l| l.param.clone())
        .collect::<Option<Vec<_>>>()
        .map(|ps| {
            (
                format!("{col} {kw} ({})", vec!["?"; ps.len()].join(", ")),
                ps,
            )
        });
    atom(text, prepared)
}

fn between(col: &str, not: bool, a: &Lit, b: &Lit) -> Pred {
    let kw = if not { "NOT BETWEEN" } else { "BETWEEN" };
    let prepared = match (&a.param, &b.param) {
        (Some(x), Some(y)) => Some((format!("{col} {kw} ? AND ?"), vec![x.clone(), y.clone()])),
        _ => None,
    };
    atom(format!("{col} {kw} {} AND {}", a.sql, b.sql), prepared)
}

const OPS: &[&str] = &["=", "<>", "!=", "<", "<=", ">", ">=", "<=>"];

fn random_atom(rng: &mut Rng, col: &str, pool: &[Lit]) -> Pred {
    match rng.below(10) {
        0..=4 => {
            let op: &str = OPS[rng.below(OPS.len())];
            cmp(col, op, rng.pick(pool), rng.below(4) == 0)
        }
        5 => {
            let n = 1 + rng.below(4);
            let ls: Vec<&Lit> = (0..n).map(|_| rng.pick(pool)).collect();
            list_pred(col, "IN", &ls)
        }
        6 => {
            let ls: Vec<&Lit> = (0..1 + rng.below(3)).map(|_| rng.pick(pool)).collect();
            list_pred(col, "NOT IN", &ls)
        }
        7 => between(col, false, rng.pick(pool), rng.pick(pool)),
        8 => between(col, true, rng.pick(pool), rng.pick(pool)),
        _ => {
            let not = if rng.below(2) == 0 { "" } else { " NOT" };
            atom(
                format!("{col} IS{not} NULL"),
                Some((format!("{col} IS{not} NULL"), vec![])),
            )
        }
    }
}

/// Predicates in MariaDB's ordinary syntax (AND, OR, NOT, parentheses).
fn random_pred(rng: &mut Rng, col: &str, pool: &[Lit], depth: usize) -> Pred {
    if depth == 0 || rng.below(3) == 0 {
        return random_atom(rng, col, pool);
    }
    let a = random_pred(rng, col, pool, depth - 1);
    let b = random_pred(rng, col, pool, depth - 1);
    match rng.below(4) {
        0 => combine(&[&a, &b], |s| format!("{} AND {}", s[0], s[1])),
        1 => combine(&[&a, &b], |s| format!("({}) OR ({})", s[0], s[1])),
        2 => combine(&[&a], |s| format!("NOT ({})", s[0])),
        _ => {
            let c = random_atom(rng, col, pool);
            combine(&[&a, &b, &c], |s| {
                format!("({} OR {}) AND {}", s[0], s[1], s[2])
            })
        }
    }
}

/// Predicates that need MariaDB's reading of `||`, `&&`, `!`, XOR, precedence and executable
/// comments.
fn random_syntax_pred(rng: &mut Rng, col: &str, pool: &[Lit]) -> Pred {
    let a = random_atom(rng, col, pool);
    let b = random_atom(rng, col, pool);
    let c = random_atom(rng, col, pool);
    match rng.below(9) {
        0 => combine(&[&a, &b], |s| format!("{} || {}", s[0], s[1])),
        1 => combine(&[&a, &b], |s| format!("{} && {}", s[0], s[1])),
        2 => combine(&[&a], |s| format!("!({})", s[0])),
        3 => combine(&[&a, &b, &c], |s| {
            format!("{} AND {} XOR {}", s[0], s[1], s[2])
        }),
        4 => combine(&[&a, &b, &c], |s| {
            format!("{} AND {} || {}", s[0], s[1], s[2])
        }),
        5 => combine(&[&a, &b], |s| format!("{} /*!OR {} */", s[0], s[1])),
        6 => combine(&[&a, &b], |s| format!("{} /*M!100000 OR {} */", s[0], s[1])),
        7 => {
            // Skipped by version: the parameters inside are not the statement's.
            let mut p = combine(&[&a, &b], |s| format!("{} /*!99999 OR {} */", s[0], s[1]));
            p.prepared = match (&a.prepared, &b.prepared) {
                (Some((sa, va)), Some((sb, _))) => {
                    Some((format!("{sa} /*!99999 OR {sb} */"), va.clone()))
                }
                _ => None,
            };
            p
        }
        _ => combine(&[&a, &b], |s| format!("{} XOR {}", s[0], s[1])),
    }
}

/// Hand-written predicates of every case (plus the examples for integer keys).
fn hand_written(kind: KeyKind, col: &str) -> (Vec<String>, Vec<String>) {
    let mut plain: Vec<String> = vec![
        format!("{col} IS NULL"),
        format!("{col} IS NOT NULL"),
        format!("{col} <=> NULL"),
        format!("{col} = NULL"),
        format!("NOT {col} IS NULL"),
        format!("{col} IN (NULL)"),
    ];
    let mut syntax: Vec<String> = Vec::new();
    match kind {
        KeyKind::Int | KeyKind::UInt | KeyKind::Decimal => {
            plain.extend([
                format!("{col} = 9007199254740993e0"),
                format!("{col} = 9007199254740992e0"),
                format!("{col} IN (9007199254740995, 9007199254740993e0)"),
                format!("{col} IN ('9007199254740993', 9007199254740995)"),
                format!("{col} BETWEEN 9007199254740993e0 AND 9007199254740995"),
                format!("{col} <= 9007199254740995e0"),
                format!("{col} > '9007199254740993'"),
                format!("{col} = 4.5"),
                format!("{col} = '4.5'"),
                format!("{col} = '4abc'"),
                format!("{col} = -(-5)"),
                format!("{col} = - 5"),
                format!("{col} = -'5'"),
                format!("{col} = 0x05"),
                format!("{col} = X'35'"),
                format!("{col} = b'101'"),
                format!("{col} = 5 OR {col} = 6"),
                format!("{col} BETWEEN 99.5 AND 100.5"),
                format!("{col} > 99.5e0 AND {col} < 1000.5"),
                format!("({col} = 1 OR {col} = 2) AND NOT ({col} = 2)"),
                format!("{col} IN (1, 2.5, '3', 4e0, NULL)"),
                format!("{col} = 1 AND {col} = 2"),
                format!("{col} = 99.995"),
                format!("{col} = '99.995'"),
                format!("{col} = 1000000"),
                format!("{col} < 0"),
                format!("{col} >= -0.005"),
            ]);
            syntax.extend([
                format!("{col} = 1 AND {col} = 1 || {col} = 2"),
                format!("{col} = 1 AND {col} = 2 XOR {col} = 3"),
                format!("{col} = 5 /*M!100000 OR {col} = 6 */"),
                format!("{col} = 5 /*! OR {col} = 6 */"),
                format!("{col} = 5 /*!50000 OR {col} = 6 */"),
                format!("{col} = 5 /*!99999 OR {col} = 6 */"),
                format!("!({col} = 5)"),
                format!("! {col} = 5"),
                format!("{col} = 5 || {col} = 7 && {col} = 8"),
                format!("NOT {col} = 5 XOR {col} = 6"),
            ]);
        }
        KeyKind::Str => {
            plain.extend([
                format!("{col} = 'abc'"),
                format!("{col} = 'ABC '"),
                format!("{col} = 'strasse'"),
                format!("{col} = 'STRASSE'"),
                format!("{col} = _utf8mb4'abc' COLLATE utf8mb4_bin"),
                format!("{col} = 'abc' COLLATE utf8mb4_general_ci"),
                format!("{col} = BINARY 'abc'"),
                format!("{col} = 10"),
                format!("{col} = 1e1"),
                format!("{col} IN ('paris', 'LYON', 'x')"),
                format!("{col} BETWEEN 'a' AND 'b'"),
                format!("{col} LIKE 'ab%'"),
                format!("{col} = '😀'"),
                format!("{col} = 'ı'"),
                format!("{col} = ''"),
            ]);
            syntax.extend([
                format!("{col} = 'abc' || {col} = 'paris'"),
                format!("{col} = 'abc' /*!OR {col} = 'paris' */"),
                format!("{col} = 'abc' /*M!100000 OR {col} = 'paris' */"),
                format!("!({col} = 'abc')"),
            ]);
        }
        KeyKind::Date | KeyKind::DateTime => {
            plain.extend([
                format!("{col} = '2024-01-31'"),
                format!("{col} = '2024-01-31 23:59:59'"),
                format!("{col} >= '2024-04-01'"),
                format!("{col} < '2024-04-01'"),
                format!("{col} > '2024-03-31'"),
                format!("{col} > '2024-03-31 23:59:59'"),
                format!("{col} BETWEEN '2024-01-01' AND '2024-03-31'"),
                format!("{col} BETWEEN '2024-01-01' AND '2024-03-31 23:59:59.999999'"),
                format!("{col} = 20240131"),
                format!("{col} = '20240131'"),
                format!("{col} = DATE'2024-01-31'"),
                format!("{col} = TIMESTAMP'2024-01-31 23:59:59'"),
                format!("{col} < '2024-01-01'"),
                format!("{col} >= '2025-01-01'"),
                format!("{col} = '2024-1-31'"),
                format!("{col} IN ('2024-01-31', '2024-06-15 06:30:00')"),
            ]);
            syntax.extend([
                format!("{col} = '2024-01-31' || {col} = '2024-06-15'"),
                format!("{col} = '2024-01-31' /*!OR {col} = '2024-06-15' */"),
            ]);
        }
    }
    (plain, syntax)
}

fn topology_yaml(port: u16) -> String {
    topology_yaml_of(port, &cases())
}

fn topology_yaml_of(port: u16, cases: &[Case]) -> String {
    let mut y = format!(
        "datahosts:\n  - name: dh1\n    primary: {{ address: 127.0.0.1:{port}, user: shoal, password: shoal }}\n\
         datanodes:\n  - name: dn1..dn4\n    datahost: dh1\n    database: o_db1..o_db4\nrules:\n"
    );
    for c in cases {
        y.push_str(&format!("  - name: r_{}\n    {}\n", c.name, c.rule));
    }
    y.push_str("schemas:\n  - name: o\n    tables:\n");
    for c in cases {
        y.push_str(&format!(
            "      - {{ name: {}, type: sharded, shard_key: k, rule: r_{}, datanodes: dn1..dn4 }}\n",
            c.name, c.name
        ));
    }
    y
}

/// The datanode names a plan runs on; `None` for a refusal.
fn targets(topo: &Topology, plan: &RoutePlan) -> Result<BTreeSet<String>, String> {
    let name = |dn: usize| topo.datanodes[dn].name.clone();
    match plan {
        RoutePlan::Single(t) => Ok(BTreeSet::from([name(t.datanode)])),
        RoutePlan::Scatter { targets, .. } | RoutePlan::Broadcast { targets } => {
            Ok(targets.iter().map(|t| name(t.datanode)).collect())
        }
        RoutePlan::Refuse(e) => Err(format!("refused: {e}")),
        other => Err(format!("unexpected plan {other:?}")),
    }
}

#[derive(Default)]
struct Counts {
    values: usize,
    values_rejected_by_mariadb: usize,
    insert_refusals: usize,
    predicates: usize,
    predicates_rejected_by_mariadb: usize,
    statements: usize,
    refusals: usize,
    violations: Vec<String>,
    syntax_statements: usize,
    syntax_violations: Vec<String>,
}

impl Counts {
    fn violation(&mut self, syntax: bool, v: String) {
        if syntax {
            self.syntax_violations.push(v);
        } else {
            self.violations.push(v);
        }
    }
}

/// Every statement routed, with its plan, for the cold and shuffled comparisons.
struct Routed {
    sql: String,
    params: Vec<ParamValue>,
    plan: RoutePlan,
    /// In the family that needs MariaDB's reading of `||`, XOR, executable comments, ...
    syntax: bool,
}

struct Ctx {
    router: Router,
    syntax_router: Router,
    topo: Arc<Topology>,
    routed: Vec<Routed>,
    counts: Counts,
}

impl Ctx {
    /// Routes through the warm cache and cold; a difference is a violation.
    fn route(&mut self, sql: &str, params: &[ParamValue], syntax: bool) -> RoutePlan {
        // Each family warms its own cache: a statement of the syntax family must not change how
        // plain statements are planned here (that is checked apart, below).
        let router = if syntax {
            &self.syntax_router
        } else {
            &self.router
        };
        let warm = router.route(Some("o"), sql, params);
        let cold = router.route_uncached(Some("o"), sql, params);
        if warm != cold {
            self.counts.violation(
                syntax,
                format!("cache: {sql} {params:?}\n  warm: {warm:?}\n  cold: {cold:?}"),
            );
        }
        self.routed.push(Routed {
            sql: sql.to_string(),
            params: params.to_vec(),
            plan: warm.clone(),
            syntax,
        });
        warm
    }
}

async fn mariadb_dns(
    conn: &mut Conn,
    sql: &str,
    params: Option<&[Value]>,
) -> Result<BTreeSet<String>, String> {
    let rows: Result<Vec<Option<String>>, _> = match params {
        None => conn.query(sql).await,
        Some(p) => conn.exec(sql, p.to_vec()).await,
    };
    match rows {
        Ok(r) => Ok(r.into_iter().flatten().collect()),
        Err(mysql_async::Error::Server(e)) => Err(e.to_string()),
        Err(e) => panic!("{sql} {params:?}: the connection failed: {e:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn router_prunes_and_places_as_mariadb_evaluates() {
    let seed = std::env::var("SHOAL_ORACLE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    let n_preds = env_usize("SHOAL_ORACLE_PREDICATES", 60);
    let n_extra = env_usize("SHOAL_ORACLE_VALUES", 4);
    let strict_syntax = std::env::var("SHOAL_ORACLE_STRICT_SYNTAX").is_ok_and(|v| v == "1");
    println!(
        "router oracle: seed {seed} (SHOAL_ORACLE_SEED={seed} repeats this run), {n_preds} predicates and {n_extra} extra values per table"
    );
    let mut rng = Rng(seed);

    let backend = shared_backend();
    let db = unique_name("oracle");
    backend.fresh_db(&db).await;
    let mut conn = backend.conn(Some(&db)).await;

    let cfg = Config::from_yaml_str(&topology_yaml(backend.port)).expect("oracle topology");
    let topo = Arc::new(Topology::build(&cfg).expect("build oracle topology"));
    let mut ctx = Ctx {
        router: Router::with_cache_capacity(topo.clone(), 4096),
        syntax_router: Router::with_cache_capacity(topo.clone(), 4096),
        topo: topo.clone(),
        routed: Vec::new(),
        counts: Counts::default(),
    };

    for case in cases() {
        let t = case.name;
        conn.query_drop(format!(
            "CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, k {}, dn VARCHAR(8) NOT NULL, spelling TEXT, v INT)",
            case.column
        ))
        .await
        .unwrap_or_else(|e| panic!("create table {t}: {e:?}"));
        let pool = values(case.kind, &mut rng, n_extra);

        // 1. Place every spelling of every value, text and bound (one transaction: one sync).
        let started = std::time::Instant::now();
        conn.query_drop("BEGIN").await.expect("begin");
        for l in &pool {
            for prepared in [false, true] {
                if prepared && l.param.is_none() {
                    continue;
                }
                let (sql, params): (String, Vec<ParamValue>) = if prepared {
                    (
                        format!("INSERT INTO {t} (k, dn, spelling) VALUES (?, ?, ?)"),
                        vec![
                            param_value(l.param.as_ref().unwrap_or(&Value::NULL)),
                            Literal::Str(String::new()),
                            Literal::Str(String::new()),
                        ],
                    )
                } else {
                    (
                        format!(
                            "INSERT INTO {t} (k, dn, spelling) VALUES ({}, '', '')",
                            l.sql
                        ),
                        vec![],
                    )
                };
                let plan = ctx.route(&sql, &params, false);
                let dn = match targets(&topo, &plan) {
                    Ok(dns) if dns.len() == 1 => dns.into_iter().next().unwrap_or_default(),
                    Ok(dns) => {
                        ctx.counts
                            .violations
                            .push(format!("INSERT on several datanodes {dns:?}: {sql}"));
                        continue;
                    }
                    Err(_) => {
                        ctx.counts.insert_refusals += 1;
                        continue;
                    }
                };
                let spelling = format!("{}{}", if prepared { "?" } else { "" }, l.sql);
                let res = if prepared {
                    conn.exec_drop(
                        format!("INSERT INTO {t} (k, dn, spelling) VALUES (?, ?, ?)"),
                        vec![
                            l.param.clone().unwrap_or(Value::NULL),
                            Value::Bytes(dn.clone().into_bytes()),
                            Value::Bytes(spelling.clone().into_bytes()),
                        ],
                    )
                    .await
                } else {
                    conn.query_drop(format!(
                        "INSERT INTO {t} (k, dn, spelling) VALUES ({}, {}, {})",
                        l.sql,
                        quote(&dn),
                        quote(&spelling)
                    ))
                    .await
                };
                match res {
                    Ok(()) => ctx.counts.values += 1,
                    Err(mysql_async::Error::Server(_)) => {
                        ctx.counts.values_rejected_by_mariadb += 1
                    }
                    Err(e) => panic!("{t}: INSERT {spelling}: the connection failed: {e:?}"),
                }
            }
        }

        conn.query_drop("COMMIT").await.expect("commit");

        // 2. Every stored value (as the column compares) lives on one datanode.
        let groups: Vec<(Option<String>, String, String)> = conn
            .query(format!(
                "SELECT CAST(k AS CHAR), GROUP_CONCAT(DISTINCT dn ORDER BY dn), GROUP_CONCAT(CONCAT(dn, ' ', spelling) SEPARATOR ' | ') FROM {t} GROUP BY k HAVING COUNT(DISTINCT dn) > 1"
            ))
            .await
            .expect("group by stored value");
        for (k, dns, spellings) in groups {
            ctx.counts.violations.push(format!(
                "{t}: stored value {k:?} on datanodes {dns}: spellings {spellings}"
            ));
        }

        let placed = started.elapsed();
        // 3. Predicates: MariaDB's matching rows must be on the router's targets.
        let (plain, syntax) = hand_written(case.kind, "k");
        let mut preds: Vec<(Pred, bool)> = plain
            .into_iter()
            .map(|p| (atom(p, None), false))
            .chain(syntax.into_iter().map(|p| (atom(p, None), true)))
            .collect();
        for i in 0..n_preds {
            if i % 6 == 5 {
                preds.push((random_syntax_pred(&mut rng, "k", &pool), true));
            } else {
                preds.push((random_pred(&mut rng, "k", &pool, 2), false));
            }
        }
        for (p, syntax_family) in &preds {
            let forms: Vec<(String, Option<Vec<Value>>)> = std::iter::once((p.text.clone(), None))
                .chain(p.prepared.clone().map(|(s, v)| (s, Some(v))))
                .collect();
            for (where_, params) in forms {
                if std::env::var("SHOAL_ORACLE_TRACE").is_ok() {
                    eprintln!("{t}: {where_} {params:?}");
                }
                ctx.counts.predicates += 1;
                let oracle = match mariadb_dns(
                    &mut conn,
                    &format!("SELECT DISTINCT dn FROM {t} WHERE {where_}"),
                    params.as_deref(),
                )
                .await
                {
                    Ok(d) => d,
                    Err(_) => {
                        ctx.counts.predicates_rejected_by_mariadb += 1;
                        continue;
                    }
                };
                let router_params: Vec<ParamValue> =
                    params.iter().flatten().map(param_value).collect();
                for stmt in [
                    format!("SELECT * FROM {t} WHERE {where_}"),
                    format!("UPDATE {t} SET v = 1 WHERE {where_}"),
                    format!("DELETE FROM {t} WHERE {where_}"),
                ] {
                    let plan = ctx.route(&stmt, &router_params, *syntax_family);
                    if *syntax_family {
                        ctx.counts.syntax_statements += 1;
                    } else {
                        ctx.counts.statements += 1;
                    }
                    match targets(&topo, &plan) {
                        Err(_) => ctx.counts.refusals += 1,
                        Ok(got) => {
                            if !oracle.is_subset(&got) {
                                let v = format!(
                                    "{stmt}{}\n  MariaDB's rows are on {oracle:?}, the router targets {got:?}",
                                    if params.is_some() {
                                        format!("  params {params:?}")
                                    } else {
                                        String::new()
                                    }
                                );
                                ctx.counts.violation(*syntax_family, v);
                            }
                        }
                    }
                }
            }
        }
        println!(
            "{t}: placed in {placed:?}, predicates in {:?}",
            started.elapsed() - placed
        );
    }

    let shuffle_start = std::time::Instant::now();
    // 4. The same statements in a shuffled order through a fresh router: identical plans. First
    // the plain family alone, then everything mixed (a plain statement planned differently after
    // a syntax-family one is a violation of the syntax family: the cache shape misread it).
    for mixed in [false, true] {
        let shuffled_router = Router::with_cache_capacity(topo.clone(), 4096);
        let mut order: Vec<usize> = (0..ctx.routed.len())
            .filter(|&i| mixed || !ctx.routed[i].syntax)
            .collect();
        for i in (1..order.len()).rev() {
            let j = rng.below(i + 1);
            order.swap(i, j);
        }
        for &i in &order {
            let r = &ctx.routed[i];
            let again = shuffled_router.route(Some("o"), &r.sql, &r.params);
            if again != r.plan {
                let v = format!(
                    "shuffled order{}: {} {:?}\n  first: {:?}\n  shuffled: {again:?}",
                    if mixed {
                        " (with the syntax family)"
                    } else {
                        ""
                    },
                    r.sql,
                    r.params,
                    r.plan
                );
                ctx.counts.violation(mixed || r.syntax, v);
            }
        }
    }

    println!("shuffled checks took {:?}", shuffle_start.elapsed());
    conn.query_drop(format!("DROP DATABASE `{db}`"))
        .await
        .expect("drop database");
    let c = &ctx.counts;
    println!(
        "router oracle (seed {seed}): {} values stored ({} rejected by MariaDB, {} INSERTs refused by the router), {} predicates ({} rejected by MariaDB), {} statements checked, {} refusals, {} violations; syntax family: {} statements, {} violations; {} plans compared warm/cold/shuffled",
        c.values,
        c.values_rejected_by_mariadb,
        c.insert_refusals,
        c.predicates,
        c.predicates_rejected_by_mariadb,
        c.statements,
        c.refusals,
        c.violations.len(),
        c.syntax_statements,
        c.syntax_violations.len(),
        ctx.routed.len(),
    );
    let _ = &ctx.topo;
    if !c.syntax_violations.is_empty() {
        println!(
            "syntax family violations (need MariaDB's reading of ||, &&, !, XOR, executable comments):"
        );
        let mut by_construct: BTreeMap<&str, usize> = BTreeMap::new();
        for v in &c.syntax_violations {
            let first = v.lines().next().unwrap_or("");
            let kind = if first.starts_with("cache") || first.starts_with("shuffled") {
                "plan cache"
            } else {
                ["/*M!", "/*!", "||", "&&", "XOR", "!"]
                    .into_iter()
                    .find(|k| first.contains(k))
                    .unwrap_or("other")
            };
            *by_construct.entry(kind).or_default() += 1;
        }
        println!("  by construct: {by_construct:?}");
        for v in c.syntax_violations.iter().take(40) {
            println!("  {v}");
        }
    }
    let mut failures = c.violations.clone();
    if strict_syntax {
        failures.extend(c.syntax_violations.iter().cloned());
    }
    assert!(
        failures.is_empty(),
        "{} violations (seed {seed}):\n{}",
        failures.len(),
        failures
            .iter()
            .take(60)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// A key value written by a client in some character set.
#[derive(Clone, Copy)]
enum CsValue {
    /// Text the charset holds: its bytes are MariaDB's conversion of the UTF-8 text.
    Text(&'static str),
    /// Bytes as the client sends them (units MariaDB cannot map, 0x5C trails, ...).
    Raw(&'static [u8]),
}

/// The charsets the issue names, each with a handful of values: CJK names written in both
/// scripts, full-width and half-width forms, accents and case, trail bytes 0x5C, units MariaDB
/// maps to ASCII (sjis 0x815F is a backslash) or to nothing ('?').
fn charset_values() -> Vec<(Charset, Vec<CsValue>)> {
    use CsValue::{Raw, Text};
    vec![
        (
            Charset::Gbk,
            vec![
                Text("张伟"),
                Text("張偉"),
                Text("ＡＢＣ"),
                Text("abc "),
                Text("é"),
                Text("北京"),
                Raw(b"\x81\x5C"),
                Raw(b"\xA2\xA0"),
            ],
        ),
        (
            Charset::Gb2312,
            vec![Text("张伟"), Text("北京"), Text("ABC"), Text("é")],
        ),
        (
            Charset::Latin1,
            vec![
                Text("café"),
                Text("CAFÉ"),
                Text("straße"),
                Text("€"),
                Text("E"),
                Raw(b"\x81"),
                // gbk's 张伟: the same bytes in a VARBINARY column.
                Raw(b"\xD5\xC5\xCE\xB0"),
            ],
        ),
        (
            Charset::Big5,
            vec![
                Text("張偉"),
                Text("許功蓋"),
                Text("北京"),
                Text("ａｂｃ"),
                Raw(b"\xA3\xE1"),
            ],
        ),
        (
            Charset::Sjis,
            vec![
                Text("ソ"),
                Text("表"),
                Text("東京"),
                Text("ｱ"),
                Text("ＡＢＣ"),
                Raw(b"\x81\x5F"),
                Raw(b"\x85\x40"),
            ],
        ),
        (
            Charset::Utf8mb3,
            vec![Text("é"), Text("北京"), Text("ı"), Raw("😀".as_bytes())],
        ),
    ]
}

/// The string key tables of the charset oracle: the main test's, a utf8mb3 column and a
/// VARBINARY one.
fn charset_cases() -> Vec<Case> {
    let mut out: Vec<Case> = cases()
        .into_iter()
        .filter(|c| c.kind == KeyKind::Str)
        .collect();
    out.push(Case {
        name: "hash_str_mb3",
        column: "VARCHAR(40) CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci",
        kind: KeyKind::Str,
        rule: "algorithm: hash\n    key_type: string\n    collation: utf8mb3_general_ci",
    });
    out.push(Case {
        name: "hash_varbinary",
        column: "VARBINARY(40)",
        kind: KeyKind::Str,
        rule: "algorithm: hash\n    key_type: string\n    collation: binary",
    });
    out
}

/// What the proxy hands the router for `bytes` in `cs`: a UTF-8 client's text as it is, any
/// other's decoded.
fn router_text(cs: Charset, bytes: &[u8]) -> Result<String, String> {
    if cs.is_utf8() {
        return String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string());
    }
    decode(cs, bytes)
        .map(|s| s.into_owned())
        .map_err(|e| e.to_string())
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

/// `head` + `'value'` + `tail`, as bytes.
fn spliced(head: &str, value: &[u8], tail: &str) -> Vec<u8> {
    let mut s = head.as_bytes().to_vec();
    s.push(b'\'');
    s.extend_from_slice(value);
    s.push(b'\'');
    s.extend_from_slice(tail.as_bytes());
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_keys_from_other_charsets_land_where_mariadb_stores_them() {
    let backend = shared_backend();
    let db = unique_name("oracle_cs");
    backend.fresh_db(&db).await;
    let mut utf8 = backend.conn(Some(&db)).await;
    let cases = charset_cases();
    let cfg = Config::from_yaml_str(&topology_yaml_of(backend.port, &cases)).expect("topology");
    let topo = Arc::new(Topology::build(&cfg).expect("build topology"));
    let router = Router::with_cache_capacity(topo.clone(), 4096);
    let mode = SqlMode::default();

    // Each value's bytes in its charset, converted by MariaDB (not by the code under test),
    // and its spelling inside a literal (none of the charsets' values needs an escape).
    let mut written: Vec<(Charset, Vec<u8>, Vec<u8>)> = Vec::new();
    let mut texts: Vec<&str> = vec!["?", "\\", "????", "abc", "张伟", "café"];
    for (cs, vals) in charset_values() {
        for v in vals {
            let b = match v {
                CsValue::Raw(b) => b.to_vec(),
                CsValue::Text(s) => {
                    texts.push(s);
                    let h: Option<String> = utf8
                        .query_first(format!(
                            "SELECT HEX(CONVERT(_utf8mb4 X'{}' USING {cs}))",
                            hex_of(s.as_bytes())
                        ))
                        .await
                        .expect("convert");
                    let h = h.unwrap_or_default();
                    (0..h.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex"))
                        .collect()
                }
            };
            written.push((cs, b.clone(), b));
        }
    }
    for s in texts {
        let q = quote(s);
        let spelled = q.as_bytes()[1..q.len() - 1].to_vec();
        written.push((Charset::Utf8mb4, s.as_bytes().to_vec(), spelled));
    }

    let mut conns: BTreeMap<Charset, Conn> = BTreeMap::new();
    for &(cs, _, _) in &written {
        if let std::collections::btree_map::Entry::Vacant(e) = conns.entry(cs) {
            let mut c = backend.conn(Some(&db)).await;
            // Not strict: a unit MariaDB cannot map is stored (as '?') rather than refused, so
            // that where it is stored is checked too.
            c.query_drop(format!("SET NAMES {cs}, SESSION sql_mode = ''"))
                .await
                .expect("SET NAMES");
            e.insert(c);
        }
    }

    let mut violations: Vec<String> = Vec::new();
    let mut refusals: Vec<String> = Vec::new();
    let (mut stored, mut rejected, mut checked) = (0usize, 0usize, 0usize);
    let mut convert_refusals = 0usize;
    let one_dn = |plan: &RoutePlan| -> Result<String, String> {
        let dns = targets(&topo, plan)?;
        match dns.len() {
            1 => Ok(dns.into_iter().next().unwrap_or_default()),
            _ => Err(format!("an INSERT on {dns:?}")),
        }
    };
    for case in &cases {
        let t = case.name;
        utf8.query_drop(format!(
            "CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, k {}, dn VARCHAR(8) NOT NULL, spelling TEXT)",
            case.column
        ))
        .await
        .expect("create table");
        for (cs, value, spelled) in &written {
            let charsets = Charsets::names(*cs);
            let conn = conns.get_mut(cs).expect("connection");
            let spelling = format!("{cs} {}", hex_of(value));
            // Text: the statement in the client's charset, decoded for the router.
            let head = format!("INSERT INTO {t} (k, dn, spelling) VALUES (");
            // Text spellings: the literal, with its own charset's introducer, converted.
            let quoted = spliced("", spelled, "");
            let wrap = |pre: &str, post: &str| {
                let mut s = pre.as_bytes().to_vec();
                s.extend_from_slice(&quoted);
                s.extend_from_slice(post.as_bytes());
                s
            };
            let mut forms: Vec<(String, Vec<u8>)> = vec![
                ("text".into(), quoted.clone()),
                (format!("_{cs}"), wrap(&format!("_{cs}"), "")),
                (
                    "CONVERT utf8mb4".into(),
                    wrap("CONVERT(", " USING utf8mb4)"),
                ),
            ];
            if *cs == Charset::Utf8mb4 {
                // Conversions from Unicode to another charset are MariaDB's own: refused (counted
                // apart), never guessed; to utf8mb3 they are read.
                for to in ["utf8mb3", "latin1", "sjis"] {
                    forms.push((
                        format!("CONVERT {to}"),
                        wrap("CONVERT(", &format!(" USING {to})")),
                    ));
                }
            }
            // (form, the router's datanode, the literal's SQL; `None`: bound).
            type Placed = (String, Result<String, String>, Option<Vec<u8>>);
            let mut placed: Vec<Placed> = Vec::new();
            for (form, lit_sql) in forms {
                let mut probe = head.as_bytes().to_vec();
                probe.extend_from_slice(&lit_sql);
                probe.extend_from_slice(b", '', '')");
                let dn = router_text(*cs, &probe).and_then(|text| {
                    one_dn(&router.route_in(Some("o"), mode, charsets, &text, &[]))
                });
                placed.push((form, dn, Some(lit_sql)));
            }
            // Bound: the value as a parameter, decoded as the proxy decodes string parameters.
            let param = Literal::Str(router_text(*cs, value).unwrap_or_default());
            let bound = one_dn(&router.route_in(
                Some("o"),
                mode,
                charsets,
                &format!("INSERT INTO {t} (k, dn, spelling) VALUES (?, ?, ?)"),
                &[
                    param,
                    Literal::Str(String::new()),
                    Literal::Str(String::new()),
                ],
            ));
            placed.push(("bound".into(), bound, None));
            for (form, dn, lit_sql) in placed {
                let dn = match dn {
                    Ok(dn) => dn,
                    Err(_) if form == "CONVERT latin1" || form == "CONVERT sjis" => {
                        convert_refusals += 1;
                        continue;
                    }
                    Err(e) => {
                        refusals.push(format!("{t}: {form} {spelling}: {e}"));
                        continue;
                    }
                };
                let res = match lit_sql {
                    Some(lit_sql) => {
                        let mut stmt = head.as_bytes().to_vec();
                        stmt.extend_from_slice(&lit_sql);
                        stmt.extend_from_slice(
                            format!(", '{dn}', '{form} {spelling}')").as_bytes(),
                        );
                        conn.query_drop(stmt).await
                    }
                    None => {
                        conn.exec_drop(
                            format!("INSERT INTO {t} (k, dn, spelling) VALUES (?, ?, ?)"),
                            vec![
                                Value::Bytes(value.clone()),
                                Value::Bytes(dn.into_bytes()),
                                Value::Bytes(format!("{form} {spelling}").into_bytes()),
                            ],
                        )
                        .await
                    }
                };
                match res {
                    Ok(()) => stored += 1,
                    Err(mysql_async::Error::Server(_)) => rejected += 1,
                    Err(e) => panic!("{t}: {spelling}: the connection failed: {e:?}"),
                }
            }
        }
        // Every value the column holds (equal under its collation) on one datanode.
        let groups: Vec<(String, String)> = utf8
            .query(format!(
                "SELECT GROUP_CONCAT(DISTINCT dn ORDER BY dn), GROUP_CONCAT(CONCAT(dn, ' ', spelling) SEPARATOR ' | ') FROM {t} GROUP BY k HAVING COUNT(DISTINCT dn) > 1"
            ))
            .await
            .expect("group by stored value");
        for (dns, spellings) in groups {
            violations.push(format!("{t}: one stored value on {dns}: {spellings}"));
        }
        // Point predicates in each charset: MariaDB's matching rows on the router's targets.
        for (cs, value, spelled) in &written {
            let conn = conns.get_mut(cs).expect("connection");
            let stmt = spliced(
                &format!("SELECT DISTINCT dn FROM {t} WHERE k = "),
                spelled,
                "",
            );
            let oracle: Result<Vec<String>, _> = conn.query(&stmt).await;
            let Ok(oracle) = oracle else {
                continue;
            };
            let oracle: BTreeSet<String> = oracle.into_iter().collect();
            let Ok(text) = router_text(*cs, &stmt) else {
                refusals.push(format!("{t}: SELECT {cs} {}: decode", hex_of(value)));
                continue;
            };
            checked += 1;
            match targets(&topo, &router.route_in(Some("o"), mode, Charsets::names(*cs), &text, &[]))
            {
                Ok(got) if oracle.is_subset(&got) => {}
                Ok(got) => violations.push(format!(
                    "{t}: WHERE k = {cs} {}: MariaDB's rows on {oracle:?}, the router targets {got:?}",
                    hex_of(value)
                )),
                Err(e) => refusals.push(format!("{t}: WHERE k = {cs} {}: {e}", hex_of(value))),
            }
        }
    }
    utf8.query_drop(format!("DROP DATABASE `{db}`"))
        .await
        .expect("drop database");
    println!(
        "charset oracle: {} values, {stored} rows stored ({rejected} rejected by MariaDB), {checked} predicates checked, {} refusals ({convert_refusals} more of CONVERT to latin1/sjis, as documented), {} violations",
        written.len(),
        refusals.len(),
        violations.len()
    );
    assert!(
        violations.is_empty() && refusals.is_empty(),
        "violations:\n{}\nrefusals:\n{}",
        violations.join("\n"),
        refusals.join("\n")
    );
}
