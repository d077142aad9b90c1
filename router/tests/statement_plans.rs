//! Golden statement plans ([`Router::plan_statement`]): every decision a client statement's
//! text and the session's inputs settle, besides its route. Cases in
//! `router/tests/golden/statements/*.plans`, run against the `topology.yaml` beside them.
//!
//! Case format (cases separated by lines starting with `=== `):
//!
//! ```text
//! === what this case checks
//! schema: shop            (optional, default `shop`; `schema: -` for none)
//! read_split: yes         (optional: some datahost balances reads)
//! xa: yes                 (optional: the session is in an XA transaction)
//! read_only: yes          (optional: the user is read-only)
//! denied: secret          (optional: schemas the user may not use, comma-separated)
//! user_vars: old_mode     (optional: user variables the session holds)
//! prepare: yes            (optional: planned as a statement the client prepares,
//!                          `Router::plan_prepare`; its parameter count is shown)
//! SELECT ...              (one or more lines of SQL)
//! ---
//! step: ...               (the plan: its step, then each decision that is not the default)
//! ```
//!
//! `SHOAL_GOLDEN_UPDATE=1 cargo test -p shoal-router --test statement_plans` rewrites the
//! expectations with what the router answers now (review the diff before committing).
//!
//! Each case is planned twice through one router (the second from its plan cache) and once
//! through a fresh one: all three must be equal.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use shoal_router::charset::Charsets;
use shoal_router::config::Config;
use shoal_router::plan::{ReadWant, Router, Server, StatementInput, StatementPlan, Step, render};
use shoal_router::sql::SqlMode;
use shoal_router::topology::Topology;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/statements")
}

fn topology() -> Arc<Topology> {
    let text = fs::read_to_string(dir().join("topology.yaml")).expect("read topology.yaml");
    let cfg = Config::from_yaml_str(&text).expect("parse topology.yaml");
    Arc::new(Topology::build(&cfg).expect("build topology"))
}

#[derive(Default)]
struct Case {
    comment: String,
    /// The header lines as written (kept on update).
    header: Vec<String>,
    schema: Option<String>,
    read_split: bool,
    xa: bool,
    read_only: bool,
    denied: Vec<String>,
    user_vars: Vec<String>,
    prepare: bool,
    sql: String,
    expected: String,
}

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn parse_file(text: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    for block in text.split("\n=== ").map(|b| b.trim_start_matches("=== ")) {
        if block.trim().is_empty() {
            continue;
        }
        let mut lines = block.lines();
        let mut c = Case {
            comment: lines.next().unwrap_or("").trim().to_string(),
            schema: Some("shop".to_string()),
            ..Case::default()
        };
        let (mut sql, mut expected, mut in_expected) = (Vec::new(), Vec::new(), false);
        for line in lines {
            if in_expected {
                expected.push(line);
                continue;
            }
            if line == "---" {
                in_expected = true;
                continue;
            }
            let header = sql.is_empty().then(|| line.split_once(": ")).flatten();
            match header {
                Some(("schema", v)) => c.schema = (v.trim() != "-").then(|| v.trim().to_string()),
                Some(("read_split", v)) => c.read_split = v.trim() == "yes",
                Some(("xa", v)) => c.xa = v.trim() == "yes",
                Some(("read_only", v)) => c.read_only = v.trim() == "yes",
                Some(("denied", v)) => c.denied = list(v),
                Some(("user_vars", v)) => c.user_vars = list(v),
                Some(("prepare", v)) => c.prepare = v.trim() == "yes",
                _ => {
                    sql.push(line);
                    continue;
                }
            }
            c.header.push(line.to_string());
        }
        c.sql = sql.join("\n");
        c.expected = expected.join("\n").trim_end().to_string();
        cases.push(c);
    }
    cases
}

/// The plan as text: its step (a route as `render` writes it), then each decision that is
/// not the default, one per line.
fn show(topo: &Topology, c: &Case, p: &StatementPlan) -> String {
    let sql = c.sql.as_str();
    let mut out = match &p.step {
        Step::Route(r) => format!("step: route\n{}", render(topo, r)),
        Step::BroadcastWrites(t) => format!(
            "step: broadcast writes\n{}",
            render(
                topo,
                &shoal_router::plan::RoutePlan::Broadcast { targets: t.clone() }
            )
        ),
        Step::BroadcastDdl(t) => format!(
            "step: broadcast ddl\n{}",
            render(
                topo,
                &shoal_router::plan::RoutePlan::Broadcast { targets: t.clone() }
            )
        ),
        Step::InsertWithSequence(f) => format!(
            "step: insert with sequence {}.{} (datanode {}, step {}, {} rows)\nfilled: {}",
            f.schema,
            f.table,
            topo.datanodes[f.datanode].name,
            f.step,
            f.rows,
            f.apply(sql, 1001)
        ),
        Step::InsertWithColumnList(f) => format!(
            "step: insert with column list {}.{} (read on {} table {})\nfilled: {}",
            f.schema,
            f.table,
            topo.datanodes[f.datanode].name,
            f.physical_table,
            f.apply(sql, &["a".to_string(), "b".to_string()])
        ),
        Step::Diagnostics(d) => format!("step: diagnostics {d:?}"),
        Step::ReadOnly(what) => format!("step: read-only refusal ({what})"),
        Step::Unreadable(e) => format!(
            "step: unreadable\nerror {} ({}): {}",
            e.code(),
            e.sqlstate(),
            e.message()
        ),
    };
    if p.start != 0 {
        out.push_str(&format!("\nplanned text: {}", p.text(sql)));
    }
    if let Some(d) = p.deadline {
        out.push_str(&format!("\ndeadline: {} ms", d.as_millis()));
    }
    if p.want != ReadWant::UNDECIDED || c.read_split || c.xa {
        let server = match p.want.server {
            Server::Primary => "primary".to_string(),
            Server::Replica { hinted: false } => "replica".to_string(),
            Server::Replica { hinted: true } => "replica (hinted)".to_string(),
        };
        out.push_str(&format!(
            "\nwant: {server}, writes: {}, may write: {}",
            p.want.writes, p.want.maybe_writes
        ));
    }
    if p.implicit_commit {
        out.push_str("\nimplicit commit");
    }
    if p.changes_schema {
        out.push_str("\nchanges schema");
    }
    if p.is_show {
        out.push_str("\nshow");
    }
    if p.pins.leaves_state {
        out.push_str("\npins its connection");
    }
    if p.pins.sets_last_insert_id {
        out.push_str("\nsets LAST_INSERT_ID");
    }
    out
}

fn write_file(path: &Path, cases: &[Case], actual: &[String]) {
    let mut out = String::new();
    for (c, a) in cases.iter().zip(actual) {
        out.push_str(&format!("=== {}\n", c.comment));
        for h in &c.header {
            out.push_str(h);
            out.push('\n');
        }
        out.push_str(&c.sql);
        out.push_str("\n---\n");
        out.push_str(a);
        out.push_str("\n\n");
    }
    fs::write(path, out).expect("write cases");
}

#[test]
fn golden_statement_plans() {
    let topo = topology();
    let warm = Router::with_cache_capacity(topo.clone(), 64);
    let update = std::env::var("SHOAL_GOLDEN_UPDATE").is_ok_and(|v| v == "1");
    let mut files: Vec<PathBuf> = fs::read_dir(dir())
        .expect("golden dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "plans"))
        .collect();
    files.sort();
    let (mut total, mut failures) = (0, Vec::new());
    let mut toks = Vec::new();
    for f in &files {
        let cases = parse_file(&fs::read_to_string(f).expect("read cases"));
        let mut actual = Vec::new();
        for c in &cases {
            total += 1;
            let held: Vec<&str> = c.user_vars.iter().map(String::as_str).collect();
            let input = StatementInput {
                sql: &c.sql,
                current: c.schema.as_deref(),
                mode: SqlMode::default(),
                charsets: Charsets::UTF8MB4,
                read_only: c.read_only,
                denied_schemas: &c.denied,
                user_vars: &held,
                read_split: c.read_split,
                xa_tracking: c.xa,
                digest: true,
            };
            let plan = |r: &Router, toks: &mut Vec<_>| {
                if c.prepare {
                    let p = r.plan_prepare(&input, toks);
                    (p.plan, Some(p.params))
                } else {
                    (r.plan_statement(&input, toks), None)
                }
            };
            let (cold, params) = plan(&warm, &mut toks);
            let cached = plan(&warm, &mut toks).0;
            let fresh = plan(&Router::new(topo.clone()), &mut toks).0;
            if cold != cached || cold != fresh {
                failures.push(format!(
                    "{}: `{}`: the plan differs when cached",
                    f.display(),
                    c.comment
                ));
            }
            let mut got = show(&topo, c, &cold);
            if let Some(n) = params {
                got.push_str(&format!("\nparams: {n}"));
            }
            if got != c.expected && !update {
                failures.push(format!(
                    "{}: `{}`\n--- expected\n{}\n--- got\n{got}",
                    f.display(),
                    c.comment,
                    c.expected
                ));
            }
            actual.push(got);
        }
        if update {
            write_file(f, &cases, &actual);
        }
    }
    assert!(total > 0, "no cases");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
