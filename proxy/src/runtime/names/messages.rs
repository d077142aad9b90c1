//! Backend error messages in the logical namespace. A datanode's server names its own database
//! and, for table-per-shard tables, the physical table (`Table 'shop_1.ledger_03' doesn't
//! exist`); a client must see the names one server holding the logical schema would give
//! (`Table 'shop.ledger' doesn't exist`). The names to replace are computed once per topology
//! ([`LogicalNames::new`]); a message is scanned only when an ERR is relayed.

use shoal_router::topology::{TableDef, Topology};

use super::LogicalNames;
use crate::error::Error;

/// Where in a message a name is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Span {
    /// The message's own words and quoted identifiers.
    Text,
    /// A value the statement carried (`Duplicate entry '...'`, `Incorrect ... value: '...'`):
    /// never changed.
    Value,
    /// A piece of SQL text (`... near '...' at line 1`): names in it are read as SQL.
    Sql,
}

/// Quoted spans that hold a value or SQL text, by what opens them.
const OPENERS: [(&str, Span); 4] = [
    ("entry '", Span::Value),
    ("value: '", Span::Value),
    ("value of '", Span::Value),
    ("near '", Span::Sql),
];

fn ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

fn quote(b: Option<u8>) -> bool {
    matches!(b, Some(b'\'' | b'`' | b'"'))
}

impl LogicalNames {
    /// The error-message half of [`LogicalNames::new`]: every datanode database a schema uses
    /// (its default datanode, its tables' shards and copies) and every table-per-shard
    /// physical table.
    pub(super) fn read_messages(&mut self, t: &Topology) {
        let names = self;
        let mut add_db = |dn: usize, schema: &str| {
            let db = &t.datanodes[dn].database;
            if db != schema {
                let v = names.databases.entry(db.clone()).or_default();
                if !v.iter().any(|s| s == schema) {
                    v.push(schema.to_string());
                    v.sort();
                }
            }
        };
        for s in t.schemas.values() {
            if let Some(dn) = s.default_datanode {
                add_db(dn, &s.name);
            }
            for table in s.tables.values() {
                let (shards, name) = match table {
                    TableDef::Sharded(x) => (&x.shards, &x.name),
                    TableDef::Child(x) => (&x.shards, &x.name),
                    TableDef::Global(g) => {
                        for dn in &g.datanodes {
                            add_db(*dn, &s.name);
                        }
                        continue;
                    }
                };
                for shard in shards {
                    add_db(shard.datanode, &s.name);
                    if shard.physical_table != *name {
                        names
                            .tables
                            .insert(shard.physical_table.clone(), name.clone());
                    }
                }
            }
        }
        // A physical table spelled like a listed logical table is that table.
        for s in t.schemas.values() {
            for table in s.tables.values() {
                names.tables.remove(table.name());
            }
        }
    }

    /// Whether no error message can need a rewrite.
    pub fn rewrites_no_message(&self) -> bool {
        self.databases.is_empty() && self.tables.is_empty()
    }

    /// `message` with physical names replaced by logical ones, whole identifiers only; `None`
    /// when it names none. `current` (the session's logical schema) decides for a database
    /// that stores several schemas.
    pub fn rewrite(&self, message: &str, current: Option<&str>) -> Option<String> {
        if self.rewrites_no_message() {
            return None;
        }
        let b = message.as_bytes();
        let mut out = String::new();
        let mut copied = 0;
        let mut span = Span::Text;
        let mut span_end = 0;
        let mut i = 0;
        while i < b.len() {
            if span != Span::Text && i >= span_end {
                span = Span::Text;
            }
            if span == Span::Text
                && let Some((open, kind)) = OPENERS
                    .iter()
                    .find(|(o, _)| b[i..].starts_with(o.as_bytes()))
            {
                let start = i + open.len();
                // A value may hold quotes: its span ends at the last `' for ` (the column or
                // key named after it), else at the message's last quote.
                let rest = &message[start..];
                let end = rest
                    .rfind("' for ")
                    .or_else(|| rest.rfind('\''))
                    .map_or(b.len(), |e| start + e);
                span = *kind;
                span_end = end;
                i = start;
                continue;
            }
            if !ident_byte(b[i]) {
                i += 1;
                continue;
            }
            let s = i;
            while i < b.len() && ident_byte(b[i]) {
                i += 1;
            }
            if span == Span::Value {
                continue;
            }
            let word = &message[s..i];
            let prev = s.checked_sub(1).map(|p| b[p]);
            let next = b.get(i).copied();
            // A database is a name quoted alone or one qualifying another (`db.t`): a bare
            // word of the message's English (`a foreign key`) is not one.
            let qualifies = next == Some(b'.') && prev != Some(b'.');
            let as_db = qualifies || (span == Span::Text && quote(prev) && quote(next));
            let replacement = as_db
                .then(|| self.databases.get(word))
                .flatten()
                .map(|schemas| {
                    current
                        .and_then(|c| schemas.iter().find(|s| *s == c))
                        .unwrap_or(&schemas[0])
                })
                .or_else(|| {
                    let quoted_or_sql = span == Span::Sql
                        || quote(prev)
                        || prev == Some(b'.')
                        || quote(next)
                        || next == Some(b'.');
                    quoted_or_sql.then(|| self.tables.get(word)).flatten()
                });
            if let Some(r) = replacement {
                out.push_str(&message[copied..s]);
                out.push_str(r);
                copied = i;
            }
        }
        if copied == 0 {
            return None;
        }
        out.push_str(&message[copied..]);
        Some(out)
    }

    /// `e` with its message in logical names (any error: those Shoal builds itself name
    /// logical objects only, so nothing in them changes).
    pub fn error(&self, e: Error, current: Option<&str>) -> Error {
        match e {
            Error::Reply {
                code,
                state,
                message,
            } if !shoal_own(code) => {
                let message = self.rewrite(&message, current).unwrap_or(message);
                Error::Reply {
                    code,
                    state,
                    message,
                }
            }
            e => e,
        }
    }
}

/// Errors only Shoal answers with the router, about a name the client gave: `Unknown
/// database 'a'` must say what the client typed, even where `a` is some datanode's database.
fn shoal_own(code: u16) -> bool {
    matches!(code, 1044 | 1045 | 1049)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> LogicalNames {
        let mut n = LogicalNames::default();
        n.databases.insert("a".into(), vec!["shop".into()]);
        n.databases
            .insert("shop_1".into(), vec!["crm".into(), "shop".into()]);
        n.tables.insert("ledger_03".into(), "ledger".into());
        n
    }

    fn rw(m: &str) -> String {
        names()
            .rewrite(m, Some("shop"))
            .unwrap_or_else(|| m.to_string())
    }

    #[test]
    fn rewrites_quoted_and_qualified_names() {
        assert_eq!(
            rw("Table 'a.orders' doesn't exist"),
            "Table 'shop.orders' doesn't exist"
        );
        assert_eq!(
            rw("Table 'shop_1.ledger_03' doesn't exist"),
            "Table 'shop.ledger' doesn't exist"
        );
        assert_eq!(
            rw("Unknown column 'ledger_03.x' in 'field list'"),
            "Unknown column 'ledger.x' in 'field list'"
        );
        assert_eq!(
            rw("Cannot add or update a child row: a foreign key constraint fails (`a`.`t`)"),
            "Cannot add or update a child row: a foreign key constraint fails (`shop`.`t`)"
        );
        assert_eq!(
            rw("Unknown table 'a.country'"),
            "Unknown table 'shop.country'"
        );
        assert_eq!(
            rw("You have an error in your SQL syntax; near 'FROM a.orders, ledger_03 x' at line 1"),
            "You have an error in your SQL syntax; near 'FROM shop.orders, ledger x' at line 1"
        );
    }

    #[test]
    fn leaves_words_values_and_other_names() {
        for m in [
            "Table 'abc' doesn't exist",
            "Table 'shop.a_b' doesn't exist",
            "Duplicate entry 'a' for key 'PRIMARY'",
            "Duplicate entry 'a.b' for key 'name'",
            "Incorrect integer value: 'ledger_03' for column `x` at row 1",
            "a foreign key",
            "near ''a' at line 1",
        ] {
            assert_eq!(rw(m), m);
        }
        assert_eq!(
            rw("Incorrect integer value: 'a' for column `a`.`t`.`c` at row 1"),
            "Incorrect integer value: 'a' for column `shop`.`t`.`c` at row 1"
        );
    }

    #[test]
    fn a_shared_database_is_the_current_schema() {
        assert_eq!(
            names().rewrite("Table 'shop_1.t' doesn't exist", Some("crm")),
            Some("Table 'crm.t' doesn't exist".into())
        );
        assert_eq!(
            names().rewrite("Table 'shop_1.t' doesn't exist", None),
            Some("Table 'crm.t' doesn't exist".into())
        );
    }
}
