//! The Mycat report's test table (seeds/003): 15 columns, InnoDB, utf8, deliberately no primary
//! key and no index; rows are generated from their FACTID so that any row can be re-derived.

use std::fmt::Write;

pub const TABLE: &str = "T_TEST_SINGLE_TABLE";
pub const KEY: &str = "FACTID";
pub const INDEX: &str = "IDX_FACTID";

/// The report's DDL, comments dropped.
pub fn create_table_sql() -> String {
    format!(
        "CREATE TABLE `{TABLE}` (\
         `FACTID` int(10) NOT NULL, \
         `CNNAME` varchar(128) DEFAULT NULL, \
         `ENNAME` varchar(128) DEFAULT NULL, \
         `ABBRNAME` varchar(64) DEFAULT NULL, \
         `ACCOUNT` varchar(128) DEFAULT NULL, \
         `FACTDESC` varchar(255) DEFAULT NULL, \
         `CONTACT` varchar(60) DEFAULT NULL, \
         `ADDRESS` varchar(160) DEFAULT NULL, \
         `TELEPHONE` varchar(80) DEFAULT NULL, \
         `EMAIL` varchar(160) DEFAULT NULL, \
         `SALENUM` int(10) unsigned DEFAULT NULL, \
         `TOTALVISIT` int(10) unsigned DEFAULT NULL, \
         `MALIVERATIO` int(10) unsigned DEFAULT NULL, \
         `DALIVERATIO` int(11) unsigned DEFAULT NULL, \
         `ALIVENUM` int(11) unsigned DEFAULT NULL\
         ) ENGINE=InnoDB DEFAULT CHARSET=utf8"
    )
}

pub fn drop_table_sql() -> String {
    format!("DROP TABLE IF EXISTS `{TABLE}`")
}

pub fn create_index_sql() -> String {
    format!("CREATE INDEX `{INDEX}` ON `{TABLE}` (`{KEY}`)")
}

/// The SALENUM of row `id` (scatter aggregates check `SUM(SALENUM)` against this).
pub fn salenum(id: u64) -> u64 {
    id % 100_000
}

/// Sum of `salenum` over `1..=n`, in closed form (the expected answer of `SUM(SALENUM)`).
pub fn salenum_sum(n: u64) -> u64 {
    let (full, rest) = (n / 100_000, n % 100_000);
    // Each full block of 100,000 ids contributes 0 + 1 + ... + 99,999; the rest 1..=rest.
    full * (99_999 * 100_000 / 2) + rest * (rest + 1) / 2
}

/// `INSERT INTO T_TEST_SINGLE_TABLE (...) VALUES (...), ...` for ids `first..first + n`.
pub fn insert_sql(first: u64, n: u64) -> String {
    let mut sql = String::with_capacity(160 + n as usize * 420);
    sql.push_str(
        "INSERT INTO `T_TEST_SINGLE_TABLE` (FACTID, CNNAME, ENNAME, ABBRNAME, ACCOUNT, FACTDESC, \
         CONTACT, ADDRESS, TELEPHONE, EMAIL, SALENUM, TOTALVISIT, MALIVERATIO, DALIVERATIO, \
         ALIVENUM) VALUES ",
    );
    for id in first..first + n {
        if id != first {
            sql.push_str(", ");
        }
        let _ = write!(
            sql,
            "({id}, '终端厂商{id}', 'Terminal Vendor {id} Co., Ltd.', 'TV{id}', 'oem_admin_{id}', \
             'OEM terminal vendor number {id}: handsets, tablets and set-top boxes sold through \
             provincial carriers since 2009.', 'Contact {id}', 'No. {} Industrial Road, \
             Nanshan District, Shenzhen', '+86-755-{:08}', 'vendor{id}@example.com', {}, {}, {}, \
             {}, {})",
            id % 997,
            id % 100_000_000,
            salenum(id),
            id * 7 % 1_000_000,
            id % 100,
            id % 37,
            id % 5000
        );
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salenum_sum_matches_the_plain_sum() {
        for n in [0, 1, 99_999, 100_000, 100_001, 250_123] {
            assert_eq!(salenum_sum(n), (1..=n).map(salenum).sum::<u64>(), "n={n}");
        }
    }

    #[test]
    fn insert_lists_every_row_once() {
        let sql = insert_sql(5, 3);
        assert_eq!(sql.matches("'TV").count(), 3);
        assert!(sql.contains("(5, ") && sql.contains("(7, ") && !sql.contains("(8, "));
    }
}
