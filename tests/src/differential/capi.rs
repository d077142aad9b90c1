//! The prepared statements again, through MariaDB Connector/C: `tests/clients/differential_capi.py`
//! (the Python `mariadb` package, which is Connector/C) runs each one as a server-side prepared
//! statement on one side and prints what it got. Connector/C checks what mysql_async does not
//! (a prepare response announcing other columns than the execute returns fails with 2057), and
//! sends dates and times as binary DATE/DATETIME parameters. The multi-statement texts run
//! through it too ([`Capi::run_multi`]), over the text protocol with CLIENT_MULTI_STATEMENTS.
//!
//! The Python comes from the venv `scripts/install-clients` sets up at `.clients/venv` (or
//! `SHOAL_CAPI_PYTHON`).

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use mysql_async::{Opts, Value};
use serde_json::{Value as Json, json};

use super::compare::{Answer, Origin};
use super::data::{Lit, Rng};
use super::schema;

/// One statement's outcome through Connector/C: the answer, or the error code and message.
pub type Outcome = Result<Answer, (u16, String)>;

/// Whether the `k`th request of a run goes inside a transaction (autocommit off, committed
/// after it): every second one.
pub fn in_transaction(k: usize) -> bool {
    k % 2 == 1
}

/// How to run the Connector/C client.
#[derive(Clone, Debug)]
pub struct Capi {
    pub python: PathBuf,
    pub script: PathBuf,
}

/// The workspace root (the tests crate's parent).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is in the workspace")
        .to_path_buf()
}

impl Capi {
    /// The venv's Python (`SHOAL_CAPI_PYTHON` overrides it) with the `mariadb` package, or why
    /// not (naming `scripts/install-clients`).
    pub fn find() -> Result<Capi, String> {
        let python = std::env::var_os("SHOAL_CAPI_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| root().join(".clients/venv/bin/python"));
        let script = root().join("tests/clients/differential_capi.py");
        if !python.exists() {
            return Err(format!(
                "{} does not exist: run scripts/install-clients (it sets up .clients/venv with \
                 the `mariadb` package, MariaDB Connector/C), or set SHOAL_CAPI_PYTHON",
                python.display()
            ));
        }
        let ok = Command::new(&python)
            .args(["-c", "import mariadb"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err(format!(
                "{} cannot import mariadb: run scripts/install-clients",
                python.display()
            ));
        }
        Ok(Capi { python, script })
    }

    /// Runs `requests` (statement, parameters) in order on one connection to `opts`, each as a
    /// prepared statement through Connector/C; one result per request.
    pub async fn run(
        &self,
        opts: &Opts,
        timeout: Duration,
        requests: Vec<(String, Vec<Json>)>,
    ) -> Result<Vec<Outcome>, String> {
        let lines = requests
            .iter()
            .enumerate()
            .map(|(k, (sql, params))| {
                json!({"sql": sql, "params": params, "txn": in_transaction(k)}).to_string()
            })
            .collect();
        self.exchange(opts, timeout, lines)
            .await?
            .iter()
            .map(|l| parse_answer(l))
            .collect()
    }

    /// Runs multi-statement `texts` in order on one connection to `opts` (with
    /// CLIENT_MULTI_STATEMENTS, text protocol), every result of each read in turn; one outcome
    /// per text, or the client's own error (a lost connection) where it has none.
    pub async fn run_multi(
        &self,
        opts: &Opts,
        timeout: Duration,
        texts: Vec<String>,
    ) -> Result<Vec<Result<MultiOutcome, (u16, String)>>, String> {
        let lines = texts
            .iter()
            .enumerate()
            .map(|(k, sql)| json!({"multi": sql, "txn": in_transaction(k)}).to_string())
            .collect();
        self.exchange(opts, timeout, lines)
            .await?
            .iter()
            .map(|l| parse_multi(l))
            .collect()
    }

    /// Sends `lines` (one request each) to the client on a connection to `opts`; its answer
    /// lines, one per request.
    async fn exchange(
        &self,
        opts: &Opts,
        timeout: Duration,
        lines: Vec<String>,
    ) -> Result<Vec<String>, String> {
        let this = self.clone();
        let args = vec![
            opts.ip_or_hostname().to_string(),
            opts.tcp_port().to_string(),
            opts.user().unwrap_or("").to_string(),
            opts.pass().unwrap_or("").to_string(),
            opts.db_name().unwrap_or("").to_string(),
            timeout.as_secs().max(1).to_string(),
        ];
        tokio::task::spawn_blocking(move || this.exchange_blocking(&args, lines))
            .await
            .map_err(|e| format!("the Connector/C runner panicked: {e}"))?
    }

    fn exchange_blocking(
        &self,
        args: &[String],
        lines: Vec<String>,
    ) -> Result<Vec<String>, String> {
        let mut child = Command::new(&self.python)
            .arg(&self.script)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", self.python.display()))?;
        let mut stdin = child.stdin.take().expect("piped");
        let asked = lines.len();
        // Written from another thread: the client answers while it reads.
        let writer = std::thread::spawn(move || {
            for l in lines {
                if writeln!(stdin, "{l}").is_err() {
                    break;
                }
            }
        });
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut out = Vec::with_capacity(asked);
        for line in stdout.lines() {
            out.push(line.map_err(|e| format!("reading the Connector/C client: {e}"))?);
        }
        let _ = writer.join();
        let output = child
            .wait_with_output()
            .map_err(|e| format!("waiting for the Connector/C client: {e}"))?;
        if out.len() != asked {
            return Err(format!(
                "the Connector/C client answered {} of {asked} requests (exit {}):\n{}",
                out.len(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(out)
    }
}

/// A multi-statement text's outcome through Connector/C: its results in order, and the error
/// that ended it (the statements after it not run).
pub type MultiOutcome = (Vec<Answer>, Option<(u16, String)>);

fn parse_multi(line: &str) -> Result<Result<MultiOutcome, (u16, String)>, String> {
    let v: Json = serde_json::from_str(line).map_err(|e| format!("{e}: {line}"))?;
    let Some(results) = v.get("results").and_then(Json::as_array) else {
        // No results at all: the client's own failure (a lost connection).
        return match parse_answer(line)? {
            Err(e) => Ok(Err(e)),
            Ok(_) => Err(format!("not a multi-statement answer: {line}")),
        };
    };
    let mut answers = Vec::with_capacity(results.len());
    for r in results {
        match parse_answer(&r.to_string())? {
            Ok(a) => answers.push(a),
            Err(e) => return Err(format!("an error among the results {e:?}: {line}")),
        }
    }
    let error = v.get("error").filter(|e| !e.is_null()).map(error_of);
    Ok(Ok((answers, error)))
}

fn error_of(e: &Json) -> (u16, String) {
    (
        e["code"].as_u64().unwrap_or(0) as u16,
        e["message"].as_str().unwrap_or("").to_string(),
    )
}

fn parse_answer(line: &str) -> Result<Outcome, String> {
    let v: Json = serde_json::from_str(line).map_err(|e| format!("{e}: {line}"))?;
    if let Some(e) = v.get("error") {
        return Ok(Err(error_of(e)));
    }
    let text = |j: &Json| j.as_str().unwrap_or("").to_string();
    let cols = v["columns"].as_array().cloned().unwrap_or_default();
    let columns = cols.iter().map(|c| (text(&c[0]), String::new())).collect();
    let origins = cols
        .iter()
        .map(|c| Origin {
            schema: text(&c[1]),
            table: text(&c[2]),
            org_table: text(&c[3]),
        })
        .collect();
    let rows = v["rows"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            r.as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|c| c.as_str().map(str::to_string))
                .collect()
        })
        .collect();
    Ok(Ok(Answer {
        columns,
        origins,
        rows,
        affected: v["affected"].as_u64().unwrap_or(0),
    }))
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
}

fn is_datetime(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 19
        && is_date(&s[..10])
        && b[10] == b' '
        && b[11..].iter().enumerate().all(|(i, c)| {
            if i == 2 || i == 5 {
                *c == b':'
            } else {
                c.is_ascii_digit()
            }
        })
}

fn is_decimal(s: &str) -> bool {
    let t = s.strip_prefix('-').unwrap_or(s);
    match t.split_once('.') {
        Some((a, b)) => {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        }
        None => false,
    }
}

/// A bound value as Connector/C is given it: numbers as integers, decimal strings as
/// `decimal.Decimal`, dates and datetimes as binary DATE/DATETIME, other strings as strings.
pub fn param(v: &Value) -> Json {
    match v {
        Value::NULL => Json::Null,
        Value::Int(i) => json!({"int": i}),
        Value::UInt(u) => json!({"int": u}),
        Value::Bytes(b) => {
            let s = String::from_utf8_lossy(b).into_owned();
            if is_datetime(&s) {
                json!({"datetime": s})
            } else if is_date(&s) {
                json!({"date": s})
            } else if is_decimal(&s) {
                json!({"dec": s})
            } else {
                json!({"str": s})
            }
        }
        other => json!({"str": format!("{other:?}")}),
    }
}

/// A prepared INSERT through Connector/C.
#[derive(Clone, Debug)]
pub struct CapiWrite {
    pub sql: String,
    pub params: Vec<Json>,
}

/// Prepared INSERTs into the date-ruled, table-per-shard `ledger`, its shard key `day` bound as
/// a binary DATE, a binary DATETIME (midnight and not) or a string, `at` as a binary DATETIME.
pub fn ledger_inserts(seed: u64, first_id: u64, count: usize) -> Vec<CapiWrite> {
    let mut rng = Rng::new(seed ^ 0xca91_0000);
    let cols = schema::LEDGER.column_list();
    let mut out = Vec::new();
    let mut id = first_id;
    for i in 0..count {
        let rows = if i % 3 == 2 { 2 } else { 1 };
        let mut params = Vec::new();
        for _ in 0..rows {
            id += 1;
            let row = super::data::ledger_row(&mut rng, id);
            let Lit::Str(day) = &row[1] else {
                unreachable!("ledger.day is never NULL")
            };
            let day_param = match rng.below(4) {
                0 => json!({"date": day}),
                1 => json!({"datetime": format!("{day} 00:00:00")}),
                2 => json!({"datetime": format!("{day} {:02}:30:15", rng.below(24))}),
                _ => json!({"str": day}),
            };
            params.push(json!({"int": id}));
            params.push(day_param);
            for v in &row[2..] {
                params.push(param(&v.param()));
            }
        }
        let one = format!("({})", vec!["?"; schema::LEDGER.cols.len()].join(", "));
        out.push(CapiWrite {
            sql: format!(
                "INSERT INTO ledger ({cols}) VALUES {}",
                vec![one; rows].join(", ")
            ),
            params,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_typed_as_a_c_client_binds_them() {
        assert_eq!(param(&Value::Int(-3)), json!({"int": -3}));
        assert_eq!(
            param(&Value::Bytes(b"2024-02-29".to_vec())),
            json!({"date": "2024-02-29"})
        );
        assert_eq!(
            param(&Value::Bytes(b"2024-02-29 10:00:00".to_vec())),
            json!({"datetime": "2024-02-29 10:00:00"})
        );
        assert_eq!(
            param(&Value::Bytes(b"-12.50".to_vec())),
            json!({"dec": "-12.50"})
        );
        assert_eq!(
            param(&Value::Bytes(b"USER3@ex.io ".to_vec())),
            json!({"str": "USER3@ex.io "})
        );
        assert_eq!(param(&Value::NULL), Json::Null);
    }

    #[test]
    fn ledger_inserts_bind_every_column() {
        let w = ledger_inserts(1, 100, 6);
        assert_eq!(w.len(), 6);
        for x in &w {
            assert_eq!(x.sql.matches('?').count(), x.params.len(), "{}", x.sql);
        }
        assert!(
            w.iter()
                .any(|x| x.params.iter().any(|p| p.get("datetime").is_some()))
        );
    }
}
