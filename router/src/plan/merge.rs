//! The merge side of a scattered SELECT: which rewrites the shard SQL needs (hidden columns,
//! LIMIT, HAVING removed) and how the proxy combines the results. Anything that cannot be merged
//! exactly is refused here.

use super::placement::refuse;
use super::render::{Edit, Piece};
use super::{AggColumn, Aggregation, CmpOp, Column, Fold, MergeSpec, SortKey};
use crate::error::RouterError;
use crate::sql::lex::Token;
use crate::sql::stmt::{
    AggArg, AggFunc, ColRef, HavingExpr, HavingOp, HavingOperand, ItemKind, KeyExpr, Limit,
    SelectShape, ValueRef,
};

/// HAVING with values still to evaluate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum HavingT {
    And(Box<HavingT>, Box<HavingT>),
    Or(Box<HavingT>, Box<HavingT>),
    Not(Box<HavingT>),
    Cmp {
        op: CmpOp,
        left: OperandT,
        right: OperandT,
    },
    IsNull {
        operand: OperandT,
        negated: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OperandT {
    Column(Column),
    Value(ValueRef),
}

/// What to do with LIMIT in shard SQL.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LimitMode {
    /// Keep the clause as written (no offset).
    Keep,
    /// Replace with `LIMIT offset+count`.
    Rewrite,
    /// Remove it: aggregation or DISTINCT must see all rows.
    Remove,
}

/// Everything a scattered SELECT needs beyond the name edits.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScatterT {
    pub edits: Vec<Edit>,
    pub limit: Option<(Limit, LimitMode)>,
    pub spec: MergeSpec,
    pub having: Option<HavingT>,
}

/// Context about the tables: which columns are distribution columns of the (single) group, for
/// `COUNT(DISTINCT key)`.
pub(crate) struct Ctx<'a> {
    pub is_dist_column: &'a dyn Fn(&ColRef) -> bool,
    pub has_calc_found_rows: bool,
    /// The statement's text and tokens: where its clauses sit, for the ORDER BY that lets
    /// groups stream.
    pub sql: &'a str,
    pub toks: &'a [Token],
}

struct Builder<'a> {
    shape: &'a SelectShape,
    visible: Vec<Option<usize>>,
    hidden: Vec<Vec<Piece>>,
    /// Folds of hidden aggregate columns (`HAVING COUNT(*) > 1` without `COUNT(*)` selected).
    extra_folds: Vec<AggColumn>,
    /// The merge column of each GROUP BY key, in GROUP BY order (HAVING names resolve to them).
    group_keys: Vec<Column>,
    ctx: &'a Ctx<'a>,
}

pub(crate) fn plan(shape: &SelectShape, ctx: &Ctx) -> Result<ScatterT, RouterError> {
    if shape.has_window {
        return Err(refuse("window functions across shards"));
    }
    if shape.has_into {
        return Err(refuse("SELECT ... INTO across shards"));
    }
    if shape.group_modifier {
        return Err(refuse("GROUP BY ... WITH ROLLUP across shards"));
    }
    if ctx.has_calc_found_rows {
        return Err(refuse("SQL_CALC_FOUND_ROWS across shards"));
    }
    if let Some(n) = shape.notes.first() {
        return Err(refuse(n));
    }
    // Visible index of each item: known only while no `*` precedes it.
    let mut visible = Vec::new();
    let mut wildcard = false;
    for (i, it) in shape.items.iter().enumerate() {
        if matches!(it.kind, ItemKind::Wildcard) {
            wildcard = true;
        }
        visible.push((!wildcard).then_some(i));
    }
    let mut b = Builder {
        shape,
        visible,
        hidden: Vec::new(),
        extra_folds: Vec::new(),
        group_keys: Vec::new(),
        ctx,
    };
    // A HAVING without aggregates or GROUP BY filters rows (MySQL extension): it commutes with
    // the union of the shards' rows, so it stays in the shard SQL.
    let having_aggregates = shape.having.as_ref().is_some_and(having_has_aggregate);
    let aggregating = !shape.group_by.is_empty()
        || having_aggregates
        || shape.items.iter().any(|it| {
            matches!(
                it.kind,
                ItemKind::Aggregate { .. }
                    | ItemKind::Expr {
                        has_aggregate: true,
                        ..
                    }
            )
        });

    let mut spec = MergeSpec::default();
    let mut columns_fold = Vec::new();
    if aggregating {
        for (i, it) in shape.items.iter().enumerate() {
            match &it.kind {
                ItemKind::Expr {
                    has_aggregate: true,
                    text,
                } => {
                    return Err(refuse(format!(
                        "aggregate inside an expression ({text}) across shards"
                    )));
                }
                ItemKind::Aggregate {
                    func,
                    name,
                    distinct,
                    arg,
                    ..
                } => {
                    let col = b.visible[i]
                        .map(Column::At)
                        .ok_or_else(|| refuse("aggregate after * across shards"))?;
                    let fold = b.fold(*func, name, *distinct, arg)?;
                    columns_fold.push(AggColumn { column: col, fold });
                }
                ItemKind::Wildcard if !shape.group_by.is_empty() => {
                    // Non-grouped columns keep the group's first row (ANY_VALUE).
                }
                _ => {}
            }
        }
        for k in &shape.group_by {
            let key = b.group_key(k)?;
            b.group_keys.push(key);
        }
        spec.aggregate = Some(Aggregation {
            keys: b.group_keys.clone(),
            columns: columns_fold,
        });
    }
    let having = match &shape.having {
        Some(h) if aggregating => Some(b.having(h)?),
        _ => None,
    };
    for k in &shape.order_by {
        let column = b.key_column(&k.key, "ORDER BY", true)?;
        spec.order_by.push(SortKey {
            column,
            desc: k.desc,
        });
    }
    if aggregating && shape.order_by.is_empty() {
        // MariaDB returns GROUP BY results sorted by the group keys.
        if let Some(a) = &spec.aggregate {
            spec.order_by = a
                .keys
                .iter()
                .map(|&column| SortKey {
                    column,
                    desc: false,
                })
                .collect();
        }
    }
    spec.distinct = shape.distinct;
    if shape.distinct && !b.hidden.is_empty() {
        return Err(refuse(
            "DISTINCT with ORDER BY or GROUP BY on columns not in the select list across shards",
        ));
    }
    let mut edits = Vec::new();
    let hidden_n = b.hidden.len();
    if hidden_n > 0 {
        let last = shape
            .select_list_last_tok
            .ok_or_else(|| refuse("hidden merge columns in a SELECT without FROM"))?;
        let mut pieces = Vec::new();
        for h in b.hidden.drain(..) {
            pieces.push(Piece::Text(", ".into()));
            pieces.extend(h);
        }
        edits.push(Edit::insert_after(last, pieces));
    }
    spec.hidden_columns = hidden_n;
    if !b.extra_folds.is_empty() {
        let agg = spec.aggregate.get_or_insert(Aggregation {
            keys: Vec::new(),
            columns: Vec::new(),
        });
        agg.columns.append(&mut b.extra_folds);
    }
    // Resolve provisional hidden indices to FromEnd now that the count is known.
    let fix = |c: &mut Column| {
        if let Column::FromEnd(j) = c {
            // provisional: j = 1-based position among hidden columns
            *c = Column::FromEnd(hidden_n + 1 - *j);
        }
    };
    if let Some(a) = &mut spec.aggregate {
        a.keys.iter_mut().for_each(fix);
        for c in &mut a.columns {
            fix(&mut c.column);
            if let Fold::Avg { sum, count } = &mut c.fold {
                fix(sum);
                fix(count);
            }
        }
    }
    spec.order_by.iter_mut().for_each(|k| fix(&mut k.column));
    let having = having.map(|h| fix_having(h, &fix));
    let mut having_edit = None;
    if having.is_some() {
        let (a, z) = shape
            .having_toks
            .ok_or_else(|| refuse("HAVING clause that could not be located"))?;
        having_edit = Some(Edit::text(a, z, String::new()));
    }
    if let Some(edit) = sorted_groups(shape, ctx, &spec, hidden_n) {
        spec.groups_sorted = true;
        match edit {
            SortEdit::None => {}
            SortEdit::Insert { after, pieces } => match &mut having_edit {
                // The HAVING clause ends the statement's clauses: the ORDER BY takes its place.
                Some(h) if h.last == after => h.with = pieces,
                _ => {
                    let mut spaced = vec![Piece::Text(" ".into())];
                    spaced.extend(pieces);
                    edits.push(Edit::insert_after(after, spaced));
                }
            },
            SortEdit::Replace {
                first,
                last,
                pieces,
            } => edits.push(Edit::replace(first, last, pieces)),
        }
    }
    edits.extend(having_edit);
    let limit = shape.limit.clone().map(|l| {
        let mode = if aggregating || shape.distinct {
            LimitMode::Remove
        } else if l.offset.is_some() {
            LimitMode::Rewrite
        } else {
            LimitMode::Keep
        };
        (l, mode)
    });
    edits.sort_by_key(|e| e.first);
    Ok(ScatterT {
        edits,
        limit,
        spec,
        having,
    })
}

fn fix_having(h: HavingT, fix: &dyn Fn(&mut Column)) -> HavingT {
    let op = |o: OperandT| match o {
        OperandT::Column(mut c) => {
            fix(&mut c);
            OperandT::Column(c)
        }
        v => v,
    };
    match h {
        HavingT::And(a, b) => {
            HavingT::And(Box::new(fix_having(*a, fix)), Box::new(fix_having(*b, fix)))
        }
        HavingT::Or(a, b) => {
            HavingT::Or(Box::new(fix_having(*a, fix)), Box::new(fix_having(*b, fix)))
        }
        HavingT::Not(a) => HavingT::Not(Box::new(fix_having(*a, fix))),
        HavingT::Cmp { op: o, left, right } => HavingT::Cmp {
            op: o,
            left: op(left),
            right: op(right),
        },
        HavingT::IsNull { operand, negated } => HavingT::IsNull {
            operand: op(operand),
            negated,
        },
    }
}

fn same_col(a: &ColRef, b: &ColRef) -> bool {
    a.column.eq_ignore_ascii_case(&b.column)
        && match (&a.table, &b.table) {
            (Some(x), Some(y)) => x.eq_ignore_ascii_case(y),
            _ => true,
        }
}

impl Builder<'_> {
    /// Add a hidden column; returns its provisional position (1-based among hidden columns,
    /// fixed up to `FromEnd` once all are known).
    fn add_hidden(&mut self, pieces: Vec<Piece>) -> Column {
        if let Some(p) = self.hidden.iter().position(|h| *h == pieces) {
            return Column::FromEnd(p + 1);
        }
        self.hidden.push(pieces);
        Column::FromEnd(self.hidden.len())
    }

    fn agg_pieces(
        &self,
        name: &str,
        distinct: bool,
        arg: &AggArg,
    ) -> Result<Vec<Piece>, RouterError> {
        let d = if distinct { "DISTINCT " } else { "" };
        match arg {
            AggArg::Star => Ok(vec![Piece::Text(format!("{name}(*)"))]),
            AggArg::Expr {
                first_tok,
                last_tok,
                ..
            } => Ok(vec![
                Piece::Text(format!("{name}({d}")),
                Piece::Tokens(*first_tok, *last_tok),
                Piece::Text(")".into()),
            ]),
            AggArg::Unlocated => Err(refuse(format!("{name}() with this argument across shards"))),
        }
    }

    fn fold(
        &mut self,
        func: AggFunc,
        name: &str,
        distinct: bool,
        arg: &AggArg,
    ) -> Result<Fold, RouterError> {
        if distinct && matches!(func, AggFunc::Count | AggFunc::Sum | AggFunc::Avg) {
            // Distinct values of the distribution column never repeat across shards.
            let on_key =
                matches!(arg, AggArg::Expr { col: Some(c), .. } if (self.ctx.is_dist_column)(c));
            if !on_key {
                return Err(refuse(format!("{name}(DISTINCT ...) across shards")));
            }
        }
        match func {
            AggFunc::Count => Ok(Fold::SumCounts),
            AggFunc::Sum => Ok(Fold::Sum),
            AggFunc::Min => Ok(Fold::Min),
            AggFunc::Max => Ok(Fold::Max),
            AggFunc::Avg => {
                let sum = self.add_hidden(self.agg_pieces("SUM", distinct, arg)?);
                let count = self.add_hidden(self.agg_pieces("COUNT", distinct, arg)?);
                Ok(Fold::Avg { sum, count })
            }
            AggFunc::Other => Err(refuse(format!("{name}() across shards"))),
        }
    }

    /// The select item a key names, if any.
    fn match_item(&self, k: &KeyExpr, alias_ok: bool) -> Result<Option<usize>, RouterError> {
        let items = &self.shape.items;
        Ok(match k {
            KeyExpr::Position(p) => {
                if *p == 0 || *p > items.len() {
                    return Err(refuse("a position beyond the select list"));
                }
                Some(p - 1)
            }
            KeyExpr::Column { col, .. } => {
                let by_alias = (alias_ok && col.table.is_none())
                    .then(|| {
                        items.iter().position(|it| {
                            it.alias
                                .as_deref()
                                .is_some_and(|a| a.eq_ignore_ascii_case(&col.column))
                        })
                    })
                    .flatten();
                by_alias.or_else(|| {
                    items
                        .iter()
                        .position(|it| matches!(&it.kind, ItemKind::Column(c) if same_col(c, col)))
                })
            }
            KeyExpr::Aggregate { text, .. } => items.iter().position(
                |it| matches!(&it.kind, ItemKind::Aggregate { text: t, .. } if t == text),
            ),
            KeyExpr::Expr { text } => items
                .iter()
                .position(|it| matches!(&it.kind, ItemKind::Expr { text: t, .. } if t == text)),
        })
    }

    fn key_column(
        &mut self,
        k: &KeyExpr,
        clause: &str,
        alias_ok: bool,
    ) -> Result<Column, RouterError> {
        if let Some(i) = self.match_item(k, alias_ok)? {
            if matches!(self.shape.items[i].kind, ItemKind::Wildcard) {
                return Err(refuse(format!("{clause} on a * position across shards")));
            }
            if let Some(v) = self.visible[i] {
                return Ok(Column::At(v));
            }
        }
        match k {
            KeyExpr::Column {
                first_tok: Some(a),
                last_tok: Some(z),
                ..
            } => Ok(self.add_hidden(vec![Piece::Tokens(*a, *z)])),
            KeyExpr::Aggregate {
                func,
                name,
                distinct,
                arg,
                ..
            } => {
                let pieces = self.agg_pieces(name, *distinct, arg)?;
                let col = self.add_hidden(pieces);
                let fold = self.fold(*func, name, *distinct, arg)?;
                if !self.extra_folds.iter().any(|f| f.column == col) {
                    self.extra_folds.push(AggColumn { column: col, fold });
                }
                Ok(col)
            }
            KeyExpr::Position(_) => Err(refuse(format!("{clause} position after * across shards"))),
            _ => Err(refuse(format!("{clause} on an expression across shards"))),
        }
    }

    /// The merge column a GROUP BY key groups by. MariaDB resolves a GROUP BY name to a column
    /// of the FROM tables first and to a select-list alias only when no table has that column
    /// (`find_order_in_list`); the router does not know the tables' columns. So a name that is
    /// also the alias of another select item is left for each shard to resolve: the hidden
    /// column `(SELECT name)` looks the name up in the same order (the outer query's tables,
    /// then its select list), so it holds exactly the value the shard grouped by, whichever it
    /// was (`GROUP BY y` with `YEAR(created) AS y`, or a column `y` the alias shadows).
    fn group_key(&mut self, k: &KeyExpr) -> Result<Column, RouterError> {
        if let KeyExpr::Column {
            col,
            first_tok: Some(a),
            last_tok: Some(z),
        } = k
            && col.table.is_none()
            && let Some(item) = self.shape.items.iter().find(|it| {
                it.alias
                    .as_deref()
                    .is_some_and(|x| x.eq_ignore_ascii_case(&col.column))
            })
        {
            match &item.kind {
                // The alias names the very column: no ambiguity.
                ItemKind::Column(c) if c.column.eq_ignore_ascii_case(&col.column) => {}
                // MariaDB never groups on an aggregate: the name can only be a table column.
                ItemKind::Aggregate { .. } => {}
                _ => {
                    return Ok(self.add_hidden(vec![
                        Piece::Text("(SELECT ".into()),
                        Piece::Tokens(*a, *z),
                        Piece::Text(")".into()),
                    ]));
                }
            }
        }
        self.key_column(k, "GROUP BY", false)
    }

    /// A HAVING operand's merge column. An unqualified name that GROUP BY also lists resolves
    /// to that group key, as MariaDB's `resolve_ref_in_select_and_group` prefers the GROUP BY
    /// field over a select alias of the same name; otherwise select aliases come first.
    fn having_key(&mut self, k: &KeyExpr) -> Result<Column, RouterError> {
        if let KeyExpr::Column { col, .. } = k
            && col.table.is_none()
            && let Some(j) = self.shape.group_by.iter().position(|g| {
                matches!(g, KeyExpr::Column { col: g, .. } if g.column.eq_ignore_ascii_case(&col.column))
            })
            && let Some(&c) = self.group_keys.get(j)
        {
            return Ok(c);
        }
        self.key_column(k, "HAVING", true)
    }

    fn having(&mut self, h: &HavingExpr) -> Result<HavingT, RouterError> {
        Ok(match h {
            HavingExpr::And(a, b) => {
                HavingT::And(Box::new(self.having(a)?), Box::new(self.having(b)?))
            }
            HavingExpr::Or(a, b) => {
                HavingT::Or(Box::new(self.having(a)?), Box::new(self.having(b)?))
            }
            HavingExpr::Not(a) => HavingT::Not(Box::new(self.having(a)?)),
            HavingExpr::Cmp { op, left, right } => HavingT::Cmp {
                op: match op {
                    HavingOp::Eq => CmpOp::Eq,
                    HavingOp::NotEq => CmpOp::NotEq,
                    HavingOp::Lt => CmpOp::Lt,
                    HavingOp::Le => CmpOp::Le,
                    HavingOp::Gt => CmpOp::Gt,
                    HavingOp::Ge => CmpOp::Ge,
                    HavingOp::NullSafeEq => CmpOp::NullSafeEq,
                },
                left: self.operand(left)?,
                right: self.operand(right)?,
            },
            HavingExpr::IsNull { operand, negated } => HavingT::IsNull {
                operand: self.operand(operand)?,
                negated: *negated,
            },
            HavingExpr::Unsupported(text) => {
                return Err(refuse(format!("HAVING {text} across shards")));
            }
        })
    }

    fn operand(&mut self, o: &HavingOperand) -> Result<OperandT, RouterError> {
        match o {
            HavingOperand::Value(v) => Ok(OperandT::Value(v.clone())),
            HavingOperand::Key(k) => Ok(OperandT::Column(self.having_key(k)?)),
        }
    }
}

fn having_has_aggregate(h: &HavingExpr) -> bool {
    let operand = |o: &HavingOperand| matches!(o, HavingOperand::Key(KeyExpr::Aggregate { .. }));
    match h {
        HavingExpr::And(a, b) | HavingExpr::Or(a, b) => {
            having_has_aggregate(a) || having_has_aggregate(b)
        }
        HavingExpr::Not(a) => having_has_aggregate(a),
        HavingExpr::Cmp { left, right, .. } => operand(left) || operand(right),
        HavingExpr::IsNull { operand: o, .. } => operand(o),
        // Unknown forms: treat as aggregating, so that they are refused rather than pushed down.
        HavingExpr::Unsupported(_) => true,
    }
}

/// The shard ORDER BY that makes groups arrive sorted by [`MergeSpec::group_order`].
enum SortEdit {
    /// The statement's own ORDER BY already sorts by the group keys.
    None,
    /// Append ` ORDER BY ...` after this token (the last of GROUP BY / HAVING).
    Insert { after: u32, pieces: Vec<Piece> },
    /// Replace the statement's ORDER BY clause (these tokens).
    Replace {
        first: u32,
        last: u32,
        pieces: Vec<Piece>,
    },
}

/// Top-level clause positions after GROUP BY.
struct Tail {
    /// `ORDER` .. the last token of the ORDER BY clause.
    order: Option<(u32, u32)>,
    /// The last token of the GROUP BY / HAVING / ORDER BY clauses (before LIMIT, FOR UPDATE,
    /// LOCK IN SHARE MODE, `;` or the end).
    last: u32,
}

/// Finds the clauses by scanning the top-level tokens. `None` (no sorted streaming, groups
/// are hashed as before) for anything unusual: executable comments (a version gate could hide
/// a clause), ASC/DESC inside GROUP BY (MariaDB sorts groups by them), more than one GROUP BY.
fn tail(sql: &str, toks: &[Token]) -> Option<Tail> {
    let lower = sql.to_ascii_lowercase();
    if lower.contains("/*!") || lower.contains("/*m!") {
        return None;
    }
    let mut depth = 0u32;
    let (mut group, mut order, mut end) = (None, None, toks.len());
    for (i, t) in toks.iter().enumerate() {
        if t.is_punct(sql, "(") {
            depth += 1;
            continue;
        }
        if t.is_punct(sql, ")") {
            depth = depth.checked_sub(1)?;
            continue;
        }
        if depth > 0 {
            continue;
        }
        let then_by = toks.get(i + 1).is_some_and(|n| n.is_kw(sql, "BY"));
        if t.is_kw(sql, "GROUP") && then_by {
            if group.is_some() {
                return None;
            }
            group = Some(i);
        } else if group.is_none() {
            continue;
        } else if t.is_kw(sql, "ORDER") && then_by {
            if order.is_some() {
                return None;
            }
            order = Some(i);
        } else if [
            "LIMIT",
            "FOR",
            "LOCK",
            "INTO",
            "PROCEDURE",
            "WINDOW",
            "UNION",
        ]
        .iter()
        .any(|k| t.is_kw(sql, k))
            || t.is_punct(sql, ";")
        {
            end = i;
            break;
        } else if order.is_none() && ["ASC", "DESC", "WITH"].iter().any(|k| t.is_kw(sql, k)) {
            return None;
        }
    }
    let group = group?;
    let last = end.checked_sub(1).filter(|&l| l > group + 1)?;
    let last = u32::try_from(last).ok()?;
    let order = match order {
        Some(o) => Some((u32::try_from(o).ok()?, last)),
        None => None,
    };
    Some(Tail { order, last })
}

/// When the groups can stream: every group key can be named in the shard ORDER BY so that the
/// shard sorts by the very column the merge groups by. `None` keeps hash aggregation.
fn sorted_groups(
    shape: &SelectShape,
    ctx: &Ctx,
    spec: &MergeSpec,
    hidden_n: usize,
) -> Option<SortEdit> {
    let agg = spec.aggregate.as_ref()?;
    if agg.keys.is_empty() || agg.keys.len() != shape.group_by.len() {
        return None;
    }
    let tail = tail(ctx.sql, ctx.toks)?;
    if shape.order_by.is_empty() != tail.order.is_none() {
        return None;
    }
    let wildcard = shape
        .items
        .iter()
        .any(|it| matches!(it.kind, ItemKind::Wildcard));
    // Distinct key columns, in GROUP BY order, with how to name each in the shard's ORDER BY.
    let mut keys: Vec<(Column, Vec<Piece>)> = Vec::new();
    for (&c, k) in agg.keys.iter().zip(&shape.group_by) {
        if keys.iter().any(|(d, _)| *d == c) {
            continue;
        }
        // By position where the select list's length is known: the position names the result
        // column the merge reads, whatever aliases say.
        let named = match c {
            Column::At(v) => vec![Piece::Text((v + 1).to_string())],
            Column::FromEnd(j) if !wildcard => {
                vec![Piece::Text(
                    (shape.items.len() + hidden_n + 1 - j).to_string(),
                )]
            }
            Column::FromEnd(_) => match k {
                // The hidden column's own text; an alias of that name would win in ORDER BY.
                KeyExpr::Column {
                    col,
                    first_tok: Some(a),
                    last_tok: Some(z),
                } if col.table.is_some()
                    || !shape.items.iter().any(|it| {
                        it.alias
                            .as_deref()
                            .is_some_and(|x| x.eq_ignore_ascii_case(&col.column))
                    }) =>
                {
                    vec![Piece::Tokens(*a, *z)]
                }
                _ => return None,
            },
        };
        keys.push((c, named));
    }
    let by_keys = |keys: &[(Column, Vec<Piece>)]| {
        let mut pieces = vec![Piece::Text("ORDER BY ".into())];
        for (i, (_, p)) in keys.iter().enumerate() {
            if i > 0 {
                pieces.push(Piece::Text(", ".into()));
            }
            pieces.extend(p.iter().cloned());
        }
        pieces
    };
    let Some((first, last)) = tail.order else {
        return Some(SortEdit::Insert {
            after: tail.last,
            pieces: by_keys(&keys),
        });
    };
    // The statement's ORDER BY names the group keys and nothing else: the shards already sort
    // so, and the merged groups come out in the final order (the rule of `group_order`).
    let covers = spec
        .order_by
        .iter()
        .all(|o| keys.iter().any(|(c, _)| *c == o.column))
        && keys
            .iter()
            .all(|(c, _)| spec.order_by.iter().any(|o| o.column == *c));
    if covers {
        return Some(SortEdit::None);
    }
    Some(SortEdit::Replace {
        first,
        last,
        pieces: by_keys(&keys),
    })
}
