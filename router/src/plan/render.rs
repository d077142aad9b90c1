//! SQL rewriting by splicing the original text.
//!
//! sqlparser's printer loses comments, hints and executable-comment version gates, so shard SQL
//! is the client's text with a few token ranges replaced (table and schema names, LIMIT, HAVING)
//! or text inserted after a token (hidden columns). Positions are token indices, valid for every
//! statement of the same shape.

use crate::sql::lex::{TokKind, Token};

/// Replacement text: literal text and copies of token ranges of the statement (themselves
/// rendered with the name edits, so a copied `t.x` gets the physical table name too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Tokens(u32, u32),
}

/// One edit: replace tokens `first..=last` (or insert after `last` when `insert` is set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub first: u32,
    pub last: u32,
    pub insert: bool,
    pub with: Vec<Piece>,
}

impl Edit {
    pub fn replace(first: u32, last: u32, with: Vec<Piece>) -> Edit {
        Edit {
            first,
            last,
            insert: false,
            with,
        }
    }
    pub fn text(first: u32, last: u32, s: String) -> Edit {
        Edit::replace(first, last, vec![Piece::Text(s)])
    }
    pub fn insert_after(tok: u32, with: Vec<Piece>) -> Edit {
        Edit {
            first: tok,
            last: tok,
            insert: true,
            with,
        }
    }
}

/// The statement text and its tokens.
pub struct Text<'a> {
    pub sql: &'a str,
    pub toks: &'a [Token],
    pub param_tokens: &'a [u32],
}

impl Text<'_> {
    /// Render bytes `from..to` of the statement with `edits` (sorted by `first`, not
    /// overlapping) applied; placeholders emitted are appended to `params`.
    pub fn render_bytes(
        &self,
        from: usize,
        to: usize,
        edits: &[Edit],
        out: &mut String,
        params: &mut Vec<u16>,
    ) {
        let mut cursor = from;
        for e in edits {
            let (Some(first), Some(last)) = (
                self.toks.get(e.first as usize),
                self.toks.get(e.last as usize),
            ) else {
                continue;
            };
            let (a, b) = (first.start as usize, last.end as usize);
            if a < from || b > to || (!e.insert && a < cursor) || (e.insert && b < cursor) {
                continue;
            }
            if e.insert {
                self.copy(cursor, b, out, params);
                cursor = b;
            } else {
                self.copy(cursor, a, out, params);
                cursor = b;
            }
            for p in &e.with {
                match p {
                    Piece::Text(s) => out.push_str(s),
                    Piece::Tokens(x, y) => {
                        let (Some(tx), Some(ty)) =
                            (self.toks.get(*x as usize), self.toks.get(*y as usize))
                        else {
                            continue;
                        };
                        // Only name edits apply inside a copied range.
                        let inner: Vec<Edit> = edits
                            .iter()
                            .filter(|f| !f.insert && f.first >= *x && f.last <= *y)
                            .cloned()
                            .collect();
                        self.render_bytes(tx.start as usize, ty.end as usize, &inner, out, params);
                    }
                }
            }
        }
        self.copy(cursor, to, out, params);
    }

    /// Copy text verbatim, recording the placeholders in it.
    fn copy(&self, from: usize, to: usize, out: &mut String, params: &mut Vec<u16>) {
        if from >= to {
            return;
        }
        out.push_str(&self.sql[from..to]);
        if self.param_tokens.is_empty() {
            return;
        }
        for (i, &t) in self.param_tokens.iter().enumerate() {
            let tok = &self.toks[t as usize];
            if tok.kind == TokKind::Placeholder
                && tok.start as usize >= from
                && (tok.end as usize) <= to
            {
                params.push(i as u16);
            }
        }
    }

    /// The whole statement with each table name token of `qualify` (sorted, as written)
    /// qualified with database `db`: what [`Self::render`] gives for those edits, without
    /// building them (a routed statement's one target, on every statement). `None` when the
    /// tokens are not in order.
    pub fn render_qualified(
        &self,
        qualify: &[(u32, String)],
        db: &str,
    ) -> Option<(String, Vec<u16>)> {
        if !qualify.is_sorted_by(|a, b| a.0 < b.0) {
            return None;
        }
        let mut out = String::with_capacity(self.sql.len() + qualify.len() * (db.len() + 3));
        let mut params = Vec::new();
        let mut cursor = 0;
        for (t, written) in qualify {
            let tok = self.toks.get(*t as usize)?;
            let (a, b) = (tok.start as usize, tok.end as usize);
            self.copy(cursor, a, &mut out, &mut params);
            push_qualified(&mut out, db, written);
            cursor = b;
        }
        self.copy(cursor, self.sql.len(), &mut out, &mut params);
        Some((out, params))
    }

    /// The whole statement with `edits` applied.
    pub fn render(&self, edits: &[Edit]) -> (String, Vec<u16>) {
        let mut out = String::with_capacity(self.sql.len() + 16);
        let mut params = Vec::new();
        self.render_bytes(0, self.sql.len(), edits, &mut out, &mut params);
        (out, params)
    }

    pub fn tok_start(&self, t: u32) -> usize {
        self.toks[t as usize].start as usize
    }

    pub fn tok_end(&self, t: u32) -> usize {
        self.toks[t as usize].end as usize
    }
}

/// An identifier as SQL text: bare when it can be, backquoted otherwise (or when the client
/// quoted the name it replaces).
pub fn quote_ident(name: &str, force: bool) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    push_ident(&mut out, name, force);
    out
}

/// `db.name` appended to `out`: a table name as written (`name`, quoted or not) qualified with
/// database `db` (quoted where it must be).
pub fn push_qualified(out: &mut String, db: &str, name: &str) {
    push_ident(out, db, false);
    out.push('.');
    out.push_str(name);
}

/// [`quote_ident`] appended to `out` (no allocation of its own: qualified names are built per
/// routed statement).
pub fn push_ident(out: &mut String, name: &str, force: bool) {
    let bare = !force
        && !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
        && !name.bytes().all(|b| b.is_ascii_digit());
    if bare {
        out.push_str(name);
    } else {
        out.push('`');
        for c in name.chars() {
            if c == '`' {
                out.push('`');
            }
            out.push(c);
        }
        out.push('`');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lex::tokenize;

    #[test]
    fn identifiers_are_quoted_only_where_mariadb_needs_it() {
        assert_eq!(quote_ident("shop_1", false), "shop_1");
        assert_eq!(quote_ident("shop_1", true), "`shop_1`");
        assert_eq!(quote_ident("123", false), "`123`");
        assert_eq!(quote_ident("", false), "``");
        assert_eq!(quote_ident("a`b c", false), "`a``b c`");
        let mut s = String::from("x.");
        push_ident(&mut s, "dé", false);
        assert_eq!(s, "x.`dé`");
    }

    /// `f` of `sql` as a [`Text`] (its placeholders found), with its tokens.
    fn with_text<R>(sql: &str, f: impl FnOnce(&Text, &[Token]) -> R) -> R {
        let toks = tokenize(sql).unwrap();
        let params: Vec<u32> = toks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.kind == TokKind::Placeholder)
            .map(|(i, _)| i as u32)
            .collect();
        let text = Text {
            sql,
            toks: &toks,
            param_tokens: &params,
        };
        f(&text, &toks)
    }

    #[test]
    fn splices_keep_comments() {
        let sql = "/* trace=1 */ SELECT a.x FROM t AS a WHERE id = ? LIMIT ?, 5";
        with_text(sql, |text, _| {
            // tokens: SELECT a . x FROM t AS a WHERE id = ? LIMIT ? , 5
            let edits = vec![
                Edit::insert_after(3, vec![Piece::Text(", ".into()), Piece::Tokens(1, 3)]),
                Edit::text(5, 5, "t_0001".into()),
                Edit::text(12, 15, "LIMIT 7".into()),
            ];
            let (out, p) = text.render(&edits);
            assert_eq!(
                out,
                "/* trace=1 */ SELECT a.x, a.x FROM t_0001 AS a WHERE id = ? LIMIT 7"
            );
            assert_eq!(p, vec![0]);
        });
    }

    #[test]
    fn qualified_rendering_is_the_edits_rendering() {
        let sql = "SELECT /* c */ x FROM t JOIN `u v` ON t.a = ? WHERE b IN (?, ?)";
        with_text(sql, |text, toks| {
            let at = |name: &str| toks.iter().position(|t| t.text(sql) == name).unwrap() as u32;
            let qualify = vec![
                (at("t"), "t".to_string()),
                (at("`u v`"), "`u v`".to_string()),
            ];
            for db in ["shop_1", "my db"] {
                let edits: Vec<Edit> = qualify
                    .iter()
                    .map(|(t, w)| {
                        let mut s = String::new();
                        push_ident(&mut s, db, false);
                        Edit::text(*t, *t, format!("{s}.{w}"))
                    })
                    .collect();
                let direct = text.render_qualified(&qualify, db).unwrap();
                assert_eq!(direct, text.render(&edits));
                assert!(direct.0.contains(".`u v` ON"), "{}", direct.0);
                assert_eq!(direct.1, vec![0, 1, 2]);
            }
            let backwards: Vec<_> = qualify.iter().rev().cloned().collect();
            assert!(text.render_qualified(&backwards, "d").is_none());
        });
    }
}
