//! The statement plan: every decision about one client statement that its text and the
//! session's inputs settle, taken here once ([`Router::plan_statement`]). The proxy's executor
//! reads the plan's fields and acts; what depends on runtime state the router does not have
//! (which replica, replica lag, the connections held) stays there.
//!
//! Besides the route ([`RoutePlan`]), a plan says:
//! - which server it wants (primary or read set) and whether it counts as a write
//!   ([`ReadWant`], from [`crate::sql::readwrite`]);
//! - whether MariaDB would commit the open transaction first (an XA branch must);
//! - its own deadline (`SET STATEMENT max_statement_time = n FOR ...`);
//! - the refusals that need the session's inputs (a read-only user's write, a schema the user
//!   may not use, a user variable only the session holds);
//! - for a broadcast, whether it runs as writes (DML) or as DDL;
//! - an INSERT that gets its keys from a sequence, or its column list from the table, as a
//!   kind of its own;
//! - whether it may change the schema (the catalog's rows go stale);
//! - the state it may leave on its connection out of the trackers' sight, which pins the
//!   connection to the session ([`crate::sql::pins`]).

use std::time::Duration;

use super::column_list::{ColumnListFill, column_list_fill};
use super::namespace::denied_schema_named;
use super::sequence::{SequenceFill, sequence_fill};
use super::{ParamValue, RoutePlan, Router, Target};
use crate::charset::Charsets;
use crate::error::RouterError;
use crate::sql::SqlMode;
use crate::sql::classify::classify_tokens;
use crate::sql::effects::{HeldVars, causes_implicit_commit, changes_schema, reads_held_var};
use crate::sql::lex::{TokKind, Token};
use crate::sql::normalize;
use crate::sql::pins::{Effects, token_effects};
use crate::sql::readwrite::{
    PrimaryWhy, ReadRoute, mycat_hint_len, read_only_violation, read_route,
};
use crate::sql::statement_time::statement_time_for;

/// What the router needs of the session to plan a statement, besides its text.
pub struct StatementInput<'a> {
    /// The statement as the client sent it, read in its `character_set_client`.
    pub sql: &'a str,
    /// The session's logical schema.
    pub current: Option<&'a str>,
    pub mode: SqlMode,
    pub charsets: Charsets,
    /// The user is read-only (`users.read_only`): a statement that is not a read is refused.
    pub read_only: bool,
    /// The logical schemas the user may not use.
    pub denied_schemas: &'a [String],
    /// The user variables the session holds itself.
    pub user_vars: &'a dyn HeldVars,
    /// Some datahost balances reads: the read want is decided (else every statement goes to
    /// the primary and nothing reads the decision).
    pub read_split: bool,
    /// The session is in a transaction run as XA branches: implicit commits and whether the
    /// statement may write are decided.
    pub xa_tracking: bool,
    /// The statement's digest is wanted (statement statistics on).
    pub digest: bool,
}

/// Every decision about one statement.
#[derive(Debug, Clone, PartialEq)]
pub struct StatementPlan {
    pub step: Step,
    /// Where the planned statement starts in [`StatementInput::sql`]: after Mycat hints and a
    /// `SET STATEMENT max_statement_time = n FOR` (what runs is the rest, as written).
    pub start: usize,
    /// `SET STATEMENT max_statement_time = n FOR`'s limit (`None`: no prefix, or 0).
    pub deadline: Option<Duration>,
    /// Where it runs and whether it writes.
    pub want: ReadWant,
    /// MariaDB runs it with an implicit commit and the session is in an XA transaction: the
    /// transaction is committed first, and the statement runs outside any branch.
    pub implicit_commit: bool,
    /// It may change the logical schema's tables: the catalog is rebuilt for every read
    /// from before it runs until after it ended.
    pub changes_schema: bool,
    /// The planned statement is a SHOW (whose single-datanode answer may be rewritten to
    /// logical names).
    pub is_show: bool,
    /// The statement's digest, when [`StatementInput::digest`] asked for it.
    pub digest: Option<u64>,
    /// What a routed statement may leave on its connection out of the trackers' sight (a
    /// user variable, a lock, `SQL_CALC_FOUND_ROWS`...): its connection stays the session's.
    pub pins: Effects,
}

/// What to do with the statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Run the route plan (never `RoutePlan::Broadcast`: see the two kinds below).
    Route(RoutePlan),
    /// A global table's write on every copy, as one transaction ([`RoutePlan::Broadcast`] of
    /// DML).
    BroadcastWrites(Vec<Target>),
    /// DDL on every datanode of its tables ([`RoutePlan::Broadcast`] of anything else).
    BroadcastDdl(Vec<Target>),
    /// An INSERT into a sharded table leaving out its shard key, which has a sequence: the
    /// proxy takes ids and runs the text [`SequenceFill::apply`] makes.
    InsertWithSequence(SequenceFill),
    /// An INSERT without a column list into a sharded table: the proxy reads the table's
    /// column order and runs the text [`ColumnListFill::apply`] makes.
    InsertWithColumnList(ColumnListFill),
    /// `SELECT ROW_COUNT()`, `FOUND_ROWS()`, `CONNECTION_ID()` alone: the session's own
    /// record answers (the statement before may have run anywhere).
    Diagnostics(Diagnostics),
    /// A read-only user's statement that is not a read (what it is, for the message).
    ReadOnly(String),
    /// The tokenizer could not read the statement to its end (an unterminated string or
    /// comment): refused with this error, or MariaDB's own (the proxy asks a backend).
    Unreadable(RouterError),
}

/// A diagnostics function the session answers from its own record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Diagnostics {
    RowCount,
    FoundRows,
    /// Shoal's id (the handshake's), always answered by Shoal.
    ConnectionId,
}

/// The server a statement wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Primary,
    /// Any server of the read set (subject to read-your-writes); `hinted` when
    /// `/*+ shoal:replica */` asked for one.
    Replica {
        hinted: bool,
    },
}

/// Where a statement runs and whether it writes, from its text and plan (the session adds
/// what only it knows: an open transaction, its last writes, replica health).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadWant {
    pub server: Server,
    /// Counted as a write for read-your-writes.
    pub writes: bool,
    /// May write: an XA branch it runs in is not read-only.
    pub maybe_writes: bool,
}

impl ReadWant {
    /// Without the read/write decision (no read balancing, no XA): the primary, and any
    /// statement may write.
    pub const UNDECIDED: ReadWant = ReadWant {
        server: Server::Primary,
        writes: false,
        maybe_writes: true,
    };

    /// The want of a statement read as `route` (`None`: undecided) and planned as `plan`.
    pub fn of(route: Option<ReadRoute>, plan: &RoutePlan) -> ReadWant {
        let read_plan = matches!(
            plan,
            RoutePlan::Single(_)
                | RoutePlan::Any { .. }
                | RoutePlan::Scatter {
                    merge: super::Merge::Rows(_),
                    ..
                }
                | RoutePlan::BindFirst(_)
                | RoutePlan::Gather(_)
        );
        let write_plan = matches!(
            plan,
            RoutePlan::Single(_)
                | RoutePlan::Scatter { .. }
                | RoutePlan::Broadcast { .. }
                | RoutePlan::KeyMove(_)
                | RoutePlan::Refuse(_)
        );
        Self::for_plan(route, read_plan, write_plan)
    }

    /// [`Self::of`] a `RoutePlan::Single` (a prepared statement's kept target).
    pub fn single(route: Option<ReadRoute>) -> ReadWant {
        Self::for_plan(route, true, true)
    }

    fn for_plan(route: Option<ReadRoute>, read_plan: bool, write_plan: bool) -> ReadWant {
        let Some(route) = route else {
            return Self::UNDECIDED;
        };
        let (server, writes) = match route {
            ReadRoute::Replica { hinted } if read_plan => (Server::Replica { hinted }, false),
            ReadRoute::Primary(PrimaryWhy::NotARead) => (Server::Primary, write_plan),
            _ => (Server::Primary, false),
        };
        // Only plain and locking reads leave a branch read-only.
        let maybe_writes = !matches!(
            route,
            ReadRoute::Replica { .. } | ReadRoute::Primary(PrimaryWhy::LockingRead)
        );
        ReadWant {
            server,
            writes,
            maybe_writes,
        }
    }
}

/// A statement to prepare ([`Router::plan_prepare`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PreparePlan {
    /// Its plan, routed as its metadata is read: where values are needed to route at all (an
    /// INSERT's shard key), with stand-in values; each execute is planned with its own.
    pub plan: StatementPlan,
    /// Its `?` parameters, counted on the tokens the session's server reads (sql_mode,
    /// versioned comments).
    pub params: u16,
}

impl StatementPlan {
    /// The planned statement: the input's text from [`Self::start`].
    pub fn text<'s>(&self, sql: &'s str) -> &'s str {
        &sql[self.start..]
    }
}

/// The session's diagnostics function `sql` (tokens `toks`) calls alone, if it is one.
pub fn diagnostics_of(sql: &str, toks: &[Token]) -> Option<Diagnostics> {
    let toks = match toks.split_last() {
        Some((last, rest)) if last.is_punct(sql, ";") => rest,
        _ => toks,
    };
    let [select, func, open, close] = toks else {
        return None;
    };
    if !select.is_kw(sql, "SELECT") || !open.is_punct(sql, "(") || !close.is_punct(sql, ")") {
        return None;
    }
    if func.is_kw(sql, "ROW_COUNT") {
        Some(Diagnostics::RowCount)
    } else if func.is_kw(sql, "FOUND_ROWS") {
        Some(Diagnostics::FoundRows)
    } else if func.is_kw(sql, "CONNECTION_ID") {
        Some(Diagnostics::ConnectionId)
    } else {
        None
    }
}

impl Router {
    /// Every decision about the client statement `input.sql`. `toks` receives the planned
    /// statement's tokens ([`StatementPlan::text`]; empty when it could not be read): the
    /// caller reads what only it decides from them, without a second scan.
    pub fn plan_statement(&self, input: &StatementInput, toks: &mut Vec<Token>) -> StatementPlan {
        self.plan_with(input, toks, &[])
    }

    /// [`Self::plan_statement`] for a statement the client prepares: the same decisions, and
    /// a route to read its metadata from where its values are needed to route at all (`0`,
    /// `'0'`, then each configured rule's own sample value for every parameter: a date rule
    /// places neither). A diagnostics function is routed as any statement (the session
    /// answers a text statement of it only).
    pub fn plan_prepare(&self, input: &StatementInput, toks: &mut Vec<Token>) -> PreparePlan {
        let mut plan = self.plan_with(input, toks, &[]);
        let params = toks
            .iter()
            .filter(|t| t.kind == TokKind::Placeholder)
            .count() as u16;
        if let Step::Diagnostics(_) = plan.step {
            let route = self.route_tokens(
                input.current,
                input.mode,
                input.charsets,
                plan.text(input.sql),
                toks,
                &[],
            );
            plan.step = Step::Route(route);
        }
        let refused = |p: &StatementPlan| matches!(p.step, Step::Route(RoutePlan::Refuse(_)));
        if params == 0 || !refused(&plan) {
            return PreparePlan { plan, params };
        }
        let mut stand_ins = vec![ParamValue::Int(0), ParamValue::Str("0".into())];
        for schema in self.topology().schemas.values() {
            for t in schema.tables.values() {
                if let crate::topology::TableDef::Sharded(t) = t
                    && let Some(v) = t.rule.sample_value()
                    && !stand_ins.contains(&v)
                {
                    stand_ins.push(v);
                }
            }
        }
        let mut scratch = Vec::new();
        for stand_in in stand_ins {
            let values = vec![stand_in; params as usize];
            // Every decision again with the values: a refusal for the user's sake stays one.
            let retry = self.plan_with(input, &mut scratch, &values);
            if !refused(&retry) {
                plan = retry;
                break;
            }
        }
        PreparePlan { plan, params }
    }

    /// [`Self::plan_statement`], routed with parameter values `values`.
    fn plan_with(
        &self,
        input: &StatementInput,
        toks: &mut Vec<Token>,
        values: &[ParamValue],
    ) -> StatementPlan {
        let sql = input.sql;
        toks.clear();
        // A plan that ends before the route: `step`, nothing else decided past `start`.
        let early = |step: Step, start: usize, deadline: Option<Duration>, digest| StatementPlan {
            step,
            start,
            deadline,
            want: ReadWant::UNDECIDED,
            implicit_commit: false,
            changes_schema: changes_schema(sql.as_bytes()),
            is_show: false,
            digest,
            pins: Effects::default(),
        };
        if input.read_only
            && let Some(what) = read_only_violation(sql, input.mode, self.server_version())
        {
            return early(Step::ReadOnly(what), 0, None, None);
        }
        // MariaDB would run a Mycat hint `/*!mycat:...*/` as code: it is cut off (the read
        // decision below sees it).
        let mut start = mycat_hint_len(sql).unwrap_or(0);
        let mut deadline = None;
        if let Some((limit, statement)) = statement_time_for(&sql[start..]) {
            // Run as written after FOR, under its own deadline.
            deadline = limit;
            start = sql.len() - statement.len();
        }
        let text = &sql[start..];
        if let Err(e) = self.tokenize(text, input.mode, toks) {
            return early(Step::Unreadable(e), start, deadline, None);
        }
        // A backend would read NULL for a variable only the session holds.
        if !input.user_vars.holds_none()
            && !toks.first().is_some_and(|t| t.is_kw(text, "SET"))
            && reads_held_var(text, toks, input.user_vars)
        {
            let e = RouterError::unsupported(
                "reading a user variable outside SET (through Shoal user variables save and \
                 restore system variables only)",
            );
            return early(Step::Route(RoutePlan::Refuse(e)), start, deadline, None);
        }
        let digest = input.digest.then(|| normalize::digest(text, toks));
        if let Some(d) = diagnostics_of(text, toks) {
            return early(Step::Diagnostics(d), start, deadline, digest);
        }
        let denied = denied_schema_named(text, toks, input.denied_schemas);
        let refused_here = denied.is_some();
        let route = match denied {
            Some(e) => RoutePlan::Refuse(e),
            None => self.route_tokens(
                input.current,
                input.mode,
                input.charsets,
                text,
                toks,
                values,
            ),
        };
        let read = (input.read_split || input.xa_tracking)
            .then(|| read_route(sql, input.mode, self.server_version()));
        let want = ReadWant::of(read, &route);
        let step = match route {
            RoutePlan::Broadcast { targets } if classify_tokens(text, toks).is_dml() => {
                Step::BroadcastWrites(targets)
            }
            RoutePlan::Broadcast { targets } => Step::BroadcastDdl(targets),
            // Off the hot path: only an INSERT the planner refused can need a sequence or a
            // column list (never one refused for the user's sake).
            RoutePlan::Refuse(e) if !refused_here => {
                let topo = self.topology();
                if let Some(fill) = sequence_fill(topo, input.current, sql) {
                    Step::InsertWithSequence(fill)
                } else if let Some(fill) = column_list_fill(topo, input.current, sql) {
                    Step::InsertWithColumnList(fill)
                } else {
                    Step::Route(RoutePlan::Refuse(e))
                }
            }
            route => Step::Route(route),
        };
        let pins = match step {
            Step::Route(_) => token_effects(text, toks),
            _ => Effects::default(),
        };
        StatementPlan {
            step,
            start,
            deadline,
            want,
            implicit_commit: input.xa_tracking && causes_implicit_commit(text, toks),
            // The statement that runs: `SET STATEMENT ... FOR ALTER TABLE` changes the schema.
            changes_schema: changes_schema(text.as_bytes()),
            is_show: toks.first().is_some_and(|t| t.is_kw(text, "SHOW")),
            digest,
            pins,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Diagnostics, diagnostics_of};
    use crate::sql::lex::tokenize;

    #[test]
    fn recognises_diagnostics_queries_on_tokens() {
        let diag = |sql: &str| diagnostics_of(sql, &tokenize(sql).expect("tokens"));
        assert_eq!(diag("SELECT ROW_COUNT()"), Some(Diagnostics::RowCount));
        assert_eq!(
            diag(" select found_rows( ) ;"),
            Some(Diagnostics::FoundRows)
        );
        assert_eq!(
            diag("SELECT /* id 7 */ connection_id()"),
            Some(Diagnostics::ConnectionId)
        );
        for sql in [
            "SELECT ROW_COUNT() + 1",
            "SELECT 1",
            "SELECT 'ROW_COUNT()'",
            "SELECT `ROW_COUNT`()",
            "SELECT ROW_COUNT(); SELECT 1",
            "SELECT FOUND_ROWS(1)",
            ";",
            "",
        ] {
            assert_eq!(diag(sql), None, "{sql}");
        }
    }
}
