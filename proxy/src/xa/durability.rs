//! Whether the decision log's server keeps a committed decision through its own crash. The
//! decision row is the only record that a transaction committed: once a branch is committed
//! after it, losing the row (the server acknowledged the insert but had not flushed it when it
//! crashed) makes recovery roll back the other branches ("presumed abort"), half a
//! transaction. A single server keeps it with `innodb_flush_log_at_trx_commit = 1` and, when
//! the binary log is on, `sync_binlog = 1`; semi-synchronous replication keeps it on a
//! replica before the insert returns instead. `shoal --check` and the start say when neither
//! holds.

use std::collections::HashMap;
use std::time::Duration;

use crate::backend::conn::BackendConn;
use crate::config::BackendSpec;
use crate::error::Result;

/// How long asking the log server may take (connecting included).
pub const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// The settings read, by lower-case name.
const QUERY: &str = "SHOW GLOBAL VARIABLES WHERE Variable_name IN \
     ('innodb_flush_log_at_trx_commit', 'sync_binlog', 'log_bin', \
     'rpl_semi_sync_master_enabled', 'rpl_semi_sync_source_enabled')";

/// What of the settings `vars` can lose a committed decision (empty: nothing).
pub fn assess(vars: &HashMap<String, String>) -> Vec<String> {
    let on = |k: &str| {
        vars.get(k)
            .is_some_and(|v| v.eq_ignore_ascii_case("ON") || v == "1")
    };
    if on("rpl_semi_sync_master_enabled") || on("rpl_semi_sync_source_enabled") {
        return Vec::new();
    }
    let mut out = Vec::new();
    let flush = vars
        .get("innodb_flush_log_at_trx_commit")
        .map_or("?", String::as_str);
    if flush != "1" {
        out.push(format!(
            "innodb_flush_log_at_trx_commit = {flush}: a crash of the server can lose the last \
             second of commit decisions (set it to 1)"
        ));
    }
    if on("log_bin") {
        let sync = vars.get("sync_binlog").map_or("?", String::as_str);
        if sync != "1" {
            out.push(format!(
                "sync_binlog = {sync} with the binary log on: a crash can lose committed \
                 decisions from the binary log, and InnoDB rolls back what the binary log lacks \
                 (set it to 1)"
            ));
        }
    }
    out
}

/// Asks the log server `spec` for its settings and says what of them can lose a decision.
pub async fn check(spec: &BackendSpec) -> Result<Vec<String>> {
    let ask = async {
        let wire = crate::backend::pool::typical_client_wire();
        let mut c = BackendConn::connect(spec, wire, None, false, ASK_TIMEOUT).await?;
        let rows = c.query_rows(QUERY).await?;
        let vars: HashMap<String, String> = rows
            .into_iter()
            .filter_map(|r| {
                let k = String::from_utf8_lossy(r.first()?.as_deref()?).to_ascii_lowercase();
                let v = String::from_utf8_lossy(r.get(1)?.as_deref()?).into_owned();
                Some((k, v))
            })
            .collect();
        Ok(assess(&vars))
    };
    match crate::timers::timeout(ASK_TIMEOUT, ask).await {
        Ok(r) => r,
        Err(_) => Err(crate::error::Error::backend_unreachable(
            &spec.addr(),
            "no answer in time",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn durable_single_servers_and_semi_sync_pass() {
        let durable = [
            ("innodb_flush_log_at_trx_commit", "1"),
            ("sync_binlog", "1"),
            ("log_bin", "ON"),
        ];
        assert!(assess(&vars(&durable)).is_empty());
        let no_binlog = [
            ("innodb_flush_log_at_trx_commit", "1"),
            ("sync_binlog", "0"),
            ("log_bin", "OFF"),
        ];
        assert!(assess(&vars(&no_binlog)).is_empty());
        let semi_sync = [
            ("innodb_flush_log_at_trx_commit", "2"),
            ("sync_binlog", "0"),
            ("log_bin", "ON"),
            ("rpl_semi_sync_master_enabled", "ON"),
        ];
        assert!(assess(&vars(&semi_sync)).is_empty());
    }

    #[test]
    fn lazy_flushing_without_semi_sync_is_named() {
        let lazy = [
            ("innodb_flush_log_at_trx_commit", "2"),
            ("sync_binlog", "0"),
            ("log_bin", "ON"),
            ("rpl_semi_sync_master_enabled", "OFF"),
        ];
        let w = assess(&vars(&lazy));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].starts_with("innodb_flush_log_at_trx_commit = 2"));
        assert!(w[1].starts_with("sync_binlog = 0"));
    }
}
