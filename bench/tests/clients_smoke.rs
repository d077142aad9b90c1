//! `shoal-bench clients` at toy sizes, as CI runs it: 8 and 60 clients over a pool of 4
//! connections per server, 2 s windows, a sysbench run of 8 threads direct and through Shoal.
//! It checks that the run passes (every answer right) and that its report holds every cell with
//! counts that mean something; timings are never asserted.
//!
//! The shoal binary: `$SHOAL_BIN`, else `target/debug/shoal` built first (as the e2e tests do).

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench crate has a parent dir")
        .to_path_buf()
}

fn shoal_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("SHOAL_BIN") {
        let bin = PathBuf::from(bin);
        assert!(bin.exists(), "SHOAL_BIN={} does not exist", bin.display());
        return bin;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .current_dir(workspace_root())
        .args(["build", "-p", "shoal-proxy", "--bin", "shoal"])
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo to build shoal");
    assert!(
        out.status.success(),
        "cargo build -p shoal-proxy --bin shoal failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("debug").join("shoal")
}

/// The CSV `name` of the one results directory under `out`, as header-keyed rows.
fn read_csv(dir: &Path, name: &str) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(dir.join(name)).expect("read csv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    lines
        .map(|l| {
            // The error columns may hold quoted commas; they come last, so the figures before
            // them split cleanly.
            let cells: Vec<&str> = l.split(',').collect();
            header
                .iter()
                .zip(cells)
                .map(|(h, c)| (h.to_string(), c.to_string()))
                .collect()
        })
        .collect()
}

fn number(row: &std::collections::HashMap<String, String>, column: &str) -> f64 {
    row.get(column)
        .unwrap_or_else(|| panic!("no column {column} in {row:?}"))
        .parse()
        .unwrap_or_else(|e| panic!("{column} is not a number in {row:?}: {e}"))
}

#[test]
fn clients_runs_at_toy_sizes_and_reports_every_cell() {
    let out = std::env::temp_dir().join(format!("shoal-clients-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = Command::new(env!("CARGO_BIN_EXE_shoal-bench"))
        .args(["clients", "--shoal-bin"])
        .arg(shoal_bin())
        .arg("--out")
        .arg(&out)
        .args([
            "--clients",
            "8,60",
            "--pools",
            "4",
            "--duration",
            "2",
            "--rows",
            "1000",
            "--idle-rate",
            "20",
            "--sysbench-threads",
            "8",
            "--sysbench-workloads",
            "oltp_point_select",
            "--sysbench-table-size",
            "1000",
            "--sysbench-tables",
            "2",
        ])
        .output()
        .expect("run shoal-bench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "shoal-bench clients failed ({}):\n{stderr}",
        run.status
    );
    let dirs: Vec<PathBuf> = std::fs::read_dir(&out)
        .expect("results directory")
        .map(|e| e.expect("dir entry").path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let dir = &dirs[0];
    for f in [
        "report.md",
        "cells.csv",
        "sysbench.csv",
        "results.json",
        "scatter-p99.svg",
    ] {
        assert!(dir.join(f).exists(), "{f} missing in {}", dir.display());
    }

    let cells = read_csv(dir, "cells.csv");
    let keys: Vec<(String, String)> = cells
        .iter()
        .map(|c| (c["pool"].clone(), c["clients"].clone()))
        .collect();
    assert_eq!(
        keys,
        [("4".into(), "8".into()), ("4".into(), "60".into())],
        "{cells:?}"
    );
    for c in &cells {
        let clients = number(c, "clients");
        assert_eq!(number(c, "active") + number(c, "idle"), clients, "{c:?}");
        for counted in ["points", "scatters", "logins", "alone_logins"] {
            assert!(number(c, counted) >= 1.0, "no {counted}: {c:?}");
        }
        for figure in [
            "point_p99_ms",
            "scatter_p99_ms",
            "login_p99_ms",
            "first_p99_ms",
            "alone_new_scatter_p99_ms",
        ] {
            assert!(number(c, figure) > 0.0, "{figure}: {c:?}");
        }
        assert!(
            number(c, "qps") > 0.0 && number(c, "shoal_rss_kib") > 0.0,
            "{c:?}"
        );
        assert!(number(c, "backend_conns_total") >= 1.0, "{c:?}");
        for zero in ["wrong", "setup_failed", "errors", "login_errors"] {
            assert_eq!(number(c, zero), 0.0, "{zero}: {c:?}");
        }
    }
    // 52 idle clients woke up at 20 statements a second for 2 s.
    assert!(number(&cells[1], "wakes") >= 1.0, "{:?}", cells[1]);
    assert_eq!(number(&cells[0], "idle"), 0.0);

    let sysbench = read_csv(dir, "sysbench.csv");
    let targets: Vec<&str> = sysbench.iter().map(|r| r["target"].as_str()).collect();
    assert_eq!(targets, ["direct", "shoal"], "{sysbench:?}");
    for r in &sysbench {
        assert!(
            number(r, "queries") > 0.0 && number(r, "qps") > 0.0,
            "{r:?}"
        );
    }
    assert!(number(&sysbench[1], "shoal_cpu_us_per_query") > 0.0);

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap())
            .expect("results.json parses");
    assert_eq!(json["experiment"], "clients");
    assert_eq!(json["cells"].as_array().map(Vec::len), Some(2));
    // SHOW SHOAL POOLS: one row per server, each naming its max.
    let pools = &json["cells"][1]["pools"];
    assert_eq!(pools.as_array().map(Vec::len), Some(2), "{pools}");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("| 4 | 60 |"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}
