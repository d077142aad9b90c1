//! After the run: what the backends hold, read directly (not through Shoal), against the log of
//! what the clients saw; and the per-scenario report.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use shoal_bench::cluster::Cluster;

use super::Atomicity;
use super::fixture::{DATANODES, REPLICA_OF, TABLE_NAMES, admin};
use super::workload::{Accounts, Expect, Kind, Log, Op, Seen, What};

/// What the primaries hold.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// `event` id -> datanodes holding it.
    events: HashMap<u64, Vec<usize>>,
    /// transfer -> its legs (account, delta).
    legs: HashMap<u64, Vec<(u64, i64)>>,
    /// account -> balances found (one, unless the account is on several datanodes).
    balances: BTreeMap<u64, Vec<i64>>,
    /// per datanode: setting key -> (v, op).
    settings: Vec<BTreeMap<String, (i64, u64)>>,
}

pub async fn snapshot(cluster: &Cluster) -> Snapshot {
    let mut s = Snapshot::default();
    for (dn, (p, db)) in DATANODES.iter().enumerate() {
        let mut c = admin(cluster, *p).await;
        let ids: Vec<u64> = c.query(format!("SELECT id FROM {db}.event")).await.unwrap();
        for id in ids {
            s.events.entry(id).or_default().push(dn);
        }
        let legs: Vec<(u64, u64, i64)> = c
            .query(format!("SELECT xfer, account, delta FROM {db}.leg"))
            .await
            .unwrap();
        for (x, a, d) in legs {
            s.legs.entry(x).or_default().push((a, d));
        }
        let bal: Vec<(u64, i64)> = c
            .query(format!("SELECT id, balance FROM {db}.account"))
            .await
            .unwrap();
        for (id, b) in bal {
            s.balances.entry(id).or_default().push(b);
        }
        let set: Vec<(String, i64, u64)> = c
            .query(format!("SELECT k, v, op FROM {db}.setting"))
            .await
            .unwrap();
        s.settings
            .push(set.into_iter().map(|(k, v, op)| (k, (v, op))).collect());
        let _ = c.disconnect().await;
    }
    s
}

/// A multi-datanode write found applied on some datanodes only.
#[derive(Debug, Clone)]
pub struct Partial {
    pub kind: Kind,
    pub detail: String,
    pub seen: Seen,
    /// What it did to the sum of balances (a transfer's lone leg).
    pub sum_effect: i64,
}

#[derive(Debug, Default)]
pub struct Findings {
    /// Acknowledged writes missing (wholly or partly).
    pub lost: Vec<String>,
    /// Rows that no operation wrote, or whose operation was definitely not applied.
    pub phantoms: Vec<String>,
    pub duplicates: Vec<String>,
    /// Atomicity violations: multi-datanode writes of open outcome found half applied.
    pub partial: Vec<Partial>,
    /// Accounts whose balance is not the initial one plus their legs (a local transaction
    /// half applied, or an update without its leg).
    pub balance_mismatch: Vec<String>,
    /// Sum of balances minus the initial sum.
    pub sum_delta: i64,
    /// Replica tables whose checksum differs from the primary's.
    pub replica_diffs: Vec<String>,
    /// Writes of open outcome (no answer, or an error at commit that leaves it open) found
    /// wholly applied, and wholly absent.
    pub open_applied: usize,
    pub open_absent: usize,
}

/// Compares the backends with the log.
pub fn compare(log: &Log, snap: &Snapshot, accounts: &Accounts) -> Findings {
    let mut f = Findings::default();
    let mut known_rows: HashMap<u64, ()> = HashMap::new();
    let mut known_xfers: HashMap<u64, ()> = HashMap::new();
    let mut upserts: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in &log.ops {
        let expect = op.expect();
        match &op.what {
            What::Rows(ids) => {
                let present = ids.iter().filter(|id| snap.events.contains_key(id)).count();
                for id in ids {
                    known_rows.insert(*id, ());
                    if let Some(dns) = snap.events.get(id)
                        && dns.len() > 1
                    {
                        f.duplicates
                            .push(format!("event {id} on datanodes {dns:?}"));
                    }
                }
                let desc = || format!("{} of rows {ids:?} ({})", op.kind.name(), op.seen.label());
                match expect {
                    Expect::Applied if present < ids.len() => {
                        f.lost
                            .push(format!("{}: {present} of {} found", desc(), ids.len()))
                    }
                    Expect::NotApplied if present > 0 => {
                        f.phantoms.push(format!("{}: {present} found", desc()))
                    }
                    Expect::Open if present == ids.len() => f.open_applied += 1,
                    Expect::Open if present == 0 => f.open_absent += 1,
                    Expect::Open => f.partial.push(Partial {
                        kind: op.kind,
                        detail: format!("{}: {present} of {} found", desc(), ids.len()),
                        seen: op.seen.clone(),
                        sum_effect: 0,
                    }),
                    _ => {}
                }
            }
            What::Transfer {
                xfer,
                from,
                to,
                delta,
            } => {
                known_xfers.insert(*xfer, ());
                let legs = snap.legs.get(xfer).map(Vec::as_slice).unwrap_or(&[]);
                let desc = format!(
                    "transfer {xfer} ({delta:+} to {from}, {:+} to {to}; {}): legs found {legs:?}",
                    -delta,
                    op.seen.label()
                );
                for (a, d) in legs {
                    let wanted = if a == from { *delta } else { -delta };
                    if (a != from && a != to) || *d != wanted {
                        f.phantoms
                            .push(format!("{desc}: leg ({a}, {d}) was never written"));
                    }
                }
                match (expect, legs.len()) {
                    (Expect::Applied, n) if n < 2 => f.lost.push(desc),
                    (Expect::NotApplied, n) if n > 0 => f.phantoms.push(desc),
                    (Expect::Open, 0) => f.open_absent += 1,
                    (Expect::Open, 2) => f.open_applied += 1,
                    (Expect::Open, 1) => f.partial.push(Partial {
                        kind: Kind::Transfer,
                        detail: desc,
                        seen: op.seen.clone(),
                        sum_effect: legs[0].1,
                    }),
                    _ => {}
                }
            }
            What::Upsert { key, .. } => upserts.entry(key.as_str()).or_default().push(op),
            What::Point(_) | What::Read => {}
        }
    }
    for (id, dns) in &snap.events {
        if !known_rows.contains_key(id) {
            f.phantoms
                .push(format!("event {id} (datanodes {dns:?}) was never written"));
        }
    }
    for (x, legs) in &snap.legs {
        if !known_xfers.contains_key(x) {
            f.phantoms.push(format!(
                "legs {legs:?} of transfer {x}, which was never run"
            ));
        }
    }
    check_upserts(&mut f, &upserts, snap);
    let mut per_account: HashMap<u64, i64> = HashMap::new();
    for legs in snap.legs.values() {
        for (a, d) in legs {
            *per_account.entry(*a).or_default() += d;
        }
    }
    let mut total = 0i64;
    let n = accounts.on_server.iter().map(Vec::len).sum::<usize>();
    for (id, found) in &snap.balances {
        let wanted = accounts.initial_balance + per_account.get(id).copied().unwrap_or(0);
        if found.len() != 1 || found[0] != wanted {
            f.balance_mismatch.push(format!(
                "account {id}: balance {found:?}, initial + legs = {wanted}"
            ));
        }
        total += found.iter().sum::<i64>();
    }
    if snap.balances.len() != n {
        f.balance_mismatch.push(format!(
            "{} accounts found, {n} created",
            snap.balances.len()
        ));
    }
    f.sum_delta = total - accounts.initial_balance * n as i64;
    f
}

/// Each key of the global `setting` table is written by one writer, in order: every copy must
/// hold an operation that was attempted and not refused, no older than the last acknowledged
/// one; copies that differ are an atomicity violation.
fn check_upserts(f: &mut Findings, upserts: &BTreeMap<&str, Vec<&Op>>, snap: &Snapshot) {
    let mut keys: BTreeMap<&str, ()> = upserts.keys().map(|k| (*k, ())).collect();
    for copy in &snap.settings {
        for k in copy.keys() {
            keys.insert(k.as_str(), ());
        }
    }
    for key in keys.keys() {
        let ops = upserts.get(key).map(Vec::as_slice).unwrap_or(&[]);
        let op_of = |id: u64| {
            ops.iter()
                .find(|o| matches!(&o.what, What::Upsert { op, .. } if *op == id))
        };
        let last_acked = ops
            .iter()
            .filter(|o| o.expect() == Expect::Applied)
            .filter_map(|o| match &o.what {
                What::Upsert { op, .. } => Some(*op),
                _ => None,
            })
            .max();
        let copies: Vec<Option<(i64, u64)>> =
            snap.settings.iter().map(|c| c.get(*key).copied()).collect();
        for (dn, copy) in copies.iter().enumerate() {
            let where_ = format!("setting {key} on datanode {}", dn + 1);
            match (copy, last_acked) {
                (None, Some(acked)) => f.lost.push(format!("{where_}: missing, op {acked} acked")),
                (None, None) => {}
                (Some((_, op)), _) => match op_of(*op) {
                    None => f.phantoms.push(format!("{where_}: op {op} never ran")),
                    Some(o) if o.expect() == Expect::NotApplied => f.phantoms.push(format!(
                        "{where_}: op {op} was refused ({})",
                        o.seen.label()
                    )),
                    Some(_) if last_acked.is_some_and(|a| a > *op) => f.lost.push(format!(
                        "{where_}: op {op}, but op {} was acknowledged after it",
                        last_acked.unwrap()
                    )),
                    Some(_) => {}
                },
            }
        }
        if copies.iter().any(|c| c != &copies[0]) {
            // The newest op on any copy is the one that did not reach them all.
            let newest = copies.iter().flatten().map(|(_, op)| *op).max();
            let seen = newest
                .and_then(op_of)
                .map(|o| o.seen.clone())
                .unwrap_or(Seen::Lost);
            f.partial.push(Partial {
                kind: Kind::Upsert,
                detail: format!("setting {key}: copies differ {copies:?} (newest op {newest:?})"),
                seen,
                sum_effect: 0,
            });
        }
    }
}

/// Compares each replica's tables with its primary's (`CHECKSUM TABLE`), after
/// [`Cluster::sync_replicas`].
pub async fn replica_diffs(cluster: &Cluster) -> Vec<String> {
    let mut diffs = Vec::new();
    let tables: Vec<String> = ["a", "b"]
        .iter()
        .flat_map(|db| TABLE_NAMES.iter().map(move |t| format!("{db}.{t}")))
        .collect();
    let sql = format!("CHECKSUM TABLE {}", tables.join(", "));
    for (p, r) in REPLICA_OF.iter().enumerate() {
        let mut pc = admin(cluster, p).await;
        let mut rc = admin(cluster, *r).await;
        let on_p: Vec<(String, Option<i64>)> = pc.query(&sql).await.unwrap();
        let on_r: Vec<(String, Option<i64>)> = rc.query(&sql).await.unwrap();
        if on_p != on_r {
            diffs.push(format!("primary {p}: {on_p:?}; its replica: {on_r:?}"));
        }
    }
    diffs
}

/// Waits until no primary holds a prepared XA transaction (`XA RECOVER` empty): the end of
/// recovery after a fault with xa; with best_effort nothing is ever prepared. Returns how long
/// it took, or `None` if some are still prepared after `limit`.
pub async fn wait_no_prepared(cluster: &Cluster, limit: Duration) -> Option<Duration> {
    let start = tokio::time::Instant::now();
    loop {
        let mut prepared = 0;
        for p in 0..2 {
            let mut c = admin(cluster, p).await;
            let rows: Vec<mysql_async::Row> = c.query("XA RECOVER").await.unwrap();
            prepared += rows.len();
        }
        if prepared == 0 {
            return Some(start.elapsed());
        }
        if start.elapsed() > limit {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The XA transactions prepared on the primaries now: (primary, formatID, gtrid+bqual bytes).
pub async fn prepared_xids(cluster: &Cluster) -> BTreeSet<(usize, i64, Vec<u8>)> {
    let mut out = BTreeSet::new();
    for p in 0..2 {
        let mut c = admin(cluster, p).await;
        let rows: Vec<(i64, i64, i64, Vec<u8>)> = c.query("XA RECOVER").await.unwrap();
        out.extend(rows.into_iter().map(|(f, _, _, data)| (p, f, data)));
    }
    out
}

/// Waits until none of `xids` is still prepared (resolved by Shoal's recovery, or by the
/// transaction it belongs to finishing); how long that took, `None` after `limit`.
pub async fn wait_resolved(
    cluster: &Cluster,
    xids: &BTreeSet<(usize, i64, Vec<u8>)>,
    limit: Duration,
) -> Option<Duration> {
    let start = tokio::time::Instant::now();
    loop {
        let now = prepared_xids(cluster).await;
        if xids.iter().all(|x| !now.contains(x)) {
            return Some(start.elapsed());
        }
        if start.elapsed() > limit {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One fault of a scenario, on the workload's clock.
#[derive(Debug, Clone)]
pub struct FaultEvent {
    pub what: String,
    pub at: Duration,
    /// When what was broken was back (restarted, resumed).
    pub restored: Duration,
    /// XA transactions found prepared when it was restored (left behind by the fault, or in
    /// flight), and how long after the restore they were all resolved (`None`: not within
    /// the limit).
    pub prepared_at_restore: usize,
    pub resolved_after: Option<Duration>,
}

/// Everything a scenario prints and asserts.
pub struct Report {
    pub scenario: String,
    pub mode: Atomicity,
    /// Whether Shoal itself died (an unknown outcome then has no one to report it).
    pub shoal_killed: bool,
    pub faults: Vec<FaultEvent>,
    pub log: Log,
    pub findings: Findings,
    /// From the end of the workload until no XA transaction was left prepared.
    pub prepared_cleared_after: Option<Duration>,
}

impl Report {
    /// Partial writes the mode tolerates (best_effort: answered 1180, or with no answer because
    /// Shoal died), and the rest.
    fn split_partial(&self) -> (Vec<&Partial>, Vec<&Partial>) {
        self.findings.partial.iter().partition(|p| {
            self.mode == Atomicity::BestEffort
                && (p.seen == Seen::Server(1180)
                    || (self.shoal_killed && matches!(p.seen, Seen::Lost | Seen::Hung)))
        })
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let f = &self.findings;
        let _ = writeln!(
            out,
            "=== fault scenario {} (transactions: {}) ===",
            self.scenario,
            self.mode.as_str()
        );
        let mut by_kind: BTreeMap<Kind, BTreeMap<String, u64>> = BTreeMap::new();
        for op in &self.log.ops {
            let label = match (&op.seen, op.at_commit) {
                (Seen::Ok, _) => "ok".to_string(),
                (s, true) => format!("{} at commit", s.label()),
                (s, false) => s.label(),
            };
            *by_kind
                .entry(op.kind)
                .or_default()
                .entry(label)
                .or_default() += 1;
        }
        for (kind, outcomes) in &by_kind {
            let parts: Vec<String> = outcomes.iter().map(|(k, n)| format!("{k}: {n}")).collect();
            let _ = writeln!(out, "  {:<14} {}", kind.name(), parts.join(", "));
        }
        if !self.log.connect_failures.is_empty() {
            let _ = writeln!(out, "  failed connects {:?}", self.log.connect_failures);
        }
        for (i, ev) in self.faults.iter().enumerate() {
            let _ = writeln!(
                out,
                "  fault: {} at {:.2}s, restored at {:.2}s",
                ev.what,
                ev.at.as_secs_f64(),
                ev.restored.as_secs_f64()
            );
            if ev.prepared_at_restore > 0 {
                let _ = writeln!(
                    out,
                    "    XA prepared at restore: {}, all resolved {}",
                    ev.prepared_at_restore,
                    ev.resolved_after
                        .map_or("NOT within the limit".into(), |d| format!(
                            "{:.2}s after the restore",
                            d.as_secs_f64()
                        ))
                );
            }
            // This fault's window: until the next one.
            let until = self.faults.get(i + 1).map_or(Duration::MAX, |n| n.at);
            let in_window = |o: &&Op| o.end >= ev.at && o.end < until;
            for (label, writes) in [("writes", true), ("reads", false)] {
                let ops: Vec<&Op> = self
                    .log
                    .ops
                    .iter()
                    .filter(|o| o.kind.is_write() == writes)
                    .filter(in_window)
                    .collect();
                let mut errors: BTreeMap<String, u64> = BTreeMap::new();
                for o in ops.iter().filter(|o| o.seen != Seen::Ok) {
                    *errors.entry(o.seen.label()).or_default() += 1;
                }
                let error_ends = || ops.iter().filter(|o| o.seen != Seen::Ok).map(|o| o.end);
                let (first_error, last_error) = (error_ends().min(), error_ends().max());
                let slowest = ops
                    .iter()
                    .map(|o| o.end - o.start)
                    .max()
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "    {label}: errors {errors:?}; first error {}; last error {}; slowest {:.2}s",
                    first_error.map_or("none".into(), |t| format!(
                        "{:+.2}s from the fault",
                        t.as_secs_f64() - ev.at.as_secs_f64()
                    )),
                    last_error.map_or("none".into(), |t| format!(
                        "{:+.2}s from restore",
                        t.as_secs_f64() - ev.restored.as_secs_f64()
                    )),
                    slowest.as_secs_f64()
                );
            }
            let firsts: Vec<String> = [
                Kind::Insert,
                Kind::MultiInsert,
                Kind::Transfer,
                Kind::Upsert,
                Kind::PointRead,
                Kind::SumRead,
            ]
            .iter()
            .map(|k| {
                let ops: Vec<&Op> = self.log.ops.iter().filter(|o| o.kind == *k).collect();
                format!(
                    "{} {}",
                    k.name(),
                    first_ok_after(&ops, ev.restored)
                        .map_or("never".into(), |d| format!("+{:.2}s", d.as_secs_f64()))
                )
            })
            .collect();
            let _ = writeln!(out, "    first ok after restore: {}", firsts.join(", "));
        }
        if let Some(d) = self.prepared_cleared_after {
            let _ = writeln!(
                out,
                "  no XA transaction prepared on the backends {:.2}s after the load stopped",
                d.as_secs_f64()
            );
        }
        let (tolerated, violations) = self.split_partial();
        let _ = writeln!(
            out,
            "  checks: lost acknowledged {}, phantom {}, duplicate {}, balance mismatches {}, \
             replica diffs {}, sum of balances {:+}",
            f.lost.len(),
            f.phantoms.len(),
            f.duplicates.len(),
            f.balance_mismatch.len(),
            f.replica_diffs.len(),
            f.sum_delta
        );
        let _ = writeln!(
            out,
            "  writes of unknown outcome (inserts, transfers) found applied {}, absent {}",
            f.open_applied, f.open_absent
        );
        let reported_1180 = tolerated
            .iter()
            .filter(|p| p.seen == Seen::Server(1180))
            .count();
        let _ = writeln!(
            out,
            "  atomicity violations: {} ({} reported by 1180, {} unanswered as Shoal died, {} \
             not tolerated)",
            f.partial.len(),
            reported_1180,
            tolerated.len() - reported_1180,
            violations.len()
        );
        let lists: [(&str, Vec<String>); 6] = [
            ("LOST", f.lost.clone()),
            ("PHANTOM", f.phantoms.clone()),
            ("DUPLICATE", f.duplicates.clone()),
            ("BALANCE", f.balance_mismatch.clone()),
            ("REPLICA", f.replica_diffs.clone()),
            (
                "PARTIAL",
                f.partial
                    .iter()
                    .map(|p| format!("{}: {}", p.kind.name(), p.detail))
                    .collect(),
            ),
        ];
        for (tag, items) in lists {
            for item in items.iter().take(10) {
                let _ = writeln!(out, "    {tag} {item}");
            }
            if items.len() > 10 {
                let _ = writeln!(out, "    {tag} ... {} more", items.len() - 10);
            }
        }
        out
    }

    /// Prints the report and asserts the invariants of the mode.
    pub fn assert_invariants(&self) {
        let text = self.render();
        println!("{text}");
        let f = &self.findings;
        let (tolerated, violations) = self.split_partial();
        let mut broken = Vec::new();
        for (what, n) in [
            ("acknowledged writes lost", f.lost.len()),
            ("phantom writes", f.phantoms.len()),
            ("duplicate rows", f.duplicates.len()),
            ("balances not matching their legs", f.balance_mismatch.len()),
            (
                "replica tables differing from their primary",
                f.replica_diffs.len(),
            ),
            ("atomicity violations not tolerated", violations.len()),
        ] {
            if n > 0 {
                broken.push(format!("{n} {what}"));
            }
        }
        let tolerated_sum: i64 = tolerated.iter().map(|p| p.sum_effect).sum();
        if f.sum_delta != tolerated_sum {
            broken.push(format!(
                "sum of balances moved by {:+}, tolerated partial transfers explain {tolerated_sum:+}",
                f.sum_delta
            ));
        }
        if self.faults.iter().any(|ev| ev.resolved_after.is_none()) {
            broken.push("XA transactions prepared at a restore never resolved".into());
        }
        if self.mode == Atomicity::Xa && self.prepared_cleared_after.is_none() {
            broken.push("XA transactions still prepared after recovery".into());
        }
        assert!(
            broken.is_empty(),
            "scenario {}: {}\n{text}",
            self.scenario,
            broken.join("; ")
        );
    }
}

/// Time from `restored` to the end of the first successful operation among `ops` ending after it.
fn first_ok_after(ops: &[&Op], restored: Duration) -> Option<Duration> {
    ops.iter()
        .filter(|o| o.seen == Seen::Ok && o.end >= restored)
        .map(|o| o.end - restored)
        .min()
}

#[cfg(test)]
mod tests {
    //! The checks themselves must be able to fail: fabricated logs against fabricated backends.

    use super::*;

    fn op(kind: Kind, what: What, seen: Seen, at_commit: bool) -> Op {
        Op {
            kind,
            what,
            start: Duration::ZERO,
            end: Duration::ZERO,
            seen,
            at_commit,
        }
    }

    fn accounts() -> Accounts {
        Accounts {
            on_server: [vec![1], vec![2]],
            initial_balance: 100,
        }
    }

    fn snap(events: &[u64], legs: &[(u64, u64, i64)], balances: &[(u64, i64)]) -> Snapshot {
        let mut s = Snapshot::default();
        for id in events {
            s.events.insert(*id, vec![0]);
        }
        for (x, a, d) in legs {
            s.legs.entry(*x).or_default().push((*a, *d));
        }
        for (a, b) in balances {
            s.balances.insert(*a, vec![*b]);
        }
        s.settings = vec![BTreeMap::new(); 4];
        s
    }

    fn xfer(x: u64, seen: Seen, at_commit: bool) -> Op {
        let what = What::Transfer {
            xfer: x,
            from: 1,
            to: 2,
            delta: 5,
        };
        op(Kind::Transfer, what, seen, at_commit)
    }

    #[test]
    fn acknowledged_rows_missing_are_lost_and_unwritten_rows_are_phantoms() {
        let log = Log {
            ops: vec![
                op(Kind::Insert, What::Rows(vec![1]), Seen::Ok, false),
                op(Kind::Insert, What::Rows(vec![2]), Seen::Server(1429), true),
                op(Kind::Insert, What::Rows(vec![3]), Seen::Lost, true),
            ],
            ..Log::default()
        };
        let f = compare(
            &log,
            &snap(&[2, 3, 9], &[], &[(1, 100), (2, 100)]),
            &accounts(),
        );
        assert_eq!(f.lost.len(), 1, "{f:?}");
        // Row 2 was refused, row 9 never written; row 3's outcome was open.
        assert_eq!(f.phantoms.len(), 2, "{f:?}");
        assert!(f.partial.is_empty());
    }

    #[test]
    fn a_half_applied_transfer_is_an_atomicity_violation_that_moves_the_sum() {
        let log = Log {
            ops: vec![
                xfer(10, Seen::Server(1180), true),
                xfer(11, Seen::Ok, false),
                xfer(12, Seen::Server(1062), false),
            ],
            ..Log::default()
        };
        let legs = [(10, 1, 5), (11, 1, 5), (11, 2, -5)];
        let f = compare(&log, &snap(&[], &legs, &[(1, 110), (2, 95)]), &accounts());
        assert_eq!(f.partial.len(), 1, "{f:?}");
        assert_eq!(f.partial[0].sum_effect, 5);
        assert_eq!(f.sum_delta, 5);
        assert!(f.lost.is_empty() && f.phantoms.is_empty() && f.balance_mismatch.is_empty());
        let report = |mode, shoal_killed| Report {
            scenario: "test".into(),
            mode,
            shoal_killed,
            faults: Vec::new(),
            log: Log::default(),
            findings: compare(&log, &snap(&[], &legs, &[(1, 110), (2, 95)]), &accounts()),
            prepared_cleared_after: Some(Duration::ZERO),
        };
        // Answered 1180: what best_effort tolerates, and xa does not.
        report(Atomicity::BestEffort, false).assert_invariants();
        let xa = std::panic::catch_unwind(|| report(Atomicity::Xa, false).assert_invariants());
        assert!(xa.is_err(), "xa must not tolerate a partial transfer");
    }

    #[test]
    fn a_balance_without_its_leg_and_a_lost_acknowledged_transfer_are_found() {
        let log = Log {
            ops: vec![xfer(20, Seen::Ok, false)],
            ..Log::default()
        };
        let f = compare(&log, &snap(&[], &[], &[(1, 105), (2, 95)]), &accounts());
        assert_eq!(f.lost.len(), 1, "{f:?}");
        assert_eq!(f.balance_mismatch.len(), 2, "{f:?}");
    }

    #[test]
    fn global_copies_that_differ_or_lag_an_acknowledged_upsert_are_found() {
        let up = |op_id, seen| {
            op(
                Kind::Upsert,
                What::Upsert {
                    key: "w0k0".into(),
                    op: op_id,
                },
                seen,
                true,
            )
        };
        let log = Log {
            ops: vec![up(1, Seen::Ok), up(2, Seen::Ok)],
            ..Log::default()
        };
        let mut s = snap(&[], &[], &[(1, 100), (2, 100)]);
        for (dn, copy) in s.settings.iter_mut().enumerate() {
            copy.insert("w0k0".into(), (0, if dn == 3 { 1 } else { 2 }));
        }
        let f = compare(&log, &s, &accounts());
        assert_eq!(f.lost.len(), 1, "{f:?}");
        assert_eq!(f.partial.len(), 1, "{f:?}");
    }
}
