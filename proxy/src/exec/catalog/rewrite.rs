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
//! - `col = 'x'` in the top-level AND of a WHERE or ON, `col` a column MariaDB looks a
//!   schema or table up by ([`super::spec::Spec::lookup`]), gains `AND BINARY col = 'x'`:
//!   the server finds only the schema or table named exactly `x` there, while the temporary
//!   table's comparison is case-insensitive (`TABLE_SCHEMA = 'SHOP'` finds no `shop`).
//!
//! Server-level tables (`information_schema.COLLATIONS`) stay as written: the backend's own.
//!
//! The clause keywords it reads by are the router's ([`shoal_router::sql::clauses`]).

use shoal_router::plan::namespace;
use shoal_router::sql::clauses::{CONDITION_ENDS, ITEM_ENDS, TABLE_REFERENCE_ENDS, is_one_of};
use shoal_router::sql::lex::{TokKind, Token, called_at};

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
    // The catalog tables referenced: (the name qualifying their columns, spec).
    let mut refs: Vec<(String, &'static super::spec::Spec)> = Vec::new();
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
        } else if is_one_of(sql, t, ITEM_ENDS) {
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
            let qualifier_follows = toks.get(i + 3).is_some_and(|d| d.is_punct(sql, "."));
            if !qualifier_follows {
                let mut a = i + 3;
                if toks.get(a).is_some_and(|n| n.is_kw(sql, "AS")) {
                    a += 1;
                }
                let alias = toks
                    .get(a)
                    .filter(|n| {
                        n.kind == TokKind::QuotedIdent
                            || (n.kind == TokKind::Word && !is_one_of(sql, n, TABLE_REFERENCE_ENDS))
                    })
                    .map(|n| n.ident_value(sql))
                    .unwrap_or_else(|| name.clone());
                refs.push((alias, spec));
            }
            if qualifier_follows {
                // A qualifier: the reference is named as written now.
                edits.push((i, i + 2, written));
            } else {
                let aliased = toks.get(i + 3).is_some_and(|n| {
                    n.is_kw(sql, "AS")
                        || n.kind == TokKind::QuotedIdent
                        || (n.kind == TokKind::Word && !is_one_of(sql, n, TABLE_REFERENCE_ENDS))
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
                        || is_one_of(sql, n, ITEM_ENDS)
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
    exact_lookups(sql, toks, &refs, &mut edits);
    edits.sort_by_key(|e| e.0);
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

/// Words that make a condition other than a plain AND of comparisons (or split it where
/// its AND is not a conjunction: `BETWEEN a AND b`).
const NOT_A_CONJUNCTION: &[&str] = &["OR", "XOR", "BETWEEN", "CASE"];

/// Edits adding `AND BINARY col = 'x'` to each `col = 'x'` (or `'x' = col`) conjunct of a
/// WHERE or ON whose `col` is a lookup column of a catalog table the statement reads.
fn exact_lookups(
    sql: &str,
    toks: &[Token],
    refs: &[(String, &'static super::spec::Spec)],
    edits: &mut Vec<(usize, usize, String)>,
) {
    if refs.is_empty() {
        return;
    }
    let mut depth_at = Vec::with_capacity(toks.len());
    let mut depth = 0usize;
    for t in toks {
        if t.is_punct(sql, ")") {
            depth = depth.saturating_sub(1);
        }
        depth_at.push(depth);
        if t.is_punct(sql, "(") {
            depth += 1;
        }
    }
    for (w, t) in toks.iter().enumerate() {
        if !(t.is_kw(sql, "WHERE") || t.is_kw(sql, "ON"))
            || (w > 0 && toks[w - 1].is_punct(sql, "."))
        {
            continue;
        }
        let d = depth_at[w];
        let mut end = w + 1;
        while end < toks.len() {
            let u = &toks[end];
            if depth_at[end] < d
                || (depth_at[end] == d
                    && (u.is_punct(sql, ";")
                        || u.is_punct(sql, ",")
                        || is_one_of(sql, u, CONDITION_ENDS)))
            {
                break;
            }
            end += 1;
        }
        let at_depth = (w + 1..end).filter(|&k| depth_at[k] == d);
        if at_depth.clone().any(|k| {
            toks[k].is_punct(sql, "||") || NOT_A_CONJUNCTION.iter().any(|x| toks[k].is_kw(sql, x))
        }) {
            continue;
        }
        let mut start = w + 1;
        for k in at_depth.chain(std::iter::once(end)) {
            if k == end || toks[k].is_kw(sql, "AND") || toks[k].is_punct(sql, "&&") {
                if let Some(e) = lookup_conjunct(sql, &toks[start..k], start, refs) {
                    edits.push(e);
                }
                start = k + 1;
            }
        }
    }
}

/// `[q.]col = 'x'` or `'x' = [q.]col` (tokens `c`, the first at `at`) with `col` a lookup
/// column: the edit of its string literal.
fn lookup_conjunct(
    sql: &str,
    c: &[Token],
    at: usize,
    refs: &[(String, &'static super::spec::Spec)],
) -> Option<(usize, usize, String)> {
    let eq = c.iter().position(|t| t.is_punct(sql, "="))?;
    let (lhs, rhs) = (&c[..eq], &c[eq + 1..]);
    let (col, lit, lit_first) = match (lhs, rhs) {
        (col, [lit]) if lit.kind == TokKind::Str => (col, lit, false),
        ([lit], col) if lit.kind == TokKind::Str => (col, lit, true),
        _ => return None,
    };
    // `col`, `q.col` or `information_schema.X.col`.
    let names: Vec<String> = col
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let want_name = k % 2 == 0;
            if want_name == is_name(t) && (want_name || t.is_punct(sql, ".")) {
                Some(t.ident_value(sql))
            } else {
                None
            }
        })
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .step_by(2)
        .collect();
    let (qualifier, column) = match names.as_slice() {
        [c] => (None, c),
        [q, c] => (Some(q), c),
        [s, q, c] if s.eq_ignore_ascii_case("information_schema") => (Some(q), c),
        _ => return None,
    };
    let is_lookup = refs.iter().any(|(name, spec)| {
        qualifier.is_none_or(|q| q.eq_ignore_ascii_case(name))
            && spec.lookup.iter().any(|l| l.eq_ignore_ascii_case(column))
    });
    if !is_lookup {
        return None;
    }
    let col_text = match qualifier {
        Some(q) => format!("{}.{}", quote(q), quote(column)),
        None => quote(column),
    };
    let lit_text = lit.text(sql);
    let lit_at = if lit_first { at } else { at + c.len() - 1 };
    let with = if lit_first {
        format!("{lit_text} = {col_text} AND BINARY {lit_text}")
    } else {
        format!("{lit_text} AND BINARY {col_text} = {lit_text}")
    };
    Some((lit_at, lit_at, with))
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

    #[test]
    fn lookup_values_match_exactly() {
        let r = rw(
            "SELECT 1 FROM information_schema.TABLES t WHERE t.TABLE_SCHEMA = 'SHOP' AND \
             'Orders' = table_name AND ENGINE = 'x' AND (TABLE_NAME = 'a' OR 1)",
            None,
        );
        assert_eq!(
            r.sql,
            "SELECT 1 FROM `shoal_catalog_tables_0` t WHERE t.TABLE_SCHEMA = 'SHOP' AND BINARY \
             `t`.`TABLE_SCHEMA` = 'SHOP' AND 'Orders' = `table_name` AND BINARY 'Orders' = \
             table_name AND ENGINE = 'x' AND (TABLE_NAME = 'a' OR 1)"
        );
        // Under an OR no lookup is made; the join's ON is a condition of its own.
        let r = rw(
            "SELECT 1 FROM information_schema.SCHEMATA s LEFT JOIN information_schema.TABLES t \
             ON t.TABLE_SCHEMA = 'Shop' WHERE s.SCHEMA_NAME = 'a' OR s.SCHEMA_NAME = 'b'",
            None,
        );
        assert_eq!(
            r.sql,
            "SELECT 1 FROM `shoal_catalog_schemata_0` s LEFT JOIN `shoal_catalog_tables_0` t \
             ON t.TABLE_SCHEMA = 'Shop' AND BINARY `t`.`TABLE_SCHEMA` = 'Shop' WHERE \
             s.SCHEMA_NAME = 'a' OR s.SCHEMA_NAME = 'b'"
        );
    }
}
