//! Column definitions of shard result sets, parsed once per result set.

use mysql_common::constants::{ColumnFlags, ColumnType};

use crate::error::Result;
use crate::wire::messages::{read_lenenc, read_lenenc_bytes};
use crate::wire::response::protocol_error;

/// A parsed column definition (protocol 4.1), with its raw payload to forward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub column_type: ColumnType,
    pub flags: ColumnFlags,
    pub decimals: u8,
    /// Character set / collation id as the server reports it: the collation of
    /// `character_set_results` (its default one), not the column's own; 63 for binary data.
    pub charset: u16,
    pub length: u32,
    /// Where the values come from: the physical database, table and column (empty for an
    /// expression).
    pub schema: String,
    pub org_table: String,
    pub org_name: String,
    /// The collation the column is declared with, when the executor learned it (see
    /// `exec::collations`): strings then compare under it rather than under `charset`.
    pub declared: Option<u16>,
    /// The definition packet as the shard sent it.
    pub raw: Vec<u8>,
}

impl Column {
    pub fn unsigned(&self) -> bool {
        self.flags.contains(ColumnFlags::UNSIGNED_FLAG)
    }

    pub fn binary_flag(&self) -> bool {
        self.flags.contains(ColumnFlags::BINARY_FLAG)
    }
}

/// Parses one column definition payload.
pub fn parse_column(payload: &[u8]) -> Result<Column> {
    let bad = || protocol_error("malformed column definition");
    let mut b = payload;
    // catalog, schema, table, org_table, name, org_name
    let mut fields = [&[][..]; 6];
    for f in &mut fields {
        *f = read_lenenc_bytes(&mut b).ok_or_else(bad)?;
    }
    let text = |s: &[u8]| String::from_utf8_lossy(s).into_owned();
    let fixed = read_lenenc(&mut b).ok_or_else(bad)?;
    if fixed < 10 || b.len() < 10 {
        return Err(bad());
    }
    let charset = u16::from_le_bytes([b[0], b[1]]);
    let length = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let column_type = ColumnType::try_from(b[6]).map_err(|_| bad())?;
    let flags = ColumnFlags::from_bits_truncate(u16::from_le_bytes([b[7], b[8]]));
    let decimals = b[9];
    Ok(Column {
        name: text(fields[4]),
        column_type,
        flags,
        decimals,
        charset,
        length,
        schema: text(fields[1]),
        org_table: text(fields[3]),
        org_name: text(fields[5]),
        declared: None,
        raw: payload.to_vec(),
    })
}

/// Whether two shards' result sets have the same shape: names, types, signedness, binary-ness,
/// scales and character sets. Lengths may differ (computed columns).
pub fn columns_agree(a: &[Column], b: &[Column]) -> bool {
    let key = ColumnFlags::UNSIGNED_FLAG | ColumnFlags::BINARY_FLAG;
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.name == y.name
                && x.column_type == y.column_type
                && (x.flags & key) == (y.flags & key)
                && x.decimals == y.decimals
                && x.charset == y.charset
        })
}
