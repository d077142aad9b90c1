//! Issue 23: reads of a table-per-shard table (two physical tables per datanode) inside a
//! transaction, through the text protocol (BEGIN ... COMMIT, autocommit=0) and as prepared
//! statements, compared with one MariaDB database holding the same rows in the same
//! transaction: the transaction's own uncommitted rows are read, values and column
//! definitions are what one server gives. Writes to such tables inside transactions too.

use mysql_async::prelude::Queryable;
use mysql_async::{Column, Conn, Row, Value};
use shoal_tests::{Backend, ShoalProcess, scratch_dir, unique_name};

/// Shoal over `{prefix}_1..4` (dn1..dn4) of one server: `ledger` by quarter of `day` from
/// 2024-01-01, eight tables `ledger_00..07`, two per datanode.
fn start_shoal(backend: &Backend, prefix: &str) -> ShoalProcess {
    let path = scratch_dir().join(format!("{prefix}.yaml"));
    std::fs::write(
        &path,
        format!(
            "users:
  - {{ name: app, password: app-secret, schemas: [shop] }}
datahosts:
  - name: dh1
    primary: {{ address: {h}:{p}, user: {u}, password: {pw} }}
datanodes:
  - {{ name: dn$1-4, datahost: dh1, database: {prefix}_$1-4 }}
rules:
  - {{ name: by_quarter, algorithm: date, start: 2024-01-01, unit: month, interval: 3, default: 0 }}
schemas:
  - name: shop
    default_datanode: dn1
    tables:
      - {{ name: ledger, type: sharded, shard_key: day, rule: by_quarter, datanodes: dn$1-4,
          tables_per_datanode: 2, physical_name: \"ledger_{{index:02}}\" }}
",
            h = backend.host,
            p = backend.port,
            u = backend.user,
            pw = backend.password,
        ),
    )
    .expect("write config");
    ShoalProcess::start(&["--config".to_string(), path.display().to_string()])
}

struct Setup {
    _cluster: shoal_bench::cluster::Cluster,
    backend: Backend,
    prefix: String,
    shoal: ShoalProcess,
    /// Through Shoal, schema `shop`.
    c: Conn,
    /// The reference: one plain database with the same table and rows.
    r: Conn,
    reference: String,
}

const DDL: &str = "CREATE TABLE ledger (id INT PRIMARY KEY, day DATE NOT NULL, \
                   account VARCHAR(10), amount DECIMAL(10,2), note VARCHAR(20))";

async fn setup(tag: &str) -> Setup {
    let (_cluster, backend) = shoal_tests::private_cluster();
    let prefix = unique_name(tag);
    for n in 1..=4 {
        backend.fresh_db(&format!("{prefix}_{n}")).await;
    }
    let reference = format!("{prefix}_ref");
    backend.fresh_db(&reference).await;
    let shoal = start_shoal(&backend, &prefix);
    let mut c = match Conn::new(shoal.opts_as("app", "app-secret", Some("shop"))).await {
        Ok(c) => c,
        Err(e) => panic!("connect through shoal: {e}\n{}", shoal.log()),
    };
    let mut r = backend.conn(Some(&reference)).await;
    c.query_drop(DDL)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", shoal.log()));
    r.query_drop(DDL).await.expect("reference DDL");
    // 48 rows over the eight quarters of 2024-2025: every physical table holds some.
    let accounts = ["acme", "bolt", "core", "dyna"];
    let mut values = Vec::new();
    for id in 1..=48 {
        let month = (id * 7) % 24;
        let day = format!(
            "{}-{:02}-{:02}",
            2024 + month / 12,
            month % 12 + 1,
            id % 28 + 1
        );
        let amount = if id % 9 == 0 {
            "NULL".to_string()
        } else {
            format!("{}.{:02}", (id * 37) % 500, (id * 13) % 100)
        };
        let note = if id % 4 == 0 { "NULL" } else { "'n'" };
        values.push(format!(
            "({id}, '{day}', '{}', {amount}, {note})",
            accounts[id % 4]
        ));
    }
    let insert = format!(
        "INSERT INTO ledger (id, day, account, amount, note) VALUES {}",
        values.join(", ")
    );
    c.query_drop(&insert)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", shoal.log()));
    r.query_drop(&insert).await.expect("reference insert");
    let s = Setup {
        _cluster,
        backend,
        prefix,
        shoal,
        c,
        r,
        reference,
    };
    let mut used = 0;
    for t in 0..8 {
        let mut d = s
            .backend
            .conn(Some(&format!("{}_{}", s.prefix, t / 2 + 1)))
            .await;
        let n: Option<i64> = d
            .query_first(format!("SELECT COUNT(*) FROM ledger_{t:02}"))
            .await
            .unwrap_or(None);
        used += usize::from(n.unwrap_or(0) > 0);
    }
    assert_eq!(used, 8, "rows in every physical table");
    s
}

/// What a client sees of a column: name, table (alias), original table, schema, original
/// name, type, decimals. (Not its flags: a UNION's result drops some the server sets for one
/// table, such as BINARY on an aggregate; docs/sql-support.md says so.)
fn described(c: &Column) -> String {
    format!(
        "{} {} {} {} {} {:?} {}",
        c.name_str(),
        c.table_str(),
        c.org_table_str(),
        c.schema_str(),
        c.org_name_str(),
        c.column_type(),
        c.decimals()
    )
}

fn columns_of(rows: &[Row]) -> Vec<Column> {
    rows.first()
        .map(|r| r.columns_ref().to_vec())
        .unwrap_or_default()
}

/// Values (sorted unless the statement orders them) and column definitions, the reference's
/// database named as the logical schema.
fn answer(rows: Vec<Row>, ordered: bool, reference: &str) -> (Vec<String>, Vec<Vec<Value>>) {
    let cols = columns_of(&rows)
        .iter()
        .map(|c| described(c).replace(reference, "shop"))
        .collect();
    let mut vals: Vec<Vec<Value>> = rows.into_iter().map(Row::unwrap).collect();
    if !ordered {
        vals.sort_by_key(|r| format!("{r:?}"));
    }
    (cols, vals)
}

/// (sql, whether its ORDER BY fixes the row order)
const READS: &[(&str, bool)] = &[
    ("SELECT COUNT(*) FROM ledger", true),
    (
        "SELECT SUM(amount), AVG(amount), COUNT(note), MIN(day), MAX(account) FROM ledger",
        true,
    ),
    (
        "SELECT account, COUNT(*), SUM(amount), AVG(amount) FROM ledger GROUP BY account",
        true,
    ),
    (
        "SELECT account, COUNT(*) AS n FROM ledger GROUP BY account HAVING n > 11 \
         ORDER BY n DESC, account",
        true,
    ),
    (
        "SELECT MONTH(day) AS m, COUNT(*), MAX(amount) FROM ledger GROUP BY m ORDER BY m DESC",
        true,
    ),
    (
        "SELECT account, YEAR(day), SUM(amount) FROM ledger WHERE day >= '2024-03-01' \
         GROUP BY account, YEAR(day)",
        true,
    ),
    (
        "SELECT id, day, amount FROM ledger ORDER BY amount DESC, id LIMIT 5 OFFSET 3",
        true,
    ),
    (
        "SELECT id, account FROM ledger ORDER BY account, id LIMIT 7",
        true,
    ),
    (
        "SELECT ledger.* FROM ledger ORDER BY day, id LIMIT 2, 6",
        true,
    ),
    ("SELECT DISTINCT account FROM ledger ORDER BY account", true),
    ("SELECT DISTINCT YEAR(day) AS y, note FROM ledger", false),
    (
        "SELECT * FROM ledger WHERE day BETWEEN '2024-02-01' AND '2024-08-31' ORDER BY id",
        true,
    ),
    ("SELECT id, note FROM ledger WHERE note IS NULL", false),
    (
        "SELECT l.id, l.day FROM ledger AS l ORDER BY l.day DESC, l.id",
        true,
    ),
];

async fn compare_reads(s: &mut Setup, when: &str) {
    for &(sql, ordered) in READS {
        let want: Vec<Row> = s.r.query(sql).await.expect("reference read");
        let got: Vec<Row> = match s.c.query(sql).await {
            Ok(rows) => rows,
            Err(e) => panic!("{sql} ({when}): {e}\n{}", s.shoal.log()),
        };
        assert!(!want.is_empty(), "{sql}: no rows to compare");
        assert_eq!(
            answer(got, ordered, &s.reference),
            answer(want, ordered, &s.reference),
            "{sql} ({when})"
        );
    }
}

/// Rows inserted, updated and deleted in the open transaction (over several quarters, so
/// several physical tables of each datanode), on both sides.
async fn write_in_transaction(s: &mut Setup) {
    let writes = [
        "INSERT INTO ledger (id, day, account, amount, note) VALUES \
         (101, '2024-01-05', 'acme', 999.99, 'new'), (102, '2024-04-05', 'bolt', 0.01, NULL), \
         (103, '2024-07-05', 'core', 12.00, 'new'), (104, '2024-10-05', 'acme', 5.50, NULL), \
         (105, '2025-01-05', 'zeta', 77.70, 'new'), (106, '2025-11-05', 'zeta', NULL, 'new')",
        "UPDATE ledger SET amount = amount + 1 WHERE id % 5 = 0",
        "DELETE FROM ledger WHERE id % 7 = 3",
    ];
    for w in writes {
        s.c.query_drop(w)
            .await
            .unwrap_or_else(|e| panic!("{w}: {e}\n{}", s.shoal.log()));
        s.r.query_drop(w).await.expect("reference write");
    }
}

/// BEGIN, writes, reads (the writes visible), ROLLBACK, reads (gone); then the same with
/// COMMIT, and with autocommit=0.
#[tokio::test(flavor = "multi_thread")]
async fn text_reads_inside_transactions_see_their_own_writes() {
    let mut s = setup("tt").await;
    compare_reads(&mut s, "no transaction").await;

    for q in ["BEGIN"] {
        s.c.query_drop(q).await.unwrap();
        s.r.query_drop(q).await.unwrap();
    }
    compare_reads(&mut s, "BEGIN, nothing written").await;
    write_in_transaction(&mut s).await;
    compare_reads(&mut s, "BEGIN, own writes").await;
    s.c.query_drop("ROLLBACK").await.unwrap();
    s.r.query_drop("ROLLBACK").await.unwrap();
    compare_reads(&mut s, "after ROLLBACK").await;

    for q in ["SET autocommit = 0"] {
        s.c.query_drop(q).await.unwrap();
        s.r.query_drop(q).await.unwrap();
    }
    compare_reads(&mut s, "autocommit=0").await;
    write_in_transaction(&mut s).await;
    compare_reads(&mut s, "autocommit=0, own writes").await;
    s.c.query_drop("COMMIT").await.unwrap();
    s.r.query_drop("COMMIT").await.unwrap();
    s.c.query_drop("SET autocommit = 1").await.unwrap();
    s.r.query_drop("SET autocommit = 1").await.unwrap();
    compare_reads(&mut s, "after COMMIT").await;

    // Another session sees the committed rows, and not a later transaction's.
    let mut other = Conn::new(s.shoal.opts_as("app", "app-secret", Some("shop")))
        .await
        .unwrap();
    s.c.query_drop("START TRANSACTION").await.unwrap();
    s.c.query_drop("DELETE FROM ledger WHERE account = 'zeta'")
        .await
        .unwrap();
    let mine: Option<i64> =
        s.c.query_first("SELECT COUNT(*) FROM ledger WHERE account = 'zeta'")
            .await
            .unwrap();
    let theirs: Option<i64> = other
        .query_first("SELECT COUNT(*) FROM ledger WHERE account = 'zeta'")
        .await
        .unwrap();
    assert_eq!((mine, theirs), (Some(0), Some(2)));
    s.c.query_drop("ROLLBACK").await.unwrap();
}

/// Prepared reads inside a transaction: the arms' parameters are each bound.
#[tokio::test(flavor = "multi_thread")]
async fn prepared_reads_inside_transactions() {
    let mut s = setup("tp").await;
    let reads: Vec<(&str, Vec<Value>, bool)> = vec![
        (
            "SELECT COUNT(*) FROM ledger WHERE amount > ?",
            vec![100.into()],
            true,
        ),
        (
            "SELECT account, COUNT(*), SUM(amount), AVG(amount) FROM ledger WHERE day >= ? \
             GROUP BY account",
            vec!["2024-05-01".into()],
            true,
        ),
        (
            "SELECT id, amount FROM ledger WHERE amount > ? AND account <> ? \
             ORDER BY amount DESC, id LIMIT ?",
            vec![50.into(), "bolt".into(), 6.into()],
            true,
        ),
        (
            "SELECT id, day FROM ledger WHERE day BETWEEN ? AND ? ORDER BY day, id LIMIT 3, 4",
            vec!["2024-02-01".into(), "2025-02-01".into()],
            true,
        ),
        (
            "SELECT DISTINCT account FROM ledger WHERE id > ? ORDER BY account",
            vec![3.into()],
            true,
        ),
        (
            "SELECT id, ? AS tag FROM ledger WHERE id < ?",
            vec![7.into(), 20.into()],
            false,
        ),
    ];
    for round in ["BEGIN", "own writes", "autocommit=0"] {
        match round {
            "BEGIN" => {
                s.c.query_drop("BEGIN").await.unwrap();
                s.r.query_drop("BEGIN").await.unwrap();
            }
            "own writes" => write_in_transaction(&mut s).await,
            _ => {
                s.c.query_drop("ROLLBACK").await.unwrap();
                s.r.query_drop("ROLLBACK").await.unwrap();
                s.c.query_drop("SET autocommit = 0").await.unwrap();
                s.r.query_drop("SET autocommit = 0").await.unwrap();
                write_in_transaction(&mut s).await;
            }
        }
        for (sql, params, ordered) in &reads {
            let want: Vec<Row> = s.r.exec(*sql, params.clone()).await.expect("reference");
            let got: Vec<Row> = match s.c.exec(*sql, params.clone()).await {
                Ok(rows) => rows,
                Err(e) => panic!("{sql} ({round}): {e}\n{}", s.shoal.log()),
            };
            assert!(!want.is_empty(), "{sql}: no rows to compare");
            assert_eq!(
                answer(got, *ordered, &s.reference),
                answer(want, *ordered, &s.reference),
                "{sql} ({round}, prepared)"
            );
        }
    }
    s.c.query_drop("ROLLBACK").await.unwrap();
}

/// A GROUP BY on a string expression over several tables of one datanode cannot be checked
/// against the collation the server grouped with: refused inside a transaction (answered
/// outside one).
#[tokio::test(flavor = "multi_thread")]
async fn string_expression_groups_inside_transactions_are_refused() {
    let mut s = setup("ts").await;
    let sql = "SELECT UPPER(account) AS u, COUNT(*) FROM ledger GROUP BY u";
    let want: Vec<(String, i64)> = s.r.query(sql).await.unwrap();
    let got: Vec<(String, i64)> = s.c.query(sql).await.unwrap();
    assert_eq!(got, want);
    s.c.query_drop("BEGIN").await.unwrap();
    match s.c.query::<Row, _>(sql).await {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!(e.code, 1235, "{}", e.message);
            assert!(e.message.contains("string expression"), "{}", e.message);
        }
        other => panic!("{sql}: {other:?}"),
    }
    // MariaDB takes no HIGH_PRIORITY in a UNION member: refused, naming it.
    let hp = "SELECT HIGH_PRIORITY COUNT(*) FROM ledger";
    match s.c.query::<Row, _>(hp).await {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!(e.code, 1235, "{}", e.message);
            assert!(
                e.message.contains("HIGH_PRIORITY in a read"),
                "{}",
                e.message
            );
        }
        other => panic!("{hp}: {other:?}"),
    }
    // A statement MariaDB rejects: its error, in logical names.
    let bad = "SELECT ledger.nosuch FROM ledger";
    match s.c.query::<Row, _>(bad).await {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!(e.code, 1054, "{}", e.message);
            assert!(!e.message.contains("ledger_0"), "{}", e.message);
        }
        other => panic!("{bad}: {other:?}"),
    }
    // The transaction goes on; a locking read too.
    let n: Option<i64> =
        s.c.query_first("SELECT COUNT(*) FROM ledger")
            .await
            .unwrap();
    assert_eq!(n, Some(48));
    let locking = "SELECT id FROM ledger WHERE amount > 400 ORDER BY id FOR UPDATE";
    let ids: Vec<i64> = s.c.query(locking).await.unwrap();
    let want: Vec<i64> = s.r.query(locking).await.unwrap();
    assert!(!want.is_empty());
    assert_eq!(ids, want);
    s.c.query_drop("COMMIT").await.unwrap();
}
