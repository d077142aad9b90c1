//! `shoal-bench mycat`, `scale`, `overhead` and `replicas` as a user runs them, at a tiny
//! scale: the whole pipeline (clusters, Shoal with a generated config, load, checks, report
//! files) in seconds. Shoal serves sharded tables, so every plan and count must run and pass
//! (exit status 0).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn shoal_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shoal-bench"))
        .args(args)
        .output()
        .expect("running shoal-bench")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

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

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(tag: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!(
        "shoal-bench-{tag}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

/// The one results directory a run wrote under `out`.
fn results_dir(out: &Path, prefix: &str) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with(prefix))
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn mycat_runs_plans_one_and_two_end_to_end() {
    let out = temp_dir("mycat");
    let bin = shoal_bin();
    let o = out.0.to_str().unwrap();
    let run = shoal_bench(&[
        "mycat",
        "--rows",
        "600",
        "--rounds",
        "3",
        "--concurrency",
        "3,5",
        "--plans",
        "1,2",
        "--selects",
        "30",
        "--noindex-selects",
        "10",
        "--select-threads",
        "3",
        "--shoal-bin",
        bin.to_str().unwrap(),
        "--out",
        o,
    ]);
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{stderr}\n{stdout}");
    let dir = results_dir(&out.0, "mycat-");
    let md = read(&dir, "report.md");
    assert_eq!(stdout.trim(), md.trim());

    // Plan 1 ran both paths at both concurrencies: 3 rounds each, 600 rows in all.
    let inserts = read(&dir, "inserts.csv");
    let mut lines = inserts.lines();
    assert_eq!(
        lines.next().unwrap(),
        "plan,path,concurrency,batch,round,rows_after,rows,statements,secs,qps"
    );
    let plan1: Vec<Vec<&str>> = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|c| c[0] == "1")
        .collect();
    assert_eq!(plan1.len(), 2 * 2 * 3, "{inserts}");
    for path in ["direct", "shoal"] {
        for conn in ["3", "5"] {
            let rows: u64 = plan1
                .iter()
                .filter(|c| c[1] == path && c[2] == conn)
                .map(|c| c[6].parse::<u64>().unwrap())
                .sum();
            assert_eq!(rows, 600, "{path} {conn}");
        }
    }
    let json: serde_json::Value = serde_json::from_str(&read(&dir, "results.json")).unwrap();
    let p1 = &json["plans"][0];
    for run in p1["inserts"].as_array().unwrap() {
        assert_eq!(run["placement"]["found_rows"], 600);
        assert_eq!(run["placement"]["misplaced"], 0);
    }
    for s in p1["selects"].as_array().unwrap() {
        assert_eq!(s["stat"]["wrong"], 0, "{s}");
    }
    assert!(md.contains("| 1 | shoal | 3 | 600 | 600 | 1 |"), "{md}");
    assert!(md.contains("the index created through Shoal is on 1 of 1"));
    assert_eq!(read(&dir, "selects.csv").lines().count(), 1 + 4 + 2);
    for svg in ["inserts.svg", "seed-inserts.svg"] {
        let s = read(&dir, svg);
        assert!(s.starts_with("<svg") && s.contains("plan 1"), "{svg}");
    }

    // Plan 2 shards the table over 7 datanodes: every row on the datanode its rule names, and
    // the index created through Shoal on every shard.
    assert!(md.contains("| 2 | shoal | 3 | 600 | 600 | 7 |"), "{md}");
    assert!(
        md.contains("the index created through Shoal is on 7 of 7"),
        "{md}"
    );
    assert!(json["plans"][1]["not_run"].is_null());
}

#[test]
fn scale_sweeps_two_datanode_counts() {
    let out = temp_dir("scale");
    let bin = shoal_bin();
    let run = shoal_bench(&[
        "scale",
        "--datanodes",
        "1,3",
        "--rows",
        "300",
        "--threads",
        "3",
        "--point-selects",
        "60",
        "--aggregates",
        "6",
        "--shoal-bin",
        bin.to_str().unwrap(),
        "--out",
        out.0.to_str().unwrap(),
    ]);
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{stderr}\n{stdout}");
    let dir = results_dir(&out.0, "scale-");
    let md = read(&dir, "report.md");
    let csv = read(&dir, "scale.csv");
    assert!(read(&dir, "cpu.svg").starts_with("<svg"));
    assert!(read(&dir, "qps.svg").starts_with("<svg"));
    // Four phases per count: insert, point_select, point_select_prepared, aggregate.
    assert_eq!(csv.lines().count(), 1 + 2 * 4, "{csv}");
    assert!(csv.contains("\n3,point_select_prepared,60,"), "{csv}");
    assert!(!md.contains("FAILED"), "{md}");
    for w in ["point_select", "point_select_prepared"] {
        assert!(
            md.contains(&format!(
                "`{w}`, Shoal CPU per statement at 3 datanodes / at 1"
            )),
            "{md}"
        );
    }
    assert!(md.contains("Files: `scale.csv`, `results.json`, `cpu.svg`, `qps.svg`."));
}

#[test]
fn overhead_names_an_unreachable_target_before_starting_anything() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = temp_dir("overhead");
    let target = format!("mine=127.0.0.1:{port}");
    let run = shoal_bench(&[
        "overhead",
        "--targets",
        "direct",
        "--target",
        &target,
        "--out",
        out.0.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(1));
    let stderr = text(&run.stderr);
    assert!(
        stderr.contains(&format!("target mine at 127.0.0.1:{port} is unreachable")),
        "{stderr}"
    );
    assert!(!stderr.contains("starting a MariaDB"), "{stderr}");
}

/// `replicas` end to end at a tiny scale: a primary with 2 replicas behind two Shoals, then an
/// idle Shoal over 4 servers. The round_robin runs' reads are counted on the replicas, the
/// primary_only runs' on the primary; the monitor's checks are counted on the servers. No
/// timing is asserted.
#[test]
fn replicas_spreads_reads_and_measures_the_idle_monitor() {
    let out = temp_dir("replicas");
    let bin = shoal_bin();
    let run = shoal_bench(&[
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
        "--shoal-bin",
        bin.to_str().unwrap(),
        "--out",
        out.0.to_str().unwrap(),
    ]);
    assert!(
        run.status.success(),
        "exit {:?}\n{}\n{}",
        run.status,
        text(&run.stdout),
        text(&run.stderr)
    );
    let dir = results_dir(&out.0, "replicas-");
    for f in ["samples.csv", "medians.csv", "reads.csv"] {
        read(&dir, f);
    }
    let json: serde_json::Value = serde_json::from_str(&read(&dir, "results.json")).unwrap();
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
    let md = read(&dir, "report.md");
    assert!(md.contains("round_robin QPS / primary_only QPS"), "{md}");
    assert!(md.contains("of one core"), "{md}");
}

/// `tpcc` end to end at 2 warehouses (the test-only size knobs: 1,000 items, 30 customers per
/// district; the standard size takes minutes to load here): the same load into one MariaDB and
/// through Shoal over 2 servers, a few seconds of the five transactions on each, and the 12
/// consistency conditions after. Every transaction must succeed (deadlocks retried) and every
/// condition hold on both sides; remote New-Order lines and Payments cross Shoal's datanodes.
/// Side `shoal-quick` (Shoal relaying the direct database) runs beside them, and the servers'
/// counters say what reached MariaDB: one COMMIT per committed transaction, direct and relayed.
#[test]
fn tpcc_loads_runs_and_checks_through_shoal() {
    let out = temp_dir("tpcc");
    let bin = shoal_bin();
    let run = shoal_bench(&[
        "tpcc",
        "--warehouses",
        "2",
        "--items",
        "1000",
        "--customers-per-district",
        "30",
        "--servers",
        "2",
        "--threads",
        "4",
        "--duration",
        "4",
        "--rounds",
        "1",
        "--buffer-pool",
        "64M",
        "--hops",
        "shoal-quick",
        "--shoal-bin",
        bin.to_str().unwrap(),
        "--out",
        out.0.to_str().unwrap(),
    ]);
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{stderr}\n{stdout}");
    let dir = results_dir(&out.0, "tpcc-");
    let md = read(&dir, "report.md");
    assert!(!md.contains("FAIL"), "{md}");
    assert!(read(&dir, "tpmc-threads.svg").starts_with("<svg"));
    let json: serde_json::Value = serde_json::from_str(&read(&dir, "results.json")).unwrap();
    let checks = json["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 2, "{json}");
    for c in checks {
        assert_eq!(c["ok"], true, "{c}");
    }
    let cells = json["cells"].as_array().unwrap();
    let shoal = cells
        .iter()
        .find(|c| c["side"] == "shoal-2")
        .unwrap_or_else(|| panic!("no shoal-2 cell: {json}"));
    assert_eq!(shoal["errors"], 0, "{shoal}");
    assert!(shoal["tpmc"].as_f64().unwrap() > 0.0, "{shoal}");
    assert!(
        shoal["proxy_cpu_us_per_txn"].as_f64().unwrap() > 0.0,
        "{shoal}"
    );
    for side in ["direct", "shoal-quick"] {
        let c = cells
            .iter()
            .find(|c| c["side"] == side)
            .unwrap_or_else(|| panic!("no {side} cell: {json}"));
        assert_eq!(c["errors"], 0, "{c}");
        // Every committed transaction's COMMIT reached the server once; a deadlock retried may
        // add one that failed.
        let count = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("{k}: {c}"));
        let committed = count("transactions") - count("rolled_back");
        let commits = c["server_counters"]["Com_commit"].as_u64().unwrap();
        assert!(committed > 0, "{c}");
        assert!(
            commits >= committed && commits <= committed + count("retries"),
            "{side}: {commits} COMMITs reached the server for {committed} committed: {c}"
        );
    }
    let loads = json["loads"].as_array().unwrap();
    assert_eq!(loads[0]["load"]["rows"], loads[1]["load"]["rows"], "{json}");
}
