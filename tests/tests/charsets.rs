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

/// The reference database has the logical schema's name, so that answers naming it (errors,
/// `DATABASE()`, the catalog) compare equal.
const REFERENCE_DB: &str = "shop";

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

const DDL: &str = "CREATE TABLE customers (name VARCHAR(20) NOT NULL PRIMARY KEY COMMENT '客户名', \
                   city VARCHAR(20), note VARCHAR(40) COMMENT 'note: 备注 €', n INT) \
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

/// What a statement answered: its rows (raw values), affected rows and the name and charset
/// of each column (when rows came), or its error.
#[derive(Debug, PartialEq)]
enum Answer {
    Rows(Vec<Vec<Value>>, u64, Vec<(Vec<u8>, u16)>),
    Error(u16, String),
}

fn answer_of(rows: Vec<mysql_async::Row>, affected: u64) -> Answer {
    let columns = rows
        .first()
        .map(|r| {
            r.columns_ref()
                .iter()
                .map(|c| (c.name_ref().to_vec(), c.character_set()))
                .collect()
        })
        .unwrap_or_default();
    Answer::Rows(
        rows.into_iter().map(|r| r.unwrap()).collect(),
        affected,
        columns,
    )
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
        self.pair_with(cs, cs.names()).await
    }

    /// A pair whose connections run `set` (a statement setting their charsets) first.
    async fn pair_with(&self, cs: Cs, set: &str) -> Pair {
        let mut shoal = Conn::new(self.shoal.opts_as("app", "app-secret", Some("shop")))
            .await
            .unwrap_or_else(|e| panic!("connect through shoal: {e}\n{}", self.shoal.log()));
        let mut reference = Conn::new(self.cluster.opts(0, Some(REFERENCE_DB)))
            .await
            .unwrap();
        shoal.query_drop(set).await.unwrap();
        reference.query_drop(set).await.unwrap();
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
        Ok(rows) => answer_of(rows, c.affected_rows()),
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
        Ok(rows) => answer_of(rows, c.affected_rows()),
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
        Answer::Rows(rows, ..) => rows.len(),
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

impl Pair {
    /// Runs `sql` (in the pair's charset) on both: the reference must refuse it, and Shoal
    /// with the same code and message (the message's bytes in the charset).
    async fn same_error(&mut self, shoal: &ShoalProcess, sql: &str) {
        let bytes = self.cs.encode(sql);
        let want = answer_text(&mut self.reference, &bytes).await;
        let got = answer_text(&mut self.shoal, &bytes).await;
        assert!(
            matches!(want, Answer::Error(..)),
            "the reference ran {sql}: {want:?}"
        );
        assert_eq!(
            got,
            want,
            "{:?} client: {sql}\nShoal's log:\n{}",
            self.cs,
            shoal.log()
        );
    }
}

/// Every packet of a text query's answer, its bytes as they are (a raw client).
async fn raw_answer(c: &mut shoal_tests::raw::RawConn, sql: &[u8]) -> Vec<Vec<u8>> {
    c.query_packets_bytes(sql)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(sql)))
}

/// However the client sets its charsets (the handshake, SET CHARACTER SET, SET
/// character_set_client alone, SET @@session..., a SET NAMES inside a multi-statement text),
/// Shoal reads its statements in them; RESET CONNECTION and COM_CHANGE_USER go back to the
/// handshake's. Shoal's own answers (errors, the catalog) come in the client's charset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_of_setting_the_charset_is_followed() {
    let f = Fixture::start().await;
    let sh = &f.shoal;
    let mut utf8 = f.pair(Cs::Utf8mb4).await;
    utf8.same(
        sh,
        "INSERT INTO customers (name, city, note, n) VALUES ('张伟', '北京', '第一位', 1), \
         ('café', 'Paris', 'crème', 2), ('嘰乗', '嘰', 'it''s 乗', 3)",
    )
    .await;

    // The handshake's collation: gbk_chinese_ci (28), no SET at all.
    let login = |addr: String, user: &'static str, pw: &'static str| async move {
        let (conn, reply) = shoal_tests::raw::RawConn::login_with_collation(
            &addr,
            user,
            pw,
            Some(REFERENCE_DB),
            28,
        )
        .await
        .unwrap_or_else(|e| panic!("raw login to {addr}: {e}"));
        assert_eq!(reply, shoal_tests::raw::Reply::Ok, "raw login to {addr}");
        conn
    };
    let reference_addr = {
        let p = f.cluster.primary(0);
        format!("{}:{}", p.host, p.port)
    };
    let mut raw_shoal = login(sh.addr(), "app", "app-secret").await;
    let mut raw_ref = login(
        reference_addr,
        shoal_bench::cluster::APP_USER,
        shoal_bench::cluster::APP_PASSWORD,
    )
    .await;
    for sql in [
        "SELECT city, note, n FROM customers WHERE name = '张伟'",
        "SELECT name, n FROM customers WHERE name IN ('张伟', '嘰乗') ORDER BY n",
        "INSERT INTO customers (name, city, note, n) VALUES ('李娜', '上海', '握手', 4)",
        // A SET NAMES inside a multi-statement text: what follows it is read in latin1.
        "SET NAMES latin1; SELECT note FROM customers WHERE name = 'café'",
    ] {
        let bytes = if sql.starts_with("SET NAMES latin1") {
            let (head, tail) = sql.split_once("; ").unwrap();
            [head.as_bytes(), b"; ", &Cs::Latin1.encode(tail)].concat()
        } else {
            Cs::Gbk.encode(sql)
        };
        let want = raw_answer(&mut raw_ref, &bytes).await;
        let got = raw_answer(&mut raw_shoal, &bytes).await;
        assert_ne!(want[0].first(), Some(&0xff), "the reference refused {sql}");
        assert_eq!(
            got,
            want,
            "gbk handshake: {sql}\nShoal's log:\n{}",
            sh.log()
        );
    }
    let a = utf8
        .same(sh, "SELECT city, note FROM customers WHERE name = '李娜'")
        .await;
    assert_eq!(
        row_count(&a),
        1,
        "the gbk handshake's row is found in utf8mb4"
    );

    // SET CHARACTER SET: client and results gbk, connection the database's (utf8mb4).
    let mut p = f.pair_with(Cs::Gbk, "SET CHARACTER SET gbk").await;
    p.same(
        sh,
        "SELECT city, note, LENGTH('张伟') FROM customers WHERE name = '张伟'",
    )
    .await;
    // character_set_client alone: latin1 statements, utf8mb4 results.
    let mut p = f
        .pair_with(Cs::Latin1, "SET character_set_client = latin1")
        .await;
    let a = p
        .same(sh, "SELECT name, note FROM customers WHERE name = 'CAFÉ'")
        .await;
    assert_eq!(row_count(&a), 1);
    // @@session. assignments, several in one SET.
    let mut p = f
        .pair_with(
            Cs::Gbk,
            "SET @@session.character_set_client = gbk, @@session.character_set_connection = gbk, \
             @@session.character_set_results = gbk",
        )
        .await;
    let a = p
        .same(sh, "SELECT city, n FROM customers WHERE name = '嘰乗'")
        .await;
    assert_eq!(row_count(&a), 1);
    // Shoal's own answers in gbk: a backend's error renamed to logical names, and the catalog.
    p.same_error(sh, "SELECT * FROM 不存在的表").await;
    p.same_error(sh, "SELECT 没有这列 FROM customers WHERE name = '张伟'")
        .await;
    p.same(
        sh,
        "SELECT COLUMN_NAME, COLUMN_COMMENT FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'customers' ORDER BY ORDINAL_POSITION",
    )
    .await;
    p.same(sh, "SELECT DATABASE() AS 库").await;

    // RESET CONNECTION and COM_CHANGE_USER: back to the handshake's utf8mb4.
    let mut p = f.pair(Cs::Gbk).await;
    p.same(sh, "SELECT n FROM customers WHERE name = '张伟'")
        .await;
    p.shoal.reset().await.unwrap();
    p.reference.reset().await.unwrap();
    p.cs = Cs::Utf8mb4;
    let a = p
        .same(sh, "SELECT n FROM customers WHERE name = '张伟'")
        .await;
    assert_eq!(row_count(&a), 1, "utf8mb4 again after RESET CONNECTION");
    let mut p = f.pair(Cs::Gbk).await;
    p.shoal
        .change_user(Default::default())
        .await
        .unwrap_or_else(|e| panic!("change user: {e}\n{}", sh.log()));
    p.reference.change_user(Default::default()).await.unwrap();
    p.cs = Cs::Utf8mb4;
    let a = p
        .same(sh, "SELECT n FROM customers WHERE name = '张伟'")
        .await;
    assert_eq!(row_count(&a), 1, "utf8mb4 again after COM_CHANGE_USER");
}

/// Statements whose bytes are not well-formed in the client's charset: MariaDB's own answer
/// (its error, or what it makes of them), never a refusal of Shoal's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bytes_get_mariadbs_answer() {
    let f = Fixture::start().await;
    let sh = &f.shoal;
    let mut p = f.pair(Cs::Gbk).await;
    p.same(
        sh,
        "INSERT INTO customers (name, city, note, n) VALUES ('张伟', '北京', '第一位', 1)",
    )
    .await;
    // 0x81 followed by a byte no gbk character continues with: a malformed unit.
    for sql in [
        &b"SELECT n FROM customers WHERE name = '\x81 '"[..],
        b"SELECT n, '\x81\x7f' FROM customers WHERE name = '\xd5\xc5\xce\xb0'",
        b"INSERT INTO customers (name, city, note, n) VALUES ('\x81 ', 'x', 'y', 2)",
        b"INSERT INTO customers (name, city, note, n) VALUES ('ok', '\x81', 'y', 3)",
        b"SELECT * FROM cust\x81omers",
        b"SELECT n AS `\x81` FROM customers WHERE name = 'ok'",
        b"SELECT n FROM customers WHERE name = _latin1'\xe9' OR name = CONVERT('\xd5\xc5' USING utf8mb4)",
    ] {
        let want = answer_text(&mut p.reference, sql).await;
        let got = answer_text(&mut p.shoal, sql).await;
        assert_eq!(
            got,
            want,
            "gbk client: {:?}\nShoal's log:\n{}",
            String::from_utf8_lossy(sql),
            sh.log()
        );
    }
    // The same through the prepared protocol.
    let sql = &b"SELECT n AS `\x81` FROM customers WHERE name = ?"[..];
    let param = vec![Value::Bytes(b"ok".to_vec())];
    let want = answer_prepared(&mut p.reference, sql, param.clone()).await;
    let got = answer_prepared(&mut p.shoal, sql, param).await;
    assert_eq!(got, want, "prepared\nShoal's log:\n{}", sh.log());
}
