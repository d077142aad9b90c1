//! `SET STATEMENT max_statement_time = n FOR statement`: the statement is planned and run as
//! written after `FOR`, under a deadline of `n` seconds (the proxy arms the one
//! `server.query_timeout` arms), so that it is interrupted with 1969 as on one MariaDB,
//! wherever it runs. Other variables in `SET STATEMENT` are still refused (the planner reads
//! them as a SET).

use std::time::Duration;

use super::lex::{TokKind, tokenize};

/// The limit and the statement of `SET STATEMENT max_statement_time = n [, ...] FOR statement`
/// (`None` for anything else). The last `n` given wins; 0 means no limit.
pub fn statement_time_for(sql: &str) -> Option<(Option<Duration>, &str)> {
    // Cheap reject first: every routed query passes here.
    let head = sql.trim_ascii_start().as_bytes();
    if head.len() < 4 || !head[..4].eq_ignore_ascii_case(b"SET ") {
        return None;
    }
    let toks = tokenize(sql).ok()?;
    let mut it = toks.iter();
    if !it.next()?.is_kw(sql, "SET") || !it.next()?.is_kw(sql, "STATEMENT") {
        return None;
    }
    loop {
        let (name, eq, value) = (it.next()?, it.next()?, it.next()?);
        if !name.is_kw(sql, "max_statement_time")
            || !eq.is_punct(sql, "=")
            || !matches!(value.kind, TokKind::Int | TokKind::Decimal)
        {
            return None;
        }
        let secs: f64 = value.text(sql).parse().ok()?;
        if !(0.0..=31_536_000.0).contains(&secs) {
            return None;
        }
        let limit = (secs > 0.0).then(|| Duration::from_secs_f64(secs));
        let next = it.next()?;
        if next.is_kw(sql, "FOR") {
            return Some((limit, &sql[next.end as usize..]));
        }
        if !next.is_punct(sql, ",") {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_statement_time_prefixes() {
        let (limit, rest) =
            statement_time_for("SET STATEMENT max_statement_time = 0.5 FOR SELECT 1").unwrap();
        assert_eq!(limit, Some(Duration::from_millis(500)));
        assert_eq!(rest, " SELECT 1");
        let (limit, rest) =
            statement_time_for("set statement MAX_STATEMENT_TIME=2 for update t set a=1").unwrap();
        assert_eq!(limit, Some(Duration::from_secs(2)));
        assert_eq!(rest.trim(), "update t set a=1");
        let (limit, _) =
            statement_time_for("SET STATEMENT max_statement_time=0 FOR SELECT 1").unwrap();
        assert_eq!(limit, None);
        for other in [
            "SET STATEMENT sql_mode='' FOR SELECT 1",
            "SET STATEMENT max_statement_time=1, sql_mode='' FOR SELECT 1",
            "SET max_statement_time = 1",
            "SELECT 1",
            "SET STATEMENT max_statement_time=-1 FOR SELECT 1",
        ] {
            assert_eq!(statement_time_for(other), None, "{other}");
        }
    }
}
