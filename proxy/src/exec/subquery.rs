//! Subqueries run first ([`RoutePlan::BindFirst`]): each subquery runs as a read of its own
//! through the scatter and its merge (DISTINCT, ORDER BY, LIMIT and aggregates merged as for a
//! top-level SELECT), on the session's connections (inside a transaction, its connections and
//! snapshot), its rows kept up to the configured cap; then its rows are written into the outer
//! statement as literals and the outer statement is planned and run as any other.
//!
//! Exactness: MariaDB evaluates every predicate of the outer statement; Shoal only writes
//! values it reads back as the subquery's own. Each literal keeps the column's type class and,
//! for strings, its collation *and* its coercibility, which decide how MariaDB compares:
//! - integers and DECIMAL as their text (an exact literal of the same class);
//! - DATE, DATETIME, TIMESTAMP, TIME as `CAST('...' AS DATE | DATETIME(n) | TIME(n))`;
//! - binary strings as `CAST(X'..' AS BINARY)` (implicit, as a column: a `_binary` literal is
//!   coercible and would lose to the other side's collation, with its trailing-space padding);
//! - text in its charset's default collation as `CONVERT(_utf8mb4 X'..' USING cs)`, which is
//!   implicit in that collation, exactly as the column is; text in a `_bin` collation with an
//!   explicit `COLLATE` (a `_bin` collation wins over the other side's implicit one anyway,
//!   which is what the column would do), refused when the outer statement writes a COLLATE of
//!   its own (explicit against explicit would fail where MariaDB answers);
//! - anything else (FLOAT and DOUBLE, whose text does not read back as the same value; BIT,
//!   ENUM, SET, geometry; other collations; a string expression whose collation Shoal cannot
//!   learn) is refused by name (1235).
//!
//! The forms: `x [NOT] IN (rows)`, with an empty table-less subquery for no rows (MariaDB's
//! `IN` of an empty set is false and `NOT IN` true, even for a NULL `x`; a NULL among the
//! values makes `NOT IN` unknown, as the list does); `EXISTS` as `(1)` or `(0)`; a scalar as
//! its one row or `(NULL)`, more than one row MariaDB's 1242.

use mysql_common::constants::{ColumnFlags, ColumnType};
use shoal_router::RouterError;
use shoal_router::plan::bind::{BindFirst, EMPTY, Form, more_than_one_row};
use shoal_router::plan::{Merge, MergeSpec, RoutePlan};

use super::relay::Expect;
use super::request::Request;
use super::{Use, refusal};
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::merge::Column;
use crate::runtime::routing::Routing;
use crate::wire::messages::read_lenenc_bytes;

/// MariaDB's "Unknown column": what a subquery correlated by an unqualified name answers when
/// it runs alone.
const ER_BAD_FIELD_ERROR: u16 = 1054;

/// The rows of a subquery run first, as the merge produced them (text protocol).
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<u8>>,
    bytes: usize,
    /// What may still be kept: values (rows x columns) and bytes.
    max_values: usize,
    max_bytes: usize,
    /// The statement's error (a datanode's, or the cap's), where a read sent to the client
    /// would end its result with it.
    pub error: Option<Error>,
}

impl Collected {
    fn new(max_values: usize, max_bytes: usize) -> Self {
        Collected {
            max_values,
            max_bytes,
            ..Default::default()
        }
    }

    /// Forgets what an attempt kept (the read is tried again on another server).
    pub fn reset(&mut self) {
        self.columns.clear();
        self.rows.clear();
        self.bytes = 0;
        self.error = None;
    }

    /// Keeps one merged row, unless that passes the cap.
    pub fn keep(&mut self, row: Vec<u8>) -> Result<()> {
        self.bytes += row.len();
        let values = (self.rows.len() + 1) * self.columns.len().max(1);
        if values > self.max_values || self.bytes > self.max_bytes {
            return Err(refusal(&RouterError::unsupported(format!(
                "This version of Shoal doesn't yet support 'a subquery across shards binding \
                 more than {} values or {} bytes (server.subquery_max_values, \
                 server.subquery_max_bytes)'",
                self.max_values, self.max_bytes
            ))));
        }
        self.rows.push(row);
        Ok(())
    }

    fn values(&self) -> usize {
        self.rows.len() * self.columns.len().max(1)
    }
}

impl Cursor {
    /// Runs `b`: its subqueries, then the outer statement with their values.
    pub(super) async fn run_bind_first(
        &mut self,
        routing: &Routing,
        b: &BindFirst,
        req: &Request<'_>,
        reply_seq: u8,
    ) -> Result<()> {
        let mut max_values = self.rt.config.subquery_max_values;
        let mut max_bytes = self.rt.config.subquery_max_bytes;
        let mut values = Vec::with_capacity(b.inner.len());
        for s in &b.inner {
            let (targets, mut spec) = match &s.plan {
                RoutePlan::Single(t) => (vec![t.clone()], MergeSpec::default()),
                RoutePlan::Scatter {
                    targets,
                    merge: Merge::Rows(spec),
                } => (targets.clone(), spec.clone()),
                _ => return Err(self.refuse(&unbindable("a subquery planned this way"))),
            };
            // EXISTS needs one row, a scalar two (to see it has more than one).
            let enough = match s.form {
                Form::In => None,
                Form::Exists => Some(1),
                Form::Scalar => Some(2),
            };
            if let Some(n) = enough {
                spec.limit = Some(spec.limit.map_or(n, |l| l.min(n)));
            }
            let mut c = Collected::new(max_values, max_bytes);
            let ran = self
                .run_scatter_into(
                    routing,
                    targets,
                    &spec,
                    &Request::Text,
                    reply_seq,
                    Some(&mut c),
                )
                .await;
            // An error before the rows (in the column definitions) or among them.
            let failed = match ran {
                Err(e @ Error::Reply { .. }) => Some(e),
                Err(e) => return Err(e),
                Ok(()) => c.error.take(),
            };
            if let Some(e) = failed {
                if let Some((ER_BAD_FIELD_ERROR, _, m)) = e.as_reply() {
                    return Err(self.refuse(&unbindable(format!(
                        "a correlated subquery across shards (run alone, it reads a column of \
                         the outer query: {m})"
                    ))));
                }
                if e.as_reply().is_some_and(|r| r.0 == 1235) {
                    self.refused = true;
                }
                return Err(e);
            }
            max_values = max_values.saturating_sub(c.values());
            max_bytes = max_bytes.saturating_sub(c.bytes);
            match render(s.form, &c, &b.outer) {
                Ok(v) => values.push(v),
                Err(e) => return Err(self.refuse(&e)),
            }
        }
        let outer = b.outer_with(&values);
        let mode = self.sql_mode();
        let cs = self.charsets().statements;
        let plan = routing
            .router
            .route_in(self.logical.as_deref(), mode, cs, &outer, &[]);
        let expect = Expect::Results { binary: false };
        // A prepared statement's execute: the outer statement (its values written in, no
        // placeholder left) is prepared on its datanodes and executed without parameters, so
        // that the client gets the binary result it asked for.
        if let Request::Execute { .. } = req {
            return match plan {
                RoutePlan::Single(t) => self.execute_on(routing, &t, req, reply_seq).await,
                RoutePlan::Scatter {
                    targets,
                    merge: Merge::Rows(spec),
                } => {
                    self.run_scatter(routing, targets, &spec, req, reply_seq)
                        .await
                }
                RoutePlan::Refuse(e) => Err(self.refuse(&e)),
                _ => Err(self.refuse(&unbindable("an outer statement planned this way"))),
            };
        }
        match plan {
            RoutePlan::Single(t) => {
                let how = if t.qualified {
                    Use::AnyDatabase
                } else {
                    Use::Text
                };
                self.run_read_on(routing, t.datanode, how, Some(&t.sql), expect, reply_seq)
                    .await?;
                Ok(())
            }
            RoutePlan::Any { sql } => {
                let dn = self.any_datanode(routing);
                self.run_read_on(routing, dn, Use::Text, Some(&sql), expect, reply_seq)
                    .await?;
                Ok(())
            }
            RoutePlan::Scatter {
                targets,
                merge: Merge::Rows(spec),
            } => {
                self.run_scatter(routing, targets, &spec, &Request::Text, reply_seq)
                    .await
            }
            RoutePlan::Refuse(e) => Err(self.refuse(&e)),
            _ => Err(self.refuse(&unbindable("an outer statement planned this way"))),
        }
    }
}

fn unbindable(what: impl std::fmt::Display) -> RouterError {
    RouterError::unsupported(format!(
        "This version of Shoal doesn't yet support '{what}'"
    ))
}

/// The text standing for a subquery's rows in the outer statement.
fn render(form: Form, c: &Collected, outer: &[String]) -> std::result::Result<String, RouterError> {
    let explicit_in_outer = outer
        .iter()
        .any(|p| p.to_ascii_uppercase().contains("COLLATE"));
    let row_text = |row: &[u8]| -> std::result::Result<String, RouterError> {
        let mut b = row;
        let mut out = Vec::with_capacity(c.columns.len());
        for col in &c.columns {
            let v = if b.first() == Some(&0xFB) {
                b = &b[1..];
                None
            } else {
                Some(read_lenenc_bytes(&mut b).ok_or_else(|| unbindable("a malformed row"))?)
            };
            out.push(literal(col, v, explicit_in_outer)?);
        }
        Ok(match out.len() {
            1 => out.pop().unwrap_or_default(),
            _ => format!("({})", out.join(", ")),
        })
    };
    match form {
        Form::Exists => Ok(if c.rows.is_empty() {
            "(1 = 0)"
        } else {
            "(1 = 1)"
        }
        .to_string()),
        Form::Scalar => match c.rows.as_slice() {
            [] if c.columns.len() > 1 => {
                Ok(format!("({})", vec!["NULL"; c.columns.len()].join(", ")))
            }
            [] => Ok("(NULL)".to_string()),
            [row] => Ok(format!("({})", row_text(row)?)),
            _ => Err(more_than_one_row()),
        },
        Form::In if c.rows.is_empty() => Ok(match c.columns.len() {
            0 | 1 => EMPTY.to_string(),
            n => format!("(SELECT {} FROM DUAL WHERE 0)", vec!["NULL"; n].join(", ")),
        }),
        Form::In => {
            let mut s = String::from("(");
            for (i, row) in c.rows.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                s.push_str(&row_text(row)?);
            }
            s.push(')');
            Ok(s)
        }
    }
}

fn hex(v: &[u8]) -> String {
    let mut s = String::with_capacity(v.len() * 2);
    for b in v {
        s.push_str(&format!("{b:02X}"));
    }
    s
}

/// One value of column `c` as a literal MariaDB reads as that column's value (see the module
/// documentation), or why it cannot be written so.
fn literal(
    c: &Column,
    v: Option<&[u8]>,
    explicit_in_outer: bool,
) -> std::result::Result<String, RouterError> {
    use ColumnType as T;
    let Some(v) = v else {
        return Ok("NULL".to_string());
    };
    let refuse = |what: &str| {
        unbindable(format!(
            "a subquery across shards returning {what} (column '{}'), bound as a value",
            c.name
        ))
    };
    let text = || std::str::from_utf8(v).map_err(|_| refuse("a value that is not text"));
    let number = |chars: &str| -> std::result::Result<String, RouterError> {
        let t = text()?;
        if t.is_empty() || !t.chars().all(|ch| chars.contains(ch)) {
            return Err(refuse("a number that does not read back"));
        }
        Ok(t.to_string())
    };
    let temporal = |ty: &str| -> std::result::Result<String, RouterError> {
        let t = text()?;
        if t.starts_with("0000") || !t.chars().all(|ch| "0123456789-: .".contains(ch)) {
            return Err(refuse("a zero or unusual date"));
        }
        Ok(format!("CAST('{t}' AS {ty})"))
    };
    let flags = c.flags;
    if flags.intersects(ColumnFlags::ENUM_FLAG | ColumnFlags::SET_FLAG) {
        return Err(refuse("an ENUM or SET value"));
    }
    let frac = |d: u8| {
        if d > 0 && d <= 6 {
            format!("({d})")
        } else {
            String::new()
        }
    };
    match c.column_type {
        T::MYSQL_TYPE_TINY
        | T::MYSQL_TYPE_SHORT
        | T::MYSQL_TYPE_LONG
        | T::MYSQL_TYPE_LONGLONG
        | T::MYSQL_TYPE_INT24
        | T::MYSQL_TYPE_YEAR => number("-0123456789"),
        T::MYSQL_TYPE_NEWDECIMAL | T::MYSQL_TYPE_DECIMAL => number("-0123456789."),
        T::MYSQL_TYPE_NULL => Ok("NULL".to_string()),
        T::MYSQL_TYPE_DATE | T::MYSQL_TYPE_NEWDATE => temporal("DATE"),
        T::MYSQL_TYPE_DATETIME
        | T::MYSQL_TYPE_DATETIME2
        | T::MYSQL_TYPE_TIMESTAMP
        | T::MYSQL_TYPE_TIMESTAMP2 => temporal(&format!("DATETIME{}", frac(c.decimals))),
        T::MYSQL_TYPE_TIME | T::MYSQL_TYPE_TIME2 => temporal(&format!("TIME{}", frac(c.decimals))),
        T::MYSQL_TYPE_VARCHAR
        | T::MYSQL_TYPE_VAR_STRING
        | T::MYSQL_TYPE_STRING
        | T::MYSQL_TYPE_TINY_BLOB
        | T::MYSQL_TYPE_MEDIUM_BLOB
        | T::MYSQL_TYPE_LONG_BLOB
        | T::MYSQL_TYPE_BLOB => {
            if c.charset == 63 {
                return Ok(format!("CAST(X'{}' AS BINARY)", hex(v)));
            }
            string_literal(c, v, explicit_in_outer).map_err(|what| refuse(&what))
        }
        _ => Err(refuse(&format!("a value of type {:?}", c.column_type))),
    }
}

/// A text value as `CONVERT(_utf8mb4 X'..' USING cs)` (its charset's default collation,
/// implicit) or with `COLLATE x_bin`.
fn string_literal(
    c: &Column,
    v: &[u8],
    explicit_in_outer: bool,
) -> std::result::Result<String, String> {
    use shoal_router::charset::Charset;
    // The bytes are as `character_set_results` sent them.
    if Charset::from_collation_id(c.charset) != Some(Charset::Utf8mb4) {
        return Err("a string while character_set_results is not utf8mb4".into());
    }
    let Some(declared) = c.declared else {
        return Err("a string expression (its collation is not known to Shoal)".into());
    };
    let Some(cs) = Charset::from_collation_id(declared) else {
        return Err(format!("a string of collation id {declared}"));
    };
    let value = format!("CONVERT(_utf8mb4 X'{}' USING {})", hex(v), cs.name());
    let (default, _) = crate::backend::charset::default_collation(cs);
    if declared == default {
        return Ok(value);
    }
    let name = mysql_common::collations::Collation::resolve(
        mysql_common::collations::CollationId::from(declared),
    )
    .collation()
    .to_string();
    let known = declared <= 255 && name.starts_with(cs.name());
    if known && name.ends_with("_bin") {
        if explicit_in_outer {
            return Err(format!(
                "a string of collation {name} in a statement with a COLLATE of its own"
            ));
        }
        return Ok(format!("{value} COLLATE {name}"));
    }
    Err(format!(
        "a string of collation {}",
        if known { name } else { declared.to_string() }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::resultset::text_row;

    fn col(ty: ColumnType, charset: u16, declared: Option<u16>) -> Column {
        Column {
            name: "c".into(),
            column_type: ty,
            flags: ColumnFlags::empty(),
            decimals: 0,
            charset,
            length: 0,
            schema: String::new(),
            org_table: String::new(),
            org_name: String::new(),
            declared,
            raw: Vec::new(),
        }
    }

    fn kept(columns: Vec<Column>, rows: &[&[Option<&[u8]>]]) -> Collected {
        let mut c = Collected::new(1000, 1 << 20);
        c.columns = columns;
        for r in rows {
            let mut row = Vec::new();
            text_row(&mut row, r.iter().copied());
            c.keep(row).unwrap();
        }
        c
    }

    /// Each value as the literal MariaDB reads as the column's: numbers as written, dates
    /// cast, binary cast (implicit), text in its charset's default collation converted
    /// (implicit), `_bin` with COLLATE; what cannot be exact refused by name.
    #[test]
    fn values_are_written_with_their_columns_type_and_collation() {
        use ColumnType as T;
        let lit = |c: &Column, v: &[u8]| literal(c, Some(v), false);
        assert_eq!(
            lit(&col(T::MYSQL_TYPE_LONGLONG, 63, None), b"-12").unwrap(),
            "-12"
        );
        assert_eq!(
            lit(&col(T::MYSQL_TYPE_NEWDECIMAL, 63, None), b"1.50").unwrap(),
            "1.50"
        );
        assert!(lit(&col(T::MYSQL_TYPE_LONG, 63, None), b"1 OR 1").is_err());
        let mut dt = col(T::MYSQL_TYPE_DATETIME, 63, None);
        dt.decimals = 6;
        assert_eq!(
            lit(&dt, b"2024-01-01 10:00:00.000001").unwrap(),
            "CAST('2024-01-01 10:00:00.000001' AS DATETIME(6))"
        );
        assert!(lit(&col(T::MYSQL_TYPE_DATE, 63, None), b"0000-00-00").is_err());
        assert_eq!(
            lit(&col(T::MYSQL_TYPE_VAR_STRING, 63, None), b"a\0").unwrap(),
            "CAST(X'6100' AS BINARY)"
        );
        let ci = col(T::MYSQL_TYPE_VAR_STRING, 45, Some(45));
        assert_eq!(
            lit(&ci, "é".as_bytes()).unwrap(),
            "CONVERT(_utf8mb4 X'C3A9' USING utf8mb4)"
        );
        let bin = col(T::MYSQL_TYPE_VAR_STRING, 45, Some(46));
        assert_eq!(
            lit(&bin, b"a ").unwrap(),
            "CONVERT(_utf8mb4 X'6120' USING utf8mb4) COLLATE utf8mb4_bin"
        );
        assert!(
            literal(&bin, Some(b"a"), true).is_err(),
            "COLLATE in the statement"
        );
        // utf8mb4_unicode_ci, an expression, another character_set_results, DOUBLE, ENUM.
        assert!(lit(&col(T::MYSQL_TYPE_VAR_STRING, 45, Some(224)), b"a").is_err());
        assert!(lit(&col(T::MYSQL_TYPE_VAR_STRING, 45, None), b"a").is_err());
        assert!(lit(&col(T::MYSQL_TYPE_VAR_STRING, 8, Some(8)), b"a").is_err());
        assert!(lit(&col(T::MYSQL_TYPE_DOUBLE, 63, None), b"0.1").is_err());
        let mut e = col(T::MYSQL_TYPE_STRING, 45, Some(45));
        e.flags = ColumnFlags::ENUM_FLAG;
        assert!(lit(&e, b"a").is_err());
        assert_eq!(literal(&ci, None, false).unwrap(), "NULL");
    }

    /// IN lists (NULLs kept, rows of several columns as row constructors, no rows as an empty
    /// subquery), EXISTS, and scalars (none, one, more than one row: 1242).
    #[test]
    fn forms_render_as_mariadb_reads_the_subquery() {
        use ColumnType as T;
        let int = || col(T::MYSQL_TYPE_LONG, 63, None);
        let c = kept(vec![int()], &[&[Some(b"1")], &[None]]);
        assert_eq!(render(Form::In, &c, &[]).unwrap(), "(1, NULL)");
        assert_eq!(render(Form::Exists, &c, &[]).unwrap(), "(1 = 1)");
        assert_eq!(render(Form::Scalar, &c, &[]).unwrap_err().code(), 1242);
        let none = kept(vec![int()], &[]);
        assert_eq!(render(Form::In, &none, &[]).unwrap(), EMPTY);
        assert_eq!(render(Form::Exists, &none, &[]).unwrap(), "(1 = 0)");
        assert_eq!(render(Form::Scalar, &none, &[]).unwrap(), "(NULL)");
        let two = kept(vec![int(), int()], &[&[Some(b"1"), Some(b"2")]]);
        assert_eq!(render(Form::In, &two, &[]).unwrap(), "((1, 2))");
        assert_eq!(render(Form::Scalar, &two, &[]).unwrap(), "((1, 2))");
        let none2 = kept(vec![int(), int()], &[]);
        assert_eq!(
            render(Form::In, &none2, &[]).unwrap(),
            "(SELECT NULL, NULL FROM DUAL WHERE 0)"
        );
    }

    /// Past the cap of values the rows are refused, naming the setting.
    #[test]
    fn the_cap_counts_values() {
        let mut c = Collected::new(3, 1 << 20);
        c.columns = vec![col(ColumnType::MYSQL_TYPE_LONG, 63, None)];
        for _ in 0..3 {
            c.keep(vec![1, b'1']).unwrap();
        }
        let e = c.keep(vec![1, b'1']).unwrap_err();
        assert!(e.to_string().contains("subquery_max_values"), "{e}");
    }
}
