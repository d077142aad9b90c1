//! A COM_STMT_EXECUTE's parameters as the client bound them: decoded from the packet
//! (checked against the statement's parameter count) and read as the router's values.

use shoal_router::plan::ParamValue;

use crate::backend::stmt_cache::ParamTypes;
use crate::error::{Error, Result};
use crate::wire::messages::{read_lenenc, read_lenenc_bytes};

/// One bound parameter as it came: type and its value bytes (`None` for NULL).
#[derive(Debug, Clone)]
pub struct RawParam {
    pub ty: u8,
    pub unsigned: u8,
    pub value: Option<Vec<u8>>,
}

/// Byte length of a binary-protocol value of type `ty` at the front of `b`.
fn value_len(ty: u8, b: &[u8]) -> Option<usize> {
    Some(match ty {
        0x06 => 0,
        0x01 => 1,
        0x02 | 0x0d => 2,
        0x03 | 0x09 | 0x04 => 4,
        0x08 | 0x05 => 8,
        0x07 | 0x0a | 0x0b | 0x0c => 1 + *b.first()? as usize,
        _ => {
            let mut s = b;
            let n = read_lenenc(&mut s)? as usize;
            // A length near 2^64 from a client must not overflow (fuzz finding).
            (b.len() - s.len()).checked_add(n)?
        }
    })
}

/// [`literal_in`] from a UTF-8 client.
pub(crate) fn literal(p: &RawParam) -> ParamValue {
    literal_in(p, shoal_router::charset::Charset::Utf8mb4)
}

/// The router's view of a bound value, its strings read in `cs` (the session's
/// `character_set_client`, which MariaDB reads them in).
pub(crate) fn literal_in(p: &RawParam, cs: shoal_router::charset::Charset) -> ParamValue {
    let Some(v) = &p.value else {
        return ParamValue::Null;
    };
    let unsigned = p.unsigned & 0x80 != 0;
    let int = |bytes: &[u8]| -> i128 {
        let mut buf = [0u8; 8];
        buf[..bytes.len()].copy_from_slice(bytes);
        if unsigned {
            u64::from_le_bytes(buf) as i128
        } else {
            // Sign-extend from the value's width.
            let shift = 64 - 8 * bytes.len() as u32;
            ((i64::from_le_bytes(buf) << shift) >> shift) as i128
        }
    };
    match p.ty {
        0x06 => ParamValue::Null,
        0x01 | 0x02 | 0x0d | 0x03 | 0x09 | 0x08 => ParamValue::Int(int(v)),
        0x04 => {
            ParamValue::Decimal(f32::from_le_bytes(v[..4].try_into().unwrap_or([0; 4])).to_string())
        }
        0x05 => {
            ParamValue::Decimal(f64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8])).to_string())
        }
        0x0a | 0x07 | 0x0c => ParamValue::Str(datetime_text(&v[1..])),
        0x0b => ParamValue::Str(time_text(&v[1..])),
        0x00 | 0xf6 => {
            let mut s = &v[..];
            let t = read_lenenc_bytes(&mut s).unwrap_or(&[]);
            ParamValue::Decimal(String::from_utf8_lossy(t).into_owned())
        }
        _ => {
            let mut s = &v[..];
            let t = read_lenenc_bytes(&mut s).unwrap_or(&[]);
            let text = crate::backend::charset::read_statement(cs, t)
                .map(std::borrow::Cow::into_owned)
                .unwrap_or_else(|_| String::from_utf8_lossy(t).into_owned());
            ParamValue::Str(text)
        }
    }
}

fn datetime_text(b: &[u8]) -> String {
    let g = |i: usize| b.get(i).copied().unwrap_or(0) as u32;
    let year = g(0) | (g(1) << 8);
    let mut s = format!("{year:04}-{:02}-{:02}", g(2), g(3));
    if b.len() >= 7 {
        s.push_str(&format!(" {:02}:{:02}:{:02}", g(4), g(5), g(6)));
    }
    if b.len() >= 11 {
        let us = g(7) | (g(8) << 8) | (g(9) << 16) | (g(10) << 24);
        s.push_str(&format!(".{us:06}"));
    }
    s
}

fn time_text(b: &[u8]) -> String {
    let g = |i: usize| b.get(i).copied().unwrap_or(0) as u32;
    if b.is_empty() {
        return "00:00:00".into();
    }
    let neg = g(0) == 1;
    let days = g(1) | (g(2) << 8) | (g(3) << 16) | (g(4) << 24);
    // u64: a client may send any 4-byte day count (the server clamps, the text must not panic).
    let hours = u64::from(days) * 24 + u64::from(g(5));
    let mut s = format!(
        "{}{hours:02}:{:02}:{:02}",
        if neg { "-" } else { "" },
        g(6),
        g(7)
    );
    if b.len() >= 12 {
        let us = g(8) | (g(9) << 8) | (g(10) << 16) | (g(11) << 24);
        s.push_str(&format!(".{us:06}"));
    }
    s
}

/// Decodes a COM_STMT_EXECUTE payload's parameters (`types` remembered from an earlier
/// execute when this one does not send them). Returns (flags, params).
pub(crate) fn decode_execute(
    p: &[u8],
    n: usize,
    types: &mut ParamTypes,
) -> Result<(u8, Vec<RawParam>)> {
    let mut out = Vec::new();
    let flags = decode_execute_into(p, n, types, &mut out)?;
    Ok((flags, out))
}

/// [`decode_execute`] into `out`, reusing its value buffers. Returns the flags.
pub(super) fn decode_execute_into(
    p: &[u8],
    n: usize,
    types: &mut ParamTypes,
    out: &mut Vec<RawParam>,
) -> Result<u8> {
    let bad = || Error::malformed("COM_STMT_EXECUTE");
    let flags = *p.get(5).ok_or_else(bad)?;
    let mut b = p.get(10..).ok_or_else(bad)?;
    out.truncate(n);
    if n == 0 {
        return Ok(flags);
    }
    let nb = n.div_ceil(8);
    let nulls = b.get(..nb).ok_or_else(bad)?;
    b = &b[nb..];
    let bound = *b.first().ok_or_else(bad)?;
    b = &b[1..];
    if bound == 1 {
        let t = b.get(..2 * n).ok_or_else(bad)?;
        types.clear();
        types.extend(t.chunks(2).map(|c| (c[0], c[1])));
        b = &b[2 * n..];
    }
    if types.len() != n {
        return Err(Error::malformed("COM_STMT_EXECUTE without parameter types"));
    }
    for (i, &(ty, unsigned)) in types.iter().enumerate() {
        if i == out.len() {
            out.push(RawParam {
                ty,
                unsigned,
                value: None,
            });
        }
        let param = &mut out[i];
        param.ty = ty;
        param.unsigned = unsigned;
        if nulls[i / 8] & (1 << (i % 8)) != 0 {
            param.value = None;
            continue;
        }
        let len = value_len(ty, b).ok_or_else(bad)?;
        let v = b.get(..len).ok_or_else(bad)?;
        b = &b[len..];
        let buf = param.value.get_or_insert_with(Vec::new);
        buf.clear();
        buf.extend_from_slice(v);
    }
    Ok(flags)
}
#[cfg(test)]
mod value_len_tests {
    use super::*;

    /// fuzz/findings/client_command-execute-value-len-overflow: a string parameter whose
    /// length-encoded length is 0xFFFFFFFFFFFFFFFF.
    #[test]
    fn huge_lenenc_length_is_refused_not_overflowed() {
        let b = [0xFEu8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
        assert_eq!(value_len(0xFE, &b), None);
    }
}
