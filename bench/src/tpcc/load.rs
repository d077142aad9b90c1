//! The initial database of clause 4.3.3, loaded with multi-row INSERTs on several connections.
//! The rows come from random generators seeded by the unit of work (a chunk of items, of one
//! warehouse's stock, one district's customers or orders), so every load of a given size is the
//! same rows: the direct side and the sharded side start from identical databases.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use mysql_async::prelude::Queryable;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokio::task::JoinSet;

use super::keys::{self, C_LAST_LOAD};
use super::schema::{self, DISTRICTS, Scale, money};
use crate::error::BenchError;
use crate::interrupt;
use crate::load::{Endpoint, abbreviate};
use crate::progress::Progress;

/// Rows per INSERT statement.
pub const BATCH: usize = 200;
/// Items (and stock rows) per unit of work.
const ITEM_CHUNK: u32 = 10_000;

/// One unit of load work, done by one connection.
#[derive(Debug, Clone, Copy, Hash)]
enum Unit {
    Items { first: u32, last: u32 },
    Warehouse { w: u32 },
    Stock { w: u32, first: u32, last: u32 },
    Customers { w: u32, d: u32 },
    Orders { w: u32, d: u32 },
}

fn units(scale: &Scale) -> Vec<Unit> {
    let chunks = |n: u32| {
        (0..n.div_ceil(ITEM_CHUNK))
            .map(move |k| (k * ITEM_CHUNK + 1, ((k + 1) * ITEM_CHUNK).min(n)))
    };
    let mut units: Vec<Unit> = chunks(scale.items)
        .map(|(first, last)| Unit::Items { first, last })
        .collect();
    for w in 1..=scale.warehouses {
        units.push(Unit::Warehouse { w });
        for d in 1..=DISTRICTS {
            units.push(Unit::Orders { w, d });
            units.push(Unit::Customers { w, d });
        }
        units.extend(chunks(scale.items).map(|(first, last)| Unit::Stock { w, first, last }));
    }
    units
}

/// What a load took.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadStat {
    pub rows: u64,
    pub statements: u64,
    pub secs: f64,
}

/// Drops and creates the tables on `ep`, then loads `scale` on `threads` connections.
pub async fn load(
    ep: &Endpoint,
    scale: &Scale,
    threads: usize,
    progress: &Progress,
) -> Result<LoadStat, BenchError> {
    let started = Instant::now();
    let mut ddl = schema::drop_sql();
    ddl.extend(schema::create_sql());
    ep.execute(&ddl).await?;
    let units = Arc::new(units(scale));
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for _ in 0..threads.max(1) {
        let (ep, units, next, progress, scale) = (
            ep.clone(),
            units.clone(),
            next.clone(),
            progress.clone(),
            *scale,
        );
        tasks.spawn(async move {
            let mut conn = ep.connect().await?;
            let (mut rows, mut statements) = (0u64, 0u64);
            loop {
                interrupt::check()?;
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(unit) = units.get(i) else { break };
                for (sql, n) in unit_sql(*unit, &scale) {
                    conn.query_drop(&sql)
                        .await
                        .map_err(BenchError::sql(ep.label(), abbreviate(&sql)))?;
                    rows += n as u64;
                    statements += 1;
                    progress.inc(n as u64);
                }
            }
            let _ = conn.disconnect().await;
            Ok::<_, BenchError>((rows, statements))
        });
    }
    let (mut rows, mut statements) = (0, 0);
    while let Some(r) = tasks.join_next().await {
        let (r, s) = r.map_err(|e| BenchError::Tool(format!("load worker: {e}")))??;
        rows += r;
        statements += s;
    }
    Ok(LoadStat {
        rows,
        statements,
        secs: started.elapsed().as_secs_f64(),
    })
}

/// Multi-row INSERTs of one table, `BATCH` rows each.
struct Inserts {
    head: String,
    sql: String,
    rows: usize,
    out: Vec<(String, usize)>,
}

impl Inserts {
    fn new(table: &str, columns: &str) -> Inserts {
        Inserts {
            head: format!("INSERT INTO {table} ({columns}) VALUES "),
            sql: String::new(),
            rows: 0,
            out: Vec::new(),
        }
    }

    fn row(&mut self, values: &str) {
        if self.rows == 0 {
            self.sql.push_str(&self.head);
        } else {
            self.sql.push(',');
        }
        self.sql.push('(');
        self.sql.push_str(values);
        self.sql.push(')');
        self.rows += 1;
        if self.rows == BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.rows > 0 {
            self.out.push((std::mem::take(&mut self.sql), self.rows));
            self.rows = 0;
        }
    }

    fn finish(mut self) -> Vec<(String, usize)> {
        self.flush();
        self.out
    }
}

fn rng_for(unit: Unit) -> StdRng {
    let mut h = DefaultHasher::new();
    unit.hash(&mut h);
    StdRng::seed_from_u64(h.finish())
}

/// The statements of one unit with their row counts.
fn unit_sql(unit: Unit, scale: &Scale) -> Vec<(String, usize)> {
    let mut rng = rng_for(unit);
    let r = &mut rng;
    match unit {
        Unit::Items { first, last } => {
            let mut ins = Inserts::new("item", "i_id, i_im_id, i_name, i_price, i_data");
            for i in first..=last {
                let v = format!(
                    "{i},{},'{}',{},'{}'",
                    r.random_range(1..=10_000),
                    keys::astring(r, 14, 24),
                    money(r.random_range(100..=10_000)),
                    keys::data_with_original(r)
                );
                ins.row(&v);
            }
            ins.finish()
        }
        Unit::Warehouse { w } => {
            let d_ytd = scale.district_ytd_cents();
            let mut wh = Inserts::new(
                "warehouse",
                "w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax, w_ytd",
            );
            wh.row(&format!(
                "{w},'{}','{}','{}','{}','{}','{}',{},{}",
                keys::astring(r, 6, 10),
                keys::astring(r, 10, 20),
                keys::astring(r, 10, 20),
                keys::astring(r, 10, 20),
                keys::astring(r, 2, 2),
                keys::zip(r),
                money(r.random_range(0..=20)),
                money(d_ytd * i64::from(DISTRICTS))
            ));
            let mut out = wh.finish();
            let mut di = Inserts::new(
                "district",
                "d_id, d_w_id, d_name, d_street_1, d_street_2, d_city, d_state, d_zip, d_tax, \
                 d_ytd, d_next_o_id",
            );
            for d in 1..=DISTRICTS {
                di.row(&format!(
                    "{d},{w},'{}','{}','{}','{}','{}','{}',{},{},{}",
                    keys::astring(r, 6, 10),
                    keys::astring(r, 10, 20),
                    keys::astring(r, 10, 20),
                    keys::astring(r, 10, 20),
                    keys::astring(r, 2, 2),
                    keys::zip(r),
                    money(r.random_range(0..=20)),
                    money(d_ytd),
                    scale.orders() + 1
                ));
            }
            out.extend(di.finish());
            out
        }
        Unit::Stock { w, first, last } => {
            let mut ins = Inserts::new(
                "stock",
                "s_i_id, s_w_id, s_quantity, s_dist_01, s_dist_02, s_dist_03, s_dist_04, \
                 s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10, s_ytd, \
                 s_order_cnt, s_remote_cnt, s_data",
            );
            for i in first..=last {
                let mut v = format!("{i},{w},{}", r.random_range(10..=100));
                for _ in 0..10 {
                    v.push_str(&format!(",'{}'", keys::astring(r, 24, 24)));
                }
                v.push_str(&format!(",0,0,0,'{}'", keys::data_with_original(r)));
                ins.row(&v);
            }
            ins.finish()
        }
        Unit::Customers { w, d } => {
            let mut cu = Inserts::new(
                "customer",
                "c_id, c_d_id, c_w_id, c_first, c_middle, c_last, c_street_1, c_street_2, \
                 c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, \
                 c_balance, c_ytd_payment, c_payment_cnt, c_delivery_cnt, c_data",
            );
            let mut hi = Inserts::new(
                "history",
                "h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data",
            );
            let names = scale.last_name_max();
            for c in 1..=scale.customers {
                let last = if c <= names + 1 {
                    keys::last_name(c - 1)
                } else {
                    keys::last_name(keys::nurand(r, 255, C_LAST_LOAD, 0, names))
                };
                cu.row(&format!(
                    "{c},{d},{w},'{}','OE','{last}','{}','{}','{}','{}','{}','{}',NOW(),'{}',\
                     50000,{},-10.00,10.00,1,0,'{}'",
                    keys::astring(r, 8, 16),
                    keys::astring(r, 10, 20),
                    keys::astring(r, 10, 20),
                    keys::astring(r, 10, 20),
                    keys::astring(r, 2, 2),
                    keys::zip(r),
                    keys::nstring(r, 16),
                    if r.random_range(0..10) == 0 {
                        "BC"
                    } else {
                        "GC"
                    },
                    money(r.random_range(0..=50)),
                    keys::astring(r, 300, 500)
                ));
                hi.row(&format!(
                    "{c},{d},{w},{d},{w},NOW(),10.00,'{}'",
                    keys::astring(r, 12, 24)
                ));
            }
            let mut out = cu.finish();
            out.extend(hi.finish());
            out
        }
        Unit::Orders { w, d } => {
            let mut customers: Vec<u32> = (1..=scale.customers).collect();
            customers.shuffle(r);
            let first_new = scale.first_new_order();
            let mut or = Inserts::new(
                "orders",
                "o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local",
            );
            let mut ol = Inserts::new(
                "order_line",
                "ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, \
                 ol_quantity, ol_amount, ol_dist_info",
            );
            let mut no = Inserts::new("new_orders", "no_o_id, no_d_id, no_w_id");
            for o in 1..=scale.orders() {
                let delivered = o < first_new;
                let lines = r.random_range(5..=15);
                let carrier = if delivered {
                    r.random_range(1..=10).to_string()
                } else {
                    "NULL".into()
                };
                or.row(&format!(
                    "{o},{d},{w},{},NOW(),{carrier},{lines},1",
                    customers[(o - 1) as usize]
                ));
                for n in 1..=lines {
                    let (when, amount) = if delivered {
                        ("NOW()", 0)
                    } else {
                        ("NULL", r.random_range(1..=999_999))
                    };
                    ol.row(&format!(
                        "{o},{d},{w},{n},{},{w},{when},5,{},'{}'",
                        r.random_range(1..=scale.items),
                        money(amount),
                        keys::astring(r, 24, 24)
                    ));
                }
                if !delivered {
                    no.row(&format!("{o},{d},{w}"));
                }
            }
            let mut out = or.finish();
            out.extend(ol.finish());
            out.extend(no.finish());
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_deterministic_and_batched() {
        let scale = Scale {
            warehouses: 2,
            items: 500,
            customers: 30,
        };
        let u = Unit::Customers { w: 2, d: 3 };
        assert_eq!(unit_sql(u, &scale), unit_sql(u, &scale));
        let stock = unit_sql(
            Unit::Stock {
                w: 1,
                first: 1,
                last: 450,
            },
            &scale,
        );
        assert_eq!(
            stock.iter().map(|s| s.1).collect::<Vec<_>>(),
            vec![200, 200, 50]
        );
        assert!(stock[0].0.starts_with("INSERT INTO stock (s_i_id, s_w_id,"));
        // item, then per warehouse: warehouse+districts, 10 x (orders, customers), stock.
        assert_eq!(units(&scale).len(), 1 + 2 * (1 + 20 + 1));
    }
}
