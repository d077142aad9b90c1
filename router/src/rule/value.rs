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

/// Parses a number as MySQL reads a numeric literal or a clean numeric string: surrounding
/// whitespace, an optional sign, digits with an optional fraction, an optional exponent
/// (`' 42 '`, `'-7'`, `'12.50'`, `'.5'`, `'1e3'`). Anything else (`'42abc'`, `''`) is `None`:
/// MySQL would silently compare such strings by a numeric prefix, and we refuse rather than guess.
pub fn parse_number(s: &str) -> Option<Num> {
    let s = s.trim_matches(|c: char| c.is_ascii_whitespace());
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
    // value = digits * 10^-(scale)
    let digits: String = int_part.chars().chain(frac_part.chars()).collect();
    let digits = digits.trim_start_matches('0');
    let scale = frac_part.len() as i64 - exp;
    let (whole, frac_nonzero): (&str, bool);
    let padded;
    if scale <= 0 {
        if digits.is_empty() {
            return Some(Num::int(0));
        }
        if digits.len() as i64 - scale > MAX_DIGITS as i64 {
            return None;
        }
        padded = format!("{digits}{}", "0".repeat((-scale) as usize));
        whole = &padded;
        frac_nonzero = false;
    } else {
        let scale = scale as usize;
        if digits.len() > scale {
            whole = &digits[..digits.len() - scale];
            frac_nonzero = digits[digits.len() - scale..].bytes().any(|b| b != b'0');
        } else {
            whole = "";
            frac_nonzero = digits.bytes().any(|b| b != b'0');
        }
        if whole.len() > MAX_DIGITS {
            return None;
        }
    }
    let magnitude: i128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let floor = if neg {
        -magnitude - i128::from(frac_nonzero)
    } else {
        magnitude
    };
    Some(Num {
        floor,
        integral: !frac_nonzero,
    })
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
