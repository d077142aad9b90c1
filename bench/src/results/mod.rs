//! Where a command's results go: one directory per run (`<out>/<command>-<UTC timestamp>/`)
//! holding the markdown report, CSV and JSON of the raw figures, and SVG charts.

mod chart;
mod table;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use chart::{LineChart, Series};
pub use table::{Column, Csv, csv_text, fixed, markdown_table};

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

    pub fn write_json(&self, name: &str, value: &serde_json::Value) -> Result<PathBuf, BenchError> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| BenchError::Tool(format!("encoding {name}: {e}")))?;
        self.write(name, &(text + "\n"))
    }

    /// Rows built by hand (where [`table::Csv::of`]'s column lists do not fit, as for columns
    /// that depend on the run).
    pub fn write_csv(
        &self,
        name: &str,
        header: &[&str],
        rows: &[Vec<String>],
    ) -> Result<PathBuf, BenchError> {
        self.write(name, &table::csv_text(header, rows))
    }

    pub fn write_chart(&self, name: &str, chart: &LineChart) -> Result<PathBuf, BenchError> {
        self.write(name, &chart.to_svg()?)
    }
}

/// The options of every experiment that starts its own Shoal and writes a results directory.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The shoal binary (default: `target/release/shoal`, built first).
    #[arg(long)]
    pub shoal_bin: Option<PathBuf>,
    /// Results go to `<out>/<command>-<UTC timestamp>/`.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
}

/// When, where and how a run was made: what every report starts with and every results.json
/// carries.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// The subcommand, which also names the results directory (`mycat`, `scale`, ...).
    pub experiment: &'static str,
    pub started: String,
    pub machine: String,
    pub command: String,
}

impl RunInfo {
    /// Taken at the start of a run (the machine line carries the load average at that moment).
    pub fn capture(experiment: &'static str) -> RunInfo {
        RunInfo {
            experiment,
            started: utc_timestamp(SystemTime::now(), true),
            machine: machine_line(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
        }
    }

    /// The report's title, when and where it ran, and the command line.
    pub fn heading(&self, title: &str) -> String {
        format!(
            "# {title}\n\n{} on {}.\n\n`{}`\n",
            self.started, self.machine, self.command
        )
    }
}

/// A command's results: the markdown report, CSV files of the raw figures, the run's figures as
/// JSON, and SVG charts; [`Report::publish`] writes them all into one results directory.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub markdown: String,
    pub csv: Vec<Csv>,
    /// The experiment's own fields of results.json (an object); the run's [`RunInfo`] is added.
    pub json: serde_json::Value,
    pub charts: Vec<(String, LineChart)>,
}

impl Report {
    /// Renders every chart first (so that nothing is written when one fails), then creates
    /// `<out>/<experiment>-<timestamp>/` with report.md (ending in the list of files),
    /// the CSV files, results.json and the SVGs; prints the markdown on stdout and where the
    /// results went on stderr. Returns the directory.
    pub fn publish(self, out: &Path, info: &RunInfo) -> Result<PathBuf, BenchError> {
        let charts = self
            .charts
            .iter()
            .map(|(name, chart)| Ok((name.as_str(), chart.to_svg()?)))
            .collect::<Result<Vec<_>, BenchError>>()?;
        let mut json = serde_json::json!({
            "experiment": info.experiment,
            "started": info.started,
            "machine": info.machine,
            "command": info.command,
        });
        if let (Some(all), serde_json::Value::Object(own)) = (json.as_object_mut(), self.json) {
            all.extend(own);
        }
        let files: Vec<String> = self
            .csv
            .iter()
            .map(|c| c.name.clone())
            .chain(["results.json".to_string()])
            .chain(charts.iter().map(|(n, _)| n.to_string()))
            .map(|n| format!("`{n}`"))
            .collect();
        let md = format!("{}\nFiles: {}.\n", self.markdown, files.join(", "));
        // Created only now, so that a run that fails or is interrupted leaves no empty directory.
        let dir = ResultsDir::create(out, info.experiment)?;
        dir.write("report.md", &md)?;
        for c in &self.csv {
            dir.write(&c.name, &c.text)?;
        }
        dir.write_json("results.json", &json)?;
        for (name, svg) in &charts {
            dir.write(name, svg)?;
        }
        println!("{md}");
        eprintln!("{}: results in {}", info.experiment, dir.path().display());
        Ok(dir.path.clone())
    }
}

/// The `p` quantile (0..=1, nearest rank) of latencies in microseconds, in milliseconds; NaN
/// for none.
pub fn percentile_ms(v: &[u32], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let at = ((s.len() as f64 * p).ceil() as usize).clamp(1, s.len()) - 1;
    f64::from(s[at]) / 1000.0
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
