//! Statements planned from their tokens alone: DDL, SHOW, DESCRIBE. sqlparser does not parse
//! every MySQL DDL (`PARTITION BY`, some table options), and these only need the table names.

use super::placement::{self, Kind, refuse};
use super::render::{Edit, Text, quote_ident};
use super::{LocalAnswer, RoutePlan, Target, show};
use crate::config::ForeignKeys;
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

/// A FOREIGN KEY of a CREATE/ALTER TABLE: `[CONSTRAINT [name]] FOREIGN KEY [name] (cols)
/// REFERENCES t (cols)`, or a column definition's `c ... REFERENCES t (cols)`.
#[derive(Debug)]
struct ForeignKey {
    name: Option<String>,
    /// Empty when they cannot be read (then only placements that need no columns pass).
    columns: Vec<String>,
    table: TableRef,
    ref_columns: Vec<String>,
}

impl ForeignKey {
    /// As written, for messages: `FOREIGN KEY fk (a, b) REFERENCES shop.t (x, y)`.
    fn describe(&self, referenced: &placement::Table) -> String {
        let name = self
            .name
            .as_deref()
            .map(|n| format!(" {n}"))
            .unwrap_or_default();
        format!(
            "FOREIGN KEY{name} ({}) REFERENCES {} ({})",
            self.columns.join(", "),
            referenced.label(),
            self.ref_columns.join(", ")
        )
    }
}

/// The FOREIGN KEYs of a CREATE TABLE's definitions or an ALTER TABLE's specifications,
/// from token `from` (after the table name). Each REFERENCES starts one; its referencing
/// columns are those of the FOREIGN KEY clause of the same definition, else the column the
/// definition declares.
fn foreign_keys(sql: &str, toks: &[Token], from: usize) -> Vec<ForeignKey> {
    let is_name = |i: usize| {
        toks.get(i)
            .is_some_and(|t| matches!(t.kind, TokKind::Word | TokKind::QuotedIdent))
    };
    // The names of the parenthesized list opening at `open`, or empty if it is not one.
    let name_list = |open: usize| -> Vec<String> {
        let mut names = Vec::new();
        if !toks.get(open).is_some_and(|t| t.is_punct(sql, "(")) {
            return names;
        }
        let mut k = open + 1;
        while is_name(k) {
            names.push(toks[k].ident_value(sql));
            if toks.get(k + 1).is_some_and(|t| t.is_punct(sql, ",")) {
                k += 2;
            } else if toks.get(k + 1).is_some_and(|t| t.is_punct(sql, ")")) {
                return names;
            } else {
                break;
            }
        }
        Vec::new()
    };
    let mut out = Vec::new();
    // Where the definition being read starts, per parenthesis depth: a CREATE TABLE's
    // definitions are at depth 1, an ALTER TABLE's specifications at depth 0.
    let mut starts = vec![from];
    for j in from..toks.len() {
        let t = &toks[j];
        if t.is_punct(sql, "(") {
            starts.push(j + 1);
        } else if t.is_punct(sql, ")") {
            if starts.len() > 1 {
                starts.pop();
            }
        } else if t.is_punct(sql, ",") {
            *starts.last_mut().expect("never empty") = j + 1;
        }
        if !t.is_kw(sql, "REFERENCES") {
            continue;
        }
        let Some((table, after)) = name_at(sql, toks, j + 1) else {
            continue;
        };
        let start = *starts.last().expect("never empty");
        let mut k = skip_kws(sql, toks, start, &["ADD"]);
        let foreign = (k..j).find(|&f| kw(sql, toks, f, "FOREIGN") && kw(sql, toks, f + 1, "KEY"));
        let (name, columns) = match foreign {
            Some(f) => {
                // `CONSTRAINT name`, else the index name after FOREIGN KEY (MariaDB names the
                // constraint by it then).
                let mut name = (kw(sql, toks, k, "CONSTRAINT") && k + 1 < f && is_name(k + 1))
                    .then(|| toks[k + 1].ident_value(sql));
                let mut c = skip_kws(sql, toks, f + 2, &["IF", "NOT", "EXISTS"]);
                if is_name(c) {
                    name = name.or_else(|| Some(toks[c].ident_value(sql)));
                    c += 1;
                }
                (name, name_list(c))
            }
            None => {
                // A column definition: `[ADD|MODIFY] [COLUMN] [IF NOT EXISTS] c ...` or
                // `CHANGE [COLUMN] [IF EXISTS] old c ...`.
                let change = kw(sql, toks, k, "CHANGE");
                k = skip_kws(sql, toks, k, &["MODIFY", "CHANGE"]);
                k = skip_kws(sql, toks, k, &["COLUMN"]);
                k = skip_kws(sql, toks, k, &["IF", "NOT", "EXISTS"]);
                if change {
                    k += 1;
                }
                let columns = if k < j && is_name(k) {
                    vec![toks[k].ident_value(sql)]
                } else {
                    Vec::new()
                };
                (None, columns)
            }
        };
        out.push(ForeignKey {
            name,
            columns,
            table,
            ref_columns: name_list(after),
        });
    }
    out
}

/// Whether a foreign key of `main` to `referenced` checks on each datanode exactly what it
/// checks on one server: every row and the row it references must share a datanode. That the
/// referenced table is on each datanode of `main` at all is [`referenced_on`]'s to check.
fn check_foreign_key(
    main: &placement::Table,
    fk: &ForeignKey,
    referenced: &placement::Table,
    mode: ForeignKeys,
) -> Result<(), RouterError> {
    let why = match (&main.kind, &referenced.kind) {
        // A global table's rows, or an unlisted table's, are all on each datanode that has it.
        (_, Kind::Global { .. } | Kind::Single { .. } | Kind::System) => return Ok(()),
        (
            Kind::Distributed {
                root: rm,
                column: mk,
                ..
            },
            Kind::Distributed {
                root: rr,
                column: rk,
                ..
            },
        ) => {
            // An ER child and its family: accepted as before, its rows living with their
            // parents'. (A table referencing itself is no family relation: its rows are placed
            // by one column, as those of two tables of one rule.)
            if rm == rr
                && main.schema == referenced.schema
                && !main.r.name.eq_ignore_ascii_case(&referenced.r.name)
            {
                return Ok(());
            }
            let at =
                |cols: &[String], key: &str| cols.iter().position(|c| c.eq_ignore_ascii_case(key));
            if !placement::compatible(main, referenced) {
                format!(
                    "{} and {} are not sharded by the same rule over the same datanodes",
                    main.label(),
                    referenced.label()
                )
            } else {
                match (at(&fk.columns, mk), at(&fk.ref_columns, rk)) {
                    (Some(p), Some(q)) if p == q => return Ok(()),
                    (None, _) => format!(
                        "its columns do not include the shard key {mk} of {}",
                        main.label()
                    ),
                    (_, None) => format!(
                        "the referenced columns do not include the shard key {rk} of {}",
                        referenced.label()
                    ),
                    (Some(_), Some(_)) => format!(
                        "the shard keys {mk} of {} and {rk} of {} are at different positions \
                         of the two column lists",
                        main.label(),
                        referenced.label()
                    ),
                }
            }
        }
        (_, Kind::Distributed { .. }) => format!(
            "{} is not sharded, and the rows of sharded table {} are spread over datanodes",
            main.label(),
            referenced.label()
        ),
    };
    if mode == ForeignKeys::DatanodeLocal {
        return Ok(());
    }
    Err(refuse(format!(
        "{}: {why}, so a referenced row may live on another datanode (schema option \
         foreign_keys: datanode_local declares it per datanode)",
        fk.describe(referenced)
    )))
}

/// How `referenced`, named in a statement on shard `idx` of `main` (on datanode `dn`), is
/// named there: `Some(physical table)` to rewrite, `None` as written; or why it cannot be.
fn referenced_on(
    referenced: &placement::Table,
    main: &placement::Table,
    idx: usize,
    dn: DatanodeId,
    topo: &Topology,
) -> Result<Option<String>, String> {
    let dn_name = &topo.datanodes[dn].name;
    match &referenced.kind {
        // Same rule and layout (or one ER family): the same shard's table.
        Kind::Distributed { shards, .. } if placement::compatible(referenced, main) => {
            Ok(shards.get(idx).map(|s| s.physical_table.clone()))
        }
        Kind::Distributed { shards, .. } => {
            let mut here = shards.iter().filter(|s| s.datanode == dn);
            match (here.next(), here.next()) {
                (Some(s), None) => Ok(Some(s.physical_table.clone())),
                (None, _) => Err(format!("has no shard on datanode {dn_name}")),
                (Some(_), Some(_)) => Err(format!(
                    "has several tables on datanode {dn_name} (table-per-shard) and is not \
                     sharded like {}",
                    main.label()
                )),
            }
        }
        Kind::Global { datanodes } if datanodes.contains(&dn) => Ok(None),
        Kind::Single { datanode } if *datanode == dn => Ok(None),
        Kind::Global { .. } | Kind::Single { .. } => Err(format!("is not on datanode {dn_name}")),
        Kind::System => Err("is a system table".to_string()),
    }
}

/// Plan a statement about one table, naming `others` (CREATE TABLE ... LIKE) and declaring
/// foreign keys `fks`: one target per physical table of the main one, every other table named
/// by its table next to it.
fn table_statement(
    topo: &Topology,
    current: Option<&str>,
    text: &Text,
    main: TableRef,
    others: Vec<TableRef>,
    fks: Vec<ForeignKey>,
    broadcast: bool,
) -> RoutePlan {
    let (sql, toks) = (text.sql, text.toks);
    let result = (|| -> Result<RoutePlan, RouterError> {
        let main = placement::resolve_one(topo, current, &main)?;
        let places = placements(&main)?;
        let mode = main
            .schema
            .as_deref()
            .and_then(|s| placement::find_schema(topo, s))
            .map_or(ForeignKeys::Exact, |s| s.foreign_keys);
        // (table, the foreign key naming it)
        let mut others_r = Vec::new();
        for o in &others {
            others_r.push((placement::resolve_one(topo, current, o)?, None));
        }
        for fk in &fks {
            let referenced = placement::resolve_one(topo, current, &fk.table)?;
            check_foreign_key(&main, fk, &referenced, mode)?;
            others_r.push((referenced, Some(fk)));
        }
        let mut targets = Vec::new();
        for (idx, (dn, physical)) in places.iter().enumerate() {
            let mut refs = vec![(main.clone(), physical.clone())];
            for (o, fk) in &others_r {
                let p = referenced_on(o, &main, idx, *dn, topo).map_err(|why| {
                    refuse(match fk {
                        Some(fk) => format!(
                            "{} of {}: {} {why}",
                            fk.describe(o),
                            main.label(),
                            o.label()
                        ),
                        None => format!(
                            "a statement on {} that references {}, which {why}",
                            main.label(),
                            o.label()
                        ),
                    })
                })?;
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
                // CREATE TABLE t LIKE u: u's table next to each of t's.
                let others = match kw(sql, toks, after, "LIKE") {
                    true => name_at(sql, toks, after + 1).map(|(r, _)| r),
                    false => None,
                };
                let others = others.into_iter().collect();
                let fks = match kind {
                    DdlKind::Drop => Vec::new(),
                    _ => foreign_keys(sql, toks, after),
                };
                let has_select = toks[after..].iter().any(|t| t.is_kw(sql, "SELECT"));
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
                return table_statement(topo, current, text, main, others, fks, true);
            }
            if kw(sql, toks, i, "INDEX") {
                // CREATE INDEX i ON t (...) / DROP INDEX i ON t
                let on = (i..toks.len()).find(|&j| toks[j].is_kw(sql, "ON"));
                if let Some((main, _)) = on.and_then(|j| name_at(sql, toks, j + 1)) {
                    return table_statement(
                        topo,
                        current,
                        text,
                        main,
                        Vec::new(),
                        Vec::new(),
                        true,
                    );
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
                Some((main, _)) => {
                    table_statement(topo, current, text, main, Vec::new(), Vec::new(), true)
                }
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

/// SHOW statements: the family that MariaDB answers from `information_schema` as SELECTs over
/// the logical catalog ([`show`]), SHOW CREATE TABLE/DATABASE from a datanode, the session
/// layer for the rest (variables, status, warnings...).
pub(crate) fn plan_show(topo: &Topology, current: Option<&str>, text: &Text) -> RoutePlan {
    let (sql, toks) = (text.sql, text.toks);
    let mut i = 1;
    let full = kw(sql, toks, i, "FULL");
    if full {
        i += 1;
    }
    if let Some(parsed) = show::parse(sql, toks, current) {
        return match parsed {
            Ok(s) => show_from_catalog(topo, text, s),
            Err(e) => RoutePlan::Refuse(e),
        };
    }
    if !full
        && kw(sql, toks, i, "CREATE")
        && (kw(sql, toks, i + 1, "DATABASE") || kw(sql, toks, i + 1, "SCHEMA"))
    {
        return show_create_database(topo, text, i + 2);
    }
    // SHOW CREATE TABLE t: the first physical table (the proxy names the logical one).
    if !full
        && kw(sql, toks, i, "CREATE")
        && kw(sql, toks, i + 1, "TABLE")
        && let Some((r, _)) = name_at(sql, toks, i + 2)
    {
        return table_statement(topo, current, text, r, Vec::new(), Vec::new(), false);
    }
    RoutePlan::Session(StatementKind::Show)
}

/// A SHOW of the family ([`show`]) as its SELECT over the logical catalog, once the schema it
/// lists is known (1049 if not; its configured spelling). `SHOW COLUMNS`/`SHOW INDEX` of a
/// table that is not listed in the config run on the schema's default datanode, which holds
/// it as it is (and answers 1146 when it does not exist): the catalog cannot tell a missing
/// table from one without columns.
fn show_from_catalog(topo: &Topology, text: &Text, mut s: show::Show) -> RoutePlan {
    if let Some(name) = &s.schema {
        match placement::find_schema(topo, name) {
            Some(ls) => s.schema = Some(ls.name.clone()),
            // The catalog's own schema: its tables are the catalog's to list.
            None if name.eq_ignore_ascii_case("information_schema") => {}
            None => {
                return RoutePlan::Refuse(RouterError::with(
                    codes::ER_BAD_DB_ERROR,
                    format!("Unknown database '{name}'"),
                ));
            }
        }
    }
    if let (show::What::Columns { .. } | show::What::Index, Some(schema), Some(table)) =
        (s.what, &s.schema, &s.table)
    {
        let ls = placement::find_schema(topo, schema);
        match ls.and_then(|ls| ls.table(table)) {
            Some(def) => s.table = Some(def.name().to_string()),
            None => {
                let (sql, toks) = (text.sql, text.toks);
                let at = (2..toks.len())
                    .find(|&j| toks[j - 1].is_kw(sql, "FROM") || toks[j - 1].is_kw(sql, "IN"));
                if let Some((mut r, after)) = at.and_then(|j| name_at(sql, toks, j)) {
                    if (kw(sql, toks, after, "FROM") || kw(sql, toks, after, "IN"))
                        && let Some(db) = toks.get(after + 1)
                    {
                        r.schema = Some(db.ident_value(sql));
                        r.schema_tok = Some(after as u32 + 1);
                    }
                    return table_statement(
                        topo,
                        Some(schema),
                        text,
                        r,
                        Vec::new(),
                        Vec::new(),
                        false,
                    );
                }
            }
        }
    }
    RoutePlan::Local(LocalAnswer::Catalog {
        sql: s.select(),
        show: Some(s.answer_table()),
    })
}

/// `SHOW CREATE DATABASE [IF NOT EXISTS] db` (`at`: the token after DATABASE): the answer of
/// a datanode of the logical schema for its database there (the proxy names the logical
/// schema in it: `metadata.rs`).
fn show_create_database(topo: &Topology, text: &Text, mut at: usize) -> RoutePlan {
    let (sql, toks) = (text.sql, text.toks);
    if kw(sql, toks, at, "IF") && kw(sql, toks, at + 1, "NOT") && kw(sql, toks, at + 2, "EXISTS") {
        at += 3;
    }
    let Some(db) = toks
        .get(at)
        .filter(|t| matches!(t.kind, TokKind::Word | TokKind::QuotedIdent) && at + 1 == toks.len())
    else {
        return RoutePlan::Refuse(RouterError::with(
            codes::ER_PARSE_ERROR,
            "You have an error in your SQL syntax near SHOW CREATE DATABASE",
        ));
    };
    let name = db.ident_value(sql);
    let Some(ls) = placement::find_schema(topo, &name) else {
        return RoutePlan::Refuse(RouterError::with(
            codes::ER_BAD_DB_ERROR,
            format!("Unknown database '{name}'"),
        ));
    };
    // Its default datanode, else the first datanode of its first table (by name).
    let mut tables: Vec<_> = ls.tables.values().collect();
    tables.sort_by(|a, b| a.name().cmp(b.name()));
    let dn = ls.default_datanode.or_else(|| {
        tables.iter().find_map(|t| match t {
            crate::topology::TableDef::Sharded(t) => t.shards.first().map(|s| s.datanode),
            crate::topology::TableDef::Child(t) => t.shards.first().map(|s| s.datanode),
            crate::topology::TableDef::Global(t) => t.datanodes.first().copied(),
        })
    });
    let Some(dn) = dn else {
        return RoutePlan::Refuse(refuse(
            "SHOW CREATE DATABASE of a schema without a datanode",
        ));
    };
    let edit = Edit::text(
        at as u32,
        at as u32,
        quote_ident(&topo.datanodes[dn].database, true),
    );
    let (s, params) = text.render(&[edit]);
    RoutePlan::Single(Target {
        datanode: dn,
        sql: s.into(),
        params: params.into(),
        qualified: true,
    })
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
    Some(table_statement(
        topo,
        current,
        text,
        r,
        Vec::new(),
        Vec::new(),
        false,
    ))
}
