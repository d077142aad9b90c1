//! sysbench (the Debian package) `oltp_read_write` through Shoal at 32 threads, in text and
//! prepared-statement mode, must finish with zero errors. Issue 3 asks for 60 s runs; the test
//! defaults to 10 s per mode to keep the suite quick (`SHOAL_E2E_SYSBENCH_SECS=60` for the full
//! length).
//!
//! sysbench ignores deadlocks (1213), record-changed (1020) and lock-wait timeouts (1205) by
//! default. Deadlocks are the workload's own: 32 threads deleting and re-inserting rows in small
//! tables deadlock straight on the backend too, so only 1213 stays ignorable here; any other
//! error, lost connection or reconnect makes sysbench (and so the test) fail.

use shoal_tests::{ShoalProcess, shared_backend, unique_name};

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
    shoal_tests::sysbench::run(&prepare);

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
        let report = shoal_tests::sysbench::run(&run_args(shoal.port(), mode));
        let reconnects = shoal_tests::sysbench::counter(&report, "reconnects:");
        let queries = shoal_tests::sysbench::counter(&report, "queries:");
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
