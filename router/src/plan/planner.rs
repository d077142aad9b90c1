//! Building a plan template for a DML statement: value-independent, cached per shape.

use std::sync::Arc;

use super::merge::{self, Ctx, ScatterT};
use super::placement::{self, Kind, RouteExpr, Table, refuse};
use super::render::quote_ident;
use super::scope::Scopes;
use super::{RoutePlan, SessionValue};
use crate::error::RouterError;
use crate::rule::ShardRule;
use crate::sql::SqlMode;
use crate::sql::clauses::{BEFORE_ITEMS_END, ITEM_ENDS, is_one_of};
use crate::sql::current_db::reads_current_database;
use crate::sql::lex::{Token, called_at};
use crate::sql::stmt::{Assigned, ColRef, Dml, DmlKind, ItemKind, ValueRef};
use crate::topology::{DatanodeId, Topology};

/// A cached plan: valid for every statement of the shape whose pinned slots have these texts.
#[derive(Debug)]
pub(crate) struct Template {
    pub pins: Vec<(u16, String)>,
    pub body: Body,
}

#[derive(Debug)]
pub(crate) enum Body {
    /// Value-independent, carries no SQL.
    Done(Box<RoutePlan>),
    /// Table-less SELECT: any datanode, the text as written.
    Any,
    /// `SELECT DATABASE(), USER()`..., answered locally; its LIMIT (count, offset) decides
    /// whether the one row is sent, with the statement's values.
    SessionValues {
        columns: Vec<(String, SessionValue)>,
        limit: Option<(ValueRef, Option<ValueRef>)>,
    },
    /// A SELECT over `information_schema` tables only, some of them catalog tables: answered
    /// by the proxy over the logical catalog, with the statement's text.
    Catalog,
    Dml(Box<DmlT>),
}

/// A routed DML statement.
#[derive(Debug)]
pub(crate) struct DmlT {
    /// Co-location groups of distributed tables, each with its route.
    pub groups: Vec<GroupT>,
    /// The default datanode every unlisted table lives on (all must agree).
    pub fixed: Option<DatanodeId>,
    /// Datanodes holding every global table of the statement (sorted), if any global.
    pub allowed: Option<Vec<DatanodeId>>,
    /// Write to a global table: every datanode of it.
    pub broadcast: Option<Vec<DatanodeId>>,
    /// Name edits.
    pub renames: Vec<RenameT>,
    /// A SELECT that names nothing in the current database but its tables: the name tokens of
    /// the tables written without a database (each as written), which a single target's SQL
    /// qualifies with its datanode's database so that it runs the same on any connection to
    /// the server (see [`crate::sql::current_db`]). `None`: runs in the datanode's database.
    pub qualify: Option<Vec<(u32, String)>>,
    /// For more than one target: the scatter rewrite and merge, or why it is refused.
    pub scatter: Result<Option<ScatterT>, RouterError>,
    pub insert: Option<InsertT>,
    /// Names of the groups' tables, for refusal messages.
    pub labels: Vec<String>,
    /// A SELECT that no join can make co-located (a UNION, a CTE, a derived table): why it
    /// cannot run across shards, which is the real cause when its groups are not co-located.
    pub structural: Option<&'static str>,
    /// An UPDATE that assigns its table's shard key.
    pub key_move: Option<KeyMoveT>,
}

/// An UPDATE of one sharded table that assigns its shard key: rows whose new key value lands
/// on another shard move there ([`super::KeyMove`]).
#[derive(Debug)]
pub(crate) struct KeyMoveT {
    /// The table as written, for messages.
    pub table: String,
    /// The shard key column.
    pub key: String,
    /// The new key value when it is a literal or parameter (`None`: an expression, each row's
    /// new shard is read from the row after the update).
    pub value: Option<ValueRef>,
    /// The columns the UPDATE assigns.
    pub assigned: Vec<String>,
    /// Tokens where the table reference begins, of `SET`, and of `WHERE` if any.
    pub table_tok: u32,
    pub set_tok: u32,
    pub where_tok: Option<u32>,
    /// Why a move of rows cannot be exact, if it cannot (a row staying on its shard is fine).
    pub refuse: Option<RouterError>,
    /// Each shard's physical table.
    pub physical: Vec<String>,
}

#[derive(Debug)]
pub(crate) struct GroupT {
    pub rule: Arc<ShardRule>,
    pub datanodes: Vec<DatanodeId>,
    pub route: RouteExpr,
}

/// Replace token `tok` per target.
#[derive(Debug)]
pub(crate) struct RenameT {
    pub tok: u32,
    pub quoted: bool,
    pub what: RenameWhat,
    /// ` AS <alias>` after the physical name: the logical name as written, so that the
    /// statement's own qualifiers still resolve and MariaDB names result columns (`MIN(t.c)`)
    /// and their `table` field with the logical name.
    pub alias: Option<String>,
}

#[derive(Debug)]
pub(crate) enum RenameWhat {
    /// Physical table name of shard `i` of group `group`.
    Physical { group: usize, names: Vec<String> },
    /// The target datanode's database.
    Database,
    /// This text, as it is (`DATABASE()` -> the logical schema as a literal).
    Text(String),
}

/// A sharded INSERT ... VALUES: rows go to the shard of their key value.
#[derive(Debug)]
pub(crate) struct InsertT {
    pub key_values: Vec<ValueRef>,
    /// `ON DUPLICATE KEY UPDATE key = <value>`: the row stays on its shard only when the value
    /// lands on the shard of the inserted row (whose duplicate lives there).
    pub duplicate_key: Option<ValueRef>,
    /// Token ranges of the rows (None for the single-row `INSERT ... SET` form).
    pub rows: Option<Vec<(u32, u32)>>,
}

fn done(e: RouterError) -> Template {
    Template {
        pins: Vec::new(),
        body: Body::Done(Box::new(RoutePlan::Refuse(e))),
    }
}

/// Plan one analysed DML statement.
pub(crate) fn build(
    topo: &Topology,
    current: Option<&str>,
    mode: SqlMode,
    sql: &str,
    toks: &[Token],
    slot_tokens: &[u32],
    dml: &Dml,
) -> Template {
    let pins = dml
        .pins
        .iter()
        .filter_map(|&s| {
            let t = toks.get(*slot_tokens.get(s as usize)? as usize)?;
            Some((s, t.text(sql).to_string()))
        })
        .collect();
    match build_inner(topo, current, mode, sql, toks, dml) {
        Ok(body) => Template { pins, body },
        Err(e) => done(e),
    }
}

fn build_inner(
    topo: &Topology,
    current: Option<&str>,
    mode: SqlMode,
    sql: &str,
    toks: &[Token],
    dml: &Dml,
) -> Result<Body, RouterError> {
    if let Some(what) = &dml.unsupported {
        return Err(refuse(what));
    }
    let tables = placement::resolve(topo, current, &dml.tables)?;
    if tables.is_empty() {
        if dml.kind == DmlKind::Select {
            return Ok(tableless_select(dml));
        }
        return Err(refuse("a statement without tables"));
    }
    if tables.iter().any(is_catalog) {
        return catalog_select(sql, toks, &tables, dml);
    }
    if let Some(f) = session_function(sql, toks).filter(|f| f != "DATABASE()" && f != "SCHEMA()") {
        return Err(refuse(format!(
            "{f} in a statement over tables (a datanode would answer with its own database \
             and account)"
        )));
    }
    let write = dml.kind != DmlKind::Select;
    let top: Vec<usize> = (0..tables.len())
        .filter(|&i| tables[i].r.top_level)
        .collect();
    let key_assign = if write {
        check_write(&tables, &top, dml)?
    } else {
        None
    };
    // One SELECT scope (no subquery, derived table, UNION or CTE): an unqualified column is
    // the one table's in scope that has it, so a join equality written unqualified
    // (`c_w_id = w_id`) co-locates as its qualified form does.
    let one_scope = !(dml.has_subquery || dml.has_derived_table || dml.has_union || dml.has_cte);
    let mut scopes = Scopes::new(&tables, &dml.blocks);
    let mut links = scopes.key_equalities();
    let insert_link = insert_select_link(&tables, &top, dml, &scopes);
    if let Some((target, source, root)) = insert_link {
        links.push((target, source));
        scopes.adopt(target, root);
    }
    let group_of = placement::groups(&tables, &dml.column_equalities, one_scope, &links);
    let ngroups = group_of.iter().flatten().max().map_or(0, |m| m + 1);

    // Unlisted tables pin the statement to their default datanode; global tables to where
    // they all are.
    let mut fixed: Option<DatanodeId> = None;
    let mut allowed: Option<Vec<DatanodeId>> = None;
    let mut globals_written: Option<Vec<DatanodeId>> = None;
    for (i, t) in tables.iter().enumerate() {
        match &t.kind {
            Kind::Single { datanode } => match fixed {
                Some(f) if f != *datanode => {
                    return Err(refuse(format!(
                        "a statement over tables on different datanodes ({} and {})",
                        topo.datanodes[f].name, topo.datanodes[*datanode].name
                    )));
                }
                _ => fixed = Some(*datanode),
            },
            Kind::Global { datanodes } => {
                let mut d = datanodes.clone();
                d.sort_unstable();
                if write && t.r.top_level && top.len() == 1 && top[0] == i {
                    globals_written = Some(d.clone());
                }
                allowed = Some(match allowed {
                    None => d,
                    Some(a) => a.into_iter().filter(|x| d.contains(x)).collect(),
                });
            }
            _ => {}
        }
    }
    if let Some(a) = &allowed {
        if a.is_empty() {
            return Err(refuse(
                "a statement over global tables with no datanode in common",
            ));
        }
        if let Some(f) = fixed
            && !a.contains(&f)
        {
            return Err(refuse(format!(
                "a statement over a global table that is not on datanode {}",
                topo.datanodes[f].name
            )));
        }
    }
    if let Some(bd) = &globals_written {
        // Every copy must compute the same rows: what it reads must be global on all of them.
        for (i, t) in tables.iter().enumerate() {
            let ok = match &t.kind {
                Kind::Global { datanodes } => bd.iter().all(|d| datanodes.contains(d)),
                Kind::System => true,
                _ => false,
            };
            if !ok {
                return Err(refuse(format!(
                    "a write to global table {} that reads {}",
                    tables[top[0]].label(),
                    tables[i].label()
                )));
            }
        }
    }

    let mut groups = Vec::new();
    let mut labels = Vec::new();
    for g in 0..ngroups {
        let members: Vec<usize> = (0..tables.len())
            .filter(|&i| group_of[i] == Some(g))
            .collect();
        let first = &tables[members[0]];
        let Kind::Distributed { rule, shards, .. } = &first.kind else {
            continue;
        };
        let route = group_route(dml, &tables, &group_of, g, &members, &top, &scopes);
        groups.push(GroupT {
            rule: rule.clone(),
            datanodes: shards.iter().map(|s| s.datanode).collect(),
            route,
        });
        labels.push(
            members
                .iter()
                .map(|&i| tables[i].label())
                .collect::<Vec<_>>()
                .join(", "),
        );
    }

    let mut renames = renames(toks, sql, &tables, &group_of, dml)?;
    renames.extend(database_calls(current, sql, toks)?);
    renames.sort_by_key(|r| r.tok);
    let qualify = qualifications(mode, sql, toks, &tables, dml);

    let mut insert = match (&dml.insert, dml.kind) {
        (Some(ins), DmlKind::Insert) => insert_template(&tables, &top, ins, insert_link.is_some())?,
        _ => None,
    };
    let mut key_move = None;
    if let Some(ka) = key_assign {
        match (&mut insert, dml.kind) {
            (Some(ins), DmlKind::Insert) => ins.duplicate_key = ka.value,
            (None, DmlKind::Insert) => {
                return Err(refuse(format!(
                    "ON DUPLICATE KEY UPDATE of shard key column {}.{} in this INSERT",
                    tables[ka.table].r.name, ka.key
                )));
            }
            _ => key_move = Some(key_move_template(&tables, ka, dml)?),
        }
    }
    // INSERT ... SELECT reading sharded tables runs where they are: on one datanode, or on
    // each shard into its co-located target (every row's key passed through from a source row
    // of that shard) when nothing makes a shard's part depend on other shards' rows.
    let insert_select_scatter = match &dml.insert {
        Some(ins) if dml.kind == DmlKind::Insert && ins.from_select => {
            if insert_link.is_none()
                || ins.source_limited
                || dml.has_subquery
                || dml.has_union
                || dml.has_cte
            {
                Some(refuse(
                    "INSERT ... SELECT that reads several datanodes (pin its sharded tables \
                     to one datanode, or select the co-located target's shard key from a \
                     sharded source without LIMIT or subqueries)",
                ))
            } else {
                None
            }
        }
        _ => None,
    };

    let structural: Option<&'static str> = if write {
        None
    } else if dml.has_union {
        Some("UNION across shards")
    } else if dml.has_cte {
        Some("WITH (common table expressions) across shards")
    } else if dml.has_derived_limit {
        Some(
            "a derived table (subquery in FROM) with LIMIT across shards (its LIMIT and its \
             joins are exact on one shard only)",
        )
    } else if dml.has_derived_table {
        Some("derived tables (subqueries in FROM) across shards")
    } else {
        None
    };
    let scatter = if write {
        if let Some(e) = insert_select_scatter {
            Err(e)
        } else if dml.write_order_or_limit {
            Err(refuse("UPDATE/DELETE with ORDER BY or LIMIT across shards"))
        } else {
            Ok(None)
        }
    } else if let Some(construct) = structural {
        Err(refuse(construct))
    } else if let Some(e) = placement::unanchored_rows(&tables, &top, sql, toks) {
        Err(e)
    } else {
        match &dml.select {
            Some(shape) => {
                let dist_cols: Vec<(usize, String)> = tables
                    .iter()
                    .enumerate()
                    .filter_map(|(i, t)| placement::dist_column(t).map(|c| (i, c.to_string())))
                    .collect();
                let is_dist = |c: &ColRef| -> bool {
                    match placement::table_of_column(&tables, c, &top) {
                        Some(i) => dist_cols
                            .iter()
                            .any(|(j, col)| *j == i && col.eq_ignore_ascii_case(&c.column)),
                        None => false,
                    }
                };
                let ctx = Ctx {
                    is_dist_column: &is_dist,
                    has_calc_found_rows: toks.iter().any(|t| t.is_kw(sql, "SQL_CALC_FOUND_ROWS")),
                    sql,
                    toks,
                };
                merge::plan(shape, &ctx).map(Some)
            }
            None => Err(refuse("this SELECT across shards")),
        }
    };

    Ok(Body::Dml(Box::new(DmlT {
        groups,
        fixed,
        allowed,
        broadcast: globals_written,
        renames,
        qualify,
        scatter,
        insert,
        labels,
        structural,
        key_move,
    })))
}

/// An `information_schema` table answered over the logical catalog.
fn is_catalog(t: &Table) -> bool {
    matches!(t.kind, Kind::System) && super::namespace::is_catalog_table(&t.r.name)
}

/// A statement naming a catalog table: a SELECT whose every table is an `information_schema`
/// one is the proxy's to answer over the logical catalog ([`Body::Catalog`]); anything else
/// would mix the backends' physical catalog with what the backend account reaches.
fn catalog_select(
    sql: &str,
    toks: &[Token],
    tables: &[Table],
    dml: &Dml,
) -> Result<Body, RouterError> {
    let label = tables
        .iter()
        .find(|t| is_catalog(t))
        .map(|t| format!("information_schema.{}", t.r.name.to_ascii_uppercase()))
        .unwrap_or_default();
    if dml.kind != DmlKind::Select {
        return Err(refuse(format!("a write naming {label}")));
    }
    if let Some(t) = tables.iter().find(|t| {
        !matches!(t.kind, Kind::System)
            || !t
                .schema
                .as_deref()
                .or(t.r.schema.as_deref())
                .is_none_or(|s| s.eq_ignore_ascii_case("information_schema"))
    }) {
        return Err(refuse(format!(
            "{label} in a statement over {} (the catalog is answered apart from every other \
             table)",
            t.label()
        )));
    }
    if dml.select.as_ref().is_some_and(|s| s.has_into) {
        return Err(refuse(format!("SELECT ... INTO over {label}")));
    }
    // A DATABASE() inside a select-list expression would rename that column (the proxy puts
    // the schema's name in as a literal).
    for (i, t) in toks.iter().enumerate() {
        if (t.is_kw(sql, "DATABASE") || t.is_kw(sql, "SCHEMA"))
            && called_at(sql, toks, i)
            && !(i > 0 && toks[i - 1].is_punct(sql, "."))
            && toks.get(i + 2).is_some_and(|c| c.is_punct(sql, ")"))
            && let Some(nested) = in_select_list(sql, toks, i)
            && (nested || !select_item_alone(sql, toks, i, i + 2))
        {
            return Err(refuse(format!(
                "{}() inside an expression or subquery of a select list over {label}",
                t.text(sql).to_ascii_uppercase()
            )));
        }
    }
    // The backend that evaluates the statement would answer with Shoal's own account;
    // DATABASE()/SCHEMA() the proxy replaces with the logical schema.
    if let Some(f) = session_function(sql, toks).filter(|f| f != "DATABASE()" && f != "SCHEMA()") {
        return Err(refuse(format!("{f} in a query over {label}")));
    }
    Ok(Body::Catalog)
}

/// A call of a function whose answer Shoal gives for table-less SELECTs (the logical schema,
/// the client's account): beside tables, the statement runs on a datanode, which would give
/// its physical database and Shoal's account instead.
fn session_function(sql: &str, toks: &[Token]) -> Option<String> {
    const CALLS: &[&str] = &["DATABASE", "SCHEMA", "USER", "SESSION_USER", "SYSTEM_USER"];
    toks.iter().enumerate().find_map(|(i, t)| {
        // `CURRENT_USER` is the function with or without parentheses (a reserved word).
        let hit = (called_at(sql, toks, i) && CALLS.iter().any(|c| t.is_kw(sql, c)))
            || t.is_kw(sql, "CURRENT_USER");
        hit.then(|| format!("{}()", t.text(sql).to_ascii_uppercase()))
    })
}

/// `DATABASE()` and `SCHEMA()` in a statement over tables: a datanode would answer with its
/// physical database, so each call becomes the session's logical schema as a string literal
/// (`NULL` without one; the plan cache keys plans by the schema). A select item that is just
/// the call, without an alias, keeps its column name (`NULLIF('shop', NULL) AS `DATABASE()``).
fn database_calls(
    current: Option<&str>,
    sql: &str,
    toks: &[Token],
) -> Result<Vec<RenameT>, RouterError> {
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        let after_dot = i > 0 && toks[i - 1].is_punct(sql, ".");
        if after_dot
            || !(t.is_kw(sql, "DATABASE") || t.is_kw(sql, "SCHEMA"))
            || !called_at(sql, toks, i)
            || !toks.get(i + 2).is_some_and(|c| c.is_punct(sql, ")"))
        {
            continue;
        }
        let value = match current {
            Some(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''")),
            None => "NULL".to_string(),
        };
        let written = &sql[t.start as usize..toks[i + 2].end as usize];
        let text = match in_select_list(sql, toks, i) {
            Some(false) if select_item_alone(sql, toks, i, i + 2) => {
                // NULLIF: nullable, as the call's column is (a bare literal is NOT NULL).
                format!("NULLIF({value}, NULL) AS {}", quote_ident(written, true))
            }
            // Inside an expression of a select list (or a subquery's): the column's name is
            // the expression as written, which the literal would change.
            Some(_) => {
                return Err(refuse(format!(
                    "{} inside an expression or subquery of a select list beside tables",
                    written.to_ascii_uppercase()
                )));
            }
            None => value,
        };
        let blank = |tok: usize| RenameT {
            tok: tok as u32,
            quoted: false,
            what: RenameWhat::Text(String::new()),
            alias: None,
        };
        out.push(RenameT {
            tok: i as u32,
            quoted: false,
            what: RenameWhat::Text(text),
            alias: None,
        });
        out.push(blank(i + 1));
        out.push(blank(i + 2));
    }
    Ok(out)
}

/// Whether token `at` is in a SELECT's list of items: `Some(nested)` (nested: inside
/// parentheses there), `None` when the nearest clause before it is another (WHERE, SET, ...).
pub(crate) fn in_select_list(sql: &str, toks: &[Token], at: usize) -> Option<bool> {
    let mut depth = 0i32;
    let mut nested = false;
    for t in toks[..at].iter().rev() {
        if t.is_punct(sql, ")") {
            depth += 1;
        } else if t.is_punct(sql, "(") {
            if depth == 0 {
                nested = true;
            } else {
                depth -= 1;
            }
        } else if depth == 0 {
            if t.is_kw(sql, "SELECT") {
                return Some(nested);
            }
            if is_one_of(sql, t, BEFORE_ITEMS_END) {
                return None;
            }
        }
    }
    None
}

/// Whether token `at` is inside parentheses that sit in a SELECT's list of items, at any depth
/// (a table of a subquery in a select list, whose text names that item's column).
fn in_select_list_subquery(sql: &str, toks: &[Token], at: usize) -> bool {
    let mut depth = 0i32;
    // Whether the clause of the current parenthesis level is known, and how many levels out.
    let mut placed = false;
    let mut out = 0;
    for t in toks[..at].iter().rev() {
        if t.is_punct(sql, ")") {
            depth += 1;
        } else if t.is_punct(sql, "(") {
            if depth == 0 {
                out += 1;
                placed = false;
            } else {
                depth -= 1;
            }
        } else if depth == 0 && !placed {
            if t.is_kw(sql, "SELECT") {
                if out > 0 {
                    return true;
                }
                placed = true;
            } else if is_one_of(sql, t, BEFORE_ITEMS_END) {
                placed = true;
            }
        }
    }
    false
}

/// Whether tokens `first..=last` are a whole item of a SELECT's list without an alias: the
/// nearest clause word before them at their parenthesis depth is SELECT, a `,`, SELECT or
/// DISTINCT/ALL precedes them and a `,`, `)`, FROM, another clause or the end follows.
fn select_item_alone(sql: &str, toks: &[Token], first: usize, last: usize) -> bool {
    let starts = first > 0
        && [",", "SELECT", "DISTINCT", "ALL"]
            .iter()
            .any(|w| toks[first - 1].is_punct(sql, w) || toks[first - 1].is_kw(sql, w));
    let ends = match toks.get(last + 1) {
        None => true,
        Some(n) => {
            n.is_punct(sql, ",")
                || n.is_punct(sql, ")")
                || n.is_punct(sql, ";")
                || is_one_of(sql, n, ITEM_ENDS)
        }
    };
    if !starts || !ends {
        return false;
    }
    let mut depth = 0i32;
    for t in toks[..first].iter().rev() {
        if t.is_punct(sql, ")") {
            depth += 1;
        } else if t.is_punct(sql, "(") {
            if depth == 0 {
                return false;
            }
            depth -= 1;
        } else if depth == 0 {
            if t.is_kw(sql, "SELECT") {
                return true;
            }
            if is_one_of(sql, t, ITEM_ENDS) {
                return false;
            }
        }
    }
    false
}

/// [`DmlT::qualify`]: the tables to qualify, if the statement can be made to run in any
/// database. Only plain SELECTs: a write keeps its datanode's database for its triggers'
/// and the session's sake, and any doubt keeps it there too (it only costs a connection).
fn qualifications(
    mode: SqlMode,
    sql: &str,
    toks: &[Token],
    tables: &[Table],
    dml: &Dml,
) -> Option<Vec<(u32, String)>> {
    // A CTE's name reads like a table's: qualified, it would name a table instead.
    if dml.kind != DmlKind::Select
        || dml.has_cte
        || mode.foreign_grammar()
        || reads_current_database(sql, toks)
    {
        return None;
    }
    // A table named in a subquery of a select list: the column is named by the item's text,
    // which a qualifier would change (`(SELECT MAX(c) FROM shop_2.t ...)`).
    if tables.iter().any(|t| {
        t.r.name_tok
            .is_some_and(|k| in_select_list_subquery(sql, toks, k as usize))
    }) {
        return None;
    }
    let mut out = Vec::new();
    for t in tables {
        if t.r.schema.is_some() {
            // Written with its database (a logical one is renamed to the datanode's).
            continue;
        }
        if matches!(t.kind, Kind::System) {
            return None;
        }
        let tok = t.r.name_tok?;
        out.push((tok, toks.get(tok as usize)?.text(sql).to_string()));
    }
    out.sort_by_key(|(t, _)| *t);
    out.dedup_by_key(|(t, _)| *t);
    Some(out)
}

/// The route of group `g`: from the statement's filter when it has top-level members; from the
/// filter of the one SELECT block holding all its members otherwise (a subquery or a UNION
/// branch: only rows that block's WHERE accepts matter, wherever the block sits).
fn group_route(
    dml: &Dml,
    tables: &[Table],
    group_of: &[Option<usize>],
    g: usize,
    members: &[usize],
    top: &[usize],
    scopes: &Scopes,
) -> RouteExpr {
    let mut parts = Vec::new();
    if members.iter().any(|&i| tables[i].r.top_level) {
        parts.push(placement::route_expr(&dml.filter, tables, group_of, g, top));
    }
    // Every SELECT block whose condition narrows the rows of all the group's tables that
    // matter (see [`Scopes::narrows`]).
    for (b, block) in dml.blocks.iter().enumerate() {
        if block.has_outer_join || !scopes.narrows(b, members) {
            continue;
        }
        let leaf = |c: &ColRef| scopes.dist_table(b, c);
        parts.push(placement::route_expr_by(
            &block.filter,
            tables,
            group_of,
            g,
            &leaf,
        ));
    }
    // The statement's own block narrows as its filter does: once.
    let mut distinct: Vec<RouteExpr> = Vec::new();
    for p in parts {
        if p != RouteExpr::All && !distinct.contains(&p) {
            distinct.push(p);
        }
    }
    let mut parts = distinct;
    match parts.len() {
        0 => RouteExpr::All,
        1 => parts.remove(0),
        _ => RouteExpr::And(parts),
    }
}

/// INSERT ... SELECT into a sharded table whose shard key the SELECT takes, unchanged, from
/// the distribution column of a sharded table it reads (see [`BlockLink::Derived`]'s pass
/// through): every row goes to the shard of the row it comes from. The target, that source
/// table, and the one SELECT block.
fn insert_select_link(
    tables: &[Table],
    top: &[usize],
    dml: &Dml,
    scopes: &Scopes,
) -> Option<(usize, usize, usize)> {
    let ins = dml.insert.as_ref().filter(|i| i.from_select)?;
    let &target = top.first()?;
    let key = placement::dist_column(&tables[target])?;
    let pos = ins
        .columns
        .iter()
        .position(|c| c.eq_ignore_ascii_case(key))?;
    let col = ins.source_keys.get(pos)?.as_ref()?;
    let root = scopes.only_root()?;
    let source = scopes.dist_table(root, col)?;
    (source != target).then_some((target, source, root))
}

/// `SELECT DATABASE()`, `USER()`... are ours to answer; other table-less SELECTs go to any
/// backend.
fn tableless_select(dml: &Dml) -> Body {
    if let Some(shape) = &dml.select {
        // The column is named as written; the shape keeps the text in lower case only.
        let columns: Option<Vec<(String, SessionValue)>> = shape
            .items
            .iter()
            .map(|it| match &it.kind {
                ItemKind::Expr { text, .. } => {
                    let v = SessionValue::of(text)?;
                    let name = it
                        .alias
                        .clone()
                        .unwrap_or_else(|| text.to_ascii_uppercase());
                    Some((name, v))
                }
                _ => None,
            })
            .collect();
        if let Some(columns) = columns
            && !columns.is_empty()
            && shape.group_by.is_empty()
            && shape.having.is_none()
            && !shape.has_into
        {
            return Body::SessionValues {
                columns,
                limit: shape
                    .limit
                    .as_ref()
                    .map(|l| (l.count.clone(), l.offset.clone())),
            };
        }
        // A backend would answer with its physical database and Shoal's own account.
        if shape.items.iter().any(|it| matches!(&it.kind, ItemKind::Expr { text, .. } if text.contains("database()") || text.contains("schema()")))
        {
            return Body::Done(Box::new(RoutePlan::Refuse(refuse("DATABASE() combined with other expressions"))));
        }
        if shape
            .items
            .iter()
            .any(|it| matches!(&it.kind, ItemKind::Expr { text, .. } if text.contains("user()")))
        {
            return Body::Done(Box::new(RoutePlan::Refuse(refuse(
                "USER() or CURRENT_USER() combined with other expressions",
            ))));
        }
    }
    Body::Any
}

/// A write's assignment of a distributed table's shard key (or a child's join key).
struct KeyAssign {
    /// The table (index into the statement's tables).
    table: usize,
    key: String,
    /// The new value when it is a literal or parameter, else `None` (an expression).
    value: Option<ValueRef>,
}

/// Checks a write; returns its assignment of a shard key, if it makes one that is not a no-op
/// (`SET k = k`, `ON DUPLICATE KEY UPDATE k = VALUES(k)`: the row keeps its shard).
fn check_write(
    tables: &[Table],
    top: &[usize],
    dml: &Dml,
) -> Result<Option<KeyAssign>, RouterError> {
    if dml.multi_table_write && tables.iter().any(|t| matches!(t.kind, Kind::Global { .. })) {
        return Err(refuse("multi-table UPDATE/DELETE involving a global table"));
    }
    for t in tables {
        if matches!(t.kind, Kind::System) && t.r.top_level {
            return Err(refuse("writes to system schemas"));
        }
    }
    let insert = dml.kind == DmlKind::Insert;
    let assignments: Vec<(&ColRef, &Assigned)> = match &dml.insert {
        Some(ins) if insert => ins
            .on_duplicate_assigned
            .iter()
            .zip(&ins.on_duplicate_values)
            .collect(),
        _ => dml.assigned.iter().zip(&dml.assigned_values).collect(),
    };
    let mut found: Option<KeyAssign> = None;
    for (c, value) in assignments {
        let hits: Vec<usize> = match &c.table {
            Some(_) => placement::table_of_qualifier(tables, c, top)
                .into_iter()
                .collect(),
            None => top.to_vec(),
        };
        for i in hits {
            let Some(col) = placement::dist_column(&tables[i]) else {
                continue;
            };
            if !col.eq_ignore_ascii_case(&c.column) {
                continue;
            }
            let name = &tables[i].r.name;
            let what = if insert {
                "ON DUPLICATE KEY UPDATE"
            } else {
                "UPDATE"
            };
            // `k = k`: no change, wherever the row is.
            let same_column = |o: &ColRef| {
                o.column.eq_ignore_ascii_case(col)
                    && match &o.table {
                        None => true,
                        Some(_) => placement::table_of_qualifier(tables, o, top) == Some(i),
                    }
            };
            let value = match value {
                Assigned::Column(o) if same_column(o) => continue,
                // The inserted row's key: the duplicate it met lives on that key's shard.
                Assigned::Inserted(o) if insert && o.eq_ignore_ascii_case(col) => continue,
                Assigned::Value(v) => Some(v.clone()),
                _ if insert => {
                    return Err(refuse(format!(
                        "ON DUPLICATE KEY UPDATE of shard key column {name}.{col} to an \
                         expression (the row could have to move to another shard)"
                    )));
                }
                _ => None,
            };
            if found.is_some() {
                return Err(refuse(format!(
                    "{what} assigning shard key column {name}.{col} twice"
                )));
            }
            found = Some(KeyAssign {
                table: i,
                key: col.to_string(),
                value,
            });
        }
    }
    Ok(found)
}

/// The move of rows an UPDATE assigning the shard key may need: what is needed to run it, or
/// why it cannot be exact (refused only if rows would actually move).
fn key_move_template(tables: &[Table], ka: KeyAssign, dml: &Dml) -> Result<KeyMoveT, RouterError> {
    let t = &tables[ka.table];
    let name = &t.r.name;
    let key = &ka.key;
    let why = |what: &str| {
        Some(refuse(format!(
            "UPDATE of shard key column {name}.{key} {what}"
        )))
    };
    let refuse_move = if dml.multi_table_write {
        why("in a multi-table UPDATE (rows would have to move to another shard)")
    } else if dml.write_order_or_limit {
        why("with ORDER BY or LIMIT (rows would have to move to another shard)")
    } else if tables.len() > 1 {
        why("with a subquery (rows would have to move to another shard)")
    } else {
        None
    };
    let (Some(set_tok), Some(name_tok)) = (dml.update_set_tok, t.r.name_tok) else {
        return Err(refuse(format!(
            "UPDATE of shard key column {name}.{key} that could not be located"
        )));
    };
    let physical = match &t.kind {
        Kind::Distributed { shards, .. } => {
            shards.iter().map(|s| s.physical_table.clone()).collect()
        }
        _ => Vec::new(),
    };
    Ok(KeyMoveT {
        table: name.clone(),
        key: key.clone(),
        value: ka.value,
        assigned: dml.assigned.iter().map(|c| c.column.clone()).collect(),
        table_tok: t.r.schema_tok.unwrap_or(name_tok),
        set_tok,
        where_tok: dml.update_where_tok,
        refuse: refuse_move,
        physical,
    })
}

fn insert_template(
    tables: &[Table],
    top: &[usize],
    ins: &crate::sql::stmt::InsertShape,
    linked: bool,
) -> Result<Option<InsertT>, RouterError> {
    let Some(&ti) = top.first() else {
        return Ok(None);
    };
    let t = &tables[ti];
    let Some(key) = placement::dist_column(t) else {
        return Ok(None);
    };
    if tables.len() > 1 && !ins.from_select {
        return Err(refuse(format!(
            "INSERT into sharded table {} with subqueries",
            t.r.name
        )));
    }
    if ins.from_select {
        if linked {
            // Routed with the tables it reads, as one co-location group.
            return Ok(None);
        }
        return Err(refuse(format!(
            "INSERT ... SELECT into sharded table {} whose shard key {key} the SELECT does not \
             take unchanged from a co-located sharded table",
            t.r.name
        )));
    }
    if ins.columns.is_empty() {
        return Err(refuse(format!(
            "INSERT into sharded table {} without a column list",
            t.r.name
        )));
    }
    let Some(pos) = ins.columns.iter().position(|c| c.eq_ignore_ascii_case(key)) else {
        return Err(refuse(format!(
            "INSERT into sharded table {} without its shard key column {key}",
            t.r.name
        )));
    };
    let mut key_values = Vec::new();
    for row in &ins.rows {
        match row.values.get(pos) {
            Some(Some(v)) => key_values.push(v.clone()),
            _ => {
                return Err(refuse(format!(
                    "a shard key value for {}.{key} that is not a literal or parameter",
                    t.r.name
                )));
            }
        }
    }
    if row_count_mismatch(ins) {
        return Err(refuse("INSERT rows with different value counts"));
    }
    let rows =
        (!ins.set_form).then(|| ins.rows.iter().map(|r| (r.first_tok, r.last_tok)).collect());
    Ok(Some(InsertT {
        key_values,
        duplicate_key: None,
        rows,
    }))
}

fn row_count_mismatch(ins: &crate::sql::stmt::InsertShape) -> bool {
    ins.rows.iter().any(|r| r.values.len() != ins.columns.len())
}

/// Name edits: physical table names of distributed tables, physical databases for qualified
/// references to logical schemas (tables and column qualifiers).
fn renames(
    toks: &[Token],
    sql: &str,
    tables: &[Table],
    group_of: &[Option<usize>],
    dml: &Dml,
) -> Result<Vec<RenameT>, RouterError> {
    let quoted = |t: u32| toks[t as usize].kind == crate::sql::lex::TokKind::QuotedIdent;
    let mut out = Vec::new();
    let needs_physical = |t: &Table| -> Option<Vec<String>> {
        match &t.kind {
            Kind::Distributed { shards, .. }
                if shards
                    .iter()
                    .any(|s| !s.physical_table.eq_ignore_ascii_case(&t.r.name)) =>
            {
                Some(shards.iter().map(|s| s.physical_table.clone()).collect())
            }
            _ => None,
        }
    };
    let all: Vec<usize> = (0..tables.len()).collect();
    let aliased = logical_aliases(toks, sql, tables, dml, &all);
    for (i, t) in tables.iter().enumerate() {
        if let Some(names) = needs_physical(t) {
            let tok = t.r.name_tok.ok_or_else(|| {
                refuse(format!("table name {} that could not be located", t.r.name))
            })?;
            let group = group_of[i].unwrap_or(0);
            out.push(RenameT {
                tok,
                quoted: quoted(tok),
                what: RenameWhat::Physical { group, names },
                alias: aliased[i].then(|| toks[tok as usize].text(sql).to_string()),
            });
        }
        if t.r.schema.is_some() && t.schema.is_some() {
            let tok = t.r.schema_tok.ok_or_else(|| {
                refuse(format!(
                    "schema name of {} that could not be located",
                    t.r.name
                ))
            })?;
            out.push(RenameT {
                tok,
                quoted: quoted(tok),
                what: RenameWhat::Database,
                alias: None,
            });
        }
    }
    // Column qualifiers: `t.c` where t is a table name (not an alias) that gets renamed, and
    // `db.t.c`.
    for q in &dml.qualifiers {
        let col = ColRef {
            schema: q.schema.clone(),
            table: Some(q.table.clone()),
            column: String::new(),
        };
        let Some(i) = placement::table_of_qualifier(tables, &col, &all) else {
            continue;
        };
        let t = &tables[i];
        if t.r.alias.is_none()
            && !aliased[i]
            && let Some(names) = needs_physical(t)
        {
            let tok = q.table_tok.ok_or_else(|| {
                refuse(format!("qualifier {} that could not be located", q.table))
            })?;
            let group = group_of[i].unwrap_or(0);
            out.push(RenameT {
                tok,
                quoted: quoted(tok),
                what: RenameWhat::Physical { group, names },
                alias: None,
            });
        }
        if q.schema.is_some() && t.schema.is_some() {
            let tok = q
                .schema_tok
                .ok_or_else(|| refuse("schema qualifier that could not be located"))?;
            out.push(RenameT {
                tok,
                quoted: quoted(tok),
                what: RenameWhat::Database,
                alias: None,
            });
        }
    }
    out.sort_by_key(|r| r.tok);
    out.dedup_by_key(|r| r.tok);
    let _ = sql;
    Ok(out)
}

/// Which tables of a SELECT get their logical name as an alias where their physical name
/// replaces it (`FROM logs` -> `FROM logs_00 AS logs`): those written without an alias, unless a
/// `PARTITION (...)` clause follows the name (the alias would have to come after it) or a
/// qualifier names the table with its schema (`shop.logs.c` cannot name an alias). Other
/// statements return no result columns to name and keep renaming qualifiers.
fn logical_aliases(
    toks: &[Token],
    sql: &str,
    tables: &[Table],
    dml: &Dml,
    all: &[usize],
) -> Vec<bool> {
    let mut out: Vec<bool> = tables
        .iter()
        .map(|t| {
            dml.kind == DmlKind::Select
                && t.r.alias.is_none()
                && t.r.name_tok.is_some_and(|n| {
                    !toks
                        .get(n as usize + 1)
                        .is_some_and(|x| x.is_kw(sql, "PARTITION"))
                })
        })
        .collect();
    for q in dml.qualifiers.iter().filter(|q| q.schema.is_some()) {
        let col = ColRef {
            schema: q.schema.clone(),
            table: Some(q.table.clone()),
            column: String::new(),
        };
        if let Some(i) = placement::table_of_qualifier(tables, &col, all) {
            out[i] = false;
        }
    }
    out
}

/// Quote a replacement name like the token it replaces.
pub(crate) fn rename_text(r: &RenameT, name: &str) -> String {
    quote_ident(name, r.quoted)
}
