//! The collations physical columns are declared with, for the merge: result metadata carries
//! the collation of `character_set_results`, not the column's, so a scatter whose merge compares
//! strings looks the column up in `information_schema.COLUMNS` (once per database of a
//! datahost, cached until DDL through Shoal or a table it has not seen).

use shoal_router::plan::Target;

use super::reader::{ResultStream, Row};
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::merge::Column;
use crate::runtime::collations::Declared;
use crate::runtime::routing::Routing;
use crate::wire::messages::read_lenenc_bytes;

/// A string column read straight from a table (not an expression).
fn table_string(c: &Column) -> bool {
    crate::merge::is_char_or_blob(c.column_type)
        && !c.schema.is_empty()
        && !c.org_table.is_empty()
        && !c.org_name.is_empty()
}

/// `s` as a single-quoted SQL string.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

impl Cursor {
    /// Sets [`Column::declared`] on every shard's string columns read from a table, and checks
    /// the shards declare each column alike (a merge across different collations has no one
    /// right order).
    pub(super) async fn learn_collations(
        &mut self,
        routing: &Routing,
        targets: &[Target],
        columns: &mut [Vec<Column>],
    ) -> Result<()> {
        // Databases read during this call: a column still missing after that is not re-read.
        let mut read: Vec<(usize, String)> = Vec::new();
        for (t, cols) in targets.iter().zip(columns.iter_mut()) {
            let datahost = routing.topology.datanodes[t.datanode].datahost;
            for c in cols.iter_mut().filter(|c| table_string(c)) {
                let key = (c.org_table.to_lowercase(), c.org_name.to_lowercase());
                let mut found = routing
                    .collations
                    .get(datahost, &c.schema)
                    .and_then(|d| d.get(&key).copied());
                let fresh = read.iter().any(|(h, d)| *h == datahost && *d == c.schema);
                if found.is_none() && !fresh {
                    // Not looked up yet, or a table created since: read the database again.
                    let d = self.read_declared(routing, t, &c.schema).await?;
                    found = routing
                        .collations
                        .put(datahost, &c.schema, d)
                        .get(&key)
                        .copied();
                    read.push((datahost, c.schema.clone()));
                }
                c.declared = found;
            }
        }
        let Some((first, rest)) = columns.split_first() else {
            return Ok(());
        };
        for other in rest {
            for (a, b) in first.iter().zip(other) {
                if a.declared != b.declared {
                    return Err(super::unsupported(&format!(
                        "merging column '{}', declared with different collations on the \
                         datanodes (or not found on one of them)",
                        a.name
                    )));
                }
            }
        }
        Ok(())
    }

    /// Expressions (no declared collation) whose strings a non-UTF-8 `character_set_results`
    /// converted (gbk, latin1...: they are reported in its default collation, whatever they
    /// were): compared as the UTF-8 text they were converted from, under utf8mb4_general_ci
    /// (`_bin` with the BINARY flag), as a UTF-8 session's expressions are. The merge's order
    /// checks catch a server that sorted otherwise (an expression over a column of another
    /// collation) rather than answer in another order.
    pub(super) fn read_converted_expressions(&mut self, columns: &mut [Vec<Column>]) {
        let Some(cs) = self
            .charsets()
            .results
            .filter(|cs| !cs.is_utf8() && *cs != shoal_router::charset::Charset::Binary)
        else {
            return;
        };
        let (reported, _) = crate::backend::charset::default_collation(cs);
        for c in columns.iter_mut().flatten() {
            if c.declared.is_none()
                && c.charset == reported
                && crate::merge::is_char_or_blob(c.column_type)
            {
                c.declared = Some(if c.binary_flag() { 46 } else { 45 });
            }
        }
    }

    /// The declared collation of every string column of database `db`, read on a connection
    /// of `t`'s datanode taken for this lookup.
    async fn read_declared(&mut self, routing: &Routing, t: &Target, db: &str) -> Result<Declared> {
        let mut conn = self.extra_connection(routing, t.datanode).await?;
        let sql = format!(
            "SELECT c.TABLE_NAME, c.COLUMN_NAME, l.ID FROM information_schema.COLUMNS c \
             JOIN information_schema.COLLATIONS l ON l.COLLATION_NAME = c.COLLATION_NAME \
             WHERE c.TABLE_SCHEMA = {}",
            quoted(db)
        );
        conn.io
            .write_command(crate::wire::command::COM_QUERY, sql.as_bytes());
        // A connection that failed mid-lookup is dropped (closed), never pooled.
        conn.io.flush().await.map_err(Error::BackendIo)?;
        let mut stream = ResultStream::new(&conn, false);
        stream.columns(&mut conn).await?;
        let mut out = Declared::new();
        loop {
            match stream.next_row(&mut conn).await? {
                Row::End => break,
                Row::Data(row) => {
                    let mut b = &row[..];
                    let mut field = || {
                        read_lenenc_bytes(&mut b).map(|v| String::from_utf8_lossy(v).to_lowercase())
                    };
                    let (Some(table), Some(column), Some(id)) = (field(), field(), field()) else {
                        continue;
                    };
                    if let Ok(id) = id.parse::<u16>() {
                        out.insert((table, column), id);
                    }
                }
            }
        }
        conn.release();
        Ok(out)
    }
}
