//! A CPU quota per process with Linux cgroups (v2 `cpu.max`, or v1 `cpu.cfs_quota_us`), so that
//! servers sharing one small machine behave like servers with CPUs of their own: with a quota,
//! a read moved from the primary to a replica moves to capacity the primary could not use.
//! Needs root (or a delegated cgroup); the groups are removed when the limit is dropped.

use std::path::{Path, PathBuf};

use crate::BenchError;

const PERIOD_US: u64 = 100_000;

/// The cgroups made for the limited processes; dropping it moves them back and removes them.
pub struct CpuLimit {
    groups: Vec<PathBuf>,
    root: PathBuf,
}

impl CpuLimit {
    /// Puts each of `pids` in a cgroup of its own capped at `cores` CPUs (0.5 = half a core).
    pub fn apply(pids: &[u32], cores: f64) -> Result<CpuLimit, BenchError> {
        if !(cores > 0.0 && cores.is_finite()) {
            return Err(BenchError::Tool(format!(
                "a CPU limit must be a positive number of cores, not {cores}"
            )));
        }
        let quota = ((cores * PERIOD_US as f64).round() as u64).max(1_000);
        let (root, v2) = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            (PathBuf::from("/sys/fs/cgroup"), true)
        } else {
            (PathBuf::from("/sys/fs/cgroup/cpu"), false)
        };
        let unavailable = |what: String, e: std::io::Error| {
            BenchError::Tool(format!(
                "--server-cpus needs a writable cgroup cpu controller under {} (run as root): \
                 {what}: {e}",
                root.display()
            ))
        };
        if v2 {
            std::fs::write(root.join("cgroup.subtree_control"), "+cpu")
                .map_err(|e| unavailable("enable the cpu controller".into(), e))?;
        }
        let mut limit = CpuLimit {
            groups: Vec::new(),
            root: root.clone(),
        };
        for &pid in pids {
            let dir = root.join(format!("shoal-bench-{}-{pid}", std::process::id()));
            std::fs::create_dir_all(&dir)
                .map_err(|e| unavailable(format!("create {}", dir.display()), e))?;
            limit.groups.push(dir.clone());
            let set = |file: &str, value: String| {
                std::fs::write(dir.join(file), value)
                    .map_err(|e| unavailable(format!("write {}/{file}", dir.display()), e))
            };
            if v2 {
                set("cpu.max", format!("{quota} {PERIOD_US}"))?;
            } else {
                set("cpu.cfs_period_us", PERIOD_US.to_string())?;
                set("cpu.cfs_quota_us", quota.to_string())?;
            }
            set("cgroup.procs", pid.to_string())?;
        }
        Ok(limit)
    }
}

impl Drop for CpuLimit {
    fn drop(&mut self) {
        for dir in &self.groups {
            // Processes still alive go back to the root group; then the empty group can go.
            if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                for pid in procs.lines() {
                    let _ = std::fs::write(self.root.join("cgroup.procs"), pid);
                }
            }
            let _ = std::fs::remove_dir(dir);
        }
    }
}
