//! Running sysbench from tests: its report, and the counters read from it.

use std::process::Command;

/// Runs `sysbench args...` and returns its output (stdout then stderr); panics if it fails.
pub fn run(args: &[String]) -> String {
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

/// The number after `label` on the report's line that starts with it (e.g. `ignored errors:`).
pub fn counter(report: &str, label: &str) -> u64 {
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
