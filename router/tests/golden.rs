//! Golden route-plan tests: every `router/tests/golden/*.cases` file is a list of cases
//! `{comment, sql, plan or error}` run against `router/tests/golden/topology.yaml`.
//!
//! Case format (cases separated by lines starting with `=== `):
//!
//! ```text
//! === what this case checks
//! schema: shop            (optional, default `shop`; `schema: -` for none)
//! params: 1, 'x', NULL    (optional: values bound to `?` placeholders)
//! sql_mode: ANSI_QUOTES   (optional: the session's @@sql_mode, default MariaDB 10.11's)
//! server_version: 101106  (optional: the backends' version, default DEFAULT_SERVER_VERSION)
//! SELECT ...              (one or more lines of SQL)
//! ---
//! single                  (the expected plan as rendered by `shoal_router::plan::render`)
//! dn1: SELECT ...
//! ```
//!
//! - `SHOAL_GOLDEN_UPDATE=1 cargo test -p shoal-router --test golden` rewrites the expectations
//!   with what the planner produces now (review the diff before committing).
//! - `SHOAL_GOLDEN_CASE=<text>` runs only cases whose comment or SQL contains `<text>` and prints
//!   their plans.
//!
//! Each case is planned twice, through a router whose plan cache is warm with every earlier case
//! and through a fresh one: both plans must be identical (the cache never changes a plan).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use shoal_router::config::Config;
use shoal_router::plan::{ParamValue, Router, render};
use shoal_router::sql::stmt::Literal;
use shoal_router::sql::{DEFAULT_SERVER_VERSION, SqlMode};
use shoal_router::topology::Topology;

struct Case {
    comment: String,
    schema: Option<String>,
    params: Vec<ParamValue>,
    params_line: Option<String>,
    sql_mode: Option<String>,
    server_version: Option<u32>,
    sql: String,
    expected: String,
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn topology() -> Arc<Topology> {
    let text = fs::read_to_string(dir().join("topology.yaml")).expect("read topology.yaml");
    let cfg = Config::from_yaml_str(&text).expect("parse topology.yaml");
    Arc::new(Topology::build(&cfg).expect("build topology"))
}

fn parse_params(s: &str) -> Vec<ParamValue> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let v = if part.eq_ignore_ascii_case("NULL") {
            Literal::Null
        } else if let Some(q) = part.strip_prefix('\'').and_then(|p| p.strip_suffix('\'')) {
            Literal::Str(q.to_string())
        } else if let Ok(i) = part.parse::<i128>() {
            Literal::Int(i)
        } else {
            Literal::Decimal(part.to_string())
        };
        out.push(v);
    }
    out
}

fn parse_file(text: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    for block in text.split("\n=== ").map(|b| b.trim_start_matches("=== ")) {
        if block.trim().is_empty() {
            continue;
        }
        let mut lines = block.lines();
        let comment = lines.next().unwrap_or("").trim().to_string();
        let mut schema = Some("shop".to_string());
        let mut params = Vec::new();
        let mut params_line = None;
        let mut sql_mode = None;
        let mut server_version = None;
        let mut sql = Vec::new();
        let mut expected = Vec::new();
        let mut in_expected = false;
        for line in lines {
            if in_expected {
                expected.push(line);
            } else if line == "---" {
                in_expected = true;
            } else if sql.is_empty() && line.starts_with("schema: ") {
                let s = line["schema: ".len()..].trim();
                schema = (s != "-").then(|| s.to_string());
            } else if sql.is_empty() && line.starts_with("params: ") {
                let p = line["params: ".len()..].trim();
                params = parse_params(p);
                params_line = Some(p.to_string());
            } else if sql.is_empty() && line.starts_with("sql_mode: ") {
                sql_mode = Some(line["sql_mode: ".len()..].trim().to_string());
            } else if sql.is_empty() && line.starts_with("server_version: ") {
                let v = line["server_version: ".len()..].trim();
                server_version = Some(v.parse().expect("server_version: a number like 101106"));
            } else {
                sql.push(line);
            }
        }
        cases.push(Case {
            comment,
            schema,
            params,
            params_line,
            sql_mode,
            server_version,
            sql: sql.join("\n"),
            expected: expected.join("\n").trim_end().to_string(),
        });
    }
    cases
}

fn write_file(path: &Path, cases: &[Case], actual: &[String]) {
    let mut out = String::new();
    for (c, a) in cases.iter().zip(actual) {
        out.push_str("=== ");
        out.push_str(&c.comment);
        out.push('\n');
        if c.schema.as_deref() != Some("shop") {
            out.push_str(&format!("schema: {}\n", c.schema.as_deref().unwrap_or("-")));
        }
        if let Some(p) = &c.params_line {
            out.push_str(&format!("params: {p}\n"));
        }
        if let Some(m) = &c.sql_mode {
            out.push_str(&format!("sql_mode: {m}\n"));
        }
        if let Some(v) = c.server_version {
            out.push_str(&format!("server_version: {v}\n"));
        }
        out.push_str(&c.sql);
        out.push_str("\n---\n");
        out.push_str(a);
        out.push_str("\n\n");
    }
    fs::write(path, out).expect("write cases");
}

#[test]
fn golden_route_plans() {
    let topo = topology();
    // One warm router per server version (the version is the router's, not the session's).
    let mut warm: std::collections::HashMap<u32, Router> = std::collections::HashMap::new();
    let update = std::env::var("SHOAL_GOLDEN_UPDATE").is_ok_and(|v| v == "1");
    let only = std::env::var("SHOAL_GOLDEN_CASE").ok();
    let mut files: Vec<PathBuf> = fs::read_dir(dir())
        .expect("golden dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "cases"))
        .collect();
    files.sort();
    let mut total = 0;
    let mut prepared_checked = 0;
    let mut kept_checked = 0;
    let mut failures = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).expect("read cases");
        let cases = parse_file(&text);
        let mut actual = Vec::new();
        for c in &cases {
            if let Some(o) = &only
                && !c.comment.contains(o.as_str())
                && !c.sql.contains(o.as_str())
            {
                actual.push(c.expected.clone());
                continue;
            }
            total += 1;
            let version = c.server_version.unwrap_or(DEFAULT_SERVER_VERSION);
            let mode = c
                .sql_mode
                .as_deref()
                .map(SqlMode::parse)
                .unwrap_or_default();
            let fresh = Router::new(topo.clone()).with_server_version(version);
            let warm = warm.entry(version).or_insert_with(|| {
                Router::with_cache_capacity(topo.clone(), 64).with_server_version(version)
            });
            let schema = c.schema.as_deref();
            // Every way of planning it, rendered: cold, from another router's cache, and
            // from this router's own cache the second time.
            let planned = |r: &Router| {
                let cs = shoal_router::charset::Charsets::UTF8MB4;
                render(&topo, &r.route_in(schema, mode, cs, &c.sql, &c.params))
            };
            let cold = planned(&fresh);
            let cached = planned(warm);
            // A second time through the same router: from its cache.
            let again = planned(&fresh);
            let uncached = render(
                &topo,
                &fresh.route_uncached_in(
                    schema,
                    mode,
                    shoal_router::charset::Charsets::UTF8MB4,
                    &c.sql,
                    &c.params,
                ),
            );
            if cold != uncached {
                failures.push(format!(
                    "{}: `{}`\n  plan differs from uncached planning:\n--- cold\n{cold}\n--- uncached\n{uncached}",
                    f.display(),
                    c.comment
                ));
            }
            // Planned once as a prepared statement, then evaluated with the values: the same
            // plan (twice, as each EXECUTE evaluates the kept template again).
            if let Some(prepared) = fresh.prepare_route(
                schema,
                mode,
                shoal_router::charset::Charsets::UTF8MB4,
                &c.sql,
            ) {
                for _ in 0..2 {
                    let plan = render(
                        &topo,
                        &fresh.route_prepared(
                            &prepared,
                            schema,
                            mode,
                            shoal_router::charset::Charsets::UTF8MB4,
                            &c.params,
                        ),
                    );
                    if plan != cold {
                        failures.push(format!(
                            "{}: `{}`\n  plan differs when prepared:\n--- cold\n{cold}\n--- prepared\n{plan}",
                            f.display(),
                            c.comment
                        ));
                    }
                }
                // A kept target, borrowed, is the plan too.
                if let shoal_router::plan::Routed::Kept(t) = fresh.route_kept(
                    &prepared,
                    schema,
                    mode,
                    shoal_router::charset::Charsets::UTF8MB4,
                    &c.params,
                ) {
                    let plan = render(&topo, &shoal_router::plan::RoutePlan::Single(t.clone()));
                    if plan != cold {
                        failures.push(format!(
                            "{}: `{}`\n  kept target differs:\n--- cold\n{cold}\n--- kept\n{plan}",
                            f.display(),
                            c.comment
                        ));
                    }
                    kept_checked += 1;
                }
                prepared_checked += 1;
            }
            // Prepared in the router every case shares: a statement's text met again with
            // other values is evaluated with the targets its earlier executes rendered.
            if let Some(prepared) = warm.prepare_route(
                schema,
                mode,
                shoal_router::charset::Charsets::UTF8MB4,
                &c.sql,
            ) {
                let plan = render(
                    &topo,
                    &warm.route_prepared(
                        &prepared,
                        schema,
                        mode,
                        shoal_router::charset::Charsets::UTF8MB4,
                        &c.params,
                    ),
                );
                if plan != cold {
                    failures.push(format!(
                        "{}: `{}`\n  plan differs when prepared earlier:\n--- cold\n{cold}\n--- prepared\n{plan}",
                        f.display(),
                        c.comment
                    ));
                }
            }
            if cold != cached || cold != again {
                failures.push(format!(
                    "{}: `{}`\n  plan differs with a warm cache:\n--- cold\n{cold}\n--- warm\n{cached}\n--- again\n{again}",
                    f.display(),
                    c.comment
                ));
            }
            if only.is_some() {
                println!("=== {}\n{}\n---\n{cold}\n", c.comment, c.sql);
            }
            if !update && cold != c.expected {
                failures.push(format!(
                    "{}: `{}`\n{}\n--- expected\n{}\n--- actual\n{cold}\n",
                    f.display(),
                    c.comment,
                    c.sql,
                    c.expected
                ));
            }
            actual.push(cold);
        }
        if update {
            write_file(f, &cases, &actual);
        }
    }
    if only.is_none() {
        assert!(
            prepared_checked >= 200,
            "only {prepared_checked} cases were checked as prepared statements"
        );
        assert!(
            kept_checked >= 50,
            "only {kept_checked} prepared cases were checked with a kept target"
        );
        assert!(
            total >= 250,
            "only {total} golden cases; the spec asks for at least 250"
        );
    }
    assert!(
        failures.is_empty(),
        "{} golden failures:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}
