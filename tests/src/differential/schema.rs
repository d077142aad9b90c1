//! The logical schema both sides hold, and the sharded layout Shoal serves it with.
//!
//! One set of table definitions serves the oracle (one unsharded database), the sharded side
//! (the same definitions under physical names on every datanode of the table) and the demo.

use std::fmt::Write as _;

/// How a column's values behave when compared, sorted, grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Int,
    UInt,
    Dec,
    /// DOUBLE, with values that are exact in binary (multiples of 1/4): sums do not depend on
    /// the order they are added in.
    Double,
    /// VARCHAR in `utf8mb4_general_ci`: case and trailing spaces do not count.
    Ci,
    /// VARCHAR in `utf8mb4_bin`: PAD SPACE, so only trailing spaces do not count.
    Bin,
    Date,
    DateTime,
}

impl Kind {
    pub fn is_numeric(self) -> bool {
        matches!(self, Kind::Int | Kind::UInt | Kind::Dec | Kind::Double)
    }

    /// Whether columns of the two kinds compare as MariaDB compares them, without a conversion
    /// warning (DOUBLE is left out: its values are not bound or correlated).
    pub fn comparable(self, other: Kind) -> bool {
        use Kind::*;
        match self {
            Int | UInt | Dec => matches!(other, Int | UInt | Dec),
            Ci | Bin => matches!(other, Ci | Bin),
            Date | DateTime => matches!(other, Date | DateTime),
            Double => false,
        }
    }
}

#[derive(Debug)]
pub struct Col {
    pub name: &'static str,
    /// The SQL type with its collation and nullability.
    pub ty: &'static str,
    pub kind: Kind,
}

#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    pub cols: &'static [Col],
    /// The primary key (one column, unique within the table on both sides).
    pub pk: &'static str,
    /// The column rows are placed by on the sharded side (None: global table).
    pub shard_key: Option<&'static str>,
}

impl Table {
    pub fn col(&self, name: &str) -> usize {
        self.cols
            .iter()
            .position(|c| c.name == name)
            .unwrap_or_else(|| panic!("{}.{name}: no such column", self.name))
    }

    pub fn pk_index(&self) -> usize {
        self.col(self.pk)
    }

    /// `CREATE TABLE` under `physical` (the logical name on the oracle).
    pub fn create_sql(&self, physical: &str) -> String {
        let mut sql = format!("CREATE TABLE `{physical}` (");
        for c in self.cols {
            let _ = write!(sql, "`{}` {}, ", c.name, c.ty);
        }
        let _ = write!(
            sql,
            "PRIMARY KEY (`{}`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
            self.pk
        );
        sql
    }

    pub fn column_list(&self) -> String {
        self.cols
            .iter()
            .map(|c| c.name)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

const fn col(name: &'static str, ty: &'static str, kind: Kind) -> Col {
    Col { name, ty, kind }
}

/// Sharded by `user_id` with the mod rule (NULL keys go to shard 0); ids include values above
/// 2^63 so that unsigned order is exercised.
pub const ORDERS: Table = Table {
    name: "orders",
    cols: &[
        col("id", "BIGINT UNSIGNED NOT NULL", Kind::UInt),
        col("user_id", "INT NULL", Kind::Int),
        col(
            "country",
            "VARCHAR(8) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
        col(
            "status",
            "VARCHAR(16) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
        col("tag", "VARCHAR(16) COLLATE utf8mb4_bin NULL", Kind::Bin),
        col("amount", "DECIMAL(10,2) NULL", Kind::Dec),
        col("qty", "SMALLINT UNSIGNED NULL", Kind::UInt),
        col("delta", "INT NULL", Kind::Int),
        col("created", "DATE NULL", Kind::Date),
        col("updated", "DATETIME NULL", Kind::DateTime),
    ],
    pk: "id",
    shard_key: Some("user_id"),
};

/// ER child of `orders` on `user_id`: each item lives on its order's shard.
pub const ORDER_ITEM: Table = Table {
    name: "order_item",
    cols: &[
        col("id", "INT UNSIGNED NOT NULL", Kind::UInt),
        col("user_id", "INT NULL", Kind::Int),
        col("order_id", "BIGINT UNSIGNED NOT NULL", Kind::UInt),
        col("sku", "VARCHAR(12) COLLATE utf8mb4_bin NULL", Kind::Bin),
        col("qty", "INT NULL", Kind::Int),
        col("price", "DECIMAL(12,4) NULL", Kind::Dec),
        col("shipped", "DATETIME NULL", Kind::DateTime),
    ],
    pk: "id",
    shard_key: Some("user_id"),
};

/// Sharded by a hash of a `utf8mb4_general_ci` string (`'a@x'`, `'A@X '` are one key).
pub const ACCOUNT: Table = Table {
    name: "account",
    cols: &[
        col("id", "INT NOT NULL", Kind::Int),
        col(
            "email",
            "VARCHAR(40) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
        col(
            "name",
            "VARCHAR(24) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
        col("balance", "DECIMAL(14,2) NULL", Kind::Dec),
        col("score", "BIGINT NULL", Kind::Int),
        col("born", "DATE NULL", Kind::Date),
    ],
    pk: "id",
    shard_key: Some("email"),
};

/// Sharded by ranges of a signed id (negative ids in the first range, a gap to the default).
pub const EVENTS: Table = Table {
    name: "events",
    cols: &[
        col("id", "INT NOT NULL", Kind::Int),
        col(
            "kind",
            "VARCHAR(12) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
        col("payload", "VARCHAR(24) COLLATE utf8mb4_bin NULL", Kind::Bin),
        col("amount", "DECIMAL(8,3) NULL", Kind::Dec),
        col("at", "DATETIME NULL", Kind::DateTime),
        col("n", "TINYINT UNSIGNED NULL", Kind::UInt),
        col("ratio", "DOUBLE NULL", Kind::Double),
    ],
    pk: "id",
    shard_key: Some("id"),
};

/// Sharded by date (two months per shard), twelve tables on six datanodes (table-per-shard);
/// dates outside the rule's 24 months go to its default shard.
pub const LEDGER: Table = Table {
    name: "ledger",
    cols: &[
        col("id", "INT UNSIGNED NOT NULL", Kind::UInt),
        col("day", "DATE NOT NULL", Kind::Date),
        col(
            "account",
            "VARCHAR(16) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
        col("debit", "DECIMAL(12,2) NOT NULL", Kind::Dec),
        col("credit", "DECIMAL(12,2) NULL", Kind::Dec),
        col("at", "DATETIME NULL", Kind::DateTime),
    ],
    pk: "id",
    shard_key: Some("day"),
};

/// Global: a full copy on every datanode (shard_key None, like an unlisted table: see
/// [`UNLISTED`]).
pub const COUNTRY: Table = Table {
    name: "country",
    cols: &[
        col(
            "code",
            "VARCHAR(4) COLLATE utf8mb4_general_ci NOT NULL",
            Kind::Ci,
        ),
        col(
            "name",
            "VARCHAR(32) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
        col(
            "region",
            "VARCHAR(12) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
        col("vat", "DECIMAL(5,2) NULL", Kind::Dec),
    ],
    pk: "code",
    shard_key: None,
};

/// Not listed in the config: it lives on the schema's default datanode (dn0) only.
pub const NOTE: Table = Table {
    name: "note",
    cols: &[
        col("id", "INT NOT NULL", Kind::Int),
        col("ref_user", "INT NULL", Kind::Int),
        col(
            "code",
            "VARCHAR(4) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
        col("body", "VARCHAR(20) COLLATE utf8mb4_bin NULL", Kind::Bin),
        col("weight", "DOUBLE NULL", Kind::Double),
        col("price", "DECIMAL(9,3) NULL", Kind::Dec),
        col("at", "DATETIME NULL", Kind::DateTime),
        col("day", "DATE NULL", Kind::Date),
    ],
    pk: "id",
    shard_key: None,
};

/// TPC-C-like tables sharded like [`ORDERS`] (rule `by_user`, the same datanodes) by keys of
/// their own names, `w_id`, `d_w_id` and `c_w_id`, with the same key range (-5 to 60, NULLs on
/// shard 0 except the warehouse's primary key): co-located when joined on those keys, also
/// written without qualifiers (`c_w_id = w_id`). Every column name is unique across the three
/// (TPC-C's prefixes), so an unqualified column names one table. Districts and customers have
/// globally unique ids (`d_id`, `c_id`); `c_d_id` is its district's `d_id`.
pub const WH: Table = Table {
    name: "wh",
    cols: &[
        col("w_id", "INT NOT NULL", Kind::Int),
        col(
            "w_name",
            "VARCHAR(10) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
        col("w_tax", "DECIMAL(4,4) NULL", Kind::Dec),
        col("w_ytd", "DECIMAL(12,2) NULL", Kind::Dec),
    ],
    pk: "w_id",
    shard_key: Some("w_id"),
};

/// A warehouse's districts (see [`WH`]).
pub const DIST: Table = Table {
    name: "dist",
    cols: &[
        col("d_id", "INT NOT NULL", Kind::Int),
        col("d_w_id", "INT NULL", Kind::Int),
        col(
            "d_name",
            "VARCHAR(10) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
        col("d_next_o_id", "INT NULL", Kind::Int),
        col("d_ytd", "DECIMAL(12,2) NULL", Kind::Dec),
    ],
    pk: "d_id",
    shard_key: Some("d_w_id"),
};

/// A district's customers (see [`WH`]).
pub const CUST: Table = Table {
    name: "cust",
    cols: &[
        col("c_id", "INT NOT NULL", Kind::Int),
        col("c_w_id", "INT NULL", Kind::Int),
        col("c_d_id", "INT NULL", Kind::Int),
        col(
            "c_last",
            "VARCHAR(16) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
        col("c_credit", "VARCHAR(2) COLLATE utf8mb4_bin NULL", Kind::Bin),
        col("c_balance", "DECIMAL(12,2) NULL", Kind::Dec),
        col("c_since", "DATE NULL", Kind::Date),
    ],
    pk: "c_id",
    shard_key: Some("c_w_id"),
};

/// Sharded by a hash of a `utf8mb4_bin` string (rule `by_code`, over dn1-dn5): a rule and
/// datanodes no other table has, so every join with it crosses shards (issue 49). Its join
/// columns hold the other tables' key values in other types and collations: `k_int` the user,
/// warehouse and note ids (-5 to 60), `k_dec` the same as DECIMAL (`7.0`, and `7.5` that
/// matches no integer), `k_str` them as `utf8mb4_general_ci` text (`'7'`, `'07'`, `'7 '`) or
/// country codes in varied case; `code` (the key) country codes, tags and `'a'`/`'A '` in
/// `_bin`. Added after the others with a random stream of its own: the other tables' rows, and
/// the families that read them, stay what they were for a seed.
pub const LINK: Table = Table {
    name: "link",
    cols: &[
        col("id", "INT NOT NULL", Kind::Int),
        col("code", "VARCHAR(8) COLLATE utf8mb4_bin NULL", Kind::Bin),
        col("k_int", "INT NULL", Kind::Int),
        col("k_dec", "DECIMAL(6,1) NULL", Kind::Dec),
        col(
            "k_str",
            "VARCHAR(8) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
        col("amount", "DECIMAL(9,2) NULL", Kind::Dec),
        col(
            "label",
            "VARCHAR(12) COLLATE utf8mb4_general_ci NULL",
            Kind::Ci,
        ),
    ],
    pk: "id",
    shard_key: Some("code"),
};

/// Every table of the differential schema, parents before children.
pub const TABLES: &[&Table] = &[
    &COUNTRY,
    &ORDERS,
    &ORDER_ITEM,
    &ACCOUNT,
    &EVENTS,
    &LEDGER,
    &NOTE,
    &WH,
    &DIST,
    &CUST,
    &LINK,
];

/// Tables of [`TABLES`] the config does not list (on the default datanode).
pub const UNLISTED: &[&str] = &["note"];

pub fn table(name: &str) -> &'static Table {
    TABLES
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no table {name}"))
}

/// The logical schema clients see through Shoal.
pub const SCHEMA: &str = "shop";
/// The login Shoal accepts for the harness.
pub const USER: &str = "diff";
pub const PASSWORD: &str = "diff";
/// Physical databases of the datanodes, on each of the two instances.
pub const DATANODE_DATABASES: &[&str] = &["dsh_0", "dsh_1", "dsh_2"];

/// The sharded layout: 2 datahosts (`primaries[0]`, `primaries[1]`, `host:port`), 6 datanodes
/// (3 databases on each), and every rule kind the issue names: mod, hash (on a string), range,
/// date (table-per-shard), a global and an ER child table; `note` is left out (unlisted, on
/// the default datanode dn0); `wh`, `dist` and `cust` by `orders`' rule over its datanodes,
/// keyed by columns of their own names (co-located with each other and with `orders`); `link`
/// by a hash of a `_bin` string over dn1-dn5 (co-located with nothing).
/// `user`/`password`: the backends' account.
pub fn sharded_config(primaries: [&str; 2], user: &str, password: &str) -> String {
    format!(
        r#"# Written by the differential harness (tests/src/differential/schema.rs).
users:
  - {{ name: {USER}, password: {PASSWORD}, schemas: [{SCHEMA}] }}
datahosts:
  - name: dh0
    primary: {{ address: "{p0}", user: {user}, password: {password} }}
  - name: dh1
    primary: {{ address: "{p1}", user: {user}, password: {password} }}
datanodes:
  - {{ name: dn0, datahost: dh0, database: dsh_0 }}
  - {{ name: dn1, datahost: dh0, database: dsh_1 }}
  - {{ name: dn2, datahost: dh0, database: dsh_2 }}
  - {{ name: dn3, datahost: dh1, database: dsh_0 }}
  - {{ name: dn4, datahost: dh1, database: dsh_1 }}
  - {{ name: dn5, datahost: dh1, database: dsh_2 }}
rules:
  - {{ name: by_user, algorithm: mod }}
  - {{ name: by_email, algorithm: hash, key_type: string, collation: general_ci }}
  - {{ name: by_code, algorithm: hash, key_type: string, collation: bin }}
  - name: by_id_range
    algorithm: range
    ranges:
      - {{ to: 1000, shard: 0 }}
      - {{ from: 1000, to: 2000, shard: 1 }}
      - {{ from: 2000, to: 3000, shard: 2 }}
      - {{ from: 4000, shard: 3 }}
    default: 2
  - {{ name: by_month, algorithm: date, start: 2024-01-01, unit: month, interval: 2, default: 0 }}
schemas:
  - name: {SCHEMA}
    default_datanode: dn0
    tables:
      - {{ name: orders, type: sharded, shard_key: user_id, rule: by_user, datanodes: "dn0, dn1, dn2, dn3, dn4, dn5" }}
      - {{ name: order_item, type: child, parent: orders, join_key: user_id }}
      - {{ name: account, type: sharded, shard_key: email, rule: by_email, datanodes: "dn0, dn1, dn2, dn3, dn4" }}
      - {{ name: events, type: sharded, shard_key: id, rule: by_id_range, datanodes: "dn1, dn2, dn3, dn4" }}
      - name: ledger
        type: sharded
        shard_key: day
        rule: by_month
        datanodes: "dn0, dn1, dn2, dn3, dn4, dn5"
        tables_per_datanode: 2
        physical_name: "ledger_{{index:02}}"
      - {{ name: wh, type: sharded, shard_key: w_id, rule: by_user, datanodes: "dn0, dn1, dn2, dn3, dn4, dn5" }}
      - {{ name: dist, type: sharded, shard_key: d_w_id, rule: by_user, datanodes: "dn0, dn1, dn2, dn3, dn4, dn5" }}
      - {{ name: cust, type: sharded, shard_key: c_w_id, rule: by_user, datanodes: "dn0, dn1, dn2, dn3, dn4, dn5" }}
      - {{ name: link, type: sharded, shard_key: code, rule: by_code, datanodes: "dn1, dn2, dn3, dn4, dn5" }}
      - {{ name: country, type: global, datanodes: "dn0, dn1, dn2, dn3, dn4, dn5" }}
"#,
        p0 = primaries[0],
        p1 = primaries[1],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_router::config::Config;
    use shoal_router::topology::{TableDef, Topology};

    #[test]
    fn sharded_config_has_the_layout_the_issue_asks_for() {
        let yaml = sharded_config(["127.0.0.1:1", "127.0.0.1:2"], "u", "p");
        let t = Topology::build(&Config::from_yaml_str(&yaml).unwrap()).unwrap();
        assert_eq!(t.datahosts.len(), 2);
        assert!(t.datanodes.len() >= 5);
        let s = t.schema(SCHEMA).unwrap();
        let mut algorithms = Vec::new();
        for table in TABLES {
            match s.table(table.name) {
                Some(TableDef::Sharded(st)) => {
                    algorithms.push(st.rule.algorithm().as_str().to_string())
                }
                Some(TableDef::Global(_)) => assert!(table.shard_key.is_none()),
                Some(TableDef::Child(_)) => assert_eq!(table.name, "order_item"),
                None => assert!(
                    UNLISTED.contains(&table.name),
                    "{} missing from the config",
                    table.name
                ),
            }
        }
        algorithms.sort();
        algorithms.dedup();
        assert_eq!(algorithms, ["date", "hash", "mod", "range"]);
        let Some(TableDef::Sharded(ledger)) = s.table("ledger") else {
            panic!()
        };
        assert_eq!(ledger.shards.len(), 12);
        assert_eq!(ledger.shards[11].physical_table, "ledger_11");
    }
}
