//! Clients whose connection character set is not UTF-8 (issue 50), through a sharded Shoal: a
//! gbk client writes rows with Chinese shard keys and other columns and a utf8mb4 client reads
//! them by key, and the reverse; a latin1 client the same with 'café'; prepared statements with
//! gbk string parameters and gbk text. Every statement runs on Shoal and, the same bytes, on one
//! MariaDB database (the reference); their answers must be equal, and every key must be stored
//! exactly once, on the datanode its lookups go to.
//!
//! Statements are written here in Rust (UTF-8) and sent as the bytes of the client's charset
//! (encoding_rs: GBK, windows-1252, which MariaDB's `latin1` is), as a real gbk or latin1 client
//! sends them; answers are compared as the raw values MariaDB sends.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Value};
use shoal_bench::cluster::Cluster;
use shoal_tests::{APP_USER, ShoalProcess, two_servers_and_shoal};

const REFERENCE_DB: &str = "ref";

const LAYOUT: &str = "datanodes:
  - { name: dn1, datahost: dh0, database: a }
  - { name: dn2, datahost: dh0, database: b }
  - { name: dn3, datahost: dh1, database: a }
  - { name: dn4, datahost: dh1, database: b }
rules:
  - { name: by_name, algorithm: hash, key_type: string, collation: general_ci }
schemas:
  - name: shop
    default_datanode: dn1
    tables:
      - { name: customers, type: sharded, shard_key: name, rule: by_name, datanodes: \"dn1, dn2, dn3, dn4\" }
";

const DDL: &str = "CREATE TABLE customers (name VARCHAR(20) NOT NULL PRIMARY KEY, \
                   city VARCHAR(20), note VARCHAR(40), n INT) \
                   ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Cs {
    Utf8mb4,
    Gbk,
    Latin1,
}

impl Cs {
    fn encode(self, text: &str) -> Vec<u8> {
        let enc = match self {
            Cs::Utf8mb4 => return text.as_bytes().to_vec(),
            Cs::Gbk => encoding_rs::GBK,
            Cs::Latin1 => encoding_rs::WINDOWS_1252,
        };
        let (bytes, _, unmappable) = enc.encode(text);
        assert!(!unmappable, "{text:?} is not representable in {self:?}");
        bytes.into_owned()
    }

    fn names(self) -> &'static str {
        match self {
            Cs::Utf8mb4 => "SET NAMES utf8mb4",
            Cs::Gbk => "SET NAMES gbk",
            Cs::Latin1 => "SET NAMES latin1",
        }
    }
}

/// What a statement answered: its rows (raw values) and affected rows, or its error.
#[derive(Debug, PartialEq)]
enum Answer {
    Rows(Vec<Vec<Value>>, u64),
    Error(u16, String),
}

/// One client of the same charset on Shoal and on the reference.
struct Pair {
    cs: Cs,
    shoal: Conn,
    reference: Conn,
}

struct Fixture {
    cluster: Cluster,
    shoal: ShoalProcess,
}

impl Fixture {
    async fn start() -> Fixture {
        let (cluster, shoal) =
            two_servers_and_shoal(&["a", "b", REFERENCE_DB], APP_USER, LAYOUT, "charsets").await;
        let f = Fixture { cluster, shoal };
        let mut p = f.pair(Cs::Utf8mb4).await;
        p.shoal
            .query_drop(DDL)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", f.shoal.log()));
        p.reference.query_drop(DDL).await.unwrap();
        f
    }

    async fn pair(&self, cs: Cs) -> Pair {
        let mut shoal = Conn::new(self.shoal.opts_as("app", "app-secret", Some("shop")))
            .await
            .unwrap_or_else(|e| panic!("connect through shoal: {e}\n{}", self.shoal.log()));
        let mut reference = Conn::new(self.cluster.opts(0, Some(REFERENCE_DB)))
            .await
            .unwrap();
        shoal.query_drop(cs.names()).await.unwrap();
        reference.query_drop(cs.names()).await.unwrap();
        Pair {
            cs,
            shoal,
            reference,
        }
    }

    /// Where each key is stored: (datanode database "server/db", name bytes as utf8mb4).
    async fn placement(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for server in 0..2 {
            for db in ["a", "b"] {
                let mut c = Conn::new(self.cluster.opts(server, Some(db)))
                    .await
                    .unwrap();
                c.query_drop("SET NAMES utf8mb4").await.unwrap();
                let names: Vec<String> = c.query("SELECT name FROM customers").await.unwrap();
                out.extend(names.into_iter().map(|n| (format!("{server}/{db}"), n)));
            }
        }
        out.sort();
        out
    }
}

async fn answer_text(c: &mut Conn, sql: &[u8]) -> Answer {
    match c.query::<mysql_async::Row, _>(sql).await {
        Ok(rows) => Answer::Rows(
            rows.into_iter().map(|r| r.unwrap()).collect(),
            c.affected_rows(),
        ),
        Err(mysql_async::Error::Server(e)) => Answer::Error(e.code, e.message),
        Err(e) => panic!("{}: {e}", String::from_utf8_lossy(sql)),
    }
}

async fn answer_prepared(c: &mut Conn, sql: &[u8], params: Vec<Value>) -> Answer {
    let stmt = match c.prep(sql).await {
        Ok(s) => s,
        Err(mysql_async::Error::Server(e)) => return Answer::Error(e.code, e.message),
        Err(e) => panic!("{}: {e}", String::from_utf8_lossy(sql)),
    };
    let result = c
        .exec::<mysql_async::Row, _, _>(&stmt, Params::Positional(params))
        .await;
    let answer = match result {
        Ok(rows) => Answer::Rows(
            rows.into_iter().map(|r| r.unwrap()).collect(),
            c.affected_rows(),
        ),
        Err(mysql_async::Error::Server(e)) => Answer::Error(e.code, e.message),
        Err(e) => panic!("{}: {e}", String::from_utf8_lossy(sql)),
    };
    c.close(stmt).await.unwrap();
    answer
}

impl Pair {
    /// Runs `sql` (written in UTF-8, sent in the pair's charset) on both; the answers must be
    /// equal and not an error. Returns the reference's answer.
    async fn same(&mut self, shoal: &ShoalProcess, sql: &str) -> Answer {
        let bytes = self.cs.encode(sql);
        let want = answer_text(&mut self.reference, &bytes).await;
        let got = answer_text(&mut self.shoal, &bytes).await;
        assert!(
            !matches!(want, Answer::Error(..)),
            "the reference refused {sql} ({:?}): {want:?}",
            self.cs
        );
        assert_eq!(
            got,
            want,
            "{:?} client: {sql}\nShoal's log:\n{}",
            self.cs,
            shoal.log()
        );
        want
    }

    /// [`Pair::same`] through the prepared protocol, string parameters sent in the charset.
    async fn same_prepared(&mut self, shoal: &ShoalProcess, sql: &str, params: &[&str]) -> Answer {
        let bytes = self.cs.encode(sql);
        let values: Vec<Value> = params
            .iter()
            .map(|p| match p.parse::<i64>() {
                Ok(i) => Value::Int(i),
                Err(_) => Value::Bytes(self.cs.encode(p)),
            })
            .collect();
        let want = answer_prepared(&mut self.reference, &bytes, values.clone()).await;
        let got = answer_prepared(&mut self.shoal, &bytes, values).await;
        assert!(
            !matches!(want, Answer::Error(..)),
            "the reference refused {sql} {params:?} ({:?}): {want:?}",
            self.cs
        );
        assert_eq!(
            got,
            want,
            "{:?} client, prepared: {sql} {params:?}\nShoal's log:\n{}",
            self.cs,
            shoal.log()
        );
        want
    }
}

fn row_count(a: &Answer) -> usize {
    match a {
        Answer::Rows(rows, _) => rows.len(),
        Answer::Error(..) => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gbk_and_latin1_clients_share_rows_with_utf8mb4_clients() {
    let f = Fixture::start().await;
    let sh = &f.shoal;
    let mut gbk = f.pair(Cs::Gbk).await;
    let mut utf8 = f.pair(Cs::Utf8mb4).await;
    let mut latin1 = f.pair(Cs::Latin1).await;

    // gbk writes: a multi-row INSERT over several shards (Shoal splits it and writes each
    // shard's part itself), and single rows (relayed as they are). '乗' and '嘰' end in the
    // byte 0x5C, a backslash only to a reader that does not know gbk.
    gbk.same(
        sh,
        "INSERT INTO customers (name, city, note, n) VALUES ('张伟', '北京', '第一位', 1), \
         ('李娜', '上海', '第二位', 2), ('王芳', '广州', '第三位', 3), ('刘洋', '深圳', '第四位', 4), \
         ('陈静', '杭州', '第五位', 5)",
    )
    .await;
    gbk.same(
        sh,
        "INSERT INTO customers (name, city, note, n) VALUES ('杨磊', '成都', '乗り', 6)",
    )
    .await;
    gbk.same(
        sh,
        "INSERT INTO customers (name, city, note, n) VALUES ('嘰乗', '嘰', 'it''s 乗', 7)",
    )
    .await;
    // gbk reads by key, by several keys, with a function of a gbk literal, and across shards.
    for sql in [
        "SELECT name, city, note, n FROM customers WHERE name = '张伟'",
        "SELECT name, city, note, n FROM customers WHERE name = '嘰乗'",
        "SELECT name, n FROM customers WHERE name IN ('李娜', '王芳', '没有') ORDER BY n",
        "SELECT LENGTH('张伟'), name, note FROM customers WHERE name = '杨磊'",
        "SELECT name, city, n FROM customers ORDER BY n",
        "SELECT COUNT(*) FROM customers WHERE city <> '北京'",
        // Merged across shards under the column's collation, its values sent in gbk.
        "SELECT name, city FROM customers WHERE n > 1 ORDER BY name",
        "SELECT DISTINCT city FROM customers ORDER BY city DESC",
    ] {
        gbk.same(sh, sql).await;
    }
    let one = gbk
        .same(sh, "SELECT n FROM customers WHERE name = '张伟'")
        .await;
    assert_eq!(row_count(&one), 1, "the gbk-written key is found in gbk");
    // utf8mb4 reads what gbk wrote, by key.
    for key in ["张伟", "李娜", "王芳", "刘洋", "陈静", "杨磊", "嘰乗"] {
        let a = utf8
            .same(
                sh,
                &format!("SELECT name, city, note, n FROM customers WHERE name = '{key}'"),
            )
            .await;
        assert_eq!(row_count(&a), 1, "utf8mb4 finds the gbk-written {key}");
    }
    // Writes by key in gbk, then read in utf8mb4.
    gbk.same(
        sh,
        "UPDATE customers SET note = '改过了', city = '苏州' WHERE name = '刘洋'",
    )
    .await;
    gbk.same(sh, "DELETE FROM customers WHERE name = '陈静'")
        .await;
    utf8.same(
        sh,
        "SELECT name, city, note FROM customers WHERE name IN ('刘洋', '陈静')",
    )
    .await;
    // The reverse: utf8mb4 writes, gbk reads by key.
    utf8.same(
        sh,
        "INSERT INTO customers (name, city, note, n) VALUES ('赵敏', '南京', 'utf8 写的', 8), \
         ('周杰', '重庆', '第九', 9)",
    )
    .await;
    for key in ["赵敏", "周杰"] {
        let a = gbk
            .same(
                sh,
                &format!("SELECT name, city, note, n FROM customers WHERE name = '{key}'"),
            )
            .await;
        assert_eq!(row_count(&a), 1, "gbk finds the utf8mb4-written {key}");
    }

    // latin1 (cp1252, with its € at 0x80): general_ci makes 'café', 'CAFÉ' and 'cafe' one key.
    latin1
        .same(
            sh,
            "INSERT INTO customers (name, city, note, n) VALUES ('café', 'Paris', 'crème brûlée €5', 10)",
        )
        .await;
    for sql in [
        "SELECT name, city, note FROM customers WHERE name = 'CAFÉ'",
        "SELECT name, note FROM customers WHERE name = 'cafe'",
    ] {
        let a = utf8.same(sh, sql).await;
        assert_eq!(
            row_count(&a),
            1,
            "utf8mb4 finds the latin1-written café: {sql}"
        );
        let a = latin1.same(sh, sql).await;
        assert_eq!(row_count(&a), 1, "latin1 finds café: {sql}");
    }
    utf8.same(
        sh,
        "INSERT INTO customers (name, city, note, n) VALUES ('Müller', 'Köln', 'Straße', 11)",
    )
    .await;
    let a = latin1
        .same(
            sh,
            "SELECT name, city, note FROM customers WHERE name = 'MÜLLER'",
        )
        .await;
    assert_eq!(row_count(&a), 1, "latin1 finds the utf8mb4-written Müller");
    latin1
        .same(
            sh,
            "UPDATE customers SET note = 'Grüße' WHERE name = 'müller'",
        )
        .await;

    // Prepared statements: gbk string parameters, and gbk text around them.
    let a = gbk
        .same_prepared(
            sh,
            "SELECT name, city, n FROM customers WHERE name = ?",
            &["王芳"],
        )
        .await;
    assert_eq!(row_count(&a), 1, "a gbk parameter finds its key");
    gbk.same_prepared(
        sh,
        "INSERT INTO customers (name, city, note, n) VALUES (?, ?, '预备的', ?)",
        &["孙丽", "西安", "12"],
    )
    .await;
    gbk.same_prepared(
        sh,
        "SELECT n, note FROM customers WHERE name = '孙丽' AND n > ?",
        &["0"],
    )
    .await;
    gbk.same_prepared(
        sh,
        "UPDATE customers SET note = ? WHERE name = ?",
        &["又改了", "乗嘰"],
    )
    .await;
    gbk.same_prepared(
        sh,
        "UPDATE customers SET note = ? WHERE name = ?",
        &["又改了", "嘰乗"],
    )
    .await;
    let a = utf8
        .same_prepared(
            sh,
            "SELECT name, city, note, n FROM customers WHERE name = ?",
            &["孙丽"],
        )
        .await;
    assert_eq!(
        row_count(&a),
        1,
        "utf8mb4 finds the key a gbk parameter wrote"
    );
    latin1
        .same_prepared(
            sh,
            "SELECT name, note FROM customers WHERE name = ?",
            &["CAFÉ"],
        )
        .await;

    // Everything as the reference holds it, each key stored once, where lookups find it.
    utf8.same(sh, "SELECT name, city, note, n FROM customers ORDER BY n")
        .await;
    let placed = f.placement().await;
    let mut names: Vec<&String> = placed.iter().map(|(_, n)| n).collect();
    names.sort();
    let total = names.len();
    names.dedup();
    assert_eq!(names.len(), total, "a key stored twice: {placed:?}");
    assert_eq!(total, 11, "{placed:?}");
}
