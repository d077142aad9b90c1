//! Conditions a gathered statement's copies are fetched with, so that a big table is not copied
//! whole: a conjunct of the outermost WHERE, or of a join's ON, that reads one table reference
//! only (its qualified columns, literals, comparisons, IN, BETWEEN, LIKE, IS [NOT] NULL, AND,
//! OR, NOT: no function, no subquery, no variable).
//!
//! A WHERE conjunct goes into the fetch of a table joined INNER or on the preserved side of an
//! outer join; an ON conjunct into the fetch of the table that ON joins, when the join is
//! INNER or LEFT (that table is then the NULL-extended side: a row failing its ON never
//! matches). Never a WHERE conjunct into a NULL-extended table's fetch: it would change which
//! rows are NULL-extended. The statement over the copies keeps every predicate: a pushed one is
//! only a filter that drops no row the statement needs, evaluated by MariaDB on the same
//! column definitions in the same session settings.
//!
//! Read on tokens: anything not in the narrow grammar above leaves the conjunct where it is.

use crate::sql::clauses::{CONDITION_ENDS, is_one_of};
use crate::sql::lex::{TokKind, Token};
use crate::sql::stmt::TableRef;

/// Words a pushed conjunct may hold besides its qualified columns.
const WORDS: &[&str] = &[
    "AND", "OR", "NOT", "IN", "BETWEEN", "LIKE", "IS", "NULL", "TRUE", "FALSE", "ESCAPE",
];

/// Operators and punctuation a pushed conjunct may hold.
const PUNCT: &[&str] = &[
    "=", "<>", "!=", "<", "<=", ">", ">=", "<=>", "(", ")", ",", "+", "-", "*", "/", "%",
];

/// What a statement's conditions give its copies' reads.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Pushed {
    /// For each of the statement's table references, in order, the conjuncts its read may be
    /// filtered with, as written.
    pub filters: Vec<Vec<String>>,
    /// Inner-join equalities `a.x = b.y` between two table references, neither NULL-extended:
    /// (table a, column x, table b, column y). A row of one that matches no row of the other
    /// is in no result row.
    pub keys: Vec<(usize, String, usize, String)>,
    /// Every `a.x = b.y` of a WHERE or an ON, outer joins' too: columns worth an index in
    /// the copies (an index changes no answer).
    pub equalities: Vec<(usize, String, usize, String)>,
}

/// The conditions of `sql` (tokens `toks`) each of `tables` (the statement's table
/// references, in order) may be read with.
pub(super) fn filters(sql: &str, toks: &[Token], tables: &[TableRef]) -> Pushed {
    let mut pushed = Pushed {
        filters: vec![Vec::new(); tables.len()],
        keys: Vec::new(),
        equalities: Vec::new(),
    };
    let Some((select, level)) = main_select(sql, toks) else {
        return pushed;
    };
    let out = &mut pushed.filters;
    let keys = &mut pushed.keys;
    let equalities = &mut pushed.equalities;
    // Depth of every token (its own parenthesis counted outside).
    let mut depth = Vec::with_capacity(toks.len());
    let mut d = 0i32;
    for t in toks {
        if t.is_punct(sql, ")") {
            d -= 1;
        }
        depth.push(d);
        if t.is_punct(sql, "(") {
            d += 1;
        }
    }
    let at_level = |i: usize| depth[i] == level;
    // The query's top-level tables are those of this one SELECT: no set operation beside it.
    if (select..toks.len()).any(|i| {
        at_level(i)
            && ["UNION", "EXCEPT", "INTERSECT"]
                .iter()
                .any(|w| toks[i].is_kw(sql, w))
    }) {
        return pushed;
    }
    let end_of_select = (select + 1..toks.len())
        .find(|&i| depth[i] < level || (at_level(i) && toks[i].is_punct(sql, ";")))
        .unwrap_or(toks.len());
    let table_of = |q: &str| -> Option<usize> {
        let mut hits = tables.iter().enumerate().filter(|(_, t)| {
            t.top_level
                && match &t.alias {
                    Some(a) => a.eq_ignore_ascii_case(q),
                    None => t.name.eq_ignore_ascii_case(q),
                }
        });
        let first = hits.next()?;
        hits.next().is_none().then_some(first.0)
    };
    // The outermost WHERE.
    if let Some(w) =
        (select + 1..end_of_select).find(|&i| at_level(i) && toks[i].is_kw(sql, "WHERE"))
    {
        let end = condition_end(sql, toks, &depth, level, w + 1, end_of_select);
        for (a, b) in conjuncts(sql, toks, &depth, level, w + 1, end) {
            if let Some(q) = one_table(sql, &toks[a..b])
                && let Some(i) = table_of(&q)
                && !tables[i].outer_nullable
            {
                out[i].push(text(sql, &toks[a..b]));
            } else if let Some((q1, c1, q2, c2)) = key_equality(sql, &toks[a..b])
                && let (Some(i), Some(j)) = (table_of(&q1), table_of(&q2))
                && i != j
                && !tables[i].outer_nullable
                && !tables[j].outer_nullable
            {
                keys.push((i, c1, j, c2));
            }
        }
    }
    // ON conditions of INNER and LEFT joins, into the table they join.
    for (i, t) in tables.iter().enumerate() {
        if !t.top_level {
            continue;
        }
        let (Some(name), first) = (t.name_tok.map(|n| n as usize), t.schema_tok) else {
            continue;
        };
        let first = first.map_or(name, |s| s as usize);
        if first == 0 || name >= end_of_select {
            continue;
        }
        // `[LEFT [OUTER] | INNER | CROSS] JOIN t [[AS] a] ON`, or `STRAIGHT_JOIN t ... ON`.
        let before = &toks[first - 1];
        // The words before JOIN: a RIGHT (its table is the preserved side), NATURAL or FULL
        // join pushes nothing into it.
        let k = first - 1;
        let word = |back: usize, w: &str| k >= back && toks[k - back].is_kw(sql, w);
        let outer = word(1, "OUTER");
        let kind_at = if outer { 2 } else { 1 };
        let joined = before.is_kw(sql, "STRAIGHT_JOIN")
            || (before.is_kw(sql, "JOIN")
                && !["RIGHT", "NATURAL", "FULL"]
                    .iter()
                    .any(|w| word(kind_at, w) || word(kind_at + 1, w)));
        let inner = before.is_kw(sql, "STRAIGHT_JOIN")
            || (before.is_kw(sql, "JOIN") && !word(kind_at, "LEFT") && !word(kind_at + 1, "LEFT"));
        if !joined {
            continue;
        }
        let mut on = name + 1;
        if toks.get(on).is_some_and(|x| x.is_kw(sql, "AS")) {
            on += 1;
        }
        if t.alias.is_some() {
            on += 1;
        }
        if !toks.get(on).is_some_and(|x| x.is_kw(sql, "ON")) || depth[on] != depth[name] {
            continue;
        }
        let lvl = depth[on];
        let end = condition_end(sql, toks, &depth, lvl, on + 1, end_of_select);
        let known_as = t.alias.as_deref().unwrap_or(&t.name);
        for (a, b) in conjuncts(sql, toks, &depth, lvl, on + 1, end) {
            if let Some(q) = one_table(sql, &toks[a..b])
                && q.eq_ignore_ascii_case(known_as)
            {
                out[i].push(text(sql, &toks[a..b]));
            } else if let Some((q1, c1, q2, c2)) = key_equality(sql, &toks[a..b])
                && let (Some(x), Some(y)) = (table_of(&q1), table_of(&q2))
                && x != y
            {
                if inner
                    && (x == i || y == i)
                    && !tables[x].outer_nullable
                    && !tables[y].outer_nullable
                {
                    keys.push((x, c1.clone(), y, c2.clone()));
                }
                equalities.push((x, c1, y, c2));
            }
        }
    }
    pushed
}

/// `q1.c1 = q2.c2`, exactly.
fn key_equality(sql: &str, toks: &[Token]) -> Option<(String, String, String, String)> {
    let [q1, d1, c1, eq, q2, d2, c2] = toks else {
        return None;
    };
    let ident = |t: &Token| matches!(t.kind, TokKind::Word | TokKind::QuotedIdent);
    (ident(q1)
        && ident(c1)
        && ident(q2)
        && ident(c2)
        && d1.is_punct(sql, ".")
        && d2.is_punct(sql, ".")
        && eq.is_punct(sql, "="))
    .then(|| {
        (
            q1.ident_value(sql),
            c1.ident_value(sql),
            q2.ident_value(sql),
            c2.ident_value(sql),
        )
    })
}

/// The SELECT keyword of the outermost query and its depth.
fn main_select(sql: &str, toks: &[Token]) -> Option<(usize, i32)> {
    let with = toks.first()?.is_kw(sql, "WITH");
    let mut depth = 0i32;
    for (i, t) in toks.iter().enumerate() {
        if t.is_kw(sql, "SELECT") && (!with || depth == 0) {
            return Some((i, depth));
        }
        if t.is_punct(sql, "(") {
            depth += 1;
        } else if t.is_punct(sql, ")") {
            depth -= 1;
        }
    }
    None
}

/// Where a condition starting at `from` ends (exclusive).
fn condition_end(
    sql: &str,
    toks: &[Token],
    depth: &[i32],
    level: i32,
    from: usize,
    limit: usize,
) -> usize {
    (from..limit)
        .find(|&i| {
            depth[i] < level
                || (depth[i] == level
                    && (toks[i].is_punct(sql, ",")
                        || toks[i].is_punct(sql, ";")
                        || is_one_of(sql, &toks[i], CONDITION_ENDS)))
        })
        .unwrap_or(limit)
}

/// The conjuncts of the condition `from..end`, split at its own depth's AND (not a BETWEEN's).
fn conjuncts(
    sql: &str,
    toks: &[Token],
    depth: &[i32],
    level: i32,
    from: usize,
    end: usize,
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = from;
    let mut between = false;
    for i in from..end {
        if depth[i] != level {
            continue;
        }
        let t = &toks[i];
        if t.is_kw(sql, "BETWEEN") {
            between = true;
        } else if t.is_kw(sql, "AND") || t.is_punct(sql, "&&") {
            if between {
                between = false;
                continue;
            }
            out.push((start, i));
            start = i + 1;
        } else if t.is_kw(sql, "OR") || t.is_punct(sql, "||") || t.is_kw(sql, "XOR") {
            // `a AND b OR c`: OR binds looser than AND; the whole condition is one conjunct.
            return vec![(from, end)];
        }
    }
    out.push((start, end));
    out.retain(|(a, b)| a < b);
    out
}

/// The one table qualifier a conjunct reads, when it holds only the narrow grammar.
fn one_table(sql: &str, toks: &[Token]) -> Option<String> {
    let mut q: Option<String> = None;
    let mut i = 0;
    let mut columns = 0;
    while i < toks.len() {
        let t = &toks[i];
        let ident = matches!(t.kind, TokKind::Word | TokKind::QuotedIdent);
        let dotted = toks.get(i + 1).is_some_and(|d| d.is_punct(sql, "."));
        if ident && dotted {
            // `q.c` only (a schema-qualified column is left where it is).
            let col = toks.get(i + 2)?;
            if !matches!(col.kind, TokKind::Word | TokKind::QuotedIdent)
                || toks.get(i + 3).is_some_and(|d| d.is_punct(sql, "."))
                || toks.get(i + 3).is_some_and(|d| d.is_punct(sql, "("))
            {
                return None;
            }
            let name = t.ident_value(sql);
            match &q {
                Some(x) if !x.eq_ignore_ascii_case(&name) => return None,
                _ => q = Some(name),
            }
            columns += 1;
            i += 3;
            continue;
        }
        let ok = match t.kind {
            TokKind::Word => WORDS.iter().any(|w| t.is_kw(sql, w)),
            TokKind::Str | TokKind::DqStr | TokKind::Int | TokKind::Decimal => true,
            TokKind::Punct => PUNCT.iter().any(|p| t.is_punct(sql, p)),
            _ => false,
        };
        if !ok {
            return None;
        }
        // A parenthesis after anything but an operator, IN or another parenthesis is a call.
        if t.is_punct(sql, "(") && i > 0 {
            let p = &toks[i - 1];
            let grouping = match p.kind {
                TokKind::Punct => !p.is_punct(sql, ")"),
                TokKind::Word => WORDS.iter().any(|w| p.is_kw(sql, w)),
                _ => false,
            };
            if !grouping {
                return None;
            }
        }
        i += 1;
    }
    (columns > 0).then_some(q).flatten()
}

fn text(sql: &str, toks: &[Token]) -> String {
    match (toks.first(), toks.last()) {
        (Some(a), Some(b)) => sql[a.start as usize..b.end as usize].to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lex::tokenize;

    fn refs(names: &[(&str, Option<&str>, bool)], sql: &str, toks: &[Token]) -> Vec<TableRef> {
        names
            .iter()
            .map(|(n, a, nullable)| {
                let tok = toks
                    .iter()
                    .position(|t| t.kind == TokKind::Word && t.text(sql) == *n)
                    .map(|p| p as u32);
                TableRef {
                    schema: None,
                    name: n.to_string(),
                    alias: a.map(str::to_string),
                    schema_tok: None,
                    name_tok: tok,
                    top_level: true,
                    outer_nullable: *nullable,
                }
            })
            .collect()
    }

    fn pushed(sql: &str, names: &[(&str, Option<&str>, bool)]) -> Vec<Vec<String>> {
        keyed(sql, names).filters
    }

    fn keyed(sql: &str, names: &[(&str, Option<&str>, bool)]) -> Pushed {
        let toks = tokenize(sql).unwrap();
        filters(sql, &toks, &refs(names, sql, &toks))
    }

    /// Equalities of an inner join between tables neither NULL-extended; not a LEFT join's.
    #[test]
    fn inner_join_equalities_are_found() {
        let k = keyed(
            "SELECT * FROM orders o JOIN pay p ON p.order_id = o.id WHERE o.user_id = 1",
            &[("orders", Some("o"), false), ("pay", Some("p"), false)],
        );
        assert_eq!(k.keys, vec![(1, "order_id".into(), 0, "id".into())]);
        let k = keyed(
            "SELECT * FROM orders o, pay p WHERE p.order_id = o.id",
            &[("orders", Some("o"), false), ("pay", Some("p"), false)],
        );
        assert_eq!(k.keys, vec![(1, "order_id".into(), 0, "id".into())]);
        let k = keyed(
            "SELECT * FROM orders o LEFT JOIN pay p ON p.order_id = o.id",
            &[("orders", Some("o"), false), ("pay", Some("p"), true)],
        );
        assert!(k.keys.is_empty(), "{k:?}");
    }

    /// WHERE conjuncts of one table go to it; joins, calls, OR across tables stay.
    #[test]
    fn where_conjuncts_of_one_table_are_pushed() {
        let f = pushed(
            "SELECT * FROM orders o JOIN pay p ON p.order_id = o.id WHERE o.user_id = 5 \
             AND p.paid BETWEEN 1 AND 2 AND o.id = p.id AND UPPER(o.note) = 'A' \
             AND (p.kind IN ('card', 'cash') OR p.kind IS NULL) ORDER BY o.id",
            &[("orders", Some("o"), false), ("pay", Some("p"), false)],
        );
        assert_eq!(f[0], vec!["o.user_id = 5"]);
        assert_eq!(
            f[1],
            vec![
                "p.paid BETWEEN 1 AND 2",
                "(p.kind IN ('card', 'cash') OR p.kind IS NULL)"
            ]
        );
    }

    /// Never a WHERE conjunct into a NULL-extended table; its ON conjuncts yes, the preserved
    /// side's ON conjuncts never.
    #[test]
    fn outer_joins_push_only_what_keeps_null_extension() {
        let f = pushed(
            "SELECT * FROM country c LEFT JOIN orders o ON o.country = c.code AND o.amount > 100 \
             AND c.code <> 'XX' WHERE o.note IS NULL AND c.name LIKE 'F%'",
            &[("country", Some("c"), false), ("orders", Some("o"), true)],
        );
        assert_eq!(f[0], vec!["c.name LIKE 'F%'"]);
        assert_eq!(f[1], vec!["o.amount > 100"]);
        let f = pushed(
            "SELECT * FROM orders o RIGHT JOIN country c ON o.country = c.code AND c.code = 'FR'",
            &[("orders", Some("o"), true), ("country", Some("c"), false)],
        );
        assert!(f.iter().all(Vec::is_empty), "{f:?}");
    }

    /// A set operation, a top-level OR, a subquery: nothing pushed.
    #[test]
    fn nothing_is_pushed_where_it_could_drop_a_row() {
        for sql in [
            "SELECT o.id FROM orders o WHERE o.id = 1 UNION SELECT 1",
            "SELECT o.id FROM orders o WHERE o.id = 1 OR o.id = 2 AND o.x = 1",
            "SELECT o.id FROM orders o WHERE o.id IN (SELECT 1)",
            "SELECT o.id FROM orders o WHERE o.id = @v",
            "SELECT o.id FROM orders o WHERE o.id = RAND()",
        ] {
            let f = pushed(sql, &[("orders", Some("o"), false)]);
            assert!(
                f[0].is_empty() || f[0] == vec!["o.id = 1 OR o.id = 2 AND o.x = 1"],
                "{sql}: {f:?}"
            );
        }
    }
}
