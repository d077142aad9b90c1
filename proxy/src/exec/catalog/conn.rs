//! The catalog's own backend connection: the logical rows are loaded into TEMPORARY tables
//! there and the client's rewritten statement runs over them. Owned by Shoal, never pooled
//! (its temporary tables and sql_mode are its own, no session's state reaches it or leaves
//! it), used by one statement at a time, opened again when it breaks.

use super::rows::quoted;
use crate::backend::conn::{BackendConn, wire_capabilities};
use crate::error::{Error, Result};
use crate::exec::reader::{ResultStream, Row};
use crate::runtime::catalog::{Dedicated, LogicalRows};
use crate::runtime::routing::Routing;
use crate::wire::command::COM_QUERY;

/// Largest INSERT statement filling a temporary table (well under any max_allowed_packet).
const INSERT_BYTES: usize = 256 << 10;

/// The mode the logical rows are inserted under: backslash escapes on, nothing strict.
const FILL_MODE: &str = "";

impl Dedicated {
    /// The connection, opened if it is not (in the first datanode's database, on its
    /// datahost's primary).
    async fn conn(&mut self, routing: &Routing) -> Result<&mut BackendConn> {
        if self.conn.is_none() {
            let dn = routing
                .topology
                .datanodes
                .first()
                .ok_or_else(|| Error::reply(1105, b"HY000", "no datanode for the catalog"))?;
            let (spec, settings) = &routing.hosts[dn.datahost];
            let mut c = BackendConn::connect(
                spec,
                wire_capabilities().into(),
                Some(&dn.database),
                false,
                settings.connect_timeout,
            )
            .await?;
            self.default_mode = c
                .query_value("SELECT @@GLOBAL.sql_mode")
                .await?
                .unwrap_or_default();
            self.database = dn.database.clone();
            self.mode = None;
            self.loaded.clear();
            self.conn = Some(c);
        }
        Ok(self.conn.as_mut().expect("opened above"))
    }

    /// Forgets a connection that failed: the next statement opens another.
    pub fn broken(&mut self) {
        self.conn = None;
        self.loaded.clear();
        self.mode = None;
    }

    async fn set_mode(&mut self, routing: &Routing, mode: &str) -> Result<()> {
        if self.mode.as_deref() == Some(mode) {
            return Ok(());
        }
        let sql = format!("SET SESSION sql_mode = {}", quoted(mode.as_bytes()));
        self.conn(routing)
            .await?
            .command(COM_QUERY, sql.as_bytes())
            .await?;
        self.mode = Some(mode.to_string());
        Ok(())
    }

    /// Makes temporary table `temp` (shaped like `information_schema.<table>`) hold `rows`
    /// (version `version`), those of them `visible` keeps.
    pub async fn load(
        &mut self,
        routing: &Routing,
        table: &str,
        temp: &str,
        version: u64,
        rows: &LogicalRows,
        visible: impl Fn(Option<&str>) -> bool,
    ) -> Result<()> {
        self.conn(routing).await?;
        if self.loaded.get(temp) == Some(&version) {
            return Ok(());
        }
        self.set_mode(routing, FILL_MODE).await?;
        let conn = self.conn(routing).await?;
        let name = format!("`{}`", temp.replace('`', "``"));
        conn.command(
            COM_QUERY,
            format!("CREATE TEMPORARY TABLE IF NOT EXISTS {name} LIKE information_schema.{table}")
                .as_bytes(),
        )
        .await?;
        conn.command(COM_QUERY, format!("TRUNCATE TABLE {name}").as_bytes())
            .await?;
        let head = format!("INSERT INTO {name} VALUES ");
        let mut sql = String::new();
        for (row, schema) in rows.rows.iter().zip(&rows.schema) {
            if !visible(schema.as_deref()) {
                continue;
            }
            sql.push_str(if sql.is_empty() { &head } else { "," });
            sql.push('(');
            for (k, cell) in row.iter().enumerate() {
                if k > 0 {
                    sql.push(',');
                }
                match cell {
                    Some(v) => sql.push_str(&quoted(v)),
                    None => sql.push_str("NULL"),
                }
            }
            sql.push(')');
            if sql.len() >= INSERT_BYTES {
                conn.command(COM_QUERY, sql.as_bytes()).await?;
                sql.clear();
            }
        }
        if !sql.is_empty() {
            conn.command(COM_QUERY, sql.as_bytes()).await?;
        }
        self.loaded.insert(temp.to_string(), version);
        Ok(())
    }

    /// Runs the client's statement (rewritten) under the session's sql_mode (`None`: the
    /// servers' default) and reads its answer whole: column definitions and text rows.
    pub async fn run(
        &mut self,
        routing: &Routing,
        sql: &str,
        mode: Option<&str>,
    ) -> Result<(Vec<Vec<u8>>, Vec<Vec<u8>>)> {
        self.conn(routing).await?;
        let mode = mode.map_or_else(|| self.default_mode.clone(), str::to_string);
        self.set_mode(routing, &mode).await?;
        let conn = self.conn(routing).await?;
        conn.io.write_command(COM_QUERY, sql.as_bytes());
        conn.io.flush().await.map_err(Error::BackendIo)?;
        let mut stream = ResultStream::new(conn, false);
        let defs = stream.columns(conn).await?;
        let mut rows = Vec::new();
        loop {
            match stream.next_row(conn).await? {
                Row::End => break,
                Row::Data(row) => rows.push(row),
            }
        }
        Ok((defs, rows))
    }
}
