//! HAVING over merged groups: SQL three-valued logic, MySQL's comparison rules between a
//! column's type and a literal. Anything whose MySQL result Shoal cannot reproduce exactly is
//! refused when the merger is built.

use std::cmp::Ordering;

use shoal_router::plan::{CmpOp, HavingSpec, Operand};
use shoal_router::sql::stmt::Literal;

use super::value::{Coll, Dec, Key, Kind, cmp_keys, key_of, latin1_byte, weights};
use super::{Protocol, column::Column, refuse, resolve};
use crate::error::Result;

#[derive(Debug, Clone)]
pub(super) enum Lit {
    Null,
    Num(Dec),
    Double(f64),
    Str(Vec<u8>),
    /// A string literal read as a temporal value of the column it is compared with.
    Time(i128),
}

#[derive(Debug, Clone)]
pub(super) enum Side {
    Col(usize),
    Lit(Lit),
}

#[derive(Debug, Clone)]
pub(super) enum Having {
    And(Box<Having>, Box<Having>),
    Or(Box<Having>, Box<Having>),
    Not(Box<Having>),
    Cmp {
        op: CmpOp,
        left: Side,
        right: Side,
    },
    IsNull {
        col: Option<usize>,
        lit_null: bool,
        negated: bool,
    },
}

fn lit(l: &Literal) -> Result<Lit> {
    Ok(match l {
        Literal::Null => Lit::Null,
        Literal::Int(i) => Lit::Num(Dec::new(*i, 0)),
        Literal::Double(f) => Lit::Double(*f),
        // An exponent makes the literal a DOUBLE in MySQL, compared as one.
        Literal::Decimal(s) if s.contains(['e', 'E']) => match s.parse::<f64>() {
            Ok(f) => Lit::Double(f),
            Err(_) => return Err(refuse(format!("HAVING with the number {s}"))),
        },
        Literal::Decimal(s) => match Dec::parse(s.as_bytes()) {
            Some(d) => Lit::Num(d),
            None => match s.parse::<f64>() {
                Ok(f) => Lit::Double(f),
                Err(_) => return Err(refuse(format!("HAVING with the number {s}"))),
            },
        },
        Literal::Str(s) => Lit::Str(s.as_bytes().to_vec()),
    })
}

fn numeric(k: Kind) -> bool {
    matches!(k, Kind::Int { .. } | Kind::Decimal | Kind::Float)
}

/// Checks that a column of kind `k` can be compared with `l` as MySQL does, and gives the
/// literal in the form the comparison needs.
fn check_pair(k: Kind, charset: u16, l: Lit) -> Result<Lit> {
    Ok(match (k, l) {
        (_, Lit::Null) => Lit::Null,
        (Kind::Int { .. } | Kind::Decimal | Kind::Float, l) => l,
        (Kind::Str(Coll::Latin1SwedishCi), Lit::Str(s)) => {
            // The literal is UTF-8 text; the column's values are latin1 bytes.
            let t = std::str::from_utf8(&s).unwrap_or("");
            let bytes: Option<Vec<u8>> = t.chars().map(latin1_byte).collect();
            match bytes {
                Some(b) => Lit::Str(b),
                None => {
                    return Err(refuse(
                        "HAVING comparing a latin1 column with a string outside latin1",
                    ));
                }
            }
        }
        (Kind::Str(Coll::Latin1SwedishCiUtf8 | Coll::Latin1BinUtf8), Lit::Str(s)) => {
            // Values and literal are UTF-8; the literal must be latin1 text to be weighed.
            let t = std::str::from_utf8(&s).unwrap_or("\u{FFFD}");
            if t.chars().any(|c| latin1_byte(c).is_none()) {
                return Err(refuse(
                    "HAVING comparing a latin1 column with a string outside latin1",
                ));
            }
            Lit::Str(s)
        }
        (Kind::Str(_), Lit::Str(s)) => {
            let utf8 = matches!(charset, 33 | 45 | 46 | 83 | 63);
            if !utf8 && !s.is_ascii() {
                return Err(refuse(
                    "HAVING comparing a string in this character set with a non-ASCII value",
                ));
            }
            Lit::Str(s)
        }
        (Kind::Str(_), l) => l,
        (Kind::DateTime, Lit::Str(s)) => {
            let v = key_of(Some(&s), &dummy(), Kind::DateTime, Protocol::Text).map_err(|_| {
                refuse("HAVING comparing a date with a string not in YYYY-MM-DD[ hh:mm:ss] form")
            })?;
            match v {
                Key::Time(t) => Lit::Time(t),
                _ => unreachable!("temporal key"),
            }
        }
        (Kind::Time, Lit::Str(s)) => {
            let v = key_of(Some(&s), &dummy(), Kind::Time, Protocol::Text).map_err(|_| {
                refuse("HAVING comparing a TIME with a string not in hh:mm:ss form")
            })?;
            match v {
                Key::Time(t) => Lit::Time(t),
                _ => unreachable!("temporal key"),
            }
        }
        _ => return Err(refuse("HAVING comparing this column type with this value")),
    })
}

fn dummy() -> Column {
    Column {
        name: String::new(),
        column_type: mysql_common::constants::ColumnType::MYSQL_TYPE_NULL,
        flags: mysql_common::constants::ColumnFlags::empty(),
        decimals: 0,
        charset: 63,
        length: 0,
        schema: String::new(),
        org_table: String::new(),
        org_name: String::new(),
        declared: None,
        raw: Vec::new(),
    }
}

fn side(o: &Operand, n: usize) -> Result<Side> {
    Ok(match o {
        Operand::Column(c) => Side::Col(resolve(*c, n)?),
        Operand::Value(l) => Side::Lit(lit(l)?),
    })
}

/// Resolves a HAVING tree against the columns, refusing what cannot be evaluated exactly.
pub(super) fn build(h: &HavingSpec, kinds: &[Kind], cols: &[Column]) -> Result<Having> {
    let n = kinds.len();
    Ok(match h {
        HavingSpec::And(a, b) => Having::And(
            Box::new(build(a, kinds, cols)?),
            Box::new(build(b, kinds, cols)?),
        ),
        HavingSpec::Or(a, b) => Having::Or(
            Box::new(build(a, kinds, cols)?),
            Box::new(build(b, kinds, cols)?),
        ),
        HavingSpec::Not(a) => Having::Not(Box::new(build(a, kinds, cols)?)),
        HavingSpec::IsNull { operand, negated } => match side(operand, n)? {
            Side::Col(c) => Having::IsNull {
                col: Some(c),
                lit_null: false,
                negated: *negated,
            },
            Side::Lit(l) => Having::IsNull {
                col: None,
                lit_null: matches!(l, Lit::Null),
                negated: *negated,
            },
        },
        HavingSpec::Cmp { op, left, right } => {
            let (l, r) = (side(left, n)?, side(right, n)?);
            let (l, r) = match (l, r) {
                (Side::Col(a), Side::Col(b)) => {
                    let (ka, kb) = (kinds[a], kinds[b]);
                    let ok = ka == kb && !matches!(ka, Kind::Incomparable(_))
                        || numeric(ka) && numeric(kb);
                    if !ok {
                        return Err(refuse("HAVING comparing columns of different types"));
                    }
                    (Side::Col(a), Side::Col(b))
                }
                (Side::Col(a), Side::Lit(v)) => (
                    Side::Col(a),
                    Side::Lit(check_pair(kinds[a], cols[a].charset, v)?),
                ),
                (Side::Lit(v), Side::Col(b)) => (
                    Side::Lit(check_pair(kinds[b], cols[b].charset, v)?),
                    Side::Col(b),
                ),
                (Side::Lit(_), Side::Lit(_)) => {
                    return Err(refuse("HAVING comparing two constants"));
                }
            };
            Having::Cmp {
                op: *op,
                left: l,
                right: r,
            }
        }
    })
}

/// MySQL's string-to-double: leading spaces, then the longest numeric prefix (0 if none).
fn str_to_f64(s: &[u8]) -> f64 {
    let s = std::str::from_utf8(s).unwrap_or("");
    let t = s.trim_start_matches([' ', '\t', '\n', '\r']);
    let b = t.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i == digits_start || &t[digits_start..i] == "." {
        return 0.0;
    }
    let mut end = i;
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let ds = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > ds {
            end = j;
        }
    }
    t[..end].parse().unwrap_or(0.0)
}

/// A value on one side of a comparison, as evaluated.
enum Val {
    Null,
    Key(Key),
    /// The raw cell of a string column (for conversions to a number).
    StrCol(Key, Vec<u8>),
    Lit(Lit),
}

fn f64_of(v: &Val) -> Option<f64> {
    match v {
        Val::Null | Val::Lit(Lit::Null) => None,
        Val::Key(Key::Int(i)) => Some(*i as f64),
        Val::Key(Key::Dec(d)) => Some(d.to_f64()),
        Val::Key(Key::Float(f)) => Some(*f),
        Val::StrCol(_, raw) => Some(str_to_f64(raw)),
        Val::Lit(Lit::Num(d)) => Some(d.to_f64()),
        Val::Lit(Lit::Double(f)) => Some(*f),
        Val::Lit(Lit::Str(s)) => Some(str_to_f64(s)),
        _ => None,
    }
}

fn dec_of(v: &Val) -> Option<Dec> {
    match v {
        Val::Key(Key::Int(i)) => Some(Dec::new(*i, 0)),
        Val::Key(Key::Dec(d)) => Some(*d),
        Val::Lit(Lit::Num(d)) => Some(*d),
        _ => None,
    }
}

fn is_null(v: &Val) -> bool {
    matches!(v, Val::Null | Val::Lit(Lit::Null) | Val::Key(Key::Null))
}

/// Compares two evaluated sides; `None` when either is NULL.
fn compare(a: &Val, b: &Val, kinds_str: Option<super::value::Coll>) -> Option<Ordering> {
    if is_null(a) || is_null(b) {
        return None;
    }
    // Exact when both are integers/decimals.
    if let (Some(x), Some(y)) = (dec_of(a), dec_of(b)) {
        return Some(x.cmp(&y));
    }
    match (a, b) {
        (Val::Key(x), Val::Key(y)) => return Some(cmp_keys(x, y)),
        (Val::StrCol(x, _), Val::StrCol(y, _)) => return Some(cmp_keys(x, y)),
        (Val::StrCol(x, _), Val::Lit(Lit::Str(s))) => {
            let y = weights(s, kinds_str?).ok()?;
            return Some(cmp_keys(x, &y));
        }
        (Val::Lit(Lit::Str(s)), Val::StrCol(y, _)) => {
            let x = weights(s, kinds_str?).ok()?;
            return Some(cmp_keys(&x, y));
        }
        (Val::Key(Key::Time(x)), Val::Lit(Lit::Time(y))) => return Some(x.cmp(y)),
        (Val::Lit(Lit::Time(x)), Val::Key(Key::Time(y))) => return Some(x.cmp(y)),
        _ => {}
    }
    let (x, y) = (f64_of(a)?, f64_of(b)?);
    x.partial_cmp(&y)
}

impl Having {
    /// Evaluates over a row's cells (in the client's protocol): `Some(true)` keeps the row.
    pub(super) fn eval(
        &self,
        cells: &[Option<&[u8]>],
        cols: &[Column],
        kinds: &[Kind],
        protocol: Protocol,
    ) -> Result<Option<bool>> {
        let val = |s: &Side| -> Result<Val> {
            Ok(match s {
                Side::Lit(l) => Val::Lit(l.clone()),
                Side::Col(c) => {
                    let cell = cells[*c];
                    match (cell, kinds[*c]) {
                        (None, _) => Val::Null,
                        (Some(raw), Kind::Str(_)) => {
                            Val::StrCol(key_of(cell, &cols[*c], kinds[*c], protocol)?, raw.to_vec())
                        }
                        _ => Val::Key(key_of(cell, &cols[*c], kinds[*c], protocol)?),
                    }
                }
            })
        };
        Ok(match self {
            Having::And(a, b) => {
                match (
                    a.eval(cells, cols, kinds, protocol)?,
                    b.eval(cells, cols, kinds, protocol)?,
                ) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                }
            }
            Having::Or(a, b) => {
                match (
                    a.eval(cells, cols, kinds, protocol)?,
                    b.eval(cells, cols, kinds, protocol)?,
                ) {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                }
            }
            Having::Not(a) => a.eval(cells, cols, kinds, protocol)?.map(|b| !b),
            Having::IsNull {
                col,
                lit_null,
                negated,
            } => {
                let null = match col {
                    Some(c) => cells[*c].is_none(),
                    None => *lit_null,
                };
                Some(null != *negated)
            }
            Having::Cmp { op, left, right } => {
                let (a, b) = (val(left)?, val(right)?);
                let coll = [left, right].iter().find_map(|s| match s {
                    Side::Col(c) => match kinds[*c] {
                        Kind::Str(c) => Some(c),
                        _ => None,
                    },
                    _ => None,
                });
                if *op == CmpOp::NullSafeEq {
                    let (na, nb) = (is_null(&a), is_null(&b));
                    if na || nb {
                        return Ok(Some(na && nb));
                    }
                    return Ok(compare(&a, &b, coll).map(|o| o == Ordering::Equal));
                }
                compare(&a, &b, coll).map(|o| match op {
                    CmpOp::Eq | CmpOp::NullSafeEq => o == Ordering::Equal,
                    CmpOp::NotEq => o != Ordering::Equal,
                    CmpOp::Lt => o == Ordering::Less,
                    CmpOp::Le => o != Ordering::Greater,
                    CmpOp::Gt => o == Ordering::Greater,
                    CmpOp::Ge => o != Ordering::Less,
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::str_to_f64;

    #[test]
    fn string_to_double_like_mysql() {
        assert_eq!(str_to_f64(b"12abc"), 12.0);
        assert_eq!(str_to_f64(b"  -1.5e2x"), -150.0);
        assert_eq!(str_to_f64(b"abc"), 0.0);
        assert_eq!(str_to_f64(b"1e"), 1.0);
        assert_eq!(str_to_f64(b".5"), 0.5);
    }
}
