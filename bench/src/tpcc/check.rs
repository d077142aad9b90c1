//! The twelve consistency conditions of TPC-C clause 3.3.2, per warehouse. Every query is one
//! Shoal answers exactly: pinned to one warehouse (one datanode), except history by customer
//! warehouse (condition 10: a Payment's history row lives with the paying warehouse, which may
//! be another than the customer's), a scattered GROUP BY that Shoal merges. The conditions are
//! then combined on the client, in exact cents.

use std::collections::{BTreeMap, BTreeSet};

use mysql_async::Row;
use mysql_async::prelude::Queryable;
use serde::Serialize;

use super::schema::{Scale, cents};
use crate::error::BenchError;
use crate::load::{Endpoint, abbreviate};

pub const TITLES: [&str; 12] = [
    "W_YTD = sum(D_YTD)",
    "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
    "max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW-ORDER) per district",
    "sum(O_OL_CNT) = count(ORDER-LINE) per district",
    "O_CARRIER_ID is null iff a NEW-ORDER row exists",
    "O_OL_CNT = count(ORDER-LINE) per order",
    "OL_DELIVERY_D is null iff O_CARRIER_ID is null",
    "W_YTD = sum(H_AMOUNT) by H_W_ID",
    "D_YTD = sum(H_AMOUNT) by H_W_ID, H_D_ID",
    "C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT) by customer",
    "count(ORDER) - count(NEW-ORDER) = initial delivered + delivered since, per district",
    "C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT) by customer",
];

/// One condition over every warehouse.
#[derive(Debug, Clone, Serialize)]
pub struct Condition {
    pub number: usize,
    pub title: &'static str,
    /// Rows (warehouses, districts, orders or customers) that break it.
    pub failures: u64,
    /// The first of them, described.
    pub first: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub conditions: Vec<Condition>,
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        self.conditions.iter().all(|c| c.failures == 0)
    }

    pub fn summary(&self) -> String {
        let failed: Vec<String> = self
            .conditions
            .iter()
            .filter(|c| c.failures > 0)
            .map(|c| {
                format!(
                    "condition {} ({}) fails {} time(s), first: {}",
                    c.number,
                    c.title,
                    c.failures,
                    c.first.as_deref().unwrap_or("")
                )
            })
            .collect();
        if failed.is_empty() {
            "all 12 consistency conditions hold".into()
        } else {
            failed.join("; ")
        }
    }

    fn fail(&mut self, n: usize, what: String) {
        let c = &mut self.conditions[n - 1];
        c.failures += 1;
        if c.first.is_none() {
            c.first = Some(what);
        }
    }
}

fn int(r: &Row, i: usize) -> i64 {
    r.get::<Option<String>, _>(i)
        .flatten()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}

fn money(r: &Row, i: usize) -> i64 {
    r.get::<Option<String>, _>(i)
        .flatten()
        .and_then(|t| cents(&t))
        .unwrap_or(0)
}

/// Checks every warehouse of `scale` on `ep`.
pub async fn check(ep: &Endpoint, scale: &Scale) -> Result<CheckReport, BenchError> {
    let mut report = CheckReport {
        conditions: TITLES
            .iter()
            .enumerate()
            .map(|(i, t)| Condition {
                number: i + 1,
                title: t,
                failures: 0,
                first: None,
            })
            .collect(),
    };
    let mut conn = ep.connect().await?;
    for w in 1..=scale.warehouses {
        crate::interrupt::check()?;
        let mut q = async |sql: String| -> Result<Vec<Row>, BenchError> {
            conn.query::<Row, _>(sql.as_str())
                .await
                .map_err(BenchError::sql(ep.label(), abbreviate(&sql)))
        };
        let w_ytd = q(format!("SELECT w_ytd FROM warehouse WHERE w_id = {w}"))
            .await?
            .first()
            .map_or(0, |r| money(r, 0));
        // d_id -> (d_ytd, d_next_o_id)
        let districts: BTreeMap<i64, (i64, i64)> = q(format!(
            "SELECT d_id, d_ytd, d_next_o_id FROM district WHERE d_w_id = {w}"
        ))
        .await?
        .iter()
        .map(|r| (int(r, 0), (money(r, 1), int(r, 2))))
        .collect();
        // o_d_id -> (max o_id, count, sum o_ol_cnt)
        let orders_by_d: BTreeMap<i64, (i64, i64, i64)> = q(format!(
            "SELECT o_d_id, MAX(o_id), COUNT(*), SUM(o_ol_cnt) FROM orders WHERE o_w_id = {w} \
             GROUP BY o_d_id"
        ))
        .await?
        .iter()
        .map(|r| (int(r, 0), (int(r, 1), int(r, 2), int(r, 3))))
        .collect();
        // no_d_id -> (max, min, count)
        let new_by_d: BTreeMap<i64, (i64, i64, i64)> = q(format!(
            "SELECT no_d_id, MAX(no_o_id), MIN(no_o_id), COUNT(*) FROM new_orders \
             WHERE no_w_id = {w} GROUP BY no_d_id"
        ))
        .await?
        .iter()
        .map(|r| (int(r, 0), (int(r, 1), int(r, 2), int(r, 3))))
        .collect();
        let lines_by_d: BTreeMap<i64, i64> = q(format!(
            "SELECT ol_d_id, COUNT(*) FROM order_line WHERE ol_w_id = {w} GROUP BY ol_d_id"
        ))
        .await?
        .iter()
        .map(|r| (int(r, 0), int(r, 1)))
        .collect();
        // (d, o) -> (o_c_id, o_ol_cnt, carrier is null)
        let orders: BTreeMap<(i64, i64), (i64, i64, bool)> = q(format!(
            "SELECT o_d_id, o_id, o_c_id, o_ol_cnt, o_carrier_id IS NULL FROM orders \
             WHERE o_w_id = {w}"
        ))
        .await?
        .iter()
        .map(|r| {
            (
                (int(r, 0), int(r, 1)),
                (int(r, 2), int(r, 3), int(r, 4) == 1),
            )
        })
        .collect();
        let new_orders: BTreeSet<(i64, i64)> = q(format!(
            "SELECT no_d_id, no_o_id FROM new_orders WHERE no_w_id = {w}"
        ))
        .await?
        .iter()
        .map(|r| (int(r, 0), int(r, 1)))
        .collect();
        // (d, o) -> (lines, lines not delivered, delivered amount)
        let lines: BTreeMap<(i64, i64), (i64, i64, i64)> = q(format!(
            "SELECT ol_d_id, ol_o_id, COUNT(*), SUM(ol_delivery_d IS NULL), \
             SUM(CASE WHEN ol_delivery_d IS NOT NULL THEN ol_amount ELSE 0 END) \
             FROM order_line WHERE ol_w_id = {w} GROUP BY ol_d_id, ol_o_id"
        ))
        .await?
        .iter()
        .map(|r| ((int(r, 0), int(r, 1)), (int(r, 2), int(r, 3), money(r, 4))))
        .collect();
        let history_by_d: BTreeMap<i64, i64> = q(format!(
            "SELECT h_d_id, SUM(h_amount) FROM history WHERE h_w_id = {w} GROUP BY h_d_id"
        ))
        .await?
        .iter()
        .map(|r| (int(r, 0), money(r, 1)))
        .collect();
        // Scattered: the rows of this warehouse's customers live with the paying warehouses.
        let history_by_c: BTreeMap<(i64, i64), i64> = q(format!(
            "SELECT h_c_d_id, h_c_id, SUM(h_amount) FROM history WHERE h_c_w_id = {w} \
             GROUP BY h_c_d_id, h_c_id"
        ))
        .await?
        .iter()
        .map(|r| ((int(r, 0), int(r, 1)), money(r, 2)))
        .collect();
        // (d, c) -> (c_balance, c_ytd_payment)
        let customers: BTreeMap<(i64, i64), (i64, i64)> = q(format!(
            "SELECT c_d_id, c_id, c_balance, c_ytd_payment FROM customer WHERE c_w_id = {w}"
        ))
        .await?
        .iter()
        .map(|r| ((int(r, 0), int(r, 1)), (money(r, 2), money(r, 3))))
        .collect();

        // 1
        let sum_d: i64 = districts.values().map(|d| d.0).sum();
        if w_ytd != sum_d {
            report.fail(
                1,
                format!("w {w}: w_ytd {w_ytd} <> sum(d_ytd) {sum_d} (cents)"),
            );
        }
        for (&d, &(d_ytd, next)) in &districts {
            // 2
            let max_o = orders_by_d.get(&d).map_or(0, |o| o.0);
            let max_no = new_by_d.get(&d).map(|n| n.0);
            if next - 1 != max_o || max_no.is_some_and(|m| m != max_o) {
                report.fail(
                    2,
                    format!(
                        "w {w} d {d}: d_next_o_id - 1 = {}, max(o_id) = {max_o}, max(no_o_id) = \
                         {max_no:?}",
                        next - 1
                    ),
                );
            }
            // 3
            if let Some(&(max, min, n)) = new_by_d.get(&d)
                && max - min + 1 != n
            {
                report.fail(
                    3,
                    format!("w {w} d {d}: {max} - {min} + 1 <> {n} new orders"),
                );
            }
            // 4
            let ol_cnt = orders_by_d.get(&d).map_or(0, |o| o.2);
            let n_lines = lines_by_d.get(&d).copied().unwrap_or(0);
            if ol_cnt != n_lines {
                report.fail(
                    4,
                    format!("w {w} d {d}: sum(o_ol_cnt) {ol_cnt} <> {n_lines} order lines"),
                );
            }
            // 9
            let h = history_by_d.get(&d).copied().unwrap_or(0);
            if d_ytd != h {
                report.fail(
                    9,
                    format!("w {w} d {d}: d_ytd {d_ytd} <> sum(h_amount) {h}"),
                );
            }
            // 11
            let n_orders = orders_by_d.get(&d).map_or(0, |o| o.1);
            let n_new = new_by_d.get(&d).map_or(0, |n| n.2);
            let first_new = i64::from(scale.first_new_order());
            let delivered_since = orders
                .range((d, first_new)..(d, i64::MAX))
                .filter(|(_, o)| !o.2)
                .count() as i64;
            if n_orders - n_new != first_new - 1 + delivered_since {
                report.fail(
                    11,
                    format!(
                        "w {w} d {d}: {n_orders} orders - {n_new} new orders <> {} initially \
                         delivered + {delivered_since} delivered since",
                        first_new - 1
                    ),
                );
            }
        }
        // 8
        let h_w: i64 = history_by_d.values().sum();
        if w_ytd != h_w {
            report.fail(8, format!("w {w}: w_ytd {w_ytd} <> sum(h_amount) {h_w}"));
        }
        // 5, 6, 7; delivered amounts per customer for 10 and 12.
        let mut delivered: BTreeMap<(i64, i64), i64> = BTreeMap::new();
        for (&(d, o), &(c, ol_cnt, carrier_null)) in &orders {
            if carrier_null != new_orders.contains(&(d, o)) {
                report.fail(
                    5,
                    format!(
                        "w {w} d {d} o {o}: carrier null {carrier_null}, new order {}",
                        !carrier_null
                    ),
                );
            }
            let (n, undelivered, amount) = lines.get(&(d, o)).copied().unwrap_or((0, 0, 0));
            if ol_cnt != n {
                report.fail(
                    6,
                    format!("w {w} d {d} o {o}: o_ol_cnt {ol_cnt} <> {n} lines"),
                );
            }
            let expect_undelivered = if carrier_null { n } else { 0 };
            if undelivered != expect_undelivered {
                report.fail(
                    7,
                    format!(
                        "w {w} d {d} o {o}: carrier null {carrier_null}, {undelivered} of {n} \
                         lines without delivery date"
                    ),
                );
            }
            *delivered.entry((d, c)).or_default() += amount;
        }
        for (&(d, c), &(balance, ytd)) in &customers {
            let ol = delivered.get(&(d, c)).copied().unwrap_or(0);
            let h = history_by_c.get(&(d, c)).copied().unwrap_or(0);
            // 10
            if balance != ol - h {
                report.fail(
                    10,
                    format!("w {w} d {d} c {c}: c_balance {balance} <> {ol} delivered - {h} paid"),
                );
            }
            // 12
            if balance + ytd != ol {
                report.fail(
                    12,
                    format!(
                        "w {w} d {d} c {c}: c_balance {balance} + c_ytd_payment {ytd} <> {ol} \
                         delivered"
                    ),
                );
            }
        }
    }
    let _ = conn.disconnect().await;
    Ok(report)
}
