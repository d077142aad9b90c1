//! Every relative link in README.md and the Markdown under docs/ points to a file that exists,
//! and every `#anchor` into a Markdown file to one of its headings (named as GitHub names them).
//! Docs move (dated runs to docs/benchmarks.md, superseded reports deleted from docs/results/),
//! and a link left behind would send a reader nowhere without anyone noticing.
//!
//! No server is started: this reads files only.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// README.md and every `.md` file under docs/, sorted.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The lines of a Markdown text outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// A line without its inline code spans (`` `[a](b)` `` is not a link).
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The targets of the inline links `[label](target)` and images `![alt](target)` of a line.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut out = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) => {
                let target = after[..end].split_whitespace().next().unwrap_or("");
                out.push(target.to_string());
                rest = &after[end..];
            }
            None => break,
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, every character that is not a letter, digit,
/// space, `-` or `_` dropped, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor of a Markdown text: its headings' slugs, a repeated one with `-1`, `-2`, ...
fn anchors(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#'));
        let mut candidate = base.clone();
        let mut n = 0;
        while out.contains(&candidate) {
            n += 1;
            candidate = format!("{base}-{n}");
        }
        out.insert(candidate);
    }
    out
}

/// The broken links of one document, as `file:line: target (why)`.
fn broken_links(root: &Path, doc: &Path, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let dir = doc.parent().expect("a document has a directory");
    let shown = doc.strip_prefix(root).unwrap_or(doc).display().to_string();
    for (number, line) in prose_lines(text) {
        for target in link_targets(line) {
            if target.is_empty()
                || target.contains("://")
                || target.starts_with("mailto:")
                || target.starts_with('<')
            {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                doc.to_path_buf()
            } else {
                dir.join(path)
            };
            if !file.exists() {
                out.push(format!("{shown}:{number}: {target} (no such file)"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if file.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let target_text = if file == doc {
                text.to_string()
            } else {
                fs::read_to_string(&file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()))
            };
            if !anchors(&target_text).contains(anchor) {
                out.push(format!("{shown}:{number}: {target} (no such heading)"));
            }
        }
    }
    out
}

#[test]
fn readme_and_docs_links_resolve() {
    let root = workspace_root();
    let docs = documents(&root);
    assert!(
        docs.len() > 5,
        "expected README.md and docs/*.md, found {docs:?}"
    );
    let mut broken = Vec::new();
    for doc in &docs {
        let text =
            fs::read_to_string(doc).unwrap_or_else(|e| panic!("read {}: {e}", doc.display()));
        broken.extend(broken_links(&root, doc, &text));
    }
    assert!(
        broken.is_empty(),
        "{} broken link(s):\n{}",
        broken.len(),
        broken.join("\n")
    );
}

/// The checker itself: it finds a missing file, a missing heading, and ignores what is not a
/// relative link.
#[test]
fn checker_finds_broken_links() {
    let root = workspace_root();
    let doc = root.join("README.md");
    let text = "# Title: one `two`\n\n## Repeated\n\n## Repeated\n\n\
        [ok](#title-one-two) [ok](#repeated-1) [ok](docs/config.md#durations)\n\
        [gone](docs/no-such-file.md) [gone](#no-such-heading) [gone](docs/config.md#nope)\n\
        [web](https://example.com/x) `[code](not/a/link.md)`\n\
        ```\n[fenced](not/a/link.md)\n```\n";
    let broken = broken_links(&root, &doc, text);
    assert_eq!(
        broken,
        vec![
            "README.md:8: docs/no-such-file.md (no such file)",
            "README.md:8: #no-such-heading (no such heading)",
            "README.md:8: docs/config.md#nope (no such heading)",
        ]
    );
    assert_eq!(
        slug("Read/write splitting"),
        "readwrite-splitting",
        "GitHub drops the slash"
    );
    assert_eq!(
        slug("Pooled connections follow their session to its core (issue 27, 2026-12-05 evening)"),
        "pooled-connections-follow-their-session-to-its-core-issue-27-2026-12-05-evening"
    );
}

/// A YAML text without its comments, trailing spaces and blank lines (no value in these files
/// holds a `#`).
fn yaml_without_comments(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim_end().to_string())
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// The README's configuration example is `conf/db-per-shard.yaml` (which the router's
/// `config_examples` test validates) without its comments: it cannot drift from a file that
/// loads.
#[test]
fn readme_config_example_is_a_conf_file() {
    let root = workspace_root();
    let readme = fs::read_to_string(root.join("README.md")).expect("read README.md");
    let block: String = readme
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README.md has a ```yaml block")
        .to_string();
    assert!(
        readme.contains("[`conf/db-per-shard.yaml`](conf/db-per-shard.yaml)"),
        "README.md names the file its example is"
    );
    let conf = fs::read_to_string(root.join("conf/db-per-shard.yaml"))
        .expect("read conf/db-per-shard.yaml");
    assert_eq!(yaml_without_comments(&block), yaml_without_comments(&conf));
}

/// README.md is the user's door: what Shoal is, how to run it, the support matrix in short and
/// the current results as one table. History and long tables belong in docs/.
#[test]
fn readme_stays_under_12_kb() {
    let len = fs::metadata(workspace_root().join("README.md"))
        .expect("README.md")
        .len();
    assert!(
        len < 12 * 1024,
        "README.md is {len} bytes: move history and long tables to docs/"
    );
}
