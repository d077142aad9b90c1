//! SELECTs refused across shards, answered on one MariaDB ([`RoutePlan::Gather`]): the rows of
//! every table the statement reads are copied into TEMPORARY tables on one connection of one
//! datanode (the "scratch"), and the statement itself runs there over the copies.
//!
//! MariaDB evaluates every predicate, join, comparison, collation, NULL rule and aggregate;
//! Shoal only moves rows, so the answer is one MariaDB's by construction. This is the fallback
//! after [`super::bind`]: a SELECT whose refusal is a cross-shard one (joins of tables that are
//! not co-located, UNION, WITH, derived tables, correlated subqueries, aggregates that do not
//! merge, window functions, ...).
//!
//! What stays refused, by name: locking reads (a lock on a copy locks nothing), `SELECT ...
//! INTO`, the catalog (`information_schema` and the other system schemas), functions that
//! answer for the connection (`DATABASE()`, `USER()`, `CONNECTION_ID()`, `FOUND_ROWS()`, ...:
//! the scratch connection would answer for itself), user variables, sequences, and anything the
//! statement reader cannot locate every table reference of.
//!
//! Each table reference becomes its copy under the name it is known by in the statement
//! (``FROM `orders` o`` -> ``FROM shoal_g1 o``, ``FROM shop.orders`` -> ``FROM shoal_g1 AS
//! `orders` ``), so that qualifiers and the result's column names keep working; ``shop.orders.id``
//! loses its schema. A table referenced several times is copied once (MariaDB reopens a
//! temporary table since 10.2).

use super::placement::{self, Kind};

mod pushdown;
use super::router::Router;
use super::{RoutePlan, Target};
use crate::charset::Charsets;
use crate::error::RouterError;
use crate::sql::SqlMode;
use crate::sql::analyze::{self, Source};
use crate::sql::lex::{TokKind, Token};
use crate::sql::normalize;
use crate::sql::stmt::DmlKind;
use crate::topology::DatanodeId;

/// A SELECT answered over copies of its tables on one datanode.
#[derive(Debug, Clone, PartialEq)]
pub struct Gather {
    /// The tables to copy, in the order they are first referenced.
    pub copies: Vec<Copy>,
    /// Where the copies are made and the statement runs.
    pub scratch: DatanodeId,
    /// The statement with every table reference naming its copy.
    pub statement: String,
}

/// One table copied into a temporary table.
#[derive(Debug, Clone, PartialEq)]
pub struct Copy {
    /// The temporary table (`shoal_g1`, ...).
    pub temp: String,
    /// The logical schema and table.
    pub schema: String,
    pub table: String,
    /// Where the table's definition is read (its first shard, or its datanode) and its
    /// physical name there.
    pub definition: (DatanodeId, String),
    /// What follows the select list of the fetch: `` FROM `schema`.`table` `` in logical
    /// names (the executor writes the column list and plans the fetch as any SELECT).
    pub from: String,
    /// The fetch as planned with `*` for its columns: where it runs (EXPLAIN ROUTE).
    pub plan: RoutePlan,
    /// `` FROM `schema`.`table` AS `q` `` (`q`: the name the statement knows it by) and the
    /// conditions pushed into its read: what [`Self::fetch_with`] writes.
    pub table_sql: String,
    pub known_as: String,
    pub conds: Vec<String>,
    /// Read only the rows whose `column` equals a value another copy read (an inner join's
    /// equality): see [`Bind`].
    pub bind: Option<Bind>,
    /// Columns an inner join's equality compares: indexed in the copy (where their type
    /// allows a short key), so that the join on the scratch looks rows up instead of
    /// scanning the other copy once per row.
    pub join_columns: Vec<String>,
}

/// Values of a [`Bind`] per read.
pub const BIND_BATCH: usize = 1000;

/// Distinct values past which a [`Bind`] is given up (the copy is read whole).
pub const BIND_MAX_VALUES: usize = 20_000;

/// An inner join's `a.x = b.y` between two copies: `b` is read after `a`, with `b.y IN (the
/// values of a.x a's copy holds)` in batches, when the two columns are integers (the executor
/// decides: an IN list of integers compares as the equality does) and `a` holds few enough
/// distinct values; else `b` is read whole. A row of `b` that matches no row of `a` is in no
/// result row.
#[derive(Debug, Clone, PartialEq)]
pub struct Bind {
    /// The copy read first, and its column.
    pub source: usize,
    pub source_column: String,
    /// This copy's column.
    pub column: String,
}

impl Copy {
    /// The fetch with `columns` as its select list.
    pub fn fetch(&self, columns: &str) -> String {
        format!("SELECT {columns}{}", self.from)
    }

    /// The fetch with `columns` as its select list and `extra` among its conditions.
    pub fn fetch_with(&self, columns: &str, extra: &str) -> String {
        let mut conds: Vec<String> = self.conds.iter().map(|c| format!("({c})")).collect();
        conds.push(format!("({extra})"));
        format!(
            "SELECT {columns}{} WHERE {}",
            self.table_sql,
            conds.join(" AND ")
        )
    }

    /// The datanodes the fetch reads.
    pub fn datanodes(&self) -> Vec<DatanodeId> {
        match &self.plan {
            RoutePlan::Single(t) => vec![t.datanode],
            RoutePlan::Scatter { targets, .. } => targets.iter().map(|t| t.datanode).collect(),
            _ => Vec::new(),
        }
    }
}

/// Calls whose answer is the connection's own, not the data's: on the scratch connection they
/// would answer for it.
const CONNECTION_FUNCTIONS: &[&str] = &[
    "DATABASE",
    "SCHEMA",
    "USER",
    "SESSION_USER",
    "SYSTEM_USER",
    "CURRENT_USER",
    "CURRENT_ROLE",
    "CONNECTION_ID",
    "FOUND_ROWS",
    "ROW_COUNT",
    "LAST_INSERT_ID",
    "NEXTVAL",
    "LASTVAL",
    "SETVAL",
    "GET_LOCK",
    "RELEASE_LOCK",
    "IS_FREE_LOCK",
    "IS_USED_LOCK",
    "RELEASE_ALL_LOCKS",
    "SLEEP",
    "BENCHMARK",
    "LOAD_FILE",
    "MASTER_POS_WAIT",
    "MASTER_GTID_WAIT",
];

/// `what` stays refused across shards, for `why`.
fn refuse(what: impl std::fmt::Display, why: &str) -> RouterError {
    placement::refuse(format!(
        "{what} across shards (not gathered on one datanode: {why})"
    ))
}

/// The gather plan of `sql` (tokens `toks`, without placeholders: a prepared statement's
/// values are written in first), which the planner refused across shards. `Err`: the SELECT
/// cannot be gathered, and why (the caller keeps the planner's refusal unless this one names
/// a reason the statement stays refused for).
pub(crate) fn plan(
    router: &Router,
    current: Option<&str>,
    mode: SqlMode,
    cs: Charsets,
    sql: &str,
    toks: &[Token],
) -> Result<Gather, Option<RouterError>> {
    let first = toks.first();
    if !first
        .is_some_and(|t| t.is_kw(sql, "SELECT") || t.is_kw(sql, "WITH") || t.is_punct(sql, "("))
    {
        return Err(None);
    }
    if toks.iter().any(|t| t.kind == TokKind::Placeholder) {
        return Err(None);
    }
    let shape = normalize::shape_with_prefix(sql, toks, "", mode);
    let dml = analyze::analyze(&Source::with_mode(sql, toks, &shape, mode)).map_err(|_| None)?;
    if dml.kind != DmlKind::Select || dml.unsupported.is_some() || dml.tables.is_empty() {
        return Err(None);
    }
    let tables = placement::resolve(router.topology(), current, &dml.tables).map_err(|_| None)?;
    // The catalog is answered apart (its refusal stands).
    if tables
        .iter()
        .any(|t| matches!(t.kind, Kind::System) || t.schema.is_none())
    {
        return Err(None);
    }
    stays_refused(sql, toks).map_err(Some)?;
    // (token range replaced, replacement)
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut copies: Vec<Copy> = Vec::new();
    let refs_to = |i: usize| {
        tables
            .iter()
            .filter(|o| {
                o.schema
                    .as_deref()
                    .unwrap_or_default()
                    .eq_ignore_ascii_case(tables[i].schema.as_deref().unwrap_or_default())
                    && o.r.name.eq_ignore_ascii_case(&tables[i].r.name)
            })
            .count()
    };
    let pushdown::Pushed {
        filters: mut pushed,
        keys,
        equalities,
    } = pushdown::filters(sql, toks, &dml.tables);
    for (i, f) in pushed.iter_mut().enumerate() {
        // A copy several references share holds every row.
        if refs_to(i) > 1 {
            f.clear();
        }
    }
    let mut copy_of = vec![0usize; tables.len()];
    for (i, t) in tables.iter().enumerate() {
        let Some(schema) = t.schema.clone() else {
            return Err(Some(refuse(
                format!("system table {}", t.r.name),
                "the catalog is answered apart",
            )));
        };
        let Some(name_tok) = t.r.name_tok.map(|n| n as usize) else {
            return Err(None);
        };
        let definition = match &t.kind {
            Kind::Distributed { shards, .. } => {
                let s = shards.first().ok_or(None)?;
                (s.datanode, s.physical_table.clone())
            }
            Kind::Global { datanodes } => (*datanodes.first().ok_or(None)?, t.r.name.clone()),
            Kind::Single { datanode } => (*datanode, t.r.name.clone()),
            Kind::System => return Err(None),
        };
        let shared = copies.iter().position(|c| {
            c.schema.eq_ignore_ascii_case(&schema) && c.table.eq_ignore_ascii_case(&t.r.name)
        });
        let k = match shared {
            Some(k) => k,
            None => {
                let mut from = format!(" FROM {}.{}", quote(&schema), quote(&t.r.name));
                let known_as = t.r.alias.clone().unwrap_or_else(|| t.r.name.clone());
                let table_sql = format!("{from} AS {}", quote(&known_as));
                if !pushed[i].is_empty() {
                    from.push_str(&format!(" AS {} WHERE ", quote(&known_as)));
                    let conj: Vec<String> = pushed[i].iter().map(|c| format!("({c})")).collect();
                    from.push_str(&conj.join(" AND "));
                }
                let fetch = format!("SELECT *{from}");
                let plan = router.route_in(current, mode, cs, &fetch, &[]);
                match &plan {
                    RoutePlan::Single(_)
                    | RoutePlan::Scatter {
                        merge: super::Merge::Rows(_),
                        ..
                    } => {}
                    RoutePlan::Refuse(e) => return Err(Some(e.clone())),
                    _ => return Err(None),
                }
                copies.push(Copy {
                    temp: format!("shoal_g{}", copies.len() + 1),
                    schema,
                    table: t.r.name.clone(),
                    definition,
                    from,
                    plan,
                    table_sql,
                    known_as,
                    conds: pushed[i].clone(),
                    bind: None,
                    join_columns: Vec::new(),
                });
                copies.len() - 1
            }
        };
        copy_of[i] = k;
        let start = t.r.schema_tok.map_or(name_tok, |s| s as usize);
        let alias = match &t.r.alias {
            Some(_) => String::new(),
            None => format!(" AS {}", quote(&t.r.name)),
        };
        edits.push((start, name_tok, format!("{}{alias}", copies[k].temp)));
    }
    // Inner-join equalities between copies of their own: the later read is bound by the
    // earlier one's values (one binding per copy).
    for (i, ci, j, cj) in keys.iter().chain(&equalities) {
        for (t, c) in [(*i, ci), (*j, cj)] {
            let cols = &mut copies[copy_of[t]].join_columns;
            if !cols.iter().any(|x| x.eq_ignore_ascii_case(c)) {
                cols.push(c.clone());
            }
        }
    }
    for (i, ci, j, cj) in keys {
        if refs_to(i) > 1 || refs_to(j) > 1 {
            continue;
        }
        let (a, ca, b, cb) = if copy_of[i] < copy_of[j] {
            (copy_of[i], ci, copy_of[j], cj)
        } else {
            (copy_of[j], cj, copy_of[i], ci)
        };
        if a != b && copies[b].bind.is_none() {
            copies[b].bind = Some(Bind {
                source: a,
                source_column: ca,
                column: cb,
            });
        }
    }
    // `db.t.c`: the copy is known as `t`.
    for q in &dml.qualifiers {
        if let (Some(s), Some(_)) = (q.schema_tok, q.table_tok) {
            let s = s as usize;
            if toks.get(s + 1).is_some_and(|d| d.is_punct(sql, ".")) {
                edits.push((s, s + 1, String::new()));
            }
        }
    }
    // A result column named by its expression's text keeps the name written: an item of the
    // select list naming the result whose text changes gets that text as its alias.
    for (first, last) in unaliased_items(sql, toks) {
        if edits.iter().any(|e| e.0 >= first && e.1 <= last)
            && !column_ref(sql, &toks[first..=last])
        {
            let written = &sql[toks[first].start as usize..toks[last].end as usize];
            if written.chars().count() > 255 {
                return Err(None);
            }
            let name = written.trim_start();
            edits.push((
                last,
                last,
                format!("{} AS {}", toks[last].text(sql), quote(name)),
            ));
        }
    }
    edits.sort_by_key(|e| e.0);
    edits.dedup_by_key(|e| e.0);
    let mut statement = String::with_capacity(sql.len() + 16 * edits.len());
    let mut at = 0usize;
    for (first, last, with) in &edits {
        let (s, e) = (toks[*first].start as usize, toks[*last].end as usize);
        if s < at {
            return Err(None);
        }
        statement.push_str(&sql[at..s]);
        statement.push_str(with);
        at = e;
    }
    statement.push_str(&sql[at..]);
    let scratch = copies
        .first()
        .and_then(|c| c.datanodes().first().copied())
        .ok_or(None)?;
    Ok(Gather {
        copies,
        scratch,
        statement,
    })
}

/// Why a SELECT that could be gathered is not: what a copy cannot answer for.
fn stays_refused(sql: &str, toks: &[Token]) -> Result<(), RouterError> {
    for (i, t) in toks.iter().enumerate() {
        let kw = |k: usize, w: &str| toks.get(k).is_some_and(|t| t.is_kw(sql, w));
        if t.is_kw(sql, "FOR") && (kw(i + 1, "UPDATE") || kw(i + 1, "SHARE")) {
            return Err(refuse(
                "a locking read (FOR UPDATE)",
                "a lock on a copy locks nothing",
            ));
        }
        if t.is_kw(sql, "LOCK") && kw(i + 1, "IN") && kw(i + 2, "SHARE") {
            return Err(refuse(
                "a locking read (LOCK IN SHARE MODE)",
                "a lock on a copy locks nothing",
            ));
        }
        if t.is_kw(sql, "INTO") {
            return Err(refuse("SELECT ... INTO", "it writes"));
        }
        if t.is_kw(sql, "SQL_CALC_FOUND_ROWS") {
            return Err(refuse(
                "SQL_CALC_FOUND_ROWS",
                "FOUND_ROWS() would be the copy's",
            ));
        }
        if t.kind == TokKind::Variable && !t.text(sql).starts_with("@@") {
            return Err(refuse(
                "a user variable",
                "the variable is the session's, not the copy connection's",
            ));
        }
        let called = toks.get(i + 1).is_some_and(|n| n.is_punct(sql, "("));
        let after_dot = i > 0 && toks[i - 1].is_punct(sql, ".");
        if t.kind == TokKind::Word
            && !after_dot
            && (called || t.is_kw(sql, "CURRENT_USER") || t.is_kw(sql, "CURRENT_ROLE"))
            && let Some(f) = CONNECTION_FUNCTIONS.iter().find(|f| t.is_kw(sql, f))
        {
            return Err(refuse(
                format!("{f}()"),
                "the copy's connection would answer for itself",
            ));
        }
        if t.is_kw(sql, "NEXT") && kw(i + 1, "VALUE")
            || t.is_kw(sql, "PREVIOUS") && kw(i + 1, "VALUE")
        {
            return Err(refuse("a sequence", "it is the datanodes'"));
        }
    }
    Ok(())
}

/// Words after which a select list's last word is no alias.
const NOT_BEFORE_ALIAS: &[&str] = &[
    "AS", "COLLATE", "IS", "NOT", "BINARY", "AND", "OR", "XOR", "DIV", "MOD", "LIKE", "REGEXP",
    "RLIKE", "IN", "BETWEEN", "INTERVAL", "SELECT", "DISTINCT", "ALL", "CASE", "WHEN", "THEN",
    "ELSE",
];

/// Words that end an expression, never an alias.
const NOT_ALIAS: &[&str] = &["END", "NULL", "TRUE", "FALSE", "UNKNOWN"];

/// The items of the select list that names the statement's result columns (the first SELECT
/// of its outermost query) written without an alias, as inclusive token ranges.
fn unaliased_items(sql: &str, toks: &[Token]) -> Vec<(usize, usize)> {
    let mut depth = 0i32;
    let mut at = None;
    for (i, t) in toks.iter().enumerate() {
        if t.is_kw(sql, "SELECT") {
            // After WITH, the query's own SELECT is at depth 0; a statement opening with
            // parentheses has its first SELECT inside them.
            if !toks[0].is_kw(sql, "WITH") || depth == 0 {
                at = Some((i, depth));
                break;
            }
        }
        if t.is_punct(sql, "(") {
            depth += 1;
        } else if t.is_punct(sql, ")") {
            depth -= 1;
        }
    }
    let Some((select, level)) = at else {
        return Vec::new();
    };
    const MODIFIERS: &[&str] = &[
        "ALL",
        "DISTINCT",
        "DISTINCTROW",
        "HIGH_PRIORITY",
        "STRAIGHT_JOIN",
        "SQL_SMALL_RESULT",
        "SQL_BIG_RESULT",
        "SQL_BUFFER_RESULT",
        "SQL_CACHE",
        "SQL_NO_CACHE",
        "SQL_CALC_FOUND_ROWS",
    ];
    let mut i = select + 1;
    while toks
        .get(i)
        .is_some_and(|t| MODIFIERS.iter().any(|m| t.is_kw(sql, m)))
    {
        i += 1;
    }
    let mut items = Vec::new();
    let mut start = i;
    let mut d = level;
    while i <= toks.len() {
        let t = toks.get(i);
        let end = match t {
            None => true,
            Some(t) => {
                d == level
                    && (t.is_punct(sql, ",")
                        || t.is_punct(sql, ")")
                        || t.is_punct(sql, ";")
                        || crate::sql::clauses::is_one_of(sql, t, crate::sql::clauses::ITEM_ENDS))
            }
        };
        if end {
            if i > start && !aliased(sql, &toks[start..i]) {
                items.push((start, i - 1));
            }
            if !t.is_some_and(|t| t.is_punct(sql, ",")) {
                break;
            }
            start = i + 1;
        } else if let Some(t) = t {
            if t.is_punct(sql, "(") {
                d += 1;
            } else if t.is_punct(sql, ")") {
                d -= 1;
            }
        }
        i += 1;
    }
    items
}

/// Whether a select item ends with an alias (`AS a`, or an expression followed by a name).
fn aliased(sql: &str, item: &[Token]) -> bool {
    let n = item.len();
    if n < 2 {
        return false;
    }
    let (last, before) = (&item[n - 1], &item[n - 2]);
    if before.is_kw(sql, "AS") {
        return true;
    }
    let name = matches!(
        last.kind,
        TokKind::QuotedIdent | TokKind::Str | TokKind::DqStr
    ) || (last.kind == TokKind::Word && !NOT_ALIAS.iter().any(|w| last.is_kw(sql, w)));
    let ends_expression = match before.kind {
        TokKind::Word => !NOT_BEFORE_ALIAS.iter().any(|w| before.is_kw(sql, w)),
        TokKind::Punct => before.is_punct(sql, ")"),
        TokKind::Placeholder | TokKind::Variable => true,
        _ => true,
    };
    name && ends_expression && !before.is_punct(sql, ".")
}

/// Whether a select item is a column (`c`, `t.c`, `db.t.c`): named by the column, whatever
/// qualifies it.
fn column_ref(sql: &str, item: &[Token]) -> bool {
    let ident = |t: &Token| matches!(t.kind, TokKind::Word | TokKind::QuotedIdent);
    item.iter().enumerate().all(|(k, t)| {
        if k % 2 == 0 {
            ident(t)
        } else {
            t.is_punct(sql, ".")
        }
    }) && item.len() % 2 == 1
}

/// `name` as a backquoted identifier.
pub fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// EXPLAIN ROUTE's targets of a copy.
pub(crate) fn fetch_targets(c: &Copy) -> Vec<&Target> {
    match &c.plan {
        RoutePlan::Single(t) => vec![t],
        RoutePlan::Scatter { targets, .. } => targets.iter().collect(),
        _ => Vec::new(),
    }
}
