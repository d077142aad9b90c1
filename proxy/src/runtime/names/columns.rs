//! Result column definitions in logical names. A datanode describes each column with its
//! physical database (`schema`, e.g. `shop_1`) and table (`org_table`, e.g. `logs_00`, and
//! `table` where the statement gave the table no alias); the client knows only the logical
//! schema and table. Only column-definition packets are rewritten, never rows; a definition
//! that names nothing physical is forwarded as it came.

use std::sync::atomic::{AtomicU64, Ordering};

use shoal_router::topology::{DatanodeId, TableDef, Topology};

use super::LogicalNames;
use crate::wire::messages::{column_def_names, put_column_def};

/// Physical names of one datanode and their logical names.
#[derive(Debug, Default)]
pub(super) struct Datanode {
    database: String,
    /// The schema whose unlisted tables live here, if any; else the first (by name) having a
    /// table here. A column of no table of the datanode (a derived table's, a view's) names
    /// it, as one server names the current database for such a column.
    default_schema: Option<String>,
    /// Physical table (lower-case) -> (logical schema, logical table).
    tables: shoal_router::topology::NameMap<(String, String)>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Slots of a [`RenameMemo`]: a session's point selects name a few columns of a few
/// datanodes; more collide and are renamed again, never wrongly.
const MEMO_SLOTS: usize = 16;
/// Longer definitions are renamed every time rather than kept (bounded memory per session).
const MEMO_MAX_DEF: usize = 256;

/// A session's last renamings, by datanode and column position: a statement run again (a
/// prepared one above all) gets the same definitions back, which are then compared and copied
/// instead of parsed, looked up and written again (~1,000 instructions per column).
#[derive(Debug, Default)]
pub struct RenameMemo {
    slots: Vec<MemoSlot>,
    /// The renaming of a definition too long to keep, for the caller to send.
    long: Vec<u8>,
}

#[derive(Debug, Default)]
struct MemoSlot {
    names: u64,
    dn: DatanodeId,
    column: usize,
    def: Vec<u8>,
    /// `None`: the definition names nothing of the datanode and goes as it came.
    renamed: Option<Vec<u8>>,
}

impl LogicalNames {
    /// The column-definition half of [`LogicalNames::new`]: every datanode's database and
    /// physical tables.
    pub(super) fn read_columns(&mut self, topo: &Topology) {
        let mut datanodes: Vec<Datanode> = topo
            .datanodes
            .iter()
            .map(|d| Datanode {
                database: d.database.clone(),
                ..Default::default()
            })
            .collect();
        // Sorted, so that a datanode shared by several schemas names one the same every run.
        let mut schemas: Vec<_> = topo.schemas.values().collect();
        schemas.sort_by(|a, b| a.name.cmp(&b.name));
        let names: Vec<String> = schemas.iter().map(|s| s.name.clone()).collect();
        for s in schemas {
            if let Some(dn) = s.default_datanode
                && let Some(d) = datanodes.get_mut(dn)
            {
                d.default_schema.get_or_insert_with(|| s.name.clone());
            }
            for t in s.tables.values() {
                let mut add = |dn: DatanodeId, physical: &str, logical: &str| {
                    if let Some(d) = datanodes.get_mut(dn) {
                        d.tables
                            .entry(physical.to_lowercase())
                            .or_insert_with(|| (s.name.clone(), logical.to_string()));
                    }
                };
                match t {
                    TableDef::Sharded(t) => {
                        for sh in &t.shards {
                            add(sh.datanode, &sh.physical_table, &t.name);
                        }
                    }
                    TableDef::Child(t) => {
                        for sh in &t.shards {
                            add(sh.datanode, &sh.physical_table, &t.name);
                        }
                    }
                    TableDef::Global(t) => {
                        for &dn in &t.datanodes {
                            add(dn, &t.name, &t.name);
                        }
                    }
                }
            }
        }
        for s in &names {
            for d in datanodes.iter_mut() {
                if d.default_schema.is_none() && d.tables.values().any(|(ls, _)| ls == s) {
                    d.default_schema = Some(s.clone());
                }
            }
        }
        self.datanodes = datanodes;
        self.id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    }

    /// [`Self::rename`] through `memo`: the definition to send for column `column` of a
    /// result from datanode `dn`, `None` to send `def` as it came.
    pub fn rename_memo<'m>(
        &self,
        dn: DatanodeId,
        column: usize,
        def: &[u8],
        memo: &'m mut RenameMemo,
    ) -> Option<&'m [u8]> {
        if def.len() > MEMO_MAX_DEF {
            let out = &mut memo.long;
            return self.rename(dn, def, out).then_some(out.as_slice());
        }
        let slot = memo.slot(dn, column);
        let hit =
            slot.names == self.id && slot.dn == dn && slot.column == column && slot.def == def;
        if !hit {
            slot.names = self.id;
            slot.dn = dn;
            slot.column = column;
            slot.def.clear();
            slot.def.extend_from_slice(def);
            let mut out = slot.renamed.take().unwrap_or_default();
            slot.renamed = self.rename(dn, def, &mut out).then_some(out);
        }
        slot.renamed.as_deref()
    }

    /// Writes into `out` column definition `def` from datanode `dn` with its schema, `table`
    /// and `org_table` in logical names. `false` (and `out` untouched) when it names nothing
    /// of `dn` (an expression, another database's table): forward `def` as it is.
    pub fn rename(&self, dn: DatanodeId, def: &[u8], out: &mut Vec<u8>) -> bool {
        let Some(d) = self.datanodes.get(dn) else {
            return false;
        };
        // catalog, schema, table, org_table, name, org_name
        let Some((f, rest)) = column_def_names(def) else {
            return false;
        };
        if f[1] != d.database.as_bytes() {
            return false;
        }
        let known = std::str::from_utf8(f[3]).ok().and_then(|t| {
            // Per column of every relayed result: no allocation for a lower-case name.
            if t.chars().any(char::is_uppercase) {
                d.tables.get(&t.to_lowercase())
            } else {
                d.tables.get(t)
            }
        });
        let (schema, table) = match known {
            Some((s, t)) => (s.as_bytes(), Some(t.as_bytes())),
            None => match &d.default_schema {
                Some(s) => (s.as_bytes(), None),
                None => return false,
            },
        };
        out.clear();
        out.reserve(def.len() + 8);
        // `table` is the alias the statement gave, or the physical name when it gave none.
        let alias = match table {
            Some(t) if f[2] == f[3] => t,
            _ => f[2],
        };
        let names = [f[0], schema, alias, table.unwrap_or(f[3]), f[4], f[5]];
        put_column_def(out, names, rest);
        true
    }

    /// `defs` (column definitions from datanode `dn`) renamed in place.
    pub fn rename_all(&self, dn: DatanodeId, defs: &mut [Vec<u8>]) {
        let mut out = Vec::new();
        for d in defs {
            if self.rename(dn, d, &mut out) {
                std::mem::swap(d, &mut out);
            }
        }
    }
}

impl RenameMemo {
    fn slot(&mut self, dn: DatanodeId, column: usize) -> &mut MemoSlot {
        if self.slots.is_empty() {
            self.slots.resize_with(MEMO_SLOTS, MemoSlot::default);
        }
        &mut self.slots[(dn.wrapping_mul(7) + column) % MEMO_SLOTS]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(fields: [&str; 6]) -> Vec<u8> {
        let mut out = Vec::new();
        let fixed = [0x0c, 45, 0, 40, 0, 0, 0, 253, 0, 0, 0, 0, 0];
        put_column_def(&mut out, fields.map(str::as_bytes), &fixed);
        out
    }

    fn names() -> LogicalNames {
        let yaml = "users:\n  - { name: app, password: app, schemas: [shop] }\n\
            datahosts:\n  - name: dh1\n    primary: { address: 127.0.0.1:3307, user: u, password: p }\n\
            datanodes:\n  - { name: dn$1-2, datahost: dh1, database: shop_$1-2 }\n\
            rules:\n  - { name: by_id, algorithm: mod }\n\
            schemas:\n  - name: shop\n    default_datanode: dn1\n    tables:\n\
            \x20     - { name: logs, type: sharded, shard_key: id, rule: by_id, datanodes: dn$1-2, \
            tables_per_datanode: 2, physical_name: \"logs_{index:02}\" }\n";
        let cfg = shoal_router::config::Config::from_yaml_str(yaml).unwrap();
        LogicalNames::new(&Topology::build(&cfg).unwrap())
    }

    #[test]
    fn physical_schema_and_table_become_logical() {
        let n = names();
        let mut out = Vec::new();
        let d = def(["def", "shop_2", "logs_03", "logs_03", "msg", "msg"]);
        assert!(n.rename(1, &d, &mut out));
        assert_eq!(out, def(["def", "shop", "logs", "logs", "msg", "msg"]));
        // An alias stays; the table behind it is named logically.
        let d = def(["def", "shop_1", "l", "logs_00", "MIN(l.msg)", ""]);
        assert!(n.rename(0, &d, &mut out));
        assert_eq!(out, def(["def", "shop", "l", "logs", "MIN(l.msg)", ""]));
        // An unlisted table on the default datanode: the schema only.
        let d = def(["def", "shop_1", "notes", "notes", "id", "id"]);
        assert!(n.rename(0, &d, &mut out));
        assert_eq!(out, def(["def", "shop", "notes", "notes", "id", "id"]));
    }

    #[test]
    fn expressions_and_other_databases_are_left_alone() {
        let n = names();
        let mut out = Vec::new();
        assert!(!n.rename(0, &def(["def", "", "", "", "1 + 1", ""]), &mut out));
        assert!(!n.rename(
            0,
            &def(["def", "mysql", "user", "user", "User", "User"]),
            &mut out
        ));
        assert!(out.is_empty());
    }

    #[test]
    fn a_derived_tables_column_names_the_schema_of_the_datanodes_tables() {
        // dn2 holds no unlisted table, but shards of shop's: `(SELECT ...) x` there is shop's.
        let n = names();
        let mut out = Vec::new();
        assert!(n.rename(1, &def(["def", "shop_2", "x", "x", "a", "a"]), &mut out));
        assert_eq!(out, def(["def", "shop", "x", "x", "a", "a"]));
    }

    #[test]
    fn the_memo_answers_as_renaming_does_and_never_across_datanodes_or_topologies() {
        let (a, b) = (names(), names());
        let mut memo = RenameMemo::default();
        let mut out = Vec::new();
        let cases = [
            (
                1,
                0,
                def(["def", "shop_2", "logs_03", "logs_03", "msg", "msg"]),
            ),
            (
                0,
                0,
                def(["def", "shop_1", "logs_00", "logs_00", "msg", "msg"]),
            ),
            (1, 1, def(["def", "", "", "", "1 + 1", ""])),
            (
                0,
                0,
                def(["def", "shop_1", "l", "logs_00", "MIN(l.msg)", ""]),
            ),
            (
                1,
                0,
                def(["def", "shop_2", "logs_03", "logs_03", "msg", "msg"]),
            ),
            (1, 16 - 7, def(["def", "shop_2", "x", "x", "a", "a"])),
            (
                0,
                0,
                def(["def", "shop_1", &"c".repeat(300), "notes", "id", "id"]),
            ),
        ];
        // Twice over, and from two topologies in turn: misses and hits alike.
        for _ in 0..2 {
            for n in [&a, &b] {
                for (dn, col, d) in &cases {
                    let want = n.rename(*dn, d, &mut out).then(|| out.clone());
                    let got = n.rename_memo(*dn, *col, d, &mut memo).map(<[u8]>::to_vec);
                    assert_eq!(got, want, "dn {dn} column {col}");
                }
            }
        }
        assert_ne!(a.id, b.id);
    }
}
