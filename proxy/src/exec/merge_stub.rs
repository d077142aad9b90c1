//! Stand-in for the streaming merge operator (`crate::merge`, written separately), with the
//! same interface: it concatenates shard results, applies OFFSET/LIMIT and drops hidden
//! columns, and refuses what it cannot merge exactly (ORDER BY, GROUP BY, aggregates,
//! DISTINCT, HAVING) instead of answering wrongly. Goes when `crate::merge` lands.

use shoal_router::RouterError;
use shoal_router::plan::MergeSpec;

use crate::wire::messages::read_lenenc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Text,
    Binary,
}

pub enum Step {
    /// Read that shard's next row (or its end) and feed it.
    Need(usize),
    /// Send this row to the client.
    Row(Vec<u8>),
    Done,
}

pub struct Merger {
    shards: usize,
    current: usize,
    pending: Option<Vec<u8>>,
    ended: Vec<bool>,
    skip: u64,
    left: Option<u64>,
    visible: usize,
    hidden: usize,
}

impl Merger {
    pub fn new(
        spec: &MergeSpec,
        columns: usize,
        shards: usize,
        protocol: Protocol,
    ) -> Result<Merger, RouterError> {
        let what = if spec.aggregate.is_some() {
            Some("GROUP BY or aggregate functions")
        } else if spec.having.is_some() {
            Some("HAVING")
        } else if spec.distinct {
            Some("DISTINCT")
        } else if !spec.order_by.is_empty() {
            Some("ORDER BY")
        } else if protocol == Protocol::Binary && spec.hidden_columns > 0 {
            Some("hidden columns in the binary protocol")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(RouterError::unsupported(format!(
                "{what} over several datanodes (the cross-shard merge is not in this build)"
            )));
        }
        if spec.hidden_columns > columns {
            return Err(RouterError::unsupported(
                "a merge with more hidden columns than columns",
            ));
        }
        Ok(Merger {
            shards,
            current: 0,
            pending: None,
            ended: vec![false; shards],
            skip: spec.offset,
            left: spec.limit,
            visible: columns - spec.hidden_columns,
            hidden: spec.hidden_columns,
        })
    }

    /// How many of the shards' columns the client sees (the first ones).
    pub fn visible_columns(&self) -> usize {
        self.visible
    }

    pub fn feed_row(&mut self, _shard: usize, row: Vec<u8>) {
        self.pending = Some(row);
    }

    pub fn feed_end(&mut self, shard: usize) {
        self.ended[shard] = true;
    }

    pub fn next(&mut self) -> Result<Step, RouterError> {
        loop {
            if self.left == Some(0) {
                return Ok(Step::Done);
            }
            if let Some(row) = self.pending.take() {
                if self.skip > 0 {
                    self.skip -= 1;
                    continue;
                }
                if let Some(l) = self.left.as_mut() {
                    *l -= 1;
                }
                return Ok(Step::Row(self.strip(row)));
            }
            if self.current == self.shards {
                return Ok(Step::Done);
            }
            if self.ended[self.current] {
                self.current += 1;
                continue;
            }
            return Ok(Step::Need(self.current));
        }
    }

    /// A text row without its hidden (trailing) columns.
    fn strip(&self, mut row: Vec<u8>) -> Vec<u8> {
        if self.hidden == 0 {
            return row;
        }
        let mut b = &row[..];
        for _ in 0..self.visible {
            if b.first() == Some(&0xFB) {
                b = &b[1..];
            } else {
                let Some(n) = read_lenenc(&mut b) else {
                    return row;
                };
                b = b.get(n as usize..).unwrap_or(&[]);
            }
        }
        let keep = row.len() - b.len();
        row.truncate(keep);
        row
    }
}
