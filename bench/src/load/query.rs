//! Query phases: a fixed number of queries over `threads` connections, every answer checked
//! (a fast wrong answer must not count as a fast answer), with per-query latency.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use mysql_async::Row;
use mysql_async::prelude::Queryable;
use serde::Serialize;
use tokio::task::JoinSet;

use super::insert::connect_many;
use super::{Endpoint, table};
use crate::error::BenchError;
use crate::interrupt;
use crate::progress::Progress;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueryKind {
    /// `SELECT * ... WHERE FACTID = n` for ids spread over `1..=rows`: exactly one row back.
    PointSelect,
    /// The same as a server-side prepared statement (`FACTID = ?`), as sysbench and most
    /// connectors' prepared statements send it.
    PointSelectPrepared,
    /// `SELECT COUNT(*), SUM(SALENUM)` over the whole table: every shard when sharded (a scatter).
    Aggregate,
}

#[derive(Debug, Clone)]
pub struct QuerySpec {
    pub kind: QueryKind,
    /// The table holds FACTIDs `1..=rows`, each once.
    pub rows: u64,
    pub queries: u64,
    pub threads: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueryStat {
    pub kind: QueryKind,
    pub queries: u64,
    pub threads: usize,
    pub secs: f64,
    pub qps: f64,
    pub avg_ms: f64,
    pub max_ms: f64,
    /// Answers that were not the expected one (should be 0; any is a correctness bug).
    pub wrong: u64,
    /// The first wrong answer, described.
    pub first_wrong: Option<String>,
}

pub async fn run_queries(
    ep: &Endpoint,
    spec: &QuerySpec,
    progress: &Progress,
) -> Result<QueryStat, BenchError> {
    let conns = connect_many(ep, spec.threads.max(1)).await?;
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for mut conn in conns {
        let (next, progress, spec, label) =
            (next.clone(), progress.clone(), spec.clone(), ep.label());
        tasks.spawn(async move {
            let mut worker = Worker::default();
            loop {
                interrupt::check()?;
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= spec.queries {
                    break;
                }
                let (sql, expect) = query_for(&spec, i);
                let t = Instant::now();
                let rows: Vec<Row> = match (spec.kind, &expect) {
                    // mysql_async prepares the text once per connection and keeps it.
                    (QueryKind::PointSelectPrepared, Expect::OneRowWithId(id)) => {
                        conn.exec(sql.as_str(), (*id,)).await
                    }
                    _ => conn.query(sql.as_str()).await,
                }
                .map_err(BenchError::sql(label.clone(), sql.clone()))?;
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                worker.total_ms += ms;
                worker.max_ms = worker.max_ms.max(ms);
                if let Err(why) = expect.check(&rows) {
                    worker.wrong += 1;
                    worker.first_wrong.get_or_insert(format!("{sql}: {why}"));
                }
                progress.inc(1);
            }
            let _ = conn.disconnect().await;
            Ok::<_, BenchError>(worker)
        });
    }
    let mut sum = Worker::default();
    while let Some(joined) = tasks.join_next().await {
        let w = joined.map_err(|e| BenchError::Tool(format!("query worker: {e}")))??;
        sum.total_ms += w.total_ms;
        sum.max_ms = sum.max_ms.max(w.max_ms);
        sum.wrong += w.wrong;
        if sum.first_wrong.is_none() {
            sum.first_wrong = w.first_wrong;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(QueryStat {
        kind: spec.kind,
        queries: spec.queries,
        threads: spec.threads,
        secs,
        qps: spec.queries as f64 / secs.max(1e-9),
        avg_ms: sum.total_ms / spec.queries.max(1) as f64,
        max_ms: sum.max_ms,
        wrong: sum.wrong,
        first_wrong: sum.first_wrong,
    })
}

#[derive(Default)]
struct Worker {
    total_ms: f64,
    max_ms: f64,
    wrong: u64,
    first_wrong: Option<String>,
}

enum Expect {
    OneRowWithId(u64),
    CountAndSum(u64, u64),
}

impl Expect {
    fn check(&self, rows: &[Row]) -> Result<(), String> {
        match *self {
            Expect::OneRowWithId(id) => {
                if rows.len() != 1 {
                    return Err(format!("{} rows, expected 1", rows.len()));
                }
                match rows[0].get_opt::<u64, _>(0) {
                    Some(Ok(got)) if got == id => Ok(()),
                    other => Err(format!("FACTID {other:?}, expected {id}")),
                }
            }
            Expect::CountAndSum(count, sum) => {
                let got = rows.first().map(|r| {
                    (
                        r.get_opt::<u64, _>(0).and_then(Result::ok),
                        r.get_opt::<u64, _>(1).and_then(Result::ok),
                    )
                });
                match got {
                    Some((Some(c), Some(s))) if rows.len() == 1 && c == count && s == sum => Ok(()),
                    _ => Err(format!(
                        "got {got:?} in {} rows, expected one row ({count}, {sum})",
                        rows.len()
                    )),
                }
            }
        }
    }
}

/// The `i`-th query: point selects walk the ids with a stride coprime to nothing in particular
/// (so consecutive queries hit different shards and pages), deterministically.
fn query_for(spec: &QuerySpec, i: u64) -> (String, Expect) {
    match spec.kind {
        QueryKind::PointSelect | QueryKind::PointSelectPrepared => {
            let rows = spec.rows.max(1);
            let id = 1 + (i.wrapping_mul(2_654_435_761) % rows);
            let value = match spec.kind {
                QueryKind::PointSelect => id.to_string(),
                _ => "?".to_string(),
            };
            (
                format!(
                    "SELECT * FROM `{}` WHERE `{}` = {value}",
                    table::TABLE,
                    table::KEY
                ),
                Expect::OneRowWithId(id),
            )
        }
        QueryKind::Aggregate => (
            format!("SELECT COUNT(*), SUM(SALENUM) FROM `{}`", table::TABLE),
            Expect::CountAndSum(spec.rows, table::salenum_sum(spec.rows)),
        ),
    }
}
