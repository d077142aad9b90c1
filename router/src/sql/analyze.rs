//! sqlparser's AST -> our [`Dml`] description. The only place that knows sqlparser's types.

use std::collections::HashMap;
use std::ops::ControlFlow;

use sqlparser::ast::{
    self as sp, BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr,
    ObjectName, ObjectNamePart, Query, Select, SetExpr, Statement, TableFactor, TableWithJoins,
    UnaryOperator, Visit, Visitor,
};
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Location;

use super::depth::{self, PARSER_RECURSION_LIMIT, TooDeep};
use super::dialect::MariaDbDialect;
use super::lex::{LineIndex, TokKind, Token, glued, unquote_string};
use super::mode::SqlMode;
use super::normalize::Shape;
use super::stmt::*;
use crate::charset::Charset;

/// Why a statement could not be described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnalyzeError {
    /// sqlparser rejected it (message from the parser).
    Parse(String),
    /// More than one statement in the text.
    MultipleStatements,
    /// Nested deeper than Shoal reads (see [`super::depth`]).
    TooDeep(TooDeep),
    /// Parsed, but not a DML statement we describe.
    NotDml,
}

/// The statement text with its tokens and shape, and the text the parser reads.
pub struct Source<'a> {
    pub sql: &'a str,
    pub toks: &'a [Token],
    pub shape: &'a Shape,
    /// The tokens rendered for sqlparser (see [`parse_text`]).
    parse: String,
    /// `(offset in parse, token index)` of every rendered token, by offset.
    parse_starts: Vec<(u32, u32)>,
    lines: LineIndex,
    pipes_as_concat: bool,
}

impl<'a> Source<'a> {
    /// `toks` read in MariaDB's default sql_mode.
    pub fn new(sql: &'a str, toks: &'a [Token], shape: &'a Shape) -> Self {
        Self::with_mode(sql, toks, shape, SqlMode::default())
    }

    /// `toks` as [`super::lex::tokenize_with`] read them under `mode`.
    pub fn with_mode(sql: &'a str, toks: &'a [Token], shape: &'a Shape, mode: SqlMode) -> Self {
        let (parse, parse_starts) = parse_text(sql, toks, mode);
        let lines = LineIndex::new(&parse);
        Source {
            sql,
            toks,
            shape,
            parse,
            parse_starts,
            lines,
            pipes_as_concat: mode.pipes_as_concat(),
        }
    }

    /// The token at a sqlparser location (a position in the parse text).
    fn tok_at(&self, loc: Location) -> Option<u32> {
        let off = self.lines.offset(&self.parse, loc.line, loc.column)? as u32;
        let i = self
            .parse_starts
            .binary_search_by_key(&off, |&(o, _)| o)
            .ok()?;
        Some(self.parse_starts[i].1)
    }

    fn ident_tok(&self, id: &sp::Ident) -> Option<u32> {
        self.tok_at(id.span.start)
    }

    fn kw_at(&self, i: usize, kw: &str) -> bool {
        self.toks.get(i).is_some_and(|t| t.is_kw(self.sql, kw))
    }

    fn punct_at(&self, i: usize, p: &str) -> bool {
        self.toks.get(i).is_some_and(|t| t.is_punct(self.sql, p))
    }

    /// Index of the `)` matching the `(` at `open`.
    fn matching_paren(&self, open: usize) -> Option<usize> {
        let mut depth = 0i32;
        for (i, t) in self.toks.iter().enumerate().skip(open) {
            if t.is_punct(self.sql, "(") {
                depth += 1;
            } else if t.is_punct(self.sql, ")") {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Indices of top-level (paren depth 0) tokens that are the keyword `kw`.
    fn depth0_keywords(&self, kw: &str) -> Vec<usize> {
        let mut depth = 0i32;
        let mut out = Vec::new();
        for (i, t) in self.toks.iter().enumerate() {
            if t.is_punct(self.sql, "(") {
                depth += 1;
            } else if t.is_punct(self.sql, ")") {
                depth -= 1;
            } else if depth == 0 && t.is_kw(self.sql, kw) {
                out.push(i);
            }
        }
        out
    }
}

/// The text handed to sqlparser: the tokens, as MariaDB read them, rendered one after the
/// other separated by a space (none where [`glued`]), exactly as the shape key renders them
/// (`normalize`), so that statements with one key parse alike. Comments are gone (executed
/// comments' code stays, skipped versioned comments are gone), and forms sqlparser would read
/// differently from MariaDB are rewritten: `||` is `OR` unless PIPES_AS_CONCAT, `&&` is
/// `AND`, `"x"` under ANSI_QUOTES is `` `x` ``, infix `MOD` is `%`, and `LOCK IN SHARE MODE`
/// (which sqlparser does not parse and which does not change a route) is dropped. Returns the
/// text and the offset of each rendered token.
fn parse_text(sql: &str, toks: &[Token], mode: SqlMode) -> (String, Vec<(u32, u32)>) {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut starts = Vec::with_capacity(toks.len());
    let kw = |i: usize, k: &str| toks.get(i).is_some_and(|t| t.is_kw(sql, k));
    let mut i = 0;
    let mut prev: Option<&Token> = None;
    while i < toks.len() {
        let t = &toks[i];
        if kw(i, "LOCK") && kw(i + 1, "IN") && kw(i + 2, "SHARE") && kw(i + 3, "MODE") {
            i += 4;
            continue;
        }
        if let Some(p) = prev
            && !glued(p, t)
        {
            out.push(' ');
        }
        starts.push((out.len() as u32, i as u32));
        let text = t.text(sql);
        match t.kind {
            TokKind::Punct if text == "||" && !mode.pipes_as_concat() => out.push_str("OR"),
            TokKind::Punct if text == "&&" => out.push_str("AND"),
            TokKind::QuotedIdent if text.starts_with('"') => {
                out.push('`');
                out.push_str(&t.ident_value(sql).replace('`', "``"));
                out.push('`');
            }
            TokKind::Word if text.eq_ignore_ascii_case("MOD") && is_infix_mod(sql, toks, i) => {
                out.push('%')
            }
            _ => out.push_str(text),
        }
        prev = Some(t);
        i += 1;
    }
    (out, starts)
}

/// `a MOD b` (sqlparser parses only `%`), not the function `MOD(a, b)`.
fn is_infix_mod(sql: &str, toks: &[Token], i: usize) -> bool {
    if i == 0 || toks.get(i + 1).is_some_and(|t| t.is_punct(sql, "(")) {
        return false;
    }
    let prev = &toks[i - 1];
    matches!(
        prev.kind,
        TokKind::Word
            | TokKind::QuotedIdent
            | TokKind::Int
            | TokKind::Decimal
            | TokKind::Placeholder
            | TokKind::Str
    ) || prev.is_punct(sql, ")")
}

/// Parse and describe one DML statement.
pub fn analyze(src: &Source) -> Result<Dml, AnalyzeError> {
    // Before the tree exists: every step below recurses through it.
    depth::check(src.sql, src.toks, src.pipes_as_concat).map_err(AnalyzeError::TooDeep)?;
    depth::size_parser_stack();
    let dialect = MariaDbDialect::default();
    let parsed = Parser::new(&dialect)
        .with_recursion_limit(PARSER_RECURSION_LIMIT)
        .try_with_sql(&src.parse)
        .and_then(|mut p| p.parse_statements());
    let too_deep = AnalyzeError::TooDeep(TooDeep::Expression(depth::MAX_DEPTH + 1));
    if dialect.refused_too_deep() {
        return Err(too_deep);
    }
    let mut stmts = parsed.map_err(|e| match e {
        // Past the backstop (see `depth`).
        ParserError::RecursionLimitExceeded => too_deep,
        e => AnalyzeError::Parse(e.to_string()),
    })?;
    if stmts.len() > 1 {
        return Err(AnalyzeError::MultipleStatements);
    }
    let stmt = stmts.pop().ok_or(AnalyzeError::NotDml)?;
    describe(src, &stmt)
}

/// `e` without its enclosing parentheses, however many (a loop: each level would otherwise be
/// a recursion of the reading below, see [`super::depth`]).
fn unnest(mut e: &Expr) -> &Expr {
    while let Expr::Nested(inner) = e {
        e = inner;
    }
    e
}

fn describe(src: &Source, stmt: &Statement) -> Result<Dml, AnalyzeError> {
    let mut c = Collector::new(src);
    let _ = stmt.visit(&mut c);
    // UPDATE/DELETE joins and WHERE are not inside a SELECT: collect their equalities, and the
    // qualifiers of assignment targets (`SET t.c = ...`), which are not expressions.
    let mut assignment_targets: Vec<&ObjectName> = Vec::new();
    match stmt {
        Statement::Update(up) => {
            c.joins_equalities(std::slice::from_ref(&up.table));
            if let Some(w) = &up.selection {
                c.conjunct_equalities(w);
            }
            for a in &up.assignments {
                match &a.target {
                    sp::AssignmentTarget::ColumnName(n) => assignment_targets.push(n),
                    sp::AssignmentTarget::Tuple(ns) => assignment_targets.extend(ns.iter()),
                }
            }
        }
        Statement::Delete(del) => {
            let (sp::FromTable::WithFromKeyword(from) | sp::FromTable::WithoutKeyword(from)) =
                &del.from;
            c.joins_equalities(from);
            if let Some(u) = &del.using {
                c.joins_equalities(u);
            }
            if let Some(w) = &del.selection {
                c.conjunct_equalities(w);
            }
        }
        Statement::Insert(ins) => {
            if let Some(sp::OnInsert::DuplicateKeyUpdate(assignments)) = &ins.on {
                for a in assignments {
                    if let sp::AssignmentTarget::ColumnName(n) = &a.target {
                        assignment_targets.push(n);
                    }
                }
            }
        }
        _ => {}
    }
    for n in assignment_targets {
        let p = name_parts(n);
        let k = p.len();
        if k >= 2 {
            c.qualifiers.push(QualifierRef {
                schema: (k >= 3).then(|| p[k - 3].value.clone()),
                schema_tok: (k >= 3).then(|| src.ident_tok(p[k - 3])).flatten(),
                table: p[k - 2].value.clone(),
                table_tok: src.ident_tok(p[k - 2]),
            });
        }
    }
    let mut dml = Dml {
        kind: DmlKind::Select,
        tables: Vec::new(),
        qualifiers: std::mem::take(&mut c.qualifiers),
        filter: Pred::Unknown,
        column_equalities: std::mem::take(&mut c.equalities),
        assigned: Vec::new(),
        assigned_values: Vec::new(),
        update_set_tok: None,
        update_where_tok: None,
        blocks: std::mem::take(&mut c.blocks),
        select: None,
        insert: None,
        has_subquery: c.has_subquery,
        has_union: c.has_union,
        has_cte: c.has_cte,
        has_derived_table: c.has_derived,
        has_derived_limit: c.has_derived_limit,
        has_outer_join: false,
        write_order_or_limit: false,
        multi_table_write: false,
        pins: Vec::new(),
        unsupported: None,
    };
    let mut top = TopScope::default();
    let mut b = Builder {
        src,
        pins: Vec::new(),
        unsupported: None,
    };
    match stmt {
        Statement::Query(q) => {
            dml.kind = DmlKind::Select;
            let (body, outer) = unwrap_query(q);
            match body {
                SetExpr::Select(s) => {
                    top.add_from(src, &s.from, &mut b);
                    let mut filter = s
                        .selection
                        .as_ref()
                        .map(|e| b.pred(e))
                        .unwrap_or(Pred::Unknown);
                    filter = and(filter, std::mem::replace(&mut top.inner_on, Pred::Unknown));
                    dml.filter = filter;
                    dml.select = Some(b.select_shape(s, outer));
                }
                SetExpr::SetOperation { .. } => dml.has_union = true,
                _ => b.unsupported = Some("this form of SELECT".into()),
            }
        }
        Statement::Insert(ins) => {
            dml.kind = DmlKind::Insert;
            if let sp::TableObject::TableName(name) = &ins.table {
                top.add_name(src, name, None, false);
            } else {
                b.unsupported = Some("INSERT into a table function".into());
            }
            dml.insert = Some(b.insert_shape(ins));
        }
        Statement::Update(up) => {
            dml.kind = DmlKind::Update;
            top.add_from(src, std::slice::from_ref(&up.table), &mut b);
            if let Some(
                sp::UpdateTableFromKind::AfterSet(f) | sp::UpdateTableFromKind::BeforeSet(f),
            ) = &up.from
            {
                top.add_from(src, f, &mut b);
            }
            dml.multi_table_write = !up.table.joins.is_empty() || up.from.is_some();
            dml.assigned = up
                .assignments
                .iter()
                .flat_map(|a| match &a.target {
                    sp::AssignmentTarget::ColumnName(n) => vec![col_of_name(n)],
                    sp::AssignmentTarget::Tuple(ns) => ns.iter().map(col_of_name).collect(),
                })
                .collect();
            dml.assigned_values = up
                .assignments
                .iter()
                .flat_map(|a| match &a.target {
                    sp::AssignmentTarget::ColumnName(_) => vec![b.assigned(&a.value)],
                    sp::AssignmentTarget::Tuple(ns) => vec![Assigned::Other; ns.len()],
                })
                .collect();
            dml.update_set_tok = src.depth0_keywords("SET").first().map(|&t| t as u32);
            dml.update_where_tok = src.depth0_keywords("WHERE").first().map(|&t| t as u32);
            let filter = up
                .selection
                .as_ref()
                .map(|e| b.pred(e))
                .unwrap_or(Pred::Unknown);
            dml.filter = and(filter, std::mem::replace(&mut top.inner_on, Pred::Unknown));
            dml.write_order_or_limit = !up.order_by.is_empty() || up.limit.is_some();
        }
        Statement::Delete(del) => {
            dml.kind = DmlKind::Delete;
            let from = match &del.from {
                sp::FromTable::WithFromKeyword(v) | sp::FromTable::WithoutKeyword(v) => v,
            };
            top.add_from(src, from, &mut b);
            if let Some(u) = &del.using {
                top.add_from(src, u, &mut b);
            }
            dml.multi_table_write = !del.tables.is_empty()
                || del.using.is_some()
                || from.len() > 1
                || from.iter().any(|t| !t.joins.is_empty());
            let filter = del
                .selection
                .as_ref()
                .map(|e| b.pred(e))
                .unwrap_or(Pred::Unknown);
            dml.filter = and(filter, std::mem::replace(&mut top.inner_on, Pred::Unknown));
            dml.write_order_or_limit = !del.order_by.is_empty() || del.limit.is_some();
        }
        _ => return Err(AnalyzeError::NotDml),
    }
    // Tables: every relation the visitor saw, with aliases and top-level marks.
    for r in c.relations {
        let mut t = r;
        if let Some(tok) = t.name_tok {
            if let Some(alias) = c.aliases.get(&tok) {
                t.alias = Some(alias.clone());
            }
            if let Some(info) = top.by_tok.get(&tok) {
                t.top_level = true;
                t.outer_nullable = info.nullable;
            }
        } else if top
            .untracked
            .iter()
            .any(|(s, n)| *s == t.schema && *n == t.name)
        {
            t.top_level = true;
        }
        dml.tables.push(t);
    }
    dml.has_outer_join = top.has_outer;
    dml.pins = b.pins;
    dml.unsupported = b.unsupported.or(c.unsupported);
    Ok(dml)
}

/// Unwrap `(SELECT ...)` parentheses; returns the body and the query holding ORDER BY/LIMIT.
fn unwrap_query(q: &Query) -> (&SetExpr, &Query) {
    let mut q = q;
    loop {
        match q.body.as_ref() {
            SetExpr::Query(inner) if q.order_by.is_none() && q.limit_clause.is_none() => q = inner,
            body => return (body, q),
        }
    }
}

fn and(a: Pred, b: Pred) -> Pred {
    match (a, b) {
        (Pred::Unknown, x) | (x, Pred::Unknown) => x,
        (Pred::And(mut v), Pred::And(w)) => {
            v.extend(w);
            Pred::And(v)
        }
        (Pred::And(mut v), x) | (x, Pred::And(mut v)) => {
            v.push(x);
            Pred::And(v)
        }
        (x, y) => Pred::And(vec![x, y]),
    }
}

fn name_parts(n: &ObjectName) -> Vec<&sp::Ident> {
    n.0.iter()
        .filter_map(|p| match p {
            ObjectNamePart::Identifier(i) => Some(i),
            _ => None,
        })
        .collect()
}

fn col_of_name(n: &ObjectName) -> ColRef {
    let p = name_parts(n);
    let k = p.len();
    ColRef {
        schema: (k >= 3).then(|| p[k - 3].value.clone()),
        table: (k >= 2).then(|| p[k - 2].value.clone()),
        column: p.last().map(|i| i.value.clone()).unwrap_or_default(),
    }
}

fn col_of(e: &Expr) -> Option<ColRef> {
    match unnest(e) {
        Expr::Identifier(i) => Some(ColRef {
            schema: None,
            table: None,
            column: i.value.clone(),
        }),
        Expr::CompoundIdentifier(ids) if (2..=3).contains(&ids.len()) => {
            let k = ids.len();
            Some(ColRef {
                schema: (k == 3).then(|| ids[0].value.clone()),
                table: Some(ids[k - 2].value.clone()),
                column: ids[k - 1].value.clone(),
            })
        }
        Expr::Nested(e) => col_of(e),
        _ => None,
    }
}

/// The top-level tables of the statement (FROM/JOIN of the outermost SELECT, UPDATE/DELETE
/// tables, INSERT target).
#[derive(Default)]
struct TopScope {
    by_tok: HashMap<u32, TopInfo>,
    untracked: Vec<(Option<String>, String)>,
    inner_on: Pred,
    has_outer: bool,
}

struct TopInfo {
    nullable: bool,
}

impl TopScope {
    fn add_name(&mut self, src: &Source, name: &ObjectName, _alias: Option<&str>, nullable: bool) {
        let p = name_parts(name);
        match p.last().and_then(|i| src.ident_tok(i)) {
            Some(tok) => {
                self.by_tok.insert(tok, TopInfo { nullable });
            }
            None => {
                let k = p.len();
                self.untracked.push((
                    (k >= 2).then(|| p[k - 2].value.clone()),
                    p.last().map(|i| i.value.clone()).unwrap_or_default(),
                ));
            }
        }
    }

    fn add_factor(&mut self, src: &Source, f: &TableFactor, nullable: bool, b: &mut Builder) {
        match f {
            TableFactor::Table { name, .. } => self.add_name(src, name, None, nullable),
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => {
                let before: Vec<u32> = self.by_tok.keys().copied().collect();
                let on = std::mem::replace(&mut self.inner_on, Pred::Unknown);
                self.add_from(src, std::slice::from_ref(table_with_joins.as_ref()), b);
                let inner = std::mem::replace(&mut self.inner_on, on);
                if nullable {
                    // Only the nested join's own tables are NULL-extended, and its inner ON
                    // conditions filter them, not the statement's rows.
                    self.has_outer = true;
                    self.null_extend(&before);
                } else {
                    self.inner_on =
                        and(std::mem::replace(&mut self.inner_on, Pred::Unknown), inner);
                }
            }
            _ => {}
        }
    }

    fn add_from(&mut self, src: &Source, from: &[TableWithJoins], b: &mut Builder) {
        for twj in from {
            // Tables of earlier comma-separated items, and their inner ON conditions: a RIGHT
            // JOIN below NULL-extends only this item's tables (the comma binds looser).
            let before: Vec<u32> = self.by_tok.keys().copied().collect();
            let mut earlier_on = std::mem::replace(&mut self.inner_on, Pred::Unknown);
            self.add_factor(src, &twj.relation, false, b);
            for j in &twj.joins {
                use sp::JoinOperator as J;
                let (nullable_right, nullable_left, constraint) = match &j.join_operator {
                    J::Join(c) | J::Inner(c) | J::CrossJoin(c) | J::StraightJoin(c) => {
                        (false, false, Some(c))
                    }
                    J::Left(c) | J::LeftOuter(c) => (true, false, Some(c)),
                    J::Right(c) | J::RightOuter(c) => (false, true, Some(c)),
                    J::FullOuter(c) => (true, true, Some(c)),
                    _ => {
                        b.unsupported = Some("this kind of join".into());
                        (false, false, None)
                    }
                };
                if nullable_left {
                    // The tables joined so far become NULL-extended: the inner ON conditions
                    // among them no longer filter the statement's rows.
                    self.has_outer = true;
                    self.null_extend(&before);
                    self.inner_on = Pred::Unknown;
                }
                if nullable_right {
                    self.has_outer = true;
                }
                self.add_factor(src, &j.relation, nullable_right, b);
                if let Some(sp::JoinConstraint::On(e)) = constraint
                    && !nullable_left
                    && !nullable_right
                {
                    let p = b.pred(e);
                    self.inner_on = and(std::mem::replace(&mut self.inner_on, Pred::Unknown), p);
                }
                if matches!(
                    constraint,
                    Some(sp::JoinConstraint::Using(_) | sp::JoinConstraint::Natural)
                ) {
                    // USING/NATURAL: equalities by column name; co-location is not checked on
                    // these, so the join is only allowed when everything lands on one datanode.
                }
            }
            earlier_on = and(
                earlier_on,
                std::mem::replace(&mut self.inner_on, Pred::Unknown),
            );
            self.inner_on = earlier_on;
        }
    }

    /// Marks NULL-extended every table added since `before` was taken.
    fn null_extend(&mut self, before: &[u32]) {
        for (tok, v) in self.by_tok.iter_mut() {
            if !before.contains(tok) {
                v.nullable = true;
            }
        }
    }
}

/// Walks every part of the statement: relations, aliases, qualifiers, subqueries.
struct Collector<'a> {
    src: &'a Source<'a>,
    relations: Vec<TableRef>,
    aliases: HashMap<u32, String>,
    qualifiers: Vec<QualifierRef>,
    equalities: Vec<(ColRef, ColRef)>,
    cte_names: Vec<String>,
    blocks: Vec<Block>,
    /// Blocks whose SELECT is being visited, innermost last.
    open: Vec<usize>,
    /// Derived tables' SELECTs (by address, which the visitor passes again), with their links.
    derived: HashMap<usize, BlockLink>,
    has_subquery: bool,
    has_union: bool,
    has_cte: bool,
    has_derived: bool,
    has_derived_limit: bool,
    unsupported: Option<String>,
}

impl<'a> Collector<'a> {
    fn new(src: &'a Source<'a>) -> Self {
        Collector {
            src,
            relations: Vec::new(),
            aliases: HashMap::new(),
            qualifiers: Vec::new(),
            equalities: Vec::new(),
            cte_names: Vec::new(),
            blocks: Vec::new(),
            open: Vec::new(),
            derived: HashMap::new(),
            has_subquery: false,
            has_union: false,
            has_cte: false,
            has_derived: false,
            has_derived_limit: false,
            unsupported: None,
        }
    }

    fn conjunct_equalities(&mut self, e: &Expr) {
        match unnest(e) {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                self.conjunct_equalities(left);
                self.conjunct_equalities(right);
            }
            Expr::Nested(e) => self.conjunct_equalities(e),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } => {
                if let (Some(a), Some(b)) = (col_of(left), col_of(right)) {
                    self.equalities.push((a, b));
                }
            }
            _ => {}
        }
    }

    fn joins_equalities(&mut self, from: &[TableWithJoins]) {
        for twj in from {
            for j in &twj.joins {
                use sp::JoinOperator as J;
                if let J::Join(sp::JoinConstraint::On(e))
                | J::Inner(sp::JoinConstraint::On(e))
                | J::Left(sp::JoinConstraint::On(e))
                | J::LeftOuter(sp::JoinConstraint::On(e))
                | J::Right(sp::JoinConstraint::On(e))
                | J::RightOuter(sp::JoinConstraint::On(e))
                | J::StraightJoin(sp::JoinConstraint::On(e)) = &j.join_operator
                {
                    self.conjunct_equalities(e);
                }
                if let TableFactor::NestedJoin {
                    table_with_joins, ..
                } = &j.relation
                {
                    self.joins_equalities(std::slice::from_ref(table_with_joins.as_ref()));
                }
            }
        }
    }
}

impl Visitor for Collector<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        if let Some(w) = &q.with {
            self.has_cte = true;
            for cte in &w.cte_tables {
                self.cte_names
                    .push(cte.alias.name.value.to_ascii_lowercase());
            }
        }
        if matches!(q.body.as_ref(), SetExpr::SetOperation { .. }) {
            self.has_union = true;
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, s: &Select) -> ControlFlow<()> {
        for item in &s.projection {
            if let sp::SelectItem::QualifiedWildcard(
                sp::SelectItemQualifiedWildcardKind::ObjectName(n),
                _,
            ) = item
            {
                let p = name_parts(n);
                let k = p.len();
                if k >= 1 {
                    self.qualifiers.push(QualifierRef {
                        schema: (k >= 2).then(|| p[k - 2].value.clone()),
                        schema_tok: (k >= 2).then(|| self.src.ident_tok(p[k - 2])).flatten(),
                        table: p[k - 1].value.clone(),
                        table_tok: self.src.ident_tok(p[k - 1]),
                    });
                }
            }
        }
        let first_equality = self.equalities.len();
        if let Some(w) = &s.selection {
            self.conjunct_equalities(w);
        }
        self.joins_equalities(&s.from);
        let equalities = self.equalities[first_equality..].to_vec();
        let mut scope = TopScope::default();
        let mut b = Builder {
            src: self.src,
            pins: Vec::new(),
            unsupported: None,
        };
        scope.add_from(self.src, &s.from, &mut b);
        let filter = s
            .selection
            .as_ref()
            .map(|e| b.pred(e))
            .unwrap_or(Pred::Unknown);
        let filter = and(
            filter,
            std::mem::replace(&mut scope.inner_on, Pred::Unknown),
        );
        let mut tables: Vec<u32> = scope.by_tok.keys().copied().collect();
        tables.sort_unstable();
        let parent = self.open.last().copied();
        let link = match self.derived.remove(&(s as *const Select as usize)) {
            Some(link) => link,
            None if parent.is_some() => BlockLink::Subquery,
            None => BlockLink::Root,
        };
        self.open.push(self.blocks.len());
        self.blocks.push(Block {
            tables,
            filter,
            has_outer_join: scope.has_outer,
            parent,
            link,
            equalities,
        });
        ControlFlow::Continue(())
    }

    fn post_visit_select(&mut self, _s: &Select) -> ControlFlow<()> {
        self.open.pop();
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, n: &ObjectName) -> ControlFlow<()> {
        let p = name_parts(n);
        let k = p.len();
        if k == 0 || k > 2 {
            self.unsupported = Some(format!("table name {n}"));
            return ControlFlow::Continue(());
        }
        let name = p[k - 1];
        // `FROM DUAL` names no table.
        if k == 1 && name.quote_style.is_none() && name.value.eq_ignore_ascii_case("dual") {
            return ControlFlow::Continue(());
        }
        if k == 1 && self.cte_names.contains(&name.value.to_ascii_lowercase()) {
            return ControlFlow::Continue(());
        }
        self.relations.push(TableRef {
            schema: (k == 2).then(|| p[0].value.clone()),
            name: name.value.clone(),
            alias: None,
            schema_tok: (k == 2).then(|| self.src.ident_tok(p[0])).flatten(),
            name_tok: self.src.ident_tok(name),
            top_level: false,
            outer_nullable: false,
        });
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, f: &TableFactor) -> ControlFlow<()> {
        match f {
            TableFactor::Table { name, alias, .. } => {
                if let (Some(a), Some(last)) = (alias, name_parts(name).last())
                    && let Some(tok) = self.src.ident_tok(last)
                {
                    self.aliases.insert(tok, a.name.value.clone());
                }
            }
            TableFactor::Derived {
                subquery, alias, ..
            } => {
                if let (SetExpr::Select(sel), Some(a)) = (unwrap_query(subquery).0, alias) {
                    let passthrough = if a.columns.is_empty() {
                        passthrough(subquery)
                    } else {
                        Vec::new()
                    };
                    self.derived.insert(
                        &**sel as *const Select as usize,
                        BlockLink::Derived {
                            alias: a.name.value.clone(),
                            passthrough,
                        },
                    );
                }
                self.has_derived = true;
                self.has_derived_limit |= subquery.limit_clause.is_some();
                self.has_subquery = true;
            }
            TableFactor::NestedJoin { .. } => {}
            _ => self.unsupported = Some("table functions".into()),
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        match e {
            Expr::CompoundIdentifier(ids) if ids.len() >= 2 => {
                let k = ids.len();
                self.qualifiers.push(QualifierRef {
                    schema: (k >= 3).then(|| ids[k - 3].value.clone()),
                    schema_tok: (k >= 3).then(|| self.src.ident_tok(&ids[k - 3])).flatten(),
                    table: ids[k - 2].value.clone(),
                    table_tok: self.src.ident_tok(&ids[k - 2]),
                });
            }
            Expr::Subquery(_) | Expr::Exists { .. } => self.has_subquery = true,
            Expr::In {
                target: sp::InTarget::Subquery(_),
                ..
            } => self.has_subquery = true,
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Builds predicates, value refs and the select shape.
struct Builder<'a> {
    src: &'a Source<'a>,
    pins: Vec<u16>,
    unsupported: Option<String>,
}

const AGGREGATES: &[&str] = &[
    "COUNT",
    "SUM",
    "MIN",
    "MAX",
    "AVG",
    "GROUP_CONCAT",
    "STD",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "VARIANCE",
    "VAR_POP",
    "VAR_SAMP",
    "BIT_AND",
    "BIT_OR",
    "BIT_XOR",
    "JSON_ARRAYAGG",
    "JSON_OBJECTAGG",
];

fn agg_func(f: &sp::Function) -> Option<(AggFunc, String)> {
    if f.over.is_some() {
        return None;
    }
    let name = name_parts(&f.name).last()?.value.to_ascii_uppercase();
    if !AGGREGATES.contains(&name.as_str()) {
        return None;
    }
    let func = match name.as_str() {
        "COUNT" => AggFunc::Count,
        "SUM" => AggFunc::Sum,
        "MIN" => AggFunc::Min,
        "MAX" => AggFunc::Max,
        "AVG" => AggFunc::Avg,
        _ => AggFunc::Other,
    };
    Some((func, name))
}

/// The output columns of a derived table's query that pass a column of its FROM through
/// unchanged (see [`BlockLink::Derived`]), by name; none under a LIMIT (the rows kept depend on
/// every row).
fn passthrough(q: &Query) -> Vec<(String, ColRef)> {
    match passthrough_items(q) {
        Some((items, false)) => items.into_iter().flatten().collect(),
        _ => Vec::new(),
    }
}

/// Per item of a SELECT's list, the column of its FROM it passes through unchanged, if it does:
/// a plain column item, under GROUP BY only one grouped on (any other column holds one value of
/// a group that may mix values); no item does under a window function (its value depends on
/// other rows) or an aggregate without GROUP BY. `None` for a UNION or a list with `*` (the
/// positions of its items are not known), else the items and whether the query has a LIMIT.
#[allow(clippy::type_complexity)]
fn passthrough_items(q: &Query) -> Option<(Vec<Option<(String, ColRef)>>, bool)> {
    let (body, outer) = unwrap_query(q);
    let SetExpr::Select(s) = body else {
        return None;
    };
    let limited = outer.limit_clause.is_some() || outer.fetch.is_some();
    let mut items: Vec<(&Expr, Option<&sp::Ident>)> = Vec::new();
    for i in &s.projection {
        match i {
            sp::SelectItem::UnnamedExpr(e) => items.push((e, None)),
            sp::SelectItem::ExprWithAlias { expr, alias } => items.push((expr, Some(alias))),
            _ => return None,
        }
    }
    let none = || Some((vec![None; items.len()], limited));
    let grouped: Vec<ColRef> = match &s.group_by {
        sp::GroupByExpr::Expressions(v, modifiers) if modifiers.is_empty() => {
            v.iter().filter_map(col_of).collect()
        }
        _ => return none(),
    };
    let groups = !matches!(&s.group_by, sp::GroupByExpr::Expressions(v, _) if v.is_empty());
    if items.iter().any(|(e, _)| contains_window(e)) {
        return none();
    }
    let aggregated = s.having.is_some() || items.iter().any(|(e, _)| contains_aggregate(e));
    if aggregated && !groups {
        return none();
    }
    let out = items
        .iter()
        .map(|(e, alias)| {
            let c = col_of(e)?;
            let same = |g: &ColRef| {
                g.column.eq_ignore_ascii_case(&c.column)
                    && match (&g.table, &c.table) {
                        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                        _ => true,
                    }
            };
            if groups && !grouped.iter().any(same) {
                return None;
            }
            let name = alias.map_or_else(|| c.column.clone(), |a| a.value.clone());
            Some((name, c))
        })
        .collect();
    Some((out, limited))
}

/// An aggregate of this query level (aggregates inside subqueries belong to the subquery).
fn contains_aggregate(e: &Expr) -> bool {
    struct Finder {
        depth: usize,
    }
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            match e {
                Expr::Function(f) if self.depth == 0 && agg_func(f).is_some() => {
                    ControlFlow::Break(())
                }
                _ => ControlFlow::Continue(()),
            }
        }
    }
    e.visit(&mut Finder { depth: 0 }).is_break()
}

fn contains_window(e: &Expr) -> bool {
    sp::visit_expressions(e, |x| match x {
        Expr::Function(f) if f.over.is_some() => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

impl Builder<'_> {
    fn slot_at(&self, loc: Location) -> Option<u16> {
        let t = self.src.tok_at(loc)?;
        let s = self.src.shape.slot_tokens.binary_search(&t).ok()?;
        Some(s as u16)
    }

    fn param_at(&self, loc: Location) -> Option<u16> {
        let t = self.src.tok_at(loc)?;
        self.src
            .shape
            .param_tokens
            .binary_search(&t)
            .ok()
            .map(|i| i as u16)
    }

    /// A routing value: a literal, a parameter, or their negation.
    /// What an assignment's value is, as routing reads it.
    fn assigned(&self, e: &Expr) -> Assigned {
        if let Some(v) = self.value(e) {
            return Assigned::Value(v);
        }
        if let Some(c) = col_of(e) {
            return Assigned::Column(c);
        }
        if let Expr::Function(f) = e
            && let [ObjectNamePart::Identifier(name)] = f.name.0.as_slice()
            && (name.value.eq_ignore_ascii_case("VALUES")
                || name.value.eq_ignore_ascii_case("VALUE"))
            && let sp::FunctionArguments::List(list) = &f.args
            && let [sp::FunctionArg::Unnamed(sp::FunctionArgExpr::Expr(arg))] = list.args.as_slice()
            && let Some(c) = col_of(arg)
        {
            return Assigned::Inserted(c.column);
        }
        Assigned::Other
    }

    /// `_cs'...'`, `N'...'` and `CONVERT(x USING cs)` as values (see [`ValueRef::Introduced`]).
    #[inline(never)]
    fn recoded_value(&self, e: &Expr) -> Option<ValueRef> {
        match e {
            // `_latin1'...'`: the string's bytes in the named charset. A name MariaDB does not
            // know is its error; a hex string (`_cs X'..'`) is not read.
            Expr::Prefixed { prefix, value } => {
                let cs = Charset::from_name(prefix.value.strip_prefix('_')?)?;
                let Expr::Value(v) = value.as_ref() else {
                    return None;
                };
                match &v.value {
                    sp::Value::SingleQuotedString(_) | sp::Value::DoubleQuotedString(_) => {
                        let s = self.introduced_text(v.span.start)?;
                        Some(ValueRef::Introduced(cs, Box::new(ValueRef::Const(s))))
                    }
                    _ => None,
                }
            }
            // `N'...'` is `_utf8mb3'...'`.
            Expr::Value(v) if matches!(v.value, sp::Value::NationalStringLiteral(_)) => {
                let s = self.introduced_text(v.span.start)?;
                Some(ValueRef::Introduced(
                    Charset::Utf8mb3,
                    Box::new(ValueRef::Const(s)),
                ))
            }
            // `CONVERT('...' USING cs)` (MariaDB's form only).
            Expr::Convert {
                is_try: false,
                expr,
                data_type: None,
                charset: Some(name),
                target_before_value: false,
                styles,
            } if styles.is_empty() => {
                let [ObjectNamePart::Identifier(id)] = name.0.as_slice() else {
                    return None;
                };
                let cs = Charset::from_name(&id.value)?;
                let inner = self.value(expr)?;
                Some(ValueRef::Convert(cs, Box::new(inner)))
            }
            _ => None,
        }
    }

    /// The text of the string literal an introducer (`_cs`, `N`) precedes, at `loc`, as our
    /// lexer reads it (one reading of escapes for every literal); `None` where it is not one
    /// token (adjacent strings are one value).
    #[inline(never)]
    fn introduced_text(&self, loc: Location) -> Option<Literal> {
        let toks = self.src.toks;
        let mut i = self.src.tok_at(loc)? as usize;
        // The location may be the introducer's (`N'x'`) or the string's.
        if !matches!(toks.get(i)?.kind, TokKind::Str | TokKind::DqStr) {
            i += 1;
        }
        let tok = toks.get(i)?;
        if !matches!(tok.kind, TokKind::Str | TokKind::DqStr)
            || toks
                .get(i + 1)
                .is_some_and(|n| matches!(n.kind, TokKind::Str | TokKind::DqStr))
        {
            return None;
        }
        Some(literal_of_token(self.src.sql, tok))
    }

    fn value(&self, e: &Expr) -> Option<ValueRef> {
        match unnest(e) {
            Expr::Value(v) => {
                let lit = match &v.value {
                    sp::Value::Null => return Some(ValueRef::Const(Literal::Null)),
                    sp::Value::Placeholder(p) if p == "?" => {
                        return self.param_at(v.span.start).map(ValueRef::Param);
                    }
                    sp::Value::Number(n, _) => number_literal(n),
                    sp::Value::SingleQuotedString(s) | sp::Value::DoubleQuotedString(s) => {
                        Literal::Str(s.clone())
                    }
                    sp::Value::NationalStringLiteral(_) => return self.recoded_value(unnest(e)),
                    _ => return None,
                };
                match self.slot_at(v.span.start) {
                    Some(slot) => Some(ValueRef::Slot(slot)),
                    None => {
                        // Not lifted: the text is part of the shape, so the value is constant
                        // for this plan. Unless we cannot find the token at all: then we do
                        // not know whether it was lifted, and must not bake the value in.
                        let t = self.src.tok_at(v.span.start)?;
                        let tok = &self.src.toks[t as usize];
                        if tok.is_value_literal() {
                            // A lifted kind that was not lifted (adjacent strings etc.): the
                            // value as sqlparser read it is what MySQL sees.
                        }
                        Some(ValueRef::Const(lit))
                    }
                }
            }
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr,
            } => {
                let inner = self.value(expr)?;
                Some(ValueRef::Neg(Box::new(inner)))
            }
            // Kept out of this frame: `value` recurses once per `-` of `- - - 1`.
            e @ (Expr::Prefixed { .. } | Expr::Convert { .. }) => self.recoded_value(e),
            Expr::UnaryOp {
                op: UnaryOperator::Plus,
                expr,
            } => self.value(expr),
            Expr::Nested(e) => self.value(e),
            _ => None,
        }
    }

    fn pred(&mut self, e: &Expr) -> Pred {
        match unnest(e) {
            Expr::Nested(e) => self.pred(e),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => and(self.pred(left), self.pred(right)),
            // Rows where `a XOR b` holds are among those where `a OR b` does.
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Or | BinaryOperator::Xor,
                right,
            } => {
                let (l, r) = (self.pred(left), self.pred(right));
                if l == Pred::Unknown || r == Pred::Unknown {
                    return Pred::Unknown;
                }
                match l {
                    Pred::Or(mut v) => {
                        v.push(r);
                        Pred::Or(v)
                    }
                    l => Pred::Or(vec![l, r]),
                }
            }
            Expr::BinaryOp { left, op, right } => {
                let op = match op {
                    BinaryOperator::Eq => CmpOp::Eq,
                    BinaryOperator::Spaceship => CmpOp::NullSafeEq,
                    BinaryOperator::Lt => CmpOp::Lt,
                    BinaryOperator::LtEq => CmpOp::Le,
                    BinaryOperator::Gt => CmpOp::Gt,
                    BinaryOperator::GtEq => CmpOp::Ge,
                    _ => return Pred::Unknown,
                };
                if let (Some(col), Some(value)) = (col_of(left), self.value(right)) {
                    return Pred::Cmp { col, op, value };
                }
                if let (Some(value), Some(col)) = (self.value(left), col_of(right)) {
                    let op = match op {
                        CmpOp::Lt => CmpOp::Gt,
                        CmpOp::Le => CmpOp::Ge,
                        CmpOp::Gt => CmpOp::Lt,
                        CmpOp::Ge => CmpOp::Le,
                        o => o,
                    };
                    return Pred::Cmp { col, op, value };
                }
                Pred::Unknown
            }
            Expr::In {
                expr,
                target: sp::InTarget::List(list),
                negated: false,
                ..
            } => {
                let Some(col) = col_of(expr) else {
                    return Pred::Unknown;
                };
                let values: Option<Vec<_>> = list.iter().map(|v| self.value(v)).collect();
                match values {
                    Some(values) if !values.is_empty() => Pred::In { col, values },
                    _ => Pred::Unknown,
                }
            }
            Expr::Between {
                expr,
                negated: false,
                low,
                high,
            } => match (col_of(expr), self.value(low), self.value(high)) {
                (Some(col), Some(low), Some(high)) => Pred::Between { col, low, high },
                _ => Pred::Unknown,
            },
            Expr::IsNull(e) => match col_of(e) {
                Some(col) => Pred::IsNull { col },
                None => Pred::Unknown,
            },
            _ => Pred::Unknown,
        }
    }

    /// Pin every lifted literal inside `e`: the plan depends on their text.
    fn pin_all(&mut self, e: &Expr) {
        let mut found = Vec::new();
        let _ = sp::visit_expressions(e, |x| {
            if let Expr::Value(v) = x
                && let Some(s) = self.slot_at(v.span.start)
            {
                found.push(s);
            }
            ControlFlow::<()>::Continue(())
        });
        self.pins.extend(found);
    }

    fn agg_arg(&self, f: &sp::Function) -> (bool, AggArg) {
        let FunctionArguments::List(list) = &f.args else {
            return (false, AggArg::Unlocated);
        };
        let distinct = matches!(
            list.duplicate_treatment,
            Some(sp::DuplicateTreatment::Distinct)
        );
        if list.args.len() != 1 || !list.clauses.is_empty() {
            return (distinct, AggArg::Unlocated);
        }
        let e = match &list.args[0] {
            FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => return (distinct, AggArg::Star),
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => e,
            _ => return (distinct, AggArg::Unlocated),
        };
        let col = col_of(e);
        // Locate `name ( [DISTINCT] ... )` in the text from the function name's token.
        let located = name_parts(&f.name)
            .last()
            .and_then(|id| self.src.ident_tok(id))
            .and_then(|name_tok| {
                let open = name_tok as usize + 1;
                if !self.src.punct_at(open, "(") {
                    return None;
                }
                let close = self.src.matching_paren(open)?;
                let mut first = open + 1;
                if self.src.kw_at(first, "DISTINCT") || self.src.kw_at(first, "ALL") {
                    first += 1;
                }
                (first < close).then_some((first as u32, close as u32 - 1))
            });
        match located {
            Some((first_tok, last_tok)) => (
                distinct,
                AggArg::Expr {
                    first_tok,
                    last_tok,
                    col,
                },
            ),
            None => (distinct, AggArg::Unlocated),
        }
    }

    fn key_expr(&mut self, e: &Expr) -> KeyExpr {
        if let Expr::Value(v) = e
            && let sp::Value::Number(n, _) = &v.value
            && let Ok(pos) = n.parse::<usize>()
        {
            if let Some(s) = self.slot_at(v.span.start) {
                self.pins.push(s);
            }
            return KeyExpr::Position(pos);
        }
        if let Some(col) = col_of(e) {
            let (first, last) = match e {
                Expr::Identifier(i) => (self.src.ident_tok(i), self.src.ident_tok(i)),
                Expr::CompoundIdentifier(ids) => (
                    self.src.ident_tok(&ids[0]),
                    ids.last().and_then(|i| self.src.ident_tok(i)),
                ),
                _ => (None, None),
            };
            return KeyExpr::Column {
                col,
                first_tok: first,
                last_tok: last,
            };
        }
        self.pin_all(e);
        if let Expr::Function(f) = e
            && let Some((func, name)) = agg_func(f)
        {
            let (distinct, arg) = self.agg_arg(f);
            return KeyExpr::Aggregate {
                text: render(e),
                func,
                distinct,
                arg,
                name,
            };
        }
        KeyExpr::Expr { text: render(e) }
    }

    fn having(&mut self, e: &Expr) -> HavingExpr {
        match unnest(e) {
            Expr::Nested(e) => self.having(e),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => HavingExpr::And(Box::new(self.having(left)), Box::new(self.having(right))),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Or,
                right,
            } => HavingExpr::Or(Box::new(self.having(left)), Box::new(self.having(right))),
            Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr,
            } => HavingExpr::Not(Box::new(self.having(expr))),
            Expr::BinaryOp { left, op, right } => {
                let op = match op {
                    BinaryOperator::Eq => HavingOp::Eq,
                    BinaryOperator::NotEq => HavingOp::NotEq,
                    BinaryOperator::Lt => HavingOp::Lt,
                    BinaryOperator::LtEq => HavingOp::Le,
                    BinaryOperator::Gt => HavingOp::Gt,
                    BinaryOperator::GtEq => HavingOp::Ge,
                    BinaryOperator::Spaceship => HavingOp::NullSafeEq,
                    _ => return HavingExpr::Unsupported(render(e)),
                };
                match (self.having_operand(left), self.having_operand(right)) {
                    (Some(l), Some(r)) => HavingExpr::Cmp {
                        op,
                        left: l,
                        right: r,
                    },
                    _ => HavingExpr::Unsupported(render(e)),
                }
            }
            Expr::IsNull(x) | Expr::IsNotNull(x) => match self.having_operand(x) {
                Some(operand) => HavingExpr::IsNull {
                    operand,
                    negated: matches!(e, Expr::IsNotNull(_)),
                },
                None => HavingExpr::Unsupported(render(e)),
            },
            // `x BETWEEN a AND b` is `a <= x AND x <= b` (MariaDB's definition, NULLs
            // included); NOT BETWEEN its negation.
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let operands = (
                    self.having_operand(expr),
                    self.having_operand(low),
                    self.having_operand(high),
                );
                let (Some(x), Some(lo), Some(hi)) = operands else {
                    return HavingExpr::Unsupported(render(e));
                };
                let range = HavingExpr::And(
                    Box::new(HavingExpr::Cmp {
                        op: HavingOp::Ge,
                        left: x.clone(),
                        right: lo,
                    }),
                    Box::new(HavingExpr::Cmp {
                        op: HavingOp::Le,
                        left: x,
                        right: hi,
                    }),
                );
                if *negated {
                    HavingExpr::Not(Box::new(range))
                } else {
                    range
                }
            }
            _ => HavingExpr::Unsupported(render(e)),
        }
    }

    fn having_operand(&mut self, e: &Expr) -> Option<HavingOperand> {
        if let Some(v) = self.value(e)
            && matches!(e, Expr::Value(_) | Expr::UnaryOp { .. })
        {
            return Some(HavingOperand::Value(v));
        }
        match unnest(e) {
            Expr::Function(f) if agg_func(f).is_some() => {
                Some(HavingOperand::Key(self.key_expr(e)))
            }
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                Some(HavingOperand::Key(self.key_expr(e)))
            }
            Expr::Nested(x) => self.having_operand(x),
            _ => None,
        }
    }

    fn select_shape(&mut self, s: &Select, q: &Query) -> SelectShape {
        let mut items = Vec::new();
        let mut has_window = false;
        for it in &s.projection {
            let (e, alias) = match it {
                sp::SelectItem::UnnamedExpr(e) => (e, None),
                sp::SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.clone())),
                sp::SelectItem::Wildcard(_) | sp::SelectItem::QualifiedWildcard(..) => {
                    items.push(SelectItem {
                        kind: ItemKind::Wildcard,
                        alias: None,
                    });
                    continue;
                }
                sp::SelectItem::ExprWithAliases { expr, .. } => (expr, None),
            };
            has_window |= contains_window(e);
            let kind = if let Some(col) = col_of(e) {
                ItemKind::Column(col)
            } else if let Expr::Function(f) = e {
                if let Some((func, name)) = agg_func(f) {
                    let (distinct, arg) = self.agg_arg(f);
                    self.pin_all(e);
                    ItemKind::Aggregate {
                        func,
                        name,
                        distinct,
                        arg,
                        text: render(e),
                    }
                } else {
                    self.pin_all(e);
                    ItemKind::Expr {
                        text: render(e),
                        has_aggregate: contains_aggregate(e),
                    }
                }
            } else {
                self.pin_all(e);
                ItemKind::Expr {
                    text: render(e),
                    has_aggregate: contains_aggregate(e),
                }
            };
            items.push(SelectItem { kind, alias });
        }
        let distinct = match &s.distinct {
            Some(sp::Distinct::Distinct) => true,
            Some(sp::Distinct::On(_)) => {
                self.unsupported = Some("DISTINCT ON".into());
                true
            }
            _ => false,
        };
        let (group_by, group_modifier) = match &s.group_by {
            GroupByExpr::Expressions(es, mods) => {
                let keys = es.iter().map(|e| self.key_expr(e)).collect();
                let grouping = es
                    .iter()
                    .any(|e| matches!(e, Expr::GroupingSets(_) | Expr::Cube(_) | Expr::Rollup(_)));
                (keys, !mods.is_empty() || grouping)
            }
            GroupByExpr::All(_) => (Vec::new(), true),
        };
        let having = s.having.as_ref().map(|h| self.having(h));
        let mut notes = Vec::new();
        let having_toks = if s.having.is_some() {
            let t = self.clause_range("HAVING");
            if t.is_none() {
                notes.push("HAVING clause not located".to_string());
            }
            t
        } else {
            None
        };
        let mut order_by = Vec::new();
        if let Some(ob) = &q.order_by {
            match &ob.kind {
                sp::OrderByKind::Expressions(es) => {
                    for oe in es {
                        if matches!(&oe.expr, Expr::Value(v) if v.value == sp::Value::Null) {
                            continue;
                        }
                        has_window |= contains_window(&oe.expr);
                        let desc = matches!(oe.options.sort, Some(sp::OrderBySort::Desc));
                        order_by.push(OrderKey {
                            key: self.key_expr(&oe.expr),
                            desc,
                        });
                    }
                }
                sp::OrderByKind::All(_) => self.unsupported = Some("ORDER BY ALL".into()),
            }
        }
        let limit = self.limit(q);
        if q.limit_clause.is_some() && limit.is_none() && self.unsupported.is_none() {
            notes.push("a LIMIT clause that could not be located".to_string());
        }
        let select_list_last_tok = self.select_list_last();
        SelectShape {
            items,
            distinct,
            group_by,
            group_modifier,
            having,
            having_toks,
            order_by,
            limit,
            select_list_last_tok,
            has_window: has_window || !s.named_window.is_empty(),
            has_into: s.into.is_some(),
            notes,
        }
    }

    /// Tokens of a top-level clause starting at keyword `kw`, up to the next top-level clause.
    fn clause_range(&self, kw: &str) -> Option<(u32, u32)> {
        let start = *self.src.depth0_keywords(kw).first()?;
        let enders = [
            "ORDER",
            "LIMIT",
            "WINDOW",
            "FOR",
            "LOCK",
            "INTO",
            "PROCEDURE",
        ];
        let mut depth = 0i32;
        let mut end = self.src.toks.len() - 1;
        for (i, t) in self.src.toks.iter().enumerate().skip(start + 1) {
            if t.is_punct(self.src.sql, "(") {
                depth += 1;
            } else if t.is_punct(self.src.sql, ")") {
                depth -= 1;
            } else if depth == 0
                && (enders.iter().any(|k| t.is_kw(self.src.sql, k))
                    || t.is_punct(self.src.sql, ";"))
            {
                end = i - 1;
                break;
            }
        }
        Some((start as u32, end as u32))
    }

    fn select_list_last(&self) -> Option<u32> {
        let from = *self.src.depth0_keywords("FROM").first()?;
        (from > 0).then(|| from as u32 - 1)
    }

    fn limit(&mut self, q: &Query) -> Option<Limit> {
        let (count, offset) = match q.limit_clause.as_ref()? {
            sp::LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            } => {
                if !limit_by.is_empty() {
                    self.unsupported = Some("LIMIT BY".into());
                }
                match limit {
                    Some(l) => (l, offset.as_ref().map(|o| &o.value)),
                    None => {
                        // OFFSET without LIMIT is not MySQL.
                        self.unsupported = Some("OFFSET without LIMIT".into());
                        return None;
                    }
                }
            }
            sp::LimitClause::OffsetCommaLimit { offset, limit } => (limit, Some(offset)),
        };
        let count_v = self.value(count);
        let offset_v = offset.map(|o| self.value(o));
        let (Some(count_v), Some(offset_v)) = (
            count_v,
            offset_v.unwrap_or(Some(ValueRef::Const(Literal::Int(0)))),
        ) else {
            self.unsupported = Some("a LIMIT that is not a number or parameter".into());
            return None;
        };
        let offset_v = offset.map(|_| offset_v);
        let first = *self.src.depth0_keywords("LIMIT").last()?;
        let mut last = first + 1;
        if self.src.punct_at(first + 2, ",") || self.src.kw_at(first + 2, "OFFSET") {
            last = first + 3;
        }
        if last >= self.src.toks.len() {
            return None;
        }
        Some(Limit {
            count: count_v,
            offset: offset_v,
            first_tok: first as u32,
            last_tok: last as u32,
        })
    }

    fn insert_shape(&mut self, ins: &sp::Insert) -> InsertShape {
        let mut columns: Vec<String> = ins.columns.iter().map(|c| col_of_name(c).column).collect();
        let mut rows = Vec::new();
        let mut from_select = false;
        let mut source_keys = Vec::new();
        let mut source_limited = false;
        let mut set_form = false;
        match &ins.source {
            Some(q) => match q.body.as_ref() {
                SetExpr::Values(v) => {
                    let located = self.value_rows();
                    if located.len() != v.rows.len() {
                        self.unsupported = Some("INSERT rows that could not be located".into());
                    }
                    for (i, r) in v.rows.iter().enumerate() {
                        let values = r.content.iter().map(|e| self.value(e)).collect();
                        let (first_tok, last_tok) = located.get(i).copied().unwrap_or((0, 0));
                        rows.push(InsertRow {
                            first_tok,
                            last_tok,
                            values,
                        });
                    }
                }
                _ => {
                    from_select = true;
                    if let Some((items, limited)) = passthrough_items(q) {
                        source_keys = items.into_iter().map(|i| i.map(|(_, c)| c)).collect();
                        source_limited = limited;
                    }
                }
            },
            None => {
                if !ins.assignments.is_empty() {
                    set_form = true;
                    columns = ins
                        .assignments
                        .iter()
                        .map(|a| match &a.target {
                            sp::AssignmentTarget::ColumnName(n) => col_of_name(n).column,
                            sp::AssignmentTarget::Tuple(_) => String::new(),
                        })
                        .collect();
                    let values = ins
                        .assignments
                        .iter()
                        .map(|a| self.value(&a.value))
                        .collect();
                    rows.push(InsertRow {
                        first_tok: 0,
                        last_tok: 0,
                        values,
                    });
                }
            }
        }
        let on_duplicate_assigned = match &ins.on {
            Some(sp::OnInsert::DuplicateKeyUpdate(assignments)) => assignments
                .iter()
                .flat_map(|a| match &a.target {
                    sp::AssignmentTarget::ColumnName(n) => vec![col_of_name(n)],
                    sp::AssignmentTarget::Tuple(ns) => ns.iter().map(col_of_name).collect(),
                })
                .collect(),
            Some(_) => {
                self.unsupported = Some("ON CONFLICT".into());
                Vec::new()
            }
            None => Vec::new(),
        };
        let on_duplicate_values = match &ins.on {
            Some(sp::OnInsert::DuplicateKeyUpdate(assignments)) => assignments
                .iter()
                .flat_map(|a| match &a.target {
                    sp::AssignmentTarget::ColumnName(_) => vec![self.assigned(&a.value)],
                    sp::AssignmentTarget::Tuple(ns) => vec![Assigned::Other; ns.len()],
                })
                .collect(),
            _ => Vec::new(),
        };
        if ins.insert_alias.is_some() {
            self.unsupported = Some("INSERT ... AS row alias".into());
        }
        InsertShape {
            replace: ins.replace_into,
            columns,
            rows,
            set_form,
            from_select,
            source_keys,
            source_limited,
            on_duplicate_assigned,
            on_duplicate_values,
        }
    }

    /// Token ranges of the `( ... )` rows after the top-level VALUES/VALUE keyword.
    fn value_rows(&self) -> Vec<(u32, u32)> {
        let src = self.src;
        let kw = src
            .depth0_keywords("VALUES")
            .first()
            .copied()
            .or_else(|| src.depth0_keywords("VALUE").first().copied());
        let Some(kw) = kw else { return Vec::new() };
        let mut out = Vec::new();
        let mut i = kw + 1;
        loop {
            if src.kw_at(i, "ROW") {
                i += 1;
            }
            if !src.punct_at(i, "(") {
                break;
            }
            let Some(close) = src.matching_paren(i) else {
                break;
            };
            out.push((i as u32, close as u32));
            if src.punct_at(close + 1, ",") {
                i = close + 2;
            } else {
                break;
            }
        }
        out
    }
}

/// Integer literals as `Int`, everything else (fractions, exponents, huge) as written.
fn number_literal(n: &str) -> Literal {
    if n.bytes().all(|b| b.is_ascii_digit())
        && let Ok(v) = n.parse::<i128>()
    {
        return Literal::Int(v);
    }
    Literal::Decimal(n.to_string())
}

/// Decode a lifted literal token.
pub fn literal_of_token(sql: &str, t: &Token) -> Literal {
    let text = t.text(sql);
    match t.kind {
        TokKind::Int | TokKind::Decimal => number_literal(text),
        TokKind::Str | TokKind::DqStr => Literal::Str(unquote_string(text)),
        _ => Literal::Str(text.to_string()),
    }
}

/// A normalised rendering of an expression, for matching select items with ORDER BY / GROUP BY
/// keys: sqlparser's printer, case-folded.
fn render(e: &Expr) -> String {
    e.to_string().to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lex::tokenize;
    use crate::sql::normalize::shape;

    fn dml(sql: &str) -> Dml {
        let toks = tokenize(sql).unwrap();
        let sh = shape(sql, &toks);
        analyze(&Source::new(sql, &toks, &sh)).unwrap()
    }

    #[test]
    fn literals_become_slots_and_params() {
        let d = dml("SELECT c FROM t WHERE id = 5 AND k = ? AND x = NULL");
        let Pred::And(ps) = d.filter else {
            panic!("{:?}", d.filter)
        };
        assert!(matches!(
            &ps[0],
            Pred::Cmp {
                value: ValueRef::Slot(0),
                ..
            }
        ));
        assert!(matches!(
            &ps[1],
            Pred::Cmp {
                value: ValueRef::Param(0),
                ..
            }
        ));
        assert!(matches!(
            &ps[2],
            Pred::Cmp {
                value: ValueRef::Const(Literal::Null),
                ..
            }
        ));
    }

    #[test]
    fn spans_map_to_tokens_across_lines_and_unicode() {
        let sql = "SELECT 'é'\n  FROM\tshop.`t x` AS a\n WHERE a.id = -7";
        let d = dml(sql);
        let toks = tokenize(sql).unwrap();
        let t = &d.tables[0];
        assert_eq!(toks[t.name_tok.unwrap() as usize].text(sql), "`t x`");
        assert_eq!(toks[t.schema_tok.unwrap() as usize].text(sql), "shop");
        assert_eq!(t.alias.as_deref(), Some("a"));
        assert!(matches!(
            &d.filter,
            Pred::Cmp {
                value: ValueRef::Neg(_),
                ..
            }
        ));
    }

    #[test]
    fn insert_rows_located() {
        let sql = "INSERT INTO t (a, id) VALUES (1, 2), ((3), 4) ON DUPLICATE KEY UPDATE a = 1";
        let d = dml(sql);
        let toks = tokenize(sql).unwrap();
        let ins = d.insert.unwrap();
        assert_eq!(ins.rows.len(), 2);
        let r = &ins.rows[1];
        assert_eq!(
            &sql[toks[r.first_tok as usize].start as usize..toks[r.last_tok as usize].end as usize],
            "((3), 4)"
        );
        assert_eq!(ins.on_duplicate_assigned[0].column, "a");
    }

    #[test]
    fn unparsable_mysql_forms_are_patched_same_length() {
        let d = dml("SELECT a FROM t WHERE id = 1 AND b MOD 2 = 1 LOCK IN SHARE MODE");
        assert_eq!(d.tables.len(), 1);
    }
}
