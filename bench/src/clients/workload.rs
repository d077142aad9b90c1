//! What the clients of one cell do: idle clients log in, run one point select and stay open;
//! active clients run point selects with a scatter every few statements; a probe opens new
//! connections one after another while they run. Every answer is checked (a fast wrong answer
//! must not count as a fast answer).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Row};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::TABLE;
use crate::error::BenchError;
use crate::interrupt;
use crate::load::Endpoint;

/// How long one login or statement may take before the run fails: the config's acquire timeout
/// is 120 s, so a statement still waiting past this is a hang, not a slow answer.
const STATEMENT_LIMIT: Duration = Duration::from_secs(150);

/// The options of every client connection. mysql_async is told `max_allowed_packet` and
/// `wait_timeout`, so that it reads neither with a `SELECT @@...` of its own after logging in: a
/// login is then the TCP connect, the handshake and the authentication, nothing else, and the
/// first statement is the probe's own point select.
pub fn client_opts(ep: &Endpoint) -> Opts {
    OptsBuilder::from_opts(ep.opts())
        .max_allowed_packet(Some(16 << 20))
        .wait_timeout(Some(28_800))
        .into()
}

/// The point select of row `id` (ids `1..=rows`, each once) and the scatter.
pub fn point_sql(id: u64) -> String {
    format!("SELECT id, k FROM {TABLE} WHERE id = {id}")
}

pub fn scatter_sql() -> String {
    format!("SELECT COUNT(*) FROM {TABLE}")
}

/// The `k` column of row `id`, as the load writes it.
pub fn k_of(id: u64) -> u64 {
    id * 7 % 1000
}

/// Why the answer of a point select of `id` is wrong, if it is.
fn check_point(rows: &[Row], id: u64) -> Option<String> {
    let got: Vec<(Option<u64>, Option<u64>)> = rows
        .iter()
        .map(|r| {
            (
                r.get_opt::<u64, _>(0).and_then(Result::ok),
                r.get_opt::<u64, _>(1).and_then(Result::ok),
            )
        })
        .collect();
    (got != [(Some(id), Some(k_of(id)))]).then(|| {
        format!(
            "{}: got {got:?}, expected [({id}, {})]",
            point_sql(id),
            k_of(id)
        )
    })
}

/// Why the answer of the scatter is wrong, if it is.
fn check_count(rows: &[Row], expected: u64) -> Option<String> {
    let got: Vec<Option<u64>> = rows
        .iter()
        .map(|r| r.get_opt::<u64, _>(0).and_then(Result::ok))
        .collect();
    (got != [Some(expected)])
        .then(|| format!("{}: got {got:?}, expected {expected}", scatter_sql()))
}

/// What an answer must be.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// The point select's one row.
    Row(u64),
    /// The scatter's count.
    Count(u64),
}

impl Expect {
    /// Why `rows` is the wrong answer, if it is.
    fn check(self, rows: &[Row]) -> Option<String> {
        match self {
            Expect::Row(id) => check_point(rows, id),
            Expect::Count(n) => check_count(rows, n),
        }
    }
}

/// An idle client's statement: the point select of row `id`, or the scatter of `rows` rows.
fn idle_query(statement: IdleStatement, id: u64, rows: u64) -> (String, Expect) {
    match statement {
        IdleStatement::Point => (point_sql(id), Expect::Row(id)),
        IdleStatement::Scatter => (scatter_sql(), Expect::Count(rows)),
    }
}

/// Awaits `fut`, failing past [`STATEMENT_LIMIT`] with `what` named.
async fn limited<T>(
    what: &str,
    fut: impl std::future::Future<Output = Result<T, mysql_async::Error>>,
) -> Result<Result<T, mysql_async::Error>, BenchError> {
    tokio::time::timeout(STATEMENT_LIMIT, fut)
        .await
        .map_err(|_| BenchError::Tool(format!("{what}: no answer within {STATEMENT_LIMIT:?}")))
}

/// What opening idle clients gave: the connections, and how many could not log in or run their
/// statement (each with the first error, described).
#[derive(Default)]
pub struct Opened {
    pub conns: Vec<Conn>,
    pub failed: u64,
    pub first_error: Option<String>,
    pub wrong: u64,
    pub first_wrong: Option<String>,
}

/// The one statement an idle client runs after logging in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IdleStatement {
    /// A point select: one datanode, so one server.
    Point,
    /// The scatter: every datanode of both servers.
    Scatter,
}

/// Opens `count` idle clients, `concurrency` at a time: each logs in, runs `statement` (the point
/// select of row `first + i`: consecutive ids land on every datanode in turn) and is kept open.
pub async fn open_idle(
    ep: &Endpoint,
    first: u64,
    count: u64,
    rows: u64,
    statement: IdleStatement,
    concurrency: usize,
) -> Result<Opened, BenchError> {
    let gate = Arc::new(Semaphore::new(concurrency.max(1)));
    type Idle = Result<Result<(Conn, Option<String>), String>, BenchError>;
    let mut tasks: JoinSet<Idle> = JoinSet::new();
    for i in 0..count {
        let (gate, opts, label) = (gate.clone(), client_opts(ep), ep.label());
        let id = (first + i) % rows + 1;
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await.expect("semaphore open");
            interrupt::check()?;
            let mut conn = match limited(&label, Conn::new(opts)).await? {
                Ok(c) => c,
                Err(e) => return Ok(Err(format!("login: {e}"))),
            };
            let (sql, expect) = idle_query(statement, id, rows);
            match limited(&label, conn.query::<Row, _>(sql.as_str())).await? {
                Ok(answer) => Ok(Ok((conn, expect.check(&answer)))),
                Err(e) => Ok(Err(format!("{sql}: {e}"))),
            }
        });
    }
    let mut opened = Opened::default();
    while let Some(joined) = tasks.join_next().await {
        let one: Result<_, String> =
            joined.map_err(|e| BenchError::Tool(format!("idle client task: {e}")))??;
        match one {
            Ok((conn, wrong)) => {
                opened.conns.push(conn);
                if let Some(w) = wrong {
                    opened.wrong += 1;
                    opened.first_wrong.get_or_insert(w);
                }
            }
            Err(e) => {
                opened.failed += 1;
                opened.first_error.get_or_insert(e);
            }
        }
    }
    Ok(opened)
}

/// Closes connections, all at once.
pub async fn close_all(conns: Vec<Conn>) {
    let mut tasks = JoinSet::new();
    for c in conns {
        tasks.spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(10), c.disconnect()).await;
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// What the active clients and the probe of one cell measured, latencies in microseconds.
#[derive(Debug, Default, Clone)]
pub struct Measured {
    pub secs: f64,
    pub point_us: Vec<u32>,
    pub scatter_us: Vec<u32>,
    /// The probe: login (connect, handshake, authentication), its first statement (a point
    /// select) and then a scatter, from a session that holds no connection to most datanodes.
    pub login_us: Vec<u32>,
    pub first_us: Vec<u32>,
    pub fresh_scatter_us: Vec<u32>,
    /// Idle clients waking up for one statement each (`--idle-rate`).
    pub wake_us: Vec<u32>,
    /// Statements and logins that failed with an error (each counted; the first described).
    pub errors: u64,
    pub login_errors: u64,
    pub first_error: Option<String>,
    pub wrong: u64,
    pub first_wrong: Option<String>,
}

impl Measured {
    fn merge(&mut self, other: Measured) {
        self.point_us.extend(other.point_us);
        self.scatter_us.extend(other.scatter_us);
        self.login_us.extend(other.login_us);
        self.first_us.extend(other.first_us);
        self.fresh_scatter_us.extend(other.fresh_scatter_us);
        self.wake_us.extend(other.wake_us);
        self.errors += other.errors;
        self.login_errors += other.login_errors;
        self.wrong += other.wrong;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        if self.first_wrong.is_none() {
            self.first_wrong = other.first_wrong;
        }
    }

    /// Statements the active clients completed (the QPS figure).
    pub fn statements(&self) -> u64 {
        (self.point_us.len() + self.scatter_us.len()) as u64
    }

    /// Every statement that completed: the active clients', the idle clients' wake-ups and the
    /// probe's (what Shoal's CPU time of the window is divided by).
    pub fn all_statements(&self) -> u64 {
        self.statements()
            + (self.wake_us.len() + self.first_us.len() + self.fresh_scatter_us.len()) as u64
    }

    fn error(&mut self, e: String) {
        self.errors += 1;
        self.first_error.get_or_insert(e);
    }

    fn wrong(&mut self, w: Option<String>) {
        if let Some(w) = w {
            self.wrong += 1;
            self.first_wrong.get_or_insert(w);
        }
    }
}

/// The load of one cell's measured window.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub active: usize,
    pub duration: Duration,
    /// Every this-many-th statement of an active client is the scatter.
    pub scatter_every: u64,
    pub rows: u64,
    /// Pause between two probe logins.
    pub login_interval: Duration,
    /// Statements per second the idle clients run in all, each client in turn one statement.
    pub idle_rate: f64,
    pub idle_statement: IdleStatement,
}

/// What a window gives back: the figures, and every client connection still open (the active
/// ones, then the idle ones).
pub struct WindowEnd {
    pub measured: Measured,
    pub active: Vec<Conn>,
    pub idle: Vec<Conn>,
}

/// Lanes the idle clients' wake-ups run on (each its share of the clients, in turn), so that a
/// wake-up waiting for a connection does not hold up every other one.
const WAKE_LANES: usize = 16;

/// Runs `window.active` clients (logged in first, outside the window), the login probe and the
/// idle clients' wake-ups for `window.duration`. The active clients' connections come back
/// open: they stay as idle clients that last ran statements, holding what they hold, until the
/// caller closes them.
pub async fn run_window(
    ep: &Endpoint,
    window: Window,
    idle: Vec<Conn>,
) -> Result<WindowEnd, BenchError> {
    let mut conns = Vec::with_capacity(window.active);
    for _ in 0..window.active {
        conns.push(
            limited(&ep.label(), Conn::new(client_opts(ep)))
                .await?
                .map_err(BenchError::sql(ep.label(), "connect (active client)"))?,
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = JoinSet::new();
    for (i, conn) in conns.into_iter().enumerate() {
        let stop = stop.clone();
        tasks.spawn(active_client(conn, i as u64, window, stop, ep.label()));
    }
    let prober = tokio::spawn(probe(client_opts(ep), window, stop.clone(), ep.label()));
    let mut lanes = JoinSet::new();
    let lane_count = WAKE_LANES.min(idle.len());
    if window.idle_rate > 0.0 && lane_count > 0 {
        let mut shares: Vec<Vec<Conn>> = (0..lane_count).map(|_| Vec::new()).collect();
        for (i, c) in idle.into_iter().enumerate() {
            shares[i % lane_count].push(c);
        }
        let every = Duration::from_secs_f64(lane_count as f64 / window.idle_rate);
        for (lane, conns) in shares.into_iter().enumerate() {
            lanes.spawn(wake_lane(
                conns,
                lane as u64,
                every,
                window,
                stop.clone(),
                ep.label(),
            ));
        }
    } else {
        lanes.spawn(async move { Ok((Measured::default(), idle)) });
    }
    let started = Instant::now();
    tokio::time::sleep(window.duration).await;
    stop.store(true, Ordering::Relaxed);
    let failed = |e: tokio::task::JoinError| BenchError::Tool(format!("client task: {e}"));
    let mut all = prober.await.map_err(failed)??;
    let mut active = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (m, conn) = joined.map_err(failed)??;
        all.merge(m);
        active.push(conn);
    }
    let mut idle = Vec::new();
    while let Some(joined) = lanes.join_next().await {
        let (m, conns) = joined.map_err(failed)??;
        all.merge(m);
        idle.extend(conns);
    }
    all.secs = started.elapsed().as_secs_f64();
    Ok(WindowEnd {
        measured: all,
        active,
        idle,
    })
}

/// One lane of idle clients waking up: every `every`, the next client in turn runs its idle
/// statement (the lane falls behind, never bunches up, when one waits).
async fn wake_lane(
    mut conns: Vec<Conn>,
    lane: u64,
    every: Duration,
    window: Window,
    stop: Arc<AtomicBool>,
    label: String,
) -> Result<(Measured, Vec<Conn>), BenchError> {
    let mut m = Measured::default();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next = 0usize;
    let mut id = lane;
    loop {
        tick.tick().await;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        interrupt::check()?;
        id = id % window.rows + 1;
        let (sql, expect) = idle_query(window.idle_statement, id, window.rows);
        let len = conns.len();
        let conn = &mut conns[next];
        next = (next + 1) % len;
        let t = Instant::now();
        match limited(&label, conn.query::<Row, _>(sql.as_str())).await? {
            Ok(rows) => {
                m.wake_us.push(micros(t.elapsed()));
                m.wrong(expect.check(&rows));
            }
            Err(e) => m.error(format!("idle client {sql}: {e}")),
        }
    }
    Ok((m, conns))
}

async fn active_client(
    mut conn: Conn,
    seed: u64,
    window: Window,
    stop: Arc<AtomicBool>,
    label: String,
) -> Result<(Measured, Conn), BenchError> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut m = Measured::default();
    let every = window.scatter_every.max(1);
    // Clients start at different places in the cycle, so that scatters are spread over time.
    let mut n = seed;
    while !stop.load(Ordering::Relaxed) {
        interrupt::check()?;
        n += 1;
        let t = Instant::now();
        if n.is_multiple_of(every) {
            match limited(&label, conn.query::<Row, _>(scatter_sql())).await? {
                Ok(rows) => {
                    m.scatter_us.push(micros(t.elapsed()));
                    m.wrong(check_count(&rows, window.rows));
                }
                Err(e) => m.error(format!("{}: {e}", scatter_sql())),
            }
        } else {
            let id = rng.random_range(1..=window.rows);
            match limited(&label, conn.query::<Row, _>(point_sql(id))).await? {
                Ok(rows) => {
                    m.point_us.push(micros(t.elapsed()));
                    m.wrong(check_point(&rows, id));
                }
                Err(e) => m.error(format!("{}: {e}", point_sql(id))),
            }
        }
    }
    Ok((m, conn))
}

/// New connections one after another while the others are open: each logs in, runs one point
/// select and the scatter, and is closed (the closing not timed), then the probe pauses.
async fn probe(
    opts: Opts,
    window: Window,
    stop: Arc<AtomicBool>,
    label: String,
) -> Result<Measured, BenchError> {
    let mut m = Measured::default();
    let mut id = 0u64;
    while !stop.load(Ordering::Relaxed) {
        interrupt::check()?;
        id = id % window.rows + 1;
        let t = Instant::now();
        let mut conn = match limited(&label, Conn::new(opts.clone())).await? {
            Ok(c) => c,
            Err(e) => {
                m.login_errors += 1;
                m.first_error.get_or_insert(format!("probe login: {e}"));
                tokio::time::sleep(window.login_interval).await;
                continue;
            }
        };
        m.login_us.push(micros(t.elapsed()));
        let t = Instant::now();
        match limited(&label, conn.query::<Row, _>(point_sql(id))).await? {
            Ok(rows) => {
                m.first_us.push(micros(t.elapsed()));
                m.wrong(check_point(&rows, id));
            }
            Err(e) => m.error(format!("probe {}: {e}", point_sql(id))),
        }
        let t = Instant::now();
        match limited(&label, conn.query::<Row, _>(scatter_sql())).await? {
            Ok(rows) => {
                m.fresh_scatter_us.push(micros(t.elapsed()));
                m.wrong(check_count(&rows, window.rows));
            }
            Err(e) => m.error(format!("probe {}: {e}", scatter_sql())),
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), conn.disconnect()).await;
        tokio::time::sleep(window.login_interval).await;
    }
    Ok(m)
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measurements_of_clients_add_up() {
        let mut a = Measured {
            point_us: vec![1, 2],
            scatter_us: vec![3],
            errors: 1,
            first_error: Some("first".into()),
            ..Measured::default()
        };
        a.merge(Measured {
            point_us: vec![4],
            login_us: vec![5],
            errors: 2,
            first_error: Some("second".into()),
            wrong: 1,
            first_wrong: Some("w".into()),
            ..Measured::default()
        });
        assert_eq!(a.statements(), 4);
        assert_eq!(a.all_statements(), 4);
        assert_eq!((a.errors, a.wrong), (3, 1));
        assert_eq!(a.first_error.as_deref(), Some("first"));
        assert_eq!(a.first_wrong.as_deref(), Some("w"));
        assert_eq!(a.login_us, vec![5]);
    }

    #[test]
    fn statements_name_the_table_and_row() {
        assert_eq!(
            point_sql(42),
            format!("SELECT id, k FROM {TABLE} WHERE id = 42")
        );
        assert_eq!(scatter_sql(), format!("SELECT COUNT(*) FROM {TABLE}"));
        assert_eq!(k_of(3), 21);
        assert_eq!(k_of(1000), 0);
    }
}
