//! `SELECT ROW_COUNT()`, `SELECT FOUND_ROWS()` and `SELECT CONNECTION_ID()`: answered from
//! the session's own record when the connection that ran its last statement is not the one a
//! backend would answer on (or always, for Shoal's connection id).

use mysql_common::constants::{ColumnFlags, ColumnType};

use super::Cursor;
use crate::error::Result;
use crate::wire::resultset::column_definition;

/// Which diagnostics function: the statement plan's reading (`Step::Diagnostics`).
pub(crate) use shoal_router::plan::Diagnostics as DiagQuery;

pub(crate) use shoal_router::sql::pins::starts_with_comment;

/// A query that is exactly `SELECT ROW_COUNT()` or `SELECT FOUND_ROWS()`.
pub(crate) fn diagnostics_query(sql: &[u8]) -> Option<DiagQuery> {
    if starts_with_comment(sql) {
        let text = std::str::from_utf8(sql).ok()?;
        let toks = shoal_router::sql::lex::tokenize(text).ok()?;
        return shoal_router::plan::diagnostics_of(text, &toks);
    }
    let s = sql.trim_ascii();
    let s = s.strip_suffix(b";").unwrap_or(s).trim_ascii_end();
    // All three end with `()`; a usual SELECT ends otherwise and stops here.
    if s.len() < 7 || !s.ends_with(b")") || !s[..7].eq_ignore_ascii_case(b"SELECT ") {
        return None;
    }
    // Compared lazily, without a copy: this runs for every SELECT and most stop at one byte.
    let squeezed = || {
        s[7..]
            .iter()
            .filter(|b| !b.is_ascii_whitespace())
            .map(|b| b.to_ascii_uppercase())
    };
    if squeezed().eq(b"ROW_COUNT()".iter().copied()) {
        Some(DiagQuery::RowCount)
    } else if squeezed().eq(b"FOUND_ROWS()".iter().copied()) {
        Some(DiagQuery::FoundRows)
    } else if squeezed().eq(b"CONNECTION_ID()".iter().copied()) {
        Some(DiagQuery::ConnectionId)
    } else {
        None
    }
}

impl Cursor {
    /// Answers `SELECT ROW_COUNT()` / `SELECT FOUND_ROWS()` from what the session's own last
    /// statement reported, as a one-row result shaped like the server's.
    pub(crate) async fn answer_diagnostics(
        &mut self,
        which: DiagQuery,
        reply_seq: u8,
    ) -> Result<()> {
        let (name, value) = match which {
            DiagQuery::RowCount => ("ROW_COUNT()", self.diag.row_count.to_string()),
            DiagQuery::FoundRows => ("FOUND_ROWS()", self.diag.found_rows.to_string()),
            DiagQuery::ConnectionId => ("CONNECTION_ID()", self.id.to_string()),
        };
        let def = column_definition(
            name,
            "",
            63, // binary
            21,
            ColumnType::MYSQL_TYPE_LONGLONG,
            ColumnFlags::NOT_NULL_FLAG | ColumnFlags::BINARY_FLAG,
        );
        self.write_result(
            reply_seq,
            &[def],
            vec![vec![Some(value.into_bytes())]],
            crate::merge::Protocol::Text,
        )
        .await?;
        self.diag.row_count = -1;
        self.diag.found_rows = 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn recognises_diagnostics_queries() {
        use super::{DiagQuery, diagnostics_query};
        assert_eq!(
            diagnostics_query(b"SELECT ROW_COUNT()"),
            Some(DiagQuery::RowCount)
        );
        assert_eq!(
            diagnostics_query(b" select found_rows( ) ;"),
            Some(DiagQuery::FoundRows)
        );
        assert_eq!(diagnostics_query(b"SELECT ROW_COUNT() + 1"), None);
        assert_eq!(diagnostics_query(b"SELECT 1"), None);
        assert_eq!(
            diagnostics_query(b"/* tool */ SELECT ROW_COUNT()"),
            Some(DiagQuery::RowCount)
        );
    }
}
