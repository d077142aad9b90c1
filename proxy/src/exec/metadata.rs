//! Table metadata in logical names. `SHOW CREATE TABLE t` runs on the table's first physical
//! table and `SHOW CREATE DATABASE s` on a datanode of the schema (the router plans them so);
//! when the physical name differs (table-per-shard, a datanode's database), the answer names
//! it: the rows are rewritten back to the logical name here. COM_FIELD_LIST runs on the
//! table's first physical table, its column definitions renamed as they are relayed. (The
//! SHOW family MariaDB answers from `information_schema` is planned as SELECTs over the
//! logical catalog: `shoal_router::plan::show`, answered by [`super::catalog`].)

use shoal_router::error::{RouterError, codes};
use shoal_router::plan::Target;
use shoal_router::sql::lex::{TokKind, Token, tokenize_into};
use shoal_router::topology::TableDef;

use super::reader::{ResultStream, Row};
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::runtime::routing::Routing;
use crate::wire::command::COM_QUERY;
use crate::wire::messages::read_lenenc_bytes;

/// Which SHOW names the table (or database) in its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    CreateTable,
    Index,
    /// `SHOW CREATE DATABASE|SCHEMA [IF NOT EXISTS] db`: the name is the database's.
    CreateDatabase,
}

/// The table name of `SHOW CREATE TABLE [db.]t` / `SHOW {INDEX|INDEXES|KEYS} {FROM|IN} [db.]t`.
fn shown_table(sql: &str) -> Option<(Shown, String)> {
    let mut toks: Vec<Token> = Vec::new();
    tokenize_into(sql, &mut toks).ok()?;
    let word = |i: usize, w: &str| {
        toks.get(i)
            .is_some_and(|t| t.kind == TokKind::Word && t.text(sql).eq_ignore_ascii_case(w))
    };
    if !word(0, "SHOW") {
        return None;
    }
    let (kind, mut at) = if word(1, "CREATE") && (word(2, "DATABASE") || word(2, "SCHEMA")) {
        let at = if word(3, "IF") && word(4, "NOT") && word(5, "EXISTS") {
            6
        } else {
            3
        };
        (Shown::CreateDatabase, at)
    } else if word(1, "CREATE") && word(2, "TABLE") {
        (Shown::CreateTable, 3)
    } else if (word(1, "INDEX") || word(1, "INDEXES") || word(1, "KEYS"))
        && (word(2, "FROM") || word(2, "IN"))
    {
        (Shown::Index, 3)
    } else {
        return None;
    };
    if kind != Shown::CreateDatabase && toks.get(at + 1).is_some_and(|t| t.text(sql) == ".") {
        at += 2;
    }
    let t = toks.get(at)?;
    let name = match t.kind {
        TokKind::Word => t.text(sql).to_string(),
        TokKind::QuotedIdent => {
            let s = t.text(sql);
            s.get(1..s.len().saturating_sub(1))?.replace("``", "`")
        }
        _ => return None,
    };
    Some((kind, name))
}

impl Cursor {
    /// Runs a SHOW that names its table in its rows with the physical name, if `t` is one:
    /// `Ok(false)` when `t` is something else (the caller relays it).
    pub(super) async fn show_logical(
        &mut self,
        routing: &Routing,
        t: &Target,
        reply_seq: u8,
    ) -> Result<bool> {
        let logical = shown_table(&self.client_text());
        let (Some((kind, logical)), Some((_, physical))) = (logical, shown_table(&t.sql)) else {
            return Ok(false);
        };
        if logical == physical {
            return Ok(false);
        }
        // SHOW output is a handful of rows per table: read whole, then answered.
        let (defs, mut rows) = self.small_answer(routing, t).await?;
        let quoted = |n: &str| format!("`{}`", n.replace('`', "``"));
        let (from, to) = (quoted(&physical), quoted(&logical));
        for row in &mut rows {
            if let Some(Some(table)) = row.first_mut()
                && table.eq_ignore_ascii_case(physical.as_bytes())
            {
                *table = logical.as_bytes().to_vec();
            }
            if kind != Shown::Index
                && let Some(Some(ddl)) = row.get_mut(1)
            {
                // `CREATE TABLE `t_order_0003` (` -> the logical name; only that first name
                // (`CREATE DATABASE `shop_1` /*!40100 ...`: the same for a database).
                if let Some(at) = ddl.windows(from.len()).position(|w| w == from.as_bytes()) {
                    ddl.splice(at..at + from.len(), to.bytes());
                }
            }
        }
        self.send_result(reply_seq, &defs, rows, crate::merge::Protocol::Text)
            .await?;
        Ok(true)
    }
}

impl Cursor {
    /// COM_FIELD_LIST (the `mariadb` client's completion sends one per table): the column
    /// definitions of the table's first physical table (a sharded or child table's first
    /// shard, a global table's first copy, an unlisted table on the schema's default
    /// datanode), renamed to the logical schema and table as they are relayed.
    pub(super) async fn field_list_routed(
        &mut self,
        routing: &Routing,
        reply_seq: u8,
    ) -> Result<()> {
        let payload = self.client.packet_payload()[1..].to_vec();
        let end = payload
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(payload.len());
        let table = String::from_utf8_lossy(&payload[..end]).into_owned();
        let Some(schema) = self.logical.clone() else {
            return Err(Error::reply(1046, b"3D000", "No database selected"));
        };
        let ls = routing.topology.schema(&schema);
        // A table-per-shard table's physical tables are not tables of the schema, though the
        // default datanode may hold some.
        let physical_name = ls.is_some_and(|ls| {
            ls.table(&table).is_none()
                && shoal_router::plan::namespace::is_physical_name(ls, &table)
        });
        let place = match ls.and_then(|ls| ls.table(&table)) {
            _ if physical_name => None,
            Some(TableDef::Sharded(t)) => t
                .shards
                .first()
                .map(|s| (s.datanode, s.physical_table.clone())),
            Some(TableDef::Child(t)) => t
                .shards
                .first()
                .map(|s| (s.datanode, s.physical_table.clone())),
            Some(TableDef::Global(t)) => t.datanodes.first().map(|&d| (d, table.clone())),
            None => ls
                .and_then(|ls| ls.default_datanode)
                .map(|d| (d, table.clone())),
        };
        let Some((dn, physical)) = place else {
            // As the client named it (a refusal's message is not renamed).
            return Err(self.refuse(&RouterError::with(
                codes::ER_NO_SUCH_TABLE,
                format!("Table '{schema}.{table}' doesn't exist"),
            )));
        };
        let mut out = physical.into_bytes();
        out.extend_from_slice(&payload[end..]);
        let i = self.touch_for(routing, dn, super::Use::Text).await?;
        self.conns.held[i]
            .conn
            .io
            .write_command(crate::wire::command::COM_FIELD_LIST, &out);
        self.relay_from(
            i,
            crate::wire::response::Expect::FieldList,
            reply_seq,
            Some((&routing.names, dn)),
            false,
        )
        .await?;
        Ok(())
    }
}

impl Cursor {}

impl Cursor {
    /// Runs `t` on its datanode and reads its answer whole: the column definitions and every
    /// row's cells. Only for the small answers of metadata statements (a few rows per table),
    /// which are rewritten before the client sees them.
    pub(super) async fn small_answer(
        &mut self,
        routing: &Routing,
        t: &Target,
    ) -> Result<(Vec<Vec<u8>>, Vec<Vec<Option<Vec<u8>>>>)> {
        let i = self.touch(routing, t.datanode).await?;
        let conn = &mut self.conns.held[i].conn;
        let sql = conn.sql_bytes(&t.sql)?.into_owned();
        conn.io.write_command(COM_QUERY, &sql);
        conn.io.flush().await.map_err(Error::BackendIo)?;
        let mut stream = ResultStream::new(conn, false);
        let defs = stream.columns(conn).await?;
        let mut rows = Vec::new();
        loop {
            match stream.next_row(conn).await? {
                Row::End => break,
                Row::Data(row) => rows.push(fields(&row)?),
            }
        }
        Ok((defs, rows))
    }
}

/// The cells of a text row.
pub(super) fn fields(row: &[u8]) -> Result<Vec<Option<Vec<u8>>>> {
    let mut b = row;
    let mut out = Vec::new();
    while !b.is_empty() {
        if b[0] == 0xFB {
            b = &b[1..];
            out.push(None);
            continue;
        }
        let v = read_lenenc_bytes(&mut b)
            .ok_or_else(|| crate::wire::response::protocol_error("malformed text row"))?;
        out.push(Some(v.to_vec()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_tables() {
        assert_eq!(
            shown_table("SHOW CREATE TABLE t_order"),
            Some((Shown::CreateTable, "t_order".into()))
        );
        assert_eq!(
            shown_table("show create table shop.`t order`"),
            Some((Shown::CreateTable, "t order".into()))
        );
        assert_eq!(
            shown_table("SHOW KEYS IN t_order_0003 FROM db1"),
            Some((Shown::Index, "t_order_0003".into()))
        );
        // DBeaver prefixes its metadata statements with a comment.
        assert_eq!(
            shown_table(
                "/* ApplicationName=DBeaver 24.0.0 - Metadata */ SHOW CREATE TABLE shop.ledger_00"
            ),
            Some((Shown::CreateTable, "ledger_00".into()))
        );
        assert_eq!(
            shown_table("SHOW CREATE SCHEMA IF NOT EXISTS `b`"),
            Some((Shown::CreateDatabase, "b".into()))
        );
        assert_eq!(
            shown_table("show create database shop"),
            Some((Shown::CreateDatabase, "shop".into()))
        );
        assert_eq!(shown_table("SHOW COLUMNS FROM t"), None);
        assert_eq!(shown_table("SELECT 1"), None);
    }
}
