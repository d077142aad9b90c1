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

/// Flags that change how a value is read or written: they must agree across shards.
const VALUE_FLAGS: ColumnFlags = ColumnFlags::UNSIGNED_FLAG
    .union(ColumnFlags::BINARY_FLAG)
    .union(ColumnFlags::ZEROFILL_FLAG)
    .union(ColumnFlags::ENUM_FLAG)
    .union(ColumnFlags::SET_FLAG);

/// Whether two shards' result sets have the same shape (see [`merge_columns`]).
pub fn columns_agree(a: &[Column], b: &[Column]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| column_agrees(x, y))
}

/// Same name, type, value flags, scale and character set: the values of one can be merged
/// with the other's and read under one definition.
fn column_agrees(x: &Column, y: &Column) -> bool {
    // A string's decimals is no scale: see [`string_decimals`].
    let scale_agrees = is_string(x.column_type) || x.decimals == y.decimals;
    // A number or a temporal value reads the same with or without BINARY: MariaDB sets it on
    // COUNT/SUM over an empty table ("no matching row in const table") and not where rows are
    // read, so a shard without rows must not make the merge refuse. Merged, the flag stays
    // only where every shard has it, as one server describes the whole table.
    let value_flags = if is_string(x.column_type) {
        VALUE_FLAGS
    } else {
        VALUE_FLAGS.difference(ColumnFlags::BINARY_FLAG)
    };
    x.name == y.name
        && x.column_type == y.column_type
        && (x.flags & value_flags) == (y.flags & value_flags)
        && scale_agrees
        && x.charset == y.charset
}

/// The decimals of a string column merged: the least any shard reports. MariaDB describes a
/// string with 0 where it reads the value through a field (of the table, or of the temporary
/// table a GROUP BY fills) and with NOT_FIXED_DEC (39) where it sends the computed item, so
/// the same statement says 0 or 39 as the plan goes; no value reads differently. A
/// COM_STMT_PREPARE never reads rows and says 39 for every string expression, where its
/// EXECUTE grouping through a temporary table says 0 (`MAX(varchar) ... GROUP BY` an
/// unindexed column): the definitions of a datanode's union of tables come from such a
/// PREPARE (`exec::datanode_union`), so a shard that executed the statement alone is the one
/// to believe, and it says at most what the PREPARE says.
fn string_decimals(shards: &[Vec<Column>], k: usize) -> u8 {
    shards.iter().map(|s| s[k].decimals).min().unwrap_or(0)
}

/// Types whose values are text or bytes, where BINARY tells the two apart.
fn is_string(t: ColumnType) -> bool {
    use ColumnType::*;
    is_char_or_blob(t)
        || matches!(
            t,
            MYSQL_TYPE_ENUM
                | MYSQL_TYPE_SET
                | MYSQL_TYPE_JSON
                | MYSQL_TYPE_GEOMETRY
                | MYSQL_TYPE_BIT
        )
}

/// CHAR, VARCHAR, BINARY, VARBINARY and the TEXT/BLOB types.
pub fn is_char_or_blob(t: ColumnType) -> bool {
    use ColumnType::*;
    matches!(
        t,
        MYSQL_TYPE_VARCHAR
            | MYSQL_TYPE_VAR_STRING
            | MYSQL_TYPE_STRING
            | MYSQL_TYPE_TINY_BLOB
            | MYSQL_TYPE_MEDIUM_BLOB
            | MYSQL_TYPE_LONG_BLOB
            | MYSQL_TYPE_BLOB
    )
}

/// The definitions of the merged result from every shard's, as one server would describe the
/// logical table: the shards must agree on every column's name, type, scale (decimals),
/// character set and the flags that change how values read (unsigned, binary, zerofill,
/// enum/set), else `None` (a real conflict: the values could not be merged or described
/// exactly). What differs is merged: the display length is the widest (a column widened on
/// some shards, or a definition that depends on the physical table), NOT NULL holds only when
/// every shard says so, and a key flag (primary, unique, multiple, part of a key...) only when
/// every shard's column has it; a string's decimals, which is no scale, is the least any shard
/// reports (see [`string_decimals`]). The first shard's definition is kept byte for byte where
/// nothing differs, else its length, flags and decimals are rewritten in place.
pub fn merge_columns(shards: &[Vec<Column>]) -> Option<Vec<Column>> {
    let (first, rest) = shards.split_first()?;
    if !rest.iter().all(|s| columns_agree(first, s)) {
        return None;
    }
    let mut merged = first.clone();
    for (k, c) in merged.iter_mut().enumerate() {
        let length = rest.iter().map(|s| s[k].length).fold(c.length, u32::max);
        let flags = rest.iter().fold(c.flags, |f, s| f & s[k].flags);
        let decimals = if is_string(c.column_type) {
            string_decimals(shards, k)
        } else {
            c.decimals
        };
        if length != c.length || flags != c.flags || decimals != c.decimals {
            c.length = length;
            c.flags = flags;
            c.decimals = decimals;
            rewrite_fixed(c)?;
        }
    }
    Some(merged)
}

/// Writes `length`, `flags` and `decimals` into the definition packet (`raw`).
fn rewrite_fixed(c: &mut Column) -> Option<()> {
    let mut b = &c.raw[..];
    for _ in 0..6 {
        read_lenenc_bytes(&mut b)?;
    }
    read_lenenc(&mut b)?;
    // charset (2), length (4), type (1), flags (2), decimals (1)
    let at = c.raw.len() - b.len();
    let fixed = c.raw.get_mut(at..at + 10)?;
    fixed[2..6].copy_from_slice(&c.length.to_le_bytes());
    fixed[7..9].copy_from_slice(&c.flags.bits().to_le_bytes());
    fixed[9] = c.decimals;
    Some(())
}
