//! Name ranges (`dn$1-21`, `dn1..dn21`), physical table name patterns (`t_order_{index:04}`)
//! and `host:port` addresses.

/// Largest number of names one range may produce; a guard against `dn$1-100000000` typos.
pub const MAX_RANGE_LEN: u64 = 100_000;

/// Expands a name that may hold one numeric range:
/// - Mycat style `prefix$A-Bsuffix`: `dn$1-3` → `dn1, dn2, dn3`; `db$1-2_x` → `db1_x, db2_x`;
/// - `prefixA..prefixB` (or `prefixA..B`): `dn1..dn3` → `dn1, dn2, dn3`;
/// - anything else is one name.
///
/// A start written with leading zeros pads every number to its width: `db$01-12` → `db01`…`db12`.
pub fn expand(s: &str) -> Result<Vec<String>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty name".into());
    }
    if let Some(dollar) = s.find('$') {
        let (prefix, rest) = (&s[..dollar], &s[dollar + 1..]);
        let a_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let after_a = &rest[a_len..];
        let Some(after_dash) = after_a.strip_prefix('-') else {
            return Err(format!(
                "bad range {s:?}: expected prefix$START-END, e.g. dn$1-8"
            ));
        };
        let b_len = after_dash
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after_dash.len());
        let suffix = &after_dash[b_len..];
        if a_len == 0 || b_len == 0 || suffix.contains('$') {
            return Err(format!(
                "bad range {s:?}: expected prefix$START-END, e.g. dn$1-8"
            ));
        }
        return numbered(s, prefix, &rest[..a_len], &after_dash[..b_len], suffix);
    }
    if let Some((left, right)) = s.split_once("..") {
        let (lp, la) = split_trailing_digits(left);
        let (rp, rb) = split_trailing_digits(right);
        if la.is_empty() || rb.is_empty() || !(rp == lp || rp.is_empty()) || right.contains("..") {
            return Err(format!(
                "bad range {s:?}: expected nameSTART..nameEND, e.g. dn1..dn8"
            ));
        }
        return numbered(s, lp, la, rb, "");
    }
    if s.contains(char::is_whitespace) {
        return Err(format!("bad name {s:?}: names cannot contain spaces"));
    }
    Ok(vec![s.to_string()])
}

fn split_trailing_digits(s: &str) -> (&str, &str) {
    let cut = s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    (&s[..cut], &s[cut..])
}

fn numbered(
    whole: &str,
    prefix: &str,
    a: &str,
    b: &str,
    suffix: &str,
) -> Result<Vec<String>, String> {
    let parse = |d: &str| {
        d.parse::<u64>()
            .map_err(|_| format!("bad range {whole:?}: number {d} too large"))
    };
    let (start, end) = (parse(a)?, parse(b)?);
    if start > end {
        return Err(format!(
            "bad range {whole:?}: start {start} is above end {end}"
        ));
    }
    if end - start >= MAX_RANGE_LEN {
        return Err(format!(
            "bad range {whole:?}: more than {MAX_RANGE_LEN} names"
        ));
    }
    let width = if a.len() > 1 && a.starts_with('0') {
        a.len()
    } else {
        0
    };
    Ok((start..=end)
        .map(|i| format!("{prefix}{i:0width$}{suffix}"))
        .collect())
}

/// Splits `host:port` (or `[v6]:port`); `None` when the port is missing or not a number.
pub fn split_host_port(addr: &str) -> Option<(&str, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() || port == 0 {
        return None;
    }
    Some((host, port))
}

/// A physical table name pattern: literal text with `{index}`, `{local}` and `{name}` fields,
/// optionally zero-padded (`{index:04}`).
/// - `index`: the shard index (0-based, across all datanodes);
/// - `local`: the table's position within its datanode (0-based);
/// - `name`: the logical table name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhysicalName {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Field { field: Field, width: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Index,
    Local,
    Name,
}

impl PhysicalName {
    pub fn parse(pattern: &str) -> Result<PhysicalName, String> {
        let mut parts = Vec::new();
        let mut rest = pattern;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_string()));
            }
            let Some(close) = rest[open..].find('}') else {
                return Err(format!("unclosed '{{' in {pattern:?}"));
            };
            let spec = &rest[open + 1..open + close];
            let (name, fmt) = spec.split_once(':').unwrap_or((spec, ""));
            let field = match name {
                "index" => Field::Index,
                "local" => Field::Local,
                "name" => Field::Name,
                _ => {
                    return Err(format!(
                        "unknown field {{{name}}} in {pattern:?}: use {{index}}, {{local}} or {{name}}"
                    ));
                }
            };
            let width = if fmt.is_empty() {
                0
            } else if fmt.starts_with('0') && fmt.len() > 1 && field != Field::Name {
                fmt[1..].parse().map_err(|_| {
                    format!("bad width {fmt:?} in {pattern:?}: use e.g. {{index:04}}")
                })?
            } else {
                return Err(format!(
                    "bad format {fmt:?} in {pattern:?}: use e.g. {{index:04}}"
                ));
            };
            parts.push(Part::Field { field, width });
            rest = &rest[open + close + 1..];
        }
        if rest.contains('}') {
            return Err(format!("unmatched '}}' in {pattern:?}"));
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        if parts.is_empty() {
            return Err("empty physical name".into());
        }
        Ok(PhysicalName { parts })
    }

    /// Whether the name varies with the shard (has `{index}` or `{local}`).
    pub fn is_numbered(&self) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, Part::Field { field, .. } if *field != Field::Name))
    }

    pub fn render(&self, logical: &str, index: usize, local: usize) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Field { field, width } => {
                    let width = *width;
                    match field {
                        Field::Index => out.push_str(&format!("{index:0width$}")),
                        Field::Local => out.push_str(&format!("{local:0width$}")),
                        Field::Name => out.push_str(logical),
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_expand() {
        assert_eq!(expand("dn$1-3").unwrap(), ["dn1", "dn2", "dn3"]);
        assert_eq!(expand("dn1..dn3").unwrap(), ["dn1", "dn2", "dn3"]);
        assert_eq!(expand("dn1..3").unwrap(), ["dn1", "dn2", "dn3"]);
        assert_eq!(expand("db$08-10").unwrap(), ["db08", "db09", "db10"]);
        assert_eq!(expand("db$1-2_x").unwrap(), ["db1_x", "db2_x"]);
        assert_eq!(expand("dn7").unwrap(), ["dn7"]);
        assert_eq!(expand("dn$4-4").unwrap(), ["dn4"]);
        assert_eq!(expand("dn$1-21").unwrap().len(), 21);
    }

    #[test]
    fn bad_ranges_are_errors() {
        for bad in [
            "dn$5-2", "dn5..dn2", "dn$-2", "dn$1", "dn$a-b", "dn1..x3", "a..b", "", "d n",
        ] {
            assert!(expand(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(
            expand("dn$5-2")
                .unwrap_err()
                .contains("start 5 is above end 2")
        );
    }

    #[test]
    fn physical_names() {
        let p = PhysicalName::parse("t_order_{index:04}").unwrap();
        assert_eq!(p.render("t_order", 7, 1), "t_order_0007");
        let p = PhysicalName::parse("{name}_{local}").unwrap();
        assert_eq!(p.render("t", 7, 1), "t_1");
        assert!(p.is_numbered());
        assert!(!PhysicalName::parse("orders").unwrap().is_numbered());
        for bad in [
            "t_{idx}",
            "t_{index",
            "t_}",
            "t_{index:4}",
            "t_{name:03}",
            "",
        ] {
            assert!(PhysicalName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn host_port() {
        assert_eq!(split_host_port("127.0.0.1:3306"), Some(("127.0.0.1", 3306)));
        assert_eq!(split_host_port("[::1]:3306"), Some(("::1", 3306)));
        assert_eq!(split_host_port("db.local:3306"), Some(("db.local", 3306)));
        assert_eq!(split_host_port("db.local"), None);
        assert_eq!(split_host_port(":3306"), None);
        assert_eq!(split_host_port("h:99999"), None);
    }
}
