//! What operators see of a running proxy: Prometheus metrics (`metrics`, served with `/health`
//! and `/ready` by `process::http`), query digests (`digests`, `SHOW SHOAL QUERIES`) and the
//! slow log (`slow_log`).
//!
//! Every client command ends at one observation point (the session's command loop calls
//! [`Observer::command`] with a [`Statement`]); what it costs there is a few relaxed atomic
//! increments, one digest map lookup when digests are on, and a line sent to the slow log's
//! writer when the statement was slow. The clock reads are the command loop's own (it reads
//! the time before and after each command for the idle timeout). State that describes the
//! live objects (pools, health, lag, XA outcomes, plan cache) is read at scrape time
//! (`process::scrape`). This module imports neither the session nor the process.

pub mod digests;
pub mod metrics;
pub mod slow_log;

use std::time::Duration;

use shoal_router::plan::RoutePlan;

use crate::config::ProxyConfig;

/// How a statement was routed (a label of the statement metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RouteKind {
    /// One datanode.
    Single = 0,
    /// Several datanodes, results merged (reads) or summed (writes).
    Scatter,
    /// Every datanode of a table (global tables, DDL).
    Broadcast,
    /// Answered by Shoal itself (SHOW SHOAL ..., catalog, session values, transaction
    /// control, SET).
    Local,
    /// The router refused it.
    Refused,
    /// Quick mode and single-datanode configs: relayed to the one backend, unplanned.
    Relay,
}

impl RouteKind {
    pub const ALL: [RouteKind; 6] = [
        RouteKind::Single,
        RouteKind::Scatter,
        RouteKind::Broadcast,
        RouteKind::Local,
        RouteKind::Refused,
        RouteKind::Relay,
    ];

    pub fn label(self) -> &'static str {
        match self {
            RouteKind::Single => "single",
            RouteKind::Scatter => "scatter",
            RouteKind::Broadcast => "broadcast",
            RouteKind::Local => "local",
            RouteKind::Refused => "refused",
            RouteKind::Relay => "relay",
        }
    }

    pub fn of(plan: &RoutePlan) -> RouteKind {
        match plan {
            RoutePlan::Single(_) | RoutePlan::Any { .. } => RouteKind::Single,
            RoutePlan::Scatter { .. }
            | RoutePlan::KeyMove(_)
            | RoutePlan::BindFirst(_)
            | RoutePlan::Gather(_) => RouteKind::Scatter,
            RoutePlan::Broadcast { .. } => RouteKind::Broadcast,
            RoutePlan::Local(_) | RoutePlan::Session(_) => RouteKind::Local,
            RoutePlan::Refuse(_) => RouteKind::Refused,
        }
    }
}

/// What kind of statement (a label of the statement metrics), read from its first word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum StatementKind {
    Select = 0,
    Insert,
    Update,
    Delete,
    Ddl,
    Transaction,
    Set,
    Show,
    Other,
}

impl StatementKind {
    pub const ALL: [StatementKind; 9] = [
        StatementKind::Select,
        StatementKind::Insert,
        StatementKind::Update,
        StatementKind::Delete,
        StatementKind::Ddl,
        StatementKind::Transaction,
        StatementKind::Set,
        StatementKind::Show,
        StatementKind::Other,
    ];

    pub fn label(self) -> &'static str {
        match self {
            StatementKind::Select => "select",
            StatementKind::Insert => "insert",
            StatementKind::Update => "update",
            StatementKind::Delete => "delete",
            StatementKind::Ddl => "ddl",
            StatementKind::Transaction => "transaction",
            StatementKind::Set => "set",
            StatementKind::Show => "show",
            StatementKind::Other => "other",
        }
    }

    /// Read from the statement's first word, without tokenizing (a comment in front makes it
    /// `other`: the hot path does not lex for a label).
    pub fn of_text(sql: &[u8]) -> StatementKind {
        let rest = sql.trim_ascii_start();
        let n = rest
            .iter()
            .position(|c| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let w = &rest[..n.min(16)];
        let is = |k: &[u8]| w.eq_ignore_ascii_case(k);
        if is(b"SELECT") || is(b"WITH") || is(b"VALUES") || is(b"TABLE") {
            StatementKind::Select
        } else if is(b"INSERT") || is(b"REPLACE") {
            StatementKind::Insert
        } else if is(b"UPDATE") {
            StatementKind::Update
        } else if is(b"DELETE") {
            StatementKind::Delete
        } else if is(b"CREATE") || is(b"ALTER") || is(b"DROP") || is(b"RENAME") || is(b"TRUNCATE") {
            StatementKind::Ddl
        } else if is(b"BEGIN")
            || is(b"START")
            || is(b"COMMIT")
            || is(b"ROLLBACK")
            || is(b"SAVEPOINT")
            || is(b"RELEASE")
            || is(b"XA")
        {
            StatementKind::Transaction
        } else if is(b"SET") {
            StatementKind::Set
        } else if is(b"SHOW") {
            StatementKind::Show
        } else {
            StatementKind::Other
        }
    }
}

/// What the session noted about the running command while it ran (reset before each one):
/// how it was routed, the rows relayed, the error sent, the digest of its shape.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mark {
    pub route: Option<RouteKind>,
    pub rows: u64,
    /// The code of the error sent to the client, if one was.
    pub error: Option<u16>,
    /// The query digest ([`shoal_router::sql::normalize::digest`]) when digests are on and
    /// the routed path computed it from its tokens.
    pub digest: Option<u64>,
}

/// One client command, as the command loop saw it end.
pub struct Statement<'a> {
    pub command: u8,
    /// The statement's text (COM_QUERY), or empty.
    pub text: &'a [u8],
    pub mark: Mark,
    pub schema: Option<&'a str>,
    pub user: &'a str,
    pub client: &'a str,
    /// Bit `i`: datanode `i` was touched (datanodes beyond 63 share bit 63).
    pub datanodes: u64,
    pub elapsed: Duration,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// The observation switches and their state, shared by all sessions.
pub struct Observer {
    pub metrics: Option<metrics::Metrics>,
    pub digests: Option<digests::Digests>,
    pub slow: Option<slow_log::SlowLog>,
}

impl Observer {
    /// `server.admin_listen` switches observation on: metrics are counted with it and
    /// `server.metrics` (default on), digests with it and `server.digests` (default on).
    /// Without it statements cost nothing here (the baseline `shoal-bench overhead` compares
    /// against). The slow log runs whenever `server.slow_log` is set.
    pub fn new(config: &ProxyConfig) -> std::io::Result<Observer> {
        let o = &config.observe;
        let metrics = (o.admin_listen.is_some() && o.metrics).then(metrics::Metrics::default);
        let digests = (o.admin_listen.is_some() && o.digests).then(digests::Digests::default);
        let slow = o
            .slow_log
            .as_ref()
            .map(slow_log::SlowLog::start)
            .transpose()?;
        Ok(Observer {
            metrics,
            digests,
            slow,
        })
    }

    /// Whether anything observes statements (the session skips its bookkeeping otherwise).
    pub fn any(&self) -> bool {
        self.metrics.is_some() || self.digests.is_some() || self.slow.is_some()
    }

    /// Whether the session should compute digests from its tokens.
    pub fn wants_digest(&self) -> bool {
        self.digests.is_some()
    }

    /// The one observation point: a client command ended.
    pub fn command(&self, s: &Statement<'_>, slots: Option<&metrics::Slots>) {
        let statement = matches!(
            s.command,
            crate::wire::command::COM_QUERY | crate::wire::command::COM_STMT_EXECUTE
        );
        if let (Some(m), Some(slots)) = (&self.metrics, slots) {
            m.command(s, statement, slots);
        }
        if !statement {
            return;
        }
        if let Some(d) = &self.digests
            && s.command == crate::wire::command::COM_QUERY
        {
            d.record(s);
        }
        if let Some(l) = &self.slow {
            l.record(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StatementKind;

    #[test]
    fn statement_kinds_by_first_word() {
        assert_eq!(StatementKind::of_text(b"  select 1"), StatementKind::Select);
        assert_eq!(
            StatementKind::of_text(b"REPLACE INTO t"),
            StatementKind::Insert
        );
        assert_eq!(
            StatementKind::of_text(b"create table t"),
            StatementKind::Ddl
        );
        assert_eq!(
            StatementKind::of_text(b"COMMIT"),
            StatementKind::Transaction
        );
        assert_eq!(
            StatementKind::of_text(b"/* c */ SELECT 1"),
            StatementKind::Other
        );
        assert_eq!(StatementKind::of_text(b""), StatementKind::Other);
    }
}
