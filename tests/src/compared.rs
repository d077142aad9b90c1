//! Shoal over a sharded layout on two servers, beside one MariaDB database holding the same
//! rows (the reference): the fixture of the end-to-end tests that compare Shoal's answers with
//! one MariaDB's.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};

use crate::ShoalProcess;

pub struct Compared {
    pub cluster: shoal_bench::cluster::Cluster,
    pub shoal: ShoalProcess,
    reference_db: String,
}

impl Compared {
    /// Two primaries holding `databases` and Shoal over them (`layout`, user `app`), the
    /// reference database `reference_db` on the first; `session` runs on both connections,
    /// then each of `statements` (tables and rows) through Shoal and on the reference.
    pub async fn start(
        databases: &[&str],
        layout: &str,
        tag: &str,
        reference_db: &str,
        session: &[&str],
        statements: &[&str],
    ) -> Compared {
        let (cluster, shoal) =
            crate::two_servers_and_shoal(databases, crate::APP_USER, layout, tag).await;
        let s = Compared {
            cluster,
            shoal,
            reference_db: reference_db.to_string(),
        };
        let mut admin = Conn::new(s.cluster.opts(0, None)).await.unwrap();
        admin
            .query_drop(format!("CREATE DATABASE {reference_db}"))
            .await
            .unwrap();
        admin.disconnect().await.unwrap();
        let mut c = s.client().await;
        let mut r = s.reference().await;
        for sql in session {
            c.query_drop(*sql).await.unwrap();
            r.query_drop(*sql).await.unwrap();
        }
        for sql in statements {
            c.query_drop(*sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}\n{}", s.shoal.log()));
            r.query_drop(*sql).await.unwrap();
        }
        s
    }

    /// A connection through Shoal as `app`, in schema `shop`.
    pub async fn client(&self) -> Conn {
        match Conn::new(self.shoal.opts_as("app", "app-secret", Some("shop"))).await {
            Ok(c) => c,
            Err(e) => panic!("connect through shoal: {e}\n{}", self.shoal.log()),
        }
    }

    /// A connection to the reference database.
    pub async fn reference(&self) -> Conn {
        Conn::new(self.cluster.opts(0, Some(&self.reference_db)))
            .await
            .unwrap()
    }
}

/// A value as text: NULL, UTF-8 text as it is, other bytes in hex, the rest as debugged.
pub fn value_text(v: Value) -> String {
    match v {
        Value::NULL => "NULL".to_string(),
        Value::Bytes(b) => match String::from_utf8(b.clone()) {
            Ok(s) => s,
            Err(_) => format!(
                "0x{}",
                b.iter().map(|x| format!("{x:02x}")).collect::<String>()
            ),
        },
        other => format!("{other:?}"),
    }
}

/// Rows as text ([`value_text`]), in the order given.
pub fn rows_text(rows: Vec<Row>) -> Vec<Vec<String>> {
    rows.into_iter()
        .map(|r| r.unwrap().into_iter().map(value_text).collect())
        .collect()
}
