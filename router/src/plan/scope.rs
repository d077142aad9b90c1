//! Which table a column of a SELECT block stands for, across the blocks of one statement (a
//! qualifier of an enclosing block in a correlated subquery, a derived table's column passing
//! one of its tables' columns through), and which blocks' conditions narrow the rows of a
//! co-location group that matter.
//!
//! A condition on a shard key narrows the rows that can make a difference to the answer:
//! - in its own block, the rows of every table that an equality of the block joins on it;
//! - in a subquery of the block, the rows the subquery reads through a correlated equality
//!   (the subquery's answer only matters for the block's rows that pass the condition); the
//!   reverse does not hold (`NOT EXISTS (SELECT .. WHERE k = outer.k AND k = 3)` narrows nothing
//!   of the outer rows);
//! - both ways across a derived table's pass-through column, when the enclosing block has no
//!   outer join (the derived table's rows are made from rows of its tables with that value, and
//!   only rows joined on it matter outside).

use super::placement::{Table, dist_column, qualifies};
use crate::sql::stmt::{Block, BlockLink, ColRef};

/// Deepest chain of derived tables followed when resolving a column (a bound, not a limit
/// anyone writes).
const MAX_DEPTH: usize = 32;

pub(crate) struct Scopes<'a> {
    tables: &'a [Table],
    blocks: &'a [Block],
    /// Per block, the indices of the tables in its FROM.
    block_tables: Vec<Vec<usize>>,
    /// Per table, the block whose FROM holds it (none: the target of an UPDATE, DELETE or
    /// INSERT, which is in no SELECT).
    block_of: Vec<Option<usize>>,
}

impl<'a> Scopes<'a> {
    pub fn new(tables: &'a [Table], blocks: &'a [Block]) -> Self {
        let mut block_tables = vec![Vec::new(); blocks.len()];
        let mut block_of = vec![None; tables.len()];
        for (i, t) in tables.iter().enumerate() {
            let Some(tok) = t.r.name_tok else { continue };
            if let Some(b) = blocks.iter().position(|b| b.tables.contains(&tok)) {
                block_tables[b].push(i);
                block_of[i] = Some(b);
            }
        }
        Scopes {
            tables,
            blocks,
            block_tables,
            block_of,
        }
    }

    /// Count table `t` as a table of block `b` (the target of INSERT ... SELECT, whose rows are
    /// the rows of the SELECT).
    pub fn adopt(&mut self, t: usize, b: usize) {
        self.block_of[t] = Some(b);
    }

    /// The one root block (a SELECT, or the SELECT of INSERT ... SELECT), if there is one.
    pub fn only_root(&self) -> Option<usize> {
        let mut roots = (0..self.blocks.len()).filter(|&b| self.blocks[b].parent.is_none());
        let r = roots.next()?;
        roots.next().is_none().then_some(r)
    }

    /// The table whose distribution column `col`, written in block `b`, is.
    pub fn dist_table(&self, b: usize, col: &ColRef) -> Option<usize> {
        self.resolve(b, col, 0)
    }

    fn resolve(&self, b: usize, col: &ColRef, depth: usize) -> Option<usize> {
        if depth > MAX_DEPTH {
            return None;
        }
        let block = &self.blocks[b];
        let is_dist = |i: usize| {
            dist_column(&self.tables[i]).is_some_and(|c| c.eq_ignore_ascii_case(&col.column))
        };
        match &col.table {
            Some(q) => {
                // MariaDB looks the qualifier up in the innermost block first.
                let hits: Vec<usize> = self.block_tables[b]
                    .iter()
                    .copied()
                    .filter(|&i| qualifies(&self.tables[i], q, col.schema.as_deref()))
                    .collect();
                if let [i] = hits[..] {
                    return is_dist(i).then_some(i);
                }
                if !hits.is_empty() {
                    return None;
                }
                if col.schema.is_none()
                    && let Some((d, inner)) = self.derived_column(b, Some(q), &col.column)
                {
                    return self.resolve(d, &inner, depth + 1);
                }
                match (&block.link, block.parent) {
                    (BlockLink::Subquery, Some(p)) => self.resolve(p, col, depth + 1),
                    _ => None,
                }
            }
            None => {
                // A name of no table of the block may be a column the router does not know of
                // (a table's other column, or an enclosing block's): left unresolved.
                let hits: Vec<usize> = self.block_tables[b]
                    .iter()
                    .copied()
                    .filter(|&i| is_dist(i))
                    .collect();
                match hits[..] {
                    [i] => Some(i),
                    [] => {
                        let (d, inner) = self.derived_column(b, None, &col.column)?;
                        self.resolve(d, &inner, depth + 1)
                    }
                    _ => None,
                }
            }
        }
    }

    /// The derived table of block `b` (by alias, or the one having the column) whose column
    /// `name` passes a column of its block through: that block and that column. Not across an
    /// outer join of `b` (the preserved side's rows are not narrowed by the other's).
    fn derived_column(&self, b: usize, alias: Option<&str>, name: &str) -> Option<(usize, ColRef)> {
        if self.blocks[b].has_outer_join {
            return None;
        }
        let mut found = None;
        for (d, block) in self.blocks.iter().enumerate() {
            let BlockLink::Derived {
                alias: a,
                passthrough,
            } = &block.link
            else {
                continue;
            };
            if block.parent != Some(b) || alias.is_some_and(|x| !x.eq_ignore_ascii_case(a)) {
                continue;
            }
            let hit = passthrough
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, c)| c.clone());
            match (hit, alias) {
                (Some(c), _) => {
                    if found.is_some() {
                        return None;
                    }
                    found = Some((d, c));
                }
                // The alias names this derived table, which does not pass the column through.
                (None, Some(_)) => return None,
                (None, None) => {}
            }
        }
        found
    }

    /// Whether the condition of block `b` narrows the rows that matter of every table of
    /// `members` (a co-location group): they all sit in `b`, below it, or, from a derived
    /// table, in the blocks enclosing it without an outer join (see the module's comment).
    pub fn narrows(&self, b: usize, members: &[usize]) -> bool {
        let mut top = b;
        while let (BlockLink::Derived { .. }, Some(p)) =
            (&self.blocks[top].link, self.blocks[top].parent)
        {
            if self.blocks[p].has_outer_join {
                break;
            }
            top = p;
        }
        members.iter().all(|&m| {
            let mut x = self.block_of[m];
            while let Some(bx) = x {
                if bx == top {
                    return true;
                }
                x = self.blocks[bx].parent;
            }
            false
        })
    }

    /// Pairs of tables each equality of each block joins on their distribution columns.
    pub fn key_equalities(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (b, block) in self.blocks.iter().enumerate() {
            for (x, y) in &block.equalities {
                if let (Some(i), Some(j)) = (self.dist_table(b, x), self.dist_table(b, y))
                    && i != j
                {
                    out.push((i, j));
                }
            }
        }
        out
    }
}
