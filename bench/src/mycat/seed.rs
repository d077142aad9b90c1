//! The figures of the Mycat 1.5 report (`../shared/seeds/003_*.txt`, section 6), for the report
//! to put beside ours.

/// Insert QPS after each 20M-row round, and the report's average: (plan, connections, rounds).
pub const INSERTS: [(u8, usize, [f64; 5], f64); 6] = [
    (
        1,
        100,
        [20343.8, 20531.8, 19415.6, 19529.3, 17951.7],
        19554.4,
    ),
    (
        1,
        300,
        [20343.8, 20831.2, 19819.6, 19529.3, 19510.3],
        20006.8,
    ),
    (2, 100, [7862.8, 7701.6, 7448.4, 7388.4, 7097.2], 7499.7),
    (2, 300, [8565.9, 8230.1, 7936.2, 7504.4, 7288.4], 7905.0),
    (
        3,
        100,
        [12375.5, 12483.6, 12398.5, 12514.9, 12421.6],
        12438.8,
    ),
    (
        3,
        300,
        [13260.7, 13357.2, 13188.8, 13234.6, 13210.8],
        13250.4,
    ),
];

/// Rows after each round of the report.
pub const ROUND_ROWS: [u64; 5] = [20_000_000, 40_000_000, 60_000_000, 80_000_000, 100_000_000];

/// Selects by FACTID on 100M rows, 1000 selects, 10 threads: (plan, index, avg ms, QPS); `None`
/// latency is the report's "> 1 h" (QPS about 0).
pub const SELECTS: [(u8, bool, Option<f64>, f64); 4] = [
    (1, false, None, 0.0),
    (2, false, None, 0.0),
    (3, false, Some(6840.26), 1.46),
    (3, true, Some(3.27), 3027.02),
];

pub fn insert_average(plan: u8, conn: usize) -> Option<f64> {
    INSERTS
        .iter()
        .find(|r| r.0 == plan && r.1 == conn)
        .map(|r| r.3)
}
