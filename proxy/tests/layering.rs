//! The layering of the proxy's top-level modules, checked against `proxy/layers.txt`.
//!
//! Every `crate::<module>` path in `proxy/src` (in `use` lines and in code, comments and
//! strings left out) is an import edge between two top-level modules. An edge is allowed when
//! the imported module stands on a line below the importer's in `layers.txt`; an edge against
//! that order must be listed under `[debt]`. The check fails when an import appears that is
//! neither, when a module is on no line, and when a debt edge is gone from the source but still
//! listed (so the debt only shrinks). On failure it prints the cycles the offending edges close.
//!
//! Test code is left out (`#[cfg(test)]` items and `tests.rs` files): a test may build its
//! fixture from any layer; the layering is that of the program that ships.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// `from -> to` between top-level modules, with the files (relative to `src/`) that import.
type Edges = BTreeMap<(String, String), BTreeSet<String>>;

#[test]
fn imports_follow_the_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec_text = std::fs::read_to_string(root.join("layers.txt")).expect("proxy/layers.txt");
    let spec = Layers::parse(&spec_text).unwrap_or_else(|e| panic!("proxy/layers.txt: {e}"));
    let src = root.join("src");
    let modules = top_level_modules(&src);
    let edges = edges_in(&src, &modules);
    let problems = spec.check(&modules, &edges);
    assert!(
        problems.is_empty(),
        "the proxy's imports do not follow proxy/layers.txt:\n{}",
        problems.join("\n")
    );
}

/// The layers, top to bottom, and the edges against them that are tolerated for now.
struct Layers {
    /// Module -> its line (0 = top).
    line: BTreeMap<String, usize>,
    debt: BTreeSet<(String, String)>,
}

impl Layers {
    fn parse(text: &str) -> Result<Layers, String> {
        let mut line = BTreeMap::new();
        let mut debt = BTreeSet::new();
        let mut in_debt = false;
        let mut n = 0;
        for (i, raw) in text.lines().enumerate() {
            let l = raw.split('#').next().unwrap_or("").trim();
            if l.is_empty() {
                continue;
            }
            if l == "[debt]" {
                in_debt = true;
                continue;
            }
            if in_debt {
                let (a, b) = l
                    .split_once("->")
                    .ok_or_else(|| format!("line {}: a debt line is `module -> module`", i + 1))?;
                debt.insert((a.trim().to_string(), b.trim().to_string()));
            } else {
                for m in l.split_whitespace() {
                    if line.insert(m.to_string(), n).is_some() {
                        return Err(format!("line {}: `{m}` is placed twice", i + 1));
                    }
                }
                n += 1;
            }
        }
        Ok(Layers { line, debt })
    }

    fn allowed(&self, from: &str, to: &str) -> bool {
        matches!((self.line.get(from), self.line.get(to)), (Some(a), Some(b)) if a < b)
    }

    /// Everything wrong, one message a line; empty when the source follows the layers.
    fn check(&self, modules: &BTreeSet<String>, edges: &Edges) -> Vec<String> {
        let mut out = Vec::new();
        for m in modules {
            if !self.line.contains_key(m) {
                out.push(format!(
                    "module `{m}` is on no line of proxy/layers.txt: place it in the layer it belongs to"
                ));
            }
        }
        for m in self.line.keys() {
            if !modules.contains(m) {
                out.push(format!(
                    "proxy/layers.txt places `{m}`, which is no module of proxy/src: remove it"
                ));
            }
        }
        let mut offending = Vec::new();
        for ((a, b), files) in edges {
            let key = (a.clone(), b.clone());
            if !self.allowed(a, b) && !self.debt.contains(&key) {
                out.push(format!(
                    "forbidden import {a} -> {b} (in {}): `{b}` is not below `{a}` in proxy/layers.txt",
                    files.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
                offending.push(key);
            }
        }
        for (a, b) in &self.debt {
            let key = (a.clone(), b.clone());
            if self.allowed(a, b) {
                out.push(format!(
                    "debt {a} -> {b} follows the layers: it is no debt, remove its line"
                ));
            } else if !edges.contains_key(&key) {
                out.push(format!(
                    "debt {a} -> {b} is paid (no such import any more): remove its line from [debt]"
                ));
            }
        }
        for (a, b) in &offending {
            match path(edges, b, a) {
                Some(p) => out.push(format!("  cycle: {a} -> {}", p.join(" -> "))),
                None => out.push(format!(
                    "  {a} -> {b} closes no cycle today: if it belongs, move `{b}` below `{a}`"
                )),
            }
        }
        if !out.is_empty() {
            let cycles: Vec<String> = self
                .debt
                .iter()
                .filter(|k| edges.contains_key(*k))
                .filter_map(|(a, b)| {
                    path(edges, b, a).map(|p| format!("{a} -> {}", p.join(" -> ")))
                })
                .collect();
            if !cycles.is_empty() {
                out.push("cycles the listed debt still closes:".into());
                out.extend(cycles.into_iter().map(|c| format!("  {c}")));
            }
        }
        out
    }
}

/// The shortest chain of imports from `from` to `to`, both included.
fn path(edges: &Edges, from: &str, to: &str) -> Option<Vec<String>> {
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    let mut seen = BTreeSet::from([from]);
    while let Some(m) = queue.pop_front() {
        if m == to {
            let mut p = vec![to.to_string()];
            let mut at = to;
            while let Some(&b) = prev.get(at) {
                p.push(b.to_string());
                at = b;
            }
            p.reverse();
            return Some(p);
        }
        for (a, b) in edges.keys() {
            if a == m && seen.insert(b.as_str()) {
                prev.insert(b.as_str(), a.as_str());
                queue.push_back(b.as_str());
            }
        }
    }
    None
}

/// The crate's top-level modules: `src/<name>.rs` and `src/<name>/` (the crate roots aside).
fn top_level_modules(src: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(src).expect("proxy/src") {
        let p = e.expect("dir entry").path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            out.insert(name);
        } else if let Some(stem) = name.strip_suffix(".rs")
            && stem != "lib"
            && stem != "main"
        {
            out.insert(stem.to_string());
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("source dir") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn edges_in(src: &Path, modules: &BTreeSet<String>) -> Edges {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut edges = Edges::new();
    for f in files {
        let rel = f
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let first = rel.split('/').next().unwrap();
        let from = first.strip_suffix(".rs").unwrap_or(first);
        if !modules.contains(from) || rel.ends_with("/tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("source file");
        for to in crate_paths(&without_tests(&code_only(&text))) {
            if to != from && modules.contains(&to) {
                edges
                    .entry((from.to_string(), to))
                    .or_default()
                    .insert(rel.clone());
            }
        }
    }
    edges
}

/// The first segment of every `crate::` path: `crate::a::X`, `crate::{a::X, b}` (a and b).
fn crate_paths(code: &str) -> BTreeSet<String> {
    let b = code.as_bytes();
    let mut out = BTreeSet::new();
    let mut at = 0;
    while let Some(k) = code[at..].find("crate::") {
        let i = at + k;
        at = i + "crate::".len();
        let word_before =
            i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'$');
        if word_before {
            continue;
        }
        let rest = code[at..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // The group's own items: an identifier right after `{` or a `,` at depth 1.
            let mut depth = 1;
            let mut expect_item = true;
            let mut word = String::new();
            for c in group.chars() {
                if c.is_alphanumeric() || c == '_' {
                    word.push(c);
                    continue;
                }
                if !word.is_empty() {
                    if depth == 1 && expect_item {
                        out.insert(std::mem::take(&mut word));
                    }
                    word.clear();
                    expect_item = false;
                }
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => expect_item = true,
                    c if c.is_whitespace() => {}
                    _ => {}
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// The text with comments, string and character literals blanked (lines kept), so that a
/// `crate::` in a doc comment or a message is not read as an import.
fn code_only(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if (c[i] == 'r' || (c[i] == 'b' && next == Some('r')))
            && !prev_is_word(&c, i)
            && raw_string_start(&c, i + if c[i] == 'b' { 1 } else { 0 }).is_some()
        {
            let r = i + if c[i] == 'b' { 1 } else { 0 };
            let hashes = raw_string_start(&c, r).unwrap();
            i = r + 1 + hashes + 1;
            loop {
                if i >= c.len() {
                    break;
                }
                if c[i] == '"' && (0..hashes).all(|h| c.get(i + 1 + h) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push_str("\"\"");
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && char_literal_len(&c, i).is_some() {
            i += char_literal_len(&c, i).unwrap();
            out.push_str("' '");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// `code` (comments and literals already blanked) without its `#[cfg(test)]` items.
fn without_tests(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(k) = rest.find(MARK) {
        out.push_str(&rest[..k]);
        let item = &rest[k..];
        // The item ends at its first `;` outside brackets, or where its first `{` closes.
        let mut depth = 0;
        let mut brackets = 0i32;
        let mut end = item.len();
        for (j, ch) in item.char_indices().skip(MARK.len()) {
            match ch {
                '(' | '[' => brackets += 1,
                ')' | ']' => brackets -= 1,
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = j + 1;
                        break;
                    }
                }
                ';' if depth == 0 && brackets == 0 => {
                    end = j + 1;
                    break;
                }
                _ => {}
            }
        }
        out.extend(
            item[..end]
                .chars()
                .map(|ch| if ch == '\n' { '\n' } else { ' ' }),
        );
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

fn prev_is_word(c: &[char], i: usize) -> bool {
    i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_')
}

/// At `r` (an `r`): the number of `#` when a raw string starts there.
fn raw_string_start(c: &[char], r: usize) -> Option<usize> {
    if c.get(r) != Some(&'r') {
        return None;
    }
    let mut h = 0;
    while c.get(r + 1 + h) == Some(&'#') {
        h += 1;
    }
    (c.get(r + 1 + h) == Some(&'"')).then_some(h)
}

/// At a `'`: the length of the character literal that starts there (`None`: a lifetime).
fn char_literal_len(c: &[char], i: usize) -> Option<usize> {
    if c.get(i + 1) == Some(&'\\') {
        let end = (i + 3..c.len().min(i + 12)).find(|&j| c[j] == '\'')?;
        Some(end - i + 1)
    } else if c.get(i + 2) == Some(&'\'') {
        Some(3)
    } else {
        None
    }
}

#[test]
fn reads_paths_not_comments_or_strings() {
    let code = code_only(
        "use crate::{a::X, b::{c, d::E}, f};\n\
         // crate::commented\n\
         /// [`crate::doc`]\n\
         let s = \"crate::quoted\"; let r = r#\"crate::raw\"#;\n\
         let q = '\"'; fn g<'a>(x: &'a crate::g::T) {}\n\
         let y = crate::h::call(); let z = shoal_proxy::crate_like; $crate::m::n;\n\
         #[cfg(test)] mod tests { use crate::t::X; fn f() { crate::u::g(); } }\n\
         #[cfg(test)] use crate::v::Y;\n\
         #[cfg(test)] fn w() -> [u8; 2] { crate::w::make() }\n",
    );
    let code = without_tests(&code);
    let got: Vec<String> = crate_paths(&code).into_iter().collect();
    assert_eq!(got, ["a", "b", "f", "g", "h"]);
}

#[test]
fn flags_new_edges_and_paid_debt() {
    let spec = Layers::parse("top\nmid # comment\nlow\n[debt]\nlow -> top\nmid -> top\n").unwrap();
    let modules: BTreeSet<String> = ["top", "mid", "low"].map(String::from).into();
    let mut edges = Edges::new();
    let mut add = |a: &str, b: &str| {
        edges
            .entry((a.to_string(), b.to_string()))
            .or_default()
            .insert(format!("{a}.rs"));
    };
    add("top", "mid");
    add("mid", "low");
    add("low", "top");
    add("low", "mid");
    let problems = spec.check(&modules, &edges);
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("forbidden import low -> mid")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("cycle: low -> mid -> low")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("debt mid -> top is paid")),
        "{problems:?}"
    );
    assert!(
        !problems.iter().any(|p| p.contains("debt low -> top")),
        "{problems:?}"
    );
}
