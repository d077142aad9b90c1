//! Medians over interleaved rounds, the markdown table, and the three target ratios of issue 3.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::sysbench::RunStats;

/// How sysbench offered the load: closed loop (every thread as fast as it can) or paced at a
/// fixed event rate. The two never share a cell: CPU per query depends on the QPS it is taken at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Load {
    Closed,
    Paced,
}

impl Load {
    pub fn name(self) -> &'static str {
        match self {
            Load::Closed => "closed",
            Load::Paced => "paced",
        }
    }
}

/// One sysbench run against one target, with the CPU the processes used during it.
#[derive(Debug, Clone)]
pub struct Sample {
    pub workload: String,
    pub threads: u32,
    pub target: String,
    pub stats: RunStats,
    /// Events per second sysbench reported (queries for oltp_point_select, transactions for
    /// oltp_read_write): what a paced run is held to.
    pub events_per_s: f64,
    /// The `--rate` the run was paced at, in events per second; none in closed loop.
    pub rate: Option<u32>,
    /// CPU seconds of the proxy process during the run (none for `direct`).
    pub proxy_cpu_s: Option<f64>,
    /// The part of `proxy_cpu_s` spent in user space (the proxy's own code; the rest is the
    /// kernel's, which depends more on how many events each wakeup finds).
    pub proxy_user_s: Option<f64>,
    /// CPU seconds of mariadbd during the run.
    pub backend_cpu_s: f64,
}

impl Sample {
    pub fn load(&self) -> Load {
        if self.rate.is_some() {
            Load::Paced
        } else {
            Load::Closed
        }
    }
}

/// The rate of a paced cell and whether every run of it kept that rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// Events per second (sysbench `--rate`).
    pub rate: u32,
    pub kept: bool,
}

/// Medians of one (load, workload, threads, target) cell.
#[derive(Debug, Clone, Default)]
pub struct Cell {
    pub runs: usize,
    pub qps: f64,
    /// The lowest and highest QPS of its runs: how far one target's rounds spread, against
    /// which a ratio of medians is read.
    pub qps_range: (f64, f64),
    pub events_per_s: f64,
    pub avg_ms: f64,
    pub p95_ms: f64,
    pub proxy_cpu_us_per_query: Option<f64>,
    pub proxy_user_us_per_query: Option<f64>,
    pub backend_cpu_us_per_query: f64,
    pub errors: u64,
    /// Paced cells only.
    pub pace: Option<Pace>,
}

pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// A cell's key. `load` comes first so that closed-loop cells sort before paced ones.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub load: Load,
    pub workload: String,
    pub threads: u32,
    pub target: String,
}

impl Key {
    pub fn new(load: Load, workload: &str, threads: u32, target: &str) -> Key {
        Key {
            load,
            workload: workload.to_string(),
            threads,
            target: target.to_string(),
        }
    }
}

/// A paced run keeps the pace when sysbench completed at least this share of the events it was
/// offered: below it, the target was the bottleneck and its figures are closed-loop ones again.
pub const PACE_KEPT: f64 = 0.95;

pub fn kept_pace(events_per_s: f64, rate: u32) -> bool {
    events_per_s >= PACE_KEPT * f64::from(rate)
}

pub fn cells(samples: &[Sample]) -> BTreeMap<Key, Cell> {
    let mut groups: BTreeMap<Key, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        groups
            .entry(Key::new(s.load(), &s.workload, s.threads, &s.target))
            .or_default()
            .push(s);
    }
    groups
        .into_iter()
        .map(|(key, runs)| {
            let pick = |f: &dyn Fn(&Sample) -> f64| {
                median(&mut runs.iter().map(|s| f(s)).collect::<Vec<_>>())
            };
            let per_query = |cpu: f64, s: &Sample| cpu * 1e6 / s.stats.queries.max(1) as f64;
            let cell = Cell {
                runs: runs.len(),
                qps: pick(&|s| s.stats.qps),
                qps_range: runs.iter().fold((f64::INFINITY, 0.0), |(lo, hi), s| {
                    (lo.min(s.stats.qps), hi.max(s.stats.qps))
                }),
                events_per_s: pick(&|s| s.events_per_s),
                avg_ms: pick(&|s| s.stats.avg_ms),
                p95_ms: pick(&|s| s.stats.p95_ms),
                proxy_cpu_us_per_query: runs[0]
                    .proxy_cpu_s
                    .map(|_| pick(&|s| per_query(s.proxy_cpu_s.unwrap_or(f64::NAN), s))),
                proxy_user_us_per_query: runs[0]
                    .proxy_user_s
                    .map(|_| pick(&|s| per_query(s.proxy_user_s.unwrap_or(f64::NAN), s))),
                backend_cpu_us_per_query: pick(&|s| per_query(s.backend_cpu_s, s)),
                errors: runs.iter().map(|s| s.stats.errors).sum(),
                // Every run of a paced cell has the cell's rate; each must keep it, since a
                // median could hide a run the target could not serve.
                pace: runs[0].rate.map(|rate| Pace {
                    rate,
                    kept: runs.iter().all(|s| kept_pace(s.events_per_s, rate)),
                }),
            };
            (key, cell)
        })
        .collect()
}

/// The `--rate` of each (workload, threads) cell for the paced rounds: `fraction` of the lowest
/// closed-loop median event rate of any target in the cell (direct included), so that every
/// target can keep it. At least 1: sysbench takes `--rate=0` as no limit.
pub fn paced_rates(cells: &BTreeMap<Key, Cell>, fraction: f64) -> BTreeMap<(String, u32), u32> {
    let mut slowest: BTreeMap<(String, u32), f64> = BTreeMap::new();
    for (k, c) in cells.iter().filter(|(k, _)| k.load == Load::Closed) {
        let v = slowest
            .entry((k.workload.clone(), k.threads))
            .or_insert(f64::INFINITY);
        *v = v.min(c.events_per_s);
    }
    slowest
        .into_iter()
        .map(|(cell, events)| (cell, (fraction * events).round().max(1.0) as u32))
        .collect()
}

/// One target ratio of issue 3, with its threshold.
#[derive(Debug, Clone)]
pub struct Ratio {
    /// The cells it is computed on.
    pub load: Load,
    pub what: String,
    pub value: f64,
    pub target: String,
    pub met: bool,
    /// Why it is not met whatever its value (a paced cell that did not keep the pace).
    pub caveat: Option<String>,
}

/// The closed-loop ratios (QPS, latency, CPU per query), then the CPU ratios of the paced
/// cells, if any: at a fixed rate QPS and latency say nothing about the hop.
pub fn ratios(cells: &BTreeMap<Key, Cell>, workloads: &[String], threads: &[u32]) -> Vec<Ratio> {
    let get = |w: &str, t: u32, target: &str| cells.get(&Key::new(Load::Closed, w, t, target));
    let mut out = Vec::new();
    for w in workloads {
        for &t in threads.iter().filter(|&&t| t == 8 || t == 32) {
            if let (Some(s), Some(h)) = (get(w, t, "shoal"), get(w, t, "haproxy")) {
                let value = s.qps / h.qps;
                out.push(Ratio {
                    load: Load::Closed,
                    what: format!(
                        "{w} {t} threads: Shoal QPS / HAProxy QPS (rounds: Shoal {:.0}-{:.0}, HAProxy {:.0}-{:.0})",
                        s.qps_range.0, s.qps_range.1, h.qps_range.0, h.qps_range.1
                    ),
                    value,
                    target: ">= 0.9".into(),
                    met: value >= 0.9,
                    caveat: None,
                });
            }
        }
        if let (Some(s), Some(h), Some(d)) = (
            get(w, 1, "shoal"),
            get(w, 1, "haproxy"),
            get(w, 1, "direct"),
        ) {
            let value = (s.avg_ms - d.avg_ms) / (h.avg_ms - d.avg_ms);
            out.push(Ratio {
                load: Load::Closed,
                what: format!(
                    "{w} 1 thread: latency Shoal adds / latency HAProxy adds ({:.1} us / {:.1} us)",
                    (s.avg_ms - d.avg_ms) * 1000.0,
                    (h.avg_ms - d.avg_ms) * 1000.0
                ),
                value,
                target: "<= 1.3".into(),
                // A negative HAProxy cost is noise: the ratio then means nothing.
                met: h.avg_ms > d.avg_ms && value <= 1.3,
                caveat: None,
            });
        }
        out.extend(cpu_ratios(cells, Load::Closed, w, threads));
    }
    for w in workloads {
        out.extend(cpu_ratios(cells, Load::Paced, w, threads));
    }
    out
}

/// The CPU-per-query ratios of one workload on the cells of one load, each over every thread
/// count (medians per cell, averaged).
fn cpu_ratios(cells: &BTreeMap<Key, Cell>, load: Load, w: &str, threads: &[u32]) -> Vec<Ratio> {
    let get = |t: u32, target: &str| cells.get(&Key::new(load, w, t, target));
    let mean = |target: &str| {
        let v: Vec<f64> = threads
            .iter()
            .filter_map(|&t| get(t, target)?.proxy_cpu_us_per_query)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    // A cell whose target fell behind the rate ran at its own pace: it cannot be compared with
    // one that kept it.
    let behind = |targets: [&str; 2]| -> Option<String> {
        let missed: Vec<String> = threads
            .iter()
            .flat_map(|&t| targets.map(|target| (t, target)))
            .filter(|&(t, target)| get(t, target).and_then(|c| c.pace).is_some_and(|p| !p.kept))
            .map(|(t, target)| format!("{target} at {t} threads"))
            .collect();
        (!missed.is_empty()).then(|| {
            format!(
                "not comparable: {} did not keep the pace",
                missed.join(", ")
            )
        })
    };
    let ratio = |what: String, value: f64, goal: f64, targets: [&str; 2]| {
        let caveat = behind(targets);
        Ratio {
            load,
            what,
            value,
            target: format!("<= {goal}"),
            met: caveat.is_none() && value <= goal,
            caveat,
        }
    };
    let mut out = Vec::new();
    // The routed point select is the sharded hot path: its cost against quick mode and
    // HAProxy is the sharded-execution goal.
    if let (true, Some(c), Some(q), Some(h)) = (
        w == "oltp_point_select",
        mean("shoal-config"),
        mean("shoal"),
        mean("haproxy"),
    ) {
        for (base, name, b, goal) in [
            ("Shoal quick", "shoal", q, 1.1),
            ("HAProxy", "haproxy", h, 1.2),
        ] {
            out.push(ratio(
                format!(
                    "{w}: shoal-config (routed) CPU per query / {base} CPU per query \
                     ({c:.1} us / {b:.1} us)"
                ),
                c / b,
                goal,
                ["shoal-config", name],
            ));
        }
    }
    if let (Some(s), Some(h)) = (mean("shoal"), mean("haproxy")) {
        out.push(ratio(
            format!("{w}: Shoal CPU per query / HAProxy CPU per query ({s:.1} us / {h:.1} us)"),
            s / h,
            1.2,
            ["shoal", "haproxy"],
        ));
    }
    out
}

/// The report: the closed-loop table and ratios under `header`, then, for a run with
/// `--paced FRACTION`, the paced table and its CPU ratios.
pub fn markdown(
    header: &str,
    cells: &BTreeMap<Key, Cell>,
    ratios: &[Ratio],
    targets: &[String],
    paced: Option<f64>,
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "{header}");
    cell_table(&mut md, cells, Load::Closed, targets);
    ratio_table(&mut md, ratios, Load::Closed);
    if let Some(fraction) = paced {
        let _ = writeln!(
            md,
            "\n## Paced at equal rate ({fraction} x the slowest target's closed-loop QPS per cell)\n\n\
             Each cell again, sysbench offering every target the same load (`--rate`, Poisson \
             arrivals): {fraction} x the lowest closed-loop median event rate of any target in \
             the cell (events: queries for oltp_point_select, transactions for \
             oltp_read_write). A cell kept the pace when every run completed >= {PACE_KEPT} x \
             the rate. Latency includes sysbench's queueing; compare CPU per query.\n"
        );
        cell_table(&mut md, cells, Load::Paced, targets);
        ratio_table(&mut md, ratios, Load::Paced);
    }
    md
}

/// The cells of one load, by workload, threads and the targets' order; paced cells also show
/// their rate and whether they kept it.
fn cell_table(md: &mut String, cells: &BTreeMap<Key, Cell>, load: Load, targets: &[String]) {
    let (pace_head, pace_rule) = match load {
        Load::Closed => ("", ""),
        Load::Paced => (" rate events/s | kept the pace |", "---:|---|"),
    };
    let _ = writeln!(
        md,
        "| workload | threads | target |{pace_head} QPS | avg ms | p95 ms | added avg us vs direct | proxy CPU us/query | of it user | mariadbd CPU us/query | errors | runs |"
    );
    let _ = writeln!(
        md,
        "|---|---:|---|{pace_rule}---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut keys: Vec<&Key> = cells.keys().filter(|k| k.load == load).collect();
    let order = |t: &str| targets.iter().position(|x| x == t).unwrap_or(usize::MAX);
    keys.sort_by(|a, b| {
        (&a.workload, a.threads, order(&a.target)).cmp(&(&b.workload, b.threads, order(&b.target)))
    });
    for key in keys {
        let c = &cells[key];
        let direct = cells.get(&Key::new(load, &key.workload, key.threads, "direct"));
        let added = match (key.target.as_str(), direct) {
            ("direct", _) | (_, None) => "-".to_string(),
            (_, Some(d)) => format!("{:.1}", (c.avg_ms - d.avg_ms) * 1000.0),
        };
        let proxy_cpu = c
            .proxy_cpu_us_per_query
            .map_or("-".to_string(), |v| format!("{v:.1}"));
        let proxy_user = c
            .proxy_user_us_per_query
            .map_or("-".to_string(), |v| format!("{v:.1}"));
        let pace = c.pace.map_or(String::new(), |p| {
            format!(" {} | {} |", p.rate, if p.kept { "yes" } else { "NO" })
        });
        let _ = writeln!(
            md,
            "| {} | {} | {} |{pace} {:.0} | {:.3} | {:.3} | {} | {} | {} | {:.1} | {} | {} |",
            key.workload,
            key.threads,
            key.target,
            c.qps,
            c.avg_ms,
            c.p95_ms,
            added,
            proxy_cpu,
            proxy_user,
            c.backend_cpu_us_per_query,
            c.errors,
            c.runs
        );
    }
}

fn ratio_table(md: &mut String, ratios: &[Ratio], load: Load) {
    let mut ratios = ratios.iter().filter(|r| r.load == load).peekable();
    if ratios.peek().is_none() {
        return;
    }
    let _ = writeln!(md, "\n| target ratio | value | goal | met |");
    let _ = writeln!(md, "|---|---:|---|---|");
    for r in ratios {
        let met = match (r.met, &r.caveat) {
            (true, _) => "yes".to_string(),
            (false, None) => "NO".to_string(),
            (false, Some(why)) => format!("NO ({why})"),
        };
        let _ = writeln!(md, "| {} | {:.2} | {} | {met} |", r.what, r.value, r.target);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(target: &str, threads: u32, qps: f64, avg_ms: f64, cpu: Option<f64>) -> Sample {
        Sample {
            workload: "oltp_point_select".into(),
            threads,
            target: target.into(),
            stats: RunStats {
                queries: (qps * 10.0) as u64,
                qps,
                avg_ms,
                p95_ms: avg_ms * 2.0,
                errors: 0,
            },
            events_per_s: qps,
            rate: None,
            proxy_cpu_s: cpu,
            proxy_user_s: cpu.map(|c| c / 4.0),
            backend_cpu_s: 1.0,
        }
    }

    /// A point-select sample paced at `rate` that completed `qps` events per second.
    fn paced(target: &str, threads: u32, rate: u32, qps: f64, cpu: f64) -> Sample {
        Sample {
            rate: Some(rate),
            ..sample(target, threads, qps, 1.0, Some(cpu))
        }
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn ratios_compare_shoal_with_haproxy() {
        let samples = vec![
            sample("direct", 1, 1000.0, 1.0, None),
            sample("haproxy", 1, 900.0, 1.1, Some(0.3)),
            sample("shoal", 1, 850.0, 1.15, Some(0.3)),
            sample("haproxy", 8, 5000.0, 1.6, Some(1.5)),
            sample("shoal", 8, 4000.0, 2.0, Some(2.0)),
            sample("shoal", 8, 3800.0, 2.0, Some(2.0)),
            sample("shoal", 8, 4400.0, 2.0, Some(2.0)),
        ];
        let cells = cells(&samples);
        let r = ratios(&cells, &["oltp_point_select".to_string()], &[1, 8]);
        let qps = r.iter().find(|r| r.what.contains("8 threads")).unwrap();
        assert!((qps.value - 0.8).abs() < 1e-9 && !qps.met);
        // The ratio of medians is shown with each target's spread over its rounds.
        assert!(
            qps.what
                .ends_with("(rounds: Shoal 3800-4400, HAProxy 5000-5000)"),
            "{}",
            qps.what
        );
        let lat = r.iter().find(|r| r.what.contains("latency")).unwrap();
        assert!((lat.value - 1.5).abs() < 1e-6 && !lat.met);
        assert!(r.iter().all(|r| r.load == Load::Closed));
        let md = markdown(
            "# t",
            &cells,
            &r,
            &["direct".into(), "haproxy".into(), "shoal".into()],
            None,
        );
        assert!(md.contains("| oltp_point_select | 1 | direct |"));
        assert!(md.contains("NO"));
        assert!(!md.contains("Paced"));
    }

    #[test]
    fn the_paced_rate_is_a_fraction_of_the_slowest_target_in_each_cell() {
        let rw = |target: &str, threads: u32, qps: f64, events: f64| Sample {
            workload: "oltp_read_write".into(),
            events_per_s: events,
            ..sample(target, threads, qps, 10.0, None)
        };
        let samples = vec![
            sample("direct", 8, 12000.0, 1.0, None),
            sample("shoal", 8, 10000.0, 1.0, Some(3.0)),
            sample("shoal-config", 8, 8001.0, 1.0, Some(3.0)),
            sample("direct", 32, 13000.0, 1.0, None),
            sample("shoal", 32, 11000.0, 1.0, Some(3.0)),
            sample("shoal-config", 32, 14000.0, 1.0, Some(3.0)),
            // Earlier paced runs do not lower the closed-loop figure the rate is taken from.
            paced("shoal", 8, 100, 100.0, 0.1),
            // An event of oltp_read_write is a transaction of 20 queries: the rate is in events.
            rw("direct", 8, 18000.0, 1000.0),
            rw("shoal", 8, 19800.0, 1100.0),
            // A rate that would round to 0 (no limit to sysbench) is 1.
            sample("direct", 1, 3.0, 1.0, None),
        ];
        let rates = paced_rates(&cells(&samples), 0.8);
        let rate = |w: &str, t: u32| rates[&(w.to_string(), t)];
        assert_eq!(rate("oltp_point_select", 8), 6401);
        assert_eq!(rate("oltp_point_select", 32), 8800);
        assert_eq!(rate("oltp_read_write", 8), 800);
        assert_eq!(
            paced_rates(&cells(&samples), 0.1)[&("oltp_point_select".into(), 1)],
            1
        );
        assert_eq!(rates.len(), 4);
    }

    #[test]
    fn a_run_keeps_the_pace_at_95_percent_of_the_rate() {
        assert!(kept_pace(1000.0, 1000));
        assert!(kept_pace(950.0, 1000));
        assert!(!kept_pace(949.9, 1000));
        assert!(!kept_pace(0.0, 1));
    }

    #[test]
    fn closed_and_paced_samples_never_share_a_cell() {
        let samples = vec![
            sample("shoal", 8, 10000.0, 1.0, Some(3.0)),
            paced("shoal", 8, 6000, 5990.0, 1.8),
            // One run of the two fell behind: the cell did not keep the pace, whatever its median.
            paced("shoal", 8, 6000, 5000.0, 1.5),
            paced("shoal", 8, 6000, 6010.0, 1.8),
        ];
        let cells = cells(&samples);
        assert_eq!(cells.len(), 2);
        let closed = &cells[&Key::new(Load::Closed, "oltp_point_select", 8, "shoal")];
        assert_eq!((closed.runs, closed.qps, closed.pace), (1, 10000.0, None));
        let paced = &cells[&Key::new(Load::Paced, "oltp_point_select", 8, "shoal")];
        assert_eq!((paced.runs, paced.qps), (3, 5990.0));
        assert_eq!(
            paced.pace,
            Some(Pace {
                rate: 6000,
                kept: false
            })
        );
    }

    #[test]
    fn paced_ratios_compare_cpu_only_and_not_across_a_missed_pace() {
        let mut samples = Vec::new();
        for t in [8, 32] {
            samples.extend([
                sample("haproxy", t, 9000.0, 1.0, Some(3.0)),
                sample("shoal", t, 9000.0, 1.0, Some(3.0)),
                sample("shoal-config", t, 7000.0, 1.0, Some(3.0)),
                // 30 us per query for either hop at the same rate, 32 us routed.
                paced("haproxy", t, 6000, 6000.0, 1.8),
                paced("shoal", t, 6000, 6000.0, 1.8),
            ]);
        }
        samples.push(paced("shoal-config", 8, 6000, 6000.0, 1.92));
        // Fell behind at 32 threads: 5000 of 6000 events per second.
        samples.push(paced("shoal-config", 32, 6000, 5000.0, 1.6));
        let cells = cells(&samples);
        let r = ratios(&cells, &["oltp_point_select".to_string()], &[8, 32]);
        let paced: Vec<&Ratio> = r.iter().filter(|r| r.load == Load::Paced).collect();
        assert_eq!(paced.len(), 3, "{paced:?}");
        assert!(paced.iter().all(|r| r.what.contains("CPU per query")));
        let routed = paced
            .iter()
            .find(|r| r.what.contains("/ Shoal quick"))
            .unwrap();
        assert!((routed.value - 32.0 / 30.0).abs() < 1e-9);
        assert!(
            !routed.met,
            "a value under the goal is no pass across a missed pace"
        );
        assert_eq!(
            routed.caveat.as_deref(),
            Some("not comparable: shoal-config at 32 threads did not keep the pace")
        );
        let hop = paced
            .iter()
            .find(|r| r.what.starts_with("oltp_point_select: Shoal CPU"))
            .unwrap();
        assert!((hop.value - 1.0).abs() < 1e-9 && hop.met && hop.caveat.is_none());

        let targets = ["haproxy".into(), "shoal".into(), "shoal-config".into()];
        let md = markdown("# t", &cells, &r, &targets, Some(0.8));
        let (closed, paced) = md
            .split_once("## Paced at equal rate (0.8 x the slowest target's closed-loop QPS")
            .unwrap();
        assert!(closed.contains("| oltp_point_select | 8 | shoal | 9000 |"));
        assert!(!closed.contains("6000"));
        assert!(paced.contains("| oltp_point_select | 32 | shoal-config | 6000 | NO | 5000 |"));
        assert!(paced.contains("| oltp_point_select | 8 | shoal | 6000 | yes | 6000 |"));
        assert!(
            paced.contains(
                "| NO (not comparable: shoal-config at 32 threads did not keep the pace) |"
            )
        );
        assert!(!paced.contains("QPS / HAProxy QPS"));
    }
}
