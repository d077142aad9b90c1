//! The global sequence's part in the router: recognising an INSERT into a sharded table that
//! leaves out its shard key while the table has a `sequence`, and splicing the ids the proxy
//! took from the sequence into the statement's text. Pure: the proxy allocates the ids and
//! plans the filled-in text like any other statement.

use crate::sql::analyze::{self, Source};
use crate::sql::lex::{TokKind, Token, tokenize_into};
use crate::sql::normalize;
use crate::sql::stmt::DmlKind;
use crate::topology::{DatanodeId, TableDef, Topology};

/// What an INSERT needs from a table's sequence, and where its ids go in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceFill {
    /// Logical schema and table: the sequence's name is `schema.table`.
    pub schema: String,
    pub table: String,
    pub datanode: DatanodeId,
    pub step: u64,
    /// Rows of the INSERT: ids needed.
    pub rows: usize,
    key: String,
    /// Byte offsets just after the column list's `(` and after each row's `(`; for
    /// `INSERT ... SET`, just after `SET` (and no rows).
    columns_at: usize,
    rows_at: Vec<usize>,
    set_form: bool,
    /// Per row (one for `INSERT ... SET`): the parameters (`?`) of the text before its key's
    /// place.
    params_before: Vec<usize>,
}

impl SequenceFill {
    /// The statement with the shard key column first in the column list and `first`,
    /// `first + 1`, ... as its values, row by row (consecutive, as MySQL's auto-increment
    /// numbers a multi-row INSERT).
    /// `INSERT ... SET`: `` `key` = first`` as the first assignment.
    pub fn apply(&self, sql: &str, first: u64) -> String {
        self.splice(sql, |i| (first + i as u64).to_string())
    }

    /// The statement with the shard key column first in the column list and a parameter (`?`)
    /// as its value in every row: a prepared INSERT, whose executes each bind the ids they
    /// take (at [`Self::key_params`]) with the client's values, one backend statement for all.
    pub fn apply_params(&self, sql: &str) -> String {
        self.splice(sql, |_| "?".to_string())
    }

    /// The positions, among the parameters of [`Self::apply_params`]'s statement, of the rows'
    /// keys, in row order.
    pub fn key_params(&self) -> Vec<usize> {
        self.params_before
            .iter()
            .enumerate()
            .map(|(row, before)| before + row)
            .collect()
    }

    /// `sql` with the key column named and `value(row)` as each row's key.
    fn splice(&self, sql: &str, value: impl Fn(usize) -> String) -> String {
        if self.set_form {
            let key = self.key.replace('`', "``");
            let (head, tail) = sql.split_at(self.columns_at);
            return format!("{head} `{key}` = {},{tail}", value(0));
        }
        let mut out = String::with_capacity(sql.len() + self.rows * 22 + self.key.len() + 4);
        let mut edits: Vec<(usize, String)> = Vec::with_capacity(self.rows + 1);
        edits.push((
            self.columns_at,
            format!("`{}`, ", self.key.replace('`', "``")),
        ));
        for (i, &at) in self.rows_at.iter().enumerate() {
            edits.push((at, format!("{}, ", value(i))));
        }
        edits.sort_by_key(|e| e.0);
        let mut from = 0;
        for (at, text) in edits {
            out.push_str(&sql[from..at]);
            out.push_str(&text);
            from = at;
        }
        out.push_str(&sql[from..]);
        out
    }
}

/// The fill `sql` needs, when it is an `INSERT|REPLACE INTO t (cols) VALUES (...), ...` or
/// `INSERT|REPLACE INTO t SET c = v, ...` into a sharded table with a sequence that leaves out
/// the shard key. `None` for anything else (which the planner then routes or refuses as
/// usual).
pub fn sequence_fill(topo: &Topology, current: Option<&str>, sql: &str) -> Option<SequenceFill> {
    let mut toks: Vec<Token> = Vec::new();
    tokenize_into(sql, &mut toks).ok()?;
    let shape = normalize::shape(sql, &toks);
    let dml = analyze::analyze(&Source::new(sql, &toks, &shape)).ok()?;
    if dml.kind != DmlKind::Insert || dml.unsupported.is_some() {
        return None;
    }
    let ins = dml.insert.as_ref()?;
    if ins.from_select || ins.columns.is_empty() || (!ins.set_form && ins.rows.is_empty()) {
        return None;
    }
    let target = dml.tables.iter().find(|t| t.top_level)?;
    let schema = target.schema.as_deref().or(current)?;
    let ls = topo.schema(schema)?;
    let TableDef::Sharded(t) = ls.table(&target.name)? else {
        return None;
    };
    let seq = t.sequence.as_ref()?;
    if ins
        .columns
        .iter()
        .any(|c| c.eq_ignore_ascii_case(&t.shard_key))
    {
        return None;
    }
    let open_at = |i: u32| -> Option<usize> {
        let tok = toks.get(i as usize)?;
        (tok.kind == TokKind::Punct && tok.text(sql) == "(").then_some(tok.end as usize)
    };
    let name_tok = target.name_tok?;
    let params_before = |at: usize| {
        toks.iter()
            .filter(|t| t.kind == TokKind::Placeholder && (t.end as usize) <= at)
            .count()
    };
    if ins.set_form {
        // `t SET`: not `t PARTITION (p0) SET`.
        let set = toks.get(name_tok as usize + 1)?;
        if set.kind != TokKind::Word || !set.is_kw(sql, "SET") {
            return None;
        }
        return Some(SequenceFill {
            schema: ls.name.clone(),
            table: t.name.clone(),
            datanode: seq.datanode,
            step: seq.step,
            rows: 1,
            key: t.shard_key.clone(),
            columns_at: set.end as usize,
            rows_at: Vec::new(),
            set_form: true,
            params_before: vec![params_before(set.end as usize)],
        });
    }
    let columns_at = open_at(name_tok + 1)?;
    // The `(` must open the column list (not `PARTITION (p0)` or anything else).
    let first_col = toks.get(name_tok as usize + 2)?;
    let first_text = match first_col.kind {
        TokKind::QuotedIdent => first_col.text(sql).trim_matches('`'),
        TokKind::Word => first_col.text(sql),
        _ => return None,
    };
    if !first_text.eq_ignore_ascii_case(&ins.columns[0]) {
        return None;
    }
    let rows_at = ins
        .rows
        .iter()
        .map(|r| open_at(r.first_tok))
        .collect::<Option<Vec<_>>>()?;
    Some(SequenceFill {
        schema: ls.name.clone(),
        table: t.name.clone(),
        datanode: seq.datanode,
        step: seq.step,
        rows: rows_at.len(),
        key: t.shard_key.clone(),
        params_before: rows_at.iter().map(|&at| params_before(at)).collect(),
        columns_at,
        rows_at,
        set_form: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn topo() -> Topology {
        let yaml = r#"
users:
  - { name: app, password: pw, schemas: [shop] }
datahosts:
  - name: dh1
    primary: { address: 127.0.0.1:3307, user: shoal }
datanodes:
  - { name: dn$1-2, datahost: dh1, database: db$1-2 }
rules:
  - { name: m2, algorithm: mod }
schemas:
  - name: shop
    default_datanode: dn1
    tables:
      - { name: orders, type: sharded, shard_key: id, rule: m2, datanodes: "dn1,dn2",
          sequence: { datanode: dn2, step: 50 } }
      - { name: items, type: sharded, shard_key: id, rule: m2, datanodes: "dn1,dn2" }
"#;
        Topology::build(&Config::from_yaml_str(yaml).unwrap()).unwrap()
    }

    #[test]
    fn fills_the_key_of_each_row() {
        let topo = topo();
        let sql = "INSERT INTO orders (name, qty) VALUES ('a(', 1), (\"b\", 2)";
        let f = sequence_fill(&topo, Some("shop"), sql).unwrap();
        assert_eq!((f.rows, f.step, f.datanode), (2, 50, 1));
        assert_eq!(f.table, "orders");
        assert_eq!(
            f.apply(sql, 1001),
            "INSERT INTO orders (`id`, name, qty) VALUES (1001, 'a(', 1), (1002, \"b\", 2)"
        );
        let sql = "insert into shop.`orders`(name) values(?) on duplicate key update name = 'x'";
        let f = sequence_fill(&topo, None, sql).unwrap();
        assert_eq!(
            f.apply(sql, 7),
            "insert into shop.`orders`(`id`, name) values(7, ?) on duplicate key update name = 'x'"
        );
    }

    #[test]
    fn a_prepared_insert_binds_each_key() {
        let topo = topo();
        let sql = "INSERT INTO orders (name, qty) VALUES (?, ?), ('b', ?) ON DUPLICATE KEY UPDATE qty = ?";
        let f = sequence_fill(&topo, Some("shop"), sql).unwrap();
        assert_eq!(
            f.apply_params(sql),
            "INSERT INTO orders (`id`, name, qty) VALUES (?, ?, ?), (?, 'b', ?) ON DUPLICATE KEY UPDATE qty = ?"
        );
        // Keys are parameters 0 and 3 of six; the client's four are 1, 2, 4 and 5.
        assert_eq!(f.key_params(), vec![0, 3]);
        let sql = "INSERT INTO orders SET name = ?, qty = ?";
        let f = sequence_fill(&topo, Some("shop"), sql).unwrap();
        assert_eq!(
            f.apply_params(sql),
            "INSERT INTO orders SET `id` = ?, name = ?, qty = ?"
        );
        assert_eq!(f.key_params(), vec![0]);
    }

    #[test]
    fn fills_the_key_of_insert_set() {
        let topo = topo();
        let sql = "INSERT INTO orders SET name = 'a', qty = 2 ON DUPLICATE KEY UPDATE qty = 3";
        let f = sequence_fill(&topo, Some("shop"), sql).unwrap();
        assert_eq!(f.rows, 1);
        assert_eq!(
            f.apply(sql, 51),
            "INSERT INTO orders SET `id` = 51, name = 'a', qty = 2 ON DUPLICATE KEY UPDATE qty = 3"
        );
    }

    #[test]
    fn anything_else_is_left_to_the_planner() {
        let topo = topo();
        for sql in [
            "INSERT INTO orders (id, name) VALUES (1, 'a')",
            "INSERT INTO orders VALUES (1, 'a')",
            "INSERT INTO orders SET id = 3, name = 'a'",
            "INSERT INTO orders PARTITION (p0) SET name = 'a'",
            "INSERT INTO orders (name) SELECT name FROM items",
            "INSERT INTO items (name) VALUES ('a')",
            "UPDATE orders SET name = 'a'",
            "INSERT INTO nosuch (name) VALUES ('a')",
            "INSERT INTO orders PARTITION (p0) (name) VALUES ('a')",
        ] {
            assert_eq!(sequence_fill(&topo, Some("shop"), sql), None, "{sql}");
        }
        assert_eq!(
            sequence_fill(&topo, None, "INSERT INTO orders (name) VALUES ('a')"),
            None
        );
    }
}
