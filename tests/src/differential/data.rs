//! The generated rows, and the three ways of loading them: as logical INSERTs on one connection
//! (the oracle, an unsharded copy, or Shoal itself), or straight onto the datanodes where the
//! router places each row (the sharded side before writes through Shoal work).

use std::collections::BTreeMap;
use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Value};
use shoal_router::plan::{Merge, RoutePlan, Router};
use shoal_router::topology::{TableDef, Topology};

use super::schema::{TABLES, Table};

/// A small, seedable generator (SplitMix64): the same seed gives the same rows and queries on
/// every machine, without depending on a crate's algorithm staying put.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo) as u64 + 1)) as i64
    }

    /// True with probability `percent`/100.
    pub fn pct(&mut self, percent: u32) -> bool {
        (self.next_u64() % 100) < percent as u64
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A value as both an SQL literal and a prepared-statement parameter.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lit {
    Null,
    Int(i64),
    UInt(u64),
    /// A decimal number as written (`-12.50`).
    Dec(String),
    /// A string, date or datetime (quoted in SQL).
    Str(String),
}

impl Lit {
    pub fn sql(&self) -> String {
        match self {
            Lit::Null => "NULL".into(),
            Lit::Int(i) => i.to_string(),
            Lit::UInt(u) => u.to_string(),
            Lit::Dec(d) => d.clone(),
            Lit::Str(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''")),
        }
    }

    pub fn param(&self) -> Value {
        match self {
            Lit::Null => Value::NULL,
            Lit::Int(i) => Value::Int(*i),
            Lit::UInt(u) => Value::UInt(*u),
            Lit::Dec(d) => Value::Bytes(d.clone().into_bytes()),
            Lit::Str(s) => Value::Bytes(s.clone().into_bytes()),
        }
    }

    pub fn is_null(&self) -> bool {
        *self == Lit::Null
    }
}

// Value pools with collation ties: under utf8mb4_general_ci 'new', 'NEW' and 'New ' are equal;
// under utf8mb4_bin (PAD SPACE) 'x' and 'x ' are equal but 'X' is not.
//
// Some values are not ASCII, in characters every client charset the differential runs through
// (gbk, latin1, big5) can write: § ° ± · × ÷ – — ‘ ’ “ ” … (so no value converts to '?' there).
pub const STATUS: &[&str] = &[
    "new", "NEW", "New ", "paid", "PAID", "Paid", "shipped", "SHIPPED ", "a", "A", "a ", "b", "B",
    "", "paid…", "PAID… ", "§new",
];
pub const TAGS: &[&str] = &["x", "X", "x ", "y", "Y", "z", "zz", "Zz", ""];
pub const COUNTRY_CODES: &[&str] = &[
    "fr", "de", "it", "es", "us", "uk", "jp", "br", "in", "cn", "ca", "mx",
];
pub const REGIONS: &[&str] = &["europe", "EUROPE", "America", "asia", "Asia "];
pub const SKUS: &[&str] = &["ab-1", "AB-1", "ab-1 ", "cd-2", "ef-3", "EF-3", "gh-4", "z"];
pub const NAMES: &[&str] = &[
    "alice",
    "Alice",
    "ALICE ",
    "bob",
    "o'neil",
    "O'Neil",
    "carol",
    "dave",
    "eve",
    "",
    "o’neil",
    "“Bob” × 2",
    "“BOB” × 2 ",
    "±eve°",
];
pub const KINDS: &[&str] = &[
    "click",
    "CLICK",
    "view",
    "View ",
    "buy",
    "refund",
    "“buy”",
    "–view–",
];
pub const PAYLOADS: &[&str] = &["p1", "P1", "p1 ", "p2", "q", "Q", "r r", "", "p—1", "q÷2 "];
pub const LEDGER_ACCOUNTS: &[&str] = &[
    "cash", "CASH", "Cash ", "bank", "Bank", "sales", "tax", "cash°", "CASH° ",
];

/// Days since 1970-01-01 to `YYYY-MM-DD` (proleptic Gregorian).
pub fn date_of(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 of a few anchors used by the generators.
pub const DAY_2023_01_01: i64 = 19_358;
pub const DAY_2026_12_31: i64 = 20_818;

pub fn random_date(rng: &mut Rng, from: i64, to: i64) -> String {
    date_of(rng.range(from, to))
}

pub fn random_datetime(rng: &mut Rng) -> String {
    format!(
        "{} {:02}:{:02}:{:02}",
        random_date(rng, DAY_2023_01_01, DAY_2026_12_31),
        rng.below(24),
        rng.below(60),
        // Few distinct seconds so that DATETIME ties happen.
        rng.below(3) * 20
    )
}

/// A multiple of 1/4 between `lo` and `hi` quarters, as a literal: exact as a DOUBLE, so
/// sums of such values are the same in any order.
pub fn random_quarter(rng: &mut Rng, lo: i64, hi: i64) -> String {
    let q = rng.range(lo, hi);
    let sign = if q < 0 { "-" } else { "" };
    let a = q.unsigned_abs();
    format!("{sign}{}.{:02}", a / 4, (a % 4) * 25)
}

/// A decimal with `scale` digits after the point, between `lo` and `hi` (whole units).
pub fn random_dec(rng: &mut Rng, lo: i64, hi: i64, scale: u32) -> String {
    let unit = 10i64.pow(scale);
    let v = rng.range(lo * unit, hi * unit);
    let sign = if v < 0 { "-" } else { "" };
    let a = v.unsigned_abs();
    let unit = unit as u64;
    format!(
        "{sign}{}.{:0width$}",
        a / unit,
        a % unit,
        width = scale as usize
    )
}

fn maybe(null: bool, value: Lit) -> Lit {
    if null { Lit::Null } else { value }
}

fn s(v: impl AsRef<str>) -> Lit {
    Lit::Str(v.as_ref().to_string())
}

/// Rows of every table, in the column order of [`schema::TABLES`].
#[derive(Clone, Debug)]
pub struct Dataset {
    pub seed: u64,
    pub tables: BTreeMap<&'static str, Vec<Vec<Lit>>>,
}

/// Row counts per table for a dataset of scale `n` (orders).
impl Dataset {
    /// Generates the rows for `seed`: `orders` gets `n` rows, the other tables proportionally.
    pub fn generate(seed: u64, n: usize) -> Dataset {
        let mut rng = Rng::new(seed ^ 0x5eed_da7a);
        let mut tables = BTreeMap::new();

        let country: Vec<Vec<Lit>> = COUNTRY_CODES
            .iter()
            .enumerate()
            .map(|(i, code)| {
                vec![
                    s(code),
                    s(format!("Country {}", code.to_uppercase())),
                    maybe(rng.pct(10), s(REGIONS[i % REGIONS.len()])),
                    maybe(rng.pct(10), Lit::Dec(random_dec(&mut rng, 0, 25, 2))),
                ]
            })
            .collect();
        tables.insert("country", country);

        let mut orders = Vec::with_capacity(n);
        for i in 1..=n as u64 {
            orders.push(order_row(&mut rng, order_id(i)));
        }

        let mut items = Vec::new();
        let mut item_id = 1u64;
        for o in &orders {
            for _ in 0..rng.below(4) {
                items.push(item_row(&mut rng, item_id, &o[0], &o[1]));
                item_id += 1;
            }
        }
        tables.insert("orders", orders);
        tables.insert("order_item", items);

        let accounts = (1..=(n / 2).max(10) as i64)
            .map(|id| account_row(&mut rng, id))
            .collect();
        tables.insert("account", accounts);

        let mut events = Vec::new();
        let mut id = -200i64;
        for _ in 0..(n * 2 / 3).max(10) {
            id += rng.range(1, 12);
            events.push(event_row(&mut rng, id));
        }
        tables.insert("events", events);

        let ledger = (1..=(n * 3 / 4).max(10) as u64)
            .map(|id| ledger_row(&mut rng, id))
            .collect();
        tables.insert("ledger", ledger);

        let notes = (1..=(n / 3).max(10) as i64)
            .map(|id| note_row(&mut rng, id))
            .collect();
        tables.insert("note", notes);

        let (wh, dist, cust) = warehouses(&mut rng, n);
        tables.insert("wh", wh);
        tables.insert("dist", dist);
        tables.insert("cust", cust);

        // From a random stream of its own: the tables above stay what they were for a seed.
        let mut lrng = Rng::new(seed ^ 0x11_4e_49);
        let links = (1..=(n / 2).max(10) as i64)
            .map(|id| link_row(&mut lrng, id))
            .collect();
        tables.insert("link", links);
        Dataset { seed, tables }
    }

    pub fn rows(&self, table: &str) -> &[Vec<Lit>] {
        self.tables.get(table).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn total_rows(&self) -> usize {
        self.tables.values().map(Vec::len).sum()
    }

    /// Multi-row INSERTs for `table`, `chunk` rows each.
    pub fn inserts(&self, table: &Table, chunk: usize) -> Vec<String> {
        self.rows(table.name)
            .chunks(chunk)
            .map(|rows| insert_sql(table, rows))
            .collect()
    }
}

/// The id of the `i`-th order: every 17th above 2^63 (BIGINT UNSIGNED order and sums).
pub fn order_id(i: u64) -> u64 {
    if i.is_multiple_of(17) {
        (1u64 << 63) + i
    } else {
        i
    }
}

pub fn order_row(rng: &mut Rng, id: u64) -> Vec<Lit> {
    let user = maybe(rng.pct(3), Lit::Int(rng.range(-5, 60)));
    order_row_for(rng, id, user)
}

pub fn order_row_for(rng: &mut Rng, id: u64, user: Lit) -> Vec<Lit> {
    let country = match rng.below(10) {
        0 => Lit::Null,
        1 => s("zz"),
        2 => s(rng.pick(COUNTRY_CODES).to_uppercase()),
        3 => s(format!("{} ", rng.pick(COUNTRY_CODES))),
        _ => s(rng.pick(COUNTRY_CODES)),
    };
    let amount = if rng.pct(20) {
        Lit::Dec(
            rng.pick(&["0.00", "10.00", "10.50", "-3.25", "99.99"])
                .to_string(),
        )
    } else {
        Lit::Dec(random_dec(rng, -500, 99_999, 2))
    };
    vec![
        Lit::UInt(id),
        user,
        country,
        maybe(rng.pct(5), s(rng.pick(STATUS))),
        maybe(rng.pct(10), s(rng.pick(TAGS))),
        maybe(rng.pct(8), amount),
        maybe(rng.pct(10), Lit::UInt(rng.range(0, 20) as u64)),
        maybe(rng.pct(10), Lit::Int(rng.range(-1000, 1000))),
        maybe(
            rng.pct(5),
            s(random_date(rng, DAY_2023_01_01, DAY_2026_12_31)),
        ),
        maybe(rng.pct(10), s(random_datetime(rng))),
    ]
}

pub fn item_row(rng: &mut Rng, id: u64, order: &Lit, user: &Lit) -> Vec<Lit> {
    vec![
        Lit::UInt(id),
        user.clone(),
        order.clone(),
        maybe(rng.pct(5), s(rng.pick(SKUS))),
        maybe(rng.pct(5), Lit::Int(rng.range(-3, 50))),
        maybe(rng.pct(5), Lit::Dec(random_dec(rng, 0, 2_000, 4))),
        maybe(rng.pct(30), s(random_datetime(rng))),
    ]
}

pub fn account_row(rng: &mut Rng, id: i64) -> Vec<Lit> {
    vec![
        Lit::Int(id),
        maybe(rng.pct(3), s(email(rng))),
        maybe(rng.pct(5), s(rng.pick(NAMES))),
        maybe(rng.pct(5), Lit::Dec(random_dec(rng, -10_000, 1_000_000, 2))),
        maybe(
            rng.pct(10),
            Lit::Int(rng.range(-9_000_000_000_000_000, 9_000_000_000_000_000)),
        ),
        maybe(rng.pct(10), s(random_date(rng, -3_650, 12_000))),
    ]
}

/// An e-mail from a small pool, in varied case and with trailing spaces: many rows share a
/// general_ci key, so they must share a shard.
pub fn email(rng: &mut Rng) -> String {
    let k = rng.below(60);
    // One key in five is not ASCII (see the pools above): read from each client charset's
    // bytes, it must be routed where the same key in UTF-8 lives.
    let at = if k.is_multiple_of(5) {
        "§“×”@ex·io"
    } else {
        "@ex.io"
    };
    match rng.below(4) {
        0 => format!("USER{k}{}", at.to_uppercase()),
        1 => format!("user{k}{at} "),
        _ => format!("user{k}{at}"),
    }
}

pub fn event_row(rng: &mut Rng, id: i64) -> Vec<Lit> {
    vec![
        Lit::Int(id),
        maybe(rng.pct(5), s(rng.pick(KINDS))),
        maybe(rng.pct(10), s(rng.pick(PAYLOADS))),
        maybe(rng.pct(10), Lit::Dec(random_dec(rng, -100, 10_000, 3))),
        maybe(rng.pct(10), s(random_datetime(rng))),
        maybe(rng.pct(10), Lit::UInt(rng.range(0, 255) as u64)),
        maybe(rng.pct(10), Lit::Dec(random_quarter(rng, -400, 4_000))),
    ]
}

/// A row of the unlisted `note`: `ref_user` joins `orders.user_id`, `code` joins
/// `country.code` (in varied case, sometimes matching nothing).
pub fn note_row(rng: &mut Rng, id: i64) -> Vec<Lit> {
    let code = match rng.below(6) {
        0 => s("zz"),
        1 => s(rng.pick(COUNTRY_CODES).to_uppercase()),
        _ => s(rng.pick(COUNTRY_CODES)),
    };
    vec![
        Lit::Int(id),
        maybe(rng.pct(8), Lit::Int(rng.range(-5, 70))),
        maybe(rng.pct(8), code),
        maybe(rng.pct(10), s(rng.pick(PAYLOADS))),
        maybe(rng.pct(10), Lit::Dec(random_quarter(rng, -2_000, 2_000))),
        maybe(rng.pct(10), Lit::Dec(random_dec(rng, -500, 9_000, 3))),
        maybe(rng.pct(10), s(random_datetime(rng))),
        maybe(
            rng.pct(10),
            s(random_date(rng, DAY_2023_01_01, DAY_2026_12_31)),
        ),
    ]
}

pub const DISTRICT_NAMES: &[&str] = &["north", "North", "NORTH ", "south", "east", "west"];
pub const LAST_NAMES: &[&str] = &["BARBAR", "barbar", "Ought ", "ABLE", "able", "PRES", "eing"];
pub const CREDIT: &[&str] = &["GC", "BC", "bc", "GC "];

/// The TPC-C-like tables (`wh`, `dist`, `cust`), keyed by warehouse ids in `orders`' user id
/// range (-5 to 60): most warehouses exist, each with 0 to a few districts with 0 to a few
/// customers of the district's warehouse, plus some districts and customers whose warehouse
/// or district does not exist and some with a NULL key (rows of shard 0 no join matches).
/// `n` (the orders) scales the districts and customers per parent.
#[allow(clippy::type_complexity)]
fn warehouses(rng: &mut Rng, n: usize) -> (Vec<Vec<Lit>>, Vec<Vec<Lit>>, Vec<Vec<Lit>>) {
    let per = 2 + n / 200;
    let (mut wh, mut dist, mut cust) = (Vec::new(), Vec::new(), Vec::new());
    let (mut d_id, mut c_id) = (0i64, 0i64);
    for w in -5..=60i64 {
        let exists = rng.pct(85);
        if exists {
            wh.push(vec![
                Lit::Int(w),
                maybe(
                    rng.pct(5),
                    s(format!("{}{w}", rng.pick(&["wh", "WH", "Wh "]))),
                ),
                maybe(
                    rng.pct(5),
                    Lit::Dec(format!("0.{:04}", rng.range(0, 2_000))),
                ),
                maybe(rng.pct(5), Lit::Dec(random_dec(rng, 0, 300_000, 2))),
            ]);
        }
        // Orphan districts (no warehouse) now and then, and NULL-keyed ones.
        let districts = if exists {
            rng.below(per + 1)
        } else {
            rng.below(2)
        };
        for _ in 0..districts {
            d_id += 1;
            let dw = if rng.pct(4) { Lit::Null } else { Lit::Int(w) };
            dist.push(vec![
                Lit::Int(d_id),
                dw.clone(),
                maybe(rng.pct(5), s(rng.pick(DISTRICT_NAMES))),
                maybe(rng.pct(5), Lit::Int(rng.range(1, 3_000))),
                maybe(rng.pct(5), Lit::Dec(random_dec(rng, 0, 30_000, 2))),
            ]);
            for _ in 0..rng.below(per + 2) {
                c_id += 1;
                let cw = if rng.pct(4) { Lit::Null } else { dw.clone() };
                // Now and then a customer of a district that does not exist.
                let cd = if rng.pct(5) {
                    Lit::Int(d_id + 10_000)
                } else {
                    Lit::Int(d_id)
                };
                cust.push(vec![
                    Lit::Int(c_id),
                    cw,
                    maybe(rng.pct(3), cd),
                    maybe(rng.pct(5), s(rng.pick(LAST_NAMES))),
                    maybe(rng.pct(5), s(rng.pick(CREDIT))),
                    maybe(rng.pct(5), Lit::Dec(random_dec(rng, -2_000, 50_000, 2))),
                    maybe(
                        rng.pct(5),
                        s(random_date(rng, DAY_2023_01_01, DAY_2026_12_31)),
                    ),
                ]);
            }
        }
    }
    (wh, dist, cust)
}

/// Keys `link.code` holds (`_bin`: `'a'` and `'a '` are one key, `'A'` another).
pub const LINK_CODES: &[&str] = &[
    "a", "A", "a ", "A ", "de", "DE", "de ", "fr", "us", "x", "X", "zz", "",
];
/// Labels GROUP_CONCAT and the DISTINCT aggregates read (general_ci ties).
pub const LINK_LABELS: &[&str] = &["red", "RED", "red ", "blue", "Blue", "green", "g,h", ""];

/// A row of `link` (see [`schema::LINK`](super::schema::LINK)).
pub fn link_row(rng: &mut Rng, id: i64) -> Vec<Lit> {
    let k = rng.range(-5, 61);
    let k_dec = if rng.pct(15) {
        Lit::Dec(format!("{k}.5"))
    } else {
        Lit::Dec(format!("{k}.0"))
    };
    let k_str = match rng.below(8) {
        0 => s(format!("{k:02}")),
        1 => s(format!("{k} ")),
        2 => s(rng.pick(COUNTRY_CODES).to_uppercase()),
        3 => s(format!("{} ", rng.pick(COUNTRY_CODES))),
        4 => s(rng.pick(COUNTRY_CODES)),
        _ => s(k.to_string()),
    };
    vec![
        Lit::Int(id),
        maybe(rng.pct(5), s(rng.pick(LINK_CODES))),
        maybe(rng.pct(6), Lit::Int(rng.range(-5, 61))),
        maybe(rng.pct(6), k_dec),
        maybe(rng.pct(6), k_str),
        maybe(rng.pct(8), Lit::Dec(random_dec(rng, -100, 2_000, 2))),
        maybe(rng.pct(8), s(rng.pick(LINK_LABELS))),
    ]
}

pub fn ledger_row(rng: &mut Rng, id: u64) -> Vec<Lit> {
    // 2023-10-01 .. 2026-03-31: mostly inside the rule's 24 months, some before and after.
    let day = random_date(rng, 19_631, 20_543);
    vec![
        Lit::UInt(id),
        s(&day),
        maybe(rng.pct(5), s(rng.pick(LEDGER_ACCOUNTS))),
        Lit::Dec(random_dec(rng, 0, 5_000, 2)),
        maybe(rng.pct(30), Lit::Dec(random_dec(rng, 0, 5_000, 2))),
        maybe(rng.pct(10), s(format!("{day} {:02}:00:00", rng.below(24)))),
    ]
}

pub fn insert_sql(table: &Table, rows: &[Vec<Lit>]) -> String {
    let values: Vec<String> = rows
        .iter()
        .map(|r| {
            let cells: Vec<String> = r.iter().map(Lit::sql).collect();
            format!("({})", cells.join(", "))
        })
        .collect();
    format!(
        "INSERT INTO {} ({}) VALUES {}",
        table.name,
        table.column_list(),
        values.join(", ")
    )
}

/// Rows per multi-row INSERT when loading.
pub const LOAD_CHUNK: usize = 40;

/// Creates the tables under their logical names on `conn` and inserts every row as logical
/// INSERTs: the oracle, an unsharded copy, or the sharded side through Shoal (where the DDL and
/// the INSERTs are Shoal's to execute).
pub async fn load_logical(conn: &mut Conn, data: &Dataset) -> Result<(), String> {
    load_logical_as(conn, data, None).await
}

/// Like [`load_logical`], but with `Some(seed)` the tables are MyISAM and every table's rows are
/// inserted in an order shuffled by `seed`: the same contents in another physical order, so
/// scans, ORDER BY ties and GROUP BY representatives come out differently than on the oracle,
/// as they do from shards. The harness must still find no difference.
pub async fn load_logical_as(
    conn: &mut Conn,
    data: &Dataset,
    shuffle: Option<u64>,
) -> Result<(), String> {
    let tables: Vec<&Table> = TABLES
        .iter()
        .copied()
        .filter(|t| data.tables.contains_key(t.name))
        .collect();
    for table in &tables {
        let mut ddl = table.create_sql(table.name);
        if shuffle.is_some() {
            ddl = ddl.replace("ENGINE=InnoDB", "ENGINE=MyISAM");
        }
        conn.query_drop(format!("DROP TABLE IF EXISTS `{}`", table.name))
            .await
            .map_err(|e| format!("DROP TABLE {}: {e}", table.name))?;
        conn.query_drop(&ddl)
            .await
            .map_err(|e| format!("{ddl}: {e}"))?;
    }
    for table in &tables {
        let mut rows = data.rows(table.name).to_vec();
        if let Some(seed) = shuffle {
            let mut rng = Rng::new(seed);
            for i in (1..rows.len()).rev() {
                rows.swap(i, rng.below(i + 1));
            }
        }
        for chunk in rows.chunks(LOAD_CHUNK) {
            let sql = insert_sql(table, chunk);
            conn.query_drop(&sql)
                .await
                .map_err(|e| format!("loading {}: {e}\n  {}", table.name, clip(&sql)))?;
        }
    }
    Ok(())
}

pub fn clip(sql: &str) -> String {
    if sql.len() <= 300 {
        sql.to_string()
    } else {
        let mut cut = 300;
        while !sql.is_char_boundary(cut) {
            cut += 1;
        }
        format!("{}...", &sql[..cut])
    }
}

/// The sharded side loaded without Shoal: one connection per datanode, the physical tables
/// created from the topology, and each INSERT split and placed by the router's own plan (the
/// same plan Shoal executes), so reads through Shoal can be tested before its writes work.
pub struct DirectLoader {
    router: Router,
    schema: String,
    conns: Vec<Conn>,
}

impl DirectLoader {
    /// Connects to every datanode's primary (with the datahost's account) and database.
    pub async fn connect(topology: Arc<Topology>, schema: &str) -> Result<DirectLoader, String> {
        let mut conns = Vec::new();
        for dn in &topology.datanodes {
            let host = &topology.datahosts[dn.datahost];
            let (h, port) = host
                .primary
                .address
                .rsplit_once(':')
                .ok_or_else(|| format!("{}: address without a port", host.name))?;
            let port: u16 = port
                .parse()
                .map_err(|_| format!("{}: bad port in {}", host.name, host.primary.address))?;
            let opts: Opts = OptsBuilder::default()
                .ip_or_hostname(h.trim_start_matches('[').trim_end_matches(']'))
                .tcp_port(port)
                .user(Some(host.primary.user.clone()))
                .pass(Some(host.primary.password.clone()))
                .db_name(Some(dn.database.clone()))
                .prefer_socket(false)
                .into();
            conns.push(
                Conn::new(opts)
                    .await
                    .map_err(|e| format!("datanode {}: {e}", dn.name))?,
            );
        }
        Ok(DirectLoader {
            router: Router::new(topology),
            schema: schema.to_string(),
            conns,
        })
    }

    /// (Re)creates every physical table of the schema's tables that `data` has rows for:
    /// sharded and child tables on each shard, global tables on each of their datanodes.
    pub async fn create_tables(&mut self, data: &Dataset) -> Result<(), String> {
        let topo = self.router.topology().clone();
        let schema = topo
            .schema(&self.schema)
            .ok_or_else(|| format!("no schema {} in the config", self.schema))?;
        for table in TABLES {
            if !data.tables.contains_key(table.name) {
                continue;
            }
            let placements: Vec<(usize, String)> = match schema.table(table.name) {
                Some(TableDef::Sharded(st)) => st
                    .shards
                    .iter()
                    .map(|s| (s.datanode, s.physical_table.clone()))
                    .collect(),
                Some(TableDef::Child(c)) => c
                    .shards
                    .iter()
                    .map(|s| (s.datanode, s.physical_table.clone()))
                    .collect(),
                Some(TableDef::Global(g)) => g
                    .datanodes
                    .iter()
                    .map(|d| (*d, table.name.to_string()))
                    .collect(),
                None => match schema.default_datanode {
                    Some(d) => vec![(d, table.name.to_string())],
                    None => return Err(format!("table {} has no datanode", table.name)),
                },
            };
            for (dn, physical) in placements {
                let conn = &mut self.conns[dn];
                conn.query_drop(format!("DROP TABLE IF EXISTS `{physical}`"))
                    .await
                    .map_err(|e| format!("DROP TABLE {physical}: {e}"))?;
                conn.query_drop(table.create_sql(&physical))
                    .await
                    .map_err(|e| format!("CREATE TABLE {physical} on datanode {dn}: {e}"))?;
            }
        }
        Ok(())
    }

    /// Runs one logical write as the router plans it, each target on its datanode.
    pub async fn execute(&mut self, sql: &str) -> Result<u64, String> {
        let plan = self.router.route(Some(&self.schema), sql, &[]);
        let targets = match plan {
            RoutePlan::Single(t) => vec![t],
            RoutePlan::Scatter {
                targets,
                merge: Merge::AffectedRows,
            } => targets,
            RoutePlan::Broadcast { targets } => targets,
            other => return Err(format!("unexpected plan for a load: {other:?}\n  {sql}")),
        };
        let mut affected = 0;
        for t in targets {
            let conn = &mut self.conns[t.datanode];
            conn.query_drop(&*t.sql)
                .await
                .map_err(|e| format!("datanode {}: {e}\n  {}", t.datanode, clip(&t.sql)))?;
            affected += conn.affected_rows();
        }
        Ok(affected)
    }

    /// Creates the tables and loads every row of `data`.
    pub async fn load(&mut self, data: &Dataset) -> Result<(), String> {
        self.create_tables(data).await?;
        let topo = self.router.topology().clone();
        for table in TABLES {
            // A global table's rows are written once per datanode.
            let copies = match topo.schema(&self.schema).and_then(|s| s.table(table.name)) {
                Some(TableDef::Global(g)) => g.datanodes.len(),
                _ => 1,
            };
            for rows in data.rows(table.name).chunks(LOAD_CHUNK) {
                let sql = insert_sql(table, rows);
                let n = self.execute(&sql).await?;
                let want = (rows.len() * copies) as u64;
                if n != want {
                    return Err(format!(
                        "{}: {n} rows written, expected {want}\n  {}",
                        table.name,
                        clip(&sql)
                    ));
                }
            }
        }
        Ok(())
    }

    pub async fn disconnect(self) {
        for c in self.conns {
            let _ = c.disconnect().await;
        }
    }
}

/// Keeps only the rows of the tables the demo serves (those listed in its config), scaled.
pub fn subset(data: &Dataset, tables: &[&str]) -> Dataset {
    Dataset {
        seed: data.seed,
        tables: data
            .tables
            .iter()
            .filter(|(name, _)| tables.contains(name))
            .map(|(name, rows)| (*name, rows.clone()))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(DAY_2023_01_01), "2023-01-01");
        assert_eq!(date_of(DAY_2026_12_31), "2026-12-31");
        assert_eq!(date_of(19_631), "2023-10-01");
        assert_eq!(date_of(-1), "1969-12-31");
    }

    #[test]
    fn same_seed_same_rows() {
        let a = Dataset::generate(7, 50);
        let b = Dataset::generate(7, 50);
        assert_eq!(a.tables, b.tables);
        assert_ne!(a.tables, Dataset::generate(8, 50).tables);
        for t in TABLES {
            assert!(!a.rows(t.name).is_empty(), "{}", t.name);
            for r in a.rows(t.name) {
                assert_eq!(r.len(), t.cols.len(), "{}", t.name);
            }
        }
    }

    #[test]
    fn literals_escape_quotes() {
        assert_eq!(Lit::Str("o'neil".into()).sql(), "'o''neil'");
        assert_eq!(random_dec(&mut Rng::new(1), -1, -1, 2), "-1.00");
        assert_eq!(random_quarter(&mut Rng::new(1), -7, -7), "-1.75");
        assert_eq!(random_quarter(&mut Rng::new(1), 6, 6), "1.50");
    }
}
