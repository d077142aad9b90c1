//! Our own small description of a DML statement: what the planner needs and nothing of
//! sqlparser's AST, so that a sqlparser upgrade touches only `sql::analyze`.
//!
//! Positions are token indices into the statement's [`super::lex::tokenize`] output; with the
//! plan cache they are valid for every statement of the same shape.

/// A literal value, owned.
#[derive(Debug, Clone)]
pub enum Literal {
    Null,
    Int(i128),
    /// A non-integer number as written (`12.50`, `1e3`), or an integer too large for i128.
    /// As in MariaDB, a number written with an exponent (`1e3`, `4.5E0`) is a DOUBLE, any other
    /// an exact DECIMAL: the router compares and stores the two differently.
    Decimal(String),
    Str(String),
    /// A DOUBLE or FLOAT value (a prepared statement's MYSQL_TYPE_DOUBLE/FLOAT parameter; a FLOAT
    /// widened to f64 exactly). Compared with a number column as a double, stored rounded half
    /// to even.
    Double(f64),
}

/// Doubles are equal when their bits are (so `Eq` holds, NaN included).
impl PartialEq for Literal {
    fn eq(&self, other: &Literal) -> bool {
        match (self, other) {
            (Literal::Null, Literal::Null) => true,
            (Literal::Int(a), Literal::Int(b)) => a == b,
            (Literal::Decimal(a), Literal::Decimal(b)) | (Literal::Str(a), Literal::Str(b)) => {
                a == b
            }
            (Literal::Double(a), Literal::Double(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Eq for Literal {}

/// Where a value comes from when the plan is evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueRef {
    /// A literal lifted out of the text by the shape (slot number).
    Slot(u16),
    /// A `?` placeholder (0-based parameter index).
    Param(u16),
    /// A literal that is part of the shape (NULL, or not lifted).
    Const(Literal),
    /// `-x`
    Neg(Box<ValueRef>),
    /// `_cs'...'` (and `N'...'`, utf8mb3): the literal's bytes read in another charset. Only a
    /// shard key reads it (as its column stores it); elsewhere it is no value.
    Introduced(crate::charset::Charset, Box<ValueRef>),
    /// `CONVERT(x USING cs)` of a string: as `Introduced`, a shard key value only.
    Convert(crate::charset::Charset, Box<ValueRef>),
}

/// A column reference as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColRef {
    /// Schema qualifier (`db.t.c`).
    pub schema: Option<String>,
    /// Table name or alias qualifier (`t.c`).
    pub table: Option<String>,
    pub column: String,
}

/// Comparison operators the router can route on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    /// `<=>`
    NullSafeEq,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A predicate reduced to what routing needs: conditions on columns against values.
/// Everything else is `Unknown` (true for routing purposes: it never narrows a route).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Pred {
    #[default]
    Unknown,
    Cmp {
        col: ColRef,
        op: CmpOp,
        value: ValueRef,
    },
    In {
        col: ColRef,
        values: Vec<ValueRef>,
    },
    Between {
        col: ColRef,
        low: ValueRef,
        high: ValueRef,
    },
    IsNull {
        col: ColRef,
    },
    And(Vec<Pred>),
    Or(Vec<Pred>),
}

/// A table name in the statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRef {
    pub schema: Option<String>,
    pub name: String,
    pub alias: Option<String>,
    /// Token of the schema qualifier, if written.
    pub schema_tok: Option<u32>,
    /// Token of the table name (`None` when it could not be located: no splicing possible).
    pub name_tok: Option<u32>,
    /// In the statement's outermost FROM/JOIN/UPDATE/INSERT target (not in a subquery).
    pub top_level: bool,
    /// On the NULL-extended side of an outer join.
    pub outer_nullable: bool,
}

/// A qualified column (`t.c`, `db.t.c`) or wildcard (`t.*`) anywhere in the statement: renamed
/// when its table gets a physical name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QualifierRef {
    pub schema: Option<String>,
    pub schema_tok: Option<u32>,
    pub table: String,
    pub table_tok: Option<u32>,
}

/// Aggregate functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFunc {
    Count,
    Sum,
    Min,
    Max,
    Avg,
    /// GROUP_CONCAT, STD, VARIANCE, BIT_AND, JSON_ARRAYAGG, ...: not mergeable across shards.
    Other,
}

/// The argument of an aggregate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AggArg {
    /// `COUNT(*)`
    Star,
    /// An expression: its tokens (inclusive range) and, when it is a plain column, the column.
    Expr {
        first_tok: u32,
        last_tok: u32,
        col: Option<ColRef>,
    },
    /// Could not be located in the text.
    Unlocated,
}

/// One item of the select list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemKind {
    /// `*` or `t.*`
    Wildcard,
    Column(ColRef),
    Aggregate {
        func: AggFunc,
        name: String,
        distinct: bool,
        arg: AggArg,
        text: String,
    },
    /// Any other expression; `text` is its normalised rendering (for matching ORDER BY and
    /// GROUP BY expressions), `has_aggregate` when an aggregate is nested inside.
    Expr {
        text: String,
        has_aggregate: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectItem {
    pub kind: ItemKind,
    pub alias: Option<String>,
}

/// An ORDER BY or GROUP BY key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyExpr {
    /// Positional (`ORDER BY 2`), 1-based.
    Position(usize),
    Column {
        col: ColRef,
        first_tok: Option<u32>,
        last_tok: Option<u32>,
    },
    /// Aggregate (`ORDER BY COUNT(*)`): matched against the select list by rendering.
    Aggregate {
        text: String,
        func: AggFunc,
        distinct: bool,
        arg: AggArg,
        name: String,
    },
    /// Any other expression, by rendering.
    Expr { text: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderKey {
    pub key: KeyExpr,
    pub desc: bool,
}

/// `LIMIT [offset,] count` / `LIMIT count OFFSET offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub count: ValueRef,
    pub offset: Option<ValueRef>,
    /// Tokens of the whole clause, from `LIMIT` to its last value.
    pub first_tok: u32,
    pub last_tok: u32,
}

/// HAVING reduced to what the merge can evaluate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HavingExpr {
    And(Box<HavingExpr>, Box<HavingExpr>),
    Or(Box<HavingExpr>, Box<HavingExpr>),
    Not(Box<HavingExpr>),
    Cmp {
        op: HavingOp,
        left: HavingOperand,
        right: HavingOperand,
    },
    IsNull {
        operand: HavingOperand,
        negated: bool,
    },
    /// A form the merge cannot evaluate; the text names it in the refusal.
    Unsupported(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HavingOp {
    Eq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    NullSafeEq,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HavingOperand {
    Key(KeyExpr),
    Value(ValueRef),
}

/// A plain `SELECT` (no UNION) at the top of the statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectShape {
    pub items: Vec<SelectItem>,
    pub distinct: bool,
    pub group_by: Vec<KeyExpr>,
    /// WITH ROLLUP / GROUPING SETS / CUBE.
    pub group_modifier: bool,
    pub having: Option<HavingExpr>,
    /// Tokens of the HAVING clause (removed from shard SQL when the merge evaluates it).
    pub having_toks: Option<(u32, u32)>,
    pub order_by: Vec<OrderKey>,
    pub limit: Option<Limit>,
    /// Token after which hidden columns are inserted (the select list's last token).
    pub select_list_last_tok: Option<u32>,
    pub has_window: bool,
    /// `SELECT ... INTO`
    pub has_into: bool,
    /// Unlocatable structures (e.g. ORDER BY inside the statement we could not find in text).
    pub notes: Vec<String>,
}

/// An INSERT/REPLACE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertShape {
    pub replace: bool,
    pub columns: Vec<String>,
    /// `VALUES` rows: tokens of each `( ... )` and the value refs of each cell (None when the
    /// cell is not a plain literal/parameter).
    pub rows: Vec<InsertRow>,
    /// `INSERT ... SET a = 1, b = 2`: columns and values.
    pub set_form: bool,
    /// `INSERT ... SELECT`
    pub from_select: bool,
    /// INSERT ... SELECT: per item of the SELECT's list, the column of its FROM it passes
    /// through unchanged (see [`BlockLink::Derived`]); empty when not known.
    pub source_keys: Vec<Option<ColRef>>,
    /// INSERT ... SELECT with a LIMIT.
    pub source_limited: bool,
    /// Columns assigned by `ON DUPLICATE KEY UPDATE`.
    pub on_duplicate_assigned: Vec<ColRef>,
    /// Their values, one per column of `on_duplicate_assigned`.
    pub on_duplicate_values: Vec<Assigned>,
}

/// The value an assignment (`SET c = v`, `ON DUPLICATE KEY UPDATE c = v`) gives its column, as
/// far as routing reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assigned {
    /// A literal or `?` parameter.
    Value(ValueRef),
    /// A column as it is (`c = c`, `c = t.c`).
    Column(ColRef),
    /// `VALUES(c)` / `VALUE(c)`: the value the INSERT would have given column `c`.
    Inserted(String),
    /// Anything else (an expression, a subquery, a tuple assignment).
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertRow {
    pub first_tok: u32,
    pub last_tok: u32,
    pub values: Vec<Option<ValueRef>>,
}

/// One SELECT block (the statement's own, a subquery's, a UNION branch's): its FROM tables and
/// its WHERE (+ inner-join ON) predicate, which narrows tables used only inside that block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Name tokens of the tables in the block's FROM.
    pub tables: Vec<u32>,
    pub filter: Pred,
    pub has_outer_join: bool,
    /// The block whose SELECT holds this one (in an expression or in its FROM); `None` for the
    /// statement's own SELECT, a UNION branch of it, a CTE or INSERT ... SELECT.
    pub parent: Option<usize>,
    pub link: BlockLink,
    /// `x = y` column equalities of the AND-chains of its WHERE and ON conditions.
    pub equalities: Vec<(ColRef, ColRef)>,
}

/// How a SELECT block is used by its parent, which decides what its rows and the parent's
/// constrain of each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockLink {
    /// The statement's own SELECT (or a UNION branch, a CTE, the SELECT of INSERT ... SELECT).
    Root,
    /// A subquery in an expression: evaluated for the parent's rows, so what narrows the
    /// parent's rows narrows the rows it reads (through correlated equalities), not the reverse.
    Subquery,
    /// A derived table (subquery in FROM) with its alias.
    Derived {
        alias: String,
        /// Output columns that are a column of the block passed through unchanged, each row's
        /// value that of the rows it comes from (a plain column item, grouped on when the block
        /// groups; none when the block has a LIMIT, a window function or a UNION): a condition
        /// on such a column outside narrows the rows of the block that matter, and a condition
        /// inside narrows the values the column holds.
        passthrough: Vec<(String, ColRef)>,
    },
}

/// Which DML statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmlKind {
    Select,
    Insert,
    Update,
    Delete,
}

/// A parsed DML statement, in our terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dml {
    pub kind: DmlKind,
    pub tables: Vec<TableRef>,
    pub qualifiers: Vec<QualifierRef>,
    /// Top-level WHERE, plus the ON conditions of inner joins, ANDed.
    pub filter: Pred,
    /// `a.x = b.y` equalities found in AND-chains of any WHERE/ON (for co-location of joins).
    pub column_equalities: Vec<(ColRef, ColRef)>,
    /// Columns assigned by UPDATE SET.
    pub assigned: Vec<ColRef>,
    /// Their values, one per column of `assigned`.
    pub assigned_values: Vec<Assigned>,
    /// UPDATE: the tokens of its top-level `SET` and `WHERE` keywords (the WHERE if any), where
    /// a move of rows to other shards cuts the statement.
    pub update_set_tok: Option<u32>,
    pub update_where_tok: Option<u32>,
    /// Every SELECT block of the statement.
    pub blocks: Vec<Block>,
    pub select: Option<SelectShape>,
    pub insert: Option<InsertShape>,
    pub has_subquery: bool,
    pub has_union: bool,
    pub has_cte: bool,
    pub has_derived_table: bool,
    /// A derived table whose subquery has a LIMIT (a cross-shard LIMIT over sharded tables).
    pub has_derived_limit: bool,
    pub has_outer_join: bool,
    /// UPDATE/DELETE ... ORDER BY / LIMIT.
    pub write_order_or_limit: bool,
    /// Multi-table UPDATE/DELETE.
    pub multi_table_write: bool,
    /// Literal slots read structurally: the plan is valid only for these values.
    pub pins: Vec<u16>,
    /// Something the planner must refuse outright (construct name).
    pub unsupported: Option<String>,
}
