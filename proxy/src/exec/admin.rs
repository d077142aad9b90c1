//! Shoal's administration statements (`SHOW SHOAL ...`, see `shoal_router::sql::admin`),
//! answered the same way with the router and without it, for admins only (`users[].admin`;
//! `--admin` in quick mode): anyone else gets 1227, as MariaDB answers a missing privilege.

use shoal_router::sql::admin::AdminStatement;

use super::Cursor;
use crate::error::{Error, Result};
use crate::observe::digests::DigestStatement;
use crate::process::processlist;
use crate::wire::command::*;
use std::sync::atomic::Ordering;

/// `SHOW SHOAL VERSION`'s columns.
const VERSION_COLUMNS: [&str; 5] = [
    "version",
    "commit",
    "backend_version",
    "uptime",
    "config_file",
];

/// `SHOW SHOAL POOLS`' columns.
const POOL_COLUMNS: [&str; 13] = [
    "datahost",
    "role",
    "address",
    "idle",
    "busy",
    "waiting",
    "opened",
    "closed",
    "max",
    "health",
    "waits",
    "handed_off",
    "reclaimed",
];

/// The error of a user who is not an admin.
pub(crate) fn not_admin() -> Error {
    Error::reply(
        1227,
        b"42000",
        "Access denied; you need (at least one of) the SHOAL ADMIN privilege(s) for this operation",
    )
}

/// An administration statement sent through COM_STMT_PREPARE: refused (to an admin; others
/// get 1227 first), as MariaDB refuses statements it cannot prepare.
pub(crate) fn not_preparable() -> Error {
    Error::reply(
        1295,
        b"HY000",
        "This command is not supported in the prepared statement protocol yet",
    )
}

impl Cursor {
    /// Whether the session's user is an admin in the current configuration, not the
    /// session's snapshot: a reload that takes the flag away (or the user) takes it from open
    /// sessions at once.
    pub(crate) fn is_admin(&self) -> bool {
        self.shared.runtime.load().config.is_admin(&self.user)
    }

    /// 1227 unless the session's user is an admin.
    pub(crate) fn check_admin(&self) -> Result<()> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(not_admin())
        }
    }

    /// COM_STMT_PREPARE of an administration statement: 1227 for a non-admin, else 1295.
    /// `None`: the statement is not one.
    pub(crate) fn prepare_admin(&self) -> Option<Error> {
        let p = self.client.packet_payload();
        Some(match shoal_router::sql::admin::parse_admin(&p[1..])? {
            Ok(_) => self.check_admin().err().unwrap_or_else(not_preparable),
            Err(e) => crate::exec::refusal(&e),
        })
    }

    /// Runs one administration statement: the gate first, then the answer.
    pub(crate) async fn admin(&mut self, stmt: AdminStatement, reply_seq: u8) -> Result<()> {
        self.check_admin()?;
        match stmt {
            AdminStatement::Version => {
                let rows = vec![self.version_row()];
                self.send_rows(reply_seq, &VERSION_COLUMNS, rows).await
            }
            AdminStatement::Sessions => {
                let now = self.shared.ms(std::time::Instant::now());
                let rows = self
                    .shared
                    .sessions
                    .all()
                    .iter()
                    .map(|(id, h)| session_row(*id, h, now))
                    .collect();
                self.send_rows(reply_seq, &SESSION_COLUMNS, rows).await
            }
            AdminStatement::Pools => {
                let rows = self.pool_rows();
                self.send_rows(reply_seq, &POOL_COLUMNS, rows).await
            }
            AdminStatement::Backends => {
                let rows = self.backend_rows();
                self.send_rows(reply_seq, &crate::exec::BACKEND_COLUMNS, rows)
                    .await
            }
            AdminStatement::Xa => {
                let rows = self.shared.xa.rows();
                self.send_rows(reply_seq, &crate::xa::Xa::COLUMNS, rows)
                    .await
            }
            AdminStatement::Queries => self.answer_digests(DigestStatement::Show, reply_seq).await,
            AdminStatement::ResetQueries => {
                self.answer_digests(DigestStatement::Reset, reply_seq).await
            }
            AdminStatement::Config => self.answer_show_config(reply_seq).await,
            AdminStatement::ReloadConfig => self.answer_reload(reply_seq).await,
        }
    }

    fn version_row(&self) -> Vec<Option<String>> {
        let uptime = self.shared.started.elapsed().as_secs();
        vec![
            Some(env!("CARGO_PKG_VERSION").to_string()),
            option_env!("SHOAL_GIT_COMMIT").map(str::to_string),
            Some(String::from_utf8_lossy(&self.shared.server_version).into_owned()),
            Some(uptime.to_string()),
            self.rt.config.config_path.clone(),
        ]
    }

    /// `SHOW SHOAL POOLS`: one row per server; without the router, the one backend's pool.
    fn pool_rows(&self) -> Vec<Vec<Option<String>>> {
        // The current configuration's servers, whichever snapshot this session is on.
        let rt = self.shared.runtime.load();
        let b = &rt.backends;
        let row = |datahost: Option<String>,
                   role: &str,
                   address: String,
                   pool: &crate::backend::pool::BackendPool,
                   health: Option<&str>| {
            let s = pool.stats();
            vec![
                datahost,
                Some(role.to_string()),
                Some(address),
                Some(s.idle.to_string()),
                Some(s.busy.to_string()),
                Some(s.waiting.to_string()),
                Some(s.opened.to_string()),
                Some(s.closed.to_string()),
                Some(s.max.to_string()),
                health.map(str::to_string),
                Some(s.waits.to_string()),
                Some(s.handed_off.to_string()),
                Some(s.reclaimed.to_string()),
            ]
        };
        if b.servers.is_empty() {
            let pool = &rt.pool;
            return vec![row(None, "primary", pool.spec().addr(), pool, None)];
        }
        b.servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let health = if s.health.is_up() { "up" } else { "down" };
                row(
                    Some(b.hosts[s.datahost].name.clone()),
                    b.role(i),
                    s.address.clone(),
                    &s.pool,
                    Some(health),
                )
            })
            .collect()
    }

    /// Answers `SHOW SHOAL QUERIES` (the digests by total time) or `RESET SHOAL QUERIES`.
    pub(crate) async fn answer_digests(
        &mut self,
        what: DigestStatement,
        reply_seq: u8,
    ) -> Result<()> {
        let Some(d) = &self.shared.observe.digests else {
            return Err(Error::reply(
                1289,
                b"HY000",
                "query digests are off (they need server.admin_listen, and server.digests not false)",
            ));
        };
        match what {
            DigestStatement::Reset => {
                d.reset();
                self.send_ok(reply_seq).await
            }
            DigestStatement::Show => {
                let names: Vec<String> = match &self.rt.config.routing {
                    Some(r) => r
                        .topology
                        .datanodes
                        .iter()
                        .map(|d| d.name.clone())
                        .collect(),
                    None => vec!["backend".to_string()],
                };
                let rows = d.rows(&names);
                self.send_rows(reply_seq, &crate::observe::digests::Digests::COLUMNS, rows)
                    .await
            }
        }
    }

    /// `RELOAD SHOAL CONFIG`: the new version and what changed, or the reason nothing did.
    pub(crate) async fn answer_reload(&mut self, reply_seq: u8) -> Result<()> {
        let summary = crate::reload::reload(&*self.shared).await?;
        let mut rows = vec![vec![
            Some("version".to_string()),
            Some(summary.version.to_string()),
        ]];
        rows.extend(
            summary
                .changes
                .into_iter()
                .map(|c| vec![Some("change".to_string()), Some(c)]),
        );
        self.send_rows(reply_seq, &["item", "value"], rows).await
    }

    /// `SHOW SHOAL CONFIG`: the running configuration, passwords redacted.
    pub(crate) async fn answer_show_config(&mut self, reply_seq: u8) -> Result<()> {
        let rows = crate::reload::show_config(&*self.shared)
            .into_iter()
            .map(|(k, v)| vec![Some(k), Some(v)])
            .collect();
        self.send_rows(reply_seq, &["key", "value"], rows).await
    }
}

/// MySQL's processlist name of a command.
fn command_name(cmd: u8) -> &'static str {
    match cmd {
        processlist::COM_SLEEP => "Sleep",
        COM_INIT_DB => "Init DB",
        COM_QUERY => "Query",
        COM_FIELD_LIST => "Field List",
        COM_STATISTICS => "Statistics",
        COM_PING => "Ping",
        COM_CHANGE_USER => "Change user",
        COM_STMT_PREPARE => "Prepare",
        COM_STMT_EXECUTE => "Execute",
        COM_STMT_SEND_LONG_DATA => "Long Data",
        COM_STMT_CLOSE => "Close stmt",
        COM_STMT_RESET => "Reset stmt",
        COM_SET_OPTION => "Set option",
        COM_STMT_FETCH => "Fetch",
        COM_RESET_CONNECTION => "Reset connection",
        _ => "Unknown",
    }
}

/// `SHOW SHOAL SESSIONS`' columns.
pub(crate) const SESSION_COLUMNS: [&str; 9] = [
    "id", "user", "client", "schema", "command", "time", "state", "info", "backends",
];

/// One `SHOW SHOAL SESSIONS` row of session `id`; `now_ms` on the proxy's clock.
pub(crate) fn session_row(
    id: u32,
    h: &crate::process::sessions::SessionHandle,
    now_ms: u64,
) -> Vec<Option<String>> {
    let d = &h.doing;
    let cmd = d.command.load(Ordering::Acquire);
    let since = d.since_ms.load(Ordering::Relaxed);
    let (info, schema) = {
        let a = d.activity.lock().unwrap_or_else(|p| p.into_inner());
        let info = matches!(cmd, COM_QUERY | COM_STMT_PREPARE)
            .then(|| String::from_utf8_lossy(&a.info).into_owned());
        (info, a.schema.clone())
    };
    let state = if cmd != processlist::COM_SLEEP {
        "running"
    } else {
        match d.holds.load(Ordering::Relaxed) {
            processlist::LOCKED_TABLES => "locked tables",
            processlist::IN_TRANSACTION => "in transaction",
            _ => "idle",
        }
    };
    let user = h.user.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let backends = h
        .backends
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|b| format!("{} thread {}", b.pool.spec().addr(), b.thread))
        .collect::<Vec<_>>()
        .join(", ");
    vec![
        Some(id.to_string()),
        Some(user),
        Some(h.client.clone()),
        schema,
        Some(command_name(cmd).to_string()),
        Some((now_ms.saturating_sub(since) / 1000).to_string()),
        Some(state.to_string()),
        info,
        (!backends.is_empty()).then_some(backends),
    ]
}
