//! `date`: shard = number of whole intervals (days, weeks, months or years) from a start date.
//! Values are DATE/DATETIME/TIMESTAMP literals: `'YYYY-MM-DD'` optionally followed by a time
//! (`' hh:mm[:ss[.fraction]]'`, or `T` instead of the space).

use std::ops::Bound;

use super::{ParamIssue, ShardValue};
use crate::config::{DateUnit, RuleConfig};
use crate::error::{RouterError, RuleError};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DateRule {
    unit: DateUnit,
    interval: i64,
    start: Date,
    default: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Date {
    pub year: i64,
    pub month: i64,
    pub day: i64,
}

/// A parsed date-time literal: its calendar day and time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DateTime {
    pub date: Date,
    /// Microseconds since midnight.
    pub micros: i64,
    pub midnight: bool,
}

impl DateTime {
    /// Orders date-times: (days since 1970, microseconds into the day).
    fn instant(self) -> (i64, i64) {
        (self.date.days(), self.micros)
    }
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

impl Date {
    /// Days since 1970-01-01 (proleptic Gregorian; H. Hinnant's `days_from_civil`).
    pub fn days(self) -> i64 {
        let y = if self.month <= 2 {
            self.year - 1
        } else {
            self.year
        };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (self.month + 9) % 12;
        let doy = (153 * mp + 2) / 5 + self.day - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }
}

fn num(s: &str, min_len: usize, max_len: usize) -> Option<i64> {
    if s.len() < min_len || s.len() > max_len || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses `YYYY-MM-DD[( |T)hh:mm[:ss[.ffffff]]]` with surrounding spaces allowed. Month and day
/// may have one digit, as MySQL accepts. Invalid calendar dates (`2023-02-29`) and the zero date
/// are `None`.
pub(crate) fn parse_datetime(s: &str) -> Option<DateTime> {
    let s = s.trim_matches(' ');
    // MariaDB's compact spellings: `YYYYMMDD` and `YYYYMMDD[T]hhmmss` (checked on 10.11; the
    // two-digit-year forms are not read, so they are refused).
    let b = s.as_bytes();
    if b.iter().all(u8::is_ascii_digit) && (b.len() == 8 || b.len() == 14) {
        let time = (b.len() == 14).then(|| format!("{}:{}:{}", &s[8..10], &s[10..12], &s[12..14]));
        let date = format!("{}-{}-{}", &s[..4], &s[4..6], &s[6..8]);
        return parse_datetime(&match time {
            Some(t) => format!("{date} {t}"),
            None => date,
        });
    }
    if b.len() == 15
        && b[8] == b'T'
        && s[..8]
            .bytes()
            .chain(s[9..].bytes())
            .all(|c| c.is_ascii_digit())
    {
        return parse_datetime(&format!("{}{}", &s[..8], &s[9..]));
    }
    let (date, time) = match s.find([' ', 'T']) {
        Some(i) => (&s[..i], Some(s[i + 1..].trim_start_matches(' '))),
        None => (s, None),
    };
    // Any of these delimits the date's parts, as in MariaDB ('2024/01/31', '2024.01.31').
    let mut parts = date.split(['-', '/', '.']);
    let year = num(parts.next()?, 4, 4)?;
    let month = num(parts.next()?, 1, 2)?;
    let day = num(parts.next()?, 1, 2)?;
    if parts.next().is_some() || !(1..=12).contains(&month) || year == 0 {
        return None;
    }
    if day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let micros = match time {
        None => 0,
        Some(t) => {
            let (hms, frac) = t.split_once('.').unwrap_or((t, ""));
            let mut f = hms.split(':');
            let h = num(f.next()?, 1, 2)?;
            let m = num(f.next()?, 1, 2)?;
            let sec = match f.next() {
                Some(x) => num(x, 1, 2)?,
                None => 0,
            };
            if f.next().is_some() || h > 23 || m > 59 || sec > 59 {
                return None;
            }
            if !frac.bytes().all(|b| b.is_ascii_digit()) || frac.len() > 6 {
                return None;
            }
            let frac_us: i64 = format!("{frac:0<6}").parse().ok()?;
            ((h * 60 + m) * 60 + sec) * 1_000_000 + frac_us
        }
    };
    Some(DateTime {
        date: Date { year, month, day },
        micros,
        midnight: micros == 0,
    })
}

impl DateRule {
    pub(crate) fn compile(cfg: &RuleConfig) -> Result<DateRule, ParamIssue> {
        let Some(start) = &cfg.start else {
            return Err(ParamIssue::at(
                "start",
                "a date rule needs `start: YYYY-MM-DD`",
            ));
        };
        let start = match parse_datetime(start) {
            Some(dt) if dt.midnight => dt.date,
            _ => {
                return Err(ParamIssue::at(
                    "start",
                    format!("{start:?} is not a date YYYY-MM-DD"),
                ));
            }
        };
        let Some(unit) = cfg.unit else {
            return Err(ParamIssue::at(
                "unit",
                "a date rule needs `unit: day|week|month|year`",
            ));
        };
        match unit {
            DateUnit::Month if start.day != 1 => {
                return Err(ParamIssue::at(
                    "start",
                    "with unit month, start on the 1st of a month",
                ));
            }
            DateUnit::Year if (start.month, start.day) != (1, 1) => {
                return Err(ParamIssue::at(
                    "start",
                    "with unit year, start on January 1st",
                ));
            }
            _ => {}
        }
        let interval = cfg.interval.unwrap_or(1);
        if interval == 0 {
            return Err(ParamIssue::at("interval", "must be at least 1"));
        }
        Ok(DateRule {
            unit,
            interval: i64::from(interval),
            start,
            default: cfg.default,
        })
    }

    /// The start date as `YYYY-MM-DD`: a value the rule places on its first shard.
    pub(crate) fn start_text(&self) -> String {
        let d = self.start;
        format!("{:04}-{:02}-{:02}", d.year, d.month, d.day)
    }

    /// Interval number of a date: 0 for the first interval, negative before the start.
    fn index(&self, d: Date) -> i64 {
        let units = match self.unit {
            DateUnit::Day => d.days() - self.start.days(),
            DateUnit::Week => (d.days() - self.start.days()).div_euclid(7),
            DateUnit::Month => (d.year * 12 + d.month) - (self.start.year * 12 + self.start.month),
            DateUnit::Year => d.year - self.start.year,
        };
        units.div_euclid(self.interval)
    }

    pub(crate) fn route(
        &self,
        rule: &str,
        shards: usize,
        v: &ShardValue,
    ) -> Result<usize, RuleError> {
        let digits;
        let s = match v {
            ShardValue::Str(s) => *s,
            // A number YYYYMMDD or YYYYMMDDhhmmss is a date to a DATE/DATETIME column.
            ShardValue::Int(i)
                if (10_000_000..100_000_000).contains(i)
                    || (10_000_000_000_000..100_000_000_000_000).contains(i) =>
            {
                digits = i.to_string();
                &digits
            }
            _ => {
                return Err(RouterError::wrong_value(format!(
                    "rule {rule:?} shards by date: write the value as a quoted date 'YYYY-MM-DD', not {v}"
                )));
            }
        };
        let Some(dt) = parse_datetime(s) else {
            return Err(RouterError::wrong_value(format!(
                "rule {rule:?}: incorrect date value {v} (expected 'YYYY-MM-DD[ hh:mm:ss]')"
            )));
        };
        let i = self.index(dt.date);
        if i >= 0 && (i as u64) < shards as u64 {
            return Ok(i as usize);
        }
        self.default.ok_or_else(|| {
            let where_ = if i < 0 {
                "before the rule's start"
            } else {
                "after the rule's last shard"
            };
            RouterError::no_shard(format!(
                "rule {rule:?}: {v} is {where_} and the rule has no default"
            ))
        })
    }

    pub(crate) fn shards_between(
        &self,
        shards: usize,
        lo: Bound<&ShardValue>,
        hi: Bound<&ShardValue>,
    ) -> Option<Vec<usize>> {
        let read = |v: &ShardValue| match v {
            ShardValue::Str(s) => parse_datetime(s),
            _ => None,
        };
        // Day-granular: a DATETIME greater than '2024-01-31' can still be on Jan 31, so an
        // exclusive lower bound keeps its day; an exclusive upper bound at midnight excludes its
        // day (every value below 'D 00:00:00' is on an earlier day).
        // An empty range (lo above hi, or equal with an exclusive end) holds no value.
        let instant = |b: Bound<&ShardValue>| match b {
            Bound::Included(v) | Bound::Excluded(v) => read(v).map(DateTime::instant),
            Bound::Unbounded => None,
        };
        if let (Some(l), Some(h)) = (instant(lo), instant(hi)) {
            let exclusive = matches!(lo, Bound::Excluded(_)) || matches!(hi, Bound::Excluded(_));
            if l > h || (l == h && exclusive) {
                return Some(Vec::new());
            }
        }
        let first_day = match lo {
            Bound::Unbounded => None,
            Bound::Included(v) | Bound::Excluded(v) => Some(read(v)?.date.days()),
        };
        let last_day = match hi {
            Bound::Unbounded => None,
            Bound::Included(v) => Some(read(v)?.date.days()),
            Bound::Excluded(v) => {
                let dt = read(v)?;
                Some(dt.date.days() - i64::from(dt.midnight))
            }
        };
        if let (Some(a), Some(b)) = (first_day, last_day)
            && a > b
        {
            return Some(Vec::new());
        }
        let first = first_day.map_or(i64::MIN, |d| self.index(date_from_days(d)));
        let last = last_day.map_or(i64::MAX, |d| self.index(date_from_days(d)));
        let mut out = Vec::new();
        if first > last {
            return Some(out);
        }
        let count = shards as i64;
        let (a, b) = (first.max(0), last.min(count - 1));
        if a <= b {
            out.extend((a as usize)..=(b as usize));
        }
        if (first < 0 || last >= count)
            && let Some(d) = self.default
        {
            out.push(d);
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }
}

/// Inverse of [`Date::days`] (H. Hinnant's `civil_from_days`).
pub(crate) fn date_from_days(z: i64) -> Date {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    Date {
        year: if m <= 2 { y + 1 } else { y },
        month: m,
        day: d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_round_trip() {
        assert_eq!(
            Date {
                year: 1970,
                month: 1,
                day: 1
            }
            .days(),
            0
        );
        assert_eq!(
            Date {
                year: 2000,
                month: 3,
                day: 1
            }
            .days(),
            11017
        );
        for z in -800_000..800_000i64 {
            if z % 997 == 0 {
                let d = date_from_days(z);
                assert_eq!(d.days(), z);
                assert!(d.day >= 1 && d.day <= days_in_month(d.year, d.month));
            }
        }
    }

    #[test]
    fn parses_dates() {
        let p = |s| parse_datetime(s).map(|d| (d.date.year, d.date.month, d.date.day, d.midnight));
        assert_eq!(p("2024-02-29"), Some((2024, 2, 29, true)));
        assert_eq!(p("2024-2-9"), Some((2024, 2, 9, true)));
        assert_eq!(p("2024-02-29 00:00:00"), Some((2024, 2, 29, true)));
        assert_eq!(p("2024-02-29 00:00:00.000"), Some((2024, 2, 29, true)));
        assert_eq!(p("2024-02-29T10:30"), Some((2024, 2, 29, false)));
        assert_eq!(p("2024/02/29"), Some((2024, 2, 29, true)));
        assert_eq!(p("2024.2.29"), Some((2024, 2, 29, true)));
        assert_eq!(p("20240229"), Some((2024, 2, 29, true)));
        assert_eq!(p("20240229103000"), Some((2024, 2, 29, false)));
        assert_eq!(p("20240229T103000"), Some((2024, 2, 29, false)));
        assert_eq!(p("20230229"), None);
        assert_eq!(p("2024-02-29 23:59:59.999999"), Some((2024, 2, 29, false)));
        for bad in [
            "2023-02-29",
            "2024-13-01",
            "2024-00-10",
            "0000-00-00",
            "24-01-01",
            "2024011",
            "240101",
            "2024-01-01 24:00:00",
            "2024-01-01 10",
            "abc",
            "",
        ] {
            assert_eq!(p(bad), None, "{bad:?}");
        }
    }
}
