//! A text row's cells as the binary protocol carries them (a prepared statement's execute):
//! numbers as little-endian integers and floats, dates and times in their packed form; strings
//! and decimals stay as they are. The catalog's statement runs as text on Shoal's connection.

use mysql_common::constants::ColumnType;

use crate::merge::Column;

/// Text cells `cells` of columns `cols` as binary cells (what `encode_row` lays out).
pub fn binary_cells(cells: Vec<Option<Vec<u8>>>, cols: &[Column]) -> Vec<Option<Vec<u8>>> {
    cells
        .into_iter()
        .zip(cols)
        .map(|(c, col)| c.map(|v| cell(&v, col)))
        .collect()
}

fn text(v: &[u8]) -> &str {
    std::str::from_utf8(v).unwrap_or("").trim()
}

fn int_bytes(v: &[u8], n: usize) -> Vec<u8> {
    let s = text(v);
    let x: i128 = s.parse().unwrap_or(0);
    (x as u64).to_le_bytes()[..n].to_vec()
}

fn cell(v: &[u8], col: &Column) -> Vec<u8> {
    use ColumnType::*;
    match col.column_type {
        MYSQL_TYPE_TINY => int_bytes(v, 1),
        MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR => int_bytes(v, 2),
        MYSQL_TYPE_LONG | MYSQL_TYPE_INT24 => int_bytes(v, 4),
        MYSQL_TYPE_LONGLONG => int_bytes(v, 8),
        MYSQL_TYPE_FLOAT => text(v).parse::<f32>().unwrap_or(0.0).to_le_bytes().to_vec(),
        MYSQL_TYPE_DOUBLE => text(v).parse::<f64>().unwrap_or(0.0).to_le_bytes().to_vec(),
        MYSQL_TYPE_DATE
        | MYSQL_TYPE_NEWDATE
        | MYSQL_TYPE_DATETIME
        | MYSQL_TYPE_TIMESTAMP
        | MYSQL_TYPE_DATETIME2
        | MYSQL_TYPE_TIMESTAMP2 => datetime(text(v)),
        MYSQL_TYPE_TIME | MYSQL_TYPE_TIME2 => time(text(v)),
        _ => v.to_vec(),
    }
}

/// Microseconds of a `.ffffff` fraction (`""` -> 0).
fn micros(frac: &str) -> u32 {
    let digits: String = frac.chars().take(6).collect();
    format!("{digits:0<6}").parse().unwrap_or(0)
}

/// `YYYY-MM-DD[ HH:MM:SS[.ffffff]]` packed: 0, 4, 7 or 11 bytes.
fn datetime(s: &str) -> Vec<u8> {
    let (date, rest) = s.split_once(' ').unwrap_or((s, ""));
    let d: Vec<u32> = date.split('-').map(|p| p.parse().unwrap_or(0)).collect();
    let (hms, frac) = rest.split_once('.').unwrap_or((rest, ""));
    let t: Vec<u32> = hms.split(':').map(|p| p.parse().unwrap_or(0)).collect();
    let get = |v: &[u32], i: usize| v.get(i).copied().unwrap_or(0);
    let (y, mo, da) = (get(&d, 0), get(&d, 1), get(&d, 2));
    let (h, mi, se) = (get(&t, 0), get(&t, 1), get(&t, 2));
    let us = micros(frac);
    let mut out = Vec::with_capacity(11);
    if y == 0 && mo == 0 && da == 0 && h == 0 && mi == 0 && se == 0 && us == 0 {
        return out;
    }
    out.extend_from_slice(&(y as u16).to_le_bytes());
    out.extend_from_slice(&[mo as u8, da as u8]);
    if h == 0 && mi == 0 && se == 0 && us == 0 {
        return out;
    }
    out.extend_from_slice(&[h as u8, mi as u8, se as u8]);
    if us != 0 {
        out.extend_from_slice(&us.to_le_bytes());
    }
    out
}

/// `[-]HHH:MM:SS[.ffffff]` packed: 0, 8 or 12 bytes.
fn time(s: &str) -> Vec<u8> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let (hms, frac) = s.split_once('.').unwrap_or((s, ""));
    let t: Vec<u32> = hms.split(':').map(|p| p.parse().unwrap_or(0)).collect();
    let get = |i: usize| t.get(i).copied().unwrap_or(0);
    let (h, mi, se, us) = (get(0), get(1), get(2), micros(frac));
    let mut out = Vec::with_capacity(12);
    if h == 0 && mi == 0 && se == 0 && us == 0 {
        return out;
    }
    out.push(neg as u8);
    out.extend_from_slice(&(h / 24).to_le_bytes());
    out.extend_from_slice(&[(h % 24) as u8, mi as u8, se as u8]);
    if us != 0 {
        out.extend_from_slice(&us.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_times_pack_as_the_binary_protocol_does() {
        assert_eq!(datetime("0000-00-00 00:00:00"), Vec::<u8>::new());
        assert_eq!(datetime("2024-05-01"), vec![0xE8, 0x07, 5, 1]);
        assert_eq!(
            datetime("2024-05-01 12:30:05"),
            vec![0xE8, 0x07, 5, 1, 12, 30, 5]
        );
        assert_eq!(
            datetime("2024-05-01 00:00:00.5"),
            vec![0xE8, 0x07, 5, 1, 0, 0, 0, 0x20, 0xA1, 0x07, 0]
        );
        assert_eq!(time("-25:01:02"), vec![1, 1, 0, 0, 0, 1, 1, 2]);
        assert_eq!(time("00:00:00"), Vec::<u8>::new());
    }
}
