//! Reading shard key literals the way MySQL compares them: numbers (from integer, decimal and
//! numeric string literals) and strings under the default case-insensitive, PAD SPACE collations.

/// A number read from a literal: its floor and whether it is a whole number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Num {
    pub floor: i128,
    pub integral: bool,
}

impl Num {
    pub fn int(i: i128) -> Num {
        Num {
            floor: i,
            integral: true,
        }
    }

    /// Smallest integer >= the value.
    pub fn ceil(self) -> i128 {
        if self.integral {
            self.floor
        } else {
            self.floor.saturating_add(1)
        }
    }
}

/// Largest magnitude we read exactly; beyond it a literal is refused (no BIGINT/DECIMAL(65,0)
/// shard key realistically holds it, and i128 arithmetic stays overflow-free).
const MAX_DIGITS: usize = 37;

/// An exact decimal number as written: sign, whole part and fraction digits (no trailing zeros).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exact {
    pub neg: bool,
    pub whole: i128,
    /// Fraction digits after the point, trailing zeros removed (empty for a whole number).
    pub frac: String,
}

impl Exact {
    /// Its floor and whether it is whole.
    pub fn num(&self) -> Num {
        let frac_nonzero = !self.frac.is_empty();
        let floor = if self.neg {
            -self.whole - i128::from(frac_nonzero)
        } else {
            self.whole
        };
        Num {
            floor,
            integral: !frac_nonzero,
        }
    }

    /// Rounded to `scale` fraction digits, half away from zero: what MariaDB stores when it puts
    /// a DECIMAL (or a numeric string) into a column of that scale (scale 0 for integer columns).
    pub fn round(&self, scale: usize) -> Exact {
        if self.frac.len() <= scale {
            return self.clone();
        }
        let up = self.frac.as_bytes()[scale] >= b'5';
        let mut kept: Vec<u8> = self.frac.as_bytes()[..scale].to_vec();
        let mut whole = self.whole;
        if up {
            // Add one unit in the last kept place, carrying into the whole part.
            let mut i = kept.len();
            loop {
                if i == 0 {
                    whole += 1;
                    break;
                }
                i -= 1;
                if kept[i] == b'9' {
                    kept[i] = b'0';
                } else {
                    kept[i] += 1;
                    break;
                }
            }
        }
        while kept.last() == Some(&b'0') {
            kept.pop();
        }
        let neg = self.neg && (whole != 0 || !kept.is_empty());
        Exact {
            neg,
            whole,
            // Only ASCII digits were kept.
            frac: String::from_utf8(kept).unwrap_or_default(),
        }
    }

    /// Whether rounding to some scale could move the value's floor (used when the column's scale
    /// is not known): a positive value rounds up to the next integer only if its first fraction
    /// digit is 5 or more; a negative one rounds towards zero onto an integer only if it is
    /// below 5.
    pub fn floor_depends_on_scale(&self) -> bool {
        match self.frac.as_bytes().first() {
            None => false,
            Some(&d) if self.neg => d < b'5',
            Some(&d) => d >= b'5',
        }
    }

    /// The shortest decimal that reads back as `d` (how MariaDB turns a DOUBLE into a DECIMAL
    /// before rounding it to the column's scale: `2.675e0` is stored as 2.68 in DECIMAL(10,2)).
    pub fn of_double(d: f64) -> Option<Exact> {
        if !d.is_finite() {
            return None;
        }
        // Rust's `Display` for f64 prints the shortest round-trip digits without an exponent.
        parse_exact(&format!("{d}"))
    }
}

/// The whitespace MariaDB skips around a number in a string.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

/// Parses a number as MySQL reads a numeric literal or a clean numeric string: surrounding
/// whitespace, an optional sign, digits with an optional fraction, an optional exponent
/// (`' 42 '`, `'-7'`, `'12.50'`, `'.5'`, `'1e3'`). Anything else (`'42abc'`, `''`) is `None`:
/// MySQL would silently compare such strings by a numeric prefix (and refuse to store them in
/// strict mode), and we refuse rather than guess.
pub fn parse_exact(s: &str) -> Option<Exact> {
    let s = s.trim_matches(is_space);
    let (neg, s) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => {
            let e = &s[i + 1..];
            let e_digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if e_digits.is_empty()
                || !e_digits.bytes().all(|b| b.is_ascii_digit())
                || e_digits.len() > 4
            {
                return None;
            }
            (&s[..i], e.parse::<i64>().ok()?)
        }
        None => (s, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int_part.is_empty() && frac_part.is_empty()
        || !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    // value = digits * 10^(point - digits.len()), with `point` digits before the decimal point.
    let digits: String = int_part.chars().chain(frac_part.chars()).collect();
    let point = int_part.len() as i64 + exp;
    let lead = digits.len() - digits.trim_start_matches('0').len();
    let digits = &digits[lead..];
    let point = point - lead as i64;
    let digits = digits.trim_end_matches('0');
    if digits.is_empty() {
        return Some(Exact {
            neg: false,
            whole: 0,
            frac: String::new(),
        });
    }
    let (whole, frac) = if point <= 0 {
        (
            String::new(),
            format!("{}{digits}", "0".repeat((-point) as usize)),
        )
    } else if point as usize >= digits.len() {
        let zeros = point as usize - digits.len();
        if digits.len() + zeros > MAX_DIGITS {
            return None;
        }
        (format!("{digits}{}", "0".repeat(zeros)), String::new())
    } else {
        let p = point as usize;
        (digits[..p].to_string(), digits[p..].to_string())
    };
    if whole.len() > MAX_DIGITS {
        return None;
    }
    let whole: i128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    Some(Exact { neg, whole, frac })
}

/// [`parse_exact`] reduced to floor and integrality.
pub fn parse_number(s: &str) -> Option<Num> {
    parse_exact(s).map(|e| e.num())
}

/// The double MariaDB reads from a clean numeric string or an approximate literal; `None` for
/// anything [`parse_exact`] refuses, and for overflow (`1e400`).
pub fn parse_double(s: &str) -> Option<f64> {
    parse_exact(s)?;
    let d: f64 = s.trim_matches(is_space).parse().ok()?;
    d.is_finite().then_some(d)
}

/// The distance from `d` to the next double away from zero.
pub fn ulp(d: f64) -> f64 {
    let a = d.abs();
    f64::from_bits(a.to_bits() + 1) - a
}

/// 2^53: below it every integer is a double, and every double with a fraction is not an integer.
pub const EXACT_INT_DOUBLE: f64 = 9_007_199_254_740_992.0;

/// Beyond this magnitude no number a shard key column holds compares equal to a double (BIGINT
/// UNSIGNED ends at 1.8e19, and i128 holds the arithmetic).
const MAX_DOUBLE: f64 = 1e36;

/// The integers `n` whose conversion to double can equal `d` (MariaDB compares an integer column
/// with a DOUBLE as doubles), as an inclusive range; `None` when there is none, and the whole
/// i128 range when `d` is too large to reason about.
pub fn ints_equal_to_double(d: f64) -> Option<(i128, i128)> {
    if !d.is_finite() || d.abs() >= MAX_DOUBLE {
        return Some((i128::MIN, i128::MAX));
    }
    if d.abs() < EXACT_INT_DOUBLE {
        return (d.fract() == 0.0).then_some((d as i128, d as i128));
    }
    // Integers within one ulp of `d` (the exact set is within half an ulp, ties to even); when
    // there are few, exactly those that convert to `d` (`as` rounds to nearest, ties to even,
    // as the server's conversion does).
    let e = ulp(d);
    let (lo, hi) = ((d - e) as i128, (d + e) as i128);
    if e > 65536.0 {
        return Some((lo, hi));
    }
    let mut hit = (lo..=hi).filter(|&n| n as f64 == d);
    let first = hit.next()?;
    Some((first, hit.next_back().unwrap_or(first)))
}

/// Floors of the decimals whose conversion to double can equal `d`, as an inclusive range.
pub fn floors_near_double(d: f64) -> (i128, i128) {
    if !d.is_finite() || d.abs() >= MAX_DOUBLE {
        return (i128::MIN, i128::MAX);
    }
    let e = ulp(d);
    ((d - e).floor() as i128, (d + e).floor() as i128)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Option<(i128, bool)> {
        parse_number(s).map(|n| (n.floor, n.integral))
    }

    #[test]
    fn numbers() {
        assert_eq!(n("42"), Some((42, true)));
        assert_eq!(n(" 42 "), Some((42, true)));
        assert_eq!(n("+42"), Some((42, true)));
        assert_eq!(n("-42"), Some((-42, true)));
        assert_eq!(n("042"), Some((42, true)));
        assert_eq!(n("12.50"), Some((12, false)));
        assert_eq!(n("12.00"), Some((12, true)));
        assert_eq!(n("-12.5"), Some((-13, false)));
        assert_eq!(n("-0.5"), Some((-1, false)));
        assert_eq!(n(".5"), Some((0, false)));
        assert_eq!(n("5."), Some((5, true)));
        assert_eq!(n("1e3"), Some((1000, true)));
        assert_eq!(n("1.5E1"), Some((15, true)));
        assert_eq!(n("15e-1"), Some((1, false)));
        assert_eq!(n("0.000"), Some((0, true)));
        assert_eq!(n("-0"), Some((0, true)));
        assert_eq!(n("9223372036854775807"), Some((i64::MAX.into(), true)));
        assert_eq!(n("-9223372036854775808"), Some((i64::MIN.into(), true)));
        assert_eq!(n("18446744073709551615"), Some((u64::MAX.into(), true)));
        for bad in [
            "", " ", "-", "abc", "42abc", "1e", "1e+", "..5", "1.2.3", "0x10", "1e99999", "--1",
        ] {
            assert_eq!(n(bad), None, "{bad:?}");
        }
        assert_eq!(n(&"9".repeat(40)), None);
    }
}
