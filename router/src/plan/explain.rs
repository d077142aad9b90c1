//! Plans as stable, readable text: EXPLAIN ROUTE rows and the golden tests' expectations.

use std::fmt::Write;

use super::{
    AggColumn, CmpOp, Column, Fold, HavingSpec, LocalAnswer, Merge, MergeSpec, Operand, RoutePlan,
    SessionValue, SortKey, Target,
};
use crate::sql::stmt::Literal;
use crate::topology::Topology;

fn dn_name(topo: &Topology, dn: usize) -> String {
    topo.datanodes
        .get(dn)
        .map(|d| d.name.clone())
        .unwrap_or_else(|| format!("#{dn}"))
}

fn col(c: &Column) -> String {
    match c {
        Column::At(i) => format!("#{i}"),
        Column::FromEnd(k) => format!("#-{k}"),
    }
}

fn lit(l: &Literal) -> String {
    match l {
        Literal::Null => "NULL".into(),
        Literal::Int(i) => i.to_string(),
        Literal::Decimal(d) => d.clone(),
        Literal::Double(d) => format!("{d:e}"),
        Literal::Str(s) => format!("'{}'", s.replace('\'', "''")),
    }
}

fn fold(a: &AggColumn) -> String {
    let c = col(&a.column);
    match a.fold {
        Fold::SumCounts => format!("count({c})"),
        Fold::Sum => format!("sum({c})"),
        Fold::Min => format!("min({c})"),
        Fold::Max => format!("max({c})"),
        Fold::Avg { sum, count } => format!("avg({c} = {}/{})", col(&sum), col(&count)),
    }
}

fn having(h: &HavingSpec) -> String {
    let op = |o: &Operand| match o {
        Operand::Column(c) => col(c),
        Operand::Value(v) => lit(v),
    };
    match h {
        HavingSpec::And(a, b) => format!("({} AND {})", having(a), having(b)),
        HavingSpec::Or(a, b) => format!("({} OR {})", having(a), having(b)),
        HavingSpec::Not(a) => format!("NOT {}", having(a)),
        HavingSpec::Cmp { op: o, left, right } => {
            let s = match o {
                CmpOp::Eq => "=",
                CmpOp::NotEq => "<>",
                CmpOp::Lt => "<",
                CmpOp::Le => "<=",
                CmpOp::Gt => ">",
                CmpOp::Ge => ">=",
                CmpOp::NullSafeEq => "<=>",
            };
            format!("{} {s} {}", op(left), op(right))
        }
        HavingSpec::IsNull { operand, negated } => {
            format!(
                "{} IS {}NULL",
                op(operand),
                if *negated { "NOT " } else { "" }
            )
        }
    }
}

/// Merge steps, one line each, in the order the executor applies them.
pub fn merge_steps(m: &Merge) -> Vec<String> {
    match m {
        Merge::AffectedRows => vec!["sum affected rows".into()],
        Merge::Rows(s) => spec_steps(s),
    }
}

fn spec_steps(s: &MergeSpec) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(a) = &s.aggregate {
        let keys: Vec<_> = a.keys.iter().map(col).collect();
        let cols: Vec<_> = a.columns.iter().map(fold).collect();
        let mut line = format!("group by [{}] fold [{}]", keys.join(", "), cols.join(", "));
        if s.groups_sorted {
            let keys: Vec<_> = s.group_order().iter().map(sort_key).collect();
            let _ = write!(line, " streaming, shards sorted by [{}]", keys.join(", "));
        }
        out.push(line);
    }
    if let Some(h) = &s.having {
        out.push(format!("having {}", having(h)));
    }
    if s.distinct {
        out.push("distinct".into());
    }
    if !s.order_by.is_empty() {
        let keys: Vec<_> = s.order_by.iter().map(sort_key).collect();
        out.push(format!("order by [{}]", keys.join(", ")));
    }
    if s.offset > 0 || s.limit.is_some() {
        let limit = s.limit.map_or("all".to_string(), |l| l.to_string());
        out.push(format!("offset {} limit {limit}", s.offset));
    }
    if s.hidden_columns > 0 {
        out.push(format!("drop last {} columns", s.hidden_columns));
    }
    if out.is_empty() {
        out.push("concatenate".into());
    }
    out
}

fn sort_key(k: &SortKey) -> String {
    format!("{}{}", col(&k.column), if k.desc { " desc" } else { "" })
}

fn target_line(topo: &Topology, t: &Target) -> (String, String) {
    let mut sql = t.sql.to_string();
    if !t.params.is_empty() {
        let p: Vec<_> = t.params.iter().map(|i| i.to_string()).collect();
        let _ = write!(sql, "  -- params [{}]", p.join(","));
    }
    (dn_name(topo, t.datanode), sql)
}

/// EXPLAIN ROUTE rows: (datanode, sql); merge steps as `(merge)` rows; other plans as one row
/// whose first column says what kind of answer it is.
pub fn rows(topo: &Topology, p: &RoutePlan) -> Vec<(String, String)> {
    match p {
        RoutePlan::Single(t) => vec![target_line(topo, t)],
        RoutePlan::Scatter { targets, merge } => {
            let mut r: Vec<_> = targets.iter().map(|t| target_line(topo, t)).collect();
            r.extend(
                merge_steps(merge)
                    .into_iter()
                    .map(|s| ("(merge)".to_string(), s)),
            );
            r
        }
        RoutePlan::Broadcast { targets } => {
            let mut r: Vec<_> = targets.iter().map(|t| target_line(topo, t)).collect();
            r.push(("(broadcast)".into(), "all must succeed".into()));
            r
        }
        RoutePlan::Any { sql } => vec![("(any)".into(), sql.clone())],
        RoutePlan::Local(l) => vec![("(local)".into(), local(l))],
        RoutePlan::Session(k) => vec![("(session)".into(), format!("{k:?}"))],
        RoutePlan::Refuse(e) => vec![(
            "(error)".into(),
            format!("{} ({}): {}", e.code(), e.sqlstate(), e.message()),
        )],
        RoutePlan::KeyMove(m) => {
            let mut r: Vec<_> = m
                .sources
                .iter()
                .map(|s| {
                    let dn = dn_name(topo, m.shards[s.shard].0);
                    let lock = format!("SELECT <primary key>{} FOR UPDATE", s.select_from);
                    let update =
                        format!("{}\nWHERE <primary key> IN (<locked rows>)", s.update_head);
                    let one_line = |s: String| s.split_whitespace().collect::<Vec<_>>().join(" ");
                    (dn, format!("{}; {}", one_line(lock), one_line(update)))
                })
                .collect();
            let to = match &m.value {
                Some(v) => {
                    let s = m.shard_of_literal(v);
                    match s {
                        Ok(s) => dn_name(topo, m.shards[s].0),
                        Err(e) => format!("error {}", e.message()),
                    }
                }
                None => "the shard of each row's new key".to_string(),
            };
            r.push((
                "(move)".into(),
                format!(
                    "rows of {} whose new {} lands elsewhere: deleted, inserted on {to}, in one transaction",
                    m.table, m.key
                ),
            ));
            r
        }
        RoutePlan::BindFirst(b) => {
            let mut r = Vec::new();
            for (i, s) in b.inner.iter().enumerate() {
                let form = match s.form {
                    super::bind::Form::In => "IN list",
                    super::bind::Form::Exists => "EXISTS",
                    super::bind::Form::Scalar => "scalar",
                };
                r.push((
                    format!("(subquery {})", i + 1),
                    format!("{form}, run first: {}", s.sql),
                ));
                r.extend(rows(topo, &s.plan));
            }
            r.push((
                "(outer)".into(),
                format!(
                    "values bound at execution, then planned: {}",
                    b.outer_template()
                ),
            ));
            r
        }
        RoutePlan::Gather(g) => {
            let mut r = Vec::new();
            for c in &g.copies {
                r.push((
                    format!("(copy {})", c.temp),
                    format!(
                        "{}.{} into a temporary table on {}: SELECT <its columns>{}",
                        c.schema,
                        c.table,
                        dn_name(topo, g.scratch),
                        c.from
                    ),
                ));
                if let Some(b) = &c.bind {
                    r.push((
                        "(bound)".into(),
                        format!(
                            "{}.{} IN (the values of {}.{}, integers only), batches of {} values",
                            c.known_as,
                            b.column,
                            g.copies.get(b.source).map_or("?", |s| s.temp.as_str()),
                            b.source_column,
                            super::gather::BIND_BATCH
                        ),
                    ));
                }
                r.extend(
                    super::gather::fetch_targets(c)
                        .into_iter()
                        .map(|t| target_line(topo, t)),
                );
            }
            r.push((
                format!("(gather on {})", dn_name(topo, g.scratch)),
                g.statement.clone(),
            ));
            r
        }
    }
}

fn local(l: &LocalAnswer) -> String {
    match l {
        LocalAnswer::SessionValues { columns, row } => {
            let what = match columns.as_slice() {
                [(column, SessionValue::Database)] => format!("current database as {column}"),
                _ => format!(
                    "session values: {}",
                    columns
                        .iter()
                        .map(|(c, v)| format!("{v:?} as {c}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            if *row {
                what
            } else {
                format!("{what} (no row: LIMIT)")
            }
        }
        LocalAnswer::ExplainRoute { rows } => format!("explain route ({} rows)", rows.len()),
        LocalAnswer::Admin(a) => a.text().to_ascii_lowercase(),
        LocalAnswer::Catalog { sql, .. } => format!("catalog: {sql}"),
    }
}

/// The plan as text, one line per row (golden files).
pub fn render(topo: &Topology, p: &RoutePlan) -> String {
    let kind = match p {
        RoutePlan::Single(_) => "single",
        RoutePlan::Scatter { .. } => "scatter",
        RoutePlan::Broadcast { .. } => "broadcast",
        RoutePlan::Any { .. } => "any",
        RoutePlan::Local(_) => "local",
        RoutePlan::Session(_) => "session",
        RoutePlan::Refuse(_) => "error",
        RoutePlan::KeyMove(_) => "keymove",
        RoutePlan::BindFirst(_) => "bind-first",
        RoutePlan::Gather(_) => "gather",
    };
    let mut out = String::from(kind);
    for (a, b) in rows(topo, p) {
        let _ = write!(out, "\n{a}: {b}");
    }
    out
}
