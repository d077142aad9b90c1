//! The string families again, through client connections in gbk, latin1 and big5 (issue 50):
//! every SELECT that carries a string literal or parameter, sent as the bytes a client of that
//! charset sends (`SET NAMES <charset>` on both sides, the statement's text and its string
//! parameters encoded in it), text or prepared as in the plan, and the answers, which come back
//! in that charset, compared as for UTF-8. The generated rows hold non-ASCII values every one of
//! these charsets can write (see `data`'s pools and `data::email`), in the string shard key of
//! `account` and in other columns, so the keys are read and routed from each charset's bytes.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Params, Row, Value};

use super::compare::{self, Answer};
use super::queries::Query;
use super::{Fail, Plan, Report, colocated, judge};

/// A client connection character set, and how its bytes are written and read (encoding_rs:
/// GBK, Big5 and windows-1252, which MariaDB's latin1 is).
#[derive(Clone, Copy)]
pub struct ClientCharset {
    pub name: &'static str,
    encoding: &'static encoding_rs::Encoding,
}

/// The charsets the string families run through.
pub fn charsets() -> [ClientCharset; 3] {
    [
        ClientCharset {
            name: "gbk",
            encoding: encoding_rs::GBK,
        },
        ClientCharset {
            name: "latin1",
            encoding: encoding_rs::WINDOWS_1252,
        },
        ClientCharset {
            name: "big5",
            encoding: encoding_rs::BIG5,
        },
    ]
}

impl ClientCharset {
    /// `text` as this charset's bytes; `None` if it cannot hold a character of it.
    pub fn encode(&self, text: &str) -> Option<Vec<u8>> {
        let (bytes, _, unmappable) = self.encoding.encode(text);
        (!unmappable).then(|| bytes.into_owned())
    }

    /// A value this charset's connection received, as text.
    pub fn decode(&self, bytes: &[u8]) -> String {
        self.encoding
            .decode_without_bom_handling(bytes)
            .0
            .into_owned()
    }

    /// A bound value in this charset: strings encoded, the rest as they are.
    fn param(&self, v: &Value) -> Option<Value> {
        match v {
            Value::Bytes(b) => match std::str::from_utf8(b) {
                Ok(s) => self.encode(s).map(Value::Bytes),
                Err(_) => Some(v.clone()),
            },
            v => Some(v.clone()),
        }
    }
}

/// A string family's SELECT: one with a string literal, or a string parameter.
fn is_string_query(q: &Query) -> bool {
    let text_params = q.prepared.as_ref().is_some_and(|(_, params)| {
        params.iter().any(|p| {
            matches!(p, Value::Bytes(b) if std::str::from_utf8(b).is_ok_and(|s| s.parse::<f64>().is_err()))
        })
    });
    q.sql.contains('\'') || text_params
}

/// Runs `sql` (this charset's bytes) on `conn`, text or prepared, the cells read back in it.
async fn fetch_in(
    conn: &mut Conn,
    cs: ClientCharset,
    sql: &[u8],
    params: Option<&[Value]>,
) -> Result<Answer, mysql_async::Error> {
    let cells = |row: Row| -> compare::Cells {
        row.unwrap()
            .into_iter()
            .map(|v| match v {
                Value::Bytes(b) => Some(cs.decode(&b)),
                v => compare::cell(v),
            })
            .collect()
    };
    let (columns, origins, rows, affected) = match params {
        None => {
            let mut result = conn.query_iter(sql).await?;
            let columns = compare::columns_of(result.columns_ref());
            let origins = compare::origins_of(result.columns_ref());
            let rows: Vec<Row> = result.collect().await?;
            let affected = result.affected_rows();
            result.drop_result().await?;
            (columns, origins, rows, affected)
        }
        Some(params) => {
            let stmt = conn.prep(sql).await?;
            let mut result = conn
                .exec_iter(&stmt, Params::Positional(params.to_vec()))
                .await?;
            let columns = compare::columns_of(result.columns_ref());
            let origins = compare::origins_of(result.columns_ref());
            let rows: Vec<Row> = result.collect().await?;
            let affected = result.affected_rows();
            result.drop_result().await?;
            conn.close(stmt).await?;
            (columns, origins, rows, affected)
        }
    };
    Ok(Answer {
        columns,
        origins,
        rows: rows.into_iter().map(cells).collect(),
        affected,
    })
}

/// The plan's string-family SELECTs through connections in each of [`charsets`], on the oracle
/// and the subject, judged as the UTF-8 ones are (families named `<charset>:<family>`).
pub async fn run(report: &mut Report, plan: &Plan, oracle: &Opts, subject: &Opts) {
    let queries: Vec<&Query> = plan
        .selects
        .iter()
        .filter(|q| is_string_query(q) && !q.family.ends_with(colocated::AMBIGUOUS))
        .collect();
    for cs in charsets() {
        let names = format!("SET NAMES {}", cs.name);
        let mut o = super::connect(oracle.clone(), "the oracle").await;
        let mut s = super::connect(subject.clone(), "the subject").await;
        o.query_drop(&names).await.expect("SET NAMES on the oracle");
        if let Err(e) = s.query_drop(&names).await {
            report.errors.push(super::Finding {
                family: format!("{}:set_names", cs.name),
                sql: names.clone(),
                params: None,
                why: "the subject refused SET NAMES".into(),
                oracle: String::new(),
                subject: format!("      {e}\n"),
            });
            continue;
        }
        for q in &queries {
            let (sql, params) = match &q.prepared {
                Some((sql, params)) => {
                    let params: Option<Vec<Value>> = params.iter().map(|p| cs.param(p)).collect();
                    match params {
                        Some(p) => (sql, Some(p)),
                        None => continue,
                    }
                }
                None => (&q.sql, None),
            };
            // A statement this charset cannot write is not one its clients send.
            let Some(bytes) = cs.encode(sql) else {
                continue;
            };
            report.count_select(params.is_some());
            let params = params.as_deref();
            let ob = fetch_in(&mut o, cs, &bytes, params)
                .await
                .map_err(Fail::from);
            let sb = match tokio::time::timeout(plan.timeout, fetch_in(&mut s, cs, &bytes, params))
                .await
            {
                Ok(r) => r.map_err(Fail::from),
                Err(_) => {
                    // Mid-statement: a fresh connection in the charset for the next one.
                    if let Ok(mut c) = Conn::new(subject.clone()).await
                        && c.query_drop(&names).await.is_ok()
                    {
                        s = c;
                    }
                    Err(Fail {
                        code: None,
                        message: format!("no answer within {:?} (hang)", plan.timeout),
                    })
                }
            };
            judge(
                report,
                format!("{}:{}", cs.name, q.family),
                sql,
                params.map(|p| format!("{p:?}")),
                &q.check,
                ob,
                sb,
            );
        }
        let _ = o.disconnect().await;
        let _ = s.disconnect().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_non_ascii_values_fit_every_charset() {
        let data = super::super::data::Dataset::generate(7, 200);
        let mut non_ascii = 0;
        for table in super::super::schema::TABLES {
            for row in data.rows(table.name) {
                for v in row {
                    if let super::super::data::Lit::Str(s) = v
                        && !s.is_ascii()
                    {
                        non_ascii += 1;
                        for cs in charsets() {
                            let b = cs
                                .encode(s)
                                .unwrap_or_else(|| panic!("{s:?} in {}", cs.name));
                            assert_eq!(cs.decode(&b), *s, "{}", cs.name);
                        }
                    }
                }
            }
        }
        assert!(non_ascii > 50, "{non_ascii} non-ASCII values");
    }
}
