//! Running `sysbench` (the Debian package, 1.0.x) and reading its report.

use std::process::Command;

use super::OverheadError;

/// Where sysbench connects and what it loads.
#[derive(Debug, Clone)]
pub struct SysbenchTarget {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub db: String,
    /// Connect with TLS (`--mysql-ssl=on`), run in this directory: sysbench 1.0 reads
    /// `cacert.pem`, `client-cert.pem` and `client-key.pem` from its working directory.
    pub ssl: Option<std::path::PathBuf>,
}

/// The figures of one `sysbench run` that the benchmark reports.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunStats {
    /// Statements executed (sysbench's "queries" total).
    pub queries: u64,
    pub qps: f64,
    /// Average and 95th-percentile latency of one sysbench event, in milliseconds. An event is
    /// one query for `oltp_point_select` and one transaction (18 queries) for `oltp_read_write`.
    pub avg_ms: f64,
    pub p95_ms: f64,
    /// sysbench's "ignored errors" (deadlocks and the like it retried) plus reconnects.
    pub errors: u64,
}

/// Workloads of ours beside sysbench's own scripts: name and Lua source. They measure what
/// sysbench's scripts cannot show on a sharded target: scattered reads and their merge.
const SCRIPTS: &[(&str, &str)] = &[
    (
        "shoal_scatter_count",
        include_str!("../../lua/shoal_scatter_count.lua"),
    ),
    (
        "shoal_scatter_top10",
        include_str!("../../lua/shoal_scatter_top10.lua"),
    ),
];

/// The workload as sysbench takes it: one of its own script names, or the path of one of ours,
/// written out first (sysbench finds its `oltp_common` module from any script's location).
fn workload_arg(workload: &str) -> Result<String, OverheadError> {
    let Some((name, source)) = SCRIPTS.iter().find(|(name, _)| *name == workload) else {
        return Ok(workload.to_string());
    };
    let dir = std::env::temp_dir().join(format!("shoal-bench-lua-{}", std::process::id()));
    let path = dir.join(format!("{name}.lua"));
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&path, source))
        .map_err(|e| OverheadError::Tool(format!("cannot write {}: {e}", path.display())))?;
    Ok(path.display().to_string())
}

fn base_args(target: &SysbenchTarget, tables: u32, table_size: u32) -> Vec<String> {
    vec![
        "--db-driver=mysql".into(),
        format!("--mysql-host={}", target.host),
        format!("--mysql-port={}", target.port),
        format!("--mysql-user={}", target.user),
        format!("--mysql-password={}", target.password),
        format!("--mysql-db={}", target.db),
        format!(
            "--mysql-ssl={}",
            if target.ssl.is_some() { "on" } else { "off" }
        ),
        format!("--tables={tables}"),
        format!("--table-size={table_size}"),
    ]
}

/// `sysbench oltp_read_write prepare`: creates and fills the tables (straight on the backend).
pub fn prepare(target: &SysbenchTarget, tables: u32, table_size: u32) -> Result<(), OverheadError> {
    let mut args = vec!["oltp_read_write".to_string()];
    args.extend(base_args(target, tables, table_size));
    args.push(format!("--threads={}", tables.min(4)));
    args.push("prepare".into());
    let out = Command::new("sysbench").args(&args).output().map_err(|e| {
        OverheadError::Tool(format!(
            "cannot run sysbench ({e}); install it with `apt-get install sysbench`"
        ))
    })?;
    if !out.status.success() {
        return Err(OverheadError::Tool(format!(
            "sysbench prepare failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// What one `sysbench run` loads: the workload, its concurrency and length, and the tables it
/// reads (as prepared).
#[derive(Debug, Clone, Copy)]
pub struct RunSpec<'a> {
    pub workload: &'a str,
    pub threads: u32,
    pub seconds: u32,
    pub tables: u32,
    pub table_size: u32,
    /// sysbench `--db-ps-mode`: `auto` (prepared statements, its default) or `disable` (text).
    pub ps_mode: &'a str,
}

/// A run's figures with the event rate sysbench reported beside them: a paced run is held to
/// its event rate, which is not its query rate for workloads of several queries per event.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Run {
    pub stats: RunStats,
    /// Events per second: sysbench's "transactions" line (one query for `oltp_point_select`,
    /// one transaction for `oltp_read_write`, 20 queries as sysbench counts them).
    pub events_per_s: f64,
}

/// One `sysbench <workload> run` of `seconds` at `threads`: closed loop (every thread as fast
/// as it can) or, with `rate`, paced at that many events per second in all (`--rate`); `extra`
/// are more sysbench options (e.g. `--skip-trx=on`).
pub fn run(
    target: &SysbenchTarget,
    spec: &RunSpec,
    rate: Option<u32>,
    extra: &[&str],
) -> Result<Run, OverheadError> {
    let report = execute(target, spec, rate, extra).map_err(|e| match e {
        OverheadError::Tool(msg) if queue_filled(&msg) => fell_behind(rate, &msg),
        other => other,
    })?;
    // sysbench 1.0 exits 1 when its queue fills (seen with 1.0.20), but its code only ends the
    // workers there: a report of the shorter run must not pass for one that held the rate.
    if queue_filled(&report) {
        return Err(fell_behind(rate, &report));
    }
    parse_run(&report)
        .ok_or_else(|| OverheadError::Tool(format!("unreadable sysbench report:\n{report}")))
}

/// Whether sysbench's output says its workers fell so far behind `--rate` that the queue of
/// events it generates filled up.
fn queue_filled(output: &str) -> bool {
    output.contains("The event queue is full")
}

fn fell_behind(rate: Option<u32>, output: &str) -> OverheadError {
    OverheadError::Tool(format!(
        "the target fell behind --rate={}: sysbench's event queue filled: {output}",
        rate.unwrap_or_default()
    ))
}

/// Runs sysbench and returns its report (stdout; its log lines go there too), failing when it
/// exits with an error.
fn execute(
    target: &SysbenchTarget,
    spec: &RunSpec,
    rate: Option<u32>,
    extra: &[&str],
) -> Result<String, OverheadError> {
    let RunSpec {
        workload,
        threads,
        seconds,
        tables,
        table_size,
        ps_mode,
    } = *spec;
    let mut args = vec![workload_arg(workload)?];
    args.extend(base_args(target, tables, table_size));
    args.extend(rate.map(|r| format!("--rate={r}")));
    args.extend(extra.iter().map(|a| a.to_string()));
    args.extend([
        format!("--threads={threads}"),
        format!("--time={seconds}"),
        "--report-interval=0".into(),
        "--percentile=95".into(),
        format!("--db-ps-mode={ps_mode}"),
        "--rand-type=uniform".into(),
        "run".into(),
    ]);
    let mut cmd = Command::new("sysbench");
    if let Some(dir) = &target.ssl {
        cmd.current_dir(dir);
    }
    let out = cmd
        .args(&args)
        .output()
        .map_err(|e| OverheadError::Tool(format!("cannot run sysbench: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(OverheadError::Tool(format!(
            "sysbench {workload} at {threads} threads against port {} failed: {stdout}{}",
            target.port,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(stdout)
}

/// The first number after `label` on the line that starts with it (after indentation).
fn field(report: &str, label: &str) -> Option<f64> {
    let line = report.lines().find(|l| l.trim_start().starts_with(label))?;
    let rest = &line.trim_start()[label.len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// The "(N per sec.)" figure on the line that starts with `label`.
fn per_sec(report: &str, label: &str) -> Option<f64> {
    let line = report.lines().find(|l| l.trim_start().starts_with(label))?;
    let open = line.find('(')?;
    line[open + 1..].split_whitespace().next()?.parse().ok()
}

pub fn parse_report(report: &str) -> Option<RunStats> {
    Some(RunStats {
        queries: field(report, "queries:")? as u64,
        qps: per_sec(report, "queries:")?,
        avg_ms: field(report, "avg:")?,
        p95_ms: field(report, "95th percentile:")?,
        errors: (field(report, "ignored errors:")? + field(report, "reconnects:")?) as u64,
    })
}

/// [`parse_report`] with the event rate.
pub fn parse_run(report: &str) -> Option<Run> {
    Some(Run {
        stats: parse_report(report)?,
        events_per_s: per_sec(report, "transactions:")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

SQL statistics:
    queries performed:
        read:                            140000
        write:                           40000
        other:                           20000
        total:                           200000
    transactions:                        10000  (999.50 per sec.)
    queries:                             200000 (19990.03 per sec.)
    ignored errors:                      3      (0.30 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          10.0048s
    total number of events:              10000

Latency (ms):
         min:                                    0.55
         avg:                                    1.00
         max:                                   25.26
         95th percentile:                        1.61
         sum:                                 9988.52
";

    #[test]
    fn reads_the_figures_of_a_sysbench_report() {
        let stats = parse_report(REPORT).unwrap();
        assert_eq!(stats.queries, 200000);
        assert_eq!(stats.qps, 19990.03);
        assert_eq!(stats.avg_ms, 1.00);
        assert_eq!(stats.p95_ms, 1.61);
        assert_eq!(stats.errors, 3);
        let run = parse_run(REPORT).unwrap();
        assert_eq!((run.stats, run.events_per_s), (stats, 999.50));
    }

    #[test]
    fn sees_the_event_queue_fill() {
        // sysbench 1.0.20's output when --rate outruns the workers.
        let out = "Threads started!\n\nFATAL: The event queue is full. This means the worker \
                   threads are unable to keep up with the specified event generation rate\n";
        assert!(queue_filled(out));
        assert!(!queue_filled(REPORT));
        let OverheadError::Tool(msg) = fell_behind(Some(14000), out) else {
            panic!("not a tool error")
        };
        assert!(
            msg.starts_with("the target fell behind --rate=14000"),
            "{msg}"
        );
    }

    #[test]
    fn refuses_a_truncated_report() {
        assert_eq!(parse_report("FATAL: error 2013: Lost connection"), None);
    }
}
