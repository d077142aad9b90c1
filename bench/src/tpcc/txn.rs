//! The five TPC-C transactions (clause 2.4-2.8) as text statements in the sysbench-tpcc style
//! (the join of New-Order written `c_w_id = w_id`, unqualified, as TPC-C clients write it), the
//! mix (45/43/4/4/4), and a terminal's loop: keying and think times off, each terminal bound to
//! its home warehouse. Deadlocks (1213) and lock wait timeouts (1205) are rolled back and the
//! same transaction retried, as TPC-C drivers do, and counted; any other error is rolled back
//! and counted as an error (its message kept for the report).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::keys::{self, Constants};
use super::schema::{DISTRICTS, Scale, cents, money};
use crate::error::BenchError;
use crate::load::{Endpoint, abbreviate};
use crate::results::percentile_ms;

/// The five transaction types, in the spec's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Kind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::NewOrder,
        Kind::Payment,
        Kind::OrderStatus,
        Kind::Delivery,
        Kind::StockLevel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::NewOrder => "new_order",
            Kind::Payment => "payment",
            Kind::OrderStatus => "order_status",
            Kind::Delivery => "delivery",
            Kind::StockLevel => "stock_level",
        }
    }

    /// The mix: New-Order 45%, Payment 43%, Order-Status, Delivery and Stock-Level 4% each.
    fn pick(rng: &mut impl Rng) -> Kind {
        match rng.random_range(1..=100) {
            1..=45 => Kind::NewOrder,
            46..=88 => Kind::Payment,
            89..=92 => Kind::OrderStatus,
            93..=96 => Kind::Delivery,
            _ => Kind::StockLevel,
        }
    }
}

/// A failed statement: the server's (or client's) error with the statement that got it.
#[derive(Debug)]
pub struct TxError {
    pub sql: String,
    pub error: mysql_async::Error,
}

impl TxError {
    fn code(&self) -> Option<u16> {
        match &self.error {
            mysql_async::Error::Server(e) => Some(e.code),
            _ => None,
        }
    }

    /// Deadlock or lock wait timeout: roll back and run the same transaction again.
    fn retryable(&self) -> bool {
        matches!(self.code(), Some(1213 | 1205))
    }

    /// How the report lists it: the error, then the statement.
    pub fn summary(&self) -> String {
        let e = match &self.error {
            mysql_async::Error::Server(e) => {
                format!("ERROR {} ({}): {}", e.code, e.state, e.message)
            }
            other => other.to_string(),
        };
        format!("{e} -- in: {}", abbreviate(&self.sql))
    }
}

type TxResult<T> = Result<T, TxError>;

async fn rows(conn: &mut Conn, sql: String) -> TxResult<Vec<Row>> {
    match conn.query::<Row, _>(sql.as_str()).await {
        Ok(r) => Ok(r),
        Err(error) => Err(TxError { sql, error }),
    }
}

async fn exec(conn: &mut Conn, sql: String) -> TxResult<u64> {
    match conn.query_drop(sql.as_str()).await {
        Ok(()) => Ok(conn.affected_rows()),
        Err(error) => Err(TxError { sql, error }),
    }
}

/// Column `i` of `row` as text (`None` for NULL).
fn text(row: &Row, i: usize) -> Option<String> {
    row.get::<Option<String>, _>(i).flatten()
}

fn int(row: &Row, i: usize) -> i64 {
    text(row, i).and_then(|t| t.parse().ok()).unwrap_or(0)
}

/// How a transaction ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Committed,
    /// New-Order's 1%: an unused item id, rolled back as the spec asks.
    RolledBack,
}

/// What one terminal knows: its home warehouse and the database's size.
#[derive(Debug, Clone, Copy)]
pub struct Terminal {
    pub home: u32,
    pub scale: Scale,
    pub c: Constants,
}

impl Terminal {
    fn other_warehouse(&self, rng: &mut impl Rng) -> u32 {
        let w = rng.random_range(1..self.scale.warehouses);
        if w >= self.home { w + 1 } else { w }
    }

    fn customer_id(&self, rng: &mut impl Rng) -> u32 {
        keys::nurand(rng, 1023, self.c.c_id, 1, self.scale.customers)
    }

    /// 60% by last name, 40% by id (Payment and Order-Status).
    fn who(&self, rng: &mut impl Rng) -> Who {
        if rng.random_range(1..=100) <= 60 {
            Who::Last(self.last_name(rng))
        } else {
            Who::Id(self.customer_id(rng))
        }
    }

    fn last_name(&self, rng: &mut impl Rng) -> String {
        keys::last_name(keys::nurand(
            rng,
            255,
            self.c.c_last,
            0,
            self.scale.last_name_max(),
        ))
    }
}

/// A customer chosen by id or by last name (the middle one of those with the name, by c_first).
#[derive(Debug, Clone)]
enum Who {
    Id(u32),
    Last(String),
}

/// The input of one transaction, drawn before it runs so that a retry repeats it exactly.
#[derive(Debug, Clone)]
enum Input {
    NewOrder {
        d: u32,
        c: u32,
        /// (item, supplying warehouse, quantity)
        lines: Vec<(u32, u32, u32)>,
    },
    Payment {
        d: u32,
        cw: u32,
        cd: u32,
        who: Who,
        amount: i64,
    },
    OrderStatus {
        d: u32,
        who: Who,
    },
    Delivery {
        carrier: u32,
    },
    StockLevel {
        d: u32,
        threshold: u32,
    },
}

impl Input {
    fn draw(kind: Kind, t: &Terminal, rng: &mut impl Rng) -> Input {
        let d = rng.random_range(1..=DISTRICTS);
        match kind {
            Kind::NewOrder => {
                let n = rng.random_range(5..=15);
                let rollback = rng.random_range(1..=100) == 1;
                let mut lines: Vec<(u32, u32, u32)> = (0..n)
                    .map(|_| {
                        let i = keys::nurand(rng, 8191, t.c.ol_i_id, 1, t.scale.items);
                        let supply = if t.scale.warehouses > 1 && rng.random_range(1..=100) == 1 {
                            t.other_warehouse(rng)
                        } else {
                            t.home
                        };
                        (i, supply, rng.random_range(1..=10))
                    })
                    .collect();
                // Stock rows locked in one order (as BenchmarkSQL does) so that two New-Orders
                // deadlock less; the unused item of a rolled-back order stays last.
                lines.sort_unstable_by_key(|l| (l.1, l.0));
                if rollback {
                    lines.last_mut().expect("5 or more lines").0 = t.scale.items + 1;
                }
                Input::NewOrder {
                    d,
                    c: t.customer_id(rng),
                    lines,
                }
            }
            Kind::Payment => {
                let (cw, cd) = if t.scale.warehouses > 1 && rng.random_range(1..=100) <= 15 {
                    (t.other_warehouse(rng), rng.random_range(1..=DISTRICTS))
                } else {
                    (t.home, d)
                };
                Input::Payment {
                    d,
                    cw,
                    cd,
                    who: t.who(rng),
                    amount: rng.random_range(100..=500_000),
                }
            }
            Kind::OrderStatus => Input::OrderStatus { d, who: t.who(rng) },
            Kind::Delivery => Input::Delivery {
                carrier: rng.random_range(1..=10),
            },
            Kind::StockLevel => Input::StockLevel {
                d,
                threshold: rng.random_range(10..=20),
            },
        }
    }
}

/// The customer `who` names in district (w, d): its c_id, by the spec's rule for last names
/// (position ceil(n / 2) of the customers with the name, ordered by c_first).
async fn find_customer(
    conn: &mut Conn,
    w: u32,
    d: u32,
    who: &Who,
    columns: &str,
) -> TxResult<Option<Row>> {
    match who {
        Who::Id(c) => Ok(rows(
            conn,
            format!(
                "SELECT {columns} FROM customer WHERE c_w_id = {w} AND c_d_id = {d} AND c_id = {c}"
            ),
        )
        .await?
        .into_iter()
        .next()),
        Who::Last(name) => {
            let mut found = rows(
                conn,
                format!(
                    "SELECT {columns} FROM customer WHERE c_w_id = {w} AND c_d_id = {d} \
                     AND c_last = '{name}' ORDER BY c_first"
                ),
            )
            .await?;
            if found.is_empty() {
                return Ok(None);
            }
            let at = found.len().div_ceil(2) - 1;
            Ok(Some(found.swap_remove(at)))
        }
    }
}

/// What one committed transaction did that the report counts.
#[derive(Debug, Clone, Copy, Default)]
struct Done {
    remote_lines: u64,
    lines: u64,
    remote_payment: bool,
}

async fn run(conn: &mut Conn, t: &Terminal, input: &Input) -> TxResult<(Outcome, Done)> {
    let w = t.home;
    let mut done = Done::default();
    exec(conn, "BEGIN".into()).await?;
    match input {
        Input::NewOrder { d, c, lines } => {
            let d = *d;
            rows(
                conn,
                format!(
                    "SELECT c_discount, c_last, c_credit, w_tax FROM customer, warehouse \
                     WHERE w_id = {w} AND c_w_id = w_id AND c_d_id = {d} AND c_id = {c}"
                ),
            )
            .await?;
            let district = rows(
                conn,
                format!(
                    "SELECT d_next_o_id, d_tax FROM district WHERE d_w_id = {w} AND d_id = {d} \
                     FOR UPDATE"
                ),
            )
            .await?;
            let o = district.first().map_or(0, |r| int(r, 0));
            exec(
                conn,
                format!(
                    "UPDATE district SET d_next_o_id = {} WHERE d_id = {d} AND d_w_id = {w}",
                    o + 1
                ),
            )
            .await?;
            let all_local = lines.iter().all(|l| l.1 == w);
            exec(
                conn,
                format!(
                    "INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_ol_cnt, \
                     o_all_local) VALUES ({o}, {d}, {w}, {c}, NOW(), {}, {})",
                    lines.len(),
                    u8::from(all_local)
                ),
            )
            .await?;
            exec(
                conn,
                format!(
                    "INSERT INTO new_orders (no_o_id, no_d_id, no_w_id) VALUES ({o}, {d}, {w})"
                ),
            )
            .await?;
            for (n, &(i, sw, qty)) in lines.iter().enumerate() {
                let item = rows(
                    conn,
                    format!("SELECT i_price, i_name, i_data FROM item WHERE i_id = {i}"),
                )
                .await?;
                let Some(item) = item.first() else {
                    exec(conn, "ROLLBACK".into()).await?;
                    return Ok((Outcome::RolledBack, done));
                };
                let price = text(item, 0).and_then(|p| cents(&p)).unwrap_or(0);
                let stock = rows(
                    conn,
                    format!(
                        "SELECT s_quantity, s_data, s_dist_{d:02} FROM stock WHERE s_i_id = {i} \
                         AND s_w_id = {sw} FOR UPDATE"
                    ),
                )
                .await?;
                let (quantity, dist) = stock.first().map_or((0, String::new()), |r| {
                    (int(r, 0), text(r, 2).unwrap_or_default())
                });
                let q = i64::from(qty);
                let left = if quantity - q >= 10 {
                    quantity - q
                } else {
                    quantity - q + 91
                };
                let remote = u8::from(sw != w);
                exec(
                    conn,
                    format!(
                        "UPDATE stock SET s_quantity = {left}, s_ytd = s_ytd + {qty}, \
                         s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + {remote} \
                         WHERE s_i_id = {i} AND s_w_id = {sw}"
                    ),
                )
                .await?;
                exec(
                    conn,
                    format!(
                        "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, \
                         ol_supply_w_id, ol_quantity, ol_amount, ol_dist_info) VALUES \
                         ({o}, {d}, {w}, {}, {i}, {sw}, {qty}, {}, '{dist}')",
                        n + 1,
                        money(price * q)
                    ),
                )
                .await?;
                done.lines += 1;
                done.remote_lines += u64::from(remote);
            }
        }
        Input::Payment {
            d,
            cw,
            cd,
            who,
            amount,
        } => {
            let (d, cw, cd) = (*d, *cw, *cd);
            let x = money(*amount);
            exec(
                conn,
                format!("UPDATE warehouse SET w_ytd = w_ytd + {x} WHERE w_id = {w}"),
            )
            .await?;
            let wh = rows(
                conn,
                format!(
                    "SELECT w_street_1, w_street_2, w_city, w_state, w_zip, w_name FROM warehouse \
                     WHERE w_id = {w}"
                ),
            )
            .await?;
            exec(
                conn,
                format!(
                    "UPDATE district SET d_ytd = d_ytd + {x} WHERE d_w_id = {w} AND d_id = {d}"
                ),
            )
            .await?;
            let di = rows(
                conn,
                format!(
                    "SELECT d_street_1, d_street_2, d_city, d_state, d_zip, d_name FROM district \
                     WHERE d_w_id = {w} AND d_id = {d}"
                ),
            )
            .await?;
            let c = match who {
                Who::Id(c) => *c,
                Who::Last(_) => {
                    let found = find_customer(conn, cw, cd, who, "c_id").await?;
                    found.map_or(0, |r| int(&r, 0) as u32)
                }
            };
            let customer = rows(
                conn,
                format!(
                    "SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, \
                     c_zip, c_phone, c_credit, c_credit_lim, c_discount, c_balance, \
                     c_ytd_payment, c_since FROM customer WHERE c_w_id = {cw} AND c_d_id = {cd} \
                     AND c_id = {c} FOR UPDATE"
                ),
            )
            .await?;
            let bad_credit = customer
                .first()
                .and_then(|r| text(r, 9))
                .is_some_and(|cr| cr == "BC");
            let mut set = format!(
                "c_balance = c_balance - {x}, c_ytd_payment = c_ytd_payment + {x}, \
                 c_payment_cnt = c_payment_cnt + 1"
            );
            if bad_credit {
                let data = rows(
                    conn,
                    format!(
                        "SELECT c_data FROM customer WHERE c_w_id = {cw} AND c_d_id = {cd} \
                         AND c_id = {c}"
                    ),
                )
                .await?;
                let old = data.first().and_then(|r| text(r, 0)).unwrap_or_default();
                let mut new = format!("| {c} {cd} {cw} {d} {w} {x} {old}");
                new.truncate(500);
                set.push_str(&format!(", c_data = '{new}'"));
            }
            exec(
                conn,
                format!(
                    "UPDATE customer SET {set} WHERE c_w_id = {cw} AND c_d_id = {cd} AND c_id = {c}"
                ),
            )
            .await?;
            let name = |r: &[Row]| r.first().and_then(|r| text(r, 5)).unwrap_or_default();
            exec(
                conn,
                format!(
                    "INSERT INTO history (h_c_d_id, h_c_w_id, h_c_id, h_d_id, h_w_id, h_date, \
                     h_amount, h_data) VALUES ({cd}, {cw}, {c}, {d}, {w}, NOW(), {x}, '{}    {}')",
                    name(&wh),
                    name(&di)
                ),
            )
            .await?;
            done.remote_payment = cw != w;
        }
        Input::OrderStatus { d, who } => {
            let d = *d;
            let c = match who {
                Who::Id(c) => {
                    rows(
                        conn,
                        format!(
                            "SELECT c_balance, c_first, c_middle, c_last FROM customer \
                             WHERE c_w_id = {w} AND c_d_id = {d} AND c_id = {c}"
                        ),
                    )
                    .await?;
                    *c
                }
                Who::Last(_) => {
                    let found =
                        find_customer(conn, w, d, who, "c_balance, c_first, c_middle, c_id")
                            .await?;
                    found.map_or(0, |r| int(&r, 3) as u32)
                }
            };
            let order = rows(
                conn,
                format!(
                    "SELECT o_id, o_carrier_id, o_entry_d FROM orders WHERE o_w_id = {w} \
                     AND o_d_id = {d} AND o_c_id = {c} ORDER BY o_id DESC LIMIT 1"
                ),
            )
            .await?;
            if let Some(o) = order.first().map(|r| int(r, 0)) {
                rows(
                    conn,
                    format!(
                        "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d \
                         FROM order_line WHERE ol_w_id = {w} AND ol_d_id = {d} AND ol_o_id = {o}"
                    ),
                )
                .await?;
            }
        }
        Input::Delivery { carrier } => {
            // Every read here locks (reads the latest rows): the new order came from a locking
            // read, and a plain read of its order or lines would use the transaction's snapshot,
            // taken at an earlier district's first plain read, before a New-Order that
            // committed since: the customer would not be credited for lines marked delivered.
            for d in 1..=DISTRICTS {
                let oldest = rows(
                    conn,
                    format!(
                        "SELECT no_o_id FROM new_orders WHERE no_d_id = {d} AND no_w_id = {w} \
                         ORDER BY no_o_id ASC LIMIT 1 FOR UPDATE"
                    ),
                )
                .await?;
                let Some(o) = oldest.first().map(|r| int(r, 0)) else {
                    continue;
                };
                let deleted = exec(
                    conn,
                    format!(
                        "DELETE FROM new_orders WHERE no_o_id = {o} AND no_d_id = {d} \
                         AND no_w_id = {w}"
                    ),
                )
                .await?;
                if deleted == 0 {
                    continue;
                }
                let order = rows(
                    conn,
                    format!(
                        "SELECT o_c_id FROM orders WHERE o_id = {o} AND o_d_id = {d} \
                         AND o_w_id = {w} FOR UPDATE"
                    ),
                )
                .await?;
                let c = order.first().map_or(0, |r| int(r, 0));
                exec(
                    conn,
                    format!(
                        "UPDATE orders SET o_carrier_id = {carrier} WHERE o_id = {o} \
                         AND o_d_id = {d} AND o_w_id = {w}"
                    ),
                )
                .await?;
                exec(
                    conn,
                    format!(
                        "UPDATE order_line SET ol_delivery_d = NOW() WHERE ol_o_id = {o} \
                         AND ol_d_id = {d} AND ol_w_id = {w}"
                    ),
                )
                .await?;
                let sum = rows(
                    conn,
                    format!(
                        "SELECT SUM(ol_amount) sm FROM order_line WHERE ol_o_id = {o} \
                         AND ol_d_id = {d} AND ol_w_id = {w} FOR UPDATE"
                    ),
                )
                .await?;
                let sum = sum
                    .first()
                    .and_then(|r| text(r, 0))
                    .and_then(|s| cents(&s))
                    .unwrap_or(0);
                exec(
                    conn,
                    format!(
                        "UPDATE customer SET c_balance = c_balance + {}, \
                         c_delivery_cnt = c_delivery_cnt + 1 WHERE c_id = {c} AND c_d_id = {d} \
                         AND c_w_id = {w}",
                        money(sum)
                    ),
                )
                .await?;
            }
        }
        Input::StockLevel { d, threshold } => {
            let d = *d;
            let next = rows(
                conn,
                format!("SELECT d_next_o_id FROM district WHERE d_id = {d} AND d_w_id = {w}"),
            )
            .await?;
            let next = next.first().map_or(0, |r| int(r, 0));
            rows(
                conn,
                format!(
                    "SELECT COUNT(DISTINCT (s_i_id)) FROM order_line, stock WHERE ol_w_id = {w} \
                     AND ol_d_id = {d} AND ol_o_id < {next} AND ol_o_id >= {} AND s_w_id = {w} \
                     AND s_i_id = ol_i_id AND s_quantity < {threshold}",
                    next - 20
                ),
            )
            .await?;
        }
    }
    exec(conn, "COMMIT".into()).await?;
    Ok((Outcome::Committed, done))
}

/// One transaction type's figures over a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KindStat {
    pub committed: u64,
    /// New-Order's intended rollbacks (unused item id).
    pub rolled_back: u64,
    /// Deadlocks and lock wait timeouts, each rolled back and retried.
    pub retries: u64,
    pub errors: u64,
    /// Latency of every finished transaction, retries included, in microseconds.
    #[serde(skip)]
    pub latencies_us: Vec<u32>,
}

impl KindStat {
    pub fn p95_ms(&self) -> f64 {
        percentile_ms(&self.latencies_us, 0.95)
    }
}

/// A run's figures, over all terminals.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunStat {
    pub secs: f64,
    pub kinds: BTreeMap<Kind, KindStat>,
    /// Order lines of committed New-Orders supplied by another warehouse, and all of them.
    pub remote_lines: u64,
    pub lines: u64,
    /// Committed Payments by a customer of another warehouse.
    pub remote_payments: u64,
    /// Distinct error texts (error and statement) with their counts.
    pub error_texts: BTreeMap<String, u64>,
}

impl RunStat {
    fn merge(&mut self, o: RunStat) {
        for (k, s) in o.kinds {
            let m = self.kinds.entry(k).or_default();
            m.committed += s.committed;
            m.rolled_back += s.rolled_back;
            m.retries += s.retries;
            m.errors += s.errors;
            m.latencies_us.extend(s.latencies_us);
        }
        self.remote_lines += o.remote_lines;
        self.lines += o.lines;
        self.remote_payments += o.remote_payments;
        for (t, n) in o.error_texts {
            *self.error_texts.entry(t).or_default() += n;
        }
    }

    pub fn kind(&self, k: Kind) -> KindStat {
        self.kinds.get(&k).cloned().unwrap_or_default()
    }

    /// New-Orders committed per minute.
    pub fn tpmc(&self) -> f64 {
        self.kind(Kind::NewOrder).committed as f64 * 60.0 / self.secs.max(1e-9)
    }

    /// Transactions finished (committed or rolled back as intended) per second.
    pub fn tps(&self) -> f64 {
        self.transactions() as f64 / self.secs.max(1e-9)
    }

    pub fn transactions(&self) -> u64 {
        self.kinds
            .values()
            .map(|s| s.committed + s.rolled_back)
            .sum()
    }

    pub fn errors(&self) -> u64 {
        self.kinds.values().map(|s| s.errors).sum()
    }

    pub fn retries(&self) -> u64 {
        self.kinds.values().map(|s| s.retries).sum()
    }

    pub fn rolled_back(&self) -> u64 {
        self.kinds.values().map(|s| s.rolled_back).sum()
    }
}

/// Retries of one transaction before it counts as an error.
const MAX_RETRIES: u32 = 20;
/// Distinct error texts kept per terminal.
const ERROR_TEXTS: usize = 20;

/// One terminal for `duration`: transactions back to back on one connection.
async fn terminal(
    ep: Endpoint,
    t: Terminal,
    duration: Duration,
    seed: u64,
) -> Result<RunStat, BenchError> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut conn = ep.connect().await?;
    let mut stat = RunStat::default();
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline && !crate::interrupt::interrupted() {
        let kind = Kind::pick(&mut rng);
        let input = Input::draw(kind, &t, &mut rng);
        let started = Instant::now();
        let s = stat.kinds.entry(kind).or_default();
        let mut tries = 0;
        loop {
            match run(&mut conn, &t, &input).await {
                Ok((outcome, done)) => {
                    match outcome {
                        Outcome::Committed => s.committed += 1,
                        Outcome::RolledBack => s.rolled_back += 1,
                    }
                    s.latencies_us
                        .push(started.elapsed().as_micros().min(u32::MAX as u128) as u32);
                    if outcome == Outcome::Committed {
                        stat.lines += done.lines;
                        stat.remote_lines += done.remote_lines;
                        stat.remote_payments += u64::from(done.remote_payment);
                    }
                    break;
                }
                Err(e) => {
                    // A broken connection is replaced; otherwise the transaction is rolled back.
                    let reconnect = !matches!(e.error, mysql_async::Error::Server(_))
                        || conn.query_drop("ROLLBACK").await.is_err();
                    if reconnect {
                        conn = ep.connect().await?;
                    }
                    if e.retryable() && tries < MAX_RETRIES {
                        tries += 1;
                        s.retries += 1;
                        continue;
                    }
                    s.errors += 1;
                    let texts = &mut stat.error_texts;
                    let summary = e.summary();
                    if texts.len() < ERROR_TEXTS || texts.contains_key(&summary) {
                        *texts.entry(summary).or_default() += 1;
                    }
                    break;
                }
            }
        }
    }
    let _ = conn.disconnect().await;
    Ok(stat)
}

/// `threads` terminals on `ep` for `duration`; terminal `i`'s home warehouse is `i mod W + 1`.
pub async fn run_terminals(
    ep: &Endpoint,
    scale: &Scale,
    threads: usize,
    duration: Duration,
) -> Result<RunStat, BenchError> {
    let mut rng = rand::rng();
    let c = Constants::for_run(&mut rng);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..threads.max(1) {
        let t = Terminal {
            home: (i as u32 % scale.warehouses) + 1,
            scale: *scale,
            c,
        };
        tasks.spawn(terminal(ep.clone(), t, duration, rng.random()));
    }
    let mut total = RunStat::default();
    while let Some(r) = tasks.join_next().await {
        total.merge(r.map_err(|e| BenchError::Tool(format!("terminal: {e}")))??);
    }
    total.secs = started.elapsed().as_secs_f64();
    crate::interrupt::check()?;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terminal(warehouses: u32) -> Terminal {
        Terminal {
            home: 1,
            scale: Scale::standard(warehouses),
            c: Constants {
                c_last: keys::C_LAST_RUN,
                c_id: 100,
                ol_i_id: 1000,
            },
        }
    }

    #[test]
    fn the_mix_and_the_remote_shares_are_the_specs() {
        let mut rng = StdRng::seed_from_u64(1);
        let t = terminal(4);
        let (mut kinds, mut lines, mut remote, mut rollbacks) = (BTreeMap::new(), 0, 0, 0);
        let (mut payments, mut remote_pay, mut by_name) = (0, 0, 0);
        for _ in 0..100_000 {
            let k = Kind::pick(&mut rng);
            *kinds.entry(k).or_insert(0u32) += 1;
            match Input::draw(k, &t, &mut rng) {
                Input::NewOrder { lines: l, .. } => {
                    lines += l.len();
                    remote += l.iter().filter(|x| x.1 != 1).count();
                    rollbacks += usize::from(l.iter().any(|x| x.0 > t.scale.items));
                    assert!(l.iter().all(|x| (1..=4).contains(&x.1)));
                }
                Input::Payment { cw, who, .. } => {
                    payments += 1;
                    remote_pay += usize::from(cw != 1);
                    by_name += usize::from(matches!(who, Who::Last(_)));
                }
                _ => {}
            }
        }
        let share = |k| f64::from(kinds[&k]) / 100_000.0;
        assert!((share(Kind::NewOrder) - 0.45).abs() < 0.01);
        assert!((share(Kind::Payment) - 0.43).abs() < 0.01);
        assert!((share(Kind::StockLevel) - 0.04).abs() < 0.005);
        let r = remote as f64 / lines as f64;
        assert!((0.007..0.013).contains(&r), "{r}");
        let rb = rollbacks as f64 / f64::from(kinds[&Kind::NewOrder]);
        assert!((0.007..0.013).contains(&rb), "{rb}");
        let rp = remote_pay as f64 / payments as f64;
        assert!((0.14..0.16).contains(&rp), "{rp}");
        let n = by_name as f64 / payments as f64;
        assert!((0.58..0.62).contains(&n), "{n}");
    }

    #[test]
    fn one_warehouse_never_goes_remote() {
        let mut rng = StdRng::seed_from_u64(2);
        let t = terminal(1);
        for _ in 0..10_000 {
            match Input::draw(Kind::pick(&mut rng), &t, &mut rng) {
                Input::NewOrder { lines, .. } => assert!(lines.iter().all(|l| l.1 == 1)),
                Input::Payment { cw, .. } => assert_eq!(cw, 1),
                _ => {}
            }
        }
    }

    #[test]
    fn p95_is_the_95th_percentile() {
        let v: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile_ms(&v, 0.95), 95.0);
        assert!(percentile_ms(&[], 0.95).is_nan());
    }
}
