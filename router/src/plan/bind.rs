//! Uncorrelated subqueries whose rows live on several shards (or on another datanode than the
//! outer query's), run first and bound into the outer statement as values
//! ([`RoutePlan::BindFirst`]).
//!
//! A SELECT the planner refuses across shards only because of such subqueries is split: each
//! subquery is planned alone, as a top-level SELECT (its DISTINCT, ORDER BY, LIMIT and
//! aggregates merged exactly), and the outer statement is kept as text around them. The
//! executor runs the subqueries, writes their rows into the outer text as literals that MariaDB
//! reads with the subquery column's own type and collation (see the proxy's
//! `exec/subquery.rs`), and plans the outer statement that results as any other: a shard key
//! `IN (values)` narrows it. MariaDB evaluates every predicate; Shoal only writes values.
//!
//! What is bound: `[NOT] IN (SELECT ...)`, `[NOT] EXISTS (SELECT ...)` and a scalar subquery
//! compared with `=`, `<>`, `<`, ... anywhere but in a select list (there the value's column
//! would be named and typed as the literal, not as the subquery). A subquery whose qualified
//! columns name a table it does not read is correlated and stays refused; one correlated by an
//! unqualified name fails when it runs alone (MariaDB's 1054) and is refused then.

use super::RoutePlan;
use super::planner::in_select_list;
use super::router::Router;
use crate::charset::Charsets;
use crate::error::RouterError;
use crate::sql::SqlMode;
use crate::sql::analyze::{self, Source};
use crate::sql::lex::{TokKind, Token};
use crate::sql::normalize;

/// A SELECT whose subqueries run first ([`RoutePlan::BindFirst`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BindFirst {
    /// The subqueries, in the order they are written.
    pub inner: Vec<Bound>,
    /// The outer statement's text around the subqueries: `outer[0]`, the first subquery's
    /// values, `outer[1]`, ... (`inner.len() + 1` pieces).
    pub outer: Vec<String>,
}

/// One subquery run first.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    /// The subquery's SELECT as written.
    pub sql: String,
    /// Its plan as a statement of its own: `Single` or a `Scatter` of rows.
    pub plan: RoutePlan,
    pub form: Form,
}

/// How a subquery's rows stand in the outer statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `x [NOT] IN (SELECT ...)`: the parenthesised list of its rows (a row of several columns
    /// as a row constructor); no rows: an empty table-less subquery, as `IN ()` is no SQL.
    In,
    /// `[NOT] EXISTS (SELECT ...)` (the EXISTS included): `(1)` with a row, `(0)` without.
    Exists,
    /// `x = (SELECT ...)`: its one row, `(NULL)` without; more than one row is MariaDB's 1242.
    Scalar,
}

impl BindFirst {
    /// The outer statement with each subquery's rendered values (`values[i]` for `inner[i]`).
    pub fn outer_with(&self, values: &[String]) -> String {
        let mut out = String::with_capacity(
            self.outer.iter().map(String::len).sum::<usize>()
                + values.iter().map(String::len).sum::<usize>(),
        );
        for (i, piece) in self.outer.iter().enumerate() {
            out.push_str(piece);
            if let Some(v) = values.get(i) {
                out.push_str(v);
            }
        }
        out
    }

    /// The outer statement with stand-ins that narrow nothing (an empty table-less subquery,
    /// EXISTS true): planned, it says whether the outer statement can run at all, and the
    /// columns its result has (what a prepared statement describes).
    pub fn trial(&self) -> String {
        let stand_ins: Vec<String> = self
            .inner
            .iter()
            .map(|s| match s.form {
                Form::In | Form::Scalar => EMPTY.to_string(),
                Form::Exists => "(1 = 1)".to_string(),
            })
            .collect();
        self.outer_with(&stand_ins)
    }

    /// The outer statement as EXPLAIN ROUTE shows it: `<values of subquery N>` in place of
    /// each.
    pub fn outer_template(&self) -> String {
        let marks: Vec<String> = (1..=self.inner.len())
            .map(|i| format!("<values of subquery {i}>"))
            .collect();
        self.outer_with(&marks)
    }
}

/// A subquery without rows and tables: what an empty IN list is written as (`IN ()` is no
/// SQL), and the trial outer statement's stand-in.
pub const EMPTY: &str = "(SELECT NULL FROM DUAL WHERE 0)";

/// Comparison operators a scalar subquery is bound beside.
const COMPARISONS: &[&str] = &["=", "<>", "!=", "<", "<=", ">", ">=", "<=>"];

/// The plan binding the statement's uncorrelated subqueries first, when that makes the
/// statement run: `refused` is what the planner answered for it as written. `None`: nothing to
/// bind, or the outer statement would be refused anyway (its own refusal stands).
pub(crate) fn plan(
    router: &Router,
    current: Option<&str>,
    mode: SqlMode,
    cs: Charsets,
    sql: &str,
    toks: &[Token],
) -> Option<RoutePlan> {
    // Placeholders: a prepared statement is bound with its values filled in ([`filled`]).
    if !toks.first().is_some_and(|t| t.is_kw(sql, "SELECT"))
        || toks.iter().any(|t| t.kind == TokKind::Placeholder)
    {
        return None;
    }
    let mut inner = Vec::new();
    // Token ranges replaced, with what stands in the trial outer statement.
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i + 1 < toks.len() {
        if !(toks[i].is_punct(sql, "(") && toks[i + 1].is_kw(sql, "SELECT")) {
            i += 1;
            continue;
        }
        let close = closing(sql, toks, i)?;
        let Some(form) = form_at(sql, toks, i, close) else {
            i += 1;
            continue;
        };
        // MariaDB refuses `IN (SELECT ... LIMIT n)` itself (1235): bound, it would answer.
        if form == Form::In && limited(sql, &toks[i + 1..close]) {
            i += 1;
            continue;
        }
        let text = &sql[toks[i + 1].start as usize..toks[close - 1].end as usize];
        let plan = match runs_alone(router, current, mode, cs, text) {
            Some(p) => p,
            // Correlated, or refused alone: its own subqueries may still be bound.
            None => {
                i += 1;
                continue;
            }
        };
        let first = if form == Form::Exists { i - 1 } else { i };
        cuts.push((first, close));
        inner.push(Bound {
            sql: text.to_string(),
            plan,
            form,
        });
        i = close + 1;
    }
    if inner.is_empty() {
        return None;
    }
    let mut outer = Vec::with_capacity(cuts.len() + 1);
    let mut from = 0usize;
    for &(first, last) in &cuts {
        outer.push(sql[from..toks[first].start as usize].to_string());
        from = toks[last].end as usize;
    }
    outer.push(sql[from..].to_string());
    let b = BindFirst { inner, outer };
    // Refused anyway, it keeps the first refusal.
    match router.route_in(current, mode, cs, &b.trial(), &[]) {
        RoutePlan::Refuse(_) | RoutePlan::BindFirst(_) | RoutePlan::Gather(_) => None,
        _ => Some(RoutePlan::BindFirst(Box::new(b))),
    }
}

/// `sql` with its `?` placeholders replaced by `params` as the literals MariaDB reads as
/// those bound values (`None`: fewer values than placeholders, or a value not readable in the
/// session's character sets).
pub(crate) fn filled(
    sql: &str,
    toks: &[Token],
    params: &[super::ParamValue],
    cs: Charsets,
) -> Option<String> {
    let mut out = String::with_capacity(sql.len() + 16 * params.len());
    let mut at = 0usize;
    let placeholders = toks.iter().filter(|t| t.kind == TokKind::Placeholder);
    for (k, t) in placeholders.enumerate() {
        out.push_str(&sql[at..t.start as usize]);
        out.push_str(&super::eval::literal_sql_in(params.get(k)?, cs).ok()?);
        at = t.end as usize;
    }
    out.push_str(&sql[at..]);
    Some(out)
}

/// The token closing the parenthesis opened at `open`.
fn closing(sql: &str, toks: &[Token], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        if t.is_punct(sql, "(") {
            depth += 1;
        } else if t.is_punct(sql, ")") {
            depth -= 1;
            if depth == 0 {
                return Some(k);
            }
        }
    }
    None
}

/// Whether the SELECT of `toks` has a LIMIT of its own (outside any parentheses).
fn limited(sql: &str, toks: &[Token]) -> bool {
    let mut depth = 0i32;
    toks.iter().any(|t| {
        if t.is_punct(sql, "(") {
            depth += 1;
        } else if t.is_punct(sql, ")") {
            depth -= 1;
        }
        depth == 0 && t.is_kw(sql, "LIMIT")
    })
}

/// How the subquery in parentheses `open..=close` is used, if it is one Shoal binds.
fn form_at(sql: &str, toks: &[Token], open: usize, close: usize) -> Option<Form> {
    if open == 0 || in_select_list(sql, toks, open).is_some() {
        return None;
    }
    let before = &toks[open - 1];
    if before.is_kw(sql, "IN") {
        return Some(Form::In);
    }
    if before.is_kw(sql, "EXISTS") {
        return Some(Form::Exists);
    }
    let cmp = |t: &Token| COMPARISONS.iter().any(|c| t.is_punct(sql, c));
    // `x = ANY (SELECT ...)` and the like are not scalar.
    if cmp(before) || toks.get(close + 1).is_some_and(cmp) {
        return Some(Form::Scalar);
    }
    None
}

/// The plan of subquery `text` as a statement of its own, when it reads only its own tables
/// (no qualifier naming a table it does not read) and runs on one datanode or merges exactly
/// across several.
fn runs_alone(
    router: &Router,
    current: Option<&str>,
    mode: SqlMode,
    cs: Charsets,
    text: &str,
) -> Option<RoutePlan> {
    let mut toks = Vec::new();
    router.tokenize(text, mode, &mut toks).ok()?;
    let shape = normalize::shape_with_prefix(text, &toks, "", mode);
    let dml = analyze::analyze(&Source::with_mode(text, &toks, &shape, mode)).ok()?;
    if dml.tables.is_empty() || dml.select.as_ref().is_some_and(|s| s.has_into) {
        return None;
    }
    let reads = |schema: Option<&str>, table: &str| {
        dml.tables.iter().any(|t| match &t.alias {
            Some(a) => schema.is_none() && a.eq_ignore_ascii_case(table),
            None => {
                t.name.eq_ignore_ascii_case(table)
                    && match (schema, &t.schema) {
                        (Some(s), Some(ts)) => s.eq_ignore_ascii_case(ts),
                        (Some(s), None) => current.is_some_and(|c| c.eq_ignore_ascii_case(s)),
                        (None, _) => true,
                    }
            }
        })
    };
    if dml
        .qualifiers
        .iter()
        .any(|q| !reads(q.schema.as_deref(), &q.table))
    {
        return None;
    }
    match router.route_in(current, mode, cs, text, &[]) {
        p @ RoutePlan::Single(_) => Some(p),
        p @ RoutePlan::Scatter {
            merge: super::Merge::Rows(_),
            ..
        } => Some(p),
        _ => None,
    }
}

/// MariaDB's error for a scalar subquery with more than one row.
pub fn more_than_one_row() -> RouterError {
    RouterError::new(1242, "21000", "Subquery returns more than 1 row")
}
