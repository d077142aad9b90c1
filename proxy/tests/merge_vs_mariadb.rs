//! The merge operator against MariaDB itself: the same rows in one table and split over three;
//! each query's per-shard results (the SQL the router's rewrite gives, written out here) fed
//! to the merger must equal, byte for byte, MariaDB's own answer on the single table, in the
//! text and the binary protocol.

use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use mysql_common::constants::CapabilityFlags;
use shoal_bench::cluster::{Cluster, ClusterSpec};
use shoal_proxy::backend::conn::BackendConn;
use shoal_proxy::config::BackendSpec;
use shoal_proxy::merge::{Column, Merger, Protocol, Step, columns_agree, parse_column};
use shoal_proxy::wire::command::COM_QUERY;
use shoal_proxy::wire::response::{Event, Expect, ResponseReader};
use shoal_router::plan::{
    AggColumn, Aggregation, CmpOp, Column as C, Fold, HavingSpec, MergeSpec, Operand, SortKey,
};
use shoal_router::sql::stmt::Literal;

const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;

/// Column definitions and row payloads of one result set.
async fn fetch(conn: &mut BackendConn, sql: &str, p: Protocol) -> (Vec<Column>, Vec<Vec<u8>>) {
    let expect = match p {
        Protocol::Text => {
            send(conn, COM_QUERY, sql.as_bytes()).await;
            Expect::Results { binary: false }
        }
        Protocol::Binary => {
            send(conn, COM_STMT_PREPARE, sql.as_bytes()).await;
            let mut r = ResponseReader::new(Expect::Prepare, conn.caps);
            let mut id = None;
            while !r.finished() {
                conn.io.next_packet().await.unwrap();
                let payload = conn.io.packet_payload().into_owned();
                match r.next(&payload).unwrap() {
                    Event::PrepareOk { statement_id, .. } => id = Some(statement_id),
                    Event::Err { message, .. } => {
                        panic!("{sql}: {}", String::from_utf8_lossy(message))
                    }
                    _ => {}
                }
            }
            let mut arg = id.unwrap().to_le_bytes().to_vec();
            arg.push(0);
            arg.extend_from_slice(&1u32.to_le_bytes());
            send(conn, COM_STMT_EXECUTE, &arg).await;
            Expect::Results { binary: true }
        }
    };
    let mut r = ResponseReader::new(expect, conn.caps);
    let (mut cols, mut rows) = (Vec::new(), Vec::new());
    while !r.finished() {
        conn.io.next_packet().await.unwrap();
        let payload = conn.io.packet_payload().into_owned();
        match r.next(&payload).unwrap() {
            Event::ColumnDef(d) => cols.push(parse_column(d).unwrap()),
            Event::Row(row) => rows.push(row.to_vec()),
            Event::Err { message, .. } => panic!("{sql}: {}", String::from_utf8_lossy(message)),
            _ => {}
        }
    }
    (cols, rows)
}

/// Runs the merger over the shards' rows, asking as it asks.
fn merge(
    spec: &MergeSpec,
    cols: &[Column],
    shard_rows: &[Vec<Vec<u8>>],
    p: Protocol,
    what: &str,
) -> Vec<Vec<u8>> {
    merge_max(
        spec,
        cols,
        shard_rows,
        p,
        what,
        shoal_proxy::merge::DEFAULT_MAX_GROUPS,
    )
}

/// [`merge`] holding at most `max_groups` groups.
fn merge_max(
    spec: &MergeSpec,
    cols: &[Column],
    shard_rows: &[Vec<Vec<u8>>],
    p: Protocol,
    what: &str,
    max_groups: usize,
) -> Vec<Vec<u8>> {
    let mut m = Merger::new(spec, cols.to_vec(), shard_rows.len(), p)
        .unwrap_or_else(|e| panic!("{what}: {e}"))
        .max_groups(max_groups);
    let mut pos = vec![0usize; shard_rows.len()];
    let mut got = Vec::new();
    loop {
        match m.next().unwrap_or_else(|e| panic!("{what}: {e}")) {
            Step::Need(s) => match shard_rows[s].get(pos[s]) {
                Some(r) => {
                    pos[s] += 1;
                    m.feed_row(s, r.as_slice()).unwrap();
                }
                None => m.feed_end(s),
            },
            Step::Row(r) => got.push(r),
            Step::Done => return got,
        }
    }
}

async fn send(conn: &mut BackendConn, cmd: u8, arg: &[u8]) {
    let mut payload = vec![cmd];
    payload.extend_from_slice(arg);
    let mut seq = 0;
    conn.io.write_packet(&mut seq, &payload);
    conn.io.flush().await.unwrap();
}

fn sort(column: C, desc: bool) -> SortKey {
    SortKey { column, desc }
}

fn agg(keys: &[C], folds: &[(C, Fold)]) -> Option<Aggregation> {
    Some(Aggregation {
        keys: keys.to_vec(),
        columns: folds
            .iter()
            .map(|&(column, fold)| AggColumn { column, fold })
            .collect(),
    })
}

/// (query on the single table, query per shard, merge spec); `{t}` is the table name.
fn cases() -> Vec<(&'static str, &'static str, MergeSpec)> {
    let avg = |s, c| Fold::Avg {
        sum: C::FromEnd(s),
        count: C::FromEnd(c),
    };
    vec![
        (
            "SELECT id, name FROM {t} ORDER BY name, id",
            "SELECT id, name FROM {t} ORDER BY name, id",
            MergeSpec {
                order_by: vec![sort(C::At(1), false), sort(C::At(0), false)],
                ..Default::default()
            },
        ),
        (
            "SELECT id, amount FROM {t} ORDER BY amount DESC, id LIMIT 4, 5",
            "SELECT id, amount FROM {t} ORDER BY amount DESC, id LIMIT 9",
            MergeSpec {
                order_by: vec![sort(C::At(1), true), sort(C::At(0), false)],
                offset: 4,
                limit: Some(5),
                ..Default::default()
            },
        ),
        (
            "SELECT grp, COUNT(*), SUM(amount), MIN(u), MAX(d), AVG(amount), AVG(f) \
             FROM {t} GROUP BY grp",
            "SELECT grp, COUNT(*), SUM(amount), MIN(u), MAX(d), AVG(amount), AVG(f), \
             SUM(amount), COUNT(amount), SUM(f), COUNT(f) FROM {t} GROUP BY grp",
            MergeSpec {
                aggregate: agg(
                    &[C::At(0)],
                    &[
                        (C::At(1), Fold::SumCounts),
                        (C::At(2), Fold::Sum),
                        (C::At(3), Fold::Min),
                        (C::At(4), Fold::Max),
                        (C::At(5), avg(4, 3)),
                        (C::At(6), avg(2, 1)),
                    ],
                ),
                order_by: vec![sort(C::At(0), false)],
                hidden_columns: 4,
                ..Default::default()
            },
        ),
        (
            "SELECT COUNT(*), SUM(amount), AVG(amount), MAX(name) FROM {t} WHERE id < 0",
            "SELECT COUNT(*), SUM(amount), AVG(amount), MAX(name), SUM(amount), COUNT(amount) \
             FROM {t} WHERE id < 0",
            MergeSpec {
                aggregate: agg(
                    &[],
                    &[
                        (C::At(0), Fold::SumCounts),
                        (C::At(1), Fold::Sum),
                        (C::At(2), avg(2, 1)),
                        (C::At(3), Fold::Max),
                    ],
                ),
                hidden_columns: 2,
                ..Default::default()
            },
        ),
        (
            "SELECT DISTINCT grp FROM {t} ORDER BY grp",
            "SELECT DISTINCT grp FROM {t} ORDER BY grp",
            MergeSpec {
                distinct: true,
                order_by: vec![sort(C::At(0), false)],
                ..Default::default()
            },
        ),
        (
            "SELECT grp, SUM(amount) FROM {t} GROUP BY grp HAVING SUM(amount) > 0 \
             ORDER BY grp DESC",
            "SELECT grp, SUM(amount) FROM {t} GROUP BY grp ORDER BY grp DESC",
            MergeSpec {
                aggregate: agg(&[C::At(0)], &[(C::At(1), Fold::Sum)]),
                having: Some(HavingSpec::Cmp {
                    op: CmpOp::Gt,
                    left: Operand::Column(C::At(1)),
                    right: Operand::Value(Literal::Int(0)),
                }),
                order_by: vec![sort(C::At(0), true)],
                ..Default::default()
            },
        ),
        (
            "SELECT u, d FROM {t} ORDER BY u",
            "SELECT u, d FROM {t} ORDER BY u",
            MergeSpec {
                order_by: vec![sort(C::At(0), false)],
                ..Default::default()
            },
        ),
        (
            "SELECT id FROM {t} ORDER BY d DESC, id",
            "SELECT id, d FROM {t} ORDER BY d DESC, id",
            MergeSpec {
                order_by: vec![sort(C::FromEnd(1), true), sort(C::At(0), false)],
                hidden_columns: 1,
                ..Default::default()
            },
        ),
        (
            "SELECT id, name, amount FROM {t}",
            "SELECT id, name, amount FROM {t}",
            MergeSpec::default(),
        ),
    ]
}

fn rows_sql(table: &str, filter: impl Fn(i64) -> bool) -> String {
    let names = [
        "'apple'",
        "'Apple'",
        "'apple '",
        "'banana'",
        "'Éclair'",
        "'eclair'",
        "'zeta'",
        "NULL",
        "'Zeta'",
        "'b'",
    ];
    let grps = ["'a'", "'b'", "'c'", "NULL"];
    let mut vals = Vec::new();
    for id in 1..=40i64 {
        if !filter(id) {
            continue;
        }
        let amount = format!("{}.{}", (id * 37) % 200 - 100, (id % 4) * 25);
        let u = if id % 2 == 1 {
            (u64::MAX - id as u64 * 1000).to_string()
        } else {
            id.to_string()
        };
        let amount = if id % 9 == 0 {
            "NULL".to_string()
        } else {
            amount
        };
        vals.push(format!(
            "({id}, {}, {}, {amount}, {u}, '2020-01-01 00:00:00' + INTERVAL {} MINUTE, {})",
            grps[(id % 4) as usize],
            names[(id % 10) as usize],
            (id * 7919) % 100_000,
            id as f64 * 0.5
        ));
    }
    if vals.is_empty() {
        return String::new();
    }
    format!(
        "INSERT INTO {table} (id, grp, name, amount, u, d, f) VALUES {}",
        vals.join(", ")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_shard_results_equal_mariadb_on_one_table() {
    let cluster = Cluster::start(ClusterSpec {
        databases: vec!["m".into()],
        ..Default::default()
    })
    .await
    .expect("cluster");
    let inst = cluster.primary(0);
    let opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(inst.port)
        .user(Some(cluster.user()))
        .pass(Some(cluster.password()))
        .db_name(Some("m"))
        .prefer_socket(false);
    let mut c = Conn::new(opts).await.unwrap();
    for t in ["t", "t0", "t1", "t2"] {
        c.query_drop(format!(
            "CREATE TABLE {t} (id INT PRIMARY KEY, grp VARCHAR(5), name VARCHAR(20), \
             amount DECIMAL(10,2), u BIGINT UNSIGNED, d DATETIME, f DOUBLE) \
             DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
        ))
        .await
        .unwrap();
    }
    c.query_drop(rows_sql("t", |_| true)).await.unwrap();
    for s in 0..3 {
        c.query_drop(rows_sql(&format!("t{s}"), |id| id % 3 == s))
            .await
            .unwrap();
    }
    drop(c);

    let spec = BackendSpec {
        host: "127.0.0.1".into(),
        port: inst.port,
        user: cluster.user().into(),
        password: cluster.password().into(),
        database: Some("m".into()),
        tls: Default::default(),
    };
    let mut checked = 0;
    // Strings come as utf8mb4 (general_ci) or latin1 (latin1_swedish_ci) per the connection;
    // responses end with EOF packets or, under CLIENT_DEPRECATE_EOF, OK packets.
    for (wire, names, p) in [
        (
            CapabilityFlags::CLIENT_DEPRECATE_EOF,
            "utf8mb4",
            Protocol::Text,
        ),
        (
            CapabilityFlags::CLIENT_DEPRECATE_EOF,
            "utf8mb4",
            Protocol::Binary,
        ),
        (
            CapabilityFlags::CLIENT_DEPRECATE_EOF,
            "latin1",
            Protocol::Text,
        ),
        (CapabilityFlags::empty(), "latin1", Protocol::Binary),
        (CapabilityFlags::empty(), "utf8mb4", Protocol::Text),
    ] {
        let mut conn = BackendConn::connect(
            &spec,
            wire.into(),
            Some("m"),
            false,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(
            conn.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF),
            !wire.is_empty()
        );
        conn.command(COM_QUERY, format!("SET NAMES {names}").as_bytes())
            .await
            .unwrap();
        for (single, per_shard, mspec) in cases() {
            let (want_cols, want) = fetch(&mut conn, &single.replace("{t}", "t"), p).await;
            if single.starts_with("SELECT id, name ") {
                let want_charset = if names == "latin1" { 8 } else { 45 };
                assert_eq!(
                    want_cols[1].charset, want_charset,
                    "collation reported for {names}"
                );
            }
            let mut shard_cols = Vec::new();
            let mut shard_rows = Vec::new();
            for s in 0..3 {
                let (cols, rows) =
                    fetch(&mut conn, &per_shard.replace("{t}", &format!("t{s}")), p).await;
                shard_cols.push(cols);
                shard_rows.push(rows);
            }
            assert!(columns_agree(&shard_cols[0], &shard_cols[1]));
            assert!(columns_agree(&shard_cols[0], &shard_cols[2]));
            let mut got = merge(&mspec, &shard_cols[0], &shard_rows, p, single);
            let visible = Merger::new(&mspec, shard_cols[0].clone(), 3, p).unwrap();
            assert_eq!(visible.visible_columns(), want_cols.len(), "{single}");
            assert!(!want.is_empty(), "{single}: no rows to compare");
            let mut want = want;
            if mspec.order_by.is_empty() && mspec.aggregate.is_none() {
                // No ORDER BY: any order is MariaDB's answer; compare the rows as multisets.
                want.sort();
                got.sort();
            }
            assert_eq!(
                got.iter()
                    .map(|r| String::from_utf8_lossy(r).into_owned())
                    .collect::<Vec<_>>(),
                want.iter()
                    .map(|r| String::from_utf8_lossy(r).into_owned())
                    .collect::<Vec<_>>(),
                "{single} ({p:?}, {names})"
            );
            assert_eq!(got, want, "{single} ({p:?}, {names})");
            checked += 1;
        }
    }
    assert_eq!(checked, 5 * cases().len());
}

const TABLE: &str = "(id INT PRIMARY KEY, grp VARCHAR(5), name VARCHAR(20), amount DECIMAL(10,2), \
     u BIGINT UNSIGNED, d DATETIME, f DOUBLE) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci";

/// The router's own rewrite and merge spec: each scattered SELECT on the logical table, run as
/// the router plans it on three datanodes, merges to what MariaDB answers on one table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn router_plans_merge_like_mariadb() {
    let cluster = Cluster::start(ClusterSpec {
        databases: vec!["m".into(), "m1".into(), "m2".into(), "m3".into()],
        ..Default::default()
    })
    .await
    .expect("cluster");
    let inst = cluster.primary(0);
    let opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(inst.port)
        .user(Some(cluster.user()))
        .pass(Some(cluster.password()))
        .prefer_socket(false);
    let mut c = Conn::new(opts).await.unwrap();
    c.query_drop(format!("CREATE TABLE m.t {TABLE}"))
        .await
        .unwrap();
    c.query_drop(rows_sql("m.t", |_| true)).await.unwrap();
    for k in 1..=3i64 {
        c.query_drop(format!("CREATE TABLE m{k}.t {TABLE}"))
            .await
            .unwrap();
        c.query_drop(rows_sql(&format!("m{k}.t"), |id| id % 3 == k - 1))
            .await
            .unwrap();
    }
    drop(c);

    let yaml = format!(
        "users:\n  - {{ name: app, password: app, schemas: [m] }}\n\
         datahosts:\n  - name: dh1\n    primary: {{ address: 127.0.0.1:{}, user: {}, password: {} }}\n\
         datanodes:\n  - {{ name: dn1..dn3, datahost: dh1, database: m1..m3 }}\n\
         rules:\n  - {{ name: by_id, algorithm: mod }}\n\
         schemas:\n  - name: m\n    tables:\n      - {{ name: t, type: sharded, shard_key: id, rule: by_id, datanodes: dn1..dn3 }}\n",
        inst.port,
        cluster.user(),
        cluster.password()
    );
    let cfg = shoal_router::config::Config::from_yaml_str(&yaml).expect("config");
    let topo =
        std::sync::Arc::new(shoal_router::topology::Topology::build(&cfg).expect("topology"));
    let router = shoal_router::plan::Router::new(topo.clone());

    let spec = BackendSpec {
        host: "127.0.0.1".into(),
        port: inst.port,
        user: cluster.user().into(),
        password: cluster.password().into(),
        database: Some("m".into()),
        tls: Default::default(),
    };
    let mut conn = BackendConn::connect(
        &spec,
        CapabilityFlags::CLIENT_DEPRECATE_EOF.into(),
        Some("m"),
        false,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    conn.command(COM_QUERY, b"SET NAMES utf8mb4").await.unwrap();

    let queries = [
        "SELECT id, name FROM t ORDER BY name, id",
        "SELECT id, amount FROM t ORDER BY amount DESC, id LIMIT 4, 5",
        "SELECT grp, COUNT(*), SUM(amount), MIN(u), MAX(d), AVG(amount), AVG(f) FROM t GROUP BY grp",
        "SELECT COUNT(*), SUM(amount), AVG(amount), MAX(name) FROM t WHERE id < 0",
        "SELECT DISTINCT grp FROM t ORDER BY grp",
        "SELECT grp, SUM(amount) FROM t GROUP BY grp HAVING SUM(amount) > 0 ORDER BY grp DESC",
        "SELECT id FROM t ORDER BY d DESC, id",
        "SELECT grp, COUNT(*) FROM t GROUP BY grp ORDER BY COUNT(*) DESC, grp LIMIT 2",
        "SELECT grp FROM t GROUP BY grp HAVING COUNT(*) > 9",
        "SELECT grp, AVG(amount) FROM t GROUP BY grp HAVING AVG(amount) < 5 OR grp IS NULL",
        "SELECT u FROM t ORDER BY u DESC LIMIT 3",
        // Sorted group streams: the shards sort by the group keys (general_ci ties 'apple',
        // 'Apple', 'apple ' and 'Éclair', 'eclair' are one group each; NULL first).
        "SELECT COUNT(*), SUM(amount), MIN(id), MAX(d) FROM t GROUP BY name",
        "SELECT COUNT(*), MIN(id) FROM t GROUP BY name ORDER BY COUNT(*) DESC, MIN(id) LIMIT 3",
        "SELECT grp, COUNT(*), MAX(id) FROM t GROUP BY grp ORDER BY grp DESC LIMIT 2",
        "SELECT u, COUNT(*) FROM t GROUP BY u ORDER BY u DESC",
        "SELECT d, COUNT(*), AVG(amount) FROM t GROUP BY d HAVING COUNT(*) >= 1 LIMIT 5, 4",
        "SELECT DISTINCT grp, COUNT(*) FROM t GROUP BY grp",
        "SELECT f, SUM(amount) FROM t GROUP BY f LIMIT 4, 3",
        "SELECT grp, COUNT(*) FROM t GROUP BY grp, name HAVING COUNT(*) > 1 ORDER BY grp, MIN(id)",
        // DOUBLE sums printed as MariaDB prints them, in fixed and in exponent notation
        // (scaled by powers of two, so that every order of addition gives the same sum).
        "SELECT grp, SUM(f * POW(2, -30)), SUM(f * POW(2, 50)) FROM t GROUP BY grp",
        "SELECT SUM(f * POW(2, -40)), SUM(-f * POW(2, 60)) FROM t",
        "SELECT grp, COUNT(*) AS c FROM t GROUP BY grp HAVING c BETWEEN 10 AND 11 ORDER BY grp",
        // A group of names is named by MIN(id): its spelling ('Éclair' or 'eclair') is any row's.
        "SELECT MIN(id), SUM(amount) FROM t GROUP BY name HAVING SUM(amount) NOT BETWEEN -50 AND 50",
        // Select-list aliases in GROUP BY, HAVING and ORDER BY (issue 22): each shard resolves
        // a GROUP BY name itself (a table column first, then an alias), the merge groups by
        // the value the shard grouped by.
        "SELECT MONTH(d) AS mo, COUNT(*) FROM t GROUP BY mo ORDER BY mo",
        "SELECT UPPER(grp) AS ug, COUNT(*) FROM t GROUP BY ug ORDER BY ug DESC",
        "SELECT id % 5 AS m5, COUNT(*), AVG(amount) AS a FROM t GROUP BY m5 ORDER BY a DESC, m5",
        "SELECT id % 5 AS m5, COUNT(*) AS n FROM t GROUP BY m5 HAVING m5 > 1 AND n > 7",
        "SELECT id % 5 AS m5, COUNT(*) FROM t GROUP BY m5 ORDER BY id % 5 DESC",
        "SELECT id % 5 AS m5, MIN(id) FROM t GROUP BY m5 ORDER BY 2 DESC, 1",
        "SELECT grp AS g, COUNT(*), MAX(id) FROM t GROUP BY g ORDER BY g",
        // An alias shadowing a column: GROUP BY and HAVING take the column, ORDER BY the alias.
        "SELECT grp IS NULL AS grp, COUNT(*), MIN(id) AS lo FROM t GROUP BY grp ORDER BY grp, lo",
        "SELECT grp IS NULL AS grp, MIN(id) AS lo FROM t GROUP BY grp HAVING grp > 'a' ORDER BY lo",
        "SELECT -id AS id, name FROM t ORDER BY id LIMIT 5",
    ];
    let mut checked = 0;
    for p in [Protocol::Text, Protocol::Binary] {
        for sql in queries {
            let (targets, mspec) = match router.route(Some("m"), sql, &[]) {
                shoal_router::plan::RoutePlan::Scatter {
                    targets,
                    merge: shoal_router::plan::Merge::Rows(spec),
                } => (targets, spec),
                other => panic!("{sql}: not a scattered read: {other:?}"),
            };
            assert_eq!(targets.len(), 3, "{sql}");
            conn.init_db("m").await.unwrap();
            let (want_cols, want) = fetch(&mut conn, sql, p).await;
            let mut cols = Vec::new();
            let mut rows = Vec::new();
            for t in &targets {
                conn.init_db(&topo.datanodes[t.datanode].database)
                    .await
                    .unwrap();
                let (c, r) = fetch(&mut conn, &t.sql, p).await;
                cols.push(c);
                rows.push(r);
            }
            assert!(
                cols.windows(2).all(|w| columns_agree(&w[0], &w[1])),
                "{sql}"
            );
            if sql.contains("GROUP BY") {
                assert!(mspec.groups_sorted, "{sql}: groups not sorted");
            }
            // Groups that stream in their final order need room for one group only.
            let gorder = mspec.group_order();
            let streams = mspec.groups_sorted
                && mspec.order_by.len() <= gorder.len()
                && mspec.order_by.iter().zip(&gorder).all(|(a, b)| a == b);
            let max = if streams { 1 } else { 100 };
            let got = merge_max(&mspec, &cols[0], &rows, p, sql, max);
            let m = Merger::new(&mspec, cols[0].clone(), 3, p).unwrap();
            assert_eq!(m.visible_columns(), want_cols.len(), "{sql}");
            assert!(!want.is_empty(), "{sql}: no rows to compare");
            assert_eq!(
                got.iter()
                    .map(|r| String::from_utf8_lossy(r).into_owned())
                    .collect::<Vec<_>>(),
                want.iter()
                    .map(|r| String::from_utf8_lossy(r).into_owned())
                    .collect::<Vec<_>>(),
                "{sql} ({p:?}) via {:?}",
                targets.iter().map(|t| &t.sql).collect::<Vec<_>>()
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * queries.len());
    // After a `*` the hidden group key is ordered by its name, which the `*` also yields:
    // MariaDB takes it (the same column twice is no ambiguity) and sorts by it.
    let sql = "SELECT * FROM t GROUP BY grp";
    let shoal_router::plan::RoutePlan::Scatter {
        targets,
        merge: shoal_router::plan::Merge::Rows(mspec),
    } = router.route(Some("m"), sql, &[])
    else {
        panic!("{sql}: not a scattered read");
    };
    assert!(
        mspec.groups_sorted && targets[0].sql.ends_with("ORDER BY grp"),
        "{targets:?}"
    );
    let mut rows = Vec::new();
    let mut cols = Vec::new();
    for t in &targets {
        conn.init_db(&topo.datanodes[t.datanode].database)
            .await
            .unwrap();
        let (c, r) = fetch(&mut conn, &t.sql, Protocol::Text).await;
        cols.push(c);
        rows.push(r);
    }
    let got = merge_max(&mspec, &cols[0], &rows, Protocol::Text, sql, 1);
    assert_eq!(got.len(), 4, "{sql}: one row per grp (NULL, a, b, c)");
}
