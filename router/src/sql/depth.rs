//! How deep a statement's tree can be, read from its tokens before anything builds the tree.
//!
//! Every later reading of a statement recurses through its tree: sqlparser's parser, our
//! analysis, the rendering of expressions, and the drop of the tree itself (sqlparser's error
//! path included). Each level costs stack, so a statement that nests deeper than the serving
//! thread's stack holds would abort the whole process. The statement's tokens bound the depth
//! of any tree read from them, and this bound is checked first: a statement deeper than
//! [`MAX_DEPTH`] is refused with MariaDB's own errors for a too-complex statement, and one
//! within it is read on a stack sized for it (`shoal_proxy::cores::STACK_SIZE`, with a test
//! that reads the deepest accepted statements of every kind on that stack).
//!
//! The bound, for each path from the statement down to a token, adds up:
//! - every `(` and `CASE` opened on the way (a nested expression, subquery, call or list);
//! - in each comma-separated part of each of those (`WHEN`, `THEN` and `ELSE` separate parts
//!   of a CASE, which sqlparser keeps as lists), the depth its `AND`/`OR`/`XOR` are built to
//!   (see [`super::dialect`]: left-deep up to a few terms, balanced beyond), plus the most
//!   tokens other than literals of one of the terms they join: sqlparser builds any other
//!   chain of infix operators (`1 + 1 + ...`, `UNION ALL ...`, `IS NULL IS NULL`) left-deep,
//!   one level per operator, a prefix (`NOT`, `-`) is a level too, and every other operator
//!   binds more tightly than the logical ones (each word is counted, keyword or name: an
//!   over-estimate).
//!
//! MariaDB's own limits (10.11, default thread_stack, measured): 31,990 nested parentheses,
//! `NOT`s or unary minuses (1064 "memory exhausted" beyond), 592 nested function calls or a
//! chain of 593 `+` (1436 "Thread stack overrun" beyond), 63 nested subqueries (1473 "Too high
//! level of nesting for select" beyond); `OR`/`AND` chains of 100,000 terms and more are
//! answered.

use super::dialect::LEFT_DEEP_TERMS;
use super::lex::{TokKind, Token};

/// The deepest statement Shoal reads, in the levels counted above: MariaDB's own limit on
/// nested parentheses (31,990), well above its 593-term operator chain and 592 nested calls.
pub const MAX_DEPTH: usize = 32000;

/// Set operations (`UNION`, `EXCEPT`, `INTERSECT`) in one chain: sqlparser reads each as a
/// level, and the analysis of a chain takes time growing with the square of its length
/// (32,000 branches: minutes). MariaDB answers 5,000 and more.
pub const MAX_SET_OPERATIONS: usize = 2000;

/// SELECTs nested in one another (the statement's own counted): MariaDB refuses a 65th.
pub const MAX_SELECT_NESTING: usize = 64;

/// sqlparser's own recursion limit: a backstop above what [`MAX_DEPTH`] lets through (its
/// levels are not ours: a subquery takes several), never what refuses a statement.
pub const PARSER_RECURSION_LIMIT: usize = 8 * MAX_DEPTH;

/// The stack a thread needs to read any statement within [`MAX_DEPTH`], with room to spare.
/// sqlparser's own recursion grows onto stack segments of its own when the thread's runs low
/// (see [`PARSER_STACK_RESERVE`]); what must fit here is the rest: the analysis, the rendering
/// and the drop of the tree. Measured in a debug build (the larger frames), the deepest
/// accepted statements take at most 32 MiB (31,990 nested parentheses or unary minuses); tests
/// read them, and generated combinations of every kind, on a thread of half this size.
/// Reserved, not used: a thread's memory grows only with the depth it reads.
pub const STACK_SIZE: usize = 64 << 20;

/// sqlparser's parser moves to a new stack segment (heap-allocated, its `recursive-protection`)
/// when less than this is left: what it drops on an error path inside its recursion (a partly
/// read tree, at most [`MAX_DEPTH`] deep) is dropped within this much stack. Its default, 128
/// KiB, would leave a few hundred levels: a deep tree dropped there overflowed the thread.
pub const PARSER_STACK_RESERVE: usize = STACK_SIZE / 4;

/// The size of the parser's new stack segments: reserved address space, used as deep as it
/// reads.
pub const PARSER_STACK_SEGMENT: usize = STACK_SIZE;

/// Sets sqlparser's stack growth to [`PARSER_STACK_RESERVE`] and [`PARSER_STACK_SEGMENT`]
/// (process-wide, once; sqlparser is its only user).
pub(crate) fn size_parser_stack() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        recursive::set_minimum_stack_size(PARSER_STACK_RESERVE);
        recursive::set_stack_allocation_size(PARSER_STACK_SEGMENT);
    });
}

/// Why a statement is not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TooDeep {
    /// More levels than [`MAX_DEPTH`].
    Expression(usize),
    /// More SELECTs nested than [`MAX_SELECT_NESTING`].
    Selects(usize),
}

/// One open `(` or `CASE` (the statement itself is the outermost).
#[derive(Default)]
struct Group {
    case: bool,
    /// A SELECT opens in this group.
    select: bool,
    /// The operators of the current term of the current part (terms are separated by the
    /// logical operators, which bind less tightly than any other), the most of its terms so
    /// far, its logical operators and its deepest nested group.
    ops: usize,
    term_ops: usize,
    logical: usize,
    nested: usize,
    /// The set operators (`UNION`, `EXCEPT`, `INTERSECT`) of the current part: they separate
    /// terms as the logical operators do, but their chain is built left-deep.
    sets: usize,
    /// The deepest part closed so far.
    deepest: usize,
}

impl Group {
    /// `AND`, `OR`, `XOR` (or `&&`, `||`): the next term starts.
    fn logical(&mut self) {
        self.logical += 1;
        self.next_term();
    }

    fn set_operator(&mut self) {
        self.sets += 1;
        self.next_term();
    }

    fn next_term(&mut self) {
        self.term_ops = self.term_ops.max(self.ops);
        self.ops = 0;
    }

    fn close_part(&mut self) {
        let logical = if self.logical <= LEFT_DEEP_TERMS {
            self.logical
        } else {
            usize::BITS as usize - self.logical.leading_zeros() as usize
        };
        self.deepest = self
            .deepest
            .max(self.term_ops.max(self.ops) + logical + self.sets + self.nested);
        self.sets = 0;
        self.ops = 0;
        self.term_ops = 0;
        self.logical = 0;
        self.nested = 0;
    }
}

/// Checks the bound of `toks` (one statement, as [`super::lex`] read it). Linear in the
/// tokens, with no recursion of its own.
pub fn check(sql: &str, toks: &[Token], pipes_as_concat: bool) -> Result<(), TooDeep> {
    let mut open: Vec<Group> = vec![Group::default()];
    let mut selects = 1usize;
    for t in toks {
        let text = t.text(sql);
        let nested = open.len() > 1;
        let g = open
            .last_mut()
            .expect("the statement's group is never closed");
        match t.kind {
            TokKind::Punct => match text {
                "(" => {
                    open.push(Group::default());
                }
                ")" => close(&mut open, &mut selects, false),
                "," | ";" => g.close_part(),
                // `a.b.c` is one name, read flat.
                "." => {}
                "&&" => g.logical(),
                "||" if !pipes_as_concat => g.logical(),
                _ => g.ops += 1,
            },
            TokKind::Word => {
                if ["AND", "OR", "XOR"]
                    .iter()
                    .any(|k| text.eq_ignore_ascii_case(k))
                {
                    g.logical();
                } else if ["UNION", "EXCEPT", "INTERSECT"]
                    .iter()
                    .any(|k| text.eq_ignore_ascii_case(k))
                {
                    g.set_operator();
                } else if text.eq_ignore_ascii_case("CASE") {
                    open.push(Group {
                        case: true,
                        ..Group::default()
                    });
                } else if text.eq_ignore_ascii_case("END") {
                    close(&mut open, &mut selects, true);
                } else if g.case
                    && ["WHEN", "THEN", "ELSE"]
                        .iter()
                        .any(|k| text.eq_ignore_ascii_case(k))
                {
                    g.close_part();
                } else if text.eq_ignore_ascii_case("SELECT") {
                    // The statement's own SELECT is counted already.
                    if !g.select && nested {
                        g.select = true;
                        selects += 1;
                    }
                    g.ops += 1;
                } else {
                    g.ops += 1;
                }
            }
            _ => {}
        }
        // Each open group is a level, and so is each operator of a part: either past the
        // limit is refused at once (the groups' memory stays bounded too).
        let g = open.last().expect("the statement's group");
        if open.len() > MAX_DEPTH || g.ops > MAX_DEPTH || g.sets > MAX_SET_OPERATIONS {
            return Err(TooDeep::Expression(open.len().max(g.ops).max(g.sets)));
        }
        if selects > MAX_SELECT_NESTING {
            return Err(TooDeep::Selects(selects));
        }
    }
    while open.len() > 1 {
        close(&mut open, &mut selects, false);
    }
    let top = open.last_mut().expect("the statement's group");
    top.close_part();
    if top.deepest > MAX_DEPTH {
        return Err(TooDeep::Expression(top.deepest));
    }
    Ok(())
}

/// Closes the innermost group (a `)`, or an `END` when it is a CASE's), adding its depth to
/// the part of the group around it. An unmatched closer is ignored: the parser refuses it.
fn close(open: &mut Vec<Group>, selects: &mut usize, case_end: bool) {
    if open.len() < 2 {
        return;
    }
    if case_end != open.last().is_some_and(|g| g.case) {
        // `END` outside a CASE, or `)` closing inside one: not a group we opened.
        if case_end {
            if let Some(g) = open.last_mut() {
                g.ops += 1;
            }
            return;
        }
        // A `)` ends the CASE left open inside its parentheses too.
        while open.len() > 1 && open.last().is_some_and(|g| g.case) {
            close(open, selects, true);
        }
        if open.len() < 2 {
            return;
        }
    }
    let mut g = open.pop().expect("checked above");
    if g.select {
        *selects -= 1;
    }
    g.close_part();
    let parent = open.last_mut().expect("checked above");
    parent.nested = parent.nested.max(g.deepest + 1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lex::tokenize;

    fn depth_of(sql: &str) -> Result<(), TooDeep> {
        check(sql, &tokenize(sql).expect("tokens"), false)
    }

    fn repeat(s: &str, n: usize) -> String {
        s.repeat(n)
    }

    #[test]
    fn long_lists_and_logical_chains_are_not_deep() {
        let or = vec!["id = 1"; 200_000].join(" OR ");
        assert_eq!(depth_of(&format!("SELECT 1 FROM t WHERE {or}")), Ok(()));
        let when = repeat("WHEN id = 1 THEN 2 ", 100_000);
        assert_eq!(depth_of(&format!("SELECT CASE {when} END")), Ok(()));
        let list = vec!["1"; 200_000].join(", ");
        assert_eq!(
            depth_of(&format!("SELECT 1 FROM t WHERE id IN ({list})")),
            Ok(())
        );
    }

    #[test]
    fn nesting_and_operator_chains_are_counted() {
        let deep = |n| format!("SELECT {}1{}", repeat("(", n), repeat(")", n));
        assert_eq!(depth_of(&deep(MAX_DEPTH - 2)), Ok(()));
        assert!(matches!(
            depth_of(&deep(MAX_DEPTH + 1)),
            Err(TooDeep::Expression(_))
        ));
        let plus = format!("SELECT {}", vec!["1"; MAX_DEPTH + 2].join(" + "));
        assert!(matches!(depth_of(&plus), Err(TooDeep::Expression(_))));
        // Nested CASEs add up; a CASE's branches do not.
        let cases = format!(
            "SELECT {}1{}",
            repeat("CASE WHEN 1 THEN ", MAX_DEPTH),
            repeat(" END", MAX_DEPTH)
        );
        assert!(matches!(depth_of(&cases), Err(TooDeep::Expression(_))));
        let unions = vec!["SELECT 1"; MAX_SET_OPERATIONS + 2].join(" UNION ALL ");
        assert!(matches!(depth_of(&unions), Err(TooDeep::Expression(_))));
    }

    #[test]
    fn selects_nested_past_mariadbs_limit_are_refused_as_mariadb_does() {
        let nested = |n| format!("SELECT {}1{}", repeat("(SELECT ", n), repeat(")", n));
        assert_eq!(depth_of(&nested(MAX_SELECT_NESTING - 1)), Ok(()));
        assert_eq!(
            depth_of(&nested(MAX_SELECT_NESTING)),
            Err(TooDeep::Selects(MAX_SELECT_NESTING + 1))
        );
        // Side by side, not nested.
        let siblings = vec!["(SELECT 1)"; 200].join(" + ");
        assert_eq!(depth_of(&format!("SELECT {siblings}")), Ok(()));
    }

    #[test]
    fn unbalanced_text_is_measured_without_panicking() {
        for sql in [
            "SELECT ))))",
            "SELECT ((((",
            "SELECT END END",
            "SELECT CASE WHEN (1 END)",
            ")",
        ] {
            assert_eq!(depth_of(sql), Ok(()), "{sql}");
        }
    }
}
