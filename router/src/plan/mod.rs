//! Route plans as data.
//!
//! [`Router::route`] turns a statement (and the session's current schema, and the bound
//! parameters of a prepared statement) into a [`RoutePlan`]: which datanodes run what SQL and how
//! their results combine. Plans for DML are built once per statement *shape* (literals lifted
//! out, see [`crate::sql::normalize`]) and cached; a cached plan is a template of routes over
//! value references, evaluated with the values of the statement at hand (Vitess-style: a route
//! is an opcode plus shard-key expressions).
//!
//! [`Router::plan_statement`] wraps the route of a client statement in a [`StatementPlan`]:
//! every other decision its text and the session's inputs settle (the server it wants, an
//! implicit commit, its deadline, the refusals, a sequence or column-list INSERT).

pub mod bind;
mod cache;
pub mod column_list;
mod ddl;
mod eval;
mod explain;
pub mod gather;
mod merge;
pub mod namespace;
mod placement;
mod planner;
mod render;
mod router;
mod scope;
pub mod sequence;
pub mod show;
mod statement;

pub use cache::CacheStats;
pub(crate) use eval::shard_value as shard_value_of;
pub use explain::{merge_steps, render, rows as explain_rows};
pub use router::{PreparedRoute, Router};
pub use statement::{
    Diagnostics, PreparePlan, ReadWant, Server, StatementInput, StatementPlan, Step, diagnostics_of,
};

use std::sync::Arc;

use crate::error::RouterError;
use crate::sql::StatementKind;
use crate::sql::stmt::Literal;
use crate::topology::DatanodeId;

/// A value bound to a `?` parameter of a prepared statement, typed as the client bound it
/// (the type decides how MariaDB compares and stores it): integer types (signed or unsigned) as
/// `Int`, DOUBLE and FLOAT as `Double` (FLOAT widened exactly), DECIMAL and string types as
/// `Str` (MariaDB reads a bound DECIMAL like a numeric string), NULL as `Null`. Dates and times
/// are passed as strings in MySQL's literal format (`'2024-01-31 12:00:00'`); binary strings
/// lossily as UTF-8.
pub type ParamValue = Literal;

/// A prepared statement's plan for one execute ([`Router::route_kept`]): one of its kept
/// one-datanode targets, borrowed (a point lookup: no copy of a target whose text every
/// session preparing the statement shares), or a plan. On the caller's stack for one execute:
/// boxing the plan would allocate per execute.
///
/// [`Router::route_kept`]: router::Router::route_kept
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Routed<'p> {
    Kept(&'p Target),
    Plan(RoutePlan),
}

impl Routed<'_> {
    /// As a plan, the kept target copied.
    pub fn into_plan(self) -> RoutePlan {
        match self {
            Routed::Kept(t) => RoutePlan::Single(t.clone()),
            Routed::Plan(p) => p,
        }
    }
}

/// What to do with a statement.
#[derive(Debug, Clone, PartialEq)]
pub enum RoutePlan {
    /// One datanode runs the statement; its result goes to the client unchanged.
    Single(Target),
    /// Several datanodes run their SQL; results are combined as `merge` says.
    Scatter { targets: Vec<Target>, merge: Merge },
    /// DDL and writes on global tables: every target runs its SQL; the statement succeeds when
    /// all succeed (the client gets the first target's OK packet), else the first error.
    Broadcast { targets: Vec<Target> },
    /// Table-less SELECTs (`SELECT 1`, `SELECT @@version`, `SELECT LAST_INSERT_ID()`): any
    /// backend can answer; the session's current backend connection if it holds one.
    Any { sql: String },
    /// Answered by Shoal itself.
    Local(LocalAnswer),
    /// Session state and transaction control (SET, USE, BEGIN, COMMIT, LOCK TABLES, SQL-level
    /// PREPARE, KILL, SHOW VARIABLES/WARNINGS/...): the session layer handles these.
    Session(StatementKind),
    /// Refused, with the MySQL error to send.
    Refuse(RouterError),
    /// An UPDATE assigning a sharded table's shard key whose rows may land on other shards:
    /// run in one transaction over the datanodes involved (see [`KeyMove`]).
    KeyMove(Box<KeyMove>),
    /// A SELECT refused across shards only for its uncorrelated subqueries over other shards:
    /// they run first and their rows are bound into the outer statement as literals, which is
    /// then planned as any statement (see [`bind`]).
    BindFirst(Box<bind::BindFirst>),
    /// A SELECT refused across shards whose tables are copied into temporary tables on one
    /// datanode, where the statement itself runs over the copies (see [`gather`]).
    Gather(Box<gather::Gather>),
}

/// An UPDATE that assigns a sharded table's shard key (or an ER child's join key), where some
/// matched rows may have to move to another shard. On each source shard, in one transaction:
/// the matched rows' primary keys are read and locked (`SELECT <pk> <select_from> FOR
/// UPDATE`), the UPDATE runs in place on exactly those rows (`<update_head> WHERE <pk> IN
/// (...)`: the backend computes every new value, and reports the matched and changed counts
/// the client gets), the rows are read back, and each row whose new key value lands on another
/// shard is deleted there and inserted on its new shard as it was read. Child rows carry the
/// root's key value in their own join key column, so they stay where they are, as they stay
/// unchanged in one MariaDB.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyMove {
    /// The table as written and its shard key column, for messages.
    pub table: String,
    pub key: String,
    /// Each shard of the table: its datanode and physical table.
    pub shards: Vec<(DatanodeId, String)>,
    /// The rule that places a key value on a shard.
    pub rule: Arc<crate::rule::ShardRule>,
    /// The shards the statement's WHERE routes to, with their SQL.
    pub sources: Vec<KeySource>,
    /// The columns the UPDATE assigns (a primary key column other than the shard key cannot be
    /// re-read after the update).
    pub assigned: Vec<String>,
    /// The new key value when it is a literal (`None`: an expression).
    pub value: Option<Literal>,
    /// The statement has `?` parameters without bound values (its SQL here has placeholders):
    /// bound values are written into the SQL as literals.
    pub has_params: bool,
}

/// One source shard of a [`KeyMove`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySource {
    pub shard: usize,
    /// ` FROM <table as written> [WHERE ...]` with physical names, to follow a select list.
    pub select_from: String,
    /// `UPDATE <table> SET ...` up to its WHERE, with physical names.
    pub update_head: String,
    /// The whole UPDATE with physical names (what runs in place; what a PREPARE describes).
    pub update: String,
}

impl KeyMove {
    /// The shard a key value read back from a row lands on (`None` for SQL NULL). A numeric
    /// column's value is read as a number, any other as a string, as MariaDB compares them.
    pub fn shard_of(&self, value: Option<&str>, numeric: bool) -> Result<usize, RouterError> {
        let lit = match value {
            None => Literal::Null,
            Some(v) if numeric => match v.parse::<i128>() {
                Ok(i) => Literal::Int(i),
                Err(_) => Literal::Decimal(v.to_string()),
            },
            Some(v) => Literal::Str(v.to_string()),
        };
        self.shard_of_literal(&lit)
    }

    /// The new key value as SQL that MariaDB reads as that value (`None`: an expression).
    pub fn value_sql(&self) -> Option<String> {
        self.value.as_ref().map(eval::literal_sql)
    }

    /// The shard a key value lands on.
    pub fn shard_of_literal(&self, lit: &Literal) -> Result<usize, RouterError> {
        let s = self.rule.route(&eval::shard_value(lit))?;
        if s >= self.shards.len() {
            return Err(RouterError::unsupported(format!(
                "a rule that returned shard {s} of {}",
                self.shards.len()
            )));
        }
        Ok(s)
    }
}

/// One datanode and the SQL it runs. Shared, not owned: a prepared statement's target is
/// rendered once per datanode and each execute clones references to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub datanode: DatanodeId,
    pub sql: Arc<str>,
    /// For prepared statements: which of the client's parameters (0-based) fill this SQL's `?`
    /// placeholders, in order (a split INSERT or a rewritten LIMIT uses a subset).
    pub params: Params,
    /// The SQL names every database it reads (its tables are qualified, nothing else in it is
    /// looked up in the current database): it runs the same on any connection to the
    /// datanode's server, whichever database that connection is in.
    pub qualified: bool,
}

/// Which of the client's parameters a target's SQL takes, in order. The usual list, the first
/// `n` in order, is kept as its length: copying a target then writes no shared counter.
#[derive(Debug, Clone)]
pub enum Params {
    First(u16),
    List(Arc<[u16]>),
}

/// `0, 1, 2, ...`: the lists [`Params::First`] stands for.
const FIRST: [u16; 64] = {
    let mut a = [0u16; 64];
    let mut i = 0;
    while i < a.len() {
        a[i] = i as u16;
        i += 1;
    }
    a
};

impl Params {
    /// The first `n` parameters in order, built without a list where `n` allows.
    pub fn first(n: usize) -> Params {
        if n <= FIRST.len() {
            Params::First(n as u16)
        } else {
            Params::List((0..n as u16).collect())
        }
    }
}

/// Equal when they read back as the same list, whichever form holds it.
impl PartialEq for Params {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Params {}

impl Default for Params {
    fn default() -> Self {
        Params::First(0)
    }
}

impl std::ops::Deref for Params {
    type Target = [u16];
    fn deref(&self) -> &[u16] {
        match self {
            Params::First(n) => &FIRST[..*n as usize],
            Params::List(l) => l,
        }
    }
}

impl From<Vec<u16>> for Params {
    fn from(v: Vec<u16>) -> Self {
        let first = v.len() <= FIRST.len() && v.iter().enumerate().all(|(i, &p)| p as usize == i);
        if first {
            Params::First(v.len() as u16)
        } else {
            Params::List(v.into())
        }
    }
}

impl FromIterator<u16> for Params {
    fn from_iter<I: IntoIterator<Item = u16>>(it: I) -> Self {
        it.into_iter().collect::<Vec<u16>>().into()
    }
}

/// A session function the proxy answers itself: a backend would answer with its physical
/// database and its own account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionValue {
    /// `DATABASE()`, `SCHEMA()`: the logical schema (NULL without one).
    Database,
    /// `USER()`, `SESSION_USER()`, `SYSTEM_USER()`: `user@client host`.
    User,
    /// `CURRENT_USER()`: the account Shoal authenticated, `user@%`.
    CurrentUser,
}

impl SessionValue {
    /// The function an expression of a select list is, as the shape writes it (lower case,
    /// no spaces).
    pub fn of(expr: &str) -> Option<SessionValue> {
        match expr {
            "database()" | "schema()" => Some(SessionValue::Database),
            "user()" | "session_user()" | "system_user()" => Some(SessionValue::User),
            "current_user()" | "current_user" => Some(SessionValue::CurrentUser),
            _ => None,
        }
    }
}

/// How results from several datanodes combine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merge {
    /// Writes: one OK packet whose affected-rows is the sum of the targets' (last-insert-id:
    /// the first non-zero in target order; warnings: summed).
    AffectedRows,
    /// Reads: result sets with the same columns, combined per [`MergeSpec`].
    Rows(MergeSpec),
}

/// A column of the shard result sets. Shard results may carry extra hidden columns at the end
/// (added by the rewrite); `FromEnd(1)` is the last column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// 0-based index from the first column.
    At(usize),
    /// 1-based index from the last column (used when a `*` makes the count unknown here).
    FromEnd(usize),
}

/// How to combine shard result sets, applied in this order:
/// 1. concatenate all rows (or stream-merge them when every shard's result is sorted by
///    `order_by`, which the rewrite guarantees when `order_by` is set and there is no
///    aggregation);
/// 2. if `aggregate` is set: group rows by its keys (NULLs form one group, strings compared
///    under the column's collation) and fold each group's aggregate columns;
/// 3. if `having` is set: keep groups for which it is true (SQL three-valued logic);
/// 4. if `distinct`: drop duplicate rows (compared on the visible columns);
/// 5. sort by `order_by` (MySQL order: NULLs first ascending, collation-aware for strings;
///    a stable sort, ties keep arrival order);
/// 6. skip `offset` rows, then keep at most `limit` rows;
/// 7. drop the last `hidden_columns` columns (and their column definitions).
///
/// With `groups_sorted`, steps 1-2 stream: the shards' rows arrive sorted by `group_order`
/// (the rewrite asks for it), so equal group keys are adjacent after a k-way merge and each
/// group is folded and released as soon as the next key differs; memory holds one row per
/// shard and one group (plus, when `order_by` is not a prefix of the group order, the groups
/// awaiting the final sort: at most `offset + limit` of them under a LIMIT).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MergeSpec {
    pub aggregate: Option<Aggregation>,
    /// False: shard rows arrive in any order and groups are hashed in memory (bounded). True
    /// (only with aggregation keys): every shard's rows are sorted by [`MergeSpec::group_order`]
    /// (the rewrite's ORDER BY: MariaDB's order on the grouped columns, NULL first ascending,
    /// strings by the column's collation), so equal keys are adjacent. The merge checks each
    /// shard's rows are in that order under its own comparison and fails if not.
    pub groups_sorted: bool,
    pub having: Option<HavingSpec>,
    pub distinct: bool,
    pub order_by: Vec<SortKey>,
    pub offset: u64,
    pub limit: Option<u64>,
    pub hidden_columns: usize,
}

impl MergeSpec {
    /// The order of the shard rows when `groups_sorted`: `order_by` when its columns are
    /// exactly the aggregation keys (the statement's own ORDER BY, kept in the shard SQL),
    /// else each distinct aggregation key ascending, in GROUP BY order. Empty without keys.
    pub fn group_order(&self) -> Vec<SortKey> {
        let Some(a) = &self.aggregate else {
            return Vec::new();
        };
        let covers = |a: &[Column], b: &[Column]| a.iter().all(|c| b.contains(c));
        let ob: Vec<Column> = self.order_by.iter().map(|k| k.column).collect();
        if !a.keys.is_empty() && covers(&ob, &a.keys) && covers(&a.keys, &ob) {
            return self.order_by.clone();
        }
        let mut keys: Vec<SortKey> = Vec::new();
        for &column in &a.keys {
            if !keys.iter().any(|k| k.column == column) {
                keys.push(SortKey {
                    column,
                    desc: false,
                });
            }
        }
        keys
    }
}

/// One ORDER BY key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey {
    pub column: Column,
    pub desc: bool,
}

/// GROUP BY (possibly with no keys: one group over all rows, which yields exactly one row even
/// when every shard's aggregate row is the "empty" one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aggregation {
    pub keys: Vec<Column>,
    /// How each aggregate column is folded. Columns that are neither keys nor listed keep the
    /// value of the group's first row (MySQL's ANY_VALUE semantics for non-grouped columns).
    pub columns: Vec<AggColumn>,
}

/// One folded column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AggColumn {
    pub column: Column,
    pub fold: Fold,
}

/// How a column folds across the rows of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// COUNT: sum of the partial counts (BIGINT; 0 for an empty group).
    SumCounts,
    /// SUM: sum of non-NULL partial sums, NULL when all are NULL; DECIMAL stays exact
    /// (integer SUMs arrive as DECIMAL from MySQL).
    Sum,
    Min,
    Max,
    /// AVG: `sum / count` from two hidden columns (NULL when count is 0), rounded to the
    /// scale of this column's definition (MySQL's `div_precision_increment` already applied
    /// by the shards); DOUBLE when the column is DOUBLE.
    Avg {
        sum: Column,
        count: Column,
    },
}

/// HAVING evaluated after merging, over merged columns and literal values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HavingSpec {
    And(Box<HavingSpec>, Box<HavingSpec>),
    Or(Box<HavingSpec>, Box<HavingSpec>),
    Not(Box<HavingSpec>),
    Cmp {
        op: CmpOp,
        left: Operand,
        right: Operand,
    },
    IsNull {
        operand: Operand,
        negated: bool,
    },
}

/// Comparison of HAVING (MySQL comparison rules between the column's type and the value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    NullSafeEq,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operand {
    Column(Column),
    Value(Literal),
}

/// Answers Shoal gives itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalAnswer {
    /// A table-less SELECT of session functions only (`SELECT DATABASE(), USER()`, as the
    /// `mariadb` client's `status` sends): one row of the session's logical schema, user...,
    /// under the column names as the client wrote them. `row` is false when a LIMIT leaves no
    /// row.
    SessionValues {
        columns: Vec<(String, SessionValue)>,
        row: bool,
    },
    /// `EXPLAIN ROUTE <sql>`: rows of (datanode, sql); merge steps as rows with datanode
    /// `(merge)`.
    ExplainRoute { rows: Vec<(String, String)> },
    /// One of Shoal's administration statements (`SHOW SHOAL ...`, see
    /// [`crate::sql::admin`]); the proxy checks the user may run it.
    Admin(crate::sql::admin::AdminStatement),
    /// A SELECT over `information_schema` tables only (the client's own, or the one a SHOW
    /// statement stands for), answered over the logical catalog: every logical table once,
    /// under its logical schema and name, physical ones never. `sql` names each table as
    /// `information_schema.NAME`; the proxy evaluates it (`proxy/src/exec/catalog`).
    /// `show`: for a SHOW, the `information_schema` table MariaDB's own answer names in its
    /// column definitions (`TABLE_NAMES` for SHOW TABLES).
    Catalog {
        sql: String,
        show: Option<&'static str>,
    },
}

#[cfg(test)]
mod params_tests {
    use super::Params;

    /// The first `n` parameters in order are kept as a length; any other list as itself; both
    /// read back as the list they were made from.
    #[test]
    fn parameter_lists_read_back_as_made() {
        let lists: Vec<Vec<u16>> = vec![
            vec![],
            vec![0],
            vec![0, 1, 2],
            (0..64).collect(),
            (0..65).collect(),
            vec![1],
            vec![0, 2],
            vec![1, 0],
        ];
        for l in lists {
            let p = Params::from(l.clone());
            assert_eq!(&*p, l.as_slice());
            let first = l.len() <= 64 && l.iter().enumerate().all(|(i, &x)| x as usize == i);
            assert_eq!(matches!(p, Params::First(_)), first, "{l:?}");
            assert_eq!(l.iter().copied().collect::<Params>(), p);
            assert_eq!(Params::List(l.clone().into()), p);
        }
        for n in [0, 1, 64, 65, 300] {
            assert_eq!(
                &*Params::first(n),
                (0..n as u16).collect::<Vec<_>>().as_slice()
            );
        }
    }
}
