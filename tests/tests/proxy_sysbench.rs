//! sysbench (the Debian package) `oltp_read_write` through Shoal at 32 threads, in text and
//! prepared-statement mode, must finish with zero errors. Issue 3 asks for 60 s runs; the test
//! defaults to 10 s per mode to keep the suite quick (`SHOAL_E2E_SYSBENCH_SECS=60` for the full
//! length).
//!
//! sysbench ignores deadlocks (1213), record-changed (1020) and lock-wait timeouts (1205) by
//! default. Deadlocks are the workload's own: 32 threads deleting and re-inserting rows in small
//! tables deadlock straight on the backend too, so only 1213 stays ignorable here; any other
//! error, lost connection or reconnect makes sysbench (and so the test) fail.

use std::process::Command;

use shoal_tests::{ShoalProcess, shared_backend, unique_name};

fn sysbench(args: &[String]) -> String {
    let out = Command::new("sysbench")
        .args(args)
        .output()
        .expect("run sysbench (apt-get install sysbench)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "sysbench {args:?} failed:\n{text}");
    text
}

fn counter(report: &str, label: &str) -> u64 {
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no {label} in the sysbench report:\n{report}"));
    line.trim_start()[label.len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unreadable {label} line: {line}"))
}

#[tokio::test]
async fn sysbench_oltp_read_write_at_32_threads_has_zero_errors_in_text_and_prepared_mode() {
    let secs: u32 = std::env::var("SHOAL_E2E_SYSBENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let backend = shared_backend();
    let db = unique_name("sbtest");
    backend.fresh_db(&db).await;
    let shoal = ShoalProcess::quick(&backend, &db, &[]);
    let conn_args = |port: u16| -> Vec<String> {
        vec![
            "oltp_read_write".into(),
            "--db-driver=mysql".into(),
            "--mysql-host=127.0.0.1".into(),
            format!("--mysql-port={port}"),
            format!("--mysql-user={}", backend.user),
            format!("--mysql-password={}", backend.password),
            format!("--mysql-db={db}"),
            "--mysql-ssl=off".into(),
            "--tables=4".into(),
            "--table-size=25000".into(),
        ]
    };
    let mut prepare = conn_args(backend.port);
    prepare.push("prepare".into());
    sysbench(&prepare);

    let run_args = |port: u16, mode: &str| -> Vec<String> {
        let mut run = conn_args(port);
        run.extend([
            "--threads=32".into(),
            format!("--time={secs}"),
            format!("--db-ps-mode={mode}"),
            "--mysql-ignore-errors=1213".into(),
            "--report-interval=0".into(),
            "run".into(),
        ]);
        run
    };
    for mode in ["disable", "auto"] {
        let report = sysbench(&run_args(shoal.port(), mode));
        let reconnects = counter(&report, "reconnects:");
        let queries = counter(&report, "queries:");
        assert!(
            queries > 0,
            "--db-ps-mode={mode}: no queries ran:\n{report}"
        );
        assert_eq!(
            reconnects,
            0,
            "--db-ps-mode={mode}: reconnects through shoal:\n{report}\nshoal log:\n{}",
            shoal.log()
        );
    }
}
