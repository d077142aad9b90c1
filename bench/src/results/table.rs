//! CSV (RFC 4180 quoting) and markdown tables from rows of cells.

use std::fmt::Write;

/// A column of a CSV file: its header beside the function that writes its cell, so that the
/// header and the cells cannot drift apart.
pub type Column<T> = (&'static str, fn(&T) -> String);

/// A named CSV file, rendered.
#[derive(Debug, Clone)]
pub struct Csv {
    pub name: String,
    pub text: String,
}

impl Csv {
    /// One line per record, one cell per column.
    pub fn of<T>(name: &str, records: impl IntoIterator<Item = T>, columns: &[Column<T>]) -> Csv {
        let header: Vec<&str> = columns.iter().map(|c| c.0).collect();
        let rows: Vec<Vec<String>> = records
            .into_iter()
            .map(|r| columns.iter().map(|c| (c.1)(&r)).collect())
            .collect();
        Csv {
            name: name.into(),
            text: csv_text(&header, &rows),
        }
    }
}

/// A number with a fixed count of decimals, as every CSV writes its measured figures.
pub fn fixed(v: f64, decimals: usize) -> String {
    format!("{v:.decimals$}")
}

pub fn csv_text(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let cells: Vec<String> = cells.map(csv_cell).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    };
    line(&mut out, &mut header.iter().copied());
    for row in rows {
        line(&mut out, &mut row.iter().map(String::as_str));
    }
    out
}

fn csv_cell(cell: &str) -> String {
    if cell.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.to_string()
    }
}

/// A markdown table; `right` lists the columns to right-align (numbers).
pub fn markdown_table(header: &[&str], right: &[usize], rows: &[Vec<String>]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "| {} |", header.join(" | "));
    let align: Vec<&str> = (0..header.len())
        .map(|i| if right.contains(&i) { "---:" } else { "---" })
        .collect();
    let _ = writeln!(md, "|{}|", align.join("|"));
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(md, "| {} |", cells.join(" | "));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_only_what_needs_it() {
        let text = csv_text(
            &["plan", "note"],
            &[
                vec!["1".into(), "a, \"b\"".into()],
                vec!["2".into(), "c".into()],
            ],
        );
        assert_eq!(text, "plan,note\n1,\"a, \"\"b\"\"\"\n2,c\n");
    }

    #[test]
    fn csv_columns_keep_header_and_cells_together() {
        let cols: [Column<(u8, f64)>; 2] = [("n", |r| r.0.to_string()), ("v", |r| fixed(r.1, 2))];
        let csv = Csv::of("x.csv", [(1, 0.5), (2, 1.0 / 3.0)], &cols);
        assert_eq!(csv.text, "n,v\n1,0.50\n2,0.33\n");
        assert_eq!(Csv::of("e.csv", [], &cols).text, "n,v\n");
    }

    #[test]
    fn markdown_aligns_number_columns() {
        let md = markdown_table(&["a", "n"], &[1], &[vec!["x|y".into(), "3".into()]]);
        assert_eq!(md, "| a | n |\n|---|---:|\n| x\\|y | 3 |\n");
    }
}
