//! `shoal-bench replicas` as a user runs it, at a tiny scale: both phases end to end (a primary
//! with 2 replicas behind two Shoals, then an idle Shoal over 4 servers), the report files
//! written, and the reads of the round_robin runs counted on the replicas while the
//! primary_only runs' stay on the primary. No timing is asserted.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `$SHOAL_BIN`, else the debug `shoal`, built by cargo first (a no-op when up to date).
fn shoal_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("SHOAL_BIN") {
        return PathBuf::from(bin);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(workspace_root())
        .args(["build", "-p", "shoal-proxy", "--bin", "shoal"])
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .expect("running cargo");
    assert!(status.success(), "building shoal failed");
    target.join("debug").join("shoal")
}

#[test]
fn replicas_spreads_reads_and_measures_the_idle_monitor() {
    let out = std::env::temp_dir().join(format!(
        "shoal-bench-replicas-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&out).unwrap();
    let bin = shoal_bin();
    let run = Command::new(env!("CARGO_BIN_EXE_shoal-bench"))
        .args([
            "replicas",
            "--quick",
            "--duration",
            "2",
            "--threads",
            "4",
            "--tables",
            "2",
            "--table-size",
            "1000",
            "--monitor-seconds",
            "3",
            "--monitor-datahosts",
            "2",
            "--monitor-replicas",
            "1",
        ])
        .arg("--shoal-bin")
        .arg(&bin)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("running shoal-bench");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "exit {:?}\n{stdout}\n{stderr}",
        run.status
    );
    let dirs: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let dir = &dirs[0];
    for f in ["report.md", "samples.csv", "medians.csv", "reads.csv"] {
        assert!(dir.join(f).is_file(), "{f} missing in {}", dir.display());
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let servers = json["split"]["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 3, "{json}");
    assert_eq!(servers[0]["role"], "primary");
    let reads = |mode: &str| -> Vec<u64> {
        json["split"]["reads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["balance"] == mode)
            .unwrap_or_else(|| panic!("no reads for {mode}: {json}"))["selects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect()
    };
    let (rr, po) = (reads("round_robin"), reads("primary_only"));
    // round_robin: the replicas ran the reads, in about equal parts; the primary only the
    // monitors' checks. primary_only: the other way round.
    let replica_reads = rr[1] + rr[2];
    assert!(
        replica_reads > 100 && rr[0] * 20 < replica_reads,
        "round_robin reads per server: {rr:?}"
    );
    assert!(
        rr[1] * 3 > rr[2] && rr[2] * 3 > rr[1],
        "round_robin is uneven: {rr:?}"
    );
    assert!(
        po[0] > 100 && (po[1] + po[2]) * 20 < po[0],
        "primary_only reads per server: {po:?}"
    );
    for m in json["split"]["medians"].as_array().unwrap() {
        assert!(m["qps"].as_f64().unwrap() > 0.0, "{m}");
        assert_eq!(m["errors"], 0, "{m}");
    }
    let monitor = &json["monitor"];
    assert_eq!(monitor["servers"], 4, "{json}");
    // The monitor ran: the servers counted its checks.
    assert!(monitor["checks"].as_u64().unwrap() >= 4, "{monitor}");
    assert!(monitor["core_percent"].as_f64().is_some(), "{monitor}");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("round_robin QPS / primary_only QPS"),
        "{report}"
    );
    assert!(report.contains("of one core"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}
