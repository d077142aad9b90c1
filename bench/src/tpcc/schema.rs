//! The sysbench-tpcc schema (its column names and types, table names without its `1` suffix),
//! the database's size, and how the tables are sharded: every table but `item` by its warehouse
//! column with one `mod` rule (so warehouse `w` lives on datanode `w mod D`), `item` global.

/// Districts per warehouse (fixed by the spec).
pub const DISTRICTS: u32 = 10;

/// Each sharded table and its warehouse column, in load order.
pub const SHARDED: [(&str, &str); 8] = [
    ("warehouse", "w_id"),
    ("district", "d_w_id"),
    ("customer", "c_w_id"),
    ("history", "h_w_id"),
    ("orders", "o_w_id"),
    ("new_orders", "no_w_id"),
    ("order_line", "ol_w_id"),
    ("stock", "s_w_id"),
];

/// The table every datanode holds whole.
pub const GLOBAL: &str = "item";

/// How big the database is. The defaults are the spec's; smaller `items` and
/// `customers_per_district` exist for tests (the checks and the keying scale with them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Scale {
    pub warehouses: u32,
    /// Rows of `item`, and of `stock` per warehouse (spec: 100,000).
    pub items: u32,
    /// Customers per district, and orders per district (spec: 3,000).
    pub customers: u32,
}

impl Scale {
    pub fn standard(warehouses: u32) -> Scale {
        Scale {
            warehouses,
            items: 100_000,
            customers: 3_000,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.warehouses == 0 || self.warehouses > 32_000 {
            return Err("--warehouses must be 1..=32000".into());
        }
        if self.items < 10 {
            return Err("--items must be at least 10".into());
        }
        if self.customers < 10 {
            return Err("--customers-per-district must be at least 10".into());
        }
        Ok(())
    }

    /// Orders loaded per district (one per customer).
    pub fn orders(&self) -> u32 {
        self.customers
    }

    /// Undelivered orders loaded per district: the last 900 of 3,000 (30%).
    pub fn new_orders(&self) -> u32 {
        self.customers * 3 / 10
    }

    /// The first undelivered order id of the load (2101 at standard size).
    pub fn first_new_order(&self) -> u32 {
        self.orders() - self.new_orders() + 1
    }

    /// Initial `d_ytd` in cents: one 10.00 history row per customer (30,000.00 at standard size),
    /// so that consistency conditions 1, 8 and 9 hold at any size.
    pub fn district_ytd_cents(&self) -> i64 {
        i64::from(self.customers) * 1_000
    }

    /// Last names come from 0..=this (999 at standard size; fewer customers have fewer names).
    pub fn last_name_max(&self) -> u32 {
        (self.customers - 1).min(999)
    }

    /// Rows loaded, for the progress bar: item, then per warehouse its stock, district,
    /// customers, history, orders, new orders and order lines (about 10 per order).
    pub fn rows(&self) -> u64 {
        let w = u64::from(self.warehouses);
        let per_district = 2 * u64::from(self.customers)
            + u64::from(self.orders()) * 11
            + u64::from(self.new_orders());
        u64::from(self.items) + w * (1 + u64::from(self.items) + 10 * (1 + per_district))
    }
}

/// `DROP TABLE IF EXISTS` of every table.
pub fn drop_sql() -> Vec<String> {
    SHARDED
        .iter()
        .map(|t| t.0)
        .chain([GLOBAL])
        .map(|t| format!("DROP TABLE IF EXISTS {t}"))
        .collect()
}

/// The sysbench-tpcc tables (foreign keys left out), secondary indexes inline.
pub fn create_sql() -> Vec<String> {
    [
        "CREATE TABLE warehouse ( w_id smallint not null, w_name varchar(10), w_street_1 varchar(20), \
         w_street_2 varchar(20), w_city varchar(20), w_state char(2), w_zip char(9), \
         w_tax decimal(4,2), w_ytd decimal(12,2), primary key (w_id) ) ENGINE = innodb",
        "CREATE TABLE district ( d_id tinyint not null, d_w_id smallint not null, d_name varchar(10), \
         d_street_1 varchar(20), d_street_2 varchar(20), d_city varchar(20), d_state char(2), \
         d_zip char(9), d_tax decimal(4,2), d_ytd decimal(12,2), d_next_o_id int, \
         primary key (d_w_id, d_id) ) ENGINE = innodb",
        "CREATE TABLE customer ( c_id int not null, c_d_id tinyint not null, c_w_id smallint not null, \
         c_first varchar(16), c_middle char(2), c_last varchar(16), c_street_1 varchar(20), \
         c_street_2 varchar(20), c_city varchar(20), c_state char(2), c_zip char(9), \
         c_phone char(16), c_since datetime, c_credit char(2), c_credit_lim bigint, \
         c_discount decimal(4,2), c_balance decimal(12,2), c_ytd_payment decimal(12,2), \
         c_payment_cnt smallint, c_delivery_cnt smallint, c_data text, \
         PRIMARY KEY(c_w_id, c_d_id, c_id), KEY idx_customer (c_w_id, c_d_id, c_last, c_first) ) \
         ENGINE = innodb",
        "CREATE TABLE history ( h_c_id int, h_c_d_id tinyint, h_c_w_id smallint, h_d_id tinyint, \
         h_w_id smallint, h_date datetime, h_amount decimal(6,2), h_data varchar(24), \
         KEY idx_history_c (h_c_w_id, h_c_d_id, h_c_id), KEY idx_history_d (h_w_id, h_d_id) ) \
         ENGINE = innodb",
        "CREATE TABLE orders ( o_id int not null, o_d_id tinyint not null, o_w_id smallint not null, \
         o_c_id int, o_entry_d datetime, o_carrier_id tinyint, o_ol_cnt tinyint, \
         o_all_local tinyint, PRIMARY KEY(o_w_id, o_d_id, o_id), \
         KEY idx_orders (o_w_id, o_d_id, o_c_id, o_id) ) ENGINE = innodb",
        "CREATE TABLE new_orders ( no_o_id int not null, no_d_id tinyint not null, \
         no_w_id smallint not null, PRIMARY KEY(no_w_id, no_d_id, no_o_id) ) ENGINE = innodb",
        "CREATE TABLE order_line ( ol_o_id int not null, ol_d_id tinyint not null, \
         ol_w_id smallint not null, ol_number tinyint not null, ol_i_id int, \
         ol_supply_w_id smallint, ol_delivery_d datetime, ol_quantity tinyint, \
         ol_amount decimal(6,2), ol_dist_info char(24), \
         PRIMARY KEY(ol_w_id, ol_d_id, ol_o_id, ol_number) ) ENGINE = innodb",
        "CREATE TABLE stock ( s_i_id int not null, s_w_id smallint not null, s_quantity smallint, \
         s_dist_01 char(24), s_dist_02 char(24), s_dist_03 char(24), s_dist_04 char(24), \
         s_dist_05 char(24), s_dist_06 char(24), s_dist_07 char(24), s_dist_08 char(24), \
         s_dist_09 char(24), s_dist_10 char(24), s_ytd decimal(8,0), s_order_cnt smallint, \
         s_remote_cnt smallint, s_data varchar(50), PRIMARY KEY(s_w_id, s_i_id) ) ENGINE = innodb",
        "CREATE TABLE item ( i_id int not null, i_im_id int, i_name varchar(24), \
         i_price decimal(5,2), i_data varchar(50), PRIMARY KEY(i_id) ) ENGINE = innodb",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `12345` cents as `123.45` (DECIMAL literals, exact).
pub fn money(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let a = cents.unsigned_abs();
    format!("{sign}{}.{:02}", a / 100, a % 100)
}

/// A DECIMAL as the server sends it (`-10.00`, `30000.00`, `7`, `0.5`) in cents; `None` for
/// anything else.
pub fn cents(text: &str) -> Option<i64> {
    let t = text.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if int.is_empty() && frac.is_empty() || frac.len() > 2 && frac[2..].bytes().any(|b| b != b'0') {
        return None;
    }
    let int: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut f = 0i64;
    for (i, b) in frac.bytes().take(2).enumerate() {
        if !b.is_ascii_digit() {
            return None;
        }
        f += i64::from(b - b'0') * if i == 0 { 10 } else { 1 };
    }
    let v = int * 100 + f;
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_round_trips_through_cents() {
        for (c, s) in [
            (0, "0.00"),
            (-1000, "-10.00"),
            (123_456, "1234.56"),
            (-5, "-0.05"),
        ] {
            assert_eq!(money(c), s);
            assert_eq!(cents(s), Some(c));
        }
        assert_eq!(cents("7"), Some(700));
        assert_eq!(cents("0.5"), Some(50));
        assert_eq!(cents("12.340000"), Some(1234));
        assert_eq!(cents("12.345"), None);
        assert_eq!(cents("x"), None);
    }

    #[test]
    fn standard_size_has_the_spec_figures() {
        let s = Scale::standard(1);
        assert_eq!((s.new_orders(), s.first_new_order()), (900, 2101));
        assert_eq!(s.district_ytd_cents(), 3_000_000);
        assert_eq!(s.last_name_max(), 999);
    }
}
