//! Issue 22's differential findings, checked through Shoal against one plain MariaDB database
//! holding the same rows: result column definitions carry logical names (a table-per-shard
//! table's physical name and a datanode's database never reach the client), and prepared
//! statements whose shard key is a date-ruled DATETIME bound as a temporal value or a string
//! are planned, land on their shard and read back as MariaDB reads them.

use mysql_async::prelude::Queryable;
use mysql_async::{Column, Conn, Row, Value};
use shoal_tests::{Backend, ShoalProcess, scratch_dir, unique_name};

/// Shoal over `{prefix}_1..4` (dn1..dn4) of one server: `logs` as 4 tables `logs_00..03` on
/// dn1 and dn2 (mod on `id`), `events` by quarter of `created` from 2024-01-01 over dn1..dn4;
/// unlisted tables on dn1.
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
  - {{ name: by_id, algorithm: mod }}
  - {{ name: by_quarter, algorithm: date, start: 2024-01-01, unit: month, interval: 3 }}
schemas:
  - name: shop
    default_datanode: dn1
    tables:
      - {{ name: logs, type: sharded, shard_key: id, rule: by_id, datanodes: dn$1-2,
          tables_per_datanode: 2, physical_name: \"logs_{{index:02}}\" }}
      - {{ name: events, type: sharded, shard_key: created, rule: by_quarter, datanodes: dn$1-4 }}
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
    /// The reference: one plain database with the same tables and rows.
    r: Conn,
    reference: String,
}

async fn setup(tag: &str, ddl: &[&str]) -> Setup {
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
    for d in ddl {
        c.query_drop(*d)
            .await
            .unwrap_or_else(|e| panic!("{d}: {e}\n{}", shoal.log()));
        r.query_drop(*d).await.expect("reference DDL");
    }
    Setup {
        _cluster,
        backend,
        prefix,
        shoal,
        c,
        r,
        reference,
    }
}

/// What a client sees of a column: name, table (alias), original table, schema, original name.
fn described(c: &Column) -> [String; 5] {
    [
        c.name_str().into_owned(),
        c.table_str().into_owned(),
        c.org_table_str().into_owned(),
        c.schema_str().into_owned(),
        c.org_name_str().into_owned(),
    ]
}

/// The reference's description with its database named as the logical schema.
fn as_logical(cols: &[Column], reference: &str) -> Vec<[String; 5]> {
    cols.iter()
        .map(|c| {
            let mut d = described(c);
            if d[3] == reference {
                d[3] = "shop".into();
            }
            d
        })
        .collect()
}

fn columns_of(rows: &[Row]) -> Vec<Column> {
    rows.first()
        .map(|r| r.columns_ref().to_vec())
        .unwrap_or_default()
}

fn values(rows: Vec<Row>) -> Vec<Vec<Value>> {
    rows.into_iter().map(Row::unwrap).collect()
}

/// Column names, tables and schemas in logical names, as one MariaDB holding the rows names
/// them: single-datanode relays, scattered merges, and prepared statements' PREPARE and
/// EXECUTE responses.
#[tokio::test(flavor = "multi_thread")]
async fn result_columns_carry_logical_names() {
    let mut s = setup(
        "rn",
        &["CREATE TABLE logs (id INT PRIMARY KEY, lvl VARCHAR(5), msg VARCHAR(20))"],
    )
    .await;
    let insert = "INSERT INTO logs (id, lvl, msg) VALUES (1, 'info', 'a1'), (2, 'warn', 'b2'), \
                  (3, 'info', 'c3'), (4, 'err', 'd4'), (5, 'warn', 'e5'), (6, 'info', 'f6'), \
                  (7, 'err', 'g7'), (8, 'info', 'h8')";
    s.c.query_drop(insert).await.expect("insert through shoal");
    s.r.query_drop(insert).await.expect("insert reference");
    s.r.query_drop("CREATE TABLE notes (id INT, body VARCHAR(10))")
        .await
        .unwrap();
    let mut d1 = s.backend.conn(Some(&format!("{}_1", s.prefix))).await;
    d1.query_drop("CREATE TABLE notes (id INT, body VARCHAR(10))")
        .await
        .unwrap();
    for q in ["INSERT INTO notes VALUES (1, 'x')"] {
        d1.query_drop(q).await.unwrap();
        s.r.query_drop(q).await.unwrap();
    }
    // (sql, ordered): every one compared rows and column definitions.
    let queries = [
        // One datanode, one physical table (id 5: logs_01 on dn2... whichever: one table).
        "SELECT logs.lvl, MIN(logs.msg) FROM logs WHERE id = 5 GROUP BY 1",
        "SELECT logs.*, msg AS m FROM logs WHERE id = 6",
        "SELECT l.lvl, l.msg FROM logs l WHERE id = 2",
        "SELECT id, UPPER(msg) FROM logs WHERE id = 3",
        // Scattered over the four physical tables.
        "SELECT logs.lvl, MIN(logs.msg) FROM logs GROUP BY 1",
        "SELECT id, msg FROM logs ORDER BY id",
        "SELECT l.lvl, COUNT(*) AS n FROM logs AS l GROUP BY l.lvl ORDER BY n DESC, l.lvl",
        "SELECT logs.id, logs.lvl FROM logs WHERE logs.id IN (1, 2, 7) ORDER BY logs.id",
        // Select-list aliases in GROUP BY / HAVING / ORDER BY across shards (class 3).
        "SELECT UPPER(lvl) AS ul, COUNT(*) FROM logs GROUP BY ul ORDER BY ul",
        "SELECT id % 3 AS m3, COUNT(*) AS n FROM logs GROUP BY m3 HAVING m3 > 0 ORDER BY m3 DESC",
        "SELECT LENGTH(lvl) AS lvl, MIN(id) AS lo FROM logs GROUP BY lvl ORDER BY lvl, lo",
        // An unlisted table on the default datanode.
        "SELECT notes.id, body FROM notes",
    ];
    for sql in queries {
        let want: Vec<Row> = s.r.query(sql).await.unwrap();
        let got: Vec<Row> = match s.c.query(sql).await {
            Ok(rows) => rows,
            Err(e) => panic!("{sql}: {e}\n{}", s.shoal.log()),
        };
        assert!(!want.is_empty(), "{sql}: no rows to compare");
        assert_eq!(
            columns_of(&got).iter().map(described).collect::<Vec<_>>(),
            as_logical(&columns_of(&want), &s.reference),
            "{sql} (text)"
        );
        assert_eq!(values(got), values(want.clone()), "{sql} (text)");

        // Prepared: the PREPARE response's columns and the EXECUTE's.
        let ps = s.c.prep(sql).await.expect("prepare through shoal");
        let rs = s.r.prep(sql).await.expect("prepare reference");
        assert_eq!(
            ps.columns().iter().map(described).collect::<Vec<_>>(),
            as_logical(&rs.columns(), &s.reference),
            "{sql} (prepare)"
        );
        let got: Vec<Row> = s.c.exec(&ps, ()).await.expect("execute through shoal");
        let want_b: Vec<Row> = s.r.exec(&rs, ()).await.expect("execute reference");
        assert_eq!(
            columns_of(&got).iter().map(described).collect::<Vec<_>>(),
            as_logical(&columns_of(&want_b), &s.reference),
            "{sql} (execute)"
        );
        assert_eq!(values(got), values(want_b), "{sql} (execute)");
    }
}

/// A prepared INSERT into a date-ruled table with the shard key bound as a binary DATETIME
/// (with and without microseconds, midnight) or as a string is planned, lands on its quarter's
/// datanode, and prepared reads by that key (=, IN, BETWEEN) answer as MariaDB does.
#[tokio::test(flavor = "multi_thread")]
async fn prepared_date_shard_keys_bound_as_temporal_values_or_strings() {
    let mut s = setup(
        "pd",
        &[
            "CREATE TABLE events (id INT PRIMARY KEY, created DATETIME(6), kind VARCHAR(10), \
           severity INT)",
        ],
    )
    .await;
    let insert = "INSERT INTO events (id, created, kind, severity) VALUES (?, ?, ?, ?)";
    // (id, bound created, its quarter's datanode)
    let rows: Vec<(i64, Value, usize)> = vec![
        (1, Value::Date(2024, 9, 1, 0, 0, 0, 0), 3),
        (2, Value::Date(2024, 2, 3, 4, 5, 6, 789), 1),
        (3, Value::Date(2024, 11, 5, 23, 59, 59, 0), 4),
        (4, Value::from("2024-05-02 10:00:00"), 2),
        (5, Value::from("2024-06-30"), 2),
        (6, Value::from("2024-12-31 23:59:59.999999"), 4),
    ];
    for (id, created, _) in &rows {
        let params = vec![
            Value::from(*id),
            created.clone(),
            Value::from("k"),
            Value::from(*id * 10),
        ];
        if let Err(e) = s.c.exec_drop(insert, params.clone()).await {
            panic!("{insert} with {created:?}: {e}\n{}", s.shoal.log());
        }
        s.r.exec_drop(insert, params)
            .await
            .expect("reference insert");
    }
    for (id, created, dn) in &rows {
        let mut d = s.backend.conn(Some(&format!("{}_{dn}", s.prefix))).await;
        let n: Option<i64> = d
            .exec_first("SELECT COUNT(*) FROM events WHERE id = ?", (*id,))
            .await
            .unwrap();
        assert_eq!(n, Some(1), "id {id} ({created:?}) on dn{dn}");
    }
    let reads: Vec<(&str, Vec<Value>)> = vec![
        (
            "SELECT id, created FROM events WHERE created = ?",
            vec![Value::Date(2024, 9, 1, 0, 0, 0, 0)],
        ),
        (
            "SELECT id, created FROM events WHERE created = ?",
            vec![Value::Date(2024, 2, 3, 4, 5, 6, 789)],
        ),
        (
            "SELECT id FROM events WHERE created = ?",
            vec![Value::from("2024-05-02 10:00:00")],
        ),
        (
            "SELECT id FROM events WHERE created IN (?, ?) ORDER BY id",
            vec![
                Value::Date(2024, 11, 5, 23, 59, 59, 0),
                Value::from("2024-06-30"),
            ],
        ),
        (
            "SELECT id FROM events WHERE created BETWEEN ? AND ? ORDER BY id",
            vec![
                Value::Date(2024, 5, 1, 0, 0, 0, 0),
                Value::Date(2024, 11, 30, 0, 0, 0, 0),
            ],
        ),
        (
            "SELECT id FROM events WHERE created BETWEEN ? AND ? ORDER BY id",
            vec![
                Value::from("2024-01-01"),
                Value::from("2024-12-31 23:59:59.999999"),
            ],
        ),
    ];
    for (sql, params) in reads {
        let want: Vec<Row> = s.r.exec(sql, params.clone()).await.unwrap();
        let got: Vec<Row> = match s.c.exec(sql, params.clone()).await {
            Ok(rows) => rows,
            Err(e) => panic!("{sql} {params:?}: {e}\n{}", s.shoal.log()),
        };
        assert!(!want.is_empty(), "{sql} {params:?}: no rows to compare");
        assert_eq!(values(got), values(want), "{sql} {params:?}");
    }
}
