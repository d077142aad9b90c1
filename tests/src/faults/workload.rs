//! The workload: writers whose every operation is identifiable on the backends afterwards, and
//! readers, all through Shoal, each logging every operation with what the client saw.
//!
//! Every write names what it writes: `event` rows carry unique ids; a transfer writes, beside
//! each account it updates, a `leg` row (same datanode, same local transaction) naming the
//! transfer, so the backends show which side of which transfer committed; a global-table upsert
//! writes the id of the operation into the row. After a connection error a task reconnects (the
//! fault may be Shoal itself being restarted).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use rand::Rng;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// A hang is a finding, not a wait: an operation still unanswered after this is logged as
/// [`Seen::Hung`] and its connection dropped.
pub const OP_LIMIT: Duration = Duration::from_secs(30);
const CONNECT_LIMIT: Duration = Duration::from_secs(10);
const RECONNECT_PAUSE: Duration = Duration::from_millis(50);

/// Error codes that, answered to the statement that commits, leave the outcome open: the
/// write may have taken effect (or, for 1180, taken effect on some datanodes only).
/// 1180 partial commit; 1430 a backend connection lost (maybe after the server committed);
/// 1969 a statement timeout (a stalled server may still apply it); 2006/2013 server gone.
pub const OUTCOME_OPEN_CODES: [u16; 5] = [1180, 1430, 1969, 2006, 2013];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Insert,
    MultiInsert,
    Transfer,
    /// A transfer that locks both accounts first (`SELECT ... FOR UPDATE`, in a random
    /// order: deadlocks on one server and across servers), by a client that answers 1213 as
    /// its [`Reaction`] says.
    LockingTransfer,
    Upsert,
    PointRead,
    SumRead,
}

/// How a locking transfer's client answers a deadlock (1213): what clients do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reaction {
    Rollback,
    /// Retries at once with BEGIN (on one MariaDB the transaction is gone already).
    Begin,
    /// Sends COMMIT all the same.
    Commit,
    /// Nothing: an autocommit=0 client (no BEGIN) goes on with its next transfer.
    Nothing,
}

impl Reaction {
    /// Writer `w`'s reaction: the four in turn.
    pub fn of(w: usize) -> Reaction {
        [
            Reaction::Rollback,
            Reaction::Begin,
            Reaction::Commit,
            Reaction::Nothing,
        ][w % 4]
    }
}

impl Kind {
    pub fn is_write(self) -> bool {
        !matches!(self, Kind::PointRead | Kind::SumRead)
    }
    pub fn name(self) -> &'static str {
        match self {
            Kind::Insert => "insert",
            Kind::MultiInsert => "multi-insert",
            Kind::Transfer => "transfer",
            Kind::LockingTransfer => "locking transfer",
            Kind::Upsert => "global upsert",
            Kind::PointRead => "point read",
            Kind::SumRead => "scatter sum",
        }
    }
}

/// What the client saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    Ok,
    /// An error packet with this code.
    Server(u16),
    /// The connection broke (or could not be used): no answer.
    Lost,
    /// No answer within [`OP_LIMIT`].
    Hung,
}

impl Seen {
    pub fn label(&self) -> String {
        match self {
            Seen::Ok => "ok".into(),
            Seen::Server(c) => format!("error {c}"),
            Seen::Lost => "connection lost".into(),
            Seen::Hung => "hung".into(),
        }
    }
}

/// What an operation wrote (its identity on the backends).
#[derive(Clone, Debug)]
pub enum What {
    /// `event` rows, by id.
    Rows(Vec<u64>),
    /// `from` (first server's account) gets `delta`, `to` (second server's) gets `-delta`.
    Transfer {
        xfer: u64,
        from: u64,
        to: u64,
        delta: i64,
    },
    /// Global `setting` row `key` set to this operation's id.
    Upsert { key: String, op: u64 },
    /// A point read of this account.
    Point(u64),
    /// A scatter read.
    Read,
}

/// One operation and its outcome. Times are since the workload started.
#[derive(Clone, Debug)]
pub struct Op {
    pub kind: Kind,
    pub what: What,
    pub start: Duration,
    pub end: Duration,
    pub seen: Seen,
    /// The error (if any) answered the statement that commits (COMMIT, or the autocommit
    /// write itself); an error before it means nothing was committed (the transaction was
    /// rolled back or its session closed).
    pub at_commit: bool,
}

/// What the backends must show of an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    Applied,
    NotApplied,
    /// Either, wholly — a half-applied multi-datanode write is an atomicity violation.
    Open,
}

impl Op {
    pub fn expect(&self) -> Expect {
        match &self.seen {
            Seen::Ok => Expect::Applied,
            _ if !self.at_commit => Expect::NotApplied,
            Seen::Server(c) if OUTCOME_OPEN_CODES.contains(c) => Expect::Open,
            Seen::Server(_) => Expect::NotApplied,
            Seen::Lost | Seen::Hung => Expect::Open,
        }
    }
}

/// How many tasks of each kind.
#[derive(Clone, Debug)]
pub struct Mix {
    pub inserters: usize,
    pub multi_inserters: usize,
    pub transferrers: usize,
    /// Locking transfers ([`Kind::LockingTransfer`]), their reactions in turn.
    pub lockers: usize,
    pub upserters: usize,
    pub point_readers: usize,
    pub sum_readers: usize,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            inserters: 2,
            multi_inserters: 2,
            transferrers: 4,
            lockers: 0,
            upserters: 2,
            point_readers: 1,
            sum_readers: 1,
        }
    }
}

/// The accounts, by the server their datanode is on (learned from the backends).
#[derive(Clone, Debug)]
pub struct Accounts {
    pub on_server: [Vec<u64>; 2],
    pub initial_balance: i64,
}

/// Settings rows each upserter owns (one writer per key keeps its operations ordered).
pub const KEYS_PER_UPSERTER: usize = 3;

pub fn upsert_key(writer: usize, k: usize) -> String {
    format!("w{writer}k{k}")
}

/// Everything the tasks logged.
#[derive(Debug, Default)]
pub struct Log {
    pub ops: Vec<Op>,
    /// Failed connection attempts (while Shoal was down, for instance), by what was seen.
    pub connect_failures: BTreeMap<String, u64>,
}

struct Ctx {
    opts: Opts,
    t0: Instant,
    stop: AtomicBool,
    next_id: AtomicU64,
    accounts: Accounts,
    /// Woken just before a transfer sends COMMIT: the moment a fault is most harmful.
    committing: Notify,
}

impl Ctx {
    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
    fn now(&self) -> Duration {
        self.t0.elapsed()
    }
}

/// One task's operations and failed connects.
type TaskLog = (Vec<Op>, BTreeMap<String, u64>);

/// The running workload.
pub struct Workload {
    ctx: Arc<Ctx>,
    tasks: Vec<JoinHandle<TaskLog>>,
}

impl Workload {
    /// Starts `mix` against Shoal at `opts`; times in the log count from now.
    pub fn start(opts: Opts, accounts: Accounts, mix: &Mix) -> Workload {
        let ctx = Arc::new(Ctx {
            opts,
            t0: Instant::now(),
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            accounts,
            committing: Notify::new(),
        });
        let mut tasks = Vec::new();
        let kinds = [
            (Kind::Insert, mix.inserters),
            (Kind::MultiInsert, mix.multi_inserters),
            (Kind::Transfer, mix.transferrers),
            (Kind::LockingTransfer, mix.lockers),
            (Kind::Upsert, mix.upserters),
            (Kind::PointRead, mix.point_readers),
            (Kind::SumRead, mix.sum_readers),
        ];
        for (kind, n) in kinds {
            for w in 0..n {
                tasks.push(tokio::spawn(run_task(ctx.clone(), kind, w)));
            }
        }
        Workload { ctx, tasks }
    }

    /// Time since the workload started (the log's clock).
    pub fn now(&self) -> Duration {
        self.ctx.now()
    }

    /// Resolves just before some transfer sends its COMMIT.
    pub async fn committing(&self) {
        self.ctx.committing.notified().await
    }

    /// Stops every task after its current operation and gathers the log.
    pub async fn stop(self) -> Log {
        self.ctx.stop.store(true, Ordering::Relaxed);
        let mut log = Log::default();
        for t in self.tasks {
            let (ops, failures) = t.await.expect("a workload task panicked");
            log.ops.extend(ops);
            for (k, n) in failures {
                *log.connect_failures.entry(k).or_default() += n;
            }
        }
        log.ops.sort_by_key(|o| o.start);
        log
    }
}

async fn run_task(ctx: Arc<Ctx>, kind: Kind, w: usize) -> TaskLog {
    let mut ops = Vec::new();
    let mut failures: BTreeMap<String, u64> = BTreeMap::new();
    let mut conn: Option<Conn> = None;
    let mut seq = 0u64;
    // A locking transfer's BEGIN was sent already (by the Begin reaction).
    let mut begun = false;
    let reaction = Reaction::of(w);
    while !ctx.stop.load(Ordering::Relaxed) {
        let c = match conn.as_mut() {
            Some(c) => c,
            None => {
                begun = false;
                match tokio::time::timeout(CONNECT_LIMIT, connect(&ctx, kind, reaction)).await {
                    Ok(Ok(c)) => conn = Some(c),
                    Ok(Err(e)) => {
                        *failures.entry(connect_error(&e)).or_default() += 1;
                        tokio::time::sleep(RECONNECT_PAUSE).await;
                    }
                    Err(_) => *failures.entry(Seen::Hung.label()).or_default() += 1,
                }
                continue;
            }
        };
        seq += 1;
        let what = plan(&ctx, kind, w, seq);
        let start = ctx.now();
        let run = async {
            match &what {
                What::Transfer {
                    xfer,
                    from,
                    to,
                    delta,
                } if kind == Kind::LockingTransfer => {
                    let t = (*xfer, *from, *to, *delta);
                    locking_transfer(&ctx, c, t, reaction, &mut begun).await
                }
                _ => execute(&ctx, c, &what, w, seq).await,
            }
        };
        let r = match tokio::time::timeout(OP_LIMIT, run).await {
            Ok(r) => r,
            // Whether it committed is unknown: count it as answered at the commit point.
            Err(_) => Err((Seen::Hung, true)),
        };
        let (seen, at_commit) = match r {
            Ok(()) => (Seen::Ok, false),
            Err((seen, at_commit)) => (seen, at_commit),
        };
        if matches!(seen, Seen::Lost | Seen::Hung) {
            conn = None;
        }
        ops.push(Op {
            kind,
            what,
            start,
            end: ctx.now(),
            seen,
            at_commit,
        });
    }
    if let Some(c) = conn {
        let _ = tokio::time::timeout(Duration::from_secs(2), c.disconnect()).await;
    }
    (ops, failures)
}

/// `Err((seen, at_commit))`.
type OpResult = Result<(), (Seen, bool)>;

/// The operation's identity, fixed before it runs (so a hung one is still identifiable).
fn plan(ctx: &Ctx, kind: Kind, w: usize, seq: u64) -> What {
    let op = ctx.id();
    let mut rng = rand::rng();
    let a = &ctx.accounts.on_server;
    match kind {
        Kind::Insert => What::Rows(vec![op]),
        // Four consecutive ids: one row per datanode under `mod` over four datanodes.
        Kind::MultiInsert => What::Rows((0..4).map(|k| 1_000_000_000 + op * 4 + k).collect()),
        Kind::Transfer => What::Transfer {
            xfer: op,
            from: a[0][rng.random_range(0..a[0].len())],
            to: a[1][rng.random_range(0..a[1].len())],
            delta: rng.random_range(-20i64..=20),
        },
        Kind::LockingTransfer => {
            // Any two of the first three accounts of each server: on one datanode, one
            // server or both, and few enough that transfers collide (and deadlock) often.
            let all: Vec<u64> = a[0]
                .iter()
                .take(3)
                .chain(a[1].iter().take(3))
                .copied()
                .collect();
            let from = all[rng.random_range(0..all.len())];
            let mut to = from;
            while to == from {
                to = all[rng.random_range(0..all.len())];
            }
            What::Transfer {
                xfer: op,
                from,
                to,
                delta: rng.random_range(-20i64..=20),
            }
        }
        Kind::Upsert => What::Upsert {
            key: upsert_key(w, (seq as usize) % KEYS_PER_UPSERTER),
            op,
        },
        Kind::PointRead => {
            let all: Vec<u64> = a[0].iter().chain(&a[1]).copied().collect();
            What::Point(all[rng.random_range(0..all.len())])
        }
        Kind::SumRead => What::Read,
    }
}

async fn execute(ctx: &Ctx, c: &mut Conn, what: &What, w: usize, seq: u64) -> OpResult {
    match what {
        What::Rows(ids) if ids.len() == 1 => {
            let id = ids[0];
            let sql =
                format!("INSERT INTO event (id, writer, seq, op) VALUES ({id}, {w}, {seq}, {id})");
            commit_point(c.query_drop(sql).await)
        }
        What::Rows(ids) => {
            let values: Vec<String> = ids
                .iter()
                .map(|id| format!("({id}, {}, {seq}, {})", 100 + w, ids[0]))
                .collect();
            let sql = format!(
                "INSERT INTO event (id, writer, seq, op) VALUES {}",
                values.join(", ")
            );
            commit_point(c.query_drop(sql).await)
        }
        What::Transfer {
            xfer,
            from,
            to,
            delta,
        } => transfer(ctx, c, *xfer, *from, *to, *delta).await,
        What::Upsert { key, op } => {
            let sql = format!(
                "INSERT INTO setting (k, v, op) VALUES ('{key}', {seq}, {op}) \
                 ON DUPLICATE KEY UPDATE v = VALUES(v), op = VALUES(op)"
            );
            commit_point(c.query_drop(sql).await)
        }
        What::Point(id) => {
            let r: Result<Option<i64>, _> = c
                .query_first(format!("SELECT balance FROM account WHERE id = {id}"))
                .await;
            r.map(|_| ()).map_err(|e| (classify(&e), false))
        }
        What::Read => {
            let r: Result<Option<mysql_async::Row>, _> =
                c.query_first("SELECT SUM(balance) FROM account").await;
            r.map(|_| ()).map_err(|e| (classify(&e), false))
        }
    }
}

fn commit_point(r: Result<(), mysql_async::Error>) -> OpResult {
    r.map_err(|e| (classify(&e), true))
}

/// The first server's account first, then the second's: every transfer locks in the same
/// order, so transfers cannot deadlock across servers (which no server would detect).
async fn transfer(ctx: &Ctx, c: &mut Conn, xfer: u64, from: u64, to: u64, delta: i64) -> OpResult {
    let steps = [
        "BEGIN".to_string(),
        format!("UPDATE account SET balance = balance + {delta} WHERE id = {from}"),
        format!("INSERT INTO leg (xfer, account, delta) VALUES ({xfer}, {from}, {delta})"),
        format!(
            "UPDATE account SET balance = balance + {} WHERE id = {to}",
            -delta
        ),
        format!(
            "INSERT INTO leg (xfer, account, delta) VALUES ({xfer}, {to}, {})",
            -delta
        ),
    ];
    for sql in &steps {
        if let Err(e) = c.query_drop(sql).await {
            let seen = classify(&e);
            if seen != Seen::Lost {
                // A rollback that fails leaves the transaction's fate to the session's end:
                // return an error that drops the connection.
                if c.query_drop("ROLLBACK").await.is_err() {
                    return Err((Seen::Lost, false));
                }
            }
            return Err((seen, false));
        }
    }
    ctx.committing.notify_waiters();
    commit_point(c.query_drop("COMMIT").await)
}

/// A connection for a task: a locking transferrer waits for a lock at most 5 s (a cycle
/// across servers that Shoal did not break ends with 1205, not a hang), and the `Nothing`
/// one runs with autocommit off.
async fn connect(ctx: &Ctx, kind: Kind, reaction: Reaction) -> Result<Conn, mysql_async::Error> {
    let mut c = Conn::new(ctx.opts.clone()).await?;
    if kind == Kind::LockingTransfer {
        c.query_drop("SET SESSION innodb_lock_wait_timeout = 5")
            .await?;
        if reaction == Reaction::Nothing {
            c.query_drop("SET autocommit = 0").await?;
        }
    }
    Ok(c)
}

/// Locks both accounts in a random order, moves `delta` from `to` to `from` and logs each
/// leg beside its account. A 1213 (or the 1402 of a transaction rolled back under it) is
/// answered as `reaction` says; any other error with ROLLBACK.
async fn locking_transfer(
    ctx: &Ctx,
    c: &mut Conn,
    (xfer, from, to, delta): (u64, u64, u64, i64),
    reaction: Reaction,
    begun: &mut bool,
) -> OpResult {
    let (first, second) = if rand::random::<bool>() {
        (from, to)
    } else {
        (to, from)
    };
    let mut steps = Vec::new();
    if reaction != Reaction::Nothing && !std::mem::take(begun) {
        steps.push("BEGIN".to_string());
    }
    steps.extend([
        format!("SELECT balance FROM account WHERE id = {first} FOR UPDATE"),
        format!("SELECT balance FROM account WHERE id = {second} FOR UPDATE"),
        format!("UPDATE account SET balance = balance + {delta} WHERE id = {from}"),
        format!("INSERT INTO leg (xfer, account, delta) VALUES ({xfer}, {from}, {delta})"),
        format!(
            "UPDATE account SET balance = balance + {} WHERE id = {to}",
            -delta
        ),
        format!(
            "INSERT INTO leg (xfer, account, delta) VALUES ({xfer}, {to}, {})",
            -delta
        ),
    ]);
    for sql in &steps {
        if let Err(e) = c.query_drop(sql).await {
            let seen = classify(&e);
            let ended = matches!(seen, Seen::Server(1213 | 1402));
            let answer = match (seen.clone(), reaction) {
                (Seen::Lost, _) => None,
                (_, Reaction::Rollback) => Some("ROLLBACK"),
                (_, _) if !ended => Some("ROLLBACK"),
                (_, Reaction::Begin) => Some("BEGIN"),
                (_, Reaction::Commit) => Some("COMMIT"),
                (_, Reaction::Nothing) => None,
            };
            if let Some(answer) = answer {
                match c.query_drop(answer).await {
                    Ok(()) => *begun = answer == "BEGIN",
                    // Its session's end decides the transaction: the connection is dropped.
                    Err(_) => return Err((Seen::Lost, false)),
                }
            }
            return Err((seen, false));
        }
    }
    ctx.committing.notify_waiters();
    commit_point(c.query_drop("COMMIT").await)
}

/// A failed connect, by what it was (refused while Shoal is down, an error from its login...).
fn connect_error(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(s) => format!("error {}", s.code),
        mysql_async::Error::Io(io) => {
            let text = io.to_string();
            let short: String = text.chars().take(40).collect();
            format!("io: {short}")
        }
        other => {
            let text = other.to_string();
            text.chars().take(40).collect()
        }
    }
}

/// A server error by its code; anything else (I/O, a closed connection, a protocol error)
/// means the connection is unusable.
pub fn classify(e: &mysql_async::Error) -> Seen {
    match e {
        mysql_async::Error::Server(s) => Seen::Server(s.code),
        _ => Seen::Lost,
    }
}
