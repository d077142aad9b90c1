//! Stable-toolchain twin of the `router` fuzz target (`fuzz/`, nightly): the same entry point,
//! `shoal_router::fuzzing::route_text`, fed by proptest with arbitrary text and with SQL-shaped
//! token soup over the golden topology's tables, so CI catches a panic or a plan-cache
//! disagreement without running libFuzzer.

use proptest::prelude::*;
use shoal_router::fuzzing::route_text;

const TOKENS: &[&str] = &[
    "SELECT",
    "INSERT",
    "INTO",
    "UPDATE",
    "DELETE",
    "FROM",
    "WHERE",
    "AND",
    "OR",
    "NOT",
    "IN",
    "BETWEEN",
    "GROUP",
    "BY",
    "ORDER",
    "HAVING",
    "LIMIT",
    "OFFSET",
    "JOIN",
    "LEFT",
    "ON",
    "AS",
    "SET",
    "VALUES",
    "UNION",
    "ALL",
    "DISTINCT",
    "COUNT(*)",
    "SUM(",
    "AVG(",
    "MAX(",
    "(",
    ")",
    ",",
    ";",
    "=",
    "<",
    ">=",
    "<>",
    "+",
    "-",
    "*",
    "/",
    "||",
    "?",
    "1",
    "0",
    "-7",
    "12.50",
    "1e3",
    "18446744073709551616",
    "'a'",
    "'it''s'",
    "\"x\"",
    "`id`",
    "'\\\\'",
    "NULL",
    "id",
    "k",
    "c",
    "user_id",
    "order_id",
    "created",
    "sbtest1",
    "orders",
    "t_order",
    "t_user",
    "t_range",
    "order_item",
    "shop.orders",
    "analytics",
    "@v",
    "@@sql_mode",
    "/*",
    "*/",
    "/*!100000",
    "-- ",
    "#",
    "\n",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "USE",
    "SHOW",
    "TABLES",
    "CREATE",
    "TABLE",
    "DROP",
    "ALTER",
    "EXPLAIN",
    "FOR",
    "LOCK",
    "KILL",
    "CALL",
    "X'0A'",
    "b'1'",
    "_utf8mb4",
    "COLLATE",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "IS",
    "LIKE",
];

fn sql_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..24).prop_map(|t| t.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn routes_token_soup(sel in any::<u8>(), sql in sql_soup()) {
        let mut data = vec![sel];
        data.extend(sql.as_bytes());
        route_text(&data);
    }

    #[test]
    fn routes_arbitrary_text(data in prop::collection::vec(any::<u8>(), 0..120)) {
        route_text(&data);
    }

    #[test]
    fn routes_arbitrary_unicode(sel in any::<u8>(), sql in "\\PC{0,60}") {
        let mut data = vec![sel];
        data.extend(sql.as_bytes());
        route_text(&data);
    }
}
