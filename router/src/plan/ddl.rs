//! Statements planned from their tokens alone: DDL, SHOW, DESCRIBE. sqlparser does not parse
//! every MySQL DDL (`PARTITION BY`, some table options), and these only need the table names.

use super::placement::{self, Kind, refuse};
use super::render::{Edit, Text, quote_ident};
use super::{LocalAnswer, RoutePlan, Target};
use crate::error::{RouterError, codes};
use crate::sql::lex::{TokKind, Token};
use crate::sql::stmt::TableRef;
use crate::sql::{DdlKind, StatementKind};
use crate::topology::{DatanodeId, Topology};

/// A `[schema.]table` name at token `i`; returns it and the index after it.
fn name_at(sql: &str, toks: &[Token], i: usize) -> Option<(TableRef, usize)> {
    let is_name = |t: &Token| matches!(t.kind, TokKind::Word | TokKind::QuotedIdent);
    let a = toks.get(i).filter(|t| is_name(t))?;
    if toks.get(i + 1).is_some_and(|t| t.is_punct(sql, ".")) {
        let b = toks.get(i + 2).filter(|t| is_name(t))?;
        return Some((
            TableRef {
                schema: Some(a.ident_value(sql)),
                name: b.ident_value(sql),
                alias: None,
                schema_tok: Some(i as u32),
                name_tok: Some(i as u32 + 2),
                top_level: true,
                outer_nullable: false,
            },
            i + 3,
        ));
    }
    Some((
        TableRef {
            schema: None,
            name: a.ident_value(sql),
            alias: None,
            schema_tok: None,
            name_tok: Some(i as u32),
            top_level: true,
            outer_nullable: false,
        },
        i + 1,
    ))
}

fn skip_kws(sql: &str, toks: &[Token], mut i: usize, kws: &[&str]) -> usize {
    while toks
        .get(i)
        .is_some_and(|t| kws.iter().any(|k| t.is_kw(sql, k)))
    {
        i += 1;
    }
    i
}

fn kw(sql: &str, toks: &[Token], i: usize, k: &str) -> bool {
    toks.get(i).is_some_and(|t| t.is_kw(sql, k))
}

/// Where a table's DDL runs: one target per physical table.
fn placements(t: &placement::Table) -> Result<Vec<(DatanodeId, Option<String>)>, RouterError> {
    Ok(match &t.kind {
        Kind::Distributed { shards, .. } => shards
            .iter()
            .map(|s| (s.datanode, Some(s.physical_table.clone())))
            .collect(),
        Kind::Global { datanodes } => datanodes.iter().map(|&d| (d, None)).collect(),
        Kind::Single { datanode } => vec![(*datanode, None)],
        Kind::System => return Err(refuse(format!("DDL on system table {}", t.r.name))),
    })
}

fn edits_for(
    sql: &str,
    toks: &[Token],
    topo: &Topology,
    refs: &[(placement::Table, Option<String>)],
    dn: DatanodeId,
) -> Vec<Edit> {
    let mut edits = Vec::new();
    for (t, physical) in refs {
        if let (Some(p), Some(tok)) = (physical, t.r.name_tok) {
            let quoted = toks[tok as usize].kind == TokKind::QuotedIdent;
            if !p.eq(&t.r.name) {
                edits.push(Edit::text(tok, tok, quote_ident(p, quoted)));
            }
        }
        if let (Some(tok), Some(_)) = (t.r.schema_tok, &t.schema) {
            let quoted = toks[tok as usize].kind == TokKind::QuotedIdent;
            edits.push(Edit::text(
                tok,
                tok,
                quote_ident(&topo.datanodes[dn].database, quoted),
            ));
        }
    }
    let _ = sql;
    edits.sort_by_key(|e| e.first);
    edits
}

/// Plan a statement about one table (and tables it references in the same family): one target
/// per physical table of the main one.
fn table_statement(
    topo: &Topology,
    current: Option<&str>,
    text: &Text,
    main: TableRef,
    others: Vec<TableRef>,
    broadcast: bool,
) -> RoutePlan {
    let (sql, toks) = (text.sql, text.toks);
    let result = (|| -> Result<RoutePlan, RouterError> {
        let main = placement::resolve_one(topo, current, &main)?;
        let places = placements(&main)?;
        let mut others_r = Vec::new();
        for o in &others {
            others_r.push(placement::resolve_one(topo, current, o)?);
        }
        let mut targets = Vec::new();
        for (idx, (dn, physical)) in places.iter().enumerate() {
            let mut refs = vec![(main.clone(), physical.clone())];
            for o in &others_r {
                let p = match (&o.kind, &main.kind) {
                    (
                        Kind::Distributed {
                            root: ro,
                            shards: so,
                            ..
                        },
                        Kind::Distributed { root: rm, .. },
                    ) if ro == rm && o.schema == main.schema => {
                        so.get(idx).map(|s| s.physical_table.clone())
                    }
                    (Kind::Global { datanodes }, _) if datanodes.contains(dn) => None,
                    (Kind::Single { datanode }, _) if datanode == dn => None,
                    _ => {
                        return Err(refuse(format!(
                            "a statement on {} that references {} on other datanodes",
                            main.label(),
                            o.label()
                        )));
                    }
                };
                refs.push((o.clone(), p));
            }
            let edits = edits_for(sql, toks, topo, &refs, *dn);
            let (s, params) = text.render(&edits);
            targets.push(Target {
                datanode: *dn,
                sql: s.into(),
                params: params.into(),
                qualified: false,
            });
            if !broadcast {
                break;
            }
        }
        Ok(if targets.len() == 1 {
            RoutePlan::Single(targets.remove(0))
        } else {
            RoutePlan::Broadcast { targets }
        })
    })();
    result.unwrap_or_else(RoutePlan::Refuse)
}

/// On the schema's default datanode, or refused.
fn default_dn(topo: &Topology, current: Option<&str>, text: &Text, what: &str) -> RoutePlan {
    let dn = current
        .and_then(|c| placement::find_schema(topo, c))
        .and_then(|s| s.default_datanode);
    match dn {
        Some(dn) => RoutePlan::Single(Target {
            datanode: dn,
            sql: text.sql.into(),
            params: Default::default(),
            qualified: false,
        }),
        None => RoutePlan::Refuse(refuse(format!(
            "{what} in a schema without a default datanode"
        ))),
    }
}

pub(crate) fn plan_ddl(
    topo: &Topology,
    current: Option<&str>,
    text: &Text,
    kind: DdlKind,
) -> RoutePlan {
    let (sql, toks) = (text.sql, text.toks);
    let mut i = 1;
    match kind {
        DdlKind::Create | DdlKind::Alter | DdlKind::Drop => {
            i = skip_kws(
                sql,
                toks,
                i,
                &[
                    "OR",
                    "REPLACE",
                    "TEMPORARY",
                    "ONLINE",
                    "OFFLINE",
                    "IGNORE",
                    "UNIQUE",
                    "FULLTEXT",
                    "SPATIAL",
                ],
            );
            if kw(sql, toks, i, "DATABASE") || kw(sql, toks, i, "SCHEMA") {
                return RoutePlan::Refuse(refuse(
                    "CREATE/ALTER/DROP DATABASE through Shoal (logical schemas come from the config)",
                ));
            }
            if kw(sql, toks, i, "TABLE") {
                i = skip_kws(sql, toks, i + 1, &["IF", "NOT", "EXISTS"]);
                let Some((main, after)) = name_at(sql, toks, i) else {
                    return RoutePlan::Refuse(RouterError::with(
                        codes::ER_PARSE_ERROR,
                        "You have an error in your SQL syntax near the table name",
                    ));
                };
                if kind == DdlKind::Drop && toks.get(after).is_some_and(|t| t.is_punct(sql, ",")) {
                    return RoutePlan::Refuse(refuse(
                        "DROP TABLE of several tables in one statement",
                    ));
                }
                let mut others = Vec::new();
                let mut has_select = false;
                for j in after..toks.len() {
                    if (toks[j].is_kw(sql, "REFERENCES")
                        || (j == after && toks[j].is_kw(sql, "LIKE")))
                        && let Some((r, _)) = name_at(sql, toks, j + 1)
                    {
                        others.push(r);
                    }
                    if toks[j].is_kw(sql, "SELECT") {
                        has_select = true;
                    }
                }
                if kind == DdlKind::Create && has_select {
                    return match placement::resolve_one(topo, current, &main) {
                        Ok(t) if matches!(t.kind, Kind::Single { .. }) => {
                            RoutePlan::Refuse(refuse("CREATE TABLE ... SELECT"))
                        }
                        Ok(_) => RoutePlan::Refuse(refuse(
                            "CREATE TABLE ... SELECT on a sharded or global table",
                        )),
                        Err(e) => RoutePlan::Refuse(e),
                    };
                }
                return table_statement(topo, current, text, main, others, true);
            }
            if kw(sql, toks, i, "INDEX") {
                // CREATE INDEX i ON t (...) / DROP INDEX i ON t
                let on = (i..toks.len()).find(|&j| toks[j].is_kw(sql, "ON"));
                if let Some((main, _)) = on.and_then(|j| name_at(sql, toks, j + 1)) {
                    return table_statement(topo, current, text, main, Vec::new(), true);
                }
            }
            let what = toks
                .get(i)
                .map(|t| t.text(sql).to_ascii_uppercase())
                .unwrap_or_default();
            // Server-wide objects: a federated server definition, a tablespace, a function
            // loaded from a shared library (`CREATE FUNCTION f RETURNS INT SONAME 'x.so'`).
            if ["SERVER", "TABLESPACE", "LOGFILE"].contains(&what.as_str())
                || toks.iter().any(|t| t.is_kw(sql, "SONAME"))
            {
                return RoutePlan::Refuse(refuse(format!(
                    "CREATE/ALTER/DROP {what} through Shoal (it changes a backend server's \
                     configuration)"
                )));
            }
            default_dn(topo, current, text, &format!("CREATE/ALTER/DROP {what}"))
        }
        DdlKind::Truncate => {
            i = skip_kws(sql, toks, i, &["TABLE"]);
            match name_at(sql, toks, i) {
                Some((main, _)) => table_statement(topo, current, text, main, Vec::new(), true),
                None => RoutePlan::Refuse(RouterError::with(
                    codes::ER_PARSE_ERROR,
                    "You have an error in your SQL syntax near TRUNCATE",
                )),
            }
        }
        DdlKind::Rename => {
            // RENAME TABLE a TO b, c TO d: only for unlisted tables on the default datanode.
            let mut j = skip_kws(sql, toks, 1, &["TABLE"]);
            let mut dn = None;
            while let Some((r, after)) = name_at(sql, toks, j) {
                match placement::resolve_one(topo, current, &r) {
                    Ok(t) => match t.kind {
                        Kind::Single { datanode } if dn.is_none_or(|d| d == datanode) => {
                            dn = Some(datanode)
                        }
                        Kind::Single { .. } => {
                            return RoutePlan::Refuse(refuse("RENAME TABLE across datanodes"));
                        }
                        _ => {
                            return RoutePlan::Refuse(refuse(format!(
                                "RENAME TABLE of {} (rename it in the config and on every datanode)",
                                t.label()
                            )));
                        }
                    },
                    // The new name does not exist yet: it will live on the default datanode.
                    Err(e) if e.code() == codes::ER_NO_SUCH_TABLE.0 => {}
                    Err(e) => return RoutePlan::Refuse(e),
                }
                j = after;
                if kw(sql, toks, j, "TO") || toks.get(j).is_some_and(|t| t.is_punct(sql, ",")) {
                    j += 1;
                } else {
                    break;
                }
            }
            default_dn(topo, current, text, "RENAME TABLE")
        }
    }
}

/// SHOW statements: logical answers for databases and tables, the first physical table for
/// table metadata, the session layer for the rest (variables, status, warnings...).
pub(crate) fn plan_show(topo: &Topology, current: Option<&str>, text: &Text) -> RoutePlan {
    let (sql, toks) = (text.sql, text.toks);
    let mut i = 1;
    let full = kw(sql, toks, i, "FULL");
    if full {
        i += 1;
    }
    if !full && kw(sql, toks, i, "SHOAL") && kw(sql, toks, i + 1, "BACKENDS") {
        return RoutePlan::Local(LocalAnswer::ShowBackends);
    }
    if kw(sql, toks, i, "DATABASES") || kw(sql, toks, i, "SCHEMAS") {
        let mut schemas: Vec<String> = topo.schemas.values().map(|s| s.name.clone()).collect();
        schemas.sort();
        return RoutePlan::Local(LocalAnswer::ShowDatabases { schemas });
    }
    if kw(sql, toks, i, "TABLES") {
        let mut j = i + 1;
        let mut schema = current.map(str::to_string);
        if kw(sql, toks, j, "FROM") || kw(sql, toks, j, "IN") {
            schema = toks.get(j + 1).map(|t| t.ident_value(sql));
            j += 2;
        }
        let mut like = None;
        if kw(sql, toks, j, "LIKE") {
            like = toks
                .get(j + 1)
                .map(|t| crate::sql::lex::unquote_string(t.text(sql)));
            j += 2;
        }
        if j < toks.len() {
            return RoutePlan::Refuse(refuse("SHOW TABLES ... WHERE"));
        }
        let Some(schema) = schema else {
            return RoutePlan::Refuse(RouterError::with(
                codes::ER_NO_DB_ERROR,
                "No database selected",
            ));
        };
        let Some(ls) = placement::find_schema(topo, &schema) else {
            return RoutePlan::Refuse(RouterError::with(
                codes::ER_BAD_DB_ERROR,
                format!("Unknown database '{schema}'"),
            ));
        };
        let mut tables: Vec<String> = ls.tables.values().map(|t| t.name().to_string()).collect();
        tables.sort();
        let also_from = ls.default_datanode.map(|dn| Target {
            datanode: dn,
            sql: if full {
                "SHOW FULL TABLES".into()
            } else {
                "SHOW TABLES".into()
            },
            params: Default::default(),
            qualified: false,
        });
        return RoutePlan::Local(LocalAnswer::ShowTables {
            schema: ls.name.clone(),
            full,
            tables,
            like,
            also_from,
        });
    }
    // SHOW CREATE TABLE t, SHOW [FULL] COLUMNS|FIELDS FROM t [FROM db], SHOW INDEX FROM t
    let create_table = kw(sql, toks, i, "CREATE") && kw(sql, toks, i + 1, "TABLE");
    let columns_or_index = ["COLUMNS", "FIELDS", "INDEX", "INDEXES", "KEYS"]
        .iter()
        .any(|k| kw(sql, toks, i, k))
        && (kw(sql, toks, i + 1, "FROM") || kw(sql, toks, i + 1, "IN"));
    let table_at = (create_table || columns_or_index).then_some(i + 2);
    if let Some(at) = table_at
        && let Some((mut r, after)) = name_at(sql, toks, at)
    {
        if (kw(sql, toks, after, "FROM") || kw(sql, toks, after, "IN"))
            && let Some(db) = toks.get(after + 1)
        {
            r.schema = Some(db.ident_value(sql));
            r.schema_tok = Some(after as u32 + 1);
        }
        return table_statement(topo, current, text, r, Vec::new(), false);
    }
    if kw(sql, toks, i, "TABLE") && kw(sql, toks, i + 1, "STATUS") {
        // `FROM db` names a logical schema: its default datanode's database answers (the proxy
        // leaves out the physical tables of table-per-shard tables placed there).
        let from = i + 2;
        if (kw(sql, toks, from, "FROM") || kw(sql, toks, from, "IN"))
            && let Some(db) = toks.get(from + 1)
        {
            let name = db.ident_value(sql);
            let Some(ls) = placement::find_schema(topo, &name) else {
                return RoutePlan::Refuse(RouterError::with(
                    codes::ER_BAD_DB_ERROR,
                    format!("Unknown database '{name}'"),
                ));
            };
            let Some(dn) = ls.default_datanode else {
                return RoutePlan::Refuse(refuse(
                    "SHOW TABLE STATUS in a schema without a default datanode",
                ));
            };
            let quoted = db.kind == TokKind::QuotedIdent;
            let edit = Edit::text(
                from as u32 + 1,
                from as u32 + 1,
                quote_ident(&topo.datanodes[dn].database, quoted),
            );
            let (s, params) = text.render(&[edit]);
            return RoutePlan::Single(Target {
                datanode: dn,
                sql: s.into(),
                params: params.into(),
                qualified: false,
            });
        }
        return default_dn(topo, current, text, "SHOW TABLE STATUS");
    }
    RoutePlan::Session(StatementKind::Show)
}

/// `DESC t` / `DESCRIBE t` / `EXPLAIN t` (the table form).
pub(crate) fn plan_describe_table(
    topo: &Topology,
    current: Option<&str>,
    text: &Text,
) -> Option<RoutePlan> {
    let (sql, toks) = (text.sql, text.toks);
    let (r, after) = name_at(sql, toks, 1)?;
    if after < toks.len()
        && !matches!(
            toks[after].kind,
            TokKind::Word | TokKind::QuotedIdent | TokKind::Str
        )
    {
        return None;
    }
    Some(table_statement(topo, current, text, r, Vec::new(), false))
}
