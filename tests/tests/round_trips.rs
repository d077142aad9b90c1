//! What reaches MariaDB for a transaction on one datanode (issue 48): the same statements as
//! from a client connected directly, and no more round trips than the client's statements.
//!
//! One server of the test's own (no other traffic: the health monitor's heartbeat is set past
//! the test's end) holds a database for the direct client and the two datanodes of a schema
//! sharded by warehouse. A TPC-C-like transaction on warehouse 1 (BEGIN, reads and writes by its
//! key, COMMIT) runs once to warm every cache (prepared statements, pooled connection), then
//! once measured, directly and through Shoal, text and prepared. Measured:
//! - the server's `Com_*` and `Questions` deltas (`SHOW GLOBAL STATUS` around the transaction),
//!   which must be equal both ways;
//! - the requests Shoal sent the server (`shoal_pool_requests_total`, one per round trip): one
//!   per client statement but BEGIN, which Shoal answers itself and sends with the first
//!   statement of the transaction.

use std::collections::BTreeMap;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use shoal_tests::shoal::free_port;
use shoal_tests::{ShoalProcess, http_get, metric_value, private_cluster, scratch_dir};

const TABLES: [&str; 3] = [
    "CREATE TABLE warehouse (w_id INT PRIMARY KEY, w_tax DECIMAL(4,4), w_ytd DECIMAL(12,2))",
    "CREATE TABLE district (d_w_id INT, d_id INT, d_next_o_id INT, PRIMARY KEY (d_w_id, d_id))",
    "CREATE TABLE orders (o_w_id INT, o_d_id INT, o_id INT, o_c_id INT, \
     PRIMARY KEY (o_w_id, o_d_id, o_id))",
];

const ROWS: [&str; 2] = [
    "INSERT INTO warehouse VALUES (1, 0.1, 0), (2, 0.2, 0)",
    "INSERT INTO district VALUES (1, 1, 1), (2, 1, 1)",
];

/// The transaction's statements between BEGIN and COMMIT, on warehouse 1, with parameters
/// (`o_id` for the order it inserts).
fn body(o_id: i64) -> Vec<(&'static str, Vec<i64>)> {
    vec![
        ("SELECT w_tax FROM warehouse WHERE w_id = ?", vec![1]),
        (
            "SELECT d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ? FOR UPDATE",
            vec![1, 1],
        ),
        (
            "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = ? AND d_id = ?",
            vec![1, 1],
        ),
        (
            "INSERT INTO orders (o_w_id, o_d_id, o_id, o_c_id) VALUES (?, ?, ?, ?)",
            vec![1, 1, o_id, 7],
        ),
        (
            "UPDATE warehouse SET w_ytd = w_ytd + 10 WHERE w_id = ?",
            vec![1],
        ),
    ]
}

/// Runs the transaction on `c`: text statements (parameters inlined) or prepared ones.
/// Returns the statements the client sent.
async fn transaction(c: &mut Conn, prepared: bool, o_id: i64) -> usize {
    c.query_drop("BEGIN").await.unwrap();
    let stmts = body(o_id);
    for (sql, params) in &stmts {
        if prepared {
            c.exec_drop(*sql, params.clone()).await.unwrap();
        } else {
            let mut text = String::new();
            let mut p = params.iter();
            for (i, part) in sql.split('?').enumerate() {
                if i > 0 {
                    text.push_str(&p.next().unwrap().to_string());
                }
                text.push_str(part);
            }
            c.query_drop(text).await.unwrap();
        }
    }
    c.query_drop("COMMIT").await.unwrap();
    stmts.len() + 2
}

/// The server's statement counters (`Com_*`, `Questions`).
async fn counters(probe: &mut Conn) -> BTreeMap<String, i64> {
    let rows: Vec<(String, String)> = probe
        .query(
            "SHOW GLOBAL STATUS WHERE Variable_name LIKE 'Com\\_%' OR Variable_name = 'Questions'",
        )
        .await
        .unwrap();
    rows.into_iter()
        .filter_map(|(n, v)| Some((n, v.parse().ok()?)))
        .collect()
}

/// The counters that moved between `before` and `after`, with how much.
fn delta(before: &BTreeMap<String, i64>, after: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    after
        .iter()
        .map(|(n, v)| (n.clone(), v - before.get(n).copied().unwrap_or(0)))
        .filter(|(_, d)| *d != 0)
        .collect()
}

/// Requests Shoal has sent its backend servers.
async fn requests(admin: &str) -> f64 {
    let (status, body) = http_get(admin, "/metrics").await;
    assert_eq!(status, 200, "{body}");
    metric_value(&body, "shoal_pool_requests_total", &[])
}

/// The transaction (text or prepared) measured directly and through Shoal, on schemas whose
/// `transactions:` is `mode`, over `datanodes` datanodes (1 or 2): the server's counter deltas
/// both ways, the client's statements, and the requests Shoal sent.
async fn measure(
    mode: &str,
    datanodes: usize,
    prepared: bool,
) -> (BTreeMap<String, i64>, BTreeMap<String, i64>, usize, f64) {
    let (dn_list, dn2) = match datanodes {
        1 => ("dn1", ""),
        _ => (
            "dn1, dn2",
            "\n  - { name: dn2, datahost: dh1, database: wh_2 }",
        ),
    };
    let (_cluster, backend) = private_cluster();
    for db in ["direct", "wh_1", "wh_2"] {
        backend.fresh_db(db).await;
    }
    let mut setup = backend.conn(Some("direct")).await;
    for sql in TABLES.iter().chain(ROWS.iter()) {
        setup.query_drop(*sql).await.unwrap();
    }
    drop(setup);
    let path = scratch_dir().join(format!("round_trips_{mode}_{datanodes}_{prepared}.yaml"));
    std::fs::write(
        &path,
        format!(
            "users:
  - {{ name: app, password: app-secret, schemas: [shop] }}
datahosts:
  - name: dh1
    primary: {{ address: {h}:{port}, user: {u}, password: {pw} }}
    health: {{ heartbeat: 3600s }}
datanodes:
  - {{ name: dn1, datahost: dh1, database: wh_1 }}{dn2}
rules:
  - {{ name: by_warehouse, algorithm: mod }}
schemas:
  - name: shop
    default_datanode: dn1
    transactions: {mode}
    tables:
      - {{ name: warehouse, type: sharded, shard_key: w_id, rule: by_warehouse, datanodes: \"{dn_list}\" }}
      - {{ name: district, type: sharded, shard_key: d_w_id, rule: by_warehouse, datanodes: \"{dn_list}\" }}
      - {{ name: orders, type: sharded, shard_key: o_w_id, rule: by_warehouse, datanodes: \"{dn_list}\" }}
",
            h = backend.host,
            port = backend.port,
            u = backend.user,
            pw = backend.password,
        ),
    )
    .expect("write config");
    let admin = format!("127.0.0.1:{}", free_port());
    let shoal = ShoalProcess::start(&[
        "--config".to_string(),
        path.display().to_string(),
        "--admin-listen".to_string(),
        admin.clone(),
    ]);
    let opts: Opts = shoal.opts_as("app", "app-secret", Some("shop"));
    let mut setup = Conn::new(opts.clone()).await.unwrap();
    for sql in TABLES.iter().chain(ROWS.iter()) {
        setup
            .query_drop(*sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", shoal.log()));
    }
    drop(setup);

    let mut probe = backend.conn(None).await;
    let mut direct = backend.conn(Some("direct")).await;
    let mut proxied = Conn::new(opts).await.unwrap();
    // Warm: prepared statements, the pooled connection and its state, Shoal's caches.
    transaction(&mut direct, prepared, 1).await;
    transaction(&mut proxied, prepared, 1).await;

    let before = counters(&mut probe).await;
    let statements = transaction(&mut direct, prepared, 2).await;
    let after = counters(&mut probe).await;
    let direct_delta = delta(&before, &after);

    let sent_before = requests(&admin).await;
    let before = counters(&mut probe).await;
    transaction(&mut proxied, prepared, 2).await;
    let after = counters(&mut probe).await;
    let sent = requests(&admin).await - sent_before;
    let shoal_delta = delta(&before, &after);
    (direct_delta, shoal_delta, statements, sent)
}

/// Both ways the server runs the same statements, and Shoal sends one request per statement
/// of the client's but BEGIN.
async fn same_as_direct(mode: &str, datanodes: usize, prepared: bool) {
    let (direct, shoal, statements, sent) = measure(mode, datanodes, prepared).await;
    assert_eq!(
        shoal, direct,
        "{mode}, prepared {prepared}: the server's counters through Shoal (left) and direct \
         (right) for one transaction on one datanode"
    );
    assert_eq!(
        sent,
        (statements - 1) as f64,
        "{mode}, prepared {prepared}: requests Shoal sent for {statements} client statements \
         (BEGIN travels with the first statement)"
    );
}

#[tokio::test]
async fn text_transaction_on_one_datanode_sends_what_the_client_sent() {
    same_as_direct("best_effort", 2, false).await;
}

#[tokio::test]
async fn prepared_transaction_on_one_datanode_sends_what_the_client_sent() {
    same_as_direct("best_effort", 2, true).await;
}

/// Under XA (the default) over a topology of one datanode, no transaction can span two: it is
/// the plain BEGIN ... COMMIT the client sent, not an XA branch (which costs MariaDB one
/// statement more and more work per commit).
#[tokio::test]
async fn xa_over_one_datanode_sends_what_the_client_sent() {
    for prepared in [false, true] {
        same_as_direct("xa", 1, prepared).await;
    }
}

/// Under XA (the default) a one-datanode transaction's branch is an XA branch from its first
/// statement (Shoal cannot know it will stay on one datanode): `XA START` replaces BEGIN, and
/// COMMIT is `XA END` and `XA COMMIT ... ONE PHASE` pipelined. Everything else is the same,
/// and so are the round trips.
#[tokio::test]
async fn xa_transaction_on_one_datanode_costs_no_extra_round_trip() {
    for prepared in [false, true] {
        let (mut direct, mut shoal, statements, sent) = measure("xa", 2, prepared).await;
        let xa = |d: &mut BTreeMap<String, i64>, k: &str| d.remove(k).unwrap_or(0);
        assert_eq!(
            (xa(&mut direct, "Com_begin"), xa(&mut direct, "Com_commit")),
            (1, 1)
        );
        assert_eq!(
            (
                xa(&mut shoal, "Com_xa_start"),
                xa(&mut shoal, "Com_xa_end"),
                xa(&mut shoal, "Com_xa_commit")
            ),
            (1, 1, 1),
            "prepared {prepared}: {shoal:?}"
        );
        // XA END is the one statement more.
        *shoal.get_mut("Questions").unwrap() -= 1;
        assert_eq!(
            shoal, direct,
            "xa, prepared {prepared}: the server's counters through Shoal (left) and direct \
             (right), XA's own statements aside"
        );
        assert_eq!(
            sent,
            (statements - 1) as f64,
            "xa, prepared {prepared}: requests Shoal sent for {statements} client statements"
        );
    }
}
