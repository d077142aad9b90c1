//! Global sequences (Mycat's): an INSERT into a sharded table that leaves out its shard key,
//! when the table has a `sequence`, gets its keys from a segment of ids taken from the
//! `shoal_sequence` table on the sequence's datanode. A segment is taken with one atomic
//! `UPDATE ... SET next_id = LAST_INSERT_ID(next_id + n)`, so several Shoal processes sharing
//! the table never hand out the same id; ids left in a segment when a process stops are
//! skipped, as auto-increment skips ids. The router splices the ids into the text
//! ([`shoal_router::plan::sequence`]) and plans it like any INSERT; the client's OK carries
//! the first id as its last insert id, and so does `LAST_INSERT_ID()` afterwards.

use shoal_router::plan::sequence::SequenceFill;

use crate::error::{Error, Result};
use crate::runtime::routing::Routing;
use crate::session::Session;
use crate::wire::command::COM_QUERY;

const TABLE: &str = "shoal_sequence";

impl Session {
    /// Runs the client's INSERT with its shard keys filled from the table's sequence.
    pub(super) async fn insert_with_sequence(
        &mut self,
        routing: &Routing,
        fill: SequenceFill,
        reply_seq: u8,
    ) -> Result<()> {
        let sql = self.client_text();
        let first = self.next_ids(routing, &fill).await?;
        let text = fill.apply(&sql, first);
        self.sequence_first = Some(first);
        let r = self
            .run_completed_insert(routing, &text, "this INSERT with a sequence", reply_seq)
            .await;
        self.sequence_first = None;
        r
    }

    /// The first of `fill.rows` consecutive ids of the table's sequence.
    async fn next_ids(&mut self, routing: &Routing, fill: &SequenceFill) -> Result<u64> {
        let name = format!("{}.{}", fill.schema, fill.table);
        let n = fill.rows as u64;
        if let Some(first) = routing.sequences.take(&name, n) {
            return Ok(first);
        }
        // A fresh segment, large enough for this statement's rows (consecutive ids).
        let k = fill.step.max(n);
        let node = &routing.topology.datanodes[fill.datanode];
        // On the decided primary only (never one of two writable servers), autocommit on.
        let mut conn = self.own_primary_connection(routing, fill.datanode).await?;
        let quoted = name.replace('\'', "''");
        let update = format!(
            "UPDATE {TABLE} SET next_id = LAST_INSERT_ID(next_id + {k}) WHERE name = '{quoted}'"
        );
        let read = "SELECT IF(ROW_COUNT() > 0, LAST_INSERT_ID(), NULL)";
        let mut end = None;
        for attempt in 0..2 {
            match conn.command(COM_QUERY, update.as_bytes()).await {
                Ok(_) => {
                    if let Some(v) = conn.query_value(read).await? {
                        end = Some(v);
                        break;
                    }
                }
                // ER_NO_SUCH_TABLE: made below on the first attempt.
                Err(e) if attempt == 0 && e.as_reply().is_some_and(|r| r.0 == 1146) => {}
                Err(e) => return Err(e),
            }
            if attempt == 0 {
                // First use of this sequence: its row (and the table) are made here; a
                // concurrent process doing the same is harmless.
                let create = format!(
                    "CREATE TABLE IF NOT EXISTS {TABLE} (name VARCHAR(255) NOT NULL PRIMARY KEY, \
                     next_id BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB"
                );
                conn.command(COM_QUERY, create.as_bytes()).await?;
                let insert = format!("INSERT IGNORE INTO {TABLE} VALUES ('{quoted}', 1)");
                conn.command(COM_QUERY, insert.as_bytes()).await?;
            }
        }
        let end: u64 = match end.as_deref().map(str::parse) {
            Some(Ok(v)) => v,
            _ => {
                return Err(Error::reply(
                    1105,
                    b"HY000",
                    format!(
                        "sequence {name}: no row in {TABLE} on datanode {}",
                        node.name
                    ),
                ));
            }
        };
        conn.state.last_insert_id = end;
        conn.release();
        let first = end
            .checked_sub(k)
            .ok_or_else(|| Error::reply(1105, b"HY000", format!("sequence {name}: bad next_id")))?;
        routing.sequences.keep(&name, first + n, end);
        Ok(first)
    }
}
