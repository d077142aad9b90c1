//! Running a statement on one side and comparing two answers.
//!
//! Values are compared as the client receives them: text protocol cells as their bytes, binary
//! protocol values in one fixed rendering (both sides of a comparison use the same protocol).
//! What the query leaves open is not compared: the order of rows without ORDER BY, the order
//! inside a group of ORDER BY ties, which members of a tie group a LIMIT cuts, and which spelling
//! of a collation-equal string represents a group (DISTINCT, GROUP BY, MIN, MAX).

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Row, Value};

/// How a string is reduced before comparing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Norm {
    Exact,
    /// `utf8mb4_general_ci` on ASCII: case-insensitive, trailing spaces ignored.
    Ci,
    /// `utf8mb4_bin` (PAD SPACE): trailing spaces ignored.
    Bin,
}

impl Norm {
    pub fn apply(self, v: &Option<String>) -> Option<String> {
        match (self, v) {
            (_, None) => None,
            (Norm::Exact, Some(s)) => Some(s.clone()),
            (Norm::Ci, Some(s)) => Some(s.trim_end_matches(' ').to_ascii_uppercase()),
            (Norm::Bin, Some(s)) => Some(s.trim_end_matches(' ').to_string()),
        }
    }
}

/// What a query's text fixes about its answer.
#[derive(Clone, Debug, Default)]
pub struct Check {
    /// ORDER BY keys as (result column, how ties are decided); empty: rows form a multiset.
    pub order: Vec<(usize, Norm)>,
    /// The ORDER BY keys include a unique column: every row's position is fixed.
    pub unique_order: bool,
    /// A LIMIT may cut the last tie group.
    pub limited: bool,
    /// An OFFSET may cut the first tie group.
    pub offset: bool,
    /// Columns whose value is any member of a collation class (DISTINCT, GROUP BY, MIN, MAX on
    /// a string): compared under that collation.
    pub norm: Vec<(usize, Norm)>,
    /// MariaDB names a column's original table, or not, by the plan it picks: a `WITH ROLLUP`
    /// column has `org_table` "" where the grouping goes through a temporary table and the
    /// table's name where it reads an index in order (or the table is read as a constant), on
    /// the same rows. Here `org_table` is compared only where both sides name one; the table
    /// alias always is.
    pub origin_by_plan: bool,
}

pub type Cells = Vec<Option<String>>;

/// A column definition's schema, table (alias) and original table fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    pub schema: String,
    pub table: String,
    pub org_table: String,
}

/// A result set as the client saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// Column names and types (`MYSQL_TYPE_*`).
    pub columns: Vec<(String, String)>,
    /// Where each column comes from, as its definition says: (schema, table, original table).
    /// Compared too: a physical name there is a wrong answer like a wrong value.
    pub origins: Vec<Origin>,
    pub rows: Vec<Cells>,
    /// Affected rows of a statement without a result set.
    pub affected: u64,
}

/// Runs `sql` on `conn`: text protocol without `params`, prepared (binary protocol) with them.
pub async fn fetch(
    conn: &mut Conn,
    sql: &str,
    params: Option<&[Value]>,
) -> Result<Answer, mysql_async::Error> {
    match params {
        None => {
            let mut result = conn.query_iter(sql).await?;
            let columns = columns_of(result.columns_ref());
            let origins = origins_of(result.columns_ref());
            let rows: Vec<Row> = result.collect().await?;
            let affected = result.affected_rows();
            result.drop_result().await?;
            Ok(Answer {
                columns,
                origins,
                rows: rows.into_iter().map(cells).collect(),
                affected,
            })
        }
        Some(params) => {
            let mut result = conn
                .exec_iter(sql, Params::Positional(params.to_vec()))
                .await?;
            let columns = columns_of(result.columns_ref());
            let origins = origins_of(result.columns_ref());
            let rows: Vec<Row> = result.collect().await?;
            let affected = result.affected_rows();
            result.drop_result().await?;
            Ok(Answer {
                columns,
                origins,
                rows: rows.into_iter().map(cells).collect(),
                affected,
            })
        }
    }
}

pub(super) fn columns_of(cols: &[mysql_async::Column]) -> Vec<(String, String)> {
    cols.iter()
        .map(|c| (c.name_str().into_owned(), format!("{:?}", c.column_type())))
        .collect()
}

pub(super) fn origins_of(cols: &[mysql_async::Column]) -> Vec<Origin> {
    cols.iter()
        .map(|c| Origin {
            schema: c.schema_str().into_owned(),
            table: c.table_str().into_owned(),
            org_table: c.org_table_str().into_owned(),
        })
        .collect()
}

/// `Err` when the subject's column definitions say where a column comes from otherwise than
/// the oracle's: the same table alias and original table (a logical name, never a datanode's
/// physical table), and a schema that is not a datanode's database. (The schema itself differs:
/// the oracle's database is not the logical schema.)
pub fn compare_origins(oracle: &Answer, subject: &Answer, check: &Check) -> Result<(), String> {
    if oracle.origins.len() != subject.origins.len() {
        return Ok(()); // the column count is reported by `compare`
    }
    for (i, (o, s)) in oracle.origins.iter().zip(&subject.origins).enumerate() {
        let name = subject.columns.get(i).map_or("", |c| c.0.as_str());
        let by_plan = check.origin_by_plan && (o.org_table.is_empty() || s.org_table.is_empty());
        if (o.table != s.table && !(by_plan && (o.table.is_empty() || s.table.is_empty())))
            || (o.org_table != s.org_table && !by_plan)
        {
            return Err(format!(
                "column {i} ({name}) definition: oracle table {:?} org_table {:?}, subject table {:?} org_table {:?}",
                o.table, o.org_table, s.table, s.org_table
            ));
        }
        if s.schema.is_empty() != o.schema.is_empty()
            || super::schema::DATANODE_DATABASES.contains(&s.schema.as_str())
        {
            return Err(format!(
                "column {i} ({name}) definition: oracle schema {:?}, subject schema {:?} (a datanode's database, or one side without one)",
                o.schema, s.schema
            ));
        }
    }
    Ok(())
}

pub(super) fn cells(row: Row) -> Cells {
    row.unwrap().into_iter().map(cell).collect()
}

pub(super) fn cell(v: Value) -> Option<String> {
    match v {
        Value::NULL => None,
        Value::Bytes(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Value::Int(i) => Some(i.to_string()),
        Value::UInt(u) => Some(u.to_string()),
        Value::Float(f) => Some(format!("{f:?}")),
        Value::Double(d) => Some(format!("{d:?}")),
        Value::Date(y, m, d, h, mi, s, us) => Some(format!(
            "{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06}"
        )),
        Value::Time(neg, d, h, m, s, us) => Some(format!(
            "{}{d}d {h:02}:{m:02}:{s:02}.{us:06}",
            if neg { "-" } else { "" }
        )),
    }
}

/// `Ok` when `subject` is an answer `oracle`'s query could have given, else why not: the values
/// first, then the column definitions (so a wrong value is reported as such even where the
/// definitions differ too).
pub fn compare(oracle: &Answer, subject: &Answer, check: &Check) -> Result<(), String> {
    compare_values(oracle, subject, check)?;
    compare_origins(oracle, subject, check)
}

/// Column names and types, and the rows as far as `check` fixes them.
fn compare_values(oracle: &Answer, subject: &Answer, check: &Check) -> Result<(), String> {
    if oracle.columns.len() != subject.columns.len() {
        return Err(format!(
            "column count: oracle {}, subject {}",
            oracle.columns.len(),
            subject.columns.len()
        ));
    }
    for (i, (o, s)) in oracle.columns.iter().zip(&subject.columns).enumerate() {
        if o != s {
            return Err(format!(
                "column {i}: oracle {} {}, subject {} {}",
                o.0, o.1, s.0, s.1
            ));
        }
    }
    if oracle.rows.len() != subject.rows.len() {
        return Err(format!(
            "row count: oracle {}, subject {}",
            oracle.rows.len(),
            subject.rows.len()
        ));
    }
    let normalize = |rows: &[Cells]| -> Vec<Cells> {
        rows.iter()
            .map(|r| {
                let mut r = r.clone();
                for &(c, n) in &check.norm {
                    if let Some(v) = r.get_mut(c) {
                        *v = n.apply(v);
                    }
                }
                r
            })
            .collect()
    };
    let (o, s) = (normalize(&oracle.rows), normalize(&subject.rows));
    if check.order.is_empty() {
        return same_multiset(o, s).map_err(|row| format!("rows differ (as multisets): {row}"));
    }
    if check.unique_order {
        return match o.iter().zip(&s).position(|(a, b)| a != b) {
            None => Ok(()),
            Some(i) => Err(format!(
                "row {i} differs (order fixed): oracle {}, subject {}",
                show_row(&o[i]),
                show_row(&s[i])
            )),
        };
    }
    let (og, sg) = (tie_groups(&o, &check.order), tie_groups(&s, &check.order));
    if og.len() != sg.len() {
        return Err(format!(
            "ORDER BY tie groups: oracle {}, subject {}",
            og.len(),
            sg.len()
        ));
    }
    let last = og.len().saturating_sub(1);
    for (i, (a, b)) in og.into_iter().zip(sg).enumerate() {
        if a.key != b.key || a.rows.len() != b.rows.len() {
            return Err(format!(
                "ORDER BY tie group {i}: oracle key {} x{}, subject key {} x{}",
                show_row(&a.key),
                a.rows.len(),
                show_row(&b.key),
                b.rows.len()
            ));
        }
        // A LIMIT/OFFSET may take any members of the tie group it cuts.
        let cut = (check.limited && i == last) || (check.offset && i == 0);
        if !cut {
            same_multiset(a.rows, b.rows)
                .map_err(|row| format!("ORDER BY tie group {i} differs (as multisets): {row}"))?;
        }
    }
    Ok(())
}

struct TieGroup {
    key: Cells,
    rows: Vec<Cells>,
}

/// Consecutive rows with equal ORDER BY keys (under each key's collation).
fn tie_groups(rows: &[Cells], order: &[(usize, Norm)]) -> Vec<TieGroup> {
    let mut groups: Vec<TieGroup> = Vec::new();
    for r in rows {
        let key: Cells = order
            .iter()
            .map(|&(c, n)| r.get(c).map(|v| n.apply(v)).unwrap_or(None))
            .collect();
        match groups.last_mut() {
            Some(g) if g.key == key => g.rows.push(r.clone()),
            _ => groups.push(TieGroup {
                key,
                rows: vec![r.clone()],
            }),
        }
    }
    groups
}

/// `Err` names a row one side has more often than the other.
fn same_multiset(mut a: Vec<Cells>, mut b: Vec<Cells>) -> Result<(), String> {
    a.sort();
    b.sort();
    if a == b {
        return Ok(());
    }
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Less => return Err(format!("only oracle has {}", show_row(&a[i]))),
            std::cmp::Ordering::Greater => {
                return Err(format!("only subject has {}", show_row(&b[j])));
            }
        }
    }
    if i < a.len() {
        Err(format!("only oracle has {}", show_row(&a[i])))
    } else {
        Err(format!("only subject has {}", show_row(&b[j])))
    }
}

pub fn show_row(r: &Cells) -> String {
    let cells: Vec<String> = r
        .iter()
        .map(|c| match c {
            None => "NULL".to_string(),
            Some(s) => format!("{s:?}"),
        })
        .collect();
    format!("({})", cells.join(", "))
}

/// The first `max` rows of an answer, one per line, for a mismatch report.
pub fn show_answer(a: &Answer, max: usize) -> String {
    let names: Vec<&str> = a.columns.iter().map(|c| c.0.as_str()).collect();
    let mut out = format!("      [{}] {} rows\n", names.join(", "), a.rows.len());
    for r in a.rows.iter().take(max) {
        out.push_str(&format!("      {}\n", show_row(r)));
    }
    if a.rows.len() > max {
        out.push_str(&format!("      ... {} more\n", a.rows.len() - max));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ans(rows: &[&[Option<&str>]]) -> Answer {
        Answer {
            columns: vec![("k".into(), "T".into()), ("v".into(), "T".into())],
            origins: vec![Origin::default(), Origin::default()],
            rows: rows
                .iter()
                .map(|r| r.iter().map(|c| c.map(str::to_string)).collect())
                .collect(),
            affected: 0,
        }
    }

    #[test]
    fn multisets_ignore_order_but_not_counts() {
        let a = ans(&[&[Some("1"), None], &[Some("2"), Some("x")]]);
        let b = ans(&[&[Some("2"), Some("x")], &[Some("1"), None]]);
        assert!(compare(&a, &b, &Check::default()).is_ok());
        let c = ans(&[&[Some("2"), Some("x")], &[Some("2"), Some("x")]]);
        assert!(compare(&a, &c, &Check::default()).is_err());
    }

    #[test]
    fn ties_compare_as_multisets_and_groups_in_order() {
        let order = Check {
            order: vec![(0, Norm::Ci)],
            ..Check::default()
        };
        let a = ans(&[
            &[Some("a"), Some("1")],
            &[Some("A "), Some("2")],
            &[Some("b"), Some("3")],
        ]);
        let b = ans(&[
            &[Some("A "), Some("2")],
            &[Some("a"), Some("1")],
            &[Some("b"), Some("3")],
        ]);
        assert!(compare(&a, &b, &order).is_ok());
        let c = ans(&[
            &[Some("b"), Some("3")],
            &[Some("a"), Some("1")],
            &[Some("A "), Some("2")],
        ]);
        assert!(compare(&a, &c, &order).is_err(), "tie groups out of order");
        let d = ans(&[
            &[Some("a"), Some("1")],
            &[Some("A "), Some("9")],
            &[Some("b"), Some("3")],
        ]);
        assert!(
            compare(&a, &d, &order).is_err(),
            "a changed value inside a tie group"
        );
    }

    #[test]
    fn a_limit_may_cut_the_last_tie_group_anywhere() {
        let check = Check {
            order: vec![(0, Norm::Exact)],
            limited: true,
            ..Check::default()
        };
        let a = ans(&[&[Some("1"), Some("a")], &[Some("2"), Some("b")]]);
        let b = ans(&[&[Some("1"), Some("a")], &[Some("2"), Some("c")]]);
        assert!(compare(&a, &b, &check).is_ok());
        let c = ans(&[&[Some("1"), Some("z")], &[Some("2"), Some("c")]]);
        assert!(compare(&a, &c, &check).is_err());
    }

    #[test]
    fn representatives_compare_under_their_collation() {
        let check = Check {
            norm: vec![(0, Norm::Ci)],
            ..Check::default()
        };
        let a = ans(&[&[Some("new"), Some("3")]]);
        let b = ans(&[&[Some("NEW "), Some("3")]]);
        assert!(compare(&a, &b, &check).is_ok());
        assert!(compare(&a, &b, &Check::default()).is_err());
    }

    #[test]
    fn columns_are_checked() {
        let a = ans(&[]);
        let mut b = ans(&[]);
        b.columns[1].0 = "w".into();
        assert!(compare(&a, &b, &Check::default()).is_err());
    }

    #[test]
    fn physical_names_in_column_definitions_are_mismatches() {
        let mut a = ans(&[]);
        a.origins[0] = Origin {
            schema: "diff_oracle".into(),
            table: "l".into(),
            org_table: "ledger".into(),
        };
        let mut b = a.clone();
        b.origins[0].schema = "shop".into();
        assert!(compare(&a, &b, &Check::default()).is_ok());
        b.origins[0].org_table = "ledger_03".into();
        assert!(compare(&a, &b, &Check::default()).is_err());
        let mut c = a.clone();
        c.origins[0].schema = "dsh_1".into();
        assert!(compare(&a, &c, &Check::default()).is_err());
    }
}
