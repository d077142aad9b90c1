//! The entry point: statement text in, route plan out.

use std::sync::Arc;

use super::cache::{CacheStats, PlanCache};
use super::ddl;
use super::eval::{self, Singles, Values};
use super::explain;
use super::namespace;
use super::placement::refuse;
use super::planner::{self, Body, Template};
use super::render::Text;
use super::{LocalAnswer, ParamValue, RoutePlan, Routed};
use crate::charset::Charsets;
use crate::error::{RouterError, codes};
use crate::sql::StatementKind;
use crate::sql::analyze::{self, AnalyzeError, Source};
use crate::sql::classify::classify_tokens;
use crate::sql::depth::{MAX_DEPTH, MAX_SELECT_NESTING, TooDeep};
use crate::sql::lex::{TokKind, Token, tokenize_with};
use crate::sql::normalize;
use crate::sql::{DEFAULT_SERVER_VERSION, SqlMode};
use crate::topology::Topology;

/// MySQL statements Shoal does not run (refused as unsupported, not as syntax errors).
const MYSQL_STATEMENTS: &[&str] = &[
    "INSTALL",
    "UNINSTALL",
    "BINLOG",
    "PURGE",
    "RESET",
    "CHANGE",
    "SHUTDOWN",
    "CACHE",
    "SIGNAL",
    "RESIGNAL",
    "GET",
    "IMPORT",
    "CLONE",
    "RESTART",
    "STOP",
    "START",
    "BACKUP",
    "DECLARE",
    "BEGIN",
    "ALTER",
    "CREATE",
    "DROP",
    "RELEASE",
    "LOCK",
];

/// Default number of cached plan shapes.
pub const DEFAULT_CACHE_CAPACITY: usize = 4096;

/// The plan cache key's schema part. No schema and the empty name must differ (a plan read
/// without a schema answers 1046, in `` 1049), and a name never holds NUL.
fn key_prefix(current: Option<&str>) -> &str {
    current.unwrap_or("\0")
}

/// The plan cache key's schema and character set part: a statement's text read in other
/// character sets has other values (a literal MariaDB converts otherwise, a `binary` key's
/// bytes), so a session that is not utf8mb4 has plans of its own. utf8mb4 keys are as before.
fn cache_prefix(current: Option<&str>, cs: Charsets) -> std::borrow::Cow<'_, str> {
    if cs == Charsets::UTF8MB4 {
        return key_prefix(current).into();
    }
    // `\x01` never appears in a schema name either.
    format!(
        "{}\x01{}\x01{}",
        key_prefix(current),
        cs.client.name(),
        cs.connection.name()
    )
    .into()
}

/// A DML statement planned for repeated execution ([`Router::prepare_route`]): what the
/// router read from its text, kept with the schema, sql_mode and router it was read for.
#[derive(Debug)]
pub struct PreparedRoute {
    topo: Arc<Topology>,
    server_version: u32,
    current: Option<String>,
    mode: SqlMode,
    charsets: Charsets,
    sql: String,
    toks: Vec<Token>,
    slot_tokens: Vec<u32>,
    param_tokens: Vec<u32>,
    template: Arc<Template>,
    singles: Singles,
}

impl PreparedRoute {
    /// Whether it was read for `router` in schema `current`, sql_mode `mode` and character sets
    /// `cs`: otherwise an execute is planned from its text again.
    fn current_for(
        &self,
        router: &Router,
        current: Option<&str>,
        mode: SqlMode,
        cs: Charsets,
    ) -> bool {
        Arc::ptr_eq(&self.topo, &router.topo)
            && self.server_version == router.server_version
            && self.mode == mode
            && self.charsets == cs
            && self.current.as_deref() == current
    }

    /// The statement with an execute's bound values.
    fn values<'a>(&'a self, params: &'a [ParamValue]) -> Values<'a> {
        Values {
            text: Text {
                sql: &self.sql,
                toks: &self.toks,
                param_tokens: &self.param_tokens,
            },
            slot_tokens: &self.slot_tokens,
            params,
            singles: Some(&self.singles),
            charsets: self.charsets,
        }
    }
}

/// Plans statements against one topology. Cheap to share (`Arc<Router>`); build a new one when
/// the topology changes (its plan cache belongs to the topology it was built for).
pub struct Router {
    topo: Arc<Topology>,
    cache: PlanCache,
    /// Prepared routes by (schema, sql_mode, text), shared by every session preparing the same
    /// statement: an execute then reads memory other sessions keep warm, not its own copy
    /// last touched many sessions ago.
    prepared: PlanCache<Arc<PreparedRoute>>,
    /// The backends' version, which gates `/*!NNNNN ... */` comments.
    server_version: u32,
}

impl Router {
    pub fn new(topo: Arc<Topology>) -> Self {
        Self::with_cache_capacity(topo, DEFAULT_CACHE_CAPACITY)
    }

    pub fn with_cache_capacity(topo: Arc<Topology>, capacity: usize) -> Self {
        Router {
            topo,
            cache: PlanCache::new(capacity),
            prepared: PlanCache::new(capacity),
            server_version: DEFAULT_SERVER_VERSION,
        }
    }

    /// The backends' MariaDB version as `major * 10000 + minor * 100 + patch` (101106 for
    /// 10.11.6, from the handshake's server version): versioned comments `/*!NNNNN ... */` and
    /// `/*M!NNNNNN ... */` are code or comment as that server reads them. Default
    /// [`DEFAULT_SERVER_VERSION`].
    pub fn with_server_version(mut self, version: u32) -> Self {
        if version != self.server_version {
            self.server_version = version;
            self.cache = PlanCache::new(self.cache.stats().capacity);
            self.prepared = PlanCache::new(self.prepared.stats().capacity);
        }
        self
    }

    pub fn server_version(&self) -> u32 {
        self.server_version
    }

    pub fn topology(&self) -> &Arc<Topology> {
        &self.topo
    }

    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// The plan for `sql` in logical schema `current` (the session's `USE`), with `params` bound
    /// to its `?` placeholders (empty for text-protocol statements), read in MariaDB's default
    /// sql_mode from a utf8mb4 client.
    pub fn route(&self, current: Option<&str>, sql: &str, params: &[ParamValue]) -> RoutePlan {
        self.route_in(current, SqlMode::default(), Charsets::UTF8MB4, sql, params)
    }

    /// Like [`Self::route`], for a session whose sql_mode is `mode` ([`SqlMode::parse`] of its
    /// `@@sql_mode`): `||`, `"x"`, backslashes and `NOT` read as that session's server reads
    /// them; and whose character sets are `cs`: `sql` is the statement as
    /// [`crate::charset::decode`] read it in `cs.client` (the statement itself for a UTF-8
    /// client), and string key values are read as MariaDB converts them in `cs`.
    pub fn route_in(
        &self,
        current: Option<&str>,
        mode: SqlMode,
        cs: Charsets,
        sql: &str,
        params: &[ParamValue],
    ) -> RoutePlan {
        let mut toks = Vec::new();
        if let Err(e) = self.tokenize(sql, mode, &mut toks) {
            return RoutePlan::Refuse(e);
        }
        self.route_tokens(current, mode, cs, sql, &toks, params)
    }

    /// The tokens of `sql` as this router's backends read it in sql_mode `mode` (versioned
    /// comments gated by [`Self::server_version`]), into `toks`: what [`Self::route_tokens`]
    /// takes, for a caller that reads the statement's tokens itself too (one scan per
    /// statement). The error is the refusal [`Self::route_in`] would answer.
    pub fn tokenize(
        &self,
        sql: &str,
        mode: SqlMode,
        toks: &mut Vec<Token>,
    ) -> Result<(), RouterError> {
        tokenize_with(sql, mode, self.server_version, toks)
            .map_err(|e| parse_error(&format!("{} at offset {}", e.what, e.offset)))
    }

    /// Like [`Self::route`], without the plan cache: parses and plans every time (benchmarks,
    /// debugging a suspected cache problem).
    pub fn route_uncached(
        &self,
        current: Option<&str>,
        sql: &str,
        params: &[ParamValue],
    ) -> RoutePlan {
        self.route_uncached_in(current, SqlMode::default(), Charsets::UTF8MB4, sql, params)
    }

    /// [`Self::route_in`] without the plan cache.
    pub fn route_uncached_in(
        &self,
        current: Option<&str>,
        mode: SqlMode,
        cs: Charsets,
        sql: &str,
        params: &[ParamValue],
    ) -> RoutePlan {
        let mut toks = Vec::new();
        if let Err(e) = self.tokenize(sql, mode, &mut toks) {
            return RoutePlan::Refuse(e);
        }
        if !classify_tokens(sql, &toks).is_dml() || namespace::reaches_host(sql, &toks).is_some() {
            return self.route_tokens(current, mode, cs, sql, &toks, params);
        }
        if let Some(refusal) = unreadable(mode, sql, &toks) {
            return refusal;
        }
        let shape = normalize::shape_with_prefix(sql, &toks, key_prefix(current), mode);
        let (template, _) = self.build(current, mode, sql, &toks, &shape);
        let values = Values {
            text: Text {
                sql,
                toks: &toks,
                param_tokens: &shape.param_tokens,
            },
            slot_tokens: &shape.slot_tokens,
            params,
            singles: None,
            charsets: cs,
        };
        let plan = eval::evaluate(&template, &self.topo, &values);
        self.bind_first(plan, current, mode, cs, sql, &toks, params)
    }

    /// The plan as text: one line for its kind, then one per datanode and merge step.
    pub fn explain_text(&self, current: Option<&str>, sql: &str) -> String {
        explain::render(&self.topo, &self.route(current, sql, &[]))
    }

    /// [`Self::route_in`] for a statement already tokenized by [`Self::tokenize`] with the same
    /// `mode` (tokens read another way would plan another statement).
    pub fn route_tokens(
        &self,
        current: Option<&str>,
        mode: SqlMode,
        cs: Charsets,
        sql: &str,
        toks: &[Token],
        params: &[ParamValue],
    ) -> RoutePlan {
        // Shoal's own statements, before anything reads them as MariaDB's.
        if let Some(admin) = crate::sql::admin::admin_tokens(sql, toks) {
            return match admin {
                Ok(a) => RoutePlan::Local(LocalAnswer::Admin(a)),
                Err(e) => RoutePlan::Refuse(e),
            };
        }
        let kind = classify_tokens(sql, toks);
        // A text of several statements runs whole where its first would go: right only when
        // the rest needs no routing of its own (system variables set one after another, which
        // the session trackers report). DML is read whole by the planner, which refuses more
        // than one statement; DDL may hold a stored program's body, whose `;` are its own.
        if !kind.is_dml()
            && !matches!(kind, StatementKind::Ddl(_))
            && several_statements(sql, toks)
            && !only_system_variable_sets(sql, toks)
        {
            return RoutePlan::Refuse(refuse(
                "several statements in one query string here (split them)",
            ));
        }
        if let Some(e) = namespace::reaches_host(sql, toks) {
            return RoutePlan::Refuse(e);
        }
        // DML is checked table by table as its tables are resolved; EXPLAIN plans its
        // statement as DML.
        if !kind.is_dml()
            && !matches!(kind, StatementKind::Explain | StatementKind::ExplainRoute)
            && let Some(e) = namespace::check_tokens(&self.topo, current, sql, toks)
        {
            return RoutePlan::Refuse(e);
        }
        let text = Text {
            sql,
            toks,
            param_tokens: &[],
        };
        use StatementKind as K;
        match kind {
            K::Select | K::Insert | K::Replace | K::Update | K::Delete => {
                self.dml(current, mode, cs, sql, toks, params)
            }
            K::Empty => RoutePlan::Refuse(RouterError::new(1065, "42000", "Query was empty")),
            K::ExplainRoute => self.explain_route(current, mode, cs, sql, toks),
            K::Explain => self.explain(current, mode, cs, sql, toks, params),
            K::Show => ddl::plan_show(&self.topo, current, &text),
            K::Ddl(k) => ddl::plan_ddl(&self.topo, current, &text, k),
            K::Call => {
                let dn = current
                    .and_then(|c| super::placement::find_schema(&self.topo, c))
                    .and_then(|s| s.default_datanode);
                match dn {
                    Some(dn) => RoutePlan::Single(super::Target {
                        datanode: dn,
                        sql: sql.into(),
                        params: super::Params::first(params.len()),
                        qualified: false,
                    }),
                    None => {
                        RoutePlan::Refuse(refuse("CALL in a schema without a default datanode"))
                    }
                }
            }
            K::Help => RoutePlan::Any {
                sql: sql.to_string(),
            },
            K::Load => RoutePlan::Refuse(refuse("LOAD DATA")),
            K::Handler => RoutePlan::Refuse(refuse("HANDLER")),
            K::TableMaintenance => RoutePlan::Refuse(refuse(
                "ANALYZE/OPTIMIZE/REPAIR/CHECK TABLE through Shoal (run it on the datanodes)",
            )),
            K::Account => RoutePlan::Refuse(refuse(
                "account management through Shoal (users are defined in its config)",
            )),
            K::Other(w) if MYSQL_STATEMENTS.contains(&w.as_str()) => {
                RoutePlan::Refuse(refuse(format!("the {w} statement")))
            }
            K::Other(w) => RoutePlan::Refuse(parse_error(&format!("unknown statement near '{w}'"))),
            K::Set(_)
            | K::Use(_)
            | K::Begin { .. }
            | K::Commit
            | K::Rollback
            | K::Savepoint
            | K::RollbackToSavepoint
            | K::ReleaseSavepoint
            | K::Xa
            | K::LockTables
            | K::UnlockTables
            | K::Do
            | K::Kill
            | K::Prepare
            | K::Execute
            | K::Deallocate
            | K::Flush => RoutePlan::Session(kind),
        }
    }

    /// Plans `sql` once for many executions with bound values (a prepared statement): its
    /// tokens, shape and template are kept, so that [`Self::route_prepared`] only evaluates
    /// the template with each execution's values. `None` where that would not be exactly what
    /// [`Self::route_in`] answers (not a DML statement, a refusal before planning, a template
    /// the plan cache would not keep): the caller routes each execution with `route_in`.
    pub fn prepare_route(
        &self,
        current: Option<&str>,
        mode: SqlMode,
        cs: Charsets,
        sql: &str,
    ) -> Option<Arc<PreparedRoute>> {
        let key = format!("{}\0{}\0{sql}", mode.bits(), cache_prefix(current, cs));
        if let Some(p) = self.prepared.get(&key) {
            return Some(p);
        }
        let p = Arc::new(self.prepare_route_uncached(current, mode, cs, sql)?);
        self.prepared.put(key, p.clone());
        Some(p)
    }

    fn prepare_route_uncached(
        &self,
        current: Option<&str>,
        mode: SqlMode,
        cs: Charsets,
        sql: &str,
    ) -> Option<PreparedRoute> {
        let mut toks = Vec::new();
        self.tokenize(sql, mode, &mut toks).ok()?;
        if !classify_tokens(sql, &toks).is_dml()
            || unreadable(mode, sql, &toks).is_some()
            || namespace::reaches_host(sql, &toks).is_some()
        {
            return None;
        }
        let mut shape = normalize::shape_with_prefix(sql, &toks, key_prefix(current), mode);
        shape.key = String::new();
        let (template, cacheable) = self.build(current, mode, sql, &toks, &shape);
        let singles = Singles::for_template(&template, &self.topo);
        cacheable.then(|| PreparedRoute {
            topo: self.topo.clone(),
            server_version: self.server_version,
            current: current.map(str::to_string),
            mode,
            charsets: cs,
            sql: sql.to_string(),
            toks,
            slot_tokens: shape.slot_tokens,
            param_tokens: shape.param_tokens,
            template: Arc::new(template),
            singles,
        })
    }

    /// The plan of a statement prepared with [`Self::prepare_route`], for one execution's
    /// `params`: the same plan [`Self::route_in`] gives for its text. A statement prepared in
    /// another schema or sql_mode, or by another router, is planned again from its text.
    pub fn route_prepared(
        &self,
        p: &PreparedRoute,
        current: Option<&str>,
        mode: SqlMode,
        cs: Charsets,
        params: &[ParamValue],
    ) -> RoutePlan {
        self.route_kept(p, current, mode, cs, params).into_plan()
    }

    /// [`Self::route_prepared`] with a kept one-datanode target borrowed from `p`, not copied
    /// (see [`Routed`]): what an execute runs.
    pub fn route_kept<'p>(
        &self,
        p: &'p PreparedRoute,
        current: Option<&str>,
        mode: SqlMode,
        cs: Charsets,
        params: &[ParamValue],
    ) -> Routed<'p> {
        if !p.current_for(self, current, mode, cs) {
            return Routed::Plan(self.route_in(current, mode, cs, &p.sql, params));
        }
        match eval::evaluate_kept(&p.template, &self.topo, &p.values(params), &p.singles) {
            Routed::Plan(plan) => {
                Routed::Plan(self.bind_first(plan, current, mode, cs, &p.sql, &p.toks, params))
            }
            kept => kept,
        }
    }

    fn dml(
        &self,
        current: Option<&str>,
        mode: SqlMode,
        cs: Charsets,
        sql: &str,
        toks: &[Token],
        params: &[ParamValue],
    ) -> RoutePlan {
        if let Some(refusal) = unreadable(mode, sql, toks) {
            return refusal;
        }
        let mut shape = normalize::shape_with_prefix(sql, toks, &cache_prefix(current, cs), mode);
        let key = std::mem::take(&mut shape.key);
        // The cache compares whole keys (never a hash alone): a hit was planned from a statement
        // with these tokens in this sql_mode, differing at most in literal values.
        let cached = self
            .cache
            .get(&key)
            .filter(|t| pins_match(t, sql, toks, &shape.slot_tokens));
        let template = match cached {
            Some(t) => t,
            None => {
                let (t, cacheable) = self.build(current, mode, sql, toks, &shape);
                let t = Arc::new(t);
                if cacheable {
                    self.cache.put(key, t.clone());
                }
                t
            }
        };
        let values = Values {
            text: Text {
                sql,
                toks,
                param_tokens: &shape.param_tokens,
            },
            slot_tokens: &shape.slot_tokens,
            params,
            singles: None,
            charsets: cs,
        };
        let plan = eval::evaluate(&template, &self.topo, &values);
        self.bind_first(plan, current, mode, cs, sql, toks, params)
    }

    /// A DML plan refused across shards: perhaps only for subqueries that can run first and
    /// be bound as values ([`super::bind`]). Every way of planning a statement (cached,
    /// uncached, prepared) goes through here, so that they agree.
    #[allow(clippy::too_many_arguments)]
    fn bind_first(
        &self,
        plan: RoutePlan,
        current: Option<&str>,
        mode: SqlMode,
        cs: Charsets,
        sql: &str,
        toks: &[Token],
        params: &[ParamValue],
    ) -> RoutePlan {
        match plan {
            RoutePlan::Refuse(e) if e.code() == codes::ER_NOT_SUPPORTED_YET.0 => {
                // A prepared statement's values are written into its text as literals (the
                // subqueries run as text, the outer statement is planned from its text with
                // the rows bound; a gathered statement runs as text).
                let mut filled_toks = Vec::new();
                let filled;
                let (sql, toks) = if params.is_empty() {
                    (sql, toks)
                } else {
                    match super::bind::filled(sql, toks, params, cs) {
                        Some(f) if self.tokenize(&f, mode, &mut filled_toks).is_ok() => {
                            filled = f;
                            (filled.as_str(), filled_toks.as_slice())
                        }
                        _ => return RoutePlan::Refuse(e),
                    }
                };
                if let Some(found) = super::bind::plan(self, current, mode, cs, sql, toks) {
                    return found;
                }
                // Else the whole statement on one datanode, over copies of its tables.
                match super::gather::plan(self, current, mode, cs, sql, toks) {
                    Ok(g) => RoutePlan::Gather(Box::new(g)),
                    Err(Some(why)) => RoutePlan::Refuse(why),
                    Err(None) => RoutePlan::Refuse(e),
                }
            }
            plan => plan,
        }
    }

    fn build(
        &self,
        current: Option<&str>,
        mode: SqlMode,
        sql: &str,
        toks: &[Token],
        shape: &normalize::Shape,
    ) -> (Template, bool) {
        let src = Source::with_mode(sql, toks, shape, mode);
        let refused = |e| Template {
            pins: Vec::new(),
            body: Body::Done(Box::new(RoutePlan::Refuse(e))),
        };
        match analyze::analyze(&src) {
            Ok(dml) => (
                planner::build(
                    &self.topo,
                    current,
                    mode,
                    sql,
                    toks,
                    &shape.slot_tokens,
                    &dml,
                ),
                true,
            ),
            // The parser's message quotes the text where it stopped, literals included: kept,
            // it would answer another statement of the same shape with this one's values.
            Err(AnalyzeError::Parse(m)) => (refused(parse_error(&m)), false),
            // Not kept: the key of such a statement is as long as the statement.
            Err(AnalyzeError::TooDeep(d)) => (refused(too_deep(d)), false),
            Err(AnalyzeError::MultipleStatements) => (
                refused(refuse(
                    "several statements in one query string here (split them)",
                )),
                true,
            ),
            Err(AnalyzeError::NotDml) => (refused(refuse("this statement")), true),
        }
    }

    /// `EXPLAIN ROUTE <sql>`: the plan of the rest of the text.
    fn explain_route(
        &self,
        current: Option<&str>,
        mode: SqlMode,
        cs: Charsets,
        sql: &str,
        toks: &[Token],
    ) -> RoutePlan {
        let Some(t) = toks.get(2) else {
            return RoutePlan::Refuse(parse_error("EXPLAIN ROUTE needs a statement"));
        };
        let inner = &sql[t.start as usize..];
        let plan = self.route_in(current, mode, cs, inner, &[]);
        RoutePlan::Local(LocalAnswer::ExplainRoute {
            rows: explain::rows(&self.topo, &plan),
        })
    }

    /// `EXPLAIN <statement>` runs where the statement would, when that is one datanode;
    /// `DESC t` / `EXPLAIN t` describe the table's first physical table.
    fn explain(
        &self,
        current: Option<&str>,
        mode: SqlMode,
        cs: Charsets,
        sql: &str,
        toks: &[Token],
        params: &[ParamValue],
    ) -> RoutePlan {
        const MODIFIERS: &[&str] = &[
            "EXTENDED",
            "PARTITIONS",
            "ANALYZE",
            "FORMAT",
            "=",
            "JSON",
            "TRADITIONAL",
            "TREE",
        ];
        const STATEMENTS: &[&str] = &[
            "SELECT", "INSERT", "REPLACE", "UPDATE", "DELETE", "WITH", "TABLE",
        ];
        let mut i = 1;
        while toks.get(i).is_some_and(|t| {
            MODIFIERS
                .iter()
                .any(|m| t.is_kw(sql, m) || t.is_punct(sql, m))
        }) {
            i += 1;
        }
        let starts_statement = toks
            .get(i)
            .is_some_and(|t| STATEMENTS.iter().any(|s| t.is_kw(sql, s)) || t.is_punct(sql, "("));
        if !starts_statement {
            let text = Text {
                sql,
                toks,
                param_tokens: &[],
            };
            return ddl::plan_describe_table(&self.topo, current, &text)
                .unwrap_or_else(|| RoutePlan::Refuse(refuse("this form of EXPLAIN")));
        }
        let prefix_end = toks[i].start as usize;
        let inner = &sql[prefix_end..];
        match self.route_in(current, mode, cs, inner, params) {
            RoutePlan::Single(mut t) => {
                t.sql = format!("{}{}", &sql[..prefix_end], t.sql).into();
                RoutePlan::Single(t)
            }
            RoutePlan::Any { sql: s } => RoutePlan::Any {
                sql: format!("{}{}", &sql[..prefix_end], s),
            },
            RoutePlan::Refuse(e) => RoutePlan::Refuse(e),
            _ => RoutePlan::Refuse(refuse(
                "EXPLAIN of a statement that runs on several datanodes (use EXPLAIN ROUTE)",
            )),
        }
    }
}

/// DML the router cannot read exactly as the session's server does, refused whole.
fn unreadable(mode: SqlMode, sql: &str, toks: &[Token]) -> Option<RoutePlan> {
    if mode.foreign_grammar() {
        return Some(RoutePlan::Refuse(refuse(
            "statements in sql_mode ORACLE or MSSQL (MariaDB reads them with another grammar)",
        )));
    }
    // Lifted string values are decoded with backslash escapes; under NO_BACKSLASH_ESCAPES a
    // backslash is an ordinary character, so such a literal is refused rather than misread.
    if mode.no_backslash_escapes()
        && toks.iter().any(|t| {
            matches!(t.kind, TokKind::Str | TokKind::DqStr | TokKind::Variable)
                && t.text(sql).contains('\\')
        })
    {
        return Some(RoutePlan::Refuse(refuse(
            "a string literal containing a backslash under sql_mode NO_BACKSLASH_ESCAPES",
        )));
    }
    None
}

fn pins_match(t: &Template, sql: &str, toks: &[Token], slot_tokens: &[u32]) -> bool {
    t.pins.iter().all(|(slot, text)| {
        slot_tokens
            .get(*slot as usize)
            .and_then(|&ti| toks.get(ti as usize))
            .is_some_and(|tok| tok.text(sql) == text)
    })
}

/// MariaDB's errors for a statement too complex to read, worded for Shoal's limits.
fn too_deep(d: TooDeep) -> RouterError {
    match d {
        TooDeep::Selects(n) => RouterError::with(
            codes::ER_TOO_HIGH_LEVEL_OF_NESTING_FOR_SELECT,
            format!(
                "Too high level of nesting for select ({n} SELECTs nested, at most {MAX_SELECT_NESTING})"
            ),
        ),
        TooDeep::Expression(_) => RouterError::with(
            codes::ER_STACK_OVERRUN_NEED_MORE,
            format!(
                "Thread stack overrun: the statement nests deeper than Shoal reads (at most {MAX_DEPTH} levels)"
            ),
        ),
    }
}

fn parse_error(detail: &str) -> RouterError {
    RouterError::with(
        codes::ER_PARSE_ERROR,
        format!("You have an error in your SQL syntax: {detail}"),
    )
}

/// Whether `toks` hold more than one statement (a `;` with a token after it).
fn several_statements(sql: &str, toks: &[Token]) -> bool {
    toks.iter()
        .position(|t| t.is_punct(sql, ";"))
        .is_some_and(|i| toks[i + 1..].iter().any(|t| !t.is_punct(sql, ";")))
}

/// Whether every statement of `toks` is a `SET` of system variables only (no user variable,
/// no subquery).
fn only_system_variable_sets(sql: &str, toks: &[Token]) -> bool {
    use crate::sql::lex::TokKind;
    let mut at_start = true;
    for t in toks {
        if t.is_punct(sql, ";") {
            at_start = true;
            continue;
        }
        if at_start && !t.is_kw(sql, "SET") {
            return false;
        }
        at_start = false;
        if (t.kind == TokKind::Variable && !t.text(sql).starts_with("@@")) || t.is_kw(sql, "SELECT")
        {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    /// `t` sharded by `id` (mod) over two datanodes of schema `s`.
    fn two_shards() -> super::Router {
        use crate::config::Config;
        use crate::topology::Topology;
        let cfg = Config::from_yaml_str(
            "users: [{ name: u, password: p, schemas: [s] }]\n\
             datahosts: [{ name: dh1, primary: { address: '127.0.0.1:3307', user: u, password: p } }]\n\
             datanodes: [{ name: dn1..dn2, datahost: dh1, database: d1..d2 }]\n\
             rules: [{ name: by_id, algorithm: mod }]\n\
             schemas:\n  - name: s\n    default_datanode: dn1\n    tables: [{ name: t, type: sharded, shard_key: id, rule: by_id, datanodes: dn1..dn2 }]\n",
        )
        .expect("config");
        super::Router::new(std::sync::Arc::new(
            Topology::build(&cfg).expect("topology"),
        ))
    }

    #[test]
    fn router_is_shareable_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<super::Router>();
        assert_send_sync::<super::RoutePlan>();
    }

    /// A statement prepared in one schema or sql_mode and executed in another is planned
    /// there, not with the template read for the first: `"x"` is a string by default and a
    /// column under ANSI_QUOTES, and `t` is another table outside schema `s`.
    #[test]
    fn prepared_routes_follow_the_schema_and_sql_mode_of_each_execution() {
        use super::ParamValue;
        use crate::sql::SqlMode;
        let router = two_shards();
        let ansi = SqlMode::parse("ANSI_QUOTES");
        for sql in [
            "SELECT * FROM t WHERE id = ?",
            "SELECT * FROM t WHERE id = \"3\" OR id = ?",
            "UPDATE t SET v = 1 WHERE id IN (?, 4)",
        ] {
            let p = router
                .prepare_route(
                    Some("s"),
                    SqlMode::default(),
                    crate::charset::Charsets::UTF8MB4,
                    sql,
                )
                .expect("a DML statement is prepared");
            for (schema, mode) in [
                (Some("s"), SqlMode::default()),
                (Some("s"), ansi),
                (None, SqlMode::default()),
                (Some("other"), SqlMode::default()),
            ] {
                for v in [ParamValue::Int(1), ParamValue::Int(2), ParamValue::Null] {
                    let params = [v];
                    assert_eq!(
                        format!(
                            "{:?}",
                            router.route_prepared(
                                &p,
                                schema,
                                mode,
                                crate::charset::Charsets::UTF8MB4,
                                &params
                            )
                        ),
                        format!(
                            "{:?}",
                            router.route_in(
                                schema,
                                mode,
                                crate::charset::Charsets::UTF8MB4,
                                sql,
                                &params
                            )
                        ),
                        "{sql} in {schema:?} {mode:?}"
                    );
                }
            }
        }
        // Another router (another topology) plans it from its text.
        let other = two_shards();
        let p = router
            .prepare_route(
                Some("s"),
                SqlMode::default(),
                crate::charset::Charsets::UTF8MB4,
                "SELECT * FROM t WHERE id = ?",
            )
            .expect("prepared");
        let params = [ParamValue::Int(3)];
        assert_eq!(
            format!(
                "{:?}",
                other.route_prepared(
                    &p,
                    Some("s"),
                    SqlMode::default(),
                    crate::charset::Charsets::UTF8MB4,
                    &params
                )
            ),
            format!(
                "{:?}",
                other.route_in(
                    Some("s"),
                    SqlMode::default(),
                    crate::charset::Charsets::UTF8MB4,
                    "SELECT * FROM t WHERE id = ?",
                    &params
                )
            ),
        );
        // Not DML: nothing to keep.
        assert!(
            router
                .prepare_route(
                    Some("s"),
                    SqlMode::default(),
                    crate::charset::Charsets::UTF8MB4,
                    "BEGIN"
                )
                .is_none()
        );
    }

    /// A prepared statement renders each one-datanode target once and reuses it: every
    /// execute, whichever shard its values pick and in whatever order, gets what its text
    /// planned with those values gets (a table-per-shard name differs per shard on one
    /// datanode; a global table's datanode is fixed).
    #[test]
    fn prepared_targets_rendered_once_match_each_execution() {
        use super::ParamValue;
        use crate::config::Config;
        use crate::sql::SqlMode;
        use crate::topology::Topology;
        let cfg = Config::from_yaml_str(include_str!("../../tests/golden/topology.yaml"))
            .expect("config");
        let router = super::Router::new(std::sync::Arc::new(
            Topology::build(&cfg).expect("topology"),
        ));
        let mode = SqlMode::default();
        let mut kept = 0;
        let values: Vec<i128> = (0..24).chain((0..24).rev()).map(|i| i * 7 % 24).collect();
        for sql in [
            "SELECT c FROM sbtest1 WHERE id = ?",
            "SELECT * FROM t_order WHERE order_id = ?",
            "SELECT o.* FROM orders o JOIN order_item i ON i.order_id = o.id WHERE o.id = ?",
            "SELECT * FROM country WHERE id = ?",
            "UPDATE t_order SET v = 1 WHERE order_id = ?",
            "SELECT * FROM t_range WHERE id = ?",
        ] {
            let p = router
                .prepare_route(Some("shop"), mode, crate::charset::Charsets::UTF8MB4, sql)
                .expect("a DML statement is prepared");
            let mut shards = std::collections::BTreeSet::new();
            for &v in &values {
                let params = [ParamValue::Int(v * 97)];
                let plan = router.route_prepared(
                    &p,
                    Some("shop"),
                    mode,
                    crate::charset::Charsets::UTF8MB4,
                    &params,
                );
                if let super::RoutePlan::Single(t) = &plan {
                    shards.insert(t.sql.to_string());
                }
                assert_eq!(
                    format!("{plan:?}"),
                    format!(
                        "{:?}",
                        router.route_in(
                            Some("shop"),
                            mode,
                            crate::charset::Charsets::UTF8MB4,
                            sql,
                            &params
                        )
                    ),
                    "{sql} with {v}"
                );
                // Borrowed, the kept target is that plan's.
                if let super::Routed::Kept(t) = router.route_kept(
                    &p,
                    Some("shop"),
                    mode,
                    crate::charset::Charsets::UTF8MB4,
                    &params,
                ) {
                    kept += 1;
                    assert_eq!(
                        format!("{:?}", super::RoutePlan::Single(t.clone())),
                        format!("{plan:?}"),
                        "{sql} with {v}"
                    );
                }
            }
            assert!(!shards.is_empty(), "{sql}: no single target");
        }
        assert!(
            kept >= values.len(),
            "only {kept} executes had a kept target"
        );
    }

    /// Sessions preparing the same text in the same schema and sql_mode share one route; a
    /// different schema or sql_mode gets its own, read there (the shared cache's key must
    /// hold both, or a route read under ANSI_QUOTES would serve the default mode).
    #[test]
    fn prepared_routes_are_shared_per_schema_mode_and_text() {
        use super::ParamValue;
        use crate::sql::SqlMode;
        use std::sync::Arc;
        let router = two_shards();
        let ansi = SqlMode::parse("ANSI_QUOTES");
        let sql = "SELECT * FROM t WHERE id = \"3\" OR id = ?";
        let contexts = [
            (Some("s"), SqlMode::default()),
            (Some("s"), ansi),
            (None, SqlMode::default()),
            (Some(""), SqlMode::default()),
        ];
        let first: Vec<_> = contexts
            .iter()
            .map(|&(schema, mode)| {
                router.prepare_route(schema, mode, crate::charset::Charsets::UTF8MB4, sql)
            })
            .collect();
        for (i, &(schema, mode)) in contexts.iter().enumerate() {
            let again = router.prepare_route(schema, mode, crate::charset::Charsets::UTF8MB4, sql);
            match (&first[i], &again) {
                (Some(a), Some(b)) => assert!(Arc::ptr_eq(a, b), "{schema:?} {mode:?}"),
                (None, None) => {}
                _ => panic!("{schema:?} {mode:?}: prepared once, not the second time"),
            }
            for (j, other) in first.iter().enumerate() {
                if let (Some(a), Some(b)) = (&first[i], other)
                    && i != j
                {
                    assert!(
                        !Arc::ptr_eq(a, b),
                        "{:?} shares {:?}",
                        contexts[i],
                        contexts[j]
                    );
                }
            }
            if let Some(p) = &again {
                let params = [ParamValue::Int(2)];
                assert_eq!(
                    format!(
                        "{:?}",
                        router.route_prepared(
                            p,
                            schema,
                            mode,
                            crate::charset::Charsets::UTF8MB4,
                            &params
                        )
                    ),
                    format!(
                        "{:?}",
                        router.route_in(
                            schema,
                            mode,
                            crate::charset::Charsets::UTF8MB4,
                            sql,
                            &params
                        )
                    ),
                    "{schema:?} {mode:?}"
                );
            }
        }
        assert!(first[0].is_some() && first[1].is_some());
    }

    /// A caller that tokenizes once and routes the tokens gets the plan `route_in` gives,
    /// in the session's sql_mode, refusals included.
    #[test]
    fn routing_tokens_plans_as_route_in() {
        use crate::sql::SqlMode;
        let router = two_shards();
        let ansi = SqlMode::parse("ANSI_QUOTES");
        for mode in [SqlMode::default(), ansi] {
            for sql in [
                "SELECT c FROM t WHERE id = 3",
                "SELECT c FROM t WHERE id = \"3\"",
                "SELECT COUNT(*) FROM t",
                "SET @a = 1",
                "SELECT 'unterminated",
                "",
            ] {
                let mut toks = Vec::new();
                let routed = match router.tokenize(sql, mode, &mut toks) {
                    Ok(()) => router.route_tokens(
                        Some("s"),
                        mode,
                        crate::charset::Charsets::UTF8MB4,
                        sql,
                        &toks,
                        &[],
                    ),
                    Err(e) => super::RoutePlan::Refuse(e),
                };
                assert_eq!(
                    routed,
                    router.route_in(Some("s"), mode, crate::charset::Charsets::UTF8MB4, sql, &[]),
                    "{sql}"
                );
            }
        }
    }

    /// Found by fuzzing the router: a parse refusal quotes the statement's literals, so it is
    /// not cached, or a later statement of the same shape would get this one's message (and
    /// one client's value would reach another's error).
    #[test]
    fn parse_refusals_quote_their_own_statement() {
        let router = two_shards();
        for value in ["14307046221", "28614092442"] {
            let sql = format!("UPDATE t SET c = 1 WHERE id = 1 {value} garbage");
            match router.route(Some("s"), &sql, &[]) {
                super::RoutePlan::Refuse(e) => {
                    assert!(e.message().contains(value), "{sql}: {}", e.message())
                }
                other => panic!("{sql}: {other:?}"),
            }
        }
    }
}
