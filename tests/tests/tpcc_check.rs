//! sysbench-tpcc's consistency check (Percona-Lab's `tpcc_check.lua`: checks 1, 2, 3, 4, 5, 7,
//! 8, 9, 10 and 12 per warehouse, 40 conditions over 4 warehouses) through Shoal after a TPC-C
//! load and run (shoal-bench's loader and terminals, remote New-Order lines and Payments
//! included), over the TPC-C tables sharded by warehouse (mod over 4 datanodes on 2 servers,
//! `item` global). Several checks read across shards (issue 49): check 9 groups all of
//! `history` in a derived table, check 10 sums a customer's payments, which live with the
//! paying warehouse. Each condition must hold as the Lua script judges it, and each check's
//! answer must equal the same statement's on one MariaDB holding a copy of every row read back
//! through Shoal (database `tpcc_ref` on server 0).

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};
use shoal_bench::load::Endpoint;
use shoal_bench::progress::Progress;
use shoal_bench::tpcc::{load, schema, txn};

const REF_DB: &str = "tpcc_ref";
const WAREHOUSES: u32 = 4;

/// The check statements of `tpcc_check.lua` for warehouse `w`, its tables without the
/// table-number suffix (shoal-bench's names), with how its rows are judged.
fn checks(w: u32) -> Vec<(u32, String, Judge)> {
    vec![
        (
            1,
            format!(
                "SELECT d_w_id,sum(d_ytd)-max(w_ytd) diff FROM district,warehouse WHERE d_w_id=w_id AND w_id={w} group by d_w_id"
            ),
            Judge::ColumnZero(1),
        ),
        (
            2,
            format!(
                "SELECT dis.d_id, d_next_o_id-1,mo,mno FROM district dis, (SELECT o_d_id,max(o_id) mo FROM orders WHERE o_w_id={w} GROUP BY o_d_id) q, (select no_d_id,max(no_o_id) mno from new_orders where no_w_id={w} group by no_d_id) no where d_w_id={w} and q.o_d_id=dis.d_id and no.no_d_id=dis.d_id"
            ),
            Judge::Equal(vec![1, 2, 3]),
        ),
        (
            3,
            format!(
                "select no_d_id,max(no_o_id)-min(no_o_id)+1,count(*) from new_orders where no_w_id={w} group by no_d_id"
            ),
            Judge::Equal(vec![1, 2]),
        ),
        (
            4,
            format!(
                "SELECT count(*) FROM (SELECT o_d_id, SUM(o_ol_cnt) sm1, MAX(cn) as cn FROM orders,(SELECT ol_d_id, COUNT(*) cn FROM order_line WHERE ol_w_id={w} GROUP BY ol_d_id) ol WHERE o_w_id={w} AND ol_d_id=o_d_id GROUP BY o_d_id) t1 WHERE sm1<>cn"
            ),
            Judge::ColumnZero(0),
        ),
        (
            5,
            format!(
                "SELECT count(*) FROM orders LEFT JOIN new_orders ON (no_w_id=o_w_id AND o_d_id=no_d_id AND o_id=no_o_id) where o_w_id={w} and ((o_carrier_id IS NULL and no_o_id IS  NULL) OR (o_carrier_id IS NOT NULL and no_o_id IS NOT NULL  ))"
            ),
            Judge::ColumnZero(0),
        ),
        (
            7,
            format!(
                "SELECT count(*) FROM orders, order_line WHERE o_id=ol_o_id AND o_d_id=ol_d_id AND ol_w_id=o_w_id AND o_w_id={w} AND ((ol_delivery_d IS NULL and o_carrier_id IS NOT NULL) or (o_carrier_id IS NULL and ol_delivery_d IS NOT NULL ))"
            ),
            Judge::ColumnZero(0),
        ),
        (
            8,
            format!(
                "SELECT count(*) cn FROM (SELECT w_id,w_ytd,SUM(h_amount) sm FROM history,warehouse WHERE h_w_id=w_id and w_id={w} GROUP BY w_id) t1 WHERE w_ytd<>sm"
            ),
            Judge::ColumnZero(0),
        ),
        (
            9,
            format!(
                "SELECT COUNT(*) FROM (select d_id,d_w_id,sum(d_ytd) s1 from district group by d_id,d_w_id) d,(select h_d_id,h_w_id,sum(h_amount) s2 from history group by h_d_id, h_w_id) h WHERE h_d_id=d_id AND d_w_id=h_w_id and d_w_id={w} and s1<>s2"
            ),
            Judge::ColumnZero(0),
        ),
        (
            10,
            format!(
                "SELECT count(*) FROM (  SELECT  c.c_id, c.c_d_id, c.c_w_id, c.c_balance c1, (SELECT sum(ol_amount) FROM orders STRAIGHT_JOIN order_line WHERE OL_W_ID=O_W_ID AND OL_D_ID = O_D_ID AND OL_O_ID = O_ID AND OL_DELIVERY_D IS NOT NULL AND O_W_ID=c.c_w_id AND O_D_ID=c.C_D_ID AND O_C_ID=c.C_ID) sm, (SELECT  sum(h_amount)  from  history WHERE H_C_W_ID=c.C_W_ID AND H_C_D_ID=c.C_D_ID AND H_C_ID=c.C_ID) smh FROM customer c WHERE  c.c_w_id={w} ) t WHERE c1<>sm-smh"
            ),
            Judge::ColumnZero(0),
        ),
        (
            12,
            format!(
                "SELECT count(*) FROM (SELECT  c.c_id, c.c_d_id, c.c_balance c1, c_ytd_payment, (SELECT sum(ol_amount) FROM orders STRAIGHT_JOIN order_line WHERE OL_W_ID=O_W_ID AND OL_D_ID = O_D_ID AND OL_O_ID = O_ID AND OL_DELIVERY_D IS NOT NULL AND O_W_ID=c.c_w_id AND O_D_ID=c.C_D_ID AND O_C_ID=c.C_ID) sm FROM customer c WHERE  c.c_w_id={w}) t1 WHERE c1+c_ytd_payment <> sm"
            ),
            Judge::ColumnZero(0),
        ),
    ]
}

/// How `tpcc_check.lua` judges a check's rows (Lua's `tonumber`, so "0.00" is 0).
#[derive(Debug, Clone)]
enum Judge {
    /// Column `i` of every row is 0.
    ColumnZero(usize),
    /// The columns are equal in every row.
    Equal(Vec<usize>),
}

fn number(v: &Option<String>) -> Option<f64> {
    v.as_deref().and_then(|s| s.trim().parse::<f64>().ok())
}

impl Judge {
    /// `None` when the condition holds, else the first row that breaks it.
    fn broken(&self, rows: &[Vec<Option<String>>]) -> Option<String> {
        rows.iter()
            .find(|r| match self {
                Judge::ColumnZero(i) => number(&r[*i]) != Some(0.0),
                Judge::Equal(cols) => {
                    let first = number(&r[cols[0]]);
                    first.is_none() || cols.iter().any(|c| number(&r[*c]) != first)
                }
            })
            .map(|r| format!("{r:?}"))
    }
}

fn cell(v: &Value) -> Option<String> {
    match v {
        Value::NULL => None,
        Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        other => Some(other.as_sql(true)),
    }
}

async fn rows(c: &mut Conn, sql: &str) -> Result<Vec<Vec<Option<String>>>, mysql_async::Error> {
    let rows: Vec<Row> = c.query(sql).await?;
    Ok(rows
        .iter()
        .map(|r| (0..r.len()).map(|i| r.as_ref(i).and_then(cell)).collect())
        .collect())
}

/// Every table read back through Shoal, inserted into the reference database.
async fn copy_to_reference(shoal: &mut Conn, reference: &mut Conn) {
    for sql in schema::create_sql() {
        reference.query_drop(&sql).await.unwrap();
    }
    let tables = schema::SHARDED
        .iter()
        .map(|(t, _)| *t)
        .chain([schema::GLOBAL]);
    for t in tables {
        let all: Vec<Row> = shoal
            .query(format!("SELECT * FROM {t}"))
            .await
            .unwrap_or_else(|e| panic!("reading {t} through Shoal: {e}"));
        for chunk in all.chunks(2_000) {
            let values: Vec<String> = chunk
                .iter()
                .map(|r| {
                    let cells: Vec<String> = (0..r.len())
                        .map(|i| r.as_ref(i).map_or("NULL".into(), |v| v.as_sql(true)))
                        .collect();
                    format!("({})", cells.join(", "))
                })
                .collect();
            reference
                .query_drop(format!("INSERT INTO {t} VALUES {}", values.join(", ")))
                .await
                .unwrap_or_else(|e| panic!("copying {t}: {e}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sysbench_tpcc_check_holds_through_shoal_after_a_run() {
    let tables: Vec<(&str, &str)> = schema::SHARDED.to_vec();
    let layout = shoal_tests::warehouse_layout("", &tables, &[schema::GLOBAL]);
    let (cluster, shoal) = shoal_tests::two_servers_and_shoal(
        &["a", "b", REF_DB],
        shoal_tests::APP_USER,
        &layout,
        "tpcc_check",
    )
    .await;
    let ep = Endpoint {
        name: "shoal".into(),
        host: "127.0.0.1".into(),
        port: shoal.port(),
        user: "app".into(),
        password: "app-secret".into(),
        db: Some("shop".into()),
    };
    let scale = schema::Scale {
        warehouses: WAREHOUSES,
        items: 2_000,
        customers: 60,
    };
    scale.validate().unwrap();
    let progress = Progress::new("tpcc_check", 0);
    load::load(&ep, &scale, 2, &progress)
        .await
        .unwrap_or_else(|e| panic!("TPC-C load through Shoal: {e}\n{}", shoal.log()));
    let run = txn::run_terminals(&ep, &scale, 4, Duration::from_secs(8))
        .await
        .unwrap_or_else(|e| panic!("TPC-C run through Shoal: {e}\n{}", shoal.log()));
    assert!(
        run.transactions() > 50,
        "{} transactions",
        run.transactions()
    );

    let mut s = Conn::new(shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .unwrap();
    let mut r = Conn::new(cluster.opts(0, Some(REF_DB))).await.unwrap();
    copy_to_reference(&mut s, &mut r).await;

    let mut failures = Vec::new();
    let mut held = 0;
    for w in 1..=WAREHOUSES {
        for (n, sql, judge) in checks(w) {
            let want = rows(&mut r, &sql)
                .await
                .unwrap_or_else(|e| panic!("check {n} on one MariaDB: {e}\n{sql}"));
            let got = match rows(&mut s, &sql).await {
                Ok(got) => got,
                Err(e) => {
                    failures.push(format!("check {n}, warehouse {w}: {e}\n  {sql}"));
                    continue;
                }
            };
            let (mut a, mut b) = (want.clone(), got.clone());
            a.sort();
            b.sort();
            if a != b {
                failures.push(format!(
                    "check {n}, warehouse {w}: Shoal {got:?}, one MariaDB {want:?}\n  {sql}"
                ));
            }
            // Both are judged as tpcc_check.lua judges: a broken condition on the copy too
            // would be a broken run, not a wrong answer.
            match (judge.broken(&got), judge.broken(&want)) {
                (None, None) => held += 1,
                (g, w2) => failures.push(format!(
                    "check {n}, warehouse {w}: condition broken (Shoal: {g:?}, one MariaDB: {w2:?})\n  {sql}"
                )),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} conditions hold; failures:\n{}",
        held,
        WAREHOUSES * 10,
        failures.join("\n")
    );
    assert_eq!(held, 40);
}
