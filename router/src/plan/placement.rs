//! Where the tables of a statement live: resolution against the topology, co-location groups
//! (a sharded table with its ER children, or tables with the same rule and layout, joined on
//! their distribution columns), and route expressions over a group's distribution columns.

use std::ops::Bound;
use std::sync::Arc;

use super::namespace;
use crate::error::{RouterError, codes};
use crate::rule::ShardRule;
use crate::sql::lex::Token;
use crate::sql::stmt::{CmpOp, ColRef, Pred, TableRef, ValueRef};
use crate::topology::{DatanodeId, Shard, TableDef, Topology};

/// Schemas every MySQL server has; their tables are the same kind of thing on every datanode.
const SYSTEM_SCHEMAS: &[&str] = &["information_schema", "mysql", "performance_schema", "sys"];

/// What a table reference is.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// A sharded table or an ER child: `shards[i]` is where shard `i` of the family lives.
    Distributed {
        /// Root table name (the family), and the root's rule.
        root: String,
        rule: Arc<ShardRule>,
        /// Distribution column: the shard key, or a child's join key (which carries the root's
        /// shard key value).
        column: String,
        shards: Vec<Shard>,
    },
    Global {
        datanodes: Vec<DatanodeId>,
    },
    /// Not listed: lives on the schema's default datanode.
    Single {
        datanode: DatanodeId,
    },
    /// information_schema & co.
    System,
}

/// A resolved table reference.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    pub r: TableRef,
    /// Logical schema (None for system schemas).
    pub schema: Option<String>,
    pub kind: Kind,
}

impl Table {
    pub fn label(&self) -> String {
        match &self.schema {
            Some(s) => format!("{s}.{}", self.r.name),
            None => self.r.name.clone(),
        }
    }
}

pub(crate) fn refuse(construct: impl std::fmt::Display) -> RouterError {
    RouterError::with(
        codes::ER_NOT_SUPPORTED_YET,
        format!("This version of Shoal doesn't yet support '{construct}'"),
    )
}

/// Resolve every table reference against the topology.
pub(crate) fn resolve(
    topo: &Topology,
    current: Option<&str>,
    refs: &[TableRef],
) -> Result<Vec<Table>, RouterError> {
    refs.iter().map(|r| resolve_one(topo, current, r)).collect()
}

pub(crate) fn resolve_one(
    topo: &Topology,
    current: Option<&str>,
    r: &TableRef,
) -> Result<Table, RouterError> {
    let schema_name = match (&r.schema, current) {
        (Some(s), _) => s.as_str(),
        (None, Some(c)) => c,
        (None, None) => {
            return Err(RouterError::with(
                codes::ER_NO_DB_ERROR,
                "No database selected",
            ));
        }
    };
    let Some(schema) = find_schema(topo, schema_name) else {
        if SYSTEM_SCHEMAS
            .iter()
            .any(|s| s.eq_ignore_ascii_case(schema_name))
        {
            namespace::check_system_table_read(schema_name, &r.name)?;
            return Ok(Table {
                r: r.clone(),
                schema: None,
                kind: Kind::System,
            });
        }
        return Err(RouterError::with(
            codes::ER_BAD_DB_ERROR,
            format!("Unknown database '{schema_name}'"),
        ));
    };
    let kind = match schema.table(&r.name) {
        Some(TableDef::Sharded(t)) => Kind::Distributed {
            root: t.name.to_ascii_lowercase(),
            rule: t.rule.clone(),
            column: t.shard_key.clone(),
            shards: t.shards.clone(),
        },
        Some(TableDef::Child(c)) => {
            let root = topo
                .sharded_root(&schema.name, &c.name)
                .ok_or_else(|| refuse(format!("child table {} without a sharded root", c.name)))?;
            Kind::Distributed {
                root: root.name.to_ascii_lowercase(),
                rule: root.rule.clone(),
                column: c.join_key.clone(),
                shards: c.shards.clone(),
            }
        }
        Some(TableDef::Global(g)) => Kind::Global {
            datanodes: g.datanodes.clone(),
        },
        // A table-per-shard table's physical names are not tables of the logical schema.
        None if namespace::is_physical_name(schema, &r.name) => {
            return Err(namespace::no_such_table(&schema.name, &r.name));
        }
        None => match schema.default_datanode {
            Some(dn) => Kind::Single { datanode: dn },
            None => {
                return Err(RouterError::with(
                    codes::ER_NO_SUCH_TABLE,
                    format!("Table '{}.{}' doesn't exist", schema.name, r.name),
                ));
            }
        },
    };
    Ok(Table {
        r: r.clone(),
        schema: Some(schema.name.clone()),
        kind,
    })
}

pub(crate) fn find_schema<'t>(
    topo: &'t Topology,
    name: &str,
) -> Option<&'t crate::topology::LogicalSchema> {
    topo.schemas.get(name).or_else(|| {
        topo.schemas
            .values()
            .find(|s| s.name.eq_ignore_ascii_case(name))
    })
}

/// Index of the table a qualified column refers to (by alias, else by name), among `cands`.
pub(crate) fn table_of_qualifier(tables: &[Table], col: &ColRef, cands: &[usize]) -> Option<usize> {
    let q = col.table.as_deref()?;
    let mut found = None;
    for &i in cands {
        if qualifies(&tables[i], q, col.schema.as_deref()) {
            if found.is_some() {
                return None;
            }
            found = Some(i);
        }
    }
    found
}

/// Whether qualifier `q` (with its schema, if written) names table `t`: by its alias when it
/// has one, else by its name.
pub(crate) fn qualifies(t: &Table, q: &str, schema: Option<&str>) -> bool {
    match &t.r.alias {
        Some(a) => schema.is_none() && a.eq_ignore_ascii_case(q),
        None => {
            t.r.name.eq_ignore_ascii_case(q)
                && match (schema, &t.schema) {
                    (Some(cs), Some(ts)) => cs.eq_ignore_ascii_case(ts),
                    (Some(_), None) => false,
                    (None, _) => true,
                }
        }
    }
}

/// The table a column refers to, for routing: qualified by alias/name, or unqualified when it
/// names the distribution column of exactly one candidate (otherwise MySQL itself would call
/// it ambiguous, or it is not a distribution column).
pub(crate) fn table_of_column(tables: &[Table], col: &ColRef, cands: &[usize]) -> Option<usize> {
    if col.table.is_some() {
        return table_of_qualifier(tables, col, cands);
    }
    let mut found = None;
    for &i in cands {
        if let Kind::Distributed { column, .. } = &tables[i].kind
            && column.eq_ignore_ascii_case(&col.column)
        {
            if found.is_some() {
                return None;
            }
            found = Some(i);
        }
    }
    found
}

/// Distribution column of a table, if it is distributed.
pub(crate) fn dist_column(t: &Table) -> Option<&str> {
    match &t.kind {
        Kind::Distributed { column, .. } => Some(column),
        _ => None,
    }
}

pub(crate) fn compatible(a: &Table, b: &Table) -> bool {
    match (&a.kind, &b.kind) {
        (
            Kind::Distributed {
                root: ra,
                rule: rule_a,
                shards: sa,
                ..
            },
            Kind::Distributed {
                root: rb,
                rule: rule_b,
                shards: sb,
                ..
            },
        ) => {
            (ra == rb && a.schema == b.schema)
                || (rule_a == rule_b
                    && sa.len() == sb.len()
                    && sa.iter().zip(sb).all(|(x, y)| x.datanode == y.datanode))
        }
        _ => false,
    }
}

/// Co-location groups of the distributed tables: union of tables joined by an equality of
/// their distribution columns. Returns, per table, its group number (None if not distributed).
///
/// With `one_scope` (the statement is one SELECT scope), an unqualified column of an equality
/// is resolved to the one table whose distribution column has its name: MariaDB resolves it
/// to the one table in scope having such a column, and two would make it ambiguous (1052).
/// In a statement with subqueries an unqualified name may be an inner table's own column, so
/// only qualified equalities count there.
///
/// `links` are pairs of tables joined on their distribution columns found by block (see
/// [`super::scope::Scopes::key_equalities`]); they co-locate when compatible.
pub(crate) fn groups(
    tables: &[Table],
    equalities: &[(ColRef, ColRef)],
    one_scope: bool,
    links: &[(usize, usize)],
) -> Vec<Option<usize>> {
    let n = tables.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(p: &mut [usize], x: usize) -> usize {
        let mut x = x;
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    let all: Vec<usize> = (0..n).collect();
    let resolve = |c: &ColRef| match &c.table {
        Some(_) => table_of_qualifier(tables, c, &all),
        None if one_scope => table_of_column(tables, c, &all),
        None => None,
    };
    for (a, b) in equalities {
        let (Some(ia), Some(ib)) = (resolve(a), resolve(b)) else {
            continue;
        };
        let (Some(ca), Some(cb)) = (dist_column(&tables[ia]), dist_column(&tables[ib])) else {
            continue;
        };
        if ca.eq_ignore_ascii_case(&a.column)
            && cb.eq_ignore_ascii_case(&b.column)
            && compatible(&tables[ia], &tables[ib])
        {
            let (ra, rb) = (find(&mut parent, ia), find(&mut parent, ib));
            parent[ra] = rb;
        }
    }
    for &(ia, ib) in links {
        if compatible(&tables[ia], &tables[ib]) {
            let (ra, rb) = (find(&mut parent, ia), find(&mut parent, ib));
            parent[ra] = rb;
        }
    }
    let mut ids: Vec<Option<usize>> = vec![None; n];
    let mut roots: Vec<usize> = Vec::new();
    for i in 0..n {
        if dist_column(&tables[i]).is_none() {
            continue;
        }
        let r = find(&mut parent, i);
        let g = match roots.iter().position(|&x| x == r) {
            Some(g) => g,
            None => {
                roots.push(r);
                roots.len() - 1
            }
        };
        ids[i] = Some(g);
    }
    ids
}

/// A route over a group's distribution column, evaluated with statement values.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RouteExpr {
    /// Every shard.
    All,
    /// `= v` / `IN (v, ...)`
    Eq(Vec<ValueRef>),
    /// `<=> v`
    NullSafe(ValueRef),
    /// `IS NULL`
    IsNull,
    Range(Bound<ValueRef>, Bound<ValueRef>),
    And(Vec<RouteExpr>),
    Or(Vec<RouteExpr>),
}

/// Route expression of group `g` from the statement's filter.
pub(crate) fn route_expr(
    pred: &Pred,
    tables: &[Table],
    group_of: &[Option<usize>],
    g: usize,
    top: &[usize],
) -> RouteExpr {
    let leaf = |col: &ColRef| -> Option<usize> {
        let i = table_of_column(tables, col, top)?;
        dist_column(&tables[i])
            .filter(|c| c.eq_ignore_ascii_case(&col.column))
            .map(|_| i)
    };
    route_expr_by(pred, tables, group_of, g, &leaf)
}

/// [`route_expr`] with the table whose distribution column a column is found by `leaf`.
pub(crate) fn route_expr_by(
    pred: &Pred,
    tables: &[Table],
    group_of: &[Option<usize>],
    g: usize,
    leaf_table: &dyn Fn(&ColRef) -> Option<usize>,
) -> RouteExpr {
    let leaf = |col: &ColRef| -> Option<&Table> {
        let i = leaf_table(col)?;
        (group_of[i] == Some(g)).then(|| &tables[i])
    };
    match pred {
        Pred::Unknown => RouteExpr::All,
        Pred::Cmp { col, op, value } => {
            let Some(t) = leaf(col) else {
                return RouteExpr::All;
            };
            let v = value.clone();
            match op {
                CmpOp::Eq => RouteExpr::Eq(vec![v]),
                // On the NULL-extended side of an outer join, `<=> NULL` also matches rows
                // the join made up: they come from every shard.
                CmpOp::NullSafeEq if t.r.outer_nullable => RouteExpr::All,
                CmpOp::NullSafeEq => RouteExpr::NullSafe(v),
                CmpOp::Lt => RouteExpr::Range(Bound::Unbounded, Bound::Excluded(v)),
                CmpOp::Le => RouteExpr::Range(Bound::Unbounded, Bound::Included(v)),
                CmpOp::Gt => RouteExpr::Range(Bound::Excluded(v), Bound::Unbounded),
                CmpOp::Ge => RouteExpr::Range(Bound::Included(v), Bound::Unbounded),
            }
        }
        Pred::In { col, values } => match leaf(col) {
            Some(_) => RouteExpr::Eq(values.clone()),
            None => RouteExpr::All,
        },
        Pred::Between { col, low, high } => match leaf(col) {
            Some(_) => {
                RouteExpr::Range(Bound::Included(low.clone()), Bound::Included(high.clone()))
            }
            None => RouteExpr::All,
        },
        Pred::IsNull { col } => match leaf(col) {
            Some(t) if !t.r.outer_nullable => RouteExpr::IsNull,
            _ => RouteExpr::All,
        },
        Pred::And(ps) => {
            let v: Vec<_> = ps
                .iter()
                .map(|p| route_expr_by(p, tables, group_of, g, leaf_table))
                .filter(|r| *r != RouteExpr::All)
                .collect();
            match v.len() {
                0 => RouteExpr::All,
                1 => v.into_iter().next().unwrap_or(RouteExpr::All),
                _ => RouteExpr::And(v),
            }
        }
        Pred::Or(ps) => {
            let v: Vec<_> = ps
                .iter()
                .map(|p| route_expr_by(p, tables, group_of, g, leaf_table))
                .collect();
            if v.contains(&RouteExpr::All) {
                RouteExpr::All
            } else {
                RouteExpr::Or(v)
            }
        }
    }
}

/// Why a SELECT over several shards would not be the union of its shards' answers, if it would
/// not. Each shard answers with its own rows of the distributed tables; a row that holds no
/// row of a distributed table (a global, unlisted or system table's row on the preserved side
/// of an outer join whose distributed side is NULL-extended, or any row of a statement whose
/// distributed tables are only in subqueries) is computed by every shard from its part of the
/// distributed rows: repeated, or made up where another shard has the match. A top-level
/// distributed table that no outer join NULL-extends puts one of its rows in every result
/// row, so every row comes from the one shard holding it.
pub(crate) fn unanchored_rows(
    tables: &[Table],
    top: &[usize],
    sql: &str,
    toks: &[Token],
) -> Option<RouterError> {
    let distributed = |i: &usize| matches!(tables[*i].kind, Kind::Distributed { .. });
    if top
        .iter()
        .any(|i| distributed(i) && !tables[*i].r.outer_nullable)
    {
        return None;
    }
    let d = (0..tables.len()).find(distributed)?;
    let others: Vec<usize> = top.iter().copied().filter(|i| !distributed(i)).collect();
    if let Some(&nd) = top.iter().find(|i| distributed(i)) {
        let Some(p) = others
            .iter()
            .copied()
            .find(|&i| !tables[i].r.outer_nullable)
            .or(others.first().copied())
        else {
            return Some(refuse(format!(
                "an outer join with the {} NULL-extended across shards",
                kind_name(&tables[nd])
            )));
        };
        return Some(refuse(format!(
            "{} with the {} preserved against the {} across shards (every shard would add its \
             own NULL-extended rows)",
            outer_join_name(&tables[p], &tables[nd], sql, toks),
            kind_name(&tables[p]),
            kind_name(&tables[nd]),
        )));
    }
    Some(refuse(match others.first() {
        Some(&o) => format!(
            "a subquery over the {} in a query over the {} across shards (every shard would \
             answer for the {}'s rows)",
            kind_name(&tables[d]),
            kind_name(&tables[o]),
            tables[o].r.name,
        ),
        None => format!(
            "a subquery over the {} in a SELECT without a sharded table across shards",
            kind_name(&tables[d]),
        ),
    }))
}

/// `global table regions`, `sharded table customers`...
fn kind_name(t: &Table) -> String {
    let kind = match &t.kind {
        Kind::Distributed { root, .. } if root.eq_ignore_ascii_case(&t.r.name) => "sharded table",
        Kind::Distributed { .. } => "child table",
        Kind::Global { .. } => "global table",
        Kind::Single { .. } => "unlisted table",
        Kind::System => "table",
    };
    format!("{kind} {}", t.r.name)
}

/// `LEFT JOIN` or `RIGHT JOIN`: the join keyword written between the preserved table `p` and
/// the NULL-extended table `n` (for the message only).
fn outer_join_name(p: &Table, n: &Table, sql: &str, toks: &[Token]) -> &'static str {
    let (Some(a), Some(b)) = (p.r.name_tok, n.r.name_tok) else {
        return "an outer join";
    };
    let (lo, hi) = (a.min(b) as usize, a.max(b) as usize);
    let between = toks.get(lo..hi).unwrap_or(&[]);
    if between.iter().any(|t| t.is_kw(sql, "LEFT")) {
        "LEFT JOIN"
    } else if between.iter().any(|t| t.is_kw(sql, "RIGHT")) {
        "RIGHT JOIN"
    } else {
        "an outer join"
    }
}
