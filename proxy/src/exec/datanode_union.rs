//! Reads over several tables of one datanode (table-per-shard) inside a transaction.
//!
//! Outside a transaction the second physical table of a datanode is read on a connection of
//! its own, side by side with the first (`scatter.rs`). Inside one, another connection would
//! read outside the transaction's snapshot and miss its uncommitted writes, so the datanode's
//! per-table statements (the arms) run as one statement on the transaction's connection:
//!
//! ```text
//! (arm 1) UNION ALL (arm 2) [ORDER BY <the merge's order, by position>] [LIMIT offset+limit]
//! ```
//!
//! Each arm keeps its own per-shard rewrite (partial aggregates, hidden columns, its LIMIT);
//! the outer ORDER BY sorts the datanode's one stream as the merge expects each stream sorted
//! (positions of the same columns, compared under the collation the arms' columns carry, which
//! the union keeps). With GROUP BY, equal group keys of several arms arrive as adjacent rows of
//! one stream, which the merge folds (see `Merger::arms`).
//!
//! A UNION's column definitions name no table and lose key flags, so the client gets those of
//! the first arm, read with a COM_STMT_PREPARE of it (no rows are read; the statement is closed
//! right after), spliced with the union's own name, type, length and character set (which the
//! rows are encoded with; a prepared statement's parameters name its columns by their values at
//! EXECUTE).

use mysql_common::constants::{ColumnFlags, ColumnType};
use shoal_router::plan::{Column, MergeSpec, Params, Target};
use shoal_router::sql::lex::{self, TokKind};
use shoal_router::topology::DatanodeId;

use super::request::close_statements;
use super::unsupported;
use crate::backend::conn::BackendConn;
use crate::error::Result;
use crate::merge::{Column as ColumnDef, integer_width, parse_column, widen_integers};
use crate::wire::messages::{put_lenenc_bytes, read_lenenc, read_lenenc_bytes};

/// The targets of one datanode, in the order the router listed them.
pub(super) struct Arms {
    pub datanode: DatanodeId,
    pub targets: Vec<Target>,
}

/// Groups `targets` by datanode, each group at its first target's place.
pub(super) fn by_datanode(targets: Vec<Target>) -> Vec<Arms> {
    let mut out: Vec<Arms> = Vec::new();
    for t in targets {
        match out.iter_mut().find(|a| a.datanode == t.datanode) {
            Some(a) => a.targets.push(t),
            None => out.push(Arms {
                datanode: t.datanode,
                targets: vec![t],
            }),
        }
    }
    out
}

/// Words MariaDB refuses in a SELECT that is a member of a UNION (1234, or a syntax error for
/// a member starting with WITH or ending in PROCEDURE): such a statement is refused here.
const NOT_IN_UNION: &[&str] = &["HIGH_PRIORITY", "SQL_BUFFER_RESULT", "PROCEDURE"];

/// Words MariaDB refuses in a member of a UNION that only tell the query cache what to do
/// (mariadb-dump reads every table with `/*!40001 SQL_NO_CACHE */`): left out of the arms,
/// which read the same rows without them.
const CACHE_HINTS: &[&str] = &["SQL_CACHE", "SQL_NO_CACHE"];

/// The one statement the arms of a datanode run as. `columns` is how many columns each arm
/// returns (hidden ones included), to resolve the merge's column references to positions.
pub(super) fn union_target(arms: &[Target], spec: &MergeSpec, columns: usize) -> Result<Target> {
    let mut sql = String::new();
    for (i, t) in arms.iter().enumerate() {
        let body = union_member(&t.sql)?;
        let body = body.as_str();
        if i > 0 {
            sql.push_str(" UNION ALL ");
        }
        // The newline ends a trailing `-- comment` before the parenthesis.
        sql.push('(');
        sql.push_str(body);
        sql.push_str("\n)");
    }
    let order = match &spec.aggregate {
        Some(_) if spec.groups_sorted => spec.group_order(),
        Some(_) => Vec::new(),
        None => spec.order_by.clone(),
    };
    for (i, k) in order.iter().enumerate() {
        let pos = match k.column {
            Column::At(c) if c < columns => c + 1,
            Column::FromEnd(e) if e >= 1 && e <= columns => columns - e + 1,
            _ => {
                return Err(unsupported(
                    "a merge column beyond the shards' result columns",
                ));
            }
        };
        sql.push_str(if i == 0 { " ORDER BY " } else { ", " });
        sql.push_str(&pos.to_string());
        if k.desc {
            sql.push_str(" DESC");
        }
    }
    // Rows beyond offset + limit of the datanode's stream are never merged (without
    // aggregation or DISTINCT, which need every row).
    if spec.aggregate.is_none()
        && !spec.distinct
        && let Some(limit) = spec.limit
    {
        sql.push_str(&format!(" LIMIT {}", spec.offset.saturating_add(limit)));
    }
    let params: Vec<u16> = arms.iter().flat_map(|t| t.params.iter().copied()).collect();
    Ok(Target {
        datanode: arms[0].datanode,
        sql: sql.into(),
        params: Params::from(params),
        qualified: arms.iter().all(|t| t.qualified),
    })
}

/// Refuses arms MariaDB would not take as members of a UNION (before anything is sent).
pub(super) fn check_members(arms: &[Target]) -> Result<()> {
    for t in arms {
        union_member(&t.sql)?;
    }
    Ok(())
}

/// `sql` as a member of a UNION: without a trailing `;` and the query cache's hints (blanked),
/// refused when MariaDB would not take it there.
fn union_member(sql: &str) -> Result<String> {
    let toks =
        lex::tokenize(sql).map_err(|_| unsupported("a statement the lexer cannot read here"))?;
    let refuse = |what: &str| {
        unsupported(&format!(
            "{what} in a read over several tables of one datanode (table-per-shard) inside a \
             transaction"
        ))
    };
    if toks.first().is_some_and(|t| t.is_kw(sql, "WITH")) {
        return Err(refuse("WITH"));
    }
    for t in &toks {
        if let Some(w) = NOT_IN_UNION.iter().find(|w| t.is_kw(sql, w)) {
            return Err(refuse(w));
        }
    }
    let mut end = sql.len();
    if let Some(last) = toks.last()
        && last.kind == TokKind::Punct
        && last.is_punct(sql, ";")
    {
        end = last.start as usize;
    }
    let mut out = sql[..end].to_string();
    for t in toks
        .iter()
        .filter(|t| CACHE_HINTS.iter().any(|w| t.is_kw(sql, w)))
    {
        let (a, b) = (t.start as usize, t.end as usize);
        out.replace_range(a..b, &" ".repeat(b - a));
    }
    Ok(out)
}

/// The column definitions `sql` would return on `conn`, from a COM_STMT_PREPARE of it (the
/// statement is closed with the connection's next command). Should the server's statement
/// limit be reached, the connection closes the statements it keeps and tries once more.
pub(super) async fn describe(conn: &mut BackendConn, sql: &str) -> Result<Vec<Vec<u8>>> {
    let (id, defs) = super::request::prepare_freeing(conn, sql, true).await?;
    close_statements(conn, &[id]);
    Ok(defs)
}

/// Byte ranges of a column definition's six length-encoded strings (catalog, schema, table,
/// org_table, name, org_name) and where its 10 fixed bytes start (charset, length, type,
/// flags, decimals).
fn fields(def: &[u8]) -> Option<([std::ops::Range<usize>; 6], usize)> {
    let mut b = def;
    let mut out: [std::ops::Range<usize>; 6] = Default::default();
    for f in &mut out {
        let v = read_lenenc_bytes(&mut b)?;
        let end = def.len() - b.len();
        *f = end - v.len()..end;
    }
    let n = read_lenenc(&mut b)?;
    if n < 10 || b.len() < 10 {
        return None;
    }
    Some((out, def.len() - b.len()))
}

/// Flags a column's definition carries from its table, which a UNION's result drops.
const TABLE_FLAGS: ColumnFlags = ColumnFlags::NOT_NULL_FLAG
    .union(ColumnFlags::PRI_KEY_FLAG)
    .union(ColumnFlags::UNIQUE_KEY_FLAG)
    .union(ColumnFlags::MULTIPLE_KEY_FLAG)
    .union(ColumnFlags::AUTO_INCREMENT_FLAG)
    .union(ColumnFlags::NO_DEFAULT_VALUE_FLAG)
    .union(ColumnFlags::ON_UPDATE_NOW_FLAG)
    .union(ColumnFlags::PART_KEY_FLAG);

/// The definitions the client gets for a union's columns: each of the first arm's (`donor`,
/// from [`describe`]): its catalog, schema, table, original table and column, and decimals,
/// with the union's name, character set, length, type and flags (plus a table column's key
/// and NOT NULL flags), where the two agree on type and character set (else the union's as it
/// is). A string expression's decimals, so taken, is the PREPARE's 39 where an EXECUTE
/// grouping through a temporary table says 0: `merge_columns` takes the least of the shards'.
///
/// An integer column is the exception: MariaDB types a UNION's integer column by the width of
/// its values (LONG for `MAX(LENGTH(x))`, which one statement sends as LONGLONG), so the
/// client gets the donor's type and length, as the statement has them on a datanode with one
/// table. Returns whether any column was so widened: binary rows must then be re-encoded
/// ([`crate::merge::widen_integers`]); text rows read the same.
pub(super) fn patch(union: &mut [Vec<u8>], donor: &[Vec<u8>]) -> bool {
    let mut widened = false;
    if union.len() != donor.len() {
        return widened;
    }
    for (u, d) in union.iter_mut().zip(donor) {
        let (Some((uf, ux)), Some((df, dx))) = (fields(u), fields(d)) else {
            continue;
        };
        // Fixed part: charset(2) length(4) type(1) flags(2) decimals(1).
        let (mut uc, dc) = ([0u8; 10], &d[dx..dx + 10]);
        uc.copy_from_slice(&u[ux..ux + 10]);
        if uc[0..2] != dc[0..2] {
            continue;
        }
        if uc[6] != dc[6] {
            let width = |t: u8| ColumnType::try_from(t).ok().and_then(integer_width);
            match (width(uc[6]), width(dc[6])) {
                (Some(a), Some(b)) if a <= b => {}
                _ => continue,
            }
            uc[2..7].copy_from_slice(&dc[2..7]);
            widened = true;
        }
        let uflags = u16::from_le_bytes([uc[7], uc[8]]);
        let dflags = u16::from_le_bytes([dc[7], dc[8]]);
        // The union's flags describe its values as the statement computes them (a PREPARE's
        // differ for aggregates); what a table column's definition adds (keys, NOT NULL, no
        // default) comes from the first arm's, for a column of a table.
        let flags = if d[df[3].clone()].is_empty() {
            uflags
        } else {
            uflags | (dflags & TABLE_FLAGS.bits())
        };
        let mut out = Vec::with_capacity(d.len() + u.len());
        // catalog, schema, table, org_table from the donor; the name from the union; org_name
        // from the donor.
        for (i, r) in df.iter().enumerate() {
            let v = if i == 4 {
                &u[uf[4].clone()]
            } else {
                &d[r.clone()]
            };
            put_lenenc_bytes(&mut out, v);
        }
        out.push(0x0c);
        out.extend_from_slice(&uc[0..7]);
        out.extend_from_slice(&flags.to_le_bytes());
        out.push(dc[9]);
        // Whatever follows the fixed part (filler) as the donor has it.
        out.extend_from_slice(&d[dx + 10..]);
        *u = out;
    }
    widened
}

/// How a union's binary rows become rows of the definitions the client got, where [`patch`]
/// widened integer columns.
pub(super) struct Widening {
    from: Vec<ColumnDef>,
    to: Vec<ColumnDef>,
}

impl Widening {
    /// From the union's own definitions (`before`) to the patched ones; `None` if either does
    /// not parse (the statement's own parse of them then fails).
    pub(super) fn new(before: &[Vec<u8>], after: &[Vec<u8>]) -> Option<Self> {
        let parse = |defs: &[Vec<u8>]| -> Option<Vec<ColumnDef>> {
            defs.iter().map(|d| parse_column(d).ok()).collect()
        };
        Some(Widening {
            from: parse(before)?,
            to: parse(after)?,
        })
    }

    pub(super) fn row(&self, payload: &[u8]) -> Result<Vec<u8>> {
        widen_integers(payload, &self.from, &self.to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_router::plan::{AggColumn, Aggregation, Fold, SortKey};

    fn arm(sql: &str, params: &[u16]) -> Target {
        Target {
            datanode: 3,
            sql: sql.into(),
            params: params.iter().copied().collect(),
            qualified: true,
        }
    }

    #[test]
    fn arms_become_one_statement_sorted_as_the_merge_reads_it() {
        let arms = [
            arm(
                "SELECT id, a FROM t_00 AS t WHERE x > ? ORDER BY a DESC LIMIT 5 -- c",
                &[0],
            ),
            arm(
                "SELECT id, a FROM t_01 AS t WHERE x > ? ORDER BY a DESC LIMIT 5;",
                &[0],
            ),
        ];
        let spec = MergeSpec {
            order_by: vec![
                SortKey {
                    column: Column::At(1),
                    desc: true,
                },
                SortKey {
                    column: Column::FromEnd(1),
                    desc: false,
                },
            ],
            offset: 2,
            limit: Some(3),
            ..MergeSpec::default()
        };
        let t = union_target(&arms, &spec, 3).unwrap();
        assert_eq!(
            &*t.sql,
            "(SELECT id, a FROM t_00 AS t WHERE x > ? ORDER BY a DESC LIMIT 5 -- c\n) UNION ALL \
             (SELECT id, a FROM t_01 AS t WHERE x > ? ORDER BY a DESC LIMIT 5\n) \
             ORDER BY 2 DESC, 3 LIMIT 5"
        );
        assert_eq!(&*t.params, &[0, 0], "each arm's parameters");
        assert!(t.qualified);

        // Grouped: sorted by the group keys, no outer LIMIT (every partial group is needed).
        let grouped = MergeSpec {
            aggregate: Some(Aggregation {
                keys: vec![Column::At(0)],
                columns: vec![AggColumn {
                    column: Column::At(1),
                    fold: Fold::SumCounts,
                }],
            }),
            groups_sorted: true,
            limit: Some(1),
            ..MergeSpec::default()
        };
        let t = union_target(&arms, &grouped, 2).unwrap();
        assert!(t.sql.ends_with("\n) ORDER BY 1"), "{}", t.sql);
    }

    #[test]
    fn what_mariadb_refuses_in_a_union_member_is_refused() {
        for sql in [
            "WITH x AS (SELECT 1) SELECT id FROM t_00",
            "SELECT HIGH_PRIORITY id FROM t_00",
            "SELECT SQL_BUFFER_RESULT id FROM t_00",
        ] {
            let e = union_target(&[arm(sql, &[]), arm(sql, &[])], &MergeSpec::default(), 1);
            assert!(e.is_err(), "{sql}");
        }
        // The query cache's hints are left out (mariadb-dump's read of a table).
        let dump = "SELECT /*!40001 SQL_NO_CACHE */ id FROM t_00";
        let t = union_target(&[arm(dump, &[]), arm(dump, &[])], &MergeSpec::default(), 1).unwrap();
        assert!(!t.sql.contains("SQL_NO_CACHE"), "{}", t.sql);
        assert!(
            t.sql
                .starts_with("(SELECT /*!40001              */ id FROM t_00"),
            "{}",
            t.sql
        );
        // A word in a string or a quoted name is not a keyword.
        let ok = "SELECT 'HIGH_PRIORITY', `sql_cache` FROM t_00";
        assert!(union_target(&[arm(ok, &[]), arm(ok, &[])], &MergeSpec::default(), 2).is_ok());
    }

    fn def(schema: &str, table: &str, org_table: &str, name: &str, ty: u8, flags: u16) -> Vec<u8> {
        let mut d = Vec::new();
        for f in ["def", schema, table, org_table, name, name] {
            put_lenenc_bytes(&mut d, f.as_bytes());
        }
        d.push(0x0c);
        d.extend_from_slice(&45u16.to_le_bytes());
        d.extend_from_slice(&40u32.to_le_bytes());
        d.push(ty);
        d.extend_from_slice(&flags.to_le_bytes());
        d.push(0);
        d.extend_from_slice(&[0, 0]);
        d
    }

    #[test]
    fn union_definitions_take_the_first_arms_origin() {
        let donor = vec![
            def("a", "ledger", "ledger_00", "id", 3, 0x5003),
            def("", "", "", "COUNT(*)", 8, 0x81),
            def("", "", "", "x", 253, 0),
        ];
        let mut union = vec![
            def("", "", "", "id", 3, 0x1),
            def("", "", "", "COUNT(*)", 8, 0x1),
            def("", "", "", "x", 3, 0),
        ];
        patch(&mut union, &donor);
        assert_eq!(union[0], def("a", "ledger", "ledger_00", "id", 3, 0x5003));
        // An expression keeps the union's flags.
        assert_eq!(union[1], def("", "", "", "COUNT(*)", 8, 0x1));
        // Another type: the union's definition as it is.
        assert_eq!(union[2], def("", "", "", "x", 3, 0));
    }

    #[test]
    fn a_union_narrowed_integer_takes_the_statements_type_and_its_binary_values_widen() {
        let donor = vec![def("", "", "", "MAX(LENGTH(msg))", 8, 0x80)];
        let union = vec![def("", "", "", "MAX(LENGTH(msg))", 3, 0x80)];
        let mut patched = union.clone();
        assert!(patch(&mut patched, &donor));
        assert_eq!(patched, donor, "the statement's LONGLONG");
        // Not narrower: a wider union type stays.
        let mut wider = vec![def("", "", "", "x", 8, 0)];
        assert!(!patch(&mut wider, &[def("", "", "", "x", 3, 0)]));

        for (flags, value, want) in [
            (0x80u16, -5i32 as u32, -5i64 as u64),
            (0xA0, 0xFFFF_FFFB, 0xFFFF_FFFB),
        ] {
            let from = vec![def("", "", "", "v", 3, flags), def("", "", "", "s", 253, 0)];
            let to = vec![def("", "", "", "v", 8, flags), def("", "", "", "s", 253, 0)];
            let w = Widening::new(&from, &to).expect("definitions");
            let mut row = vec![0x00, 0x00];
            row.extend_from_slice(&value.to_le_bytes());
            row.extend_from_slice(&[2, b'h', b'i']);
            let mut expect = vec![0x00, 0x00];
            expect.extend_from_slice(&want.to_le_bytes());
            expect.extend_from_slice(&[2, b'h', b'i']);
            assert_eq!(w.row(&row).unwrap(), expect, "flags {flags:#x}");
        }
    }
}
