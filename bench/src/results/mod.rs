//! Where a command's results go: one directory per run (`<out>/<command>-<UTC timestamp>/`)
//! holding the markdown report, CSV and JSON of the raw figures, and SVG charts.

mod chart;
mod table;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use chart::{LineChart, Series};
pub use table::{csv_text, markdown_table};

use crate::error::BenchError;

/// A results directory, created empty.
#[derive(Debug, Clone)]
pub struct ResultsDir {
    path: PathBuf,
}

impl ResultsDir {
    /// `<out>/<command>-<timestamp>`; a suffix keeps two runs in the same second apart.
    pub fn create(out: &Path, command: &str) -> Result<ResultsDir, BenchError> {
        let stamp = utc_timestamp(SystemTime::now(), false);
        for n in 0..100 {
            let name = if n == 0 {
                format!("{command}-{stamp}")
            } else {
                format!("{command}-{stamp}-{n}")
            };
            let path = out.join(name);
            if path.exists() {
                continue;
            }
            std::fs::create_dir_all(&path)
                .map_err(BenchError::io(format!("create {}", path.display())))?;
            return Ok(ResultsDir { path });
        }
        Err(BenchError::Tool(format!(
            "no free results directory name under {}",
            out.display()
        )))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn write(&self, name: &str, contents: &str) -> Result<PathBuf, BenchError> {
        let file = self.path.join(name);
        std::fs::write(&file, contents)
            .map_err(BenchError::io(format!("write {}", file.display())))?;
        Ok(file)
    }

    pub fn write_csv(
        &self,
        name: &str,
        header: &[&str],
        rows: &[Vec<String>],
    ) -> Result<PathBuf, BenchError> {
        self.write(name, &csv_text(header, rows))
    }

    pub fn write_json(&self, name: &str, value: &serde_json::Value) -> Result<PathBuf, BenchError> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| BenchError::Tool(format!("encoding {name}: {e}")))?;
        self.write(name, &(text + "\n"))
    }

    pub fn write_chart(&self, name: &str, chart: &LineChart) -> Result<PathBuf, BenchError> {
        self.write(name, &chart.to_svg()?)
    }
}

/// `2026-11-30T03:04:05Z` (readable) or `20261130T030405Z` (for file names), without a date crate.
pub fn utc_timestamp(now: SystemTime, readable: bool) -> String {
    let secs = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    if readable {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
    } else {
        format!("{y:04}{m:02}{d:02}T{hh:02}{mm:02}{ss:02}Z")
    }
}

/// One line about the machine a report was made on: CPU model, cores, load at the start.
pub fn machine_line() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into());
    format!("{cpu}, {cores} CPUs, load average {load} at the start")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        let t = UNIX_EPOCH + Duration::from_secs(1_796_008_445); // 2026-11-30T03:14:05Z
        assert_eq!(utc_timestamp(t, true), "2026-11-30T03:14:05Z");
        assert_eq!(utc_timestamp(t, false), "20261130T031405Z");
        assert_eq!(utc_timestamp(UNIX_EPOCH, true), "1970-01-01T00:00:00Z");
    }
}
