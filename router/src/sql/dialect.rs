//! sqlparser's MySQL dialect with MariaDB's operator precedence where they differ.
//!
//! sqlparser binds `XOR` tighter than comparisons (`a = 1 AND b = 2 XOR c = 3` would read
//! `a = 1 AND b = (2 XOR c) = 3`); MariaDB's grammar puts it between `AND` and `OR`
//! (`%left OR_SYM OR2_SYM`, `%left XOR`, `%left AND_SYM AND_AND_SYM`). sqlparser's MySQL
//! dialect also refuses the prefix `!`. Everything else is the MySQL dialect's: this wrapper
//! answers sqlparser's `dialect_of!(MySqlDialect)` checks as the MySQL dialect does.
//!
//! `||` never reaches the parser as an operator of its own: [`super::analyze`] renders it as
//! `OR` unless sql_mode has PIPES_AS_CONCAT, and `&&` as `AND`.
//!
//! `NOT` and `!` bind tighter than `AND`, `XOR` and `OR` in every sql_mode, more or less tightly
//! than comparisons depending on HIGH_NOT_PRECEDENCE and on which of the two it is. The
//! planner reads no predicate under a `NOT` or `!` (they prune nothing), so the only thing that
//! matters for routing is where the operand of `NOT`/`!` ends relative to `AND`/`XOR`/`OR`,
//! and that is the same in every reading: at the next of those three.
//!
//! A long `AND`, `OR` or `XOR` chain (query builders write `id = 0 OR id = 1 OR ...` with
//! thousands of terms) is built as a balanced tree rather than sqlparser's left-deep one: the
//! three are associative, so the reading is the same, and a 100,000-term chain is 17 levels
//! deep instead of 100,000, which every later walk of the tree (the analysis, its rendering,
//! its drop) would recurse through (see [`super::depth`]).

use std::any::TypeId;
use std::cell::Cell;

use std::ops::ControlFlow;

use sqlparser::ast::{BinaryOperator, Expr, Query, Statement, Visit, Visitor};
use sqlparser::dialect::{BindPlaceholderStyle, Dialect, MySqlDialect};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

/// Between sqlparser's `OR` (5) and `AND` (10).
const XOR_PRECEDENCE: u8 = 7;

/// A logical chain of up to this many terms is built left-deep, exactly as sqlparser builds
/// it (every statement the tests and golden files read keeps its tree); a longer one is
/// balanced. Counted by [`super::depth`] as this many levels at most.
pub(crate) const LEFT_DEEP_TERMS: usize = 32;

#[derive(Debug, Default)]
pub(crate) struct MariaDbDialect {
    my: MySqlDialect,
    /// A statement refused as too deep to read (a deep term before a long chain): the parser
    /// may swallow the error it was given on a path that tries another reading, so the
    /// refusal is also kept here, for [`Self::refused_too_deep`].
    too_deep: Cell<bool>,
}

impl MariaDbDialect {
    /// This parse met a statement too deep to read (whatever the parser made of it after).
    pub(crate) fn refused_too_deep(&self) -> bool {
        self.too_deep.get()
    }
}

impl Dialect for MariaDbDialect {
    fn dialect(&self) -> TypeId {
        TypeId::of::<MySqlDialect>()
    }

    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        match &parser.peek_token_ref().token {
            Token::Word(w) if w.keyword == Keyword::XOR => Some(Ok(XOR_PRECEDENCE)),
            _ => self.my.get_next_precedence(parser),
        }
    }

    fn supports_bang_not_operator(&self) -> bool {
        true
    }

    // The MySQL dialect's answers, one by one (a wrapper gets the trait defaults otherwise).
    fn supports_string_literal_table_alias(&self, explicit: bool) -> bool {
        self.my.supports_string_literal_table_alias(explicit)
    }
    fn is_identifier_start(&self, ch: char) -> bool {
        self.my.is_identifier_start(ch)
    }
    fn is_identifier_part(&self, ch: char) -> bool {
        self.my.is_identifier_part(ch)
    }
    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.my.is_delimited_identifier_start(ch)
    }
    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        self.my.identifier_quote_style(identifier)
    }
    fn ordered_bind_placeholder_style(&self) -> Option<BindPlaceholderStyle> {
        self.my.ordered_bind_placeholder_style()
    }
    fn supports_string_literal_backslash_escape(&self) -> bool {
        self.my.supports_string_literal_backslash_escape()
    }
    fn supports_string_literal_concatenation(&self) -> bool {
        self.my.supports_string_literal_concatenation()
    }
    fn ignores_wildcard_escapes(&self) -> bool {
        self.my.ignores_wildcard_escapes()
    }
    fn supports_numeric_prefix(&self) -> bool {
        self.my.supports_numeric_prefix()
    }
    fn supports_literal_prefix_in_qualified_name(&self) -> bool {
        self.my.supports_literal_prefix_in_qualified_name()
    }
    fn supports_bitwise_shift_operators(&self) -> bool {
        self.my.supports_bitwise_shift_operators()
    }
    fn supports_singular_value_keyword(&self) -> bool {
        self.my.supports_singular_value_keyword()
    }
    fn supports_multiline_comment_hints(&self) -> bool {
        self.my.supports_multiline_comment_hints()
    }
    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        if let Some((keyword, op)) = logical_operator(&parser.peek_token_ref().token) {
            // The chain is built here from its first term, which the hook only borrows: a
            // shallow one is copied; a deep one is left to sqlparser one operator at a time,
            // unless a long chain follows it (left-deep it would be too deep to read).
            if shallow(expr) {
                return Some(parse_logical_chain(
                    parser,
                    expr.clone(),
                    keyword,
                    op,
                    precedence,
                ));
            }
            if long_chain_follows(parser, keyword, precedence) {
                self.too_deep.set(true);
                return Some(Err(ParserError::RecursionLimitExceeded));
            }
        }
        self.my.parse_infix(parser, expr, precedence)
    }
    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        self.my.parse_statement(parser)
    }
    fn require_interval_qualifier(&self) -> bool {
        self.my.require_interval_qualifier()
    }
    fn supports_limit_comma(&self) -> bool {
        self.my.supports_limit_comma()
    }
    fn supports_create_table_select(&self) -> bool {
        self.my.supports_create_table_select()
    }
    fn supports_insert_set(&self) -> bool {
        self.my.supports_insert_set()
    }
    fn supports_user_host_grantee(&self) -> bool {
        self.my.supports_user_host_grantee()
    }
    fn is_table_factor_alias(&self, explicit: bool, kw: &Keyword, parser: &mut Parser) -> bool {
        self.my.is_table_factor_alias(explicit, kw, parser)
    }
    fn supports_table_hints(&self) -> bool {
        self.my.supports_table_hints()
    }
    fn requires_single_line_comment_whitespace(&self) -> bool {
        self.my.requires_single_line_comment_whitespace()
    }
    fn supports_hash_comment(&self) -> bool {
        self.my.supports_hash_comment()
    }
    fn supports_match_against(&self) -> bool {
        self.my.supports_match_against()
    }
    fn supports_select_modifiers(&self) -> bool {
        self.my.supports_select_modifiers()
    }
    fn supports_set_names(&self) -> bool {
        self.my.supports_set_names()
    }
    fn supports_comma_separated_set_assignments(&self) -> bool {
        self.my.supports_comma_separated_set_assignments()
    }
    fn supports_alter_column_position(&self) -> bool {
        self.my.supports_alter_column_position()
    }
    fn supports_update_order_by(&self) -> bool {
        self.my.supports_update_order_by()
    }
    fn supports_data_type_signed_suffix(&self) -> bool {
        self.my.supports_data_type_signed_suffix()
    }
    fn supports_data_type_zerofill_suffix(&self) -> bool {
        self.my.supports_data_type_zerofill_suffix()
    }
    fn supports_cross_join_constraint(&self) -> bool {
        self.my.supports_cross_join_constraint()
    }
    fn supports_double_ampersand_operator(&self) -> bool {
        self.my.supports_double_ampersand_operator()
    }
    fn supports_binary_kw_as_cast(&self) -> bool {
        self.my.supports_binary_kw_as_cast()
    }
    fn supports_table_partitions(&self) -> bool {
        self.my.supports_table_partitions()
    }
    fn supports_comment_optimizer_hint(&self) -> bool {
        self.my.supports_comment_optimizer_hint()
    }
    fn supports_constraint_keyword_without_name(&self) -> bool {
        self.my.supports_constraint_keyword_without_name()
    }
    fn supports_key_column_option(&self) -> bool {
        self.my.supports_key_column_option()
    }
    fn supports_group_by_with_modifier(&self) -> bool {
        self.my.supports_group_by_with_modifier()
    }
    fn supports_left_associative_joins_without_parens(&self) -> bool {
        self.my.supports_left_associative_joins_without_parens()
    }
}

/// `AND`, `OR`, `XOR` (`&&` and `||` reach the parser written as `AND` and `OR`).
fn logical_operator(token: &Token) -> Option<(Keyword, BinaryOperator)> {
    match token {
        Token::Word(w) => match w.keyword {
            Keyword::AND => Some((Keyword::AND, BinaryOperator::And)),
            Keyword::OR => Some((Keyword::OR, BinaryOperator::Or)),
            Keyword::XOR => Some((Keyword::XOR, BinaryOperator::Xor)),
            _ => None,
        },
        _ => None,
    }
}

/// At most [`SHALLOW`] expressions and queries deep: copied in a few frames of stack.
fn shallow(e: &Expr) -> bool {
    struct Depth(usize);
    impl Visitor for Depth {
        type Break = ();
        fn pre_visit_expr(&mut self, _: &Expr) -> ControlFlow<()> {
            self.0 += 1;
            if self.0 > SHALLOW {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
        fn post_visit_expr(&mut self, _: &Expr) -> ControlFlow<()> {
            self.0 -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.0 += 4;
            if self.0 > SHALLOW {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
        fn post_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.0 -= 4;
            ControlFlow::Continue(())
        }
    }
    e.visit(&mut Depth(0)).is_continue()
}

const SHALLOW: usize = 64;

/// Whether [`LEFT_DEEP_TERMS`] more terms joined by `keyword` follow (the parser left where
/// it was either way).
fn long_chain_follows(parser: &mut Parser, keyword: Keyword, precedence: u8) -> bool {
    let counted = parser.try_parse(|p| {
        let mut n = 0;
        while n < LEFT_DEEP_TERMS && p.parse_keyword(keyword) {
            p.parse_subexpr(precedence)?;
            n += 1;
        }
        // Always back to where it started.
        Err::<(), _>(ParserError::ParserError(n.to_string()))
    });
    matches!(counted, Err(ParserError::ParserError(n)) if n == LEFT_DEEP_TERMS.to_string())
}

/// `first op b op c ...`: every term of the chain at this precedence, as sqlparser's own loop
/// would read them one by one (each right operand stops at the next operator of this
/// precedence or lower), but gathered, so that a long chain is built balanced.
fn parse_logical_chain(
    parser: &mut Parser,
    first: Expr,
    keyword: Keyword,
    op: BinaryOperator,
    precedence: u8,
) -> Result<Expr, ParserError> {
    let mut terms = vec![first];
    while parser.parse_keyword(keyword) {
        terms.push(parser.parse_subexpr(precedence)?);
    }
    Ok(if terms.len() <= LEFT_DEEP_TERMS {
        let mut terms = terms.into_iter();
        let first = terms.next().expect("the chain's first term");
        terms.fold(first, |left, right| binary(left, op.clone(), right))
    } else {
        balanced(terms, &op)
    })
}

/// The terms joined by `op` in a tree of depth log2(terms) (the order of the terms kept).
fn balanced(mut terms: Vec<Expr>, op: &BinaryOperator) -> Expr {
    if terms.len() == 1 {
        return terms.pop().expect("one term");
    }
    let right = terms.split_off(terms.len() / 2);
    binary(balanced(terms, op), op.clone(), balanced(right, op))
}

fn binary(left: Expr, op: BinaryOperator, right: Expr) -> Expr {
    Expr::BinaryOp {
        left: Box::new(left),
        op,
        right: Box::new(right),
    }
}
