//! Prepared statements with the router. Shoal owns the client's statement ids: PREPARE plans
//! the text once for its metadata; each EXECUTE decodes the bound values, routes by them, and
//! runs the target's SQL through a backend statement prepared lazily on that datanode's
//! connection (kept while the client statement is open, closed with it).

use mysql_common::constants::CapabilityFlags;
use std::sync::Arc;

use shoal_router::plan::{
    LocalAnswer, Merge, ParamValue, Params, PreparePlan, PreparedRoute, ReadWant, RoutePlan,
    Routed, Step as PlanStep, Target,
};

use super::local::string_column;
use super::params::{RawParam, decode_execute_into, literal_in};
use super::request::{Request, prepare_on, request_on};
use super::single::Relayed;
use super::{Use, read_only_refused, unsupported};
use crate::backend::stmt_cache::ParamTypes;
use crate::error::{Error, Result};
use crate::exec::Cursor;
use crate::exec::relay::Expect;
use crate::merge::Protocol;
use crate::out_of_line::cold;
use crate::runtime::routing::Routing;
use crate::wire::messages::eof_payload;

/// Shoal's ids start high so that they never look like a backend's (helps reading logs).
const FIRST_ID: u32 = 1 << 20;

/// One client statement.
pub struct ClientStmt {
    pub id: u32,
    /// Shared with each execution's plan arms, which outlive the borrow of the statement list.
    pub sql: Arc<str>,
    /// The router's reading of `sql` in the schema and sql_mode it was prepared in: each
    /// EXECUTE only evaluates it with its values (the router plans from the text again where
    /// the schema or sql_mode has changed since).
    pub route: Option<Arc<PreparedRoute>>,
    pub params: u16,
    /// Parameter types from the last EXECUTE that sent them (type, unsigned flag).
    pub types: ParamTypes,
    /// COM_STMT_SEND_LONG_DATA was used: not supported through the router.
    pub long_data: bool,
    /// The router's read/write decision on `sql` (computed at the first EXECUTE).
    pub read_route: Option<shoal_router::sql::readwrite::ReadRoute>,
    /// An INSERT leaving out a shard key that has a sequence: `sql` has a parameter for each
    /// row's key, which each execute binds to the ids it takes (`params` counts the client's).
    pub sequence: Option<Arc<super::sequence::PreparedSequence>>,
}

#[derive(Default)]
pub struct Statements {
    list: Vec<ClientStmt>,
    /// `list`'s ids in the same order: an execute's lookup reads these few bytes, not every
    /// statement's fields.
    ids: Vec<u32>,
    next: u32,
    /// Buffers kept between executes, so that an execute allocates nothing for its values
    /// and its backend payload.
    params: Vec<RawParam>,
    values: Vec<ParamValue>,
    payload: Vec<u8>,
}

impl Statements {
    fn add(
        &mut self,
        sql: Arc<str>,
        route: Option<Arc<PreparedRoute>>,
        params: u16,
        sequence: Option<Arc<super::sequence::PreparedSequence>>,
    ) -> u32 {
        if self.next == 0 {
            self.next = FIRST_ID;
        }
        let id = self.next;
        self.next = self.next.wrapping_add(1).max(FIRST_ID);
        self.ids.push(id);
        self.list.push(ClientStmt {
            id,
            sql,
            route,
            params,
            types: ParamTypes::new(),
            long_data: false,
            read_route: None,
            sequence,
        });
        id
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut ClientStmt> {
        let i = self.ids.iter().position(|&s| s == id)?;
        self.list.get_mut(i)
    }

    /// Plans every statement again with `router` (a reload replaced the router: the old
    /// plans name its tables and rules).
    pub(crate) fn replan(
        &mut self,
        router: &shoal_router::plan::Router,
        current: Option<&str>,
        mode: shoal_router::sql::SqlMode,
        cs: shoal_router::charset::Charsets,
    ) {
        for s in &mut self.list {
            s.route = router.prepare_route(current, mode, cs, &s.sql);
        }
    }

    fn remove(&mut self, id: u32) {
        if let Some(i) = self.ids.iter().position(|&s| s == id) {
            self.ids.remove(i);
            self.list.remove(i);
        }
    }
}

impl Cursor {
    /// COM_STMT_PREPARE with the router.
    pub(super) async fn prepare_routed(&mut self, routing: &Routing, reply_seq: u8) -> Result<()> {
        let mode = self.sql_mode();
        // Read in the client's charset; each target's SQL is written back in it (`prepare_on`).
        let charsets = self.charsets().statements;
        let sql = {
            let p = self.client.packet_payload();
            crate::backend::charset::read_statement(charsets.client, &p[1..])?.into_owned()
        };
        // An INSERT without a column list into a sharded table is prepared with the table's
        // list spliced in (`column_list.rs`): each execute then plans like any INSERT with
        // one. The order is the table's at PREPARE.
        let sql = match super::sequence::is_insert(&sql)
            .then(|| {
                shoal_router::plan::column_list::column_list_fill(
                    &routing.topology,
                    self.logical.as_deref(),
                    &sql,
                )
            })
            .flatten()
        {
            Some(fill) => {
                let columns = self.column_order(routing, &fill).await?;
                fill.apply(&sql, &columns)
            }
            None => sql,
        };
        // An INSERT leaving out a shard key that has a sequence: prepared with a parameter for
        // each row's key, bound at each execute to the ids it takes (`sequence.rs`).
        let (sql, sequence) = match super::sequence::prepared_sequence(
            routing,
            self.logical.as_deref(),
            mode,
            &sql,
        ) {
            Some((filled, seq)) => (filled, Some(seq)),
            None => (sql, None),
        };
        // Every decision of a text statement's plan; routed with stand-in values where the
        // values are needed to route at all: only the metadata is read there, every EXECUTE
        // is planned with its own values.
        let mut toks = Vec::new();
        let PreparePlan { plan, params } = {
            let input = self.statement_input(routing, &sql, mode, charsets);
            routing.router.plan_prepare(&input, &mut toks)
        };
        let plan = match plan.step {
            PlanStep::Route(route) => route,
            PlanStep::BroadcastWrites(targets) | PlanStep::BroadcastDdl(targets) => {
                RoutePlan::Broadcast { targets }
            }
            PlanStep::ReadOnly(what) => return Err(read_only_refused(&self.user, &what)),
            // Unreadable to the tokenizer: MariaDB's error for it (see `unreadable`).
            PlanStep::Unreadable(e) => return Err(cold(self.unreadable(routing, &sql, &e)).await),
            PlanStep::Diagnostics(_)
            | PlanStep::InsertWithSequence(_)
            | PlanStep::InsertWithColumnList(_) => {
                return Err(unsupported("preparing this statement"));
            }
        };
        let mut local_columns = Vec::new();
        // The columns a scattered read's targets add for the merge (sort keys, AVG's parts):
        // dropped from what the execute returns, so not announced either (Connector/C checks
        // the execute's column count against the prepare's).
        let mut hidden = 0;
        let mut gathered = None;
        let target = match plan {
            RoutePlan::Single(t) => Some(t),
            RoutePlan::Scatter { mut targets, merge } if !targets.is_empty() => {
                if let Merge::Rows(spec) = &merge {
                    hidden = spec.hidden_columns;
                }
                Some(targets.swap_remove(0))
            }
            RoutePlan::Broadcast { mut targets } if !targets.is_empty() => {
                Some(targets.swap_remove(0))
            }
            RoutePlan::Any { sql } => Some(Target {
                datanode: self.any_datanode(routing),
                sql: sql.into(),
                params: Params::first(params as usize),
                qualified: false,
            }),
            // Transaction control and SET (sysbench prepares BEGIN and COMMIT): answered by
            // the session at each execute, no backend statement; no result columns.
            RoutePlan::Session(_) if params == 0 => None,
            RoutePlan::Session(_) => {
                return Err(unsupported("a session statement with parameters"));
            }
            // `SELECT DATABASE()` and other session functions: Shoal answers each execute.
            RoutePlan::Local(LocalAnswer::SessionValues { columns, .. }) if params == 0 => {
                local_columns = columns.iter().map(|(c, _)| string_column(c)).collect();
                None
            }
            // A SELECT over information_schema: Shoal answers each execute over the catalog.
            RoutePlan::Local(LocalAnswer::Catalog { sql, show }) => {
                local_columns = self.catalog_columns(routing, &sql, show).await?;
                None
            }
            // An UPDATE that may move rows: described by its in-place form on one shard.
            RoutePlan::KeyMove(km) if !km.sources.is_empty() => Some(Target {
                datanode: km.shards[km.sources[0].shard].0,
                sql: km.sources[0].update.as_str().into(),
                params: Params::first(params as usize),
                qualified: false,
            }),
            RoutePlan::Refuse(e) => return Err(self.refuse(&e)),
            // Shoal's administration statements: the privilege first, then MariaDB's refusal
            // of a statement it cannot prepare.
            RoutePlan::Local(LocalAnswer::Admin(_)) => {
                self.check_admin()?;
                return Err(crate::exec::admin::not_preparable());
            }
            RoutePlan::Local(_) => {
                return Err(unsupported(
                    "EXPLAIN ROUTE or session functions with parameters through a prepared \
                     statement (text protocol only)",
                ));
            }
            // Subqueries run first at each execute: described by the outer statement with
            // stand-ins (its columns do not depend on the values bound).
            RoutePlan::BindFirst(b) => {
                let current = self.logical.as_deref();
                match routing
                    .router
                    .route_in(current, mode, charsets, &b.trial(), &[])
                {
                    RoutePlan::Single(t) => Some(t),
                    RoutePlan::Scatter {
                        mut targets,
                        merge: Merge::Rows(spec),
                    } if !targets.is_empty() => {
                        hidden = spec.hidden_columns;
                        Some(targets.swap_remove(0))
                    }
                    _ => return Err(self.refuse(&bind_first_prepared())),
                }
            }
            // Gathered on one datanode at each execute: described by the statement prepared
            // over empty copies.
            RoutePlan::Gather(g) => {
                gathered = Some(self.gather_columns(routing, &g).await?);
                None
            }
            _ => return Err(unsupported("preparing this statement")),
        };
        let columns = match target {
            _ if gathered.is_some() => gathered.unwrap_or_default(),
            Some(target) => {
                let i = self.touch(routing, target.datanode).await?;
                // The statement stays prepared on the connection: executes routed here reuse it.
                let mut defs = prepare_on(&mut self.conns.held[i].conn, &target.sql, true)
                    .await?
                    .1;
                defs.truncate(defs.len().saturating_sub(hidden));
                routing.names.rename_all(target.datanode, &mut defs);
                defs
            }
            None => self.own_definitions(local_columns),
        };
        let prepared = routing
            .router
            .prepare_route(self.logical.as_deref(), mode, charsets, &sql);
        // The parameters the client binds (a sequence's keys are Shoal's).
        let params = sequence
            .as_ref()
            .map_or(params, |s| s.client_params(params));
        let id = self.statements.add(sql.into(), prepared, params, sequence);
        let deprecate_eof = self.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
        let mut seq = reply_seq;
        let mut ok = vec![0x00];
        ok.extend_from_slice(&id.to_le_bytes());
        ok.extend_from_slice(&(columns.len() as u16).to_le_bytes());
        ok.extend_from_slice(&params.to_le_bytes());
        ok.push(0);
        ok.extend_from_slice(&0u16.to_le_bytes());
        self.client.write_packet(&mut seq, &ok);
        let eof = eof_payload(self.status);
        if params > 0 {
            let def = string_column("?");
            for _ in 0..params {
                self.client.write_packet(&mut seq, &def);
            }
            if !deprecate_eof {
                self.client.write_packet(&mut seq, &eof);
            }
        }
        if !columns.is_empty() {
            for c in &columns {
                self.client.write_packet(&mut seq, c);
            }
            if !deprecate_eof {
                self.client.write_packet(&mut seq, &eof);
            }
        }
        self.flush_client().await
    }

    /// COM_STMT_EXECUTE with the router: routed by the bound values.
    pub(super) async fn execute_routed(&mut self, routing: &Routing, reply_seq: u8) -> Result<()> {
        let mut params = std::mem::take(&mut self.statements.params);
        let mut values = std::mem::take(&mut self.statements.values);
        let id = crate::wire::command::stmt_id(&self.client.packet_payload()).unwrap_or(0);
        // Moved out for the execute and put back after: a kept target is borrowed from it,
        // where a copy per execute would write the reference counts every session preparing
        // the statement shares.
        let prepared = self.statements.get_mut(id).and_then(|s| s.route.take());
        let result = self
            .execute_with(
                routing,
                id,
                prepared.as_deref(),
                &mut params,
                &mut values,
                reply_seq,
            )
            .await;
        self.statements.params = params;
        self.statements.values = values;
        if let Some(stmt) = self.statements.get_mut(id) {
            stmt.route = prepared;
        }
        result
    }

    /// [`Self::execute_routed`] of statement `id` (its prepared route `prepared`, moved out
    /// of it meanwhile) with the session's buffers for the bound values: decodes, plans and
    /// runs it. One async level for all three: each level is re-entered when the backend
    /// answers, a state to load from the session's future per level.
    async fn execute_with(
        &mut self,
        routing: &Routing,
        id: u32,
        prepared: Option<&PreparedRoute>,
        params: &mut Vec<RawParam>,
        values: &mut Vec<ParamValue>,
        reply_seq: u8,
    ) -> Result<()> {
        let mode = self.sql_mode();
        let charsets = self.charsets().statements;
        let cs = charsets.client;
        let xa_tracking = self.xa_tracking(routing);
        let payload = self.client.packet_payload();
        let Some(stmt) = self.statements.get_mut(id) else {
            return Err(Error::unknown_statement(id, "COM_STMT_EXECUTE"));
        };
        if stmt.long_data {
            stmt.long_data = false;
            return Err(unsupported("COM_STMT_SEND_LONG_DATA"));
        }
        let n = stmt.params as usize;
        let flags = decode_execute_into(&payload, n, &mut stmt.types, params)?;
        if flags != 0 {
            return Err(unsupported("cursors on prepared statements"));
        }
        if stmt.sequence.is_some() {
            return cold(self.execute_with_sequence(routing, id, params, reply_seq)).await;
        }
        values.clear();
        values.extend(params.iter().map(|p| literal_in(p, cs)));
        let (params, values) = (&params[..], &values[..]);
        let current = self.logical.as_deref();
        let cached_route = stmt.read_route;
        let planned = match prepared {
            Some(r) => routing
                .router
                .route_kept(r, current, mode, charsets, values),
            None => Routed::Plan(
                routing
                    .router
                    .route_in(current, mode, charsets, &stmt.sql, values),
            ),
        };
        self.mark.route = Some(match &planned {
            Routed::Kept(_) => crate::observe::RouteKind::Single,
            Routed::Plan(p) => crate::observe::RouteKind::of(p),
        });
        // The text is needed again only off the common path (a point read or write routed by
        // the statement's template): its refcount sits in memory this session last touched
        // long ago, a cache miss per execute with many sessions.
        let needs_text = matches!(
            planned,
            Routed::Plan(RoutePlan::Broadcast { .. } | RoutePlan::Session(_))
        ) || (cached_route.is_none()
            && (self.rt.backends.any_read_balancing() || xa_tracking));
        let sql = needs_text.then(|| stmt.sql.clone());
        let sql = sql.as_deref().unwrap_or("");
        let route = cached_route.or_else(|| self.read_route_of(routing, mode, sql));
        if route.is_some()
            && let Some(stmt) = self.statements.get_mut(id)
        {
            stmt.read_route = route;
        }
        self.apply_want(match &planned {
            Routed::Kept(_) => ReadWant::single(route),
            Routed::Plan(plan) => ReadWant::of(route, plan),
        });
        let req = Request::Execute { params };
        let plan = match planned {
            Routed::Kept(t) => return self.execute_on(routing, t, &req, reply_seq).await,
            Routed::Plan(plan) => plan,
        };
        match plan {
            RoutePlan::Single(t) => self.execute_on(routing, &t, &req, reply_seq).await,
            RoutePlan::Any { sql } => {
                let dn = self.any_datanode(routing);
                let t = Target {
                    datanode: dn,
                    sql: sql.into(),
                    params: Params::first(n),
                    qualified: false,
                };
                self.execute_on(routing, &t, &req, reply_seq).await
            }
            RoutePlan::Refuse(e) => Err(self.refuse(&e)),
            RoutePlan::Broadcast { targets } => {
                if shoal_router::sql::classify(sql).is_dml() {
                    cold(self.run_writes(routing, targets, false, &req, reply_seq)).await
                } else {
                    Err(unsupported("DDL through a prepared statement"))
                }
            }
            RoutePlan::Scatter {
                targets,
                merge: Merge::AffectedRows,
            } => cold(self.run_writes(routing, targets, true, &req, reply_seq)).await,
            RoutePlan::Scatter {
                targets,
                merge: Merge::Rows(spec),
            } => cold(self.run_scatter(routing, targets, &spec, &req, reply_seq)).await,
            RoutePlan::Session(kind) if n == 0 => {
                cold(self.session_statement(routing, kind, Some(sql), reply_seq)).await
            }
            RoutePlan::Local(LocalAnswer::SessionValues { columns, row }) if n == 0 => {
                cold(self.answer_session_values(&columns, row, Protocol::Binary, reply_seq)).await
            }
            RoutePlan::Local(LocalAnswer::Catalog { sql, show }) => {
                let filled = self.fill_params(routing, &sql, values)?;
                cold(self.answer_catalog(routing, &filled, show, Protocol::Binary, reply_seq)).await
            }
            RoutePlan::Local(_) | RoutePlan::Session(_) => {
                Err(unsupported("this statement through a prepared statement"))
            }
            RoutePlan::BindFirst(b) => {
                cold(self.run_bind_first(routing, &b, &req, reply_seq)).await
            }
            RoutePlan::Gather(g) => cold(self.run_gather(routing, &g, &req, reply_seq)).await,
            RoutePlan::KeyMove(km) if !km.has_params => {
                cold(self.run_key_move(routing, &km, reply_seq)).await
            }
            RoutePlan::KeyMove(km) => {
                Err(self.refuse(&shoal_router::RouterError::unsupported(format!(
                    "This version of Shoal doesn't yet support 'UPDATE of shard key column \
                     {}.{} moving rows to another shard with parameters (send it as text)'",
                    km.table, km.key
                ))))
            }
        }
    }

    /// Executes on one target; a read that fails on its server before anything reached the
    /// client is retried once on another server (see `run_read_on`).
    pub(super) async fn execute_on(
        &mut self,
        routing: &Routing,
        t: &Target,
        req: &Request<'_>,
        reply_seq: u8,
    ) -> Result<()> {
        let retry = self.read_may_retry();
        for attempt in 0..2 {
            // A BEGIN starting the transaction on this connection goes with the execute (the
            // first time: see `Relayed::BeginLost`).
            let i = self
                .touch_ahead(routing, t.datanode, Use::AnyDatabase, attempt == 0)
                .await?;
            let mut p = std::mem::take(&mut self.statements.payload);
            let out = match self.request_into(routing, i, t, req, &mut p).await {
                Ok(()) => {
                    let h = &mut self.conns.held[i];
                    h.write_begin();
                    h.conn.io.write_packet(&mut 0, &p);
                    let out = self
                        .relay_from(
                            i,
                            Expect::Results { binary: true },
                            reply_seq,
                            Some((&routing.names, t.datanode)),
                            retry && attempt == 0,
                        )
                        .await;
                    // The server sets the sent types up before anything can fail; should an
                    // error come from before that all the same, the next execute sends them.
                    if let Ok(Relayed::Done(o)) = &out
                        && o.error
                        && let Some(h) = self.conns.held.get_mut(i)
                    {
                        h.conn.stmts.forget_types();
                    }
                    out
                }
                Err(e) => {
                    if let Some(h) = self.conns.held.get_mut(i) {
                        h.cancel_begin();
                    }
                    Err(e)
                }
            };
            self.statements.payload = p;
            match out? {
                Relayed::BeginLost => continue,
                Relayed::Unsent { server } => self.conns.avoid = Some(server),
                Relayed::Done(_) | Relayed::Lost => return Ok(()),
            }
        }
        Ok(())
    }

    /// The bytes target `t` gets on held connection `i` for `req`: its SQL as a COM_QUERY, or
    /// an execute of a backend statement for it (prepared here on first use).
    pub(super) async fn request_payload(
        &mut self,
        routing: &Routing,
        i: usize,
        t: &Target,
        req: &Request<'_>,
    ) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.request_into(routing, i, t, req, &mut out).await?;
        Ok(out)
    }

    /// [`Self::request_payload`] into `out`.
    async fn request_into(
        &mut self,
        routing: &Routing,
        i: usize,
        t: &Target,
        req: &Request<'_>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let db = routing.topology.datanodes[t.datanode].database.as_str();
        request_on(&mut self.conns.held[i].conn, db, t, req, out).await
    }

    /// After execute payloads were built that will not all be sent: the servers may not hold
    /// the parameter types they carry, so the next executes send types again.
    pub(super) fn forget_unsent_types(&mut self) {
        for h in &mut self.conns.held {
            h.conn.stmts.forget_types();
        }
    }

    /// COM_STMT_CLOSE with the router. The backend statements stay in their connections'
    /// caches, for other sessions preparing the same text (evicted when a cache is full).
    pub(super) fn close_routed(&mut self, id: u32) {
        self.statements.remove(id);
    }
}

/// A prepared statement whose subqueries run first but whose outer statement cannot be
/// described on one datanode.
fn bind_first_prepared() -> shoal_router::RouterError {
    shoal_router::RouterError::unsupported(
        "This version of Shoal doesn't yet support 'a subquery across shards run first in a \
         prepared statement whose outer statement is planned this way'",
    )
}
