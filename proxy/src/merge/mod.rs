//! The streaming merge of shard result sets, per the router's [`MergeSpec`]. Sans-IO: the
//! executor feeds shard rows in and takes client rows out.
//!
//! ```text
//! let mut m = Merger::new(&spec, columns, shards, Protocol::Text)?;   // Err = refusal
//! loop {
//!     match m.next()? {
//!         Step::Need(s) => match read a row of shard s {
//!             Some(row) => m.feed_row(s, row)?,
//!             None => m.feed_end(s),
//!         },
//!         Step::Row(payload) => send payload to the client,
//!         Step::Done => break, // then drain whatever the shards still send
//!     }
//! }
//! ```
//! The client gets the first [`Merger::visible_columns`] column definitions (the shards' merged
//! by [`merge_columns`], which refuses shards that do not agree). The merger holds one row per shard and
//! asks for one shard at a time: rows of other shards must wait in their streams.
//!
//! Interface as briefed, plus: [`Merger::max_groups`] (builder; default
//! [`DEFAULT_MAX_GROUPS`]), [`Column`]'s fields (`column_type` is mysql_common's `ColumnType`,
//! `flags` its `ColumnFlags`). Errors are the crate's [`Error`]: refusals are `Reply` 1235
//! (42000) naming the construct; malformed shard rows are `BackendIo` (drop the connection).
//!
//! How the spec is run:
//! - no aggregation: rows stream. With `order_by`, a k-way merge over the shards' sorted
//!   streams holds one row per shard and asks only for the shard whose row was emitted (ties:
//!   lower shard first, so the merge is stable); without, shards are concatenated in order.
//!   DISTINCT keeps a set of the rows seen (bounded by [`Merger::max_groups`]). OFFSET skips
//!   while streaming; once LIMIT rows are out, [`Step::Done`].
//! - aggregation with `groups_sorted` (the shards sort by the group keys, see
//!   `MergeSpec::group_order`): a k-way merge by the group keys folds each run of equal keys
//!   and releases the group when the next key differs, through HAVING and DISTINCT (a set only
//!   when a key is hidden; else groups are distinct already). When `order_by` is a prefix of
//!   the shards' order, groups stream out (one row per shard and one group in memory; LIMIT
//!   stops pulling); otherwise they wait for the final sort: a top-(offset+limit) under a
//!   LIMIT, else at most `max_groups` of them. A shard whose keys are not strictly increasing
//!   under the comparison used fails the merge (its collation differs from the metadata's).
//! - other aggregation: every shard is read to its end and folded into groups (a hash map
//!   bounded by `max_groups`: beyond it the merge fails naming the limit), then HAVING,
//!   DISTINCT, a stable sort by `order_by`, OFFSET/LIMIT.
//! - rows that need no change (no aggregation, no hidden columns) go out as the shard sent
//!   them; others are re-encoded in the client's protocol with the column definitions' types.
//!
//! Strings compare under the collation the column is declared with when the executor learned
//! it ([`Column::declared`], from `information_schema.COLUMNS`): binary, `*_bin` with PAD
//! SPACE, `utf8mb4/utf8mb3_general_ci`, `latin1_swedish_ci` and `latin1_bin` (also when their
//! values arrive converted to UTF-8); any other collation is refused when a comparison on it is
//! needed. Expressions have no declared collation and compare under the one their definition
//! reports, which is `character_set_results`' (an expression over a `utf8mb4_unicode_ci`
//! column looks `general_ci` here); to avoid sorting wrongly, the merge checks each shard's
//! stream is in its own order under the comparison used, and fails if a shard's rows are not.

mod column;
mod having;
pub(crate) mod value;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use mysql_common::constants::ColumnType;
use shoal_router::plan::{Column as ColRef, Fold, MergeSpec};

pub use column::{Column, columns_agree, is_char_or_blob, merge_columns, parse_column};
use having::Having;
use value::{Dec, Key, Keys, Kind, cmp_keys, double_text, encode_row, key_of, kind, split_row};
pub use value::{integer_width, widen_integers};

use crate::error::{Error, Result};

/// The hasher of the group and DISTINCT sets: a row's key is hashed once per row, and
/// SipHash over a text column's weights cost more than the rest of the merge. foldhash's
/// quality variant with a per-process random seed; the sets are bounded by `max_groups`.
type KeyHasher = foldhash::quality::RandomState;

/// The protocol of the rows, shards' and client's alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// COM_QUERY result rows.
    Text,
    /// COM_STMT_EXECUTE result rows.
    Binary,
}

/// What the merger needs or gives next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Feed the next row of this shard, or its end.
    Need(usize),
    /// A row payload for the client.
    Row(Vec<u8>),
    /// The merged result is complete (shards may have rows left: drain them).
    Done,
}

/// Default bound on groups (and DISTINCT rows) held in memory.
pub const DEFAULT_MAX_GROUPS: usize = 100_000;

/// 1235 (42000), as the router refuses: a construct the merge cannot answer exactly.
pub(crate) fn refuse(construct: impl std::fmt::Display) -> Error {
    Error::reply(
        1235,
        b"42000",
        format!("This version of Shoal doesn't yet support '{construct}'"),
    )
}

pub(crate) fn resolve(c: ColRef, n: usize) -> Result<usize> {
    match c {
        ColRef::At(i) if i < n => Ok(i),
        ColRef::FromEnd(k) if k >= 1 && k <= n => Ok(n - k),
        _ => Err(refuse("a merge column beyond the shards' result columns")),
    }
}

#[derive(Debug, Clone, Copy)]
enum FoldOp {
    Count,
    Sum,
    Min,
    Max,
    Avg { sum: usize, count: usize },
}

#[derive(Debug, Clone)]
enum Acc {
    /// Not folded: the group's first row's cell.
    First,
    Count(i128),
    SumDec(Option<Dec>),
    SumFloat(Option<f64>),
    Best(Option<(Key, Vec<u8>)>),
    AvgDec(Option<Dec>, i128),
    AvgFloat(Option<f64>, i128),
}

type OwnedCells = Vec<Option<Vec<u8>>>;

struct Group {
    cells: Vec<Option<Vec<u8>>>,
    accs: Vec<Acc>,
}

struct Head {
    payload: Vec<u8>,
    keys: Keys,
}

enum Mode {
    Stream {
        heads: Vec<Option<Head>>,
        /// Sort keys of the row last received from each shard (to check the shard's order).
        last: Vec<Option<Keys>>,
        cur: usize,
        /// The shard of the row taken last: its keys (in `last`) are the row before the next.
        prev: Option<usize>,
        /// DISTINCT where the sort keys are exactly the visible columns: equal rows come out
        /// of the merge next to each other, so a row is a duplicate when its keys equal the
        /// row's before it, and no set of every row is kept.
        distinct_adjacent: bool,
    },
    Group {
        keys: Vec<usize>,
        folds: Vec<Option<FoldOp>>,
        index: HashMap<Keys, usize, KeyHasher>,
        groups: Vec<Group>,
        out: Option<std::vec::IntoIter<Vec<u8>>>,
    },
    /// Shards sorted by the group keys: a k-way merge folding adjacent equal keys.
    Sorted(Box<Sorted>),
}

struct Sorted {
    /// The shards' order (column, desc): every group key, so equal keys are adjacent.
    order: Vec<(usize, bool)>,
    folds: Vec<Option<FoldOp>>,
    heads: Vec<Option<Head>>,
    last: Vec<Option<Keys>>,
    /// The group being folded, with its keys.
    cur: Option<(Keys, Group)>,
    /// `Some` when the final order differs from the shards': finished groups awaiting the
    /// sort (with their sort keys), at most `keep` of them.
    pending: Option<Vec<(Keys, OwnedCells)>>,
    /// Bound of `pending`: `offset + limit` under a LIMIT (a top-k), else `max_groups`.
    keep: Option<usize>,
    /// DISTINCT needs a set only when some group key is hidden (else groups are distinct).
    distinct_set: bool,
    out: Option<std::vec::IntoIter<Vec<u8>>>,
    ended_all: bool,
}

pub struct Merger {
    cols: Vec<Column>,
    kinds: Vec<Kind>,
    protocol: Protocol,
    shards: usize,
    visible: usize,
    order: Vec<(usize, bool)>,
    distinct: bool,
    having: Option<Having>,
    offset: u64,
    limit: Option<u64>,
    ended: Vec<bool>,
    skipped: u64,
    emitted: u64,
    seen: HashSet<Keys, KeyHasher>,
    max_groups: usize,
    /// Per shard: whether its stream unions the results of several tables (see
    /// [`Merger::arms`]).
    unions: Vec<bool>,
    mode: Mode,
}

fn comparable(k: Kind, what: &str) -> Result<()> {
    match k {
        Kind::Incomparable(why) => Err(refuse(format!("{what} on {why} across shards"))),
        _ => Ok(()),
    }
}

impl Merger {
    /// A merger of `shards` result sets with these columns (the shards', hidden ones included).
    /// Fails with a refusal when the spec cannot be applied exactly to these columns.
    pub fn new(
        spec: &MergeSpec,
        columns: Vec<Column>,
        shards: usize,
        protocol: Protocol,
    ) -> Result<Merger> {
        let n = columns.len();
        if spec.hidden_columns > n {
            return Err(refuse("more hidden merge columns than result columns"));
        }
        let visible = n - spec.hidden_columns;
        let kinds: Vec<Kind> = columns.iter().map(kind).collect();
        let mut order = Vec::new();
        for k in &spec.order_by {
            let c = resolve(k.column, n)?;
            comparable(kinds[c], "ORDER BY")?;
            order.push((c, k.desc));
        }
        if spec.distinct {
            for &k in &kinds[..visible] {
                comparable(k, "DISTINCT")?;
            }
        }
        let having = match &spec.having {
            Some(h) => {
                if spec.aggregate.is_none() {
                    return Err(refuse("HAVING merged without aggregation"));
                }
                Some(having::build(h, &kinds, &columns)?)
            }
            None => None,
        };
        let mode = match &spec.aggregate {
            None => Mode::Stream {
                heads: (0..shards).map(|_| None).collect(),
                last: vec![None; shards],
                cur: 0,
                prev: None,
                // Sort keys that are a subset of the visible columns leave rows that differ
                // elsewhere between equal ones; a hidden sort key, equal rows apart.
                distinct_adjacent: spec.distinct
                    && !order.is_empty()
                    && order.iter().all(|&(c, _)| c < visible)
                    && (0..visible).all(|v| order.iter().any(|&(c, _)| c == v)),
            },
            Some(a) => {
                let mut keys = Vec::new();
                for &k in &a.keys {
                    let c = resolve(k, n)?;
                    comparable(kinds[c], "GROUP BY")?;
                    keys.push(c);
                }
                let mut folds = vec![None; n];
                for f in &a.columns {
                    let c = resolve(f.column, n)?;
                    let t = columns[c].column_type;
                    let op = match f.fold {
                        Fold::SumCounts => {
                            if !matches!(kinds[c], Kind::Int { .. }) {
                                return Err(refuse("COUNT merged into a non-integer column"));
                            }
                            FoldOp::Count
                        }
                        Fold::Sum => {
                            if !matches!(kinds[c], Kind::Decimal | Kind::Float) {
                                return Err(refuse(format!("SUM merged as {t:?}")));
                            }
                            FoldOp::Sum
                        }
                        Fold::Min | Fold::Max => {
                            comparable(kinds[c], "MIN/MAX")?;
                            if matches!(f.fold, Fold::Min) {
                                FoldOp::Min
                            } else {
                                FoldOp::Max
                            }
                        }
                        Fold::Avg { sum, count } => {
                            let (s, k) = (resolve(sum, n)?, resolve(count, n)?);
                            let ok = match kinds[c] {
                                Kind::Decimal => kinds[s] == Kind::Decimal,
                                Kind::Float => kinds[s] == Kind::Float,
                                _ => false,
                            };
                            if !ok || !matches!(kinds[k], Kind::Int { .. }) {
                                return Err(refuse(format!("AVG merged as {t:?}")));
                            }
                            FoldOp::Avg { sum: s, count: k }
                        }
                    };
                    folds[c] = Some(op);
                }
                if spec.groups_sorted && !keys.is_empty() {
                    let mut gorder = Vec::new();
                    for k in spec.group_order() {
                        let c = resolve(k.column, n)?;
                        comparable(kinds[c], "GROUP BY")?;
                        gorder.push((c, k.desc));
                    }
                    if !keys.iter().all(|k| gorder.iter().any(|(c, _)| c == k)) {
                        return Err(refuse("sorted group streams not sorted by every group key"));
                    }
                    let streams_final = order.len() <= gorder.len()
                        && order.iter().zip(&gorder).all(|(a, b)| a == b);
                    Mode::Sorted(Box::new(Sorted {
                        order: gorder,
                        folds,
                        heads: (0..shards).map(|_| None).collect(),
                        last: vec![None; shards],
                        cur: None,
                        pending: (!streams_final).then(Vec::new),
                        keep: None,
                        distinct_set: keys.iter().any(|&k| k >= visible),
                        out: None,
                        ended_all: false,
                    }))
                } else {
                    Mode::Group {
                        keys,
                        folds,
                        index: HashMap::default(),
                        groups: Vec::new(),
                        out: None,
                    }
                }
            }
        };
        let mut mode = mode;
        if let Mode::Sorted(st) = &mut mode
            && st.pending.is_some()
        {
            st.keep = spec
                .limit
                .map(|l| usize::try_from(spec.offset.saturating_add(l)).unwrap_or(usize::MAX));
        }
        Ok(Merger {
            cols: columns,
            kinds,
            protocol,
            shards,
            visible,
            order,
            distinct: spec.distinct,
            having,
            offset: spec.offset,
            limit: spec.limit,
            ended: vec![false; shards],
            skipped: 0,
            emitted: 0,
            seen: HashSet::default(),
            max_groups: DEFAULT_MAX_GROUPS,
            unions: vec![false; shards],
            mode,
        })
    }

    /// Bounds the groups (and DISTINCT rows) held in memory.
    pub fn max_groups(mut self, n: usize) -> Merger {
        self.max_groups = n;
        self
    }

    /// How many tables' results each shard's stream unions (`exec::datanode_union`): with
    /// sorted group streams, a stream of several arms sends a group key once per arm holding
    /// it, as adjacent rows, which are folded like the rows of different shards. The check
    /// that a shard's group keys strictly increase then allows equal neighbours; it is what
    /// catches a server grouping under another collation than the merge compares with, so
    /// strings without a declared collation (expressions) are refused as group keys there.
    pub fn arms(mut self, arms: &[usize]) -> Result<Merger> {
        for (s, &n) in arms.iter().enumerate().take(self.shards) {
            self.unions[s] = n > 1;
        }
        if let Mode::Sorted(st) = &self.mode
            && self.unions.iter().any(|&u| u)
            && st.order.iter().any(|&(c, _)| {
                is_char_or_blob(self.cols[c].column_type) && self.cols[c].declared.is_none()
            })
        {
            return Err(refuse(
                "GROUP BY on a string expression over several tables of one datanode \
                 (table-per-shard) inside a transaction",
            ));
        }
        Ok(self)
    }

    /// How many column definitions the client gets (the first ones).
    pub fn visible_columns(&self) -> usize {
        self.visible
    }

    /// The column definitions the merge reads rows with (the visible ones first).
    pub fn columns(&self) -> &[Column] {
        &self.cols
    }

    fn too_many_groups(&self) -> Error {
        Error::reply(
            1235,
            b"42000",
            format!(
                "This version of Shoal doesn't yet support 'more than {} groups or distinct rows \
                 in a merged result (merge max_groups)'",
                self.max_groups
            ),
        )
    }

    fn sort_keys(&self, cells: &[Option<&[u8]>]) -> Result<Keys> {
        self.order
            .iter()
            .map(|&(c, _)| key_of(cells[c], &self.cols[c], self.kinds[c], self.protocol))
            .collect()
    }

    fn cmp_sort(&self, a: &[Key], b: &[Key]) -> std::cmp::Ordering {
        cmp_sort(&self.order, a, b)
    }
}

fn cmp_sort(order: &[(usize, bool)], a: &[Key], b: &[Key]) -> std::cmp::Ordering {
    {
        for ((x, y), &(_, desc)) in a.iter().zip(b).zip(order) {
            let o = cmp_keys(x, y);
            let o = if desc { o.reverse() } else { o };
            if o.is_ne() {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    }
}

impl Merger {
    /// One row of `shard`, as its payload: given as the `Vec` it was read into, it is kept as
    /// it is (no copy per row) until the merge sends it.
    pub fn feed_row(&mut self, shard: usize, payload: impl Into<Vec<u8>>) -> Result<()> {
        if shard >= self.shards || self.ended[shard] {
            return Err(crate::wire::response::protocol_error(
                "row fed for a finished shard",
            ));
        }
        let payload = payload.into();
        let cells = split_row(&payload, &self.cols, self.protocol)?;
        if matches!(self.mode, Mode::Stream { .. }) {
            let keys = if self.order.is_empty() {
                Keys::new()
            } else {
                self.sort_keys(&cells)?
            };
            let Mode::Stream { heads, last, .. } = &self.mode else {
                unreachable!()
            };
            if heads[shard].is_some() {
                return Err(crate::wire::response::protocol_error(
                    "row fed before it was asked for",
                ));
            }
            if let Some(prev) = &last[shard]
                && self.cmp_sort(prev, &keys).is_gt()
            {
                return Err(refuse(format!(
                    "merging shard results that are not in the order Shoal compares by (shard \
                     {shard}: a column's collation differs from the one its metadata reports?)"
                )));
            }
            drop(cells);
            let Mode::Stream { heads, .. } = &mut self.mode else {
                unreachable!()
            };
            heads[shard] = Some(Head { payload, keys });
            return Ok(());
        }
        if let Mode::Sorted(st) = &self.mode {
            let keys: Keys = st
                .order
                .iter()
                .map(|&(c, _)| key_of(cells[c], &self.cols[c], self.kinds[c], self.protocol))
                .collect::<Result<_>>()?;
            if st.heads[shard].is_some() {
                return Err(crate::wire::response::protocol_error(
                    "row fed before it was asked for",
                ));
            }
            // A shard sends each of its groups once, in order: a repeated or earlier key means
            // its collation orders or equates differently from the comparison used here.
            let union = self.unions[shard];
            if let Some(prev) = &st.last[shard]
                && (if union {
                    cmp_sort(&st.order, prev, &keys).is_gt()
                } else {
                    !cmp_sort(&st.order, prev, &keys).is_lt()
                })
            {
                return Err(refuse(format!(
                    "merging grouped shard results that are not in the order Shoal compares by \
                     (shard {shard}: a column's collation differs from the one its metadata \
                     reports?)"
                )));
            }
            let Mode::Sorted(st) = &mut self.mode else {
                unreachable!()
            };
            st.last[shard] = Some(keys.clone());
            drop(cells);
            st.heads[shard] = Some(Head { payload, keys });
            return Ok(());
        }
        self.fold(&cells)
    }

    fn fold(&mut self, cells: &[Option<&[u8]>]) -> Result<()> {
        let max = self.max_groups;
        let too_many = self.too_many_groups();
        let (cols, kinds, protocol) = (&self.cols, &self.kinds, self.protocol);
        let Mode::Group {
            keys,
            folds,
            index,
            groups,
            ..
        } = &mut self.mode
        else {
            unreachable!()
        };
        let gk: Keys = keys
            .iter()
            .map(|&c| key_of(cells[c], &cols[c], kinds[c], protocol))
            .collect::<Result<_>>()?;
        let gi = match index.get(&gk) {
            Some(&i) => i,
            None => {
                if groups.len() >= max {
                    return Err(too_many);
                }
                groups.push(new_group(folds, kinds, cells));
                index.insert(gk, groups.len() - 1);
                groups.len() - 1
            }
        };
        fold_row(&mut groups[gi], folds, cols, kinds, protocol, cells)
    }

    /// The end of `shard`'s rows.
    pub fn feed_end(&mut self, shard: usize) {
        if shard < self.shards {
            self.ended[shard] = true;
        }
    }

    fn limit_reached(&self) -> bool {
        self.limit.is_some_and(|l| self.emitted >= l)
    }

    /// The next step: a row for the client, a shard to read, or the end.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Step> {
        if matches!(self.mode, Mode::Sorted(_)) {
            return self.next_sorted();
        }
        loop {
            if self.limit_reached() {
                return Ok(Step::Done);
            }
            let payload = match &mut self.mode {
                Mode::Stream { heads, cur, .. } => {
                    let pick = if self.order.is_empty() {
                        while *cur < self.shards && self.ended[*cur] && heads[*cur].is_none() {
                            *cur += 1;
                        }
                        if *cur == self.shards {
                            return Ok(Step::Done);
                        }
                        if heads[*cur].is_none() {
                            return Ok(Step::Need(*cur));
                        }
                        *cur
                    } else {
                        if let Some(s) =
                            (0..self.shards).find(|&s| heads[s].is_none() && !self.ended[s])
                        {
                            return Ok(Step::Need(s));
                        }
                        let mut best: Option<usize> = None;
                        for s in 0..self.shards {
                            let Some(h) = &heads[s] else { continue };
                            best = match best {
                                Some(b) => {
                                    let bk = &heads[b].as_ref().expect("best has a head").keys;
                                    if cmp_sort(&self.order, &h.keys, bk).is_lt() {
                                        Some(s)
                                    } else {
                                        Some(b)
                                    }
                                }
                                None => Some(s),
                            };
                        }
                        match best {
                            Some(b) => b,
                            None => return Ok(Step::Done),
                        }
                    };
                    let Mode::Stream {
                        heads,
                        last,
                        prev,
                        distinct_adjacent,
                        ..
                    } = &mut self.mode
                    else {
                        unreachable!()
                    };
                    let head = heads[pick].take().expect("picked shard has a head");
                    let duplicate = *distinct_adjacent
                        && prev
                            .and_then(|p| last[p].as_ref())
                            .is_some_and(|k| cmp_sort(&self.order, k, &head.keys).is_eq());
                    *prev = Some(pick);
                    // The shard's next row is fed only once this one is taken: its keys are
                    // what that row is checked against (moved, not copied per row).
                    if !head.keys.is_empty() {
                        last[pick] = Some(head.keys);
                    }
                    if duplicate {
                        continue;
                    }
                    head.payload
                }
                Mode::Group { out, .. } => {
                    if out.is_none() {
                        if let Some(s) = (0..self.shards).find(|&s| !self.ended[s]) {
                            return Ok(Step::Need(s));
                        }
                        let rows = self.finish_groups()?;
                        let Mode::Group { out, .. } = &mut self.mode else {
                            unreachable!()
                        };
                        *out = Some(rows.into_iter());
                    }
                    let Mode::Group { out: Some(it), .. } = &mut self.mode else {
                        unreachable!()
                    };
                    match it.next() {
                        Some(p) => {
                            // Grouped rows were filtered, deduplicated and trimmed already.
                            if self.skipped < self.offset {
                                self.skipped += 1;
                                continue;
                            }
                            self.emitted += 1;
                            return Ok(Step::Row(p));
                        }
                        None => return Ok(Step::Done),
                    }
                }
                Mode::Sorted(_) => unreachable!("sorted groups step in next_sorted"),
            };
            // Ordered by the selected columns, deduplicated above already.
            let by_neighbours = matches!(
                self.mode,
                Mode::Stream {
                    distinct_adjacent: true,
                    ..
                }
            );
            if self.distinct && !by_neighbours {
                let cells = split_row(&payload, &self.cols, self.protocol)?;
                let k: Keys = (0..self.visible)
                    .map(|c| key_of(cells[c], &self.cols[c], self.kinds[c], self.protocol))
                    .collect::<Result<_>>()?;
                if self.seen.contains(&k) {
                    continue;
                }
                if self.seen.len() >= self.max_groups {
                    return Err(self.too_many_groups());
                }
                self.seen.insert(k);
            }
            if self.skipped < self.offset {
                self.skipped += 1;
                continue;
            }
            self.emitted += 1;
            return Ok(Step::Row(self.trim(payload)?));
        }
    }

    /// Sorted group streams: fold the merged run of each key, release it when the key changes.
    fn next_sorted(&mut self) -> Result<Step> {
        loop {
            if self.limit_reached() {
                return Ok(Step::Done);
            }
            let Mode::Sorted(st) = &mut self.mode else {
                unreachable!()
            };
            if st.ended_all && st.out.is_none() {
                let Some(mut rows) = st.pending.take() else {
                    return Ok(Step::Done);
                };
                rows.sort_by(|a, b| cmp_sort(&self.order, &a.0, &b.0));
                let vis = self.visible;
                let encoded: Vec<Vec<u8>> = rows
                    .into_iter()
                    .map(|(_, cells)| encode_row(&cells[..vis], &self.cols[..vis], self.protocol))
                    .collect();
                st.out = Some(encoded.into_iter());
            }
            if let Some(it) = &mut st.out {
                match it.next() {
                    Some(p) => {
                        if self.skipped < self.offset {
                            self.skipped += 1;
                            continue;
                        }
                        self.emitted += 1;
                        return Ok(Step::Row(p));
                    }
                    None => return Ok(Step::Done),
                }
            }
            if let Some(s) = (0..self.shards).find(|&s| st.heads[s].is_none() && !self.ended[s]) {
                return Ok(Step::Need(s));
            }
            let mut best: Option<usize> = None;
            for s in 0..self.shards {
                let Some(h) = &st.heads[s] else { continue };
                best = match best {
                    Some(b) => {
                        let bk = &st.heads[b].as_ref().expect("best has a head").keys;
                        if cmp_sort(&st.order, &h.keys, bk).is_lt() {
                            Some(s)
                        } else {
                            Some(b)
                        }
                    }
                    None => Some(s),
                };
            }
            let done = match best {
                None => {
                    st.ended_all = true;
                    st.cur.take()
                }
                Some(b) => {
                    let head = st.heads[b].take().expect("picked shard has a head");
                    let cells = split_row(&head.payload, &self.cols, self.protocol)?;
                    match &mut st.cur {
                        Some((k, g)) if cmp_sort(&st.order, k, &head.keys).is_eq() => {
                            fold_row(g, &st.folds, &self.cols, &self.kinds, self.protocol, &cells)?;
                            None
                        }
                        _ => {
                            let mut g = new_group(&st.folds, &self.kinds, &cells);
                            fold_row(
                                &mut g,
                                &st.folds,
                                &self.cols,
                                &self.kinds,
                                self.protocol,
                                &cells,
                            )?;
                            st.cur.replace((head.keys, g))
                        }
                    }
                }
            };
            let Some((_, g)) = done else { continue };
            let distinct_set = st.distinct_set;
            let Some(cells) = self.finish_group(g, self.distinct && distinct_set)? else {
                continue;
            };
            let refs: Vec<Option<&[u8]>> = cells.iter().map(|c| c.as_deref()).collect();
            let sk = match &self.mode {
                Mode::Sorted(st) if st.pending.is_some() => Some(self.sort_keys(&refs)?),
                _ => None,
            };
            let max = self.max_groups;
            let too_many = self.too_many_groups();
            let Mode::Sorted(st) = &mut self.mode else {
                unreachable!()
            };
            match (&mut st.pending, sk) {
                (Some(pending), Some(sk)) => {
                    pending.push((sk, cells));
                    match st.keep.filter(|&k| k <= max) {
                        // Top-k: sort and cut now and then, keeping at most 2k groups.
                        Some(k) if pending.len() >= 2 * k.max(16) => {
                            pending.sort_by(|a, b| cmp_sort(&self.order, &a.0, &b.0));
                            pending.truncate(k);
                        }
                        Some(_) => {}
                        None if pending.len() > max => return Err(too_many),
                        None => {}
                    }
                }
                _ => {
                    if self.skipped < self.offset {
                        self.skipped += 1;
                        continue;
                    }
                    self.emitted += 1;
                    let vis = self.visible;
                    return Ok(Step::Row(encode_row(
                        &refs[..vis],
                        &self.cols[..vis],
                        self.protocol,
                    )));
                }
            }
        }
    }

    /// A folded group as client cells, or `None` when HAVING or DISTINCT drops it.
    fn finish_group(&mut self, g: Group, distinct: bool) -> Result<Option<OwnedCells>> {
        let mut cells = Vec::with_capacity(g.cells.len());
        for (c, (cell, acc)) in g.cells.into_iter().zip(g.accs).enumerate() {
            cells.push(self.output_cell(c, cell, acc)?);
        }
        let refs: Vec<Option<&[u8]>> = cells.iter().map(|c| c.as_deref()).collect();
        if let Some(h) = &self.having
            && h.eval(&refs, &self.cols, &self.kinds, self.protocol)? != Some(true)
        {
            return Ok(None);
        }
        if distinct {
            let k: Keys = (0..self.visible)
                .map(|c| key_of(refs[c], &self.cols[c], self.kinds[c], self.protocol))
                .collect::<Result<_>>()?;
            if self.seen.contains(&k) {
                return Ok(None);
            }
            if self.seen.len() >= self.max_groups {
                return Err(self.too_many_groups());
            }
            self.seen.insert(k);
        }
        Ok(Some(cells))
    }

    /// Drops the hidden columns of a shard row.
    fn trim(&self, payload: Vec<u8>) -> Result<Vec<u8>> {
        if self.visible == self.cols.len() {
            return Ok(payload);
        }
        let cells = split_row(&payload, &self.cols, self.protocol)?;
        Ok(encode_row(
            &cells[..self.visible],
            &self.cols[..self.visible],
            self.protocol,
        ))
    }

    /// All shards ended: the groups as client rows, filtered, deduplicated and sorted.
    fn finish_groups(&mut self) -> Result<Vec<Vec<u8>>> {
        let Mode::Group {
            keys,
            groups,
            folds,
            ..
        } = &mut self.mode
        else {
            unreachable!()
        };
        if groups.is_empty() && keys.is_empty() {
            // Aggregates over no rows at all: one row (COUNT 0, others NULL).
            let accs = folds
                .iter()
                .map(|f| match f {
                    Some(FoldOp::Count) => Acc::Count(0),
                    _ => Acc::SumDec(None),
                })
                .collect();
            groups.push(Group {
                cells: vec![None; self.cols.len()],
                accs,
            });
        }
        let groups = std::mem::take(groups);
        let mut rows: Vec<(Keys, OwnedCells)> = Vec::new();
        for g in groups {
            let Some(cells) = self.finish_group(g, self.distinct)? else {
                continue;
            };
            let refs: Vec<Option<&[u8]>> = cells.iter().map(|c| c.as_deref()).collect();
            let sk = self.sort_keys(&refs)?;
            rows.push((sk, cells));
        }
        rows.sort_by(|a, b| self.cmp_sort(&a.0, &b.0));
        let vis = self.visible;
        Ok(rows
            .into_iter()
            .map(|(_, cells)| encode_row(&cells[..vis], &self.cols[..vis], self.protocol))
            .collect())
    }

    /// The bytes of a folded cell in the client's protocol.
    fn output_cell(&self, c: usize, first: Option<Vec<u8>>, acc: Acc) -> Result<Option<Vec<u8>>> {
        let col = &self.cols[c];
        let text = self.protocol == Protocol::Text;
        let dec = |d: Dec| -> Result<Vec<u8>> {
            d.to_text(u32::from(col.decimals))
                .map(String::into_bytes)
                .ok_or_else(|| refuse("a merged DECIMAL beyond 38 digits"))
        };
        let float = |x: f64| -> Result<Vec<u8>> {
            if text {
                Ok(double_text(x, col.decimals)?.into_bytes())
            } else if col.column_type == ColumnType::MYSQL_TYPE_FLOAT {
                Ok((x as f32).to_le_bytes().to_vec())
            } else {
                Ok(x.to_le_bytes().to_vec())
            }
        };
        Ok(match acc {
            Acc::First => first,
            Acc::Count(n) => Some(if text {
                n.to_string().into_bytes()
            } else {
                let w = match col.column_type {
                    ColumnType::MYSQL_TYPE_TINY => 1,
                    ColumnType::MYSQL_TYPE_SHORT | ColumnType::MYSQL_TYPE_YEAR => 2,
                    ColumnType::MYSQL_TYPE_LONG | ColumnType::MYSQL_TYPE_INT24 => 4,
                    _ => 8,
                };
                let fits = i64::try_from(n).is_ok() && (w == 8 || n < 1i128 << (8 * w - 1));
                if !fits {
                    return Err(refuse("a merged COUNT beyond its column type"));
                }
                (n as i64).to_le_bytes()[..w].to_vec()
            }),
            Acc::SumDec(s) => s.map(dec).transpose()?,
            Acc::SumFloat(s) => s.map(float).transpose()?,
            Acc::Best(b) => b.map(|(_, raw)| raw),
            Acc::AvgDec(s, n) => match s {
                Some(s) if n > 0 => Some(dec(s
                    .div_round(n, u32::from(col.decimals))
                    .ok_or_else(|| refuse("a merged AVG beyond 38 digits"))?)?),
                _ => None,
            },
            Acc::AvgFloat(s, n) => match s {
                Some(s) if n > 0 => Some(float(s / n as f64)?),
                _ => None,
            },
        })
    }
}

fn add_dec(s: &mut Option<Dec>, k: Key) -> Result<()> {
    let v = match k {
        Key::Dec(d) => d,
        Key::Int(i) => Dec::new(i, 0),
        _ => return Ok(()),
    };
    *s = Some(match s {
        None => v,
        Some(cur) => cur
            .checked_add(&v)
            .ok_or_else(|| refuse("a merged SUM beyond 38 digits"))?,
    });
    Ok(())
}

fn add_float(s: &mut Option<f64>, k: Key) {
    if let Key::Float(f) = k {
        *s = Some(s.unwrap_or(0.0) + f);
    }
}

fn new_group(folds: &[Option<FoldOp>], kinds: &[Kind], cells: &[Option<&[u8]>]) -> Group {
    let accs = folds
        .iter()
        .enumerate()
        .map(|(c, f)| match f {
            None => Acc::First,
            Some(FoldOp::Count) => Acc::Count(0),
            Some(FoldOp::Sum) if kinds[c] == Kind::Float => Acc::SumFloat(None),
            Some(FoldOp::Sum) => Acc::SumDec(None),
            Some(FoldOp::Min | FoldOp::Max) => Acc::Best(None),
            Some(FoldOp::Avg { .. }) if kinds[c] == Kind::Float => Acc::AvgFloat(None, 0),
            Some(FoldOp::Avg { .. }) => Acc::AvgDec(None, 0),
        })
        .collect();
    Group {
        cells: cells.iter().map(|c| c.map(<[u8]>::to_vec)).collect(),
        accs,
    }
}

fn fold_row(
    g: &mut Group,
    folds: &[Option<FoldOp>],
    cols: &[Column],
    kinds: &[Kind],
    protocol: Protocol,
    cells: &[Option<&[u8]>],
) -> Result<()> {
    let key = |c: usize| key_of(cells[c], &cols[c], kinds[c], protocol);
    for (c, f) in folds.iter().enumerate() {
        let Some(f) = f else { continue };
        match (f, &mut g.accs[c]) {
            (FoldOp::Count, Acc::Count(n)) => {
                if let Key::Int(v) = key(c)? {
                    *n += v;
                }
            }
            (FoldOp::Sum, Acc::SumDec(s)) => add_dec(s, key(c)?)?,
            (FoldOp::Sum, Acc::SumFloat(s)) => add_float(s, key(c)?),
            (FoldOp::Min | FoldOp::Max, Acc::Best(b)) => {
                let k = key(c)?;
                if let (Key::Null, _) | (_, None) = (&k, &cells[c]) {
                    continue;
                }
                let better = match b {
                    None => true,
                    Some((cur, _)) => {
                        let o = cmp_keys(&k, cur);
                        if matches!(f, FoldOp::Min) {
                            o.is_lt()
                        } else {
                            o.is_gt()
                        }
                    }
                };
                if better {
                    *b = Some((k, cells[c].unwrap_or_default().to_vec()));
                }
            }
            (FoldOp::Avg { sum, count }, Acc::AvgDec(s, n)) => {
                add_dec(s, key(*sum)?)?;
                if let Key::Int(v) = key(*count)? {
                    *n += v;
                }
            }
            (FoldOp::Avg { sum, count }, Acc::AvgFloat(s, n)) => {
                add_float(s, key(*sum)?);
                if let Key::Int(v) = key(*count)? {
                    *n += v;
                }
            }
            _ => unreachable!("accumulator made for its fold"),
        }
    }
    Ok(())
}
