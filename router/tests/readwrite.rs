//! Golden cases of read/write splitting (`router/tests/golden/readwrite.rw`): for each
//! statement, whether it may read from a replica and, if not, why.
//!
//! Format: `=== comment`, the SQL (one or more lines), `---`, the expected route as
//! [`ReadRoute::describe`] renders it. `SHOAL_GOLDEN_UPDATE=1` rewrites the expectations.

use std::fs;
use std::path::Path;

use shoal_router::sql::readwrite::{mycat_hint_len, read_only_violation, read_route};
use shoal_router::sql::{DEFAULT_SERVER_VERSION, SqlMode};

#[test]
fn golden_read_routes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/readwrite.rw");
    let text = fs::read_to_string(&path).expect("read readwrite.rw");
    let update = std::env::var("SHOAL_GOLDEN_UPDATE").is_ok_and(|v| v == "1");
    let mut out = String::new();
    let mut failures = Vec::new();
    let mut total = 0;
    for block in text.split("\n=== ").map(|b| b.trim_start_matches("=== ")) {
        if block.trim().is_empty() {
            continue;
        }
        let (head, expected) = block.split_once("\n---\n").expect("a --- line");
        let (comment, sql) = head.split_once('\n').expect("a comment line, then SQL");
        let expected = expected.trim();
        let actual = read_route(sql, SqlMode::default(), DEFAULT_SERVER_VERSION).describe();
        total += 1;
        if actual != expected {
            failures.push(format!(
                "`{comment}`: {sql}\n  expected {expected}\n  actual   {actual}"
            ));
        }
        out.push_str(&format!("=== {comment}\n{sql}\n---\n{actual}\n\n"));
    }
    if update {
        fs::write(&path, out).expect("write readwrite.rw");
        return;
    }
    assert!(total >= 40, "only {total} cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn mycat_hints_are_cut_before_sending() {
    let sql = "/*!mycat:db_type=master*/ SELECT 1";
    assert_eq!(&sql[mycat_hint_len(sql).unwrap()..], " SELECT 1");
    let sql = " /*#mycat:db_type=master*/ /*!mycat:db_type=slave*/SELECT 2";
    assert_eq!(&sql[mycat_hint_len(sql).unwrap()..], "SELECT 2");
    assert_eq!(mycat_hint_len("SELECT /*!mycat:db_type=master*/ 1"), None);
    assert_eq!(mycat_hint_len("/*!mycat:db_type=master"), None);
    assert_eq!(mycat_hint_len("/*+ shoal:primary */ SELECT 1"), None);
}

#[test]
fn read_only_users_may_only_read() {
    let check = |sql: &str| read_only_violation(sql, SqlMode::default(), DEFAULT_SERVER_VERSION);
    for ok in [
        "SELECT * FROM orders",
        "select 1; select 2",
        "SHOW TABLES",
        "USE shop",
        "SET NAMES utf8mb4",
        "SET autocommit = 0, @x = 1",
        "SET SESSION TRANSACTION READ ONLY",
        "BEGIN",
        "START TRANSACTION READ ONLY",
        "COMMIT",
        "ROLLBACK",
        "EXPLAIN SELECT 1",
        "DESC orders",
        "/*!mycat:db_type=master*/ SELECT 1",
        "",
    ] {
        assert_eq!(check(ok), None, "{ok}");
    }
    for (bad, what) in [
        ("INSERT INTO orders VALUES (1)", "INSERT"),
        ("update orders set x = 1", "UPDATE"),
        ("DELETE FROM orders", "DELETE"),
        ("REPLACE INTO orders VALUES (1)", "REPLACE"),
        ("SELECT 1; DELETE FROM orders", "DELETE"),
        ("CREATE TABLE t (id INT)", "CREATE"),
        ("DROP TABLE orders", "DROP"),
        ("TRUNCATE orders", "TRUNCATE"),
        ("CALL p()", "CALL"),
        ("DO 1", "DO"),
        ("LOAD DATA INFILE 'x' INTO TABLE t", "LOAD"),
        ("SET GLOBAL read_only = 0", "SET GLOBAL"),
        (
            "SELECT * FROM orders INTO OUTFILE '/tmp/x'",
            "SELECT ... INTO",
        ),
        ("PREPARE s FROM 'DELETE FROM orders'", "PREPARE"),
        ("LOCK TABLES orders WRITE", "LOCK"),
        ("EXPLAIN DELETE FROM orders", "EXPLAIN"),
        ("GRANT ALL ON *.* TO x", "GRANT"),
        (
            "/*+ shoal:replica */ INSERT INTO orders VALUES (1)",
            "INSERT",
        ),
    ] {
        let v = check(bad);
        assert!(
            v.as_deref().is_some_and(|v| v.contains(what)),
            "{bad}: {v:?}"
        );
    }
}
