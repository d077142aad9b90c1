//! Server-wide SHOW statements that dump and admin tools send (mydumper before every dump),
//! answered by Shoal itself rather than by one backend, whose answer would describe one
//! connection or one server of many:
//!
//! - `SHOW [FULL] PROCESSLIST`: the user's own Shoal sessions (every session for an admin),
//!   in MariaDB's columns.
//! - `SHOW MASTER STATUS` / `SHOW BINLOG STATUS` and `SHOW [ALL] SLAVE[S] STATUS` /
//!   `SHOW [ALL] REPLICA[S] STATUS`: no rows, as a server without binlog or replication answers
//!   (a logical schema has no binlog position or replication of its own: the datanodes' are
//!   per server, see SHOW SHOAL BACKENDS).

use shoal_router::sql::lex::Token;

use crate::error::Result;
use crate::exec::Cursor;

/// Which of the statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ServerShow {
    Processlist { full: bool },
    MasterStatus,
    SlaveStatus,
    AllSlavesStatus,
}

/// Reads the statement on its tokens (comments skipped); `None`: not one of them.
pub(super) fn parse(sql: &str, toks: &[Token]) -> Option<ServerShow> {
    let is = |i: usize, w: &str| toks.get(i).is_some_and(|t| t.is_kw(sql, w));
    if !is(0, "SHOW") {
        return None;
    }
    let (what, end) = if is(1, "PROCESSLIST") {
        (ServerShow::Processlist { full: false }, 2)
    } else if is(1, "FULL") && is(2, "PROCESSLIST") {
        (ServerShow::Processlist { full: true }, 3)
    } else if (is(1, "MASTER") || is(1, "BINLOG")) && is(2, "STATUS") {
        (ServerShow::MasterStatus, 3)
    } else if (is(1, "SLAVE") || is(1, "REPLICA")) && is(2, "STATUS") {
        (ServerShow::SlaveStatus, 3)
    } else if (is(1, "SLAVE") || is(1, "REPLICA"))
        && toks
            .get(2)
            .is_some_and(|t| t.kind == shoal_router::sql::lex::TokKind::Str)
        && is(3, "STATUS")
    {
        // A named connection: none exists.
        (ServerShow::SlaveStatus, 4)
    } else if is(1, "ALL") && (is(2, "SLAVES") || is(2, "REPLICAS")) && is(3, "STATUS") {
        (ServerShow::AllSlavesStatus, 4)
    } else {
        return None;
    };
    let end = if toks.get(end).is_some_and(|t| t.is_punct(sql, ";")) {
        end + 1
    } else {
        end
    };
    (end == toks.len()).then_some(what)
}

/// MariaDB's SHOW PROCESSLIST columns.
const PROCESSLIST: [&str; 9] = [
    "Id", "User", "Host", "db", "Command", "Time", "State", "Info", "Progress",
];

/// Most characters of Info without FULL, as MariaDB shows.
const INFO_SHORT: usize = 100;

const MASTER_STATUS: [&str; 4] = ["File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB"];

/// MariaDB 10.11's SHOW SLAVE STATUS columns.
const SLAVE_STATUS: [&str; 54] = [
    "Slave_IO_State",
    "Master_Host",
    "Master_User",
    "Master_Port",
    "Connect_Retry",
    "Master_Log_File",
    "Read_Master_Log_Pos",
    "Relay_Log_File",
    "Relay_Log_Pos",
    "Relay_Master_Log_File",
    "Slave_IO_Running",
    "Slave_SQL_Running",
    "Replicate_Do_DB",
    "Replicate_Ignore_DB",
    "Replicate_Do_Table",
    "Replicate_Ignore_Table",
    "Replicate_Wild_Do_Table",
    "Replicate_Wild_Ignore_Table",
    "Last_Errno",
    "Last_Error",
    "Skip_Counter",
    "Exec_Master_Log_Pos",
    "Relay_Log_Space",
    "Until_Condition",
    "Until_Log_File",
    "Until_Log_Pos",
    "Master_SSL_Allowed",
    "Master_SSL_CA_File",
    "Master_SSL_CA_Path",
    "Master_SSL_Cert",
    "Master_SSL_Cipher",
    "Master_SSL_Key",
    "Seconds_Behind_Master",
    "Master_SSL_Verify_Server_Cert",
    "Last_IO_Errno",
    "Last_IO_Error",
    "Last_SQL_Errno",
    "Last_SQL_Error",
    "Replicate_Ignore_Server_Ids",
    "Master_Server_Id",
    "Master_SSL_Crl",
    "Master_SSL_Crlpath",
    "Using_Gtid",
    "Gtid_IO_Pos",
    "Replicate_Do_Domain_Ids",
    "Replicate_Ignore_Domain_Ids",
    "Parallel_Mode",
    "SQL_Delay",
    "SQL_Remaining_Delay",
    "Slave_SQL_Running_State",
    "Slave_DDL_Groups",
    "Slave_Non_Transactional_Groups",
    "Slave_Transactional_Groups",
    "Replicate_Rewrite_DB",
];

/// SHOW ALL SLAVES STATUS: two columns before SLAVE STATUS's, these after.
const ALL_SLAVES_HEAD: [&str; 2] = ["Connection_name", "Slave_SQL_State"];
const ALL_SLAVES_TAIL: [&str; 6] = [
    "Retried_transactions",
    "Max_relay_log_size",
    "Executed_log_entries",
    "Slave_received_heartbeats",
    "Slave_heartbeat_period",
    "Gtid_Slave_Pos",
];

impl Cursor {
    pub(super) async fn answer_server_show(
        &mut self,
        what: ServerShow,
        reply_seq: u8,
    ) -> Result<()> {
        match what {
            ServerShow::Processlist { full } => {
                let now = self.shared.ms(std::time::Instant::now());
                let admin = self.is_admin();
                let mut rows: Vec<Vec<Option<String>>> = self
                    .shared
                    .sessions
                    .all()
                    .iter()
                    .map(|(id, h)| super::admin::session_row(*id, h, now))
                    // Without the PROCESS privilege MariaDB lists the user's own threads.
                    .filter(|r| admin || r[1].as_deref() == Some(self.user.as_str()))
                    .map(|r| mariadb_row(r, full))
                    .collect();
                rows.sort_by_key(|r| r[0].as_deref().and_then(|id| id.parse::<u64>().ok()));
                self.send_rows(reply_seq, &PROCESSLIST, rows).await
            }
            ServerShow::MasterStatus => self.send_rows(reply_seq, &MASTER_STATUS, Vec::new()).await,
            ServerShow::SlaveStatus => self.send_rows(reply_seq, &SLAVE_STATUS, Vec::new()).await,
            ServerShow::AllSlavesStatus => {
                let cols: Vec<&str> = ALL_SLAVES_HEAD
                    .iter()
                    .chain(&SLAVE_STATUS)
                    .chain(&ALL_SLAVES_TAIL)
                    .copied()
                    .collect();
                self.send_rows(reply_seq, &cols, Vec::new()).await
            }
        }
    }
}

/// A `SHOW SHOAL SESSIONS` row ([`super::admin::SESSION_COLUMNS`]) in SHOW PROCESSLIST's columns.
fn mariadb_row(r: Vec<Option<String>>, full: bool) -> Vec<Option<String>> {
    let mut r = r.into_iter();
    let mut next = || r.next().flatten();
    let (id, user, client, schema, command, time, state, info) = (
        next(),
        next(),
        next(),
        next(),
        next(),
        next(),
        next(),
        next(),
    );
    let state = match state.as_deref() {
        Some("idle") | None => Some(String::new()),
        Some("running") => Some("executing".to_string()),
        Some(s) => Some(s.to_string()),
    };
    let info = info.map(|i| match i.char_indices().nth(INFO_SHORT) {
        Some((at, _)) if !full => i[..at].to_string(),
        _ => i,
    });
    vec![
        id,
        user,
        client,
        schema,
        command,
        time,
        state,
        info,
        Some("0.000".to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_router::sql::lex::tokenize;

    fn read(sql: &str) -> Option<ServerShow> {
        parse(sql, &tokenize(sql).expect("tokens"))
    }

    #[test]
    fn reads_the_statements() {
        use ServerShow::*;
        for (sql, want) in [
            ("SHOW PROCESSLIST", Processlist { full: false }),
            ("show full processlist;", Processlist { full: true }),
            ("SHOW MASTER STATUS", MasterStatus),
            ("SHOW BINLOG STATUS", MasterStatus),
            ("SHOW SLAVE STATUS", SlaveStatus),
            ("SHOW REPLICA 'x' STATUS", SlaveStatus),
            ("SHOW ALL SLAVES STATUS", AllSlavesStatus),
            ("/* tool */ SHOW ALL REPLICAS STATUS", AllSlavesStatus),
        ] {
            assert_eq!(read(sql), Some(want), "{sql}");
        }
        for sql in [
            "SHOW STATUS",
            "SHOW SLAVE HOSTS",
            "SHOW MASTER LOGS",
            "SHOW PROCESSLIST x",
            "SHOW ALL SLAVES",
        ] {
            assert_eq!(read(sql), None, "{sql}");
        }
    }

    #[test]
    fn rows_in_mariadb_columns() {
        let long = "x".repeat(150);
        let r = |info: &str| {
            [
                "7",
                "app",
                "127.0.0.1:5",
                "shop",
                "Query",
                "3",
                "running",
                info,
                "dh0",
            ]
            .iter()
            .map(|s| Some(s.to_string()))
            .collect::<Vec<_>>()
        };
        let short = mariadb_row(r(&long), false);
        assert_eq!(short.len(), PROCESSLIST.len());
        assert_eq!(short[7].as_deref().map(str::len), Some(INFO_SHORT));
        assert_eq!(short[6].as_deref(), Some("executing"));
        assert_eq!(
            mariadb_row(r(&long), true)[7].as_deref(),
            Some(long.as_str())
        );
    }
}
