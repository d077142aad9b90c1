//! What each catalog table of `information_schema` holds: which of its columns name a
//! database or a table (rewritten to logical names), which are summed over a table's shards.

/// One catalog table's columns that carry names and figures.
#[derive(Debug)]
pub struct Spec {
    /// The table's name as MariaDB spells it (upper case).
    pub name: &'static str,
    /// The column the backend query filters on: the datanode's database.
    pub filter: &'static str,
    /// Columns holding a database name: the row's datanode's database, renamed to the
    /// logical schema (the first one decides which schema the row belongs to).
    pub schema_cols: &'static [&'static str],
    /// The column naming the table a row describes (its owner), if any.
    pub table_col: Option<&'static str>,
    /// Other columns naming a table of the same database (a foreign key's referenced table).
    pub other_table_cols: &'static [&'static str],
    /// Names that may embed the physical table name (constraint and index names generated
    /// from it): the physical name in them becomes the logical one.
    pub derived_name_cols: &'static [&'static str],
    /// SQL text that names databases (`` `shop_1`.`t` ``): the backquoted physical database
    /// becomes the logical schema.
    pub text_cols: &'static [&'static str],
    /// Summed over the shards of a table.
    pub sums: &'static [&'static str],
    /// Besides the table, what tells a shard's row that stands for the same logical row
    /// (a partition's name).
    pub key_cols: &'static [&'static str],
    /// The columns MariaDB looks a value up by (`idx_field1/2` of its `ST_SCHEMA_TABLE`):
    /// `col = 'x'` in a WHERE's top-level AND finds the schema or table named exactly `x`,
    /// as the server opens a directory or file by that name (`'SHOP'` finds no `shop`),
    /// while the row's own comparison is case-insensitive.
    pub lookup: &'static [&'static str],
}

const NONE: &[&str] = &[];

pub static SPECS: &[Spec] = &[
    Spec {
        name: "SCHEMATA",
        filter: "SCHEMA_NAME",
        schema_cols: &["SCHEMA_NAME"],
        table_col: None,
        other_table_cols: NONE,
        derived_name_cols: NONE,
        text_cols: NONE,
        sums: NONE,
        key_cols: NONE,
        lookup: &["SCHEMA_NAME"],
    },
    Spec {
        name: "TABLES",
        filter: "TABLE_SCHEMA",
        schema_cols: &["TABLE_SCHEMA"],
        table_col: Some("TABLE_NAME"),
        other_table_cols: NONE,
        derived_name_cols: NONE,
        text_cols: NONE,
        sums: &["TABLE_ROWS", "DATA_LENGTH", "INDEX_LENGTH", "DATA_FREE"],
        key_cols: NONE,
        lookup: &["TABLE_SCHEMA", "TABLE_NAME"],
    },
    Spec {
        name: "COLUMNS",
        filter: "TABLE_SCHEMA",
        schema_cols: &["TABLE_SCHEMA"],
        table_col: Some("TABLE_NAME"),
        other_table_cols: NONE,
        derived_name_cols: NONE,
        text_cols: &["GENERATION_EXPRESSION"],
        sums: NONE,
        key_cols: NONE,
        lookup: &["TABLE_SCHEMA", "TABLE_NAME"],
    },
    Spec {
        name: "STATISTICS",
        filter: "TABLE_SCHEMA",
        schema_cols: &["TABLE_SCHEMA", "INDEX_SCHEMA"],
        table_col: Some("TABLE_NAME"),
        other_table_cols: NONE,
        derived_name_cols: &["INDEX_NAME"],
        text_cols: NONE,
        sums: &["CARDINALITY"],
        key_cols: &["INDEX_NAME", "SEQ_IN_INDEX"],
        lookup: &["TABLE_SCHEMA", "TABLE_NAME"],
    },
    Spec {
        name: "KEY_COLUMN_USAGE",
        filter: "TABLE_SCHEMA",
        schema_cols: &[
            "TABLE_SCHEMA",
            "CONSTRAINT_SCHEMA",
            "REFERENCED_TABLE_SCHEMA",
        ],
        table_col: Some("TABLE_NAME"),
        other_table_cols: &["REFERENCED_TABLE_NAME"],
        derived_name_cols: &["CONSTRAINT_NAME"],
        text_cols: NONE,
        sums: NONE,
        key_cols: NONE,
        lookup: &["TABLE_SCHEMA", "TABLE_NAME"],
    },
    Spec {
        name: "TABLE_CONSTRAINTS",
        filter: "TABLE_SCHEMA",
        schema_cols: &["TABLE_SCHEMA", "CONSTRAINT_SCHEMA"],
        table_col: Some("TABLE_NAME"),
        other_table_cols: NONE,
        derived_name_cols: &["CONSTRAINT_NAME"],
        text_cols: NONE,
        sums: NONE,
        key_cols: NONE,
        lookup: &["TABLE_SCHEMA", "TABLE_NAME"],
    },
    Spec {
        name: "REFERENTIAL_CONSTRAINTS",
        filter: "CONSTRAINT_SCHEMA",
        schema_cols: &["CONSTRAINT_SCHEMA", "UNIQUE_CONSTRAINT_SCHEMA"],
        table_col: Some("TABLE_NAME"),
        other_table_cols: &["REFERENCED_TABLE_NAME"],
        derived_name_cols: &["CONSTRAINT_NAME", "UNIQUE_CONSTRAINT_NAME"],
        text_cols: NONE,
        sums: NONE,
        key_cols: NONE,
        lookup: &["CONSTRAINT_SCHEMA", "TABLE_NAME"],
    },
    Spec {
        name: "CHECK_CONSTRAINTS",
        filter: "CONSTRAINT_SCHEMA",
        schema_cols: &["CONSTRAINT_SCHEMA"],
        table_col: Some("TABLE_NAME"),
        other_table_cols: NONE,
        derived_name_cols: &["CONSTRAINT_NAME"],
        text_cols: NONE,
        sums: NONE,
        key_cols: NONE,
        lookup: &["CONSTRAINT_SCHEMA", "TABLE_NAME"],
    },
    Spec {
        name: "PARTITIONS",
        filter: "TABLE_SCHEMA",
        schema_cols: &["TABLE_SCHEMA"],
        table_col: Some("TABLE_NAME"),
        other_table_cols: NONE,
        derived_name_cols: NONE,
        text_cols: NONE,
        sums: &["TABLE_ROWS", "DATA_LENGTH", "INDEX_LENGTH", "DATA_FREE"],
        key_cols: &["PARTITION_NAME", "SUBPARTITION_NAME"],
        lookup: &["TABLE_SCHEMA", "TABLE_NAME"],
    },
    Spec {
        name: "VIEWS",
        filter: "TABLE_SCHEMA",
        schema_cols: &["TABLE_SCHEMA"],
        table_col: Some("TABLE_NAME"),
        other_table_cols: NONE,
        derived_name_cols: NONE,
        text_cols: &["VIEW_DEFINITION"],
        sums: NONE,
        key_cols: NONE,
        lookup: &["TABLE_SCHEMA", "TABLE_NAME"],
    },
    Spec {
        name: "TRIGGERS",
        filter: "TRIGGER_SCHEMA",
        schema_cols: &["TRIGGER_SCHEMA", "EVENT_OBJECT_SCHEMA"],
        table_col: Some("EVENT_OBJECT_TABLE"),
        other_table_cols: NONE,
        derived_name_cols: NONE,
        text_cols: &["ACTION_STATEMENT"],
        sums: NONE,
        key_cols: NONE,
        lookup: &["EVENT_OBJECT_SCHEMA", "EVENT_OBJECT_TABLE"],
    },
    Spec {
        name: "ROUTINES",
        filter: "ROUTINE_SCHEMA",
        schema_cols: &["ROUTINE_SCHEMA"],
        table_col: None,
        other_table_cols: NONE,
        derived_name_cols: NONE,
        text_cols: &["ROUTINE_DEFINITION"],
        sums: NONE,
        key_cols: NONE,
        lookup: &["ROUTINE_SCHEMA"],
    },
    Spec {
        name: "PARAMETERS",
        filter: "SPECIFIC_SCHEMA",
        schema_cols: &["SPECIFIC_SCHEMA"],
        table_col: None,
        other_table_cols: NONE,
        derived_name_cols: NONE,
        text_cols: NONE,
        sums: NONE,
        key_cols: NONE,
        lookup: &["SPECIFIC_SCHEMA"],
    },
    Spec {
        name: "EVENTS",
        filter: "EVENT_SCHEMA",
        schema_cols: &["EVENT_SCHEMA"],
        table_col: None,
        other_table_cols: NONE,
        derived_name_cols: NONE,
        text_cols: &["EVENT_DEFINITION"],
        sums: NONE,
        key_cols: NONE,
        lookup: NONE,
    },
    Spec {
        name: "FILES",
        filter: "TABLE_SCHEMA",
        schema_cols: &["TABLE_SCHEMA"],
        table_col: Some("TABLE_NAME"),
        other_table_cols: NONE,
        derived_name_cols: NONE,
        text_cols: NONE,
        sums: NONE,
        key_cols: NONE,
        lookup: NONE,
    },
];

/// The spec of catalog table `name` (any case).
pub fn find(name: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    /// Every table the router sends to the catalog has a spec here.
    #[test]
    fn every_catalog_table_has_a_spec() {
        for t in shoal_router::plan::namespace::CATALOG_INFORMATION_SCHEMA {
            assert!(super::find(t).is_some(), "{t}");
        }
    }
}
