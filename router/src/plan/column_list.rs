//! INSERT / REPLACE without a column list into a sharded or child table
//! (``INSERT INTO `orders` VALUES (...)``, as mydumper and hand-written SQL send): the planner
//! cannot find the shard key among unnamed values, so it refuses; this module says which
//! table's column order the statement needs and where the list goes in its text. The proxy
//! reads the order from the table's definition on a datanode, splices the list in
//! ([`ColumnListFill::apply`]) and plans the result like any INSERT with a column list. Pure.

use crate::sql::analyze::{self, Source};
use crate::sql::lex::{TokKind, Token, tokenize_into};
use crate::sql::normalize;
use crate::sql::stmt::DmlKind;
use crate::topology::{DatanodeId, TableDef, Topology};

/// What an INSERT without a column list needs: the column order of a table, and where it
/// goes in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnListFill {
    /// Logical schema and table (the cache's key).
    pub schema: String,
    pub table: String,
    /// Where the definition is read: the table's first shard.
    pub datanode: DatanodeId,
    pub physical_table: String,
    /// Values in each row.
    pub widths: Vec<usize>,
    /// Byte offset just after the table name: the list goes there.
    at: usize,
}

impl ColumnListFill {
    /// The first row (1-based) whose value count is not `columns`: MariaDB's 1136 names it.
    pub fn wrong_row(&self, columns: usize) -> Option<usize> {
        self.widths
            .iter()
            .position(|&w| w != columns)
            .map(|i| i + 1)
    }

    /// The statement with `` (`c1`, `c2`, ...)`` after the table name.
    pub fn apply(&self, sql: &str, columns: &[String]) -> String {
        let mut list = String::with_capacity(columns.iter().map(|c| c.len() + 4).sum::<usize>());
        for (i, c) in columns.iter().enumerate() {
            if i > 0 {
                list.push_str(", ");
            }
            list.push('`');
            list.push_str(&c.replace('`', "``"));
            list.push('`');
        }
        format!("{} ({list}){}", &sql[..self.at], &sql[self.at..])
    }
}

/// The fill `sql` needs when it is `INSERT|REPLACE [INTO] t VALUES|VALUE (...), ...` with no
/// column list into a sharded or child table. `None` for anything else (left to the planner).
pub fn column_list_fill(
    topo: &Topology,
    current: Option<&str>,
    sql: &str,
) -> Option<ColumnListFill> {
    let mut toks: Vec<Token> = Vec::new();
    tokenize_into(sql, &mut toks).ok()?;
    let shape = normalize::shape(sql, &toks);
    let dml = analyze::analyze(&Source::new(sql, &toks, &shape)).ok()?;
    if dml.kind != DmlKind::Insert || dml.unsupported.is_some() {
        return None;
    }
    let ins = dml.insert.as_ref()?;
    if ins.set_form || ins.from_select || !ins.columns.is_empty() || ins.rows.is_empty() {
        return None;
    }
    let target = dml.tables.iter().find(|t| t.top_level)?;
    let schema = target.schema.as_deref().or(current)?;
    let ls = topo.schema(schema)?;
    let shards = match ls.table(&target.name)? {
        TableDef::Sharded(t) => &t.shards,
        TableDef::Child(t) => &t.shards,
        TableDef::Global(_) => return None,
    };
    let first = shards.first()?;
    // Only `t VALUES`: not `t PARTITION (p0) VALUES`, not `t () VALUES ()`.
    let name_tok = target.name_tok?;
    let next = toks.get(name_tok as usize + 1)?;
    if next.kind != TokKind::Word || !(next.is_kw(sql, "VALUES") || next.is_kw(sql, "VALUE")) {
        return None;
    }
    Some(ColumnListFill {
        schema: ls.name.clone(),
        table: target.name.clone(),
        datanode: first.datanode,
        physical_table: first.physical_table.clone(),
        widths: ins.rows.iter().map(|r| r.values.len()).collect(),
        at: toks[name_tok as usize].end as usize,
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
      - { name: orders, type: sharded, shard_key: id, rule: m2, datanodes: "dn2,dn1" }
      - { name: item, type: child, parent: orders, join_key: id }
      - { name: country, type: global, datanodes: "dn1,dn2" }
"#;
        Topology::build(&Config::from_yaml_str(yaml).unwrap()).unwrap()
    }

    #[test]
    fn names_the_table_and_the_place_of_the_list() {
        let topo = topo();
        let sql = "INSERT INTO `orders` VALUES (1,'a(',2),(2,\"b\",3)";
        let f = sequence_free(&topo, Some("shop"), sql);
        assert_eq!((f.schema.as_str(), f.table.as_str()), ("shop", "orders"));
        assert_eq!((f.wrong_row(3), f.wrong_row(2)), (None, Some(1)));
        let cols = ["id".to_string(), "na`me".to_string(), "qty".to_string()];
        assert_eq!(
            f.apply(sql, &cols),
            "INSERT INTO `orders` (`id`, `na``me`, `qty`) VALUES (1,'a(',2),(2,\"b\",3)"
        );
        let sql = "replace shop.item value (1, 2), (3)";
        let f = sequence_free(&topo, None, sql);
        assert_eq!(f.table, "item");
        assert_eq!((f.wrong_row(2), f.wrong_row(1)), (Some(2), Some(1)));
        assert_eq!(
            f.apply(sql, &cols[..1]),
            "replace shop.item (`id`) value (1, 2), (3)"
        );
    }

    fn sequence_free(topo: &Topology, current: Option<&str>, sql: &str) -> ColumnListFill {
        column_list_fill(topo, current, sql).unwrap_or_else(|| panic!("{sql}"))
    }

    #[test]
    fn anything_else_is_left_to_the_planner() {
        let topo = topo();
        for sql in [
            "INSERT INTO orders (id, name) VALUES (1, 'a')",
            "INSERT INTO orders SET id = 1",
            "INSERT INTO orders SELECT * FROM item",
            "INSERT INTO orders PARTITION (p0) VALUES (1, 'a')",
            "INSERT INTO orders () VALUES ()",
            "INSERT INTO country VALUES ('fr', 'France')",
            "INSERT INTO nosuch VALUES (1)",
            "UPDATE orders SET name = 'a'",
        ] {
            assert_eq!(column_list_fill(&topo, Some("shop"), sql), None, "{sql}");
        }
        assert_eq!(
            column_list_fill(&topo, None, "INSERT INTO orders VALUES (1)"),
            None
        );
    }
}
