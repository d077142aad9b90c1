//! Backend errors in the logical namespace (issue 21): a datanode's server names its physical
//! database and, for table-per-shard tables, the physical table; the client must get what one
//! MariaDB holding the logical schema answers. Every statement runs on Shoal and on a plain
//! database named like the logical schema, text and prepared, and the errors are compared; no
//! message may carry a physical name.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params};
use shoal_tests::{
    Backend, ShoalProcess, app_on_shared_backend, scratch_dir, server_error, shared_backend,
    shared_backend_layout, unique_name,
};

/// Schema `<p>` over datanodes `<p>_1`, `<p>_2` (orders by id mod 2, the global country, ledger
/// as ledger_0..ledger_3) with unlisted tables on `<p>_m`; `<p>` itself is the reference.
struct Setup {
    schema: String,
    shoal: ShoalProcess,
    backend: Backend,
}

impl Setup {
    async fn start() -> Setup {
        let backend = shared_backend();
        let (p, shoal) = shared_backend_layout(
            &backend,
            "ns",
            "      - { name: orders, type: sharded, shard_key: id, rule: by_id, datanodes: \"dn1, dn2\" }
      - { name: country, type: global, datanodes: \"dn1, dn2\" }
      - { name: ledger, type: sharded, shard_key: id, rule: by_id, datanodes: \"dn1, dn2\",
          tables_per_datanode: 2, physical_name: \"ledger_{index}\" }
",
        )
        .await;
        // The unsharded reference, under the logical schema's own name.
        backend.fresh_db(&p).await;
        Setup {
            schema: p,
            shoal,
            backend,
        }
    }

    async fn shoal(&self) -> Conn {
        Conn::new(self.shoal.opts_as("app", "app-secret", Some(&self.schema)))
            .await
            .unwrap_or_else(|e| panic!("connect through shoal: {e}\n{}", self.shoal.log()))
    }

    /// Names a client must never see.
    fn physical(&self) -> Vec<String> {
        let p = &self.schema;
        let mut v = vec![format!("{p}_1"), format!("{p}_2"), format!("{p}_m")];
        v.extend((0..4).map(|i| format!("ledger_{i}")));
        v
    }

    fn assert_logical(&self, what: &str, message: &str) {
        for name in self.physical() {
            assert!(
                !message.contains(&name),
                "{what}: the message names {name}: {message}"
            );
        }
    }
}

/// The error of `sql` (text, or prepared with `params`) on `c`.
async fn error_of(c: &mut Conn, sql: &str, params: Option<Params>) -> (u16, String, String) {
    match params {
        None => server_error(c.query_drop(sql).await),
        Some(p) => server_error(c.exec_drop(sql, p).await),
    }
}

/// Runs `sql` both ways on Shoal and on the reference: the same error, in logical names.
async fn same_error(s: &Setup, shoal: &mut Conn, one: &mut Conn, sql: &str, params: Params) {
    for prepared in [false, true] {
        let p = prepared.then(|| params.clone());
        let want = error_of(one, sql, p.clone()).await;
        let got = error_of(shoal, sql, p).await;
        let how = if prepared { "prepared" } else { "text" };
        assert_eq!(got, want, "{how} {sql}\n{}", s.shoal.log());
        s.assert_logical(sql, &got.2);
    }
}

#[tokio::test]
async fn backend_errors_name_the_logical_schema_and_tables() {
    let s = Setup::start().await;
    let mut c = s.shoal().await;
    let mut one = s.backend.conn(Some(&s.schema)).await;
    for sql in [
        "CREATE TABLE orders (id INT PRIMARY KEY, name VARCHAR(40), UNIQUE KEY u_name (name))",
        "CREATE TABLE country (code CHAR(2) PRIMARY KEY, name VARCHAR(40))",
        "CREATE TABLE ledger (id INT PRIMARY KEY, amount INT)",
        "INSERT INTO orders (id, name) VALUES (1, 'one'), (2, 'two')",
        "INSERT INTO ledger (id, amount) VALUES (1, 10), (2, 20)",
        "INSERT INTO country (code, name) VALUES ('FR', 'France')",
    ] {
        c.query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", s.shoal.log()));
        one.query_drop(sql).await.unwrap();
    }
    let p = s.schema.clone();
    let none = Params::Empty;
    // Unknown columns: one shard, every shard, a table-per-shard table (physical table name).
    for sql in [
        "SELECT orders.nope FROM orders WHERE id = 1",
        "SELECT orders.nope FROM orders",
        "SELECT ledger.nope FROM ledger WHERE id = 1",
        "SELECT ledger.nope FROM ledger",
        "SELECT nope FROM ledger WHERE id = 2",
        "UPDATE ledger SET nope = 1 WHERE id = 1",
    ] {
        same_error(&s, &mut c, &mut one, sql, none.clone()).await;
    }
    for sql in [
        format!("SELECT {p}.orders.nope FROM orders WHERE id = 1"),
        format!("SELECT {p}.ledger.nope FROM ledger WHERE id = 1"),
        format!("SELECT {p}.ledger.nope FROM ledger"),
    ] {
        same_error(&s, &mut c, &mut one, &sql, none.clone()).await;
    }
    // A duplicate key on a sharded table; the value is the physical database's name, and
    // values are never rewritten.
    same_error(
        &s,
        &mut c,
        &mut one,
        "INSERT INTO orders (id, name) VALUES (3, 'one')",
        none.clone(),
    )
    .await;
    let dup = format!("INSERT INTO orders (id, name) VALUES (5, '{p}_1')");
    c.query_drop(&dup).await.unwrap();
    one.query_drop(&dup).await.unwrap();
    let again = format!("INSERT INTO orders (id, name) VALUES (7, '{p}_1')");
    let want = error_of(&mut one, &again, None).await;
    assert_eq!(error_of(&mut c, &again, None).await, want);
    assert_eq!(
        error_of(
            &mut c,
            "INSERT INTO orders (id, name) VALUES (?, ?)",
            Some((7, format!("{p}_1")).into())
        )
        .await,
        want
    );
    // An unknown table, on the default datanode.
    same_error(
        &s,
        &mut c,
        &mut one,
        "SELECT * FROM no_such_table",
        none.clone(),
    )
    .await;

    // A DDL broadcast failing on one datanode of two: Shoal's own message, with the backend's
    // text in logical names.
    let mut d1 = s.backend.conn(Some(&format!("{p}_1"))).await;
    d1.query_drop("DROP TABLE country").await.unwrap();
    let (code, _, message) = error_of(&mut c, "DROP TABLE country", None).await;
    assert_eq!(code, 1051, "{message}");
    assert!(
        message.contains(&format!("Unknown table '{p}.country'")),
        "{message}"
    );
    s.assert_logical("DROP TABLE country (partial)", &message);
    one.query_drop("DROP TABLE country").await.unwrap();
    // Dropped tables: sharded, global, table-per-shard; then a DDL failing everywhere.
    for t in ["orders", "ledger"] {
        let drop = format!("DROP TABLE {t}");
        c.query_drop(&drop).await.unwrap();
        one.query_drop(&drop).await.unwrap();
    }
    for sql in [
        "SELECT * FROM orders",
        "SELECT * FROM orders WHERE id = 1",
        "SELECT * FROM country",
        "SELECT * FROM ledger",
        "SELECT * FROM ledger WHERE id = 3",
        "INSERT INTO country (code, name) VALUES ('DE', 'Germany')",
    ] {
        same_error(&s, &mut c, &mut one, sql, none.clone()).await;
    }
    // Inside a transaction: Shoal's own message (the transaction is rolled back on every
    // datanode), the backends' text in logical names.
    c.query_drop("BEGIN").await.unwrap();
    let (code, _, message) = error_of(
        &mut c,
        "INSERT INTO country (code, name) VALUES ('DE', 'Germany')",
        None,
    )
    .await;
    assert_eq!(code, 1146, "{message}");
    assert!(
        message.contains(&format!("Table '{p}.country' doesn't exist")),
        "{message}"
    );
    s.assert_logical("a global write in a transaction", &message);
    c.query_drop("ROLLBACK").await.unwrap();
    for sql in [
        "DROP TABLE orders",
        "DROP TABLE ledger",
        "DROP TABLE country",
    ] {
        let want = error_of(&mut one, sql, None).await;
        let got = error_of(&mut c, sql, None).await;
        assert_eq!(got, want, "{sql}\n{}", s.shoal.log());
    }
    c.disconnect().await.unwrap();
    for db in [format!("{p}_1"), format!("{p}_2"), format!("{p}_m"), p] {
        one.query_drop(format!("DROP DATABASE `{db}`"))
            .await
            .unwrap();
    }
}

/// A config file served without the router (one datanode, no listed tables) whose schema is
/// stored under another name: relayed errors name the schema, as with the router.
#[tokio::test]
async fn relayed_errors_name_the_schema_without_the_router() {
    let backend = shared_backend();
    let p = unique_name("nsr");
    let physical = format!("{p}_db");
    for db in [&physical, &p] {
        backend.fresh_db(db).await;
    }
    let path = scratch_dir().join(format!("{p}.yaml"));
    std::fs::write(
        &path,
        format!(
            "{head}datanodes:
  - {{ name: dn1, datahost: dh1, database: {physical} }}
schemas:
  - {{ name: {p}, default_datanode: dn1 }}
",
            head = app_on_shared_backend(&backend, &p),
        ),
    )
    .expect("write config");
    let shoal = ShoalProcess::start(&["--config".to_string(), path.display().to_string()]);
    let mut c = Conn::new(shoal.opts_as("app", "app-secret", Some(&p)))
        .await
        .unwrap_or_else(|e| panic!("connect through shoal: {e}\n{}", shoal.log()));
    let mut one = backend.conn(Some(&p)).await;
    for sql in ["SELECT * FROM no_such_table", "DROP TABLE no_such_table"] {
        for prepared in [false, true] {
            let params = prepared.then_some(Params::Empty);
            let want = error_of(&mut one, sql, params.clone()).await;
            let got = error_of(&mut c, sql, params).await;
            assert_eq!(got, want, "{sql} (prepared: {prepared})\n{}", shoal.log());
            assert!(!got.2.contains(&physical), "{}", got.2);
        }
    }
    c.disconnect().await.unwrap();
    for db in [physical, p] {
        one.query_drop(format!("DROP DATABASE `{db}`"))
            .await
            .unwrap();
    }
}
