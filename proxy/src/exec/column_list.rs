//! INSERT / REPLACE without a column list into a sharded or child table: the router says which
//! table's column order it needs ([`shoal_router::plan::column_list`]); the order is read here
//! from the table's first physical table (`information_schema.COLUMNS` by ORDINAL_POSITION,
//! INVISIBLE columns left out as MariaDB's INSERT without a column list leaves them), on a
//! pooled connection of Shoal's own (never the session's: the read is no part of its
//! transaction, locks or snapshot), and cached until DDL goes through Shoal
//! ([`crate::runtime::catalog::Catalog::changed`]). Rows whose value count differs from the cached
//! order, or a backend's 1136 (column count), read it again. The statement with the list
//! spliced in is planned and run like any INSERT.

use std::sync::Arc;

use shoal_router::plan::column_list::ColumnListFill;

use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::runtime::routing::Routing;

/// ER_WRONG_VALUE_COUNT_ON_ROW.
const WRONG_VALUE_COUNT: u16 = 1136;

impl Cursor {
    /// Runs the client's INSERT with the table's column list spliced in.
    pub(super) async fn insert_with_column_list(
        &mut self,
        routing: &Routing,
        fill: ColumnListFill,
        reply_seq: u8,
    ) -> Result<()> {
        let sql = self.client_text();
        let columns = self.column_order(routing, &fill).await?;
        let text = fill.apply(&sql, &columns);
        let r = self
            .run_completed_insert(
                routing,
                &text,
                "this INSERT without a column list",
                reply_seq,
            )
            .await;
        if let Err(e) = &r
            && (e.as_reply().is_some_and(|r| r.0 == WRONG_VALUE_COUNT))
        {
            routing
                .catalog
                .forget_table_columns(&fill.schema, &fill.table);
        }
        r
    }

    /// The column order `fill`'s table has, cached or read; MariaDB's 1136 when a row of the
    /// statement has another number of values.
    pub(super) async fn column_order(
        &mut self,
        routing: &Routing,
        fill: &ColumnListFill,
    ) -> Result<Arc<Vec<String>>> {
        let cached = routing.catalog.table_columns(&fill.schema, &fill.table);
        let columns = match cached {
            // Rows of another width than the cached order: the table may have changed
            // behind Shoal's back.
            Some(c) if fill.wrong_row(c.len()).is_none() => c,
            _ => self.read_columns(routing, fill).await?,
        };
        if let Some(row) = fill.wrong_row(columns.len()) {
            // As one server answers (the planner would refuse rows of unequal widths).
            return Err(Error::reply(
                WRONG_VALUE_COUNT,
                b"21S01",
                format!("Column count doesn't match value count at row {row}"),
            ));
        }
        Ok(columns)
    }

    /// The table's column order, read from its first physical table, and cached.
    async fn read_columns(
        &mut self,
        routing: &Routing,
        fill: &ColumnListFill,
    ) -> Result<Arc<Vec<String>>> {
        let generation = routing.catalog.generation();
        let node = &routing.topology.datanodes[fill.datanode];
        let mut conn = self.own_primary_connection(routing, fill.datanode).await?;
        let quote = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"));
        let read = format!(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {} AND \
             TABLE_NAME = {} AND EXTRA NOT LIKE '%INVISIBLE%' ORDER BY ORDINAL_POSITION",
            quote(&node.database),
            quote(&fill.physical_table)
        );
        let rows = conn.query_rows(&read).await?;
        conn.release();
        let names: Vec<String> = rows
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .collect();
        if names.is_empty() {
            return Err(Error::reply(
                1146,
                b"42S02",
                format!("Table '{}.{}' doesn't exist", fill.schema, fill.table),
            ));
        }
        let names = Arc::new(names);
        routing
            .catalog
            .keep_table_columns(&fill.schema, &fill.table, generation, names.clone());
        Ok(names)
    }
}
