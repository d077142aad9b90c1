//! The multi-statement family: texts of several statements in one COM_QUERY, as PDO's
//! `query()`, PyMySQL or Connector/J batches send them, built from the plan's SELECTs (routed
//! to one, several or all datanodes): led by a session statement (`SET NAMES`, `SET
//! sql_mode`), mixed with `DO` and a no-op write, some with an error in the middle (the
//! statements after it must not run). Every result of the text is compared, in order, with one
//! MariaDB's, and so is the error that ends it (its code, and so its position: how many results
//! came before it).
//!
//! The texts run twice: through mysql_async ([`run_one`], family [`FAMILY`]) and through MariaDB
//! Connector/C with CLIENT_MULTI_STATEMENTS over the text protocol ([`run_capi`], family
//! [`CAPI_FAMILY`]; every second text with autocommit off), which reads each result and the
//! error that ends a text as a C client does.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::capi::Capi;
use super::compare::{Answer, Check, cells, compare, show_answer};
use super::queries::Query;
use super::{Fail, Finding, Report, Subject, is_refusal};

/// The family's name in the report.
pub const FAMILY: &str = "multi-statement";

/// The same texts through Connector/C.
pub const CAPI_FAMILY: &str = "capi:multi-statement";

/// One text and the check of each of its results (`None`: an OK result).
pub struct Multi {
    pub sql: String,
    pub checks: Vec<Option<Check>>,
}

const LEADS: [&str; 4] = [
    "SET NAMES utf8mb4",
    "SET sql_mode = 'STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION'",
    "DO 1",
    "SET @@session.sql_select_limit = DEFAULT",
];

/// Up to `n` texts from the plan's text SELECTs (two or three each), seeded.
pub fn texts(seed: u64, selects: &[Query], n: usize) -> Vec<Multi> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x006d_756c_7469);
    let pool: Vec<&Query> = selects.iter().filter(|q| q.prepared.is_none()).collect();
    if pool.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut parts: Vec<String> = Vec::new();
        let mut checks = Vec::new();
        if rng.random_bool(0.7) {
            parts.push(LEADS[rng.random_range(0..LEADS.len())].to_string());
            checks.push(None);
        }
        let k = rng.random_range(2..=3);
        for j in 0..k {
            if j == 1 && rng.random_bool(0.15) {
                // An error in the middle: nothing after it runs.
                parts.push("SELECT * FROM no_such_table_in_multi".to_string());
                checks.push(None);
            }
            if j == 1 && rng.random_bool(0.2) {
                parts.push("UPDATE orders SET amount = amount WHERE 1 = 0".to_string());
                checks.push(None);
            }
            let q = pool[rng.random_range(0..pool.len())];
            parts.push(q.sql.trim_end_matches(';').to_string());
            checks.push(Some(q.check.clone()));
        }
        out.push(Multi {
            sql: parts.join("; "),
            checks,
        });
    }
    out
}

/// Every result of `sql` in order, then the error that ended the text, if any. mysql_async
/// does not report an error that follows a result set inside a text: it says the text is over
/// and gives the error to the next query, so a `DO 0` after the text asks for it.
pub async fn fetch_all(conn: &mut Conn, sql: &str) -> (Vec<Answer>, Option<Fail>) {
    let (out, e) = fetch_results(conn, sql).await;
    if e.is_some() {
        // Said once: the next query is clean.
        return (out, e);
    }
    match conn.query_drop("DO 0").await {
        Err(e @ mysql_async::Error::Server(_)) => (out, Some(Fail::from(e))),
        _ => (out, None),
    }
}

async fn fetch_results(conn: &mut Conn, sql: &str) -> (Vec<Answer>, Option<Fail>) {
    let mut out = Vec::new();
    let mut result = match conn.query_iter(sql).await {
        Ok(r) => r,
        Err(e) => return (out, Some(Fail::from(e))),
    };
    loop {
        let columns = super::compare::columns_of(result.columns_ref());
        let origins = super::compare::origins_of(result.columns_ref());
        match result.collect::<mysql_async::Row>().await {
            Ok(rows) => out.push(Answer {
                columns,
                origins,
                rows: rows.into_iter().map(cells).collect(),
                affected: result.affected_rows(),
            }),
            Err(e) => return (out, Some(Fail::from(e))),
        }
        if result.is_empty() {
            return (out, None);
        }
    }
}

/// Runs `m` on both sides and counts it in the family.
pub async fn run_one(report: &mut Report, m: &Multi, oracle: &mut Conn, subject: &mut Subject) {
    report.count_select(false);
    let (o, oe) = fetch_all(oracle, &m.sql).await;
    let (s, se) = fetch_all(&mut subject.conn, &m.sql).await;
    judge(report, FAMILY, m, (o, oe), (s, se));
}

/// Runs every text of `multis` on both sides through Connector/C, one connection each, and
/// counts them in [`CAPI_FAMILY`].
pub async fn run_capi(
    report: &mut Report,
    multis: &[Multi],
    c: &Capi,
    oracle: &Opts,
    subject: &Opts,
    timeout: Duration,
) {
    if multis.is_empty() {
        return;
    }
    let texts: Vec<String> = multis.iter().map(|m| m.sql.clone()).collect();
    let o = c.run_multi(oracle, timeout, texts.clone()).await;
    let s = c.run_multi(subject, timeout, texts).await;
    let (o, s) = match (o, s) {
        (Ok(o), Ok(s)) => (o, s),
        (o, s) => {
            let why = [o.err(), s.err()].into_iter().flatten().collect::<Vec<_>>();
            report.errors.push(Finding {
                family: CAPI_FAMILY.into(),
                sql: format!("{} multi-statement texts through Connector/C", multis.len()),
                params: None,
                why: "the Connector/C client failed".into(),
                oracle: String::new(),
                subject: format!("      {}\n", why.join("\n      ")),
            });
            return;
        }
    };
    // The client's own failure (no results at all): an error that ends the text at once.
    let outcome = |r: Result<super::capi::MultiOutcome, (u16, String)>| match r {
        Ok((answers, e)) => (answers, e.map(Fail::from)),
        Err(e) => (Vec::new(), Some(Fail::from(e))),
    };
    for (k, (m, (o, s))) in multis.iter().zip(o.into_iter().zip(s)).enumerate() {
        report.selects += 1;
        report.capi_multi += 1;
        report.in_transaction += usize::from(super::capi::in_transaction(k));
        judge(report, CAPI_FAMILY, m, outcome(o), outcome(s));
    }
}

/// Compares one text's two outcomes (its results, and the error that ended it) and counts it
/// in `family`.
fn judge(
    report: &mut Report,
    family: &str,
    m: &Multi,
    (o, oe): (Vec<Answer>, Option<Fail>),
    (s, se): (Vec<Answer>, Option<Fail>),
) {
    let counts = report.families.entry(family.to_string()).or_default();
    counts.run += 1;
    let finding = |why: String, o: String, s: String| Finding {
        family: family.to_string(),
        sql: m.sql.clone(),
        params: None,
        why,
        oracle: o,
        subject: s,
    };
    let show = |a: &[Answer], e: &Option<Fail>| {
        let mut t: String = a.iter().map(|x| show_answer(x, 5)).collect();
        if let Some(e) = e {
            t.push_str(&format!("      {e}\n"));
        }
        t
    };
    // A statement of the text refused by name where the oracle answered it: the results
    // before it must match (compared below), the rest is a refusal.
    let refused = se.as_ref().is_some_and(|e| {
        e.code.is_some_and(|c| is_refusal(c, &e.message))
            && oe.as_ref().map(|o| o.code) != Some(e.code)
            && s.len() <= o.len()
    });
    if refused {
        for (k, (oa, sa)) in o.iter().zip(&s).enumerate() {
            let check = m.checks.get(k).cloned().flatten().unwrap_or_default();
            if let Err(why) = compare(oa, sa, &check) {
                report.mismatches.push(finding(
                    format!("result {} before a refusal: {why}", k + 1),
                    show(&o, &oe),
                    show(&s, &se),
                ));
                return;
            }
        }
        let e = se.as_ref().expect("refused");
        counts.refused += 1;
        *report
            .refusals
            .entry(format!("{}: {}", e.code.unwrap_or(0), e.message))
            .or_default() += 1;
        return;
    }
    if o.len() != s.len() || oe.as_ref().map(|e| e.code) != se.as_ref().map(|e| e.code) {
        report.mismatches.push(finding(
            format!(
                "{} results and error {:?} from the oracle, {} and {:?} from the subject",
                o.len(),
                oe.as_ref().and_then(|e| e.code),
                s.len(),
                se.as_ref().and_then(|e| e.code)
            ),
            show(&o, &oe),
            show(&s, &se),
        ));
        return;
    }
    for (k, (oa, sa)) in o.iter().zip(&s).enumerate() {
        let check = m.checks.get(k).cloned().flatten().unwrap_or_default();
        if let Err(why) = compare(oa, sa, &check) {
            report.mismatches.push(finding(
                format!("result {}: {why}", k + 1),
                show(&o, &oe),
                show(&s, &se),
            ));
            return;
        }
    }
    counts.matched += 1;
    report.matches += 1;
}
