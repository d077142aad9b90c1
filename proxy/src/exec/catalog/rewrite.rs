//! The client's SELECT over `information_schema` made to run over the logical rows, edited on
//! its tokens (comments and formatting stay as written):
//!
//! - `information_schema.X` (X a catalog table) as a table reference becomes the temporary
//!   table holding X's logical rows, named `X` as written unless the statement gave it an
//!   alias (`FROM information_schema.TABLES` -> ``FROM `shoal_catalog_tables_0` AS TABLES``),
//!   so its qualifiers and the result's `table` field read as the client wrote them;
//! - `information_schema.X.col` becomes `X.col` (the name the reference now carries);
//! - `DATABASE()` and `SCHEMA()` become the session's logical schema as a string literal
//!   (`NULL` without one); as a select item without an alias, named as written and nullable
//!   (`NULLIF('shop', NULL) AS `DATABASE()``), as MariaDB's column for the call is.
//!
//! Server-level tables (`information_schema.COLLATIONS`) stay as written: the backend's own.

use shoal_router::plan::namespace;
use shoal_router::sql::lex::{TokKind, Token, called_at};

/// Words that end a table reference rather than alias it.
const AFTER_TABLE: &[&str] = &[
    "WHERE",
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "CROSS",
    "NATURAL",
    "STRAIGHT_JOIN",
    "FULL",
    "OUTER",
    "ON",
    "USING",
    "GROUP",
    "ORDER",
    "LIMIT",
    "HAVING",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "MINUS",
    "FOR",
    "LOCK",
    "WINDOW",
    "INTO",
    "USE",
    "IGNORE",
    "FORCE",
    "PARTITION",
    "PROCEDURE",
    "OFFSET",
    "FETCH",
    "RETURNING",
];

/// Words that end a SELECT's list of items.
const END_OF_ITEMS: &[&str] = &[
    "FROM",
    "WHERE",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "INTO",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "WINDOW",
    "FOR",
    "LOCK",
];

/// The rewritten statement and the catalog tables it reads (upper case, each once).
#[derive(Debug, PartialEq)]
pub struct Rewritten {
    pub sql: String,
    pub tables: Vec<&'static str>,
}

fn is_name(t: &Token) -> bool {
    matches!(t.kind, TokKind::Word | TokKind::QuotedIdent)
}

fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// `sql` (tokens `toks`) over the temporary tables `temp(X)` names, in logical schema
/// `schema`.
pub fn rewrite(
    sql: &str,
    toks: &[Token],
    schema: Option<&str>,
    temp: impl Fn(&str) -> String,
) -> Rewritten {
    // (first token, last token, replacement)
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut tables: Vec<&'static str> = Vec::new();
    // Per parenthesis depth: whether the tokens are a SELECT's items.
    let mut in_items: Vec<bool> = vec![false];
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        if t.is_punct(sql, "(") {
            in_items.push(false);
        } else if t.is_punct(sql, ")") {
            if in_items.len() > 1 {
                in_items.pop();
            }
        } else if t.is_kw(sql, "SELECT") {
            *in_items.last_mut().expect("a depth") = true;
        } else if END_OF_ITEMS.iter().any(|w| t.is_kw(sql, w)) {
            *in_items.last_mut().expect("a depth") = false;
        }
        let after_dot = i > 0 && toks[i - 1].is_punct(sql, ".");
        if is_name(t)
            && !after_dot
            && t.ident_value(sql)
                .eq_ignore_ascii_case("information_schema")
            && toks.get(i + 1).is_some_and(|d| d.is_punct(sql, "."))
            && toks.get(i + 2).is_some_and(is_name)
        {
            let name_tok = &toks[i + 2];
            let name = name_tok.ident_value(sql);
            let Some(spec) = super::spec::find(&name) else {
                i += 3;
                continue;
            };
            if !namespace::is_catalog_table(&name) {
                i += 3;
                continue;
            }
            if !tables.contains(&spec.name) {
                tables.push(spec.name);
            }
            let written = name_tok.text(sql).to_string();
            if toks.get(i + 3).is_some_and(|d| d.is_punct(sql, ".")) {
                // A qualifier: the reference is named as written now.
                edits.push((i, i + 2, written));
            } else {
                let aliased = toks.get(i + 3).is_some_and(|n| {
                    n.is_kw(sql, "AS")
                        || n.kind == TokKind::QuotedIdent
                        || (n.kind == TokKind::Word && !AFTER_TABLE.iter().any(|w| n.is_kw(sql, w)))
                });
                let mut with = quote(&temp(spec.name));
                if !aliased {
                    with.push_str(" AS ");
                    with.push_str(&written);
                }
                edits.push((i, i + 2, with));
            }
            i += 3;
            continue;
        }
        if t.kind == TokKind::Word
            && !after_dot
            && (t.is_kw(sql, "DATABASE") || t.is_kw(sql, "SCHEMA"))
            && called_at(sql, toks, i)
            && toks.get(i + 2).is_some_and(|c| c.is_punct(sql, ")"))
        {
            let value = match schema {
                Some(s) => super::rows::quoted(s.as_bytes()),
                None => "NULL".to_string(),
            };
            let prev_starts_item = i > 0
                && (toks[i - 1].is_kw(sql, "SELECT")
                    || toks[i - 1].is_punct(sql, ",")
                    || toks[i - 1].is_kw(sql, "DISTINCT")
                    || toks[i - 1].is_kw(sql, "ALL"));
            let next_ends_item = match toks.get(i + 3) {
                None => true,
                Some(n) => {
                    n.is_punct(sql, ",")
                        || n.is_punct(sql, ")")
                        || n.is_punct(sql, ";")
                        || END_OF_ITEMS.iter().any(|w| n.is_kw(sql, w))
                }
            };
            let with = if *in_items.last().expect("a depth") && prev_starts_item && next_ends_item {
                let text = &sql[t.start as usize..toks[i + 2].end as usize];
                // NULLIF: nullable, as the call's column is (a bare literal is NOT NULL).
                format!("NULLIF({value}, NULL) AS {}", quote(text))
            } else {
                value
            };
            edits.push((i, i + 2, with));
            i += 3;
            continue;
        }
        i += 1;
    }
    let mut out = String::with_capacity(sql.len() + 64);
    let mut at = 0;
    for (first, last, with) in edits {
        out.push_str(&sql[at..toks[first].start as usize]);
        out.push_str(&with);
        at = toks[last].end as usize;
    }
    out.push_str(&sql[at..]);
    Rewritten { sql: out, tables }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_router::sql::lex::tokenize;

    fn rw(sql: &str, schema: Option<&str>) -> Rewritten {
        let toks = tokenize(sql).unwrap();
        rewrite(sql, &toks, schema, |t| {
            format!("shoal_catalog_{}_0", t.to_lowercase())
        })
    }

    #[test]
    fn catalog_tables_become_the_temporary_tables() {
        let r = rw(
            "SELECT table_name FROM information_schema.TABLES WHERE table_schema = DATABASE()",
            Some("shop"),
        );
        assert_eq!(
            r.sql,
            "SELECT table_name FROM `shoal_catalog_tables_0` AS TABLES WHERE table_schema = 'shop'"
        );
        assert_eq!(r.tables, vec!["TABLES"]);
        let r = rw(
            "select t.TABLE_NAME, c.column_name from `information_schema`.`tables` t \
             join information_schema.columns as c using (table_schema, table_name) \
             join information_schema.COLLATIONS l on l.collation_name = c.collation_name",
            None,
        );
        assert_eq!(
            r.sql,
            "select t.TABLE_NAME, c.column_name from `shoal_catalog_tables_0` t \
             join `shoal_catalog_columns_0` as c using (table_schema, table_name) \
             join information_schema.COLLATIONS l on l.collation_name = c.collation_name"
        );
        assert_eq!(r.tables, vec!["TABLES", "COLUMNS"]);
        // A qualifier with the schema names the reference as written.
        let r = rw(
            "SELECT information_schema.tables.table_name FROM information_schema.tables",
            None,
        );
        assert_eq!(
            r.sql,
            "SELECT tables.table_name FROM `shoal_catalog_tables_0` AS tables"
        );
    }

    #[test]
    fn database_becomes_the_logical_schema() {
        let r = rw("SELECT DATABASE(), schema() AS s, 1", Some("shop"));
        assert_eq!(
            r.sql,
            "SELECT NULLIF('shop', NULL) AS `DATABASE()`, 'shop' AS s, 1"
        );
        let r = rw(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE table_schema IN (DATABASE(), 'x')",
            None,
        );
        assert_eq!(
            r.sql,
            "SELECT COUNT(*) FROM `shoal_catalog_tables_0` AS TABLES WHERE table_schema IN (NULL, 'x')"
        );
        // A comment is not a call.
        let r = rw("SELECT 1 /* DATABASE() */", Some("shop"));
        assert_eq!(r.sql, "SELECT 1 /* DATABASE() */");
    }
}
