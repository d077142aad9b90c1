//! Inserts in timed rounds: `rows` split into `rounds` equal parts, each round timed on its own
//! (the report's "QPS after each round"), by `concurrency` connections opened once beforehand.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use serde::Serialize;
use tokio::task::JoinSet;

use super::{Endpoint, table};
use crate::error::BenchError;
use crate::interrupt;
use crate::progress::Progress;

#[derive(Debug, Clone)]
pub struct InsertSpec {
    /// FACTIDs `first_id..first_id + rows` are inserted, each once.
    pub first_id: u64,
    pub rows: u64,
    pub rounds: u32,
    pub concurrency: usize,
    /// Rows per INSERT statement (1: single-row INSERTs, as the report ran).
    pub batch: u64,
}

/// One round's figures.
#[derive(Debug, Clone, Serialize)]
pub struct RoundStat {
    pub round: u32,
    /// Rows in the table after this round (of this run).
    pub rows_after: u64,
    pub rows: u64,
    pub statements: u64,
    pub secs: f64,
    /// Rows per second (= statements per second for single-row INSERTs).
    pub qps: f64,
}

pub async fn insert_rounds(
    ep: &Endpoint,
    spec: &InsertSpec,
    progress: &Progress,
) -> Result<Vec<RoundStat>, BenchError> {
    if spec.rounds == 0 || spec.concurrency == 0 || spec.batch == 0 {
        return Err(BenchError::Tool(
            "rounds, concurrency and batch must be at least 1".into(),
        ));
    }
    let mut conns = connect_many(ep, spec.concurrency).await?;
    let mut stats = Vec::new();
    let mut next_first = spec.first_id;
    let mut after = 0;
    for round in 0..spec.rounds {
        interrupt::check()?;
        let rows = spec.rows / spec.rounds as u64
            + u64::from(round + 1 == spec.rounds) * (spec.rows % spec.rounds as u64);
        let range = next_first..next_first + rows;
        next_first += rows;
        let next = Arc::new(AtomicU64::new(range.start));
        let statements = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let mut tasks: JoinSet<Result<Conn, BenchError>> = JoinSet::new();
        for mut conn in conns.drain(..) {
            let (next, statements, progress) = (next.clone(), statements.clone(), progress.clone());
            let (end, batch, label) = (range.end, spec.batch, ep.label());
            tasks.spawn(async move {
                loop {
                    interrupt::check()?;
                    let first = next.fetch_add(batch, Ordering::Relaxed);
                    if first >= end {
                        return Ok(conn);
                    }
                    let n = batch.min(end - first);
                    conn.query_drop(table::insert_sql(first, n))
                        .await
                        .map_err(BenchError::sql(
                            label.clone(),
                            format!("INSERT of FACTID {first}..{}", first + n),
                        ))?;
                    statements.fetch_add(1, Ordering::Relaxed);
                    progress.inc(n);
                }
            });
        }
        // The first failure aborts the round: dropping the JoinSet cancels the other workers.
        while let Some(joined) = tasks.join_next().await {
            let conn: Conn =
                joined.map_err(|e| BenchError::Tool(format!("insert worker: {e}")))??;
            conns.push(conn);
        }
        let secs = started.elapsed().as_secs_f64();
        after += rows;
        stats.push(RoundStat {
            round: round + 1,
            rows_after: after,
            rows,
            statements: statements.load(Ordering::Relaxed),
            secs,
            qps: rows as f64 / secs.max(1e-9),
        });
    }
    for conn in conns {
        let _ = conn.disconnect().await;
    }
    Ok(stats)
}

/// `n` connections, opened 32 at a time (a burst of hundreds of handshakes is not what is timed).
pub(crate) async fn connect_many(ep: &Endpoint, n: usize) -> Result<Vec<Conn>, BenchError> {
    let mut conns = Vec::with_capacity(n);
    while conns.len() < n {
        interrupt::check()?;
        let mut set = JoinSet::new();
        for _ in 0..(n - conns.len()).min(32) {
            let ep = ep.clone();
            set.spawn(async move { ep.connect().await });
        }
        while let Some(c) = set.join_next().await {
            conns.push(c.map_err(|e| BenchError::Tool(format!("connect task: {e}")))??);
        }
    }
    Ok(conns)
}
